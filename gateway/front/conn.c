/* front/conn.c — one client connection's life: accept (the PROXY header on listeners that
 * expect one, then the throttle state, the TLS handshake or the first bytes), the busy state an
 * idle connection gives back, deferred work, timeouts, graceful stop and close. Its bytes (read,
 * TLS records, the protocol choice, write) are conn_io.c's; the protocols live in h1_stream.c
 * and h2_stream.c, throttling in throttle.c.
 *
 * What follows from the translator's calls (pumping HTTP/2 frames, the next pipelined request,
 * telling the proxy a stream is gone) is deferred to the worker's kick handle, so that no op
 * calls back into the proxy. */
#include <string.h>

#include "common/alloc.h"
#include "common/bucket.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "front/proxy_header.h"
#include "h1/serializer.h"
#include "h2/session.h"

static int conn_begin(conn_t *c);

static const char *conn_state_str(conn_state_t s)
{
    static const char *const n[] = {"handshake", "sniff", "h1", "h2", "closing", "proxy"};
    return n[s];
}

/* The peer as "ip:port" ("[ip6]:port") and as the bare address, into caller storage. */
static void format_peer(const conn_t *c, char *peer, size_t peer_cap, char *ip, size_t ip_cap)
{
    char a[48] = "";
    unsigned port = 0;
    if (c->addr.sa.sa_family == AF_INET6) {
        uv_ip6_name(&c->addr.in6, a, sizeof(a));
        port = ntohs(c->addr.in6.sin6_port);
        snprintf(peer, peer_cap, "[%s]:%u", a, port);
    } else if (c->addr.sa.sa_family == AF_INET) {
        uv_ip4_name(&c->addr.in4, a, sizeof(a));
        port = ntohs(c->addr.in4.sin_port);
        snprintf(peer, peer_cap, "%s:%u", a, port);
    } else {
        snprintf(peer, peer_cap, "%s", "");
    }
    snprintf(ip, ip_cap, "%s", a);
}

/* The peer for log lines: the busy state's copy, or (idle connection) formatted now into a
 * per-thread buffer that the next call overwrites. */
gw_cstream_t gw_front__cstream(conn_t *c, const gw_cstream_ops_t *ops, void *impl,
                               gw_slice_t method)
{
    /* what the origin is told about the client comes from the connection, never from what the
     * client says (its own X-Forwarded-* and Forwarded fields) */
    gw_cstream_t s = {.ops = ops,
                      .impl = impl,
                      .peer = c->b->peer,
                      .peer_ip = c->b->peer_ip,
                      .addr = (const struct sockaddr *)&c->addr,
                      .head_only = gw_slice_eq(method, GW_SLICE_LIT("HEAD")),
                      .tls = c->tls != NULL,
                      .no_hints = !c->l->cfg->early_hints,
                      .no_push = !c->l->cfg->push,
                      .listen = c->l->cfg};
    gw_front__client_cert_stream(c, &s);
    return s;
}

size_t gw_front__with_hsts(const gw_cstream_t *s, gw_field_t *f, size_t n, size_t cap)
{
    if (!s->tls || !s->listen || !s->listen->hsts)
        return n;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("strict-transport-security")))
            f[k++] = f[i];
    if (k < cap)
        f[k++] =
            (gw_field_t){GW_SLICE_LIT("strict-transport-security"), gw_slice_str(s->listen->hsts)};
    return k;
}

const char *gw_front__conn_peer(const conn_t *c)
{
    static _Thread_local char peer[64];
    char ip[48];
    if (c->b)
        return c->b->peer;
    format_peer(c, peer, sizeof(peer), ip, sizeof(ip));
    return peer;
}

size_t gw_front__in_len(const conn_t *c)
{
    return c->b ? c->b->in.len : 0;
}

size_t gw_front__out_len(const conn_t *c)
{
    return c->b ? c->b->out.len : 0;
}

/* The busy state, created when a connection gets work after being idle. 0 or GW_E_NOMEM. */
int gw_front__need_busy(conn_t *c)
{
    if (c->b)
        return 0;
    busy_t *b = gw_calloc(1, sizeof(*b));
    if (!b)
        return GW_E_NOMEM;
    /* pending input is at most one incomplete head (else 431) plus one read while paused */
    gw_bytes_init(&b->in, CFG(c)->limits.max_request_head + GW_FRONT_READ_BUF + 16384);
    gw_bytes_init(&b->out, 0);
    gw_iovq_init(&b->oq);
    gw_list_init(&b->h2_streams);
    gw_list_init(&b->h2_gone);
    gw_list_init(&b->h2_pushes);
    format_peer(c, b->peer, sizeof(b->peer), b->peer_ip, sizeof(b->peer_ip));
    c->b = b;
    atomic_fetch_add_explicit(&W(c)->busy, 1, memory_order_relaxed);
    gw_front__work(W(c));
    return 0;
}

