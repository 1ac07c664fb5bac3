/* Unit tests of back/: HTTP/1.1 pipelining to origins (RFC 9112 §9.3.2): what may go behind
 * what, what is sent again when a connection ends early, and answers that never cross. */
#include "back_test_util.h"

/* ---- pipelining ------------------------------------------------------------------------------ */

/* One request of the pipelining tests, with its own outcome. The tests keep theirs in static
 * storage: a failed assertion leaves the test by longjmp, and the teardown's gw_back_del then
 * fails the exchanges still in flight, whose callbacks would write into the dead frame (that
 * crashed the teardown, overwriting gw_back_del's own pointer). */
typedef struct {
    gw_back_exch_t *x;
    char target[32];
    int status, done, error, pause_on_head;
    char body[64];
    size_t body_len, body_total;
} preq_t;

static void pr_head(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    preq_t *r = ud;
    r->status = h->status;
    if (r->pause_on_head)
        gw_back_pause_reading(x);
}

static void pr_body(gw_back_exch_t *x, void *ud, gw_rslice_t b)
{
    (void)x;
    preq_t *r = ud;
    size_t n = b.len < sizeof(r->body) - r->body_len ? b.len : sizeof(r->body) - r->body_len;
    memcpy(r->body + r->body_len, b.buf->data + b.off, n);
    r->body_len += n;
    r->body_total += b.len;
}

static void pr_complete(gw_back_exch_t *x, void *ud)
{
    (void)x;
    preq_t *r = ud;
    r->done = 1;
    r->x = NULL;
}

static void pr_error(gw_back_exch_t *x, void *ud, int code)
{
    (void)x;
    preq_t *r = ud;
    r->done = 1;
    r->error = code;
    r->x = NULL;
}

static const gw_back_cbs_t prcbs = {NULL, pr_head, pr_body, NULL, pr_complete, pr_error};

static void psend(gw_back_t *b, preq_t *r, const char *method, const char *target)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->target, sizeof(r->target), "%s", target);
    int idem = strcmp(method, "POST") != 0;
    gw_back_req_t q = {
        .method = gw_slice_str(method),
        .target = gw_slice_str(r->target),
        .host = GW_SLICE_LIT("origin.test"),
        .idempotent = idem,
    };
    assert_int_equal(gw_back_request(b, 0, &q, &prcbs, r, &r->x), 0);
}

/* r[0] for `first`, then GET /b and GET /c dispatched with it (pipelined behind it when the
 * connection takes them). */
static void psend_with_two_behind(gw_back_t *b, preq_t r[3], const char *first)
{
    psend(b, &r[0], "GET", first);
    psend(b, &r[1], "GET", "/b");
    psend(b, &r[2], "GET", "/c");
}

typedef struct {
    preq_t *r;
    size_t n;
} pset_t;

static int pset_done(void *a)
{
    pset_t *p = a;
    for (size_t i = 0; i < p->n; i++)
        if (!p->r[i].done)
            return 0;
    return 1;
}

static void run_all(preq_t *r, size_t n)
{
    pset_t p = {r, n};
    assert_true(run_until(pset_done, &p, 5000));
}

typedef struct {
    const int *count;
    int want;
} count_t;

static int count_reached(void *a)
{
    count_t *c = a;
    return *c->count >= c->want;
}

/* Run the loop until origin o has read n requests in all: an event, not a window. The loop
 * iteration that reads a request does not also read the back's side of that connection, so
 * an answer written at once (or by an origin timer due at the iteration's end) is not in yet
 * when this returns. */
static void until_origin_has(origin_t *o, int n)
{
    count_t c = {&o->requests, n};
    assert_true(run_until(count_reached, &c, 5000));
}

typedef struct {
    gw_back_t *b;
    unsigned idle;
} idle_t;

static int idle_reached(void *a)
{
    idle_t *p = a;
    gw_back_stats_t st = stats_of(p->b);
    return st.idle >= p->idle && st.active == 0;
}

