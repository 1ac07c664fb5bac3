/* front/h2_stream.c — HTTP/2 connections: the sans-IO session of h2/ driven by the connection,
 * every request a client stream (proxy/stream.h) handed to the worker's translator, and the
 * pump that frames what the session has within the windows and the throttle budget. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "front/pacing.h"
#include "h2/errors.h"
#include "http/http.h"
#include "h2/session.h"

/* ---- HTTP/2 ------------------------------------------------------------------------------ */

/* RFC 9218 §8: the origin's `priority` response field re-prioritises the stream; the
 * parameters it names override the client's, the others stay. The field is still forwarded. */
static void h2s_response_priority(h2s_t *x, const gw_field_t *f, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!gw_slice_eq(f[k].name, GW_SLICE_LIT("priority")))
            continue;
        uint8_t u, inc;
        int found = gw_http_priority_parse(f[k].value, &u, &inc);
        if (found)
            (void)gw_h2_session_set_priority(x->c->h2, x->sid,
                                             found & GW_HTTP_PRIO_F_URGENCY ? (int)u : -1,
                                             found & GW_HTTP_PRIO_F_INCREMENTAL ? (int)inc : -1);
    }
}

static int h2s_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n,
                       int64_t content_length, int end_stream)
{
    h2s_t *x = (h2s_t *)s;
    gw_field_t fields[131];
    char len[24];
    if (x->gone)
        return 0;
    gw_front__log_head(s->log, status, end_stream);
    n = gw_front__with_request_id(s->log, f, n, fields, sizeof(fields) / sizeof(fields[0]) - 2);
    if (n == SIZE_MAX)
        return GW_E_LIMIT;
    n = gw_front__with_hsts(s, fields, n, sizeof(fields) / sizeof(fields[0]) - 1);
    if (content_length >= 0) {
        size_t ll = gw_fmt_u64(len, (uint64_t)content_length);
        fields[n++] = (gw_field_t){GW_SLICE_LIT("content-length"), {(const uint8_t *)len, ll}};
    }
    h2s_response_priority(x, fields, n);
    if (x->ws && status == 200 && !end_stream && !s->tunnel) { /* RFC 8441 §5: the tunnel */
        s->tunnel = 1;
        x->c->tunnels++;
    }
    int rv = gw_h2_session_submit_response(x->c->h2, x->sid, status, fields, n, end_stream);
    gw_front__kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    int rv = gw_h2_session_submit_response(x->c->h2, x->sid, status, f, n, 0);
    gw_front__kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_body(gw_cstream_t *s, gw_rbuf_t *b, size_t off, size_t len, int end_stream)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    if (s->log) {
        s->log->bytes_out += s->head_only ? 0 : len;
        if (end_stream)
            s->log->last_ns = gw_now_ns();
    }
    int rv = gw_h2_session_submit_data(x->c->h2, x->sid, b, off, len, end_stream);
    gw_front__kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2s_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return 0;
    if (s->log)
        s->log->last_ns = gw_now_ns();
    int rv = gw_h2_session_submit_trailers(x->c->h2, x->sid, f, n);
    gw_front__kick(x->c);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

/* gw_cs_reset_t values are the RFC 9113 §7 codes */
static void h2s_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    h2s_t *x = (h2s_t *)s;
    if (x->gone)
        return;
    gw_front__log_reset(s->log, (uint32_t)code);
    if (code == GW_CS_RESET_NO_ERROR) {
        /* the response is complete but may still be queued: a reset now would drop it
         * (RFC 9113 §8.1 wants the whole response, then the reset) */
        if (!x->rst_after) {
            x->rst_after = 1;
            x->c->b->h2_rst_after++;
        }
    } else {
        gw_h2_session_submit_rst(x->c->h2, x->sid, (uint32_t)code); /* on_close: deferred */
    }
    gw_front__kick(x->c);
}

static void h2s_credit(gw_cstream_t *s, size_t n)
{
    h2s_t *x = (h2s_t *)s;
    if (!x->gone && gw_front__body_limited(x->c)) {
        x->owed += n; /* the window reopens at the upload rate */
        gw_front__h2_credit_release(x->c, gw_front__now_us());
        return;
    }
    /* a closed stream's bytes were credited to the connection when it closed */
    if (x->gone || gw_h2_session_consume(x->c->h2, x->sid, n) < 0)
        return;
    if (gw_h2_session_want_write(x->c->h2))
        gw_front__kick(x->c);
}

static size_t h2s_pending(gw_cstream_t *s)
{
    h2s_t *x = (h2s_t *)s;
    return x->gone ? 0 : gw_h2_session_stream_queued(x->c->h2, x->sid);
}

static int h2s_urgency(gw_cstream_t *s)
{
    h2s_t *x = (h2s_t *)s;
    uint8_t u;
    int inc;
    if (x->gone || gw_h2_session_get_priority(x->c->h2, x->sid, &u, &inc) < 0)
        return GW_HTTP_PRIO_DEFAULT_URGENCY;
    return u;
}

