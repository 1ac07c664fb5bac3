/* server/worker.c — the worker threads: one libuv loop each, whose client connections are its
 * front's (front/front.h). Starting one, the wake-ups other threads send it (stop, a new
 * generation), its graceful stop and drain deadline, the end of its loop once its last
 * connection is gone, its questions to the cluster and the ops table its front calls (its
 * quiet periods go to heap.c). */

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/server_internal.h"

static void on_wake(uv_async_t *a);

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_whandle_closed(uv_handle_t *h)
{
    gw_free(GW_CONTAINER_OF((uv_tcp_t *)h, gw_whandle_t, tcp));
}

/* Close one listening handle: its socket is no longer ours to pass on. */
void gw_server__whandle_close(gw_whandle_t *wh)
{
    gw_server_t *s = wh->w->srv;
    uv_mutex_lock(&s->lock);
    s->socks[wh->sock]->live[wh->slot] = -1;
    uv_mutex_unlock(&s->lock);
    gw_list_remove(&wh->link);
    uv_close((uv_handle_t *)&wh->tcp, on_whandle_closed);
}

static void close_listeners(gw_worker_t *w)
{
    gw_list_foreach_safe(it, tmp, &w->handles)
        gw_server__whandle_close(GW_CONTAINER_OF(it, gw_whandle_t, link));
}

static void on_drain_deadline(uv_timer_t *t)
{
    gw_worker_t *w = GW_CONTAINER_OF(t, gw_worker_t, drain);
    GW_LOG_WARN("drain_deadline", "worker=%u open_connections=%zu", w->f.id, w->f.conns_len);
    /* a binary upgrade's old process keeps tunnels until timeouts.tunnel_drain, as a reload's
     * old generation does; SIGTERM does not wait for them */
    if (w->f.stop == GW_STOP_DRAIN && w->f.cur &&
        gw_server__drain_tunnels_kept(w, NULL, t, on_drain_deadline, &w->tunnel_phase))
        return;
    w->f.stop = GW_STOP_NOW;
    gw_front_stop_conns(&w->f, NULL, GW_STOP_NOW, 0);
}

void gw_server__worker_stop(gw_worker_t *w, gw_stop_t how)
{
    if (how <= w->f.stop)
        return;
    int first = w->f.stop == GW_STOP_NONE;
    w->f.stop = how;
    if (first) {
        close_listeners(w);
        if ((how == GW_STOP_GRACEFUL || how == GW_STOP_DRAIN) && w->f.cur) {
            uv_timer_start(&w->drain, on_drain_deadline,
                           w->f.cur->cfg->timeouts.graceful_shutdown_ms, 0);
        }
    }
    gw_front_stop_conns(&w->f, NULL, how, 0);
    if (how == GW_STOP_NOW && uv_is_active((uv_handle_t *)&w->drain))
        uv_timer_stop(&w->drain);
}

void gw_server__worker_conn_gone(gw_worker_t *w)
{
    /* every connection freed: their streams were told to the proxy before it closes */
    if (w->f.stop == GW_STOP_NONE || w->f.conns_alive != 0 ||
        uv_is_closing((uv_handle_t *)&w->drain))
        return;
    uv_close((uv_handle_t *)&w->drain, on_handle_closed);
    gw_front_close(&w->f);
    /* pooled origin connections of every generation: the loop can end */
    while (!gw_list_empty(&w->old))
        gw_server__wgen_retire(GW_CONTAINER_OF(w->old.next, gw_wgen_t, link));
    gw_wgen_t *g = WCUR(w);
    if (g) {
        w->f.cur = NULL;
        gw_server__wgen_retire(g);
    }
    uv_mutex_lock(&w->srv->lock);
    w->wake_open = 0;
    uv_close((uv_handle_t *)&w->wake, on_handle_closed);
    uv_close((uv_handle_t *)&w->scrape, on_handle_closed);
    uv_mutex_unlock(&w->srv->lock);
    gw_cluster_sink_close(w->sink);
    w->sink = NULL;
}

static void on_wake(uv_async_t *a)
{
    gw_worker_t *w = GW_CONTAINER_OF(a, gw_worker_t, wake);
    gw_stop_t how = (gw_stop_t)atomic_load(&w->srv->stop_request);
    if (how != GW_STOP_NONE) {
        gw_server__worker_stop(w, how);
        gw_server__worker_conn_gone(w);
        return;
    }
    if (w->f.stop == GW_STOP_NONE)
        (void)gw_server__worker_take_gen(w);
}

/* The cluster's answer to one of this worker's rate questions: to whichever proxy of its
 * generations asked (tokens are the worker's; the others ignore it). */
static void on_rate_answer(void *ud, const gw_cluster_answer_t *a)
{
    gw_worker_t *w = ud;
    gw_wgen_t *cur = WCUR(w);
    if (a->lease) { /* a client's bandwidth: into the shared table, for every worker */
        if (cur && cur->gen->clients)
            gw_bucket_table_lease_grant(
                cur->gen->clients->t, a->token, a->granted,
                a->verdict == GW_RATE_LOCAL ? gw_cluster_hub_share(w->srv->hub) : 0,
                gw_now_ns() / 1000);
        return;
    }
    int v = a->verdict == GW_RATE_ALLOW  ? GW_PROXY_RATE_ALLOW
            : a->verdict == GW_RATE_DENY ? GW_PROXY_RATE_DENY
                                         : GW_PROXY_RATE_LOCAL;
    if (cur)
        gw_proxy_rate_answer(cur->f.proxy, a->token, v, a->retry_after_s);
    gw_list_foreach(it, &w->old)
    {
        gw_wgen_t *g = GW_CONTAINER_OF(it, gw_wgen_t, link);
        gw_proxy_rate_answer(g->f.proxy, a->token, v, a->retry_after_s);
    }
}

