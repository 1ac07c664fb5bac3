/* proxy/proxy_internal.h — what the files of proxy/ share (not a public interface).
 *
 * The files, in the order a request meets them:
 * proxy.c:     the proxy of one worker: its lifetime, what the front sets on it, its counters.
 * request.c:   the request stage, before any exchange exists: what is refused (CONNECT, no
 *              route, WebSocket), the place of the route's request policy, the request rate
 *              (the local bucket, or the cluster's answer waited for).
 * acl.c:       the route's access list (allow, deny), the first request policy.
 * auth.c:      a route's basic_auth: the Authorization field, verification on the thread pool,
 *              the cache of verified credentials, the failure limit.
 * route.c:     route matching (host, wildcard, path prefix), request-rate buckets (429) and
 *              the gateway's own answers (404, 400, 5xx).
 * exchange.c:  px_t (one client stream) and ox_t (one origin exchange): their lifetimes,
 *              dispatch to the back, the back's callbacks (into the chain), error answers.
 * translate.c: request and response translation as pure functions (RFC 9110 §7.6, RFC 9113
 *              §8.2-§8.3): what the origin and the client are told.
 * chain.c:     the response filter chain: each route's filters, each hook run over them, and
 *              the end of the chain (the head to each subscriber, the body into the store).
 * The filters, in the order of the chain (GW_PROXY_FILTERS below):
 * cache.c:     the shared cache (gateway/cache/) on routes with cache: true: the lookup before
 *              the origin, a hit sent from the store by reference, the filter that keeps a
 *              miss's answer for the store, Cache-Status, invalidation.
 * revalidate.c: stale-while-revalidate: the background request, one per stale entry, whose
 *              client is the cache (a client stream of its own).
 * coalesce.c:  the RFC 9111 rules of coalescing, the key, the shared body store, the in-flight
 *              index, and the filter that decides who may share an answer.
 * hints.c:     103 Early Hints: the gateway's (configured, learned in an LRU per worker), the
 *              origin's (relayed, held for followers until the answer is shared).
 * push.c:      HTTP/2 server push of an answer's preload links.
 * compress.c:  Accept-Encoding negotiation, the rules, the head rewrite, and one exchange's
 *              compression (fed, finished, made again for a follower that detaches).
 * errpage.c:   error pages: each route's on the worker, the body of the gateway's answers, and
 *              the filter that replaces an origin 5xx body (intercept_errors).
 * rules.c:     the header rules (request: called by translate.c; response: the last filter,
 *              and the gateway's answers), template variables, strip_prefix.
 * Before any of them, in the request stage:
 * redirect.c:  redirect_https, a route's redirect and respond, the gateway's answers with the
 *              route's response rules.
 * What they use:
 * link.c:      the Link fields (RFC 8288), read for hints.c and push.c.
 * zstream.c:   the gzip, br and zstd compressors and the memory they are charged.
 * And the body's way:
 * flow.c:      the response body handed to each subscriber as its client takes it, the
 *              origin paused while the slowest cannot, stalled streams given up.
 * upload.c:    request bodies to the origin: by reference, credited back once written,
 *              small pieces gathered per loop turn, the request_body timeout.
 * tunnel.c:    WebSocket: the handshake, the check of the origin's 101, the exchange that
 *              becomes a tunnel.
 * client_cert.c: the route's client_cert: required (403 without a verified certificate).
 */
#ifndef GW_PROXY_INTERNAL_H
#define GW_PROXY_INTERNAL_H

#include "back/back.h"
#include "common/list.h"
#include "common/pool.h"
#include "proxy/proxy.h"

/* A route's response filters (chain.c). */
typedef struct gw_proxy_chain gw_proxy_chain_t;

/* An error page on the worker (errpage.c): the status it answers, its Content-Type, the
 * worker's buffer of its bytes (buf->len of them), sent by reference. */
typedef struct gw_proxy_errpage {
    unsigned status;
    const char *type;
    gw_rbuf_t *buf;
} gw_proxy_errpage_t;

/* The learned pages of hints.c: a hash table with an LRU list. */
typedef struct {
    struct gw_hint_ent **tab;
    size_t tab_cap, n;
    gw_list_t lru;
    gw_proxy_hint_stats_t st;
} gw_proxy_hints_t;

struct gw_proxy {
    const gw_config_t *cfg;
    uv_loop_t *loop;
    gw_back_t *back;  /* NULL once closed */
    uv_timer_t sweep; /* stall checks of paused exchanges */
    int sweep_open;
    gw_list_t paused;        /* ox_t waiting for their clients to read */
    uv_timer_t upload_sweep; /* request body timeouts of the streams in uploading */
    int upload_open;
    gw_list_t uploading;    /* px_t whose request body is still coming (timeouts.request_body) */
    uv_prepare_t acc_flush; /* once per loop turn: gathered small request body pieces go out */
    int acc_open;
    int closing;             /* handles closing (gw_proxy_close) */
    gw_proxy_zstats_t zst;   /* compression (zst.active: against compression.max_concurrent) */
    uint64_t *zcharged;      /* bytes the worker's compressors are charged (max_memory) */
    uint64_t zcharged_own;   /* the count when the front gives none */
    size_t zweight[GW_ZC_N]; /* a compressor's measured peak bytes, by coding (compress.c) */
    gw_proxy_hints_t hints;  /* learned early hints (hints.c) */
    unsigned *tunnels;       /* WebSocket tunnels open in the worker (limits.max_tunnels) */
    unsigned tunnels_own;    /* the count when the front gives none */
    void (*closed_cb)(gw_proxy_t *p, void *arg);
    void *closed_arg;
    gw_list_t acc_pending; /* px_t with gathered pieces */
    gw_list_t inflight;    /* coalescible ox_t before their response head */
    gw_proxy_stats_t stats;
    gw_bucket_table_t *rates;      /* request-rate buckets shared by all workers, or NULL */
    gw_proxy_rate_asker_t asker;   /* the cluster's shared rates (ask NULL: none) */
    gw_proxy_trim_cb trim;         /* the heap's trim after evictions (NULL: none) */
    void *trim_data;               /* trim's user_data */
    gw_list_t rate_waits;          /* px_t waiting for the cluster's answer */
    struct gw_proxy_auth *auth;    /* basic auth's caches and queued verifications (auth.c) */
    gw_proxy_chain_t *chains;      /* the response filters of each route (index in cfg->routes) */
    gw_proxy_errpages_t *errpages; /* each route's error pages, then the top level's (errpage.c) */
    struct gw_cache *cache;        /* the process's shared cache (cache.c), or NULL */
    gw_list_t bg;                  /* background revalidations running (revalidate.c) */
    gw_list_t bg_done;             /* ... whose stream ended, closed at the next loop turn */
    size_t nbg;                    /* in bg and bg_done */
    uv_timer_t bg_reap;            /* that turn */
    int bg_open;
    /* px_t / ox_t (exchange.c): a proxied request allocates neither once warm */
    gw_pool_t px_pool, ox_pool;
};

/* ---- fields (translate.c) -------------------------------------------------------------- */

/* Length first: most names differ there (strlen of a literal folds once inlined). */
static inline int gw_proxy__name_is(gw_slice_t name, const char *lit)
{
    size_t n = strlen(lit);
    return name.len == n && gw_slice_eq_nocase(name, (gw_slice_t){(const uint8_t *)lit, n});
}

/* The first field named `name` (case-insensitively), or NULL; whether a field
 * named `name` has `token` in its comma list (RFC 9110 §5.6.1; a "token=value" element counts
 * as its token: Cache-Control directives), case-insensitively. */
