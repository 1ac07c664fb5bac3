/* proxy/proxy.c — the proxy of one worker: its lifetime (the back side it owns, its timers and
 * its handles), what the front sets on it, and the counters it keeps. */
#include "common/alloc.h"
#include "common/err.h"
#include "proxy/proxy_internal.h"

int gw_proxy_new(uv_loop_t *loop, const gw_config_t *cfg, gw_proxy_t **out)
{
    gw_proxy_t *p = gw_calloc(1, sizeof(*p));
    if (!p)
        return GW_E_NOMEM;
    p->cfg = cfg;
    p->loop = loop;
    p->tunnels = &p->tunnels_own;
    p->zcharged = &p->zcharged_own;
    /* streams and exchanges come from freelists: malloc and free were the largest
     * part of the proxy's per-request cost, and a worker with 512 streams in flight (h2load
     * -c 32 -m 16) frees that many within a few loop turns and needs them again right after */
    gw_pool_init(&p->px_pool, sizeof(px_t), 0, GW_POOL_KEEP);
    gw_pool_init(&p->ox_pool, sizeof(ox_t), 0, GW_POOL_KEEP);
    gw_list_init(&p->paused);
    gw_list_init(&p->inflight);
    gw_list_init(&p->rate_waits);
    if (gw_proxy__chains_new(p) < 0 || gw_proxy__errpages_new(p) < 0) {
        gw_proxy__errpages_free(p);
        gw_proxy__chains_free(p);
        gw_free(p);
        return GW_E_NOMEM;
    }
    int arv = gw_proxy__auth_new(p);
    if (arv < 0) {
        gw_proxy__auth_free(p);
        gw_proxy__chains_free(p);
        gw_free(p);
        return arv;
    }
    /* what one compressor of each coding weighs against compression.max_memory: measured
     * here, off the request path, when some route compresses */
    for (size_t i = 0; i < cfg->routes_len; i++) {
        if (!cfg->routes[i].compress)
            continue;
        for (gw_zcoding_t c = GW_ZC_GZIP; c < GW_ZC_N; c++)
            if ((gw_zstream_available() & (1u << c)) &&
                !(p->zweight[c] = gw_zstream_weigh(&cfg->compression, c))) {
                gw_proxy__errpages_free(p);
                gw_proxy__auth_free(p);
                gw_proxy__chains_free(p);
                gw_free(p);
                return GW_E_NOMEM;
            }
        break;
    }
    int rv = gw_back_new(loop, cfg, &p->back);
    if (rv < 0) {
        gw_proxy__errpages_free(p);
        gw_proxy__auth_free(p);
        gw_proxy__chains_free(p);
        gw_free(p);
        return rv;
    }
    /* RFC 9218 urgency first, arrival order within one urgency (so FIFO when nobody signals) */
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        gw_back_set_queue_order(p->back, i, gw_back_queue_urgency);
    uv_timer_init(loop, &p->sweep);
    p->sweep.data = p;
    p->sweep_open = 1;
    gw_list_init(&p->uploading);
    uv_timer_init(loop, &p->upload_sweep);
    p->upload_sweep.data = p;
    p->upload_open = 1;
    gw_list_init(&p->acc_pending);
    uv_prepare_init(loop, &p->acc_flush);
    p->acc_flush.data = p;
    p->acc_open = 1;
    gw_list_init(&p->bg);
    gw_list_init(&p->bg_done);
    uv_timer_init(loop, &p->bg_reap);
    p->bg_reap.data = p;
    p->bg_open = 1;
    *out = p;
    return 0;
}

static void on_proxy_handle_closed(uv_handle_t *h)
{
    gw_proxy_t *p = h->data;
    if (--p->closing == 0 && p->closed_cb)
        p->closed_cb(p, p->closed_arg);
}

static void close_handle(gw_proxy_t *p, uv_handle_t *h)
{
    h->data = p;
    p->closing++;
    uv_close(h, on_proxy_handle_closed);
}

void gw_proxy_close_then(gw_proxy_t *p, void (*cb)(gw_proxy_t *p, void *arg), void *arg)
{
    p->closed_cb = cb;
    p->closed_arg = arg;
    gw_proxy_close(p);
    if (p->closing == 0 && cb) /* nothing was open: done now (the last use of p) */
        cb(p, arg);
}

