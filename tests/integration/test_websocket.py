"""WebSocket through the gateway: a real WebSocket echo origin
(python3-websockets, ws_origin.py) and clients no one here wrote: python3-websockets over
HTTP/1.1 (ws:// and wss://)."""
import asyncio
import os
import socket
import subprocess
import time

import pytest
import websockets
import websockets.exceptions  # a submodule: the package's lazy attributes do not name it

from procs import free_port, recv_head, sanitized, slow, wait_port
from gwtest import check_config, gw_config, two_upstream_config
from ws_origin import spawn


@pytest.fixture
def wsorigin():
    p = spawn(free_port())
    yield p
    p.terminate()
    p.wait(10)


def wsgw(gateway, wsorigin, route_extra="", extra="", tls=False):
    port, tls_port = free_port(), (free_port() if tls else None)
    g = gateway(gw_config(port, [f"127.0.0.1:{wsorigin.port}"], route_extra=route_extra,
                          extra=extra, tls_port=tls_port),
                wait=[("127.0.0.1", port)] + ([("127.0.0.1", tls_port)] if tls else []))
    g.port, g.tls_port = port, tls_port
    return g


def ssl_ctx():
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def echo_session(uri, messages, **kw):
    async with websockets.connect(uri, max_size=None, compression=None, **kw) as ws:
        for m in messages:
            await ws.send(m)
            got = await ws.recv()
            assert got == m, (type(m), len(m), type(got), len(got))
        return ws.response_headers


def refused_status(uri):
    """The status of the answer with which the gateway refuses a WebSocket opening to uri
    (python3-websockets over HTTP/1.1); fails if it is accepted."""
    async def go():
        with pytest.raises(websockets.exceptions.InvalidStatusCode) as e:
            async with websockets.connect(uri):
                pass
        return e.value.status_code
    return asyncio.run(go())


def sizes_mix(n):
    """n messages, text and binary, from 1 B to 1 MiB."""
    out = []
    sizes = [1, 2, 125, 126, 127, 65535, 65536, 100000, 1 << 20]
    for i in range(n):
        size = sizes[i % len(sizes)] if i % 10 == 0 else 1 + (i * 7919) % 4096
        out.append(("x" * size) if i % 2 else os.urandom(size))
    return out


def test_h1_ws_echo_1000_messages(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)
    msgs = sizes_mix(1000)
    asyncio.run(echo_session(f"ws://127.0.0.1:{g.port}/", msgs))


def test_h1_wss_echo_over_tls(gateway, wsorigin):
    g = wsgw(gateway, wsorigin, tls=True)
    msgs = sizes_mix(200)
    asyncio.run(echo_session(f"wss://localhost:{g.tls_port}/", msgs, ssl=ssl_ctx()))


def test_h1_ws_subprotocol_passes(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/protocol",
                                      subprotocols=["superchat"]) as ws:
            assert ws.subprotocol == "superchat"
            assert await ws.recv() == "superchat"
    asyncio.run(go())


def test_h1_ws_route_off_is_refused_by_origin(gateway, wsorigin):
    """websocket: false: Upgrade is dropped as hop-by-hop, as before; the origin refuses a
    plain GET (websockets answers 426 Upgrade Required), the client sees that refusal."""
    g = wsgw(gateway, wsorigin, route_extra="websocket: false")
    assert refused_status(f"ws://127.0.0.1:{g.port}/") == 426


def test_h1_upgrade_h2c_still_dropped(gateway, origin):
    """Upgrade: h2c never reaches the origin (request smuggling vector), websocket or not."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                  b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
        time.sleep(0.5)
        data = s.recv(65536)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    got = [q for q in origin.requests if q.target == "/echo"]
    assert got and not got[0].header("upgrade") and not got[0].header("http2-settings")


# ---- RFC 8441 over HTTP/2: python3-h2 speaking extended CONNECT, frames made here ----------------

import struct

import h2.events
import h2.settings

from gwtest import Client


def ws_frame(opcode, payload, mask=True):
    """One WebSocket frame (RFC 6455 §5.2), masked as a client's must be."""
    b0 = 0x80 | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_parse_one(buf):
    """The first complete frame of buf: ((opcode, payload), bytes it took), or (None, 0)."""
    if len(buf) < 2:
        return None, 0
    op, n = buf[0] & 0x0f, buf[1] & 0x7f
    masked = buf[1] & 0x80
    off = 2
    if n == 126:
        if len(buf) < 4:
            return None, 0
        n = struct.unpack("!H", buf[2:4])[0]
        off = 4
    elif n == 127:
        if len(buf) < 10:
            return None, 0
        n = struct.unpack("!Q", buf[2:10])[0]
        off = 10
    if masked:
        off += 4
    if len(buf) < off + n:
        return None, 0
    payload = buf[off:off + n]
    if masked:
        key = buf[off - 4:off]
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return (op, payload), off + n


