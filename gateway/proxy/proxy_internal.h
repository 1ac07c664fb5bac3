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
    gw_bucket_table_t *rates; /* request-rate buckets shared by all workers, or NULL */
    /* exchange.c: freed px_t / ox_t kept for the next requests (a proxied request allocates
     * neither), linked through their first word, at most PROXY_FREE_KEEP of each */
    void *px_free, *ox_free;
    size_t px_nfree, ox_nfree;
};

/* route.c: a gateway-made answer (404, 502, 503, 504) with a short text body. */
int gw_proxy__answer(gw_cstream_t *s, unsigned status, const char *text);

/* The same with extra fields after server and content-type (e.g. Retry-After). */
int gw_proxy__answer_fields(gw_cstream_t *s, unsigned status, const char *text,
                            const gw_field_t *extra, size_t n);

/* route.c: whether a request of client sa on route r (index idx in the config) is within the
 * route's request_rate; when not, *retry_after_s is the whole seconds until one more request
 * is allowed (at least 1). Always 1 when the route has no rate, t is NULL or the address is
 * not IP (unlimited). */
int gw_proxy__rate_allow(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                         const struct sockaddr *sa, uint64_t now_us, unsigned *retry_after_s);

#endif
