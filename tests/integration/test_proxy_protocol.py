"""The PROXY protocol on listeners that say `proxy_protocol: true`: the
address a v1 or v2 header names is the client's everywhere (X-Forwarded-For, the access log,
per-client limits); a connection without a valid header, from a source outside
proxy_protocol_from, or too slow to send it, is closed. HAProxy (send-proxy-v2) and curl
(--haproxy-protocol) are independent senders."""
import json
import socket
import ssl
import struct
import subprocess
import time

import pytest

from procs import free_port, recv_all, run, wait_port
from gwtest import tls_client_ctx, tls_listener

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(src, dst, sport, dport, local=False):
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    addrs = socket.inet_pton(fam, src) + socket.inet_pton(fam, dst) + struct.pack(">HH", sport, dport)
    return SIG + bytes([0x20 if local else 0x21, 0x21 if fam == socket.AF_INET6 else 0x11]) + \
        struct.pack(">H", len(addrs)) + addrs


def pp_gateway(gateway, origin, tmp_path, listen_extra="", route_extra="", tls=False):
    """A proxy_protocol listener; its balancers are loopback unless listen_extra names them."""
    port = free_port()
    if "proxy_protocol_from" not in listen_extra:
        listen_extra += "\nproxy_protocol_from: ['127.0.0.0/8', '::1']"
    alog = tmp_path / "access.log"
    lines = ["workers: 1", "log_level: debug", "listen:"]
    if tls:
        lines += tls_listener(port)
    else:
        lines.append(f"  - address: 127.0.0.1:{port}")
    lines += ["    proxy_protocol: true"] + [f"    {l}" for l in listen_extra.splitlines()]
    lines += ["upstreams:", "  app:", f"    servers: [127.0.0.1:{origin.port}]",
              "routes:", "  - upstream: app"] + [f"    {l}" for l in route_extra.splitlines()]
    lines += [f"access_log:\n  path: {alog}\n  format: json"]
    g = gateway("\n".join(lines) + "\n", wait=[("127.0.0.1", port)])
    g.port, g.alog = port, alog
    return g


def raw_get(port, header, path="/echo", tls=False, timeout=10):
    """Send header, then (over TLS when asked) a GET; the raw answer (b"" when closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(header)
        if tls:
            s = tls_client_ctx().wrap_socket(s, server_hostname="localhost")
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        # The gateway may close a refused connection before the GET is written.
        s.close()
        return b""
    out = recv_all(s, resets_end=True)
    s.close()
    return out


def echoed(resp):
    """The origin's echo of the request (origin.py /echo): the fields it got."""
    body = resp.split(b"\r\n\r\n", 1)[1]
    return {k.lower(): v for k, v in json.loads(body)["headers"]}


def log_records(g, n, timeout=5):
    deadline = time.monotonic() + timeout
    recs = []
    while time.monotonic() < deadline:
        if g.alog.exists():
            recs = [json.loads(l) for l in g.alog.read_text().splitlines() if l.strip()]
            if len(recs) >= n:
                break
        time.sleep(0.05)
    return recs


