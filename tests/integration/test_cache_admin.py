"""The shared cache on the admin listener and across reloads: POST /cache/purge?url=URL (every
Vary variant of one URL) and ?prefix=URL (every key under it), the URL percent-encoded in the
query and keyed as requests are; precise 400s for what is not a URL; GET /cache/stats and the
metrics moving as the store does; a reload that removes a caching route (or its cache: true)
drops its entries at once while the other route's stay; a reload that changes cache.memory
starts a new, empty store. Origin requests are counted at the scripted origin
(cachetest.CountingOrigin)."""
import json
import re
import time
from urllib.parse import quote

from procs import free_port, run, slow
from cachetest import CountingOrigin, admin, exchange, get_at, h1, reload, stats

from gwtest import gw_config, origin_count, origin_gateway, sample, scrape


def purge(g, what, url, encode=True):
    """POST /cache/purge?what=url (url percent-encoded unless encode is False): (status, the
    JSON answer)."""
    st, h, body = admin(g.admin, "POST", f"/cache/purge?{what}={quote(url, safe='') if encode else url}")
    assert h["content-type"] == "application/json", (st, h, body)
    return st, json.loads(body)


def cached(gateway, o, extra="", workers=1):
    return origin_gateway(gateway, o, route_extra="cache: true\n", admin=True, workers=workers,
                          extra="cache:\n  memory: 32MiB\n  max_object: 256KiB\n" + extra)


def hit(port, path, headers=None):
    """GET path over HTTP/1.1 (Host: localhost): (body, whether the cache answered)."""
    st, h, body = h1(port, path, headers=headers)
    assert st == 200, (path, st)
    return body, h["cache-status"].startswith("h2gate; hit")


def test_purge_by_url_removes_every_vary_variant_and_the_next_request_goes_to_the_origin(gateway):
    """Two workers, each request on a connection of its own (SO_REUSEPORT spreads them): the
    purge from the admin thread reaches the one store both workers read."""
    with CountingOrigin() as o:
        g = cached(gateway, o, workers=2)
        langs = [{"Accept-Language": "en"}, {"Accept-Language": "fr"}, None]
        for hdr in langs:
            assert not hit(g.port, "/k/vary", hdr)[1]
            assert all(hit(g.port, "/k/vary", hdr)[1] for _ in range(6))
        hit(g.port, "/k/fresh/other")
        assert origin_count(o, "/k/vary") == 3
        # the URL as the client asked for it: the listener's scheme, its Host
        assert purge(g, "url", "http://localhost/k/vary") == (200, {"purged": 3})
        for hdr in langs:
            body, was_hit = hit(g.port, "/k/vary", hdr)
            assert not was_hit and body.endswith(b"\n")
            assert all(hit(g.port, "/k/vary", hdr)[1] for _ in range(6))
        assert origin_count(o, "/k/vary") == 6
        assert hit(g.port, "/k/fresh/other")[1]  # another URL is untouched
        # the scheme and host are compared as the cache keys them: case and default port
        assert purge(g, "url", "HTTP://LocalHost:80/k/vary") == (200, {"purged": 3})
        assert purge(g, "url", "http://localhost/k/vary") == (200, {"purged": 0})
        # another scheme or port is another URL
        assert purge(g, "url", "https://localhost/k/fresh/other") == (200, {"purged": 0})
        assert purge(g, "url", "http://localhost:8080/k/fresh/other") == (200, {"purged": 0})
        assert hit(g.port, "/k/fresh/other")[1]
        assert "event=cache_purged url=http://localhost/k/vary purged=3" in g.log()


