"""Issue 19 item 1: a warm gateway under steady load opens no new origin connections.

Before, `gw_back__conn_park` closed a connection whenever max_idle were already idle, so every
dip in load (between two h2load runs, and inside one run when responses land in bursts)
closed connections that the next burst dialled again: thousands of new origin connections per
hundred thousand requests. nginx's log counts the distinct connections that served requests,
and its stub_status the connections it accepted."""
import socket

import pytest

from conftest import free_port, run
from test_proxy import gw_config

POOL = 64  # upstream max_connections (the default), one worker


STATUS = "location = /nginx_status { stub_status; access_log off; }"


def accepts(port):
    """nginx's stub_status accepts counter, less the connection that asked for it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /nginx_status HTTP/1.0\r\nHost: localhost\r\n\r\n")
    got = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        got += d
    s.close()
    # "Active connections: 1 \nserver accepts handled requests\n 12 12 40 \n..."
    lines = got.split(b"\r\n\r\n", 1)[1].decode().splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("server accepts"))
    return int(lines[i + 1].split()[0]) - 1


def h2load(port, n, c, m):
    r = run(["h2load", "-n", str(n), "-c", str(c), "-m", str(m),
             f"http://127.0.0.1:{port}/1k.bin"], timeout=120)
    assert f"{n} succeeded" in r.stdout and " 0 errored" in r.stdout, r.stdout
    return r


@pytest.mark.parametrize("pipeline", [1, 8], ids=["default", "pipeline8"])
def test_issue19_1_warm_gateway_opens_no_origin_connections(gateway, nginx_origin, tmp_path,
                                                             pipeline):
    root = tmp_path / "www"
    root.mkdir()
    (root / "1k.bin").write_bytes(b"x" * 16384)
    n = nginx_origin(str(root), STATUS)
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"], upstream_extra=f"pipeline: {pipeline}",
                      route_extra="coalesce: false"),
            wait=[("127.0.0.1", port)])
    a0 = accepts(n.port)  # nginx's startup probe was one
    h2load(port, 10000, 500, 1)  # warm-up: the pool grows to its cap
    warm = n.connections()
    assert warm <= POOL
    warm_accepts = accepts(n.port) - a0 - 1  # less the first status request
    assert warm_accepts <= POOL
    opened, accepted = [], []
    for nreq, c, m in ((20000, 500, 1), (20000, 32, 16), (20000, 500, 1)):
        before, before_acc = n.connections(), accepts(n.port)
        h2load(port, nreq, c, m)
        opened.append(n.connections() - before)
        accepted.append(accepts(n.port) - before_acc - 1)  # less the earlier status request
    print(f"\norigin connections: {warm} after warm-up ({warm_accepts} accepted), then opened "
          f"per run {opened}, accepted per run {accepted}")
    # at most the pool cap per run, and in fact none once warm
    assert all(o <= POOL for o in opened), opened
    assert sum(opened) == 0, opened
    assert all(a <= POOL for a in accepted), accepted
    assert sum(accepted) == 0, accepted