const gw_field_t *gw_proxy__field(const gw_field_t *f, size_t n, const char *name);
int gw_proxy__list_has(const gw_field_t *f, size_t n, const char *name, const char *token);
/* A copy of f[0..n) in one block (names and values after the array), into *out (gw_free it);
 * 0 or GW_E_NOMEM. */
int gw_proxy__fields_dup(const gw_field_t *f, size_t n, gw_field_t **out);

/* ---- exchanges: px_t (one client stream) and ox_t (one origin exchange) ------------------ */

/* A response body held once for every subscriber of an exchange (coalesce.c): the slices the origin
 * read delivered, by reference, from the first byte some subscriber still needs (base) to the last
 * byte received (end). Offsets count from the first body byte of the response. */
typedef struct {
    gw_rslice_t *c; /* ring of c[(head + i) % cap], i < n; each holds one reference */
    size_t head, n, cap;
    uint64_t base; /* offset of c[head]'s first byte (= end when n is 0) */
    uint64_t end;  /* offset after the last byte appended */
} gw_proxy__cbody_t;

/* An empty store in caller storage. */
void gw_proxy__cbody_init(gw_proxy__cbody_t *b);
/* Drop every reference and the ring; b is empty (and reusable) afterwards. */
void gw_proxy__cbody_free(gw_proxy__cbody_t *b);
/* Append buf[off, off+len) (the store takes its own reference; bytes that continue the last
 * slice in the same buffer extend it). 0 or GW_E_NOMEM (nothing appended). */
int gw_proxy__cbody_append(gw_proxy__cbody_t *b, gw_rbuf_t *buf, size_t off, size_t len);
/* The bytes from offset pos to the end of the slice holding it, into *out (not referenced:
 * valid until the next trim or free). 0, or GW_E_INVAL when pos is not in [base, end). */
int gw_proxy__cbody_at(const gw_proxy__cbody_t *b, uint64_t pos, gw_rslice_t *out);
/* Release the slices that end at or before offset upto (nobody needs them any more). */
void gw_proxy__cbody_trim(gw_proxy__cbody_t *b, uint64_t upto);

/* How far a client stream's response went; it only moves forward (gw_proxy__resp_reached).
 * The request side (req_done), the end of the stream (closed, reset) and its role (follower)
 * stay flags: they change independently of the response. */
typedef enum {
    PX_RESP_NONE = 0, /* no final head sent: an error can still be answered with a status */
    PX_RESP_HEAD,     /* the head went out: body bytes flow, an error resets the stream */
    PX_RESP_DONE,     /* handed over whole (END_STREAM, trailers, or a bodiless head) */
} px_resp_t;
/* "none", "head", "done". */
const char *gw_proxy__resp_str(px_resp_t r);

/* The sizes of the origin reads a compressor was fed, one flush each. A follower of a
 * compressing exchange that falls behind and fetches on its own (detach) feeds its new
 * compressor the same pieces: the same input, cut and flushed at the same places, makes the
 * same bytes, so it can go on from where its client is (compress.c). */
typedef struct {
    uint32_t *len;
    size_t n, cap;
} gw_zchunks_t;

/* An exchange's compression state beside its compressor (ox->z, compress.c): out of ox_t, which
 * every request clears and carries. */
typedef struct gw_proxy__oxz {
    gw_zchunks_t zchunks; /* recorded (zrecord) or replayed (zreplay, from zrep_i on) */
    size_t zrep_i;
    uint8_t *zpend; /* replaying: input gathered towards the next piece (zchunks.len[zrep_i]) */
    size_t zpend_len;
    gw_proxy__cbody_t zsrc; /* a hit to compress: the stored bytes not yet fed */
    uint64_t zsrc_pos;      /* how far into zsrc the compressor got */
} gw_proxy__oxz_t;

#define GW_WS_KEY_LEN_MAX 24
typedef struct ox ox_t;

/* A stream's state for the rarer ways through the proxy (px->x): a cache entry it revalidates,
 * a wait for the cluster's rate answer or for basic auth's verification, the pieces of a
 * compressing exchange it detached from. Allocated by the first of them (gw_proxy__px_x), freed
 * with the stream; a plain proxied request has none. */
typedef struct gw_proxy__pxx {
    struct gw_cache_entry *cstale; /* a stale entry its request revalidates (cache.c), held */
    gw_field_t *cfields;       /* its request fields with the entry's validators added (owned) */
    gw_list_t rlink;           /* in p->rate_waits while it waits for the cluster's rate answer */
    uint64_t token;            /* of the cluster question it waits for */
    struct gw_auth_wait *auth; /* its place among a verification's waiters (auth.c), or NULL */
    gw_zchunks_t zrep;         /* after a detach from a compressing exchange: its pieces */
    struct gw_proxy__px *px;   /* the stream it belongs to (p->rate_waits holds rlink) */
} gw_proxy__pxx_t;

/* Laid out by use, for the lines a plain proxied request touches once the origin answered
 * (b_head, the filters, the client's response, the stream's end): the stream, its exchange and
 * the response's progress first (104 bytes), the head (read at the request) after, the request
 * body's state last, the rarer state behind x. */
typedef struct gw_proxy__px {
    gw_cstream_t *s;
    ox_t *ox;              /* the exchange serving this stream, NULL once it ended */
    gw_list_t slink;       /* in ox->subs */
    unsigned req_done : 1; /* the client ended its request body */
    unsigned closed : 1;   /* the front is done with the stream: no more ops */
    unsigned reset : 1;
    unsigned follower : 1;     /* joined another stream's exchange */
    unsigned ws : 1;           /* a WebSocket request (tunnel.c): no body until the 101 */
    unsigned hinted : 1;       /* a 103 went to the client (at most one per request) */
    unsigned tunnel : 1;       /* its 101 came: bytes both ways until either side ends */
    unsigned cache_stored : 1; /* the cache filter keeps its answer (Cache-Status stored) */
    unsigned status;           /* status of the response head sent, 0 before */
    uint8_t resp;              /* px_resp_t: how far the response towards the client went */
    uint8_t zc;                /* gw_zcoding_t of the response sent (GW_ZC_NONE: as it came) */
    uint8_t cache_fwd;         /* gw_proxy__cache_fwd_t: why a cache lookup went forward */
    uint64_t cache_gen;        /* gw_cache_gen() of its key before the lookup (0: none): an
                                  invalidation since keeps its answer out of the store */
    gw_req_proto_t proto;
    gw_proxy_t *p;
    const gw_cfg_route_t *route;
    uint64_t delivered;     /* cursor: response body bytes handed to the client stream (after
                               a detach, bytes of the new response below it are not resent) */
    int64_t resp_cl;        /* response content-length sent, -1 none */
    gw_proxy__pxx_t *x;     /* NULL until a rarer way needs it (gw_proxy__px_x) */
    uint64_t body_inflight; /* request body bytes given to the back, not yet credited */
    int64_t req_cl;         /* request Content-Length, -1 unknown */
    gw_req_head_t head;     /* shallow copy: slices valid until the stream closes */
    uint64_t req_sent;      /* request body bytes received from the client */
    gw_list_t ulink;        /* in p->uploading while the request body is still coming */
    uint64_t body_since;    /* loop ms of the last request body progress (read or credited) */
    gw_rbuf_t *acc;         /* small request body pieces gathered for one write (acc_flush) */
    gw_list_t alink;        /* in p->acc_pending while acc holds bytes */
} px_t;

/* px->x, allocated (cleared) when it is still NULL; NULL when memory ran out. */
gw_proxy__pxx_t *gw_proxy__px_x(px_t *px);
/* The stale entry px holds (px->x->cstale), or NULL. */
static inline struct gw_cache_entry *gw_proxy__px_cstale(const px_t *px)
{
    return px->x ? px->x->cstale : NULL;
}

