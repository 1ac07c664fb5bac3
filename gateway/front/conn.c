/* front/conn.c — one client connection: read → TLS → protocol choice → HTTP/1.1 front (or
 * the HTTP/2 refusal) → TLS → write, with the connection's timeouts and write bound.
 *
 * HTTP/2 connections (ALPN h2, or the h2c preface on a cleartext listener) are driven through
 * the sans-IO session of h2/. Every request becomes a client stream (proxy/stream.h) handed to
 * the worker's translator. What follows from the translator's calls (pumping HTTP/2 frames,
 * the next pipelined request, telling the proxy a stream is gone) is deferred to the worker's
 * kick handle, so that no op calls back into the proxy. */
#include <string.h>

#include "common/alloc.h"
#include "common/bucket.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "common/clock.h"
#include "h1/serializer.h"
#include "h2/errors.h"
#include "h2/priority.h"
#include "h2/session.h"

void gw_front__worker_conn_gone(gw_worker_t *w);

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN 24
/* an HTTP/2 connection idle this long gives back its busy state even without a read */
#define H2_IDLE_RELEASE_MS 1000

typedef enum {
    CS_HANDSHAKE = 0, /* TLS handshake in progress */
    CS_SNIFF,         /* waiting for the first bytes that choose the protocol */
    CS_H1,            /* HTTP/1.1 front */
    CS_H2,            /* HTTP/2 session */
    CS_CLOSING,       /* flushing the last bytes, then close */
} conn_state_t;

static const char *conn_state_str(conn_state_t s)
{
    static const char *const n[] = {"handshake", "sniff", "h1", "h2", "closing"};
    return n[s];
}

/* GW_CONN_F_*: why a connection is paused or what it waits for. */
enum {
    GW_CONN_F_READ_PAUSED = 1u << 0, /* reads stopped: write queue over limits.write_buffer */
    GW_CONN_F_CLOSE_AFTER = 1u << 1, /* close once the write queue drains */
    GW_CONN_F_EOF = 1u << 2,         /* the peer closed its side */
    GW_CONN_F_CLOSED = 1u << 3,      /* uv_close called */
    GW_CONN_F_STOPPING = 1u << 4,    /* graceful stop: no new requests after the current one */
    GW_CONN_F_THR_OUT = 1u << 5,     /* response bytes wait for tokens (throttle timer armed) */
    GW_CONN_F_THR_IN = 1u << 6,      /* reads stopped / window credit held: upload rate */
};

typedef struct conn conn_t;

/* Timer nodes in the worker's heap (gw_theap_node_t.kind). */
enum { TK_CONN = 0, TK_THR = 1 };

/* HTTP/1.1 front state, from the protocol choice to the close (only HTTP/1.1 connections). */
typedef struct {
    gw_h1_parser_t *p;
    gw_cstream_t s;     /* the current request's client stream, handed to the proxy */
    gw_field_t *fields; /* the request's fields in the common form */
    size_t fields_cap;
    uint64_t inflight; /* request body bytes given to the proxy and not credited yet */
    gw_bucket_t *rb;   /* route bucket of the current request (throttle), or NULL */
    unsigned keep_alive : 1;
    unsigned expect_100 : 1;   /* answered without 100 Continue: close after the response */
    unsigned resp_chunked : 1; /* response body framed as chunks */
    unsigned resp_done : 1;    /* the response has been handed over whole */
    unsigned active : 1;       /* s is known to the proxy */
    unsigned req_complete : 1; /* the parser has seen the whole current request */
    unsigned resp_started : 1; /* a final head was written */
    unsigned http10 : 1;       /* the current request is HTTP/1.0: no 1xx, no chunked */
} h1x_t;

/* Throttling (issue 7): allocated at accept only when the gateway configures a throttle. */
typedef struct {
    gw_theap_node_t tnode; /* wake-up when tokens are back (TK_THR) */
    conn_t *c;
    int out;                   /* some response limit may apply to this connection */
    gw_bucket_t resp_b;        /* throttle.response_rate */
    gw_bucket_t body_b;        /* throttle.request_body_rate */
    gw_bucket_entry_t *client; /* throttle.per_client_rate, shared by all workers */
    gw_bucket_t *route_b;      /* per route (routes[].response_rate), allocated on first use */
    size_t h2_given;           /* connection data budget handed to the session */
} thr_t;

/* What a connection needs only while bytes or requests are in flight. An idle connection
 * gives it back (release_idle_buffers) and gets a fresh one with its next read or frame, so
 * thousands of idle connections cost little more than their socket and protocol state. */
typedef struct {
    gw_bytes_t in;         /* plaintext not consumed yet */
    gw_bytes_t out;        /* plaintext response bytes being built */
    gw_iovq_t oq;          /* frames from the HTTP/2 session */
    gw_list_t h2_streams;  /* h2s_t of the streams the proxy knows, freed with the conn */
    gw_list_t h2_gone;     /* h2s_t closed by the session, told to the proxy when kicked */
    unsigned h2_rst_after; /* streams with rst_after set */
    char peer[64];         /* "ip:port", "[ip6]:port" (client streams point here) */
    char peer_ip[48];
} busy_t;

/* One client connection. Kept small: it is what an idle connection costs (with the HTTP/2
 * session and, over TLS, OpenSSL's state); everything else hangs off it while needed. */
struct conn {
    uv_tcp_t tcp;
    gw_theap_node_t tnode; /* the connection's timeout in the worker's heap (TK_CONN) */
    uint64_t deadline;     /* loop time the current timeout is due (the node may be earlier) */
    gw_listener_t *l;
    gw_list_t link;
    gw_list_t dirty_link; /* in w->dirty while deferred work is due */
    uint8_t state;        /* conn_state_t */
    uint8_t dirty;
    uint16_t flags;
    unsigned requests;
    gw_tls_conn_t *tls;
    busy_t *b;     /* NULL while idle */
    h1x_t *h1;     /* CS_H1 (and CS_CLOSING after it) */
    thr_t *thr;    /* NULL without throttling */
    size_t queued; /* bytes handed to uv_write and not yet written */
    gw_h2_session_t *h2;
    uint64_t last_active_ms; /* HTTP/2: last time a stream was open or a frame arrived */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr; /* the peer (family 0 when unknown) */
};

/* The worker of a connection: its loop is embedded in the worker. */
#define W(c) GW_CONTAINER_OF((c)->tcp.loop, gw_worker_t, loop)

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
static const char *conn_peer(const conn_t *c)
{
    static _Thread_local char peer[64];
    char ip[48];
    if (c->b)
        return c->b->peer;
    format_peer(c, peer, sizeof(peer), ip, sizeof(ip));
    return peer;
}
#define PEER(c) conn_peer(c)

static size_t in_len(const conn_t *c)
{
    return c->b ? c->b->in.len : 0;
}

static size_t out_len(const conn_t *c)
{
    return c->b ? c->b->out.len : 0;
}

/* The busy state, created when a connection gets work after being idle. 0 or GW_E_NOMEM. */
static int need_busy(conn_t *c)
{
    if (c->b)
        return 0;
    busy_t *b = gw_calloc(1, sizeof(*b));
    if (!b)
        return GW_E_NOMEM;
    /* pending input is at most one incomplete head (else 431) plus one read while paused */
    gw_bytes_init(&b->in, W(c)->srv->cfg->limits.max_request_head + GW_FRONT_READ_BUF + 16384);
    gw_bytes_init(&b->out, 0);
    gw_iovq_init(&b->oq);
    gw_list_init(&b->h2_streams);
    gw_list_init(&b->h2_gone);
    format_peer(c, b->peer, sizeof(b->peer), b->peer_ip, sizeof(b->peer_ip));
    c->b = b;
    atomic_fetch_add_explicit(&W(c)->busy, 1, memory_order_relaxed);
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
}

/* An HTTP/2 stream as a client stream. */
typedef struct {
    gw_cstream_t cs;
    conn_t *c;
    uint32_t sid;
    int gone;        /* closed by the session: ops are no-ops until the proxy is told */
    int rst_after;   /* RST_STREAM(NO_ERROR) once the response is framed (early response) */
    gw_list_t link;  /* in c->b->h2_streams, then c->b->h2_gone */
    gw_bucket_t *rb; /* its route's bucket on this connection, or NULL */
    size_t given;    /* stream data budget handed to the session */
    size_t owed;     /* request body bytes passed on, window credit held back (upload rate) */
} h2s_t;

#define H2S_FREE_KEEP 512 /* h2s_t kept on a worker's freelist */

typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    uint8_t data[];
} wreq_t;

static void conn_close(conn_t *c, const char *why);
static void process(conn_t *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void h2_pump(conn_t *c);
static int flush(conn_t *c);

/* ---- deferred work ------------------------------------------------------------------------ */

/* Ask for conn_deferred() on the next loop iteration. */
static void kick(conn_t *c)
{
    if (c->dirty || (c->flags & GW_CONN_F_CLOSED))
        return;
    c->dirty = 1;
    gw_list_push_back(&W(c)->dirty, &c->dirty_link);
    if (!uv_is_active((uv_handle_t *)&W(c)->kick))
        uv_idle_start(&W(c)->kick, gw_front__on_kick);
}

static void h2_tell_gone(conn_t *c)
{
    if (!c->b)
        return;
    while (!gw_list_empty(&c->b->h2_gone)) {
        h2s_t *x = GW_CONTAINER_OF(c->b->h2_gone.next, h2s_t, link);
        gw_list_remove(&x->link);
        gw_proxy_stream_closed(W(c)->proxy, &x->cs);
        gw_h2_session_stream_release(c->h2, x->sid); /* nothing of ours runs for it any more */
        gw_pool_put(&W(c)->h2s_pool, x);
    }
}

static void conn_deferred(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_H2) {
        h2_tell_gone(c);
        h2_pump(c);
    } else if (c->state == CS_H1) {
        if (out_len(c) && flush(c) < 0) {
            conn_close(c, "write_error");
            return;
        }
        process(c);
    }
}