/* Give the busy state back (callers check that nothing is in it). */
static void drop_busy(conn_t *c)
{
    busy_t *b = c->b;
    if (!b)
        return;
    gw_iovq_free(&b->oq);
    gw_bytes_free(&b->in);
    gw_bytes_free(&b->out);
    gw_free(b);
    c->b = NULL;
    atomic_fetch_sub_explicit(&W(c)->busy, 1, memory_order_relaxed);
    gw_front__work(W(c));
}

/* ---- deferred work ------------------------------------------------------------------------ */

/* Ask for conn_deferred() on the next loop iteration. */
void gw_front__kick(conn_t *c)
{
    if (c->dirty || (c->flags & GW_CONN_F_CLOSED))
        return;
    c->dirty = 1;
    gw_list_push_back(&W(c)->dirty, &c->dirty_link);
    if (!uv_is_active((uv_handle_t *)&W(c)->kick))
        uv_idle_start(&W(c)->kick, gw_front__on_kick);
}

void gw_front__unkick(conn_t *c)
{
    if (!c->dirty)
        return;
    gw_list_remove(&c->dirty_link);
    gw_list_init(&c->dirty_link);
    c->dirty = 0;
    /* no loop turn of its own for an empty list (the poll would not block) */
    if (gw_list_empty(&W(c)->dirty))
        uv_idle_stop(&W(c)->kick);
}

static void conn_deferred(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_H2) {
        gw_front__h2_start_pushes(c);
        gw_front__h2_tell_gone(c);
        gw_front__h2_pump(c);
    } else if (c->state == CS_H1) {
        if (gw_front__out_len(c) && gw_front__flush(c) < 0) {
            gw_front__conn_close(c, "write_error");
            return;
        }
        gw_front__process(c);
    }
}

void gw_front__on_kick(uv_idle_t *h)
{
    gw_front_t *w = GW_CONTAINER_OF(h, gw_front_t, kick);
    gw_list_t todo;
    gw_list_init(&todo);
    /* take the list: work done now may kick again for the next iteration */
    while (!gw_list_empty(&w->dirty)) {
        gw_list_t *it = w->dirty.next;
        gw_list_remove(it);
        gw_list_push_back(&todo, it);
    }
    while (!gw_list_empty(&todo)) {
        conn_t *c = GW_CONTAINER_OF(todo.next, conn_t, dirty_link);
        gw_list_remove(&c->dirty_link);
        gw_list_init(&c->dirty_link);
        c->dirty = 0;
        conn_deferred(c);
    }
    if (gw_list_empty(&w->dirty))
        uv_idle_stop(h);
}

/* Lazy re-arming, as in back/conn.c: HTTP/2 re-arms after every send and most re-arms move
 * the deadline later; only an earlier one moves the node (a heap operation), a later one is
 * recorded and on_timeout re-arms for the rest. */
void gw_front__arm(conn_t *c, uint64_t ms)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    c->deadline = uv_now(&W(c)->loop) + ms;
    if (gw_theap_queued(&c->tnode) && c->tnode.due <= c->deadline)
        return;
    gw_front__ticker_set(W(c), &c->tnode, c->deadline);
}

/* Close once everything queued is written. */
void gw_front__finish(conn_t *c, const char *why)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    GW_LOG_DEBUG("conn_finish", "peer=%s reason=%s", PEER(c), why);
    c->state = CS_CLOSING;
    c->flags |= GW_CONN_F_CLOSE_AFTER; /* flush sends TLS's close_notify after the rest */
    if (gw_front__flush(c) < 0 || (c->queued == 0 && gw_front__out_len(c) == 0))
        gw_front__conn_close(c, why);
    else
        gw_front__arm(c, 5000 + gw_front__tail_ms(c)); /* a peer that never reads our last bytes */
}

/* ---- close ------------------------------------------------------------------------------- */

