/* Unit tests of h2/session: a server session driven with hand-built frames (h2/frame.h
 * serializers + the HPACK encoder); what it emits is parsed back from the output iovq.
 *
 * Error paths covered (RFC 9113):
 *   §3.4   bad preface -> GOAWAY PROTOCOL_ERROR; first frame not SETTINGS -> PROTOCOL_ERROR
 *   §4.2   frame above SETTINGS_MAX_FRAME_SIZE -> FRAME_SIZE_ERROR
 *   §5.1   DATA/WINDOW_UPDATE/RST_STREAM on an idle stream -> conn PROTOCOL_ERROR; DATA on a
 *          half-closed (remote) stream -> STREAM_CLOSED; HEADERS after END_STREAM -> STREAM_CLOSED
 *   §5.1.1 even client stream id, decreasing id -> conn PROTOCOL_ERROR
 *   §5.1.2 MAX_CONCURRENT_STREAMS -> REFUSED_STREAM; released slots only
 *   §6.5   SETTINGS ACK timeout -> SETTINGS_TIMEOUT
 *   §6.6   PUSH_PROMISE from a client -> PROTOCOL_ERROR
 *   §6.9   DATA above the stream / connection window -> FLOW_CONTROL_ERROR; WINDOW_UPDATE
 *          overflow (stream / connection); §6.9.2 INITIAL_WINDOW_SIZE delta
 *   §6.10  frame inside a header block, CONTINUATION without HEADERS -> PROTOCOL_ERROR
 *   §8.1-§8.3 malformed requests (each rule) -> RST_STREAM PROTOCOL_ERROR, content-length
 *          mismatch, trailers with pseudo-headers or without END_STREAM
 *   limits: rapid reset, CONTINUATION flood, header list (431), PING flood, empty frames,
 *          queued control frames, max requests -> graceful GOAWAY
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/session.h"

/* ---- event recorder ------------------------------------------------------------------- */

typedef struct {
    char log[8192];
    size_t len;
    gw_h2_session_t *s;
    int consume; /* consume data at once */
    int release_on_close;
} rec_t;

static void logf_(rec_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(rec_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->log + r->len, sizeof(r->log) - r->len, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(r->log) - r->len)
        r->len += (size_t)n;
}

#define SL(x) (int)(x).len, (const char *)(x).base

static int on_request(void *ud, const gw_h2_head_t *h)
{
    rec_t *r = ud;
    logf_(r, "req %u %.*s %.*s %.*s %.*s cl=%lld es=%d", h->stream_id, SL(h->method), SL(h->scheme),
          SL(h->authority), SL(h->path), (long long)h->content_length, h->end_stream);
    for (size_t i = 0; i < h->headers_len; i++)
        logf_(r, " %.*s=%.*s", SL(h->headers[i].name), SL(h->headers[i].value));
    logf_(r, ";");
    return 0;
}

static int on_data(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    rec_t *r = ud;
    logf_(r, "data %u %.*s;", sid, (int)len, (const char *)d);
    if (r->consume)
        gw_h2_session_consume(r->s, sid, len);
    return 0;
}

static int on_trailers(void *ud, uint32_t sid, const gw_h2_header_t *h, size_t n)
{
    rec_t *r = ud;
    logf_(r, "trailers %u", sid);
    for (size_t i = 0; i < n; i++)
        logf_(r, " %.*s=%.*s", SL(h[i].name), SL(h[i].value));
    logf_(r, ";");
    return 0;
}

static int on_end_stream(void *ud, uint32_t sid)
{
    logf_(ud, "end %u;", sid);
    return 0;
}

static void on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    rec_t *r = ud;
    logf_(r, "close %u %s %d;", sid, gw_h2_error_str(code), by_peer);
    if (r->release_on_close)
        gw_h2_session_stream_release(r->s, sid);
}

static void on_goaway(void *ud, uint32_t last, uint32_t code, gw_slice_t dbg)
{
    logf_(ud, "goaway %u %s %.*s;", last, gw_h2_error_str(code), SL(dbg));
}

static const gw_h2_callbacks_t cbs = {on_request, on_data, on_trailers, on_end_stream,
                                      on_close,   NULL,    on_goaway,   NULL};

/* ---- client side helpers --------------------------------------------------------------- */

typedef struct {
    gw_bytes_t b;
    gw_hpack_enc_t enc;
} cli_t;

static void cli_init(cli_t *c, int preface)
{
    gw_bytes_init(&c->b, 0);
    assert_int_equal(gw_hpack_enc_init(&c->enc, 4096), 0);
    if (preface) {
        assert_int_equal(gw_bytes_append(&c->b, GW_H2_PREFACE, GW_H2_PREFACE_LEN), 0);
        assert_int_equal(gw_h2_frame_write_settings(&c->b, 0, NULL, 0), 0);
    }
}

static void cli_free(cli_t *c)
{
    gw_bytes_free(&c->b);
    gw_hpack_enc_free(&c->enc);
}

/* Encode "name", "value", ..., NULL as a header block. A name with uppercase letters (which
 * the encoder does not take) is written by hand as a literal without indexing (RFC 7541
 * §6.2.2, short strings, no Huffman). */
static void block(cli_t *c, gw_bytes_t *out, const char *const *kv)
{
    gw_bytes_init(out, 0);
    for (size_t i = 0; kv[2 * i]; i++) {
        gw_hpack_field_t f = {gw_slice_str(kv[2 * i]), gw_slice_str(kv[2 * i + 1]), 0};
        int upper = 0;
        for (size_t k = 0; k < f.name.len; k++)
            upper |= f.name.base[k] >= 'A' && f.name.base[k] <= 'Z';
        if (!upper) {
            assert_int_equal(gw_hpack_encode(&c->enc, &f, 1, out), 0);
            continue;
        }
        assert_true(f.name.len < 127 && f.value.len < 127);
        uint8_t z = 0, nl = (uint8_t)f.name.len, vl = (uint8_t)f.value.len;
        assert_int_equal(gw_bytes_append(out, &z, 1), 0);
        assert_int_equal(gw_bytes_append(out, &nl, 1), 0);
        assert_int_equal(gw_bytes_append(out, f.name.base, nl), 0);
        assert_int_equal(gw_bytes_append(out, &vl, 1), 0);
        assert_int_equal(gw_bytes_append(out, f.value.base, vl), 0);
    }
}

static void cli_headers(cli_t *c, uint32_t sid, uint8_t flags, const char *const *kv)
{
    gw_bytes_t blk;
    block(c, &blk, kv);
    assert_int_equal(gw_h2_frame_write_headers(&c->b, sid, flags | GW_H2_F_END_HEADERS, NULL,
                                               blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
}

static const char *const GET[] = {":method",     "GET",   ":scheme", "https", ":authority",
                                  "example.com", ":path", "/a",      NULL};
/* RFC 9218 §5 priority request field variants of GET */
static const char *const GET_I[] = {":method",    "GET",         ":scheme", "https",
                                    ":authority", "example.com", ":path",   "/a",
                                    "priority",   "i",           NULL};
static const char *const GET_U0[] = {":method",    "GET",         ":scheme", "https",
                                     ":authority", "example.com", ":path",   "/a",
                                     "priority",   "u=0",         NULL};
static const char *const POST[] = {":method", "POST",           ":scheme", "https", ":path",
                                   "/up",     "content-length", "5",       NULL};

/* ---- output parsing -------------------------------------------------------------------- */

typedef struct {
    gw_h2_frame_hdr_t h;
    uint8_t p[256];
} outf_t;

typedef struct {
    outf_t f[64];
    size_t n;
} outs_t;

/* Drain the session into a fresh iovq and split the bytes into frames. */
static void drain(gw_h2_session_t *s, outs_t *o)
{
    gw_iovq_t q;
    static uint8_t flat[1 << 20];
    gw_iovq_init(&q);
    assert_true(gw_h2_session_send(s, &q) >= 0);
    size_t len = gw_iovq_flatten(&q, flat, sizeof(flat));
    assert_int_equal(len, q.bytes);
    gw_iovq_free(&q);
    o->n = 0;
    for (size_t off = 0; off < len;) {
        assert_true(len - off >= 9);
        outf_t *f = &o->f[o->n < 63 ? o->n++ : 63];
        gw_h2_frame_hdr_parse(flat + off, &f->h);
        off += 9;
        assert_true(len - off >= f->h.length);
        memcpy(f->p, flat + off, f->h.length < 256 ? f->h.length : 256);
        off += f->h.length;
    }
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static const outf_t *find_type(const outs_t *o, uint8_t type, size_t nth)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->f[i].h.type == type && nth-- == 0)
            return &o->f[i];
    return NULL;
}

static void expect_goaway(const outs_t *o, uint32_t code)
{
    const outf_t *g = find_type(o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p + 4), code);
}

static void expect_rst(const outs_t *o, uint32_t sid, uint32_t code)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->f[i].h.type == GW_H2_FT_RST_STREAM && o->f[i].h.stream_id == sid) {
            assert_int_equal(get32(o->f[i].p), code);
            return;
        }
    fail_msg("no RST_STREAM on stream %u", sid);
}

static gw_h2_session_t *server(rec_t *r, const gw_h2_options_t *o)
{
    gw_h2_session_t *s;
    memset(r, 0, sizeof(*r));
    assert_int_equal(gw_h2_session_new(&s, o, &cbs, r, 0), 0);
    r->s = s;
    return s;
}

static ssize_t feed(gw_h2_session_t *s, const gw_bytes_t *b)
{
    return gw_h2_session_recv(s, b->base, b->len, 1);
}

/* A session past the handshake: preface + SETTINGS fed, initial output drained. */
static gw_h2_session_t *ready(rec_t *r, cli_t *c, const gw_h2_options_t *o)
{
    gw_h2_session_t *s = server(r, o);
    outs_t out;
    cli_init(c, 1);
    assert_int_equal(feed(s, &c->b), (ssize_t)c->b.len);
    c->b.len = 0;
    /* acknowledge the server's SETTINGS */
    assert_int_equal(gw_h2_frame_write_settings(&c->b, 1, NULL, 0), 0);
    assert_int_equal(feed(s, &c->b), (ssize_t)c->b.len);
    c->b.len = 0;
    drain(s, &out);
    return s;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void handshake_and_ping(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    outs_t o;
    assert_true(gw_h2_session_want_write(s));
    drain(s, &o);
    /* server preface: SETTINGS then the connection WINDOW_UPDATE up to 1 MiB */
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_SETTINGS);
    assert_int_equal(o.f[0].h.length % 6, 0);
    int saw_iws = 0;
    for (size_t i = 0; i < o.f[0].h.length; i += 6)
        if (o.f[0].p[i + 1] == GW_H2_SETTINGS_INITIAL_WINDOW_SIZE) {
            assert_int_equal(get32(o.f[0].p + i + 2), 256 * 1024);
            saw_iws = 1;
        }
    assert_true(saw_iws);
    /* RFC 9218 §2.1: no SETTINGS_NO_RFC7540_PRIORITIES, since the RFC 7540 tree is honoured */
    for (size_t i = 0; i < o.f[0].h.length; i += 6)
        assert_int_not_equal(o.f[0].p[i + 1], GW_H2_SETTINGS_NO_RFC7540_PRIORITIES);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_WINDOW_UPDATE);
    assert_int_equal(get32(o.f[1].p), 1024 * 1024 - 65535);
    assert_int_equal(gw_h2_session_next_deadline(s), 10000);

    cli_t c;
    cli_init(&c, 1);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, (const uint8_t *)"12345678"), 0);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_SETTINGS);
    assert_int_equal(o.f[0].h.flags, GW_H2_F_ACK);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_PING);
    assert_int_equal(o.f[1].h.flags, GW_H2_F_ACK);
    assert_memory_equal(o.f[1].p, "12345678", 8);
    assert_int_equal(gw_h2_session_next_deadline(s), UINT64_MAX);
    assert_true(gw_h2_session_want_read(s));
    assert_false(gw_h2_session_want_write(s));
    cli_free(&c);
    gw_h2_session_del(s);
}