def listeners_on(port):
    """What `ss -ltnp` says listens on TCP port (the processes, when we may see them)."""
    import subprocess
    try:
        r = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True,
                           timeout=10)
        return r.stdout.strip() or "nothing"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"


class H2WebSocket:
    """An RFC 8441 WebSocket on one python3-h2 connection (h2c or TLS)."""

    def __init__(self, port, tls=False, path="/", extra=()):
        self.cl = Client(port, tls=tls)
        self.cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 22})
        self.cl.c.increment_flow_control_window(1 << 26)
        self.cl.flush()
        self.settings = {}
        self.sid = None
        self.buf = b""
        self.ended = False
        self.reset = None
        self.headers = None
        # the server's SETTINGS first
        deadline = time.monotonic() + slow(5)
        try:
            while time.monotonic() < deadline and not self.settings:
                self._read()
        except ConnectionError as e:
            # h2c: the gateway sends its SETTINGS once it read the client's preface; a close
            # before them was seen once under load and not explained: who listened on the port
            # (the gateway, or another process that took it) is what the next one must say
            raise ConnectionError(f"closed before the gateway's SETTINGS ({e}); listening on "
                                  f"{port}: {listeners_on(port)}") from e
        self.path, self.extra = path, extra

    def _read(self, timeout=slow(5)):
        self.cl.s.settimeout(timeout)
        data = self.cl.s.recv(1 << 20)
        if not data:
            raise ConnectionError("closed")
        for e in self.cl.c.receive_data(data):
            if isinstance(e, h2.events.RemoteSettingsChanged):
                self.settings.update({k: v.new_value for k, v in e.changed_settings.items()})
            elif isinstance(e, h2.events.ResponseReceived):
                self.headers = dict(e.headers)
            elif isinstance(e, h2.events.DataReceived):
                self.buf += e.data
                self.cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                self.ended = True
            elif isinstance(e, h2.events.StreamReset):
                self.reset = e.error_code
        self.cl.flush()

    def open(self):
        self.sid = self.cl.c.get_next_available_stream_id()
        self.cl.c.send_headers(self.sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                                          (":scheme", "http"), (":path", self.path),
                                          (":authority", "localhost"),
                                          ("sec-websocket-version", "13"), *self.extra])
        self.cl.flush()
        deadline = time.monotonic() + slow(5)
        while self.headers is None and self.reset is None and time.monotonic() < deadline:
            self._read()
        return self.headers

    def send(self, opcode, payload):
        data = ws_frame(opcode, payload)
        while data:
            room = min(self.cl.c.local_flow_control_window(self.sid), 16384)
            if room <= 0:
                self._read()
                continue
            self.cl.c.send_data(self.sid, data[:room])
            data = data[room:]
            self.cl.flush()

    def recv(self, timeout=10):
        """The next frame from the origin, or None when the stream ended first."""
        deadline = time.monotonic() + timeout
        while True:
            frame, took = ws_parse_one(self.buf)
            if frame:
                self.buf = self.buf[took:]
                return frame
            if self.ended or self.reset is not None or time.monotonic() > deadline:
                return None
            self._read()


def test_rfc8441_h2c_echo_and_close(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)
    ws = H2WebSocket(g.port)
    assert ws.settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL) == 1
    hd = ws.open()
    assert hd and hd[":status"] == "200", (hd, ws.reset)
    assert "sec-websocket-accept" not in hd
    for m in sizes_mix(300):
        if isinstance(m, str):
            ws.send(0x1, m.encode())
            assert ws.recv() == (0x1, m.encode())
        else:
            ws.send(0x2, m)
            assert ws.recv() == (0x2, m)
    # the close handshake (RFC 6455 §5.5.1): the origin answers and closes, the stream ends
    ws.send(0x8, struct.pack("!H", 1000))
    assert ws.recv() == (0x8, struct.pack("!H", 1000))
    deadline = time.monotonic() + slow(5)
    while not ws.ended and time.monotonic() < deadline:
        ws._read()
    assert ws.ended
    ws.cl.close()


def test_rfc8441_over_tls(gateway, wsorigin):
    g = wsgw(gateway, wsorigin, tls=True)
    ws = H2WebSocket(g.tls_port, tls=True)
    assert ws.open()[":status"] == "200"
    ws.send(0x1, b"over tls")
    assert ws.recv() == (0x1, b"over tls")
    ws.cl.close()


