/* Unit tests of http/list.c: the lists of RFC 9110 §5.6.1 and the parameters of §5.6.6, on the
 * examples of RFC 9110, RFC 9111 and RFC 8288, each value read from an exactly sized heap copy
 * so that a read past its end shows under ASan. */
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

/* The elements of in[0..len) split at sep under flags, joined with "|" into out. Checks that
 * every element is non-empty, has no OWS at either end and lies inside the value, and that the
 * cursor stops at the end. */
static void split(const char *in, size_t len, uint8_t sep, unsigned flags, char *out, size_t cap)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    memcpy(b, in, len);
    gw_http_list_t l = gw_http_list((gw_slice_t){b, len}, sep, flags);
    gw_slice_t e;
    size_t at = 0;
    out[0] = 0;
    while (gw_http_list_next(&l, &e)) {
        assert_true(e.len > 0);
        assert_true(e.base >= b && e.base + e.len <= b + len);
        assert_true(e.base[0] != ' ' && e.base[0] != '\t');
        assert_true(e.base[e.len - 1] != ' ' && e.base[e.len - 1] != '\t');
        int n =
            snprintf(out + at, cap - at, "%s%.*s", at ? "|" : "", (int)e.len, (const char *)e.base);
        assert_true(n >= 0 && (size_t)n < cap - at);
        at += (size_t)n;
    }
    assert_ptr_equal(l.p, l.end);
    free(b);
}

static void list_is(const char *in, uint8_t sep, unsigned flags, const char *want)
{
    char got[512];
    split(in, strlen(in), sep, flags, got, sizeof(got));
    if (strcmp(got, want))
        fail_msg("list \"%s\" (flags %u):\n got  %s\n want %s", in, flags, got, want);
}

/* RFC 9110 §5.6.1.2: "foo,bar", "foo ,bar," and "foo , ,bar,charlie" are valid lists; "",
 * "," and ",   ," have no element. */
static void rfc9110_lists(void **state)
{
    (void)state;
    list_is("foo,bar", ',', 0, "foo|bar");
    list_is("foo ,bar,", ',', 0, "foo|bar");
    list_is("foo , ,bar,charlie", ',', 0, "foo|bar|charlie");
    list_is("", ',', 0, "");
    list_is(",", ',', 0, "");
    list_is(",   ,", ',', 0, "");
    list_is("\t a b ,\tc\t", ',', 0, "a b|c");
    /* §12.5.3's Accept-Encoding examples */
    list_is("compress, gzip", ',', 0, "compress|gzip");
    list_is("gzip;q=1.0, identity; q=0.5, *;q=0", ',', 0, "gzip;q=1.0|identity; q=0.5|*;q=0");
    /* Connection options are bare tokens: whitespace separates them too */
    list_is("close, Keep-Alive", ',', GW_HTTP_LIST_F_SPACE, "close|Keep-Alive");
    list_is("a b,\tc ,, d", ',', GW_HTTP_LIST_F_SPACE, "a|b|c|d");
}

/* Quoted strings (RFC 9110 §5.6.4): a comma inside one splits only when the caller says so. */
static void quoted_strings(void **state)
{
    (void)state;
    /* RFC 9111 §5.2.2.7's field-name form of private */
    const char *cc = "private=\"Set-Cookie, X-Foo\", max-age=0";
    list_is(cc, ',', GW_HTTP_LIST_F_QUOTED, "private=\"Set-Cookie, X-Foo\"|max-age=0");
    list_is(cc, ',', 0, "private=\"Set-Cookie|X-Foo\"|max-age=0");
    list_is("a=\"x\\\",y\", b", ',', GW_HTTP_LIST_F_QUOTED, "a=\"x\\\",y\"|b");
    list_is("a=\"x\\\\\",y", ',', GW_HTTP_LIST_F_QUOTED, "a=\"x\\\\\"|y");
    list_is("a=\"unterminated, b", ',', GW_HTTP_LIST_F_QUOTED, "a=\"unterminated, b");
    list_is("a=\"<\", b", ',', GW_HTTP_LIST_F_QUOTED | GW_HTTP_LIST_F_ANGLE, "a=\"<\"|b");
}

/* RFC 8288 §3.5's Link examples: a comma inside <...> or a quoted string does not split. */
static void link_values(void **state)
{
    (void)state;
    unsigned f = GW_HTTP_LIST_F_QUOTED | GW_HTTP_LIST_F_ANGLE;
    list_is("<http://example.com/TheBook/chapter2>; rel=\"previous\"; title=\"previous chapter\"",
            ',', f,
            "<http://example.com/TheBook/chapter2>; rel=\"previous\"; title=\"previous "
            "chapter\"");
    list_is("</TheBook/chapter2>; rel=\"previous\"; title*=UTF-8'de'letztes%20Kapitel, "
            "</TheBook/chapter4>; rel=\"next\"; title*=UTF-8'de'n%c3%a4chstes%20Kapitel",
            ',', f,
            "</TheBook/chapter2>; rel=\"previous\"; title*=UTF-8'de'letztes%20Kapitel|"
            "</TheBook/chapter4>; rel=\"next\"; title*=UTF-8'de'n%c3%a4chstes%20Kapitel");
    list_is("<http://a/b,c>; rel=\"x, y\", <http://d>", ',', f,
            "<http://a/b,c>; rel=\"x, y\"|<http://d>");
    list_is("<http://a/b,c>; rel=\"x, y\", <http://d>", ',', 0,
            "<http://a/b|c>; rel=\"x|y\"|<http://d>");
    /* a space-separated rel list (RFC 8288 §3.3) */
    list_is("start http://example.net/relation/other", ' ', 0,
            "start|http://example.net/relation/other");
}

