/* Unit tests of back/: pools, queue, timeouts, retries, health and balancing over a real libuv
 * loop, against in-process origins (uv TCP servers on 127.0.0.1 in the same loop) that count
 * the connections they accept and misbehave on command. Every test runs under a deadline. */
#include "back_test_util.h"

static void reuse_sequential_1000(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1000, 1, 10000);
    expect_done(cl, 1000, 0);
    assert_int_equal(o->accepted, 1);
    assert_int_equal(o->requests, 1000);
    expect_stats(b, "opened=1 reused=999 idle=1 requests=1000");
}

static void reuse_concurrent_100_over_8(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1000, .max_inflight = 100};
    while (cl.started < 100)
        start_one(&cl);
    expect_stats(b, "open=8 queued=92");
    run_client(&cl, 10000);
    expect_done(&cl, 1000, 0);
    assert_true(o->accepted <= 8);
    assert_int_equal(o->requests, 1000);
}

static int idle_pred(void *a)
{
    void **v = a;
    return stats_of(v[0]).idle == *(unsigned *)v[1];
}

/* Connections above max_idle are not closed on the turn they become idle;
 * the purge closes half of the excess per idle_purge period (at least one), least recently
 * used first; idle_timeout then closes the rest. */
static void max_idle_and_idle_timeout(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    f->t.up.max_connections = 4;
    f->t.up.max_idle = 2;
    f->t.up.idle_purge_ms = 60;
    /* the check that the purge stopped comes about 280 ms before the idle timeout: scaled under
     * a sanitizer, whose loaded process can stall that long */
    f->t.up.idle_timeout_ms = 600 * GW_TEST_SLOW;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 4, .max_inflight = 4};
    uint64_t t0 = gw_now_ms();
    run_client(&cl, 3000);
    assert_int_equal(cl.completed, 4);
    assert_int_equal(o->accepted, 4);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 4); /* all four parked: none closed as it became idle */
    assert_int_equal(st.closed, 0);
    unsigned three = 3, two = 2, zero = 0;
    void *a3[2] = {b, &three}, *a2[2] = {b, &two}, *a0[2] = {b, &zero};
    assert_true(run_until(idle_pred, a3, 2000)); /* first period: half of 2 */
    uint64_t t3 = gw_now_ms();
    assert_true(t3 - t0 >= 55);
    assert_true(run_until(idle_pred, a2, 2000)); /* second period: half of 1, rounded up */
    assert_true(gw_now_ms() - t3 >= 40);
    st = stats_of(b);
    assert_int_equal(st.purged, 2);
    assert_int_equal(st.closed, 2);
    run_for(200); /* max_idle kept: no more purging */
    st = stats_of(b);
    assert_int_equal(st.idle, 2);
    assert_true(run_until(idle_pred, a0, 2000 * GW_TEST_SLOW)); /* idle_timeout */
    assert_true(gw_now_ms() - t0 >= 590 * GW_TEST_SLOW);
    st = stats_of(b);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, 4);
    assert_int_equal(st.purged, 2);
}

/* A burst, a dip to one request at a time, and a burst again within
 * idle_purge open no new connection (before: the dip closed all but max_idle, and the second
 * burst dialled them again). With pipelining a burst twice the pool's size: the pool grows to
 * its cap in the first burst and never again. */
static void burst_dip_burst(bfix_t *f, unsigned pipeline, int inflight)
{
    origin_t *o = fix_origin(f, O_OK);
    f->t.up.max_connections = 8;
    f->t.up.max_idle = 1;
    f->t.up.pipeline = pipeline;
    gw_back_t *b = fix_back(f);
    int after_first = 0;
    for (int round = 0; round < 3; round++) {
        client_t burst = {.back = b, .target = 64 * inflight / 8, .max_inflight = inflight};
        run_client(&burst, 5000);
        assert_int_equal(burst.errors, 0);
        if (round == 0)
            after_first = o->accepted;
        client_t dip = {.back = b, .target = 20, .max_inflight = 1};
        run_client(&dip, 5000);
        assert_int_equal(dip.errors, 0);
    }
    assert_true(after_first <= 8);
    assert_int_equal(o->accepted, after_first);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.opened, (uint64_t)after_first);
    assert_int_equal(st.closed, 0);
    assert_int_equal(st.active, 0);
    if (pipeline > 1)
        assert_true(st.pipelined > 0);
    else
        assert_int_equal(after_first, 8);
}

