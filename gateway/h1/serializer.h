/* h1/serializer.h — HTTP/1.1 message heads and gateway-made responses, as bytes.
 *
 * Every function appends to a caller-owned gw_bytes_t and refuses (GW_E_INVAL) a name or
 * value holding CR, LF or NUL, so that we never emit a message that desynchronises a peer.
 */
#ifndef GW_H1_SERIALIZER_H
#define GW_H1_SERIALIZER_H

#include <stdint.h>

#include "common/buf.h"
#include "h1/parser.h"

/* The reason phrase we send for a status ("Service Unavailable"); "Unknown" if none. */
const char *gw_h1_reason(unsigned status);

/* content_length of gw_h1_response_head(): no framing field, the body ends with the
 * connection (RFC 9112 §6.3 rule 8; for HTTP/1.0 clients, which know no chunked coding). */
#define GW_H1_CLOSE_DELIMITED (-2)

/* Append "HTTP/1.1 <status> <reason>\r\n", the fields, then framing: `Content-Length: N` when
 * content_length >= 0, `Transfer-Encoding: chunked` when it is -1 (and the status allows a
 * body), none for GW_H1_CLOSE_DELIMITED (which needs !keep_alive), `Connection: close` when
 * !keep_alive, and the blank line. 0, GW_E_INVAL, GW_E_NOMEM, GW_E_LIMIT (out's cap). */
int gw_h1_response_head(gw_bytes_t *out, unsigned status, const gw_h1_field_t *fields,
                        size_t fields_len, int64_t content_length, int keep_alive);

/* A complete gateway-made response with a short text/plain body and `server: h2gate`;
 * head_only omits the body (answer to HEAD) but keeps its Content-Length. */
int gw_h1_simple_response(gw_bytes_t *out, unsigned status, const char *body, int keep_alive,
                          int head_only);

/* "HTTP/1.1 100 Continue\r\n\r\n" */
int gw_h1_continue(gw_bytes_t *out);

/* ---- chunked framing (RFC 9112 §7.1), of request and response bodies ---- */

/* Longest chunk-size line gw_h1_chunk_head() writes: 16 hex digits and CRLF. */
#define GW_H1_CHUNK_HEAD_MAX 18
/* What follows each chunk's data (RFC 9112 §7.1). */
#define GW_H1_CHUNK_END "\r\n"
#define GW_H1_CHUNK_END_LEN 2

/* Write the chunk-size line for a chunk of len (> 0) bytes into out; returns its length.
 * (len 0 would be the last-chunk: use gw_h1_last_chunk().) */
size_t gw_h1_chunk_head(uint8_t out[GW_H1_CHUNK_HEAD_MAX], size_t len);

/* Append the end of a chunked body: last-chunk, the trailer fields (may be NULL when n is 0)
 * and the final CRLF (RFC 9112 §7.1.2). Returns 0, GW_E_INVAL (a name that is not a token, a
 * value with CR, LF or NUL), GW_E_NOMEM or GW_E_LIMIT; on error out is as it was. */
int gw_h1_last_chunk(gw_bytes_t *out, const gw_field_t *trailers, size_t n);

#endif