void gw_front__on_kick(uv_idle_t *h)
{
    gw_worker_t *w = GW_CONTAINER_OF(h, gw_worker_t, kick);
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

/* ---- timers -------------------------------------------------------------------------------- */

static void on_timeout(conn_t *c);
static void h2_timeout(conn_t *c);
static void on_throttle(conn_t *c);
static void release_idle_buffers(conn_t *c);

/* A worker's connections share one libuv timer: each queues a 16-byte node in the worker's
 * heap (common/theap.h) instead of owning two uv_timer_t (152 bytes each). The loop timer is
 * armed for the earliest node; like the connection timeouts below it is re-armed lazily: a
 * node moved later, or removed, lets it fire early and re-arm for what is due next. Due times
 * are loop milliseconds (uv_now); a node never fires in the pass that queued it. */
static void on_ticker(uv_timer_t *t);

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
static void ticker_set(gw_worker_t *w, gw_theap_node_t *n, uint64_t due)
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
static int timer_nodes_add(gw_worker_t *w, int k)
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
            on_timeout(GW_CONTAINER_OF(n, conn_t, tnode));
        else
            on_throttle(GW_CONTAINER_OF(n, thr_t, tnode)->c);
    }
    ticker_rearm(w);
}

/* Lazy re-arming, as in back/conn.c: HTTP/2 re-arms after every send and most re-arms move
 * the deadline later; only an earlier one moves the node (a heap operation), a later one is
 * recorded and on_timeout re-arms for the rest. */
static void arm(conn_t *c, uint64_t ms)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    c->deadline = uv_now(&W(c)->loop) + ms;
    if (gw_theap_queued(&c->tnode) && c->tnode.due <= c->deadline)
        return;
    ticker_set(W(c), &c->tnode, c->deadline);
}

/* ---- throttle (issue 7) ------------------------------------------------------------------ */

/* Response bytes spend tokens of up to three buckets as they are emitted: the connection's
 * (throttle.response_rate), the client address's (throttle.per_client_rate, shared by every
 * connection of that client in every worker) and, per request, its route's on this connection
 * (routes[].response_rate). When one runs short the emitter stops — the bytes stay in the
 * HTTP/2 session or in c->b->out, both counted by ops->pending, so the proxy stops reading the
 * origin — and the connection's thr timer is armed for when a grain of tokens (16 KiB or a
 * hundredth of a second, bucket.h) is back: nothing sleeps, nothing spins. Uploads spend the
 * body bucket: HTTP/1.1 stops reading the socket, HTTP/2 holds back window credit. */

static uint64_t now_us(void)
{
    return gw_now_ns() / 1000;
}

/* Wake up in wait_us: at least 1 ms (libuv timers count ms; never a 0 ms timer). An earlier
 * wake-up already armed is kept. */
static void thr_arm(conn_t *c, uint64_t wait_us)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    uint64_t ms = (wait_us + 999) / 1000;
    if (ms == 0)
        ms = 1;
    uint64_t due = uv_now(&W(c)->loop) + ms;
    if (gw_theap_queued(&c->thr->tnode) && c->thr->tnode.due <= due)
        return;
    ticker_set(W(c), &c->thr->tnode, due);
}

/* Request body bytes are limited by throttle.request_body_rate. */
static int body_limited(const conn_t *c)
{
    return c->thr && gw_bucket_limited(&c->thr->body_b);
}

/* One local bucket's say in out_avail(): a is lowered to what b has, or to 0 when b has less
 * than its grain (or than `want`, when less is wanted), with *wait the time until it has. */
static void limit_by(gw_bucket_t *b, uint64_t now, size_t want, size_t *a, uint64_t *wait)
{
    if (!b || !gw_bucket_limited(b))
        return;
    uint64_t v = gw_bucket_avail(b, now);
    size_t g = gw_bucket_grain(b);
    if (g > want)
        g = want;
    if (v < g) {
        *a = 0;
        uint64_t w = gw_bucket_wait_us(b, g, now);
        if (w > *wait)
            *wait = w;
    } else if (v < *a) {
        *a = (size_t)v;
    }
}

/* Response bytes the connection may emit now (SIZE_MAX: unlimited), under the connection and
 * client buckets and rb (a route's, may be NULL). 0 with *wait > 0: wake up then. */
static size_t out_avail(conn_t *c, uint64_t now, size_t want, gw_bucket_t *rb, uint64_t *wait)
{
    size_t a = SIZE_MAX;
    *wait = 0;
    limit_by(&c->thr->resp_b, now, want, &a, wait);
    limit_by(rb, now, want, &a, wait);
    if (c->thr->client) {
        gw_bucket_table_t *t = W(c)->srv->clients;
        uint64_t v = gw_bucket_table_avail(t, c->thr->client, now);
        size_t g = gw_bucket_table_grain(c->thr->client);
        if (g > want)
            g = want;
        if (v < g) {
            a = 0;
            uint64_t w = gw_bucket_table_wait_us(t, c->thr->client, g, now);
            if (w > *wait)
                *wait = w;
        } else if (v < a) {
            a = (size_t)v;
        }
    }
    return a;
}

/* n response bytes were emitted. The client bucket may go into debt when another connection of
 * the same client spent it meanwhile (another worker): the debt is paid before the next
 * grant, so the long-run rate holds. */
static void out_charge(conn_t *c, size_t n, gw_bucket_t *rb, uint64_t now)
{
    if (!n)
        return;
    gw_bucket_spend(&c->thr->resp_b, n, now);
    if (rb)
        gw_bucket_spend(rb, n, now);
    if (c->thr->client)
        gw_bucket_table_spend(W(c)->srv->clients, c->thr->client, n, now);
}

/* The connection's bucket for route r, or NULL when r has no response_rate (or no memory for
 * the table: then the route is not throttled on this connection). */
static gw_bucket_t *route_bucket(conn_t *c, const gw_cfg_route_t *r)
{
    const gw_config_t *cfg = W(c)->srv->cfg;
    if (!r || !r->response_rate)
        return NULL;
    if (!c->thr->route_b &&
        !(c->thr->route_b = gw_calloc(cfg->routes_len, sizeof(*c->thr->route_b))))
        return NULL;
    gw_bucket_t *b = &c->thr->route_b[r - cfg->routes];
    if (!gw_bucket_limited(b))
        gw_bucket_init(b, r->response_rate, 0, now_us());
    return b;
}

/* How long the throttled tail of c->b->out takes at the slowest configured rate (for the close
 * deadline of a finishing connection). */
static uint64_t tail_ms(conn_t *c)
{
    uint64_t rate = UINT64_MAX;
    if (!c->thr || !c->b)
        return 0;
    if (c->thr->resp_b.rate)
        rate = c->thr->resp_b.rate;
    if (c->thr->client && W(c)->srv->cfg->throttle.per_client_rate < rate)
        rate = W(c)->srv->cfg->throttle.per_client_rate;
    if (c->h1 && c->h1->rb && c->h1->rb->rate < rate)
        rate = c->h1->rb->rate;
    return rate == UINT64_MAX || !c->b->out.len ? 0 : (uint64_t)c->b->out.len * 1000 / rate + 1;
}

/* ---- write path -------------------------------------------------------------------------- */

/* The write queue is over limits.write_buffer: stop reading this client until it drains, so
 * a peer that does not read cannot make us buffer without bound. The flag says why. */
static void pause_reads(conn_t *c)
{
    if (c->flags & GW_CONN_F_READ_PAUSED)
        return;
    c->flags |= GW_CONN_F_READ_PAUSED;
    GW_LOG_DEBUG("read_paused", "peer=%s reason=write_buffer queued=%zu", PEER(c), c->queued);
}

/* Bookkeeping after any write: the bound, close-after, resuming paused reads. */
static void after_write(conn_t *c, size_t len, int status)
{
    c->queued -= len;
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (status < 0) {
        conn_close(c, "write_error");
        return;
    }
    if (c->queued == 0 && out_len(c) == 0 && (c->flags & GW_CONN_F_CLOSE_AFTER)) {
        conn_close(c, "done");
        return;
    }
    size_t bound = W(c)->srv->cfg->limits.write_buffer;
    if ((c->flags & GW_CONN_F_READ_PAUSED) && c->queued < bound) {
        c->flags &= ~GW_CONN_F_READ_PAUSED;
        GW_LOG_DEBUG("read_resumed", "peer=%s queued=%zu", PEER(c), c->queued);
        process(c); /* requests waiting in c->b->in */
        if (c->flags & GW_CONN_F_CLOSED)
            return;
    }
    if (c->queued < bound) {
        if (c->state == CS_H1 && c->h1->active && !c->h1->resp_done)
            gw_proxy_writable(W(c)->proxy, &c->h1->s);
        else if (c->state == CS_H2 && c->h2 && gw_h2_session_want_write(c->h2))
            kick(c); /* frames held back while the socket was full */
    }
}