/* Run the loop until b has `idle` idle connections and none active. */
static void until_idle(gw_back_t *b, unsigned idle)
{
    idle_t p = {b, idle};
    assert_true(run_until(idle_reached, &p, 5000));
}

/* Each request got 200 and its own target back: responses never crossed. */
static void assert_echoed(const preq_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].error || r[i].status != 200 || r[i].body_len != strlen(r[i].target) ||
            memcmp(r[i].body, r[i].target, r[i].body_len))
            fail_msg("request %zu (%s): error %s status %d body '%.*s'", i, r[i].target,
                     r[i].error ? gw_errname(r[i].error) : "-", r[i].status, (int)r[i].body_len,
                     r[i].body);
    }
}

/* One origin in O_ECHO mode, one server with max_connections 1 and the given pipeline; one
 * request completed first, so the connection is proven persistent and idle. */
static gw_back_t *pipe_setup(bfix_t *f, unsigned pipeline)
{
    fix_origin(f, O_ECHO);
    f->t.up.max_connections = 1;
    f->t.up.max_idle = 1;
    f->t.up.pipeline = pipeline;
    gw_back_t *b = fix_back(f);
    static preq_t warm;
    psend(b, &warm, "GET", "/warm");
    run_all(&warm, 1);
    assert_echoed(&warm, 1);
    return b;
}

static void pipeline_requests_share_a_connection_and_a_write(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[4];
    psend(b, &r[0], "GET", "/a");
    psend(b, &r[1], "GET", "/bb");
    psend(b, &r[2], "HEAD", "/ccc"); /* no body, whatever Content-Length says */
    psend(b, &r[3], "GET", "/dddd");
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.pipelined, 3);
    assert_int_equal(st.queued, 0);
    run_all(r, 4);
    assert_int_equal(r[2].status, 200);
    assert_int_equal(r[2].body_total, 0);
    r[2].body_len = 4; /* the echo check below, for the others */
    memcpy(r[2].body, "/ccc", 4);
    assert_echoed(r, 4);
    assert_int_equal(f->o[0].accepted, 1);
    assert_int_equal(f->o[0].requests, 5);
    /* The four left in one deferred write: the origin read them together (loopback keeps
     * one small write whole). */
    assert_int_equal(f->o[0].max_batch, 4);
    st = stats_of(b);
    assert_int_equal(st.idle, 1);
    assert_int_equal(st.unanswered, 0);
    assert_int_equal(st.retries, 0);
}

static void pipeline_never_on_a_fresh_connection(void **state)
{
    bfix_t *f = *state;
    /* RFC 9112 §9.3.2: not before a response proved the connection persistent. */
    origin_t *o = fix_origin(f, O_ECHO);
    f->t.up.max_connections = 1;
    f->t.up.pipeline = 8;
    gw_back_t *b = fix_back(f);
    static preq_t r[3];
    psend(b, &r[0], "GET", "/slow");
    /* /slow is at the origin, which answers it 50 ms later (before: a 30 ms window, which a
     * loaded machine outlasted, and the answer had proved the connection by then). /b and /c
     * come while the connection carries /slow, unanswered: they wait. */
    until_origin_has(o, 1);
    assert_int_equal(r[0].status, 0);
    psend(b, &r[1], "GET", "/b");
    psend(b, &r[2], "GET", "/c");
    expect_stats(b, "pipelined=0 queued=2");
    assert_int_equal(o->requests, 1);
    run_all(r, 3);
    assert_echoed(r, 3);
    assert_int_equal(o->accepted, 1);
}

static void pipeline_only_bodyless_idempotent(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    /* Nothing goes behind a POST, and a POST goes behind nothing. */
    static preq_t r[4];
    psend(b, &r[0], "POST", "/post1");
    psend(b, &r[1], "GET", "/get1");
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.pipelined, 0);
    assert_int_equal(st.queued, 1);
    run_all(r, 2);
    psend(b, &r[2], "GET", "/slow");
    psend(b, &r[3], "POST", "/post2");
    st = stats_of(b);
    assert_int_equal(st.pipelined, 0);
    assert_int_equal(st.queued, 1);
    run_all(r + 2, 2);
    assert_echoed(r, 4);
    assert_int_equal(f->o[0].accepted, 1);
}

