/* libFuzzer target: a frame-structured HTTP/2 client. Where fuzz_h2_session
 * feeds raw bytes (most inputs die at the first frame header), this one builds well-formed
 * frames from the input, with HEADERS blocks encoded by our HPACK encoder from a small
 * vocabulary of request fields, so the fuzzer spends its time in the stream states, flow
 * control, priorities, trailers, resets and limits. The session answers like the front does
 * (a response with a body, trailers on some), and the same properties as fuzz_h2_session hold
 * for every request it reports.
 *
 * Input: byte 0 = limits (as fuzz_h2_session); then ops of 4 bytes [kind, stream, flags, n]
 * followed by n payload bytes (n < 64): kind % 10 selects HEADERS (a request), DATA,
 * WINDOW_UPDATE, RST_STREAM, PRIORITY, PRIORITY_UPDATE, SETTINGS, PING, trailers, or a raw frame
 * of any type; stream % 16 picks one of 16 client stream ids (odd) or 0, or, with flag 0x80 on
 * other ops than HEADERS, the even id of a stream the session may have pushed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/session.h"

#include "h2_fuzz_answer.h"

/* A request header block from the payload bytes: each byte picks a field of the vocabulary
 * (pseudo-headers first when the low bits say so), so blocks are valid, duplicated, missing
 * or out of order in ways the validator must sort out. */
