"""The translator end to end: clients (python3-h2, curl, nghttp, h2load, raw sockets) → h2gate →
real origins (nginx, and the scripted origin of origin.py). What the origin received is
inspected, bodies are checksummed, pool use is counted at the origin."""
import hashlib
import json
import os
import socket
import time

import h2.connection
import h2.config
import h2.events
import h2.settings
import pytest

from procs import (Unanswered, free_port, raw_exchange, rss_kib, run, sanitized, sanitizer,
                   slow)
from gwtest import (Client, response, ended, gw_config, many_gets, origin_count, resets,
                    wait_origin_has)
from origin import pattern


@pytest.fixture
def gwo(gateway, origin):
    """A gateway in front of the scripted origin."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="forwarded: true",
                          extra="access_log: {path: stderr, format: json}\n"),
                wait=[("127.0.0.1", port)])
    g.port, g.origin = port, origin
    return g


def curl(*args, timeout=120):
    return run(["curl", "-sS", "--max-time", "100", *args], timeout=timeout)


def raw(port, data, timeout=10):
    return raw_exchange(port, data, timeout)


def echo(body):
    return json.loads(body)


def hdrs(got):
    return [(k.lower(), v) for k, v in got["headers"]]


def values(got, name):
    return [v for k, v in hdrs(got) if k == name]


# ---- request translation -------------------------------------------------------------------------

def test_h2_request_translation(gwo):
    cl = Client(gwo.port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", "/echo?q=1"), (":scheme", "http"),
                            (":authority", "app.test:8080"), ("cookie", "a=1"), ("cookie", "b=2"),
                            ("te", "trailers"), ("x-forwarded-for", "10.0.0.1"),
                            ("via", "1.1 upstream-proxy"), ("x-custom", "kept")], end_stream=True)
    cl.flush()
    status, body, done = response(cl.events(ended(sid)), sid)
    assert status == "200" and done
    got = echo(body)
    assert got["method"] == "GET" and got["target"] == "/echo?q=1"
    assert values(got, "host") == ["app.test:8080"]          # :authority → Host
    assert values(got, "cookie") == ["a=1; b=2"]             # RFC 9113 §8.2.3
    assert values(got, "te") == []                           # hop-by-hop
    assert values(got, "x-forwarded-for") == ["127.0.0.1"]  # the client is no trusted proxy
    assert values(got, "x-forwarded-proto") == ["http"]
    assert values(got, "forwarded") == ['for=127.0.0.1;proto=http;host="app.test:8080"']
    assert values(got, "via") == ["1.1 upstream-proxy, 2 h2gate"]
    assert values(got, "x-custom") == ["kept"]
    assert values(got, "content-length") == [] and values(got, "transfer-encoding") == []
    cl.close()


CLAIMS = ["X-Forwarded-For: 6.6.6.6", "X-Forwarded-Proto: https", "X-Forwarded-Host: www.app.test",
          "Forwarded: for=6.6.6.6;proto=https"]
# the rest of the X-Forwarded-* family, which origins read for the scheme, port and prefix the
# client used (Rack: X-Forwarded-Ssl: on is https, before X-Forwarded-Proto)
MORE_CLAIMS = {"x-forwarded-ssl": "on", "x-forwarded-scheme": "https", "x-forwarded-port": "443",
               "x-forwarded-prefix": "/evil"}
CLAIMS += [f"{k}: {v}" for k, v in MORE_CLAIMS.items()]


def claimed(gateway, origin, extra, proto, route_extra="forwarded: true", claims=None):
    """What the origin hears when a curl client (HTTP/1.1 or h2c) sends claims (CLAIMS by
    default) through a gateway with the top-level extra config (and route_extra on its
    route)."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra=route_extra,
                      extra=extra), wait=[("127.0.0.1", port)])
    args = [a for c in (CLAIMS if claims is None else claims) for a in ("-H", c)]
    r = curl(proto, *args, f"http://127.0.0.1:{port}/echo")
    assert r.returncode == 0, r.stderr
    return echo(r.stdout)


