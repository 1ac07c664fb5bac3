/* test_h2_session_limits.c — split from test_h2_session.c (same helpers, h2_session_util.h). */
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
#include "h2_session_util.h"

/* Stream 1 opened with a malformed head (an uppercase field name): the session resets it. */
static void reset_stream_1(sfix_t *f)
{
    static const char *const BAD[] = {":method", "GET", ":scheme", "https", ":path",
                                      "/",       "Bad", "x",       NULL};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, BAD);
    cli_send(f->s, &f->c);
    drain(f->s, &f->o);
    expect_rst(&f->o, 1, GW_H2_PROTOCOL_ERROR);
}

/* A header block on stream 1 that adds one entry to the table: a literal with incremental
 * indexing and a new name (RFC 7541 §6.2.1) of name_len 'n' bytes and value_len 'v' bytes, no
 * Huffman coding. */
static void table_entry_on_stream_1(sfix_t *f, size_t name_len, size_t value_len)
{
    static uint8_t blk[2 * (3 + 4096) + 1];
    size_t k = 0;
    blk[k++] = 0x40;
    for (int part = 0; part < 2; part++) {
        size_t n = part ? value_len : name_len;
        assert_true(n <= 4096);
        if (n < 127) { /* a 7-bit prefix integer (§5.1) */
            blk[k++] = (uint8_t)n;
        } else {
            blk[k++] = 0x7f;
            blk[k++] = 0x80 | ((n - 127) & 0x7f);
            blk[k++] = (uint8_t)((n - 127) >> 7);
        }
        memset(blk + k, part ? 'v' : 'n', n);
        k += n;
    }
    cli_blocks(&f->c, 1, blk, k, 1);
    cli_send(f->s, &f->c);
}

/* What the client wrote is a flood: the session says ENHANCE_YOUR_CALM and counts it. */
static void expect_calm(sfix_t *f)
{
    assert_int_equal(feed(f->s, &f->c.b), GW_E_CALM);
    drain(f->s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(f->s).control_flood_hits, 1);
}

/* Header blocks on a stream the gateway reset are decoded for the HPACK
 * state only (the table follows), nothing is copied per field, and each block is charged to
 * the control budget. */
static void blocks_on_a_reset_stream_spend_the_budget(void **state)
{
    sfix_t *f = *state;
    f->opt.control_frame_budget = 300;
    gw_h2_session_t *s = fready(f);
    reset_stream_1(f);
    /* a 4000-byte entry enters the table through a block on the reset stream: new name "x",
     * a value of 4000 bytes */
    table_entry_on_stream_1(f, 1, 4000);
    /* then blocks of one byte naming that entry (index 62): nothing kept for any of them */
    const uint8_t idx62 = 0x80 | 62;
    gw_alloc_count_start();
    cli_blocks(&f->c, 1, &idx62, 1, 250);
    cli_send(s, &f->c);
    long long live = gw_alloc_count_live();
    gw_alloc_count_stop();
    if (live > 64 * 1024)
        fail_msg("250 blocks on a reset stream kept %lld bytes", live);
    assert_int_equal(gw_h2_session_stats(s).discarded_blocks, 251);
    drain(s, &f->o);
    /* the budget: 300 control units, 251 spent: fifty more blocks are a flood */
    cli_blocks(&f->c, 1, &idx62, 1, 50);
    expect_calm(f);
}

/* Blocks on a reset stream made of 3-byte literals without
 * indexing that name a 4000-byte table entry (RFC 7541 §6.2.2) are decoded in the decoder's
 * table-only mode: nothing is allocated or copied for them (each literal copied the 4000-byte
 * name before: 400 MB of copying for 100 frames of 3 KB), and the budget still ends it. */
static void literals_on_a_reset_stream_copy_nothing(void **state)
{
    sfix_t *f = *state;
    f->opt.control_frame_budget = 150;
    gw_h2_session_t *s = fready(f);
    reset_stream_1(f);
    /* an entry with a 4000-byte name, a 1-byte value */
    table_entry_on_stream_1(f, 4000, 1);
    enum { REPS = 1000, FRAMES = 100 };
    static uint8_t lit[REPS * 3];
    for (size_t i = 0; i < REPS; i++) {
        lit[3 * i] = 0x0f; /* name index 62 = 15 + 47, empty value */
        lit[3 * i + 1] = 0x2f;
        lit[3 * i + 2] = 0x00;
    }
    cli_blocks(&f->c, 1, lit, sizeof(lit), FRAMES);
    gw_alloc_count_start();
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    long long allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    f->c.b.len = 0;
    if (allocs != 0)
        fail_msg("%d blocks on a reset stream made %lld allocations", FRAMES, allocs);
    assert_int_equal(gw_h2_session_stats(s).discarded_blocks, FRAMES + 1);
    drain(s, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_GOAWAY, 0));
    /* 101 of 150 spent: fifty more blocks are a flood */
    cli_blocks(&f->c, 1, lit, sizeof(lit), 50);
    expect_calm(f);
}