static int h2s_push(gw_cstream_t *s, const gw_req_head_t *r);

static const gw_cstream_ops_t h2s_ops = {h2s_respond,  h2s_interim, h2s_body,
                                         h2s_trailers, h2s_reset,   h2s_credit,
                                         h2s_pending,  h2s_urgency, h2s_push};

/* ---- server push (RFC 9113 §8.4) --------------------------------------------------------- */

/* The proxy asks for a push while it answers the parent: the session queues the PUSH_PROMISE
 * now (ahead of the parent's response head, which the proxy sends next) and keeps the
 * request; the promised stream waits on c->b->h2_pushes until the loop hands it to the proxy
 * (an op never calls back into the proxy). */
static int h2s_push(gw_cstream_t *s, const gw_req_head_t *r)
{
    h2s_t *x = (h2s_t *)s;
    conn_t *c = x->c;
    if (x->gone || !c->b)
        return GW_E_NOENT;
    /* the listener's push: false is the proxy's to honour (gw_cstream_t.no_push) */
    int rv = gw_h2_session_can_push(c->h2);
    if (rv < 0)
        return rv;
    h2s_t *y = gw_pool_get(&W(c)->h2s_pool);
    if (!y)
        return GW_E_NOMEM;
    gw_h2_head_t h = {.method = r->method,
                      .scheme = r->scheme,
                      .authority = r->authority,
                      .path = r->path,
                      .headers = r->fields,
                      .headers_len = r->fields_len};
    uint32_t id;
    rv = gw_h2_session_submit_push(c->h2, x->sid, &h, &id, &y->push_req);
    if (rv < 0) {
        gw_pool_put(&W(c)->h2s_pool, y);
        if (gw_err_is_fatal(rv))
            gw_front__kick(c); /* the session failed the connection: flush its GOAWAY */
        return rv;
    }
    y->c = c;
    y->sid = id;
    y->given = SIZE_MAX;
    y->cs = gw_front__cstream(c, &h2s_ops, y, r->method);
    y->cs.log = &y->log;
    if (gw_h2_session_set_stream_data(c->h2, id, y) < 0) { /* cannot fail: the stream is new */
        gw_pool_put(&W(c)->h2s_pool, y);
        gw_h2_session_submit_rst(c->h2, id, GW_H2_CANCEL);
        return 0;
    }
    gw_list_push_back(&c->b->h2_pushes, &y->link);
    gw_front__kick(c);
    return 0;
}

/* Hand stream x, whose request is h (in the session's arena), to the translator: its route,
 * looked up once (the proxy takes it from the head; the front needs it for the route's
 * response_rate bucket), the access log record, then gw_proxy_request(). */
static int h2s_begin(conn_t *c, h2s_t *x, const gw_h2_head_t *h, int pushed)
{
    c->requests++;
    /* RFC 9113 §8.3.1, RFC 9110 §7.2: without :authority the Host field names the origin, and
     * it is what the origin is told (proxy/translate.c). So it is the request's authority for
     * everything else too: the route (and its policies: access list, client certificate, basic
     * auth) and every key of what is shared between clients (coalescing, the cache, learned
     * hints). An empty authority took the catch-all route and one coalescing key for every
     * Host. A Host that is no authority is left out: translate.c refuses the request. */
    gw_slice_t authority = h->authority;
    for (size_t i = 0; !authority.len && i < h->headers_len; i++)
        if (gw_slice_eq_nocase(h->headers[i].name, GW_SLICE_LIT("host"))) {
            if (gw_http_is_authority(h->headers[i].value))
                authority = h->headers[i].value;
            break;
        }
    const gw_cfg_route_t *route = gw_proxy_route(PROXY(c), authority, h->path);
    x->cs.misdirected = c->tls && gw_tls_misdirected(c->tls, authority.base, authority.len);
    if (c->g->route_rates)
        x->rb = gw_front__route_bucket(c, route);
    x->thr_mark = c->thr ? c->thr->waits : 0;
    gw_req_head_t rh = {
        .method = h->method,
        .scheme = h->scheme,
        .authority = authority,
        .path = h->path,
        .fields = h->headers,
        .fields_len = h->headers_len,
        .content_length = h->content_length,
        .end_stream = h->end_stream,
        .proto = GW_REQ_H2,
        .route = route,
        .protocol = h->protocol.base ? h->protocol : (gw_slice_t){0}, /* RFC 8441 */
        .pushed = pushed,
    };
    gw_front__log_start(c, &x->log, &rh, "h2");
    x->log.pushed = pushed != 0;
    return gw_proxy_request(PROXY(c), &x->cs, &rh);
}

/* The promised requests go to the proxy as requests of their own: routing, coalescing,
 * throttling and the access log as for any stream. */
