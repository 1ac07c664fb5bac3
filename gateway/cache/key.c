/* cache/key.c — the keys of the cache: the target URI (RFC 9111 §4, normalised as RFC 3986
 * §6.2.2.1 and §6.2.3 allow) and the Vary key (§4.1). */
#include <string.h>

#include "cache/cache_internal.h"
#include "common/hash.h"
#include "http/http.h"

int gw_cache__field(const gw_field_t *f, size_t n, const char *name, gw_slice_t *v)
{
    gw_slice_t nm = gw_slice_str(name);
    for (size_t i = 0; i < n; i++)
        if (gw_slice_eq_nocase(f[i].name, nm)) {
            *v = f[i].value;
            return 1;
        }
    return 0;
}

/* n bytes at *at in out when they fit (lowercased when asked); *at always advances. */
static void put(char *out, size_t cap, size_t *at, const void *p, size_t n, int lower)
{
    if (out && *at + n <= cap && n) {
        if (lower)
            gw_ascii_lower(out + *at, p, n);
        else
            memcpy(out + *at, p, n);
    }
    *at += n;
}

size_t gw_cache_key(const gw_cache_url_t *u, char *out, size_t cap)
{
    size_t at = 0;
    gw_http_authority_t a;
    /* a malformed literal never gets this far (gw_http_is_authority at the fronts and in
     * gw_cache_url_parse); were one to, gw_http_authority keeps it as written */
    (void)gw_http_authority(u->scheme, u->authority, &a);
    put(out, cap, &at, u->scheme.base, u->scheme.len, 1);
    put(out, cap, &at, "://", 3, 0);
    put(out, cap, &at, a.host.base, a.host.len, 1);
    if (a.port.len) {
        put(out, cap, &at, ":", 1, 0);
        put(out, cap, &at, a.port.base, a.port.len, 0);
    }
    put(out, cap, &at, u->path.base, u->path.len, 0);
    return at;
}

uint64_t gw_cache_route_tag(gw_slice_t host, gw_slice_t path)
{
    /* a NUL between them: no host holds one, so ("a", "/b") and ("a/", "b") differ */
    uint64_t h = gw_fnv1a64(GW_FNV64_BASIS, host.base, host.len);
    h = gw_fnv1a64_byte(h, 0);
    return gw_fnv1a64(h, path.base, path.len);
}

/* Whether the name e already came earlier in the Vary lines (before line li, element e). */
static int seen_before(const gw_field_t *resp, size_t li, gw_slice_t e)
{
    for (size_t i = 0; i <= li; i++) {
        if (!gw_slice_eq_nocase(resp[i].name, GW_SLICE_LIT("vary")))
            continue;
        gw_http_list_t l = gw_http_list(resp[i].value, ',', 0);
        gw_slice_t d;
        while (gw_http_list_next(&l, &d)) {
            if (d.base == e.base)
                return 0; /* reached e itself */
            if (gw_slice_eq_nocase(d, e))
                return 1;
        }
    }
    return 0;
}

ssize_t gw_cache_vary_key(const gw_field_t *resp, size_t nresp, const gw_field_t *req, size_t nreq,
                          char *out, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < nresp; i++) {
        if (!gw_slice_eq_nocase(resp[i].name, GW_SLICE_LIT("vary")))
            continue;
        gw_http_list_t l = gw_http_list(resp[i].value, ',', 0);
        gw_slice_t name;
        while (gw_http_list_next(&l, &name)) {
            if (gw_slice_eq(name, GW_SLICE_LIT("*")))
                return -1; /* §4.1: never matches */
            if (seen_before(resp, i, name))
                continue;
            /* name ":" value "\n", or name "!\n" when absent: names are tokens (no ":" or
             * "!"), and no value holds a "\n" (the fronts refuse CR, LF and NUL), so the
             * encoding is unambiguous */
            put(out, cap, &at, name.base, name.len, 1);
            int any = 0;
            for (size_t j = 0; j < nreq; j++) {
                if (!gw_slice_eq_nocase(req[j].name, name))
                    continue;
                /* §4.1: the lines combined, the whitespace around commas normalised (a
                 * comma inside a quoted string is left as it is) */
                gw_http_list_t vl = gw_http_list(req[j].value, ',', GW_HTTP_LIST_F_QUOTED);
                gw_slice_t v;
                put(out, cap, &at, any ? "," : ":", 1, 0);
                int first = 1;
                while (gw_http_list_next(&vl, &v)) {
                    if (!first)
                        put(out, cap, &at, ",", 1, 0);
                    put(out, cap, &at, v.base, v.len, 0);
                    first = 0;
                }
                any = 1;
            }
            put(out, cap, &at, any ? "\n" : "!\n", any ? 1 : 2, 0);
        }
    }
    return (ssize_t)at;
}

int gw_cache_url_parse(gw_slice_t abs, gw_cache_url_t *u)
{
    const uint8_t *p = abs.base, *end = abs.base + abs.len;
    const uint8_t *hash = abs.len ? memchr(p, '#', abs.len) : NULL;
    if (hash)
        end = hash;
    const uint8_t *colon = p < end ? memchr(p, ':', (size_t)(end - p)) : NULL;
    if (!colon || end - colon < 3 || colon[1] != '/' || colon[2] != '/')
        return -1;
    gw_slice_t scheme = {p, (size_t)(colon - p)};
    if (!gw_slice_eq_nocase(scheme, GW_SLICE_LIT("http")) &&
        !gw_slice_eq_nocase(scheme, GW_SLICE_LIT("https")))
        return -1;
    const uint8_t *a = colon + 3, *s = a;
    while (s < end && *s != '/' && *s != '?')
        s++;
    gw_slice_t auth = {a, (size_t)(s - a)};
    /* RFC 9110 §4.2.4: no userinfo in http(s) URIs; an empty host is no origin (neither is
     * one before a port: gw_http_is_authority refuses ":80") */
    if (!auth.len || !gw_http_is_authority(auth))
        return -1;
    if (s < end && *s == '?')
        return -1; /* an empty path before a query: no origin-form without a "/" to borrow */
    u->scheme = scheme;
    u->authority = auth;
    u->path = s < end ? (gw_slice_t){s, (size_t)(end - s)} : GW_SLICE_LIT("/");
    return 0;
}
