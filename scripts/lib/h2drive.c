/* h2drive: a deterministic many-connections load on the sans-IO HTTP/2 engine, to count the
 * cache misses a request costs when its connection's state is cold (issue: manyconns). The
 * gateway under h2load cannot be measured to a miss: how many requests a loop turn handles
 * varies with the machine's load, and with it the misses (±4 % run to run). This drives the
 * same code without sockets: C sessions of one profile (as a worker's), R rounds; each round
 * every session gets one GET (a HEADERS frame with END_STREAM, the fields h2load sends) and
 * answers it as the front does (nginx's eight response fields, 1 KiB of DATA), its output
 * dropped. From round 1 on every client's HPACK block is the same, so it is encoded once and
 * the clients' own state stays out of the figures.
 *
 * Build (against a release build's static libraries) and measure rounds 11-20:
 *   meson setup build-rel --buildtype=release -Ddebug=true && ninja -C build-rel
 *   cc -O2 -g -I. -Igateway -o build-rel/h2drive scripts/lib/h2drive.c \
 *     build-rel/gateway/h2/libgw_h2.a build-rel/gateway/http/libgw_http.a \
 *     build-rel/common/libgw_common.a
 *   CG="valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
 *     --LL=1048576,8,64"
 *   $CG --cachegrind-out-file=a.cg build-rel/h2drive 1000 10
 *   $CG --cachegrind-out-file=b.cg build-rel/h2drive 1000 20
 * then (b - a) / 10000 of each event on the `summary:` lines is the cost of one request, and
 * cg_annotate's per-function difference says where. The simulated caches are given (a
 * guest's reported L3 is not a real one); LL of 1 MiB is a core's L2 on current x86.
 *
 * Usage: h2drive [C [R]]   (default 1000 sessions, 20 rounds) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/buf.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/session.h"

typedef struct {
    gw_h2_session_t *s;
    gw_hpack_enc_t enc; /* the client's */
    uint32_t next_id;
    uint32_t pending; /* stream to answer */
} conn_t;

static gw_rbuf_t *body;

static int on_request(void *ud, const gw_h2_head_t *h)
{
    ((conn_t *)ud)->pending = h->stream_id;
    return 0;
}
static void on_close(void *ud, uint32_t id, uint32_t code, int by_peer)
{
    (void)code;
    (void)by_peer;
    gw_h2_session_stream_release(((conn_t *)ud)->s, id);
}

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }
static const gw_h2_header_t resp[] = {
    F("server", "nginx/1.22.1"),
    F("date", "Mon, 07 Dec 2026 00:21:05 GMT"),
    F("content-type", "application/octet-stream"),
    F("last-modified", "Mon, 07 Dec 2026 00:16:14 GMT"),
    F("etag", "\"6b15face-400\""),
    F("accept-ranges", "bytes"),
    F("via", "1.1 h2gate"),
    F("content-length", "1024"),
};
static const gw_hpack_field_t req[] = {
    {GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET"), 0},
    {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/1k.bin"), 0},
    {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("http"), 0},
    {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("127.0.0.1:25313"), 0},
    {GW_SLICE_LIT("accept"), GW_SLICE_LIT("*/*"), 0},
    {GW_SLICE_LIT("accept-encoding"), GW_SLICE_LIT("gzip, deflate"), 0},
    {GW_SLICE_LIT("user-agent"), GW_SLICE_LIT("h2load nghttp2/1.52.0"), 0},
};

static void drain(gw_h2_session_t *s, gw_iovq_t *q)
{
    if (gw_h2_session_send(s, q) < 0)
        abort();
    gw_iovq_consume(q, q->bytes);
}

int main(int argc, char **argv)
{
    int nc = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 20;
    gw_h2_callbacks_t cb = {.on_request = on_request, .on_close = on_close};
    gw_h2_options_t o;
    gw_h2_options_default(&o);
    gw_h2_profile_t *prof; /* one per worker in the gateway: its sessions share stream blocks */
    if (gw_h2_profile_new(&prof, &o, &cb) < 0)
        abort();
    conn_t *cs = calloc((size_t)nc, sizeof(*cs));
    gw_iovq_t q;
    gw_iovq_init(&q);
    body = gw_rbuf_new(1024);
    memset(body->data, 'x', 1024);
    body->len = 1024;
    gw_bytes_t in;
    gw_bytes_init(&in, 0);
    for (int i = 0; i < nc; i++) {
        conn_t *c = &cs[i];
        if (gw_h2_session_new_with(&c->s, prof, c, 0) < 0)
            abort();
        gw_hpack_enc_init(&c->enc, 4096);
        c->next_id = 1;
        in.len = 0;
        gw_bytes_append(&in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
        gw_h2_frame_write_settings(&in, 0, NULL, 0);
        gw_h2_frame_write_settings(&in, 1, NULL, 0);
        if (gw_h2_session_recv(c->s, in.base, in.len, 0) != (ssize_t)in.len)
            abort();
        drain(c->s, &q);
    }
    gw_bytes_t blk;
    gw_bytes_init(&blk, 0);
    long answered = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < nc; i++) {
            conn_t *c = &cs[i];
            in.len = 0;
            /* from round 1 on every client's table is the same, so is its block: encoded once,
             * the clients' own HPACK state stays out of the figures */
            if (r < 1 || (r == 1 && i == 0)) {
                blk.len = 0;
                if (gw_hpack_encode(&c->enc, req, sizeof(req) / sizeof(req[0]), &blk) < 0)
                    abort();
            }
            gw_h2_frame_write_headers(&in, c->next_id, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                      NULL, blk.base, blk.len, 0, 0);
            c->next_id += 2;
            c->pending = 0;
            if (gw_h2_session_recv(c->s, in.base, in.len, 1) != (ssize_t)in.len || !c->pending)
                abort();
            if (gw_h2_session_submit_response(c->s, c->pending, 200, resp,
                                              sizeof(resp) / sizeof(resp[0]), 0) < 0 ||
                gw_h2_session_submit_data(c->s, c->pending, body, 0, 1024, 1) < 0)
                abort();
            drain(c->s, &q);
            answered++;
        }
    }
    printf("answered=%ld\n", answered);
    for (int i = 0; i < nc; i++) {
        gw_h2_session_del(cs[i].s);
        gw_hpack_enc_free(&cs[i].enc);
    }
    gw_h2_profile_del(prof);
    gw_iovq_free(&q);
    gw_rbuf_unref(body);
    gw_bytes_free(&in);
    gw_bytes_free(&blk);
    free(cs);
    return 0;
}
