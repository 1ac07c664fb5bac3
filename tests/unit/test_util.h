/* tests/unit/test_util.h — small helpers the unit test files share. */
#ifndef GW_TEST_UTIL_H
#define GW_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How much the timings of a timing test stretch in a sanitizer build (3 to 15 times slower): 3
 * there, 1 in a plain build. A test that needs one timer to fire well before another ("past the
 * first deadline, within the second") scales both by it, so that a stall of the loaded process
 * under ASan or TSan does not run them in the same loop turn. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GW_TEST_SLOW 3
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GW_TEST_SLOW 3
#endif
#endif
#ifndef GW_TEST_SLOW
#define GW_TEST_SLOW 1
#endif

/* Append a formatted line to log[0..cap) at *len; what does not fit is dropped whole. */
__attribute__((format(printf, 4, 5))) static inline void
gw_test_appendf(char *log, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(log + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < cap - *len)
        *len += (size_t)n;
}

/* The same into a recorder r with `char log[N]` and `size_t len`. */
#define GW_TEST_LOGF(r, ...) gw_test_appendf((r)->log, sizeof((r)->log), &(r)->len, __VA_ARGS__)

/* Append the fields "X-0: v\r\n" .. "X-<n-1>: v\r\n" to the string buf[0..cap). */
static inline void gw_test_append_fields(char *buf, size_t cap, int n)
{
    size_t len = strlen(buf);
    for (int i = 0; i < n; i++)
        gw_test_appendf(buf, cap, &len, "X-%d: v\r\n", i);
}

/* A write into out (a gw_bytes_t bounded to cap bytes) that returned rv: GW_E_LIMIT and nothing
 * written when want_len bytes do not fit, else 0 and exactly want[0..want_len). */
#define GW_EXPECT_BOUNDED_WRITE(rv, out, cap, want, want_len)                                      \
    do {                                                                                           \
        if ((cap) < (want_len)) {                                                                  \
            assert_int_equal((rv), GW_E_LIMIT);                                                    \
            assert_int_equal((out).len, 0);                                                        \
        } else {                                                                                   \
            assert_int_equal((rv), 0);                                                             \
            assert_int_equal((out).len, (want_len));                                               \
            assert_memory_equal((out).base, (want), (want_len));                                   \
        }                                                                                          \
    } while (0)

/* check(s, cut, user_data) for every string s of in[0..n) and every prefix length cut of it,
 * 0 to strlen(s): the split-feeding sweep of a parser over its examples. */
static inline void gw_test_each_prefix(const char *const *in, size_t n,
                                       void (*check)(const char *s, size_t cut, void *user_data),
                                       void *user_data)
{
    for (size_t k = 0; k < n; k++)
        for (size_t cut = 0; cut <= strlen(in[k]); cut++)
            check(in[k], cut, user_data);
}

/* pred(gw_slice_str(x)) is true (want 1) or false (want 0) for every string x of the list. */
#define GW_EXPECT_EACH(pred, want, ...)                                                            \
    do {                                                                                           \
        static const char *const each_[] = {__VA_ARGS__};                                          \
        for (size_t i_ = 0; i_ < sizeof(each_) / sizeof(each_[0]); i_++)                           \
            if (!!pred(gw_slice_str(each_[i_])) != (want))                                         \
                fail_msg("%s(\"%s\") is not %d", #pred, each_[i_], (want));                        \
    } while (0)

/* The main() of a unit test file (cmocka.h included first): the tests of the array `tests`, run
 * in order, the group between setup and teardown (NULL: none); GW_TEST_FILTER='name*' runs only
 * the tests whose names match. */
#define GW_TEST_MAIN_GROUP(tests, setup, teardown)                                                 \
    int main(void)                                                                                 \
    {                                                                                              \
        if (getenv("GW_TEST_FILTER"))                                                              \
            cmocka_set_test_filter(getenv("GW_TEST_FILTER"));                                      \
        return cmocka_run_group_tests(tests, setup, teardown);                                     \
    }
#define GW_TEST_MAIN(tests) GW_TEST_MAIN_GROUP(tests, NULL, NULL)

#endif
