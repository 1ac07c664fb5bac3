"""RFC 9218 extensible priorities on the running gateway, at frame level with python3-h2.

The client makes the connection window the bottleneck: it opens every stream with
SETTINGS_INITIAL_WINDOW_SIZE 0, waits until the gateway holds every response body (the
gateway's body_buffer is larger than a response), then opens the stream windows wide and grants
the connection window 16 KiB at a time, recording the stream id of every DATA frame. The order
of those ids is the gateway's scheduling decision."""

from h2bottleneck import STEP, Bottleneck, assert_all_done, gwp, one_after_another  # noqa: F401 (fixtures)

SIZE = 256 * 1024


def test_settings_no_rfc7540_priorities(gwp):
    b = Bottleneck(gwp.port)
    b.pump(lambda: b.settings is not None)
    # RFC 9218 §2.1: not sent (or 0), since the RFC 7540 tree is honoured
    assert 0x9 not in b.settings or b.settings[0x9].new_value == 0
    b.close()


def test_urgent_stream_opened_last_finishes_first(gwp):
    b = Bottleneck(gwp.port)
    slow = [b.request(f"/bytes/{SIZE}", "u=5") for _ in range(10)]
    fast = b.request(f"/bytes/{SIZE}", "u=0")
    b.transfer_all(SIZE)
    fin = b.finish_order()
    assert fin[0] == fast, fin
    # nothing of the u=5 streams is sent while the u=0 stream still has data
    first_fast, last_fast = b.order.index(fast), len(b.order) - 1 - b.order[::-1].index(fast)
    assert all(s == fast for s in b.order[first_fast:last_fast + 1])
    # and the u=5 streams, non-incremental, finish one after another by id
    assert fin[1:] == slow, fin
    b.close()


def test_incremental_streams_interleave(gwp):
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=2, i")
    c = b.request(f"/bytes/{SIZE}", "u=2, i")
    b.transfer_all(SIZE)
    # one frame each in turn: every window of 4 frames holds both streams
    mid = b.order[8:-8]
    for k in range(0, len(mid) - 4):
        assert {a, c} <= set(mid[k:k + 4]), b.order
    switches = sum(1 for x, y in zip(b.order, b.order[1:]) if x != y)
    assert switches >= SIZE // STEP, b.order
    b.close()


def test_non_incremental_pair_in_id_order(gwp):
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    c = b.request(f"/bytes/{SIZE}")  # default u=3, not incremental
    b.transfer_all(SIZE)
    # all of a, then all of c
    assert one_after_another(b.order, a, c), b.order
    b.close()


def test_priority_update_mid_transfer(gwp):
    b = Bottleneck(gwp.port)
    sids = [b.request(f"/bytes/{SIZE}", "u=4") for _ in range(4)]
    target = sids[-1]
    b.open_windows()
    sent = []

    def raise_target(bb):
        # once stream 1 is half way, raise the last stream to u=1 (RFC 9218 §7.1)
        if not sent and bb.done_bytes[sids[0]] >= SIZE // 2:
            frame = (len(b"u=1") + 4).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
            frame += target.to_bytes(4, "big") + b"u=1"
            bb.s.sendall(frame)
            sent.append(len(bb.order))

    b.grant_until_done(on_step=raise_target)
    assert_all_done(b, SIZE)
    assert sent
    assert b.done_bytes[target] == SIZE
    fin = b.finish_order()
    # stream 1 was interrupted, the raised stream finished first, then the others by id
    assert fin[0] == target, fin
    assert fin[1:] == sids[:-1], fin
    after = b.order[sent[0] + 2:]
    assert after[:after.count(target)] == [target] * after.count(target)
    b.close()


def test_priority_update_before_the_stream(gwp):
    """A PRIORITY_UPDATE for a stream not opened yet is kept and applied when it opens."""
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    nxt = b.c.get_next_available_stream_id()
    frame = (4 + 3).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
    b.s.sendall(frame + nxt.to_bytes(4, "big") + b"u=0")
    c = b.request(f"/bytes/{SIZE}", "u=3")
    assert c == nxt
    b.transfer_all(SIZE)
    assert b.finish_order() == [c, a], b.finish_order()
    b.close()


def test_origin_priority_response_field(gwp):
    """RFC 9218 §8: the origin's `priority: u=0` raises a stream the client sent at u=5."""
    b = Bottleneck(gwp.port)
    a = b.request(f"/bytes/{SIZE}", "u=3")
    c = b.request(f"/prio/{SIZE}/0", "u=5")
    b.transfer_all(SIZE)
    assert b.heads[c]["priority"] == "u=0"
    # applied before the first DATA frame (the stream windows were still 0): all of c first
    assert one_after_another(b.order, c, a), b.order
    b.close()
