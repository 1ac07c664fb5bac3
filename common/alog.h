/* common/alog.h — one access log record per request, and its line formats.
 *
 * The front fills a gw_alog_t while a request is under way (the proxy adds what it knows of
 * the origin side) and formats it once, when the front is done with the request, into the
 * worker's log buffer. Formatting is pure: the wall-clock time is an argument.
 *
 * combined (nginx, Apache):
 *   127.0.0.1 - - [05/Dec/2026:11:40:22 +0000] "GET /a HTTP/2.0" 200 1024 "-" "curl/7.88.1"
 *   with `"`, `\` and bytes outside 0x20..0x7e written as \xHH, as nginx does. The request is
 *   `"-"` when none was read, and the raw request line (escaped) for an HTTP/1.1 request
 *   refused before its head was whole. A request that got no response head shows the status
 *   nginx would log (gw_alog_clf_status), since log readers refuse 0.
 * combined_timing: combined, then nginx's $request_time $upstream_connect_time
 *   $upstream_header_time $upstream_response_time (seconds, ms resolution, `-` when unknown),
 *   the request id (`-` when none), then the client certificate's verification and subject,
 *   quoted (`"-"` without TLS or without a certificate's subject):
 *   ... "curl/7.88.1" 0.003 0.000 0.002 0.003 4f1c0a0e9d3b2a1c0000000000000001 "NONE" "-"
 * json: one object per line, every value escaped (RFC 8259 §7): control characters as \uXXXX,
 *   bytes that are not UTF-8 as U+FFFD; each string value cut at GW_ALOG_MAX_VALUE bytes.
 */
#ifndef GW_COMMON_ALOG_H
#define GW_COMMON_ALOG_H

#include <stdint.h>

#include "common/buf.h"

#define GW_ALOG_MAX_VALUE 4096
#define GW_ALOG_ID_MAX 64 /* request id bytes kept */

typedef enum { GW_ALOG_COMBINED = 0, GW_ALOG_JSON, GW_ALOG_COMBINED_TIMING } gw_alog_format_t;

/* What a route's basic_auth made of a request (gw_alog_t.auth). */
typedef enum {
    GW_ALOG_AUTH_NONE = 0, /* the route has none */
    GW_ALOG_AUTH_CACHED,   /* credentials verified before (the worker's cache): let in */
    GW_ALOG_AUTH_VERIFIED, /* credentials verified now: let in */
    GW_ALOG_AUTH_FAILED,   /* verified and wrong (unknown user or wrong password): 401 */
    GW_ALOG_AUTH_MISSING,  /* none, malformed or repeated credentials: 401 / 400 */
    GW_ALOG_AUTH_LIMITED,  /* too many failures from the client: 429 */
    GW_ALOG_AUTH_BUSY,     /* too many verifications queued: 503 */
    GW_ALOG_AUTH_N
} gw_alog_auth_t;
/* "none", "cached", "verified", "failed", "missing", "limited", "busy". */
const char *gw_alog_auth_str(gw_alog_auth_t a);

typedef struct {
    /* What every request writes or reads, with the access log on or off (the front, the proxy
     * and the metrics): first, in two cache lines. gw_alog_init_hot clears only these. */
    uint64_t start_ns;        /* monotonic: the request head was complete */
    uint64_t head_ns;         /* the response head was handed to the client side; 0: none */
    uint64_t last_ns;         /* the response's last byte was handed to the client side; 0: none */
    uint64_t end_ns;          /* the front was done with the request */
    uint64_t bytes_in;        /* request body bytes received */
    uint64_t bytes_out;       /* response body bytes sent */
    int64_t connect_us;       /* connecting to the origin for this request; -1: a kept connection */
    int64_t upstream_head_us; /* from the origin exchange start to its response head; -1 none */
    int64_t upstream_queue_us; /* of that, waiting in the upstream's queue for a connection; -1
                                  none (metrics only: no log format prints it) */
    int64_t upstream_resp_us;  /* ... to its last byte (or its failure); -1 none */
    const char *route;         /* the route's name, NULL when none matched */
    const char *upstream;      /* NULL when the request never went to one */
    const char *server;        /* the origin server that answered (or was tried last) */
    const char *h2_error; /* RFC 9113 §7 name of the code the stream was reset with, or NULL */
    uint32_t route_ix;    /* the route's index in the configuration, UINT32_MAX when none */
    unsigned status;      /* 0: no response head was sent */
    uint8_t retries;
    uint8_t coalesced : 1;
    uint8_t throttled : 1;
    uint8_t rate_limited : 1; /* answered 429 by the gateway (routes[].request_rate) */
    uint8_t pushed : 1;       /* an HTTP/2 server push the gateway promised (RFC 9113 §8.4) */
    uint8_t client_gone : 1;  /* the client reset the stream or closed the connection before
                                 the front was done with the request */
    uint8_t auth;             /* gw_alog_auth_t */
    uint8_t id_len;
    /* Only the log line's (gw_alog_init clears them; the front leaves them as they were while
     * the access log is off, as then no line is made). */
    const char *peer;  /* "ip:port" or "[ip6]:port" */
    const char *proto; /* "h2", "http/1.1" or "http/1.0" (the request line's version) */
    const char *tls_version, *tls_cipher, *sni; /* NULL without TLS (sni: none sent) */
    /* the client certificate (gw_cstream_t's tls_client_verify and tls_client_subject): NULL
     * without TLS */
    const char *client_verify, *client_subject;
    gw_slice_t method, authority, path, referer, user_agent;
    gw_slice_t request_line; /* HTTP/1.1 refused before its head was whole (method empty): the
                                request line as received, possibly cut short or empty */
    const char *user;        /* basic auth's user, let in (remote_user); NULL: none. It lives as
                                long as the configuration the request came under */
    const char *cache; /* on a route with cache: true, what the shared cache did ("hit", "miss",
                          "stale", "revalidated", "stale-if-error", ...: static); NULL else */
    /* the request id (x-request-id), id_len bytes (0: none); last, and left as it was by
       gw_alog_init: without a request id no request touches these bytes */
    char id[GW_ALOG_ID_MAX];
} gw_alog_t;