/* ---- header blocks are encoded in wire order ---- */

/* Decode every HEADERS frame of o (in the order they came) with the peer's decoder d;
 * returns the fields of the last one on stream sid, or "ERROR" when a block fails. */
static void decode_headers(gw_hpack_dec_t *d, const outs_t *o, uint32_t sid, dec_log_t *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < o->n; i++) {
        if (o->f[i].h.type != GW_H2_FT_HEADERS)
            continue;
        assert_true(o->f[i].h.flags & GW_H2_F_END_HEADERS);
        dec_log_t a;
        if (decode_block(d, o->f[i].p, o->f[i].h.length, &a) < 0)
            snprintf(a.text, sizeof(a.text), "ERROR");
        if (o->f[i].h.stream_id == sid)
            *out = a;
    }
}

static void trailers_encoded_in_wire_order(void **state)
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
        cli_setting(&c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0);
        cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
        cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
        cli_exchange(s, &c, &o);
        const gw_h2_header_t tr[] = {{GW_SLICE_LIT("x-checksum"), GW_SLICE_LIT("3a7bd3e2360a")}};
        assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
        gw_rbuf_t *rb = gw_rbuf_new(10);
        memset(rb->data, 'z', 10);
        assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 10, 0), 0);
        gw_rbuf_unref(rb);
        assert_int_equal(gw_h2_session_submit_trailers(s, 1, tr, 1), 0);
        dec_log_t got;
        drain(s, &o);
        decode_headers(&d, &o, 1, &got);
        assert_string_equal(got.text, ":status=200;");
        if (reset) { /* the client gives up on stream 1 before its trailers leave */
            assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 1, GW_H2_CANCEL), 0);
            cli_send(s, &c);
        }
        /* stream 3's head, with the same field, goes out first */
        assert_int_equal(gw_h2_session_submit_response(s, 3, 200, tr, 1, 1), 0);
        drain(s, &o);
        decode_headers(&d, &o, 3, &got);
        assert_string_equal(got.text, ":status=200;x-checksum=3a7bd3e2360a;");
        if (!reset) { /* window for stream 1: its DATA, then its trailers */
            assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 100), 0);
            cli_exchange(s, &c, &o);
            decode_headers(&d, &o, 1, &got);
            assert_string_equal(got.text, "x-checksum=3a7bd3e2360a;");
            const outf_t *t = find_type(&o, GW_H2_FT_HEADERS, 0);
            assert_non_null(t);
            assert_true(t->h.flags & GW_H2_F_END_STREAM);
        }
        gw_hpack_dec_free(&d);
        session_end(s, &c);
    }
}

static void max_concurrent_streams(void **state)
{
    sfix_t *f = *state;
    f->opt.max_concurrent_streams = 2;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 5, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 5, GW_H2_REFUSED_STREAM);
    assert_int_equal(gw_h2_session_stats(s).streams_refused, 1);
    /* a reset stream still holds its slot until released */
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), 0);
    cli_headers(&f->c, 7, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 7, GW_H2_REFUSED_STREAM);
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    cli_headers(&f->c, 9, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_RST_STREAM, 0));
    assert_non_null(strstr(f->r.log, "req 9 "));
}

static void rapid_reset_budget(void **state)
{
    sfix_t *f = *state;
    f->opt.reset_budget = 5;
    gw_h2_session_t *s = fready(f);
    f->r.release_on_close = 1;
    uint32_t sid = 1;
    for (int i = 0; i < 5; i++, sid += 2) {
        cli_headers(&f->c, sid, 0, GET);
        assert_int_equal(gw_h2_frame_write_rst_stream(&f->c.b, sid, GW_H2_CANCEL), 0);
    }
    cli_send(s, &f->c);
    /* a reset we send because of a peer error counts too (MadeYouReset) */
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, 0), 0);
    cli_headers(&f->c, sid, 0, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, sid, 0), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).reset_budget_hits, 1);
    assert_int_equal(gw_h2_session_stats(s).resets_received, 5);
    assert_true(gw_h2_session_stats(s).resets_provoked >= 1);
}

