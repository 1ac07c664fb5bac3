/* common/metrics.c — fixed-bucket histograms and the Prometheus text format (metrics.h). */
#include "common/metrics.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"

const uint64_t gw_hist_bounds_us[GW_HIST_BUCKETS] = {
    500,    1000,   2500,   5000,    10000,   25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

void gw_hist_add(gw_hist_t *h, uint64_t us)
{
    size_t i = 0;
    while (i < GW_HIST_BUCKETS && us > gw_hist_bounds_us[i])
        i++;
    h->b[i]++;
    h->count++;
    h->sum_us += us;
}

void gw_hist_merge(gw_hist_t *dst, const gw_hist_t *src)
{
    for (size_t i = 0; i <= GW_HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum_us += src->sum_us;
}

static int puts_(gw_bytes_t *out, const char *s)
{
    return gw_bytes_append(out, s, strlen(s));
}

/* Prometheus text format: a label value escapes backslash, double quote and line feed. */
static int put_value(gw_bytes_t *out, const char *v)
{
    for (const char *p = v; *p; p++) {
        const char *e = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        int rv = e ? puts_(out, e) : gw_bytes_append(out, p, 1);
        if (rv < 0)
            return rv;
    }
    return 0;
}

static int put_labels(gw_bytes_t *out, const gw_label_t *l, size_t n, const char *le)
{
    if (n == 0 && !le)
        return 0;
    int rv = gw_bytes_append(out, "{", 1);
    for (size_t i = 0; i < n && rv == 0; i++) {
        if (i)
            rv = gw_bytes_append(out, ",", 1);
        if (rv == 0)
            rv = puts_(out, l[i].name);
        if (rv == 0)
            rv = gw_bytes_append(out, "=\"", 2);
        if (rv == 0)
            rv = put_value(out, l[i].value ? l[i].value : "");
        if (rv == 0)
            rv = gw_bytes_append(out, "\"", 1);
    }
    if (le && rv == 0) {
        if (n)
            rv = gw_bytes_append(out, ",", 1);
        if (rv == 0)
            rv = puts_(out, "le=\"");
        if (rv == 0)
            rv = puts_(out, le);
        if (rv == 0)
            rv = gw_bytes_append(out, "\"", 1);
    }
    return rv == 0 ? gw_bytes_append(out, "}", 1) : rv;
}

int gw_prom_family(gw_bytes_t *out, const char *name, const char *type, const char *help)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (n < 0 || (size_t)n >= sizeof(line))
        return GW_E_RANGE;
    return gw_bytes_append(out, line, (size_t)n);
}

static int sample_le(gw_bytes_t *out, const char *name, const char *suffix, const gw_label_t *l,
                     size_t n, const char *le, const char *value)
{
    int rv = puts_(out, name);
    if (rv == 0 && suffix)
        rv = puts_(out, suffix);
    if (rv == 0)
        rv = put_labels(out, l, n, le);
    if (rv == 0)
        rv = gw_bytes_append(out, " ", 1);
    if (rv == 0)
        rv = puts_(out, value);
    return rv == 0 ? gw_bytes_append(out, "\n", 1) : rv;
}

int gw_prom_sample(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n, uint64_t v)
{
    char num[24];
    num[gw_fmt_u64(num, v)] = 0;
    return sample_le(out, name, NULL, l, n, NULL, num);
}

size_t gw_prom_fmt_us(char *dst, uint64_t us)
{
    size_t n = gw_fmt_u64(dst, us / 1000000);
    unsigned frac = (unsigned)(us % 1000000);
    dst[n++] = '.';
    /* six digits, then the trailing zeros dropped down to one digit */
    for (unsigned d = 100000; d; d /= 10) {
        dst[n++] = (char)('0' + frac / d % 10);
        if (frac % d == 0)
            break;
    }
    dst[n] = 0;
    return n;
}

int gw_prom_sample_us(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n, uint64_t us)
{
    char num[GW_PROM_NUM];
    gw_prom_fmt_us(num, us);
    return sample_le(out, name, NULL, l, n, NULL, num);
}

int gw_prom_hist(gw_bytes_t *out, const char *name, const gw_label_t *l, size_t n,
                 const gw_hist_t *h)
{
    int rv = 0;
    uint64_t cum = 0;
    char le[GW_PROM_NUM], num[24];
    for (size_t i = 0; i <= GW_HIST_BUCKETS && rv == 0; i++) {
        cum += h->b[i];
        if (i < GW_HIST_BUCKETS)
            gw_prom_fmt_us(le, gw_hist_bounds_us[i]);
        else
            strcpy(le, "+Inf");
        num[gw_fmt_u64(num, cum)] = 0;
        rv = sample_le(out, name, "_bucket", l, n, le, num);
    }
    char sum[GW_PROM_NUM];
    gw_prom_fmt_us(sum, h->sum_us);
    if (rv == 0)
        rv = sample_le(out, name, "_sum", l, n, NULL, sum);
    num[gw_fmt_u64(num, h->count)] = 0;
    if (rv == 0)
        rv = sample_le(out, name, "_count", l, n, NULL, num);
    return rv;
}
