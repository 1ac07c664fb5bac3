"""An HTTP/1.1 client that goes away while its request waits for the origin: its close (a FIN,
TLS close_notify) or its reset ends the exchange at once, as an HTTP/2 client's RST_STREAM
does: the origin connection is closed (a slot of the pool, `max_connections: 1` here, is not
held for a client that is gone), the request is logged as the client's (499), and the next
client is answered without waiting for the first request's delay. A client that stays gets its
answer, pipelined requests too, and a coalesced request whose fellow leaves is not cancelled.
Clients: Python sockets and ssl; origin: the scripted origin's /wait/MS (its wait watches the
socket, so the gateway's close shows as open_connections dropping)."""
import os
import re
import socket
import ssl
import struct
import time

import pytest

from procs import free_port, recv_all, slow
from gwtest import gw_config, origin_count, tls_client_ctx, wait_origin_has, wait_sample

# the first request's delay: far beyond every bound the tests wait for
LONG = "/wait/30000"


@pytest.fixture
def gwa(gateway, origin, tmp_path):
    """A gateway with a cleartext and a TLS listener, one origin connection at most, a combined
    access log, an admin listener and debug logging."""
    port, tls_port, admin = free_port(), free_port(), free_port()
    alog = str(tmp_path / "access.log")
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], tls_port=tls_port,
                          upstream_extra="max_connections: 1", log_level="debug",
                          extra=f"access_log: {{path: {alog}, format: combined}}\n"
                                "limits: {max_request_head: 2KiB}\n"
                                f"admin:\n  address: 127.0.0.1:{admin}\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port), ("127.0.0.1", admin)])
    g.port, g.tls_port, g.admin, g.origin, g.alog = port, tls_port, admin, origin, alog
    return g


def connect(g, tls):
    raw = socket.create_connection(("127.0.0.1", g.tls_port if tls else g.port),
                                   timeout=slow(10))
    if not tls:
        return raw
    ctx = tls_client_ctx()
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(raw, server_hostname="localhost")


def get(path, close=False):
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode()


def wait_for(pred, timeout):
    """pred() once it holds, or its value at the deadline (scaled: procs.slow())."""
    deadline = time.monotonic() + slow(timeout)
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.01)
    return pred()


def origin_released(g, timeout=2.0):
    """Whether the origin saw the gateway close every connection to it within timeout (the
    first request waits 30 s: without the close, nothing ends it)."""
    return wait_for(lambda: g.origin.open_connections == 0, timeout)


def second_client_answered(g, tls=False):
    """A second client's request is answered while the pool's one connection would still be
    held for the first request: time to its answer, which is checked."""
    t0 = time.monotonic()
    with connect(g, tls) as s:
        s.settimeout(slow(5))
        s.sendall(get("/bytes/10", close=True))
        resp = recv_all(s)
    assert resp.startswith(b"HTTP/1.1 200 "), resp[:200]
    return time.monotonic() - t0


def access_lines(g, n, timeout=5.0):
    """The access log's lines once it has n (it is flushed within a second)."""
    def lines():
        return open(g.alog).read().splitlines() if os.path.exists(g.alog) else []
    wait_for(lambda: len(lines()) >= n, timeout)
    return lines()


def status_of(lines, path):
    return [m.group(1) for m in (re.search(rf'"GET {re.escape(path)} HTTP/1\.1" (\d+) ', l)
                                 for l in lines) if m]


@pytest.mark.parametrize("how", ["plain", "tls", "tls_close_notify"])
def test_client_that_closes_while_waiting_frees_the_origin_connection(gwa, how):
    """The client sends its request and closes its socket (over TLS, without close_notify, or
    with it): the origin connection closes within a second or two, not when the origin answers
    30 s later; the next client is answered at once; the request's line says 499, and its
    connection's close line says the peer closed it."""
    tls = how != "plain"
    s = connect(gwa, tls)
    s.sendall(get(LONG))
    assert wait_origin_has(gwa.origin, LONG) == 1
    if tls:
        # The gateway's TLS 1.3 session ticket, sent after the handshake, is in the socket's
        # receive queue by now: closed unread, it makes the kernel send an RST, not a FIN (and
        # the gateway rightly logs reason=reset). One read that does not wait takes it.
        s.setblocking(False)
        try:
            s.recv(1)
        except ssl.SSLWantReadError:
            pass
        s.setblocking(True)
    peer = "127.0.0.1:%d" % s.getsockname()[1]
    if how == "tls_close_notify":
        s = s.unwrap()  # close_notify, then the TCP close below
    s.close()
    assert origin_released(gwa), gwa.origin.open_connections
    assert second_client_answered(gwa, tls) < slow(5)
    # this client's connection's line (the fixture's port probes close theirs too)
    closed = f"event=conn_close peer={peer} "
    line = [l for l in gwa.wait_log(closed).splitlines() if closed in l]
    assert line and " reason=peer_closed " in line[0], (line, gwa.log()[-2000:])
    assert status_of(access_lines(gwa, 2), LONG) == ["499"]
    # counted as an HTTP/2 request its client reset is: no response code
    assert wait_sample(gwa.admin, "h2gate_requests_total", 1, code="none") == 1
    assert wait_sample(gwa.admin, "h2gate_requests_total", 1, code="2xx") == 1