static void continuation_flood(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    gw_bytes_t blk;
    block(&f->c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&f->c.b, 1, 0, NULL, blk.base, 3, 0, 0), 0);
    static uint8_t junk[4096];
    ssize_t rc = 0;
    for (int i = 0; i < 100 && rc >= 0; i++) {
        assert_int_equal(gw_h2_frame_write_continuation(&f->c.b, 1, 0, junk, sizeof(junk)), 0);
        rc = feed(s, &f->c.b);
        f->c.b.len = 0;
    }
    assert_int_equal(rc, GW_E_CALM);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).header_block_hits, 1);
    gw_bytes_free(&blk);
}

static void continuation_sequence(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    gw_bytes_t blk;
    block(&f->c, &blk, GET);
    /* split over HEADERS + 2 CONTINUATION: one request */
    assert_int_equal(
        gw_h2_frame_write_headers(&f->c.b, 1, GW_H2_F_END_STREAM, NULL, blk.base, 5, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_continuation(&f->c.b, 1, 0, blk.base + 5, 5), 0);
    assert_int_equal(gw_h2_frame_write_continuation(&f->c.b, 1, GW_H2_F_END_HEADERS, blk.base + 10,
                                                    blk.len - 10),
                     0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_string_equal(f->r.log, "req 1 GET https example.com /a cl=-1 es=1;end 1;");
    f->c.b.len = 0;
    gw_bytes_free(&blk);
    /* another frame in the middle of a block */
    block(&f->c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&f->c.b, 3, 0, NULL, blk.base, 5, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_PROTO);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_PROTOCOL_ERROR);
    gw_bytes_free(&blk);
    /* CONTINUATION without HEADERS */
    s = fready(f);
    assert_int_equal(gw_h2_frame_write_continuation(&f->c.b, 1, GW_H2_F_END_HEADERS, "", 0), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_PROTO);
}

static void header_list_overflow(void **state)
{
    sfix_t *f = *state;
    f->opt.max_header_list_size = 200;
    gw_h2_session_t *s = fready(f);
    static char big[300];
    memset(big, 'v', sizeof(big) - 1);
    const char *const H[] = {":method", "GET",   ":scheme", "https", ":path",
                             "/",       "x-big", big,       NULL};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, H);
    cli_exchange(s, &f->c, &f->o);
    const outf_t *h = find_type(&f->o, GW_H2_FT_HEADERS, 0);
    assert_non_null(h);
    assert_int_equal(h->h.stream_id, 1);
    assert_true(h->h.flags & GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_stats(s).header_list_hits, 1);
    assert_int_equal(f->r.len, 0); /* the layer above never saw it */
    assert_int_equal(gw_h2_session_active_streams(s), 0);
}

/* A fresh session is sent the request head kv on stream 1 (HEADERS with flags): with want,
 * the request reaches the layer above (want is in its log) and no stream is reset; without,
 * the stream is reset with PROTOCOL_ERROR and nothing reaches the layer above (case i). */
