"""The HTTP/1.1 front as a client meets it: the gateway's own answers to requests it refuses
reach the client over TLS too (then close_notify), methods follow one rule on both fronts
(any token is a method, RFC 9110 §9.1), and HTTP/1.0 clients get through TLS (ALPN
`http/1.0`). Clients: python's ssl, curl, openssl s_client, python3-h2."""
import json
import socket
import ssl
import threading
import time

import h2.errors
import h2.events
import pytest

from procs import free_port, recv_all, run, slow
from gwtest import Client, gw_config, origin_count, tls_client_ctx


def tls_exchange(port, data, alpn=("http/1.1",), pause=None):
    """Send data over TLS (ALPN alpn) and read until the gateway ends the connection. Returns
    (bytes read, how it ended): "close_notify" when TLS said so (a clean end of the data),
    "eof" when the TCP connection ended without it. pause: seconds between the two halves of
    data (a slow head)."""
    ctx = tls_client_ctx()
    ctx.set_alpn_protocols(list(alpn))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        # ragged EOFs reported, so that a close without close_notify shows
        with ctx.wrap_socket(raw, server_hostname="localhost",
                             suppress_ragged_eofs=False) as s:
            if pause is None:
                s.sendall(data)
            else:
                s.sendall(data[:len(data) // 2])
                time.sleep(pause)
                try:
                    s.sendall(data[len(data) // 2:])
                except OSError:
                    pass
            out = b""
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        return out, "close_notify"
                    out += d
            except ssl.SSLEOFError:
                return out, "eof"
            except (ConnectionResetError, socket.timeout):
                return out, "reset"


@pytest.fixture
def gwt(gateway, origin):
    """A gateway with a TLS and a cleartext listener in front of the scripted origin, a small
    head limit and a short header timeout."""
    port, tls_port = free_port(), free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], tls_port=tls_port,
                          extra="limits: {max_request_head: 2KiB}\ntimeouts: {header: 300ms}\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    g.port, g.tls_port, g.origin = port, tls_port, origin
    return g


REFUSED = [
    ("bad_method", b"BR@W / HTTP/1.1\r\nHost: a\r\n\r\n", 400, b"invalid method"),
    ("control_byte", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400,
     b"control byte in field line"),
    ("long_target", b"GET /" + b"a" * 3000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414,
     b"request line too long"),
    ("large_header", b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 3000 + b"\r\n\r\n", 431,
     b"message head too large"),
    ("bad_version", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, b"HTTP version not supported"),
    ("transfer_coding", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     501, b"transfer coding not supported"),
]


@pytest.mark.parametrize("name,req,status,reason", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_request_answered_over_tls_then_close_notify(gwt, name, req, status, reason):
    """The answer the gateway makes for a request it refuses arrives over TLS as it does in
    cleartext, and TLS then ends with close_notify (the answer used to be dropped: OpenSSL
    refuses to write after SSL_shutdown, which came first; the client saw 0 bytes)."""
    out, end = tls_exchange(gwt.tls_port, req)
    assert out.startswith(f"HTTP/1.1 {status} ".encode()), (out[:200], end)
    assert b"connection: close" in out.lower() and out.endswith(b"h2gate: " + reason + b"\n")
    assert end == "close_notify", end
    # the same bytes in cleartext get the same answer, here after a first request on the
    # connection (the first bytes of a cleartext connection must look like HTTP/1.0 or 1.1 to
    # get an HTTP/1.1 answer at all: HTTP/2.0 is closed, see test_request_validation.py)
    with socket.create_connection(("127.0.0.1", gwt.port), timeout=10) as s:
        s.sendall(b"GET /status/200 HTTP/1.1\r\nHost: a\r\n\r\n" + req)
        plain = recv_all(s)
    assert plain.startswith(b"HTTP/1.1 200 ") and plain.endswith(out), plain[-300:]
    assert [q.target for q in gwt.origin.requests] == ["/status/200"]


def test_slow_head_gets_408_over_tls(gwt):
    out, end = tls_exchange(gwt.tls_port, b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n", pause=1.0)
    assert out.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), (out[:200], end)
    assert end == "close_notify"


def test_openssl_s_client_reads_the_400(gwt):
    """openssl s_client (an independent TLS stack's view) gets the 400 of a bad method."""
    r = run(["openssl", "s_client", "-quiet", "-connect", f"127.0.0.1:{gwt.tls_port}", "-alpn",
             "http/1.1"], input="BR@W / HTTP/1.1\r\nHost: a\r\n\r\n", timeout=15)
    assert r.stdout.startswith("HTTP/1.1 400 Bad Request"), (r.stdout[:300], r.stderr[-500:])


# ---- methods: one rule for both fronts (http/http.h) ----------------------------------


def curl_method(method, url, *args):
    r = run(["curl", "-sS", "-k", "--max-time", "10", "-X", method, "-o", "-", "-w",
             "\n%{http_code}", *args, url])
    body, _, code = r.stdout.rpartition("\n")
    return code, body


@pytest.mark.parametrize("proto", ["http1", "http1_tls", "h2c", "h2_tls"])
def test_unknown_method_reaches_the_origin_intact(gwt, proto):
    """BREW (RFC 2324, no method http-parser knows) and PROPFIND go to the origin as written, over
    HTTP/1.1 (refused with 400 before) as over HTTP/2."""
    args = {"http1": ("--http1.1",), "http1_tls": ("--http1.1",),
            "h2c": ("--http2-prior-knowledge",), "h2_tls": ("--http2",)}[proto]
    base = (f"https://localhost:{gwt.tls_port}" if proto.endswith("tls")
            else f"http://127.0.0.1:{gwt.port}")
    for method in ("BREW", "PROPFIND", "get"):
        code, body = curl_method(method, f"{base}/echo", *args)
        assert code == "200", (method, code, body)
        assert json.loads(body)["method"] == method
    assert [q.method for q in gwt.origin.requests] == ["BREW", "PROPFIND", "get"]


def test_invalid_method_token_refused_by_both_fronts(gwt):
    """`BR@W` is no token: 400 on HTTP/1.1, a stream error PROTOCOL_ERROR on HTTP/2; the
    connection goes on for HTTP/2, and the origin sees neither."""
    with socket.create_connection(("127.0.0.1", gwt.port), timeout=10) as s:
        s.sendall(b"BR@W /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        assert recv_all(s).startswith(b"HTTP/1.1 400 Bad Request\r\n")
    cl = Client(gwt.port, validate=False)
    sid = cl.request("/echo", method="BR@W")
    cl.expect_reset(sid, 1)  # PROTOCOL_ERROR
    sid2 = cl.request("/echo", method="BREW")
    evs = cl.events(lambda es: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == sid2
                                   for e in es))
    assert any(isinstance(e, h2.events.ResponseReceived) and dict(e.headers)[":status"] == "200"
               for e in evs), evs
    cl.close()
    assert [q.method for q in gwt.origin.requests] == ["BREW"]


@pytest.mark.parametrize("front", ["http1", "h2c"])
def test_unknown_method_not_retried_on_a_dead_connection(gwt, front):
    """An origin connection that dies before answering: a GET is sent again, a BREW (not known
    to be idempotent, RFC 9110 §9.2.2) is not: 502, and the origin saw it once."""
    args = ("--http1.1",) if front == "http1" else ("--http2-prior-knowledge",)
    code, _ = curl_method("GET", f"http://127.0.0.1:{gwt.port}/drop-once/g-{front}", *args)
    assert code == "200" and origin_count(gwt.origin, f"/drop-once/g-{front}") == 2
    code, _ = curl_method("BREW", f"http://127.0.0.1:{gwt.port}/drop-once/b-{front}", *args)
    assert code == "502"
    assert origin_count(gwt.origin, f"/drop-once/b-{front}") == 1


def test_unknown_method_never_coalesced(gwt):
    """Three identical concurrent BREWs (HTTP/1.1 on three connections, and HTTP/2 on one) are
    three origin exchanges; three identical GETs are one (coalescing is on by default)."""
    def h1(method, path, out):
        with socket.create_connection(("127.0.0.1", gwt.port), timeout=10) as s:
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
            out.append(recv_all(s))

    for method, want in (("BREW", 3), ("GET", 1)):
        path, got = f"/text-paced/1000?h1-{method}", []
        ts = [threading.Thread(target=h1, args=(method, path, got)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert all(r.startswith(b"HTTP/1.1 200") for r in got), got
        assert origin_count(gwt.origin, path) == want, (method, path)
    for method, want in (("BREW", 3), ("GET", 1)):
        path = f"/text-paced/1000?h2-{method}"
        cl = Client(gwt.port)
        sids = []
        for _ in range(3):
            sid = cl.c.get_next_available_stream_id()
            cl.c.send_headers(sid, [(":method", method), (":path", path), (":scheme", "http"),
                                    (":authority", "localhost")], end_stream=True)
            sids.append(sid)
        cl.flush()
        ended = set()
        for e in cl.events(lambda es: {x.stream_id for x in es
                                       if isinstance(x, h2.events.StreamEnded)} >= set(sids),
                           timeout=10):
            if isinstance(e, h2.events.StreamEnded):
                ended.add(e.stream_id)
        cl.close()
        assert ended == set(sids)
        assert origin_count(gwt.origin, path) == want, (method, path)


def test_long_method_on_a_cleartext_listener(gwt):
    """A method longer than the 31 bytes the cleartext sniff used to allow is still a method
    (the TLS listener always took it): forwarded as written."""
    m = "X-" + "A" * 60
    code, body = curl_method(m, f"http://127.0.0.1:{gwt.port}/echo", "--http1.1")
    assert code == "200" and json.loads(body)["method"] == m


# ---- HTTP/1.0 over TLS ---------------------------------------------------------------------


def test_http10_over_tls_offering_alpn_http10(gwt):
    """curl --http1.0 offers ALPN `http/1.0` alone: the handshake picks it (it failed with
    no_application_protocol) and the request is answered as HTTP/1.0: an HTTP/1.1 status line
    (RFC 9110 §6.2), no chunked coding, the connection closed after it."""
    r = run(["curl", "-sS", "-k", "-v", "--max-time", "10", "--http1.0", "-o", "/dev/null", "-w",
             "%{http_code}", f"https://localhost:{gwt.tls_port}/text-chunked/20000"])
    assert r.stdout == "200", r.stderr[-1500:]
    assert "ALPN: offers http/1.0" in r.stderr and "ALPN: server accepted http/1.0" in r.stderr
    assert "< HTTP/1.1 200" in r.stderr and "transfer-encoding" not in r.stderr.lower()
    assert gwt.origin.requests[-1].target == "/text-chunked/20000"
    # h2 and http/1.1 still win when offered with it
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{gwt.tls_port}", "-alpn",
             "http/1.0,http/1.1"], input="", timeout=15)
    assert "ALPN protocol: http/1.1" in r.stdout


def test_http10_alpn_refused_where_http1_is_not_spoken(gateway):
    """A listener without http/1.1 does not take http/1.0 either (RFC 7301 §3.2 alert)."""
    from gwtest import config
    port = free_port()
    gateway(config(tls_port=port).replace(
        "      self_signed: true", "      self_signed: true\n    protocols: [h2]"),
        wait=[("127.0.0.1", port)])
    r = run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-alpn", "http/1.0"],
            input="", timeout=15)
    out = r.stdout + r.stderr
    assert "alert no application protocol" in out, out[-1500:]


# ---- absolute-form (RFC 9112 §3.2.2) ---------------------------------------------------------

def absform_gateway(gateway, origin, tmp_path):
    """A gateway whose one route is for the host uri.example (cached), with a JSON access log:
    any other host has no route (404)."""
    port, alog = free_port(), str(tmp_path / "access.log")
    g = gateway(f"workers: 1\nlog_level: info\nlisten:\n  - address: 127.0.0.1:{port}\n"
                f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin.port}]\n"
                "routes:\n  - {host: uri.example, path: /, upstream: app, cache: true}\n"
                f"cache:\n  max_object: 64KiB\naccess_log:\n  path: {alog}\n  format: json\n",
                wait=[("127.0.0.1", port)])
    g.port, g.origin, g.alog = port, origin, alog
    return g


def h1_exchange(port, target, host):
    """One GET of target with Host: host (a connection of its own): (status, headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    out = recv_all(s)
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split(" ")[1]), hdrs, body


def test_absolute_form_is_routed_and_proxied_as_origin_form(gateway, origin, tmp_path):
    """RFC 9112 §3.2.2: `GET http://uri.example/echo/a?q=1` is the request for /echo/a?q=1 on
    uri.example, whatever Host says (a differing Host is ignored, not refused): it used to be
    routed on its raw target and Host (404: no route) or reach the origin in absolute-form."""
    g = absform_gateway(gateway, origin, tmp_path)
    st, _, _ = h1_exchange(g.port, "/echo/a?q=1", "other.example")
    assert st == 404  # the route is uri.example's alone
    for target, host, want in [("http://uri.example/echo/a?q=1", "other.example", "/echo/a?q=1"),
                               ("HTTPS://uri.example/echo/b", "uri.example", "/echo/b"),
                               ("http://uri.example?x=1", "other.example", "/?x=1"),
                               ("http://uri.example", "other.example", "/")]:
        n = len(g.origin.requests)
        st, _, body = h1_exchange(g.port, target, host)
        assert len(g.origin.requests) == n + 1, (target, st, body)  # proxied, not 404'd here
        got = g.origin.requests[-1]
        assert got.target == want and got.header("host") == "uri.example", (target, got)
    recs = [json.loads(ln) for ln in open(g.alog).read().splitlines() if ln]
    deadline = time.monotonic() + slow(5)
    while len(recs) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
        recs = [json.loads(ln) for ln in open(g.alog).read().splitlines() if ln]
    assert [r["path"] for r in recs] == ["/echo/a?q=1", "/echo/a?q=1", "/echo/b", "/?x=1", "/"]
    assert [r["status"] for r in recs][:3] == [404, 200, 200]
    assert [r.get("upstream") for r in recs] == [None] + ["app"] * 4


def test_absolute_form_is_served_from_the_origin_form_cache_entry(gateway, origin, tmp_path):
    """The cache keys an absolute-form request as the origin-form one: stored by one, served to
    the other (it used to skip the cache)."""
    g = absform_gateway(gateway, origin, tmp_path)
    st, h, body = h1_exchange(g.port, "/hinted.css", "uri.example")
    assert st == 200 and "hit" not in h.get("cache-status", "")
    st, h, again = h1_exchange(g.port, "http://uri.example/hinted.css", "elsewhere.example")
    assert st == 200 and again == body and h["cache-status"].startswith("h2gate; hit"), h
    assert origin_count(g.origin, "/hinted.css") == 1


def routes_gateway(gateway, origin, routes):
    """A gateway on a free port (g.port) whose upstream `app` is origin (g.origin), with the
    routes given (YAML, the items under `routes:`)."""
    port = free_port()
    g = gateway(f"workers: 1\nlisten:\n  - address: 127.0.0.1:{port}\n"
                f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin.port}]\n"
                "routes:\n" + routes, wait=[("127.0.0.1", port)])
    g.port, g.origin = port, origin
    return g


def ipv6_gateway(gateway, origin):
    """A gateway whose one route is for the host [::1] (an IP-literal, RFC 3986 §3.2.2): any
    other host, [::2] included, has no route (404)."""
    return routes_gateway(gateway, origin,
                          "  - {host: '[::1]', path: /, upstream: app}\n")


def test_absolute_form_with_ipv6_literal_is_proxied_as_origin_form(gateway, origin):
    """RFC 9112 §3.2.2, RFC 3986 §3.2.2: `GET http://[::1]:8080/a?b` is the request for /a?b on
    [::1]:8080 like any absolute-form one (it was answered 400: '[' is no path byte): routed on
    the host [::1] (not split at its inner colons), the origin gets origin-form and
    `Host: [::1]:8080`. Sent by raw socket and by curl's --request-target."""
    g = ipv6_gateway(gateway, origin)
    for target, host, want, want_host in [
            (f"http://[::1]:{g.port}/echo/a?b", "other.example", "/echo/a?b", f"[::1]:{g.port}"),
            ("http://[::1]/echo/c", "[::2]", "/echo/c", "[::1]"),
            ("HTTP://[::1]:8080?x", "[::1]", "/?x", "[::1]:8080"),
            ("http://[::1]", "other.example", "/", "[::1]")]:
        n = len(g.origin.requests)
        st, _, body = h1_exchange(g.port, target, host)
        # proxied, not 404'd here (the origin itself has nothing at "/")
        assert len(g.origin.requests) == n + 1, (target, st, body)
        assert st == 200 or not want.startswith("/echo"), (target, st, body)
        got = g.origin.requests[-1]
        assert got.target == want and got.header("host") == want_host, (target, got)
    # an independent client: curl writes the request line as told, its own Host beside it
    r = run(["curl", "-sS", "-g", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}",
             "--request-target", f"http://[::1]:{g.port}/echo/curl?q=1",
             f"http://127.0.0.1:{g.port}/"])
    body, _, code = r.stdout.rpartition("\n")
    assert code == "200", (code, r.stdout, r.stderr)
    echo = json.loads(body)
    assert echo["target"] == "/echo/curl?q=1", echo
    got = g.origin.requests[-1]
    assert got.target == "/echo/curl?q=1" and got.header("host") == f"[::1]:{g.port}", got


