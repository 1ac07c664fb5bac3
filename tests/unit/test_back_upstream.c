/* Unit tests of back/upstream.c: smooth weighted round-robin (nginx's known sequence),
 * least-connections with weights, the consistent-hash ring (spread, and how few clients move
 * when a server goes away), exclusion for retries, capacity and passive-health ejection.
 * Pure logic: the upstream is built by hand; `now` is passed in. */
#include "back/back_internal.h"
#include "back_test_util.h"

typedef struct {
    tcfg_t t; /* the config: servers 10.0.0.1:80, 10.0.0.2:80, ... (never dialled) */
    gw_back_server_t srv[GW_TEST_SERVERS];
    gw_back_upstream_t up;
    gw_back_t *back;
} fx_t;

static void fx_init(fx_t *f, size_t n, const unsigned *w, gw_balance_t bal)
{
    int ports[GW_TEST_SERVERS];
    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < n; i++)
        ports[i] = 80;
    tcfg_init(&f->t, ports, w, n);
    for (size_t i = 0; i < n; i++) {
        /* the consistent-hash ring is keyed by this text */
        snprintf(f->t.srv[i].addr.text, sizeof(f->t.srv[i].addr.text), "10.0.0.%zu:80", i + 1);
        f->srv[i].cfg = &f->t.srv[i];
        f->srv[i].up = &f->up;
        f->srv[i].index = i;
        gw_list_init(&f->srv[i].idle);
    }
    f->t.up.balance = bal;
    f->t.up.max_connections = 4;
    f->t.up.fail_threshold = 3;
    /* A real gw_back_t holds the counters gw_back__server_fail updates. */
    f->back = mkback(&f->t);
    f->up.back = f->back;
    f->up.cfg = &f->t.up;
    f->up.servers = f->srv;
    f->up.servers_len = n;
    gw_list_init(&f->up.queue);
    assert_int_equal(gw_back__ring_build(&f->up), 0);
}

static void fx_free(fx_t *f)
{
    gw_free(f->up.ring);
    teardown_all(f->back, NULL, 0);
}

static size_t pick(fx_t *f, const struct sockaddr *client, gw_back_server_t *ex, uint64_t now)
{
    int all = 0;
    gw_back_server_t *s = gw_back__pick(&f->up, client, ex, &all, now, 0);
    assert_non_null(s);
    assert_int_equal(all, 0);
    return s->index;
}

static void smooth_wrr_sequence(void **state)
{
    (void)state;
    fx_t f;
    unsigned w[3] = {5, 1, 1};
    fx_init(&f, 3, w, GW_BALANCE_ROUND_ROBIN);
    /* nginx's documented sequence for weights a=5 b=1 c=1: a a b a c a a */
    const size_t want[7] = {0, 0, 1, 0, 2, 0, 0};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 7; i++)
            assert_int_equal(pick(&f, NULL, NULL, 0), want[i]);
    fx_free(&f);
}

static void rr_skips_ejected_and_full(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 3, NULL, GW_BALANCE_ROUND_ROBIN);
    f.srv[1].ejected_until = 500;
    f.srv[2].open = 4; /* at max_connections, no idle */
    for (int i = 0; i < 10; i++)
        assert_int_equal(pick(&f, NULL, NULL, 100), 0);
    /* back-off over at t=500: server 1 returns with a fresh failure count */
    f.srv[1].fails = 3;
    int seen1 = 0;
    for (int i = 0; i < 10; i++)
        seen1 += pick(&f, NULL, NULL, 500) == 1;
    assert_int_equal(seen1, 5);
    assert_int_equal(f.srv[1].ejected_until, 0);
    assert_int_equal(f.srv[1].fails, 0);
    fx_free(&f);
}

