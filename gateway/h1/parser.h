/* h1/parser.h — sans-IO HTTP/1.1 message parser: requests for the HTTP/1.1 front, responses
 * for origin connections (h1/client.h wraps the response side for back/).
 *
 * Built on http-parser 2.9; this module's parser.c is the only file that includes
 * <http_parser.h>. Bytes go in with gw_h1_parser_feed(); the parser reports one message head
 * (version-neutral: method, target, status, fields), its body pieces, its trailers and its end
 * through callbacks. After a complete message the parser pauses, so that pipelined messages
 * are handled one at a time and in order: the caller resumes it with gw_h1_parser_resume()
 * once it is ready for the next message. A 1xx response (other than 101, refused) is reported
 * through on_head as an interim head and parsing goes on with the next head without a pause.
 *
 * http-parser is lenient where a proxy must not be, so parser.c checks the bytes before it sees
 * them: the head and trailer lines, the status line, chunk-size lines and the CRLF after chunk
 * data. Smuggling defences (RFC 9112 §2.2, §4, §5.1, §5.2, §6.1, §6.3, §7.1, §11.2): bare CR,
 * bare LF, NUL and obs-fold in the head or trailers, whitespace or other non-token bytes in a
 * field name, a malformed status line, a malformed chunk line, Content-Length together with
 * Transfer-Encoding, differing or repeated Content-Length, Transfer-Encoding whose final coding
 * is not chunked, and a missing Host in an HTTP/1.1 request are errors: for a request the
 * caller answers 400 and closes. A head larger than the limit is 431 (414 while the request
 * line alone passes it). Also refused: a request-target with bytes outside RFC 3986
 * path and query characters (but for '[' and ']' around an absolute-form's IP-literal host),
 * or in none of origin-form, asterisk-form and an http(s) absolute-form with an authority and
 * no userinfo (RFC 9112 §3.2), and a Host that is not an RFC 3986 authority (400), a transfer
 * coding other than chunked alone (request 501; the coding would be lost when the body is
 * re-framed), a Content-Length past 2^63 - 1, an HTTP major version other than 1 (505).
 *
 * A request's method is any token (RFC 9110 §9.1, http/http.h), passed on as written;
 * http-parser, which knows a fixed list, never sees it. CONNECT is refused (405).
 */
#ifndef GW_H1_PARSER_H
#define GW_H1_PARSER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"

/* name as received (compare with gw_slice_eq_nocase); value without leading and trailing
 * whitespace. The common field type of common/buf.h. */
typedef gw_field_t gw_h1_field_t;

/* GW_H1_MSG_F_*: properties of a parsed message head. */
enum {
    GW_H1_MSG_F_KEEP_ALIVE = 1u << 0,  /* the connection may carry another message after this */
    GW_H1_MSG_F_CHUNKED = 1u << 1,     /* body framed by chunked transfer coding */
    GW_H1_MSG_F_EXPECT_100 = 1u << 2,  /* Expect: 100-continue */
    GW_H1_MSG_F_UPGRADE_H2C = 1u << 3, /* Upgrade: h2c was asked (we never switch, RFC 9113 §3.1) */
};

/* A message head. Every slice points into the parser's head arena and stays valid until the
 * parser is resumed for the next message (or freed). */
typedef struct {
    gw_slice_t method; /* requests */
    gw_slice_t target; /* requests: request-target as sent */
    unsigned status;   /* responses */
    unsigned version_major, version_minor;
    const gw_h1_field_t *fields;
    size_t fields_len;
    int64_t content_length; /* -1 when absent */
    unsigned flags;         /* GW_H1_MSG_F_* */
} gw_h1_msg_t;

typedef struct {
    /* Return 0 to go on, negative to stop parsing with that code. Any callback may be NULL. */
    /* A message head. For an interim response (msg->status < 200) the slices are valid during
     * the call only: the next head reuses the arena. */
    int (*on_head)(void *user_data, const gw_h1_msg_t *msg);
    /* Body bytes (de-chunked), pointing into the buffer given to gw_h1_parser_feed(). */
    int (*on_body)(void *user_data, const uint8_t *p, size_t len);
    int (*on_complete)(void *user_data);
    /* Trailer fields of a chunked body (RFC 9112 §7.1.2), before on_complete; not called for an
     * empty trailer section. The slices are valid during the call only. */
    int (*on_trailers)(void *user_data, const gw_h1_field_t *fields, size_t n);
} gw_h1_callbacks_t;

