/* back/back_internal.h — structures shared by the files of back/ (not a public interface).
 *
 * dispatch.c: gw_back_t and its exchanges: the per-upstream wait queue, dispatch to a server
 *             and connection, retries, the public API (back.h); the per-loop deferred work
 *             (pipelined writes, re-sent requests) run before the poll.
 * upstream.c: server selection (weighted round-robin, least-connections, hash ring) and
 *             passive health. Pure logic over gw_back_upstream_t, no IO.
 * conn.c:     one origin connection's lifecycle: resolve, dial with timeout, TLS handshake,
 *             start, park, close, failure, and its timer.
 * io.c:       its reading and writing: request bytes out (through the client TLS), response
 *             bytes in and through the sans-IO h1 client codec (h1/client.h).
 * pipeline.c: HTTP/1.1 pipelining: the ring of requests written behind the one being read,
 *             and which busy connection takes one more.
 * batch.c:    read batching (SO_RCVLOWAT) inside long response bodies.
 * health.c:   active health checks and the purge of idle connections above max_idle.
 * tls.c:      client-side TLS over memory BIOs: verification, SNI, ALPN, session cache.
 */
#ifndef GW_BACK_INTERNAL_H
#define GW_BACK_INTERNAL_H

#include "back/back.h"

#include "common/buf.h"
#include "common/list.h"
#include "common/pool.h"
#include "tls/tls.h"
#include "h1/client.h"

typedef struct gw_back_upstream gw_back_upstream_t;
typedef struct gw_back_server gw_back_server_t;
typedef struct gw_back_conn gw_back_conn_t;

/* Fields of a response head or trailer section: a field line takes at least 4 bytes, so the
 * head size (GW_BACK_MAX_HEAD) stays the bound that matters, as it always was. */
#define GW_BACK_MAX_FIELDS (GW_BACK_MAX_HEAD / 4)

/* ---- upstreams and servers ------------------------------------------------------------------ */

struct gw_back_server {
    gw_back_upstream_t *up;
    const gw_cfg_server_t *cfg;
    size_t index;
    unsigned open;    /* connections open or connecting (tunnels included) */
    unsigned tunnels; /* of those, upgraded to a tunnel: outside max_connections */
    unsigned busy;    /* connections carrying an exchange (connecting included) */
    gw_list_t idle;   /* idle connections, most recently used first (LIFO) */
    unsigned idle_cnt;
    unsigned fails;         /* consecutive failures */
    uint64_t ejected_until; /* loop time (ms); 0 = not ejected */
    int64_t rr_current;     /* smooth weighted round-robin state */
    gw_back_stats_t st;
    uv_timer_t hc_timer; /* active health check period */
    gw_back_conn_t *hc_conn;
    gw_list_t active;            /* ACTIVE connections, when the upstream pipelines (link) */
    gw_back_conn_t *pipe_hint;   /* the last connection given a deferred write (revalidated) */
    uint64_t pipe_backoff_until; /* loop ms: no pipelining until then (requests were moved) */
};

typedef struct {
    uint32_t hash;
    uint32_t server;
} gw_back_vnode_t;

struct gw_back_upstream {
    gw_back_t *back;
    const gw_cfg_upstream_t *cfg;
    size_t index;
    gw_back_server_t *servers;
    size_t servers_len;
    gw_back_vnode_t *ring; /* sorted by hash */
    size_t ring_len;
    unsigned lc_rotor; /* tie breaker for least-connections */
    int dispatching;   /* dispatch_queue() is on the stack */
    gw_list_t queue;   /* waiting exchanges, in cmp order */
    unsigned queued;
    gw_back_queue_cmp_fn cmp;
    uv_timer_t queue_timer;
    gw_tls_client_ctx_t *tls; /* client TLS context (cfg->tls), or NULL for cleartext */
    gw_list_t holds;          /* connections with a read batch set (hlink) */
    uv_timer_t batch_timer;   /* every read_batch_wait while holds is not empty */
    uv_timer_t purge_timer;   /* every idle_purge while a server has more than max_idle idle */
};

/* A response body longer than this (or of unknown length) lets nothing wait behind it. */
#define GW_BACK_PIPE_LONG (1u << 20)

/* After requests had to be moved off a connection (the response ahead of them was long or
 * stalled), the server gets no pipelined request for this long (ms). */
