"""Metrics and health: the admin listener's /metrics parsed by Prometheus'
own parser (python3-prometheus-client) and checked by promtool, /healthz and /readyz."""
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import time

import pytest

from procs import free_port, h1_get, recv_all, run, slow
from gwtest import (Client, gw_config, sample, scrape, tls_listener, wait_origin_has,
                    was_reset)

NAMES = [
    ("h2gate_requests", "counter"), ("h2gate_request_duration_seconds", "histogram"),
    ("h2gate_upstream_connect_duration_seconds", "histogram"),
    ("h2gate_upstream_response_header_duration_seconds", "histogram"),
    ("h2gate_upstream_queue_duration_seconds", "histogram"),
    ("h2gate_upstream_connections", "gauge"), ("h2gate_upstream_connections_opened", "counter"),
    ("h2gate_upstream_queue_length", "gauge"), ("h2gate_upstream_retries", "counter"),
    ("h2gate_upstream_server_up", "gauge"), ("h2gate_client_connections", "gauge"),
    ("h2gate_client_streams", "gauge"), ("h2gate_client_bytes", "counter"),
    ("h2gate_origin_bytes", "counter"), ("h2gate_h2_max_requests", "counter"),
    ("h2gate_h2_priority_evictions", "counter"), ("process_cpu_seconds", "counter"),
    ("process_resident_memory_bytes", "gauge"), ("process_virtual_memory_bytes", "gauge"),
    ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
    ("process_start_time_seconds", "gauge"),
    ("h2gate_coalesced", "counter"), ("h2gate_throttled_bytes", "counter"),
    ("h2gate_rate_limited", "counter"), ("h2gate_h2_protocol_errors", "counter"),
    ("h2gate_tls_handshakes", "counter"), ("h2gate_config_reloads", "counter"),
    ("h2gate_config_generation", "gauge"), ("h2gate_build_info", "gauge"),
]


def admin_config(port, origin, admin_port, extra="", workers=2, tls_port=None):
    return gw_config(port, [f"127.0.0.1:{origin.port}"], workers=workers, tls_port=tls_port,
                     route_extra="name: main",
                     extra=f"admin:\n  address: 127.0.0.1:{admin_port}\n{extra}")


def http(port, path, method="GET"):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d


