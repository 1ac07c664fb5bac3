/* Unit tests of cache/policy.c: RFC 9111 as a shared cache and RFC 5861, rule by rule: what
 * is stored (§3), freshness (§4.2.1, §4.2.2), age (§4.2.3), the request's directives (§5.2.1,
 * §5.4), stale answers (RFC 5861 §3, §4), conditional requests (RFC 9110 §13.2.2), ranges
 * (RFC 9110 §14), 304 updates (§3.2, §4.3.4) and invalidation (§4.4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "cache/cache.h"
#include "http/http.h"

/* 2024-01-01T00:00:00Z and its HTTP-date */
#define T0 1704067200
#define D0 "Mon, 01 Jan 2024 00:00:00 GMT"
#define D0_MINUS_10D "Fri, 22 Dec 2023 00:00:00 GMT"
#define D0_PLUS_1H "Mon, 01 Jan 2024 01:00:00 GMT"

/* Fields from "name", "value", ... pairs (NULL-terminated). */
#define MAXF 16
typedef struct {
    gw_field_t f[MAXF];
    size_t n;
} fields_t;

static fields_t fl(const char *first, ...)
{
    fields_t r = {.n = 0};
    va_list ap;
    va_start(ap, first);
    for (const char *name = first; name; name = va_arg(ap, const char *)) {
        const char *value = va_arg(ap, const char *);
        assert_true(r.n < MAXF);
        r.f[r.n++] = (gw_field_t){gw_slice_str(name), gw_slice_str(value)};
    }
    va_end(ap);
    return r;
}

static gw_cache_req_t req_of(const char *method, const fields_t *f)
{
    return (gw_cache_req_t){gw_slice_str(method),
                            GW_SLICE_LIT("https"),
                            GW_SLICE_LIT("example.com"),
                            GW_SLICE_LIT("/a?b=1"),
                            f->f,
                            f->n};
}

static gw_cache_resp_t resp_of(unsigned status, const fields_t *f)
{
    return (gw_cache_resp_t){status, f->f, f->n};
}

static const gw_cache_policy_t pol0 = {0};
static const gw_cache_policy_t pol_heur = {.heuristic = 1};

static gw_cache_nostore_t storable(const gw_cache_policy_t *pol, const char *method, fields_t rq,
                                   unsigned st, fields_t rs)
{
    gw_cache_req_t q = req_of(method, &rq);
    gw_cache_resp_t r = resp_of(st, &rs);
    return gw_cache_storable(pol, &q, &r);
}

#define NONE fl(NULL)

