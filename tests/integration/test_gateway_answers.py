"""A final response made by the gateway itself (no route, 429) on an HTTP/2
stream whose request is still open is followed by RST_STREAM(NO_ERROR) (RFC 9113 §8.1), so the
stream closes and the connection's idle timeout can fire; before, the half-closed stream kept
the connection open past timeouts.idle for ever."""
import time

import h2.events
import pytest

from procs import free_port
from gwtest import Client


def config(port, extra=""):
    return "\n".join([
        "workers: 1", "log_level: debug", "listen:", f"  - address: 127.0.0.1:{port}",
        "upstreams:", "  app:", "    servers: [127.0.0.1:9]",
        "routes:",
        "  - { host: '*', path: /limited, upstream: app, request_rate: 1, request_burst: 1 }",
        "  - { host: '*', path: /api, upstream: app }",
        "timeouts: {idle: 500ms}",
    ]) + "\n" + extra


def open_request(cl, path):
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"),
                            (":authority", "localhost")], end_stream=False)
    cl.flush()
    return sid


@pytest.mark.parametrize("path,status,warm", [("/nowhere", "404", 0), ("/limited", "429", 1)],
                         ids=["no_route", "rate_limited"])
def test_gateway_answer_resets_the_open_request_and_idle_fires(gateway, path, status, warm):
    port = free_port()
    gateway(config(port), wait=[("127.0.0.1", port)])
    cl = Client(port)
    for _ in range(warm):  # spend the route's one token: this one goes to the (refusing) origin
        sid = cl.request(path)
        cl.events(lambda e: any(isinstance(x, h2.events.StreamEnded) and x.stream_id == sid
                                for x in e), timeout=5)
    sid = open_request(cl, path)
    start = time.monotonic()
    evs = cl.events(lambda e: any(isinstance(x, h2.events.ConnectionTerminated) for x in e),
                    timeout=6)
    heads = [e for e in evs if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
    assert heads and dict(heads[0].headers)[":status"] == status
    resets = [e for e in evs if isinstance(e, h2.events.StreamReset) and e.stream_id == sid]
    assert resets and resets[0].error_code == 0, evs
    ended = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)]
    assert ended and ended[0].error_code == 0, evs
    assert time.monotonic() - start < 4
    cl.close()