/* px's request path for a log line, as the arguments of a "%.*s" (cut at GW_PX_LOG_PATH bytes):
 * the head's slices live as long as the stream, so no copy is kept in px_t. */
#define GW_PX_LOG_PATH 159
#define PX_PATH(px)                                                                                \
    (int)((px)->head.path.len < GW_PX_LOG_PATH ? (px)->head.path.len : GW_PX_LOG_PATH),            \
        (const char *)(px)->head.path.base

/* Laid out by use: what a request's way through the proxy reads first (the exchange, its
 * subscribers, its flags, its start and key: all that b_head reads, in the first 64 bytes but
 * the key; then the body and the filters' state every response looks at), the coalescing index
 * and pause state next, the WebSocket key last: gw_proxy__ox_new clears the exchange up to ws_key
 * (which only ws says holds something), so a request touches as few lines as it can. */
struct ox {
    gw_proxy_t *p;
    const gw_cfg_route_t *route;
    const gw_proxy_chain_t *chain; /* the route's response filters */
    gw_back_exch_t *bx;            /* NULL once ended */
    gw_list_t subs;                /* px_t */
    unsigned zrecord : 1;
    unsigned zreplay : 1;
    unsigned tunnel : 1; /* the origin switched to WebSocket: counted in tunnels */
    unsigned ws : 1;     /* a WebSocket request: ws_key holds the key the origin got */
    unsigned paused : 1;
    unsigned indexed : 1;
    unsigned complete : 1;    /* the origin response ended: subscribers finish at the body's end */
    unsigned pumping : 1;     /* inside pump(): the last sub_remove leaves freeing to it */
    unsigned credentials : 1; /* the requests carry Authorization or Cookie (coalesce_private
                                 only: gw_proxy__has_credentials) */
    uint64_t started_ns;      /* gw_now_ns() when the origin exchange started */
    size_t nsubs;
    px_t *owner;            /* the stream whose request (and body) this is */
    char *key;              /* coalescing key, NULL when not coalescible */
    gw_proxy__cbody_t body; /* the response body from the slowest subscriber's cursor on */
    struct gw_zstream *zip; /* compressing the response (compress.c), or NULL */
    /* A body the gateway holds whole and makes as the clients take it (a compressed cache
     * hit): flow.c calls it while a subscriber has everything and wants more; it appends to
     * ox->body or sets ox->complete (and itself NULL), 0 or a negative code. */
    int (*refill)(struct ox *ox);
    const gw_proxy_errpage_t *errpage; /* the page replacing the origin's body (errpage.c) */
    struct gw_proxy_cx *cx; /* the answer being kept for the shared cache (cache.c), or NULL */
    gw_field_t *trailers;   /* translated response trailers (one block), sent after the body */
    size_t ntrailers;
    gw_field_t *hint; /* the origin's first 103 (its hint fields, one block), held for the
                         followers until the final head says they may share the answer */
    size_t nhint;
    size_t keylen;
    uint64_t hash;
    gw_list_t klink; /* in p->inflight while others may join */
    gw_list_t plink; /* in p->paused */
    uint64_t paused_since;
    /* the rest of its compression state, allocated with the first compressor and kept until
       the exchange is released (compress.c); NULL for the exchanges that never compress */
    struct gw_proxy__oxz *z;
    char ws_key[GW_WS_KEY_LEN_MAX + 1]; /* with ws: a WebSocket's key as the origin got it */
};

/* Per body write to the origin: what to credit back when it is written. */
typedef struct {
    px_t *px;
    size_t len;
} wctx_t;

#define FOREACH_SUB(ox, px)                                                                        \
    for (gw_list_t *it_ = (ox)->subs.next, *nx_ = it_->next; it_ != &(ox)->subs;                   \
         it_ = nx_, nx_ = it_->next)                                                               \
        for (px_t *px = GW_CONTAINER_OF(it_, px_t, slink); px; px = NULL)

/* ---- the response filter chain (chain.c) ---------------------------------------------------
 *
 * A request's way through the proxy, in order:
 *  1. the request stage (request.c), before any exchange exists: CONNECT refused, the route
 *     (404 without one), the WebSocket checks, the route's request policy (its place is marked
 *     there), the request rate (429, or the cluster's answer waited for);
 *  2. the stream is served (gw_proxy__serve): a hit of the shared cache is answered (cache.c:
 *     the stored head through the same compression, hints and push as a forwarded one), else
 *     the on_request hook of each filter of its route, then it joins an identical exchange in
 *     flight or starts one of its own;
 *  3. the origin's response passes the filters of the route in the order of GW_PROXY_FILTERS,
 *     then the end of the chain (chain.c): the final head to each subscriber, the body into the
 *     exchange's store (from which flow.c hands it to each client as it reads), the trailers
 *     after the body.
 *
 * A filter is an ops table (gw_proxy_filter_t) defined in a file of its own; every hook is
 * optional (NULL: the filter has nothing to do at that point). Hooks run on the worker's loop,
 * from the back's callbacks or the front's entry points; they may call the client stream's ops
 * (which never call back into the proxy) and the exchange functions of exchange.c. A filter
 * keeps its state of one exchange in ox_t (its fields say whose they are) and drops it in
 * release. Negative returns are GW_E_* codes: the exchange is aborted with that code (its
 * streams answered or reset, as gw_proxy__ox_abort does). */

/* A response head (final or interim) or the trailers, on their way through the chain. The
 * filters read and rewrite f[0..n), cl and coding; what the clients get is what the last left. */
#define GW_PROXY_MAX_RESP_FIELDS 128
typedef struct {
    const gw_back_head_t *origin; /* the origin's head as it came (NULL for trailers): the rules
                                     of sharing read its fields, not the translated ones */
    px_t *asker;                  /* final head: the stream whose request the origin answered
                                     (the owner; a follower once the owner's client left) */
    unsigned status;              /* 0 for trailers */
    gw_field_t f[GW_PROXY_MAX_RESP_FIELDS]; /* translated for the clients (gw_proxy__resp_fields) */
    size_t n;
    int64_t cl;          /* final head: the content-length the clients are told, -1 none */
    gw_zcoding_t coding; /* final head: the content coding the chain gave the body */
    char names[16384];   /* the lowercased names of f */
    char room[1024];     /* bytes of rewritten values (gw_proxy__resp_room) */
    size_t room_used;
} gw_proxy_resp_t;
/* n bytes that live as long as r (until its head or trailers went out), for a value a filter
 * rewrites; NULL when r has no more room. */
char *gw_proxy__resp_room(gw_proxy_resp_t *r, size_t n);

/* on_body: the filter put what it made of the bytes into ox->body itself; the filters after it
 * and the end of the chain do not see them. */
#define GW_PROXY_F_TAKEN 1

typedef struct {
    const char *name;
    /* Whether the filter runs on route r: asked once per route when the proxy is made (NULL:
     * on every route). */
    int (*wants)(const gw_cfg_route_t *r);
    /* px is routed and about to be served (before it joins or starts an exchange, before the
     * origin is asked). */
    void (*on_request)(px_t *px);
    /* An interim (1xx) head of the origin; the filters decide what of it reaches whom (no 1xx
     * reaches a client otherwise: the hints filter sends a 103 itself, so a filter that
     * rewrites one goes before it). */
    void (*on_interim)(ox_t *ox, gw_proxy_resp_t *r);
    /* The final head, once per exchange, before any subscriber gets it: decide, rewrite r,
     * detach subscribers that may not have this answer (gw_proxy__detach: ox stays valid until
     * the chain is done with it). 0 or a negative code. */
    int (*on_head)(ox_t *ox, gw_proxy_resp_t *r);
    /* px is about to get the final head r (after every on_head): what must reach its client
     * before the head (a 103, push promises) goes now. */
    void (*on_deliver)(ox_t *ox, px_t *px, const gw_proxy_resp_t *r);
    /* Body bytes of the origin (the reference in b is lent for the call): 0 to pass them on
     * (the filter may change b), GW_PROXY_F_TAKEN, or a negative code. */
    int (*on_body)(ox_t *ox, gw_rslice_t *b);
    /* The origin's trailers (r->origin NULL, r->status 0). 0 or a negative code. */
    int (*on_trailers)(ox_t *ox, gw_proxy_resp_t *r);
    /* The origin's response ended (before the subscribers are told): what the filter still
     * holds goes into ox->body. 0 or a negative code. */
    int (*on_end)(ox_t *ox);
    /* px, whose head may have gone out, leaves ox to fetch on its own (gw_proxy__detach): the
     * new exchange must hand it the same bytes. 0, or a negative code when that cannot be
     * (px is reset instead). */
    int (*on_detach)(ox_t *ox, px_t *px);
    /* ox is freed (whatever happened): drop what the filter holds for it. */
    void (*release)(ox_t *ox);
} gw_proxy_filter_t;

