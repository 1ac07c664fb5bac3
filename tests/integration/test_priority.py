"""RFC 9218 extensible priorities on the running gateway, at frame level with python3-h2.

The client makes the connection window the bottleneck: it opens every stream with
SETTINGS_INITIAL_WINDOW_SIZE 0, waits until the gateway holds every response body (the
gateway's body_buffer is larger than a response), then opens the stream windows wide and grants
the connection window 16 KiB at a time, recording the stream id of every DATA frame. The order
of those ids is the gateway's scheduling decision."""
import socket
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

from conftest import free_port
from origin import ScriptedOrigin

SIZE = 256 * 1024
STEP = 16384


@pytest.fixture
def origin():
    with ScriptedOrigin() as o:
        yield o


@pytest.fixture
def gwp(gateway, origin):
    port = free_port()
    text = (f"workers: 1\nlog_level: info\nlisten:\n  - address: 127.0.0.1:{port}\n"
            f"limits:\n  body_buffer: 1048576\n"
            f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin.port}]\n"
            "routes:\n  - host: '*'\n    path: /\n    upstream: app\n")
    g = gateway(text, wait=[("127.0.0.1", port)])
    g.port = port
    return g


class Bottleneck:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.c = h2.connection.H2Connection(cfg)
        # h2 would announce its own window; 0 keeps every DATA frame waiting for us
        self.c.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        self.c.initiate_connection()
        self.flush()
        self.heads, self.ended, self.order = {}, set(), []
        self.settings = None
        self.done_bytes = {}

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.s.sendall(data)

    def request(self, path, priority=None):
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", "GET"), (":path", path), (":scheme", "http"),
                (":authority", "localhost")]
        if priority is not None:
            hdrs.append(("priority", priority))
        self.c.send_headers(sid, hdrs, end_stream=True)
        self.flush()
        self.done_bytes[sid] = 0
        return sid

    def pump(self, until, timeout=5):
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, f"timeout; order so far {self.order[-20:]}"
            self.s.settimeout(left)
            data = self.s.recv(1 << 20)
            assert data, "connection closed"
            for e in self.c.receive_data(data):
                if isinstance(e, h2.events.RemoteSettingsChanged):
                    self.settings = e.changed_settings
                elif isinstance(e, h2.events.ResponseReceived):
                    self.heads[e.stream_id] = dict(e.headers)
                elif isinstance(e, h2.events.DataReceived):
                    if e.data:
                        self.order.append(e.stream_id)
                        self.done_bytes[e.stream_id] += len(e.data)
                elif isinstance(e, h2.events.StreamEnded):
                    self.ended.add(e.stream_id)
            self.flush()

    def open_windows(self, settle=0.3):
        """Wait for every head, let the bodies reach the gateway, then widen the stream
        windows; the connection window (65535 at start) stays the bottleneck."""
        want = set(self.done_bytes)
        self.pump(lambda: want <= set(self.heads))
        time.sleep(settle)
        self.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.flush()

    def grant_until_done(self, on_step=None, timeout=8):
        want = set(self.done_bytes)
        deadline = time.monotonic() + timeout
        while not want <= self.ended:
            got = len(self.order)
            self.pump(lambda: len(self.order) > got or want <= self.ended,
                      timeout=max(0.1, deadline - time.monotonic()))
            if on_step:
                on_step(self)
            # give back exactly what arrived, in one small step for the connection only
            self.c.increment_flow_control_window(STEP)
            self.flush()

    def finish_order(self):
        """Stream ids in the order their last DATA frame arrived."""
        last = {}
        for i, sid in enumerate(self.order):
            last[sid] = i
        return sorted(last, key=last.get)

    def close(self):
        self.s.close()


def _done(b):
    for sid, n in b.done_bytes.items():
        assert n == SIZE, (sid, n)
        assert b.heads[sid][":status"] == "200"


def test_settings_no_rfc7540_priorities(gwp):
    b = Bottleneck(gwp.port)
    b.pump(lambda: b.settings is not None)
    # RFC 9218 §2.1: not sent (or 0), since the RFC 7540 tree is honoured
    assert 0x9 not in b.settings or b.settings[0x9].new_value == 0
    b.close()


