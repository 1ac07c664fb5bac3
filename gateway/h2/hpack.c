/* h2/hpack.c — HPACK decoder and encoder (RFC 7541). */
#include "h2/hpack.h"

#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "h2/hpack_internal.h"

#define ENTRY_OVERHEAD 32 /* §4.1 */
#define STATIC_LEN 61

/* Appendix A. */
static const struct {
    gw_slice_t name, value;
} static_table[STATIC_LEN] = {
    {GW_SLICE_LIT(":authority"), GW_SLICE_LIT("")},                   /* 1 */
    {GW_SLICE_LIT(":method"), GW_SLICE_LIT("GET")},                   /* 2 */
    {GW_SLICE_LIT(":method"), GW_SLICE_LIT("POST")},                  /* 3 */
    {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/")},                       /* 4 */
    {GW_SLICE_LIT(":path"), GW_SLICE_LIT("/index.html")},             /* 5 */
    {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("http")},                  /* 6 */
    {GW_SLICE_LIT(":scheme"), GW_SLICE_LIT("https")},                 /* 7 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("200")},                   /* 8 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("204")},                   /* 9 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("206")},                   /* 10 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("304")},                   /* 11 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("400")},                   /* 12 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("404")},                   /* 13 */
    {GW_SLICE_LIT(":status"), GW_SLICE_LIT("500")},                   /* 14 */
    {GW_SLICE_LIT("accept-charset"), GW_SLICE_LIT("")},               /* 15 */
    {GW_SLICE_LIT("accept-encoding"), GW_SLICE_LIT("gzip, deflate")}, /* 16 */
    {GW_SLICE_LIT("accept-language"), GW_SLICE_LIT("")},              /* 17 */
    {GW_SLICE_LIT("accept-ranges"), GW_SLICE_LIT("")},                /* 18 */
    {GW_SLICE_LIT("accept"), GW_SLICE_LIT("")},                       /* 19 */
    {GW_SLICE_LIT("access-control-allow-origin"), GW_SLICE_LIT("")},  /* 20 */
    {GW_SLICE_LIT("age"), GW_SLICE_LIT("")},                          /* 21 */
    {GW_SLICE_LIT("allow"), GW_SLICE_LIT("")},                        /* 22 */
    {GW_SLICE_LIT("authorization"), GW_SLICE_LIT("")},                /* 23 */
    {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("")},                /* 24 */
    {GW_SLICE_LIT("content-disposition"), GW_SLICE_LIT("")},          /* 25 */
    {GW_SLICE_LIT("content-encoding"), GW_SLICE_LIT("")},             /* 26 */
    {GW_SLICE_LIT("content-language"), GW_SLICE_LIT("")},             /* 27 */
    {GW_SLICE_LIT("content-length"), GW_SLICE_LIT("")},               /* 28 */
    {GW_SLICE_LIT("content-location"), GW_SLICE_LIT("")},             /* 29 */
    {GW_SLICE_LIT("content-range"), GW_SLICE_LIT("")},                /* 30 */
    {GW_SLICE_LIT("content-type"), GW_SLICE_LIT("")},                 /* 31 */
    {GW_SLICE_LIT("cookie"), GW_SLICE_LIT("")},                       /* 32 */
    {GW_SLICE_LIT("date"), GW_SLICE_LIT("")},                         /* 33 */
    {GW_SLICE_LIT("etag"), GW_SLICE_LIT("")},                         /* 34 */
    {GW_SLICE_LIT("expect"), GW_SLICE_LIT("")},                       /* 35 */
    {GW_SLICE_LIT("expires"), GW_SLICE_LIT("")},                      /* 36 */
    {GW_SLICE_LIT("from"), GW_SLICE_LIT("")},                         /* 37 */
    {GW_SLICE_LIT("host"), GW_SLICE_LIT("")},                         /* 38 */
    {GW_SLICE_LIT("if-match"), GW_SLICE_LIT("")},                     /* 39 */
    {GW_SLICE_LIT("if-modified-since"), GW_SLICE_LIT("")},            /* 40 */
    {GW_SLICE_LIT("if-none-match"), GW_SLICE_LIT("")},                /* 41 */
    {GW_SLICE_LIT("if-range"), GW_SLICE_LIT("")},                     /* 42 */
    {GW_SLICE_LIT("if-unmodified-since"), GW_SLICE_LIT("")},          /* 43 */
    {GW_SLICE_LIT("last-modified"), GW_SLICE_LIT("")},                /* 44 */
    {GW_SLICE_LIT("link"), GW_SLICE_LIT("")},                         /* 45 */
    {GW_SLICE_LIT("location"), GW_SLICE_LIT("")},                     /* 46 */
    {GW_SLICE_LIT("max-forwards"), GW_SLICE_LIT("")},                 /* 47 */
    {GW_SLICE_LIT("proxy-authenticate"), GW_SLICE_LIT("")},           /* 48 */
    {GW_SLICE_LIT("proxy-authorization"), GW_SLICE_LIT("")},          /* 49 */
    {GW_SLICE_LIT("range"), GW_SLICE_LIT("")},                        /* 50 */
    {GW_SLICE_LIT("referer"), GW_SLICE_LIT("")},                      /* 51 */
    {GW_SLICE_LIT("refresh"), GW_SLICE_LIT("")},                      /* 52 */
    {GW_SLICE_LIT("retry-after"), GW_SLICE_LIT("")},                  /* 53 */
    {GW_SLICE_LIT("server"), GW_SLICE_LIT("")},                       /* 54 */
    {GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("")},                   /* 55 */
    {GW_SLICE_LIT("strict-transport-security"), GW_SLICE_LIT("")},    /* 56 */
    {GW_SLICE_LIT("transfer-encoding"), GW_SLICE_LIT("")},            /* 57 */
    {GW_SLICE_LIT("user-agent"), GW_SLICE_LIT("")},                   /* 58 */
    {GW_SLICE_LIT("vary"), GW_SLICE_LIT("")},                         /* 59 */
    {GW_SLICE_LIT("via"), GW_SLICE_LIT("")},                          /* 60 */
    {GW_SLICE_LIT("www-authenticate"), GW_SLICE_LIT("")},             /* 61 */
};

/* Encoder lookup: the 1-based index of the first static entry of each distinct name, by name
 * length (0 ends a row; generated from the table above). A name is compared with at most the
 * 6 entries of its length instead of all 61. */
#define STATIC_MAX_NAME 27
static const uint8_t static_by_len[STATIC_MAX_NAME + 1][7] = {
    {0, 0, 0, 0, 0, 0, 0},       /* 0 */
    {0, 0, 0, 0, 0, 0, 0},       /* 1 */
    {0, 0, 0, 0, 0, 0, 0},       /* 2 */
    {21, 60, 0, 0, 0, 0, 0},     /* 3 */
    {33, 34, 37, 38, 45, 59, 0}, /* 4 */
    {4, 22, 50, 0, 0, 0, 0},     /* 5 */
    {19, 32, 35, 54, 0, 0, 0},   /* 6 */
    {2, 6, 8, 36, 51, 52, 0},    /* 7 */
    {39, 42, 46, 0, 0, 0, 0},    /* 8 */
    {0, 0, 0, 0, 0, 0, 0},       /* 9 */
    {1, 55, 58, 0, 0, 0, 0},     /* 10 */
    {53, 0, 0, 0, 0, 0, 0},      /* 11 */
    {31, 47, 0, 0, 0, 0, 0},     /* 12 */
    {18, 23, 24, 30, 41, 44, 0}, /* 13 */
    {15, 28, 0, 0, 0, 0, 0},     /* 14 */
    {16, 17, 0, 0, 0, 0, 0},     /* 15 */
    {26, 27, 29, 61, 0, 0, 0},   /* 16 */
    {40, 57, 0, 0, 0, 0, 0},     /* 17 */
    {48, 0, 0, 0, 0, 0, 0},      /* 18 */
    {25, 43, 49, 0, 0, 0, 0},    /* 19 */
    {0, 0, 0, 0, 0, 0, 0},       /* 20 */
    {0, 0, 0, 0, 0, 0, 0},       /* 21 */
    {0, 0, 0, 0, 0, 0, 0},       /* 22 */
    {0, 0, 0, 0, 0, 0, 0},       /* 23 */
    {0, 0, 0, 0, 0, 0, 0},       /* 24 */
    {56, 0, 0, 0, 0, 0, 0},      /* 25 */
    {0, 0, 0, 0, 0, 0, 0},       /* 26 */
    {20, 0, 0, 0, 0, 0, 0},      /* 27 */
};

/* ---- Huffman -------------------------------------------------------------------------------- */

size_t gw_hpack_huff_encoded_len(const uint8_t *s, size_t len)
{
    /* two sums, so that the additions of neighbouring bytes do not wait on each other */
    size_t b0 = 0, b1 = 0, i = 0;
    for (; i + 1 < len; i += 2) {
        b0 += gw_hpack__huff_enc[s[i]].len;
        b1 += gw_hpack__huff_enc[s[i + 1]].len;
    }
    if (i < len)
        b0 += gw_hpack__huff_enc[s[i]].len;
    return (b0 + b1 + 7) / 8;
}

size_t gw_hpack_huff_encode(const uint8_t *s, size_t len, uint8_t *out)
{
    /* acc's low nbits bits are pending output, nbits < 32 between symbols: a code (30 bits at
     * most) fits, and 32 bits are stored at once, not a byte at a time (a response's literals
     * are dates, etags and lengths: most of an encoder's work when they are not indexed) */
    uint64_t acc = 0;
    unsigned nbits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        const gw_hpack_huff_sym_t *c = &gw_hpack__huff_enc[s[i]];
        acc = (acc << c->len) | c->code;
        nbits += c->len;
        if (nbits >= 32) {
            nbits -= 32;
            uint32_t w = (uint32_t)(acc >> nbits);
            out[o] = (uint8_t)(w >> 24);
            out[o + 1] = (uint8_t)(w >> 16);
            out[o + 2] = (uint8_t)(w >> 8);
            out[o + 3] = (uint8_t)w;
            o += 4;
        }
    }
    while (nbits >= 8) {
        nbits -= 8;
        out[o++] = (uint8_t)(acc >> nbits);
    }
    if (nbits) /* pad with the most significant bits of EOS: all ones (§5.2) */
        out[o++] = (uint8_t)((acc << (8 - nbits)) | (0xffu >> nbits));
    return o;
}

