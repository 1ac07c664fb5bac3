/* proxy/upload.c — request bodies on their way to the origin: bytes written by reference and
 * credited back to the client once written, small pieces gathered into one write per loop turn
 * (acc), and the request body timeout (timeouts.request_body). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

static void on_upload_sweep(uv_timer_t *t);
static void abort_own(px_t *px);

/* ---- request body timeout (timeouts.request_body) ------------------------------------------
 *
 * A request whose body stops arriving must not hold an origin connection until the origin's
 * response_timeout fires and blames the origin: five such requests per server ejected it, and
 * one HTTP/2 connection could hold every origin connection of a worker. The clock runs only
 * while the gateway waits for the client: every body byte passed on was also credited back
 * (px->body_inflight == 0), so an origin that reads slowly, and the window it closes, is never
 * counted against the client. */

void gw_proxy__upload_watch(px_t *px)
{
    gw_proxy_t *p = px->p;
    px->body_since = uv_now(p->loop);
    gw_list_push_back(&p->uploading, &px->ulink);
    if (p->upload_open && !uv_is_active((uv_handle_t *)&p->upload_sweep)) {
        uint64_t every = p->cfg->timeouts.request_body_ms / 4;
        if (every > 1000)
            every = 1000;
        uv_timer_start(&p->upload_sweep, on_upload_sweep, every ? every : 1, every ? every : 1);
    }
}

void gw_proxy__upload_unwatch(px_t *px)
{
    gw_list_remove(&px->ulink); /* a no-op on a self-linked node */
    gw_list_init(&px->ulink);
}

static void on_upload_sweep(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop), limit = p->cfg->timeouts.request_body_ms;
    gw_list_foreach_safe(it, tmp, &p->uploading)
    {
        px_t *px = GW_CONTAINER_OF(it, px_t, ulink);
        if (px->req_done || px->closed || px->reset || (px->resp >= PX_RESP_HEAD)) {
            gw_proxy__upload_unwatch(px); /* the response is under way: its own timeouts apply */
            continue;
        }
        if (px->body_inflight || now - px->body_since < limit)
            continue;
        gw_proxy__upload_unwatch(px);
        p->stats.upload_stalled++;
        GW_LOG_INFO("request_body_timeout",
                    "peer=%s proto=%s path=%.*s upstream=%s received=%llu status=408", px->s->peer,
                    gw_req_proto_str(px->proto), PX_PATH(px), px->route->upstream_name,
                    (unsigned long long)px->req_sent);
        /* the client's fault: the origin exchange is cancelled, never counted as a server
         * failure (gw_back_cancel), and the client gets 408 (RFC 9110 §15.5.9) followed by
         * the end of the request (HTTP/1.1: the connection closes, the rest of the body will
         * never be read; HTTP/2: RST_STREAM(NO_ERROR) after the response, RFC 9113 §8.1) */
        abort_own(px);
        px->status = 408;
        gw_proxy__resp_reached(px, PX_RESP_HEAD);
        if (gw_proxy__answer(px->s, 408, "h2gate: the request body stopped arriving\n") < 0)
            gw_proxy__do_reset(px, GW_CS_RESET_CANCEL);
        else
            gw_proxy__response_done(px);
    }
    if (gw_list_empty(&p->uploading))
        uv_timer_stop(&p->upload_sweep);
}

static void on_written(void *ud, int status)
{
    (void)status;
    wctx_t *w = ud;
    px_t *px = w->px;
    px->body_inflight -= w->len;
    if (!px->body_inflight)
        px->body_since = uv_now(px->p->loop); /* from now on the wait is for the client */
    if (!px->closed)
        px->s->ops->credit(px->s, w->len);
    gw_free(w);
}

/* The request body only flows on the stream's own exchange (coalesced requests have none). */
static gw_back_exch_t *own_bx(px_t *px)
{
    return px && px->ox && px->ox->owner == px ? px->ox->bx : NULL;
}

static void abort_own(px_t *px)
{
    ox_t *ox = px->ox;
    if (ox)
        gw_proxy__ox_cancel(ox);
    gw_proxy__sub_remove(px);
}

/* Request body pieces. Each write to the back costs a buffer, a write
 * context, a write mark and a queue entry, about 150 bytes, while the bounds
 * (limits.body_buffer, the HTTP/2 window) count payload bytes: one-byte DATA frames or chunks
 * made the memory 150 times the bound. So pieces smaller than ACC_SMALL are copied into one
 * buffer per stream (ACC_CAP) and handed to the back once per loop turn (or when the buffer is
 * full, or before the body ends): the overhead is per ACC_CAP bytes, not per piece. */
#define ACC_SMALL 4096
#define ACC_CAP (16 * 1024)

/* Hand len bytes of b (from off) to the back as one write; on failure the stream is ended as
 * the error says. The caller keeps its reference to b. */
static void body_write(px_t *px, gw_rbuf_t *b, size_t len)
{
    gw_back_exch_t *bx = own_bx(px);
    int rv = GW_E_CLOSED;
    wctx_t *w = NULL;
    if (bx && !(px->resp == PX_RESP_DONE) && !px->reset) {
        w = gw_malloc(sizeof(*w));
        rv = GW_E_NOMEM;
        if (w) {
            *w = (wctx_t){px, len};
            rv = gw_back_write_body(bx, b, 0, len, on_written, w);
        }
    }
    if (rv == 0)
        return;
    gw_free(w);
    px->body_inflight -= len;
    if (!px->closed)
        px->s->ops->credit(px->s, len);
    if (rv == GW_E_CLOSED)
        return; /* nobody wants these bytes any more: dropped */
    /* more bytes than the announced Content-Length, or out of memory: never sent on as a
     * desynchronised request */
    abort_own(px);
    if (rv == GW_E_INVAL)
        gw_proxy__do_reset(px, GW_CS_RESET_PROTOCOL);
    else
        gw_proxy__fail(px, rv);
}

