"""The ACME client (`acme:` and a listener's `tls: {acme: [names]}`) against Debian's pebble,
Let's Encrypt's test server, with real tls-alpn-01 validation (RFC 8737): pebble resolves every
name to 127.0.0.1 through pebble-challtestsrv and connects to the gateway's listener. The
certificate served is read with openssl s_client and verified against pebble's CA."""
import os
import re
import signal
import socket
import ssl
import stat
import threading
import time

import pytest

from acmetest import (acme_config, listener_refused, needs_pebble, orders, served_chain, verify,
                      x509)
from origin import text_pattern
from procs import free_port
from gwtest import config_refused

pytestmark = needs_pebble


def h1_over(sock):
    """One HTTP/1.1 request on an open TLS connection, its answer read whole (by its
    Content-Length): the status line."""
    sock.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    want = int(m.group(1)) if m else 0
    while len(body) < want:
        chunk = sock.recv(4096)
        assert chunk, body
        body += chunk
    return head.split(b"\r\n")[0]


def test_self_signed_then_pebble_issued_swapped_live_and_reused_after_restart(
        gateway, pebble, tmp_path):
    port = free_port()
    pb = pebble(port)
    state = tmp_path / "acme"
    g = gateway(acme_config(port, pb.directory, pb.ca, state), wait=[("127.0.0.1", port)])
    # until the order completes: a self-signed certificate for the names
    first = served_chain(port, "a.test")
    assert len(first) == 1
    assert x509(first[0], "-subject").split("=", 1)[1].strip() == \
        x509(first[0], "-issuer").split("=", 1)[1].strip()
    assert "a.test" in x509(first[0], "-ext", "subjectAltName")
    assert "event=acme_waiting names=a.test,b.test" in g.log()
    # a connection made before the swap
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    early = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                            server_hostname="a.test")
    early_cert = early.getpeercert(binary_form=True)
    # a session made with the stand-in (its ticket read with the answer)
    pre = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                          server_hostname="a.test")
    assert h1_over(pre) == b"HTTP/1.1 502 Bad Gateway"
    stand_in_session = pre.session
    pre.close()
    log = g.wait_log("event=acme_certificate_installed", timeout=25)
    assert "event=acme_certificate_installed names=a.test,b.test" in log, log[-4000:]
    assert log.count("event=acme_challenge ") == 2  # one tls-alpn-01 per name
    # new handshakes get pebble's certificate, which chains to pebble's root, for both names
    root = pb.roots()
    inter = pb.intermediates()
    for name in ("a.test", "b.test"):
        chain = served_chain(port, name)
        assert x509(chain[0], "-issuer") == x509(inter, "-subject").replace("subject", "issuer")
        r = verify(tmp_path, chain, root, name)
        assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
    # the connection made before is undisturbed: it still has its certificate and is served
    assert early.getpeercert(binary_form=True) == early_cert
    assert h1_over(early) == b"HTTP/1.1 502 Bad Gateway"
    early.close()
    # each certificate is served in a context of its own, with the listener's session
    # settings: the stand-in's session resumes after the swap, and so does one made after it
    session = stand_in_session
    for _ in range(2):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                            server_hostname="a.test", session=session)
        assert s.session_reused
        assert h1_over(s) == b"HTTP/1.1 502 Bad Gateway"
        s.close()
        fresh = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                server_hostname="a.test")
        assert not fresh.session_reused
        assert fresh.getpeercert(binary_form=True) != early_cert
        assert h1_over(fresh) == b"HTTP/1.1 502 Bad Gateway"
        session = fresh.session
        fresh.close()
    # the state: the folder 0700, the keys 0600
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "account.key").st_mode) == 0o600
    (cert_dir,) = [d for d in state.iterdir() if d.is_dir()]
    assert stat.S_IMODE(os.stat(cert_dir / "key.pem").st_mode) == 0o600
    assert orders(pb, g) == 1
    g.stop()
    # a restart serves the stored certificate at once and orders nothing
    g2 = gateway(acme_config(port, pb.directory, pb.ca, state), wait=[("127.0.0.1", port)])
    chain = served_chain(port, "b.test")
    assert verify(tmp_path, chain, root, "b.test").returncode == 0
    time.sleep(0.5)
    log2 = g2.log()
    assert "event=acme_certificate_stored names=a.test,b.test" in log2
    assert "acme_order_start" not in log2 and "acme_waiting" not in log2
    assert orders(pb, g, g2) == 1


def serial(pem):
    return x509(pem, "-serial").strip()


