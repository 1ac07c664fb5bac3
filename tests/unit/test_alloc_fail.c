/* The failing-allocation sweep (docs/STYLE.md) over the codecs: HPACK (encoder and decoder), the
 * HTTP/1.1 request parser, the response client and the serializers. For n = 1, 2, ... the n-th
 * allocation fails: the call must report GW_E_NOMEM (never another error, never success with a
 * wrong result), leak nothing (the ASan build runs this with leak detection), and leave the
 * object freeable. The sweep ends at the first n that injects nothing; then the result must be
 * the one an unhindered run gives. (The HTTP/2 session has its own sweep in
 * test_h2_session.c::alloc_failure_sweep.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "h1/client.h"
#include "h1/parser.h"
#include "h1/serializer.h"
#include "h2/hpack.h"

/* Run step(n) for n = 1.. until a run injects no failure; returns how many runs failed. */
static unsigned sweep(int (*step)(unsigned long n), const char *what)
{
    unsigned long n;
    unsigned failed = 0;
    for (n = 1; n < 10000; n++) {
        gw_alloc_fail_after(n);
        int rc = step(n);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            if (rc != 0)
                fail_msg("%s: %d without an injected failure", what, rc);
            break;
        }
        if (rc != GW_E_NOMEM)
            fail_msg("%s: allocation %lu failed, the call returned %d, not GW_E_NOMEM", what, n,
                     rc);
        failed++;
    }
    assert_true(n < 10000);
    return failed;
}

/* ---- HPACK -------------------------------------------------------------------------------- */

/* A field without flags: the encoder may index it. */
#define HF(n, v)                                                                                   \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v), 0                                                        \
    }
static const gw_hpack_field_t fields[] = {
    HF(":method", "GET"),
    HF(":path", "/index.html?q=1"),
    HF("x-custom-header", "a value long enough to be Huffman-coded"),
    HF("cookie", "secret=1"),
    HF("x-custom-header", "a value long enough to be Huffman-coded"),
};
#undef HF

typedef struct {
    size_t n;
    char seen[512];
} got_t;

static int on_field(void *ud, const gw_hpack_field_t *f)
{
    got_t *g = ud;
    size_t len = strlen(g->seen);
    snprintf(g->seen + len, sizeof(g->seen) - len, "%.*s=%.*s;", (int)f->name.len,
             (const char *)f->name.base, (int)f->value.len, (const char *)f->value.base);
    g->n++;
    return 0;
}

/* Encode two blocks (the second reuses the dynamic table), decode them back. */
static int hpack_round_trip(unsigned long n)
{
    (void)n;
    gw_hpack_enc_t e;
    gw_hpack_dec_t d;
    gw_bytes_t out[2];
    got_t g = {0};
    int rc = 0;
    gw_hpack_enc_init(&e, 4096);
    gw_hpack_dec_init(&d, 4096);
    gw_bytes_init(&out[0], 0);
    gw_bytes_init(&out[1], 0);
    for (int b = 0; b < 2 && rc == 0; b++)
        rc = gw_hpack_encode(&e, fields, sizeof(fields) / sizeof(fields[0]), &out[b]);
    for (int b = 0; b < 2 && rc == 0; b++) {
        gw_hpack_dec_begin(&d, 65536);
        ssize_t k = gw_hpack_decode(&d, out[b].base, out[b].len, 1, on_field, &g);
        int end = k < 0 ? 0 : gw_hpack_dec_end(&d);
        rc = k < 0 ? (int)k : end;
        if (rc == 0 && (size_t)k != out[b].len)
            rc = GW_E_PARSE;
    }
    if (rc == 0 && (g.n != 10 || !strstr(g.seen, "x-custom-header=a value long enough")))
        rc = GW_E_PARSE;
    gw_bytes_free(&out[0]);
    gw_bytes_free(&out[1]);
    gw_hpack_enc_free(&e);
    gw_hpack_dec_free(&d);
    return rc;
}

/* ---- HTTP/1.1 request parser ------------------------------------------------------------ */

typedef struct {
    int completes; /* first: count_complete */
    int heads;
    size_t body;
    char path[64];
} req_t;

static int rq_head(void *ud, const gw_h1_msg_t *m)
{
    req_t *r = ud;
    r->heads++;
    snprintf(r->path, sizeof(r->path), "%.*s", (int)m->target.len, (const char *)m->target.base);
    return 0;
}

static int rq_body(void *ud, const uint8_t *p, size_t len)
{
    (void)p;
    ((req_t *)ud)->body += len;
    return 0;
}

/* on_complete of both the parser and the client: the first member of req_t and resp_t */
static int count_complete(void *ud)
{
    ++*(int *)ud;
    return 0;
}

static const char two_requests[] = "POST /upload HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
                                   "Trailer-X: y\r\n\r\n"
                                   "GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n";

