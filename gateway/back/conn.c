/* back/conn.c — one keep-alive connection to an origin server: its lifecycle (resolve, dial,
 * TLS handshake, start, park, close, failure) and its timer. Reading and writing are in io.c,
 * the pipeline ring in pipeline.c, read batching in batch.c, health checks in health.c. */
#include <errno.h>
#include <string.h>

#include <netdb.h>
#include <sys/socket.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

static void on_timer(uv_timer_t *t);

const char *gw_back_conn_state_str(gw_back_conn_state_t s)
{
    static const char *const n[] = {[GW_BACK_CONN_CONNECTING] = "connecting",
                                    [GW_BACK_CONN_ACTIVE] = "active",
                                    [GW_BACK_CONN_IDLE] = "idle",
                                    [GW_BACK_CONN_CLOSING] = "closing"};
    return GW_NAME_OF(n, s, "?");
}

/* Drop one of the handles/requests that keep c's memory alive; free on the last one. */
static void conn_unref(gw_back_conn_t *c)
{
    if (--c->handles > 0)
        return;
    gw_iovq_free(&c->out);
    gw_rbuf_unref(c->in);
    gw_free(c->pipe);
    gw_h1_client_del(c->h1);
    gw_tls_conn_del(c->tls);
    gw_bytes_free(&c->tls_out);
    gw_free(c);
}

static void on_close(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* Timeouts are re-armed at every request, read and return to the pool; most of them move the
 * deadline later. Restarting a libuv timer is a heap removal and insertion (about 4 % of the
 * CPU with 500 client connections), so a later deadline is only recorded and the timer, when
 * it fires early, re-arms itself for the rest. */
void gw_back__arm(gw_back_conn_t *c, uint64_t ms)
{
    if (ms == 0)
        ms = 1;
    c->deadline = uv_now(c->timer.loop) + ms;
    if (uv_is_active((uv_handle_t *)&c->timer) && uv_timer_get_due_in(&c->timer) <= ms)
        return;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

void gw_back__conn_close(gw_back_conn_t *c)
{
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    gw_back_server_t *s = c->server;
    gw_back_stats_t *st = gw_back__stats(s->up->back);
    if (c->state == GW_BACK_CONN_IDLE) {
        gw_list_remove(&c->link);
        s->idle_cnt--;
        st->idle--;
        s->st.idle--;
    }
    GW_ASSERT(c->exch == NULL && c->pipe_len == 0);
    gw_list_remove(&c->link); /* the active list (pipelining) */
    gw_back__flush_cancel(c);
    gw_back__hold_end(c);
    if (s->pipe_hint == c)
        s->pipe_hint = NULL;
    if (c->tls) {
        /* Retired or failed after the handshake: close_notify. After a failed handshake the
         * alert OpenSSL queued goes instead. Best effort: one non-blocking write, none while
         * a write is in flight (uv_try_write refuses to overtake it). */
        if (c->state != GW_BACK_CONN_CONNECTING)
            gw_tls_shutdown(c->tls);
        uint8_t tail[512];
        size_t n = gw_tls_take_out(c->tls, tail, sizeof(tail));
        if (n) {
            uv_buf_t b = uv_buf_init((char *)tail, (unsigned)n);
            (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        }
    }
    c->state = GW_BACK_CONN_CLOSING;
    uv_timer_stop(&c->timer);
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->flags & GW_BACK_CONN_F_RESOLVING)
        uv_cancel((uv_req_t *)&c->gai); /* on_resolved still runs, with UV_ECANCELED */
    uv_close((uv_handle_t *)&c->tcp, on_close);
    uv_close((uv_handle_t *)&c->timer, on_close);
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        s->hc_conn = NULL;
        return; /* not counted in the pool */
    }
    if (c->flags & GW_BACK_CONN_F_TUNNEL) {
        s->tunnels--;
        st->tunnels--;
    }
    s->open--;
    st->open--;
    st->closed++;
    s->st.open--;
    s->st.closed++;
    gw_back__slot_released(s);
}

/* Detach the exchange (if any) from c; the busy count follows. A connection is counted busy
 * from its dial or start until this, whatever it reads in between: with pipelining the
 * exchange being read may be a placeholder (NULL) while the connection still works. */
gw_back_exch_t *gw_back__detach(gw_back_conn_t *c)
{
    gw_back_exch_t *x = c->exch;
    c->exch = NULL;
    if (x)
        x->conn = NULL;
    if (c->flags & GW_BACK_CONN_F_BUSY) {
        c->flags &= ~GW_BACK_CONN_F_BUSY;
        c->server->busy--;
        gw_back__stats(c->server->up->back)->active--;
        c->server->st.active--;
    }
    return x;
}

/* Whether the connection waits for the client: the origin holds every request byte we had,
 * no final response came, and the body is not complete. A timeout or a close then is the
 * client's doing (its body stalled) as much as the origin's, and a failure caused by the
 * client never counts against the server (issue 18 item 5). This holds after an interim
 * response (103) too: an origin may send one before it reads the body. */
static int waiting_client(const gw_back_conn_t *c)
{
    const gw_back_exch_t *x = c->exch;
    return x && c->state == GW_BACK_CONN_ACTIVE && (x->phase < GW_BACK_X_HEAD) && !x->body_ended &&
           x->body.bytes == 0 && c->out.bytes == 0 && !(c->flags & GW_BACK_CONN_F_WRITING);
}

/* The connection failed while carrying its exchange (and maybe some pipelined behind it). */
void gw_back__fail(gw_back_conn_t *c, int code, int count_failure)
{
    gw_back_server_t *s = c->server;
    if (waiting_client(c))
        count_failure = 0; /* the origin gave up on a body the client did not send */
    int before_response = !(c->flags & GW_BACK_CONN_F_GOT_BYTE);
    GW_LOG_INFO("back_conn_fail", "upstream=%s server=%s state=%s code=%s reused=%d got_byte=%d",
                s->up->cfg->name, s->cfg->addr.text, gw_back_conn_state_str(c->state),
                gw_errname(code), !!(c->flags & GW_BACK_CONN_F_REUSED), !before_response);
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        gw_back__server_fail(s, uv_now(gw_back__loop_of(c)));
        gw_back__conn_close(c);
        return;
    }
    gw_back__pipe_evacuate(c, 0);
    /* Unanswered, not failed: a request that waited in a pipeline, or one written into a
     * kept-alive connection the origin was closing (the race of RFC 9112 §9.3.1: reset or EOF
     * before any byte). Neither counts against the server nor uses up the request's retries:
     * the connection is gone, and the request goes again on another one. */
    int unanswered = before_response && ((c->flags & GW_BACK_CONN_F_PIPELINED) ||
                                         ((c->flags & GW_BACK_CONN_F_REUSED) && code == GW_E_IO));
    gw_back_exch_t *x = gw_back__detach(c);
    if (count_failure && !unanswered)
        gw_back__server_fail(s, uv_now(gw_back__loop_of(c)));
    gw_back__conn_close(c);
    if (x && unanswered && x->req.idempotent && !x->body_started_write)
        gw_back__exch_unanswered(x);
    else if (x)
        gw_back__exch_failed(x, code, before_response && code != GW_E_PARSE);
}

