/* proxy/flow.c — hop-by-hop flow control of response bodies: each subscriber of an exchange is
 * handed body bytes as its client takes them (ops->pending under limits.body_buffer), the
 * origin's reading is paused while the slowest cannot take more, and a stream stalled past
 * timeouts.stall is given up (the sweep). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

static void on_sweep(uv_timer_t *t);

/* ---- flow control --------------------------------------------------------------------------- */

static void ox_pause(ox_t *ox)
{
    gw_proxy_t *p = ox->p;
    if (ox->paused || !ox->bx)
        return;
    ox->paused = 1;
    ox->paused_since = uv_now(p->loop);
    gw_list_push_back(&p->paused, &ox->plink);
    gw_back_pause_reading(ox->bx);
    if (p->sweep_open && !uv_is_active((uv_handle_t *)&p->sweep)) {
        uint64_t every = p->cfg->timeouts.body_ms / 4;
        uv_timer_start(&p->sweep, on_sweep, every ? every : 1, every ? every : 1);
    }
}

void gw_proxy__ox_unpause(ox_t *ox)
{
    if (!ox->paused)
        return;
    ox->paused = 0;
    gw_list_remove(&ox->plink);
    if (ox->bx)
        gw_back_resume_reading(ox->bx);
}

/* The response body is held once, in ox->body, by reference, for every subscriber. Each
 * subscriber's cursor (px->delivered) says how far it got; a client stream is handed bytes while it
 * holds less than limits.body_buffer (ops->pending), and the store keeps the bytes from the slowest
 * cursor to what the origin sent last. So an exchange holds the span between its slowest and
 * fastest subscriber (plus what each client stream has queued, which references the same buffers),
 * however many subscribe:
 *
 *  - the origin is read while some subscriber has everything and can take more ("hungry": its
 *    cursor is at the end and its stream holds less than body_buffer) and the span is under
 *    limits.coalesce_buffer; otherwise the read pauses (and the stall sweep watches it);
 *  - when a subscriber is hungry but the span reached coalesce_buffer, the followers that are
 *    coalesce_buffer behind the end detach and fetch on their own (their cursor carries over:
 *    the bytes they have are not resent), and the read goes on for the others.
 *
 * Followers on one HTTP/2 connection, which the scheduler serves one after another, so stay
 * attached as long as the response is within coalesce_buffer of the slowest of them. */

/* Whether px still takes body bytes. */
static int wants_body(const px_t *px)
{
    return !px->closed && !px->reset && (px->resp >= PX_RESP_HEAD) && !(px->resp == PX_RESP_DONE);
}

/* Hand px what its stream can take; at the end of a complete response, finish it (trailers or
 * END_STREAM) and unsubscribe it. */
static void feed(ox_t *ox, px_t *px)
{
    if (px->closed)
        return;
    if (px->reset) {
        if (ox->complete)
            gw_proxy__sub_remove(px); /* the front closes it later */
        return;
    }
    if (!(px->resp >= PX_RESP_HEAD))
        return;
    if (!(px->resp == PX_RESP_DONE)) {
        size_t bound = ox->p->cfg->limits.body_buffer;
        gw_rslice_t sl;
        while (px->delivered < ox->body.end && px->s->ops->pending(px->s) < bound &&
               gw_proxy__cbody_at(&ox->body, px->delivered, &sl) == 0) {
            px->delivered += sl.len;
            if (px->s->ops->body(px->s, sl.buf, sl.off, sl.len, 0) < 0) {
                gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
                return;
            }
        }
    }
    if (!ox->complete || px->delivered < ox->body.end)
        return;
    if (!(px->resp == PX_RESP_DONE)) {
        int rv = ox->trailers ? px->s->ops->trailers(px->s, ox->trailers, ox->ntrailers)
                              : px->s->ops->body(px->s, NULL, 0, 0, 1);
        if (rv < 0) {
            gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
            gw_proxy__sub_remove(px);
            return;
        }
    }
    gw_proxy__response_done(px);
    gw_proxy__sub_remove(px);
}

/* Release what every subscriber has, detach the followers past coalesce_buffer, and pause or
 * resume the origin read (the rules above). */
