/* proxy/push.c — HTTP/2 server push (RFC 9113 §8.4): which Link targets of an answer are
 * promised to its client (ops->push). */
#include <string.h>

#include "common/err.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* The path a link target names on the request's own authority and scheme, or {NULL, 0}: an
 * absolute path ("/app.css"), or an absolute URI or network-path reference ("//host/app.css")
 * whose authority is the request's (page: gw_http_authority of h's, read once per answer; NULL
 * when it is none, and then only an absolute path is) and, for an absolute URI, whose scheme
 * is too. The fragment is dropped (§3.5: never sent); a target with bytes a request target
 * may not carry (RFC 3986 §3.3-§3.4) or relative ("app.css") is not pushed. */
static gw_slice_t same_origin_path(gw_slice_t t, const gw_req_head_t *h,
                                   const gw_http_authority_t *page)
{
    gw_slice_t none = {0};
    const uint8_t *hash = memchr(t.base, '#', t.len);
    if (hash)
        t.len = (size_t)(hash - t.base);
    if (t.len >= 2 && t.base[0] == '/' && t.base[1] == '/') {
        t.base += 2, t.len -= 2;
    } else if (t.len && t.base[0] != '/') {
        const uint8_t *colon = memchr(t.base, ':', t.len);
        if (!colon ||
            !gw_slice_eq_nocase((gw_slice_t){t.base, (size_t)(colon - t.base)}, h->scheme))
            return none;
        size_t skip = (size_t)(colon - t.base) + 1;
        if (t.len < skip + 2 || t.base[skip] != '/' || t.base[skip + 1] != '/')
            return none;
        t.base += skip + 2, t.len -= skip + 2;
    } else {
        goto path; /* an absolute path */
    }
    {
        const uint8_t *slash = memchr(t.base, '/', t.len);
        size_t alen = slash ? (size_t)(slash - t.base) : t.len;
        /* one origin however it is spelled (RFC 3986 §6.2.2-6.2.3: host case, an IPv6
         * address's forms, the scheme's default port), as coalescing and the cache compare it */
        gw_http_authority_t la;
        if (!page || gw_http_authority(h->scheme, (gw_slice_t){t.base, alen}, &la) != 0 ||
            !gw_http_authority_eq(&la, page))
            return none;
        if (!slash)
            return none; /* the authority alone: "/" would be the page itself */
        t.base += alen, t.len -= alen;
    }
path:
    if (!t.len || t.len > 2048)
        return none;
    for (size_t i = 0; i < t.len; i++) {
        uint8_t c = t.base[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' ||
            c == '`' || c == '{' || c == '|' || c == '}')
            return none;
    }
    return t;
}

/* The fields a promised request carries: the parent's accept, accept-encoding, accept-language
 * and user-agent (what selects the representation and what the origin logs), into
 * out[0..cap); their number. */
static size_t push_fields(const gw_req_head_t *h, gw_field_t *out, size_t cap)
{
    static const char *const keep[] = {"accept", "accept-encoding", "accept-language",
                                       "user-agent"};
    size_t k = 0;
    for (size_t i = 0; i < h->fields_len && k < cap; i++)
        for (size_t j = 0; j < sizeof(keep) / sizeof(keep[0]); j++)
            if (gw_slice_eq_nocase(h->fields[i].name, gw_slice_str(keep[j]))) {
                /* HTTP/2 names are lowercase already; HTTP/1.1 never pushes */
                out[k++] = (gw_field_t){gw_slice_str(keep[j]), h->fields[i].value};
                break;
            }
    return k;
}

int gw_proxy__push_links(gw_proxy_t *p, gw_cstream_t *s, const gw_cfg_route_t *r,
                         const gw_req_head_t *h, unsigned status, const gw_field_t *f, size_t n)
{
    if (!r->push || !s->ops->push || s->no_push || h->pushed || h->proto != GW_REQ_H2 ||
        status < 200 || status > 299 || !gw_slice_eq(h->method, GW_SLICE_LIT("GET")))
        return 0;
    gw_proxy_hint_stats_t *st = &p->hints.st;
    gw_field_t pf[16];
    size_t pn = push_fields(h, pf, 16);
    int promised = 0;
    gw_http_authority_t page; /* for every link that names an authority */
    const gw_http_authority_t *pa =
        gw_http_authority(h->scheme, h->authority, &page) == 0 ? &page : NULL;
    gw_proxy__link_iter_t it = {.f = f, .n = n};
    gw_slice_t v;
    unsigned rels;
    while ((v = gw_proxy__link_next(&it, &rels)).base) {
        if (!(rels & GW_PROXY_LINK_PRELOAD) || (rels & GW_PROXY_LINK_NOPUSH))
            continue;
        const uint8_t *gt = memchr(v.base, '>', v.len);
        gw_slice_t path =
            same_origin_path((gw_slice_t){v.base + 1, (size_t)(gt - v.base - 1)}, h, pa);
        if (!path.base)
            continue;
        gw_req_head_t q = {.method = GW_SLICE_LIT("GET"),
                           .scheme = h->scheme,
                           .authority = h->authority,
                           .path = path,
                           .fields = pf,
                           .fields_len = pn,
                           .content_length = -1,
                           .end_stream = 1,
                           .proto = GW_REQ_H2,
                           .pushed = 1};
        int rv = s->ops->push(s, &q);
        if (rv == 0) {
            st->push_promised++;
            promised++;
            continue;
        }
        /* a duplicate (or a target the engine refuses) leaves room for the next link;
         * anything else holds for every link of this answer */
        if (rv == GW_E_EXIST) {
            st->push_duplicate++;
            continue;
        }
        if (rv == GW_E_INVAL)
            continue;
        if (rv == GW_E_UNSUPPORTED)
            st->push_client++;
        else if (rv == GW_E_LIMIT)
            st->push_limit++;
        else
            st->push_closed++;
        return promised;
    }
    return promised;
}

/* ---- the filter ----------------------------------------------------------------------------- */

static int push_wants(const gw_cfg_route_t *r)
{
    return r->push;
}

/* RFC 9113 §8.4.1: the promises go before the response that refers to them. */
static void push_deliver(ox_t *ox, px_t *px, const gw_proxy_resp_t *r)
{
    gw_proxy__push_links(ox->p, px->s, px->route, &px->head, r->status, r->f, r->n);
}

const gw_proxy_filter_t gw_proxy__filter_push = {
    .name = "push",
    .wants = push_wants,
    .on_deliver = push_deliver,
};
