"""HTTP/2 server push (RFC 9113 §8.4): a route with `push: true` promises the
same-origin `Link: <path>; rel=preload` targets of a 2xx answer to a GET. nghttp (which accepts
push) and python3-h2 clients; every limit has a test."""
import re
import struct
import subprocess
import time
import urllib.parse

import h2.events
import h2.settings
import pytest

from procs import free_port, h1_get, slow
from gwtest import (Client, Streams, collect, gw_config, origin_gateway, sample, scrape,
                    wait_origin_has, wait_sample)
from origin import pattern


def pgw(gateway, origin, route_extra="push: true", extra="", admin=None):
    return origin_gateway(gateway, origin, route_extra, extra, admin)


def page(ms=0, targets=(), links=(), status=None):
    """The origin's /push-page path preloading targets (rel=preload; as=style), plus more Link
    values given whole."""
    q = [f"p={urllib.parse.quote(t, safe='/')}" for t in targets]
    # origin.py finds h= values by their raw ':'
    q += [f"h={urllib.parse.quote('Link:' + l, safe=':/')}" for l in links]
    if status:
        q.append(f"s={status}")
    return f"/push-page/{ms}" + ("?" + "&".join(q) if q else "")


def page_body():
    return b"<!doctype html><title>push</title>" + b"y" * 500


def all_ended(sids):
    """until= for collect(): sids() (evaluated as promises arrive) is not empty and done."""
    return lambda r: all(r.done(s) for s in sids()) and sids()


def fetch(port, path, settings=None, extra=(), cl=None, timeout=10):
    """GET path on one h2c connection (a new one unless cl), waiting for it and every push."""
    own = cl is None
    cl = cl or Client(port)
    if settings:
        cl.c.update_settings(settings)
        cl.flush()
    sid = cl.request(path, extra=list(extra))
    run = Streams()
    collect(cl, run, all_ended(lambda: [sid] + list(run.promises)), timeout)
    run.sid = sid
    if own:
        cl.close()
    return run


def promised_paths(run):
    return sorted(dict(h)[":path"] for _, h in run.promises.values())


def origin_paths(origin):
    return [r.target for r in origin.requests]


# ---- the promise and the pushed response ---------------------------------------------------------

def test_python_h2_receives_promise_and_pushed_body(gateway, origin):
    g = pgw(gateway, origin)
    run = fetch(g.port, page(0, ["/bytes/70000"]),
                extra=[("accept", "text/html"), ("accept-encoding", "identity"),
                       ("accept-language", "fr"), ("user-agent", "pytest-h2/1"),
                       ("cookie", "secret=1"), ("x-other", "no")])
    assert run.heads[run.sid][0] == (":status", "200")
    assert run.bodies[run.sid] == page_body()
    assert len(run.promises) == 1
    (pid, (parent, hdrs)), = run.promises.items()
    assert parent == run.sid and pid % 2 == 0
    # GET, the path, the parent's :authority and :scheme, its accept, accept-encoding,
    # accept-language and user-agent; nothing else of the parent's request (no cookie)
    assert hdrs == [(":method", "GET"), (":scheme", "http"), (":authority", "localhost"),
                    (":path", "/bytes/70000"), ("accept", "text/html"),
                    ("accept-encoding", "identity"), ("accept-language", "fr"),
                    ("user-agent", "pytest-h2/1")]
    assert dict(run.heads[pid])[":status"] == "200"
    assert run.bodies[pid] == pattern(70000)  # byte-exact, over several DATA frames
    assert pid in run.ended
    # the promise precedes every frame of the parent's response (RFC 9113 §8.4.1)
    assert run.order.index(("promise", pid)) < run.order.index(("head", run.sid))
    # the origin saw the pushed request like any other, with the copied fields
    pushed = [r for r in origin.requests if r.target == "/bytes/70000"]
    assert len(pushed) == 1
    assert pushed[0].method == "GET"
    assert pushed[0].header("user-agent") == "pytest-h2/1"
    assert pushed[0].header("accept-language") == "fr"
    assert pushed[0].header("cookie") is None


