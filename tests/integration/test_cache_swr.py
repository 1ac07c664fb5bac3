"""stale-while-revalidate (RFC 5861 §3) in the shared cache (gateway/proxy/revalidate.c): within
the window a stale entry is answered at once while one background request of the cache's own
revalidates it; its 304 refreshes the stored head, its 200 replaces the entry (or removes it,
when it may not be stored), its failure leaves the stale one. The origin is made slow, or
holds its answers until the test releases them, so that an answer that waited for it is told
from one that did not, and counts every request.

The module runs in the parallel pass: what it waits for is the clock (max-age=1, only ever
later than asked) and the origin's release, not the CPU. An answer "at once" is one given
while the origin holds its answers (hold()): one that waited for the origin would not come
before release(), and the client would time out (10 s). Its time bound, HELD, only catches a
gateway that stalls: the answers took 17 ms (one) and 27 ms (thirty) at most against the ASan
build beside two other modules on a loaded 2-core machine, but a process of a loaded machine
can be kept off the CPU for a second or two (against the plain build, pinned to one core
beside a busy loop, the first test once failed 2.5 s after its stale answer, the origin still
holding: most likely on the 0.9 s bound it had for thirty answers)."""
import json
import re
import signal
import threading
import time

from procs import free_port, slow
from cachetest import CountingOrigin, get, h1

from gwtest import (Client, Streams, all_done, collect, gw_config, origin_count, origin_gateway,
                    reload_to, sample, scrape)

HELD = slow(3.0)  # the bound of answers while the origin holds its own (the module's docstring)


class SlowOrigin(CountingOrigin):
    """CountingOrigin plus /k/swr/NAME: 200 with Cache-Control max-age=self.max_age,
    stale-while-revalidate=self.swr (none when 0), ETag "vN" (N: self.version), X-N: the
    request's number, the body naming the version and the number; 304 to a matching
    If-None-Match. /k/swrnv/NAME is the same without an ETag (no validator). While
    self.turned is set, every /k/swr* request gets a 200 (never a 304) with that Cache-Control
    instead. Every /k/swr* answer comes after self.delay seconds (the delay read when the
    request arrives), and not before release() while hold() is in force."""

    def __init__(self):
        self.delay = 0.0
        self.max_age = 1
        self.swr = 30
        self.turned = None  # a Cache-Control: a full answer to every request, never a 304
        self.gate = threading.Event()
        self.gate.set()
        super().__init__()

    def hold(self):
        """From now on /k/swr* answers wait for release(): an answer a client gets meanwhile
        did not wait for the origin, however long it took."""
        self.gate.clear()

    def release(self):
        self.gate.set()

    def close(self):
        self.gate.set()  # the held answers go (their threads end)
        super().close()

    def _respond(self, c, req):
        path = req.target.split("?")[0]
        kind = path.split("/")[2] if path.startswith("/k/") else ""
        if kind not in ("swr", "swrnv"):
            return super()._respond(c, req)
        delay = self.delay
        with self.lock:
            n = self.counts[(req.method, path)] = self.counts.get((req.method, path), 0) + 1
        if delay:
            time.sleep(delay)
        self.gate.wait()
        cc = f"max-age={self.max_age}"
        if self.swr:
            cc += f", stale-while-revalidate={self.swr}"
        if self.turned is not None:
            cc = self.turned
        fields = [("Cache-Control", cc), ("X-N", str(n))]
        tag = f'"v{self.version}"'
        if kind == "swr" and self.turned is None:
            fields.append(("ETag", tag))
            if req.header("if-none-match") == tag:
                c.sendall(b"HTTP/1.1 304 Not Modified\r\n" +
                          "".join(f"{k}: {v}\r\n" for k, v in fields).encode() + b"\r\n")
                return True
        body = f"version {self.version} {path} n={n}\n".encode()
        c.sendall(("HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) +
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        return True


def swr_gateway(gateway, origin, extra="", upstream_extra="", admin=False, workers=1):
    port = free_port()
    text = gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra="cache: true\n",
                     upstream_extra=upstream_extra,
                     extra="cache:\n  max_object: 256KiB\n" + extra, workers=workers)
    wait = [("127.0.0.1", port)]
    if admin:
        admin = free_port()
        text += f"admin:\n  address: 127.0.0.1:{admin}\n"
        wait.append(("127.0.0.1", admin))
    g = gateway(text, wait=wait)
    g.port, g.admin, g.text = port, admin, text
    return g


def timed(fn, *a, **kw):
    t0 = time.monotonic()
    r = fn(*a, **kw)
    return r, time.monotonic() - t0


def wait_count(o, target, n, timeout=5.0):
    deadline = time.monotonic() + slow(timeout)
    while origin_count(o, target) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return origin_count(o, target)


BG_RESULTS = ("refreshed", "replaced", "not_stored", "failed", "cancelled")


def wait_revalidations(g, n, timeout=10.0):
    """The background revalidations the gateway has finished (h2gate_cache_background_
    revalidations_total, any result), once there are n (or at the timeout, scaled: slow()): a
    finished one has stored what the origin answered."""
    deadline = time.monotonic() + slow(timeout)
    while True:
        fams, _ = scrape(g.admin)
        done = sum(sample(fams, "h2gate_cache_background_revalidations_total", result=r)
                   for r in BG_RESULTS)
        if done >= n or time.monotonic() > deadline:
            return done
        time.sleep(0.02)


def access_records(g, n, timeout=5.0):
    """The records of the JSON access log (access.json in the gateway's directory), once it
    has n complete lines (or at the timeout, scaled: slow())."""
    deadline = time.monotonic() + slow(timeout)
    while True:
        try:
            with open(f"{g.workdir}/access.json") as f:
                lines = f.read().split("\n")[:-1]
        except FileNotFoundError:
            lines = []
        if len(lines) >= n or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)