def test_ipv6_literal_host_routes_on_both_fronts(gateway, origin):
    """`Host: [::1]:PORT` (origin-form, HTTP/1.1) and `:authority: [::1]:PORT` (HTTP/2) route on
    the host [::1] without its port, never on a piece of it cut at an inner colon; [::2] is
    another host (404). curl sends both (its Host becomes :authority over h2c)."""
    g = ipv6_gateway(gateway, origin)
    for args in (("--http1.1",), ("--http2-prior-knowledge",)):
        for host, want in ((f"[::1]:{g.port}", "200"), ("[::1]", "200"), (f"[::2]:{g.port}", "404"),
                           ("[::1]:8080", "200")):
            n = len(g.origin.requests)
            code, body = curl_method("GET", f"http://127.0.0.1:{g.port}/echo/h", *args,
                                     "-H", f"Host: {host}")
            assert code == want, (args, host, code, body)
            if want == "200":
                assert len(g.origin.requests) == n + 1
                assert g.origin.requests[-1].header("host") == host, (args, host)
            else:
                assert len(g.origin.requests) == n, (args, host)


def test_malformed_authority_is_refused_by_both_fronts(gateway, origin):
    """A '[' that opens no well-formed IP-literal, an unbracketed IPv6 address, a second ':', a
    port that is not digits, an empty host before a port (RFC 3986 §3.2, RFC 9110 §4.2.1) are
    refused before any route: 400 for an HTTP/1.1 Host (RFC 9112 §3.2: "invalid field
    value"), a malformed request (RST_STREAM PROTOCOL_ERROR) for an HTTP/2 :authority (all
    passed the byte check before and reached routing). The origin sees none of them."""
    g = ipv6_gateway(gateway, origin)
    for host in ("[zz]", "[::1", "[::1]x", "a]", "::1", "a:b:c", "127.0.0.1:8a", ":80"):
        st, _, body = h1_exchange(g.port, "/echo/x", host)
        assert st == 400, (host, st, body)
        cl = Client(g.port)
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/echo/x"), (":scheme", "http"),
                                (":authority", host)], end_stream=True)
        cl.flush()
        cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
        cl.close()
    assert g.origin.requests == []


