/* libFuzzer target: compression (proxy/compress.c) over arbitrary input.
 *
 * Input: byte 0 = which codings the build offers (low 3 bits, gzip always), byte 1 = piece size
 * for the streams (1..256); the rest split at '\n': up to 8 Accept-Encoding values, then an
 * empty line, then response field name/value pairs (at most 32 fields), then an empty line, and
 * what follows is a body. Checked: the chosen coding is one offered; the choice is the same
 * when computed twice; the rules never read out of bounds; the head
 * rewrite stays within its room, drops Content-Length and Accept-Ranges when it compresses, adds
 * one Content-Encoding, keeps every other field; each compressor, fed the body in pieces, decodes
 * back (zlib, brotli, zstd decoders) to the body exactly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gw_version.h"
#include "proxy/proxy_internal.h"
#if GW_HAVE_BROTLI
#include <brotli/decode.h>
#endif
#if GW_HAVE_ZSTD
#include <zstd.h>

#include "fuzz_input.h"
#endif

#define MAX_FIELDS 32

static void check(int ok)
{
    if (!ok)
        abort();
}

/* The store's bytes, decoded with the coding's own decoder, are the body. */
static void round_trip(gw_zcoding_t c, const uint8_t *body, size_t n, size_t piece)
{
    gw_cfg_compression_t z = {.gzip_level = 5,
                              .gzip_window_bits = 15,
                              .gzip_mem_level = 8,
                              .brotli_level = 4,
                              .brotli_window_bits = 18,
                              .zstd_level = 3,
                              .zstd_window_log = 18};
    uint64_t mem = 0, charged = 0;
    gw_zstream_t *s;
    check(gw_zstream_new(&z, c, &mem, &charged, 4096, &s) == 0);
    gw_proxy__cbody_t store;
    gw_proxy__cbody_init(&store);
    for (size_t off = 0; off < n; off += piece)
        check(gw_zstream_run(s, body + off, n - off < piece ? n - off : piece, 0, &store) == 0);
    check(gw_zstream_run(s, NULL, 0, 1, &store) == 0);
    gw_zstream_del(s);
    check(mem == 0 && charged == 0);
    size_t clen = (size_t)store.end;
    uint8_t *comp = malloc(clen + 1), *out = malloc(n + 1);
    check(comp && out);
    for (uint64_t pos = 0; pos < store.end;) {
        gw_rslice_t sl;
        check(gw_proxy__cbody_at(&store, pos, &sl) == 0);
        memcpy(comp + pos, sl.buf->data + sl.off, sl.len);
        pos += sl.len;
    }
    gw_proxy__cbody_free(&store);
    size_t got = 0;
    if (c == GW_ZC_GZIP) {
        z_stream d;
        memset(&d, 0, sizeof(d));
        check(inflateInit2(&d, 16 + 15) == Z_OK);
        d.next_in = comp;
        d.avail_in = (uInt)clen;
        d.next_out = out;
        d.avail_out = (uInt)(n + 1);
        check(inflate(&d, Z_FINISH) == Z_STREAM_END);
        got = d.total_out;
        inflateEnd(&d);
    }
#if GW_HAVE_BROTLI
    if (c == GW_ZC_BR) {
        got = n + 1;
        check(BrotliDecoderDecompress(clen, comp, &got, out) == BROTLI_DECODER_RESULT_SUCCESS);
    }
#endif
#if GW_HAVE_ZSTD
    if (c == GW_ZC_ZSTD) {
        ZSTD_DCtx *d = ZSTD_createDCtx();
        ZSTD_inBuffer ib = {comp, clen, 0};
        ZSTD_outBuffer ob = {out, n + 1, 0};
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        check(!ZSTD_isError(r) && r == 0 && ib.pos == clen);
        got = ob.pos;
        ZSTD_freeDCtx(d);
    }
#endif
    check(got == n && (n == 0 || memcmp(out, body, n) == 0));
    free(comp);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned offered = ((unsigned)data[0] << 1) & gw_zstream_available();
    offered |= 1u << GW_ZC_GZIP;
    size_t piece = (size_t)data[1] + 1;
    const uint8_t *p = data + 2, *e = data + size;
    gw_slice_t ae[8];
    size_t nae = 0;
    while (p < e && nae < 8) {
        gw_slice_t v = fz_next_piece(&p, e);
        if (!v.len)
            break;
        ae[nae++] = v;
    }
    gw_zcoding_t c = gw_proxy__choose_coding(ae, nae, offered);
    check(c == gw_proxy__choose_coding(ae, nae, offered));
    check(c == GW_ZC_NONE || (offered & (1u << c)));

    gw_field_t f[MAX_FIELDS + 2];
    size_t n = 0;
    while (p < e && n < MAX_FIELDS) {
        gw_slice_t name = fz_next_piece(&p, e);
        if (!name.len)
            break;
        f[n++] = (gw_field_t){name, fz_next_piece(&p, e)};
    }
    gw_cfg_compression_t z = {0};
    char *types[] = {"text/*", "+json", "application/javascript"};
    z.types = types;
    z.types_len = 3;
    z.min_size = 256;
    z.skip_private = 1;
    gw_req_head_t req = {.method = GW_SLICE_LIT("GET"), .fields = f, .fields_len = 0};
    for (size_t i = 0; i < n; i++)
        (void)gw_proxy__type_listed(&z, f[i].value);
    gw_zskip_t zs = gw_proxy__zdecide(&z, &req, 200, f, n, -1, c);
    check(zs < GW_ZSKIP_N);
    int compressed = c != GW_ZC_NONE;
    size_t ce_in = 0, removed = 0;
    for (size_t i = 0; i < n; i++) {
        if (gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("content-encoding")))
            ce_in++;
        if (compressed && (gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("content-length")) ||
                           gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("accept-ranges"))))
            removed++;
    }
    char etag[256];
    size_t k = gw_proxy__zhead(f, n, MAX_FIELDS + 2, c, compressed, etag, sizeof(etag));
    /* every other field kept; at most a Vary and a Content-Encoding added */
    check(k <= MAX_FIELDS + 2 && k >= n - removed && k <= n - removed + 2);
    size_t ce = 0;
    for (size_t i = 0; i < k; i++) {
        if (gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("content-encoding")))
            ce++;
        check(!compressed || !(gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("content-length")) ||
                               gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("accept-ranges"))));
    }
    check(ce == ce_in + (size_t)compressed);

    if (p <= e && (size_t)(e - p) <= 1 << 16) {
        for (gw_zcoding_t k2 = GW_ZC_GZIP; k2 < GW_ZC_N; k2++)
            if (gw_zstream_available() & (1u << k2))
                round_trip(k2, p, (size_t)(e - p), piece);
    }
    return 0;
}
