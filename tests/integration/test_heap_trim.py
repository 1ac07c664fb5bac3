"""The heap's free memory back to the system once the whole gateway goes quiet (heap.idle_trim,
gateway/server/heap.c).

A burst of 1 MiB responses over h2c (h2load, 100 connections of 10 streams, from nginx) leaves
tens of MiB free inside the two workers' glibc arenas, between live chunks, where no trim
threshold reaches: without the idle trim the gateway's RSS stayed 23 to 42 MiB above its size
before the burst for as long as it stayed quiet. The trim must come only once every worker has
been without work for heap.idle_trim, never while a request is under way, and once per quiet
period."""
import os
import subprocess
import time

import pytest

from gwtest import gw_config, h2load_summary, wait_origin_has
from procs import free_port, rss_kib, run, sanitized, slow

MiB = 1 << 20


@pytest.fixture
def big(tmp_path, nginx_origin):
    root = tmp_path / "www"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(MiB))
    return nginx_origin(str(root))


def start(gateway, origin, hang=None, extra=""):
    """A gateway of 2 workers in front of nginx (origin); with hang (a ScriptedOrigin), its
    /hang goes there: a request the origin never answers."""
    port = free_port()
    text = gw_config(port, [f"127.0.0.1:{origin.port}"], workers=2, log_level="debug",
                     extra=extra)
    if hang:
        text = text.replace("routes:\n", "routes:\n  - host: '*'\n    path: /hang\n"
                                          "    upstream: hang\n", 1)
        text = text.replace("upstreams:\n", f"upstreams:\n  hang:\n    servers: "
                                             f"[127.0.0.1:{hang.port}]\n", 1)
    g = gateway(text, wait=[("127.0.0.1", port)])
    g.port = port
    return g


def burst(port):
    """2,000 responses of 1 MiB, up to 1,000 streams at once: what leaves the arenas' free
    memory between live chunks."""
    r = run(["h2load", "-n", "2000", "-c", "100", "-m", "10", f"http://127.0.0.1:{port}/big.bin"],
            timeout=slow(120))
    assert h2load_summary(r.stdout)["succeeded"] == 2000, r.stdout


def warm(port):
    """One response through each worker's paths (connections, buffers, arenas), then quiet."""
    r = run(["h2load", "-n", "4", "-c", "4", f"http://127.0.0.1:{port}/big.bin"], timeout=slow(30))
    assert h2load_summary(r.stdout)["succeeded"] == 4, r.stdout


def trims(g):
    return g.log().count("event=heap_trim ")


def heap_log(g):
    """The lines of the log that say when workers went quiet and what the trims did."""
    return "\n".join(l for l in g.log().splitlines() if "worker_quiet" in l or "heap_trim" in l)


@pytest.mark.skipif(sanitized(), reason="ASan's quarantine keeps freed memory: RSS says nothing")
def test_rss_comes_back_once_the_gateway_goes_quiet_after_a_burst(gateway, big):
    g = start(gateway, big)
    warm(g.port)
    time.sleep(3)  # the warm-up's own quiet period (and its trim, if it earned one) is over
    base = rss_kib(g.proc.pid) * 1024
    # how much a burst leaves depends on how far nginx, the gateway and h2load (sharing the
    # machine's cores) run ahead of one another: 9 to 40 MiB here; up to three bursts until it
    # is well above the bound (a trim, if one comes between them, only makes this harder)
    for _ in range(3):
        burst(g.port)
        peak = rss_kib(g.proc.pid) * 1024
        if peak - base >= 12 * MiB:
            break
    assert peak - base >= 12 * MiB, f"the bursts left only {(peak - base) / MiB:.1f} MiB"
    deadline = time.monotonic() + slow(10)
    while True:
        rss = rss_kib(g.proc.pid) * 1024
        if rss - base <= 8 * MiB or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    print(f"\nRSS before {base / MiB:.1f} MiB, after the burst {peak / MiB:.1f}, "
          f"quiet {rss / MiB:.1f}")
    assert rss - base <= 8 * MiB, (
        f"RSS {rss / MiB:.1f} MiB once quiet, {base / MiB:.1f} before the burst "
        f"({peak / MiB:.1f} right after it)")
    assert "event=heap_trim " in g.wait_log("event=heap_trim "), heap_log(g)


@pytest.mark.skipif(sanitized(), reason="ASan's quarantine keeps freed memory: RSS says nothing")
def test_no_trim_while_a_request_is_under_way_then_one_per_quiet_period(gateway, big, origin):
    # a burst on a loaded machine may leave less free than the default 8 MiB: 4 MiB keeps the
    # trim certain, and a single small request still grows the heap by far less
    g = start(gateway, big, hang=origin, extra="heap:\n  idle_trim_free: 4MiB\n")
    warm(g.port)
    time.sleep(3)
    before = trims(g)
    # a request the origin never answers keeps its connection, and so its worker, at work
    # (HTTP/2: the gateway reads on while a stream waits, so it sees the client go at once)
    c = subprocess.Popen(["curl", "-s", "--http2-prior-knowledge", f"http://127.0.0.1:{g.port}/hang"],
                         stdout=subprocess.DEVNULL)
    try:
        wait_origin_has(origin, "/hang")
        burst(g.port)
        time.sleep(3)  # the other worker, and the burst's connections, are long quiet
        assert trims(g) == before, heap_log(g)
    finally:
        c.kill()
        c.wait()
    deadline = time.monotonic() + slow(10)
    while trims(g) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trims(g) == before + 1, heap_log(g)
    # one trim per quiet period: nothing more while the gateway stays quiet, nor after a single
    # small request (the resident size did not grow by heap.idle_trim_free since)
    time.sleep(3)
    r = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-r", "0-99",
             f"http://127.0.0.1:{g.port}/big.bin"], timeout=slow(10))
    assert r.stdout == "206"
    time.sleep(3)
    assert trims(g) == before + 1, heap_log(g)