#define GW_BACK_PIPE_BACKOFF_MS 1000

/* Virtual nodes per unit of weight on the hash ring. */
#define GW_BACK_VNODES 160

/* Build the ring of up; 0 or GW_E_NOMEM. */
int gw_back__ring_build(gw_back_upstream_t *up);
uint32_t gw_back__hash_addr(const struct sockaddr *sa);
/* Pick a server: healthy, != exclude (unless it is the only healthy one) and, when
 * need_capacity, with an idle connection or room to dial. Returns NULL and sets *all_ejected
 * when no server is healthy. Advances the balancer's state only when it returns a server. */
gw_back_server_t *gw_back__pick(gw_back_upstream_t *up, const struct sockaddr *client,
                                gw_back_server_t *exclude, int *all_ejected, uint64_t now,
                                int pipelined);
int gw_back__server_healthy(gw_back_server_t *s, uint64_t now);
/* An idle connection, room to dial, or (pipelined) a busy connection that takes one more. */
int gw_back__server_has_capacity(gw_back_server_t *s, int pipelined);
/* Passive health: one failure / one success of s. */
void gw_back__server_fail(gw_back_server_t *s, uint64_t now);
void gw_back__server_ok(gw_back_server_t *s);

/* ---- connections (conn.c, io.c, pipeline.c, batch.c, health.c) --------------------------- */

typedef enum {
    GW_BACK_CONN_CONNECTING = 0,
    GW_BACK_CONN_ACTIVE, /* carrying an exchange */
    GW_BACK_CONN_IDLE,   /* in its server's idle list, reading to detect a close */
    GW_BACK_CONN_CLOSING,
} gw_back_conn_state_t;
const char *gw_back_conn_state_str(gw_back_conn_state_t s);

/* Why a connection's reading is stopped (flags, for logs and tests). */
enum {
    GW_BACK_CONN_F_PAUSED = 1u << 0,     /* the exchange's consumer asked (backpressure) */
    GW_BACK_CONN_F_READING = 1u << 1,    /* uv_read_start is in effect */
    GW_BACK_CONN_F_WRITING = 1u << 2,    /* a uv_write is in flight */
    GW_BACK_CONN_F_HEALTH = 1u << 3,     /* an active health check connection, not pooled */
    GW_BACK_CONN_F_GOT_BYTE = 1u << 4,   /* a response byte arrived for the current exchange */
    GW_BACK_CONN_F_REUSED = 1u << 5,     /* current exchange came from the idle list */
    GW_BACK_CONN_F_RESOLVING = 1u << 6,  /* uv_getaddrinfo in flight (counted in handles) */
    GW_BACK_CONN_F_HANDSHAKE = 1u << 7,  /* TCP connected, TLS handshake running (CONNECTING) */
    GW_BACK_CONN_F_PERSIST = 1u << 8,    /* the last final head was HTTP/1.1 keep-alive */
    GW_BACK_CONN_F_DISCARD = 1u << 9,    /* the response being read has no exchange: dropped */
    GW_BACK_CONN_F_LONG = 1u << 10,      /* it has a large or unbounded body: nothing behind it */
    GW_BACK_CONN_F_HEAD = 1u << 11,      /* it answers a HEAD request */
    GW_BACK_CONN_F_PIPELINED = 1u << 12, /* its request was pipelined behind another */
    GW_BACK_CONN_F_NOBATCH = 1u << 13,   /* its bytes came slower than read_batch_wait */
    GW_BACK_CONN_F_BUSY = 1u << 14,      /* counted in its server's busy (dial/start to detach) */
    GW_BACK_CONN_F_TUNNEL = 1u << 15,    /* a 101 came: a byte tunnel, never pooled again */
    GW_BACK_CONN_F_SHUT_WR = 1u << 16,   /* the tunnel's write side was shut down */
};

/* A request the back may send again on its own, on another connection: idempotent (RFC 9110
 * §9.2.2) and without a body. Only such requests are pipelined, or reuse an idle connection
 * without first peeking for the origin's close. */
#define GW_BACK_RESENDABLE(req) ((req)->idempotent && (req)->body_len == 0 && !(req)->upgrade)

/* A request written (or queued to be) behind the one being answered: HTTP/1.1 pipelining
 * (RFC 9112 §9.3.2). Only bodyless idempotent requests are pipelined, only on a connection
 * whose last response proved it persistent. x is NULL once the exchange left (cancelled, or
 * moved to another connection): its response is read and dropped. */