# ---- errors --------------------------------------------------------------------------------------

def raw_connect(port, headers, validate=False):
    """A python3-h2 client (header validation off) that sends one request head without
    END_STREAM: (status or None, reset code or None)."""
    cl = Client(port, validate=False)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, headers)
    cl.flush()
    status = reset = None
    deadline = time.monotonic() + slow(5)
    while status is None and reset is None and time.monotonic() < deadline:
        cl.s.settimeout(slow(5))
        data = cl.s.recv(65536)
        if not data:
            break
        for e in cl.c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                status = int(dict(e.headers)[":status"])
            elif isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                reset = e.error_code
        cl.flush()
    cl.close()
    # RFC 9113 §8.1: an answer before the request's end is followed by RST_STREAM(NO_ERROR)
    return status, (None if status is not None and reset == 0 else reset)


EXT = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/"),
       (":authority", "localhost"), ("sec-websocket-version", "13")]


def test_rfc8441_malformed_get_stream_errors(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)
    # :protocol on a GET, a CONNECT with :scheme and :path but no :protocol, a :protocol with
    # no :authority: malformed (RFC 8441 §4, RFC 9113 §8.1.1): RST_STREAM PROTOCOL_ERROR
    for hd in ([(":method", "GET"), (":protocol", "websocket"), (":scheme", "http"),
                (":path", "/"), (":authority", "localhost")],
               [(":method", "CONNECT"), (":scheme", "http"), (":path", "/"),
                (":authority", "localhost")],
               [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                (":path", "/")]):
        assert raw_connect(g.port, hd) == (None, 1), hd  # PROTOCOL_ERROR
    # another protocol than websocket: 501
    other = [(k, "smtp" if k == ":protocol" else v) for k, v in EXT]
    assert raw_connect(g.port, other) == (501, None)


def test_rfc8441_without_the_setting(gateway, wsorigin):
    """No route allows WebSocket: the setting is not sent, and :protocol is malformed."""
    g = wsgw(gateway, wsorigin, route_extra="websocket: false")
    cl = Client(g.port)
    evs = cl.events(lambda e: any(isinstance(x, h2.events.RemoteSettingsChanged) for x in e))
    cl.close()
    changed = {}
    for e in evs:
        if isinstance(e, h2.events.RemoteSettingsChanged):
            changed.update({k: v.new_value for k, v in e.changed_settings.items()})
    assert h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS in changed
    assert h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL not in changed
    assert raw_connect(g.port, EXT) == (None, 1)


def test_plain_connect_refused(gateway, wsorigin):
    """A plain CONNECT (RFC 9113 §8.5, a TCP tunnel to :authority) is not something a gateway
    in front of origins does: refused, never sent on."""
    g = wsgw(gateway, wsorigin)
    st, rst = raw_connect(g.port, [(":method", "CONNECT"), (":authority", "127.0.0.1:22")])
    assert (st, rst) == (405, None)
    assert "event=connect_refused" in g.wait_log("connect_refused")


def test_rfc8441_route_without_websocket_501(gateway, wsorigin, origin):
    port = free_port()
    gateway(two_upstream_config(port, wsorigin.port, origin.port), wait=[("127.0.0.1", port)])
    on_app = [(k, "/other" if k == ":path" else v) for k, v in EXT]
    assert raw_connect(port, on_app) == (501, None)
    on_ws = [(k, "/ws/" if k == ":path" else v) for k, v in EXT]
    assert raw_connect(port, on_ws) == (200, None)


@pytest.mark.parametrize("path", ["/ws-bad-accept", "/ws-no-upgrade"])
def test_bad_101_is_502(gateway, origin, path):
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    hd = [(k, path if k == ":path" else v) for k, v in EXT]
    assert raw_connect(port, hd) == (502, None)
    if path == "/ws-no-upgrade":  # HTTP/1.1: the gateway checks Upgrade (the client the rest)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
                      "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
            assert s.recv(65536).startswith(b"HTTP/1.1 502 ")
    assert "event=websocket_bad_101" in g.wait_log("websocket_bad_101")


def test_refused_upgrade_relayed_and_connection_goes_on(gateway, origin):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    hd = [(k, "/ws-refuse" if k == ":path" else v) for k, v in EXT]
    assert raw_connect(port, hd)[0] == 403
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /ws-refuse HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
                  b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        data = b""
        while b"refused\n" not in data:
            data += s.recv(65536)
        assert data.startswith(b"HTTP/1.1 403 ")
        # the same connection carries the next request as HTTP/1.1
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        more = s.recv(65536)
        assert more.startswith(b"HTTP/1.1 200 "), more[:100]