_Static_assert(GW_HPACK_HUFF_SYM == 1, "the decoder adds the flag to its output position");

int gw_hpack_huff_decode(const uint8_t *s, size_t len, gw_bytes_t *out)
{
    /* 5 bits is the shortest code; one byte more for the store of a nibble that decodes no
     * symbol, or the one after a failing nibble (failure is checked once per byte) */
    int rv = gw_bytes_reserve(out, len * 8 / 5 + 2);
    if (rv < 0)
        return rv;
    uint8_t *o = out->base + out->len;
    unsigned state = 0, flags = GW_HPACK_HUFF_ACCEPT;
    for (size_t i = 0; i < len; i++) {
        /* both nibbles without a branch: the symbol byte is stored always and kept when the
         * entry decodes one (GW_HPACK_HUFF_SYM is 1) */
        const gw_hpack_huff_dec_t *e = &gw_hpack__huff_dec[state][s[i] >> 4];
        *o = e->sym;
        o += e->flags & GW_HPACK_HUFF_SYM;
        unsigned f = e->flags;
        e = &gw_hpack__huff_dec[e->next][s[i] & 0xf];
        *o = e->sym;
        o += e->flags & GW_HPACK_HUFF_SYM;
        if ((f | e->flags) & GW_HPACK_HUFF_FAIL)
            return GW_E_COMPRESSION;
        state = e->next;
        flags = e->flags;
    }
    out->len = (size_t)(o - out->base);
    /* padding longer than 7 bits or not a prefix of EOS is an error (§5.2) */
    return flags & GW_HPACK_HUFF_ACCEPT ? 0 : GW_E_COMPRESSION;
}

/* The length gw_hpack_huff_decode() would append, without writing it (a string nobody reads
 * is checked, not materialised): the length, or GW_E_COMPRESSION. */
