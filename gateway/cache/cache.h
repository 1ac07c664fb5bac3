/* cache/cache.h — the shared HTTP cache (RFC 9111 as a shared cache, RFC 5861's stale answers),
 * sans-IO: what may be stored and reused (policy.c), under which keys (key.c), and the store
 * that holds the answers within a byte budget (store.c). No file here reads a clock, opens a
 * socket or includes libuv or OpenSSL: times are passed in (seconds since the epoch, the unit of
 * Date and Age), and the proxy does the I/O.
 *
 * Files: policy.c (storable, freshness, age, request directives, conditional requests, ranges,
 * 304 updates, invalidation), key.c (primary and Vary keys), store.c (the sharded S3-FIFO store),
 * cache_internal.h (what they share).
 *
 * The life of an answer, as the proxy will drive it:
 *   request   → gw_cache_key() (GET and HEAD only) → gw_cache_get() with the route's tag →
 *               entry or miss;
 *   entry     → gw_cache_use() says fresh / stale-while-revalidate / revalidate / 504;
 *               gw_cache_conditional() and gw_cache_range() shape the answer (304, 206, 416);
 *   miss      → the origin's head → gw_cache_storable() → gw_cache_meta() → gw_cache_put() once
 *               the body ended whole, its buffers by reference; gw_cache_trim_due() says when
 *               to give the heap's free pages back (off the event loop);
 *   304       → gw_cache_merge_304() gives the stored head's new fields, put again;
 *   unsafe    → gw_cache_invalidation() names the URLs to gw_cache_purge();
 *   admin     → gw_cache_url_parse() and gw_cache_key() give the key to gw_cache_purge() or
 *               gw_cache_purge_prefix(); gw_cache_stats() the counters;
 *   reload    → gw_cache_keep_routes() with the gw_cache_route_tag() of every caching route;
 *   answer    → gw_cache_body_slices() gives the bytes to send by reference, gw_cache_age()
 *               the Age, gw_cache_status_fmt() the Cache-Status.
 */
#ifndef GW_CACHE_CACHE_H
#define GW_CACHE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"

/* ---- the heads the policy reads ---------------------------------------------------------- */

/* A request head as the cache needs it: the proxy fills it from its gw_req_head_t. Slices are
 * only read during the call. */
typedef struct {
    gw_slice_t method;
    gw_slice_t scheme;    /* "http" or "https" */
    gw_slice_t authority; /* :authority or Host */
    gw_slice_t path;      /* origin-form path and query, as the client sent it */
    const gw_field_t *fields;
    size_t nfields;
} gw_cache_req_t;

/* A response head: the origin's status and fields (or the stored ones). */
typedef struct {
    unsigned status;
    const gw_field_t *fields;
    size_t nfields;
} gw_cache_resp_t;

/* What the configuration decides (config's `cache:` section). */
typedef struct {
    int heuristic;                   /* RFC 9111 §4.2.2 freshness for Last-Modified answers */
    uint32_t stale_if_error;         /* RFC 5861 §4 window (s) when the answer names none */
    uint32_t stale_while_revalidate; /* RFC 5861 §3 window (s) when the answer names none */
} gw_cache_policy_t;

/* The cap of a heuristic freshness lifetime (§4.2.2 leaves it to the cache): one day. */
#define GW_CACHE_HEURISTIC_MAX 86400u

/* ---- may it be stored? (policy.c) ---------------------------------------------------------- */

