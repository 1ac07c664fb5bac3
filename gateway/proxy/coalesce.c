/* proxy/coalesce.c — the rules of coalescing (which requests may share one origin exchange,
 * under which key, and which responses may be shared) and the store that holds a shared
 * response body once, by reference, for all its subscribers.
 *
 * Coalescing is a cache with a lifetime of one exchange: a request that arrives while an
 * identical one waits for its response head joins it, and the response is handed to both. So
 * a response is shared only where a shared cache could serve it to every joiner (RFC 9111:
 * what is shared between clients is keyed on every input that can change it). Review of the rules
 * against RFC 9111 §4 (reusing a stored response), clause by clause, with the storing rules of §3
 * it refers to:
 *
 *  §4 "the presented target URI and that of the stored response match"
 *      → the key holds the scheme, the authority as the cache keys it (lowercased, RFC 3986
 *        §6.2.2.1; an IPv6 host in RFC 5952's text, the port a number without the scheme's
 *        default, §6.2.3: gw_http_authority) and the path with its query, byte for byte. The
 *        scheme is in the key because the cleartext and TLS listeners share routes: an `http`
 *        answer (say a redirect to https) must not reach an `https` client.
 *  §4 "the request method associated with the stored response allows it to be used for the
 *        presented request"; "a cache MUST write through requests with methods that are unsafe"
 *      → only GET and HEAD coalesce, and the method is in the key (a HEAD never gets a GET's
 *        exchange or the reverse).
 *  §4 "request header fields nominated by the stored response (if any) match" (§4.1)
 *      → the values of the route's coalesce_headers are in the key, so two requests with one
 *        key agree on them; a response whose Vary names any other field is not shared, and
 *        `Vary: *` never matches (§4.1).
 *  §4 "the stored response does not contain the no-cache directive (§5.2.2.4)"
 *      → a response with Cache-Control no-cache (qualified or not) is not shared.
 *  §4 "the stored response is … fresh (§4.2), … or successfully validated (§4.3)"
 *      → a shared response is the origin's answer to the leader's request, received after
 *        every joiner's request arrived (joining ends at the response head): it is at most one
 *        origin round trip old, as fresh as a response the joiner would have fetched itself.
 *        A client that asks for a response validated after its own request (request
 *        Cache-Control no-cache §5.2.1.4, max-age=0 §5.2.1.1, Pragma no-cache §5.4) or that
 *        forbids storage (request no-store §5.2.1.5) neither leads nor joins.
 *  §4 "a cache MUST generate an Age header field" when it reuses a response
 *      → none is added: the response is not stored, and its age is below one second.
 *  §4.3 conditional requests, RFC 9110 §13: a cache answers them by evaluating the conditions
 *        against the stored response; RFC 9110 §14 (ranges), §3.3/§3.4 (partial content)
 *      → the coalescer evaluates nothing, so requests with Range, If-Range, If-Match,
 *        If-None-Match, If-Modified-Since or If-Unmodified-Since neither lead nor join (else one
 *        client's 206 or 304 answers another's plain GET), and a 206 or 304 is never shared.
 *  §3 "the response status code is final" and "understood"; "the response contains … a
 *        public response directive, an s-maxage, max-age, Expires, or a status code that is
 *        defined as heuristically cacheable" (RFC 9110 §15.1: 200, 203, 204, 206, 300, 301,
 *        308, 404, 405, 410, 414, 501)
 *      → other statuses (302, 5xx, …) are shared only with explicit freshness; else the joiners
 *        fetch on their own.
 *  §3 "the no-store cache directive is not present in the response" (§5.2.2.5); "if the
 *        cache is shared: the private response directive is … not present" (§5.2.2.7)
 *      → neither is shared.
 *  §3 "if the cache is shared: the Authorization header field is not present in the
 *        request" (§3.5)
 *      → requests with Authorization do not coalesce, nor do those with Cookie (a local rule:
 *        origins personalise by cookie without saying Vary: Cookie), unless the route says
 *        coalesce_private (the operator's decision that its origin answers alike). Even then
 *        Cookie counts exactly as Authorization does: requests with credentials (either) and
 *        anonymous ones have different keys, and a response to requests with credentials is
 *        shared only with public, s-maxage or must-revalidate (§3.5). A cookie holder's page
 *        reached anonymous clients when only Authorization counted.
 *  Set-Cookie (RFC 9111 §7.3: it "does not inhibit caching", which leaks sessions when the
 *        origin forgets Cache-Control)
 *      → stricter than RFC 9111 §3: a response that sets a cookie is never shared.
 *  Request content and Expect (RFC 9110 §9.3.1: content in a GET has no defined semantics;
 *        §10.1.1 Expect)
 *      → a request with a body (no END_STREAM, or Content-Length > 0) or with Expect neither
 *        leads nor joins: two such requests may differ in what the key does not see.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/hash.h"
#include "cache/cache.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

static int name_is(gw_slice_t name, const char *lit)
{
    return gw_slice_eq_nocase(name, gw_slice_str(lit));
}

int gw_proxy__coalesce_request_ok(const gw_cfg_route_t *r, const gw_req_head_t *h)
{
    if (!r->coalesce || h->protocol.len)
        return 0; /* a WebSocket is a conversation, never a shared answer */
    /* safe and cacheable: GET and HEAD; never a method the gateway does not know */
    unsigned mf = gw_http_method_flags(h->method);
    if (!(mf & GW_HTTP_METHOD_F_SAFE) || !(mf & GW_HTTP_METHOD_F_CACHEABLE))
        return 0;
    if (!h->end_stream || h->content_length > 0)
        return 0; /* content: RFC 9110 §9.3.1 */
    static const char *const never[] = {"range",         "if-range",          "if-match",
                                        "if-none-match", "if-modified-since", "if-unmodified-since",
                                        "expect"};
    for (size_t i = 0; i < h->fields_len; i++) {
        const gw_field_t *f = &h->fields[i];
        for (size_t k = 0; k < sizeof(never) / sizeof(never[0]); k++)
            if (name_is(f->name, never[k]))
                return 0;
        if (!r->coalesce_private &&
            (name_is(f->name, "authorization") || name_is(f->name, "cookie")))
            return 0; /* RFC 9111 §3.5 */
    }
    /* the directives through the one reader (http/cachectl.c), which splits at every comma,
     * quoted or not: a piece of a quoted string is never one of the names looked for, so the
     * answer only errs towards "not shared" */
    gw_http_cc_t cc;
    gw_http_cc_fields(&cc, h->fields, h->fields_len);
    if (cc.flags & (GW_HTTP_CC_NO_CACHE | GW_HTTP_CC_NO_STORE))
        return 0; /* RFC 9111 §5.2.1.4, §5.2.1.5 */
    if ((cc.valid & GW_HTTP_CC_MAX_AGE) && cc.max_age == 0)
        return 0; /* §5.2.1.1: max-age=0 (any occurrence: the smallest is kept) */
    if (gw_http_pragma_no_cache(h->fields, h->fields_len))
        return 0; /* RFC 9111 §5.4 */
    return 1;
}