def test_every_spelling_of_an_ipv6_host_is_one_entry_and_one_purge(gateway):
    """RFC 4291 §2.2: [::1], [0::1] and [0:0:0:0:0:0:0:1] are one address, so one URL: the
    cache keys an IPv6 host in RFC 5952's text (as routes compare it), so a second spelling,
    over HTTP/1.1 Host or HTTP/2 :authority, with the default port or not, is a hit, and a
    purge by a third spelling (url or prefix) removes the one entry. Before, each spelling was
    an entry of its own (one origin fetch each) and a purge by another spelling missed it."""
    with CountingOrigin() as o:
        g = cached(gateway, o)
        path = "/k/fresh/v6"
        st, h, first = exchange(g.port, "GET", path, {"Host": "[::1]"})
        assert st == 200 and not h["cache-status"].startswith("h2gate; hit"), h
        st, h, body = exchange(g.port, "GET", path, {"Host": "[0::1]:80"})
        assert st == 200 and h["cache-status"].startswith("h2gate; hit") and body == first, h
        st, h, body = get_at(g.port, "[0000:0:0::0001]", path)
        assert st == 200 and h["cache-status"].startswith("h2gate; hit") and body == first, h
        assert origin_count(o, path) == 1 and stats(g)["objects"] == 1
        # another address is another entry
        st, h, _ = exchange(g.port, "GET", path, {"Host": "[::2]"})
        assert st == 200 and not h["cache-status"].startswith("h2gate; hit"), h
        assert origin_count(o, path) == 2 and stats(g)["objects"] == 2
        assert purge(g, "url", f"http://[0:0:0:0:0:0:0:1]{path}") == (200, {"purged": 1})
        assert f"event=cache_purged url=http://[::1]{path} purged=1" in g.log()
        st, h, body = exchange(g.port, "GET", path, {"Host": "[::0001]"})
        assert st == 200 and not h["cache-status"].startswith("h2gate; hit"), h
        assert origin_count(o, path) == 3 and body != first
        assert purge(g, "prefix", "http://[0::1]:80/k/") == (200, {"purged": 1})
        # the other address's entry stayed through both
        st, h, _ = exchange(g.port, "GET", path, {"Host": "[0:0::2]"})
        assert h["cache-status"].startswith("h2gate; hit") and origin_count(o, path) == 3, h


def test_purge_by_prefix_removes_only_matching_keys(gateway):
    with CountingOrigin() as o:
        g = cached(gateway, o)
        paths = ["/k/fresh/img/1", "/k/fresh/img/2", "/k/fresh/img/2?v=3", "/k/fresh/imgx",
                 "/k/fresh/css/1"]
        for p in paths:
            hit(g.port, p)
        assert stats(g)["objects"] == 5
        assert purge(g, "prefix", "http://localhost/k/fresh/img/") == (200, {"purged": 3})
        assert [hit(g.port, p)[1] for p in paths] == [False, False, False, True, True]
        assert [origin_count(o, p) for p in paths] == [2, 2, 2, 1, 1]
        # a URL without a path is its "/": every key of that scheme and authority
        assert purge(g, "prefix", "http://LOCALHOST:80") == (200, {"purged": 5})
        assert stats(g)["objects"] == 0


