/* back/upstream.c — which server gets the next exchange, and passive health.
 *
 * Round-robin is nginx's smooth weighted round-robin (each pick adds every eligible server's
 * weight to its current value, takes the largest and subtracts the total from it), so weights
 * 3:1 give a a a b interleaved rather than in bursts. Least-connections compares busy/weight
 * by cross-multiplication, ties broken by a rotor. Consistent hashing places GW_BACK_VNODES
 * virtual nodes per unit of weight on a 32-bit ring, so removing one of n servers moves only
 * about 1/n of the clients.
 */
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/log.h"

/* FNV-1a then a final avalanche (murmur3 fmix32), so nearby inputs spread over the ring. */
static uint32_t hash_bytes(const void *p, size_t n, uint32_t h)
{
    h = gw_fnv1a32(h, p, n);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

uint32_t gw_back__hash_addr(const struct sockaddr *sa)
{
    /* The address only, not the port: a client's connections all land on one server. */
    static const uint8_t zero[16];
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        return hash_bytes(&v4->sin_addr, 4, GW_FNV32_BASIS);
    }
    if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        return hash_bytes(&v6->sin6_addr, 16, GW_FNV32_BASIS);
    }
    return hash_bytes(zero, 4, GW_FNV32_BASIS);
}

static int vnode_cmp(const void *a, const void *b)
{
    const gw_back_vnode_t *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->server < y->server ? -1 : x->server > y->server;
}

static unsigned weight_of(const gw_back_server_t *s)
{
    return s->cfg->weight ? s->cfg->weight : 1;
}

int gw_back__ring_build(gw_back_upstream_t *up)
{
    size_t n = 0;
    for (size_t i = 0; i < up->servers_len; i++)
        n += (size_t)GW_BACK_VNODES *
             (weight_of(&up->servers[i]) > 100 ? 100 : weight_of(&up->servers[i]));
    gw_back_vnode_t *ring = gw_calloc(n ? n : 1, sizeof(*ring));
    if (!ring)
        return GW_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < up->servers_len; i++) {
        gw_back_server_t *s = &up->servers[i];
        unsigned w = weight_of(s) > 100 ? 100 : weight_of(s);
        /* Key each virtual node by the server's address text, not its index, so a server
         * keeps its points when another one is removed from the list. */
        const char *key = s->cfg->addr.text;
        size_t klen = strlen(key);
        for (unsigned v = 0; v < w * GW_BACK_VNODES; v++) {
            uint32_t h = hash_bytes(key, klen, GW_FNV32_BASIS);
            ring[k].hash = hash_bytes(&v, sizeof(v), h);
            ring[k].server = (uint32_t)i;
            k++;
        }
    }
    qsort(ring, k, sizeof(*ring), vnode_cmp);
    gw_free(up->ring);
    up->ring = ring;
    up->ring_len = k;
    return 0;
}

int gw_back__server_healthy(gw_back_server_t *s, uint64_t now)
{
    if (s->ejected_until == 0)
        return 1;
    if (now >= s->ejected_until) {
        /* Back-off over: the server gets a fresh count (half-open: one more failure run of
         * fail_threshold ejects it again). */
        s->ejected_until = 0;
        s->fails = 0;
        GW_LOG_INFO("back_server_return", "upstream=%s server=%s reason=backoff", s->up->cfg->name,
                    s->cfg->addr.text);
        return 1;
    }
    return 0;
}

int gw_back__server_has_capacity(gw_back_server_t *s, int pipelined)
{
    unsigned max = s->up->cfg->max_connections ? s->up->cfg->max_connections : 1;
    /* tunnels (WebSocket) have their own cap, limits.max_tunnels, in the proxy */
    return s->idle_cnt > 0 || s->open - s->tunnels < max ||
           (pipelined && gw_back__conn_pipe_slot(s));
}

static int eligible(gw_back_server_t *s, gw_back_server_t *exclude, uint64_t now, int pipelined)
{
    return s != exclude && gw_back__server_healthy(s, now) &&
           gw_back__server_has_capacity(s, pipelined);
}

