/* common/bucket.c — token buckets and the shared per-client table (see bucket.h).
 *
 * Arithmetic: tokens are whole units; the refill keeps the fractional remainder in
 * token-microseconds (frac < 1e6), so many small refills add up to exactly rate * elapsed.
 * With rate, burst and debt bounded by 2^40, every product below stays under 2^63. */
#include "common/bucket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/list.h"

#define US_PER_S UINT64_C(1000000)

uint64_t gw_bucket_default_burst(uint64_t rate)
{
    if (rate == 0)
        return 0;
    uint64_t b = rate / 10;
    return b < GW_BUCKET_MIN_BURST ? GW_BUCKET_MIN_BURST : b;
}

void gw_bucket_init(gw_bucket_t *b, uint64_t rate, uint64_t burst, uint64_t now_us)
{
    if (rate > GW_BUCKET_MAX)
        rate = GW_BUCKET_MAX;
    if (burst == 0)
        burst = gw_bucket_default_burst(rate);
    if (burst > GW_BUCKET_MAX)
        burst = GW_BUCKET_MAX;
    b->rate = rate;
    b->burst = burst;
    b->tokens = (int64_t)burst;
    b->frac = 0;
    b->last_us = now_us;
}

static void refill(gw_bucket_t *b, uint64_t now_us)
{
    if (now_us <= b->last_us)
        return; /* a clock that did not move (or a caller passing an older time) adds nothing */
    uint64_t dt = now_us - b->last_us;
    b->last_us = now_us;
    if (b->tokens >= (int64_t)b->burst) {
        b->frac = 0;
        return;
    }
    uint64_t need = (uint64_t)((int64_t)b->burst - b->tokens); /* <= 2^41 */
    /* time to fill up completely, in microseconds (rounded up) */
    uint64_t full = (need * US_PER_S - b->frac + b->rate - 1) / b->rate;
    if (dt >= full) {
        b->tokens = (int64_t)b->burst;
        b->frac = 0;
        return;
    }
    uint64_t credit = dt * b->rate + b->frac; /* < need * 1e6 <= 2^41 * 1e6 < 2^63 */
    b->tokens += (int64_t)(credit / US_PER_S);
    b->frac = credit % US_PER_S;
}

uint64_t gw_bucket_avail(gw_bucket_t *b, uint64_t now_us)
{
    if (!b->rate)
        return UINT64_MAX;
    refill(b, now_us);
    return b->tokens > 0 ? (uint64_t)b->tokens : 0;
}

uint64_t gw_bucket_wait_us(gw_bucket_t *b, size_t n, uint64_t now_us)
{
    if (!b->rate)
        return 0;
    refill(b, now_us);
    uint64_t want = n > b->burst ? b->burst : n;
    if (b->tokens >= (int64_t)want)
        return 0;
    uint64_t deficit = (uint64_t)((int64_t)want - b->tokens);
    return (deficit * US_PER_S - b->frac + b->rate - 1) / b->rate;
}

size_t gw_bucket_take(gw_bucket_t *b, size_t n, uint64_t now_us, uint64_t *wait_us)
{
    uint64_t avail = gw_bucket_avail(b, now_us);
    size_t g = (uint64_t)n < avail ? n : (size_t)avail;
    if (b->rate)
        b->tokens -= (int64_t)g;
    if (wait_us)
        *wait_us = g < n ? gw_bucket_wait_us(b, n, now_us) : 0;
    return g;
}

void gw_bucket_spend(gw_bucket_t *b, size_t n, uint64_t now_us)
{
    if (!b->rate)
        return;
    refill(b, now_us);
    uint64_t k = n > GW_BUCKET_MAX ? GW_BUCKET_MAX : n;
    b->tokens -= (int64_t)k;
    if (b->tokens < -(int64_t)GW_BUCKET_MAX)
        b->tokens = -(int64_t)GW_BUCKET_MAX;
}

size_t gw_bucket_grain(const gw_bucket_t *b)
{
    if (!b->rate)
        return SIZE_MAX;
    uint64_t g = b->rate / 100;
    if (g < GW_BUCKET_MIN_BURST)
        g = GW_BUCKET_MIN_BURST;
    if (g > b->burst)
        g = b->burst;
    return (size_t)g;
}

/* ---- table ------------------------------------------------------------------------------- */

