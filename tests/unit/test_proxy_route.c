/* Unit tests of proxy/route: route matching and the gateway's own answers through the
 * client-stream interface. */
#define GW_PROXY_TEST_FIXTURE
#include "proxy_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/bucket.h"
#include "common/err.h"

static const char *yaml = "listen: [{address: 127.0.0.1:8080}]\n"
                          "upstreams:\n"
                          "  api: {servers: [127.0.0.1:9001]}\n"
                          "  web: {servers: [127.0.0.1:9002]}\n"
                          "  any: {servers: [127.0.0.1:9003]}\n"
                          "routes:\n"
                          "  - {host: api.example.com, path: /v1/, upstream: api}\n"
                          "  - {host: '*.example.com', path: /, upstream: web}\n"
                          "  - {host: 'static.test', path: /, upstream: any}\n"
                          "  - {host: 'rl.test', path: /, upstream: any, request_rate: 2, "
                          "request_burst: 3}\n"
                          "  - {host: 'rl0.test', path: /, upstream: any, request_rate: 1}\n"
                          "  - {host: '[0:0::0001]', path: /, upstream: api}\n"
                          "  - {host: '[2001:DB8::AB]', path: /, upstream: web}\n";

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
    assert_null(route("", "/"));
    /* RFC 4291 §2.2: every spelling of an IPv6 address takes its route, port or not, whatever
     * the spelling the route was written in (both are canonical, RFC 5952) */
    static const char *const loop[] = {
        "[::1]", "[::1]:8080", "[0:0::1]", "[::0001]", "[0:0:0:0:0:0:0:1]:443", "[0000:0::1]"};
    for (size_t i = 0; i < sizeof(loop) / sizeof(loop[0]); i++)
        assert_string_equal(route(loop[i], "/"), "api");
    static const char *const doc[] = {"[2001:db8::ab]", "[2001:DB8::AB]:8443",
                                      "[2001:0db8:0:0:0:0:0:00aB]", "[2001:db8:0::0:ab]"};
    for (size_t i = 0; i < sizeof(doc) / sizeof(doc[0]); i++)
        assert_string_equal(route(doc[i], "/"), "web");
    assert_null(route("[::2]", "/"));
    assert_null(route("[2001:db8::ac]", "/"));
    /* not a literal (the fronts refuse both): compared as written, and matches nothing */
    assert_null(route("[::1", "/"));
    assert_null(route("[::1]x", "/"));
}

typedef struct {
    gw_cstream_t s;
    char retry_after[16];
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
    for (size_t i = 0; i < n; i++)
        if (gw_slice_eq(f[i].name, GW_SLICE_LIT("retry-after")))
            snprintf(x->retry_after, sizeof(x->retry_after), "%.*s", (int)f[i].value.len,
                     (const char *)f[i].value.base);
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
                       GW_REQ_H2};
    h.route = gw_proxy_route(px, h.authority, h.path);
    assert_int_equal(gw_proxy_request(px, &x.s, &h), 0);
    assert_int_equal(x.status, 404);
    assert_true(x.ended);
    assert_int_equal(x.cl, (int64_t)x.body_len);
    assert_memory_equal(x.body, "h2gate: no route", 16);

    fake_t y = {.s = {.ops = &fops, .peer = "test"}};
    h.authority = GW_SLICE_LIT("www.example.com");
    h.route = gw_proxy_route(px, h.authority, h.path);
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