typedef struct {
    size_t max_head;   /* start line + fields, bytes (431 past it); also bounds trailers */
    size_t max_fields; /* number of fields (431 past it); also bounds trailers */
} gw_h1_limits_t;

typedef enum {
    GW_H1_REQUEST = 0,
    GW_H1_RESPONSE = 1,
} gw_h1_kind_t;

typedef struct gw_h1_parser gw_h1_parser_t;

/* A new parser, or NULL when out of memory. Callbacks and user_data are kept. */
gw_h1_parser_t *gw_h1_parser_new(gw_h1_kind_t kind, const gw_h1_limits_t *limits,
                                 const gw_h1_callbacks_t *cb, void *user_data);
/* A final head's slices are valid during on_head only, as an interim head's: the arena, the
 * field offsets and the field array are the thread's while a head is parsed, and go back to it
 * once on_head returned (the next head parsed on the thread, by any parser, uses the same
 * memory, still in the cache). For the response side (h1/client.c), whose caller copies what
 * it keeps of a head. */
void gw_h1_parser_lend_head(gw_h1_parser_t *p);
void gw_h1_parser_del(gw_h1_parser_t *p);

/* Parse from data[0..len). Returns the bytes consumed (less than len when the parser paused
 * after a complete message: the rest belongs to the next one) or a negative code: GW_E_PARSE
 * for a malformed or smuggling-prone message, GW_E_LIMIT for an oversized head, or a code
 * returned by a callback. After an error the parser accepts nothing more. */
ssize_t gw_h1_parser_feed(gw_h1_parser_t *p, const uint8_t *data, size_t len);

/* The peer closed its side. Returns 0 when that ends the stream of messages cleanly (between
 * messages, or a close-delimited response body), GW_E_PARSE when a message was cut short. */
int gw_h1_parser_eof(gw_h1_parser_t *p);

/* GW_H1_RESPONSE: the message to parse next answers a HEAD request, so it has no body whatever
 * its fields say (RFC 9112 §6.3 rule 1). Set it before its first byte is fed; resume clears it. */
void gw_h1_parser_set_head_response(gw_h1_parser_t *p, int head);

/* GW_H1_RESPONSE: the message to parse next answers a request that asked to Upgrade (RFC 9110
 * §7.8), so a 101 is its final answer: the parser stops after that head (paused, as after a
 * complete message) and the bytes after it are not HTTP (feed returns fewer than given).
 * Without it a 101 is an error. Set it before the first byte; resume clears it. */
void gw_h1_parser_set_upgrade(gw_h1_parser_t *p, int upgrade);

/* Non-zero while paused after a complete message. */
int gw_h1_parser_paused(const gw_h1_parser_t *p);
/* Ready for the next message: the previous head's slices become invalid. No-op unless paused. */
void gw_h1_parser_resume(gw_h1_parser_t *p);

/* Non-zero while inside a message (bytes of a head or body have been seen). */
int gw_h1_parser_in_message(const gw_h1_parser_t *p);

/* Inside a Content-Length body: the body bytes still to come (> 0). Otherwise -1: before or
 * between bodies, a chunked or close-delimited body, a body skipped (HEAD, 1xx, 204, 304). */
int64_t gw_h1_parser_body_left(const gw_h1_parser_t *p);

/* After an error: the status to answer (400, 405, 414, 431, 501, 505) and a static reason for
 * the log. */
unsigned gw_h1_parser_error_status(const gw_h1_parser_t *p);
const char *gw_h1_parser_error_reason(const gw_h1_parser_t *p);

/* GW_H1_REQUEST: the request line of the current request as received so far, without its CR
 * LF (empty before its first byte and for responses), for the log of a request refused before
 * its head was whole (nginx's $request). Valid until the parser is resumed or freed. */
gw_slice_t gw_h1_parser_request_line(const gw_h1_parser_t *p);

/* The first field named `name` (case-insensitive) in msg, or NULL. */
const gw_h1_field_t *gw_h1_msg_field(const gw_h1_msg_t *msg, const char *name);

/* The http-parser this codec was compiled against (*built) and the one it runs with (*running),
 * each as major << 16 | minor << 8 | patch: for `h2gate --version` (this file alone includes
 * http_parser.h). */
void gw_h1_http_parser_version(unsigned long *built, unsigned long *running);

#endif