/* Why an answer is not stored (0: it is). */
typedef enum {
    GW_CACHE_STORE = 0,
    GW_CACHE_NS_METHOD,     /* not a GET (§3: HEAD answers carry no body to store) */
    GW_CACHE_NS_STATUS,     /* interim, 304, or not understood with must-understand */
    GW_CACHE_NS_PARTIAL,    /* 206 or 416: only full objects are stored */
    GW_CACHE_NS_NO_STORE,   /* no-store in the request or the answer (§5.2.1.5, §5.2.2.5) */
    GW_CACHE_NS_PRIVATE,    /* private (§5.2.2.7), qualified or not */
    GW_CACHE_NS_SET_COOKIE, /* Set-Cookie: never stored, whatever the directives */
    GW_CACHE_NS_AUTH,       /* Authorization or Cookie without public/s-maxage/must-revalidate */
    GW_CACHE_NS_VARY_STAR,  /* Vary: * never matches (§4.1) */
    GW_CACHE_NS_FRESHNESS,  /* no explicit freshness and no heuristic allowed (§3) */
} gw_cache_nostore_t;
/* "store", "method", "status", "partial", "no-store", "private", "set-cookie", "auth",
 * "vary-star", "freshness": for logs and Cache-Status's detail. */
const char *gw_cache_nostore_str(gw_cache_nostore_t w);

/* Whether a shared cache may store resp, the answer to req (RFC 9111 §3, §3.5, §4.1), under pol.
 * Stricter than the RFC where the gateway's rules are: Set-Cookie answers are never stored, a
 * Cookie in the request counts as Authorization does (§3.5), a qualified private is private. */
gw_cache_nostore_t gw_cache_storable(const gw_cache_policy_t *pol, const gw_cache_req_t *req,
                                     const gw_cache_resp_t *resp);

/* Non-zero when resp answers req for its credentials alone (RFC 9111 §3.5, with the gateway's
 * rule that a Cookie counts as Authorization): req carries Authorization or Cookie, and resp
 * says neither public, s-maxage nor must-revalidate. Such an answer is never stored
 * (gw_cache_storable: GW_CACHE_NS_AUTH, or an earlier reason) and says nothing of what the
 * other clients of a stored answer get: it must not remove or replace one. */
int gw_cache_for_credentials(const gw_cache_req_t *req, const gw_cache_resp_t *resp);

/* Non-zero for the statuses RFC 9110 §15.1 defines as heuristically cacheable. */
int gw_cache_status_heuristic(unsigned status);

/* ---- freshness and age (policy.c) -------------------------------------------------------- */

/* GW_CACHE_M_*: what a stored answer's directives say of its reuse. */
enum {
    GW_CACHE_M_NO_CACHE = 1u << 0,  /* §5.2.2.4: validate before every reuse */
    GW_CACHE_M_NO_STALE = 1u << 1,  /* §4.2.4: must-revalidate, proxy-revalidate or s-maxage
                                       (§5.2.2.10): never served stale but by RFC 5861 grant */
    GW_CACHE_M_HEURISTIC = 1u << 2, /* the lifetime is §4.2.2's (Cache-Status shows it) */
    GW_CACHE_M_VALIDATOR = 1u << 3, /* an ETag or a Last-Modified: a 304 can refresh it */
};

/* What is computed once, when the answer is received, for every later reuse. */
typedef struct {
    int64_t response_time; /* §4.2.3 response_time: when the head arrived (s since epoch) */
    uint32_t initial_age;  /* §4.2.3 corrected_initial_age */
    uint32_t lifetime;     /* §4.2.1 freshness_lifetime */
    uint32_t swr;          /* RFC 5861 §3 window (s): directive or default, 0 when none */
    uint32_t sie;          /* RFC 5861 §4 window (s): directive or default, 0 when none */
    uint32_t flags;        /* GW_CACHE_M_* */
} gw_cache_meta_t;

/* The freshness lifetime of resp (§4.2.1): s-maxage, else max-age, else Expires − Date, else
 * (pol->heuristic, and a heuristically cacheable status or public, and a Last-Modified) 10 % of
 * Date − Last-Modified capped at GW_CACHE_HEURISTIC_MAX (§4.2.2; *heuristic set to 1). A
 * malformed or conflicting s-maxage or max-age, or an invalid Expires ("0"), gives 0 (stale,
 * §4.2.1, §5.3). A missing or invalid Date is response_time (RFC 9110 §6.6.1). heuristic may be
 * NULL. */
