"""Coalescing (proxy/coalesce.c, proxy/exchange.c) end to end: which requests share one origin
exchange, which responses are shared, and how a shared response is held once for every
subscriber: conditional and partial requests neither lead nor join, the scheme is in the key,
uncacheable responses are not shared, and followers on one connection do not detach one by
one. Origin requests are counted at the scripted origin."""
import hashlib
import select
import threading
import time

import h2.connection
import h2.config
import h2.events
import h2.settings
import pytest

from procs import free_port, rss_kib, slow
from gwtest import (Client, Streams, all_done, collect, gw_config, many_gets, origin_count,
                    origin_gateway, sample, scrape, wait_origin_has)
from origin import ScriptedOrigin, pattern

APP_JS = pattern(5000)


class CacheOrigin(ScriptedOrigin):
    """ScriptedOrigin plus the /c/ paths, each answered 0.3 s after the request so that the
    identical requests sent with it are all waiting:
        /c/app.js        200 with APP_JS; `Range: bytes=a-b` → 206; `If-None-Match: *` → 304
        /c/proto         200 whose body is the X-Forwarded-Proto the origin received
        /c/status/N      status N, body "status N\\n" (3xx with a Location)
        /c/hdr/NAME      200 with 100 bytes and the response field NAME: the query string value
        /c/gated/N       200 with N bytes (content-length), the body sent as far as the test
                         released it (release(upto)): the pace of the clients, not of a clock
        /c/host          200 whose body is the Host the origin received
        /c/trailer/NAME  200, chunked, 100 bytes, then the trailer field NAME: the query value
    """

    def __init__(self):
        self.gate = threading.Condition()
        self.allowed = 0  # /c/gated/: body bytes each answer may send so far
        super().__init__()

    def release(self, upto):
        """/c/gated/ answers may send their bodies up to byte upto."""
        with self.gate:
            self.allowed = max(self.allowed, upto)
            self.gate.notify_all()

    def close(self):
        super().close()
        self.release(1 << 62)

    def _respond(self, c, req):
        path, _, query = req.target.partition("?")
        if not path.startswith("/c/"):
            return super()._respond(c, req)
        time.sleep(0.3)
        parts = path.split("/")[2:]
        head_only = req.method == "HEAD"

        def send(status, fields, body):
            out = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
            out += f"Content-Length: {len(body)}\r\n\r\n"
            c.sendall(out.encode("latin-1") + (b"" if head_only else body))

        if parts[0] == "app.js":
            rng, inm = req.header("range"), req.header("if-none-match")
            if inm == "*":
                c.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n")
            elif rng and rng.startswith("bytes="):
                a, _, b = rng[6:].partition("-")
                a, b = int(a), int(b) if b else len(APP_JS) - 1
                send(206, [("Content-Range", f"bytes {a}-{b}/{len(APP_JS)}"), ("ETag", '"v1"')],
                     APP_JS[a:b + 1])
            else:
                send(200, [("ETag", '"v1"')], APP_JS)
        elif parts[0] == "proto":
            send(200, [], (req.header("x-forwarded-proto") or "none").encode())
        elif parts[0] == "status":
            st = int(parts[1])
            send(st, [("Location", "https://localhost/")] if 300 <= st < 400 else [],
                 f"status {st}\n".encode())
        elif parts[0] == "hdr":
            send(200, [(parts[1], query.replace("%20", " "))], pattern(100))
        elif parts[0] == "host":
            send(200, [], (req.header("host") or "none").encode())
        elif parts[0] == "trailer":
            body = pattern(100)
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                      b"%x\r\n" % len(body) + body + b"\r\n0\r\n" +
                      f"{parts[1]}: {query.replace('%20', ' ')}\r\n\r\n".encode())
        elif parts[0] == "gated":
            body = pattern(int(parts[1]))
            c.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            sent = 0
            while sent < len(body) and not self.stopping:
                with self.gate:
                    self.gate.wait_for(lambda: self.allowed > sent)
                    upto = min(self.allowed, len(body))
                c.sendall(body[sent:upto])
                sent = upto
        else:
            send(404, [], b"not found\n")
        return True


