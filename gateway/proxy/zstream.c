/* proxy/zstream.c — the compressors: gzip (zlib), br (libbrotlienc) and zstd (libzstd)
 * streams whose output goes into an exchange's body store by reference, their memory counted by
 * their own allocator and charged against compression.max_memory, the weight of a coding
 * measured once, and the recorded sizes of the pieces a compressor was fed.
 *
 * gzip (zlib) is always there; br and zstd when the build found them (meson features
 * `brotli`, `zstd`). */
#include <stddef.h>
#include <string.h>
#include <zlib.h>

#include "gw_version.h"
#if GW_HAVE_BROTLI
#include <brotli/encode.h>
#endif
#if GW_HAVE_ZSTD
/* ZSTD_createCCtx_advanced (a counting allocator) is in the "experimental" part of zstd.h;
 * Debian's libzstd exports it. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#endif

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

/* ---- the compressors ------------------------------------------------------------------- */

/* Every allocation of a compressor goes through these, so its memory is what it weighs, not an
 * estimate: a header before each block keeps the size (brotli and zstd free without one).
 *
 * Its charge against compression.max_memory is the larger of its weight (the peak measured
 * once per coding, gw_zstream_weigh) and what it holds: admitted on its weight, before it
 * allocated much, it stays charged that much, and more if it grows past it. */
typedef union {
    size_t n;
    max_align_t align;
} zhdr_t;

struct gw_zstream {
    gw_zcoding_t c;
    size_t own;        /* bytes allocated now */
    size_t peak;       /* the most it held at once (gw_zstream_weigh) */
    size_t weight;     /* what it was admitted on */
    uint64_t *mem;     /* the proxy's total of own */
    uint64_t *charged; /* the worker's total of charge_of() */
    union {
        z_stream z;
#if GW_HAVE_BROTLI
        BrotliEncoderState *br;
#endif
#if GW_HAVE_ZSTD
        ZSTD_CCtx *zs;
#endif
    } u;
};

static size_t charge_of(const gw_zstream_t *s)
{
    return s->own > s->weight ? s->own : s->weight;
}

static void *zs_alloc(void *opaque, size_t n)
{
    gw_zstream_t *s = opaque;
    if (n > SIZE_MAX - sizeof(zhdr_t))
        return NULL;
    zhdr_t *h = gw_malloc(sizeof(zhdr_t) + n);
    if (!h)
        return NULL;
    h->n = n;
    size_t before = charge_of(s);
    s->own += n;
    if (s->own > s->peak)
        s->peak = s->own;
    *s->mem += n;
    *s->charged += charge_of(s) - before;
    return h + 1;
}

static void zs_free(void *opaque, void *p)
{
    if (!p)
        return;
    gw_zstream_t *s = opaque;
    zhdr_t *h = (zhdr_t *)p - 1;
    size_t before = charge_of(s);
    s->own -= h->n;
    *s->mem -= h->n;
    *s->charged -= before - charge_of(s);
    gw_free(h);
}

/* The last of s: what it still holds (nothing, once its library freed its state) and its
 * weight leave the counts. */
static void zs_release(gw_zstream_t *s)
{
    *s->mem -= s->own;
    *s->charged -= charge_of(s);
    gw_free(s);
}

static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
    return zs_alloc(opaque, (size_t)items * size);
}

static void zlib_free(voidpf opaque, voidpf p)
{
    zs_free(opaque, p);
}

unsigned gw_zstream_available(void)
{
    return (1u << GW_ZC_GZIP) | (GW_HAVE_BROTLI ? 1u << GW_ZC_BR : 0) |
           (GW_HAVE_ZSTD ? 1u << GW_ZC_ZSTD : 0);
}

int gw_zstream_new(const gw_cfg_compression_t *cfg, gw_zcoding_t c, uint64_t *mem,
                   uint64_t *charged, size_t weight, gw_zstream_t **out)
{
    *out = NULL;
    if (c <= GW_ZC_NONE || c >= GW_ZC_N || !(gw_zstream_available() & (1u << c)))
        return GW_E_INVAL;
    gw_zstream_t *s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->c = c;
    s->mem = mem;
    s->charged = charged;
    s->weight = weight;
    *charged += weight; /* charge_of() with nothing held yet */
    int ok = 0;
    switch (c) {
    case GW_ZC_GZIP:
        s->u.z.zalloc = zlib_alloc;
        s->u.z.zfree = zlib_free;
        s->u.z.opaque = s;
        /* 16 + window bits: a gzip wrapper (RFC 1952), not raw zlib */
        ok =
            deflateInit2(&s->u.z, (int)cfg->gzip_level, Z_DEFLATED, 16 + (int)cfg->gzip_window_bits,
                         (int)cfg->gzip_mem_level, Z_DEFAULT_STRATEGY) == Z_OK;
        break;
#if GW_HAVE_BROTLI
    case GW_ZC_BR:
        s->u.br = BrotliEncoderCreateInstance(zs_alloc, zs_free, s);
        ok = s->u.br &&
             BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_QUALITY, cfg->brotli_level) &&
             BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_LGWIN, cfg->brotli_window_bits) &&
             BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
        break;
