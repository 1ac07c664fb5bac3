#include "buf.h"

#include <string.h>

#include "alloc.h"
#include "err.h"

gw_slice_t gw_slice_str(const char *s)
{
    return (gw_slice_t){(const uint8_t *)s, strlen(s)};
}

gw_slice_t gw_slice_trim(gw_slice_t s)
{
    while (s.len && (s.base[0] == ' ' || s.base[0] == '\t'))
        s.base++, s.len--;
    while (s.len && (s.base[s.len - 1] == ' ' || s.base[s.len - 1] == '\t'))
        s.len--;
    return s;
}

static uint8_t lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

/* x with the bytes A-Z lowercased: bit 7 of (b + 0x3f) ^ (b + 0x25) is set for b in A..Z (no
 * carry leaves a byte whose high bit is clear, and bytes with it set are left alone), shifted
 * down to 0x20. */
static uint64_t lower8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t low7 = x & ~highs;
    uint64_t ge_a = low7 + (0x80 - 'A') * ones, gt_z = low7 + (0x80 - 'Z' - 1) * ones;
    return x | (((ge_a ^ gt_z) & ~x & highs) >> 2);
}

int gw_mem_eq_nocase(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            if (lower(a[i]) != lower(b[i]))
                return 0;
        return 1;
    }
    uint64_t x, y;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y && lower8(x) != lower8(y))
            return 0;
    }
    memcpy(&x, a + n - 8, 8); /* the last word, overlapping the previous one */
    memcpy(&y, b + n - 8, 8);
    return x == y || lower8(x) == lower8(y);
}

/* dst[0..n) = src[0..n) with A-Z lowercased: eight bytes at a time (lower8), the last word
 * overlapping (lowercasing twice is harmless). */
void gw_ascii_lower(char *dst, const uint8_t *src, size_t n)
{
    if (n < 8) {
        if (n >= 4) { /* two overlapping halves, both read before either is written */
            uint32_t lo, hi;
            memcpy(&lo, src, 4);
            memcpy(&hi, src + n - 4, 4);
            uint64_t x = lower8((uint64_t)hi << 32 | lo);
            hi = (uint32_t)(x >> 32);
            lo = (uint32_t)x;
            memcpy(dst + n - 4, &hi, 4);
            memcpy(dst, &lo, 4);
            return;
        }
        for (size_t j = 0; j < n; j++) {
            uint8_t ch = src[j];
            dst[j] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        }
        return;
    }
    for (size_t j = 0;; j += 8) {
        if (j > n - 8)
            j = n - 8;
        uint64_t x;
        memcpy(&x, src + j, 8);
        x = lower8(x);
        memcpy(dst + j, &x, 8);
        if (j == n - 8)
            return;
    }
}

size_t gw_fmt_u64(char *dst, uint64_t v)
{
    /* two digits per division, written from the end of a scratch buffer */
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char tmp[20];
    size_t i = sizeof(tmp);
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        i -= 2;
        memcpy(tmp + i, pairs + 2 * r, 2);
    }
    if (v >= 10) {
        i -= 2;
        memcpy(tmp + i, pairs + 2 * v, 2);
    } else {
        tmp[--i] = (char)('0' + v);
    }
    size_t n = sizeof(tmp) - i;
    memcpy(dst, tmp + i, n);
    dst[n] = 0;
    return n;
}

/* ---- rbuf ---- */

gw_rbuf_t *gw_rbuf_new(size_t cap)
{
    gw_rbuf_t *b = gw_malloc(sizeof(*b) + cap);
    if (!b)
        return NULL;
    b->refs = 1;
    b->cap = cap;
    b->len = 0;
    return b;
}

gw_rbuf_t *gw_rbuf_ref(gw_rbuf_t *b)
{
    /* atomic: a cache entry on another worker may hold the same buffer (cache/store.c) */
    uint32_t was = __atomic_fetch_add(&b->refs, 1, __ATOMIC_RELAXED);
    GW_ASSERT(was > 0);
    return b;
}

void gw_rbuf_unref(gw_rbuf_t *b)
{
    if (!b)
        return;
    uint32_t was = __atomic_fetch_sub(&b->refs, 1, __ATOMIC_ACQ_REL);
    GW_ASSERT(was > 0);
    if (was == 1)
        gw_free(b);
}

/* ---- bytes ---- */

void gw_bytes_init(gw_bytes_t *b, size_t max)
{
    b->base = NULL;
    b->len = b->cap = 0;
    b->max = max ? max : SIZE_MAX;
}

void gw_bytes_free(gw_bytes_t *b)
{
    gw_free(b->base);
    b->base = NULL;
    b->len = b->cap = 0;
}

int gw_bytes__grow(gw_bytes_t *b, size_t n)
{
    if (n > b->max - b->len)
        return GW_E_LIMIT;
    size_t need = b->len + n;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max)
        cap = b->max;
    uint8_t *p = gw_realloc(b->base, cap);
    if (!p)
        return GW_E_NOMEM;
    b->base = p;
    b->cap = cap;
    return 0;
}

void gw_bytes_consume(gw_bytes_t *b, size_t n)
{
    GW_ASSERT(n <= b->len);
    memmove(b->base, b->base + n, b->len - n);
    b->len -= n;
}

