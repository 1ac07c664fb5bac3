"""The running gateway's front side, driven by independent clients (curl, openssl, python3-h2,
raw sockets). The upstream of these configs (127.0.0.1:9) refuses connections, so every routed
request gets the gateway's own 502: what is tested here is the front, not the origin."""
import os
import json
import re
import signal
import socket
import ssl
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import pytest

from procs import free_port, raw_exchange, recv_all, recv_response, run, slow
from gwtest import (NO_PROXY, config, send_for, tls_client_ctx, tls_exchange, wait_origin_has,
                    wait_sample)


@pytest.fixture
def gw(gateway):
    tls_port, plain_port = free_port(), free_port()
    g = gateway(config(tls_port, plain_port, extra="access_log: {path: stderr, format: combined}\n"),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", plain_port)])
    g.tls_port, g.plain_port = tls_port, plain_port
    return g


def curl(*args, timeout=15):
    return run(["curl", "-sS", "--max-time", "10", *args], timeout=timeout)


def test_curl_http11_cleartext_gets_honest_502(gw):
    r = curl("-i", "--http1.1", f"http://127.0.0.1:{gw.plain_port}/index.html",
             "-w", "%{http_version}")
    assert r.returncode == 0, r.stderr
    # (text mode: curl's CRLFs arrive as newlines)
    assert r.stdout.startswith("HTTP/1.1 502 Bad Gateway\n")
    assert "server: h2gate\n" in r.stdout
    assert r.stdout.endswith(NO_PROXY + "1.1")
    assert '"GET /index.html HTTP/1.1" 502 ' in gw.wait_log('"GET /index.html HTTP/1.1" 502 ')


def test_curl_http2_over_tls_negotiates_h2(gw):
    r = curl("-k", "--http2", f"https://127.0.0.1:{gw.tls_port}/", "-w", "\n%{http_code} %{http_version}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == NO_PROXY + "\n502 2"
    assert '"GET / HTTP/2.0" 502 ' in gw.wait_log('"GET / HTTP/2.0" 502 ')


def test_curl_http11_over_tls(gw):
    r = curl("-k", "--http1.1", f"https://127.0.0.1:{gw.tls_port}/", "-w", "\n%{http_code} %{http_version}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == NO_PROXY + "\n502 1.1"


def test_curl_h2c_prior_knowledge(gw):
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{gw.plain_port}/a", "-w",
             "\n%{http_code} %{http_version}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == NO_PROXY + "\n502 2"


def test_alpn_server_preference_configurable(gateway):
    port = free_port()
    gateway(config(tls_port=port, tls_extra="alpn_preference: http/1.1"), wait=[("127.0.0.1", port)])
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-alpn", "h2,http/1.1"],
            timeout=15, input="")
    assert "ALPN protocol: http/1.1" in r.stdout


def test_alpn_without_common_protocol_fails_handshake(gateway):
    port = free_port()
    gateway(config(tls_port=port), wait=[("127.0.0.1", port)])
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-alpn", "spdy/3"],
            timeout=15, input="")
    # RFC 7301 §3.2: the fatal no_application_protocol alert (120), nothing else
    out = r.stdout + r.stderr
    assert "alert no application protocol" in out and "SSL alert number 120" in out, out
    assert "ALPN protocol:" not in out or "No ALPN negotiated" in out, out


def test_self_signed_certificate_generated_for_localhost(gw):
    cert = os.path.join(gw.workdir, "state", "cert.pem")
    key = os.path.join(gw.workdir, "state", "key.pem")
    assert os.path.exists(cert) and os.path.exists(key)
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    text = run(["openssl", "x509", "-in", cert, "-noout", "-text"]).stdout
    assert "DNS:localhost" in text and "IP Address:127.0.0.1" in text
    # the client can verify the server against it
    r = curl("--cacert", cert, f"https://localhost:{gw.tls_port}/", "-o", "/dev/null",
             "-w", "%{http_code}")
    assert r.stdout == "502", r.stderr


def test_openssl_s_client_alpn(gw):
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.tls_port}", "-alpn",
             "h2,http/1.1", "-servername", "localhost"], timeout=15, input="")
    assert "ALPN protocol: h2" in r.stdout, r.stdout[-2000:]
    assert re.search(r"Protocol\s*:\s*TLSv1\.3", r.stdout) or "TLSv1.3" in r.stdout