static void expect_head(const char *const *kv, uint8_t flags, const char *want, size_t i)
{
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, flags, kv);
    cli_exchange(s, &c, &o);
    if (want) {
        assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
        if (!strstr(r.log, want))
            fail_msg("case %zu: %s not in %s", i, want, r.log);
    } else {
        expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
        if (strstr(r.log, "req 1"))
            fail_msg("case %zu reached the layer above: %s", i, r.log);
        assert_int_equal(gw_h2_session_active_streams(s), 0);
    }
    session_end(s, &c);
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
    /* the last case: content-length 5 but END_STREAM on HEADERS */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_head(cases[i], GW_H2_F_END_STREAM, NULL, i);
    /* te: trailers and CONNECT with :authority only are fine */
    const char *const ok1[] = {":method", "GET", ":scheme",  "https", ":path",
                               "/",       "te",  "trailers", NULL};
    const char *const ok2[] = {":method", "CONNECT", ":authority", "a:443", NULL};
    expect_head(ok1, GW_H2_F_END_STREAM, "req 1 GET", 0);
    expect_head(ok2, 0, "req 1 CONNECT", 0);
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
                cli_exchange(s, &c, &o);
                if (ok != (strstr(r.log, "req 1") != NULL))
                    print_message("name len %zu, byte 0x%02x at %zu\n", len, v, pos);
                assert_int_equal(ok, strstr(r.log, "req 1") != NULL);
                if (!ok)
                    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
                session_end(s, &c);
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
                cli_exchange(s, &c, &o);
                int malformed = kind == 0 || (kind == 1 && pos > 0 && pos < 20 && b < 2);
                if (malformed) {
                    expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
                    assert_null(strstr(r.log, "req 1"));
                } else {
                    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
                    assert_non_null(strstr(r.log, "req 1"));
                }
                session_end(s, &c);
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
    /* POST says content-length 5: DATA longer than that, or shorter at END_STREAM */
    static const struct {
        const char *data;
        uint8_t flags;
    } wrong_length[] = {
        {"123456", 0},
        {"1234", GW_H2_F_END_STREAM},
    };
    for (size_t i = 0; i < sizeof(wrong_length) / sizeof(wrong_length[0]); i++) {
        const char *d = wrong_length[i].data;
        gw_h2_session_t *s = ready(&r, &c, NULL);
        cli_headers(&c, 1, 0, POST);
        assert_int_equal(gw_h2_frame_write_data(&c.b, 1, wrong_length[i].flags, d, strlen(d), 0, 0),
                         0);
        cli_exchange(s, &c, &o);
        const outf_t *rst = find_rst(&o, 1);
        if (!rst || get32(rst->p) != GW_H2_PROTOCOL_ERROR)
            fail_msg("DATA \"%s\" flags %u: no RST_STREAM(PROTOCOL_ERROR) on stream 1", d,
                     wrong_length[i].flags);
        session_end(s, &c);
    }
    /* good trailers */
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "12345", 5, 0, 0), 0);
    const char *const T[] = {"x-sum", "abc", NULL};
    cli_headers(&c, 1, GW_H2_F_END_STREAM, T);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "req 1 POST https  /up cl=5 es=0 content-length=5;data 1 12345;"
                               "trailers 1 x-sum=abc;end 1;");
    session_end(s, &c);
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
        cli_exchange(s, &c, &o);
        expect_rst(&o, 1, GW_H2_PROTOCOL_ERROR);
        session_end(s, &c);
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
        session_end(s, &c);
    }
    /* DATA and HEADERS after END_STREAM: stream error STREAM_CLOSED */
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "x", 1, 0, 0), 0);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &c, &o);
    expect_rst(&o, 1, GW_H2_STREAM_CLOSED);
    expect_rst(&o, 3, GW_H2_STREAM_CLOSED);
    assert_true(gw_h2_session_want_read(s));
    session_end(s, &c);
    /* unknown frame types are ignored, also PRIORITY on an idle stream */
    s = ready(&r, &c, NULL);
    assert_int_equal(gw_h2_frame_write_raw(&c.b, 0xfa, 0, 9, "abc", 3), 0);
    const gw_h2_priority_t pri = {0, 15, 0};
    assert_int_equal(gw_h2_frame_write_priority(&c.b, 11, &pri), 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &c, &o);
    assert_int_equal(o.n, 0);
    assert_non_null(strstr(r.log, "req 1 GET"));
    session_end(s, &c);
}

/* §5.1 closed: after our RST_STREAM, frames in flight are ignored; §6.3 bad PRIORITY length is
 * a stream error; RST_STREAM on a closed stream is harmless. */
static void closed_stream_frames(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    f->r.release_on_close = 1;
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&f->c, 1, 0, P);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_CANCEL), GW_E_NOENT);
    drain(s, &f->o);
    expect_rst(&f->o, 1, GW_H2_CANCEL);
    assert_int_equal(gw_h2_frame_write_data(&f->c.b, 1, 0, "late", 4, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_rst_stream(&f->c.b, 1, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, 10), 0);
    assert_int_equal(gw_h2_frame_write_raw(&f->c.b, GW_H2_FT_PRIORITY, 0, 1, "\0\0\0\0", 4), 0);
    cli_exchange(s, &f->c, &f->o);
    assert_int_equal(f->o.n, 1); /* only the PRIORITY frame size error */
    expect_rst(&f->o, 1, GW_H2_FRAME_SIZE_ERROR);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    assert_true(gw_h2_session_want_read(s));
    assert_string_equal(f->r.log, "req 1 POST https  / cl=-1 es=0;close 1 CANCEL 0;");
    /* trailers in flight for the forgotten stream are decoded and dropped; a later request
     * on a new stream still decodes (HPACK in sync) */
    f->c.b.len = 0;
    const char *const T[] = {"x-t", "1", NULL};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, T);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_non_null(strstr(f->r.log, "req 3 GET https example.com /a"));
    drain(s, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_GOAWAY, 0));
}

