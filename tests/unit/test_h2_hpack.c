/* Unit tests of h2/hpack: RFC 7541 Appendix C vectors (C.1–C.6), Huffman, every decoding
 * error class, list-size overflow, split decoding, failing allocations, encoder policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "common/err.h"
#include "h2/hpack.h"

static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    int hi = -1;
    for (; *hex; hex++) {
        int v;
        if (*hex >= '0' && *hex <= '9')
            v = *hex - '0';
        else if (*hex >= 'a' && *hex <= 'f')
            v = *hex - 'a' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return n;
}

typedef struct {
    char text[4096];
    size_t len;
    unsigned flags_seen;
} fields_t;

static int collect(void *ud, const gw_hpack_field_t *f)
{
    fields_t *r = ud;
    int n = snprintf(r->text + r->len, sizeof(r->text) - r->len, "%.*s: %.*s\n", (int)f->name.len,
                     f->name.base, (int)f->value.len, f->value.base);
    r->len += (size_t)n;
    r->flags_seen |= f->flags;
    return 0;
}

/* Decode the whole block b[0..n) with final=1, its fields as text into out: the decoder's
 * error, or once every byte is consumed gw_hpack_dec_end()'s result. */
static int decode_block(gw_hpack_dec_t *d, const uint8_t *b, size_t n, fields_t *out)
{
    memset(out, 0, sizeof(*out));
    gw_hpack_dec_begin(d, 65536);
    ssize_t rv = gw_hpack_decode(d, b, n, 1, collect, out);
    if (rv < 0)
        return (int)rv;
    assert_int_equal(rv, n);
    return gw_hpack_dec_end(d);
}

/* decode_block() of a block written in hex. */
static int decode_hex(gw_hpack_dec_t *d, const char *hex, fields_t *out)
{
    uint8_t buf[1024];
    size_t n = unhex(hex, buf);
    return decode_block(d, buf, n, out);
}

/* The encoder's block decodes, with d's table, into the fields f[0..n) in order. */
static void expect_fields(gw_hpack_dec_t *d, const gw_bytes_t *block, const gw_hpack_field_t *f,
                          size_t n)
{
    fields_t got;
    assert_int_equal(decode_block(d, block->base, block->len, &got), 0);
    char want[4096];
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += (size_t)snprintf(want + w, sizeof(want) - w, "%.*s: %.*s\n", (int)f[i].name.len,
                              f[i].name.base, (int)f[i].value.len, f[i].value.base);
    assert_string_equal(got.text, want);
}

/* Entry i of t, which must exist. */
static gw_hpack_entry_t entry_at(const gw_hpack_table_t *t, size_t i)
{
    gw_hpack_entry_t e;
    assert_int_equal(gw_hpack_table_get(t, i, &e), 1);
    return e;
}

static void check_entry(const gw_hpack_table_t *t, size_t i, const char *name, const char *value)
{
    gw_hpack_entry_t ent = entry_at(t, i), *e = &ent;
    assert_int_equal(e->name_len, strlen(name));
    assert_memory_equal(e->data, name, e->name_len);
    assert_int_equal(e->value_len, strlen(value));
    assert_memory_equal(e->data + e->name_len, value, e->value_len);
}

/* C.1: integer representations */
static void c1_integers(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    fields_t f;
    /* 10 in a 5-bit prefix is a size update of 10; 1337 in 5 bits: 1f 9a 0a */
    assert_int_equal(decode_hex(&d, "2a", &f), 0);
    assert_int_equal(d.t.max, 10);
    assert_int_equal(decode_hex(&d, "3f9a0a", &f), 0);
    assert_int_equal(d.t.max, 1337);
    /* 42 on an 8-bit boundary is not representable here; an index of 42 (7-bit): aa */
    assert_int_equal(decode_hex(&d, "aa", &f), 0);
    assert_string_equal(f.text, "if-range: \n"); /* static entry 42 */
    gw_hpack_dec_free(&d);
}

static void c2_literals(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    fields_t f;
    /* C.2.1 literal with indexing */
    assert_int_equal(
        decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", &f), 0);
    assert_string_equal(f.text, "custom-key: custom-header\n");
    assert_int_equal(gw_hpack_table_size(&d.t), 55);
    check_entry(&d.t, 0, "custom-key", "custom-header");
    gw_hpack_dec_free(&d);
    /* C.2.2 literal without indexing */
    gw_hpack_dec_init(&d, 4096);
    assert_int_equal(decode_hex(&d, "040c 2f73 616d 706c 652f 7061 7468", &f), 0);
    assert_string_equal(f.text, ":path: /sample/path\n");
    assert_int_equal(gw_hpack_table_len(&d.t), 0);
    /* C.2.3 never indexed */
    assert_int_equal(decode_hex(&d, "1008 7061 7373 776f 7264 0673 6563 7265 74", &f), 0);
    assert_string_equal(f.text, "password: secret\n");
    assert_int_equal(f.flags_seen, GW_HPACK_F_NEVER_INDEX);
    assert_int_equal(gw_hpack_table_len(&d.t), 0);
    /* C.2.4 indexed */
    assert_int_equal(decode_hex(&d, "82", &f), 0);
    assert_string_equal(f.text, ":method: GET\n");
    gw_hpack_dec_free(&d);
}

static const char *const c3_req[3] = {
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
};
static const char *const c4_req[3] = {
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
};
static const char *const req_text[3] = {
    ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n",
    ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\ncache-control: no-cache\n",
    (":method: GET\n:scheme: https\n:path: /index.html\n:authority: www.example.com\n"
     "custom-key: custom-value\n"),
};
static const size_t req_sizes[3] = {57, 110, 164};

static const char *const req_entries[3][2] = {{"custom-key", "custom-value"},
                                              {"cache-control", "no-cache"},
                                              {":authority", "www.example.com"}};

/* The three blocks of one Appendix C example decoded in turn with a table of max bytes: each
 * gives its fields as text[i] and leaves the table at sizes[i] bytes; the table ends holding
 * the three entries (name, value), newest first. */
static void decode_example(const char *const *blocks, size_t max, const char *const *text,
                           const size_t *sizes, const char *const entries[3][2])
{
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, max);
    for (int i = 0; i < 3; i++) {
        fields_t f;
        assert_int_equal(decode_hex(&d, blocks[i], &f), 0);
        assert_string_equal(f.text, text[i]);
        assert_int_equal(gw_hpack_table_size(&d.t), sizes[i]);
    }
    assert_int_equal(gw_hpack_table_len(&d.t), 3);
    for (int i = 0; i < 3; i++)
        check_entry(&d.t, (size_t)i, entries[i][0], entries[i][1]);
    gw_hpack_dec_free(&d);
}