def test_the_url_is_percent_decoded_once(gateway):
    """The query's value is percent-decoded once (RFC 3986 §2.1): the target's own query and
    escapes are written encoded; ":" and "/" may stay as they are; a "+" is a "+"."""
    with CountingOrigin() as o:
        g = cached(gateway, o)
        for p in ["/k/fresh/q?a=1&b=2", "/k/fresh/a%20b", "/k/fresh/p+q", "/k/fresh/A",
                  "/k/fresh/c?x=1+2&y=%2B"]:
            hit(g.port, p)
        assert purge(g, "url", "http://localhost/k/fresh/q?a=1&b=2") == (200, {"purged": 1})
        # as curl encodes it (a "+" as %2B, a "&" as %26), the documented command
        r = run(["curl", "-s", "-X", "POST", "-G", "--data-urlencode",
                 "url=http://localhost/k/fresh/c?x=1+2&y=%2B",
                 f"http://127.0.0.1:{g.admin}/cache/purge"])
        assert json.loads(r.stdout) == {"purged": 1}, r.stdout
        assert purge(g, "url", "http://localhost/k/fresh/a%2520b", encode=False) == \
            (200, {"purged": 1})
        assert purge(g, "url", "http://localhost/k/fresh/p+q", encode=False) == \
            (200, {"purged": 1})
        # lowercase hex digits; the path itself is case-sensitive (no /k/fresh/a stored)
        assert purge(g, "url", "http%3a%2f%2flocalhost%2fk%2ffresh%2fa", encode=False) == \
            (200, {"purged": 0})
        assert purge(g, "url", "http%3a%2f%2flocalhost%2fk%2ffresh%2fA", encode=False) == \
            (200, {"purged": 1})
        assert stats(g)["objects"] == 0
        # the query left unencoded splits at its "&": refused, with the reason
        st, ans = purge(g, "url", "http://localhost/k/fresh/q?a=1&b=2", encode=False)
        assert st == 400 and ans["error"].startswith('unknown parameter "b"') and \
            "%26" in ans["error"], ans


def test_bad_purges_get_400_with_a_precise_message(gateway):
    with CountingOrigin() as o:
        g = cached(gateway, o)
        hit(g.port, "/k/fresh/x")
        for query, want in [
            ("", "missing parameter: url=URL or prefix=URL"),
            ("url=", "url is empty"),
            ("prefix", "prefix is empty"),
            ("url=http://a/&url=http://b/", "give one parameter, url=URL or prefix=URL, once"),
            ("url=http://a/&prefix=http://a/", "once"),
            ("uri=http://a/", 'unknown parameter "uri": give url=URL or prefix=URL'),
            ("url=http%3A%2F%2Fh%2Fa%20b", "URL with byte 0x20 at byte 10: a control, a space"),
            ("url=http://h/%00", "URL with byte 0x00 at byte 9"),
            ("url=http://h/%C3%A9", "URL with byte 0xc3 at byte 9"),
            ("prefix=localhost/k/", 'prefix "localhost/k/" is not an absolute URL'),
            ("url=ftp://localhost/k", 'url "ftp://localhost/k" is not an http or https URL'),
            ("url=http:///k", "has no host"),
            ("url=http://user@localhost/k", "has an invalid authority"),
            ("url=http://localhost?x=1", "has a query but no path"),
        ]:
            st, h, body = admin(g.admin, "POST", "/cache/purge" + ("?" + query if query else ""))
            assert st == 400 and h["content-type"] == "application/json", (query, st, body)
            assert want in json.loads(body)["error"], (query, body)
        # a target that is not one (RFC 3986 §2.1: "%" and two hex digits) is the parser's
        for query in ["url=http%3A%2F%2Fa%2F%zz", "url=http://a/%4", "url=http://a/%C3%A"]:
            st, h, body = admin(g.admin, "POST", "/cache/purge?" + query)
            assert st == 400 and body.startswith(
                b"h2gate admin: bad request: invalid request-target (a % not followed by two hex "
                b"digits"), (query, st, body)
        # nothing was purged by any of them
        assert stats(g)["purged"] == 0 and hit(g.port, "/k/fresh/x")[1]
        # methods: 405 with Allow (RFC 9110 §15.5.6)
        for method, target, allow in [("GET", "/cache/purge?url=http://localhost/", "POST"),
                                      ("HEAD", "/cache/purge", "POST"),
                                      ("POST", "/cache/stats", "GET, HEAD"),
                                      ("DELETE", "/metrics", "GET, HEAD")]:
            st, h, _ = admin(g.admin, method, target)
            assert (st, h.get("allow")) == (405, allow), (method, target, st, h)


