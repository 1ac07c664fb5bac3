/* libFuzzer target: the Cache-Control reader (http/cachectl.c), the Vary key (cache/key.c) and
 * the cache's policy (cache/policy.c) over arbitrary heads.
 *
 * Input: byte 0 = number of response field pairs (low 3 bits); byte 1 = response status - 100
 * (scaled to 100..599); bytes 2..5 = a time offset; the rest split at '\n' into the response's
 * Cache-Control value, its Vary value, the response field pairs, then request field name/value
 * pairs (at most 32). Checked: the directives' valid and bad bits are among those present, the
 * values are within delta-seconds' bounds, and two field lines read as their comma join; the
 * Vary key is -1 exactly when an element is "*", measures what it writes, and does not change
 * when the names change case; a range found lies inside the object; the invalidation paths lie
 * inside the input, and so do a parsed URL's parts. ASan reports any read or write out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "http/http.h"

#include "fuzz_input.h"

#define MAX_FIELDS 32

static void cc_checks(gw_slice_t a, gw_slice_t b)
{
    gw_http_cc_t one = {0}, two = {0};
    gw_http_cc_parse(&one, a);
    gw_http_cc_parse(&one, b);
    if ((one.valid & ~one.flags) || (one.bad & ~one.flags))
        abort();
    uint32_t vals[] = {one.max_age, one.s_maxage, one.min_fresh, one.swr, one.sie};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
        if (vals[i] > GW_HTTP_DELTA_MAX)
            abort();
    if (one.max_stale > GW_HTTP_DELTA_MAX && one.max_stale != GW_HTTP_MAX_STALE_ANY)
        abort();
    /* two lines read as one line of both, joined with a comma (RFC 9110 §5.3) */
    uint8_t *j = malloc(a.len + b.len + 1);
    if (!j)
        abort();
    if (a.len)
        memcpy(j, a.base, a.len);
    j[a.len] = ',';
    if (b.len)
        memcpy(j + a.len + 1, b.base, b.len);
    gw_http_cc_parse(&two, (gw_slice_t){j, a.len + b.len + 1});
    free(j);
    if (memcmp(&one, &two, sizeof(one)) != 0)
        abort();
}

static int has_star(const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("vary")))
            continue;
        gw_http_list_t l = gw_http_list(f[i].value, ',', 0);
        gw_slice_t d;
        while (gw_http_list_next(&l, &d))
            if (gw_slice_eq(d, GW_SLICE_LIT("*")))
                return 1;
    }
    return 0;
}

/* The Vary key into an exactly sized heap block (NULL for -1); *len its length. */
static char *vkey(const gw_field_t *rf, size_t nr, const gw_field_t *qf, size_t nq, ssize_t *len)
{
    *len = gw_cache_vary_key(rf, nr, qf, nq, NULL, 0);
    if (*len < 0)
        return NULL;
    char *k = malloc((size_t)*len + 1);
    if (!k)
        abort();
    if (gw_cache_vary_key(rf, nr, qf, nq, k, (size_t)*len) != *len)
        abort();
    return k;
}

/* f's names uppercased into names (one block) */
static void upper_names(const gw_field_t *f, size_t n, gw_field_t *out, uint8_t *names)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < f[i].name.len; k++) {
            uint8_t c = f[i].name.base[k];
            names[k] = c >= 'a' && c <= 'z' ? (uint8_t)(c - 32) : c;
        }
        out[i] = (gw_field_t){{names, f[i].name.len}, f[i].value};
        names += f[i].name.len;
    }
}

static void vary_checks(const gw_field_t *rf, size_t nr, const gw_field_t *qf, size_t nq,
                        size_t input)
{
    ssize_t l1, l2;
    char *k1 = vkey(rf, nr, qf, nq, &l1);
    if ((l1 < 0) != has_star(rf, nr))
        abort();
    gw_field_t ur[MAX_FIELDS + 2], uq[MAX_FIELDS];
    uint8_t *names = malloc(2 * input + 64); /* + "cache-control", "vary" */
    if (!names)
        abort();
    upper_names(rf, nr, ur, names);
    upper_names(qf, nq, uq, names + input + 32);
    char *k2 = vkey(ur, nr, uq, nq, &l2);
    if (l1 != l2 || (l1 > 0 && memcmp(k1, k2, (size_t)l1) != 0))
        abort();
    free(names);
    free(k1);
    free(k2);
}

