/* front/h1_stream.c — the HTTP/1.1 front: requests parsed by h1/'s request parser become client
 * streams (proxy/stream.h), one at a time per keep-alive connection; responses are serialized
 * back (chunked, 1xx, trailers). */
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "h1/serializer.h"
#include "http/http.h"

/* ---- the exchange's state (h1x_state_t) ---------------------------------------------------- */

const char *gw_front__h1x_state_str(h1x_state_t st)
{
    static const char *const names[] = {
        [H1X_IDLE] = "idle",           [H1X_RECV] = "recv",   [H1X_RECV_RESP] = "recv_resp",
        [H1X_RECV_DONE] = "recv_done", [H1X_WAIT] = "wait",   [H1X_SENDING] = "sending",
        [H1X_DONE] = "done",           [H1X_ENDED] = "ended",
    };
    return (size_t)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

/* A response head was written (it may also be the whole response: see h1x_resp_whole). */
static void h1x_resp_head(h1x_t *h)
{
    if (h->state == H1X_RECV)
        h->state = H1X_RECV_RESP;
    else if (h->state == H1X_WAIT)
        h->state = H1X_SENDING;
}

/* The response has been handed over whole. */
static void h1x_resp_whole(h1x_t *h)
{
    if (h->state == H1X_RECV || h->state == H1X_RECV_RESP)
        h->state = H1X_RECV_DONE;
    else if (h->state == H1X_WAIT || h->state == H1X_SENDING)
        h->state = H1X_DONE;
}

/* The parser has seen the whole request. */
static void h1x_req_complete(h1x_t *h)
{
    if (h->state == H1X_RECV)
        h->state = H1X_WAIT;
    else if (h->state == H1X_RECV_RESP)
        h->state = H1X_SENDING;
    else if (h->state == H1X_RECV_DONE)
        h->state = H1X_DONE;
}

/* A response head has been written for the current exchange: a parse error in what is left of
 * its request is then not answered with a 400 of its own. After an exchange that ended
 * (H1X_ENDED: its response handed over whole) the bytes are the next request's, which gets
 * its 400 like the first one (a malformed second request on a keep-alive connection was
 * closed without an answer or a log line). */
static int h1x_resp_started(const h1x_t *h)
{
    return h->state != H1X_IDLE && h->state != H1X_RECV && h->state != H1X_WAIT &&
           h->state != H1X_ENDED;
}

void gw_front__h1x_end(conn_t *c)
{
    if (!h1x_active(c->h1))
        return;
    c->h1->state = H1X_ENDED;
    gw_front__stream_done(c, &c->h1->s, c->h1->thr_mark);
}

/* ---- HTTP/1.1 front ------------------------------------------------------------------------ */

/* Response fields with room for the x-request-id the front adds (more are sent as they are). */
#define GW_H1_RESP_FIELDS_ID 128

/* The origin agreed to the WebSocket: the 101 goes out with its Upgrade and
 * Connection (the proxy put them there), and from now on the connection carries bytes both ways
 * (gw_front__process_h1 → tunnel_in) until either side ends; timeouts.tunnel_idle watches it. */
static int h1s_switch(conn_t *c, gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    c->h1->tunnel = 1;
    s->tunnel = 1;
    c->tunnels++;
    c->h1->resp_chunked = 0;
    c->h1->keep_alive = 0; /* after a tunnel, nothing */
    h1x_resp_head(c->h1);
    gw_front__log_head(s->log, 101, 0);
    int rv = gw_h1_response_head(&c->b->out, 101, f, n, -1, 1);
    if (rv < 0)
        return rv;
    gw_front__arm(c, CFG(c)->timeouts.tunnel_idle_ms);
    gw_front__kick(c); /* bytes the client sent after its request are the tunnel's now */
    rv = gw_front__flush(c);
    if (rv == 0)
        gw_front__release_idle_buffers(c);
    return rv;
}

static int h1s_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n,
                       int64_t content_length, int end_stream)
{
    conn_t *c = s->impl;
    if (c->h1->ws) {
        c->h1->ws = 0;
        if (status == 101)
            return h1s_switch(c, s, f, n);
        /* refused (or answered by the gateway): an ordinary response, and the connection goes
         * on as HTTP/1.1 (the request had no body) */
    }
    if (c->flags & GW_CONN_F_STOPPING)
        c->h1->keep_alive = 0; /* graceful stop: this is the connection's last response */
    /* RFC 9110 §15.5.9: a 408 means the server closes rather than wait on: say so */
    if (status == 408)
        c->h1->keep_alive = 0;
    int64_t framing = end_stream && content_length < 0 ? 0 : content_length;
    if (c->h1->http10 && framing < 0) {
        /* RFC 9112 §6.1, §7: an HTTP/1.0 recipient knows no chunked coding; the body is
         * delimited by the close */
        framing = GW_H1_CLOSE_DELIMITED;
        c->h1->keep_alive = 0;
    }
    c->h1->resp_chunked = framing == -1 && !s->head_only;
    h1x_resp_head(c->h1);
    gw_front__log_head(s->log, status, end_stream);
    gw_field_t withid[GW_H1_RESP_FIELDS_ID];
    int hsts = s->tls && s->listen && s->listen->hsts;
    if (((s->log && s->log->id_len) || hsts) && n < GW_H1_RESP_FIELDS_ID - 1) {
        n = gw_front__with_request_id(s->log, f, n, withid, GW_H1_RESP_FIELDS_ID - 1);
        n = gw_front__with_hsts(s, withid, n, GW_H1_RESP_FIELDS_ID);
        f = withid;
    }
    int rv = gw_h1_response_head(&c->b->out, status, f, n, framing, c->h1->keep_alive);
    if (rv < 0)
        return rv;
    if (end_stream)
        h1x_resp_whole(c->h1);
    gw_front__kick(c); /* the head goes out with the first body bytes, or from the kick */
    return 0;
}