static ssize_t huff_decoded_len(const uint8_t *s, size_t len)
{
    size_t n = 0;
    unsigned state = 0, flags = GW_HPACK_HUFF_ACCEPT;
    for (size_t i = 0; i < len; i++) {
        const gw_hpack_huff_dec_t *e = &gw_hpack__huff_dec[state][s[i] >> 4];
        unsigned f = e->flags;
        n += f & GW_HPACK_HUFF_SYM;
        e = &gw_hpack__huff_dec[e->next][s[i] & 0xf];
        n += e->flags & GW_HPACK_HUFF_SYM;
        if ((f | e->flags) & GW_HPACK_HUFF_FAIL)
            return GW_E_COMPRESSION;
        state = e->next;
        flags = e->flags;
    }
    return flags & GW_HPACK_HUFF_ACCEPT ? (ssize_t)n : GW_E_COMPRESSION;
}

/* ---- dynamic table ----------------------------------------------------------------------------
 */

static void table_init(gw_hpack_table_t *t, size_t max)
{
    memset(t, 0, sizeof(*t));
    t->max = (uint32_t)max;
}

/* ---- storage: one block per table, [cap record offsets][bucket heads (encoder)][records].
 * A record is its entry's lengths followed by the name and value bytes, records in insertion
 * order from the oldest one's; an encoder's slots also hold each entry's hash and bucket chain,
 * so that a bucket walk reads the slots, and a record only when its hash matches. A look-up
 * that walks a response's fields finds them on a few adjacent lines, not in an allocation
 * each. */

typedef struct {
    uint32_t name_len, value_len;
} rec_t;

/* An encoder's slot: its record, and what a bucket walk reads before it (the decoder's slot
 * is the offset alone). */
typedef struct {
    uint32_t off;
    uint32_t hash; /* of name and value */
    uint32_t next; /* slot + 1 of the next older entry in this one's bucket, 0 = none */
} eslot_t;
#define STRIDE(t) ((t)->indexed ? sizeof(eslot_t) / sizeof(uint32_t) : 1)

/* the byte space grows in these (a table holds at most GW_HPACK_MAX_TABLE) */
#define ARENA_UNIT 32
/* bytes a record of n name and value bytes takes (headers stay 4-byte aligned) */
#define REC_SIZE(n) (sizeof(rec_t) + (((n) + 3) & ~(size_t)3))

static size_t heads_size(const gw_hpack_table_t *t, uint32_t cap)
{
    return t->indexed ? cap / 2 * sizeof(uint32_t) : 0;
}

static uint8_t *arena(const gw_hpack_table_t *t)
{
    return (uint8_t *)(t->offs + t->cap * STRIDE(t)) + heads_size(t, t->cap);
}

/* ring slot of entry i, 0 = the newest; the ring grows towards higher slots */
static uint32_t slot_of(const gw_hpack_table_t *t, size_t i)
{
    return (uint32_t)((t->head + t->cap - i) & (t->cap - 1));
}

/* slot s's offset (decoder or encoder), and an encoder's slot */
static uint32_t *off_at(const gw_hpack_table_t *t, uint32_t s)
{
    return &t->offs[s * STRIDE(t)];
}

static eslot_t *eslot(const gw_hpack_table_t *t, uint32_t s)
{
    return &((eslot_t *)t->offs)[s];
}

static rec_t *rec(const gw_hpack_table_t *t, uint32_t s)
{
    return (rec_t *)(arena(t) + *off_at(t, s));
}

static const uint8_t *rec_data(const rec_t *r)
{
    return (const uint8_t *)(r + 1);
}

int gw_hpack_table_get(const gw_hpack_table_t *t, size_t i, gw_hpack_entry_t *e)
{
    if (i >= t->len)
        return 0;
    const rec_t *r = rec(t, slot_of(t, i));
    *e = (gw_hpack_entry_t){rec_data(r), r->name_len, r->value_len};
    return 1;
}

/* ---- encoder index: the entries of a hash bucket are chained newest first through `next`, so
 * the first match of a bucket walk is the one with the lowest index, as in a walk of the ring
 * from the newest entry. */

static uint32_t *bucket(const gw_hpack_table_t *t, uint32_t hash)
{
    uint32_t *heads = t->offs + t->cap * STRIDE(t);
    return &heads[hash & (t->cap / 2 - 1)];
}

static void index_link(gw_hpack_table_t *t, uint32_t s)
{
    eslot_t *e = eslot(t, s);
    uint32_t *b = bucket(t, e->hash);
    e->next = *b;
    *b = s + 1;
}

/* Unlink slot s (the oldest entry, so the last of its chain; any entry would do). */
static void index_unlink(gw_hpack_table_t *t, uint32_t s)
{
    eslot_t *e = eslot(t, s);
    uint32_t *link = bucket(t, e->hash);
    while (*link != s + 1) {
        GW_ASSERT(*link != 0);
        link = &eslot(t, *link - 1)->next;
    }
    *link = e->next;
}

/* Index (62 up) of the newest entry equal to name: value with hash fh, or 0. */
static size_t index_find(const gw_hpack_table_t *t, gw_slice_t name, gw_slice_t value, uint32_t fh)
{
    if (!t->len)
        return 0;
    /* an encoder's table: the layout of arena() and bucket() without their tests */
    const eslot_t *es = (const eslot_t *)t->offs;
    const uint32_t *heads = (const uint32_t *)(es + t->cap);
    const uint8_t *a = (const uint8_t *)(heads + t->cap / 2);
    for (uint32_t s = heads[fh & (t->cap / 2 - 1)]; s; s = es[s - 1].next) {
        if (es[s - 1].hash != fh)
            continue;
        const rec_t *r = (const rec_t *)(a + es[s - 1].off);
        if (r->name_len == name.len && r->value_len == value.len &&
            gw_mem_eq(rec_data(r), name.base, name.len) &&
            gw_mem_eq(rec_data(r) + name.len, value.base, value.len))
            return STATIC_LEN + 1 + ((t->head + t->cap - (s - 1)) & (t->cap - 1));
    }
    return 0;
}

/* A response repeats the fields of the one before in the same order, and the first of them
 * entered the table one after the other, each in the slot after the one before: the encoder
 * looks for a field first in the slot after the last one found (for the block's first, where
 * the last block's run started), reading only that slot and its record, not the bucket heads
 * and chains, which are cold lines of their own when a connection's answers come one among
 * hundreds of others'. The table holds no two equal entries (an entry is added only when a
 * look-up did not find it), so a match here is the one the bucket walk finds. Records lie
 * oldest first, each right after the one before (table_add appends, moves keep the order):
 * the record of the slot after an entry other than the newest follows that entry's, so *rp,
 * when not NULL, is slot s's record, and the slot itself (its offset) is not read either.
 * Returns the index (62 up), or 0 (the slot is free or holds another field). On a match *rp
 * becomes the record of the slot after s when that one is known (a match below the newest),
 * else NULL; otherwise slot s's record, or NULL when s is free (the next field is looked for
 * in the same slot: a field that never enters the table, such as a content-length, sits
 * between two that do). */
