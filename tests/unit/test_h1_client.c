/* Unit tests of h1/client.h: the response parser (every body framing, 1xx, trailers, the
 * keep-alive decision, pipelined-response boundary, every malformed class), fed whole, byte by
 * byte and split at every cut point, with a failing-allocation sweep; and the request head
 * serializer and chunk framing helpers, checked against the h1 request parser. */
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
#include "h1/client.h"

/* Events rendered as text, so that whole, byte-by-byte and split runs can be compared. */
typedef struct {
    char log[4096];
    size_t len;
    int in_body;           /* consecutive body pieces are rendered as one B line */
    const uint8_t *buf;    /* the buffer being fed */
    size_t lo, hi;         /* bounds of the current feed: body offsets must fall inside */
    int stop_at_head;      /* on_head of a final response returns GW_E_CLOSED */
    int finals, completes; /* counters, for "never forwarded" checks */
} rec_t;

/* A response as the origin sends it, and whether it answers a HEAD request. */
typedef struct {
    const char *msg;
    int head_only;
} resp_case_t;

#define addf(r, ...) GW_TEST_LOGF(r, __VA_ARGS__)

static void add_fields(rec_t *r, const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        addf(r, " [%.*s=%.*s]", (int)f[i].name.len, (const char *)f[i].name.base,
             (int)f[i].value.len, (const char *)f[i].value.base);
}

static int e_head(void *ud, const gw_h1_msg_t *m)
{
    rec_t *r = ud;
    r->in_body = 0;
    if (m->status < 200) {
        addf(r, "I%u", m->status);
    } else {
        r->finals++;
        addf(r, "H%u 1.%u ka=%d", m->status, m->version_minor,
             !!(m->flags & GW_H1_MSG_F_KEEP_ALIVE));
    }
    add_fields(r, m->fields, m->fields_len);
    addf(r, "\n");
    return m->status >= 200 && r->stop_at_head ? GW_E_CLOSED : 0;
}

static int e_body(void *ud, size_t off, size_t len)
{
    rec_t *r = ud;
    assert_true(len > 0);
    assert_true(off >= r->lo && off + len <= r->hi); /* by offset into the fed buffer */
    if (r->in_body)
        r->len--; /* continue the same B line */
    else
        addf(r, "B");
    addf(r, "%.*s\n", (int)len, (const char *)r->buf + off);
    r->in_body = 1;
    return 0;
}

static int e_trailers(void *ud, const gw_field_t *f, size_t n)
{
    rec_t *r = ud;
    r->in_body = 0;
    addf(r, "T");
    add_fields(r, f, n);
    addf(r, "\n");
    return 0;
}

static int e_complete(void *ud)
{
    rec_t *r = ud;
    r->in_body = 0;
    r->completes++;
    addf(r, "C\n");
    return 0;
}

static const gw_h1_client_cbs_t cbs = {e_head, e_body, e_trailers, e_complete};

enum { WHOLE = 0, BYTEWISE = -1 }; /* or a cut point > 0: [0,cut) then [cut,n) */

/* Feed msg[0..n) to a fresh client the way an origin connection does (one growing buffer,
 * offsets into it), then EOF when eof. Returns 0 or the first error; *consumed gets the bytes
 * the client took. */
static int run(const char *msg, size_t n, int mode, int head_only, int eof, rec_t *r,
               const gw_h1_limits_t *lim, size_t *consumed, int *keep_alive)
{
    gw_h1_limits_t dl = {4096, 64};
    gw_h1_client_t *c = gw_h1_client_new(lim ? lim : &dl, &cbs, r);
    if (!c)
        return GW_E_NOMEM;
    r->buf = (const uint8_t *)msg;
    gw_h1_client_start(c, head_only);
    size_t pos = 0;
    int rc = 0;
    while (pos < n) {
        size_t k = mode == BYTEWISE ? 1 : mode > 0 && pos < (size_t)mode ? (size_t)mode : n - pos;
        if (k > n - pos)
            k = n - pos;
        r->lo = pos;
        r->hi = pos + k;
        ssize_t used = gw_h1_client_feed(c, (const uint8_t *)msg, pos, k);
        if (used < 0) {
            rc = (int)used;
            break;
        }
        pos += (size_t)used;
        if ((size_t)used < k || gw_h1_client_state(c) == GW_H1_CLIENT_DONE)
            break; /* the response ended: the rest is not ours */
    }
    if (rc == 0 && eof)
        rc = gw_h1_client_eof(c);
    if (consumed)
        *consumed = pos;
    if (keep_alive)
        *keep_alive = gw_h1_client_keep_alive(c);
    if (rc < 0)
        assert_int_equal(gw_h1_client_state(c), GW_H1_CLIENT_FAILED);
    gw_h1_client_del(c);
    return rc;
}

typedef struct {
    const char *msg;
    int head_only, eof, keep_alive;
    const char *events;
} vec_t;

