/* Unit tests of proxy/compress.c: Accept-Encoding negotiation (RFC 9110 §12.5.3), the rules
 * that allow compression (issue 22), the head rewrite, and the gzip stream (inflated back). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "proxy/proxy_internal.h"

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

static gw_cfg_compression_t zcfg(void)
{
    static char *types[] = {"text/*", "application/json", "+xml"};
    return (gw_cfg_compression_t){.types = types,
                                  .types_len = 3,
                                  .min_size = 256,
                                  .gzip_level = 5,
                                  .gzip_window_bits = 15,
                                  .gzip_mem_level = 8,
                                  .max_concurrent = 8,
                                  .skip_private = 1};
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
    assert_true(gw_slice_eq(f[0].name, GW_SLICE_LIT("content-type")));
    assert_true(gw_slice_eq(f[1].value, GW_SLICE_LIT("W/\"abc\"")));
    assert_true(gw_slice_eq(f[2].value, GW_SLICE_LIT("Cookie"))); /* the origin's Vary stays */
    assert_true(gw_slice_eq(f[3].name, GW_SLICE_LIT("vary")));
    assert_true(gw_slice_eq(f[3].value, GW_SLICE_LIT("Accept-Encoding")));
    assert_true(gw_slice_eq(f[4].name, GW_SLICE_LIT("content-encoding")));
    assert_true(gw_slice_eq(f[4].value, GW_SLICE_LIT("gzip")));
    /* not compressed (the client's Accept-Encoding): only Vary; a weak ETag and a Vary that
     * already names Accept-Encoding stay as they are */
    gw_field_t g[4] = {{GW_SLICE_LIT("etag"), GW_SLICE_LIT("W/\"x\"")},
                       {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("5")}};
    n = gw_proxy__zhead(g, 2, 4, GW_ZC_NONE, 0, etag, sizeof(etag));
    assert_int_equal(n, 3);
    assert_true(gw_slice_eq(g[1].name, GW_SLICE_LIT("content-length")));
    assert_true(gw_slice_eq(g[2].value, GW_SLICE_LIT("Accept-Encoding")));
    gw_field_t h[4] = {{GW_SLICE_LIT("vary"), GW_SLICE_LIT("origin, accept-encoding")},
                       {GW_SLICE_LIT("etag"), GW_SLICE_LIT("W/\"x\"")}};
    n = gw_proxy__zhead(h, 2, 4, GW_ZC_GZIP, 1, etag, sizeof(etag));
    assert_int_equal(n, 3);
    assert_true(gw_slice_eq(h[1].value, GW_SLICE_LIT("W/\"x\"")));
    assert_true(gw_slice_eq(h[2].name, GW_SLICE_LIT("content-encoding")));
}

/* The store's bytes, inflated back: what went in comes out. */
static void gzip_stream_round_trip(void **state)
{
    (void)state;
    gw_cfg_compression_t z = zcfg();
    static uint8_t in[300000], back[300000];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)("abcdefgh"[i % 8] + (i / 1000) % 3);
    gw_zstream_t *s;
    assert_int_equal(gw_zstream_new(&z, &s), 0);
    assert_true(gw_zstream_mem(s) > 0);
    gw_proxy__cbody_t store;
    gw_proxy__cbody_init(&store);
    size_t pieces[] = {1, 4095, 70000, 0, 100000, 125904};
    size_t off = 0;
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        assert_int_equal(gw_zstream_run(s, in + off, pieces[i], 0, &store), 0);
        off += pieces[i];
        /* every piece was flushed: what came so far inflates already (the origin's pace) */
    }
    assert_int_equal(off, sizeof(in));
    assert_int_equal(gw_zstream_run(s, NULL, 0, 1, &store), 0);
    gw_zstream_del(s);
    assert_true(store.end < sizeof(in) / 10);
    z_stream d;
    memset(&d, 0, sizeof(d));
    assert_int_equal(inflateInit2(&d, 16 + 15), Z_OK);
    d.next_out = back;
    d.avail_out = sizeof(back);
    uint64_t pos = store.base;
    int rc = Z_OK;
    while (pos < store.end) {
        gw_rslice_t sl;
        assert_int_equal(gw_proxy__cbody_at(&store, pos, &sl), 0);
        d.next_in = sl.buf->data + sl.off;
        d.avail_in = (uInt)sl.len;
        rc = inflate(&d, Z_NO_FLUSH);
        assert_true(rc == Z_OK || rc == Z_STREAM_END);
        pos += sl.len;
    }
    assert_int_equal(rc, Z_STREAM_END);
    assert_int_equal(d.total_out, sizeof(in));
    assert_memory_equal(back, in, sizeof(in));
    inflateEnd(&d);
    gw_proxy__cbody_free(&store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(negotiation),
        cmocka_unit_test(rules),
        cmocka_unit_test(head_rewrite),
        cmocka_unit_test(gzip_stream_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
