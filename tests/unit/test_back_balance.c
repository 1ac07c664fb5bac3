/* test_back_balance.c — split from test_back_pool.c (same helpers, back_test_util.h). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include "back/back.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "back_test_util.h"

static void queue_full_503(void **state)
{
    (void)state;
    origin_t o;
    origin_start(&o, O_SILENT, 0);
    tcfg_t t;
    tcfg_init(&t, &o.port, NULL, 1);
    t.up.max_connections = 1;
    t.up.queue_size = 2;
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 4, .max_inflight = 4};
    gw_back_exch_t *x[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(request(&cl, &x[i]), 0);
    int rc = request(&cl, NULL);
    assert_int_equal(rc, GW_E_LIMIT);
    assert_int_equal(gw_back_status_for(rc), 503);
    gw_back_stats_t st;
    gw_back_stats(b, 0, &st);
    assert_int_equal(st.queued, 2);
    gw_back_cancel(x[1]); /* leaves the queue */
    gw_back_stats(b, 0, &st);
    assert_int_equal(st.queued, 1);
    assert_int_equal(request(&cl, &x[1]), 0);
    for (int i = 0; i < 3; i++)
        gw_back_cancel(x[i]);
    assert_int_equal(cl.errors, 0); /* cancel fires nothing */
    teardown_all(b, &o, 1);
}

static void queue_timeout_504(void **state)
{
    (void)state;
    origin_t o;
    origin_start(&o, O_SILENT, 0);
    tcfg_t t;
    tcfg_init(&t, &o.port, NULL, 1);
    t.up.max_connections = 1;
    t.up.queue_timeout_ms = 100;
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 2, .max_inflight = 2};
    gw_back_exch_t *x0, *x1;
    assert_int_equal(request(&cl, &x0), 0);
    assert_int_equal(request(&cl, &x1), 0);
    uint64_t t0 = gw_now_ms();
    cl.target = 1;
    assert_true(run_until(done_pred, &cl, 2000));
    uint64_t dt = gw_now_ms() - t0;
    assert_int_equal(cl.errors, 1);
    assert_int_equal(cl.last_error, GW_E_TIMEOUT);
    assert_int_equal(gw_back_status_for(cl.last_error), 504);
    assert_true(dt >= 90 && dt < 1500);
    gw_back_cancel(x0);
    teardown_all(b, &o, 1);
}

static void queue_order_urgency(void **state)
{
    (void)state;
    origin_t o;
    origin_start(&o, O_OK, 0);
    tcfg_t t;
    tcfg_init(&t, &o.port, NULL, 1);
    t.up.max_connections = 1;
    gw_back_t *b = mkback(&t);
    assert_int_equal(gw_back_set_queue_order(b, 0, gw_back_queue_urgency), 0);
    client_t cl[4];
    gw_back_exch_t *x;
    const uint8_t urg[4] = {3, 7, 0, 3};
    for (int i = 0; i < 4; i++) {
        cl[i] = (client_t){.back = b, .target = 1, .max_inflight = 1};
        gw_back_req_t r = {.method = GW_SLICE_LIT("GET"),
                           .target = GW_SLICE_LIT("/"),
                           .host = GW_SLICE_LIT("h"),
                           .urgency = urg[i]};
        assert_int_equal(gw_back_request(b, 0, &r, &ccbs, &cl[i], &x), 0);
    }
    /* cl[0] holds the only connection; the queue serves urgency 0, then 3 (FIFO), then 7. */
    int order[4], k = 0;
    uint64_t end = gw_now_ms() + 3000;
    int seen[4] = {0};
    while (k < 4 && gw_now_ms() < end) {
        uv_run(&loop, UV_RUN_ONCE);
        for (int i = 0; i < 4; i++)
            if (cl[i].completed && !seen[i]) {
                seen[i] = 1;
                order[k++] = i;
            }
    }
    assert_int_equal(k, 4);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 3);
    assert_int_equal(order[3], 1);
    teardown_all(b, &o, 1);
}

/* gw_back_set_urgency moves a waiting exchange: raised to urgency 0 it leaves the queue
 * first, lowered to 7 it goes behind everything; the one on the connection is unaffected. */