/* The response filters, in the order they run; a filter is a file that defines
 * `const gw_proxy_filter_t gw_proxy__filter_<name>`, and one line here:
 *   cache     cache.c: the shared cache keeps what the origin sent (before any filter
 *             rewrites it), adds Cache-Status, invalidates after unsafe methods
 *   coalesce  coalesce.c: which subscribers may share the answer (RFC 9111)
 *   hints     hints.c: 103 Early Hints: the gateway's, the learned, the origin's
 *   push      push.c: HTTP/2 server push of the answer's preload links
 *   compress  compress.c: gzip, br or zstd, as the client accepts
 *   errpage   errpage.c: an origin 5xx's body replaced by the error page (intercept_errors;
 *             compress leaves 5xx answers alone, so the order of the two does not matter)
 *   headers   rules.c: the response header rules, last: they see what the client gets */
#define GW_PROXY_FILTERS(X)                                                                        \
    X(cache)                                                                                       \
    X(coalesce)                                                                                    \
    X(hints)                                                                                       \
    X(push)                                                                                        \
    X(compress)                                                                                    \
    X(errpage)                                                                                     \
    X(headers)
#define GW_PROXY_FILTER_DECLARE(name) extern const gw_proxy_filter_t gw_proxy__filter_##name;
GW_PROXY_FILTERS(GW_PROXY_FILTER_DECLARE)
#define GW_PROXY_FILTER_COUNT(name) +1
enum { GW_PROXY_FILTER_N = 0 GW_PROXY_FILTERS(GW_PROXY_FILTER_COUNT) };

/* The filters of one route, in chain order. */
struct gw_proxy_chain {
    const gw_proxy_filter_t *f[GW_PROXY_FILTER_N];
    size_t n;
};
/* Register each route's filters (p->chains); 0 or GW_E_NOMEM. Freed by gw_proxy__chains_free. */
int gw_proxy__chains_new(gw_proxy_t *p);
void gw_proxy__chains_free(gw_proxy_t *p);
/* Route r's chain (r is one of p->cfg->routes). */
const gw_proxy_chain_t *gw_proxy__chain_of(const gw_proxy_t *p, const gw_cfg_route_t *r);
/* Each hook over ox->chain (px's route's for on_request): the back's callbacks call these
 * (exchange.c). chain_head translates the origin's head, runs on_head, frees ox when nobody is
 * left to answer, then delivers the head; chain_body and chain_end end by handing the store
 * on (gw_proxy__pump); chain_detach returns the first negative code of on_detach, or 0. */
void gw_proxy__chain_request(px_t *px);
void gw_proxy__chain_interim(ox_t *ox, const gw_back_head_t *h);
void gw_proxy__chain_head(ox_t *ox, const gw_back_head_t *h);
void gw_proxy__chain_body(ox_t *ox, gw_rslice_t b);
/* Body bytes that filter f makes (an answer it stands in with: the cache's stored body after a
 * 304) through the filters after f's place in ox->chain, then into the store: 0, or the
 * first negative code (the caller aborts). */
int gw_proxy__chain_body_after(ox_t *ox, const gw_proxy_filter_t *f, gw_rslice_t b);
void gw_proxy__chain_trailers(ox_t *ox, const gw_field_t *f, size_t n);
void gw_proxy__chain_end(ox_t *ox);
int gw_proxy__chain_detach(ox_t *ox, px_t *px);
void gw_proxy__chain_release(ox_t *ox);

/* ---- exchange.c: the lifetimes of streams and exchanges ------------------------------------
 *
 * What the other files may do to a px_t or an ox_t. A px_t lives from gw_proxy__stream_new
 * until the front closes its stream (gw_proxy_stream_closed), which the front never does from
 * inside a call into the proxy or an op: a px_t stays valid through every call below, whatever
 * they answer or reset. An ox_t lives while it has subscribers: the last gw_proxy__sub_remove
 * frees it, unless ox->pumping says the caller will (flow.c's pump, the chain's on_head). After
 * a call that can free ox (sub_remove, detach, ox_end, ox_abort, pump returning 1), ox is
 * looked at again only under ox->pumping. Calls on a stream the front closed do nothing. */

/* A stream's state for request h of s on route r, before it goes anywhere (s->proxy_data
 * points to it); NULL out of memory. */
px_t *gw_proxy__stream_new(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                           const gw_cfg_route_t *r);
/* On to the origin: on a caching route a fresh stored answer first (the hit sends its own 103
 * and promises: cache.c), else each filter's on_request, then a coalesced exchange to join or
 * a new one. 0, or a negative code (the front resets the stream). */
int gw_proxy__serve(px_t *px);

/* px's response reached r (never moves back; a WebSocket answered otherwise than by a switch
 * has a whole request from then on). */
void gw_proxy__resp_reached(px_t *px, px_resp_t r);
/* Reset px's stream with code (once). */
void gw_proxy__do_reset(px_t *px, gw_cs_reset_t code);
/* px's response is complete towards the client: a request body still coming is not wanted
 * (RFC 9113 §8.1: the stream is reset with NO_ERROR). */
void gw_proxy__response_done(px_t *px);
/* The origin side failed with code: before the head, the gateway answers (gw_back_status_for:
 * 502, 503, 504); after it, the stream is reset (a broken response, never a short one). */
void gw_proxy__fail(px_t *px, int code);
/* Start an origin exchange of px's own (px its owner and only subscriber); with key (owned,
 * keylen bytes) it is indexed for followers. A synchronous failure is answered to px. */
void gw_proxy__dispatch(px_t *px, char *key, size_t keylen);
/* A new origin exchange for px's route, from the pool, its lists and body empty, its clock
 * started; no owner yet (exchange.c). NULL when the pool is out of memory. */
ox_t *gw_proxy__ox_new(px_t *px);
/* A malformed request (the client's fault, never the origin's): HTTP/2 resets the stream with
 * PROTOCOL_ERROR, HTTP/1.1 is answered 400 while no head went out; why goes to the log. */
void gw_proxy__bad_request(px_t *px, const char *why);

/* px leaves its exchange (nothing when it has none). */
void gw_proxy__sub_remove(px_t *px);
/* A follower leaves its exchange for one of its own, dispatched now and never coalescible
 * again; what it was handed carries over (the filters' on_detach), else it is reset. */
void gw_proxy__detach(px_t *px);
/* Take the back exchange off ox and cancel it: no back callback follows, the subscribers stay
 * (their pending request body writes report back). */
void gw_proxy__ox_cancel(ox_t *ox);
/* The exchange ended (complete or failed, ox->bx gone): every subscriber leaves it. */
void gw_proxy__ox_end(ox_t *ox);
/* The exchange cannot go on (out of memory while holding the response, a bad answer):
 * cancelled, every subscriber fails with code (gw_proxy__fail), then gw_proxy__ox_end. */
