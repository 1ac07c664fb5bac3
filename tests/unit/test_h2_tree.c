/* Unit tests of h2/tree (RFC 7540 §5.3): default priority, exclusive insertion (§5.3.1),
 * reprioritisation onto a descendant (§5.3.3), dependencies on idle/closed/unknown streams,
 * eviction of the oldest placeholder at the node bound (§5.3.4), and the scheduling order:
 * parents before children, a blocked parent's share to its children, weights 1:3 through the
 * RFC 9218 scheduler (h2/sched) with the tree class. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "h2/sched.h"
#include "h2/tree.h"

static gw_h2_tree_t *mk(size_t n)
{
    gw_h2_tree_t *t = NULL;
    assert_int_equal(gw_h2_tree_new(&t, n), 0);
    return t;
}

static void expect_dep(gw_h2_tree_t *t, uint32_t id, uint32_t dep, unsigned w)
{
    uint32_t d = 99;
    unsigned ww = 0;
    assert_int_equal(gw_h2_tree_get(t, id, &d, &ww), 0);
    assert_int_equal(d, dep);
    assert_int_equal(ww, w);
}

/* expect_dep() for each "ID:DEP:WEIGHT" of spec, space-separated. */
static void expect_deps(gw_h2_tree_t *t, const char *spec)
{
    unsigned id, dep, w;
    int used;
    while (sscanf(spec, " %u:%u:%u%n", &id, &dep, &w, &used) == 3) {
        expect_dep(t, id, dep, w);
        spec += used;
    }
    assert_true(*spec == '\0');
}

static void test_defaults_and_errors(void **state)
{
    (void)state;
    gw_h2_tree_t *t = NULL;
    assert_int_equal(gw_h2_tree_new(&t, 0), GW_E_INVAL);
    t = mk(8);
    assert_int_equal(gw_h2_tree_open(t, 1), 0);
    expect_dep(t, 1, 0, 16);                                      /* §5.3.5 */
    assert_int_equal(gw_h2_tree_set(t, 3, 3, 16, 0), GW_E_INVAL); /* self-dependency */
    assert_int_equal(gw_h2_tree_set(t, 0, 1, 16, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 0, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 257, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_tree_get(t, 3, NULL, NULL), GW_E_NOENT);
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 256, 0), 0);
    expect_dep(t, 3, 1, 256);
    assert_int_equal(gw_h2_tree_size(t), 2);
    gw_h2_tree_del(t);
    gw_h2_tree_del(NULL);
}

/* §5.3.1 figure: A has B and C; D exclusive on A -> A: D; D: B, C */
static void test_exclusive(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(8);
    assert_int_equal(gw_h2_tree_set(t, 1, 0, 16, 0), 0); /* A */
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 10, 0), 0); /* B */
    assert_int_equal(gw_h2_tree_set(t, 5, 1, 20, 0), 0); /* C */
    assert_int_equal(gw_h2_tree_set(t, 7, 1, 30, 1), 0); /* D, exclusive */
    expect_deps(t, "7:1:30 3:7:10 5:7:20");
    /* non-exclusive insertion keeps the siblings */
    assert_int_equal(gw_h2_tree_set(t, 9, 1, 5, 0), 0);
    expect_deps(t, "9:1:5 7:1:30");
    gw_h2_tree_del(t);
}

/* §5.3.3 figure: A on root; B, C on A; D, E on C; F on D. A made dependent on D (non-excl):
 * D moves to A's former parent (root), A under D -> root: D; D: F, A; A: B, C; C: E. With the
 * exclusive flag F becomes A's child too. */
static void build_533(gw_h2_tree_t *t)
{
    assert_int_equal(gw_h2_tree_set(t, 1, 0, 16, 0), 0);  /* A */
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 16, 0), 0);  /* B */
    assert_int_equal(gw_h2_tree_set(t, 5, 1, 16, 0), 0);  /* C */
    assert_int_equal(gw_h2_tree_set(t, 7, 5, 16, 0), 0);  /* D */
    assert_int_equal(gw_h2_tree_set(t, 9, 5, 16, 0), 0);  /* E */
    assert_int_equal(gw_h2_tree_set(t, 11, 7, 16, 0), 0); /* F */
}