static void bad_preface(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    outs_t o;
    drain(s, &o);
    const char *h1 = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(gw_h2_session_recv(s, (const uint8_t *)h1, strlen(h1), 0), GW_E_PROTO);
    assert_false(gw_h2_session_want_read(s));
    assert_false(gw_h2_session_should_close(s)); /* GOAWAY not flushed yet */
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    assert_true(gw_h2_session_should_close(s));
    assert_int_equal(gw_h2_session_recv(s, (const uint8_t *)"x", 1, 0), GW_E_CLOSED);
    gw_h2_session_del(s);
}

static void first_frame_not_settings(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    cli_t c;
    outs_t o;
    cli_init(&c, 0);
    assert_int_equal(gw_bytes_append(&c.b, GW_H2_PREFACE, GW_H2_PREFACE_LEN), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &c.b), GW_E_PROTO);
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void settings_timeout(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    outs_t o;
    assert_int_equal(gw_h2_session_tick(s, 9999), 0);
    assert_int_equal(gw_h2_session_tick(s, 10000), GW_E_TIMEOUT);
    drain(s, &o);
    expect_goaway(&o, GW_H2_SETTINGS_TIMEOUT);
    assert_int_equal(gw_h2_session_stats(s).settings_timeouts, 1);
    gw_h2_session_del(s);
}

static void get_and_response_by_reference(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "req 1 GET https example.com /a cl=-1 es=1;end 1;");
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_HALF_CLOSED_REMOTE);

    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/plain")}};
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, hf, 1, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(64);
    memcpy(rb->data, "xxhello world", 13);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 2, 11, 1), 0);
    assert_int_equal(gw_h2_session_stream_queued(s, 1), 11);
    gw_iovq_t q;
    gw_iovq_init(&q);
    assert_true(gw_h2_session_send(s, &q) > 0);
    /* the payload iovec points into the rbuf itself */
    struct iovec v[16];
    size_t nv = gw_iovq_peek(&q, v, 16);
    int found = 0;
    for (size_t i = 0; i < nv; i++)
        if (v[i].iov_base == rb->data + 2 && v[i].iov_len == 11)
            found = 1;
    assert_true(found);
    assert_true(rb->refs >= 2);
    gw_iovq_free(&q);
    assert_int_equal(rb->refs, 1);
    gw_rbuf_unref(rb);
    assert_string_equal(r.log,
                        "req 1 GET https example.com /a cl=-1 es=1;end 1;close 1 NO_ERROR 0;");
    assert_int_equal(gw_h2_session_active_streams(s), 1); /* until released */
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void response_frames(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), GW_E_INVAL);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    memset(rb->data, 'z', 40000);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 40000, 0), 0);
    const gw_h2_header_t tr[] = {{GW_SLICE_LIT("grpc-status"), GW_SLICE_LIT("0")}};
    assert_int_equal(gw_h2_session_submit_trailers(s, 1, tr, 1), 0);
    drain(s, &o);
    /* HEADERS, DATA 16384 + 16384 + 7232 (peer max frame), trailers HEADERS END_STREAM */
    assert_int_equal(o.n, 5);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(o.f[0].h.flags, GW_H2_F_END_HEADERS);
    assert_int_equal(o.f[1].h.length, 16384);
    assert_int_equal(o.f[2].h.length, 16384);
    assert_int_equal(o.f[3].h.length, 40000 - 32768);
    assert_int_equal(o.f[3].h.flags, 0);
    assert_int_equal(o.f[4].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(o.f[4].h.flags, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_send_window(s, 0), 65535 - 40000);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Issue 18 item 6: header blocks on a stream the gateway reset are decoded for the HPACK
 * state only (the table follows), nothing is copied per field, and each block is charged to
 * the control budget. */
static void issue18_6_blocks_on_reset_streams(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.control_frame_budget = 300;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    /* stream 1 is malformed (uppercase name): the gateway resets it */
    static const char *const BAD[] = {":method", "GET", ":scheme", "https", ":path",
                                      "/",       "Bad", "x",       NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, BAD);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
    /* a 4000-byte entry enters the table through a block on the reset stream: literal with
     * incremental indexing, new name "x" (RFC 7541 §6.2.1), value length 4000 = 127 + 3873 */
    static uint8_t big[4 + 2 + 4000];
    size_t k = 0;
    big[k++] = 0x40;
    big[k++] = 0x01;
    big[k++] = 'x';
    big[k++] = 0x7f;
    big[k++] = 0x80 | (3873 & 0x7f);
    big[k++] = (uint8_t)(3873 >> 7);
    memset(big + k, 'a', 4000);
    k += 4000;
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 1, GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS,
                                               NULL, big, k, 0, 0),
                     0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    /* then blocks of one byte naming that entry (index 62): nothing kept for any of them */
    const uint8_t idx62 = 0x80 | 62;
    gw_alloc_count_start();
    for (int i = 0; i < 250; i++)
        assert_int_equal(gw_h2_frame_write_headers(&c.b, 1,
                                                   GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS, NULL,
                                                   &idx62, 1, 0, 0),
                         0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    long long live = gw_alloc_count_live();
    gw_alloc_count_stop();
    if (live > 64 * 1024)
        fail_msg("250 blocks on a reset stream kept %lld bytes", live);
    assert_int_equal(gw_h2_session_stats(s).discarded_blocks, 251);
    drain(s, &o);
    /* the budget: 300 control units, 251 spent: fifty more blocks are a flood */
    for (int i = 0; i < 50; i++)
        assert_int_equal(gw_h2_frame_write_headers(&c.b, 1,
                                                   GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS, NULL,
                                                   &idx62, 1, 0, 0),
                         0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Issue 18 item 6, literals: blocks on a reset stream made of 3-byte literals without
 * indexing that name a 4000-byte table entry (RFC 7541 §6.2.2) are decoded in the decoder's
 * table-only mode: nothing is allocated or copied for them (each literal copied the 4000-byte
 * name before: 400 MB of copying for 100 frames of 3 KB), and the budget still ends it. */
static void issue18_6_literals_on_reset_streams_copy_nothing(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.control_frame_budget = 150;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    static const char *const BAD[] = {":method", "GET", ":scheme", "https", ":path",
                                      "/",       "Bad", "x",       NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, BAD);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
    /* an entry with a 4000-byte name, "v" as value (§6.2.1, new name) */
    static uint8_t big[4 + 4000 + 2];
    size_t k = 0;
    big[k++] = 0x40;
    big[k++] = 0x7f;
    big[k++] = 0x80 | (3873 & 0x7f);
    big[k++] = (uint8_t)(3873 >> 7);
    memset(big + k, 'n', 4000);
    k += 4000;
    big[k++] = 0x01;
    big[k++] = 'v';
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 1, GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS,
                                               NULL, big, k, 0, 0),
                     0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    enum { REPS = 1000, FRAMES = 100 };
    static uint8_t lit[REPS * 3];
    for (size_t i = 0; i < REPS; i++) {
        lit[3 * i] = 0x0f; /* name index 62 = 15 + 47, empty value */
        lit[3 * i + 1] = 0x2f;
        lit[3 * i + 2] = 0x00;
    }
    for (int i = 0; i < FRAMES; i++)
        assert_int_equal(gw_h2_frame_write_headers(&c.b, 1,
                                                   GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS, NULL,
                                                   lit, sizeof(lit), 0, 0),
                         0);
    gw_alloc_count_start();
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    long long allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    c.b.len = 0;
    if (allocs != 0)
        fail_msg("%d blocks on a reset stream made %lld allocations", FRAMES, allocs);
    assert_int_equal(gw_h2_session_stats(s).discarded_blocks, FRAMES + 1);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
    /* 101 of 150 spent: fifty more blocks are a flood */
    for (int i = 0; i < 50; i++)
        assert_int_equal(gw_h2_frame_write_headers(&c.b, 1,
                                                   GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS, NULL,
                                                   lit, sizeof(lit), 0, 0),
                         0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* ---- issue 18 item 4: header blocks are encoded in wire order ---- */

typedef struct {
    char s[512];
    size_t n;
} fields_str_t;

static int fields_cb(void *ud, const gw_hpack_field_t *f)
{
    fields_str_t *a = ud;
    int w = snprintf(a->s + a->n, sizeof(a->s) - a->n, "%.*s: %.*s;", (int)f->name.len,
                     (const char *)f->name.base, (int)f->value.len, (const char *)f->value.base);
    if (w > 0)
        a->n += (size_t)w < sizeof(a->s) - a->n ? (size_t)w : 0;
    return 0;
}

/* Decode every HEADERS frame of o (in the order they came) with the peer's decoder d;
 * returns the fields of the last one on stream sid, or "ERROR" when a block fails. */
static void decode_headers(gw_hpack_dec_t *d, const outs_t *o, uint32_t sid, fields_str_t *out)
{
    out->n = 0;
    out->s[0] = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (o->f[i].h.type != GW_H2_FT_HEADERS)
            continue;
        assert_true(o->f[i].h.flags & GW_H2_F_END_HEADERS);
        fields_str_t a = {{0}, 0};
        gw_hpack_dec_begin(d, 65536);
        ssize_t n = gw_hpack_decode(d, o->f[i].p, o->f[i].h.length, 1, fields_cb, &a);
        if (n < 0 || gw_hpack_dec_end(d) < 0)
            snprintf(a.s, sizeof(a.s), "ERROR");
        if (o->f[i].h.stream_id == sid)
            *out = a;
    }
}

static void issue18_4_trailers_encoded_in_wire_order(void **state)
{
    (void)state;
    for (int reset = 0; reset < 2; reset++) {
        rec_t r;
        cli_t c;
        outs_t o;
        gw_hpack_dec_t d;
        assert_int_equal(gw_hpack_dec_init(&d, 4096), 0);
        gw_h2_session_t *s = ready(&r, &c, NULL);
        /* the client's windows start at 0: DATA (and the trailers behind it) wait */
        const gw_h2_setting_t zero[] = {{GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0}};
        assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, zero, 1), 0);
        cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
        cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
        assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
        c.b.len = 0;
        drain(s, &o);
        const gw_h2_header_t tr[] = {{GW_SLICE_LIT("x-checksum"), GW_SLICE_LIT("3a7bd3e2360a")}};
        assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
        gw_rbuf_t *rb = gw_rbuf_new(10);
        memset(rb->data, 'z', 10);
        assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 10, 0), 0);
        gw_rbuf_unref(rb);
        assert_int_equal(gw_h2_session_submit_trailers(s, 1, tr, 1), 0);
        fields_str_t got;
        drain(s, &o);
        decode_headers(&d, &o, 1, &got);
        assert_string_equal(got.s, ":status: 200;");
        if (reset) { /* the client gives up on stream 1 before its trailers leave */
            assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 1, GW_H2_CANCEL), 0);
            assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
            c.b.len = 0;
        }
        /* stream 3's head, with the same field, goes out first */
        assert_int_equal(gw_h2_session_submit_response(s, 3, 200, tr, 1, 1), 0);
        drain(s, &o);
        decode_headers(&d, &o, 3, &got);
        assert_string_equal(got.s, ":status: 200;x-checksum: 3a7bd3e2360a;");
        if (!reset) { /* window for stream 1: its DATA, then its trailers */
            assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 100), 0);
            assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
            c.b.len = 0;
            drain(s, &o);
            decode_headers(&d, &o, 1, &got);
            assert_string_equal(got.s, "x-checksum: 3a7bd3e2360a;");
            const outf_t *t = find_type(&o, GW_H2_FT_HEADERS, 0);
            assert_non_null(t);
            assert_true(t->h.flags & GW_H2_F_END_STREAM);
        }
        gw_hpack_dec_free(&d);
        cli_free(&c);
        gw_h2_session_del(s);
    }
}