SWR_STATUS = r"h2gate; hit; ttl=-\d+; detail=stale-while-revalidate"


def test_the_stale_answer_comes_at_once_and_one_background_304_refreshes_it(gateway):
    """Within the window the client does not wait for the origin (which holds its answer);
    30 more requests, concurrent on HTTP/2 and one after another on HTTP/1.1, start nothing
    more: the origin gets exactly one conditional request, whose 304 makes the entry fresh
    again with the 304's fields; the access log says stale-while-revalidate."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, extra="access_log: {path: access.json, format: json}\n",
                        admin=True)
        cl = Client(g.port)
        st, h, first = get(cl, "/k/swr/a")
        assert st == 200 and h["cache-status"] == "h2gate; fwd=miss; stored"
        time.sleep(2.2)  # max-age=1: stale by about 1 s, inside stale-while-revalidate=30
        o.hold()  # until release() below: these answers did not wait for the origin
        o.max_age = 60  # what the 304 says: fresh for a minute
        (st, h, body), took = timed(get, cl, "/k/swr/a")
        assert st == 200 and body == first and h["x-n"] == "1"
        assert took < HELD, took  # at once
        assert int(h["age"]) >= 2
        assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]
        t0 = time.monotonic()
        sids = [cl.request("/k/swr/a") for _ in range(20)]
        run = collect(cl, Streams(), all_done(sids), timeout=10)
        for s in sids:
            hs = dict(run.heads[s])
            assert run.status(s) == 200 and run.bodies[s] == first and hs["x-n"] == "1"
            assert re.fullmatch(SWR_STATUS, hs["cache-status"])
        for _ in range(10):
            st, hh, body = h1(g.port, "/k/swr/a")
            assert st == 200 and body == first and hh["x-n"] == "1"
        took = time.monotonic() - t0
        assert took < HELD, took  # none waited for the origin
        assert wait_count(o, "/k/swr/a", 2) == 2
        bg = o.requests[-1]
        assert bg.method == "GET" and bg.header("if-none-match") == '"v1"'
        o.release()
        assert wait_revalidations(g, 1) == 1  # the origin's 304 arrived
        st, h, body = get(cl, "/k/swr/a")
        assert body == first and h["x-n"] == "2"  # the 304's fields replaced the stored ones
        # fresh for the 304's minute, less its age (the time the origin held it counts: RFC
        # 9111 §4.2.3's response_delay)
        m = re.fullmatch(r"h2gate; hit; ttl=(\d+)", h["cache-status"])
        assert m and 56 <= int(m.group(1)) <= 60, h["cache-status"]
        cl.close()
        assert origin_count(o, "/k/swr/a") == 2
        recs = access_records(g, 33)
        caches = [r["cache"] for r in recs]
        assert caches[0] == "miss" and caches[-1] == "hit"
        assert caches[1:-1] == ["stale-while-revalidate"] * 31
        # the cache's own request is not a client's: no access log line of its own (one would
        # come before the last request's: the background request ended, wait_revalidations,
        # before that request was sent)
        assert len(recs) == 33


def test_a_background_200_replaces_the_entry_and_without_validators_it_is_unconditional(gateway):
    """The object changed: the background request's 200 replaces the entry, and the next
    request is a fresh hit with the new body. An entry without ETag or Last-Modified is asked
    for without a condition."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        for i, path in enumerate(("/k/swr/b", "/k/swrnv/b"), 1):
            o.version, o.max_age = 1, 1
            _, _, first = h1(g.port, path)
            time.sleep(2.2)
            o.version, o.max_age = 2, 60
            o.hold()
            (st, h, body), took = timed(h1, g.port, path)
            assert st == 200 and body == first and took < HELD, took
            assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]
            assert wait_count(o, path, 2) == 2
            o.release()
            assert wait_revalidations(g, i) == i
            st, h, body = h1(g.port, path)
            assert body.startswith(b"version 2 ") and h["x-n"] == "2", (path, body)
            assert h["cache-status"].startswith("h2gate; hit; ttl="), h["cache-status"]
            assert origin_count(o, path) == 2
        conds = [q.header("if-none-match") for q in o.requests if q.target == "/k/swrnv/b"]
        assert conds == [None, None]


