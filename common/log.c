#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"

static atomic_int cur_level = GW_LOG_INFO;
static atomic_int log_fd = 2;

static const char *const names[] = {"debug", "info", "warn", "error", "off"};

const char *gw_log_level_str(gw_log_level_t l)
{
    return (unsigned)l <= GW_LOG_OFF ? names[l] : "unknown";
}

int gw_log_level_parse(const char *s, gw_log_level_t *out)
{
    for (int i = 0; i <= GW_LOG_OFF; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (gw_log_level_t)i;
            return 0;
        }
    return GW_E_INVAL;
}

void gw_log_set_level(gw_log_level_t l)
{
    atomic_store(&cur_level, (int)l);
}

gw_log_level_t gw_log_get_level(void)
{
    return (gw_log_level_t)atomic_load_explicit(&cur_level, memory_order_relaxed);
}

#ifdef GW_TEST_API
void gw_log_set_fd(int fd)
{
    atomic_store(&log_fd, fd);
}
#endif

void gw_log(gw_log_level_t l, const char *event, const char *fmt, ...)
{
    if (l < gw_log_get_level() || l >= GW_LOG_OFF)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n =
        snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s event=%s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, names[l], event);
    if (n < 0)
        return;
    size_t off = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    if (fmt && fmt[0] && off < sizeof(line) - 2) {
        line[off++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + off, sizeof(line) - off, fmt, ap);
        va_end(ap);
        if (m > 0)
            off += (size_t)m < sizeof(line) - off ? (size_t)m : sizeof(line) - off - 1;
    }
    /* Keep one event on one line whatever the arguments held. */
    for (size_t i = 0; i < off; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    if (off >= sizeof(line) - 1)
        off = sizeof(line) - 2;
    line[off++] = '\n';
    ssize_t w = write(atomic_load(&log_fd), line, off);
    (void)w;
}

size_t gw_log_escape(char *out, size_t cap, const void *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *b = p;
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = b[i];
        int plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
        if (o + (plain ? 1 : 4) >= cap)
            break;
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
    return i;
}
