#include "h1/serializer.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"

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
    for (size_t i = 0; i < s.len; i++)
        if (s.base[i] == '\r' || s.base[i] == '\n' || s.base[i] == 0)
            return 0;
    return 1;
}

static int put(gw_bytes_t *out, const char *s)
{
    return gw_bytes_append(out, s, strlen(s));
}

int gw_h1_response_head(gw_bytes_t *out, unsigned status, const gw_h1_field_t *fields,
                        size_t fields_len, int64_t content_length, int keep_alive)
{
    if (status < 100 || status > 999)
        return GW_E_INVAL;
    for (size_t i = 0; i < fields_len; i++)
        if (!fields[i].name.len || !clean(fields[i].name) || !clean(fields[i].value))
            return GW_E_INVAL;
    size_t mark = out->len;
    char line[96];
    int rv;
    snprintf(line, sizeof(line), "HTTP/1.1 %u %s\r\n", status, gw_h1_reason(status));
    if ((rv = put(out, line)) < 0)
        goto fail;
    for (size_t i = 0; i < fields_len; i++) {
        if ((rv = gw_bytes_append(out, fields[i].name.base, fields[i].name.len)) < 0 ||
            (rv = put(out, ": ")) < 0 ||
            (rv = gw_bytes_append(out, fields[i].value.base, fields[i].value.len)) < 0 ||
            (rv = put(out, "\r\n")) < 0)
            goto fail;
    }
    int bodyless = status < 200 || status == 204 || status == 304;
    if (!bodyless) {
        if (content_length >= 0)
            snprintf(line, sizeof(line), "content-length: %lld\r\n", (long long)content_length);
        else
            snprintf(line, sizeof(line), "transfer-encoding: chunked\r\n");
        if ((rv = put(out, line)) < 0)
            goto fail;
    }
    if (!keep_alive && (rv = put(out, "connection: close\r\n")) < 0)
        goto fail;
    if ((rv = put(out, "\r\n")) < 0)
        goto fail;
    return 0;
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