static void on_write(uv_write_t *req, int status)
{
    wreq_t *wr = GW_CONTAINER_OF(req, wreq_t, req);
    conn_t *c = wr->c;
    size_t len = wr->len;
    gw_free(wr);
    after_write(c, len, status);
}

/* A gathered write: frame headers and payload slices straight from the session's iovq, each
 * payload pinned (its rbuf referenced) until the write callback. */
typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    size_t n;
    gw_iovq_ent_t ents[];
} wvec_t;

static void on_writev(uv_write_t *req, int status)
{
    wvec_t *wv = GW_CONTAINER_OF(req, wvec_t, req);
    conn_t *c = wv->c;
    size_t len = wv->len;
    for (size_t i = 0; i < wv->n; i++)
        gw_rbuf_unref(wv->ents[i].pin);
    gw_free(wv);
    after_write(c, len, status);
}

#define WRITEV_MAX 64

/* Write what the socket takes now, without a write request: a uv_write that completes at
 * once still costs an allocation here and an epoll_ctl in libuv (the POLLOUT watcher is
 * re-armed on drain). Returns the bytes written (0 when the socket is full, a write is
 * already queued, or it failed: the queued path then reports the error from its callback). */
static size_t try_write(conn_t *c, const uv_buf_t *bufs, size_t n)
{
    int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)n);
    return w > 0 ? (size_t)w : 0;
}

static int send_iovq(conn_t *c, gw_iovq_t *q)
{
    if (q->count && c->queued == 0) {
        struct iovec iov[WRITEV_MAX];
        uv_buf_t bufs[WRITEV_MAX];
        size_t k = gw_iovq_peek(q, iov, WRITEV_MAX);
        for (size_t i = 0; i < k; i++)
            bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
        gw_iovq_consume(q, try_write(c, bufs, k));
    }
    while (q->count) {
        wvec_t *wv = gw_malloc(sizeof(*wv) + WRITEV_MAX * sizeof(gw_iovq_ent_t));
        if (!wv)
            return GW_E_NOMEM;
        wv->c = c;
        wv->n = gw_iovq_take(q, wv->ents, WRITEV_MAX);
        wv->len = 0;
        uv_buf_t bufs[WRITEV_MAX];
        for (size_t i = 0; i < wv->n; i++) {
            bufs[i] = uv_buf_init(wv->ents[i].iov.iov_base, (unsigned)wv->ents[i].iov.iov_len);
            wv->len += wv->ents[i].iov.iov_len;
        }
        if (uv_write(&wv->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)wv->n, on_writev) < 0) {
            for (size_t i = 0; i < wv->n; i++)
                gw_rbuf_unref(wv->ents[i].pin);
            gw_free(wv);
            return GW_E_IO;
        }
        c->queued += wv->len;
    }
    if (c->queued >= W(c)->srv->cfg->limits.write_buffer)
        pause_reads(c);
    return 0;
}

static int send_raw(conn_t *c, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    if (c->queued == 0) {
        uv_buf_t b0 = uv_buf_init((char *)p, (unsigned)n);
        size_t done = try_write(c, &b0, 1);
        p = (const uint8_t *)p + done;
        n -= done;
        if (n == 0)
            return 0;
    }
    wreq_t *wr = gw_malloc(sizeof(*wr) + n);
    if (!wr)
        return GW_E_NOMEM;
    wr->c = c;
    wr->len = n;
    memcpy(wr->data, p, n);
    uv_buf_t b = uv_buf_init((char *)wr->data, (unsigned)n);
    if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
        gw_free(wr);
        return GW_E_IO;
    }
    c->queued += n;
    return 0;
}

/* Encrypt (if TLS) and send c->b->out; TLS handshake bytes are sent too. */
static int flush(conn_t *c)
{
    int rv = 0;
    size_t k = out_len(c);
    if (k && c->h1 && c->thr && c->thr->out) {
        /* HTTP/1.1 response bytes: as many as the buckets allow, the rest waits in c->b->out
         * (counted by h1s_pending, so the origin read pauses) for the throttle timer */
        uint64_t now = now_us(), wait;
        size_t a = out_avail(c, now, k, c->h1->rb, &wait);
        if (a < k)
            k = a;
        out_charge(c, k, c->h1->rb, now);
        if (k < c->b->out.len) {
            if (k)
                out_avail(c, now, c->b->out.len - k, c->h1->rb, &wait);
            c->flags |= GW_CONN_F_THR_OUT;
            thr_arm(c, wait ? wait : 1000);
        }
    }
    if (c->tls) {
        if (k && (rv = gw_tls_write(c->tls, c->b->out.base, k)) < 0)
            return rv;
        if (k)
            gw_bytes_consume(&c->b->out, k);
        /* records go out from the TLS sink's own buffer: the socket first, and only what it
         * did not take is copied into a write request */
        size_t n;
        const uint8_t *p = gw_tls_out_peek(c->tls, &n);
        rv = send_raw(c, p, n);
        gw_tls_out_consume(c->tls, n);
        if (rv < 0)
            return rv;
    } else if (k) {
        rv = send_raw(c, c->b->out.base, k);
        gw_bytes_consume(&c->b->out, k);
    }
    if (c->queued >= W(c)->srv->cfg->limits.write_buffer)
        pause_reads(c);
    return rv;
}

/* Close once everything queued is written. */
static void finish(conn_t *c, const char *why)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    GW_LOG_DEBUG("conn_finish", "peer=%s reason=%s", PEER(c), why);
    c->state = CS_CLOSING;
    c->flags |= GW_CONN_F_CLOSE_AFTER;
    if (c->tls)
        gw_tls_shutdown(c->tls);
    if (flush(c) < 0 || (c->queued == 0 && out_len(c) == 0))
        conn_close(c, why);
    else
        arm(c, 5000 + tail_ms(c)); /* a peer that never reads our last bytes */
}

/* ---- close ------------------------------------------------------------------------------- */

static void on_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    gw_worker_t *w = W(c);
    if (c->h1 && c->h1->active) {
        c->h1->active = 0;
        gw_proxy_stream_closed(w->proxy, &c->h1->s);
    }
    if (c->b)
        gw_list_foreach_safe(it, tmp, &c->b->h2_gone)
        {
            h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
            gw_proxy_stream_closed(w->proxy, &x->cs);
            gw_pool_put(&w->h2s_pool, x);
        }
    gw_tls_conn_del(c->tls);
    if (c->h1) {
        gw_h1_parser_del(c->h1->p);
        gw_free(c->h1->fields);
        gw_free(c->h1);
    }
    gw_h2_session_del(c->h2); /* on_close does not fire: our stream objects go here */
    if (c->b)
        gw_list_foreach_safe(it, tmp, &c->b->h2_streams)
        {
            h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
            gw_proxy_stream_closed(w->proxy, &x->cs);
            gw_pool_put(&w->h2s_pool, x);
        }
    drop_busy(c);
    timer_nodes_add(w, -1);
    if (c->thr) {
        gw_bucket_table_release(w->srv->clients, c->thr->client);
        gw_free(c->thr->route_b);
        gw_free(c->thr);
        timer_nodes_add(w, -1);
    }
    gw_free(c);
    gw_front__worker_conn_gone(w);
}

static void conn_close(conn_t *c, const char *why)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    c->flags |= GW_CONN_F_CLOSED;
    if (c->h2) {
        /* abuse limits the peer hit, for the logs (issue 3: every cap is counted) */
        gw_h2_stats_t st = gw_h2_session_stats(c->h2);
        uint64_t hits = st.reset_budget_hits + st.control_flood_hits + st.empty_frame_hits +
                        st.queued_control_hits + st.header_list_hits + st.header_block_hits +
                        st.max_requests_hits + st.settings_timeouts + st.priority_evictions;
        if (hits || st.malformed_requests || st.streams_refused)
            GW_LOG_INFO(
                "h2_limits",
                "peer=%s streams=%llu refused=%llu malformed=%llu resets_in=%llu "
                "resets_provoked=%llu rapid_reset=%llu control_flood=%llu "
                "empty_frames=%llu queued_control=%llu header_list=%llu "
                "header_block=%llu max_requests=%llu settings_timeout=%llu "
                "priority_evictions=%llu",
                PEER(c), (unsigned long long)st.streams_opened,
                (unsigned long long)st.streams_refused, (unsigned long long)st.malformed_requests,
                (unsigned long long)st.resets_received, (unsigned long long)st.resets_provoked,
                (unsigned long long)st.reset_budget_hits, (unsigned long long)st.control_flood_hits,
                (unsigned long long)st.empty_frame_hits, (unsigned long long)st.queued_control_hits,
                (unsigned long long)st.header_list_hits, (unsigned long long)st.header_block_hits,
                (unsigned long long)st.max_requests_hits, (unsigned long long)st.settings_timeouts,
                (unsigned long long)st.priority_evictions);
    }
    GW_LOG_DEBUG("conn_close", "peer=%s state=%s reason=%s requests=%u", PEER(c),
                 conn_state_str(c->state), why, c->requests);
    gw_list_remove(&c->link);
    if (c->dirty) {
        gw_list_remove(&c->dirty_link);
        c->dirty = 0;
    }
    W(c)->conns_len--;
    gw_theap_remove(&W(c)->timers, &c->tnode);
    if (c->thr)
        gw_theap_remove(&W(c)->timers, &c->thr->tnode);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_timeout(conn_t *c)
{
    uint64_t now = uv_now(&W(c)->loop);
    if (now < c->deadline) { /* fired for an older, earlier deadline */
        ticker_set(W(c), &c->tnode, c->deadline);
        return;
    }
    switch (c->state) {
    case CS_HANDSHAKE:
        GW_LOG_INFO("timeout", "peer=%s kind=handshake", PEER(c));
        conn_close(c, "handshake_timeout");
        return;
    case CS_SNIFF:
        GW_LOG_INFO("timeout", "peer=%s kind=first_request", PEER(c));
        conn_close(c, "first_request_timeout");
        return;
    case CS_H1:
        if (c->h1->active && !c->h1->resp_done) {
            /* the origin side runs its own timeouts, and the proxy resets stalled clients */
            arm(c, W(c)->srv->cfg->timeouts.idle_ms);
        } else if (gw_h1_parser_in_message(c->h1->p) && !gw_h1_parser_paused(c->h1->p)) {
            /* RFC 9110 §15.5.9: 408 for a request that did not complete in time */
            GW_LOG_INFO("timeout", "peer=%s kind=header", PEER(c));
            if (need_busy(c) < 0) {
                conn_close(c, "nomem");
                return;
            }
            gw_h1_simple_response(&c->b->out, 408, "h2gate: request not completed in time\n", 0, 0);
            finish(c, "header_timeout");
        } else {
            GW_LOG_DEBUG("timeout", "peer=%s kind=idle", PEER(c));
            conn_close(c, "idle_timeout");
        }
        return;
    case CS_H2:
        h2_timeout(c);
        return;
    case CS_CLOSING:
        conn_close(c, "close_timeout");
        return;
    }
}