static void on_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    gw_front_t *w = W(c);
    if (c->h1)
        gw_front__h1x_end(c);
    if (c->b)
        gw_front__h2_closed(c);
    if (c->h1) {
        gw_h1_parser_del(c->h1->p);
        gw_free(c->h1->fields);
        gw_free(c->h1->path);
        gw_free(c->h1);
    }
    gw_h2_session_del(c->h2);
    gw_tls_conn_del(c->tls);
    gw_free(c->ccert);
    drop_busy(c);
    gw_front__timer_nodes_add(w, -1);
    if (c->thr) {
        gw_bucket_table_release(c->g->clients, c->thr->client);
        gw_free(c->thr->route_b);
        gw_free(c->thr);
        gw_front__timer_nodes_add(w, -1);
    }
    gw_front_gen_t *g = c->g;
    gw_free(c);
    w->conns_alive--;
    g->conns--;
    w->ops->conn_freed(w, g);
}

void gw_front__conn_close(conn_t *c, const char *why)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    c->flags |= GW_CONN_F_CLOSED;
    if (c->h2)
        gw_front__h2_closing(c);
    GW_LOG_DEBUG("conn_close", "peer=%s state=%s reason=%s requests=%u", PEER(c),
                 conn_state_str(c->state), why, c->requests);
    gw_list_remove(&c->link);
    gw_front__unkick(c);
    W(c)->conns_len--;
    gw_theap_remove(&W(c)->timers, &c->tnode);
    if (c->thr)
        gw_theap_remove(&W(c)->timers, &c->thr->tnode);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

void gw_front__on_timeout(conn_t *c)
{
    uint64_t now = uv_now(&W(c)->loop);
    if (now < c->deadline) { /* fired for an older, earlier deadline */
        gw_front__ticker_set(W(c), &c->tnode, c->deadline);
        return;
    }
    switch (c->state) {
    case CS_HANDSHAKE:
        GW_LOG_INFO("timeout", "peer=%s kind=handshake", PEER(c));
        gw_front__conn_close(c, "handshake_timeout");
        return;
    case CS_SNIFF:
        GW_LOG_INFO("timeout", "peer=%s kind=first_request", PEER(c));
        gw_front__conn_close(c, "first_request_timeout");
        return;
    case CS_H1:
        if (h1x_resp_owed(c->h1)) {
            /* the origin side runs its own timeouts, and the proxy resets stalled clients */
            gw_front__arm(c, CFG(c)->timeouts.idle_ms);
        } else if (gw_h1_parser_in_message(c->h1->p) && !gw_h1_parser_paused(c->h1->p)) {
            /* RFC 9110 §15.5.9: 408 for a request that did not complete in time */
            GW_LOG_INFO("timeout", "peer=%s kind=header", PEER(c));
            if (gw_front__need_busy(c) < 0) {
                gw_front__conn_close(c, "nomem");
                return;
            }
            gw_h1_simple_response(&c->b->out, 408, "h2gate: request not completed in time\n", 0, 0);
            gw_front__log_direct(c, 408, gw_h1_parser_request_line(c->h1->p));
            gw_front__finish(c, "header_timeout");
        } else {
            GW_LOG_DEBUG("timeout", "peer=%s kind=idle", PEER(c));
            gw_front__conn_close(c, (c->flags & GW_CONN_F_STOPPING) ? "drained" : "idle_timeout");
        }
        return;
    case CS_H2:
        gw_front__h2_timeout(c);
        return;
    case CS_CLOSING:
        gw_front__conn_close(c, "close_timeout");
        return;
    case CS_PROXY:
        GW_LOG_INFO("timeout", "peer=%s kind=proxy_header", PEER(c));
        gw_front__conn_close(c, "proxy_header_timeout");
        return;
    }
}

/* ---- idle connections ---------------------------------------------------------------------- */

/* An idle connection keeps no buffer and no busy state: the input buffer (16 KiB and up once a
 * TLS record was read), the output buffer, the frame queue (its last 4 KiB copy block and entry
 * ring), the stream lists and the peer strings go back when empty and nothing is in progress;
 * the HTTP/2 session gives back what it holds only for streams and header blocks. Memory per
 * idle connection is then conn_t, the session's connection state and, over TLS, OpenSSL's.
 * Busy connections keep theirs. Writes in flight hold their own copies and pins. */