static void c3_requests_plain(void **state)
{
    (void)state;
    decode_example(c3_req, 4096, req_text, req_sizes, req_entries);
}

static void c4_requests_huffman(void **state)
{
    (void)state;
    decode_example(c4_req, 4096, req_text, req_sizes, req_entries);
}

/* Our encoder picks what the RFC's examples pick for requests: C.4 byte for byte. */
static void c4_encoder_reproduces_bytes(void **state)
{
    (void)state;
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    const gw_hpack_field_t r[3][5] = {
        {{GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET"), 0},
         {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("http"), 0},
         {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/"), 0},
         {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("www.example.com"), 0}},
        {{GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET"), 0},
         {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("http"), 0},
         {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/"), 0},
         {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("www.example.com"), 0},
         {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("no-cache"), 0}},
        {{GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET"), 0},
         {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("https"), 0},
         {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/index.html"), 0},
         {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("www.example.com"), 0},
         {GW_SLICE_LIT("custom-key"), GW_SLICE_LIT("custom-value"), 0}},
    };
    const size_t n[3] = {4, 5, 5};
    for (int i = 0; i < 3; i++) {
        gw_bytes_t out;
        gw_bytes_init(&out, 0);
        assert_int_equal(gw_hpack_encode(&e, r[i], n[i], &out), 0);
        uint8_t want[256];
        size_t wl = unhex(c4_req[i], want);
        assert_int_equal(out.len, wl);
        assert_memory_equal(out.base, want, wl);
        gw_bytes_free(&out);
    }
    assert_int_equal(gw_hpack_table_size(&e.t), 164);
    gw_hpack_enc_free(&e);
}

/* Decoders of one thread share their Huffman buffers (as a worker's sessions do): each
 * decodes its own connection's blocks correctly in turn, a trim leaves the shared buffers to
 * the others, and a decoder then holds nothing but its table. */
static void shared_string_buffers(void **state)
{
    (void)state;
    gw_hpack_strbufs_t shared;
    gw_hpack_dec_t d[2];
    fields_t f;
    gw_bytes_init(&shared.name, 0); /* 0: no cap, as a profile's */
    gw_bytes_init(&shared.value, 0);
    gw_alloc_count_start();
    for (int k = 0; k < 2; k++) {
        gw_hpack_dec_init(&d[k], 4096);
        gw_hpack_dec_share_bufs(&d[k], &shared);
    }
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            assert_int_equal(decode_hex(&d[k], c4_req[i], &f), 0);
            assert_string_equal(f.text, req_text[i]);
            gw_hpack_dec_trim(&d[k]); /* as an idle session's compaction does */
        }
    assert_non_null(shared.name.base); /* still there for the next decoder */
    long long with_shared = gw_alloc_count_live();
    gw_hpack_strbufs_free(&shared);
    long long tables = gw_alloc_count_live();
    assert_true(tables < with_shared);
    for (int k = 0; k < 2; k++)
        gw_hpack_dec_free(&d[k]);
    assert_int_equal(gw_alloc_count_live(), 0); /* the tables were all the decoders had */
    gw_alloc_count_stop();
}

static const char *const c5_resp[3] = {
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a "
    "3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 "
    "677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 "
    "553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
};
static const char *const c6_resp[3] = {
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e "
    "919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 "
    "821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed "
    "4ee5 b106 3d50 07",
};
static const char *const resp_text[3] = {
    ":status: 302\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
    "location: https://www.example.com\n",
    ":status: 307\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
    "location: https://www.example.com\n",
    ":status: 200\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:22 GMT\n"
    "location: https://www.example.com\ncontent-encoding: gzip\n"
    "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n",
};
static const size_t resp_sizes[3] = {222, 222, 215};

static const char *const resp_entries[3][2] = {
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
    {"content-encoding", "gzip"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}};

static void c5_responses_plain(void **state)
{
    (void)state;
    decode_example(c5_resp, 256, resp_text, resp_sizes, resp_entries);
}

static void c6_responses_huffman(void **state)
{
    (void)state;
    decode_example(c6_resp, 256, resp_text, resp_sizes, resp_entries);
}

/* Split every block of C.3–C.6 at every cut point: identical fields and tables. */
static void split_at_every_cut(void **state)
{
    (void)state;
    const char *const *sets[4] = {c3_req, c4_req, c5_resp, c6_resp};
    for (int s = 0; s < 4; s++) {
        for (int b = 0; b < 3; b++) {
            uint8_t buf[1024];
            size_t len = unhex(sets[s][b], buf);
            for (size_t cut = 0; cut <= len; cut++) {
                gw_hpack_dec_t d;
                gw_hpack_dec_init(&d, s < 2 ? 4096 : 256);
                fields_t whole, split;
                /* earlier blocks of the set, whole */
                for (int k = 0; k < b; k++)
                    assert_int_equal(decode_hex(&d, sets[s][k], &whole), 0);
                memset(&split, 0, sizeof(split));
                gw_hpack_dec_begin(&d, 65536);
                ssize_t n = gw_hpack_decode(&d, buf, cut, 0, collect, &split);
                assert_true(n >= 0 && (size_t)n <= cut);
                /* the unconsumed tail is passed again with the rest */
                uint8_t rest[1024];
                memcpy(rest, buf + n, len - (size_t)n);
                ssize_t m = gw_hpack_decode(&d, rest, len - (size_t)n, 1, collect, &split);
                assert_int_equal(m, len - (size_t)n);
                assert_int_equal(gw_hpack_dec_end(&d), 0);
                assert_string_equal(split.text, (s < 2 ? req_text : resp_text)[b]);
                gw_hpack_dec_free(&d);
            }
        }
    }
}

static void huffman_all_bytes_round_trip(void **state)
{
    (void)state;
    uint8_t in[256 * 3], enc[2048];
    for (int i = 0; i < 256 * 3; i++)
        in[i] = (uint8_t)(i * 7 + i / 256);
    for (size_t len = 0; len <= sizeof(in); len += 37) {
        size_t el = gw_hpack_huff_encoded_len(in, len);
        assert_int_equal(gw_hpack_huff_encode(in, len, enc), el);
        gw_bytes_t out;
        gw_bytes_init(&out, 0);
        assert_int_equal(gw_hpack_huff_decode(enc, el, &out), 0);
        assert_int_equal(out.len, len);
        if (len)
            assert_memory_equal(out.base, in, len);
        gw_bytes_free(&out);
    }
    /* "www.example.com" from C.4.1 */
    uint8_t w[16];
    assert_int_equal(gw_hpack_huff_encode((const uint8_t *)"www.example.com", 15, w), 12);
    uint8_t want[12];
    unhex("f1e3 c2e5 f23a 6ba0 ab90 f4ff", want);
    assert_memory_equal(w, want, 12);
}

/* The decoder stores a byte for every nibble, kept only when it decodes a symbol: strings of the
 * shortest codes (5 bits: '0', 'a', ...) decode into a buffer capped at exactly what
 * gw_hpack_huff_decode() reserves, with nothing written past it (ASan build). */
static void huffman_shortest_codes_fit(void **state)
{
    (void)state;
    uint8_t in[64], enc[64];
    for (size_t n = 1; n <= 60; n++) {
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t) "0a1e2i"[i % 6];
        size_t el = gw_hpack_huff_encode(in, n, enc);
        gw_bytes_t out;
        gw_bytes_init(&out, el * 8 / 5 + 2);
        assert_int_equal(gw_hpack_huff_decode(enc, el, &out), 0);
        assert_int_equal(out.len, n);
        assert_memory_equal(out.base, in, n);
        gw_bytes_free(&out);
    }
}

static void huffman_errors(void **state)
{
    (void)state;
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    uint8_t b[8];
    /* EOS (30 ones) inside a string */
    unhex("ffff fffc", b);
    assert_int_equal(gw_hpack_huff_decode(b, 4, &out), GW_E_COMPRESSION);
    /* 8 bits of padding (a full byte of ones after a symbol boundary) */
    unhex("1f ff", b); /* 'a'(00011) + 111 pad, then 11111111 */
    out.len = 0;
    assert_int_equal(gw_hpack_huff_decode(b, 2, &out), GW_E_COMPRESSION);
    /* padding that is not all ones: 'a' = 00011 then 000 */
    unhex("18", b);
    out.len = 0;
    assert_int_equal(gw_hpack_huff_decode(b, 1, &out), GW_E_COMPRESSION);
    /* valid: 'a' + 111 */
    unhex("1f", b);
    out.len = 0;
    assert_int_equal(gw_hpack_huff_decode(b, 1, &out), 0);
    assert_int_equal(out.len, 1);
    assert_int_equal(out.base[0], 'a');
    gw_bytes_free(&out);
}

static void decoding_errors(void **state)
{
    (void)state;
    static const struct {
        const char *hex;
        const char *what;
    } bad[] = {
        {"80", "index 0"},
        {"be", "index past the empty dynamic table"},
        {"ff ff ff ff ff 0f", "integer overflow"},
        {"ff 80 80 80 80 80 01", "integer with too many bytes"},
        {"3fe21f", "size update above the advertised 4096"},
        {"82 20", "size update after a field"},
        {"400a 6375 7374 6f6d", "truncated literal with final=1"},
        {"4081 ff 00", "EOS in a Huffman name"},
        {"4001 61 81 18", "bad Huffman padding in a value"},
        {"ff", "truncated integer with final=1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gw_hpack_dec_t d;
        gw_hpack_dec_init(&d, 4096);
        fields_t f;
        int rv = decode_hex(&d, bad[i].hex, &f);
        if (rv != GW_E_COMPRESSION)
            fail_msg("%s (%s): got %d", bad[i].what, bad[i].hex, rv);
        gw_hpack_dec_free(&d);
    }
}

static void list_size_overflow_keeps_table_in_sync(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    uint8_t b[256];
    size_t n = unhex(c3_req[0], b);
    fields_t f = {0};
    gw_hpack_dec_begin(&d, 100); /* the four fields need 4*32 + 52 bytes */
    assert_int_equal(gw_hpack_decode(&d, b, n, 1, collect, &f), n);
    assert_int_equal(gw_hpack_dec_end(&d), GW_E_LIMIT);
    assert_true(d.overflow);
    assert_int_equal(gw_hpack_table_size(&d.t), 57); /* the insertion still happened */
    /* the next block refers to that entry (index 62) and decodes */
    assert_int_equal(decode_hex(&d, c3_req[1], &f), 0);
    assert_string_equal(f.text, req_text[1]);
    gw_hpack_dec_free(&d);
}

/* A block whose fields nobody reads (no callback: a block on a stream the
 * gateway reset; or past max_list_size) updates the table and counts its list size exactly,
 * but a literal that does not enter the table is not materialised: a 3-byte literal naming a
 * 4000-byte entry copies nothing (it copied the name each time, 4000 bytes per 3 read). */
static int count(void *ud, const gw_hpack_field_t *fld)
{
    (void)fld;
    ++*(size_t *)ud;
    return 0;
}

static void table_only_decoding(void **state)
{
    (void)state;
    enum { NAMELEN = 4000, REPS = 2000 };
    static uint8_t b[NAMELEN + 16];
    gw_hpack_dec_t d[2];
    /* an entry with a 4000-byte name enters both decoders' tables (index 62) */
    size_t n = 0;
    b[n++] = 0x40;
    b[n++] = 0x7f; /* name length 4000 = 127 + 3873 */
    b[n++] = 0x80 | (3873 & 0x7f);
    b[n++] = (uint8_t)(3873 >> 7);
    memset(b + n, 'n', NAMELEN);
    n += NAMELEN;
    b[n++] = 0x01;
    b[n++] = 'v';
    for (int k = 0; k < 2; k++) {
        gw_hpack_dec_init(&d[k], 8192);
        gw_hpack_dec_begin(&d[k], 65536);
        assert_int_equal(gw_hpack_decode(&d[k], b, n, 1, NULL, NULL), n);
        assert_int_equal(gw_hpack_table_len(&d[k].t), 1);
        gw_hpack_dec_trim(&d[k]);
    }
    /* REPS literals without indexing naming it (empty value), a never-indexed one with a
     * Huffman value, a new Huffman name and value, and the entry itself (indexed) */
    static uint8_t blk[REPS * 3 + 64];
    size_t m = 0;
    for (int i = 0; i < REPS; i++) {
        blk[m++] = 0x0f; /* §6.2.2, name index 62 = 15 + 47 */
        blk[m++] = 0x2f;
        blk[m++] = 0x00;
    }
    const uint8_t v[] = "some value";
    size_t hl = gw_hpack_huff_encoded_len(v, sizeof(v) - 1);
    blk[m++] = 0x1f; /* §6.2.3, name index 62 */
    blk[m++] = 0x2f;
    blk[m++] = (uint8_t)(0x80 | hl);
    m += gw_hpack_huff_encode(v, sizeof(v) - 1, blk + m);
    blk[m++] = 0x00; /* §6.2.2, new name */
    blk[m++] = (uint8_t)(0x80 | hl);
    m += gw_hpack_huff_encode(v, sizeof(v) - 1, blk + m);
    blk[m++] = (uint8_t)(0x80 | hl);
    m += gw_hpack_huff_encode(v, sizeof(v) - 1, blk + m);
    blk[m++] = 0x80 | 62;
    /* d[0] reports the fields, d[1] has no callback: nothing allocated, no string buffer */
    fields_t f = {0};
    gw_hpack_dec_begin(&d[0], SIZE_MAX);
    size_t seen = 0;
    assert_int_equal(gw_hpack_decode(&d[0], blk, m, 1, count, &seen), m);
    assert_int_equal(seen, REPS + 3);
    gw_hpack_dec_begin(&d[1], SIZE_MAX);
    gw_alloc_count_start();
    assert_int_equal(gw_hpack_decode(&d[1], blk, m, 1, NULL, NULL), m);
    long long allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    assert_int_equal(allocs, 0);
    assert_null(d[1].bufs);
    assert_int_equal(gw_hpack_dec_end(&d[1]), 0);
    /* the list size is the same as when decoding: a limit still holds */
    assert_int_equal(d[1].list_size, d[0].list_size);
    assert_int_equal(d[1].fields, d[0].fields);
    gw_hpack_dec_begin(&d[1], (size_t)(REPS * (NAMELEN + 32)));
    assert_int_equal(gw_hpack_decode(&d[1], blk, m, 1, NULL, NULL), m);
    assert_int_equal(gw_hpack_dec_end(&d[1]), GW_E_LIMIT);
    assert_null(d[1].bufs);
    /* past max_list_size with a callback: the same, once the list has overflowed */
    gw_hpack_dec_begin(&d[0], 100);
    gw_hpack_dec_trim(&d[0]);
    memset(&f, 0, sizeof(f));
    gw_alloc_count_start();
    assert_int_equal(gw_hpack_decode(&d[0], blk, m, 1, collect, &f), m);
    allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    assert_int_equal(allocs, 0);
    assert_int_equal(f.len, 0);
    assert_int_equal(gw_hpack_dec_end(&d[0]), GW_E_LIMIT);
    /* without a callback the table is still updated: a literal with incremental indexing
     * (Huffman value) enters it, and the next block names it */
    m = 0;
    blk[m++] = 0x40;
    blk[m++] = 0x01;
    blk[m++] = 'k';
    blk[m++] = (uint8_t)(0x80 | hl);
    m += gw_hpack_huff_encode(v, sizeof(v) - 1, blk + m);
    gw_hpack_dec_begin(&d[1], 65536);
    assert_int_equal(gw_hpack_decode(&d[1], blk, m, 1, NULL, NULL), m);
    check_entry(&d[1].t, 0, "k", "some value");
    assert_int_equal(gw_hpack_table_len(&d[1].t), 2);
    assert_int_equal(decode_hex(&d[1], "be", &f), 0);
    assert_string_equal(f.text, "k: some value\n");
    /* errors in a literal nobody reads are still errors (§5.2), and a literal cut at the end
     * of a fragment is left unconsumed */
    static const char *const bad[] = {
        "0081ff00",       /* EOS in a Huffman name */
        "0001618118",     /* bad Huffman padding in a value */
        "1f3100",         /* name index 64: past the table */
        "000a637573746f", /* truncated literal with final=1 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t x[32];
        size_t xn = unhex(bad[i], x);
        gw_hpack_dec_begin(&d[1], 65536);
        ssize_t rv = gw_hpack_decode(&d[1], x, xn, 1, NULL, NULL);
        if (rv != GW_E_COMPRESSION)
            fail_msg("%s: got %zd", bad[i], rv);
    }
    uint8_t x[32];
    size_t xn = unhex("82 0f2f 03 6162", x); /* :method GET, then a cut literal */
    gw_hpack_dec_begin(&d[1], 65536);
    assert_int_equal(gw_hpack_decode(&d[1], x, xn, 0, NULL, NULL), 1);
    assert_int_equal(gw_hpack_dec_end(&d[1]), GW_E_COMPRESSION);
    gw_hpack_dec_free(&d[0]);
    gw_hpack_dec_free(&d[1]);
}

static int refuse(void *ud, const gw_hpack_field_t *f)
{
    (void)ud, (void)f;
    return GW_E_STREAM;
}

static void callback_error_aborts(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    uint8_t b[64];
    size_t n = unhex(c3_req[0], b);
    gw_hpack_dec_begin(&d, 65536);
    assert_int_equal(gw_hpack_decode(&d, b, n, 1, refuse, NULL), GW_E_STREAM);
    gw_hpack_dec_free(&d);
}

static void sensitive_never_indexed(void **state)
{
    (void)state;
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    const char *names[] = {"authorization", "cookie", "set-cookie", "proxy-authorization"};
    for (int i = 0; i < 4; i++) {
        gw_hpack_field_t f = {gw_slice_str(names[i]), GW_SLICE_LIT("secret-value"), 0};
        gw_bytes_t out;
        gw_bytes_init(&out, 0);
        assert_int_equal(gw_hpack_encode(&e, &f, 1, &out), 0);
        assert_int_equal(out.base[0] & 0xf0, 0x10); /* §6.2.3 never indexed */
        gw_bytes_free(&out);
    }
    gw_hpack_field_t flagged = {GW_SLICE_LIT("x-token"), GW_SLICE_LIT("t"), GW_HPACK_F_NEVER_INDEX};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    assert_int_equal(gw_hpack_encode(&e, &flagged, 1, &out), 0);
    assert_int_equal(out.base[0], 0x10);
    assert_int_equal(gw_hpack_table_len(&e.t), 0);
    /* the decoder reports the flag so a proxy keeps it never-indexed */
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    fields_t f;
    assert_int_equal(decode_block(&d, out.base, out.len, &f), 0);
    assert_int_equal(f.flags_seen, GW_HPACK_F_NEVER_INDEX);
    assert_string_equal(f.text, "x-token: t\n");
    gw_hpack_dec_free(&d);
    gw_bytes_free(&out);
    gw_hpack_enc_free(&e);
}

/* The encoder searches its dynamic table by hash: many entries of one name and values of one
 * length (a date per second) must each still be found, at the right index, as the table
 * evicts; a name alone is reused as a name index. Decoded back by our decoder. */
static void encoder_finds_entries_among_many(void **state)
{
    (void)state;
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    char vals[120][32];
    for (int i = 0; i < 120; i++)
        snprintf(vals[i], sizeof(vals[i]), "Thu, 03 Dec 2026 20:%02d:%02d GMT", i / 60, i % 60);
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 120; k++) {
            /* round 0 adds a date and a name-only entry per value (65 + 72 bytes): the last 29
             * pairs fit in 4096. Round 1 asks for the dates newest first: those 29 are one
             * byte each (nothing is inserted meanwhile), the older ones literals again. */
            int i = round ? 119 - k : k;
            gw_hpack_field_t f[] = {{GW_SLICE_LIT("date"), gw_slice_str(vals[i]), 0},
                                    {GW_SLICE_LIT("x-name-only"), gw_slice_str(vals[i]), 0}};
            out.len = 0;
            assert_int_equal(gw_hpack_encode(&e, f, round ? 1 : 2, &out), 0);
            if (round == 1)
                assert_true(i >= 91 ? out.len == 1 : out.len > 1);
            expect_fields(&d, &out, f, round ? 1 : 2);
        }
    }
    gw_bytes_free(&out);
    gw_hpack_dec_free(&d);
    gw_hpack_enc_free(&e);
}

/* The §5.1 integer with an n-bit prefix at b[*p]; *p moves past it. */
static size_t int_at(const uint8_t *b, size_t *p, unsigned n)
{
    size_t max = (1u << n) - 1, v = b[(*p)++] & max;
    if (v == max) {
        unsigned shift = 0;
        uint8_t c;
        do {
            c = b[(*p)++];
            v += (size_t)(c & 0x7f) << shift;
            shift += 7;
        } while (c & 0x80);
    }
    return v;
}

/* The representation of each field of a block (§6): 'i' indexed, 'a' literal added to the
 * table (incremental indexing), 'l' literal without indexing, 'n' never indexed; size updates
 * skipped. */
static void kinds_of(const gw_bytes_t *block, char *out)
{
    size_t p = 0;
    while (p < block->len) {
        uint8_t b = block->base[p];
        if (b & 0x80) {
            (void)int_at(block->base, &p, 7);
            *out++ = 'i';
            continue;
        }
        if ((b & 0xe0) == 0x20) {
            (void)int_at(block->base, &p, 5);
            continue;
        }
        unsigned prefix = (b & 0xc0) == 0x40 ? 6 : 4;
        *out++ = prefix == 6 ? 'a' : (b & 0x10) ? 'n' : 'l';
        if (!int_at(block->base, &p, prefix))
            p += int_at(block->base, &p, 7); /* the name, a literal */
        p += int_at(block->base, &p, 7);     /* the value */
    }
    *out = 0;
}

/* Which response fields enter the dynamic table: all but age and a request id, whose values
 * are new on nearly every answer (literals without indexing every time), and set-cookie,
 * never indexed (RFC 7541 §7.1.3); content-length, etag and last-modified are indexed (a
 * connection that gets the same resource again gets them in one byte each; not indexing them
 * was measured and not kept: docs/bench.md). The second answer names each indexed field in
 * one byte. Both blocks decode, through our decoder, to the fields given. */
static void response_fields_indexed_unless_volatile_or_sensitive(void **state)
{
    (void)state;
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    const gw_hpack_field_t resp[] = {
        {GW_SLICE_LIT(":status"), GW_SLICE_LIT("206"), 0},
        {GW_SLICE_LIT("server"), GW_SLICE_LIT("nginx/1.22.1"), 0},
        {GW_SLICE_LIT("date"), GW_SLICE_LIT("Thu, 03 Dec 2026 20:10:00 GMT"), 0},
        {GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/html; charset=utf-8"), 0},
        {GW_SLICE_LIT("last-modified"), GW_SLICE_LIT("Wed, 02 Dec 2026 08:00:00 GMT"), 0},
        {GW_SLICE_LIT("etag"), GW_SLICE_LIT("\"6930a1b2-400\""), 0},
        {GW_SLICE_LIT("accept-ranges"), GW_SLICE_LIT("bytes"), 0},
        {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=60"), 0},
        {GW_SLICE_LIT("expires"), GW_SLICE_LIT("Thu, 03 Dec 2026 20:11:00 GMT"), 0},
        {GW_SLICE_LIT("vary"), GW_SLICE_LIT("accept-encoding"), 0},
        {GW_SLICE_LIT("content-range"), GW_SLICE_LIT("bytes 0-1023/4096"), 0},
        {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("1024"), 0},
        {GW_SLICE_LIT("age"), GW_SLICE_LIT("17"), 0},
        {GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("id=42; Secure"), 0},
        {GW_SLICE_LIT("x-request-id"), GW_SLICE_LIT("0123456789abcdef"), 0},
    };
    size_t n = sizeof(resp) / sizeof(resp[0]);
    gw_bytes_t first, second;
    gw_bytes_init(&first, 0);
    gw_bytes_init(&second, 0);
    assert_int_equal(gw_hpack_encode(&e, resp, n, &first), 0);
    assert_int_equal(gw_hpack_encode(&e, resp, n, &second), 0);
    char k1[32], k2[32];
    kinds_of(&first, k1);
    kinds_of(&second, k2);
    /* :status 206 is static (index 12) */
    assert_string_equal(k1, "iaaaaaaaaaaalnl");
    assert_string_equal(k2, "iiiiiiiiiiiilnl");
    /* the table holds the eleven others, newest first */
    static const char *const kept[] = {"content-length", "content-range", "vary",  "expires",
                                       "cache-control",  "accept-ranges", "etag",  "last-modified",
                                       "content-type",   "date",          "server"};
    assert_int_equal(gw_hpack_table_len(&e.t), 11);
    for (size_t i = 0; i < 11; i++) {
        gw_hpack_entry_t te = entry_at(&e.t, i);
        assert_int_equal(te.name_len, strlen(kept[i]));
        assert_memory_equal(te.data, kept[i], te.name_len);
    }
    /* age's literal names its static entry (two bytes: index 21 = 15 + 6, a 4-bit prefix) */
    assert_int_equal(second.base[12], 0x0f);
    assert_int_equal(second.base[13], 6);
    expect_fields(&d, &first, resp, n);
    expect_fields(&d, &second, resp, n);
    assert_int_equal(gw_hpack_table_len(&d.t), 11);
    gw_bytes_free(&first);
    gw_bytes_free(&second);
    gw_hpack_dec_free(&d);
    gw_hpack_enc_free(&e);
}

/* The encoder finds dynamic entries through a hash index kept next to the ring: against a
 * walk of the ring (gw_hpack_table_get, newest first), every field with an equal entry must
 * come out indexed at the walk's first match, and every other field as a literal, through
 * many entries of one name, evictions, table size changes (down to 0 and up) and the ring
 * growing past 16 slots. A decoder follows every block and must hold the same table. */
static void encoder_index_matches_ring_walk(void **state)
{
    (void)state;
    static const char *const names[] = {"x-a", "x-b", "date", "etag", "x-long-header-name"};
    static const uint32_t sizes[] = {4096, 256, 0, 1024, 8192, 100, 8192};
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 8192);
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 8192);
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    uint32_t rnd = 12345;
    size_t indexed = 0, literal = 0, max_len = 0;
    for (size_t round = 0; round < sizeof(sizes) / sizeof(sizes[0]); round++) {
        gw_hpack_enc_set_peer_max(&e, sizes[round]);
        for (int k = 0; k < 600; k++) {
            rnd ^= rnd << 13;
            rnd ^= rnd >> 17;
            rnd ^= rnd << 5;
            char val[16];
            snprintf(val, sizeof(val), "v%03u", (unsigned)(rnd >> 8) % 40);
            gw_hpack_field_t f = {gw_slice_str(names[(rnd >> 4) % 5]), gw_slice_str(val), 0};
            if ((rnd & 15) == 0)
                f = (gw_hpack_field_t){GW_SLICE_LIT(":status"), GW_SLICE_LIT("200"), 0};
            /* what a walk of the ring finds: the newest equal entry */
            size_t want = 0;
            for (size_t i = 0; !want && i < gw_hpack_table_len(&e.t); i++) {
                gw_hpack_entry_t te = entry_at(&e.t, i), *t = &te;
                if (t->name_len == f.name.len && t->value_len == f.value.len &&
                    !memcmp(t->data, f.name.base, f.name.len) &&
                    !memcmp(t->data + f.name.len, f.value.base, f.value.len))
                    want = 62 + i;
            }
            if (f.name.base[0] == ':')
                want = 8; /* :status 200 is static */
            out.len = 0;
            assert_int_equal(gw_hpack_encode(&e, &f, 1, &out), 0);
            size_t p = 0;
            while ((out.base[p] & 0xe0) == 0x20) /* size updates open the block */
                (void)int_at(out.base, &p, 5);
            if (want) {
                assert_true(out.base[p] & 0x80);
                assert_int_equal(int_at(out.base, &p, 7), want);
                indexed++;
            } else {
                assert_false(out.base[p] & 0x80);
                literal++;
            }
            expect_fields(&d, &out, &f, 1);
            /* the decoder starts at 8192 where the encoder starts at the peer's default 4096
             * (as a session's does): it may keep older entries the encoder has evicted */
            assert_true(gw_hpack_table_len(&d.t) >= gw_hpack_table_len(&e.t));
            if (gw_hpack_table_len(&e.t) > max_len)
                max_len = gw_hpack_table_len(&e.t);
        }
        for (size_t i = 0; i < gw_hpack_table_len(&e.t); i++) {
            gw_hpack_entry_t ae = entry_at(&e.t, i), be = entry_at(&d.t, i), *a = &ae, *b = &be;
            assert_int_equal(a->name_len + a->value_len, b->name_len + b->value_len);
            assert_memory_equal(a->data, b->data, a->name_len + a->value_len);
        }
    }
    print_message("indexed %zu, literals %zu, up to %zu entries\n", indexed, literal, max_len);
    assert_true(indexed > 1000 && literal > 1000);
    assert_true(max_len > 64); /* the ring grew (and re-linked) at least three times */
    gw_bytes_free(&out);
    gw_hpack_dec_free(&d);
    gw_hpack_enc_free(&e);
}

/* A block's fields are looked for first in the slot after the last one found (and a block's
 * first where the last block's run started), before the bucket walk: the bytes must be those
 * of the walk alone. Reference: a second encoder given the same fields one block each, its run
 * forgotten before each (so it only walks), whose blocks put end to end must equal the block
 * of the first, through responses that repeat in order, change one field (a new date, an
 * etag), reorder, skip fields, carry never-indexed, sensitive and volatile fields, dynamic
 * :status values, entries evicted under the run, the ring growing, and table size changes. */
static void encoder_run_matches_walk(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {4096, 256, 0, 1024, 8192, 4096};
    gw_hpack_enc_t e, r;
    gw_hpack_enc_init(&e, 8192);
    gw_hpack_enc_init(&r, 8192);
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 8192);
    gw_bytes_t out, ref;
    gw_bytes_init(&out, 0);
    gw_bytes_init(&ref, 0);
    static const char *const statuses[] = {"200", "200", "200", "404", "299", "206"};
    static const char *const types[] = {"application/octet-stream", "text/html"};
    char dates[8][32], etags[8][16], lens[4][8], big[200];
    for (int i = 0; i < 8; i++) {
        snprintf(dates[i], sizeof(dates[i]), "Mon, 07 Dec 2026 10:00:%02d GMT", i);
        snprintf(etags[i], sizeof(etags[i]), "\"6930a1b2-%d\"", i);
    }
    for (int i = 0; i < 4; i++)
        snprintf(lens[i], sizeof(lens[i]), "%d", 1024 << i);
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    uint32_t rnd = 4242;
    size_t runs = 0, blocks = 0;
    for (size_t round = 0; round < sizeof(sizes) / sizeof(sizes[0]); round++) {
        gw_hpack_enc_set_peer_max(&e, sizes[round]);
        gw_hpack_enc_set_peer_max(&r, sizes[round]);
        for (int k = 0; k < 400; k++) {
            rnd ^= rnd << 13;
            rnd ^= rnd >> 17;
            rnd ^= rnd << 5;
            gw_hpack_field_t f[12];
            size_t n = 0;
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT(":status"),
                                        gw_slice_str(statuses[(rnd >> 3) % 6]), 0};
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("server"), GW_SLICE_LIT("nginx"), 0};
            /* the date changes every 8th block, the etag now and then */
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("date"), gw_slice_str(dates[(k / 8) % 8]), 0};
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("content-type"),
                                        gw_slice_str(types[(rnd >> 6) % 11 == 0]), 0};
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("content-length"),
                                        gw_slice_str(lens[(rnd >> 9) % 7 == 0 ? 1 : 0]), 0};
            if ((rnd >> 12) % 5)
                f[n++] =
                    (gw_hpack_field_t){GW_SLICE_LIT("etag"),
                                       gw_slice_str(etags[(rnd >> 15) % 13 == 0 ? k % 8 : 0]), 0};
            f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("accept-ranges"), GW_SLICE_LIT("bytes"), 0};
            if ((rnd >> 18) % 9 == 0)
                f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("a=1"), 0};
            if ((rnd >> 20) % 7 == 0)
                f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("server"), GW_SLICE_LIT("nginx"),
                                            GW_HPACK_F_NEVER_INDEX};
            if ((rnd >> 22) % 6 == 0)
                f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("age"), GW_SLICE_LIT("3"), 0};
            if ((rnd >> 24) % 10 == 0) /* evicts what the run stands on */
                f[n++] = (gw_hpack_field_t){GW_SLICE_LIT("x-big"), gw_slice_str(big), 0};
            if ((rnd >> 27) % 8 == 0) { /* the same fields in another order */
                gw_hpack_field_t t = f[1];
                f[1] = f[n - 1];
                f[n - 1] = t;
            }
            if ((rnd >> 29) == 0 && n > 3) /* a field left out */
                f[2] = f[--n];
            out.len = 0;
            assert_int_equal(gw_hpack_encode(&e, f, n, &out), 0);
            ref.len = 0;
            for (size_t i = 0; i < n; i++) {
                r.run_start = 0;
                assert_int_equal(gw_hpack_encode(&r, &f[i], 1, &ref), 0);
            }
            assert_int_equal(out.len, ref.len);
            assert_memory_equal(out.base, ref.base, out.len);
            runs += e.run_start != 0;
            blocks++;
            expect_fields(&d, &out, f, n);
        }
    }
    assert_true(runs > blocks / 2);
    gw_bytes_free(&out);
    gw_bytes_free(&ref);
    gw_hpack_dec_free(&d);
    gw_hpack_enc_free(&e);
    gw_hpack_enc_free(&r);
}

