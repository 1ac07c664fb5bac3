/* Unit tests of h1/parser (request side) and h1/serializer: framing, pipelining, split
 * feeding at every cut point, smuggling defences, limits, failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include "common/alloc.h"
#include "common/err.h"
#include "h1/parser.h"
#include "http/http.h"
#include "h1/serializer.h"

/* Events rendered as text, so whole/byte-by-byte/split runs can be compared. */
typedef struct {
    char log[8192];
    size_t len;
    int in_body; /* consecutive body pieces are rendered as one BODY line */
} rec_t;

#define addf(r, ...) GW_TEST_LOGF(r, __VA_ARGS__)

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    rec_t *r = ud;
    r->in_body = 0;
    addf(r, "HEAD %.*s %.*s 1.%u cl=%lld f=%u", (int)m->method.len, m->method.base,
         (int)m->target.len, m->target.base, m->version_minor, (long long)m->content_length,
         m->flags);
    for (size_t i = 0; i < m->fields_len; i++)
        addf(r, " [%.*s=%.*s]", (int)m->fields[i].name.len, m->fields[i].name.base,
             (int)m->fields[i].value.len, m->fields[i].value.base);
    addf(r, "\n");
    return 0;
}

static int on_body(void *ud, const uint8_t *p, size_t n)
{
    rec_t *r = ud;
    if (r->in_body) {
        r->len--; /* drop the newline: continue the same BODY line */
        addf(r, "%.*s\n", (int)n, p);
    } else {
        addf(r, "BODY %.*s\n", (int)n, p);
    }
    r->in_body = 1;
    return 0;
}

static int on_complete(void *ud)
{
    ((rec_t *)ud)->in_body = 0;
    addf((rec_t *)ud, "END\n");
    return 0;
}

static const gw_h1_callbacks_t cbs = {on_head, on_body, on_complete};

/* Feed `in` in pieces of the given sizes (0 = all at once), resuming after every message the
 * way the front does; returns the final status (0 or the error code). */
static int feed_split(const char *in, size_t cut, int bytewise, rec_t *r, gw_h1_limits_t *lim)
{
    gw_h1_limits_t dl = {4096, 32};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, lim ? lim : &dl, &cbs, r);
    assert_non_null(p);
    size_t len = strlen(in);
    /* pending bytes live in a buffer, as in a connection's input buffer */
    uint8_t buf[8192];
    size_t have = 0, pos = 0;
    int rv = 0;
    while (pos < len || have) {
        size_t take = bytewise ? 1 : (cut && pos < cut ? cut - pos : len - pos);
        if (pos + take > len)
            take = len - pos;
        memcpy(buf + have, in + pos, take);
        have += take;
        pos += take;
        for (;;) {
            ssize_t n = gw_h1_parser_feed(p, buf, have);
            if (n < 0) {
                rv = (int)n;
                addf(r, "ERROR %u %s\n", gw_h1_parser_error_status(p),
                     gw_h1_parser_error_reason(p));
                goto out;
            }
            memmove(buf, buf + n, have - (size_t)n);
            have -= (size_t)n;
            if (gw_h1_parser_paused(p)) {
                gw_h1_parser_resume(p);
                if (have)
                    continue;
            }
            break;
        }
        if (pos == len && have) {
            /* input ended inside a message */
            break;
        }
    }
out:
    if (rv == 0 && gw_h1_parser_eof(p) < 0)
        addf(r, "TRUNCATED\n");
    gw_h1_parser_del(p);
    return rv;
}

/* Whole, byte by byte and split at every cut point must give identical events. */
static void check_all_splits(const char *in, const char *expect)
{
    rec_t whole = {0};
    feed_split(in, 0, 0, &whole, NULL);
    assert_string_equal(whole.log, expect);
    rec_t bw = {0};
    feed_split(in, 0, 1, &bw, NULL);
    assert_string_equal(bw.log, expect);
    for (size_t cut = 1; cut < strlen(in); cut++) {
        rec_t s = {0};
        feed_split(in, cut, 0, &s, NULL);
        assert_string_equal(s.log, expect);
    }
}

