/* Unit tests of proxy/compress.c: Accept-Encoding negotiation (RFC 9110 §12.5.3), the rules
 * that allow compression, the head rewrite, and the compressors (gzip, br, zstd:
 * decoded back). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "config/config.h"
#include "gw_version.h"
#include "proxy/proxy_internal.h"
#if GW_HAVE_BROTLI
#include <brotli/decode.h>
#endif
#if GW_HAVE_ZSTD
#include <zstd.h>
#endif

#define ALL ((1u << GW_ZC_GZIP) | (1u << GW_ZC_BR) | (1u << GW_ZC_ZSTD))
#define GZ (1u << GW_ZC_GZIP)

static gw_zcoding_t pick(const char *ae, unsigned avail)
{
    gw_slice_t v = gw_slice_str(ae);
    return gw_proxy__choose_coding(&v, 1, avail);
}

static void negotiation(void **state)
{
    (void)state;
    assert_int_equal(gw_proxy__choose_coding(NULL, 0, ALL), GW_ZC_NONE);
    assert_int_equal(pick("gzip", ALL), GW_ZC_GZIP);
    assert_int_equal(pick("gzip, deflate, br, zstd", ALL), GW_ZC_ZSTD); /* equal q: zstd first */
    assert_int_equal(pick("gzip, deflate, br, zstd", GZ), GW_ZC_GZIP);
    assert_int_equal(pick("gzip, br", ALL), GW_ZC_BR);
    assert_int_equal(pick("gzip;q=1.0, br;q=0.5", ALL), GW_ZC_GZIP); /* q before preference */
    assert_int_equal(pick("gzip;q=0", ALL), GW_ZC_NONE);
    assert_int_equal(pick("gzip;q=0.000", GZ), GW_ZC_NONE);
    assert_int_equal(pick("*", GZ), GW_ZC_GZIP);
    assert_int_equal(pick("*;q=0, identity", GZ), GW_ZC_NONE);
    assert_int_equal(pick("*;q=0.5, gzip;q=0", GZ), GW_ZC_NONE); /* its own entry wins */
    assert_int_equal(pick("identity", GZ), GW_ZC_NONE);
    assert_int_equal(pick("identity;q=0, gzip;q=0.1", GZ), GW_ZC_GZIP);
    assert_int_equal(pick("GZIP ; Q=0.8", GZ), GW_ZC_GZIP); /* case-insensitive */
    assert_int_equal(pick("gzip;q=2", GZ), GW_ZC_NONE);     /* an invalid weight */
    assert_int_equal(pick("gzip;q=abc", GZ), GW_ZC_NONE);
    assert_int_equal(pick(" , ,gzip", GZ), GW_ZC_GZIP);
    assert_int_equal(pick("x-gzip", GZ), GW_ZC_NONE);
    gw_slice_t two[] = {GW_SLICE_LIT("br;q=0"), GW_SLICE_LIT("gzip")}; /* two fields */
    assert_int_equal(gw_proxy__choose_coding(two, 2, ALL), GW_ZC_GZIP);
}

/* 1 MiB of bytes that compress poorly (a multiplicative hash of their offset). */
enum { NOISE_LEN = 1 << 20 };
static const uint8_t *noise(void)
{
    static uint8_t in[NOISE_LEN];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)((i * 2654435761u) >> 13);
    return in;
}

/* Field f is name: value (NULL: either not checked). */
static void expect_field(const gw_field_t *f, const char *name, const char *value)
{
    if (name)
        assert_true(gw_slice_eq(f->name, gw_slice_str(name)));
    if (value)
        assert_true(gw_slice_eq(f->value, gw_slice_str(value)));
}

/* The documented compression settings (the config loader's defaults) over three types, with
 * room for 8 compressing streams. */
static gw_cfg_compression_t zcfg(void)
{
    static char *types[] = {"text/*", "application/json", "+xml"};
    static const char yaml[] = "listen: [{address: 127.0.0.1:8080}]\n"
                               "upstreams: {u: {servers: [127.0.0.1:9001]}}\n"
                               "routes: [{path: /, upstream: u}]\n";
    gw_config_t *c;
    gw_config_errors_t e = {0};
    assert_int_equal(gw_config_load_string("t.yaml", yaml, strlen(yaml), &c, &e), 0);
    gw_cfg_compression_t z = c->compression;
    gw_config_del(c);
    z.types = types;
    z.types_len = 3;
    z.max_concurrent = 8;
    return z;
}

