/* server/generation.c — configuration generations: building one from a loaded
 * configuration (listeners' sockets kept by address or bound, TLS contexts, shared rate
 * tables), a worker taking the current one (its proxy and listening handles) and draining the
 * old, and the reload that swaps them (SIGHUP). See docs/ARCHITECTURE.md. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/server_internal.h"

/* One SO_REUSEPORT socket bound to a and listening with backlog: 0 and *out, or -errno. */
int gw_server__bind_reuseport(const gw_cfg_addr_t *a, int backlog, int *out)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* Each worker binds its own socket; the kernel spreads new connections over them. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
        goto fail;
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        goto fail;
    /* TCP_NODELAY before listen(): an accepted socket copies the listener's options when the
     * kernel completes its handshake, which can be before the worker opens the handle */
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        goto fail;
    if (listen(fd, backlog) < 0)
        goto fail;
    *out = fd;
    return 0;
fail:;
    int e = errno;
    close(fd);
    return -e;
}

/* SO_REUSEPORT would let our binds join the sockets of any process of the same user listening
 * on a: a second gateway started with the same file would take half the connections. A plain
 * bind without SO_REUSEPORT fails with EADDRINUSE while any socket listens there (with
 * SO_REUSEPORT or not, on a or on a wildcard address that covers it); SO_REUSEADDR keeps the
 * connections of an earlier run in TIME_WAIT from failing it. 0 or -errno. */
int gw_server__addr_probe(const gw_cfg_addr_t *a)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, rv = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        rv = -errno;
    close(fd);
    return rv;
}

/* A refused address, said once: what nginx says (bind() ... failed (98: ...)), and why. */
void gw_server__log_addr_in_use(const char *event, const char *addr, int err)
{
    GW_LOG_ERROR(event,
                 "address=%s reason=\"bind() to %s failed (%d: %s): another process listens "
                 "there\"",
                 addr, addr, err, strerror(err));
}

/* ALPN we offer, in the listener's server preference (RFC 7301 §3.2). */
static size_t alpn_for(const gw_cfg_listen_t *l, unsigned char *out)
{
    size_t n = 0;
    int h2 = (l->protocols & GW_PROTO_F_H2) != 0, h1 = (l->protocols & GW_PROTO_F_HTTP1) != 0;
    int h2_first = l->tls->prefer_h2;
    for (int pass = 0; pass < 2; pass++) {
        int want_h2 = (pass == 0) == h2_first;
        if (want_h2 && h2) {
            memcpy(out + n, "\x02h2", 3);
            n += 3;
        } else if (!want_h2 && h1) {
            memcpy(out + n, "\x08http/1.1", 9);
            n += 9;
        }
    }
    /* Last, so chosen only when the client offers nothing else we speak: `http/1.0` (curl
     * --http1.0 offers it alone), which an HTTP/1.1 server serves (RFC 9110 §2.5, RFC 9112
     * §2.3) instead of failing the handshake with no_application_protocol (RFC 7301 §3.2), as
     * nginx and HAProxy do. The request line then says HTTP/1.0 and is answered as such. */
    if (h1) {
        memcpy(out + n, "\x08http/1.0", 9);
        n += 9;
    }
    return n;
}

/* ---- generations ----------------------------------------------------------------------- */

static gw_shared_table_t *table_get(gw_shared_table_t *prev, size_t cap, unsigned prefix)
{
    if (prev && prev->cap == cap && prev->ipv6_prefix == prefix) {
        atomic_fetch_add(&prev->refs, 1);
        return prev; /* the balances carry over a reload */
    }
    gw_shared_table_t *t = gw_calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    if (gw_bucket_table_new(cap, prefix, &t->t) < 0) {
        gw_free(t);
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->cap = cap;
    t->ipv6_prefix = prefix;
    return t;
}

static void table_unref(gw_shared_table_t *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        gw_bucket_table_del(t->t);
        gw_free(t);
    }
}

/* The shared cache of prev when its budget is cfg's (what is stored carries over a reload;
 * cache_apply drops the entries of routes that are gone once the reload is done), else a new,
 * empty one; NULL out of memory. */