/* ---- HTTP/1.1 front ------------------------------------------------------------------------ */

static int h1s_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n,
                       int64_t content_length, int end_stream)
{
    conn_t *c = s->impl;
    if (c->flags & GW_CONN_F_STOPPING)
        c->h1->keep_alive = 0; /* graceful stop: this is the connection's last response */
    /* RFC 9110 §15.5.9: a 408 means the server closes rather than wait on: say so */
    if (status == 408)
        c->h1->keep_alive = 0;
    int64_t framing = end_stream && content_length < 0 ? 0 : content_length;
    if (c->h1->http10 && framing < 0) {
        /* RFC 9112 §6.1, §7: an HTTP/1.0 recipient knows no chunked coding; the body is
         * delimited by the close (issue 18.11) */
        framing = GW_H1_CLOSE_DELIMITED;
        c->h1->keep_alive = 0;
    }
    c->h1->resp_chunked = framing == -1 && !s->head_only;
    c->h1->resp_started = 1;
    int rv = gw_h1_response_head(&c->b->out, status, f, n, framing, c->h1->keep_alive);
    if (rv < 0)
        return rv;
    if (end_stream)
        c->h1->resp_done = 1;
    kick(c); /* the head goes out with the first body bytes, or from the kick */
    return 0;
}

static int h1s_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    conn_t *c = s->impl;
    /* RFC 9110 §15.2: no 1xx to an HTTP/1.0 client (an HTTP/1.0 intermediary could take the
     * 103 for the answer to its request): dropped (issue 18.11) */
    if (c->h1->http10)
        return 0;
    /* A 1xx head carries no framing (RFC 9110 §15.2); keep_alive only adds no close line. */
    int rv = gw_h1_response_head(&c->b->out, status, f, n, -1, 1);
    return rv < 0 ? rv : flush(c);
}

static int h1s_body(gw_cstream_t *s, gw_rbuf_t *b, size_t off, size_t len, int end_stream)
{
    conn_t *c = s->impl;
    int rv = 0;
    if (!s->head_only && len) {
        if (c->h1->resp_chunked) {
            uint8_t hdr[GW_H1_CHUNK_HEAD_MAX];
            rv = gw_bytes_append(&c->b->out, hdr, gw_h1_chunk_head(hdr, len));
        }
        if (rv == 0)
            rv = gw_bytes_append(&c->b->out, b->data + off, len);
        if (rv == 0 && c->h1->resp_chunked)
            rv = gw_bytes_append(&c->b->out, GW_H1_CHUNK_END, GW_H1_CHUNK_END_LEN);
    }
    if (rv == 0 && end_stream && c->h1->resp_chunked)
        rv = gw_h1_last_chunk(&c->b->out, NULL, 0);
    if (rv < 0)
        return rv;
    if (end_stream) {
        c->h1->resp_done = 1;
        kick(c);
    }
    return flush(c);
}

/* RFC 9112 §7.1.2: trailer fields after the last chunk; dropped when the body had a length. */
static int h1s_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    conn_t *c = s->impl;
    int rv = 0;
    if (c->h1->resp_chunked)
        rv = gw_h1_last_chunk(&c->b->out, f, n);
    if (rv < 0)
        return rv;
    c->h1->resp_done = 1;
    kick(c);
    return flush(c);
}

/* HTTP/1.1 has no stream reset: what was answered is flushed and the connection closes (a
 * response cut short shows as a short body or a missing last chunk). */
static void h1s_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    conn_t *c = s->impl;
    GW_LOG_DEBUG("h1_reset", "peer=%s code=%d", PEER(c), (int)code);
    c->h1->keep_alive = 0;
    finish(c, code == GW_CS_RESET_NO_ERROR ? "early_response" : "stream_reset");
}

static void h1s_credit(gw_cstream_t *s, size_t n)
{
    conn_t *c = s->impl;
    int was_full = c->h1->inflight >= W(c)->srv->cfg->limits.body_buffer;
    c->h1->inflight -= n;
    if (was_full && c->h1->inflight < W(c)->srv->cfg->limits.body_buffer)
        kick(c); /* parse the body bytes waiting in c->b->in */
}

static size_t h1s_pending(gw_cstream_t *s)
{
    conn_t *c = s->impl;
    return c->queued + out_len(c);
}

static const gw_cstream_ops_t h1s_ops = {h1s_respond, h1s_interim, h1s_body,   h1s_trailers,
                                         h1s_reset,   h1s_credit,  h1s_pending};

static int h1_on_head(void *ud, const gw_h1_msg_t *m)
{
    conn_t *c = ud;
    c->requests++;
    c->h1->keep_alive = (m->flags & GW_H1_MSG_F_KEEP_ALIVE) && !(c->flags & GW_CONN_F_STOPPING);
    c->h1->http10 = m->version_major == 1 && m->version_minor == 0;
    /* RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored */
    c->h1->expect_100 = (m->flags & GW_H1_MSG_F_EXPECT_100) && !c->h1->http10;
    c->h1->resp_done = 0;
    c->h1->resp_started = 0;
    c->h1->req_complete = 0;
    c->h1->inflight = 0;
    if (m->fields_len > c->h1->fields_cap) {
        gw_field_t *n = gw_realloc(c->h1->fields, m->fields_len * sizeof(*n));
        if (!n)
            return GW_E_NOMEM;
        c->h1->fields = n;
        c->h1->fields_cap = m->fields_len;
    }
    if (m->fields_len) /* an HTTP/1.0 request may have none: no memcpy from NULL */
        memcpy(c->h1->fields, m->fields, m->fields_len * sizeof(gw_field_t));
    const gw_h1_field_t *host = gw_h1_msg_field(m, "host");
    gw_req_head_t h = {
        .method = m->method,
        .scheme = c->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http"),
        .authority = host ? host->value : (gw_slice_t){0},
        .path = m->target,
        .fields = c->h1->fields,
        .fields_len = m->fields_len,
        .content_length = m->content_length,
        .end_stream = m->content_length == 0,
        .proto = "http/1.1",
    };
    c->h1->s = (gw_cstream_t){.ops = &h1s_ops,
                              .impl = c,
                              .peer = c->b->peer,
                              .peer_ip = c->b->peer_ip,
                              .addr = (const struct sockaddr *)&c->addr,
                              .head_only = gw_slice_eq(m->method, GW_SLICE_LIT("HEAD")),
                              .tls = c->tls != NULL};
    c->h1->rb = W(c)->srv->route_rates
                    ? route_bucket(c, gw_proxy_route(W(c)->proxy, h.authority, h.path))
                    : NULL;
    /* RFC 9110 §10.1.1: the body is wanted, so say so before the client waits for it */
    if (c->h1->expect_100 && !h.end_stream && gw_h1_continue(&c->b->out) < 0)
        return GW_E_NOMEM;
    /* the head is complete: the body has its own (idle) deadline */
    arm(c, W(c)->srv->cfg->timeouts.idle_ms);
    c->h1->active = 1;
    return gw_proxy_request(W(c)->proxy, &c->h1->s, &h);
}

static int h1_on_body(void *ud, const uint8_t *p, size_t n)
{
    conn_t *c = ud;
    c->h1->inflight += n;
    gw_proxy_body(W(c)->proxy, &c->h1->s, p, n);
    return 0;
}

static int h1_on_complete(void *ud)
{
    conn_t *c = ud;
    c->h1->req_complete = 1;
    if (c->h1->active)
        gw_proxy_body_end(W(c)->proxy, &c->h1->s, NULL, 0);
    return 0;
}

static const gw_h1_callbacks_t h1_cbs = {h1_on_head, h1_on_body, h1_on_complete};

