/* cluster/limits.c — the limits shared across instances (cluster_internal.h), on the main
 * thread's loop: the request rates of routes[].request_rate (a GCRA script, one call per key
 * and limit for the questions of a loop turn) and the bandwidth of throttle.per_client_rate
 * (a token bucket script granting leases), both loaded with SCRIPT LOAD on each primary. When
 * Redis cannot answer, the questions are answered "local" and each instance decides alone,
 * for its share. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/alloc.h"
#include "common/log.h"

/* GCRA (the generic cell rate algorithm) for n requests at once, atomic in Redis: the key
 * holds the theoretical arrival time (TAT, Unix µs by Redis's clock, so that instances' clocks
 * do not matter); a request may go when TAT - now <= tau, and moves TAT on by T. Returns how
 * many of the n may go, and in how many µs the next one could. ARGV: T = 1e6 / rate, tau =
 * (burst - 1) * T, n. */
static const char RATE_LUA[] =
    "local T = tonumber(ARGV[1]) local tau = tonumber(ARGV[2]) local n = tonumber(ARGV[3]) "
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
    "local tat = tonumber(redis.call('GET', KEYS[1]) or now) if tat < now then tat = now end "
    "local ok = 0 for i = 1, n do if tat - now > tau then break end tat = tat + T ok = ok + 1 "
    "end if ok > 0 then redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', "
    "math.floor((tat - now) / 1000) + 1000) end local retry = 0 if ok < n then retry = "
    "math.floor(tat - tau - now) end return {ok, retry}";

/* A token bucket of a client's bytes shared by every instance, in one hash: up to want bytes
 * granted from what has refilled (Redis's clock) since the last call, at most burst held.
 * ARGV: rate (bytes/s), burst (bytes), want. Returns the bytes granted. */
static const char LEASE_LUA[] =
    "local rate = tonumber(ARGV[1]) local burst = tonumber(ARGV[2]) local want = "
    "tonumber(ARGV[3]) local t = redis.call('TIME') local now = tonumber(t[1]) * 1000000 + "
    "tonumber(t[2]) local v = redis.call('HMGET', KEYS[1], 'tok', 'ts') local tok = "
    "tonumber(v[1]) or burst local ts = tonumber(v[2]) or now if now > ts then tok = tok + "
    "(now - ts) * rate / 1000000 end if tok > burst then tok = burst end local g = "
    "math.floor(math.min(want, tok)) if g < 0 then g = 0 end tok = tok - g "
    "redis.call('HSET', KEYS[1], 'tok', tostring(tok), 'ts', string.format('%d', now)) "
    "redis.call('PEXPIRE', KEYS[1], math.floor(burst * 1000 / rate) + 1000) return g";

static void keep_sha(gw_cluster_t *c, char *dst, const redisReply *r, int err)
{
    if (gw_cluster__outcome(c, r, err, "SCRIPT LOAD") < 0)
        return;
    if (r->type == REDIS_REPLY_STRING && gw_cluster__sha_ok(r->str, r->len)) {
        memcpy(dst, r->str, r->len);
        dst[r->len] = 0;
        gw_cluster__share_update(c); /* shared decisions from now on */
    } else {
        gw_cluster__bad_reply(c, "SCRIPT LOAD", "not a SHA1");
    }
}

static void on_script_loaded(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    keep_sha(c, c->sha, r, err);
}

static void on_lease_script_loaded(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    keep_sha(c, c->lsha, r, err);
}

void gw_cluster__load_scripts(gw_cluster_t *c)
{
    c->sha[0] = c->lsha[0] = 0;
    const char *argv[] = {"SCRIPT", "LOAD", RATE_LUA};
    size_t lens[] = {6, 4, sizeof(RATE_LUA) - 1};
    const char *largv[] = {"SCRIPT", "LOAD", LEASE_LUA};
    size_t llens[] = {6, 4, sizeof(LEASE_LUA) - 1};
    if (gw_redis_command(c->redis, 3, argv, lens, on_script_loaded, c) < 0 ||
        gw_redis_command(c->redis, 3, largv, llens, on_lease_script_loaded, c) < 0)
        gw_cluster__degrade(c, "SCRIPT LOAD: not connected");
}

/* ---- shared request rates ------------------------------------------------------------------ */