static gw_shared_cache_t *cache_get(gw_shared_cache_t *prev, const gw_cfg_cache_t *cc)
{
    if (prev && prev->memory == cc->memory && prev->max_object == cc->max_object) {
        atomic_fetch_add(&prev->refs, 1);
        return prev;
    }
    gw_shared_cache_t *t = gw_calloc(1, sizeof(*t));
    gw_cache_opts_t o = {.memory = cc->memory, .max_object = cc->max_object};
    if (!t || !(t->c = gw_cache_new(&o))) {
        gw_free(t);
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->memory = cc->memory;
    t->max_object = cc->max_object;
    return t;
}

static void cache_unref(gw_shared_cache_t *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        gw_cache_del(t->c); /* entries still sent live on until their last reference */
        gw_free(t);
    }
}

/* After a purge or a reload's walk removed entries: the heap's free pages back to the system
 * when the store says a trim is due (gw_cache_trim_due: each memory/16 bytes removed), as after
 * the workers' evictions, through the process's one trimmer (heap.c: on libuv's thread pool,
 * one at a time, logged event=cache_trim after=why), never on the admin's thread or the main
 * loop that asked. A purge of everything is followed by no put that would find it due. */
static void cache_trim(gw_server_t *s, gw_cache_t *c, unsigned why)
{
    if (gw_cache_trim_due(c))
        gw_server__heap_trim(s, why);
}

/* A reload is done (g is current, prev the generation before it): the store g keeps holds
 * only the answers of g's caching routes from now on; a store g does not keep (a new budget, or
 * no route caches any more) is emptied now, rather than when prev's last connection closes, and
 * stores nothing more: memory is given back at once, and a new store never sits beside a full
 * old one while prev drains. */
static void cache_apply(gw_server_t *s, const gw_gen_t *prev, const gw_gen_t *g)
{
    const gw_config_t *cfg = g->cfg;
    if (g->cache) {
        uint64_t *tags = gw_malloc(cfg->routes_len * sizeof(*tags));
        size_t n = 0;
        for (size_t i = 0; tags && i < cfg->routes_len; i++)
            if (cfg->routes[i].cache)
                tags[n++] = gw_cache_route_tag(gw_slice_str(cfg->routes[i].host),
                                               gw_slice_str(cfg->routes[i].path));
        ssize_t dropped = tags ? gw_cache_keep_routes(g->cache->c, tags, n) : GW_E_NOMEM;
        gw_free(tags);
        cache_trim(s, g->cache->c, GW_HEAP_TRIM_RELOAD);
        if (dropped < 0)
            GW_LOG_WARN("cache_routes",
                        "generation=%llu error=\"%s\" reason=\"the entries of "
                        "removed routes stay until evicted\"",
                        g->id, gw_strerror((int)dropped));
        else if (prev && prev->cache == g->cache)
            GW_LOG_INFO("cache_kept", "generation=%llu routes=%zu dropped=%zd", g->id, n, dropped);
    }
    if (!prev || !prev->cache || prev->cache == g->cache)
        return;
    ssize_t dropped = gw_cache_keep_routes(prev->cache->c, NULL, 0);
    cache_trim(s, prev->cache->c, GW_HEAP_TRIM_RELOAD);
    if (g->cache)
        GW_LOG_INFO("cache_rebuilt",
                    "generation=%llu memory=%zu max_object=%zu dropped=%zd reason=\"cache.memory "
                    "or cache.max_object changed: a new, empty store\"",
                    g->id, g->cache->memory, g->cache->max_object, dropped);
    else
        GW_LOG_INFO("cache_off", "generation=%llu dropped=%zd reason=\"no route has cache: true\"",
                    g->id, dropped);
}

static void gen_free(gw_gen_t *g)
{
    for (size_t i = 0; i < g->listeners_len; i++) {
        gw_tls_ctx_del(g->listeners[i].l.tls);
        if (g->stores)
            gw_tls_store_unref(g->stores[i]);
    }
    gw_free(g->stores);
    gw_free(g->listeners);
    table_unref(g->clients);
    table_unref(g->rates);
    cache_unref(g->cache);
    gw_config_del(g->cfg);
    gw_free(g);
}

void gw_server__gen_unref(gw_gen_t *g)
{
    if (g && atomic_fetch_sub(&g->refs, 1) == 1)
        gen_free(g);
}