def ipv6_routes_gateway(gateway, origin):
    """Two IPv6 routes whose hosts are written in no canonical form (leading zeros, a "::" that
    could be longer, upper-case hex), each telling the origin its name and $host; no other
    route (404)."""
    return routes_gateway(gateway, origin,
                          "  - {host: '[0:0::0001]', path: /, upstream: app,\n"
                          "     request_headers: {set: {x-route: loop, x-host: $host}}}\n"
                          "  - {host: '[2001:DB8:0:0::ABCD]', path: /, upstream: app,\n"
                          "     request_headers: {set: {x-route: doc, x-host: $host}}}\n"
                          "  - {host: '[::ffff:0:0]', path: /, upstream: app,\n"
                          "     request_headers: {set: {x-route: mapped, x-host: $host}}}\n")


# every spelling of one address, with and without a port (RFC 4291 §2.2, RFC 5952 §4)
IPV6_SPELLINGS = [
    ("loop", ["[::1]", "[0:0::1]", "[::0001]", "[0:0:0:0:0:0:0:1]", "[0000::1]:8080",
              "[0::1]:443"]),
    ("doc", ["[2001:db8::abcd]", "[2001:DB8::ABCD]", "[2001:0db8:0000:0000:0:0:0:AbCd]:8443",
             "[2001:db8:0::0:abcd]"]),
    ("mapped", ["[::ffff:0.0.0.0]", "[::FFFF:0:0]", "[0:0:0:0:0:ffff:0.0.0.0]:80"]),
]


