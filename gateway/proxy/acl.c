/* proxy/acl.c — the first of a route's request policies: its access list (config allow/deny,
 * prefix tries built at load), checked against the client's address as the connection knows it
 * (after the PROXY protocol when the listener speaks it). */
#include "common/log.h"
#include "proxy/proxy_internal.h"

int gw_proxy__acl_allows(gw_proxy_t *p, const gw_cstream_t *s, const gw_req_head_t *h,
                         const gw_cfg_route_t *r)
{
    if (!r->acl || gw_cfg_acl_allows(r->acl, s->addr))
        return 1;
    p->stats.access_denied++;
    GW_LOG_INFO("access_denied", "peer=%s proto=%s method=%.*s path=%.*s route=%s status=403",
                s->peer, gw_req_proto_str(h->proto), (int)h->method.len, h->method.base,
                (int)h->path.len, h->path.base, r->name);
    return 0;
}