static int same_addr(const gw_cfg_addr_t *a, const gw_cfg_addr_t *b)
{
    return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

/* Whether one of our own sockets still listens on a (an address a reload dropped, whose
 * handles the workers have not closed yet, and that the next reload lists again). */
static int own_socket(gw_server_t *s, const gw_cfg_addr_t *a)
{
    int found = 0;
    uv_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->socks_len && !found; i++)
        if (same_addr(&s->socks[i]->addr, a))
            for (unsigned k = 0; k < s->socks[i]->n && !found; k++)
                found = s->socks[i]->fds[k] >= 0 || s->socks[i]->live[k] >= 0;
    uv_mutex_unlock(&s->lock);
    return found;
}

/* A socket per worker for a listener address that the current generation does not have.
 * The new entry is appended to s->socks (under the lock: workers read it). */
static int sock_bind(gw_server_t *s, const gw_cfg_listen_t *lc, size_t *index)
{
    /* a binary upgrade: the old process's sockets, with their queued connections; all of them,
     * when it had more workers than we have (see gw_lsock_t) */
    unsigned inherited = gw_server__inherit_count(s, &lc->addr);
    unsigned n = inherited > s->workers_len ? inherited : s->workers_len;
    /* not inherited, not ours: nobody else may listen there */
    int e = inherited || own_socket(s, &lc->addr) ? 0 : gw_server__addr_probe(&lc->addr);
    if (e == -EADDRINUSE) {
        gw_server__log_addr_in_use("listen_failed", lc->addr.text, EADDRINUSE);
        return GW_E_EXIST;
    }
    gw_lsock_t *ls = gw_calloc(1, sizeof(*ls));
    int *fds = gw_malloc(n * sizeof(int));
    int *live = gw_malloc(n * sizeof(int));
    uv_mutex_lock(&s->lock);
    gw_lsock_t **socks = gw_realloc(s->socks, (s->socks_len + 1) * sizeof(*socks));
    if (socks)
        s->socks = socks;
    uv_mutex_unlock(&s->lock);
    if (!ls || !fds || !socks || !live) {
        gw_free(ls);
        gw_free(fds);
        gw_free(live);
        return GW_E_NOMEM;
    }
    ls->addr = lc->addr;
    ls->n = n;
    ls->fds = fds;
    ls->live = live;
    for (unsigned k = 0; k < n; k++)
        fds[k] = live[k] = -1;
    for (unsigned k = 0; k < n; k++) {
        if ((fds[k] = gw_server__inherit_take(s, &lc->addr)) >= 0)
            continue;
        if ((e = gw_server__bind_reuseport(&lc->addr, lc->backlog, &fds[k])) < 0) {
            GW_LOG_ERROR("listen_failed", "address=%s reason=\"%s\"", lc->addr.text, strerror(-e));
            for (unsigned j = 0; j < k; j++)
                close(fds[j]);
            gw_free(fds);
            gw_free(live);
            gw_free(ls);
            return GW_E_IO;
        }
    }
    if (inherited)
        GW_LOG_INFO("socket_inherited", "address=%s sockets=%u of=%u%s", lc->addr.text, inherited,
                    s->workers_len,
                    inherited > s->workers_len ? " kept=all reason=\"more sockets than workers: "
                                                 "closing one would reset its queue\""
                                               : "");
    uv_mutex_lock(&s->lock);
    s->socks[s->socks_len] = ls;
    *index = s->socks_len++;
    uv_mutex_unlock(&s->lock);
    return 0;
}

/* Close the sockets no worker took (start-up failed, or a refused reload). */
static void sock_close_untaken(gw_server_t *s, size_t i)
{
    uv_mutex_lock(&s->lock);
    for (unsigned k = 0; k < s->socks[i]->n; k++)
        if (s->socks[i]->fds[k] >= 0) {
            close(s->socks[i]->fds[k]);
            s->socks[i]->fds[k] = -1;
        }
    uv_mutex_unlock(&s->lock);
}

