/* Unit tests of config/cache.c: the `cache:` section's defaults, values and every check with
 * FILE:LINE:COL, and a route's `cache` switch (refused while the proxy does not serve from the
 * cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"
#include "config_test_util.h"

#include "common/err.h"
#include "config/config.h"

static void defaults(void **state)
{
    (void)state;
    gw_config_t *c = gw_test_config_expect_ok(MINIMAL);
    assert_false(c->cache.enabled);
    assert_int_equal(c->cache.memory, 256u << 20);
    assert_int_equal(c->cache.max_object, 8u << 20);
    assert_false(c->cache.heuristic);
    assert_int_equal(c->cache.stale_if_error, 0);
    assert_int_equal(c->cache.stale_while_revalidate, 0);
    assert_true(c->cache.status_header);
    assert_int_equal(c->cache.max_background_revalidations, 128);
    assert_false(c->routes[0].cache);
    gw_config_del(c);
}

static void values(void **state)
{
    (void)state;
    gw_config_t *c = gw_test_config_expect_ok(MINIMAL "cache:\n"
                                                      "  memory: 64MiB\n"
                                                      "  max_object: 512KiB\n"
                                                      "  heuristic: true\n"
                                                      "  stale_if_error: 1h\n"
                                                      "  stale_while_revalidate: 30\n"
                                                      "  status_header: false\n"
                                                      "  max_background_revalidations: 2\n");
    assert_true(c->cache.enabled);
    assert_int_equal(c->cache.at.line, 9);
    assert_int_equal(c->cache.memory, 64u << 20);
    assert_int_equal(c->cache.max_object, 512u << 10);
    assert_true(c->cache.heuristic);
    assert_int_equal(c->cache.stale_if_error, 3600);
    assert_int_equal(c->cache.stale_while_revalidate, 30);
    assert_false(c->cache.status_header);
    assert_int_equal(c->cache.max_background_revalidations, 2);
    gw_config_del(c);
    /* the bounds themselves are accepted */
    c = gw_test_config_expect_ok(MINIMAL
                                 "cache: {memory: 1MiB, max_object: 1KiB, stale_if_error: 366d}\n");
    assert_int_equal(c->cache.stale_if_error, 366u * 86400u);
    gw_config_del(c);
    c = gw_test_config_expect_ok(MINIMAL "cache: {memory: 8MiB, max_object: 8MiB}\n");
    gw_config_del(c);
    /* a route may say cache: false */
    c = gw_test_config_expect_ok("listen: [{address: 127.0.0.1:8080}]\n"
                                 "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                 "routes: [{upstream: app, cache: false}]\n");
    assert_false(c->routes[0].cache);
    gw_config_del(c);
}

static void errors(void **state)
{
    (void)state;
    gw_test_config_expect_error(MINIMAL "cache: 256MiB\n",
                                "t.yaml:8:8: 'cache' must be a map, not a scalar");
    gw_test_config_expect_error(
        MINIMAL "cache: {memory: 1GB, max_object: 2GB}\n",
        "t.yaml:8:34: 'max_object' is out of range: 2GB (allowed 1024..1073741824)");
    gw_test_config_expect_error(
        MINIMAL "cache:\n  memory: 16MiB\n  max_object: 32MiB\n",
        "t.yaml:10:15: cache 'max_object' (33554432 bytes) must not be larger than "
        "'memory' (16777216 bytes)");
    /* the default max_object (8 MiB) is above a smaller memory */
    gw_test_config_expect_error(
        MINIMAL "cache: {memory: 4MiB}\n",
        "t.yaml:8:8: cache 'max_object' (8388608 bytes) must not be larger than "
        "'memory' (4194304 bytes)");
    gw_test_config_expect_error(
        MINIMAL "cache: {memory: 1KiB}\n",
        "t.yaml:8:17: 'memory' is out of range: 1KiB (allowed 1048576..1099511627776)");
    gw_test_config_expect_error(
        MINIMAL "cache: {memory: 2TiB}\n",
        "t.yaml:8:17: 'memory' must be a size (e.g. 64KiB, 1MB, 4096), not '2TiB'");
    gw_test_config_expect_error(MINIMAL "cache: {memory: 2048GiB}\n",
                                "t.yaml:8:17: 'memory' is out of range: 2048GiB (allowed "
                                "1048576..1099511627776)");
    gw_test_config_expect_error(MINIMAL "cache: {heuristic: maybe}\n",
                                "t.yaml:8:20: 'heuristic' must be true or false, not 'maybe'");
    gw_test_config_expect_error(
        MINIMAL "cache: {max_background_revalidations: 0}\n",
        "t.yaml:8:39: 'max_background_revalidations' is out of range: 0 (allowed "
        "1..100000)");
    gw_test_config_expect_error(
        MINIMAL "cache: {max_background_revalidations: 100001}\n",
        "t.yaml:8:39: 'max_background_revalidations' is out of range: 100001 (allowed "
        "1..100000)");
    gw_test_config_expect_error(
        MINIMAL "cache: {max_background_revalidations: many}\n",
        "t.yaml:8:39: 'max_background_revalidations' must be a non-negative integer, "
        "not 'many'");
    gw_test_config_expect_error(
        MINIMAL "cache: {max_background_revalidation: 4}\n",
        "t.yaml:8:9: unknown key 'max_background_revalidation' in cache; did you mean "
        "'max_background_revalidations'?");
    gw_test_config_expect_error(MINIMAL "cache: {status_header: 1}\n",
                                "t.yaml:8:24: 'status_header' must be true or false, not '1'");
    gw_test_config_expect_error(
        MINIMAL "cache: {stale_if_error: soon}\n",
        "t.yaml:8:25: cache 'stale_if_error' must be a duration (e.g. 0, 30s, 5m, 1h), "
        "not 'soon'");
    gw_test_config_expect_error(MINIMAL "cache: {stale_while_revalidate: 1500ms}\n",
                                "t.yaml:8:33: cache 'stale_while_revalidate' must be whole seconds "
                                "(Cache-Control counts seconds), not '1500ms'");
    gw_test_config_expect_error(
        MINIMAL "cache: {stale_if_error: 367d}\n",
        "t.yaml:8:25: cache 'stale_if_error' is out of range: 367d (allowed 0 to 366d)");
    gw_test_config_expect_error(MINIMAL "cache: {stale_if_error: [1]}\n",
                                "t.yaml:8:25: 'stale_if_error' must be a scalar, not a list");
    gw_test_config_expect_error(
        MINIMAL "cache: {memroy: 1GiB}\n",
        "t.yaml:8:9: unknown key 'memroy' in cache; did you mean 'memory'?");
    gw_test_config_expect_error(MINIMAL "cach: {memory: 1GiB}\n",
                                "t.yaml:8:1: unknown key 'cach'; did you mean 'cache'?");
}

