/* h2/validate.c — request validation of RFC 9113 §8.1-§8.3: field names, pseudo-header
 * fields, and (by the rules of HTTP, http/http.h) field values, Content-Length and
 * connection-specific fields; the decoded header block of a request checked as a whole. Pure
 * functions over a decode context, tested in tests/unit/test_h2_validate.c. */
#include <string.h>

#include "h2/hpack.h"
#include "h2/session_internal.h"
#include "h2/validate.h"
#include "http/http.h"

void gw_h2__bad(decode_ctx_t *c, const char *why)
{
    if (!c->malformed) {
        c->malformed = 1;
        c->why = why;
    }
}

int gw_h2_field_name_valid(gw_slice_t n)
{
    /* §8.2.1: no 0x00-0x20, no uppercase, no 0x7f-0xff, and ':' only as the pseudo prefix
     * (the pseudo-header fields are checked apart) */
    if (n.len == 0)
        return 0;
    uint8_t all = n.base[0] == ':' ? GW_HTTP_C_H2NAME : gw_http_char_class[n.base[0]];
    for (size_t i = 1; i < n.len; i++)
        all &= gw_http_char_class[n.base[i]];
    return (all & GW_HTTP_C_H2NAME) != 0;
}

static int set_pseudo(decode_ctx_t *c, gw_slice_t *slot, gw_slice_t v)
{
    if (slot->base) {
        gw_h2__bad(c, "duplicate pseudo-header");
        return 0;
    }
    *slot = v.base ? v : (gw_slice_t){(const uint8_t *)"", 0};
    return 0;
}

int gw_h2__on_field(void *ud, const gw_hpack_field_t *f)
{
    decode_ctx_t *c = ud;
    if (c->nomem)
        return 0;
    if (!gw_h2_field_name_valid(f->name)) {
        gw_h2__bad(c, "invalid field name");
        return 0;
    }
    if (!gw_http_field_value_valid(f->value)) {
        gw_h2__bad(c, "invalid field value");
        return 0;
    }
    /* copy into the arena so the slices outlive the decoder's buffers */
    uint8_t *p = gw_h2__arena_alloc(c->arena, f->name.len + f->value.len + 1);
    if (!p) {
        c->nomem = 1;
        return 0;
    }
    memcpy(p, f->name.base, f->name.len);
    if (f->value.len)
        memcpy(p + f->name.len, f->value.base, f->value.len);
    gw_slice_t name = {p, f->name.len}, value = {p + f->name.len, f->value.len};

    if (name.base[0] == ':') {
        /* §8.3: pseudo-headers only in requests, before regular fields, known ones only */
        if (c->trailers) {
            gw_h2__bad(c, "pseudo-header in trailers");
            return 0;
        }
        if (c->regular_seen) {
            gw_h2__bad(c, "pseudo-header after regular field");
            return 0;
        }
        if (gw_slice_eq(name, GW_SLICE_LIT(":method")))
            return set_pseudo(c, &c->head.method, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":scheme")))
            return set_pseudo(c, &c->head.scheme, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":authority")))
            return set_pseudo(c, &c->head.authority, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":path")))
            return set_pseudo(c, &c->head.path, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":protocol")))
            return set_pseudo(c, &c->head.protocol, value);
        gw_h2__bad(c, "unknown or response pseudo-header");
        return 0;
    }
    c->regular_seen = 1;
    /* §8.2.2: connection-specific fields make the message malformed, te but "te: trailers"
     * (the names checked below have lengths 2, 7, 8, 10, 14, 16 and 17: others skip the
     * comparisons) */
    size_t nl = name.len;
    int special = nl == 2 || nl == 7 || nl == 8 || nl == 10 || nl == 14 || nl == 16 || nl == 17;
    if (special && gw_http_field_is_connection_specific(name)) {
        if (nl != 2) {
            gw_h2__bad(c, "connection-specific header field");
            return 0;
        }
        if (!gw_slice_eq(value, GW_SLICE_LIT("trailers"))) {
            gw_h2__bad(c, "te other than trailers");
            return 0;
        }
    }
    if (special && !c->trailers && gw_slice_eq(name, GW_SLICE_LIT("content-length"))) {
        int64_t v;
        if (gw_http_content_length_parse(value, &v) < 0) {
            gw_h2__bad(c, "invalid content-length");
            return 0;
        }
        if (c->head.content_length >= 0 && c->head.content_length != v) {
            gw_h2__bad(c, "conflicting content-length");
            return 0;
        }
        c->head.content_length = v;
    }
    if (special && !c->trailers && gw_slice_eq(name, GW_SLICE_LIT("priority")))
        c->priority = value;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        gw_h2_header_t *nh = gw_h2__arena_alloc(c->arena, ncap * sizeof(*nh));
        if (!nh) {
            c->nomem = 1;
            return 0;
        }
        if (c->n)
            memcpy(nh, c->h, c->n * sizeof(*nh));
        c->h = nh;
        c->cap = ncap;
    }
    c->h[c->n].name = name;
    c->h[c->n].value = value;
    c->n++;
    return 0;
}

