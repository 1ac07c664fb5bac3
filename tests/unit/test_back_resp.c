/* Unit tests of back/resp.c: the response parser seam (every body framing, 1xx, trailers,
 * keep-alive decision, malformed classes), fed whole, byte by byte and split at every cut
 * point, with a failing-allocation sweep; and the request head serializer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/err.h"

typedef struct {
    int heads, interim, complete, trailers;
    int status;
    char body[256];
    size_t body_len;
    char trailer_val[32];
    char field_val[64];
    gw_back_resp_t *p;
    const uint8_t *buf;
} ev_t;

static void e_head(void *d, const gw_back_head_t *h)
{
    ev_t *e = d;
    if (h->status < 200) {
        e->interim++;
        return;
    }
    e->heads++;
    e->status = h->status;
    for (size_t i = 0; i < h->fields_len; i++)
        if (gw_slice_eq_nocase(h->fields[i].name, GW_SLICE_LIT("x-a")))
            snprintf(e->field_val, sizeof(e->field_val), "%.*s", (int)h->fields[i].value.len,
                     (const char *)h->fields[i].value.base);
}

static void e_body(void *d, size_t off, size_t len)
{
    ev_t *e = d;
    assert_true(e->body_len + len <= sizeof(e->body));
    memcpy(e->body + e->body_len, e->buf + off, len);
    e->body_len += len;
}

static void e_trailers(void *d, const gw_back_field_t *f, size_t n)
{
    ev_t *e = d;
    e->trailers += (int)n;
    snprintf(e->trailer_val, sizeof(e->trailer_val), "%.*s", (int)f[0].value.len,
             (const char *)f[0].value.base);
}

static void e_complete(void *d)
{
    ev_t *e = d;
    e->complete++;
}

static const gw_back_resp_cbs_t cbs = {e_head, e_body, e_trailers, e_complete};

/* Feed msg in pieces cut at `cut` (0 = whole); then EOF when eof. Returns 0 or an error. */
static int feed_split(const char *msg, size_t n, size_t cut, int head_only, int eof, ev_t *e,
                      gw_back_resp_t *p)
{
    memset(e, 0, sizeof(*e));
    e->buf = (const uint8_t *)msg;
    gw_back__resp_init(p, head_only);
    size_t pos = 0;
    size_t step = cut ? cut : n;
    while (pos < n) {
        size_t k = n - pos < step ? n - pos : step;
        ssize_t r = gw_back__resp_feed(p, (const uint8_t *)msg, pos, k, &cbs, e);
        if (r < 0)
            return (int)r;
        pos += (size_t)r;
        if ((size_t)r < k)
            break; /* message done */
        if (cut && pos >= cut && step == cut && cut != 1)
            step = n; /* two pieces: [0,cut) [cut,n) */
    }
    if (eof)
        return gw_back__resp_eof(p, &cbs, e);
    return 0;
}

typedef struct {
    const char *msg;
    int head_only, eof;
    int status, interim, trailers, keep_alive;
    const char *body;
} vec_t;

static const vec_t good[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  v1 \r\n\r\nhello", 0, 0, 200, 0, 0, 1, "hello"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;a=b\r\n world\r\n"
     "0\r\nX-Sum: 42\r\n\r\n",
     0, 0, 200, 0, 1, 1, "hello world"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", 0,
     0, 200, 0, 0, 1, "0123456789"},
    {"HTTP/1.1 200 OK\r\n\r\nclose-delimited", 0, 1, 200, 0, 0, 0, "close-delimited"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 1, 0, 200, 0, 0, 1, ""},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 204, 0, 0, 1, ""},
    {"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 0, 0, 304, 0, 0, 1, ""},
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
     "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
     0, 0, 201, 2, 0, 1, "ok"},
    {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, 200, 0, 0, 0, "ok"},
    {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok", 0, 0, 200, 0, 0, 1,
     "ok"},
    {"HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nok", 0, 0, 200, 0, 0, 0,
     "ok"},
    {"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", 0, 0, 200, 0, 0, 1, ""},
    {"HTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx", 0, 0, 404, 0, 0, 1, "x"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw", 0, 1, 200, 0, 0, 0, "raw"},
};