static void pipeline_connection_close_sends_the_rest_again(void **state)
{
    bfix_t *f = *state;
    /* The first answer says Connection: close: the two behind it were never answered. They
     * go again on a new connection, and that is not a retry. */
    gw_back_t *b = pipe_setup(f, 4);
    f->t.up.retries = 0;
    static preq_t r[3];
    psend_with_two_behind(b, r, "/close");
    run_all(r, 3);
    assert_echoed(r, 3);
    expect_stats(b, "pipelined=2 unanswered=2 retries=0");
    assert_int_equal(f->o[0].accepted, 2);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
}

static void pipeline_origin_close_after_answer(void **state)
{
    bfix_t *f = *state;
    /* The origin closes after its first answer without saying so: the EOF ends the wait of
     * the pipelined ones, which are sent again; the server is not counted as failing. */
    gw_back_t *b = pipe_setup(f, 4);
    f->t.up.fail_threshold = 1;
    static preq_t r[3];
    psend_with_two_behind(b, r, "/dropafter");
    run_all(r, 3);
    assert_echoed(r, 3);
    expect_stats(b, "unanswered=2 failures=0");
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
}

static void pipeline_timeout_of_the_first_frees_the_rest(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    f->t.up.response_timeout_ms = 200;
    static preq_t r[3];
    psend_with_two_behind(b, r, "/hang");
    run_all(r, 3);
    assert_int_equal(r[0].error, GW_E_TIMEOUT); /* 504, not retried */
    assert_echoed(r + 1, 2);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.unanswered, 2);
    assert_int_equal(f->o[0].accepted, 2);
}

static void pipeline_long_response_sends_the_rest_elsewhere(void **state)
{
    bfix_t *f = *state;
    /* A chunked answer may never end: the requests behind it leave as soon as its head says
     * so; their answers on that connection are read and dropped after the long one, and the
     * connection is kept. Same for a large Content-Length. */
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/long");
    /* Only now a second connection may open: the two had to be pipelined first. Both leave
     * for it before /long ends (300 ms). */
    f->t.up.max_connections = 2;
    pset_t rest = {r + 1, 2};
    assert_true(run_until(pset_done, &rest, 250));
    assert_false(r[0].done);
    run_all(r, 3);
    assert_int_equal(r[0].status, 200);
    assert_int_equal(r[0].body_len, 5);
    assert_echoed(r + 1, 2);
    expect_stats(b, "pipelined=2 unanswered=2");
    /* For a second, that server gets no pipelined request: a batch spreads or waits. */
    static preq_t q[4];
    psend(b, &q[0], "GET", "/q0");
    psend(b, &q[1], "GET", "/q1");
    psend(b, &q[2], "GET", "/q2");
    assert_int_equal(stats_of(b).pipelined, 2);
    run_all(q, 3);
    assert_echoed(q, 3);
    run_for(1100);
    psend(b, &q[0], "GET", "/q0");
    psend(b, &q[1], "GET", "/q1");
    psend(b, &q[2], "GET", "/q2");
    psend(b, &q[3], "GET", "/q3");
    assert_int_equal(stats_of(b).pipelined, 2 + 3); /* a batch again: three behind q0 */
    run_all(q, 4);
    assert_echoed(q, 4);
}