/* A fresh record (times 0, no strings, no request id, connect_us and the upstream times -1);
 * id[] is not cleared (id_len says how much of it holds). */
void gw_alog_init(gw_alog_t *r);
/* The same for the fields before peer only: a record that is counted (metrics) but never
 * formatted, as while the access log is off. */
void gw_alog_init_hot(gw_alog_t *r);

/* Append one line (with its '\n') for r at wall-clock time now_us (microseconds since the
 * Unix epoch, UTC). 0 or GW_E_NOMEM (out is then unchanged). */
int gw_alog_format(gw_bytes_t *out, gw_alog_format_t fmt, const gw_alog_t *r, uint64_t now_us);

/* The status the combined formats show: the response's, or for a request that got no response
 * head the one nginx would log: 499 when the client went away first, 400 when the gateway reset
 * it for the client's protocol error (PROTOCOL_ERROR, FRAME_SIZE_ERROR, FLOW_CONTROL_ERROR,
 * STREAM_CLOSED, COMPRESSION_ERROR), 503 for REFUSED_STREAM (RFC 9113 §8.7: not processed),
 * 429 for ENHANCE_YOUR_CALM, 500 for INTERNAL_ERROR, and 444 (closed without a response)
 * otherwise. */
unsigned gw_alog_clf_status(const gw_alog_t *r);

/* ---- log_format templates (nginx's log_format) ----
 *
 * A template is text with variables, `$name` or `${name}`: remote_addr, remote_port,
 * remote_user (basic auth's user), time_local, time_iso8601, msec, request, request_method,
 * request_uri, server_protocol, host, status (gw_alog_clf_status), body_bytes_sent,
 * request_body_length, http_referer, http_user_agent, request_time, upstream_addr,
 * upstream_connect_time, upstream_header_time, upstream_response_time, request_id,
 * ssl_protocol, ssl_cipher, ssl_server_name, ssl_client_verify, ssl_client_s_dn, route, upstream,
 * retries, h2_error. Values are escaped as in combined (`"`, `\` and bytes outside printable ASCII
 * as \xHH) and `-` when empty or unknown. */
#define GW_ALOG_TMPL_MAX 2048   /* template bytes */
#define GW_ALOG_TMPL_MAX_OPS 64 /* variables and literal runs */
typedef struct gw_alog_tmpl gw_alog_tmpl_t;

/* Compile text into *out (the caller frees it with gw_alog_tmpl_del). 0; GW_E_NOMEM;
 * GW_E_INVAL with *why (static: "unknown variable", ...) and *at (the byte offset in text). */
int gw_alog_tmpl_new(const char *text, gw_alog_tmpl_t **out, const char **why, size_t *at);
void gw_alog_tmpl_del(gw_alog_tmpl_t *t);
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* The name of variable i (0, 1, ...), NULL past the last. */
const char *gw_alog_tmpl_vars(size_t i);
#endif
/* Append r's line (with its '\n') as t says, as gw_alog_format does. 0 or GW_E_NOMEM. */
int gw_alog_format_tmpl(gw_bytes_t *out, const gw_alog_tmpl_t *t, const gw_alog_t *r,
                        uint64_t now_us);

/* A request id is kept from the client when it is 1..GW_ALOG_ID_MAX bytes of [A-Za-z0-9._:-]
 * (anything else could forge log lines or headers downstream); otherwise one is made. */
int gw_alog_id_valid(gw_slice_t v);
/* A fresh id: 32 lowercase hex digits of (seed, counter); writes r->id. */
void gw_alog_id_make(gw_alog_t *r, uint64_t seed, uint64_t counter);

#endif