def test_a_background_answer_that_may_not_be_stored_removes_the_stale_entry(gateway):
    """RFC 9111 §4.3.3: the background request gets a full answer (not a 304) that may not be
    stored, private here: the stale copy it revalidated is no longer suitable and is removed,
    so the requests after it, still within stale-while-revalidate=30 of the old answer, go to
    the origin and get its answer instead of the old one (which had kept reaching every
    client, with a new background request each time). With the stored ETag (/k/swr/) or
    without a validator (/k/swrnv/)."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        for i, path in enumerate(("/k/swr/p", "/k/swrnv/p"), 1):
            o.version, o.turned = 1, None
            _, _, first = h1(g.port, path)
            time.sleep(2.2)  # stale, within the window
            o.version, o.turned = 2, "private, max-age=60"
            st, h, body = h1(g.port, path)  # the stale answer at once, revalidated behind it
            assert st == 200 and body == first
            assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]
            assert wait_revalidations(g, i) == i
            for k in range(3):
                st, h, body = h1(g.port, path)
                assert st == 200 and body.startswith(b"version 2 "), (path, k, body)
                assert h["cache-status"] == "h2gate; fwd=miss; detail=private", (path, h)
            assert origin_count(o, path) == 5
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_background_revalidations_total",
                      result="not_stored") == 2
        assert sample(fams, "h2gate_cache_objects") == 0


def test_past_the_window_the_request_waits_for_the_revalidation(gateway):
    """stale-while-revalidate=1: stale by more than a second, the entry is revalidated before
    the client gets it (it waits for the slow origin), as without the directive."""
    with SlowOrigin() as o:
        o.swr = 1
        g = swr_gateway(gateway, o)
        _, _, first = h1(g.port, "/k/swr/c")
        time.sleep(3.3)  # max-age=1, stale by more than 2 s
        o.delay, o.max_age = 0.8, 60
        (st, h, body), took = timed(h1, g.port, "/k/swr/c")
        assert st == 200 and body == first and took >= 0.75
        assert h["cache-status"] == "h2gate; fwd=stale; fwd-status=304; stored"
        assert origin_count(o, "/k/swr/c") == 2


def test_the_request_no_cache_and_max_age_still_revalidate_and_max_stale_does_not(gateway):
    """What gw_cache_use() says of the request's own directives holds inside the window:
    no-cache and max-age=0 go to the origin and wait for it (RFC 9111 §5.2.1.4, §5.2.1.1);
    a max-stale that covers the staleness is answered stale as a hit without any revalidation
    (§5.2.1.2)."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o)
        _, _, first = h1(g.port, "/k/swr/d")
        time.sleep(2.2)
        o.hold()  # an answer that waited for the origin would not come
        (st, h, body), took = timed(h1, g.port, "/k/swr/d",
                                    headers={"Cache-Control": "max-stale=60"})
        assert st == 200 and body == first and took < HELD, took
        assert re.fullmatch(r"h2gate; hit; ttl=-\d+", h["cache-status"]), h["cache-status"]
        time.sleep(0.8)
        assert origin_count(o, "/k/swr/d") == 1  # nothing went to the origin
        o.release()
        o.delay = 0.6
        for cc in ("no-cache", "max-age=0"):
            (st, h, body), took = timed(h1, g.port, "/k/swr/d", headers={"Cache-Control": cc})
            assert st == 200 and body == first and took >= 0.55, (cc, took)
            # forward, and the 304 stood for the stored answer (stale, or fresh again after the
            # first 304, which said max-age=1)
            assert re.match(r"h2gate; fwd=(stale|request); fwd-status=304; stored$",
                            h["cache-status"]), (cc, h)
        assert origin_count(o, "/k/swr/d") == 3