#define NIL UINT32_MAX

struct gw_bucket_entry {
    uint8_t addr[16]; /* IPv4 in the first 4 bytes */
    uint8_t family;   /* 4 or 6; 0 = free slot */
    unsigned tag;
    uint64_t hash;
    gw_bucket_t b;
    size_t grain;
    uint32_t refs;
    uint32_t next;  /* hash chain, or free list */
    gw_list_t idle; /* in t->idle while refs == 0, oldest release first */
    /* leases (t->leased): bytes the cluster granted and not yet spent (negative: spent
     * beyond, paid from the next grant), whether a request for more is out, and until when
     * the local bucket alone decides (the cluster could not answer) */
    int64_t lease;
    uint32_t gen; /* +1 each time the slot holds another client: stale grants are dropped */
    uint8_t asking;
    uint64_t asked_us; /* an answer lost (never expected) frees the way after a second */
    uint64_t local_until_us;
    unsigned local_share; /* until then, each byte spent costs this many tokens */
};

struct gw_bucket_table {
    pthread_mutex_t lock;
    gw_bucket_entry_t *e;
    size_t cap;
    uint32_t *heads;
    size_t nheads; /* power of two */
    uint32_t free;
    size_t used;
    uint64_t evictions;
    uint64_t refused;  /* acquisitions refused: full, and the oldest idle entry still in debt */
    unsigned v6_bytes; /* IPv6 prefix kept in keys, whole bytes ... */
    uint8_t v6_mask;   /* ... and the mask of the byte after them (0 when the prefix is whole) */
    gw_list_t idle;
    int leased; /* gw_bucket_table_set_leased */
};

int gw_bucket_table_new(size_t capacity, unsigned ipv6_prefix, gw_bucket_table_t **out)
{
    *out = NULL;
    if (capacity == 0 || capacity >= NIL || ipv6_prefix == 0 || ipv6_prefix > 128)
        return GW_E_INVAL;
    gw_bucket_table_t *t = gw_calloc(1, sizeof(*t));
    if (!t)
        return GW_E_NOMEM;
    t->cap = capacity;
    t->v6_bytes = ipv6_prefix / 8;
    t->v6_mask = (uint8_t)(0xff00u >> (ipv6_prefix % 8));
    t->nheads = 16;
    while (t->nheads < capacity * 2)
        t->nheads <<= 1;
    t->e = gw_calloc(capacity, sizeof(*t->e));
    t->heads = gw_malloc(t->nheads * sizeof(*t->heads));
    if (!t->e || !t->heads || pthread_mutex_init(&t->lock, NULL) != 0) {
        gw_free(t->e);
        gw_free(t->heads);
        gw_free(t);
        return GW_E_NOMEM;
    }
    for (size_t i = 0; i < t->nheads; i++)
        t->heads[i] = NIL;
    for (size_t i = 0; i < capacity; i++) {
        t->e[i].next = i + 1 < capacity ? (uint32_t)(i + 1) : NIL;
        gw_list_init(&t->e[i].idle);
    }
    t->free = 0;
    gw_list_init(&t->idle);
    *out = t;
    return 0;
}

void gw_bucket_table_del(gw_bucket_table_t *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    gw_free(t->e);
    gw_free(t->heads);
    gw_free(t);
}

/* The address without its port; an IPv4-mapped IPv6 address counts as the IPv4 one (a
 * dual-stack listener sees IPv4 clients that way). An IPv6 address is cut to the table's
 * prefix (default /64): one subscriber or host usually holds a whole /64 (RFC 6177 §2,
 * RFC 8981 temporary addresses), so keying on all 128 bits would hand it 2^64 buckets.
 * 0 for another family. */
/* The IPv6 address a cut to its first bytes, then the next byte under mask, the rest zero:
 * how the tables key a client by its prefix. */
static void v6_cut(uint8_t out[16], const uint8_t a[16], unsigned bytes, uint8_t mask)
{
    memset(out, 0, 16);
    memcpy(out, a, bytes);
    if (bytes < 16)
        out[bytes] = a[bytes] & mask;
}

static int addr_key(const gw_bucket_table_t *t, const struct sockaddr *sa, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            memcpy(addr, a->s6_addr + 12, 4);
            return 4;
        }
        v6_cut(addr, a->s6_addr, t->v6_bytes, t->v6_mask);
        return 6;
    }
    return 0;
}

