"""A warm gateway under steady load opens no new origin connections.

Before 48d0a48, `gw_back__conn_park` closed a connection whenever max_idle were already idle,
so every dip in load (between two h2load runs, and inside one run when responses land in
bursts) closed connections that the next burst dialled again: thousands of new origin
connections per hundred thousand requests. With pipelining, a response whose client stops
reading it (the gateway pauses it) moves the requests queued behind it elsewhere, and the
connection was closed once only their placeholders remained: the next pause closed another.

nginx's stub_status counts the connections it accepted (the figure these tests assert) and the
ones open; its log the distinct connections that served requests."""
import re

import pytest

from procs import free_port, h1_get, run, sanitized
from gwtest import gw_config

POOL = 64  # upstream max_connections (the default), one worker


STATUS = "location = /nginx_status { stub_status; access_log off; }"


def nginx_status(port):
    """(accepts, active) from nginx's stub_status, less the connection that asked for them."""
    got = h1_get(port, "/nginx_status", timeout=5)
    # "Active connections: 1 \nserver accepts handled requests\n 12 12 40 \n..."
    text = got.split(b"\r\n\r\n", 1)[1].decode()
    active = int(re.search(r"Active connections:\s*(\d+)", text).group(1))
    accepts = int(re.search(r"accepts handled requests\s*\n\s*(\d+)", text).group(1))
    return accepts - 1, active - 1


def accepts(port):
    return nginx_status(port)[0]


def h2load(port, n, c, m, path="/1k.bin"):
    r = run(["h2load", "-n", str(n), "-c", str(c), "-m", str(m),
             f"http://127.0.0.1:{port}{path}"], timeout=120)
    assert f"{n} succeeded" in r.stdout and " 0 errored" in r.stdout, r.stdout
    return r


def opened_per_run(n, port, runs):
    """Origin connections accepted by nginx during each h2load run (less the status probes)."""
    opened = []
    for nreq, c, m, path in runs:
        before = accepts(n.port)
        h2load(port, nreq, c, m, path)
        opened.append(accepts(n.port) - before - 1)  # less the status request before the run
    return opened


@pytest.mark.parametrize("pipeline", [1, 8], ids=["default", "pipeline8"])
def test_warm_gateway_opens_no_origin_connections(gateway, nginx_origin, tmp_path,
                                                             pipeline):
    if sanitized():  # counts over seconds of load: the plain build measures them (CI time)
        pytest.skip("a measurement of the plain build; the ASan run covers these paths")
    root = tmp_path / "www"
    root.mkdir()
    (root / "1k.bin").write_bytes(b"x" * 1024)
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
    before = n.connections()
    # the churn this guards against opened thousands per hundred thousand requests: a few
    # hundred per run of 10,000
    opened = opened_per_run(n, port, ((10000, 100, 1, "/1k.bin"), (10000, 32, 16, "/1k.bin"),
                                      (10000, 500, 1, "/1k.bin"), (10000, 100, 1, "/1k.bin")))
    used = n.connections() - before
    print(f"\norigin connections: {warm} after warm-up ({warm_accepts} accepted), then accepted "
          f"per run {opened}, {used} new ones served requests")
    # at most the pool cap per run, and in fact none once warm
    assert all(o <= POOL for o in opened), opened
    assert sum(opened) == 0, opened
    assert used == 0


def test_pipelined_pauses_keep_their_connections(gateway, nginx_origin, tmp_path):
    """256 KiB answers to 32 streams: the gateway pauses some of them (its client-side write
    buffer is full), which moves the requests pipelined behind them to other connections. The
    connection drains the answers nobody waits for and goes back to the pool; before, it was
    closed, and a pool that was full had to dial again (accepts grew on every run)."""
    pool = 16
    root = tmp_path / "www"
    root.mkdir()
    (root / "1k.bin").write_bytes(b"x" * 1024)
    (root / "256k.bin").write_bytes(b"y" * 262144)
    n = nginx_origin(str(root), STATUS)
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"],
                      upstream_extra=f"pipeline: 8\nmax_connections: {pool}\nmax_idle: {pool}",
                      route_extra="coalesce: false"),
            wait=[("127.0.0.1", port)])
    h2load(port, 4000, 64, 1)  # warm-up: the pool grows to its cap
    h2load(port, 2000, 8, 4, "/256k.bin")
    warm_accepts, warm_active = nginx_status(n.port)
    opened = opened_per_run(n, port, [(2000, 8, 4, "/256k.bin")] * 3)
    accepted, active = nginx_status(n.port)
    print(f"\norigin connections: {warm_accepts} accepted after warm-up ({warm_active} open), "
          f"then accepted per run {opened}, {active} open at the end")
    assert warm_accepts <= pool + 1  # and nginx's startup probe
    assert all(o <= pool for o in opened), opened
    assert sum(opened) == 0, opened
    assert active == warm_active