/* A stored Content-Encoding goes only to a client whose Accept-Encoding takes every coding of
 * it (q above 0); no Accept-Encoding takes any (RFC 9110 §12.5.3). */
static int accepted(const char *ae, const char *ce)
{
    gw_field_t f[] = {{GW_SLICE_LIT("accept-encoding"), gw_slice_str(ae ? ae : "")}};
    gw_req_head_t h = {.method = GW_SLICE_LIT("GET"), .fields = f, .fields_len = ae ? 1 : 0};
    return gw_proxy__codings_accepted(&h, gw_slice_str(ce));
}

static void stored_coding_accepted(void **state)
{
    (void)state;
    assert_true(accepted("gzip, deflate", "gzip"));
    assert_true(accepted("GZIP;q=0.5", "gzip"));
    assert_true(accepted("*", "br"));
    assert_true(accepted("br", "identity"));
    assert_true(accepted(NULL, "identity"));
    assert_true(accepted(NULL, "gzip"));
    assert_false(accepted("identity", "gzip"));
    assert_false(accepted("br", "gzip"));
    assert_false(accepted("gzip;q=0, br", "gzip"));
    assert_false(accepted("*;q=0", "gzip"));
    assert_false(accepted("gzip", "gzip, br")); /* br applied after gzip: both needed */
    assert_true(accepted("gzip, br", "gzip, br"));
}

static void rules(void **state)
{
    (void)state;
    gw_cfg_compression_t z = zcfg();
    assert_true(gw_proxy__type_listed(&z, GW_SLICE_LIT("text/html; charset=utf-8")));
    assert_true(gw_proxy__type_listed(&z, GW_SLICE_LIT("TEXT/CSS")));
    assert_true(gw_proxy__type_listed(&z, GW_SLICE_LIT("application/json")));
    assert_true(gw_proxy__type_listed(&z, GW_SLICE_LIT("image/svg+xml")));
    assert_false(gw_proxy__type_listed(&z, GW_SLICE_LIT("application/jsonx")));
    assert_false(gw_proxy__type_listed(&z, GW_SLICE_LIT("image/png")));
    assert_false(gw_proxy__type_listed(&z, GW_SLICE_LIT("")));
    gw_field_t req_f[] = {{GW_SLICE_LIT("accept-encoding"), GW_SLICE_LIT("gzip")}};
    gw_req_head_t get = {.method = GW_SLICE_LIT("GET"), .fields = req_f, .fields_len = 1};
    gw_req_head_t head = get;
    head.method = GW_SLICE_LIT("HEAD");
    gw_field_t rng[] = {{GW_SLICE_LIT("range"), GW_SLICE_LIT("bytes=0-1")}};
    gw_req_head_t ranged = get;
    ranged.fields = rng;
    gw_field_t html[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/html")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, html, 1, 1000, GW_ZC_GZIP), GW_ZSKIP_NONE);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, html, 1, -1, GW_ZC_GZIP), GW_ZSKIP_NONE);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 206, html, 1, 1000, GW_ZC_GZIP), GW_ZSKIP_STATUS);
    assert_int_equal(gw_proxy__zdecide(&z, &head, 200, html, 1, 1000, GW_ZC_GZIP), GW_ZSKIP_STATUS);
    assert_int_equal(gw_proxy__zdecide(&z, &ranged, 200, html, 1, 1000, GW_ZC_GZIP),
                     GW_ZSKIP_RANGE);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, html, 1, 255, GW_ZC_GZIP), GW_ZSKIP_SMALL);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, html, 1, 256, GW_ZC_GZIP), GW_ZSKIP_NONE);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, html, 1, 1000, GW_ZC_NONE), GW_ZSKIP_CLIENT);
    gw_field_t enc[] = {html[0], {GW_SLICE_LIT("content-encoding"), GW_SLICE_LIT("br")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, enc, 2, 1000, GW_ZC_GZIP), GW_ZSKIP_ENCODED);
    gw_field_t nt[] = {html[0],
                       {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=5, No-Transform")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, nt, 2, 1000, GW_ZC_GZIP),
                     GW_ZSKIP_NO_TRANSFORM);
    gw_field_t ck[] = {html[0], {GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("a=b")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, ck, 2, 1000, GW_ZC_GZIP), GW_ZSKIP_PRIVATE);
    gw_field_t pv[] = {html[0], {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("private")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, pv, 2, 1000, GW_ZC_GZIP), GW_ZSKIP_PRIVATE);
    z.skip_private = 0;
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, pv, 2, 1000, GW_ZC_GZIP), GW_ZSKIP_NONE);
    gw_field_t png[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("image/png")}};
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, png, 1, 1000, GW_ZC_GZIP), GW_ZSKIP_TYPE);
    assert_int_equal(gw_proxy__zdecide(&z, &get, 200, NULL, 0, 1000, GW_ZC_GZIP), GW_ZSKIP_TYPE);
}