typedef struct {
    gw_back_exch_t *x;
    int head_only;
} gw_back_pipe_t;

/* A pending request-body write: done fires when `end` stream bytes have been written. */
typedef struct {
    gw_list_t link;
    uint64_t end;
    gw_back_written_cb cb;
    void *user_data;
} gw_back_wmark_t;

/* How far an exchange's response got; it only moves forward. Whether the exchange ended
 * (dead: finished or cancelled, freed once no callback of ours is on the stack) is a flag
 * apart: an exchange may end in any phase, and its connection still asks how far it got. */
typedef enum {
    GW_BACK_X_WAITING = 0, /* nothing delivered yet */
    GW_BACK_X_INTERIM,     /* 1xx heads delivered (103 Early Hints, 100 Continue) */
    GW_BACK_X_HEAD,        /* the final head delivered: body bytes follow */
    GW_BACK_X_COMPLETE,    /* the whole response delivered (on_complete) */
} gw_back_xphase_t;
/* "waiting", "interim", "head", "complete". */
const char *gw_back_xphase_str(gw_back_xphase_t p);

struct gw_back_exch {
    gw_list_t qlink; /* in the upstream queue while waiting */
    gw_back_upstream_t *up;
    gw_back_server_t *server; /* last server tried */
    gw_back_conn_t *conn;     /* bound connection, or NULL */
    gw_back_req_t req;        /* copy; slices point into head/own strings */
    union { /* req.client's copy: only these two families are hashed (not a sockaddr_storage:
               100 bytes more to clear and carry per request) */
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } client;
    uint64_t seq;            /* queue arrival order */
    uint64_t queue_deadline; /* loop ms, while queued */
    uint64_t queued_ns;      /* gw_now_ns() it last entered the queue, while queued; else 0 */
    uint64_t queue_us;       /* time waited in the queue for a connection, all waits summed */
    gw_bytes_t head;         /* serialized request head (kept for retries) */
    gw_iovq_t body;          /* body bytes not yet handed to a connection */
    gw_list_t wmarks;        /* gw_back_wmark_t, in stream order */
    uint64_t body_queued;    /* body stream bytes queued (framing included) */
    uint64_t body_payload;   /* payload bytes accepted (Content-Length check) */
    uint64_t body_written;   /* body stream bytes written to a socket */
    unsigned tries;
    /* flags (0/1) in bytes: the exchange is cleared whole for every request */
    uint8_t body_ended;
    uint8_t body_started_write; /* a body byte hit a socket: no more retries */
    uint8_t tunnel;             /* the 101 came: body writes go as they are */
    uint8_t no_pipeline; /* re-sent after it went unanswered behind another request: never again */
    uint8_t phase;       /* gw_back_xphase_t: how far the response got */
    uint8_t paused;      /* gw_back_pause_reading() in effect */
    uint8_t dead;        /* cancelled or finished while in_cb */
    unsigned in_cb;      /* frames of our callbacks on the stack */
    gw_list_t all;       /* in the back's list of live exchanges */
    gw_list_t rlink;     /* in the back's list of unanswered exchanges to send again */
    gw_back_cbs_t cbs;
    void *user_data;
};

