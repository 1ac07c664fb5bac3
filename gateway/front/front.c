/* front/front.c — a worker's front: its loop and the handles its connections share, stopping
 * its connections, and the generations they are accepted under (front/front.h). */
#include "common/alloc.h"
#include "common/err.h"
#include "front/front_internal.h"

int gw_front_init(gw_front_t *f, unsigned id, const gw_front_ops_t *ops, gw_front_alog_t *alog)
{
    if (uv_loop_init(&f->loop) != 0)
        return GW_E_NOMEM;
    f->id = id;
    f->ops = ops;
    f->alog = alog;
    gw_list_init(&f->gens);
    gw_list_init(&f->conns);
    gw_list_init(&f->dirty);
    uv_idle_init(&f->loop, &f->kick);
    uv_timer_init(&f->loop, &f->ticker);
    uv_timer_init(&f->loop, &f->alog_timer);
    gw_bytes_init(&f->alog_buf, 0);
    gw_theap_init(&f->timers);
    uv_mutex_init(&f->snap_lock);
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

void gw_front_close(gw_front_t *f)
{
    uv_close((uv_handle_t *)&f->kick, on_handle_closed);
    uv_close((uv_handle_t *)&f->ticker, on_handle_closed);
    uv_close((uv_handle_t *)&f->alog_timer, on_handle_closed);
}

void gw_front_free(gw_front_t *f)
{
    uv_loop_close(&f->loop);
    gw_theap_free(&f->timers);
    gw_bytes_free(&f->alog_buf);
    gw_front_mset_free(&f->m);
    gw_front_mset_free(&f->snap);
    uv_mutex_destroy(&f->snap_lock);
    if (f->h2s_pool_ok)
        gw_pool_free(&f->h2s_pool); /* every connection is closed: only the freelist is left */
    gw_rbuf_unref(f->oq_scratch);
    gw_free(f->oq_ents);
}

size_t gw_front_stop_conns(gw_front_t *f, const gw_front_gen_t *g, gw_stop_t how, int keep_tunnels)
{
    size_t kept = 0;
    gw_list_foreach_safe(it, tmp, &f->conns)
    {
        conn_t *c = GW_CONTAINER_OF(it, conn_t, link);
        if (g && c->g != g)
            continue;
        if (keep_tunnels && c->tunnels)
            kept++;
        else
            gw_front__conn_stop(it, how);
    }
    return kept;
}

int gw_front_gen_bind(gw_front_t *f, gw_front_gen_t *g)
{
    g->f = f;
    int rv = gw_front__metrics_bind(f, g);
    if (rv < 0)
        return rv;
    gw_list_push_back(&f->gens, &g->link);
    return 0;
}

void gw_front_gen_retire(gw_front_gen_t *g)
{
    gw_front__metrics_retire(g); /* before the pools close: their counters carry on */
    gw_list_remove(&g->link);
    gw_list_init(&g->link);
}

void gw_front_gen_free(gw_front_gen_t *g)
{
    gw_front__metrics_unbind(g);
    gw_h2_profile_del(g->h2prof);
    g->h2prof = NULL;
}
