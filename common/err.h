/* common/err.h — h2gate's error codes.
 *
 * Every function that can fail returns 0 (or a non-negative count) on success and a negative
 * GW_E* code on failure. The table below is the single definition of the codes; gw_strerror()
 * is generated from it. Codes after GW_E_FATAL tear the whole connection down
 * (gw_err_is_fatal()); codes before it concern one message or stream.
 */
#ifndef GW_COMMON_ERR_H
#define GW_COMMON_ERR_H

#include <stddef.h>

/* X(name, value, description) */
#define GW_ERRNO_MAP(X)                                                                            \
    X(GW_E_AGAIN, -1, "need more input")                                                           \
    X(GW_E_INVAL, -2, "invalid argument")                                                          \
    X(GW_E_RANGE, -3, "value out of range")                                                        \
    X(GW_E_NOENT, -4, "not found")                                                                 \
    X(GW_E_EXIST, -5, "already exists")                                                            \
    X(GW_E_BUFS, -6, "buffer too small")                                                           \
    X(GW_E_LIMIT, -7, "configured limit reached")                                                  \
    X(GW_E_PARSE, -8, "malformed input")                                                           \
    X(GW_E_STREAM, -9, "stream error")                                                             \
    X(GW_E_CLOSED, -10, "already closed")                                                          \
    X(GW_E_TIMEOUT, -11, "timed out")                                                              \
    X(GW_E_IO, -12, "i/o error")                                                                   \
    X(GW_E_UNSUPPORTED, -13, "not supported")                                                      \
    X(GW_E_FATAL, -100, "fatal error boundary")                                                    \
    X(GW_E_NOMEM, -101, "out of memory")                                                           \
    X(GW_E_PROTO, -102, "protocol error on the connection")                                        \
    X(GW_E_COMPRESSION, -103, "header compression state corrupted")                                \
    X(GW_E_FLOW, -104, "flow control violated")                                                    \
    X(GW_E_CALM, -105, "peer exceeded an abuse limit")

typedef enum {
    GW_OK = 0,
#define GW_ERR_ENUM_(name, value, desc) name = value,
    GW_ERRNO_MAP(GW_ERR_ENUM_)
#undef GW_ERR_ENUM_
} gw_err_t;

/* Human text for a code; never NULL (unknown codes give "unknown error"). */
const char *gw_strerror(int code);

/* The symbolic name of a code ("GW_E_NOMEM"); never NULL. */
const char *gw_errname(int code);

/* Non-zero for codes that must close the connection. */
static inline int gw_err_is_fatal(int code)
{
    return code <= GW_E_FATAL;
}

/* Assertion that stays on in release builds: an invariant, not input validation. */
void gw__assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define GW_ASSERT(e) ((e) ? (void)0 : gw__assert_fail(#e, __FILE__, __LINE__))

#define GW_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* names[v] when v < n and names[v] is set, else `unknown`: the _str functions of the state
 * enums read their names from a table (designated initializers) through this. */
const char *gw_name_of(const char *const *names, size_t n, size_t v, const char *unknown);
#define GW_NAME_OF(names, v, unknown)                                                              \
    gw_name_of((names), sizeof(names) / sizeof((names)[0]), (size_t)(v), (unknown))

#endif
