/* Unit tests of common/: error table, logging, time, lists and pools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/list.h"
#include "common/log.h"
#include "common/pool.h"
#include "common/clock.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(err_table),
        cmocka_unit_test(log_one_line_key_value),
        cmocka_unit_test(time_is_monotonic),
        cmocka_unit_test(list_order_and_removal),
        cmocka_unit_test(pool_caps_and_reuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
