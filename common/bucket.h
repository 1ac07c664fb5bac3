/* common/bucket.h — token buckets (sans-IO) and a shared per-client table of them.
 *
 * A bucket holds up to `burst` tokens (bytes, or requests) and refills at `rate` tokens per
 * second. The caller passes the time (`now_us`, microseconds of a monotonic clock): a bucket
 * reads no clock, sleeps never and arms no timer; it says how long until enough tokens are
 * back (gw_bucket_wait_us) and the IO glue arms its own timer. Tokens may go negative
 * (gw_bucket_spend: bytes already read or written), which is paid back before anything else is
 * granted, so the long-run rate stays exact even when a consumer overshoots.
 *
 * The table (gw_bucket_table_t) maps a client address (IPv4 or IPv6, port ignored) plus a small
 * tag (0 for the bandwidth bucket, route index + 1 for request-rate buckets) to one bucket
 * shared by every connection of that client in every worker thread. It is thread-safe (one
 * mutex), allocates once at creation (bounded size). When full it evicts the least recently
 * released idle entry (no connection holds it) if that entry's bucket is full again, and
 * otherwise refuses the new key (fail closed: the caller denies, gw_bucket_table_refused
 * counts). IPv6 addresses are keyed by a prefix (default /64).
 */
#ifndef GW_COMMON_BUCKET_H
#define GW_COMMON_BUCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Largest rate and burst kept (2^40, ~1.1 TB): larger values are clamped, so the arithmetic
 * below never overflows 64 bits. */
#define GW_BUCKET_MAX (UINT64_C(1) << 40)

/* Smallest burst the default rule gives (and the largest wake-up grain). */
#define GW_BUCKET_MIN_BURST (16u * 1024u)

typedef struct {
    uint64_t rate;    /* tokens per second; 0 = unlimited */
    uint64_t burst;   /* capacity */
    int64_t tokens;   /* may be negative: debt from gw_bucket_spend */
    uint64_t frac;    /* sub-token remainder, in tokens * 1e6 (token-microseconds) */
    uint64_t last_us; /* time of the last refill */
} gw_bucket_t;

/* The burst used when the configured one is 0: max(rate / 10, 16 KiB), i.e. a tenth of a
 * second of traffic but never less than one full HTTP/2 DATA frame. 0 for rate 0. */
uint64_t gw_bucket_default_burst(uint64_t rate);

/* Start b full (burst tokens) at now_us. rate 0 makes an unlimited bucket; burst 0 takes
 * gw_bucket_default_burst(rate). Both are clamped to GW_BUCKET_MAX. */
void gw_bucket_init(gw_bucket_t *b, uint64_t rate, uint64_t burst, uint64_t now_us);

/* Non-zero when b limits anything (rate > 0). */
static inline int gw_bucket_limited(const gw_bucket_t *b)
{
    return b->rate != 0;
}

/* Tokens available now (0 while in debt); UINT64_MAX for an unlimited bucket. */
uint64_t gw_bucket_avail(gw_bucket_t *b, uint64_t now_us);

/* Take up to n tokens: returns the number granted (min(n, avail)) and removes them. When fewer
 * than n were granted and wait_us is not NULL, *wait_us is the time from now until n tokens
 * (at most burst) are available; else *wait_us is 0. */
size_t gw_bucket_take(gw_bucket_t *b, size_t n, uint64_t now_us, uint64_t *wait_us);

/* Remove n tokens unconditionally (bytes already moved): the balance may go negative, down to
 * -GW_BUCKET_MAX. */
void gw_bucket_spend(gw_bucket_t *b, size_t n, uint64_t now_us);

/* Microseconds from now until at least n tokens (clamped to burst) are available; 0 if they
 * are now or the bucket is unlimited. */
uint64_t gw_bucket_wait_us(gw_bucket_t *b, size_t n, uint64_t now_us);

/* The amount worth waking up for: min(burst, max(16 KiB, rate / 100)), so a throttled sender
 * wakes at most ~100 times a second and never emits tiny frames. SIZE_MAX when unlimited. */
size_t gw_bucket_grain(const gw_bucket_t *b);

/* ---- shared per-client table ------------------------------------------------------------- */

typedef struct gw_bucket_table gw_bucket_table_t;
typedef struct gw_bucket_entry gw_bucket_entry_t;