/* g's shared rate tables, those of prev kept where the settings agree: 0 or GW_E_NOMEM. */
static int gen_tables(const gw_server_t *s, gw_gen_t *g, const gw_gen_t *prev)
{
    const gw_config_t *cfg = g->cfg;
    /* per-client buckets: one per live connection at most, plus as many idle ones (a client
     * that reconnects keeps its balance until evicted) */
    if (cfg->throttle.per_client_rate) {
        size_t cap = (size_t)cfg->limits.max_connections * s->workers_len * 2;
        if (cap > (1u << 22))
            cap = 1u << 22;
        if (!(g->clients = table_get(prev ? prev->clients : NULL, cap, cfg->throttle.ipv6_prefix)))
            return GW_E_NOMEM;
        /* with a cluster, a client's bytes are leased from Redis */
        gw_bucket_table_set_leased(g->clients->t, cfg->cluster.enabled);
    }
    for (size_t i = 0; i < cfg->routes_len; i++) {
        if (cfg->routes[i].response_rate)
            g->route_rates = 1;
        /* request rates, and basic auth's failures per client (gateway/proxy/auth.c) */
        if ((cfg->routes[i].request_rate || cfg->routes[i].basic_auth) && !g->rates &&
            !(g->rates = table_get(prev ? prev->rates : NULL, GW_SERVER_RATE_TABLE,
                                   cfg->throttle.ipv6_prefix)))
            return GW_E_NOMEM;
        if (cfg->routes[i].cache && !g->cache &&
            !(g->cache = cache_get(prev ? prev->cache : NULL, &cfg->cache)))
            return GW_E_NOMEM;
    }
    return 0;
}

/* Build a generation from cfg (taken over, freed on failure): every listener's socket (kept
 * from prev when its address is there) and TLS context, and the shared tables. What is wrong
 * with a file goes to errs; the rest is logged. */
int gw_server__gen_new(gw_server_t *s, gw_config_t *cfg, const gw_gen_t *prev,
                       gw_config_errors_t *errs, gw_gen_t **out)
{
    *out = NULL;
    size_t socks_before = s->socks_len;
    /* files first (CA files, the access log), every listener's TLS context next, sockets last:
     * each file that cannot be used is reported, and nothing is bound when one is */
    int files_rv = gw_server__check_files(cfg, errs);
    int rv = 0;
    gw_gen_t *g = gw_calloc(1, sizeof(*g));
    if (!g) {
        gw_config_del(cfg);
        return GW_E_NOMEM;
    }
    atomic_init(&g->refs, 1);
    g->cfg = cfg;
    g->id = prev ? prev->id + 1 : 1;
    g->listeners = gw_calloc(cfg->listen_len ? cfg->listen_len : 1, sizeof(*g->listeners));
    g->stores = gw_calloc(cfg->listen_len ? cfg->listen_len : 1, sizeof(*g->stores));
    if (!g->listeners || !g->stores) {
        rv = GW_E_NOMEM;
        goto fail;
    }
    if ((rv = gen_tables(s, g, prev)) < 0)
        goto fail;
    for (size_t i = 0; i < cfg->listen_len; i++) {
        gw_listener_t *l = &g->listeners[i].l;
        l->cfg = &cfg->listen[i];
        g->listeners_len = i + 1;
        if (l->cfg->tls) {
            unsigned char alpn[32];
            size_t alen = alpn_for(l->cfg, alpn);
            int r = gw_tls_ctx_new(l->cfg->tls, alpn, alen, errs, &l->tls);
            if (r < 0) {
                files_rv = files_rv < 0 ? files_rv : r; /* what failed is in errs */
                continue;
            }
            gw_tls_ctx_set_keyring(l->tls, s->keyring); /* used while it holds keys */
#if GW_HAVE_ACME
            if (l->cfg->tls->acme) {
                /* the stored certificate or a self-signed stand-in until the client's */
                r = gw_acme_store_prepare(&cfg->acme, l->cfg->tls, errs, &g->stores[i]);
                if (r < 0) {
                    files_rv = files_rv < 0 ? files_rv : r;
                    continue;
                }
                gw_tls_ctx_set_store(l->tls, g->stores[i]);
            }
#endif
        }
    }
    if ((rv = files_rv) < 0)
        goto fail;
    for (size_t i = 0; i < cfg->listen_len; i++) {
        gw_gen_listener_t *gl = &g->listeners[i];
        const gw_listener_t *l = &gl->l;
        int found = 0;
        for (size_t j = 0; prev && j < prev->listeners_len && !found; j++)
            if (same_addr(&prev->listeners[j].l.cfg->addr, &l->cfg->addr)) {
                gl->sock = prev->listeners[j].sock;
                found = 1;
            }
        if (!found && (rv = sock_bind(s, l->cfg, &gl->sock)) < 0)
            goto fail;
        GW_LOG_INFO("listening", "address=%s tls=%s protocols=%s%s%s generation=%llu%s",
                    l->cfg->addr.text, l->cfg->tls ? "yes" : "no",
                    l->cfg->protocols & GW_PROTO_F_H2 ? "h2," : "",
                    l->cfg->protocols & GW_PROTO_F_H2C ? "h2c," : "",
                    l->cfg->protocols & GW_PROTO_F_HTTP1 ? "http/1.1" : "", g->id,
                    found ? " socket=kept" : "");
    }
    *out = g;
    return 0;
fail:
    for (size_t i = socks_before; i < s->socks_len; i++)
        sock_close_untaken(s, i);
    gen_free(g);
    return rv < 0 ? rv : GW_E_NOMEM;
}

