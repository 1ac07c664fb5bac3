"""The shared cache across a reload that changes which route takes a URL: a lookup is answered
only by what its own route stored (gateway/cache/store.c: "Routes"). A reload that puts a new
caching route, with another upstream, in front of the one that stored a URL sends the next
request for it to the new upstream (not the old route's entry), whose answer replaces the
entry; the URLs the old route keeps still hit. Origin requests are counted at two scripted
origins (test_cache's CountingOrigin)."""
from procs import free_port
from cachetest import CountingOrigin, h1, reload, stats

from gwtest import gw_config, origin_count


def config(port, admin_port, old_port, new_port=None):
    """One caching route to the upstream app (old_port); with new_port, a caching route for
    /k/fresh/api/ to the upstream new (new_port) in front of it."""
    text = gw_config(port, [f"127.0.0.1:{old_port}"], route_extra="cache: true\n",
                     extra="cache:\n  memory: 32MiB\n  max_object: 256KiB\n"
                           f"admin:\n  address: 127.0.0.1:{admin_port}\n")
    if new_port:
        text = text.replace("routes:\n", f"  new:\n    servers: [127.0.0.1:{new_port}]\n"
                                         "routes:\n  - host: '*'\n    path: /k/fresh/api/\n"
                                         "    upstream: new\n    cache: true\n")
    return text


def get(port, path):
    """GET path: (body, Cache-Status)."""
    st, h, body = h1(port, path)
    assert st == 200, (path, st, body)
    return body, h["cache-status"]


def test_a_route_put_in_front_by_a_reload_is_not_answered_from_the_old_routes_entries(gateway):
    with CountingOrigin() as old, CountingOrigin() as new:
        port, admin_port = free_port(), free_port()
        g = gateway(config(port, admin_port, old.port),
                    wait=[("127.0.0.1", port), ("127.0.0.1", admin_port)])
        g.port, g.admin = port, admin_port
        for p in ("/k/fresh/api/1", "/k/fresh/other"):
            assert not get(port, p)[1].startswith("h2gate; hit")
            assert get(port, p)[1].startswith("h2gate; hit")
            assert origin_count(old, p) == 1
        assert stats(g)["objects"] == 2

        # /k/fresh/api/ is the new upstream's now: its request goes there, not to the entry
        # the old route stored from the old upstream
        reload(g, config(port, admin_port, old.port, new.port), 2)
        body, cs = get(port, "/k/fresh/api/1")
        assert not cs.startswith("h2gate; hit") and "fwd=miss" in cs, cs
        assert (origin_count(new, "/k/fresh/api/1"), origin_count(old, "/k/fresh/api/1")) == (1, 1)
        assert body == b"GET /k/fresh/api/1 n=1\n"
        # its answer replaced the old entry, and is what the next requests get
        for _ in range(3):
            body, cs = get(port, "/k/fresh/api/1")
            assert cs.startswith("h2gate; hit") and body == b"GET /k/fresh/api/1 n=1\n", cs
        assert origin_count(new, "/k/fresh/api/1") == 1
        s = stats(g)
        assert (s["objects"], s["dropped"]) == (2, 0), s
        # the URLs the old route keeps still hit its entries
        assert get(port, "/k/fresh/other")[1].startswith("h2gate; hit")
        assert origin_count(old, "/k/fresh/other") == 1

        # and back: the new route is gone (its entry dropped), the old route asks its upstream
        reload(g, config(port, admin_port, old.port), 3)
        assert stats(g)["dropped"] == 1
        assert not get(port, "/k/fresh/api/1")[1].startswith("h2gate; hit")
        assert (origin_count(new, "/k/fresh/api/1"), origin_count(old, "/k/fresh/api/1")) == (1, 2)
        assert get(port, "/k/fresh/api/1")[1].startswith("h2gate; hit")
        assert origin_count(new, "/k/fresh/api/1") == 1
