"""HTTPS origins (`tls: true` upstreams with certificate verification and SNI).

The origins are independent TLS servers: nginx with its ssl module, and the scripted origin of
origin.py wrapped in Python's ssl module (which records the SNI name, the ALPN protocol,
session resumption, and whether each connection ended with a close_notify). A throw-away CA and
certificates are made with the openssl command line in the test's tmp dir."""
import hashlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

from procs import Nginx, factory, free_port, run, slow
from origin import ScriptedOrigin, pattern
from gwtest import Fetcher


# ---- certificates --------------------------------------------------------------------------------

def _openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def _make_ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_leaf(d, name, ca, san):
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-set_serial", str(abs(hash(name)) % 10**9 + 1), "-days", "2", "-out", f"{name}.pem",
             "-extfile", f"{name}.ext", cwd=d)


class Certs:
    def __init__(self, d):
        self.dir = d
        _make_ca(d, "ca")
        _make_ca(d, "otherca")
        _make_leaf(d, "good", "ca", "DNS:localhost,IP:127.0.0.1")         # right names, our CA
        _make_leaf(d, "unknown", "otherca", "DNS:localhost,IP:127.0.0.1")  # right names, other CA
        _make_leaf(d, "wrong", "ca", "DNS:wrong.example,IP:10.9.9.9")     # our CA, other names
        self.ca = os.path.join(d, "ca.pem")

    def pair(self, name):
        return os.path.join(self.dir, f"{name}.pem"), os.path.join(self.dir, f"{name}.key")


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="h2gate-back-tls-")
    try:
        yield Certs(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- origins -------------------------------------------------------------------------------------

class _Tracked:
    """The TLS socket as the scripted origin sees it; records how the peer ended it."""

    def __init__(self, s, origin):
        self.s, self.o = s, origin
        self.ragged = False  # close with a bare TCP FIN instead of close_notify first

    def recv(self, n):
        try:
            d = self.s.recv(n)
        except ssl.SSLEOFError:  # TCP FIN without close_notify (suppress_ragged_eofs=False)
            with self.o.lock:
                self.o.ragged_closes += 1
            return b""
        if not d:
            with self.o.lock:
                self.o.clean_closes += 1  # close_notify, then EOF
        return d

    def sendall(self, b):
        self.s.sendall(b)

    def close(self):
        if not self.ragged:
            try:  # close_notify (RFC 8446 §6.1); the gateway may have closed already
                self.s.settimeout(2)
                self.s.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass
        self.s.close()


class TLSOrigin(ScriptedOrigin):
    """origin.py's scripted origin behind Python's ssl (OpenSSL server side)."""

    def __init__(self, cert, key, host="127.0.0.1"):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["http/1.1"])
        self.ctx.sni_callback = self._on_sni
        self.sni, self.alpn, self.resumed, self.versions, self.tls_errors = [], [], [], [], []
        self.clean_closes = self.ragged_closes = 0
        super().__init__(host)

    def _on_sni(self, sslobj, name, ctx):
        with self.lock:
            self.sni.append(name)

    def _serve(self, c):
        c.settimeout(10)
        try:
            s = self.ctx.wrap_socket(c, server_side=True, suppress_ragged_eofs=False)
        except (ssl.SSLError, OSError) as e:
            with self.lock:
                self.tls_errors.append(str(e))
                self.open_connections -= 1
            c.close()
            return
        s.settimeout(None)
        with self.lock:
            self.alpn.append(s.selected_alpn_protocol())
            self.resumed.append(s.session_reused)
            self.versions.append(s.version())
            self._clients.append(s)
        super()._serve(_Tracked(s, self))


class TLSNginx(Nginx):
    """nginx with `listen ... ssl` (Debian's nginx has the ssl module)."""

    def __init__(self, root, cert, key, extra=""):
        super().__init__(root, extra, cert=cert, key=key)


@pytest.fixture
def tls_origin(certs):
    """Factory: tls_origin(cert_name="good") -> TLSOrigin; closed at teardown."""
    yield from factory(lambda name="good": TLSOrigin(*certs.pair(name)), TLSOrigin.close)


@pytest.fixture
def tls_nginx(certs, tmp_path):
    yield from factory(lambda root, extra="": TLSNginx(root, *certs.pair("good"), extra=extra),
                       TLSNginx.stop)


# ---- gateway -------------------------------------------------------------------------------------

def gw_config(port, servers, tls_lines, upstream_extra="", log_level="info"):
    # coalescing off: identical concurrent GETs must each reach the origin
    text = (f"workers: 1\nlog_level: {log_level}\nlisten:\n  - address: 127.0.0.1:{port}\n"
            f"upstreams:\n  app:\n    servers: [{', '.join(servers)}]\n    tls: true\n")
    for line in (tls_lines + "\n" + upstream_extra).splitlines():
        if line.strip():
            text += f"    {line}\n"
    return text + "routes:\n  - host: '*'\n    path: /\n    upstream: app\n    coalesce: false\n"