/* A route's cache switch: true turns the shared cache on for it, false (the default) not */
static void route_switch(void **state)
{
    (void)state;
    gw_config_t *c = gw_test_config_expect_ok("listen: [{address: 127.0.0.1:8080}]\n"
                                              "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                              "routes:\n"
                                              "  - upstream: app\n"
                                              "    cache: true\n"
                                              "  - upstream: app\n");
    assert_int_equal(c->routes_len, 2);
    assert_true(c->routes[0].cache);
    assert_false(c->routes[1].cache);
    gw_config_del(c);
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                "routes: [{upstream: app, cache: sometimes}]\n",
                                "t.yaml:3:33: 'cache' must be true or false, not 'sometimes'");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: app, cahce: true}]\n",
        "t.yaml:3:26: unknown key 'cahce' in a route; did you mean 'cache'?");
}

/* A route's own stale windows: a map turns caching on, a window it does not name is the cache
 * section's (-1), the bounds and forms are the section's */
static void route_windows(void **state)
{
    (void)state;
    gw_config_t *c =
        gw_test_config_expect_ok("listen: [{address: 127.0.0.1:8080}]\n"
                                 "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                 "routes:\n"
                                 "  - upstream: app\n"
                                 "    cache: {stale_if_error: 10m, stale_while_revalidate: 0}\n"
                                 "  - upstream: app\n"
                                 "    cache: {stale_while_revalidate: 30s}\n"
                                 "  - upstream: app\n"
                                 "    cache: true\n");
    assert_true(c->routes[0].cache && c->routes[1].cache && c->routes[2].cache);
    assert_int_equal(c->routes[0].cache_stale_if_error, 600);
    assert_int_equal(c->routes[0].cache_stale_while_revalidate, 0);
    assert_int_equal(c->routes[1].cache_stale_if_error, -1);
    assert_int_equal(c->routes[1].cache_stale_while_revalidate, 30);
    assert_int_equal(c->routes[2].cache_stale_if_error, -1);
    assert_int_equal(c->routes[2].cache_stale_while_revalidate, -1);
    gw_config_del(c);
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: app, cache: {stale_if_error: 1500ms}}]\n",
        "t.yaml:3:50: cache 'stale_if_error' must be whole seconds (Cache-Control "
        "counts seconds), not '1500ms'");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: app, cache: {stale_while_revalidat: 1}}]\n",
        "t.yaml:3:34: unknown key 'stale_while_revalidat' in a route's cache; did you "
        "mean 'stale_while_revalidate'?");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                "routes: [{upstream: app, cache: {memory: 1MiB}}]\n",
                                "t.yaml:3:34: unknown key 'memory' in a route's cache");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(defaults),     cmocka_unit_test(values),        cmocka_unit_test(errors),
    cmocka_unit_test(route_switch), cmocka_unit_test(route_windows),
};

GW_TEST_MAIN(tests)
