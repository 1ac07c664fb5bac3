"""Redirects and fixed answers made by the gateway (a route's redirect and respond, a cleartext
listener's redirect_https), seen from curl, python3-h2 and headless Chromium; the open-redirect
attempts (a target starting with '//', a backslash, a bad Host) never yield a Location to
another host."""
import shutil
import socket
import subprocess

import h2.events
import pytest

from procs import free_port
from gwtest import Client, ended, response, tls_listener

CHROMIUM = shutil.which("chromium")
PAGE = ("<!doctype html><html><body><p id=where></p><script>"
        "document.getElementById('where').textContent = 'landed on ' + location.protocol + '//' "
        "+ location.host + location.pathname + location.search;</script></body></html>")


def config(port, origin_port, tls_port=None, redirect_port=None):
    lines = ["workers: 1", "log_level: info", "listen:", f"  - address: 127.0.0.1:{port}"]
    if tls_port:
        lines += tls_listener(tls_port)
        lines += [f"  - address: 127.0.0.1:{redirect_port}", "    redirect_https: true",
                  f"    redirect_https_port: {tls_port}"]
    lines += ["upstreams:", "  app:", f"    servers: [127.0.0.1:{origin_port}]",
              "response_headers: {set: {X-Policy: edge}}",
              "routes:"]
    for st in (301, 302, 307, 308):
        lines.append(f"  - {{host: '*', path: /r{st}/, upstream: app, "
                     f"redirect: {{to: '$scheme://$host/new$request_uri', status: {st}}}}}")
    lines += ["  - {host: '*', path: /path/, upstream: app, redirect: {to: '${path}?moved=1'}}",
              "  - {host: '*', path: /fixed-host/, upstream: app,"
              " redirect: {to: 'https://example.com$path', status: 301}}",
              "  - host: '*'",
              "    path: /health",
              "    upstream: app",
              "    respond: {status: 503, body: 'down for maintenance', content_type: text/html}",
              "  - {host: '*', path: /empty, upstream: app, respond: {status: 204}}",
              "  - host: '*'",
              "    path: /page",
              "    upstream: app",
              f"    respond: {{status: 200, content_type: text/html, body: \"{PAGE}\"}}",
              # the catch-all bounces every other request to its own target: where a client
              # could try to make the Location point elsewhere
              "  - {host: '*', path: /, upstream: app, redirect: {to: '$request_uri'}}"]
    return "\n".join(lines) + "\n"


