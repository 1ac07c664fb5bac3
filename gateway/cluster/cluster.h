/* cluster/cluster.h — what instances of h2gate share through Redis (issue 27), the public
 * interface of gateway/cluster/.
 *
 * Redis is the only shared state; instances never talk to each other. Shared today: the TLS
 * session ticket keys. Every few moments (cluster.poll_interval) the client reads the keys from
 * Redis and puts them in the keyring that every TLS listener uses; the instance that finds the
 * encrypting key older than cluster.ticket_rotation makes the next one under a lock (SET NX PX,
 * one lock per generation of keys, so only one instance ever replaces a given key) and the
 * others pick it up at their next read. A session resumes on any instance.
 *
 * Failure: every Redis call has cluster.timeout. When Redis is down, slow or refuses us, the
 * keyring keeps the last keys it had (or, never having had any, each listener rotates its
 * own), one `event=cluster_degraded` line says why and h2gate_cluster_up is 0; when a call
 * succeeds again, `event=cluster_recovered`. Nothing waits for Redis on a worker: the client
 * runs on the main thread's loop. The connection is kept alive (cluster.ping_interval): a
 * primary from which no reply came for ping_interval + timeout (its host gone without a reset,
 * the process stopped) is dropped (`event=cluster_primary_silent`), its pending calls fail,
 * and it is made again (with sentinels: the sentinels are asked again).
 */
#ifndef GW_CLUSTER_CLUSTER_H
#define GW_CLUSTER_CLUSTER_H

#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "tls/tls.h"

typedef struct gw_cluster gw_cluster_t;

/* The longest HOST:PORT of a Redis the cluster talks to, NUL included (a host name of up to
 * 255 bytes, as a sentinel may name it, brackets and a port). */
#define GW_CLUSTER_ADDR_MAX 264

/* ---- shared request rates (routes[].request_rate across instances) ------------------------
 *
 * A worker asks (gw_cluster_hub_ask, any thread) whether one more request of a client on a
 * route may go; the main loop gathers the questions of a loop turn, asks Redis once per key
 * (GCRA in one Lua script: how many of the n may go, and when the next one could), and
 * answers each on its worker's loop through that worker's sink. Without a cluster, with Redis
 * down, slow or answering nonsense, the answer is GW_RATE_LOCAL: the worker decides with its
 * own bucket, as a single instance would (fail open to the local limit, never to none). Every
 * question gets exactly one answer unless its sink was closed first. */
typedef enum { GW_RATE_ALLOW = 0, GW_RATE_DENY = 1, GW_RATE_LOCAL = 2 } gw_rate_verdict_t;

typedef struct gw_cluster_sink gw_cluster_sink_t;
typedef struct gw_cluster_hub gw_cluster_hub_t;

typedef struct {
    int lease; /* the answer to gw_cluster_hub_lease (granted: its bytes) */
    uint64_t granted;
    uint64_t token; /* the asker's; 0: nobody waits (the request was let through
                     * locally and is only charged to the shared budget) */
    gw_rate_verdict_t verdict;
    unsigned retry_after_s; /* with GW_RATE_DENY: whole seconds until one more would go */
} gw_cluster_answer_t;

/* A worker's mailbox on its own loop; cb runs there, once per answer. */
int gw_cluster_sink_new(uv_loop_t *loop, void (*cb)(void *ud, const gw_cluster_answer_t *a),
                        void *ud, gw_cluster_sink_t **out);
/* On the sink's loop; later answers are dropped. The memory goes when the hub holds no more
 * questions of it and the loop has closed the handle. */
void gw_cluster_sink_close(gw_cluster_sink_t *k);

