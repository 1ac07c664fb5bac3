/* Unit tests of http/cachectl.c: the Cache-Control directives of RFC 9111 §5.2 (and RFC 5861,
 * RFC 8246) gathered over field lines, delta-seconds (§1.2.2), Pragma no-cache (§5.4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "http/http.h"

static gw_http_cc_t cc_of(const char *v)
{
    gw_http_cc_t cc = {0};
    gw_http_cc_parse(&cc, gw_slice_str(v));
    return cc;
}

static void delta_seconds(void **state)
{
    (void)state;
    uint32_t v = 7;
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("0"), &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("00120"), &v), 0);
    assert_int_equal(v, 120);
    /* §1.2.2: a value past what we hold is 2^31 */
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("2147483648"), &v), 0);
    assert_int_equal(v, GW_HTTP_DELTA_MAX);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("99999999999999999999999"), &v), 0);
    assert_int_equal(v, GW_HTTP_DELTA_MAX);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("2147483647"), &v), 0);
    assert_int_equal(v, 2147483647u);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT(""), &v), -1);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("-1"), &v), -1);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT("1.5"), &v), -1);
    assert_int_equal(gw_http_delta_seconds(GW_SLICE_LIT(" 1"), &v), -1);
}

static void directives(void **state)
{
    (void)state;
    gw_http_cc_t cc = cc_of("No-Store, no-cache, PRIVATE, public, must-revalidate, "
                            "proxy-revalidate, no-transform, only-if-cached, must-understand, "
                            "immutable, unknown-ext=\"x\"");
    assert_int_equal(cc.flags, GW_HTTP_CC_NO_STORE | GW_HTTP_CC_NO_CACHE | GW_HTTP_CC_PRIVATE |
                                   GW_HTTP_CC_PUBLIC | GW_HTTP_CC_MUST_REVALIDATE |
                                   GW_HTTP_CC_PROXY_REVALIDATE | GW_HTTP_CC_NO_TRANSFORM |
                                   GW_HTTP_CC_ONLY_IF_CACHED | GW_HTTP_CC_MUST_UNDERSTAND |
                                   GW_HTTP_CC_IMMUTABLE);
    assert_int_equal(cc.valid, 0);
    assert_int_equal(cc.bad, 0);

    cc = cc_of("max-age=60, s-maxage=\"120\", min-fresh=5, stale-while-revalidate=30, "
               "stale-if-error=86400, max-stale=10");
    assert_int_equal(cc.flags & cc.valid, cc.flags);
    assert_int_equal(cc.max_age, 60);
    assert_int_equal(cc.s_maxage, 120); /* §5.2: quoted form accepted */
    assert_int_equal(cc.min_fresh, 5);
    assert_int_equal(cc.swr, 30);
    assert_int_equal(cc.sie, 86400);
    assert_int_equal(cc.max_stale, 10);
    assert_int_equal(cc.bad, 0);

    /* §5.2.1.2: max-stale alone accepts any staleness */
    cc = cc_of("max-stale");
    assert_true(cc.valid & GW_HTTP_CC_MAX_STALE);
    assert_int_equal(cc.max_stale, GW_HTTP_MAX_STALE_ANY);

    /* qualified forms set the bare bit (the stricter reading) */
    cc = cc_of("private=\"set-cookie, x-user\", no-cache=\"x\"");
    assert_true(cc.flags & GW_HTTP_CC_PRIVATE);
    assert_true(cc.flags & GW_HTTP_CC_NO_CACHE);
}

static void bad_and_conflicting_arguments(void **state)
{
    (void)state;
    /* a missing or non-numeric argument: present, not valid, bad */
    gw_http_cc_t cc = cc_of("max-age, s-maxage=abc, min-fresh=");
    assert_int_equal(cc.flags, GW_HTTP_CC_MAX_AGE | GW_HTTP_CC_S_MAXAGE | GW_HTTP_CC_MIN_FRESH);
    assert_int_equal(cc.valid, 0);
    assert_int_equal(cc.bad, cc.flags);

    /* §4.2.1: two occurrences that differ are bad; the smallest valid value is kept */
    cc = cc_of("max-age=60, max-age=0");
    assert_true(cc.bad & GW_HTTP_CC_MAX_AGE);
    assert_true(cc.valid & GW_HTTP_CC_MAX_AGE);
    assert_int_equal(cc.max_age, 0);
    /* the same value twice is not a conflict */
    cc = cc_of("max-age=60, max-age=060");
    assert_int_equal(cc.bad, 0);
    assert_int_equal(cc.max_age, 60);
    /* one valid and one invalid: valid and bad */
    cc = cc_of("max-age=x, max-age=5");
    assert_int_equal(cc.valid, GW_HTTP_CC_MAX_AGE);
    assert_int_equal(cc.bad, GW_HTTP_CC_MAX_AGE);
    assert_int_equal(cc.max_age, 5);
}

/* The directives of several field lines add up, names compared without case */
static void field_lines(void **state)
{
    (void)state;
    gw_field_t f[] = {
        {GW_SLICE_LIT("Cache-Control"), GW_SLICE_LIT("public")},
        {GW_SLICE_LIT("content-type"), GW_SLICE_LIT("max-age=1")},
        {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=30,  ,")},
        {GW_SLICE_LIT("pragma"), GW_SLICE_LIT("x, No-Cache")},
    };
    gw_http_cc_t cc;
    gw_http_cc_fields(&cc, f, 4);
    assert_int_equal(cc.flags, GW_HTTP_CC_PUBLIC | GW_HTTP_CC_MAX_AGE);
    assert_int_equal(cc.max_age, 30);
    assert_true(gw_http_pragma_no_cache(f, 4));
    assert_false(gw_http_pragma_no_cache(f, 3));
    gw_http_cc_fields(&cc, f, 0);
    assert_int_equal(cc.flags, 0);
}

static void check_prefix(const char *s, size_t cut, void *user_data)
{
    (void)user_data;
    uint8_t *b = malloc(cut ? cut : 1);
    assert_non_null(b);
    memcpy(b, s, cut);
    gw_http_cc_t cc = {0};
    gw_http_cc_parse(&cc, (gw_slice_t){b, cut});
    assert_int_equal(cc.valid & ~cc.flags, 0);
    assert_int_equal(cc.bad & ~cc.flags, 0);
    free(b);
}

/* every prefix, from an exactly sized heap copy: no read past the end under ASan */
static void every_prefix(void **state)
{
    (void)state;
    static const char *const ex[] = {
        "max-age=60, s-maxage=\"120\", private=\"a, b\", no-cache",
        "stale-while-revalidate=30,stale-if-error=99999999999999",
        "max-stale, min-fresh=1 , only-if-cached",
    };
    gw_test_each_prefix(ex, 3, check_prefix, NULL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(delta_seconds),
    cmocka_unit_test(directives),
    cmocka_unit_test(bad_and_conflicting_arguments),
    cmocka_unit_test(field_lines),
    cmocka_unit_test(every_prefix),
};

GW_TEST_MAIN(tests)