static int h1s_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    conn_t *c = s->impl;
    /* RFC 9110 §15.2: no 1xx to an HTTP/1.0 client (an HTTP/1.0 intermediary could take the
     * 103 for the answer to its request): dropped */
    if (c->h1->http10)
        return 0;
    /* A 1xx head carries no framing (RFC 9110 §15.2); keep_alive only adds no close line. */
    int rv = gw_h1_response_head(&c->b->out, status, f, n, -1, 1);
    return rv < 0 ? rv : gw_front__flush(c);
}

static int h1s_body(gw_cstream_t *s, gw_rbuf_t *b, size_t off, size_t len, int end_stream)
{
    conn_t *c = s->impl;
    int rv = 0;
    if (s->log) {
        s->log->bytes_out += s->head_only ? 0 : len;
        if (end_stream)
            s->log->last_ns = gw_now_ns();
    }
    if (c->h1->tunnel && len)
        gw_front__arm(c, CFG(c)->timeouts.tunnel_idle_ms); /* the origin spoke */
    if (!s->head_only && len) {
        if (c->h1->resp_chunked) {
            uint8_t hdr[GW_H1_CHUNK_HEAD_MAX];
            rv = gw_bytes_append(&c->b->out, hdr, gw_h1_chunk_head(hdr, len));
        }
        if (rv == 0)
            rv = gw_bytes_append(&c->b->out, b->data + off, len);
        if (rv == 0 && c->h1->resp_chunked)
            rv = gw_bytes_append(&c->b->out, GW_H1_CHUNK_END, GW_H1_CHUNK_END_LEN);
    }
    if (rv == 0 && end_stream && c->h1->resp_chunked)
        rv = gw_h1_last_chunk(&c->b->out, NULL, 0);
    if (rv < 0)
        return rv;
    if (end_stream) {
        h1x_resp_whole(c->h1);
        gw_front__kick(c);
    }
    rv = gw_front__flush(c);
    if (c->h1->tunnel && rv == 0)
        gw_front__release_idle_buffers(c); /* a tunnel between bursts holds no empty buffers */
    return rv;
}

