/* http/cachectl.c — the Cache-Control directives (RFC 9111 §5.2, RFC 5861, RFC 8246) and
 * Pragma no-cache (RFC 9111 §5.4), read once for every caller. */
#include "http/http.h"

int gw_http_delta_seconds(gw_slice_t a, uint32_t *out)
{
    if (!a.len)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < a.len; i++) {
        if (a.base[i] < '0' || a.base[i] > '9')
            return -1;
        if (v < GW_HTTP_DELTA_MAX)
            v = v * 10 + (uint64_t)(a.base[i] - '0');
    }
    /* §1.2.2: "greater than the greatest integer it can represent" → 2^31 */
    *out = v > GW_HTTP_DELTA_MAX ? GW_HTTP_DELTA_MAX : (uint32_t)v;
    return 0;
}

typedef struct {
    const char *name;
    uint8_t len;
    uint32_t bit;
    int8_t arg; /* 0 no argument, 1 delta-seconds, 2 optional delta-seconds */
    size_t off; /* where the value goes (arg != 0) */
} cc_dir_t;

#define CC_FLAG(n, b)                                                                              \
    {                                                                                              \
        n, sizeof(n) - 1, b, 0, 0                                                                  \
    }
#define CC_ARG(n, b, a, m)                                                                         \
    {                                                                                              \
        n, sizeof(n) - 1, b, a, offsetof(gw_http_cc_t, m)                                          \
    }

static const cc_dir_t dirs[] = {
    CC_FLAG("no-store", GW_HTTP_CC_NO_STORE),
    CC_FLAG("no-cache", GW_HTTP_CC_NO_CACHE),
    CC_FLAG("private", GW_HTTP_CC_PRIVATE),
    CC_FLAG("public", GW_HTTP_CC_PUBLIC),
    CC_FLAG("must-revalidate", GW_HTTP_CC_MUST_REVALIDATE),
    CC_FLAG("proxy-revalidate", GW_HTTP_CC_PROXY_REVALIDATE),
    CC_FLAG("no-transform", GW_HTTP_CC_NO_TRANSFORM),
    CC_FLAG("only-if-cached", GW_HTTP_CC_ONLY_IF_CACHED),
    CC_FLAG("must-understand", GW_HTTP_CC_MUST_UNDERSTAND),
    CC_FLAG("immutable", GW_HTTP_CC_IMMUTABLE),
    CC_ARG("max-age", GW_HTTP_CC_MAX_AGE, 1, max_age),
    CC_ARG("s-maxage", GW_HTTP_CC_S_MAXAGE, 1, s_maxage),
    CC_ARG("max-stale", GW_HTTP_CC_MAX_STALE, 2, max_stale),
    CC_ARG("min-fresh", GW_HTTP_CC_MIN_FRESH, 1, min_fresh),
    CC_ARG("stale-while-revalidate", GW_HTTP_CC_SWR, 1, swr),
    CC_ARG("stale-if-error", GW_HTTP_CC_SIE, 1, sie),
};

/* One occurrence of a directive with an argument: keep the smallest valid value, and mark the
 * directive bad when this argument is not valid or differs from an earlier one. */
static void set_arg(gw_http_cc_t *cc, const cc_dir_t *d, int has_arg, gw_slice_t a)
{
    uint32_t *slot = (uint32_t *)(void *)((char *)cc + d->off);
    uint32_t v;
    if (d->arg == 2 && !has_arg)
        v = GW_HTTP_MAX_STALE_ANY; /* §5.2.1.2: max-stale alone accepts any staleness */
    else if (!has_arg || gw_http_delta_seconds(a, &v) < 0) {
        cc->bad |= d->bit;
        return;
    }
    if (cc->valid & d->bit) {
        if (*slot != v)
            cc->bad |= d->bit; /* §4.2.1: conflicting occurrences */
        if (v < *slot)
            *slot = v;
    } else {
        cc->valid |= d->bit;
        *slot = v;
    }
}

void gw_http_cc_parse(gw_http_cc_t *cc, gw_slice_t value)
{
    gw_http_list_t l = gw_http_list(value, ',', 0);
    gw_slice_t e, n, a;
    while (gw_http_list_next(&l, &e)) {
        int has_arg = gw_http_param_split(e, &n, &a); /* §5.2: token [ "=" ( token / q-str ) ] */
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
            const cc_dir_t *d = &dirs[i];
            if (n.len != d->len || !gw_mem_eq_nocase(n.base, (const uint8_t *)d->name, n.len))
                continue;
            cc->flags |= d->bit;
            if (d->arg)
                set_arg(cc, d, has_arg, a);
            break;
        }
    }
}

void gw_http_cc_fields(gw_http_cc_t *cc, const gw_field_t *f, size_t n)
{
    *cc = (gw_http_cc_t){0};
    for (size_t i = 0; i < n; i++)
        if (gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("cache-control")))
            gw_http_cc_parse(cc, f[i].value);
}

int gw_http_pragma_no_cache(const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("pragma")))
            continue;
        gw_http_list_t l = gw_http_list(f[i].value, ',', 0);
        gw_slice_t d;
        while (gw_http_list_next(&l, &d))
            if (gw_slice_eq_nocase(d, GW_SLICE_LIT("no-cache")))
                return 1;
    }
    return 0;
}
