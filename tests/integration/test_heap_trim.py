"""The heap's free memory back to the system once the whole gateway goes quiet (heap.idle_trim,
gateway/server/heap.c).

A burst of 1 MiB responses over h2c (h2load, 100 connections of 10 streams, from nginx) leaves
tens of MiB free inside the two workers' glibc arenas, between live chunks, where no trim
threshold reaches: without the idle trim the gateway's RSS stayed 23 to 42 MiB above its size
before the burst for as long as it stayed quiet. The trim must come only once every worker has
been without work for heap.idle_trim, never while a request is under way, and once per quiet
period."""
import json
import os
import re
import subprocess
import time
from urllib.parse import quote

import pytest

from gwtest import gw_config, h2load_summary, sample, scrape, wait_origin_has
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


def trim_metrics(aport):
    """h2gate_heap_trims_total and h2gate_heap_trim_seconds_total of the admin's /metrics, as
    Prometheus' parser reads them: {reason: (trims, seconds)}."""
    fams, _ = scrape(aport)
    assert fams["h2gate_heap_trims"].type == "counter"
    assert fams["h2gate_heap_trim_seconds"].type == "counter"
    return {r: (sample(fams, "h2gate_heap_trims_total", reason=r),
                sample(fams, "h2gate_heap_trim_seconds_total", reason=r))
            for r in ("idle", "cache")}


def idle_checks(aport):
    """(idle trims made, idle checks that found too little to give back) of the admin's
    /metrics: h2gate_heap_trims_total and h2gate_heap_trims_skipped_total, reason="idle"."""
    fams, _ = scrape(aport)
    assert fams["h2gate_heap_trims_skipped"].type == "counter"
    return (sample(fams, "h2gate_heap_trims_total", reason="idle"),
            sample(fams, "h2gate_heap_trims_skipped_total", reason="idle"))


def heap_log(g):
    """The lines of the log that say when workers went quiet and what the trims did."""
    return "\n".join(l for l in g.log().splitlines() if "worker_quiet" in l or "heap_trim" in l
                     or "cache_trim" in l)


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
    aport = free_port()
    g = start(gateway, big, hang=origin,
              extra=f"heap:\n  idle_trim_free: 4MiB\nadmin:\n  address: 127.0.0.1:{aport}\n")
    warm(g.port)
    time.sleep(3)
    before = trims(g)
    made, skipped = idle_checks(aport)
    # a request the origin never answers keeps its connection, and so its worker, at work
    # (HTTP/2: the gateway reads on while a stream waits, so it sees the client go at once)
    c = subprocess.Popen(["curl", "-s", "--http2-prior-knowledge", f"http://127.0.0.1:{g.port}/hang"],
                         stdout=subprocess.DEVNULL)
    try:
        wait_origin_has(origin, "/hang")
        burst(g.port)
        time.sleep(3)  # the other worker, and the burst's connections, are long quiet
        assert trims(g) == before, heap_log(g)
        # not even looked at: the gateway is not quiet while one worker has work
        assert idle_checks(aport) == (made, skipped), heap_log(g)
    finally:
        c.kill()
        c.wait()
    deadline = time.monotonic() + slow(10)
    while trims(g) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trims(g) == before + 1, heap_log(g)
    assert idle_checks(aport) == (made + 1, skipped), heap_log(g)
    # one trim per quiet period: nothing more while the gateway stays quiet, nor after a single
    # small request (the resident size did not grow by heap.idle_trim_free since)
    time.sleep(3)
    r = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-r", "0-99",
             f"http://127.0.0.1:{g.port}/big.bin"], timeout=slow(10))
    assert r.stdout == "206"
    time.sleep(3)
    assert trims(g) == before + 1, heap_log(g)
    # the quiet period after it was checked, and the trim skipped: counted as such
    assert idle_checks(aport) == (made + 1, skipped + 1), heap_log(g)


# A stand-in for glibc's malloc_trim, preloaded: each call is written to TRIM_LOG as a "start"
# line with the number of calls under way, then an "end" line, and takes TRIM_MS longer than
# glibc's own (which it calls), so that a trim asked meanwhile would overlap it.
SLOW_TRIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int running;

static void note(const char *what, int n)
{
    char line[64];
    int len = snprintf(line, sizeof(line), "%s %d\n", what, n);
    int fd = open(getenv("TRIM_LOG"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, line, (size_t)len);
        close(fd);
    }
}

