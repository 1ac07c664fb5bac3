"""Running the ACME client: when it orders (acme.renew_before, the hourly cap
acme.max_orders_per_hour), what it shows on /metrics (parsed by python3-prometheus-client), and
an ACME server down at start. Against Debian's pebble 2.4.0 with its default nonce rejection (5 %
of good nonces refused). pebble 2.4.0 offers no ARI (RFC 9773: no renewalInfo in its
directory), which the client says once and renews by renew_before; ARI is tested through
AriFront, an HTTPS front of pebble that adds renewalInfo and answers it as a test says, and with
scripted answers in tests/unit/test_acme_renew.c."""
import base64
import calendar
import http.client
import http.server
import json
import os
import re
import ssl
import stat
import threading
import time

import pytest

from gwtest import config_refused, sample, scrape
from procs import Pebble, free_port
from acmetest import acme_config, needs_pebble, orders, served_chain, verify, x509

pytestmark = needs_pebble


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


class AriFront:
    """pebble behind an HTTPS front (pebble's own pair) that adds ARI: the directory gains
    `renewalInfo`, answered here with answer(cert_id) -> (status, body, retry_after); every
    other request is relayed to pebble with its Host kept, and pebble builds its URLs from the
    Host it is given, so they all stay on the front's origin. `asked` lists the certIDs;
    `orders` the newOrder payloads (JSON) with the status answered; refuse(payload) -> a problem
    type makes the front answer that newOrder 409 with it (pebble's nonce kept)."""

    def __init__(self, pb, crt, key, answer, refuse=lambda payload: None):
        self.pb, self.answer, self.asked = pb, answer, []
        self.refuse, self.orders = refuse, []
        self.ctx = ssl.create_default_context(cafile=crt)
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, status, headers, body):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def relay(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                self.sent = body
                c = http.client.HTTPSConnection("127.0.0.1", front.pb.port, context=front.ctx,
                                                timeout=10)
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() in ("host", "content-type", "accept", "user-agent")}
                c.request(self.command, self.path, body=body, headers=hdrs)
                r = c.getresponse()
                data = r.read()
                keep = [(k, v) for k, v in r.getheaders()
                        if k.lower() in ("replay-nonce", "location", "retry-after", "link",
                                         "content-type", "cache-control")]
                c.close()
                return r.status, keep, data

            def handle_one(self):
                if self.path.startswith("/renewal-info/"):
                    cid = self.path[len("/renewal-info/"):]
                    front.asked.append(cid)
                    status, body, retry = front.answer(cid)
                    hdrs = [("Content-Type", "application/json")]
                    if retry:
                        hdrs.append(("Retry-After", retry))
                    self.reply(status, hdrs, body.encode())
                    return
                status, hdrs, data = self.relay()
                if self.path == "/order-plz" and self.command == "POST":
                    payload = json.loads(b64d(json.loads(self.sent)["payload"]))
                    problem = front.refuse(payload) if status == 201 else None
                    if problem:
                        status, data = 409, json.dumps({"type": problem, "status": 409,
                                                        "detail": "refused by the test"}).encode()
                        hdrs = [(k, v) for k, v in hdrs if k.lower() == "replay-nonce"]
                        hdrs.append(("Content-Type", "application/problem+json"))
                    front.orders.append((payload, status))
                if self.path == "/dir" and status == 200:
                    d = json.loads(data)
                    d["renewalInfo"] = f"https://127.0.0.1:{front.port}/renewal-info"
                    data = json.dumps(d).encode()
                self.reply(status, hdrs, data)

            do_GET = do_HEAD = do_POST = handle_one

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(crt, key)
        self.server.socket = sctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.directory = f"https://127.0.0.1:{self.port}/dir"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def cert_id(pem):
    """RFC 9773 §4.1 for a PEM certificate, computed independently with python3-cryptography:
    base64url(AKI keyIdentifier) "." base64url(the serial's DER content octets)."""
    from cryptography import x509 as cx
    c = cx.load_pem_x509_certificate(pem.encode())
    kid = c.extensions.get_extension_for_class(cx.AuthorityKeyIdentifier).value.key_identifier
    n = c.serial_number
    serial = n.to_bytes(n.bit_length() // 8 + 1, "big")  # a leading 0 when the top bit is set

    def b64(b):
        return base64.urlsafe_b64encode(b).decode().rstrip("=")
    return f"{b64(kid)}.{b64(serial)}"


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@pytest.fixture
def ari_front():
    started = []

    def start(*args):
        f = AriFront(*args)
        started.append(f)
        return f

    yield start
    for f in started:
        f.stop()


def test_ari_window_drives_the_renewal(gateway, pebble, ari_front, tmp_path):
    """A server offering ARI: right after issuance the client asks renewalInfo about the
    certificate (by its RFC 9773 certID), renews at a time it drew inside the suggested window
    (seconds away, while renew_before's third of a one-hour lifetime is 40 minutes away), takes
    Retry-After bounded to a minute, and asks about the new certificate in turn."""
    port, admin = free_port(), free_port()
    crt, key = Pebble.make_tls(str(tmp_path))
    pb = pebble(port, validity=3600, tls=(crt, key))
    windows = {}

    def answer(cid):
        if cid not in windows:  # the first question about a certificate: 2 to 5 s from now
            windows[cid] = (int(time.time()) + 2, int(time.time()) + 5)
        start, end = windows[cid]
        body = {"suggestedWindow": {"start": rfc3339(start), "end": rfc3339(end)},
                "explanationURL": "https://ca.test/ari"}
        return 200, json.dumps(body), "1"

    front = ari_front(pb, crt, key, answer)
    g = gateway(acme_config(port, front.directory, crt, tmp_path / "acme",
                            names=["w.test"], admin=admin),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    log = g.wait_log("event=acme_certificate_installed", timeout=25)
    first = served_chain(port, "w.test")[0]
    log = wait_for(g, lambda t: "event=acme_renewal_due" in t, 20)
    cid = cert_id(first)
    assert front.asked[0] == cid, (front.asked, cid)
    m = re.search(r"event=acme_ari_window names=w.test cert_id=(\S+) start=(\d+) end=(\d+) "
                  r"renew_at=(\d+) retry_in_s=(\d+) explanation=\"https://ca.test/ari\"", log)
    assert m, log[-3000:]
    assert m.group(1) == cid
    start, end, renew_at = int(m.group(2)), int(m.group(3)), int(m.group(4))
    assert (start, end) == windows[cid] and start <= renew_at < end
    assert m.group(5) == "60"  # Retry-After: 1, bounded to a minute
    due = re.search(r"event=acme_renewal_due names=w.test not_after=(\d+) renew_at=(\d+) "
                    r"by=(\S+)", log)
    assert due and int(due.group(2)) == renew_at and due.group(3) == "ari", log[-3000:]
    assert int(due.group(1)) == not_after(first)
    log = wait_for(g, lambda t: t.count("event=acme_certificate_installed names=w.test") >= 2, 20)
    second = served_chain(port, "w.test")[0]
    assert cert_id(second) != cid
    wait_for(g, lambda t: t.count("event=acme_ari_window names=w.test") >= 2, 10)
    assert front.asked.count(cid) == 1 and cert_id(second) in front.asked
    assert "acme_ari_unsupported" not in g.log() and "acme_ari_failed" not in g.log()
    # RFC 9773 §5: the renewal's newOrder names the certificate it replaces, the first none
    taken = [p for p, status in front.orders if status == 201]
    assert len(taken) >= 2 and "replaces" not in taken[0], front.orders
    assert taken[1]["replaces"] == cid, front.orders
    assert f"event=acme_order_start names=w.test directory={front.directory} attempt=2 " \
        f"replaces={cid}" in g.log()


def test_ari_window_drives_the_renewal_in_a_cluster(gateway, pebble, ari_front, redis_server,
                                                    tmp_path):
    """With `cluster:` the renewal due by ARI's window goes through Redis (the stored
    certificate read first): the certificate stored there is the one ARI says to renew, so it
    is not taken as fresh (by renew_before's 40 minutes away) but ordered anew, with replaces;
    and the new one is asked about at once."""
    port, admin = free_port(), free_port()
    crt, key = Pebble.make_tls(str(tmp_path))
    pb = pebble(port, validity=3600, tls=(crt, key))
    r = redis_server()
    windows = {}

    def answer(cid):
        if cid not in windows:
            windows[cid] = (int(time.time()) + 2, int(time.time()) + 4)
        start, end = windows[cid]
        return 200, json.dumps({"suggestedWindow": {"start": rfc3339(start),
                                                    "end": rfc3339(end)}}), "3600"

    front = ari_front(pb, crt, key, answer)
    shared = tmp_path / "shared.key"
    shared.write_bytes(base64.b64encode(os.urandom(32)) + b"\n")
    os.chmod(shared, 0o600)
    text = acme_config(port, front.directory, crt, tmp_path / "acme", names=["k.test"],
                       admin=admin, shared_key=shared, redis=r.port)
    g = gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.wait_log("event=acme_certificate_installed", timeout=40)
    cid = cert_id(served_chain(port, "k.test")[0])
    log = wait_for(g, lambda t: t.count("event=acme_cluster_stored") >= 2
                   or "event=acme_cluster_pickup" in t, 45)
    assert re.search(r"event=acme_renewal_due names=k.test not_after=\d+ renew_at=\d+ by=ari",
                     log), log[-3000:]
    assert "event=acme_cluster_pickup" not in log, log[-3000:]
    assert log.count("event=acme_order_start") == 2
    second = served_chain(port, "k.test")[0]
    assert cert_id(second) != cid
    taken = [p for p, status in front.orders if status == 201]
    assert taken[-1].get("replaces") == cid, front.orders
    wait_for(g, lambda t: cert_id(second) in front.asked, 10)


def test_ari_replaces_refused_the_renewal_orders_again_without_it(gateway, pebble, ari_front,
                                                                  tmp_path):
    """The renewal's newOrder names the old certificate (replaces, RFC 9773 §5) and the server
    refuses it (409 alreadyReplaced, as for a certificate another order replaced): the client
    logs it and sends newOrder again without replaces in the same order, which is issued."""
    port, admin = free_port(), free_port()
    crt, key = Pebble.make_tls(str(tmp_path))
    pb = pebble(port, validity=3600, tls=(crt, key))
    soon = int(time.time()) + 2
    first = []

    def answer(cid):
        # the first certificate is due at once; its renewal is not (a day ahead): one renewal,
        # whose newOrder is refused once and sent again (the renewal's own window in the past
        # would start a third order while the test reads the log)
        first[:] = first or [cid]
        start = soon if cid == first[0] else soon + 86400
        body = {"suggestedWindow": {"start": rfc3339(start), "end": rfc3339(start + 2)}}
        return 200, json.dumps(body), "3600"

    def refuse(payload):
        return "urn:ietf:params:acme:error:alreadyReplaced" if "replaces" in payload else None

    front = ari_front(pb, crt, key, answer, refuse)
    g = gateway(acme_config(port, front.directory, crt, tmp_path / "acme",
                            names=["x.test"], admin=admin),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.wait_log("event=acme_certificate_installed", timeout=25)
    cid = cert_id(served_chain(port, "x.test")[0])
    log = wait_for(g, lambda t: t.count("event=acme_certificate_installed names=x.test") >= 2, 30)
    assert re.search(r"event=acme_ari_replaces_refused names=x.test status=409 "
                     r"type=urn:ietf:params:acme:error:alreadyReplaced", log), log[-3000:]
    assert log.count("event=acme_order_start") == 2  # one order: newOrder sent again in it
    assert "event=acme_order_failed" not in log
    refused = [p for p, status in front.orders if status == 409]
    assert refused and all(p["replaces"] == cid for p in refused), front.orders
    taken = [p for p, status in front.orders if status == 201]
    assert len(taken) == 2 and not any("replaces" in p for p in taken), front.orders
    assert cert_id(served_chain(port, "x.test")[0]) != cid


def test_ari_failure_falls_back_to_renew_before(gateway, pebble, ari_front, tmp_path):
    """renewalInfo answering 500 about the first certificate, then a window whose end is before
    its start about the second: each failure is logged with its reason and a backoff, and the
    renewal follows renew_before (a third of a 12-second lifetime)."""
    port, admin = free_port(), free_port()
    crt, key = Pebble.make_tls(str(tmp_path))
    pb = pebble(port, validity=12, tls=(crt, key))
    bad = json.dumps({"suggestedWindow": {"start": rfc3339(time.time() + 9),
                                          "end": rfc3339(time.time() + 5)}})
    answers = iter([(500, "{}", None)])
    front = ari_front(pb, crt, key, lambda cid: next(answers, (200, bad, "60")))
    g = gateway(acme_config(port, front.directory, crt, tmp_path / "acme",
                            names=["f.test"], admin=admin),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.wait_log("event=acme_certificate_installed", timeout=25)
    log = wait_for(g, lambda t: "event=acme_renewal_due" in t, 20)
    fails = re.findall(r"event=acme_ari_failed names=f.test cert_id=\S+ reason=\"([^\"]*)\" "
                       r"failures=(\d+) retry_in_s=(\d+) fallback=renew_before", log)
    assert fails and fails[0][0] == "renewalInfo answered 500", log[-3000:]
    assert (fails[0][1], fails[0][2]) == ("1", "60")
    assert re.search(r"event=acme_renewal_due names=f.test not_after=\d+ renew_at=\d+ "
                     r"by=renew_before", log), log[-3000:]
    # the renewed certificate is asked about at once: a malformed window (RFC 9773 §4.2)
    log = wait_for(g, lambda t: t.count("event=acme_ari_failed names=f.test") >= 2, 25)
    fails = re.findall(r"event=acme_ari_failed names=f.test cert_id=(\S+) reason=\"([^\"]*)\" "
                       r"failures=(\d+)", log)
    assert fails[1][0] != fails[0][0] and fails[1][2] == "1", fails
    assert "suggestedWindow whose end is after its start" in fails[1][1], fails
    assert len(front.asked) == 2


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
    g = gateway(acme_config(port, directory, crt, tmp_path / "acme",
                            names=["o.test"], admin=admin),
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
    g = gateway(acme_config(port, pb.directory, pb.ca, tmp_path / "acme",
                            names=["m.test"], admin=admin, acme_extra="  renew_before: 50%\n"),
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
    g = gateway(acme_config(port, pb.directory, pb.ca, tmp_path / "acme",
                            names=["h.test"], admin=admin, acme_extra="  renew_before: 30d\n"),
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
    made meanwhile. The count is kept in the name set's folder: a restart (a crash loop) holds
    the next order back at once."""
    port, admin = free_port(), free_port()
    pb = pebble(free_port())
    g = gateway(acme_config(port, pb.directory, pb.ca, tmp_path / "acme",
                            names=["q.test"], admin=admin, acme_extra="  max_orders_per_hour: 2\n"),
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
    g.stop()
    (folder,) = [d for d in (tmp_path / "acme").iterdir() if d.is_dir()]
    assert stat.S_IMODE(os.stat(folder / "orders").st_mode) == 0o600
    assert len((folder / "orders").read_text().split()) == 2
    g2 = gateway(acme_config(port, pb.directory, pb.ca, tmp_path / "acme", names=["q.test"],
                             admin=admin, acme_extra="  max_orders_per_hour: 2\n"),
                 wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    log2 = g2.wait_log("event=acme_order_deferred", timeout=10)
    m = re.search(r"event=acme_order_deferred names=q.test reason=\"2 orders in the last hour "
                  r"\(acme.max_orders_per_hour\)\" retry_in_ms=(\d+)", log2)
    assert m and int(m.group(1)) > 3600000 - 120000, log2[-3000:]
    time.sleep(1)
    assert "event=acme_order_start" not in g2.log()
    assert orders(pb, g, g2) == 2


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