void gw_proxy__ox_abort(ox_t *ox, int code);
/* Free ox, whose subscribers are gone: off the paused list and the in-flight index, its back
 * exchange cancelled, its store, trailers and the filters' state (release) dropped. */
void gw_proxy__ox_free(ox_t *ox);

/* ---- flow.c: response bodies, as each client reads ---------------------------------------- */

/* Hand every subscriber what its stream can take (finishing those at the end of a complete
 * response), then pause or resume the origin read and detach the followers past
 * limits.coalesce_buffer. 1 when ox was freed (every subscriber finished), else 0. */
int gw_proxy__pump(ox_t *ox);
/* The origin read resumes (ox leaves p->paused); nothing when it was not paused. */
void gw_proxy__ox_unpause(ox_t *ox);

/* ---- upload.c: request bodies --------------------------------------------------------------- */

/* Watch px's request body, still coming, for timeouts.request_body; unwatch it (it ended, the
 * response is under way, or the stream closed). */
void gw_proxy__upload_watch(px_t *px);
void gw_proxy__upload_unwatch(px_t *px);
/* Drop the small request body pieces px gathered (credited back to the client). */
void gw_proxy__acc_drop(px_t *px);

/* ---- request.c and auth.c: the request policy ---------------------------------------------- */

/* A gateway answer made before any exchange (request.c): status, text body, extra fields
 * f[0..n); over HTTP/2 a request still sending its body is reset with NO_ERROR afterwards. */
int gw_proxy__answer_text(gw_cstream_t *s, const gw_req_head_t *h, unsigned status,
                          const char *text, const gw_field_t *f, size_t n);
/* The route's request policy after basic auth, for a stream that waited for its verification
 * (px, made by auth.c): what request.c does after gw_proxy__auth let a request in. */
int gw_proxy__auth_passed(px_t *px);

/* The decoded credentials kept at most (user-id, ':', password); longer ones are refused. */
#define GW_PROXY_AUTH_CRED_MAX 1024
/* RFC 7617 §2 credentials in an Authorization value v: "Basic" (any case), 1*SP, then base64
 * (RFC 4648 §4, padded, canonical) of user-id ":" password, without control characters, the
 * user-id without ':'. Decoded into out[0..cap): the user-id is out[0..*ulen), the password
 * follows the ':' (*plen bytes). 0, or GW_E_PARSE (another scheme, malformed, too long). */
int gw_proxy__basic_credentials(gw_slice_t v, uint8_t *out, size_t cap, size_t *ulen, size_t *plen);
/* Route r's basic_auth for request h on s (r->basic_auth set). 0: let in now (cached
 * credentials; s->log says who), go on. 1: taken, *rv is what to return: answered (400, 401,
 * 429, 503), or waiting for a verification on the thread pool (the stream's px_t made, px->x->auth
 * set): its answer later continues with gw_proxy__auth_passed or a 401. */
int gw_proxy__auth(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                   int *rv);
/* The proxy's basic auth state (none when no route has basic_auth): 0, GW_E_NOMEM, GW_E_IO.
 * _close: queued verifications forget the proxy and its streams; _free: after _close. */
int gw_proxy__auth_new(gw_proxy_t *p);
void gw_proxy__auth_close(gw_proxy_t *p);
void gw_proxy__auth_free(gw_proxy_t *p);
/* A stream waiting for its verification holds its request body (not credited: at most
 * limits.body_buffer bytes, beyond it is answered 413) and its end; 1 when px waits (taken),
 * 0 otherwise. */
int gw_proxy__auth_hold(px_t *px, const uint8_t *data, size_t len);
int gw_proxy__auth_hold_end(px_t *px, const gw_field_t *tr, size_t n);
/* The stream closed: its verification, if any, finds nobody when it ends. */
void gw_proxy__auth_detach(px_t *px);

/* ---- route.c: routes, rates and the gateway's answers --------------------------------------- */

/* The shared rate key of a client on route r: "ROUTE NAME|ADDRESS", the address cut
 * to throttle.ipv6_prefix bits for IPv6 as the local tables do; its length (0: no key). */
#define GW_PROXY_RATE_KEY_MAX 180
size_t gw_proxy__rate_key(const gw_proxy_t *p, const gw_cfg_route_t *r, const struct sockaddr *sa,
                          uint8_t *out, size_t cap);

/* 1 when the path of h, read as an origin would (gw_proxy__route_ambiguous in route.c: dot
 * segments, runs of '/', ';' parameters, percent-encoded unreserved bytes and slashes), takes
 * another route than its bytes took (h->route): answered 400, so that no route's access list
 * or basic auth is passed by a path that reaches the origin as another route's. */
int gw_proxy__route_ambiguous(const gw_proxy_t *p, const gw_req_head_t *h);

/* A gateway-made answer (400, 404, 408, 502, 503, 504) with a short text body: the error page
 * for status in s->error_pages when there is one (its body by reference, its type the
 * Content-Type), text otherwise; gw_proxy__answer_early with no request head and no route. */
int gw_proxy__answer(gw_cstream_t *s, unsigned status, const char *text);

/* ---- acl.c: the route's access list ------------------------------------------------------ */

/* Whether s's client may use route r (r's allow/deny; no list: yes). A refusal is logged
 * (access_denied) and counted; the caller answers 403. */
int gw_proxy__acl_allows(gw_proxy_t *p, const gw_cstream_t *s, const gw_req_head_t *h,
                         const gw_cfg_route_t *r);

/* ---- errpage.c: error pages ---------------------------------------------------------------- */

/* The worker's copy of every error page of p->cfg (p->errpages): 0 or GW_E_NOMEM (what was
 * made is freed by gw_proxy__errpages_free, which p's release calls). */
int gw_proxy__errpages_new(gw_proxy_t *p);
void gw_proxy__errpages_free(gw_proxy_t *p);
/* Route r's pages (r NULL: a request without a route: the top level's); NULL before
 * gw_proxy__errpages_new. */
const gw_proxy_errpages_t *gw_proxy__errpages_of(const gw_proxy_t *p, const gw_cfg_route_t *r);
/* The page of status in t (t may be NULL), or NULL. */
const gw_proxy_errpage_t *gw_proxy__errpage_find(const gw_proxy_errpages_t *t, unsigned status);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Whether a request of client sa on route r (index idx in the config) is within the
 * route's request_rate; when not, *retry_after_s is the whole seconds until one more request
 * is allowed (at least 1). Always 1 when the route has no rate, t is NULL or the address is
 * not IP (unlimited). */
int gw_proxy__rate_allow(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                         const struct sockaddr *sa, uint64_t now_us, unsigned *retry_after_s);
#endif
/* The same for one of share instances deciding alone (gw_proxy_rate_asker_t.share; 0 counts
 * as 1): a request goes while the bucket holds a token, and costs share tokens (the rest as
 * debt), so the bucket lets rate/share requests a second through, and its burst/share (at
 * least one) at once. */
int gw_proxy__rate_allow_share(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                               const struct sockaddr *sa, uint64_t now_us, unsigned share,
                               unsigned *retry_after_s);

/* ---- coalesce.c: the rules of coalescing (RFC 9111 review at the top of the file) ---------- */

/* Whether request h on route r may lead or join a shared exchange: the route coalesces, GET or
 * HEAD, no content, no Expect, no Range/If-* conditionals, no request Cache-Control no-cache,
 * no-store or max-age=0 nor Pragma no-cache, no Authorization/Cookie unless coalesce_private. */
int gw_proxy__coalesce_request_ok(const gw_cfg_route_t *r, const gw_req_head_t *h);