static void floods(void **state)
{
    sfix_t *f = *state;
    f->opt.control_frame_budget = 10;
    gw_h2_session_t *s = fready(f);
    for (int i = 0; i < 11; i++)
        assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);

    /* the budget is per window: spread over time it is fine */
    s = fready(f);
    for (int i = 0; i < 30; i++) {
        assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 0, NULL), 0);
        assert_int_equal(gw_h2_session_recv(s, f->c.b.base, f->c.b.len, 1 + (uint64_t)i * 2000),
                         (ssize_t)f->c.b.len);
        f->c.b.len = 0;
        drain(s, &f->o);
    }

    /* queued control frames: the peer does not read our PING ACKs */
    gw_h2_options_default(&f->opt);
    f->opt.max_queued_control = 5;
    s = fready(f);
    for (int i = 0; i < 6; i++)
        assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).queued_control_hits, 1);

    /* empty DATA frames */
    gw_h2_options_default(&f->opt);
    f->opt.empty_frame_budget = 3;
    s = fready(f);
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&f->c, 1, 0, P);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&f->c.b, 1, 0, NULL, 0, 0, 0), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    assert_int_equal(gw_h2_session_stats(s).empty_frame_hits, 1);

    /* ... on a stream the gateway reset (an early answer): ignored, but still counted (the
     * attack soak found such a flood cost nothing) */
    s = fready(f);
    cli_headers(&f->c, 1, 0, P);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 405, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_NO_ERROR), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_h2_frame_write_data(&f->c.b, 1, 0, NULL, 0, 0, 0), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len); /* within the budget: ignored */
    f->c.b.len = 0;
    assert_int_equal(gw_h2_frame_write_data(&f->c.b, 1, 0, NULL, 0, 0, 0), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    assert_int_equal(gw_h2_session_stats(s).empty_frame_hits, 1);
}

/* RFC 9113 §6.9: WINDOW_UPDATEs that credit DATA the gateway sent are flow control, not a
 * flood: a client with small windows (here 1 KiB per stream) downloading many frames sends a
 * stream and a connection update per frame, far past control_frame_budget, and is served to
 * the end. Updates with no DATA to answer still count. */
static void window_updates_answering_data_are_not_a_flood(void **state)
{
    sfix_t *f = *state;
    f->opt.control_frame_budget = 20;
    gw_h2_session_t *s = fready(f);
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 1024);
    const char *const G[] = {":method", "GET", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, G);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(200 * 1024);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 200 * 1024, 1), 0);
    size_t got = 0;
    for (int round = 0; round < 400 && got < 200 * 1024; round++) {
        drain(s, &f->o);
        for (size_t i = 0; i < f->o.n; i++) {
            if (f->o.f[i].h.type != GW_H2_FT_DATA || !f->o.f[i].h.length)
                continue;
            got += f->o.f[i].h.length;
            assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, f->o.f[i].h.length), 0);
            assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, f->o.f[i].h.length), 0);
        }
        if (f->c.b.len) {
            cli_send(s, &f->c);
        }
    }
    assert_int_equal(got, 200 * 1024); /* 200 frames, 400 updates, a budget of 20 */
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 0);
    /* with nothing sent to answer (the earned ones spent), updates count again */
    for (int i = 0; i < 21; i++)
        assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 1), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    gw_rbuf_unref(rb);
}

/* A SETTINGS frame of 2,730 SETTINGS_INITIAL_WINDOW_SIZE entries walks the
 * open streams once (the last value counts), and its entries, not the frame, are charged to
 * the control budget: a few such frames are a flood. */