static void pipeline_large_length_moves_the_rest_but_not_a_middling_one(void **state)
{
    bfix_t *f = *state;
    /* Up to GW_BACK_PIPE_LONG (1 MiB) a body is waited for; past it the requests behind it
     * leave. */
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/mid");
    run_all(r, 3);
    assert_int_equal(r[0].body_total, 500000);
    assert_echoed(r + 1, 2);
    assert_int_equal(stats_of(b).pipelined, 2);
    assert_int_equal(stats_of(b).unanswered, 0);
    psend_with_two_behind(b, r, "/big");
    f->t.up.max_connections = 2;
    run_all(r, 3);
    assert_int_equal(r[0].body_total, 2000000);
    assert_echoed(r + 1, 2);
    assert_int_equal(stats_of(b).pipelined, 4);
    assert_int_equal(stats_of(b).unanswered, 2);
}

static void pipeline_cancelled_one_gets_no_answer_of_another(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/slow");
    gw_back_cancel(r[1].x); /* its answer comes anyway, and is dropped */
    r[1].done = 1;
    run_all(r, 3);
    assert_echoed(r + 2, 1);
    assert_echoed(r, 1);
    assert_int_equal(r[1].status, 0);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(f->o[0].accepted, 1);
    assert_int_equal(st.idle, 1); /* /c was alive behind the dropped one: drained, reused */
}

static void pipeline_cancelled_first_sends_the_rest_again(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/slow");
    until_origin_has(&f->o[0], 2); /* /warm and /slow: its answer comes 50 ms later */
    assert_false(r[0].done);
    gw_back_cancel(r[0].x); /* closes the connection, never returned half-read */
    r[0].done = 1;
    run_all(r, 3);
    assert_echoed(r + 1, 2);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.unanswered, 2);
    assert_int_equal(f->o[0].accepted, 2);
}

static void pipeline_paused_first_sends_the_rest_again(void **state)
{
    bfix_t *f = *state;
    /* A consumer that pauses the response being read would hold everything behind it. */
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/part");
    r[0].pause_on_head = 1; /* read at its head, which comes later */
    assert_int_equal(stats_of(b).pipelined, 2);
    f->t.up.max_connections = 2;
    pset_t rest = {r + 1, 2};
    assert_true(run_until(pset_done, &rest, 2000));
    assert_echoed(r + 1, 2);
    assert_false(r[0].done);
    gw_back_resume_reading(r[0].x);
    run_all(r, 1);
    assert_int_equal(r[0].body_len, 10);
    assert_memory_equal(r[0].body, "helloworld", 10);
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.unanswered, 2);
}

/* The requests behind a paused response left for another connection, and
 * their answers still come on the first: it reads and drops them and goes back to the pool
 * (before: closed once only placeholders remained, so every pause cost a dial). The next
 * batch then finds both connections and opens nothing. */
static void pipeline_paused_first_keeps_its_connection(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend_with_two_behind(b, r, "/part");
    r[0].pause_on_head = 1;
    f->t.up.max_connections = 2;
    f->t.up.max_idle = 2;
    pset_t rest = {r + 1, 2};
    assert_true(run_until(pset_done, &rest, 2000));
    assert_echoed(r + 1, 2);
    gw_back_resume_reading(r[0].x);
    run_all(r, 1);
    assert_memory_equal(r[0].body, "helloworld", 10);
    until_idle(b, 2); /* the placeholders' answers came with the end of /part's: drained */
    expect_stats(b, "idle=2 unanswered=2 closed=0 active=0");
    assert_int_equal(f->o[0].accepted, 2);
    static preq_t q[4];
    for (int i = 0; i < 4; i++) {
        char tg[8];
        snprintf(tg, sizeof(tg), "/q%d", i);
        psend(b, &q[i], "GET", tg);
    }
    run_all(q, 4);
    assert_echoed(q, 4);
    assert_int_equal(f->o[0].accepted, 2);
    assert_int_equal(stats_of(b).closed, 0);
}

/* The chain on a connection ends on a placeholder: /x answered, /part (cancelled before its
 * answer) read and dropped, and /c cancelled while it is read. The connection drains both,
 * is parked, and stops counting as busy (before: closed, and counted active forever). */
