/* Unit tests of h2/sched: the exact order of next() for round robin and for the RFC 9218 §10
 * priority policy (urgency first; non-incremental one at a time by stream id; incremental
 * round robin per frame), re-prioritisation of queued and unqueued nodes, add/remove rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "h2/sched.h"

#define MAXN 16

typedef struct {
    gw_h2_sched_t s;
    gw_h2_sched_node_t n[MAXN]; /* n[k] is stream 2k+1 */
} fx_t;

static gw_h2_sched_node_t *node(fx_t *f, uint32_t sid)
{
    return &f->n[(sid - 1) / 2];
}

static void fx_init(fx_t *f, const gw_h2_sched_ops_t *ops)
{
    gw_h2_sched_init(&f->s, ops);
    for (uint32_t k = 0; k < MAXN; k++)
        gw_h2_sched_node_init(&f->n[k], 2 * k + 1);
}

/* cmocka setup: a fixture in *state whose scheduler runs gw_h2_sched_priority. */
static int priority_setup(void **state)
{
    fx_t *f = malloc(sizeof(*f));
    if (!f)
        return -1;
    fx_init(f, &gw_h2_sched_priority);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    free(*state);
    return 0;
}

static void add(fx_t *f, uint32_t sid, uint8_t u, int inc)
{
    gw_h2_sched_node_t *n = node(f, sid);
    n->urgency = u;
    n->incremental = (uint8_t)inc;
    gw_h2_sched_add(&f->s, n);
}

/* Simulate the session: take next(), "send a frame", count down the stream's frames; a
 * stream with no frames left is removed. Records the stream id of each frame in out. */
static size_t run(fx_t *f, unsigned frames[MAXN], uint32_t *out, size_t max)
{
    size_t k = 0;
    gw_h2_sched_node_t *n;
    while (k < max && (n = gw_h2_sched_next(&f->s))) {
        out[k++] = n->stream_id;
        unsigned *left = &frames[(n->stream_id - 1) / 2];
        assert_true(*left > 0);
        if (--*left == 0)
            gw_h2_sched_remove(&f->s, n);
        else
            gw_h2_sched_sent(&f->s, n, 16384);
    }
    return k;
}

static void expect_order(const uint32_t *got, size_t n, const uint32_t *want, size_t wn)
{
    for (size_t k = 0; k < n && k < wn; k++) {
        if (got[k] != want[k])
            print_message("frame %zu: got stream %u, want %u\n", k, got[k], want[k]);
        assert_int_equal(got[k], want[k]);
    }
    assert_int_equal(n, wn);
}

static void defaults_and_policy_names(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, NULL);
    assert_ptr_equal(f.s.ops, &gw_h2_sched_round_robin);
    assert_string_equal(gw_h2_sched_priority.name, "rfc9218");
    assert_int_equal(f.n[0].urgency, 3);
    assert_int_equal(f.n[0].incremental, 0);
    assert_false(gw_h2_sched_queued(&f.n[0]));
    assert_null(gw_h2_sched_next(&f.s));
}

static void round_robin_order(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, &gw_h2_sched_round_robin);
    add(&f, 1, 7, 0);
    add(&f, 3, 0, 0); /* urgency is ignored by round robin */
    add(&f, 5, 3, 1);
    unsigned frames[MAXN] = {2, 1, 3};
    uint32_t got[32];
    size_t n = run(&f, frames, got, 32);
    const uint32_t want[] = {1, 3, 5, 1, 5, 5};
    expect_order(got, n, want, sizeof(want) / sizeof(want[0]));
}

/* A mixed set: urgency 5 non-incremental 1,3; urgency 0 non-incremental 9 (added last);
 * urgency 3 incremental 5,7 and non-incremental 11 and 13 (13 added before 11). */
