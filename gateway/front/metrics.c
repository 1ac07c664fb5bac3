/* front/metrics.c — the worker side of the gateway's metrics.
 *
 * Each worker keeps its own counters and histograms (gw_mset_t) and writes them without a lock
 * or an atomic on the request path: per route, per upstream and per origin server, keyed by
 * their configuration names, so counters carry on across reloads (a generation finds the
 * entries of its names, or adds them). Labels are configuration names only: no request can add
 * a series.
 *
 * When a scrape asks (server/scrape.c), the worker copies its set into its snapshot in its own
 * thread, where the gauges are counted too (connections, streams, origin pools); the scrape
 * then adds every worker's snapshot into a set seeded with every series the configuration
 * names, at 0 (gw_front_mset_seed, gw_front_metrics_add). */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "h2/session.h"

static void copy_name(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n >= GW_MNAME)
        n = GW_MNAME - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---- name-keyed entries ------------------------------------------------------------------ */

static int grow(void **arr, size_t *cap, size_t len, size_t size)
{
    if (len < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    void *n = gw_realloc(*arr, nc * size);
    if (!n)
        return GW_E_NOMEM;
    memset((char *)n + *cap * size, 0, (nc - *cap) * size);
    *arr = n;
    *cap = nc;
    return 0;
}

static long find_route(const gw_mset_t *m, const char *name)
{
    for (size_t i = 0; i < m->nroutes; i++)
        if (!strncmp(m->routes[i].name, name, GW_MNAME - 1))
            return (long)i;
    return -1;
}

static long find_up(const gw_mset_t *m, const char *name)
{
    for (size_t i = 0; i < m->nups; i++)
        if (!strncmp(m->ups[i].name, name, GW_MNAME - 1))
            return (long)i;
    return -1;
}

static long find_server(const gw_mset_t *m, const char *up, const char *server)
{
    for (size_t i = 0; i < m->nservers; i++)
        if (!strncmp(m->servers[i].up, up, GW_MNAME - 1) &&
            !strncmp(m->servers[i].server, server, sizeof(m->servers[i].server) - 1))
            return (long)i;
    return -1;
}

static long add_route(gw_mset_t *m, const char *name, const char *upstream)
{
    long i = find_route(m, name);
    if (i < 0) {
        if (grow((void **)&m->routes, &m->routes_cap, m->nroutes, sizeof(*m->routes)) < 0)
            return -1;
        i = (long)m->nroutes++;
        copy_name(m->routes[i].name, name);
    }
    copy_name(m->routes[i].upstream, upstream); /* a route may move to another upstream */
    return i;
}

static long add_up(gw_mset_t *m, const char *name)
{
    long i = find_up(m, name);
    if (i < 0) {
        if (grow((void **)&m->ups, &m->ups_cap, m->nups, sizeof(*m->ups)) < 0)
            return -1;
        i = (long)m->nups++;
        copy_name(m->ups[i].name, name);
    }
    return i;
}

static long add_server(gw_mset_t *m, const char *up, const char *server)
{
    long i = find_server(m, up, server);
    if (i < 0) {
        if (grow((void **)&m->servers, &m->servers_cap, m->nservers, sizeof(*m->servers)) < 0)
            return -1;
        i = (long)m->nservers++;
        m->servers[i].up_state = -1;
        copy_name(m->servers[i].up, up);
        snprintf(m->servers[i].server, sizeof(m->servers[i].server), "%s", server);
    }
    return i;
}

void gw_front_mset_free(gw_mset_t *m)
{
    gw_free(m->routes);
    gw_free(m->ups);
    gw_free(m->servers);
    gw_free(m->conns);
    memset(m, 0, sizeof(*m));
}

int gw_front__metrics_bind(gw_front_t *w, gw_front_gen_t *g)
{
    const gw_config_t *cfg = g->cfg;
    gw_mset_t *m = &w->m;
    size_t nsrv = 0;
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        nsrv += cfg->upstreams[i].servers_len;
    g->mroute = gw_calloc(cfg->routes_len + 1, sizeof(size_t));
    g->mup = gw_calloc(cfg->upstreams_len + 1, sizeof(size_t));
    g->msrv = gw_calloc(nsrv + 1, sizeof(size_t));
    g->msrv_off = gw_calloc(cfg->upstreams_len + 1, sizeof(size_t));
    if (!g->mroute || !g->mup || !g->msrv || !g->msrv_off)
        return GW_E_NOMEM;
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        long u = add_up(m, cfg->upstreams[i].name);
        if (u < 0)
            return GW_E_NOMEM;
        g->mup[i] = (size_t)u;
    }
    for (size_t i = 0; i < cfg->routes_len; i++) {
        long r = add_route(m, cfg->routes[i].name, cfg->routes[i].upstream_name);
        if (r < 0)
            return GW_E_NOMEM;
        g->mroute[i] = (size_t)r;
    }
    size_t k = 0;
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        g->msrv_off[i] = k;
        for (size_t j = 0; j < cfg->upstreams[i].servers_len; j++) {
            long s = add_server(m, cfg->upstreams[i].name, cfg->upstreams[i].servers[j].addr.text);
            if (s < 0)
                return GW_E_NOMEM;
            g->msrv[k++] = (size_t)s;
        }
    }
    return 0;
}