static const vec_t good[] = {
    /* Content-Length, OWS around a value */
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  v1 \r\n\r\nhello", 0, 0, 1,
     "H200 1.1 ka=1 [Content-Length=5] [X-A=v1]\nBhello\nC\n"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0, 1,
     "H200 1.1 ka=1 [Content-Length=0]\nC\n"},
    /* RFC 9112 §7.1: chunked with extensions (token and quoted values, BWS) and trailers */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;a=b\r\n world\r\n"
     "A ; q=\"x y\";z\r\n0123456789\r\n0\r\nX-Sum: 42\r\nX-More: a b\r\n\r\n",
     0, 0, 1,
     "H200 1.1 ka=1 [Transfer-Encoding=chunked]\nBhello world0123456789\n"
     "T [X-Sum=42] [X-More=a b]\nC\n"},
    /* "gzip, chunked" was accepted here: it is refused now (see bad[]) */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, 0, 1,
     "H200 1.1 ka=1 [Transfer-Encoding=chunked]\nC\n"},
    /* RFC 9112 §6.3 rule 8: close-delimited */
    {"HTTP/1.1 200 OK\r\n\r\nclose-delimited", 0, 1, 0, "H200 1.1 ka=0\nBclose-delimited\nC\n"},
    {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nx", 0, 1, 0,
     "H200 1.0 ka=0 [Connection=keep-alive]\nBx\nC\n"},
    {"HTTP/1.1 200 OK\r\n\r\n", 0, 1, 0, "H200 1.1 ka=0\nC\n"},
    /* RFC 9112 §6.3 rules 1-2: HEAD, 204, 304 end at the head */
    {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 1, 0, 1,
     "H200 1.1 ka=1 [Content-Length=100]\nC\n"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 0, 1,
     "H200 1.1 ka=1 [Transfer-Encoding=chunked]\nC\n"},
    {"HTTP/1.1 200 OK\r\n\r\n", 1, 0, 1, "H200 1.1 ka=1\nC\n"},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 1, "H204 1.1 ka=1\nC\n"},
    {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", 0, 0, 1,
     "H204 1.1 ka=1 [Content-Length=10]\nC\n"},
    {"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 0, 0, 1,
     "H304 1.1 ka=1 [Content-Length=10]\nC\n"},
    {"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, 1,
     "H304 1.1 ka=1 [Transfer-Encoding=chunked]\nC\n"},
    /* 1xx: interim heads before the final one, with their fields */
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, 1,
     "I100\nH200 1.1 ka=1 [Content-Length=2]\nBok\nC\n"},
    {"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
     0, 0, 1, "I103 [Link=</s.css>; rel=preload]\nH200 1.1 ka=1 [Content-Length=0]\nC\n"},
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
     "HTTP/1.1 103 Early Hints\r\nLink: </a.js>\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
     "Link: </b.js>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
     0, 0, 1,
     "I100\nI102\nI103 [Link=</a.js>]\nI103 [Link=</b.js>]\n"
     "H201 1.1 ka=1 [Content-Length=2]\nBok\nC\n"},
    /* an interim Content-Length frames nothing */
    {"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 0, 0, 1,
     "I100 [Content-Length=5]\nH204 1.1 ka=1\nC\n"},
    /* RFC 9112 §9.3: keep-alive decision */
    {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, 0,
     "H200 1.0 ka=0 [Content-Length=2]\nBok\nC\n"},
    {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok", 0, 0, 1,
     "H200 1.0 ka=1 [Connection=Keep-Alive] [Content-Length=2]\nBok\nC\n"},
    {"HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nok", 0, 0, 0,
     "H200 1.1 ka=0 [Connection=foo, close] [Content-Length=2]\nBok\nC\n"},
    /* RFC 9112 §4: empty or missing reason phrase */
    {"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", 0, 0, 1,
     "H200 1.1 ka=1 [Content-Length=0]\nC\n"},
    {"HTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx", 0, 0, 1,
     "H404 1.1 ka=1 [Content-Length=1]\nBx\nC\n"},
    {"HTTP/1.1 599 Whatever \t it is\x80\r\nContent-Length: 0\r\n\r\n", 0, 0, 1,
     "H599 1.1 ka=1 [Content-Length=0]\nC\n"},
};

static void check_good(const vec_t *v, int mode)
{
    rec_t r = {0};
    int ka = -1;
    size_t used = 0, n = strlen(v->msg);
    int rc = run(v->msg, n, mode, v->head_only, v->eof, &r, NULL, &used, &ka);
    if (rc != 0 || strcmp(r.log, v->events) != 0 || used != n || ka != v->keep_alive)
        fail_msg("vector %s\nmode %d: rc %s used %zu/%zu ka %d (want %d)\nwant:\n%sgot:\n%s",
                 v->msg, mode, gw_errname(rc), used, n, ka, v->keep_alive, v->events, r.log);
}

static void framings_whole(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        check_good(&good[i], WHOLE);
}

static void framings_byte_by_byte(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        check_good(&good[i], BYTEWISE);
}

static void framings_every_cut(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        for (size_t cut = 1; cut < strlen(good[i].msg); cut++)
            check_good(&good[i], (int)cut);
}

/* A response ends exactly where it ends: the next bytes (a second, pipelined response, or
 * junk) are left in the buffer, and the same client parses the next response after start. */
