/* h2/tree.h — the RFC 7540 §5.3 stream dependency tree, sans-IO, bounded.
 *
 * RFC 9113 §5.3.2 deprecates the tree, but clients that still send PRIORITY frames or the
 * HEADERS priority fields get it honoured: the session creates a tree on the first such signal
 * (none before: no tree work for clients that never send one) and schedules through it the
 * streams that carry no RFC 9218 signal (see sched.h for how the two mix).
 *
 * Nodes are kept per stream id for open streams and, as placeholders (RFC 7540 §5.3.4), for
 * idle streams named by PRIORITY frames and for closed streams. The node count is bounded by
 * max_nodes: when full, the oldest idle/closed placeholder is evicted (its children move to
 * its parent, their weights shared out as §5.3.4 says) and the eviction is counted. Open
 * streams are never evicted. Memory is allocated once, at new(): the nodes and an id index
 * (open addressing), so lookups and evictions cost O(1) on average.
 *
 * Scheduling (pick/sent): from the root, a node that is ready (has DATA and a window) sends
 * before its descendants; otherwise its children share its turn by weighted fair queueing on
 * bytes: each child carries a virtual time that grows by bytes * 256 / weight whenever its
 * subtree sends, and the ready subtree with the smallest virtual time goes next. A blocked or
 * closed parent's share thus flows to its children. pick and sent cost O(depth x fan-out).
 */
#ifndef GW_H2_TREE_H
#define GW_H2_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct gw_h2_tree gw_h2_tree_t;

#define GW_H2_TREE_DEFAULT_WEIGHT 16 /* RFC 7540 §5.3.5 */

/* A tree of at most max_nodes stream nodes (the root, stream 0, is not counted;
 * 1 <= max_nodes <= 2^28). 0 and *out, GW_E_INVAL (max_nodes out of range) or GW_E_NOMEM. */
int gw_h2_tree_new(gw_h2_tree_t **out, size_t max_nodes);
/* NULL is ignored. */
void gw_h2_tree_del(gw_h2_tree_t *t);

/* RFC 7540 priority of stream id (a PRIORITY frame or the HEADERS priority fields): depend on
 * dep with weight 1..256 (the wire value + 1), exclusively when exclusive (§5.3.1). A new id
 * becomes an idle placeholder (until gw_h2_tree_open). A dependency on a stream not in the
 * tree gives the default priority (dep 0, weight 16, §5.3.1); a dependency on a descendant
 * moves that descendant to id's former parent first (§5.3.3). Returns 0, GW_E_INVAL (id 0,
 * id == dep: the caller sends a stream PROTOCOL_ERROR, RFC 9113 §5.3.1, or weight out of
 * range) or GW_E_LIMIT (a new node, the tree full of open streams: nothing changed). */
int gw_h2_tree_set(gw_h2_tree_t *t, uint32_t id, uint32_t dep, unsigned weight, int exclusive);

/* Stream id opened: its node (default priority if new) turns open, so it is never evicted.
 * 0 or GW_E_LIMIT (full of open streams). */
int gw_h2_tree_open(gw_h2_tree_t *t, uint32_t id);

/* Stream id closed: not ready any more, kept as a placeholder until evicted. No-op if absent. */
void gw_h2_tree_close(gw_h2_tree_t *t, uint32_t id);

/* Stream id can send: pick() may return data for it. The node is created open with the
 * default priority if absent. 0 or GW_E_LIMIT. Already ready: only data is updated. */
int gw_h2_tree_activate(gw_h2_tree_t *t, uint32_t id, void *data);

/* Stream id cannot send any more (no-op if absent or not ready). */
void gw_h2_tree_deactivate(gw_h2_tree_t *t, uint32_t id);

/* The data of the ready stream that sends next (parents first, then weighted fair share
 * among siblings), or NULL when none is ready. It stays ready. */
void *gw_h2_tree_pick(gw_h2_tree_t *t);

/* Stream id framed bytes of DATA: charge its subtree's virtual times up to the root. */
void gw_h2_tree_sent(gw_h2_tree_t *t, uint32_t id, size_t bytes);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Parent and weight (1..256) of id: 0 or GW_E_NOENT. */
int gw_h2_tree_get(const gw_h2_tree_t *t, uint32_t id, uint32_t *dep, unsigned *weight);
/* Nodes in use (root not counted). */
size_t gw_h2_tree_size(const gw_h2_tree_t *t);
#endif

/* Placeholders evicted to respect max_nodes. */
uint64_t gw_h2_tree_evictions(const gw_h2_tree_t *t);

#endif