void gw_front__metrics_unbind(gw_front_gen_t *g)
{
    gw_free(g->mroute);
    gw_free(g->mup);
    gw_free(g->msrv);
    gw_free(g->msrv_off);
}

/* ---- recording (worker thread, no lock) -------------------------------------------------- */

void gw_front__metrics_request(conn_t *c, const gw_alog_t *r)
{
    gw_front_t *w = W(c);
    gw_mset_t *m = &w->m;
    if (r->coalesced)
        m->coalesced++;
    if (r->route_ix == UINT32_MAX) {
        m->unrouted[r->status >= 100 && r->status < 600 ? r->status / 100 - 1 : GW_MCODES - 1]++;
        return;
    }
    const gw_config_t *cfg = CFG(c);
    gw_mroute_t *mr = &m->routes[c->g->mroute[r->route_ix]];
    mr->req[r->status >= 100 && r->status < 600 ? r->status / 100 - 1 : GW_MCODES - 1]++;
    if (r->rate_limited)
        mr->rate_limited++;
    if (r->auth && r->auth < GW_ALOG_AUTH_N)
        mr->auth[r->auth]++;
    uint64_t end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
    gw_hist_add(&mr->dur, (end - r->start_ns) / 1000);
    gw_mup_t *mu = &m->ups[c->g->mup[cfg->routes[r->route_ix].upstream]];
    mu->retries += r->retries;
    if (!r->coalesced) { /* a follower's origin exchange was its leader's */
        if (r->connect_us >= 0)
            gw_hist_add(&mu->connect, (uint64_t)r->connect_us);
        if (r->upstream_head_us >= 0)
            gw_hist_add(&mu->header, (uint64_t)r->upstream_head_us);
        if (r->upstream_queue_us >= 0)
            gw_hist_add(&mu->queue, (uint64_t)r->upstream_queue_us);
    }
}

void gw_front__metrics_h2_closed(gw_front_t *w, const gw_h2_stats_t *st)
{
    uint64_t *e = w->m.h2err;
    e[GW_MH2_RAPID_RESET] += st->reset_budget_hits;
    e[GW_MH2_CONTROL_FLOOD] += st->control_flood_hits;
    e[GW_MH2_EMPTY_FRAMES] += st->empty_frame_hits;
    e[GW_MH2_QUEUED_CONTROL] += st->queued_control_hits;
    e[GW_MH2_HEADER_LIST] += st->header_list_hits;
    e[GW_MH2_HEADER_BLOCK] += st->header_block_hits;
    e[GW_MH2_SETTINGS_TIMEOUT] += st->settings_timeouts;
    e[GW_MH2_MALFORMED_REQUEST] += st->malformed_requests;
    e[GW_MH2_REFUSED_STREAM] += st->streams_refused;
    /* not errors: a connection that served its quota, a client tree larger than we keep */
    w->m.h2_max_requests += st->max_requests_hits;
    w->m.h2_priority_evictions += st->priority_evictions;
    w->m.push_cancelled += st->pushes_cancelled;
}

/* Add a proxy's compression counters (and, with gauges, its running compressors) into d. */
static void zadd(gw_proxy_zstats_t *d, const gw_proxy_zstats_t *s, int gauges)
{
    for (size_t c = 0; c < GW_ZC_N; c++) {
        d->in[c] += s->in[c];
        d->out[c] += s->out[c];
        d->streams[c] += s->streams[c];
    }
    for (size_t k = 0; k < GW_ZSKIP_N; k++)
        d->skipped[k] += s->skipped[k];
    d->shared += s->shared;
    if (gauges) {
        d->active += s->active;
        d->mem += s->mem;
    }
}