def test_tls12_is_accepted_with_aead_cipher(gw):
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.tls_port}", "-tls1_2"],
            timeout=15, input="")
    m = re.search(r"Cipher is (\S+)", r.stdout)
    assert m, r.stdout[-2000:]
    assert "GCM" in m.group(1) or "CHACHA20" in m.group(1)
    assert m.group(1).startswith("ECDHE")


def test_garbage_first_bytes_close_the_connection(gw):
    s = socket.create_connection(("127.0.0.1", gw.plain_port), timeout=5)
    s.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00")  # a TLS ClientHello on the cleartext port
    assert s.recv(100) == b""  # closed without an answer
    s.close()
    assert "bad_preface" in gw.log()


def test_pipelined_requests_answered_in_order(gw):
    reqs = b"".join(b"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(5))
    reqs += b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    out = raw_exchange(gw.plain_port, reqs)
    assert out.count(b"HTTP/1.1 502 ") == 6
    assert out.rstrip().endswith(NO_PROXY.strip().encode())
    paths = re.findall(r'"GET (/\w+) HTTP/1.1" 502 ', gw.wait_log('"GET /last HTTP/1.1" 502 '))
    assert paths == ["/p0", "/p1", "/p2", "/p3", "/p4", "/last"]


@pytest.mark.parametrize("req,reason", [
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b""),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd", b""),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", b"transfer-encoding does not end in chunked"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", b"obs-fold in message head"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n", b"bare CR in message head"),
    (b"GET / HTTP/1.1\r\n\r\n", b"missing host"),
], ids=["cl+te", "cl,cl", "te-not-chunked", "obs-fold", "bare-cr", "no-host"])
def test_smuggling_attempts_get_400_and_close(gw, req, reason):
    # followed by a second request that must never be answered (the connection is closed)
    out = raw_exchange(gw.plain_port, req + b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 Bad Request\r\n"), out
    assert b"connection: close\r\n" in out
    assert reason in out
    assert out.count(b"HTTP/1.1") == 1
    assert "/smuggled" not in gw.log()


def test_oversized_head_gets_431(gateway):
    port = free_port()
    gateway(config(plain_port=port, extra="limits: {max_request_head: 2KiB}\n"),
            wait=[("127.0.0.1", port)])
    out = raw_exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), out


def test_expect_100_continue_is_answered_by_the_gateway(gw):
    r = curl("-i", "--http1.1", "-H", "Expect: 100-continue", "--data-binary", "x" * 2000,
             f"http://127.0.0.1:{gw.plain_port}/upload")
    assert r.stdout.startswith("HTTP/1.1 100 Continue"), r.stdout
    assert "HTTP/1.1 502" in r.stdout