static void test_reparent_to_descendant(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(16);
    build_533(t);
    assert_int_equal(gw_h2_tree_set(t, 1, 7, 16, 0), 0);
    expect_deps(t, "7:0:16 1:7:16 11:7:16 3:1:16 5:1:16 9:5:16");
    gw_h2_tree_del(t);

    t = mk(16);
    build_533(t);
    assert_int_equal(gw_h2_tree_set(t, 1, 7, 16, 1), 0); /* exclusive */
    expect_deps(t, "7:0:16 1:7:16 11:1:16 3:1:16 5:1:16");
    gw_h2_tree_del(t);
}

/* A dependency on an idle placeholder (PRIORITY frame) or a closed stream is kept; on a stream
 * not in the tree it gives the default priority (§5.3.1). */
static void test_idle_closed_unknown(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(8);
    assert_int_equal(gw_h2_tree_set(t, 3, 0, 201, 0), 0); /* idle placeholder */
    assert_int_equal(gw_h2_tree_set(t, 5, 3, 101, 0), 0); /* idle on idle */
    assert_int_equal(gw_h2_tree_set(t, 7, 3, 50, 0), 0);
    expect_dep(t, 7, 3, 50);
    assert_int_equal(gw_h2_tree_open(t, 7), 0);
    expect_dep(t, 7, 3, 50); /* opening keeps the priority set while idle */
    assert_int_equal(gw_h2_tree_open(t, 9), 0);
    gw_h2_tree_close(t, 9);
    assert_int_equal(gw_h2_tree_set(t, 11, 9, 40, 0), 0); /* closed parent stays */
    expect_dep(t, 11, 9, 40);
    assert_int_equal(gw_h2_tree_set(t, 13, 99, 40, 1), 0); /* unknown: default */
    expect_dep(t, 13, 0, 16);
    gw_h2_tree_close(t, 12345); /* absent: no-op */
    gw_h2_tree_del(t);
}

/* At the bound the oldest placeholder goes; its children move to its parent with weights
 * shared out in proportion (§5.3.4); open streams are never evicted. */
static void test_eviction_at_bound(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(4);
    assert_int_equal(gw_h2_tree_set(t, 3, 0, 32, 0), 0); /* idle, oldest */
    assert_int_equal(gw_h2_tree_set(t, 5, 3, 30, 0), 0); /* idle */
    assert_int_equal(gw_h2_tree_set(t, 7, 3, 10, 0), 0); /* idle */
    assert_int_equal(gw_h2_tree_open(t, 1), 0);
    assert_int_equal(gw_h2_tree_size(t), 4);
    assert_int_equal(gw_h2_tree_evictions(t), 0);
    assert_int_equal(gw_h2_tree_open(t, 9), 0); /* full: 3 goes */
    assert_int_equal(gw_h2_tree_evictions(t), 1);
    assert_int_equal(gw_h2_tree_size(t), 4);
    assert_int_equal(gw_h2_tree_get(t, 3, NULL, NULL), GW_E_NOENT);
    expect_dep(t, 5, 0, 24); /* 32 * 30 / 40 */
    expect_dep(t, 7, 0, 8);  /* 32 * 10 / 40 */
    /* open 11 and 13: 5 then 7 go; then the tree holds open streams only */
    assert_int_equal(gw_h2_tree_open(t, 11), 0);
    assert_int_equal(gw_h2_tree_open(t, 13), 0);
    assert_int_equal(gw_h2_tree_evictions(t), 3);
    assert_int_equal(gw_h2_tree_open(t, 15), GW_E_LIMIT);
    assert_int_equal(gw_h2_tree_set(t, 17, 1, 16, 0), GW_E_LIMIT);
    assert_int_equal(gw_h2_tree_activate(t, 19, NULL), GW_E_LIMIT);
    /* a closed stream becomes evictable */
    gw_h2_tree_close(t, 1);
    assert_int_equal(gw_h2_tree_open(t, 15), 0);
    assert_int_equal(gw_h2_tree_evictions(t), 4);
    assert_int_equal(gw_h2_tree_get(t, 1, NULL, NULL), GW_E_NOENT);
    gw_h2_tree_del(t);
}

