/* proxy/client_cert.c — the route's client-certificate policy (client_cert: required): a
 * request on a connection without a verified client certificate is refused before any
 * exchange exists. What the origin is told of the certificate is translate.c's (RFC 9440). */
#include <string.h>

#include "common/log.h"
#include "proxy/proxy_internal.h"

int gw_proxy__client_cert_refused(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r)
{
    if (!r->client_cert_required)
        return 0;
    const char *v = s->tls_client_verify;
    if (v && !strcmp(v, "SUCCESS"))
        return 0;
    /* cleartext (no TLS at all), none sent, or one that failed under mode optional */
    GW_LOG_INFO("client_cert_refused",
                "peer=%s proto=%s method=%.*s path=%.*s route=%s verify=\"%s\" subject=\"%s\" "
                "status=403",
                s->peer, gw_req_proto_str(h->proto), (int)h->method.len, h->method.base,
                (int)h->path.len, h->path.base, r->name, v ? v : "cleartext",
                s->tls_client_subject ? s->tls_client_subject : "");
    return 1;
}
