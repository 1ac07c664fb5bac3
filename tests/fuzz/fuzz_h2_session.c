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

#include "h2_fuzz_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_h2_options_t o;
    fz_t f;
    gw_iovq_t q;
    uint8_t pre[GW_H2_PREFACE_LEN + 9];
    uint8_t k = size ? data[0] : 0; /* the limits, and bit 2: compact */
    data += size ? 1 : 0;
    size -= size ? 1 : 0;
    /* compact: give back idle memory after every chunk, as the front does */
    int compact = (k & 4) != 0;
    fz_options(&o, k);
    if (fz_start(&f, &o) < 0)
        return 0;
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