/* The main loop's end of the questions; c (gw_cluster_hub_set) answers them. */
int gw_cluster_hub_new(uv_loop_t *main_loop, gw_cluster_hub_t **out);
void gw_cluster_hub_set(gw_cluster_hub_t *h, gw_cluster_t *c); /* main thread; NULL: none */
/* Any thread: may one more request with this key (at most 200 bytes, the route and the
 * client) go, at rate requests/s with burst? The answer goes to sink with token. 0, or
 * GW_E_NOMEM and no answer will come (decide locally). */
int gw_cluster_hub_ask(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key,
                       size_t klen, uint64_t rate, uint64_t burst, uint64_t token);
/* Any thread: a lease of want bytes of a client's bandwidth (rate bytes/s, burst bytes, shared
 * by every instance: a token bucket in Redis); the answer (lease set, granted bytes, possibly
 * fewer or none) goes to sink with token; GW_RATE_LOCAL when Redis could not answer. */
int gw_cluster_hub_lease(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key,
                         size_t klen, uint64_t rate, uint64_t burst, uint64_t want, uint64_t token);
/* Main thread: questions still queued are answered GW_RATE_LOCAL; then the memory goes once
 * the loop has closed the handle. */
void gw_cluster_hub_close(gw_cluster_hub_t *h);
/* Any thread: how many instances share a limit that this one decides alone now. Every instance
 * announces itself in Redis (a heartbeat) and remembers how many were alive; while the
 * cluster cannot decide (Redis down, slow, failing over, not reached yet), each enforces its
 * share: a local decision costs this many tokens of the local bucket, so N instances together
 * allow the limit, not N times it. 1 while Redis decides, without a cluster, or when no
 * count was ever read (h NULL: 1). */
unsigned gw_cluster_hub_share(gw_cluster_hub_t *h);

/* ---- shared values (what other modules keep in Redis: the ACME client's locks,
 * certificates and challenges) -------------------------------------------------------------
 *
 * Main thread only. Keys are given without cluster.key_prefix (added here), at most 400
 * bytes. Every call's callback runs exactly once, on the main loop: with its result (>= 0),
 * or a negative GW_E_*: GW_E_IO (not connected, the connection lost, an error reply),
 * GW_E_TIMEOUT (cluster.timeout), GW_E_CLOSED (the client is closing), GW_E_PARSE (an answer
 * of the wrong type). A call that returns < 0 calls nothing. Failures count in the stats and
 * the cluster_degraded log as the client's own calls do. */
typedef void (*gw_cluster_done_cb)(void *user_data, int result);
/* A value: result 0 with v (len bytes, valid during the call) or v NULL (no such key). */
typedef void (*gw_cluster_value_cb)(void *user_data, int result, const uint8_t *v, size_t len);
/* A hash: result 0 and its n field/value pairs (f[i], fl[i], v[i], vl[i]; valid during the
 * call); n 0: no such key. */
typedef void (*gw_cluster_hash_cb)(void *user_data, int result, size_t n, const uint8_t *const *f,
                                   const size_t *fl, const uint8_t *const *v, const size_t *vl);

/* SET key token NX PX ttl_ms: result 1 when the lock is ours now, 0 when another holds it. */
int gw_cluster_lock(gw_cluster_t *c, const char *key, const char *token, uint64_t ttl_ms,
                    gw_cluster_done_cb cb, void *user_data);
/* The lock's life set to ttl_ms again if token still holds it: 1, else 0 (lost: it expired,
 * and perhaps another holds it now). */
int gw_cluster_lock_renew(gw_cluster_t *c, const char *key, const char *token, uint64_t ttl_ms,
                          gw_cluster_done_cb cb, void *user_data);
/* Deleted if token still holds it (compare and delete, in one script): 1, else 0. cb may be
 * NULL. */
int gw_cluster_unlock(gw_cluster_t *c, const char *key, const char *token, gw_cluster_done_cb cb,
                      void *user_data);
/* SET key v (PX ttl_ms unless 0): result 0. GW_E_RANGE (nothing sent) when len is more than
 * gw_cluster_max_value(). cb may be NULL. */