static int h1_requests(unsigned long n)
{
    static const gw_h1_callbacks_t cb = {rq_head, rq_body, count_complete, NULL};
    gw_h1_limits_t lim = {65536, 128};
    req_t r = {0};
    gw_h1_parser_t *p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cb, &r);
    if (!p)
        return GW_E_NOMEM;
    const uint8_t *d = (const uint8_t *)two_requests;
    size_t len = sizeof(two_requests) - 1, off = 0;
    int rc = 0;
    while (off < len && rc == 0) {
        ssize_t k = gw_h1_parser_feed(p, d + off, len - off);
        if (k < 0) {
            rc = (int)k;
            if (getenv("GW_TEST_DEBUG"))
                fprintf(stderr, "n=%lu off=%zu rc=%d paused=%d\n", n, off, rc,
                        gw_h1_parser_paused(p));
        } else {
            off += (size_t)k;
        }
        if (gw_h1_parser_paused(p))
            gw_h1_parser_resume(p);
    }
    if (rc == 0 && (r.heads != 2 || r.completes != 2 || r.body != 5 || strcmp(r.path, "/next")))
        rc = GW_E_PARSE;
    gw_h1_parser_del(p);
    return rc;
}

/* ---- HTTP/1.1 response client ----------------------------------------------------------- */

typedef struct {
    int done; /* first: count_complete */
    unsigned status;
    size_t body, trailers;
} resp_t;

static int rs_head(void *ud, const gw_h1_msg_t *m)
{
    ((resp_t *)ud)->status = m->status;
    return 0;
}

static int rs_body(void *ud, size_t off, size_t len)
{
    (void)off;
    ((resp_t *)ud)->body += len;
    return 0;
}

static int rs_trailers(void *ud, const gw_field_t *f, size_t n)
{
    (void)f;
    ((resp_t *)ud)->trailers += n;
    return 0;
}

static const char response[] = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                               "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n"
                               "Checksum: 1\r\nServer-Timing: x\r\n\r\n";

static int h1_response(unsigned long n)
{
    (void)n;
    static const gw_h1_client_cbs_t cb = {rs_head, rs_body, rs_trailers, count_complete};
    gw_h1_limits_t lim = {0, 0};
    resp_t r = {0};
    gw_h1_client_t *c = gw_h1_client_new(&lim, &cb, &r);
    if (!c)
        return GW_E_NOMEM;
    gw_h1_client_start(c, 0);
    ssize_t k = gw_h1_client_feed(c, (const uint8_t *)response, 0, sizeof(response) - 1);
    int rc = k < 0 ? (int)k : 0;
    if (rc == 0 && (r.status != 200 || r.body != 7 || r.trailers != 2 || !r.done))
        rc = GW_E_PARSE;
    gw_h1_client_del(c);
    return rc;
}

/* ---- serializers ------------------------------------------------------------------------ */

static int h1_serialize(unsigned long n)
{
    (void)n;
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    const gw_field_t f[] = {{GW_SLICE_LIT("accept"), GW_SLICE_LIT("*/*")},
                            {GW_SLICE_LIT("x-forwarded-for"), GW_SLICE_LIT("192.0.2.1")}};
    gw_h1_request_t req = {
        GW_SLICE_LIT("POST"), GW_SLICE_LIT("/p?q"), GW_SLICE_LIT("a.test"), f, 2, -1};
    int rc = gw_h1_request_head(&out, &req);
    const gw_h1_field_t rf[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/html")}};
    if (rc == 0)
        rc = gw_h1_response_head(&out, 200, rf, 1, -1, 1);
    if (rc == 0)
        rc = gw_h1_last_chunk(&out, f, 2);
    if (rc == 0)
        rc = gw_h1_simple_response(&out, 404, "not here\n", 1, 0);
    if (rc == 0 && (!memmem(out.base, out.len, "Transfer-Encoding: chunked", 26) ||
                    !memmem(out.base, out.len, "404", 3)))
        rc = GW_E_PARSE;
    gw_bytes_free(&out);
    return rc;
}

/* One test per codec: its step, its name in messages, and how many allocations its run at least
 * makes (so that a sweep that injects nothing cannot pass). */
typedef struct {
    int (*step)(unsigned long n);
    const char *what;
    unsigned min_failed;
} sweep_case_t;

static void run_sweep(void **state)
{
    const sweep_case_t *c = *state;
    unsigned failed = sweep(c->step, c->what);
    if (failed < c->min_failed)
        fail_msg("%s: %u allocations failed, want at least %u", c->what, failed, c->min_failed);
}

#define SWEEP_TEST(name, step, what, min_failed)                                                   \
    {                                                                                              \
#name, run_sweep, NULL, NULL, &(sweep_case_t)                                              \
        {                                                                                          \
            step, what, min_failed                                                                 \
        }                                                                                          \
    }

static const struct CMUnitTest tests[] = {
    SWEEP_TEST(hpack_sweep, hpack_round_trip, "hpack", 3),
    SWEEP_TEST(h1_request_parser_sweep, h1_requests, "h1 request parser", 1),
    SWEEP_TEST(h1_response_client_sweep, h1_response, "h1 response client", 1),
    SWEEP_TEST(h1_serializer_sweep, h1_serialize, "h1 serializer", 1),
};

GW_TEST_MAIN(tests)
