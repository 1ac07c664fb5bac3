/* common/metrics.h — histograms with fixed buckets and the Prometheus text exposition format
 * (version 0.0.4) they are scraped in. Pure: a worker owns its histograms and writes them
 * without locks; a scrape copies them (in the worker's thread) and merges the copies. */
#ifndef GW_COMMON_METRICS_H
#define GW_COMMON_METRICS_H

#include <stdint.h>

#include "common/buf.h"

/* Upper bounds of the buckets, in microseconds: 0.5 ms .. 10 s, then +Inf. */
#define GW_HIST_BUCKETS 14
extern const uint64_t gw_hist_bounds_us[GW_HIST_BUCKETS];

typedef struct {
    uint64_t b[GW_HIST_BUCKETS + 1]; /* not cumulative; the last is above every bound */
    uint64_t count;
    uint64_t sum_us;
} gw_hist_t;

void gw_hist_add(gw_hist_t *h, uint64_t us);
void gw_hist_merge(gw_hist_t *dst, const gw_hist_t *src);

/* A label: name and value (the value is escaped: \\, \" and \n). */
typedef struct {
    const char *name;
    const char *value;
} gw_label_t;

/* "# HELP name help\n# TYPE name type\n" (type: counter, gauge, histogram). */
int gw_prom_family(gw_bytes_t *out, const char *name, const char *type, const char *help);
/* "name{labels} value\n" */
int gw_prom_sample(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n, uint64_t v);
/* "name{labels} seconds\n", the value given in microseconds (gw_prom_fmt_us). */
int gw_prom_sample_us(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n,
                      uint64_t us);
/* name_bucket{labels,le="…"} (cumulative), name_sum (seconds), name_count. The bounds are
 * written as the Prometheus client libraries write floats (gw_prom_fmt_us): le="0.0005",
 * le="1.0", le="+Inf", so that a selector such as {le="0.5"} matches. */
int gw_prom_hist(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n,
                 const gw_hist_t *h);

/* Room for any gw_prom_fmt_us() text and its NUL. */
#define GW_PROM_NUM 32
/* Microseconds as a decimal number of seconds, exactly and in the shortest form with at least
 * one fractional digit, as client_python writes a float and Prometheus 3 normalises le: 500 →
 * "0.0005", 1000000 → "1.0", 2500000 → "2.5", 0 → "0.0". Writes into dst (GW_PROM_NUM bytes),
 * NUL-terminated; returns the length. */
size_t gw_prom_fmt_us(char *dst, uint64_t us);

#endif
