/* Unit tests of common/: error table, logging, time, lists and pools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "common/list.h"
#include "common/log.h"
#include "common/pool.h"
#include "common/clock.h"
#include "common/theap.h"
#include "common/alloc.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

static void err_table(void **state)
{
    (void)state;
    assert_string_equal(gw_strerror(GW_E_NOMEM), "out of memory");
    assert_string_equal(gw_errname(GW_E_PARSE), "GW_E_PARSE");
    assert_string_equal(gw_strerror(-9999), "unknown error");
    assert_true(gw_err_is_fatal(GW_E_NOMEM));
    assert_true(gw_err_is_fatal(GW_E_PROTO));
    assert_false(gw_err_is_fatal(GW_E_STREAM));
    assert_false(gw_err_is_fatal(GW_E_AGAIN));
}

static void log_one_line_key_value(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    gw_log_set_fd(fds[1]);
    gw_log_set_level(GW_LOG_INFO);
    GW_LOG_DEBUG("hidden", "x=%d", 1);
    GW_LOG_WARN("conn_close", "peer=%s reason=\"a\nb\"", "127.0.0.1:1");
    gw_log_set_fd(2);
    close(fds[1]);
    char buf[512] = {0};
    ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    assert_true(n > 0);
    assert_null(strstr(buf, "hidden"));
    assert_non_null(strstr(buf, "level=warn event=conn_close peer=127.0.0.1:1 reason=\"a b\"\n"));
    assert_int_equal(strchr(buf, '\n') - buf, n - 1); /* exactly one line */
    assert_true(strncmp(buf, "ts=", 3) == 0);

    gw_log_level_t l;
    assert_int_equal(gw_log_level_parse("error", &l), 0);
    assert_int_equal(l, GW_LOG_ERROR);
    assert_int_equal(gw_log_level_parse("loud", &l), GW_E_INVAL);
    assert_string_equal(gw_log_level_str(GW_LOG_DEBUG), "debug");
}

/* A peer's bytes in a quoted log value: `"`, `\` and bytes outside printable ASCII as \xHH (the
 * access log's escaping); a short buffer holds whole escapes only and says how much it took. */
static void log_escape_peer_bytes(void **state)
{
    (void)state;
    char out[64];
    const char in[] = "a \"b\"\\\n\xff~";
    assert_int_equal(gw_log_escape(out, sizeof(out), in, sizeof(in) - 1), sizeof(in) - 1);
    assert_string_equal(out, "a \\x22b\\x22\\x5c\\x0a\\xff~");
    assert_int_equal(gw_log_escape(out, sizeof(out), "", 0), 0);
    assert_string_equal(out, "");
    /* "a \x22" needs 7 bytes with its NUL: 6 take "a " only, never half an escape */
    memset(out, '#', sizeof(out));
    assert_int_equal(gw_log_escape(out, 6, in, sizeof(in) - 1), 2);
    assert_string_equal(out, "a ");
    assert_int_equal(gw_log_escape(out, 7, in, sizeof(in) - 1), 3);
    assert_string_equal(out, "a \\x22");
    assert_int_equal(gw_log_escape(out, 1, in, sizeof(in) - 1), 0);
    assert_string_equal(out, "");
    /* a NUL byte is escaped too, not an end */
    assert_int_equal(gw_log_escape(out, sizeof(out), "x\0y", 3), 3);
    assert_string_equal(out, "x\\x00y");
}

static void time_is_monotonic(void **state)
{
    (void)state;
    uint64_t a = gw_now_ns();
    usleep(2000);
    uint64_t b = gw_now_ns();
    assert_true(b - a >= 2000000u);
    assert_true(gw_now_ms() >= b / 1000000u);
}

typedef struct {
    int v;
    gw_list_t link;
} item_t;

static void list_order_and_removal(void **state)
{
    (void)state;
    gw_list_t h;
    gw_list_init(&h);
    item_t it[4];
    for (int i = 0; i < 4; i++) {
        it[i].v = i;
        gw_list_init(&it[i].link);
        gw_list_push_back(&h, &it[i].link);
    }
    gw_list_remove(&it[1].link);
    gw_list_remove(&it[1].link); /* idempotent */
    gw_list_push_front(&h, &it[1].link);
    int order[4], n = 0;
    gw_list_foreach(p, &h) order[n++] = GW_CONTAINER_OF(p, item_t, link)->v;
    assert_int_equal(n, 4);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 0);
    assert_int_equal(order[2], 2);
    assert_int_equal(order[3], 3);
    gw_list_foreach_safe(p, tmp, &h) gw_list_remove(p);
    assert_true(gw_list_empty(&h));
    assert_null(gw_list_pop_front(&h));
}

static void pool_caps_and_reuses(void **state)
{
    (void)state;
    gw_pool_t p;
    gw_pool_init(&p, 64, 3, 2);
    void *a = gw_pool_get(&p), *b = gw_pool_get(&p), *c = gw_pool_get(&p);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_null(gw_pool_get(&p)); /* cap of 3 live objects */
    memset(b, 0xab, 64);
    gw_pool_put(&p, b);
    void *d = gw_pool_get(&p);
    assert_ptr_equal(d, b);                 /* reused from the freelist */
    assert_int_equal(((uint8_t *)d)[7], 0); /* and zeroed */
    gw_pool_put(&p, a);
    gw_pool_put(&p, c);
    gw_pool_put(&p, d); /* third one is freed: free_keep = 2 */
    assert_int_equal(p.free_cnt, 2);
    gw_pool_free(&p);
}