static void simple_get(void **state)
{
    (void)state;
    check_all_splits("GET /index.html?x=1 HTTP/1.1\r\nHost: a.example\r\nAccept:  */* \r\n\r\n",
                     "HEAD GET /index.html?x=1 1.1 cl=0 f=1 [Host=a.example] [Accept=*/*]\nEND\n");
}

static void pipelined_in_order(void **state)
{
    (void)state;
    check_all_splits("GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
                     "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
                     "GET /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                     "HEAD GET /1 1.1 cl=0 f=1 [Host=h]\nEND\n"
                     "HEAD POST /2 1.1 cl=5 f=1 [Host=h] [Content-Length=5]\nBODY hello\nEND\n"
                     "HEAD GET /3 1.1 cl=0 f=0 [Host=h] [Connection=close]\nEND\n");
}

static void chunked_body(void **state)
{
    (void)state;
    rec_t r = {0};
    const char *in = "PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
    assert_int_equal(feed_split(in, 0, 0, &r, NULL), 0);
    assert_string_equal(r.log, "HEAD PUT /u 1.1 cl=-1 f=3 [Host=h] [Transfer-Encoding=chunked]\n"
                               "BODY hello world\nEND\n");
    rec_t b = {0};
    feed_split(in, 0, 1, &b, NULL);
    assert_string_equal(b.log, r.log);
    assert_null(strstr(b.log, "ERROR"));
}

static void expect_continue_and_upgrade_flags(void **state)
{
    (void)state;
    rec_t r = {0};
    assert_int_equal(feed_split("POST /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                                "Content-Length: 2\r\n\r\nok",
                                0, 0, &r, NULL),
                     0);
    assert_non_null(strstr(r.log, "f=5")); /* keep-alive | expect-100 */
    rec_t u = {0};
    /* Upgrade: h2c is reported but never switches: the next request still parses as HTTP/1.1 */
    assert_int_equal(
        feed_split("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                   "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
                   "GET /next HTTP/1.1\r\nHost: h\r\n\r\n",
                   0, 0, &u, NULL),
        0);
    assert_non_null(strstr(u.log, "f=9")); /* keep-alive | upgrade-h2c */
    assert_non_null(strstr(u.log, "HEAD GET /next"));
}

