/* Unit tests of http/method.c: any token is a method (RFC 9110 §9.1); the properties of §9.2
 * for the methods of RFC 9110 and RFC 5789. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "http/http.h"

/* Only the standard methods have known properties, compared case-sensitively, and every other
 * one is neither safe nor idempotent (never sent twice, never coalesced). */
static void methods_one_rule(void **state)
{
    (void)state;
    enum {
        S = GW_HTTP_METHOD_F_SAFE,
        I = GW_HTTP_METHOD_F_IDEMPOTENT,
        C = GW_HTTP_METHOD_F_CACHEABLE
    };
    static const struct {
        const char *m;
        unsigned flags;
    } cases[] = {
        {"GET", S | I | C}, {"HEAD", S | I | C}, {"OPTIONS", S | I}, {"TRACE", S | I}, {"PUT", I},
        {"DELETE", I},      {"POST", C},         {"PATCH", 0},       {"CONNECT", 0},   {"BREW", 0},
        {"get", 0},         {"PROPFIND", 0},     {"GET ", 0},        {"GETX", 0},      {"GE", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_slice_t m = gw_slice_str(cases[i].m);
        assert_int_equal(gw_http_method_flags(m), cases[i].flags);
        assert_int_equal(gw_http_method_idempotent(m), (cases[i].flags & I) != 0);
    }
    GW_EXPECT_EACH(gw_http_method_valid, 1, "BREW", "!#$%&'*+-.^_`|~09azAZ");
    GW_EXPECT_EACH(gw_http_method_valid, 0, "", "BR@W", "GE T", "G\xc3\xa9T");
    assert_true(gw_http_method_is_connect(GW_SLICE_LIT("CONNECT")));
    assert_false(gw_http_method_is_connect(GW_SLICE_LIT("connect")));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(methods_one_rule),
};

GW_TEST_MAIN(tests)