def config(port, origin_port, extra="", tls_port=None):
    return gw_config(port, [f"127.0.0.1:{origin_port}"], extra=extra, tls_port=tls_port, log_level="debug")


@pytest.fixture
def corigin():
    with CacheOrigin() as o:
        yield o


@pytest.fixture
def gwc(gateway, corigin):
    port = free_port()
    g = gateway(config(port, corigin.port), wait=[("127.0.0.1", port)])
    g.port, g.origin = port, corigin
    return g


def pair(port, first, second, authorities=("localhost", "localhost")):
    """Two GETs of /c/app.js on one connection, sent in one flight, with the extra fields
    first and second (and the :authority of each); returns [(status, body), (status, body)]."""
    cl = Client(port)
    sids = []
    for extra, authority in zip((first, second), authorities):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/c/app.js"), (":scheme", "http"),
                                (":authority", authority), *extra], end_stream=True)
        sids.append(sid)
    cl.flush()
    evs = cl.events(lambda e: sum(isinstance(x, (h2.events.StreamEnded, h2.events.StreamReset))
                                  for x in e) >= 2, timeout=10)
    cl.close()
    out = []
    for sid in sids:
        st, body = None, b""
        for e in evs:
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                st = dict(e.headers)[":status"]
            elif isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
                body += e.data
        out.append((st, body))
    return out


# ---- requests that must neither lead nor join ----------------------------------------------------

EXCLUDED = {
    "range": [("range", "bytes=0-0")],
    "if-none-match": [("if-none-match", "*")],
    "if-match": [("if-match", '"v1"')],
    "if-modified-since": [("if-modified-since", "Sat, 01 Jan 2000 00:00:00 GMT")],
    "if-unmodified-since": [("if-unmodified-since", "Sat, 01 Jan 2000 00:00:00 GMT")],
    "if-range": [("range", "bytes=1-2"), ("if-range", '"v1"')],
    "cache-control-no-cache": [("cache-control", "no-cache")],
    "cache-control-max-age-0": [("cache-control", "max-age=0")],
    "cache-control-no-store": [("cache-control", "no-store")],
    "pragma-no-cache": [("pragma", "no-cache")],
    "expect": [("expect", "100-continue")],
    "authorization": [("authorization", "Bearer secret")],
}


def expected(extra):
    """What the origin answers a lone request with these fields."""
    h = dict(extra)
    if h.get("if-none-match") == "*":
        return ("304", b"")
    if "range" in h:
        a, _, b = h["range"][6:].partition("-")
        return ("206", APP_JS[int(a):int(b) + 1])
    return ("200", APP_JS)


@pytest.mark.parametrize("kind", list(EXCLUDED))
def test_special_request_then_plain_get_not_coalesced(gwc, kind):
    """`range: bytes=0-0` then a plain GET on one connection gave
    the plain GET a 206 with 1 byte; `if-none-match: *` gave it a 304."""
    special, plain = pair(gwc.port, EXCLUDED[kind], [])
    assert plain == ("200", APP_JS), plain
    assert special == expected(EXCLUDED[kind])
    assert origin_count(gwc.origin, "/c/app.js") == 2


@pytest.mark.parametrize("kind", list(EXCLUDED))
def test_plain_get_then_special_request_not_coalesced(gwc, kind):
    plain, special = pair(gwc.port, [], EXCLUDED[kind])
    assert plain == ("200", APP_JS)
    assert special == expected(EXCLUDED[kind]), special
    assert origin_count(gwc.origin, "/c/app.js") == 2


def test_plain_gets_still_coalesce(gwc):
    a, b = pair(gwc.port, [("accept", "*/*")], [("user-agent", "x")])
    assert a == b == ("200", APP_JS)
    assert origin_count(gwc.origin, "/c/app.js") == 1


@pytest.mark.parametrize("authorities", [("[::1]", "[0::1]:80"), ("[0:0:0:0:0:0:0:1]", "[::0001]"),
                                         ("localhost", "localhost:080"), ("localhost", "LocalHost:")])