/* ---- timers, connect ------------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t)
{
    gw_back_conn_t *c = t->data;
    uint64_t now = uv_now(t->loop);
    if (now < c->deadline) { /* fired for an older, earlier deadline */
        uv_timer_start(t, on_timer, c->deadline - now, 0);
        return;
    }
    switch (c->state) {
    case GW_BACK_CONN_CONNECTING:
        if (c->flags & GW_BACK_CONN_F_HANDSHAKE)
            GW_LOG_WARN("back_tls_handshake_failed", "upstream=%s server=%s reason=\"timeout\"",
                        gw_back__ucfg(c)->name, c->server->cfg->addr.text);
        gw_back__fail(c, c->dial_err ? c->dial_err : GW_E_TIMEOUT, 1);
        break;
    case GW_BACK_CONN_ACTIVE:
        if (c->dial_err) {
            gw_back__fail(c, c->dial_err, 0); /* deferred out-of-memory from gw_back__conn_start */
            break;
        }
        /* The origin holds every request byte we had and no response came, but the client
         * has not sent the rest of its body: the wait is the client's, bounded by the front's
         * timeouts.request_body. The response timer runs only once the request is sent
         * whole (issue 18 item 5: a stalled upload counted as a server failure, and five
         * ejected the server). */
        if (waiting_client(c)) {
            gw_back__arm(c, gw_back__ucfg(c)->response_timeout_ms);
            break;
        }
        /* A silent tunnel (timeouts.tunnel_idle) is nobody's failure. */
        if (c->flags & GW_BACK_CONN_F_TUNNEL) {
            GW_LOG_INFO("tunnel_idle_close", "upstream=%s server=%s", gw_back__ucfg(c)->name,
                        c->server->cfg->addr.text);
            gw_back__fail(c, GW_E_TIMEOUT, 0);
            break;
        }
        /* Response head or body read timeout: the request may have taken effect, so it is
         * not retried; a server that stalls counts as failing. */
        c->flags |= GW_BACK_CONN_F_GOT_BYTE;
        gw_back__fail(c, GW_E_TIMEOUT, 1);
        break;
    case GW_BACK_CONN_IDLE:
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=idle_timeout", c->server->cfg->addr.text);
        gw_back__conn_close(c);
        break;
    case GW_BACK_CONN_CLOSING:
        break;
    }
}