@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
def test_client_forwarding_claims_are_replaced_by_default(gateway, origin, proto):
    """forwarded_for: replace (the default): a client's X-Forwarded-For, -Proto, -Host and
    Forwarded never reach the origin; it hears only of the connection's peer."""
    got = claimed(gateway, origin, "", proto)
    host = values(got, "host")[0]
    assert values(got, "x-forwarded-for") == ["127.0.0.1"]
    assert values(got, "x-forwarded-proto") == ["http"]
    assert values(got, "x-forwarded-host") == []
    assert values(got, "forwarded") == [f'for=127.0.0.1;proto=http;host="{host}"']
    # nor does the rest of the family: a cleartext client was taken for an https one
    assert {k: values(got, k) for k in MORE_CLAIMS} == {k: [] for k in MORE_CLAIMS}


@pytest.mark.parametrize("route_extra", ["", "x_forwarded: false\nforwarded: true"])
def test_a_route_with_one_family_drops_the_clients_other(gateway, origin, route_extra):
    """The default route says X-Forwarded-For and -Proto and not Forwarded: a client's
    `Forwarded: for=6.6.6.6;proto=https` went to the origin as it came, next to the
    gateway's X-Forwarded-For: 127.0.0.1, and Rack 3 reads Forwarded first (the client's
    address and scheme forged). The same for a route that says only Forwarded and a client's
    X-Forwarded-*. Where the route tells the origin of the client, only the gateway speaks."""
    got = claimed(gateway, origin, "", "--http1.1", route_extra=route_extra)
    host = values(got, "host")[0]
    if route_extra:
        assert values(got, "forwarded") == [f'for=127.0.0.1;proto=http;host="{host}"']
        assert [k for k, _ in hdrs(got) if k.startswith("x-forwarded-")] == [], got
    else:
        assert values(got, "x-forwarded-for") == ["127.0.0.1"]
        assert values(got, "x-forwarded-proto") == ["http"]
        assert values(got, "forwarded") == [], got
        assert [k for k, _ in hdrs(got) if k.startswith("x-forwarded-")] == \
            ["x-forwarded-for", "x-forwarded-proto"], got
    # neither: the gateway tells nothing of the client, and what the client said goes on
    got = claimed(gateway, origin, "", "--http1.1", route_extra="x_forwarded: false")
    assert values(got, "forwarded") == ["for=6.6.6.6;proto=https"], got
    assert values(got, "x-forwarded-for") == ["6.6.6.6"], got


@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
def test_trusted_proxy_claims_are_kept_with_append(gateway, origin, proto):
    """forwarded_for: append with the peer in trusted_proxies: the proxy's list is kept and the
    peer appended (X-Forwarded-For: 6.6.6.6, 127.0.0.1), its scheme and host believed; a peer
    outside trusted_proxies is replaced as by default."""
    got = claimed(gateway, origin, "forwarded_for: append\ntrusted_proxies: [127.0.0.0/8]\n",
                  proto)
    host = values(got, "host")[0]
    assert values(got, "x-forwarded-for") == ["6.6.6.6, 127.0.0.1"]
    assert values(got, "x-forwarded-proto") == ["https"]
    assert values(got, "x-forwarded-host") == ["www.app.test"]
    assert values(got, "forwarded") == [
        f'for=6.6.6.6;proto=https, for=127.0.0.1;proto=http;host="{host}"']
    assert {k: values(got, k) for k in MORE_CLAIMS} == {k: [v] for k, v in MORE_CLAIMS.items()}
    got = claimed(gateway, origin, "forwarded_for: append\ntrusted_proxies: [10.0.0.0/8]\n",
                  proto)
    host = values(got, "host")[0]
    assert values(got, "x-forwarded-for") == ["127.0.0.1"]
    assert values(got, "x-forwarded-proto") == ["http"]
    assert values(got, "x-forwarded-host") == []
    assert values(got, "forwarded") == [f'for=127.0.0.1;proto=http;host="{host}"']
    assert {k: values(got, k) for k in MORE_CLAIMS} == {k: [] for k in MORE_CLAIMS}


# the single-address fields origins take for the client's address (nginx real_ip_header
# X-Real-IP, Rails Client-IP, CDNs' True-Client-IP, CF-Connecting-IP...) and the pre-RFC 7239
# spellings X-Forwarded and Forwarded-For
ADDRESS_CLAIMS = {"x-real-ip": "6.6.6.6", "client-ip": "6.6.6.6", "x-client-ip": "6.6.6.6",
                  "true-client-ip": "6.6.6.6", "cf-connecting-ip": "6.6.6.6",
                  "fastly-client-ip": "6.6.6.6", "fly-client-ip": "6.6.6.6",
                  "x-cluster-client-ip": "6.6.6.6", "x-forwarded": "for=6.6.6.6",
                  "forwarded-for": "6.6.6.6"}
