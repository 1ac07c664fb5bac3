/* front/front_internal.h — what the files of gateway/front/ share (not a public interface; the
 * server layer calls front/front.h).
 *
 * front.c:     a worker's front: its loop and handles, stopping its connections, binding the
 *              generations they are accepted under, whether the worker is quiet (no
 *              connection with work for heap.idle_trim: server/heap.c trims the heap).
 * conn.c:      one client connection's life: accept, the PROXY header on listeners that expect
 *              one, timeouts, deferred work (the kick handle), idle connections giving back
 *              their buffers, graceful stop, close.
 * conn_io.c:   its bytes: read, TLS records, the protocol choice (ALPN, or the HTTP/2 preface
 *              against an HTTP/1.1 request line), gathered writes, the write bound.
 * proxy_header.c: the PROXY protocol header (v1, v2), sans-IO.
 * ticker.c:    the worker's timer heap: one loop timer for every connection's timeout and
 *              throttle wake-up.
 * h1_stream.c: the HTTP/1.1 front: one request at a time as a client stream (proxy/stream.h),
 *              responses serialized back (chunked, 1xx, trailers); the exchange's state
 *              (h1x_state_t) and its transitions.
 * h2_stream.c: HTTP/2 connections: the h2/ session, its streams as client streams, the pump
 *              that frames what the session has.
 * throttle.c:  response buckets (connection, client address, route), the request body bucket,
 *              and the HTTP/2 data budget and window credit that follow them.
 * client_cert.c: the client certificate of a TLS connection (client_auth): its verification
 *              and subject for the client streams, the RFC 9440 values, the metric.
 * accesslog.c: access log records, the per-worker buffer, the shared file (SIGUSR1 reopen).
 * metrics.c:   per-worker counters by configuration name, snapshots, what a scrape does with
 *              them (seed, add).
 *
 * TLS (contexts, handshakes, records) is its own layer: gateway/tls/ (tls/tls.h).
 */
#ifndef GW_FRONT_INTERNAL_H
#define GW_FRONT_INTERNAL_H

#include <stdint.h>
#include <uv.h>

#include "common/bucket.h"
#include "common/list.h"
#include "common/theap.h"
#include "config/config.h"
#include "front/front.h"
#include "h1/parser.h"
#include "h2/session.h"
#include "proxy/proxy.h"
#include "tls/tls.h"

/* ---- client connections (conn.c, h1_stream.c, h2_stream.c, throttle.c) ---------------- */

/* an HTTP/2 connection idle this long gives back its busy state even without a read */
#define H2_IDLE_RELEASE_MS 1000

typedef enum {
    CS_HANDSHAKE = 0, /* TLS handshake in progress */
    CS_SNIFF,         /* waiting for the first bytes that choose the protocol */
    CS_H1,            /* HTTP/1.1 front */
    CS_H2,            /* HTTP/2 session */
    CS_CLOSING,       /* flushing the last bytes, then close */
    CS_PROXY,         /* a proxy_protocol listener: waiting for the PROXY header */
} conn_state_t;

/* GW_CONN_F_*: why a connection is paused or what it waits for. */
enum {
    GW_CONN_F_READ_PAUSED = 1u << 0, /* reads stopped: write queue over limits.write_buffer (h1) */
    GW_CONN_F_CLOSE_AFTER = 1u << 1, /* close once the write queue drains */
    GW_CONN_F_EOF = 1u << 2,         /* the peer closed its side */
    GW_CONN_F_CLOSED = 1u << 3,      /* uv_close called */
    GW_CONN_F_STOPPING = 1u << 4,    /* graceful stop: no new requests after the current one */
    GW_CONN_F_THR_OUT = 1u << 5,     /* response bytes wait for tokens (throttle timer armed) */
    GW_CONN_F_THR_IN = 1u << 6,      /* reads stopped / window credit held: upload rate */
    GW_CONN_F_DRAIN = 1u << 7,       /* HTTP/2 of an old generation: GOAWAY once quiet */
    GW_CONN_F_TLS_BYE = 1u << 8,     /* closing: TLS close_notify queued after the last byte */
    /* HTTP/2 send pacing (h2_data_max): the socket's TCP_NOTSENT_LOWAT is h2.notsent_lowat
     * (PACED) or h2.bulk_lowat (BULK); neither: the kernel's default */
    GW_CONN_F_PACED = 1u << 9,
    GW_CONN_F_BULK = 1u << 10,
    /* TLS: the socket did not take all of the last write round (conn_io.c send_tls) */
    GW_CONN_F_WFULL = 1u << 11,
    /* the peer's end was a TCP reset (RST), not a close: conn_close reason=reset */
    GW_CONN_F_RESET = 1u << 12,
    /* a client's GOAWAY was logged (h2_goaway_received), and one with an error code: at most
     * these two are, however many GOAWAY frames a client sends */
    GW_CONN_F_GOAWAY_IN = 1u << 13,
    GW_CONN_F_GOAWAY_IN_ERR = 1u << 14,
};

