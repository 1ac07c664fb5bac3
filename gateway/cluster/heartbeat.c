/* cluster/heartbeat.c — how many instances are alive (cluster_internal.h): every
 * GW_CLUSTER_BEAT_MS (or poll_interval, when shorter) one script call puts this instance in
 * the heartbeat set and counts the set; the count is the share of a limit each instance
 * takes while it decides alone. A reload's new client takes the old one's count and name. */
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/log.h"

/* The heartbeat (see GW_CLUSTER_BEAT_MS), in one call. ARGV: this instance's id,
 * GW_CLUSTER_ALIVE_MS. Returns how many instances are alive, this one included. */
static const char ALIVE_LUA[] =
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) "
    "/ 1000) local ttl = tonumber(ARGV[2]) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) "
    "redis.call('ZADD', KEYS[1], now + ttl, ARGV[1]) redis.call('PEXPIRE', KEYS[1], ttl) "
    "return redis.call('ZCARD', KEYS[1])";

/* ---- the heartbeat -------------------------------------------------------------------------- */

static void on_alive(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    c->beating = 0;
    if (gw_cluster__outcome(c, r, err, "EVAL heartbeat") < 0)
        return; /* the last count stays: it is what local decisions divide by */
    unsigned n;
    if (r->type != REDIS_REPLY_INTEGER || gw_cluster__alive_reply(r->integer, &n) < 0) {
        gw_cluster__bad_reply(c, "EVAL heartbeat", "instance count out of range");
        return;
    }
    if (n != c->alive)
        GW_LOG_INFO("cluster_instances", "redis=%s alive=%u was=%u", c->text, n, c->alive);
    c->alive = n;
    atomic_store(&c->st_instances, n);
    gw_cluster__share_update(c);
}

void gw_cluster__on_beat(uv_timer_t *t)
{
    gw_cluster_t *c = t->data;
    if (c->beating || !c->redis || !c->verified || !gw_redis_up(c->redis))
        return;
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%d", GW_CLUSTER_ALIVE_MS);
    const char *argv[] = {"EVAL", ALIVE_LUA, "1", c->k_alive, c->id, ttl};
    size_t lens[] = {4, sizeof(ALIVE_LUA) - 1, 1, strlen(c->k_alive), strlen(c->id), strlen(ttl)};
    if (gw_redis_command(c->redis, 6, argv, lens, on_alive, c) == 0)
        c->beating = 1;
}

/* This instance's name in the heartbeat set: the host, the process and a random part (two
 * processes of one host are not one; a client that replaces another on reload takes its name,
 * gw_cluster_carry). */
void gw_cluster__make_id(gw_cluster_t *c)
{
    char host[64] = "";
    uint8_t rnd[4] = {0};
    if (gethostname(host, sizeof(host)) != 0)
        host[0] = 0;
    host[sizeof(host) - 1] = 0;
    (void)RAND_bytes(rnd, sizeof(rnd));
    snprintf(c->id, sizeof(c->id), "%s:%d:%02x%02x%02x%02x", host[0] ? host : "-", (int)getpid(),
             rnd[0], rnd[1], rnd[2], rnd[3]);
}

void gw_cluster_carry(gw_cluster_t *c, const gw_cluster_t *old)
{
    if (!c || !old)
        return;
    memcpy(c->id, old->id, sizeof(c->id));
    if (!c->alive && old->alive) {
        c->alive = old->alive;
        atomic_store(&c->st_instances, old->alive);
        gw_cluster__share_update(c);
    }
}
