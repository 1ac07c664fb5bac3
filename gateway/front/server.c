/* front/server.c — start-up (listeners bound and certificates loaded before any worker runs),
 * worker threads with one libuv loop each, signals and shutdown. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"

static int bind_socket(const gw_cfg_listen_t *l, int *out)
{
    int fd = socket(l->addr.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* Each worker binds its own socket; the kernel spreads new connections over them. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
        goto fail;
    if (l->addr.ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&l->addr.ss, l->addr.len) < 0)
        goto fail;
    if (listen(fd, l->backlog) < 0)
        goto fail;
    *out = fd;
    return 0;
fail:;
    int e = errno;
    close(fd);
    return -e;
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
    return n;
}

static void worker_free(gw_worker_t *w);

int gw_server_new(const gw_config_t *cfg, gw_server_t **out)
{
    *out = NULL;
    gw_server_t *s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->cfg = cfg;
    if (uv_mutex_init(&s->lock) != 0) {
        gw_free(s);
        return GW_E_NOMEM;
    }
    s->workers_len = cfg->workers ? cfg->workers : 1;
    int rv = 0;
    s->listeners = gw_calloc(cfg->listen_len, sizeof(*s->listeners));
    s->workers = gw_calloc(s->workers_len, sizeof(*s->workers));
    if (!s->listeners || !s->workers) {
        rv = GW_E_NOMEM;
        goto fail;
    }
    /* per-client buckets: one per live connection at most, plus as many idle ones (a client
     * that reconnects keeps its balance until evicted) */
    if (cfg->throttle.per_client_rate) {
        size_t cap = (size_t)cfg->limits.max_connections * s->workers_len * 2;
        if (cap > (1u << 22))
            cap = 1u << 22;
        if ((rv = gw_bucket_table_new(cap, cfg->throttle.ipv6_prefix, &s->clients)) < 0)
            goto fail;
    }
    for (size_t i = 0; i < cfg->routes_len; i++) {
        if (cfg->routes[i].response_rate)
            s->route_rates = 1;
        if (cfg->routes[i].request_rate && !s->rates &&
            (rv = gw_bucket_table_new(GW_FRONT_RATE_TABLE, cfg->throttle.ipv6_prefix, &s->rates)) <
                0)
            goto fail;
    }
    for (size_t i = 0; i < cfg->listen_len; i++) {
        gw_listener_t *l = &s->listeners[i];
        l->cfg = &cfg->listen[i];
        s->listeners_len = i + 1;
        l->fds = gw_malloc(s->workers_len * sizeof(int));
        if (!l->fds) {
            rv = GW_E_NOMEM;
            goto fail;
        }
        for (unsigned k = 0; k < s->workers_len; k++)
            l->fds[k] = -1;
        if (l->cfg->tls) {
            unsigned char alpn[32];
            size_t alen = alpn_for(l->cfg, alpn);
            rv = gw_tls_ctx_new(l->cfg->tls, alpn, alen, &l->tls);
            if (rv < 0) {
                GW_LOG_ERROR("listen_failed", "address=%s reason=\"TLS setup failed\"",
                             l->cfg->addr.text);
                goto fail;
            }
        }
        for (unsigned k = 0; k < s->workers_len; k++) {
            int e = bind_socket(l->cfg, &l->fds[k]);
            if (e < 0) {
                GW_LOG_ERROR("listen_failed", "address=%s reason=\"%s\"", l->cfg->addr.text,
                             strerror(-e));
                rv = GW_E_IO;
                goto fail;
            }
        }
        GW_LOG_INFO("listening", "address=%s tls=%s protocols=%s%s%s", l->cfg->addr.text,
                    l->cfg->tls ? "yes" : "no", l->cfg->protocols & GW_PROTO_F_H2 ? "h2," : "",
                    l->cfg->protocols & GW_PROTO_F_H2C ? "h2c," : "",
                    l->cfg->protocols & GW_PROTO_F_HTTP1 ? "http/1.1" : "");
    }
    *out = s;
    return 0;
fail:
    gw_server_del(s);
    return rv;
}