def test_nghttp_receives_push_byte_exact(gateway, origin):
    g = pgw(gateway, origin)
    url = f"http://127.0.0.1:{g.port}" + page(0, ["/bytes/40000"])
    v = subprocess.run(["nghttp", "-nv", url], capture_output=True, text=True, timeout=30)
    assert v.returncode == 0, v.stdout + v.stderr
    assert re.search(r"recv PUSH_PROMISE frame <length=\d+, flags=0x04, stream_id=13>", v.stdout)
    assert "promised_stream_id=2" in v.stdout
    assert re.search(r"recv \(stream_id=13\) :path: /bytes/40000", v.stdout)
    assert "First push response header" in v.stdout
    # without -n nghttp writes every body it gets, the pushed one too
    out = subprocess.run(["nghttp", url], capture_output=True, timeout=30).stdout
    assert out in (page_body() + pattern(40000), pattern(40000) + page_body())
    # a client that disables push (SETTINGS_ENABLE_PUSH = 0) gets none
    before = len([r for r in origin.requests if r.target == "/bytes/40000"])
    n = subprocess.run(["nghttp", "-nv", "--no-push", url], capture_output=True, text=True,
                       timeout=30)
    assert "PUSH_PROMISE" not in n.stdout
    assert len([r for r in origin.requests if r.target == "/bytes/40000"]) == before


def test_enable_push_zero_pushes_nothing(gateway, origin):
    g = pgw(gateway, origin)
    run = fetch(g.port, page(0, ["/bytes/100", "/bytes/200"]),
                settings={h2.settings.SettingCodes.ENABLE_PUSH: 0})
    assert run.bodies[run.sid] == page_body()
    assert run.promises == {}
    time.sleep(0.2)
    assert not any(t.startswith("/bytes/") for t in origin_paths(origin))


def test_which_links_are_pushed(gateway, origin):
    g = pgw(gateway, origin)
    links = ["</b.js>; rel=preload; as=script; nopush",  # nopush: preload only
             "</m.mjs>; rel=modulepreload",  # not rel=preload
             "</p.html>; rel=prefetch",
             "<//localhost/bytes/11>; rel=preload",  # same authority
             "<http://LOCALHOST/bytes/12>; rel=preload",  # same scheme and authority
             "<http://other.example/bytes/13>; rel=preload",  # another authority
             "<https://localhost/bytes/14>; rel=preload",  # another scheme
             "<bytes/15>; rel=preload",  # relative reference
             "</bytes/16#frag>; rel=\"preload stylesheet\"",  # fragment dropped, rel list
             "</bytes/10>; rel=preload",  # a duplicate of a target: promised once
             "<http://localhost:80/bytes/17>; rel=preload",  # the scheme's default port
             "<http://localhost:080/bytes/18>; rel=preload",  # the same port, spelled longer
             "<http://localhost:8080/bytes/19>; rel=preload"]  # another port
    run = fetch(g.port, page(0, ["/bytes/10"], links))
    assert promised_paths(run) == ["/bytes/10", "/bytes/11", "/bytes/12", "/bytes/16",
                                   "/bytes/17", "/bytes/18"]
    for pid, (_, hdrs) in run.promises.items():
        n = int(dict(hdrs)[":path"].split("/")[2])
        assert run.bodies[pid] == pattern(n)


def test_a_link_to_the_same_ipv6_address_spelled_otherwise_is_pushed(gateway, origin):
    """A page asked for at [::1] preloads the same origin written [0:0::1], [::0001]:80 and
    [::1]:80 (RFC 4291 §2.2, RFC 3986 §6.2.3): pushed; [::2] and [::1]:8080 are other origins."""
    g = pgw(gateway, origin)
    links = ["<http://[0:0::1]/bytes/21>; rel=preload",
             "<http://[::0001]:80/bytes/22>; rel=preload",
             "<//[::1]:80/bytes/23>; rel=preload",
             "<http://[::2]/bytes/24>; rel=preload",
             "<http://[::1]:8080/bytes/25>; rel=preload"]
    cl = Client(g.port)
    sid = cl.request(page(0, (), links), authority="[::1]")
    run = Streams()
    collect(cl, run, all_ended(lambda: [sid] + list(run.promises)), 10)
    cl.close()
    assert dict(run.heads[sid])[":status"] == "200"
    assert promised_paths(run) == ["/bytes/21", "/bytes/22", "/bytes/23"]
    for pid, (_, hdrs) in run.promises.items():
        assert dict(hdrs)[":authority"] == "[::1]"
        assert run.bodies[pid] == pattern(int(dict(hdrs)[":path"].split("/")[2]))