static gw_back_server_t *pick_rr(gw_back_upstream_t *up, gw_back_server_t *exclude, uint64_t now,
                                 int pipelined)
{
    gw_back_server_t *best = NULL;
    int64_t total = 0;
    for (size_t i = 0; i < up->servers_len; i++) {
        gw_back_server_t *s = &up->servers[i];
        if (!eligible(s, exclude, now, pipelined))
            continue;
        s->rr_current += weight_of(s);
        total += weight_of(s);
        if (!best || s->rr_current > best->rr_current)
            best = s;
    }
    if (best)
        best->rr_current -= total;
    return best;
}

static gw_back_server_t *pick_lc(gw_back_upstream_t *up, gw_back_server_t *exclude, uint64_t now,
                                 int pipelined)
{
    gw_back_server_t *best = NULL;
    size_t n = up->servers_len;
    for (size_t j = 0; j < n; j++) {
        gw_back_server_t *s = &up->servers[(j + up->lc_rotor) % n];
        if (!eligible(s, exclude, now, pipelined))
            continue;
        /* busy_s / w_s < busy_b / w_b without division. */
        if (!best || (uint64_t)s->busy * weight_of(best) < (uint64_t)best->busy * weight_of(s))
            best = s;
    }
    if (best)
        up->lc_rotor++;
    return best;
}

static gw_back_server_t *pick_hash(gw_back_upstream_t *up, const struct sockaddr *client,
                                   gw_back_server_t *exclude, uint64_t now, int pipelined)
{
    if (up->ring_len == 0)
        return NULL;
    uint32_t h = gw_back__hash_addr(client);
    size_t lo = 0, hi = up->ring_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (up->ring[mid].hash < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Walk clockwise to the first eligible server (at most one lap). */
    for (size_t j = 0; j < up->ring_len; j++) {
        gw_back_server_t *s = &up->servers[up->ring[(lo + j) % up->ring_len].server];
        if (eligible(s, exclude, now, pipelined))
            return s;
    }
    return NULL;
}

gw_back_server_t *gw_back__pick(gw_back_upstream_t *up, const struct sockaddr *client,
                                gw_back_server_t *exclude, int *all_ejected, uint64_t now,
                                int pipelined)
{
    size_t healthy = 0;
    for (size_t i = 0; i < up->servers_len; i++)
        healthy += (size_t)gw_back__server_healthy(&up->servers[i], now);
    *all_ejected = healthy == 0;
    if (healthy == 0)
        return NULL;
    /* The excluded server (a retry's last one) is avoided only when another is healthy. */
    if (exclude && healthy == 1 && gw_back__server_healthy(exclude, now))
        exclude = NULL;
    for (int pass = 0; pass < 2; pass++) {
        gw_back_server_t *s = NULL;
        switch (up->cfg->balance) {
        case GW_BALANCE_LEAST_CONN:
            s = pick_lc(up, exclude, now, pipelined);
            break;
        case GW_BALANCE_HASH_CLIENT:
            s = pick_hash(up, client, exclude, now, pipelined);
            break;
        case GW_BALANCE_ROUND_ROBIN:
        default:
            s = pick_rr(up, exclude, now, pipelined);
            break;
        }
        if (s || !exclude)
            return s;
        /* Every other server is full: the same server on another connection will do. */
        exclude = NULL;
    }
    return NULL;
}

void gw_back__server_fail(gw_back_server_t *s, uint64_t now)
{
    gw_back_stats_t *st = gw_back__stats(s->up->back);
    st->failures++;
    s->st.failures++;
    s->fails++;
    unsigned thr = s->up->cfg->fail_threshold ? s->up->cfg->fail_threshold : 1;
    if (s->ejected_until == 0 && s->fails >= thr) {
        s->ejected_until = now + (s->up->cfg->eject_ms ? s->up->cfg->eject_ms : 1);
        st->ejections++;
        s->st.ejections++;
        GW_LOG_WARN("back_server_eject", "upstream=%s server=%s fails=%u eject_ms=%llu",
                    s->up->cfg->name, s->cfg->addr.text, s->fails,
                    (unsigned long long)s->up->cfg->eject_ms);
    }
}

void gw_back__server_ok(gw_back_server_t *s)
{
    s->fails = 0;
}