static void hadd(gw_proxy_hint_stats_t *d, const gw_proxy_hint_stats_t *s, int gauges)
{
    d->sent_configured += s->sent_configured;
    d->sent_learned += s->sent_learned;
    d->sent_origin += s->sent_origin;
    d->dropped_origin += s->dropped_origin;
    d->learned += s->learned;
    d->evicted += s->evicted;
    d->expired += s->expired;
    d->push_promised += s->push_promised;
    d->push_client += s->push_client;
    d->push_limit += s->push_limit;
    d->push_duplicate += s->push_duplicate;
    d->push_closed += s->push_closed;
    if (gauges)
        d->entries += s->entries;
}

/* Origin counters of a generation's pools that are about to close carry on in the entries. */
void gw_front__metrics_retire(gw_front_gen_t *g)
{
    const gw_config_t *cfg = g->cfg;
    gw_mset_t *m = &g->f->m;
    gw_proxy_zstats_t z;
    gw_proxy_zstats(g->proxy, &z);
    zadd(&m->z_retired, &z, 0);
    gw_proxy_hint_stats_t hs;
    gw_proxy_hint_stats(g->proxy, &hs);
    hadd(&m->hint_retired, &hs, 0);
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        for (size_t j = 0; j < cfg->upstreams[i].servers_len; j++) {
            gw_proxy_server_stats_t st;
            if (gw_proxy_server_stats(g->proxy, i, j, &st) < 0)
                continue;
            gw_mserver_t *ms = &m->servers[g->msrv[g->msrv_off[i] + j]];
            ms->retired_opened += st.opened;
            ms->retired_failures += st.failures;
            ms->retired_ejections += st.ejections;
            m->origin_in_retired += st.bytes_in;
            m->origin_out_retired += st.bytes_out;
        }
}

/* ---- snapshots (worker thread) --------------------------------------------------------------- */

/* The entry of client connections on listener in state proto, added at 0 when missing: its
 * index, or -1 without memory. */
static long conn_entry(gw_mset_t *m, const char *listener, const char *proto)
{
    size_t i = 0;
    while (i < m->nconns &&
           (strcmp(m->conns[i].listener, listener) || strcmp(m->conns[i].proto, proto)))
        i++;
    if (i == m->nconns) {
        if (grow((void **)&m->conns, &m->conns_cap, m->nconns, sizeof(*m->conns)) < 0)
            return -1;
        snprintf(m->conns[i].listener, sizeof(m->conns[i].listener), "%s", listener);
        snprintf(m->conns[i].proto, sizeof(m->conns[i].proto), "%s", proto);
        m->conns[i].n = 0;
        m->nconns++;
    }
    return (long)i;
}

static int snap_conns(gw_front_t *w, gw_mset_t *dst)
{
    dst->nconns = 0;
    dst->streams = 0;
    dst->tunnels = 0;
    gw_list_foreach(it, &w->conns)
    {
        conn_t *c = GW_CONTAINER_OF(it, conn_t, link);
        const char *proto = c->state == CS_H2 ? "h2" : c->state == CS_H1 ? "http/1.1" : "pending";
        if (c->state == CS_CLOSING)
            proto = "closing";
        dst->tunnels += c->tunnels;
        if (c->state == CS_H2)
            dst->streams += gw_h2_session_active_streams(c->h2);
        else if (c->state == CS_H1 && h1x_active(c->h1))
            dst->streams++;
        long i = conn_entry(dst, c->l->cfg->addr.text, proto);
        if (i < 0)
            return GW_E_NOMEM;
        dst->conns[i].n++;
    }
    return 0;
}

/* The origin gauges of one generation's pools, added into dst (indexed like w->m). */
static void snap_pools(gw_front_gen_t *g, gw_mset_t *dst, int current)
{
    const gw_config_t *cfg = g->cfg;
    gw_proxy_zstats_t z;
    gw_proxy_zstats(g->proxy, &z);
    zadd(&dst->z, &z, 1);
    gw_proxy_hint_stats_t hs;
    gw_proxy_hint_stats(g->proxy, &hs);
    hadd(&dst->hint, &hs, 1);
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        dst->ups[g->mup[i]].queued += gw_proxy_upstream_queued(g->proxy, i);
        for (size_t j = 0; j < cfg->upstreams[i].servers_len; j++) {
            gw_proxy_server_stats_t st;
            if (gw_proxy_server_stats(g->proxy, i, j, &st) < 0)
                continue;
            gw_mserver_t *ms = &dst->servers[g->msrv[g->msrv_off[i] + j]];
            ms->idle += st.idle;
            ms->active += st.active;
            ms->opened += st.opened;
            ms->failures += st.failures;
            ms->ejections += st.ejections;
            dst->origin_in += st.bytes_in;
            dst->origin_out += st.bytes_out;
            if (current)
                ms->up_state = st.up ? 1 : 0;
        }
    }
}