def start_gw(gateway, servers, tls_lines, upstream_extra="", log_level="info"):
    port = free_port()
    g = gateway(gw_config(port, servers, tls_lines, upstream_extra, log_level),
                wait=[("127.0.0.1", port)])
    g.port = port
    return g


def curl(*args, timeout=60):
    return run(["curl", "-sS", "--max-time", "50", *args], timeout=timeout)


def get(g, path, *extra):
    """(status, body bytes) of one GET through the gateway (h2c)."""
    p = subprocess.run(["curl", "-sS", "--max-time", "50", "--http2-prior-knowledge",
                        "-o", "-", "-w", "\n%{http_code}", *extra, f"http://127.0.0.1:{g.port}{path}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code or 0), body


# ---- the happy paths -----------------------------------------------------------------------------

@pytest.mark.serial
def test_get_from_nginx_https_origin_with_keep_alive(gateway, tls_nginx, certs, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_bytes(b"<h1>over tls</h1>\n")
    (site / "big.bin").write_bytes(pattern(1 << 20))
    n = tls_nginx(str(site))
    g = start_gw(gateway, [f"127.0.0.1:{n.port}"], f"tls_ca: {certs.ca}", "max_connections: 2")
    st, body = get(g, "/index.html")
    assert st == 200 and body == b"<h1>over tls</h1>\n", g.log()[-2000:]
    # 300 requests, 10 in flight at a time: the origin sees at most max_connections TLS
    # connections, i.e. they are reused.
    r = run(["h2load", "-n", "300", "-c", "1", "-m", "10", f"http://127.0.0.1:{g.port}/index.html"],
            timeout=120)
    assert "300 succeeded" in r.stdout and "300 2xx" in r.stdout, r.stdout
    deadline = time.monotonic() + slow(5)  # nginx logs each request after its response
    while n.requests() < 301 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert n.requests() == 301
    assert 1 <= n.connections() <= 2
    st, body = get(g, "/big.bin")
    assert st == 200 and hashlib.sha1(body).hexdigest() == hashlib.sha1(pattern(1 << 20)).hexdigest()


def test_pipelining_over_tls(gateway, tls_nginx, certs, tmp_path):
    """upstream pipeline over TLS: answers decrypted from one record stream are split between
    the pipelined requests at the right byte; each body is its own file's."""
    site = tmp_path / "site"
    site.mkdir()
    files = {f"/p{i}.bin": pattern(100 + 997 * i) for i in range(40)}
    for path, body in files.items():
        (site / path[1:]).write_bytes(body)
    n = tls_nginx(str(site))
    g = start_gw(gateway, [f"127.0.0.1:{n.port}"], f"tls_ca: {certs.ca}",
                 "max_connections: 2\npipeline: 8")
    f = Fetcher(g.port)
    paths = sorted(files)
    for k in range(3):
        reqs = [("GET", paths[(k * 7 + i) % len(paths)]) for i in range(60)]
        for (_, path), (status, _, body) in zip(reqs, f.fetch(reqs)):
            assert status == 200 and body == files[path], (path, status, len(body))
    f.close()
    deadline = time.monotonic() + slow(5)  # nginx logs each request after its response
    while n.requests() < 180 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert n.connections() <= 2
    assert n.pipelined() >= 60, n.pipelined()


def test_sni_alpn_and_dns_name_verification(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}")
    st, body = get(g, "/bytes/100")
    assert st == 200 and body == pattern(100), g.log()[-2000:]
    assert o.sni == ["localhost"]          # RFC 6066 §3 server_name = the server's host
    assert o.alpn == ["http/1.1"]          # RFC 7301: we offer http/1.1 only
    assert o.versions[0] in ("TLSv1.2", "TLSv1.3")


def test_ip_literal_server_sends_no_sni_and_checks_ip_san(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"127.0.0.1:{o.port}"], f"tls_ca: {certs.ca}")
    st, body = get(g, "/bytes/10")
    assert st == 200 and body == pattern(10), g.log()[-2000:]
    assert o.sni == [None]  # RFC 6066 §3: literal addresses are not permitted in HostName
    req = o.requests[0]
    assert req.header("host")  # the request itself is unchanged by TLS


def test_post_body_over_tls(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}")
    data = pattern(300000)
    r = run(["curl", "-sS", "--max-time", "50", "--http2-prior-knowledge", "--data-binary", "@-",
             "-H", "content-type: application/octet-stream", f"http://127.0.0.1:{g.port}/echo"],
            input=data.decode(), timeout=60)
    assert r.returncode == 0, r.stderr
    import json
    got = json.loads(r.stdout)
    assert got["method"] == "POST" and got["body_len"] == len(data)
    assert got["body_sha1"] == hashlib.sha1(data).hexdigest()
    # and a chunked upload (HTTP/1.1 client without a length)
    r = run(["curl", "-sS", "--max-time", "50", "-H", "transfer-encoding: chunked", "--data-binary", "@-",
             f"http://127.0.0.1:{g.port}/echo"], input=data.decode(), timeout=60)
    got = json.loads(r.stdout)
    assert got["body_len"] == len(data) and got["body_sha1"] == hashlib.sha1(data).hexdigest()


@pytest.mark.parametrize("path", ["/chunked/1048576", "/bytes/1048576", "/close/1048576"])
def test_large_response_intact(gateway, tls_origin, certs, path):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}")
    st, body = get(g, path)
    assert st == 200, g.log()[-2000:]
    assert len(body) == 1 << 20 and body == pattern(1 << 20)


def test_close_delimited_body_needs_close_notify(gateway, tls_origin, certs):
    """RFC 9112 §9.8: a close-delimited body ended by a TCP FIN without close_notify may be
    truncated; it is not passed on as complete: the client's stream is reset (curl reports an
    HTTP/2 stream error) and the gateway logs why. With close_notify the same body is fine."""
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}")
    st, body = get(g, "/close/65536")
    assert st == 200 and body == pattern(65536)
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-o",
                        "/dev/null", f"http://127.0.0.1:{g.port}/close-ragged/65536"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode != 0, p.stderr  # 92: HTTP/2 stream error (RST_STREAM)
    deadline = time.monotonic() + slow(10)
    while "back_tls_incomplete_close" not in g.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "back_tls_incomplete_close" in g.log(), g.log()[-2000:]


