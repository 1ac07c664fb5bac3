/* h2/sched.c — DATA schedulers: round robin and RFC 9218 §10 urgency/incremental. */
#include "h2/sched.h"

#include "common/err.h"

/* The live bucket n belongs in now. */
static uint8_t live_bucket(const gw_h2_sched_t *s, const gw_h2_sched_node_t *n)
{
    if (n->tree || s->ops != &gw_h2_sched_priority)
        return GW_H2_SCHED_UNRANKED;
    return n->urgency;
}

/* n's urgency or tree flag changed: move its count (a no-op for a node not live). */
static void live_rebucket(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    if (!n->live)
        return;
    s->live[n->live - 1]--;
    n->live = (uint8_t)(live_bucket(s, n) + 1);
    s->live[n->live - 1]++;
}

void gw_h2_sched_set_live(gw_h2_sched_t *s, gw_h2_sched_node_t *n, int on)
{
    if (!on == !n->live)
        return;
    if (on) {
        n->live = (uint8_t)(live_bucket(s, n) + 1);
        s->live[n->live - 1]++;
        s->live_n++;
    } else {
        s->live[n->live - 1]--;
        s->live_n--;
        n->live = 0;
    }
}

int gw_h2_sched_live_top(const gw_h2_sched_t *s)
{
    if (s->live_n <= 1)
        return -1;
    if (s->live[GW_H2_SCHED_UNRANKED])
        return GW_H2_SCHED_UNRANKED;
    int u = 0;
    while (!s->live[u])
        u++;
    return u;
}

int gw_h2_sched_live_one_class(const gw_h2_sched_t *s)
{
    int top = gw_h2_sched_live_top(s);
    return top < 0 || (top != GW_H2_SCHED_UNRANKED && s->live[top] == s->live_n);
}

static void rr_add(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    if (gw_list_linked(&n->link))
        return;
    gw_list_push_back(&s->queue, &n->link);
    s->count++;
}

static void rr_remove(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    if (!gw_list_linked(&n->link))
        return;
    gw_list_remove(&n->link);
    s->count--;
}

static gw_h2_sched_node_t *rr_next(gw_h2_sched_t *s)
{
    if (gw_list_empty(&s->queue))
        return NULL;
    return GW_CONTAINER_OF(s->queue.next, gw_h2_sched_node_t, link);
}

static void rr_sent(gw_h2_sched_t *s, gw_h2_sched_node_t *n, size_t bytes)
{
    (void)bytes;
    /* one frame per turn: move to the back */
    if (gw_list_linked(&n->link)) {
        gw_list_remove(&n->link);
        gw_list_push_back(&s->queue, &n->link);
    }
}

const gw_h2_sched_ops_t gw_h2_sched_round_robin = {"round-robin", rr_add, rr_remove, rr_next,
                                                   rr_sent};

/* ---- RFC 9218 priority ---------------------------------------------------------------------
 * One sorted list: by class (urgency, then non-incremental before incremental), then, for
 * non-incremental nodes, by stream id; incremental nodes of one class stay in FIFO order and
 * rotate on sent(). next() is the head. */

static unsigned prio_class(const gw_h2_sched_node_t *n)
{
    if (n->tree)
        return 3u * 3u + 2u; /* the RFC 7540 tree: after u=3 incremental (sched.h) */
    return (unsigned)n->urgency * 3u + (n->incremental ? 1u : 0u);
}

/* Does a go before b (b already queued)? */
static int prio_before(const gw_h2_sched_node_t *a, const gw_h2_sched_node_t *b)
{
    unsigned ca = prio_class(a), cb = prio_class(b);
    if (ca != cb)
        return ca < cb;
    if (a->incremental || a->tree)
        return 0; /* FIFO within an incremental class: join at its back */
    return a->stream_id < b->stream_id;
}

static void prio_add(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    if (gw_list_linked(&n->link))
        return;
    if (n->tree && (!s->tree || gw_h2_tree_activate(s->tree, n->stream_id, n) < 0)) {
        n->tree = 0; /* no room in the tree: plain RFC 9218 default */
        live_rebucket(s, n);
    }
    gw_list_t *pos = &s->queue;
    /* The queue is sorted, so a node that does not go before the tail goes before nothing:
     * the usual case (a new stream of its class has the highest id) takes one test instead
     * of a walk over every queued stream. */
    if (!gw_list_empty(&s->queue) &&
        prio_before(n, GW_CONTAINER_OF(s->queue.prev, gw_h2_sched_node_t, link))) {
        gw_list_foreach(it, &s->queue)
        {
            if (prio_before(n, GW_CONTAINER_OF(it, gw_h2_sched_node_t, link))) {
                pos = it;
                break;
            }
        }
    }
    gw_list_insert_before(pos, &n->link);
    s->count++;
}

static void prio_remove(gw_h2_sched_t *s, gw_h2_sched_node_t *n)
{
    if (!gw_list_linked(&n->link))
        return;
    if (n->tree)
        gw_h2_tree_deactivate(s->tree, n->stream_id);
    rr_remove(s, n);
}

static gw_h2_sched_node_t *prio_next(gw_h2_sched_t *s)
{
    gw_h2_sched_node_t *n = rr_next(s);
    if (n && n->tree) { /* the tree class is at the head: the tree picks within it */
        n = gw_h2_tree_pick(s->tree);
        GW_ASSERT(n != NULL);
    }
    return n;
}

static void prio_sent(gw_h2_sched_t *s, gw_h2_sched_node_t *n, size_t bytes)
{
    if (n->tree) {
        gw_h2_tree_sent(s->tree, n->stream_id, bytes);
        return;
    }
    /* a non-incremental stream keeps its turn until done or blocked (RFC 9218 §10); an
     * incremental one yields to the next of its class */
    if (!n->incremental || !gw_list_linked(&n->link))
        return;
    rr_remove(s, n);
    prio_add(s, n);
}

const gw_h2_sched_ops_t gw_h2_sched_priority = {"rfc9218", prio_add, prio_remove, prio_next,
                                                prio_sent};

void gw_h2_sched_set_tree(gw_h2_sched_t *s, gw_h2_sched_node_t *n, int on)
{
    on = on && s->tree && s->ops == &gw_h2_sched_priority;
    if (n->tree == on)
        return;
    int queued = gw_list_linked(&n->link);
    if (queued)
        s->ops->remove(s, n);
    n->tree = (uint8_t)on;
    live_rebucket(s, n);
    if (queued)
        s->ops->add(s, n);
}

void gw_h2_sched_set_priority(gw_h2_sched_t *s, gw_h2_sched_node_t *n, uint8_t urgency,
                              int incremental)
{
    int queued = gw_list_linked(&n->link);
    if (queued)
        s->ops->remove(s, n);
    n->urgency = urgency > 7 ? 7 : urgency;
    n->incremental = incremental ? 1 : 0;
    live_rebucket(s, n);
    if (queued)
        s->ops->add(s, n);
}

void gw_h2_sched_init(gw_h2_sched_t *s, const gw_h2_sched_ops_t *ops)
{
    s->ops = ops ? ops : &gw_h2_sched_round_robin;
    gw_list_init(&s->queue);
    s->count = 0;
    s->tree = NULL;
    s->live_n = 0;
    for (size_t i = 0; i < GW_H2_SCHED_BUCKETS; i++)
        s->live[i] = 0;
}

void gw_h2_sched_node_init(gw_h2_sched_node_t *n, uint32_t stream_id)
{
    gw_list_init(&n->link);
    n->stream_id = stream_id;
    n->urgency = 3;
    n->incremental = 0;
    n->tree = 0;
    n->live = 0;
}