int malloc_trim(size_t pad)
{
    int (*real)(size_t) = (int (*)(size_t))dlsym(RTLD_NEXT, "malloc_trim");
    int n = atomic_fetch_add(&running, 1) + 1;
    note("start", n);
    long ms = atol(getenv("TRIM_MS"));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    int rv = real(pad);
    atomic_fetch_sub(&running, 1);
    note("end", n);
    return rv;
}
"""


def trim_calls(path):
    return path.read_text().split("\n")[:-1] if path.exists() else []


@pytest.mark.skipif(sanitized(), reason="ASan's runtime must come first in LD_PRELOAD")
def test_an_idle_trim_and_a_purge_trim_take_turns_and_the_purge_is_answered_at_once(
        gateway, tmp_path):
    """Two reasons to trim at once: the gateway went quiet (heap.idle_trim) and, while that trim
    runs, an admin's purges remove twice memory/16 of the cache. All go through the one
    trimmer: the purges' trim runs after the idle one, never beside it (malloc_trim walks and
    locks every arena), once for both asks made meanwhile, and the admin answers the purges
    without waiting for any."""
    from cachetest import CountingOrigin, admin, h1

    src, lib, log = tmp_path / "slowtrim.c", tmp_path / "libslowtrim.so", tmp_path / "trims"
    src.write_text(SLOW_TRIM)
    r = run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"])
    assert r.returncode == 0, r.stderr
    with CountingOrigin() as o:
        port, aport = free_port(), free_port()
        # memory/16 = 256 KiB: purging the four 128 KiB answers makes a trim due
        text = gw_config(port, [f"127.0.0.1:{o.port}"], route_extra="cache: true\n", workers=2,
                         log_level="debug",
                         extra=f"admin:\n  address: 127.0.0.1:{aport}\n"
                               "cache:\n  memory: 4MiB\n  max_object: 256KiB\n"
                               "heap:\n  idle_trim: 1s\n  idle_trim_free: 0\n")
        g = gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", aport)],
                    prefix=("env", f"LD_PRELOAD={lib}", f"TRIM_LOG={log}", "TRIM_MS=1500"))
        # each reason's series is there from the start, at 0 (rate() works from the first
        # scrape); the workers have had work since their start: no trim yet
        assert trim_metrics(aport) == {"idle": (0, 0), "cache": (0, 0)}
        for i in range(4):
            assert h1(port, f"/k/big/131072?n={i}")[0] == 200
        # the gateway goes quiet 1 s after these (its workers had work from their start on):
        # the idle trim starts, and takes 1.5 s
        deadline = time.monotonic() + slow(10)
        while not trim_calls(log) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert trim_calls(log) == ["start 1"], heap_log(g)
        # four purges of one answer each: the second and the fourth make a trim due (each
        # memory/16 removed), both while the idle trim runs
        t0 = time.monotonic()
        for i in range(4):
            url = quote(f"http://localhost/k/big/131072?n={i}", safe="")
            st, _, body = admin(aport, "POST", f"/cache/purge?url={url}")
            assert (st, json.loads(body)) == (200, {"purged": 1}), (st, body)
        took = time.monotonic() - t0
        assert took < 1.0, f"the purges were answered after {took:.2f} s"
        assert trim_calls(log) == ["start 1"]  # the purges' trim waits for its turn
        deadline = time.monotonic() + slow(10)
        while len(trim_calls(log)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        # one at a time: never two under way; the two purges' asks, made while the idle trim
        # ran, served by one trim after it
        assert trim_calls(log) == ["start 1", "end 1", "start 1", "end 1"], heap_log(g)
        text = g.wait_log("event=cache_trim ")
        assert "event=heap_trim " in text, heap_log(g)
        assert re.search(r"event=cache_trim after=purge ms=1[5-9][0-9][0-9]\.", text), heap_log(g)
        assert text.count("event=cache_trim ") == 1, heap_log(g)
        # the two trims are counted, each under its reason, with the time it took (1.5 s
        # slower than glibc's own, by the stand-in)
        m = trim_metrics(aport)
        print(f"trims and seconds by reason: {m}")
        assert m["idle"][0] == 1 and m["cache"][0] == 1, (m, heap_log(g))
        for reason in ("idle", "cache"):
            assert 1.5 <= m[reason][1] < slow(10), (m, heap_log(g))