static void priority_mixed_order(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    add(f, 3, 5, 0);
    add(f, 1, 5, 0);
    add(f, 5, 3, 1);
    add(f, 7, 3, 1);
    add(f, 13, 3, 0);
    add(f, 11, 3, 0);
    add(f, 9, 0, 0);
    assert_int_equal(f->s.count, 7);
    unsigned frames[MAXN] = {0};
    frames[0] = 2; /* 1 */
    frames[1] = 2; /* 3 */
    frames[2] = 3; /* 5 */
    frames[3] = 2; /* 7 */
    frames[4] = 2; /* 9 */
    frames[5] = 2; /* 11 */
    frames[6] = 1; /* 13 */
    uint32_t got[32];
    size_t n = run(f, frames, got, 32);
    const uint32_t want[] = {9,  9,            /* u=0 first */
                             11, 11, 13,       /* u=3 non-incremental, by id, one at a time */
                             5,  7,  5,  7, 5, /* u=3 incremental, one frame each */
                             1,  1,  3,  3};   /* u=5 non-incremental by id */
    expect_order(got, n, want, sizeof(want) / sizeof(want[0]));
    assert_int_equal(f->s.count, 0);
}

/* A stream that arrives while others are being served takes its place at once. */
static void priority_late_urgent_stream(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    for (uint32_t sid = 1; sid <= 19; sid += 2)
        add(f, sid, 5, 0);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 1);
    gw_h2_sched_sent(&f->s, node(f, 1), 100);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 1); /* keeps its turn */
    add(f, 21, 0, 0);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 21);
    /* adding a queued node again is a no-op */
    gw_h2_sched_add(&f->s, node(f, 21));
    assert_int_equal(f->s.count, 11);
    gw_h2_sched_remove(&f->s, node(f, 21));
    gw_h2_sched_remove(&f->s, node(f, 21)); /* no-op */
    assert_int_equal(f->s.count, 10);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 1);
}

/* Blocked non-incremental stream (removed) lets the next id send; when it comes back it
 * sends before the higher id again. */
static void priority_blocked_and_back(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    add(f, 1, 3, 0);
    add(f, 3, 3, 0);
    gw_h2_sched_remove(&f->s, node(f, 1)); /* window closed */
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 3);
    gw_h2_sched_sent(&f->s, node(f, 3), 10);
    gw_h2_sched_add(&f->s, node(f, 1)); /* window opened */
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 1);
}

static void priority_reprioritise(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    add(f, 1, 3, 0);
    add(f, 3, 3, 0);
    add(f, 5, 3, 0);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 1);
    /* raise 5 above all */
    gw_h2_sched_set_priority(&f->s, node(f, 5), 1, 0);
    assert_true(gw_h2_sched_queued(node(f, 5)));
    assert_int_equal(f->s.count, 3);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 5);
    /* lower 1 below 3 */
    gw_h2_sched_set_priority(&f->s, node(f, 1), 6, 0);
    unsigned frames[MAXN] = {1, 1, 1};
    uint32_t got[8];
    size_t n = run(f, frames, got, 8);
    const uint32_t want[] = {5, 3, 1};
    expect_order(got, n, want, 3);

    /* incremental <-> non-incremental within one urgency */
    fx_init(f, &gw_h2_sched_priority);
    add(f, 1, 3, 1);
    add(f, 3, 3, 1);
    add(f, 5, 3, 0);
    assert_int_equal(gw_h2_sched_next(&f->s)->stream_id, 5);
    gw_h2_sched_set_priority(&f->s, node(f, 5), 3, 1); /* joins the back of the rotation */
    unsigned fr2[MAXN] = {2, 2, 2};
    n = run(f, fr2, got, 8);
    const uint32_t want2[] = {1, 3, 5, 1, 3, 5};
    expect_order(got, n, want2, 6);

    /* an unqueued node keeps the values; urgency above 7 is clamped */
    gw_h2_sched_set_priority(&f->s, node(f, 7), 200, 1);
    assert_false(gw_h2_sched_queued(node(f, 7)));
    assert_int_equal(node(f, 7)->urgency, 7);
    assert_int_equal(node(f, 7)->incremental, 1);
    assert_int_equal(f->s.count, 0);
}