def test_short_lived_certificate_renewed_and_swapped_under_an_open_connection(
        gateway, pebble, origin, tmp_path):
    """pebble issuing 12-second certificates: with a third of the lifetime left the client
    orders again (acme_renewal_due) and swaps the new certificate in, while a client downloads
    over a connection made on the first certificate (paced by the gateway's response_rate so
    that the download spans the swap): the download ends whole and byte-exact on the first
    certificate, and the connection is served again after the swap."""
    port = free_port()
    pb = pebble(port, validity=12)
    text = acme_config(port, pb.directory, pb.ca, tmp_path / "acme", names=("r.test",),
                       upstream=f"127.0.0.1:{origin.port}")
    g = gateway(text + "throttle: {response_rate: 160KiB/s}\n", wait=[("127.0.0.1", port)])
    g.wait_log("event=acme_certificate_installed", timeout=20)
    first = served_chain(port, "r.test")[0]
    ctx = ssl.create_default_context(cadata=pb.roots() + pb.intermediates())
    ctx.check_hostname = True
    ctx.set_alpn_protocols(["http/1.1"])
    conn = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                           server_hostname="r.test")
    size = 2_000_000  # about 12 s at 160 KiB/s: the renewal comes 8 s after the first issuance
    conn.sendall(f"GET /text/{size} HTTP/1.1\r\nHost: r.test\r\n\r\n".encode())
    got = {}

    def download():
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < size:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        got["data"], got["ended"] = data, time.monotonic()
    t = threading.Thread(target=download)
    t.start()
    log = g.wait_log("attempt=2", timeout=15)
    assert "event=acme_renewal_due names=r.test" in log, log[-3000:]
    deadline = time.monotonic() + 15
    while g.log().count("event=acme_certificate_installed names=r.test") < 2:
        assert time.monotonic() < deadline, g.log()[-3000:]
        time.sleep(0.1)
    swapped = time.monotonic()
    second = served_chain(port, "r.test")[0]
    assert serial(second) != serial(first)
    assert verify(tmp_path, [second, pb.intermediates()], pb.roots(), "r.test").returncode == 0
    t.join(30)
    assert not t.is_alive()
    head, body = got["data"].split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert body == text_pattern(size)
    # the download was still running when the new certificate was installed
    assert got["ended"] > swapped, "the download ended before the swap: pace it slower"
    # the open connection: its certificate unchanged, still served (it was never closed)
    assert ssl.DER_cert_to_PEM_cert(conn.getpeercert(binary_form=True)).split() == first.split()
    assert h1_over(conn) == b"HTTP/1.1 404 Not Found"
    conn.close()
    # the second certificate's own renewal may have started meanwhile (12 s certificates)
    assert g.log().count("event=acme_order_start names=r.test") in (2, 3)
    assert orders(pb, g) == g.log().count("event=acme_order_start names=r.test")


def reload(g, text, generation):
    with open(g.config_path, "w") as f:
        f.write(text)
    g.signal(signal.SIGHUP)
    log = g.wait_log(f"event=reloaded generation={generation}", timeout=10)
    assert f"event=reloaded generation={generation}" in log, log[-3000:]


def test_reload_keeps_the_certificate_and_orders_for_new_names(gateway, pebble, tmp_path):
    """A reload with the same acme setup orders nothing and keeps serving the certificate; a
    reload that adds a name serves the old set's certificate meanwhile (valid for the names it
    had) and orders the new set, served as soon as it is issued."""
    port = free_port()
    pb = pebble(port)
    state = tmp_path / "acme"
    g = gateway(acme_config(port, pb.directory, pb.ca, state, names=("f.test",)),
                wait=[("127.0.0.1", port)])
    g.wait_log("event=acme_certificate_installed", timeout=20)
    reload(g, acme_config(port, pb.directory, pb.ca, state, names=("f.test",)), 2)
    assert verify(tmp_path, served_chain(port, "f.test"), pb.roots(), "f.test").returncode == 0
    assert orders(pb, g) == 1
    reload(g, acme_config(port, pb.directory, pb.ca, state, names=("f.test", "g.test")), 3)
    # while the new set is ordered, f.test still gets its valid certificate (the old set's)
    assert "which covers 1 of them" in g.log()
    assert verify(tmp_path, served_chain(port, "f.test"), pb.roots(), "f.test").returncode == 0
    deadline = time.monotonic() + 20
    while g.log().count("event=acme_certificate_installed") < 2:
        assert time.monotonic() < deadline, g.log()[-3000:]
        time.sleep(0.1)
    for name in ("f.test", "g.test"):
        r = verify(tmp_path, served_chain(port, name), pb.roots(), name)
        assert r.returncode == 0, r.stdout + r.stderr
    assert orders(pb, g) == 2