/* The same input whole, byte by byte and cut at every point gives the same events. */
static void split_feeding(void **state)
{
    (void)state;
    cli_t c;
    cli_init(&c, 1);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "he", 2, 1, 3), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "llo", 3, 0, 0), 0);
    const char *const G2[] = {":method", "GET", ":scheme", "http", ":path", "/b", NULL};
    cli_headers(&c, 3, GW_H2_F_END_STREAM, G2);

    char whole[8192];
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    strcpy(whole, r.log);
    assert_string_equal(whole, "req 1 POST https  /up cl=5 es=0 content-length=5;data 1 he;"
                               "data 1 llo;end 1;req 3 GET http  /b cl=-1 es=1;end 3;");
    gw_h2_session_del(s);

    /* byte by byte */
    s = server(&r, NULL);
    for (size_t i = 0; i < c.b.len; i++)
        assert_int_equal(gw_h2_session_recv(s, c.b.base + i, 1, 1), 1);
    assert_string_equal(r.log, whole);
    gw_h2_session_del(s);

    /* every cut point */
    for (size_t cut = 1; cut < c.b.len; cut++) {
        s = server(&r, NULL);
        assert_int_equal(gw_h2_session_recv(s, c.b.base, cut, 1), (ssize_t)cut);
        assert_int_equal(gw_h2_session_recv(s, c.b.base + cut, c.b.len - cut, 1),
                         (ssize_t)(c.b.len - cut));
        assert_string_equal(r.log, whole);
        gw_h2_session_del(s);
    }
    cli_free(&c);
}

static void flow_control_backpressure(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.initial_window_size = 65536;
    opt.connection_window_size = 65536 * 4;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&c, 1, 0, P);
    static uint8_t chunk[16384];
    memset(chunk, 'a', sizeof(chunk));
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    /* no WINDOW_UPDATE while nothing is consumed */
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    /* the window is spent: one more byte is a stream FLOW_CONTROL_ERROR */
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "x", 1, 0, 0), 0);
    rec_t r2;
    cli_t c2;
    gw_h2_session_t *s2 = ready(&r2, &c2, &opt);
    cli_headers(&c2, 1, 0, P);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&c2.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_data(&c2.b, 1, 0, "x", 1, 0, 0), 0);
    assert_int_equal(feed(s2, &c2.b), (ssize_t)c2.b.len);
    drain(s2, &o);
    expect_rst(&o, 1, GW_H2_FLOW_CONTROL_ERROR);
    cli_free(&c2);
    gw_h2_session_del(s2);

    /* consuming less than half: still nothing; half: stream and connection updates */
    assert_int_equal(gw_h2_session_consume(s, 1, 16384), 0);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    assert_int_equal(gw_h2_session_consume(s, 1, 16384), 0);
    drain(s, &o);
    const outf_t *w = find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0);
    assert_non_null(w);
    assert_int_equal(w->h.stream_id, 1);
    assert_int_equal(get32(w->p), 32768);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 1)); /* connection: 32 KiB < half */
    assert_int_equal(gw_h2_session_consume(s, 1, 32768), 0);
    assert_int_equal(gw_h2_session_consume(s, 1, 1000), 0); /* more than delivered: capped */
    drain(s, &o);
    assert_non_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    assert_int_equal(gw_h2_session_consume(s, 99, 1), GW_E_NOENT);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void connection_window_exceeded(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.initial_window_size = 65535;
    opt.connection_window_size = 65535;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    static uint8_t chunk[16384];
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&c, 1, 0, P);
    cli_headers(&c, 3, 0, P);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(gw_h2_frame_write_data(&c.b, 3, 0, chunk, sizeof(chunk), 0, 0), 0);
    assert_int_equal(feed(s, &c.b), GW_E_FLOW);
    drain(s, &o);
    expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void round_robin_and_connection_window(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const gw_h2_setting_t big = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &big, 1), 0);
    /* incremental (RFC 9218 §4.2): the scheduler takes turns one frame each */
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_I);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET_I);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 40000, 1), 0);
    }
    drain(s, &o);
    /* 2 HEADERS, then DATA alternating between the streams until the connection window
     * (65535) is spent */
    assert_int_equal(o.n, 6);
    const uint32_t order[] = {1, 3, 1, 3};
    const uint32_t lens[] = {16384, 16384, 16384, 16383};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(o.f[2 + i].h.type, GW_H2_FT_DATA);
        assert_int_equal(o.f[2 + i].h.stream_id, order[i]);
        assert_int_equal(o.f[2 + i].h.length, lens[i]);
    }
    assert_int_equal(gw_h2_session_send_window(s, 0), 0);
    assert_false(gw_h2_session_want_write(s));
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 100000), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &o);
    size_t total = 0;
    int eos = 0;
    for (size_t i = 0; i < o.n; i++) {
        total += o.f[i].h.length;
        eos += (o.f[i].h.flags & GW_H2_F_END_STREAM) != 0;
    }
    assert_int_equal(total, 80000 - 65535);
    assert_int_equal(eos, 2);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Stream ids of the DATA frames in o, from index from; returns the count. */
static size_t data_order(const outs_t *o, size_t from, uint32_t *ids, size_t max)
{
    size_t k = 0;
    for (size_t i = from; i < o->n && k < max; i++)
        if (o->f[i].h.type == GW_H2_FT_DATA)
            ids[k++] = o->f[i].h.stream_id;
    return k;
}

/* RFC 9218: the request field is applied at open (u=0 stream 5 first), non-incremental
 * streams of one urgency go one at a time by id (1 before 3), PRIORITY_UPDATE re-queues an
 * open stream (3 raised to u=1) and, sent before the stream, applies when it opens (7). */
static void priority_scheduling(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    /* PRIORITY_UPDATE about idle stream 7 first (§7.1), then the requests */
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 7, "u=2", 3), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET_U0);
    cli_headers(&c, 7, GW_H2_F_END_STREAM, GET_U0); /* the earlier frame wins: u=2 */
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    uint8_t u;
    int inc;
    assert_int_equal(gw_h2_session_get_priority(s, 5, &u, &inc), 0);
    assert_int_equal(u, 0);
    assert_int_equal(gw_h2_session_get_priority(s, 7, &u, &inc), 0);
    assert_int_equal(u, 2);
    assert_int_equal(gw_h2_session_get_priority(s, 1, &u, &inc), 0);
    assert_int_equal(u, 3);
    assert_int_equal(inc, 0);
    drain(s, &o);
    /* 20000 bytes each: two frames per stream at the default 16384 max frame size */
    gw_rbuf_t *rb = gw_rbuf_new(20000);
    for (uint32_t sid = 1; sid <= 7; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 20000, 1), 0);
    }
    /* raise 3 above 1 (but below 5 and 7) before anything is framed; open the connection
     * window for all 80000 bytes */
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 3, "u=1", 3), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 100000), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    uint32_t ids[16];
    size_t n = data_order(&o, 0, ids, 16);
    const uint32_t want[] = {5, 5, 3, 3, 7, 7, 1, 1};
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    /* set_priority: unknown/closed stream and range */
    assert_int_equal(gw_h2_session_set_priority(s, 5, 1, 0), GW_E_NOENT);
    assert_int_equal(gw_h2_session_set_priority(s, 99, 1, 0), GW_E_NOENT);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* gw_h2_session_set_priority re-queues a stream with DATA waiting (RFC 9218 §8), -1 keeps a
 * parameter; PRIORITY_UPDATE for a closed stream or an even id is ignored; the idle-stream
 * buffer keeps at most max_concurrent_streams entries, the oldest dropped. */
static void priority_set_and_pending_bound(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_concurrent_streams = 2;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    /* the connection window stays shut, so DATA waits */
    const gw_h2_setting_t zero = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &zero, 1), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    gw_rbuf_t *rb = gw_rbuf_new(100);
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 100, 1), 0);
    }
    drain(s, &o);
    assert_int_equal(gw_h2_session_set_priority(s, 3, 8, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_session_set_priority(s, 3, 2, -1), 0);
    assert_int_equal(gw_h2_session_set_priority(s, 1, -1, 1), 0);
    uint8_t u;
    int inc;
    assert_int_equal(gw_h2_session_get_priority(s, 1, &u, &inc), 0);
    assert_int_equal(u, 3);
    assert_int_equal(inc, 1);
    /* even id and ids that opened already are ignored; 5, 7, 9 buffered, 5 dropped (cap 2) */
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 2, "u=0", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 5, "u=0", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 7, "u=6", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 9, "u=1", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 9, "u=4, i", 6), 0);
    const gw_h2_setting_t some = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 100};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &some, 1), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    uint32_t ids[8];
    assert_int_equal(data_order(&o, 0, ids, 8), 2);
    assert_int_equal(ids[0], 3); /* u=2 before u=3 */
    assert_int_equal(ids[1], 1);
    for (uint32_t sid = 1; sid <= 3; sid += 2)
        assert_int_equal(gw_h2_session_stream_release(s, sid), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 1, "u=0", 3), 0); /* closed */
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 9, GW_H2_F_END_STREAM, GET); /* 7 never opens */
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_get_priority(s, 5, &u, &inc), 0);
    assert_int_equal(u, 3); /* its update was the oldest and was dropped */
    assert_int_equal(gw_h2_session_get_priority(s, 9, &u, &inc), 0);
    assert_int_equal(u, 4); /* the most recent update for 9 */
    assert_int_equal(inc, 1);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* The bandwidth hook: the connection budget cuts DATA frames to fit and stops DATA at 0
 * (HEADERS still go); a stream budget holds back that stream only, and a new budget queues
 * it again. */