uint32_t gw_cache_lifetime(const gw_cache_policy_t *pol, const gw_cache_resp_t *resp,
                           int64_t response_time, int *heuristic);

/* Everything gw_cache_meta_t holds for resp, the answer to a request sent at request_time and
 * received at response_time (§4.2.3: apparent age from Date, Age, the response delay). */
void gw_cache_meta(const gw_cache_policy_t *pol, const gw_cache_resp_t *resp, int64_t request_time,
                   int64_t response_time, gw_cache_meta_t *m);

/* §4.2.3 current_age at now: corrected_initial_age + resident_time (0 for a now before
 * response_time), capped at GW_HTTP_DELTA_MAX: the value of the Age field sent with it. */
uint32_t gw_cache_age(const gw_cache_meta_t *m, int64_t now);

/* Non-zero when the stored answer is fresh at now (§4.2: lifetime > current age). */
int gw_cache_fresh(const gw_cache_meta_t *m, int64_t now);

/* How a stored answer may be used for a request (§4.2.4, §5.2.1, §5.4, RFC 5861). */
typedef enum {
    GW_CACHE_USE_FRESH = 0,   /* serve it */
    GW_CACHE_USE_STALE_SWR,   /* serve it stale and revalidate once in the background */
    GW_CACHE_USE_REVALIDATE,  /* ask the origin with its validators (or fetch anew) */
    GW_CACHE_USE_UNAVAILABLE, /* only-if-cached and nothing usable: 504 (§5.2.1.7) */
} gw_cache_use_t;
/* "fresh", "stale-while-revalidate", "revalidate", "unavailable". */
const char *gw_cache_use_str(gw_cache_use_t u);

/* The request's directives against the stored answer at now: no-cache (§5.2.1.4) or Pragma
 * no-cache without Cache-Control (§5.4), max-age (§5.2.1.1), min-fresh (§5.2.1.3), max-stale
 * (§5.2.1.2, never past GW_CACHE_M_NO_STALE or no-cache), only-if-cached (§5.2.1.7), then the
 * stored answer's no-cache and its stale-while-revalidate window. */
gw_cache_use_t gw_cache_use(const gw_cache_meta_t *m, const gw_cache_req_t *req, int64_t now);

/* Non-zero when the origin failed (no answer, a timeout, or status 500, 502, 503, 504, passed
 * as 0 for no answer) and the stale answer may stand in (RFC 5861 §4): within the answer's
 * window (or the request's stale-if-error), never under GW_CACHE_M_NO_STALE without the
 * answer's own stale-if-error, nor for a request with no-cache. */
int gw_cache_stale_if_error(const gw_cache_meta_t *m, const gw_cache_req_t *req, unsigned status,
                            int64_t now);

/* ---- conditional requests and ranges (policy.c) -------------------------------------------- */

typedef enum {
    GW_CACHE_COND_NONE = 0,     /* no condition the cache evaluates: the stored answer */
    GW_CACHE_COND_NOT_MODIFIED, /* 304 with the stored validators (RFC 9110 §15.4.5) */
    GW_CACHE_COND_FAILED,       /* evaluated false: the stored answer whole (200) */
    GW_CACHE_COND_FORWARD,      /* If-Match / If-Unmodified-Since: for the origin */
} gw_cache_cond_t;
const char *gw_cache_cond_str(gw_cache_cond_t c);

/* A GET or HEAD's preconditions against the stored answer, in RFC 9110 §13.2.2's order:
 * If-Match and If-Unmodified-Since are the origin's (RFC 9111 §4.3.2: forwarded), If-None-Match
 * (weak comparison, §13.1.2) and, only without it, If-Modified-Since against Last-Modified (or
 * Date when there is none, RFC 9111 §4.3.2); an invalid date is ignored (§13.1.3). */
gw_cache_cond_t gw_cache_conditional(const gw_cache_req_t *req, const gw_cache_resp_t *stored);