/* The id index under churn: 2000 placeholders with scattered ids through a tree of 64; the
 * last 64 are found, every older one was evicted (backward-shift deletion keeps them
 * reachable), open streams survive. */
static void test_index_churn(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(64);
    uint32_t ids[2000], x = 12345;
    assert_int_equal(gw_h2_tree_open(t, 7), 0);
    for (int k = 0; k < 2000; k++) {
        x = x * 1103515245u + 12345u;
        ids[k] = ((x >> 1) & 0x7fffffe) | 1; /* odd, distinct enough; 7 avoided below */
        if (ids[k] == 7)
            ids[k] = 9;
        for (int j = 0; j < k; j++)
            if (ids[j] == ids[k]) /* keep them distinct */
                ids[k] += 2, j = -1;
        assert_int_equal(gw_h2_tree_set(t, ids[k], k ? ids[k - 1] : 0, 1 + (unsigned)k % 256, 0),
                         0);
    }
    assert_int_equal(gw_h2_tree_size(t), 64);
    assert_int_equal(gw_h2_tree_evictions(t), 2000 - 63);
    assert_int_equal(gw_h2_tree_get(t, 7, NULL, NULL), 0);
    for (int k = 0; k < 2000; k++)
        assert_int_equal(gw_h2_tree_get(t, ids[k], NULL, NULL), k >= 2000 - 63 ? 0 : GW_E_NOENT);
    gw_h2_tree_del(t);
}

static int tag[32];
#define TAG(id) ((void *)&tag[id])

/* A ready parent sends before its children; when it is blocked its children take its turn. */
static void test_parent_before_child(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(8);
    assert_null(gw_h2_tree_pick(t));
    assert_int_equal(gw_h2_tree_set(t, 1, 0, 16, 0), 0);
    assert_int_equal(gw_h2_tree_set(t, 3, 1, 16, 0), 0);
    assert_int_equal(gw_h2_tree_activate(t, 3, TAG(3)), 0);
    assert_int_equal(gw_h2_tree_activate(t, 1, TAG(1)), 0);
    for (int k = 0; k < 5; k++) {
        assert_ptr_equal(gw_h2_tree_pick(t), TAG(1));
        gw_h2_tree_sent(t, 1, 1000);
    }
    gw_h2_tree_deactivate(t, 1);
    assert_ptr_equal(gw_h2_tree_pick(t), TAG(3));
    gw_h2_tree_activate(t, 1, TAG(1));
    assert_ptr_equal(gw_h2_tree_pick(t), TAG(1));
    gw_h2_tree_close(t, 1); /* closed parent: the child inherits its place */
    assert_ptr_equal(gw_h2_tree_pick(t), TAG(3));
    gw_h2_tree_deactivate(t, 3);
    assert_null(gw_h2_tree_pick(t));
    gw_h2_tree_del(t);
}

/* Count bytes per stream over `frames` picks of `sz` bytes. */
static void run(gw_h2_tree_t *t, int frames, size_t sz, size_t *bytes)
{
    for (int k = 0; k < frames; k++) {
        int *p = gw_h2_tree_pick(t);
        assert_non_null(p);
        uint32_t id = (uint32_t)(p - tag);
        bytes[id] += sz;
        gw_h2_tree_sent(t, id, sz);
    }
}

static void test_weights_split(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(8);
    size_t b[32] = {0};
    assert_int_equal(gw_h2_tree_set(t, 1, 0, 1, 0), 0);
    assert_int_equal(gw_h2_tree_set(t, 3, 0, 3, 0), 0);
    gw_h2_tree_activate(t, 1, TAG(1));
    gw_h2_tree_activate(t, 3, TAG(3));
    run(t, 400, 1000, b);
    assert_int_equal(b[1], 100 * 1000);
    assert_int_equal(b[3], 300 * 1000);
    /* a stream that joins later starts at its siblings' virtual time: no burst of catch-up */
    assert_int_equal(gw_h2_tree_set(t, 5, 0, 1, 0), 0);
    gw_h2_tree_activate(t, 5, TAG(5));
    memset(b, 0, sizeof(b));
    run(t, 50, 1000, b);
    assert_in_range(b[5], 8 * 1000, 12 * 1000); /* 1/5 of 50 frames */
    /* grandchildren share the share of their parent: 7 and 9 (w 1:1) under 3 */
    gw_h2_tree_deactivate(t, 5);
    gw_h2_tree_deactivate(t, 3);
    assert_int_equal(gw_h2_tree_set(t, 7, 3, 16, 0), 0);
    assert_int_equal(gw_h2_tree_set(t, 9, 3, 16, 0), 0);
    gw_h2_tree_activate(t, 7, TAG(7));
    gw_h2_tree_activate(t, 9, TAG(9));
    memset(b, 0, sizeof(b));
    run(t, 400, 1000, b);
    assert_in_range(b[1], 99 * 1000, 101 * 1000);
    assert_in_range(b[7], 149 * 1000, 151 * 1000);
    assert_in_range(b[9], 149 * 1000, 151 * 1000);
    gw_h2_tree_del(t);
}

