"""Response trailers that wait behind flow-controlled DATA are HPACK-encoded
when they are framed, not when they arrive, so the HEADERS of other streams written meanwhile
decode right in an independent client (python3-h2). Before, the trailer entries were already in
the gateway's encoder table while the client had not seen them: the next stream's HEADERS
decoded to wrong fields or failed with COMPRESSION_ERROR."""
import time

import h2.events
import h2.settings

from procs import free_port
from gwtest import Client, gw_config


def test_late_trailers_keep_hpack_in_step(gateway, origin):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="coalesce: false"),
            wait=[("127.0.0.1", port)])
    cl = Client(port)
    cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    cl.flush()
    s1 = cl.request("/chunked/1000")
    evs = cl.events(lambda e: any(isinstance(x, h2.events.ResponseReceived) for x in e), timeout=5)
    time.sleep(0.3)  # the origin's body and trailer reach the gateway, which must hold them
    heads = {}
    for path in ("/bytes/10", "/bytes/20", "/chunked/5"):
        sid = cl.request(path)
        got = cl.events(lambda e, sid=sid: any(isinstance(x, h2.events.ResponseReceived)
                                               and x.stream_id == sid for x in e), timeout=5)
        evs += got
        heads[sid] = path
    for e in evs:
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id in heads:
            h = dict(e.headers)
            assert h[":status"] == "200", h
    # now the windows open: stream 1's DATA, then its trailers, decoded in step
    cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
    cl.flush()
    done = {}
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamEnded) for x in e) >= 4, timeout=10)
    body = {}
    trailers = {}
    for e in evs:
        if isinstance(e, h2.events.DataReceived):
            body[e.stream_id] = body.get(e.stream_id, b"") + e.data
            cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.TrailersReceived):
            trailers[e.stream_id] = dict(e.headers)
        elif isinstance(e, h2.events.StreamEnded):
            done[e.stream_id] = True
        elif isinstance(e, (h2.events.ConnectionTerminated, h2.events.StreamReset)):
            raise AssertionError(f"unexpected {e}")
    cl.flush()
    assert s1 in done and len(body[s1]) == 1000
    assert "x-checksum" in trailers[s1], trailers
    assert all(sid in done for sid in heads), (done, heads)
    cl.close()