/* Copy the worker's set into dst (its arrays reused), with the gauges of now. */
static int snap_take(gw_front_t *w, gw_mset_t *dst)
{
    gw_mset_t *m = &w->m;
    gw_mroute_t *r = dst->routes;
    gw_mup_t *u = dst->ups;
    gw_mserver_t *sv = dst->servers;
    gw_mconn_t *cn = dst->conns;
    size_t rc = dst->routes_cap, uc = dst->ups_cap, sc = dst->servers_cap, cc = dst->conns_cap;
    if (rc < m->nroutes || uc < m->nups || sc < m->nservers) {
        r = gw_realloc(r, (m->routes_cap + 1) * sizeof(*r));
        if (r) {
            dst->routes = r;
            rc = m->routes_cap + 1;
        }
        u = gw_realloc(u, (m->ups_cap + 1) * sizeof(*u));
        if (u) {
            dst->ups = u;
            uc = m->ups_cap + 1;
        }
        sv = gw_realloc(sv, (m->servers_cap + 1) * sizeof(*sv));
        if (sv) {
            dst->servers = sv;
            sc = m->servers_cap + 1;
        }
        dst->routes_cap = rc, dst->ups_cap = uc, dst->servers_cap = sc;
        if (!r || !u || !sv)
            return GW_E_NOMEM;
    }
    /* scalars first, then the arrays over them */
    memcpy(dst, m, offsetof(gw_mset_t, routes));
    dst->routes = r, dst->ups = u, dst->servers = sv, dst->conns = cn;
    dst->routes_cap = rc, dst->ups_cap = uc, dst->servers_cap = sc, dst->conns_cap = cc;
    dst->nroutes = m->nroutes, dst->nups = m->nups, dst->nservers = m->nservers;
    memcpy(dst->routes, m->routes, m->nroutes * sizeof(*r));
    memcpy(dst->ups, m->ups, m->nups * sizeof(*u));
    memcpy(dst->servers, m->servers, m->nservers * sizeof(*sv));
    for (size_t i = 0; i < dst->nups; i++)
        dst->ups[i].queued = 0;
    for (size_t i = 0; i < dst->nservers; i++) {
        dst->servers[i].idle = dst->servers[i].active = 0;
        dst->servers[i].opened = dst->servers[i].retired_opened;
        dst->servers[i].failures = dst->servers[i].retired_failures;
        dst->servers[i].ejections = dst->servers[i].retired_ejections;
        dst->servers[i].up_state = -1;
    }
    dst->origin_in = m->origin_in_retired;
    dst->origin_out = m->origin_out_retired;
    dst->z = m->z_retired;
    dst->hint = m->hint_retired;
    gw_list_foreach(it, &w->gens)
    {
        gw_front_gen_t *g = GW_CONTAINER_OF(it, gw_front_gen_t, link);
        snap_pools(g, dst, g == w->cur);
    }
    dst->alog_lost = atomic_load(&w->alog_lost);
    return snap_conns(w, dst);
}

/* Take a snapshot for a scrape (or the last one, at exit): the worker's thread. */
void gw_front_metrics_snapshot(gw_front_t *w)
{
    uv_mutex_lock(&w->snap_lock);
    if (snap_take(w, &w->snap) < 0)
        GW_LOG_WARN("metrics_snapshot_failed", "worker=%u reason=nomem", w->id);
    uv_mutex_unlock(&w->snap_lock);
}

/* ---- what a scrape does with the sets (any thread) ---------------------------------------- */

