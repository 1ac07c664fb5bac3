/* back/back.h — origin side of h2gate: upstreams, balancing, keep-alive pools, failures.
 *
 * One gw_back_t per worker loop. It owns, per configured upstream, its servers, per server a
 * bounded set of HTTP/1.1 keep-alive connections, and per upstream a bounded queue of
 * exchanges waiting for a connection. The translator (proxy/) calls gw_back_request() once per
 * origin request and gets the response back as version-neutral events.
 *
 * Lifecycle of an exchange:
 *   gw_back_request()  → queued (every connection busy) or bound to a connection
 *   [gw_back_write_body()* gw_back_end_body()]   request body, if req->body_len != 0
 *   on_interim*  on_head  on_body*  [on_trailers]  on_complete        — success
 *   ... on_error(code)                                                — any failure
 * A request with `upgrade` (WebSocket, RFC 9110 §7.8) whose answer is a 101 becomes a tunnel:
 * on_head(101), then on_body* with every byte the origin sends, on_complete at its close;
 * gw_back_write_body() sends bytes as they are (bytes given before the 101 wait for it, and are
 * never sent when the answer is another: RFC 6455 §4.1, the client waits for the handshake;
 * an HTTP/2 client may send DATA right after its CONNECT) and gw_back_end_body() half-closes
 * (cleartext: shutdown(SHUT_WR); TLS: nothing, the close ends it). The connection never returns to
 * the pool and does not count against max_connections; timeouts.tunnel_idle closes it when no byte
 * moved either way for that long (GW_E_TIMEOUT, not a server failure). on_complete and on_error are
 * terminal: exactly one of them fires, once, and the exchange is freed when it returns.
 * gw_back_cancel() is the caller's way to end it early; after cancel no callback fires.
 *
 * Error codes passed to on_error or returned synchronously, and the status the gateway answers
 * with (gw_back_status_for()):
 *   GW_E_TIMEOUT  connect, queue, response-head or body-read timeout          → 504
 *   GW_E_IO       connection refused, reset or closed before the response end → 502
 *   GW_E_PARSE    malformed response (never forwarded)                        → 502
 *   GW_E_NOENT    every server of the upstream is ejected (passive health)    → 503
 *   GW_E_LIMIT    the upstream's queue is full                                → 503
 *   GW_E_NOMEM    out of memory                                               → 503
 *
 * Policy decisions:
 * - An upstream whose servers are all ejected answers 503 at once (GW_E_NOENT); it does not try
 *   the least recently ejected server. An ejected server comes back when its back-off ends or
 *   when an active health check sees the expected status.
 * - Consistent hashing sticks a client to its server while that server is healthy and has a
 *   free or idle connection; otherwise the ring is walked to the next eligible server.
 * - Retries: an idempotent request (req->idempotent) that fails before any response byte and
 *   before any request body byte was written (connect refused or timed out, reset or EOF before
 *   the response) is retried up to cfg->retries times, on another server when one is eligible,
 *   else on another connection of the same server. A response-head timeout is not retried.
 * - Request heads are serialized and responses parsed by the client side of the sans-IO h1
 *   codec (h1/client.h, on http-parser), strictly: a response that could desynchronise the
 *   connection (h1/parser.h lists the cases) is GW_E_PARSE and never forwarded.
 * - A server given as NAME:PORT is resolved (uv_getaddrinfo, first address) at every dial,
 *   within the connect timeout; a name that does not resolve fails like a refused connect
 *   (GW_E_IO).
 * - HTTPS origins (`tls: true`, back/tls.h): each dial runs a TLS 1.2+ handshake after the TCP
 *   connect, within the same connect timeout (GW_E_TIMEOUT → 504 when it runs out). With
 *   `tls_verify` the certificate must chain to `tls_ca` (or the system store) and match the
 *   server's host as written in its address (a name by DNS SAN, an IP literal by IP SAN); SNI
 *   is that host name (none for an IP literal); ALPN offers http/1.1. A failed handshake or
 *   certificate check is a failed connect: GW_E_IO (502), counted by passive health, retried
 *   like a refused connect, and logged as `back_tls_handshake_failed` with the reason (the
 *   verification error). Keep-alive, idle-close detection and retries are the cleartext ones;
 *   one TLS session per server is cached for resumption; a retired connection sends
 *   close_notify.
 * - Pipelining (cfg->pipeline > 1, RFC 9112 §9.3.2): a bodyless idempotent request may be
 *   written behind others on a connection already proven persistent; requests dispatched in
 *   one loop iteration share a connection and one write. Callbacks of a pipelined exchange are
 *   those of any other. A pipelined request that is never answered on its connection (the
 *   connection ends, or the response ahead of it turns out long or paused) is dispatched again
 *   elsewhere without counting as a retry (stats: `pipelined`, `unanswered`). So is a request
 *   written into a kept-alive connection that the origin was closing (EOF or reset before any
 *   response byte): that race (RFC 9112 §9.3.1) is not a server failure either.
 */