static void burst_dip_burst_opens_nothing(void **state)
{
    burst_dip_burst(*state, 1, 8);
}

static void burst_dip_burst_pipelined_opens_nothing(void **state)
{
    burst_dip_burst(*state, 8, 16);
}

/* The idle timeout counts from the last use: a connection reused before its idle deadline and
 * returned again lives idle_timeout past its latest return (the timer armed for the first
 * return fires in between and must not close it, nor time out the exchange on it). */
static void idle_timeout_restarts_on_reuse(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    /* 100 ms (x GW_TEST_SLOW) between the check and the second deadline: a stall longer than
     * that ran both timers in one loop turn (1 run in 100 of the ASan build on a loaded
     * machine) */
    f->t.up.idle_timeout_ms = 300 * GW_TEST_SLOW;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    run_for(200 * GW_TEST_SLOW); /* 2/3 of the idle timeout */
    cl->target = 2;
    run_client(cl, 3000);
    run_for(200 * GW_TEST_SLOW); /* past the first return's deadline, within the second's */
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 1);
    cl->target = 3;
    run_client(cl, 3000);
    expect_done(cl, 3, 0);
    assert_int_equal(o->accepted, 1); /* all three on the first connection */
    unsigned zero = 0;
    void *arg[2] = {b, &zero};
    uint64_t t0 = gw_now_ms();
    /* and it does close once idle long enough */
    assert_true(run_until(idle_pred, arg, 2000 * GW_TEST_SLOW));
    assert_true(gw_now_ms() - t0 >= 250 * GW_TEST_SLOW);
}

static void max_requests_per_connection(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    f->t.up.max_requests_per_connection = 3;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 10, .max_inflight = 1};
    run_client(&cl, 3000);
    assert_int_equal(cl.completed, 10);
    assert_int_equal(o->accepted, 4); /* 3 + 3 + 3 + 1 */
}

static void retire_mode(bfix_t *f, omode_t mode)
{
    origin_t *o = fix_origin(f, mode);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 5, .max_inflight = 1};
    run_client(&cl, 3000);
    expect_done(&cl, 5, 0);
    assert_int_equal(cl.last_status, 200);
    assert_int_equal(o->accepted, 5);
    expect_stats(b, "reused=0 idle=0");
}

static void connection_close_retires(void **state)
{
    retire_mode(*state, O_CLOSE);
}

static void http10_retires(void **state)
{
    retire_mode(*state, O_HTTP10);
}

static void connect_timeout_504(void **state)
{
    bfix_t *f = *state;
    /* A listener with backlog 0 that never accepts: once its queue is full the kernel drops
     * further SYNs, so a connect hangs until our timeout. */
    int lfd = listen_fd(0, f);
    int fill[4];
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&f->t.srv[0].addr.ss, f->t.srv[0].addr.len);
    }
    usleep(50000);
    /* t0 before the loop's clock is read: timers count from the cached loop time, and a
     * thread preempted between the two readings (a loaded machine, 1 run in 15 under ASan)
     * measured the timeout from a t0 later than the timer's start */
    uint64_t t0 = gw_now_ms();
    uv_update_time(&loop);
    f->t.up.connect_timeout_ms = 150;
    f->t.up.retries = 0;
    client_t cl = {.back = fix_back(f), .target = 1, .max_inflight = 1};
    run_client(&cl, 3000);
    assert_int_equal(cl.errors, 1);
    assert_int_equal(cl.last_error, GW_E_TIMEOUT);
    assert_true(gw_now_ms() - t0 >= 140);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
}

static void response_timeout_504_not_retried(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_SILENT);
    f->t.up.response_timeout_ms = 100;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    assert_int_equal(cl->last_error, GW_E_TIMEOUT);
    assert_int_equal(o->accepted, 1);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.open, 0); /* the timed-out connection is closed, not pooled */
}