/* §3: explicit freshness makes an answer of a final status storable */
static void storable_statuses(void **state)
{
    (void)state;
    static const unsigned ok[] = {200, 203, 204, 301, 308, 404, 410, 302, 500};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_int_equal(
            storable(&pol0, "GET", NONE, ok[i], fl("cache-control", "max-age=60", NULL)),
            GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", NONE, 200, fl("expires", D0, NULL)), GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", NONE, 200, fl("cache-control", "s-maxage=5", NULL)),
                     GW_CACHE_STORE);
    /* 206 and 416 never (a partial is not stored); a 200's Content-Range means nothing (RFC
     * 9110 §14.4): it is a complete answer, stored with the field (cache-tests'
     * headers-store-Content-Range) */
    assert_int_equal(storable(&pol0, "GET", NONE, 206, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_PARTIAL);
    assert_int_equal(storable(&pol0, "GET", NONE, 416, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_PARTIAL);
    assert_int_equal(
        storable(&pol0, "GET", NONE, 200,
                 fl("cache-control", "max-age=60", "content-range", "bytes 0-1/9", NULL)),
        GW_CACHE_STORE);
    /* 304 and interim answers are not stored */
    assert_int_equal(storable(&pol0, "GET", NONE, 304, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_STATUS);
    assert_int_equal(storable(&pol0, "GET", NONE, 103, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_STATUS);
    /* §5.2.2.3 must-understand with a status we do not know */
    assert_int_equal(
        storable(&pol0, "GET", NONE, 299, fl("cache-control", "max-age=60, must-understand", NULL)),
        GW_CACHE_NS_STATUS);
    assert_int_equal(
        storable(&pol0, "GET", NONE, 200, fl("cache-control", "max-age=60, must-understand", NULL)),
        GW_CACHE_STORE);
    /* ... and a status it knows makes the no-store beside it ignored (not the request's) */
    fields_t mu = fl("cache-control", "max-age=60, no-store, must-understand", NULL);
    assert_int_equal(storable(&pol0, "GET", NONE, 200, mu), GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", NONE, 404, mu), GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", NONE, 599, mu), GW_CACHE_NS_NO_STORE);
    assert_int_equal(storable(&pol0, "GET", fl("cache-control", "no-store", NULL), 200, mu),
                     GW_CACHE_NS_NO_STORE);
    /* only GET answers (HEAD, POST, unknown methods) */
    assert_int_equal(storable(&pol0, "HEAD", NONE, 200, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_METHOD);
    assert_int_equal(storable(&pol0, "POST", NONE, 200, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_METHOD);
}

static void never_stored(void **state)
{
    (void)state;
    fields_t fresh = fl("cache-control", "max-age=60", NULL);
    /* §5.2.2.5, §5.2.1.5 */
    assert_int_equal(storable(&pol0, "GET", NONE, 200,
                              fl("cache-control", "public, max-age=60, no-store", NULL)),
                     GW_CACHE_NS_NO_STORE);
    assert_int_equal(storable(&pol0, "GET", fl("cache-control", "no-store", NULL), 200, fresh),
                     GW_CACHE_NS_NO_STORE);
    /* §5.2.2.7, qualified or not */
    assert_int_equal(
        storable(&pol0, "GET", NONE, 200, fl("cache-control", "max-age=60, private", NULL)),
        GW_CACHE_NS_PRIVATE);
    assert_int_equal(storable(&pol0, "GET", NONE, 200,
                              fl("cache-control", "max-age=60, private=\"x-user\"", NULL)),
                     GW_CACHE_NS_PRIVATE);
    /* Set-Cookie, whatever the directives say */
    assert_int_equal(
        storable(&pol0, "GET", NONE, 200,
                 fl("cache-control", "public, s-maxage=60", "Set-Cookie", "a=b", NULL)),
        GW_CACHE_NS_SET_COOKIE);
    /* §4.1 Vary: * */
    assert_int_equal(storable(&pol0, "GET", NONE, 200,
                              fl("cache-control", "max-age=60", "vary", "accept, *", NULL)),
                     GW_CACHE_NS_VARY_STAR);
    /* no freshness at all, and no heuristic allowed */
    assert_int_equal(storable(&pol0, "GET", NONE, 200, fl("last-modified", D0, NULL)),
                     GW_CACHE_NS_FRESHNESS);
    assert_int_equal(storable(&pol0, "GET", NONE, 200, fl("cache-control", "public", NULL)),
                     GW_CACHE_NS_FRESHNESS);
}

/* §3.5: a request with Authorization (or a Cookie, the gateway's rule) only with public,
 * s-maxage or must-revalidate */
static void authorization(void **state)
{
    (void)state;
    fields_t auth = fl("authorization", "Basic eDp5", NULL);
    fields_t cookie = fl("cookie", "sid=1", NULL);
    assert_int_equal(storable(&pol0, "GET", auth, 200, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_AUTH);
    assert_int_equal(storable(&pol0, "GET", cookie, 200, fl("cache-control", "max-age=60", NULL)),
                     GW_CACHE_NS_AUTH);
    assert_int_equal(
        storable(&pol0, "GET", auth, 200, fl("cache-control", "max-age=60, public", NULL)),
        GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", auth, 200, fl("cache-control", "s-maxage=60", NULL)),
                     GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", cookie, 200,
                              fl("cache-control", "max-age=60, must-revalidate", NULL)),
                     GW_CACHE_STORE);
}

static int for_credentials(fields_t rq, fields_t rs)
{
    gw_cache_req_t q = req_of("GET", &rq);
    gw_cache_resp_t r = resp_of(200, &rs);
    return gw_cache_for_credentials(&q, &r);
}

/* §3.5: an answer for the request's credentials alone, which must not change the shared entry
 * (proxy/cache.c's drop_superseded): credentials and none of public, s-maxage, must-revalidate,
 * whatever else the answer says (private, no-store, nothing) */
static void credentials_alone(void **state)
{
    (void)state;
    fields_t auth = fl("authorization", "Basic eDp5", NULL);
    fields_t cookie = fl("cookie", "sid=1", NULL);
    assert_int_equal(for_credentials(auth, fl("cache-control", "max-age=60", NULL)), 1);
    assert_int_equal(for_credentials(cookie, fl("cache-control", "max-age=60", NULL)), 1);
    assert_int_equal(for_credentials(auth, fl("cache-control", "private, max-age=60", NULL)), 1);
    assert_int_equal(for_credentials(auth, fl("cache-control", "no-store", NULL)), 1);
    assert_int_equal(for_credentials(auth, NONE), 1);
    assert_int_equal(for_credentials(auth, fl("cache-control", "public, max-age=60", NULL)), 0);
    assert_int_equal(for_credentials(auth, fl("cache-control", "s-maxage=60", NULL)), 0);
    assert_int_equal(for_credentials(cookie, fl("cache-control", "must-revalidate", NULL)), 0);
    assert_int_equal(for_credentials(NONE, fl("cache-control", "private, max-age=60", NULL)), 0);
    assert_int_equal(for_credentials(fl("accept", "*/*", NULL), NONE), 0);
}

/* §4.2.2: heuristic freshness only when enabled, only with Last-Modified, 10 % capped */
static void heuristic_freshness(void **state)
{
    (void)state;
    fields_t lm = fl("date", D0, "last-modified", D0_MINUS_10D, NULL);
    assert_int_equal(storable(&pol_heur, "GET", NONE, 200, lm), GW_CACHE_STORE);
    assert_int_equal(storable(&pol0, "GET", NONE, 200, lm), GW_CACHE_NS_FRESHNESS);
    assert_int_equal(storable(&pol_heur, "GET", NONE, 200, fl("date", D0, NULL)),
                     GW_CACHE_NS_FRESHNESS);
    /* a status that is not heuristically cacheable needs public */
    assert_int_equal(storable(&pol_heur, "GET", NONE, 302, lm), GW_CACHE_NS_FRESHNESS);
    gw_cache_resp_t r = resp_of(200, &lm);
    int h = 0;
    /* 10 days since Last-Modified: 1 day, which is also the cap */
    assert_int_equal(gw_cache_lifetime(&pol_heur, &r, T0, &h), 86400);
    assert_int_equal(h, 1);
    fields_t lm2 = fl("date", D0, "last-modified", "Sun, 31 Dec 2023 00:00:00 GMT", NULL);
    r = resp_of(200, &lm2);
    assert_int_equal(gw_cache_lifetime(&pol_heur, &r, T0, &h), 8640); /* 10 % of one day */
    fields_t lm3 = fl("date", D0, "last-modified", "Mon, 01 Jan 2001 00:00:00 GMT", NULL);
    r = resp_of(200, &lm3);
    assert_int_equal(gw_cache_lifetime(&pol_heur, &r, T0, &h), GW_CACHE_HEURISTIC_MAX);
    assert_int_equal(gw_cache_lifetime(&pol0, &r, T0, &h), 0);
    assert_int_equal(h, 0);
    /* explicit freshness wins over the heuristic */
    fields_t both =
        fl("date", D0, "last-modified", D0_MINUS_10D, "cache-control", "max-age=7", NULL);
    r = resp_of(200, &both);
    assert_int_equal(gw_cache_lifetime(&pol_heur, &r, T0, &h), 7);
    assert_int_equal(h, 0);
}

/* §4.2.1: s-maxage > max-age > Expires - Date */
static void lifetime_order(void **state)
{
    (void)state;
    struct {
        fields_t f;
        uint32_t want;
    } cases[] = {
        {fl("cache-control", "max-age=60, s-maxage=120", "expires", D0_PLUS_1H, "date", D0, NULL),
         120},
        {fl("cache-control", "max-age=60", "expires", D0_PLUS_1H, "date", D0, NULL), 60},
        {fl("expires", D0_PLUS_1H, "date", D0, NULL), 3600},
        /* no Date: the time of the response */
        {fl("expires", D0_PLUS_1H, NULL), 3600},
        /* Expires in the past, or invalid (§5.3: "0" is in the past) */
        {fl("expires", D0_MINUS_10D, "date", D0, NULL), 0},
        {fl("expires", "0", "date", D0, NULL), 0},
        /* §4.2.1: conflicting or invalid max-age: stale */
        {fl("cache-control", "max-age=60, max-age=120", NULL), 0},
        {fl("cache-control", "max-age=abc", "expires", D0_PLUS_1H, "date", D0, NULL), 0},
        {fl("cache-control", "s-maxage=\"30\"", NULL), 30},
        /* §1.2.2: huge values are 2^31 */
        {fl("cache-control", "max-age=99999999999", NULL), GW_HTTP_DELTA_MAX},
        {fl(NULL), 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_cache_resp_t r = resp_of(200, &cases[i].f);
        uint32_t got = gw_cache_lifetime(&pol0, &r, T0, NULL);
        if (got != cases[i].want)
            fail_msg("case %zu: lifetime %u, want %u", i, got, cases[i].want);
    }
}

/* §4.2.3 with the times passed in */
static void age_calculation(void **state)
{
    (void)state;
    gw_cache_meta_t m;
    /* Date 10 s before it arrived, Age 5, 2 s on the way: max(10, 5 + 2) = 10 */
    fields_t f = fl("date", D0, "age", "5", "cache-control", "max-age=100", NULL);
    gw_cache_resp_t r = resp_of(200, &f);
    gw_cache_meta(&pol0, &r, T0 + 8, T0 + 10, &m);
    assert_int_equal(m.initial_age, 10);
    assert_int_equal(m.lifetime, 100);
    assert_int_equal(gw_cache_age(&m, T0 + 10), 10);
    assert_int_equal(gw_cache_age(&m, T0 + 40), 40);
    assert_int_equal(gw_cache_age(&m, T0), 10); /* a clock that went back adds nothing */
    assert_true(gw_cache_fresh(&m, T0 + 99));
    assert_false(gw_cache_fresh(&m, T0 + 100)); /* lifetime > age, not >= */
    /* Age 30 from upstream, Date = now, 2 s delay: 32 */
    fields_t g = fl("date", D0, "age", "30, 99", "cache-control", "max-age=100", NULL);
    r = resp_of(200, &g);
    gw_cache_meta(&pol0, &r, T0 - 2, T0, &m);
    assert_int_equal(m.initial_age, 32);
    /* an invalid Age is ignored (§5.1); a Date in the future gives no negative age */
    fields_t h = fl("date", D0_PLUS_1H, "age", "-3", NULL);
    r = resp_of(200, &h);
    gw_cache_meta(&pol0, &r, T0, T0, &m);
    assert_int_equal(m.initial_age, 0);
}

static gw_cache_use_t use(const char *resp_cc, const fields_t *rq, uint32_t age_now)
{
    fields_t f = fl("date", D0, "cache-control", resp_cc, NULL);
    gw_cache_resp_t r = resp_of(200, &f);
    gw_cache_meta_t m;
    gw_cache_policy_t pol = {.stale_while_revalidate = 0};
    gw_cache_meta(&pol, &r, T0, T0, &m);
    gw_cache_req_t q = req_of("GET", rq);
    return gw_cache_use(&m, &q, T0 + age_now);
}

/* §5.2.1 and §5.4: what the request says of a stored answer */
static void request_directives(void **state)
{
    (void)state;
    fields_t none = fl(NULL);
    assert_int_equal(use("max-age=60", &none, 10), GW_CACHE_USE_FRESH);
    assert_int_equal(use("max-age=60", &none, 60), GW_CACHE_USE_REVALIDATE);
    fields_t nc = fl("cache-control", "no-cache", NULL);
    assert_int_equal(use("max-age=60", &nc, 1), GW_CACHE_USE_REVALIDATE);
    fields_t ma0 = fl("cache-control", "max-age=0", NULL);
    assert_int_equal(use("max-age=60", &ma0, 1), GW_CACHE_USE_REVALIDATE);
    /* ... also at age 0: it asks for a validated answer (a stored one of this second was not) */
    assert_int_equal(use("max-age=60", &ma0, 0), GW_CACHE_USE_REVALIDATE);
    fields_t ma5 = fl("cache-control", "max-age=5", NULL);
    assert_int_equal(use("max-age=60", &ma5, 5), GW_CACHE_USE_FRESH);
    assert_int_equal(use("max-age=60", &ma5, 6), GW_CACHE_USE_REVALIDATE);
    fields_t pragma = fl("pragma", "no-cache", NULL);
    assert_int_equal(use("max-age=60", &pragma, 1), GW_CACHE_USE_REVALIDATE);
    /* §5.4: Pragma is ignored beside a Cache-Control */
    fields_t pragma_cc = fl("pragma", "no-cache", "cache-control", "max-stale=1", NULL);
    assert_int_equal(use("max-age=60", &pragma_cc, 1), GW_CACHE_USE_FRESH);
    fields_t mf = fl("cache-control", "min-fresh=20", NULL);
    assert_int_equal(use("max-age=60", &mf, 40), GW_CACHE_USE_FRESH);
    assert_int_equal(use("max-age=60", &mf, 41), GW_CACHE_USE_REVALIDATE);
    fields_t ms = fl("cache-control", "max-stale=10", NULL);
    assert_int_equal(use("max-age=60", &ms, 70), GW_CACHE_USE_FRESH);
    assert_int_equal(use("max-age=60", &ms, 71), GW_CACHE_USE_REVALIDATE);
    fields_t msany = fl("cache-control", "max-stale", NULL);
    assert_int_equal(use("max-age=60", &msany, 100000), GW_CACHE_USE_FRESH);
    /* §4.2.4: never stale past must-revalidate, proxy-revalidate, s-maxage */
    assert_int_equal(use("max-age=60, must-revalidate", &msany, 61), GW_CACHE_USE_REVALIDATE);
    assert_int_equal(use("max-age=60, proxy-revalidate", &msany, 61), GW_CACHE_USE_REVALIDATE);
    assert_int_equal(use("s-maxage=60", &msany, 61), GW_CACHE_USE_REVALIDATE);
    /* §5.2.1.7 only-if-cached: 504 when the answer cannot be used */
    fields_t oic = fl("cache-control", "only-if-cached", NULL);
    assert_int_equal(use("max-age=60", &oic, 1), GW_CACHE_USE_FRESH);
    assert_int_equal(use("max-age=60", &oic, 61), GW_CACHE_USE_UNAVAILABLE);
    /* §5.2.2.4 a stored no-cache answer is validated before each use */
    assert_int_equal(use("max-age=60, no-cache", &none, 1), GW_CACHE_USE_REVALIDATE);
}

static gw_cache_meta_t meta_of(const char *cc, const gw_cache_policy_t *pol)
{
    fields_t f = fl("date", D0, "cache-control", cc, NULL);
    gw_cache_resp_t r = resp_of(200, &f);
    gw_cache_meta_t m;
    gw_cache_meta(pol, &r, T0, T0, &m);
    return m;
}

/* RFC 5861 §3 and §4, with the configured defaults */
static void stale_windows(void **state)
{
    (void)state;
    gw_cache_policy_t def = {.stale_while_revalidate = 30, .stale_if_error = 300};
    fields_t none = fl(NULL);
    gw_cache_req_t q = req_of("GET", &none);
    gw_cache_meta_t m = meta_of("max-age=60, stale-while-revalidate=10", &pol0);
    assert_int_equal(m.swr, 10);
    assert_int_equal(gw_cache_use(&m, &q, T0 + 65), GW_CACHE_USE_STALE_SWR);
    assert_int_equal(gw_cache_use(&m, &q, T0 + 70), GW_CACHE_USE_STALE_SWR);
    assert_int_equal(gw_cache_use(&m, &q, T0 + 71), GW_CACHE_USE_REVALIDATE);
    /* the default applies when the answer names none */
    m = meta_of("max-age=60", &def);
    assert_int_equal(m.swr, 30);
    assert_int_equal(m.sie, 300);
    assert_int_equal(gw_cache_use(&m, &q, T0 + 90), GW_CACHE_USE_STALE_SWR);
    assert_true(gw_cache_stale_if_error(&m, &q, 503, T0 + 360));
    assert_true(gw_cache_stale_if_error(&m, &q, 0, T0 + 360)); /* no answer at all */
    assert_false(gw_cache_stale_if_error(&m, &q, 503, T0 + 361));
    assert_false(gw_cache_stale_if_error(&m, &q, 404, T0 + 61)); /* not an error */
    assert_false(gw_cache_stale_if_error(&m, &q, 501, T0 + 61));
    /* the answer's own directive wins over the default */
    m = meta_of("max-age=60, stale-if-error=5", &def);
    assert_true(gw_cache_stale_if_error(&m, &q, 502, T0 + 65));
    assert_false(gw_cache_stale_if_error(&m, &q, 502, T0 + 66));
    /* must-revalidate forbids both; s-maxage forbids the defaults, not the answer's grant */
    m = meta_of("max-age=60, must-revalidate, stale-if-error=99", &def);
    assert_int_equal(m.swr, 0);
    assert_false(gw_cache_stale_if_error(&m, &q, 502, T0 + 61));
    m = meta_of("s-maxage=60", &def);
    assert_int_equal(m.swr, 0);
    assert_int_equal(m.sie, 0);
    m = meta_of("s-maxage=60, stale-while-revalidate=5", &def);
    assert_int_equal(m.swr, 5);
    /* the request's stale-if-error widens the window; its no-cache closes it */
    fields_t rsie = fl("cache-control", "stale-if-error=1000", NULL);
    gw_cache_req_t qs = req_of("GET", &rsie);
    m = meta_of("max-age=60", &pol0);
    assert_false(gw_cache_stale_if_error(&m, &q, 502, T0 + 61));
    assert_true(gw_cache_stale_if_error(&m, &qs, 502, T0 + 1060));
    fields_t rnc = fl("cache-control", "no-cache", NULL);
    gw_cache_req_t qn = req_of("GET", &rnc);
    m = meta_of("max-age=60", &def);
    assert_false(gw_cache_stale_if_error(&m, &qn, 502, T0 + 61));
}

static gw_cache_cond_t cond(const fields_t *rq, const fields_t *stored)
{
    gw_cache_req_t q = req_of("GET", rq);
    gw_cache_resp_t r = resp_of(200, stored);
    return gw_cache_conditional(&q, &r);
}

/* RFC 9110 §13.2.2: If-None-Match, then (only without it) If-Modified-Since */
static void conditional_requests(void **state)
{
    (void)state;
    fields_t st = fl("etag", "W/\"v1\"", "last-modified", D0_MINUS_10D, "date", D0, NULL);
    fields_t none = fl(NULL);
    assert_int_equal(cond(&none, &st), GW_CACHE_COND_NONE);
    fields_t inm = fl("if-none-match", "\"x\", \"v1\"", NULL);
    assert_int_equal(cond(&inm, &st), GW_CACHE_COND_NOT_MODIFIED); /* weak comparison */
    fields_t inm_no = fl("if-none-match", "\"v2\"", NULL);
    assert_int_equal(cond(&inm_no, &st), GW_CACHE_COND_FAILED);
    fields_t star = fl("if-none-match", "*", NULL);
    assert_int_equal(cond(&star, &st), GW_CACHE_COND_NOT_MODIFIED);
    /* If-None-Match decides; If-Modified-Since is not looked at */
    fields_t both = fl("if-none-match", "\"v2\"", "if-modified-since", D0, NULL);
    assert_int_equal(cond(&both, &st), GW_CACHE_COND_FAILED);
    fields_t ims = fl("if-modified-since", D0, NULL);
    assert_int_equal(cond(&ims, &st), GW_CACHE_COND_NOT_MODIFIED);
    fields_t ims_old = fl("if-modified-since", "Thu, 01 Jan 2015 00:00:00 GMT", NULL);
    assert_int_equal(cond(&ims_old, &st), GW_CACHE_COND_FAILED);
    fields_t ims_bad = fl("if-modified-since", "yesterday", NULL);
    assert_int_equal(cond(&ims_bad, &st), GW_CACHE_COND_NONE);
    /* without Last-Modified, Date stands in (RFC 9111 §4.3.2) */
    fields_t st_date = fl("date", D0_MINUS_10D, NULL);
    assert_int_equal(cond(&ims, &st_date), GW_CACHE_COND_NOT_MODIFIED);
    /* If-Match and If-Unmodified-Since are the origin's */
    fields_t im = fl("if-match", "\"v1\"", NULL);
    assert_int_equal(cond(&im, &st), GW_CACHE_COND_FORWARD);
    fields_t ius = fl("if-unmodified-since", D0, NULL);
    assert_int_equal(cond(&ius, &st), GW_CACHE_COND_FORWARD);
}

static gw_cache_range_t range(const char *method, const fields_t *rq, const fields_t *stored,
                              unsigned status, uint64_t len, uint64_t *a, uint64_t *b)
{
    gw_cache_req_t q = req_of(method, rq);
    gw_cache_resp_t r = resp_of(status, stored);
    *a = *b = 999;
    return gw_cache_range(&q, &r, len, a, b);
}

/* RFC 9110 §14 against a stored full object of 1000 bytes */
static void ranges(void **state)
{
    (void)state;
    fields_t st = fl("etag", "\"s1\"", "last-modified", D0_MINUS_10D, "date", D0, NULL);
    uint64_t a, b;
    struct {
        const char *range;
        gw_cache_range_t want;
        uint64_t a, b;
    } cases[] = {
        {"bytes=0-99", GW_CACHE_RANGE_PARTIAL, 0, 99},
        {"bytes=900-", GW_CACHE_RANGE_PARTIAL, 900, 999},
        {"bytes=900-5000", GW_CACHE_RANGE_PARTIAL, 900, 999},
        {"bytes=-100", GW_CACHE_RANGE_PARTIAL, 900, 999},
        {"bytes=-5000", GW_CACHE_RANGE_PARTIAL, 0, 999},
        {"Bytes=5-5", GW_CACHE_RANGE_PARTIAL, 5, 5},
        {"bytes=1000-", GW_CACHE_RANGE_UNSATISFIABLE, 999, 999},
        {"bytes=-0", GW_CACHE_RANGE_UNSATISFIABLE, 999, 999},
        {"bytes=0-1, 5-6", GW_CACHE_RANGE_FORWARD, 999, 999},
        {"bytes=5-1", GW_CACHE_RANGE_NONE, 999, 999},
        {"bytes=a-1", GW_CACHE_RANGE_NONE, 999, 999},
        {"items=0-1", GW_CACHE_RANGE_NONE, 999, 999},
        {"bytes=", GW_CACHE_RANGE_NONE, 999, 999},
        {"bytes=0-1x", GW_CACHE_RANGE_NONE, 999, 999},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fields_t q = fl("range", cases[i].range, NULL);
        gw_cache_range_t got = range("GET", &q, &st, 200, 1000, &a, &b);
        if (got != cases[i].want || a != cases[i].a || b != cases[i].b)
            fail_msg("'%s': %s %llu-%llu, want %s %llu-%llu", cases[i].range,
                     gw_cache_range_str(got), (unsigned long long)a, (unsigned long long)b,
                     gw_cache_range_str(cases[i].want), (unsigned long long)cases[i].a,
                     (unsigned long long)cases[i].b);
    }
    fields_t q = fl("range", "bytes=0-9", NULL);
    /* HEAD, another stored status, an empty object */
    assert_int_equal(range("HEAD", &q, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_NONE);
    assert_int_equal(range("GET", &q, &st, 404, 1000, &a, &b), GW_CACHE_RANGE_NONE);
    assert_int_equal(range("GET", &q, &st, 200, 0, &a, &b), GW_CACHE_RANGE_UNSATISFIABLE);
    /* §13.1.5 If-Range: a strong ETag that matches, or the exact Last-Modified */
    fields_t ir_ok = fl("range", "bytes=0-9", "if-range", "\"s1\"", NULL);
    assert_int_equal(range("GET", &ir_ok, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_PARTIAL);
    fields_t ir_weak = fl("range", "bytes=0-9", "if-range", "W/\"s1\"", NULL);
    assert_int_equal(range("GET", &ir_weak, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_NONE);
    fields_t ir_other = fl("range", "bytes=0-9", "if-range", "\"s2\"", NULL);
    assert_int_equal(range("GET", &ir_other, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_NONE);
    fields_t ir_date = fl("range", "bytes=0-9", "if-range", D0_MINUS_10D, NULL);
    assert_int_equal(range("GET", &ir_date, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_PARTIAL);
    fields_t ir_date2 = fl("range", "bytes=0-9", "if-range", D0, NULL);
    assert_int_equal(range("GET", &ir_date2, &st, 200, 1000, &a, &b), GW_CACHE_RANGE_NONE);

    char cr[64];
    assert_int_equal(gw_cache_content_range(cr, sizeof(cr), 0, 99, 1000), 15);
    assert_string_equal(cr, "bytes 0-99/1000");
    gw_cache_content_range(cr, sizeof(cr), 1, 0, 1000);
    assert_string_equal(cr, "bytes */1000");
}

/* §3.2, §4.3.4: what a 304 updates */
static void not_modified_update(void **state)
{
    (void)state;
    /* §3.1: what of the origin's head is stored at all */
    static const char *const kept[] = {"content-type", "Cache-Control", "etag",
                                       "date",         "content-range", "content-encoding",
                                       "set-cookie",   "proxy-status",  "x-anything"};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        if (!gw_cache_field_stored(gw_slice_str(kept[i])))
            fail_msg("%s not stored", kept[i]);
    static const char *const dropped[] = {"Proxy-Authenticate",
                                          "proxy-authentication-info",
                                          "proxy-authorization",
                                          "age",
                                          "connection",
                                          "keep-alive",
                                          "transfer-encoding",
                                          "upgrade",
                                          "te",
                                          "proxy-connection"};
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
        if (gw_cache_field_stored(gw_slice_str(dropped[i])))
            fail_msg("%s stored", dropped[i]);
    /* §3.2, §4.3.4: what a 304 updates */
    assert_true(gw_cache_304_updates(GW_SLICE_LIT("Cache-Control")));
    assert_true(gw_cache_304_updates(GW_SLICE_LIT("etag")));
    assert_true(gw_cache_304_updates(GW_SLICE_LIT("expires")));
    assert_true(gw_cache_304_updates(GW_SLICE_LIT("date")));
    static const char *const keep[] = {"content-length",
                                       "Content-Encoding",
                                       "transfer-encoding",
                                       "connection",
                                       "keep-alive",
                                       "proxy-authenticate",
                                       "age",
                                       "vary",
                                       "content-range"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (gw_cache_304_updates(gw_slice_str(keep[i])))
            fail_msg("%s updated", keep[i]);
    fields_t stored = fl("content-type", "text/html", "cache-control", "max-age=1", "etag", "\"a\"",
                         "x-old", "1", "content-length", "5", NULL);
    fields_t upd = fl("Cache-Control", "max-age=600", "content-length", "0", "x-new", "2",
                      "connection", "close", NULL);
    gw_field_t out[16];
    ssize_t n = gw_cache_merge_304(stored.f, stored.n, upd.f, upd.n, out, 16);
    assert_int_equal(n, 6);
    const char *want[][2] = {{"content-type", "text/html"},
                             {"etag", "\"a\""},
                             {"x-old", "1"},
                             {"content-length", "5"},
                             {"Cache-Control", "max-age=600"},
                             {"x-new", "2"}};
    for (size_t i = 0; i < 6; i++) {
        assert_true(gw_slice_eq(out[i].name, gw_slice_str(want[i][0])));
        assert_true(gw_slice_eq(out[i].value, gw_slice_str(want[i][1])));
    }
    assert_int_equal(gw_cache_merge_304(stored.f, stored.n, upd.f, upd.n, out, 5), -1);
}

/* §4.4: an unsafe method with a non-error answer invalidates the target and same-origin
 * Location / Content-Location */
static void invalidation(void **state)
{
    (void)state;
    fields_t none = fl(NULL);
    gw_cache_req_t q = req_of("POST", &none);
    fields_t rf =
        fl("location", "https://EXAMPLE.com:443/new#frag", "content-location", "/a/b?c", NULL);
    gw_cache_resp_t r = resp_of(201, &rf);
    gw_cache_url_t u[3];
    assert_int_equal(gw_cache_invalidation(&q, &r, u), 3);
    assert_true(gw_slice_eq(u[0].path, GW_SLICE_LIT("/a?b=1")));
    assert_true(gw_slice_eq(u[1].path, GW_SLICE_LIT("/new")));
    assert_true(gw_slice_eq(u[1].authority, GW_SLICE_LIT("example.com")));
    assert_true(gw_slice_eq(u[2].path, GW_SLICE_LIT("/a/b?c")));
    /* another origin, scheme, a network-path and a relative reference are not ours */
    fields_t other =
        fl("location", "https://other.example/x", "content-location", "http://example.com/y", NULL);
    r = resp_of(303, &other);
    assert_int_equal(gw_cache_invalidation(&q, &r, u), 1);
    fields_t rel = fl("location", "//example.com/x", "content-location", "y/z", NULL);
    r = resp_of(200, &rel);
    assert_int_equal(gw_cache_invalidation(&q, &r, u), 1);
    /* an error answer, or a safe method: nothing */
    r = resp_of(500, &rf);
    assert_int_equal(gw_cache_invalidation(&q, &r, u), 0);
    gw_cache_req_t g = req_of("GET", &none);
    r = resp_of(200, &rf);
    assert_int_equal(gw_cache_invalidation(&g, &r, u), 0);
    /* a method we do not know is unsafe */
    gw_cache_req_t x = req_of("PURGEIT", &none);
    assert_int_equal(gw_cache_invalidation(&x, &r, u), 3);
    gw_cache_req_t d = req_of("DELETE", &none);
    r = resp_of(204, &none);
    assert_int_equal(gw_cache_invalidation(&d, &r, u), 1);
    /* the same host is the same origin as the key sees it: an IPv6 address in any spelling
     * (RFC 4291 §2.2), the default port written or not, with leading zeros or not */
    gw_cache_req_t v6 = req_of("POST", &none);
    v6.authority = GW_SLICE_LIT("[::1]");
    fields_t same = fl("location", "https://[0:0::0001]:443/new", "content-location",
                       "HTTPS://[0:0:0:0:0:0:0:1]:0443/cl", NULL);
    r = resp_of(201, &same);
    assert_int_equal(gw_cache_invalidation(&v6, &r, u), 3);
    assert_true(gw_slice_eq(u[1].path, GW_SLICE_LIT("/new")));
    assert_true(gw_slice_eq(u[2].path, GW_SLICE_LIT("/cl")));
    v6.authority = GW_SLICE_LIT("[0::1]:443");
    r = resp_of(201, &same);
    assert_int_equal(gw_cache_invalidation(&v6, &r, u), 3);
    fields_t names = fl("location", "https://Example.COM:0443/new", NULL);
    r = resp_of(201, &names);
    assert_int_equal(gw_cache_invalidation(&q, &r, u), 2);
    /* another address or port is another origin */
    fields_t diff =
        fl("location", "https://[::2]/new", "content-location", "https://[::1]:8443/cl", NULL);
    r = resp_of(201, &diff);
    assert_int_equal(gw_cache_invalidation(&v6, &r, u), 1);
}

/* RFC 9211 Cache-Status, and the ttl it shows */
static void cache_status(void **state)
{
    (void)state;
    char out[128];
    gw_cache_status_t hit = {.hit = 1, .has_ttl = 1, .ttl = 376};
    assert_int_equal(gw_cache_status_fmt(&hit, out, sizeof(out)), 20);
    assert_string_equal(out, "h2gate; hit; ttl=376");
    gw_cache_status_t miss = {.fwd = "uri-miss", .fwd_status = 200, .stored = 1, .collapsed = 1};
    gw_cache_status_fmt(&miss, out, sizeof(out));
    assert_string_equal(out, "h2gate; fwd=uri-miss; fwd-status=200; stored; collapsed");
    gw_cache_status_t stale = {.fwd = "stale", .fwd_status = 304, .has_ttl = 1, .ttl = -5};
    gw_cache_status_fmt(&stale, out, sizeof(out));
    assert_string_equal(out, "h2gate; fwd=stale; fwd-status=304; ttl=-5");
    gw_cache_status_t ns = {.fwd = "miss", .detail = gw_cache_nostore_str(GW_CACHE_NS_PRIVATE)};
    gw_cache_status_fmt(&ns, out, sizeof(out));
    assert_string_equal(out, "h2gate; fwd=miss; detail=private");
    /* what does not fit is not written half */
    assert_int_equal(gw_cache_status_fmt(&miss, out, 20), 0);
    assert_int_equal(gw_cache_status_fmt(&hit, out, 21), 20);
    assert_int_equal(gw_cache_status_fmt(&hit, out, 20), 0);
    gw_cache_meta_t m = meta_of("max-age=60", &pol0);
    assert_int_equal(gw_cache_ttl(&m, T0 + 10), 50);
    assert_int_equal(gw_cache_ttl(&m, T0 + 70), -10);
}

static void names(void **state)
{
    (void)state;
    assert_string_equal(gw_cache_nostore_str(GW_CACHE_NS_SET_COOKIE), "set-cookie");
    assert_string_equal(gw_cache_nostore_str((gw_cache_nostore_t)99), "?");
    assert_string_equal(gw_cache_use_str(GW_CACHE_USE_STALE_SWR), "stale-while-revalidate");
    assert_string_equal(gw_cache_cond_str(GW_CACHE_COND_NOT_MODIFIED), "not-modified");
    assert_string_equal(gw_cache_range_str(GW_CACHE_RANGE_FORWARD), "forward");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(storable_statuses),
    cmocka_unit_test(never_stored),
    cmocka_unit_test(authorization),
    cmocka_unit_test(credentials_alone),
    cmocka_unit_test(heuristic_freshness),
    cmocka_unit_test(lifetime_order),
    cmocka_unit_test(age_calculation),
    cmocka_unit_test(request_directives),
    cmocka_unit_test(stale_windows),
    cmocka_unit_test(conditional_requests),
    cmocka_unit_test(ranges),
    cmocka_unit_test(not_modified_update),
    cmocka_unit_test(invalidation),
    cmocka_unit_test(cache_status),
    cmocka_unit_test(names),
};

GW_TEST_MAIN(tests)