#ifndef GW_BACK_BACK_H
#define GW_BACK_BACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "common/buf.h"
#include "config/config.h"

typedef struct gw_back gw_back_t;
typedef struct gw_back_exch gw_back_exch_t;

/* One header field {name, value}: the common gw_field_t. Both slices point into memory owned
 * by whoever hands the field out. */
typedef gw_field_t gw_back_field_t;

/* An origin request. Everything is copied by gw_back_request(): the caller's memory may go
 * away when it returns. */
typedef struct {
    gw_slice_t method;             /* "GET" */
    gw_slice_t target;             /* origin-form "/path?q" */
    gw_slice_t host;               /* Host header value (RFC 9112 §3.2) */
    const gw_back_field_t *fields; /* already stripped of hop-by-hop fields by the caller */
    size_t fields_len;
    int64_t body_len;              /* 0 = no body, >0 = Content-Length, -1 = chunked */
    int idempotent;                /* RFC 9110 §9.2.2: may be retried when nothing was seen */
    uint8_t urgency;               /* RFC 9218 urgency 0 (highest) .. 7; queue order input */
    int upgrade;                   /* the fields ask to Upgrade (WebSocket): a 101 is a tunnel */
    const struct sockaddr *client; /* for consistent hashing; NULL hashes as all-zero */
} gw_back_req_t;

/* A response head (final or interim). Slices point into the connection's head buffer and are
 * valid only during the callback: copy what must outlive it. */
typedef struct {
    int status; /* 100..599 */
    int minor;  /* HTTP/1.minor of the origin's status line */
    const gw_back_field_t *fields;
    size_t fields_len;
} gw_back_head_t;

/* Callbacks of one exchange; `user_data` is the pointer given to gw_back_request(). From
 * on_interim, on_head, on_body and on_trailers the caller may call gw_back_pause_reading(),
 * gw_back_resume_reading(), gw_back_write_body(), gw_back_end_body() and gw_back_cancel().
 * Any callback may be NULL. */
typedef struct {
    /* A 1xx response other than 101 (100 Continue, 103 Early Hints); zero or more times. */
    void (*on_interim)(gw_back_exch_t *x, void *user_data, const gw_back_head_t *head);
    /* The final response head; once. */
    void (*on_head)(gw_back_exch_t *x, void *user_data, const gw_back_head_t *head);
    /* Body bytes, already de-chunked. The reference in `body` is lent for the call: take
     * gw_rbuf_ref(body.buf) to keep the bytes (no copy; the buffer is never rewritten). */
    void (*on_body)(gw_back_exch_t *x, void *user_data, gw_rslice_t body);
    /* Chunked trailers (RFC 9112 §7.1.2); slices valid during the call only. */
    void (*on_trailers)(gw_back_exch_t *x, void *user_data, const gw_back_field_t *f, size_t n);
    /* The response ended cleanly. Terminal. */
    void (*on_complete)(gw_back_exch_t *x, void *user_data);
    /* The exchange failed with a GW_E* code (table above). Terminal. */
    void (*on_error)(gw_back_exch_t *x, void *user_data, int code);
} gw_back_cbs_t;