static void on_wake(uv_async_t *a);

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void close_listeners(gw_worker_t *w)
{
    for (size_t i = 0; i < w->srv->listeners_len; i++)
        if (!uv_is_closing((uv_handle_t *)&w->servers[i]))
            uv_close((uv_handle_t *)&w->servers[i], on_handle_closed);
}

static void on_drain_deadline(uv_timer_t *t)
{
    gw_worker_t *w = GW_CONTAINER_OF(t, gw_worker_t, drain);
    GW_LOG_WARN("drain_deadline", "worker=%u open_connections=%zu", w->id, w->conns_len);
    w->stop = GW_STOP_NOW;
    gw_list_foreach_safe(it, tmp, &w->conns) gw_front__conn_stop(it, GW_STOP_NOW);
}

static void worker_stop(gw_worker_t *w, gw_stop_t how)
{
    if (how <= w->stop)
        return;
    int first = w->stop == GW_STOP_NONE;
    w->stop = how;
    if (first) {
        close_listeners(w);
        if (how == GW_STOP_GRACEFUL) {
            uv_timer_start(&w->drain, on_drain_deadline, w->srv->cfg->timeouts.graceful_shutdown_ms,
                           0);
        }
    }
    gw_list_foreach_safe(it, tmp, &w->conns) gw_front__conn_stop(it, how);
    if (how == GW_STOP_NOW && uv_is_active((uv_handle_t *)&w->drain))
        uv_timer_stop(&w->drain);
}

/* Called by conn.c when a connection is gone; the last one lets the loop end. */

void gw_front__worker_conn_gone(gw_worker_t *w)
{
    if (w->stop == GW_STOP_NONE || w->conns_len != 0 || uv_is_closing((uv_handle_t *)&w->drain))
        return;
    uv_close((uv_handle_t *)&w->drain, on_handle_closed);
    uv_close((uv_handle_t *)&w->kick, on_handle_closed);
    uv_close((uv_handle_t *)&w->ticker, on_handle_closed);
    gw_proxy_close(w->proxy); /* pooled origin connections: the loop can end */
    uv_mutex_lock(&w->srv->lock);
    w->wake_open = 0;
    uv_close((uv_handle_t *)&w->wake, on_handle_closed);
    uv_mutex_unlock(&w->srv->lock);
}

static void on_wake(uv_async_t *a)
{
    gw_worker_t *w = GW_CONTAINER_OF(a, gw_worker_t, wake);
    gw_stop_t how = (gw_stop_t)atomic_load(&w->srv->stop_request);
    if (how != GW_STOP_NONE) {
        worker_stop(w, how);
        gw_front__worker_conn_gone(w);
    }
}

static void worker_main(void *arg)
{
    gw_worker_t *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    GW_LOG_INFO("worker_stats", "worker=%u accepted=%llu busy=%llu", w->id,
                (unsigned long long)atomic_load(&w->accepted),
                (unsigned long long)atomic_load(&w->busy));
    atomic_fetch_add(&w->srv->workers_done, 1);
    uv_async_send(&w->srv->main_wake);
}

