/* h2_session_util.c — the fixture of the HTTP/2 session unit tests (h2_session_util.h). */
#include "h2_session_util.h"

int on_request(void *ud, const gw_h2_head_t *h)
{
    rec_t *r = ud;
    logf_(r, "req %u %.*s %.*s %.*s %.*s cl=%lld es=%d", h->stream_id, SL(h->method), SL(h->scheme),
          SL(h->authority), SL(h->path), (long long)h->content_length, h->end_stream);
    for (size_t i = 0; i < h->headers_len; i++)
        logf_(r, " %.*s=%.*s", SL(h->headers[i].name), SL(h->headers[i].value));
    logf_(r, ";");
    return 0;
}

int on_data(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    rec_t *r = ud;
    logf_(r, "data %u %.*s;", sid, (int)len, (const char *)d);
    if (r->consume)
        gw_h2_session_consume(r->s, sid, len);
    return 0;
}

int on_trailers(void *ud, uint32_t sid, const gw_h2_header_t *h, size_t n)
{
    rec_t *r = ud;
    logf_(r, "trailers %u", sid);
    for (size_t i = 0; i < n; i++)
        logf_(r, " %.*s=%.*s", SL(h[i].name), SL(h[i].value));
    logf_(r, ";");
    return 0;
}

int on_end_stream(void *ud, uint32_t sid)
{
    logf_((rec_t *)ud, "end %u;", sid);
    return 0;
}

void on_close(void *ud, uint32_t sid, uint32_t code, int by_peer)
{
    rec_t *r = ud;
    logf_(r, "close %u %s %d;", sid, gw_h2_error_str(code), by_peer);
    if (r->release_on_close)
        gw_h2_session_stream_release(r->s, sid);
}

void on_goaway(void *ud, uint32_t last, uint32_t code, gw_slice_t dbg)
{
    logf_((rec_t *)ud, "goaway %u %s %.*s;", last, gw_h2_error_str(code), SL(dbg));
}

const gw_h2_callbacks_t cbs = {on_request, on_data, on_trailers, on_end_stream,
                               on_close,   NULL,    on_goaway,   NULL};

void cli_init(cli_t *c, int preface)
{
    gw_bytes_init(&c->b, 0);
    assert_int_equal(gw_hpack_enc_init(&c->enc, 4096), 0);
    if (preface) {
        assert_int_equal(gw_bytes_append(&c->b, GW_H2_PREFACE, GW_H2_PREFACE_LEN), 0);
        assert_int_equal(gw_h2_frame_write_settings(&c->b, 0, NULL, 0), 0);
    }
}

void cli_free(cli_t *c)
{
    gw_bytes_free(&c->b);
    gw_hpack_enc_free(&c->enc);
}

/* Encode "name", "value", ..., NULL as a header block. A name with uppercase letters (which
 * the encoder does not take) is written by hand as a literal without indexing (RFC 7541
 * §6.2.2, short strings, no Huffman). */
void block(cli_t *c, gw_bytes_t *out, const char *const *kv)
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

void cli_headers(cli_t *c, uint32_t sid, uint8_t flags, const char *const *kv)
{
    gw_bytes_t blk;
    block(c, &blk, kv);
    assert_int_equal(gw_h2_frame_write_headers(&c->b, sid, flags | GW_H2_F_END_HEADERS, NULL,
                                               blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
}

void cli_blocks(cli_t *c, uint32_t sid, const uint8_t *blk, size_t len, int times)
{
    for (int i = 0; i < times; i++)
        assert_int_equal(gw_h2_frame_write_headers(&c->b, sid,
                                                   GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS, NULL,
                                                   blk, len, 0, 0),
                         0);
}

const char *const GET[] = {":method",     "GET",   ":scheme", "https", ":authority",
                           "example.com", ":path", "/a",      NULL};
/* RFC 9218 §5 priority request field variants of GET */
const char *const GET_I[] = {":method", "GET", ":scheme",  "https", ":authority", "example.com",
                             ":path",   "/a",  "priority", "i",     NULL};
const char *const GET_U0[] = {":method", "GET", ":scheme",  "https", ":authority", "example.com",
                              ":path",   "/a",  "priority", "u=0",   NULL};
const char *const POST[] = {":method", "POST",           ":scheme", "https", ":path",
                            "/up",     "content-length", "5",       NULL};

/* Drain the session into a fresh iovq and split the bytes into frames. */
void cli_setting(cli_t *c, uint16_t id, uint32_t value)
{
    gw_h2_setting_t st = {id, value};
    assert_int_equal(gw_h2_frame_write_settings(&c->b, 0, &st, 1), 0);
}

static int dec_cb(void *ud, const gw_hpack_field_t *f)
{
    dec_log_t *l = ud;
    int w = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%.*s=%.*s;", SL(f->name),
                     SL(f->value));
    if (w > 0)
        l->len += (size_t)w < sizeof(l->text) - l->len ? (size_t)w : 0;
    return 0;
}

int decode_block(gw_hpack_dec_t *d, const uint8_t *p, size_t len, dec_log_t *l)
{
    memset(l, 0, sizeof(*l));
    gw_hpack_dec_begin(d, 1 << 20);
    ssize_t n = gw_hpack_decode(d, p, len, 1, dec_cb, l);
    int end = gw_hpack_dec_end(d);
    return n == (ssize_t)len && end == 0 ? 0 : -1;
}

void drain(gw_h2_session_t *s, outs_t *o)
{
    drain_some(s, o, SIZE_MAX);
}

void drain_some(gw_h2_session_t *s, outs_t *o, size_t data_max)
{
    gw_iovq_t q;
    static uint8_t flat[1 << 20];
    gw_iovq_init(&q);
    if (data_max == SIZE_MAX)
        assert_true(gw_h2_session_send(s, &q) >= 0);
    else
        assert_true(gw_h2_session_send_some(s, &q, data_max) >= 0);
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

uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

const outf_t *find_type(const outs_t *o, uint8_t type, size_t nth)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->f[i].h.type == type && nth-- == 0)
            return &o->f[i];
    return NULL;
}

