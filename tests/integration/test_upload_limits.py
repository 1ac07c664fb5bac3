"""A stalled upload is the client's fault. timeouts.request_body ends it with
408 (HTTP/1.1, connection closed) or 408 + RST_STREAM(NO_ERROR) (HTTP/2); the origin's
response timer does not run while the gateway waits for the client; and none of it counts
against the server's passive health (before: the origin's response_timeout fired, counted as
a server failure, and five such requests ejected the server for everyone)."""
import hashlib
import json
import struct
import socket
import time

import h2.events
import pytest

from procs import (free_port, h1_get, recv_all, recv_head, rss_kib, sanitized, sanitizer,
                   slow)
from gwtest import Client, gw_config, send_for
from origin import ThreadedServer


def cfg(port, origin, request_body="500ms"):
    return gw_config(port, [f"127.0.0.1:{origin.port}"],
                     upstream_extra="response_timeout: 300ms\nhealth: {fail_threshold: 2, eject: 30s}",
                     extra=f"timeouts: {{request_body: {request_body}}}\n")


def h1_stalled(port, path="/echo"):
    """Sends a POST head announcing 10 bytes and 3 of them; returns (bytes read until close,
    seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc".encode())
    t0 = time.monotonic()
    got = recv_all(s)
    s.close()
    return got, time.monotonic() - t0


def test_stalled_h1_uploads_get_408_and_do_not_eject_the_server(gateway, origin):
    port = free_port()
    g = gateway(cfg(port, origin), wait=[("127.0.0.1", port)])
    for _ in range(6):
        got, secs = h1_stalled(port)
        assert got.startswith(b"HTTP/1.1 408 "), got[:100]
        assert 0.4 <= secs < 3, secs
    # the server was never blamed: a normal request still reaches it
    resp = h1_get(port, "/echo")
    assert resp.startswith(b"HTTP/1.1 200 "), resp[:200]
    log = g.log()
    assert "event=request_body_timeout" in log
    assert "status=502" not in log and "status=504" not in log
    assert "back_eject" not in log and "ejected" not in log


def test_stalled_h2_upload_gets_408_then_reset(gateway, origin):
    port = free_port()
    gateway(cfg(port, origin), wait=[("127.0.0.1", port)])
    cl = Client(port)
    sids = []
    for _ in range(4):  # one connection, several stalled streams: none may hold the origin
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                                (":authority", "localhost"), ("content-length", "10")],
                          end_stream=False)
        cl.flush()
        sids.append(sid)
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamReset) for x in e) >= 4,
                    timeout=5)
    for sid in sids:
        heads = [e for e in evs if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
        assert heads and dict(heads[0].headers)[":status"] == "408", evs
        resets = [e for e in evs if isinstance(e, h2.events.StreamReset) and e.stream_id == sid]
        assert resets and resets[0].error_code == 0, evs
    sid = cl.request("/echo")  # the same connection, the same origin: still served
    evs = cl.events(lambda e: any(isinstance(x, h2.events.StreamEnded) and x.stream_id == sid
                                  for x in e), timeout=5)
    heads = [e for e in evs if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
    assert heads and dict(heads[0].headers)[":status"] == "200", evs
    cl.close()


def test_one_h2_connection_holds_the_origin_connections_no_longer_than_request_body(
        gateway, origin):
    """Stalled uploads on one HTTP/2 connection take every origin connection of the worker
    (max_connections: 4); another client's GET waits in the upstream queue and is served once
    request_body (500 ms) ended them, not after the origin's timeouts (response_timeout 30 s
    here, so only request_body can free the connections in time)."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"],
                      upstream_extra="max_connections: 4\nresponse_timeout: 30s\nqueue_timeout: 20s",
                      extra="timeouts: {request_body: 500ms}\n"),
            wait=[("127.0.0.1", port)])
    cl = Client(port)
    for _ in range(4):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                                (":authority", "localhost"), ("content-length", "10")],
                          end_stream=False)
        cl.c.send_data(sid, b"abc")  # three bytes reach the origin: its connection is taken
    cl.flush()
    t0 = time.monotonic()
    while origin.open_connections < 4 and time.monotonic() < t0 + slow(3):
        time.sleep(0.01)
    assert origin.open_connections == 4
    other = socket.create_connection(("127.0.0.1", port), timeout=30)
    other.sendall(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    resp = recv_all(other)
    waited = time.monotonic() - t0
    assert resp.startswith(b"HTTP/1.1 200 "), (resp[:200], waited)
    print(f"waited {waited:.2f} s")
    # it had to wait (every origin connection was taken), for request_body and no longer: the
    # margin scales with slow() (the module runs against the ASan build on a loaded machine),
    # always well short of queue_timeout (20 s), the next thing that could end the wait
    assert 0.3 < waited < 0.5 + min(slow(2.0), 8.0), waited
    cl.close()


def test_slow_but_steady_upload_completes(gateway, origin):
    """A byte every 0.2 s against request_body 1 s: never a gap of a second, so it completes
    although the whole upload takes longer than both request_body and response_timeout."""
    port = free_port()
    gateway(cfg(port, origin, request_body="1s"), wait=[("127.0.0.1", port)])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8\r\n"
              b"Connection: close\r\n\r\n")
    for b in b"abcdefgh":
        time.sleep(0.2)
        s.sendall(bytes([b]))
    resp = recv_all(s)
    assert resp.startswith(b"HTTP/1.1 200 "), resp[:200]
    body = json.loads(resp.split(b"\r\n\r\n", 1)[1])
    assert body["method"] == "POST"
    assert origin.requests[-1].body == b"abcdefgh"