static void head_rewrite(void **state)
{
    (void)state;
    gw_field_t f[8] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/html")},
                       {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("1000")},
                       {GW_SLICE_LIT("accept-ranges"), GW_SLICE_LIT("bytes")},
                       {GW_SLICE_LIT("etag"), GW_SLICE_LIT("\"abc\"")},
                       {GW_SLICE_LIT("vary"), GW_SLICE_LIT("Cookie")}};
    char etag[64];
    size_t n = gw_proxy__zhead(f, 5, 8, GW_ZC_GZIP, 1, etag, sizeof(etag));
    assert_int_equal(n, 5);
    expect_field(&f[0], "content-type", NULL);
    expect_field(&f[1], NULL, "W/\"abc\"");
    expect_field(&f[2], NULL, "Cookie"); /* the origin's Vary stays */
    expect_field(&f[3], "vary", "Accept-Encoding");
    expect_field(&f[4], "content-encoding", "gzip");
    /* not compressed (the client's Accept-Encoding): only Vary; a weak ETag and a Vary that
     * already names Accept-Encoding stay as they are */
    gw_field_t g[4] = {{GW_SLICE_LIT("etag"), GW_SLICE_LIT("W/\"x\"")},
                       {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("5")}};
    n = gw_proxy__zhead(g, 2, 4, GW_ZC_NONE, 0, etag, sizeof(etag));
    assert_int_equal(n, 3);
    expect_field(&g[1], "content-length", NULL);
    expect_field(&g[2], NULL, "Accept-Encoding");
    gw_field_t h[4] = {{GW_SLICE_LIT("vary"), GW_SLICE_LIT("origin, accept-encoding")},
                       {GW_SLICE_LIT("etag"), GW_SLICE_LIT("W/\"x\"")}};
    n = gw_proxy__zhead(h, 2, 4, GW_ZC_GZIP, 1, etag, sizeof(etag));
    assert_int_equal(n, 3);
    expect_field(&h[1], NULL, "W/\"x\"");
    expect_field(&h[2], "content-encoding", NULL);
}

/* A decoder for each coding, fed the store's bytes slice by slice. */
typedef struct {
    gw_zcoding_t c;
    z_stream z;
#if GW_HAVE_BROTLI
    BrotliDecoderState *br;
#endif
#if GW_HAVE_ZSTD
    ZSTD_DCtx *zs;
#endif
    uint8_t *out;
    size_t cap, len;
    int ended;
} dec_t;

static void dec_init(dec_t *d, gw_zcoding_t c, uint8_t *out, size_t cap)
{
    memset(d, 0, sizeof(*d));
    d->c = c;
    d->out = out;
    d->cap = cap;
    if (c == GW_ZC_GZIP)
        assert_int_equal(inflateInit2(&d->z, 16 + 15), Z_OK);
#if GW_HAVE_BROTLI
    if (c == GW_ZC_BR)
        assert_non_null(d->br = BrotliDecoderCreateInstance(NULL, NULL, NULL));
#endif
#if GW_HAVE_ZSTD
    if (c == GW_ZC_ZSTD)
        assert_non_null(d->zs = ZSTD_createDCtx());
#endif
}

