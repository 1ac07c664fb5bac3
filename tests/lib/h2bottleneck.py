"""A python3-h2 client that makes the connection window the bottleneck, to read the gateway's
scheduling decisions at frame level (test_priority.py: RFC 9218; test_priority7540.py: the RFC
7540 tree), and the gateway it is run against (the fixtures gwp and bn of conftest.py).

Every stream opens with SETTINGS_INITIAL_WINDOW_SIZE 0, so no DATA frame can leave the gateway
before the client says so. open_windows() waits for every response head, waits for the bodies to
be in the gateway (its body_buffer is larger than a response), then opens the stream windows wide;
grant_until_done() grants the connection window STEP bytes at a time, recording the stream id
and size of every DATA frame. The order of those ids is the gateway's scheduling decision."""
import socket
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

from procs import free_port, slow
from gwtest import gw_config

STEP = 16384


def bottleneck_gateway(gateway, origin, extra=""):
    """A gateway in front of the scripted origin that buffers up to 1 MiB of every response;
    extra: more top-level config."""
    port = free_port()
    text = gw_config(port, [f"127.0.0.1:{origin.port}"], extra="limits:\n  body_buffer: 1048576\n" + extra)
    g = gateway(text, wait=[("127.0.0.1", port)])
    g.port, g.origin = port, origin
    return g


def origin_queues(port):
    """(Recv-Q, Send-Q) of every established TCP socket at either end of a connection to the
    origin on 127.0.0.1:port."""
    out = subprocess.run(["ss", "-Htn", "state", "established",
                          f"( dport = :{port} or sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(map(int, line.split()[:2])) for line in out.splitlines() if line.strip()]


def bodies_in_gateway(origin):
    """Whether the gateway holds every answer of the ScriptedOrigin origin: each request it got
    was answered (its sendall returned), and nothing is left in the kernel at either end of
    its connections (the gateway read it all)."""
    with origin.lock:
        answered = len(origin.answered) >= len(origin.requests)
    return answered and not any(r or s for r, s in origin_queues(origin.port))


class Bottleneck:
    def __init__(self, port, origin):
        """port: the gateway's; origin: the ScriptedOrigin behind it."""
        self.origin = origin
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.c = h2.connection.H2Connection(cfg)
        # h2 would announce its own window; 0 keeps every DATA frame waiting for us
        self.c.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        self.c.initiate_connection()
        self.flush()
        self.settings = None  # the gateway's SETTINGS, once received
        self.heads, self.ended, self.resets = {}, set(), {}
        self.frames = []  # (stream id, DATA length) in arrival order
        self.done_bytes = {}

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.s.sendall(data)

    def request(self, path, priority=None, **pri):
        """priority: an RFC 9218 Priority field value; pri: priority_weight /
        priority_depends_on / priority_exclusive (RFC 7540 §6.2 HEADERS fields)."""
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", "GET"), (":path", path), (":scheme", "http"),
                (":authority", "localhost")]
        if priority is not None:
            hdrs.append(("priority", priority))
        self.c.send_headers(sid, hdrs, end_stream=True, **pri)
        self.flush()
        self.done_bytes[sid] = 0
        return sid

    def pump(self, until, timeout=5):
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, f"timeout; frames so far {self.frames[-20:]}"
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
                        self.frames.append((e.stream_id, len(e.data)))
                        self.done_bytes[e.stream_id] += len(e.data)
                elif isinstance(e, h2.events.StreamEnded):
                    self.ended.add(e.stream_id)
                elif isinstance(e, h2.events.StreamReset):
                    self.resets[e.stream_id] = e.error_code
            self.flush()

    def open_windows(self):
        """Wait for every head and for the bodies to be in the gateway, then widen the stream
        windows; the connection window (65535 at start) stays the bottleneck. (A body still
        on its way when the windows open goes out as it comes, beside the others: the order
        is then not the scheduler's alone. A 0.3 s sleep here bet on the gateway's having
        read them all by then.)"""
        want = set(self.done_bytes)
        self.pump(lambda: want <= set(self.heads))
        deadline = time.monotonic() + slow(10)
        while not bodies_in_gateway(self.origin):
            assert time.monotonic() < deadline, origin_queues(self.origin.port)
            time.sleep(0.02)
        self.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.flush()

    def grant_until_done(self, on_step=None, timeout=10):
        want = set(self.done_bytes)
        deadline = time.monotonic() + timeout
        while not want <= self.ended:
            got = len(self.frames)
            self.pump(lambda: len(self.frames) > got or want <= self.ended,
                      timeout=max(0.1, deadline - time.monotonic()))
            if on_step:
                on_step(self)
            # give back exactly what arrived, in one small step for the connection only
            self.c.increment_flow_control_window(STEP)
            self.flush()

    def transfer_all(self, size):
        """open_windows(), grant_until_done(), then assert_all_done(size): the usual run."""
        self.open_windows()
        self.grant_until_done()
        assert_all_done(self, size)

    @property
    def order(self):
        """Stream ids of the DATA frames, in arrival order."""
        return [sid for sid, _ in self.frames]

    def finish_order(self):
        """Stream ids in the order their last DATA frame arrived."""
        last = {}
        for i, sid in enumerate(self.order):
            last[sid] = i
        return sorted(last, key=last.get)

    def close(self):
        self.s.close()


def assert_all_done(b, size):
    """Every stream got a 200 and exactly size body bytes."""
    for sid, n in b.done_bytes.items():
        assert n == size, (sid, n)
        assert b.heads[sid][":status"] == "200"


def one_after_another(order, first, second):
    """True if the DATA frames in order are all of first's, then all of second's."""
    return order == [first] * order.count(first) + [second] * order.count(second)