def test_h1_408_says_connection_close(gateway, origin):
    """RFC 9110 §15.5.9: the server SHOULD send the "close" connection option with a 408 (it
    closes rather than wait on; the client must not reuse the connection)."""
    port = free_port()
    gateway(cfg(port, origin), wait=[("127.0.0.1", port)])
    got, _ = h1_stalled(port)
    head = got.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 408 "), got[:200]
    assert b"\r\nconnection: close" in head, got[:200]


class WaitingOrigin(ThreadedServer):
    """An origin that does what real ones do while a request body is missing: /hint sends
    103 Early Hints before reading the body, then waits; /shut gives up on the body after
    100 ms and closes (its own body timeout); anything else gets 200 "ok"."""

    def _serve(self, c):
        try:
            buf = recv_head(c)
            if b"\r\n\r\n" not in buf:
                return
            path = buf.split(b" ", 2)[1]
            if path == b"/hint":
                c.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
                c.settimeout(10)
                while c.recv(65536):
                    pass
            elif path == b"/shut":
                time.sleep(0.1)
            else:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            pass
        finally:
            c.close()



@pytest.mark.parametrize("path", ["/hint", "/shut"], ids=["interim_then_wait", "origin_gives_up"])
def test_origin_waiting_for_a_stalled_body_is_not_blamed(gateway, path):
    """The origin's timer or close while it waits for a body the client does not send is the
    client's failure, not the server's: after an interim response (the response timer kept
    running and counted), or when the origin closes on its own body timeout (counted as a
    failed server). Four of them with fail_threshold 2 used to eject the only server."""
    o = WaitingOrigin()
    try:
        port = free_port()
        g = gateway(gw_config(port, [f"127.0.0.1:{o.port}"],
                              upstream_extra="response_timeout: 150ms\nretries: 0\n"
                                             "health: {fail_threshold: 2, eject: 30s}",
                              extra="timeouts: {request_body: 600ms}\n"),
                    wait=[("127.0.0.1", port)])
        for _ in range(4):
            got, _ = h1_stalled(port, path)
            if path == "/hint":
                assert b"HTTP/1.1 408 " in got, got[:300]
        resp = h1_get(port, "/ok")
        assert resp.startswith(b"HTTP/1.1 200 "), resp[:200]
        assert "back_server_eject" not in g.log()
    finally:
        o.close()


# ---- memory per request body byte ----------------------------------------------------------------

def skip_san():
    # ASan's quarantine and TSan's shadow pages: RSS is the runtime's (procs.sanitized)
    if sanitized():
        pytest.skip(f"{sanitizer()} build: RSS says nothing of what the gateway holds")


def mem_cfg(port, origin):
    # one origin connection, held by a request that is never answered: the uploads queue.
    # A paused upload is not read, so the gateway does not see its client leave, and the stop
    # after the test waits for the graceful_shutdown deadline: 1 s, not the default 30 s (the
    # fixture's stop gives up and kills after 15 s).
    return gw_config(port, [f"127.0.0.1:{origin.port}"],
                     upstream_extra="max_connections: 1\nresponse_timeout: 30s",
                     route_extra="coalesce: false", extra="timeouts: {graceful_shutdown: 1s}\n")