static void settings_entries_budgeted(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    const char *const G[] = {":method", "GET", ":scheme", "https", ":path", "/", NULL};
    for (uint32_t id = 1; id <= 39; id += 2)
        cli_headers(&f->c, id, 1, G);
    cli_exchange(s, &f->c, &f->o);
    enum { N = 2730 };
    static gw_h2_setting_t set[N];
    for (size_t i = 0; i < N; i++)
        set[i] = (gw_h2_setting_t){GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)(1000 + i)};
    assert_int_equal(gw_h2_frame_write_settings(&f->c.b, 0, set, N), 0);
    uint64_t walks0 = gw_h2_session_stats(s).window_walks;
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM); /* 2,730 entries > the budget of 1000 */
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
    assert_int_equal(gw_h2_session_stats(s).window_walks, walks0); /* refused before any walk */

    /* within the budget: one walk per frame, with the last value */
    f->opt.control_frame_budget = 100000;
    s = fready(f);
    for (uint32_t id = 1; id <= 39; id += 2)
        cli_headers(&f->c, id, 1, G);
    cli_exchange(s, &f->c, &f->o);
    walks0 = gw_h2_session_stats(s).window_walks;
    for (int k = 0; k < 3; k++)
        assert_int_equal(gw_h2_frame_write_settings(&f->c.b, 0, set, N), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_stats(s).window_walks, walks0 + 3);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 0);
    drain(s, &f->o);

    /* 40 frames of 2,730 entries: 109,200 entries charged, past 100,000 */
    s = fready(f);
    for (int k = 0; k < 40; k++)
        assert_int_equal(gw_h2_frame_write_settings(&f->c.b, 0, set, N), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_CALM);
    assert_int_equal(gw_h2_session_stats(s).control_flood_hits, 1);
}

/* A request head that cannot become a clean HTTP/1.1 request line is
 * malformed (RST_STREAM PROTOCOL_ERROR, never reaches the proxy): :method not a token, :path
 * with bytes outside RFC 3986 path/query characters, :scheme other than http/https, an
 * :authority with non-authority characters or userinfo. Their clean neighbours pass. */
static void request_head_syntax(void **state)
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
        expect_head(h, GW_H2_F_END_STREAM, NULL, i);
    }
    const char *const ok[] = {":method",    "PURGE",      ":scheme",
                              "http",       ":path",      "/a/b%20c?d=e/f?g&h=;@:!$'()*+,~",
                              ":authority", "[::1]:8080", NULL};
    expect_head(ok, GW_H2_F_END_STREAM, "req 1 PURGE", 0);
}

/* Trailers past max_header_list_size, after the response head went out, reset the
 * stream (ENHANCE_YOUR_CALM) instead of sending a second final HEADERS (a 431). */
static void trailers_overflow_resets(void **state)
{
    sfix_t *f = *state;
    f->opt.max_header_list_size = 200;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, 0, POST);
    cli_send(s, &f->c);
    assert_non_null(strstr(f->r.log, "req 1"));
    /* the response head goes out before the trailers arrive */
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    drain(s, &f->o);
    assert_non_null(find_type(&f->o, GW_H2_FT_HEADERS, 0));
    static char big[300];
    memset(big, 'v', sizeof(big) - 1);
    const char *const tr[] = {"x-big", big, NULL};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, tr);
    cli_exchange(s, &f->c, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_HEADERS, 0)); /* no second final head */
    expect_rst(&f->o, 1, GW_H2_ENHANCE_YOUR_CALM);
    assert_null(strstr(f->r.log, "trailers 1"));
    assert_int_equal(gw_h2_session_stats(s).header_list_hits, 1);
}

static const struct CMUnitTest tests[] = {
    SESSION_TEST(max_concurrent_streams),
    SESSION_TEST(rapid_reset_budget),
    SESSION_TEST(continuation_flood),
    SESSION_TEST(continuation_sequence),
    SESSION_TEST(header_list_overflow),
    cmocka_unit_test(request_validation),
    cmocka_unit_test(field_bytes_at_every_position),
    cmocka_unit_test(field_name_every_byte_value),
    cmocka_unit_test(content_length_and_trailers),
    cmocka_unit_test(stream_state_errors),
    SESSION_TEST(closed_stream_frames),
    SESSION_TEST(floods),
    SESSION_TEST(window_updates_answering_data_are_not_a_flood),
    SESSION_TEST(settings_entries_budgeted),
    cmocka_unit_test(trailers_encoded_in_wire_order),
    SESSION_TEST(blocks_on_a_reset_stream_spend_the_budget),
    SESSION_TEST(literals_on_a_reset_stream_copy_nothing),
    cmocka_unit_test(request_head_syntax),
    SESSION_TEST(trailers_overflow_resets),
};

GW_TEST_MAIN(tests)
