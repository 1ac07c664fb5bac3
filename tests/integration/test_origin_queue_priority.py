"""When an upstream's pool is saturated, waiting exchanges leave the queue most
urgent first (RFC 9218 urgency of the request), in arrival order within one urgency.

The upstream has one connection (`max_connections: 1`). A first request to `/late/…` holds it
for about a second (HOLD); meanwhile the client queues ten `u=5` requests and then one `u=0`
request. The scripted origin records the order in which requests reach it: that is the queue's
order."""
import socket
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import pytest

from procs import free_port, slow
from gwtest import gw_config, wait_sample


# The first request holds the one origin connection while the others queue: its answer
# comes this long after the origin has it (1 s in a plain build), which must cover the test's
# sending the rest and the gateway's queuing them on a loaded machine too.
HOLD = f"/late/{slow(1000):.0f}/1000?k=hold"


@pytest.fixture
def gwq(gateway, origin):
    port, admin = free_port(), free_port()
    text = gw_config(port, [f"127.0.0.1:{origin.port}"],
                     upstream_extra="max_connections: 1\nqueue_size: 64\nqueue_timeout: 20s",
                     extra=f"admin: {{address: 127.0.0.1:{admin}}}\n")
    g = gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.port, g.admin = port, admin
    return g


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.c = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.c.initiate_connection()
        self.flush()
        self.status, self.ended = {}, set()

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.s.sendall(data)

    def get(self, path, priority=None):
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", "test"),
                (":path", path)]
        if priority:
            hdrs.append(("priority", priority))
        self.c.send_headers(sid, hdrs, end_stream=True)
        self.flush()
        return sid

    def run_until(self, sids, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not set(sids) <= self.ended and time.monotonic() < deadline:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            data = self.s.recv(65536)
            if not data:
                break
            for ev in self.c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    self.status[ev.stream_id] = dict(ev.headers)[":status"]
                elif isinstance(ev, h2.events.DataReceived):
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    self.ended.add(ev.stream_id)
            self.flush()


def arrival(origin):
    return [r.target for r in origin.requests]


def test_urgent_request_leaves_the_queue_first(gwq, origin):
    cl = Client(gwq.port)
    first = cl.get(HOLD)
    assert wait_for(lambda: len(origin.requests) == 1), "the first request never reached the origin"
    sids = [first]
    for i in range(10):
        sids.append(cl.get(f"/bytes/100?k=low{i}", priority="u=5"))
    sids.append(cl.get("/bytes/100?k=urgent", priority="u=0"))
    cl.run_until(sids)
    assert all(cl.status.get(s) == "200" for s in sids), cl.status
    order = arrival(origin)
    assert order[0] == HOLD
    # the u=0 request was queued last but is the first to get the connection
    assert order[1] == "/bytes/100?k=urgent", order
    # the u=5 ones keep their arrival order
    assert order[2:] == [f"/bytes/100?k=low{i}" for i in range(10)], order


def test_same_urgency_is_first_come_first_served(gwq, origin):
    cl = Client(gwq.port)
    first = cl.get(HOLD)
    assert wait_for(lambda: len(origin.requests) == 1)
    sids = [first] + [cl.get(f"/bytes/10?k=n{i}") for i in range(6)]
    cl.run_until(sids)
    assert arrival(origin)[1:] == [f"/bytes/10?k=n{i}" for i in range(6)]


def test_http1_priority_field_orders_the_queue(gwq, origin):
    """The HTTP/1.1 front has no scheduler, but its requests carry the same `priority` field."""
    port = gwq.port
    procs = [subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                               f"http://127.0.0.1:{port}{HOLD}"],
                              stdout=subprocess.PIPE, text=True)]
    assert wait_for(lambda: len(origin.requests) == 1)
    for i in range(4):
        procs.append(subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                       "-H", "Priority: u=6",
                                       f"http://127.0.0.1:{port}/bytes/10?k=low{i}"],
                                      stdout=subprocess.PIPE, text=True))
    # the u=6 requests are queued (the held connection frees after ~1 s): a sleep of 0.3 s
    # here could end before a loaded ASan build had taken the four curls' requests
    assert wait_sample(gwq.admin, "h2gate_upstream_queue_length", 4, upstream="app") == 4
    assert len(origin.requests) == 1
    procs.append(subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                   "-H", "Priority: u=1",
                                   f"http://127.0.0.1:{port}/bytes/10?k=urgent"],
                                  stdout=subprocess.PIPE, text=True))
    codes = [p.communicate(timeout=20)[0] for p in procs]
    assert codes == ["200"] * 6
    assert arrival(origin)[1] == "/bytes/10?k=urgent", arrival(origin)


def test_priority_update_counts_for_the_queue(gwq, origin):
    """The front's view of the stream decides: a PRIORITY_UPDATE (RFC 9218 §7.1) sent before the
    stream opens makes a request without a priority field the most urgent one."""
    cl = Client(gwq.port)
    first = cl.get(HOLD)
    assert wait_for(lambda: len(origin.requests) == 1)
    sids = [first] + [cl.get(f"/bytes/10?k=n{i}", priority="u=2") for i in range(4)]
    nxt = cl.c.get_next_available_stream_id()
    frame = (4 + 3).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
    cl.s.sendall(frame + nxt.to_bytes(4, "big") + b"u=0")
    assert cl.get("/bytes/10?k=updated") == nxt
    cl.run_until(sids + [nxt])
    assert arrival(origin)[1] == "/bytes/10?k=updated", arrival(origin)


def priority_update(stream_id, value):
    """A PRIORITY_UPDATE frame (RFC 9218 §7.1, type 0x10, on stream 0)."""
    payload = stream_id.to_bytes(4, "big") + value
    return len(payload).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big") + payload


def test_priority_update_moves_a_queued_request(gwq, origin):
    """A PRIORITY_UPDATE for a stream already waiting in the origin queue moves it: raised to
    u=0 the last-queued request leaves first, lowered to u=7 the first-queued one leaves last."""
    cl = Client(gwq.port)
    first = cl.get(HOLD)
    assert wait_for(lambda: len(origin.requests) == 1)
    sids = [cl.get(f"/bytes/10?k=n{i}", priority="u=4") for i in range(6)]
    # all six are in the queue now (a 0.2 s sleep here took a fifth of the hold's second)
    assert wait_sample(gwq.admin, "h2gate_upstream_queue_length", 6, upstream="app") == 6
    assert len(origin.requests) == 1
    cl.s.sendall(priority_update(sids[5], b"u=0") + priority_update(sids[0], b"u=7"))
    cl.run_until([first] + sids)
    assert all(cl.status.get(s) == "200" for s in [first] + sids), cl.status
    assert arrival(origin)[1:] == ["/bytes/10?k=n5", "/bytes/10?k=n1", "/bytes/10?k=n2",
                                   "/bytes/10?k=n3", "/bytes/10?k=n4", "/bytes/10?k=n0"], \
        arrival(origin)
