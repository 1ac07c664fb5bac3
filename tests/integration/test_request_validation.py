"""Request-head validation and what the origin is told, end to end.

The gateway runs a TLS listener and a mixed cleartext listener (h2c and HTTP/1.1) in front of the
scripted origin of origin.py (which records every request it gets) or, for responses that
origin.py cannot make and request bytes it does not keep (trailers), a canned origin defined here.
Every malformed request is checked twice: the client-side answer (400 over HTTP/1.1, RST_STREAM
PROTOCOL_ERROR over HTTP/2, never a 502) and that the origin saw nothing."""
import json
import time

import h2.connection
import h2.config
import h2.errors
import h2.events
import pytest

from procs import free_port, raw_exchange
from gwtest import Client, response, ended, goaway_code, gw_config, was_reset
from origin import ThreadedServer, pattern


def cfg(tls_port, plain_port, origin_port, route_extra="", extra=""):
    return gw_config(plain_port, [f"127.0.0.1:{origin_port}"], route_extra="forwarded: true\n" + route_extra,
                     tls_port=tls_port, extra=extra)


def start(gateway, origin_port, extra=""):
    tls_port, plain_port = free_port(), free_port()
    g = gateway(cfg(tls_port, plain_port, origin_port, extra=extra),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", plain_port)])
    g.tls_port, g.plain_port = tls_port, plain_port
    return g


@pytest.fixture
def gw(gateway, origin):
    g = start(gateway, origin.port)
    g.origin = origin
    return g


def echo_headers(body):
    got = json.loads(body)
    return [(k.lower(), v) for k, v in got["headers"]]


def values(hdrs, name):
    return [v for k, v in hdrs if k == name]


def h2_get(port, headers, tls=False, validate=True):
    """One request on a new connection: (status, body, reset code or None)."""
    cl = Client(port, tls=tls, validate=validate)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, headers, end_stream=True)
    cl.flush()
    evs = cl.events(lambda e: ended(sid)(e) or was_reset(e))
    cl.close()
    rst = [e.error_code for e in evs if isinstance(e, h2.events.StreamReset) and e.stream_id == sid]
    status, body, _ = response(evs, sid)
    return status, body, (rst[0] if rst else None)


def assert_h2_malformed(gw, headers):
    status, _, rst = h2_get(gw.plain_port, headers, validate=False)
    assert status is None and rst == h2.errors.ErrorCodes.PROTOCOL_ERROR, (headers, status, rst)


def assert_origin_saw_nothing(gw):
    time.sleep(0.2)
    assert gw.origin.requests == [], gw.origin.requests


def h1_status(out):
    line = out.split(b"\r\n", 1)[0]
    return int(line.split(b" ")[1]) if line.startswith(b"HTTP/1.1 ") else None


# ---- X-Forwarded-Proto and Forwarded come from the listener --------------------------------------

