/* front/metrics.c — the gateway's metrics (issue 21 item 5).
 *
 * Each worker keeps its own counters and histograms (gw_mset_t) and writes them without a lock
 * or an atomic on the request path: per route, per upstream and per origin server, keyed by
 * their configuration names, so counters carry on across reloads (a generation finds the
 * entries of its names, or adds them). Labels are configuration names only: no request can add
 * a series.
 *
 * A scrape (gw_server_metrics, from the admin thread) asks every worker, through an async
 * handle, to copy its set into its snapshot (in the worker's own thread, where the gauges are
 * counted too: connections, streams, origin pools), waits for the copies (at most a second:
 * a stuck worker's last copy is used), and sums them by name. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "gw_version.h"
#include "h2/session.h"

#define SCRAPE_WAIT_MS 1000

static const char *const code_names[GW_MCODES] = {"1xx", "2xx", "3xx", "4xx", "5xx", "none"};
static const char *const h2_kind_names[GW_MH2_KINDS] = {
    "rapid_reset",        "control_flood",     "empty_frames",   "queued_control",
    "header_list",        "header_block",      "max_requests",   "settings_timeout",
    "priority_evictions", "malformed_request", "refused_stream",
};
static const char *const tls_result_names[3] = {"full", "resumed", "failed"};

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

void gw_front__mset_free(gw_mset_t *m)
{
    gw_free(m->routes);
    gw_free(m->ups);
    gw_free(m->servers);
    gw_free(m->conns);
    memset(m, 0, sizeof(*m));
}

int gw_front__metrics_bind(gw_worker_t *w, gw_wgen_t *g)
{
    const gw_config_t *cfg = g->gen->cfg;
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

void gw_front__metrics_unbind(gw_wgen_t *g)
{
    gw_free(g->mroute);
    gw_free(g->mup);
    gw_free(g->msrv);
    gw_free(g->msrv_off);
}

/* ---- recording (worker thread, no lock) -------------------------------------------------- */

void gw_front__metrics_request(conn_t *c, const gw_alog_t *r)
{
    gw_worker_t *w = W(c);
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
    uint64_t end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
    gw_hist_add(&mr->dur, (end - r->start_ns) / 1000);
    gw_mup_t *mu = &m->ups[c->g->mup[cfg->routes[r->route_ix].upstream]];
    mu->retries += r->retries;
    if (!r->coalesced) { /* a follower's origin exchange was its leader's */
        if (r->connect_us >= 0)
            gw_hist_add(&mu->connect, (uint64_t)r->connect_us);
        if (r->upstream_head_us >= 0)
            gw_hist_add(&mu->header, (uint64_t)r->upstream_head_us);
    }
}

void gw_front__metrics_h2_closed(gw_worker_t *w, const gw_h2_stats_t *st)
{
    uint64_t *e = w->m.h2err;
    e[0] += st->reset_budget_hits;
    e[1] += st->control_flood_hits;
    e[2] += st->empty_frame_hits;
    e[3] += st->queued_control_hits;
    e[4] += st->header_list_hits;
    e[5] += st->header_block_hits;
    e[6] += st->max_requests_hits;
    e[7] += st->settings_timeouts;
    e[8] += st->priority_evictions;
    e[9] += st->malformed_requests;
    e[10] += st->streams_refused;
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
void gw_front__metrics_retire(gw_wgen_t *g)
{
    const gw_config_t *cfg = g->gen->cfg;
    gw_mset_t *m = &g->w->m;
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

static int snap_conns(gw_worker_t *w, gw_mset_t *dst)
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
        const char *lname = c->l->cfg->addr.text;
        size_t i = 0;
        while (i < dst->nconns &&
               (strcmp(dst->conns[i].listener, lname) || strcmp(dst->conns[i].proto, proto)))
            i++;
        if (i == dst->nconns) {
            if (grow((void **)&dst->conns, &dst->conns_cap, dst->nconns, sizeof(*dst->conns)) < 0)
                return GW_E_NOMEM;
            snprintf(dst->conns[i].listener, sizeof(dst->conns[i].listener), "%s", lname);
            snprintf(dst->conns[i].proto, sizeof(dst->conns[i].proto), "%s", proto);
            dst->conns[i].n = 0;
            dst->nconns++;
        }
        dst->conns[i].n++;
    }
    return 0;
}