static void pipelined_boundary(void **state)
{
    (void)state;
    static const resp_case_t firsts[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX: 1\r\n\r\n", 0},
        {"HTTP/1.1 204 No Content\r\n\r\n", 0},
        {"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", 1},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0},
    };
    const char *second = "HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc";
    for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
        char msg[512];
        size_t n1 = strlen(firsts[i].msg);
        snprintf(msg, sizeof(msg), "%s%s", firsts[i].msg, second);
        size_t n = strlen(msg);
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            rec_t r = {.buf = (const uint8_t *)msg};
            gw_h1_limits_t l = {4096, 64};
            gw_h1_client_t *c = gw_h1_client_new(&l, &cbs, &r);
            assert_non_null(c);
            gw_h1_client_start(c, firsts[i].head_only);
            size_t pos = 0;
            while (gw_h1_client_state(c) != GW_H1_CLIENT_DONE) {
                size_t k = bytewise ? 1 : n - pos;
                r.lo = pos;
                r.hi = pos + k;
                ssize_t u = gw_h1_client_feed(c, (const uint8_t *)msg, pos, k);
                assert_true(u >= 0);
                pos += (size_t)u;
            }
            assert_int_equal(pos, n1); /* not one byte of the second response */
            assert_int_equal(gw_h1_client_feed(c, (const uint8_t *)msg, pos, n - pos), 0);
            assert_int_equal(r.completes, 1);
            gw_h1_client_start(c, 0);
            r.lo = pos;
            r.hi = n;
            assert_int_equal(gw_h1_client_feed(c, (const uint8_t *)msg, pos, n - pos),
                             (ssize_t)(n - pos));
            assert_int_equal(gw_h1_client_state(c), GW_H1_CLIENT_DONE);
            assert_int_equal(gw_h1_client_status(c), 201);
            assert_int_equal(r.completes, 2);
            assert_non_null(strstr(r.log, "H201 1.1 ka=1 [Content-Length=3]\nBabc\nC\n"));
            gw_h1_client_del(c);
        }
    }
}

static void truncated_is_io_error(void **state)
{
    (void)state;
    const char *cases[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n",
        "HTTP/1.1 200 OK\r\nContent-",
        "HTTP/1.1 100 Continue\r\n\r\n", /* an interim head is not a response */
        "",                              /* nothing came: the keep-alive race */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int mode = BYTEWISE; mode <= WHOLE; mode++) {
            rec_t r = {0};
            int rc = run(cases[i], strlen(cases[i]), mode, 0, 1, &r, NULL, NULL, NULL);
            if (rc != GW_E_IO)
                fail_msg("case %zu: %s", i, gw_errname(rc));
            assert_int_equal(r.completes, 0);
        }
    }
}

static void eof_outside_a_response(void **state)
{
    (void)state;
    rec_t r = {0};
    gw_h1_client_t *c = gw_h1_client_new(NULL, &cbs, &r);
    assert_non_null(c);
    assert_string_equal(gw_h1_client_state_str(gw_h1_client_state(c)), "idle");
    assert_int_equal(gw_h1_client_eof(c), 0); /* nothing awaited */
    /* a byte nobody asked for */
    assert_int_equal(gw_h1_client_feed(c, (const uint8_t *)"H", 0, 1), GW_E_PARSE);
    assert_string_equal(gw_h1_client_state_str(gw_h1_client_state(c)), "failed");
    assert_int_equal(gw_h1_client_feed(c, (const uint8_t *)"H", 0, 1), GW_E_PARSE);
    gw_h1_client_del(c);
    assert_string_equal(gw_h1_client_state_str(GW_H1_CLIENT_HEAD), "head");
    assert_string_equal(gw_h1_client_state_str(GW_H1_CLIENT_BODY), "body");
    assert_string_equal(gw_h1_client_state_str(GW_H1_CLIENT_DONE), "done");
}

static ssize_t feed_str(gw_h1_client_t *c, const char *s)
{
    return gw_h1_client_feed(c, (const uint8_t *)s, 0, strlen(s));
}

static void feed_all(gw_h1_client_t *c, const char *s)
{
    assert_int_equal(feed_str(c, s), (ssize_t)strlen(s));
}

/* gw_h1_client_body_left: what back/ sizes its read batches by. */
static void body_left_tracks_content_length(void **state)
{
    (void)state;
    static const gw_h1_client_cbs_t nocbs = {0}; /* every callback may be NULL */
    gw_h1_client_t *c = gw_h1_client_new(NULL, &nocbs, NULL);
    assert_non_null(c);
    assert_int_equal(gw_h1_client_body_left(c), -1); /* idle */
    gw_h1_client_start(c, 0);
    feed_all(c, "HTTP/1.1 200 OK\r\nContent-Le");
    assert_int_equal(gw_h1_client_body_left(c), -1); /* in the head */
    feed_all(c, "ngth: 10\r\n\r\nabc");
    assert_int_equal(gw_h1_client_body_left(c), 7);
    feed_all(c, "defghi");
    assert_int_equal(gw_h1_client_body_left(c), 1);
    feed_all(c, "j");
    assert_int_equal(gw_h1_client_body_left(c), -1); /* done */
    /* a 100 Continue, then a final head whose body has not started */
    gw_h1_client_start(c, 0);
    feed_all(c, "HTTP/1.1 100 Continue\r\n\r\n");
    assert_int_equal(gw_h1_client_body_left(c), -1);
    feed_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
    assert_int_equal(gw_h1_client_body_left(c), 100000);
    gw_h1_client_del(c);
    /* no length known: chunked, close-delimited; no body: HEAD, 204, 304 */
    static const resp_case_t none[] = {
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc", 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n", 1},
        {"HTTP/1.1 204 No Content\r\nContent-Length: 500\r\n\r\n", 0},
        {"HTTP/1.1 304 Not Modified\r\nContent-Length: 500\r\n\r\n", 0},
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        c = gw_h1_client_new(NULL, &nocbs, NULL);
        assert_non_null(c);
        gw_h1_client_start(c, none[i].head_only);
        assert_true(feed_str(c, none[i].msg) > 0);
        assert_int_equal(gw_h1_client_body_left(c), -1);
        gw_h1_client_del(c);
    }
}

