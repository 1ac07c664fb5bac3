/* h1/serializer.c — every HTTP/1.1 byte we write: response heads and gateway-made responses
 * (h1/serializer.h, for the front) and request heads and chunk framing (h1/client.h, for the
 * origin side). Each function checks everything first and appends nothing on error. */
#include "h1/serializer.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "h1/client.h"
#include "http/http.h"

const char *gw_h1_reason(unsigned status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 103:
        return "Early Hints";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    }
    return "Unknown";
}

static int clean(gw_slice_t s)
{
    return !gw_http_has_crlfnul(s);
}

/* Copy s to *o and advance it. */
static void emit(uint8_t **o, const void *s, size_t n)
{
    if (n)
        memcpy(*o, s, n);
    *o += n;
}

static int put(gw_bytes_t *out, const char *s)
{
    return gw_bytes_append(out, s, strlen(s));
}

/* One "name: value" CRLF line per field. */
static int put_fields(gw_bytes_t *out, const gw_field_t *f, size_t n)
{
    int rv;
    for (size_t i = 0; i < n; i++)
        if ((rv = gw_bytes_append(out, f[i].name.base, f[i].name.len)) < 0 ||
            (rv = put(out, ": ")) < 0 ||
            (rv = gw_bytes_append(out, f[i].value.base, f[i].value.len)) < 0 ||
            (rv = put(out, "\r\n")) < 0)
            return rv;
    return 0;
}

/* The end of a head: the framing field line and an extra line (either may be NULL), then the
 * blank line. On error out is cut back to mark. */
static int end_head(gw_bytes_t *out, size_t mark, const char *framing, const char *extra)
{
    int rv = 0;
    if ((framing && (rv = put(out, framing)) < 0) || (extra && (rv = put(out, extra)) < 0) ||
        (rv = put(out, "\r\n")) < 0) {
        out->len = mark;
        return rv;
    }
    return 0;
}

int gw_h1_response_head(gw_bytes_t *out, unsigned status, const gw_h1_field_t *fields,
                        size_t fields_len, int64_t content_length, int keep_alive)
{
    if (status < 100 || status > 999 || (content_length == GW_H1_CLOSE_DELIMITED && keep_alive) ||
        content_length < GW_H1_CLOSE_DELIMITED)
        return GW_E_INVAL;
    for (size_t i = 0; i < fields_len; i++)
        if (!fields[i].name.len || !clean(fields[i].name) || !clean(fields[i].value))
            return GW_E_INVAL;
    size_t mark = out->len;
    char line[96];
    int rv;
    snprintf(line, sizeof(line), "HTTP/1.1 %u %s\r\n", status, gw_h1_reason(status));
    if ((rv = put(out, line)) < 0 || (rv = put_fields(out, fields, fields_len)) < 0)
        goto fail;
    const char *framing = NULL;
    if (!(status < 200 || status == 204 || status == 304 ||
          content_length == GW_H1_CLOSE_DELIMITED)) {
        if (content_length >= 0)
            snprintf(line, sizeof(line), "content-length: %lld\r\n", (long long)content_length);
        else
            snprintf(line, sizeof(line), "transfer-encoding: chunked\r\n");
        framing = line;
    }
    return end_head(out, mark, framing, keep_alive ? NULL : "connection: close\r\n");
fail:
    out->len = mark;
    return rv;
}