static void merge(gw_mset_t *t, const gw_mset_t *s)
{
    t->client_in += s->client_in;
    t->client_out += s->client_out;
    t->origin_in += s->origin_in;
    t->origin_out += s->origin_out;
    t->coalesced += s->coalesced;
    t->throttled_bytes += s->throttled_bytes;
    t->streams += s->streams;
    t->tunnels += s->tunnels;
    t->alog_lost += s->alog_lost;
    t->push_cancelled += s->push_cancelled;
    t->h2_max_requests += s->h2_max_requests;
    t->h2_priority_evictions += s->h2_priority_evictions;
    zadd(&t->z, &s->z, 1);
    hadd(&t->hint, &s->hint, 1);
    for (size_t i = 0; i < GW_MH2_KINDS; i++)
        t->h2err[i] += s->h2err[i];
    for (size_t i = 0; i < 3; i++) {
        t->tls[i] += s->tls[i];
        t->client_verify[i] += s->client_verify[i];
    }
    for (size_t i = 0; i < GW_MCODES; i++)
        t->unrouted[i] += s->unrouted[i];
    for (size_t i = 0; i < s->nroutes; i++) {
        long k = add_route(t, s->routes[i].name, s->routes[i].upstream);
        if (k < 0)
            continue;
        gw_mroute_t *d = &t->routes[k];
        for (size_t c = 0; c < GW_MCODES; c++)
            d->req[c] += s->routes[i].req[c];
        d->rate_limited += s->routes[i].rate_limited;
        for (size_t a = 0; a < GW_ALOG_AUTH_N; a++)
            d->auth[a] += s->routes[i].auth[a];
        gw_hist_merge(&d->dur, &s->routes[i].dur);
    }
    for (size_t i = 0; i < s->nups; i++) {
        long k = add_up(t, s->ups[i].name);
        if (k < 0)
            continue;
        gw_mup_t *d = &t->ups[k];
        gw_hist_merge(&d->connect, &s->ups[i].connect);
        gw_hist_merge(&d->header, &s->ups[i].header);
        gw_hist_merge(&d->queue, &s->ups[i].queue);
        d->retries += s->ups[i].retries;
        d->queued += s->ups[i].queued;
    }
    for (size_t i = 0; i < s->nservers; i++) {
        long k = add_server(t, s->servers[i].up, s->servers[i].server);
        if (k < 0)
            continue;
        gw_mserver_t *d = &t->servers[k];
        d->idle += s->servers[i].idle;
        d->active += s->servers[i].active;
        d->opened += s->servers[i].opened;
        d->failures += s->servers[i].failures;
        d->ejections += s->servers[i].ejections;
        if (s->servers[i].up_state >= 0)
            d->up_state = d->up_state == 0 ? 0 : s->servers[i].up_state; /* any worker: down */
    }
    for (size_t i = 0; i < s->nconns; i++) {
        long k = conn_entry(t, s->conns[i].listener, s->conns[i].proto);
        if (k >= 0)
            t->conns[k].n += s->conns[i].n;
    }
}

void gw_front_metrics_add(gw_front_t *w, gw_mset_t *t)
{
    uv_mutex_lock(&w->snap_lock);
    merge(t, &w->snap);
    uv_mutex_unlock(&w->snap_lock);
}

/* Every series the configuration names, at 0 before any worker's numbers are added: a series
 * that appeared only once non-zero would make rate() and absent() alerts wrong from the start.
 * The caller keeps cfg alive. */
void gw_front_mset_seed(gw_mset_t *t, const gw_config_t *cfg)
{
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        add_up(t, cfg->upstreams[i].name);
        for (size_t j = 0; j < cfg->upstreams[i].servers_len; j++) {
            long k = add_server(t, cfg->upstreams[i].name, cfg->upstreams[i].servers[j].addr.text);
            /* a pool's server starts healthy; any worker that saw it ejected says 0 (merge) */
            if (k >= 0)
                t->servers[k].up_state = 1;
        }
    }
    for (size_t i = 0; i < cfg->routes_len; i++)
        add_route(t, cfg->routes[i].name, cfg->routes[i].upstream_name);
    for (size_t i = 0; i < cfg->listen_len; i++) {
        const gw_cfg_listen_t *l = &cfg->listen[i];
        /* the states snap_conns() counts, those of protocols the listener speaks */
        if (l->protocols & (GW_PROTO_F_H2 | GW_PROTO_F_H2C))
            conn_entry(t, l->addr.text, "h2");
        if (l->protocols & GW_PROTO_F_HTTP1)
            conn_entry(t, l->addr.text, "http/1.1");
        conn_entry(t, l->addr.text, "pending");
        conn_entry(t, l->addr.text, "closing");
    }
}