def test_max_tunnels_503(gateway, wsorigin):
    g = wsgw(gateway, wsorigin, extra="limits:\n  max_tunnels: 1\n")
    first = H2WebSocket(g.port)
    assert first.open()[":status"] == "200"
    assert raw_connect(g.port, EXT) == (503, None)
    assert refused_status(f"ws://127.0.0.1:{g.port}/") == 503
    first.cl.close()
    # the tunnel closed with its client: room again
    deadline = time.monotonic() + slow(5)
    while time.monotonic() < deadline:
        if raw_connect(g.port, EXT)[0] == 200:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the closed tunnel was not released")


def test_tunnel_idle_timeout_closes(gateway, wsorigin):
    # Each clock starts before the client's message: the tunnel's last activity (the echo
    # relayed back) comes after it, so the close comes at least idle later, however late this
    # process runs. (It started once the echo was read: a client kept off the CPU for 0.2 x
    # idle between the gateway's relay and its read failed the lower bound.)
    idle = slow(1)
    g = wsgw(gateway, wsorigin, extra=f"timeouts:\n  tunnel_idle: {idle * 1000:.0f}ms\n")
    ws = H2WebSocket(g.port)
    assert ws.open()[":status"] == "200"
    t0 = time.monotonic()
    ws.send(0x1, b"hello")
    assert ws.recv() == (0x1, b"hello")
    while not ws.ended and ws.reset is None and time.monotonic() - t0 < idle + slow(4):
        try:
            ws._read(timeout=1)
        except socket.timeout:
            pass
    assert ws.reset is not None or ws.ended
    assert 0.8 * idle < time.monotonic() - t0 < idle + slow(3)
    assert "event=tunnel_idle_close" in g.wait_log("tunnel_idle_close")

    async def h1():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/") as c:
            t = time.monotonic()
            await c.send("x")
            assert await c.recv() == "x"
            with pytest.raises(websockets.exceptions.ConnectionClosed):
                await asyncio.wait_for(c.recv(), idle + slow(4))
            return time.monotonic() - t
    assert 0.8 * idle < asyncio.run(h1()) < idle + slow(3)


def test_half_close_and_reset(gateway, wsorigin):
    """END_STREAM from the client half-closes the origin side (the echo origin then closes and
    the stream ends); a client's RST_STREAM closes the origin connection."""
    g = wsgw(gateway, wsorigin)
    ws = H2WebSocket(g.port)
    assert ws.open()[":status"] == "200"
    ws.send(0x1, b"a")
    assert ws.recv() == (0x1, b"a")
    ws.cl.c.end_stream(ws.sid)
    ws.cl.flush()
    deadline = time.monotonic() + slow(5)
    while not ws.ended and ws.reset is None and time.monotonic() < deadline:
        ws._read()
    assert ws.ended or ws.reset is not None
    ws.cl.close()


def test_reload_keeps_tunnels_until_tunnel_drain(gateway, wsorigin):
    """A reload: the old generation's connections close at graceful_shutdown, except those with
    tunnels, which keep working until timeouts.tunnel_drain and are closed then, so the old
    generation goes. New tunnels open on the new generation meanwhile. (HTTP/1.1 tunnels:
    python3-h2 ends its whole connection on the reload's GOAWAY, so it cannot show an HTTP/2
    tunnel going on after one.)"""
    import signal
    # the exchanges 2 s after the reload must come before tunnel_drain: slow(1) of slack
    drain = 2.0 + slow(1)
    g = wsgw(gateway, wsorigin,
             extra=f"timeouts:\n  graceful_shutdown: 1s\n  tunnel_drain: {drain * 1000:.0f}ms\n"
                   "  drain_grace: 100ms\n")

    async def session():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/") as c, \
                websockets.connect(f"ws://127.0.0.1:{g.port}/") as d:
            await c.send("before")
            assert await c.recv() == "before"
            t0 = time.monotonic()
            g.signal(signal.SIGHUP)
            await asyncio.sleep(2.0)  # past graceful_shutdown, before tunnel_drain
            for ws in (c, d):
                await ws.send("during")
                assert await ws.recv() == "during"
            # a new tunnel, on the new generation, lives on after the old one's end
            async with websockets.connect(f"ws://127.0.0.1:{g.port}/") as n:
                with pytest.raises(websockets.exceptions.ConnectionClosed):
                    await asyncio.wait_for(c.recv(), drain + slow(2))
                closed = time.monotonic() - t0
                await n.send("new")
                assert await n.recv() == "new"
            return closed
    closed_after = asyncio.run(session())
    assert drain - 0.5 < closed_after < drain + slow(2), closed_after
    log = g.wait_log("event=drain_tunnels")
    assert "event=drain_tunnels" in log and "connections=2" in log, log[-2000:]