int gw_h1_simple_response(gw_bytes_t *out, unsigned status, const char *body, int keep_alive,
                          int head_only)
{
    gw_h1_field_t f[2] = {
        {GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")},
        {GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/plain; charset=utf-8")},
    };
    size_t blen = strlen(body);
    size_t mark = out->len;
    int rv = gw_h1_response_head(out, status, f, 2, (int64_t)blen, keep_alive);
    if (rv == 0 && !head_only)
        rv = gw_bytes_append(out, body, blen);
    if (rv < 0)
        out->len = mark;
    return rv;
}

int gw_h1_continue(gw_bytes_t *out)
{
    return put(out, "HTTP/1.1 100 Continue\r\n\r\n");
}

static int fields_ok(const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!gw_http_is_token(f[i].name) || !clean(f[i].value))
            return 0;
    return 1;
}

int gw_h1_request_head(gw_bytes_t *out, const gw_h1_request_t *req)
{
    /* the fronts refuse these before (one rule, http/http.h); kept here so that no path can
     * put a desynchronising request line on an origin connection */
    if (!gw_http_method_valid(req->method) || !gw_http_is_request_target(req->target) ||
        !clean(req->host) || !fields_ok(req->fields, req->fields_len))
        return GW_E_INVAL;
    char line[48];
    size_t line_len = 0;
    if (req->body_len < 0) {
        static const char te[] = "Transfer-Encoding: chunked\r\n";
        memcpy(line, te, sizeof(te) - 1);
        line_len = sizeof(te) - 1;
    } else if (req->body_len > 0) {
        static const char cl[] = "Content-Length: ";
        memcpy(line, cl, sizeof(cl) - 1);
        line_len = sizeof(cl) - 1 + gw_fmt_u64(line + sizeof(cl) - 1, (uint64_t)req->body_len);
        memcpy(line + line_len, "\r\n", 2);
        line_len += 2;
    }
    /* the exact size first: one reservation (a head is one allocation, not a doubling
     * chain), then plain copies; GW_E_LIMIT / GW_E_NOMEM leave out as it was */
    static const char mid[] = " HTTP/1.1\r\nHost: ";
    size_t need =
        req->method.len + 1 + req->target.len + sizeof(mid) - 1 + req->host.len + 2 + line_len + 2;
    for (size_t i = 0; i < req->fields_len; i++)
        need += req->fields[i].name.len + req->fields[i].value.len + 4;
    int rv = gw_bytes_reserve(out, need);
    if (rv < 0)
        return rv;
    uint8_t *o = out->base + out->len;
    /* RFC 9112 §3: request-line = method SP request-target SP HTTP-version */
    emit(&o, req->method.base, req->method.len);
    *o++ = ' ';
    emit(&o, req->target.base, req->target.len);
    emit(&o, mid, sizeof(mid) - 1);
    emit(&o, req->host.base, req->host.len);
    emit(&o, "\r\n", 2);
    for (size_t i = 0; i < req->fields_len; i++) {
        const gw_field_t *f = &req->fields[i];
        emit(&o, f->name.base, f->name.len);
        emit(&o, ": ", 2);
        emit(&o, f->value.base, f->value.len);
        emit(&o, "\r\n", 2);
    }
    emit(&o, line, line_len);
    emit(&o, "\r\n", 2);
    out->len += need;
    GW_ASSERT(o == out->base + out->len);
    return 0;
}

size_t gw_h1_chunk_head(uint8_t out[GW_H1_CHUNK_HEAD_MAX], size_t len)
{
    /* RFC 9112 §7.1: chunk-size = 1*HEXDIG, no leading zeros needed */
    static const char hex[] = "0123456789abcdef";
    uint8_t digits[16];
    size_t n = 0;
    do {
        digits[n++] = (uint8_t)hex[len & 0xf];
        len >>= 4;
    } while (len && n < sizeof(digits));
    size_t k = 0;
    while (n)
        out[k++] = digits[--n];
    out[k++] = '\r';
    out[k++] = '\n';
    return k;
}

int gw_h1_last_chunk(gw_bytes_t *out, const gw_field_t *trailers, size_t n)
{
    if (!fields_ok(trailers, n))
        return GW_E_INVAL;
    size_t mark = out->len;
    int rv;
    /* RFC 9112 §7.1.2: last-chunk trailer-section CRLF */
    if ((rv = put(out, "0\r\n")) < 0 || (rv = put_fields(out, trailers, n)) < 0 ||
        (rv = put(out, "\r\n")) < 0)
        out->len = mark;
    return rv;
}