/* Append "<len>:" and the bytes (lowercased when asked) at *at, if they fit in cap; *at always
 * advances, so a call with out NULL measures. Length-prefixed parts make the encoding
 * unambiguous whatever bytes a value holds. */
static void kput(char *out, size_t cap, size_t *at, const uint8_t *p, size_t n, int lower)
{
    char num[24];
    int l = snprintf(num, sizeof(num), "%zu:", n);
    if (out && *at + (size_t)l + n <= cap) {
        memcpy(out + *at, num, (size_t)l);
        if (lower)
            gw_ascii_lower(out + *at + l, p, n);
        else if (n)
            memcpy(out + *at + l, p, n);
    }
    *at += (size_t)l + n;
}

/* The key into out (cap bytes; out may be NULL to measure), with h's authority as read by
 * gw_http_authority (a). The same code measures and writes, and every write is checked against
 * cap: the size cannot disagree with what is written (two passes that counted apart did, when
 * coalesce_headers named one field twice). Returns the key's length. */
static size_t key_write(const gw_cfg_route_t *r, const gw_req_head_t *h,
                        const gw_http_authority_t *a, char *out, size_t cap)
{
    size_t at = 0;
    kput(out, cap, &at, h->scheme.base, h->scheme.len, 1);
    /* with coalesce_private, requests with and without credentials (Authorization or Cookie)
     * never share an exchange: a response to a request with credentials may reach only other
     * such requests, and then only when a shared cache could serve it (RFC 9111 §3.5,
     * gw_proxy__coalesce_shareable) */
    if (r->coalesce_private)
        kput(out, cap, &at, (const uint8_t *)(gw_proxy__has_credentials(h) ? "A" : "-"), 1, 0);
    kput(out, cap, &at, h->method.base, h->method.len, 0);
    kput(out, cap, &at, a->host.base, a->host.len, 1);
    kput(out, cap, &at, a->port.base, a->port.len, 0);
    kput(out, cap, &at, h->path.base, h->path.len, 0);
    for (size_t j = 0; j < r->coalesce_headers_len; j++) {
        gw_slice_t name = gw_slice_str(r->coalesce_headers[j]);
        size_t count = 0;
        for (size_t i = 0; i < h->fields_len; i++)
            if (gw_slice_eq_nocase(h->fields[i].name, name))
                count++;
        /* the number of field lines, then each value: absent differs from empty */
        char num[24];
        int l = snprintf(num, sizeof(num), "%zu", count);
        kput(out, cap, &at, (const uint8_t *)num, (size_t)l, 0);
        for (size_t i = 0; i < h->fields_len; i++)
            if (gw_slice_eq_nocase(h->fields[i].name, name))
                kput(out, cap, &at, h->fields[i].value.base, h->fields[i].value.len, 0);
    }
    return at;
}