static int inside(gw_slice_t s, const uint8_t *b, const uint8_t *e)
{
    return !s.len || (s.base >= b && s.base + s.len <= e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    unsigned npairs = data[0] & 7;
    unsigned status = 100 + data[1] * 500u / 256u;
    int64_t t0 = 1704067200 +
                 (int64_t)(((uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4]) % 100000);
    int64_t later = t0 + data[5] * 37;
    const uint8_t *p = data + 6, *e = data + size;
    gw_field_t rf[MAX_FIELDS + 2], qf[MAX_FIELDS];
    size_t nr = 0, nq = 0;
    rf[nr++] = (gw_field_t){GW_SLICE_LIT("cache-control"), fz_next_piece(&p, e)};
    rf[nr++] = (gw_field_t){GW_SLICE_LIT("vary"), fz_next_piece(&p, e)};
    for (unsigned i = 0; i < npairs && p < e; i++) {
        gw_slice_t n = fz_next_piece(&p, e);
        rf[nr++] = (gw_field_t){n, fz_next_piece(&p, e)};
    }
    while (p < e && nq < MAX_FIELDS) {
        gw_slice_t n = fz_next_piece(&p, e);
        qf[nq++] = (gw_field_t){n, fz_next_piece(&p, e)};
    }
    cc_checks(rf[0].value, nq ? qf[0].value : rf[1].value);
    vary_checks(rf, nr, qf, nq, size);

    gw_cache_policy_t pol = {
        .heuristic = data[0] >> 7, .stale_if_error = data[5], .stale_while_revalidate = data[4]};
    const char *methods[] = {"GET", "HEAD", "POST", "DELETE"};
    gw_cache_req_t req = {gw_slice_str(methods[data[0] >> 3 & 3]),
                          GW_SLICE_LIT("https"),
                          GW_SLICE_LIT("example.com"),
                          GW_SLICE_LIT("/p?q"),
                          qf,
                          nq};
    gw_cache_resp_t resp = {status, rf, nr};
    gw_cache_nostore_t ns = gw_cache_storable(&pol, &req, &resp);
    if (!gw_cache_nostore_str(ns)[0])
        abort();
    gw_cache_meta_t m;
    gw_cache_meta(&pol, &resp, t0 - data[3] % 5, t0, &m);
    if (gw_cache_age(&m, later) < m.initial_age)
        abort();
    gw_cache_use_t u = gw_cache_use(&m, &req, later);
    if (u == GW_CACHE_USE_FRESH && !gw_cache_fresh(&m, later)) {
        /* only a request's max-stale (§5.2.1.2) accepts a stale answer as it is */
        gw_http_cc_t rq;
        gw_http_cc_fields(&rq, qf, nq);
        if (!(rq.valid & GW_HTTP_CC_MAX_STALE))
            abort();
    }
    (void)gw_cache_stale_if_error(&m, &req, data[1] & 1 ? 503 : 0, later);
    (void)gw_cache_conditional(&req, &resp);
    uint64_t len = data[2], first = 0, last = 0;
    gw_cache_range_t r = gw_cache_range(&req, &resp, len, &first, &last);
    if (r == GW_CACHE_RANGE_PARTIAL && !(first <= last && last < len))
        abort();
    gw_cache_url_t urls[3];
    size_t n = gw_cache_invalidation(&req, &resp, urls);
    for (size_t i = 1; i < n; i++)
        if (!inside(urls[i].path, data, e) && !gw_slice_eq(urls[i].path, GW_SLICE_LIT("/")))
            abort();
    gw_field_t merged[2 * MAX_FIELDS + 2];
    ssize_t k = gw_cache_merge_304(rf, nr, qf, nq, merged, sizeof(merged) / sizeof(merged[0]));
    if (k < 0 || (size_t)k > nr + nq)
        abort();
    int64_t t;
    for (size_t i = 0; i < nr; i++)
        (void)gw_http_date_parse(rf[i].value, &t);
    for (size_t i = 0; i < nq; i++) {
        gw_cache_url_t url;
        if (gw_cache_url_parse(qf[i].value, &url) == 0 &&
            (!inside(url.scheme, data, e) || !inside(url.authority, data, e) ||
             !url.authority.len ||
             !(inside(url.path, data, e) || gw_slice_eq(url.path, GW_SLICE_LIT("/")))))
            abort();
    }
    char cs[256];
    gw_cache_status_t st = {.hit = u == GW_CACHE_USE_FRESH,
                            .fwd = u == GW_CACHE_USE_FRESH ? NULL : "stale",
                            .has_ttl = 1,
                            .ttl = gw_cache_ttl(&m, later),
                            .detail = gw_cache_nostore_str(ns)};
    size_t cl = gw_cache_status_fmt(&st, cs, sizeof(cs));
    if (!cl || cs[cl] != 0)
        abort();
    return 0;
}
