/* Unit tests of http/chars.c: the one table of byte classes, checked for every byte value
 * against the grammar of RFC 9110, RFC 3986 and RFC 9113 written out as character lists, and
 * the predicates built on it (token, request-target, authority, CR/LF/NUL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "http/http.h"

static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static int in_list(uint8_t c, const char *list)
{
    return c && strchr(list, c) != NULL;
}

/* Every bit of every byte of gw_http_char_class against the rule it stands for. */
static void char_class_every_byte(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        unsigned want = 0;
        /* RFC 9110 §5.6.2 tchar */
        if (in_list(c, alnum) || in_list(c, "!#$%&'*+-.^_`|~"))
            want |= GW_HTTP_C_TCHAR;
        /* RFC 3986 §3.3 pchar / "/", §3.4 "?": unreserved, sub-delims, ":", "@" */
        if (in_list(c, alnum) || in_list(c, "-._~!$&'()*+,;=:@/?"))
            want |= GW_HTTP_C_TARGET;
        /* a host name's or IPv4 address's bytes (RFC 1123 §2.1, and "_"): RFC 3986 §3.2.2's
         * reg-name without "~", pct-encoding and sub-delims (http/http.h); the port's ':' and
         * the IP-literal's brackets are structure (gw_http_is_authority) */
        if (in_list(c, alnum) || in_list(c, "-._"))
            want |= GW_HTTP_C_HOST;
        /* RFC 9110 §5.5: field-vchar = VCHAR / obs-text, and SP, HTAB between them */
        if ((c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t')
            want |= GW_HTTP_C_FIELD;
        /* RFC 9113 §8.2.1: "MUST NOT contain characters in the ranges 0x00-0x20, 0x41-0x5a,
         * or 0x7f-0xff"; ':' only as a pseudo-header field's first character */
        if (c > 0x20 && !(c >= 0x41 && c <= 0x5a) && c < 0x7f && c != ':')
            want |= GW_HTTP_C_H2NAME;
        if (gw_http_char_class[c] != want)
            fail_msg("byte 0x%02x: class %u, want %u", b, gw_http_char_class[c], want);
        if (gw_http_is_tchar(c) != ((want & GW_HTTP_C_TCHAR) != 0))
            fail_msg("gw_http_is_tchar(0x%02x)", b);
        if (gw_http_is_field_byte(c) != ((want & GW_HTTP_C_FIELD) != 0))
            fail_msg("gw_http_is_field_byte(0x%02x)", b);
    }
}

/* The request-head predicates with every byte value in the middle, at the start and at the end
 * of a slice, and "%" followed by every byte value. */
static void predicates_every_byte(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        int target = (gw_http_char_class[c] & GW_HTTP_C_TARGET) != 0;
        int host = (gw_http_char_class[c] & GW_HTTP_C_HOST) != 0;
        int token = (gw_http_char_class[c] & GW_HTTP_C_TCHAR) != 0;
        uint8_t mid[3] = {'a', c, 'b'}, start[2] = {c, 'a'}, end[2] = {'a', c};
        gw_slice_t m = {mid, 3}, st = {start, 2}, en = {end, 2}, one = {&mid[1], 1};
        if (gw_http_is_request_target(m) != target || gw_http_is_request_target(st) != target ||
            gw_http_is_request_target(en) != target || gw_http_is_request_target(one) != target)
            fail_msg("request-target byte 0x%02x: want %d", b, target);
        /* ':' is the port's separator: "a:" is a host and an empty port, "a:b" and ":a" are
         * refused; '.' separates labels: ".a" has an empty one */
        int colon = c == ':', dot = c == '.';
        if (gw_http_is_authority(m) != host || gw_http_is_authority(st) != (host && !dot) ||
            gw_http_is_authority(en) != (host || colon))
            fail_msg("authority byte 0x%02x: want %d", b, host);
        if (gw_http_is_token(m) != token || gw_http_is_token(one) != token)
            fail_msg("token byte 0x%02x: want %d", b, token);
        /* percent-encoded, any byte value: passes as it is */
        char pct[8];
        snprintf(pct, sizeof(pct), "/%%%02X", b);
        assert_true(gw_http_is_request_target(gw_slice_str(pct)));
        snprintf(pct, sizeof(pct), "/%%%02x/", b);
        assert_true(gw_http_is_request_target(gw_slice_str(pct)));
        assert_true(gw_http_is_authority(gw_slice_str(pct + 1)) == 0); /* '/' */
    }
}