static size_t slot_match(const gw_hpack_table_t *t, uint32_t s, gw_slice_t name, gw_slice_t value,
                         const rec_t **rp)
{
    const rec_t *r = *rp;
    *rp = NULL;
    if (!t->len)
        return 0;
    s &= t->cap - 1;
    uint32_t age = (t->head + t->cap - s) & (t->cap - 1); /* 0: the newest */
    if (age >= t->len)
        return 0;
    if (!r) {
        const eslot_t *es = (const eslot_t *)t->offs;
        const uint8_t *a = (const uint8_t *)((const uint32_t *)(es + t->cap) + t->cap / 2);
        r = (const rec_t *)(a + es[s].off);
    }
    if (r->name_len == name.len && r->value_len == value.len &&
        gw_mem_eq(rec_data(r), name.base, name.len) &&
        gw_mem_eq(rec_data(r) + name.len, value.base, value.len)) {
        if (age)
            *rp =
                (const rec_t *)((const uint8_t *)r + REC_SIZE((size_t)r->name_len + r->value_len));
        return STATIC_LEN + 1 + age;
    }
    *rp = r;
    return 0;
}

/* The slot of index idx (62 up) of t. */
static uint32_t slot_of_index(const gw_hpack_table_t *t, size_t idx)
{
    return slot_of(t, idx - STATIC_LEN - 1);
}

/* Offsets in the arena of the oldest record and past the newest (0, 0 when empty). */
static size_t bytes_start(const gw_hpack_table_t *t)
{
    return t->len ? *off_at(t, slot_of(t, t->len - 1)) : 0;
}

static size_t bytes_end(const gw_hpack_table_t *t)
{
    if (!t->len)
        return 0;
    const rec_t *r = rec(t, t->head);
    return *off_at(t, t->head) + REC_SIZE((size_t)r->name_len + r->value_len);
}

/* A record stays where it is until the arena is rebuilt (table_add relies on it: a name being
 * added may be the evicted entry's). */
static void evict_one(gw_hpack_table_t *t)
{
    uint32_t s = slot_of(t, t->len - 1);
    if (t->indexed)
        index_unlink(t, s);
    const rec_t *r = rec(t, s);
    t->size -= r->name_len + r->value_len + (uint32_t)ENTRY_OVERHEAD;
    t->len--;
}

static void table_resize(gw_hpack_table_t *t, size_t max)
{
    t->max = (uint32_t)max;
    while (t->size > t->max) /* §4.3 */
        evict_one(t);
}

static void table_free(gw_hpack_table_t *t)
{
    gw_free(t->offs);
    uint8_t indexed = t->indexed;
    memset(t, 0, sizeof(*t));
    t->indexed = indexed;
}

/* s lies in t's block (a record's bytes, live or evicted). */
static int in_block(const gw_hpack_table_t *t, gw_slice_t s)
{
    uintptr_t p = (uintptr_t)s.base, b = (uintptr_t)t->offs;
    return s.len && b && p >= b && p < (uintptr_t)(arena(t) + (size_t)t->bunits * ARENA_UNIT);
}

/* A new block with room for one more slot and a record of size rs: the records oldest first
 * in slots 0.., from offset 0 (chains rebuilt by the caller). The old block stays valid until
 * the caller frees it (the new entry's bytes may be in it). NULL when out of memory. */
static uint32_t *rebuild(gw_hpack_table_t *t, size_t rs, uint32_t *ncap_out, uint16_t *nunits_out)
{
    uint32_t ncap = t->len < t->cap ? t->cap : t->cap ? t->cap * 2 : 16;
    size_t start = bytes_start(t), live = bytes_end(t) - start;
    /* room to spare for later additions (a rebuild moves the live records), within what the
     * table's size can hold (§4.1: every entry's bytes count in it, and 32 for each, more
     * than its header and padding) */
    size_t need = live + rs, spare = need / 4;
    size_t units = (need + spare + ARENA_UNIT - 1) / ARENA_UNIT,
           most = ((need > t->max ? need : t->max) + ARENA_UNIT - 1) / ARENA_UNIT;
    if (units > most)
        units = most;
    size_t hs = heads_size(t, ncap), st = STRIDE(t);
    uint32_t *nb = gw_malloc(ncap * st * sizeof(*nb) + hs + units * ARENA_UNIT);
    if (!nb)
        return NULL;
    uint8_t *na = (uint8_t *)(nb + ncap * st) + hs;
    memset(nb + ncap * st, 0, hs);
    if (live)
        memcpy(na, arena(t) + start, live);
    for (uint32_t i = 0; i < t->len; i++) { /* oldest first into 0.. (chains: the caller) */
        const uint32_t *o = off_at(t, slot_of(t, t->len - 1 - i));
        nb[i * st] = *o - (uint32_t)start;
        if (t->indexed)
            ((eslot_t *)nb)[i].hash = ((const eslot_t *)o)->hash;
    }
    *ncap_out = ncap;
    *nunits_out = (uint16_t)units;
    return nb;
}

/* §4.4: evict until the entry fits; an entry larger than the table empties it. The hash is
 * the encoder's (of name and value); the decoder passes 0. */