def test_a_conditional_request_and_head_get_the_stale_answer_too(gateway):
    """A client's If-None-Match is evaluated against the stale answer it may reuse (304 at
    once), a HEAD gets the stored head; the background request is one GET, without the
    client's condition."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o)
        h1(g.port, "/k/swr/e")
        time.sleep(2.2)
        o.hold()
        (st, h, body), took = timed(h1, g.port, "/k/swr/e", headers={"If-None-Match": '"v1"'})
        assert st == 304 and body == b"" and took < HELD, took
        st, h, body = h1(g.port, "/k/swr/e", method="HEAD")
        assert st == 200 and body == b"" and re.fullmatch(SWR_STATUS, h["cache-status"])
        assert wait_count(o, "/k/swr/e", 2) == 2
        bg = o.requests[-1]
        assert bg.method == "GET" and bg.header("if-none-match") == '"v1"'


def test_the_default_window_comes_from_the_configuration(gateway):
    """cache.stale_while_revalidate stands in for an answer that names no window."""
    with SlowOrigin() as o:
        o.swr = 0  # the answers name no stale-while-revalidate
        g = swr_gateway(gateway, o, extra="  stale_while_revalidate: 30\n")
        _, _, first = h1(g.port, "/k/swr/f")
        time.sleep(2.2)
        o.hold()
        (st, h, body), took = timed(h1, g.port, "/k/swr/f")
        assert st == 200 and body == first and took < HELD, took
        assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]


def test_the_origin_down_or_timing_out_leaves_the_stale_entry(gateway):
    """The background request fails (the origin does not answer within the upstream's
    response_timeout; then it is down): the stale entry stays and keeps being answered within
    the window, each failure is counted, and the gateway goes on."""
    with SlowOrigin() as o:
        # an answer at once comes within at_once; one that waited for the background request
        # would have waited out response_timeout, twice as long
        at_once = slow(1.5)
        g = swr_gateway(gateway, o, upstream_extra=f"response_timeout: {round(2000 * at_once)}ms\n",
                        admin=True)
        _, _, first = h1(g.port, "/k/swr/g")
        time.sleep(2.2)
        o.hold()  # never answers (until closed below): the upstream's response_timeout
        (st, h, body), took = timed(h1, g.port, "/k/swr/g")
        assert st == 200 and body == first and took < at_once, took
        assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]
        # (the key names the request's host, localhost: waiting for a key of 127.0.0.1 waited
        # out its 3 s every time)
        assert "/k/swr/g result=failed" in g.wait_log("/k/swr/g result=failed",
                                                      timeout=2 * at_once + 3)
        o.close()  # down: the next background request is refused
        for _ in range(3):
            st, h, body = h1(g.port, "/k/swr/g")
            assert st == 200 and body == first
            assert re.fullmatch(SWR_STATUS, h["cache-status"]), h["cache-status"]
            time.sleep(0.3)
        # a refused background request fails at once, on the worker's thread: waited for, not
        # assumed done within the sleeps
        deadline = time.monotonic() + slow(5)
        while True:
            fams, _ = scrape(g.admin)
            failed = sample(fams, "h2gate_cache_background_revalidations_total", result="failed")
            if failed >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert failed >= 2
        assert sample(fams, "h2gate_cache_background_revalidations_total",
                      result="refreshed") == 0
        assert g.proc.poll() is None


def test_the_outcomes_are_counted_on_the_admin_metrics(gateway):
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        for path in ("/k/swr/m1", "/k/swrnv/m2"):
            h1(g.port, path)
        time.sleep(2.2)
        o.max_age = 60
        for path in ("/k/swr/m1", "/k/swrnv/m2"):
            h1(g.port, path)
        assert wait_revalidations(g, 2) == 2
        fams, _ = scrape(g.admin)
        c = {r: sample(fams, "h2gate_cache_background_revalidations_total", result=r)
             for r in ("refreshed", "replaced", "not_stored", "failed", "cancelled")}
        assert c == {"refreshed": 1, "replaced": 1, "not_stored": 0, "failed": 0,
                     "cancelled": 0}, c
        # the two stale answers served at once, and the two revalidations behind them
        assert sample(fams, "h2gate_cache_stale_served_total", cause="stale_while_revalidate") == 2
        assert sample(fams, "h2gate_cache_revalidations_total", result="not_modified") == 1
        assert sample(fams, "h2gate_cache_revalidations_total", result="modified") == 1


def test_a_reload_during_the_background_revalidation(gateway):
    """The configuration is reloaded while the background request waits for the origin: the
    old generation's request finishes (a client still holds it) or is cancelled (none does),
    nothing breaks, and the entry is revalidated afterwards on the new generation."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        cl = Client(g.port)
        st, _, first = get(cl, "/k/swr/r")
        time.sleep(2.2)
        o.max_age = 1
        o.hold()
        st, h, body = get(cl, "/k/swr/r")  # the background request is under way
        assert st == 200 and re.fullmatch(SWR_STATUS, h["cache-status"])
        assert wait_count(o, "/k/swr/r", 2) == 2  # and waits at the origin
        reload_to(g, g.text.replace("log_level: info", "log_level: debug"), 2)
        st, h, body = h1(g.port, "/k/swr/r")  # the new generation, the claim still held
        assert st == 200 and body == first and re.fullmatch(SWR_STATUS, h["cache-status"])
        o.release()
        assert wait_revalidations(g, 1) == 1
        fams, _ = scrape(g.admin)  # the old generation's finished
        assert sample(fams, "h2gate_cache_background_revalidations_total",
                      result="refreshed") == 1
        assert origin_count(o, "/k/swr/r") == 2
        cl.close()  # the old generation retires
        # once more, and this time its generation goes while the request waits
        time.sleep(2.2)  # stale again (the 304 said max-age=1)
        o.max_age = 60
        o.hold()
        cl = Client(g.port)
        st, h, body = get(cl, "/k/swr/r")
        assert st == 200 and re.fullmatch(SWR_STATUS, h["cache-status"])
        cl.close()
        assert wait_count(o, "/k/swr/r", 3) == 3  # the background request waits at the origin
        reload_to(g, g.text, 3)
        assert "result=cancelled" in g.wait_log("result=cancelled", timeout=5)
        o.release()
        st, h, body = h1(g.port, "/k/swr/r")  # stale still: a new background request
        assert st == 200 and body == first and re.fullmatch(SWR_STATUS, h["cache-status"])
        assert wait_revalidations(g, 3) == 3
        st, h, body = h1(g.port, "/k/swr/r")
        assert st == 200 and body == first
        assert h["cache-status"].startswith("h2gate; hit; ttl="), h["cache-status"]
        assert "ttl=-" not in h["cache-status"]
        assert g.proc.poll() is None


