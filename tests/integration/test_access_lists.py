"""Per-route access lists (`allow`, `deny`): a client whose address is in deny, or outside a
given allow, gets the gateway's 403 and the origin never hears of the request. Deny wins over
allow; a bare address is one host; IPv4 and IPv6 clients (the gateway also listens on [::1]), IPv4-mapped ones checked as IPv4;
the address that decides is the one the PROXY protocol names. curl (HTTP/1.1 and h2c) and
python3-h2 are the clients."""
import socket
import subprocess

import h2.events

from procs import free_port, recv_all
from gwtest import Client, check_config, gw_config, response

# the origin answers /status/200/... with a 200
ROUTES = """\
  - {path: /status/200/open, upstream: app}
  - {path: /status/200/v4only, upstream: app, allow: [127.0.0.0/8]}
  - {path: /status/200/v6only, upstream: app, allow: ['::1']}
  - {path: /status/200/not-me, upstream: app, deny: [127.0.0.1, '::1/128']}
  - {path: /status/200/both, upstream: app, allow: [127.0.0.0/8, '::1'], deny: 127.0.0.1}
  - {path: /status/200/wide, upstream: app, allow: [10.0.0.0/8, '2001:db8::/32'],
     deny: '2001:db8:1::/48'}
"""
P = "/status/200"


def acl_gateway(gateway, origin, proxy_protocol=False, routes=""):
    port, port6 = free_port(), free_port(socket.AF_INET6, "::1")
    pp = "\n    proxy_protocol: true\n    proxy_protocol_from: [127.0.0.0/8]" if proxy_protocol else ""
    text = (f"workers: 1\nlog_level: info\nlisten:\n  - address: 127.0.0.1:{port}{pp}\n"
            f"  - address: '[::1]:{port6}'\n"
            f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin.port}]\nroutes:\n{ROUTES}{routes}")
    g = gateway(text, wait=[("127.0.0.1", port), ("::1", port6)])
    g.port, g.port6 = port, port6
    return g


def curl_status(url, *flags):
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
                        *flags, url], capture_output=True, text=True)
    return r.stdout


def test_allow_and_deny_for_ipv4_and_ipv6_clients_deny_wins(gateway, origin):
    g = acl_gateway(gateway, origin)
    v4, v6 = f"http://127.0.0.1:{g.port}", f"http://[::1]:{g.port6}"
    want = {"/open": ("200", "200"), "/v4only": ("200", "403"), "/v6only": ("403", "200"),
            "/not-me": ("403", "403"), "/both": ("403", "200"), "/wide": ("403", "403")}
    for proto in ("--http1.1", "--http2-prior-knowledge"):
        for path, (s4, s6) in want.items():
            got = (curl_status(f"{v4}{P}{path}", proto), curl_status(f"{v6}{P}{path}", proto))
            assert got == (s4, s6), (proto, path, got)
    # the refused requests never reached the origin; the allowed ones did
    seen = [r.target[len(P):] for r in origin.requests]
    assert seen.count("/v4only") == 2 and seen.count("/v6only") == 2 and seen.count("/both") == 2
    assert "/not-me" not in seen and "/wide" not in seen
    log = g.log()
    assert "event=access_denied peer=127.0.0.1:" in log, log
    assert "route=*/status/200/v6only status=403" in log, log
    assert "event=access_denied peer=[::1]:" in log or "event=access_denied peer=::1" in log, log


def test_403_body_and_h2_request_with_a_body_refused_cleanly(gateway, origin):
    """Over h2, a POST whose body is still coming gets the 403 then RST_STREAM(NO_ERROR)
    (RFC 9113 §8.1); the connection goes on serving other streams."""
    g = acl_gateway(gateway, origin)
    cl = Client(g.port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", P + "/v6only"), (":scheme", "http"),
                            (":authority", "localhost"), ("content-length", "100000")])
    cl.c.send_data(sid, b"x" * 1000)
    cl.flush()
    evs = cl.events(lambda e: any(isinstance(x, h2.events.StreamReset) for x in e))
    status, body, _ = response(evs, sid)
    assert status == "403" and body == b"h2gate: access denied\n", evs
    resets = [e for e in evs if isinstance(e, h2.events.StreamReset)]
    assert resets[0].stream_id == sid and resets[0].error_code == 0, evs
    sid2 = cl.request(P + "/open")
    evs = cl.events(lambda e: any(isinstance(x, h2.events.StreamEnded) and x.stream_id == sid2
                                  for x in e))
    assert response(evs, sid2)[0] == "200"
    cl.close()
    assert [r.target for r in origin.requests] == [P + "/open"]


