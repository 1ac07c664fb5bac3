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
 * a stuck worker's last copy is used), and sums them by name over a set seeded with every
 * series the current configuration names, at 0 (issue 37). The families are one table
 * (fams[]: each name, type and help written once, and where its numbers are); the standard
 * process_* series are read from /proc as the Prometheus client libraries read them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "gw_version.h"
#include "h2/session.h"

#define SCRAPE_WAIT_MS 1000

static const char *const code_names[GW_MCODES] = {"1xx", "2xx", "3xx", "4xx", "5xx", "none"};

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
        long i = conn_entry(dst, c->l->cfg->addr.text, proto);
        if (i < 0)
            return GW_E_NOMEM;
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
    t->h2_max_requests += s->h2_max_requests;
    t->h2_priority_evictions += s->h2_priority_evictions;
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
        long k = conn_entry(t, s->conns[i].listener, s->conns[i].proto);
        if (k >= 0)
            t->conns[k].n += s->conns[i].n;
    }
}

/* Every series the configuration names, at 0 before any worker's numbers are added: a series
 * that appeared only once non-zero would make rate() and absent() alerts wrong from the start.
 * Under s->lock (the current generation). */
static void seed(gw_mset_t *t, const gw_config_t *cfg)
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

/* The process, as the Prometheus client libraries read it from /proc (client_golang's and
 * client_python's process collectors): the standard process_* series. */
typedef struct {
    int ok;
    uint64_t cpu_us;   /* user + system time */
    uint64_t start_us; /* since the epoch */
    uint64_t rss, vsize, open_fds, max_fds;
} proc_stats_t;

static void read_proc(proc_stats_t *p)
{
    memset(p, 0, sizeof(*p));
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    /* proc(5): the command name is in parentheses and may hold spaces: count from the last
     * ')'; fields 3.. follow: utime 14, stime 15, starttime 22, vsize 23, rss 24 */
    const char *q = strrchr(buf, ')');
    if (!q)
        return;
    uint64_t v[25] = {0};
    int field = 2;
    for (q++; *q && field < 24;) {
        while (*q == ' ')
            q++;
        if (!*q)
            break;
        char *end;
        field++;
        v[field] = strtoull(q, &end, 10);
        while (*end && *end != ' ')
            end++; /* the state letter, or a negative number */
        q = end;
    }
    uint64_t btime = 0;
    if ((f = fopen("/proc/stat", "r"))) {
        char line[256];
        while (fgets(line, sizeof(line), f))
            if (!strncmp(line, "btime ", 6)) {
                btime = strtoull(line + 6, NULL, 10);
                break;
            }
        fclose(f);
    }
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (field < 24 || tck <= 0 || page <= 0 || !btime)
        return;
    p->cpu_us = (v[14] + v[15]) * 1000000u / (uint64_t)tck;
    p->start_us = btime * 1000000u + v[22] * 1000000u / (uint64_t)tck;
    p->vsize = v[23];
    p->rss = v[24] * (uint64_t)page;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            p->open_fds += e->d_name[0] != '.';
        closedir(d);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p->max_fds = (uint64_t)rl.rlim_cur;
    p->ok = 1;
}

typedef struct {
    uint64_t size, evictions, refused;
    int on;
} table_stats_t;

/* Everything a scrape shows: the workers' sets summed, and what the admin thread reads. */
typedef struct {
    gw_mset_t t;
    unsigned nworkers;
    uint64_t accepted[GW_FRONT_MAX_WORKERS], busy[GW_FRONT_MAX_WORKERS];
    table_stats_t tables[2]; /* clients, rates */
    int cluster_on;
    gw_cluster_stats_t cluster;
    uint64_t cluster_up;
    uint64_t reloads_ok, reloads_failed, gen_id;
    proc_stats_t proc;
} scrape_t;

/* ---- the families: each one's name, type and help written once ------------------------------ */

/* What a family's samples are taken over: each entity gives its labels and the base its
 * numbers are found from. */