/* Parse what is in c->b->in, one request at a time: the next request is read only once the
 * current one is answered, and request body bytes only while the proxy holds less than
 * limits.body_buffer of them. */
static void process_h1(conn_t *c)
{
    size_t body_bound = W(c)->srv->cfg->limits.body_buffer;
    while (!(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER | GW_CONN_F_READ_PAUSED))) {
        if (c->h1->active && c->h1->resp_done && c->h1->req_complete) {
            c->h1->active = 0;
            gw_proxy_stream_closed(W(c)->proxy, &c->h1->s);
        }
        if (gw_h1_parser_paused(c->h1->p)) {
            if (c->h1->active)
                break; /* the response is still coming */
            /* one request done; a graceful stop ends the connection here */
            if (!c->h1->keep_alive || (c->flags & GW_CONN_F_STOPPING)) {
                finish(c, "connection_close");
                return;
            }
            gw_h1_parser_resume(c->h1->p);
            arm(c, W(c)->srv->cfg->timeouts.idle_ms);
        }
        if (in_len(c) == 0 || c->h1->inflight >= body_bound)
            break;
        int was_idle = !gw_h1_parser_in_message(c->h1->p);
        size_t feed = c->b->in.len;
        ssize_t n = gw_h1_parser_feed(c->h1->p, c->b->in.base, feed);
        if (n < 0) {
            unsigned st = gw_h1_parser_error_status(c->h1->p);
            GW_LOG_INFO("bad_request", "peer=%s status=%u reason=\"%s\"", PEER(c), st,
                        gw_h1_parser_error_reason(c->h1->p));
            if (n != GW_E_NOMEM && st != 500 && !c->h1->resp_started) {
                char body[160];
                snprintf(body, sizeof(body), "h2gate: %s\n", gw_h1_parser_error_reason(c->h1->p));
                gw_h1_simple_response(&c->b->out, st, body, 0, 0);
            }
            finish(c, "bad_request");
            return;
        }
        gw_bytes_consume(&c->b->in, (size_t)n);
        if (was_idle && gw_h1_parser_in_message(c->h1->p) && !gw_h1_parser_paused(c->h1->p) &&
            !c->h1->active)
            arm(c, W(c)->srv->cfg->timeouts.header_ms); /* whole-head deadline (slowloris) */
        if (!gw_h1_parser_paused(c->h1->p) && n == 0)
            break; /* need more input */
    }
    /* the peer closed its side: complete requests were answered above; a partial one never
     * completes */
    if ((c->flags & GW_CONN_F_EOF) && !(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER)) &&
        !(c->flags & GW_CONN_F_READ_PAUSED) && !(c->h1->active && !c->h1->resp_done))
        finish(c, "peer_closed");
}

/* ---- HTTP/2 ------------------------------------------------------------------------------ */

static void h2_pump(conn_t *c);
static int flush(conn_t *c);

/* RFC 9218 §8: the origin's `priority` response field re-prioritises the stream; the
 * parameters it names override the client's, the others stay. The field is still forwarded. */
static void h2s_response_priority(h2s_t *x, const gw_field_t *f, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!gw_slice_eq(f[k].name, GW_SLICE_LIT("priority")))
            continue;
        uint8_t u, inc;
        int found = gw_h2_priority_parse(f[k].value, &u, &inc);
        if (found)
            (void)gw_h2_session_set_priority(x->c->h2, x->sid,
                                             found & GW_H2_PRIO_F_URGENCY ? (int)u : -1,
                                             found & GW_H2_PRIO_F_INCREMENTAL ? (int)inc : -1);
    }
}

static int h2s_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n,
                       int64_t content_length, int end_stream)
{
    h2s_t *x = (h2s_t *)s;
    gw_field_t fields[130];
    char len[24];
    if (x->gone)
        return 0;
    if (n + 1 > sizeof(fields) / sizeof(fields[0]))
        return GW_E_LIMIT;
    memcpy(fields, f, n * sizeof(*f));
    if (content_length >= 0) {
        size_t ll = gw_fmt_u64(len, (uint64_t)content_length);
        fields[n++] = (gw_field_t){GW_SLICE_LIT("content-length"), {(const uint8_t *)len, ll}};
    }
    h2s_response_priority(x, fields, n);
    int rv = gw_h2_session_submit_response(x->c->h2, x->sid, status, fields, n, end_stream);
    kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    int rv = gw_h2_session_submit_response(x->c->h2, x->sid, status, f, n, 0);
    kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_body(gw_cstream_t *s, gw_rbuf_t *b, size_t off, size_t len, int end_stream)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    int rv = gw_h2_session_submit_data(x->c->h2, x->sid, b, off, len, end_stream);
    kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    int rv = gw_h2_session_submit_trailers(x->c->h2, x->sid, f, n);
    kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

/* gw_cs_reset_t values are the RFC 9113 §7 codes */
static void h2s_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return;
    if (code == GW_CS_RESET_NO_ERROR) {
        /* the response is complete but may still be queued: a reset now would drop it
         * (RFC 9113 §8.1 wants the whole response, then the reset) */
        if (!x->rst_after) {
            x->rst_after = 1;
            x->c->b->h2_rst_after++;
        }
    } else {
        gw_h2_session_submit_rst(x->c->h2, x->sid, (uint32_t)code); /* on_close: deferred */
    }
    kick(x->c);
}

static void h2_credit_release(conn_t *c, uint64_t now);

static void h2s_credit(gw_cstream_t *s, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (!x->gone && body_limited(x->c)) {
        x->owed += n; /* the window reopens at the upload rate */
        h2_credit_release(x->c, now_us());
        return;
    }
    /* a closed stream's bytes were credited to the connection when it closed */
    if (x->gone || gw_h2_session_consume(x->c->h2, x->sid, n) < 0)
        return;
    if (gw_h2_session_want_write(x->c->h2))
        kick(x->c);
}

static size_t h2s_pending(gw_cstream_t *s)
{
    h2s_t *x = (h2s_t *)s;
    return x->gone ? 0 : gw_h2_session_stream_queued(x->c->h2, x->sid);
}

static int h2s_urgency(gw_cstream_t *s)
{
    h2s_t *x = (h2s_t *)s;
    uint8_t u;
    int inc;
    if (x->gone || gw_h2_session_get_priority(x->c->h2, x->sid, &u, &inc) < 0)
        return GW_H2_PRIO_DEFAULT_URGENCY;
    return u;
}

static const gw_cstream_ops_t h2s_ops = {h2s_respond, h2s_interim, h2s_body,    h2s_trailers,
                                         h2s_reset,   h2s_credit,  h2s_pending, h2s_urgency};

static int h2_on_request(void *ud, const gw_h2_head_t *h)
{
    conn_t *c = ud;
    c->requests++;
    h2s_t *x = gw_pool_get(&W(c)->h2s_pool);
    if (!x)
        return GW_E_NOMEM;
    x->c = c;
    x->sid = h->stream_id;
    x->given = SIZE_MAX;
    if (W(c)->srv->route_rates)
        x->rb = route_bucket(c, gw_proxy_route(W(c)->proxy, h->authority, h->path));
    gw_list_push_back(&c->b->h2_streams, &x->link);
    x->cs = (gw_cstream_t){.ops = &h2s_ops,
                           .impl = x,
                           .peer = c->b->peer,
                           .peer_ip = c->b->peer_ip,
                           .addr = (const struct sockaddr *)&c->addr,
                           .head_only = gw_slice_eq(h->method, GW_SLICE_LIT("HEAD")),
                           .tls = c->tls != NULL};
    if (gw_h2_session_set_stream_data(c->h2, h->stream_id, x) < 0) {
        gw_list_remove(&x->link);
        gw_pool_put(&W(c)->h2s_pool, x);
        return GW_E_NOMEM;
    }
    gw_req_head_t rh = {
        .method = h->method,
        .scheme = h->scheme,
        .authority = h->authority,
        .path = h->path,
        .fields = h->headers,
        .fields_len = h->headers_len,
        .content_length = h->content_length,
        .end_stream = h->end_stream,
        .proto = "h2",
    };
    int rv = gw_proxy_request(W(c)->proxy, &x->cs, &rh);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2_on_data(void *ud, uint32_t sid, const uint8_t *data, size_t len)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    /* window returned by the proxy (ops->credit) only for what it passed on: hop-by-hop flow
     * control */
    if (x && !x->gone)
        gw_proxy_body(W(c)->proxy, &x->cs, data, len);
    else
        gw_h2_session_consume(c->h2, sid, len);
    return 0;
}

static int h2_on_trailers(void *ud, uint32_t sid, const gw_h2_header_t *h, size_t n)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_body_end(W(c)->proxy, &x->cs, h, n);
    return 0;
}

static int h2_on_end_stream(void *ud, uint32_t sid)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_body_end(W(c)->proxy, &x->cs, NULL, 0);
    return 0;
}

static void h2_on_writable(void *ud, uint32_t sid)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_writable(W(c)->proxy, &x->cs);
}

/* PRIORITY_UPDATE (applied by the session already) or a request's priority field (before
 * the proxy knows the stream: nothing to do) */
static void h2_on_priority(void *ud, uint32_t sid, gw_slice_t value)
{
    conn_t *c = ud;
    (void)value;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_reprioritize(W(c)->proxy, &x->cs);
}

/* The session closed a stream, possibly from inside an op the proxy called: the proxy is told
 * from the kick handle. */