def test_half_close_after_the_request_is_taken_for_the_clients_end(gwa):
    """A client that half-closes (shutdown SHUT_WR) after its request looks on the wire as one
    that closed: the request is cancelled as nginx does (RFC 9112 §9.6 allows that such a client
    still reads; HAProxy serves it), and the connection ends without an answer."""
    s = connect(gwa, False)
    s.sendall(get(LONG))
    assert wait_origin_has(gwa.origin, LONG) == 1
    s.shutdown(socket.SHUT_WR)
    assert origin_released(gwa), gwa.origin.open_connections
    s.settimeout(slow(5))
    assert recv_all(s, resets_end=True) == b""
    s.close()


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_client_that_resets_while_waiting_frees_the_origin_connection(gwa, tls):
    """The same for a client that resets its connection (SO_LINGER 0: an RST, no FIN)."""
    s = connect(gwa, tls)
    s.sendall(get(LONG))
    assert wait_origin_has(gwa.origin, LONG) == 1
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    assert origin_released(gwa), gwa.origin.open_connections
    assert second_client_answered(gwa, tls) < slow(5)
    assert status_of(access_lines(gwa, 2), LONG) == ["499"]


def test_client_that_pipelined_then_closed_frees_the_origin_connection(gwa):
    """Requests pipelined behind the waiting one, then the close: the unread requests do not
    keep the first one alive (nor are they sent on)."""
    s = connect(gwa, False)
    s.sendall(get(LONG) + get("/bytes/1") + get("/bytes/2"))
    assert wait_origin_has(gwa.origin, LONG) == 1
    s.close()
    assert origin_released(gwa), gwa.origin.open_connections
    assert second_client_answered(gwa) < slow(5)
    assert origin_count(gwa.origin, "/bytes/1") == 0


def test_upload_cut_short_frees_the_origin_connection(gwa):
    """A client that closes in the middle of its request body: the request can never complete,
    and the origin connection that waits for the rest of it is closed."""
    s = connect(gwa, False)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n"
              + b"x" * 1000)
    assert wait_for(lambda: gwa.origin.open_connections == 1, 5.0)
    time.sleep(0.1)  # the first body bytes on their way to the origin
    s.close()
    assert origin_released(gwa), gwa.origin.open_connections
    assert second_client_answered(gwa) < slow(5)


def read_responses(s, n):
    """n responses with a Content-Length from s: their (status, body)."""
    buf, out = b"", []
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            assert d, (out, buf)
            buf += d
        head, _, buf = buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        while len(buf) < length:
            d = s.recv(65536)
            assert d, (out, buf)
            buf += d
        out.append((int(head.split(b" ")[1]), buf[:length]))
        buf = buf[length:]
    return out


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_client_that_stays_gets_its_answer_and_its_pipelined_ones(gwa, tls):
    """No false cancel: a client that keeps its connection open while its request waits gets
    the answer; so do requests it pipelines behind it, more of them than the gateway reads
    ahead (limits.max_request_head: 2KiB here), in order."""
    with connect(gwa, tls) as s:
        s.sendall(get("/wait/300"))
        assert read_responses(s, 1) == [(200, b"waited\n")]
        more = [f"/bytes/{i}" for i in range(1, 120)]
        s.sendall(get("/wait/300") + b"".join(get(p) for p in more))
        got = read_responses(s, 1 + len(more))
    assert got[0] == (200, b"waited\n")
    assert [len(b) for _, b in got[1:]] == list(range(1, 120))
    assert all(st == 200 for st, _ in got)
    assert "h1_client_gone" not in gwa.log()


@pytest.mark.parametrize("leaver", ["leader", "follower"])
def test_coalesced_requests_whose_fellow_leaves_are_answered(gwa, leaver):
    """Three clients ask for the same page and share one origin exchange; one of them (the
    one whose request leads it, or a follower) closes its connection: the exchange goes on for
    the two others, which get the answer, and the origin was asked once."""
    path = "/wait/1500"
    socks = [connect(gwa, False) for _ in range(3)]
    socks[0].sendall(get(path))
    assert wait_origin_has(gwa.origin, path) == 1
    for s in socks[1:]:
        s.sendall(get(path))
    time.sleep(0.2)  # the others join the first one's exchange
    gone = socks.pop(0 if leaver == "leader" else 1)
    gone.close()
    for s in socks:
        s.settimeout(slow(5))
        assert read_responses(s, 1) == [(200, b"waited\n")]
        s.close()
    assert origin_count(gwa.origin, path) == 1
    assert sorted(status_of(access_lines(gwa, 3), path)) == ["200", "200", "499"]


def test_websocket_request_whose_client_leaves_before_the_101_frees_the_origin_connection(gwa):
    """A WebSocket request waits for the origin's answer (a 101 would make the tunnel, whose
    ends are passed on as they come): its client closing before that answer ends it too."""
    s = connect(gwa, False)
    s.sendall(f"GET {LONG} HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
              "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
              .encode())
    assert wait_origin_has(gwa.origin, LONG) == 1
    assert (gwa.origin.requests[0].header("upgrade") or "").lower() == "websocket"
    s.close()
    assert origin_released(gwa), gwa.origin.open_connections
    assert second_client_answered(gwa) < slow(5)