/* The origin gauges of one generation's pools, added into dst (indexed like w->m). */
static void snap_pools(gw_wgen_t *g, gw_mset_t *dst, int current)
{
    const gw_config_t *cfg = g->gen->cfg;
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
static int snap_take(gw_worker_t *w, gw_mset_t *dst)
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
    if (w->cur)
        snap_pools(w->cur, dst, 1);
    gw_list_foreach(it, &w->old) snap_pools(GW_CONTAINER_OF(it, gw_wgen_t, link), dst, 0);
    dst->alog_lost = atomic_load(&w->alog_lost);
    return snap_conns(w, dst);
}

/* Take the snapshot a scrape asked for (or the last one, at exit). */
void gw_front__metrics_snapshot(gw_worker_t *w, uint64_t ticket)
{
    uv_mutex_lock(&w->snap_lock);
    if (snap_take(w, &w->snap) < 0)
        GW_LOG_WARN("metrics_snapshot_failed", "worker=%u reason=nomem", w->id);
    uv_mutex_unlock(&w->snap_lock);
    gw_server_t *s = w->srv;
    uv_mutex_lock(&s->snap_mu);
    w->snap_done = ticket;
    uv_cond_broadcast(&s->snap_cond);
    uv_mutex_unlock(&s->snap_mu);
}

void gw_front__on_scrape(uv_async_t *a)
{
    gw_worker_t *w = GW_CONTAINER_OF(a, gw_worker_t, scrape);
    uv_mutex_lock(&w->srv->snap_mu);
    uint64_t ticket = w->srv->snap_ticket;
    uv_mutex_unlock(&w->srv->snap_mu);
    gw_front__metrics_snapshot(w, ticket);
}

/* ---- the scrape (admin thread) ------------------------------------------------------------- */

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
    zadd(&t->z, &s->z, 1);
    hadd(&t->hint, &s->hint, 1);
    for (size_t i = 0; i < GW_MH2_KINDS; i++)
        t->h2err[i] += s->h2err[i];
    for (size_t i = 0; i < 3; i++)
        t->tls[i] += s->tls[i];
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
        gw_hist_merge(&d->dur, &s->routes[i].dur);
    }
    for (size_t i = 0; i < s->nups; i++) {
        long k = add_up(t, s->ups[i].name);
        if (k < 0)
            continue;
        gw_mup_t *d = &t->ups[k];
        gw_hist_merge(&d->connect, &s->ups[i].connect);
        gw_hist_merge(&d->header, &s->ups[i].header);
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
        size_t k = 0;
        while (k < t->nconns && (strcmp(t->conns[k].listener, s->conns[i].listener) ||
                                 strcmp(t->conns[k].proto, s->conns[i].proto)))
            k++;
        if (k == t->nconns) {
            if (grow((void **)&t->conns, &t->conns_cap, t->nconns, sizeof(*t->conns)) < 0)
                continue;
            t->conns[k] = s->conns[i];
            t->conns[k].n = 0;
            t->nconns++;
        }
        t->conns[k].n += s->conns[i].n;
    }
}

#define FAM(n, t, h)                                                                               \
    if (rv == 0)                                                                                   \
    rv = gw_prom_family(out, n, t, h)
#define SAMPLE(n, l, k, v)                                                                         \
    if (rv == 0)                                                                                   \
    rv = gw_prom_sample(out, n, l, k, v)
#define HIST(n, l, k, h)                                                                           \
    if (rv == 0)                                                                                   \
    rv = gw_prom_hist(out, n, l, k, h)

typedef struct {
    uint64_t size, evictions, refused;
    int on;
} table_stats_t;

typedef struct {
    unsigned n;
    uint64_t accepted[GW_FRONT_MAX_WORKERS], busy[GW_FRONT_MAX_WORKERS];
    table_stats_t tables[2]; /* clients, rates */
    int cluster_on;
    gw_cluster_stats_t cluster;
} extra_t;