def test_a_graceful_stop_does_not_wait_for_a_background_revalidation(gateway):
    """SIGTERM while the background request waits for an origin that holds its answer: the
    gateway exits once its clients are done, without waiting for it."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o)
        h1(g.port, "/k/swr/s")
        time.sleep(2.2)
        o.hold()  # not released: the origin never answers
        st, h, _ = h1(g.port, "/k/swr/s")
        assert st == 200 and re.fullmatch(SWR_STATUS, h["cache-status"])
        assert wait_count(o, "/k/swr/s", 2) == 2
        t0 = time.monotonic()
        g.signal(signal.SIGTERM)
        assert g.wait(timeout=8) == 0
        assert time.monotonic() - t0 < 5
        assert "result=cancelled" in g.log()


def test_a_route_sets_its_own_stale_windows(gateway):
    """A route's `cache: {stale_while_revalidate, stale_if_error}` stands in for the cache
    section's windows (0 here) on its answers that name none: its stale entry answers at once
    while being revalidated, and while the origin is down; another route's does neither."""
    with SlowOrigin() as o:
        o.swr = 0  # the answers name no stale-while-revalidate
        port = free_port()
        text = (f"workers: 1\nlog_level: info\nlisten:\n  - address: 127.0.0.1:{port}\n"
                f"upstreams:\n  app:\n    servers: [127.0.0.1:{o.port}]\n"
                "routes:\n"
                "  - {host: '*', path: /k/swr/own, upstream: app,"
                " cache: {stale_while_revalidate: 30}}\n"
                "  - {host: '*', path: /k/short/own, upstream: app, cache: {stale_if_error: 60}}\n"
                "  - {host: '*', path: /, upstream: app, cache: true}\n"
                "cache:\n  max_object: 256KiB\n")
        gateway(text, wait=[("127.0.0.1", port)])
        for path in ("/k/swr/own", "/k/swr/other", "/k/short/own", "/k/short/other"):
            h1(port, path)
        time.sleep(2.2)
        o.hold()  # an answer that waited for the origin would not come
        (st, h, _), took = timed(h1, port, "/k/swr/own")
        assert st == 200 and took < HELD and re.fullmatch(SWR_STATUS, h["cache-status"]), took
        o.release()
        o.delay = 0.6
        (st, h, _), took = timed(h1, port, "/k/swr/other")
        assert st == 200 and took >= 0.55, took
        assert h["cache-status"].startswith("h2gate; fwd=stale"), h["cache-status"]
        time.sleep(0.8)
        o.close()  # down
        st, h, body = h1(port, "/k/short/own")
        assert st == 200 and body == b"GET /k/short/own n=1\n"
        assert h["cache-status"].endswith("detail=stale-if-error"), h["cache-status"]
        assert h1(port, "/k/short/other")[0] == 502