/* The coalescing key of h on r (scheme, method, the authority as gw_http_authority reads it
 * and lowercased (one key for [::1] and [0::1]:80 of http), path, and every value of
 * each of the route's coalesce_headers; with coalesce_private, whether it carries credentials:
 * gw_proxy__has_credentials), as a heap string of *len bytes (NUL-terminated; may
 * hold NUL bytes: compare with the length), owned by the caller (gw_free). NULL when the request
 * may not coalesce (gw_proxy__coalesce_request_ok) or out of memory. */
char *gw_proxy__coalesce_key(const gw_cfg_route_t *r, const gw_req_head_t *h, size_t *len);

/* Whether a shared cache could give a response head (status, origin fields f[0..n)) to
 * another request that agrees with the first on the fields vary_ok[0..nvary): a heuristically
 * cacheable status (RFC 9110 §15.1, not 206/304) or explicit freshness; no Set-Cookie; no
 * Cache-Control no-store/private/no-cache; no Vary naming a field outside vary_ok, no Vary: *;
 * with `credentials` (the requests carry Authorization or Cookie), Cache-Control public,
 * s-maxage or must-revalidate (RFC 9111 §3.5). The one rule behind coalescing and learned
 * hints. */
int gw_proxy__reusable(unsigned status, const gw_field_t *f, size_t n, const char *const *vary_ok,
                       size_t nvary, int credentials);

/* gw_proxy__reusable with the route's coalesce_headers: whether the response may answer every
 * request that joined its exchange on route r. */
int gw_proxy__coalesce_shareable(const gw_cfg_route_t *r, unsigned status, const gw_field_t *f,
                                 size_t n, int credentials);

/* Whether the request carries credentials: an Authorization or a Cookie field. With
 * `credentials` set (the exchange's requests carry them: only with coalesce_private),
 * gw_proxy__coalesce_shareable also asks for Cache-Control public, s-maxage or must-revalidate
 * (RFC 9111 §3.5). */
int gw_proxy__has_credentials(const gw_req_head_t *h);

/* FNV-1a of n bytes (the index of in-flight keys). */
uint64_t gw_proxy__hash(const void *p, size_t n);

/* ox leaves the in-flight index: no request joins it from now on. */
void gw_proxy__unindex(ox_t *ox);
/* The exchange in flight under key (len bytes, hash gw_proxy__hash of it) that a request may
 * still join, or NULL. */
ox_t *gw_proxy__find_inflight(gw_proxy_t *p, const char *key, size_t len, uint64_t hash);

/* ---- cache.c: the shared cache (gateway/cache/) on routes with cache: true ---------------- */

/* Why a request of a caching route went to the origin (RFC 9211 §2.2's fwd). */
typedef enum {
    GW_PROXY_CFWD_BYPASS = 0, /* not looked up (a method, a body, a condition, credentials) */
    GW_PROXY_CFWD_MISS,       /* nothing stored for it */
    GW_PROXY_CFWD_STALE,      /* stored, stale: revalidated (with its validators) or fetched */
    GW_PROXY_CFWD_REQUEST,    /* stored and fresh, but the request said no-cache or max-age */
    GW_PROXY_CFWD_PARTIAL,    /* stored, but the request asks several ranges (RFC 9211 §2.2) */
} gw_proxy__cache_fwd_t;

/* On a route with cache: true, before px goes to the origin: a fresh stored answer is sent to
 * px (1: served, nothing else to do); else px->cache_fwd says why not (0). Only-if-cached
 * without a usable answer is answered 504 (1, RFC 9111 §5.2.1.7). */
int gw_proxy__cache_serve(px_t *px);
/* px leads its own exchange (px->ox, just dispatched) on a caching route: the exchange keeps
 * the answer for the store when px's request may be answered from it. */
void gw_proxy__cache_lead(px_t *px);
/* The origin exchange ox failed (code: no answer, a timeout, or its body broke): when it
 * forwarded a stale entry that RFC 5861 §4 lets stand in (stale-if-error) and no full answer
 * for it came, each subscriber whose head has not gone is answered from it and ox is done with
 * (1); else 0 (the caller fails them). A full answer's head having come (RFC 9111 §4.3.3), the
 * stale entry is removed from the store instead. */
int gw_proxy__cache_error(ox_t *ox, int code);
/* Drop what px holds of the cache (a stale entry, the fields with its validators): at close. */
void gw_proxy__cache_px_free(px_t *px);
/* RFC 9111 §4.3.1: px's request (a GET) is to carry e's validators (If-None-Match from its
 * ETag, If-Modified-Since from its Last-Modified): its fields with them added, in a block px
 * owns, and px holds the reference to e given with it (px->x->cstale). 1 when so; 0 when e has
 * none, px is not a GET or out of memory (nothing changed: the reference is still the
 * caller's). */
int gw_proxy__cache_validators(px_t *px, struct gw_cache_entry *e);

/* ---- revalidate.c: stale-while-revalidate (RFC 5861 §3) ----------------------------------- */

/* client's request found e stale within its stale-while-revalidate window: 1 when it may be
 * answered from e now, because a background revalidation of e started (a GET of client's URL
 * and fields whose client is the cache), one is under way already (e's claim), or the worker
 * runs cache.max_background_revalidations already (counted as skipped); 0 when none could
 * start (closing, out of memory): the client's own request revalidates. e stays the
 * caller's. */
int gw_proxy__revalidate(px_t *client, struct gw_cache_entry *e);
/* The proxy closes: each background revalidation still running is cancelled (the stale entry
 * stays), each ended one closed; none is left. */
void gw_proxy__revalidate_close(gw_proxy_t *p);

/* ---- hints.c: 103 Early Hints ------------------------------------------------------------- */

/* A GET that is a navigation: Sec-Fetch-Mode: navigate, or without it, Accept with text/html. */
int gw_proxy__is_navigation(const gw_req_head_t *h);
/* Send h's 103 with the route's configured and learned links, if any; 1 when one went out. */
int gw_proxy__hints_send(gw_proxy_t *p, gw_cstream_t *s, const gw_cfg_route_t *r,
                         const gw_req_head_t *h);
/* Learn (or forget) the page's preload links from the origin's final answer f[0..n) to req,
 * received on a listener with TLS (tls) or without; the rules are at the top of hints.c. */
void gw_proxy__hints_learn(gw_proxy_t *p, const gw_cfg_route_t *r, int tls,
                           const gw_req_head_t *req, unsigned status, const gw_field_t *f,
                           size_t n);
/* A cache hit of px, whose stored answer has status and head f[0..n): the 103 the forwarded
 * answer would have brought (the route's configured links and those learned from the page,
 * learned now from the stored head when this worker has not), unless px had one. */
void gw_proxy__hints_stored(px_t *px, unsigned status, const gw_field_t *f, size_t n);
/* Keep, in place, only the fields of an origin's 103 that a 103 may carry (Link, and the
 * policies a browser applies to what the links fetch); their number, or 0 when no Link is
 * among them (nothing to send). */
size_t gw_proxy__hint_fields(gw_field_t *f, size_t n);
void gw_proxy__hints_free(gw_proxy_hints_t *t);

/* ---- push.c: HTTP/2 server push (RFC 9113 §8.4) ------------------------------------------- */

/* On a route with push, each same-origin Link
 * `<target>; rel=preload` without nopush of a 2xx answer (f[0..n), as the client gets it) to
 * the GET h becomes a promise on s (ops->push), before the caller sends the response head.
 * Counted in p->hints.st; returns how many were promised. */
int gw_proxy__push_links(gw_proxy_t *p, gw_cstream_t *s, const gw_cfg_route_t *r,
                         const gw_req_head_t *h, unsigned status, const gw_field_t *f, size_t n);

