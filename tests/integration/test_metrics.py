"""Metrics and health (issue 21 item 5): the admin listener's /metrics parsed by Prometheus'
own parser, /healthz and /readyz."""
import signal
import socket
import subprocess
import time

from conftest import free_port, h1_get, run
from gwtest import gw_config, sample, scrape

NAMES = [
    ("h2gate_requests", "counter"), ("h2gate_request_duration_seconds", "histogram"),
    ("h2gate_upstream_connect_duration_seconds", "histogram"),
    ("h2gate_upstream_response_header_duration_seconds", "histogram"),
    ("h2gate_upstream_connections", "gauge"), ("h2gate_upstream_connections_opened", "counter"),
    ("h2gate_upstream_queue_length", "gauge"), ("h2gate_upstream_retries", "counter"),
    ("h2gate_upstream_server_up", "gauge"), ("h2gate_client_connections", "gauge"),
    ("h2gate_client_streams", "gauge"), ("h2gate_bytes", "counter"),
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


def test_every_name_typed_and_requests_counted(gateway, origin):
    """After N requests through a route over HTTP/1.1, h2c and TLS, h2gate_requests_total for
    it sums to N; every name of the issue is present with its # TYPE; histograms count the same
    requests; gauges and byte counters move."""
    port, tls_port, admin = free_port(), free_port(), free_port()
    g = gateway(admin_config(port, origin, admin, tls_port=tls_port),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    fams, text = scrape(admin)
    for name, kind in NAMES:
        assert name in fams and fams[name].type == kind, (name, kind)
        assert f"# TYPE {name}{'_total' if False else ''}" in text or f"# TYPE {name}" in text
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
    assert sample(fams, "h2gate_bytes_total", direction="origin_in") > sum(range(1, n1 + 1))
    assert sample(fams, "h2gate_bytes_total", direction="client_out") > 0
    # labels only from the configuration: request paths never appear
    assert "/bytes/" not in text and "/status/" not in text
    # a live connection is a gauge of its listener and protocol
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
        deadline = time.monotonic() + 5
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
    deadline = time.monotonic() + 5
    while not http(admin, "/readyz").startswith(b"HTTP/1.1 200") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert http(admin, "/readyz").startswith(b"HTTP/1.1 200")
    assert http(admin, "/healthz").startswith(b"HTTP/1.1 200")
    assert http(admin, "/nope").startswith(b"HTTP/1.1 404")
    assert http(admin, "/metrics", method="POST").startswith(b"HTTP/1.1 405")
    # draining (a request in flight keeps the process up): not ready, still healthy
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
    time.sleep(0.3)
    g.signal(signal.SIGTERM)
    time.sleep(0.3)
    assert g.proc.poll() is None
    assert http(admin, "/readyz").startswith(b"HTTP/1.1 503")
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
    deadline = time.monotonic() + 5
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
    g = gateway(admin_config(port, origin, admin, workers=1,
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
    time.sleep(0.5)
    cl.close()
    deadline = time.monotonic() + 5
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