int gw_cluster_put(gw_cluster_t *c, const char *key, const uint8_t *v, size_t len, uint64_t ttl_ms,
                   gw_cluster_done_cb cb, void *user_data);
int gw_cluster_get(gw_cluster_t *c, const char *key, gw_cluster_value_cb cb, void *user_data);
/* HSET key field v, and the whole hash's life set to ttl_ms (one script): result 1. */
int gw_cluster_hset(gw_cluster_t *c, const char *key, const char *field, const uint8_t *v,
                    size_t len, uint64_t ttl_ms, gw_cluster_done_cb cb, void *user_data);
int gw_cluster_hgetall(gw_cluster_t *c, const char *key, gw_cluster_hash_cb cb, void *user_data);
/* DEL key: result 0. cb may be NULL. */
int gw_cluster_del(gw_cluster_t *c, const char *key, gw_cluster_done_cb cb, void *user_data);
/* The longest value (or hash, all of its fields and values) that can be read back: what
 * cluster.max_reply leaves after the reply's framing. */
size_t gw_cluster_max_value(const gw_cluster_t *c);

typedef struct {
    int up;            /* connected, and the last call answered */
    uint64_t degraded; /* times it went from up to down */
    uint64_t calls_ok, calls_failed, calls_timeout;
    uint64_t rotations;   /* new ticket keys this instance put in Redis */
    uint64_t key_updates; /* keyring changes read from Redis (own rotations included) */
    uint64_t rate_allowed, rate_denied, rate_local; /* shared rate answers, by verdict */
    uint64_t rate_calls; /* Redis calls for them (one per key and batch) */
    uint64_t lease_calls, lease_bytes,
        lease_local;            /* bandwidth leases: calls, bytes granted, unanswered */
    uint64_t replies_oversized; /* replies past cluster.max_reply (the connection dropped) */
    uint64_t replies_bad;       /* answers out of range (decided locally) */
    uint64_t instances;         /* instances alive at the last heartbeat (0: none read yet) */
    uint64_t local_us;          /* time spent deciding alone (not up), the current spell too */
    uint64_t failovers;         /* times the primary taken changed address (cluster.sentinels) */
    uint64_t silent; /* connections to the primary dropped: no reply for ping_interval + timeout */
    char primary[GW_CLUSTER_ADDR_MAX]; /* the last primary taken, HOST:PORT ("": none yet) */
} gw_cluster_stats_t;

/* Start sharing per cfg (copied) on loop, keeping ring equal to the shared keys. Redis is
 * cfg->redis, or (cfg->sentinels) the primary the sentinels name for cfg->master: asked of
 * them all, the answer of the greatest config-epoch tried first, checked with ROLE (a
 * replica, or a primary that is one no longer, is refused and the next answer tried), followed on
 * +switch-master, a lost connection or a READONLY answer (the sentinels are asked again; local
 * decisions meanwhile). 0 or GW_E_NOMEM. */
int gw_cluster_new(uv_loop_t *loop, const gw_cfg_cluster_t *cfg, gw_tls_keyring_t *ring,
                   gw_cluster_t **out);
/* Whether cfg describes the same cluster as c's (a reload keeps c then). */
int gw_cluster_same(const gw_cluster_t *c, const gw_cfg_cluster_t *cfg);
/* A reload replaced old by c (main thread, before c is given to the hub): c starts with old's
 * count of instances alive (the share of a limit each decides alone) instead of none until its
 * first heartbeat, and under old's name in the heartbeat set (this process is one instance,
 * not one more for ALIVE_MS). */
void gw_cluster_carry(gw_cluster_t *c, const gw_cluster_t *old);
/* Any thread. */
gw_cluster_stats_t gw_cluster_stats(const gw_cluster_t *c);
/* Stop (on the loop's thread); the memory goes once the loop has run the closes. The keyring
 * keeps its keys. */
void gw_cluster_close(gw_cluster_t *c);

#endif
