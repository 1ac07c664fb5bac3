"""One path for the shared cache with compression, early hints and push (gateway/proxy/cache.c's
send_hit): a stored identity page is compressed on the way out for each client as a forwarded
answer is (gzip, br, zstd by Accept-Encoding, Vary: Accept-Encoding), an origin's own coding
is served only to clients that decode it, HEAD, Range and 304 on such hits, the 103 of a stored
page, and pushes answered from the store. Origin requests are counted at the scripted origin;
python3-h2 and curl (HTTP/1.1 and HTTP/2) are the clients."""
import gzip
import subprocess
import time

import brotli
import h2.settings
import zstandard

from gwtest import (Client, Streams, all_done, collect, origin_count, origin_gateway, sample,
                    scrape, wait_sample)
from origin import ScriptedOrigin

LINK = "</c/css/app.css>; rel=preload; as=style"


def page_body(name):
    """About 20 KiB of HTML, the same for every request of a name (compare after decoding)."""
    rows = "".join(f"<tr><td>{name} row {i}</td><td>{i * 7919 % 1000}</td></tr>\n"
                   for i in range(560))
    return (f"<!doctype html><title>{name}</title><table>\n{rows}</table>\n").encode()


def noise(name):
    """512 KiB of base64 text from a seeded generator: gzip keeps three quarters of it."""
    import base64
    import random
    return base64.b64encode(random.Random(name).randbytes(3 << 17))


class CodingOrigin(ScriptedOrigin):
    """The /c/ paths, every request counted (origin_count):
        /c/page/NAME   200 text/html, max-age=60, ETag "p1", a Link preload of /c/css/app.css,
                       page_body(NAME) as identity
        /c/big/NAME    the same, 20 times page_body(NAME) (400 KiB)
        /c/rand/NAME   200 text/plain, max-age=60, noise(NAME) (512 KiB that compress little)
        /c/gz/NAME     text/html, max-age=60, gzip when the request's Accept-Encoding lists
                       it bare (Content-Encoding: gzip, no Vary: a legacy origin), else identity
        /c/css/NAME    200 text/css, max-age=60, a short stylesheet naming the request's number
    """

    def _respond(self, c, req):
        path = req.target.split("?")[0]
        if not path.startswith("/c/"):
            return super()._respond(c, req)
        kind, name = path.split("/")[2:4]
        n = origin_count(self, req.target)  # this request is in self.requests already
        fields = [("Cache-Control", "max-age=60")]
        if kind in ("page", "big"):
            body = page_body(name) * (20 if kind == "big" else 1)
            fields += [("Content-Type", "text/html; charset=utf-8"), ("ETag", '"p1"'),
                       ("Link", LINK)]
        elif kind == "rand":
            body = noise(name)
            fields += [("Content-Type", "text/plain")]
        elif kind == "gz":
            body = page_body(name)
            fields += [("Content-Type", "text/html")]
            if "gzip" in [t.strip() for t in (req.header("accept-encoding") or "").split(",")]:
                body = gzip.compress(body, mtime=0)
                fields += [("Content-Encoding", "gzip")]
        else:
            body = f"/* {name} n={n} */ body {{ color: black }}\n".encode()
            fields += [("Content-Type", "text/css")]
        out = "HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
        out += f"Content-Length: {len(body)}\r\n\r\n"
        c.sendall(out.encode() + (b"" if req.method == "HEAD" else body))
        return True


def cgw(gateway, origin, route_extra="", extra="", admin=None):
    return origin_gateway(gateway, origin, route_extra="cache: true\ncompress: true\n" + route_extra,
                          extra="cache:\n  max_object: 1MiB\n" + extra, admin=admin)


def get(cl, path, method="GET", extra=()):
    """(status, {field: value}, body, Streams) of one request on the HTTP/2 client cl."""
    sid = cl.request(path, method=method, extra=list(extra))
    run = collect(cl, Streams(), all_done([sid]), timeout=10)
    assert sid in run.heads and sid not in run.resets, run.resets
    return run.status(sid), dict(run.heads[sid]), run.bodies.get(sid, b""), run