struct gw_back_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_write_t write_req;
    uv_timer_t timer;
    uint64_t deadline;    /* loop time the current timeout is due (the timer may fire first) */
    uv_getaddrinfo_t gai; /* resolving a server given by name */
    int handles;          /* open handles (tcp, timer) and pending requests before free */
    gw_back_conn_state_t state;
    unsigned flags;
    gw_back_server_t *server;
    gw_list_t link;       /* IDLE: the server's idle list; ACTIVE (pipelining): its active list */
    gw_list_t flink;      /* in the back's list of connections with a deferred write */
    gw_back_exch_t *exch; /* the exchange whose response is read now */
    gw_back_pipe_t *pipe; /* ring of pipeline - 1 requests behind it (allocated on first use) */
    unsigned pipe_first, pipe_len;
    unsigned requests;   /* exchanges carried (pipelined ones included) */
    uint64_t dial_ns;    /* when the connect started (gw_now_ns) */
    uint64_t connect_us; /* connect (and TLS handshake) duration, once connected */
    gw_iovq_t out;
    size_t writing;     /* bytes of the write in flight */
    uint64_t head_left; /* head bytes of the current exchange not yet written */
    gw_rbuf_t *in;      /* current read buffer */
    unsigned in_big;    /* a read filled its buffer: the next ones are GW_BACK_READ_BUF_MAX */
    gw_h1_client_t *h1; /* response parser, reused across the connection's exchanges */
    uint64_t idle_since;
    int dial_err;         /* a connect that failed before libuv took it */
    int msg_done;         /* the parser completed a response during this feed */
    unsigned lowat;       /* SO_RCVLOWAT in effect, 0 for the default (1) */
    uint64_t batch_since; /* loop time the read batch was set (lowat > 0) */
    gw_list_t hlink;      /* in the upstream's holds while lowat > 0 and reading */
    gw_tls_conn_t *tls;   /* TLS upstream: the session (plaintext in c->out / c->in), else NULL */
    gw_bytes_t tls_out;   /* TLS: ciphertext of the write in flight (`writing` counts plaintext) */
};

/* Read batching (SO_RCVLOWAT, conn.c). The socket of c was drained, or reading starts or
 * stops: inside a Content-Length body, ask the kernel to report it readable only once
 * min(rest of the body, read_batch) bytes are queued; else back to the default. */
void gw_back__batch_update(gw_back_conn_t *c);
/* The upstream's batch timer: connections that held bytes back for read_batch_wait without
 * a read go back to the default for the rest of their response. */
void gw_back__batch_sweep(uv_timer_t *t);
/* The upstream's purge timer callback: per server, half of the idle connections above max_idle
 * (at least one), least recently used first and only those idle for idle_purge, are closed;
 * re-armed while some server still has an excess. */
void gw_back__idle_purge(uv_timer_t *t);

/* Dial a connection for x on s (x bound at once). 0 or GW_E_NOMEM/GW_E_IO (nothing left). */
int gw_back__conn_dial(gw_back_server_t *s, gw_back_exch_t *x);
/* Start x on an idle or freshly connected connection. */
void gw_back__conn_start(gw_back_conn_t *c, gw_back_exch_t *x);
/* Take a live idle connection of s (closing dead ones found on the way), or NULL. careful:
 * the request cannot be sent again (body, or not idempotent): peek for a close first. */
gw_back_conn_t *gw_back__conn_take_idle(gw_back_server_t *s, int careful);
/* Detach every exchange of c (none is told) and close c: gw_back_del. */
void gw_back__conn_abort(gw_back_conn_t *c);
/* The owner cancelled x, carried by c: the response being read is x's → close c, and the
 * requests pipelined behind it are sent again elsewhere; x is pipelined → its response will
 * be dropped when it comes. */
void gw_back__conn_cancel(gw_back_conn_t *c, gw_back_exch_t *x);
/* A busy connection of s that takes one more pipelined request, or NULL: the batch
 * connection when it has room, else the one with the fewest requests in flight. */
gw_back_conn_t *gw_back__conn_pipe_slot(gw_back_server_t *s);
/* The connection whose write is pending in this loop iteration (the last one handed to
 * gw_back__flush_later()), when it takes one more pipelined request; else NULL. */
gw_back_conn_t *gw_back__conn_batch_slot(gw_back_server_t *s);
/* Send x behind the requests in flight on c (from gw_back__conn_pipe_slot()). The write is
 * deferred to the end of the loop iteration, so requests dispatched together share one
 * write(2). 0 or GW_E_NOMEM. */
int gw_back__conn_pipeline(gw_back_conn_t *c, gw_back_exch_t *x);

/* Park c in its server's idle list (LIFO). Never closes it: beyond max_idle, the purge timer
 * closes the excess gradually (gw_back__idle_purge). */
void gw_back__conn_park(gw_back_conn_t *c);
/* Close now (any state); the exchange, if any, must have been detached. */
void gw_back__conn_close(gw_back_conn_t *c);
/* Move queued body bytes of x to its connection and write. */
void gw_back__conn_flush(gw_back_conn_t *c);
void gw_back__conn_update_reading(gw_back_conn_t *c);
/* Active health check of s: one GET of cfg->health_path on a fresh connection. */
void gw_back__health_check(gw_back_server_t *s);