def test_one_origin_spelled_two_ways_is_one_origin_request(gwc, authorities):
    """RFC 4291 §2.2, RFC 3986 §6.2.3: [::1] and [0::1]:80 name one origin server on the
    cleartext listener, as the route and the cache see it; the key held the authority as
    written, so two identical requests in one flight were two origin requests."""
    a, b = pair(gwc.port, [], [], authorities)
    assert a == b == ("200", APP_JS)
    assert origin_count(gwc.origin, "/c/app.js") == 1


def test_another_port_is_another_origin(gwc):
    """Only the default port is dropped: :8080 is another origin server (the origin is told
    that Host), so its request is not joined to the one without a port."""
    a, b = pair(gwc.port, [], [], ("[::1]", "[::1]:8080"))
    assert a == b == ("200", APP_JS)
    assert origin_count(gwc.origin, "/c/app.js") == 2


def test_host_standing_in_for_authority_is_in_the_coalescing_key(gwc):
    """RFC 9113 §8.3.1, RFC 9110 §7.2: an HTTP/2 request without :authority names its origin
    with Host, which is what the origin is told; the key held the empty :authority, so a
    request for b.test joined one for a.test in flight and got a.test's answer."""
    cl = Client(gwc.port, validate=False)
    sids = []
    for host in ("a.test", "b.test"):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/c/host"), (":scheme", "http"),
                                ("host", host)], end_stream=True)
        sids.append(sid)
    cl.flush()
    run = collect(cl, Streams(), all_done(sids), timeout=10)
    cl.close()
    assert [run.bodies.get(s) for s in sids] == [b"a.test", b"b.test"], run.bodies
    assert origin_count(gwc.origin, "/c/host") == 2


def test_get_with_body_not_coalesced(gwc):
    cl = Client(gwc.port)
    a = cl.c.get_next_available_stream_id()
    cl.c.send_headers(a, [(":method", "GET"), (":path", "/c/app.js"), (":scheme", "http"),
                          (":authority", "localhost"), ("content-length", "3")])
    cl.c.send_data(a, b"abc", end_stream=True)
    b = cl.request("/c/app.js")
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamEnded) for x in e) >= 2, timeout=10)
    cl.close()
    assert {x.stream_id for x in evs if isinstance(x, h2.events.StreamEnded)} == {a, b}
    assert origin_count(gwc.origin, "/c/app.js") == 2
    assert [q.body for q in gwc.origin.requests] in ([b"abc", b""], [b"", b"abc"])


def proto_answers(clients):
    """GET /c/proto (the origin answers with the scheme it was told) on each (client, :scheme),
    all sent before any answer is read; the bodies, in order."""
    sids = []
    for cl, scheme in clients:
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/c/proto"), (":scheme", scheme),
                                (":authority", "localhost")], end_stream=True)
        cl.flush()
        sids.append(sid)
    got = []
    for (cl, _), sid in zip(clients, sids):
        evs = cl.events(lambda e: any(isinstance(x, h2.events.StreamEnded) for x in e), timeout=10)
        got.append(b"".join(e.data for e in evs if isinstance(e, h2.events.DataReceived)))
        cl.close()
    return got