static void all_full_or_all_ejected(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 2, NULL, GW_BALANCE_ROUND_ROBIN);
    int all = 0;
    f.srv[0].open = f.srv[1].open = 4;
    assert_null(gw_back__pick(&f.up, NULL, NULL, &all, 0, 0));
    assert_int_equal(all, 0); /* full: the caller queues */
    f.srv[0].ejected_until = f.srv[1].ejected_until = 100;
    assert_null(gw_back__pick(&f.up, NULL, NULL, &all, 0, 0));
    assert_int_equal(all, 1); /* ejected: the caller answers 502 */
    fx_free(&f);
}

static void exclude_for_retry(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 2, NULL, GW_BALANCE_ROUND_ROBIN);
    for (int i = 0; i < 6; i++)
        assert_int_equal(pick(&f, NULL, &f.srv[0], 0), 1);
    /* the other one full: the excluded server, on another connection, will do */
    f.srv[1].open = 4;
    assert_int_equal(pick(&f, NULL, &f.srv[0], 0), 0);
    /* the other one ejected: same */
    f.srv[1].open = 0;
    f.srv[1].ejected_until = 100;
    assert_int_equal(pick(&f, NULL, &f.srv[0], 0), 0);
    fx_free(&f);
}

static void least_conn_weighted(void **state)
{
    (void)state;
    fx_t f;
    unsigned w[3] = {1, 2, 1};
    fx_init(&f, 3, w, GW_BALANCE_LEAST_CONN);
    f.srv[0].busy = 1;
    f.srv[1].busy = 1; /* 1/2 < 1/1 */
    f.srv[2].busy = 1;
    for (int i = 0; i < 5; i++)
        assert_int_equal(pick(&f, NULL, NULL, 0), 1);
    f.srv[2].busy = 0;
    assert_int_equal(pick(&f, NULL, NULL, 0), 2);
    /* ties rotate */
    f.srv[0].busy = f.srv[1].busy = f.srv[2].busy = 0;
    int seen[3] = {0};
    for (int i = 0; i < 9; i++)
        seen[pick(&f, NULL, NULL, 0)]++;
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    fx_free(&f);
}

static void client_addr(struct sockaddr_in *a, unsigned i)
{
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(0xC0000000u + i * 7919u);
    a->sin_port = htons((uint16_t)(1024 + i));
}

/* The server picked at time now for client i (client_addr) with nothing excluded. */
static size_t pick_client(fx_t *f, unsigned i, uint64_t now)
{
    struct sockaddr_in a;
    client_addr(&a, i);
    return pick(f, (struct sockaddr *)&a, NULL, now);
}

static void hash_spread_and_minimal_move(void **state)
{
    (void)state;
    enum { N = 2000 };
    static size_t before[N];
    fx_t f;
    fx_init(&f, 5, NULL, GW_BALANCE_HASH_CLIENT);
    size_t count[5] = {0};
    for (unsigned i = 0; i < N; i++) {
        struct sockaddr_in a;
        client_addr(&a, i);
        before[i] = pick(&f, (struct sockaddr *)&a, NULL, 0);
        count[before[i]]++;
        /* sticky: the same client again (another port) lands on the same server */
        a.sin_port = htons(9);
        assert_int_equal(pick(&f, (struct sockaddr *)&a, NULL, 0), before[i]);
    }
    for (int s = 0; s < 5; s++)
        assert_true(count[s] > N / 5 / 2 && count[s] < N / 5 * 2);
    /* Remove server 4 (the config now lists 0..3): only its clients move. */
    f.up.servers_len = 4;
    f.t.up.servers_len = 4;
    assert_int_equal(gw_back__ring_build(&f.up), 0);
    size_t moved = 0;
    for (unsigned i = 0; i < N; i++) {
        size_t now = pick_client(&f, i, 0);
        if (now != before[i]) {
            assert_int_equal(before[i], 4);
            moved++;
        }
    }
    assert_int_equal(moved, count[4]);
    fx_free(&f);
}

