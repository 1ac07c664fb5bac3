"""Running the ACME client: when it orders (acme.renew_before, the hourly cap
acme.max_orders_per_hour), what it shows on /metrics (parsed by python3-prometheus-client), and
an ACME server down at start. Against Debian's pebble 2.4.0 with its default nonce rejection (5 %
of good nonces refused); pebble 2.4.0 offers no ARI (RFC 9773: no renewalInfo in its directory),
which the client says once and renews by renew_before; ARI itself is tested with scripted
answers in tests/unit/test_acme_renew.c."""
import calendar
import re
import subprocess
import time

import pytest

from gwtest import config_refused, sample, scrape
from procs import Pebble, free_port
from test_acme import orders, served_chain, verify, x509

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v pebble && command -v pebble-challtestsrv"],
                   capture_output=True).returncode != 0,
    reason="pebble is not installed (scripts/setup installs it)")


@pytest.fixture
def pebble():
    started = []

    def start(tls_port, **kw):
        p = Pebble(tls_port, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def ops_config(port, directory, ca, state, names, admin, acme_extra=""):
    return f"""workers: 2
log_level: info
acme:
  directory: {directory}
  directory_ca: {ca}
  state: {state}
{acme_extra}admin:
  address: 127.0.0.1:{admin}
listen:
  - address: 127.0.0.1:{port}
    tls: {{acme: [{", ".join(names)}]}}
upstreams:
  app:
    servers: [127.0.0.1:9]
    health: {{fail_threshold: 1000}}
routes:
  - {{ host: '*', path: /, upstream: app }}
"""


def not_after(pem, which="-enddate"):
    """The leaf's notAfter (or notBefore with -startdate) as a Unix time."""
    text = x509(pem, which).strip().split("=", 1)[1]
    return calendar.timegm(time.strptime(text, "%b %d %H:%M:%S %Y GMT"))


def expiry(fams, name):
    """h2gate_tls_certificate_expiry_seconds{name=...} (a label sample() cannot take)."""
    found = [s.value for s in fams["h2gate_tls_certificate_expiry_seconds"].samples
             if s.labels == {"name": name}]
    assert len(found) == 1, fams["h2gate_tls_certificate_expiry_seconds"].samples
    return found[0]


def wait_for(g, what, timeout):
    deadline = time.monotonic() + timeout
    while not what(g.log()):
        assert time.monotonic() < deadline, g.log()[-4000:]
        time.sleep(0.1)
    return g.log()


def test_acme_server_down_at_start_self_signed_then_issued_without_restart(
        gateway, pebble, tmp_path):
    """Nothing listens where the directory is: the listener serves the self-signed stand-in,
    each failed attempt is logged with its transport reason and a doubling backoff, counted
    as a failed order, and the stand-in's expiry is on /metrics. Then pebble starts on that
    port and the certificate arrives in the same process, no restart, no reload."""
    port, acme_port, admin = free_port(), free_port(), free_port()
    crt, key = Pebble.make_tls(str(tmp_path))
    directory = f"https://127.0.0.1:{acme_port}/dir"
    g = gateway(ops_config(port, directory, crt, tmp_path / "acme", ["o.test"], admin),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    log = wait_for(g, lambda t: t.count("event=acme_order_failed") >= 2, 15)
    fails = re.findall(r"event=acme_order_failed names=o.test state=\S+ status=0 "
                       r"type=h2gate:transport detail=\"([^\"]*)\" failures=(\d) "
                       r"retry_in_ms=(\d+)", log)
    assert len(fails) >= 2, log[-3000:]
    assert f"127.0.0.1:{acme_port}" in fails[0][0] or directory in fails[0][0], fails[0]
    assert 1000 <= int(fails[0][2]) <= 2000 and 2000 <= int(fails[1][2]) <= 4000, fails
    assert "event=acme_waiting names=o.test" in log
    # the stand-in is served, and its expiry (30 days) is what /metrics shows for the name
    chain = served_chain(port, "o.test")
    assert len(chain) == 1
    assert x509(chain[0], "-subject").split("=", 1)[1].strip() == \
        x509(chain[0], "-issuer").split("=", 1)[1].strip()
    fams, _ = scrape(admin)
    stand_in = expiry(fams, "o.test")
    assert stand_in == not_after(chain[0])
    assert abs(stand_in - (time.time() + 30 * 86400)) < 86400
    assert sample(fams, "h2gate_acme_orders_total", result="failed") >= 2
    assert sample(fams, "h2gate_acme_orders_total", result="issued") == 0
    assert sample(fams, "h2gate_acme_renewal_failures_total") == 0
    # the server comes up where the gateway looks: the next attempt gets the certificate
    pid = g.proc.pid
    pb = pebble(port, port=acme_port, tls=(crt, key))
    log = g.wait_log("event=acme_certificate_installed", timeout=45)
    assert "event=acme_certificate_installed names=o.test" in log, log[-3000:]
    assert g.proc.poll() is None and g.proc.pid == pid and "event=reloaded" not in log
    chain = served_chain(port, "o.test")
    r = verify(tmp_path, chain, pb.roots(), "o.test")
    assert r.returncode == 0, r.stdout + r.stderr
    fams, _ = scrape(admin)
    assert expiry(fams, "o.test") == \
        not_after(chain[0])
    assert sample(fams, "h2gate_acme_orders_total", result="issued") == 1
    assert orders(pb, g) == 1
    # the failures before pebble came were transport failures, not the hourly cap's business
    assert "event=acme_order_deferred" not in log


def test_failed_renewal_keeps_the_certificate_and_is_counted(gateway, pebble, tmp_path):
    """renew_before: 50% of a 12-second certificate: due 6 s before its end (by=renew_before,
    since pebble offers no ARI, which is logged once). pebble is gone by then: the renewal
    fails, the certificate stays served, and /metrics counts a renewal failure."""
    port, admin = free_port(), free_port()
    pb = pebble(port, validity=12)
    g = gateway(ops_config(port, pb.directory, pb.ca, tmp_path / "acme", ["m.test"], admin,
                           "  renew_before: 50%\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.wait_log("event=acme_certificate_installed", timeout=25)
    leaf = served_chain(port, "m.test")[0]
    pb.stop()
    log = wait_for(g, lambda t: "event=acme_order_failed" in t, 20)
    na, nb = not_after(leaf), not_after(leaf, "-startdate")
    due = re.search(r"event=acme_renewal_due names=m.test not_after=(\d+) renew_at=(\d+) "
                    r"by=(\S+)", log)
    assert due, log[-3000:]
    assert int(due.group(1)) == na
    assert int(due.group(2)) == na - (na - nb) * 50 // 100
    assert due.group(3) == "renew_before"
    assert log.count("event=acme_ari_unsupported") == 1
    # the old certificate is still served, and still what /metrics shows
    assert served_chain(port, "m.test")[0].split() == leaf.split()
    fams, _ = scrape(admin)
    assert expiry(fams, "m.test") == na
    assert sample(fams, "h2gate_acme_orders_total", result="issued") == 1
    failed = sample(fams, "h2gate_acme_orders_total", result="failed")
    assert failed >= 1
    assert sample(fams, "h2gate_acme_renewal_failures_total") == failed


def test_renew_before_past_the_lifetime_renews_at_half(gateway, pebble, tmp_path):
    """renew_before: 30d against 12-second certificates: known only once a certificate is
    issued, so it is logged (acme_renew_before_too_long) and the renewal comes at half the
    lifetime; the new certificate is installed."""
    port, admin = free_port(), free_port()
    pb = pebble(port, validity=12)
    g = gateway(ops_config(port, pb.directory, pb.ca, tmp_path / "acme", ["h.test"], admin,
                           "  renew_before: 30d\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    log = g.wait_log("event=acme_renewal_due", timeout=30)
    m = re.search(r"event=acme_renew_before_too_long names=h.test renew_before_s=2592000 "
                  r"lifetime_s=(\d+) renew_at=(\d+)", log)
    assert m, log[-3000:]
    due = re.search(r"event=acme_renewal_due names=h.test not_after=(\d+) renew_at=(\d+) "
                    r"by=renew_before", log)
    assert due, log[-3000:]
    lifetime, na = int(m.group(1)), int(due.group(1))
    assert 11 <= lifetime <= 13
    assert int(due.group(2)) == int(m.group(2)) == na - lifetime // 2
    wait_for(g, lambda t: t.count("event=acme_certificate_installed names=h.test") >= 2, 20)


def test_hourly_cap_defers_the_third_order(gateway, pebble, tmp_path):
    """max_orders_per_hour: 2 and a validation that always fails (pebble validates on a port
    where nothing listens): two orders reach pebble 2 and 4 s apart (the backoff), the third
    is held back until an hour after the first (event=acme_order_deferred), and none is
    made meanwhile."""
    port, admin = free_port(), free_port()
    pb = pebble(free_port())
    g = gateway(ops_config(port, pb.directory, pb.ca, tmp_path / "acme", ["q.test"], admin,
                           "  max_orders_per_hour: 2\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    t0 = time.monotonic()
    log = g.wait_log("event=acme_order_deferred", timeout=30)
    elapsed_ms = (time.monotonic() - t0) * 1000
    m = re.search(r"event=acme_order_deferred names=q.test reason=\"2 orders in the last hour "
                  r"\(acme.max_orders_per_hour\)\" retry_in_ms=(\d+)", log)
    assert m, log[-3000:]
    assert 3600000 - elapsed_ms - 2000 <= int(m.group(1)) <= 3600000, (m.group(0), elapsed_ms)
    assert log.count("event=acme_order_start names=q.test") == 2
    assert log.count("event=acme_order_failed names=q.test") == 2
    time.sleep(3)
    assert g.log().count("event=acme_order_start names=q.test") == 2
    assert orders(pb, g) == 2
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_acme_orders_total", result="failed") == 2
    # the stand-in is still served
    chain = served_chain(port, "q.test")
    assert len(chain) == 1 and "q.test" in x509(chain[0], "-subject")


@pytest.mark.parametrize("text,want", [
    ("acme: {directory: https://ca.test/dir, renew_before: 0s}\n",
     "acme 'renew_before' must be a duration from 1s to 398d (30d, 12h) or a share of the "
     "lifetime from 1% to 99% (33%), not '0s'"),
    ("acme: {directory: https://ca.test/dir, renew_before: 400d}\n", "not '400d'"),
    ("acme: {directory: https://ca.test/dir, renew_before: 100%}\n", "not '100%'"),
    ("acme: {directory: https://ca.test/dir, renew_before: 0%}\n", "not '0%'"),
    ("acme: {directory: https://ca.test/dir, renew_before: 3.5%}\n", "not '3.5%'"),
    ("acme: {directory: https://ca.test/dir, renew_before: soon}\n", "not 'soon'"),
    ("acme: {directory: https://ca.test/dir, renew_before: [30d]}\n", "(33%), not a list"),
    ("acme: {directory: https://ca.test/dir, max_orders_per_hour: 0}\n",
     "'max_orders_per_hour' is out of range: 0 (allowed 1..60)"),
    ("acme: {directory: https://ca.test/dir, max_orders_per_hour: 61}\n",
     "'max_orders_per_hour' is out of range: 61 (allowed 1..60)"),
])
def test_renewal_keys_checked_at_load(h2gate_bin, tmp_path, text, want):
    config_refused(h2gate_bin, tmp_path, text, want)


@pytest.mark.parametrize("value", ["30d", "12h", "90s", "33%", "1%", "99%", "398d"])
def test_renew_before_forms_accepted(h2gate_bin, tmp_path, value):
    from gwtest import check_config, gw_config
    text = gw_config(free_port(), ["127.0.0.1:9"]) + \
        f"acme: {{directory: https://ca.test/dir, renew_before: '{value}', " \
        "max_orders_per_hour: 60}\n"
    r = check_config(h2gate_bin, tmp_path, text)
    assert r.returncode == 0, r.stderr