/* RFC 9112 §7.1.2: trailer fields after the last chunk; dropped when the body had a length. */
static int h1s_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    conn_t *c = s->impl;
    int rv = 0;
    if (c->h1->resp_chunked)
        rv = gw_h1_last_chunk(&c->b->out, f, n);
    if (rv < 0)
        return rv;
    if (s->log)
        s->log->last_ns = gw_now_ns();
    h1x_resp_whole(c->h1);
    gw_front__kick(c);
    return gw_front__flush(c);
}

/* HTTP/1.1 has no stream reset: what was answered is flushed and the connection closes (a
 * response cut short shows as a short body or a missing last chunk). */
static void h1s_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    conn_t *c = s->impl;
    GW_LOG_DEBUG("h1_reset", "peer=%s code=%d state=%s", PEER(c), (int)code,
                 gw_front__h1x_state_str((h1x_state_t)c->h1->state));
    c->h1->keep_alive = 0;
    gw_front__log_reset(s->log, (uint32_t)code);
    gw_front__finish(c, code == GW_CS_RESET_NO_ERROR ? "early_response" : "stream_reset");
}

static void h1s_credit(gw_cstream_t *s, size_t n)
{
    conn_t *c = s->impl;
    int was_full = c->h1->inflight >= CFG(c)->limits.body_buffer;
    c->h1->inflight -= n;
    if (was_full && c->h1->inflight < CFG(c)->limits.body_buffer)
        gw_front__kick(c); /* parse the body bytes waiting in c->b->in */
}

static size_t h1s_pending(gw_cstream_t *s)
{
    conn_t *c = s->impl;
    return c->queued + gw_front__out_len(c);
}

/* RFC 9218 §5: the request's priority field, parsed once when the head arrived (HTTP/1.1 has
 * no PRIORITY_UPDATE: it cannot change afterwards). */
static int h1s_urgency(gw_cstream_t *s)
{
    conn_t *c = s->impl;
    return c->h1->urgency;
}

/* no push: HTTP/2 only (RFC 9113 §8.4) */
static const gw_cstream_ops_t h1s_ops = {h1s_respond,  h1s_interim, h1s_body,
                                         h1s_trailers, h1s_reset,   h1s_credit,
                                         h1s_pending,  h1s_urgency, NULL};

/* RFC 9112 §3.2.2: an absolute-form target (the parser let through no other scheme than http
 * and https, nor userinfo or an empty authority) becomes the origin-form request the rest of
 * the gateway knows: the URI's authority in *authority (an IPv6 host with its brackets, as
 * "[::1]:8080": RFC 3986 §3.2.2, checked by the parser), in place of Host (which is then ignored,
 * however it differs: §3.2.2 says so), and its path and query in *path ("/" for an empty path,
 * §3.2.1). The request's scheme stays the listener's (the URI's names only how the client
 * reached us). Anything else is left as it is. 0, or GW_E_NOMEM. */
static int absolute_form(h1x_t *x, gw_slice_t *authority, gw_slice_t *path)
{
    /* §3.2.1: a target starting with '/' is origin-form, never absolute-form; the parser has
     * checked its bytes (gw_h1__check_head), so it needs no second scan */
    if (path->len && path->base[0] == '/')
        return 0;
    gw_slice_t a, rest;
    if (gw_http_target_form(*path, &a, &rest) != GW_HTTP_TARGET_ABSOLUTE)
        return 0;
    *authority = a;
    if (rest.len && rest.base[0] == '/') {
        *path = rest;
        return 0;
    }
    if (!rest.len) {
        *path = GW_SLICE_LIT("/");
        return 0;
    }
    if (rest.len + 1 > x->path_cap) { /* "?query": its path is "/" */
        char *n = gw_realloc(x->path, rest.len + 1);
        if (!n)
            return GW_E_NOMEM;
        x->path = n;
        x->path_cap = rest.len + 1;
    }
    x->path[0] = '/';
    memcpy(x->path + 1, rest.base, rest.len);
    *path = (gw_slice_t){(const uint8_t *)x->path, rest.len + 1};
    return 0;
}