/* out's cap is met exactly: a block that fits to the byte is written, one byte less is
 * GW_E_LIMIT with out as it was (the encoder reserves generously, then exactly near the cap). */
static void encoder_cap_is_exact(void **state)
{
    (void)state;
    const gw_hpack_field_t f[] = {{GW_SLICE_LIT(":status"), GW_SLICE_LIT("200"), 0},
                                  {GW_SLICE_LIT("x-custom"), GW_SLICE_LIT("some value"), 0},
                                  {GW_SLICE_LIT("server"), GW_SLICE_LIT("nginx/1.22.1"), 0}};
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    gw_bytes_t free_out;
    gw_bytes_init(&free_out, 0);
    assert_int_equal(gw_hpack_encode(&e, f, 3, &free_out), 0);
    size_t need = free_out.len;
    gw_hpack_enc_free(&e);
    for (size_t cap = need - 1; cap <= need; cap++) {
        gw_hpack_enc_init(&e, 4096);
        gw_bytes_t out;
        gw_bytes_init(&out, cap);
        int rv = gw_hpack_encode(&e, f, 3, &out);
        GW_EXPECT_BOUNDED_WRITE(rv, out, cap, free_out.base, need);
        gw_bytes_free(&out);
        gw_hpack_enc_free(&e);
    }
    gw_bytes_free(&free_out);
}