@pytest.mark.parametrize("case", ["404", "head", "post", "route-off", "listener-off", "h1"])
def test_no_push_where_it_does_not_apply(gateway, origin, case):
    route_extra = "push: false" if case == "route-off" else "push: true"
    if case == "listener-off":
        # the client's listener says push: false (another one allows it)
        port, other = free_port(), free_port()
        cfg = gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra=route_extra)
        cfg = cfg.replace(f"  - address: 127.0.0.1:{port}\n",
                          f"  - address: 127.0.0.1:{port}\n    push: false\n"
                          f"  - address: 127.0.0.1:{other}\n")
        g = gateway(cfg, wait=[("127.0.0.1", port)])
        g.port = port
    else:
        g = pgw(gateway, origin, route_extra=route_extra)
    if case == "h1":
        got = h1_get(g.port, page(0, ['/bytes/10']), timeout=5)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(page_body())
    elif case == "404":
        run = fetch(g.port, page(0, ["/bytes/10"], status=404))
        assert dict(run.heads[run.sid])[":status"] == "404"
        assert run.promises == {}
    elif case in ("head", "post"):
        cl = Client(g.port)
        sid = cl.request(page(0, ["/bytes/10"]), method=case.upper(),
                         body=b"x" if case == "post" else None)
        run = Streams()
        collect(cl, run, lambda r: sid in r.ended or sid in r.resets)
        cl.close()
        assert dict(run.heads[sid])[":status"] == "200"
        assert run.promises == {}
    else:
        run = fetch(g.port, page(0, ["/bytes/10"]))
        assert run.bodies[run.sid] == page_body()
        assert run.promises == {}
    time.sleep(0.2)
    assert "/bytes/10" not in origin_paths(origin)


# ---- limits --------------------------------------------------------------------------------------

def test_max_pushes_per_connection(gateway, origin):
    admin = free_port()
    g = pgw(gateway, origin, extra="h2:\n  max_pushes: 3\n", admin=admin)
    cl = Client(g.port)
    run = fetch(g.port, page(0, [f"/bytes/{n}" for n in (1, 2)]), cl=cl)
    assert promised_paths(run) == ["/bytes/1", "/bytes/2"]
    # the next page on the same connection: one more promise, then the connection's limit
    run = fetch(g.port, page(0, [f"/bytes/{n}" for n in (3, 4, 5)]), cl=cl)
    assert promised_paths(run) == ["/bytes/3"]
    assert run.bodies[run.sid] == page_body()  # the page itself is served
    cl.close()
    # a new connection starts again
    run = fetch(g.port, page(0, [f"/bytes/{n}" for n in (3, 4, 5)]))
    assert promised_paths(run) == ["/bytes/3", "/bytes/4", "/bytes/5"]
    m, _ = scrape(admin)
    assert sample(m, "h2gate_push_total", result="promised") == 6
    assert sample(m, "h2gate_push_total", result="refused_limit") == 1


def test_same_path_promised_once_per_connection(gateway, origin):
    g = pgw(gateway, origin)
    cl = Client(g.port)
    first = fetch(g.port, page(0, ["/bytes/10", "/bytes/20"]), cl=cl)
    assert promised_paths(first) == ["/bytes/10", "/bytes/20"]
    again = fetch(g.port, page(0, ["/bytes/20", "/bytes/30"]), cl=cl)
    assert promised_paths(again) == ["/bytes/30"]
    cl.close()
    other = fetch(g.port, page(0, ["/bytes/20"]))
    assert promised_paths(other) == ["/bytes/20"]