static void body_timeout_504(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_STALL_BODY);
    f->t.up.read_timeout_ms = 100;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    assert_int_equal(cl->last_status, 200);
    assert_int_equal(cl->body_bytes, 5);
    assert_int_equal(cl->errors, 1);
    assert_int_equal(cl->last_error, GW_E_TIMEOUT);
}

static void refused_502_retried_once(void **state)
{
    bfix_t *f = *state;
    fix_port(f, closed_port());
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    assert_int_equal(cl->last_error, GW_E_IO);
    assert_int_equal(gw_back_status_for(cl->last_error), 502);
    expect_stats(b, "retries=1 opened=2");
}

static void retry_get_after_silent_close(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_DROP_FIRST);
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 1, 1, 3000);
    assert_int_equal(cl->completed, 1);
    assert_int_equal(cl->last_status, 200);
    assert_int_equal(o->accepted, 2);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.retries, 1);
}

static void retry_goes_to_other_server(void **state)
{
    bfix_t *f = *state;
    fix_origins(f, (omode_t[]){O_DROP_ALL, O_OK}, NULL, 2);
    client_t cl = {.back = fix_back(f), .target = 4, .max_inflight = 1};
    run_client(&cl, 3000);
    expect_done(&cl, 4, 0);
    assert_int_equal(f->o[0].dropped, 2); /* round-robin sent two there; both retried on o[1] */
    assert_int_equal(f->o[1].requests, 4);
}

typedef struct {
    int calls, status;
} wctx_t;

static void on_written(void *ud, int status)
{
    wctx_t *w = ud;
    w->calls++;
    w->status = status;
}

static void no_retry_post_with_streamed_body(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_DROP_FIRST);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *x = upload(&cl, "PUT", "/up", -1); /* idempotent, but its body went out */
    gw_rbuf_t *rb = rbuf_of("0123456789");
    wctx_t w = {0};
    assert_int_equal(gw_back_write_body(x, rb, 0, 10, on_written, &w), 0);
    gw_rbuf_unref(rb); /* the back holds its own reference */
    assert_int_equal(gw_back_end_body(x, NULL, 0), 0);
    assert_int_equal(gw_back_write_body(x, rb, 0, 1, on_written, &w), GW_E_INVAL);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.status, 0);
    assert_int_equal(cl.errors, 1);
    assert_int_equal(cl.last_error, GW_E_IO);
    assert_int_equal(o->accepted, 1);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.retries, 0);
}

static void no_retry_non_idempotent(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_DROP_FIRST);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1, .method = "POST", .idempotent = 0};
    run_client(&cl, 3000);
    assert_int_equal(cl.last_error, GW_E_IO);
    assert_int_equal(o->accepted, 1);
}

static void post_content_length_body(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *x = upload(&cl, "POST", "/up", 6);
    gw_rbuf_t *rb = rbuf_of("abcdef");
    wctx_t w = {0};
    assert_int_equal(gw_back_end_body(x, NULL, 0), GW_E_INVAL); /* 0 of 6 bytes */
    assert_int_equal(gw_back_write_body(x, rb, 0, 7, on_written, &w), GW_E_INVAL);
    assert_int_equal(gw_back_write_body(x, rb, 0, 3, on_written, &w), 0);
    assert_int_equal(gw_back_write_body(x, rb, 3, 3, on_written, &w), 0);
    gw_rbuf_unref(rb);
    assert_int_equal(gw_back_end_body(x, NULL, 0), 0);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    assert_int_equal(w.calls, 2);
    assert_int_equal(o->requests, 1);
    /* the connection went back to the pool: the request was complete */
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 1);
}

/* ---- a body written in libuv's prepare phase, answered before its write reports ----------- */

/* Read from fd until `want` is in the bytes read (or 2 s pass); returns the bytes read. */
static size_t recv_until(int fd, char *buf, size_t cap, const char *want)
{
    size_t len = 0;
    uint64_t end = gw_now_ms() + 2000;
    buf[0] = 0;
    while (!strstr(buf, want) && len + 1 < cap && gw_now_ms() < end) {
        ssize_t n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT);
        if (n > 0) {
            len += (size_t)n;
            buf[len] = 0;
        } else {
            usleep(1000);
        }
    }
    return len;
}

