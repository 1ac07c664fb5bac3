/* Unit tests of back/: reading responses (chunked bodies, trailers and interim answers, large
 * bodies, read batching), pausing and cancelling them, and origins that close. */
#include "back_test_util.h"

static void chunked_trailers_interim(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_CHUNKED);
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 3, 1, 3000);
    assert_int_equal(cl->completed, 3);
    assert_int_equal(cl->interim, 3);
    assert_int_equal(cl->trailers, 3);
    assert_int_equal(cl->body_len, 33);
    assert_memory_equal(cl->body, "hello worldhello worldhello world", 33);
    assert_int_equal(o->accepted, 1);
}

static void cancel_mid_body_closes(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_BIG);
    gw_back_t *b = fix_back(f);
    f->cl = (client_t){.back = b, .target = 1, .max_inflight = 1, .cancel_on_body = 1};
    client_t *cl = &f->cl;
    run_client(cl, 3000);
    assert_int_equal(cl->completed, 0);
    expect_stats(b, "open=0 idle=0");
    cl->cancel_on_body = 0;
    cl->body_bytes = 0;
    cl->target = 2;
    run_client(cl, 5000);
    assert_int_equal(cl->completed, 1);
    assert_int_equal(cl->body_bytes, 1 << 20);
    assert_int_equal(o->accepted, 2); /* the cancelled connection was not reused */
}

/* A response body larger than the read buffer is read in GW_BACK_READ_BUF_MAX pieces once a
 * read has filled the first buffer; the connection goes back to the pool with a small buffer
 * again (the next response starts with GW_BACK_READ_BUF). */
static void large_body_reads_grow(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_BIG);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    run_client(&cl, 5000);
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.body_bytes, 1 << 20);
    assert_true(cl.first_chunk <= GW_BACK_READ_BUF);
    assert_true(cl.max_chunk > GW_BACK_READ_BUF);
    assert_true(cl.max_chunk <= GW_BACK_READ_BUF_MAX);
    cl.target = 2;
    cl.body_bytes = cl.max_chunk = cl.first_chunk = 0;
    run_client(&cl, 5000);
    assert_int_equal(cl.completed, 2);
    assert_int_equal(o->accepted, 1); /* reused */
    assert_true(cl.first_chunk <= GW_BACK_READ_BUF);
    assert_int_equal(cl.body_bytes, 1 << 20);
}

/* Read batching: a body that trickles in 4 KiB pieces (one a millisecond) is read in a few
 * large reads once it is all there, not one read per piece. */
static int drip_run(bfix_t *f, const char *what, unsigned read_batch, unsigned wait_ms, size_t len,
                    unsigned every_ms, gw_back_stats_t *st)
{
    origin_t *o = fix_origin(f, O_DRIP);
    o->drip_len = len;
    o->drip_ms = every_ms;
    f->t.up.read_batch = read_batch;
    f->t.up.read_batch_wait_ms = wait_ms;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    run_client(&cl, 10000);
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.body_bytes, len);
    *st = stats_of(b);
    fix_end(f);
    if (getenv("GW_TEST_DEBUG"))
        fprintf(stderr, "%s: %d reads\n", what, cl.body_calls);
    return cl.body_calls;
}

static void read_batch_takes_a_trickle_in_few_reads(void **state)
{
    gw_back_stats_t st;
    /* read_batch_wait far above the 64 ms the body takes: the batch is never cut short. */
    int calls = drip_run(*state, "batched", 256u << 10, 5000, 256u << 10, 1, &st);
    assert_true(calls <= 12); /* the head's read, then the rest once it is all queued */
    assert_int_equal(st.batch_expired, 0);
    /* read_batch: 0 turns it off: each piece is a read of its own. */
    calls = drip_run(*state, "unbatched", 0, 5000, 256u << 10, 1, &st);
    assert_true(calls >= 32);
    assert_int_equal(st.batch_expired, 0);
}

/* A slow origin (a 4 KiB piece every 20 ms) is not held back for the batch: after
 * read_batch_wait without a read the connection reads every piece as it comes. */
static void read_batch_lets_a_slow_origin_stream(void **state)
{
    gw_back_stats_t st;
    int calls = drip_run(*state, "slow", 256u << 10, 10, 64u << 10, 20, &st);
    assert_true(calls >= 12); /* 16 pieces; held back they would come in one read */
    assert_int_equal(st.batch_expired, 1);
}