TRUSTED = "forwarded_for: append\ntrusted_proxies: [127.0.0.0/8]\n"


@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
@pytest.mark.parametrize("extra,route_extra,kept", [
    ("", "", False),                                      # the default route: x_forwarded
    ("", "x_forwarded: false\nforwarded: true", False),  # Forwarded only
    ("forwarded_for: append\ntrusted_proxies: [10.0.0.0/8]\n", "", False),  # peer not trusted
    (TRUSTED, "", True),                                  # a trusted proxy's are believed
    ("", "x_forwarded: false", True),                     # the gateway says nothing: as they came
], ids=["default", "forwarded-only", "untrusted-append", "trusted-append", "families-off"])
def test_client_address_fields_reach_the_origin_only_from_trusted_proxies(
        gateway, origin, proto, extra, route_extra, kept):
    """A client's `X-Real-IP: 6.6.6.6` (and True-Client-IP, CF-Connecting-IP, Client-IP...)
    went to the origin next to the gateway's X-Forwarded-For: 127.0.0.1, and nginx's realip
    module with real_ip_header X-Real-IP, or Rails reading Client-IP, took the client's word
    for its address. Where the route tells the origin of the client, only a trusted proxy's
    reach it; with both families off the gateway tells nothing and they pass as they came."""
    got = claimed(gateway, origin, extra, proto, route_extra=route_extra,
                  claims=[f"{k}: {v}" for k, v in ADDRESS_CLAIMS.items()] + ["X-Kept: yes"])
    want = {k: [v] if kept else [] for k, v in ADDRESS_CLAIMS.items()}
    assert {k: values(got, k) for k in ADDRESS_CLAIMS} == want, got
    assert values(got, "x-kept") == ["yes"]
    if not route_extra:  # the gateway's own word on the client still goes
        assert values(got, "x-forwarded-for") == ["127.0.0.1"], got


def test_h2_host_disagreeing_with_authority_is_malformed(gwo):
    cl = Client(gwo.port, validate=False)  # python3-h2 itself refuses to send this
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", "/echo"), (":scheme", "http"),
                            (":authority", "a.test"), ("host", "b.test")], end_stream=True)
    cl.flush()
    rst, evs = cl.wait_resets()
    assert rst and rst[0].error_code == 1  # PROTOCOL_ERROR
    assert gwo.origin.requests == []       # never reached the origin
    cl.close()


def test_h1_request_translation_drops_hop_by_hop(gwo):
    out = raw(gwo.port, b"GET /echo HTTP/1.1\r\nHost: app.test\r\nConnection: keep-alive, X-Secret\r\n"
                        b"X-Secret: hop\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n"
                        b"TE: trailers\r\nX-Kept: yes\r\n\r\n"
                        b"GET /echo HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 OK")
    head, _, rest = out.partition(b"\r\n\r\n")
    n = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    got = echo(rest[:n])
    assert rest[n:].startswith(b"HTTP/1.1 200 OK")  # pipelined, answered in order
    names = [k for k, _ in hdrs(got)]
    for n in ("connection", "x-secret", "keep-alive", "proxy-connection", "te"):
        assert n not in names, got
    assert values(got, "x-kept") == ["yes"]
    assert values(got, "via") == ["1.1 h2gate"]
    assert len(gwo.origin.requests) == 2


@pytest.mark.parametrize("size", [0, 1, 16384, 1 << 20])
def test_h2_uploads_reach_the_origin_intact(gwo, size, tmp_path):
    data = os.urandom(size)
    f = tmp_path / "up.bin"
    f.write_bytes(data)
    r = curl("--http2-prior-knowledge", "--data-binary", f"@{f}", f"http://127.0.0.1:{gwo.port}/echo")
    got = echo(r.stdout)
    assert got["body_len"] == size and got["body_sha1"] == hashlib.sha1(data).hexdigest()
    # curl sends content-length: the origin gets it (a known length is not sent chunked)
    req = gwo.origin.requests[-1]
    if size:
        assert req.header("Content-Length") == str(size)