static int render(gw_server_t *s, const gw_mset_t *t, const extra_t *x, gw_bytes_t *out)
{
    int rv = 0;
    FAM("h2gate_requests_total", "counter",
        "Requests by route, its upstream and the status class of the answer (none: no "
        "response head was sent).");
    for (size_t i = 0; i < t->nroutes; i++)
        for (size_t c = 0; c < GW_MCODES; c++) {
            gw_label_t l[] = {{"route", t->routes[i].name},
                              {"upstream", t->routes[i].upstream},
                              {"code", code_names[c]}};
            SAMPLE("h2gate_requests_total", l, 3, t->routes[i].req[c]);
        }
    for (size_t c = 0; c < GW_MCODES; c++) {
        gw_label_t l[] = {{"route", ""}, {"upstream", ""}, {"code", code_names[c]}};
        SAMPLE("h2gate_requests_total", l, 3, t->unrouted[c]);
    }
    FAM("h2gate_request_duration_seconds", "histogram",
        "From a request's head to the end of its answer, by route.");
    for (size_t i = 0; i < t->nroutes; i++) {
        gw_label_t l[] = {{"route", t->routes[i].name}};
        HIST("h2gate_request_duration_seconds", l, 1, &t->routes[i].dur);
    }
    FAM("h2gate_rate_limited_total", "counter", "Requests answered 429 (routes[].request_rate).");
    for (size_t i = 0; i < t->nroutes; i++) {
        gw_label_t l[] = {{"route", t->routes[i].name}};
        SAMPLE("h2gate_rate_limited_total", l, 1, t->routes[i].rate_limited);
    }
    FAM("h2gate_upstream_connect_duration_seconds", "histogram",
        "Connecting to an origin (TLS handshake included) for a request, by upstream.");
    for (size_t i = 0; i < t->nups; i++) {
        gw_label_t l[] = {{"upstream", t->ups[i].name}};
        HIST("h2gate_upstream_connect_duration_seconds", l, 1, &t->ups[i].connect);
    }
    FAM("h2gate_upstream_response_header_duration_seconds", "histogram",
        "From the start of an origin exchange to its response head, by upstream.");
    for (size_t i = 0; i < t->nups; i++) {
        gw_label_t l[] = {{"upstream", t->ups[i].name}};
        HIST("h2gate_upstream_response_header_duration_seconds", l, 1, &t->ups[i].header);
    }
    FAM("h2gate_upstream_retries_total", "counter",
        "Requests sent again to another connection or server after a failure.");
    for (size_t i = 0; i < t->nups; i++) {
        gw_label_t l[] = {{"upstream", t->ups[i].name}};
        SAMPLE("h2gate_upstream_retries_total", l, 1, t->ups[i].retries);
    }
    FAM("h2gate_upstream_queue_length", "gauge", "Requests waiting for an origin connection.");
    for (size_t i = 0; i < t->nups; i++) {
        gw_label_t l[] = {{"upstream", t->ups[i].name}};
        SAMPLE("h2gate_upstream_queue_length", l, 1, t->ups[i].queued);
    }
    FAM("h2gate_upstream_connections", "gauge", "Origin connections now, idle or active.");
    for (size_t i = 0; i < t->nservers; i++) {
        gw_label_t l[] = {
            {"upstream", t->servers[i].up}, {"server", t->servers[i].server}, {"state", "idle"}};
        SAMPLE("h2gate_upstream_connections", l, 3, t->servers[i].idle);
        l[2].value = "active";
        SAMPLE("h2gate_upstream_connections", l, 3, t->servers[i].active);
    }
    FAM("h2gate_upstream_connections_opened_total", "counter", "Origin connections dialled.");
    for (size_t i = 0; i < t->nservers; i++) {
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        SAMPLE("h2gate_upstream_connections_opened_total", l, 2, t->servers[i].opened);
    }
    FAM("h2gate_upstream_server_failures_total", "counter",
        "Failed origin exchanges counted by passive health (and failed active checks); "
        "health.fail_threshold in a row eject the server.");
    for (size_t i = 0; i < t->nservers; i++) {
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        SAMPLE("h2gate_upstream_server_failures_total", l, 2, t->servers[i].failures);
    }
    FAM("h2gate_upstream_server_ejections_total", "counter",
        "Times an origin server was ejected (health.eject) after failures.");
    for (size_t i = 0; i < t->nservers; i++) {
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        SAMPLE("h2gate_upstream_server_ejections_total", l, 2, t->servers[i].ejections);
    }
    FAM("h2gate_upstream_server_up", "gauge",
        "1 while an origin server is healthy (passive and active checks), 0 while ejected.");
    for (size_t i = 0; i < t->nservers; i++) {
        if (t->servers[i].up_state < 0)
            continue; /* not in the current configuration */
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        SAMPLE("h2gate_upstream_server_up", l, 2, (uint64_t)t->servers[i].up_state);
    }
    FAM("h2gate_client_connections", "gauge",
        "Client connections now, by listener and protocol (pending: TLS handshake or first "
        "bytes).");
    for (size_t i = 0; i < t->nconns; i++) {
        gw_label_t l[] = {{"listener", t->conns[i].listener}, {"protocol", t->conns[i].proto}};
        SAMPLE("h2gate_client_connections", l, 2, t->conns[i].n);
    }
    FAM("h2gate_client_connections_accepted_total", "counter", "Client connections accepted.");
    for (unsigned i = 0; i < x->n; i++) {
        char id[16];
        snprintf(id, sizeof(id), "%u", i);
        gw_label_t l[] = {{"worker", id}};
        SAMPLE("h2gate_client_connections_accepted_total", l, 1, x->accepted[i]);
    }
    FAM("h2gate_client_connections_busy", "gauge",
        "Client connections holding buffers (requests or bytes in flight); an idle one gives "
        "them back.");
    for (unsigned i = 0; i < x->n; i++) {
        char id[16];
        snprintf(id, sizeof(id), "%u", i);
        gw_label_t l[] = {{"worker", id}};
        SAMPLE("h2gate_client_connections_busy", l, 1, x->busy[i]);
    }
    FAM("h2gate_rate_table_entries", "gauge",
        "Clients in the shared tables of throttle.per_client_rate (clients) and "
        "routes[].request_rate (rates).");
    FAM("h2gate_rate_table_evictions_total", "counter", "Idle clients forgotten to make room.");
    FAM("h2gate_rate_table_refused_total", "counter",
        "Clients refused because the table was full of clients still in debt.");
    for (int i = 0; i < 2; i++) {
        if (!x->tables[i].on)
            continue;
        gw_label_t l[] = {{"table", i == 0 ? "clients" : "rates"}};
        SAMPLE("h2gate_rate_table_entries", l, 1, x->tables[i].size);
        SAMPLE("h2gate_rate_table_evictions_total", l, 1, x->tables[i].evictions);
        SAMPLE("h2gate_rate_table_refused_total", l, 1, x->tables[i].refused);
    }
    FAM("h2gate_client_streams", "gauge", "Requests under way (HTTP/2 streams and HTTP/1.1).");
    SAMPLE("h2gate_client_streams", NULL, 0, t->streams);
    FAM("h2gate_early_hints_total", "counter",
        "103 Early Hints sent, by where their links came from (configured, learned: the "
        "gateway's; origin: relayed), and origin 103s dropped because one went out already.");
    {
        const char *src[] = {"configured", "learned", "origin", "origin_dropped"};
        uint64_t v[] = {t->hint.sent_configured, t->hint.sent_learned, t->hint.sent_origin,
                        t->hint.dropped_origin};
        for (size_t i = 0; i < 4; i++) {
            gw_label_t l[] = {{"source", src[i]}};
            SAMPLE("h2gate_early_hints_total", l, 1, v[i]);
        }
    }
    FAM("h2gate_early_hints_page_events_total", "counter",
        "Pages whose preload links were learned, evicted by the LRU, or expired (learn_ttl).");
    {
        const char *ev[] = {"learned", "evicted", "expired"};
        uint64_t v[] = {t->hint.learned, t->hint.evicted, t->hint.expired};
        for (size_t i = 0; i < 3; i++) {
            gw_label_t l[] = {{"event", ev[i]}};
            SAMPLE("h2gate_early_hints_page_events_total", l, 1, v[i]);
        }
    }
    FAM("h2gate_early_hints_pages", "gauge", "Pages with learned links kept now.");
    SAMPLE("h2gate_early_hints_pages", NULL, 0, t->hint.entries);
    FAM("h2gate_push_total", "counter",
        "HTTP/2 server push (routes' push: true): links promised, promises the client reset "
        "(cancelled), and links not promised because the client disabled push (refused_client), "
        "a limit (h2.max_pushes, the client's MAX_CONCURRENT_STREAMS: refused_limit), the path "
        "was promised on the connection before (duplicate), or a GOAWAY (refused_closed).");
    {
        const char *res[] = {"promised",      "cancelled", "refused_client",
                             "refused_limit", "duplicate", "refused_closed"};
        uint64_t v[] = {t->hint.push_promised, t->push_cancelled,      t->hint.push_client,
                        t->hint.push_limit,    t->hint.push_duplicate, t->hint.push_closed};
        for (size_t i = 0; i < 6; i++) {
            gw_label_t l[] = {{"result", res[i]}};
            SAMPLE("h2gate_push_total", l, 1, v[i]);
        }
    }
    FAM("h2gate_websocket_tunnels", "gauge",
        "WebSocket tunnels open (HTTP/1.1 Upgrade and RFC 8441 streams).");
    SAMPLE("h2gate_websocket_tunnels", NULL, 0, t->tunnels);
    FAM("h2gate_bytes_total", "counter",
        "Bytes on the client sockets (TLS records included) and the origin sockets.");
    {
        const char *dir[] = {"client_in", "client_out", "origin_in", "origin_out"};
        uint64_t v[] = {t->client_in, t->client_out, t->origin_in, t->origin_out};
        for (size_t i = 0; i < 4; i++) {
            gw_label_t l[] = {{"direction", dir[i]}};
            SAMPLE("h2gate_bytes_total", l, 1, v[i]);
        }
    }
    FAM("h2gate_coalesced_total", "counter", "Requests served by another request's exchange.");
    SAMPLE("h2gate_coalesced_total", NULL, 0, t->coalesced);
    FAM("h2gate_compression_bytes_total", "counter",
        "Bytes into the compressors (direction=in) and out of them (out), by content coding.");
    for (size_t c = GW_ZC_GZIP; c < GW_ZC_N; c++) {
        gw_label_t l[] = {{"coding", gw_proxy_coding_name((gw_zcoding_t)c)}, {"direction", "in"}};
        SAMPLE("h2gate_compression_bytes_total", l, 2, t->z.in[c]);
        l[1].value = "out";
        SAMPLE("h2gate_compression_bytes_total", l, 2, t->z.out[c]);
    }
    FAM("h2gate_compressed_responses_total", "counter", "Responses compressed, by coding.");
    for (size_t c = GW_ZC_GZIP; c < GW_ZC_N; c++) {
        gw_label_t l[] = {{"coding", gw_proxy_coding_name((gw_zcoding_t)c)}};
        SAMPLE("h2gate_compressed_responses_total", l, 1, t->z.streams[c]);
    }
    FAM("h2gate_compression_skipped_total", "counter",
        "Responses of compressing routes sent as they came, by cause.");
    for (size_t k = GW_ZSKIP_STATUS; k < GW_ZSKIP_N; k++) {
        gw_label_t l[] = {{"cause", gw_proxy_zskip_name((gw_zskip_t)k)}};
        SAMPLE("h2gate_compression_skipped_total", l, 1, t->z.skipped[k]);
    }
    FAM("h2gate_compression_shared_total", "counter",
        "Coalesced requests served compressed bytes made for another request.");
    SAMPLE("h2gate_compression_shared_total", NULL, 0, t->z.shared);
    FAM("h2gate_compressors", "gauge", "Compressors running (compression.max_concurrent).");
    SAMPLE("h2gate_compressors", NULL, 0, t->z.active);
    FAM("h2gate_compressor_memory_bytes", "gauge", "Memory the running compressors hold.");
    SAMPLE("h2gate_compressor_memory_bytes", NULL, 0, t->z.mem);
    FAM("h2gate_throttled_bytes_total", "counter",
        "Response bytes sent under a bandwidth limit (throttle, routes[].response_rate).");
    SAMPLE("h2gate_throttled_bytes_total", NULL, 0, t->throttled_bytes);
    FAM("h2gate_h2_protocol_errors_total", "counter",
        "HTTP/2 abuse limits hit and malformed requests, by kind (counted when the connection "
        "closes).");
    for (size_t i = 0; i < GW_MH2_KINDS; i++) {
        gw_label_t l[] = {{"kind", h2_kind_names[i]}};
        SAMPLE("h2gate_h2_protocol_errors_total", l, 1, t->h2err[i]);
    }
    FAM("h2gate_tls_handshakes_total", "counter", "TLS handshakes with clients, by result.");
    for (size_t i = 0; i < 3; i++) {
        gw_label_t l[] = {{"result", tls_result_names[i]}};
        SAMPLE("h2gate_tls_handshakes_total", l, 1, t->tls[i]);
    }
    FAM("h2gate_access_log_lost_total", "counter", "Access log lines that could not be written.");
    SAMPLE("h2gate_access_log_lost_total", NULL, 0, t->alog_lost);
    FAM("h2gate_config_reloads_total", "counter", "Configuration reloads (SIGHUP), by result.");
    {
        gw_label_t l[] = {{"result", "ok"}};
        SAMPLE("h2gate_config_reloads_total", l, 1, atomic_load(&s->reloads_ok));
        l[0].value = "failed";
        SAMPLE("h2gate_config_reloads_total", l, 1, atomic_load(&s->reloads_failed));
    }
    if (x->cluster_on) {
        const gw_cluster_stats_t *cs = &x->cluster;
        FAM("h2gate_cluster_up", "gauge",
            "1 while the cluster's Redis answers (the last call succeeded), else 0.");
        SAMPLE("h2gate_cluster_up", NULL, 0, (uint64_t)cs->up);
        FAM("h2gate_cluster_degraded_total", "counter",
            "Times the cluster's Redis stopped answering (event=cluster_degraded).");
        SAMPLE("h2gate_cluster_degraded_total", NULL, 0, cs->degraded);
        FAM("h2gate_cluster_calls_total", "counter", "Calls to the cluster's Redis, by result.");
        {
            gw_label_t l[] = {{"result", "ok"}};
            SAMPLE("h2gate_cluster_calls_total", l, 1, cs->calls_ok);
            l[0].value = "failed";
            SAMPLE("h2gate_cluster_calls_total", l, 1, cs->calls_failed);
            l[0].value = "timeout";
            SAMPLE("h2gate_cluster_calls_total", l, 1, cs->calls_timeout);
        }
        FAM("h2gate_cluster_ticket_rotations_total", "counter",
            "New shared TLS ticket keys this instance made (under the rotation lock).");
        SAMPLE("h2gate_cluster_ticket_rotations_total", NULL, 0, cs->rotations);
        FAM("h2gate_cluster_ticket_key_updates_total", "counter",
            "Changes of the shared TLS ticket keys this instance took from Redis.");
        SAMPLE("h2gate_cluster_ticket_key_updates_total", NULL, 0, cs->key_updates);
        FAM("h2gate_cluster_rate_decisions_total", "counter",
            "Shared request-rate answers to the workers (routes[].request_rate), by verdict: "
            "allowed and limited by Redis, local when the worker's own bucket decided.");
        {
            gw_label_t l[] = {{"verdict", "allowed"}};
            SAMPLE("h2gate_cluster_rate_decisions_total", l, 1, cs->rate_allowed);
            l[0].value = "limited";
            SAMPLE("h2gate_cluster_rate_decisions_total", l, 1, cs->rate_denied);
            l[0].value = "local";
            SAMPLE("h2gate_cluster_rate_decisions_total", l, 1, cs->rate_local);
        }
        FAM("h2gate_cluster_rate_calls_total", "counter",
            "Redis script calls for shared request rates (one per client key and batch).");
        SAMPLE("h2gate_cluster_rate_calls_total", NULL, 0, cs->rate_calls);
        FAM("h2gate_cluster_lease_calls_total", "counter",
            "Redis script calls for bandwidth leases (throttle.per_client_rate across "
            "instances).");
        SAMPLE("h2gate_cluster_lease_calls_total", NULL, 0, cs->lease_calls);
        FAM("h2gate_cluster_lease_bytes_total", "counter",
            "Response bytes Redis granted this instance's clients in leases.");
        SAMPLE("h2gate_cluster_lease_bytes_total", NULL, 0, cs->lease_bytes);
        FAM("h2gate_cluster_lease_local_total", "counter",
            "Lease requests Redis did not answer in time (the local bucket decided).");
        SAMPLE("h2gate_cluster_lease_local_total", NULL, 0, cs->lease_local);
    }
    FAM("h2gate_config_generation", "gauge",
        "The configuration in use: 1 at start, +1 per reload.");
    SAMPLE("h2gate_config_generation", NULL, 0, atomic_load(&s->gen_id));
    FAM("h2gate_build_info", "gauge", "Always 1; the version is a label.");
    {
        gw_label_t l[] = {{"version", GW_VERSION}};
        SAMPLE("h2gate_build_info", l, 1, 1);
    }
    return rv;
}