static void data_budget(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const gw_h2_setting_t big = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &big, 1), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 1 << 20), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    assert_true(gw_h2_session_data_budget(s, 0) == SIZE_MAX);
    assert_true(gw_h2_session_data_budget(s, 1) == SIZE_MAX);
    assert_int_equal(gw_h2_session_data_budget(s, 99), 0);
    assert_int_equal(gw_h2_session_set_data_budget(s, 99, 5), GW_E_NOENT);

    assert_int_equal(gw_h2_session_set_data_budget(s, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    rb->len = 40000;
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 40000, 1), 0);
    }
    /* budget 0: the heads go, no DATA; want_write says nothing is left */
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_HEADERS);
    assert_false(gw_h2_session_want_write(s));

    /* 20000 bytes: 16384 then 3616 on stream 1 (a frame cut to fit; the RFC 9218 scheduler
     * serves non-incremental streams of one urgency one at a time) */
    assert_int_equal(gw_h2_session_set_data_budget(s, 0, 20000), 0);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.stream_id, 1);
    assert_int_equal(o.f[0].h.length, 16384);
    assert_int_equal(o.f[1].h.stream_id, 1);
    assert_int_equal(o.f[1].h.length, 3616);
    assert_int_equal(gw_h2_session_data_budget(s, 0), 0);
    assert_int_equal(gw_h2_session_stream_queued(s, 1), 40000 - 20000);
    assert_int_equal(gw_h2_session_stream_queued(s, 3), 40000);
    assert_false(gw_h2_session_want_write(s));

    /* stream 1 limited to 1000 more, the connection unlimited: stream 3 finishes, stream 1
     * sends 1000 and waits */
    assert_int_equal(gw_h2_session_set_data_budget(s, 1, 1000), 0);
    assert_int_equal(gw_h2_session_set_data_budget(s, 0, SIZE_MAX), 0);
    drain(s, &o);
    size_t on1 = 0, on3 = 0;
    int eos3 = 0;
    for (size_t i = 0; i < o.n; i++) {
        assert_int_equal(o.f[i].h.type, GW_H2_FT_DATA);
        if (o.f[i].h.stream_id == 1)
            on1 += o.f[i].h.length;
        else
            on3 += o.f[i].h.length, eos3 |= o.f[i].h.flags & GW_H2_F_END_STREAM;
    }
    assert_int_equal(on1, 1000);
    assert_int_equal(on3, 40000);
    assert_true(eos3);
    assert_int_equal(gw_h2_session_data_budget(s, 1), 0);
    assert_false(gw_h2_session_want_write(s));
    drain(s, &o);
    assert_int_equal(o.n, 0); /* held back: nothing spins */

    /* a new stream budget queues it again; SIZE_MAX lets it finish */
    assert_int_equal(gw_h2_session_set_data_budget(s, 1, SIZE_MAX), 0);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &o);
    size_t rest = 0;
    for (size_t i = 0; i < o.n; i++)
        rest += o.f[i].h.length;
    assert_int_equal(rest, 40000 - 20000 - 1000);
    assert_true(o.f[o.n - 1].h.flags & GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void on_writable(void *ud, uint32_t sid)
{
    rec_t *r = ud;
    logf_(r, "writable %u;", sid);
    gw_h2_session_stream_release(r->s, sid); /* releasing from a callback is allowed */
}

/* on_writable after a window opens (SETTINGS delta and WINDOW_UPDATE) and when the queue
 * drains; the callback may release the stream. */
static void writable_events(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_callbacks_t cb2 = cbs;
    cb2.on_writable = on_writable;
    gw_h2_session_t *s;
    memset(&r, 0, sizeof(r));
    assert_int_equal(gw_h2_session_new(&s, NULL, &cb2, &r, 0), 0);
    r.s = s;
    cli_init(&c, 1);
    const gw_h2_setting_t zero = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &zero, 1), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    gw_rbuf_t *rb = gw_rbuf_new(10);
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 10, 0), 0);
    }
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_DATA, 0));
    r.len = 0;
    r.log[0] = 0;
    const gw_h2_setting_t some = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 5};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &some, 1), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    /* both woken; the callback released both (cancelled: RST_STREAM CANCEL) */
    assert_string_equal(r.log, "writable 1;writable 3;");
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_CANCEL);
    expect_rst(&o, 3, GW_H2_CANCEL);
    assert_null(find_type(&o, GW_H2_FT_DATA, 0));
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void initial_window_change(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const gw_h2_setting_t small = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 100};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &small, 1), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(1000);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 1000, 1), 0);
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[1].h.length, 100);
    assert_false(gw_h2_session_want_write(s));
    /* lowering makes the window negative (§6.9.2) */
    const gw_h2_setting_t lower = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 50};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &lower, 1), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_send_window(s, 1), -50);
    drain(s, &o);
    assert_int_equal(o.n, 1); /* the ACK only */
    /* raising applies the delta to the open stream */
    const gw_h2_setting_t raise = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 450};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &raise, 1), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_send_window(s, 1), 350);
    drain(s, &o);
    const outf_t *d = find_type(&o, GW_H2_FT_DATA, 0);
    assert_non_null(d);
    assert_int_equal(d->h.length, 350);
    /* WINDOW_UPDATE opens the rest; END_STREAM rides on the last DATA */
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 550), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.f[0].h.length, 550);
    assert_int_equal(o.f[0].h.flags, GW_H2_F_END_STREAM);
    /* overflow of a stream window via SETTINGS is a connection error */
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void window_overflow(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, GW_H2_MAX_WINDOW), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_FLOW_CONTROL_ERROR);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, GW_H2_MAX_WINDOW), 0);
    assert_int_equal(feed(s, &c.b), GW_E_FLOW);
    drain(s, &o);
    expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
    /* SETTINGS_INITIAL_WINDOW_SIZE pushing an open stream past 2^31-1 */
    s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, GW_H2_MAX_WINDOW - 65535), 0);
    const gw_h2_setting_t big = {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65536};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, &big, 1), 0);
    assert_int_equal(feed(s, &c.b), GW_E_FLOW);
    drain(s, &o);
    expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void max_concurrent_streams(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_concurrent_streams = 2;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 5, GW_H2_REFUSED_STREAM);
    assert_int_equal(gw_h2_session_stats(s).streams_refused, 1);
    /* a reset stream still holds its slot until released */
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), 0);
    cli_headers(&c, 7, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 7, GW_H2_REFUSED_STREAM);
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    cli_headers(&c, 9, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
    assert_non_null(strstr(r.log, "req 9 "));
    cli_free(&c);
    gw_h2_session_del(s);
}

static void rapid_reset_budget(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.reset_budget = 5;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    r.release_on_close = 1;
    uint32_t sid = 1;
    for (int i = 0; i < 5; i++, sid += 2) {
        cli_headers(&c, sid, 0, GET);
        assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, sid, GW_H2_CANCEL), 0);
    }
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    /* a reset we send because of a peer error counts too (MadeYouReset) */
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 0), 0);
    cli_headers(&c, sid, 0, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, sid, 0), 0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).reset_budget_hits, 1);
    assert_int_equal(gw_h2_session_stats(s).resets_received, 5);
    assert_true(gw_h2_session_stats(s).resets_provoked >= 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void continuation_flood(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    gw_bytes_t blk;
    block(&c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 1, 0, NULL, blk.base, 3, 0, 0), 0);
    static uint8_t junk[4096];
    ssize_t rc = 0;
    for (int i = 0; i < 100 && rc >= 0; i++) {
        assert_int_equal(gw_h2_frame_write_continuation(&c.b, 1, 0, junk, sizeof(junk)), 0);
        rc = feed(s, &c.b);
        c.b.len = 0;
    }
    assert_int_equal(rc, GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).header_block_hits, 1);
    gw_bytes_free(&blk);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void continuation_sequence(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    gw_bytes_t blk;
    block(&c, &blk, GET);
    /* split over HEADERS + 2 CONTINUATION: one request */
    assert_int_equal(
        gw_h2_frame_write_headers(&c.b, 1, GW_H2_F_END_STREAM, NULL, blk.base, 5, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_continuation(&c.b, 1, 0, blk.base + 5, 5), 0);
    assert_int_equal(
        gw_h2_frame_write_continuation(&c.b, 1, GW_H2_F_END_HEADERS, blk.base + 10, blk.len - 10),
        0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "req 1 GET https example.com /a cl=-1 es=1;end 1;");
    c.b.len = 0;
    gw_bytes_free(&blk);
    /* another frame in the middle of a block */
    block(&c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 3, 0, NULL, blk.base, 5, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &c.b), GW_E_PROTO);
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    gw_bytes_free(&blk);
    cli_free(&c);
    gw_h2_session_del(s);
    /* CONTINUATION without HEADERS */
    s = ready(&r, &c, NULL);
    assert_int_equal(gw_h2_frame_write_continuation(&c.b, 1, GW_H2_F_END_HEADERS, "", 0), 0);
    assert_int_equal(feed(s, &c.b), GW_E_PROTO);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void header_list_overflow(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_header_list_size = 200;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    static char big[300];
    memset(big, 'v', sizeof(big) - 1);
    const char *const H[] = {":method", "GET",   ":scheme", "https", ":path",
                             "/",       "x-big", big,       NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, H);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    const outf_t *h = find_type(&o, GW_H2_FT_HEADERS, 0);
    assert_non_null(h);
    assert_int_equal(h->h.stream_id, 1);
    assert_true(h->h.flags & GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_stats(s).header_list_hits, 1);
    assert_int_equal(r.len, 0); /* the layer above never saw it */
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* One request per rule of RFC 9113 §8.1-§8.3: each must be reset with PROTOCOL_ERROR. */
static void request_validation(void **state)
{
    (void)state;
    static const char *const cases[][14] = {
        {":method", "GET", ":scheme", "https", NULL},              /* no :path */
        {":scheme", "https", ":path", "/", NULL},                  /* no :method */
        {":method", "GET", ":path", "/", NULL},                    /* no :scheme */
        {":method", "GET", ":scheme", "https", ":path", "", NULL}, /* empty :path */
        {":method", "GET", ":method", "GET", ":scheme", "https", ":path", "/", NULL},
        {":method", "GET", ":scheme", "https", "a", "b", ":path", "/", NULL}, /* pseudo after */
        {":method", "GET", ":scheme", "https", ":path", "/", ":foo", "x", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", ":status", "200", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "Host", "x", NULL}, /* uppercase */
        {":method", "GET", ":scheme", "https", ":path", "/", "connection", "close", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "transfer-encoding", "chunked", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "upgrade", "h2c", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "keep-alive", "1", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "proxy-connection", "x", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "te", "gzip", NULL},
        {":method", "CONNECT", ":authority", "a:443", ":path", "/", NULL},
        {":method", "CONNECT", ":scheme", "https", NULL}, /* no :authority */
        {":method", "GET", ":scheme", "https", ":path", "/", ":protocol", "websocket", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "x", "a\nb", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "x", " lead", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "content-length", "1x", NULL},
        {":method", "GET", ":scheme", "https", ":path", "/", "content-length", "5", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rec_t r;
        cli_t c;
        outs_t o;
        gw_h2_session_t *s = ready(&r, &c, NULL);
        /* the last case: content-length 5 but END_STREAM on HEADERS */
        cli_headers(&c, 1, GW_H2_F_END_STREAM, cases[i]);
        assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
        drain(s, &o);
        expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
        if (strstr(r.log, "req 1"))
            fail_msg("case %zu reached the layer above: %s", i, r.log);
        assert_int_equal(gw_h2_session_active_streams(s), 0);
        cli_free(&c);
        gw_h2_session_del(s);
    }
    /* te: trailers and CONNECT with :authority only are fine */
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const char *const ok1[] = {":method", "GET", ":scheme",  "https", ":path",
                               "/",       "te",  "trailers", NULL};
    const char *const ok2[] = {":method", "CONNECT", ":authority", "a:443", NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, ok1);
    cli_headers(&c, 3, 0, ok2);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
    assert_non_null(strstr(r.log, "req 3 CONNECT"));
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Field names are checked by a table and values eight bytes at a time: an uppercase letter,
 * a ':' past the first byte or a DEL at any position of a long name, and a CR, LF or NUL at
 * any position of a long value, still make the request malformed; clean ones pass. */
/* Every byte value (NUL aside: the helpers take C strings) at every position of field names of
 * 1 to 17 bytes is accepted exactly when RFC 9113 §8.2.1 allows it (0x21-0x7e except A-Z and
 * ':'); a ':' in front makes an unknown pseudo-header, also malformed. */
static void field_name_every_byte_value(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 3, 4, 7, 8, 9, 15, 16, 17};
    rec_t r;
    cli_t c;
    outs_t o;
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        size_t len = lens[li];
        for (size_t pos = 0; pos < len; pos++) {
            for (int v = 1; v < 256; v++) {
                char name[24];
                memset(name, 'n', len);
                name[len] = 0;
                name[pos] = (char)v;
                int ok = v >= 0x21 && v <= 0x7e && v != ':' && !(v >= 'A' && v <= 'Z');
                const char *kv[] = {":method", "GET", ":scheme", "https", ":path",
                                    "/",       name,  "v",       NULL};
                gw_h2_session_t *s = ready(&r, &c, NULL);
                cli_headers(&c, 1, GW_H2_F_END_STREAM, kv);
                assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
                drain(s, &o);
                if (ok != (strstr(r.log, "req 1") != NULL))
                    print_message("name len %zu, byte 0x%02x at %zu\n", len, v, pos);
                assert_int_equal(ok, strstr(r.log, "req 1") != NULL);
                if (!ok)
                    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
                cli_free(&c);
                gw_h2_session_del(s);
            }
        }
    }
}

static void field_bytes_at_every_position(void **state)
{
    (void)state;
    static const char bad_name[] = {'A', ':', 0x7f, ' '};
    static const char bad_value[] = {'\r', '\n', '\0'};
    for (int kind = 0; kind < 3; kind++) {
        size_t nbad = kind == 0 ? sizeof(bad_name) : kind == 1 ? sizeof(bad_value) : 1;
        for (size_t b = 0; b < nbad; b++) {
            for (size_t pos = 0; pos < 21; pos++) {
                char name[22], value[22];
                memset(name, 'n', 21);
                memset(value, 'v', 21);
                name[21] = value[21] = 0;
                if (kind == 0)
                    name[pos] = bad_name[b];
                else if (kind == 1 && pos > 0 &&
                         pos < 20) /* NUL ends the C string: in the middle */
                    value[pos] = bad_value[b];
                const char *kv[] = {":method", "GET", ":scheme", "https", ":path",
                                    "/",       name,  value,     NULL};
                rec_t r;
                cli_t c;
                outs_t o;
                gw_h2_session_t *s = ready(&r, &c, NULL);
                cli_headers(&c, 1, GW_H2_F_END_STREAM, kv);
                assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
                drain(s, &o);
                int malformed = kind == 0 || (kind == 1 && pos > 0 && pos < 20 && b < 2);
                if (malformed) {
                    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
                    assert_null(strstr(r.log, "req 1"));
                } else {
                    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
                    assert_non_null(strstr(r.log, "req 1"));
                }
                cli_free(&c);
                gw_h2_session_del(s);
            }
        }
    }
}

static void content_length_and_trailers(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    /* DATA longer than content-length */
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "123456", 6, 0, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
    /* shorter at END_STREAM */
    s = ready(&r, &c, NULL);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "1234", 4, 0, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
    /* good trailers */
    s = ready(&r, &c, NULL);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "12345", 5, 0, 0), 0);
    const char *const T[] = {"x-sum", "abc", NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, T);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "req 1 POST https  /up cl=5 es=0 content-length=5;data 1 12345;"
                               "trailers 1 x-sum=abc;end 1;");
    cli_free(&c);
    gw_h2_session_del(s);
    /* trailers without END_STREAM, trailers with a pseudo-header */
    for (int k = 0; k < 2; k++) {
        s = ready(&r, &c, NULL);
        const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
        const char *const TP[] = {":path", "/", NULL};
        cli_headers(&c, 1, 0, P);
        if (k == 0)
            cli_headers(&c, 1, 0, T);
        else
            cli_headers(&c, 1, GW_H2_F_END_STREAM, TP);
        assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
        drain(s, &o);
        expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
        cli_free(&c);
        gw_h2_session_del(s);
    }
}