def test_h2_body_of_unknown_length_goes_chunked(gwo):
    cl = Client(gwo.port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                            (":authority", "x")])
    cl.c.send_data(sid, b"hello ")
    cl.c.send_data(sid, b"world", end_stream=True)
    cl.flush()
    status, body, _ = response(cl.events(ended(sid)), sid)
    got = echo(body)
    assert status == "200" and got["body_sha1"] == hashlib.sha1(b"hello world").hexdigest()
    assert gwo.origin.requests[-1].header("Transfer-Encoding") == "chunked"
    cl.close()


@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
def test_chunked_and_large_uploads(gwo, proto, tmp_path):
    data = os.urandom(100 << 20)
    f = tmp_path / "big.bin"
    f.write_bytes(data)
    r = curl(proto, "-H", "Transfer-Encoding: chunked" if proto == "--http1.1" else "X-A: b",
             "--data-binary", f"@{f}", f"http://127.0.0.1:{gwo.port}/echo")
    got = echo(r.stdout)
    assert got["body_len"] == len(data)
    assert got["body_sha1"] == hashlib.sha1(data).hexdigest()


# ---- response translation ------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 16384, 1 << 20])
@pytest.mark.parametrize("proto", ["--http1.1", "--http2-prior-knowledge"])
def test_downloads_have_the_origin_bytes(gwo, proto, size):
    r = run(["curl", "-sS", proto, f"http://127.0.0.1:{gwo.port}/bytes/{size}", "-o", "-",
             "-w", "\n%{http_code}"], timeout=60)
    body, _, code = r.stdout.rpartition("\n")
    assert code == "200"
    assert body.encode() == pattern(size)