/* The connection is up (TCP, and TLS when configured): send the health check request or
 * start the bound exchange. */
static void connected(gw_back_conn_t *c)
{
    c->connect_us = (gw_now_ns() - c->dial_ns) / 1000;
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        const gw_cfg_upstream_t *u = gw_back__ucfg(c);
        char line[1024];
        int n = snprintf(line, sizeof(line),
                         "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u->health_path,
                         c->server->cfg->host ? c->server->cfg->host : c->server->cfg->addr.text);
        c->state = GW_BACK_CONN_ACTIVE;
        gw_h1_client_start(c->h1, 0);
        if (n < 0 || (size_t)n >= sizeof(line) || gw_iovq_copy(&c->out, line, (size_t)n) < 0) {
            gw_back__fail(c, GW_E_NOMEM, 0);
            return;
        }
        gw_back__arm(c, u->response_timeout_ms);
        gw_back__conn_update_reading(c);
        gw_back__write_more(c);
        return;
    }
    gw_back_exch_t *x = c->exch;
    GW_ASSERT(x != NULL);
    gw_back__conn_start(c, x);
}

/* One step of the TLS handshake, after the connect or a read. The connect timer keeps
 * running: connect, name resolution and handshake share connect_timeout. */
void gw_back__tls_handshake_step(gw_back_conn_t *c)
{
    int rc = gw_tls_handshake(c->tls);
    gw_back__write_more(c); /* our flight, or the alert of a failure */
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (rc < 0) {
        GW_LOG_WARN("back_tls_handshake_failed", "upstream=%s server=%s reason=\"%s\"",
                    gw_back__ucfg(c)->name, c->server->cfg->addr.text, gw_tls_reason(c->tls));
        c->dial_err = GW_E_IO;
        gw_back__fail(c, GW_E_IO, 1);
        return;
    }
    if (rc == 0)
        return;
    c->flags &= ~GW_BACK_CONN_F_HANDSHAKE;
    GW_LOG_DEBUG("back_tls_connected", "server=%s version=%s cipher=%s alpn=%s resumed=%d",
                 c->server->cfg->addr.text, gw_tls_version(c->tls), gw_tls_cipher(c->tls),
                 gw_tls_alpn(c->tls), gw_tls_resumed(c->tls));
    connected(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, connect_req);
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (status < 0) {
        c->dial_err = GW_E_IO;
        gw_back__fail(c, GW_E_IO, 1);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (c->tls) {
        c->flags |= GW_BACK_CONN_F_HANDSHAKE;
        gw_back__conn_update_reading(c);
        gw_back__tls_handshake_step(c);
        return;
    }
    connected(c);
}

gw_back_conn_t *gw_back__conn_new(gw_back_server_t *s)
{
    uv_loop_t *loop = gw_back__loop(s->up->back);
    gw_back_conn_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    /* Bounds a response head and a trailer section (past them: GW_E_PARSE). */
    gw_h1_limits_t lim = {GW_BACK_MAX_HEAD, GW_BACK_MAX_FIELDS};
    c->h1 = gw_h1_client_new(&lim, &gw_back__codec_cbs, c);
    if (s->up->tls)
        c->tls = gw_tls_client_new(s->up->tls, s->index, s->cfg->host);
    if (!c->h1 || (s->up->tls && !c->tls)) {
        gw_h1_client_del(c->h1);
        gw_free(c);
        return NULL;
    }
    gw_bytes_init(&c->tls_out, 0);
    gw_list_init(&c->link);
    gw_list_init(&c->flink);
    gw_list_init(&c->hlink);
    gw_iovq_init(&c->out);
    c->server = s;
    c->state = GW_BACK_CONN_CONNECTING;
    c->dial_ns = gw_now_ns();
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    return c;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, gai);
    c->flags &= ~GW_BACK_CONN_F_RESOLVING;
    if (c->state == GW_BACK_CONN_CLOSING) {
        uv_freeaddrinfo(res);
        conn_unref(c); /* may be the last reference: the handles may have closed already */
        return;
    }
    c->handles--; /* tcp and timer are still open: never the last */
    int rc = status < 0 || !res
                 ? UV_EAI_NONAME
                 : uv_tcp_connect(&c->connect_req, &c->tcp, res->ai_addr, on_connect);
    if (rc < 0)
        GW_LOG_WARN("back_resolve_fail", "upstream=%s server=%s err=%s", c->server->up->cfg->name,
                    c->server->cfg->addr.text, uv_err_name(rc));
    uv_freeaddrinfo(res);
    if (rc < 0) {
        c->dial_err = GW_E_IO;
        gw_back__fail(c, GW_E_IO, 1);
    }
}