/* The queue stays sorted for walkers (the session's want_write walks s->queue). */
static void priority_queue_sorted(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    const uint8_t u[MAXN] = {7, 0, 3, 3, 5, 0, 1, 3, 2, 6, 4, 3, 0, 7, 1, 2};
    for (uint32_t k = 0; k < MAXN; k++)
        add(f, 2 * k + 1, u[k], (int)(k % 3 == 0));
    assert_int_equal(f->s.count, MAXN);
    unsigned prev_class = 0;
    uint32_t prev_id = 0;
    gw_list_foreach(it, &f->s.queue)
    {
        gw_h2_sched_node_t *n = GW_CONTAINER_OF(it, gw_h2_sched_node_t, link);
        unsigned cls = n->urgency * 2u + n->incremental;
        assert_true(cls >= prev_class);
        if (cls == prev_class && !n->incremental && prev_id)
            assert_true(n->stream_id > prev_id);
        prev_class = cls;
        prev_id = n->stream_id;
    }
}

/* The priority queue against a model (a list kept in the RFC 9218 order by a walk from the
 * head): 20000 random adds, removals, re-prioritisations and sent() turns over 16 streams of
 * random urgency and incrementalness; the queue's order must equal the model's after each. */
static void priority_queue_matches_model(void **state)
{
    fx_t *f = *state; /* priority_setup() */
    uint32_t model[MAXN], mn = 0, rnd = 7;
    for (int step = 0; step < 20000; step++) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 17;
        rnd ^= rnd << 5;
        uint32_t sid = 2 * (rnd % MAXN) + 1;
        gw_h2_sched_node_t *n = node(f, sid);
        size_t at = mn;
        for (size_t i = 0; i < mn; i++)
            if (model[i] == sid)
                at = i;
        unsigned op = (rnd >> 8) % 4;
        if (at < mn && (op == 0 || op == 3)) { /* remove (op 3: the sent() turn below) */
            if (op == 3) {
                gw_h2_sched_sent(&f->s, n, 100);
                if (!n->incremental)
                    continue; /* keeps its place */
            } else {
                gw_h2_sched_remove(&f->s, n);
            }
            memmove(model + at, model + at + 1, (mn - at - 1) * sizeof(*model));
            mn--;
            if (op == 0)
                continue;
        } else if (at < mn) { /* re-prioritise a queued node */
            memmove(model + at, model + at + 1, (mn - at - 1) * sizeof(*model));
            mn--;
            gw_h2_sched_set_priority(&f->s, n, (uint8_t)((rnd >> 12) % 8), (int)((rnd >> 16) & 1));
        } else { /* add */
            n->urgency = (uint8_t)((rnd >> 12) % 8);
            n->incremental = (uint8_t)((rnd >> 16) & 1);
            gw_h2_sched_add(&f->s, n);
        }
        /* the model's insertion: before the first node it precedes (class, then id for
         * non-incremental; incremental joins the back of its class) */
        unsigned cn = n->urgency * 3u + n->incremental;
        size_t pos = mn;
        for (size_t i = 0; i < mn; i++) {
            const gw_h2_sched_node_t *m = node(f, model[i]);
            unsigned cm = m->urgency * 3u + m->incremental;
            if (cn < cm || (cn == cm && !n->incremental && sid < model[i])) {
                pos = i;
                break;
            }
        }
        memmove(model + pos + 1, model + pos, (mn - pos) * sizeof(*model));
        model[pos] = sid;
        mn++;
        size_t k = 0;
        gw_list_foreach(it, &f->s.queue)
        {
            assert_true(k < mn);
            assert_int_equal(GW_CONTAINER_OF(it, gw_h2_sched_node_t, link)->stream_id, model[k]);
            k++;
        }
        assert_int_equal(k, mn);
        assert_int_equal(f->s.count, mn);
    }
}

/* Live nodes (streams with a response still to send, queued or not), by urgency: what the
 * front's pacing asks (is any live stream more urgent than another?). */