@pytest.mark.serial
def test_100mib_download_from_nginx(gateway, nginx_origin, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(100 << 20)
    (root / "big.bin").write_bytes(data)
    n = nginx_origin(str(root))
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"]), wait=[("127.0.0.1", port)])
    want = hashlib.sha256(data).hexdigest()
    for proto in ("--http2-prior-knowledge", "--http1.1"):
        r = run(["sh", "-c", f"curl -sS {proto} http://127.0.0.1:{port}/big.bin | sha256sum"],
                timeout=120)
        assert r.stdout.split()[0] == want, proto


def test_nghttp_gets_nginx_files(gateway, nginx_origin, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    for i in range(5):
        (root / f"f{i}.txt").write_bytes(pattern(1000 * (i + 1)))
    n = nginx_origin(str(root))
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"]), wait=[("127.0.0.1", port)])
    urls = [f"http://127.0.0.1:{port}/f{i}.txt" for i in range(5)]
    r = run(["nghttp", "-ns", *urls], timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    # nghttp -s: one row per request, "id responseEnd requestStart process code size path"
    rows = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 7 and f[6].startswith("/f"):
            rows[f[6]] = int(f[4])
    assert rows == {f"/f{i}.txt": 200 for i in range(5)}, r.stdout
    r = run(["nghttp", "-n", "-v", urls[4]], timeout=30)
    assert ":status: 200" in r.stdout and "content-length: 5000" in r.stdout


def test_h2_trailers_are_relayed(gwo):
    cl = Client(gwo.port)
    sid = cl.request("/chunked/30000")
    evs = cl.events(ended(sid))
    status, body, done = response(evs, sid)
    assert status == "200" and done and body == pattern(30000)
    tr = [e for e in evs if isinstance(e, h2.events.TrailersReceived)]
    assert tr, evs
    assert dict(tr[0].headers)["x-checksum"] == hashlib.sha1(pattern(30000)).hexdigest()
    cl.close()


def test_h1_trailers_are_relayed(gwo):
    out = raw(gwo.port, b"GET /chunked/100 HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in out.lower()
    assert out.endswith(b"0\r\nx-checksum: " + hashlib.sha1(pattern(100)).hexdigest().encode() + b"\r\n\r\n")


def test_103_early_hints_forwarded(gwo):
    cl = Client(gwo.port)
    sid = cl.request("/early-hints")
    evs = cl.events(ended(sid))
    info = [e for e in evs if isinstance(e, h2.events.InformationalResponseReceived)]
    assert info and dict(info[0].headers)[":status"] == "103"
    assert "rel=preload" in dict(info[0].headers)["link"]
    assert response(evs, sid)[:2] == ("200", b"hello")
    cl.close()
    r = curl("-i", "--http1.1", f"http://127.0.0.1:{gwo.port}/early-hints")
    assert r.stdout.startswith("HTTP/1.1 103 Early Hints"), r.stdout
    assert "HTTP/1.1 200 OK" in r.stdout and r.stdout.endswith("hello")


def test_100_continue_from_origin_is_not_forwarded(gwo):
    r = curl("-i", "--http2-prior-knowledge", f"http://127.0.0.1:{gwo.port}/continue")
    assert r.stdout.startswith("HTTP/2 200"), r.stdout


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses(gwo, status):
    cl = Client(gwo.port)
    sid = cl.request(f"/status/{status}")
    st, body, done = response(cl.events(ended(sid)), sid)
    assert (st, body, done) == (str(status), b"", True)
    cl.close()


def test_head_has_no_body_but_keeps_length(gwo):
    r = curl("-sI", "--http2-prior-knowledge", f"http://127.0.0.1:{gwo.port}/bytes/777")
    assert r.stdout.startswith("HTTP/2 200") and "content-length: 777" in r.stdout


def test_response_hop_by_hop_removed_and_names_lowercased(gwo):
    r = curl("-i", "--http2-prior-knowledge", f"http://127.0.0.1:{gwo.port}/conn-close")
    head = r.stdout.split("\r\n\r\n")[0]
    assert "connection:" not in head.lower()
    assert "via: 1.1 h2gate" in head


def test_response_fields_named_by_connection_removed(gwo):
    r = curl("-i", "--http2-prior-knowledge", f"http://127.0.0.1:{gwo.port}/conn-named")
    head = r.stdout.split("\r\n\r\n")[0].lower()
    assert r.stdout.startswith("HTTP/2 200")
    for gone in ("connection:", "x-hop:", "keep-alive:"):
        assert gone not in head
    assert "x-hoq: 2" in head and "x-" + "l" * 67 + ": 3" in head


# ---- errors from the back ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/garbage", "/dup-cl", "/cl-te", "/bad-header"])
def test_malformed_origin_response_is_502_never_forwarded(gwo, path):
    for proto in ("--http1.1", "--http2-prior-knowledge"):
        r = curl(proto, f"http://127.0.0.1:{gwo.port}{path}", "-w", "\n%{http_code}")
        body, _, code = r.stdout.rpartition("\n")
        assert code == "502", (path, r.stdout)
        assert body == "h2gate: the origin failed to answer\n"
    assert "event=origin_error" in gwo.log() and "code=GW_E_PARSE" in gwo.log()


def test_origin_closing_mid_body_resets_the_stream(gwo):
    cl = Client(gwo.port)
    sid = cl.request("/truncate")
    evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamReset, h2.events.StreamEnded)) for x in e))
    rst = resets(evs)
    assert rst and rst[0].stream_id == sid
    assert rst[0].error_code == 2  # INTERNAL_ERROR: the client sees a broken response
    assert not any(isinstance(e, h2.events.StreamEnded) for e in evs)
    cl.close()


def test_response_timeout_is_504(gateway, origin):
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], "response_timeout: 500ms"),
                wait=[("127.0.0.1", port)])
    start = time.monotonic()
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{port}/hang", "-w", "\n%{http_code}")
    assert r.stdout.endswith("\n504"), r.stdout
    assert 0.4 < time.monotonic() - start < 5
    assert "code=GW_E_TIMEOUT status=504" in g.log()


def test_read_timeout_after_head_cuts_the_response(gateway, origin):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], "read_timeout: 500ms"),
            wait=[("127.0.0.1", port)])
    out = raw(port, b"GET /hang-body HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200")  # the head was relayed, then the connection closed
    assert b"content-length: 100" in out and out.endswith(b"\r\n\r\n")