/* A server written as NAME:PORT: resolve it at each dial (the connect timeout covers it). */
static int start_resolve(gw_back_conn_t *c)
{
    const gw_cfg_server_t *sc = c->server->cfg;
    const char *colon = strrchr(sc->addr.text, ':');
    if (!colon || !sc->host)
        return UV_EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(gw_back__loop_of(c), &c->gai, on_resolved, sc->host, colon + 1, &hints);
    if (rc == 0) {
        c->flags |= GW_BACK_CONN_F_RESOLVING;
        c->handles++;
    }
    return rc;
}

void gw_back__start_connect(gw_back_conn_t *c)
{
    const gw_cfg_server_t *sc = c->server->cfg;
    int rc;
    if (sc->addr.ss.ss_family == AF_INET || sc->addr.ss.ss_family == AF_INET6)
        rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&sc->addr.ss,
                            on_connect);
    else
        rc = start_resolve(c);
    if (rc < 0) {
        /* Report asynchronously (callbacks never fire from gw_back_request). */
        c->dial_err = GW_E_IO;
        gw_back__arm(c, 0);
        return;
    }
    gw_back__arm(c, gw_back__ucfg(c)->connect_timeout_ms);
}

int gw_back__conn_dial(gw_back_server_t *s, gw_back_exch_t *x)
{
    gw_back_conn_t *c = gw_back__conn_new(s);
    if (!c)
        return GW_E_NOMEM;
    gw_back_stats_t *st = gw_back__stats(s->up->back);
    s->open++;
    s->busy++;
    st->open++;
    st->opened++;
    st->active++;
    s->st.open++;
    s->st.opened++;
    s->st.active++;
    c->flags |= GW_BACK_CONN_F_BUSY;
    c->exch = x;
    x->conn = c;
    x->server = s;
    gw_back__start_connect(c);
    return 0;
}

void gw_back__conn_start(gw_back_conn_t *c, gw_back_exch_t *x)
{
    if (c->state == GW_BACK_CONN_IDLE) {
        gw_list_remove(&c->link);
        c->server->idle_cnt--;
        gw_back__stats(c->server->up->back)->idle--;
        c->server->st.idle--;
        c->server->busy++;
        gw_back__stats(c->server->up->back)->active++;
        c->server->st.active++;
        c->flags |= GW_BACK_CONN_F_REUSED | GW_BACK_CONN_F_BUSY;
        c->exch = x;
        x->conn = c;
        x->server = c->server;
    } else {
        c->flags &= ~GW_BACK_CONN_F_REUSED;
    }
    GW_ASSERT(c->pipe_len == 0);
    if (gw_back__ucfg(c)->pipeline > 1 && !gw_list_linked(&c->link))
        gw_list_push_back(&c->server->active, &c->link);
    c->state = GW_BACK_CONN_ACTIVE;
    c->requests++;
    gw_back__begin_response(c, x, gw_back__is_head(x), 0);
    c->dial_err = 0;
    if (gw_iovq_copy(&c->out, x->head.base, x->head.len) < 0) {
        /* Report from the timer: this may run inside gw_back_request(), which never calls
         * back synchronously. */
        c->dial_err = GW_E_NOMEM;
        gw_back__arm(c, 0);
        return;
    }
    gw_back__arm(c, gw_back__ucfg(c)->response_timeout_ms);
    gw_back__conn_update_reading(c);
    if (gw_back__ucfg(c)->pipeline > 1)
        gw_back__flush_later(c); /* requests dispatched with this one may join its write */
    else
        gw_back__write_more(c);
}

