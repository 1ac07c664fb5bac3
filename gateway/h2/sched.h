/* h2/sched.h — which stream's DATA goes next (the send-side scheduler interface).
 *
 * The session embeds a gw_h2_sched_node_t in every stream and adds the node when the stream
 * has something to send (DATA, trailers, or an END_STREAM) and a send window to send it in;
 * it removes the node when the stream is blocked, done or closed. After framing one DATA frame
 * for the stream returned by next(), the session calls sent() so that the policy can rotate.
 * Two policies: round robin (ignores urgency/incremental) and gw_h2_sched_priority, the RFC 9218
 * §10 policy the session uses by default:
 *   - a lower urgency always goes first (strict priority; 0 is the most urgent);
 *   - within one urgency, non-incremental streams go before incremental ones (our choice: a
 *     response the client can only use whole is not slowed down by streams that can be shown
 *     progressively), one at a time in stream-id order: the lowest id keeps sending until it
 *     is done or blocked (§10: "serve non-incremental responses one at a time");
 *   - incremental streams of one urgency share the bandwidth, one frame each in turn.
 * Both keep every queued node on s->queue (the priority policy keeps it sorted: head = next),
 * so callers may walk the queue to look for a sendable node.
 *
 * RFC 7540 tree (priority policy only, when s->tree is set): a node with `tree` set is a stream
 * without any RFC 9218 signal from a client that sent RFC 7540 priorities. Mixing rule: all
 * tree nodes together form one class at urgency 3 that comes after the RFC 9218 urgency-3
 * incremental streams and before urgency 4; within that class the tree decides (parents
 * first, weighted fair share among siblings, tree.h). RFC 9218 signals therefore always win
 * over the deprecated tree, and a client that never sends RFC 7540 priorities costs no tree
 * work (s->tree stays NULL).
 */
#ifndef GW_H2_SCHED_H
#define GW_H2_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "h2/tree.h"

typedef struct gw_h2_sched_node {
    gw_list_t link; /* owned by the policy; unlinked (points to itself) when not queued */
    uint32_t stream_id;
    uint8_t urgency;     /* RFC 9218 §4.1, 0-7, default 3 (unused by round robin) */
    uint8_t incremental; /* RFC 9218 §4.2 */
    uint8_t tree;        /* scheduled by s->tree (RFC 7540 §5.3); see the mixing rule above */
    uint8_t live;        /* 0, or 1 + the bucket it is counted in (gw_h2_sched_set_live) */
} gw_h2_sched_node_t;

typedef struct gw_h2_sched gw_h2_sched_t;

typedef struct {
    const char *name;
    /* Queue node (no-op when already queued). */
    void (*add)(gw_h2_sched_t *s, gw_h2_sched_node_t *n);
    /* Unqueue node (no-op when not queued). */
    void (*remove)(gw_h2_sched_t *s, gw_h2_sched_node_t *n);
    /* The node that sends next, or NULL when nothing is queued. It stays queued. */
    gw_h2_sched_node_t *(*next)(gw_h2_sched_t *s);
    /* One frame was sent for n, which stays queued: let others have their turn. */
    void (*sent)(gw_h2_sched_t *s, gw_h2_sched_node_t *n, size_t bytes);
} gw_h2_sched_ops_t;

/* Live buckets: one per urgency, and one for the nodes whose order is not their urgency (the
 * RFC 7540 tree's, or any node under round robin). */
#define GW_H2_SCHED_UNRANKED 8
#define GW_H2_SCHED_BUCKETS 9

struct gw_h2_sched {
    const gw_h2_sched_ops_t *ops;
    gw_list_t queue;    /* round robin: FIFO of nodes; priority: sorted, head sends next */
    size_t count;       /* nodes queued */
    gw_h2_tree_t *tree; /* RFC 7540 tree (not owned), NULL = none; priority policy only */
    uint32_t live_n;    /* live nodes (gw_h2_sched_set_live), queued or not */
    uint32_t live[GW_H2_SCHED_BUCKETS]; /* live nodes by urgency; [UNRANKED]: not by urgency */
};

extern const gw_h2_sched_ops_t gw_h2_sched_round_robin;
/* RFC 9218 §10 urgency/incremental policy described above. add/sent cost O(queued nodes),
 * bounded by SETTINGS_MAX_CONCURRENT_STREAMS. */
extern const gw_h2_sched_ops_t gw_h2_sched_priority;

/* Initialise s with policy ops (NULL = round robin). No allocation. */
void gw_h2_sched_init(gw_h2_sched_t *s, const gw_h2_sched_ops_t *ops);
/* Prepare a node for stream_id (unqueued, urgency 3, not incremental). */
void gw_h2_sched_node_init(gw_h2_sched_node_t *n, uint32_t stream_id);
/* Change the priority of n (urgency 0-7, larger values are clamped to 7; incremental 0/1). A
 * queued node is re-queued at its new place (at the back of its class when incremental), an
 * unqueued one just keeps the values for its next add. */
void gw_h2_sched_set_priority(gw_h2_sched_t *s, gw_h2_sched_node_t *n, uint8_t urgency,
                              int incremental);
/* Schedule n by s->tree (on = 1; needs s->tree) or by its RFC 9218 priority (on = 0). A queued
 * node is re-queued. */
void gw_h2_sched_set_tree(gw_h2_sched_t *s, gw_h2_sched_node_t *n, int on);
/* A node is live while its stream still has a response to send, whether or not it has DATA
 * queued now (one still waiting for its origin is live): the layer above paces its writes only
 * while a live node is more urgent than DATA that could be framed (h2_data_max in
 * front/h2_stream.c). on = 1 when the stream opens, 0 once it ended its side or closed; a
 * no-op when unchanged. The counts follow set_priority and set_tree. */
void gw_h2_sched_set_live(gw_h2_sched_t *s, gw_h2_sched_node_t *n, int on);
/* The most urgent class among live nodes: 0-7; GW_H2_SCHED_UNRANKED when two or more are live
 * and one of them is not ordered by urgency (tree, round robin); -1 when at most one is live
 * (nothing to put ahead of anything). */
int gw_h2_sched_live_top(const gw_h2_sched_t *s);
/* 1 when the live nodes are all of one urgency (or at most one is live): no live node is
 * more urgent than another's DATA. */
int gw_h2_sched_live_one_class(const gw_h2_sched_t *s);
static inline int gw_h2_sched_queued(const gw_h2_sched_node_t *n)
{
    return gw_list_linked(&n->link);
}

static inline void gw_h2_sched_add(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    s->ops->add(s, n);
}
static inline void gw_h2_sched_remove(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    s->ops->remove(s, n);
}
static inline gw_h2_sched_node_t *gw_h2_sched_next(gw_h2_sched_t *s)
{
    return s->ops->next(s);
}
static inline void gw_h2_sched_sent(gw_h2_sched_t *s, gw_h2_sched_node_t *n, size_t bytes)
{
    s->ops->sent(s, n, bytes);
}

#endif
