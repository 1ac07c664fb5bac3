/* libFuzzer target: the HTTP/1.1 front's request parser over arbitrary bytes, as a client
 * connection feeds it (pipelined requests, resumed one at a time). Every request head it lets
 * through must be one we can forward without desynchronising an origin: a token
 * method, a request-target of RFC 3986 path and query characters only (an absolute-form's
 * IP-literal host aside: gw_http_target_form), a Host that is an authority; and the serializer
 * must write it (an absolute-form one as the front sends it on) as an HTTP/1.1 request line that
 * parses back to the same method and target. The first byte picks the split size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "h1/client.h"
#include "h1/parser.h"
#include "http/http.h"

typedef struct {
    int reparse; /* parsing our own serialized head: just record it */
    gw_slice_t method, target;
    uint8_t copy[8192];
    size_t copy_len;
} fz_t;

static int on_head(void *ud, const gw_h1_msg_t *m);

static const gw_h1_callbacks_t cbs = {on_head, NULL, NULL, NULL};

/* Parse data as one request head (our own output); 0 and the method/target copied into r. */
static int reparse(const uint8_t *data, size_t n, fz_t *r)
{
    gw_h1_limits_t lim = {1 << 16, 300};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cbs, r);
    if (!p)
        return GW_E_NOMEM;
    r->reparse = 1;
    ssize_t used = gw_h1_parser_feed(p, data, n);
    gw_h1_parser_del(p);
    return used < 0 ? (int)used : 0;
}

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    fz_t *f = ud;
    if (f->reparse) {
        size_t n = m->method.len + m->target.len;
        if (n > sizeof(f->copy))
            abort();
        memcpy(f->copy, m->method.base, m->method.len);
        memcpy(f->copy + m->method.len, m->target.base, m->target.len);
        f->method = (gw_slice_t){f->copy, m->method.len};
        f->target = (gw_slice_t){f->copy + m->method.len, m->target.len};
        return 0;
    }
    gw_slice_t auth, rest;
    int form = gw_http_target_form(m->target, &auth, &rest);
    if (!gw_http_is_token(m->method) || form < 0)
        abort();
    const gw_h1_field_t *host = gw_h1_msg_field(m, "host");
    if (host && !gw_http_is_authority(host->value))
        abort();
    /* what the back would write to the origin: must be accepted and read back the same (an
     * absolute-form target goes as its path and query, its authority as Host: front/h1_stream.c;
     * "?q" alone would be "/?q" there, left out here) */
    gw_slice_t target = m->target, hv = host ? host->value : GW_SLICE_LIT("h");
    if (form == GW_HTTP_TARGET_ABSOLUTE) {
        if (!rest.len || rest.base[0] != '/')
            return 0;
        target = rest;
        hv = auth;
    }
    gw_h1_request_t req = {m->method, target, hv, NULL, 0, 0};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    int rv = gw_h1_request_head(&out, &req);
    if (rv == GW_E_NOMEM) {
        gw_bytes_free(&out);
        return 0;
    }
    if (rv < 0)
        abort();
    fz_t back = {0};
    if (reparse(out.base, out.len, &back) < 0 || !gw_slice_eq(back.method, m->method) ||
        !gw_slice_eq(back.target, target))
        abort();
    gw_bytes_free(&out);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    data++;
    size--;
    gw_h1_limits_t lim = {4096, 64};
    fz_t f = {0};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cbs, &f);
    if (!p)
        return 0;
    /* pending bytes stay in a buffer, as in the connection's input buffer */
    uint8_t *buf = malloc(size + 1);
    size_t have = 0, pos = 0;
    while (buf && (pos < size || have)) {
        size_t k = size - pos < step ? size - pos : step;
        memcpy(buf + have, data + pos, k);
        have += k;
        pos += k;
        ssize_t used = gw_h1_parser_feed(p, buf, have);
        if (used < 0)
            break;
        memmove(buf, buf + used, have - (size_t)used);
        have -= (size_t)used;
        if (gw_h1_parser_paused(p))
            gw_h1_parser_resume(p);
        else if (used == 0 && pos == size)
            break;
    }
    free(buf);
    gw_h1_parser_del(p);
    return 0;
}