typedef enum {
    OVER_ONE = 0, /* the scrape itself, no label */
    OVER_ROUTES,  /* {route}: t.routes[i] */
    OVER_UPS,     /* {upstream}: t.ups[i] */
    OVER_SERVERS, /* {upstream, server}: t.servers[i] */
    OVER_WORKERS, /* {worker}: arrays of uint64_t indexed by worker */
    OVER_TABLES,  /* {table}: the shared rate tables that are on, tables[i] */
    OVER_CODINGS, /* {coding}: arrays of uint64_t indexed by content coding */
    OVER_CAUSES,  /* {cause}: arrays of uint64_t indexed by compression skip cause */
    OVER_CUSTOM,  /* fam->write */
} over_t;

/* When a family is shown at all. */
typedef enum {
    NEED_NONE = 0,
    NEED_TABLES,  /* a shared rate table is configured */
    NEED_CLUSTER, /* a cluster section is configured */
    NEED_PROC,    /* /proc could be read */
} need_t;

/* One value of a family's second label, and where its number is (from the entity's base). */
typedef struct {
    const char *value;
    size_t off;
} point_t;

typedef struct fam fam_t;
struct fam {
    const char *name, *type, *help;
    over_t over;
    size_t off;            /* the number (uint64_t, or gw_hist_t for a histogram), from the base */
    const char *label;     /* with points: the label that tells them apart */
    const point_t *points; /* NULL: one sample per entity, at off */
    size_t npoints;
    need_t need;
    int us; /* the number is microseconds, shown as seconds */
    int (*write)(const fam_t *f, const scrape_t *sc, gw_bytes_t *out); /* OVER_CUSTOM */
};

#define AT(m) offsetof(scrape_t, m)
#define POINTS(p) .points = (p), .npoints = sizeof(p) / sizeof((p)[0])

static const point_t h2_kinds[] = {
    {"rapid_reset", AT(t.h2err[GW_MH2_RAPID_RESET])},
    {"control_flood", AT(t.h2err[GW_MH2_CONTROL_FLOOD])},
    {"empty_frames", AT(t.h2err[GW_MH2_EMPTY_FRAMES])},
    {"queued_control", AT(t.h2err[GW_MH2_QUEUED_CONTROL])},
    {"header_list", AT(t.h2err[GW_MH2_HEADER_LIST])},
    {"header_block", AT(t.h2err[GW_MH2_HEADER_BLOCK])},
    {"settings_timeout", AT(t.h2err[GW_MH2_SETTINGS_TIMEOUT])},
    {"malformed_request", AT(t.h2err[GW_MH2_MALFORMED_REQUEST])},
    {"refused_stream", AT(t.h2err[GW_MH2_REFUSED_STREAM])},
};
static const point_t tls_results[] = {
    {"full", AT(t.tls[0])}, {"resumed", AT(t.tls[1])}, {"failed", AT(t.tls[2])}};
static const point_t conn_states[] = {{"idle", offsetof(gw_mserver_t, idle)},
                                      {"active", offsetof(gw_mserver_t, active)}};
static const point_t hint_sources[] = {{"configured", AT(t.hint.sent_configured)},
                                       {"learned", AT(t.hint.sent_learned)},
                                       {"origin", AT(t.hint.sent_origin)},
                                       {"origin_dropped", AT(t.hint.dropped_origin)}};
static const point_t hint_events[] = {{"learned", AT(t.hint.learned)},
                                      {"evicted", AT(t.hint.evicted)},
                                      {"expired", AT(t.hint.expired)}};
static const point_t push_results[] = {
    {"promised", AT(t.hint.push_promised)},     {"cancelled", AT(t.push_cancelled)},
    {"refused_client", AT(t.hint.push_client)}, {"refused_limit", AT(t.hint.push_limit)},
    {"duplicate", AT(t.hint.push_duplicate)},   {"refused_closed", AT(t.hint.push_closed)}};