static int h1_on_head(void *ud, const gw_h1_msg_t *m)
{
    conn_t *c = ud;
    c->requests++;
    c->h1->keep_alive = (m->flags & GW_H1_MSG_F_KEEP_ALIVE) && !(c->flags & GW_CONN_F_STOPPING);
    c->h1->http10 = m->version_major == 1 && m->version_minor == 0;
    /* RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored */
    c->h1->expect_100 = (m->flags & GW_H1_MSG_F_EXPECT_100) && !c->h1->http10;
    c->h1->state = H1X_IDLE; /* a new request head: nothing answered yet */
    c->h1->inflight = 0;
    if (m->fields_len > c->h1->fields_cap) {
        gw_field_t *n = gw_realloc(c->h1->fields, m->fields_len * sizeof(*n));
        if (!n)
            return GW_E_NOMEM;
        c->h1->fields = n;
        c->h1->fields_cap = m->fields_len;
    }
    uint8_t urgency = GW_HTTP_PRIO_DEFAULT_URGENCY, inc;
    for (size_t i = 0; i < m->fields_len; i++) /* §5: the last valid member wins */
        if (gw_slice_eq_nocase(m->fields[i].name, GW_SLICE_LIT("priority")))
            gw_http_priority_parse(m->fields[i].value, &urgency, &inc);
    c->h1->urgency = urgency;
    if (m->fields_len) /* an HTTP/1.0 request may have none: no memcpy from NULL */
        memcpy(c->h1->fields, m->fields, m->fields_len * sizeof(gw_field_t));
    const gw_h1_field_t *host = gw_h1_msg_field(m, "host");
    gw_slice_t authority = host ? host->value : (gw_slice_t){0}, path = m->target;
    if (absolute_form(c->h1, &authority, &path) < 0)
        return GW_E_NOMEM;
    c->h1->ws = c->h1->tunnel = c->h1->tunnel_eof = 0;
    gw_req_head_t h = {
        .method = m->method,
        .scheme = c->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http"),
        .authority = authority,
        .path = path,
        .fields = c->h1->fields,
        .fields_len = m->fields_len,
        .content_length = m->content_length,
        .end_stream = m->content_length == 0,
        .proto = GW_REQ_HTTP1,
    };
    h.route = gw_proxy_route(PROXY(c), h.authority, h.path);
    /* RFC 6455 §4.1 on a route that allows it (HTTP/1.0 has no Upgrade: RFC 9110 §7.8) */
    if (h.route && h.route->websocket && !c->h1->http10 &&
        gw_proxy_ws_h1_request(m->method, c->h1->fields, m->fields_len)) {
        c->h1->ws = 1;
        h.protocol = GW_SLICE_LIT("websocket");
        h.end_stream = 0; /* the tunnel's bytes may follow its 101 */
    }
    c->h1->s = gw_front__cstream(c, &h1s_ops, c, m->method);
    c->h1->s.misdirected = c->tls && gw_tls_misdirected(c->tls, h.authority.base, h.authority.len);
    c->h1->s.log = &c->h1->log;
    c->h1->thr_mark = c->thr ? c->thr->waits : 0;
    gw_front__log_start(c, &c->h1->log, &h, c->h1->http10 ? "http/1.0" : "http/1.1");
    c->h1->rb = c->g->route_rates ? gw_front__route_bucket(c, h.route) : NULL;
    /* RFC 9110 §10.1.1: the body is wanted, so say so before the client waits for it */
    if (c->h1->expect_100 && !h.end_stream && gw_h1_continue(&c->b->out) < 0)
        return GW_E_NOMEM;
    /* the head is complete: the body has its own (idle) deadline */
    gw_front__arm(c, CFG(c)->timeouts.idle_ms);
    c->h1->state = H1X_RECV;
    return gw_proxy_request(PROXY(c), &c->h1->s, &h);
}