static void http10_keepalive(void **state)
{
    (void)state;
    rec_t r = {0};
    feed_split("GET / HTTP/1.0\r\n\r\n", 0, 0, &r, NULL);
    assert_string_equal(r.log, "HEAD GET / 1.0 cl=0 f=0\nEND\n");
    rec_t k = {0};
    feed_split("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, 0, &k, NULL);
    assert_non_null(strstr(k.log, "f=1"));
}

static void expect_reject(const char *in, unsigned status, const char *reason)
{
    rec_t r = {0};
    int rv = feed_split(in, 0, 0, &r, NULL);
    if (rv >= 0)
        fail_msg("accepted: %s\nevents: %s", in, r.log);
    char want[256];
    snprintf(want, sizeof(want), reason[0] ? "ERROR %u %s\n" : "ERROR %u ", status, reason);
    if (!strstr(r.log, want))
        fail_msg("input %s\nwant %sgot %s", in, want, r.log);
    assert_null(strstr(r.log, "END")); /* nothing was passed on as complete */
    /* also byte by byte */
    rec_t b = {0};
    assert_true(feed_split(in, 0, 1, &b, NULL) < 0);
    assert_non_null(strstr(b.log, "ERROR"));
}

static void smuggling_defences(void **state)
{
    (void)state;
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
                  "\r\n\r\n0\r\n\r\n",
                  400, ""); /* http-parser itself refuses it first */
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5"
                  "\r\n\r\n0\r\n\r\n",
                  400, "");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                  400, "");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
                  "hello",
                  400, "");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400,
                  "");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "");
    expect_reject("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n", 400,
                  "obs-fold in message head");
    expect_reject("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", 400, "bare CR in message head");
    expect_reject("GET / HTTP/1.1\nHost: h\n\n", 400, "bare LF in message head");
    expect_reject("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "");
    expect_reject("GET / HTTP/1.1\r\n\r\n", 400, "missing host");
    expect_reject("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "repeated host");
    expect_reject("GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
                  "transfer-encoding in an HTTP/1.0 request");
    expect_reject("G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "");
    expect_reject("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "");
    expect_reject("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 405, "CONNECT is not supported");
}

static void nul_is_reported_exactly(void **state)
{
    (void)state;
    /* strlen-based helpers cannot carry a NUL: feed it directly */
    rec_t r = {0};
    gw_h1_limits_t l = {4096, 32};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &cbs, &r);
    static const uint8_t in[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
    assert_int_equal(gw_h1_parser_feed(p, in, sizeof(in) - 1), GW_E_PARSE);
    assert_string_equal(gw_h1_parser_error_reason(p), "NUL in message head");
    assert_int_equal(gw_h1_parser_feed(p, in, 3), GW_E_PARSE); /* stays failed */
    gw_h1_parser_del(p);
}

static void limits(void **state)
{
    (void)state;
    char big[3000];
    snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: h\r\nX-Big: %0900d\r\n\r\n", 0);
    gw_h1_limits_t small = {512, 32};
    rec_t r = {0};
    assert_int_equal(feed_split(big, 0, 0, &r, &small), GW_E_LIMIT);
    assert_non_null(strstr(r.log, "ERROR 431"));
    char many[4000] = "GET / HTTP/1.1\r\nHost: h\r\n";
    gw_test_append_fields(many, sizeof(many), 40);
    strcat(many, "\r\n");
    gw_h1_limits_t few = {8192, 10};
    rec_t m = {0};
    assert_int_equal(feed_split(many, 0, 0, &m, &few), GW_E_LIMIT);
    assert_non_null(strstr(m.log, "ERROR 431 too many header fields"));
    gw_h1_limits_t ok = {8192, 64};
    rec_t o = {0};
    assert_int_equal(feed_split(many, 0, 0, &o, &ok), 0);
}

static void truncated_at_eof(void **state)
{
    (void)state;
    rec_t r = {0};
    feed_split("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc", 0, 0, &r, NULL);
    assert_non_null(strstr(r.log, "TRUNCATED"));
    rec_t c = {0};
    feed_split("GET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, 0, &c, NULL);
    assert_null(strstr(c.log, "TRUNCATED"));
}

static void alloc_failure_sweep(void **state)
{
    (void)state;
    const char *in = "POST /x HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n"
                     "F: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\nJ: 10\r\nK: 11\r\nL: 12\r\nM: 13\r\n"
                     "N: 14\r\nO: 15\r\nP: 16\r\nQ: 17\r\nContent-Length: 2\r\n\r\nok";
    int done = 0;
    for (unsigned long n = 1; n < 100 && !done; n++) {
        rec_t r = {0};
        gw_h1_limits_t l = {4096, 64};
        gw_alloc_fail_after(n);
        gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &cbs, &r);
        ssize_t rv = p ? gw_h1_parser_feed(p, (const uint8_t *)in, strlen(in)) : GW_E_NOMEM;
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rv, (ssize_t)strlen(in));
            assert_non_null(strstr(r.log, "END"));
            done = 1;
        } else {
            assert_int_equal(rv, GW_E_NOMEM);
        }
        gw_h1_parser_del(p);
    }
    assert_true(done);
}

/* A connection's second message reuses what the first one grew (the field array too): no
 * allocation per message once the parser has seen a head of that size. */
static void second_message_allocates_nothing(void **state)
{
    (void)state;
    const char *one = "GET /1 HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    const char *two = "GET /2 HTTP/1.1\r\nHost: h\r\nA: 3\r\nB: 4\r\n\r\n";
    rec_t r = {0};
    gw_h1_limits_t l = {4096, 32};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &cbs, &r);
    assert_non_null(p);
    assert_int_equal(gw_h1_parser_feed(p, (const uint8_t *)one, strlen(one)), strlen(one));
    assert_true(gw_h1_parser_paused(p));
    gw_h1_parser_resume(p);
    gw_alloc_fail_after(1); /* the next allocation, if any, fails */
    ssize_t n = gw_h1_parser_feed(p, (const uint8_t *)two, strlen(two));
    int hit = gw_alloc_fail_hit();
    gw_alloc_fail_after(0);
    assert_false(hit);
    assert_int_equal(n, strlen(two));
    assert_string_equal(r.log, "HEAD GET /1 1.1 cl=0 f=1 [Host=h] [A=1] [B=2]\nEND\n"
                               "HEAD GET /2 1.1 cl=0 f=1 [Host=h] [A=3] [B=4]\nEND\n");
    gw_h1_parser_del(p);
}

static void serializer_bytes(void **state)
{
    (void)state;
    gw_bytes_t b;
    gw_bytes_init(&b, 0);
    gw_h1_field_t f[1] = {{GW_SLICE_LIT("x-a"), GW_SLICE_LIT("1")}};
    assert_int_equal(gw_h1_response_head(&b, 200, f, 1, 5, 1), 0);
    assert_int_equal(b.len, strlen("HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\n\r\n"));
    assert_memory_equal(b.base, "HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\n\r\n", b.len);
    b.len = 0;
    assert_int_equal(gw_h1_response_head(&b, 204, NULL, 0, -1, 0), 0);
    assert_memory_equal(b.base, "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n", b.len);
    b.len = 0;
    assert_int_equal(gw_h1_response_head(&b, 200, NULL, 0, -1, 1), 0);
    assert_memory_equal(b.base, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", b.len);
    b.len = 0;
    gw_h1_field_t bad[1] = {{GW_SLICE_LIT("x-a"), GW_SLICE_LIT("1\r\nx-b: 2")}};
    assert_int_equal(gw_h1_response_head(&b, 200, bad, 1, 0, 1), GW_E_INVAL);
    assert_int_equal(b.len, 0); /* nothing half-written */
    assert_int_equal(gw_h1_simple_response(&b, 503, "no\n", 0, 0), 0);
    const char *want = "HTTP/1.1 503 Service Unavailable\r\nserver: h2gate\r\n"
                       "content-type: text/plain; charset=utf-8\r\ncontent-length: 3\r\n"
                       "connection: close\r\n\r\nno\n";
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.base, want, b.len);
    b.len = 0;
    assert_int_equal(gw_h1_simple_response(&b, 503, "no\n", 1, 1), 0);
    assert_int_equal(b.base[b.len - 1], '\n'); /* ends at the blank line */
    assert_memory_equal(b.base + b.len - 4, "\r\n\r\n", 4);
    b.len = 0;
    assert_int_equal(gw_h1_continue(&b), 0);
    assert_memory_equal(b.base, "HTTP/1.1 100 Continue\r\n\r\n", b.len);
    assert_string_equal(gw_h1_reason(431), "Request Header Fields Too Large");
    gw_bytes_free(&b);
}

/* Every byte value inside the request-target is accepted exactly when the shared
 * RFC 3986 rule allows it (http-parser alone lets HTAB, FF, DEL and bytes >= 0x80 through); a
 * Host that is not an authority is refused, and so are a transfer coding before chunked (501)
 * and a Content-Length past 2^63 - 1 (400). */
static void request_target_bytes(void **state)
{
    (void)state;
    /* NUL aside: the helpers take C strings (nul_is_reported_exactly covers it) */
    for (unsigned b = 1; b < 256; b++) {
        char in[64];
        snprintf(in, sizeof(in), "GET /a%cb HTTP/1.1\r\nHost: h\r\n\r\n", (char)b);
        uint8_t t[3] = {'/', 'a', (uint8_t)b};
        int want = gw_http_is_request_target((gw_slice_t){t, 3});
        rec_t r = {0};
        int rv = feed_split(in, 0, 0, &r, NULL);
        if (want && rv < 0)
            fail_msg("byte 0x%02x refused: %s", b, r.log);
        if (!want && (rv >= 0 || strstr(r.log, "HEAD")))
            fail_msg("byte 0x%02x accepted: %s", b, r.log);
    }
    expect_reject("GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid request-target");
    expect_reject("GET /a\x0b"
                  "HTTP/1.0 HTTP/1.1\r\nHost: h\r\n\r\n",
                  400, "");
    expect_reject("GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n", 400, "invalid host");
    expect_reject("GET / HTTP/1.1\r\nHost: u@a.test\r\n\r\n", 400, "invalid host");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                  501, "transfer coding not supported");
    expect_reject("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775808\r\n\r\n", 400,
                  "content-length too large");
    check_all_splits("GET /a/b%20c?d=e&f=/g:@ HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
                     "HEAD GET /a/b%20c?d=e&f=/g:@ 1.1 cl=0 f=1 [Host=[::1]:80]\nEND\n");
}