static uint64_t key_hash(const uint8_t addr[16], int family, unsigned tag)
{
    uint64_t h = gw_fnv1a64(GW_FNV64_BASIS ^ (uint64_t)family ^ ((uint64_t)tag << 8), addr, 16);
    return h ^ (h >> 29);
}

static void unchain(gw_bucket_table_t *t, uint32_t idx)
{
    gw_bucket_entry_t *e = &t->e[idx];
    uint32_t *p = &t->heads[e->hash & (t->nheads - 1)];
    while (*p != idx) {
        GW_ASSERT(*p != NIL);
        p = &t->e[*p].next;
    }
    *p = e->next;
}

gw_bucket_entry_t *gw_bucket_table_acquire(gw_bucket_table_t *t, const struct sockaddr *sa,
                                           unsigned tag, uint64_t rate, uint64_t burst,
                                           uint64_t now_us)
{
    uint8_t addr[16];
    int fam = addr_key(t, sa, addr);
    if (!fam)
        return NULL;
    uint64_t h = key_hash(addr, fam, tag);
    gw_bucket_entry_t *e = NULL;
    pthread_mutex_lock(&t->lock);
    uint32_t *head = &t->heads[h & (t->nheads - 1)];
    for (uint32_t i = *head; i != NIL; i = t->e[i].next) {
        gw_bucket_entry_t *x = &t->e[i];
        if (x->hash == h && x->family == fam && x->tag == tag && !memcmp(x->addr, addr, 16)) {
            e = x;
            break;
        }
    }
    if (!e) {
        uint32_t idx = t->free;
        if (idx != NIL) {
            t->free = t->e[idx].next;
            t->used++;
        } else {
            /* Full: the entry released longest ago may go, but only once its bucket is full
             * again, when forgetting it loses nothing (a new entry starts full). An entry
             * still in debt stays, and the newcomer is refused (fail closed): else a client
             * with many addresses could evict every other client's debt and wipe the limit. */
            gw_bucket_entry_t *old = gw_list_empty(&t->idle)
                                         ? NULL
                                         : GW_CONTAINER_OF(t->idle.next, gw_bucket_entry_t, idle);
            if (!old || (old->b.rate && gw_bucket_avail(&old->b, now_us) < old->b.burst)) {
                t->refused++;
                goto out; /* every entry held, or the oldest idle one still owes */
            }
            idx = (uint32_t)(old - t->e);
            unchain(t, idx);
            gw_list_remove(&old->idle);
            t->evictions++;
        }
        e = &t->e[idx];
        memcpy(e->addr, addr, 16);
        e->family = (uint8_t)fam;
        e->tag = tag;
        e->hash = h;
        e->refs = 0;
        e->lease = 0;
        e->asking = 0;
        e->local_until_us = 0;
        e->local_share = 1;
        e->gen++;
        gw_bucket_init(&e->b, rate, burst, now_us);
        e->grain = gw_bucket_grain(&e->b);
        e->next = *head;
        *head = idx;
    }
    if (e->refs++ == 0)
        gw_list_remove(&e->idle); /* no-op for a new entry */
out:
    pthread_mutex_unlock(&t->lock);
    return e;
}

void gw_bucket_table_release(gw_bucket_table_t *t, gw_bucket_entry_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&t->lock);
    GW_ASSERT(e->refs > 0);
    if (--e->refs == 0)
        gw_list_push_back(&t->idle, &e->idle);
    pthread_mutex_unlock(&t->lock);
}

uint64_t gw_bucket_table_avail(gw_bucket_table_t *t, gw_bucket_entry_t *e, uint64_t now_us)
{
    pthread_mutex_lock(&t->lock);
    uint64_t v = gw_bucket_avail(&e->b, now_us);
    pthread_mutex_unlock(&t->lock);
    return v;
}

size_t gw_bucket_table_take(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n, uint64_t now_us,
                            uint64_t *wait_us)
{
    pthread_mutex_lock(&t->lock);
    size_t g = gw_bucket_take(&e->b, n, now_us, wait_us);
    pthread_mutex_unlock(&t->lock);
    return g;
}