def pp_get(port, header, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(header + f"GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
    out = recv_all(s, resets_end=True)
    s.close()
    return out.split(b"\r\n", 1)[0]


def test_the_proxy_protocol_address_decides(gateway, origin):
    """The balancer is 127.0.0.1 (allowed by /v4only); the client it names decides."""
    g = acl_gateway(gateway, origin, proxy_protocol=True)
    def v1(src):
        return f"PROXY {'TCP6' if ':' in src else 'TCP4'} {src} {src} 5000 80\r\n".encode()
    assert pp_get(g.port, b"", P + "/v4only") == b""  # no header: closed
    assert pp_get(g.port, v1("10.9.8.7"), P + "/wide").startswith(b"HTTP/1.1 200")
    assert pp_get(g.port, v1("192.0.2.1"), P + "/v4only").startswith(b"HTTP/1.1 403")
    assert pp_get(g.port, v1("2001:db8:2::1"), P + "/wide").startswith(b"HTTP/1.1 200")
    assert pp_get(g.port, v1("2001:db8:1::1"), P + "/wide").startswith(b"HTTP/1.1 403")
    assert pp_get(g.port, v1("::1"), P + "/v6only").startswith(b"HTTP/1.1 200")
    # an IPv4-mapped IPv6 client (the gateway's listeners are IPV6_V6ONLY: only a PROXY header
    # names one) is checked as the IPv4 address it holds
    assert pp_get(g.port, v1("::ffff:10.9.8.7"), P + "/wide").startswith(b"HTTP/1.1 200")
    assert pp_get(g.port, v1("::ffff:192.0.2.1"), P + "/wide").startswith(b"HTTP/1.1 403")
    log = g.log()
    assert "event=access_denied peer=192.0.2.1:5000" in log, log


def test_ten_thousand_entries(gateway, origin):
    """10,000 host entries (every other address of 198.18.0.0/15 from .0.0 on) load with the
    gateway and decide each client: in the list 403, its neighbour outside it 200."""
    hosts = [f"198.18.{i // 128}.{2 * (i % 128)}" for i in range(10000)]
    g = acl_gateway(gateway, origin, proxy_protocol=True,
                    routes=f"  - {{path: /status/200/big, upstream: app, deny: [{', '.join(hosts)}]}}\n")

    def v1(src):
        return f"PROXY TCP4 {src} 127.0.0.1 5000 80\r\n".encode()
    for h in (hosts[0], hosts[4321], hosts[-1]):
        assert pp_get(g.port, v1(h), P + "/big").startswith(b"HTTP/1.1 403"), h
        a, b, c, d = h.split(".")
        assert pp_get(g.port, v1(f"{a}.{b}.{c}.{int(d) + 1}"), P + "/big").startswith(
            b"HTTP/1.1 200"), h


def test_bad_networks_are_refused_at_load(h2gate_bin, tmp_path):
    base = gw_config(free_port(), ["127.0.0.1:9"])
    for key, want in (("allow: [10.0.0.0/8, 10.0.0.1/8]", ":25: 'allow' entry '10.0.0.1/8' has "
                       "bits set past its prefix length: write 10.0.0.0/8"),
                      ("deny: ['2001:db8::/129']", ":12: 'deny' entry '2001:db8::/129': the "
                       "prefix length must be 0..128 for IPv6")):
        r = check_config(h2gate_bin, tmp_path, base + f"    {key}\n")
        line = base.count("\n") + 1
        assert r.returncode == 1 and f"{tmp_path / 'c.yaml'}:{line}{want}" in r.stderr, r.stderr


def test_a_host_route_decides_an_h2_request_that_names_it_by_host(gateway, origin):
    """RFC 9113 §8.3.1: an HTTP/2 request without :authority names its origin by Host, and
    that Host is what the origin is told. It was routed as if it named no host at all: the
    catch-all route took it, past the access list of the route of its host, and the origin
    got `Host: admin.test` from a client that route denies."""
    g = acl_gateway(gateway, origin, routes=(
        "  - {host: admin.test, path: /status/200/, upstream: app, deny: [127.0.0.1, '::1']}\n"
        "  - {path: /, upstream: app}\n"))
    cl = Client(g.port, validate=False)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", P + "/admin"), (":scheme", "http"),
                            ("host", "admin.test")], end_stream=True)
    cl.flush()
    evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamEnded, h2.events.StreamReset))
                                  for x in e))
    cl.close()
    assert response(evs, sid)[0] == "403", evs
    assert [r.target for r in origin.requests] == [], origin.requests


def test_a_path_an_origin_reads_as_a_denied_routes_is_refused(gateway, origin):
    """RFC 3986 §5.2.4, §6.2.2: routes match the target's bytes, but an origin may remove dot
    segments, merge slashes, cut Tomcat's ";" parameters or decode %61 and %2F before it
    routes: "/status/200/open/../v4only" took the open route, past v4only's access list, and
    the origin was asked for what it reads as the denied page. A path that routes elsewhere once
    read so is a 400; one that stays on its route is passed on as written."""
    g = acl_gateway(gateway, origin, routes="  - {path: /, upstream: app}\n")
    denied = P + "/v6only"  # the client is 127.0.0.1
    bypasses = [P + "/open/../v6only", P + "/open/./../v6only/x", P + "/open/%2e%2E/v6only",
                P + "/open/.%2e/v6only?q", P + "/open/..;/v6only", P + "/open/..;x=1/v6only",
                P + "//v6only", P + "/%76%36only", P + "%2Fv6only", P + "/open%2F..%2Fv6only",
                "/x/y/../../" + P[1:] + "/v6only"]
    for path in bypasses:
        status = pp_get(g.port, b"", path)
        assert status.startswith(b"HTTP/1.1 400"), (path, status)
        cl = Client(g.port)
        sid = cl.request(path)
        evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamEnded,
                                                     h2.events.StreamReset)) for x in e))
        cl.close()
        assert response(evs, sid)[0] == "400", (path, evs)
    assert pp_get(g.port, b"", denied).startswith(b"HTTP/1.1 403")
    assert origin.requests == [], [r.target for r in origin.requests]
    # the same forms that stay on their route reach the origin as the client wrote them
    kept = [P + "/open/../open/x", P + "/open/.;p/x", P + "/open//x", "/a/../b", "/%61"]
    for path in kept:
        assert pp_get(g.port, b"", path).split(b" ")[1] != b"400", path
    assert [r.target for r in origin.requests] == kept
    assert "event=ambiguous_path peer=127.0.0.1:" in g.log()