/* A table of at most `capacity` entries (allocated now); IPv6 addresses are keyed by their
 * first `ipv6_prefix` bits (1..128; 64 is the usual one). Returns 0 and *out, GW_E_NOMEM, or
 * GW_E_INVAL (capacity 0, prefix out of range). */
int gw_bucket_table_new(size_t capacity, unsigned ipv6_prefix, gw_bucket_table_t **out);

/* Free the table and its entries; no entry may be used afterwards. NULL is ignored. */
void gw_bucket_table_del(gw_bucket_table_t *t);

/* The entry for (address of sa without its port, tag), created full with rate/burst (see
 * gw_bucket_init) when absent; an existing entry keeps its own rate. The caller holds a
 * reference until gw_bucket_table_release; a held entry is never evicted. Returns NULL when
 * sa is not AF_INET/AF_INET6 (no limit applies: gw_bucket_table_keyed says which), or when the
 * table is full and no entry may be evicted (every entry held, or the oldest idle one still in
 * debt): the caller must then refuse the client (counted in gw_bucket_table_refused). */
gw_bucket_entry_t *gw_bucket_table_acquire(gw_bucket_table_t *t, const struct sockaddr *sa,
                                           unsigned tag, uint64_t rate, uint64_t burst,
                                           uint64_t now_us);

/* Drop the reference; the entry stays (with its balance) until evicted. NULL is ignored. */
void gw_bucket_table_release(gw_bucket_table_t *t, gw_bucket_entry_t *e);

/* The bucket operations above, on a shared entry, under the table's lock. */
uint64_t gw_bucket_table_avail(gw_bucket_table_t *t, gw_bucket_entry_t *e, uint64_t now_us);
size_t gw_bucket_table_take(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n, uint64_t now_us,
                            uint64_t *wait_us);
void gw_bucket_table_spend(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n, uint64_t now_us);
uint64_t gw_bucket_table_wait_us(gw_bucket_table_t *t, gw_bucket_entry_t *e, size_t n,
                                 uint64_t now_us);
/* The entry's grain (gw_bucket_grain); constant for the entry's life. */
size_t gw_bucket_table_grain(const gw_bucket_entry_t *e);

/* Leases (per-client bandwidth across instances): in a leased table an entry may
 * spend, besides its own bucket, only the bytes the cluster granted it; a grant is asked for
 * (by the caller, asynchronously) when fewer than half a lease are left. When the cluster
 * cannot answer, the entry's own bucket alone decides for GW_BUCKET_LEASE_LOCAL_US. */
#define GW_BUCKET_LEASE_LOCAL_US 1000000u
void gw_bucket_table_set_leased(gw_bucket_table_t *t, int on);
/* gw_bucket_table_avail into *v, capped by e's lease balance, under one lock; 1 when leases
 * apply to e now. When a grant should be asked for, *ask is its size (size) and *token names e
 * for gw_bucket_table_lease_grant; else *ask is 0. */
int gw_bucket_table_avail_leased(gw_bucket_table_t *t, gw_bucket_entry_t *e, uint64_t size,
                                 uint64_t now_us, uint64_t *v, uint64_t *ask, uint64_t *token);
/* The answer to token: bytes granted (local 0), or no answer: the bucket alone decides for
 * GW_BUCKET_LEASE_LOCAL_US as one of `local` instances doing so (local >= 1: each byte spent
 * meanwhile costs that many tokens, so those instances together keep to the rate, capped at
 * GW_BUCKET_MAX_SHARE). A token of an entry that has since held another client is dropped. */
#define GW_BUCKET_MAX_SHARE 4096u
void gw_bucket_table_lease_grant(gw_bucket_table_t *t, uint64_t token, uint64_t bytes,
                                 unsigned local, uint64_t now_us);
/* The client address as the tables key it (IPv4, or IPv6 cut to ipv6_prefix bits) as text;
 * its length, 0 for other families. */
int gw_bucket_addr_text(const struct sockaddr *sa, unsigned ipv6_prefix, char *out, size_t cap);

/* Entries in use (held or idle), evictions and refused acquisitions so far, for tests, stats
 * and logs. */
size_t gw_bucket_table_size(gw_bucket_table_t *t);
uint64_t gw_bucket_table_evictions(gw_bucket_table_t *t);
uint64_t gw_bucket_table_refused(gw_bucket_table_t *t);
/* Whether the table keys sa at all (AF_INET or AF_INET6): other clients have no limit. */
static inline int gw_bucket_table_keyed(const struct sockaddr *sa)
{
    return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

#endif