def test_one_background_request_whichever_worker_finds_the_entry_stale(gateway):
    """Two workers share the store: 20 connections in the window, spread over both by
    SO_REUSEPORT, start one background request between them (the entry's claim)."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, workers=2, admin=True)
        _, _, first = h1(g.port, "/k/swr/w")
        time.sleep(2.2)
        o.max_age = 60
        o.hold()
        t0 = time.monotonic()
        for _ in range(20):
            st, h, body = h1(g.port, "/k/swr/w")
            assert st == 200 and body == first and h["x-n"] == "1"
        took = time.monotonic() - t0
        assert took < HELD, took
        assert wait_count(o, "/k/swr/w", 2) == 2
        o.release()
        assert wait_revalidations(g, 1) == 1
        assert origin_count(o, "/k/swr/w") == 2
        st, h, body = h1(g.port, "/k/swr/w")
        assert h["x-n"] == "2" and "ttl=-" not in h["cache-status"]


def test_the_background_revalidation_carries_no_client_credentials(gateway):
    """A client with Authorization and Cookie finds an entry stale within its window: the
    background request revalidates it for every client, without that client's credentials
    (RFC 9111 §3.5: an answer to them could not refresh the shared entry), and its 304
    refreshes it."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        cl = Client(g.port)
        get(cl, "/k/swr/cred")
        time.sleep(2.2)
        st, h, _ = get(cl, "/k/swr/cred", extra=[("authorization", "Bearer alice"),
                                                 ("cookie", "s=alice")])
        assert st == 200 and re.fullmatch(SWR_STATUS, h["cache-status"]), h
        assert wait_revalidations(g, 1) == 1
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_background_revalidations_total",
                      result="refreshed") == 1
        bg = [q for q in o.requests if q.target == "/k/swr/cred"][-1]
        assert bg.header("if-none-match") == '"v1"'
        assert bg.header("authorization") is None and bg.header("cookie") is None
        st, h, _ = get(cl, "/k/swr/cred")
        assert h["cache-status"].startswith("h2gate; hit; ttl=") and h["x-n"] == "2", h
        cl.close()


