"""The HTTP/2 control budget through the running gateway, with hand-made frames on a raw socket
(HPACK order with late trailers is test_h2_late_trailers.py).

- SETTINGS entries, not frames, are charged to h2.control_frame_budget; every
  SETTINGS_INITIAL_WINDOW_SIZE value of a frame is checked against the stream windows
  (RFC 9113 §6.5.3, §6.9.2), though the change is applied once per frame.
- Header blocks on a stream the gateway reset are charged to the same budget, and a block of
  literals naming a large dynamic-table entry costs its own bytes, not the entry's size times
  the number of literals."""
import os

import pytest

from procs import free_port, sanitized
from gwtest import RawH2, config, frame, frames_of, goaway_code, settings

SETTINGS, HEADERS, RST_STREAM, GOAWAY, WINDOW_UPDATE = 0x4, 0x1, 0x3, 0x7, 0x8
END_STREAM, END_HEADERS = 0x1, 0x4
IWS = 0x4
FLOW_CONTROL_ERROR, ENHANCE_YOUR_CALM, PROTOCOL_ERROR = 0x3, 0xB, 0x1


def gw_cfg(port, extra=""):
    return config(plain_port=port, extra=extra)


# a request on stream 1 the gateway resets itself: an uppercase field name is malformed
# (RFC 9113 §8.2.1); literals without indexing, new names (RFC 7541 §6.2.2)
def lit(name, value):
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


BAD_REQUEST = b"\x82\x86\x84" + lit(b":authority", b"localhost") + lit(b"X-Bad", b"1")


def test_settings_entries_are_charged_to_the_control_budget(gateway):
    port = free_port()
    gateway(gw_cfg(port), wait=[("127.0.0.1", port)])
    # 2,730 entries in one 16 KB frame: one frame, but 2,730 units of the default budget (1000)
    c = RawH2(port)
    c.send(settings(*[(IWS, 1000 + i) for i in range(2730)]))
    out = c.read_until(lambda d: goaway_code(d) is not None)
    c.close()
    assert goaway_code(out) == ENHANCE_YOUR_CALM, frames_of(out)
    # the same entries spread over frames of 200 are the same load: five frames are a flood
    c = RawH2(port)
    for k in range(5):
        c.send(settings(*[(IWS, 1000 + i) for i in range(200)]))
    out = c.read_until(lambda d: goaway_code(d) is not None, timeout=3)
    c.close()
    assert goaway_code(out) == ENHANCE_YOUR_CALM, frames_of(out)
    # while a few small SETTINGS frames are fine
    c = RawH2(port)
    for k in range(5):
        c.send(settings((IWS, 70000 + k)))
    c.send(frame(0x6, 0, 0, b"12345678"))  # PING: its ACK shows everything before was taken
    out = c.read_until(lambda d: any(t == 0x6 and f & 1 for t, f, _, _ in frames_of(d)), timeout=5)
    c.close()
    assert goaway_code(out) is None, frames_of(out)


def test_every_initial_window_value_is_checked(gateway):
    port = free_port()
    gateway(gw_cfg(port), wait=[("127.0.0.1", port)])
    # stream 1 open with a send window of 1 (initial 0, then WINDOW_UPDATE 1); a frame whose
    # first value takes it past 2^31-1 and whose last value brings it back is still a
    # FLOW_CONTROL_ERROR (RFC 9113 §6.9.2): all in one write, before any response can leave
    get = b"\x82\x86\x84" + lit(b":authority", b"localhost")
    c = RawH2(port)
    c.send(settings((IWS, 0)) + frame(HEADERS, END_STREAM | END_HEADERS, 1, get) +
           frame(WINDOW_UPDATE, 0, 1, (1).to_bytes(4, "big")) +
           settings((IWS, 0x7FFFFFFF), (IWS, 0)))
    out = c.read_until(lambda d: goaway_code(d) is not None)
    c.close()
    assert goaway_code(out) == FLOW_CONTROL_ERROR, frames_of(out)
    # the boundary, 2^31-1 reached exactly, is not an error
    c = RawH2(port)
    c.send(settings((IWS, 0)) + frame(HEADERS, END_STREAM | END_HEADERS, 1, get) +
           frame(WINDOW_UPDATE, 0, 1, (1).to_bytes(4, "big")) +
           settings((IWS, 0x7FFFFFFE), (IWS, 0)) + frame(0x6, 0, 0, b"abcdefgh"))
    out = c.read_until(lambda d: any(t == 0x6 and f & 1 for t, f, _, _ in frames_of(d)), timeout=5)
    c.close()
    assert goaway_code(out) is None, frames_of(out)


