/* Unit tests of http/date.c: the three HTTP-date forms of RFC 9110 §5.6.7 (its own example
 * in each), and what is not one. */
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

static int64_t parse(const char *s)
{
    int64_t t = -42;
    if (gw_http_date_parse(gw_slice_str(s), &t) < 0)
        return -1;
    return t;
}

/* RFC 9110 §5.6.7's example, 784111777 seconds after the epoch, in its three forms */
static void rfc9110_forms(void **state)
{
    (void)state;
    assert_int_equal(parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
    assert_int_equal(parse("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
    assert_int_equal(parse("Sun Nov  6 08:49:37 1994"), 784111777);
    assert_int_equal(parse("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
    assert_int_equal(parse("Tue, 29 Feb 2000 23:59:59 GMT"), 951868799);
    assert_int_equal(parse("Sat, 01 Jan 2000 00:00:00 GMT"), 946684800);
    /* two-digit years: 1970-2069 */
    assert_int_equal(parse("Saturday, 01-Jan-00 00:00:00 GMT"), 946684800);
    assert_int_equal(parse("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86400);
}

static void not_dates(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "0",
        "-1",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06 Nox 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT ",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i]) != -1)
            fail_msg("'%s' parsed", bad[i]);
    }
}

static void check_prefix(const char *s, size_t cut, void *user_data)
{
    (void)user_data;
    uint8_t *b = malloc(cut ? cut : 1);
    assert_non_null(b);
    memcpy(b, s, cut);
    int64_t t;
    int rv = gw_http_date_parse((gw_slice_t){b, cut}, &t);
    assert_int_equal(rv, cut == strlen(s) ? 0 : -1); /* no prefix is a date */
    free(b);
}

static void every_prefix(void **state)
{
    (void)state;
    static const char *const ex[] = {"Sun, 06 Nov 1994 08:49:37 GMT",
                                     "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"};
    gw_test_each_prefix(ex, 3, check_prefix, NULL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(rfc9110_forms),
    cmocka_unit_test(not_dates),
    cmocka_unit_test(every_prefix),
};

GW_TEST_MAIN(tests)
