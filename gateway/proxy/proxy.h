/* proxy/proxy.h — the translator: client streams to origin exchanges.
 *
 * One gw_proxy_t per worker loop; it owns that worker's back side (origin pools). For each
 * client stream it picks a route (host: exact, "*.suffix" or "*"; path prefix; first match
 * wins; no match → 404 from the gateway), checks the request (the route's request rate: 429),
 * translates the request head (RFC 9113 §8.3, RFC 9110 §7.6), starts an origin exchange, and
 * relays the response through the route's filters (who may share it, 103 Early Hints and
 * server push, compression; their order is in proxy_internal.h): head, body by reference,
 * trailers, or a gateway-made 502/503/504 when the back fails before the head.
 *
 * Flow control is hop by hop, with at most limits.body_buffer bytes held per exchange and
 * direction: response bytes are pulled from the origin only while the client stream has less
 * than the bound pending; request body bytes are credited back to the client only once written
 * to the origin socket.
 *
 * Coalescing: concurrent identical GET/HEAD requests on a route with `coalesce` share one
 * origin exchange, whose response body is held once, by reference, for all of them: at most
 * limits.coalesce_buffer bytes between the slowest and the fastest (plus body_buffer queued per
 * client stream); a follower further behind detaches and fetches on its own. The rules (RFC
 * 9111) and the shared body are in coalesce.c, its flow to each client in flow.c.
 */
#ifndef GW_PROXY_PROXY_H
#define GW_PROXY_PROXY_H

#include <uv.h>

#include "common/bucket.h"
#include "config/config.h"
#include "proxy/stream.h"

typedef struct gw_proxy gw_proxy_t;

/* Per worker, on that worker's loop. cfg must outlive the proxy. 0, GW_E_NOMEM, or
 * GW_E_UNSUPPORTED (from the back: an upstream the back cannot serve). */
int gw_proxy_new(uv_loop_t *loop, const gw_config_t *cfg, gw_proxy_t **out);
/* Close the origin side (every pooled connection, timers); exchanges still live fail. The
 * loop must run afterwards until the handles are closed. Idempotent. */
void gw_proxy_close(gw_proxy_t *p);
/* gw_proxy_close(), then cb(p, arg) once the proxy's handles are closed (at once when none
 * was open): cb may free the proxy. */
void gw_proxy_close_then(gw_proxy_t *p, void (*cb)(gw_proxy_t *p, void *arg), void *arg);
/* Free; call gw_proxy_close() and run the loop first. NULL is ignored. */
void gw_proxy_del(gw_proxy_t *p);

/* The table of request-rate buckets (routes[].request_rate, per client address and route),
 * shared by every worker's proxy; owned by the caller, who keeps it alive until the proxy is
 * deleted. NULL (the default) turns request-rate limits off. Over its rate a request is
 * answered 429 with Retry-After by the gateway and never reaches the origin. */
void gw_proxy_set_rate_table(gw_proxy_t *p, gw_bucket_table_t *t);
/* The process's shared HTTP cache (gateway/cache/), used by every worker's proxy on the routes
 * with cache: true; owned by the caller, who keeps it alive until the proxy is deleted (its
 * entries outlive both: each holds its own references). NULL (the default): no route caches. */
struct gw_cache;
void gw_proxy_set_cache(gw_proxy_t *p, struct gw_cache *c);
/* Who gives the heap's free pages back once the cache's evictions made a trim due
 * (gw_cache_trim_due: store.c's "Memory"). trim(user_data) is called on this proxy's loop and
 * must not block: the owner runs malloc_trim off every event loop, one trim at a time in the
 * process with every other reason for one (server/heap.c). trim NULL (the default): the due
 * flag is left in the store, nothing is trimmed. */
typedef void (*gw_proxy_trim_cb)(void *user_data);
void gw_proxy_set_trim(gw_proxy_t *p, gw_proxy_trim_cb trim, void *user_data);
/* Request rates shared across instances (`cluster:`). With an asker, a request
 * without a body on a route with request_rate waits for ask's answer before it goes anywhere;
 * the answer comes back through gw_proxy_rate_answer on this proxy's loop. ask(ud, key, klen,
 * rate, burst, wait) returns the question's token (never 0), or 0 when no answer will come
 * (without wait, or when it could not ask): the local bucket decides then. The key names the
 * route and the client (gw_proxy__rate_key). */