/* ---- link.c: the Link fields (RFC 8288) ---------------------------------------------------- */

/* The rel tokens of a link-value and its nopush
 * parameter (the W3C Preload convention: preload, do not push), as bits. */
#define GW_PROXY_LINK_PRELOAD 1u
#define GW_PROXY_LINK_MODULEPRELOAD 2u
#define GW_PROXY_LINK_PRECONNECT 4u
#define GW_PROXY_LINK_NOPUSH 8u
/* Which of the bits above the link-value v (one element of a Link field: "<target>" and its
 * parameters) has; 0 when it does not start with a <target>. */
unsigned gw_proxy__link_rels(gw_slice_t v);
/* Every link-value of the Link fields f[0..n), in order: start with {.f = f, .n = n}. */
typedef struct {
    const gw_field_t *f;
    size_t n, i;
    const uint8_t *p, *e; /* the rest of the field being read (p NULL: none yet) */
} gw_proxy__link_iter_t;
/* The next link-value (trimmed) and its bits (gw_proxy__link_rels) in *rels; {NULL, 0} after
 * the last. */
gw_slice_t gw_proxy__link_next(gw_proxy__link_iter_t *it, unsigned *rels);

/* ---- compress.c: codings and the rules of RFC 9110 §12.5.3 ---------------------------------- */

/* The coding for these Accept-Encoding values (fields joined), among `available` (bit
 * 1 << coding): the highest q, then zstd, br, gzip; GW_ZC_NONE when none is acceptable. */
gw_zcoding_t gw_proxy__choose_coding(const gw_slice_t *vals, size_t n, unsigned available);
const char *gw_proxy__coding_str(gw_zcoding_t c);
int gw_proxy__type_listed(const gw_cfg_compression_t *z, gw_slice_t ctype);
/* Whether one more compressor of `weight` bytes may start beside `active` ones charged
 * `charged` bytes in all: GW_ZSKIP_BUSY past max_concurrent, GW_ZSKIP_MEMORY past max_memory,
 * else GW_ZSKIP_NONE. */
gw_zskip_t gw_proxy__zadmit(const gw_cfg_compression_t *z, uint64_t active, uint64_t charged,
                            uint64_t weight);
gw_zskip_t gw_proxy__zdecide(const gw_cfg_compression_t *z, const gw_req_head_t *req,
                             unsigned status, const gw_field_t *rf, size_t rn, int64_t cl,
                             gw_zcoding_t chosen);
/* Rewrite the response fields in place (cap entries of room): compressed drops Content-Length
 * and Accept-Ranges, weakens a strong ETag (into etag_buf) and adds Content-Encoding; Vary:
 * Accept-Encoding is added unless the origin's Vary has it. The new count. */
size_t gw_proxy__zhead(gw_field_t *f, size_t n, size_t cap, gw_zcoding_t c, int compressed,
                       char *etag_buf, size_t etag_cap);
/* Whether the client of request h may be sent a body in the content codings ce (a stored
 * Content-Encoding value): each of them has a q above 0 in its Accept-Encoding; a request
 * without Accept-Encoding accepts only identity. */
int gw_proxy__codings_accepted(const gw_req_head_t *h, gw_slice_t ce);
/* The coding the route's compression gives a stored answer's 200 (status stored, head
 * sf[0..sn), full_len bytes) for px's Accept-Encoding, as it would the forwarded answer
 * (GW_ZC_NONE: sent as it is). */
gw_zcoding_t gw_proxy__zhit_coding(const px_t *px, unsigned stored, const gw_field_t *sf, size_t sn,
                                   uint64_t full_len);
/* A cache hit to px (ox: its exchange, no origin) of a stored answer of status `stored`, head
 * sf[0..sn) and full_len bytes, sent as `status` (200, 206, 304, 416): compressed as the
 * route's compression would compress the stored answer's 200 for px's Accept-Encoding. The
 * head sent, f[0..*n) (room for cap), is rewritten as compress_head does (Vary:
 * Accept-Encoding whenever the coding depends on the client; compressed: no Content-Length,
 * *cl = -1, a weak ETag into etag, Content-Encoding but on a 304); a 206 or a 416 is a range
 * of the identity body (RFC 9110 §14) and only gains the Vary. A 200 with a body comes from
 * the caller's copy in that coding (have_copy: the caller appends it to ox->body), or else
 * from a compressor: ox->zip is made and ox->refill set to gw_proxy__zrefill, and the caller
 * appends the stored body to ox->zsrc instead of ox->body and leaves ox->complete to the
 * refill. The coding of the head (GW_ZC_NONE: identity). */
gw_zcoding_t gw_proxy__compress_hit(ox_t *ox, px_t *px, unsigned status, unsigned stored,
                                    const gw_field_t *sf, size_t sn, gw_field_t *f, size_t *n,
                                    size_t cap, int64_t *cl, uint64_t full_len, int head_only,
                                    int have_copy, char *etag, size_t etag_cap);
/* ox->refill of a compressed hit: at most 64 KiB more of ox->zsrc through ox->zip into
 * ox->body; after the last, the end of the compressed stream, the compressor gone and ox
 * complete (refill NULL), also on an error. 0 or a negative code. */
int gw_proxy__zrefill(ox_t *ox);

/* ---- zstream.c: the compressors ------------------------------------------------------------ */

typedef struct gw_zstream gw_zstream_t;
/* The codings this build has (bit 1 << coding): gzip always, br and zstd when linked. */
unsigned gw_zstream_available(void);
/* A compressor for coding c. For as long as it lives, its memory is counted into *mem (the
 * bytes its allocator holds now) and its charge into *charged: the larger of `weight` (what it
 * is expected to reach, gw_zstream_weigh) and what it holds, so that compressors admitted
 * together cannot outgrow a bound that counted only their start. Both counts get back what it
 * added when it is deleted, whatever it did meanwhile (and when gw_zstream_new fails).
 * GW_E_NOMEM, or GW_E_INVAL for a coding this build lacks. */
int gw_zstream_new(const gw_cfg_compression_t *cfg, gw_zcoding_t c, uint64_t *mem,
                   uint64_t *charged, size_t weight, gw_zstream_t **out);
void gw_zstream_del(gw_zstream_t *s);
/* The peak bytes a compressor of coding c with cfg's settings holds, measured by running one
 * on two origin reads of the largest size the back delivers (GW_BACK_READ_BUF_MAX): brotli and
 * zstd allocate most of their memory lazily, at their first input, so a compressor's weight
 * is only known once it ran. 0 out of memory or for a coding this build lacks. */
size_t gw_zstream_weigh(const gw_cfg_compression_t *cfg, gw_zcoding_t c);
/* Compress in[0..len) and flush what it makes (finish: and end the stream) into the store.
 * 0 or a negative code. */
int gw_zstream_run(gw_zstream_t *s, const uint8_t *in, size_t len, int finish,
                   gw_proxy__cbody_t *store);
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Its memory now (bytes from its allocator). */
size_t gw_zstream_mem(const gw_zstream_t *s);
#endif
/* Its coding. */
gw_zcoding_t gw_zstream_coding(const gw_zstream_t *s);
/* Append a piece size; 0 or GW_E_NOMEM. */
int gw_zchunks_push(gw_zchunks_t *c, uint32_t len);
/* A copy of src into dst (empty before); 0 or GW_E_NOMEM. */
int gw_zchunks_copy(gw_zchunks_t *dst, const gw_zchunks_t *src);
void gw_zchunks_free(gw_zchunks_t *c);

/* ---- translate.c: request and response translation (pure functions) ---------------------- */

/* Scratch space for the translated fields: one block, sized before anything is written, so
 * the slices into it never move. */
