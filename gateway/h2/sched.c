/* h2/sched.c — round-robin DATA scheduler. */
#include "h2/sched.h"

#include "common/err.h"

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

void gw_h2_sched_init(gw_h2_sched_t *s, const gw_h2_sched_ops_t *ops)
{
    s->ops = ops ? ops : &gw_h2_sched_round_robin;
    gw_list_init(&s->queue);
    s->count = 0;
}

void gw_h2_sched_node_init(gw_h2_sched_node_t *n, uint32_t stream_id)
{
    gw_list_init(&n->link);
    n->stream_id = stream_id;
    n->urgency = 3;
    n->incremental = 0;
}