/* Malformed responses: GW_E_PARSE, and nothing of them is passed on past the error. */
typedef struct {
    const char *msg;
    size_t len;      /* explicit: some carry a NUL */
    int final_heads; /* final heads delivered before the error (0: the head is the culprit) */
} bad_t;
#define BAD(s, h)                                                                                  \
    {                                                                                              \
        s, sizeof(s) - 1, h                                                                        \
    }

static const bad_t bad[] = {
    /* RFC 9112 §4: status line */
    BAD("HTTP/1.1 20 OK\r\n\r\n", 0),
    BAD("HTTP/1.1 2000 OK\r\n\r\n", 0),
    BAD("HTTX/1.1 200 OK\r\n\r\n", 0),
    BAD("HTTP/2.0 200 OK\r\n\r\n", 0),
    BAD("HTTP/1.2 200 OK\r\n\r\n", 0),
    BAD("HTTP/1.1 200OK\r\n\r\n", 0),
    BAD("HTTP/1.1  200 OK\r\n\r\n", 0),
    BAD("HTTP/1.1 099 Low\r\n\r\n", 0),
    BAD("HTTP/1.1 600 High\r\n\r\n", 0),
    BAD("HTTP/1.1 20x OK\r\n\r\n", 0),
    BAD("HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\x7f\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("http/1.1 200 OK\r\n\r\n", 0),
    /* RFC 9112 §6.3: Content-Length */
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\nx", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0),
    /* RFC 9112 §6.1, §6.3: Transfer-Encoding */
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nraw", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunkedx\r\n\r\n", 0),
    /* A coding before chunked would be lost when we re-frame the body; a
     * Content-Length of 2^63 or more does not fit the int64_t it becomes */
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551614\r\n\r\n", 0),
    /* RFC 9112 §2.2, §5: field lines */
    BAD("HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A: b\rc\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A: b\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A: b\r\n\tfolded\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX@A: b\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\n: empty-name\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nX-A: a\x01z\r\nContent-Length: 0\r\n\r\n", 0),
    BAD("HTTP/1.1 200 OK\r\nNo colon\r\nContent-Length: 0\r\n\r\n", 0),
    /* we never send Upgrade (RFC 9110 §15.2.2) */
    BAD("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", 0),
    BAD("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n", 0),
    /* RFC 9112 §7.1: chunk framing */
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\nok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\nb\r\nok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\0\r\nok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\x01\r\nok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\rXok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 1),
    /* RFC 9112 §7.1.2: trailer section, checked like a head */
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n fold\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX : 1\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\0\r\n\r\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n", 1),
    BAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\r\n", 1),
};

static void malformed_rejected(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int mode = BYTEWISE; mode < (int)bad[i].len; mode++) {
            rec_t r = {0};
            int rc = run(bad[i].msg, bad[i].len, mode, 0, 1, &r, NULL, NULL, NULL);
            if (rc != GW_E_PARSE)
                fail_msg("bad[%zu] mode %d: got %s\nevents:\n%s", i, mode, gw_errname(rc), r.log);
            assert_int_equal(r.finals, bad[i].final_heads);
            assert_int_equal(r.completes, 0);
        }
    }
}

static void limits_configurable(void **state)
{
    (void)state;
    char big[1200];
    snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nX-Big: %0900d\r\nContent-Length: 0\r\n\r\n", 0);
    gw_h1_limits_t small = {512, 32}, roomy = {2048, 32};
    for (int mode = BYTEWISE; mode <= WHOLE; mode++) {
        rec_t r = {0};
        assert_int_equal(run(big, strlen(big), mode, 0, 0, &r, &small, NULL, NULL), GW_E_LIMIT);
        assert_int_equal(r.finals, 0);
        rec_t o = {0};
        assert_int_equal(run(big, strlen(big), mode, 0, 0, &o, &roomy, NULL, NULL), 0);
        assert_int_equal(o.completes, 1);
    }
    /* a trailer section has the same bound, counted from its start */
    char tr[1200];
    snprintf(tr, sizeof(tr),
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
             "X-Big: %0600d\r\n\r\n",
             0);
    gw_h1_limits_t mid = {512, 32};
    rec_t t = {0};
    assert_int_equal(run(tr, strlen(tr), WHOLE, 0, 0, &t, &mid, NULL, NULL), GW_E_LIMIT);
    assert_int_equal(t.completes, 0);
    /* field count */
    char many[2048] = "HTTP/1.1 200 OK\r\n";
    gw_test_append_fields(many, sizeof(many), 20);
    strcat(many, "Content-Length: 0\r\n\r\n");
    gw_h1_limits_t few = {4096, 10}, enough = {4096, 21};
    rec_t m = {0}, e = {0};
    assert_int_equal(run(many, strlen(many), WHOLE, 0, 0, &m, &few, NULL, NULL), GW_E_LIMIT);
    assert_int_equal(run(many, strlen(many), WHOLE, 0, 0, &e, &enough, NULL, NULL), 0);
}