static void dec_feed(dec_t *d, const uint8_t *in, size_t n)
{
    if (d->c == GW_ZC_GZIP) {
        d->z.next_in = (Bytef *)(uintptr_t)in;
        d->z.avail_in = (uInt)n;
        d->z.next_out = d->out + d->len;
        d->z.avail_out = (uInt)(d->cap - d->len);
        int rc = inflate(&d->z, Z_SYNC_FLUSH);
        assert_true(rc == Z_OK || rc == Z_STREAM_END || (rc == Z_BUF_ERROR && n == 0));
        d->len = d->cap - d->z.avail_out;
        d->ended = rc == Z_STREAM_END;
    }
#if GW_HAVE_BROTLI
    if (d->c == GW_ZC_BR) {
        size_t ai = n, ao = d->cap - d->len;
        const uint8_t *ni = in;
        uint8_t *no = d->out + d->len;
        BrotliDecoderResult r = BrotliDecoderDecompressStream(d->br, &ai, &ni, &ao, &no, NULL);
        assert_true(r != BROTLI_DECODER_RESULT_ERROR);
        assert_int_equal(ai, 0);
        d->len = (size_t)(no - d->out);
        d->ended = r == BROTLI_DECODER_RESULT_SUCCESS;
    }
#endif
#if GW_HAVE_ZSTD
    if (d->c == GW_ZC_ZSTD) {
        ZSTD_inBuffer ib = {in, n, 0};
        size_t r = 1;
        do {
            ZSTD_outBuffer ob = {d->out + d->len, d->cap - d->len, 0};
            r = ZSTD_decompressStream(d->zs, &ob, &ib);
            assert_false(ZSTD_isError(r));
            d->len += ob.pos;
        } while (ib.pos < ib.size);
        d->ended = r == 0;
    }
#endif
}

static void dec_end(dec_t *d)
{
    if (d->c == GW_ZC_GZIP)
        inflateEnd(&d->z);
#if GW_HAVE_BROTLI
    if (d->br)
        BrotliDecoderDestroyInstance(d->br);
#endif
#if GW_HAVE_ZSTD
    if (d->zs)
        ZSTD_freeDCtx(d->zs);
#endif
}

/* Feed the store's new bytes (from *pos) to the decoder. */
static void dec_store(dec_t *d, gw_proxy__cbody_t *store, uint64_t *pos)
{
    while (*pos < store->end) {
        gw_rslice_t sl;
        assert_int_equal(gw_proxy__cbody_at(store, *pos, &sl), 0);
        dec_feed(d, sl.buf->data + sl.off, sl.len);
        *pos += sl.len;
    }
}

/* For each coding this build has: every piece, once flushed, decodes at once to everything
 * fed so far (the origin's pace); the end decodes to the whole input; the compressor's memory
 * is counted while it lives and given back after; the same pieces make the same bytes (what a
 * detached follower's replay relies on). */
static void stream_round_trip(void **state)
{
    (void)state;
    gw_cfg_compression_t z = zcfg();
    static uint8_t in[300000], back[300000];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)("abcdefgh"[i % 8] + (i / 1000) % 3);
    unsigned have = gw_zstream_available();
    assert_true(have & (1u << GW_ZC_GZIP));
    int tested = 0;
    for (gw_zcoding_t c = GW_ZC_GZIP; c < GW_ZC_N; c++) {
        if (!(have & (1u << c)))
            continue;
        tested++;
        uint64_t mem = 0, charged = 0;
        gw_zstream_t *s, *s2;
        assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, 0, &s), 0);
        assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, 0, &s2), 0);
        assert_int_equal(gw_zstream_coding(s), c);
        gw_proxy__cbody_t store, store2;
        gw_proxy__cbody_init(&store);
        gw_proxy__cbody_init(&store2);
        dec_t d;
        dec_init(&d, c, back, sizeof(back));
        uint64_t pos = 0;
        size_t pieces[] = {1, 4095, 70000, 0, 100000, 125904};
        size_t off = 0;
        for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
            assert_int_equal(gw_zstream_run(s, in + off, pieces[i], 0, &store), 0);
            assert_int_equal(gw_zstream_run(s2, in + off, pieces[i], 0, &store2), 0);
            off += pieces[i];
            dec_store(&d, &store, &pos);
            assert_int_equal(d.len, off); /* flushed: all of it decodes now */
            assert_false(d.ended);
        }
        assert_true(mem > 0);
        assert_int_equal(mem, gw_zstream_mem(s) + gw_zstream_mem(s2));
        assert_int_equal(gw_zstream_run(s, NULL, 0, 1, &store), 0);
        assert_int_equal(gw_zstream_run(s2, NULL, 0, 1, &store2), 0);
        gw_zstream_del(s);
        gw_zstream_del(s2);
        assert_int_equal(mem, 0);
        dec_store(&d, &store, &pos);
        assert_true(d.ended);
        assert_int_equal(d.len, sizeof(in));
        assert_memory_equal(back, in, sizeof(in));
        assert_true(store.end < sizeof(in) / 10);
        /* the same pieces, the same bytes */
        assert_int_equal(store.end, store2.end);
        for (uint64_t p = 0; p < store.end;) {
            gw_rslice_t a, b;
            assert_int_equal(gw_proxy__cbody_at(&store, p, &a), 0);
            assert_int_equal(gw_proxy__cbody_at(&store2, p, &b), 0);
            size_t n = a.len < b.len ? a.len : b.len;
            assert_memory_equal(a.buf->data + a.off, b.buf->data + b.off, n);
            p += n;
        }
        dec_end(&d);
        gw_proxy__cbody_free(&store);
        gw_proxy__cbody_free(&store2);
    }
    /* Debian's build has all three (scripts/setup installs libbrotli-dev and libzstd-dev) */
    assert_int_equal(tested, 1 + GW_HAVE_BROTLI + GW_HAVE_ZSTD);
}