# ---- backpressure --------------------------------------------------------------------------------

@pytest.mark.serial
def test_backpressure_client_not_reading_100mib(gateway, wsorigin):
    """The origin sends 100 MiB while the client reads nothing (python3-websockets stops
    reading its socket when its queue is full): the gateway stops reading the origin, its RSS
    stays within the buffer bound; then the client reads all of it."""
    if sanitized():  # 100 MiB through the ASan build proves nothing the plain build does not
        pytest.skip("sanitizer builds keep freed memory in quarantine: RSS says nothing")
    from procs import rss_kib
    g = wsgw(gateway, wsorigin)
    size = 100 << 20

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/flood/{size}", max_size=None,
                                      max_queue=4) as c:
            base = rss_kib(g.proc.pid)
            peak = base
            for _ in range(20):
                await asyncio.sleep(0.1)
                peak = max(peak, rss_kib(g.proc.pid))
            got = 0
            async for m in c:
                got += len(m)
            return got, peak - base
    got, grown = asyncio.run(go())
    assert got == size
    print(f"RSS grew {grown} KiB while the client did not read")
    assert grown < 8 * 1024 or sanitized(), grown  # ASan: quarantine


@pytest.mark.serial
def test_backpressure_h2_client_not_reading(gateway, wsorigin):
    if sanitized():  # 100 MiB through the ASan build proves nothing the plain build does not
        pytest.skip("sanitizer builds keep freed memory in quarantine: RSS says nothing")
    from procs import rss_kib
    g = wsgw(gateway, wsorigin)
    size = 100 << 20
    ws = H2WebSocket(g.port, path=f"/flood/{size}")
    ws.cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
    ws.cl.flush()
    assert ws.open()[":status"] == "200"
    base = rss_kib(g.proc.pid)
    time.sleep(2)  # nothing credited beyond the first window: the origin must wait
    grown = rss_kib(g.proc.pid) - base
    got = 0
    while True:
        f = ws.recv(timeout=20)
        if f is None or f[0] == 0x8:
            break
        got += len(f[1])
    assert got == size
    assert grown < 8 * 1024 or sanitized(), grown  # ASan: quarantine
    ws.cl.close()


def rcvbuf_beyond_debian():
    """Bytes a TCP receive buffer may autotune to beyond Debian's default maximum (6 MiB,
    net.ipv4.tcp_rmem): some kernels allow 32 MiB, and a buffer read fast before its reader
    stopped (the gateway's, the origin's) keeps its size, so the client can park that much more
    in the kernel."""
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            rmem_max = int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, rmem_max - (6 << 20))