typedef struct {
    uint64_t (*ask)(void *ud, const uint8_t *key, size_t klen, uint64_t rate, uint64_t burst,
                    int wait);
    /* How many instances share a limit the local bucket decides now (any thread; NULL or 0:
     * 1): each such decision costs that many tokens, so that instances without their shared
     * state together allow the limit (gw_cluster_hub_share). */
    unsigned (*share)(void *ud);
    void *ud;
} gw_proxy_rate_asker_t;
void gw_proxy_set_rate_asker(gw_proxy_t *p, const gw_proxy_rate_asker_t *a);
enum { GW_PROXY_RATE_ALLOW = 0, GW_PROXY_RATE_DENY = 1, GW_PROXY_RATE_LOCAL = 2 };
/* The answer to token (unknown tokens, of streams gone meanwhile, are ignored): ALLOW goes on,
 * DENY is answered 429 with retry_after_s, LOCAL lets the local bucket decide. */
void gw_proxy_rate_answer(gw_proxy_t *p, uint64_t token, int verdict, unsigned retry_after_s);
/* The worker's count of open WebSocket tunnels, shared by the proxies of its generations, so
 * that limits.max_tunnels holds per worker (without it, per proxy). */
void gw_proxy_set_tunnel_count(gw_proxy_t *p, unsigned *n);
/* The worker's count of bytes its compressors are charged (compression.max_memory), shared by
 * the proxies of its generations in the same way; *n outlives p, and every compressor of p
 * uncharges it before p is deleted. Without it, per proxy. Set before the first request. */
void gw_proxy_set_zmem_count(gw_proxy_t *p, uint64_t *n);
/* An HTTP/1.1 request head that opens a WebSocket (RFC 6455 §4.1): GET, `Upgrade: websocket`
 * and `Connection: upgrade`. The front asks it, with the route's `websocket`, before it sets
 * gw_req_head_t.protocol. */
int gw_proxy_ws_h1_request(gw_slice_t method, const gw_field_t *f, size_t n);

/* The route for a request, or NULL. authority may carry a port (ignored); host names compare
 * case-insensitively; "*.example.com" matches any name ending in ".example.com"; a route's path
 * is a plain prefix of the request path. */
const gw_cfg_route_t *gw_proxy_route(const gw_proxy_t *p, gw_slice_t authority, gw_slice_t path);

/* A complete request head arrived on s. The proxy answers through s->ops. 0, or a negative
 * code when the stream must be reset / the connection closed. */
int gw_proxy_request(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *head);

/* Request body bytes (valid during the call). The proxy copies them on and credits them back
 * through s->ops->credit once written to the origin (or dropped). */
void gw_proxy_body(gw_proxy_t *p, gw_cstream_t *s, const uint8_t *data, size_t len);

/* The request body ended (HTTP/2 END_STREAM, HTTP/1.1 message complete); trailers may be
 * NULL. */
void gw_proxy_body_end(gw_proxy_t *p, gw_cstream_t *s, const gw_field_t *trailers, size_t n);

/* The stream's priority changed (RFC 9218 PRIORITY_UPDATE): an exchange still waiting in the
 * origin queue moves to its new place (s->ops->urgency gives the new value). */
void gw_proxy_reprioritize(gw_proxy_t *p, gw_cstream_t *s);

/* The client side of s can take more response bytes (pending fell). */
void gw_proxy_writable(gw_proxy_t *p, gw_cstream_t *s);

/* The front is done with s (response handed over and request ended, reset, or client gone).
 * No op is called on s afterwards. */
void gw_proxy_stream_closed(gw_proxy_t *p, gw_cstream_t *s);

/* Content codings the proxy compresses with, and why a response of a compressing
 * route went out as it was. */