/* A request line an origin would split otherwise never passes: a '%' not followed by two hex
 * digits, whitespace, '#', controls, DEL, bytes >= 0x80, and the delimiters RFC 3986 leaves
 * out. */
static void request_target_vectors(void **state)
{
    (void)state;
    static const char *const bad[] = {"/%",
                                      "/%4",
                                      "/%4g",
                                      "/a%",
                                      "/%%41",
                                      "",
                                      "/a b",
                                      "/a#b",
                                      ("/a\x0b"
                                       "HTTP/1.0"), /* a VT, then what looks like a version */
                                      "/\x7f",
                                      "/\xc3\xa9",
                                      "/a\tb",
                                      "/a\"",
                                      "/<x>",
                                      "/a\\b",
                                      "/{}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gw_http_is_request_target(gw_slice_str(bad[i])))
            fail_msg("bad target %zu accepted", i);
    static const char *const good[] = {
        "/", "*", "/a/b?c=d&e=%2F", "http://a.test:80/x?y", "/~u/!$&'()*+,;=:@", "/?/?"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!gw_http_is_request_target(gw_slice_str(good[i])))
            fail_msg("good target %zu refused", i);
    GW_EXPECT_EACH(gw_http_is_authority, 1, "", "[::1]:8443", "a.test:80", "[::1]",
                   "[::1]:", "[2001:DB8::a]:80", "[::ffff:192.0.2.1]:8080",
                   "a.test:", "192.0.2.1:8080", "A-B_c.Test.", "a.test:65535", "a:00080",
                   "localhost");
    /* a host name is what DNS names (and $host carries): no pct-encoding, "~" or sub-delims
     * (RFC 3986 §3.2.2 allows them in a reg-name; no client reaches a host so), no empty
     * label, at most 255 bytes; a port of at most five digits */
    GW_EXPECT_EACH(gw_http_is_authority, 0, "%61.test", "%61.test:1", "a~b.test", "a!b", "a$b",
                   "a&b", "a'b", "a(b)", "a*b", "a+b", "a,b.test", "a;b", "a=b", ".a.test",
                   "a..test", ".", "..", ".:80", "a.test:123456", "[::1]:000080");
    uint8_t name[256];
    memset(name, 'a', sizeof(name));
    assert_true(gw_http_is_authority((gw_slice_t){name, 255}));
    assert_false(gw_http_is_authority((gw_slice_t){name, 256}));
    GW_EXPECT_EACH(gw_http_is_authority, 0, "u@a.test", "a\".test", "a.test%4", "[::1", "::1]",
                   "[::1]x", "[::1]:8a", "[::1]]", "a[::1]", "[zz]", "[::1]:80]", "[%3a%3a1]", "[]",
                   "a.test]", "[::1%25eth0]", "::1", "a:b:c", "a.test:8a", ":80", "a.test:80:80",
                   "a.test: 80", "1.2.3.4::80",
                   /* IPvFuture: not a host (http/http.h) */
                   "[v1.x+y:z]", "[v1.xyz]:8080", "[VF.a:b]");
}

/* RFC 3986 §3.2.2: IP-literal = "[" ( IPv6address / IPvFuture ) "]", the IPv6address
 * grammar's nine alternatives at their edges (eight groups, "::" for one or more, an IPv4 tail
 * as the last two groups); IPvFuture, well-formed or not, is refused (http/http.h). */
static void ip_literal_vectors(void **state)
{
    (void)state;
    GW_EXPECT_EACH(gw_http_is_ip_literal, 1, "[::]", "[::1]", "[1::]", "[1:2:3:4:5:6:7:8]",
                   "[1:2:3:4:5:6:7::]", "[::2:3:4:5:6:7:8]", "[1::8]", "[fe80::1:2]",
                   "[FFFF:abcd::0]", "[::1.2.3.4]", "[::ffff:255.255.255.255]",
                   "[1:2:3:4:5:6:1.2.3.4]", "[1::5:6:1.2.3.4]", "[0:0:0:0:0:0:0:1]");
    GW_EXPECT_EACH(gw_http_is_ip_literal, 0, "", "[]", "[:]", "[:::]", "[1]", "[1:2:3:4:5:6:7]",
                   "[1:2:3:4:5:6:7:8:9]", "[1:2:3:4:5:6:7:8::]", "[::1:2:3:4:5:6:7:8]", "[1::2::3]",
                   "[:1::]", "[1::2:]", "[12345::]", "[g::]", "[::1 ]", "[1.2.3.4]", "[::1.2.3]",
                   "[::1.2.3.4.5]", "[::256.1.1.1]", "[::01.2.3.4]", "[::1.2.3.4:1]",
                   "[1:2:3:4:5:6:7:1.2.3.4]", "[1:2:3:4:5:6::1.2.3.4]", "[::1%eth0]",
                   "[::1%25eth0]", "[v.a]", "[v1.]", "[v1]", "[vg.a]", "[v1.a/b]", "[v1.a@b]",
                   "::1", "[::1", "::1]", "[[::1]]", "[v1.a]", "[VF.a:b]", "[v1a.!$&'()*+,;=-._~]");
}

/* RFC 9112 §3.2: the forms of a request-target; an absolute-form's authority and rest. */
static void target_form_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *t;
        int form;
        const char *authority, *rest;
    } v[] = {
        {"/a?b", GW_HTTP_TARGET_ORIGIN, NULL, NULL},
        {"*", GW_HTTP_TARGET_ASTERISK, NULL, NULL},
        {"http://a.test/x?y", GW_HTTP_TARGET_ABSOLUTE, "a.test", "/x?y"},
        {"HtTpS://a.test:8443", GW_HTTP_TARGET_ABSOLUTE, "a.test:8443", ""},
        {"http://a.test?q=/", GW_HTTP_TARGET_ABSOLUTE, "a.test", "?q=/"},
        /* RFC 3986 §3.2.2: an IP-literal host, brackets and all, with or without a port */
        {"http://[::1]:8080/a?b", GW_HTTP_TARGET_ABSOLUTE, "[::1]:8080", "/a?b"},
        {"http://[2001:db8::7]", GW_HTTP_TARGET_ABSOLUTE, "[2001:db8::7]", ""},
        {"https://[::ffff:192.0.2.1]?x", GW_HTTP_TARGET_ABSOLUTE, "[::ffff:192.0.2.1]", "?x"},
        /* brackets anywhere else, or around no IPv6 address, or bytes no form admits */
        {"http://[::1/", -1, NULL, NULL},
        {"http://[v1.fe]/", -1, NULL, NULL}, /* IPvFuture: no host (http/http.h) */
        {"http://[zz]/", -1, NULL, NULL},
        {"http://[::1]x/", -1, NULL, NULL},
        {"http://[::1]:80x/", -1, NULL, NULL},
        {"http://[]/", -1, NULL, NULL},
        {"http://a[::1]/", -1, NULL, NULL},
        {"http://[::1]/[x]", -1, NULL, NULL},
        {"http://[::1]/?[", -1, NULL, NULL},
        {"http://a.test/a b", -1, NULL, NULL},
        {"http://a.test/%zz", -1, NULL, NULL},
        /* a host no DNS name is (gw_http_is_authority): pct-encoding, sub-delims, "~" */
        {"http://%61.test/", -1, NULL, NULL},
        {"http://a!b.test/x", -1, NULL, NULL},
        {"http://a~b/", -1, NULL, NULL},
        {"http://a..b/", -1, NULL, NULL},
        {"/[::1]", -1, NULL, NULL},
        {"/a b", -1, NULL, NULL},
        {"[::1]:80", -1, NULL, NULL},
        {"ftp://a.test/x", -1, NULL, NULL},
        {"httpx://a.test/", -1, NULL, NULL},
        {"http://u@a.test/", -1, NULL, NULL},
        {"http:///x", -1, NULL, NULL},
        {"http:/a.test/x", -1, NULL, NULL},
        {"a.test:80", -1, NULL, NULL},
        {"**", -1, NULL, NULL},
        {"", -1, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        gw_slice_t a = {0}, r = {0};
        int got = gw_http_target_form(gw_slice_str(v[i].t), &a, &r);
        if (got != v[i].form)
            fail_msg("%s: form %d, want %d", v[i].t, got, v[i].form);
        if (v[i].authority && (!gw_slice_eq(a, gw_slice_str(v[i].authority)) ||
                               !gw_slice_eq(r, gw_slice_str(v[i].rest))))
            fail_msg("%s: authority %.*s rest %.*s", v[i].t, (int)a.len, a.base, (int)r.len,
                     r.base);
    }
}