def test_urgent_stream_opened_last_finishes_first(gwp):
    b = Bottleneck(gwp.port)
    slow = [b.request(f"/bytes/{SIZE}", "u=5") for _ in range(10)]
    fast = b.request(f"/bytes/{SIZE}", "u=0")
    b.open_windows()
    b.grant_until_done()
    _done(b)
    fin = b.finish_order()
    assert fin[0] == fast, fin
    # nothing of the u=5 streams is sent while the u=0 stream still has data
    first_fast, last_fast = b.order.index(fast), len(b.order) - 1 - b.order[::-1].index(fast)
    assert all(s == fast for s in b.order[first_fast:last_fast + 1])
    # and the u=5 streams, non-incremental, finish one after another by id
    assert fin[1:] == slow, fin
    b.close()


def test_incremental_streams_interleave(gwp):
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=2, i")
    c = b.request(f"/bytes/{SIZE}", "u=2, i")
    b.open_windows()
    b.grant_until_done()
    _done(b)
    # one frame each in turn: every window of 4 frames holds both streams
    mid = b.order[8:-8]
    for k in range(0, len(mid) - 4):
        assert {a, c} <= set(mid[k:k + 4]), b.order
    switches = sum(1 for x, y in zip(b.order, b.order[1:]) if x != y)
    assert switches >= SIZE // STEP, b.order
    b.close()


def test_non_incremental_pair_in_id_order(gwp):
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    c = b.request(f"/bytes/{SIZE}")  # default u=3, not incremental
    b.open_windows()
    b.grant_until_done()
    _done(b)
    # all of a, then all of c
    assert b.order == [a] * b.order.count(a) + [c] * b.order.count(c), b.order
    b.close()


def test_priority_update_mid_transfer(gwp):
    b = Bottleneck(gwp.port)
    sids = [b.request(f"/bytes/{SIZE}", "u=4") for _ in range(4)]
    target = sids[-1]
    b.open_windows()
    sent = []

    def raise_target(bb):
        # once stream 1 is half way, raise the last stream to u=1 (RFC 9218 §7.1)
        if not sent and bb.done_bytes[sids[0]] >= SIZE // 2:
            frame = (len(b"u=1") + 4).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
            frame += target.to_bytes(4, "big") + b"u=1"
            bb.s.sendall(frame)
            sent.append(len(bb.order))

    b.grant_until_done(on_step=raise_target)
    _done(b)
    assert sent
    assert b.done_bytes[target] == SIZE
    fin = b.finish_order()
    # stream 1 was interrupted, the raised stream finished first, then the others by id
    assert fin[0] == target, fin
    assert fin[1:] == sids[:-1], fin
    after = b.order[sent[0] + 2:]
    assert after[:after.count(target)] == [target] * after.count(target)
    b.close()


def test_priority_update_before_the_stream(gwp):
    """A PRIORITY_UPDATE for a stream not opened yet is kept and applied when it opens."""
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    nxt = b.c.get_next_available_stream_id()
    frame = (4 + 3).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
    b.s.sendall(frame + nxt.to_bytes(4, "big") + b"u=0")
    c = b.request(f"/bytes/{SIZE}", "u=3")
    assert c == nxt
    b.open_windows()
    b.grant_until_done()
    _done(b)
    assert b.finish_order() == [c, a], b.finish_order()
    b.close()


def test_origin_priority_response_field(gwp):
    """RFC 9218 §8: the origin's `priority: u=0` raises a stream the client sent at u=5."""
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    c = b.request(f"/prio/{SIZE}/0", "u=5")
    b.open_windows()
    b.grant_until_done()
    _done(b)
    assert b.heads[c]["priority"] == "u=0"
    # applied before the first DATA frame (the stream windows were still 0): all of c first
    assert b.order == [c] * b.order.count(c) + [a] * b.order.count(a), b.order
    b.close()