/* An O_BIG origin (1 MiB bodies) and a back whose body-read timeout (100 ms) must not fire
 * while the exchange is paused. */
static gw_back_t *big_paused_setup(bfix_t *f)
{
    fix_origin(f, O_BIG);
    f->t.up.read_timeout_ms = 100;
    return fix_back(f);
}

/* A response paused by its consumer in the middle of a batched body (the socket keeps its
 * low-water mark while nobody reads) completes once resumed, whole. */
static void read_batch_pause_mid_body(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = big_paused_setup(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1, .pause_on_body = 1};
    start_one(&cl);
    uint64_t end = gw_now_ms() + 3000;
    while (!cl.paused_x && gw_now_ms() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_non_null(cl.paused_x);
    run_for(200);
    assert_int_equal(cl.errors, 0);
    assert_true(cl.body_bytes < 1 << 20);
    gw_back_resume_reading(cl.paused_x);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.body_bytes, 1 << 20);
}

typedef struct {
    client_t *cl;
    gw_back_exch_t *x;
    int paused_seen;
} pctx_t;

static void pause_resume_backpressure(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = big_paused_setup(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *x;
    assert_int_equal(request(&cl, &x), 0);
    if (getenv("GW_TEST_DEBUG"))
        fprintf(stderr, "start at %llu loop %llu\n", (unsigned long long)gw_now_ms(),
                (unsigned long long)uv_now(&loop));
    gw_back_pause_reading(x);
    run_for(300);
    assert_int_equal(cl.last_error, 0);
    assert_int_equal(cl.errors, 0);
    assert_int_equal(cl.body_bytes, 0);
    gw_back_resume_reading(x);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.body_bytes, 1 << 20);
}

static void idle_close_by_origin_detected(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_LATE_CLOSE);
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 1);
    run_for(150); /* the origin closes the idle connection after 30 ms */
    st = stats_of(b);
    assert_int_equal(st.idle, 0);
    assert_int_equal(st.open, 0);
    cl->target = 2;
    run_client(cl, 3000);
    expect_done(cl, 2, 0);
    st = stats_of(b);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.reused, 0);
    assert_int_equal(o->accepted, 2);
}

static void origin_closing_every_connection_never_fails(void **state)
{
    bfix_t *f = *state;
    /* Each response is followed by a close the origin did not announce. The next request,
     * started from on_complete, either sees the close first (read or peek on reuse) or races
     * it and is retried: no request may fail, and the race is not counted against the server. */
    origin_t *o = fix_origin(f, O_CLOSE_NOW);
    f->t.up.fail_threshold = 1;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 50, 1, 5000);
    expect_done(cl, 50, 0);
    assert_int_equal(o->requests, 50);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
}

/* A parked (idle) origin connection keeps no read buffer: the next read of any connection
 * takes the block freed last, still in the cache, and an idle connection costs 16 KiB less.
 * Counted from before the connection opens to after it is parked again: the connection's
 * own state without a GW_BACK_READ_BUF buffer, and a second answer on it still reads whole. */
static void idle_connection_keeps_no_read_buffer(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_OK);
    gw_back_t *b = fix_back(f);
    gw_alloc_count_start();
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    expect_done(cl, 1, 0);
    long long live = gw_alloc_count_live();
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 1);
    print_message("an idle origin connection holds %lld bytes\n", live);
    assert_true(live < GW_BACK_READ_BUF);
    cl->target = 2;
    run_client(cl, 3000);
    expect_done(cl, 2, 0);
    assert_int_equal(cl->body_len, 10);
    assert_memory_equal(cl->body, "hellohello", 10);
    assert_true(gw_alloc_count_live() < GW_BACK_READ_BUF);
    gw_alloc_count_stop();
    assert_int_equal(stats_of(b).reused, 1);
}

static const struct CMUnitTest tests[] = {
    BACK_TEST(chunked_trailers_interim),
    BACK_TEST(cancel_mid_body_closes),
    BACK_TEST(large_body_reads_grow),
    BACK_TEST(pause_resume_backpressure),
    BACK_TEST(idle_close_by_origin_detected),
    BACK_TEST(idle_connection_keeps_no_read_buffer),
    BACK_TEST(origin_closing_every_connection_never_fails),
    BACK_TEST(read_batch_takes_a_trickle_in_few_reads),
    BACK_TEST(read_batch_lets_a_slow_origin_stream),
    BACK_TEST(read_batch_pause_mid_body),
};

GW_TEST_MAIN_GROUP(tests, back_group_setup, NULL)