/* RFC 9110 §5.6.2: token = 1*tchar. The names and methods the RFC itself writes are tokens;
 * the separators it lists (DQUOTE and "(),/:;<=>?@[\]{}"), whitespace, controls and non-ASCII
 * are not. */
static void token_grammar_vectors(void **state)
{
    (void)state;
    static const char *const good[] = {
        "GET", "Content-Type", "X-Forwarded-For", "accept-encoding", "PROPFIND", "!#$%&'*+-.^_`|~",
        "0",   "a.b_c-d"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!gw_http_is_token(gw_slice_str(good[i])))
            fail_msg("token \"%s\" refused", good[i]);
    static const char *const bad[] = {"",      "GE T",  "a\tb", "\"q\"", "a(b)", "a,b",
                                      "a/b",   "a:b",   "a;b",  "a<b",   "a=b",  "a>b",
                                      "a?b",   "a@b",   "a[b]", "a\\b",  "a{b}", "G\xc3\xa9T",
                                      "a\x7f", "a\x01", "host:"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gw_http_is_token(gw_slice_str(bad[i])))
            fail_msg("non-token %zu accepted", i);
    /* a token is checked to its length, not to a NUL */
    assert_false(gw_http_is_token((gw_slice_t){(const uint8_t *)"ab\0c", 4}));
    assert_true(gw_http_is_token((gw_slice_t){(const uint8_t *)"ab\0c", 2}));
}