void gw_h2__check_request(decode_ctx_t *c)
{
    gw_h2_head_t *h = &c->head;
    if (c->malformed)
        return;
    if (!h->method.base) {
        gw_h2__bad(c, "missing :method");
        return;
    }
    if (h->protocol.base) {
        /* RFC 8441 §4: :protocol only after we advertised SETTINGS_ENABLE_CONNECT_PROTOCOL, only
         * on a CONNECT, and then :scheme, :path and :authority are required (checked below as
         * for any request); anything else is malformed (§8.1.1: a stream error) */
        if (!c->connect_protocol) {
            gw_h2__bad(c, ":protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL");
            return;
        }
        if (!gw_http_method_is_connect(h->method)) {
            gw_h2__bad(c, ":protocol on a request that is not CONNECT");
            return;
        }
        if (h->protocol.len == 0 || !gw_http_is_token(h->protocol)) {
            gw_h2__bad(c, "invalid :protocol");
            return;
        }
        if (!h->authority.base || h->authority.len == 0) {
            gw_h2__bad(c, "extended CONNECT without :authority");
            return;
        }
    } else if (gw_http_method_is_connect(h->method)) {
        /* §8.5: :authority only; :scheme and :path omitted */
        if (!h->authority.base || h->authority.len == 0 || h->scheme.base || h->path.base ||
            !gw_http_is_authority(h->authority))
            gw_h2__bad(c, "malformed CONNECT");
        return;
    }
    if (!h->scheme.base || !h->path.base) {
        gw_h2__bad(c, "missing :scheme or :path");
        return;
    }
    if (h->path.len == 0) {
        gw_h2__bad(c, "empty :path");
        return;
    }
    if (h->method.len == 0) {
        gw_h2__bad(c, "empty :method");
        return;
    }
    /* The request head goes on as an HTTP/1.1 request line (RFC 9112 §3): the method is a token
     * (RFC 9110 §9.1, the rule of both fronts: http/http.h) and the target only RFC 3986
     * path and query characters; anything else is a malformed request, the client's fault,
     * never an origin failure (RFC 9113 §8.1.1). */
    if (!gw_http_method_valid(h->method)) {
        gw_h2__bad(c, "invalid :method");
        return;
    }
    if (!gw_http_is_request_target(h->path)) {
        gw_h2__bad(c, "invalid :path");
        return;
    }
    /* §8.3.1: origin-form ("/..."), or "*" for OPTIONS; anything else would go to the origin
     * as a request line it reads otherwise (found by fuzz_translate) */
    if (h->path.base[0] != '/' && !(h->path.len == 1 && h->path.base[0] == '*' &&
                                    gw_slice_eq(h->method, GW_SLICE_LIT("OPTIONS")))) {
        gw_h2__bad(c, ":path neither origin-form nor * for OPTIONS");
        return;
    }
    /* §8.3.1: we only carry http and https URIs; the scheme the origin is told comes from the
     * listener, never from here */
    if (!gw_slice_eq(h->scheme, GW_SLICE_LIT("http")) &&
        !gw_slice_eq(h->scheme, GW_SLICE_LIT("https"))) {
        gw_h2__bad(c, "invalid :scheme");
        return;
    }
    /* RFC 3986 §3.2 authority characters, without the userinfo §8.3.1 forbids */
    if (h->authority.base && !gw_http_is_authority(h->authority))
        gw_h2__bad(c, "invalid :authority");
}