void gw_front__h2_start_pushes(conn_t *c)
{
    while (c->b && !gw_list_empty(&c->b->h2_pushes) && !(c->flags & GW_CONN_F_CLOSED)) {
        h2s_t *y = GW_CONTAINER_OF(c->b->h2_pushes.next, h2s_t, link);
        gw_list_remove(&y->link);
        gw_list_push_back(&c->b->h2_streams, &y->link);
        int rv = h2s_begin(c, y, y->push_req, 1);
        if (rv < 0 && gw_err_is_fatal(rv))
            gw_h2_session_terminate(c->h2, GW_H2_INTERNAL_ERROR, "push failed");
    }
}

static int h2_on_request(void *ud, const gw_h2_head_t *h)
{
    conn_t *c = ud;
    /* cleared up to its record, which h2s_begin starts (gw_alog_init) before anything reads it:
     * the request id's bytes stay untouched unless the request has one */
    h2s_t *x = gw_pool_get_raw(&W(c)->h2s_pool);
    if (!x)
        return GW_E_NOMEM;
    memset(x, 0, offsetof(h2s_t, log));
    x->c = c;
    x->sid = h->stream_id;
    x->given = SIZE_MAX;
    x->cs = gw_front__cstream(c, &h2s_ops, x, h->method);
    x->ws = h->protocol.base != NULL;
    x->cs.log = &x->log;
    if (gw_h2_session_set_stream_data(c->h2, h->stream_id, x) < 0) {
        gw_pool_put(&W(c)->h2s_pool, x);
        return GW_E_NOMEM;
    }
    gw_list_push_back(&c->b->h2_streams, &x->link);
    int rv = h2s_begin(c, x, h, 0);
    return rv < 0 && gw_err_is_fatal(rv) ? rv : 0;
}

static int h2_on_data(void *ud, uint32_t sid, const uint8_t *data, size_t len)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    /* window returned by the proxy (ops->credit) only for what it passed on: hop-by-hop flow
     * control */
    if (x && !x->gone) {
        x->log.bytes_in += len;
        gw_proxy_body(PROXY(c), &x->cs, data, len);
    } else
        gw_h2_session_consume(c->h2, sid, len);
    return 0;
}

static int h2_on_trailers(void *ud, uint32_t sid, const gw_h2_header_t *h, size_t n)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_body_end(PROXY(c), &x->cs, h, n);
    return 0;
}

static int h2_on_end_stream(void *ud, uint32_t sid)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_body_end(PROXY(c), &x->cs, NULL, 0);
    return 0;
}

static void h2_on_writable(void *ud, uint32_t sid)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_writable(PROXY(c), &x->cs);
}

/* PRIORITY_UPDATE (applied by the session already) or a request's priority field (before
 * the proxy knows the stream: nothing to do) */
static void h2_on_priority(void *ud, uint32_t sid, gw_slice_t value)
{
    conn_t *c = ud;
    (void)value;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone)
        gw_proxy_reprioritize(PROXY(c), &x->cs);
}

/* An error code as the log writes it: its RFC 9113 name, or for a code §7 does not define
 * (one a client sent) its value, 0x%x, in buf. */
#define H2_CODE_NAME_LEN 16
static const char *h2_code_name(uint32_t code, char buf[H2_CODE_NAME_LEN])
{
    const char *name = gw_h2_error_str(code);
    if (strcmp(name, "UNKNOWN_ERROR"))
        return name;
    snprintf(buf, H2_CODE_NAME_LEN, "0x%x", (unsigned)code);
    return buf;
}

/* Debug data bytes of a client's GOAWAY that are logged (each as up to 4 characters) */
#define GOAWAY_DEBUG_LOG 128

/* The client's GOAWAY: no stream of the gateway's depends on it (a server opens none), but it
 * is the only trace of a client that ends the connection for something the gateway (or an
 * origin's answer passed on) did, so it is logged: at info with an error code, as the other
 * protocol faults are (h2_goaway, bad_request); at debug for NO_ERROR, a normal end. Only the
 * first GOAWAY and the first with an error code are, so repeated frames cannot flood the log.
 * The debug data is the client's (RFC 9113 §6.8: opaque, diagnostic): escaped and cut short. */
static void h2_on_goaway(void *ud, uint32_t last_sid, uint32_t code, gw_slice_t debug)
{
    conn_t *c = ud;
    if ((c->flags & GW_CONN_F_GOAWAY_IN) && (!code || (c->flags & GW_CONN_F_GOAWAY_IN_ERR)))
        return;
    c->flags |= GW_CONN_F_GOAWAY_IN | (code ? GW_CONN_F_GOAWAY_IN_ERR : 0);
    if (!code && !GW_LOG_ENABLED(GW_LOG_DEBUG))
        return;
    char text[GOAWAY_DEBUG_LOG * 4 + 1];
    size_t n = debug.len < GOAWAY_DEBUG_LOG ? debug.len : GOAWAY_DEBUG_LOG;
    gw_log_escape(text, sizeof(text), debug.base, n);
    char buf[H2_CODE_NAME_LEN];
    const char *name = h2_code_name(code, buf);
    if (code)
        GW_LOG_INFO("h2_goaway_received",
                    "peer=%s last_stream_id=%u code=%s debug=\"%s\" debug_len=%zu", PEER(c),
                    last_sid, name, text, debug.len);
    else
        GW_LOG_DEBUG("h2_goaway_received",
                     "peer=%s last_stream_id=%u code=%s debug=\"%s\" debug_len=%zu", PEER(c),
                     last_sid, name, text, debug.len);
}