char *gw_proxy__coalesce_key(const gw_cfg_route_t *r, const gw_req_head_t *h, size_t *len)
{
    *len = 0;
    if (!gw_proxy__coalesce_request_ok(r, h))
        return NULL;
    /* one origin server, one key (RFC 3986 §6.2.2, §6.2.3), as the cache keys it: [::1] and
     * [0::1]:80 are one authority of http; a malformed literal (the fronts refuse it) is kept
     * as written */
    gw_http_authority_t a;
    (void)gw_http_authority(h->scheme, h->authority, &a);
    size_t n = key_write(r, h, &a, NULL, 0);
    char *k = gw_malloc(n + 1);
    if (!k)
        return NULL;
    size_t w = key_write(r, h, &a, k, n);
    GW_ASSERT(w == n);
    k[n] = 0;
    *len = n;
    return k;
}

int gw_proxy__has_credentials(const gw_req_head_t *h)
{
    /* RFC 9111 §3.5 names Authorization; a Cookie identifies the user as well (the reason the
     * coalescing rules never share a cookie holder's answer with others) */
    for (size_t i = 0; i < h->fields_len; i++)
        if (name_is(h->fields[i].name, "authorization") || name_is(h->fields[i].name, "cookie"))
            return 1;
    return 0;
}

int gw_proxy__coalesce_shareable(const gw_cfg_route_t *r, unsigned status, const gw_field_t *f,
                                 size_t n, int credentials)
{
    return gw_proxy__reusable(status, f, n, (const char *const *)r->coalesce_headers,
                              r->coalesce_headers_len, credentials);
}

