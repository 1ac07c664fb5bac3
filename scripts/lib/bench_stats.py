#!/usr/bin/python3
"""Parsing and statistics for scripts/bench.

  bench_stats.py run RUN_DIR       summarize one run: reads RUN_DIR/meta (key=value lines written
                                   by scripts/bench, origin_accepts among them: nginx's
                                   stub_status accepts over the run), h2load.out, h2load.log
                                   (per-request log), hsload.out (handshake, resume), page.out
                                   (page), origin.log (nginx access log of the run), and for
                                   the cache scenarios warm_codes and origin_requests_measured
                                   (the origin's requests while h2load ran: 0 when all were
                                   hits) in meta; writes
                                   RUN_DIR/run.json and prints a one-line summary
  bench_stats.py report RUNS_DIR MD PNG
                                   medians over repetitions, ratios h2gate / the best peer; the
                                   markdown table to MD (and stdout) and the ratio chart to PNG

A run is valid only when h2load got a 2xx for every request it was asked to make (no 3xx/4xx/5xx,
no failed, errored or timed-out request); an invalid run's figures never reach the table.
"""
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

# Table order: h2gate at its default configuration (the headline), its opt-in modes, the peers
# a user would pick instead, and nginx serving the files itself (the floor: no proxy hop).
PROXIES = ("h2gate", "h2gate-base", "h2gate-pipeline", "h2gate-wide", "h2gate-alog", "h2gate-cluster", "h2gate-cluster-rate",
           "h2gate-policy", "h2gate-cache", "h2gate-base-cache",
           "nghttpx", "h2o", "haproxy", "haproxy-cache",
           "nginx-proxy", "nginx-cache", "nginx-static", "openssl-s_server",
           "h2gate-gzip", "nginx-gzip", "h2gate-br", "h2gate-zstd")
# The reverse proxies h2gate is compared with: each ratio row divides by the best of them.
PEERS = ("nghttpx", "h2o", "haproxy", "nginx-proxy")
# The compress scenario has its own table: h2gate's gzip against nginx's gzip module.
ZPROXIES = ("h2gate-gzip", "nginx-gzip", "h2gate-br", "h2gate-zstd")
# Ratio rows of the table: (numerator, label); the denominator is, per metric, the best valid
# peer of PEERS in that case. The chart plots the first one.
RATIOS = (("h2gate", "h2gate / best peer"), ("h2gate-pipeline", "h2gate-pipeline / best peer"))
SCENARIO_ORDER = ("small", "large", "manyconns", "upload", "post", "idle", "compress",
                  "handshake", "resume", "page", "latency50", "latency90",
                  "cache-small", "cache-large")
# The cache scenarios have their own table: h2gate with `cache: true` (h2gate-cache) against
# the caching peers, all hits, and the floor nginx-static (the goal: a hit costs no more CPU).
CACHE_SCENARIOS = ("cache-small", "cache-large")
CPEERS = ("haproxy-cache", "nginx-cache")
CRATIOS = (("h2gate-cache", "h2gate-cache / best cache peer"),)
# The floors: a server with no proxy hop (nginx serving the file; OpenSSL's own s_server for
# handshakes). The new scenarios' tables add a row h2gate / floor.
FLOORS = ("nginx-static", "openssl-s_server")
# answered by the server itself, not through the origin
NO_ORIGIN = ("nginx-static", "openssl-s_server")


def read_kv_line(path, first_key):
    """The key=value pairs of the last line of path that starts with first_key=, or {}."""
    found = {}
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith(first_key + "="):
                    found = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return found


def read_meta(run_dir):
    meta = {}
    with open(os.path.join(run_dir, "meta")) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                meta[k] = v
    return meta


def parse_h2load(text):
    """The counters of h2load's summary, or None where a line is missing."""
    out = {}
    m = re.search(r"finished in ([\d.]+)(s|ms|us), ([\d.]+) req/s", text)
    out["rps"] = float(m.group(3)) if m else None
    out["seconds"] = (float(m.group(1)) / {"s": 1, "ms": 1e3, "us": 1e6}[m.group(2)]) if m else None
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        keys = ("total", "started", "done", "succeeded", "failed", "errored", "timeout")
        out.update({k: int(v) for k, v in zip(keys, m.groups())})
    m = re.search(r"traffic: .*?\((\d+)\) total, .*?\((\d+)\) headers.*?, .*?\((\d+)\) data", text)
    if m:
        out["data_bytes"] = int(m.group(3))
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m:
        out.update({k: int(v) for k, v in zip(("s2xx", "s3xx", "s4xx", "s5xx"), m.groups())})
    return out