def test_an_invalidation_during_a_background_revalidation_is_not_undone(gateway):
    """A POST answered 2xx while the background revalidation of the same URL waits for the
    origin removes the entry (RFC 9111 §4.4); the 304 that comes after it refreshes nothing
    (result not_stored): the next GET goes to the origin."""
    with SlowOrigin() as o:
        g = swr_gateway(gateway, o, admin=True)
        cl = Client(g.port)
        get(cl, "/k/swr/race")
        time.sleep(2.2)
        o.max_age = 60  # the 304 would make it fresh for a minute
        # read when the background request arrives: the POST below is answered within it
        o.delay = slow(2.0)
        st, h, _ = get(cl, "/k/swr/race")
        assert re.fullmatch(SWR_STATUS, h["cache-status"]), h
        assert wait_count(o, "/k/swr/race", 2) == 2
        o.delay = 0.0
        st, _, _ = get(cl, "/k/swr/race", method="POST")
        assert st == 200
        assert wait_revalidations(g, 1) == 1
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_background_revalidations_total",
                      result="not_stored") == 1
        st, h, body = get(cl, "/k/swr/race")
        assert h["cache-status"] == "h2gate; fwd=miss; stored", h
        assert [q.method for q in o.requests if q.target == "/k/swr/race"] == \
            ["GET", "GET", "POST", "GET"]
        cl.close()


def compression_counts(g):
    """Every compression counter of the metrics endpoint: {(sample, labels): value}."""
    fams, _ = scrape(g.admin)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in fams.values() if f.name.startswith("h2gate_compress") and f.type == "counter"
            for s in f.samples}


def test_background_revalidations_count_in_no_compression_metric(gateway):
    """On a route that compresses, the background request's answer goes to no client: it is
    not compressed, and the compression metrics count the clients' answers only (the stale
    hit's gzip, not a second one for the 304 or the 200 that came in the background)."""
    with CountingOrigin() as o:
        o.etag_cc_extra = ", stale-while-revalidate=30"
        g = origin_gateway(gateway, o, route_extra="cache: true\ncompress: true\n", admin=True,
                           extra="cache:\n  max_object: 256KiB\n")
        cl = Client(g.port)
        gz = [("accept-encoding", "gzip")]
        st, h, _ = get(cl, "/k/etag/z", extra=gz)
        assert h["content-encoding"] == "gzip" and "fwd=miss; stored" in h["cache-status"]
        for round_, change in enumerate(("304", "200")):
            time.sleep(2.2)  # max-age=1: stale, within the window
            if change == "200":
                o.version += 1  # the background request gets a new answer
            before = compression_counts(g)
            st, h, body = get(cl, "/k/etag/z", extra=gz)
            assert re.fullmatch(SWR_STATUS, h["cache-status"]) and \
                h["content-encoding"] == "gzip", h
            mid = compression_counts(g)  # the stale hit's own compression
            assert wait_revalidations(g, round_ + 1) == round_ + 1
            fams, _ = scrape(g.admin)
            assert sample(fams, "h2gate_cache_background_revalidations_total",
                          result="refreshed" if change == "304" else "replaced") == 1
            assert compression_counts(g) == mid, change  # nothing more for the background
            key = ("h2gate_compressed_responses_total", (("coding", "gzip"),))
            assert mid[key] == before[key] + 1, (change, before, mid)
        cl.close()