DECODE = {"gzip": gzip.decompress, "br": brotli.decompress,
          "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}


def test_a_stored_page_is_compressed_for_each_client_from_one_origin_request(gateway):
    with CodingOrigin() as o:
        g = cgw(gateway, o)
        plain = page_body("a")
        cl = Client(g.port)
        st, h, body, _ = get(cl, "/c/page/a")  # the miss: identity client
        assert st == 200 and body == plain and "fwd=miss; stored" in h["cache-status"]
        for coding in ("gzip", "br", "zstd", "identity"):
            st, h, body, _ = get(cl, "/c/page/a", extra=[("accept-encoding", coding)])
            assert st == 200 and h["cache-status"].startswith("h2gate; hit"), h
            assert h["vary"] == "Accept-Encoding"
            if coding == "identity":
                assert "content-encoding" not in h and body == plain
                assert h["content-length"] == str(len(plain)) and h["etag"] == '"p1"'
            else:
                assert h["content-encoding"] == coding, h
                assert "content-length" not in h and h["etag"] == 'W/"p1"'
                assert len(body) < len(plain) // 3 and DECODE[coding](body) == plain
        cl.close()
        # independent clients: curl decodes what it is sent, over HTTP/1.1 and HTTP/2
        for proto in ("--http1.1", "--http2-prior-knowledge"):
            r = subprocess.run(["curl", "-s", "--compressed", proto, "-D", "-", "-o", "-",
                                "--connect-to", f"localhost:80:127.0.0.1:{g.port}",
                                "http://localhost/c/page/a"], capture_output=True, timeout=10)
            head, _, body = r.stdout.partition(b"\r\n\r\n")
            head = head.decode().lower()
            assert "content-encoding: zstd" in head and "vary: accept-encoding" in head, head
            assert "cache-status: h2gate; hit" in head and body == plain
        assert origin_count(o, "/c/page/a") == 1


def test_the_first_compressed_hit_keeps_a_copy_that_the_next_ones_are_sent(gateway):
    """One compression per coding and stored answer: the first gzip hit compresses and stores
    its copy, the next gzip hits are sent it (the compressor count stays), a br client gets its
    own; a new answer (the entry replaced) is never answered from the old one's copy."""
    with CodingOrigin() as o:
        g = cgw(gateway, o, admin=True)
        plain = page_body("k")
        cl = Client(g.port)
        get(cl, "/c/page/k")
        bodies = []
        for c in ("gzip", "gzip", "gzip", "br", "br"):
            st, h, body, _ = get(cl, "/c/page/k", extra=[("accept-encoding", c)])
            assert h["content-encoding"] == c and h["cache-status"].startswith("h2gate; hit")
            assert h["vary"] == "Accept-Encoding" and "content-length" not in h
            assert DECODE[c](body) == plain
            bodies.append(body)
        assert bodies[0] == bodies[1] == bodies[2] and bodies[3] == bodies[4]
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_compressed_responses_total", coding="gzip") == 1
        assert sample(fams, "h2gate_compressed_responses_total", coding="br") == 1
        assert sample(fams, "h2gate_cache_objects") == 3  # the page, its gzip and br copies
        assert sample(fams, "h2gate_cache_lookups_total", result="hit") == 5  # a hit each
        assert sample(fams, "h2gate_cache_lookups_total", result="miss") == 1
        # a new answer replaces the page: its gzip hit is compressed anew, not the old copy
        st, h, body, _ = get(cl, "/c/page/k", extra=[("cache-control", "no-cache")])
        assert "fwd=request; stored" in h["cache-status"]
        st, h, body, _ = get(cl, "/c/page/k", extra=[("accept-encoding", "gzip")])
        assert h["cache-status"].startswith("h2gate; hit") and gzip.decompress(body) == plain
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_compressed_responses_total", coding="gzip") == 2
        cl.close()
        assert origin_count(o, "/c/page/k") == 2


def test_a_large_compressed_hit_follows_the_client_window(gateway):
    """A stored page larger than the client's windows is compressed as the client takes it
    (64 KiB of input per refill), whole: two at once on one connection with small windows."""
    with CodingOrigin() as o:
        g = cgw(gateway, o)
        cl = Client(g.port)
        st, _, plain, _ = get(cl, "/c/big/b")
        cl.close()
        assert st == 200 and len(plain) > 300000
        cl = Client(g.port)
        cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 4096})
        cl.flush()
        sids = [cl.request("/c/big/b", extra=[("accept-encoding", c)]) for c in ("gzip", "br")]
        run = collect(cl, Streams(), all_done(sids), timeout=20)
        for s, c in zip(sids, ("gzip", "br")):
            assert run.status(s) == 200 and dict(run.heads[s])["content-encoding"] == c
            assert DECODE[c](run.bodies[s]) == plain
        cl.close()
        assert origin_count(o, "/c/big/b") == 1


