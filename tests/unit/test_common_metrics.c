/* Unit tests of common/metrics: histogram buckets and the Prometheus text format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

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
    /* le as the client libraries write it (client_python, Prometheus 3's normal form), so
     * that a selector {le="0.5"} matches: never 5e-04 nor 0.000500 */
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"0.0005\"} 0\n"
                              "d_seconds_bucket{route=\"r\",le=\"0.001\"} 1\n"
                              "d_seconds_bucket{route=\"r\",le=\"0.0025\"} 1\n"));
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"1.0\"} 1\n"
                              "d_seconds_bucket{route=\"r\",le=\"2.5\"} 2\n"));
    assert_non_null(strstr(s, "d_seconds_bucket{route=\"r\",le=\"10.0\"} 2\n"
                              "d_seconds_bucket{route=\"r\",le=\"+Inf\"} 2\n"
                              "d_seconds_sum{route=\"r\"} 2.0007\n"
                              "d_seconds_count{route=\"r\"} 2\n"));
    b.len = 0;
    assert_int_equal(gw_prom_sample_us(&b, "t_seconds", NULL, 0, 1700000000520000ull), 0);
    assert_string_equal(text(&b), "t_seconds 1700000000.52\n");
    gw_bytes_free(&b);
}

/* Microseconds as seconds: exact, shortest, at least one fractional digit. */
static void seconds_text(void **state)
{
    (void)state;
    static const struct {
        uint64_t us;
        const char *want;
    } v[] = {
        {0, "0.0"},
        {1, "0.000001"},
        {500, "0.0005"},
        {1000, "0.001"},
        {2500, "0.0025"},
        {10000, "0.01"},
        {250000, "0.25"},
        {1000000, "1.0"},
        {2500000, "2.5"},
        {10000000, "10.0"},
        {1234567, "1.234567"},
        {120000, "0.12"},
        {UINT64_MAX, "18446744073709.551615"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char d[GW_PROM_NUM];
        size_t n = gw_prom_fmt_us(d, v[i].us);
        assert_string_equal(d, v[i].want);
        assert_int_equal(n, strlen(v[i].want));
    }
    /* every bucket bound reads back as the float it stands for */
    for (size_t i = 0; i < GW_HIST_BUCKETS; i++) {
        char d[GW_PROM_NUM];
        gw_prom_fmt_us(d, gw_hist_bounds_us[i]);
        assert_null(strchr(d, 'e'));
        assert_true(d[strlen(d) - 1] != '0' || d[strlen(d) - 2] == '.');
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(histogram_buckets),
    cmocka_unit_test(exposition),
    cmocka_unit_test(seconds_text),
};

GW_TEST_MAIN(tests)