def percentile(sorted_values, p):
    """Nearest-rank percentile (p in 0..100) of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def latencies_us(path):
    """Per-request durations (µs) of the 2xx responses in an h2load --log-file."""
    values = []
    if not os.path.exists(path):
        return values
    with open(path) as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1].startswith("2"):
                values.append(int(parts[2]))
    values.sort()
    return values


def origin_log(path):
    """(distinct $connection serials, requests, smallest $request_length) of the run's nginx
    access log, whose lines are `$connection $status $request_length`."""
    conns, requests, smallest = set(), 0, None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 3:
                    continue
                conns.add(parts[0])
                requests += 1
                length = int(parts[2])
                smallest = length if smallest is None else min(smallest, length)
    return len(conns), requests, smallest


def cpu_seconds(meta, clk):
    """The proxy's CPU over a run: schedstat's nanoseconds where the bench read them and they
    agree with the clock ticks (utime+stime, in steps of 1/clk s) within a tick per thread and
    one for the reading; the ticks otherwise (a thread that ended during the run took its
    nanoseconds with it, and the ticks of an older bench are all there is)."""
    ticks_s = (int(meta["cpu_after"]) - int(meta["cpu_before"])) / clk
    try:
        ns_s = (int(meta["cpu_ns_after"]) - int(meta["cpu_ns_before"])) / 1e9
        threads = int(meta.get("threads") or 1)
    except (KeyError, ValueError):
        return ticks_s
    if ns_s > 0 and abs(ns_s - ticks_s) <= (threads + 1) / clk:
        return ns_s
    return ticks_s


def faults(meta):
    """The proxy's page faults over the run (minor and major, scripts/bench's faults())."""
    return max(0, int(meta["faults_after"]) - int(meta["faults_before"]))


def summarize_run(run_dir):
    meta = read_meta(run_dir)
    r = {k: meta[k] for k in ("scenario", "transport", "proxy", "rep")}
    r["rep"] = int(r["rep"])
    if meta.get("start_failed") == "1":
        r.update(valid=False, problems=["the proxy did not start"], hwm_kib=0, origin_conns=0,
                 cpu_s=0.0)
        with open(os.path.join(run_dir, "run.json"), "w") as f:
            json.dump(r, f, indent=1)
        return r
    clk = int(meta["clk_tck"])
    cpu_s = cpu_seconds(meta, clk)
    r["cpu_s"] = cpu_s
    r["hwm_kib"] = int(meta.get("hwm_kib") or 0)
    used, r["origin_requests"], smallest = origin_log(os.path.join(run_dir, "origin.log"))
    # Opened: what nginx accepted from the proxy's start to its stop (stub_status); used: the
    # distinct connections that carried a request (nginx's $connection serials), a lower bound
    # kept for runs measured without the status counter.
    r["origin_conns_used"] = used
    r["origin_conns"] = int(meta["origin_accepts"]) if "origin_accepts" in meta else used
    if "pool" in meta:
        r["pool"] = int(meta["pool"])
    if meta.get("origin_conns_peak", "").isdigit():
        r["origin_conns_peak"] = int(meta["origin_conns_peak"])
    problems = []
    if meta.get("proxy_died") == "1":
        problems.append("proxy exited during the run")
    if "sys_after" in meta and cpu_s > 0:
        r["sys_pct"] = 100.0 * (int(meta["sys_after"]) - int(meta["sys_before"])) / clk / cpu_s
    if r["scenario"] in ("handshake", "resume"):
        want, clients = int(meta["requests"]), int(meta["clients"])
        h = read_kv_line(os.path.join(run_dir, "hsload.out"), "handshakes")
        if not h:
            problems.append("no hsload summary")
        else:
            ok, failed, resumed = int(h["ok"]), int(h["failed"]), int(h["resumed"])
            if ok != want:
                problems.append(f"{ok}/{want} connections answered 200")
            if failed:
                problems.append(f"{failed} failed")
            # every client's first connection has no ticket yet; each later one offers one
            if r["scenario"] == "resume" and resumed < want - clients:
                # tickets are used once (as browsers do): a server that sends no new ticket on
                # a resumed connection makes every other connection a full handshake
                ticketed = int(h.get("ticketed", 0))
                problems.append(f"{resumed}/{want - clients} resumed, {ticketed}/{want} "
                                "connections got a new ticket")
            if r["scenario"] == "handshake" and resumed:
                problems.append(f"{resumed} resumed in a full-handshake run")
            if r["origin_requests"] < want and meta.get("proxy") not in NO_ORIGIN:
                problems.append(f"{r['origin_requests']}/{want} requests reached the origin")
            r["rps"] = float(h["rate"])
            r["resumed_pct"] = 100.0 * resumed / want
            r["p50_ms"] = float(h["p50_ms"])
            r["p99_ms"] = float(h["p99_ms"])
            if ok and cpu_s > 0:
                r["cpu_us_per_req"] = cpu_s * 1e6 / ok
                r["hs_per_core"] = ok / cpu_s   # handshakes per second of one core
            if ok and "faults_after" in meta:
                r["faults_per_req"] = faults(meta) / ok
            if float(h["seconds"]) > 0:
                r["cpu_pct"] = 100.0 * cpu_s / float(h["seconds"])
    elif r["scenario"] == "page":
        pages, want = int(meta["pages"]), int(meta["requests"])
        h = read_kv_line(os.path.join(run_dir, "page.out"), "pages")
        if not h:
            problems.append("no bench_page.py summary")
        else:
            ok = int(h["ok"])
            if ok != pages:
                problems.append(f"{ok}/{pages} page loads complete")
            if r["origin_requests"] < want and meta.get("proxy") not in NO_ORIGIN:
                problems.append(f"{r['origin_requests']}/{want} requests reached the origin")
            for k in ("urgent_p50_ms", "urgent_p90_ms", "page_p50_ms", "page_p90_ms"):
                r[k] = float(h[k])
            if ok:
                r["cpu_us_per_page"] = cpu_s * 1e6 / ok
                r["cpu_us_per_req"] = cpu_s * 1e6 / (ok * int(h["resources"]))  # for BENCH_BASE
                if "faults_after" in meta:
                    r["faults_per_page"] = faults(meta) / ok
    elif r["scenario"] == "idle":
        want = int(meta["idle_want"])
        got = int(meta.get("idle_open") or 0)
        r["idle_conns"] = got
        r["rss_before_kib"] = int(meta.get("rss_before_kib") or 0)
        r["rss_after_kib"] = int(meta.get("rss_after_kib") or 0)
        if got != want:
            problems.append(f"{got}/{want} connections opened")
        if got > 0:
            r["kib_per_conn"] = (r["rss_after_kib"] - r["rss_before_kib"]) / got
            r["cpu_us_per_conn"] = cpu_s * 1e6 / got
    else:
        want = int(meta["requests"])
        with open(os.path.join(run_dir, "h2load.out"), errors="replace") as f:
            h = parse_h2load(f.read())
        if "succeeded" not in h or "s2xx" not in h:
            problems.append("no h2load summary")
        else:
            for key, label in (("s3xx", "3xx"), ("s4xx", "4xx"), ("s5xx", "5xx")):
                if h[key]:
                    problems.append(f"{h[key]} {label}")
            for key in ("failed", "errored", "timeout"):
                if h[key]:
                    problems.append(f"{h[key]} {key}")
            if h["s2xx"] != want:
                problems.append(f"{h['s2xx']}/{want} 2xx")
            if r["scenario"] in CACHE_SCENARIOS:
                # the opposite: a cache is measured on hits, warmed before (the warm-up's
                # misses are in origin.log), and no request may reach the origin while measured
                warm = meta.get("warm_codes", "")
                if any(code != "200" for code in warm.split(",")):
                    problems.append(f"warm-up GETs answered {warm or 'nothing'}")
                asked = meta.get("origin_requests_measured")
                if asked is None:
                    problems.append("the origin's requests were not counted")
                else:
                    r["origin_requests_measured"] = int(asked)
                    if int(asked):
                        problems.append(f"{asked} requests reached the origin while measured: "
                                        "not all hits")
            # every answer must come from the origin (coalescing is off), and an upload must
            # reach it whole: a proxy that answers by itself is not being measured (but for
            # nginx-static, which serves the files itself: the floor)
            elif r["origin_requests"] < want and meta.get("proxy") != "nginx-static":
                problems.append(f"{r['origin_requests']}/{want} requests reached the origin")
            body = int(meta.get("body_bytes") or 0)
            if body and smallest is not None and smallest < body:
                problems.append(f"an upload reached the origin with {smallest} < {body} bytes")
            r["h2load"] = h
            r["rps"] = h["rps"]
            done = h["done"] or 1
            r["cpu_us_per_req"] = cpu_s * 1e6 / done
            if "faults_after" in meta:
                r["faults_per_req"] = faults(meta) / done
            if h.get("data_bytes") is not None:
                r["body_bytes"] = h["data_bytes"] / done  # per response, as sent (compressed)
            if h["seconds"]:
                # how busy the proxy's CPU was: near 100 % means the proxy is the bottleneck
                r["cpu_pct"] = 100.0 * cpu_s / h["seconds"]
            # the load side (origin nginx and h2load share one CPU): its CPU per request, and
            # how busy that CPU was; near 100 % there and not at the proxy means the origin
            # and the client set req/s at saturation
            if "origin_cpu_after" in meta and meta["origin_cpu_before"]:
                org_s = (int(meta["origin_cpu_after"]) - int(meta["origin_cpu_before"])) / clk
                r["origin_cpu_us_per_req"] = org_s * 1e6 / done
                if "client_cpu_s" in meta:
                    load_s = org_s + float(meta["client_cpu_s"])
                    r["load_cpu_us_per_req"] = load_s * 1e6 / done
                    if h["seconds"]:
                        r["load_cpu_pct"] = 100.0 * load_s / h["seconds"]
        lat = latencies_us(os.path.join(run_dir, "h2load.log"))
        if not lat and not problems:
            problems.append("no latencies in h2load's per-request log")
        if lat:
            r["mean_ms"] = sum(lat) / len(lat) / 1000.0
            r["p50_ms"] = percentile(lat, 50) / 1000.0
            r["p99_ms"] = percentile(lat, 99) / 1000.0
            r["p999_ms"] = percentile(lat, 99.9) / 1000.0
        if "target_rps" in meta:
            r["target_rps"] = int(meta["target_rps"])
            r["capacity_rps"] = int(meta["capacity_rps"])
    r["valid"] = not problems
    r["problems"] = problems
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(r, f, indent=1)
    return r


def one_line(r):
    if r["scenario"] in ("handshake", "resume"):
        fig = (f"{fmt(r.get('rps'), 0)} handshakes/s, {fmt(r.get('hs_per_core'), 0)} per proxy core, "
               f"{fmt(r.get('cpu_us_per_req'), 1)} µs CPU/handshake "
               f"({fmt(r.get('cpu_pct'), 0)} % busy), resumed {fmt(r.get('resumed_pct'), 0)} %, "
               f"peak RSS {r['hwm_kib'] // 1024} MiB")
    elif r["scenario"] == "page":
        fig = (f"urgent p50 {fmt(r.get('urgent_p50_ms'), 1)} ms, page p50 "
               f"{fmt(r.get('page_p50_ms'), 1)} ms (p90 {fmt(r.get('page_p90_ms'), 1)}), "
               f"{fmt(r.get('cpu_us_per_page'), 0)} µs CPU/page, "
               f"{fmt(r.get('faults_per_page'), 0)} page faults/page, "
               f"{r['origin_conns']} origin conns opened, peak RSS {r['hwm_kib'] // 1024} MiB")
    elif r["scenario"].startswith("latency"):
        fig = (f"target {r.get('target_rps', 0):,} req/s, got {fmt(r.get('rps'), 0)}, p50 "
               f"{fmt(r.get('p50_ms'), 2)} ms, p99 {fmt(r.get('p99_ms'), 2)} ms, p999 "
               f"{fmt(r.get('p999_ms'), 2)} ms, {fmt(r.get('cpu_us_per_req'), 1)} µs CPU/req "
               f"({fmt(r.get('cpu_pct'), 0)} % busy), peak RSS {r['hwm_kib'] // 1024} MiB")
    elif r["scenario"] == "idle":
        fig = (f"{r.get('idle_conns', 0)} conns, "
               f"{fmt(r.get('kib_per_conn'), 1)} KiB/conn, "
               f"{fmt(r.get('cpu_us_per_conn'), 0)} µs CPU/conn, peak RSS {r['hwm_kib'] // 1024} MiB")
    elif r["scenario"] in CACHE_SCENARIOS:
        fig = (f"{fmt(r.get('rps'), 0)} req/s, mean {fmt(r.get('mean_ms'), 2)} ms, "
               f"p99 {fmt(r.get('p99_ms'), 2)} ms, {fmt(r.get('cpu_us_per_req'), 1)} µs CPU/req "
               f"({fmt(r.get('cpu_pct'), 0)} % busy), "
               f"{r.get('origin_requests_measured', '?')} origin requests while measured, "
               f"peak RSS {r['hwm_kib'] // 1024} MiB")
    else:
        fig = (f"{fmt(r.get('rps'), 0)} req/s, mean {fmt(r.get('mean_ms'), 2)} ms, "
               f"p99 {fmt(r.get('p99_ms'), 2)} ms, {fmt(r.get('cpu_us_per_req'), 1)} µs CPU/req "
               f"({fmt(r.get('cpu_pct'), 0)} % busy), "
               f"{r['origin_conns']} origin conns opened ({r.get('origin_conns_used', 0)} used, "
               f"{r.get('origin_conns_peak', '?')} at once), origin+client "
               f"{fmt(r.get('load_cpu_us_per_req'), 1)} µs CPU/req "
               f"({fmt(r.get('load_cpu_pct'), 0)} % busy), "
               f"peak RSS {r['hwm_kib'] // 1024} MiB")
    status = "valid" if r["valid"] else "INVALID (" + ", ".join(r["problems"]) + ")"
    return f"{fig}: {status}"


def fmt(v, digits):
    if v is None:
        return "—"
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return f"{v:,.{digits}f}"


# (key, column title, digits, lower is better)
LOAD_METRICS = (
    ("rps", "req/s", 0, False),
    ("mean_ms", "mean ms", 2, True),
    ("p99_ms", "p99 ms", 2, True),
    ("cpu_us_per_req", "CPU µs/req", 1, True),
    ("sys_pct", "of which kernel %", 0, True),
    ("cpu_pct", "proxy CPU %", 0, True),
    ("origin_conns", "origin conns opened", 0, True),
    ("origin_conns_peak", "origin conns open at once", 0, True),
    ("origin_cpu_us_per_req", "origin CPU µs/req", 1, True),
    ("load_cpu_us_per_req", "origin+client CPU µs/req", 1, True),
    ("load_cpu_pct", "origin+client CPU %", 0, True),
    ("faults_per_req", "page faults/req", 2, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
CACHE_METRICS = (
    ("rps", "req/s", 0, False),
    ("mean_ms", "mean ms", 2, True),
    ("p99_ms", "p99 ms", 2, True),
    ("cpu_us_per_req", "CPU µs/req", 1, True),
    ("sys_pct", "of which kernel %", 0, True),
    ("cpu_pct", "proxy CPU %", 0, True),
    ("origin_requests_measured", "origin requests while measured", 0, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
# informational: how busy the proxy was says where the bottleneck is, not which proxy is better
# (and a valid cache run asked the origin nothing: 0 over 0 is no ratio)
NO_RATIO = {"cpu_pct", "sys_pct", "resumed_pct", "target_rps", "origin_requests_measured",
            "origin_conns_peak", "origin_cpu_us_per_req", "load_cpu_us_per_req",
            "load_cpu_pct", "faults_per_req", "faults_per_page"}
HS_METRICS = (
    ("rps", "handshakes/s", 0, False),
    ("hs_per_core", "handshakes/s per proxy core", 0, False),
    ("cpu_us_per_req", "CPU µs/handshake", 1, True),
    ("sys_pct", "of which kernel %", 0, True),
    ("cpu_pct", "proxy CPU %", 0, True),
    ("resumed_pct", "resumed %", 0, False),
    ("p50_ms", "p50 ms connect to last byte", 2, True),
    ("faults_per_req", "page faults/handshake", 2, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
PAGE_METRICS = (
    ("urgent_p50_ms", "urgent done ms p50", 1, True),
    ("urgent_p90_ms", "urgent done ms p90", 1, True),
    ("page_p50_ms", "page done ms p50", 1, True),
    ("page_p90_ms", "page done ms p90", 1, True),
    ("cpu_us_per_page", "CPU µs/page", 0, True),
    ("sys_pct", "of which kernel %", 0, True),
    ("origin_conns", "origin conns opened", 0, True),
    ("faults_per_page", "page faults/page", 0, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
LAT_METRICS = (
    ("target_rps", "target req/s", 0, False),
    ("rps", "req/s", 0, False),
    ("p50_ms", "p50 ms", 2, True),
    ("p99_ms", "p99 ms", 2, True),
    ("p999_ms", "p999 ms", 2, True),
    ("cpu_us_per_req", "CPU µs/req", 1, True),
    ("cpu_pct", "proxy CPU %", 0, True),
    ("origin_conns", "origin conns opened", 0, True),
    ("origin_conns_peak", "origin conns open at once", 0, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
ZMETRICS = (
    ("rps", "req/s", 0, False),
    ("p99_ms", "p99 ms", 2, True),
    ("cpu_us_per_req", "CPU µs/req", 1, True),
    ("body_bytes", "bytes/response", 0, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)
IDLE_METRICS = (
    ("idle_conns", "connections", 0, True),
    ("rss_before_mib", "RSS before MiB", 1, True),
    ("rss_after_mib", "RSS after MiB", 1, True),
    ("kib_per_conn", "RSS growth KiB/conn", 1, True),
    ("cpu_us_per_conn", "CPU µs/conn (handshake)", 0, True),
    ("hwm_mib", "peak RSS MiB", 1, True),
)


def case_key(r):
    return f"{r['scenario']} ({r.get('transport') or 'tls'})"


def case_order(name):
    scen = name.split(" ")[0]
    idx = SCENARIO_ORDER.index(scen) if scen in SCENARIO_ORDER else 99
    return (idx, "(h2c)" in name, name)  # TLS before h2c


def aggregate(runs):
    """{case: {proxy: {"n":.., "valid":.., "problems":[..], metric: median}}}"""
    cases = {}
    for r in runs:
        r = dict(r)
        r["hwm_mib"] = r["hwm_kib"] / 1024.0
        if "rss_before_kib" in r:
            r["rss_before_mib"] = r["rss_before_kib"] / 1024.0
            r["rss_after_mib"] = r["rss_after_kib"] / 1024.0
        cases.setdefault(case_key(r), {}).setdefault(r["proxy"], []).append(r)
    agg = {}
    for case, by_proxy in cases.items():
        agg[case] = {}
        for proxy, rs in by_proxy.items():
            a = {"n": len(rs), "valid": sum(1 for r in rs if r["valid"]), "problems": []}
            for r in rs:
                if not r["valid"]:
                    a["problems"].append(f"rep {r['rep']}: " + ", ".join(r["problems"]))
            idle = case.startswith("idle")
            metrics = (IDLE_METRICS if idle else
                       LOAD_METRICS + ZMETRICS + HS_METRICS + PAGE_METRICS + LAT_METRICS +
                       CACHE_METRICS)
            for key, _, _, _ in metrics:
                vals = [r[key] for r in rs if r.get(key) is not None]
                a[key] = statistics.median(vals) if vals else None
            # spread of the headline figure over the repetitions: half the range over the median
            key = "kib_per_conn" if idle else "page_p50_ms" if case.startswith("page") else "rps"
            vals = [r[key] for r in rs if r.get(key) is not None]
            a["spread"] = ((max(vals) - min(vals)) / 2 / statistics.median(vals) * 100
                           if len(vals) > 1 and statistics.median(vals) else None)
            a["spread_of"] = ("KiB/conn" if idle else "page ms" if case.startswith("page") else
                              "handshakes/s" if case.startswith(("handshake", "resume")) else
                              "req/s")
            agg[case][proxy] = a
    return agg


def table(agg, cases, metrics, floors=False, peers=PEERS, ratio_rows=RATIOS, lead="h2gate"):
    """The markdown rows of cases; ratio rows: each of ratio_rows over the best valid of peers;
    with floors, lead over each floor of FLOORS that ran. Returns (lines, {case: {metric:
    ratio of ratio_rows' first row}})."""
    head = ["scenario", "proxy", "runs"] + [m[1] for m in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios = {}
    for case in cases:
        row_by_proxy = agg[case]
        for proxy in PROXIES:
            a = row_by_proxy.get(proxy)
            if a is None:
                continue
            ok = a["valid"] == a["n"]
            runs = f"{a['valid']}/{a['n']} valid"
            if a["spread"] is not None:
                runs += f", {a['spread_of']} ±{a['spread']:.0f} %"
            if ok:
                cells = [fmt(a[k], d) for k, _, d, _ in metrics]
            else:
                runs = f"**INVALID** ({a['n'] - a['valid']}/{a['n']} runs)"
                cells = ["—"] * len(metrics)
            lines.append(f"| {case} | {proxy} | {runs} | " + " | ".join(cells) + " |")
        ratios[case] = {}
        valid_peers = {p: row_by_proxy[p] for p in peers
                       if p in row_by_proxy and row_by_proxy[p]["valid"] == row_by_proxy[p]["n"]}
        for num, label in ratio_rows:
            g = row_by_proxy.get(num)
            if g is None:
                continue
            cells = []
            for k, _, _, lower in metrics:
                vals = {p: a[k] for p, a in valid_peers.items() if a.get(k)}
                if k in NO_RATIO:
                    cells.append("")
                    continue
                if g["valid"] == g["n"] and g[k] is not None and vals:
                    best = (min if lower else max)(vals, key=vals.get)
                    ratio = g[k] / vals[best]
                    if num == ratio_rows[0][0]:
                        ratios[case][k] = ratio
                    cells.append(f"{ratio:.2f} ({best})")
                else:
                    cells.append("—")
            lines.append(f"| {case} | **{label}** | | " + " | ".join(cells) + " |")
        g = row_by_proxy.get(lead)
        for floor in FLOORS if floors else ():
            f = row_by_proxy.get(floor)
            if not (g and f and g["valid"] == g["n"] and f["valid"] == f["n"]):
                continue
            cells = ["" if k in NO_RATIO else
                     f"{g[k] / f[k]:.2f}" if g.get(k) is not None and f.get(k) else "—"
                     for k, _, _, _ in metrics]
            lines.append(f"| {case} | **{lead} / {floor} (floor)** | | " + " | ".join(cells) + " |")
    return lines, ratios


def ztable(agg, cases):
    head = ["scenario", "proxy", "runs"] + [m[1] for m in ZMETRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        row = agg[case]
        for proxy in ZPROXIES:
            a = row.get(proxy)
            if a is None:
                continue
            if a["valid"] == a["n"]:
                runs = f"{a['valid']}/{a['n']} valid"
                cells = [fmt(a[k], d) for k, _, d, _ in ZMETRICS]
            else:
                runs = f"**INVALID** ({a['n'] - a['valid']}/{a['n']} runs)"
                cells = ["—"] * len(ZMETRICS)
            lines.append(f"| {case} | {proxy} | {runs} | " + " | ".join(cells) + " |")
        g, n = row.get("h2gate-gzip"), row.get("nginx-gzip")
        if g and n and g["valid"] == g["n"] and n["valid"] == n["n"]:
            cells = [f"{g[k] / n[k]:.2f}" if g[k] is not None and n[k] else "—"
                     for k, _, _, _ in ZMETRICS]
            lines.append(f"| {case} | **h2gate-gzip/nginx-gzip** | | " + " | ".join(cells) + " |")
    return lines


def chart(ratios, png, title):
    """Grouped bars of the ratios, log scale, one group per scenario."""
    series = [("cpu_us_per_req", "CPU/req"), ("rps", "req/s"), ("mean_ms", "mean lat"),
              ("p99_ms", "p99 lat"), ("origin_conns", "origin conns opened"), ("hwm_mib", "peak RSS"),
              ("kib_per_conn", "idle KiB/conn"), ("cpu_us_per_conn", "idle CPU/conn")]
    cases = sorted(ratios, key=case_order)
    # only the metrics with at least one ratio: gnuplot warns about an all-missing column
    series = [(k, label) for k, label in series
              if any(ratios[c].get(k) is not None for c in cases)]
    data = png + ".dat"
    any_value = False
    with open(data, "w") as f:
        f.write("case " + " ".join(f'"{label}"' for _, label in series) + "\n")
        for case in cases:
            vals = []
            for key, _ in series:
                v = ratios[case].get(key)
                if v is not None and v > 0:
                    any_value = True
                    vals.append(f"{v:.4f}")
                else:
                    vals.append("NaN")
            f.write(f'"{case}" ' + " ".join(vals) + "\n")
    gp = [
        "set terminal pngcairo size 1200,600 font ',10'",
        f"set output '{png}'",
        f"set title \"{title}\"",
        "set datafile missing 'NaN'",
        "set ylabel 'h2gate / best peer (log scale; 1 = equal)'",
        "set grid ytics",
        "set key outside right top",
    ]
    if any_value:
        for i, case in enumerate(cases):
            if not ratios[case]:
                gp.append(f"set label 'invalid runs' at {i}, 1 center rotate by 90 front")
        gp += [
            "set style data histograms",
            "set style histogram clustered gap 1",
            "set style fill solid 0.8 border -1",
            "set logscale y",
            "set yrange [0.05:20]",
            "set xtics rotate by -20",
            "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 front",
            f"plot for [i=2:{len(series) + 1}] '{data}' using i:xtic(1) title columnheader(i)",
        ]
    else:
        gp += [
            "unset key",
            "set label 1 'no valid ratio: a proxy had invalid runs (non-2xx or errors) in every "
            "scenario; see the table' at graph 0.5, graph 0.5 center",
            "plot [0:1][0:1] NaN notitle",
        ]
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True, check=True)
    os.unlink(data)


CPU_LINE = (("cpu_us_per_req", "µs CPU per request"),)


def before_after(agg, cases, before, after, keys, digits):
    """Lines `- case: B → A unit (+x %)` for each (key, unit) of keys where both proxies' runs
    of the case were all valid and have the figure; digits: decimals of the percentage."""
    lines = []
    for case in cases:
        a, b = agg[case].get(after), agg[case].get(before)
        for key, unit in keys:
            if a and b and a["valid"] == a["n"] and b["valid"] == b["n"] and a.get(key) and b.get(key):
                lines.append(f"- {case}: {b[key]:.1f} → {a[key]:.1f} {unit} "
                             f"({(a[key] / b[key] - 1) * 100:+.{digits}f} %)")
    return lines


def report(runs_dir, md_path, png_path):
    runs = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "*", "run.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    agg = aggregate(runs)
    header_path = os.path.join(runs_dir, "header.md")
    out = []
    if os.path.exists(header_path):
        with open(header_path) as f:
            out.append(f.read().rstrip("\n"))
        out.append("")
    new = ("handshake", "resume", "page", "latency50", "latency90")
    load_cases = sorted((c for c in agg
                         if not c.startswith(("idle", "compress") + new + CACHE_SCENARIOS)),
                        key=case_order)
    cache_cases = sorted((c for c in agg if c.startswith(CACHE_SCENARIOS)), key=case_order)
    hs_cases = sorted((c for c in agg if c.startswith(("handshake", "resume"))), key=case_order)
    page_cases = sorted((c for c in agg if c.startswith("page")), key=case_order)
    lat_cases = sorted((c for c in agg if c.startswith("latency")), key=case_order)
    zcases = sorted((c for c in agg if c.startswith("compress")), key=case_order)
    idle_cases = sorted((c for c in agg if c.startswith("idle")), key=case_order)
    all_ratios = {}
    if load_cases:
        lines, ratios = table(agg, load_cases, LOAD_METRICS)
        all_ratios.update(ratios)
        out += ["Medians over the repetitions (± is half the range of req/s over them). h2gate "
                "is at its default configuration; h2gate-pipeline adds `pipeline: 8` to the "
                "origin (opt-in); nginx-static serves the files itself (the floor, no proxy "
                "hop). Ratios: h2gate over the best peer (" + ", ".join(PEERS) + ") for each "
                "figure, that peer named: below 1 is better for h2gate except req/s (above 1 is "
                "better).", ""] + lines + [""]
    if hs_cases:
        lines, ratios = table(agg, hs_cases, HS_METRICS, floors=True)
        all_ratios.update(ratios)
        out += ["TLS handshakes (a new TLS 1.3 connection per request, ECDSA P-256 certificate, "
                "one h2 GET of 1 KiB each; resume: the previous connection's ticket offered, "
                "resumed % as the client saw it). handshakes/s per proxy core = handshakes over "
                "the proxy's CPU seconds; proxy CPU % below 100 means the client side (CPU 1) "
                "set the pace. openssl-s_server answers over HTTP/1.1:", ""] + lines + [""]
    if page_cases:
        lines, ratios = table(agg, page_cases, PAGE_METRICS, floors=True)
        all_ratios.update(ratios)
        out += ["Page loads (one h2 connection per load, the document then 59 resources at "
                "once with RFC 9218 priorities; times from the connection's start to the last "
                "byte of the urgent resources, u <= 2, and of the page):", ""] + lines + [""]
    if lat_cases:
        lines, ratios = table(agg, lat_cases, LAT_METRICS, floors=True)
        all_ratios.update(ratios)
        cap = os.path.join(runs_dir, "capacity.md")
        capacity = open(cap).read().rstrip("\n").split("\n") if os.path.exists(cap) else []
        out += ["Latency at a fixed rate (h2load --rps, -c 32 -m 16, the clients started 1 ms "
                "apart so that their requests do not leave in bursts; latency50 and latency90: "
                "50 % and 90 % of the best peer's capacity; percentiles nearest rank of "
                "h2load's per-request log, from each request's send, so a proxy that falls "
                "behind shows in req/s below the target). Capacity, h2load -c 32 -m 16 at "
                "saturation:", ""] + capacity + [""] + lines + [""]
        behind = [f"- {case_key(r)}, {r['proxy']}, rep {r['rep']}: {r['rps']:,.0f} of "
                  f"{r['target_rps']:,} req/s ({100 * r['rps'] / r['target_rps']:.0f} %)"
                  for r in sorted(runs, key=lambda r: (case_order(case_key(r)), r["proxy"], r["rep"]))
                  if r.get("target_rps") and r.get("rps") and r["rps"] < 0.95 * r["target_rps"]]
        if behind:
            out += ["Runs that fell behind their rate (below 95 % of the target: h2load times "
                    "each request from its send, so a backlog that delayed the sends is not in "
                    "the percentiles):", ""] + behind + [""]
    if idle_cases:
        lines, ratios = table(agg, idle_cases, IDLE_METRICS)
        all_ratios.update(ratios)
        out += ["Idle h2 connections (TLS: handshake done; h2c: preface and SETTINGS exchanged; "
                "no request), proxy RSS from /proc/PID/status before and after:", ""] + lines + [""]
    if cache_cases:
        lines, ratios = table(agg, cache_cases, CACHE_METRICS, floors=True, peers=CPEERS,
                              ratio_rows=CRATIOS, lead="h2gate-cache")
        all_ratios.update(ratios)
        out += ["Shared cache, all hits (cache-small: GET 1 KiB, -c 32 -m 16; cache-large: GET "
                "256 KiB, -c 8 -m 4; the origin marks the objects fresh for a day). "
                "h2gate-cache is h2gate's configuration with `cache: true` on its route; "
                "nginx-cache is nginx `proxy_cache` on a tmpfs, haproxy-cache HAProxy's memory "
                "`cache`; each warmed before it is measured, and valid only when the origin got "
                "no request while it was. nginx-static serves the same files from its disk (the "
                "floor). Ratios: h2gate-cache over the best of " + ", ".join(CPEERS) +
                " and over nginx-static:", ""] + lines + [""]
        goal = []
        for case in cache_cases:
            g, f = agg[case].get("h2gate-cache"), agg[case].get("nginx-static")
            if (g and f and g["valid"] == g["n"] and f["valid"] == f["n"]
                    and g.get("cpu_us_per_req") and f.get("cpu_us_per_req")):
                ratio = g["cpu_us_per_req"] / f["cpu_us_per_req"]
                goal.append(f"- {case}: {g['cpu_us_per_req']:.1f} µs CPU per hit, nginx-static "
                            f"{f['cpu_us_per_req']:.1f} µs per file ({ratio:.2f}): "
                            + ("met" if ratio <= 1.0 else "not met"))
        if goal:
            out += ["Goal of issue 41, a hit costs no more CPU than nginx serving the file from "
                    "its disk (medians):", ""] + goal + [""]
    if zcases:
        out += ["Compression (a 64 KiB HTML page, gzip level 5; h2gate with `compress: true`, "
                "otherwise its defaults; nginx-gzip: nginx's gzip module at the same level as "
                "the reverse proxy of the same origin; br and zstd at h2gate's default levels "
                "4 and 3). Ratio h2gate-gzip/nginx-gzip:", ""] + ztable(agg, zcases) + [""]
    # the cost of opt-in modes against h2gate (the default): the access log, the cluster
    for mode, title in (("h2gate-alog", "Access log cost (h2gate-alog: the default configuration, "
                                        "h2gate, with `access_log: {format: combined}` to a file):"),
                        ("h2gate-cluster", "Cluster cost (h2gate-cluster: `cluster.redis` set, no "
                                           "limit configured):"),
                        ("h2gate-cluster-rate", "Shared request rate cost (h2gate-cluster-rate: "
                                                "a request rate that Redis decides for every "
                                                "request and never refuses):"),
                        ("h2gate-policy", "Edge policy cost (h2gate-policy: request and response "
                                          "header rules, an access list of 10,000 CIDRs and basic "
                                          "auth with a bcrypt users file, verified once then "
                                          "cached):")):
        cost = before_after(agg, load_cases, "h2gate", mode, CPU_LINE, 0)
        if cost:
            out += [title, ""] + cost + [""]
    # before and after a change: h2gate-base is another build (BENCH_BASE) at the same config
    change = before_after(agg, load_cases + hs_cases + page_cases + lat_cases + idle_cases,
                          "h2gate-base", "h2gate",
                          CPU_LINE + (("kib_per_conn", "KiB per connection"),), 1)
    change += before_after(agg, cache_cases, "h2gate-base-cache", "h2gate-cache", CPU_LINE, 1)
    if change:
        out += ["Before → after (h2gate-base: the build given as BENCH_BASE, at the same "
                "configuration as h2gate; h2gate-base-cache at h2gate-cache's; medians):",
                ""] + change + [""]
    problems = []
    for case in sorted(agg, key=case_order):
        for proxy in PROXIES:
            a = agg[case].get(proxy)
            if a and a["problems"]:
                problems.append(f"- {case}, {proxy}: " + "; ".join(a["problems"]))
    if problems:
        out += ["Invalid runs (their figures are left out of the table):", ""] + problems + [""]
    # Started cold, h2gate opens at most its pool cap of origin connections when it reuses
    # them; more means connections closed and dialled again during the run.
    churn = [f"- {case_key(r)}, {r['proxy']}, rep {r['rep']}: {r['origin_conns']} opened, "
             f"pool cap {r['pool']}"
             for r in sorted(runs, key=lambda r: (case_order(case_key(r)), r["proxy"], r["rep"]))
             if r.get("valid") and r.get("pool") and r.get("origin_conns", 0) > r["pool"]]
    if churn:
        out += ["Origin connections opened above h2gate's pool cap (closed and dialled again):",
                ""] + churn + [""]
    out.append(f"Chart of the ratios: `{os.path.basename(png_path)}`.")
    text = "\n".join(out) + "\n"
    with open(md_path, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    chart(all_ratios, png_path, "h2gate / the best peer, medians (lower is better except req/s)")


def main(argv):
    if len(argv) >= 2 and argv[1] == "run" and len(argv) == 3:
        print(one_line(summarize_run(argv[2])))
        return 0
    if len(argv) == 5 and argv[1] == "report":
        report(argv[2], argv[3], argv[4])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