def test_slow_origin_body_is_relayed_as_it_comes(gwo):
    """Read batching (read_batch, default 256 KiB) holds a Content-Length body back until the
    rest of it is queued, but for read_batch_wait (5 ms) at most: an origin that sends 10
    pieces 100 ms apart reaches the client piece by piece, not all at the end."""
    s = socket.create_connection(("127.0.0.1", gwo.port), timeout=10)
    start = time.monotonic()
    s.sendall(b"GET /slow/100000 HTTP/1.1\r\nHost: x\r\n\r\n")
    got, arrivals = b"", []
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
        arrivals.append((time.monotonic() - start, len(got)))
        head, sep, body = got.partition(b"\r\n\r\n")
        if sep and len(body) >= 100000:
            break
    s.close()
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(pattern(100000))
    # the origin's pieces leave at 0.1, 0.2, ... 1.0 s: four of them had reached the client
    # 0.3 s or more before the last one did (0.6 s apart when nothing waits). Measured from the
    # last arrival: the origin (a thread of this process) kept off a loaded machine's CPU
    # delays every later piece alike, and the gateway or the client may be 0.3 s late, where
    # a fixed "four by 0.65 s" left a quarter of a second to all three together
    last = arrivals[-1][0]
    by = max([n for t, n in arrivals if t <= last - 0.3], default=0)
    assert by >= len(head) + 4 + 40000, arrivals


def test_connect_timeout_is_504(gateway):
    # a listener that never accepts, with its backlog full: SYNs go unanswered
    hole = Unanswered(fillers=4)
    time.sleep(0.2)
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{hole.port}"],
                          "connect_timeout: 300ms\nretries: 0"), wait=[("127.0.0.1", port)])
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{port}/", "-w", "\n%{http_code}")
    assert r.stdout.endswith("\n504"), r.stdout
    assert "GW_E_TIMEOUT" in g.log()
    hole.close()


def test_refused_origin_is_502_and_server_is_ejected_then_503(gateway):
    dead = free_port()
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{dead}"], "retries: 0\nhealth: {fail_threshold: 2, eject: 30s}"),
                wait=[("127.0.0.1", port)])
    codes = []
    for _ in range(3):
        r = curl("--http1.1", f"http://127.0.0.1:{port}/", "-o", "/dev/null", "-w", "%{http_code}")
        codes.append(r.stdout)
    # the third found no healthy server: unavailable (503), not a bad answer
    assert codes == ["502", "502", "503"]
    assert "event=back_server_eject" in g.log()
    assert "code=GW_E_NOENT" in g.log()


def test_idempotent_request_is_retried_on_another_connection(gwo):
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{gwo.port}/drop-once/a", "-w", " %{http_code}")
    assert r.stdout == "ok 200", r.stdout
    assert len([q for q in gwo.origin.requests if q.target == "/drop-once/a"]) == 2
    assert "event=back_retry" in gwo.log()


def test_retry_moves_to_a_healthy_server(gateway, origin):
    dead = free_port()
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{dead}", f"127.0.0.1:{origin.port}"]),
                wait=[("127.0.0.1", port)])
    for _ in range(6):
        r = curl("--http1.1", f"http://127.0.0.1:{port}/bytes/3", "-w", " %{http_code}")
        assert r.stdout.endswith(" 200"), r.stdout
    assert "event=back_retry" in g.log()


def test_client_reset_aborts_the_origin_exchange(gwo):
    cl = Client(gwo.port)
    sid = cl.request("/slow/100000")
    # the exchange is under way at the origin (a 0.25 s sleep could end before a loaded ASan
    # build had sent it: the reset then came first, and no connection was half read)
    assert wait_origin_has(gwo.origin, "/slow/100000") == 1
    cl.c.reset_stream(sid, error_code=8)
    cl.flush()
    time.sleep(0.3)
    sid2 = cl.request("/bytes/10")
    assert response(cl.events(ended(sid2)), sid2)[:2] == ("200", pattern(10))
    cl.close()
    deadline = time.monotonic() + slow(5)
    while gwo.origin.open_connections > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    # the half-read connection was closed, not returned to the pool
    assert gwo.origin.connections >= 2


# ---- pools, counted at the origin ----------------------------------------------------------------

@pytest.mark.serial
def test_pool_reuse_10k_sequential_and_10k_concurrent(gateway, nginx_origin, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "i.txt").write_bytes(b"x" * 100)
    n = nginx_origin(str(root))
    port = free_port()
    # coalescing off: the 100 concurrent identical requests must really queue for the pool
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"], "max_connections: 8",
                      route_extra="coalesce: false"), wait=[("127.0.0.1", port)])
    r = run(["h2load", "-n", "10000", "-c", "1", "-m", "1", f"http://127.0.0.1:{port}/i.txt"], timeout=300)
    assert "10000 succeeded" in r.stdout and "10000 2xx" in r.stdout, r.stdout
    assert n.connections() == 1  # one after the other: one connection, reused
    r = run(["h2load", "-n", "10000", "-c", "1", "-m", "100", f"http://127.0.0.1:{port}/i.txt"], timeout=300)
    assert "10000 succeeded" in r.stdout and "10000 2xx" in r.stdout, r.stdout
    # at most 8 in total; the sequential run's connection was retired after
    # max_requests_per_connection (10000), so count those of the second run
    used = n.connections() - 1
    print(f"origin connections: sequential 1, concurrent {used}")
    assert 2 <= used <= 8  # concurrency did use the pool, within its cap