static int table_add(gw_hpack_table_t *t, gw_slice_t name, gw_slice_t value, uint32_t hash)
{
    size_t esize = name.len + value.len + ENTRY_OVERHEAD;
    if (esize > t->max) {
        while (t->len)
            evict_one(t);
        return 0;
    }
    /* evictions leave the records in place: name may be an entry of this table (a literal
     * with an indexed name, §6.2.1) that makes room for the new one (§4.4) */
    while (t->size + esize > t->max)
        evict_one(t);
    size_t rs = REC_SIZE(name.len + value.len), end = bytes_end(t),
           room = (size_t)t->bunits * ARENA_UNIT;
    uint32_t *old = NULL;
    if (end + rs > room && t->len < t->cap && end - bytes_start(t) + rs <= room &&
        !in_block(t, name) && !in_block(t, value)) {
        /* the evicted records made the room: the live ones move to the front */
        size_t start = bytes_start(t);
        uint8_t *a = arena(t);
        memmove(a, a + start, end - start);
        for (uint32_t i = 0; i < t->len; i++)
            *off_at(t, slot_of(t, i)) -= (uint32_t)start;
        end -= start;
    }
    if (t->len == t->cap || end + rs > room) {
        uint32_t ncap;
        uint16_t units;
        uint32_t *nb = rebuild(t, rs, &ncap, &units);
        if (!nb)
            return GW_E_NOMEM;
        end = t->len ? bytes_end(t) - bytes_start(t) : 0;
        old = t->offs;
        t->offs = nb;
        t->cap = ncap;
        t->bunits = units;
        t->head = t->len ? t->len - 1 : ncap - 1;
        if (t->indexed)
            for (uint32_t i = 0; i < t->len; i++) /* oldest first: chains end newest first */
                index_link(t, i);
    }
    uint8_t *a = arena(t);
    uint8_t *dst = a + end + sizeof(rec_t);
    /* memmove: the name may be an evicted record's bytes at this very place (the header
     * written after, it may also overlap them) */
    if (name.len)
        memmove(dst, name.base, name.len);
    if (value.len)
        memmove(dst + name.len, value.base, value.len);
    gw_free(old); /* after the copies: name or value may be in it */
    t->head = (t->head + 1) & (t->cap - 1);
    *off_at(t, t->head) = (uint32_t)end;
    rec_t *r = (rec_t *)(a + end);
    *r = (rec_t){(uint32_t)name.len, (uint32_t)value.len};
    if (t->indexed) {
        eslot(t, t->head)->hash = hash;
        index_link(t, t->head);
    }
    t->len++;
    t->size += (uint32_t)esize; /* esize <= max, a 32-bit value */
    return 0;
}

/* Index space of §2.3.3: 1..61 static, then dynamic newest first. */
static inline __attribute__((always_inline)) int lookup(const gw_hpack_table_t *t, uint64_t idx,
                                                        gw_slice_t *name, gw_slice_t *value)
{
    if (idx == 0)
        return GW_E_COMPRESSION;
    if (idx <= STATIC_LEN) {
        *name = static_table[idx - 1].name;
        *value = static_table[idx - 1].value;
        return 0;
    }
    if (idx - STATIC_LEN - 1 >= t->len)
        return GW_E_COMPRESSION;
    const rec_t *r = rec(t, slot_of(t, (size_t)(idx - STATIC_LEN - 1)));
    *name = (gw_slice_t){rec_data(r), r->name_len};
    *value = (gw_slice_t){rec_data(r) + r->name_len, r->value_len};
    return 0;
}

/* ---- decoder -------------------------------------------------------------------------------- */

int gw_hpack_dec_init(gw_hpack_dec_t *d, size_t max_table_size)
{
    memset(d, 0, sizeof(*d));
    if (max_table_size > GW_HPACK_MAX_TABLE)
        max_table_size = GW_HPACK_MAX_TABLE;
    table_init(&d->t, max_table_size);
    d->max_allowed = (uint32_t)max_table_size;
    d->max_list = SIZE_MAX;
    return 0;
}

void gw_hpack_strbufs_free(gw_hpack_strbufs_t *b)
{
    gw_bytes_free(&b->name);
    gw_bytes_free(&b->value);
}

void gw_hpack_dec_trim(gw_hpack_dec_t *d)
{
    if (!d->bufs || d->shared_bufs)
        return;
    gw_hpack_strbufs_free(d->bufs);
    gw_free(d->bufs);
    d->bufs = NULL;
}

void gw_hpack_dec_share_bufs(gw_hpack_dec_t *d, gw_hpack_strbufs_t *bufs)
{
    gw_hpack_dec_trim(d);
    d->bufs = bufs;
    d->shared_bufs = bufs != NULL;
}

void gw_hpack_dec_free(gw_hpack_dec_t *d)
{
    table_free(&d->t);
    gw_hpack_dec_trim(d);
}

/* The string buffers, created on first use. NULL when out of memory. */
static gw_hpack_strbufs_t *strbufs(gw_hpack_dec_t *d)
{
    if (!d->bufs && (d->bufs = gw_malloc(sizeof(*d->bufs)))) {
        gw_bytes_init(&d->bufs->name, 0);
        gw_bytes_init(&d->bufs->value, 0);
    }
    return d->bufs;
}

void gw_hpack_dec_set_max_table_size(gw_hpack_dec_t *d, size_t max)
{
    if (max > GW_HPACK_MAX_TABLE)
        max = GW_HPACK_MAX_TABLE;
    d->max_allowed = (uint32_t)max;
    if (d->t.max > max)
        table_resize(&d->t, max);
}

void gw_hpack_dec_begin(gw_hpack_dec_t *d, size_t max_list_size)
{
    d->max_list = max_list_size;
    d->list_size = 0;
    d->fields = 0;
    d->overflow = 0;
    d->pending = 0;
}

#define NEED_MORE 1 /* internal: the representation is incomplete */

/* §5.1 integer with an n-bit prefix; values above 2^32-1 are refused. */
static int read_int(const uint8_t **pp, const uint8_t *end, unsigned n, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (p == end)
        return NEED_MORE;
    uint64_t max_prefix = (1u << n) - 1;
    uint64_t v = *p++ & max_prefix;
    if (v == max_prefix) {
        unsigned shift = 0;
        for (;;) {
            if (p == end)
                return NEED_MORE;
            uint8_t b = *p++;
            if (shift > 28)
                return GW_E_COMPRESSION;
            v += (uint64_t)(b & 0x7f) << shift;
            if (v > UINT32_MAX)
                return GW_E_COMPRESSION;
            shift += 7;
            if (!(b & 0x80))
                break;
        }
    }
    *pp = p;
    *out = v;
    return 0;
}

/* §5.2 string literal header: the H bit and the length, with the whole string in [*pp, end).
 * On success *pp points at the string's first byte. */
static int str_head(const uint8_t **pp, const uint8_t *end, int *huff, uint64_t *len)
{
    const uint8_t *p = *pp;
    if (p == end)
        return NEED_MORE;
    *huff = (*p & 0x80) != 0;
    int rv = read_int(&p, end, 7, len);
    if (rv)
        return rv;
    if ((uint64_t)(end - p) < *len)
        return NEED_MORE;
    *pp = p;
    return 0;
}