static void callback_stops_feed(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    rec_t r = {.stop_at_head = 1};
    assert_int_equal(run(m, strlen(m), WHOLE, 0, 0, &r, NULL, NULL, NULL), GW_E_CLOSED);
    assert_null(strstr(r.log, "Bok")); /* nothing after the stop */
    assert_int_equal(r.completes, 0);
}

/* Heads of different origin connections parsed one after the other on a thread share one
 * arena, field-offset and field array (given back once on_head returned): the second client's
 * head allocates nothing, its fields are its own. */
static void head_buffers_are_the_threads(void **state)
{
    (void)state;
    const char *m1 = "HTTP/1.1 200 OK\r\nServer: a\r\nETag: \"1\"\r\nContent-Length: 2\r\n\r\nok";
    const char *m2 = "HTTP/1.1 404 Not Found\r\nServer: b\r\nContent-Length: 2\r\n\r\nno";
    gw_h1_limits_t dl = {4096, 64};
    rec_t r1 = {.buf = (const uint8_t *)m1, .hi = strlen(m1)};
    rec_t r2 = {.buf = (const uint8_t *)m2, .hi = strlen(m2)};
    gw_h1_client_t *a = gw_h1_client_new(&dl, &cbs, &r1);
    gw_h1_client_t *b = gw_h1_client_new(&dl, &cbs, &r2);
    assert_non_null(a);
    assert_non_null(b);
    gw_h1_client_start(a, 0);
    gw_h1_client_start(b, 0);
    assert_int_equal(gw_h1_client_feed(a, (const uint8_t *)m1, 0, strlen(m1)), strlen(m1));
    gw_alloc_fail_after(1); /* the next allocation, if any, fails */
    ssize_t n = gw_h1_client_feed(b, (const uint8_t *)m2, 0, strlen(m2));
    int hit = gw_alloc_fail_hit();
    gw_alloc_fail_after(0);
    assert_false(hit);
    assert_int_equal(n, strlen(m2));
    assert_string_equal(r1.log,
                        "H200 1.1 ka=1 [Server=a] [ETag=\"1\"] [Content-Length=2]\nBok\nC\n");
    assert_string_equal(r2.log, "H404 1.1 ka=1 [Server=b] [Content-Length=2]\nBno\nC\n");
    gw_h1_client_del(a);
    gw_h1_client_del(b);
}

static void alloc_sweep(void **state)
{
    (void)state;
    const vec_t *v = &good[2]; /* fields, chunks, trailers: every allocation of the codec */
    for (unsigned long n = 1;; n++) {
        rec_t r = {0};
        gw_alloc_fail_after(n);
        int rc = run(v->msg, strlen(v->msg), WHOLE, 0, 0, &r, NULL, NULL, NULL);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rc, 0);
            assert_string_equal(r.log, v->events);
            break;
        }
        assert_int_equal(rc, GW_E_NOMEM);
        assert_int_equal(r.completes, 0);
        assert_true(n < 50);
    }
}

/* ---- request side ----------------------------------------------------------------------- */

static void request_head_vector(void **state)
{
    (void)state;
    gw_field_t f[] = {{GW_SLICE_LIT("Accept"), GW_SLICE_LIT("*/*")},
                      {GW_SLICE_LIT("X-Forwarded-For"), GW_SLICE_LIT("192.0.2.1")}};
    gw_h1_request_t r = {.method = GW_SLICE_LIT("POST"),
                         .target = GW_SLICE_LIT("/a?b=c"),
                         .host = GW_SLICE_LIT("example.com"),
                         .fields = f,
                         .fields_len = 2,
                         .body_len = 12};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_h1_request_head(&out, &r), 0);
    const char *want = "POST /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                       "X-Forwarded-For: 192.0.2.1\r\nContent-Length: 12\r\n\r\n";
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.base, want, out.len);
    out.len = 0;
    r.body_len = -1;
    r.fields_len = 0;
    assert_int_equal(gw_h1_request_head(&out, &r), 0);
    const char *want2 = "POST /a?b=c HTTP/1.1\r\nHost: example.com\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(out.len, strlen(want2));
    assert_memory_equal(out.base, want2, out.len);
    out.len = 0;
    r.method = GW_SLICE_LIT("GET");
    r.target = GW_SLICE_LIT("/");
    r.body_len = 0; /* no body: no framing field */
    assert_int_equal(gw_h1_request_head(&out, &r), 0);
    const char *want3 = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    assert_int_equal(out.len, strlen(want3));
    assert_memory_equal(out.base, want3, out.len);
    gw_bytes_free(&out);
}