/* ---- a worker's generations ---------------------------------------------------------------- */

static void wgen_part_closed(gw_wgen_t *g)
{
    if (--g->pending > 0)
        return;
    gw_front_gen_free(&g->f);
    gw_proxy_del(g->f.proxy);
    GW_LOG_DEBUG("generation_released", "worker=%u generation=%llu", g->w->f.id, g->gen->id);
    gw_server__gen_unref(g->gen);
    gw_free(g);
}

static void on_wgen_proxy_closed(gw_proxy_t *p, void *arg)
{
    (void)p;
    wgen_part_closed(arg);
}

static void on_wgen_timer_closed(uv_handle_t *h)
{
    wgen_part_closed(h->data);
}

/* The worker is done with g: its origin pools close (their exchanges ended with the
 * connections), then it is freed with its reference on the generation. */
void gw_server__wgen_retire(gw_wgen_t *g)
{
    if (g->draining) {
        gw_list_remove(&g->link);
        g->draining = 0;
    }
    g->pending = 2;
    g->drain.data = g;
    gw_front_gen_retire(&g->f); /* before the pools close: their counters carry on */
    uv_close((uv_handle_t *)&g->drain, on_wgen_timer_closed);
    gw_proxy_close_then(g->f.proxy, on_wgen_proxy_closed, g);
}

/* Past timeouts.graceful_shutdown the old generation's connections close, except those that
 * carry WebSocket tunnels: a conversation that lasts hours is not a request in flight, but an
 * old generation must not live forever either, so they get until
 * timeouts.tunnel_drain (counted from the reload). Returns 1 when some were kept. */
int gw_server__drain_tunnels_kept(gw_worker_t *w, gw_wgen_t *g, uv_timer_t *t, uv_timer_cb cb,
                                  int *phase)
{
    const gw_config_t *cfg = (g ? &g->f : w->f.cur)->cfg;
    uint64_t grace = cfg->timeouts.graceful_shutdown_ms, more = cfg->timeouts.tunnel_drain_ms;
    more = more > grace ? more - grace : 0;
    size_t kept = gw_front_stop_conns(&w->f, g ? &g->f : NULL, GW_STOP_NOW, !*phase && more);
    if (!kept)
        return 0;
    *phase = 1;
    GW_LOG_INFO("drain_tunnels", "worker=%u connections=%zu close_in_ms=%llu", w->f.id, kept,
                (unsigned long long)more);
    uv_timer_start(t, cb, more, 0);
    return 1;
}

static void on_wgen_drain_deadline(uv_timer_t *t)
{
    gw_wgen_t *g = t->data;
    gw_worker_t *w = g->w;
    GW_LOG_WARN("drain_deadline", "worker=%u generation=%llu open_connections=%zu", w->f.id,
                g->gen->id, g->f.conns);
    gw_server__drain_tunnels_kept(w, g, t, on_wgen_drain_deadline, &g->tunnel_phase);
}