static struct sockaddr_in client(const char *ip, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

/* The decision alone, on a fake clock: burst 3, 2/s; Retry-After rounds up to whole seconds;
 * routes and clients have their own buckets; request_burst 0 means one second's worth. */
static void rate_decision(void **state)
{
    (void)state;
    gw_bucket_table_t *t;
    assert_int_equal(gw_bucket_table_new(16, 64, &t), 0);
    const gw_cfg_route_t *rl = gw_proxy_route(px, GW_SLICE_LIT("rl.test"), GW_SLICE_LIT("/"));
    const gw_cfg_route_t *r0 = gw_proxy_route(px, GW_SLICE_LIT("rl0.test"), GW_SLICE_LIT("/"));
    const gw_cfg_route_t *free_r =
        gw_proxy_route(px, GW_SLICE_LIT("static.test"), GW_SLICE_LIT("/"));
    assert_non_null(rl);
    assert_int_equal(rl->request_rate, 2);
    size_t il = (size_t)(rl - cfg->routes), i0 = (size_t)(r0 - cfg->routes);
    struct sockaddr_in a = client("127.0.0.1", 1111), a2 = client("127.0.0.1", 2222),
                       b = client("127.0.0.2", 1111);
    const struct sockaddr *sa = (const struct sockaddr *)&a, *sa2 = (const struct sockaddr *)&a2,
                          *sb = (const struct sockaddr *)&b;
    unsigned ra = 0;
    for (int i = 0; i < 3; i++)
        assert_true(gw_proxy__rate_allow(t, rl, il, i ? sa2 : sa, 0, &ra)); /* port ignored */
    assert_false(gw_proxy__rate_allow(t, rl, il, sa, 0, &ra));
    assert_int_equal(ra, 1);                                  /* 500 ms to the next token: 1 s */
    assert_true(gw_proxy__rate_allow(t, rl, il, sb, 0, &ra)); /* another client */
    assert_true(gw_proxy__rate_allow(t, rl, il, sa, 500000, &ra));
    assert_false(gw_proxy__rate_allow(t, rl, il, sa, 500000, &ra));
    /* a route without a rate never limits; the other route has its own bucket (burst 1) */
    for (int i = 0; i < 10; i++)
        assert_true(gw_proxy__rate_allow(t, free_r, 0, sa, 500000, &ra));
    assert_true(gw_proxy__rate_allow(t, r0, i0, sa, 500000, &ra));
    assert_false(gw_proxy__rate_allow(t, r0, i0, sa, 500000, &ra));
    assert_int_equal(ra, 1);
    assert_false(gw_proxy__rate_allow(t, r0, i0, sa, 600000, &ra));
    assert_int_equal(ra, 1); /* 0.9 s left: still 1 */
    assert_true(gw_proxy__rate_allow(t, r0, i0, sa, 1500000, &ra));
    /* no table: unlimited */
    assert_true(gw_proxy__rate_allow(NULL, rl, il, sa, 0, &ra));
    /* one of three instances deciding alone (rate 2/s, burst 3): a request goes on a token and
     * costs three, so the burst is one request, then one each 1.5 s: 2/3 a second */
    struct sockaddr_in d = client("127.0.0.4", 1);
    const struct sockaddr *sd = (const struct sockaddr *)&d;
    assert_true(gw_proxy__rate_allow_share(t, rl, il, sd, 0, 3, &ra));
    assert_false(gw_proxy__rate_allow_share(t, rl, il, sd, 0, 3, &ra));
    assert_int_equal(ra, 1);
    assert_true(gw_proxy__rate_allow_share(t, rl, il, sd, 500000, 3, &ra)); /* 1 token: goes */
    assert_false(gw_proxy__rate_allow_share(t, rl, il, sd, 500000, 3, &ra));
    assert_int_equal(ra, 2); /* 2 tokens owed and 1 to have: 1.5 s, rounded up */
    assert_false(gw_proxy__rate_allow_share(t, rl, il, sd, 1900000, 3, &ra));
    assert_true(gw_proxy__rate_allow_share(t, rl, il, sd, 2000000, 3, &ra));
    /* share 0 is 1 */
    struct sockaddr_in e = client("127.0.0.5", 1);
    const struct sockaddr *se = (const struct sockaddr *)&e;
    for (int i = 0; i < 3; i++)
        assert_true(gw_proxy__rate_allow_share(t, rl, il, se, 0, 0, &ra));
    assert_false(gw_proxy__rate_allow_share(t, rl, il, se, 0, 0, &ra));
    gw_bucket_table_del(t);

    /* a table full of clients in debt fails closed for a new address (it once
     * failed open: every new address got through unlimited) */
    assert_int_equal(gw_bucket_table_new(2, 64, &t), 0);
    assert_true(gw_proxy__rate_allow(t, r0, i0, sa, 0, &ra));
    assert_true(gw_proxy__rate_allow(t, r0, i0, sb, 0, &ra));
    struct sockaddr_in c = client("127.0.0.3", 1);
    ra = 0;
    assert_false(gw_proxy__rate_allow(t, r0, i0, (const struct sockaddr *)&c, 0, &ra));
    assert_int_equal(ra, 1);
    assert_int_equal(gw_bucket_table_refused(t), 1);
    /* a second later a's bucket is full again: forgetting it loses nothing, c gets in */
    assert_true(gw_proxy__rate_allow(t, r0, i0, (const struct sockaddr *)&c, 1000000, &ra));
    gw_bucket_table_del(t);
}

/* Through the proxy: over the burst, 429 with Retry-After and a body, without the origin. */
static void rate_limited_answer(void **state)
{
    (void)state;
    gw_bucket_table_t *t;
    assert_int_equal(gw_bucket_table_new(16, 64, &t), 0);
    gw_proxy_set_rate_table(px, t);
    struct sockaddr_in a = client("192.0.2.7", 1);
    gw_req_head_t h = {GW_SLICE_LIT("GET"),
                       GW_SLICE_LIT("https"),
                       GW_SLICE_LIT("rl.test"),
                       GW_SLICE_LIT("/x"),
                       NULL,
                       0,
                       0,
                       1,
                       GW_REQ_H2};
    h.route = gw_proxy_route(px, h.authority, h.path);
    gw_proxy_stats_t st0, st1;
    gw_proxy_stats(px, &st0);
    for (int i = 0; i < 4; i++) {
        fake_t x = {.s = {.ops = &fops, .peer = "test", .addr = (const struct sockaddr *)&a}};
        assert_int_equal(gw_proxy_request(px, &x.s, &h), 0);
        wait_answer(&x);
        gw_proxy_stream_closed(px, &x.s);
        assert_true(x.ended);
        if (i < 3) {
            assert_int_equal(x.status, 502); /* went to the (refusing) origin */
            assert_int_equal(x.retry_after[0], 0);
        } else {
            assert_int_equal(x.status, 429);
            assert_string_equal(x.retry_after, "1");
            assert_int_equal(x.cl, (int64_t)x.body_len);
            assert_memory_equal(x.body, "h2gate: too many requests", 25);
        }
    }
    gw_proxy_stats(px, &st1);
    assert_int_equal(st1.origin_requests - st0.origin_requests, 3);
    assert_int_equal(st1.rate_limited - st0.rate_limited, 1);
    gw_proxy_set_rate_table(px, NULL);
    gw_bucket_table_del(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(matching),
    cmocka_unit_test(answers),
    cmocka_unit_test(rate_decision),
    cmocka_unit_test(rate_limited_answer),
};

GW_TEST_MAIN_GROUP(tests, setup, teardown)