static const point_t client_dirs[] = {{"in", AT(t.client_in)}, {"out", AT(t.client_out)}};
static const point_t origin_dirs[] = {{"in", AT(t.origin_in)}, {"out", AT(t.origin_out)}};
static const point_t zdirs[] = {{"in", AT(t.z.in)}, {"out", AT(t.z.out)}};
static const point_t reload_results[] = {{"ok", AT(reloads_ok)}, {"failed", AT(reloads_failed)}};
static const point_t cluster_calls[] = {{"ok", AT(cluster.calls_ok)},
                                        {"failed", AT(cluster.calls_failed)},
                                        {"timeout", AT(cluster.calls_timeout)}};
static const point_t cluster_bad_replies[] = {{"too_large", AT(cluster.replies_oversized)},
                                              {"out_of_range", AT(cluster.replies_bad)}};
static const point_t cluster_verdicts[] = {{"allowed", AT(cluster.rate_allowed)},
                                           {"limited", AT(cluster.rate_denied)},
                                           {"local", AT(cluster.rate_local)}};

static int write_requests(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nroutes && rv == 0; i++)
        for (size_t c = 0; c < GW_MCODES && rv == 0; c++) {
            gw_label_t l[] = {{"route", t->routes[i].name},
                              {"upstream", t->routes[i].upstream},
                              {"code", code_names[c]}};
            rv = gw_prom_sample(out, f->name, l, 3, t->routes[i].req[c]);
        }
    /* requests that matched no route */
    for (size_t c = 0; c < GW_MCODES && rv == 0; c++) {
        gw_label_t l[] = {{"route", ""}, {"upstream", ""}, {"code", code_names[c]}};
        rv = gw_prom_sample(out, f->name, l, 3, t->unrouted[c]);
    }
    return rv;
}

static int write_server_up(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nservers && rv == 0; i++) {
        if (t->servers[i].up_state < 0)
            continue; /* not in the current configuration */
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        rv = gw_prom_sample(out, f->name, l, 2, (uint64_t)t->servers[i].up_state);
    }
    return rv;
}

static int write_client_conns(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nconns && rv == 0; i++) {
        gw_label_t l[] = {{"listener", t->conns[i].listener}, {"protocol", t->conns[i].proto}};
        rv = gw_prom_sample(out, f->name, l, 2, t->conns[i].n);
    }
    return rv;
}

static int write_build_info(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    (void)sc;
    gw_label_t l[] = {{"version", GW_VERSION}};
    return gw_prom_sample(out, f->name, l, 1, 1);
}