static int wgen_new(gw_worker_t *w, gw_gen_t *gen, gw_wgen_t **out)
{
    gw_wgen_t *g = gw_calloc(1, sizeof(*g));
    if (!g)
        return GW_E_NOMEM;
    gw_proxy_t *p;
    int rv = gw_proxy_new(&w->f.loop, gen->cfg, &p);
    if (rv < 0) {
        gw_free(g);
        return rv;
    }
    gw_proxy_set_rate_table(p, gen->rates ? gen->rates->t : NULL);
    gw_proxy_set_cache(p, gen->cache ? gen->cache->c : NULL);
    gw_proxy_set_trim(p, gw_server__heap_trim_evicted, w->srv);
    if (gen->cfg->cluster.enabled && w->sink) { /* request rates shared across instances */
        gw_proxy_rate_asker_t a = {
            .ask = gw_server__rate_ask, .share = gw_server__rate_share, .ud = w};
        gw_proxy_set_rate_asker(p, &a);
    }
    gw_proxy_set_tunnel_count(p, &w->tunnels_open);
    gw_proxy_set_zmem_count(p, &w->zmem_charged); /* compression.max_memory */
    g->f.cfg = gen->cfg;
    g->f.proxy = p;
    g->f.clients = gen->clients ? gen->clients->t : NULL;
    g->f.route_rates = gen->route_rates;
    g->gen = gen;
    g->w = w;
    if ((rv = gw_front_gen_bind(&w->f, &g->f)) < 0) {
        gw_front_gen_free(&g->f);
        gw_proxy_close(p);
        uv_run(&w->f.loop, UV_RUN_NOWAIT);
        gw_proxy_del(p);
        gw_free(g);
        return rv;
    }
    gw_list_init(&g->link);
    uv_timer_init(&w->f.loop, &g->drain);
    g->drain.data = g;
    *out = g;
    return 0;
}

/* A listening handle of worker w on socket slot of listener l's address (the handle owns the
 * socket from here), in w->handles; NULL when out of memory. A socket that does not listen is
 * logged and *rv set to GW_E_IO: the handle stays, to be closed with the others. */
static gw_whandle_t *whandle_open(gw_worker_t *w, gw_gen_listener_t *l, unsigned slot, int *rv)
{
    gw_server_t *s = w->srv;
    gw_whandle_t *wh = gw_calloc(1, sizeof(*wh));
    if (!wh) {
        *rv = GW_E_NOMEM;
        return NULL;
    }
    uv_tcp_init(&w->f.loop, &wh->tcp);
    wh->tcp.data = &l->l;
    wh->w = w;
    wh->sock = l->sock;
    wh->slot = slot;
    gw_list_push_back(&w->handles, &wh->link);
    uv_mutex_lock(&s->lock);
    int fd = s->socks[l->sock]->fds[slot];
    s->socks[l->sock]->fds[slot] = -1; /* the handle owns it from here */
    uv_mutex_unlock(&s->lock);
    int e = fd >= 0 ? uv_tcp_open(&wh->tcp, fd) : UV_EBADF;
    if (e < 0 && fd >= 0)
        close(fd); /* not the handle's */
    if (e == 0) {
        uv_mutex_lock(&s->lock);
        s->socks[l->sock]->live[slot] = fd; /* passed on by an upgrade */
        uv_mutex_unlock(&s->lock);
    }
    /* TCP_NODELAY once on the listening socket: Linux copies it into every socket accepted
     * from it, a setsockopt per connection fewer (gw_front_on_connection). It is set before
     * listen() too (gw_server__bind_reuseport): connections the kernel took before this line
     * had it not; here for sockets inherited from an older binary at an upgrade. */
    if (e == 0)
        e = uv_tcp_nodelay(&wh->tcp, 1);
    if (e == 0)
        e = uv_listen((uv_stream_t *)&wh->tcp, l->l.cfg->backlog, gw_front_on_connection);
    if (e < 0) {
        GW_LOG_ERROR("listen_failed", "address=%s worker=%u reason=\"%s\"", l->l.cfg->addr.text,
                     w->f.id, uv_strerror(e));
        *rv = GW_E_IO;
    }
    return wh;
}

/* old was the worker's current generation until cfg's: its connections drain (it retires at
 * once without any), within the drain deadline of cfg. */
static void drain_old(gw_worker_t *w, gw_wgen_t *old, const gw_config_t *cfg)
{
    old->draining = 1;
    gw_list_push_back(&w->old, &old->link);
    if (old->f.conns == 0) {
        gw_server__wgen_retire(old);
    } else {
        uv_timer_start(&old->drain, on_wgen_drain_deadline, cfg->timeouts.graceful_shutdown_ms, 0);
        gw_front_stop_conns(&w->f, &old->f, GW_STOP_DRAIN, 0);
    }
    /* a cap on the generations draining at once: beyond it the oldest stop as on SIGTERM
     * (GOAWAY now, idle connections closed after drain_grace, requests in flight finish) */
    size_t n = 0;
    gw_list_foreach(it, &w->old) n += !GW_CONTAINER_OF(it, gw_wgen_t, link)->forced;
    gw_list_foreach(it, &w->old)
    {
        gw_wgen_t *o = GW_CONTAINER_OF(it, gw_wgen_t, link);
        if (n <= cfg->limits.draining_generations)
            break;
        if (o->forced)
            continue;
        o->forced = 1;
        n--;
        GW_LOG_WARN("drain_cap", "worker=%u generation=%llu open_connections=%zu", w->f.id,
                    o->gen->id, o->f.conns);
        gw_front_stop_conns(&w->f, &o->f, GW_STOP_GRACEFUL, 0);
    }
}