# ---- bounded memory ------------------------------------------------------------------------------

@pytest.mark.serial
def test_slow_reader_keeps_memory_bounded_and_is_timed_out(gateway, nginx_origin, tmp_path):
    if sanitized():  # ASan's quarantine and TSan's shadow pages: RSS is the runtime's
        pytest.skip(f"{sanitizer()} build: RSS says nothing of what the gateway holds")
    root = tmp_path / "www"
    root.mkdir()
    with open(root / "big.bin", "wb") as f:
        f.truncate(100 << 20)
    n = nginx_origin(str(root))
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{n.port}"], "max_connections: 100",
                          extra="timeouts: {body: 3s}\nh2: {max_concurrent_streams: 200}\n"
                                "limits: {body_buffer: 64KiB}\n"),
                wait=[("127.0.0.1", port)])
    before = rss_kib(g.proc.pid)
    cl = Client(port)
    for _ in range(100):
        cl.request("/big.bin")
    # never acknowledge DATA: windows stay at the 65535 default
    deadline = time.monotonic() + 2.5
    got = 0
    while time.monotonic() < deadline:
        for e in cl.events(lambda e: False, timeout=0.2):
            if isinstance(e, h2.events.DataReceived):
                got += len(e.data)
    grown = rss_kib(g.proc.pid) - before
    print(f"slow reader: RSS grew {grown} KiB, client got {got} bytes")
    bound_kib = 100 * 64 + 16 * 1024  # 100 × body_buffer + a fixed overhead
    assert grown < bound_kib, f"RSS grew {grown} KiB"
    assert got <= 65535  # the connection window
    # the stalled streams are reset after timeouts.body
    evs = cl.events(lambda e: sum(isinstance(x, h2.events.StreamReset) for x in e) >= 100, timeout=8)
    assert sum(isinstance(x, h2.events.StreamReset) for x in evs) >= 100
    assert "event=client_stalled" in g.log()
    cl.close()


# ---- coalescing ----------------------------------------------------------------------------------


def test_coalescing_100_identical_gets_make_one_origin_request(gwo):
    want = pattern(1 << 20)
    got = many_gets(gwo.port, "/bytes/1048576", 100)
    assert all(v == ("200", want) for v in got.values()), {s: (v[0], len(v[1])) for s, v in got.items()}
    assert origin_count(gwo.origin, "/bytes/1048576") == 1
    deadline = time.monotonic() + slow(5)  # request lines are written when the streams close
    while gwo.log().count('"coalesced":true') < 99 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gwo.log().count('"coalesced":true') == 99


def test_coalescing_off_sends_every_request(gateway, origin):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="coalesce: false"),
            wait=[("127.0.0.1", port)])
    want = pattern(1 << 20)
    got = many_gets(port, "/bytes/1048576", 100)
    assert all(v == ("200", want) for v in got.values())
    assert origin_count(origin, "/bytes/1048576") == 100


@pytest.mark.parametrize("path", ["/private/5000", "/cookie/5000"])
def test_private_response_is_not_shared(gwo, path):
    got = many_gets(gwo.port, path, 10)
    assert all(v == ("200", pattern(5000)) for v in got.values())
    assert origin_count(gwo.origin, path) == 10  # the followers went on their own


def test_requests_with_cookies_are_not_coalesced(gwo):
    got = many_gets(gwo.port, "/bytes/100", 10, extra=[("cookie", "s=1")])
    assert all(v == ("200", pattern(100)) for v in got.values())
    assert origin_count(gwo.origin, "/bytes/100") == 10


