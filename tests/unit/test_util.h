/* tests/unit/test_util.h — small helpers the unit test files share. */
#ifndef GW_TEST_UTIL_H
#define GW_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

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