typedef enum {
    GW_CACHE_RANGE_NONE = 0,      /* no Range that applies: the whole answer */
    GW_CACHE_RANGE_PARTIAL,       /* one satisfiable range: 206 [*first, *last] */
    GW_CACHE_RANGE_UNSATISFIABLE, /* 416 with Content-Range: bytes * / length */
    GW_CACHE_RANGE_FORWARD,       /* several ranges: for the origin */
} gw_cache_range_t;
const char *gw_cache_range_str(gw_cache_range_t r);

/* A GET's Range (RFC 9110 §14.2) against a stored 200 of len bytes: ignored unless the unit is
 * bytes and the syntax valid, on another status, or when If-Range does not match (§13.1.5:
 * a strong ETag, or the exact Last-Modified of a strong validator, §8.8.2.2). */
gw_cache_range_t gw_cache_range(const gw_cache_req_t *req, const gw_cache_resp_t *stored,
                                uint64_t len, uint64_t *first, uint64_t *last);

/* Content-Range for a 206 ("bytes F-L/LEN") or, with first > last, a 416 ("bytes * /LEN",
 * RFC 9110 §14.4) into out (64 bytes suffice): its length. */
size_t gw_cache_content_range(char *out, size_t cap, uint64_t first, uint64_t last, uint64_t len);

/* ---- 304 and invalidation (policy.c) ----------------------------------------------------- */

/* Non-zero when a field of this name in the origin's answer is stored with it (RFC 9111 §3.1):
 * not the connection-specific fields, not Proxy-Authenticate, Proxy-Authentication-Info and
 * Proxy-Authorization (the proxy's own), nor Age (a reuse computes its own, §4.2.3). */
int gw_cache_field_stored(gw_slice_t name);

/* Non-zero when a 304's field of this name replaces the stored ones (RFC 9111 §3.2, §4.3.4):
 * not Content-Length, the connection-specific fields, the proxy's own (Proxy-*), Age (the cache
 * computes it), Content-Encoding, Content-Range, Transfer-Encoding, nor Vary (the stored answer
 * is keyed by it). */
int gw_cache_304_updates(gw_slice_t name);

/* The stored fields after a 304 (§4.3.4): each updating field of upd replaces every stored
 * line of its name; the rest stay in order. Slices point into stored and upd. Returns the
 * count written to out, or -1 when cap is too small. */
ssize_t gw_cache_merge_304(const gw_field_t *stored, size_t ns, const gw_field_t *upd, size_t nu,
                           gw_field_t *out, size_t cap);

/* A URL the cache may hold: scheme, authority and origin-form path with query. */
typedef struct {
    gw_slice_t scheme, authority, path;
} gw_cache_url_t;

/* The URLs to invalidate after an unsafe request got resp (RFC 9111 §4.4): none unless the
 * method is unsafe and the status 2xx or 3xx; then the target URI, and Location and
 * Content-Location when they name the same origin (an absolute URL of the same scheme and
 * authority, compared as gw_cache_key does, or an absolute path). Up to 3 into out; returns
 * the count. Slices point into req and resp. */
size_t gw_cache_invalidation(const gw_cache_req_t *req, const gw_cache_resp_t *resp,
                             gw_cache_url_t out[3]);

/* ---- keys (key.c) ------------------------------------------------------------------------- */

/* The primary key (§4: target URI; GET and HEAD share one entry, which a HEAD is answered from)
 * into out (cap bytes; NULL to measure): `scheme "://" authority path`, the scheme and the
 * authority lowercased (RFC 3986 §6.2.2.1), an IPv6 host in its canonical text (RFC 5952: the
 * one entry of [::1], [0::1] and [::0001]), the port's leading zeros and the default port (:80
 * for http, :443 for https) dropped (§6.2.3), the path and query byte for byte as the client
 * sent them (no percent-decoding, no dot segments removed: an origin may tell them apart). An
 * authority has no "/", so the key is unambiguous, and a URL prefix is a key prefix (purge by
 * prefix). Returns the key's length (written only when it fits). */