/* Flags that describe the response being read: they start afresh with the next one. */
#define GW_BACK_RESPONSE_FLAGS                                                                     \
    (GW_BACK_CONN_F_GOT_BYTE | GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_DISCARD |                    \
     GW_BACK_CONN_F_LONG | GW_BACK_CONN_F_HEAD | GW_BACK_CONN_F_PIPELINED |                        \
     GW_BACK_CONN_F_NOBATCH)

static inline const gw_cfg_upstream_t *gw_back__ucfg(const gw_back_conn_t *c)
{
    return c->server->up->cfg;
}

/* Between the files of a connection (conn.c, io.c, pipeline.c, batch.c). */
/* conn.c */
void gw_back__arm(gw_back_conn_t *c, uint64_t ms);
gw_back_exch_t *gw_back__detach(gw_back_conn_t *c);
void gw_back__fail(gw_back_conn_t *c, int code, int count_failure);
void gw_back__tls_handshake_step(gw_back_conn_t *c);
gw_back_conn_t *gw_back__conn_new(gw_back_server_t *s);
void gw_back__start_connect(gw_back_conn_t *c);
/* io.c */
void gw_back__write_more(gw_back_conn_t *c);
extern const gw_h1_client_cbs_t gw_back__codec_cbs;
/* pipeline.c */
int gw_back__is_head(const gw_back_exch_t *x);
void gw_back__begin_response(gw_back_conn_t *c, gw_back_exch_t *x, int head_only, unsigned flags);
unsigned gw_back__pipe_cap(const gw_back_conn_t *c);
gw_back_pipe_t *gw_back__pipe_at(gw_back_conn_t *c, unsigned i);
unsigned gw_back__pipe_live(gw_back_conn_t *c);
void gw_back__pipe_evacuate(gw_back_conn_t *c, int keep);
/* batch.c */
void gw_back__lowat_set(gw_back_conn_t *c, unsigned v);
void gw_back__hold_end(gw_back_conn_t *c);

/* ---- dispatch.c services used by the connection files
 * --------------------------------------------------------- */

uv_loop_t *gw_back__loop(gw_back_t *b);
const gw_config_t *gw_back__config(gw_back_t *b);
/* The tunnel's write side, once every byte queued for it is written and the body ended. */
void gw_back__tunnel_shut(gw_back_conn_t *c);
/* A tunnel between bursts: its empty write queues go (io.c). */
void gw_back__tunnel_trim(gw_back_conn_t *c);
static inline uv_loop_t *gw_back__loop_of(const gw_back_conn_t *c)
{
    return gw_back__loop(c->server->up->back);
}
gw_back_stats_t *gw_back__stats(gw_back_t *b);
/* The connection c of s is free again (exchange done, keep-alive): hand it to a queued
 * exchange or park it idle. */
void gw_back__conn_free_again(gw_back_conn_t *c);
/* A connection slot of s was released (closed): maybe dispatch a queued exchange. */
void gw_back__slot_released(gw_back_server_t *s);
/* x failed on its connection (already detached) with code; retry if allowed, else on_error. */
void gw_back__exch_failed(gw_back_exch_t *x, int code, int retryable);
/* x was pipelined behind a response and never answered (the connection ended, or the
 * response ahead turned out long); already detached. It is dispatched again, not pipelined,
 * from the back's deferred work (never from inside the caller), and it does not count as a
 * retry: the origin never answered it (RFC 9112 §9.3.2). */
void gw_back__exch_unanswered(gw_back_exch_t *x);
/* Write c's queued output before the loop polls again (pipelined requests). */
void gw_back__flush_later(gw_back_conn_t *c);
void gw_back__flush_cancel(gw_back_conn_t *c);
/* Event delivery to the exchange's owner; each returns non-zero if x is gone afterwards. */
int gw_back__deliver_head(gw_back_exch_t *x, const gw_back_head_t *h, int interim);
int gw_back__deliver_body(gw_back_exch_t *x, gw_rbuf_t *buf, size_t off, size_t len);
int gw_back__deliver_trailers(gw_back_exch_t *x, const gw_back_field_t *f, size_t n);
void gw_back__deliver_complete(gw_back_exch_t *x);
/* Fire and drop the body write marks of x up to x->body_written (status 0), or all (status<0). */
void gw_back__exch_marks(gw_back_exch_t *x, int status);

#endif