@pytest.mark.serial
def test_backpressure_origin_not_reading(gateway, wsorigin):
    """The client sends while the origin reads nothing: the gateway stops reading the client
    (HTTP/1.1) or granting window (HTTP/2) once its buffer bound is full: what it took is
    bounded by that and the sockets' buffers, and so is its RSS."""
    from procs import rss_kib
    from gwtest import send_for
    g = wsgw(gateway, wsorigin)
    base = rss_kib(g.proc.pid)
    s = socket.create_connection(("127.0.0.1", g.port), timeout=5)
    s.sendall(b"GET /sleep HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
              b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 101 "), head
    junk = ws_frame(0x2, b"j" * (1 << 20)) * 100  # 100 MiB of frames, never read
    sent = send_for(s, junk, 3)
    grown = rss_kib(g.proc.pid) - base
    print(f"HTTP/1.1: the client got {sent >> 10} KiB in, RSS grew {grown} KiB")
    # socket buffers, the bound, the origin's 2 messages
    assert sent < (24 << 20) + rcvbuf_beyond_debian(), sent
    assert grown < 8 * 1024 or sanitized(), grown  # ASan: quarantine
    s.close()
    # HTTP/2: the window is credited only for what reached the origin
    ws = H2WebSocket(g.port, path="/sleep")
    assert ws.open()[":status"] == "200"
    frame, t0, sent = ws_frame(0x2, b"k" * (1 << 20)), time.monotonic(), 0
    while time.monotonic() - t0 < 3:
        room = min(ws.cl.c.local_flow_control_window(ws.sid), 16384)
        if room <= 0:
            try:
                ws._read(timeout=0.2)
            except socket.timeout:
                pass
            continue
        off = sent % len(frame)  # a stream of whole frames, one after the other
        piece = frame[off:off + room]
        ws.cl.c.send_data(ws.sid, piece)
        ws.cl.flush()
        sent += len(piece)
    assert ws.reset is None and not ws.ended
    grown = rss_kib(g.proc.pid) - base
    print(f"HTTP/2: {sent >> 10} KiB sent, RSS grew {grown} KiB")
    # socket buffers, the bound, the origin's 2 messages; the origin's receive buffer grew
    # while it read those fast, like the gateway's above
    assert sent < (24 << 20) + rcvbuf_beyond_debian(), sent
    assert grown < 8 * 1024 or sanitized(), grown  # ASan: quarantine
    ws.cl.close()


def test_tunnels_outside_the_pool_cap(gateway, wsorigin):
    """Upgraded connections do not count against the upstream's max_connections: with a cap
    of 2, five tunnels stay open and ordinary requests still get origin connections."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{wsorigin.port}"], upstream_extra="max_connections: 2"),
            wait=[("127.0.0.1", port)])

    async def go():
        conns = []
        for i in range(5):
            c = await websockets.connect(f"ws://127.0.0.1:{port}/")
            conns.append(c)
        for i, c in enumerate(conns):
            await c.send(f"m{i}")
            assert await c.recv() == f"m{i}"
        for c in conns:
            await c.close()
    asyncio.run(go())


def test_config_errors(h2gate_bin, tmp_path):
    for text, want in [("timeouts: {tunnel_idle: 0}\n", "'tunnel_idle' is out of range"),
                       ("limits: {max_tunnels: x}\n", "max_tunnels"),
                       ("routes:\n  - { host: '*', path: /, upstream: app, websocket: maybe }\n",
                        "websocket")]:
        base = gw_config(free_port(), ["127.0.0.1:9"])
        if text.startswith("routes:"):
            base = base[:base.index("routes:")] + text
            text = ""
        r = check_config(h2gate_bin, tmp_path, base + text)
        assert r.returncode == 1 and want in r.stderr and "c.yaml:" in r.stderr, (text, r.stderr)


def test_tunnels_gauge_and_client_reset(gateway, wsorigin):
    """h2gate_websocket_tunnels counts open tunnels; a client's RST_STREAM ends its tunnel (the
    origin connection closes, the tunnel's place under max_tunnels is free again)."""
    from gwtest import sample, scrape
    admin = free_port()
    g = wsgw(gateway, wsorigin, extra=f"limits:\n  max_tunnels: 3\nadmin:\n  address: 127.0.0.1:{admin}\n")
    wait_port("127.0.0.1", admin)

    async def go():
        a = await websockets.connect(f"ws://127.0.0.1:{g.port}/")
        b = await websockets.connect(f"ws://127.0.0.1:{g.port}/")
        ws = H2WebSocket(g.port)
        assert ws.open()[":status"] == "200"
        fams, _ = scrape(admin)
        assert sample(fams, "h2gate_websocket_tunnels") == 3
        assert raw_connect(g.port, EXT)[0] == 503  # the cap is reached
        ws.cl.c.reset_stream(ws.sid)
        ws.cl.flush()
        deadline = time.monotonic() + slow(5)
        while time.monotonic() < deadline:
            fams, _ = scrape(admin)
            if sample(fams, "h2gate_websocket_tunnels") == 2:
                break
            await asyncio.sleep(0.05)
        assert sample(fams, "h2gate_websocket_tunnels") == 2
        assert raw_connect(g.port, EXT)[0] == 200  # its place is free
        await a.close()
        await b.close()
        ws.cl.close()
    asyncio.run(go())


@pytest.mark.serial
def test_bandwidth_limit_applies_to_tunnels(gateway, wsorigin):
    """throttle.response_rate holds a tunnel's bytes to the client like any response's."""
    g = wsgw(gateway, wsorigin, extra="throttle:\n  response_rate: 256KiB/s\n  response_burst: 64KiB\n")

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/flood/{1 << 20}",
                                      max_size=None) as c:
            t0, got = time.monotonic(), 0
            async for m in c:
                got += len(m)
            return got, time.monotonic() - t0
    got, took = asyncio.run(go())
    assert got == 1 << 20
    assert took > 2.5, took  # 1 MiB at 256 KiB/s after a 64 KiB burst: about 3.75 s


def test_rfc8441_data_before_the_200_waits_for_the_switch(gateway, wsorigin):
    """An HTTP/2 client may send DATA right after its extended CONNECT: the bytes wait for the
    origin's 101 (an HTTP/1.1 origin must not see frames before its handshake answer) and then
    go; they are not an error."""
    g = wsgw(gateway, wsorigin)
    ws = H2WebSocket(g.port)
    ws.sid = ws.cl.c.get_next_available_stream_id()
    ws.cl.c.send_headers(ws.sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                                  (":scheme", "http"), (":path", "/"),
                                  (":authority", "localhost"), ("sec-websocket-version", "13")])
    ws.cl.c.send_data(ws.sid, ws_frame(0x1, b"early"))
    ws.cl.flush()
    assert ws.recv() == (0x1, b"early")
    assert ws.headers[":status"] == "200" and ws.reset is None
    ws.cl.close()