static void h2_on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    conn_t *c = ud;
    (void)code, (void)by_peer;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone) {
        x->gone = 1;
        if (x->rst_after) {
            x->rst_after = 0;
            c->b->h2_rst_after--;
        }
        gw_list_remove(&x->link);
        gw_list_push_back(&c->b->h2_gone, &x->link);
        kick(c);
    } else if (!x) {
        gw_h2_session_stream_release(c->h2, sid);
    }
}

static const gw_h2_callbacks_t h2_cbs = {
    .on_request = h2_on_request,
    .on_data = h2_on_data,
    .on_trailers = h2_on_trailers,
    .on_end_stream = h2_on_end_stream,
    .on_close = h2_on_close,
    .on_writable = h2_on_writable,
    .on_priority = h2_on_priority,
};

static void h2_options(const gw_config_t *cfg, gw_h2_options_t *o)
{
    gw_h2_options_default(o);
    o->max_concurrent_streams = cfg->h2.max_concurrent_streams;
    o->initial_window_size = cfg->h2.initial_window_size;
    o->connection_window_size = cfg->h2.connection_window_size;
    o->max_frame_size = cfg->h2.max_frame_size;
    o->header_table_size = cfg->h2.header_table_size;
    o->max_header_list_size = cfg->h2.max_header_list_size;
    o->settings_timeout_ms = cfg->h2.settings_timeout_ms;
    o->max_requests_per_connection = cfg->h2.max_requests_per_connection;
    o->reset_budget = cfg->h2.reset_budget;
    o->reset_window_ms = cfg->h2.reset_window_ms;
    o->control_frame_budget = cfg->h2.control_frame_budget;
    o->empty_frame_budget = cfg->h2.empty_frame_budget;
    o->max_queued_control = cfg->h2.max_queued_control;
    o->max_priority_nodes = cfg->h2.max_priority_nodes;
}

static int start_h2(conn_t *c)
{
    gw_worker_t *w = W(c);
    int rv;
    if (!w->h2prof) {
        /* one copy of the options and callbacks for all of the worker's sessions */
        gw_h2_options_t o;
        h2_options(w->srv->cfg, &o);
        if ((rv = gw_h2_profile_new(&w->h2prof, &o, &h2_cbs)) < 0)
            return rv;
        /* h2s_t of closed streams are kept for the next ones (calloc and free were a tenth
         * of the allocator's cost per request) */
        gw_pool_init(&w->h2s_pool, sizeof(h2s_t), 0, H2S_FREE_KEEP);
    }
    c->last_active_ms = gw_now_ms();
    rv = gw_h2_session_new_with(&c->h2, w->h2prof, c, c->last_active_ms);
    if (rv < 0)
        return rv;
    c->state = CS_H2;
    return 0;
}

/* Arm the timer for the earlier of the session's own deadline and the idle timeout. */
static void h2_arm(conn_t *c)
{
    uint64_t now = gw_now_ms();
    uint64_t due = c->last_active_ms + W(c)->srv->cfg->timeouts.idle_ms;
    uint64_t sd = gw_h2_session_next_deadline(c->h2);
    if (sd < due)
        due = sd;
    /* Idle with its busy state still held (a response ended and no read came since): give it
     * back in a while rather than at the next read, which may not come before the idle
     * timeout. Not at once: a client sending one request after the other would make every
     * request allocate it again. */
    if (c->b && gw_h2_session_active_streams(c->h2) == 0 && now + H2_IDLE_RELEASE_MS < due)
        due = now + H2_IDLE_RELEASE_MS;
    arm(c, due > now ? due - now : 1);
}

/* ---- HTTP/2 throttle ------------------------------------------------------------------------ */

/* Before a send: the session may frame as many DATA bytes as the connection and client buckets
 * allow now, and each route-limited stream as many as its route's bucket allows. */
static void h2_budget(conn_t *c, uint64_t now)
{
    if (!c->thr || !c->thr->out)
        return;
    uint64_t w;
    c->thr->h2_given = out_avail(c, now, SIZE_MAX, NULL, &w);
    gw_h2_session_set_data_budget(c->h2, 0, c->thr->h2_given);
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->rb)
            continue;
        size_t a = SIZE_MAX;
        limit_by(x->rb, now, SIZE_MAX, &a, &w);
        x->given = a;
        gw_h2_session_set_data_budget(c->h2, x->sid, a);
    }
}

/* Charge the route buckets for what streams in list framed. Streams sharing a route each got
 * the whole balance, so the bucket may go into debt by a grain or so: paid back before the
 * next grant. */
static void h2_charge_streams(conn_t *c, gw_list_t *list, uint64_t now)
{
    gw_list_foreach(it, list)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->rb)
            continue;
        size_t left = gw_h2_session_data_budget(c->h2, x->sid);
        if (x->given != SIZE_MAX && x->given >= left)
            gw_bucket_spend(x->rb, x->given - left, now);
        x->given = left;
    }
}

/* After a send: charge what was framed, and arm the throttle timer when DATA is held back by
 * an empty budget. */
static void h2_charge(conn_t *c, uint64_t now)
{
    if (!c->thr || !c->thr->out)
        return;
    size_t left = gw_h2_session_data_budget(c->h2, 0);
    if (c->thr->h2_given != SIZE_MAX && c->thr->h2_given >= left)
        out_charge(c, c->thr->h2_given - left, NULL, now);
    c->thr->h2_given = left;
    h2_charge_streams(c, &c->b->h2_streams, now);
    h2_charge_streams(c, &c->b->h2_gone, now);
    uint64_t wait = UINT64_MAX;
    int queued = 0;
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        size_t q = gw_h2_session_stream_queued(c->h2, x->sid);
        if (!q)
            continue;
        queued = 1;
        if (x->rb && x->given == 0) {
            size_t g = gw_bucket_grain(x->rb);
            uint64_t w = gw_bucket_wait_us(x->rb, g < q ? g : q, now);
            if (w < wait)
                wait = w;
        }
    }
    if (queued && left == 0) {
        uint64_t w;
        if (out_avail(c, now, SIZE_MAX, NULL, &w) > 0 || w == 0)
            w = 1000; /* another worker spent the client's tokens meanwhile: look again */
        if (w < wait)
            wait = w;
    }
    if (wait != UINT64_MAX) {
        c->flags |= GW_CONN_F_THR_OUT;
        thr_arm(c, wait);
    }
}

/* Give back held window credit as the upload bucket allows. The peer may send only what our
 * windows allow (RFC 9113 §6.9), so once the initial windows are used up the upload runs at
 * the rate the credit is given back — reads go on, so PING, SETTINGS and WINDOW_UPDATE for
 * the downloads on the same connection are never held up. */
static void h2_credit_release(conn_t *c, uint64_t now)
{
    int any = 0;
    c->flags &= ~GW_CONN_F_THR_IN;
    if (!c->b)
        return; /* no streams */
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->owed)
            continue;
        uint64_t v = gw_bucket_avail(&c->thr->body_b, now);
        size_t g = gw_bucket_grain(&c->thr->body_b);
        if (g > x->owed)
            g = x->owed;
        size_t k = v < x->owed ? (size_t)v : x->owed;
        if (v >= g) {
            gw_bucket_spend(&c->thr->body_b, k, now);
            x->owed -= k;
            gw_h2_session_consume(c->h2, x->sid, k);
            any = 1;
        }
        if (x->owed) {
            size_t g2 = gw_bucket_grain(&c->thr->body_b);
            c->flags |= GW_CONN_F_THR_IN;
            thr_arm(c, gw_bucket_wait_us(&c->thr->body_b, g2 < x->owed ? g2 : x->owed, now));
            break;
        }
    }
    if (any && gw_h2_session_want_write(c->h2))
        kick(c); /* the WINDOW_UPDATEs */
}

/* The throttle timer: tokens are back. */
static void on_throttle(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    uint64_t now = now_us();
    c->flags &= ~GW_CONN_F_THR_OUT;
    if (c->flags & GW_CONN_F_THR_IN) {
        if (c->state == CS_H2) {
            h2_credit_release(c, now);
        } else {
            uint64_t w = gw_bucket_wait_us(&c->thr->body_b, gw_bucket_grain(&c->thr->body_b), now);
            if (w) {
                thr_arm(c, w);
            } else {
                c->flags &= ~GW_CONN_F_THR_IN;
                GW_LOG_DEBUG("read_resumed", "peer=%s reason=request_body_rate", PEER(c));
                process(c); /* reads start again */
            }
        }
    }
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_H2) {
        h2_pump(c);
    } else if (out_len(c)) {
        /* the held tail: a write the socket takes at once (try_write) has no callback, so the
         * bookkeeping of after_write (origin resume, close-after) runs here */
        if (flush(c) < 0)
            conn_close(c, "write_error");
        else
            after_write(c, 0, 0);
    }
}