/* gw_pool_get_raw hands back what the last user left (no memset), counts against the cap like
 * gw_pool_get; under ASan an object on the freelist is poisoned past its link and readable
 * again once handed out; gw_pool_free gives back every object kept (the leak check). */
static void pool_raw_and_poison(void **state)
{
    (void)state;
    gw_pool_t p;
    gw_pool_init(&p, 100, 2, 4);
    uint8_t *a = gw_pool_get_raw(&p), *b = gw_pool_get_raw(&p);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(gw_pool_get_raw(&p)); /* cap of 2 live objects */
    memset(a, 0x5a, 100);
    gw_pool_put(&p, a);
#ifdef TEST_ASAN
    assert_false(__asan_address_is_poisoned(a)); /* the link */
    assert_true(__asan_address_is_poisoned(a + sizeof(void *)));
    assert_true(__asan_address_is_poisoned(a + 99));
#endif
    uint8_t *c = gw_pool_get_raw(&p);
    assert_ptr_equal(c, a);
#ifdef TEST_ASAN
    assert_false(__asan_address_is_poisoned(c + 99));
#endif
    assert_int_equal(c[sizeof(void *)], 0x5a); /* not zeroed */
    assert_int_equal(c[99], 0x5a);
    gw_pool_put(&p, b);
    gw_pool_put(&p, c);
    assert_int_equal(p.free_cnt, 2);
    assert_int_equal(p.live, 0);
    uint8_t *d = gw_pool_get(&p); /* zeroed, from the freelist */
    assert_true(d == b || d == c);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(d[i], 0);
    gw_pool_put(&p, d);
    gw_pool_free(&p);
    assert_null(p.free);
    assert_int_equal(p.free_cnt, 0);
}

/* Pops every due node in order; *last is the due of the previous pop (non-decreasing). */
static size_t theap_drain(gw_theap_t *h, uint64_t *last)
{
    size_t n = 0;
    gw_theap_node_t *m;
    while ((m = gw_theap_min(h))) {
        assert_true(m->due >= *last);
        *last = m->due;
        gw_theap_remove(h, m);
        assert_false(gw_theap_queued(m));
        n++;
    }
    return n;
}

/* Against a model: random inserts, re-keys (earlier and later) and removals; the heap always
 * yields the smallest due of the queued nodes, and draining it gives them all in order. */
static void theap_matches_model(void **state)
{
    (void)state;
    enum { N = 300 };
    static gw_theap_node_t nodes[N];
    gw_theap_t h;
    gw_theap_init(&h);
    for (int i = 0; i < N; i++)
        gw_theap_node_init(&nodes[i], (uint8_t)(i & 1));
    uint64_t seed = 12345;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        int i = (int)((seed >> 33) % N);
        uint64_t due = (seed >> 13) % 1000;
        if ((seed >> 7) % 4 == 0)
            gw_theap_remove(&h, &nodes[i]);
        else
            assert_int_equal(gw_theap_set(&h, &nodes[i], due), 0);
        uint64_t min = UINT64_MAX;
        size_t queued = 0;
        for (int k = 0; k < N; k++)
            if (gw_theap_queued(&nodes[k])) {
                queued++;
                if (nodes[k].due < min)
                    min = nodes[k].due;
            }
        assert_int_equal(gw_theap_len(&h), queued);
        if (queued)
            assert_int_equal(gw_theap_min(&h)->due, min);
        else
            assert_null(gw_theap_min(&h));
    }
    uint64_t last = 0;
    size_t left = gw_theap_len(&h);
    assert_int_equal(theap_drain(&h, &last), left);
    assert_int_equal(nodes[0].kind, 0);
    assert_int_equal(nodes[1].kind, 1);
    gw_theap_free(&h);
}

/* reserve makes set infallible: with the allocator failing, nodes up to the capacity are still
 * queued and re-keyed, one more is refused and left unqueued. */
static void theap_reserve_and_nomem(void **state)
{
    (void)state;
    enum { N = 200 };
    static gw_theap_node_t n[N + 1];
    gw_theap_t h;
    gw_theap_init(&h);
    for (int i = 0; i <= N; i++)
        gw_theap_node_init(&n[i], 0);
    assert_int_equal(gw_theap_reserve(&h, N), 0);
    assert_int_equal(h.cap, N); /* the first reserve takes what is asked (above 64) */
    gw_alloc_fail_after(1);
    for (int i = 0; i < N; i++)
        assert_int_equal(gw_theap_set(&h, &n[i], (uint64_t)(N - i)), 0);
    assert_int_equal(gw_theap_set(&h, &n[0], 0), 0); /* re-key: no allocation */
    assert_int_equal(gw_theap_set(&h, &n[N], 7), GW_E_NOMEM);
    assert_false(gw_theap_queued(&n[N]));
    assert_true(gw_alloc_fail_hit());
    gw_alloc_fail_after(0);
    assert_ptr_equal(gw_theap_min(&h), &n[0]);
    gw_theap_remove(&h, &n[0]);
    assert_ptr_equal(gw_theap_min(&h), &n[N - 1]); /* due 1 */
    gw_theap_free(&h);
    assert_false(gw_theap_queued(&n[1]));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(err_table),
    cmocka_unit_test(log_one_line_key_value),
    cmocka_unit_test(log_escape_peer_bytes),
    cmocka_unit_test(time_is_monotonic),
    cmocka_unit_test(list_order_and_removal),
    cmocka_unit_test(pool_caps_and_reuses),
    cmocka_unit_test(pool_raw_and_poison),
    cmocka_unit_test(theap_matches_model),
    cmocka_unit_test(theap_reserve_and_nomem),
};

GW_TEST_MAIN(tests)
