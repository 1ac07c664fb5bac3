/* Unit tests of proxy/route: route matching and the gateway's own answers through the
 * client-stream interface. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "config/config.h"
#include "proxy/proxy.h"

#include <uv.h>

static const char *yaml = "listen: [{address: 127.0.0.1:8080}]\n"
                          "upstreams:\n"
                          "  api: {servers: [127.0.0.1:9001]}\n"
                          "  web: {servers: [127.0.0.1:9002]}\n"
                          "  any: {servers: [127.0.0.1:9003]}\n"
                          "routes:\n"
                          "  - {host: api.example.com, path: /v1/, upstream: api}\n"
                          "  - {host: '*.example.com', path: /, upstream: web}\n"
                          "  - {host: 'static.test', path: /, upstream: any}\n";

static gw_config_t *cfg;
static gw_proxy_t *px;

static int setup(void **state)
{
    (void)state;
    gw_config_errors_t e = {0};
    if (gw_config_load_string("t.yaml", yaml, strlen(yaml), &cfg, &e) < 0)
        return -1;
    return gw_proxy_new(uv_default_loop(), cfg, &px);
}

static int teardown(void **state)
{
    (void)state;
    gw_proxy_close(px);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    gw_proxy_del(px);
    gw_config_del(cfg);
    return 0;
}

static const char *route(const char *authority, const char *path)
{
    const gw_cfg_route_t *r = gw_proxy_route(px, gw_slice_str(authority), gw_slice_str(path));
    return r ? r->upstream_name : NULL;
}

static void matching(void **state)
{
    (void)state;
    assert_string_equal(route("api.example.com", "/v1/users"), "api");
    assert_string_equal(route("API.Example.COM:8443", "/v1/x"), "api"); /* case, port */
    assert_string_equal(route("api.example.com", "/v2/users"), "web");  /* first match wins */
    assert_string_equal(route("www.example.com", "/"), "web");
    assert_string_equal(route("a.b.example.com", "/x"), "web");
    assert_null(route("example.com", "/"));    /* "*.example.com" needs a label before */
    assert_null(route("badexample.com", "/")); /* suffix on a label boundary */
    assert_string_equal(route("static.test", "/"), "any");
    assert_null(route("static.testing", "/"));
    assert_null(route("[::1]:8080", "/"));
    assert_null(route("", "/"));
}

typedef struct {
    gw_cstream_t s;
    unsigned status;
    int64_t cl;
    char body[256];
    size_t body_len;
    int ended;
} fake_t;

static int f_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n, int64_t cl,
                     int end)
{
    fake_t *x = (fake_t *)s;
    x->status = status;
    x->cl = cl;
    x->ended = end;
    assert_true(n >= 1);
    assert_true(gw_slice_eq(f[0].name, GW_SLICE_LIT("server")));
    return 0;
}

static int f_body(gw_cstream_t *s, gw_rbuf_t *b, size_t off, size_t len, int end)
{
    fake_t *x = (fake_t *)s;
    memcpy(x->body + x->body_len, b->data + off, len);
    x->body_len += len;
    x->ended = end;
    return 0;
}

static int f_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    (void)s, (void)status, (void)f, (void)n;
    fail_msg("no interim answer expected");
    return 0;
}

static int f_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    (void)s, (void)f, (void)n;
    fail_msg("no trailers expected");
    return 0;
}

static void f_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    (void)s, (void)code;
    fail_msg("no reset expected");
}

static void f_credit(gw_cstream_t *s, size_t n)
{
    (void)s, (void)n;
}

static size_t f_pending(gw_cstream_t *s)
{
    (void)s;
    return 0;
}

static const gw_cstream_ops_t fops = {f_respond, f_interim, f_body,   f_trailers,
                                      f_reset,   f_credit,  f_pending};

/* Run the loop until the stream got its answer (bounded). */
static void wait_answer(fake_t *x)
{
    for (int i = 0; i < 1000 && !x->ended; i++)
        uv_run(uv_default_loop(), UV_RUN_ONCE);
}

static void answers(void **state)
{
    (void)state;
    fake_t x = {.s = {.ops = &fops, .peer = "test"}};
    gw_req_head_t h = {GW_SLICE_LIT("GET"),
                       GW_SLICE_LIT("https"),
                       GW_SLICE_LIT("nowhere.test"),
                       GW_SLICE_LIT("/"),
                       NULL,
                       0,
                       0,
                       1,
                       "h2"};
    assert_int_equal(gw_proxy_request(px, &x.s, &h), 0);
    assert_int_equal(x.status, 404);
    assert_true(x.ended);
    assert_int_equal(x.cl, (int64_t)x.body_len);
    assert_memory_equal(x.body, "h2gate: no route", 16);

    fake_t y = {.s = {.ops = &fops, .peer = "test"}};
    h.authority = GW_SLICE_LIT("www.example.com");
    /* routed to web, whose server 127.0.0.1:9002 refuses: 502 from the gateway */
    assert_int_equal(gw_proxy_request(px, &y.s, &h), 0);
    wait_answer(&y);
    gw_proxy_stream_closed(px, &y.s);
    assert_int_equal(y.status, 502);
    assert_true(y.ended);
    assert_int_equal(y.cl, (int64_t)y.body_len);

    fake_t z = {.s = {.ops = &fops, .peer = "test", .head_only = 1}};
    h.method = GW_SLICE_LIT("HEAD");
    assert_int_equal(gw_proxy_request(px, &z.s, &h), 0);
    wait_answer(&z);
    gw_proxy_stream_closed(px, &z.s);
    assert_int_equal(z.status, 502);
    assert_true(z.ended); /* the head ends the response */
    assert_int_equal(z.body_len, 0);
    assert_int_equal(z.cl, y.cl); /* with the length a GET would have had */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matching),
        cmocka_unit_test(answers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
