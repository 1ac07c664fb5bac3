/* h2_fuzz_answer.h — what the two HTTP/2 session fuzz targets (fuzz_h2_session,
 * fuzz_h2_frames) share: the properties every reported request must have, and a server side
 * that answers like the front does (a response with a body, trailers on some, server push on
 * some GETs), consumes request bodies and releases closed streams, so that the send side
 * (scheduler, flow control, HPACK encoder, pushed streams) runs too. */
#ifndef GW_H2_FUZZ_ANSWER_H
#define GW_H2_FUZZ_ANSWER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "h2/session.h"
#include "http/http.h"

typedef struct {
    gw_h2_session_t *s;
    gw_rbuf_t *body;
} fz_t;

/* What reaches the proxy can become an HTTP/1.1 request line as it is: a
 * token method, an origin-form target (or * for OPTIONS) with an http(s) scheme unless CONNECT,
 * an authority without userinfo. */
static inline void fz_check_request(const gw_h2_head_t *h)
{
    if (!gw_http_is_token(h->method))
        abort();
    if (!gw_slice_eq(h->method, GW_SLICE_LIT("CONNECT")) &&
        (!gw_http_is_request_target(h->path) || h->path.base[0] != '/' ||
         !(gw_slice_eq(h->scheme, GW_SLICE_LIT("http")) ||
           gw_slice_eq(h->scheme, GW_SLICE_LIT("https")))) &&
        !(gw_slice_eq(h->method, GW_SLICE_LIT("OPTIONS")) &&
          gw_slice_eq(h->path, GW_SLICE_LIT("*"))))
        abort();
    if (h->authority.base && !gw_http_is_authority(h->authority))
        abort();
}

/* Answer h: some GETs first promise one or two resources (RFC 9113 §8.4; some promises are
 * answered at once, others stay reserved for the client's frames to meet), then a response
 * with a body, ended by trailers on some streams. */
static inline int fz_on_request(void *ud, const gw_h2_head_t *h)
{
    fz_t *f = ud;
    fz_check_request(h);
    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/plain")}};
    if (gw_slice_eq(h->method, GW_SLICE_LIT("GET")) && h->stream_id % 5 < 3 && h->authority.len) {
        static const char *const paths[] = {"/p1", "/p2", "/p3"};
        for (uint32_t i = 0; i < 1 + h->stream_id % 2; i++) {
            gw_h2_head_t pr = {.method = GW_SLICE_LIT("GET"),
                               .scheme = GW_SLICE_LIT("https"),
                               .authority = h->authority,
                               .path = gw_slice_str(paths[(h->stream_id + i) % 3])};
            uint32_t pid;
            const gw_h2_head_t *kept;
            if (gw_h2_session_submit_push(f->s, h->stream_id, &pr, &pid, &kept) < 0)
                break;
            if (!kept || !gw_slice_eq(kept->path, pr.path) || pid % 2 || !kept->end_stream)
                abort();
            if (pid % 4 == 2 && gw_h2_session_submit_response(f->s, pid, 200, hf, 1, 0) == 0)
                gw_h2_session_submit_data(f->s, pid, f->body, 0, 100, 1);
        }
    }
    if (gw_h2_session_submit_response(f->s, h->stream_id, 200, hf, 1, 0) == 0)
        gw_h2_session_submit_data(f->s, h->stream_id, f->body, 0, f->body->cap,
                                  h->stream_id % 3 == 0);
    if (h->stream_id % 3 == 1) {
        const gw_h2_header_t tr[] = {{GW_SLICE_LIT("x-t"), GW_SLICE_LIT("1")}};
        gw_h2_session_submit_trailers(f->s, h->stream_id, tr, 1);
    }
    return 0;
}

static inline int fz_on_data(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    fz_t *f = ud;
    (void)d;
    gw_h2_session_consume(f->s, sid, len);
    return 0;
}

static inline void fz_on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    fz_t *f = ud;
    (void)code;
    (void)by_peer;
    gw_h2_session_stream_release(f->s, sid);
}

/* The limits the first input byte k picks: with bit 0 small caps (streams, budgets, header
 * list, requests), reached quickly; with bit 1 small windows. */
static inline void fz_options(gw_h2_options_t *o, uint8_t k)
{
    gw_h2_options_default(o);
    if (k & 1) {
        o->max_concurrent_streams = 4;
        o->reset_budget = 8;
        o->control_frame_budget = 32;
        o->empty_frame_budget = 8;
        o->max_queued_control = 16;
        o->max_header_list_size = 512;
        o->max_requests_per_connection = 5;
    }
    if (k & 2) {
        o->initial_window_size = 100;
        o->connection_window_size = 65535;
    }
}

/* A server session with options o and the fz_* callbacks, and the body it answers with:
 * 0, or -1 (nothing to free). */
static inline int fz_start(fz_t *f, const gw_h2_options_t *o)
{
    static const gw_h2_callbacks_t cb = {
        .on_request = fz_on_request, .on_data = fz_on_data, .on_close = fz_on_close};
    f->body = gw_rbuf_new(3000);
    if (!f->body)
        return -1;
    memset(f->body->data, 'b', 3000);
    if (gw_h2_session_new(&f->s, o, &cb, f, 0) < 0) {
        gw_rbuf_unref(f->body);
        return -1;
    }
    return 0;
}

#endif