static void regulate(ox_t *ox)
{
    gw_proxy_t *p = ox->p;
    size_t bound = p->cfg->limits.body_buffer;
    uint64_t cbuf = p->cfg->limits.coalesce_buffer;
    uint64_t end = ox->body.end, min = end;
    int hungry = 0, active = 0;
    FOREACH_SUB(ox, px)
    {
        if (!wants_body(px))
            continue;
        active = 1;
        if (px->delivered < min)
            min = px->delivered;
        /* a cursor past the end: a detached stream waiting for bytes it does not have yet */
        if (px->delivered >= end && px->s->ops->pending(px->s) < bound)
            hungry = 1;
    }
    if (hungry && ox->bx && end - min >= cbuf) {
        min = end;
        FOREACH_SUB(ox, px)
        {
            if (!wants_body(px))
                continue;
            if (px->delivered < end && end - px->delivered >= cbuf) {
                p->stats.detached++;
                GW_LOG_DEBUG("coalesce_detach", "peer=%s path=%.*s delivered=%llu behind=%llu",
                             px->s->peer, PX_PATH(px), (unsigned long long)px->delivered,
                             (unsigned long long)(end - px->delivered));
                gw_proxy__detach(px); /* ox survives: the hungry subscriber stays */
            } else if (px->delivered < min) {
                min = px->delivered;
            }
        }
    }
    gw_proxy__cbody_trim(&ox->body, min);
    if (!ox->bx)
        return;
    if (!active || (hungry && end - min < cbuf))
        gw_proxy__ox_unpause(
            ox); /* nobody left to wait for (the rest is dropped), or room to read */
    else
        ox_pause(ox);
}

/* feed() every subscriber, then regulate(). Returns 1 when ox was freed (every subscriber
 * finished), else 0. */
/* Whether a subscriber has every byte of ox->body and its stream can take more. */
static int any_hungry(ox_t *ox)
{
    size_t bound = ox->p->cfg->limits.body_buffer;
    FOREACH_SUB(ox, px)
    {
        if (wants_body(px) && px->delivered >= ox->body.end && px->s->ops->pending(px->s) < bound)
            return 1;
    }
    return 0;
}

int gw_proxy__pump(ox_t *ox)
{
    ox->pumping = 1;
    for (;;) {
        FOREACH_SUB(ox, px)
        {
            feed(ox, px);
        }
        /* a body made on demand (ox->refill): more while a client takes it; each refill
         * consumes input or completes ox, so this ends */
        if (!ox->refill || ox->complete || !ox->nsubs || !any_hungry(ox))
            break;
        int rv = ox->refill(ox);
        if (rv < 0) {
            GW_LOG_WARN("refill_failed", "code=%s", gw_errname(rv));
            FOREACH_SUB(ox, px)
            {
                gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
            }
            ox->refill = NULL;
            ox->complete = 1; /* feed() lets the reset streams go */
        }
    }
    if (ox->nsubs)
        regulate(ox);
    ox->pumping = 0;
    if (ox->nsubs == 0) {
        gw_proxy__ox_free(ox);
        return 1;
    }
    return 0;
}

/* A client that keeps its window shut holds at most the buffer bound, and only for
 * timeouts.body: then its stream is reset and the origin exchange dropped. */
static void on_sweep(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop);
    gw_list_foreach_safe(it, tmp, &p->paused)
    {
        ox_t *ox = GW_CONTAINER_OF(it, ox_t, plink);
        if (now - ox->paused_since < p->cfg->timeouts.body_ms)
            continue;
        gw_proxy__ox_unpause(ox);
        gw_list_foreach_safe(s_it, s_tmp, &ox->subs)
        {
            px_t *px = GW_CONTAINER_OF(s_it, px_t, slink);
            GW_LOG_INFO("client_stalled", "peer=%s upstream=%s pending=%zu", px->s->peer,
                        px->route->upstream_name, px->s->ops->pending(px->s));
            p->stats.stalled++;
            gw_proxy__do_reset(px, GW_CS_RESET_CANCEL);
        }
        /* the streams leave when the front closes them; the origin read stops now */
        gw_proxy__ox_cancel(ox);
        gw_proxy__unindex(ox);
    }
    if (gw_list_empty(&p->paused))
        uv_timer_stop(&p->sweep);
}

void gw_proxy_writable(gw_proxy_t *p, gw_cstream_t *s)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || !px->ox)
        return;
    /* the stream takes bytes held for it; the origin read resumes if it may (regulate()) */
    gw_proxy__pump(px->ox);
}