static const fam_t fams[] = {
    {"h2gate_requests_total", "counter",
     "Requests by route, its upstream and the status class of the answer (none: no response "
     "head was sent).",
     .over = OVER_CUSTOM, .write = write_requests},
    {"h2gate_request_duration_seconds", "histogram",
     "From a request's head to the end of its answer, by route.", .over = OVER_ROUTES,
     .off = offsetof(gw_mroute_t, dur)},
    {"h2gate_rate_limited_total", "counter", "Requests answered 429 (routes[].request_rate).",
     .over = OVER_ROUTES, .off = offsetof(gw_mroute_t, rate_limited)},
    {"h2gate_upstream_connect_duration_seconds", "histogram",
     "Connecting to an origin (TLS handshake included) for a request, by upstream.",
     .over = OVER_UPS, .off = offsetof(gw_mup_t, connect)},
    {"h2gate_upstream_response_header_duration_seconds", "histogram",
     "From the start of an origin exchange to its response head, by upstream.", .over = OVER_UPS,
     .off = offsetof(gw_mup_t, header)},
    {"h2gate_upstream_retries_total", "counter",
     "Requests sent again to another connection or server after a failure.", .over = OVER_UPS,
     .off = offsetof(gw_mup_t, retries)},
    {"h2gate_upstream_queue_length", "gauge", "Requests waiting for an origin connection.",
     .over = OVER_UPS, .off = offsetof(gw_mup_t, queued)},
    {"h2gate_upstream_connections", "gauge", "Origin connections now, idle or active.",
     .over = OVER_SERVERS, .label = "state", POINTS(conn_states)},
    {"h2gate_upstream_connections_opened_total", "counter", "Origin connections dialled.",
     .over = OVER_SERVERS, .off = offsetof(gw_mserver_t, opened)},
    {"h2gate_upstream_server_failures_total", "counter",
     "Failed origin exchanges counted by passive health (and failed active checks); "
     "health.fail_threshold in a row eject the server.",
     .over = OVER_SERVERS, .off = offsetof(gw_mserver_t, failures)},
    {"h2gate_upstream_server_ejections_total", "counter",
     "Times an origin server was ejected (health.eject) after failures.", .over = OVER_SERVERS,
     .off = offsetof(gw_mserver_t, ejections)},
    {"h2gate_upstream_server_up", "gauge",
     "1 while an origin server is healthy (passive and active checks), 0 while ejected.",
     .over = OVER_CUSTOM, .write = write_server_up},
    {"h2gate_client_connections", "gauge",
     "Client connections now, by listener and protocol (pending: TLS handshake or first "
     "bytes).",
     .over = OVER_CUSTOM, .write = write_client_conns},
    {"h2gate_client_connections_accepted_total", "counter", "Client connections accepted.",
     .over = OVER_WORKERS, .off = AT(accepted)},
    {"h2gate_client_connections_busy", "gauge",
     "Client connections holding buffers (requests or bytes in flight); an idle one gives "
     "them back.",
     .over = OVER_WORKERS, .off = AT(busy)},
    {"h2gate_rate_table_entries", "gauge",
     "Clients in the shared tables of throttle.per_client_rate (clients) and "
     "routes[].request_rate (rates).",
     .over = OVER_TABLES, .off = offsetof(table_stats_t, size), .need = NEED_TABLES},
    {"h2gate_rate_table_evictions_total", "counter", "Idle clients forgotten to make room.",
     .over = OVER_TABLES, .off = offsetof(table_stats_t, evictions), .need = NEED_TABLES},
    {"h2gate_rate_table_refused_total", "counter",
     "Clients refused because the table was full of clients still in debt.", .over = OVER_TABLES,
     .off = offsetof(table_stats_t, refused), .need = NEED_TABLES},
    {"h2gate_client_streams", "gauge", "Requests under way (HTTP/2 streams and HTTP/1.1).",
     .off = AT(t.streams)},
    {"h2gate_early_hints_total", "counter",
     "103 Early Hints sent, by where their links came from (configured, learned: the "
     "gateway's; origin: relayed), and origin 103s dropped because one went out already.",
     .label = "source", POINTS(hint_sources)},
    {"h2gate_early_hints_page_events_total", "counter",
     "Pages whose preload links were learned, evicted by the LRU, or expired (learn_ttl).",
     .label = "event", POINTS(hint_events)},
    {"h2gate_early_hints_pages", "gauge", "Pages with learned links kept now.",
     .off = AT(t.hint.entries)},
    {"h2gate_push_total", "counter",
     "HTTP/2 server push (routes' push: true): links promised, promises the client reset "
     "(cancelled), and links not promised because the client disabled push (refused_client), "
     "a limit (h2.max_pushes, the client's MAX_CONCURRENT_STREAMS: refused_limit), the path "
     "was promised on the connection before (duplicate), or a GOAWAY (refused_closed).",
     .label = "result", POINTS(push_results)},
    {"h2gate_websocket_tunnels", "gauge",
     "WebSocket tunnels open (HTTP/1.1 Upgrade and RFC 8441 streams).", .off = AT(t.tunnels)},
    {"h2gate_client_bytes_total", "counter",
     "Bytes read from (in) and written to (out) the client sockets, TLS records included.",
     .label = "direction", POINTS(client_dirs)},
    {"h2gate_origin_bytes_total", "counter",
     "Bytes read from (in) and written to (out) the origin sockets, TLS records included.",
     .label = "direction", POINTS(origin_dirs)},
    {"h2gate_coalesced_total", "counter", "Requests served by another request's exchange.",
     .off = AT(t.coalesced)},
    {"h2gate_compression_bytes_total", "counter",
     "Bytes into the compressors (direction=in) and out of them (out), by content coding.",
     .over = OVER_CODINGS, .label = "direction", POINTS(zdirs)},
    {"h2gate_compressed_responses_total", "counter", "Responses compressed, by coding.",
     .over = OVER_CODINGS, .off = AT(t.z.streams)},
    {"h2gate_compression_skipped_total", "counter",
     "Responses of compressing routes sent as they came, by cause.", .over = OVER_CAUSES,
     .off = AT(t.z.skipped)},
    {"h2gate_compression_shared_total", "counter",
     "Coalesced requests served compressed bytes made for another request.", .off = AT(t.z.shared)},
    {"h2gate_compressors", "gauge", "Compressors running (compression.max_concurrent).",
     .off = AT(t.z.active)},
    {"h2gate_compressor_memory_bytes", "gauge", "Memory the running compressors hold.",
     .off = AT(t.z.mem)},
    {"h2gate_throttled_bytes_total", "counter",
     "Response bytes sent under a bandwidth limit (throttle, routes[].response_rate).",
     .off = AT(t.throttled_bytes)},
    {"h2gate_h2_protocol_errors_total", "counter",
     "HTTP/2 abuse limits hit and malformed requests, by kind (counted when the connection "
     "closes).",
     .label = "kind", POINTS(h2_kinds)},
    {"h2gate_h2_max_requests_total", "counter",
     "HTTP/2 connections that served h2.max_requests_per_connection requests and were retired "
     "with a graceful GOAWAY (not an error; counted when the connection closes).",
     .off = AT(t.h2_max_requests)},
    {"h2gate_h2_priority_evictions_total", "counter",
     "RFC 7540 priority tree placeholders evicted to stay within h2.max_priority_nodes (not "
     "an error; counted when the connection closes).",
     .off = AT(t.h2_priority_evictions)},
    {"h2gate_tls_handshakes_total", "counter", "TLS handshakes with clients, by result.",
     .label = "result", POINTS(tls_results)},
    {"h2gate_access_log_lost_total", "counter", "Access log lines that could not be written.",
     .off = AT(t.alog_lost)},
    {"h2gate_config_reloads_total", "counter", "Configuration reloads (SIGHUP), by result.",
     .label = "result", POINTS(reload_results)},
    {"h2gate_cluster_up", "gauge",
     "1 while the cluster's Redis answers (the last call succeeded), else 0.",
     .off = AT(cluster_up), .need = NEED_CLUSTER},
    {"h2gate_cluster_degraded_total", "counter",
     "Times the cluster's Redis stopped answering (event=cluster_degraded).",
     .off = AT(cluster.degraded), .need = NEED_CLUSTER},
    {"h2gate_cluster_calls_total", "counter", "Calls to the cluster's Redis, by result.",
     .label = "result", POINTS(cluster_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_ticket_rotations_total", "counter",
     "New shared TLS ticket keys this instance made (under the rotation lock).",
     .off = AT(cluster.rotations), .need = NEED_CLUSTER},
    {"h2gate_cluster_ticket_key_updates_total", "counter",
     "Changes of the shared TLS ticket keys this instance took from Redis.",
     .off = AT(cluster.key_updates), .need = NEED_CLUSTER},
    {"h2gate_cluster_rate_decisions_total", "counter",
     "Shared request-rate answers to the workers (routes[].request_rate), by verdict: allowed "
     "and limited by Redis, local when the worker's own bucket decided.",
     .label = "verdict", POINTS(cluster_verdicts), .need = NEED_CLUSTER},
    {"h2gate_cluster_rate_calls_total", "counter",
     "Redis script calls for shared request rates (one per client key and batch).",
     .off = AT(cluster.rate_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_calls_total", "counter",
     "Redis script calls for bandwidth leases (throttle.per_client_rate across instances).",
     .off = AT(cluster.lease_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_bytes_total", "counter",
     "Response bytes Redis granted this instance's clients in leases.",
     .off = AT(cluster.lease_bytes), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_local_total", "counter",
     "Lease requests Redis did not answer in time (the local bucket decided).",
     .off = AT(cluster.lease_local), .need = NEED_CLUSTER},
    {"h2gate_cluster_bad_replies_total", "counter",
     "Redis replies refused: too_large (past cluster.max_reply, the connection dropped), "
     "out_of_range (a number no script returns; decided locally).",
     .label = "reason", POINTS(cluster_bad_replies), .need = NEED_CLUSTER},
    {"h2gate_config_generation", "gauge", "The configuration in use: 1 at start, +1 per reload.",
     .off = AT(gen_id)},
    {"h2gate_build_info", "gauge", "Always 1; the version is a label.", .over = OVER_CUSTOM,
     .write = write_build_info},
    /* the standard process series, named and explained as the Prometheus client libraries do */
    {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
     .off = AT(proc.cpu_us), .us = 1, .need = NEED_PROC},
    {"process_open_fds", "gauge", "Number of open file descriptors.", .off = AT(proc.open_fds),
     .need = NEED_PROC},
    {"process_max_fds", "gauge", "Maximum number of open file descriptors.",
     .off = AT(proc.max_fds), .need = NEED_PROC},
    {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
     .off = AT(proc.vsize), .need = NEED_PROC},
    {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
     .off = AT(proc.rss), .need = NEED_PROC},
    {"process_start_time_seconds", "gauge",
     "Start time of the process since unix epoch in seconds.", .off = AT(proc.start_us), .us = 1,
     .need = NEED_PROC},
};

/* One sample (or a histogram's) of f: the number at base + off, labels l[0..n). */
static int write_value(const fam_t *f, const void *base, size_t off, const gw_label_t *l, size_t n,
                       gw_bytes_t *out)
{
    const char *p = (const char *)base + off;
    if (!strcmp(f->type, "histogram"))
        return gw_prom_hist(out, f->name, l, n, (const gw_hist_t *)(const void *)p);
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return f->us ? gw_prom_sample_us(out, f->name, l, n, v) : gw_prom_sample(out, f->name, l, n, v);
}

/* The samples of one entity: one, or one per point (l has room for the point's label). */
static int write_entity(const fam_t *f, const void *base, gw_label_t *l, size_t n, gw_bytes_t *out)
{
    if (!f->points)
        return write_value(f, base, f->off, l, n, out);
    int rv = 0;
    for (size_t i = 0; i < f->npoints && rv == 0; i++) {
        l[n] = (gw_label_t){f->label, f->points[i].value};
        rv = write_value(f, base, f->points[i].off, l, n + 1, out);
    }
    return rv;
}

static int write_family(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    const gw_mset_t *t = &sc->t;
    const char *const table_names[2] = {"clients", "rates"};
    gw_label_t l[3];
    char id[16];
    int rv = gw_prom_family(out, f->name, f->type, f->help);
    switch (f->over) {
    case OVER_ONE:
        if (rv == 0)
            rv = write_entity(f, sc, l, 0, out);
        break;
    case OVER_ROUTES:
        for (size_t i = 0; i < t->nroutes && rv == 0; i++) {
            l[0] = (gw_label_t){"route", t->routes[i].name};
            rv = write_entity(f, &t->routes[i], l, 1, out);
        }
        break;
    case OVER_UPS:
        for (size_t i = 0; i < t->nups && rv == 0; i++) {
            l[0] = (gw_label_t){"upstream", t->ups[i].name};
            rv = write_entity(f, &t->ups[i], l, 1, out);
        }
        break;
    case OVER_SERVERS:
        for (size_t i = 0; i < t->nservers && rv == 0; i++) {
            l[0] = (gw_label_t){"upstream", t->servers[i].up};
            l[1] = (gw_label_t){"server", t->servers[i].server};
            rv = write_entity(f, &t->servers[i], l, 2, out);
        }
        break;
    case OVER_WORKERS:
        for (unsigned i = 0; i < sc->nworkers && rv == 0; i++) {
            snprintf(id, sizeof(id), "%u", i);
            l[0] = (gw_label_t){"worker", id};
            rv = write_entity(f, (const char *)sc + i * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_TABLES:
        for (size_t i = 0; i < 2 && rv == 0; i++) {
            if (!sc->tables[i].on)
                continue;
            l[0] = (gw_label_t){"table", table_names[i]};
            rv = write_entity(f, &sc->tables[i], l, 1, out);
        }
        break;
    case OVER_CODINGS:
        for (size_t c = GW_ZC_GZIP; c < GW_ZC_N && rv == 0; c++) {
            l[0] = (gw_label_t){"coding", gw_proxy_coding_name((gw_zcoding_t)c)};
            rv = write_entity(f, (const char *)sc + c * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_CAUSES:
        for (size_t k = GW_ZSKIP_STATUS; k < GW_ZSKIP_N && rv == 0; k++) {
            l[0] = (gw_label_t){"cause", gw_proxy_zskip_name((gw_zskip_t)k)};
            rv = write_entity(f, (const char *)sc + k * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_CUSTOM:
        if (rv == 0)
            rv = f->write(f, sc, out);
        break;
    }
    return rv;
}

static int shown(const fam_t *f, const scrape_t *sc)
{
    switch (f->need) {
    case NEED_TABLES:
        return sc->tables[0].on || sc->tables[1].on;
    case NEED_CLUSTER:
        return sc->cluster_on;
    case NEED_PROC:
        return sc->proc.ok;
    case NEED_NONE:
        break;
    }
    return 1;
}

static int render(const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]) && rv == 0; i++)
        if (shown(&fams[i], sc))
            rv = write_family(&fams[i], sc, out);
    return rv;
}

int gw_server_metrics(gw_server_t *s, gw_bytes_t *out)
{
    /* the workers that run (their async handles are open), asked for a fresh copy */
    gw_worker_t *ws[GW_FRONT_MAX_WORKERS];
    unsigned n = 0;
    scrape_t *sc = gw_calloc(1, sizeof(*sc));
    if (!sc)
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
        sc->accepted[i] = w ? atomic_load(&w->accepted) : 0;
        sc->busy[i] = w ? atomic_load(&w->busy) : 0;
        sc->nworkers = i + 1;
    }
    gw_shared_table_t *tabs[2] = {s->gen->clients, s->gen->rates};
    for (int i = 0; i < 2; i++)
        if (tabs[i]) {
            sc->tables[i].on = 1;
            sc->tables[i].size = gw_bucket_table_size(tabs[i]->t);
            sc->tables[i].evictions = gw_bucket_table_evictions(tabs[i]->t);
            sc->tables[i].refused = gw_bucket_table_refused(tabs[i]->t);
        }
    if (s->cluster) {
        sc->cluster_on = 1;
        sc->cluster = gw_cluster_stats(s->cluster);
        sc->cluster_up = sc->cluster.up ? 1 : 0;
    }
    seed(&sc->t, s->gen->cfg);
    uv_mutex_unlock(&s->lock);
    sc->reloads_ok = atomic_load(&s->reloads_ok);
    sc->reloads_failed = atomic_load(&s->reloads_failed);
    sc->gen_id = atomic_load(&s->gen_id);
    read_proc(&sc->proc);
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
    for (unsigned i = 0; i < n; i++) {
        uv_mutex_lock(&ws[i]->snap_lock);
        merge(&sc->t, &ws[i]->snap);
        uv_mutex_unlock(&ws[i]->snap_lock);
    }
    int rv = render(sc, out);
    gw_front__mset_free(&sc->t);
    gw_free(sc);
    return rv;
}