def test_one_byte_data_frames_cost_about_their_payload(gateway, origin):
    """4 streams of 262,144 one-byte DATA frames (their whole 256 KiB window) waiting in the
    upstream queue: about 150 MB before (a buffer, a write context, a mark and an iovec entry
    per byte), now about the payload."""
    skip_san()
    port = free_port()
    g = gateway(mem_cfg(port, origin), wait=[("127.0.0.1", port)])
    cl = Client(port)
    cl.request("/hang")
    time.sleep(0.2)
    before = rss_kib(g.proc.pid)
    n = 262144
    sids = []
    for _ in range(4):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                                (":authority", "localhost"), ("content-length", str(n))],
                          end_stream=False)
        sids.append(sid)
    cl.flush()
    for sid in sids:  # raw one-byte DATA frames (python3-h2 would take minutes for a million)
        frame = struct.pack(">I", 1)[1:] + bytes([0, 0]) + struct.pack(">I", sid) + b"x"
        cl.s.sendall(frame * n)
    time.sleep(1.0)
    grown = rss_kib(g.proc.pid) - before
    print(f"\n4 x {n} one-byte DATA frames queued: gateway RSS grew {grown} KiB")
    assert g.proc.poll() is None
    assert grown < 16 * 1024, grown  # 1 MiB of payload; ~150 MB before
    cl.close()


def test_one_byte_chunks_cost_about_their_payload(gateway, origin):
    """HTTP/1.1 chunks of one byte while the upload waits: the front reads up to
    limits.body_buffer (128 KiB) of payload; that cost about 19 MB before."""
    skip_san()
    port = free_port()
    g = gateway(mem_cfg(port, origin), wait=[("127.0.0.1", port)])
    hold = socket.create_connection(("127.0.0.1", port), timeout=10)
    hold.sendall(b"GET /hang HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(0.2)
    before = rss_kib(g.proc.pid)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
    data = b"1\r\nx\r\n" * (512 * 1024)  # 512 KiB of payload offered, 3 MB on the wire
    sent = send_for(s, data, 3, pause=0.01)
    time.sleep(0.5)
    grown = rss_kib(g.proc.pid) - before
    print(f"\none-byte chunks: {sent} wire bytes taken, gateway RSS grew {grown} KiB")
    assert g.proc.poll() is None
    assert sent > 128 * 1024 * 6  # more than body_buffer of payload was offered
    assert grown < 4 * 1024, grown
    s.close()
    hold.close()


def test_gathered_one_byte_frames_reach_the_origin_whole(gateway, origin):
    """The gathering of small body pieces keeps every byte in order: 4 streams of one-byte DATA
    frames (two with content-length, two sent on chunked) wait in the upstream queue, then the
    origin connection frees up and each body reaches the origin whole."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"],
                          upstream_extra="max_connections: 1\nresponse_timeout: 30s",
                          route_extra="coalesce: false"),
                wait=[("127.0.0.1", port)])
    hold = Client(port)  # HTTP/2, so that a reset frees the origin connection at once
    hsid = hold.request("/stall-read")
    cl = Client(port)
    n = 40000
    sids = []
    for i in range(4):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                                (":authority", "localhost")]
                          + ([("content-length", str(n))] if i % 2 else []), end_stream=False)
        sids.append(sid)
    cl.flush()
    payload = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
    for sid in sids:  # raw one-byte DATA frames, each stream interleaved with the next
        head = b"\x00\x00\x01\x00\x00" + sid.to_bytes(4, "big")
        cl.s.sendall(b"".join(head + payload[k:k + 1] for k in range(n)))
    time.sleep(0.3)
    hold.c.reset_stream(hsid)
    hold.flush()
    cl.s.sendall(b"".join(b"\x00\x00\x00\x00\x01" + sid.to_bytes(4, "big") for sid in sids))
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamEnded) for x in e) >= 4,
                    timeout=20)
    bodies = {}
    for e in evs:
        if isinstance(e, h2.events.DataReceived):
            bodies[e.stream_id] = bodies.get(e.stream_id, b"") + e.data
    want = hashlib.sha1(payload).hexdigest()
    for sid in sids:
        got = json.loads(bodies[sid])
        assert (got["body_len"], got["body_sha1"]) == (n, want), got
    assert g.proc.poll() is None
    cl.close()
    hold.close()