/* The memory a compressor holds is fixed by its window settings: a smaller window, less. */
static void memory_bounds(void **state)
{
    (void)state;
    const uint8_t *in = noise();
    for (gw_zcoding_t c = GW_ZC_GZIP; c < GW_ZC_N; c++) {
        if (!(gw_zstream_available() & (1u << c)))
            continue;
        uint64_t big = 0, small = 0;
        for (int k = 0; k < 2; k++) {
            gw_cfg_compression_t z = zcfg();
            if (k) {
                z.gzip_window_bits = 10;
                z.gzip_mem_level = 2;
                z.brotli_window_bits = 12;
                z.zstd_window_log = 12;
            }
            uint64_t mem = 0, peak = 0, charged = 0;
            gw_zstream_t *s;
            assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, 0, &s), 0);
            gw_proxy__cbody_t store;
            gw_proxy__cbody_init(&store);
            for (size_t off = 0; off < NOISE_LEN; off += 65536) {
                assert_int_equal(gw_zstream_run(s, in + off, 65536, 0, &store), 0);
                peak = mem > peak ? mem : peak;
                gw_proxy__cbody_trim(&store, store.end);
            }
            gw_zstream_del(s);
            gw_proxy__cbody_free(&store);
            assert_int_equal(mem, 0);
            *(k ? &small : &big) = peak;
        }
        print_message("coding %s: memory per stream %llu bytes at the defaults, %llu small\n",
                      gw_proxy__coding_str(c), (unsigned long long)big, (unsigned long long)small);
        assert_true(small < big);
        assert_true(big < 4u << 20); /* the defaults stay well under 4 MiB a stream */
    }
}

/* compression.max_memory: each compressor is charged the larger of its weight (its
 * coding's peak, measured) and what it holds; admission stops at max_concurrent, then at
 * max_memory; every way a compressor ends (never run, mid-stream, finished, failed while
 * made) gives back exactly its charge and its bytes. */