/* The session closed a stream, possibly from inside an op the proxy called: the proxy is told
 * from the kick handle. */
static void h2_on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    conn_t *c = ud;
    h2s_t *x = gw_h2_session_get_stream_data(c->h2, sid);
    if (x && !x->gone) {
        x->gone = 1;
        gw_front__log_reset(&x->log, code);
        if (by_peer)
            x->log.client_gone = 1;
        if (x->rst_after) {
            x->rst_after = 0;
            c->b->h2_rst_after--;
        }
        gw_list_remove(&x->link);
        gw_list_push_back(&c->b->h2_gone, &x->link);
        gw_front__kick(c);
    } else if (!x) {
        gw_h2_session_stream_release(c->h2, sid);
    }
}

/* A request the session answered (431) or reset itself (malformed, refused): its line. */
static void h2_on_refused(void *ud, const gw_h2_head_t *h, unsigned status, uint32_t code,
                          const char *why)
{
    conn_t *c = ud;
    GW_LOG_DEBUG("h2_request_refused", "peer=%s stream=%u status=%u code=%s reason=\"%s\"", PEER(c),
                 h->stream_id, status, gw_h2_error_str(code), why ? why : "");
    gw_front__log_refused(c, h, status, code);
}

static const gw_h2_callbacks_t h2_cbs = {
    .on_request = h2_on_request,
    .on_data = h2_on_data,
    .on_trailers = h2_on_trailers,
    .on_end_stream = h2_on_end_stream,
    .on_close = h2_on_close,
    .on_writable = h2_on_writable,
    .on_priority = h2_on_priority,
    .on_goaway = h2_on_goaway,
    .on_refused = h2_on_refused,
};

static void h2_options(const gw_config_t *cfg, gw_h2_options_t *o)
{
    gw_h2_options_default(o);
    o->max_concurrent_streams = cfg->h2.max_concurrent_streams;
    o->initial_window_size = cfg->h2.initial_window_size;
    o->connection_window_size = cfg->h2.connection_window_size;
    o->max_frame_size = cfg->h2.max_frame_size;
    o->header_table_size = cfg->h2.header_table_size;
    o->max_header_list_size = cfg->h2.max_header_list_size;
    o->settings_timeout_ms = cfg->h2.settings_timeout_ms;
    o->max_requests_per_connection = cfg->h2.max_requests_per_connection;
    o->reset_budget = cfg->h2.reset_budget;
    o->reset_window_ms = cfg->h2.reset_window_ms;
    o->control_frame_budget = cfg->h2.control_frame_budget;
    o->empty_frame_budget = cfg->h2.empty_frame_budget;
    o->max_queued_control = cfg->h2.max_queued_control;
    o->max_priority_nodes = cfg->h2.max_priority_nodes;
    /* the proxy hands a stream up to limits.body_buffer (flow.c): asked for more at half of
     * it, the origin's next bytes are there before the stream runs dry */
    o->writable_lowat = cfg->limits.body_buffer / 2;
    /* no route pushes: no promise can be made, whatever a client allows */
    o->max_pushes = 0;
    for (size_t i = 0; i < cfg->routes_len; i++)
        if (cfg->routes[i].push)
            o->max_pushes = cfg->h2.max_pushes;
    /* RFC 8441 §3: offered only when a route would take a WebSocket (browsers do not fall back
     * to HTTP/1.1 when the setting promises what the origin cannot do) */
    for (size_t i = 0; i < cfg->routes_len; i++)
        if (cfg->routes[i].websocket)
            o->enable_connect_protocol = 1;
}

void gw_front__h2_tell_gone(conn_t *c)
{
    if (!c->b)
        return;
    while (!gw_list_empty(&c->b->h2_gone)) {
        h2s_t *x = GW_CONTAINER_OF(c->b->h2_gone.next, h2s_t, link);
        gw_list_remove(&x->link);
        gw_front__stream_done(c, &x->cs, x->thr_mark);
        gw_h2_session_stream_release(c->h2, x->sid); /* nothing of ours runs for it any more */
        gw_pool_put(&W(c)->h2s_pool, x);
    }
}

/* The connection closes: the abuse limits its client hit are counted, and logged when any was
 * (every cap is counted). */