void gw_front__release_idle_buffers(conn_t *c)
{
    int idle = (c->state == CS_H2 && gw_h2_session_active_streams(c->h2) == 0) ||
               (c->state == CS_H1 && !h1x_active(c->h1) && !gw_h1_parser_in_message(c->h1->p));
    /* a WebSocket tunnel (HTTP/1.1) keeps its state but, between bursts, no empty buffers */
    int tunnel = c->state == CS_H1 && c->h1->tunnel && c->b;
    if (tunnel && c->tls)
        gw_tls_trim(c->tls);
    if (tunnel && c->b->in.len == 0 && c->b->in.cap) {
        size_t max = c->b->in.max;
        gw_bytes_free(&c->b->in);
        gw_bytes_init(&c->b->in, max);
    }
    if (tunnel && c->b->out.len == 0 && c->b->out.cap) {
        size_t max = c->b->out.max;
        gw_bytes_free(&c->b->out);
        gw_bytes_init(&c->b->out, max);
    }
    if (!idle)
        return;
    if (c->tls)
        gw_tls_trim(c->tls);
    if (c->h2)
        gw_h2_session_compact(c->h2);
    busy_t *b = c->b;
    if (!b)
        return;
    if (b->in.len == 0 && b->out.len == 0 && b->oq.count == 0 && gw_list_empty(&b->h2_streams) &&
        gw_list_empty(&b->h2_gone) && gw_list_empty(&b->h2_pushes) && b->h2_rst_after == 0) {
        drop_busy(c);
        return;
    }
    if (b->in.len == 0 && b->in.cap) {
        size_t max = b->in.max;
        gw_bytes_free(&b->in);
        gw_bytes_init(&b->in, max);
    }
    if (b->out.len == 0 && b->out.cap) {
        size_t max = b->out.max;
        gw_bytes_free(&b->out);
        gw_bytes_init(&b->out, max);
    }
    if (c->state == CS_H2 && b->oq.count == 0 && (b->oq.copy_buf || b->oq.ents))
        gw_iovq_free(&b->oq);
}

/* ---- accept ------------------------------------------------------------------------------- */

/* The connection's client address is known (the socket's, or a PROXY header's): its throttle
 * state, then the TLS handshake or the first bytes. 0, or -1 when it was closed. */
static int conn_begin(conn_t *c)
{
    gw_front_t *w = W(c);
    const gw_listener_t *l = c->l;
    const gw_front_gen_t *gen = c->g;
    const gw_cfg_throttle_t *th = &gen->cfg->throttle;
    if (th->response_rate || th->request_body_rate || gen->clients || gen->route_rates) {
        thr_t *t = gw_calloc(1, sizeof(*t));
        if (!t || gw_front__timer_nodes_add(w, 1) < 0) {
            gw_free(t);
            gw_front__conn_close(c, "nomem");
            return -1;
        }
        c->thr = t;
        t->c = c;
        gw_theap_node_init(&t->tnode, TK_THR);
        uint64_t now = gw_front__now_us();
        gw_bucket_init(&t->resp_b, th->response_rate, th->response_burst, now);
        gw_bucket_init(&t->body_b, th->request_body_rate, th->request_body_burst, now);
        if (gen->clients && gw_bucket_table_keyed(&c->addr.sa)) {
            t->client = gw_bucket_table_acquire(gen->clients, &c->addr.sa, 0, th->per_client_rate,
                                                th->per_client_burst, now);
            if (!t->client) {
                /* full of clients still in debt: fail closed, as an unthrottled connection
                 * would be the way around per_client_rate */
                GW_LOG_INFO("client_table_full", "peer=%s", PEER(c));
                gw_front__conn_close(c, "client_table_full");
                return -1;
            }
        }
        t->out = gw_bucket_limited(&t->resp_b) || t->client || gen->route_rates;
    }
    if (l->tls) {
        c->tls = gw_tls_conn_new(l->tls);
        if (!c->tls) {
            gw_front__conn_close(c, "nomem");
            return -1;
        }
        c->state = CS_HANDSHAKE;
        gw_front__arm(c, gen->cfg->timeouts.handshake_ms);
    } else {
        c->state = CS_SNIFF;
        gw_front__arm(c, gen->cfg->timeouts.first_request_ms);
    }
    return 0;
}

/* A proxy_protocol listener's first bytes: the PROXY header (front/proxy_header.c), whose
 * address becomes the client's everywhere (logs, X-Forwarded-For, throttles, rate limits);
 * what follows it is the client's own, handed on. */
