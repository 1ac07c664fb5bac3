/* proxy/exchange.c — client streams ↔ origin exchanges: their lifetime, dispatch to the back,
 * the back's callbacks, gateway-made error answers, and the front's entry points. Translation
 * is in translate.c, the response body's flow control in flow.c, the request body in upload.c,
 * the rules of coalescing and the in-flight index in coalesce.c.
 *
 * Two objects: px_t is the proxy's state of one client stream; ox_t is one origin exchange and
 * the streams it serves (its subscribers). Without coalescing an ox_t has one subscriber, which
 * also owns the request body. With coalescing, identical GET/HEAD requests that arrive before
 * the response head join the in-flight ox_t; at the head the proxy decides whether the response
 * may serve them all (the rules and their RFC 9111 review are in coalesce.c). The body is held
 * once, in the ox_t's store, by reference; each subscriber has a cursor into it and is handed
 * bytes as its client takes them (see "flow control" below). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* RFC 9218 urgency of the request, for the origin queue (waiting exchanges leave the queue
 * most urgent first), as the front holds it: it parsed the priority field once, and
 * PRIORITY_UPDATE may have changed it since. */
static uint8_t req_urgency(gw_cstream_t *s)
{
    int u = s->ops->urgency ? s->ops->urgency(s) : -1;
    return u >= 0 && u <= 7 ? (uint8_t)u : GW_HTTP_PRIO_DEFAULT_URGENCY;
}

/* ---- ox lifetime --------------------------------------------------------------------------- */

void gw_proxy__ox_cancel(ox_t *ox)
{
    if (!ox->bx)
        return;
    gw_back_exch_t *bx = ox->bx;
    ox->bx = NULL;
    gw_back_cancel(bx); /* pending body writes report back: their streams are closed */
}

/* Drop the exchange: no subscriber left, or it ended. */
void gw_proxy__ox_free(ox_t *ox)
{
    gw_proxy__ox_unpause(ox);
    gw_proxy__unindex(ox);
    gw_proxy__ox_cancel(ox);
    gw_free(ox->key);
    gw_proxy__cbody_free(&ox->body);
    gw_free(ox->trailers);
    gw_proxy__chain_release(ox); /* what the filters hold for it */
    if (ox->tunnel)
        (*ox->p->tunnels)--;
    gw_pool_put(&ox->p->ox_pool, ox);
}

void gw_proxy__sub_remove(px_t *px)
{
    ox_t *ox = px->ox;
    if (!ox)
        return;
    px->ox = NULL;
    gw_list_remove(&px->slink);
    ox->nsubs--;
    if (ox->owner == px)
        ox->owner = NULL;
    if (ox->nsubs == 0 && !ox->pumping)
        gw_proxy__ox_free(ox);
}

/* The exchange ended (complete or failed): every subscriber leaves it. */
void gw_proxy__ox_end(ox_t *ox)
{
    ox->bx = NULL;
    size_t n = ox->nsubs;
    if (n == 0) {
        gw_proxy__ox_free(ox);
        return;
    }
    for (size_t i = 0; i < n; i++) /* the last removal frees ox: do not look at it after */
        gw_proxy__sub_remove(GW_CONTAINER_OF(ox->subs.next, px_t, slink));
}

/* The exchange cannot go on (out of memory while holding the response): every subscriber
 * fails, the origin exchange is dropped. */
void gw_proxy__ox_abort(ox_t *ox, int code)
{
    gw_proxy__ox_cancel(ox);
    FOREACH_SUB(ox, px)
    {
        gw_proxy__fail(px, code);
    }
    gw_proxy__ox_end(ox);
}

/* ---- ending one stream ----------------------------------------------------------------------- */

const char *gw_proxy__resp_str(px_resp_t r)
{
    static const char *const n[] = {"none", "head", "done"};
    return GW_NAME_OF(n, r, "?");
}

void gw_proxy__resp_reached(px_t *px, px_resp_t r)
{
    if (px->resp < r)
        px->resp = r;
    /* a WebSocket answered otherwise than by a switch: its request had no body, it is whole */
    if (px->ws && !px->tunnel && r >= PX_RESP_HEAD)
        px->req_done = 1;
}

void gw_proxy__do_reset(px_t *px, gw_cs_reset_t code)
{
    if (px->closed || px->reset)
        return;
    px->reset = 1;
    px->s->ops->reset(px->s, code);
}

/* The response is complete towards the client: a request body still coming is not wanted. */
void gw_proxy__response_done(px_t *px)
{
    gw_proxy__resp_reached(px, PX_RESP_DONE);
    if (!px->req_done)
        gw_proxy__do_reset(px, GW_CS_RESET_NO_ERROR); /* RFC 9113 §8.1: early response */
}