typedef struct conn conn_t;

/* Timer nodes in the worker's heap (gw_theap_node_t.kind). */
enum { TK_CONN = 0, TK_THR = 1 };

/* Where the current HTTP/1.1 exchange is (h1_stream.c). The request and the response move on
 * independently (a response may end before the request body does: an early response), so the
 * states of an exchange known to the proxy are the pairs of request (body arriving, complete)
 * and response (no head yet, head written, handed over whole). Set by the transitions of
 * h1_stream.c only; logged with gw_front__h1x_state_str. */
typedef enum {
    H1X_IDLE = 0,  /* no exchange yet: nothing answered on this connection */
    H1X_RECV,      /* known to the proxy; request body arriving; no response head */
    H1X_RECV_RESP, /* request body arriving; response head written, body under way */
    H1X_RECV_DONE, /* request body arriving; response handed over whole (early response) */
    H1X_WAIT,      /* request complete; no response head yet */
    H1X_SENDING,   /* request complete; response head written, body under way */
    H1X_DONE,      /* request complete, response whole: closed to the proxy when processed */
    H1X_ENDED,     /* closed to the proxy; a response was written; waiting for the next head */
} h1x_state_t;

/* HTTP/1.1 front state, from the protocol choice to the close (only HTTP/1.1 connections). */
typedef struct {
    gw_h1_parser_t *p;
    gw_cstream_t s;     /* the current request's client stream, handed to the proxy */
    gw_field_t *fields; /* the request's fields in the common form */
    size_t fields_cap;
    char *path; /* an absolute-form target's path when it is made ("?q" → "/?q") */
    size_t path_cap;
    uint64_t inflight; /* request body bytes given to the proxy and not credited yet */
    gw_bucket_t *rb;   /* route bucket of the current request (throttle), or NULL */
    gw_alog_t log;     /* the current request's record (accesslog.c) */
    uint32_t thr_mark; /* c->thr->waits when it began */
    uint8_t state;     /* h1x_state_t */
    /* how the current request is answered (set from its head, keep_alive also by the response) */
    unsigned keep_alive : 1;
    unsigned expect_100 : 1;   /* answered without 100 Continue: close after the response */
    unsigned resp_chunked : 1; /* response body framed as chunks */
    unsigned http10 : 1;       /* the current request is HTTP/1.0: no 1xx, no chunked */
    unsigned ws : 1;           /* it asks for a WebSocket: its answer decides (101: tunnel) */
    unsigned tunnel : 1;       /* the 101 went out: the connection is a byte tunnel */
    unsigned tunnel_eof : 1;   /* the client's end of the tunnel was passed on */
    uint8_t urgency;           /* RFC 9218 urgency of its priority field (ops->urgency) */
} h1x_t;

/* The exchange is known to the proxy (s is a live client stream). */
static inline int h1x_active(const h1x_t *h)
{
    return h->state >= H1X_RECV && h->state <= H1X_DONE;
}

/* The exchange is known to the proxy and its response is not handed over whole yet. */
static inline int h1x_resp_owed(const h1x_t *h)
{
    return h1x_active(h) && h->state != H1X_RECV_DONE && h->state != H1X_DONE;
}