/* Called when the bytes given to gw_back_write_body() have been written to the origin socket
 * (status 0), or will never be (status < 0: the exchange failed or was cancelled; the rbuf
 * reference has been released either way). The proxy returns window to the client here. */
typedef void (*gw_back_written_cb)(void *user_data, int status);

/* Queue order: negative when a should be served before b. The queue is kept sorted with
 * insertion after equal elements, so a comparator that returns 0 keeps FIFO order. */
typedef int (*gw_back_queue_cmp_fn)(const gw_back_req_t *a, uint64_t a_seq, const gw_back_req_t *b,
                                    uint64_t b_seq);
/* FIFO (the default here) and RFC 9218 urgency-then-FIFO (what the proxy sets on every
 * upstream). */
int gw_back_queue_fifo(const gw_back_req_t *a, uint64_t a_seq, const gw_back_req_t *b,
                       uint64_t b_seq);
int gw_back_queue_urgency(const gw_back_req_t *a, uint64_t a_seq, const gw_back_req_t *b,
                          uint64_t b_seq);

/* Counters; totals since gw_back_new, gauges now. */
typedef struct {
    uint64_t opened;   /* connections dialled */
    uint64_t reused;   /* requests sent on an idle connection */
    uint64_t closed;   /* connections closed */
    uint64_t requests; /* exchanges started */
    uint64_t retries;  /* exchanges re-dispatched after a failure */
    uint64_t failures; /* server failures counted by passive health */
    uint64_t ejections;
    uint64_t pipelined;     /* requests sent behind another on a busy connection */
    uint64_t unanswered;    /* pipelined requests sent again elsewhere, never answered */
    uint64_t batch_expired; /* responses whose read batch waited read_batch_wait: slow origin */
    uint64_t purged;        /* idle connections above max_idle closed by the purge */
    uint64_t bytes_in;      /* bytes read from origin sockets (TLS records included) */
    uint64_t bytes_out;     /* bytes handed to origin sockets */
    unsigned open;          /* connections open or connecting */
    unsigned active;        /* connections carrying an exchange */
    unsigned idle;          /* idle keep-alive connections */
    unsigned queued;        /* exchanges waiting for a connection */
    unsigned tunnels;       /* connections upgraded to a tunnel (101), open now */
} gw_back_stats_t;

/* Create the back side of one worker for every upstream of `cfg`, with one client TLS
 * context per `tls: true` upstream. `cfg` must outlive it. Returns 0 and *out, or GW_E_NOMEM,
 * or GW_E_INVAL (an upstream without servers, or a `tls_ca` that cannot be loaded: logged as
 * `back_tls_ca_invalid`). */
int gw_back_new(uv_loop_t *loop, const gw_config_t *cfg, gw_back_t **out);

/* Close every connection, fail every exchange still live with GW_E_CLOSED (their callbacks
 * fire from here), stop timers. The object is freed once libuv has closed its handles:
 * run the loop afterwards (uv_run) until it has no more handles of ours. NULL is ignored. */
void gw_back_del(gw_back_t *b);

/* Start an exchange on upstream `upstream` (index into cfg->upstreams). The request is
 * copied. Returns 0 and *out (valid until its terminal callback or gw_back_cancel()), or
 * synchronously GW_E_RANGE (bad index), GW_E_INVAL (a header field with CR, LF or NUL, an
 * empty method or target), GW_E_NOENT (every server ejected), GW_E_LIMIT (queue full),
 * GW_E_NOMEM; on a synchronous error no callback fires. Callbacks fire later, never from
 * inside this call. */
int gw_back_request(gw_back_t *b, size_t upstream, const gw_back_req_t *req,
                    const gw_back_cbs_t *cbs, void *user_data, gw_back_exch_t **out);

/* Queue len (> 0) body bytes at buf->data+off (a reference is taken; no copy). done_cb fires once
 * with 0 when they have been written to the origin socket, or with a negative code when they
 * never will be. For a Content-Length body the total must not exceed req->body_len.
 * Returns 0, GW_E_INVAL (len 0, no body announced, already ended, or past Content-Length) or
 * GW_E_NOMEM; on error done_cb is not called. */