# ---- the origin's word that the protocol switched is checked, not relayed (RFC 8441 §5,
# RFC 6455 §4.1, RFC 9110 §7.8) --------------------------------------------------------------

H1_WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's example key


def h1_ws_request(path, key=H1_WS_KEY, extra=""):
    req = (f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           f"Sec-WebSocket-Version: 13\r\n")
    if key is not None:
        req += f"Sec-WebSocket-Key: {key}\r\n"
    return (req + extra + "\r\n").encode()


def h1_read_response(s, timeout=slow(5)):
    """One HTTP/1.1 response with a Content-Length (or none: a 101, a bodiless 204) off s:
    (status, {lowercased name: value}, body, bytes read past it)."""
    s.settimeout(timeout)
    head, _, rest = recv_head(s).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        fields[k.strip().lower()] = v.strip()
    n = int(fields.get("content-length", "0"))
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return int(lines[0].split()[1]), fields, rest[:n], rest[n:]


def h2_ws_answer(port, path):
    """An RFC 8441 extended CONNECT to path: (response head, body bytes, reset code)."""
    ws = H2WebSocket(port, path=path)
    hd = ws.open()
    deadline = time.monotonic() + slow(5)
    while not ws.ended and ws.reset is None and time.monotonic() < deadline:
        try:
            ws._read(timeout=slow(1))
        except (socket.timeout, ConnectionError):
            break
    ws.cl.close()
    return hd, ws.buf, ws.reset


@pytest.mark.parametrize("path", ["/ws-200-html", "/ws-204", "/ws-200-then-frame"])
def test_rfc8441_origin_2xx_instead_of_101_is_502(gateway, origin, path):
    """An origin that ignores Upgrade and answers 2xx must not tell the HTTP/2 client that its
    tunnel is open (RFC 8441 §5: a 2xx to an extended CONNECT is the switch): 502, and not one
    byte of the origin's body reaches the client as WebSocket data."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    hd, body, reset = h2_ws_answer(port, path)
    assert hd and hd[":status"] == "502", (hd, body, reset)
    assert body.startswith(b"h2gate: ") and b"html" not in body and b"hello" not in body, body
    assert "event=websocket_bad_101" in g.wait_log("websocket_bad_101")
    # the gateway counts no tunnel for it
    assert raw_connect(port, [(k, "/ws-refuse" if k == ":path" else v) for k, v in EXT])[0] == 403


def test_h1_origin_2xx_instead_of_101_relayed_as_a_plain_answer(gateway, origin):
    """HTTP/1.1: the origin's 200 goes to the client as the ordinary answer it is (RFC 9110
    §7.8: a server may ignore Upgrade); no tunnel opens: bytes the origin sends past the body
    never reach the client, and the next request on the connection is HTTP/1.1 again."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(h1_ws_request("/ws-200-html"))
        st, f, body, rest = h1_read_response(s)
        assert st == 200 and f["content-type"] == "text/html" and b"not a websocket" in body
        assert "upgrade" not in f and rest == b""
        s.sendall(h1_ws_request("/ws-200-then-frame"))
        st, f, body, rest = h1_read_response(s)
        assert (st, body) == (200, b"ok") and "upgrade" not in f, (st, f, body)
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        st, f, body, more = h1_read_response(s)
        assert st == 200 and b'"target": "/echo"' in body, body[:200]
        assert b"hello" not in rest + more
        # the origin connection that carried an upgrade request is not used again: what the
        # origin sends on it later is no answer to anyone's next request
        s.sendall(h1_ws_request("/ws-200-then-late"))
        st, f, body, rest = h1_read_response(s)
        assert (st, body) == (200, b"ok"), (st, f, body)
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        st, f, body, more = h1_read_response(s)
        assert st == 200 and b'"target": "/echo"' in body, body[:200]


@pytest.mark.parametrize("query", ["u=h2c", "u=-", "u=websocket,%20h2c", "c=-", "c=keep-alive",
                                   "a=bad", "a=-", "a=twice"])