/* §5.2 string literal; the result points into the input or into buf. */
static int read_str(gw_hpack_dec_t *d, const uint8_t **pp, const uint8_t *end, int value,
                    gw_slice_t *out)
{
    const uint8_t *p = *pp;
    int huff;
    uint64_t len;
    int rv = str_head(&p, end, &huff, &len);
    if (rv)
        return rv;
    if (huff) {
        if (!strbufs(d))
            return GW_E_NOMEM;
        gw_bytes_t *buf = value ? &d->bufs->value : &d->bufs->name;
        buf->len = 0;
        rv = gw_hpack_huff_decode(p, (size_t)len, buf);
        if (rv < 0)
            return rv == GW_E_LIMIT ? GW_E_COMPRESSION : rv;
        *out = (gw_slice_t){buf->base, buf->len};
    } else {
        *out = (gw_slice_t){p, (size_t)len};
    }
    *pp = p + len;
    return 0;
}

/* §5.2 string literal that is neither reported nor added to the table: its decoded length,
 * Huffman code checked but not decoded anywhere. */
static int skip_str(const uint8_t **pp, const uint8_t *end, size_t *out)
{
    const uint8_t *p = *pp;
    int huff;
    uint64_t len;
    int rv = str_head(&p, end, &huff, &len);
    if (rv)
        return rv;
    if (huff) {
        ssize_t n = huff_decoded_len(p, (size_t)len);
        if (n < 0)
            return (int)n;
        *out = (size_t)n;
    } else {
        *out = (size_t)len;
    }
    *pp = p + len;
    return 0;
}

static void count_field(gw_hpack_dec_t *d, size_t name_len, size_t value_len)
{
    d->fields++;
    d->list_size += name_len + value_len + ENTRY_OVERHEAD;
    if (d->list_size > d->max_list)
        d->overflow = 1;
}

static int emit(gw_hpack_dec_t *d, gw_slice_t name, gw_slice_t value, unsigned flags,
                gw_hpack_field_cb cb, void *ud)
{
    count_field(d, name.len, value.len);
    if (d->overflow || !cb)
        return 0;
    gw_hpack_field_t f = {name, value, flags};
    return cb(ud, &f);
}

ssize_t gw_hpack_decode(gw_hpack_dec_t *d, const uint8_t *in, size_t len, int final,
                        gw_hpack_field_cb cb, void *user_data)
{
    d->pending = 0;
    if (len == 0)
        return 0; /* also keeps `in + len` defined when in is NULL */
    const uint8_t *p = in, *end = in + len;
    while (p < end) {
        const uint8_t *start = p;
        uint8_t b = *p;
        uint64_t idx;
        gw_slice_t name = {NULL, 0}, value;
        int rv;
        if (b & 0x80) { /* §6.1 indexed field */
            if ((rv = read_int(&p, end, 7, &idx)))
                goto partial_or_err;
            if ((rv = lookup(&d->t, idx, &name, &value)) < 0)
                return rv;
            if ((rv = emit(d, name, value, 0, cb, user_data)) < 0)
                return rv;
            continue;
        }
        if ((b & 0xe0) == 0x20) { /* §6.3 dynamic table size update */
            if ((rv = read_int(&p, end, 5, &idx)))
                goto partial_or_err;
            /* §4.2: only at the beginning of a block, never above what we advertised */
            if (d->fields > 0 || idx > d->max_allowed)
                return GW_E_COMPRESSION;
            table_resize(&d->t, (size_t)idx);
            continue;
        }
        unsigned prefix, flags = 0;
        int add = 0;
        if ((b & 0xc0) == 0x40) { /* §6.2.1 with incremental indexing */
            prefix = 6;
            add = 1;
        } else {
            prefix = 4; /* §6.2.2 without indexing (0000), §6.2.3 never indexed (0001) */
            if (b & 0x10)
                flags = GW_HPACK_F_NEVER_INDEX;
        }
        if ((rv = read_int(&p, end, prefix, &idx)))
            goto partial_or_err;
        gw_slice_t ignored;
        if (idx && (rv = lookup(&d->t, idx, &name, &ignored)) < 0)
            return rv;
        if (!add && (!cb || d->overflow)) {
            /* Table-only mode: a field that is not reported (no callback, as for a block on a
             * stream we reset, or past max_list_size) and not added to the table is checked
             * (Huffman code, §5.2) and counted but not materialised: no copy, no buffer
             * (a 3-byte literal naming a 4 KB entry must not cost 4 KB). */
            size_t nl = name.len, vl;
            if (!idx && (rv = skip_str(&p, end, &nl)))
                goto partial_or_err;
            if ((rv = skip_str(&p, end, &vl)))
                goto partial_or_err;
            count_field(d, nl, vl);
            continue;
        }
        /* an indexed name points into the table: table_add() copies it before evicting */
        if (!idx && (rv = read_str(d, &p, end, 0, &name))) {
            goto partial_or_err;
        }
        if ((rv = read_str(d, &p, end, 1, &value)))
            goto partial_or_err;
        if ((rv = emit(d, name, value, flags, cb, user_data)) < 0)
            return rv;
        if (add && (rv = table_add(&d->t, name, value, 0)) < 0)
            return rv;
        continue;
    partial_or_err:
        if (rv < 0)
            return rv;
        /* incomplete representation */
        if (final)
            return GW_E_COMPRESSION;
        d->pending = 1;
        return (ssize_t)(start - in);
    }
    return (ssize_t)(p - in);
}

int gw_hpack_dec_end(gw_hpack_dec_t *d)
{
    if (d->pending)
        return GW_E_COMPRESSION;
    return d->overflow ? GW_E_LIMIT : 0;
}

/* ---- encoder -------------------------------------------------------------------------------- */

int gw_hpack_enc_init(gw_hpack_enc_t *e, size_t max_table_size)
{
    memset(e, 0, sizeof(*e));
    e->own_max = (uint32_t)max_table_size;
    e->peer_max = 4096; /* §6.5.2 initial value */
    table_init(&e->t, max_table_size < 4096 ? max_table_size : 4096);
    e->t.indexed = 1;
    e->min_pending = UINT32_MAX;
    /* our own cap below the initial 4096 must be announced */
    e->update_pending = e->t.max != 4096;
    if (e->update_pending)
        e->min_pending = e->t.max;
    return 0;
}