static void queue_reprioritize(void **state)
{
    (void)state;
    origin_t o;
    origin_start(&o, O_OK, 0);
    tcfg_t t;
    tcfg_init(&t, &o.port, NULL, 1);
    t.up.max_connections = 1;
    gw_back_t *b = mkback(&t);
    assert_int_equal(gw_back_set_queue_order(b, 0, gw_back_queue_urgency), 0);
    client_t cl[5];
    gw_back_exch_t *x[5];
    for (int i = 0; i < 5; i++) {
        cl[i] = (client_t){.back = b, .target = 1, .max_inflight = 1};
        gw_back_req_t r = {.method = GW_SLICE_LIT("GET"),
                           .target = GW_SLICE_LIT("/"),
                           .host = GW_SLICE_LIT("h"),
                           .urgency = 3};
        assert_int_equal(gw_back_request(b, 0, &r, &ccbs, &cl[i], &x[i]), 0);
    }
    /* cl[0] holds the connection; queue 1 2 3 4 at urgency 3 */
    gw_back_set_urgency(x[4], 0); /* to the front */
    gw_back_set_urgency(x[1], 7); /* to the back */
    gw_back_set_urgency(x[3], 3); /* unchanged: keeps its place */
    gw_back_set_urgency(x[0], 7); /* already started: no effect on order */
    int order[5], k = 0;
    uint64_t end = gw_now_ms() + 3000;
    int seen[5] = {0};
    while (k < 5 && gw_now_ms() < end) {
        uv_run(&loop, UV_RUN_ONCE);
        for (int i = 0; i < 5; i++)
            if (cl[i].completed && !seen[i]) {
                seen[i] = 1;
                order[k++] = i;
            }
    }
    assert_int_equal(k, 5);
    const int want[5] = {0, 4, 2, 3, 1};
    for (int i = 0; i < 5; i++)
        assert_int_equal(order[i], want[i]);
    gw_back_stats_t st;
    gw_back_stats(b, SIZE_MAX, &st);
    assert_int_equal(st.queued, 0);
    teardown_all(b, &o, 1);
}

static void ejection_and_return(void **state)
{
    (void)state;
    int port = closed_port();
    tcfg_t t;
    tcfg_init(&t, &port, NULL, 1);
    t.up.fail_threshold = 2;
    t.up.eject_ms = 200;
    t.up.retries = 0;
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 2, .max_inflight = 1};
    start_one(&cl);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.errors, 2);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 1);
    int rc = request(&cl, NULL);
    assert_int_equal(rc, GW_E_NOENT);
    assert_int_equal(gw_back_status_for(rc), 503); /* every server out: unavailable */
    /* The origin comes up on that port; after the back-off the server is used again. */
    origin_t o;
    origin_start(&o, O_OK, port);
    run_for(250);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
    cl.target = 3;
    start_one(&cl);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    gw_back_stats_t st;
    gw_back_stats(b, SIZE_MAX, &st);
    assert_int_equal(st.ejections, 1);
    teardown_all(b, &o, 1);
}

static void active_health_check_returns_server(void **state)
{
    (void)state;
    int port = closed_port();
    tcfg_t t;
    tcfg_init(&t, &port, NULL, 1);
    t.up.fail_threshold = 1;
    t.up.eject_ms = 60000; /* only the health check can bring it back */
    t.up.retries = 0;
    t.up.health_path = "/health";
    t.up.health_interval_ms = 50;
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    start_one(&cl);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 1);
    origin_t o;
    origin_start(&o, O_OK, port);
    run_for(300);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
    assert_true(o.requests >= 1);
    teardown_all(b, &o, 1);
}

static void all_ejected_fails_queued(void **state)
{
    (void)state;
    /* Every server ejected while exchanges wait: they fail with GW_E_NOENT, not at timeout. */
    int port = closed_port();
    tcfg_t t;
    tcfg_init(&t, &port, NULL, 1);
    t.up.fail_threshold = 1;
    t.up.retries = 0;
    t.up.max_connections = 1;
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 3, .max_inflight = 3};
    for (int i = 0; i < 3; i++)
        start_one(&cl);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.errors, 3);
    assert_int_equal(cl.noent, 2); /* the first one failed with GW_E_IO and ejected it */
    assert_int_equal(cl.last_error, GW_E_IO);
    teardown_all(b, NULL, 0);
}

