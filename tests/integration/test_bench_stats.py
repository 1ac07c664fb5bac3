"""scripts/lib/bench_stats.py, the rules of scripts/bench's cache scenario (issue 41): a cache
run is valid only when no request reached the origin while it was measured and its warm-up
was answered; the report puts the cache rows in their own table with the goal line (a hit
against nginx serving the file). The runs are written by hand as scripts/bench writes them."""
import json
import os
import subprocess

import pytest

from procs import ROOT, sanitized

# Checks of a script, not of the gateway: the run against the plain build is enough.
pytestmark = pytest.mark.skipif(sanitized(), reason="checks a script, not the binary")

STATS = os.path.join(ROOT, "scripts", "lib", "bench_stats.py")
REQUESTS = 2000


def h2load_out(requests, ok):
    return (f"finished in 1.00s, {requests:.2f} req/s, 2.00MB/s\n"
            f"requests: {requests} total, {requests} started, {requests} done, {ok} succeeded, "
            f"{requests - ok} failed, 0 errored, 0 timeout\n"
            f"status codes: {ok} 2xx, 0 3xx, 0 4xx, {requests - ok} 5xx\n"
            f"traffic: 2.10MB (2200000) total, 20.00KB (20000) headers (space savings 90.00%), "
            f"1.95MB ({requests * 1024}) data\n")


def write_run(runs, scenario, proxy, cpu_ticks, asked=0, warm="200,200,200", ok=REQUESTS,
              requests=REQUESTS, accepts=1, more=(), client=None, origin=None):
    """One run directory as scripts/bench leaves it; asked: the origin's requests while measured
    (None: not counted); warm: the warm-up's status codes (None: no warm-up, as outside the cache
    scenarios); cpu_ticks: the proxy's CPU over the run at 100 ticks a second; accepts: the
    origin's connections; more: further meta lines (key=value); client: (file name, text) of
    the client's summary in place of h2load's (page.out, hsload.out); origin: the origin's
    access log lines (default: the warm-up's miss alone)."""
    rd = runs / f"{scenario}-tls-{proxy}-1"
    rd.mkdir()
    meta = [f"scenario={scenario}", "transport=tls", f"proxy={proxy}", "rep=1", "clk_tck=100"]
    if warm is not None:
        meta.append(f"warm_codes={warm}")
    if asked is not None:
        meta.append(f"origin_requests_measured={asked}")
    meta += [f"requests={requests}", "cpu_before=0", f"cpu_after={cpu_ticks}", "sys_before=0",
             "sys_after=1", "hwm_kib=10240", "proxy_died=0", f"origin_accepts={accepts}", *more]
    (rd / "meta").write_text("\n".join(meta) + "\n")
    if client:
        (rd / client[0]).write_text(client[1])
    else:
        (rd / "h2load.out").write_text(h2load_out(requests, ok))
        # h2load --log-file: start time, status, duration in µs
        (rd / "h2load.log").write_text("".join(f"{i}\t200\t{500 + i}\n" for i in range(requests)))
    # by default the warm-up's miss reached the origin: the run's access log has it, which is
    # allowed
    (rd / "origin.log").write_text("".join(l + "\n" for l in origin or ["1 200 90"]))
    return rd