size_t gw_cache_key(const gw_cache_url_t *u, char *out, size_t cap);

/* An absolute http or https URL (`scheme "://" authority [ path-abempty ] [ "?" query ]`, a
 * "#fragment" ignored) into *u, slices into abs: the admin's purge and Location headers name
 * URLs so. The path is "/" when empty. 0, or -1 when it is not one: another scheme, no "//",
 * an empty host, userinfo or a byte an authority may not hold (RFC 9110 §4.2.4), or a query
 * after an empty path (no origin-form "/" to point into). */
int gw_cache_url_parse(gw_slice_t abs, gw_cache_url_t *u);

/* The tag of a route (config's routes[]) whose answers an entry holds: a hash of what the
 * route matches, its host and its path prefix, so the same route keeps its tag across a reload
 * (its upstream, name and other settings may change) and gw_cache_keep_routes() can drop the
 * entries of routes that are gone. */
uint64_t gw_cache_route_tag(gw_slice_t host, gw_slice_t path);

/* The secondary key of a request for an answer with Vary (§4.1) into out (cap bytes; NULL to
 * measure): for each field name the answer's Vary lines list (lowercased, in their order,
 * repeated names once), the request's field lines of that name combined with ", " and the
 * whitespace around each comma removed; an absent field differs from an empty one. Values keep
 * their case. Returns its length, or -1 for Vary: * (never matches). No Vary: length 0. */
ssize_t gw_cache_vary_key(const gw_field_t *resp, size_t nresp, const gw_field_t *req, size_t nreq,
                          char *out, size_t cap);

/* ---- Cache-Status (policy.c) ---------------------------------------------------------------- */

/* The remaining freshness of a stored answer at now: lifetime − current age, negative once
 * stale (RFC 9211 §2.5's ttl). */
int64_t gw_cache_ttl(const gw_cache_meta_t *m, int64_t now);

/* What one answer's Cache-Status says (RFC 9211 §2). */
typedef struct {
    int hit;             /* §2.1: served from the cache without going forward */
    const char *fwd;     /* §2.2: NULL, or "bypass", "method", "uri-miss", "vary-miss",
                            "miss", "request", "stale", "partial" (a token) */
    unsigned fwd_status; /* §2.3: the origin's status when forwarded; 0 for none */
    int has_ttl;         /* §2.4 ttl present */
    int64_t ttl;
    int stored;         /* §2.5: the forwarded answer was stored */
    int collapsed;      /* §2.6: the request joined another in flight (coalescing) */
    const char *detail; /* §2.8: NULL, or a token (why not stored: gw_cache_nostore_str()) */
} gw_cache_status_t;

/* The Cache-Status member "h2gate; hit; ttl=376" for st into out (cap bytes, NUL-terminated):
 * its length, or 0 when it does not fit. */
size_t gw_cache_status_fmt(const gw_cache_status_t *st, char *out, size_t cap);

/* ---- the store (store.c) ------------------------------------------------------------------ */

typedef struct gw_cache gw_cache_t;

typedef struct {
    size_t memory;     /* the budget: bodies (the buffers they pin), heads, keys, index */
    size_t max_object; /* an answer whose charge is larger is refused; <= memory */
    unsigned shards;   /* power of two up to 64; 0: as many as keep each >= 4 max_object */
} gw_cache_opts_t;

/* A stored answer. Immutable once in the store (but for the claim of its revalidation, kept
 * apart: gw_cache_claim); valid while the holder keeps its reference. */
typedef struct gw_cache_entry {
    const char *key; /* primary key */
    size_t keylen;
    unsigned status;
    const gw_field_t *fields; /* the stored head (slices into the entry) */
    size_t nfields;
    const gw_rslice_t *body; /* the body: references the entry holds */
    size_t nbody;
    uint64_t body_len;
    gw_cache_meta_t meta;
    size_t charge; /* bytes counted against the budget */
    uint64_t id;   /* this entry's own, never given to another in the process: what an entry
                      derived from it (a compressed copy) is keyed by */
} gw_cache_entry_t;