def test_upgrade_h2c_is_not_switched(gw):
    out = raw_exchange(gw.plain_port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                       b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
                       b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert b"101" not in out.split(b"\r\n")[0]
    assert out.count(b"HTTP/1.1 502") == 2


def test_head_request_has_no_body(gw):
    out = raw_exchange(gw.plain_port, b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 502")
    assert b"content-length: 36" in head
    assert body == b""


def timed_out_gateway(gateway, timeouts, tls=False, timeout=5):
    """A gateway with `timeouts: {timeouts}` (a cleartext listener, or with tls a TLS one) and
    a TCP connection to it: (the gateway, the socket)."""
    port = free_port()
    listener = {"tls_port" if tls else "plain_port": port}
    g = gateway(config(**listener, extra=f"timeouts: {{{timeouts}}}\n"), wait=[("127.0.0.1", port)])
    return g, socket.create_connection(("127.0.0.1", port), timeout=timeout)


def test_header_timeout_cuts_slowloris(gateway):
    g, s = timed_out_gateway(gateway, "header: 1s, idle: 30s, first_request: 30s", timeout=10)
    start = time.monotonic()
    got = b""
    try:
        for ch in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            s.sendall(bytes([ch]))
            time.sleep(0.05)  # one byte every 50 ms: the deadline is for the whole head
    except (BrokenPipeError, ConnectionResetError):
        pass
    try:
        got = s.recv(4096)
    except (socket.timeout, ConnectionResetError):
        pass
    elapsed = time.monotonic() - start
    s.close()
    assert got.startswith(b"HTTP/1.1 408"), got
    assert elapsed < 4
    assert "kind=header" in g.log()


def test_idle_timeout_closes_keepalive_connection(gateway):
    _, s = timed_out_gateway(gateway, "idle: 500ms")
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 502")
    start = time.monotonic()
    assert s.recv(10) == b""  # closed by the gateway
    assert 0.3 < time.monotonic() - start < 3
    s.close()


def test_idle_timeout_counts_from_the_last_request(gateway):
    """A request before the idle deadline restarts it: the connection is still open after the
    first request's deadline has passed, and closes idle-timeout after the last request.
    (Scaled: a request every `gap` keeps the connection only while each round trip and sleep
    take less than `idle`, which left 0.3 s to a loaded sanitizer build.)"""
    idle, gap = slow(0.8), slow(0.5)
    _, s = timed_out_gateway(gateway, f"idle: {idle * 1000:.0f}ms")
    for _ in range(3):  # at 0, 0.5 s and 1.0 s: past the first deadline (0.8 s)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 502")
        time.sleep(gap)
    last = time.monotonic() - gap
    assert s.recv(10) == b""  # closed by the gateway, about 0.8 s after the last request
    assert 0.75 * idle < time.monotonic() - last < idle + slow(2.2)
    s.close()


def test_first_request_timeout(gateway):
    g, s = timed_out_gateway(gateway, "first_request: 500ms")
    start = time.monotonic()
    assert s.recv(10) == b""
    assert time.monotonic() - start < 3
    s.close()
    assert "kind=first_request" in g.log()


def test_tls_handshake_timeout(gateway):
    g, s = timed_out_gateway(gateway, "handshake: 500ms", tls=True)
    s.sendall(b"\x16\x03\x01")  # a ClientHello that never completes
    start = time.monotonic()
    assert s.recv(10) == b""
    assert time.monotonic() - start < 3
    s.close()
    assert "kind=handshake" in g.log()


def test_sni_picks_certificate(gateway, tmp_path):
    for name in ("a.test", "b.test"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(tmp_path / f"{name}.key"),
                        "-out", str(tmp_path / f"{name}.pem"), "-days", "2", "-subj", f"/CN={name}",
                        "-addext", f"subjectAltName=DNS:{name},DNS:*.{name}"],
                       check=True, capture_output=True)
    port = free_port()
    cfg = (f"listen:\n  - address: 127.0.0.1:{port}\n    tls:\n      certificates:\n"
           f"        - {{certificate: {tmp_path}/a.test.pem, key: {tmp_path}/a.test.key, names: [a.test]}}\n"
           f"        - {{certificate: {tmp_path}/b.test.pem, key: {tmp_path}/b.test.key, names: [b.test, '*.b.test']}}\n"
           "upstreams: {app: {servers: [127.0.0.1:9]}}\nroutes: [{upstream: app}]\n")
    gateway(cfg, wait=[("127.0.0.1", port)])

    def subject(sni):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname=sni) as t:
                der = t.getpeercert(binary_form=True)
        pem = ssl.DER_cert_to_PEM_cert(der)
        return run(["openssl", "x509", "-noout", "-subject"], input=pem).stdout

    assert "CN = a.test" in subject("a.test")
    assert "CN = b.test" in subject("b.test")
    assert "CN = b.test" in subject("www.b.test")  # wildcard
    assert "CN = a.test" in subject("unknown.example")  # the default
    # and curl verifies b.test's chain when it asks for b.test
    r = curl("--cacert", str(tmp_path / "b.test.pem"), "--resolve", f"b.test:{port}:127.0.0.1",
             f"https://b.test:{port}/", "-o", "/dev/null", "-w", "%{http_code}")
    assert r.stdout == "502", r.stderr


def test_bad_certificate_refused_at_start_with_file_name(gateway, tmp_path, h2gate_bin):
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    (tmp_path / "bad.key").write_text("not a key\n")
    port = free_port()
    p = tmp_path / "g.yaml"
    p.write_text(f"listen:\n  - address: 127.0.0.1:{port}\n    tls: {{certificate: {tmp_path}/bad.pem, key: {tmp_path}/bad.key}}\n"
                 "upstreams: {app: {servers: [127.0.0.1:9]}}\nroutes: [{upstream: app}]\n")
    r = run([h2gate_bin, "-c", str(p)], timeout=10)
    assert r.returncode == 1
    # the position of the key that names the file, the file, and why
    assert re.search(rf"{re.escape(str(p))}:3:\d+: certificate '{re.escape(str(tmp_path))}/bad.pem' "
                     r"cannot be loaded", r.stderr), r.stderr