/* gw_http_has_crlfnul (eight bytes at a time) against its byte-by-byte definition: every byte
 * value at every position of every length up to 24 (the word loop, the halves and the tail). */
static void crlfnul_matches_bytewise(void **state)
{
    (void)state;
    uint8_t s[24];
    for (size_t n = 0; n <= sizeof(s); n++) {
        for (size_t pos = 0; pos < (n ? n : 1); pos++) {
            for (int c = 0; c < 256; c++) {
                for (size_t i = 0; i < n; i++)
                    s[i] = (uint8_t)(0x41 + (i * 7 + n) % 60); /* letters and others, no CR/LF */
                if (n)
                    s[pos] = (uint8_t)c;
                int want = 0;
                for (size_t i = 0; i < n; i++)
                    want |= s[i] == '\r' || s[i] == '\n' || s[i] == 0;
                assert_int_equal(gw_http_has_crlfnul((gw_slice_t){s, n}), want);
            }
        }
    }
}

/* RFC 5952 §4 and §5: the canonical text of every spelling of an address (RFC 4291 §2.2). */
static void ip_literal_canon_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } v[] = {
        {"[::1]", "[::1]"},
        {"[0:0:0:0:0:0:0:1]", "[::1]"},
        {"[::0001]", "[::1]"},
        {"[0000::1]", "[::1]"},
        {"[::]", "[::]"},
        {"[0:0:0:0:0:0:0:0]", "[::]"},
        {"[2001:DB8::ABCD]", "[2001:db8::abcd]"},             /* §4.3: lower case */
        {"[2001:0db8:0:0::0:AbCd]", "[2001:db8::abcd]"},      /* §4.1: no leading zeros */
        {"[2001:db8:0:1:1:1:1:1]", "[2001:db8:0:1:1:1:1:1]"}, /* §4.2.2: one 0 stays */
        {"[2001:0:0:1:0:0:0:1]", "[2001:0:0:1::1]"},          /* §4.2.3: the longest run */
        {"[2001:db8:0:0:1:0:0:1]", "[2001:db8::1:0:0:1]"},    /* §4.2.3: the first of equals */
        {"[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7:8]"},
        {"[::ffff:192.0.2.1]", "[::ffff:192.0.2.1]"}, /* §5: mapped, dotted */
        {"[::FFFF:C000:0201]", "[::ffff:192.0.2.1]"},
        {"[0:0:0:0:0:ffff:192.0.2.1]", "[::ffff:192.0.2.1]"},
        {"[fe80::1:2]", "[fe80::1:2]"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[GW_HTTP_IP6_LITERAL_MAX];
        size_t n = gw_http_ip_literal_canon(gw_slice_str(v[i].in), out, sizeof(out));
        assert_int_equal(n, strlen(v[i].want));
        assert_string_equal(out, v[i].want);
        /* the canonical text is its own canonical text: a route's host, canonical at load,
         * compares equal to the request's made canonical */
        char again[GW_HTTP_IP6_LITERAL_MAX];
        assert_int_equal(gw_http_ip_literal_canon(gw_slice_str(out), again, sizeof(again)), n);
        assert_string_equal(again, out);
    }
    /* not an IPv6 literal: 0, and out untouched */
    static const char *const bad[] = {"",       "::1",      "[::1",   "[zz]",
                                      "[v1.a]", "[::1]:80", "a.test", "[::1%25eth0]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char out[GW_HTTP_IP6_LITERAL_MAX] = "x";
        assert_int_equal(gw_http_ip_literal_canon(gw_slice_str(bad[i]), out, sizeof(out)), 0);
        assert_string_equal(out, "x");
    }
    /* the longest text fits GW_HTTP_IP6_LITERAL_MAX; one byte less does not */
    const char *longest = "[1111:2222:3333:4444:5555:6666:255.255.255.255]";
    char out[GW_HTTP_IP6_LITERAL_MAX];
    assert_int_equal(gw_http_ip_literal_canon(gw_slice_str(longest), out, sizeof(out)), 41);
    assert_string_equal(out, "[1111:2222:3333:4444:5555:6666:ffff:ffff]");
    const char *mapped = "[::ffff:255.255.255.255]";
    assert_int_equal(gw_http_ip_literal_canon(gw_slice_str(mapped), out, strlen(mapped)), 0);
    assert_int_equal(gw_http_ip_literal_canon(gw_slice_str(mapped), out, strlen(mapped) + 1),
                     strlen(mapped));
}