/* The questions of one key in one loop turn: one script call decides them all. */
typedef struct {
    gw_cluster_t *c;
    gw_rate_q_t *qs; /* in arrival order */
} rgroup_t;

static void answer_group(gw_cluster_t *c, gw_rate_q_t *q, gw_rate_verdict_t v, unsigned retry)
{
    while (q) {
        gw_rate_q_t *next = q->next;
        atomic_fetch_add(v == GW_RATE_ALLOW  ? &c->st_rate_allowed
                         : v == GW_RATE_DENY ? &c->st_rate_denied
                                             : &c->st_rate_local,
                         1);
        gw_cluster__answer(q, v, retry);
        q = next;
    }
}

/* A NOSCRIPT error (Redis restarted, or its scripts were flushed): the scripts are loaded
 * again and 1 is returned (the questions then decide locally). */
static int noscript(gw_cluster_t *c, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str || strncmp(r->str, "NOSCRIPT", 8) != 0)
        return 0;
    atomic_fetch_add(&c->st_failed, 1);
    if (c->redis)
        gw_cluster__load_scripts(c);
    return 1;
}

/* The first question of *list and every later one with the same key (and, with same_limit,
 * the same rate and burst), taken out of *list in arrival order; *want sums their want. */
static gw_rate_q_t *take_group(gw_rate_q_t **list, int same_limit, uint64_t *n, uint64_t *want)
{
    gw_rate_q_t *first = *list, **tail = &first->next;
    *list = first->next;
    first->next = NULL;
    *n = 1;
    *want = first->want;
    gw_rate_q_t **lp = list;
    while (*lp) {
        gw_rate_q_t *q = *lp;
        if (q->klen == first->klen && !memcmp(q->key, first->key, q->klen) &&
            (!same_limit || (q->rate == first->rate && q->burst == first->burst))) {
            *lp = q->next;
            q->next = NULL;
            *tail = q;
            tail = &q->next;
            ++*n;
            *want += q->want;
        } else {
            lp = &q->next;
        }
    }
    return first;
}

/* One script call for the group of questions that starts with first: EVALSHA sha on the key
 * PREFIX KIND CLIENT with three integer arguments, cb getting the group (an rgroup_t). 0, or
 * -1 and nothing was sent (the caller answers the group itself). */
static int call_script(gw_cluster_t *c, const char *sha, const char *kind, gw_rate_q_t *first,
                       const uint64_t arg[3], gw_redis_cb cb)
{
    char key[512], a[3][24];
    size_t pl = strlen(c->prefix), kn = strlen(kind), kl = pl + kn + first->klen;
    rgroup_t *g = kl <= sizeof(key) ? gw_calloc(1, sizeof(*g)) : NULL;
    if (!g)
        return -1; /* no memory, or a prefix too long for the key */
    g->c = c;
    g->qs = first;
    memcpy(key, c->prefix, pl);
    memcpy(key + pl, kind, kn);
    memcpy(key + pl + kn, first->key, first->klen);
    for (int i = 0; i < 3; i++)
        snprintf(a[i], sizeof(a[i]), "%llu", (unsigned long long)arg[i]);
    const char *argv[] = {"EVALSHA", sha, "1", key, a[0], a[1], a[2]};
    size_t lens[] = {7, strlen(sha), 1, kl, strlen(a[0]), strlen(a[1]), strlen(a[2])};
    if (gw_redis_command(c->redis, 7, argv, lens, cb, g) < 0) {
        gw_free(g);
        return -1;
    }
    return 0;
}

static void on_rate(void *ud, const redisReply *r, int err)
{
    rgroup_t *g = ud;
    gw_cluster_t *c = g->c;
    gw_rate_q_t *qs = g->qs;
    gw_free(g);
    if (noscript(c, r)) {
        answer_group(c, qs, GW_RATE_LOCAL, 0);
        return;
    }
    if (gw_cluster__outcome(c, r, err, "EVALSHA rate") < 0 || r->type != REDIS_REPLY_ARRAY ||
        r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        answer_group(c, qs, GW_RATE_LOCAL, 0);
        return;
    }
    uint64_t n = 0, ok;
    unsigned retry;
    for (gw_rate_q_t *q = qs; q; q = q->next)
        n++;
    if (gw_cluster__rate_reply(r->element[0]->integer, r->element[1]->integer, n, &ok, &retry) <
        0) {
        gw_cluster__bad_reply(c, "EVALSHA rate", "allowed count out of range");
        answer_group(c, qs, GW_RATE_LOCAL, 0);
        return;
    }
    gw_rate_q_t *q = qs;
    for (uint64_t i = 0; q && i < ok; i++) {
        gw_rate_q_t *next = q->next;
        q->next = NULL;
        answer_group(c, q, GW_RATE_ALLOW, 0);
        q = next;
    }
    answer_group(c, q, GW_RATE_DENY, retry);
}

