/* libFuzzer target: arbitrary bytes after a valid client preface + SETTINGS into a server
 * session. The callbacks answer requests, consume body bytes and release closed streams, so
 * the send side (scheduler, flow control, HPACK encoder) runs too. The first input byte picks
 * a few small limits so that the caps are reached quickly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"
#include "h2/session.h"

typedef struct {
    gw_h2_session_t *s;
    gw_rbuf_t *body;
} fz_t;

static int on_request(void *ud, const gw_h2_head_t *h)
{
    fz_t *f = ud;
    /* issue 18.10: what reaches the proxy can become an HTTP/1.1 request line as it is */
    if (!gw_slice_is_token(h->method))
        abort();
    if (!gw_slice_eq(h->method, GW_SLICE_LIT("CONNECT")) &&
        (!gw_slice_is_request_target(h->path) || !(gw_slice_eq(h->scheme, GW_SLICE_LIT("http")) ||
                                                   gw_slice_eq(h->scheme, GW_SLICE_LIT("https")))))
        abort();
    if (h->authority.base && !gw_slice_is_authority(h->authority))
        abort();
    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/plain")}};
    if (gw_h2_session_submit_response(f->s, h->stream_id, 200, hf, 1, 0) == 0)
        gw_h2_session_submit_data(f->s, h->stream_id, f->body, 0, f->body->cap,
                                  h->stream_id % 3 == 0);
    if (h->stream_id % 3 == 1) {
        const gw_h2_header_t tr[] = {{GW_SLICE_LIT("x-t"), GW_SLICE_LIT("1")}};
        gw_h2_session_submit_trailers(f->s, h->stream_id, tr, 1);
    }
    return 0;
}

static int on_data(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    fz_t *f = ud;
    (void)d;
    gw_h2_session_consume(f->s, sid, len);
    return 0;
}

static void on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    fz_t *f = ud;
    (void)code;
    (void)by_peer;
    gw_h2_session_stream_release(f->s, sid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gw_h2_callbacks_t cb = {on_request, on_data, NULL, NULL,
                                         on_close,   NULL,    NULL, NULL};
    gw_h2_options_t o;
    fz_t f;
    gw_iovq_t q;
    uint8_t pre[GW_H2_PREFACE_LEN + 9];
    int compact = 0;

    gw_h2_options_default(&o);
    if (size > 0) {
        uint8_t k = data[0];
        data++;
        size--;
        if (k & 1) {
            o.max_concurrent_streams = 4;
            o.reset_budget = 8;
            o.control_frame_budget = 32;
            o.empty_frame_budget = 8;
            o.max_queued_control = 16;
            o.max_header_list_size = 512;
            o.max_requests_per_connection = 5;
        }
        if (k & 2) {
            o.initial_window_size = 100;
            o.connection_window_size = 65535;
        }
        compact = (k & 4) != 0; /* give back idle memory after every chunk, as the front does */
    }
    f.body = gw_rbuf_new(3000);
    if (!f.body)
        return 0;
    memset(f.body->data, 'b', 3000);
    if (gw_h2_session_new(&f.s, &o, &cb, &f, 0) < 0) {
        gw_rbuf_unref(f.body);
        return 0;
    }
    gw_iovq_init(&q);
    memcpy(pre, GW_H2_PREFACE, GW_H2_PREFACE_LEN);
    memcpy(pre + GW_H2_PREFACE_LEN, "\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
    uint64_t now = 1;
    if (gw_h2_session_recv(f.s, pre, sizeof(pre), now) == (ssize_t)sizeof(pre)) {
        /* feed in chunks of varying size so the buffering paths run */
        size_t off = 0, step = 1;
        while (off < size) {
            size_t n = size - off < step ? size - off : step;
            ssize_t rc = gw_h2_session_recv(f.s, data + off, n, now);
            off += n;
            step = step * 3 % 1021 + 1;
            now += 7;
            if (gw_h2_session_send(f.s, &q) < 0 || rc < 0)
                break;
            gw_iovq_consume(&q, q.bytes); /* the peer reads everything */
            gw_h2_session_tick(f.s, now);
            if (compact)
                gw_h2_session_compact(f.s);
        }
    }
    gw_h2_session_send(f.s, &q);
    gw_iovq_free(&q);
    gw_h2_session_del(f.s);
    gw_rbuf_unref(f.body);
    return 0;
}