def test_forwarded_proto_is_the_listeners(gw):
    # h2c claiming https: the origin is told http (the listener), never the client's word
    status, body, _ = h2_get(gw.plain_port, [(":method", "GET"), (":path", "/echo"),
                                             (":scheme", "https"), (":authority", "app.test")])
    assert status == "200"
    h = echo_headers(body)
    assert values(h, "x-forwarded-proto") == ["http"]
    assert values(h, "forwarded") == ['for=127.0.0.1;proto=http;host="app.test"']
    # TLS claiming http: the origin is told https
    status, body, _ = h2_get(gw.tls_port, [(":method", "GET"), (":path", "/echo"),
                                           (":scheme", "http"), (":authority", "app.test")], tls=True)
    assert status == "200"
    h = echo_headers(body)
    assert values(h, "x-forwarded-proto") == ["https"]
    assert values(h, "forwarded") == ['for=127.0.0.1;proto=https;host="app.test"']
    # HTTP/1.1 cleartext
    out = raw_exchange(gw.plain_port, b"GET /echo HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert h1_status(out) == 200
    h = echo_headers(out.partition(b"\r\n\r\n")[2])
    assert values(h, "x-forwarded-proto") == ["http"]
    assert values(h, "forwarded") == ['for=127.0.0.1;proto=http;host="app.test"']


def test_forged_forwarded_elements_are_refused(gw):
    base = [(":method", "GET"), (":path", "/echo")]
    # a :scheme that would append a forged element, or is no http(s) scheme
    assert_h2_malformed(gw, base + [(":scheme", "https,for=127.0.0.1"), (":authority", "a.test")])
    assert_h2_malformed(gw, base + [(":scheme", "ftp"), (":authority", "a.test")])
    # an authority that would escape host="..." or carry userinfo
    assert_h2_malformed(gw, base + [(":scheme", "http"), (":authority", 'a.test";for=1.2.3.4')])
    assert_h2_malformed(gw, base + [(":scheme", "http"), (":authority", "u@a.test")])
    # no :authority: the host field stands in for it, checked the same way
    assert_h2_malformed(gw, base + [(":scheme", "http"), ("host", 'a.test";for=1.2.3.4')])
    # HTTP/1.1: a Host that is no authority is a 400
    for host in (b'a.test";for=1.2.3.4', b"u@a.test", b"a.test/x"):
        out = raw_exchange(gw.plain_port, b"GET /echo HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        assert h1_status(out) == 400, (host, out)
    assert_origin_saw_nothing(gw)


def test_client_forwarded_cannot_swallow_ours(gateway, origin):
    # from a trusted proxy (forwarded_for: append; by default no client's Forwarded is kept),
    # a Forwarded with an open quote would make our element part of its string: not
    # forwarded; a well-formed one stays in front of ours
    gw = start(gateway, origin.port,
               extra="forwarded_for: append\ntrusted_proxies: [127.0.0.1]\n")
    for given, want in ((['for="abc'], ['for=127.0.0.1;proto=http;host="a.test"']),
                        (['for=1.2.3.4;proto=https', 'for="x\\"y"'],
                         ['for=1.2.3.4;proto=https, for="x\\"y", for=127.0.0.1;proto=http;host="a.test"']),
                        (['for=1.2.3.4', 'by=x=y'], ['for=127.0.0.1;proto=http;host="a.test"'])):
        status, body, _ = h2_get(gw.plain_port, [(":method", "GET"), (":path", "/echo"),
                                                 (":scheme", "http"), (":authority", "a.test")] +
                                 [("forwarded", v) for v in given])
        assert status == "200"
        assert values(echo_headers(body), "forwarded") == want, given


# ---- request targets and methods -----------------------------------------------------------------

BAD_PATHS = [b"/a b", b"/a\x0bHTTP/1.0", b"/a\tb", b"/a\x0cb", b"/a\x7f", b"/\x80", b"/\xc3\xa9",
             b"/a\x01", b"/a#f", b"/a%zz", b"/a\"b", b"/<x>", b"/a{b}"]


def test_h2_path_bytes_are_protocol_errors(gw):
    for p in BAD_PATHS:
        assert_h2_malformed(gw, [(b":method", b"GET"), (b":path", p), (b":scheme", b"http"),
                                 (b":authority", b"a.test")])
    assert_origin_saw_nothing(gw)
    # percent-encoded bytes pass as they are, and the RFC 3986 path and query characters
    status, body, _ = h2_get(gw.plain_port, [(":method", "GET"),
                                             (":path", "/echo/%0b%20%C3%A9?a=b/c?d&e=;:@!$'()*+,~"),
                                             (":scheme", "http"), (":authority", "a.test")])
    assert status == "200"
    assert json.loads(body)["target"] == "/echo/%0b%20%C3%A9?a=b/c?d&e=;:@!$'()*+,~"


def test_h1_target_bytes_are_400(gw):
    for p in BAD_PATHS[1:]:  # "/a b" has no HTTP/1.1 form: the space ends the target
        out = raw_exchange(gw.plain_port, b"GET " + p + b" HTTP/1.1\r\nHost: a.test\r\n\r\n")
        assert h1_status(out) == 400, (p, out[:80])
    assert_origin_saw_nothing(gw)
    out = raw_exchange(gw.plain_port, b"GET /echo/%0b?x=/y HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert h1_status(out) == 200
    assert json.loads(out.partition(b"\r\n\r\n")[2])["target"] == "/echo/%0b?x=/y"


def test_asterisk_form_of_another_method_than_options_is_400(gw):
    """RFC 9112 §3.2.4: `*` is a target for OPTIONS only. `GET *` or `POST *` name no resource:
    a 400, the client's fault, and nothing reaches the origin (it was a 404 from the routes)."""
    for m in (b"GET", b"POST", b"options"):
        out = raw_exchange(gw.plain_port, m + b" * HTTP/1.1\r\nHost: a.test\r\n"
                           b"Content-Length: 0\r\n\r\n")
        assert h1_status(out) == 400, (m, out[:80])
    assert_origin_saw_nothing(gw)
    out = raw_exchange(gw.plain_port, b"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n")
    assert h1_status(out) not in (400, 502), out[:80]


def test_malformed_heads_are_the_clients_fault(gw):
    base = [(":scheme", "http"), (":authority", "a.test")]
    # a space in :path or :method was a 502 with nothing sent
    assert_h2_malformed(gw, [(":method", "GET"), (":path", "/a b")] + base)
    assert_h2_malformed(gw, [(":method", "GE T"), (":path", "/echo")] + base)
    assert_h2_malformed(gw, [(":method", "G(T"), (":path", "/echo")] + base)
    # a field name HTTP/2 allows but no HTTP/1.1 token: refused by the serializer, was a 502
    assert_h2_malformed(gw, [(":method", "GET"), (":path", "/echo")] + base + [("a(b", "1")])
    assert_h2_malformed(gw, [(":method", "GET"), (":path", "/echo")] + base + [("x{y}", "1")])
    # no :authority and no host: nothing to route the request to the origin with
    assert_h2_malformed(gw, [(":method", "GET"), (":path", "/echo"), (":scheme", "http")])
    # HTTP/1.0 without Host: a 400, was a close without an answer
    out = raw_exchange(gw.plain_port, b"GET /echo HTTP/1.0\r\n\r\n")
    assert h1_status(out) == 400, out
    assert_origin_saw_nothing(gw)
    assert "status=502" not in gw.log()


# ---- HTTP/1.0 clients ----------------------------------------------------------------------------

def test_http10_client_gets_no_1xx_and_no_chunked(gw):
    out = raw_exchange(gw.plain_port, b"GET /early-hints HTTP/1.0\r\nHost: a\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 "), out
    assert b" 103 " not in out
    assert out.endswith(b"hello")
    # a chunked origin response goes to an HTTP/1.0 client close-delimited, without its trailer
    out = raw_exchange(gw.plain_port, b"GET /chunked/20000 HTTP/1.0\r\nHost: a\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert b"transfer-encoding" not in head.lower() and b"content-length" not in head.lower()
    assert b"connection: close" in head.lower()
    assert body == pattern(20000)
    # Expect: 100-continue is ignored for HTTP/1.0 (RFC 9110 §10.1.1)
    out = raw_exchange(gw.plain_port, b"POST /echo HTTP/1.0\r\nHost: a\r\nContent-Length: 2\r\n"
                                      b"Expect: 100-continue\r\n\r\nok")
    assert out.startswith(b"HTTP/1.1 200 "), out
    assert b"100 Continue" not in out
    # HTTP/1.1 keeps both
    out = raw_exchange(gw.plain_port, b"GET /early-hints HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 103 ")


# ---- what reaches the origin, and what it may answer ---------------------------------------------

class CannedOrigin(ThreadedServer):
    """An origin answering each target with canned bytes, then closing; keeps the raw bytes of
    each request (head, chunked body and trailers)."""

    def __init__(self, answers):
        self.answers = answers
        self.raw = []
        super().__init__(backlog=16)

    def _serve(self, c):
        c.settimeout(5)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head = buf.partition(b"\r\n\r\n")[0].lower()
            if b"transfer-encoding: chunked" in head:
                while not buf.endswith(b"\r\n\r\n") or b"\r\n0\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        break
                    buf += d
            self.raw.append(buf)
            target = buf.split(b" ")[1].decode()
            c.sendall(self.answers.get(target, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
            time.sleep(0.2)
        except OSError:
            pass
        finally:
            c.close()


@pytest.fixture
def canned():
    o = CannedOrigin({
        "/cl-2-63": b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nabc",
        "/cl-2-64": b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551614\r\n\r\nabc",
        "/gzip-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                         b"3\r\n\x1f\x8b\x08\r\n0\r\n\r\n",
        "/upload": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    })
    yield o
    o.close()


def test_origin_content_length_past_int64_is_502(gateway, canned):
    g = start(gateway, canned.port)
    for path in ("/cl-2-63", "/cl-2-64"):
        # Connection: close: the exchange ends with the answer (the 502 keeps the connection)
        out = raw_exchange(g.plain_port,
                           f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
        assert h1_status(out) == 502, out
        status, _, _ = h2_get(g.plain_port, [(":method", "GET"), (":path", path),
                                             (":scheme", "http"), (":authority", "a")])
        assert status == "502"


def test_gzip_chunked_from_the_origin_is_502(gateway, canned):
    g = start(gateway, canned.port)
    out = raw_exchange(g.plain_port,
                       b"GET /gzip-chunked HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert h1_status(out) == 502, out
    status, body, _ = h2_get(g.plain_port, [(":method", "GET"), (":path", "/gzip-chunked"),
                                            (":scheme", "http"), (":authority", "a")])
    assert status == "502" and b"\x1f\x8b" not in body
    # and from a client: 501 (RFC 9112 §6.1), nothing sent on
    out = raw_exchange(g.plain_port, b"POST /upload HTTP/1.1\r\nHost: a\r\n"
                                     b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    assert h1_status(out) == 501, out
    time.sleep(0.2)
    assert not [r for r in canned.raw if b"/upload" in r.split(b"\r\n")[0]]


def test_request_trailers_are_filtered(gateway, canned):
    g = start(gateway, canned.port)
    cl = Client(g.plain_port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/upload"), (":scheme", "http"),
                            (":authority", "a")])
    cl.c.send_data(sid, b"hello")
    cl.c.send_headers(sid, [("x-checksum", "abc"), ("content-length", "99"), ("host", "evil.test"),
                            ("authorization", "Bearer x"), ("content-type", "text/evil"),
                            ("cookie", "c=1"), ("x-forwarded-for", "6.6.6.6"), ("trailer", "x"),
                            ("x-forwarded-ssl", "on"), ("x-real-ip", "6.6.6.6"),
                            ("true-client-ip", "6.6.6.6"), ("x-other", "kept")], end_stream=True)
    cl.flush()
    evs = cl.events(ended(sid))
    status, body, _ = response(evs, sid)
    cl.close()
    assert status == "200" and body == b"ok"
    raw = [r for r in canned.raw if r.startswith(b"POST /upload")]
    assert len(raw) == 1
    head, _, rest = raw[0].partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    trailer = rest.split(b"\r\n0\r\n", 1)[1].lower()
    assert b"x-checksum: abc\r\n" in trailer and b"x-other: kept\r\n" in trailer
    for name in (b"content-length", b"host", b"authorization", b"content-type", b"cookie",
                 b"x-forwarded-for", b"trailer:", b"x-forwarded-ssl", b"x-real-ip",
                 b"true-client-ip"):
        assert name not in trailer, trailer


# ---- garbage on a mixed cleartext listener -------------------------------------------------------

def test_mixed_listener_garbage_gets_no_http1_answer(gw):
    # not an HTTP/1.x request line: closed without an HTTP/1.1 answer
    for data in (b"INVALID CONNECTION PREFACE\r\n\r\n", b"GET /\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n",
                 b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", b"GET / FOO\r\n\r\n"):
        out = raw_exchange(gw.plain_port, data)
        assert out == b"", (data, out)
    # bytes that begin like the HTTP/2 preface but are not it: GOAWAY(PROTOCOL_ERROR), no 400
    for data in (b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", b"PRI * HTTP/2.1\r\n\r\n", b"PRI / HTTP/3\r\n"):
        out = raw_exchange(gw.plain_port, data)
        assert b"HTTP/1.1" not in out, (data, out)
        assert goaway_code(out) == 1, (data, out)
    # a real HTTP/1.x request that is malformed keeps its 400
    out = raw_exchange(gw.plain_port, b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n")
    assert h1_status(out) == 400
    out = raw_exchange(gw.plain_port, b"GET / HTTP/1.0\r\nHost: a\r\nX: a\x01b\r\n\r\n")
    assert h1_status(out) == 400
    # and the good ones still work, HTTP/1.1 and h2c
    out = raw_exchange(gw.plain_port, b"GET /status/200 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert h1_status(out) == 200
    status, _, _ = h2_get(gw.plain_port, [(":method", "GET"), (":path", "/status/200"),
                                          (":scheme", "http"), (":authority", "a")])
    assert status == "200"


def test_invalid_request_trailer_is_the_clients_fault(gateway, canned):
    # a trailer name HTTP/2 lets through but that is no HTTP/1.1 token: the serializer refuses
    # it at the end of the body; that was a 502, it is the client's malformed request
    g = start(gateway, canned.port)
    cl = Client(g.plain_port, validate=False)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/upload"), (":scheme", "http"),
                            (":authority", "a")])
    cl.c.send_data(sid, b"hello")
    cl.c.send_headers(sid, [("a(b", "1")], end_stream=True)
    cl.flush()
    evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamReset, h2.events.StreamEnded))
                                  for x in e))
    cl.close()
    rst = [e.error_code for e in evs if isinstance(e, h2.events.StreamReset)]
    status, _, _ = response(evs, sid)
    assert status is None and rst == [h2.errors.ErrorCodes.PROTOCOL_ERROR], (status, rst)
    # the origin got the head and the body so far, never the end of the request
    time.sleep(0.3)
    assert all(not r.endswith(b"0\r\n\r\n") for r in canned.raw), canned.raw
    assert "status=502" not in g.log()