/* Take the server's current generation if it is not ours yet (worker thread): a worker-side
 * state for it, a listening handle for each of its sockets (kept when the socket was ours
 * already; closed when it no longer lists it), then the connections of the previous one are
 * told to drain. */
int gw_server__worker_take_gen(gw_worker_t *w)
{
    gw_server_t *s = w->srv;
    uv_mutex_lock(&s->lock);
    gw_gen_t *gen = s->gen;
    if (WCUR(w) && WCUR(w)->gen == gen) {
        uv_mutex_unlock(&s->lock);
        return 0;
    }
    atomic_fetch_add(&gen->refs, 1);
    uv_mutex_unlock(&s->lock);
    gw_wgen_t *ng;
    int rv = wgen_new(w, gen, &ng);
    if (rv < 0) {
        GW_LOG_ERROR("generation_failed", "worker=%u generation=%llu reason=\"%s\"", w->f.id,
                     gen->id, gw_strerror(rv));
        gw_server__gen_unref(gen);
        return rv;
    }
    gw_list_foreach(it, &w->handles) GW_CONTAINER_OF(it, gw_whandle_t, link)->seen = 0;
    for (size_t i = 0; i < gen->listeners_len; i++) {
        gw_gen_listener_t *l = &gen->listeners[i];
        uv_mutex_lock(&s->lock);
        unsigned n = s->socks[l->sock]->n;
        uv_mutex_unlock(&s->lock);
        /* this worker's sockets of the address: one, or more after an upgrade to fewer workers */
        for (unsigned slot = w->f.id; slot < n; slot += s->workers_len) {
            gw_whandle_t *wh = NULL;
            gw_list_foreach(it, &w->handles)
            {
                gw_whandle_t *h = GW_CONTAINER_OF(it, gw_whandle_t, link);
                if (h->sock == l->sock && h->slot == slot)
                    wh = h;
            }
            if (!wh && !(wh = whandle_open(w, l, slot, &rv)))
                break;
            wh->tcp.data = &l->l; /* new connections: this generation's listener */
            wh->seen = 1;
        }
    }
    /* sockets the new generation does not list close with their handles */
    gw_list_foreach_safe(it, tmp, &w->handles)
    {
        gw_whandle_t *h = GW_CONTAINER_OF(it, gw_whandle_t, link);
        if (!h->seen)
            gw_server__whandle_close(h);
    }
    gw_wgen_t *old = WCUR(w);
    w->f.cur = &ng->f;
    GW_LOG_INFO("generation", "worker=%u generation=%llu draining=%s", w->f.id, gen->id,
                old ? "yes" : "no");
    if (old)
        drain_old(w, old, gen->cfg);
    return rv;
}

/* ---- reload ----------------------------------------------------------------------------- */

/* A refused reload: every error as FILE:LINE:COL (or the file and the code when there is no
 * message), counted; errs is emptied. */
static void reload_failed(gw_server_t *s, unsigned long long gen, const char *path, int rv,
                          gw_config_errors_t *errs)
{
    atomic_fetch_add(&s->reloads_failed, 1);
    for (size_t i = 0; i < errs->len; i++)
        GW_LOG_ERROR("reload_failed", "generation=%llu error=\"%s\"", gen, errs->msgs[i]);
    if (errs->len == 0)
        GW_LOG_ERROR("reload_failed", "generation=%llu error=\"%s: %s\"", gen, path,
                     gw_strerror(rv));
    gw_config_errors_free(errs);
}