void gw_proxy_close(gw_proxy_t *p)
{
    if (!p)
        return;
    gw_proxy__auth_close(p);
    gw_proxy__revalidate_close(p); /* before the back: their exchanges are cancelled, not failed */
    if (p->back) {
        gw_back_t *b = p->back;
        p->back = NULL;
        gw_back_del(b); /* live exchanges fail now: their callbacks answer or reset */
    }
    if (p->sweep_open) {
        p->sweep_open = 0;
        close_handle(p, (uv_handle_t *)&p->sweep);
    }
    if (p->upload_open) {
        p->upload_open = 0;
        close_handle(p, (uv_handle_t *)&p->upload_sweep);
    }
    if (p->acc_open) {
        p->acc_open = 0;
        close_handle(p, (uv_handle_t *)&p->acc_flush);
    }
    if (p->bg_open) {
        p->bg_open = 0;
        close_handle(p, (uv_handle_t *)&p->bg_reap);
    }
}

void gw_proxy_del(gw_proxy_t *p)
{
    if (!p)
        return;
    GW_ASSERT(!p->back && !p->sweep_open && !p->upload_open && !p->acc_open && !p->bg_open &&
              !p->closing);
    gw_pool_free(&p->px_pool);
    gw_pool_free(&p->ox_pool);
    gw_proxy__hints_free(&p->hints);
    gw_proxy__errpages_free(p);
    gw_proxy__chains_free(p);
    gw_proxy__auth_free(p);
    gw_free(p);
}

void gw_proxy_hint_stats(const gw_proxy_t *p, gw_proxy_hint_stats_t *out)
{
    *out = p->hints.st;
    out->entries = p->hints.n;
}

void gw_proxy_set_rate_table(gw_proxy_t *p, gw_bucket_table_t *t)
{
    p->rates = t;
}

void gw_proxy_set_cache(gw_proxy_t *p, struct gw_cache *c)
{
    p->cache = c;
}

void gw_proxy_set_trim(gw_proxy_t *p, gw_proxy_trim_cb trim, void *user_data)
{
    p->trim = trim;
    p->trim_data = user_data;
}

void gw_proxy_set_rate_asker(gw_proxy_t *p, const gw_proxy_rate_asker_t *a)
{
    p->asker = a ? *a : (gw_proxy_rate_asker_t){0};
}

void gw_proxy_set_tunnel_count(gw_proxy_t *p, unsigned *n)
{
    p->tunnels = n ? n : &p->tunnels_own;
}

void gw_proxy_set_zmem_count(gw_proxy_t *p, uint64_t *n)
{
    GW_ASSERT(p->zst.active == 0); /* the charges made so far went to the other count */
    p->zcharged = n ? n : &p->zcharged_own;
}

int gw_proxy_ws_h1_request(gw_slice_t method, const gw_field_t *f, size_t n)
{
    return gw_proxy__ws_h1_request(method, f, n);
}

#ifdef GW_TEST_API
void gw_proxy_stats(const gw_proxy_t *p, gw_proxy_stats_t *out)
{
    *out = p->stats;
}
#endif

void gw_proxy_zstats(const gw_proxy_t *p, gw_proxy_zstats_t *out)
{
    *out = p->zst;
}

int gw_proxy_server_stats(const gw_proxy_t *p, size_t up, size_t srv, gw_proxy_server_stats_t *out)
{
    if (!p->back)
        return GW_E_CLOSED;
    gw_back_stats_t st;
    int rv = gw_back_server_stats(p->back, up, srv, &st);
    if (rv < 0)
        return rv;
    out->active = st.active;
    out->idle = st.idle;
    out->opened = st.opened;
    out->bytes_in = st.bytes_in;
    out->bytes_out = st.bytes_out;
    out->failures = st.failures;
    out->ejections = st.ejections;
    out->up = gw_back_server_ejected(p->back, up, srv) == 0;
    return 0;
}

unsigned gw_proxy_upstream_queued(const gw_proxy_t *p, size_t up)
{
    if (!p->back || up >= p->cfg->upstreams_len)
        return 0;
    gw_back_stats_t st;
    gw_back_stats(p->back, up, &st);
    return st.queued;
}