def test_a_client_that_leaves_a_compressed_hit_midway_stores_no_copy(gateway):
    """A stream reset while its hit is being compressed drops the compressor and what it made
    (no copy is stored from a cut stream); the next hit compresses whole and keeps its copy."""
    with CodingOrigin() as o:
        g = cgw(gateway, o, admin=True, extra="limits:\n  body_buffer: 16KiB\n")
        cl = Client(g.port)
        st, _, plain, _ = get(cl, "/c/rand/r")
        cl.close()
        cl = Client(g.port)
        cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1024})
        cl.flush()
        sid = cl.request("/c/rand/r", extra=[("accept-encoding", "gzip")])
        run = collect(cl, Streams(), lambda r: sid in r.heads, timeout=10)
        assert dict(run.heads[sid])["content-encoding"] == "gzip"
        cl.c.reset_stream(sid)
        cl.flush()
        # the reset was read and the compressor dropped (a 0.3 s sleep here bet on that)
        assert wait_sample(g.admin, "h2gate_compressors", 0) == 0
        fams, _ = scrape(g.admin)
        assert sample(fams, "h2gate_cache_objects") == 1  # the page alone: no copy
        st, h, body, _ = get(cl, "/c/rand/r", extra=[("accept-encoding", "gzip")])
        assert st == 200 and gzip.decompress(body) == plain
        cl.close()
        # the copy is stored once its stream ended (test_cache_admin.py waits for it too)
        assert wait_sample(g.admin, "h2gate_cache_objects", 2) == 2
        assert origin_count(o, "/c/rand/r") == 1


def test_an_origin_compressed_answer_goes_only_to_clients_that_decode_it(gateway):
    with CodingOrigin() as o:
        g = cgw(gateway, o)
        plain = page_body("g")
        cl = Client(g.port)
        ae = [("accept-encoding", "gzip, deflate")]
        st, h, z1, _ = get(cl, "/c/gz/g", extra=ae)
        assert h["content-encoding"] == "gzip" and "stored" in h["cache-status"]
        st, h, z2, _ = get(cl, "/c/gz/g", extra=ae)  # stored as the origin sent it
        assert h["cache-status"].startswith("h2gate; hit") and z2 == z1
        assert gzip.decompress(z2) == plain and origin_count(o, "/c/gz/g") == 1
        # no Accept-Encoding has no preference (RFC 9110 §12.5.3): the origin's choice
        st, h, z3, _ = get(cl, "/c/gz/g")
        assert h["cache-status"].startswith("h2gate; hit") and h["content-encoding"] == "gzip"
        assert z3 == z1 and origin_count(o, "/c/gz/g") == 1
        # never the stored gzip to a client without gzip: forward, as a miss
        st, h, body, _ = get(cl, "/c/gz/g", extra=[("accept-encoding", "gzip;q=0, br")])
        assert "fwd=miss; stored" in h["cache-status"]  # the identity answer replaces it
        assert "content-encoding" not in h or h["content-encoding"] == "br"
        assert (brotli.decompress(body) if "content-encoding" in h else body) == plain
        for c in (None, "br", "gzip"):  # now from the store, compressed per client
            st, h, body, _ = get(cl, "/c/gz/g", extra=[("accept-encoding", c)] if c else [])
            assert h["cache-status"].startswith("h2gate; hit") and h["vary"] == "Accept-Encoding"
            assert h.get("content-encoding") == c
            assert (DECODE[c](body) if c else body) == plain
        cl.close()
        assert origin_count(o, "/c/gz/g") == 2


