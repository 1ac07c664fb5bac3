/* front/ticker.c — a worker's connection timers: one libuv timer for the earliest of the
 * timeouts and throttle wake-ups its connections queue in a heap (common/theap.h). */
#include "common/err.h"
#include "front/front_internal.h"

static void on_ticker(uv_timer_t *t);

/* A worker's connections share one libuv timer: each queues a 16-byte node in the worker's
 * heap (common/theap.h) instead of owning two uv_timer_t (152 bytes each). The loop timer is
 * armed for the earliest node; like the connection timeouts (conn.c's gw_front__arm) it is
 * re-armed lazily: a node moved later, or removed, lets it fire early and re-arm for what is due
 * next. Due times are loop milliseconds (uv_now); a node never fires in the pass that queued it. */

static void ticker_rearm(gw_front_t *w)
{
    gw_theap_node_t *m = gw_theap_min(&w->timers);
    if (!m)
        return;
    if (uv_is_active((uv_handle_t *)&w->ticker) && w->ticker_due <= m->due)
        return;
    uint64_t now = uv_now(&w->loop);
    w->ticker_due = m->due;
    uv_timer_start(&w->ticker, on_ticker, m->due > now ? m->due - now : 0, 0);
}

/* Queue n at due. Every node a connection owns was reserved in the heap when it was created
 * (timer_nodes_add), so this cannot fail. */
void gw_front__ticker_set(gw_front_t *w, gw_theap_node_t *n, uint64_t due)
{
    uint64_t now = uv_now(&w->loop);
    if (due <= now)
        due = now + 1;
    (void)gw_theap_set(&w->timers, n, due);
    if (gw_theap_min(&w->timers) == n)
        ticker_rearm(w);
}

/* One more (k = 1) or one less (k = -1) node that may be queued: room is reserved ahead, so
 * arming never fails. 0 or GW_E_NOMEM. */
int gw_front__timer_nodes_add(gw_front_t *w, int k)
{
    if (k < 0) {
        w->timer_nodes--;
        return 0;
    }
    if (gw_theap_reserve(&w->timers, w->timer_nodes + 1) < 0)
        return GW_E_NOMEM;
    w->timer_nodes++;
    return 0;
}

static void on_ticker(uv_timer_t *t)
{
    gw_front_t *w = GW_CONTAINER_OF(t, gw_front_t, ticker);
    uint64_t now = uv_now(&w->loop);
    gw_theap_node_t *n;
    while ((n = gw_theap_min(&w->timers)) && n->due <= now) {
        gw_theap_remove(&w->timers, n);
        if (n->kind == TK_CONN)
            gw_front__on_timeout(GW_CONTAINER_OF(n, conn_t, tnode));
        else
            gw_front__on_throttle(GW_CONTAINER_OF(n, thr_t, tnode)->c);
    }
    ticker_rearm(w);
}