#endif
#if GW_HAVE_ZSTD
    case GW_ZC_ZSTD:
        s->u.zs = ZSTD_createCCtx_advanced((ZSTD_customMem){zs_alloc, zs_free, s});
        ok = s->u.zs &&
             !ZSTD_isError(
                 ZSTD_CCtx_setParameter(s->u.zs, ZSTD_c_compressionLevel, (int)cfg->zstd_level)) &&
             !ZSTD_isError(
                 ZSTD_CCtx_setParameter(s->u.zs, ZSTD_c_windowLog, (int)cfg->zstd_window_log)) &&
             /* RFC 8878 §2: the frame's checksum lets the client see a damaged body */
             !ZSTD_isError(ZSTD_CCtx_setParameter(s->u.zs, ZSTD_c_checksumFlag, 1));
        break;
#endif
    default:
        break;
    }
    if (!ok) {
        if (c == GW_ZC_GZIP) {
            /* deflateInit2 frees what it took when it fails */
            zs_release(s);
        } else {
            gw_zstream_del(s);
        }
        return GW_E_NOMEM;
    }
    *out = s;
    return 0;
}

void gw_zstream_del(gw_zstream_t *s)
{
    if (!s)
        return;
    switch (s->c) {
    case GW_ZC_GZIP:
        deflateEnd(&s->u.z);
        break;
#if GW_HAVE_BROTLI
    case GW_ZC_BR:
        if (s->u.br)
            BrotliEncoderDestroyInstance(s->u.br);
        break;
#endif
#if GW_HAVE_ZSTD
    case GW_ZC_ZSTD:
        ZSTD_freeCCtx(s->u.zs);
        break;
#endif
    default:
        break;
    }
    zs_release(s);
}

#define ZOUT_CHUNK 16384

/* Compressed bytes are made in a scratch buffer of the thread and copied into an rbuf of
 * their own size: a store of small flushed pieces holds what they weigh, not 16 KiB each. */
static int emit(gw_proxy__cbody_t *store, const uint8_t *p, size_t n)
{
    if (n == 0)
        return 0;
    gw_rbuf_t *b = gw_rbuf_new(n);
    if (!b)
        return GW_E_NOMEM;
    memcpy(b->data, p, n);
    b->len = n;
    int rv = gw_proxy__cbody_append(store, b, 0, n);
    gw_rbuf_unref(b);
    return rv;
}

static _Thread_local uint8_t scratch[ZOUT_CHUNK];

static int run_gzip(gw_zstream_t *s, const uint8_t *in, size_t len, int finish,
                    gw_proxy__cbody_t *store)
{
    s->u.z.next_in = (Bytef *)(uintptr_t)in;
    s->u.z.avail_in = (uInt)len;
    int flush = finish ? Z_FINISH : Z_SYNC_FLUSH; /* the origin's pace: what came goes out */
    for (;;) {
        s->u.z.next_out = scratch;
        s->u.z.avail_out = ZOUT_CHUNK;
        int rc = deflate(&s->u.z, flush);
        int arv = emit(store, scratch, ZOUT_CHUNK - s->u.z.avail_out);
        if (arv < 0)
            return arv;
        if (rc == Z_STREAM_END)
            return 0;
        if (rc == Z_BUF_ERROR || (rc == Z_OK && s->u.z.avail_out != 0))
            return 0; /* everything in was taken and flushed */
        if (rc != Z_OK)
            return GW_E_FATAL;
    }
}

#if GW_HAVE_BROTLI
static int run_br(gw_zstream_t *s, const uint8_t *in, size_t len, int finish,
                  gw_proxy__cbody_t *store)
{
    BrotliEncoderOperation op = finish ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_FLUSH;
    size_t avail_in = len;
    const uint8_t *next_in = in;
    for (;;) {
        size_t avail_out = ZOUT_CHUNK;
        uint8_t *next_out = scratch;
        if (!BrotliEncoderCompressStream(s->u.br, op, &avail_in, &next_in, &avail_out, &next_out,
                                         NULL))
            return GW_E_FATAL;
        int arv = emit(store, scratch, ZOUT_CHUNK - avail_out);
        if (arv < 0)
            return arv;
        if (avail_in == 0 && !BrotliEncoderHasMoreOutput(s->u.br))
            return 0;
    }
}
#endif