/* gw_http_authority: one origin server, one host and port, whatever its spelling (RFC 3986
 * §6.2.2.1, §6.2.3; RFC 4291 §2.2) */
static void authority_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *scheme, *in, *host, *port;
    } v[] = {
        {"http", "", "", ""},
        {"http", "a.test", "a.test", ""},
        {"http", "A.test:80", "A.test", ""}, /* not lowercased: the caller does */
        {"HTTP", "a.test:080", "a.test", ""},
        {"http", "a.test:", "a.test", ""},
        {"http", "a.test:443", "a.test", "443"},
        {"https", "a.test:443", "a.test", ""},
        {"https", "a.test:80", "a.test", "80"},
        {"http", "a.test:0", "a.test", "0"},
        {"http", "a.test:00", "a.test", "0"},
        {"http", "a.test:08080", "a.test", "8080"},
        {"http", "192.0.2.1:80", "192.0.2.1", ""},
        {"http", "[::1]", "[::1]", ""},
        {"http", "[0::1]:80", "[::1]", ""},
        {"https", "[0:0:0:0:0:0:0:1]:0443", "[::1]", ""},
        {"http", "[2001:DB8::0AB]:8080", "[2001:db8::ab]", "8080"},
        {"http", "[::1]:", "[::1]", ""},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        gw_http_authority_t a;
        assert_int_equal(gw_http_authority(gw_slice_str(v[i].scheme), gw_slice_str(v[i].in), &a),
                         0);
        assert_true(gw_slice_eq(a.host, gw_slice_str(v[i].host)));
        assert_true(gw_slice_eq(a.port, gw_slice_str(v[i].port)));
    }
    gw_http_authority_t a, b;
    /* no IPv6 literal: -1, and the authority as written, port and all (the keys' fallback) */
    static const char *const bad[] = {"[zz]:80", "[::1", "[::1]x", "[::1]x:80", "[1.2.3.4]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&a, 0x55, sizeof(a));
        assert_int_equal(gw_http_authority(GW_SLICE_LIT("http"), gw_slice_str(bad[i]), &a), -1);
        assert_true(gw_slice_eq(a.host, gw_slice_str(bad[i])));
        assert_int_equal(a.port.len, 0);
    }
    /* hosts without case, IPv6 ones as addresses, ports as numbers */
    gw_http_authority(GW_SLICE_LIT("http"), GW_SLICE_LIT("A.Test:0080"), &a);
    gw_http_authority(GW_SLICE_LIT("http"), GW_SLICE_LIT("a.test"), &b);
    assert_true(gw_http_authority_eq(&a, &b));
    gw_http_authority(GW_SLICE_LIT("http"), GW_SLICE_LIT("[::1]"), &a);
    gw_http_authority(GW_SLICE_LIT("http"), GW_SLICE_LIT("[0:0::0001]:80"), &b);
    assert_true(gw_http_authority_eq(&a, &b));
    gw_http_authority(GW_SLICE_LIT("https"), GW_SLICE_LIT("[0:0::0001]:80"), &b);
    assert_false(gw_http_authority_eq(&a, &b));
    gw_http_authority(GW_SLICE_LIT("http"), GW_SLICE_LIT("[::2]"), &b);
    assert_false(gw_http_authority_eq(&a, &b));
}