def test_scheme_is_in_the_coalescing_key(gateway, corigin):
    """The cleartext and TLS listeners share the route: an http request's answer must not
    reach an https client that asked at the same time."""
    port, tls_port = free_port(), free_port()
    gateway(config(port, corigin.port, tls_port=tls_port),
            wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    got = proto_answers([(Client(port), "http"), (Client(tls_port, tls=True), "https")])
    assert got == [b"http", b"https"]
    assert origin_count(corigin, "/c/proto") == 2


def test_coalescing_key_scheme_is_the_listeners_not_the_clients(gateway, corigin):
    """A cleartext client that claims `:scheme: https` is told apart from a TLS client all the
    same: the origin is told the listener's scheme, so the key holds that one,
    and the cleartext client never gets the answer made for https."""
    port, tls_port = free_port(), free_port()
    gateway(config(port, corigin.port, tls_port=tls_port),
            wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    got = proto_answers([(Client(tls_port, tls=True), "https"), (Client(port), "https")])
    assert got == [b"https", b"http"]
    assert origin_count(corigin, "/c/proto") == 2


# ---- coalesce_headers naming a field twice -------------------------------------------------------

def test_coalesce_headers_naming_a_field_twice_with_a_long_value(gateway, corigin):
    """[accept, Accept]: the key was sized for each field once but written once per matching
    name, so a long accept value overflowed the heap with client bytes (under ASan the gateway
    aborts; the fixture fails on its report)."""
    port = free_port()
    g = gateway(config(port, corigin.port).replace(
        "    upstream: app\n", "    upstream: app\n    coalesce_headers: [accept, Accept]\n"),
        wait=[("127.0.0.1", port)])
    accept = "text/html;q=0.9," * 1000
    got = many_gets(port, "/c/app.js", 3, extra=[("accept", accept), ("Accept".lower(), accept)])
    assert all(v == ("200", APP_JS) for v in got.values()), got
    assert origin_count(corigin, "/c/app.js") == 1
    assert g.proc.poll() is None


# ---- responses that must not be shared -----------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/c/status/302", "/c/status/307", "/c/status/500", "/c/status/503", "/c/status/400",
    "/c/hdr/vary?*", "/c/hdr/vary?accept-encoding,%20*", "/c/hdr/vary?user-agent",
    "/c/hdr/cache-control?no-cache", "/c/hdr/cache-control?no-store",
    "/c/hdr/cache-control?private", "/c/hdr/cache-control?max-age=60,%20Private",
    "/c/hdr/set-cookie?id=1",
])
def test_unshareable_response_followers_refetch(gwc, path):
    got = many_gets(gwc.port, path, 10)
    st = path.split("/")[3] if "/status/" in path else "200"
    body = f"status {st}\n".encode() if "/status/" in path else pattern(100)
    assert all(v == (st, body) for v in got.values()), got
    assert origin_count(gwc.origin, path) == 10


@pytest.mark.parametrize("path", [
    "/c/status/404", "/c/status/301", "/c/hdr/vary?Accept-Encoding",
    "/c/hdr/cache-control?public,%20max-age=60",
])
def test_shareable_response_is_shared(gwc, path):
    got = many_gets(gwc.port, path, 10)
    assert len({v for v in got.values()}) == 1
    assert origin_count(gwc.origin, path) == 1


def test_explicit_freshness_makes_a_302_shareable(gwc):
    # RFC 9111 §3: a status that is not heuristically cacheable, with max-age
    path = "/c/hdr/cache-control?max-age=60"
    got = many_gets(gwc.port, path, 5)
    assert all(v == ("200", pattern(100)) for v in got.values())
    assert origin_count(gwc.origin, path) == 1


# ---- the response held once for every subscriber -------------------------------------------------

def test_followers_on_one_connection_make_one_origin_request(gwc):
    """50 identical GETs for 200 KB on ONE connection with python3-h2's default 64 KiB windows:
    the scheduler serves the streams one after another, so the later ones wait with the body
    held for them; they used to fall body_buffer behind and detach (49 origin requests)."""
    n, size = 50, 200 * 1000
    got = many_gets(gwc.port, f"/bytes/{size}", n, wide_windows=False)
    want = pattern(size)
    assert len(got) == n
    assert all(v == ("200", want) for v in got.values())
    assert origin_count(gwc.origin, f"/bytes/{size}") == 1


def test_trailers_reach_followers_that_finish_after_the_origin(gwc):
    """The followers on one connection reach the end of the body after the origin is done:
    the trailers are held with the body and sent to each of them."""
    n, size = 5, 300000
    cl = Client(gwc.port)
    sids = []
    for _ in range(n):  # in one flight: all wait for the head
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", f"/chunked/{size}"),
                                (":scheme", "http"), (":authority", "localhost")], end_stream=True)
        sids.append(sid)
    cl.flush()
    trailers, bodies = {}, {s: b"" for s in sids}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(trailers) < n:
        got = cl.events(lambda e: len(e) > 0, timeout=2)
        if not got:
            break
        for e in got:
            if isinstance(e, h2.events.DataReceived):
                bodies[e.stream_id] += e.data
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.TrailersReceived):
                trailers[e.stream_id] = dict(e.headers)
        cl.flush()
    cl.close()
    want = pattern(size)
    sha = hashlib.sha1(want).hexdigest()
    assert all(bodies[s] == want for s in sids)
    assert all(trailers.get(s, {}).get("x-checksum") == sha for s in sids), trailers
    assert origin_count(gwc.origin, f"/chunked/{size}") == 1