def test_without_a_caching_route_the_cache_endpoints_say_so(gateway):
    with CountingOrigin() as o:
        g = origin_gateway(gateway, o, admin=True, extra="cache:\n  memory: 32MiB\n")
        for method, target in [("POST", "/cache/purge?url=http%3A%2F%2Flocalhost%2F"),
                               ("GET", "/cache/stats")]:
            st, h, body = admin(g.admin, method, target)
            assert st == 404 and h["content-type"] == "application/json", (target, st, body)
            assert json.loads(body) == {"error": "no cache: no route has cache: true"}
        # a bad URL is still a 400 first
        assert admin(g.admin, "POST", "/cache/purge?url=x")[0] == 400


def test_stats_move_as_the_store_does(gateway):
    with CountingOrigin() as o:
        g = cached(gateway, o)
        s0 = stats(g)
        assert set(s0) == {"hits", "misses", "inserts", "replaced", "evictions", "purged",
                           "dropped", "refused", "bytes", "objects", "ghosts", "memory",
                           "max_object", "stale_served", "revalidations"}
        assert (s0["memory"], s0["max_object"]) == (32 << 20, 256 << 10)
        assert s0["objects"] == s0["hits"] == s0["misses"] == s0["inserts"] == 0
        assert 0 < s0["bytes"] < 1 << 20  # the index, empty
        hit(g.port, "/k/big/100000")
        s1 = stats(g)
        assert (s1["misses"], s1["inserts"], s1["objects"]) == (1, 1, 1)
        assert s1["bytes"] - s0["bytes"] >= 100000
        hit(g.port, "/k/big/100000")
        hit(g.port, "/k/big/100000")
        assert stats(g)["hits"] == 2
        hit(g.port, "/k/big/300000")  # above max_object: refused at the head, never charged
        hit(g.port, "/k/fresh/r")
        hit(g.port, "/k/fresh/r", headers={"Cache-Control": "no-cache"})  # replaces it
        s2 = stats(g)
        assert (s2["objects"], s2["inserts"], s2["replaced"]) == (2, 3, 1)
        assert purge(g, "url", "http://localhost/k/big/100000") == (200, {"purged": 1})
        s3 = stats(g)
        assert (s3["objects"], s3["purged"]) == (1, 1)
        assert s2["bytes"] - s3["bytes"] >= 100000
        st, h, body = admin(g.admin, "HEAD", "/cache/stats")
        assert st == 200 and body == b"" and int(h["content-length"]) > 0
        # the metrics count the same purge
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_purged_total") == 1
        assert sample(fams, "h2gate_cache_objects") == 1
        assert sample(fams, "h2gate_cache_dropped_total") == 0


def two_routes(port, origin_port, admin_port, drop_route=True, drop_cache="true",
               memory="32MiB"):
    """A gateway whose /k/fresh/drop/ has a route of its own (cache: drop_cache; left out
    when drop_route is False) before the catch-all route, both caching."""
    text = gw_config(port, [f"127.0.0.1:{origin_port}"], route_extra="cache: true\n",
                     extra=f"cache:\n  memory: {memory}\n  max_object: 256KiB\n"
                           f"admin:\n  address: 127.0.0.1:{admin_port}\n")
    if drop_route:
        text = text.replace("routes:\n", "routes:\n  - host: '*'\n    path: /k/fresh/drop/\n"
                                         f"    upstream: app\n    cache: {drop_cache}\n")
    return text


def start_two_routes(gateway, o, **kw):
    port, admin_port = free_port(), free_port()
    text = two_routes(port, o.port, admin_port, **kw)
    g = gateway(text, wait=[("127.0.0.1", port), ("127.0.0.1", admin_port)])
    g.port, g.admin = port, admin_port
    return g


def fill(g, o):
    """5 answers of each route, each fetched once from the origin."""
    for i in range(5):
        for p in (f"/k/fresh/drop/{i}", f"/k/fresh/keep/{i}"):
            hit(g.port, p)
            assert hit(g.port, p)[1]
    s = stats(g)
    assert s["objects"] == 10, s
    return s