def test_a_network_written_ipv4_mapped_holds_for_ipv4_clients(gateway, origin):
    """RFC 4291 §2.5.5.2: ::ffff:192.0.2.1 is the IPv4 client 192.0.2.1, which a balancer names
    as TCP4 or TCP6 as it likes. A mapped client was checked against IPv4 and IPv6 entries, a
    plain IPv4 client against the IPv4 ones only: `deny: '::ffff:192.0.2.0/120'` let 192.0.2.1
    through when it came as TCP4, and an allow entry so written refused it."""
    g = acl_gateway(gateway, origin, proxy_protocol=True, routes=(
        "  - {path: /status/200/mdeny, upstream: app, deny: '::ffff:192.0.2.0/120'}\n"
        "  - {path: /status/200/mallow, upstream: app, allow: '::ffff:10.9.8.7'}\n"))
    def v1(src):
        return f"PROXY {'TCP6' if ':' in src else 'TCP4'} {src} {src} 5000 80\r\n".encode()
    for src in ("192.0.2.1", "::ffff:192.0.2.1"):
        assert pp_get(g.port, v1(src), P + "/mdeny").startswith(b"HTTP/1.1 403"), src
        assert pp_get(g.port, v1(src), P + "/mallow").startswith(b"HTTP/1.1 403"), src
    for src in ("10.9.8.7", "::ffff:10.9.8.7"):
        assert pp_get(g.port, v1(src), P + "/mdeny").startswith(b"HTTP/1.1 200"), src
        assert pp_get(g.port, v1(src), P + "/mallow").startswith(b"HTTP/1.1 200"), src


def test_a_host_written_with_its_root_dot_takes_its_route(gateway, origin):
    """RFC 1034 §3.1, RFC 3986 §3.2.2: "admin.test." is the absolute form of "admin.test", and
    origins (nginx among them) read it so. It took the catch-all route, past admin.test's
    access list, and the origin got `Host: admin.test.`."""
    g = acl_gateway(gateway, origin, routes=(
        "  - {host: admin.test, path: /status/200/, upstream: app, deny: [127.0.0.1, '::1']}\n"
        "  - {host: '*.wild.test', path: /status/200/, upstream: app, deny: 127.0.0.1}\n"
        "  - {path: /, upstream: app}\n"))
    for host in ("admin.test.", "ADMIN.test.:80", "a.wild.test."):
        s = socket.create_connection(("127.0.0.1", g.port), timeout=5)
        s.sendall(f"GET {P}/x HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        head = recv_all(s, resets_end=True).split(b"\r\n", 1)[0]
        s.close()
        assert head.startswith(b"HTTP/1.1 403"), (host, head)
        cl = Client(g.port)
        sid = cl.request(P + "/x", authority=host)
        evs = cl.events(lambda e: any(isinstance(x, (h2.events.StreamEnded,
                                                     h2.events.StreamReset)) for x in e))
        cl.close()
        assert response(evs, sid)[0] == "403", (host, evs)
    assert origin.requests == [], [(r.target, r.header("host")) for r in origin.requests]


def test_a_route_path_an_origin_reads_otherwise_is_refused_at_load(h2gate_bin, tmp_path):
    """Every request of a route whose own path reads otherwise (`/a//b`, `/a/./b`, `/a%2Fb`,
    `/a;p/`, `/%61`) would be refused as naming another route: such a path is a load error
    that names the path to write."""
    base = gw_config(free_port(), ["127.0.0.1:9"])
    for path, reads in (("/a//b", "/a/b"), ("/a/./b/", "/a/b/"), ("/a%2Fb", "/a/b"),
                        ("/a;p/", "/a/"), ("/%61", "/a"), ("/a/..", "/")):
        r = check_config(h2gate_bin, tmp_path,
                         base + f"  - {{path: '{path}', upstream: app}}\n")
        assert r.returncode == 1 and f"route path '{path}' reads as '{reads}'" in r.stderr, \
            (path, r.stderr)
    for path in ("/", "/api", "/api/", "/.well-known/x", "/a~b/", "/a.b/c"):
        r = check_config(h2gate_bin, tmp_path,
                         base + f"  - {{path: '{path}', upstream: app}}\n")
        assert r.returncode == 0, (path, r.stderr)
