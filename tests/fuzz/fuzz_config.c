/* libFuzzer target: the YAML config loader over arbitrary bytes. Whatever the document, the
 * loader either returns a config (and no error) or refuses it with at least one message of the
 * form "FILE:LINE:COL: what is wrong" and no config; it never crashes, leaks or reads past the
 * input (ASan/UBSan build). A config it accepts must pass its own invariants: at least one
 * listener, upstream and route, every route naming an upstream that exists. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "config/config.h"

static void check_message(const char *m)
{
    /* "<fuzz>:" LINE ":" COL ":" */
    const char *p = m;
    if (strncmp(p, "<fuzz>:", 7) != 0)
        abort();
    p += 7;
    for (int part = 0; part < 2; part++) {
        if (*p < '0' || *p > '9')
            abort();
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p++ != ':')
            abort();
    }
    if (*p != ' ' || p[1] == 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_config_t *cfg = NULL;
    gw_config_errors_t errs = {0};
    int rv = gw_config_load_string("<fuzz>", (const char *)data, size, &cfg, &errs);
    if (rv == 0) {
        if (!cfg || errs.len != 0)
            abort();
        if (cfg->listen_len == 0 || cfg->upstreams_len == 0 || cfg->routes_len == 0)
            abort();
        for (size_t i = 0; i < cfg->routes_len; i++)
            if (cfg->routes[i].upstream >= cfg->upstreams_len)
                abort();
        gw_config_del(cfg);
    } else {
        if (cfg)
            abort();
        if (rv == GW_E_NOMEM) { /* no message promised */
            gw_config_errors_free(&errs);
            return 0;
        }
        if (errs.len == 0)
            abort();
        for (size_t i = 0; i < errs.len; i++)
            check_message(errs.msgs[i]);
    }
    gw_config_errors_free(&errs);
    return 0;
}