void gw_bucket_table_spend(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n, uint64_t now_us)
{
    pthread_mutex_lock(&t->lock);
    size_t cost = n;
    if (t->leased && now_us < e->local_until_us && e->local_share > 1)
        cost = n > GW_BUCKET_MAX / e->local_share ? (size_t)GW_BUCKET_MAX : n * e->local_share;
    gw_bucket_spend(&e->b, cost, now_us);
    if (t->leased && now_us >= e->local_until_us)
        e->lease -= (int64_t)n;
    pthread_mutex_unlock(&t->lock);
}

/* ---- leases ---------------------------------------------------------------------------------- */

void gw_bucket_table_set_leased(gw_bucket_table_t *t, int on)
{
    pthread_mutex_lock(&t->lock);
    t->leased = on;
    pthread_mutex_unlock(&t->lock);
}

int gw_bucket_table_avail_leased(gw_bucket_table_t *t, gw_bucket_entry_t *e, uint64_t size,
                                 uint64_t now_us, uint64_t *v, uint64_t *ask, uint64_t *token)
{
    *ask = 0;
    pthread_mutex_lock(&t->lock);
    *v = gw_bucket_avail(&e->b, now_us);
    int on = t->leased && now_us >= e->local_until_us;
    if (on) {
        if (e->asking && now_us - e->asked_us > GW_BUCKET_LEASE_LOCAL_US)
            e->asking = 0;
        if (!e->asking && e->lease < (int64_t)(size / 2)) {
            e->asking = 1;
            e->asked_us = now_us;
            *ask = size;
            *token = (uint64_t)(e - t->e) << 32 | e->gen;
        }
        uint64_t bal = e->lease > 0 ? (uint64_t)e->lease : 0;
        if (bal < *v)
            *v = bal;
    }
    pthread_mutex_unlock(&t->lock);
    return on;
}

void gw_bucket_table_lease_grant(gw_bucket_table_t *t, uint64_t token, uint64_t bytes,
                                 unsigned local, uint64_t now_us)
{
    size_t idx = (size_t)(token >> 32);
    if (idx >= t->cap)
        return;
    pthread_mutex_lock(&t->lock);
    gw_bucket_entry_t *e = &t->e[idx];
    if (e->family && e->gen == (uint32_t)token) {
        e->asking = 0;
        if (local) { /* the cluster could not answer: the local bucket decides for a while */
            e->local_until_us = now_us + GW_BUCKET_LEASE_LOCAL_US;
            e->local_share = local < GW_BUCKET_MAX_SHARE ? local : GW_BUCKET_MAX_SHARE;
        } else
            e->lease += (int64_t)bytes;
    }
    pthread_mutex_unlock(&t->lock);
}

int gw_bucket_addr_text(const struct sockaddr *sa, unsigned ipv6_prefix, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            inet_ntop(AF_INET, a->s6_addr + 12, ip, sizeof(ip));
        } else {
            unsigned bits = !ipv6_prefix ? 64 : ipv6_prefix > 128 ? 128 : ipv6_prefix;
            struct in6_addr cut; /* a client is its prefix, as in the tables */
            v6_cut(cut.s6_addr, a->s6_addr, bits / 8, (uint8_t)(0xff00u >> (bits % 8)));
            inet_ntop(AF_INET6, &cut, ip, sizeof(ip));
        }
    } else {
        return 0;
    }
    int n = snprintf(out, cap, "%s", ip);
    return n > 0 && (size_t)n < cap ? n : 0;
}

uint64_t gw_bucket_table_wait_us(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n,
                                 uint64_t now_us)
{
    pthread_mutex_lock(&t->lock);
    uint64_t v = gw_bucket_wait_us(&e->b, n, now_us);
    pthread_mutex_unlock(&t->lock);
    return v;
}

size_t gw_bucket_table_grain(const gw_bucket_entry_t *e)
{
    return e->grain;
}

size_t gw_bucket_table_size(gw_bucket_table_t *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->used;
    pthread_mutex_unlock(&t->lock);
    return n;
}

uint64_t gw_bucket_table_refused(gw_bucket_table_t *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t n = t->refused;
    pthread_mutex_unlock(&t->lock);
    return n;
}

uint64_t gw_bucket_table_evictions(gw_bucket_table_t *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t n = t->evictions;
    pthread_mutex_unlock(&t->lock);
    return n;
}