def test_cancelled_leader_does_not_cancel_followers(gwo):
    cl = Client(gwo.port)
    cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    cl.c.increment_flow_control_window(1 << 24)
    # both requests in one flight, so that b joins a's exchange before the head comes back;
    # then a is cancelled
    hdrs_ = [(":method", "GET"), (":path", "/slow/20000"), (":scheme", "http"), (":authority", "x")]
    a = cl.c.get_next_available_stream_id()
    cl.c.send_headers(a, hdrs_, end_stream=True)
    b = cl.c.get_next_available_stream_id()
    cl.c.send_headers(b, hdrs_, end_stream=True)
    cl.flush()
    time.sleep(0.15)
    cl.c.reset_stream(a, error_code=8)
    cl.flush()
    evs = cl.events(ended(b), timeout=10)
    assert response(evs, b)[:2] == ("200", pattern(20000))
    assert origin_count(gwo.origin, "/slow/20000") == 1
    cl.close()


# ---- early responses, bad request bodies, slow origins -------------------------------------------

def test_early_response_is_relayed_then_stream_reset_no_error(gwo):
    cl = Client(gwo.port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/reject/413"), (":scheme", "http"),
                            (":authority", "x"), ("content-length", "100000")])
    cl.c.send_data(sid, b"x" * 1000)
    cl.flush()
    rst, evs = cl.wait_resets()
    status, body, done = response(evs, sid)
    assert (status, body, done) == ("413", b"early\n", True)  # relayed whole, at once
    assert rst and rst[0].error_code == 0  # NO_ERROR: stop sending (RFC 9113 §8.1)
    # the origin connection was not reused for the next request
    sid2 = cl.request("/bytes/5")
    assert response(cl.events(ended(sid2)), sid2)[:2] == ("200", pattern(5))
    assert gwo.origin.connections == 2
    cl.close()


def test_h1_early_response_closes_the_client_connection(gwo):
    out = raw(gwo.port, b"POST /reject/401 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100)
    assert out.startswith(b"HTTP/1.1 401") and out.endswith(b"early\n")


def test_content_length_disagreeing_with_data_resets_and_origin_never_gets_it(gwo):
    cl = Client(gwo.port, validate=False)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                            (":authority", "x"), ("content-length", "10")])
    cl.c.send_data(sid, b"12345", end_stream=True)
    cl.flush()
    rst, evs = cl.wait_resets()
    assert rst and rst[0].error_code == 1  # PROTOCOL_ERROR (RFC 9113 §8.1.1)
    time.sleep(0.3)
    assert [q for q in gwo.origin.requests if q.target == "/echo"] == []  # never a complete request
    sid2 = cl.request("/echo")
    status, body, _ = response(cl.events(ended(sid2)), sid2)
    assert status == "200" and echo(body)["body_len"] == 0
    cl.close()


@pytest.mark.serial
def test_slow_origin_upload_keeps_memory_bounded(gateway, origin):
    if sanitized():  # ASan's quarantine and TSan's shadow pages: RSS is the runtime's
        pytest.skip(f"{sanitizer()} build: RSS says nothing of what the gateway holds")
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], "max_connections: 100",
                          extra="h2: {max_concurrent_streams: 200}\n"), wait=[("127.0.0.1", port)])
    before = rss_kib(g.proc.pid)
    cl = Client(port)
    sids = []
    for _ in range(100):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/stall-read"), (":scheme", "http"),
                                (":authority", "x"), ("content-length", str(100 << 20))])
        sids.append(sid)
    cl.flush()
    chunk = b"u" * 16384
    sent = 0
    deadline = time.monotonic() + 4
    cl.s.setblocking(False)
    while time.monotonic() < deadline:
        progressed = False
        for sid in sids:
            w = min(cl.c.local_flow_control_window(sid), len(chunk))
            if w > 0:
                cl.c.send_data(sid, chunk[:w])
                sent += w
                progressed = True
        try:
            cl.s.sendall(cl.c.data_to_send())
            data = cl.s.recv(65536)
            if data:
                cl.c.receive_data(data)
        except BlockingIOError:
            pass
        if not progressed:
            time.sleep(0.05)
    grown = rss_kib(g.proc.pid) - before
    # the gateway grants window only for bytes written to the (stalled) origin sockets: what
    # it accepted is what the kernel's socket buffers took, far from the 10 GiB offered
    print(f"slow origin: {sent} bytes accepted, RSS grew {grown} KiB")
    assert sent < 100 * (4 << 20), sent
    assert grown < 100 * 64 + 24 * 1024, f"RSS grew {grown} KiB after {sent} bytes sent"
    cl.s.setblocking(True)
    cl.close()