/* Frame what the session has and write it (through TLS). 0 or a negative code. */
static int h2_send(conn_t *c)
{
    /* the socket is full: frames wait in the session (within the windows), not in our write
     * queue; after_write kicks when it drains */
    uint64_t tnow = now_us();
    h2_budget(c, tnow);
    ssize_t n =
        c->queued < W(c)->srv->cfg->limits.write_buffer ? gw_h2_session_send(c->h2, &c->b->oq) : 0;
    if (n >= 0 && c->b->h2_rst_after) {
        /* early responses whose last DATA is framed: now the RST_STREAM(NO_ERROR) */
        int any = 0;
        gw_list_foreach_safe(it, tmp, &c->b->h2_streams) /* the reset moves x to h2_gone */
        {
            h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
            if (x->rst_after &&
                gw_h2_session_stream_state(c->h2, x->sid) == GW_H2_SS_HALF_CLOSED_LOCAL) {
                x->rst_after = 0;
                c->b->h2_rst_after--;
                gw_h2_session_submit_rst(c->h2, x->sid, GW_H2_NO_ERROR);
                any = 1;
            }
        }
        if (any) {
            ssize_t m = gw_h2_session_send(c->h2, &c->b->oq);
            n = m < 0 ? m : n + m;
        }
    }
    h2_charge(c, tnow);
    int rv = 0;
    if (c->tls) {
        /* TLS encrypts into its own buffer anyway: feed it the iovecs in order */
        struct iovec v[64];
        size_t cnt;
        while (rv == 0 && (cnt = gw_iovq_peek(&c->b->oq, v, 64)) > 0) {
            size_t bytes = 0;
            for (size_t i = 0; i < cnt; i++)
                bytes += v[i].iov_len;
            rv = gw_tls_writev(c->tls, v, cnt);
            gw_iovq_consume(&c->b->oq, bytes);
        }
        if (rv == 0)
            rv = flush(c);
    } else {
        rv = flush(c); /* anything queued before keeps its place */
        if (rv == 0)
            rv = send_iovq(c, &c->b->oq);
    }
    return n < 0 ? (int)n : rv;
}

/* Session output → (TLS) → socket; then decide whether the connection is done. */
static void h2_pump(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    /* an idle connection (no busy state) with nothing to frame stays as small as it is, as
     * when its timer only re-arms */
    if (c->b || gw_h2_session_want_write(c->h2)) {
        if (need_busy(c) < 0 || h2_send(c) < 0) {
            conn_close(c, "h2_send_failed");
            return;
        }
    }
    /* streams the send just closed give their slot back now, before the peer's next
     * HEADERS can be read (else a fast client sees REFUSED_STREAM at the limit) */
    h2_tell_gone(c);
    if (gw_h2_session_active_streams(c->h2))
        c->last_active_ms = gw_now_ms();
    if (gw_h2_session_should_close(c->h2) ||
        ((c->flags & GW_CONN_F_STOPPING) && gw_h2_session_active_streams(c->h2) == 0)) {
        const char *reason = NULL;
        uint32_t code = gw_h2_session_goaway_code(c->h2, &reason);
        if (code)
            GW_LOG_INFO("h2_goaway", "peer=%s code=%u reason=\"%s\"", PEER(c), code,
                        reason ? reason : "");
        finish(c, code ? "h2_connection_error" : "h2_done");
        return;
    }
    h2_arm(c);
}

static void process_h2(conn_t *c)
{
    h2_tell_gone(c);
    if (in_len(c)) {
        ssize_t n = gw_h2_session_recv(c->h2, c->b->in.base, c->b->in.len, gw_now_ms());
        c->last_active_ms = gw_now_ms();
        /* on a connection error the session has queued its GOAWAY: send it, then close */
        gw_bytes_consume(&c->b->in, n < 0 ? c->b->in.len : (size_t)n);
    }
    h2_pump(c);
    if (!(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER)) && (c->flags & GW_CONN_F_EOF))
        finish(c, "peer_closed");
}

static void h2_timeout(conn_t *c)
{
    uint64_t now = gw_now_ms();
    gw_h2_session_tick(c->h2, now);
    release_idle_buffers(c); /* h2_arm's early wake-up for this, or any other timeout */
    if (gw_h2_session_active_streams(c->h2) == 0 &&
        now >= c->last_active_ms + W(c)->srv->cfg->timeouts.idle_ms) {
        GW_LOG_DEBUG("timeout", "peer=%s kind=idle proto=h2", PEER(c));
        gw_h2_session_shutdown(c->h2, 1);
        c->flags |= GW_CONN_F_STOPPING;
    }
    h2_pump(c);
}

/* ---- protocol choice ------------------------------------------------------------------------ */

static int is_tchar(uint8_t ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int start_h1(conn_t *c)
{
    gw_h1_limits_t lim = {W(c)->srv->cfg->limits.max_request_head, 256};
    c->h1 = gw_calloc(1, sizeof(*c->h1));
    if (!c->h1)
        return GW_E_NOMEM;
    c->h1->p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &h1_cbs, c);
    if (!c->h1->p)
        return GW_E_NOMEM; /* c->h1 goes with the connection */
    c->state = CS_H1;
    return 0;
}

static void sniff(conn_t *c)
{
    unsigned protos = c->l->cfg->protocols;
    size_t n = c->b->in.len < H2_PREFACE_LEN ? c->b->in.len : H2_PREFACE_LEN;
    if (n && memcmp(c->b->in.base, h2_preface, n) == 0) {
        if (n < H2_PREFACE_LEN)
            return; /* could still be the preface */
        if (protos & GW_PROTO_F_H2C) {
            if (start_h2(c) < 0) {
                conn_close(c, "nomem");
                return;
            }
            process_h2(c);
        } else {
            GW_LOG_INFO("protocol_refused", "peer=%s protocol=h2c", PEER(c));
            conn_close(c, "h2c_not_allowed");
        }
        return;
    }
    static const uint8_t goaway_proto[] = {0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (!(protos & GW_PROTO_F_HTTP1)) {
        /* an h2c-only listener: anything but the preface is a connection error
         * PROTOCOL_ERROR (RFC 9113 §3.4) */
        GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x", PEER(c), c->b->in.base[0]);
        gw_bytes_append(&c->b->out, goaway_proto, sizeof(goaway_proto));
        finish(c, "bad_preface");
        return;
    }
    /* RFC 9112 §3: request-line = method SP request-target SP HTTP-version; the method is a
     * token. Anything else on the first bytes closes the connection. */
    size_t i = 0;
    while (i < c->b->in.len && is_tchar(c->b->in.base[i]))
        i++;
    if (i == c->b->in.len && i < 32)
        return; /* still inside a plausible method */
    if (i == 0 || i >= 32 || c->b->in.base[i] != ' ') {
        GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x", PEER(c), c->b->in.base[0]);
        conn_close(c, "bad_preface");
        return;
    }
    /* Issue 19.4: only a request line whose version is HTTP/1.0 or HTTP/1.1 gets HTTP/1.1
     * answers (a 400 for what is malformed after it). Anything else is no HTTP/1.x client: it
     * cannot read an HTTP/1.1 400, and a broken HTTP/2 preface is a connection error (RFC 9113
     * §3.4): GOAWAY(PROTOCOL_ERROR) when the bytes begin like the preface ("PRI"), then close. A
     * line longer than a whole head goes to the HTTP/1.1 parser, which answers 431. */
    const uint8_t *nl = memchr(c->b->in.base, '\n', c->b->in.len);
    if (!nl && c->b->in.len < W(c)->srv->cfg->limits.max_request_head)
        return; /* the request line is not complete yet */
    if (nl) {
        size_t ll = (size_t)(nl - c->b->in.base);
        if (ll && nl[-1] == '\r')
            ll--;
        static const char v10[] = " HTTP/1.0", v11[] = " HTTP/1.1";
        size_t vl = sizeof(v10) - 1;
        const uint8_t *v = ll > vl ? c->b->in.base + ll - vl : NULL;
        if (!v || (memcmp(v, v10, vl) != 0 && memcmp(v, v11, vl) != 0)) {
            int like_h2 = c->b->in.len >= 3 && memcmp(c->b->in.base, h2_preface, 3) == 0;
            GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x not_http1=1 goaway=%d", PEER(c),
                        c->b->in.base[0], like_h2);
            if (like_h2)
                gw_bytes_append(&c->b->out, goaway_proto, sizeof(goaway_proto));
            finish(c, "bad_preface");
            return;
        }
    }
    if (start_h1(c) < 0) {
        conn_close(c, "nomem");
        return;
    }
    process_h1(c);
}

