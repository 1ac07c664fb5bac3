/* http/http.h — the rules of HTTP itself (RFC 9110 and its companions), version-neutral and
 * sans-IO: what a token, a request-target, an authority and a field value may hold, which
 * fields are connection-specific, the request methods and their properties.
 *
 * One home for each rule: the HTTP/1.1 codec (h1/), the HTTP/2 engine (h2/), the translator
 * (proxy/) and the fronts (front/) call these functions instead of keeping a copy. Nothing here
 * allocates or keeps state: every function reads the slice it is given and returns.
 *
 * Files: chars.c (the byte classes and the syntax predicates over them), fields.c (field lists
 * and values), method.c (request methods).
 */
#ifndef GW_HTTP_HTTP_H
#define GW_HTTP_HTTP_H

#include <stdint.h>

#include "common/buf.h"

/* ---- byte classes (chars.c) ------------------------------------------------------------ */

/* GW_HTTP_C_*: the classes a byte belongs to, one bit each, in gw_http_char_class[byte]. */
enum {
    GW_HTTP_C_TCHAR = 1u << 0,     /* RFC 9110 §5.6.2 tchar: ALPHA, DIGIT, !#$%&'*+-.^_`|~ */
    GW_HTTP_C_TARGET = 1u << 1,    /* RFC 3986 §3.3 pchar, "/" and §3.4 "?": unreserved,
                                      sub-delims, ":", "@", "/", "?" ("%" is checked apart) */
    GW_HTTP_C_AUTHORITY = 1u << 2, /* RFC 3986 §3.2 authority without userinfo: unreserved,
                                      sub-delims, ":", "[", "]" ("%" is checked apart) */
    GW_HTTP_C_FIELD = 1u << 3,     /* a byte a field value may hold (RFC 9110 §5.5):
                                      field-vchar, obs-text, SP, HTAB; no other control, no DEL */
    GW_HTTP_C_H2NAME = 1u << 4,    /* a byte an HTTP/2 field name may hold (RFC 9113 §8.2.1):
                                      0x21-0x7e but uppercase letters and ":" */
};

/* The one table of byte classes: GW_HTTP_C_* bits for every byte value. */
extern const uint8_t gw_http_char_class[256];

/* Non-zero when c is a tchar (RFC 9110 §5.6.2). */
static inline int gw_http_is_tchar(uint8_t c)
{
    return (gw_http_char_class[c] & GW_HTTP_C_TCHAR) != 0;
}

/* Non-zero when c may appear in a field value (GW_HTTP_C_FIELD). */
static inline int gw_http_is_field_byte(uint8_t c)
{
    return (gw_http_char_class[c] & GW_HTTP_C_FIELD) != 0;
}

/* Non-zero when s is a non-empty token (RFC 9110 §5.6.2): a valid method or field name. */
int gw_http_is_token(gw_slice_t s);

/* Non-zero when s is a non-empty request-target made only of RFC 3986 path and query
 * characters (GW_HTTP_C_TARGET) and "%" followed by two hex digits (pct-encoded, passed on as
 * it is, never decoded). No control byte, space, DEL, byte >= 0x80, '#', or other delimiter: an
 * origin that splits the request line on whitespace must see the request we checked. Covers
 * origin-form, absolute-form without IP-literal and asterisk-form. */
int gw_http_is_request_target(gw_slice_t s);

/* Non-zero when s (may be empty) holds only RFC 3986 §3.2 authority characters without
 * userinfo (GW_HTTP_C_AUTHORITY) and pct-encoded bytes. '@' is refused: RFC 9113 §8.3.1 and
 * RFC 9110 §4.2.4 forbid userinfo in http(s) URIs. */
int gw_http_is_authority(gw_slice_t s);

/* Non-zero when s holds a CR, LF or NUL: the bytes no field value may carry in any version
 * (RFC 9110 §5.5, RFC 9113 §8.2.1), whatever else it holds. Eight bytes at a time: for the
 * values of every request and response we write. */
int gw_http_has_crlfnul(gw_slice_t s);

/* ---- fields (fields.c) ----------------------------------------------------------------- */

/* A field value as RFC 9110 §5.5 writes it: only GW_HTTP_C_FIELD bytes (no control but HTAB,
 * no DEL), and no leading or trailing SP / HTAB. The empty value is valid. */
int gw_http_field_value_valid(gw_slice_t v);

/* Non-zero for the connection-specific fields (RFC 9110 §7.6.1, RFC 9113 §8.2.2): connection,
 * keep-alive, proxy-connection, transfer-encoding, upgrade and te, compared
 * case-insensitively. HTTP/2 allows te only as "trailers"; a proxy forwards none of them. */
int gw_http_field_is_connection_specific(gw_slice_t name);

/* A Content-Length value (RFC 9110 §8.6: 1*DIGIT) of 1 to 18 digits into *out: 0, or -1 when
 * it is not one (empty, a sign, a space, 19 digits or more). */
int gw_http_content_length_parse(gw_slice_t v, int64_t *out);

/* ---- request methods (method.c) -------------------------------------------------------- */

/* Any token is a method (RFC 9110 §9.1: "the method token is case-sensitive"; the set is
 * extensible): the HTTP/1.1 and HTTP/2 fronts accept the same methods and refuse the same
 * non-tokens (400, or RST_STREAM(PROTOCOL_ERROR) for HTTP/2). What the gateway does with a
 * request depends on the properties below, which it knows for the methods of RFC 9110 and RFC
 * 5789 only: a method it does not know (`BREW`, `PROPFIND`, a misspelt `get`) is forwarded as
 * unsafe and non-idempotent, so it is never sent twice (retry, pipelining) and never shares an
 * answer (coalescing). CONNECT (§9.3.6) is the one method the gateway refuses itself (405). */

/* GW_HTTP_METHOD_F_*: what RFC 9110 §9.2 says of a method. */
enum {
    GW_HTTP_METHOD_F_SAFE = 1u << 0,       /* §9.2.1: GET, HEAD, OPTIONS, TRACE */
    GW_HTTP_METHOD_F_IDEMPOTENT = 1u << 1, /* §9.2.2: the safe ones, PUT, DELETE: may be sent
                                              again */
    GW_HTTP_METHOD_F_CACHEABLE = 1u << 2,  /* §9.2.3: GET, HEAD, POST (RFC 9111 §3 narrows
                                              POST) */
};

/* Non-zero when m may be a method: a non-empty token (RFC 9110 §9.1, §5.6.2). */
int gw_http_method_valid(gw_slice_t m);

/* The GW_HTTP_METHOD_F_* properties of m (compared case-sensitively); 0 for a method the
 * gateway does not know, whatever it is called. */
unsigned gw_http_method_flags(gw_slice_t m);

/* Non-zero when m may be sent again (GW_HTTP_METHOD_F_IDEMPOTENT). */
static inline int gw_http_method_idempotent(gw_slice_t m)
{
    return (gw_http_method_flags(m) & GW_HTTP_METHOD_F_IDEMPOTENT) != 0;
}

/* Non-zero for CONNECT (§9.3.6), which asks for a tunnel rather than a representation. */
int gw_http_method_is_connect(gw_slice_t m);

#endif
