/* Unit tests of cache/key.c: the primary key (RFC 9111 §4, RFC 3986 §6.2.2.1, §6.2.3) and the
 * Vary key (§4.1). */
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

static const char *key(const char *scheme, const char *authority, const char *path)
{
    static char out[256];
    gw_cache_url_t u = {gw_slice_str(scheme), gw_slice_str(authority), gw_slice_str(path)};
    size_t n = gw_cache_key(&u, NULL, 0);
    assert_true(n < sizeof(out));
    assert_int_equal(gw_cache_key(&u, out, sizeof(out)), n);
    out[n] = 0;
    return out;
}

static void primary_key(void **state)
{
    (void)state;
    assert_string_equal(key("https", "example.com", "/a?b=1"), "https://example.com/a?b=1");
    /* scheme and host lowercased, the path as sent */
    assert_string_equal(key("HTTPS", "Example.COM", "/A%2f?Q"), "https://example.com/A%2f?Q");
    /* the default port and an empty port dropped; another port kept */
    assert_string_equal(key("https", "example.com:443", "/"), "https://example.com/");
    assert_string_equal(key("http", "example.com:80", "/"), "http://example.com/");
    assert_string_equal(key("http", "example.com:", "/"), "http://example.com/");
    assert_string_equal(key("https", "example.com:80", "/"), "https://example.com:80/");
    assert_string_equal(key("http", "example.com:8080", "/"), "http://example.com:8080/");
    assert_string_equal(key("http", "[::1]:80", "/x"), "http://[::1]/x");
    /* a port is a number: its leading zeros go, then a default port too */
    assert_string_equal(key("http", "example.com:080", "/"), "http://example.com/");
    assert_string_equal(key("http", "example.com:08080", "/"), "http://example.com:8080/");
    assert_string_equal(key("http", "example.com:00", "/"), "http://example.com:0/");
    /* RFC 4291 §2.2: every spelling of one IPv6 address is one key, RFC 5952's text */
    static const char *const loop[] = {"[::1]",       "[0::1]",    "[::0001]", "[0:0:0:0:0:0:0:1]",
                                       "[0:0::1]:80", "[0000::1]:"};
    for (size_t i = 0; i < sizeof(loop) / sizeof(loop[0]); i++)
        assert_string_equal(key("http", loop[i], "/x"), "http://[::1]/x");
    assert_string_equal(key("https", "[2001:DB8:0:0::AB]:8443", "/"),
                        "https://[2001:db8::ab]:8443/");
    assert_string_equal(key("http", "[0:0:0:0:0:FFFF:192.0.2.1]", "/"),
                        "http://[::ffff:192.0.2.1]/");
    /* another address stays another key */
    assert_string_equal(key("http", "[::2]", "/x"), "http://[::2]/x");
    /* no literal (the fronts refuse it): as written, lowercased, its port kept */
    assert_string_equal(key("http", "[ZZ]:80", "/x"), "http://[zz]:80/x");
    assert_string_equal(key("http", "[::1]X", "/x"), "http://[::1]x/x");
    /* the scheme is part of it: an http answer never reaches an https client */
    assert_string_not_equal(key("http", "a", "/"), "https://a/");
    /* no dot-segment removal or decoding: an origin may tell these apart */
    assert_string_equal(key("https", "a", "/x/../y"), "https://a/x/../y");
    /* a short buffer is not written past */
    char small[8] = "xxxxxxx";
    gw_cache_url_t u = {GW_SLICE_LIT("https"), GW_SLICE_LIT("example.com"), GW_SLICE_LIT("/")};
    assert_int_equal(gw_cache_key(&u, small, 4), 20);
    assert_int_equal(small[4], 'x');
}

static ssize_t vkey(const gw_field_t *resp, size_t nresp, const gw_field_t *req, size_t nreq,
                    char *out, size_t cap)
{
    ssize_t n = gw_cache_vary_key(resp, nresp, req, nreq, NULL, 0);
    if (n < 0)
        return n;
    assert_true((size_t)n < cap);
    assert_int_equal(gw_cache_vary_key(resp, nresp, req, nreq, out, cap), n);
    out[n] = 0;
    return n;
}

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }

