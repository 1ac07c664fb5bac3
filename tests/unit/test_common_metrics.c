/* Unit tests of common/metrics: histogram buckets and the Prometheus text format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/metrics.h"

static const char *text(gw_bytes_t *b)
{
    assert_int_equal(gw_bytes_append(b, "", 1), 0);
    return (const char *)b->base;
}

static void histogram_buckets(void **state)
{
    (void)state;
    gw_hist_t h;
    memset(&h, 0, sizeof(h));
    gw_hist_add(&h, 0);        /* ≤ 0.5 ms */
    gw_hist_add(&h, 500);      /* on the bound: ≤ 0.5 ms */
    gw_hist_add(&h, 501);      /* ≤ 1 ms */
    gw_hist_add(&h, 3000000);  /* ≤ 5 s */
    gw_hist_add(&h, 99000000); /* +Inf */
    assert_int_equal(h.b[0], 2);
    assert_int_equal(h.b[1], 1);
    assert_int_equal(h.b[12], 1);
    assert_int_equal(h.b[GW_HIST_BUCKETS], 1);
    assert_int_equal(h.count, 5);
    assert_int_equal(h.sum_us, 102001001);
    gw_hist_t m;
    memset(&m, 0, sizeof(m));
    gw_hist_merge(&m, &h);
    gw_hist_merge(&m, &h);
    assert_int_equal(m.count, 10);
    assert_int_equal(m.b[0], 4);
}

static void exposition(void **state)
{
    (void)state;
    gw_bytes_t b;
    gw_bytes_init(&b, 0);
    gw_label_t l[] = {{"route", "a\"b\\c\nd"}, {"code", "2xx"}};
    assert_int_equal(gw_prom_family(&b, "x_total", "counter", "Things."), 0);
    assert_int_equal(gw_prom_sample(&b, "x_total", l, 2, 42), 0);
    assert_int_equal(gw_prom_sample(&b, "y", NULL, 0, 7), 0);
    assert_string_equal(text(&b), "# HELP x_total Things.\n# TYPE x_total counter\n"
                                  "x_total{route=\"a\\\"b\\\\c\\nd\",code=\"2xx\"} 42\ny 7\n");
    b.len = 0;
    gw_hist_t h;
    memset(&h, 0, sizeof(h));
    gw_hist_add(&h, 700);
    gw_hist_add(&h, 2000000);
    gw_label_t r[] = {{"route", "r"}};
    assert_int_equal(gw_prom_hist(&b, "d_seconds", r, 1, &h), 0);
    const char *s = text(&b);
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"0.000500\"} 0\n"
                              "d_seconds_bucket{route=\"r\",le=\"0.001000\"} 1\n"));
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"2.500000\"} 2\n"));
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"+Inf\"} 2\n"
                              "d_seconds_sum{route=\"r\"} 2.000700\n"
                              "d_seconds_count{route=\"r\"} 2\n"));
    gw_bytes_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(histogram_buckets),
        cmocka_unit_test(exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