#define GW_PROXY_XLATE_FIELDS 32
#define GW_PROXY_XLATE_BYTES 4096
typedef struct {
    gw_field_t *f;
    size_t n, cap;
    char *buf;
    size_t used, size;
    /* a usual request fits here, on the stack: no allocation per request */
    gw_field_t fst[GW_PROXY_XLATE_FIELDS];
    char bst[GW_PROXY_XLATE_BYTES];
    char ws_key[25]; /* a WebSocket: the Sec-WebSocket-Key the origin was given */
} gw_proxy_xlate_t;

/* Build the origin request for h on route r, from client stream s (only its data fields are
 * read: peer_ip, addr, tls) with the request's RFC 9218 urgency. x must start with f = buf =
 * NULL, n = used = 0; the fields land in x (on its own arrays when they fit: free x->f and
 * x->buf only when they are not x->fst / x->bst). 0, GW_E_PARSE (malformed: host disagrees
 * with :authority, RFC 9113 §8.3.1; no authority; a host field standing in for an empty
 * h->authority with bytes outside RFC 3986 §3.2: h->authority itself is the front's to check,
 * gw_req_head_t), GW_E_NOMEM. */
int gw_proxy__translate(const gw_cfg_route_t *r, const gw_cstream_t *s, const gw_req_head_t *h,
                        uint8_t urgency, gw_proxy_xlate_t *x, gw_back_req_t *req);
/* The request trailers that may go on to the origin, copied into out (room for n); returns how
 * many. */
size_t gw_proxy__req_trailers(const gw_field_t *in, size_t n, gw_field_t *out);

/* Response fields for the client, into out (room for GW_PROXY_MAX_RESP_FIELDS): connection-
 * specific fields removed, names lowercased into `lower`, content-length taken out into *cl
 * (-1 when absent or out of range), Via appended when `via` and the route adds it. Returns
 * how many. */
size_t gw_proxy__resp_fields(const gw_cfg_route_t *route, const gw_back_field_t *in, size_t n,
                             gw_field_t *out, char *lower, size_t lower_size, int64_t *cl, int via);

/* ---- rules.c: header rules, template variables, strip_prefix ------------------------------ */

/* The values of the template variables (config/template.h) for request h of s, whose host is
 * authority, into vars[0..GW_TMPL_VAR_N): slices into s, h and authority. $host is empty when
 * authority is not a valid host (gw_tmpl_host_valid); a certificate field with a byte no
 * field may hold is empty. */
void gw_proxy__tmpl_vars(const gw_cstream_t *s, const gw_req_head_t *h, gw_slice_t authority,
                         gw_slice_t *vars);
/* Whether route r has request rules (its own or the top level's). */
int gw_proxy__has_req_rules(const gw_cfg_route_t *r);
/* Add to *bytes and *fields what gw_proxy__req_rules_apply may write with vars. */
void gw_proxy__req_rules_room(const gw_cfg_route_t *r, const gw_slice_t *vars, size_t *bytes,
                              size_t *fields);
/* The top level's request rules, then r's, on f[0..*n) (room for cap): remove, set, add; the
 * values expanded into buf[*used..size) (room counted by gw_proxy__req_rules_room). */
void gw_proxy__req_rules_apply(const gw_cfg_route_t *r, const gw_slice_t *vars, gw_field_t *f,
                               size_t *n, size_t cap, char *buf, size_t *used, size_t size);
/* The top level's response rules, then r's, on f[0..n) (room for cap; a field that does not
 * fit is left out); the new count. Values point into the configuration. */
size_t gw_proxy__resp_rules_apply(const gw_cfg_route_t *r, gw_field_t *f, size_t n, size_t cap);
/* path with prefix (a route's strip_prefix) cut: -1 when path does not start with it (a
 * prefix without a final '/' only at a segment's end: "/api" cuts "/api", "/api/x", "/api?q",
 * not "/apix"); else *rest is what stays, and 1 says a '/' must go before it (it is empty or
 * a query), 0 that it is a path already. */
int gw_proxy__strip_prefix(const char *prefix, gw_slice_t path, gw_slice_t *rest);

/* ---- redirect.c: answers made in the request stage ----------------------------------------- */

/* A final answer made before any exchange, to request h of s (route r, or NULL): the body
 * body[0..len) of type ctype (NULL: text/plain), the fields extra[0..n) and r's response
 * rules (none when r is NULL); no body to HEAD. Over HTTP/2 a request whose body is still
 * coming is then reset with NO_ERROR (RFC 9113 §8.1; h NULL: the caller's concern). 0 or a
 * negative code. */
int gw_proxy__answer_early(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                           unsigned status, const char *ctype, const char *body, size_t len,
                           const gw_field_t *extra, size_t n);
/* The listener's redirect_https: every request on it answered 308 to https (400 when it has
 * no valid host). 1 when answered (*rv: what the answer returned), else 0. */
int gw_proxy__redirect_https(gw_cstream_t *s, const gw_req_head_t *h, int *rv);
/* Route r's redirect or respond, when it has one: 1 when answered (*rv), else 0. */
int gw_proxy__route_answer(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                           int *rv);
/* ---- client_cert.c: the route's client-certificate policy --------------------------------- */

/* Whether route r refuses the request h of stream s (client_cert: required and no verified
 * client certificate on its connection): 1, logged (event=client_cert_refused with the verify
 * result and subject), and the caller answers 403; else 0. */
int gw_proxy__client_cert_refused(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r);

/* ---- tunnel.c: WebSocket -------------------------------------------------------------------- */

#define GW_WS_KEY_LEN 24    /* base64 of 16 bytes */
#define GW_WS_ACCEPT_LEN 28 /* base64 of a SHA-1 */
/* An HTTP/1.1 WebSocket opening handshake: GET, Upgrade: websocket, Connection: upgrade. */
int gw_proxy__ws_h1_request(gw_slice_t method, const gw_field_t *f, size_t n);
/* A fresh Sec-WebSocket-Key (NUL-terminated); 0 or GW_E_IO. */
int gw_proxy__ws_key(char out[GW_WS_KEY_LEN + 1]);
/* Sec-WebSocket-Accept for key (RFC 6455 §4.2.2); 0 or GW_E_NOMEM. */
int gw_proxy__ws_accept(const char *key, size_t key_len, char out[GW_WS_ACCEPT_LEN + 1]);
/* The one Sec-WebSocket-Key of an HTTP/1.1 handshake's fields f[0..n), when it is one and of
 * 16 bytes in base64 (RFC 6455 §4.1): 0 and, with out, the key copied there NUL-terminated;
 * GW_E_PARSE when it is missing, repeated or malformed. */
int gw_proxy__ws_h1_key(const gw_field_t *f, size_t n, char out[GW_WS_KEY_LEN + 1]);
/* What is wrong with the origin's 101 fields f[0..n) (a static reason), or NULL when it is a
 * WebSocket switch (RFC 6455 §4.1): one Upgrade whose value is websocket, Connection naming
 * upgrade, and one Sec-WebSocket-Accept that is the one of key (the key the origin was given:
 * the gateway's for an HTTP/2 client, the client's own for HTTP/1.1; NULL fails). */
const char *gw_proxy__ws_check_101(const gw_field_t *f, size_t n, const char *key);
/* The origin agreed to a WebSocket (a 101 to ox, whose one subscriber asked for it): checked
 * (gw_proxy__ws_check_101, a bad one aborts the exchange with a 502), then the client is told
 * and ox becomes a tunnel. */
void gw_proxy__tunnel_open(ox_t *ox, const gw_back_head_t *h);
/* An HTTP/2 client's extended CONNECT answered 2xx by an origin that did not switch: the
 * exchange is aborted (502); 1 when it was, else 0. */
int gw_proxy__ws_false_switch(ox_t *ox, const gw_back_head_t *h);

#endif