static int h1_on_body(void *ud, const uint8_t *p, size_t n)
{
    conn_t *c = ud;
    c->h1->inflight += n;
    c->h1->log.bytes_in += n;
    gw_proxy_body(PROXY(c), &c->h1->s, p, n);
    return 0;
}

static int h1_on_complete(void *ud)
{
    conn_t *c = ud;
    h1x_req_complete(c->h1);
    /* a WebSocket request: its end is the tunnel's (or the proxy knows none came) */
    if (h1x_active(c->h1) && !c->h1->ws && !c->h1->tunnel)
        gw_proxy_body_end(PROXY(c), &c->h1->s, NULL, 0);
    return 0;
}

/* Tunnel bytes from the client (after the 101), as many as the proxy may hold, and its end. */
static void tunnel_in(conn_t *c)
{
    size_t bound = CFG(c)->limits.body_buffer;
    while (h1x_active(c->h1) && gw_front__in_len(c) && c->h1->inflight < bound &&
           !(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER))) {
        size_t n = gw_front__in_len(c);
        if (n > bound - c->h1->inflight)
            n = bound - c->h1->inflight;
        c->h1->inflight += n;
        c->h1->log.bytes_in += n;
        gw_front__arm(c, CFG(c)->timeouts.tunnel_idle_ms);
        gw_proxy_body(PROXY(c), &c->h1->s, c->b->in.base, n);
        gw_bytes_consume(&c->b->in, n);
    }
    if ((c->flags & GW_CONN_F_EOF) && !gw_front__in_len(c) && !c->h1->tunnel_eof &&
        h1x_active(c->h1)) {
        c->h1->tunnel_eof = 1; /* half-close: the origin reads the end, may still answer */
        gw_proxy_body_end(PROXY(c), &c->h1->s, NULL, 0);
    }
    if (c->h1->state == H1X_DONE) {
        gw_front__h1x_end(c);
        gw_front__finish(c, "tunnel_closed");
    }
}

static const gw_h1_callbacks_t h1_cbs = {h1_on_head, h1_on_body, h1_on_complete};

/* The client ended its side of the connection (a FIN, or TLS's close_notify) while its response
 * is owed: the request is over, as an HTTP/2 client's RST_STREAM(CANCEL) or closed connection
 * ends its stream. The connection closes at once; on_closed ends the exchange for the proxy
 * (gw_front__stream_done, which cancels the origin exchange unless others share it, and logs
 * the request as the client's: 499 in the combined formats when no response head went out).
 * Reads go on while a response is awaited (gw_front__h1_want_read) so that this is seen
 * without waiting for the origin: an origin connection, a slot of its pool, is not held for a
 * client that is gone (nginx: "client prematurely closed connection", 499).
 *
 * A FIN is also what a client sends that half-closes after its request and still reads:
 * RFC 9112 §9.6 says such a half-close "does not delimit a request message, nor does it imply
 * that the client is no longer interested in a response". On the wire it cannot be told from a
 * close until a response is written (a closed socket answers with a reset). It is taken for the
 * close, as nginx does (proxy_ignore_client_abort off, its default); HAProxy serves such a
 * client (its `option abortonclose` drops only requests still queued or connecting). A reset
 * (ECONNRESET) ends it the same way: conn_io.c closes the connection with reason reset. */
static void client_gone(conn_t *c)
{
    GW_LOG_DEBUG("h1_client_gone", "peer=%s state=%s unread=%zu", PEER(c),
                 gw_front__h1x_state_str((h1x_state_t)c->h1->state), gw_front__in_len(c));
    c->h1->keep_alive = 0;
    gw_front__conn_close(c, gw_front__peer_end(c));
}

/* Parse what is in c->b->in, one request at a time: the next request is read only once the
 * current one is answered, and request body bytes only while the proxy holds less than
 * limits.body_buffer of them. */