int gw_server_reload(gw_server_t *s)
{
    gw_gen_t *cur = s->gen; /* only this (main) thread replaces it */
    const char *path = cur->cfg->path;
    int embedded = !strcmp(path, "<embedded>");
    gw_config_t *cfg = NULL;
    gw_config_errors_t errs = {0};
    int rv =
        embedded ? gw_config_load_default(&cfg, &errs) : gw_config_load_file(path, &cfg, &errs);
    if (rv < 0) {
        reload_failed(s, cur->id, path, rv, &errs);
        return rv;
    }
    const gw_config_t *old = cur->cfg;
    if (cfg->admin.enabled != old->admin.enabled ||
        (cfg->admin.enabled && strcmp(cfg->admin.addr.text, old->admin.addr.text) != 0))
        GW_LOG_WARN("reload_note",
                    "admin=%s kept=%s reason=\"the admin listener changes with a "
                    "restart or a binary upgrade (SIGUSR2) only\"",
                    cfg->admin.enabled ? cfg->admin.addr.text : "off",
                    old->admin.enabled ? old->admin.addr.text : "off");
    if ((cfg->pid_file == NULL) != (old->pid_file == NULL) ||
        (cfg->pid_file && strcmp(cfg->pid_file, old->pid_file) != 0))
        GW_LOG_WARN("reload_note",
                    "pid_file=%s kept=%s reason=\"the pid file changes with a "
                    "restart or a binary upgrade (SIGUSR2) only\"",
                    cfg->pid_file ? cfg->pid_file : "none", old->pid_file ? old->pid_file : "none");
    if (cfg->workers != s->workers_len)
        GW_LOG_WARN("reload_note",
                    "workers=%u kept=%u reason=\"the number of workers changes "
                    "with a restart or a binary upgrade (SIGUSR2) only\"",
                    cfg->workers, s->workers_len);
    gw_log_level_t level = (gw_log_level_t)cfg->log_level;
    gw_gen_t *g;
    /* the access log, the CA files and the certificates are checked there before anything
     * changes; a new access log file is opened below */
    if ((rv = gw_server__gen_new(s, cfg, cur, &errs, &g)) < 0) {
        reload_failed(s, cur->id, path, rv, &errs);
        return rv;
    }
    gw_config_errors_free(&errs);
    uv_mutex_lock(&s->lock);
    s->gen = g;
    atomic_store(&s->gen_id, g->id);
    for (unsigned i = 0; i < s->workers_len; i++)
        if (s->workers[i] && s->workers[i]->wake_open)
            uv_async_send(&s->workers[i]->wake);
    uv_mutex_unlock(&s->lock);
    cache_apply(s, cur, g);
    (void)gw_front_alog_switch(&s->alog, g->cfg->access_log.path, 0);
    gw_server__cluster_apply(s);
#if GW_HAVE_ACME
    if (s->acme)
        gw_acme_apply(s->acme, g->cfg, g->stores);
#endif
    gw_server__gen_unref(cur);
    gw_log_set_level(level);
    atomic_fetch_add(&s->reloads_ok, 1);
    GW_LOG_INFO("reloaded", "generation=%llu config=%s listeners=%zu routes=%zu upstreams=%zu",
                g->id, g->cfg->path, g->listeners_len, g->cfg->routes_len, g->cfg->upstreams_len);
    return 0;
}

/* ---- the admin's access to the cache ---------------------------------------------------- */

/* The current generation's cache with a reference, or NULL when no route caches. */
static gw_shared_cache_t *cache_hold(gw_server_t *s)
{
    uv_mutex_lock(&s->lock);
    gw_shared_cache_t *t = s->gen->cache;
    if (t)
        atomic_fetch_add(&t->refs, 1);
    uv_mutex_unlock(&s->lock);
    return t;
}

int gw_server_cache_stats(gw_server_t *s, gw_cache_stats_t *st, size_t *memory, size_t *max_object)
{
    gw_shared_cache_t *t = cache_hold(s);
    if (!t)
        return GW_E_NOENT;
    gw_cache_stats(t->c, st);
    *memory = t->memory;
    *max_object = t->max_object;
    cache_unref(t);
    return 0;
}

int gw_server_cache_purge(gw_server_t *s, const char *key, size_t len, int prefix, size_t *purged)
{
    gw_shared_cache_t *t = cache_hold(s);
    if (!t)
        return GW_E_NOENT;
    /* the store the workers share: its shard locks make this safe from any thread, and the
     * purge is seen by every worker's next lookup */
    *purged = prefix ? gw_cache_purge_prefix(t->c, key, len) : gw_cache_purge(t->c, key, len);
    cache_trim(s, t->c, GW_HEAP_TRIM_PURGE);
    cache_unref(t);
    return 0;
}