/* ---- iovq ---- */

#define IOVQ_COPY_BLOCK 4096

void gw_iovq_init(gw_iovq_t *q)
{
    memset(q, 0, sizeof(*q));
}

void gw_iovq_free(gw_iovq_t *q)
{
    for (size_t i = 0; i < q->count; i++)
        gw_rbuf_unref(q->ents[(q->head + i) % q->cap].pin);
    gw_free(q->ents);
    gw_rbuf_unref(q->copy_buf);
    memset(q, 0, sizeof(*q));
}

static gw_iovq_ent_t *tail_ent(gw_iovq_t *q)
{
    return q->count ? &q->ents[(q->head + q->count - 1) % q->cap] : NULL;
}

static int push(gw_iovq_t *q, void *base, size_t len, gw_rbuf_t *pin)
{
    if (q->count == q->cap) {
        size_t ncap = q->cap ? q->cap * 2 : 16;
        gw_iovq_ent_t *n = gw_malloc(ncap * sizeof(*n));
        if (!n)
            return GW_E_NOMEM;
        for (size_t i = 0; i < q->count; i++)
            n[i] = q->ents[(q->head + i) % q->cap];
        gw_free(q->ents);
        q->ents = n;
        q->cap = ncap;
        q->head = 0;
        q->lent = 0; /* the lent array was freed: this one is the queue's own */
    }
    gw_iovq_ent_t *e = &q->ents[(q->head + q->count) % q->cap];
    e->iov.iov_base = base;
    e->iov.iov_len = len;
    e->pin = pin;
    q->count++;
    q->bytes += len;
    return 0;
}

int gw_iovq_copy(gw_iovq_t *q, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    gw_rbuf_t *cb = q->copy_buf;
    if (!cb || cb->cap - cb->len < n) {
        gw_rbuf_t *nb = gw_rbuf_new(n > IOVQ_COPY_BLOCK ? n : IOVQ_COPY_BLOCK);
        if (!nb)
            return GW_E_NOMEM;
        gw_rbuf_unref(q->copy_buf);
        q->copy_buf = cb = nb;
    }
    uint8_t *dst = cb->data + cb->len;
    memcpy(dst, p, n);
    cb->len += n;
    gw_iovq_ent_t *t = tail_ent(q);
    if (t && t->pin == cb && (uint8_t *)t->iov.iov_base + t->iov.iov_len == dst) {
        t->iov.iov_len += n;
        q->bytes += n;
        return 0;
    }
    int rv = push(q, dst, n, cb);
    if (rv < 0) {
        cb->len -= n;
        return rv;
    }
    gw_rbuf_ref(cb);
    return 0;
}

int gw_iovq_ref(gw_iovq_t *q, gw_rbuf_t *buf, size_t off, size_t n)
{
    if (n == 0)
        return 0;
    GW_ASSERT(off + n <= buf->cap);
    int rv = push(q, buf->data + off, n, buf);
    if (rv < 0)
        return rv;
    gw_rbuf_ref(buf);
    return 0;
}

size_t gw_iovq_peek(const gw_iovq_t *q, struct iovec *out, size_t max)
{
    size_t n = q->count < max ? q->count : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->ents[(q->head + i) % q->cap].iov;
    return n;
}

void gw_iovq_consume(gw_iovq_t *q, size_t n)
{
    GW_ASSERT(n <= q->bytes);
    q->bytes -= n;
    while (n > 0) {
        gw_iovq_ent_t *e = &q->ents[q->head];
        if (n < e->iov.iov_len) {
            e->iov.iov_base = (uint8_t *)e->iov.iov_base + n;
            e->iov.iov_len -= n;
            return;
        }
        n -= e->iov.iov_len;
        gw_rbuf_unref(e->pin);
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    /* Drop fully-consumed zero-length leftovers, and recycle the copy block when idle. */
    if (q->count == 0) {
        q->head = 0;
        if (q->copy_buf && q->copy_buf->refs == 1)
            q->copy_buf->len = 0;
    }
}

size_t gw_iovq_take(gw_iovq_t *q, gw_iovq_ent_t *out, size_t max)
{
    size_t n = 0;
    while (n < max && q->count) {
        out[n] = q->ents[q->head];
        q->bytes -= out[n].iov.iov_len;
        q->head = (q->head + 1) % q->cap;
        q->count--;
        n++;
    }
    if (q->count == 0)
        q->head = 0;
    /* the copy block is shared with the entries just taken: start a fresh one */
    if (n && q->copy_buf && __atomic_load_n(&q->copy_buf->refs, __ATOMIC_RELAXED) > 1) {
        gw_rbuf_unref(q->copy_buf);
        q->copy_buf = NULL;
    }
    return n;
}

#ifdef GW_TEST_API
size_t gw_iovq_flatten(const gw_iovq_t *q, uint8_t *dst, size_t cap)
{
    size_t off = 0;
    for (size_t i = 0; i < q->count && off < cap; i++) {
        const struct iovec *v = &q->ents[(q->head + i) % q->cap].iov;
        size_t n = v->iov_len < cap - off ? v->iov_len : cap - off;
        memcpy(dst + off, v->iov_base, n);
        off += n;
    }
    return off;
}
#endif