void gw_front__proxy_header(conn_t *c, const char *data, size_t n)
{
    if (gw_front__need_busy(c) < 0) {
        gw_front__conn_close(c, "nomem");
        return;
    }
    /* Most headers come whole in the first read: parsed in place. A header split over reads
     * is gathered in c->b->in; the bytes gathered then were all header (the parser wanted
     * more), so what follows the header is always a tail of this read, handed on uncopied. */
    gw_bytes_t *in = &c->b->in;
    size_t prev = in->len;
    if (prev && gw_bytes_append(in, data, n) < 0) {
        gw_front__conn_close(c, "nomem");
        return;
    }
    gw_proxy_hdr_t h;
    const char *why = NULL;
    ssize_t hl = prev ? gw_proxy_hdr_parse(in->base, in->len, &h, &why)
                      : gw_proxy_hdr_parse((const uint8_t *)data, n, &h, &why);
    if (hl == 0) {
        if (!prev && gw_bytes_append(in, data, n) < 0)
            gw_front__conn_close(c, "nomem");
        return;
    }
    if (hl < 0) {
        GW_LOG_INFO("proxy_protocol_refused", "peer=%s reason=\"%s\"", PEER(c), why);
        gw_front__conn_close(c, "proxy_header_invalid");
        return;
    }
    in->len = 0;
    if (!h.local && h.src_len <= sizeof(c->addr)) {
        memcpy(&c->addr, &h.src, h.src_len);
        format_peer(c, c->b->peer, sizeof(c->b->peer), c->b->peer_ip, sizeof(c->b->peer_ip));
    }
    GW_LOG_DEBUG("proxy_protocol", "peer=%s version=%d local=%d", PEER(c), h.version, h.local);
    if (conn_begin(c) < 0)
        return;
    size_t used = (size_t)hl - prev; /* of this read */
    if (used < n)
        gw_front__on_data(c, data + used, n - used); /* TLS records, or the first request's bytes */
}

/* A listener holding a connection libuv handed over that nobody took (refuse): accepted_fd is
 * libuv's own field (uv/unix.h), -1 on every other stream. */
static void find_waiting(uv_handle_t *h, void *arg)
{
    uv_stream_t **out = arg;
    if (!*out && h->type == UV_TCP && ((uv_stream_t *)h)->accepted_fd != -1 && !uv_is_closing(h))
        *out = (uv_stream_t *)h;
}

static void on_refused_closed(uv_handle_t *h)
{
    gw_front_t *w = GW_CONTAINER_OF(h->loop, gw_front_t, loop);
    w->refusing = 0;
    if (!w->refuse_waits)
        return;
    w->refuse_waits = 0;
    uv_stream_t *server;
    /* each call takes the waiting connection (its listener is polled again) or refuses it */
    while (!w->refusing && (server = NULL, uv_walk(&w->loop, find_waiting, &server), server))
        gw_front_on_connection(server, 0);
    if (w->refusing)
        w->refuse_waits = 1; /* another listener may still wait: looked for at that close */
}

/* A shortage that lasts refuses every connection: at most one line a second per worker */
#define NOMEM_LOG_MS 1000

/* No memory for a new connection: take it off libuv's hands all the same and close it. libuv
 * stops polling a listener while a connection it handed to the callback is not accepted
 * (uv__server_io), and only uv_accept starts it again. */
static void refuse(gw_front_t *w, uv_stream_t *server, const gw_listener_t *l)
{
    if (w->refusing) {
        w->refuse_waits = 1; /* taken in on_refused_closed (counted then) */
        return;
    }
    uint64_t n = gw_log_limit(&w->nomem_log, gw_now_ms(), NOMEM_LOG_MS);
    if (n)
        GW_LOG_WARN("accept_nomem", "listener=%s refused=%llu", l->cfg->addr.text,
                    (unsigned long long)n);
    w->refusing = 1;
    uv_tcp_init(&w->loop, &w->refused);
    (void)uv_accept(server, (uv_stream_t *)&w->refused);
    uv_close((uv_handle_t *)&w->refused, on_refused_closed);
}