static void table_size_changes(void **state)
{
    (void)state;
    gw_hpack_enc_t e;
    gw_hpack_enc_init(&e, 4096);
    gw_hpack_field_t f = {GW_SLICE_LIT("x-a"), GW_SLICE_LIT("b"), 0};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    gw_hpack_encode(&e, &f, 1, &out);
    assert_int_equal(gw_hpack_table_len(&e.t), 1);
    /* peer lowers to 0 then raises to 2048 before our next block: 0 then 2048 (§4.2) */
    gw_hpack_enc_set_peer_max(&e, 0);
    assert_int_equal(gw_hpack_table_len(&e.t), 0);
    gw_hpack_enc_set_peer_max(&e, 2048);
    out.len = 0;
    assert_int_equal(gw_hpack_encode(&e, &f, 1, &out), 0);
    assert_int_equal(out.base[0], 0x20); /* size update 0 */
    assert_int_equal(out.base[1], 0x3f); /* size update 2048: 3f e1 0f */
    assert_int_equal(out.base[2], 0xe1);
    assert_int_equal(out.base[3], 0x0f);
    /* a decoder that advertised 4096 accepts it and follows */
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    fields_t got = {0};
    gw_hpack_dec_begin(&d, 65536);
    assert_int_equal(gw_hpack_decode(&d, out.base, out.len, 1, collect, &got), out.len);
    assert_int_equal(d.t.max, 2048);
    assert_string_equal(got.text, "x-a: b\n");
    /* our own SETTINGS lowered to 100: the table shrinks and a larger update is refused */
    gw_hpack_dec_set_max_table_size(&d, 100);
    assert_true(d.t.max <= 100);
    assert_int_equal(decode_hex(&d, "3f45", &got), 0);                /* 31 + 69 = 100: allowed */
    assert_int_equal(decode_hex(&d, "3f46", &got), GW_E_COMPRESSION); /* 101: refused */
    gw_bytes_free(&out);
    gw_hpack_dec_free(&d);
    gw_hpack_enc_free(&e);
}