static void hash_ejected_server_only_moves_its_clients(void **state)
{
    (void)state;
    enum { N = 500 };
    size_t before[N];
    fx_t f;
    fx_init(&f, 3, NULL, GW_BALANCE_HASH_CLIENT);
    for (unsigned i = 0; i < N; i++)
        before[i] = pick_client(&f, i, 0);
    f.srv[1].ejected_until = 1000;
    for (unsigned i = 0; i < N; i++) {
        size_t s = pick_client(&f, i, 10);
        assert_int_not_equal(s, 1);
        if (before[i] != 1)
            assert_int_equal(s, before[i]);
    }
    fx_free(&f);
}

static void hash_addr_ignores_port(void **state)
{
    (void)state;
    struct sockaddr_in a, b;
    client_addr(&a, 1);
    client_addr(&b, 1);
    b.sin_port = htons(5555);
    assert_int_equal(gw_back__hash_addr((struct sockaddr *)&a),
                     gw_back__hash_addr((struct sockaddr *)&b));
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr);
    struct sockaddr_in6 v6b = v6;
    v6b.sin6_addr.s6_addr[15] = 2;
    assert_int_not_equal(gw_back__hash_addr((struct sockaddr *)&v6),
                         gw_back__hash_addr((struct sockaddr *)&v6b));
    assert_int_equal(gw_back__hash_addr(NULL), gw_back__hash_addr(NULL));
}

static void passive_health_threshold(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 2, NULL, GW_BALANCE_ROUND_ROBIN);
    gw_log_set_level(GW_LOG_ERROR); /* the ejection's warning */
    gw_back_server_t *s = &f.srv[0];
    gw_back__server_fail(s, 10);
    gw_back__server_fail(s, 10);
    gw_back__server_ok(s); /* a success resets the run */
    gw_back__server_fail(s, 10);
    gw_back__server_fail(s, 10);
    assert_true(gw_back__server_healthy(s, 10));
    gw_back__server_fail(s, 10);
    assert_false(gw_back__server_healthy(s, 10));
    assert_int_equal(s->ejected_until, 1010);
    assert_false(gw_back__server_healthy(s, 1009));
    assert_true(gw_back__server_healthy(s, 1010));
    gw_back_stats_t st = stats_of(f.back);
    assert_int_equal(st.ejections, 1);
    assert_int_equal(st.failures, 5);
    fx_free(&f);
}

static void ring_alloc_failure(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 3, NULL, GW_BALANCE_HASH_CLIENT);
    gw_alloc_fail_after(1);
    assert_int_equal(gw_back__ring_build(&f.up), GW_E_NOMEM);
    gw_alloc_fail_after(0);
    assert_true(f.up.ring_len > 0); /* the old ring is kept */
    fx_free(&f);
}

static void back_new_alloc_sweep(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, 3, NULL, GW_BALANCE_HASH_CLIENT);
    for (unsigned long n = 1;; n++) {
        gw_back_t *b = NULL;
        gw_alloc_fail_after(n);
        int rc = gw_back_new(&loop, &f.t.cfg, &b);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rc, 0);
            gw_back_del(b);
            break;
        }
        assert_int_equal(rc, GW_E_NOMEM);
        assert_null(b);
        assert_true(n < 20);
    }
    fx_free(&f);
}

static const struct CMUnitTest tests[] = {
    BACK_TEST(smooth_wrr_sequence),
    BACK_TEST(rr_skips_ejected_and_full),
    BACK_TEST(all_full_or_all_ejected),
    BACK_TEST(exclude_for_retry),
    BACK_TEST(least_conn_weighted),
    BACK_TEST(hash_spread_and_minimal_move),
    BACK_TEST(hash_ejected_server_only_moves_its_clients),
    BACK_TEST(hash_addr_ignores_port),
    BACK_TEST(passive_health_threshold),
    BACK_TEST(ring_alloc_failure),
    BACK_TEST(back_new_alloc_sweep),
};

GW_TEST_MAIN_GROUP(tests, back_group_setup, NULL)