static int worker_start(gw_server_t *s, unsigned id, gw_worker_t **out)
{
    gw_worker_t *w = gw_calloc(1, sizeof(*w));
    if (!w)
        return GW_E_NOMEM;
    w->srv = s;
    w->id = id;
    gw_list_init(&w->conns);
    w->servers = gw_calloc(s->listeners_len ? s->listeners_len : 1, sizeof(uv_tcp_t));
    if (!w->servers || uv_loop_init(&w->loop) != 0) {
        gw_free(w->servers);
        gw_free(w);
        return GW_E_NOMEM;
    }
    w->loop_ok = 1;
    int prv = gw_proxy_new(&w->loop, s->cfg, &w->proxy);
    if (prv == 0)
        gw_proxy_set_rate_table(w->proxy, s->rates);
    if (prv < 0) {
        GW_LOG_ERROR("proxy_failed", "worker=%u reason=\"%s\"", id, gw_strerror(prv));
        uv_loop_close(&w->loop);
        gw_free(w->servers);
        gw_free(w);
        return prv;
    }
    *out = w;
    gw_list_init(&w->dirty);
    uv_idle_init(&w->loop, &w->kick);
    uv_async_init(&w->loop, &w->wake, on_wake);
    uv_mutex_lock(&s->lock);
    w->wake_open = 1;
    uv_mutex_unlock(&s->lock);
    uv_timer_init(&w->loop, &w->drain);
    uv_timer_init(&w->loop, &w->ticker);
    gw_theap_init(&w->timers);
    for (size_t i = 0; i < s->listeners_len; i++) {
        uv_tcp_t *t = &w->servers[i];
        uv_tcp_init(&w->loop, t);
        t->data = &s->listeners[i];
        int e = uv_tcp_open(t, s->listeners[i].fds[id]);
        if (e == 0) {
            s->listeners[i].fds[id] = -1; /* owned by the handle now */
            e = uv_listen((uv_stream_t *)t, s->listeners[i].cfg->backlog, gw_front__on_connection);
        }
        if (e < 0) {
            GW_LOG_ERROR("listen_failed", "address=%s reason=\"%s\"",
                         s->listeners[i].cfg->addr.text, uv_strerror(e));
            return GW_E_IO;
        }
    }
    if (uv_thread_create(&w->thread, worker_main, w) != 0)
        return GW_E_IO;
    return 0;
}

static void on_signal(uv_signal_t *h, int signum)
{
    gw_server_t *s = h->data;
    s->signals_seen++;
    GW_LOG_INFO("signal", "signal=%s action=%s", signum == SIGINT ? "SIGINT" : "SIGTERM",
                s->signals_seen == 1 ? "graceful_stop" : "stop_now");
    gw_server_stop(s, s->signals_seen == 1);
}

/* SIGUSR1: one worker_stats line per worker, the same line as at shutdown, without stopping.
 * The counters are atomics written by the worker threads. */
static void on_usr1(uv_signal_t *h, int signum)
{
    (void)signum;
    gw_server_t *s = h->data;
    for (unsigned i = 0; i < s->workers_len; i++)
        if (s->workers[i])
            GW_LOG_INFO("worker_stats", "worker=%u accepted=%llu when=sigusr1 busy=%llu",
                        s->workers[i]->id,
                        (unsigned long long)atomic_load(&s->workers[i]->accepted),
                        (unsigned long long)atomic_load(&s->workers[i]->busy));
    gw_front__log_rate_tables(s, "sigusr1");
}

/* The per-client tables are shared by the workers: one line for them (issue 18 item 12). */
void gw_front__log_rate_tables(gw_server_t *s, const char *when)
{
    if (!s->clients && !s->rates)
        return;
    GW_LOG_INFO("rate_tables",
                "when=%s clients_size=%zu clients_evictions=%llu clients_refused=%llu "
                "rates_size=%zu rates_evictions=%llu rate_table_refused=%llu",
                when, s->clients ? gw_bucket_table_size(s->clients) : 0,
                (unsigned long long)(s->clients ? gw_bucket_table_evictions(s->clients) : 0),
                (unsigned long long)(s->clients ? gw_bucket_table_refused(s->clients) : 0),
                s->rates ? gw_bucket_table_size(s->rates) : 0,
                (unsigned long long)(s->rates ? gw_bucket_table_evictions(s->rates) : 0),
                (unsigned long long)(s->rates ? gw_bucket_table_refused(s->rates) : 0));
}

static void on_main_wake(uv_async_t *a)
{
    (void)a;
}