static void request_head_rejects_injection(void **state)
{
    (void)state;
#define BAD_REQ(m, t, h, nf, n, v)                                                                 \
    {                                                                                              \
        GW_SLICE_LIT(m), GW_SLICE_LIT(t), GW_SLICE_LIT(h), nf,                                     \
        {                                                                                          \
            GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                       \
        }                                                                                          \
    }
    /* one bad part each: a field, the target, the host, the method */
    static const struct {
        gw_slice_t method, target, host;
        size_t nfields; /* 1: with field */
        gw_field_t field;
    } bad_req[] = {
        BAD_REQ("GET", "/", "h", 1, "X", "a\r\nEvil: 1"),
        BAD_REQ("GET", "/", "h", 1, "X Y", "a"),
        BAD_REQ("GET", "/", "h", 1, "X", "a\0b"),
        BAD_REQ("GET", "/", "h", 1, "", "a"),
        BAD_REQ("GET", "/a b", "h", 0, "", ""),
        BAD_REQ("GET", "", "h", 0, "", ""),
        BAD_REQ("GET", "/\r\n", "h", 0, "", ""),
        BAD_REQ("GET", "/", "h\r\nX: y", 0, "", ""),
        BAD_REQ("", "/", "h", 0, "", ""),
        BAD_REQ("GE T", "/", "h", 0, "", ""),
        /* The serializer keeps its own check, the shared request-target rule */
        BAD_REQ("GET", "/a\x0bHTTP/1.0", "h", 0, "", ""),
        BAD_REQ("GET", "/\x80", "h", 0, "", ""),
        BAD_REQ("GET", "/a\tb", "h", 0, "", ""),
    };
#undef BAD_REQ
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_bytes_append(&out, "keep", 4), 0);
    for (size_t i = 0; i < sizeof(bad_req) / sizeof(bad_req[0]); i++) {
        gw_h1_request_t r = {.method = bad_req[i].method,
                             .target = bad_req[i].target,
                             .host = bad_req[i].host,
                             .fields = &bad_req[i].field,
                             .fields_len = bad_req[i].nfields};
        int rv = gw_h1_request_head(&out, &r);
        if (rv != GW_E_INVAL)
            fail_msg("case %zu (%.*s %.*s host %.*s, %zu field): %s, want GW_E_INVAL", i,
                     (int)r.method.len, (const char *)r.method.base, (int)r.target.len,
                     (const char *)r.target.base, (int)r.host.len, (const char *)r.host.base,
                     r.fields_len, gw_errname(rv));
    }
    assert_int_equal(out.len, 4); /* nothing half-written */
    /* the output cap: GW_E_LIMIT, and nothing appended either */
    gw_bytes_t capped;
    gw_bytes_init(&capped, 10);
    gw_h1_request_t r = {
        .method = GW_SLICE_LIT("GET"), .target = GW_SLICE_LIT("/"), .host = GW_SLICE_LIT("h")};
    assert_int_equal(gw_h1_request_head(&capped, &r), GW_E_LIMIT);
    assert_int_equal(capped.len, 0);
    gw_bytes_free(&capped);
    gw_bytes_free(&out);
}

/* The value checks go eight bytes at a time: a CR, LF or NUL at any position of a long value
 * (and of the target and host) is still refused; the size is reserved exactly (a cap of the
 * head's length is enough, one byte less is GW_E_LIMIT with nothing written). */
static void request_head_checks_every_byte(void **state)
{
    (void)state;
    static const char ctl[] = {'\r', '\n', '\0'};
    char v[40];
    for (size_t b = 0; b < 3; b++) {
        for (size_t pos = 0; pos < sizeof(v); pos++) {
            memset(v, 'a', sizeof(v));
            v[pos] = ctl[b];
            gw_slice_t s = {(const uint8_t *)v, sizeof(v)};
            gw_field_t f[] = {{GW_SLICE_LIT("X-Long"), s}};
            gw_h1_request_t r = {.method = GW_SLICE_LIT("GET"),
                                 .target = GW_SLICE_LIT("/"),
                                 .host = GW_SLICE_LIT("h"),
                                 .fields = f,
                                 .fields_len = 1};
            gw_bytes_t out;
            gw_bytes_init(&out, 0);
            assert_int_equal(gw_h1_request_head(&out, &r), GW_E_INVAL);
            r.fields_len = 0;
            r.host = s;
            assert_int_equal(gw_h1_request_head(&out, &r), GW_E_INVAL);
            r.host = GW_SLICE_LIT("h");
            r.target = s;
            v[0] = '/';
            if (pos)
                assert_int_equal(gw_h1_request_head(&out, &r), GW_E_INVAL);
            assert_int_equal(out.len, 0);
            gw_bytes_free(&out);
        }
    }
    gw_field_t f[] = {{GW_SLICE_LIT("Accept"), GW_SLICE_LIT("*/*")}};
    gw_h1_request_t r = {.method = GW_SLICE_LIT("PUT"),
                         .target = GW_SLICE_LIT("/x"),
                         .host = GW_SLICE_LIT("example.com"),
                         .fields = f,
                         .fields_len = 1,
                         .body_len = 1234567};
    const char *want = "PUT /x HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                       "Content-Length: 1234567\r\n\r\n";
    size_t n = strlen(want);
    for (size_t cap = n - 1; cap <= n; cap++) {
        gw_bytes_t out;
        gw_bytes_init(&out, cap);
        int rv = gw_h1_request_head(&out, &r);
        GW_EXPECT_BOUNDED_WRITE(rv, out, cap, want, n);
        gw_bytes_free(&out);
    }
}