def test_acme_error_logged_with_detail_and_retried_with_backoff(gateway, pebble, tmp_path):
    """A directory URL the server does not know: 404, logged with the status and the URL, the
    self-signed certificate still served, a new attempt after the backoff (1 to 2 s the first
    time), twice as long the second time."""
    port = free_port()
    pb = pebble(port)
    bad = f"https://127.0.0.1:{pb.port}/no-such-directory"
    g = gateway(acme_config(port, bad, pb.ca, tmp_path / "acme", names=("c.test",)),
                wait=[("127.0.0.1", port)])
    log = g.wait_log("attempt=3", timeout=15)
    fails = re.findall(r"event=acme_order_failed names=c.test state=failed status=(\d+) "
                       r"type=(\S+) detail=\"([^\"]*)\" failures=(\d) retry_in_ms=(\d+)", log)
    assert len(fails) >= 2, log[-3000:]
    assert fails[0][0] == "404" and fails[0][1] == "h2gate:http"
    assert bad in fails[0][2]
    assert 1000 <= int(fails[0][4]) <= 2000 and 2000 <= int(fails[1][4]) <= 4000
    assert "attempt=2" in log and "attempt=3" in log
    chain = served_chain(port, "c.test")
    assert len(chain) == 1 and "c.test" in x509(chain[0], "-subject")


def test_failed_validation_logged_with_the_servers_problem(gateway, pebble, tmp_path):
    """An ACME error (RFC 8555 §6.7): pebble validates on a port where nothing listens, the
    authorization turns invalid, and the log carries the problem's type and detail from the
    challenge; the challenge certificate is withdrawn and the stand-in still served. pebble
    validates at once (PEBBLE_VA_NOSLEEP): the failure may already show in its answer to the
    challenge's POST ("challenge of ... invalid") rather than in the authorization's poll."""
    port = free_port()
    pb = pebble(free_port())
    g = gateway(acme_config(port, pb.directory, pb.ca, tmp_path / "acme", names=("d.test",)),
                wait=[("127.0.0.1", port)])
    log = g.wait_log("event=acme_order_failed", timeout=20)
    m = re.search(r"event=acme_order_failed names=d.test state=failed status=\d+ "
                  r"type=urn:ietf:params:acme:error:(\S+) detail=\"(?:authorization|challenge) of "
                  r"d.test invalid: ([^\"]+)\"", log)
    assert m, log[-3000:]
    # pebble 2.4: unauthorized, "Failed to connect to 127.0.0.1:PORT for the tls-alpn-01 ..."
    assert m.group(1) in ("unauthorized", "connection", "tls"), m.group(0)
    assert "tls-alpn-01" in m.group(2) and "127.0.0.1" in m.group(2), m.group(0)
    chain = served_chain(port, "d.test")
    assert len(chain) == 1 and "d.test" in x509(chain[0], "-subject")


def test_bad_nonce_retried_with_the_new_nonce(gateway, pebble, tmp_path):
    """pebble rejecting 15 % of good nonces with badNonce (three times its default, which every
    other test here runs with): a refused request is sent again with the nonce of the refusal,
    a few times in a row if need be, and the certificate comes with no failed order. An order
    of a dozen requests sees no rejection at all one time in seven: then it is run again from
    an empty state, up to four times."""
    port = free_port()
    pb = pebble(port, env={"PEBBLE_WFE_NONCEREJECT": "15"})
    for attempt in range(4):
        state = tmp_path / f"acme{attempt}"
        g = gateway(acme_config(port, pb.directory, pb.ca, state, names=("e.test",),
                                workers=1), wait=[("127.0.0.1", port)])
        log = g.wait_log("event=acme_certificate_installed", timeout=60)
        assert "event=acme_certificate_installed names=e.test" in log, log[-3000:]
        assert "event=acme_order_failed" not in log, log[-3000:]
        assert verify(tmp_path, served_chain(port, "e.test"), pb.roots(), "e.test").returncode == 0
        g.stop()
        if "event=acme_bad_nonce names=e.test" in log:
            break
    assert "event=acme_bad_nonce names=e.test" in log, log[-3000:]


@pytest.mark.parametrize("text,want", [
    ("acme: {email: ops@a.test}\n", "missing required key 'directory' in acme"),
    ("acme: {directory: ftp://ca.test/dir}\n", "must be an http:// or https:// URL"),
    ("acme: {directory: https://ca.test/dir, email: nobody}\n", "must be an address"),
    ("acme: {directory: https://ca.test/dir, directory_ca: /nonexistent/ca.pem}\n",
     "acme 'directory_ca' file '/nonexistent/ca.pem' cannot be read: No such file"),
])
def test_acme_section_checked_at_load(h2gate_bin, tmp_path, text, want):
    config_refused(h2gate_bin, tmp_path, text, want)


@pytest.mark.parametrize("tls,want", [
    ("{acme: [a.test]}", "tls 'acme' needs the top-level 'acme' section"),
    ("{acme: ['*.a.test']}", "is a wildcard"),
    ("{acme: [10.0.0.1]}", "is an IP address"),
    ("{acme: [a.test, A.TEST]}", "names 'A.TEST' twice"),
    ("{acme: [a.test], certificate: c.pem, key: k.pem}", "tls 'acme' replaces certificate"),
])
def test_listener_acme_names_checked_at_load(h2gate_bin, tmp_path, tls, want):
    listener_refused(h2gate_bin, tmp_path, tls, want)