void expect_goaway(const outs_t *o, uint32_t code)
{
    const outf_t *g = find_type(o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p + 4), code);
}

const outf_t *find_rst(const outs_t *o, uint32_t sid)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->f[i].h.type == GW_H2_FT_RST_STREAM && o->f[i].h.stream_id == sid)
            return &o->f[i];
    return NULL;
}

void expect_rst(const outs_t *o, uint32_t sid, uint32_t code)
{
    const outf_t *f = find_rst(o, sid);
    if (!f)
        fail_msg("no RST_STREAM on stream %u", sid);
    assert_int_equal(get32(f->p), code);
}

gw_h2_session_t *server_cb(rec_t *r, const gw_h2_options_t *o, const gw_h2_callbacks_t *cb)
{
    gw_h2_session_t *s;
    memset(r, 0, sizeof(*r));
    assert_int_equal(gw_h2_session_new(&s, o, cb, r, 0), 0);
    r->s = s;
    return s;
}

gw_h2_session_t *server(rec_t *r, const gw_h2_options_t *o)
{
    return server_cb(r, o, &cbs);
}

ssize_t feed(gw_h2_session_t *s, const gw_bytes_t *b)
{
    return gw_h2_session_recv(s, b->base, b->len, 1);
}

/* Everything the client wrote, fed to the session, which takes all of it; c->b is empty
 * again. */
void cli_send(gw_h2_session_t *s, cli_t *c)
{
    assert_int_equal(feed(s, &c->b), (ssize_t)c->b.len);
    c->b.len = 0;
}

void cli_exchange(gw_h2_session_t *s, cli_t *c, outs_t *o)
{
    cli_send(s, c);
    drain(s, o);
}

void session_end(gw_h2_session_t *s, cli_t *c)
{
    cli_free(c);
    gw_h2_session_del(s);
}

/* A session past the handshake: preface + SETTINGS fed, initial output drained. */
gw_h2_session_t *ready(rec_t *r, cli_t *c, const gw_h2_options_t *o)
{
    gw_h2_session_t *s = server(r, o);
    outs_t out;
    cli_init(c, 1);
    cli_send(s, c);
    /* acknowledge the server's SETTINGS */
    assert_int_equal(gw_h2_frame_write_settings(&c->b, 1, NULL, 0), 0);
    cli_send(s, c);
    drain(s, &out);
    return s;
}

/* ready(), then a GET on stream 1 (ended, delivered to the callbacks). */
gw_h2_session_t *ready_get(rec_t *r, cli_t *c, const gw_h2_options_t *o)
{
    gw_h2_session_t *s = ready(r, c, o);
    cli_headers(c, 1, GW_H2_F_END_STREAM, GET);
    cli_send(s, c);
    return s;
}

int sfix_setup(void **state)
{
    static sfix_t fixture;
    memset(&fixture, 0, sizeof(fixture));
    gw_h2_options_default(&fixture.opt);
    *state = &fixture;
    return 0;
}

void fend(sfix_t *f)
{
    if (!f->s)
        return;
    cli_free(&f->c);
    gw_h2_session_del(f->s);
    f->s = NULL;
}

int sfix_teardown(void **state)
{
    fend(*state);
    return 0;
}

gw_h2_session_t *fready(sfix_t *f)
{
    fend(f);
    f->s = ready(&f->r, &f->c, &f->opt);
    return f->s;
}

gw_h2_session_t *fready_get(sfix_t *f)
{
    fend(f);
    f->s = ready_get(&f->r, &f->c, &f->opt);
    return f->s;
}