int gw_proxy__reusable(unsigned status, const gw_field_t *f, size_t n, const char *const *vary_ok,
                       size_t nvary, int credentials)
{
    /* 304 only answers a conditional request and 206 a range request: neither coalesces */
    if (status < 200 || status == 206 || status == 304)
        return 0;
    int explicit_fresh = 0;
    for (size_t i = 0; i < n; i++) {
        gw_slice_t name = f[i].name;
        gw_http_list_t l = gw_http_list(f[i].value, ',', 0);
        gw_slice_t d;
        if (name_is(name, "set-cookie"))
            return 0;
        if (name_is(name, "expires")) {
            explicit_fresh = 1; /* RFC 9111 §5.3 */
        } else if (name_is(name, "vary")) {
            while (gw_http_list_next(&l, &d)) {
                if (gw_slice_eq(d, GW_SLICE_LIT("*")))
                    return 0; /* RFC 9111 §4.1: never matches */
                int in_key = 0;
                for (size_t k = 0; k < nvary && !in_key; k++)
                    in_key = gw_slice_eq_nocase(d, gw_slice_str(vary_ok[k]));
                if (!in_key)
                    return 0; /* the other requests may differ in that field */
            }
        }
    }
    gw_http_cc_t cc; /* by name, whatever the arguments (http/cachectl.c) */
    gw_http_cc_fields(&cc, f, n);
    if (cc.flags & (GW_HTTP_CC_NO_STORE | GW_HTTP_CC_PRIVATE | GW_HTTP_CC_NO_CACHE))
        return 0; /* RFC 9111 §5.2.2.5, §5.2.2.7, §5.2.2.4 */
    if (cc.flags & (GW_HTTP_CC_PUBLIC | GW_HTTP_CC_S_MAXAGE | GW_HTTP_CC_MAX_AGE))
        explicit_fresh = 1;
    int auth_ok =
        (cc.flags & (GW_HTTP_CC_PUBLIC | GW_HTTP_CC_S_MAXAGE | GW_HTTP_CC_MUST_REVALIDATE)) != 0;
    /* RFC 9111 §3.5: a shared cache stores a response to a request with Authorization only
     * when it says public, s-maxage or must-revalidate (Cookie counts the same here) */
    if (credentials && !auth_ok)
        return 0;
    /* RFC 9111 §3, RFC 9110 §15.1: heuristically cacheable, without 206 (ranges never
     * coalesce: a 206 answers a request we would not have let join) */
    return (gw_cache_status_heuristic(status) && status != 206) || explicit_fresh;
}

uint64_t gw_proxy__hash(const void *p, size_t n)
{
    return gw_fnv1a64(GW_FNV64_BASIS, p, n);
}

/* ---- the shared body ------------------------------------------------------------------------ */

void gw_proxy__cbody_init(gw_proxy__cbody_t *b)
{
    memset(b, 0, sizeof(*b));
}

void gw_proxy__cbody_free(gw_proxy__cbody_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        gw_rbuf_unref(b->c[(b->head + i) % b->cap].buf);
    gw_free(b->c);
    memset(b, 0, sizeof(*b));
}

int gw_proxy__cbody_append(gw_proxy__cbody_t *b, gw_rbuf_t *buf, size_t off, size_t len)
{
    if (!len)
        return 0;
    if (b->n) {
        /* bytes that follow the last slice in the same buffer (an origin read after another
         * into the connection's input buffer) extend it: one entry, whatever the read sizes */
        gw_rslice_t *last = &b->c[(b->head + b->n - 1) % b->cap];
        if (last->buf == buf && last->off + last->len == off) {
            last->len += len;
            b->end += len;
            return 0;
        }
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        gw_rslice_t *c = gw_malloc(cap * sizeof(*c));
        if (!c)
            return GW_E_NOMEM;
        for (size_t i = 0; i < b->n; i++)
            c[i] = b->c[(b->head + i) % b->cap];
        gw_free(b->c);
        b->c = c;
        b->cap = cap;
        b->head = 0;
    }
    if (!b->n)
        b->base = b->end;
    b->c[(b->head + b->n) % b->cap] = (gw_rslice_t){gw_rbuf_ref(buf), off, len};
    b->n++;
    b->end += len;
    return 0;
}