def test_a_reload_that_removes_a_route_drops_its_entries(gateway):
    with CountingOrigin() as o:
        g = start_two_routes(gateway, o)
        before = fill(g, o)
        # the /k/fresh/drop/ route is gone: its URLs go to the catch-all route now
        log = reload(g, two_routes(g.port, o.port, g.admin, drop_route=False), 2)
        assert re.search(r"event=cache_kept generation=2 routes=1 dropped=5\b", log), log[-3000:]
        after = stats(g)
        assert (after["objects"], after["dropped"], after["purged"]) == (5, 5, 0)
        assert before["bytes"] - after["bytes"] > 5 * 100
        for i in range(5):
            assert hit(g.port, f"/k/fresh/keep/{i}")[1]  # the other route's entries still hit
            assert not hit(g.port, f"/k/fresh/drop/{i}")[1]  # the origin again
            assert origin_count(o, f"/k/fresh/keep/{i}") == 1
            assert origin_count(o, f"/k/fresh/drop/{i}") == 2
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_dropped_total") == 5


def test_a_reload_that_turns_a_routes_cache_off_drops_its_entries(gateway):
    with CountingOrigin() as o:
        g = start_two_routes(gateway, o)
        fill(g, o)
        reload(g, two_routes(g.port, o.port, g.admin, drop_cache="false"), 2)
        assert (stats(g)["objects"], stats(g)["dropped"]) == (5, 5)
        assert hit(g.port, "/k/fresh/keep/0")[1]
        st, h, _ = h1(g.port, "/k/fresh/drop/0")
        assert "cache-status" not in h  # the route does not cache now
        # the same routes again, cache: true: stored anew, nothing more dropped
        reload(g, two_routes(g.port, o.port, g.admin), 3)
        assert not hit(g.port, "/k/fresh/drop/0")[1] and hit(g.port, "/k/fresh/drop/0")[1]
        assert stats(g)["dropped"] == 5


def test_a_reload_that_changes_cache_memory_starts_an_empty_store(gateway):
    """Documented: a new cache.memory or cache.max_object is a new, empty store, and the old
    one is emptied at the reload (not when the old connections are gone); an unchanged
    section keeps every entry."""
    with CountingOrigin() as o:
        g = start_two_routes(gateway, o)
        fill(g, o)
        log = reload(g, two_routes(g.port, o.port, g.admin).replace("log_level: info",
                                                                      "log_level: debug"), 2)
        assert "event=cache_rebuilt" not in log and stats(g)["objects"] == 10
        log = reload(g, two_routes(g.port, o.port, g.admin, memory="16MiB"), 3)
        assert re.search(r"event=cache_rebuilt generation=3 memory=16777216 max_object=262144 "
                         r"dropped=10 ", log), log[-3000:]
        s = stats(g)
        assert (s["objects"], s["memory"], s["inserts"], s["dropped"]) == (0, 16 << 20, 0, 0)
        assert not hit(g.port, "/k/fresh/keep/0")[1] and hit(g.port, "/k/fresh/keep/0")[1]
        assert origin_count(o, "/k/fresh/keep/0") == 2
        # no caching route left: the store is emptied and the endpoints say there is none
        log = reload(g, gw_config(g.port, [f"127.0.0.1:{o.port}"],
                                     extra=f"admin:\n  address: 127.0.0.1:{g.admin}\n"), 4)
        assert re.search(r"event=cache_off generation=4 dropped=1 ", log), log[-3000:]
        assert admin(g.admin, "GET", "/cache/stats")[0] == 404


