/* proxy/route.c — routing and the gateway's own answers. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

static int host_match(const char *pattern, gw_slice_t host)
{
    if (!strcmp(pattern, "*"))
        return 1;
    if (pattern[0] == '*' && pattern[1] == '.') {
        size_t sl = strlen(pattern + 1); /* ".example.com" */
        return host.len > sl && gw_slice_eq_nocase((gw_slice_t){host.base + host.len - sl, sl},
                                                   gw_slice_str(pattern + 1));
    }
    return gw_slice_eq_nocase(host, gw_slice_str(pattern));
}

const gw_cfg_route_t *gw_proxy_route(const gw_proxy_t *p, gw_slice_t authority, gw_slice_t path)
{
    /* RFC 4291 §2.2: one IPv6 address has many spellings ([::1], [0:0::1], [::0001], hex in
     * either case); a route's host is held in the canonical one (RFC 5952, config/routes.c),
     * and the request's is read by the rule every key of an origin uses, so every spelling
     * takes the same route. The port plays no part: no scheme is needed for its default. */
    gw_http_authority_t a;
    (void)gw_http_authority((gw_slice_t){0}, authority, &a);
    gw_slice_t host = a.host;
    /* RFC 1034 §3.1, RFC 3986 §3.2.2: "admin.test." is the absolute form of "admin.test", the
     * same host to origins (nginx drops the dot): it took the catch-all route, past its host's
     * access list and basic auth */
    if (host.len > 1 && host.base[host.len - 1] == '.' && host.base[0] != '[')
        host.len--;
    for (size_t i = 0; i < p->cfg->routes_len; i++) {
        const gw_cfg_route_t *r = &p->cfg->routes[i];
        size_t pl = strlen(r->path);
        if (host_match(r->host, host) && path.len >= pl && !memcmp(path.base, r->path, pl))
            return r;
    }
    return NULL;
}

int gw_proxy__answer(gw_cstream_t *s, unsigned status, const char *text)
{
    return gw_proxy__answer_early(s, NULL, NULL, status, NULL, text, strlen(text), NULL, 0);
}

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
int gw_proxy__rate_allow(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                         const struct sockaddr *sa, uint64_t now_us, unsigned *retry_after_s)
{
    return gw_proxy__rate_allow_share(t, r, idx, sa, now_us, 1, retry_after_s);
}
#endif

int gw_proxy__rate_allow_share(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                               const struct sockaddr *sa, uint64_t now_us, unsigned share,
                               unsigned *retry_after_s)
{
    if (!r->request_rate || !t || !sa)
        return 1;
    /* request_burst 0: one second's worth of requests */
    uint64_t burst = r->request_burst ? r->request_burst : r->request_rate;
    gw_bucket_entry_t *e =
        gw_bucket_table_acquire(t, sa, (unsigned)idx + 1, r->request_rate, burst, now_us);
    if (!e) {
        if (!gw_bucket_table_keyed(sa))
            return 1; /* not an IP client: no per-address limit applies */
        /* the table is full of clients still in debt: fail closed for the newcomer (failing
         * open would let whoever fills the table with addresses go unlimited), counted by the
         * table (gw_bucket_table_refused) */
        *retry_after_s = 1;
        return 0;
    }
    uint64_t wait = 0;
    size_t got = gw_bucket_table_take(t, e, 1, now_us, &wait);
    if (got && share > 1) /* the rest of a share's price, as debt paid before the next one */
        gw_bucket_table_spend(t, e, share - 1, now_us);
    gw_bucket_table_release(t, e);
    if (got)
        return 1;
    /* RFC 9110 §10.2.3: delay-seconds, rounded up so that a client that waits succeeds */
    uint64_t secs = (wait + 999999) / 1000000;
    *retry_after_s = secs ? (unsigned)secs : 1;
    return 0;
}

size_t gw_proxy__rate_key(const gw_proxy_t *p, const gw_cfg_route_t *r, const struct sockaddr *sa,
                          uint8_t *out, size_t cap)
{
    char ip[64];
    if (!gw_bucket_addr_text(sa, p->cfg->throttle.ipv6_prefix, ip, sizeof(ip)))
        return 0;
    int n = snprintf((char *)out, cap, "%s|%s", r->name ? r->name : "", ip);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

int gw_proxy__route_ambiguous(const gw_proxy_t *p, const gw_req_head_t *h)
{
    gw_slice_t path = h->path;
    if (!path.len || path.base[0] != '/')
        return 0; /* "*" (OPTIONS): no path to read */
    /* the common case: without '%', ';', "//" or "/." a path reads as it is written */
    size_t i = 0;
    for (; i < path.len && path.base[i] != '?'; i++) {
        uint8_t c = path.base[i];
        if (c == '%' || c == ';' ||
            (c == '/' && i + 1 < path.len && (path.base[i + 1] == '/' || path.base[i + 1] == '.')))
            break;
    }
    if (i == path.len || path.base[i] == '?')
        return 0;
    uint8_t st[2048], *buf = path.len < sizeof(st) ? st : gw_malloc(path.len + 1);
    if (!buf)
        return 1; /* cannot tell: refused rather than let through */
    size_t n = gw_http_path_as_read(path, buf);
    int differs = gw_proxy_route(p, h->authority, (gw_slice_t){buf, n}) != h->route;
    if (buf != st)
        gw_free(buf);
    return differs;
}