static void pipeline_chain_ending_on_placeholders_is_parked(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend(b, &r[0], "GET", "/x");
    psend(b, &r[1], "GET", "/part");
    psend(b, &r[2], "GET", "/c");
    assert_int_equal(stats_of(b).pipelined, 2);
    gw_back_cancel(r[1].x);
    r[1].done = 1;
    run_all(r, 1);
    assert_echoed(r, 1);
    run_for(20); /* /part's head and half its body are in: it is being read, /c waits */
    assert_false(r[2].done);
    gw_back_cancel(r[2].x);
    r[2].done = 1;
    assert_int_equal(stats_of(b).active, 1);
    until_idle(b, 1); /* the rest of /part and /c's answer come 300 ms after /part's head */
    expect_stats(b, "idle=1 active=0 closed=0");
    assert_int_equal(f->o[0].accepted, 1);
    static preq_t q;
    psend(b, &q, "GET", "/again");
    run_all(&q, 1);
    assert_echoed(&q, 1);
    assert_int_equal(f->o[0].accepted, 1);
}

/* A placeholder whose own answer turns out long (chunked here) closes its connection at the
 * head: nobody reads that body, and it may not end. */
static void pipeline_long_placeholder_closes(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[3];
    psend(b, &r[0], "GET", "/x");
    psend(b, &r[1], "GET", "/long");
    psend(b, &r[2], "GET", "/c");
    gw_back_cancel(r[1].x);
    r[1].done = 1;
    run_all(r, 1);
    assert_echoed(r, 1);
    /* /long's head and first chunk are in (its end comes 300 ms later): closed at its head,
     * and /c, behind it, sent again on a new connection. */
    f->t.up.max_connections = 2;
    assert_true(run_until(pset_done, &(pset_t){r + 2, 1}, 250));
    assert_echoed(r + 2, 1);
    expect_stats(b, "closed=1 unanswered=1 active=0");
    assert_int_equal(f->o[0].accepted, 2);
}

static void pipeline_del_fails_every_exchange_once(void **state)
{
    bfix_t *f = *state;
    /* gw_back_del with a response being read, three requests behind it (one already dropped
     * by its owner) and one waiting in the queue: each live one gets GW_E_CLOSED once, nothing
     * leaks (ASan). */
    gw_back_t *b = pipe_setup(f, 4);
    static preq_t r[5];
    psend_with_two_behind(b, r, "/slow");
    psend(b, &r[3], "GET", "/d");
    gw_back_cancel(r[2].x);
    r[2].done = 1;
    until_origin_has(&f->o[0], 2); /* /warm and /slow: its answer comes 50 ms later */
    assert_false(r[0].done);
    psend(b, &r[4], "GET", "/e"); /* queued: the connection is full */
    gw_back_del(b);
    f->b = NULL;
    for (int i = 0; i < 5; i++)
        if (i != 2) {
            assert_true(r[i].done);
            assert_int_equal(r[i].error, GW_E_CLOSED);
        }
}

static void pipeline_bounded_by_depth_and_max_requests(void **state)
{
    bfix_t *f = *state;
    gw_back_t *b = pipe_setup(f, 3);
    f->t.up.max_requests_per_connection = 4;
    enum { N = 12 };
    static preq_t r[N];
    char tg[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(tg[i], sizeof(tg[i]), "/slow%d", i);
        psend(b, &r[i], "GET", tg[i]);
    }
    gw_back_stats_t st = stats_of(b);
    assert_int_equal(st.pipelined, 2); /* depth 3: one being answered, two behind */
    assert_int_equal(st.queued, N - 3);
    run_all(r, N);
    assert_echoed(r, N);
    assert_true(f->o[0].max_per_conn <= 4);
    assert_int_equal(f->o[0].requests, N + 1);
}

/* origin_closing_every_connection_never_fails with 8 requests at a time over 2 connections:
 * every answer is followed by an unannounced close, and other requests are already on their
 * way into those connections (reused in the same loop iteration without a peek, or pipelined).
 * They go again on other connections as often as needed; none may fail, none uses up its
 * retry, the server is never counted as failing. */