static void memory_charges(void **state)
{
    (void)state;
    gw_cfg_compression_t z = zcfg();
    const uint8_t *in = noise();
    for (gw_zcoding_t c = GW_ZC_GZIP; c < GW_ZC_N; c++) {
        if (!(gw_zstream_available() & (1u << c)))
            continue;
        size_t w = gw_zstream_weigh(&z, c);
        assert_true(w > 0);
        uint64_t mem = 0, charged = 0, peak = 0;
        gw_zstream_t *a, *b, *s;
        /* admitted: charged its weight before it allocated much */
        assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, w, &a), 0);
        assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, w, &b), 0);
        assert_int_equal(charged, 2 * (uint64_t)w);
        assert_true(mem <= charged);
        /* a never-run one leaves: exactly its charge and bytes go */
        gw_zstream_del(b);
        assert_int_equal(charged, w);
        assert_int_equal(mem, gw_zstream_mem(a));
        /* a long stream in the largest origin reads stays about its weight (the probe is
         * the same reads); its charge never drops under the weight */
        gw_proxy__cbody_t store;
        gw_proxy__cbody_init(&store);
        for (size_t off = 0; off < NOISE_LEN; off += GW_BACK_READ_BUF_MAX) {
            assert_int_equal(gw_zstream_run(a, in + off, GW_BACK_READ_BUF_MAX, 0, &store), 0);
            gw_proxy__cbody_trim(&store, store.end);
            size_t own = gw_zstream_mem(a);
            peak = own > peak ? own : peak;
            assert_int_equal(charged, own > w ? own : w);
            assert_int_equal(mem, own);
        }
        print_message("coding %s: weight %zu bytes, peak over 1 MiB %llu\n",
                      gw_proxy__coding_str(c), w, (unsigned long long)peak);
        assert_true(peak <= w + w / 16);
        /* one charged with a small weight grows past it: charged what it holds */
        assert_int_equal(gw_zstream_new(&z, c, &mem, &charged, 1, &s), 0);
        for (size_t off = 0; off < 2 * GW_BACK_READ_BUF_MAX; off += GW_BACK_READ_BUF_MAX)
            assert_int_equal(gw_zstream_run(s, in + off, GW_BACK_READ_BUF_MAX, 0, &store), 0);
        assert_true(gw_zstream_mem(s) > 1);
        uint64_t own_a = gw_zstream_mem(a);
        assert_int_equal(charged, (own_a > w ? own_a : w) + gw_zstream_mem(s));
        gw_zstream_del(s); /* mid-stream */
        assert_int_equal(gw_zstream_run(a, NULL, 0, 1, &store), 0);
        gw_zstream_del(a); /* finished */
        assert_int_equal(charged, 0);
        assert_int_equal(mem, 0);
        /* made under failing allocations: whatever fails, nothing stays counted (not br:
         * Debian's libbrotlienc 1.0.9 calls exit() when its allocator fails) */
        int made = c == GW_ZC_BR;
        for (unsigned long n = 1; !made && n < 200; n++) {
            gw_alloc_fail_after(n);
            int rv = gw_zstream_new(&z, c, &mem, &charged, w, &s);
            if (rv == 0 && gw_zstream_run(s, in, GW_BACK_READ_BUF_MAX, 0, &store) == 0)
                made = !gw_alloc_fail_hit();
            gw_alloc_fail_after(0);
            if (rv == 0)
                gw_zstream_del(s);
            assert_int_equal(charged, 0);
            assert_int_equal(mem, 0);
        }
        assert_true(made);
        gw_proxy__cbody_free(&store);

        /* admission: max_concurrent first, then max_memory, in unsigned arithmetic */
        gw_cfg_compression_t lim = z;
        lim.max_concurrent = 3;
        lim.max_memory = 2 * (uint64_t)w + w / 2;
        assert_int_equal(gw_proxy__zadmit(&lim, 0, 0, w), GW_ZSKIP_NONE);
        assert_int_equal(gw_proxy__zadmit(&lim, 1, w, w), GW_ZSKIP_NONE);
        assert_int_equal(gw_proxy__zadmit(&lim, 2, 2 * (uint64_t)w, w), GW_ZSKIP_MEMORY);
        assert_int_equal(gw_proxy__zadmit(&lim, 3, 0, w), GW_ZSKIP_BUSY);
        assert_int_equal(gw_proxy__zadmit(&lim, 0, lim.max_memory - w, w), GW_ZSKIP_NONE);
        assert_int_equal(gw_proxy__zadmit(&lim, 0, lim.max_memory - w + 1, w), GW_ZSKIP_MEMORY);
        assert_int_equal(gw_proxy__zadmit(&lim, 0, lim.max_memory + 1, 0), GW_ZSKIP_MEMORY);
        assert_int_equal(gw_proxy__zadmit(&lim, 0, 1, UINT64_MAX), GW_ZSKIP_MEMORY);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(negotiation),
    cmocka_unit_test(stored_coding_accepted),
    cmocka_unit_test(rules),
    cmocka_unit_test(head_rewrite),
    cmocka_unit_test(stream_round_trip),
    cmocka_unit_test(memory_bounds),
    cmocka_unit_test(memory_charges),
};

GW_TEST_MAIN(tests)
