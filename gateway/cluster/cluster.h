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
 * runs on the main thread's loop.
 */
#ifndef GW_CLUSTER_CLUSTER_H
#define GW_CLUSTER_CLUSTER_H

#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "tls/tls.h"

typedef struct gw_cluster gw_cluster_t;

typedef struct {
    int up;            /* connected, and the last call answered */
    uint64_t degraded; /* times it went from up to down */
    uint64_t calls_ok, calls_failed, calls_timeout;
    uint64_t rotations;   /* new ticket keys this instance put in Redis */
    uint64_t key_updates; /* keyring changes read from Redis (own rotations included) */
} gw_cluster_stats_t;

/* Start sharing per cfg (copied) on loop, keeping ring equal to the shared keys. 0 or
 * GW_E_NOMEM. */
int gw_cluster_new(uv_loop_t *loop, const gw_cfg_cluster_t *cfg, gw_tls_keyring_t *ring,
                   gw_cluster_t **out);
/* Whether cfg describes the same cluster as c's (a reload keeps c then). */
int gw_cluster_same(const gw_cluster_t *c, const gw_cfg_cluster_t *cfg);
/* Any thread. */
gw_cluster_stats_t gw_cluster_stats(const gw_cluster_t *c);
/* Stop (on the loop's thread); the memory goes once the loop has run the closes. The keyring
 * keeps its keys. */
void gw_cluster_close(gw_cluster_t *c);

#endif
