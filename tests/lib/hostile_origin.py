"""A hostile HTTP/1.1 origin for the fault tests: each path misbehaves one way.

    /reset-before          RST (SO_LINGER 0) before any byte of a response
    /reset-mid-head        part of a status line and fields, then RST
    /reset-mid-body-cl     Content-Length: 100000, 1000 bytes, then RST
    /reset-mid-body-chunked  a chunked head and one chunk, then RST
    /more-than-cl          Content-Length: 10 and 20 bytes, connection kept open
    /fewer-then-close      Content-Length: 100, 50 bytes, then a clean close
    /chunk-overflow        a chunk size of 20 hex digits (past 64 bits)
    /chunk-ext-1mib        a chunk size line with a 1 MiB extension
    /trailer-1mib          a chunked body whose trailer field is 1 MiB
    /many-headers          100,000 header fields
    /long-header           one header line of 1 MiB
    /interim-flood         10,000 "100 Continue" heads, then 200
    /dribble-head          the status line one byte per 0.3 s
    /dribble-body          a Content-Length: 20 head at once, then a byte per 0.3 s
    /unsolicited           a normal 200 "ok", then, 0.2 s later, bytes nobody asked for
    /post-close            answers 200 at once without reading the body, then closes
    /close-answer          200 "ok" with Connection: close, then a close (requests pipelined
                           behind it are never read)
    /close-but-stay        200 "ok" with Connection: close, then stays open and answers every
                           later request on that connection with "evil" (RFC 9112 §9.6: the
                           client must not read them)
    /ok                    200 "ok" (keep-alive)
Counts requests per path and connections accepted.
"""
import socket
import struct
import time

from origin import ThreadedServer, ok_then_unsolicited


# The paths answered with the same bytes every time, the connection then kept open (after
# /more-than-cl too: the gateway must not reuse it).
FIXED = {
    "/more-than-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + b"z" * 20,
    "/chunk-overflow": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"fffffffffffffffffff1\r\nabc\r\n0\r\n\r\n",
    "/chunk-ext-1mib": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e=" +
                       b"e" * (1 << 20) + b"\r\nhello\r\n0\r\n\r\n",
    "/trailer-1mib": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
                     b"x-t: " + b"t" * (1 << 20) + b"\r\n\r\n",
    "/many-headers": b"HTTP/1.1 200 OK\r\n" + b"x-h: v\r\n" * 100000 +
                     b"Content-Length: 2\r\n\r\nok",
    "/long-header": b"HTTP/1.1 200 OK\r\nx-long: " + b"l" * (1 << 20) +
                    b"\r\nContent-Length: 2\r\n\r\nok",
    "/interim-flood": b"HTTP/1.1 100 Continue\r\n\r\n" * 10000 +
                      b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
}


class HostileOrigin(ThreadedServer):
    def __init__(self):
        self.requests = {}
        super().__init__(backlog=128)

    def count(self, path):
        with self.lock:
            return self.requests.get(path, 0)

    @staticmethod
    def _rst(c):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()

    def _serve(self, c):
        buf = b""
        state = {}
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        c.close()
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                line = head.split(b"\r\n")[0].decode("latin-1")
                method, target = line.split(" ")[:2]
                path = target.split("?")[0]
                with self.lock:
                    self.requests[path] = self.requests.get(path, 0) + 1
                if not self._answer(c, method, path, state):
                    return
        except OSError:
            pass

    def _answer(self, c, method, path, state):
        if state.get("evil"):
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
            return True
        if path == "/close-answer":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            time.sleep(0.05)
            c.close()
            return False
        if path == "/close-but-stay":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            state["evil"] = True
            return True
        if path == "/reset-before":
            self._rst(c)
            return False
        if path == "/reset-mid-head":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
            time.sleep(0.05)
            self._rst(c)
            return False
        if path == "/reset-mid-body-cl":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
            time.sleep(0.1)
            self._rst(c)
            return False
        if path == "/reset-mid-body-chunked":
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" +
                      b"y" * 1000 + b"\r\n")
            time.sleep(0.1)
            self._rst(c)
            return False
        if path == "/fewer-then-close":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"w" * 50)
            c.close()
            return False
        if path == "/dribble-head":
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
                c.sendall(bytes([b]))
                time.sleep(0.3)
            return True
        if path == "/dribble-body":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n")
            for _ in range(20):
                time.sleep(0.3)
                c.sendall(b"d")
            return True
        if path in FIXED:
            c.sendall(FIXED[path])
            return True
        if path == "/unsolicited":
            ok_then_unsolicited(c, 0.2, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nevil!")
            return True
        if path == "/post-close":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            c.close()
            return False
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return True