void gw_hpack_enc_free(gw_hpack_enc_t *e)
{
    table_free(&e->t);
}

void gw_hpack_enc_set_peer_max(gw_hpack_enc_t *e, size_t peer_max)
{
    e->peer_max = (uint32_t)peer_max;
    size_t n = peer_max < e->own_max ? peer_max : e->own_max;
    if (n == e->t.max && !e->update_pending)
        return;
    table_resize(&e->t, n);
    if (n < e->min_pending)
        e->min_pending = (uint32_t)n;
    e->update_pending = 1;
}

/* §5.1 integer with an n-bit prefix at o (at most 1 + 10 bytes); returns the end. */
static uint8_t *put_int(uint8_t *o, uint8_t first, unsigned n, uint64_t v)
{
    uint64_t max_prefix = (1u << n) - 1;
    if (v < max_prefix) {
        *o++ = (uint8_t)(first | v);
        return o;
    }
    *o++ = (uint8_t)(first | max_prefix);
    v -= max_prefix;
    while (v >= 128) {
        *o++ = (uint8_t)(0x80 | (v & 0x7f));
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    return o;
}

/* §5.2 string literal at o, Huffman coded when that is shorter (room: 11 + s.len bytes). */
static uint8_t *put_str(uint8_t *o, gw_slice_t s)
{
    size_t hl = gw_hpack_huff_encoded_len(s.base, s.len);
    if (hl < s.len) {
        o = put_int(o, 0x80, 7, hl);
        return o + gw_hpack_huff_encode(s.base, s.len, o);
    }
    o = put_int(o, 0, 7, s.len);
    if (s.len)
        memcpy(o, s.base, s.len);
    return o + s.len;
}

/* Bytes put_int() / put_str() write. */
static size_t int_len(unsigned n, uint64_t v)
{
    if (v < (1u << n) - 1)
        return 1;
    uint8_t tmp[16];
    return (size_t)(put_int(tmp, 0, n, v) - tmp);
}

static size_t str_len(gw_slice_t s)
{
    size_t hl = gw_hpack_huff_encoded_len(s.base, s.len), l = hl < s.len ? hl : s.len;
    return int_len(7, l) + l;
}

/* Names whose fields never enter the encoder's table. SENSITIVE: literals never indexed
 * (§7.1.3). VOLATILE: values that rarely repeat, literals without indexing: they would only
 * push out entries that do (a request id is new on every response).
 * content-length, date, etag and last-modified are indexed: a gateway answers the same resource
 * (same size, validators) many times a second, and date changes once a second, so the dynamic
 * table turns them into one-byte references (a 1 KiB GET's response head: 9 bytes). Not
 * indexing content-length, etag and last-modified (each resource of a page has its own) was
 * measured and not kept (docs/bench.md): a repeated answer's head grows by 42 bytes, and the
 * Huffman coding of the three values costs more instructions (about 1,500 a 1 KiB answer)
 * than the table's cache misses it saves (about 1.5 of 8). */
enum { NAME_INDEXABLE, NAME_SENSITIVE, NAME_VOLATILE };

/* One switch on the length, then one comparison: called for every field the run does not
 * find, before the hash. Names are lowercase. */
static int name_kind(gw_slice_t name)
{
    const char *k;
    int kind;
    switch (name.len) {
    case 3:
        k = "age", kind = NAME_VOLATILE;
        break;
    case 5:
        k = ":path", kind = NAME_VOLATILE;
        break;
    case 6:
        k = "cookie", kind = NAME_SENSITIVE;
        break;
    case 10:
        k = "set-cookie", kind = NAME_SENSITIVE;
        break;
    case 12:
        k = "x-request-id", kind = NAME_VOLATILE;
        break;
    case 13:
        k = "authorization", kind = NAME_SENSITIVE;
        break;
    case 19:
        k = "proxy-authorization", kind = NAME_SENSITIVE;
        break;
    default:
        return NAME_INDEXABLE;
    }
    return name.base[0] == (uint8_t)k[0] && gw_mem_eq(name.base, k, name.len) ? kind
                                                                              : NAME_INDEXABLE;
}

/* A 32-bit hash of s[0..n) continuing from h (multiply-xor, eight bytes a step; the last
 * step reads the final eight bytes, overlapping): the dynamic table is searched by comparing
 * hashes, bytes only on a hash match. */
static inline __attribute__((always_inline)) uint64_t mix(uint64_t h, const uint8_t *s, size_t n)
{
    const uint64_t k = 0x100000001b3ull;
    uint64_t w;
    if (n < 8) {
        if (n >= 4) { /* two overlapping 4-byte reads and the length decide the word */
            uint32_t lo, hi;
            memcpy(&lo, s, 4);
            memcpy(&hi, s + n - 4, 4);
            w = ((uint64_t)hi << 32 | lo) ^ n;
        } else {
            w = n;
            for (size_t i = 0; i < n; i++)
                w = (w << 8) | s[i];
        }
        h = (h ^ w) * k;
        return h ^ (h >> 29);
    }
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    memcpy(&w, s + n - 8, 8);
    h = (h ^ w ^ n) * k;
    return h ^ (h >> 29);
}

static uint32_t fold(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

/* Static entries (0-based) whose name the next entry shares: :method, :path, :scheme, the
 * first six :status (Appendix A). Only these groups carry values. */
#define STATIC_SAME_NEXT                                                                           \
    ((1ull << 1) | (1ull << 3) | (1ull << 5) | (1ull << 7) | (1ull << 8) | (1ull << 9) |           \
     (1ull << 10) | (1ull << 11) | (1ull << 12))

/* Best index for a field: *full = 1 when name and value match. 0 when none. fh: the hash of
 * name and value; dyn_full: whether to look for name and value in the dynamic table (the
 * caller may know it holds no such entry); dyn_name: whether to look for the name alone there
 * (a walk of every entry when the static table has no such name; not for a name that never
 * enters the table, such as x-request-id). */
static size_t find(const gw_hpack_table_t *t, gw_slice_t name, gw_slice_t value, uint32_t fh,
                   int dyn_full, int dyn_name, int *full)
{
    size_t name_idx = 0;
    *full = 0;
    const uint8_t *cand = name.len <= STATIC_MAX_NAME ? static_by_len[name.len] : NULL;
    for (; cand && *cand; cand++) {
        size_t i = (size_t)*cand - 1;
        if (static_table[i].name.base[0] != name.base[0] ||
            !gw_mem_eq(static_table[i].name.base, name.base, name.len))
            continue;
        name_idx = i + 1;
        break;
    }
    /* entries of one name are adjacent (the pseudo-headers with their common values) */
    for (size_t i = name_idx - 1; name_idx; i++) {
        if (static_table[i].value.len == value.len &&
            gw_mem_eq(static_table[i].value.base, value.base, value.len)) {
            *full = 1;
            return i + 1;
        }
        if (!(STATIC_SAME_NEXT & (1ull << i)))
            break;
    }
    size_t idx = dyn_full ? index_find(t, name, value, fh) : 0;
    if (idx) {
        *full = 1;
        return idx;
    }
    if (name_idx || !dyn_name)
        return name_idx;
    /* (no static name) the newest entry of that name: walking the ring down from head */
    size_t j = t->head;
    for (size_t i = 0; i < t->len; i++, j = j ? j - 1 : t->cap - 1) {
        const rec_t *r = rec(t, (uint32_t)j);
        if (r->name_len == name.len && gw_mem_eq(rec_data(r), name.base, name.len))
            return STATIC_LEN + 1 + i;
    }
    return 0;
}

int gw_hpack_encode(gw_hpack_enc_t *e, const gw_hpack_field_t *fields, size_t n, gw_bytes_t *out)
{
    size_t mark = out->len;
    int rv = 0;
    uint8_t *o;
    if (e->update_pending) {
        /* §4.2: the smallest size reached since the last block, then the current one */
        int two = e->min_pending < e->t.max;
        if ((rv = gw_bytes_reserve(out, (two ? int_len(5, e->min_pending) : 0) +
                                            int_len(5, e->t.max))) < 0)
            return rv;
        o = out->base + out->len;
        if (two)
            o = put_int(o, 0x20, 5, e->min_pending);
        o = put_int(o, 0x20, 5, e->t.max);
        out->len = (size_t)(o - out->base);
    }
    /* the slot + 1 where the next field is looked for first (slot_match), 0: nowhere */
    uint32_t next = e->run_start, run_start = 0;
    const rec_t *next_rec = NULL; /* its record, when known (slot_match) */
    for (size_t i = 0; i < n; i++) {
        const gw_hpack_field_t *f = &fields[i];
        int full;
        /* Most fields of a response repeat one the dynamic table holds: the slot after the
         * last one found, else one bucket walk (not for a field kept out of the table: a
         * sensitive or volatile one). Such an entry was added as neither sensitive nor equal
         * to a static entry, so the slow path below would find the same index; a
         * pseudo-header (:status) is looked for there, the static table first, as most
         * statuses are static entries, which the dynamic table never holds. */
        int searched =
            !(f->flags & GW_HPACK_F_NEVER_INDEX) && !(f->name.len && f->name.base[0] == ':');
        const rec_t *r = next_rec;
        size_t idx = searched && next ? slot_match(&e->t, next - 1, f->name, f->value, &r) : 0;
        next_rec = r;
        uint32_t fh = 0;
        int kind = NAME_INDEXABLE, never = 0;
        if (!idx) {
            kind = name_kind(f->name);
            never = kind == NAME_SENSITIVE || (f->flags & GW_HPACK_F_NEVER_INDEX);
            /* no entry of a sensitive or volatile name is ever added: not looked for */
            if (kind == NAME_INDEXABLE) {
                fh = fold(mix(mix(0xcbf29ce484222325ull, f->name.base, f->name.len), f->value.base,
                              f->value.len));
                if (searched && (idx = index_find(&e->t, f->name, f->value, fh)))
                    next_rec = NULL; /* its successor's record is not known */
            }
        }
        if (idx) {
            uint32_t s = slot_of_index(&e->t, idx);
            if (!run_start)
                run_start = s + 1;
            next = ((s + 1) & (e->t.cap - 1)) + 1;
            if ((rv = gw_bytes_reserve(out, int_len(7, idx))) < 0)
                goto fail;
            out->len = (size_t)(put_int(out->base + out->len, 0x80, 7, idx) - out->base);
            continue;
        }
        /* unless searched: the dynamic table was just searched for name and value, or holds
         * no entry of that name at all */
        idx = find(&e->t, f->name, f->value, fh, !searched && kind == NAME_INDEXABLE,
                   kind == NAME_INDEXABLE, &full);
        int indexed = full && !never;
        size_t esize = f->name.len + f->value.len + ENTRY_OVERHEAD;
        int index = !indexed && kind == NAME_INDEXABLE && !never &&
                    !(f->flags & GW_HPACK_F_NO_INDEX) && esize <= e->t.max / 2;
        unsigned prefix = indexed ? 7 : index ? 6 : 4;
        /* at most: the index (11 bytes), two string lengths (11 each) and the strings, which
         * Huffman coding never makes longer than they are (it is used only when shorter);
         * near out's cap, the exact size decides */
        if ((rv = gw_bytes_reserve(out, 33 + f->name.len + f->value.len)) == GW_E_LIMIT)
            rv = gw_bytes_reserve(
                out, int_len(prefix, idx) +
                         (indexed ? 0 : (idx ? 0 : str_len(f->name)) + str_len(f->value)));
        if (rv < 0)
            goto fail;
        o = out->base + out->len;
        if (indexed) {
            o = put_int(o, 0x80, 7, idx);
            out->len = (size_t)(o - out->base);
            continue;
        }
        o = put_int(o, index ? 0x40 : never ? 0x10 : 0x00, prefix, idx);
        if (!idx)
            o = put_str(o, f->name);
        o = put_str(o, f->value);
        out->len = (size_t)(o - out->base);
        if (index && (rv = table_add(&e->t, f->name, f->value, fh)) < 0)
            goto fail;
        if (index)
            next_rec = NULL; /* the records may have moved */
    }
    e->update_pending = 0;
    e->min_pending = UINT32_MAX;
    if (run_start) /* a slot past 65534 (tables of more than 2 MiB / 32 entries) is not kept */
        e->run_start = run_start <= UINT16_MAX ? (uint16_t)run_start : 0;
    return 0;
fail:
    /* The table may already hold fields of this block: the peer never sees them, so the
     * encoder state must be dropped with the connection. Callers treat this as fatal. */
    out->len = mark;
    return rv;
}