typedef struct {
    gw_back_exch_t *x;
    gw_rbuf_t *rb;
    wctx_t w;
} late_body_t;

static void write_body_in_prepare(uv_prepare_t *h)
{
    late_body_t *lb = h->data;
    assert_int_equal(gw_back_write_body(lb->x, lb->rb, 0, 5, on_written, &lb->w), 0);
    assert_int_equal(gw_back_end_body(lb->x, NULL, 0), 0);
    uv_prepare_stop(h);
}

/* proxy/upload.c hands gathered body pieces to the back from a prepare callback. A uv_write
 * the kernel takes whole there reports only after the next poll, and a fast origin's answer
 * can come in that poll: the request was sent whole, so its connection goes back to the pool
 * (it was closed, and a busy gateway opened origin connections past its pool's size). */
static void body_written_in_prepare_phase_keeps_connection(void **state)
{
    bfix_t *f = *state;
    int lfd = listen_fd(4, f);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    late_body_t lb = {.x = upload(&cl, "POST", "/up", 5)};
    run_for(30); /* connected, the head written */
    int ofd = accept(lfd, NULL, NULL);
    assert_true(ofd >= 0);
    char buf[4096];
    recv_until(ofd, buf, sizeof(buf), "\r\n\r\n");
    assert_non_null(strstr(buf, "POST /up HTTP/1.1\r\n"));
    /* The origin answers at once (loopback: the bytes are in the gateway's socket now). */
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_int_equal(send(ofd, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
    lb.rb = rbuf_of("abcde");
    uv_prepare_t prep;
    uv_prepare_init(&loop, &prep);
    prep.data = &lb;
    uv_prepare_start(&prep, write_body_in_prepare);
    /* One turn: the prepare callback writes the body (the kernel takes it whole, libuv reports
     * it in the next turn), then the poll reads the answer. */
    uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.last_status, 200);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.idle, 1);
    assert_int_equal(st.closed, 0);
    assert_int_equal(lb.w.calls, 1); /* its write mark fired when the exchange completed */
    recv_until(ofd, buf, sizeof(buf), "abcde");
    assert_string_equal(buf, "abcde");
    /* The next request goes out on the same connection, and its answer comes back. */
    cl.target = 2;
    start_one(&cl);
    run_for(30);
    recv_until(ofd, buf, sizeof(buf), "\r\n\r\n");
    assert_non_null(strstr(buf, "GET "));
    assert_int_equal(send(ofd, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
    assert_true(run_until(done_pred, &cl, 3000));
    expect_done(&cl, 2, 0);
    st = stats_of(b);
    assert_int_equal(st.opened, 1);
    assert_int_equal(st.reused, 1);
    gw_rbuf_unref(lb.rb);
    uv_close((uv_handle_t *)&prep, NULL);
    close(ofd);
    close(lfd);
}

/* While the origin holds every byte the client sent and waits for the rest
 * of the body, the response timer does not run: a slow (or stalled) client is not a failing
 * server. The response timeout starts once the request was sent whole. */
static void response_timer_waits_for_the_whole_request(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_OK);
    f->t.up.response_timeout_ms = 80;
    f->t.up.fail_threshold = 1;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *x = upload(&cl, "POST", "/up", 6);
    gw_rbuf_t *rb = rbuf_of("abcdef");
    wctx_t w = {0};
    assert_int_equal(gw_back_write_body(x, rb, 0, 3, on_written, &w), 0);
    run_for(300); /* almost four response timeouts with half a body */
    assert_int_equal(cl.errors, 0);
    assert_int_equal(cl.completed, 0);
    assert_int_equal(gw_back_write_body(x, rb, 3, 3, on_written, &w), 0);
    gw_rbuf_unref(rb);
    assert_int_equal(gw_back_end_body(x, NULL, 0), 0);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.last_status, 200);
    expect_stats(b, "failures=0 ejections=0");
}