/* How a background revalidation (RFC 5861 §3) ended. */
typedef enum {
    GW_CACHE_BG_REFRESHED = 0, /* the origin said 304: the stored head refreshed (§4.3.4) */
    GW_CACHE_BG_REPLACED,      /* a new answer was stored in its place */
    GW_CACHE_BG_NOT_STORED,    /* an answer came that may not be stored, a full one or a
                                  304's update (no-store...): the stale one was removed (§3,
                                  §4.3.3, §4.3.4) */
    GW_CACHE_BG_FAILED,        /* no answer, a timeout, or a 5xx: the stale one stays */
    GW_CACHE_BG_CANCELLED,     /* the worker's proxy closed first (reload, stop) */
    GW_CACHE_BG_SKIPPED,       /* never started: the worker ran cache.max_background_
                                  revalidations already; the stale answer was served alone */
    GW_CACHE_BG_N
} gw_cache_bg_t;
/* "refreshed", "replaced", "not_stored", "failed", "cancelled", "skipped" (metric labels). */
const char *gw_cache_bg_str(gw_cache_bg_t r);

/* What the proxy tells the store to count (gw_cache_count): stale answers served, by cause,
 * and the revalidations of stored answers (a stale entry or a request's no-cache asked of the
 * origin again, in the foreground or the background), by what the origin said. */
typedef enum {
    GW_CACHE_EV_STALE_IF_ERROR = 0,       /* a stale answer stood in for a failure (RFC 5861 §4) */
    GW_CACHE_EV_STALE_WHILE_REVALIDATE,   /* a stale answer served at once (RFC 5861 §3) */
    GW_CACHE_EV_REVALIDATED_NOT_MODIFIED, /* the origin said 304: the entry refreshed */
    GW_CACHE_EV_REVALIDATED_MODIFIED,     /* the origin sent a new answer */
    GW_CACHE_EV_REVALIDATION_FAILED,      /* no answer, a timeout or a 5xx */
    GW_CACHE_EV_REVALIDATED_NOT_STORED,   /* a 304 whose fields forbid storing the updated
                                             answer (no-store, private...): entry removed;
                                             or one that refreshes nothing (the entry was
                                             invalidated meanwhile, or §3.5: credentials) */
    GW_CACHE_EV_N
} gw_cache_ev_t;
/* Count one ev in c's stats (c may be NULL). Lock-free. */
void gw_cache_count(gw_cache_t *c, gw_cache_ev_t ev);

typedef struct {
    uint64_t hits, misses, inserts, replaced, evictions, refused;
    uint64_t purged;            /* removed by gw_cache_purge() and gw_cache_purge_prefix() */
    uint64_t dropped;           /* removed by gw_cache_keep_routes(): their route is gone */
    uint64_t bg[GW_CACHE_BG_N]; /* background revalidations ended, by result */
    uint64_t ev[GW_CACHE_EV_N]; /* gw_cache_count()'s events */
    uint64_t bytes;             /* charged now */
    uint64_t objects;           /* entries now */
    uint64_t ghosts;            /* keys in the ghost queues */
} gw_cache_stats_t;

/* A store for o, or NULL (out of memory, or GW_E_INVAL-worthy options: memory 0, max_object 0
 * or above memory, shards not a power of two up to 64). Threads may use it at once. */
gw_cache_t *gw_cache_new(const gw_cache_opts_t *o);
/* Free the store; entries still held by readers live on until their last unref. */
void gw_cache_del(gw_cache_t *c);
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* The number of shards (each with its lock and 1/shards of the budget). */
unsigned gw_cache_shards(const gw_cache_t *c);
/* The copy rule (store.c) on (the default) or off: off, every body is kept by reference to the
 * buffers it came in, each charged whole (what the store did before the rule), to measure the
 * rule against. Before the first put. */
