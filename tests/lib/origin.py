"""A scripted HTTP/1.1 origin that can misbehave on command, run in the test's own process.

    with ScriptedOrigin() as o:          # listens on 127.0.0.1:o.port
        ... requests through the gateway ...
        o.connections      # accepted TCP connections so far
        o.requests         # list of Request(method, target, version, headers, body)

The path chooses the behaviour (query strings are ignored unless noted):
    /bytes/N          200 with N bytes (content-length), body is a repeating pattern
    /chunked/N        200 with N bytes chunked, with a trailer `x-checksum: <sha1>`
    /close/N          200, no content-length, N bytes then close (close-delimited)
    /echo             200, JSON of what the origin received (method, target, headers, body sha1)
    /status/N         status N with a short body (no body for 204/304); ?h=NAME:VALUE adds a field
    /early-hints      103 with a Link header, then 200
    /continue         100 Continue, then 200
    /truncate         content-length 1000 but only 10 bytes, then close
    /hang             read the request, answer nothing, keep the socket open
    /wait/MS          200 "waited" (content-length) after MS ms; meanwhile the socket is watched,
                      and the gateway closing the connection ends it at once (open_connections)
    /hang-body        send the head with content-length 100, then stall
    /garbage          bytes that are not HTTP
    /dup-cl           two differing Content-Length headers
    /cl-te            Content-Length and Transfer-Encoding: chunked together
    /bad-header       a header value with a bare CR
    /conn-close       200 with `Connection: close`, then close
    /http10           HTTP/1.0 200 without keep-alive
    /slow/N           200, N bytes sent in 10 pieces 100 ms apart
    /private/N        200 with N bytes and Cache-Control: private
    /cookie/N         200 with N bytes and a Set-Cookie
    /prio/N/U         200 with N bytes and `Priority: u=U` (RFC 9218 §8 response priority)
    /reject/N         status N at once after the head, the request body left unread; then close
    /stall-read       read the head, then never read again (the uploader fills the socket)
    /drop-once/KEY    the first request for KEY: close without a byte; later ones: 200 "ok"
    /text/N           200, N bytes of text/plain (content-length); ?h=NAME:VALUE adds a field
    /text-chunked/N   the same, chunked in 7000-byte pieces (?trailer=1: an x-checksum trailer)
    /text-slow/N      200, text/plain, no length, N bytes in 10 pieces 200 ms apart
    /page-links/MS    after MS ms, 200 text/html with Link: preload, modulepreload, preconnect
                      and prefetch values (?h=NAME:VALUE adds fields)
    /hints-for/MS     after MS/2 ms a 103 whose Link preloads what the request carried:
                      </lang/<accept-language>.css> and, with a Cookie, </private/<cookie>/inbox.json>
                      (?i=NAME:VALUE adds fields to the 103); MS/2 ms later 200 text/html
                      "Hello <cookie>" ("Hello anonymous" without one), then " in <accept-language>"
                      when there is one (?h=NAME:VALUE adds fields)
    /reflect/MS       after MS ms 200 text/html whose Link preloads </api/data?<the query>> and,
                      for each query parameter, </p/<its value>>
    /ws-bad-accept    101 with Upgrade: websocket and a Sec-WebSocket-Accept that matches no key
    /ws-no-upgrade    101 without an Upgrade field
    /ws-refuse        403 with a body (an origin that refuses the WebSocket), keep-alive
    /ws-200-html      200 text/html with a body instead of a 101 (an origin that ignores
                      Upgrade), keep-alive
    /ws-204           204 instead of a 101
    /ws-200-then-frame  200 with Content-Length: 2 "ok", then at once a WebSocket text frame
                      "hello" as if the switch had happened anyway; the connection stays open
    /ws-200-then-late  200 with Content-Length: 2 "ok", then 0.3 s later a 200 "evil" nobody
                      asked for (an origin that switched to something after all)
    /ws-101           a 101 made from the request's Sec-WebSocket-Key, then a WebSocket text
                      frame "hello"; ?u=TOKEN sets its Upgrade (default websocket, "-" none),
                      ?c=TOKEN its Connection (default Upgrade, "-" none), ?a=bad a wrong
                      Sec-WebSocket-Accept, ?a=- none, ?a=twice the right one twice
    /text-paced/N     text_hex(N) as text/plain with its length, the head 0.3 s after the
                      request (identical requests join it), then 64 KiB every 20 ms
Anything else: 404.
"""
import base64
import hashlib
import json
import select
import socket
import threading
import time
import urllib.parse