def test_equivalent_ipv6_spellings_select_the_same_route(gateway, origin):
    """An IPv6 literal host is compared as the address it names, on both sides (the route's
    `host` at load, the request's host as it comes), not as text: every spelling of ::1 takes
    the `[0:0::0001]` route, upper or lower hex takes `[2001:DB8:0:0::ABCD]`, over HTTP/1.1
    `Host`, an absolute-form target and HTTP/2 `:authority`; `[::2]` is another address (404).
    The route's header rules run for each, and `$host` is the host as the client wrote it (as
    the `Host` the origin gets). Before, only the spelling written in the config matched."""
    g = ipv6_routes_gateway(gateway, origin)
    for want, hosts in IPV6_SPELLINGS:
        for host in hosts:
            for how in ("host", "absolute", "h2"):
                n = len(g.origin.requests)
                if how == "h2":
                    st, _ = h2_answer(g.port, host, "/echo/v6")
                    st = int(st) if st else None
                elif how == "absolute":
                    st, _, _ = h1_exchange(g.port, f"http://{host}/echo/v6", "other.example")
                else:
                    st, _, _ = h1_exchange(g.port, "/echo/v6", host)
                assert st == 200 and len(g.origin.requests) == n + 1, (host, how, st)
                got = g.origin.requests[-1]
                assert got.header("x-route") == want, (host, how, got.header("x-route"))
                assert got.header("x-host") == host == got.header("host"), (host, how)
    for host in ("[::2]", "[2001:db8::abce]", "[::ffff:0.0.0.1]"):
        st, _, _ = h1_exchange(g.port, "/echo/v6", host)
        assert st == 404, (host, st)