void gw_cache_copy_rule(gw_cache_t *c, int on);
/* The longest chain of the ghost queues' hash index over the shards: the most keys one ghost
 * lookup compares (one at every put, one more at every eviction from small). */
size_t gw_cache_ghost_chain_max(gw_cache_t *c);
#endif

/* What an insert stores: the key, the request fields the answer's Vary names are read from,
 * the head (copied into the entry), the body and its metadata. The body's runs of slices that
 * fill at least 3/4 of their buffer are shared by reference (the entry holds one on the
 * buffer); the rest is copied into one buffer of its exact length (store.c's copy rule), so
 * the entry never pins a read buffer for a few bytes of it. */
typedef struct {
    const char *key;
    size_t keylen;
    const gw_field_t *req_fields;
    size_t nreq;
    unsigned status;
    const gw_field_t *fields;
    size_t nfields;
    const gw_rslice_t *body;
    size_t nbody;
    gw_cache_meta_t meta;
    uint64_t route; /* the tag of the route that answered (gw_cache_route_tag) */
    uint64_t gen;   /* 0, or gw_cache_gen() of the key read before the request went to the
                       origin: not stored when the key was invalidated since */
} gw_cache_put_t;

/* Non-zero when e may answer a request with the fields req[0..n) as far as Vary goes (RFC 9111
 * §4.1): their Vary key for e's Vary lines is the one e was stored under. What gw_cache_get
 * checks; for an entry found for one request and about to answer others. */
int gw_cache_vary_matches(const gw_cache_entry_t *e, const gw_field_t *req, size_t n);

/* Store p, replacing the entry of the same key and Vary key, evicting as the budget needs
 * (S3-FIFO). 0; GW_E_LIMIT when its charge is above max_object (refused, counted); GW_E_INVAL
 * for Vary: *; GW_E_NOENT when p->route is not one gw_cache_keep_routes() keeps (a request
 * of a route a reload removed, finishing while its connection drains); GW_E_CLOSED when p->gen
 * is not 0 and no longer the key's generation (an unsafe method, a purge or a removal since
 * the request left: its answer, or the 304 that would refresh the removed entry, may be
 * older than the change); GW_E_NOMEM. */
int gw_cache_put(gw_cache_t *c, const gw_cache_put_t *p);

/* The invalidation generation of key (any thread, lock-free): it changes whenever the key
 * may have been invalidated, by gw_cache_purge() of the key, gw_cache_remove() of one of its
 * entries or gw_cache_purge_prefix() (of any prefix); never 0. Read before a request for key
 * goes to the origin and given to gw_cache_put() with its answer, it keeps an invalidation
 * (RFC 9111 §4.4) that happened while the request was in flight from being undone by it. Keys
 * share generations by their hash, so a purge may also make another key's answer in flight
 * not stored. */
uint64_t gw_cache_gen(gw_cache_t *c, const char *key, size_t keylen);

/* Non-zero, once, when a trim of the heap is due: each time another memory/16 bytes left the
 * store since it was made, evicted or replaced by gw_cache_put, or removed by a purge,
 * gw_cache_remove or gw_cache_keep_routes (the caller of those checks too: a purge of
 * everything gives the memory back even when nothing is put after it). Eviction frees blocks that
 * other threads allocated, whose pages glibc keeps in their arenas: the caller gives them back
 * to the system (malloc_trim) off its event loop (store.c: "Memory"). Any thread; a due trim is
 * said to one caller only. */
int gw_cache_trim_due(gw_cache_t *c);

/* The entry for key stored by route (its gw_cache_route_tag) whose Vary key matches the request
 * fields req[0..n), with a reference the caller drops with gw_cache_unref(); NULL on a miss.
 * An entry another route stored is a miss: after a reload that puts a new route in front of an
 * old one, the URLs the new route takes are not answered from what the old one's upstream said,
 * and the new route's answer replaces the entry (gw_cache_put: same key and Vary key). Counts a
 * hit or a miss. Takes the lock of the key's shard only. */