def raw(port, req):
    """One HTTP/1.1 exchange written by hand (what curl would normalise): the head, parsed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(req.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n")[0].decode().split("\r\n")
    fields = {}
    for l in head[1:]:
        k, v = l.split(":", 1)
        fields[k.strip().lower()] = v.strip()
    return int(head[0].split()[1]), fields


def curl(*args):
    r = subprocess.run(["curl", "-sk", "-D", "-", *args], capture_output=True, text=True,
                       timeout=10)
    head, _, body = r.stdout.replace("\r", "").partition("\n\n")
    lines = head.split("\n")
    fields = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        fields[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), fields, body


@pytest.fixture
def gw(gateway, origin):
    port = free_port()
    g = gateway(config(port, origin.port), wait=[("127.0.0.1", port)])
    g.port = port
    return g


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_each_status_and_template(gw, origin, status):
    st, f, _ = curl(f"http://127.0.0.1:{gw.port}/r{status}/a?b=c")
    assert st == status
    assert f["location"] == f"http://127.0.0.1:{gw.port}/new/r{status}/a?b=c"
    assert f["x-policy"] == "edge"  # the response rules on the gateway's answer
    assert origin.requests == []


def test_redirect_path_and_fixed_host(gw, origin):
    st, f, _ = curl(f"http://127.0.0.1:{gw.port}/path/x?y=1")
    assert st == 302 and f["location"] == "/path/x?moved=1"
    st, f, _ = curl(f"http://127.0.0.1:{gw.port}/fixed-host/x")
    assert st == 301 and f["location"] == "https://example.com/fixed-host/x"


def test_open_redirect_attempts(gw, origin):
    # a run of '/' at the start of the target is one '/': never "//evil.example/x", which a
    # browser reads as another host
    for target, want in [("//evil.example/x", "/evil.example/x"),
                         ("///evil.example", "/evil.example"),
                         ("/%2F/evil.example", "/%2F/evil.example")]:
        st, f = raw(gw.port, f"GET {target} HTTP/1.1\r\nHost: good.example\r\n\r\n")
        assert st == 302 and f["location"] == want, (target, st, f)
    # over HTTP/2 too
    cl = Client(gw.port)
    sid = cl.request("//evil.example/x")
    evs = cl.events(ended(sid))
    hdrs = [dict(e.headers) for e in evs if isinstance(e, h2.events.ResponseReceived)][0]
    assert hdrs[":status"] == "302" and hdrs["location"] == "/evil.example/x"
    cl.close()
    # a backslash in the target (browsers read it as '/'): 400, never a Location
    st, f = raw(gw.port, "GET /\\evil.example HTTP/1.1\r\nHost: good.example\r\n\r\n")
    assert st == 400 and "location" not in f
    # a Host that is not one (userinfo, a path) never reaches a Location
    for host in ["evil.example@good.example", "good.example/evil", "good.example\\evil"]:
        st, f = raw(gw.port, f"GET /r302/x HTTP/1.1\r\nHost: {host}\r\n\r\n")
        assert st == 400 and "location" not in f, (host, st, f)
    assert origin.requests == []


def test_respond_get_and_head_over_h1_and_h2(gw, origin):
    st, f, body = curl(f"http://127.0.0.1:{gw.port}/health")
    assert st == 503 and body == "down for maintenance"
    assert f["content-type"] == "text/html" and f["content-length"] == "20"
    st, f, body = curl("-I", "-o", "/dev/null", f"http://127.0.0.1:{gw.port}/health")
    assert st == 503 and body == "" and f["content-length"] == "20"
    st, f, body = curl(f"http://127.0.0.1:{gw.port}/empty")
    assert st == 204 and body == "" and "content-length" not in f
    cl = Client(gw.port)
    for method in ("GET", "HEAD"):
        sid = cl.request("/health", method=method)
        evs = cl.events(ended(sid))
        status, body, done = response(evs, sid)
        assert status == "503" and done
        assert body == (b"down for maintenance" if method == "GET" else b"")
    # a POST whose body is still coming: answered, then reset with NO_ERROR (RFC 9113 §8.1)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/health"), (":scheme", "http"),
                            (":authority", "localhost")], end_stream=False)
    cl.flush()
    cl.expect_reset(sid, 0)
    cl.close()
    assert origin.requests == []


def test_redirect_https_with_port(gateway, origin):
    port, tls_port, rport = free_port(), free_port(), free_port()
    gateway(config(port, origin.port, tls_port, rport),
            wait=[("127.0.0.1", tls_port), ("127.0.0.1", rport)])
    st, f, _ = curl(f"http://localhost:{rport}/a/b?c=d")
    assert st == 308 and f["location"] == f"https://localhost:{tls_port}/a/b?c=d"
    cl = Client(rport)  # h2c: the same answer; the client's :scheme is not believed
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", "/x"), (":scheme", "https"),
                            (":authority", "[::1]:99")], end_stream=True)
    cl.flush()
    evs = cl.events(ended(sid))
    hdrs = [dict(e.headers) for e in evs if isinstance(e, h2.events.ResponseReceived)][0]
    assert hdrs[":status"] == "308" and hdrs["location"] == f"https://[::1]:{tls_port}/x"
    cl.close()
    st, f, _ = curl(f"http://localhost:{rport}//evil.example/")
    assert st == 308 and f["location"] == f"https://localhost:{tls_port}/evil.example/"
    assert origin.requests == []


@pytest.mark.serial
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup does)")
def test_chromium_follows_redirect_https(gateway, origin, tmp_path):
    port, tls_port, rport = free_port(), free_port(), free_port()
    gateway(config(port, origin.port, tls_port, rport),
            wait=[("127.0.0.1", tls_port), ("127.0.0.1", rport)])
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--no-first-run",
                        "--ignore-certificate-errors", f"--user-data-dir={tmp_path / 'prof'}",
                        "--dump-dom", f"http://localhost:{rport}/page?x=1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"landed on https://localhost:{tls_port}/page?x=1" in r.stdout, r.stdout[-2000:]