/* gw_http_field_run (eight bytes at a time) against its byte-by-byte definition: every byte
 * value at every position of every length up to 24, over field bytes that include HTAB (which
 * the word test stops at), SP and obs-text. */
static void field_run_matches_bytewise(void **state)
{
    (void)state;
    static const uint8_t fill[] = "a\tZ ~!\x80\xff:09";
    uint8_t s[24];
    for (size_t n = 0; n <= sizeof(s); n++) {
        for (size_t pos = 0; pos < (n ? n : 1); pos++) {
            for (int c = 0; c < 256; c++) {
                for (size_t i = 0; i < n; i++)
                    s[i] = fill[(i * 5 + n) % (sizeof(fill) - 1)];
                if (n)
                    s[pos] = (uint8_t)c;
                size_t want = 0;
                while (want < n && gw_http_is_field_byte(s[want]))
                    want++;
                assert_int_equal(gw_http_field_run(s, n), want);
            }
        }
    }
}

/* gw_http_is_token and gw_http_is_request_target (classes ANDed four bytes a step, the byte
 * loop only for a string with a byte outside the class) against their byte-by-byte
 * definitions: every byte value at every position of every length up to 13. */
static void token_and_target_match_bytewise(void **state)
{
    (void)state;
    uint8_t s[13];
    for (size_t n = 1; n <= sizeof(s); n++) {
        for (size_t pos = 0; pos < n; pos++) {
            for (int c = 0; c < 256; c++) {
                for (size_t i = 0; i < n; i++)
                    s[i] = (uint8_t) "az09-_.~AZ"[(i * 3 + n) % 10];
                s[pos] = (uint8_t)c;
                int tok = 1, target = 1;
                for (size_t i = 0; i < n; i++) {
                    tok &= gw_http_is_tchar(s[i]);
                    target &= (gw_http_char_class[s[i]] & GW_HTTP_C_TARGET) != 0;
                }
                assert_int_equal(gw_http_is_token((gw_slice_t){s, n}), tok);
                if (c != '%') /* %HH: request_target_vectors */
                    assert_int_equal(gw_http_is_request_target((gw_slice_t){s, n}), target);
            }
        }
    }
}

