"""The gateway in front of an origin that misbehaves (issue 26 item 1, first part): for each
fault (hostile_origin.py) the client's answer (502 before the response head, 504 on a timeout,
a reset stream after it), the next request served, the faulty origin connection never reused,
and a POST never sent twice."""
import socket
import time

import h2.events
import pytest

from conftest import free_port
from gwtest import Client, gw_config
from hostile_origin import HostileOrigin


@pytest.fixture
def hostile():
    with HostileOrigin() as o:
        yield o


def hgw(gateway, origin, upstream_extra=""):
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], upstream_extra=upstream_extra),
                wait=[("127.0.0.1", port)])
    g.port = port
    return g


def h2_req(port, path, method="GET", body=None, timeout=15):
    """(status or None, body bytes, reset code or None) of one request over h2c."""
    cl = Client(port)
    sid = cl.request(path, method=method, body=body)
    status, data, reset, done = None, b"", None, False
    deadline = time.monotonic() + timeout
    while not done and time.monotonic() < deadline:
        cl.s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = cl.s.recv(1 << 20)
        except socket.timeout:
            break
        if not chunk:
            break
        for e in cl.c.receive_data(chunk):
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                status = int(dict(e.headers)[":status"])
            elif isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
                data += e.data
                cl.c.acknowledge_received_data(e.flow_controlled_length, sid)
            elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
                done = True
            elif isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                reset, done = e.error_code, True
        cl.flush()
    cl.close()
    return status, data, reset


BEFORE_HEAD = ["/reset-mid-head", "/many-headers", "/long-header"]
AFTER_HEAD = ["/reset-mid-body-cl", "/reset-mid-body-chunked", "/fewer-then-close",
              "/chunk-overflow", "/chunk-ext-1mib", "/trailer-1mib"]


@pytest.mark.parametrize("path", BEFORE_HEAD)
def test_fault_before_the_head_is_502(gateway, hostile, path):
    g = hgw(gateway, hostile)
    status, body, reset = h2_req(g.port, path)
    assert (status, reset) == (502, None), (status, body[:100], reset)
    before = hostile.connections
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")
    assert hostile.connections == before + 1  # the faulty connection was not reused


@pytest.mark.parametrize("path", AFTER_HEAD)
def test_fault_after_the_head_resets_the_stream(gateway, hostile, path):
    g = hgw(gateway, hostile)
    status, body, reset = h2_req(g.port, path)
    assert status == 200 and reset == 2, (status, len(body), reset)  # INTERNAL_ERROR
    before = hostile.connections
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")
    assert hostile.connections == before + 1


def test_reset_before_any_byte_retried_for_get_not_for_post(gateway, hostile):
    """RFC 9110 §9.2.2: an idempotent request that got no byte may go again; a POST never."""
    g = hgw(gateway, hostile, upstream_extra="retries: 2")
    assert h2_req(g.port, "/reset-before")[0] == 502
    assert hostile.count("/reset-before") == 3  # the request and two retries
    assert h2_req(g.port, "/reset-before", method="POST", body=b"x" * 10)[0] == 502
    assert hostile.count("/reset-before") == 4  # once
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")


def test_more_body_than_content_length(gateway, hostile):
    """The first Content-Length bytes are the response; the connection that sent more is not
    used again (its extra bytes would be the next response)."""
    g = hgw(gateway, hostile)
    assert h2_req(g.port, "/more-than-cl")[:2] == (200, b"z" * 10)
    before = hostile.connections
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")
    assert hostile.connections == before + 1


def test_interim_flood(gateway, hostile):
    """10,000 "100 Continue" heads before the final one: each is parsed and dropped (they
    answer the gateway's own request), the final answer reaches the client at once."""
    g = hgw(gateway, hostile)
    t0 = time.monotonic()
    status, body, reset = h2_req(g.port, "/interim-flood")
    assert (status, body, reset) == (200, b"ok", None)
    assert time.monotonic() - t0 < 2
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")


def test_dribbled_head_504_and_body_reset(gateway, hostile):
    g = hgw(gateway, hostile, upstream_extra="response_timeout: 1s\nread_timeout: 1s")
    t0 = time.monotonic()
    assert h2_req(g.port, "/dribble-head")[0] == 504  # the head never completes in time
    assert time.monotonic() - t0 < 6
    status, body, reset = h2_req(g.port, "/dribble-body", timeout=20)
    # a byte every 0.3 s keeps read_timeout (1 s) from firing: the body arrives whole
    assert status == 200 and body == b"d" * 20 and reset is None
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")


def test_unsolicited_bytes_on_an_idle_connection(gateway, hostile):
    """An origin that sends bytes nobody asked for on a kept-alive connection: that connection
    is closed, never read as the answer to the next request."""
    g = hgw(gateway, hostile)
    assert h2_req(g.port, "/unsolicited")[:2] == (200, b"ok")
    time.sleep(0.5)  # the stray response arrives on the idle connection
    assert h2_req(g.port, "/ok")[:2] == (200, b"ok")
    assert hostile.count("/ok") == 1


def test_answer_before_the_post_body_then_close(gateway, hostile):
    """An origin answers a POST before reading its body and closes: the client gets that
    answer, and the POST is not sent again."""
    g = hgw(gateway, hostile)
    status, body, reset = h2_req(g.port, "/post-close", method="POST", body=b"p" * 16000)
    assert status == 200 and body == b"ok", (status, body, reset)
    assert hostile.count("/post-close") == 1


def test_name_that_does_not_resolve_and_origin_that_never_accepts(gateway, hostile):
    port = free_port()
    gateway(gw_config(port, ["does-not-exist.invalid:80"]), wait=[("127.0.0.1", port)])
    assert h2_req(port, "/ok")[0] == 502
    # a listening socket whose backlog is full and never accepted: the connect times out
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    fillers = []
    for _ in range(8):
        f = socket.socket()
        f.setblocking(False)
        try:
            f.connect(s.getsockname())
        except BlockingIOError:
            pass
        fillers.append(f)
    port2 = free_port()
    gateway(gw_config(port2, [f"127.0.0.1:{s.getsockname()[1]}"],
                      upstream_extra="connect_timeout: 1s\nretries: 0"),
            wait=[("127.0.0.1", port2)])
    t0 = time.monotonic()
    assert h2_req(port2, "/ok")[0] in (502, 504)
    assert time.monotonic() - t0 < 6
    for f in fillers:
        f.close()
    s.close()
