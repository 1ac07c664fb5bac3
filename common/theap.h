/* common/theap.h — a min-heap of deadlines, so that many timers share one event-loop timer.
 *
 * Each connection of a worker used to own libuv timers (152 bytes each); an idle connection
 * only needs "call me at time T". The owner embeds a gw_theap_node_t (16 bytes) and the worker
 * keeps one heap plus one loop timer armed for gw_theap_min(). The heap holds pointers to the
 * nodes in an array (a binary heap by due time); each node knows its slot, so removal and
 * re-keying are O(log n) and need no search. Nodes with the same due time come out in no
 * particular order. No clock is read here: due times are whatever unit the owner uses.
 */
#ifndef GW_COMMON_THEAP_H
#define GW_COMMON_THEAP_H

#include <stddef.h>
#include <stdint.h>

#define GW_THEAP_NONE UINT32_MAX /* slot of a node that is not in a heap */

typedef struct {
    uint64_t due;  /* when the node is due (owner's unit), valid while queued */
    uint32_t slot; /* index in the heap array, GW_THEAP_NONE when not queued */
    uint8_t kind;  /* owner's tag: which callback the node stands for */
} gw_theap_node_t;

typedef struct {
    gw_theap_node_t **v;
    uint32_t len, cap;
} gw_theap_t;

void gw_theap_init(gw_theap_t *h);
/* Frees the array; the nodes are the owner's (they are not touched). */
void gw_theap_free(gw_theap_t *h);

/* Prepare a node (not queued) with the owner's tag. */
static inline void gw_theap_node_init(gw_theap_node_t *n, uint8_t kind)
{
    n->due = 0;
    n->slot = GW_THEAP_NONE;
    n->kind = kind;
}
static inline int gw_theap_queued(const gw_theap_node_t *n)
{
    return n->slot != GW_THEAP_NONE;
}

/* Make room for n queued nodes, so that gw_theap_set cannot fail while at most n are queued.
 * 0 or GW_E_NOMEM. */
int gw_theap_reserve(gw_theap_t *h, size_t n);
/* Queue n at due, or move it there when it is queued already. 0 or GW_E_NOMEM (the array
 * could not grow; n is then not queued). */
int gw_theap_set(gw_theap_t *h, gw_theap_node_t *n, uint64_t due);
/* Unqueue n; a node that is not queued is ignored. */
void gw_theap_remove(gw_theap_t *h, gw_theap_node_t *n);
/* The node due first, or NULL when the heap is empty. It stays queued. */
static inline gw_theap_node_t *gw_theap_min(const gw_theap_t *h)
{
    return h->len ? h->v[0] : NULL;
}
/* Nodes queued. */
static inline size_t gw_theap_len(const gw_theap_t *h)
{
    return h->len;
}

#endif
