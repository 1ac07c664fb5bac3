/* Unit tests of http/sf.c: the Dictionary members and parameters of RFC 8941, on the
 * examples of its §3 and on malformed members, each value parsed from an exactly sized heap
 * copy so that a read past its end shows under ASan. */
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

/* The members of `in` written one per line as "KEY TYPE RAW PARAMS" (RAW, PARAMS as written;
 * "!" for a malformed member), into out. */
static void describe(const char *in, size_t len, char *out, size_t cap)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    memcpy(b, in, len);
    gw_http_sf_t c = gw_http_sf((gw_slice_t){b, len});
    gw_http_sf_member_t m;
    int rv;
    size_t at = 0;
    out[0] = 0;
    while ((rv = gw_http_sf_dict_next(&c, &m)) != 0) {
        int n;
        if (rv < 0)
            n = snprintf(out + at, cap - at, "!\n");
        else
            n = snprintf(out + at, cap - at, "%.*s %d %.*s %.*s\n", (int)m.key.len,
                         (const char *)m.key.base, (int)m.value.type, (int)m.value.raw.len,
                         (const char *)m.value.raw.base, (int)m.params.len,
                         (const char *)m.params.base);
        assert_true(n > 0 && (size_t)n < cap - at);
        at += (size_t)n;
    }
    assert_ptr_equal(c.p, c.end); /* the cursor ends at the end, never past it */
    free(b);
}

static void dict_is(const char *in, const char *want)
{
    char got[512];
    describe(in, strlen(in), got, sizeof(got));
    if (strcmp(got, want))
        fail_msg("dictionary \"%s\":\n got  %s\n want %s", in, got, want);
}

/* RFC 8941 §3.2's examples and one of each bare item type of §3.3. */
static void rfc8941_examples(void **state)
{
    (void)state;
    dict_is("en=\"Applepie\", da=:w4ZibGV0w6ZydGU=:", "en 3 \"Applepie\" \nda 5 "
                                                      ":w4ZibGV0w6ZydGU=: \n");
    dict_is("a=?0, b, c; foo=bar", "a 6 ?0 \nb 6  \nc 6  ; foo=bar\n");
    dict_is("rating=1.5, feelings=(joy sadness)", "rating 2 1.5 \nfeelings 7 (joy sadness) \n");
    dict_is("a=(1 2), b=3, c=4;aa=bb, d=(5 6);valid",
            "a 7 (1 2) \nb 1 3 \nc 1 4 ;aa=bb\nd 7 (5 6);valid \n");
    dict_is("int=-42, dec=4.5, str=\"hello world\", tok=foo123/456, "
            "bin=:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:, yes=?1, *star",
            "int 1 -42 \ndec 2 4.5 \nstr 3 \"hello world\" \ntok 4 foo123/456 \n"
            "bin 5 :cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==: \nyes 6 ?1 \n*star 6  \n");
    /* the values */
    gw_http_sf_t c = gw_http_sf(GW_SLICE_LIT("a=-999999999999999, b=?1, c=?0, d=7"));
    gw_http_sf_member_t m;
    const int64_t want[] = {-999999999999999ll, 1, 0, 7};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(gw_http_sf_dict_next(&c, &m), 1);
        assert_int_equal(m.value.integer, want[i]);
    }
    assert_int_equal(gw_http_sf_dict_next(&c, &m), 0);
}

/* A malformed member is reported (-1) and skipped to the next top-level comma; the members
 * around it still come. */
static void malformed_members(void **state)
{
    (void)state;
    dict_is("U=1, u=4", "!\nu 1 4 \n");      /* a key is lowercase */
    dict_is("u=4 5, i", "!\ni 6  \n");       /* junk after the item */
    dict_is("=, u=1", "!\nu 1 1 \n");        /* no key */
    dict_is("u=, i", "!\ni 6  \n");          /* no item */
    dict_is(",,u=2,,", "!\n!\nu 1 2 \n!\n"); /* empty members */
    dict_is("x=\"a,b\", u=2", "x 3 \"a,b\" \nu 1 2 \n");
    dict_is("x=\"unterminated, u=1", "!\n");           /* the comma is inside the string */
    dict_is("x=(1 2, u=1", "!\nu 1 1 \n");             /* an unclosed inner list */
    dict_is("u=2;=3, i", "!\ni 6  \n");                /* a parameter without a key */
    dict_is("a=1234567890123456, b=1", "!\nb 1 1 \n"); /* 16 digits */
    dict_is("a=1234567890123.5, b=1.2345", "!\n!\n");  /* 13 integer, 4 fraction digits */
    dict_is("a=\"\\x\"", "!\n"); /* an escape of neither DQUOTE nor backslash */
    dict_is("b=?2, c=:a*:", "!\n!\n");
    dict_is("d=\"\x01\"", "!\n"); /* a control in a String */
    dict_is("", "");
    dict_is(" \t ", "");
}