static void live_counts_follow_priority(void **state)
{
    fx_t *f = *state;
    gw_h2_sched_set_live(&f->s, node(f, 1), 1);
    assert_int_equal(gw_h2_sched_live_top(&f->s), -1); /* one stream: nothing to overtake */
    assert_true(gw_h2_sched_live_one_class(&f->s));
    gw_h2_sched_set_live(&f->s, node(f, 3), 1);
    gw_h2_sched_set_live(&f->s, node(f, 3), 1); /* no-op */
    assert_int_equal(f->s.live_n, 2);
    assert_int_equal(gw_h2_sched_live_top(&f->s), 3); /* both at the default urgency */
    assert_true(gw_h2_sched_live_one_class(&f->s));
    /* queued or not, a re-prioritised live node moves to its new urgency */
    add(f, 1, 3, 0);
    gw_h2_sched_set_priority(&f->s, node(f, 3), 0, 0);
    assert_int_equal(gw_h2_sched_live_top(&f->s), 0);
    assert_false(gw_h2_sched_live_one_class(&f->s));
    gw_h2_sched_set_priority(&f->s, node(f, 1), 0, 1); /* incremental: the same urgency */
    assert_true(gw_h2_sched_live_one_class(&f->s));
    gw_h2_sched_set_priority(&f->s, node(f, 1), 6, 1);
    gw_h2_sched_set_live(&f->s, node(f, 5), 1);
    assert_int_equal(f->s.live[0], 1);
    assert_int_equal(f->s.live[3], 1);
    assert_int_equal(f->s.live[6], 1);
    /* the urgent one ends: u=3 is the top */
    gw_h2_sched_set_live(&f->s, node(f, 3), 0);
    assert_int_equal(gw_h2_sched_live_top(&f->s), 3);
    gw_h2_sched_set_live(&f->s, node(f, 5), 0);
    assert_int_equal(gw_h2_sched_live_top(&f->s), -1);
    assert_int_equal(f->s.live[0] + f->s.live[3], 0);
    assert_int_equal(f->s.live[6], 1);
    /* not live any more: a priority change does not count it again */
    gw_h2_sched_set_live(&f->s, node(f, 1), 0);
    gw_h2_sched_set_priority(&f->s, node(f, 1), 2, 0);
    assert_int_equal(f->s.live_n, 0);
    assert_int_equal(f->s.live[2] + f->s.live[6], 0);
}

/* Round robin ignores urgency: two live nodes are unranked, whatever their urgencies. */
static void live_round_robin_unranked(void **state)
{
    (void)state;
    fx_t f;
    fx_init(&f, &gw_h2_sched_round_robin);
    gw_h2_sched_set_live(&f.s, node(&f, 1), 1);
    gw_h2_sched_set_live(&f.s, node(&f, 3), 1);
    assert_int_equal(gw_h2_sched_live_top(&f.s), GW_H2_SCHED_UNRANKED);
    assert_false(gw_h2_sched_live_one_class(&f.s));
    gw_h2_sched_set_live(&f.s, node(&f, 3), 0);
    assert_true(gw_h2_sched_live_one_class(&f.s));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(live_counts_follow_priority, priority_setup, fx_teardown),
    cmocka_unit_test(live_round_robin_unranked),
    cmocka_unit_test(defaults_and_policy_names),
    cmocka_unit_test(round_robin_order),
    cmocka_unit_test_setup_teardown(priority_mixed_order, priority_setup, fx_teardown),
    cmocka_unit_test_setup_teardown(priority_late_urgent_stream, priority_setup, fx_teardown),
    cmocka_unit_test_setup_teardown(priority_blocked_and_back, priority_setup, fx_teardown),
    cmocka_unit_test_setup_teardown(priority_reprioritise, priority_setup, fx_teardown),
    cmocka_unit_test_setup_teardown(priority_queue_sorted, priority_setup, fx_teardown),
    cmocka_unit_test_setup_teardown(priority_queue_matches_model, priority_setup, fx_teardown),
};

GW_TEST_MAIN(tests)