void gw_front__h2_closing(conn_t *c)
{
    gw_h2_stats_t st = gw_h2_session_stats(c->h2);
    gw_front__metrics_h2_closed(W(c), &st);
    uint64_t hits = st.reset_budget_hits + st.control_flood_hits + st.empty_frame_hits +
                    st.queued_control_hits + st.header_list_hits + st.header_block_hits +
                    st.max_requests_hits + st.settings_timeouts + st.priority_evictions;
    if (hits || st.malformed_requests || st.streams_refused)
        GW_LOG_INFO(
            "h2_limits",
            "peer=%s streams=%llu refused=%llu malformed=%llu resets_in=%llu "
            "resets_provoked=%llu rapid_reset=%llu control_flood=%llu "
            "empty_frames=%llu queued_control=%llu header_list=%llu "
            "header_block=%llu max_requests=%llu settings_timeout=%llu "
            "priority_evictions=%llu",
            PEER(c), (unsigned long long)st.streams_opened, (unsigned long long)st.streams_refused,
            (unsigned long long)st.malformed_requests, (unsigned long long)st.resets_received,
            (unsigned long long)st.resets_provoked, (unsigned long long)st.reset_budget_hits,
            (unsigned long long)st.control_flood_hits, (unsigned long long)st.empty_frame_hits,
            (unsigned long long)st.queued_control_hits, (unsigned long long)st.header_list_hits,
            (unsigned long long)st.header_block_hits, (unsigned long long)st.max_requests_hits,
            (unsigned long long)st.settings_timeouts, (unsigned long long)st.priority_evictions);
}

/* The connection is closed: every stream the proxy knows is finished and goes back to the pool;
 * promised pushes never started go back too. */
void gw_front__h2_closed(conn_t *c)
{
    gw_front_t *w = W(c);
    gw_list_foreach_safe(it, tmp, &c->b->h2_gone)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        gw_front__stream_done(c, &x->cs, x->thr_mark);
        gw_pool_put(&w->h2s_pool, x);
    }
    gw_list_foreach_safe(it, tmp, &c->b->h2_pushes) /* promised, never started */
    {
        gw_pool_put(&w->h2s_pool, GW_CONTAINER_OF(it, h2s_t, link));
    }
    /* The streams the session still has (its on_close does not fire when it goes): their
     * ops are no-ops from here, and their lines are made while the session keeps their
     * heads and the TLS state its version, cipher and server name. */
    gw_list_foreach_safe(it, tmp, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        x->gone = 1;
        gw_front__stream_done(c, &x->cs, x->thr_mark);
        gw_pool_put(&w->h2s_pool, x);
    }
}

int gw_front__start_h2(conn_t *c)
{
    gw_front_t *w = W(c);
    int rv;
    if (!c->g->h2prof) {
        /* one copy of the options and callbacks for the sessions of the worker's generation */
        gw_h2_options_t o;
        h2_options(CFG(c), &o);
        if ((rv = gw_h2_profile_new(&c->g->h2prof, &o, &h2_cbs)) < 0)
            return rv;
    }
    if (!w->h2s_pool_ok) {
        /* h2s_t of closed streams are kept for the next ones (calloc and free were a tenth
         * of the allocator's cost per request) */
        gw_pool_init(&w->h2s_pool, sizeof(h2s_t), 0, GW_POOL_KEEP);
        w->h2s_pool_ok = 1;
    }
    c->last_active_ms = gw_now_ms();
    rv = gw_h2_session_new_with(&c->h2, c->g->h2prof, c, c->last_active_ms);
    if (rv < 0)
        return rv;
    c->state = CS_H2;
    /* accepted just before a stop or a reload: its first requests are served, then GOAWAY
     * (at once for a stop; once quiet for a reload) */
    if (c->flags & GW_CONN_F_DRAIN) {
        c->flags &= (uint16_t)~GW_CONN_F_STOPPING;
        uint64_t half = CFG(c)->timeouts.graceful_shutdown_ms / 2;
        c->stop_due = c->last_active_ms + half + 1;
    } else if (c->flags & GW_CONN_F_STOPPING) {
        c->flags &= (uint16_t)~GW_CONN_F_STOPPING;
        gw_front__h2_goaway(c);
    }
    return 0;
}

/* Arm the timer for the earlier of the session's own deadline and the idle timeout. */
static void h2_arm(conn_t *c)
{
    uint64_t now = gw_now_ms();
    uint64_t due = c->last_active_ms + CFG(c)->timeouts.idle_ms;
    uint64_t sd = gw_h2_session_next_deadline(c->h2);
    if (sd < due)
        due = sd;
    if (c->stop_due && c->stop_due < due)
        due = c->stop_due;
    /* draining: the GOAWAY goes once the connection has been quiet for drain_grace */
    uint64_t quiet = c->last_active_ms + CFG(c)->timeouts.drain_grace_ms;
    if ((c->flags & GW_CONN_F_DRAIN) && !(c->flags & GW_CONN_F_STOPPING) &&
        gw_h2_session_active_streams(c->h2) == 0 && quiet < due)
        due = quiet;
    /* Idle with its busy state still held (a response ended and no read came since): give it
     * back in a while rather than at the next read, which may not come before the idle
     * timeout. Not at once: a client sending one request after the other would make every
     * request allocate it again. */
    if (c->b && gw_h2_session_active_streams(c->h2) == 0 && now + H2_IDLE_RELEASE_MS < due)
        due = now + H2_IDLE_RELEASE_MS;
    gw_front__arm(c, due > now ? due - now : 1);
}

