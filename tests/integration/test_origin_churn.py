"""Issue 19 item 1: a warm gateway under steady load opens no new origin connections.

Before, `gw_back__conn_park` closed a connection whenever max_idle were already idle, so every
dip in load (between two h2load runs, and inside one run when responses land in bursts)
closed connections that the next burst dialled again: thousands of new origin connections per
hundred thousand requests. nginx's log counts the distinct connections that served requests."""
import pytest

from conftest import free_port, run
from test_proxy import gw_config

POOL = 64  # upstream max_connections (the default), one worker


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
    n = nginx_origin(str(root))
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"], upstream_extra=f"pipeline: {pipeline}",
                      route_extra="coalesce: false"),
            wait=[("127.0.0.1", port)])
    h2load(port, 10000, 500, 1)  # warm-up: the pool grows to its cap
    warm = n.connections()
    assert warm <= POOL
    opened = []
    for nreq, c, m in ((20000, 500, 1), (20000, 32, 16), (20000, 500, 1)):
        before = n.connections()
        h2load(port, nreq, c, m)
        opened.append(n.connections() - before)
    print(f"\norigin connections: {warm} after warm-up, then opened per run {opened}")
    # at most the pool cap per run, and in fact none once warm
    assert all(o <= POOL for o in opened), opened
    assert sum(opened) == 0, opened