def summarize(rd):
    r = subprocess.run(["/usr/bin/python3", STATS, "run", str(rd)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_cache_run_of_hits_only_is_valid(tmp_path):
    """The origin saw the warm-up's miss but nothing while measured: the run counts (a forward
    scenario with one origin request for 2,000 answers would not)."""
    line = summarize(write_run(tmp_path, "cache-small", "h2gate-cache", 2))
    assert line.endswith(": valid"), line
    assert "0 origin requests while measured" in line


@pytest.mark.parametrize("asked,warm,ok,why", [
    (37, "200,200,200", REQUESTS, "37 requests reached the origin while measured: not all hits"),
    (None, "200,200,200", REQUESTS, "the origin's requests were not counted"),
    (0, "200,502,200", REQUESTS, "warm-up GETs answered 200,502,200"),
    (0, "200,200,200", REQUESTS - 5, "5 5xx"),
])
def test_cache_run_that_is_not_all_hits_is_invalid(tmp_path, asked, warm, ok, why):
    line = summarize(write_run(tmp_path, "cache-large", "nginx-cache", 40, asked, warm, ok))
    assert "INVALID" in line and why in line, line


def test_report_has_the_cache_table_and_the_goal(tmp_path):
    """h2gate-cache at 10 µs a hit against nginx-static at 20 µs a file: the goal is met for
    cache-small; a cache peer that missed is INVALID and left out of the ratio."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for proxy, ticks, asked in (("h2gate-cache", 2, 0), ("haproxy-cache", 3, 0),
                                ("nginx-cache", 5, 12), ("nginx-static", 4, 0)):
        summarize(write_run(runs, "cache-small", proxy, ticks, asked))
    md, png = tmp_path / "t.md", tmp_path / "t.png"
    r = subprocess.run(["/usr/bin/python3", STATS, "report", str(runs), str(md), str(png)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    assert "| cache-small (tls) | h2gate-cache | 1/1 valid |" in text
    assert "| cache-small (tls) | nginx-cache | **INVALID** (1/1 runs) |" in text
    # CPU µs/req is the fourth figure: 10 over haproxy-cache's 15, over nginx-static's 20
    ratio = next(row for row in text.splitlines() if "h2gate-cache / best cache peer" in row)
    assert ratio.split("|")[7].strip() == "0.67 (haproxy-cache)", ratio
    floor = next(row for row in text.splitlines() if "h2gate-cache / nginx-static (floor)" in row)
    assert floor.split("|")[7].strip() == "0.50", floor
    assert ("- cache-small (tls): 10.0 µs CPU per hit, nginx-static 20.0 µs per file (0.50): "
            "met") in text
    assert "cache-small (tls), nginx-cache: rep 1: 12 requests reached the origin" in text


def write_load_run(runs, proxy, cpu_ticks, origin_ticks, client_s, peak):
    """A small-scenario run as scripts/bench leaves it, with the load side's CPU (the origin's
    ticks over the run, h2load's seconds) and the origin connections open at once."""
    rd = runs / f"small-tls-{proxy}-1"
    rd.mkdir()
    meta = ["scenario=small", "transport=tls", f"proxy={proxy}", "rep=1", "clk_tck=100",
            f"requests={REQUESTS}", "cpu_before=0", f"cpu_after={cpu_ticks}", "sys_before=0",
            "sys_after=1", f"origin_conns_peak={peak}", "origin_cpu_before=100",
            f"origin_cpu_after={100 + origin_ticks}", f"client_cpu_s={client_s:.2f}",
            "hwm_kib=10240", "proxy_died=0", f"origin_accepts={peak}"]
    (rd / "meta").write_text("\n".join(meta) + "\n")
    (rd / "h2load.out").write_text(h2load_out(REQUESTS, REQUESTS))
    (rd / "h2load.log").write_text("".join(f"{i}\t200\t{500 + i}\n" for i in range(REQUESTS)))
    # every request reached the origin, over `peak` connections
    (rd / "origin.log").write_text("".join(f"{i % peak} 200 90\n" for i in range(REQUESTS)))
    return rd


def test_load_run_reports_origin_concurrency_and_load_side_cpu(tmp_path):
    """Whether the proxy's pool or the load side set req/s at saturation: the origin
    connections open at once and the CPU the origin and h2load spent per request (3 ticks of
    nginx and 0.05 s of h2load over 2,000 requests in 1 s: 40 µs a request, 8 % busy)."""
    line = summarize(write_load_run(tmp_path, "h2gate", 4, 3, 0.05, 64))
    assert line.endswith(": valid"), line
    assert "(64 used, 64 at once)" in line, line
    assert "origin+client 40.0 µs CPU/req (8 % busy)" in line, line


def test_report_has_the_wide_pool_row_and_the_load_side_columns(tmp_path):
    """h2gate-wide (BENCH_WIDE) is a row of the load table beside h2gate, with the
    concurrency it gave the origin; the load side's figures get no ratio (they are the origin's
    and the client's cost, not the proxy's)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for proxy, ticks, org, peak in (("h2gate", 4, 3, 64), ("h2gate-wide", 5, 3, 512),
                                    ("haproxy", 6, 4, 64)):
        summarize(write_load_run(runs, proxy, ticks, org, 0.05, peak))
    md, png = tmp_path / "t.md", tmp_path / "t.png"
    r = subprocess.run(["/usr/bin/python3", STATS, "report", str(runs), str(md), str(png)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = md.read_text().splitlines()
    head = next(row for row in rows if row.startswith("| scenario |"))
    cols = [c.strip() for c in head.split("|")]
    at_once = cols.index("origin conns open at once")
    load = cols.index("origin+client CPU µs/req")
    wide = next(row for row in rows if "| h2gate-wide |" in row).split("|")
    assert wide[at_once].strip() == "512", wide
    assert wide[load].strip() == "40.0", wide
    ratio = next(row for row in rows if "h2gate / best peer" in row).split("|")
    assert ratio[at_once].strip() == "" and ratio[load].strip() == "", ratio


@pytest.mark.parametrize("ns,threads,want", [
    # 4 ticks of 10 ms over 2,000 requests is 20 µs a request; schedstat's 43.7 ms is within a
    # tick per thread (3 threads) and one more: the exact figure, 21.9 µs
    (43_700_000, 3, "21.9 µs CPU/req"),
    # 95 ms is off the ticks by more than 4 ticks (a reading gone wrong): the ticks count
    (95_000_000, 3, "20.0 µs CPU/req"),
])
def test_cpu_is_schedstat_nanoseconds_when_they_agree_with_the_ticks(tmp_path, ns, threads,
                                                                     want):
    """The proxy's CPU per request is read in nanoseconds (schedstat) where the clock ticks
    (10 ms steps: a page run of 40 loads is 25 of them) would round it, unless the two disagree
    by more than the ticks' own error."""
    rd = write_load_run(tmp_path, "h2gate", 4, 3, 0.05, 64)
    with open(rd / "meta", "a") as f:
        f.write(f"cpu_ns_before=1000000\ncpu_ns_after={1_000_000 + ns}\nthreads={threads}\n")
    line = summarize(rd)
    assert want in line, line


def test_page_faults_per_page_and_per_handshake(tmp_path):
    """The proxy's page faults over a run (scripts/bench's faults(): minflt + majflt of its
    process and children) per page and per handshake: memory given back to the kernel after a
    burst and touched again costs a zeroed page each, which the CPU figure hides among the
    rest (a heap trimmed after every page load was 300 faults a page)."""
    rd = write_run(tmp_path, "page", "h2gate", 12, asked=None, warm=None, requests=1200,
                   accepts=60, more=("pages=20", "faults_before=1000", "faults_after=7000"),
                   client=("page.out", "pages=20 ok=20 failed=0 resources=60 bytes=1966080 "
                           "urgent_p50_ms=68.0 urgent_p90_ms=70.0 page_p50_ms=160.0 "
                           "page_p90_ms=161.0\n"),
                   origin=[f"{i} 200 1024" for i in range(1200)])
    line = summarize(rd)
    assert "300 page faults/page" in line, line
    hs = write_run(tmp_path, "resume", "h2gate", 50, asked=None, warm=None, requests=1000,
                   more=("clients=16", "faults_before=500", "faults_after=750"),
                   client=("hsload.out", "handshakes=1000 ok=1000 failed=0 resumed=984 "
                           "ticketed=1000 rate=2000.0 seconds=0.5 p50_ms=1.10 p99_ms=2.00\n"),
                   origin=[f"{i} 200 1024" for i in range(1000)])
    subprocess.run(["/usr/bin/python3", STATS, "run", str(hs)], check=True, capture_output=True,
                   timeout=60)
    with open(hs / "run.json") as f:
        r = json.load(f)
    assert r["valid"], r
    assert r["faults_per_req"] == 0.25, r