static void eviction_and_oversized_entry(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 100);
    fields_t f;
    /* 3 entries of 10+13+32 = 55 bytes: each insertion evicts the previous */
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", &f),
            0);
    assert_int_equal(gw_hpack_table_len(&d.t), 1);
    assert_int_equal(gw_hpack_table_size(&d.t), 55);
    /* an entry larger than the table empties it (§4.4) */
    char hex[512] = "407f00";
    for (int i = 0; i < 127; i++)
        strcat(hex, "61");
    strcat(hex, "00");
    assert_int_equal(decode_hex(&d, hex, &f), 0);
    assert_int_equal(gw_hpack_table_len(&d.t), 0);
    assert_int_equal(gw_hpack_table_size(&d.t), 0);
    gw_hpack_dec_free(&d);
}

/* A literal whose name is the index of the entry it evicts (§4.4: the name is read before the
 * eviction makes room), over and over with values of changing lengths: the table's bytes are
 * moved to the front of their block and the block rebuilt on the way, and every entry must
 * still read back as sent (ASan reports a name read from a freed block). */
static void name_of_evicted_entry_survives_moves(void **state)
{
    (void)state;
    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 100);
    fields_t f;
    assert_int_equal(decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0161", &f), 0);
    char want[64], hex[256];
    for (int i = 0; i < 200; i++) {
        size_t vl = 1 + (size_t)(i * 7) % 50;
        int n = snprintf(hex, sizeof(hex), "7e%02zx", vl); /* §6.2.1, name index 62 */
        for (size_t k = 0; k < vl; k++) {
            want[k] = (char)('a' + (i + (int)k) % 26);
            n += snprintf(hex + n, sizeof(hex) - (size_t)n, "%02x", (unsigned)want[k]);
        }
        want[vl] = 0;
        assert_int_equal(decode_hex(&d, hex, &f), 0);
        check_entry(&d.t, 0, "custom-key", want);
        size_t size = 0;
        for (size_t k = 0; k < gw_hpack_table_len(&d.t); k++)
            size += entry_at(&d.t, k).name_len + entry_at(&d.t, k).value_len + 32;
        assert_int_equal(gw_hpack_table_size(&d.t), size);
        assert_true(size <= 100);
    }
    gw_hpack_dec_free(&d);
}