def host_rules_gateway(gateway, origin):
    """A gateway whose routes use the request's host: /redir/ redirects to `https://$host/moved`,
    everything else goes to the origin with `x-host: $host`."""
    return routes_gateway(gateway, origin,
                          "  - {host: '*', path: /redir/, upstream: app,\n"
                          "     redirect: {to: 'https://$host/moved', status: 301}}\n"
                          "  - {host: '*', path: /, upstream: app,\n"
                          "     request_headers: {set: {x-host: $host}}}\n")


def expect_malformed_authority(g, host):
    """Both fronts of g (host_rules_gateway) refuse host as a malformed authority on both of its
    routes, the origin's and the redirect: HTTP/1.1 400 (as Host and in an absolute-form
    target), HTTP/2 RST_STREAM PROTOCOL_ERROR (as :authority)."""
    for path in ("/echo/x", "/redir/x"):
        st, _, body = h1_exchange(g.port, path, host)
        assert st == 400, (host, path, st, body)
        st, _, body = h1_exchange(g.port, f"http://{host}{path}", "a.test")
        assert st == 400, (host, path, st, body)
        assert h2_answer(g.port, host, path) == (None, h2.errors.ErrorCodes.PROTOCOL_ERROR), \
            (host, path)


def expect_curl_refused(g, host):
    """curl's own Host header host, over HTTP/1.1 (400) and h2c (the stream reset: no status,
    "000")."""
    for args, want in ((("--http1.1",), "400"), (("--http2-prior-knowledge",), "000")):
        code, _ = curl_method("GET", f"http://127.0.0.1:{g.port}/echo/c", *args,
                              "-H", f"Host: {host}")
        assert code == want, (host, args, code)


