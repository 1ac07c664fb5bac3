"""error_pages: the gateway's own answers (404 no route, 429, 502 dead origin, 504 slow
origin, 503 max_tunnels, 403 access list) carry the configured page as their body, with the
Content-Type its file name gives and its length, over HTTP/1.1 and h2 (curl), the route's map
before the top level's; intercept_errors puts the page in place of an origin 5xx body (status
and the other fields kept, HEAD too); a SIGHUP reads the files again, and a file past
error_page_max is refused with FILE:LINE:COL (at start and at reload)."""
import re
import signal
import subprocess
import time

from procs import free_port
from gwtest import check_config

PAGES = {
    "404.html": b"<h1>nothing here</h1>\n",
    "429.json": b'{"error": "slow down"}\n',
    "502.txt": b"the origin is down\n",
    "own502.json": b'{"route": "own"}',
    "503.html": b"<!doctype html><title>busy</title><p id=m>We are busy, come back soon</p>\n",
    "504.html": b"<p>too slow</p>\n",
    "403.htm": b"<p>not for you</p>\n",
    "500.bin": b"\x00binary\xff",
}
TYPES = {"html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8",
         "json": "application/json", "txt": "text/plain; charset=utf-8",
         "bin": "application/octet-stream"}


def pages_config(tmp_path, port, origin_port, extra=""):
    for name, body in PAGES.items():
        (tmp_path / name).write_bytes(body)
    p = lambda n: tmp_path / n  # noqa: E731
    return f"""workers: 1
log_level: info
listen:
  - address: 127.0.0.1:{port}
limits: {{max_tunnels: 0}}
upstreams:
  app: {{servers: [127.0.0.1:{origin_port}], response_timeout: 300ms}}
  dead: {{servers: [127.0.0.1:9], health: {{fail_threshold: 1000}}}}
routes:
  - {{path: /limited, upstream: app, request_rate: 1, request_burst: 1}}
  - {{path: /dead-own, upstream: dead, error_pages: {{502: {p('own502.json')}}}}}
  - {{path: /dead, upstream: dead}}
  - {{path: /hang, upstream: app}}
  - {{path: /ws, upstream: app}}
  - {{path: /denied, upstream: app, deny: [127.0.0.1]}}
  - {{host: plain.test, path: /status, upstream: app}}
  - {{path: /status, upstream: app, intercept_errors: true, error_pages: {{500: {p('500.bin')}}}}}
  - {{path: /push-page, upstream: app, intercept_errors: true}}
error_pages:
  404: {p('404.html')}
  429: {p('429.json')}
  502: {p('502.txt')}
  503: {p('503.html')}
  504: {p('504.html')}
  403: {p('403.htm')}
{extra}"""


def curl(url, *flags):
    """(status, {lowercase name: value}, body) of one exchange with curl."""
    r = subprocess.run(["curl", "-s", "-i", "--max-time", "5", *flags, url], capture_output=True)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        fields[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), fields, body


def assert_page(got, status, name, proto):
    st, f, body = got
    assert st == status, (proto, got)
    assert body == PAGES[name], (proto, got)
    assert f["content-type"] == TYPES[name.rsplit(".", 1)[1]], (proto, f)
    assert f["content-length"] == str(len(PAGES[name])), (proto, f)