static int slice_is(gw_slice_t s, const char *want)
{
    return want ? s.base && gw_slice_eq(s, gw_slice_str(want)) : s.base == NULL;
}

/* An element's value and parameters: the media types of RFC 9110 §8.3.1, the codings of
 * §12.5.3, a link-value whose URI holds a ";". */
static void element_parameters(void **state)
{
    (void)state;
    static const struct {
        const char *elem;
        unsigned flags;
        const char *value, *params; /* params joined with "|" */
    } cases[] = {
        {"text/html;charset=utf-8", 0, "text/html", "charset=utf-8"},
        {"Text/HTML;Charset=\"utf-8\"", GW_HTTP_LIST_F_QUOTED, "Text/HTML", "Charset=\"utf-8\""},
        {"text/html; charset=\"utf-8\"", 0, "text/html", "charset=\"utf-8\""},
        {"identity; q=0.5", 0, "identity", "q=0.5"},
        {"*;q=0", 0, "*", "q=0"},
        {"gzip", 0, "gzip", ""},
        {";q=1", 0, "", "q=1"},
        {"br ; ; q=0.2 ;", 0, "br", "q=0.2"},
        {"a; p=\"x;y\"; q", GW_HTTP_LIST_F_QUOTED, "a", "p=\"x;y\"|q"},
        {"</a;b>; rel=preload; as=style", GW_HTTP_LIST_F_ANGLE, "</a;b>", "rel=preload|as=style"},
        {"</a;b>; rel=preload", 0, "</a", "b>|rel=preload"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_http_list_t p;
        gw_slice_t v = gw_http_elem_params(gw_slice_str(cases[i].elem), cases[i].flags, &p);
        char got[256];
        size_t at = 0;
        gw_slice_t e;
        got[0] = 0;
        while (gw_http_list_next(&p, &e))
            at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%.*s", at ? "|" : "", (int)e.len,
                                   (const char *)e.base);
        if (!gw_slice_eq(v, gw_slice_str(cases[i].value)) || strcmp(got, cases[i].params))
            fail_msg("element \"%s\": value \"%.*s\" params \"%s\"", cases[i].elem, (int)v.len,
                     (const char *)v.base, got);
    }
    gw_http_list_t p;
    gw_slice_t e;
    assert_int_equal(gw_http_elem_params((gw_slice_t){NULL, 0}, 0, &p).len, 0);
    assert_int_equal(gw_http_list_next(&p, &e), 0);
}

/* name [ BWS "=" BWS value ]: Cache-Control directives (RFC 9111 §5.2), parameters. */
static void parameter_split(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int eq;
        const char *name, *value; /* value NULL: none */
    } cases[] = {
        {"max-age=0", 1, "max-age", "0"},
        {"no-cache", 0, "no-cache", NULL},
        {"private=\"Set-Cookie, X-Foo\"", 1, "private", "Set-Cookie, X-Foo"},
        {"q = 0.5", 1, "q", "0.5"},
        {"charset=\"utf-8\"", 1, "charset", "utf-8"},
        {"title=\"a\\\"b\"", 1, "title", "a\\\"b"},
        {"a=", 1, "a", ""},
        {"=b", 1, "", "b"},
        {"a=\"", 1, "a", "\""},
        {"a=\"\"", 1, "a", ""},
        {"a=b=c", 1, "a", "b=c"},
        {"", 0, "", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_slice_t n, v;
        int eq = gw_http_param_split(gw_slice_str(cases[i].in), &n, &v);
        if (eq != cases[i].eq || !gw_slice_eq(n, gw_slice_str(cases[i].name)) ||
            !slice_is(v, cases[i].value))
            fail_msg("parameter \"%s\": %d name \"%.*s\" value \"%.*s\"", cases[i].in, eq,
                     (int)n.len, (const char *)n.base, (int)v.len, (const char *)v.base);
    }
}

/* split() of s[0..cut) at ',' and at ';' under each of the 8 combinations of flags. */
static void split_every_way(const char *s, size_t cut, void *user_data)
{
    (void)user_data;
    char out[512];
    for (unsigned f = 0; f < 8; f++) {
        split(s, cut, ',', f, out, sizeof(out));
        split(s, cut, ';', f, out, sizeof(out));
    }
}

static const char *const list_examples[] = {
    "foo , ,bar,charlie",
    "private=\"Set-Cookie, X-Foo\", max-age=0",
    "a=\"x\\\",y\", b",
    "</TheBook/chapter2>; rel=\"previous\", <http://a/b,c>; rel=\"x, y\"",
    "gzip;q=1.0, identity; q=0.5, *;q=0",
    "a b,\tc ,, d \t",
};

/* Every prefix of every example, under every combination of flags, from an exactly sized heap
 * copy: no read past the end, every element inside the value and trimmed (split() checks). */
static void every_prefix(void **state)
{
    (void)state;
    gw_test_each_prefix(list_examples, sizeof(list_examples) / sizeof(list_examples[0]),
                        split_every_way, NULL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(rfc9110_lists),   cmocka_unit_test(quoted_strings),
    cmocka_unit_test(link_values),     cmocka_unit_test(element_parameters),
    cmocka_unit_test(parameter_split), cmocka_unit_test(every_prefix),
};

GW_TEST_MAIN(tests)