void gw_front__process_h1(conn_t *c)
{
    size_t body_bound = CFG(c)->limits.body_buffer;
    if (c->h1->tunnel) {
        if (!(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER)))
            tunnel_in(c);
        return;
    }
    while (!(c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER | GW_CONN_F_READ_PAUSED))) {
        if (c->h1->state == H1X_DONE)
            gw_front__h1x_end(c);
        if (gw_h1_parser_paused(c->h1->p)) {
            if (h1x_active(c->h1))
                break; /* the response is still coming */
            /* one request done; a graceful stop ends the connection here */
            if (!c->h1->keep_alive || (c->flags & GW_CONN_F_STOPPING)) {
                gw_front__finish(c, "connection_close");
                return;
            }
            gw_h1_parser_resume(c->h1->p);
            gw_front__arm(c, CFG(c)->timeouts.idle_ms);
        }
        if (gw_front__in_len(c) == 0 || c->h1->inflight >= body_bound)
            break;
        int was_idle = !gw_h1_parser_in_message(c->h1->p);
        size_t feed = c->b->in.len;
        ssize_t n = gw_h1_parser_feed(c->h1->p, c->b->in.base, feed);
        if (n < 0) {
            unsigned st = gw_h1_parser_error_status(c->h1->p);
            GW_LOG_INFO("bad_request", "peer=%s status=%u reason=\"%s\"", PEER(c), st,
                        gw_h1_parser_error_reason(c->h1->p));
            int answer = n != GW_E_NOMEM && st != 500 && !h1x_resp_started(c->h1);
            if (answer) {
                char body[160];
                snprintf(body, sizeof(body), "h2gate: %s\n", gw_h1_parser_error_reason(c->h1->p));
                gw_h1_simple_response(&c->b->out, st, body, 0, 0);
            }
            if (h1x_active(c->h1)) {
                /* its head went to the proxy (the body was malformed): the answer goes into
                 * its own record, and the proxy lets go of it now, so that nothing more is
                 * written after the 400 and the request has one line */
                if (answer)
                    gw_front__log_head(&c->h1->log, st, 1);
                gw_front__h1x_end(c);
            } else if (answer) {
                gw_front__log_direct(c, st, gw_h1_parser_request_line(c->h1->p));
            }
            gw_front__finish(c, "bad_request");
            return;
        }
        gw_bytes_consume(&c->b->in, (size_t)n);
        if (was_idle && gw_h1_parser_in_message(c->h1->p) && !gw_h1_parser_paused(c->h1->p) &&
            !h1x_active(c->h1))
            gw_front__arm(c, CFG(c)->timeouts.header_ms); /* whole-head deadline (slowloris) */
        if (!gw_h1_parser_paused(c->h1->p) && n == 0)
            break; /* need more input */
    }
    if (!(c->flags & GW_CONN_F_EOF) || (c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER)))
        return;
    if (h1x_resp_owed(c->h1)) {
        client_gone(c);
        return;
    }
    /* the peer closed its side: complete requests were answered above; a partial one never
     * completes */
    if (!(c->flags & GW_CONN_F_READ_PAUSED))
        gw_front__finish(c, gw_front__peer_end(c));
}

int gw_front__h1_want_read(const conn_t *c)
{
    const h1x_t *h = c->h1;
    int holding = (h1x_active(h) && gw_h1_parser_paused(h->p) && !h->tunnel) ||
                  h->inflight >= CFG(c)->limits.body_buffer;
    /* Bounded: the input buffer has room for this much and one read more (conn.c
     * gw_front__need_busy); beyond it the kernel holds what the client sends ahead, and its
     * end is seen when the response has gone and the bytes are parsed, or by a write. */
    return !holding || gw_front__in_len(c) < CFG(c)->limits.max_request_head;
}

int gw_front__start_h1(conn_t *c)
{
    gw_h1_limits_t lim = {CFG(c)->limits.max_request_head, 256};
    c->h1 = gw_calloc(1, sizeof(*c->h1));
    if (!c->h1)
        return GW_E_NOMEM;
    c->h1->p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &h1_cbs, c);
    if (!c->h1->p)
        return GW_E_NOMEM; /* c->h1 goes with the connection */
    c->state = CS_H1;
    return 0;
}