static void vary_key(void **state)
{
    (void)state;
    char a[256], b[256];
    gw_field_t resp[] = {F("Vary", "Accept-Encoding, accept-language"), F("vary", "ACCEPT")};
    /* names lowercased; the lines of a field combined; whitespace around commas removed */
    gw_field_t r1[] = {F("accept-encoding", "gzip,  br"), F("Accept-Language", "en"),
                       F("accept-language", "fr ; q=0.5"), F("x", "y")};
    assert_true(vkey(resp, 2, r1, 4, a, sizeof(a)) > 0);
    assert_string_equal(a, "accept-encoding:gzip,br\naccept-language:en,fr ; q=0.5\naccept!\n");
    gw_field_t r2[] = {F("Accept-Encoding", "gzip , br"), F("accept-language", "en, fr ; q=0.5")};
    vkey(resp, 2, r2, 2, b, sizeof(b));
    assert_string_equal(a, b);
    /* values keep their case; absent differs from empty */
    gw_field_t r3[] = {F("accept-encoding", "GZIP, br")};
    vkey(resp, 1, r3, 1, b, sizeof(b));
    assert_string_equal(b, "accept-encoding:GZIP,br\naccept-language!\n");
    gw_field_t r4[] = {F("accept-encoding", "GZIP, br"), F("accept-language", "")};
    vkey(resp, 1, r4, 2, a, sizeof(a));
    assert_string_equal(a, "accept-encoding:GZIP,br\naccept-language:\n");
    /* a name listed twice counts once */
    gw_field_t twice[] = {F("vary", "accept, Accept"), F("vary", "accept")};
    gw_field_t r5[] = {F("accept", "*/*")};
    vkey(twice, 2, r5, 1, a, sizeof(a));
    assert_string_equal(a, "accept:*/*\n");
    /* a comma inside a quoted string is kept as written */
    gw_field_t r6[] = {F("accept", "a;x=\"1 , 2\" , b")};
    vkey(twice, 1, r6, 1, a, sizeof(a));
    assert_string_equal(a, "accept:a;x=\"1 , 2\",b\n");
    /* no Vary: empty; Vary: * never matches */
    gw_field_t novary[] = {F("content-type", "text/html")};
    assert_int_equal(vkey(novary, 1, r1, 4, a, sizeof(a)), 0);
    gw_field_t star[] = {F("vary", "accept"), F("vary", "*")};
    assert_int_equal(gw_cache_vary_key(star, 2, r1, 4, NULL, 0), -1);
}

static const char *url_key(const char *url)
{
    static char out[256];
    gw_cache_url_t u;
    if (gw_cache_url_parse(gw_slice_str(url), &u) < 0)
        return NULL;
    size_t n = gw_cache_key(&u, out, sizeof(out) - 1);
    out[n] = 0;
    return out;
}

/* The purge URL the admin is given and the request's key agree */
static void url_parse(void **state)
{
    (void)state;
    assert_string_equal(url_key("https://Example.com:443/a?b=1#frag"), "https://example.com/a?b=1");
    assert_string_equal(url_key("HTTP://example.com"), "http://example.com/");
    assert_string_equal(url_key("http://[::1]:8080/x"), "http://[::1]:8080/x");
    /* any spelling of an IPv6 host names the entry of the address: a purge by [0:0::1] hits
     * what [::1] stored */
    assert_string_equal(url_key("http://[0:0:0:0:0:0:0:1]:80/x"), key("http", "[::1]", "/x"));
    assert_string_equal(url_key("https://[2001:DB8::0:AB]/"), "https://[2001:db8::ab]/");
    assert_string_equal(url_key("https://example.com:443/a?b=1"),
                        key("https", "example.com", "/a?b=1"));
    static const char *const bad[] = {"",
                                      "/a",
                                      "example.com/a",
                                      "ftp://example.com/a",
                                      "https:/example.com/a",
                                      "https://",
                                      "https:///a",
                                      "https://user@example.com/a",
                                      "https://:443/a",
                                      "https://exa mple.com/a",
                                      "https://example.com?q"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (url_key(bad[i]))
            fail_msg("'%s' parsed", bad[i]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(url_parse),
    cmocka_unit_test(primary_key),
    cmocka_unit_test(vary_key),
};

GW_TEST_MAIN(tests)