def test_cookie_set_in_the_trailers_reaches_only_its_own_client(gwc):
    """A shareable answer (no Set-Cookie in its head) whose trailer section sets a cookie: the
    trailers were held once and sent to every subscriber, so each follower got the session the
    origin gave the leader's client. A response that sets a cookie is never shared (RFC 9111
    §7.3 leaves it to the cache; RFC 9110 §6.5.1: Set-Cookie is no trailer field)."""
    n = 4
    path = "/c/trailer/set-cookie?sid=alice"
    cl = Client(gwc.port)
    sids = []
    for _ in range(n):  # in one flight: all wait for the head
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                (":authority", "localhost")], end_stream=True)
        sids.append(sid)
    cl.flush()
    evs = cl.events(lambda e: sum(isinstance(x, (h2.events.StreamEnded, h2.events.StreamReset))
                                  for x in e) >= n, timeout=10)
    cl.close()
    bodies = {s: b"" for s in sids}
    cookies = {s: [] for s in sids}
    for e in evs:
        if isinstance(e, h2.events.DataReceived):
            bodies[e.stream_id] += e.data
        elif isinstance(e, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
            cookies[e.stream_id] += [v for k, v in e.headers if k == "set-cookie"]
    assert all(b == pattern(100) for b in bodies.values()), bodies
    # the origin's cookie reaches one client per origin request, never more
    assert sum(len(c) for c in cookies.values()) <= origin_count(gwc.origin, path), cookies


def test_coalesced_head_requests(gwc):
    cl = Client(gwc.port)
    sids = [cl.request("/c/app.js", method="HEAD") for _ in range(5)]
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamEnded) for x in e) >= 5,
                    timeout=10)
    cl.close()
    heads = [dict(e.headers) for e in evs if isinstance(e, h2.events.ResponseReceived)]
    assert len(heads) == 5 and all(h[":status"] == "200" for h in heads)
    assert all(h["content-length"] == str(len(APP_JS)) for h in heads)
    assert not any(isinstance(e, h2.events.DataReceived) and e.data for e in evs)
    assert sorted(e.stream_id for e in evs if isinstance(e, h2.events.StreamEnded)) == sids
    assert origin_count(gwc.origin, "/c/app.js") == 1


class Conn:
    """One h2c connection of the fan-out test, read without blocking."""

    def __init__(self, port, window, stalled=False):
        self.cl = Client(port)
        self.window, self.stalled = window, stalled
        self.cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        if window > 65535:
            self.cl.c.increment_flow_control_window(window * 10)
        self.cl.flush()
        self.bodies, self.status, self.done = {}, {}, set()

    def get(self, path, extra=()):
        sid = self.cl.c.get_next_available_stream_id()
        self.cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                     (":authority", "localhost"), *extra], end_stream=True)
        self.bodies[sid] = bytearray()
        return sid

    def drain(self):
        """Read what has arrived, without waiting."""
        self.cl.s.setblocking(False)
        try:
            while True:
                self.read()
        except BlockingIOError:
            pass
        self.cl.s.setblocking(True)

    def open(self):
        """The stalled reader starts reading."""
        self.stalled = False
        self.cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
        self.cl.c.increment_flow_control_window(1 << 24)
        self.cl.flush()

    def read(self):
        data = self.cl.s.recv(1 << 20)
        if not data:
            raise ConnectionError("gateway closed the connection")
        for e in self.cl.c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                self.status[e.stream_id] = dict(e.headers)[":status"]
            elif isinstance(e, h2.events.DataReceived):
                self.bodies[e.stream_id] += e.data
                self.cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                self.done.add(e.stream_id)
        self.cl.flush()


