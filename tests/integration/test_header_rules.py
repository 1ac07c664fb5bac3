"""Header rules (request_headers, response_headers), hsts, origin_host and strip_prefix, seen
from outside: curl and python3-h2 as clients, the scripted origin recording what it receives.

The top level's rules apply first, then the route's; request rules run after the gateway's own
forwarding fields are made, so a field a client forged never reaches the origin when a rule
removes or sets it."""
import subprocess

import h2.events

from procs import free_port
from gwtest import Client, ended, tls_listener


def config(port, origin_port, tls_port=None, hsts=True, log="/dev/null"):
    # an access log, so that requests have an id ($request_id)
    lines = ["workers: 1", "log_level: info", f"access_log: {{path: {log}}}", "listen:"]
    if tls_port:
        lines += tls_listener(tls_port)
        if hsts:
            lines += ["    hsts: {max_age: 31536000, include_subdomains: true, preload: true}"]
    lines += [f"  - address: 127.0.0.1:{port}",
              "upstreams:", "  app:", f"    servers: [127.0.0.1:{origin_port}]",
              "request_headers:",
              "  set: {X-Top: top-level}",
              "  remove: [X-Secret]",
              "response_headers:",
              "  add: {X-Frame-Options: DENY}",
              "routes:",
              "  - host: '*'",
              "    path: /api",
              "    upstream: app",
              "    strip_prefix: /api",
              "    origin_host: backend.internal:8080",
              "    request_headers:",
              "      set: {X-Client: '$client_addr $scheme ${host}', X-Forwarded-Proto: edge}",
              "      add: {X-Id: $request_id, X-Verify: '[$tls_client_verify]'}",
              "      remove: [X-Drop-Me]",
              "    response_headers:",
              "      set: {Cache-Control: no-store}",
              "      remove: [X-Internal, X-Frame-Options]",
              "  - {host: '*', path: /limited, upstream: app, request_rate: 1, request_burst: 1,",
              "     response_headers: {set: {X-Limited: 'yes'}}}",
              "  - host: '*'",
              "    path: /fixed",
              "    upstream: app",
              "    respond: {status: 200, body: fixed}",
              "  - { host: '*', path: /, upstream: app }"]
    return "\n".join(lines) + "\n"


def curl(url, *args):
    r = subprocess.run(["curl", "-sk", "-D", "-", "-o", "/dev/null", *args, url],
                       capture_output=True, text=True, timeout=10)
    lines = r.stdout.replace("\r", "").split("\n")
    fields = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            fields.setdefault(k.strip().lower(), []).append(v.strip())
    return lines[0], fields


def test_request_rules_reach_the_origin_and_forged_fields_do_not(gateway, origin):
    port = free_port()
    gateway(config(port, origin.port), wait=[("127.0.0.1", port)])
    status, resp = curl(f"http://127.0.0.1:{port}/api/echo?q=1", "-H", "X-Secret: forged",
                        "-H", "X-Client: forged", "-H", "X-Drop-Me: 1", "-H", "X-Top: forged",
                        "-H", "X-Forwarded-Proto: https", "-H", "X-Keep: yes")
    assert " 200" in status, status
    req = origin.requests[-1]
    assert req.target == "/echo?q=1"  # strip_prefix
    assert req.header("host") == "backend.internal:8080"  # origin_host
    assert req.header("x-forwarded-host") == f"127.0.0.1:{port}"  # the client's host kept
    assert req.header("x-client") == f"127.0.0.1 http 127.0.0.1:{port}"
    assert req.header("x-secret") is None and req.header("x-drop-me") is None
    assert req.header("x-top") == "top-level"
    assert req.header("x-forwarded-proto") == "edge"
    assert req.header("x-verify") == "[]"  # cleartext: no certificate fields
    assert req.header("x-keep") == "yes"
    assert req.header("x-id") == resp["x-request-id"][0]


def test_strip_prefix_cuts_whole_segments_only(gateway, origin):
    port = free_port()
    gateway(config(port, origin.port), wait=[("127.0.0.1", port)])
    for path, want in [("/api", "/"), ("/api?x=1", "/?x=1"), ("/api/a/b", "/a/b"),
                       ("/apix", "/apix")]:
        curl(f"http://127.0.0.1:{port}{path}")
        assert origin.requests[-1].target == want, (path, origin.requests[-1].target)


def test_request_rules_over_h2_with_a_forged_field(gateway, origin):
    port = free_port()
    gateway(config(port, origin.port), wait=[("127.0.0.1", port)])
    cl = Client(port)
    sid = cl.request("/api/echo", extra=[("x-secret", "forged"), ("x-top", "forged")])
    evs = cl.events(ended(sid))
    assert any(isinstance(e, h2.events.StreamEnded) for e in evs), evs
    req = origin.requests[-1]
    assert req.target == "/echo"
    assert req.header("x-secret") is None and req.header("x-top") == "top-level"
    assert req.header("x-client") == "127.0.0.1 http localhost"
    cl.close()


def test_response_rules_on_origin_answers_and_gateway_answers(gateway, origin):
    port = free_port()
    gateway(config(port, origin.port), wait=[("127.0.0.1", port)])
    # the route's rules after the top level's: its remove takes back the top level's add
    status, f = curl(f"http://127.0.0.1:{port}/api/text/10?h=X-Internal:secret")
    assert " 200" in status
    assert f["cache-control"] == ["no-store"]
    assert "x-internal" not in f and "x-frame-options" not in f
    # another route: the top level's rules alone, on the origin's answer
    status, f = curl(f"http://127.0.0.1:{port}/text/10?h=X-Internal:kept")
    assert f["x-frame-options"] == ["DENY"] and f["x-internal"] == ["kept"]
    # the gateway's own answers on a route (respond, 429) get them too
    status, f = curl(f"http://127.0.0.1:{port}/fixed")
    assert " 200" in status and f["x-frame-options"] == ["DENY"]
    for _ in range(2):
        status, f = curl(f"http://127.0.0.1:{port}/limited/text/1")
        assert f["x-limited"] == ["yes"] and f["x-frame-options"] == ["DENY"]
    assert " 429" in status


def test_hsts_on_tls_only_including_gateway_answers(gateway, origin):
    port, tls_port = free_port(), free_port()
    gateway(config(port, origin.port, tls_port=tls_port),
            wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    want = ["max-age=31536000; includeSubDomains; preload"]
    # the origin's own value is replaced by the listener's
    for url in [f"https://127.0.0.1:{tls_port}/text/5?h=Strict-Transport-Security:max-age=1",
                f"https://127.0.0.1:{tls_port}/fixed"]:
        for proto in ["--http1.1", "--http2"]:
            status, f = curl(url, proto)
            assert f.get("strict-transport-security") == want, (url, proto, f)
    status, f = curl(f"http://127.0.0.1:{port}/fixed")
    assert " 200" in status and "strict-transport-security" not in f