def test_v1_and_v2_addresses_are_the_clients(gateway, origin, tmp_path):
    g = pp_gateway(gateway, origin, tmp_path)
    r = raw_get(g.port, b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n")
    assert r.startswith(b"HTTP/1.1 200"), r[:200]
    assert echoed(r)["x-forwarded-for"] == "203.0.113.7"
    r = raw_get(g.port, v2("2001:db8::7", "::1", 4321, 80))
    assert echoed(r)["x-forwarded-for"] == "2001:db8::7"
    # the same connection's bytes may come in one segment or many
    r = raw_get(g.port, b"PROXY TCP6 2001:db8::9 ::1 1 2\r\n")
    assert echoed(r)["x-forwarded-for"] == "2001:db8::9"
    # v2 LOCAL (the balancer's own health check): the socket's address
    r = raw_get(g.port, v2("10.9.9.9", "10.0.0.1", 1, 2, local=True))
    assert echoed(r)["x-forwarded-for"] == "127.0.0.1"
    recs = log_records(g, 4)
    assert [(x["client"], x["client_port"]) for x in recs[:2]] == [("203.0.113.7", 5555),
                                                                 ("2001:db8::7", 4321)]


def test_tls_after_the_header(gateway, origin, tmp_path):
    g = pp_gateway(gateway, origin, tmp_path, tls=True)
    r = raw_get(g.port, b"PROXY TCP4 198.51.100.4 127.0.0.1 40000 443\r\n", tls=True)
    assert r.startswith(b"HTTP/1.1 200"), r[:200]
    assert echoed(r)["x-forwarded-for"] == "198.51.100.4"
    assert echoed(r)["x-forwarded-proto"] == "https"
    # curl's own v1 header (the real local address), over TLS and HTTP/2
    p = subprocess.run(["curl", "-sk", "--http2", "--haproxy-protocol", "-o", "/dev/null", "-w",
                        "%{http_code} %{http_version} %{local_port}",
                        f"https://127.0.0.1:{g.port}/echo"], capture_output=True, text=True,
                       timeout=20)
    code, version, lport = p.stdout.split()
    assert (code, version) == ("200", "2"), p.stderr
    recs = log_records(g, 2)
    assert recs[-1]["client_port"] == int(lport)


def test_a_header_split_over_reads(gateway, origin, tmp_path):
    """The header in pieces (each its own read), its last piece in one write with the start of
    the client's own bytes: those reach the protocol whole, in clear text and under TLS."""
    def pieces(port, parts, tls=False):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for p in parts:
            s.sendall(p)
            time.sleep(0.1)
        if tls:
            s = tls_client_ctx().wrap_socket(s, server_hostname="localhost")
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        with s:
            return recv_all(s)

    g = pp_gateway(gateway, origin, tmp_path)
    get = b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    h1 = b"PROXY TCP4 203.0.113.21 127.0.0.1 5555 80\r\n"
    r = pieces(g.port, [h1[:5], h1[5:20], h1[20:] + get[:10], get[10:]])
    assert echoed(r)["x-forwarded-for"] == "203.0.113.21"
    h2 = v2("2001:db8::21", "::1", 4321, 80)
    r = pieces(g.port, [h2[:7], h2[7:17], h2[17:] + get])
    assert echoed(r)["x-forwarded-for"] == "2001:db8::21"
    (tmp_path / "tls").mkdir()
    gt = pp_gateway(gateway, origin, tmp_path / "tls", tls=True)
    r = pieces(gt.port, [h1[:9], h1[9:]], tls=True)
    assert echoed(r)["x-forwarded-for"] == "203.0.113.21"


def test_haproxy_send_proxy_v2(gateway, origin, tmp_path):
    """HAProxy in TCP mode in front, `send-proxy-v2`: the gateway's access log names the
    client's own port (curl's), not HAProxy's connection."""
    g = pp_gateway(gateway, origin, tmp_path)
    hport = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(f"""global
    maxconn 100
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend f
    bind 127.0.0.1:{hport}
    default_backend b
backend b
    server gw 127.0.0.1:{g.port} send-proxy-v2
""")
    h = subprocess.Popen(["haproxy", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_port("127.0.0.1", hport, proc=h)
        for proto in ("--http1.1", "--http2-prior-knowledge"):
            p = subprocess.run(["curl", "-s", proto, "-o", "/dev/null", "-w",
                                "%{http_code} %{local_port}", f"http://127.0.0.1:{hport}/echo"],
                               capture_output=True, text=True, timeout=20)
            code, lport = p.stdout.split()
            assert code == "200", p
            recs = log_records(g, 1)
            assert recs[-1]["client"] == "127.0.0.1" and recs[-1]["client_port"] == int(lport)
            g.alog.write_text("")
    finally:
        h.terminate()
        h.wait(timeout=10)


def test_without_a_valid_header_the_connection_is_closed(gateway, origin, tmp_path):
    g = pp_gateway(gateway, origin, tmp_path, "proxy_protocol_timeout: 500ms")
    # a request without a header: closed, nothing answered, nothing sent to the origin
    assert raw_get(g.port, b"") == b""
    assert raw_get(g.port, b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n") == b""
    assert raw_get(g.port, SIG + b"\x11\x11\x00\x0c" + b"\x00" * 12) == b""
    assert "proxy_protocol_refused" in g.log() and "v2 version is not 2" in g.log()
    # too slow: closed at proxy_protocol_timeout
    # the clock starts before the connection, which the gateway's timer cannot start before
    # (started after it, the lower bound failed whenever this process was kept off the CPU
    # for 0.2 s between its connect and its clock)
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", g.port), timeout=5)
    s.sendall(b"PROXY TCP4 1.2.")
    assert s.recv(100) == b""
    assert 0.3 < time.monotonic() - t0 < 3
    s.close()
    assert "kind=proxy_header" in g.log()
    assert not any(r.target == "/echo" for r in origin.requests)


def test_only_trusted_sources_may_send_a_header(gateway, origin, tmp_path):
    g = pp_gateway(gateway, origin, tmp_path, "proxy_protocol_from: [10.0.0.0/8, '::1']")
    assert raw_get(g.port, b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n") == b""
    assert "not in proxy_protocol_from" in g.log()
    (tmp_path / "g2").mkdir()
    g2 = pp_gateway(gateway, origin, tmp_path / "g2", "proxy_protocol_from: ['127.0.0.0/8']")
    r = raw_get(g2.port, b"PROXY TCP4 203.0.113.8 127.0.0.1 5555 80\r\n")
    assert echoed(r)["x-forwarded-for"] == "203.0.113.8"


@pytest.mark.serial
def test_per_client_limits_use_the_header_address(gateway, origin, tmp_path):
    g = pp_gateway(gateway, origin, tmp_path, route_extra="request_rate: 1\nrequest_burst: 1")
    a = b"PROXY TCP4 203.0.113.10 127.0.0.1 1000 80\r\n"
    b = b"PROXY TCP4 203.0.113.11 127.0.0.1 1000 80\r\n"
    assert raw_get(g.port, a).startswith(b"HTTP/1.1 200")
    assert raw_get(g.port, b).startswith(b"HTTP/1.1 200")  # another client: its own budget
    assert raw_get(g.port, a).startswith(b"HTTP/1.1 429")  # the same client again


def test_proxy_protocol_without_its_sources_is_refused(h2gate_bin, gateway, origin, tmp_path):
    """`proxy_protocol: true` alone once trusted every source (any client could name any
    address): the configuration is refused and says why; `proxy_protocol_from: any` spelled out
    trusts every source."""
    cfg = tmp_path / "gw.yaml"
    tail = "upstreams:\n  app:\n    servers: [127.0.0.1:2]\nroutes:\n  - upstream: app\n"
    for extra in ("", "    proxy_protocol_from: []\n"):
        cfg.write_text("listen:\n  - address: 127.0.0.1:1\n    proxy_protocol: true\n" + extra +
                       tail)
        r = run([h2gate_bin, "--check-config", str(cfg)])
        assert r.returncode == 1
        assert (f"{cfg}:3:21: proxy_protocol needs proxy_protocol_from: the addresses of the "
                "balancers allowed to send the header (or any, to let every source name the "
                "client's address)") in r.stderr, r.stderr
    g = pp_gateway(gateway, origin, tmp_path, "proxy_protocol_from: any")
    r = raw_get(g.port, b"PROXY TCP4 203.0.113.30 127.0.0.1 5555 80\r\n")
    assert echoed(r)["x-forwarded-for"] == "203.0.113.30"


def test_config_errors(h2gate_bin, tmp_path):
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("listen:\n  - address: 127.0.0.1:1\n    proxy_protocol: true\n"
                   "    proxy_protocol_from: [10.0.0.0/33, nonsense]\n"
                   "upstreams:\n  app:\n    servers: [127.0.0.1:2]\nroutes:\n  - upstream: app\n")
    r = run([h2gate_bin, "--check-config", str(cfg)])
    assert r.returncode == 1
    assert f"{cfg}:4:27: '10.0.0.0/33' is not a network" in r.stderr, r.stderr
    assert f"{cfg}:4:40: 'nonsense' is not a network" in r.stderr, r.stderr