@pytest.mark.serial
def test_fanout_over_ten_connections_is_bounded_and_a_stalled_follower_detaches(
        gateway, corigin):
    """100 followers over 10 connections with windows from 16 KiB to 1 MiB (incremental
    priority, so the streams of a connection advance together), a late reader whose window
    opens when the others have ~200 KiB (more than body_buffer behind, less than
    coalesce_buffer), and a follower whose window stays shut. The response is held once, so
    the gateway's memory stays near limits.coalesce_buffer whatever the number of
    subscribers; the late reader stays attached (it used to detach at body_buffer); the shut
    one falls coalesce_buffer behind, detaches, fetches on its own, and still gets the whole
    body once it reads."""
    port = free_port()
    g = gateway(config(port, corigin.port,
                       extra="limits:\n  body_buffer: 64KiB\n  coalesce_buffer: 256KiB\n"),
                wait=[("127.0.0.1", port)])
    size = 768 * 1024
    path = f"/c/gated/{size}"
    # The origin sends what the test releases: 32 KiB more once every reader that keeps up has
    # all but 64 KiB of it, so a reader is never more than 96 KiB behind the origin however
    # slowly this client runs; 192 KiB at most until the late reader opens (then it is 192 KiB
    # behind: past body_buffer, short of coalesce_buffer). Only the shut one falls
    # coalesce_buffer behind.
    step, ahead, before_late = 32 * 1024, 64 * 1024, 192 * 1024
    windows = [16384, 32768, 65535, 65535, 131072, 262144, 262144, 524288, 1 << 20, 1 << 20]
    conns = [Conn(port, w) for w in windows]
    late, stalled = Conn(port, 0), Conn(port, 0)
    time.sleep(0.3)
    for c in conns + [late, stalled]:
        c.drain()  # SETTINGS and their ACK
    base = rss_kib(g.proc.pid)
    for c in conns:
        for _ in range(10):
            c.get(path, [("priority", "u=3, i")])
        c.cl.flush()
    lsid, ssid = late.get(path), stalled.get(path)
    late.cl.flush()
    stalled.cl.flush()
    peak = base
    deadline = time.monotonic() + 120
    socks = {c.cl.s: c for c in conns}
    while time.monotonic() < deadline and not (all(len(c.done) == 10 for c in conns) and
                                               lsid in late.done):
        r, _, _ = select.select(list(socks), [], [], 0.2)
        for s in r:
            socks[s].read()
        keeping_up = conns + ([late] if late.cl.s in socks else [])
        got = min(len(b) for c in keeping_up for b in c.bodies.values())
        if late.cl.s not in socks and got >= before_late:
            late.open()
            socks[late.cl.s] = late
        cap = size if late.cl.s in socks else before_late
        if corigin.allowed < cap and got >= corigin.allowed - ahead:
            corigin.release(min(cap, corigin.allowed + step))
        peak = max(peak, rss_kib(g.proc.pid))
    want = pattern(size)
    for c in conns:
        assert len(c.done) == 10, (c.window, len(c.done))
        for sid, b in c.bodies.items():
            assert c.status.get(sid) == "200" and bytes(b) == want, (c.window, sid, len(b))
    assert late.status.get(lsid) == "200" and bytes(late.bodies[lsid]) == want
    # the shut follower was coalesce_buffer behind: it detached and fetched on its own
    log = g.wait_log("event=coalesce_detach")
    assert log.count("event=coalesce_detach") == 1
    stalled.open()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ssid not in stalled.done:
        r, _, _ = select.select([stalled.cl.s], [], [], 0.2)
        if r:
            stalled.read()
    assert stalled.status.get(ssid) == "200"
    assert bytes(stalled.bodies[ssid]) == want
    # one shared exchange for the 101 that kept up, one for the follower that detached
    assert origin_count(corigin, path) == 2
    grown = peak - base
    print(f"gateway RSS grew {grown} KiB for 102 subscribers of a {size // 1024} KiB response")
    # the span (256 KiB) + what the streams hold (64 KiB each, references into the same
    # buffers) + the detached exchange + the connections' buffers; a copy per subscriber
    # would be 102 × 768 KiB
    assert grown < 6 * 1024, f"RSS grew {grown} KiB"
    for c in conns + [late, stalled]:
        c.cl.close()