static void check_good(const vec_t *v, size_t cut)
{
    ev_t e;
    gw_back_resp_t p = {0};
    size_t n = strlen(v->msg);
    int rc = feed_split(v->msg, n, cut, v->head_only, v->eof, &e, &p);
    if (rc != 0)
        fail_msg("vector %s cut %zu: %s", v->msg, cut, gw_errname(rc));
    assert_int_equal(e.heads, 1);
    assert_int_equal(e.status, v->status);
    assert_int_equal(e.interim, v->interim);
    assert_int_equal(e.complete, 1);
    assert_int_equal(e.trailers, v->trailers);
    assert_int_equal(p.keep_alive, v->keep_alive);
    assert_int_equal(e.body_len, strlen(v->body));
    assert_memory_equal(e.body, v->body, e.body_len);
    if (v->trailers)
        assert_string_equal(e.trailer_val, "42");
    if (strstr(v->msg, "X-A:"))
        assert_string_equal(e.field_val, "v1");
    gw_back__resp_free(&p);
}

static void framings_whole(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        check_good(&good[i], 0);
}

static void framings_byte_by_byte(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        check_good(&good[i], 1);
}

static void framings_every_cut(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        for (size_t cut = 2; cut < strlen(good[i].msg); cut++)
            check_good(&good[i], cut);
}

static void leftover_not_consumed(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokGARBAGE";
    ev_t e = {.buf = (const uint8_t *)m};
    gw_back_resp_t p = {0};
    gw_back__resp_init(&p, 0);
    ssize_t r = gw_back__resp_feed(&p, (const uint8_t *)m, 0, strlen(m), &cbs, &e);
    assert_int_equal(r, (ssize_t)strlen(m) - 7);
    assert_int_equal(e.complete, 1);
    gw_back__resp_free(&p);
}

static void truncated_is_io_error(void **state)
{
    (void)state;
    const char *cases[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        "HTTP/1.1 200 OK\r\nContent-",
        "",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ev_t e;
        gw_back_resp_t p = {0};
        assert_int_equal(feed_split(cases[i], strlen(cases[i]), 0, 0, 1, &e, &p), GW_E_IO);
        assert_int_equal(e.complete, 0);
        gw_back__resp_free(&p);
    }
}

static const char *const bad[] = {
    "HTTP/1.1 20 OK\r\n\r\n",
    "HTTX/1.1 200 OK\r\n\r\n",
    "HTTP/2.0 200 OK\r\n\r\n",
    "HTTP/1.1 200OK\r\n\r\n",
    "HTTP/1.1 099 Low\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX-A: b\rc\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\nok\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\n",
    "HTTP/1.1 200 OK\r\n: empty-name\r\n\r\n",
};

static void malformed_rejected(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        /* The NUL case has an embedded zero: measure it up to the final CRLFCRLF. */
        size_t n = strlen(bad[i]);
        if (strstr(bad[i], "X-A: a") == bad[i] + 17)
            n = 48; /* the head runs past the embedded NUL */
        for (size_t cut = 0; cut < 3; cut++) {
            ev_t e;
            gw_back_resp_t p = {0};
            int rc = feed_split(bad[i], n, cut, 0, 0, &e, &p);
            if (rc != GW_E_PARSE)
                fail_msg("bad[%zu] cut %zu: got %s", i, cut, gw_errname(rc));
            assert_int_equal(e.heads,
                             0 + (strstr(bad[i], "chunked") && !strstr(bad[i], "Length") ? 1 : 0));
            gw_back__resp_free(&p);
        }
    }
}

