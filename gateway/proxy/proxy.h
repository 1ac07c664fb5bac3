/* proxy/proxy.h — the translator: client streams to origin exchanges.
 *
 * This build routes requests (host: exact, "*.suffix" or "*"; path prefix; first match wins)
 * and answers them itself: no route → 404; a route → 503, because forwarding to origins is not
 * implemented yet. Both answers say so in their body and in the log.
 */
#ifndef GW_PROXY_PROXY_H
#define GW_PROXY_PROXY_H

#include "config/config.h"
#include "proxy/stream.h"

typedef struct gw_proxy gw_proxy_t;

/* Per worker. cfg must outlive the proxy. 0 or GW_E_NOMEM. */
int gw_proxy_new(const gw_config_t *cfg, gw_proxy_t **out);
void gw_proxy_del(gw_proxy_t *p);

/* The route for a request, or NULL. authority may carry a port (ignored); host names compare
 * case-insensitively; "*.example.com" matches any name ending in ".example.com"; a route's path
 * is a plain prefix of the request path. */
const gw_cfg_route_t *gw_proxy_route(const gw_proxy_t *p, gw_slice_t authority, gw_slice_t path);

/* A complete request head arrived on s. The proxy answers through s->ops. 0, or a negative
 * code when the stream must be reset / the connection closed. */
int gw_proxy_request(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *head);

/* Request body bytes (valid during the call). Returns the bytes the proxy has passed on and
 * that may be credited back to the client's window now. */
size_t gw_proxy_body(gw_proxy_t *p, gw_cstream_t *s, const uint8_t *data, size_t len);

/* The front is done with s (response handed over, reset, or client gone). */
void gw_proxy_stream_closed(gw_proxy_t *p, gw_cstream_t *s);

#endif
