/* proxy/request.c — the request stage: a request head's way to an exchange. What is refused
 * before anything exists (CONNECT, no route, WebSocket), the place of the route's request
 * policy, the route's request rate (the local bucket, or the cluster's answer waited for),
 * then the stream is served (exchange.c). */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http01.h"
#include "common/log.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* A final answer made here, before any exchange (no route, 429), to a request that may still
 * be sending its body: gw_proxy__answer_early (redirect.c), with the route's response rules
 * (HTTP/2: the stream reset with NO_ERROR once the answer is framed, RFC 9113 §8.1). */
static int answer_early(gw_cstream_t *s, const gw_req_head_t *h, unsigned status, const char *text,
                        const gw_field_t *f, size_t n)
{
    return gw_proxy__answer_early(s, h, h->route, status, NULL, text, strlen(text), f, n);
}

int gw_proxy__answer_text(gw_cstream_t *s, const gw_req_head_t *h, unsigned status,
                          const char *text, const gw_field_t *f, size_t n)
{
    return answer_early(s, h, status, text, f, n);
}

static int px_local_rate(px_t *px);
static int px_limited(px_t *px, unsigned retry);

/* The local bucket of r's request_rate for s's client (gw_proxy__rate_allow). */
static int local_allow(gw_proxy_t *p, const gw_cfg_route_t *r, const gw_cstream_t *s,
                       unsigned *retry)
{
    unsigned share = p->asker.share ? p->asker.share(p->asker.ud) : 1;
    return gw_proxy__rate_allow_share(p->rates, r, (size_t)(r - p->cfg->routes), s->addr,
                                      gw_now_ns() / 1000, share, retry);
}
static int rate_429(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                    unsigned retry);

/* What no route can carry: CONNECT (405), a request without a route (404). 1 when answered
 * (*rv: what the answer returned), else 0. */
static int unroutable(gw_cstream_t *s, const gw_req_head_t *h, int *rv)
{
    const gw_cfg_route_t *r = h->route;
    if (gw_http_method_is_connect(h->method) && !h->protocol.len) {
        /* RFC 9113 §8.5: a TCP tunnel to :authority is not what a gateway in front of origins
         * does (the HTTP/1.1 front answers CONNECT the same way) */
        GW_LOG_INFO("connect_refused", "peer=%s authority=%.*s status=405", s->peer,
                    (int)h->authority.len, h->authority.base);
        *rv = answer_early(s, h, 405, "h2gate: CONNECT is not supported\n", NULL, 0);
        return 1;
    }
    if (!r) {
        GW_LOG_INFO("no_route", "peer=%s proto=%s method=%.*s authority=%.*s path=%.*s status=404",
                    s->peer, gw_req_proto_str(h->proto), (int)h->method.len, h->method.base,
                    (int)h->authority.len, h->authority.base, (int)h->path.len, h->path.base);
        *rv = answer_early(s, h, 404, "h2gate: no route for this host and path\n", NULL, 0);
        return 1;
    }
    return 0;
}

/* A WebSocket request the gateway cannot carry on route r: another :protocol (501), a route
 * without WebSocket (501), an HTTP/1.1 handshake without its one key (400), limits.max_tunnels
 * reached (503). 1 when answered (*rv: what the answer returned), else 0. */
static int ws_refused(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                      const gw_cfg_route_t *r, int *rv)
{
    if (!gw_slice_eq(h->protocol, GW_SLICE_LIT("websocket"))) {
        GW_LOG_INFO("websocket_refused", "peer=%s path=%.*s reason=protocol status=501", s->peer,
                    (int)h->path.len, h->path.base);
        *rv = answer_early(s, h, 501, "h2gate: unsupported :protocol\n", NULL, 0);
        return 1;
    }
    if (!r->websocket) {
        /* RFC 8441 over a route without WebSocket (HTTP/1.1 fronts do not ask then) */
        GW_LOG_INFO("websocket_refused", "peer=%s path=%.*s route=%s reason=off status=501",
                    s->peer, (int)h->path.len, h->path.base, r->name);
        *rv = answer_early(s, h, 501, "h2gate: WebSocket is off for this route\n", NULL, 0);
        return 1;
    }
    if (h->proto == GW_REQ_HTTP1 && gw_proxy__ws_h1_key(h->fields, h->fields_len, NULL) < 0) {
        /* RFC 6455 §4.2.1: the gateway is the server the client speaks to; without the one key
         * the origin's 101 could not be checked (tunnel.c) */
        GW_LOG_INFO("websocket_refused", "peer=%s path=%.*s route=%s reason=key status=400",
                    s->peer, (int)h->path.len, h->path.base, r->name);
        *rv = answer_early(s, h, 400, "h2gate: a WebSocket handshake needs one Sec-WebSocket-Key\n",
                           NULL, 0);
        return 1;
    }
    if (*p->tunnels >= p->cfg->limits.max_tunnels) {
        GW_LOG_INFO("websocket_refused", "peer=%s path=%.*s route=%s reason=max_tunnels status=503",
                    s->peer, (int)h->path.len, h->path.base, r->name);
        *rv = answer_early(s, h, 503, "h2gate: too many WebSocket tunnels\n", NULL, 0);
        return 1;
    }
    return 0;
}

