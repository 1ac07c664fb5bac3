/* Unit tests of http/fields.c: field values (RFC 9110 §5.5), the connection-specific fields
 * (RFC 9110 §7.6.1, RFC 9113 §8.2.2) and Content-Length values (RFC 9110 §8.6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "http/http.h"

typedef struct {
    const char *v; /* may hold a NUL: len says how long */
    size_t len;
    int ok;
} value_case_t;

static void field_values(void **state)
{
    (void)state;
    static const value_case_t cases[] = {
        {"", 0, 1},
        {"text/html", 9, 1},
        {"a b", 3, 1},
        {"a\tb", 3, 1},
        {" a", 2, 0},
        {"a ", 2, 0},
        {"\ta", 2, 0},
        {"a\t", 2, 0},
        {"a\rb", 3, 0},
        {"a\nb", 3, 0},
        {"a\0b", 3, 0},
        {"\x80\xff", 2, 1},
        {"x\x7fy", 3, 0},
        {"a\x10"
         "b",
         3, 0},
        {"\x01", 1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (gw_http_field_value_valid((gw_slice_t){(const uint8_t *)cases[i].v, cases[i].len}) !=
            cases[i].ok)
            fail_msg("value case %zu: want %d", i, cases[i].ok);
}

static void connection_specific_names(void **state)
{
    (void)state;
    static const char *const yes[] = {"connection",        "keep-alive", "proxy-connection",
                                      "transfer-encoding", "upgrade",    "te",
                                      "Connection",        "TE"};
    static const char *const no[] = {"content-length",
                                     "http2-settings",
                                     "host",
                                     "t",
                                     "tee",
                                     "connections",
                                     "upgrade-insecure-requests",
                                     "keep-alive2"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!gw_http_field_is_connection_specific(gw_slice_str(yes[i])))
            fail_msg("%s is connection-specific", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (gw_http_field_is_connection_specific(gw_slice_str(no[i])))
            fail_msg("%s is not connection-specific", no[i]);
}

typedef struct {
    const char *v;
    int rv;    /* what gw_http_content_length_parse returns */
    int64_t n; /* and the value it reads, when 0 */
} cl_case_t;

static void content_length_values(void **state)
{
    (void)state;
    static const cl_case_t cases[] = {{"0", 0, 0},
                                      {"42", 0, 42},
                                      {"999999999999999999", 0, 999999999999999999},
                                      {"1000000000000000000", -1, 0},
                                      {"", -1, 0},
                                      {"-1", -1, 0},
                                      {"1 ", -1, 0},
                                      {"0x10", -1, 0},
                                      {"+5", -1, 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t n = -7;
        int rv = gw_http_content_length_parse(gw_slice_str(cases[i].v), &n);
        if (rv != cases[i].rv || (rv == 0 && n != cases[i].n))
            fail_msg("content-length \"%s\": rv %d n %lld", cases[i].v, rv, (long long)n);
    }
}

/* Every byte value inside a value, first and last: the class bit decides inside, and SP /
 * HTAB may not stand at either end. */
static void field_values_every_byte(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        int inside = c == '\t' || (c >= 0x20 && c != 0x7f);
        int edge = inside && c != ' ' && c != '\t';
        uint8_t mid[3] = {'a', c, 'b'}, first[2] = {c, 'a'}, last[2] = {'a', c};
        if (gw_http_field_value_valid((gw_slice_t){mid, 3}) != inside)
            fail_msg("byte 0x%02x inside a value: want %d", b, inside);
        if (gw_http_field_value_valid((gw_slice_t){first, 2}) != edge ||
            gw_http_field_value_valid((gw_slice_t){last, 2}) != edge)
            fail_msg("byte 0x%02x at an end of a value: want %d", b, edge);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(field_values),
    cmocka_unit_test(field_values_every_byte),
    cmocka_unit_test(connection_specific_names),
    cmocka_unit_test(content_length_values),
};

GW_TEST_MAIN(tests)