def test_keep_alive_reuse_over_tls_counts_connections(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}", "max_connections: 1")
    for i in range(12):
        st, body = get(g, f"/bytes/{1000 + i}")
        assert st == 200 and body == pattern(1000 + i)
    assert len(o.requests) == 12
    assert o.connections == 1  # one TLS connection carried every request
    assert o.sni == ["localhost"]


def test_retired_connections_send_close_notify_and_resume_sessions(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}",
                 "max_requests_per_connection: 1", log_level="debug")
    for i in range(5):
        st, _ = get(g, "/bytes/10")
        assert st == 200
    deadline = time.monotonic() + slow(5)
    while time.monotonic() < deadline and o.clean_closes + o.ragged_closes < 5:
        time.sleep(0.05)
    assert o.connections == 5
    assert (o.clean_closes, o.ragged_closes) == (5, 0)  # RFC 8446 §6.1 close_notify each time
    # the session cache per server: every connection after the first resumes
    assert o.resumed[0] is False and all(o.resumed[1:]), o.resumed
    assert "resumed=1" in g.log()


def test_idle_close_by_tls_origin_is_detected(gateway, tls_nginx, certs, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "a.txt").write_bytes(b"a\n")
    n = tls_nginx(str(site), extra="keepalive_timeout 300ms;")
    g = start_gw(gateway, [f"127.0.0.1:{n.port}"], f"tls_ca: {certs.ca}", "max_connections: 1",
                 log_level="debug")
    assert get(g, "/a.txt") == (200, b"a\n")
    time.sleep(1.0)  # nginx closes the idle connection (close_notify, FIN)
    log = g.wait_log("back_idle_close")
    assert "back_idle_close" in log
    assert get(g, "/a.txt") == (200, b"a\n")
    log = g.log()
    assert "back_retry" not in log and "back_conn_fail" not in log
    # nginx logs a request after sending its response: the line may land a moment later
    deadline = time.monotonic() + slow(5)
    while n.connections() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert n.connections() == 2


# ---- verification failures -----------------------------------------------------------------------

def test_unknown_ca_is_502_and_logged(gateway, tls_origin, certs):
    o = tls_origin("unknown")
    g = start_gw(gateway, [f"localhost:{o.port}"], f"tls_ca: {certs.ca}", "retries: 0")
    st, _ = get(g, "/bytes/10")
    assert st == 502
    log = g.wait_log("back_tls_handshake_failed")
    assert "certificate verify failed: unable to get local issuer certificate" in log, log[-2000:]
    assert o.requests == []  # nothing was sent to an origin we could not verify


def test_system_store_does_not_trust_a_private_ca(gateway, tls_origin, certs):
    o = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{o.port}"], "tls_verify: true", "retries: 0")
    st, _ = get(g, "/bytes/10")
    assert st == 502
    assert "certificate verify failed" in g.wait_log("back_tls_handshake_failed")


@pytest.mark.parametrize("host,reason", [("localhost", "hostname mismatch"),
                                         ("127.0.0.1", "IP address mismatch")])
