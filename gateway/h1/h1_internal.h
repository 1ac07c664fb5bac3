/* h1/h1_internal.h — what the files of h1/ share (not a public interface).
 *
 * parser.c:     HTTP/1.1 messages on http-parser 2.9, and the scanner that checks every byte of
 *               a head, a chunk line and the CRLF after chunk data before http-parser sees it;
 *               the only file that includes http_parser.h.
 * head.c:       the rules a complete message head must meet: its framing (one Content-Length
 *               or chunked alone), a request's version, Host and target.
 * client.c:     the origin side: one response per request, body offsets into the caller's
 *               buffer.
 * serializer.c: every HTTP/1.1 byte we write.
 */
#ifndef GW_H1_INTERNAL_H
#define GW_H1_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "h1/parser.h"

/* A complete head as http-parser read it, in words that do not need http_parser.h. */
typedef struct {
    gw_h1_kind_t kind;
    unsigned major, minor;   /* the HTTP version */
    int chunked;             /* the framing is chunked */
    uint64_t content_length; /* http-parser's, UINT64_MAX when there is none */
    gw_slice_t method;       /* a request's method, as written */
    gw_slice_t target;       /* a request's target */
    const gw_h1_field_t *fields;
    size_t fields_len;
} gw_h1__head_t;

/* What a head's fields say, counted once. */
typedef struct {
    size_t n_cl, n_te, n_host; /* Content-Length, Transfer-Encoding and Host fields */
    gw_slice_t te;             /* the last Transfer-Encoding value */
    unsigned flags;            /* GW_H1_MSG_F_EXPECT_100, GW_H1_MSG_F_UPGRADE_H2C */
} gw_h1__fields_t;

/* Why a head is refused: the code the parser returns, the status to answer, the reason. */
typedef struct {
    int code;
    unsigned status;
    const char *reason;
} gw_h1__refusal_t;

/* Count the fields f[0..n) into *hf. */
void gw_h1__count_fields(const gw_h1_field_t *f, size_t n, gw_h1__fields_t *hf);

/* The rules of RFC 9112 §6 (framing) for any head, and for a request those of RFC 9110 §6.2
 * (version), RFC 9112 §3.2 (Host) and RFC 3986 (target, authority): 0, or -1 with *why set. */
int gw_h1__check_head(const gw_h1__head_t *h, const gw_h1__fields_t *hf, gw_h1__refusal_t *why);

#endif