static void alloc_failure_sweep(void **state)
{
    (void)state;
    int done = 0;
    for (unsigned long n = 1; n < 200 && !done; n++) {
        gw_hpack_dec_t d;
        gw_hpack_enc_t e;
        gw_hpack_dec_init(&d, 256);
        gw_hpack_enc_init(&e, 256);
        gw_alloc_fail_after(n);
        int rv = 0;
        fields_t f;
        for (int i = 0; i < 3 && rv == 0; i++)
            rv = decode_hex(&d, c6_resp[i], &f);
        gw_bytes_t out;
        gw_bytes_init(&out, 0);
        gw_hpack_field_t fl[2] = {{GW_SLICE_LIT("x-a"), GW_SLICE_LIT("b"), 0},
                                  {GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate"), 0}};
        if (rv == 0)
            rv = gw_hpack_encode(&e, fl, 2, &out);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (hit)
            assert_int_equal(rv, GW_E_NOMEM);
        else {
            assert_int_equal(rv, 0);
            done = 1;
        }
        gw_bytes_free(&out);
        gw_hpack_dec_free(&d);
        gw_hpack_enc_free(&e);
    }
    assert_true(done);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(c1_integers),
    cmocka_unit_test(c2_literals),
    cmocka_unit_test(c3_requests_plain),
    cmocka_unit_test(c4_requests_huffman),
    cmocka_unit_test(c4_encoder_reproduces_bytes),
    cmocka_unit_test(c5_responses_plain),
    cmocka_unit_test(c6_responses_huffman),
    cmocka_unit_test(split_at_every_cut),
    cmocka_unit_test(huffman_all_bytes_round_trip),
    cmocka_unit_test(huffman_errors),
    cmocka_unit_test(huffman_shortest_codes_fit),
    cmocka_unit_test(decoding_errors),
    cmocka_unit_test(list_size_overflow_keeps_table_in_sync),
    cmocka_unit_test(callback_error_aborts),
    cmocka_unit_test(sensitive_never_indexed),
    cmocka_unit_test(response_fields_indexed_unless_volatile_or_sensitive),
    cmocka_unit_test(encoder_finds_entries_among_many),
    cmocka_unit_test(encoder_index_matches_ring_walk),
    cmocka_unit_test(encoder_run_matches_walk),
    cmocka_unit_test(encoder_cap_is_exact),
    cmocka_unit_test(table_size_changes),
    cmocka_unit_test(eviction_and_oversized_entry),
    cmocka_unit_test(name_of_evicted_entry_survives_moves),
    cmocka_unit_test(alloc_failure_sweep),
    cmocka_unit_test(table_only_decoding),
    cmocka_unit_test(shared_string_buffers),
};

GW_TEST_MAIN(tests)
