"""RFC 7540 §5.3 priority tree on the running gateway, at frame level with python3-h2.

Same bottleneck as test_priority.py: every stream opens with SETTINGS_INITIAL_WINDOW_SIZE 0,
the gateway buffers every response body, then the client opens the stream windows and grants
the connection window 16 KiB at a time, recording the stream id and size of every DATA frame.
The tree is used for streams without an RFC 9218 signal once the client sends RFC 7540
priority information (HEADERS priority fields or PRIORITY frames); such streams form one class
at urgency 3, after the RFC 9218 urgency-3 streams."""
import re
import time

import pytest

from h2bottleneck import STEP, Bottleneck, bottleneck_gateway, one_after_another

SIZE = 512 * 1024


def _bytes_while_all_active(b, sids):
    """DATA bytes per stream up to the first frame that ends one of sids."""
    left = {s: SIZE for s in sids}
    got = {s: 0 for s in sids}
    for sid, n in b.frames:
        if sid not in got:
            continue
        got[sid] += n
        left[sid] -= n
        if left[sid] == 0:
            break
    return got


def test_weights_1_3_split_bytes(bn):
    """RFC 7540 weights 1:3 split the bytes about 1:3 while both are active (§5.3.2)."""
    light = bn.request(f"/bytes/{SIZE}", priority_weight=1, priority_depends_on=0)
    heavy = bn.request(f"/bytes/{SIZE}", priority_weight=3, priority_depends_on=0)
    bn.transfer_all(SIZE)
    got = _bytes_while_all_active(bn, [light, heavy])
    assert got[light] > 0, bn.order
    ratio = got[heavy] / got[light]
    assert 2.0 <= ratio <= 4.5, (ratio, got, bn.order)
    # the heavier stream finished first; the light one then had the whole connection
    assert bn.order[-1] == light


def test_parent_before_child(bn):
    """A stream that can send goes before the streams that depend on it (§5.3)."""
    parent = bn.request(f"/bytes/{SIZE}", priority_weight=16, priority_depends_on=0)
    child = bn.request(f"/bytes/{SIZE}", priority_weight=256, priority_depends_on=parent)
    bn.transfer_all(SIZE)
    assert one_after_another(bn.order, parent, child), bn.order


def test_exclusive_dependency(bn):
    """An exclusive dependency on the root puts the stream above its former siblings (§5.3.1):
    it sends all of its body first, then the two others share the connection."""
    a = bn.request(f"/bytes/{SIZE}", priority_weight=16, priority_depends_on=0)
    c = bn.request(f"/bytes/{SIZE}", priority_weight=16, priority_depends_on=0)
    top = bn.request(f"/bytes/{SIZE}", priority_weight=16, priority_depends_on=0,
                    priority_exclusive=True)
    bn.transfer_all(SIZE)
    n = bn.order.count(top)
    assert bn.order[:n] == [top] * n, bn.order
    rest = bn.order[n:]
    # equal weights under `top`: both in every window of 4 frames while both are active
    both = rest[:2 * (SIZE // STEP) - 4]
    for k in range(0, len(both) - 4):
        assert {a, c} <= set(both[k:k + 4]), rest


def test_priority_frame_on_idle_stream(bn):
    """A PRIORITY frame for a stream not opened yet makes a placeholder (§5.3.4): the stream
    opens below its parent and waits for it."""
    first = bn.request(f"/bytes/{SIZE}")
    nxt = bn.c.get_next_available_stream_id()
    bn.c.prioritize(nxt, weight=200, depends_on=first)
    bn.flush()
    later = bn.request(f"/bytes/{SIZE}")
    assert later == nxt
    bn.transfer_all(SIZE)
    assert one_after_another(bn.order, first, later), bn.order


def test_rfc9218_signal_wins_over_the_tree(bn):
    """Mixing rule: a u=3 RFC 9218 stream goes before the tree class, a u=4 one after it."""
    low = bn.request(f"/bytes/{SIZE}", "u=4")
    tree = bn.request(f"/bytes/{SIZE}", priority_weight=256, priority_depends_on=0)
    urgent = bn.request(f"/bytes/{SIZE}", "u=3", priority_weight=1, priority_depends_on=0)
    bn.transfer_all(SIZE)
    runs = [sid for k, sid in enumerate(bn.order) if k == 0 or bn.order[k - 1] != sid]
    assert runs == [urgent, tree, low], bn.order


def test_self_dependency_resets_the_stream(gwp):
    """RFC 9113 §5.3.1: a stream depending on itself is a stream error PROTOCOL_ERROR; the
    other streams and the connection go on."""
    b = Bottleneck(gwp.port, gwp.origin)
    victim = b.request(f"/bytes/{SIZE}")
    other = b.request(f"/bytes/{SIZE}")
    b.pump(lambda: {victim, other} <= set(b.heads))
    # PRIORITY frame on `victim` depending on itself, written by hand (h2 refuses to)
    frame = (5).to_bytes(3, "big") + bytes([0x2, 0]) + victim.to_bytes(4, "big")
    frame += victim.to_bytes(4, "big") + bytes([15])
    b.s.sendall(frame)
    b.pump(lambda: victim in b.resets)
    assert b.resets[victim] == 1  # PROTOCOL_ERROR
    del b.done_bytes[victim]
    b.transfer_all(SIZE)
    b.close()


@pytest.fixture
def gw_small_tree(gateway, origin):
    return bottleneck_gateway(gateway, origin, "h2:\n  max_priority_nodes: 2\n")


def test_max_priority_nodes_evicts_the_oldest_placeholder(gw_small_tree):
    """h2.max_priority_nodes: 2 — the placeholder made for `later` (depending on `first`) is
    the oldest when two more PRIORITY frames arrive, so it is evicted: `later` opens with the
    default priority, a sibling of `first` with the same weight, and the two share the
    connection instead of `later` waiting (compare test_priority_frame_on_idle_stream)."""
    b = Bottleneck(gw_small_tree.port, gw_small_tree.origin)
    first = b.request(f"/bytes/{SIZE}")
    later = b.c.get_next_available_stream_id()
    b.c.prioritize(later, weight=200, depends_on=first)
    b.c.prioritize(later + 2, weight=16, depends_on=0)
    b.c.prioritize(later + 4, weight=16, depends_on=0)
    b.flush()
    assert b.request(f"/bytes/{SIZE}") == later
    b.transfer_all(SIZE)
    half = b.order[:SIZE // STEP]
    assert first in half and later in half, b.order
    switches = sum(1 for x, y in zip(b.order, b.order[1:]) if x != y)
    assert switches >= SIZE // STEP // 2, b.order
    b.close()
    # the connection's log line counts the evictions: `later`'s placeholder (for `later + 2`),
    # then `later + 2`'s (for `later + 4`), then `later + 4`'s when `later` opens as a stream
    deadline = time.monotonic() + 5
    while "priority_evictions=" not in gw_small_tree.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(r"event=h2_limits .*priority_evictions=3\b", gw_small_tree.log()), \
        gw_small_tree.log()[-1500:]