def test_wrong_host_name_is_502(gateway, tls_origin, certs, host, reason):
    o = tls_origin("wrong")  # our CA, but for wrong.example / 10.9.9.9
    g = start_gw(gateway, [f"{host}:{o.port}"], f"tls_ca: {certs.ca}", "retries: 0")
    st, _ = get(g, "/bytes/10")
    assert st == 502
    log = g.wait_log("back_tls_handshake_failed")
    assert f"certificate verify failed: {reason}" in log, log[-2000:]
    assert o.requests == []


def test_tls_verify_false_accepts_unknown_ca(gateway, tls_origin, certs):
    o = tls_origin("unknown")
    g = start_gw(gateway, [f"localhost:{o.port}"], "tls_verify: false")
    st, body = get(g, "/bytes/64")
    assert st == 200 and body == pattern(64)
    assert o.sni == ["localhost"]  # SNI is still sent


def test_failed_handshake_is_retried_on_another_server(gateway, tls_origin, certs):
    bad = tls_origin("unknown")
    good = tls_origin("good")
    g = start_gw(gateway, [f"localhost:{bad.port}", f"localhost:{good.port}"], f"tls_ca: {certs.ca}",
                 "retries: 1\nhealth:\n  fail_threshold: 2\n  eject: 30s")
    for _ in range(6):
        st, body = get(g, "/bytes/5")
        assert st == 200 and body == pattern(5)
    log = g.log()
    assert "back_retry" in log and "back_tls_handshake_failed" in log
    assert len(good.requests) == 6 and bad.requests == []
    # passive health counted the handshake failures: the bad server was ejected after two
    assert len(bad.sni) == 2 and len(bad.tls_errors) == 2, (bad.sni, bad.tls_errors)
    assert "back_server_eject" in log


def test_cleartext_origin_behind_tls_true_is_502(gateway, nginx_origin, tmp_path):
    (tmp_path / "x").write_bytes(b"x")
    n = nginx_origin(str(tmp_path))  # speaks HTTP/1.1 in clear: answers the ClientHello with 400
    g = start_gw(gateway, [f"127.0.0.1:{n.port}"], "tls_verify: false", "retries: 0")
    st, _ = get(g, "/x")
    assert st == 502
    log = g.wait_log("back_tls_handshake_failed")
    assert "wrong version number" in log or "packet length too long" in log, log[-2000:]


def test_handshake_bounded_by_connect_timeout(gateway):
    # a TCP server that accepts and never answers the ClientHello
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        g = start_gw(gateway, [f"127.0.0.1:{port}"], "tls_verify: false",
                     "connect_timeout: 300ms\nretries: 0")
        t0 = time.monotonic()
        st, _ = get(g, "/x")
        took = time.monotonic() - t0
        assert st == 504 and took < 3, (st, took)
        assert 'reason="timeout"' in g.wait_log("back_tls_handshake_failed")
        assert held  # the TCP connect itself succeeded
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def test_unreadable_tls_ca_refuses_to_start(gateway, h2gate_bin, tmp_path):
    port = free_port()
    cfg = gw_config(port, ["127.0.0.1:1"], f"tls_ca: {tmp_path}/missing-ca.pem")
    p = tmp_path / "gw.yaml"
    p.write_text(cfg)
    r = run([h2gate_bin, "-c", str(p)], timeout=20)
    assert r.returncode != 0
    assert re.search(r'event=startup_failed error="' + re.escape(str(p)) + r":\d+:\d+: tls_ca '"
                     + re.escape(f"{tmp_path}/missing-ca.pem") + "' of upstream 'app' cannot be "
                     "read: No such file or directory", r.stderr), r.stderr


def test_active_health_checks_over_tls(gateway, tls_origin, certs):
    good = tls_origin("good")
    bad = tls_origin("wrong")  # fails the host name check
    g = start_gw(gateway, [f"localhost:{good.port}", f"localhost:{bad.port}"], f"tls_ca: {certs.ca}",
                 "health:\n  path: /status/200\n  interval: 100ms\n  fail_threshold: 1\n  eject: 60s")
    deadline = time.monotonic() + slow(5)
    while time.monotonic() < deadline and (len(good.requests) < 3 or len(bad.tls_errors) < 1):
        time.sleep(0.05)
    assert len(good.requests) >= 3 and all(r.target == "/status/200" for r in good.requests)
    assert set(good.sni) == {"localhost"}
    assert bad.requests == [] and bad.tls_errors
    log = g.wait_log("back_server_eject")
    assert "back_server_eject" in log and f"localhost:{bad.port}" in log
    assert "certificate verify failed: hostname mismatch" in log
    # requests now only go to the healthy server
    for _ in range(4):
        assert get(g, "/bytes/3") == (200, pattern(3))
