/* Unit tests of http/priority.c: the RFC 9218 §4 Priority field (u, i) over the RFC 8941
 * dictionary syntax, with the defaults, the ignore rules of §4.1/§4.2 and malformed members. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "http/http.h"

typedef struct {
    const char *in;
    int urgency, incremental, found;
} vec_t;

static const vec_t vectors[] = {
    /* defaults */
    {"", 3, 0, 0},
    {"   ", 3, 0, 0},
    /* RFC 9218 §4.1, §4.2 and §5 examples */
    {"u=5", 5, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=0", 0, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=7", 7, 0, GW_HTTP_PRIO_F_URGENCY},
    {"i", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    {"i=?1", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    {"i=?0", 3, 0, GW_HTTP_PRIO_F_INCREMENTAL},
    {"u=5, i", 5, 1, GW_HTTP_PRIO_F_URGENCY | GW_HTTP_PRIO_F_INCREMENTAL},
    {"u=1,i", 1, 1, GW_HTTP_PRIO_F_URGENCY | GW_HTTP_PRIO_F_INCREMENTAL},
    {"i, u=2", 2, 1, GW_HTTP_PRIO_F_URGENCY | GW_HTTP_PRIO_F_INCREMENTAL},
    {" u=4 ,\ti ", 4, 1, GW_HTTP_PRIO_F_URGENCY | GW_HTTP_PRIO_F_INCREMENTAL},
    /* §4.1: out of range or wrong type is ignored */
    {"u=8", 3, 0, 0},
    {"u=-1", 3, 0, 0},
    {"u=99999999999999", 3, 0, 0},
    {"u=1234567890123456", 3, 0, 0}, /* 16 digits: not an Integer */
    {"u=1.5", 3, 0, 0},
    {"u=\"1\"", 3, 0, 0},
    {"u=?1", 3, 0, 0},
    {"u", 3, 0, 0}, /* Boolean true */
    {"u=8, i", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    /* §4.2: i must be a Boolean */
    {"i=1", 3, 0, 0},
    {"i=?2", 3, 0, 0},
    {"i=yes, u=2", 2, 0, GW_HTTP_PRIO_F_URGENCY},
    /* last occurrence wins (RFC 8941 §4.2.2) */
    {"u=1, u=6", 6, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=1, u=9", 3, 0, 0},
    {"i, i=?0", 3, 0, GW_HTTP_PRIO_F_INCREMENTAL},
    /* unknown keys, parameters, other value types are skipped */
    {"foo=bar, u=2", 2, 0, GW_HTTP_PRIO_F_URGENCY},
    {"x=\"a,b\", u=2", 2, 0, GW_HTTP_PRIO_F_URGENCY},
    {"x=(1 2 \"c\");p=1, u=2, y=:aGk=:, z=1.25", 2, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=2;foo=1, i;bar", 2, 1, GW_HTTP_PRIO_F_URGENCY | GW_HTTP_PRIO_F_INCREMENTAL},
    {"*a=1, u=6", 6, 0, GW_HTTP_PRIO_F_URGENCY},
    {"urgency=1, ii", 3, 0, 0},
    /* malformed members are ignored, the others still count */
    {"U=1, u=4", 4, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=4 5, i", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    {"=, u=1", 1, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=, i", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    {"x=\"unterminated, u=1", 3, 0, 0},
    {"x=(1 2, u=1", 1, 0, GW_HTTP_PRIO_F_URGENCY},
    {",,u=2,,", 2, 0, GW_HTTP_PRIO_F_URGENCY},
    {"u=2;=3, i", 3, 1, GW_HTTP_PRIO_F_INCREMENTAL},
    {"u=1x", 3, 0, 0},
};

/* Parse from an exactly sized heap copy, so that ASan catches a read past the value. */
static int parse_exact(const char *in, size_t len, uint8_t *u, uint8_t *i)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    memcpy(b, in, len);
    int rc = gw_http_priority_parse((gw_slice_t){b, len}, u, i);
    free(b);
    return rc;
}

static void known_vectors(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(vectors) / sizeof(vectors[0]); k++) {
        const vec_t *v = &vectors[k];
        uint8_t u = 99, i = 99;
        int rc = parse_exact(v->in, strlen(v->in), &u, &i);
        if (rc != v->found || u != v->urgency || i != v->incremental)
            print_message("vector \"%s\": rc %d u %u i %u\n", v->in, rc, u, i);
        assert_int_equal(rc, v->found);
        assert_int_equal(u, v->urgency);
        assert_int_equal(i, v->incremental);
    }
}

static void null_slice_is_default(void **state)
{
    (void)state;
    uint8_t u = 0, i = 1;
    assert_int_equal(gw_http_priority_parse((gw_slice_t){NULL, 0}, &u, &i), 0);
    assert_int_equal(u, 3);
    assert_int_equal(i, 0);
}

/* Every prefix of every vector parses without reading past its end and yields values in
 * range; a prefix ending inside "u=5, i" gives what the complete members say. */
static void every_prefix(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(vectors) / sizeof(vectors[0]); k++) {
        size_t n = strlen(vectors[k].in);
        for (size_t cut = 0; cut <= n; cut++) {
            uint8_t u = 99, i = 99;
            int rc = parse_exact(vectors[k].in, cut, &u, &i);
            assert_true(rc >= 0 && rc <= 3);
            assert_true(u <= 7);
            assert_true(i <= 1);
        }
    }
    const char *s = "u=5, i";
    const int want_u[] = {3, 3, 3, 5, 5, 5, 5};
    const int want_i[] = {0, 0, 0, 0, 0, 0, 1};
    for (size_t cut = 0; cut <= strlen(s); cut++) {
        uint8_t u, i;
        parse_exact(s, cut, &u, &i);
        assert_int_equal(u, want_u[cut]);
        assert_int_equal(i, want_i[cut]);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(known_vectors),
    cmocka_unit_test(null_slice_is_default),
    cmocka_unit_test(every_prefix),
};

GW_TEST_MAIN(tests)