# ---- interim answers and credentials: nothing reaches a follower before "may it share?" ----------

# A /hints-for/ page of the scripted origin: its 103 half-way, its answer at the end. The
# follower of leader_and_follower must reach the gateway before that answer (else it makes an
# exchange of its own: other counts, and a 103 of its own), after this process saw the request
# at the origin and sent it: 500 ms in a plain build, scaled for a loaded sanitizer build.
HINTS = f"/hints-for/{slow(500):.0f}"


def leader_and_follower(origin, port, path, leader, follower):
    """GET path (a /hints-for/ page of the scripted origin: its 103 comes half-way to its
    answer) with the fields leader on one connection; once the origin has it, the same GET
    with the fields follower on another connection: it joins the waiting exchange before the
    origin's 103. Both read to their end: (Streams, stream id) of the leader, then the
    follower's."""
    a, b = Client(port), Client(port)
    sa = a.request(path, extra=[("sec-fetch-mode", "navigate"), *leader])
    assert wait_origin_has(origin, path, 1) >= 1
    sb = b.request(path, extra=[("sec-fetch-mode", "navigate"), *follower])
    ra = collect(a, Streams(), all_done([sa]))
    rb = collect(b, Streams(), all_done([sb]))
    a.close()
    b.close()
    assert sa in ra.interim, "the leader got no 103"
    return (ra, sa), (rb, sb)


def links_103(run, sid):
    """The Link values of every 103 sid received."""
    return [v for h in run.interim.get(sid, []) for k, v in h if k == "link"]


def test_103_not_sent_to_followers_of_a_private_answer(gateway, origin):
    """coalesce_private: Alice and Bob both send a session cookie, so they may share an
    exchange; the origin's 103 names Alice's inbox, its final answer is private. Bob used to
    get Alice's 103 at once (and then no 103 of his own: one per request)."""
    admin = free_port()
    g = origin_gateway(gateway, origin, route_extra="coalesce_private: true", admin=admin)
    (ra, sa), (rb, sb) = leader_and_follower(
        origin, g.port, HINTS + "?h=Cache-Control:private",
        [("cookie", "session=alice")], [("cookie", "session=bob")])
    assert ra.status(sa) == 200 and rb.status(sb) == 200
    assert ra.bodies[sa] == b"Hello session=alice" and rb.bodies[sb] == b"Hello session=bob"
    assert "session=alice" in " ".join(links_103(ra, sa))
    bob = links_103(rb, sb)
    assert not any("alice" in v for v in bob), bob
    # his own exchange's 103 reached him
    assert any("/private/session=bob/inbox.json" in v for v in bob), bob
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_coalesced_total") == 1  # Bob did join Alice's exchange
    assert origin_count(origin, HINTS + "?h=Cache-Control:private") == 2


def test_103_not_sent_to_followers_of_an_answer_that_varies(gateway, origin):
    """The default route: accept-language is not in the key, so an `en` reader joins a `fr`
    reader's exchange; the origin's 103 preloads fr.css and its final answer says
    Vary: accept-language (not shared). The `en` reader used to get </lang/fr.css>."""
    admin = free_port()
    g = origin_gateway(gateway, origin, admin=admin)
    path = HINTS + "?h=Vary:accept-language"
    (ra, sa), (rb, sb) = leader_and_follower(origin, g.port, path, [("accept-language", "fr")],
                                             [("accept-language", "en")])
    assert ra.bodies[sa] == b"Hello anonymous in fr" and rb.bodies[sb] == b"Hello anonymous in en"
    assert links_103(ra, sa) == ["</lang/fr.css>; rel=preload; as=style"]
    assert links_103(rb, sb) == ["</lang/en.css>; rel=preload; as=style"]
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_coalesced_total") == 1
    assert origin_count(origin, path) == 2