def test_bad_101_is_502_for_both_clients(gateway, origin, query):
    """Every check a WebSocket client makes of a 101 (RFC 6455 §4.1: Upgrade websocket,
    Connection upgrade, the Sec-WebSocket-Accept of its key) the gateway makes before it opens
    a tunnel, for HTTP/2 clients (which never see the 101) and HTTP/1.1 clients (whose 101 the
    gateway rewrites, and whose tunnel it holds open on the origin's word): 502, and the bytes
    after the bad 101 reach nobody."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    hd, body, reset = h2_ws_answer(port, f"/ws-101?{query}")
    assert hd and hd[":status"] == "502", (query, hd, body, reset)
    assert b"hello" not in body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(h1_ws_request(f"/ws-101?{query}"))
        st, f, body, rest = h1_read_response(s)
        assert st == 502 and b"hello" not in body + rest, (query, st, f, body, rest)
    assert "event=websocket_bad_101" in g.wait_log("websocket_bad_101")


def test_good_101_opens_the_tunnel_for_both_clients(gateway, origin):
    """The scripted origin's right 101 (the counterpart of the test above): the tunnel opens,
    the frame after the 101 reaches each client."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    ws = H2WebSocket(port, path="/ws-101")
    assert ws.open()[":status"] == "200"
    assert ws.recv() == (0x1, b"hello")
    ws.cl.close()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(h1_ws_request("/ws-101"))
        st, f, body, rest = h1_read_response(s)
        assert st == 101 and f["upgrade"] == "websocket", (st, f)
        assert f["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3
        while len(rest) < 7:
            rest += s.recv(100)
        assert rest == b"\x81\x05hello"


@pytest.mark.parametrize("key", [None, "short", "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Key: "
                                 "dGhlIHNhbXBsZSBub25jZQ=="])
def test_h1_ws_request_without_one_valid_key_is_400(gateway, origin, key):
    """RFC 6455 §4.2.1: a handshake without exactly one Sec-WebSocket-Key of 16 bytes in base64
    is refused with 400 by the gateway (the server the client speaks to): the origin could
    not prove it understood the request, the gateway could not check its 101."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(h1_ws_request("/ws-101", key=key))
        st, f, body, rest = h1_read_response(s)
        assert st == 400, (st, f, body)
    assert not [q for q in origin.requests if q.target.startswith("/ws-101")]


def test_101_to_a_request_without_upgrade_is_502(gateway, origin):
    """RFC 9110 §15.2.2: a 101 answers a request that asked to upgrade; to any other request
    (a plain GET, or a WebSocket handshake on a route without websocket, whose Upgrade is
    dropped as hop-by-hop) it is a broken origin: 502, no tunnel, over both protocols."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="websocket: false"),
            wait=[("127.0.0.1", port)])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /ws-101 HTTP/1.1\r\nHost: a\r\n\r\n")
        st, f, body, rest = h1_read_response(s)
        assert st == 502 and b"hello" not in body + rest
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(h1_ws_request("/ws-101"))
        st, f, body, rest = h1_read_response(s)
        assert st == 502 and b"hello" not in body + rest
    from gwtest import ended, response
    cl = Client(port)
    sid = cl.request("/ws-101")
    st, body, _ = response(cl.events(ended(sid)), sid)
    cl.close()
    assert st == "502" and b"hello" not in body, (st, body)


def test_basic_auth_guards_both_websocket_openings(gateway, wsorigin, tmp_path):
    """A route's basic_auth holds for a WebSocket opening as for any request (RFC 7617 §2,
    RFC 8441 §4: the extended CONNECT is a request like another): without credentials, or with
    a wrong password, neither an HTTP/1.1 Upgrade nor an HTTP/2 extended CONNECT reaches the
    origin; with the right ones both open their tunnel."""
    import base64
    users = tmp_path / "users"
    r = subprocess.run(["htpasswd", "-b", "-c", "-B", "-C", "4", str(users), "ann", "pw"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    g = wsgw(gateway, wsorigin, route_extra=f"basic_auth:\n  users: {users}\n")
    good = "Basic " + base64.b64encode(b"ann:pw").decode()
    bad = "Basic " + base64.b64encode(b"ann:pW").decode()
    assert refused_status(f"ws://127.0.0.1:{g.port}/") == 401
    for creds in ((), (("authorization", bad),)):
        assert raw_connect(g.port, EXT + list(creds)) == (401, None), creds
    got = asyncio.run(echo_session(f"ws://127.0.0.1:{g.port}/", ["hi"],
                                   extra_headers={"Authorization": good}))
    assert got is not None
    ws = H2WebSocket(g.port, extra=[("authorization", good)])
    assert ws.open()[":status"] == "200"
    ws.send(0x1, b"in")
    assert ws.recv() == (0x1, b"in")
    ws.cl.close()