/* gw_http_is_authority's rules spelled out byte by byte (http/http.h), as the function read
 * before its one-pass table: the host up to the first ':', a name of RFC 1123 bytes and '_'
 * (1 to 255, no empty label but the root's) or an IPv6 literal, then nothing or ':' and at
 * most five digits. */
static int authority_by_rules(const uint8_t *p, size_t n)
{
    if (!n)
        return 1;
    size_t i = 0;
    if (p[0] == '[') {
        while (i < n && p[i] != ']')
            i++;
        if (i == n || !gw_http_is_ip_literal((gw_slice_t){p, i + 1}))
            return 0;
        i++;
    } else {
        while (i < n && p[i] != ':')
            i++;
        if (!i || i > 255 || p[0] == '.')
            return 0;
        for (size_t j = 0; j < i; j++)
            if (!(in_list(p[j], alnum) || in_list(p[j], "-._")) ||
                (p[j] == '.' && j + 1 < i && p[j + 1] == '.'))
                return 0;
    }
    if (i == n)
        return 1;
    if (p[i] != ':' || n - i - 1 > 5)
        return 0;
    for (i++; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* Every string of length lo to hi over the bytes of alpha, against the rules. */
static void authority_every_string(const char *alpha, size_t lo, size_t hi)
{
    size_t k = strlen(alpha);
    uint8_t s[16];
    size_t idx[16];
    for (size_t n = lo; n <= hi; n++) {
        memset(idx, 0, sizeof(idx));
        for (;;) {
            for (size_t i = 0; i < n; i++)
                s[i] = (uint8_t)alpha[idx[i]];
            if (gw_http_is_authority((gw_slice_t){s, n}) != authority_by_rules(s, n))
                fail_msg("authority \"%.*s\" (length %zu): %d, the rules say %d", (int)n,
                         (const char *)s, n, gw_http_is_authority((gw_slice_t){s, n}),
                         authority_by_rules(s, n));
            size_t i = 0;
            while (i < n && ++idx[i] == k)
                idx[i++] = 0;
            if (i == n)
                break;
        }
    }
}

/* gw_http_is_authority (a table of its own, four bytes a step, the port read from the end)
 * against the rules: every string of one and two bytes; every string up to ten bytes of
 * letters, digits, '.' and ':' (every place of a label, an empty one, the port's ':' and its
 * length across the four-byte steps); up to four of the bytes at every class boundary; up to
 * eight of an IPv6 literal's; every byte value at every place of authorities up to 14 bytes;
 * names around 255 bytes. */
static void authority_matches_rules(void **state)
{
    (void)state;
    authority_every_string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
                           "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
                           " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_"
                           "`abcdefghijklmnopqrstuvwxyz{|}~\x7f\x80\x81\xbf\xc0\xfe\xff",
                           1, 2);
    for (unsigned a = 0; a < 256; a++) /* and NUL, which the list above cannot hold */
        for (unsigned b = 0; b < 256; b++) {
            uint8_t s[2] = {(uint8_t)a, (uint8_t)b};
            if (gw_http_is_authority((gw_slice_t){s, 2}) != authority_by_rules(s, 2) ||
                gw_http_is_authority((gw_slice_t){s, 1}) != authority_by_rules(s, 1))
                fail_msg("authority bytes 0x%02x 0x%02x", a, b);
        }
    authority_every_string("a1.:", 3, 10);
    /* every class's first and last byte and the bytes beside them ('-' '.' '/', '0' '9' ':',
     * '@' 'A' 'Z' '[' ']', '^' '_' '`', 'a' 'f' 'g' 'z' '{', DEL, 0x80, 0xff), and "v" */
    authority_every_string(",-./09:;@AZ[]^_`afgvz{\x7f\x80\xff", 3, 4);
    authority_every_string("[]:1f.", 3, 8);
    static const char *const base[] = {"a1.b-2_c.d:80", "192.0.2.1:8080", "[::1]:8443",
                                       "www.example.com", "a.b.c.d.e.f.g."};
    uint8_t s[300];
    for (size_t b = 0; b < sizeof(base) / sizeof(base[0]); b++) {
        size_t len = strlen(base[b]);
        for (size_t n = 1; n <= len; n++)
            for (size_t pos = 0; pos < n; pos++)
                for (unsigned c = 0; c < 256; c++) {
                    memcpy(s, base[b], n);
                    s[pos] = (uint8_t)c;
                    if (gw_http_is_authority((gw_slice_t){s, n}) != authority_by_rules(s, n))
                        fail_msg("authority %s, %zu bytes, byte 0x%02x at %zu", base[b], n, c, pos);
                }
    }
    static const char *const tail[] = {"",  ":",  ":1",   ":65535", ":123456",
                                       ".", "..", ".:80", "a",      "::1"};
    for (size_t n = 250; n <= 258; n++)
        for (size_t t = 0; t < sizeof(tail) / sizeof(tail[0]); t++)
            for (size_t dot = 0; dot <= n; dot += n - dot > 8 ? 64 : 1) {
                memset(s, 'a', n);
                if (dot < n)
                    s[dot] = '.';
                size_t tl = strlen(tail[t]);
                memcpy(s + n, tail[t], tl);
                if (gw_http_is_authority((gw_slice_t){s, n + tl}) != authority_by_rules(s, n + tl))
                    fail_msg("authority of a %zu-byte name, '.' at %zu, then \"%s\"", n, dot,
                             tail[t]);
            }
}

/* gw_http_path_as_read: what an origin reads a path as (RFC 3986 §5.2.4's examples among them),
 * never longer than the path, and a fixed point on what it returns */
static void path_as_read_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } v[] = {
        {"/", "/"},
        {"/a/b/c/./../../g", "/a/g"}, /* RFC 3986 §5.2.4's example */
        {"/mid/content=5/../6", "/mid/6"},
        {"/a/../../../b", "/b"},
        {"/..", "/"},
        {"/.", "/"},
        {"/a/..", "/"},
        {"/a/b/..", "/a/"},
        {"/a/.", "/a/"},
        {"/a//b///c", "/a/b/c"},
        {"//evil", "/evil"},
        {"/a/%2e%2E/b", "/b"},
        {"/a/.%2e/b?x/../y", "/b"}, /* the query is not the path */
        {"/a/..;/b", "/b"},
        {"/a;x=1/b;y", "/a/b"},
        {"/%61%62%7E", "/ab~"},
        {"/a%2Fb%5cc", "/a/b/c"},
        {"/a%2", "/a%2"},
        {"/a%zz", "/a%zz"},
        {"/a%3F%25", "/a%3F%25"}, /* reserved and '%' stay encoded */
        {"/...", "/..."},
        {"/.a/..b/", "/.a/..b/"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint8_t out[64], again[64];
        size_t n = gw_http_path_as_read(gw_slice_str(v[i].in), out);
        if (n != strlen(v[i].want) || memcmp(out, v[i].want, n))
            fail_msg("%s: \"%.*s\", want \"%s\"", v[i].in, (int)n, (const char *)out, v[i].want);
        assert_true(n <= strlen(v[i].in) || n == 1);
        size_t m = gw_http_path_as_read((gw_slice_t){out, n}, again);
        assert_true(m == n && !memcmp(again, out, n));
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(char_class_every_byte),      cmocka_unit_test(predicates_every_byte),
    cmocka_unit_test(request_target_vectors),     cmocka_unit_test(token_grammar_vectors),
    cmocka_unit_test(crlfnul_matches_bytewise),   cmocka_unit_test(target_form_vectors),
    cmocka_unit_test(ip_literal_vectors),         cmocka_unit_test(ip_literal_canon_vectors),
    cmocka_unit_test(authority_vectors),          cmocka_unit_test(authority_matches_rules),
    cmocka_unit_test(field_run_matches_bytewise), cmocka_unit_test(token_and_target_match_bytewise),
    cmocka_unit_test(path_as_read_vectors),
};

GW_TEST_MAIN(tests)