/* What px->acc gathered, taken off px and the pending list (NULL: nothing). */
static gw_rbuf_t *acc_take(px_t *px)
{
    gw_rbuf_t *b = px->acc;
    if (b) {
        px->acc = NULL;
        gw_list_remove(&px->alink);
        gw_list_init(&px->alink);
    }
    return b;
}

/* Write what px->acc gathered (it goes before any later piece or the body's end). */
static void acc_flush_one(px_t *px)
{
    gw_rbuf_t *b = acc_take(px);
    if (!b)
        return;
    body_write(px, b, b->len);
    gw_rbuf_unref(b); /* the back holds its own reference */
}

/* Drop what px->acc gathered (the stream or its exchange ended): credited back. */
void gw_proxy__acc_drop(px_t *px)
{
    gw_rbuf_t *b = acc_take(px);
    if (!b)
        return;
    px->body_inflight -= b->len;
    if (!px->closed)
        px->s->ops->credit(px->s, b->len);
    gw_rbuf_unref(b);
}

static void on_acc_flush(uv_prepare_t *h)
{
    gw_proxy_t *p = h->data;
    while (!gw_list_empty(&p->acc_pending))
        acc_flush_one(GW_CONTAINER_OF(p->acc_pending.next, px_t, alink));
    uv_prepare_stop(h);
}

/* ---- the front's entry points -------------------------------------------------------------- */

void gw_proxy_body(gw_proxy_t *p, gw_cstream_t *s, const uint8_t *data, size_t len)
{
    px_t *px = s->proxy_data;
    if (px && gw_proxy__auth_hold(px, data, len))
        return; /* waiting for basic auth's verification: held */
    gw_back_exch_t *bx = own_bx(px);
    if (!bx || (px->resp == PX_RESP_DONE) || px->reset || len == 0) {
        s->ops->credit(s, len); /* nobody wants these bytes: dropped */
        return;
    }
    px->req_sent += len;
    px->body_since = uv_now(px->p->loop);
    px->body_inflight += len;
    if (px->acc && (len >= ACC_SMALL || px->acc->len + len > px->acc->cap))
        acc_flush_one(px); /* full, or a large piece follows: the gathered bytes go first */
    if (len < ACC_SMALL && own_bx(px)) {
        if (!px->acc) {
            px->acc = gw_rbuf_new(ACC_CAP);
            if (!px->acc) {
                px->body_inflight -= len;
                s->ops->credit(s, len);
                abort_own(px);
                gw_proxy__fail(px, GW_E_NOMEM);
                return;
            }
            px->acc->len = 0;
            gw_list_push_back(&p->acc_pending, &px->alink);
            if (p->acc_open && !uv_is_active((uv_handle_t *)&p->acc_flush))
                uv_prepare_start(&p->acc_flush, on_acc_flush);
        }
        memcpy(px->acc->data + px->acc->len, data, len);
        px->acc->len += len;
        return;
    }
    gw_rbuf_t *b = gw_rbuf_new(len);
    if (!b) {
        px->body_inflight -= len;
        s->ops->credit(s, len);
        abort_own(px);
        gw_proxy__fail(px, GW_E_NOMEM);
        return;
    }
    memcpy(b->data, data, len);
    b->len = len;
    body_write(px, b, len);
    gw_rbuf_unref(b); /* the back holds its own reference */
}

void gw_proxy_body_end(gw_proxy_t *p, gw_cstream_t *s, const gw_field_t *tr, size_t n)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || px->req_done || gw_proxy__auth_hold_end(px, tr, n))
        return;
    px->req_done = 1;
    gw_proxy__upload_unwatch(px);
    if (px->ws && !px->tunnel)
        return;        /* a WebSocket the origin refused (or not yet answered): no body was sent */
    acc_flush_one(px); /* the gathered pieces go before the end */
    gw_back_exch_t *bx = own_bx(px);
    if (!bx || px->reset)
        return;
    if (px->req_cl >= 0 && (uint64_t)px->req_cl != px->req_sent) {
        /* RFC 9113 §8.1.1: content-length disagrees with the DATA: malformed */
        abort_own(px);
        gw_proxy__do_reset(px, GW_CS_RESET_PROTOCOL);
        return;
    }
    if (px->req_cl == 0)
        return; /* no body was announced to the origin */
    gw_field_t fst[16], *f = fst;
    size_t k = 0;
    if (px->req_cl < 0 && n) {
        f = n <= 16 ? fst : gw_malloc(n * sizeof(*f));
        if (!f) {
            abort_own(px);
            gw_proxy__fail(px, GW_E_NOMEM);
            return;
        }
        k = gw_proxy__req_trailers(tr, n, f);
    }
    int rv = gw_back_end_body(bx, k ? f : NULL, k);
    if (f != fst)
        gw_free(f);
    if (rv < 0) {
        abort_own(px);
        if (rv == GW_E_INVAL) /* a trailer the serializer refused: the client's */
            gw_proxy__bad_request(px, "invalid request trailer");
        else
            gw_proxy__fail(px, rv);
    }
}