/* The socket's TCP_NOTSENT_LOWAT (tcp(7)) for the pacing the connection needs now: the kernel
 * takes no more than that beyond what it has sent, so what waits for the client's link waits
 * in the session, where the scheduler can still put a more urgent stream first. Pacing costs a
 * write round (a wake-up, a partial write, a TCP_INFO reading) per lowat or so of the link, so
 * it is tight only while it can matter (RFC 9218 §10 order between live streams):
 *   PACED (h2.notsent_lowat): framing all that is queued would put more than h2.frame_ahead
 *     of DATA ahead of a more urgent stream that is still to send (its origin has not answered
 *     yet, or it waits for a window); it stays until the live streams are all of one urgency
 *     or less than half of that is left behind them (hysteresis: a page does not flip the
 *     socket option with every chunk its origins send);
 *   BULK (h2.bulk_lowat): several streams live, all of one urgency, or one alone that has
 *     sent h2.bulk_lowat already: nothing to reorder now, but a more urgent request may come
 *     (a browser asks for the stylesheets and scripts a page names while the page streams
 *     alone); the looser bound keeps what it would find ahead of it to the bulk lowat and
 *     what is in flight, with fewer, larger writes. A lone stream went unpaced until it was
 *     seen to put the kernel's send buffer ahead of such a request (3.7 MiB, 930 ms at
 *     4 MB/s, in test_priority_latency.py); paced, it costs TCP_INFO readings (2-3.5 per MiB
 *     of a download on loopback: see h2_data_max) and, when the client reads slower than the
 *     origin sends, a write round per half lowat it reads;
 *   neither (the kernel's default): at most one stream live and it has sent less than
 *     h2.bulk_lowat: written as without pacing, since that is no more than the bulk lowat
 *     would let it put ahead of a later request anyway (a response smaller than it, the usual
 *     one, pays no system call for pacing). A connection paced already goes back to it only
 *     while what is queued does not take that stream past h2.bulk_lowat: else the write
 *     after the switch would send it that far, and the next step set the bulk lowat again.
 * A tighter option is set at once; a looser one only once more is queued than the tighter one
 * lets through (a connection of small answers pays no system call for it). Returns the lowat
 * the socket has now, 0 for none. */
static size_t h2_pacing_mode(conn_t *c)
{
    const gw_config_t *cfg = CFG(c);
    size_t ahead = cfg->h2.frame_ahead;
    int have = (c->flags & GW_CONN_F_PACED) ? 2 : (c->flags & GW_CONN_F_BULK) ? 1 : 0;
    const size_t lowat[3] = {0, cfg->h2.bulk_lowat, cfg->h2.notsent_lowat};
    size_t queued = gw_h2_session_data_queued(c->h2);
    if (queued == 0 || (lowat[have] && c->queued >= ahead))
        return lowat[have]; /* no DATA to frame now: nothing to decide yet */
    gw_h2_pacing_view_t v;
    gw_h2_session_pacing_view(c->h2, ahead, &v);
    int want = (c->flags & GW_CONN_F_PACED) ? (v.one_class || v.behind < ahead / 2 ? 0 : 2)
                                            : (v.behind > ahead ? 2 : 0);
    /* paced already: a lone stream that what is queued takes past the bulk lowat keeps it
     * (unpaced, one unbounded write, then the same option set again: two setsockopt) */
    if (!want && (v.live > 1 || v.next_sent >= cfg->h2.bulk_lowat ||
                  (have && v.next_sent + queued >= cfg->h2.bulk_lowat)))
        want = 1;
    if (want == have)
        return lowat[have];
    /* the same option (bulk_lowat 0 or equal to notsent_lowat): no system call; a looser one
     * waits until it lets more through than the tighter one would */
    uv_os_fd_t fd;
    if (lowat[want] != lowat[have]) {
        if (want < have && queued <= lowat[have] + ahead)
            return lowat[have];
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
            return lowat[have];
        /* 0 gives the socket the kernel's default (net.ipv4.tcp_notsent_lowat) back; a
         * failure leaves the option as it was, and the mode is not asked for again */
        (void)gw_pacing_set_lowat(fd, lowat[want]);
    }
    c->flags &= (uint16_t) ~(GW_CONN_F_PACED | GW_CONN_F_BULK);
    c->flags |= want == 2 ? GW_CONN_F_PACED : want == 1 ? GW_CONN_F_BULK : 0;
    c->b->h2_room = 0; /* read under another lowat */
    have = want;
    return lowat[have];
}

/* How long a TCP_INFO reading of the room stands for the steps that follow it (h2_data_max).
 * Short: a loss found meanwhile shrinks the congestion window, and what the reading then
 * overstates waits in the write queue (which drops the reading) for one step. */
#define H2_ROOM_FRESH_US 1000