static void stream_state_errors(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    struct {
        int kind;
        ssize_t rc;
        uint32_t code;
    } cases[] = {
        {0, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* DATA on idle stream */
        {1, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* even stream id */
        {2, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* decreasing stream id */
        {3, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* PUSH_PROMISE from the client */
        {4, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* WINDOW_UPDATE on idle stream */
        {5, GW_E_PROTO, GW_H2_PROTOCOL_ERROR},   /* RST_STREAM on idle stream */
        {6, GW_E_PROTO, GW_H2_FRAME_SIZE_ERROR}, /* frame above our max frame size */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_h2_session_t *s = ready(&r, &c, NULL);
        switch (cases[i].kind) {
        case 0:
            assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "x", 1, 0, 0), 0);
            break;
        case 1:
            cli_headers(&c, 2, GW_H2_F_END_STREAM, GET);
            break;
        case 2:
            cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
            cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
            break;
        case 3:
            cli_headers(&c, 1, 0, GET);
            assert_int_equal(
                gw_h2_frame_write_push_promise(&c.b, 1, GW_H2_F_END_HEADERS, 2, "", 0, 0, 0), 0);
            break;
        case 4:
            assert_int_equal(gw_h2_frame_write_window_update(&c.b, 7, 1), 0);
            break;
        case 5:
            assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 7, 0), 0);
            break;
        case 6: {
            static uint8_t big[16385];
            cli_headers(&c, 1, 0, GET);
            assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, big, sizeof(big), 0, 0), 0);
            break;
        }
        }
        assert_int_equal(feed(s, &c.b), cases[i].rc);
        drain(s, &o);
        expect_goaway(&o, cases[i].code);
        cli_free(&c);
        gw_h2_session_del(s);
    }
    /* DATA and HEADERS after END_STREAM: stream error STREAM_CLOSED */
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "x", 1, 0, 0), 0);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_STREAM_CLOSED);
    expect_rst(&o, 3, GW_H2_STREAM_CLOSED);
    assert_true(gw_h2_session_want_read(s));
    cli_free(&c);
    gw_h2_session_del(s);
    /* unknown frame types are ignored, also PRIORITY on an idle stream */
    s = ready(&r, &c, NULL);
    assert_int_equal(gw_h2_frame_write_raw(&c.b, 0xfa, 0, 9, "abc", 3), 0);
    const gw_h2_priority_t pri = {0, 15, 0};
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 11, &pri), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_int_equal(o.n, 0);
    assert_non_null(strstr(r.log, "req 1 GET"));
    cli_free(&c);
    gw_h2_session_del(s);
}

/* §5.1 closed: after our RST_STREAM, frames in flight are ignored; §6.3 bad PRIORITY length is
 * a stream error; RST_STREAM on a closed stream is harmless. */
static void closed_stream_frames(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    r.release_on_close = 1;
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&c, 1, 0, P);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), GW_E_NOENT);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_CANCEL);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "late", 4, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 1, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 10), 0);
    assert_int_equal(gw_h2_frame_write_raw(&c.b, GW_H2_FT_PRIORITY, 0, 1, "\0\0\0\0", 4), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_int_equal(o.n, 1); /* only the PRIORITY frame size error */
    expect_rst(&o, 1, GW_H2_FRAME_SIZE_ERROR);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    assert_true(gw_h2_session_want_read(s));
    assert_string_equal(r.log, "req 1 POST https  / cl=-1 es=0;close 1 CANCEL 0;");
    /* trailers in flight for the forgotten stream are decoded and dropped; a later request
     * on a new stream still decodes (HPACK in sync) */
    c.b.len = 0;
    const char *const T[] = {"x-t", "1", NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, T);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_non_null(strstr(r.log, "req 3 GET https example.com /a"));
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
    cli_free(&c);
    gw_h2_session_del(s);
}