def test_port_in_use_refused_at_start(h2gate_bin, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        p = tmp_path / "g.yaml"
        p.write_text(f"listen: [{{address: 127.0.0.1:{port}}}]\n"
                     "upstreams: {app: {servers: [127.0.0.1:9]}}\nroutes: [{upstream: app}]\n")
        r = run([h2gate_bin, "-c", str(p)], timeout=10)
    assert r.returncode == 1
    assert f"address=127.0.0.1:{port}" in r.stderr and "in use" in r.stderr


def test_ipv6_listener(gateway):
    try:
        port = free_port(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    cfg = (f"listen: [{{address: '[::1]:{port}'}}]\n"
           "upstreams: {app: {servers: [127.0.0.1:9]}}\nroutes: [{upstream: app}]\n")
    gateway(cfg, wait=[("::1", port)])
    r = curl("-g", f"http://[::1]:{port}/", "-o", "/dev/null", "-w", "%{http_code}")
    assert r.stdout == "502"


def test_workers_share_connections(gateway):
    port = free_port()
    g = gateway(config(plain_port=port, workers=2), wait=[("127.0.0.1", port)])
    for _ in range(40):
        raw_exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    g.stop()
    counts = {int(w): int(n) for w, n in re.findall(r"event=worker_stats worker=(\d+) accepted=(\d+)", g.log())}
    assert set(counts) == {0, 1}
    assert sum(counts.values()) >= 40  # the wait_port probe connects too
    assert min(counts.values()) > 0, counts


def test_sigterm_stops_cleanly(gateway):
    port = free_port()
    g = gateway(config(plain_port=port), wait=[("127.0.0.1", port)])
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert "event=stopped status=ok" in g.log()


def test_sigterm_at_startup_stops_cleanly(tmp_path, h2gate_bin):
    """A SIGTERM sent the moment the first listener is bound (its `event=listening` line), while
    the others are still being set up and before the signal handlers run, stops the gateway as
    gracefully as a later one: it waits, blocked, instead of killing the process with the
    default action (exit by signal 15). Ten starts with twelve listeners each."""
    for i in range(10):
        ports = [free_port() for _ in range(12)]
        cfg = config(plain_port=ports[0]).replace(
            "listen:\n", "listen:\n" + "".join(f"  - address: 127.0.0.1:{p}\n" for p in ports[1:]))
        path = tmp_path / f"gw{i}.yaml"
        path.write_text(cfg)
        p = subprocess.Popen([h2gate_bin, "-c", str(path)], stderr=subprocess.PIPE, text=True)
        log = ""
        while "event=listening" not in log:
            line = p.stderr.readline()
            assert line, log
            log += line
        p.send_signal(signal.SIGTERM)
        p.wait(20)
        log += p.stderr.read()
        p.stderr.close()
        assert p.returncode == 0, (i, p.returncode, log[-2000:])
        assert "event=stopped status=ok" in log, log[-2000:]


def sigterm_after(g, port, data, taken):
    """Send data on a new connection to the gateway g, wait until taken() says a worker has
    read it, send SIGTERM and wait for the graceful stop's log line; the connection. (A fixed
    sleep before the signal lost to a loaded machine: the kernel completes the handshake before
    a worker accepts, and a connection still in the listen queue at the SIGTERM is never
    served.)"""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    assert taken()
    g.signal(signal.SIGTERM)
    assert "action=graceful_stop" in g.wait_log("signal=SIGTERM action=graceful_stop")
    return s


def graceful_gateway(gateway, o, grace):
    """A gateway in front of origin o with graceful_shutdown grace: (it, its cleartext port)."""
    port = free_port()
    cfg = config(plain_port=port, extra=f"timeouts: {{graceful_shutdown: {grace}}}\n").replace(
        "127.0.0.1:9]", f"127.0.0.1:{o.port}]")
    return gateway(cfg, wait=[("127.0.0.1", port)]), port


def admin_gateway(gateway, timeouts):
    """A gateway with the given timeouts and an admin listener: (it, its cleartext port, the
    admin's port). The admin's h2gate_client_connections_busy counts the connections whose
    bytes a worker has read: the proof that a head in progress was taken."""
    port, admin = free_port(), free_port()
    g = gateway(config(plain_port=port, extra=f"timeouts: {timeouts}\n"
                       f"admin: {{address: 127.0.0.1:{admin}}}\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    return g, port, admin


def test_graceful_stop_lets_request_in_flight_finish(gateway):
    from origin import ScriptedOrigin, pattern
    with ScriptedOrigin() as o:
        g, port = graceful_gateway(gateway, o, "5s")
        s = sigterm_after(g, port, b"GET /slow/5000 HTTP/1.1\r\nHost: x\r\n\r\n",  # 1 s of origin time
                          lambda: wait_origin_has(o, "/slow/5000") == 1)
        assert g.proc.poll() is None  # still draining: the response is in flight
        resp = recv_all(s)
        head, _, body = resp.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert body == pattern(5000)
        s.close()
        assert g.wait(10) == 0


def test_graceful_stop_closes_keepalive_after_next_response(gateway):
    # drain_grace 0: an idle keep-alive connection closes as soon as its worker stops, which
    # tells the test that the stop reached the worker before the head's end is sent
    g, port, admin = admin_gateway(gateway, "{graceful_shutdown: 5s, drain_grace: 0s}")
    idle = None

    def taken():
        nonlocal idle
        # the head in progress was read by a worker; then a keep-alive connection made idle
        if wait_sample(admin, "h2gate_client_connections_busy", 1) != 1:
            return False
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        idle.sendall(b"GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _ = recv_response(idle)
        return head.startswith(b"HTTP/1.1 502") and b"connection: close" not in head

    s = sigterm_after(g, port, b"GET /a HTTP/1.1\r\nHost: x\r\nX-Slow: ", taken)  # a head in progress
    assert idle.recv(65536) == b""  # the worker stopped: its idle connection is closed
    idle.close()
    assert g.proc.poll() is None
    s.sendall(b"1\r\n\r\n")
    resp = s.recv(65536)
    assert resp.startswith(b"HTTP/1.1 502")
    assert b"connection: close" in resp  # the last response on this connection
    s.close()
    assert g.wait(10) == 0


def test_second_signal_stops_at_once(gateway):
    from origin import ScriptedOrigin
    with ScriptedOrigin() as o:
        g, port = graceful_gateway(gateway, o, "30s")
        # an answer that takes the origin 20 s keeps the graceful stop waiting (a refused origin
        # answered 502 at once, the stop ended by itself, and the second signal met a process
        # already exiting: killed by SIGINT's default action)
        s = sigterm_after(g, port, b"GET /slow/100000 HTTP/1.1\r\nHost: x\r\n\r\n",
                          lambda: wait_origin_has(o, "/slow/100000") == 1)
        assert g.proc.poll() is None  # still draining
        start = time.monotonic()
        g.signal(signal.SIGINT)
        assert g.wait(10) == 0
        assert time.monotonic() - start < slow(3)  # not the 30 s graceful stop
        s.close()


def test_h2_over_tls12_with_blocklisted_cipher_is_inadequate_security(gateway):
    """RFC 9113 §9.2.2: a listener configured to allow a CBC suite still refuses HTTP/2 over it
    with GOAWAY INADEQUATE_SECURITY, while HTTP/1.1 is fine."""
    port = free_port()
    gateway(config(tls_port=port, tls_extra="ciphers: ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256"),
            wait=[("127.0.0.1", port)])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-ECDSA-AES128-SHA256")
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "h2"
            assert s.cipher()[0] == "ECDHE-ECDSA-AES128-SHA256"
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            c.initiate_connection()
            s.sendall(c.data_to_send())
            events = []
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    events += c.receive_data(d)
            except (ssl.SSLError, ConnectionResetError, OSError):
                pass
    t = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert t and t[0].error_code == 0xc, events
    # the same cipher is fine for HTTP/1.1
    r = curl("-k", "--http1.1", "--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-SHA256",
             f"https://127.0.0.1:{port}/", "-o", "/dev/null", "-w", "%{http_code}")
    assert r.stdout == "502", r.stderr


@pytest.mark.serial
def test_session_tickets_resume_and_rotate(gateway):
    """A TLS 1.2 session resumes with its ticket, still within one rotation period of it (the
    key has become the previous one at most); after two rotation periods the ticket's key is
    gone and the handshake is a full one. Keys rotate lazily (gateway/tls/server.c
    rotate_if_due): the key that seals a ticket was born less than a period before, and is
    dropped two periods after its birth at the latest, so a ticket is accepted for between one
    and two periods after it was issued. The middle check proves something only when it
    ended within one period (2 s) of the start of the first handshake: a loaded machine can
    spend seconds on handshakes, and an attempt that took longer starts again with a new
    session instead of failing."""
    period = 2.0
    port = free_port()
    gateway(config(tls_port=port, tls_extra="ticket_rotation: 2s"), wait=[("127.0.0.1", port)])
    ctx = tls_client_ctx(ssl.TLSVersion.TLSv1_2)

    def connect(session=None):
        # tls_exchange's timeout is generous: a full handshake on a loaded 2-core machine can
        # take seconds
        return tls_exchange(ctx, port, session)

    took = []
    for _ in range(3):
        t0 = time.monotonic()  # before the gateway sealed the first ticket
        first, reused = connect()
        issued = time.monotonic()  # after the gateway sealed it
        assert not reused and first.has_ticket
        _, again = connect(first)
        time.sleep(0.5)
        _, later = connect(first)
        took.append(round(time.monotonic() - t0, 2))
        if took[-1] < period:
            break
    else:
        pytest.fail(f"no attempt ended within one rotation period ({period} s): {took} s")
    assert again and later  # the current key, or the previous one: still accepted
    # then the ticket's key (born before `issued`) is over two periods old, and a key born at
    # the middle check (within a period of `issued`) over one: the handshake rotates, and the
    # ticket's key is neither the current nor the previous one
    time.sleep(max(0.0, issued + 2 * period + 0.3 - time.monotonic()))
    _, reused = connect(first)
    assert not reused  # two rotations later the key is gone


def test_session_tickets_can_be_disabled(gateway):
    port = free_port()
    gateway(config(tls_port=port, tls_extra="session_tickets: false"), wait=[("127.0.0.1", port)])
    session, _ = tls_exchange(tls_client_ctx(ssl.TLSVersion.TLSv1_2), port)
    assert not session.has_ticket


def data_segments_in(sock):
    """tcp(7) TCP_INFO tcpi_data_segs_in of sock: the segments with data it has received (at
    byte 152 of struct tcp_info, Linux 4.6 and later)."""
    import struct
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 160)
    return struct.unpack_from("I", info, 152)[0]


def handshake_then_settings(port, ctx, session=None):
    """An h2 client over TLS (ctx) that finishes its handshake and sends nothing more (no
    preface): (the data segments from the gateway after the client's last flight, counted once
    the server's SETTINGS has been read in full, whether the session was resumed, the
    session)."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname="localhost", session=session)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                if out.pending:
                    before = data_segments_in(s)
                    s.sendall(out.read())
                d = s.recv(65536)
                assert d, "closed during the handshake"
                inc.write(d)
        assert tls.selected_alpn_protocol() == "h2"
        if out.pending:  # the client's Finished (TLS 1.3, a resumed TLS 1.2 handshake)
            before = data_segments_in(s)
            s.sendall(out.read())
        plain = b""
        # the server's connection preface is a SETTINGS frame (RFC 9113 §3.4)
        while len(plain) < 9 or len(plain) < 9 + int.from_bytes(plain[:3], "big"):
            try:
                plain += tls.read(65536)
                continue
            except ssl.SSLWantReadError:
                pass
            d = s.recv(65536)
            assert d, "closed before the server's SETTINGS"
            inc.write(d)
        assert plain[3] == 0x4 and plain[4] == 0 and plain[5:9] == b"\0\0\0\0", plain[:9]
        time.sleep(0.2)  # anything else the gateway sent in the meantime arrives
        return data_segments_in(s) - before, tls.session_reused, tls.session


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3],
                         ids=["tls1.2", "tls1.3"])
def test_server_settings_go_with_the_handshakes_last_flight(gateway, version):
    """RFC 9113 §3.4: the server's connection preface may go at once. Over h2 the handshake's
    last flight (TLS 1.3's session tickets after the client's Finished; TLS 1.2's ticket,
    ChangeCipherSpec and Finished) and the SETTINGS frame leave in one write, one TCP segment,
    before the client has sent its own preface: a system call and a segment per connection
    fewer, and the client has the server's settings a write earlier."""
    port = free_port()
    gateway(config(tls_port=port), wait=[("127.0.0.1", port)])
    ctx = tls_client_ctx(version)
    ctx.set_alpn_protocols(["h2"])
    segs, reused, session = handshake_then_settings(port, ctx)
    assert segs == 1 and not reused
    segs, reused, _ = handshake_then_settings(port, ctx, session)
    assert segs == 1 and reused


def gateway_nodelay(g, client):
    """TCP_NODELAY of the gateway's own socket of the connection client, read through a copy
    of its descriptor (pidfd_getfd(2), Linux 5.6), once a worker has accepted it (the kernel
    completes the handshake before: the connection may still wait in the listen queue)."""
    deadline = time.monotonic() + slow(5)
    while True:
        v = _gateway_nodelay(g, client)
        if v is not None or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert v is not None, "the gateway has no socket of this connection"
    return v


def _gateway_nodelay(g, client):
    """gateway_nodelay() now, or None when the gateway has no socket of that connection."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(g.proc.pid)
    try:
        for name in os.listdir(f"/proc/{g.proc.pid}/fd"):
            try:
                if not os.readlink(f"/proc/{g.proc.pid}/fd/{name}").startswith("socket:"):
                    continue
            except OSError:
                continue  # closed meanwhile
            fd = libc.syscall(438, pidfd, int(name), 0)  # SYS_pidfd_getfd
            if fd < 0:
                continue
            with socket.socket(fileno=fd) as s:
                try:
                    if s.getpeername() != client.getsockname():
                        continue
                except OSError:
                    continue  # a listening socket, an eventfd
                return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        os.close(pidfd)
    return None


def test_client_sockets_have_nodelay(gw):
    """Every accepted socket sends small writes at once (TCP_NODELAY: a response's last bytes
    never wait for the ACK of the ones before), over TLS (h2, HTTP/1.1) and cleartext; the
    option is the listening socket's, which the accepted ones inherit."""
    ctx = tls_client_ctx()
    for alpn in ("h2", "http/1.1"):
        ctx.set_alpn_protocols([alpn])
        with socket.create_connection(("127.0.0.1", gw.tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                assert s.selected_alpn_protocol() == alpn
                assert gateway_nodelay(gw, s) == 1, alpn
    with socket.create_connection(("127.0.0.1", gw.plain_port), timeout=10) as s:
        assert gateway_nodelay(gw, s) == 1  # once a worker accepted it (a 0.2 s sleep before)


def test_connections_made_as_the_port_opens_have_nodelay(gateway):
    """The first connections, made the moment the port answers, have TCP_NODELAY too: the
    listening sockets had it set by each worker after the main thread's listen(), and the
    kernel, which completes handshakes before any accept, gave the connections it took before
    that the options of the moment (28 of 30 starts had one without it)."""
    for _ in range(3):
        port = free_port()
        g = gateway(config(plain_port=port).replace("workers: 1", "workers: 2"))
        socks = []
        deadline = time.monotonic() + slow(10)
        while len(socks) < 3 and time.monotonic() < deadline:
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            except OSError:
                assert g.proc.poll() is None, g.log()
                time.sleep(0.0005)
        assert len(socks) == 3, g.log()
        assert [gateway_nodelay(g, s) for s in socks] == [1, 1, 1]
        for s in socks:
            s.close()
        g.stop()


ROUTED = """access_log: {{path: stderr, format: json}}
listen:
  - address: 127.0.0.1:{port}
upstreams:
  api: {{servers: [127.0.0.1:9]}}
routes:
  - {{host: api.example.com, path: /v1/, upstream: api}}
  - {{host: '*.example.com', path: /static/, upstream: api}}
"""


@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
def test_routing_no_match_is_404_from_the_gateway(gateway, proto):
    port = free_port()
    g = gateway(ROUTED.format(port=port), wait=[("127.0.0.1", port)])

    def get(host, path):
        r = curl(proto, "-H", f"Host: {host}", f"http://127.0.0.1:{port}{path}", "-w", "\n%{http_code}")
        return r.stdout.rsplit("\n", 1)

    body, code = get("api.example.com", "/v1/users")
    assert code == "502"  # routed (to upstream api, which refuses)
    body, code = get("cdn.example.com", "/static/app.js")
    assert code == "502"
    body, code = get("api.example.com", "/v2/users")
    assert code == "404" and body == "h2gate: no route for this host and path\n"
    body, code = get("other.test", "/v1/users")
    assert code == "404"
    deadline = time.monotonic() + slow(5)
    while g.log().count('{"time"') < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # two workers: each flushes its lines within a second
    log = g.log()
    assert "event=no_route" in log and "authority=other.test path=/v1/users status=404" in log
    recs = [json.loads(l) for l in log.splitlines() if l.startswith("{")]
    assert sorted((r["authority"], r["path"], r["status"], r["upstream"]) for r in recs) == sorted([
        ("api.example.com", "/v1/users", 502, "api"), ("cdn.example.com", "/static/app.js", 502, "api"),
        ("api.example.com", "/v2/users", 404, None), ("other.test", "/v1/users", 404, None)])


def test_cleartext_listener_limited_to_http1(gateway):
    port = free_port()
    g = gateway(config(plain_port=port, plain_protocols=["http/1.1"]), wait=[("127.0.0.1", port)])
    r = curl("--http1.1", f"http://127.0.0.1:{port}/", "-o", "/dev/null", "-w", "%{http_code}")
    assert r.stdout == "502"
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{port}/")
    assert r.returncode != 0  # closed: h2c is not allowed here
    assert "protocol_refused" in g.log()


def test_cleartext_listener_limited_to_h2c(gateway):
    port = free_port()
    gateway(config(plain_port=port, plain_protocols=["h2c"]), wait=[("127.0.0.1", port)])
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{port}/", "-o", "/dev/null",
             "-w", "%{http_code} %{http_version}")
    assert r.stdout == "502 2"
    # an HTTP/1.1 request line is an invalid preface here: GOAWAY PROTOCOL_ERROR, then close
    out = raw_exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"HTTP/1.1" not in out
    assert len(out) >= 17 and out[3] == 0x7 and out[9 + 7] == 0x1


def test_chunked_request_body_keeps_connection_in_sync(gw):
    out = raw_exchange(gw.plain_port,
                       b"POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"5\r\nhello\r\n0\r\n\r\n"
                       b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.count(b"HTTP/1.1 502") == 2
    assert '"GET /after HTTP/1.1" 502 ' in gw.wait_log('"GET /after HTTP/1.1" 502 ')


def test_graceful_shutdown_deadline_closes_stuck_connections(gateway):
    g, port, admin = admin_gateway(gateway, "{graceful_shutdown: 1s, idle: 60s}")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Stuck: 1")  # a head never finished
    # a worker read it (else the SIGTERM found it in the listen queue, and the gateway exited
    # at once without it)
    assert wait_sample(admin, "h2gate_client_connections_busy", 1) == 1
    start = time.monotonic()
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert 0.8 < time.monotonic() - start < 4
    assert "event=drain_deadline" in g.log()
    s.close()


@pytest.mark.serial
def test_write_bound_pauses_reads_of_a_client_that_does_not_read(gateway):
    """A client pipelines requests and reads nothing. Once limits.write_buffer bytes wait for
    its socket the gateway stops reading it (logged as read_paused) instead of buffering
    responses without bound; when the client reads, every request is answered."""
    import select
    port = free_port()
    g = gateway(config(plain_port=port, extra="limits: {write_buffer: 4KiB}\n"), wait=[("127.0.0.1", port)])
    n = 40000
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    data = b"GET /p HTTP/1.1\r\nHost: x\r\n\r\n" * n
    sent = send_for(s, data, 2)
    # a sanitizer build needs longer to answer enough of the pipeline to fill the socket
    assert "event=read_paused" in g.wait_log("event=read_paused", timeout=10.0)
    got, tail = 0, b""
    s.setblocking(True)
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        r, w, _ = select.select([s], [s] if sent < len(data) else [], [], 10)
        if not r and not w:
            break
        if w:
            sent += s.send(data[sent:sent + 65536])
        if r:
            d = s.recv(1 << 20)
            if not d:
                break
            # 502 (refused), then 503 once health.fail_threshold refusals ejected the server:
            # what counts here is that every request is answered
            chunk = tail + d
            got += chunk.count(b"HTTP/1.1 50")
            tail = chunk[-11:]
            got -= tail.count(b"HTTP/1.1 50")
    got += tail.count(b"HTTP/1.1 50")
    s.close()
    assert got == n
    assert "event=read_resumed" in g.log()
    assert "input_overflow" not in g.log()
