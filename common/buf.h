/* common/buf.h — slices, refcounted buffers and the output iovec queue.
 *
 * gw_slice_t never owns memory: whoever hands one out says which buffer it points into and
 * for how long it stays valid. gw_rbuf_t is a heap block with a reference count; body bytes
 * travel from an origin read to a client write as (rbuf, offset, length) references, so the
 * payload is never copied. gw_iovq_t gathers what a codec wants written: short copied bytes
 * (frame headers, encoded header blocks) in its own arena, and payload by reference, pinning
 * the rbuf until gw_iovq_consume() says the bytes left.
 */
#ifndef GW_COMMON_BUF_H
#define GW_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

typedef struct {
    const uint8_t *base;
    size_t len;
} gw_slice_t;

/* A header field as every layer passes it around: slices into someone's buffer. */
typedef struct {
    gw_slice_t name;
    gw_slice_t value;
} gw_field_t;

#define GW_SLICE_LIT(s) ((gw_slice_t){(const uint8_t *)(s), sizeof(s) - 1})
gw_slice_t gw_slice_str(const char *s);
/* s without leading and trailing optional whitespace (SP, HTAB: RFC 9110 §5.6.3 OWS). */
gw_slice_t gw_slice_trim(gw_slice_t s);
/* Decimal digits of v into dst (at least 21 bytes), NUL-terminated; returns their count.
 * For the per-request numbers (Content-Length) where snprintf's cost shows in profiles. */
size_t gw_fmt_u64(char *dst, uint64_t v);
/* Whether a[0..n) equals b[0..n). Inline, eight bytes at a time: header names and values are
 * short, and a libc memcmp call costs more than the comparison itself. */
static inline int gw_mem_eq(const void *a, const void *b, size_t n)
{
    const uint8_t *p = a, *q = b;
    uint64_t x, y;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, p + i, 8);
            memcpy(&y, q + i, 8);
            if (x != y)
                return 0;
        }
        memcpy(&x, p + n - 8, 8); /* the last word, overlapping the previous one */
        memcpy(&y, q + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t u, v, w, z;
        memcpy(&u, p, 4);
        memcpy(&v, q, 4);
        memcpy(&w, p + n - 4, 4);
        memcpy(&z, q + n - 4, 4);
        return u == v && w == z;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] != q[i])
            return 0;
    return 1;
}

static inline int gw_slice_eq(gw_slice_t a, gw_slice_t b)
{
    return a.len == b.len && gw_mem_eq(a.base, b.base, a.len);
}

/* ASCII case-insensitive equality of a[0..n) and b[0..n) (eight bytes at a time). */
int gw_mem_eq_nocase(const uint8_t *a, const uint8_t *b, size_t n);
/* ASCII case-insensitive equality; the length test is inline (most names differ there). */
static inline int gw_slice_eq_nocase(gw_slice_t a, gw_slice_t b)
{
    return a.len == b.len && gw_mem_eq_nocase(a.base, b.base, a.len);
}
/* dst[0..n) = src[0..n) with A-Z lowercased, other bytes as they are (dst may equal src). */
void gw_ascii_lower(char *dst, const uint8_t *src, size_t n);

/* ---- refcounted buffer ---------------------------------------------------------------- */

typedef struct gw_rbuf {
    uint32_t refs; /* changed atomically: a buffer may be shared across threads (the cache) */
    size_t cap;    /* bytes available at data[] */
    size_t len;    /* bytes written so far (owner's convention) */
    uint8_t data[];
} gw_rbuf_t;

/* A new buffer of cap bytes with one reference, or NULL when out of memory. */
gw_rbuf_t *gw_rbuf_new(size_t cap);
gw_rbuf_t *gw_rbuf_ref(gw_rbuf_t *b);
/* Drop one reference; frees the buffer on the last one. NULL is ignored. */
void gw_rbuf_unref(gw_rbuf_t *b);

/* A reference to bytes inside an rbuf: the holder owns one reference. */
typedef struct {
    gw_rbuf_t *buf;
    size_t off;
    size_t len;
} gw_rslice_t;

/* ---- growable byte buffer (owns its memory) --------------------------------------------- */

typedef struct {
    uint8_t *base;
    size_t len;
    size_t cap;
    size_t max; /* hard cap: growth past it fails with GW_E_LIMIT; 0 = SIZE_MAX */
} gw_bytes_t;