static void process(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_SNIFF && in_len(c))
        sniff(c);
    else if (c->state == CS_H1)
        process_h1(c);
    else if (c->state == CS_H2)
        process_h2(c);
    if (!(c->flags & GW_CONN_F_CLOSED)) {
        int want = !(c->flags & (GW_CONN_F_READ_PAUSED | GW_CONN_F_EOF | GW_CONN_F_CLOSE_AFTER));
        /* HTTP/1.1 over its request_body_rate: the socket waits for the throttle timer */
        if (want && c->state != CS_H2 && (c->flags & GW_CONN_F_THR_IN))
            want = 0;
        /* HTTP/1.1: nothing more is read while a response is awaited after a complete request
         * (pipelined requests wait in the kernel), or while the proxy holds a full body
         * buffer */
        if (want && c->state == CS_H1 &&
            ((c->h1->active && gw_h1_parser_paused(c->h1->p)) ||
             c->h1->inflight >= W(c)->srv->cfg->limits.body_buffer))
            want = 0;
        if (want && !uv_is_active((uv_handle_t *)&c->tcp))
            uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        else if (!want && uv_is_active((uv_handle_t *)&c->tcp))
            uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* ---- read path ------------------------------------------------------------------------------ */

/* An idle connection keeps no buffer and no busy state: the input buffer (16 KiB and up once a
 * TLS record was read), the output buffer, the frame queue (its last 4 KiB copy block and entry
 * ring), the stream lists and the peer strings go back when empty and nothing is in progress;
 * the HTTP/2 session gives back what it holds only for streams and header blocks. Memory per
 * idle connection is then conn_t, the session's connection state and, over TLS, OpenSSL's.
 * Busy connections keep theirs. Writes in flight hold their own copies and pins. */
static void release_idle_buffers(conn_t *c)
{
    int idle = (c->state == CS_H2 && gw_h2_session_active_streams(c->h2) == 0) ||
               (c->state == CS_H1 && !c->h1->active && !gw_h1_parser_in_message(c->h1->p));
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
        gw_list_empty(&b->h2_gone) && b->h2_rst_after == 0) {
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

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    buf->base = (char *)W(c)->readbuf;
    buf->len = sizeof(W(c)->readbuf);
}

static void after_handshake(conn_t *c)
{
    const char *alpn = gw_tls_alpn(c->tls);
    GW_LOG_DEBUG("tls_established", "peer=%s version=%s alpn=%s sni=%s", PEER(c),
                 gw_tls_version(c->tls), alpn[0] ? alpn : "-",
                 gw_tls_sni(c->tls) ? gw_tls_sni(c->tls) : "-");
    arm(c, W(c)->srv->cfg->timeouts.first_request_ms);
    if (!strcmp(alpn, "h2")) {
        if (start_h2(c) < 0) {
            conn_close(c, "nomem");
            return;
        }
        if (!gw_tls_h2_cipher_ok(c->tls)) {
            /* RFC 9113 §9.2.2: a blocklisted TLS 1.2 cipher → INADEQUATE_SECURITY */
            GW_LOG_INFO("h2_inadequate_security", "peer=%s cipher=%s", PEER(c),
                        gw_tls_cipher(c->tls));
            gw_h2_session_terminate(c->h2, GW_H2_INADEQUATE_SECURITY,
                                    "TLS 1.2 cipher not allowed for HTTP/2");
            h2_pump(c);
        }
        return;
    }
    if (!(c->l->cfg->protocols & GW_PROTO_F_HTTP1)) {
        conn_close(c, "no_protocol");
        return;
    }
    /* ALPN http/1.1, or no ALPN at all (RFC 7301: HTTP/1.1 is the default) */
    if (start_h1(c) < 0)
        conn_close(c, "nomem");
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread == UV_EOF) {
        c->flags |= GW_CONN_F_EOF;
        uv_read_stop(s);
        if (c->state == CS_H1 && !gw_h1_parser_in_message(c->h1->p) && in_len(c) == 0 &&
            c->queued == 0 && !c->h1->active)
            conn_close(c, "peer_closed");
        else if (c->state == CS_H2)
            conn_close(c, "peer_closed");
        else if (c->state != CS_H1 && c->state != CS_CLOSING)
            conn_close(c, "peer_closed");
        else if (c->state == CS_H1)
            process(c);
        return;
    }
    if (nread < 0) {
        conn_close(c, "read_error");
        return;
    }
    if (nread == 0 || c->state == CS_CLOSING)
        return;
    if (c->tls) {
        if (gw_tls_feed(c->tls, buf->base, (size_t)nread) < 0) {
            conn_close(c, "nomem");
            return;
        }
        if (c->state == CS_HANDSHAKE) {
            int h = gw_tls_handshake(c->tls);
            if (flush(c) < 0 || h < 0) {
                conn_close(c, "handshake_failed");
                return;
            }
            if (h == 0)
                return;
            after_handshake(c);
            if (c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER))
                return;
        }
        if (need_busy(c) < 0) {
            conn_close(c, "nomem");
            return;
        }
        for (;;) {
            uint8_t *dst;
            if (gw_bytes_reserve(&c->b->in, 16384) < 0) {
                conn_close(c, "input_overflow");
                return;
            }
            dst = c->b->in.base + c->b->in.len;
            ssize_t r = gw_tls_read(c->tls, dst, c->b->in.cap - c->b->in.len);
            if (r == GW_E_CLOSED) {
                c->flags |= GW_CONN_F_EOF;
                break;
            }
            if (r < 0) {
                conn_close(c, "tls_error");
                return;
            }
            if (r == 0)
                break;
            c->b->in.len += (size_t)r;
            if (gw_tls_drained(c->tls))
                break; /* the next read would only fail with "want read" */
        }
        flush(c); /* TLS may have something to say (key updates, alerts) */
    } else {
        if (need_busy(c) < 0) {
            conn_close(c, "nomem");
            return;
        }
        if (gw_bytes_append(&c->b->in, buf->base, (size_t)nread) < 0) {
            conn_close(c, "input_overflow");
            return;
        }
    }
    process(c);
    if (!(c->flags & GW_CONN_F_CLOSED) && c->state == CS_H1 && body_limited(c)) {
        /* upload rate, HTTP/1.1: bytes read spend the body bucket; in debt (or short of a
         * grain) the socket is not read until the timer says the tokens are back, so the
         * kernel's receive window pushes back on the client */
        uint64_t now = now_us();
        gw_bucket_spend(&c->thr->body_b, (size_t)nread, now);
        uint64_t w = gw_bucket_wait_us(&c->thr->body_b, gw_bucket_grain(&c->thr->body_b), now);
        if (w) {
            c->flags |= GW_CONN_F_THR_IN;
            uv_read_stop(s);
            thr_arm(c, w);
        }
    }
    if (!(c->flags & GW_CONN_F_CLOSED))
        release_idle_buffers(c);
    /* Bounded input: a peer that sends while we cannot answer (write queue full) is paused. */
    if (!(c->flags & GW_CONN_F_CLOSED) &&
        (c->flags & (GW_CONN_F_READ_PAUSED | GW_CONN_F_CLOSE_AFTER)))
        uv_read_stop(s);
}

/* ---- accept ------------------------------------------------------------------------------- */

void gw_front__on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    gw_worker_t *w = GW_CONTAINER_OF((uv_loop_t *)server->loop, gw_worker_t, loop);
    gw_listener_t *l = server->data;
    conn_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return;
    if (timer_nodes_add(w, 1) < 0) {
        gw_free(c);
        return;
    }
    c->l = l;
    gw_list_init(&c->link);
    gw_list_init(&c->dirty_link);
    gw_theap_node_init(&c->tnode, TK_CONN);
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    gw_list_push_back(&w->conns, &c->link);
    w->conns_len++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c, "accept_failed");
        return;
    }
    w->accepted++;
    if (w->conns_len > w->srv->cfg->limits.max_connections) {
        conn_close(c, "max_connections");
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 &&
        (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
        memcpy(&c->addr, &ss, ss.ss_family == AF_INET ? sizeof(c->addr.in4) : sizeof(c->addr.in6));
    const gw_cfg_throttle_t *th = &w->srv->cfg->throttle;
    if (th->response_rate || th->request_body_rate || w->srv->clients || w->srv->route_rates) {
        thr_t *t = gw_calloc(1, sizeof(*t));
        if (!t || timer_nodes_add(w, 1) < 0) {
            gw_free(t);
            conn_close(c, "nomem");
            return;
        }
        c->thr = t;
        t->c = c;
        gw_theap_node_init(&t->tnode, TK_THR);
        uint64_t now = now_us();
        gw_bucket_init(&t->resp_b, th->response_rate, th->response_burst, now);
        gw_bucket_init(&t->body_b, th->request_body_rate, th->request_body_burst, now);
        if (w->srv->clients && gw_bucket_table_keyed(&c->addr.sa)) {
            t->client = gw_bucket_table_acquire(w->srv->clients, &c->addr.sa, 0,
                                                th->per_client_rate, th->per_client_burst, now);
            if (!t->client) {
                /* full of clients still in debt: fail closed (issue 18 item 12); an
                 * unthrottled connection would be the way around per_client_rate */
                GW_LOG_INFO("client_table_full", "peer=%s", PEER(c));
                conn_close(c, "client_table_full");
                return;
            }
        }
        t->out = gw_bucket_limited(&t->resp_b) || t->client || w->srv->route_rates;
    }
    if (l->tls) {
        c->tls = gw_tls_conn_new(l->tls);
        if (!c->tls) {
            conn_close(c, "nomem");
            return;
        }
        c->state = CS_HANDSHAKE;
        arm(c, w->srv->cfg->timeouts.handshake_ms);
    } else {
        c->state = CS_SNIFF;
        arm(c, w->srv->cfg->timeouts.first_request_ms);
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (w->stop != GW_STOP_NONE)
        gw_front__conn_stop(&c->link, w->stop);
}

void gw_front__conn_stop(gw_list_t *link, gw_stop_t how)
{
    conn_t *c = GW_CONTAINER_OF(link, conn_t, link);
    if (how == GW_STOP_NOW) {
        conn_close(c, "shutdown");
        return;
    }
    c->flags |= GW_CONN_F_STOPPING;
    if (c->state == CS_H2) {
        /* RFC 9113 §6.8: GOAWAY with the last stream we will process; streams in flight
         * finish, then the connection closes */
        gw_h2_session_shutdown(c->h2, 1);
        h2_pump(c);
        return;
    }
    /* idle connections go now; one in the middle of a request finishes it first */
    if (c->state != CS_H1 ||
        (!c->h1->active && (!gw_h1_parser_in_message(c->h1->p) || gw_h1_parser_paused(c->h1->p)))) {
        if (c->queued)
            finish(c, "shutdown");
        else
            conn_close(c, "shutdown");
    }
}