static void leases(gw_cluster_t *c, gw_rate_q_t *list);

void gw_cluster__rates(gw_cluster_t *c, gw_rate_q_t *all)
{
    gw_rate_q_t *list = NULL, **lt = &list, *lease = NULL, **lst = &lease;
    while (all) { /* rate questions and bandwidth leases go their own ways */
        gw_rate_q_t *q = all;
        all = q->next;
        q->next = NULL;
        if (q->lease) {
            *lst = q;
            lst = &q->next;
        } else {
            *lt = q;
            lt = &q->next;
        }
    }
    if (lease)
        leases(c, lease);
    if (!list)
        return;
    if (!c->redis || !gw_redis_up(c->redis) || !c->sha[0]) {
        answer_group(c, list, GW_RATE_LOCAL, 0);
        return;
    }
    while (list) {
        /* the first question's key, and every later one with the same key and limit */
        uint64_t n, unused;
        gw_rate_q_t *first = take_group(&list, 1, &n, &unused);
        uint64_t rate = first->rate ? first->rate : 1;
        uint64_t T = 1000000 / rate ? 1000000 / rate : 1;
        uint64_t burst = first->burst ? first->burst : rate;
        const uint64_t arg[3] = {T, (burst - 1) * T, n}; /* T, tau, n: see RATE_LUA */
        if (call_script(c, c->sha, "rate:", first, arg, on_rate) < 0)
            answer_group(c, first, GW_RATE_LOCAL, 0);
        else
            atomic_fetch_add(&c->st_rate_calls, 1);
    }
}

/* ---- shared bandwidth (throttle.per_client_rate across instances) ------------------------- */

static void grant_local(gw_cluster_t *c, gw_rate_q_t *q)
{
    while (q) {
        gw_rate_q_t *next = q->next;
        atomic_fetch_add(&c->st_lease_local, 1);
        gw_cluster__grant(q, 0, 1);
        q = next;
    }
}

static void on_lease(void *ud, const redisReply *r, int err)
{
    rgroup_t *g = ud;
    gw_cluster_t *c = g->c;
    gw_rate_q_t *qs = g->qs;
    gw_free(g);
    if (noscript(c, r)) {
        grant_local(c, qs);
        return;
    }
    if (gw_cluster__outcome(c, r, err, "EVALSHA lease") < 0 || r->type != REDIS_REPLY_INTEGER) {
        grant_local(c, qs);
        return;
    }
    uint64_t want = 0, left;
    for (gw_rate_q_t *q = qs; q; q = q->next)
        want += q->want; /* each at most a few seconds of a configured rate */
    if (gw_cluster__lease_reply(r->integer, want, &left) < 0) {
        gw_cluster__bad_reply(c, "EVALSHA lease", "grant out of range");
        grant_local(c, qs);
        return;
    }
    atomic_fetch_add(&c->st_lease_bytes, left);
    while (qs) { /* in arrival order, each up to what it asked */
        gw_rate_q_t *next = qs->next;
        uint64_t give = qs->want < left ? qs->want : left;
        left -= give;
        gw_cluster__grant(qs, give, 0);
        qs = next;
    }
}

static void leases(gw_cluster_t *c, gw_rate_q_t *list)
{
    if (!c->redis || !gw_redis_up(c->redis) || !c->lsha[0]) {
        grant_local(c, list);
        return;
    }
    while (list) {
        uint64_t n, want;
        gw_rate_q_t *first = take_group(&list, 0, &n, &want);
        const uint64_t arg[3] = {first->rate ? first->rate : 1, first->burst, want};
        if (call_script(c, c->lsha, "bw:", first, arg, on_lease) < 0)
            grant_local(c, first);
        else
            atomic_fetch_add(&c->st_lease_calls, 1);
    }
}