static void floods(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.control_frame_budget = 10;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    for (int i = 0; i < 11; i++)
        assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);

    /* the budget is per window: spread over time it is fine */
    s = ready(&r, &c, &opt);
    for (int i = 0; i < 30; i++) {
        assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
        assert_int_equal(gw_h2_session_recv(s, c.b.base, c.b.len, 1 + (uint64_t)i * 2000),
                         (ssize_t)c.b.len);
        c.b.len = 0;
        drain(s, &o);
    }
    cli_free(&c);
    gw_h2_session_del(s);

    /* queued control frames: the peer does not read our PING ACKs */
    gw_h2_options_default(&opt);
    opt.max_queued_control = 5;
    s = ready(&r, &c, &opt);
    for (int i = 0; i < 6; i++)
        assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).queued_control_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);

    /* empty DATA frames */
    gw_h2_options_default(&opt);
    opt.empty_frame_budget = 3;
    s = ready(&r, &c, &opt);
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&c, 1, 0, P);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, NULL, 0, 0, 0), 0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    assert_int_equal(gw_h2_session_stats(s).empty_frame_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Issue 18 item 9: a SETTINGS frame of 2,730 SETTINGS_INITIAL_WINDOW_SIZE entries walks the
 * open streams once (the last value counts), and its entries, not the frame, are charged to
 * the control budget: a few such frames are a flood. */
static void issue18_9_settings_entries_budgeted(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    gw_h2_session_t *s = ready(&r, &c, &opt);
    const char *const G[] = {":method", "GET", ":scheme", "https", ":path", "/", NULL};
    for (uint32_t id = 1; id <= 39; id += 2)
        cli_headers(&c, id, 1, G);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    enum { N = 2730 };
    static gw_h2_setting_t set[N];
    for (size_t i = 0; i < N; i++)
        set[i] = (gw_h2_setting_t){GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)(1000 + i)};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, set, N), 0);
    uint64_t walks0 = gw_h2_session_stats(s).window_walks;
    assert_int_equal(feed(s, &c.b), GW_E_CALM); /* 2,730 entries > the budget of 1000 */
    drain(s, &o);
    expect_goaway(&o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    assert_int_equal(gw_h2_session_stats(s).window_walks, walks0); /* refused before any walk */
    cli_free(&c);
    gw_h2_session_del(s);

    /* within the budget: one walk per frame, with the last value */
    opt.control_frame_budget = 100000;
    s = ready(&r, &c, &opt);
    for (uint32_t id = 1; id <= 39; id += 2)
        cli_headers(&c, id, 1, G);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    walks0 = gw_h2_session_stats(s).window_walks;
    for (int k = 0; k < 3; k++)
        assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, set, N), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_stats(s).window_walks, walks0 + 3);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 0);
    drain(s, &o);
    cli_free(&c);
    gw_h2_session_del(s);

    /* 40 frames of 2,730 entries: 109,200 entries charged, past 100,000 */
    s = ready(&r, &c, &opt);
    for (int k = 0; k < 40; k++)
        assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, set, N), 0);
    assert_int_equal(feed(s, &c.b), GW_E_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Issue 18 item 9, the other half: applied once per frame, the values are still checked one by
 * one (RFC 9113 §6.5.3 processes them in order, §6.9.2: any change that takes a stream window
 * past 2^31-1 is a FLOW_CONTROL_ERROR), whichever entry carries it. */
static void issue18_9_settings_each_value_checked(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s;
    /* stream 1's window grew by 1000 past the initial one: 2^31-1 as the initial window takes
     * it past the maximum, even though the frame ends at 65535 again */
    for (int boundary = 0; boundary < 2; boundary++) {
        s = ready(&r, &c, NULL);
        cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
        assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 1000), 0);
        const gw_h2_setting_t set[3] = {
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 70000},
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, GW_H2_MAX_WINDOW - (boundary ? 1000 : 999)},
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}};
        assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, set, 3), 0);
        if (boundary) { /* exactly 2^31-1 at the peak: allowed, and the last value counts */
            assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
            assert_int_equal(gw_h2_session_send_window(s, 1), 65535 + 1000);
            drain(s, &o);
            assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
        } else {
            assert_int_equal(feed(s, &c.b), GW_E_FLOW);
            drain(s, &o);
            expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
        }
        cli_free(&c);
        gw_h2_session_del(s);
    }
    /* a value above 2^31-1 is a FLOW_CONTROL_ERROR in any entry, not only the last */
    s = ready(&r, &c, NULL);
    const gw_h2_setting_t bad[2] = {{GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0x80000000u},
                                    {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, bad, 2), 0);
    assert_int_equal(feed(s, &c.b), GW_E_FLOW);
    drain(s, &o);
    expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void max_requests_and_shutdown(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_requests_per_connection = 2;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    r.release_on_close = 1;
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    const outf_t *g = find_type(&o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), 3);
    assert_int_equal(get32(g->p + 4), GW_H2_NO_ERROR);
    /* a later stream is refused, not processed */
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 5, GW_H2_REFUSED_STREAM);
    assert_false(gw_h2_session_should_close(s));
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 3, 204, NULL, 0, 1), 0);
    drain(s, &o);
    assert_true(gw_h2_session_should_close(s));
    cli_free(&c);
    gw_h2_session_del(s);

    /* graceful two-step shutdown */
    s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_OPEN);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0);
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_SHUTDOWN_PENDING);
    assert_string_equal(gw_h2_conn_phase_str(gw_h2_session_phase(s)), "shutdown_pending");
    drain(s, &o);
    g = find_type(&o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), GW_H2_STREAM_ID_MASK);
    const outf_t *p = find_type(&o, GW_H2_FT_PING, 0);
    assert_non_null(p);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET); /* in flight: still served */
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 1, p->p), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    g = find_type(&o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), 3);
    assert_non_null(strstr(r.log, "req 3 "));
    /* the PING ACK ended the first step: the final GOAWAY is out */
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_GOAWAY_SENT);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0); /* nothing more to do */
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_GOAWAY_SENT);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void peer_goaway(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    assert_int_equal(gw_h2_frame_write_goaway(&c.b, 0, GW_H2_NO_ERROR, "bye", 3), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "goaway 0 NO_ERROR bye;");
    assert_true(gw_h2_session_should_close(s));
    cli_free(&c);
    gw_h2_session_del(s);
}

static void on_priority(void *ud, uint32_t sid, gw_slice_t v)
{
    logf_(ud, "prio %u %.*s;", sid, SL(v));
}

static int on_data_reset(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    rec_t *r = ud;
    (void)d;
    logf_(r, "data %u %zu;", sid, len);
    /* reset from inside the callback; on_close releases the stream at once */
    assert_int_equal(gw_h2_session_submit_rst(r->s, sid, GW_H2_CANCEL), 0);
    return 0;
}

static void priority_and_callbacks(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_callbacks_t cb2 = cbs;
    cb2.on_priority = on_priority;
    cb2.on_data = on_data_reset;
    gw_h2_session_t *s;
    memset(&r, 0, sizeof(r));
    assert_int_equal(gw_h2_session_new(&s, NULL, &cb2, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    cli_init(&c, 1);
    const char *const P[] = {":method", "POST",     ":scheme", "https", ":path",
                             "/",       "priority", "u=2",     NULL};
    cli_headers(&c, 1, 0, P);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 1, "u=0, i", 6), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "abc", 3, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "def", 3, 0, 0), 0);
    /* HEADERS depending on itself: stream error, the next request still decodes */
    const gw_h2_priority_t self = {3, 10, 0};
    gw_bytes_t blk;
    block(&c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 3, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                               &self, blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "prio 1 u=2;req 1 POST https  / cl=-1 es=0 priority=u=2;"
                               "prio 1 u=0, i;data 1 3;close 1 CANCEL 0;"
                               "req 5 GET https example.com /a cl=-1 es=1;end 5;");
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_CANCEL);
    expect_rst(&o, 3, GW_H2_PROTOCOL_ERROR);
    assert_int_equal(gw_h2_session_active_streams(s), 1);
    /* interim then final response; submit errors */
    assert_int_equal(gw_h2_session_submit_response(s, 5, 103, NULL, 0, 1), GW_E_INVAL);
    assert_int_equal(gw_h2_session_submit_response(s, 5, 103, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(4);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 0, 4, 0), GW_E_INVAL); /* no head */
    assert_int_equal(gw_h2_session_submit_response(s, 5, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 2, 4, 0), GW_E_INVAL); /* range */
    assert_int_equal(gw_h2_session_submit_data(s, 5, NULL, 0, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 0, 4, 0), GW_E_INVAL); /* ended */
    assert_int_equal(gw_h2_session_submit_response(s, 7, 200, NULL, 0, 0), GW_E_NOENT);
    drain(s, &o);
    assert_int_equal(o.n, 3);
    assert_int_equal(o.f[2].h.type, GW_H2_FT_DATA);
    assert_int_equal(o.f[2].h.length, 0);
    assert_int_equal(o.f[2].h.flags, GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    /* the layer above ends the connection */
    assert_int_equal(gw_h2_session_terminate(s, GW_H2_INTERNAL_ERROR, "shutting down"), 0);
    assert_false(gw_h2_session_want_read(s));
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_CLOSING);
    assert_string_equal(gw_h2_conn_phase_str(GW_H2_CONN_CLOSING), "closing");
    drain(s, &o);
    expect_goaway(&o, GW_H2_INTERNAL_ERROR);
    assert_memory_equal(find_type(&o, GW_H2_FT_GOAWAY, 0)->p + 8, "shutting down", 13);
    assert_true(gw_h2_session_should_close(s));
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* ---- RFC 7540 priority tree ------------------------------------------------------------- */

static void cli_headers_pri(cli_t *c, uint32_t sid, const gw_h2_priority_t *pri,
                            const char *const *kv)
{
    gw_bytes_t blk;
    block(c, &blk, kv);
    assert_int_equal(gw_h2_frame_write_headers(&c->b, sid, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                               pri, blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
}

static const char *const GET_U3[] = {":method",    "GET",         ":scheme", "https",
                                     ":authority", "example.com", ":path",   "/a",
                                     "priority",   "u=3",         NULL};

/* HEADERS with the PRIORITY flag: weights 1 and 3 on the root split 8 frames 2:6 (RFC 7540
 * §5.3.2); a stream with an RFC 9218 signal (7, priority: u=3) goes before the tree class;
 * nothing is sent about the tree in SETTINGS. */
static void tree_headers_weights(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const gw_h2_priority_t w1 = {0, 0, 0}, w3 = {0, 2, 0};
    cli_headers_pri(&c, 1, &w1, GET);
    cli_headers_pri(&c, 3, &w3, GET);
    cli_headers(&c, 7, GW_H2_F_END_STREAM, GET_U3);
    /* stream windows wide open; the connection window holds 8 frames + 1000 bytes */
    for (uint32_t sid = 1; sid <= 7; sid += 2)
        assert_int_equal(gw_h2_frame_write_window_update(&c.b, sid, 1 << 20), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 8 * 16384 + 1000 - 65535), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    gw_rbuf_t *rb = gw_rbuf_new(200000);
    assert_int_equal(gw_h2_session_submit_response(s, 7, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 7, rb, 0, 1000, 1), 0);
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 200000, 1), 0);
    }
    drain(s, &o);
    uint32_t ids[32] = {0};
    size_t n = data_order(&o, 0, ids, 32), c1 = 0, c3 = 0;
    assert_int_equal(n, 9);
    assert_int_equal(ids[0], 7);
    for (size_t i = 1; i < n; i++) {
        c1 += ids[i] == 1;
        c3 += ids[i] == 3;
    }
    assert_int_equal(c1, 2);
    assert_int_equal(c3, 6);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* A PRIORITY frame on an idle stream (RFC 7540 §5.3.4 placeholder) gives the stream its place
 * when it opens: 3 depends on 1, so 1 sends everything first (parent before child); a
 * PRIORITY_UPDATE (RFC 9218) takes 5 out of the tree: it goes first at u=2. */
static void tree_priority_frame_idle(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const gw_h2_priority_t on1 = {1, 255, 0};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 3, &on1), 0);
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 5, &on1), 0);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 5, "u=2", 3), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 1 << 20), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    for (uint32_t sid = 3; sid <= 5; sid += 2) { /* the child's data is there first */
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 20000, 1), 0);
    }
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 40000, 1), 0);
    drain(s, &o);
    uint32_t ids[16];
    size_t n = data_order(&o, 0, ids, 16);
    const uint32_t want[] = {5, 5, 1, 1, 1, 3, 3};
    assert_int_equal(n, 7);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* PRIORITY errors are stream errors (RFC 9113 §5.3.1, §6.3): self-dependency ->
 * RST_STREAM PROTOCOL_ERROR, length other than 5 -> RST_STREAM FRAME_SIZE_ERROR; the
 * connection lives on. max_priority_nodes bounds the placeholders: the oldest is evicted. */
static void tree_errors_and_bound(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_priority_nodes = 3;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    const gw_h2_priority_t self = {9, 15, 0};
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 9, &self), 0);
    uint8_t raw[GW_H2_FRAME_HDR_LEN + 4] = {0};
    gw_h2_frame_hdr_t h = {4, GW_H2_FT_PRIORITY, 0, 11};
    gw_h2_frame_hdr_pack(raw, &h);
    assert_int_equal(gw_bytes_append(&c.b, raw, sizeof(raw)), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    drain(s, &o);
    expect_rst(&o, 9, GW_H2_PROTOCOL_ERROR);
    expect_rst(&o, 11, GW_H2_FRAME_SIZE_ERROR);
    assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
    assert_true(gw_h2_session_want_read(s));
    /* four placeholders in a tree of three: one eviction; a fifth, two */
    const gw_h2_priority_t p = {0, 15, 0};
    for (uint32_t sid = 13; sid <= 19; sid += 2)
        assert_int_equal(gw_h2_frame_write_priority(&c.b, sid, &p), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 1);
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 21, &p), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 2);
    /* a request still works and is answered */
    cli_headers(&c, 23, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 3);
    assert_int_equal(gw_h2_session_submit_response(s, 23, 204, NULL, 0, 1), 0);
    drain(s, &o);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_HEADERS);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Failing-allocation sweep over a whole request/response exchange: fail the n-th
 * allocation; every failure must surface as GW_E_NOMEM and leak nothing (ASan). */