def test_a_purge_removes_the_compressed_copies_of_the_url(gateway):
    """A gzip hit stores its copy beside the identity answer (its own key, made of the
    entry's id); a purge of the URL removes both: the store's bytes go back to those of an
    empty store, not to the copy's."""
    with CountingOrigin() as o:
        o.etag_max_age = 60
        g = origin_gateway(gateway, o, route_extra="cache: true\ncompress: true\n", admin=True,
                           extra="cache:\n  memory: 32MiB\n  max_object: 256KiB\n")
        empty = stats(g)["bytes"]
        st, h, body = h1(g.port, "/k/etag/z")
        assert st == 200 and h["cache-status"] == "h2gate; fwd=miss; stored"
        identity = stats(g)
        assert identity["objects"] == 1
        st, h, body = h1(g.port, "/k/etag/z", headers={"Accept-Encoding": "gzip"})
        assert st == 200 and h["content-encoding"] == "gzip" and h["cache-status"].startswith(
            "h2gate; hit")
        deadline = time.monotonic() + slow(5)
        while stats(g)["objects"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the copy is stored once its stream ended
        both = stats(g)
        assert both["objects"] == 2 and both["bytes"] > identity["bytes"]
        assert purge(g, "url", "http://localhost/k/etag/z") == (200, {"purged": 2})
        after = stats(g)
        assert (after["objects"], after["bytes"]) == (0, empty), (empty, after)
        # §4.4's invalidation by an unsafe method takes the copies along too
        h1(g.port, "/k/etag/z")
        h1(g.port, "/k/etag/z", headers={"Accept-Encoding": "gzip"})
        deadline = time.monotonic() + slow(5)
        while stats(g)["objects"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stats(g)["objects"] == 2
        assert h1(g.port, "/k/etag/z", method="POST")[0] == 200
        assert (stats(g)["objects"], stats(g)["bytes"]) == (0, empty)
        assert origin_count(o, "/k/etag/z") == 3


def test_a_purge_or_a_reload_that_empties_the_store_gives_the_memory_back(gateway):
    """As evictions do (a malloc_trim after each memory/16 bytes: store.c's "Memory"), a purge
    or a reload's walk that removes that much trims the heap (on libuv's thread pool, through
    the process's one trimmer: server/heap.c): no put comes after a purge of everything to find
    the trim due."""
    with CountingOrigin() as o:
        g = start_two_routes(gateway, o)
        for i in range(24):  # 24 x 128 KiB: 1.5 steps of 32 MiB / 16
            hit(g.port, f"/k/big/131072?n={i}")
        assert stats(g)["objects"] == 24
        assert "event=cache_trim" not in g.log()  # nothing left the store
        assert purge(g, "url", "http://localhost/k/big/131072?n=0") == (200, {"purged": 1})
        assert "event=cache_trim" not in g.wait_log("event=cache_purged", timeout=2)
        assert purge(g, "prefix", "http://localhost/k/big/") == (200, {"purged": 23})
        assert re.search(r"event=cache_trim after=purge ms=[0-9.]+",
                         g.wait_log("event=cache_trim")), g.log()[-2000:]
        for i in range(24):
            hit(g.port, f"/k/fresh/drop/{i}?pad=" + "x" * 2000)
            hit(g.port, f"/k/big/131072?n={i}")
        # the reload removes the /k/fresh/drop/ route: its entries go, the rest stay
        reload(g, two_routes(g.port, o.port, g.admin, drop_route=False), 2)
        time.sleep(0.3)  # a trim asked by the reload would be logged by now
        assert "event=cache_trim after=reload" not in g.log()  # 24 small answers: not a step
        for i in range(24):
            hit(g.port, f"/k/big/131072?n={i}")
        # no caching route left: the store is emptied, 3 MiB given back
        reload(g, gw_config(g.port, [f"127.0.0.1:{o.port}"],
                               extra=f"admin:\n  address: 127.0.0.1:{g.admin}\n"), 3)
        assert re.search(r"event=cache_trim after=reload ms=[0-9.]+",
                         g.wait_log("event=cache_trim after=reload")), g.log()[-3000:]
        assert g.log().count("event=cache_trim after=reload") == 1, g.log()[-3000:]