gw_cache_entry_t *gw_cache_get(gw_cache_t *c, const char *key, size_t keylen, uint64_t route,
                               const gw_field_t *req, size_t n);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* The body bytes [off, off + len) of e as slices into its buffers, into out[0..cap): not
 * referenced (valid while the caller holds e; gw_iovq_ref() pins a buffer past that), for a
 * 206 or a whole answer. Returns the count, or -1 when the range is not inside the body or
 * cap is too small. len 0 gives 0. */
ssize_t gw_cache_body_slices(const gw_cache_entry_t *e, uint64_t off, uint64_t len,
                             gw_rslice_t *out, size_t cap);
#endif

/* gw_cache_get without counting a hit or a miss: for a lookup that is part of another (the
 * compressed copy of an entry that was found: gateway/proxy/cache.c). */
gw_cache_entry_t *gw_cache_peek(gw_cache_t *c, const char *key, size_t keylen, uint64_t route,
                                const gw_field_t *req, size_t n);

/* Drop a reference from gw_cache_get(); the last one frees the entry and its body references. */
void gw_cache_unref(gw_cache_entry_t *e);

/* One more reference to e, which the caller holds (dropped with gw_cache_unref); returns e. */
gw_cache_entry_t *gw_cache_ref(gw_cache_entry_t *e);
/* Claim e's background revalidation (RFC 5861 §3: one at a time, whichever worker asks): 1
 * when the caller now holds it and must end it with gw_cache_claim_end(), 0 when another one
 * holds it. Lock-free; e must be held (gw_cache_get). */
int gw_cache_claim(gw_cache_entry_t *e);
/* The revalidation of e ended with r: the claim is released (a later request may start
 * another while e is still stored and stale) and r counted in c's stats (c may be NULL). */
void gw_cache_claim_end(gw_cache_t *c, gw_cache_entry_t *e, gw_cache_bg_t r);

/* Remove every variant of key, and the entries derived from them (keys that are key, a 0 byte
 * and more: the compressed copies of gateway/proxy/cache.c, which a put that replaces their
 * entry removes too); returns how many entries went (counted as purged). Readers keep theirs. */
size_t gw_cache_purge(gw_cache_t *c, const char *key, size_t keylen);
/* Remove e (held by the caller, from gw_cache_get or gw_cache_peek) and its copies if it is
 * still stored (not replaced, evicted or purged since): an answer found invalid (a 304 or a
 * HEAD's 200 whose fields forbid storing it, or a HEAD's validators that differ: RFC 9111
 * §4.3.4, §4.3.5). Returns 1 when it was removed (counted as purged), 0 when it had gone. */
int gw_cache_remove(gw_cache_t *c, gw_cache_entry_t *e);
/* Remove every entry whose key starts with prefix (a URL's key is a prefix of the keys of the
 * URLs below it: gw_cache_key), every shard one after the other, each under its own lock only;
 * returns how many (counted as purged). */
size_t gw_cache_purge_prefix(gw_cache_t *c, const char *prefix, size_t len);

/* Keep the answers of the routes tagged routes[0..n) only (a reload: the routes with cache:
 * true of the new configuration): every entry of another route is removed now (one walk over
 * the shards, each under its own lock: counted as dropped), and a later gw_cache_put() for
 * another route is refused, so a connection of the old configuration that finishes a request
 * of a removed route does not bring its entries back. n 0 keeps none (the store is emptied and
 * stores nothing more). Until the first call every route is kept. Callers are serialised
 * (the store's own mutex); puts and lookups go on meanwhile. Returns how many entries were
 * removed, or GW_E_NOMEM (nothing changed). */
ssize_t gw_cache_keep_routes(gw_cache_t *c, const uint64_t *routes, size_t n);

/* The counters, summed over the shards. */
void gw_cache_stats(gw_cache_t *c, gw_cache_stats_t *s);

#endif