static int exchange_fail_at(unsigned long n)
{
    rec_t r;
    gw_h2_session_t *s = NULL;
    gw_iovq_t q;
    cli_t c;
    int rc;
    memset(&r, 0, sizeof(r));
    gw_iovq_init(&q);
    cli_init(&c, 1);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "hello", 5, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(16);
    assert_non_null(rb);
    memcpy(rb->data, "world", 5);
    gw_alloc_fail_after(n);
    if ((rc = gw_h2_session_new(&s, NULL, &cbs, &r, 0)) < 0)
        goto out;
    r.s = s;
    r.consume = 1;
    ssize_t got = gw_h2_session_recv(s, c.b.base, c.b.len, 1);
    if (got < 0) {
        rc = (int)got;
        goto out;
    }
    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")}};
    if ((rc = gw_h2_session_submit_response(s, 1, 200, hf, 1, 0)) < 0)
        goto out;
    if ((rc = gw_h2_session_submit_data(s, 1, rb, 0, 5, 1)) < 0)
        goto out;
    ssize_t sent = gw_h2_session_send(s, &q);
    rc = sent < 0 ? (int)sent : 0;
out : {
    int hit = gw_alloc_fail_hit();
    gw_alloc_fail_after(0);
    if (rc == 0 && !hit)
        assert_non_null(strstr(r.log, "end 1;"));
    if (rc < 0)
        assert_true(hit);
}
    gw_iovq_free(&q);
    gw_h2_session_del(s);
    gw_rbuf_unref(rb);
    cli_free(&c);
    return rc;
}

static void alloc_failure_sweep(void **state)
{
    (void)state;
    unsigned long n;
    for (n = 1; n < 1000; n++) {
        int rc = exchange_fail_at(n);
        if (rc == 0 && !gw_alloc_fail_hit())
            break;
        if (rc < 0)
            assert_int_equal(rc, GW_E_NOMEM);
    }
    assert_true(n < 1000);
    assert_true(n > 3);
}

/* ---- idle compaction -------------------------------------------------------------------- */

/* Everything the session wrote so far, as bytes. */
static size_t flat_out(gw_h2_session_t *s, uint8_t *buf, size_t cap)
{
    gw_iovq_t q;
    gw_iovq_init(&q);
    assert_true(gw_h2_session_send(s, &q) >= 0);
    size_t n = gw_iovq_flatten(&q, buf, cap);
    assert_int_equal(n, q.bytes);
    gw_iovq_free(&q);
    return n;
}

/* Two sessions fed the same bytes; `a` is compacted after every step (and between the pieces
 * of split input), `b` never. Compaction must not show: same events, same bytes out. */
typedef struct {
    rec_t ra, rb;
    gw_h2_session_t *a, *b;
} twin_t;

static void twin_init(twin_t *t)
{
    t->a = server(&t->ra, NULL);
    t->b = server(&t->rb, NULL);
    t->ra.release_on_close = t->rb.release_on_close = 1;
    t->ra.consume = t->rb.consume = 1;
}

/* Feed c's bytes: whole to b, in pieces of `step` bytes to a with a compaction after each. */
static void twin_feed(twin_t *t, cli_t *c, size_t step)
{
    assert_int_equal(gw_h2_session_recv(t->b, c->b.base, c->b.len, 1), (ssize_t)c->b.len);
    for (size_t off = 0; off < c->b.len; off += step) {
        size_t n = c->b.len - off < step ? c->b.len - off : step;
        assert_int_equal(gw_h2_session_recv(t->a, c->b.base + off, n, 1), (ssize_t)n);
        gw_h2_session_compact(t->a);
    }
    c->b.len = 0;
}

static void twin_same_output(twin_t *t)
{
    static uint8_t oa[65536], ob[65536];
    size_t na = flat_out(t->a, oa, sizeof(oa)), nb = flat_out(t->b, ob, sizeof(ob));
    assert_int_equal(na, nb);
    assert_memory_equal(oa, ob, na);
    assert_string_equal(t->ra.log, t->rb.log);
    gw_h2_session_compact(t->a);
}

static void twin_respond(twin_t *t, uint32_t sid)
{
    const gw_h2_header_t f[] = {{GW_SLICE_LIT("x-served-by"), GW_SLICE_LIT("h2gate-test")},
                                {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=60")}};
    assert_int_equal(gw_h2_session_submit_response(t->a, sid, 200, f, 2, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(t->b, sid, 200, f, 2, 1), 0);
    twin_same_output(t);
}

static const char *const GET_X[] = {":method",    "GET",         ":scheme", "https",
                                    ":authority", "example.com", ":path",   "/idle",
                                    "x-idle",     "value-1",     NULL};

static void compact_is_invisible(void **state)
{
    (void)state;
    twin_t t;
    cli_t c;
    twin_init(&t);
    twin_same_output(&t); /* server preface */
    cli_init(&c, 1);
    twin_feed(&t, &c, 5);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, (const uint8_t *)"idle-pin"), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);

    /* a request whose fields enter both HPACK tables, fed byte by byte: a frame header or
     * payload split across reads keeps the stream part alive */
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_X);
    twin_feed(&t, &c, 1);
    twin_respond(&t, 1); /* closes and releases stream 1: the session is idle again */
    assert_int_equal(gw_h2_session_active_streams(t.a), 0);

    /* the same fields again: the client sends them indexed (its dynamic table), split into
     * HEADERS + CONTINUATION with a compaction in between; the response fields come out
     * indexed from our encoder's table */
    gw_bytes_t blk;
    block(&c, &blk, GET_X);
    assert_true(blk.len >= 4 && blk.len < 16); /* mostly one-byte indexed fields */
    assert_int_equal(
        gw_h2_frame_write_headers(&c.b, 3, GW_H2_F_END_STREAM, NULL, blk.base, 2, 0, 0), 0);
    twin_feed(&t, &c, 1000);
    assert_int_equal(
        gw_h2_frame_write_continuation(&c.b, 3, GW_H2_F_END_HEADERS, blk.base + 2, blk.len - 2), 0);
    gw_bytes_free(&blk);
    twin_feed(&t, &c, 1000);
    assert_non_null(
        strstr(t.ra.log, "req 3 GET https example.com /idle cl=-1 es=1 x-idle=value-1;"));
    twin_respond(&t, 3);

    /* RFC 9218 §7.1 update for a stream not opened yet, while idle: kept across compaction */
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 5, "u=1", 3), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);

    /* the stream the update was about opens with it; we reset it, and DATA the client sent
     * before seeing our RST_STREAM is ignored after a compaction too (RFC 9113 §5.1) */
    cli_headers(&c, 5, 0, POST);
    twin_feed(&t, &c, 1000);
    uint8_t ua, ub;
    int ia, ib;
    assert_int_equal(gw_h2_session_get_priority(t.a, 5, &ua, &ia), 0);
    assert_int_equal(gw_h2_session_get_priority(t.b, 5, &ub, &ib), 0);
    assert_int_equal(ua, 1);
    assert_int_equal(ua, ub);
    assert_int_equal(ia, ib);
    assert_int_equal(gw_h2_session_submit_rst(t.a, 5, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_session_submit_rst(t.b, 5, GW_H2_CANCEL), 0);
    twin_same_output(&t);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 5, GW_H2_F_END_STREAM, "hello", 5, 0, 0), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);
    assert_null(strstr(t.ra.log, "goaway"));
    assert_true(gw_h2_session_want_read(t.a));

    cli_free(&c);
    gw_h2_session_del(t.a);
    gw_h2_session_del(t.b);
}

/* What an idle session keeps, counted by the allocation hook: after the handshake, the session
 * struct and nothing else; after a request, that plus the HPACK table entries. Fails when a
 * field or buffer is added to what every idle connection carries. */