/* RFC 8555 §8.3: with `acme.challenge: http-01`, a cleartext listener answers the challenge
 * path itself, before redirect_https, the route and every policy: the authority's validation
 * carries no credentials and comes from anywhere, and a redirect to https would send it to a
 * listener whose certificate is not issued yet. The path is then the gateway's alone: a token it
 * has not published is a 404 that the origin never sees (another ACME tool behind the gateway needs
 * the gateway's challenge to be tls-alpn-01 or no acme section). 1 when answered, else 0. */
static int acme_http01(const gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, int *rv)
{
    static const char pre[] = GW_HTTP01_PREFIX;
    const size_t pl = sizeof(pre) - 1;
    if (s->tls || !p->cfg->acme.enabled || p->cfg->acme.challenge != GW_CFG_ACME_HTTP_01)
        return 0;
    /* an absolute-form target is here as its path, its authority in place of Host (RFC 9112
     * §3.2.2: the HTTP/1.1 front made it so) */
    gw_slice_t path = h->path, host = h->authority;
    if (path.len < pl || memcmp(path.base, pre, pl) != 0)
        return 0;
    char authz[GW_HTTP01_AUTHZ_MAX];
    ssize_t n = GW_E_NOENT;
    if (gw_slice_eq(h->method, GW_SLICE_LIT("GET")) || gw_slice_eq(h->method, GW_SLICE_LIT("HEAD")))
        n = gw_http01_find(path.base + pl, path.len - pl, authz, sizeof(authz));
    GW_LOG_INFO("acme_http01", "peer=%s proto=%s method=%.*s path=%.*s status=%d host=%.*s",
                s->peer, gw_req_proto_str(h->proto), (int)h->method.len, h->method.base,
                (int)path.len, path.base, n < 0 ? 404 : 200, (int)host.len, host.base);
    static const char none[] = "h2gate: no such ACME challenge\n";
    if (n < 0)
        *rv = gw_proxy__answer_early(s, h, NULL, 404, "text/plain; charset=utf-8", none,
                                     sizeof(none) - 1, NULL, 0);
    else /* the key authorization's exact bytes (§8.3), nothing around them */
        *rv = gw_proxy__answer_early(s, h, NULL, 200, "application/octet-stream", authz, (size_t)n,
                                     NULL, 0);
    return 1;
}

/* The route's request rate decides (here, or the cluster's answer later), then the stream is
 * served. px: the stream's state when it already has one (it waited for basic auth), else
 * NULL. */
static int rate_then_serve(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                           const gw_cfg_route_t *r, px_t *px)
{
    int shared = r->request_rate && p->asker.ask && s->addr && gw_bucket_table_keyed(s->addr);
    uint8_t key[GW_PROXY_RATE_KEY_MAX];
    size_t kl = shared ? gw_proxy__rate_key(p, r, s->addr, key, sizeof(key)) : 0;
    uint64_t burst = r->request_burst ? r->request_burst : r->request_rate;
    if (!kl || !h->end_stream || h->protocol.len) {
        /* decided here; with a cluster, a request with a body (it cannot wait without holding
         * its body) is only charged to the shared budget */
        if (kl)
            (void)p->asker.ask(p->asker.ud, key, kl, r->request_rate, burst, 0);
        unsigned retry;
        if (!local_allow(p, r, s, &retry))
            return px ? px_limited(px, retry) : rate_429(p, s, h, r, retry);
        if (!px && !(px = gw_proxy__stream_new(p, s, h, r)))
            return GW_E_NOMEM;
        return gw_proxy__serve(px);
    }
    /* the cluster decides across instances; the stream waits for the answer (within
     * cluster.timeout; then, or without Redis, the local bucket decides) */
    if (!px && !(px = gw_proxy__stream_new(p, s, h, r)))
        return GW_E_NOMEM;
    gw_proxy__pxx_t *x = gw_proxy__px_x(px); /* without memory for the wait: decided here */
    if (!x || !(x->token = p->asker.ask(p->asker.ud, key, kl, r->request_rate, burst, 1)))
        return px_local_rate(px);
    gw_list_push_back(&p->rate_waits, &x->rlink);
    return 0;
}

/* The route's request policy after basic auth. px: the stream's state when it waited for its
 * verification, else NULL. */
static int after_auth(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                      const gw_cfg_route_t *r, px_t *px)
{
    int rv;
    if (gw_proxy__route_answer(s, h, r, &rv)) {
        if (px) /* answered: nothing more goes anywhere (as px_limited) */
            px->resp = PX_RESP_DONE;
        return rv;
    }
    return rate_then_serve(p, s, h, r, px);
}

int gw_proxy__auth_passed(px_t *px)
{
    return after_auth(px->p, px->s, &px->head, px->route, px);
}

