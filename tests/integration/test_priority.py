"""RFC 9218 extensible priorities on the running gateway, at frame level with python3-h2.

The client makes the connection window the bottleneck: it opens every stream with
SETTINGS_INITIAL_WINDOW_SIZE 0, waits until the gateway holds every response body (the
gateway's body_buffer is larger than a response), then opens the stream windows wide and grants
the connection window 16 KiB at a time, recording the stream id of every DATA frame. The order
of those ids is the gateway's scheduling decision."""

from h2bottleneck import STEP, assert_all_done, one_after_another

SIZE = 256 * 1024


def test_settings_no_rfc7540_priorities(bn):
    bn.pump(lambda: bn.settings is not None)
    # RFC 9218 §2.1: not sent (or 0), since the RFC 7540 tree is honoured
    assert 0x9 not in bn.settings or bn.settings[0x9].new_value == 0


def test_urgent_stream_opened_last_finishes_first(bn):
    slow = [bn.request(f"/bytes/{SIZE}", "u=5") for _ in range(10)]
    fast = bn.request(f"/bytes/{SIZE}", "u=0")
    bn.transfer_all(SIZE)
    fin = bn.finish_order()
    assert fin[0] == fast, fin
    # nothing of the u=5 streams is sent while the u=0 stream still has data
    first_fast, last_fast = bn.order.index(fast), len(bn.order) - 1 - bn.order[::-1].index(fast)
    assert all(s == fast for s in bn.order[first_fast:last_fast + 1])
    # and the u=5 streams, non-incremental, finish one after another by id
    assert fin[1:] == slow, fin


def test_incremental_streams_interleave(bn):
    a = bn.request(f"/bytes/{SIZE}", "u=2, i")
    c = bn.request(f"/bytes/{SIZE}", "u=2, i")
    bn.transfer_all(SIZE)
    # one frame each in turn: every window of 4 frames holds both streams
    mid = bn.order[8:-8]
    for k in range(0, len(mid) - 4):
        assert {a, c} <= set(mid[k:k + 4]), bn.order
    switches = sum(1 for x, y in zip(bn.order, bn.order[1:]) if x != y)
    assert switches >= SIZE // STEP, bn.order


def test_non_incremental_pair_in_id_order(bn):
    a = bn.request(f"/bytes/{SIZE}", "u=3")
    c = bn.request(f"/bytes/{SIZE}")  # default u=3, not incremental
    bn.transfer_all(SIZE)
    # all of a, then all of c
    assert one_after_another(bn.order, a, c), bn.order


def test_priority_update_mid_transfer(bn):
    sids = [bn.request(f"/bytes/{SIZE}", "u=4") for _ in range(4)]
    target = sids[-1]
    bn.open_windows()
    sent = []

    def raise_target(bb):
        # once stream 1 is half way, raise the last stream to u=1 (RFC 9218 §7.1)
        if not sent and bb.done_bytes[sids[0]] >= SIZE // 2:
            frame = (len(b"u=1") + 4).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
            frame += target.to_bytes(4, "big") + b"u=1"
            bb.s.sendall(frame)
            sent.append(len(bb.order))

    bn.grant_until_done(on_step=raise_target)
    assert_all_done(bn, SIZE)
    assert sent
    assert bn.done_bytes[target] == SIZE
    fin = bn.finish_order()
    # stream 1 was interrupted, the raised stream finished first, then the others by id
    assert fin[0] == target, fin
    assert fin[1:] == sids[:-1], fin
    after = bn.order[sent[0] + 2:]
    assert after[:after.count(target)] == [target] * after.count(target)


def test_priority_update_before_the_stream(bn):
    """A PRIORITY_UPDATE for a stream not opened yet is kept and applied when it opens."""
    a = bn.request(f"/bytes/{SIZE}", "u=3")
    nxt = bn.c.get_next_available_stream_id()
    frame = (4 + 3).to_bytes(3, "big") + bytes([0x10, 0]) + (0).to_bytes(4, "big")
    bn.s.sendall(frame + nxt.to_bytes(4, "big") + b"u=0")
    c = bn.request(f"/bytes/{SIZE}", "u=3")
    assert c == nxt
    bn.transfer_all(SIZE)
    assert bn.finish_order() == [c, a], bn.finish_order()


def test_origin_priority_response_field(bn):
    """RFC 9218 §8: the origin's `priority: u=0` raises a stream the client sent at u=5."""
    a = bn.request(f"/bytes/{SIZE}", "u=3")
    c = bn.request(f"/prio/{SIZE}/0", "u=5")
    bn.transfer_all(SIZE)
    assert bn.heads[c]["priority"] == "u=0"
    # applied before the first DATA frame (the stream windows were still 0): all of c first
    assert one_after_another(bn.order, c, a), bn.order