def test_client_max_concurrent_streams_bounds_open_pushes(gateway, origin):
    g = pgw(gateway, origin)
    # python3-h2 with SETTINGS_MAX_CONCURRENT_STREAMS 1: one push open at a time
    targets = ["/late/300/100", "/late/300/200", "/late/300/300"]
    run = fetch(g.port, page(0, targets),
                settings={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    assert len(run.promises) == 1
    pid, = run.promises
    assert run.bodies[pid] == pattern(100)
    # nghttp's --max-concurrent-streams says the same
    url = f"http://127.0.0.1:{g.port}" + page(0, [t.replace("/300/", "/301/") for t in targets])
    v = subprocess.run(["nghttp", "-nv", "--max-concurrent-streams=2", url],
                       capture_output=True, text=True, timeout=30)
    assert v.stdout.count("recv PUSH_PROMISE") == 2, v.stdout
    # and zero means none
    run = fetch(g.port, page(0, ["/bytes/33"]),
                settings={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 0})
    assert run.promises == {} and run.bodies[run.sid] == page_body()


def test_no_push_after_goaway(gateway, origin):
    g = pgw(gateway, origin)
    cl = Client(g.port)
    sid = cl.request(page(300, ["/bytes/44"]))
    # the client's GOAWAY (written behind python3-h2's back, which would stop reading)
    cl.s.sendall(struct.pack(">I", 8)[1:] + bytes([7, 0]) + struct.pack(">III", 0, 0, 0))
    run = Streams()
    collect(cl, run, lambda r: sid in r.ended)
    cl.close()
    assert run.bodies[sid] == page_body()
    assert run.promises == {}
    time.sleep(0.2)
    assert "/bytes/44" not in origin_paths(origin)


def test_no_push_for_a_reset_parent(gateway, origin):
    g = pgw(gateway, origin)
    cl = Client(g.port)
    target = page(round(slow(400)), ["/bytes/45"])
    sid = cl.request(target)
    # reset while the page waits at the origin: once the origin has it (a 0.1 s sleep here
    # could end before), and before its answer with the Link (400 ms, scaled: a reset read
    # after that let the push go)
    assert wait_origin_has(origin, target) == 1
    cl.c.reset_stream(sid, error_code=8)
    cl.flush()
    run = Streams()
    collect(cl, run, lambda r: False, timeout=0.8)
    assert run.promises == {}
    # the connection goes on
    run = fetch(g.port, "/bytes/5", cl=cl)
    assert run.bodies[run.sid] == pattern(5)
    cl.close()
    assert "/bytes/45" not in origin_paths(origin)


def test_cancelled_push_cancels_its_origin_exchange(gateway, origin):
    admin = free_port()
    g = pgw(gateway, origin, admin=admin)
    cl = Client(g.port)
    # a body the origin sends in ten pieces over a second
    sid = cl.request(page(0, ["/slow/100000"]))
    run = Streams()
    collect(cl, run, lambda r: r.promises and sid in r.ended and any(
        k == "data" and i in r.promises for k, i in r.order))
    pid, = run.promises
    conns = origin.open_connections
    assert conns >= 1
    cl.c.reset_stream(pid, error_code=8)  # CANCEL
    cl.flush()
    # nobody else needs it: the origin connection carrying it is closed (the origin's next
    # write fails), not read to the end
    deadline = time.monotonic() + slow(0.8)
    while origin.open_connections >= conns and time.monotonic() < deadline:
        time.sleep(0.02)
    assert origin.open_connections < conns
    run2 = fetch(g.port, "/bytes/7", cl=cl)
    assert run2.bodies[run2.sid] == pattern(7)
    cl.close()
    # the connection's counters go to the metrics when the worker has closed it (a 0.2 s sleep
    # here could end before a loaded ASan build had)
    assert wait_sample(admin, "h2gate_push_total", 1, result="cancelled") == 1


@pytest.mark.parametrize("cancel_push", [False, True])
def test_pushed_resource_and_real_request_share_one_origin_exchange(gateway, origin, cancel_push):
    g = pgw(gateway, origin, admin=True)  # routes coalesce by default
    # the origin answers 700 ms after it has the pushed request: the real one must join the
    # exchange before that, after this process's connecting and sending (scaled)
    target = f"/late/{slow(700):.0f}/30000"
    cl = Client(g.port)
    sid = cl.request(page(0, [target]))
    run = Streams()
    collect(cl, run, lambda r: r.promises and sid in r.ended)
    pid, = run.promises
    assert wait_sample(g.admin, "h2gate_client_streams", 1) == 1  # the pushed one alone
    # a real request for the same resource while the pushed one is in flight (another client)
    other_cl = Client(g.port)
    osid = other_cl.request(target)
    # it joined the pushed one's exchange: two streams under way (a 0.2 s sleep here bet on
    # that; a push declined before the request was read ended the exchange, and the request
    # then made its own)
    assert wait_sample(g.admin, "h2gate_client_streams", 2) == 2
    if cancel_push:
        # the push's client declines it: the exchange goes on for the real request
        cl.c.reset_stream(pid, error_code=8)
        cl.flush()
    other = Streams()
    collect(other_cl, other, lambda r: osid in r.ended or osid in r.resets)
    other_cl.close()
    if not cancel_push:
        collect(cl, run, all_ended(lambda: [sid, pid]))
        assert run.bodies[pid] == pattern(30000)
    cl.close()
    assert other.bodies[osid] == pattern(30000)
    assert origin_paths(origin).count(target) == 1


def test_push_and_access_log(gateway, origin, tmp_path):
    logf = tmp_path / "access.log"
    g = pgw(gateway, origin, extra=f"access_log:\n  path: {logf}\n  format: json\n")
    run = fetch(g.port, page(0, ["/bytes/64"]))
    assert len(run.promises) == 1
    import json
    deadline = time.monotonic() + slow(5)
    recs = []
    while time.monotonic() < deadline and len(recs) < 2:
        time.sleep(0.1)
        recs = [json.loads(l) for l in logf.read_text().splitlines()] if logf.exists() else []
    pushed = [r for r in recs if r["path"] == "/bytes/64"]
    assert len(pushed) == 1 and pushed[0]["pushed"] is True and pushed[0]["status"] == 200
    assert [r["pushed"] for r in recs if r["path"].startswith("/push-page")] == [False]


# ---- configuration -------------------------------------------------------------------------------

def test_config_refuses_push_without_an_h2_listener(h2gate_bin, tmp_path):
    p = tmp_path / "push.yaml"
    p.write_text("listen:\n  - address: 127.0.0.1:1\n    protocols: [http/1.1]\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:2]\n"
                 "routes:\n  - upstream: app\n    push: true\n")
    r = subprocess.run([h2gate_bin, "--check-config", str(p)], capture_output=True, text=True)
    assert r.returncode == 1
    assert re.search(re.escape(str(p)) + r":9:11: push: true needs a listener that speaks HTTP/2",
                     r.stderr), r.stderr
    # an h2c listener that says push: false is no better
    p.write_text("listen:\n  - address: 127.0.0.1:1\n    push: false\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:2]\n"
                 "routes:\n  - upstream: app\n    push: true\n")
    r = subprocess.run([h2gate_bin, "--check-config", str(p)], capture_output=True, text=True)
    assert r.returncode == 1 and "push: true needs a listener" in r.stderr
    p.write_text("listen:\n  - address: 127.0.0.1:1\n    protocols: [http/1.1]\n"
                 "  - address: 127.0.0.1:3\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:2]\n"
                 "routes:\n  - upstream: app\n    push: true\n")
    r = subprocess.run([h2gate_bin, "--check-config", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.serial
def test_pushed_stream_keeps_to_its_routes_rate(gateway, origin):
    # the pushed request is routed on its own path: /bytes/ has a response_rate, the page not
    port = free_port()
    cfg = gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="push: true")
    cfg = cfg.replace("routes:\n", "routes:\n  - host: '*'\n    path: /bytes/\n    upstream: app\n"
                      "    response_rate: 100KiB/s\n")
    gateway(cfg, wait=[("127.0.0.1", port)])
    t0 = time.monotonic()
    cl = Client(port)
    cl.open_windows()
    sid = cl.request(page(0, ["/bytes/250000"]))
    run = Streams()
    collect(cl, run, lambda r: sid in r.ended)
    t_page = time.monotonic() - t0
    collect(cl, run, all_ended(lambda: [sid] + list(run.promises)), timeout=15)
    t_push = time.monotonic() - t0
    cl.close()
    pid, = run.promises
    assert run.bodies[pid] == pattern(250000)
    assert t_page < 1.0
    # 250,000 bytes at 100 KiB/s after a 16 KiB burst: about 2.3 s
    assert 1.8 < t_push < 6, (t_page, t_push)