def h2_answer(port, authority, path):
    """One HTTP/2 GET with that :authority: (":status" or None, RST_STREAM code or None)."""
    cl = Client(port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                            (":authority", authority)], end_stream=True)
    cl.flush()
    evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamEnded, h2.events.StreamReset))
                                  and x.stream_id == sid for x in e))
    cl.close()
    status = [dict(e.headers)[":status"]
              for e in evs if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
    rst = [e.error_code for e in evs if isinstance(e, h2.events.StreamReset) and e.stream_id == sid]
    return (status[0] if status else None), (rst[0] if rst else None)


IPVFUTURE = ["[v1.xyz]", "[v1.xyz]:8080", "[VF.a:b]", "[v7.fe80::1+eth0]"]


def test_ipvfuture_host_is_refused_by_both_fronts_on_every_route(gateway, origin):
    """RFC 3986 §3.2.2's IPvFuture (`[v1.xyz]`) names no address a client connects to or an
    origin can be reached at, and `$host` can never carry one: both fronts refuse it as a
    malformed authority, whatever the route does with the host. HTTP/1.1 `Host` or an
    absolute-form target: 400; HTTP/2 `:authority`: RST_STREAM PROTOCOL_ERROR; never a 502,
    and the origin sees nothing. It used to pass the authority check, so a route with a `$host`
    header rule sent it on with `x-host` empty while a redirect to `$host` answered 400."""
    g = host_rules_gateway(gateway, origin)
    for host in IPVFUTURE:
        expect_malformed_authority(g, host)
    assert g.origin.requests == []
    expect_curl_refused(g, "[v1.xyz]")
    assert g.origin.requests == []
    assert "status=502" not in g.log()
    # the gateway goes on: an IPv6 literal is a host, for the route and for $host alike
    st, hdrs, _ = h1_exchange(g.port, "/redir/y", "[::1]:8080")
    assert st == 301 and hdrs["location"] == "https://[::1]:8080/moved", (st, hdrs)
    st, _, _ = h1_exchange(g.port, "/echo/y", "[::1]")
    assert st == 200 and g.origin.requests[-1].header("x-host") == "[::1]"


# RFC 3986 §3.2.2 reg-names that are no host name (pct-encoding, "~", sub-delims, an empty
# label, more than 255 bytes) and a port past five digits: what `$host` never carried
NON_DNS_HOSTS = ["%61.test", "%61.test:8080", "a~b.test", "a!b.test", "a$b", "a&b", "a'b",
                 "a(b)", "a*b", "a+b", "a,b.test", "a;b", "a=b", ".a.test", "a..test",
                 "a.test:123456", "a" * 256]
# what a host name or IPv4 address may be: each is carried by $host as it is
DNS_HOSTS = ["A-b_c.example.", "a.test:", "a.test:65535", "192.0.2.1:8080", "a" * 255]


def test_a_host_that_is_no_dns_name_is_refused_by_both_fronts_and_the_rest_is_host(gateway,
                                                                                   origin):
    """One rule for a host name, the fronts' and `$host`'s (docs/protocol.md): letters,
    digits, "-", "_" and "." (no empty label, at most 255 bytes), a port of at most five
    digits. What RFC 3986's reg-name allows beyond that (`%61.test`, `a~b`, `a!b`, `a,b`...)
    names no host a client reaches and could not be carried by `$host` into a header value or a
    Location, so both fronts refuse it as a malformed authority: 400 over HTTP/1.1 (Host and
    absolute-form), RST_STREAM PROTOCOL_ERROR over HTTP/2, the origin never asked. Before, such
    a request was routed with `x-host` empty and a redirect to `$host` answered 400. Every host
    the fronts accept is in `$host`, as the client wrote it."""
    g = host_rules_gateway(gateway, origin)
    for host in NON_DNS_HOSTS:
        expect_malformed_authority(g, host)
    for host in ("%61.test", "a~b.test", "a,b.test"):
        expect_curl_refused(g, host)
    assert g.origin.requests == []
    assert "status=502" not in g.log()
    for host in DNS_HOSTS:
        st, hdrs, _ = h1_exchange(g.port, "/redir/y", host)
        assert st == 301 and hdrs["location"] == f"https://{host}/moved", (host, st, hdrs)
        assert h2_answer(g.port, host, "/redir/y") == ("301", None), host
        st, _, _ = h1_exchange(g.port, "/echo/y", host)
        assert st == 200 and g.origin.requests[-1].header("x-host") == host, (host, st)
        assert h2_answer(g.port, host, "/echo/y") == ("200", None), host
        assert g.origin.requests[-1].header("x-host") == host, host


BAD_ABSOLUTE = ["ftp://uri.example/x", "http://user@uri.example/x", "http:///x", "http://",
                "http:/uri.example/x", "uri.example/x", "uri.example:80",
                # RFC 3986 §3.2.2: '[' and ']' only around a well-formed IP-literal host
                "http://[::1/", "http://[zz]/", "http://[::1]x/", "http://[::1]:8a/",
                "http://uri.example[::1]/", "http://[::1]/[x]", "http://[]/", "/[::1]/x",
                "http://[::1%25eth0]/"]


def test_bad_absolute_form_is_400(gateway, origin, tmp_path):
    """RFC 9112 §3.2: only http and https URIs (RFC 9110 §4.2.4: no userinfo; an empty
    authority is no host), else 400, and the origin sees nothing."""
    g = absform_gateway(gateway, origin, tmp_path)
    for target in BAD_ABSOLUTE:
        st, _, body = h1_exchange(g.port, target, "uri.example")
        assert st == 400, (target, st, body)
    assert g.origin.requests == []
    # OPTIONS * is still the asterisk-form (routed as before)
    s = socket.create_connection(("127.0.0.1", g.port), timeout=10)
    s.sendall(b"OPTIONS * HTTP/1.1\r\nHost: uri.example\r\nConnection: close\r\n\r\n")
    assert not recv_all(s).startswith(b"HTTP/1.1 400")
    s.close()