def reset_stream_1(c):
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, BAD_REQUEST))
    out = c.read_until(lambda d: any(t == RST_STREAM and s == 1 for t, _, s, _ in frames_of(d)))
    rst = [p for t, _, s, p in frames_of(out) if t == RST_STREAM and s == 1]
    assert rst and int.from_bytes(rst[0], "big") == PROTOCOL_ERROR, frames_of(out)


# a 4000-byte entry through a block on the reset stream: literal with incremental indexing,
# new name (RFC 7541 §6.2.1); name length 4000 = 127 + 3873 (§5.1)
BIG_NAME = b"\x40\x7f" + bytes([0x80 | (3873 & 0x7F), 3873 >> 7]) + b"n" * 4000 + b"\x01v"


def test_blocks_on_a_reset_stream_spend_the_budget(gateway):
    port = free_port()
    gateway(gw_cfg(port), wait=[("127.0.0.1", port)])
    c = RawH2(port)
    reset_stream_1(c)
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, BIG_NAME))
    # one-byte blocks naming that entry (index 62): each is a block to decode, charged to the
    # default budget of 1000; they were free before, and the connection lived on
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\xbe") * 1200)
    out = c.read_until(lambda d: goaway_code(d) is not None)
    c.close()
    assert goaway_code(out) == ENHANCE_YOUR_CALM, frames_of(out)


def cpu_seconds(pid):
    """User + system CPU time of pid and its live descendants."""
    pids, total = {pid}, 0.0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
                if int(st[1]) == pid:
                    pids.add(int(d))
            except OSError:
                pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            total += (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


@pytest.mark.serial
def test_literals_naming_a_big_entry_cost_their_bytes(gateway):
    if sanitized():  # a CPU measurement of the decoder: ASan's instrumentation is most of it
        # there (CI time); fuzz_hpack and the unit tests check the decoder's memory
        pytest.skip("a CPU measurement of the plain build")
    port = free_port()
    g = gateway(gw_cfg(port, extra="h2: {control_frame_budget: 100000}\n"),
                wait=[("127.0.0.1", port)])
    pid = g.proc.pid

    def spend(block):
        """CPU the gateway spends on 2000 frames of `block` on a reset stream."""
        c = RawH2(port)
        reset_stream_1(c)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, BIG_NAME))
        before = cpu_seconds(pid)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block) * 2000)
        c.send(frame(0x6, 0, 0, b"12345678"))  # its ACK: every block before was decoded
        out = c.read_until(lambda d: any(t == 0x6 and f & 1 for t, f, _, _ in frames_of(d)),
                           timeout=120)
        spent = cpu_seconds(pid) - before
        c.close()
        assert goaway_code(out) is None, frames_of(out)
        assert any(t == 0x6 and f & 1 for t, f, _, _ in frames_of(out))
        return spent

    # 16 KB blocks: indexed references to the entry (1 byte each, nothing to copy) against
    # literals without indexing naming it (RFC 7541 §6.2.2, 3 bytes each). The literals copied
    # the 4000-byte name each time (5,461 per block, 44 GB for the 2000 blocks): three times
    # the CPU of the indexed blocks in an optimized build. Decoded in the table-only mode they
    # cost less than the same bytes of indexed fields.
    indexed = spend(b"\xbe" * 16383)
    literals = spend(b"\x0f\x2f\x00" * 5461)
    assert literals < 1.6 * indexed + 0.05, (literals, indexed)