static void early_response_not_reused(void **state)
{
    bfix_t *f = *state;
    /* RFC 9112 §9.3: an origin that answers before the request body is complete gets
     * its response relayed; the connection is not reused (the rest of the body is owed). */
    fix_origin(f, O_EARLY);
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    gw_back_exch_t *x = upload(&cl, "POST", "/up", 1000);
    gw_rbuf_t *rb = rbuf_of("0123456789");
    wctx_t w = {0};
    assert_int_equal(gw_back_write_body(x, rb, 0, 10, on_written, &w), 0);
    assert_int_equal(gw_back_write_body(x, rb, 0, 0, on_written, &w), GW_E_INVAL);
    gw_rbuf_unref(rb);
    assert_true(run_until(done_pred, &cl, 3000));
    assert_int_equal(cl.completed, 1);
    assert_int_equal(cl.last_status, 413);
    assert_int_equal(w.calls, 1);
    expect_stats(b, "idle=0 open=0");
}

static void bad_request_fields(void **state)
{
    bfix_t *f = *state;
    fix_port(f, closed_port());
    gw_back_t *b = fix_back(f);
    gw_back_field_t fields[] = {{GW_SLICE_LIT("X-A"), GW_SLICE_LIT("a\r\nX-Smuggle: 1")}};
    gw_back_req_t r = {.method = GW_SLICE_LIT("GET"),
                       .target = GW_SLICE_LIT("/"),
                       .host = GW_SLICE_LIT("h"),
                       .fields = fields,
                       .fields_len = 1};
    gw_back_exch_t *x;
    assert_int_equal(gw_back_request(b, 0, &r, &ccbs, NULL, &x), GW_E_INVAL);
    assert_null(x);
    assert_int_equal(gw_back_request(b, 7, &r, &ccbs, NULL, &x), GW_E_RANGE);
}

/* A TLS upstream whose CA file cannot be read is refused at creation (logged), not at the
 * first request. */
static void tls_upstream_bad_ca(void **state)
{
    bfix_t *f = *state;
    fix_port(f, 443);
    f->t.up.tls = 1;
    f->t.up.tls_verify = 1;
    f->t.up.tls_ca = "/nonexistent/ca.pem";
    gw_back_t *b = (gw_back_t *)&f;
    assert_int_equal(gw_back_new(&loop, &f->t.cfg, &b), GW_E_INVAL);
    assert_null(b);
    /* without verification the CA file is not used: the back starts */
    f->t.up.tls_verify = 0;
    fix_back(f);
}

/* The TLS handshake runs under connect_timeout: an origin that accepts and never answers the
 * ClientHello is a connect timeout (504), counted by passive health, and no request is sent. */
static void tls_handshake_bounded_by_connect_timeout(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_SILENT);
    f->t.up.tls = 1;
    f->t.up.tls_verify = 0;
    f->t.up.connect_timeout_ms = 100;
    f->t.up.response_timeout_ms = 5000;
    f->t.up.retries = 0;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 1, .max_inflight = 1};
    uint64_t t0 = gw_now_ms();
    run_client(&cl, 3000);
    assert_int_equal(cl.errors, 1);
    assert_int_equal(cl.last_error, GW_E_TIMEOUT);
    assert_true(gw_now_ms() - t0 < 1000);
    assert_int_equal(o->accepted, 1);
    assert_int_equal(o->requests, 0); /* the ClientHello is not an HTTP request */
    expect_stats(b, "failures=1 open=0");
}

static void del_fails_live_exchanges(void **state)
{
    bfix_t *f = *state;
    fix_origin(f, O_SILENT);
    f->t.up.max_connections = 1;
    gw_back_t *b = fix_back(f);
    client_t cl = {.back = b, .target = 3, .max_inflight = 3};
    for (int i = 0; i < 3; i++)
        start_one(&cl);
    run_for(50);
    gw_back_del(b);
    f->b = NULL;
    assert_int_equal(cl.errors, 3);
    assert_int_equal(cl.last_error, GW_E_CLOSED);
}