/* The parameters of a member, one at a time. */
static void parameters(void **state)
{
    (void)state;
    gw_http_sf_t c = gw_http_sf(GW_SLICE_LIT("abc;a=1;b=2; cde_456, x=?0;q=\"s\""));
    gw_http_sf_member_t m;
    gw_slice_t k;
    gw_http_sf_item_t v;
    assert_int_equal(gw_http_sf_dict_next(&c, &m), 1);
    gw_http_sf_t p = gw_http_sf(m.params);
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 1);
    assert_true(gw_slice_eq(k, GW_SLICE_LIT("a")) && v.type == GW_HTTP_SF_INTEGER &&
                v.integer == 1);
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 1);
    assert_true(gw_slice_eq(k, GW_SLICE_LIT("b")) && v.integer == 2);
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 1);
    assert_true(gw_slice_eq(k, GW_SLICE_LIT("cde_456")) && v.type == GW_HTTP_SF_BOOLEAN &&
                v.integer == 1);
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 0);
    assert_int_equal(gw_http_sf_dict_next(&c, &m), 1);
    p = gw_http_sf(m.params);
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 1);
    assert_true(gw_slice_eq(k, GW_SLICE_LIT("q")) && v.type == GW_HTTP_SF_STRING &&
                gw_slice_eq(v.raw, GW_SLICE_LIT("\"s\"")));
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), 0);
    assert_int_equal(gw_http_sf_dict_next(&c, &m), 0);
    /* parameters that were not checked: a missing key is reported */
    p = gw_http_sf(GW_SLICE_LIT(";=1"));
    assert_int_equal(gw_http_sf_param_next(&p, &k, &v), -1);
}

/* describe() of s[0..cut) (it checks where the cursor ends). */
static void describe_prefix(const char *s, size_t cut, void *user_data)
{
    (void)user_data;
    char out[512];
    describe(s, cut, out, sizeof(out));
}

static const char *const sf_examples[] = {
    "en=\"Applepie\", da=:w4ZibGV0w6ZydGU=:",
    "a=(1 2), b=3, c=4;aa=bb, d=(5 6);valid",
    "int=-42, dec=4.5, str=\"h\\\"i\", tok=foo123/456, yes=?1, *star",
    "x=(1 2 \"c\");p=1, u=2, y=:aGk=:, z=1.25",
};

/* Every prefix of every example parses without reading past its end (the exact heap copy),
 * and the cursor ends at the end; a NULL value has no member. */
static void every_prefix(void **state)
{
    (void)state;
    gw_test_each_prefix(sf_examples, sizeof(sf_examples) / sizeof(sf_examples[0]), describe_prefix,
                        NULL);
    gw_http_sf_t c = gw_http_sf((gw_slice_t){NULL, 0});
    gw_http_sf_member_t m;
    assert_int_equal(gw_http_sf_dict_next(&c, &m), 0);
}

/* Byte Sequences written (RFC 8941 §4.1.8): the example of §3.3.5 and RFC 4648 §10's vectors,
 * each exactly GW_HTTP_SF_BYTES_LEN long and read back as a Byte Sequence by the parser. */
static void bytes_serialized(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } v[] = {
        {"pretend this is binary content.", ":cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:"},
        {"", "::"},
        {"f", ":Zg==:"},
        {"fo", ":Zm8=:"},
        {"foo", ":Zm9v:"},
        {"foob", ":Zm9vYg==:"},
        {"fooba", ":Zm9vYmE=:"},
        {"foobar", ":Zm9vYmFy:"},
        {"\xff\xfe\x00\x01", "://4AAQ==:"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t n = strlen(v[i].in);
        if (i == 8)
            n = 4;
        char out[128];
        memset(out, 'X', sizeof(out));
        size_t k = gw_http_sf_bytes((const uint8_t *)v[i].in, n, out);
        assert_string_equal(out, v[i].out);
        assert_int_equal(k, strlen(v[i].out));
        assert_int_equal(k, GW_HTTP_SF_BYTES_LEN(n));
        char dict[160];
        snprintf(dict, sizeof(dict), "b=%s", out);
        gw_http_sf_t c = gw_http_sf(gw_slice_str(dict));
        gw_http_sf_member_t m;
        assert_int_equal(gw_http_sf_dict_next(&c, &m), 1);
        assert_int_equal(m.value.type, GW_HTTP_SF_BYTES);
        assert_int_equal(m.value.raw.len, k);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(bytes_serialized),  cmocka_unit_test(rfc8941_examples),
    cmocka_unit_test(malformed_members), cmocka_unit_test(parameters),
    cmocka_unit_test(every_prefix),
};

GW_TEST_MAIN(tests)
