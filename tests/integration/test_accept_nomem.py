"""A client connection the gateway has no memory for is closed at once and logged at warn
(event=accept_nomem listener=ADDRESS), and the listener goes on taking connections. Left
unaccepted, libuv stopped polling the listener for good: the worker never took another
connection on it. A shortage that refuses many is one line a second per worker, `refused=N`
counting the connections since its previous line (a line each flooded the log). The failure:
an LD_PRELOAD calloc failing for the first connections (gwtest.FIRST_CONN_NOMEM).
Clients: Python sockets; origin: the scripted origin."""
import socket

import pytest

from procs import free_port, recv_all, sanitizer
from gwtest import first_conn_nomem_lib, gw_config, log_events, nomem_burst


@pytest.mark.serial  # a burst of refusals within a second
@pytest.mark.skipif(sanitizer() == "asan", reason="ASan's runtime must come first in LD_PRELOAD")
def test_a_listener_still_takes_connections_after_one_found_no_memory(gateway, origin, tmp_path):
    lib = first_conn_nomem_lib(tmp_path)
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]),
                prefix=("env", f"LD_PRELOAD={lib}", f"FAIL_PORT={port}", "FAIL_CONNS=5"))
    nomem_burst(g, port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", 3)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /bytes/10 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            out = recv_all(s)
        assert out.startswith(b"HTTP/1.1 200 "), (out[:200], g.log()[-3000:])
    nomem = log_events(g.log(), "accept_nomem")
    assert [(e["level"], e.get("refused")) for e in nomem] == [("warn", "1"), ("warn", "4")], \
        g.log()[-3000:]
    assert all(e["listener"] == f"127.0.0.1:{port}" for e in nomem), nomem