static void request_block(gw_hpack_enc_t *e, const uint8_t *p, size_t n, int trailers,
                          gw_bytes_t *out)
{
    static const gw_hpack_field_t v[] = {
        {GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET"), 0},
        {GW_SLICE_LIT(":method"), GW_SLICE_LIT("POST"), 0},
        {GW_SLICE_LIT(":method"), GW_SLICE_LIT("CONNECT"), 0},
        {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("https"), 0},
        {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/a"), 0},
        {GW_SLICE_LIT(":path"), GW_SLICE_LIT("*"), 0},
        {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("example.test"), 0},
        {GW_SLICE_LIT(":protocol"), GW_SLICE_LIT("websocket"), 0},
        {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("5"), 0},
        {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("0"), 0},
        {GW_SLICE_LIT("te"), GW_SLICE_LIT("trailers"), 0},
        {GW_SLICE_LIT("connection"), GW_SLICE_LIT("close"), 0},
        {GW_SLICE_LIT("priority"), GW_SLICE_LIT("u=1, i"), 0},
        {GW_SLICE_LIT("cookie"), GW_SLICE_LIT("a=b"), 0},
        {GW_SLICE_LIT("x-a"), GW_SLICE_LIT("1"), 1},
        {GW_SLICE_LIT(":status"), GW_SLICE_LIT("200"), 0},
    };
    gw_hpack_field_t f[64];
    size_t k = 0;
    if (!trailers && n && (p[0] & 3) == 0) { /* a well-formed GET first, most of the time */
        f[k++] = v[0];
        f[k++] = v[3];
        f[k++] = v[4];
        f[k++] = v[6];
    }
    for (size_t i = trailers ? 0 : 1; i < n && k < 64; i++)
        f[k++] = v[p[i] % (sizeof(v) / sizeof(v[0]))];
    if (trailers) /* trailers keep to regular fields */
        for (size_t i = 0; i < k; i++)
            if (f[i].name.base[0] == ':')
                f[i] = v[14];
    if (gw_hpack_encode(e, f, k, out) < 0)
        out->len = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_h2_options_t o;
    fz_t f;
    gw_iovq_t q;
    uint8_t pick = size ? data[0] : 0; /* the limits, and bit 2: extended CONNECT on */
    data += size ? 1 : 0;
    size -= size ? 1 : 0;
    fz_options(&o, pick);
    o.enable_connect_protocol = (pick & 4) != 0;
    if (fz_start(&f, &o) < 0)
        return 0;
    gw_iovq_init(&q);
    gw_hpack_enc_t enc;
    gw_hpack_enc_init(&enc, 4096);
    gw_bytes_t b, blk;
    gw_bytes_init(&b, 1 << 20);
    gw_bytes_init(&blk, 1 << 20);
    gw_bytes_append(&b, GW_H2_PREFACE, GW_H2_PREFACE_LEN);
    gw_h2_frame_write_settings(&b, 0, NULL, 0);
    uint64_t now = 1;
    size_t off = 0;
    int alive = 1;
    while (alive && off + 4 <= size) {
        uint8_t kind = data[off] % 10, sk = data[off + 1] % 16, fl = data[off + 2];
        size_t n = data[off + 3] % 64;
        off += 4;
        if (n > size - off)
            n = size - off;
        const uint8_t *pl = data + off;
        off += n;
        /* flag 0x80 on a non-HEADERS op: an even (pushed) stream id */
        uint32_t sid = sk ? 2u * sk - ((fl & 0x80) && kind != 0 && kind != 8 ? 0 : 1) : 0;
        uint32_t v32 = 0;
        for (size_t i = 0; i < n && i < 4; i++)
            v32 = v32 << 8 | pl[i];
        switch (kind) {
        case 0: /* a request head, maybe split over a CONTINUATION */
        case 8: /* trailers */
            blk.len = 0;
            request_block(&enc, pl, n, kind == 8, &blk);
            if ((fl & 4) && blk.len > 1) {
                size_t cut = blk.len / 2;
                gw_h2_frame_write_headers(&b, sid, fl & GW_H2_F_END_STREAM, NULL, blk.base, cut,
                                          fl & 8, fl & 0x10);
                gw_h2_frame_write_continuation(&b, sid, GW_H2_F_END_HEADERS, blk.base + cut,
                                               blk.len - cut);
            } else {
                gw_h2_frame_write_headers(&b, sid, (fl & GW_H2_F_END_STREAM) | GW_H2_F_END_HEADERS,
                                          NULL, blk.base, blk.len, fl & 8, fl & 0x10);
            }
            break;
        case 1:
            gw_h2_frame_write_data(&b, sid, fl & GW_H2_F_END_STREAM, pl, n, fl & 8, fl & 0x10);
            break;
        case 2:
            gw_h2_frame_write_window_update(&b, sid, v32 & 0x7fffffff);
            break;
        case 3:
            gw_h2_frame_write_rst_stream(&b, sid, v32 % 14);
            break;
        case 4: {
            gw_h2_priority_t pri = {0};
            pri.dependency = (v32 % 16) ? 2u * (v32 % 16) - 1 : 0;
            pri.weight = fl;
            pri.exclusive = fl & 1;
            gw_h2_frame_write_priority(&b, sid, &pri);
            break;
        }
        case 5:
            gw_h2_frame_write_priority_update(&b, sid ? sid : 1, pl, n);
            break;
        case 6: {
            gw_h2_setting_t st[8];
            size_t k = 0;
            for (size_t i = 0; i + 5 <= n && k < 8; i += 5)
                st[k++] = (gw_h2_setting_t){(uint16_t)(pl[i] % 10),
                                            (uint32_t)pl[i + 1] << 24 | (uint32_t)pl[i + 2] << 16 |
                                                (uint32_t)pl[i + 3] << 8 | pl[i + 4]};
            gw_h2_frame_write_settings(&b, fl & 1, st, k);
            break;
        }
        case 7: {
            uint8_t op[8] = {0};
            memcpy(op, pl, n < 8 ? n : 8);
            gw_h2_frame_write_ping(&b, fl & 1, op);
            break;
        }
        default: /* any frame type, payload as it is */
            gw_h2_frame_write_raw(&b, n ? pl[0] : 0xff, fl, sid, pl, n);
            break;
        }
        /* feed what was built, in two pieces, then let the session answer */
        size_t cut = b.len / 2;
        if (gw_h2_session_recv(f.s, b.base, cut, now) < 0 ||
            gw_h2_session_recv(f.s, b.base + cut, b.len - cut, now) < 0)
            alive = 0;
        b.len = 0;
        now += 3;
        if (gw_h2_session_send(f.s, &q) < 0)
            alive = 0;
        gw_iovq_consume(&q, q.bytes);
        gw_h2_session_tick(f.s, now);
    }
    gw_h2_session_send(f.s, &q);
    gw_iovq_free(&q);
    gw_bytes_free(&b);
    gw_bytes_free(&blk);
    gw_hpack_enc_free(&enc);
    gw_h2_session_del(f.s);
    gw_rbuf_unref(f.body);
    return 0;
}
