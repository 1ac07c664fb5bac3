/* cache/store.c — the store of the cache: one per process, shared by the workers.
 *
 * Shards. The store is split by key hash into shards, each with its own lock, hash index,
 * queues and 1/shards of the byte budget: a lookup takes the lock of its key's shard only, so
 * a hit on one shard never waits for another, and one shard's eviction never stalls the rest.
 * There are as many shards as keep each at least 4 max_object large (up to 64), so that the
 * largest object does not empty a shard.
 *
 * Memory. The budget counts everything the store holds, each allocation as the heap holds it
 * (malloc's chunk: the size asked, 8 bytes of header, rounded up to 16; heap()): each entry's
 * block (its struct, key, Vary key, head, its array of body slices), the buffers its body is
 * held in, the hash tables' bucket arrays and the ghost keys. A body arrives in the origin's
 * read buffers (16 KiB, 64 KiB once a read fills one: back/io.c), which a keep-alive
 * connection fills with the heads and bodies of several answers: a reference to a 300-byte
 * body would pin 16 KiB, shared with its neighbours. Hence the copy rule at put (run_kept()):
 * a run of the body's slices into one buffer stays a reference (zero copy, the buffer charged
 * whole) when it fills at least 3/4 of that buffer; every other run is copied into one buffer
 * of the exact size (charged as such). So a small answer costs its length, not a read buffer's;
 * a large one copies at most its two ends; and a buffer kept by reference is kept by one entry
 * only (any other answer's share of it is below 1/4, so copied), never charged twice: the
 * charge is what the entries pin, within a few % of the allocator's own count
 * (test_cache_store's copy_rule_charge_is_what_is_held: 0.5 % after a scan of keep-alive
 * reads, while without the rule the same scan charged 3x what was held and kept 1/4 of the
 * objects). What the charge does not see: the allocator's free lists and fragmentation, and the
 * buffers readers and in-flight clients still hold after an entry left the store. glibc gives
 * each worker thread its own arena, and a block returns to the arena it came from: when one
 * worker's insertions evict what another allocated, the freed memory stays in the other's
 * arena, usable by it alone: RSS went up to 118 MiB above its baseline for a 64 MiB store
 * under a scan from two workers (test_cache_memory). So after each memory/16 bytes evicted, a
 * trim is due (gw_cache_trim_due, read by the caller after a put): the proxy asks the
 * process's one trimmer (server/heap.c, through gw_proxy_set_trim) for malloc_trim(0), which
 * returns the free pages of every arena, on libuv's thread pool, one at a time with the idle
 * trim's, not on the inserting worker's loop (median 0.5 ms, at most 4.6 ms measured, 94 times
 * in a scan that evicts 400 MiB, each a stall of that worker's connections while it ran
 * there): the same scan stays 68-83 MiB above it. What is left is the pages live blocks share
 * with freed ones. A purge, gw_cache_remove and a reload's walk (gw_cache_keep_routes) count
 * towards the same memory/16 as evictions: a purge of everything makes a trim due, which its
 * caller (the admin's purge, the reload) runs, as no put may come after it.
 * An object whose charge is above max_object is refused.
 *
 * Eviction: S3-FIFO (Juncheng Yang, Yazhuo Zhang, Ziyue Qiu, Yao Yue, K. V. Rashmi, "FIFO
 * queues are all you need for cache eviction", SOSP 2023). A new object enters a small FIFO
 * (10 % of the shard's bytes); when it leaves it, it goes on to the main FIFO if it was read
 * while there, else out, its key hash kept in a ghost FIFO; an object whose key is in the ghost
 * queue enters main directly. Main reinserts an object read since it last passed (a 2-bit
 * counter, decremented at each pass), and evicts the others. Chosen over SIEVE (Zhang et al.,
 * NSDI 2024) because a scan of one-time keys passes through the small queue only and never
 * reaches main, where the hot set lives: the property a cache in front of crawled origins
 * needs (test_cache_store's hot_set_survives_a_scan measures it against LRU). Both are FIFO
 * queues without a move on a hit: a hit bumps a counter, under the shard's lock.
 *
 * Entries are refcounted: the store holds one reference while the entry is indexed, each
 * gw_cache_get() one more. Eviction, replacement and purge only unlink it and drop the store's
 * reference, so a reader keeps the entry, its head and its body buffers alive until its
 * gw_cache_unref(). What is unlinked is freed after the lock is released.
 *
 * Routes. Each entry keeps the tag of the route that stored it (gw_cache_route_tag). A reload
 * names the routes whose answers stay (gw_cache_keep_routes): the entries of the others are
 * removed at once, by one walk over the shards, rather than lazily at a lookup: a lookup never
 * reaches the entries of a URL no caching route serves any more, so lazily they would hold
 * their memory until eviction pushed them out, and the walk runs on the reload's thread, off
 * the request path, each shard locked for its own entries only. The set of kept routes is read
 * by gw_cache_put under its shard's lock, so a put either comes before the walk of its shard
 * (and is walked) or sees the new set (and is refused). A route that stays may lose URLs to a
 * new one in front of it (a longer path prefix, a more precise host): a lookup names its route
 * and an entry of another one is a miss (gw_cache_get), which the new route's answer replaces,
 * so a URL is never answered with what another route's upstream said.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/list.h"

enum { Q_NONE = 0, Q_SMALL, Q_MAIN };

typedef struct entry {
    gw_cache_entry_t pub; /* what the caller reads */
    uint32_t refs;        /* atomic: the store's (while indexed) and the readers' */
    uint8_t freq;         /* S3-FIFO's 2-bit counter: reads since the last pass */
    uint8_t where;        /* Q_* */
    uint8_t claimed;      /* atomic: a background revalidation holds it (gw_cache_claim) */
    uint64_t hash;
    struct entry *hnext; /* hash chain; after unlinking, the list of entries to release */
    gw_list_t qlink;     /* in small or main */
    const char *vkey;    /* the Vary key it was stored under */
    size_t vkeylen;
    uint64_t route; /* the tag of the route that stored it */
} entry_t;