int gw_back_write_body(gw_back_exch_t *x, gw_rbuf_t *buf, size_t off, size_t len,
                       gw_back_written_cb done_cb, void *user_data);

/* End the request body; for a chunked body send the last chunk and `trailers` (may be NULL,
 * copied). For a Content-Length body the bytes written must equal req->body_len, else
 * GW_E_INVAL. Returns 0, GW_E_INVAL or GW_E_NOMEM. */
int gw_back_end_body(gw_back_exch_t *x, const gw_back_field_t *trailers, size_t n);

/* Stop reading the origin socket of this exchange (the client side is full). Takes effect at
 * the next socket read: the rest of the current read buffer (at most GW_BACK_READ_BUF_MAX bytes;
 * over TLS, the plaintext of one read of ciphertext plus a record left partial by the previous
 * read, so at most about twice that) may still be delivered. While paused the body-read timeout
 * does not run. Idempotent. */
void gw_back_pause_reading(gw_back_exch_t *x);
void gw_back_resume_reading(gw_back_exch_t *x);

/* The client went away: end the exchange now, no callback fires afterwards. Pending body
 * writes get done_cb(GW_E_CLOSED). A connection whose response is not complete is closed,
 * never returned half-read to the pool; a queued exchange just leaves the queue. */
void gw_back_cancel(gw_back_exch_t *x);

/* Totals over every upstream (up == SIZE_MAX), or the sum over one upstream's servers (then
 * `requests` and `retries` are 0: they are counted per gw_back_t only). */
void gw_back_stats(const gw_back_t *b, size_t up, gw_back_stats_t *out);
/* One server's counters; 0 or GW_E_RANGE. */
int gw_back_server_stats(const gw_back_t *b, size_t up, size_t srv, gw_back_stats_t *out);
/* Whether a server is ejected now (1), healthy (0), or GW_E_RANGE. */
int gw_back_server_ejected(const gw_back_t *b, size_t up, size_t srv);
/* Change an upstream's queue order (default FIFO); waiting exchanges are not re-sorted. */
int gw_back_set_queue_order(gw_back_t *b, size_t up, gw_back_queue_cmp_fn cmp);
/* The exchange's RFC 9218 urgency changed (PRIORITY_UPDATE): while it waits in its upstream's
 * queue it moves to its new place (behind the exchanges already waiting at that urgency);
 * once started it only records the value. */
void gw_back_set_urgency(gw_back_exch_t *x, uint8_t urgency);

/* What the access log and the metrics say of an exchange: the server it went to (or was tried
 * last: its address as written, NULL before any), how often it was sent again elsewhere, the
 * connect time when it opened its connection (-1 when it went on a kept one), and how long it
 * waited in its upstream's queue for a connection (0 when it never waited; a wait still under
 * way counts up to now). */
typedef struct {
    const char *server;
    unsigned retries;
    int64_t connect_us;
    int64_t queue_us;
} gw_back_exch_info_t;
void gw_back_exch_info(const gw_back_exch_t *x, gw_back_exch_info_t *out);

/* HTTP status the gateway answers with for a back error code (table above); 502 for others. */
int gw_back_status_for(int code);

/* Read buffer size of an origin connection: the granularity of pause and of rbufs. A
 * connection starts at GW_BACK_READ_BUF; once a read fills its whole buffer (a body larger
 * than that is streaming) it reads GW_BACK_READ_BUF_MAX at a time until it returns to the
 * pool: a 256 KiB body takes about 5 reads instead of 17 (about 4 % less CPU per request). */
#define GW_BACK_READ_BUF 16384
#define GW_BACK_READ_BUF_MAX 65536
/* Inside a Content-Length body a plain-TCP origin socket is only reported readable with
 * min(rest of the body, read_batch) bytes queued (SO_RCVLOWAT; conn.c "read batching"), and
 * read_batch_wait bounds how long bytes are held back. */
/* Cap on a response head (status line + fields, or a trailer section): past it → GW_E_PARSE. */
#define GW_BACK_MAX_HEAD 65536

#endif
