/* http/date.c — HTTP-date (RFC 9110 §5.6.7) into seconds since the epoch. */
#include "http/http.h"

static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const long_days[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};

typedef struct {
    const uint8_t *p, *end;
} rd_t;

static int lit(rd_t *r, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0)
        return 0;
    r->p += n;
    return 1;
}

/* exactly n digits (n_max > n: between n and n_max) */
static int digits(rd_t *r, size_t n, size_t n_max, int *out)
{
    size_t k = 0;
    int v = 0;
    while (k < n_max && r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        v = v * 10 + (*r->p++ - '0');
        k++;
    }
    if (k < n)
        return 0;
    *out = v;
    return 1;
}

static int month(rd_t *r, int *m)
{
    if (r->end - r->p < 3)
        return 0;
    for (int i = 0; i < 12; i++)
        if (!memcmp(r->p, months + 3 * i, 3)) {
            *m = i + 1;
            r->p += 3;
            return 1;
        }
    return 0;
}

/* HH:MM:SS */
static int clock_of(rd_t *r, int *h, int *mi, int *s)
{
    return digits(r, 2, 2, h) && lit(r, ":") && digits(r, 2, 2, mi) && lit(r, ":") &&
           digits(r, 2, 2, s);
}

int64_t gw_http_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return dm[m - 1] + (m == 2 && leap);
}

int gw_http_date_parse(gw_slice_t v, int64_t *out)
{
    rd_t r = {v.base, v.base ? v.base + v.len : v.base};
    int y = 0, m = 0, d = 0, h = 0, mi = 0, s = 0, ok = 0;
    if (!v.len)
        return -1;
    for (int i = 0; i < 7 && !ok; i++) {
        rd_t t = r;
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        if (lit(&t, days[i]) && lit(&t, ", ") && digits(&t, 2, 2, &d) && lit(&t, " ") &&
            month(&t, &m) && lit(&t, " ") && digits(&t, 4, 4, &y) && lit(&t, " ") &&
            clock_of(&t, &h, &mi, &s) && lit(&t, " GMT") && t.p == t.end)
            ok = 1;
        t = r;
        /* rfc850-date: Sunday, 06-Nov-94 08:49:37 GMT */
        if (!ok && lit(&t, long_days[i]) && lit(&t, ", ") && digits(&t, 2, 2, &d) && lit(&t, "-") &&
            month(&t, &m) && lit(&t, "-") && digits(&t, 2, 2, &y) && lit(&t, " ") &&
            clock_of(&t, &h, &mi, &s) && lit(&t, " GMT") && t.p == t.end) {
            y += y < 70 ? 2000 : 1900;
            ok = 1;
        }
        t = r;
        /* asctime-date: Sun Nov  6 08:49:37 1994 */
        if (!ok && lit(&t, days[i]) && lit(&t, " ") && month(&t, &m) && lit(&t, " ") &&
            (lit(&t, " ") ? digits(&t, 1, 1, &d) : digits(&t, 2, 2, &d)) && lit(&t, " ") &&
            clock_of(&t, &h, &mi, &s) && lit(&t, " ") && digits(&t, 4, 4, &y) && t.p == t.end)
            ok = 1;
    }
    if (!ok || d < 1 || d > days_in_month(y, m) || h > 23 || mi > 59 || s > 60)
        return -1;
    *out = gw_http_days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + s;
    return 0;
}