/* RFC 9112 §3.2.2: an absolute-form target whose host is an IP-literal (RFC 3986 §3.2.2) is
 * a request like any other absolute-form one (it was refused 400: '[' is no target byte),
 * whole and split at every cut point; a bracket anywhere else, or around a malformed literal,
 * is still refused. */
static void absolute_form_ip_literal(void **state)
{
    (void)state;
    check_all_splits("GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
                     "HEAD GET http://[::1]:8080/a?b 1.1 cl=0 f=1 [Host=[::1]:8080]\nEND\n");
    check_all_splits("GET http://[2001:db8::1.2.3.4] HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET http://[2001:db8::1.2.3.4] 1.1 cl=0 f=1 [Host=h]\nEND\n");
    static const char *const bad[] = {
        "http://[::1/",   "http://[zz]/",     "http://[::1]x/",      "http://[::1]:8a/",
        "http://a[::1]/", "http://[::1]/[x]", "http://[::1]/?a=[",   "/[::1]",
        "/a[b]",          "http://[]/",       "http://[::1%25eth0]/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char in[128];
        snprintf(in, sizeof(in), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", bad[i]);
        expect_reject(in, 400, "");
    }
    /* the Host field follows the same rule */
    expect_reject("GET / HTTP/1.1\r\nHost: [zz]:80\r\n\r\n", 400, "invalid host");
    expect_reject("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, "invalid host");
    expect_reject("GET / HTTP/1.1\r\nHost: a]\r\n\r\n", 400, "invalid host");
    /* the translator takes the Host as checked here (gw_req_head_t.authority) */
    expect_reject("GET / HTTP/1.1\r\nHost: a!b\r\n\r\n", 400, "invalid host");
    expect_reject("GET / HTTP/1.0\r\nHost: a b.test\r\n\r\n", 400, "invalid host");
    expect_reject("GET http://a.test/ HTTP/1.1\r\nHost: a..test\r\n\r\n", 400, "invalid host");
}

/* RFC 9112 §3.2: what the HTTP/1.1 front receives of each form, whole and split at every cut
 * point. The front takes a target starting with '/' as origin-form without scanning it again
 * (front/h1_stream.c absolute_form), so every such target it gets must have passed this check:
 * "//a.test/x" is origin-form (a path, §3.2.1), never a network-path reference. */
static void request_target_forms(void **state)
{
    (void)state;
    check_all_splits("GET /a?b HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET /a?b 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("GET //a.test/x HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET //a.test/x 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("GET http://a.test/x?y HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET http://a.test/x?y 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("GET HTTPS://a.test:8443 HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET HTTPS://a.test:8443 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("GET http://a.test?q=/ HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD GET http://a.test?q=/ 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD OPTIONS * 1.1 cl=0 f=1 [Host=h]\nEND\n");
    /* RFC 9110 §4.2.4: no userinfo in an http(s) URI; the authority-form is CONNECT's (§3.2.3) */
    expect_reject("GET http://u@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400,
                  "invalid request-target");
    expect_reject("GET a.test:80 HTTP/1.1\r\nHost: a.test:80\r\n\r\n", 400,
                  "invalid URL"); /* http-parser's own check, before ours */
    expect_reject("GET /a//b%2 HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid request-target");
    /* RFC 9112 §3.2.4: the asterisk-form is OPTIONS's only (methods are case-sensitive) */
    expect_reject("GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400, "asterisk-form is for OPTIONS");
    expect_reject("options * HTTP/1.1\r\nHost: h\r\n\r\n", 400, "asterisk-form is for OPTIONS");
    expect_reject("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", 405,
                  "CONNECT is not supported");
}

/* A head for an HTTP/1.0 client without chunked framing: no framing field, and
 * only with Connection: close (the close ends the body). */
static void close_delimited_head(void **state)
{
    (void)state;
    gw_bytes_t b;
    gw_bytes_init(&b, 0);
    assert_int_equal(gw_h1_response_head(&b, 200, NULL, 0, GW_H1_CLOSE_DELIMITED, 0), 0);
    const char *want = "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n";
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.base, want, b.len);
    assert_int_equal(gw_h1_response_head(&b, 200, NULL, 0, GW_H1_CLOSE_DELIMITED, 1), GW_E_INVAL);
    assert_int_equal(gw_h1_response_head(&b, 200, NULL, 0, -3, 0), GW_E_INVAL);
    assert_int_equal(b.len, strlen(want));
    gw_bytes_free(&b);
}

/* RFC 9110 §9.1: any token is a method, passed on as written (http-parser 2.9 alone refuses
 * BREW with HPE_INVALID_METHOD, and the HTTP/2 front forwards it): whole, byte by byte and
 * split at every cut point, pipelined, after empty lines (RFC 9112 §2.2). */
static void any_token_is_a_method(void **state)
{
    (void)state;
    check_all_splits("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n",
                     "HEAD BREW /pot 1.1 cl=0 f=1 [Host=h]\nEND\n");
    check_all_splits("\r\nget / HTTP/1.1\r\nHost: h\r\n\r\n"
                     "PROPFIND /d HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok\r\n"
                     "M-SEARCH /x?y HTTP/1.1\r\nHost: h\r\n\r\n"
                     "!#$%&'*+-.^_`|~09azAZ /t HTTP/1.0\r\n\r\n",
                     "HEAD get / 1.1 cl=0 f=1 [Host=h]\nEND\n"
                     "HEAD PROPFIND /d 1.1 cl=2 f=1 [Host=h] [Content-Length=2]\nBODY ok\nEND\n"
                     "HEAD M-SEARCH /x?y 1.1 cl=0 f=1 [Host=h]\nEND\n"
                     "HEAD !#$%&'*+-.^_`|~09azAZ /t 1.0 cl=0 f=0\nEND\n");
    /* the methods http-parser knows keep their meaning (HEAD, a body on any method) */
    check_all_splits("HEAD / HTTP/1.1\r\nHost: h\r\n\r\nPURGE / HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
                     "HEAD HEAD / 1.1 cl=0 f=1 [Host=h]\nEND\n"
                     "HEAD PURGE / 1.1 cl=-1 f=3 [Host=h] [Transfer-Encoding=chunked]\nBODY ab\n"
                     "END\n");
    /* not tokens, or no method at all */
    expect_reject("BR@W / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid method");
    expect_reject("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid method");
    expect_reject(" GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid method");
    expect_reject("G\xc3\xa9T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid method");
    expect_reject("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bare LF in message head");
    expect_reject("\r\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bare CR in message head");
    expect_reject("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 405, "CONNECT is not supported");
    /* a method cut short by the end of input is a truncated request, not a clean end */
    rec_t t = {0};
    feed_split("BRE", 0, 0, &t, NULL);
    assert_string_equal(t.log, "TRUNCATED\n");
    rec_t e = {0};
    feed_split("\r\n", 0, 0, &e, NULL);
    assert_string_equal(e.log, "");
}

/* RFC 9110 §15.6.6: a major version other than 1 is 505; a higher minor reads as HTTP/1.1
 * (§6.2: Host required). RFC 9110 §15.5.15: a request line longer than the head limit is 414,
 * a head that passes it among the fields 431. */
static void version_and_line_length(void **state)
{
    (void)state;
    expect_reject("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "HTTP version not supported");
    expect_reject("GET / HTTP/0.9\r\n\r\n", 505, "HTTP version not supported");
    expect_reject("GET / HTTP/1.2\r\n\r\n", 400, "missing host");
    check_all_splits("GET / HTTP/1.2\r\nHost: h\r\n\r\n",
                     "HEAD GET / 1.2 cl=0 f=1 [Host=h]\nEND\n");
    char line[700];
    snprintf(line, sizeof(line), "GET /%0600d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    gw_h1_limits_t small = {512, 32};
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        rec_t r = {0};
        assert_int_equal(feed_split(line, 0, bytewise, &r, &small), GW_E_LIMIT);
        assert_string_equal(r.log, "ERROR 414 request line too long\n");
    }
    char method[700];
    snprintf(method, sizeof(method), "%0600d / HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    rec_t m = {0};
    assert_int_equal(feed_split(method, 0, 0, &m, &small), GW_E_LIMIT);
    assert_string_equal(m.log, "ERROR 414 request line too long\n");
}

/* The request line as received, for the access log of a refused request: whole when the
 * error is found inside it (the rest of the line in hand is kept), as parsed otherwise. */
static void request_line_kept_for_the_log(void **state)
{
    (void)state;
    static const struct {
        const char *in, *line;
        unsigned status;
    } cases[] = {
        {"BR@W /pot HTTP/1.1\r\nHost: h\r\n\r\n", "BR@W /pot HTTP/1.1", 400},
        {"GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n", "GET /a\x01b HTTP/1.1", 400},
        {"\r\nBREW /x HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", "BREW /x HTTP/1.1", 400},
        {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", "GET / HTTP/3.0", 505},
        {"GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", "GET / HTTP/1.1", 400},
        {"\x16\x03\x01\x02", "\x16\x03\x01\x02", 400},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        rec_t r = {0};
        gw_h1_limits_t l = {4096, 32};
        gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &cbs, &r);
        assert_non_null(p);
        assert_int_equal(gw_h1_parser_request_line(p).len, 0);
        ssize_t n = gw_h1_parser_feed(p, (const uint8_t *)cases[k].in, strlen(cases[k].in));
        assert_true(n < 0);
        assert_int_equal(gw_h1_parser_error_status(p), cases[k].status);
        gw_slice_t line = gw_h1_parser_request_line(p);
        if (line.len != strlen(cases[k].line) || memcmp(line.base, cases[k].line, line.len))
            fail_msg("case %zu: line '%.*s', want '%s'", k, (int)line.len, line.base,
                     cases[k].line);
        gw_h1_parser_del(p);
    }
    /* a request that parsed keeps its line until the parser resumes for the next one */
    rec_t r = {0};
    gw_h1_limits_t l = {4096, 32};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &cbs, &r);
    const char *two = "BREW /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
    ssize_t n = gw_h1_parser_feed(p, (const uint8_t *)two, strlen(two));
    assert_true(n > 0 && gw_h1_parser_paused(p));
    gw_slice_t line = gw_h1_parser_request_line(p);
    assert_int_equal(line.len, strlen("BREW /1 HTTP/1.1"));
    assert_memory_equal(line.base, "BREW /1 HTTP/1.1", line.len);
    gw_h1_parser_resume(p);
    assert_int_equal(gw_h1_parser_request_line(p).len, 0);
    assert_int_equal(gw_h1_parser_feed(p, (const uint8_t *)two + n, strlen(two) - (size_t)n),
                     (ssize_t)(strlen(two) - (size_t)n));
    line = gw_h1_parser_request_line(p);
    assert_memory_equal(line.base, "GET /2 HTTP/1.1", line.len);
    gw_h1_parser_del(p);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(simple_get),
    cmocka_unit_test(pipelined_in_order),
    cmocka_unit_test(chunked_body),
    cmocka_unit_test(expect_continue_and_upgrade_flags),
    cmocka_unit_test(http10_keepalive),
    cmocka_unit_test(smuggling_defences),
    cmocka_unit_test(nul_is_reported_exactly),
    cmocka_unit_test(limits),
    cmocka_unit_test(truncated_at_eof),
    cmocka_unit_test(alloc_failure_sweep),
    cmocka_unit_test(second_message_allocates_nothing),
    cmocka_unit_test(serializer_bytes),
    cmocka_unit_test(request_target_bytes),
    cmocka_unit_test(absolute_form_ip_literal),
    cmocka_unit_test(request_target_forms),
    cmocka_unit_test(close_delimited_head),
    cmocka_unit_test(any_token_is_a_method),
    cmocka_unit_test(version_and_line_length),
    cmocka_unit_test(request_line_kept_for_the_log),
};

GW_TEST_MAIN(tests)
