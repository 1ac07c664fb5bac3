/* common/log.h — one line per event, key=value, to stderr.
 *
 *   GW_LOG_INFO("conn_open", "peer=%s fd=%d", addr, fd);
 * prints
 *   ts=2026-12-03T11:40:22.123Z level=info event=conn_open peer=127.0.0.1:5000 fd=7
 * A line is written with one write(2), so lines of several threads never interleave.
 */
#ifndef GW_COMMON_LOG_H
#define GW_COMMON_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    GW_LOG_DEBUG = 0,
    GW_LOG_INFO,
    GW_LOG_WARN,
    GW_LOG_ERROR,
    GW_LOG_OFF,
} gw_log_level_t;

const char *gw_log_level_str(gw_log_level_t l);
/* Parse "debug", "info", "warn", "error", "off"; 0 or GW_E_INVAL. */
int gw_log_level_parse(const char *s, gw_log_level_t *out);

void gw_log_set_level(gw_log_level_t l);
gw_log_level_t gw_log_get_level(void);
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Redirect output to fd (default 2); tests use a pipe. */
void gw_log_set_fd(int fd);
#endif

void gw_log(gw_log_level_t l, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bytes a peer sent, as the text of a quoted log value (`debug="%s"`): `"`, `\` and bytes
 * outside printable ASCII become \xHH, as the access log writes them (alog.h), so the value
 * stays one value on one line whatever the bytes. Writes at most cap - 1 characters and a NUL
 * into out (cap >= 1), never part of an escape; returns how many of the n bytes it holds (n when
 * all fit). */
size_t gw_log_escape(char *out, size_t cap, const void *p, size_t n);

#define GW_LOG_ENABLED(l) ((l) >= gw_log_get_level())
#define GW_LOG_DEBUG_(ev, ...)                                                                     \
    do {                                                                                           \
        if (GW_LOG_ENABLED(GW_LOG_DEBUG))                                                          \
            gw_log(GW_LOG_DEBUG, ev, __VA_ARGS__);                                                 \
    } while (0)
#define GW_LOG_DEBUG(ev, ...) GW_LOG_DEBUG_(ev, __VA_ARGS__)
#define GW_LOG_INFO(ev, ...) gw_log(GW_LOG_INFO, ev, __VA_ARGS__)
#define GW_LOG_WARN(ev, ...) gw_log(GW_LOG_WARN, ev, __VA_ARGS__)
#define GW_LOG_ERROR(ev, ...) gw_log(GW_LOG_ERROR, ev, __VA_ARGS__)

/* A warning an event may repeat many times a second (each connection refused for want of
 * memory) as at most one line per interval_ms: gw_log_limit counts the event and gives 0 when
 * its line is left out, else how many there were since the previous line, this one included
 * (the lines' counts add up to all of them). Zero-initialised; one thread's. */
typedef struct {
    uint64_t next_ms; /* no line before */
    uint64_t n;       /* events since the last line */
} gw_log_limit_t;

static inline uint64_t gw_log_limit(gw_log_limit_t *rl, uint64_t now_ms, uint64_t interval_ms)
{
    rl->n++;
    if (now_ms < rl->next_ms)
        return 0;
    rl->next_ms = now_ms + interval_ms;
    uint64_t n = rl->n;
    rl->n = 0;
    return n;
}

#endif