/* Throttling: allocated at accept only when the gateway configures a throttle. */
typedef struct {
    gw_theap_node_t tnode; /* wake-up when tokens are back (TK_THR) */
    conn_t *c;
    int out;                   /* some response limit may apply to this connection */
    gw_bucket_t resp_b;        /* throttle.response_rate */
    gw_bucket_t body_b;        /* throttle.request_body_rate */
    gw_bucket_entry_t *client; /* throttle.per_client_rate, shared by all workers */
    gw_bucket_t *route_b;      /* per route (routes[].response_rate), allocated on first use */
    size_t h2_given;           /* connection data budget handed to the session */
    uint32_t waits;            /* times bytes waited for tokens (the access log's throttled) */
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
    gw_list_t h2_pushes;   /* h2s_t of promised pushes, handed to the proxy when kicked */
    unsigned h2_rst_after; /* streams with rst_after set */
    /* HTTP/2 pacing (h2_data_max): what the socket's TCP_INFO said it takes at once, less what
     * was written since, and when it said so; 0 once a write was left pending */
    size_t h2_room;
    uint64_t h2_room_us;
    char peer[64]; /* "ip:port", "[ip6]:port" (client streams point here) */
    char peer_ip[48];
} busy_t;

/* One client connection. Kept small: it is what an idle connection costs (with the HTTP/2
 * session and, over TLS, OpenSSL's state); everything else hangs off it while needed. */
struct conn {
    uv_tcp_t tcp;
    gw_theap_node_t tnode; /* the connection's timeout in the worker's heap (TK_CONN) */
    uint64_t deadline;     /* loop time the current timeout is due (the node may be earlier) */
    const gw_listener_t *l;
    gw_list_t link;
    gw_list_t dirty_link; /* in w->dirty while deferred work is due */
    uint8_t state;        /* conn_state_t */
    uint8_t dirty;
    uint16_t flags;
    unsigned requests;
    unsigned tunnels; /* WebSocket tunnels it carries (a drain waits timeouts.tunnel_drain) */
    gw_tls_conn_t *tls;
    struct gw_front_ccert *ccert; /* a verified client certificate's field values (client_cert.c) */
    gw_front_gen_t *g;            /* the generation it was accepted under */
    busy_t *b;                    /* NULL while idle */
    h1x_t *h1;                    /* CS_H1 (and CS_CLOSING after it) */
    thr_t *thr;                   /* NULL without throttling */
    size_t queued;                /* bytes handed to uv_write and not yet written */
    gw_h2_session_t *h2;
    uint64_t last_active_ms; /* HTTP/2: last time a stream was open or a frame arrived */
    uint64_t stop_due;       /* HTTP/2 draining: the first GOAWAY (F_DRAIN) or the final one
                                (F_STOPPING) is due at this gw_now_ms(), or 0 */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr; /* the peer (family 0 when unknown) */
};

/* A connection of f took up work or gave it back (conn.c): the time is stamped, and a quiet
 * worker (or one not watched while heap.idle_trim is on) starts watching again (front.c). */
void gw_front__work(gw_front_t *f);

/* The front of a connection: its loop is embedded in the front. */
#define W(c) GW_CONTAINER_OF((c)->tcp.loop, gw_front_t, loop)

/* The peer as "ip:port" ("[ip6]:port") and as the bare address, into caller storage. */

#define PEER(c) gw_front__conn_peer(c)

/* An HTTP/2 stream as a client stream. */
typedef struct {
    gw_cstream_t cs;
    conn_t *c;
    gw_list_t link;  /* in c->b->h2_streams, then c->b->h2_gone */
    gw_bucket_t *rb; /* its route's bucket on this connection, or NULL */
    size_t given;    /* stream data budget handed to the session */
    size_t owed;     /* request body bytes passed on, window credit held back (upload rate) */
    uint32_t sid;
    uint32_t thr_mark; /* c->thr->waits when the request began */
    uint8_t gone;      /* closed by the session: ops are no-ops until the proxy is told */
    uint8_t rst_after; /* RST_STREAM(NO_ERROR) once the response is framed (early response) */
    uint8_t ws;        /* an RFC 8441 extended CONNECT: its 200 opens a tunnel */
    /* a push we promised: its request, kept by the session until the stream is released */
    const gw_h2_head_t *push_req;
    /* the request's record (accesslog.c), last: its request id's bytes, untouched when there
       is none, are the stream's last ones (h2_on_request clears the stream up to here) */
    gw_alog_t log;
} h2s_t;

typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    uint8_t data[];
} wreq_t;

/* The configuration of the connection's generation. */
#define CFG(c) ((c)->g->cfg)
/* The translator of the connection's generation on its worker. */
#define PROXY(c) ((c)->g->proxy)

