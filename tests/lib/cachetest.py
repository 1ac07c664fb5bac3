"""What the cache tests (tests/integration/test_cache*.py) share: CountingOrigin, the scripted
origin whose /k/ paths answer with the Cache-Control, validators and bodies a cache test asks
for and count each request; one request over HTTP/2 (get; get_new on a connection of its own)
or HTTP/1.1 (h1) with its status, fields and body; a reload that waits for the main thread's
cache walk; the admin listener's GET /cache/stats. Test modules import from here, never from
one another."""
import http.client
import json
import time

from gwtest import Client, Streams, all_done, collect, reload_to
from origin import ScriptedOrigin


def big(n):
    """n bytes where each offset shows (i % 251): a slice out of place does not match."""
    return bytes(i % 251 for i in range(n))


class CountingOrigin(ScriptedOrigin):
    """ScriptedOrigin plus the /k/ paths; every body names the request's number at its path
    (n=1, n=2, ...), so an answer served again from the cache is told from a new one:
        /k/fresh/NAME   200, Cache-Control: max-age=60
        /k/short/NAME   200, Cache-Control: max-age=1
        /k/etag/NAME    200, max-age=self.etag_max_age (and self.etag_cc_extra), ETag "vN" (N:
                        self.version), 2 KB of text; 304 when If-None-Match names it (X-N: the
                        request's number; Cache-Control: self.etag_304_cc when set, then
                        the fields of self.etag_304_fields, a list of pairs); a
                        request with If-None-Match waits until self.etag_hold, a
                        threading.Event, is set when there is one (a slow origin)
        /k/head/NAME    200, Cache-Control: self.head_cc, ETag "vN" (N: self.version), X-N: the
                        number of requests of that method, Last-Modified (self.head_lm), the
                        same 1,010-byte body (Content-Length) for GET and HEAD; a HEAD's fields
                        are those of self.head_fields when set (a list of pairs), as they are
        /k/lm           200, max-age=1, a Last-Modified; 304 (max-age=60) to If-Modified-Since
        /k/lm60         the same with max-age=60
        /k/sie/NAME     200, Cache-Control: max-age=1, stale-if-error=3
        /k/empty        200, max-age=60, an empty body (X-N: the request's number)
        /k/vary         200, max-age=60, Vary: Accept-Language; the body names the language
        /k/private      200, Cache-Control: private, max-age=60
        /k/auth/CC/NAME 200, Cache-Control by CC (public, smaxage, mustrev, plain: max-age=60
                        and the directive, private), the body names the request's
                        Authorization and Cookie (an answer reused for another client shows)
        /k/cookie       200, max-age=60 and Set-Cookie
        /k/nostore      200, Cache-Control: no-store, max-age=60
        /k/big/N        200, max-age=60, big(N)
        /k/chunked/N    200, max-age=60, N bytes chunked (no Content-Length)
        /k/cut          200, max-age=60, Content-Length 10000, 100 bytes sent, then closed
        /k/turn/NAME    200, Cache-Control: max-age=1, stale-if-error=60, ETag "t1", 304 to a
                        matching If-None-Match (an X-Status wins), until self.turns[path] is
                        set to (status, fields, length, framing): from then on every request of
                        the path gets that status (X-Status still wins), those fields and a
                        new body ("turned n=N", padded to length bytes when it is not 0) with
                        a Content-Length ("length"), chunked ("chunked"), or cut after its
                        first 100 bytes ("cut": the connection closes): never a 304 (a full
                        answer to a revalidation)
        /k/turnnv/NAME  the same without an ETag (no validator: a stale entry is asked for
                        without a condition)
        /k/turnvary/NAME the same as /k/turn/ with Vary: Accept-Language, the ETag and the
                        body naming the language ("t1-en")
    Any method; a request with X-Status answers that status (POST /k/fresh/x with X-Status: 500),
    one with X-Location or X-Content-Location gets that value as its Location or
    Content-Location (what an unsafe method's answer names, RFC 9111 §4.4)."""

    def __init__(self):
        self.counts = {}
        self.version = 1  # /k/etag/: the ETag "vN" and the body it answers
        self.etag_max_age = 1  # /k/etag/: the max-age of its answers (200 and 304)
        self.etag_cc_extra = ""  # /k/etag/: appended to the 200's and 304's Cache-Control
        self.etag_304_cc = None  # /k/etag/: the 304's Cache-Control, when set
        self.etag_304_fields = []  # /k/etag/: more fields of the 304
        self.etag_hold = None  # /k/etag/: an Event a conditional request waits for (60 s at most)
        self.head_cc = "max-age=60"  # /k/head/
        self.head_lm = "Sat, 05 Dec 2026 10:00:00 GMT"
        self.head_fields = None
        self.auth_delay = 0.0  # /k/auth/: seconds before answering
        self.turns = {}  # /k/turn/, /k/turnnv/: path -> (status, fields, length, chunked)
        super().__init__()

    def _respond(self, c, req):
        path = req.target.split("?")[0]
        if not path.startswith("/k/"):
            return super()._respond(c, req)
        parts = path.split("/")[2:]
        with self.lock:
            n = self.counts[(req.method, path)] = self.counts.get((req.method, path), 0) + 1
        head_only = req.method == "HEAD"
        status = int(req.header("x-status") or 200)

        def send(fields, body):
            fields = fields + [(k, req.header("x-" + k.lower()))
                               for k in ("Location", "Content-Location")
                               if req.header("x-" + k.lower())]
            out = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
            out += f"Content-Length: {len(body)}\r\n\r\n"
            c.sendall(out.encode("latin-1") + (b"" if head_only else body))

        body = f"{req.method} {path} n={n}\n".encode()
        kind = parts[0]
        if kind == "fresh":
            send([("Cache-Control", "max-age=60"), ("ETag", '"e1"')], body)
        elif kind == "etag":  # RFC 9111 §4.3: 304 to a matching If-None-Match
            tag = f'"v{self.version}"'
            hold = self.etag_hold
            if req.header("if-none-match") and hold is not None:
                hold.wait(60)  # held until the test releases it
            fields = [("Cache-Control", f"max-age={self.etag_max_age}{self.etag_cc_extra}"),
                      ("ETag", tag), ("X-N", str(n)),
                      ("Content-Type", "text/plain")]
            if req.header("if-none-match") == tag:
                if self.etag_304_cc is not None:
                    fields[0] = ("Cache-Control", self.etag_304_cc)
                c.sendall(b"HTTP/1.1 304 Not Modified\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in fields + self.etag_304_fields
                    if k != "Content-Type").encode() + b"\r\n")
            else:
                send(fields, f"version {self.version} ".encode() + b"text " * 400 + body)
        elif kind == "head":  # RFC 9111 §4.3.5: a HEAD's answer describes the GET's
            fields = [("Cache-Control", self.head_cc), ("ETag", f'"v{self.version}"'),
                      ("Last-Modified", self.head_lm), ("X-N", str(n))]
            if head_only and self.head_fields is not None:
                fields = self.head_fields
            send(fields, f"version {self.version}\n".encode() + b"h" * 1000)
        elif kind in ("lm", "lm60"):  # Last-Modified only: If-Modified-Since
            lm = "Sat, 05 Dec 2026 10:00:00 GMT"
            fields = [("Cache-Control", "max-age=1" if kind == "lm" else "max-age=60"), ("Last-Modified", lm), ("X-N", str(n))]
            if req.header("if-modified-since") == lm:  # the 304 makes it fresh for a minute
                fields[0] = ("Cache-Control", "max-age=60")
                c.sendall(b"HTTP/1.1 304 Not Modified\r\n" +
                          "".join(f"{k}: {v}\r\n" for k, v in fields).encode() + b"\r\n")
            else:
                send(fields, body)
        elif kind in ("turn", "turnnv", "turnvary"):  # the resource changes (RFC 9111 §4.3.3)
            turn = self.turns.get(path)
            if turn is None:
                fields = [("Cache-Control", "max-age=1, stale-if-error=60")]
                tag = '"t1"'
                if kind == "turnvary":
                    lang = req.header("accept-language") or "none"
                    tag = f'"t1-{lang}"'
                    fields.append(("Vary", "Accept-Language"))
                    body = f"lang={lang} ".encode() + body
                if kind != "turnnv":
                    fields.append(("ETag", tag))
                    if req.header("if-none-match") == tag and status == 200:
                        c.sendall(b"HTTP/1.1 304 Not Modified\r\n" + "".join(
                            f"{k}: {v}\r\n" for k, v in fields).encode() + b"\r\n")
                        return True
                send(fields, body)
                return True
            tstatus, fields, length, framing = turn
            status = int(req.header("x-status") or tstatus)
            data = f"turned n={n}\n".encode()
            data += b"t" * max(0, length - len(data))
            if framing == "length":
                send(fields, data)
                return True
            if framing == "cut":
                c.sendall((f"HTTP/1.1 {status} X\r\n" +
                           "".join(f"{k}: {v}\r\n" for k, v in fields) +
                           f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:100])
                time.sleep(0.2)
                return False  # closed midway
            c.sendall((f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
                       + "Transfer-Encoding: chunked\r\n\r\n").encode())
            for i in range(0, len(data), 10000):
                piece = data[i:i + 10000]
                c.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            c.sendall(b"0\r\n\r\n")
        elif kind == "sie":  # RFC 5861 §4
            send([("Cache-Control", "max-age=1, stale-if-error=3")], body)
        elif kind == "empty":
            send([("Cache-Control", "max-age=60"), ("X-N", str(n))], b"")
        elif kind == "short":
            send([("Cache-Control", "max-age=1")], body)
        elif kind == "vary":
            lang = req.header("accept-language") or "none"
            send([("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                 f"lang={lang} ".encode() + body)
        elif kind == "private":
            send([("Cache-Control", "private, max-age=60")], body)
        elif kind == "auth":  # RFC 9111 §3.5: what may be stored of an authorized request
            cc = {"public": "public, max-age=60", "smaxage": "s-maxage=60",
                  "mustrev": "must-revalidate, max-age=60", "plain": "max-age=60",
                  "private": "private, max-age=60"}[parts[1]]
            who = f"auth={req.header('authorization')} cookie={req.header('cookie')}\n"
            time.sleep(self.auth_delay)  # requests in flight at once: coalescing's turn
            send([("Cache-Control", cc)], body + who.encode())
        elif kind == "cookie":
            send([("Cache-Control", "max-age=60"), ("Set-Cookie", f"s={n}")], body)
        elif kind == "nostore":
            send([("Cache-Control", "no-store, max-age=60")], body)
        elif kind == "big":
            send([("Cache-Control", "max-age=60")], big(int(parts[1])))
        elif kind == "chunked":  # no Content-Length: the size is known only at the end
            data = b"k" * int(parts[1])
            c.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(data), 10000):
                piece = data[i:i + 10000]
                c.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            c.sendall(b"0\r\n\r\n")
        elif kind == "cut":
            c.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
                      b"Content-Length: 10000\r\n\r\n" + b"c" * 100)
            time.sleep(0.2)
            return False  # closed midway: the gateway must not keep it
        else:
            send([], body)
        return True


def get(cl, path, method="GET", extra=(), timeout=10):
    """One request on the HTTP/2 client cl: (status, {field: value}, body); status None when
    the stream was reset."""
    sid = cl.request(path, method=method, extra=extra)
    run = collect(cl, Streams(), all_done([sid]), timeout=timeout)
    if sid not in run.heads or sid in run.resets:
        return None, {}, run.bodies.get(sid, b"")
    return run.status(sid), dict(run.heads[sid]), run.bodies.get(sid, b"")


def get_at(port, authority, path):
    """One HTTP/2 GET of path with that :authority, on a connection of its own: get()'s
    answer."""
    cl = Client(port)
    try:
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                (":authority", authority)], end_stream=True)
        cl.flush()
        run = collect(cl, Streams(), all_done([sid]), timeout=10)
        if sid not in run.heads or sid in run.resets:
            return None, {}, run.bodies.get(sid, b"")
        return run.status(sid), dict(run.heads[sid]), run.bodies.get(sid, b"")
    finally:
        cl.close()


def get_new(port, path, **kw):
    """get() on a connection of its own, closed after it: another client's request."""
    cl = Client(port)
    try:
        return get(cl, path, **kw)
    finally:
        cl.close()


def exchange(port, method, target, headers):
    """One HTTP/1.1 request on a new connection: (status, {field: value} lowercased, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, target, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def h1(port, path, method="GET", headers=None):
    """One HTTP/1.1 request for Host localhost: exchange()'s answer."""
    return exchange(port, method, path, {"Host": "localhost", **(headers or {})})


def reload(g, text, generation):
    """reload_to, and the log once the main thread finished the reload (its cache walk)."""
    reload_to(g, text, generation)
    return g.wait_log(f"event=reloaded generation={generation} ")


def admin(port, method, target):
    """One request to the admin listener: exchange()'s answer."""
    return exchange(port, method, target, {})


def stats(g):
    st, h, body = admin(g.admin, "GET", "/cache/stats")
    assert st == 200 and h["content-type"] == "application/json", (st, body)
    return json.loads(body)