/* How much DATA the next step frames: h2.frame_ahead beyond what the socket has not taken, plus,
 * when nothing of ours waits for it, what it takes now (gw_pacing_room: what the windows let it
 * send at once and what it keeps unsent under its lowat), so that on a fast path one write
 * still carries all of it. Without a lowat (h2.notsent_lowat 0, or no pacing needed yet: see
 * h2_pacing_mode) the kernel's send buffer takes what it has room for (megabytes): everything
 * the windows allow is framed. */
static size_t h2_data_max(conn_t *c, uint64_t now_us)
{
    const gw_config_t *cfg = CFG(c);
    size_t ahead = cfg->h2.frame_ahead;
    if (!cfg->h2.notsent_lowat)
        return SIZE_MAX;
    size_t lowat = h2_pacing_mode(c);
    if (!lowat)
        return SIZE_MAX;
    if (c->queued >= ahead)
        return 0;
    /* TCP_INFO only when it can matter: more is queued than one step frames anyway */
    uv_os_fd_t fd;
    size_t queued = gw_h2_session_data_queued(c->h2);
    if (c->queued || queued <= ahead)
        return ahead - c->queued;
    /* The room read a moment ago, less what was written since, is there still while the
     * socket took all of that (h2_send_step drops it otherwise, h2_pacing_mode when the lowat
     * changes): sending moves bytes from unsent to in flight, and acknowledgements widen the
     * windows. A download whose origin feeds it faster than the link drains read TCP_INFO
     * before every write (8.3 per MiB on loopback; 2-3 now). */
    if (c->b->h2_room >= queued && now_us - c->b->h2_room_us < H2_ROOM_FRESH_US)
        return c->b->h2_room < SIZE_MAX - ahead ? c->b->h2_room + ahead : SIZE_MAX;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return ahead;
    size_t room = gw_pacing_room(fd, lowat);
    c->b->h2_room = room;
    c->b->h2_room_us = now_us;
    return room < SIZE_MAX - ahead ? room + ahead : SIZE_MAX;
}

/* One step of h2_send: frame what the session has, DATA up to h2_data_max(), and write it
 * (through TLS). The bytes framed, or a negative code. */
static ssize_t h2_send_step(conn_t *c)
{
    /* the socket is full: frames wait in the session (within the windows), not in our write
     * queue; after_write kicks when it drains */
    uint64_t tnow = gw_front__now_us();
    gw_front__h2_budget(c, tnow);
    ssize_t n = c->queued < CFG(c)->limits.write_buffer
                    ? gw_h2_session_send_some(c->h2, &c->b->oq, h2_data_max(c, tnow))
                    : 0;
    if (n >= 0 && c->b->h2_rst_after) {
        /* early responses whose last DATA is framed: now the RST_STREAM(NO_ERROR) */
        int any = 0;
        gw_list_foreach_safe(it, tmp, &c->b->h2_streams) /* the reset moves x to h2_gone */
        {
            h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
            if (x->rst_after &&
                gw_h2_session_stream_state(c->h2, x->sid) == GW_H2_SS_HALF_CLOSED_LOCAL) {
                x->rst_after = 0;
                c->b->h2_rst_after--;
                gw_h2_session_submit_rst(c->h2, x->sid, GW_H2_NO_ERROR);
                any = 1;
            }
        }
        if (any) {
            ssize_t m = gw_h2_session_send_some(c->h2, &c->b->oq, 0);
            n = m < 0 ? m : n + m;
        }
    }
    gw_front__h2_charge(c, tnow);
    int rv = 0;
    if (c->tls) {
        /* TLS encrypts into its own buffer anyway: feed it the iovecs in order */
        struct iovec v[64];
        size_t cnt;
        while (rv == 0 && (cnt = gw_iovq_peek(&c->b->oq, v, 64)) > 0) {
            size_t bytes = 0;
            for (size_t i = 0; i < cnt; i++)
                bytes += v[i].iov_len;
            rv = gw_tls_writev(c->tls, v, cnt);
            gw_iovq_consume(&c->b->oq, bytes);
        }
        if (rv == 0)
            rv = gw_front__flush(c);
    } else {
        rv = gw_front__flush(c); /* anything queued before keeps its place */
        if (rv == 0)
            rv = gw_front__send_iovq(c, &c->b->oq);
    }
    /* what the room read last has left (h2_data_max), none once the socket did not take all */
    size_t took = n > 0 ? (size_t)n : 0;
    c->b->h2_room = c->queued || took >= c->b->h2_room ? 0 : c->b->h2_room - took;
    return n < 0 ? n : rv < 0 ? rv : n;
}

/* Frame and write while the socket takes all of it: the scheduler is asked for DATA a step at a
 * time (h2_data_max), and for no more than h2.frame_ahead once a write is left pending; the
 * rest waits in the session, in priority order, until after_write kicks. The kernel keeps at
 * most about h2.notsent_lowat unsent (gw_front__start_h2). Framing all that the windows allow
 * (megabytes with a browser's windows) put whatever the origins answered first ahead of a
 * more urgent response that arrived a moment later, for as long as the client took to read
 * it. 0 or a negative code. */