static void oversized_head_rejected(void **state)
{
    (void)state;
    static char big[GW_BACK_MAX_HEAD + 200];
    memcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ", 25);
    memset(big + 25, 'a', sizeof(big) - 25 - 4);
    memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
    ev_t e;
    gw_back_resp_t p = {0};
    assert_int_equal(feed_split(big, sizeof(big), 1000, 0, 0, &e, &p), GW_E_PARSE);
    gw_back__resp_free(&p);
}

static void alloc_sweep(void **state)
{
    (void)state;
    const vec_t *v = &good[1]; /* head fields + chunk lines + trailers: every allocation */
    for (unsigned long n = 1;; n++) {
        ev_t e;
        gw_back_resp_t p = {0};
        gw_alloc_fail_after(n);
        int rc = feed_split(v->msg, strlen(v->msg), 0, 0, 0, &e, &p);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        gw_back__resp_free(&p);
        if (!hit) {
            assert_int_equal(rc, 0);
            assert_int_equal(e.complete, 1);
            break;
        }
        assert_int_equal(rc, GW_E_NOMEM);
        assert_true(n < 50);
    }
}

static void request_head_vector(void **state)
{
    (void)state;
    gw_back_field_t f[] = {{GW_SLICE_LIT("Accept"), GW_SLICE_LIT("*/*")},
                           {GW_SLICE_LIT("X-Forwarded-For"), GW_SLICE_LIT("192.0.2.1")}};
    gw_back_req_t r = {.method = GW_SLICE_LIT("POST"),
                       .target = GW_SLICE_LIT("/a?b=c"),
                       .host = GW_SLICE_LIT("example.com"),
                       .fields = f,
                       .fields_len = 2,
                       .body_len = 12};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_back__req_head(&out, &r), 0);
    const char *want = "POST /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                       "X-Forwarded-For: 192.0.2.1\r\nContent-Length: 12\r\n\r\n";
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.base, want, out.len);
    out.len = 0;
    r.body_len = -1;
    r.fields_len = 0;
    assert_int_equal(gw_back__req_head(&out, &r), 0);
    const char *want2 = "POST /a?b=c HTTP/1.1\r\nHost: example.com\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(out.len, strlen(want2));
    assert_memory_equal(out.base, want2, out.len);
    gw_bytes_free(&out);
}

static void request_head_rejects_injection(void **state)
{
    (void)state;
    gw_back_field_t f1[] = {{GW_SLICE_LIT("X"), GW_SLICE_LIT("a\r\nEvil: 1")}};
    gw_back_field_t f2[] = {{GW_SLICE_LIT("X Y"), GW_SLICE_LIT("a")}};
    gw_back_req_t r = {.method = GW_SLICE_LIT("GET"),
                       .target = GW_SLICE_LIT("/"),
                       .host = GW_SLICE_LIT("h"),
                       .fields = f1,
                       .fields_len = 1};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_back__req_head(&out, &r), GW_E_INVAL);
    r.fields = f2;
    assert_int_equal(gw_back__req_head(&out, &r), GW_E_INVAL);
    r.fields_len = 0;
    r.target = GW_SLICE_LIT("/a b");
    assert_int_equal(gw_back__req_head(&out, &r), GW_E_INVAL);
    r.target = GW_SLICE_LIT("/");
    r.host = GW_SLICE_LIT("h\r\nX: y");
    assert_int_equal(gw_back__req_head(&out, &r), GW_E_INVAL);
    r.host = GW_SLICE_LIT("h");
    r.method = GW_SLICE_LIT("");
    assert_int_equal(gw_back__req_head(&out, &r), GW_E_INVAL);
    gw_bytes_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(framings_whole),          cmocka_unit_test(framings_byte_by_byte),
        cmocka_unit_test(framings_every_cut),      cmocka_unit_test(leftover_not_consumed),
        cmocka_unit_test(truncated_is_io_error),   cmocka_unit_test(malformed_rejected),
        cmocka_unit_test(oversized_head_rejected), cmocka_unit_test(alloc_sweep),
        cmocka_unit_test(request_head_vector),     cmocka_unit_test(request_head_rejects_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
