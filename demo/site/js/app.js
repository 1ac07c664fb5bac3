// Shows how many resources this page loaded and over which protocol.
window.addEventListener('load', function () {
  var entries = performance.getEntriesByType('resource');
  var protos = {};
  entries.forEach(function (e) { var p = e.nextHopProtocol || '?'; protos[p] = (protos[p] || 0) + 1; });
  var nav = performance.getEntriesByType('navigation')[0];
  var el = document.getElementById('status');
  el.textContent = 'page over ' + (nav ? nav.nextHopProtocol : '?') + '; ' + entries.length +
    ' assets: ' + JSON.stringify(protos) + '; scripts run: ' + (window.h2gateDemo || []).length;
  el.setAttribute('data-assets', String(entries.length));
});