typedef struct ghost {
    uint64_t hash;
    struct ghost *hnext;
    gw_list_t qlink;
} ghost_t;

/* The invalidation generations per shard (gw_cache_gen): keys share a slot by their hash, so
 * a purge of one key makes an answer to another of its slot that was in flight not stored:
 * rare, and only a store skipped. */
#define GEN_SLOTS 256u

typedef struct {
    pthread_mutex_t lock;
    entry_t **tab; /* chained hash index, nbuckets a power of two */
    size_t nbuckets, count;
    ghost_t **gtab;
    size_t gbuckets, gcount;
    gw_list_t small, main, ghost;     /* FIFOs: new at the front, the tail leaves */
    size_t small_bytes, small_target; /* small's bytes, and its share (see evict()) */
    size_t used, budget;              /* charged bytes, the shard's share of memory */
    uint64_t hits, misses, inserts, replaced, evictions, purged, dropped, refused;
    /* atomic, written under lock: the invalidation generations of the keys whose hash has
     * these low bits, one more at each purge or remove of such a key (gw_cache_gen) */
    uint64_t gens[GEN_SLOTS];
    char pad[64]; /* keep two shards' locks off one cache line */
} shard_t;

/* The routes whose answers are kept: tags, sorted. */
typedef struct {
    size_t n;
    uint64_t tag[];
} routes_t;

struct gw_cache {
    size_t memory, max_object;
    size_t evicted; /* atomic: bytes evicted, for trim_after() */
    int trim_due;   /* atomic: a trim is due (gw_cache_trim_due) */
    int refs_only;  /* tests: no copy rule, every body by reference (gw_cache_copy_rule) */
    unsigned nshards;
    shard_t *shards;
    /* NULL: every route. Replaced by gw_cache_keep_routes (under routes_mu), read by
     * gw_cache_put under a shard's lock (atomic loads and stores of the pointer) */
    routes_t *routes;
    pthread_mutex_t routes_mu;
    uint64_t bg[GW_CACHE_BG_N]; /* atomic: background revalidations ended, by result */
    uint64_t ev[GW_CACHE_EV_N]; /* atomic: gw_cache_count()'s events */
    uint64_t epoch; /* atomic: one more at each purge by prefix (every key's gw_cache_gen) */
};

#define GHOST_MIN 16

/* FNV-1a mixed again (MurmurHash3's fmix64): FNV's high bits barely move between keys that
 * differ in their last bytes (URLs). The top 6 bits choose the shard, the low bits the bucket.
 * Only the bytes before a 0 byte count: a URL's key holds none, and the key of an entry derived
 * from another (a compressed copy: gateway/proxy/cache.c's copy_key) is that entry's key, a 0
 * byte and more, so the copies of a URL's entries sit in the bucket of the URL and a purge of
 * the URL finds them there (is_copy_of); they share its ghost too (a copy that leaves the small
 * queue unread marks the URL as seen, as its entry would). */
static uint64_t key_hash(const char *k, size_t n)
{
    const char *z = memchr(k, 0, n);
    if (z)
        n = (size_t)(z - k);
    uint64_t h = gw_fnv1a64(GW_FNV64_BASIS, k, n);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static shard_t *shard_of(gw_cache_t *c, uint64_t h)
{
    return &c->shards[(h >> 58) & (c->nshards - 1)];
}

/* ---- entries ------------------------------------------------------------------------------- */

static void entry_free(entry_t *e)
{
    for (size_t i = 0; i < e->pub.nbody; i++)
        gw_rbuf_unref(e->pub.body[i].buf);
    gw_free(e);
}

void gw_cache_unref(gw_cache_entry_t *pub)
{
    if (!pub)
        return;
    entry_t *e = GW_CONTAINER_OF(pub, entry_t, pub);
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0)
        entry_free(e);
}

/* What one allocation of n bytes holds: malloc's chunk for it (glibc: an 8-byte header, 16-byte
 * steps, 32 at least), so that the charge is what the heap gives out, not what was asked. */