int gw_proxy_request(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h)
{
    p->stats.requests++;
    s->proxy_data = NULL;
    s->error_pages = gw_proxy__errpages_of(p, h->route);
    int rv;
    if (acme_http01(p, s, h, &rv))
        return rv;
    if (s->misdirected) {
        /* RFC 9110 §15.5.20: the connection's TLS name is another certificate entry's, with
         * another client certificate verification: its identity does not reach this host's
         * routes (nor its Client-Cert the origin); a new connection for the host has its own */
        GW_LOG_INFO("misdirected", "peer=%s proto=%s authority=%.*s status=421", s->peer,
                    gw_req_proto_str(h->proto), (int)h->authority.len, h->authority.base);
        return answer_early(s, h, 421, "h2gate: this connection cannot serve this host\n", NULL, 0);
    }
    /* a cleartext listener's redirect_https answers everything, before any policy: nothing
     * (credentials above all) is asked for over cleartext */
    if (gw_proxy__redirect_https(s, h, &rv))
        return rv;
    if (unroutable(s, h, &rv))
        return rv;
    /* RFC 3986 §6.2.2, §5.2.4: the origin may read "/open/../admin", "/open/..;/admin",
     * "//admin" or "/%61dmin" as "/admin": a path that another route's prefix would take once
     * read so would pass by that route's access list and basic auth */
    if (gw_proxy__route_ambiguous(p, h)) {
        GW_LOG_INFO("ambiguous_path", "peer=%s proto=%s path=%.*s route=%s status=400", s->peer,
                    gw_req_proto_str(h->proto), (int)h->path.len, h->path.base, h->route->name);
        return answer_early(s, h, 400, "h2gate: this path names another route once normalised\n",
                            NULL, 0);
    }
    const gw_cfg_route_t *r = h->route;
    if (s->log) {
        s->log->route = r->name;
        s->log->upstream = r->upstream_name;
    }
    if (h->protocol.len && ws_refused(p, s, h, r, &rv))
        return rv;
    /* The route's request policy, in this order: access list (allow/deny), client certificate
     * (client_cert: required), basic auth, then a redirect or a fixed answer. Each decides on
     * the head and the connection alone, before any exchange exists, and a refusal is a
     * gateway answer (answer_early) that the origin never sees. The request rate comes after
     * them: a refused client costs no token, and a client guessing passwords is slowed by
     * basic auth's own failure limit. The request header rules apply in translate.c.
     * Basic auth may make the stream wait for a verification (auth.c): what follows it is
     * after_auth, which gw_proxy__auth_passed continues with. */
    if (!gw_proxy__acl_allows(p, s, h, r))
        return answer_early(s, h, 403, "h2gate: access denied\n", NULL, 0);
    if (gw_proxy__client_cert_refused(s, h, r))
        return answer_early(s, h, 403, "h2gate: this route needs a verified client certificate\n",
                            NULL, 0);
    if (r->basic_auth && gw_proxy__auth(p, s, h, r, &rv))
        return rv;
    return after_auth(p, s, h, r, NULL);
}

/* RFC 6585 §4: 429 Too Many Requests, answered here: the origin never sees it. */
static int rate_429(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                    unsigned retry)
{
    char ra[16];
    snprintf(ra, sizeof(ra), "%u", retry);
    const gw_field_t f[] = {{GW_SLICE_LIT("retry-after"), gw_slice_str(ra)}};
    p->stats.rate_limited++;
    if (s->log)
        s->log->rate_limited = 1;
    GW_LOG_INFO("rate_limited",
                "peer=%s proto=%s method=%.*s path=%.*s upstream=%s status=429 retry_after=%u",
                s->peer, gw_req_proto_str(h->proto), (int)h->method.len, h->method.base,
                (int)h->path.len, h->path.base, r->upstream_name, retry);
    return answer_early(s, h, 429, "h2gate: too many requests, slow down\n", f, 1);
}

/* A waiting stream (no body) refused: its 429, and nothing more goes anywhere. */
static int px_limited(px_t *px, unsigned retry)
{
    px->resp = PX_RESP_DONE;
    return rate_429(px->p, px->s, &px->head, px->route, retry);
}

/* The local bucket decides a waiting stream (the cluster said GW_PROXY_RATE_LOCAL, or could
 * not be asked): on, or 429. */
static int px_local_rate(px_t *px)
{
    unsigned retry;
    if (!local_allow(px->p, px->route, px->s, &retry))
        return px_limited(px, retry);
    return gw_proxy__serve(px);
}

void gw_proxy_rate_answer(gw_proxy_t *p, uint64_t token, int verdict, unsigned retry_after_s)
{
    gw_list_foreach(it, &p->rate_waits)
    {
        gw_proxy__pxx_t *x = GW_CONTAINER_OF(it, gw_proxy__pxx_t, rlink);
        if (x->token != token)
            continue;
        px_t *px = x->px;
        gw_list_remove(&x->rlink);
        int rv = verdict == GW_PROXY_RATE_ALLOW  ? gw_proxy__serve(px)
                 : verdict == GW_PROXY_RATE_DENY ? px_limited(px, retry_after_s)
                                                 : px_local_rate(px);
        if (rv < 0 && !px->closed)
            gw_proxy__fail(px, rv);
        return;
    }
}