#if GW_HAVE_ZSTD
static int run_zstd(gw_zstream_t *s, const uint8_t *in, size_t len, int finish,
                    gw_proxy__cbody_t *store)
{
    ZSTD_inBuffer ib = {in, len, 0};
    ZSTD_EndDirective op = finish ? ZSTD_e_end : ZSTD_e_flush;
    for (;;) {
        ZSTD_outBuffer ob = {scratch, ZOUT_CHUNK, 0};
        size_t left = ZSTD_compressStream2(s->u.zs, &ob, &ib, op);
        if (ZSTD_isError(left))
            return GW_E_FATAL;
        int arv = emit(store, scratch, ob.pos);
        if (arv < 0)
            return arv;
        if (left == 0 && ib.pos == ib.size)
            return 0; /* flushed (or the frame ended) */
    }
}
#endif

int gw_zstream_run(gw_zstream_t *s, const uint8_t *in, size_t len, int finish,
                   gw_proxy__cbody_t *store)
{
    switch (s->c) {
    case GW_ZC_GZIP:
        return run_gzip(s, in, len, finish, store);
#if GW_HAVE_BROTLI
    case GW_ZC_BR:
        return run_br(s, in, len, finish, store);
#endif
#if GW_HAVE_ZSTD
    case GW_ZC_ZSTD:
        return run_zstd(s, in, len, finish, store);
#endif
    default:
        return GW_E_FATAL;
    }
}

#ifdef GW_TEST_API
size_t gw_zstream_mem(const gw_zstream_t *s)
{
    return s->own;
}
#endif

size_t gw_zstream_weigh(const gw_cfg_compression_t *cfg, gw_zcoding_t c)
{
    /* brotli grows its ring buffer and block buffers with its input, up to what one origin
     * read brings; zlib takes all it needs in deflateInit2, zstd its whole workspace at its
     * first input, whatever its size (measured with Debian's libraries at every level and
     * window): a small piece weighs them as well, without a whole read at a high level */
    const size_t piece = c == GW_ZC_BR ? GW_BACK_READ_BUF_MAX : 1024;
    uint64_t mem = 0, charged = 0;
    gw_zstream_t *s;
    uint8_t *in = gw_malloc(piece);
    if (!in)
        return 0;
    if (gw_zstream_new(cfg, c, &mem, &charged, 0, &s) < 0) {
        gw_free(in);
        return 0;
    }
    /* text-like input (brotli's and zstd's tables fill with matches and literals alike):
     * letters and markup from a fixed LCG, every seventh byte a repeat of an earlier one */
    uint32_t x = 1;
    for (size_t i = 0; i < piece; i++) {
        x = x * 1103515245u + 12345u;
        in[i] = (uint8_t) "abcdefghij klmnop<>/=\"\n"[(x >> 16) % 24];
        if (i % 7 == 0)
            in[i] = in[i / 3];
    }
    gw_proxy__cbody_t store;
    gw_proxy__cbody_init(&store);
    int rv = 0;
    for (int k = 0; k < 2 && rv == 0; k++) { /* the second read is the one that fills them */
        rv = gw_zstream_run(s, in, piece, 0, &store);
        gw_proxy__cbody_trim(&store, store.end);
    }
    size_t peak = s->peak;
    gw_zstream_del(s);
    gw_proxy__cbody_free(&store);
    gw_free(in);
    GW_ASSERT(mem == 0 && charged == 0);
    return rv == 0 ? peak : 0;
}

gw_zcoding_t gw_zstream_coding(const gw_zstream_t *s)
{
    return s->c;
}

/* ---- the pieces of a compressed stream ----------------------------------------------------- */

int gw_zchunks_push(gw_zchunks_t *c, uint32_t len)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        uint32_t *n = gw_realloc(c->len, cap * sizeof(*n));
        if (!n)
            return GW_E_NOMEM;
        c->len = n;
        c->cap = cap;
    }
    c->len[c->n++] = len;
    return 0;
}

int gw_zchunks_copy(gw_zchunks_t *dst, const gw_zchunks_t *src)
{
    *dst = (gw_zchunks_t){0};
    if (!src->n)
        return 0;
    dst->len = gw_malloc(src->n * sizeof(*dst->len));
    if (!dst->len)
        return GW_E_NOMEM;
    memcpy(dst->len, src->len, src->n * sizeof(*dst->len));
    dst->n = dst->cap = src->n;
    return 0;
}

void gw_zchunks_free(gw_zchunks_t *c)
{
    gw_free(c->len);
    *c = (gw_zchunks_t){0};
}