/* A connection of fg was freed: an old generation with none left retires; a stopping worker
 * with none left ends. */
static void on_conn_freed(gw_front_t *f, gw_front_gen_t *fg)
{
    gw_worker_t *w = GW_CONTAINER_OF(f, gw_worker_t, f);
    gw_wgen_t *g = WGEN(fg);
    if (fg->conns == 0 && g->draining)
        gw_server__wgen_retire(g);
    gw_server__worker_conn_gone(w);
}

/* A lease of a client's bandwidth, through the cluster's hub (throttle.per_client_rate across
 * instances). */
static int on_lease(gw_front_t *f, const uint8_t *key, size_t klen, uint64_t rate, uint64_t burst,
                    uint64_t want, uint64_t token)
{
    gw_worker_t *w = GW_CONTAINER_OF(f, gw_worker_t, f);
    if (!w->sink || !w->srv->hub)
        return GW_E_INVAL;
    return gw_cluster_hub_lease(w->srv->hub, w->sink, key, klen, rate, burst, want, token);
}

/* How many instances split a client's bandwidth this worker decides alone now. */
static unsigned on_local_share(gw_front_t *f)
{
    gw_worker_t *w = GW_CONTAINER_OF(f, gw_worker_t, f);
    return gw_cluster_hub_share(w->srv->hub);
}

static void on_quiet(gw_front_t *f, int quiet)
{
    gw_server__worker_quiet(GW_CONTAINER_OF(f, gw_worker_t, f), quiet);
}

static const gw_front_ops_t worker_ops = {
    .conn_freed = on_conn_freed,
    .lease = on_lease,
    .local_share = on_local_share,
    .quiet = on_quiet,
};

unsigned gw_server__rate_share(void *ud)
{
    gw_worker_t *w = ud;
    return gw_cluster_hub_share(w->srv->hub);
}

uint64_t gw_server__rate_ask(void *ud, const uint8_t *key, size_t klen, uint64_t rate,
                             uint64_t burst, int wait)
{
    gw_worker_t *w = ud;
    if (!w->sink || !w->srv->hub)
        return 0;
    uint64_t token = wait ? ++w->rate_token : 0;
    if (gw_cluster_hub_ask(w->srv->hub, w->sink, key, klen, rate, burst, token) < 0)
        return 0;
    return token;
}

static void worker_main(void *arg)
{
    gw_worker_t *w = arg;
    uv_run(&w->f.loop, UV_RUN_DEFAULT);
    gw_front_alog_flush(&w->f);
    gw_server__metrics_answer(w, UINT64_MAX); /* the last counters; scrapes stop waiting */
    GW_LOG_INFO("worker_stats", "worker=%u accepted=%llu busy=%llu", w->f.id,
                (unsigned long long)atomic_load(&w->f.accepted),
                (unsigned long long)atomic_load(&w->f.busy));
    atomic_fetch_add(&w->srv->workers_done, 1);
    uv_async_send(&w->srv->main_wake);
}

int gw_server__worker_start(gw_server_t *s, unsigned id, gw_worker_t **out)
{
    gw_worker_t *w = gw_calloc(1, sizeof(*w));
    if (!w)
        return GW_E_NOMEM;
    if (gw_front_init(&w->f, id, &worker_ops, &s->alog) < 0) {
        gw_free(w);
        return GW_E_NOMEM;
    }
    w->srv = s;
    gw_list_init(&w->handles);
    gw_list_init(&w->old);
    uv_mutex_lock(&s->lock); /* a scrape (admin thread) reads s->workers */
    *out = w;
    uv_mutex_unlock(&s->lock);
    uv_async_init(&w->f.loop, &w->wake, on_wake);
    uv_async_init(&w->f.loop, &w->scrape, gw_server__on_scrape);
    if (s->hub && gw_cluster_sink_new(&w->f.loop, on_rate_answer, w, &w->sink) < 0)
        w->sink = NULL; /* rates are decided locally in this worker */
    uv_mutex_lock(&s->lock);
    w->snap_ok = 1;
    w->wake_open = 1;
    uv_mutex_unlock(&s->lock);
    uv_timer_init(&w->f.loop, &w->drain);
    int rv = gw_server__worker_take_gen(w);
    if (rv < 0) {
        if (!w->f.cur)
            GW_LOG_ERROR("proxy_failed", "worker=%u reason=\"%s\"", id, gw_strerror(rv));
        return rv;
    }
    gw_front_watch_quiet(&w->f); /* heap.c: a trim once every worker is quiet */
    if (uv_thread_create(&w->thread, worker_main, w) != 0)
        return GW_E_IO;
    return 0;
}

void gw_server__worker_free(gw_worker_t *w)
{
    if (!w)
        return;
    GW_ASSERT(w->f.cur == NULL && gw_list_empty(&w->old));
    gw_front_free(&w->f);
    gw_free(w);
}