static void round_robin_weights(void **state)
{
    (void)state;
    origin_t o[3];
    unsigned w[3] = {1, 2, 1};
    int ports[3];
    for (int i = 0; i < 3; i++) {
        origin_start(&o[i], O_OK, 0);
        ports[i] = o[i].port;
    }
    tcfg_t t;
    tcfg_init(&t, ports, w, 3);
    gw_back_t *b = mkback(&t);
    client_t cl = {.back = b, .target = 400, .max_inflight = 1};
    start_one(&cl);
    assert_true(run_until(done_pred, &cl, 5000));
    assert_int_equal(cl.completed, 400);
    assert_int_equal(o[0].requests, 100);
    assert_int_equal(o[1].requests, 200);
    assert_int_equal(o[2].requests, 100);
    for (int i = 0; i < 3; i++)
        assert_int_equal(o[i].accepted, 1);
    teardown_all(b, o, 3);
}

static void least_connections(void **state)
{
    (void)state;
    origin_t o[2];
    origin_start(&o[0], O_SILENT, 0);
    origin_start(&o[1], O_OK, 0);
    int ports[2] = {o[0].port, o[1].port};
    tcfg_t t;
    tcfg_init(&t, ports, NULL, 2);
    t.up.balance = GW_BALANCE_LEAST_CONN;
    gw_back_t *b = mkback(&t);
    client_t hold = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *held[2];
    /* Two held requests: least-conn spreads them one per server. */
    assert_int_equal(request(&hold, &held[0]), 0);
    assert_int_equal(request(&hold, &held[1]), 0);
    gw_back_stats_t s0, s1;
    gw_back_server_stats(b, 0, 0, &s0);
    gw_back_server_stats(b, 0, 1, &s1);
    assert_int_equal(s0.active, 1);
    assert_int_equal(s1.active, 1);
    /* o[1] finishes its request; from then on it always has fewer busy connections. */
    assert_true(run_until(done_pred, &hold, 3000));
    client_t cl = {.back = b, .target = 20, .max_inflight = 1};
    start_one(&cl);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 20);
    assert_int_equal(o[1].requests, 21);
    assert_int_equal(o[0].requests, 1);
    gw_back_cancel(held[0]);
    teardown_all(b, o, 2);
}

static void hash_sticky(void **state)
{
    (void)state;
    origin_t o[3];
    int ports[3];
    for (int i = 0; i < 3; i++) {
        origin_start(&o[i], O_OK, 0);
        ports[i] = o[i].port;
    }
    tcfg_t t;
    tcfg_init(&t, ports, NULL, 3);
    t.up.balance = GW_BALANCE_HASH_CLIENT;
    gw_back_t *b = mkback(&t);
    int used[3] = {0};
    for (int c = 0; c < 30; c++) {
        client_t cl = {.back = b, .target = 5, .max_inflight = 1, .use_client = 1};
        char ip[32];
        snprintf(ip, sizeof(ip), "10.0.%d.%d", c / 7, c * 13 % 250 + 1);
        uv_ip4_addr(ip, 1000 + c, &cl.client_addr);
        int before[3] = {o[0].requests, o[1].requests, o[2].requests};
        start_one(&cl);
        assert_true(run_until(done_pred, &cl, 3000));
        assert_int_equal(cl.completed, 5);
        int hit = 0;
        for (int i = 0; i < 3; i++) {
            int d = o[i].requests - before[i];
            assert_true(d == 0 || d == 5); /* all five on one server */
            if (d == 5) {
                hit++;
                used[i] = 1;
            }
        }
        assert_int_equal(hit, 1);
    }
    assert_true(used[0] + used[1] + used[2] >= 2); /* spread over servers */
    teardown_all(b, o, 3);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the gateway: a write to a closed origin is an EPIPE */
    memset(big_body, 'b', sizeof(big_body));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(queue_full_503, setup, teardown),
        cmocka_unit_test_setup_teardown(queue_timeout_504, setup, teardown),
        cmocka_unit_test_setup_teardown(queue_order_urgency, setup, teardown),
        cmocka_unit_test_setup_teardown(queue_reprioritize, setup, teardown),
        cmocka_unit_test_setup_teardown(ejection_and_return, setup, teardown),
        cmocka_unit_test_setup_teardown(active_health_check_returns_server, setup, teardown),
        cmocka_unit_test_setup_teardown(all_ejected_fails_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(round_robin_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(least_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(hash_sticky, setup, teardown),
    };
    if (getenv("GW_TEST_FILTER")) /* e.g. GW_TEST_FILTER='pipeline_issue19*' */
        cmocka_set_test_filter(getenv("GW_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