/* conn.c: the connection's life */
/* A proxy_protocol listener's first bytes: the PROXY header, whose address becomes the
 * client's; what follows it goes on to gw_front__on_data. */
void gw_front__proxy_header(conn_t *c, const char *data, size_t n);
/* Begin a graceful (or immediate) stop of one connection. */
void gw_front__conn_stop(gw_list_t *link, gw_stop_t how);
/* The kick handle's callback: deferred work of the connections in f->dirty. */
void gw_front__on_kick(uv_idle_t *h);
/* A client stream of connection c (its peer, address and transport) for a request of method. */
gw_cstream_t gw_front__cstream(conn_t *c, const gw_cstream_ops_t *ops, void *impl,
                               gw_slice_t method);
size_t gw_front__in_len(const conn_t *c);
size_t gw_front__out_len(const conn_t *c);
int gw_front__need_busy(conn_t *c);
void gw_front__kick(conn_t *c);
/* Take back a kick not run yet: the work it asked for is done (see gw_front__h2_pump). */
void gw_front__unkick(conn_t *c);
/* Hand the promised pushes (c->b->h2_pushes) to the proxy. */
void gw_front__h2_start_pushes(conn_t *c);
void gw_front__arm(conn_t *c, uint64_t ms);
void gw_front__finish(conn_t *c, const char *why);
void gw_front__conn_close(conn_t *c, const char *why);

/* The close reason for a peer that ended the connection: "reset" when its end was a TCP reset
 * (GW_CONN_F_RESET: ECONNRESET or EPIPE on the socket), else "peer_closed" (a FIN, or TLS's
 * close_notify). A static string. */
const char *gw_front__peer_end(const conn_t *c);
void gw_front__on_timeout(conn_t *c);
void gw_front__release_idle_buffers(conn_t *c);
const char *gw_front__conn_peer(const conn_t *c);

/* client_cert.c: the client certificate of a TLS connection */
/* Count the handshake (just completed, or failed when `failed`) in the metric of client
 * certificates by verification result, when its listener entry asked for one. */
void gw_front__client_cert_count(conn_t *c, int failed);
/* After the handshake: a verified certificate's Client-Cert and Client-Cert-Chain values into
 * c->ccert (freed with the connection). 0 or GW_E_NOMEM. */
int gw_front__client_cert_init(conn_t *c);
/* The client stream's tls_client_* fields, from the connection (nothing in cleartext). */
void gw_front__client_cert_stream(conn_t *c, gw_cstream_t *s);

/* conn_io.c: the connection's bytes */
/* Read from the socket: each read goes to the PROXY header or to gw_front__on_data. */
void gw_front__read_start(conn_t *c);
/* Bytes from the client (after the PROXY header, if any): TLS records or plaintext, then
 * whatever the connection's protocol makes of them. */
void gw_front__on_data(conn_t *c, const char *data, size_t nread);
void gw_front__after_write(conn_t *c, size_t len, int status);
int gw_front__send_iovq(conn_t *c, gw_iovq_t *q);
/* Around a write round of c->b->oq: the worker's scratch block is lent to the queue for the
 * frame bytes it copies, and taken back after (bytes still queued keep their part pinned). */
void gw_front__oq_lend(conn_t *c);
void gw_front__oq_return(conn_t *c);
int gw_front__flush(conn_t *c);
void gw_front__process(conn_t *c);

/* ticker.c: the worker's timer heap (one loop timer for every connection's timeout and throttle
 * wake-up) */
void gw_front__ticker_set(gw_front_t *f, gw_theap_node_t *n, uint64_t due);
/* One more (k = 1) or one less (k = -1) node that may be queued. 0 or GW_E_NOMEM. */
int gw_front__timer_nodes_add(gw_front_t *f, int k);

/* throttle.c */
uint64_t gw_front__now_us(void);
void gw_front__thr_arm(conn_t *c, uint64_t wait_us);
int gw_front__body_limited(const conn_t *c);
size_t gw_front__out_avail(conn_t *c, uint64_t now, size_t want, gw_bucket_t *rb, uint64_t *wait);
void gw_front__out_charge(conn_t *c, size_t n, gw_bucket_t *rb, uint64_t now);
gw_bucket_t *gw_front__route_bucket(conn_t *c, const gw_cfg_route_t *r);
uint64_t gw_front__tail_ms(conn_t *c);
void gw_front__h2_budget(conn_t *c, uint64_t now);
void gw_front__h2_charge(conn_t *c, uint64_t now);
void gw_front__h2_credit_release(conn_t *c, uint64_t now);
void gw_front__on_throttle(conn_t *c);