typedef enum { GW_ZC_NONE = 0, GW_ZC_GZIP, GW_ZC_BR, GW_ZC_ZSTD, GW_ZC_N } gw_zcoding_t;
typedef enum {
    GW_ZSKIP_NONE = 0,     /* compressed */
    GW_ZSKIP_STATUS,       /* not a 200, or a HEAD */
    GW_ZSKIP_ENCODED,      /* the origin sent Content-Encoding */
    GW_ZSKIP_NO_TRANSFORM, /* Cache-Control: no-transform */
    GW_ZSKIP_TYPE,         /* a type not listed */
    GW_ZSKIP_RANGE,        /* the request had Range */
    GW_ZSKIP_PRIVATE,      /* skip_private: Set-Cookie, private, no-store */
    GW_ZSKIP_SMALL,        /* a known length under min_size */
    GW_ZSKIP_CLIENT,       /* the client's Accept-Encoding allows none we have */
    GW_ZSKIP_BUSY,         /* max_concurrent compressors run already (or no memory) */
    GW_ZSKIP_MEMORY,       /* the worker's compressors hold compression.max_memory already */
    GW_ZSKIP_N
} gw_zskip_t;
/* "identity", "gzip", "br", "zstd"; "compressed", "status", … (metric labels) */
const char *gw_proxy_coding_name(gw_zcoding_t c);
const char *gw_proxy_zskip_name(gw_zskip_t k);

/* Compression counters (per worker proxy; the metrics add those of retired generations). */
typedef struct {
    uint64_t in[GW_ZC_N], out[GW_ZC_N]; /* bytes into and out of the compressors, by coding */
    uint64_t streams[GW_ZC_N];          /* responses compressed, by coding */
    uint64_t skipped[GW_ZSKIP_N];       /* responses of compressing routes sent as they were */
    uint64_t shared;                    /* followers served compressed bytes made for another */
    uint64_t active, mem;               /* gauges: compressors running, their bytes */
} gw_proxy_zstats_t;
void gw_proxy_zstats(const gw_proxy_t *p, gw_proxy_zstats_t *out);

/* 103 Early Hints made by the gateway, and server push. */
typedef struct {
    uint64_t sent_configured, sent_learned; /* 103s with configured / learned links */
    uint64_t sent_origin;    /* the origin's 103 relayed (the gateway had none to send) */
    uint64_t dropped_origin; /* the origin's 103 not relayed: one 103 went out already */
    uint64_t learned, evicted, expired; /* pages learned, pushed out by the LRU, too old */
    uint64_t entries;                   /* gauge: pages known now */
    /* HTTP/2 server push: links promised, and those not promised because
     * the client disabled push, a limit (h2.max_pushes, the client's concurrency), the path
     * was promised on the connection before, or a GOAWAY / the parent's end */
    uint64_t push_promised, push_client, push_limit, push_duplicate, push_closed;
} gw_proxy_hint_stats_t;
void gw_proxy_hint_stats(const gw_proxy_t *p, gw_proxy_hint_stats_t *out);

/* Counters of this worker's proxy, for logs and tests. */
typedef struct {
    uint64_t requests;        /* client streams seen */
    uint64_t origin_requests; /* exchanges started on the back */
    uint64_t coalesced;       /* streams served by another stream's exchange */
    uint64_t detached;        /* followers that fell behind and fetched on their own */
    uint64_t not_shared;      /* followers sent to the origin because the response was private */
    uint64_t stalled;         /* streams reset because the client stopped reading */
    uint64_t upload_stalled;  /* requests ended by timeouts.request_body (408 or reset) */
    uint64_t rate_limited;    /* requests answered 429 (routes[].request_rate) */
    uint64_t access_denied;   /* requests answered 403 (routes[].allow / deny) */
} gw_proxy_stats_t;
#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
void gw_proxy_stats(const gw_proxy_t *p, gw_proxy_stats_t *out);
#endif

/* One origin server of upstream `up` (indices into the configuration) as the metrics show it. */
typedef struct {
    unsigned idle, active; /* connections now: idle in the pool, carrying an exchange */
    uint64_t opened;       /* connections dialled */
    uint64_t bytes_in, bytes_out;
    uint64_t failures, ejections; /* passive (and active) health: failed exchanges, ejections */
    int up;                       /* 1 healthy, 0 ejected */
} gw_proxy_server_stats_t;
/* 0, GW_E_RANGE, or GW_E_CLOSED once the proxy is closed. */
int gw_proxy_server_stats(const gw_proxy_t *p, size_t up, size_t srv, gw_proxy_server_stats_t *out);
/* Exchanges of upstream `up` waiting for a connection. */
unsigned gw_proxy_upstream_queued(const gw_proxy_t *p, size_t up);

#endif