void gw_proxy__fail(px_t *px, int code)
{
    if (px->closed)
        return;
    if (!(px->resp >= PX_RESP_HEAD)) {
        unsigned st = (unsigned)gw_back_status_for(code);
        px->status = st;
        gw_proxy__resp_reached(px, PX_RESP_HEAD);
        const char *text = st == 504 ? "h2gate: the origin did not answer in time\n"
                           : code == GW_E_NOENT
                               ? "h2gate: no origin server is up (all ejected), try again later\n"
                           : st == 503 ? "h2gate: the origin is busy, try again later\n"
                                       : "h2gate: the origin failed to answer\n";
        GW_LOG_INFO("origin_error", "peer=%s upstream=%s code=%s status=%u", px->s->peer,
                    px->route->upstream_name, gw_errname(code), st);
        if (gw_proxy__answer(px->s, st, text) < 0)
            gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
        else
            gw_proxy__response_done(px);
    } else {
        /* the head is gone: the client must see a broken response, not a short one */
        GW_LOG_INFO("origin_error", "peer=%s upstream=%s code=%s after_head=1 response=%s",
                    px->s->peer, px->route->upstream_name, gw_errname(code),
                    gw_proxy__resp_str((px_resp_t)px->resp));
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
    }
}

/* A malformed request is the client's fault, never the origin's (RFC 9113 §8.1.1, RFC 9112
 * §3): HTTP/2 resets the stream with PROTOCOL_ERROR, HTTP/1.1 is answered 400 while
 * no response head went out; never a 502, which would blame the origin in logs and metrics. */
