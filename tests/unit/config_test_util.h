/* tests/unit/config_test_util.h — what the config/ unit tests (test_config*.c) share: a load of
 * YAML text as the file "t.yaml", the check that a load's error list holds one whole message,
 * the smallest config that loads (MINIMAL) and the failing-allocation sweep of a config that
 * loads. Include after <cmocka.h>. */
#ifndef GW_CONFIG_TEST_UTIL_H
#define GW_CONFIG_TEST_UTIL_H

#include <stddef.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config.h"

/* The smallest config that loads, in 7 lines: a key after it is on line 8. */
#define MINIMAL                                                                                    \
    "listen:\n"                                                                                    \
    "  - address: 127.0.0.1:8080\n"                                                                \
    "upstreams:\n"                                                                                 \
    "  app:\n"                                                                                     \
    "    servers: [127.0.0.1:9000]\n"                                                              \
    "routes:\n"                                                                                    \
    "  - { host: \"*\", path: /, upstream: app }\n"

/* text loaded as the file "t.yaml": 0 or the loader's error, *e filled either way. */
static inline int gw_test_config_load(const char *text, gw_config_t **c, gw_config_errors_t *e)
{
    memset(e, 0, sizeof(*e));
    return gw_config_load_string("t.yaml", text, strlen(text), c, e);
}

/* Whether the error list holds exactly msg (a full "FILE:L:C: text" line) somewhere; when it
 * does not, every message it holds is printed. */
static inline int gw_test_config_has_error(const gw_config_errors_t *e, const char *msg)
{
    for (size_t i = 0; i < e->len; i++)
        if (!strcmp(e->msgs[i], msg))
            return 1;
    for (size_t i = 0; i < e->len; i++)
        print_message("  got: %s\n", e->msgs[i]);
    return 0;
}

/* The error list holds exactly msg; the test fails naming it otherwise. */
static inline void gw_test_config_assert_has(const gw_config_errors_t *e, const char *msg)
{
    if (!gw_test_config_has_error(e, msg))
        fail_msg("missing error: %s", msg);
}

/* text is refused (GW_E_PARSE, no config) with msg among its errors. */
static inline void gw_test_config_expect_error(const char *text, const char *msg)
{
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(text, &c, &e), GW_E_PARSE);
    assert_null(c);
    gw_test_config_assert_has(&e, msg);
    gw_config_errors_free(&e);
}

/* text loads (its errors printed if not): the config. */
static inline gw_config_t *gw_test_config_expect_ok(const char *text)
{
    gw_config_t *c;
    gw_config_errors_t e;
    int rv = gw_test_config_load(text, &c, &e);
    for (size_t i = 0; i < e.len; i++)
        print_message("  error: %s\n", e.msgs[i]);
    assert_int_equal(rv, 0);
    gw_config_errors_free(&e);
    return c;
}

/* The failing-allocation sweep of text, a config that loads: with the n-th allocation failing
 * (n = 1, 2, ... below max_n) the load answers GW_E_NOMEM and no config (any other error is
 * printed), until an n that no allocation reaches loads it whole, and loaded(c), when given,
 * checks that config; that n must come before max_n. */
static inline void gw_test_config_sweep_loads(const char *text, unsigned long max_n,
                                              void (*loaded)(const gw_config_t *c))
{
    int saw_success = 0;
    for (unsigned long n = 1; n < max_n && !saw_success; n++) {
        gw_config_t *c = NULL;
        gw_config_errors_t e = {0};
        gw_alloc_fail_after(n);
        int rv = gw_config_load_string("t.yaml", text, strlen(text), &c, &e);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rv, 0);
            if (loaded)
                loaded(c);
            saw_success = 1;
        } else {
            for (size_t i = 0; rv != GW_E_NOMEM && i < e.len; i++)
                print_message("n=%lu: %s\n", n, e.msgs[i]);
            assert_int_equal(rv, GW_E_NOMEM);
            assert_null(c);
        }
        gw_config_del(c);
        gw_config_errors_free(&e);
    }
    assert_true(saw_success);
}

#endif