int gw_server_run(gw_server_t *s)
{
    int rv = 0;
    if (uv_loop_init(&s->main_loop) != 0)
        return GW_E_NOMEM;
    uv_signal_init(&s->main_loop, &s->sig_int);
    uv_signal_init(&s->main_loop, &s->sig_term);
    uv_signal_init(&s->main_loop, &s->sig_usr1);
    uv_async_init(&s->main_loop, &s->main_wake, on_main_wake);
    s->sig_int.data = s->sig_term.data = s->sig_usr1.data = s;
    uv_signal_start(&s->sig_int, on_signal, SIGINT);
    uv_signal_start(&s->sig_term, on_signal, SIGTERM);
    uv_signal_start(&s->sig_usr1, on_usr1, SIGUSR1);
    unsigned started = 0;
    for (unsigned i = 0; i < s->workers_len; i++) {
        rv = worker_start(s, i, &s->workers[i]);
        if (s->workers[i] && rv == 0)
            started++;
        if (rv < 0)
            break;
    }
    if (rv < 0) {
        /* stop the ones that run; then also clean the half-started one */
        gw_server_stop(s, 0);
        for (unsigned i = 0; i < started; i++)
            uv_thread_join(&s->workers[i]->thread);
        if (s->workers[started]) {
            worker_stop(s->workers[started], GW_STOP_NOW);
            uv_run(&s->workers[started]->loop, UV_RUN_DEFAULT);
        }
    } else {
        /* the main loop only waits for signals until every worker has ended */
        /* the main loop keeps handling signals while the workers drain, so that a second
         * signal still stops them at once */
        while (atomic_load(&s->workers_done) < s->workers_len)
            uv_run(&s->main_loop, UV_RUN_ONCE);
        for (unsigned i = 0; i < s->workers_len; i++)
            uv_thread_join(&s->workers[i]->thread);
    }
    gw_front__log_rate_tables(s, "stop");
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_usr1, NULL);
    uv_close((uv_handle_t *)&s->main_wake, NULL);
    uv_run(&s->main_loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->main_loop);
    return rv;
}

void gw_server_stop(gw_server_t *s, int graceful)
{
    int how = graceful ? GW_STOP_GRACEFUL : GW_STOP_NOW;
    int cur = atomic_load(&s->stop_request);
    while (cur < how && !atomic_compare_exchange_weak(&s->stop_request, &cur, how))
        ;
    uv_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->workers_len; i++)
        if (s->workers[i] && s->workers[i]->wake_open)
            uv_async_send(&s->workers[i]->wake);
    uv_mutex_unlock(&s->lock);
    uv_async_send(&s->main_wake);
}

static void worker_free(gw_worker_t *w)
{
    if (!w)
        return;
    if (w->proxy) {
        gw_proxy_close(w->proxy);
        uv_run(&w->loop, UV_RUN_NOWAIT);
    }
    if (w->loop_ok)
        uv_loop_close(&w->loop);
    gw_proxy_del(w->proxy);
    gw_theap_free(&w->timers);
    gw_h2_profile_del(w->h2prof);
    gw_pool_free(&w->h2s_pool); /* every connection is closed: only the freelist is left */
    gw_free(w->servers);
    gw_free(w);
}

void gw_server_del(gw_server_t *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->workers_len && s->workers; i++)
        worker_free(s->workers[i]);
    gw_free(s->workers);
    for (size_t i = 0; i < s->listeners_len; i++) {
        gw_listener_t *l = &s->listeners[i];
        if (l->fds)
            for (unsigned k = 0; k < s->workers_len; k++)
                if (l->fds[k] >= 0)
                    close(l->fds[k]);
        gw_free(l->fds);
        gw_tls_ctx_del(l->tls);
    }
    gw_free(s->listeners);
    gw_bucket_table_del(s->clients);
    gw_bucket_table_del(s->rates);
    uv_mutex_destroy(&s->lock);
    gw_free(s);
}

/* ---- connection timers --------------------------------------------------------------------- */

static void on_ticker(uv_timer_t *t);

/* A worker's connections share one libuv timer: each queues a 16-byte node in the worker's
 * heap (common/theap.h) instead of owning two uv_timer_t (152 bytes each). The loop timer is
 * armed for the earliest node; like the connection timeouts below it is re-armed lazily: a
 * node moved later, or removed, lets it fire early and re-arm for what is due next. Due times
 * are loop milliseconds (uv_now); a node never fires in the pass that queued it. */

static void ticker_rearm(gw_worker_t *w)
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
void gw_front__ticker_set(gw_worker_t *w, gw_theap_node_t *n, uint64_t due)
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
int gw_front__timer_nodes_add(gw_worker_t *w, int k)
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
    gw_worker_t *w = GW_CONTAINER_OF(t, gw_worker_t, ticker);
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