def test_head_range_and_304_on_a_compressible_hit(gateway):
    with CodingOrigin() as o:
        g = cgw(gateway, o)
        plain = page_body("r")
        cl = Client(g.port)
        gz = [("accept-encoding", "gzip")]
        get(cl, "/c/page/r")
        # HEAD: the head the GET would get (RFC 9110 §9.3.2)
        st, h, body, _ = get(cl, "/c/page/r", method="HEAD", extra=gz)
        assert st == 200 and body == b"" and h["content-encoding"] == "gzip"
        assert "content-length" not in h and h["vary"] == "Accept-Encoding"
        st, h, body, _ = get(cl, "/c/page/r", method="HEAD")
        assert "content-encoding" not in h and h["content-length"] == str(len(plain))
        assert h["vary"] == "Accept-Encoding"
        # a range is of the identity body (nginx compresses no 206 either)
        st, h, body, _ = get(cl, "/c/page/r", extra=gz + [("range", "bytes=100-199")])
        assert st == 206 and body == plain[100:200] and "content-encoding" not in h
        assert h["content-range"] == f"bytes 100-199/{len(plain)}"
        assert h["vary"] == "Accept-Encoding"
        # 304: the validator of the representation the client holds (RFC 9110 §15.4.5)
        st, h, body, _ = get(cl, "/c/page/r", extra=gz + [("if-none-match", 'W/"p1"')])
        assert st == 304 and body == b"" and h["etag"] == 'W/"p1"', h
        assert h["vary"] == "Accept-Encoding" and "content-encoding" not in h
        st, h, body, _ = get(cl, "/c/page/r", extra=[("if-none-match", '"p1"')])
        assert st == 304 and h["etag"] == '"p1"' and h["vary"] == "Accept-Encoding"
        cl.close()
        assert origin_count(o, "/c/page/r") == 1


def first_103(run, sid):
    return [dict(x).get("link") for x in run.interim.get(sid, []) if dict(x)[":status"] == "103"]


def test_the_103_of_a_stored_page_is_sent_on_a_hit(gateway):
    """The links learned from the stored page go out in a 103 on a hit, even when this
    worker's learned table forgot them (learn_ttl): the stored head teaches it again."""
    with CodingOrigin() as o:
        g = cgw(gateway, o, route_extra="early_hints_learn: true\n",
                extra="early_hints:\n  learn_ttl: 300ms\n")
        nav = [("accept", "text/html"), ("sec-fetch-mode", "navigate")]
        cl = Client(g.port)
        st, h, _, run = get(cl, "/c/page/h", extra=nav)
        assert "fwd=miss" in h["cache-status"] and first_103(run, 1) == []
        time.sleep(0.5)  # the worker's learned entry is past its ttl; the stored page is not
        sid = cl.request("/c/page/h", extra=nav)
        run = collect(cl, Streams(), all_done([sid]), timeout=10)
        assert dict(run.heads[sid])["cache-status"].startswith("h2gate; hit")
        assert first_103(run, sid) == [LINK]
        sid = cl.request("/c/page/h", extra=nav)  # and once learned again, once per request
        run = collect(cl, Streams(), all_done([sid]), timeout=10)
        assert first_103(run, sid) == [LINK]
        cl.close()
        assert origin_count(o, "/c/page/h") == 1


def test_a_push_is_answered_from_the_store(gateway):
    with CodingOrigin() as o:
        g = cgw(gateway, o, route_extra="push: true\n")
        cl = Client(g.port)
        st, _, css, _ = get(cl, "/c/css/app.css")
        assert st == 200 and b"n=1" in css
        cl.close()
        for round_ in range(2):  # the page a miss, then a hit: both push the stored sheet
            cl = Client(g.port)
            sid = cl.request("/c/page/p", extra=[("accept-encoding", "gzip")])
            run = Streams()
            collect(cl, run, lambda r: r.done(sid) and r.promises and
                    all(r.done(p) for p in r.promises), timeout=10)
            cl.close()
            (pid, (parent, ph)), = run.promises.items()
            assert parent == sid and dict(ph)[":path"] == "/c/css/app.css"
            assert run.order.index(("promise", pid)) < run.order.index(("head", sid))
            assert run.bodies[pid] == css and run.status(pid) == 200
            assert dict(run.heads[pid])["cache-status"].startswith("h2gate; hit")
            status = dict(run.heads[sid])["cache-status"]
            assert ("fwd=miss" in status) if round_ == 0 else status.startswith("h2gate; hit")
            assert gzip.decompress(run.bodies[sid]) == page_body("p")
        assert origin_count(o, "/c/css/app.css") == 1 and origin_count(o, "/c/page/p") == 1