static void chunk_framing(void **state)
{
    (void)state;
    uint8_t b[GW_H1_CHUNK_HEAD_MAX];
    size_t n = gw_h1_chunk_head(b, 1);
    assert_int_equal(n, 3);
    assert_memory_equal(b, "1\r\n", 3);
    n = gw_h1_chunk_head(b, 0x10);
    assert_memory_equal(b, "10\r\n", n);
    n = gw_h1_chunk_head(b, 0xabc);
    assert_memory_equal(b, "abc\r\n", n);
    n = gw_h1_chunk_head(b, SIZE_MAX);
    assert_int_equal(n, GW_H1_CHUNK_HEAD_MAX);
    assert_memory_equal(b, "ffffffffffffffff\r\n", n);
    assert_int_equal(GW_H1_CHUNK_END_LEN, strlen(GW_H1_CHUNK_END));

    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_h1_last_chunk(&out, NULL, 0), 0);
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.base, "0\r\n\r\n", 5);
    out.len = 0;
    gw_field_t t[] = {{GW_SLICE_LIT("X-Sum"), GW_SLICE_LIT("42")},
                      {GW_SLICE_LIT("X-B"), GW_SLICE_LIT("")}};
    assert_int_equal(gw_h1_last_chunk(&out, t, 2), 0);
    const char *want = "0\r\nX-Sum: 42\r\nX-B: \r\n\r\n";
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.base, want, out.len);
    out.len = 0;
    gw_field_t bad1[] = {{GW_SLICE_LIT("X"), GW_SLICE_LIT("1\r\n\r\nGET / HTTP/1.1")}};
    gw_field_t bad2[] = {{GW_SLICE_LIT("X:Y"), GW_SLICE_LIT("1")}};
    assert_int_equal(gw_h1_last_chunk(&out, bad1, 1), GW_E_INVAL);
    assert_int_equal(gw_h1_last_chunk(&out, bad2, 1), GW_E_INVAL);
    assert_int_equal(out.len, 0);
    gw_bytes_free(&out);
}

/* Request head + chunks + last chunk with a trailer, written by the helpers above, read back
 * by the h1 request parser: what we send is what an HTTP/1.1 server reads. */
typedef struct {
    char body[64];
    size_t body_len;
    char trailers[64];
    int heads, completes;
} rt_t;

static int rt_head(void *ud, const gw_h1_msg_t *m)
{
    rt_t *t = ud;
    t->heads++;
    assert_true(m->flags & GW_H1_MSG_F_CHUNKED);
    return 0;
}

static int rt_body(void *ud, const uint8_t *p, size_t n)
{
    rt_t *t = ud;
    assert_true(t->body_len + n <= sizeof(t->body));
    memcpy(t->body + t->body_len, p, n);
    t->body_len += n;
    return 0;
}

static int rt_trailers(void *ud, const gw_h1_field_t *f, size_t n)
{
    rt_t *t = ud;
    assert_int_equal(n, 1);
    snprintf(t->trailers, sizeof(t->trailers), "%.*s=%.*s", (int)f[0].name.len,
             (const char *)f[0].name.base, (int)f[0].value.len, (const char *)f[0].value.base);
    return 0;
}

static int rt_complete(void *ud)
{
    ((rt_t *)ud)->completes++;
    return 0;
}

static void chunked_request_round_trip(void **state)
{
    (void)state;
    gw_h1_request_t r = {.method = GW_SLICE_LIT("PUT"),
                         .target = GW_SLICE_LIT("/up"),
                         .host = GW_SLICE_LIT("origin"),
                         .body_len = -1};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_h1_request_head(&out, &r), 0);
    const char *pieces[] = {"hello", " ", "world, this piece is longer than fifteen"};
    for (size_t i = 0; i < 3; i++) {
        uint8_t h[GW_H1_CHUNK_HEAD_MAX];
        size_t len = strlen(pieces[i]);
        assert_int_equal(gw_bytes_append(&out, h, gw_h1_chunk_head(h, len)), 0);
        assert_int_equal(gw_bytes_append(&out, pieces[i], len), 0);
        assert_int_equal(gw_bytes_append(&out, GW_H1_CHUNK_END, GW_H1_CHUNK_END_LEN), 0);
    }
    gw_field_t t[] = {{GW_SLICE_LIT("X-Digest"), GW_SLICE_LIT("abc")}};
    assert_int_equal(gw_h1_last_chunk(&out, t, 1), 0);
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        rt_t got = {0};
        gw_h1_limits_t l = {4096, 32};
        gw_h1_callbacks_t pc = {rt_head, rt_body, rt_complete, rt_trailers};
        gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &l, &pc, &got);
        assert_non_null(p);
        size_t pos = 0;
        while (pos < out.len) {
            size_t k = bytewise ? 1 : out.len - pos;
            ssize_t u = gw_h1_parser_feed(p, out.base + pos, k);
            assert_true(u >= 0);
            pos += (size_t)u;
            if (gw_h1_parser_paused(p))
                break;
        }
        assert_int_equal(pos, out.len);
        assert_int_equal(got.heads, 1);
        assert_int_equal(got.completes, 1);
        assert_int_equal(got.body_len, strlen("hello world, this piece is longer than fifteen"));
        assert_memory_equal(got.body, "hello world, this piece is longer than fifteen",
                            got.body_len);
        assert_string_equal(got.trailers, "X-Digest=abc");
        gw_h1_parser_del(p);
    }
    gw_bytes_free(&out);
}