static void idle_session_memory(void **state)
{
    (void)state;
    cli_t c;
    gw_bytes_t hs, req;
    cli_init(&c, 1);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    hs = c.b;
    gw_bytes_init(&c.b, 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_X);
    req = c.b;
    gw_bytes_init(&c.b, 0);

    rec_t r;
    outs_t o;
    gw_h2_profile_t *prof; /* shared by a worker's sessions: not counted */
    gw_h2_session_t *s;
    assert_int_equal(gw_h2_profile_new(&prof, NULL, &cbs), 0);
    /* a worker's profile keeps closed streams' blocks for the next streams: one is there
     * before counting, as in a running worker */
    memset(&r, 0, sizeof(r));
    assert_int_equal(gw_h2_session_new_with(&s, prof, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    assert_int_equal(feed(s, &hs), (ssize_t)hs.len);
    assert_int_equal(feed(s, &req), (ssize_t)req.len);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    gw_h2_session_del(s);
    memset(&r, 0, sizeof(r));
    gw_alloc_count_start();
    assert_int_equal(gw_h2_session_new_with(&s, prof, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    assert_int_equal(feed(s, &hs), (ssize_t)hs.len);
    drain(s, &o);
    long long before = gw_alloc_count_live();
    gw_h2_session_compact(s);
    long long idle0 = gw_alloc_count_live();
    print_message("idle session after the handshake: %lld bytes (%lld before compaction)\n", idle0,
                  before);
    assert_true(idle0 < before); /* the emptied output buffer went back */
    assert_true(idle0 <= 384);   /* the session struct alone */

    assert_int_equal(feed(s, &req), (ssize_t)req.len);
    const gw_h2_header_t f[] = {{GW_SLICE_LIT("x-served-by"), GW_SLICE_LIT("h2gate-test")}};
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, f, 1, 1), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    long long busy = gw_alloc_count_live();
    gw_h2_session_compact(s);
    long long idle1 = gw_alloc_count_live();
    print_message("idle session after a request: %lld bytes (%lld before compaction)\n", idle1,
                  busy);
    assert_true(busy - idle1 >= 200); /* the stream part and the block buffers */
    /* the tables (ring of 16 slots each, entries) are what grew; nothing else */
    assert_true(idle1 <= idle0 + 2 * (16 * 16 + 16) + 8 * 48);
    gw_h2_session_compact(s); /* nothing left to give back */
    assert_int_equal(gw_alloc_count_live(), idle1);
    gw_h2_session_del(s);
    assert_int_equal(gw_alloc_count_live(), 0);
    gw_alloc_count_stop();
    gw_h2_profile_del(prof);
    gw_bytes_free(&hs);
    gw_bytes_free(&req);
    cli_free(&c);
}

/* Streams are found through a 16-slot cache on (id >> 1) and the stream list behind it: with
 * 40 streams open, ids 32 apart share a slot; every lookup (stream data, responses, DATA)
 * must reach its own stream, in any order, also after streams of a shared slot are freed and
 * new ones take it. */
static void stream_lookup_colliding_ids(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    r.release_on_close = 1;
    static int tags[200];
    for (uint32_t sid = 1; sid <= 79; sid += 2)
        cli_headers(&c, sid, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_int_equal(gw_h2_session_active_streams(s), 40);
    for (uint32_t sid = 1; sid <= 79; sid += 2)
        assert_int_equal(gw_h2_session_set_stream_data(s, sid, &tags[sid]), 0);
    /* scrambled order: every lookup misses the slot the previous one filled */
    for (uint32_t k = 0; k < 40; k++) {
        uint32_t sid = 2 * ((k * 17) % 40) + 1;
        assert_ptr_equal(gw_h2_session_get_stream_data(s, sid), &tags[sid]);
    }
    assert_null(gw_h2_session_get_stream_data(s, 81)); /* not open: no slot holds it */
    /* answer every fourth stream (slot 0's 1, 33, 65 among them), newest first; each DATA
     * frame must carry its own stream's bytes */
    gw_rbuf_t *rb = gw_rbuf_new(40 * 4);
    for (uint32_t sid = 79;; sid -= 2) {
        if (sid % 8 == 1) {
            char t[12];
            snprintf(t, sizeof(t), "%03u", (unsigned)sid);
            memcpy(rb->data + 4 * (sid / 2), t, 3);
            assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
            assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 4 * (sid / 2), 3, 1), 0);
        }
        if (sid == 1)
            break;
    }
    outs_t o;
    drain(s, &o);
    size_t datas = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (o.f[i].h.type != GW_H2_FT_DATA)
            continue;
        char want[12];
        snprintf(want, sizeof(want), "%03u", (unsigned)o.f[i].h.stream_id);
        assert_int_equal(o.f[i].h.length, 3);
        assert_memory_equal(o.f[i].p, want, 3);
        datas++;
    }
    assert_int_equal(datas, 10); /* 1, 9, 17, ..., 73: slot 0 (1, 33, 65) among them */
    /* the answered streams are gone (released on close); new streams take their slots */
    for (uint32_t sid = 81; sid <= 103; sid += 2)
        cli_headers(&c, sid, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    for (uint32_t sid = 81; sid <= 103; sid += 2)
        assert_int_equal(gw_h2_session_set_stream_data(s, sid, &tags[sid]), 0);
    for (uint32_t sid = 1; sid <= 103; sid += 2) {
        int gone = sid < 80 && sid % 8 == 1;
        if (gone)
            assert_null(gw_h2_session_get_stream_data(s, sid));
        else
            assert_ptr_equal(gw_h2_session_get_stream_data(s, sid), &tags[sid]);
    }
    gw_rbuf_unref(rb);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* A closed stream's memory is the next stream's: on a warm session, a request is decoded and
 * opened without any allocation, also when the block comes from another session of the
 * profile; a burst of streams gives every block back, and the sessions and the profile free
 * them all (the sanitizer build's leak check). */
static void stream_blocks_reused(void **state)
{
    (void)state;
    gw_h2_profile_t *prof;
    assert_int_equal(gw_h2_profile_new(&prof, NULL, &cbs), 0);
    rec_t ra, rb;
    cli_t ca, cb;
    gw_h2_session_t *a, *b;
    outs_t o;
    memset(&ra, 0, sizeof(ra));
    memset(&rb, 0, sizeof(rb));
    assert_int_equal(gw_h2_session_new_with(&a, prof, &ra, 0), 0);
    assert_int_equal(gw_h2_session_new_with(&b, prof, &rb, 0), 0);
    ra.s = a;
    rb.s = b;
    ra.release_on_close = rb.release_on_close = 1;
    cli_init(&ca, 1);
    cli_init(&cb, 1);
    assert_int_equal(gw_h2_frame_write_settings(&ca.b, 1, NULL, 0), 0); /* ACK */
    assert_int_equal(gw_h2_frame_write_settings(&cb.b, 1, NULL, 0), 0);
    /* a burst of 8 streams on a, answered; then b's first stream */
    for (uint32_t sid = 1; sid <= 15; sid += 2)
        cli_headers(&ca, sid, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(a, &ca.b), (ssize_t)ca.b.len);
    ca.b.len = 0;
    assert_int_equal(gw_h2_session_active_streams(a), 8);
    for (uint32_t sid = 1; sid <= 15; sid += 2)
        assert_int_equal(gw_h2_session_submit_response(a, sid, 204, NULL, 0, 1), 0);
    drain(a, &o);
    assert_int_equal(gw_h2_session_active_streams(a), 0);
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len); /* preface, SETTINGS */
    cb.b.len = 0;
    drain(b, &o);

    /* b's first request: its stream is a block a gave back */
    cli_headers(&cb, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len);
    cb.b.len = 0;
    assert_int_equal(gw_h2_session_submit_response(b, 1, 204, NULL, 0, 1), 0);
    drain(b, &o);
    /* warm now: the next request on each session allocates nothing */
    cli_headers(&cb, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&ca, 17, GW_H2_F_END_STREAM, GET);
    gw_alloc_count_start();
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len);
    assert_int_equal(feed(a, &ca.b), (ssize_t)ca.b.len);
    long long allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    assert_int_equal(allocs, 0);
    assert_non_null(strstr(rb.log, "req 3 GET https example.com /a"));
    assert_non_null(strstr(ra.log, "req 17 GET https example.com /a"));
    /* sessions deleted with streams open: their blocks go back to the profile */
    assert_int_equal(gw_h2_session_active_streams(a), 1);
    assert_int_equal(gw_h2_session_active_streams(b), 1);
    gw_h2_session_del(a);
    gw_h2_session_del(b);
    gw_h2_profile_del(prof);
    cli_free(&ca);
    cli_free(&cb);
}

/* Issues 18.3, 18.10, 19.3: a request head that cannot become a clean HTTP/1.1 request line is
 * malformed (RST_STREAM PROTOCOL_ERROR, never reaches the proxy): :method not a token, :path
 * with bytes outside RFC 3986 path/query characters, :scheme other than http/https, an
 * :authority with non-authority characters or userinfo. Their clean neighbours pass. */
static void issue18_10_request_head_syntax(void **state)
{
    (void)state;
    static const char *const bad_cases[][3] = {
        {":path", "/a b", NULL},          {":path", "/a\x0bHTTP/1.0", NULL},
        {":path", "/a\tb", NULL},         {":path", "/\x7f", NULL},
        {":path", "/\xc3\xa9", NULL},     {":path", "/a%zz", NULL},
        {":path", "/a#frag", NULL},       {":method", "GE T", NULL},
        {":method", "GET\x01", NULL},     {":method", "G(T", NULL},
        {":scheme", "ftp", NULL},         {":scheme", "https,for=127.0.0.1", NULL},
        {":scheme", "HTTPS", NULL},       {":authority", "a\".test", NULL},
        {":authority", "u@a.test", NULL}, {":authority", "a.test/x", NULL},
    };
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const char *m = "GET", *p = "/", *sc = "http", *a = "a.test";
        const char *k = bad_cases[i][0], *v = bad_cases[i][1];
        if (!strcmp(k, ":path"))
            p = v;
        else if (!strcmp(k, ":method"))
            m = v;
        else if (!strcmp(k, ":scheme"))
            sc = v;
        else
            a = v;
        const char *const h[] = {":method", m, ":scheme", sc, ":authority", a, ":path", p, NULL};
        rec_t r;
        cli_t c;
        outs_t o;
        gw_h2_session_t *s = ready(&r, &c, NULL);
        cli_headers(&c, 1, GW_H2_F_END_STREAM, h);
        assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
        drain(s, &o);
        expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
        if (strstr(r.log, "req 1"))
            fail_msg("case %zu (%s) reached the layer above: %s", i, k, r.log);
        cli_free(&c);
        gw_h2_session_del(s);
    }
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    const char *const ok[] = {":method",    "PURGE",      ":scheme",
                              "http",       ":path",      "/a/b%20c?d=e/f?g&h=;@:!$'()*+,~",
                              ":authority", "[::1]:8080", NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, ok);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
    assert_non_null(strstr(r.log, "req 1 PURGE"));
    cli_free(&c);
    gw_h2_session_del(s);
}

/* Issue 18.12: trailers past max_header_list_size, after the response head went out, reset the
 * stream (ENHANCE_YOUR_CALM) instead of sending a second final HEADERS (a 431). */
static void issue18_12_trailers_overflow_resets(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_header_list_size = 200;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    c.b.len = 0;
    assert_non_null(strstr(r.log, "req 1"));
    /* the response head goes out before the trailers arrive */
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    drain(s, &o);
    assert_non_null(find_type(&o, GW_H2_FT_HEADERS, 0));
    static char big[300];
    memset(big, 'v', sizeof(big) - 1);
    const char *const tr[] = {"x-big", big, NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, tr);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_HEADERS, 0)); /* no second final head */
    expect_rst(&o, 1, GW_H2_ENHANCE_YOUR_CALM);
    assert_null(strstr(r.log, "trailers 1"));
    assert_int_equal(gw_h2_session_stats(s).header_list_hits, 1);
    cli_free(&c);
    gw_h2_session_del(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handshake_and_ping),
        cmocka_unit_test(stream_blocks_reused),
        cmocka_unit_test(stream_lookup_colliding_ids),
        cmocka_unit_test(bad_preface),
        cmocka_unit_test(first_frame_not_settings),
        cmocka_unit_test(settings_timeout),
        cmocka_unit_test(get_and_response_by_reference),
        cmocka_unit_test(response_frames),
        cmocka_unit_test(split_feeding),
        cmocka_unit_test(flow_control_backpressure),
        cmocka_unit_test(connection_window_exceeded),
        cmocka_unit_test(round_robin_and_connection_window),
        cmocka_unit_test(data_budget),
        cmocka_unit_test(writable_events),
        cmocka_unit_test(initial_window_change),
        cmocka_unit_test(window_overflow),
        cmocka_unit_test(max_concurrent_streams),
        cmocka_unit_test(rapid_reset_budget),
        cmocka_unit_test(continuation_flood),
        cmocka_unit_test(continuation_sequence),
        cmocka_unit_test(header_list_overflow),
        cmocka_unit_test(request_validation),
        cmocka_unit_test(field_bytes_at_every_position),
        cmocka_unit_test(field_name_every_byte_value),
        cmocka_unit_test(content_length_and_trailers),
        cmocka_unit_test(stream_state_errors),
        cmocka_unit_test(closed_stream_frames),
        cmocka_unit_test(floods),
        cmocka_unit_test(issue18_9_settings_entries_budgeted),
        cmocka_unit_test(issue18_9_settings_each_value_checked),
        cmocka_unit_test(issue18_4_trailers_encoded_in_wire_order),
        cmocka_unit_test(issue18_6_blocks_on_reset_streams),
        cmocka_unit_test(issue18_6_literals_on_reset_streams_copy_nothing),
        cmocka_unit_test(max_requests_and_shutdown),
        cmocka_unit_test(peer_goaway),
        cmocka_unit_test(priority_and_callbacks),
        cmocka_unit_test(priority_scheduling),
        cmocka_unit_test(priority_set_and_pending_bound),
        cmocka_unit_test(tree_headers_weights),
        cmocka_unit_test(tree_priority_frame_idle),
        cmocka_unit_test(tree_errors_and_bound),
        cmocka_unit_test(alloc_failure_sweep),
        cmocka_unit_test(compact_is_invisible),
        cmocka_unit_test(idle_session_memory),
        cmocka_unit_test(issue18_10_request_head_syntax),
        cmocka_unit_test(issue18_12_trailers_overflow_resets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