/* Through the scheduler: tree nodes split 1:3, an RFC 9218 u=3 stream goes first, a u=5 one
 * after the tree class. */
static void test_sched_mix(void **state)
{
    (void)state;
    gw_h2_tree_t *t = mk(8);
    gw_h2_sched_t s;
    gw_h2_sched_node_t n[4];
    gw_h2_sched_init(&s, &gw_h2_sched_priority);
    s.tree = t;
    for (uint32_t k = 0; k < 4; k++)
        gw_h2_sched_node_init(&n[k], 2 * k + 1); /* 1 3 5 7 */
    assert_int_equal(gw_h2_tree_set(t, 1, 0, 1, 0), 0);
    assert_int_equal(gw_h2_tree_set(t, 3, 0, 3, 0), 0);
    gw_h2_sched_set_tree(&s, &n[0], 1);
    gw_h2_sched_set_tree(&s, &n[1], 1);
    gw_h2_sched_set_priority(&s, &n[3], 5, 0);
    for (int k = 3; k >= 0; k--)
        gw_h2_sched_add(&s, &n[k]);
    assert_ptr_equal(gw_h2_sched_next(&s), &n[2]); /* u=3 RFC 9218 before the tree */
    gw_h2_sched_remove(&s, &n[2]);
    size_t bytes[2] = {0, 0};
    for (int k = 0; k < 400; k++) {
        gw_h2_sched_node_t *x = gw_h2_sched_next(&s);
        assert_true(x == &n[0] || x == &n[1]);
        bytes[x == &n[1]] += 16384;
        gw_h2_sched_sent(&s, x, 16384);
    }
    assert_in_range(bytes[1] * 100 / bytes[0], 290, 310);
    gw_h2_sched_remove(&s, &n[1]);
    assert_ptr_equal(gw_h2_sched_next(&s), &n[0]);
    gw_h2_sched_set_tree(&s, &n[0], 0); /* an RFC 9218 signal: leaves the tree class */
    assert_true(gw_h2_sched_queued(&n[0]));
    assert_ptr_equal(gw_h2_sched_next(&s), &n[0]);
    gw_h2_sched_remove(&s, &n[0]);
    assert_ptr_equal(gw_h2_sched_next(&s), &n[3]);
    gw_h2_sched_remove(&s, &n[3]);
    assert_null(gw_h2_sched_next(&s));
    assert_null(gw_h2_tree_pick(t));
    /* no room in the tree: the node falls back to the RFC 9218 default */
    gw_h2_tree_del(t);
    t = mk(1);
    s.tree = t;
    assert_int_equal(gw_h2_tree_open(t, 1), 0);
    gw_h2_sched_set_tree(&s, &n[1], 1);
    gw_h2_sched_add(&s, &n[1]);
    assert_int_equal(n[1].tree, 0);
    assert_ptr_equal(gw_h2_sched_next(&s), &n[1]);
    gw_h2_sched_remove(&s, &n[1]);
    gw_h2_tree_del(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults_and_errors),
    cmocka_unit_test(test_exclusive),
    cmocka_unit_test(test_reparent_to_descendant),
    cmocka_unit_test(test_idle_closed_unknown),
    cmocka_unit_test(test_eviction_at_bound),
    cmocka_unit_test(test_parent_before_child),
    cmocka_unit_test(test_weights_split),
    cmocka_unit_test(test_sched_mix),
    cmocka_unit_test(test_index_churn),
};

GW_TEST_MAIN(tests)