class Request:
    def __init__(self, method, target, version, headers, body):
        self.method, self.target, self.version = method, target, version
        self.headers, self.body = headers, body
        self.answered_at = None  # ScriptedOrigin: when its answer was handed to the socket

    def header(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return vals[0] if len(vals) == 1 else (vals or None)

    def __repr__(self):
        return f"Request({self.method} {self.target} {self.headers!r} body={len(self.body)}B)"


def text_pattern(n):
    """n bytes of text that compresses (words with a counter)."""
    out, i, have = [], 0, 0
    while have < n:
        line = f"line {i} of the text body, repeated with a number\n".encode()
        out.append(line)
        have += len(line)
        i += 1
    return b"".join(out)[:n]


def text_hex(n):
    """n bytes of text that compresses about 2:1 (hex digits of a hash chain)."""
    out, h, have = [], b"seed", 0
    while have < n:
        h = hashlib.sha256(h).digest()
        out.append(h.hex().encode() + b"\n")
        have += 65
    return b"".join(out)[:n]


def pattern(n):
    base = b"0123456789abcdefghijklmnopqrstuvwxyz\n"
    return (base * (n // len(base) + 1))[:n]


def ok_then_unsolicited(c, delay, late):
    """A 200 "ok" on c, then, delay seconds later, late: bytes nobody asked for."""
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    time.sleep(delay)
    c.sendall(late)


# Answers written as they are, after which the connection closes: cut short or malformed.
CUT_ANSWERS = {
    "truncate": b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789",
    "garbage": b"\x00\x01garbage that is not HTTP\r\n\r\n",
    "dup-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "cl-te": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5\r\nhello\r\n0\r\n\r\n",
    "bad-header": b"HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 2\r\n\r\nok",
}


class ThreadedServer:
    """A TCP server on a free port of host that serves each connection on a thread of its own:
    a subclass defines _serve(conn), and sets what _serve uses before calling this __init__
    (the first connection may come at once). Counts the connections accepted; stopping tells
    the threads to end."""

    def __init__(self, backlog=64, host="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.connections = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accepted(self, c):
        """Called under the lock for each connection accepted, before it is served."""

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self._accepted(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def close(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass


class ScriptedOrigin(ThreadedServer):
    def __init__(self, host="127.0.0.1"):
        self.open_connections = 0
        self.max_open_connections = 0
        self.requests = []
        self.answered = []  # the requests whose answer _respond has handed to the socket
                            # (each with answered_at: time.monotonic() then)
        self._dropped = set()
        self._clients = []
        super().__init__(backlog=512, host=host)

    def close(self):
        self.stopping = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        super().close()
        for c in list(self._clients):
            try:
                c.close()
            except OSError:
                pass

    def _accepted(self, c):
        self.open_connections += 1
        self.max_open_connections = max(self.max_open_connections, self.open_connections)
        self._clients.append(c)

    # -- parsing -------------------------------------------------------------------------------
    @staticmethod
    def _read_head(c, buf):
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return None, buf
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        return head, rest

    @staticmethod
    def _read_body(c, headers, rest):
        h = {k.lower(): v for k, v in headers}
        if h.get("transfer-encoding", "").lower() == "chunked":
            body = bytearray()
            buf = rest
            while True:
                while b"\r\n" not in buf:
                    buf += c.recv(65536)
                line, _, buf = buf.partition(b"\r\n")
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while b"\r\n\r\n" not in b"\r\n" + buf:
                        buf += c.recv(65536)
                    idx = (b"\r\n" + buf).index(b"\r\n\r\n")
                    return bytes(body), buf[idx + 2:]
                while len(buf) < size + 2:
                    buf += c.recv(65536)
                body += buf[:size]
                buf = buf[size + 2:]
        n = int(h.get("content-length", "0"))
        got = bytearray(rest)  # amortised appends: 100 MiB bodies stay linear
        while len(got) < n:
            d = c.recv(1 << 20)
            if not d:
                break
            got += d
        return bytes(got[:n]), bytes(got[n:])

    def _serve(self, c):
        buf = b""
        try:
            while not self.stopping:
                head, buf = self._read_head(c, buf)
                if head is None:
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                headers = []
                for l in lines[1:]:
                    k, _, v = l.partition(":")
                    headers.append((k, v.strip()))
                if {k.lower(): v for k, v in headers}.get("expect", "").lower() == "100-continue":
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                early = target.split("?")[0]
                if early.startswith("/reject/") or early == "/stall-read":
                    req = Request(method, target, version, headers, b"")
                    with self.lock:
                        self.requests.append(req)
                    if early == "/stall-read":
                        while not self.stopping:
                            time.sleep(0.05)
                        return
                    st = int(early.split("/")[2])
                    c.sendall(f"HTTP/1.1 {st} Early\r\nContent-Length: 6\r\nConnection: close\r\n\r\nearly\n".encode())
                    time.sleep(0.5)  # let the gateway read it before the close
                    return
                body, buf = self._read_body(c, headers, buf)
                req = Request(method, target, version, headers, body)
                with self.lock:
                    self.requests.append(req)
                keep = self._respond(c, req)
                req.answered_at = time.monotonic()  # its last byte handed to the socket
                with self.lock:
                    self.answered.append(req)
                if not keep:
                    return
        except (OSError, ValueError):
            return
        finally:
            with self.lock:
                self.open_connections -= 1
            try:
                c.close()
            except OSError:
                pass

    # -- behaviours: return False to close the connection ---------------------------------------
    def _respond(self, c, req):
        path = req.target.split("?")[0]
        parts = path.strip("/").split("/")
        kind = parts[0]
        arg = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        head_only = req.method == "HEAD"

        def send(status, headers, body=b"", reason="OK"):
            out = f"HTTP/1.1 {status} {reason}\r\n"
            for k, v in headers:
                out += f"{k}: {v}\r\n"
            c.sendall(out.encode("latin-1") + b"\r\n" + (b"" if head_only else body))

        query = req.target.split("?", 1)[1] if "?" in req.target else ""
        extra = [tuple(urllib.parse.unquote(q[2:]).split(":", 1)) for q in query.split("&")
                 if q.startswith("h=") and ":" in q]
        if kind == "page-links":
            time.sleep(arg / 1000.0)
            body = b"<!doctype html><title>p</title>" + b"x" * 1000
            send(200, [("Content-Type", "text/html"), ("Content-Length", str(len(body))),
                       ("Link", "</hinted.css>; rel=preload; as=style, </app.mjs>; rel=modulepreload"),
                       ("Link", "<https://cdn.example>; rel=preconnect, </later.html>; rel=prefetch")]
                 + extra, body)
            return True
        if kind == "hints-for":
            lang, cookie = req.header("accept-language") or "none", req.header("cookie")
            links = [f"</lang/{lang}.css>; rel=preload; as=style"]
            if cookie:
                links.append(f"</private/{cookie}/inbox.json>; rel=preload; as=fetch")
            interim = [tuple(urllib.parse.unquote(q[2:]).split(":", 1)) for q in query.split("&")
                       if q.startswith("i=") and ":" in q]
            time.sleep(arg / 2000.0)
            c.sendall(b"HTTP/1.1 103 Early Hints\r\n" +
                      b"".join(f"{k}: {v}\r\n".encode() for k, v in
                               [("Link", ", ".join(links))] + interim) + b"\r\n")
            time.sleep(arg / 2000.0)
            body = f"Hello {cookie or 'anonymous'}".encode()
            if req.header("accept-language"):
                body += f" in {lang}".encode()
            send(200, [("Content-Type", "text/html"), ("Content-Length", str(len(body))),
                       ("Link", ", ".join(links))] + extra, body)
            return True
        if kind == "reflect":
            time.sleep(arg / 1000.0)
            links = [f"</api/data?{query}>; rel=preload; as=fetch"] if query else []
            links += [f"</p/{q.partition('=')[2]}>; rel=preload; as=fetch"
                      for q in query.split("&") if q.partition("=")[2]]
            links.append("</static/site.css>; rel=preload; as=style")
            body = b"<!doctype html><title>r</title>"
            send(200, [("Content-Type", "text/html"), ("Content-Length", str(len(body))),
                       ("Link", ", ".join(links))], body)
            return True
        if kind == "push-page":
            # /push-page/<ms>?p=<target>&p=...[&s=<status>]: a page after <ms> whose Link field
            # preloads each target (server push)
            time.sleep(arg / 1000.0)
            links = [urllib.parse.unquote(q[2:]) for q in query.split("&") if q.startswith("p=")]
            body = b"<!doctype html><title>push</title>" + b"y" * 500
            hs = [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]
            if links:
                hs.append(("Link", ", ".join(f"<{t}>; rel=preload; as=style" for t in links)))
            status = next((int(q[2:]) for q in query.split("&") if q.startswith("s=")), 200)
            send(status, hs + extra, body)
            return True
        if kind == "late":
            # /late/<ms>/<n>: n pattern bytes after <ms>, head and all (a slow subresource)
            time.sleep(arg / 1000.0)
            body = pattern(int(parts[2]) if len(parts) > 2 else 100)
            send(200, [("Content-Type", "text/css"), ("Content-Length", str(len(body)))] + extra,
                 body)
            return True
        if kind == "hinted.css":
            body = b"body { color: rgb(1, 2, 3); }\n"
            # cacheable: Chromium keeps what a 103 made it fetch in its HTTP cache
            send(200, [("Content-Type", "text/css"), ("Content-Length", str(len(body))),
                       ("Cache-Control", "max-age=60")], body)
            return True
        if kind == "ws-bad-accept":
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n")
            time.sleep(1)
            return False
        if kind == "ws-no-upgrade":
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n")
            time.sleep(1)
            return False
        if kind == "ws-refuse":
            send(403, [("Content-Length", "8")], b"refused\n", reason="Forbidden")
            return True
        if kind == "ws-200-html":
            body = b"<!doctype html><title>not a websocket</title><p>hello</p>\n"
            send(200, [("Content-Type", "text/html"), ("Content-Length", str(len(body)))], body)
            return True
        if kind == "ws-204":
            send(204, [], reason="No Content")
            return True
        if kind == "ws-200-then-frame":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\x81\x05hello")
            return True
        if kind == "ws-200-then-late":
            ok_then_unsolicited(c, 0.3, b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
            return True
        if kind == "ws-101":
            opt = dict(q.split("=", 1) for q in query.split("&") if "=" in q)
            key = req.header("sec-websocket-key") or ""
            key = key[0] if isinstance(key, list) else key
            acc = base64.b64encode(hashlib.sha1(
                (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            hs = []
            if opt.get("u", "websocket") != "-":
                hs.append(("Upgrade", opt.get("u", "websocket")))
            if opt.get("c", "Upgrade") != "-":
                hs.append(("Connection", opt.get("c", "Upgrade")))
            a = opt.get("a", "good")
            if a == "bad":
                hs.append(("Sec-WebSocket-Accept", base64.b64encode(b"x" * 20).decode()))
            elif a != "-":
                hs += [("Sec-WebSocket-Accept", acc)] * (2 if a == "twice" else 1)
            send(101, hs, reason="Switching Protocols")
            c.sendall(b"\x81\x05hello")
            time.sleep(1)
            return False
        if kind == "text-paced":
            time.sleep(0.3)
            body = text_hex(arg)
            c.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode())
            if not head_only:
                for i in range(0, len(body), 65536):
                    c.sendall(body[i:i + 65536])
                    time.sleep(0.02)
            return True
        if kind in ("text", "text-chunked", "text-slow"):
            body = text_pattern(arg)
            hs = [("Content-Type", "text/plain; charset=utf-8")] + extra
            if kind == "text":
                send(200, [("Content-Length", str(len(body)))] + hs, body)
            elif kind == "text-chunked":
                c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" +
                          b"".join(f"{k}: {v}\r\n".encode() for k, v in hs) + b"\r\n")
                if not head_only:
                    for i in range(0, len(body), 7000):
                        piece = body[i:i + 7000]
                        c.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                    # ?trailer=1: a trailer field with the body's sha256
                    tr = (b"x-checksum: " + hashlib.sha256(body).hexdigest().encode() + b"\r\n"
                          if "trailer=1" in query else b"")
                    c.sendall(b"0\r\n" + tr + b"\r\n")
            else:
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" +
                          b"".join(f"{k}: {v}\r\n".encode() for k, v in hs) + b"\r\n")
                step = max(1, len(body) // 10)
                for i in range(0, len(body), step):
                    c.sendall(body[i:i + step])
                    time.sleep(0.2)
                return False
            return True
        if kind == "prio":
            body = pattern(arg)
            u = parts[2] if len(parts) > 2 else "3"
            send(200, [("Content-Length", str(len(body))), ("Priority", f"u={u}")], body)
        elif kind == "bytes":
            body = pattern(arg)
            send(200, [("Content-Length", str(len(body))), ("Content-Type", "application/octet-stream")], body)
        elif kind == "chunked":
            body = pattern(arg)
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-checksum\r\n\r\n")
            if not head_only:
                for i in range(0, len(body), 7000):
                    piece = body[i:i + 7000]
                    c.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                c.sendall(b"0\r\nx-checksum: " + hashlib.sha1(body).hexdigest().encode() + b"\r\n\r\n")
        elif kind in ("close", "close-ragged"):
            # a close-delimited body; over TLS "close" ends with close_notify, "close-ragged"
            # with a bare TCP FIN (an incomplete close, RFC 9112 §9.8)
            c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + pattern(arg))
            if kind == "close-ragged" and hasattr(c, "ragged"):
                c.ragged = True
            return False
        elif kind == "echo":
            body = json.dumps({"method": req.method, "target": req.target, "version": req.version,
                               "headers": req.headers, "body_len": len(req.body),
                               "body_sha1": hashlib.sha1(req.body).hexdigest()}).encode()
            send(200, [("Content-Length", str(len(body))), ("Content-Type", "application/json")], body)
        elif kind == "status":
            if arg in (204, 304):
                send(arg, [], b"", reason="Status")
            else:
                body = f"status {arg}\n".encode()
                send(arg, [("Content-Length", str(len(body)))] + extra, body, reason="Status")
        elif kind == "early-hints":
            c.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n")
            send(200, [("Content-Length", "5"), ("Link", "</style.css>; rel=preload; as=style")], b"hello")
        elif kind == "continue":
            c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            send(200, [("Content-Length", "2")], b"ok")
        elif kind in CUT_ANSWERS:
            c.sendall(CUT_ANSWERS[kind])
            return False
        elif kind == "wait":
            deadline = time.monotonic() + arg / 1000.0
            while not self.stopping and time.monotonic() < deadline:
                r, _, _ = select.select([c], [], [], min(0.05, max(0.0, deadline - time.monotonic())))
                if r and not c.recv(1, socket.MSG_PEEK):
                    return False  # the gateway closed the connection: no answer is owed
                if r:
                    time.sleep(0.01)  # a next request already: it waits its turn
            send(200, [("Content-Length", "7")], b"waited\n")
            return True
        elif kind == "hang":
            while not self.stopping and c.recv(65536):
                pass
            return False
        elif kind == "hang-body":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            while not self.stopping and c.recv(65536):
                pass
            return False
        elif kind == "conn-close":
            send(200, [("Content-Length", "2"), ("Connection", "close")], b"ok")
            return False
        elif kind == "conn-named":
            # Connection names X-Hop (5 letters); X-Hoq has its length, the long name its length
            # modulo 64: neither is named, both must reach the client
            send(200, [("Content-Length", "2"), ("Connection", "keep-alive, X-Hop"),
                       ("X-Hop", "1"), ("X-Hoq", "2"), ("Keep-Alive", "timeout=5"),
                       ("X-" + "l" * 67, "3")], b"ok")
        elif kind == "http10":
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            return False
        elif kind in ("private", "cookie"):
            body = pattern(arg)
            extra = ("Cache-Control", "private") if kind == "private" else ("Set-Cookie", "id=1")
            time.sleep(0.1)  # so that every identical request is waiting
            send(200, [("Content-Length", str(len(body))), extra], body)
        elif kind == "drop-once":
            with self.lock:
                first = path not in self._dropped
                self._dropped.add(path)
            if first:
                return False
            send(200, [("Content-Length", "2")], b"ok")
        elif kind == "slow":
            body = pattern(arg)
            c.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            step = max(1, len(body) // 10)
            for i in range(0, len(body), step):
                time.sleep(0.1)
                c.sendall(body[i:i + step])
        else:
            send(404, [("Content-Length", "10")], b"not found\n", reason="Not Found")
        return True
