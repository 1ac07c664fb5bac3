/* Unit tests of back/: the queue (bounds, timeouts, order by urgency), passive and active
 * health, and balancing over several origins. */
#include "back_test_util.h"

static void queue_full_503(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_SILENT);
    f->t.up.max_connections = 1;
    f->t.up.queue_size = 2;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 4, .max_inflight = 4};
    gw_back_exch_t *x[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(request(&cl, &x[i]), 0);
    int rc = request(&cl, NULL);
    assert_int_equal(rc, GW_E_LIMIT);
    assert_int_equal(gw_back_status_for(rc), 503);
    assert_int_equal(stats_of(b).queued, 2);
    gw_back_cancel(x[1]); /* leaves the queue */
    assert_int_equal(stats_of(b).queued, 1);
    assert_int_equal(request(&cl, &x[1]), 0);
    for (int i = 0; i < 3; i++)
        gw_back_cancel(x[i]);
    assert_int_equal(cl.errors, 0); /* cancel fires nothing */
}

static void queue_timeout_504(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_SILENT);
    f->t.up.max_connections = 1;
    f->t.up.queue_timeout_ms = 100;
    gw_back_t *b = fix_back(f);
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
}

/* A back over one origin with one connection, its queue ordered by urgency; one client and
 * one request per urgency of urg[0..n) (cl[0]'s takes the connection, the rest wait). */
static gw_back_t *urgency_queue(bfix_t *f, client_t *cl, gw_back_exch_t **x, const uint8_t *urg,
                                size_t n)
{
    fix_origin(f, O_OK);
    f->t.up.max_connections = 1;
    gw_back_t *b = fix_back(f);
    assert_int_equal(gw_back_set_queue_order(b, 0, gw_back_queue_urgency), 0);
    for (size_t i = 0; i < n; i++) {
        cl[i] = (client_t){.back = b, .target = 1, .started = 1, .inflight = 1, .max_inflight = 1};
        gw_back_req_t r = {.method = GW_SLICE_LIT("GET"),
                           .target = GW_SLICE_LIT("/"),
                           .host = GW_SLICE_LIT("h"),
                           .urgency = urg[i]};
        assert_int_equal(gw_back_request(b, 0, &r, &ccbs, &cl[i], &x[i]), 0);
    }
    return b;
}

/* Run the loop until each of cl[0..n) completed; the indexes of cl in the order they did
 * must be want[0..n). */
static void assert_completion_order(client_t *cl, const int *want, size_t n)
{
    int order[8], seen[8] = {0};
    size_t k = 0;
    uint64_t end = gw_now_ms() + 3000;
    assert_true(n <= 8);
    while (k < n && gw_now_ms() < end) {
        uv_run(&loop, UV_RUN_ONCE);
        for (size_t i = 0; i < n; i++)
            if (cl[i].completed && !seen[i]) {
                seen[i] = 1;
                order[k++] = (int)i;
            }
    }
    assert_int_equal(k, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(order[i], want[i]);
}

static void queue_order_urgency(void **state)
{
    bfix_t *f = *state;
    client_t cl[4];
    gw_back_exch_t *x[4];
    urgency_queue(f, cl, x, (const uint8_t[]){3, 7, 0, 3}, 4);
    /* cl[0] holds the only connection; the queue serves urgency 0, then 3 (FIFO), then 7. */
    assert_completion_order(cl, (const int[]){0, 2, 3, 1}, 4);
}

/* gw_back_set_urgency moves a waiting exchange: raised to urgency 0 it leaves the queue
 * first, lowered to 7 it goes behind everything; the one on the connection is unaffected. */
static void queue_reprioritize(void **state)
{
    bfix_t *f = *state;
    client_t cl[5];
    gw_back_exch_t *x[5];
    gw_back_t *b = urgency_queue(f, cl, x, (const uint8_t[]){3, 3, 3, 3, 3}, 5);
    /* cl[0] holds the connection; queue 1 2 3 4 at urgency 3 */
    gw_back_set_urgency(x[4], 0); /* to the front */
    gw_back_set_urgency(x[1], 7); /* to the back */
    gw_back_set_urgency(x[3], 3); /* unchanged: keeps its place */
    gw_back_set_urgency(x[0], 7); /* already started: no effect on order */
    assert_completion_order(cl, (const int[]){0, 4, 2, 3, 1}, 5);
    assert_int_equal(stats_of(b).queued, 0);
}

/* The one server on a port where nothing listens: ejected after fail_threshold failures, and
 * no retry elsewhere. */
static void dead_server(bfix_t *f, unsigned fail_threshold)
{
    fix_port(f, closed_port());
    f->t.up.fail_threshold = fail_threshold;
    f->t.up.retries = 0;
}

static void ejection_and_return(void **state)
{
    bfix_t *f = *state;
    dead_server(f, 2);
    f->t.up.eject_ms = 200;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 2, 1, 3000);
    assert_int_equal(cl->errors, 2);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 1);
    int rc = request(cl, NULL);
    assert_int_equal(rc, GW_E_NOENT);
    assert_int_equal(gw_back_status_for(rc), 503); /* every server out: unavailable */
    /* The origin comes up on that port; after the back-off the server is used again. */
    fix_origin_at_port(f, O_OK);
    run_for(250);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
    cl->target = 3;
    run_client(cl, 3000);
    assert_int_equal(cl->completed, 1);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.ejections, 1);
}