gw_back_conn_t *gw_back__conn_take_idle(gw_back_server_t *s, int careful)
{
    while (!gw_list_empty(&s->idle)) {
        gw_back_conn_t *c = GW_CONTAINER_OF(s->idle.next, gw_back_conn_t, link);
        /* The read callback may not have run yet for a close that already arrived: peek, for
         * a request that could not be sent again. Not for a bodyless idempotent one, which
         * goes again elsewhere if it meets the close (a syscall per request saved: about one
         * in twenty requests under load, nearly every one when requests come further apart),
         * nor for a connection parked in this same loop iteration (the poll that could report
         * a close has not run since). */
        uv_os_fd_t fd;
        int dead = 0;
        if (careful && c->idle_since != uv_now(gw_back__loop_of(c))) {
            char b;
            dead = uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
                   recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
                   (errno != EAGAIN && errno != EWOULDBLOCK);
        }
        if (!dead)
            return c;
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=dead_on_reuse", s->cfg->addr.text);
        gw_back__conn_close(c);
    }
    return NULL;
}

void gw_back__conn_abort(gw_back_conn_t *c)
{
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = gw_back__pipe_at(c, i);
        if (e->x)
            e->x->conn = NULL;
    }
    c->pipe_first = c->pipe_len = 0;
    gw_back__detach(c);
    gw_back__conn_close(c);
}

void gw_back__conn_cancel(gw_back_conn_t *c, gw_back_exch_t *x)
{
    if (c->exch == x) {
        gw_back__pipe_evacuate(c, 0);
        gw_back__detach(c);
        gw_back__conn_close(c);
        return;
    }
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = gw_back__pipe_at(c, i);
        if (e->x == x) {
            e->x = NULL; /* its request is on the wire: drop the response when it comes */
            x->conn = NULL;
            return;
        }
    }
    GW_ASSERT(!"cancelled exchange not found on its connection");
}

/* Park c in its server's idle list (most recent first). */
void gw_back__conn_park(gw_back_conn_t *c)
{
    gw_back_server_t *s = c->server;
    GW_ASSERT(c->exch == NULL && c->pipe_len == 0);
    /* Parked even beyond max_idle: closing on the turn a connection becomes idle closes, at
     * every dip in load, the connections the next burst dials again (issue 19 item 1: 20,000
     * new origin connections per 200,000 requests). The excess is closed by the purge timer,
     * a fraction per idle_purge period, as HAProxy's pool-purge-delay does. */
    if (s->idle_cnt >= s->up->cfg->max_idle && !uv_is_active((uv_handle_t *)&s->up->purge_timer))
        uv_timer_start(&s->up->purge_timer, gw_back__idle_purge, s->up->cfg->idle_purge_ms, 0);
    gw_list_remove(&c->link); /* the active list (pipelining) */
    gw_back__flush_cancel(c);
    gw_back__hold_end(c);
    gw_back__lowat_set(c, 0); /* the next response head is awaited byte by byte */
    if (s->pipe_hint == c)
        s->pipe_hint = NULL;
    c->state = GW_BACK_CONN_IDLE;
    c->flags &= ~GW_BACK_CONN_F_PAUSED;
    gw_list_push_front(&s->idle, &c->link);
    s->idle_cnt++;
    gw_back__stats(s->up->back)->idle++;
    s->st.idle++;
    c->idle_since = uv_now(gw_back__loop_of(c));
    gw_bytes_free(&c->tls_out); /* an idle connection does not keep a ciphertext batch */
    gw_bytes_init(&c->tls_out, 0);
    /* Nor a read buffer: the next read of any connection takes the block freed last, whose
     * lines are in the cache, instead of the cold next kilobytes of this connection's own 16
     * KiB (the origin's head and body were read from lines last touched some hundred requests
     * before: about 20 LL misses a request in the manyconns scenario). The bytes still lent to
     * the front keep the block alive; a large buffer goes too, and the next response starts
     * small again. */
    c->in_big = 0;
    gw_rbuf_unref(c->in);
    c->in = NULL;
    gw_back__arm(c, s->up->cfg->idle_timeout_ms);
    gw_back__conn_update_reading(c);
}
