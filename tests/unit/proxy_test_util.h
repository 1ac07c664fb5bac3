/* proxy_test_util.h — what the proxy/ unit tests share: a proxy made from the file's YAML text
 * on the default loop (one per test group: cfg, px), and request heads. A file that wants the
 * proxy defines GW_PROXY_TEST_FIXTURE before including this header, and its `yaml` after. */
#ifndef GW_TEST_PROXY_TEST_UTIL_H
#define GW_TEST_PROXY_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "test_util.h"
#include "config/config.h"
#include "proxy/proxy.h"
#include "proxy/proxy_internal.h"

#ifdef GW_PROXY_TEST_FIXTURE
static const char *yaml; /* the file's config, defined by the file */
static gw_config_t *cfg;
static gw_proxy_t *px;

/* Group setup: cfg from yaml, px over it on the default loop. */
static int setup(void **state)
{
    (void)state;
    gw_config_errors_t e = {0};
    if (gw_config_load_string("t.yaml", yaml, strlen(yaml), &cfg, &e) < 0)
        return -1;
    return gw_proxy_new(uv_default_loop(), cfg, &px);
}

/* Group teardown: px closed (its handles run to their end) and freed, then cfg. */
static int teardown(void **state)
{
    (void)state;
    gw_proxy_close(px);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    gw_proxy_del(px);
    gw_config_del(cfg);
    return 0;
}
#endif

/* A request head without a body: method, https, authority, path and the fields f[0..n). */
static inline gw_req_head_t test_req(gw_req_proto_t proto, const char *method,
                                     const char *authority, const char *path, const gw_field_t *f,
                                     size_t n)
{
    return (gw_req_head_t){.method = gw_slice_str(method),
                           .scheme = GW_SLICE_LIT("https"),
                           .authority = gw_slice_str(authority),
                           .path = gw_slice_str(path),
                           .fields = f,
                           .fields_len = n,
                           .content_length = -1,
                           .end_stream = 1,
                           .proto = proto};
}

#endif