/* RFC 9110 §7.8 (WebSocket): after gw_h1_client_expect_upgrade() a 101 is the final head and
 * every byte after it, in the same feed or later ones, whatever it looks like, is tunnel data
 * passed on as it is; the origin's close completes it. Interim 100/103 before it still count
 * as interim. At every cut point. Without the expectation a 101 stays an error, and with it an
 * ordinary final answer is an ordinary response. */
static void upgrade_tunnel(void **state)
{
    (void)state;
    static const char msg[] = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                              "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\n\r\n"
                              "\x81\x05hello HTTP/1.1 200 OK\r\n\r\nnot a response";
    size_t n = sizeof(msg) - 1;
    size_t head_end = strstr(msg, "Upgrade\r\n\r\n") + 11 - msg;
    for (size_t cut = 1; cut <= n; cut++) {
        rec_t r = {0};
        gw_h1_limits_t dl = {4096, 64};
        gw_h1_client_t *c = gw_h1_client_new(&dl, &cbs, &r);
        r.buf = (const uint8_t *)msg;
        gw_h1_client_start(c, 0);
        gw_h1_client_expect_upgrade(c);
        size_t pos = 0;
        while (pos < n) {
            size_t k = pos < cut ? cut - pos : n - pos;
            r.lo = pos;
            r.hi = pos + k;
            ssize_t used = gw_h1_client_feed(c, (const uint8_t *)msg, pos, k);
            assert_int_equal(used, (ssize_t)k); /* a tunnel takes everything */
            pos += k;
        }
        assert_int_equal(gw_h1_client_state(c), GW_H1_CLIENT_TUNNEL);
        assert_int_equal(gw_h1_client_status(c), 101);
        assert_int_equal(gw_h1_client_eof(c), 0);
        assert_int_equal(gw_h1_client_state(c), GW_H1_CLIENT_DONE);
        assert_int_equal(gw_h1_client_keep_alive(c), 0);
        gw_h1_client_del(c);
        char want[512];
        snprintf(want, sizeof(want),
                 "I103 [Link=</a>]\nI101 [Upgrade=websocket] [Connection=Upgrade]\nB%s\nC\n",
                 msg + head_end);
        assert_string_equal(r.log, want);
        assert_int_equal(r.completes, 1);
    }
    /* not awaited: an error; awaited but refused: an ordinary response */
    rec_t r = {0};
    assert_int_equal(run("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 56,
                         WHOLE, 0, 0, &r, NULL, NULL, NULL),
                     GW_E_PARSE);
    rec_t r2 = {0};
    gw_h1_limits_t dl = {4096, 64};
    static const char ok[] = "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2\r\n\r\nnoHTTP";
    gw_h1_client_t *c = gw_h1_client_new(&dl, &cbs, &r2);
    r2.buf = (const uint8_t *)ok;
    gw_h1_client_start(c, 0);
    gw_h1_client_expect_upgrade(c);
    r2.lo = 0;
    r2.hi = sizeof(ok) - 1;
    assert_int_equal(gw_h1_client_feed(c, (const uint8_t *)ok, 0, sizeof(ok) - 1),
                     (ssize_t)(sizeof(ok) - 5));
    assert_int_equal(gw_h1_client_state(c), GW_H1_CLIENT_DONE);
    gw_h1_client_del(c);
    assert_string_equal(r2.log, "H426 1.1 ka=1 [Content-Length=2]\nBno\nC\n");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(framings_whole),
    cmocka_unit_test(framings_byte_by_byte),
    cmocka_unit_test(framings_every_cut),
    cmocka_unit_test(pipelined_boundary),
    cmocka_unit_test(truncated_is_io_error),
    cmocka_unit_test(eof_outside_a_response),
    cmocka_unit_test(body_left_tracks_content_length),
    cmocka_unit_test(malformed_rejected),
    cmocka_unit_test(limits_configurable),
    cmocka_unit_test(callback_stops_feed),
    cmocka_unit_test(alloc_sweep),
    cmocka_unit_test(head_buffers_are_the_threads),
    cmocka_unit_test(request_head_vector),
    cmocka_unit_test(request_head_rejects_injection),
    cmocka_unit_test(request_head_checks_every_byte),
    cmocka_unit_test(chunk_framing),
    cmocka_unit_test(chunked_request_round_trip),
    cmocka_unit_test(upgrade_tunnel),
};

GW_TEST_MAIN(tests)