@pytest.mark.serial
def test_every_name_typed_and_requests_counted(gateway, origin):
    """After N requests through a route over HTTP/1.1, h2c and TLS, h2gate_requests_total for
    it sums to N; every metric name is present with its # TYPE; histograms count the same
    requests; gauges and byte counters move."""
    port, tls_port, admin = free_port(), free_port(), free_port()
    gateway(admin_config(port, origin, admin, tls_port=tls_port,
                         extra="timeouts: {graceful_shutdown: 1s}\n"),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    fams, text = scrape(admin)
    for name, kind in NAMES:
        assert name in fams and fams[name].type == kind, (name, kind)
        # the TYPE line names the metric as its samples are named: a counter with its _total
        exposed = name + "_total" if kind == "counter" else name
        assert f"# TYPE {exposed} {kind}\n" in text, (name, kind)
    assert sample(fams, "h2gate_build_info", version="0.1.0") == 1
    assert sample(fams, "h2gate_config_generation") == 1
    n1, n2, n3 = 7, 11, 5
    for i in range(n1):
        assert h1_get(port, f"/bytes/{i + 1}").startswith(b"HTTP/1.1 200")
    r = run(["h2load", "-n", str(n2), "-c", "1", f"http://127.0.0.1:{port}/bytes/10"])
    assert f"{n2} succeeded" in r.stdout, r.stdout
    for _ in range(n3):
        r = run(["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_code}",
                 f"https://127.0.0.1:{tls_port}/status/503"])
        assert r.stdout == "503"
    fams, text = scrape(admin)
    n = n1 + n2 + n3
    assert sample(fams, "h2gate_requests_total", route="main") == n
    assert sample(fams, "h2gate_requests_total", route="main", upstream="app", code="2xx") == n1 + n2
    assert sample(fams, "h2gate_requests_total", route="main", code="5xx") == n3
    assert sample(fams, "h2gate_request_duration_seconds_count", route="main") == n
    assert sample(fams, "h2gate_request_duration_seconds_bucket", route="main", le="+Inf") == n
    assert sample(fams, "h2gate_upstream_response_header_duration_seconds_count",
                  upstream="app") == n
    assert sample(fams, "h2gate_upstream_connections_opened_total", upstream="app") >= 1
    assert sample(fams, "h2gate_upstream_connect_duration_seconds_count", upstream="app") >= 1
    assert sample(fams, "h2gate_upstream_server_up", upstream="app",
                  server=f"127.0.0.1:{origin.port}") == 1
    assert sample(fams, "h2gate_tls_handshakes_total", result="full") >= n3 - 1
    assert sample(fams, "h2gate_origin_bytes_total", direction="in") > sum(range(1, n1 + 1))
    assert sample(fams, "h2gate_client_bytes_total", direction="out") > 0
    # labels only from the configuration: request paths never appear
    assert "/bytes/" not in text and "/status/" not in text
    # a live connection is a gauge of its listener and protocol
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
        deadline = time.monotonic() + slow(5)
        while time.monotonic() < deadline:
            fams, _ = scrape(admin)
            streams = sample(fams, "h2gate_client_streams")
            if streams == 1:
                break
            time.sleep(0.05)
        assert streams == 1
        assert sample(fams, "h2gate_client_connections", listener=f"127.0.0.1:{port}",
                      protocol="http/1.1") == 1
        assert sample(fams, "h2gate_upstream_connections", state="active") == 1


def test_health_and_readiness(gateway, origin):
    port, admin = free_port(), free_port()
    g = gateway(admin_config(port, origin, admin, workers=1,
                             extra="timeouts: {graceful_shutdown: 3s}\n"),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    deadline = time.monotonic() + slow(5)
    while not http(admin, "/readyz").startswith(b"HTTP/1.1 200") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert http(admin, "/readyz").startswith(b"HTTP/1.1 200")
    assert http(admin, "/healthz").startswith(b"HTTP/1.1 200")
    assert http(admin, "/nope").startswith(b"HTTP/1.1 404")
    assert http(admin, "/metrics", method="POST").startswith(b"HTTP/1.1 405")
    # draining (a request in flight keeps the process up): not ready, still healthy
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
    # at the origin: a worker took the connection (one still in the listen queue at the
    # SIGTERM is never served, and the gateway exits at once)
    assert wait_origin_has(origin, "/hang") == 1
    g.signal(signal.SIGTERM)
    deadline = time.monotonic() + slow(5)  # the main thread handles the signal: not ready from then
    while not http(admin, "/readyz").startswith(b"HTTP/1.1 503") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert http(admin, "/readyz").startswith(b"HTTP/1.1 503")
    assert g.proc.poll() is None
    assert http(admin, "/healthz").startswith(b"HTTP/1.1 200")
    assert g.wait(15) == 0  # the drain deadline ends the request in flight
    assert "event=drain_deadline" in g.log()
    s.close()


def test_reload_counters_and_generation(gateway, origin, tmp_path):
    """Reloads are counted by result; the generation follows; the route's counter carries on
    across reloads (same name), so a rate() over it never sees a reset."""
    port, admin = free_port(), free_port()
    text = admin_config(port, origin, admin)
    g = gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    for _ in range(3):
        assert h1_get(port, "/bytes/1").startswith(b"HTTP/1.1 200")
    with open(g.config_path, "w") as f:
        f.write(text + "bogus: 1\n")
    g.signal(signal.SIGHUP)
    g.wait_log("event=reload_failed")
    with open(g.config_path, "w") as f:
        f.write(text)
    g.signal(signal.SIGHUP)
    g.wait_log("event=reloaded")
    deadline = time.monotonic() + slow(5)
    while g.log().count("event=generation ") < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(2):
        assert h1_get(port, "/bytes/1").startswith(b"HTTP/1.1 200")
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_config_reloads_total", result="ok") == 1
    assert sample(fams, "h2gate_config_reloads_total", result="failed") == 1
    assert sample(fams, "h2gate_config_generation") == 2
    assert sample(fams, "h2gate_requests_total", route="main", code="2xx") == 5


def test_h2_abuse_is_counted_by_kind(gateway, origin):
    """An HTTP/2 abuse limit hit shows under its kind once the connection is closed."""
    from gwtest import Client
    port, admin = free_port(), free_port()
    gateway(admin_config(port, origin, admin, workers=1,
                         extra="h2: {max_concurrent_streams: 2}\n"),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    cl = Client(port)
    for _ in range(4):  # beyond max_concurrent_streams: REFUSED_STREAM
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/hang"), (":scheme", "http"),
                                (":authority", "a")], end_stream=True)
    cl.c.max_outbound_frame_size = 16384
    try:
        cl.flush()
    except Exception:
        pass
    # the proof that the worker read the streams and refused some: a RST_STREAM (a 0.5 s sleep
    # here could end before a loaded sanitizer build had read them; the close then came first)
    cl.events(was_reset, timeout=slow(5))
    cl.close()
    deadline = time.monotonic() + slow(5)
    while time.monotonic() < deadline:
        fams, _ = scrape(admin)
        if sample(fams, "h2gate_h2_protocol_errors_total", kind="refused_stream") >= 1:
            break
        time.sleep(0.1)
    assert sample(fams, "h2gate_h2_protocol_errors_total", kind="refused_stream") >= 1


def test_admin_address_in_use_refuses_start(h2gate_bin, tmp_path, origin):
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        admin = busy.getsockname()[1]
        p = tmp_path / "c.yaml"
        p.write_text(admin_config(port, origin, admin))
        r = subprocess.run([h2gate_bin, "-c", str(p)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert f"event=admin_failed address=127.0.0.1:{admin}" in r.stderr


# ---- every configured series from the start; process_*; le; bytes by side ------------------------

# le as the Prometheus client libraries write a float (client_python's floatToGoString, the
# normal form of Prometheus 3): a selector {le="0.5"} must match the series
LE = ["0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
      "1.0", "2.5", "5.0", "10.0", "+Inf"]
PROTOCOLS = ["h2", "http/1.1", "pending", "closing"]
CODES = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"]


def series(fams):
    """Every sample of a scrape: {(name, ((label, value), ...)): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in fams.values() for s in f.samples}


def wide_config(port, tls_port, admin, origin):
    """Two listeners, two upstreams (one of two servers), two routes, both rate tables."""
    lines = ["workers: 2", "listen:", *tls_listener(tls_port), f"  - address: 127.0.0.1:{port}",
             "upstreams:",
             f"  app: {{servers: [127.0.0.1:{origin.port}, localhost:{origin.port}]}}",
             f"  other: {{servers: [127.0.0.1:{origin.port}]}}",
             "routes:",
             "  - {name: side, path: /status/, upstream: other}",
             "  - {name: main, path: /, upstream: app, request_rate: 100000}",
             "throttle: {per_client_rate: 1GB/s}",
             # the /hang request outlives its client (closed): no 30 s drain at teardown
             "timeouts: {graceful_shutdown: 1s}",
             f"admin: {{address: 127.0.0.1:{admin}}}"]
    return "\n".join(lines) + "\n"


@pytest.mark.serial
def test_fresh_gateway_exports_every_configured_series_at_zero(gateway, origin):
    """Before any request, /metrics has a series at 0 for every label value the configuration
    names (each listener and protocol it speaks, route, upstream, server, coding, rate table);
    traffic then moves values but adds no series: a series born only once non-zero breaks
    rate(), increase() and absent() alerts."""
    port, tls_port, admin = free_port(), free_port(), free_port()
    gateway(wide_config(port, tls_port, admin, origin),
            wait=[("127.0.0.1", port), ("127.0.0.1", tls_port), ("127.0.0.1", admin)])
    deadline = time.monotonic() + slow(5)
    while True:  # the readiness probes' connections, closed, may not be reaped yet
        fams, _ = scrape(admin)
        if sample(fams, "h2gate_client_connections") == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    before = series(fams)
    for lst in (f"127.0.0.1:{port}", f"127.0.0.1:{tls_port}"):
        for proto in PROTOCOLS:
            assert sample(fams, "h2gate_client_connections", listener=lst, protocol=proto) == 0
    for route, up in (("main", "app"), ("side", "other")):
        for code in CODES:
            assert sample(fams, "h2gate_requests_total", route=route, upstream=up, code=code) == 0
        assert sample(fams, "h2gate_request_duration_seconds_count", route=route) == 0
        assert sample(fams, "h2gate_rate_limited_total", route=route) == 0
    for up in ("app", "other"):
        assert sample(fams, "h2gate_upstream_connect_duration_seconds_count", upstream=up) == 0
        assert sample(fams, "h2gate_upstream_retries_total", upstream=up) == 0
        assert sample(fams, "h2gate_upstream_queue_length", upstream=up) == 0
    for up, srv in (("app", f"127.0.0.1:{origin.port}"), ("app", f"localhost:{origin.port}"),
                    ("other", f"127.0.0.1:{origin.port}")):
        for state in ("idle", "active"):
            assert sample(fams, "h2gate_upstream_connections", upstream=up, server=srv,
                          state=state) == 0
        assert sample(fams, "h2gate_upstream_connections_opened_total", upstream=up,
                      server=srv) == 0
        assert sample(fams, "h2gate_upstream_server_up", upstream=up, server=srv) == 1
    for table in ("clients", "rates"):
        assert sample(fams, "h2gate_rate_table_refused_total", table=table) == 0
    for coding in ("gzip", "br", "zstd"):
        assert sample(fams, "h2gate_compressed_responses_total", coding=coding) == 0
    for side in ("client", "origin"):
        for d in ("in", "out"):
            assert sample(fams, f"h2gate_{side}_bytes_total", direction=d) == 0
    # every h2gate series is 0 but those that say what runs (the readiness probes' accepts,
    # and their addresses in the per-client table)
    running = {"h2gate_build_info", "h2gate_config_generation", "h2gate_upstream_server_up",
               "h2gate_client_connections_accepted_total", "h2gate_rate_table_entries"}
    nonzero = sorted(k for k, v in before.items()
                     if v and k[0].startswith("h2gate_") and k[0] not in running)
    assert not nonzero
    # traffic over HTTP/1.1, h2c, TLS (h2 and HTTP/1.1), and a request in flight
    assert h1_get(port, "/bytes/10").startswith(b"HTTP/1.1 200")
    r = run(["h2load", "-n", "5", "-c", "1", f"http://127.0.0.1:{port}/bytes/10"])
    assert "5 succeeded" in r.stdout, r.stdout
    for proto in ("--http2", "--http1.1"):
        r = run(["curl", "-sk", proto, "-o", "/dev/null", "-w", "%{http_code}",
                 f"https://127.0.0.1:{tls_port}/status/200"])
        assert r.stdout == "200"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
        deadline = time.monotonic() + slow(5)
        while time.monotonic() < deadline:
            fams, _ = scrape(admin)
            if sample(fams, "h2gate_client_streams") == 1:
                break
            time.sleep(0.05)
        assert sample(fams, "h2gate_client_connections", listener=f"127.0.0.1:{port}",
                      protocol="http/1.1") == 1
    after = series(fams)
    assert sample(fams, "h2gate_requests_total", route="side", code="2xx") == 2
    assert sorted(set(after) - set(before)) == []
    assert sorted(set(before) - set(after)) == []


@pytest.mark.serial
def test_process_metrics_agree_with_proc(gateway, origin):
    """The standard process_* series, as the client libraries define them, against what
    /proc says of the gateway's pid."""
    port, admin = free_port(), free_port()
    t0 = time.time()
    g = gateway(admin_config(port, origin, admin),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    t1 = time.time()
    for _ in range(20):
        assert h1_get(port, "/bytes/1000").startswith(b"HTTP/1.1 200")
    fams, _ = scrape(admin)
    pid = g.proc.pid
    nfd = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    vmrss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) * 1024
    vmsize = int(re.search(r"^VmSize:\s+(\d+) kB", status, re.M).group(1)) * 1024
    kinds = {"process_cpu_seconds": "counter", "process_resident_memory_bytes": "gauge",
             "process_virtual_memory_bytes": "gauge", "process_open_fds": "gauge",
             "process_max_fds": "gauge", "process_start_time_seconds": "gauge"}
    for name, kind in kinds.items():
        assert fams[name].type == kind, name
    rss = sample(fams, "process_resident_memory_bytes")
    assert vmrss / 2 <= rss <= vmrss * 2, (rss, vmrss)
    vsz = sample(fams, "process_virtual_memory_bytes")
    assert vmsize / 2 <= vsz <= vmsize * 2 and vsz >= rss, (vsz, vmsize, rss)
    assert abs(sample(fams, "process_open_fds") - nfd) <= 2, nfd
    assert sample(fams, "process_max_fds") == resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]
    start = sample(fams, "process_start_time_seconds")
    assert t0 - 2 <= start <= t1 + 1, (t0, start, t1)
    cpu = sample(fams, "process_cpu_seconds_total")
    assert 0 <= cpu <= (time.time() - t0) * os.cpu_count() + 0.05, cpu


def test_le_written_as_prometheus_clients_write_it(gateway, origin):
    """Bucket bounds read 0.0005 … 10.0, +Inf: what client_python writes for the same floats
    (and Prometheus 3 normalises to), so {le="0.5"} selects the bucket; never 5e-04 or
    0.000500."""
    from prometheus_client.utils import floatToGoString
    port, admin = free_port(), free_port()
    gateway(admin_config(port, origin, admin), wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    assert h1_get(port, "/bytes/10").startswith(b"HTTP/1.1 200")
    fams, text = scrape(admin)
    for name, label in (("h2gate_request_duration_seconds", 'route="main"'),
                        ("h2gate_upstream_connect_duration_seconds", 'upstream="app"'),
                        ("h2gate_upstream_response_header_duration_seconds", 'upstream="app"')):
        les = re.findall(rf'^{name}_bucket\{{{label},le="([^"]*)"\}} \d+$', text, re.M)
        assert les == LE, (name, les)
        assert les == [floatToGoString(float(b)) for b in les]
    assert sample(fams, "h2gate_request_duration_seconds_bucket", route="main", le="10.0") == 1
    assert re.search(r'^h2gate_request_duration_seconds_sum\{route="main"\} \d+\.\d+$', text,
                     re.M)


def test_promtool_checks_the_scrape_clean(gateway, origin):
    """promtool check metrics (Debian's prometheus) has nothing to say of a scrape with traffic
    and every optional family on (rate tables)."""
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    port, tls_port, admin = free_port(), free_port(), free_port()
    gateway(wide_config(port, tls_port, admin, origin),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    for _ in range(3):
        assert h1_get(port, "/bytes/100").startswith(b"HTTP/1.1 200")
    _, text = scrape(admin)
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0 and not r.stdout and not r.stderr, r.stdout + r.stderr


def test_bytes_by_side_add_up(gateway, origin):
    """A known download: the client side counts exactly the bytes on the client's socket, the
    origin side those on the origin's; the sum over one family is one side's traffic."""
    n = 300000
    port, admin = free_port(), free_port()
    gateway(admin_config(port, origin, admin, workers=1),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    req = f"GET /bytes/{n} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(req)
        resp = recv_all(s)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and len(body) == n
    fams, _ = scrape(admin)
    assert "h2gate_bytes" not in fams  # the old family summed both sides
    assert sample(fams, "h2gate_client_bytes_total", direction="in") == len(req)
    assert sample(fams, "h2gate_client_bytes_total", direction="out") == len(resp)
    assert sample(fams, "h2gate_client_bytes_total") == len(req) + len(resp)
    origin_in = sample(fams, "h2gate_origin_bytes_total", direction="in")
    assert n < origin_in < n + 1024, origin_in
    assert 0 < sample(fams, "h2gate_origin_bytes_total", direction="out") < 1024


def test_max_requests_is_not_a_protocol_error(gateway, origin):
    """A connection retired at h2.max_requests_per_connection, and RFC 7540 tree placeholders
    evicted at h2.max_priority_nodes, count in their own counters, not among the protocol
    errors."""
    port, admin = free_port(), free_port()
    gateway(admin_config(port, origin, admin, workers=1,
                         extra="h2: {max_requests_per_connection: 2, max_priority_nodes: 2}\n"),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    cl = Client(port)
    for sid in (1, 3, 5, 7, 9):  # placeholders for idle streams: 5 into a tree of 2
        cl.c.prioritize(sid, weight=16, depends_on=0)
    for _ in range(2):
        cl.request("/bytes/10")
    cl.events(lambda evs: any(type(e).__name__ == "ConnectionTerminated" for e in evs))
    cl.close()
    deadline = time.monotonic() + slow(5)
    while time.monotonic() < deadline:
        fams, _ = scrape(admin)
        if sample(fams, "h2gate_h2_max_requests_total") >= 1:
            break
        time.sleep(0.05)
    assert sample(fams, "h2gate_h2_max_requests_total") == 1
    assert sample(fams, "h2gate_h2_priority_evictions_total") >= 3
    kinds = {s.labels["kind"]: s.value for s in fams["h2gate_h2_protocol_errors"].samples}
    assert "max_requests" not in kinds and "priority_evictions" not in kinds
    assert sum(kinds.values()) == 0, kinds


def test_queue_wait_of_a_full_pool_is_measured(gateway, origin):
    """With max_connections: 1 and an origin that answers after 600 ms, the second of two
    concurrent requests waits in the upstream queue until the first's connection is free: the
    queue histogram counts both requests (the first with no wait, in the lowest bucket) and
    sums about the 600 ms the second waited; the response header histogram, which counts from
    before the queue, holds the wait too. What tells a binding pool cap from a slow origin."""
    import threading
    port, admin = free_port(), free_port()
    text = gw_config(port, [f"127.0.0.1:{origin.port}"], upstream_extra="max_connections: 1",
                     route_extra="name: main",
                     extra=f"admin:\n  address: 127.0.0.1:{admin}\n")
    gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    out = []
    first = threading.Thread(target=lambda: out.append(h1_get(port, "/late/600/10?k=1")))
    first.start()
    # the first holds the only connection once the origin has it (a 0.15 s sleep could end
    # before a loaded sanitizer build had sent it: then the two raced for the connection)
    assert wait_origin_has(origin, "/late/600/10?k=1") == 1
    out.append(h1_get(port, "/late/600/10?k=2"))
    first.join(10)
    assert len(out) == 2 and all(r.startswith(b"HTTP/1.1 200") for r in out), out
    fams, _ = scrape(admin)
    q = "h2gate_upstream_queue_duration_seconds"
    assert sample(fams, q + "_count", upstream="app") == 2
    assert sample(fams, q + "_bucket", upstream="app", le="0.0005") == 1
    waited = sample(fams, q + "_sum", upstream="app")
    assert 0.3 <= waited <= 1.5, waited
    head = sample(fams, "h2gate_upstream_response_header_duration_seconds_sum", upstream="app")
    assert head >= 1.2 + waited * 0.5, (head, waited)