/* metrics.c */
int gw_front__metrics_bind(gw_front_t *f, gw_front_gen_t *g);
void gw_front__metrics_unbind(gw_front_gen_t *g);
void gw_front__metrics_request(conn_t *c, const gw_alog_t *r);
void gw_front__metrics_h2_closed(gw_front_t *f, const gw_h2_stats_t *st);
void gw_front__metrics_retire(gw_front_gen_t *g);

/* The listener's hsts (RFC 6797 §6.1) on a response of a TLS connection: in f[0..n) (room
 * for cap), any Strict-Transport-Security of the origin replaced by the listener's; the new
 * count. Nothing on a cleartext connection or a listener without hsts. */
size_t gw_front__with_hsts(const gw_cstream_t *s, gw_field_t *f, size_t n, size_t cap);

/* accesslog.c */
/* A request of c began: a fresh record from its head (user agent, referer, request id). */
void gw_front__log_start(conn_t *c, gw_alog_t *r, const gw_req_head_t *h, const char *proto);
/* The response head (status) was handed over; end_stream: it was the whole response. */
void gw_front__log_head(gw_alog_t *r, unsigned status, int end_stream);
void gw_front__log_reset(gw_alog_t *r, uint32_t code);
/* f plus x-request-id (when the record has an id and f has none) into out (cap fields):
 * the count, or SIZE_MAX when f does not fit. */
size_t gw_front__with_request_id(const gw_alog_t *r, const gw_field_t *f, size_t n, gw_field_t *out,
                                 size_t cap);
/* An HTTP/1.1 request the front answered itself before it became a client stream (400, 405,
 * 408, 414, 431, 501, 505): counted and logged with the request line as received (empty: `-`;
 * the slice is read during the call only). */
void gw_front__log_direct(conn_t *c, unsigned status, gw_slice_t request_line);
/* An HTTP/2 request the session answered (431) or reset (malformed: PROTOCOL_ERROR; refused:
 * REFUSED_STREAM) before it became a client stream: counted and logged with what was decoded
 * of its head (read during the call only). status 0 when only the reset went out. */
void gw_front__log_refused(conn_t *c, const gw_h2_head_t *h, unsigned status, uint32_t code);
/* The front is done with s: its line is logged, then the proxy is told. */
void gw_front__stream_done(conn_t *c, gw_cstream_t *s, uint32_t thr_mark);

/* h1_stream.c */
const char *gw_front__h1x_state_str(h1x_state_t st);
/* The exchange is closed to the proxy (the connection is closing, or its exchange ended). */
void gw_front__h1x_end(conn_t *c);
void gw_front__process_h1(conn_t *c);
int gw_front__start_h1(conn_t *c);
/* Whether an HTTP/1.1 connection's socket is to be read now (the connection's other reasons
 * to stop reading aside: write bound, EOF, closing, upload throttle). While a response is
 * awaited, or the proxy holds a full request body buffer, it is read only to see the client's
 * end: what arrives is kept unparsed, up to limits.max_request_head. */
int gw_front__h1_want_read(const conn_t *c);

/* h2_stream.c */
int gw_front__start_h2(conn_t *c);
void gw_front__h2_pump(conn_t *c);
void gw_front__process_h2(conn_t *c);
void gw_front__h2_timeout(conn_t *c);
/* Begin the two-step GOAWAY (RFC 9113 §6.8) of a connection being stopped. */
void gw_front__h2_goaway(conn_t *c);
/* Finish the streams the session closed (c->b->h2_gone): their lines, the proxy told, the
 * session's state for them released. */
void gw_front__h2_tell_gone(conn_t *c);
/* The connection closes (gw_front__conn_close): the abuse limits its client hit are counted and
 * logged. */
void gw_front__h2_closing(conn_t *c);
/* The connection is closed (its handle's close callback, c->b set): every stream the proxy
 * knows is finished (while the session and the TLS state its line reads are alive) and goes
 * back to the pool, with the promised pushes never started. */
void gw_front__h2_closed(conn_t *c);

#endif