static int h2_send(conn_t *c)
{
    ssize_t n;
    gw_front__oq_lend(c);
    while ((n = h2_send_step(c)) > 0 && c->queued == 0 && gw_h2_session_want_write(c->h2))
        ;
    gw_front__oq_return(c);
    return n < 0 ? (int)n : 0;
}

/* Session output → (TLS) → socket; then decide whether the connection is done. */
void gw_front__h2_pump(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    /* an idle connection (no busy state) with nothing to frame stays as small as it is, as
     * when its timer only re-arms */
    if (c->b || gw_h2_session_want_write(c->h2)) {
        if (gw_front__need_busy(c) < 0 || h2_send(c) < 0) {
            gw_front__conn_close(c, "h2_send_failed");
            return;
        }
    }
    /* streams the send just closed give their slot back now, before the peer's next
     * HEADERS can be read (else a fast client sees REFUSED_STREAM at the limit) */
    gw_front__h2_tell_gone(c);
    /* A kick made while this pump framed (a stream handed its next bytes as it was framed, a
     * stream closed) asked for what the pump just did: what it left waits for the write it
     * left pending, whose callback kicks again (gw_front__after_write). Run, the kick would
     * cost a loop turn that does not sleep (an epoll_wait with no timeout) and a pump that
     * frames nothing, once per paced write round. */
    if (c->queued && c->b && gw_list_empty(&c->b->h2_pushes) && gw_list_empty(&c->b->h2_gone))
        gw_front__unkick(c);
    if (gw_h2_session_active_streams(c->h2))
        c->last_active_ms = gw_now_ms();
    if (gw_h2_session_should_close(c->h2) ||
        ((c->flags & GW_CONN_F_STOPPING) && gw_h2_session_active_streams(c->h2) == 0 &&
         gw_h2_session_phase(c->h2) != GW_H2_CONN_SHUTDOWN_PENDING)) {
        const char *reason = NULL;
        uint32_t code = gw_h2_session_goaway_code(c->h2, &reason);
        if (code) {
            char buf[H2_CODE_NAME_LEN];
            GW_LOG_INFO("h2_goaway", "peer=%s code=%s reason=\"%s\"", PEER(c),
                        h2_code_name(code, buf), reason ? reason : "");
        }
        gw_front__finish(c, code ? "h2_connection_error" : "h2_done");
        return;
    }
    h2_arm(c);
}

void gw_front__process_h2(conn_t *c)
{
    gw_front__h2_tell_gone(c);
    if (gw_front__in_len(c)) {
        ssize_t n = gw_h2_session_recv(c->h2, c->b->in.base, c->b->in.len, gw_now_ms());
        c->last_active_ms = gw_now_ms();
        /* on a connection error the session has queued its GOAWAY: send it, then close */
        gw_bytes_consume(&c->b->in, n < 0 ? c->b->in.len : (size_t)n);
    }
    gw_front__h2_pump(c);
    if (!(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER)) && (c->flags & GW_CONN_F_EOF))
        gw_front__finish(c, gw_front__peer_end(c));
}

void gw_front__h2_goaway(conn_t *c)
{
    if (c->flags & GW_CONN_F_STOPPING)
        return;
    /* RFC 9113 §6.8: GOAWAY with the highest id and a PING; when the PING comes back, the real
     * last stream id. Streams the client sent meanwhile are served, not lost. A peer that does
     * not answer the PING gets the final GOAWAY after timeouts.drain_grace. */
    c->flags |= GW_CONN_F_STOPPING;
    gw_h2_session_shutdown(c->h2, 0);
    uint64_t grace = CFG(c)->timeouts.drain_grace_ms;
    c->stop_due = gw_now_ms() + (grace ? grace : 1);
    gw_front__h2_pump(c);
}

void gw_front__h2_timeout(conn_t *c)
{
    uint64_t now = gw_now_ms();
    gw_h2_session_tick(c->h2, now);
    if (!(c->flags & GW_CONN_F_STOPPING) && (c->flags & GW_CONN_F_DRAIN) &&
        ((c->stop_due && now >= c->stop_due) ||
         (gw_h2_session_active_streams(c->h2) == 0 &&
          now >= c->last_active_ms + CFG(c)->timeouts.drain_grace_ms))) {
        gw_front__h2_goaway(c); /* quiet, or half the drain deadline passed */
    } else if ((c->flags & GW_CONN_F_STOPPING) && c->stop_due && now >= c->stop_due) {
        c->stop_due = 0; /* the PING of the two-step GOAWAY was not answered in time */
        gw_h2_session_shutdown(c->h2, 1);
    }
    gw_front__release_idle_buffers(c); /* h2_arm's early wake-up for this, or any other timeout */
    if (gw_h2_session_active_streams(c->h2) == 0 &&
        now >= c->last_active_ms + CFG(c)->timeouts.idle_ms) {
        GW_LOG_DEBUG("timeout", "peer=%s kind=idle proto=h2", PEER(c));
        gw_h2_session_shutdown(c->h2, 1);
        c->flags |= GW_CONN_F_STOPPING;
    }
    gw_front__h2_pump(c);
}
