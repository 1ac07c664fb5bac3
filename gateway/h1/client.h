/* h1/client.h — the client side of the HTTP/1.1 codec, for origin connections (back/).
 *
 * Sans-IO, two halves:
 * - Request out (serializer.c): the request head (request line, Host, fields, framing), and
 *   the chunk framing of a request body. Nothing with CR, LF or NUL is ever written.
 * - Response in (client.c, on h1/parser.h and so on http-parser): one response per request,
 *   reported as events: interim heads (1xx other than 101), the final head, body bytes by
 *   offset into the caller's buffer (no copy), trailers, complete. The keep-alive decision
 *   is taken from the final head (RFC 9112 §9.3). Strict on purpose: anything that could
 *   desynchronise a pooled connection (h1/parser.h lists it) is an error, and nothing of such
 *   a response is passed on after the error.
 *
 * One gw_h1_client_t per origin connection, reused across its requests:
 *   new → [start → feed* (→ eof)]* → del
 */
#ifndef GW_H1_CLIENT_H
#define GW_H1_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "h1/parser.h"
#include "h1/serializer.h" /* chunk framing of request bodies */

/* ---- request head and body framing (serializer.c) ------------------------------------------ */

/* An origin request head. Slices are read during gw_h1_request_head() only. */
typedef struct {
    gw_slice_t method;        /* a token: "GET" */
    gw_slice_t target;        /* origin-form "/path?q": no SP, CR, LF or NUL */
    gw_slice_t host;          /* Host value (RFC 9112 §3.2) */
    const gw_field_t *fields; /* sent in order; the caller dropped hop-by-hop fields */
    size_t fields_len;
    int64_t body_len; /* 0 = no body (no framing field), > 0 = Content-Length, -1 = chunked */
} gw_h1_request_t;

/* Append "METHOD target HTTP/1.1", "Host:", the fields, then `Content-Length: N` (body_len > 0)
 * or `Transfer-Encoding: chunked` (body_len < 0), and the blank line. Returns 0, GW_E_INVAL (a
 * method or field name that is not a token, an empty or unsafe target, a CR, LF or NUL in the
 * host or a value), GW_E_NOMEM or GW_E_LIMIT (out's cap); on error out is as it was. */
int gw_h1_request_head(gw_bytes_t *out, const gw_h1_request_t *req);

/* ---- response parser (client.c) ------------------------------------------------------------ */

typedef enum {
    GW_H1_CLIENT_IDLE = 0, /* no request started: a byte now is an error */
    GW_H1_CLIENT_HEAD,     /* waiting for the final head (interim heads may come first) */
    GW_H1_CLIENT_BODY,     /* final head seen, body not finished */
    GW_H1_CLIENT_DONE,     /* the response is complete */
    GW_H1_CLIENT_FAILED,   /* malformed, cut short or stopped by a callback: feed no more */
    GW_H1_CLIENT_TUNNEL,   /* an awaited 101 came: every later byte is on_body, EOF ends it */
} gw_h1_client_state_t;
const char *gw_h1_client_state_str(gw_h1_client_state_t s);

/* Events; user_data is the pointer given to gw_h1_client_new(). Each returns 0 to go on, or a
 * negative code to stop at once: gw_h1_client_feed() (or _eof) then returns that code and the
 * client is FAILED. Any callback may be NULL. */
typedef struct {
    /* A response head: interim when head->status < 200 (zero or more, before the final one),
     * else final (once). Slices point into the client's head arena: valid during the call. */
    int (*on_head)(void *user_data, const gw_h1_msg_t *head);
    /* len (> 0) de-chunked body bytes at buf[off..off+len), buf being the buffer passed to the
     * gw_h1_client_feed() on the stack. */
    int (*on_body)(void *user_data, size_t off, size_t len);
    /* Trailer fields of a chunked body (none: not called); slices valid during the call. */
    int (*on_trailers)(void *user_data, const gw_field_t *fields, size_t n);
    /* The response ended: gw_h1_client_keep_alive() says whether the connection may carry
     * another request. */
    int (*on_complete)(void *user_data);
} gw_h1_client_cbs_t;

typedef struct gw_h1_client gw_h1_client_t;

/* A client, or NULL when out of memory. limits bounds a response head and a trailer section
 * (fields zero: 64 KiB and 128 fields); cbs is copied. */
gw_h1_client_t *gw_h1_client_new(const gw_h1_limits_t *limits, const gw_h1_client_cbs_t *cbs,
                                 void *user_data);
void gw_h1_client_del(gw_h1_client_t *c);

/* A request was sent: expect its response. head_only: it was a HEAD, so the response has no
 * body whatever its fields say. Only from IDLE or DONE (asserted). */
void gw_h1_client_start(gw_h1_client_t *c, int head_only);

/* The request just started asked to Upgrade (RFC 9110 §7.8, WebSocket): a 101 is then its
 * final head (on_head with status 101), after which the connection is a byte tunnel: every
 * byte fed, from the one after that head, is reported by on_body as it is, and the origin's
 * close completes it (on_complete from gw_h1_client_eof; keep-alive 0). Any other final
 * answer is an ordinary response. Call it after gw_h1_client_start(). */
void gw_h1_client_expect_upgrade(gw_h1_client_t *c);

/* Parse buf[off..off+len). Returns the bytes consumed: all of them, or fewer when the response
 * completed before the end (the rest is not part of it: the caller must not reuse the
 * connection), 0 in DONE; or a negative code: GW_E_PARSE (malformed response, or a byte while
 * IDLE), GW_E_LIMIT (head or trailers over the limit), GW_E_NOMEM, or a callback's code. */
ssize_t gw_h1_client_feed(gw_h1_client_t *c, const uint8_t *buf, size_t off, size_t len);

/* The origin closed the connection. Returns 0 when nothing was awaited (IDLE, DONE) or when
 * this ends a close-delimited body (on_complete fires from here, keep-alive is 0); GW_E_IO
 * when the response was cut short or never came; or a callback's code. */
int gw_h1_client_eof(gw_h1_client_t *c);

gw_h1_client_state_t gw_h1_client_state(const gw_h1_client_t *c);
/* Status of the final head, 0 before it. */
unsigned gw_h1_client_status(const gw_h1_client_t *c);
/* Whether the connection may carry another request after this response (RFC 9112 §9.3: 1.1
 * unless "close", 1.0 only with "keep-alive"; never after a close-delimited body). 0 before
 * the final head. */
int gw_h1_client_keep_alive(const gw_h1_client_t *c);
/* BODY of a Content-Length response: the body bytes not yet fed (> 0); else -1 (chunked or
 * close-delimited bodies, and every other state). */
int64_t gw_h1_client_body_left(const gw_h1_client_t *c);

#endif