void gw_proxy__bad_request(px_t *px, const char *why)
{
    if (px->closed)
        return;
    GW_LOG_INFO("bad_request", "peer=%s proto=%s reason=\"%s\"", px->s->peer,
                gw_req_proto_str(px->proto), why);
    if ((px->resp >= PX_RESP_HEAD) || px->proto != GW_REQ_HTTP1) {
        gw_proxy__resp_reached(px, PX_RESP_HEAD);
        gw_proxy__do_reset(px, GW_CS_RESET_PROTOCOL);
        return;
    }
    px->status = 400;
    gw_proxy__resp_reached(px, PX_RESP_HEAD);
    if (gw_proxy__answer(px->s, 400, "h2gate: malformed request\n") < 0)
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
    else
        gw_proxy__response_done(px);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static const gw_back_cbs_t back_cbs;

ox_t *gw_proxy__ox_new(px_t *px)
{
    gw_proxy_t *p = px->p;
    ox_t *ox = gw_pool_get_raw(&p->ox_pool);
    if (!ox)
        return NULL;
    memset(ox, 0, offsetof(ox_t, ws_key)); /* the key is read only with ox->ws */
    ox->p = p;
    ox->route = px->route;
    ox->chain = gw_proxy__chain_of(p, px->route);
    gw_list_init(&ox->subs);
    gw_list_init(&ox->plink);
    gw_list_init(&ox->klink);
    gw_proxy__cbody_init(&ox->body);
    ox->started_ns = gw_now_ns();
    return ox;
}

void gw_proxy__dispatch(px_t *px, char *key, size_t keylen)
{
    gw_proxy_t *p = px->p;
    ox_t *ox = gw_proxy__ox_new(px);
    if (!ox) {
        gw_free(key);
        gw_proxy__fail(px, GW_E_NOMEM);
        return;
    }
    ox->owner = px;
    ox->credentials = gw_proxy__has_credentials(&px->head) != 0;
    gw_proxy_xlate_t x;
    x.f = NULL;
    x.buf = NULL;
    x.n = 0;
    x.used = 0;
    gw_back_req_t req;
    int rv = gw_proxy__translate(px->route, px->s, &px->head, req_urgency(px->s), &x, &req);
    if (rv == 0 && x.ws_key[0]) {
        memcpy(ox->ws_key, x.ws_key, sizeof(ox->ws_key));
        ox->ws = 1;
    }
    if (rv == 0) {
        rv = p->back ? gw_back_request(p->back, px->route->upstream, &req, &back_cbs, ox, &ox->bx)
                     : GW_E_CLOSED;
        if (rv == 0)
            p->stats.origin_requests++;
    }
    if (x.f != x.fst)
        gw_free(x.f);
    if (x.buf != x.bst)
        gw_free(x.buf);
    if (rv < 0) {
        gw_free(key);
        gw_pool_put(&p->ox_pool, ox);
        if (rv == GW_E_PARSE) /* translate(): the head's authority */
            gw_proxy__bad_request(
                px, "missing or invalid authority, or host does not match :authority");
        else if (rv == GW_E_INVAL) /* the back's serializer refused the head: the client's */
            gw_proxy__bad_request(px, "request head cannot be sent as HTTP/1.1");
        else
            gw_proxy__fail(px, rv);
        return;
    }
    gw_list_push_back(&ox->subs, &px->slink);
    ox->nsubs = 1;
    px->ox = ox;
    if (key) {
        ox->key = key;
        ox->keylen = keylen;
        ox->hash = gw_proxy__hash(key, keylen);
        ox->indexed = 1;
        gw_list_push_back(&p->inflight, &ox->klink);
    }
}

/* A follower leaves the shared exchange and fetches on its own (not coalescible again). */
void gw_proxy__detach(px_t *px)
{
    /* what went out of this exchange's filters to px must be made again by the next one */
    if (px->ox && gw_proxy__chain_detach(px->ox, px) < 0) {
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
        return;
    }
    gw_proxy__sub_remove(px);
    px->follower = 0;
    gw_proxy__dispatch(px, NULL, 0);
}

/* ---- back callbacks ---------------------------------------------------------------------- */

/* What the origin side was, into the records of the exchange's streams (access log). */
static void note_origin(ox_t *ox, gw_back_exch_t *x, int head)
{
    gw_back_exch_info_t in;
    gw_back_exch_info(x, &in);
    int64_t head_us = head ? (int64_t)((gw_now_ns() - ox->started_ns) / 1000) : -1;
    FOREACH_SUB(ox, px)
    {
        gw_alog_t *r = px->s->log;
        if (!r || px->closed)
            continue;
        r->server = in.server;
        r->retries = (uint8_t)(in.retries > 255 ? 255 : in.retries);
        r->connect_us = px->follower ? -1 : in.connect_us;
        r->upstream_head_us = head_us;
        r->upstream_queue_us = px->follower ? -1 : in.queue_us;
    }
}

/* The origin side is over (its last byte, or its failure): the time since the exchange started
 * into the records of its streams (the access log's upstream response time, nginx's
 * $upstream_response_time). */
static void note_origin_end(ox_t *ox)
{
    int64_t us = (int64_t)((gw_now_ns() - ox->started_ns) / 1000);
    FOREACH_SUB(ox, px)
    {
        if (px->s->log && !px->closed)
            px->s->log->upstream_resp_us = us;
    }
}

/* An interim answer (100 Continue, 103 Early Hints) goes through the route's filters, which
 * decide what reaches whom (hints.c). */
static void b_interim(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    (void)x;
    gw_proxy__chain_interim(ud, h);
}

static void b_head(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    ox_t *ox = ud;
    note_origin(ox, x, 1);
    if (h->status == 101) { /* only an upgrade request gets one through the back */
        gw_proxy__unindex(ox);
        if (!gw_list_empty(&ox->subs))
            gw_proxy__tunnel_open(ox, h);
        return;
    }
    if (gw_proxy__ws_false_switch(ox, h))
        return;
    gw_proxy__unindex(ox); /* from now on a new request gets an exchange of its own */
    if (gw_list_empty(&ox->subs))
        return;                  /* nobody to answer (the front closes what is left) */
    gw_proxy__chain_head(ox, h); /* the route's filters, then to each subscriber */
}

/* Body bytes go through the route's filters into the store, and from there to every subscriber
 * that can take them. */
static void b_body(gw_back_exch_t *x, void *ud, gw_rslice_t b)
{
    (void)x;
    gw_proxy__chain_body(ud, b);
}

/* Trailers go through the route's filters and are kept until each subscriber reached the
 * body's end. */
static void b_trailers(gw_back_exch_t *x, void *ud, const gw_back_field_t *tf, size_t tn)
{
    (void)x;
    gw_proxy__chain_trailers(ud, tf, tn);
}

/* The origin is done: subscribers at the end finish now, the others as they catch up. */
static void b_complete(gw_back_exch_t *x, void *ud)
{
    (void)x;
    ox_t *ox = ud;
    ox->bx = NULL;
    note_origin_end(ox);
    gw_proxy__chain_end(ox);
}

static void b_error(gw_back_exch_t *x, void *ud, int code)
{
    ox_t *ox = ud;
    note_origin(ox, x, 0);
    note_origin_end(ox);
    ox->bx = NULL;
    if (ox->cx && gw_proxy__cache_error(ox, code))
        return; /* a stale answer stood in (cache.c) */
    FOREACH_SUB(ox, px)
    {
        gw_proxy__fail(px, code);
    }
    gw_proxy__ox_end(ox);
}

static const gw_back_cbs_t back_cbs = {b_interim, b_head, b_body, b_trailers, b_complete, b_error};

/* A stream's state before it goes anywhere. */
px_t *gw_proxy__stream_new(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                           const gw_cfg_route_t *r)
{
    px_t *px = gw_pool_get(&p->px_pool);
    if (!px)
        return NULL;
    px->p = p;
    px->s = s;
    px->route = r;
    px->head = *h;
    px->req_cl = h->content_length;
    px->resp_cl = -1;
    px->req_done = h->end_stream != 0;
    px->proto = h->proto;
    if (h->protocol.len) { /* WebSocket: bytes may follow the 101, as many as they are */
        px->ws = 1;
        px->req_cl = -1;
        px->req_done = 0;
    }
    gw_list_init(&px->slink);
    gw_list_init(&px->ulink);
    gw_list_init(&px->alink);
    if (!px->req_done && !px->ws) /* a tunnel's silence is timeouts.tunnel_idle's */
        gw_proxy__upload_watch(px);
    s->proxy_data = px;
    return px;
}

gw_proxy__pxx_t *gw_proxy__px_x(px_t *px)
{
    if (px->x)
        return px->x;
    gw_proxy__pxx_t *x = gw_calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    gw_list_init(&x->rlink);
    x->px = px;
    return px->x = x;
}

/* On to the origin: early hints, then a coalesced exchange to join or a new one. */
int gw_proxy__serve(px_t *px)
{
    gw_proxy_t *p = px->p;
    gw_cstream_t *s = px->s;
    const gw_cfg_route_t *r = px->route;
    const gw_req_head_t *h = &px->head;
    /* a hit sends its own 103 from the stored page (cache.c, hints.c): one 103 per request */
    if (r->cache && gw_proxy__cache_serve(px))
        return 0;                /* answered from the shared cache (cache.c) */
    gw_proxy__chain_request(px); /* before anything is asked of the origin */

    /* the key holds the scheme the origin is told (the listener's: what is shared is keyed on
     * what the connection says, never on the client's words), not the client's :scheme */
    gw_req_head_t kh = *h;
    kh.scheme = s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
    size_t klen = 0;
    /* a request that tells the origin of a client certificate (RFC 9440) carries an identity
     * the key does not hold: it neither leads nor joins (as Authorization, RFC 9111 §3.5) */
    char *key = s->tls_client_cert.len ? NULL : gw_proxy__coalesce_key(r, &kh, &klen);
    if (key) {
        ox_t *ox = gw_proxy__find_inflight(p, key, klen, gw_proxy__hash(key, klen));
        if (ox) {
            gw_free(key);
            gw_list_push_back(&ox->subs, &px->slink);
            ox->nsubs++;
            px->ox = ox;
            px->follower = 1;
            p->stats.coalesced++;
            if (s->log)
                s->log->coalesced = 1;
            return 0;
        }
    }
    gw_proxy__dispatch(px, key, klen);
    if (r->cache)
        gw_proxy__cache_lead(px); /* its answer may go into the store */
    return 0;
}

void gw_proxy_reprioritize(gw_proxy_t *p, gw_cstream_t *s)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || !px->ox || !px->ox->bx)
        return;
    /* a coalesced exchange waits for its most urgent subscriber */
    uint8_t u = 7;
    gw_list_foreach(it, &px->ox->subs)
    {
        px_t *q = GW_CONTAINER_OF(it, px_t, slink);
        if (q->closed)
            continue;
        uint8_t v = req_urgency(q->s);
        if (v < u)
            u = v;
    }
    gw_back_set_urgency(px->ox->bx, u);
}

void gw_proxy_stream_closed(gw_proxy_t *p, gw_cstream_t *s)
{
    px_t *px = s->proxy_data;
    if (!px)
        return;
    s->proxy_data = NULL;
    px->closed = 1;
    if (px->x) {
        gw_list_remove(&px->x->rlink); /* a stream that waited for the cluster's answer */
        gw_proxy__auth_detach(px);     /* ... or for basic auth's verification */
        gw_proxy__cache_px_free(px);
    }
    gw_proxy__upload_unwatch(px);
    gw_proxy__acc_drop(px);
    /* a leader cancelled by its client does not cancel the followers: the exchange goes on
     * while anyone is subscribed */
    gw_proxy__sub_remove(px);
    GW_ASSERT(px->body_inflight == 0);
    if (px->x) {
        gw_zchunks_free(&px->x->zrep);
        gw_free(px->x);
    }
    gw_pool_put(&p->px_pool, px);
}