int gw_proxy__cbody_at(const gw_proxy__cbody_t *b, uint64_t pos, gw_rslice_t *out)
{
    if (pos < b->base || pos >= b->end)
        return GW_E_INVAL;
    uint64_t start = b->base;
    for (size_t i = 0; i < b->n; i++) {
        const gw_rslice_t *s = &b->c[(b->head + i) % b->cap];
        if (pos < start + s->len) {
            size_t skip = (size_t)(pos - start);
            *out = (gw_rslice_t){s->buf, s->off + skip, s->len - skip};
            return 0;
        }
        start += s->len;
    }
    return GW_E_INVAL; /* not reached: base + the lengths is end */
}

void gw_proxy__cbody_trim(gw_proxy__cbody_t *b, uint64_t upto)
{
    while (b->n) {
        gw_rslice_t *s = &b->c[b->head];
        if (b->base + s->len > upto)
            return;
        b->base += s->len;
        gw_rbuf_unref(s->buf);
        b->head = (b->head + 1) % b->cap;
        b->n--;
    }
    b->base = b->end;
}

/* ---- in-flight index: coalescible exchanges before their response head ------------------- */

void gw_proxy__unindex(ox_t *ox)
{
    if (ox->indexed) {
        ox->indexed = 0;
        gw_list_remove(&ox->klink);
    }
}

ox_t *gw_proxy__find_inflight(gw_proxy_t *p, const char *key, size_t len, uint64_t hash)
{
    gw_list_foreach(it, &p->inflight)
    {
        ox_t *ox = GW_CONTAINER_OF(it, ox_t, klink);
        if (ox->hash == hash && ox->keylen == len && !memcmp(ox->key, key, len) && ox->bx)
            return ox;
    }
    return NULL;
}

/* ---- the filter: who may share the answer ---------------------------------------------------- */

static int share_wants(const gw_cfg_route_t *r)
{
    return r->coalesce;
}

/* Anyone but the owner (a follower, or every subscriber once the owner's client left) gets
 * this answer only when it may be shared; the others go to the origin on their own, and the
 * owner keeps this one. Their held 103 is dropped with it: their own exchange's 103 reaches
 * them (they had none yet). With the owner gone, nobody may be left (the chain frees ox). */
static int share_head(ox_t *ox, gw_proxy_resp_t *r)
{
    if (ox->nsubs > (ox->owner ? 1u : 0u) &&
        !gw_proxy__coalesce_shareable(ox->route, r->status, r->origin->fields,
                                      r->origin->fields_len, ox->credentials)) {
        FOREACH_SUB(ox, px)
        {
            if (px != ox->owner) {
                ox->p->stats.not_shared++;
                gw_proxy__detach(px);
            }
        }
    }
    return 0;
}

/* The trailers of a shared answer go to every subscriber (chain.c keeps them once): a cookie
 * set there would reach every client of the answer, where a Set-Cookie in the head keeps it
 * from being shared at all (gw_proxy__reusable). RFC 9110 §6.5.1: a field goes in trailers
 * only where its definition allows, and Set-Cookie's (RFC 6265) does not; so it is dropped from
 * the trailers of an answer that has, or had, a subscriber other than the owner. */
static int share_trailers(ox_t *ox, gw_proxy_resp_t *r)
{
    int shared = !ox->owner;
    FOREACH_SUB(ox, px)
    {
        shared |= px != ox->owner;
    }
    if (!shared)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!name_is(r->f[i].name, "set-cookie"))
            r->f[k++] = r->f[i];
    r->n = k;
    return 0;
}

const gw_proxy_filter_t gw_proxy__filter_coalesce = {
    .name = "coalesce",
    .wants = share_wants,
    .on_head = share_head,
    .on_trailers = share_trailers,
};