def test_gateway_answers_carry_the_error_pages(gateway, origin, tmp_path):
    port = free_port()
    gateway(pages_config(tmp_path, port, origin.port), wait=[("127.0.0.1", port)])
    base = f"http://127.0.0.1:{port}"
    for proto in ("--http1.1", "--http2-prior-knowledge"):
        assert_page(curl(base + "/dead", proto), 502, "502.txt", proto)
        assert_page(curl(base + "/dead-own", proto), 502, "own502.json", proto)  # the route's
        assert_page(curl(base + "/hang", proto), 504, "504.html", proto)
        assert_page(curl(base + "/denied", proto), 403, "403.htm", proto)
        got = curl(base + "/limited", proto)
        if got[0] != 429:  # the first of the run spends the token
            got = curl(base + "/limited", proto)
        assert_page(got, 429, "429.json", proto)
        assert got[1]["retry-after"].isdigit()
        # HEAD: the page's length, no body
        st, f, body = curl(base + "/dead", proto, "-I")
        assert (st, f["content-length"], body) == (502, str(len(PAGES["502.txt"])), b""), proto
    # no route: a path no route has (the top level's page)
    for proto in ("--http1.1", "--http2-prior-knowledge"):
        assert_page(curl(base + "/nowhere", proto), 404, "404.html", proto)
    ws = ("-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H",
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Sec-WebSocket-Version: 13")
    assert_page(curl(base + "/ws", "--http1.1", *ws), 503, "503.html", "h1")


def test_intercept_errors_replaces_origin_5xx_bodies(gateway, origin, tmp_path):
    port = free_port()
    gateway(pages_config(tmp_path, port, origin.port), wait=[("127.0.0.1", port)])
    base = f"http://127.0.0.1:{port}"
    fields = "?h=ETag:%22v1%22&h=X-Origin:kept&h=Content-Type:text/plain&h=Last-Modified:x"
    for proto in ("--http1.1", "--http2-prior-knowledge"):
        got = curl(base + "/status/503" + fields, proto)
        assert_page(got, 503, "503.html", proto)
        assert got[1]["x-origin"] == "kept" and "etag" not in got[1], got
        assert "last-modified" not in got[1], got
        assert_page(curl(base + "/status/500", proto), 500, "500.bin", proto)  # the route's
        # HEAD: the page's length, no body
        st, f, body = curl(base + "/status/503", proto, "-I")
        assert (st, f["content-length"], body) == (503, str(len(PAGES["503.html"])), b""), proto
        assert f["content-type"] == TYPES["html"]
        # a status without a page, a success, and a route without intercept_errors: as sent
        assert curl(base + "/status/507", proto)[2] == b"status 507\n"
        assert curl(base + "/status/200", proto)[2] == b"status 200\n"
        assert curl(base + "/status/503", proto, "-H", "Host: plain.test")[2] == b"status 503\n"
    # identical requests at once over one h2 connection, coalesced (the origin takes 150 ms and
    # says its 503 may be shared): one origin request, the page to each of them
    url = base + "/push-page/150?s=503&h=Cache-Control:public,%20max-age=60"
    r = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "--parallel",
                        "--parallel-immediate", "-w", "%{http_code}\n"] + [url] * 4,
                       capture_output=True)
    assert r.stdout.count(PAGES["503.html"]) == 4, r.stdout
    assert r.stdout.replace(PAGES["503.html"], b"").split() == [b"503"] * 4, r.stdout
    assert sum(q.target.startswith("/push-page/") for q in origin.requests) == 1


def test_reload_reads_the_pages_again_and_the_cap_holds(gateway, origin, tmp_path):
    port = free_port()
    g = gateway(pages_config(tmp_path, port, origin.port), wait=[("127.0.0.1", port)])
    base = f"http://127.0.0.1:{port}"
    assert curl(base + "/dead")[2] == PAGES["502.txt"]
    (tmp_path / "502.txt").write_bytes(b"changed\n")
    g.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while curl(base + "/dead")[2] != b"changed\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert curl(base + "/dead")[2] == b"changed\n"
    # a page past error_page_max: the reload is refused at the file's name, the old pages stay
    with open(g.config_path, "a") as f:
        f.write("error_page_max: 100\n")
    (tmp_path / "504.html").write_bytes(b"x" * 101)
    g.signal(signal.SIGHUP)
    log = g.wait_log("event=reload_failed")
    line = next(i + 1 for i, l in enumerate(open(g.config_path).read().split("\n"))
                if l.startswith("  504:"))
    assert re.search(re.escape(g.config_path) + f":{line}:8: error page '.*504.html' has 101 "
                     r"bytes, more than error_page_max \(100\)", log), log
    assert curl(base + "/hang")[2] == PAGES["504.html"]
    # at start the same file is refused the same way (h2gate --check-config)
    r = check_config(g.proc.args[0], tmp_path, open(g.config_path).read())
    assert r.returncode == 1 and "more than error_page_max (100)" in r.stderr, r.stderr
    # and 101 bytes are allowed when the cap says so
    r = check_config(g.proc.args[0], tmp_path,
                     open(g.config_path).read().replace("error_page_max: 100", "error_page_max: 101"))
    assert r.returncode == 0, r.stderr