static void active_health_check_returns_server(void **state)
{
    bfix_t *f = *state;
    dead_server(f, 1);
    f->t.up.eject_ms = 60000; /* only the health check can bring it back */
    f->t.up.health_path = "/health";
    f->t.up.health_interval_ms = 50;
    gw_back_t *b = fix_back(f);
    fix_run(f, b, 1, 1, 3000);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 1);
    origin_t *o = fix_origin_at_port(f, O_OK);
    run_for(300);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
    assert_true(o->requests >= 1);
}

static void all_ejected_fails_queued(void **state)
{
    bfix_t *f = *state;
    /* Every server ejected while exchanges wait: they fail with GW_E_NOENT, not at timeout. */
    dead_server(f, 1);
    f->t.up.max_connections = 1;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 3, 3, 3000);
    assert_int_equal(cl->errors, 3);
    assert_int_equal(cl->noent, 2); /* the first one failed with GW_E_IO and ejected it */
    assert_int_equal(cl->last_error, GW_E_IO);
}

static void round_robin_weights(void **state)
{
    bfix_t *f = *state;
    fix_origins(f, (omode_t[]){O_OK, O_OK, O_OK}, (unsigned[]){1, 2, 1}, 3);
    origin_t *o = f->o;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 400, 1, 5000);
    assert_int_equal(cl->completed, 400);
    assert_int_equal(o[0].requests, 100);
    assert_int_equal(o[1].requests, 200);
    assert_int_equal(o[2].requests, 100);
    for (int i = 0; i < 3; i++)
        assert_int_equal(o[i].accepted, 1);
}

static void least_connections(void **state)
{
    bfix_t *f = *state;
    fix_origins(f, (omode_t[]){O_SILENT, O_OK}, NULL, 2);
    origin_t *o = f->o;
    f->t.up.balance = GW_BALANCE_LEAST_CONN;
    gw_back_t *b = fix_back(f);
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
    client_t *cl = fix_run(f, b, 20, 1, 3000);
    assert_int_equal(cl->completed, 20);
    assert_int_equal(o[1].requests, 21);
    assert_int_equal(o[0].requests, 1);
    gw_back_cancel(held[0]);
}

static void hash_sticky(void **state)
{
    bfix_t *f = *state;
    fix_origins(f, (omode_t[]){O_OK, O_OK, O_OK}, NULL, 3);
    origin_t *o = f->o;
    f->t.up.balance = GW_BALANCE_HASH_CLIENT;
    gw_back_t *b = fix_back(f);
    int used[3] = {0};
    for (int c = 0; c < 30; c++) {
        client_t cl = {.back = b, .target = 5, .max_inflight = 1, .use_client = 1};
        char ip[32];
        snprintf(ip, sizeof(ip), "10.0.%d.%d", c / 7, c * 13 % 250 + 1);
        uv_ip4_addr(ip, 1000 + c, &cl.client_addr);
        int before[3] = {o[0].requests, o[1].requests, o[2].requests};
        run_client(&cl, 3000);
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
}

static const struct CMUnitTest tests[] = {
    BACK_TEST(queue_full_503),           BACK_TEST(queue_timeout_504),
    BACK_TEST(queue_order_urgency),      BACK_TEST(queue_reprioritize),
    BACK_TEST(ejection_and_return),      BACK_TEST(active_health_check_returns_server),
    BACK_TEST(all_ejected_fails_queued), BACK_TEST(round_robin_weights),
    BACK_TEST(least_connections),        BACK_TEST(hash_sticky),
};

GW_TEST_MAIN_GROUP(tests, back_group_setup, NULL)
