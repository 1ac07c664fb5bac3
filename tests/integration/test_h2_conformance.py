"""RFC 9113 / RFC 7541 conformance at frame level, case by case, against the running gateway's
h2c and TLS ports: each case sends hand-made frames after a valid handshake and checks the
answer a client can observe (GOAWAY code, RST_STREAM code, an ACK, or a response). Frames are
built with gwtest.frame; header blocks with python3-hpack (an independent encoder)."""
import time

import hpack
import pytest

from procs import free_port
from gwtest import RawH2, config, frame

DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WU, CONT = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20
NO_ERROR, PROTOCOL, INTERNAL, FLOW, TIMEOUT, CLOSED, FRAME_SIZE, REFUSED, CANCEL, COMPRESSION = range(10)




def block(headers):
    return hpack.Encoder().encode(headers)


REQ = [(":method", "GET"), (":scheme", "https"), (":path", "/"), (":authority", "localhost")]
POST = [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", "localhost")]


@pytest.fixture(scope="module")
def ports(tmp_path_factory, h2gate_bin_module):
    from procs import Gateway
    d = tmp_path_factory.mktemp("conf")
    tls_port, plain_port = free_port(), free_port()
    g = Gateway(str(d), config(tls_port, plain_port, extra="h2: {max_concurrent_streams: 4}\n"),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", plain_port)])
    yield {"h2c": plain_port, "tls": tls_port}
    g.stop()
    assert not g.sanitizer_report(), g.log()[-4000:]


@pytest.fixture(scope="module")
def h2gate_bin_module():
    from procs import H2GATE_BIN
    return H2GATE_BIN


class Conn(RawH2):
    """A connection past the handshake: the client's preface and SETTINGS, the gateway's
    SETTINGS, then its ACK."""

    def __init__(self, port, tls):
        super().__init__(port, tls, ack=False, timeout=3)
        f = self.next_frame()
        assert f and f[0] == SETTINGS and not f[1] & ACK
        self.send(frame(SETTINGS, ACK, 0))

    def outcome(self, timeout=2.0):
        """First decisive answer: ('goaway', code), ('rst', sid, code), ('closed',) or
        ('ping_ack', data); else ('headers', sid) if a response came (the gateway answers a
        request at once, before the frames that follow it are judged); else ('timeout',)."""
        deadline = time.monotonic() + timeout
        headers = None
        while time.monotonic() < deadline:
            f = self.next_frame(deadline - time.monotonic())
            if f is None:
                break
            if f == "closed":
                return ("closed",)
            t, flags, sid, p = f
            if t == GOAWAY:
                return ("goaway", int.from_bytes(p[4:8], "big"))
            if t == RST:
                return ("rst", sid, int.from_bytes(p[:4], "big"))
            if t == PING and flags & ACK:
                return ("ping_ack", p)
            if t == HEADERS and headers is None:
                headers = ("headers", sid)
                deadline = min(deadline, time.monotonic() + 0.5)
        return headers or ("timeout",)


def conn_error(code):
    return lambda o: (o[0] == "goaway" and o[1] == code) or o[0] == "closed"


def stream_error(code):
    return lambda o: (o[0] == "rst" and o[2] == code) or (o[0] == "goaway" and o[1] == code)


def strict_goaway(code):
    return lambda o: o[0] == "goaway" and o[1] == code


def ping_acked(o):
    return o[0] == "ping_ack"


PING_F = frame(PING, 0, 0, b"verify!!")


CASES = {
    # §4.1 unknown types and flags are ignored
    "4.1 unknown frame type ignored": ([frame(0x42, 0, 0, b"abc"), PING_F], ping_acked),
    "4.1 unknown flags ignored": ([frame(PING, 0xfe & ~ACK, 0, b"verify!!")], ping_acked),
    # §4.2 frame size
    "4.2 DATA above max frame size": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                       frame(DATA, 0, 1, b"x" * 16385)], stream_error(FRAME_SIZE)),
    "4.2 HEADERS above max frame size": ([frame(HEADERS, END_HEADERS, 1, b"\x82" * 16385)],
                                         conn_error(FRAME_SIZE)),
    # §4.3 header compression
    "4.3 invalid header block": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xff\xff\xff\xff\xff\xff")],
                                 conn_error(COMPRESSION)),
    "4.3 PRIORITY inside a header block": ([frame(HEADERS, END_STREAM, 1, block(REQ)),
                                            frame(PRIORITY, 0, 1, b"\0\0\0\0\x10"),
                                            frame(CONT, END_HEADERS, 1, b"")], conn_error(PROTOCOL)),
    "4.3 HEADERS of another stream inside a block": ([frame(HEADERS, END_STREAM, 1, block(REQ)),
                                                      frame(HEADERS, END_HEADERS | END_STREAM, 3, block(REQ))],
                                                     conn_error(PROTOCOL)),
    # §5.1 stream states
    "5.1 DATA on idle stream": ([frame(DATA, 0, 1, b"x")], conn_error(PROTOCOL)),
    "5.1 RST_STREAM on idle stream": ([frame(RST, 0, 1, b"\0\0\0\x08")], conn_error(PROTOCOL)),
    "5.1 WINDOW_UPDATE on idle stream": ([frame(WU, 0, 1, b"\0\0\0\x01")], conn_error(PROTOCOL)),
    "5.1 CONTINUATION on idle stream": ([frame(CONT, END_HEADERS, 1, block(REQ))], conn_error(PROTOCOL)),
    "5.1 DATA on half-closed (remote)": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)),
                                          frame(DATA, 0, 1, b"x")], stream_error(CLOSED)),
    "5.1 HEADERS on half-closed (remote)": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)),
                                             frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ))],
                                            stream_error(CLOSED)),
    "5.1.1 even stream id": ([frame(HEADERS, END_HEADERS | END_STREAM, 2, block(REQ))], conn_error(PROTOCOL)),
    "5.1.1 decreasing stream id": ([frame(HEADERS, END_HEADERS | END_STREAM, 5, block(REQ)),
                                    frame(HEADERS, END_HEADERS | END_STREAM, 3, block(REQ))],
                                   conn_error(PROTOCOL)),
    "5.3.1 stream depends on itself (HEADERS)": ([frame(HEADERS, END_HEADERS | END_STREAM | PRIO, 1,
                                                        b"\0\0\0\x01\x10" + block(REQ))], stream_error(PROTOCOL)),
    "5.3.1 stream depends on itself (PRIORITY)": ([frame(PRIORITY, 0, 1, b"\0\0\0\x01\x10")],
                                                  stream_error(PROTOCOL)),
    "5.5 unknown frame inside a header block": ([frame(HEADERS, END_STREAM, 1, block(REQ)),
                                                 frame(0x42, 0, 1, b"x"), frame(CONT, END_HEADERS, 1, b"")],
                                                conn_error(PROTOCOL)),
    # §6.1 DATA
    "6.1 DATA on stream 0": ([frame(DATA, 0, 0, b"x")], conn_error(PROTOCOL)),
    "6.1 DATA padding too long": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                   frame(DATA, PADDED, 1, b"\x09" + b"x" * 4)], conn_error(PROTOCOL)),
    # §6.2 HEADERS
    "6.2 HEADERS on stream 0": ([frame(HEADERS, END_HEADERS | END_STREAM, 0, block(REQ))], conn_error(PROTOCOL)),
    "6.2 HEADERS padding too long": ([frame(HEADERS, END_HEADERS | END_STREAM | PADDED, 1, b"\xff" + block(REQ))],
                                     conn_error(PROTOCOL)),
    "6.2 HEADERS followed by DATA before CONTINUATION": ([frame(HEADERS, END_STREAM, 1, block(REQ)),
                                                          frame(DATA, 0, 1, b"x")], conn_error(PROTOCOL)),
    # §6.3 PRIORITY
    "6.3 PRIORITY on stream 0": ([frame(PRIORITY, 0, 0, b"\0\0\0\x03\x10")], conn_error(PROTOCOL)),
    "6.3 PRIORITY wrong length": ([frame(PRIORITY, 0, 1, b"\0\0\0\x03")], stream_error(FRAME_SIZE)),
    # §6.4 RST_STREAM
    "6.4 RST_STREAM on stream 0": ([frame(RST, 0, 0, b"\0\0\0\x08")], conn_error(PROTOCOL)),
    "6.4 RST_STREAM wrong length": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                     frame(RST, 0, 1, b"\0\0\0\0\x08")], conn_error(FRAME_SIZE)),
    # §6.5 SETTINGS
    "6.5 SETTINGS ACK with payload": ([frame(SETTINGS, ACK, 0, b"\0\x01\0\0\x10\0")], conn_error(FRAME_SIZE)),
    "6.5 SETTINGS on a stream": ([frame(SETTINGS, 0, 1, b"")], conn_error(PROTOCOL)),
    "6.5 SETTINGS length not a multiple of 6": ([frame(SETTINGS, 0, 0, b"\0\x01\0\0")], conn_error(FRAME_SIZE)),
    "6.5.2 ENABLE_PUSH 2": ([frame(SETTINGS, 0, 0, b"\0\x02\0\0\0\x02")], conn_error(PROTOCOL)),
    "6.5.2 INITIAL_WINDOW_SIZE above 2^31-1": ([frame(SETTINGS, 0, 0, b"\0\x04\x80\0\0\0")], conn_error(FLOW)),
    "6.5.2 MAX_FRAME_SIZE below 16384": ([frame(SETTINGS, 0, 0, b"\0\x05\0\0\x3f\xff")], conn_error(PROTOCOL)),
    "6.5.2 MAX_FRAME_SIZE above 2^24-1": ([frame(SETTINGS, 0, 0, b"\0\x05\x01\0\0\0")], conn_error(PROTOCOL)),
    "6.5.2 unknown setting ignored": ([frame(SETTINGS, 0, 0, b"\x00\xff\0\0\0\x01"), PING_F], ping_acked),
    # §6.7 PING
    "6.7 PING is answered with the same data": ([PING_F], lambda o: o == ("ping_ack", b"verify!!")),
    "6.7 PING ACK is not answered": ([frame(PING, ACK, 0, b"notanswr"), PING_F],
                                     lambda o: o == ("ping_ack", b"verify!!")),
    "6.7 PING on a stream": ([frame(PING, 0, 1, b"verify!!")], conn_error(PROTOCOL)),
    "6.7 PING wrong length": ([frame(PING, 0, 0, b"short")], conn_error(FRAME_SIZE)),
    # §6.8 GOAWAY
    "6.8 GOAWAY on a stream": ([frame(GOAWAY, 0, 1, b"\0\0\0\0\0\0\0\0")], conn_error(PROTOCOL)),
    # §6.9 WINDOW_UPDATE
    "6.9 zero increment on the connection": ([frame(WU, 0, 0, b"\0\0\0\0")], conn_error(PROTOCOL)),
    "6.9 zero increment on a stream": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                        frame(WU, 0, 1, b"\0\0\0\0")], stream_error(PROTOCOL)),
    "6.9 WINDOW_UPDATE wrong length": ([frame(WU, 0, 0, b"\0\0\0\0\x01")], conn_error(FRAME_SIZE)),
    "6.9.1 connection window overflow": ([frame(WU, 0, 0, b"\x7f\xff\xff\xff")], conn_error(FLOW)),
    "6.9.1 stream window overflow": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                      frame(WU, 0, 1, b"\x7f\xff\xff\xff")], stream_error(FLOW)),
    # §6.10 CONTINUATION
    "6.10 CONTINUATION after END_HEADERS": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)),
                                             frame(CONT, END_HEADERS, 1, b"")], conn_error(PROTOCOL)),
    "6.10 CONTINUATION on stream 0": ([frame(CONT, END_HEADERS, 0, b"")], conn_error(PROTOCOL)),
    # §8.1, §8.2, §8.3 HTTP semantics
    "8.1 trailers without END_STREAM": ([frame(HEADERS, END_HEADERS, 1, block(POST)),
                                         frame(DATA, 0, 1, b"x"),
                                         frame(HEADERS, END_HEADERS, 1, block([("x-trailer", "1")]))],
                                        stream_error(PROTOCOL)),
    "8.2.1 uppercase field name": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ + [("X-Up", "1")]))],
                                   stream_error(PROTOCOL)),
    "8.2.2 connection-specific field": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                               block(REQ + [("connection", "close")]))], stream_error(PROTOCOL)),
    "8.2.2 te other than trailers": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ + [("te", "gzip")]))],
                                     stream_error(PROTOCOL)),
    "8.3 unknown pseudo-header": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ + [(":foo", "x")]))],
                                  stream_error(PROTOCOL)),
    "8.3 response pseudo-header in request": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                     block(REQ + [(":status", "200")]))], stream_error(PROTOCOL)),
    "8.3 pseudo-header after regular field": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                     block(REQ[:3] + [("x-a", "1"), REQ[3]]))],
                                              stream_error(PROTOCOL)),
    "8.3 duplicate :path": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ + [(":path", "/b")]))],
                            stream_error(PROTOCOL)),
    "8.3 missing :method": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ[1:]))], stream_error(PROTOCOL)),
    "8.3 missing :scheme": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block([REQ[0], REQ[2], REQ[3]]))],
                            stream_error(PROTOCOL)),
    "8.3 missing :path": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block([REQ[0], REQ[1], REQ[3]]))],
                          stream_error(PROTOCOL)),
    "8.3 empty :path": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                               block([REQ[0], REQ[1], (":path", ""), REQ[3]]))], stream_error(PROTOCOL)),
    "8.1.1 content-length larger than DATA": ([frame(HEADERS, END_HEADERS, 1, block(POST + [("content-length", "5")])),
                                               frame(DATA, END_STREAM, 1, b"abc")], stream_error(PROTOCOL)),
    "8.1.1 content-length smaller than DATA": ([frame(HEADERS, END_HEADERS, 1, block(POST + [("content-length", "2")])),
                                                frame(DATA, END_STREAM, 1, b"abc")], stream_error(PROTOCOL)),
    # RFC 7541
    "7541 indexed field 0": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x80")], conn_error(COMPRESSION)),
    "7541 index past the table": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x82\x86\x84\xff\x40")],
                                  conn_error(COMPRESSION)),
    "7541 table size update above SETTINGS": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                     b"\x3f\xe1\x3f" + block(REQ))], conn_error(COMPRESSION)),
    "7541 table size update after a field": ([frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                    block(REQ) + b"\x20")], conn_error(COMPRESSION)),
    # a valid request is answered
    "valid request gets a response": ([frame(HEADERS, END_HEADERS | END_STREAM, 1, block(REQ))],
                                      lambda o: o == ("headers", 1)),
    "valid request in HEADERS + CONTINUATION": ([frame(HEADERS, END_STREAM, 1, block(REQ)[:3]),
                                                 frame(CONT, END_HEADERS, 1, block(REQ)[3:])],
                                                lambda o: o == ("headers", 1)),
}


@pytest.mark.parametrize("transport", ["h2c", "tls"])
@pytest.mark.parametrize("case", list(CASES))
def test_conformance(ports, transport, case):
    frames, check = CASES[case]
    c = Conn(ports[transport], transport == "tls")
    # one write, so the gateway judges the frames together: sent apart (two TLS records), a
    # request could be answered (502 + RST_STREAM NO_ERROR, RFC 9113 §8.1) before its faulty
    # DATA arrives
    c.send(b"".join(frames))
    o = c.outcome()
    c.close()
    assert check(o), f"{case}: got {o}"
