/* front/front.c — a worker's front: its loop and the handles its connections share, stopping
 * its connections, the generations they are accepted under, and whether the worker is quiet
 * (front/front.h). */
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
    uv_timer_init(&f->loop, &f->quiet_timer);
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
    uv_close((uv_handle_t *)&f->quiet_timer, on_handle_closed);
    f->quiet = GW_FRONT_Q_OFF;
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

/* ---- quiet: no connection with work for heap.idle_trim ------------------------------------ */

/* A connection takes up work (need_busy) or gives it back (drop_busy) many times per second
 * under load: that only stamps the time. The timer is armed when watching starts (the worker's
 * start, or its first work after being quiet) and re-armed when it fires early, so a busy worker
 * sees it fire about once per heap.idle_trim, never once per request. */

static uint64_t quiet_delay(const gw_front_t *f)
{
    return f->stop == GW_STOP_NONE && f->cur ? f->cur->cfg->heap.idle_trim_ms : 0;
}

static void on_quiet_timer(uv_timer_t *t)
{
    gw_front_t *f = GW_CONTAINER_OF(t, gw_front_t, quiet_timer);
    uint64_t d = quiet_delay(f), now = uv_now(&f->loop);
    f->quiet = GW_FRONT_Q_OFF;
    if (d == 0)
        return; /* turned off by a reload, or stopping: work starts it again */
    int busy = atomic_load_explicit(&f->busy, memory_order_relaxed) != 0;
    if (!busy && now - f->work_ms >= d) {
        f->quiet = GW_FRONT_Q_QUIET;
        if (f->ops->quiet)
            f->ops->quiet(f, 1);
        return;
    }
    f->quiet = GW_FRONT_Q_WATCH;
    uv_timer_start(t, on_quiet_timer, busy ? d : f->work_ms + d - now, 0);
}

void gw_front_watch_quiet(gw_front_t *f)
{
    if (f->quiet == GW_FRONT_Q_QUIET) {
        f->quiet = GW_FRONT_Q_OFF;
        if (f->ops->quiet)
            f->ops->quiet(f, 0);
    }
    uint64_t d = quiet_delay(f);
    if (d == 0 || f->quiet == GW_FRONT_Q_WATCH || uv_is_closing((uv_handle_t *)&f->quiet_timer))
        return;
    f->work_ms = uv_now(&f->loop);
    f->quiet = GW_FRONT_Q_WATCH;
    uv_timer_start(&f->quiet_timer, on_quiet_timer, d, 0);
}

void gw_front__work(gw_front_t *f)
{
    f->work_ms = uv_now(&f->loop);
    if (f->quiet != GW_FRONT_Q_WATCH)
        gw_front_watch_quiet(f);
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
