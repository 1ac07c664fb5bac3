"""Issue 25 item 3: a request's head and the body bytes that arrive with it leave for the origin
in one write, so in one TCP segment. Before, the head went at once in a segment of its own and
each body piece in another, so the origin woke for a head it could not answer yet. Counted at
the origin with TCP_INFO's tcpi_data_segs_in (segments that carried data, Linux 4.6+)."""
import socket
import struct

from conftest import free_port, recv_all
from gwtest import Client, ended, gw_config, response
from origin import ThreadedServer

DATA_SEGS_IN = 152  # offsetof(struct tcp_info, tcpi_data_segs_in), linux/tcp.h


def data_segs_in(sock):
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    return struct.unpack_from("I", info, DATA_SEGS_IN)[0]


class SegmentOrigin(ThreadedServer):
    """Answers every request with 200 and records (method, data segments that carried it,
    body bytes). The tests send one request at a time, so nothing of the next request can
    have arrived when a response has just been sent."""

    def __init__(self):
        self.seen = []
        super().__init__()

    def _serve(self, c):
        buf = b""
        start = 0  # a new connection: every segment it got so far carried this request
        with c:
            while True:
                while b"\r\n\r\n" not in buf:
                    got = c.recv(65536)
                    if not got:
                        return
                    buf += got
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                fields = {k.strip().lower(): v.strip()
                          for k, v in (x.split(":", 1) for x in lines[1:])}
                if "content-length" in fields:
                    want = int(fields["content-length"])
                    while len(buf) < want:
                        buf += c.recv(65536)
                    body, buf = buf[:want], buf[want:]
                elif fields.get("transfer-encoding") == "chunked":
                    # the bodies sent here are letters only: the last chunk cannot hide in them
                    while b"\r\n0\r\n\r\n" not in buf and not buf.startswith(b"0\r\n\r\n"):
                        buf += c.recv(65536)
                    end = buf.index(b"0\r\n\r\n") + 5
                    body, buf = buf[:end], buf[end:]
                else:
                    body = b""
                # nothing more can arrive before the response: the next request's count
                # starts here (after sendall the client may already have sent it)
                now = data_segs_in(c)
                self.seen.append((lines[0].split()[0], now - start, len(body)))
                start = now
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def test_h2_post_head_and_body_reach_the_origin_in_one_segment(gateway):
    o = SegmentOrigin()
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{o.port}"]), wait=[("127.0.0.1", port)])
    cl = Client(port)
    body = b"x" * 1000
    for extra in [(("content-length", "1000"),)] * 3 + [()] * 3:  # length known, then chunked
        sid = cl.request("/form", method="POST", body=body, extra=extra)
        evs = cl.events(ended(sid))
        assert response(evs, sid)[0] == "200", evs
    cl.close()
    o.close()
    posts = [s for s in o.seen if s[0] == "POST"]
    assert len(posts) == 6, o.seen
    # one segment each: the head, the body (and a chunked body's last chunk) written together
    assert [p[1] for p in posts] == [1] * 6, o.seen
    assert [p[2] for p in posts[:3]] == [1000] * 3, o.seen
    assert all(p[2] > 1000 for p in posts[3:]), o.seen  # chunk framing around the 1000 bytes


def test_h1_post_head_and_body_reach_the_origin_in_one_segment(gateway):
    o = SegmentOrigin()
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{o.port}"]), wait=[("127.0.0.1", port)])
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n"
                  b"Connection: close\r\n\r\n" + b"y" * 500)
        got = recv_all(s)
        s.close()
        assert got.startswith(b"HTTP/1.1 200 "), got[:200]
    o.close()
    assert [(m, n, size) for m, n, size in o.seen] == [("POST", 1, 500)] * 3, o.seen