def test_answer_to_a_cancelled_leader_not_given_to_its_follower(gateway, origin):
    """The leader's client resets its stream while the exchange waits: the follower was left
    alone in it and got the leader's answer whatever it said (only more than one subscriber
    was checked), here a page in French for a reader of English with Vary: accept-language.
    It fetches on its own."""
    g = origin_gateway(gateway, origin)
    path = HINTS + "?h=Vary:accept-language"
    a, b = Client(g.port), Client(g.port)
    sa = a.request(path, extra=[("sec-fetch-mode", "navigate"), ("accept-language", "fr")])
    assert wait_origin_has(origin, path, 1) >= 1
    sb = b.request(path, extra=[("sec-fetch-mode", "navigate"), ("accept-language", "en")])
    assert sa in collect(a, Streams(), lambda r: sa in r.interim).interim
    a.c.reset_stream(sa)
    a.flush()
    rb = collect(b, Streams(), all_done([sb]))
    a.close()
    b.close()
    assert rb.bodies.get(sb) == b"Hello anonymous in en", rb.bodies
    assert links_103(rb, sb) == ["</lang/en.css>; rel=preload; as=style"]
    assert origin_count(origin, path) == 2


def test_103_held_for_followers_reaches_them_when_the_answer_is_shared(gateway, origin):
    """A shareable answer: the follower gets the 103 the exchange got (held until the final
    head said it may share), then the shared answer; one origin request."""
    admin = free_port()
    g = origin_gateway(gateway, origin, admin=admin)
    (ra, sa), (rb, sb) = leader_and_follower(origin, g.port, HINTS,
                                             [("accept-language", "fr")], [])
    assert ra.bodies[sa] == rb.bodies[sb] == b"Hello anonymous in fr"
    assert links_103(rb, sb) == links_103(ra, sa) == ["</lang/fr.css>; rel=preload; as=style"]
    assert origin_count(origin, HINTS) == 1


def test_103_carries_only_link_fields(gateway, origin):
    """RFC 8297: a 103 hints at the final answer's Link fields; whatever else an origin puts
    in one (a cookie, a field about the user) is not relayed."""
    g = origin_gateway(gateway, origin)
    cl = Client(g.port)
    sid = cl.request("/hints-for/10?i=Set-Cookie:sid%3Dalice&i=X-User:alice",
                     extra=[("sec-fetch-mode", "navigate")])
    run = collect(cl, Streams(), all_done([sid]))
    cl.close()
    assert run.status(sid) == 200
    (head,) = run.interim[sid]
    assert [k for k, _ in head if not k.startswith(":")] == ["link"], head


def test_cookie_holders_page_not_shared_with_an_anonymous_follower(gateway, origin):
    """coalesce_private: Alice's request with a session cookie and an anonymous one used to
    share a key (only Authorization was told apart), and her page went to the anonymous
    client."""
    g = origin_gateway(gateway, origin, route_extra="coalesce_private: true")
    (ra, sa), (rb, sb) = leader_and_follower(origin, g.port, HINTS,
                                             [("cookie", "session=alice-secret")], [])
    assert ra.bodies[sa] == b"Hello session=alice-secret"
    assert rb.bodies[sb] == b"Hello anonymous"
    assert origin_count(origin, HINTS) == 2


def test_cookie_holders_page_shared_only_when_a_shared_cache_could(gateway, origin):
    """RFC 9111 §3.5 for Cookie as for Authorization: two cookie holders share an exchange,
    but the answer goes to both only when it says public, s-maxage or must-revalidate."""
    admin = free_port()
    g = origin_gateway(gateway, origin, route_extra="coalesce_private: true", admin=admin)
    (ra, sa), (rb, sb) = leader_and_follower(origin, g.port, HINTS,
                                             [("cookie", "session=alice")],
                                             [("cookie", "session=bob")])
    assert ra.bodies[sa] == b"Hello session=alice" and rb.bodies[sb] == b"Hello session=bob"
    path = HINTS + "?h=Cache-Control:public"
    (ra, sa), (rb, sb) = leader_and_follower(origin, g.port, path, [("cookie", "session=alice")],
                                             [("cookie", "session=bob")])
    assert ra.bodies[sa] == rb.bodies[sb] == b"Hello session=alice"  # the operator's word
    assert origin_count(origin, path) == 1
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_coalesced_total") == 2