static size_t heap(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* The copy rule. A body arrives in the origin's read buffers (16 or 64 KiB: back/io.c), which
 * often hold a head and several small answers too: a reference to a few bytes of one pins all
 * of it. The slices into one buffer stay references when together they fill at least 3/4 of it
 * (then no other stored answer keeps that buffer: their share of it is below 1/4 and copied);
 * the others are copied, in their order, into one right-sized buffer. A large body keeps its
 * middle buffers by reference (no copy) and copies its two ends; a small one is copied whole;
 * a stored body put again (a 304's refresh) is kept as it is, its copy included.
 *
 * For the run of consecutive slices into one buffer at b[i] (up to *end): whether it is kept,
 * and in *first whether it is the first run into that buffer (the one the buffer is charged
 * at). Slices into one buffer are consecutive but in a stored body put again, whose copy holds
 * both ends. */
static int run_kept(const gw_rslice_t *b, size_t n, size_t i, size_t *end, int refs_only,
                    int *first)
{
    size_t j = i, bytes = 0;
    for (; j < n && b[j].buf == b[i].buf; j++)
        bytes += b[j].len;
    *end = j;
    *first = 1;
    for (size_t k = 0; k < n; k++)
        if ((k < i || k >= j) && b[k].buf == b[i].buf) {
            bytes += b[k].len;
            *first &= k > i;
        }
    return refs_only || bytes >= b[i].buf->cap - b[i].buf->cap / 4;
}

/* What the body of p becomes under the copy rule: its slices, the bytes copied, and the charge
 * of the buffers it holds (each kept buffer and the copy, whole, as the heap holds them). */
typedef struct {
    size_t nslices, copied, charge;
} pack_t;

static void pack_plan(const gw_rslice_t *b, size_t n, int refs_only, pack_t *pk)
{
    *pk = (pack_t){0, 0, 0};
    int in_copy = 0; /* the previous run was copied: this one extends its slice */
    for (size_t i = 0, end; i < n; i = end) {
        int first;
        if (run_kept(b, n, i, &end, refs_only, &first)) {
            pk->nslices += end - i;
            if (first)
                pk->charge += heap(sizeof(gw_rbuf_t) + b[i].buf->cap);
            in_copy = 0;
            continue;
        }
        for (size_t j = i; j < end; j++)
            pk->copied += b[j].len;
        pk->nslices += !in_copy;
        in_copy = 1;
    }
    if (pk->copied)
        pk->charge += heap(sizeof(gw_rbuf_t) + pk->copied);
}

/* The body under the copy rule into out[0..pk->nslices), each slice holding a reference; the
 * copied bytes go to cp (pk->copied bytes; NULL when none). */
static void pack_fill(const gw_rslice_t *b, size_t n, int refs_only, gw_rbuf_t *cp,
                      gw_rslice_t *out)
{
    size_t k = 0, at = 0;
    int in_copy = 0;
    for (size_t i = 0, end; i < n; i = end) {
        int first;
        if (run_kept(b, n, i, &end, refs_only, &first)) {
            for (size_t j = i; j < end; j++)
                out[k++] = (gw_rslice_t){gw_rbuf_ref(b[j].buf), b[j].off, b[j].len};
            in_copy = 0;
            continue;
        }
        if (!in_copy)
            out[k++] = (gw_rslice_t){gw_rbuf_ref(cp), at, 0};
        for (size_t j = i; j < end; j++) {
            memcpy(cp->data + at, b[j].buf->data + b[j].off, b[j].len);
            at += b[j].len;
            out[k - 1].len += b[j].len;
        }
        in_copy = 1;
    }
    if (cp)
        cp->len = at;
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* The size of the entry's block for p with a Vary key of vlen bytes and nslices body slices. */
static size_t block_size(const gw_cache_put_t *p, size_t vlen, size_t nslices)
{
    size_t head = 0;
    for (size_t i = 0; i < p->nfields; i++)
        head += p->fields[i].name.len + p->fields[i].value.len;
    return align8(sizeof(entry_t)) + align8(p->nfields * sizeof(gw_field_t)) +
           align8(nslices * sizeof(gw_rslice_t)) + p->keylen + vlen + head + 2;
}

/* A new entry (one block) for p with its Vary key, its body packed by the copy rule (pk); NULL
 * out of memory. */
static entry_t *entry_new(const gw_cache_t *c, const gw_cache_put_t *p, size_t vlen,
                          const pack_t *pk)
{
    size_t off_fields = align8(sizeof(entry_t));
    size_t off_body = off_fields + align8(p->nfields * sizeof(gw_field_t));
    size_t off_bytes = off_body + align8(pk->nslices * sizeof(gw_rslice_t));
    size_t total = block_size(p, vlen, pk->nslices);
    gw_rbuf_t *cp = NULL;
    if (pk->copied && !(cp = gw_rbuf_new(pk->copied)))
        return NULL;
    char *blk = gw_malloc(total);
    if (!blk) {
        gw_rbuf_unref(cp);
        return NULL;
    }
    entry_t *e = (entry_t *)(void *)blk;
    memset(e, 0, sizeof(*e));
    gw_field_t *f = (gw_field_t *)(void *)(blk + off_fields);
    gw_rslice_t *b = (gw_rslice_t *)(void *)(blk + off_body);
    char *at = blk + off_bytes;
    memcpy(at, p->key, p->keylen);
    at[p->keylen] = 0;
    e->pub.key = at;
    e->pub.keylen = p->keylen;
    at += p->keylen + 1;
    gw_cache_vary_key(p->fields, p->nfields, p->req_fields, p->nreq, at, vlen);
    at[vlen] = 0;
    e->vkey = at;
    e->vkeylen = vlen;
    at += vlen + 1;
    for (size_t i = 0; i < p->nfields; i++) {
        const gw_field_t *s = &p->fields[i];
        memcpy(at, s->name.base, s->name.len);
        f[i].name = (gw_slice_t){(const uint8_t *)at, s->name.len};
        at += s->name.len;
        if (s->value.len)
            memcpy(at, s->value.base, s->value.len);
        f[i].value = (gw_slice_t){(const uint8_t *)at, s->value.len};
        at += s->value.len;
    }
    pack_fill(p->body, p->nbody, c->refs_only, cp, b);
    gw_rbuf_unref(cp); /* the slices hold theirs */
    uint64_t blen = 0;
    for (size_t i = 0; i < pk->nslices; i++)
        blen += b[i].len;
    e->pub.status = p->status;
    e->pub.fields = f;
    e->pub.nfields = p->nfields;
    e->pub.body = b;
    e->pub.nbody = pk->nslices;
    e->pub.body_len = blen;
    e->pub.meta = p->meta;
    static uint64_t last_id; /* every store of the process: ids are never reused */
    e->pub.id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
    e->pub.charge = heap(total) + pk->charge;
    e->route = p->route;
    e->refs = 1; /* the store's */
    e->hash = key_hash(p->key, p->keylen);
    gw_list_init(&e->qlink);
    return e;
}

/* ---- the index ------------------------------------------------------------------------------ */

static void index_grow(shard_t *s)
{
    size_t nb = s->nbuckets * 2;
    entry_t **t = gw_calloc(nb, sizeof(*t));
    if (!t)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < s->nbuckets; i++)
        for (entry_t *e = s->tab[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = t[e->hash & (nb - 1)];
            t[e->hash & (nb - 1)] = e;
        }
    gw_free(s->tab);
    s->used += heap(nb * sizeof(*t)) - heap(s->nbuckets * sizeof(*t));
    s->tab = t;
    s->nbuckets = nb;
}

/* Unlink e from the index and its queue; the caller drops the store's reference (after the
 * lock) through *release. */
static void unlink_entry(shard_t *s, entry_t *e, entry_t **release)
{
    entry_t **pp = &s->tab[e->hash & (s->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->where == Q_SMALL)
        s->small_bytes -= e->pub.charge;
    gw_list_remove(&e->qlink);
    e->where = Q_NONE;
    s->count--;
    s->used -= e->pub.charge;
    e->hnext = *release;
    *release = e;
}

/* Whether e is a copy derived from an entry of key (its key is key, a 0 byte, then anything
 * ending in " ID": copy_key in gateway/proxy/cache.c), of the entry whose id is id, or of any
 * entry of key when id is 0 (ids start at 1). */
static int is_copy_of(const entry_t *e, const char *key, size_t keylen, uint64_t id)
{
    if (e->pub.keylen <= keylen || e->pub.key[keylen] != 0 || memcmp(e->pub.key, key, keylen))
        return 0;
    if (!id)
        return 1;
    char tail[24];
    int tl = snprintf(tail, sizeof(tail), " %llu", (unsigned long long)id);
    return tl > 0 && e->pub.keylen >= keylen + 1 + (size_t)tl &&
           !memcmp(e->pub.key + e->pub.keylen - (size_t)tl, tail, (size_t)tl);
}

/* Unlink the copies of the entry of key whose id is id (any entry of key: 0) from bucket b
 * of s; returns how many. A copy is found by its entry's id only, so once that entry is
 * replaced or removed nothing would reach it again: it goes with it rather than holding its
 * memory until eviction. */
static size_t unlink_copies(shard_t *s, size_t b, const char *key, size_t keylen, uint64_t id,
                            entry_t **release)
{
    size_t n = 0;
    for (entry_t *e = s->tab[b], *next; e; e = next) {
        next = e->hnext;
        if (is_copy_of(e, key, keylen, id)) {
            unlink_entry(s, e, release);
            n++;
        }
    }
    return n;
}

/* Drop the store's reference to each entry of the list; returns the bytes they were charged. */
static size_t release_all(entry_t *e)
{
    size_t n = 0;
    while (e) {
        entry_t *next = e->hnext;
        n += e->pub.charge;
        gw_cache_unref(&e->pub);
        e = next;
    }
    return n;
}

/* Eviction frees what other workers allocated: the heap's free pages are to be given back to
 * the system after each memory/16 bytes evicted (see "Memory" above): a trim is due. */
static void trim_after(gw_cache_t *c, size_t freed)
{
    size_t step = c->memory >= 16 ? c->memory / 16 : 1;
    size_t was = __atomic_fetch_add(&c->evicted, freed, __ATOMIC_RELAXED);
    if (freed && was / step != (was + freed) / step)
        __atomic_store_n(&c->trim_due, 1, __ATOMIC_RELEASE);
}

int gw_cache_trim_due(gw_cache_t *c)
{
    return __atomic_exchange_n(&c->trim_due, 0, __ATOMIC_ACQ_REL);
}

/* Unlink every entry of s for which drop(e, arg) says so; returns how many. */
static size_t sweep(shard_t *s, int (*drop)(const entry_t *, const void *), const void *arg,
                    entry_t **release)
{
    size_t k = 0;
    for (size_t b = 0; b < s->nbuckets; b++) {
        entry_t *e = s->tab[b];
        while (e) {
            entry_t *next = e->hnext;
            if (drop(e, arg)) {
                unlink_entry(s, e, release);
                k++;
            }
            e = next;
        }
    }
    return k;
}

/* ---- the ghost queue: hashes of keys evicted from small --------------------------------- */

static ghost_t **ghost_slot(shard_t *s, uint64_t h)
{
    ghost_t **pp = &s->gtab[h & (s->gbuckets - 1)];
    while (*pp && (*pp)->hash != h)
        pp = &(*pp)->hnext;
    return pp;
}

static void ghost_drop(shard_t *s, ghost_t **pp)
{
    ghost_t *g = *pp;
    *pp = g->hnext;
    gw_list_remove(&g->qlink);
    s->gcount--;
    s->used -= heap(sizeof(*g));
    gw_free(g);
}

/* Whether h is in the ghost queue; removed when it is (it goes on to main). */
static int ghost_take(shard_t *s, uint64_t h)
{
    ghost_t **pp = ghost_slot(s, h);
    if (!*pp)
        return 0;
    ghost_drop(s, pp);
    return 1;
}

/* Double the ghost index once it holds as many keys as buckets, as index_grow() does the
 * entries': the ghost queue holds as many keys as the shard holds entries, tens of thousands in
 * a large shard, and a fixed table made every put search long chains (256 buckets held 7,000
 * keys a shard in a 64 MiB store: chains of 28, searched twice a put). */
static void ghost_grow(shard_t *s)
{
    size_t nb = s->gbuckets * 2;
    ghost_t **t = gw_calloc(nb, sizeof(*t));
    if (!t)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < s->gbuckets; i++)
        for (ghost_t *g = s->gtab[i], *next; g; g = next) {
            next = g->hnext;
            g->hnext = t[g->hash & (nb - 1)];
            t[g->hash & (nb - 1)] = g;
        }
    gw_free(s->gtab);
    s->used += heap(nb * sizeof(*t)) - heap(s->gbuckets * sizeof(*t));
    s->gtab = t;
    s->gbuckets = nb;
}

static void ghost_add(shard_t *s, uint64_t h)
{
    ghost_t **pp = ghost_slot(s, h);
    if (*pp)
        return;
    ghost_t *g = gw_malloc(sizeof(*g));
    if (!g)
        return; /* the key is forgotten: it would have entered small anyway */
    g->hash = h;
    g->hnext = NULL;
    *pp = g;
    gw_list_push_front(&s->ghost, &g->qlink);
    s->gcount++;
    s->used += heap(sizeof(*g));
    if (s->gcount > s->gbuckets)
        ghost_grow(s); /* charged: the caller's eviction loop makes room for it */
    /* the ghost queue holds as many keys as the shard holds entries (the paper sizes it as
     * main), at least GHOST_MIN */
    size_t cap = s->count > GHOST_MIN ? s->count : GHOST_MIN;
    while (s->gcount > cap) {
        ghost_t *old = GW_CONTAINER_OF(s->ghost.prev, ghost_t, qlink);
        ghost_drop(s, ghost_slot(s, old->hash));
    }
}

/* ---- S3-FIFO eviction ---------------------------------------------------------------------- */

static void push_main(shard_t *s, entry_t *e)
{
    gw_list_push_front(&s->main, &e->qlink);
    e->where = Q_MAIN;
}

/* One object out of small: the tail goes to main when it was read while in small, else out
 * (its key to the ghost queue). 1 when one was evicted. */
static int evict_small(shard_t *s, entry_t **release)
{
    while (!gw_list_empty(&s->small)) {
        entry_t *t = GW_CONTAINER_OF(s->small.prev, entry_t, qlink);
        if (t->freq > 0) {
            gw_list_remove(&t->qlink);
            s->small_bytes -= t->pub.charge;
            t->freq = 0;
            push_main(s, t);
            continue;
        }
        uint64_t h = t->hash;
        unlink_entry(s, t, release);
        s->evictions++;
        ghost_add(s, h);
        return 1;
    }
    return 0;
}

/* One object out of main: a tail read since its last pass goes back to the front with one
 * read less; the first one that was not is evicted. */
static int evict_main(shard_t *s, entry_t **release)
{
    while (!gw_list_empty(&s->main)) {
        entry_t *t = GW_CONTAINER_OF(s->main.prev, entry_t, qlink);
        if (t->freq > 0) {
            t->freq--;
            gw_list_remove(&t->qlink);
            gw_list_push_front(&s->main, &t->qlink);
            continue;
        }
        unlink_entry(s, t, release);
        s->evictions++;
        return 1;
    }
    return 0;
}

/* Make room for need more bytes. Before the new object is in: an object is never evicted by
 * its own insertion (as libCacheSim's S3-FIFO does it). */
static void evict(shard_t *s, size_t need, entry_t **release)
{
    while (s->used + need > s->budget) {
        /* small while it holds its share of the bytes (or main is empty) */
        int from_small = !gw_list_empty(&s->small) &&
                         (s->small_bytes >= s->small_target || gw_list_empty(&s->main));
        if (from_small ? evict_small(s, release) : evict_main(s, release))
            continue;
        if (evict_small(s, release) || evict_main(s, release))
            continue;
        /* no entry left: only ghosts and the index remain */
        if (!s->gcount)
            break;
        ghost_t *old = GW_CONTAINER_OF(s->ghost.prev, ghost_t, qlink);
        ghost_drop(s, ghost_slot(s, old->hash));
    }
}

/* ---- the store ------------------------------------------------------------------------------ */

gw_cache_t *gw_cache_new(const gw_cache_opts_t *o)
{
    if (!o->memory || !o->max_object || o->max_object > o->memory || o->shards > 64 ||
        (o->shards & (o->shards - 1)))
        return NULL;
    unsigned n = o->shards;
    if (!n) {
        n = 1;
        while (n < 64 && o->memory / (n * 2) >= 4 * o->max_object)
            n *= 2;
    }
    gw_cache_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->memory = o->memory;
    c->max_object = o->max_object;
    c->nshards = n;
    pthread_mutex_init(&c->routes_mu, NULL);
    c->shards = gw_calloc(n, sizeof(shard_t));
    if (!c->shards)
        goto fail;
    size_t fixed = sizeof(*c) + n * sizeof(shard_t);
    size_t each = o->memory > fixed ? (o->memory - fixed) / n : 0;
    for (unsigned i = 0; i < n; i++) {
        shard_t *s = &c->shards[i];
        s->nbuckets = 64;
        s->gbuckets = 64; /* both grow with what they index (index_grow, ghost_grow) */
        s->tab = gw_calloc(s->nbuckets, sizeof(*s->tab));
        s->gtab = gw_calloc(s->gbuckets, sizeof(*s->gtab));
        pthread_mutex_init(&s->lock, NULL);
        gw_list_init(&s->small);
        gw_list_init(&s->main);
        gw_list_init(&s->ghost);
        s->budget = each;
        /* the paper's 10 %, but at least one max_object (objects have sizes here: a small
         * queue smaller than an object would evict each one at the next insertion), at most
         * half */
        s->small_target = each / 10 > o->max_object ? each / 10 : o->max_object;
        if (s->small_target > each / 2)
            s->small_target = each / 2;
        s->used = heap(s->nbuckets * sizeof(*s->tab)) + heap(s->gbuckets * sizeof(*s->gtab));
        if (!s->tab || !s->gtab) {
            c->nshards = i + 1;
            goto fail;
        }
    }
    return c;
fail:
    gw_cache_del(c);
    return NULL;
}

void gw_cache_del(gw_cache_t *c)
{
    if (!c)
        return;
    for (unsigned i = 0; c->shards && i < c->nshards; i++) {
        shard_t *s = &c->shards[i];
        entry_t *release = NULL;
        for (size_t b = 0; s->tab && b < s->nbuckets; b++)
            while (s->tab[b])
                unlink_entry(s, s->tab[b], &release);
        release_all(release);
        while (s->gtab && s->gcount) {
            ghost_t *old = GW_CONTAINER_OF(s->ghost.prev, ghost_t, qlink);
            ghost_drop(s, ghost_slot(s, old->hash));
        }
        gw_free(s->tab);
        gw_free(s->gtab);
        pthread_mutex_destroy(&s->lock);
    }
    gw_free(c->shards);
    gw_free(c->routes);
    pthread_mutex_destroy(&c->routes_mu);
    gw_free(c);
}

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
unsigned gw_cache_shards(const gw_cache_t *c)
{
    return c->nshards;
}

void gw_cache_copy_rule(gw_cache_t *c, int on)
{
    c->refs_only = !on;
}

size_t gw_cache_ghost_chain_max(gw_cache_t *c)
{
    size_t max = 0;
    for (unsigned i = 0; i < c->nshards; i++) {
        shard_t *s = &c->shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t b = 0; b < s->gbuckets; b++) {
            size_t n = 0;
            for (const ghost_t *g = s->gtab[b]; g; g = g->hnext)
                n++;
            max = n > max ? n : max;
        }
        pthread_mutex_unlock(&s->lock);
    }
    return max;
}
#endif

/* Whether the answers of route r are kept (under any shard's lock: see gw_cache_keep_routes). */
static int route_kept(const gw_cache_t *c, uint64_t r)
{
    const routes_t *set = __atomic_load_n(&c->routes, __ATOMIC_ACQUIRE);
    if (!set)
        return 1;
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->tag[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < set->n && set->tag[lo] == r;
}

/* ---- invalidation generations ----------------------------------------------------------- */

static uint64_t *gen_slot(shard_t *s, uint64_t h)
{
    return &s->gens[h & (GEN_SLOTS - 1)];
}

/* The generation of the keys of hash h in s: never 0 (a put's 0 asks for no check). */
static uint64_t gen_of(gw_cache_t *c, shard_t *s, uint64_t h)
{
    return 1 + __atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE) +
           __atomic_load_n(gen_slot(s, h), __ATOMIC_ACQUIRE);
}

/* A key of hash h was invalidated (under s's lock): the answers in flight for it are not
 * stored (gw_cache_put's gen). */
static void gen_bump(shard_t *s, uint64_t h)
{
    __atomic_add_fetch(gen_slot(s, h), 1, __ATOMIC_ACQ_REL);
}

uint64_t gw_cache_gen(gw_cache_t *c, const char *key, size_t keylen)
{
    uint64_t h = key_hash(key, keylen);
    return gen_of(c, shard_of(c, h), h);
}

int gw_cache_put(gw_cache_t *c, const gw_cache_put_t *p)
{
    ssize_t vlen = gw_cache_vary_key(p->fields, p->nfields, p->req_fields, p->nreq, NULL, 0);
    if (vlen < 0)
        return GW_E_INVAL;
    uint64_t h = key_hash(p->key, p->keylen);
    shard_t *s = shard_of(c, h);
    /* the charge before anything is allocated or copied: a refused object costs nothing */
    pack_t pk;
    pack_plan(p->body, p->nbody, c->refs_only, &pk);
    size_t charge = heap(block_size(p, (size_t)vlen, pk.nslices)) + pk.charge;
    if (charge > c->max_object) {
        pthread_mutex_lock(&s->lock);
        s->refused++;
        pthread_mutex_unlock(&s->lock);
        return GW_E_LIMIT;
    }
    entry_t *e = entry_new(c, p, (size_t)vlen, &pk);
    if (!e)
        return GW_E_NOMEM;
    GW_ASSERT(e->pub.charge == charge);
    entry_t *release = NULL;
    pthread_mutex_lock(&s->lock);
    if (!route_kept(c, p->route)) {
        pthread_mutex_unlock(&s->lock);
        gw_cache_unref(&e->pub); /* the store's reference: the only one */
        return GW_E_NOENT;
    }
    /* purged or removed since the request left (RFC 9111 §4.4 racing the answer): what the
     * origin said may be from before the change, and must not bring the entry back. Checked
     * under the lock every purge and remove of this key takes to bump its generation, and a
     * purge by prefix bumps the epoch before it sweeps the shards */
    if (p->gen && gen_of(c, s, h) != p->gen) {
        pthread_mutex_unlock(&s->lock);
        gw_cache_unref(&e->pub);
        return GW_E_CLOSED;
    }
    /* the same key and Vary key: the newer answer replaces the older (§4.3.4's outcome: a 304
     * refreshes the head, the body buffers are shared by reference) and keeps its place: an
     * object in main stays there with its reads, rather than starting over in small */
    int to_main = 0;
    for (entry_t *o = s->tab[h & (s->nbuckets - 1)]; o; o = o->hnext)
        if (o->hash == h && o->pub.keylen == p->keylen && !memcmp(o->pub.key, p->key, p->keylen) &&
            o->vkeylen == e->vkeylen && !memcmp(o->vkey, e->vkey, e->vkeylen)) {
            to_main = o->where == Q_MAIN;
            e->freq = o->freq;
            uint64_t old_id = o->pub.id;
            unlink_entry(s, o, &release);
            /* the copies made of the old answer are found by its id only: they go with it */
            s->replaced +=
                1 + unlink_copies(s, h & (s->nbuckets - 1), p->key, p->keylen, old_id, &release);
            break;
        }
    int ghost = ghost_take(s, h) || to_main;
    evict(s, charge, &release);
    if (s->count >= s->nbuckets)
        index_grow(s);
    size_t b = h & (s->nbuckets - 1);
    e->hnext = s->tab[b];
    s->tab[b] = e;
    s->count++;
    s->used += charge;
    s->inserts++;
    if (ghost) {
        push_main(s, e); /* S3-FIFO: seen recently, evicted too early: straight to main (or a
                            replacement of an object there) */
    } else {
        gw_list_push_front(&s->small, &e->qlink);
        e->where = Q_SMALL;
        s->small_bytes += charge;
    }
    /* what the index grew by (rarely past the budget: the next insertion evicts for it) */
    if (s->used > s->budget)
        evict(s, 0, &release);
    pthread_mutex_unlock(&s->lock);
    trim_after(c, release_all(release));
    return 0;
}

/* Whether the request fields match e's Vary key (computed against e's own Vary lines): one
 * pass into a local buffer, a second one only for a key longer than it. */
static int vary_matches(const entry_t *e, const gw_field_t *req, size_t n)
{
    char local[512];
    ssize_t len = gw_cache_vary_key(e->pub.fields, e->pub.nfields, req, n, local, sizeof(local));
    if (len < 0 || (size_t)len != e->vkeylen)
        return 0;
    if ((size_t)len <= sizeof(local))
        return !memcmp(local, e->vkey, (size_t)len);
    char *buf = gw_malloc((size_t)len);
    if (!buf)
        return 0;
    gw_cache_vary_key(e->pub.fields, e->pub.nfields, req, n, buf, (size_t)len);
    int eq = !memcmp(buf, e->vkey, (size_t)len);
    gw_free(buf);
    return eq;
}

int gw_cache_vary_matches(const gw_cache_entry_t *e, const gw_field_t *req, size_t n)
{
    return vary_matches(GW_CONTAINER_OF(e, const entry_t, pub), req, n);
}

/* gw_cache_get, counting the lookup in the shard's hits or misses when `count`. */
static gw_cache_entry_t *lookup(gw_cache_t *c, const char *key, size_t keylen, uint64_t route,
                                const gw_field_t *req, size_t n, int count)
{
    uint64_t h = key_hash(key, keylen);
    shard_t *s = shard_of(c, h);
    entry_t *hit = NULL;
    pthread_mutex_lock(&s->lock);
    for (entry_t *e = s->tab[h & (s->nbuckets - 1)]; e && !hit; e = e->hnext)
        if (e->hash == h && e->route == route && e->pub.keylen == keylen &&
            !memcmp(e->pub.key, key, keylen) && vary_matches(e, req, n))
            hit = e;
    if (hit) {
        if (hit->freq < 3)
            hit->freq++;
        __atomic_add_fetch(&hit->refs, 1, __ATOMIC_RELAXED);
        s->hits += count != 0;
    } else {
        s->misses += count != 0;
    }
    pthread_mutex_unlock(&s->lock);
    return hit ? &hit->pub : NULL;
}

gw_cache_entry_t *gw_cache_get(gw_cache_t *c, const char *key, size_t keylen, uint64_t route,
                               const gw_field_t *req, size_t n)
{
    return lookup(c, key, keylen, route, req, n, 1);
}

gw_cache_entry_t *gw_cache_peek(gw_cache_t *c, const char *key, size_t keylen, uint64_t route,
                                const gw_field_t *req, size_t n)
{
    return lookup(c, key, keylen, route, req, n, 0);
}

size_t gw_cache_purge(gw_cache_t *c, const char *key, size_t keylen)
{
    uint64_t h = key_hash(key, keylen);
    shard_t *s = shard_of(c, h);
    entry_t *release = NULL;
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    gen_bump(s, h);
    entry_t *e = s->tab[h & (s->nbuckets - 1)];
    while (e) {
        entry_t *next = e->hnext;
        /* every variant, and the copies made of them (their keys hash as the URL's) */
        if (e->hash == h && ((e->pub.keylen == keylen && !memcmp(e->pub.key, key, keylen)) ||
                             is_copy_of(e, key, keylen, 0))) {
            unlink_entry(s, e, &release);
            n++;
        }
        e = next;
    }
    s->purged += n;
    pthread_mutex_unlock(&s->lock);
    trim_after(c, release_all(release)); /* as evictions do: store.c's "Memory" */
    return n;
}

int gw_cache_remove(gw_cache_t *c, gw_cache_entry_t *pub)
{
    entry_t *x = GW_CONTAINER_OF(pub, entry_t, pub);
    shard_t *s = shard_of(c, x->hash);
    entry_t *release = NULL;
    int found = 0;
    pthread_mutex_lock(&s->lock);
    size_t b = x->hash & (s->nbuckets - 1);
    for (entry_t *e = s->tab[b]; e && !found; e = e->hnext)
        found = e == x;
    if (found) {
        gen_bump(s, x->hash);
        uint64_t id = x->pub.id;
        unlink_entry(s, x, &release);
        s->purged += 1 + unlink_copies(s, b, x->pub.key, x->pub.keylen, id, &release);
    }
    pthread_mutex_unlock(&s->lock);
    trim_after(c, release_all(release));
    return found;
}

typedef struct {
    const char *p;
    size_t len;
} prefix_t;

static int has_prefix(const entry_t *e, const void *arg)
{
    const prefix_t *x = arg;
    return e->pub.keylen >= x->len && !memcmp(e->pub.key, x->p, x->len);
}

size_t gw_cache_purge_prefix(gw_cache_t *c, const char *prefix, size_t len)
{
    prefix_t x = {prefix, len};
    size_t n = 0;
    __atomic_add_fetch(&c->epoch, 1, __ATOMIC_ACQ_REL); /* before any shard is swept */
    for (unsigned i = 0; i < c->nshards; i++) {
        shard_t *s = &c->shards[i];
        entry_t *release = NULL;
        pthread_mutex_lock(&s->lock);
        size_t k = sweep(s, has_prefix, &x, &release);
        s->purged += k;
        pthread_mutex_unlock(&s->lock);
        trim_after(c, release_all(release));
        n += k;
    }
    return n;
}

static int route_gone(const entry_t *e, const void *arg)
{
    return !route_kept(arg, e->route);
}

static int tag_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

ssize_t gw_cache_keep_routes(gw_cache_t *c, const uint64_t *routes, size_t n)
{
    routes_t *set = gw_malloc(sizeof(*set) + n * sizeof(uint64_t));
    if (!set)
        return GW_E_NOMEM;
    set->n = n;
    if (n) {
        memcpy(set->tag, routes, n * sizeof(uint64_t));
        qsort(set->tag, n, sizeof(uint64_t), tag_cmp);
    }
    pthread_mutex_lock(&c->routes_mu);
    routes_t *old = c->routes;
    __atomic_store_n(&c->routes, set, __ATOMIC_RELEASE);
    size_t dropped = 0;
    for (unsigned i = 0; i < c->nshards; i++) {
        shard_t *s = &c->shards[i];
        entry_t *release = NULL;
        pthread_mutex_lock(&s->lock);
        size_t k = sweep(s, route_gone, c, &release);
        s->dropped += k;
        pthread_mutex_unlock(&s->lock);
        trim_after(c, release_all(release));
        dropped += k;
    }
    pthread_mutex_unlock(&c->routes_mu);
    /* every put reads the set under a shard's lock, and each lock was taken since the new set
     * was published: none reads the old one any more */
    gw_free(old);
    return (ssize_t)dropped;
}

void gw_cache_stats(gw_cache_t *c, gw_cache_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    st->bytes = sizeof(*c) + c->nshards * sizeof(shard_t);
    for (unsigned i = 0; i < c->nshards; i++) {
        shard_t *s = &c->shards[i];
        pthread_mutex_lock(&s->lock);
        st->hits += s->hits;
        st->misses += s->misses;
        st->inserts += s->inserts;
        st->replaced += s->replaced;
        st->evictions += s->evictions;
        st->purged += s->purged;
        st->dropped += s->dropped;
        st->refused += s->refused;
        st->bytes += s->used;
        st->objects += s->count;
        st->ghosts += s->gcount;
        pthread_mutex_unlock(&s->lock);
    }
    for (int r = 0; r < GW_CACHE_BG_N; r++)
        st->bg[r] = __atomic_load_n(&c->bg[r], __ATOMIC_RELAXED);
    for (int v = 0; v < GW_CACHE_EV_N; v++)
        st->ev[v] = __atomic_load_n(&c->ev[v], __ATOMIC_RELAXED);
}

void gw_cache_count(gw_cache_t *c, gw_cache_ev_t ev)
{
    if (c && ev >= 0 && ev < GW_CACHE_EV_N)
        __atomic_add_fetch(&c->ev[ev], 1, __ATOMIC_RELAXED);
}

/* ---- background revalidation ----------------------------------------------------------------
 *
 * The claim is a flag of the entry, not a set of keys: every worker's lookup of the same
 * answer finds the same entry, so one compare-and-swap decides among all of them without a
 * lock, and nothing has to be removed from a set when a revalidation ends or is given up.
 * An entry that a revalidation replaced leaves the index with its flag set: the new one starts
 * unclaimed. */

const char *gw_cache_bg_str(gw_cache_bg_t r)
{
    static const char *const n[] = {"refreshed", "replaced",  "not_stored",
                                    "failed",    "cancelled", "skipped"};
    return r >= 0 && r < GW_CACHE_BG_N ? n[r] : "?";
}

gw_cache_entry_t *gw_cache_ref(gw_cache_entry_t *pub)
{
    entry_t *e = GW_CONTAINER_OF(pub, entry_t, pub);
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    return pub;
}

int gw_cache_claim(gw_cache_entry_t *pub)
{
    entry_t *e = GW_CONTAINER_OF(pub, entry_t, pub);
    uint8_t want = 0;
    return __atomic_compare_exchange_n(&e->claimed, &want, 1, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

void gw_cache_claim_end(gw_cache_t *c, gw_cache_entry_t *pub, gw_cache_bg_t r)
{
    entry_t *e = GW_CONTAINER_OF(pub, entry_t, pub);
    __atomic_store_n(&e->claimed, 0, __ATOMIC_RELEASE);
    if (c && r >= 0 && r < GW_CACHE_BG_N)
        __atomic_add_fetch(&c->bg[r], 1, __ATOMIC_RELAXED);
}

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
ssize_t gw_cache_body_slices(const gw_cache_entry_t *e, uint64_t off, uint64_t len,
                             gw_rslice_t *out, size_t cap)
{
    if (off > e->body_len || len > e->body_len - off)
        return -1;
    size_t k = 0;
    uint64_t pos = 0, end = off + len;
    for (size_t i = 0; i < e->nbody && pos < end; i++) {
        const gw_rslice_t *s = &e->body[i];
        uint64_t a = pos, b = pos + s->len; /* this slice holds body bytes [a, b) */
        pos = b;
        if (b <= off)
            continue;
        if (k == cap)
            return -1;
        uint64_t from = off > a ? off - a : 0, to = end < b ? end - a : s->len;
        out[k++] = (gw_rslice_t){s->buf, s->off + (size_t)from, (size_t)(to - from)};
    }
    return (ssize_t)k;
}
#endif