static void server_by_name_resolved(void **state)
{
    bfix_t *f = *state;
    origin_t *o = fix_origin(f, O_OK);
    /* As the loader leaves a NAME:PORT server: no parsed address, text and host kept. A
     * numeric name resolves without DNS. */
    memset(&f->t.srv[0].addr.ss, 0, sizeof(f->t.srv[0].addr.ss));
    f->t.srv[0].addr.len = 0;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 3, 1, 3000);
    assert_int_equal(cl->completed, 3);
    assert_int_equal(o->accepted, 1);
    /* A name that does not resolve: 502; and a cancel while resolving leaks nothing. */
    snprintf(f->t.host[0], sizeof(f->t.host[0]), "no-such-host.invalid");
    snprintf(f->t.srv[0].addr.text, sizeof(f->t.srv[0].addr.text), "no-such-host.invalid:80");
    gw_back_del(b);
    uv_run(&loop, UV_RUN_NOWAIT);
    cl->back = fix_back(f);
    gw_back_exch_t *x;
    assert_int_equal(request(cl, &x), 0);
    gw_back_cancel(x);
    cl->target = 4; /* the cancelled one started, and ends without a callback */
    cl->inflight = 0;
    start_one(cl);
    assert_true(run_until(done_pred, cl, 5000));
    assert_int_equal(cl->errors, 1);
    assert_int_equal(cl->last_error, GW_E_IO);
}

static void alloc_failure_sweep(void **state)
{
    bfix_t *f = *state;
    /* Fail the n-th allocation of ours (n = 1, 2, ...) during a whole exchange: it fails
     * cleanly (synchronously with GW_E_NOMEM, or through on_error) or succeeds; never a leak
     * (ASan) nor a hang. */
    fix_origin(f, O_CHUNKED);
    gw_back_t *b = fix_back(f);
    for (unsigned long n = 1;; n++) {
        assert_true(n < 100);
        client_t cl = {.back = b, .target = 1, .max_inflight = 1};
        gw_alloc_fail_after(n);
        int rc = request(&cl, NULL);
        if (rc == 0)
            assert_true(run_until(done_pred, &cl, 3000));
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (rc < 0) {
            assert_int_equal(rc, GW_E_NOMEM);
            assert_true(hit);
            continue;
        }
        assert_int_equal(cl.completed + cl.errors, 1);
        if (cl.errors)
            assert_true(cl.last_error == GW_E_NOMEM || cl.last_error == GW_E_IO ||
                        cl.last_error == GW_E_PARSE);
        if (!hit) {
            assert_int_equal(cl.completed, 1);
            break;
        }
    }
}

static const struct CMUnitTest tests[] = {
    BACK_TEST(reuse_sequential_1000),
    BACK_TEST(reuse_concurrent_100_over_8),
    BACK_TEST(max_idle_and_idle_timeout),
    BACK_TEST(response_timer_waits_for_the_whole_request),
    BACK_TEST(burst_dip_burst_opens_nothing),
    BACK_TEST(burst_dip_burst_pipelined_opens_nothing),
    BACK_TEST(idle_timeout_restarts_on_reuse),
    BACK_TEST(max_requests_per_connection),
    BACK_TEST(connection_close_retires),
    BACK_TEST(http10_retires),
    BACK_TEST(connect_timeout_504),
    BACK_TEST(response_timeout_504_not_retried),
    BACK_TEST(body_timeout_504),
    BACK_TEST(refused_502_retried_once),
    BACK_TEST(retry_get_after_silent_close),
    BACK_TEST(retry_goes_to_other_server),
    BACK_TEST(no_retry_post_with_streamed_body),
    BACK_TEST(no_retry_non_idempotent),
    BACK_TEST(post_content_length_body),
    BACK_TEST(body_written_in_prepare_phase_keeps_connection),
    BACK_TEST(early_response_not_reused),
    BACK_TEST(bad_request_fields),
    BACK_TEST(tls_upstream_bad_ca),
    BACK_TEST(tls_handshake_bounded_by_connect_timeout),
    BACK_TEST(del_fails_live_exchanges),
    BACK_TEST(server_by_name_resolved),
    BACK_TEST(alloc_failure_sweep),
};

GW_TEST_MAIN_GROUP(tests, back_group_setup, NULL)