static void closing_origin_under_concurrency(bfix_t *f, unsigned pipeline)
{
    fix_origin(f, O_CLOSE_NOW);
    f->t.up.fail_threshold = 1;
    f->t.up.max_connections = 2;
    f->t.up.retries = 0;
    f->t.up.pipeline = pipeline;
    gw_back_t *b = fix_back(f);
    client_t *cl = fix_run(f, b, 200, 8, 10000);
    expect_done(cl, 200, 0);
    assert_int_equal(gw_back_server_ejected(b, 0, 0), 0);
    if (pipeline > 1)
        assert_true(stats_of(b).pipelined > 0);
}

static void origin_closing_every_connection_concurrent(void **state)
{
    closing_origin_under_concurrency(*state, 1);
}

static void pipeline_origin_closing_every_connection_never_fails(void **state)
{
    closing_origin_under_concurrency(*state, 4);
}

static void pipeline_concurrent_load_stays_in_order(void **state)
{
    bfix_t *f = *state;
    /* 2000 requests, 64 at a time, over 4 connections pipelining 8 deep: every answer is the
     * request's own, the connection count stays at the cap, and most requests were
     * pipelined. */
    gw_back_t *b = pipe_setup(f, 8);
    f->t.up.max_connections = 4;
    f->t.up.max_idle = 4;
    enum { N = 2000, W = 64 };
    static preq_t r[N];
    static char tg[N][16];
    int next = 0;
    while (next < N) {
        int inflight = 0;
        for (int i = 0; i < next; i++)
            inflight += !r[i].done;
        while (inflight < W && next < N) {
            snprintf(tg[next], sizeof(tg[next]), "/r%d", next);
            psend(b, &r[next], next % 7 == 3 ? "HEAD" : "GET", tg[next]);
            next++;
            inflight++;
        }
        uv_run(&loop, UV_RUN_ONCE);
    }
    run_all(r, N);
    for (int i = 0; i < N; i++)
        if (i % 7 == 3) {
            assert_int_equal(r[i].body_total, 0);
            r[i].body_len = strlen(tg[i]);
            memcpy(r[i].body, tg[i], r[i].body_len);
        }
    assert_echoed(r, N);
    gw_back_stats_t st = stats_of(b);
    assert_true(f->o[0].accepted <= 4);
    assert_true(st.pipelined > N / 2);
    assert_int_equal(st.unanswered, 0);
}

static const struct CMUnitTest tests[] = {
    BACK_TEST(pipeline_requests_share_a_connection_and_a_write),
    BACK_TEST(pipeline_never_on_a_fresh_connection),
    BACK_TEST(pipeline_only_bodyless_idempotent),
    BACK_TEST(pipeline_connection_close_sends_the_rest_again),
    BACK_TEST(pipeline_origin_close_after_answer),
    BACK_TEST(pipeline_timeout_of_the_first_frees_the_rest),
    BACK_TEST(pipeline_long_response_sends_the_rest_elsewhere),
    BACK_TEST(pipeline_large_length_moves_the_rest_but_not_a_middling_one),
    BACK_TEST(pipeline_cancelled_one_gets_no_answer_of_another),
    BACK_TEST(pipeline_cancelled_first_sends_the_rest_again),
    BACK_TEST(pipeline_paused_first_sends_the_rest_again),
    BACK_TEST(pipeline_paused_first_keeps_its_connection),
    BACK_TEST(pipeline_chain_ending_on_placeholders_is_parked),
    BACK_TEST(pipeline_long_placeholder_closes),
    BACK_TEST(pipeline_del_fails_every_exchange_once),
    BACK_TEST(pipeline_bounded_by_depth_and_max_requests),
    BACK_TEST(origin_closing_every_connection_concurrent),
    BACK_TEST(pipeline_origin_closing_every_connection_never_fails),
    BACK_TEST(pipeline_concurrent_load_stays_in_order),
};

GW_TEST_MAIN_GROUP(tests, back_group_setup, NULL)