void gw_bytes_init(gw_bytes_t *b, size_t max);
void gw_bytes_free(gw_bytes_t *b);
/* gw_bytes_reserve() when the room is not there yet: grow (doubling, at most max). */
int gw_bytes__grow(gw_bytes_t *b, size_t n);
/* Make room for n more bytes; 0, GW_E_NOMEM or GW_E_LIMIT. Inline when the room is there
 * (cap never exceeds max, so that room is also within max). */
static inline int gw_bytes_reserve(gw_bytes_t *b, size_t n)
{
    return n <= b->cap - b->len ? 0 : gw_bytes__grow(b, n);
}
/* Append p[0..n): 0, GW_E_NOMEM or GW_E_LIMIT (b unchanged then). */
static inline int gw_bytes_append(gw_bytes_t *b, const void *p, size_t n)
{
    if (n > b->cap - b->len) {
        int rv = gw_bytes__grow(b, n);
        if (rv < 0)
            return rv;
    }
    if (n)
        memcpy(b->base + b->len, p, n);
    b->len += n;
    return 0;
}
/* Remove n bytes from the front (memmove; for small control buffers). */
void gw_bytes_consume(gw_bytes_t *b, size_t n);

/* ---- output iovec queue ---------------------------------------------------------------- */

typedef struct gw_iovq_ent {
    struct iovec iov; /* what is left to write */
    gw_rbuf_t *pin;   /* reference released when the entry is fully consumed (may be NULL) */
} gw_iovq_ent_t;

typedef struct {
    gw_iovq_ent_t *ents;
    size_t head, count, cap; /* ring of entries */
    size_t bytes;            /* total bytes queued */
    gw_rbuf_t *copy_buf;     /* current block receiving copied bytes */
    int lent;                /* ents goes back at gw_iovq_unlend if nothing is left in it */
} gw_iovq_t;

void gw_iovq_init(gw_iovq_t *q);
/* Releases every pin still queued. */
void gw_iovq_free(gw_iovq_t *q);
/* Queue a copy of p[0..n) (frame headers, header blocks): 0 or GW_E_NOMEM. Adjacent copies
 * are merged into one iovec. */
int gw_iovq_copy(gw_iovq_t *q, const void *p, size_t n);
/* Queue n bytes at buf->data+off by reference; takes a new reference on buf. */
int gw_iovq_ref(gw_iovq_t *q, gw_rbuf_t *buf, size_t off, size_t n);
/* For a write round: a queue without an entry array takes ents[0..cap) (gw_malloc'd: the queue
 * owns it from now on, and frees it with itself or when it grows past cap); the array goes back
 * at gw_iovq_unlend if the round left nothing in it. A queue with an array keeps its own and
 * ents stays the caller's: 1 when the queue took it, 0 when not. */
static inline int gw_iovq_lend(gw_iovq_t *q, gw_iovq_ent_t *ents, size_t cap)
{
    if (q->ents)
        return 0;
    q->ents = ents;
    q->cap = cap;
    q->head = 0;
    q->lent = 1;
    return 1;
}

/* The round is over: the lent array, given back when nothing is queued in it; NULL when none
 * was lent or the queue keeps it (bytes still queued in it, or it grew into one of its own). */
static inline gw_iovq_ent_t *gw_iovq_unlend(gw_iovq_t *q)
{
    if (!q->lent)
        return NULL;
    q->lent = 0;
    if (q->count)
        return NULL; /* bytes still queued in it: the queue keeps it */
    gw_iovq_ent_t *e = q->ents;
    q->ents = NULL;
    q->cap = 0;
    q->head = 0;
    return e;
}

/* Fill at most max iovecs with the head of the queue; returns how many were filled. */
size_t gw_iovq_peek(const gw_iovq_t *q, struct iovec *out, size_t max);
/* Move up to max whole entries from the head of the queue into out: the caller now owns each
 * entry's pin (release it with gw_rbuf_unref once the bytes are written, e.g. in uv_write's
 * callback). Returns how many were moved. This is the zero-copy path to writev. */
size_t gw_iovq_take(gw_iovq_t *q, gw_iovq_ent_t *out, size_t max);
/* n bytes were written: drop them from the head, releasing pins. */
void gw_iovq_consume(gw_iovq_t *q, size_t n);
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Copy the whole queue into dst (tests); returns bytes copied, at most cap. */
size_t gw_iovq_flatten(const gw_iovq_t *q, uint8_t *dst, size_t cap);
#endif

#endif