int gw_server_metrics(gw_server_t *s, gw_bytes_t *out)
{
    /* the workers that run (their async handles are open), asked for a fresh copy */
    gw_worker_t *ws[GW_FRONT_MAX_WORKERS];
    unsigned n = 0;
    extra_t *x = gw_calloc(1, sizeof(*x));
    if (!x)
        return GW_E_NOMEM;
    uv_mutex_lock(&s->snap_mu);
    uint64_t ticket = ++s->snap_ticket;
    uv_mutex_unlock(&s->snap_mu);
    uv_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->workers_len && n < GW_FRONT_MAX_WORKERS; i++) {
        gw_worker_t *w = s->workers[i];
        if (!w || !w->snap_ok)
            continue;
        ws[n++] = w;
        if (w->wake_open)
            uv_async_send(&w->scrape);
    }
    for (unsigned i = 0; i < s->workers_len && i < GW_FRONT_MAX_WORKERS; i++) {
        gw_worker_t *w = s->workers[i];
        x->accepted[i] = w ? atomic_load(&w->accepted) : 0;
        x->busy[i] = w ? atomic_load(&w->busy) : 0;
        x->n = i + 1;
    }
    gw_shared_table_t *tabs[2] = {s->gen->clients, s->gen->rates};
    for (int i = 0; i < 2; i++)
        if (tabs[i]) {
            x->tables[i].on = 1;
            x->tables[i].size = gw_bucket_table_size(tabs[i]->t);
            x->tables[i].evictions = gw_bucket_table_evictions(tabs[i]->t);
            x->tables[i].refused = gw_bucket_table_refused(tabs[i]->t);
        }
    if (s->cluster) {
        x->cluster_on = 1;
        x->cluster = gw_cluster_stats(s->cluster);
    }
    uv_mutex_unlock(&s->lock);
    uint64_t deadline = uv_hrtime() + (uint64_t)SCRAPE_WAIT_MS * 1000000u;
    uv_mutex_lock(&s->snap_mu);
    for (;;) {
        int waiting = 0;
        for (unsigned i = 0; i < n; i++)
            waiting |= ws[i]->snap_done < ticket;
        uint64_t now = uv_hrtime();
        if (!waiting || now >= deadline)
            break;
        (void)uv_cond_timedwait(&s->snap_cond, &s->snap_mu, deadline - now);
    }
    uv_mutex_unlock(&s->snap_mu);
    gw_mset_t t;
    memset(&t, 0, sizeof(t));
    for (unsigned i = 0; i < n; i++) {
        uv_mutex_lock(&ws[i]->snap_lock);
        merge(&t, &ws[i]->snap);
        uv_mutex_unlock(&ws[i]->snap_lock);
    }
    int rv = render(s, &t, x, out);
    gw_front__mset_free(&t);
    gw_free(x);
    return rv;
}