void gw_front_on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    gw_front_t *w = GW_CONTAINER_OF((uv_loop_t *)server->loop, gw_front_t, loop);
    const gw_listener_t *l = server->data;
    conn_t *c = gw_calloc(1, sizeof(*c));
    if (!c) {
        refuse(w, server, l);
        return;
    }
    if (gw_front__timer_nodes_add(w, 1) < 0) {
        gw_free(c);
        refuse(w, server, l);
        return;
    }
    c->l = l;
    c->g = w->cur;
    c->g->conns++;
    gw_list_init(&c->link);
    gw_list_init(&c->dirty_link);
    gw_theap_node_init(&c->tnode, TK_CONN);
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    gw_list_push_back(&w->conns, &c->link);
    w->conns_len++;
    w->conns_alive++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        gw_front__conn_close(c, "accept_failed");
        return;
    }
    w->accepted++;
    if (w->conns_len > c->g->cfg->limits.max_connections) {
        gw_front__conn_close(c, "max_connections");
        return;
    }
    /* TCP_NODELAY is the listening socket's, inherited (server/generation.c whandle_open) */
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 &&
        (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
        memcpy(&c->addr, &ss, ss.ss_family == AF_INET ? sizeof(c->addr.in4) : sizeof(c->addr.in6));
    if (l->cfg->proxy_protocol) {
        /* the balancer's header comes first; the rest waits for the address it names */
        int trusted = 0; /* the loader requires proxy_protocol_from (any: 0/0, ::/0) */
        for (size_t i = 0; i < l->cfg->proxy_from_len && !trusted; i++)
            trusted = gw_cfg_net_match(&l->cfg->proxy_from[i], &c->addr.sa);
        if (!trusted) {
            GW_LOG_INFO("proxy_protocol_refused", "peer=%s reason=\"not in proxy_protocol_from\"",
                        PEER(c));
            gw_front__conn_close(c, "proxy_untrusted");
            return;
        }
        c->state = CS_PROXY;
        gw_front__arm(c, l->cfg->proxy_timeout_ms);
    } else if (conn_begin(c) < 0) {
        return;
    }
    gw_front__read_start(c);
    if (w->stop != GW_STOP_NONE)
        gw_front__conn_stop(&c->link, w->stop);
}

void gw_front__conn_stop(gw_list_t *link, gw_stop_t how)
{
    conn_t *c = GW_CONTAINER_OF(link, conn_t, link);
    if (how == GW_STOP_NOW) {
        gw_front__conn_close(c, "shutdown");
        return;
    }
    if ((c->flags & GW_CONN_F_STOPPING) || (how == GW_STOP_DRAIN && (c->flags & GW_CONN_F_DRAIN)))
        return;
    const gw_config_t *cfg = CFG(c);
    uint64_t grace = cfg->timeouts.drain_grace_ms;
    if (c->state == CS_H2) {
        if (how == GW_STOP_DRAIN) {
            /* A reload: streams keep coming on this connection until it has been quiet for
             * timeouts.drain_grace, or until half the drain deadline has passed, and only then
             * the GOAWAY. A client that fails what it had queued on a connection that said
             * GOAWAY (h2load does) loses nothing while the connection is busy; the other half
             * of the deadline is for the streams in flight. */
            c->flags |= GW_CONN_F_DRAIN;
            uint64_t half = cfg->timeouts.graceful_shutdown_ms / 2;
            c->stop_due = gw_now_ms() + (half > grace ? half : grace) + 1;
            gw_front__h2_pump(c);
            return;
        }
        gw_front__h2_goaway(c);
        return;
    }
    if (c->state != CS_H1 && c->state != CS_CLOSING && how == GW_STOP_DRAIN)
        c->flags |= GW_CONN_F_DRAIN; /* becomes HTTP/2: drains as above */
    c->flags |= GW_CONN_F_STOPPING;
    if (c->state == CS_CLOSING)
        return;
    /* one in the middle of a request finishes it, then closes (Connection: close) */
    if (c->state == CS_H1 && (h1x_active(c->h1) || (gw_h1_parser_in_message(c->h1->p) &&
                                                    !gw_h1_parser_paused(c->h1->p))))
        return;
    /* An idle one, or one still in its handshake or first bytes, stays open for
     * timeouts.drain_grace: a request already on the wire is answered (with Connection:
     * close), not reset, which is the race of closing idle keep-alive connections at once. */
    if (grace == 0) {
        if (c->queued)
            gw_front__finish(c, "shutdown");
        else
            gw_front__conn_close(c, "shutdown");
        return;
    }
    uint64_t due = uv_now(&W(c)->loop) + grace;
    if (!gw_theap_queued(&c->tnode) || due < c->deadline)
        gw_front__arm(c, grace);
}
