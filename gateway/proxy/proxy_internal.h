/* proxy/proxy_internal.h — what the files of proxy/ share (not a public interface). */
#ifndef GW_PROXY_INTERNAL_H
#define GW_PROXY_INTERNAL_H

#include "back/back.h"
#include "common/list.h"
#include "proxy/proxy.h"

struct gw_proxy {
    const gw_config_t *cfg;
    uv_loop_t *loop;
    gw_back_t *back;  /* NULL once closed */
    uv_timer_t sweep; /* stall checks of paused exchanges */
    int sweep_open;
    gw_list_t paused;   /* ox_t waiting for their clients to read */
    gw_list_t inflight; /* coalescible ox_t before their response head */
    gw_proxy_stats_t stats;
};

/* route.c: a gateway-made answer (404, 502, 503, 504) with a short text body. */
int gw_proxy__answer(gw_cstream_t *s, unsigned status, const char *text);

#endif
