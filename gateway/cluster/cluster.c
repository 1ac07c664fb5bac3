/* cluster/cluster.c — the shared ticket keys kept in step with Redis (see cluster.h), on the
 * main thread's loop. One poll at a time: GET the keys; when they are due, SET NX PX the
 * rotation lock of that generation and, holding it, SET the next keys; install what was read
 * or written into the keyring. Beside it, the heartbeat: how many instances are alive, so that
 * each knows its share of a limit while Redis cannot decide. */
#include "cluster/cluster.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"

/* how long a rotation lock is held: far more than the GET → SET NX → SET chain can take (each
 * step has cluster.timeout), far less than a rotation period */
#define LOCK_MS 10000

/* The heartbeat: every BEAT_MS (or poll_interval, when shorter) an instance puts itself in the
 * sorted set PREFIX "instances" with the score Redis's now + ALIVE_MS, drops the members whose
 * score has passed and reads how many are left. One key and one call whatever the keyspace
 * holds (a SCAN for per-instance keys would walk every rate key too), and the scores are
 * Redis's clock, so instances' clocks do not matter. An instance that stops counts for
 * ALIVE_MS more. */
#define BEAT_MS 1000
#define ALIVE_MS 3000

/* What the kick timer does once the connection is let go. */
enum { KICK_NONE = 0, KICK_ASK, KICK_REFUSE };

struct gw_cluster {
    uv_loop_t *loop;
    gw_tls_keyring_t *ring;
    gw_redis_t *redis;
    gw_cluster_hub_t *hub; /* where the share goes (gw_cluster__set_hub); NULL: nowhere */
    uv_timer_t poll;
    uv_timer_t beat;
    int handles;    /* of poll, beat and kick, not yet closed: the memory goes at 0 */
    int beating;    /* a heartbeat is under way */
    unsigned alive; /* instances alive at the last heartbeat (0: none read yet) */
    char *k_alive;  /* PREFIX "instances" */
    char id[128];   /* this instance in it: host:pid:random */
    char *host, *password, *prefix;
    char text[GW_CLUSTER_ADDR_MAX]; /* the Redis talked to (or last tried), HOST:PORT */
    char *ident;                    /* what gw_cluster_same compares (cluster_ident) */
    /* cluster.sentinels: who names the primary (NULL: cluster.redis is Redis) */
    gw_sentinel_t *sent;
    char *master;
    char from[64];          /* the sentinel that named the current one */
    int verified;           /* the connection is to the primary (ROLE said so; cluster.redis: up) */
    uv_timer_t kick;        /* lets the connection go outside its own callbacks, then asks again */
    int kick_act;           /* KICK_* */
    gw_redis_t *kick_redis; /* the connection the kick is about (another one: stale) */
    char kick_why[200];
    pthread_mutex_t mu; /* primary, read by scrapes */
    char primary[GW_CLUSTER_ADDR_MAX];
    atomic_ullong st_failovers;
    unsigned db;
    uint64_t timeout_ms, connect_timeout_ms, poll_interval_ms, rotation_ms;
    size_t max_reply;
    char *k_keys;           /* PREFIX "tls:ticket-keys" */
    int busy;               /* a poll is under way */
    int degraded;           /* the last call failed (or the connection is down) */
    int seen;               /* some call answered since the start */
    gw_cluster_keys_t cur;  /* what the keyring holds (n 0: nothing from Redis yet) */
    gw_cluster_keys_t next; /* a rotation being written */
    char sha[48];           /* the rate script's SHA1 once SCRIPT LOAD answered ("" before) */
    char lsha[48];          /* the lease script's */
    atomic_ullong st_lease_calls, st_lease_bytes, st_lease_local;
    atomic_int st_up;
    atomic_ullong st_degraded, st_ok, st_failed, st_timeout, st_rotations, st_updates;
    atomic_ullong st_rate_allowed, st_rate_denied, st_rate_local, st_rate_calls;
    atomic_ullong st_oversized, st_bad_replies;
    atomic_uint st_instances;
    atomic_ullong st_local_ms;    /* time in local mode, spells that ended */
    atomic_ullong st_local_since; /* when the current spell began (monotonic ms); 0: up */
};

/* The heartbeat (see BEAT_MS), in one call. ARGV: this instance's id, ALIVE_MS. Returns how
 * many instances are alive, this one included. */
static const char ALIVE_LUA[] =
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) "
    "/ 1000) local ttl = tonumber(ARGV[2]) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) "
    "redis.call('ZADD', KEYS[1], now + ttl, ARGV[1]) redis.call('PEXPIRE', KEYS[1], ttl) "
    "return redis.call('ZCARD', KEYS[1])";

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

static uint64_t mono_ms(void)
{
    uint64_t ms = uv_hrtime() / 1000000u;
    return ms ? ms : 1; /* 0 means "not in local mode" */
}

static uint64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static char *join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *d = gw_malloc(na + nb + 1);
    if (d) {
        memcpy(d, a, na);
        memcpy(d + na, b, nb + 1);
    }
    return d;
}

/* ---- up and down ---------------------------------------------------------------------------- */

/* What the hub tells the workers: 1 while Redis decides (up, its scripts loaded), else the
 * instances last seen alive (see gw_cluster_hub_share). */
static void share_update(gw_cluster_t *c)
{
    int shared = atomic_load(&c->st_up) && c->sha[0] && c->lsha[0];
    if (c->hub)
        gw_cluster__hub_share(c->hub, shared || !c->alive ? 1 : c->alive);
}

/* Up or down (local mode), with the time spent down added up. */
static void set_up(gw_cluster_t *c, int up)
{
    if (atomic_exchange(&c->st_up, up) != up) {
        uint64_t now = mono_ms();
        if (!up) {
            atomic_store(&c->st_local_since, now);
        } else {
            uint64_t since = atomic_exchange(&c->st_local_since, 0);
            if (since && now > since)
                atomic_fetch_add(&c->st_local_ms, now - since);
        }
    }
    share_update(c);
}

void gw_cluster__set_hub(gw_cluster_t *c, gw_cluster_hub_t *h)
{
    c->hub = h;
    share_update(c);
}

static void degrade(gw_cluster_t *c, const char *why)
{
    set_up(c, 0);
    if (c->degraded)
        return;
    c->degraded = 1;
    atomic_fetch_add(&c->st_degraded, 1);
    GW_LOG_WARN("cluster_degraded", "redis=%s reason=\"%s\" ticket_keys=%s", c->text, why,
                c->cur.n ? "last_known" : "local");
}

static void recovered(gw_cluster_t *c)
{
    set_up(c, 1);
    if (!c->degraded && c->seen)
        return;
    if (c->degraded)
        GW_LOG_INFO("cluster_recovered", "redis=%s", c->text);
    c->degraded = 0;
    c->seen = 1;
}

static void kick(gw_cluster_t *c, int act, const char *why);

/* A call's outcome: 0 when it answered (an error reply counts as a failure too). */
static int outcome(gw_cluster_t *c, const redisReply *r, int err, const char *what)
{
    return gw_cluster__outcome(c, r, err, what);
}

int gw_cluster__outcome(gw_cluster_t *c, const redisReply *r, int err, const char *what)
{
    char why[200];
    if (err == GW_E_TIMEOUT) {
        atomic_fetch_add(&c->st_timeout, 1);
        snprintf(why, sizeof(why), "%s: no answer within %llu ms", what,
                 (unsigned long long)c->timeout_ms);
        degrade(c, why);
        return -1;
    }
    if (err == GW_E_CLOSED)
        return -1; /* we are stopping, or letting this connection go for another */
    if (err < 0 || !r) {
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "%s: connection lost", what);
        degrade(c, why);
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char text[151];
        gw_cluster__log_text(text, sizeof(text), r->str, r->len);
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "%s: %s", what, text);
        degrade(c, why);
        if (c->sent && r->len >= 8 && !memcmp(r->str, "READONLY", 8))
            kick(c, KICK_ASK, why); /* a replica now: the sentinels name the primary */
        return -1;
    }
    atomic_fetch_add(&c->st_ok, 1);
    recovered(c);
    return 0;
}

/* An answer of the right type whose value cannot be Redis's (or our script's): counted and
 * logged, and the caller decides locally. */
static void bad_reply(gw_cluster_t *c, const char *what, const char *why)
{
    atomic_fetch_add(&c->st_bad_replies, 1);
    GW_LOG_WARN("cluster_bad_reply", "redis=%s call=\"%s\" reason=\"%s\"", c->text, what, why);
}

/* The Redis client dropped a reply past cluster.max_reply (the connection goes down next, and
 * with it to local decisions). */
static void on_oversized(void *ud, uint64_t bytes)
{
    gw_cluster_t *c = ud;
    (void)bytes;
    atomic_fetch_add(&c->st_oversized, 1);
}

/* ---- the keys ------------------------------------------------------------------------------- */

static void install(gw_cluster_t *c, const gw_cluster_keys_t *k, const char *how)
{
    if (c->cur.n == k->n && c->cur.born_ms == k->born_ms &&
        !memcmp(c->cur.keys, k->keys, k->n * GW_TLS_KEY_LEN))
        return;
    if (gw_tls_keyring_set(c->ring, k->keys, k->n) < 0)
        return;
    c->cur = *k;
    atomic_fetch_add(&c->st_updates, 1);
    /* born_ms is whatever Redis holds: a birth ahead of our clock is a negative age, and the
     * difference is taken in unsigned arithmetic either way */
    uint64_t now = unix_ms();
    int ahead = k->born_ms > now;
    uint64_t age = ahead ? k->born_ms - now : now - k->born_ms;
    GW_LOG_INFO("tls_ticket_keys_updated", "source=cluster how=%s keys=%zu age_ms=%s%llu", how,
                k->n, ahead ? "-" : "", (unsigned long long)age);
}

static void on_set(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    c->busy = 0;
    if (outcome(c, r, err, "SET ticket keys") < 0)
        return; /* the lock lapses after LOCK_MS; the next poll of any instance tries again */
    atomic_fetch_add(&c->st_rotations, 1);
    GW_LOG_INFO("tls_ticket_key_rotated", "source=cluster period_ms=%llu",
                (unsigned long long)c->rotation_ms);
    install(c, &c->next, "rotated");
}

static void on_lock(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    if (outcome(c, r, err, "SET NX rotation lock") < 0 || r->type != REDIS_REPLY_STATUS) {
        /* nil: another instance rotates this generation; its keys come with the next poll */
        c->busy = 0;
        return;
    }
    uint8_t v[GW_CLUSTER_KEYS_MAX_LEN];
    size_t vl = gw_cluster__keys_write(&c->next, v);
    const char *argv[] = {"SET", c->k_keys, (const char *)v};
    size_t lens[] = {3, strlen(c->k_keys), vl};
    if (gw_redis_command(c->redis, 3, argv, lens, on_set, c) < 0) {
        degrade(c, "SET ticket keys: not connected");
        c->busy = 0;
    }
}

/* The keys are due: draw the next and take the lock of the generation they replace. */
static void rotate(gw_cluster_t *c, const gw_cluster_keys_t *cur)
{
    uint8_t fresh[GW_TLS_KEY_LEN];
    if (RAND_bytes(fresh, sizeof(fresh)) != 1) {
        c->busy = 0;
        return;
    }
    gw_cluster__keys_rotate(cur, fresh, unix_ms(), &c->next);
    memset(fresh, 0, sizeof(fresh));
    char lock[512], token[32], px[24];
    snprintf(lock, sizeof(lock), "%s:rotate:%llu", c->k_keys,
             (unsigned long long)(cur ? cur->born_ms : 0));
    snprintf(token, sizeof(token), "%d", (int)getpid());
    snprintf(px, sizeof(px), "%d", LOCK_MS);
    const char *argv[] = {"SET", lock, token, "NX", "PX", px};
    size_t lens[] = {3, strlen(lock), strlen(token), 2, 2, strlen(px)};
    if (gw_redis_command(c->redis, 6, argv, lens, on_lock, c) < 0) {
        degrade(c, "SET NX rotation lock: not connected");
        c->busy = 0;
    }
}

static void on_get(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    if (outcome(c, r, err, "GET ticket keys") < 0) {
        c->busy = 0;
        return;
    }
    gw_cluster_keys_t k;
    int have = r->type == REDIS_REPLY_STRING &&
               gw_cluster__keys_parse((const uint8_t *)r->str, r->len, &k) == 0;
    if (r->type == REDIS_REPLY_STRING && !have)
        GW_LOG_WARN("cluster_bad_value", "redis=%s key=%s reason=\"not h2gate ticket keys\"",
                    c->text, c->k_keys);
    if (have)
        install(c, &k, "read");
    if (gw_cluster__keys_due(have ? &k : NULL, unix_ms(), c->rotation_ms)) {
        rotate(c, have ? &k : NULL);
        return;
    }
    c->busy = 0;
}

static void on_poll(uv_timer_t *t)
{
    gw_cluster_t *c = t->data;
    if (c->busy)
        return;
    if (!c->redis || !c->verified || !gw_redis_up(c->redis))
        return; /* the client reconnects by itself; its failure was reported */
    const char *argv[] = {"GET", c->k_keys};
    size_t lens[] = {3, strlen(c->k_keys)};
    if (gw_redis_command(c->redis, 2, argv, lens, on_get, c) == 0)
        c->busy = 1;
}

static void keep_sha(gw_cluster_t *c, char *dst, const redisReply *r, int err)
{
    if (outcome(c, r, err, "SCRIPT LOAD") < 0)
        return;
    if (r->type == REDIS_REPLY_STRING && gw_cluster__sha_ok(r->str, r->len)) {
        memcpy(dst, r->str, r->len);
        dst[r->len] = 0;
        share_update(c); /* shared decisions from now on */
    } else {
        bad_reply(c, "SCRIPT LOAD", "not a SHA1");
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

static void load_script(gw_cluster_t *c)
{
    c->sha[0] = c->lsha[0] = 0;
    const char *argv[] = {"SCRIPT", "LOAD", RATE_LUA};
    size_t lens[] = {6, 4, sizeof(RATE_LUA) - 1};
    const char *largv[] = {"SCRIPT", "LOAD", LEASE_LUA};
    size_t llens[] = {6, 4, sizeof(LEASE_LUA) - 1};
    if (gw_redis_command(c->redis, 3, argv, lens, on_script_loaded, c) < 0 ||
        gw_redis_command(c->redis, 3, largv, llens, on_lease_script_loaded, c) < 0)
        degrade(c, "SCRIPT LOAD: not connected");
}

/* ---- the heartbeat -------------------------------------------------------------------------- */

static void on_alive(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    c->beating = 0;
    if (outcome(c, r, err, "EVAL heartbeat") < 0)
        return; /* the last count stays: it is what local decisions divide by */
    unsigned n;
    if (r->type != REDIS_REPLY_INTEGER || gw_cluster__alive_reply(r->integer, &n) < 0) {
        bad_reply(c, "EVAL heartbeat", "instance count out of range");
        return;
    }
    if (n != c->alive)
        GW_LOG_INFO("cluster_instances", "redis=%s alive=%u was=%u", c->text, n, c->alive);
    c->alive = n;
    atomic_store(&c->st_instances, n);
    share_update(c);
}

static void on_beat(uv_timer_t *t)
{
    gw_cluster_t *c = t->data;
    if (c->beating || !c->redis || !c->verified || !gw_redis_up(c->redis))
        return;
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%d", ALIVE_MS);
    const char *argv[] = {"EVAL", ALIVE_LUA, "1", c->k_alive, c->id, ttl};
    size_t lens[] = {4, sizeof(ALIVE_LUA) - 1, 1, strlen(c->k_alive), strlen(c->id), strlen(ttl)};
    if (gw_redis_command(c->redis, 6, argv, lens, on_alive, c) == 0)
        c->beating = 1;
}

/* ---- the primary ---------------------------------------------------------------------------- */

/* The connection is to the primary: remembered (for scrapes; a new address is a failover),
 * the scripts loaded, the keys read (a promoted replica has them) and the count at once. */
static void primary_taken(gw_cluster_t *c)
{
    char was[GW_CLUSTER_ADDR_MAX];
    c->verified = 1;
    pthread_mutex_lock(&c->mu);
    memcpy(was, c->primary, sizeof(was));
    snprintf(c->primary, sizeof(c->primary), "%s", c->text);
    pthread_mutex_unlock(&c->mu);
    if (c->sent)
        GW_LOG_INFO("cluster_primary", "redis=%s sentinel=%s master=%s", c->text, c->from,
                    c->master);
    if (was[0] && strcmp(was, c->text) != 0) {
        atomic_fetch_add(&c->st_failovers, 1);
        GW_LOG_WARN("cluster_failover", "from=%s to=%s master=%s", was, c->text,
                    c->master ? c->master : "-");
    }
    if (c->sent)
        gw_sentinel_ok(c->sent);
    load_script(c);
    on_poll(&c->poll); /* no need to wait a whole interval for the keys */
    on_beat(&c->beat); /* nor for the count */
}

/* ROLE's answer on the address a sentinel named: only "master" is the primary. A replica (a
 * sentinel that lies or is behind, a primary demoted since) is refused, and the next sentinel
 * asked. */
static void on_role(void *ud, const redisReply *r, int err)
{
    gw_cluster_t *c = ud;
    if (err == GW_E_CLOSED)
        return;
    char why[200];
    if (err == GW_E_TIMEOUT) {
        atomic_fetch_add(&c->st_timeout, 1);
        snprintf(why, sizeof(why), "ROLE: no answer within %llu ms",
                 (unsigned long long)c->timeout_ms);
    } else if (err < 0 || !r) {
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "ROLE: connection lost");
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
               r->element[0]->type == REDIS_REPLY_STRING) {
        const redisReply *role = r->element[0];
        if (role->len == 6 && !memcmp(role->str, "master", 6)) {
            atomic_fetch_add(&c->st_ok, 1);
            recovered(c);
            primary_taken(c);
            return;
        }
        char text[41];
        gw_cluster__log_text(text, sizeof(text), role->str, role->len);
        snprintf(why, sizeof(why), "ROLE: %s, not the primary", text);
    } else {
        char text[121] = "not a ROLE answer";
        if (r->type == REDIS_REPLY_ERROR)
            gw_cluster__log_text(text, sizeof(text), r->str, r->len);
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "ROLE: %s", text);
    }
    GW_LOG_WARN("cluster_primary_refused", "redis=%s sentinel=%s master=%s reason=\"%s\"", c->text,
                c->from, c->master, why);
    degrade(c, why);
    kick(c, KICK_REFUSE, why);
}

/* The client connected (with sentinels, ROLE first; then the scripts are loaded, the keys read
 * at once) or lost Redis (with sentinels, they are asked again). */
static void on_redis_up(void *ud, int up, const char *why)
{
    gw_cluster_t *c = ud;
    if (!up) {
        char w[200];
        snprintf(w, sizeof(w), "connection: %s", why);
        degrade(c, w);
        c->sha[0] = c->lsha[0] = 0;
        c->beating = 0; /* its callback ran (GW_E_IO) */
        share_update(c);
        if (c->sent) /* the primary gone (failing over?), or the one named unreachable */
            kick(c, c->verified ? KICK_ASK : KICK_REFUSE, w);
        return;
    }
    if (!c->sent) {
        primary_taken(c);
        return;
    }
    const char *argv[] = {"ROLE"};
    size_t lens[] = {4};
    if (gw_redis_command(c->redis, 1, argv, lens, on_role, c) < 0)
        kick(c, KICK_REFUSE, "ROLE: cannot send");
}

/* Connect to host:port (the connection there was is let go: its callbacks run now, with
 * GW_E_CLOSED). Never from inside a callback of c->redis. */
static int connect_to(gw_cluster_t *c, const char *host, unsigned port)
{
    if (c->redis)
        gw_redis_close(c->redis);
    c->redis = NULL;
    c->kick_act = KICK_NONE; /* a kick was about the connection just let go */
    c->verified = 0;
    c->sha[0] = c->lsha[0] = 0;
    share_update(c);
    char *h = gw_strdup(host);
    if (!h)
        return GW_E_NOMEM;
    gw_free(c->host);
    c->host = h;
    snprintf(c->text, sizeof(c->text), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
    gw_redis_opts_t o = {.host = c->host,
                         .port = port,
                         .password = c->password,
                         .db = c->db,
                         .timeout_ms = c->timeout_ms,
                         .connect_timeout_ms = c->connect_timeout_ms,
                         .max_reply = c->max_reply,
                         .on_state = on_redis_up,
                         .on_oversized = on_oversized,
                         .ud = c};
    int rv = gw_redis_new(c->loop, &o, &c->redis);
    if (rv < 0)
        c->redis = NULL;
    return rv;
}

static void on_kick(uv_timer_t *t)
{
    gw_cluster_t *c = t->data;
    int act = c->kick_act;
    c->kick_act = KICK_NONE;
    if (act == KICK_NONE || c->redis != c->kick_redis)
        return; /* another connection since: the kick was about one already let go */
    if (c->redis)
        gw_redis_close(c->redis); /* its pending callbacks run now, with GW_E_CLOSED */
    c->redis = NULL;
    c->verified = 0;
    c->sha[0] = c->lsha[0] = 0;
    share_update(c);
    if (act == KICK_ASK)
        gw_sentinel_ask(c->sent);
    else
        gw_sentinel_refused(c->sent, c->kick_why);
}

/* Let the connection go at the next loop turn (from inside its callbacks it may not be
 * closed), then ask the sentinels again (KICK_ASK) or for another one (KICK_REFUSE). */
static void kick(gw_cluster_t *c, int act, const char *why)
{
    c->kick_act = act;
    c->kick_redis = c->redis;
    snprintf(c->kick_why, sizeof(c->kick_why), "%s", why);
    uv_timer_start(&c->kick, on_kick, 0, 0);
}

/* gw_sentinel_cbs_t: a sentinel named host:port. */
static void on_named(void *ud, const char *host, unsigned port, const char *from)
{
    gw_cluster_t *c = ud;
    char text[GW_CLUSTER_ADDR_MAX];
    snprintf(text, sizeof(text), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
    snprintf(c->from, sizeof(c->from), "%s", from);
    if (c->redis && c->kick_act == KICK_NONE && !strcmp(text, c->text)) {
        if (c->verified && gw_redis_up(c->redis))
            gw_sentinel_ok(c->sent); /* the one we have */
        return;                      /* else being checked: ROLE decides */
    }
    if (connect_to(c, host, port) < 0)
        gw_sentinel_refused(c->sent, "out of memory");
}

static void on_no_primary(void *ud, const char *why)
{
    gw_cluster_t *c = ud;
    char w[400];
    snprintf(w, sizeof(w), "no primary from the sentinels (last: %s)", why);
    degrade(c, w);
}

static void on_switched(void *ud, const char *from, const char *to)
{
    gw_cluster_t *c = ud;
    char w[2 * GW_CLUSTER_ADDR_MAX + 64];
    snprintf(w, sizeof(w), "sentinel: +switch-master from %s to %s", from, to);
    if (c->redis)
        gw_redis_close(c->redis); /* the old primary: nothing more goes there */
    c->redis = NULL;
    c->kick_act = KICK_NONE;
    c->verified = 0;
    c->sha[0] = c->lsha[0] = 0;
    degrade(c, w);
    share_update(c);
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
        load_script(c);
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
    if (outcome(c, r, err, "EVALSHA rate") < 0 || r->type != REDIS_REPLY_ARRAY ||
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
        bad_reply(c, "EVALSHA rate", "allowed count out of range");
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

/* shared.c's view of the client (the redis client may be NULL when it could not start) */
gw_redis_t *gw_cluster__redis(gw_cluster_t *c)
{
    return c->verified ? c->redis : NULL; /* not an address a sentinel named, unchecked */
}

const char *gw_cluster__prefix(const gw_cluster_t *c)
{
    return c->prefix;
}

size_t gw_cluster__max_reply(const gw_cluster_t *c)
{
    return c->max_reply ? c->max_reply : 16 * 1024;
}

/* ---- public --------------------------------------------------------------------------------- */

static void on_poll_closed(uv_handle_t *h);

/* This instance's name in the heartbeat set: the host, the process and a random part (two
 * processes of one host are not one; a client that replaces another on reload takes its name,
 * gw_cluster_carry). */
static void make_id(gw_cluster_t *c)
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

/* Which Redis cfg names, as one string (gw_free it; NULL: no memory): the address, or the
 * sentinels, the master and the sentinels' password. Never logged. */
static char *cluster_ident(const gw_cfg_cluster_t *cfg)
{
    size_t cap = 64 + GW_CFG_MASTER_NAME_MAX + GW_CFG_SENTINELS_MAX * 66 +
                 (cfg->sentinel_password ? strlen(cfg->sentinel_password) : 0);
    char *s = gw_malloc(cap);
    if (!s)
        return NULL;
    size_t o = 0;
    if (!cfg->sentinels_len) {
        snprintf(s, cap, "redis=%s", cfg->redis.text);
        return s;
    }
    o += (size_t)snprintf(s + o, cap - o, "sentinels=");
    for (size_t i = 0; i < cfg->sentinels_len; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s,", cfg->sentinels[i].addr.text);
    snprintf(s + o, cap - o, " master=%s spw=%s", cfg->master ? cfg->master : "",
             cfg->sentinel_password ? cfg->sentinel_password : "");
    return s;
}

static void free_fields(gw_cluster_t *c)
{
    gw_free(c->host);
    gw_free(c->password);
    gw_free(c->prefix);
    gw_free(c->k_keys);
    gw_free(c->k_alive);
    gw_free(c->master);
    if (c->ident)
        OPENSSL_cleanse(c->ident, strlen(c->ident));
    gw_free(c->ident);
}

int gw_cluster_new(uv_loop_t *loop, const gw_cfg_cluster_t *cfg, gw_tls_keyring_t *ring,
                   gw_cluster_t **out)
{
    *out = NULL;
    gw_cluster_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return GW_E_NOMEM;
    c->loop = loop;
    c->ring = ring;
    c->password = gw_strdup(cfg->password);
    c->prefix = gw_strdup(cfg->key_prefix ? cfg->key_prefix : "h2gate:");
    c->k_keys = c->prefix ? join(c->prefix, "tls:ticket-keys") : NULL;
    c->k_alive = c->prefix ? join(c->prefix, "instances") : NULL;
    c->ident = cluster_ident(cfg);
    c->master = cfg->sentinels_len ? gw_strdup(cfg->master) : NULL;
    gw_sentinel_cbs_t cbs = {
        .on_primary = on_named, .on_none = on_no_primary, .on_switch = on_switched, .ud = c};
    if ((cfg->password && !c->password) || !c->k_keys || !c->k_alive || !c->ident ||
        (cfg->sentinels_len && (!c->master || gw_sentinel_new(loop, cfg, &cbs, &c->sent) < 0))) {
        free_fields(c);
        gw_free(c);
        return GW_E_NOMEM;
    }
    make_id(c);
    atomic_store(&c->st_local_since, mono_ms()); /* alone until Redis answers */
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->text, sizeof(c->text), "%s", c->sent ? "-" : cfg->redis.text);
    c->db = cfg->db;
    c->timeout_ms = cfg->timeout_ms;
    c->connect_timeout_ms = cfg->connect_timeout_ms;
    c->poll_interval_ms = cfg->poll_interval_ms;
    c->rotation_ms = cfg->ticket_rotation_ms;
    c->max_reply = cfg->max_reply;
    uv_timer_init(loop, &c->poll);
    c->poll.data = c;
    uv_timer_init(loop, &c->beat);
    c->beat.data = c;
    uv_timer_init(loop, &c->kick);
    c->kick.data = c;
    c->handles = 3;
    int rv = 0;
    if (!c->sent) {
        const char *colon = strrchr(cfg->redis.text, ':');
        rv = connect_to(c, cfg->redis_host, colon ? (unsigned)atoi(colon + 1) : 6379);
        snprintf(c->text, sizeof(c->text), "%s", cfg->redis.text); /* as written */
    }
    if (rv < 0) {
        gw_cluster_close(c); /* frees c when the loop runs */
        return rv;
    }
    uv_timer_start(&c->poll, on_poll, c->poll_interval_ms, c->poll_interval_ms);
    uint64_t beat = c->poll_interval_ms < BEAT_MS ? c->poll_interval_ms : BEAT_MS;
    uv_timer_start(&c->beat, on_beat, beat, beat);
    if (c->sent) {
        GW_LOG_INFO("cluster_start", "sentinels=%zu master=%s db=%u key_prefix=%s timeout_ms=%llu",
                    cfg->sentinels_len, c->master, c->db, c->prefix,
                    (unsigned long long)c->timeout_ms);
        gw_sentinel_ask(c->sent);
    } else {
        GW_LOG_INFO("cluster_start", "redis=%s db=%u key_prefix=%s timeout_ms=%llu", c->text, c->db,
                    c->prefix, (unsigned long long)c->timeout_ms);
    }
    *out = c;
    return 0;
}

int gw_cluster_same(const gw_cluster_t *c, const gw_cfg_cluster_t *cfg)
{
#define STR_EQ(a, b) ((!(a) && !(b)) || ((a) && (b) && !strcmp((a), (b))))
    char *ident = cluster_ident(cfg);
    int same_redis = ident && !strcmp(ident, c->ident);
    if (ident)
        OPENSSL_cleanse(ident, strlen(ident));
    gw_free(ident);
    return cfg->enabled && same_redis && STR_EQ(c->password, cfg->password) && c->db == cfg->db &&
           STR_EQ(c->prefix, cfg->key_prefix) && c->timeout_ms == cfg->timeout_ms &&
           c->connect_timeout_ms == cfg->connect_timeout_ms &&
           c->poll_interval_ms == cfg->poll_interval_ms &&
           c->rotation_ms == cfg->ticket_rotation_ms && c->max_reply == cfg->max_reply;
#undef STR_EQ
}

void gw_cluster_carry(gw_cluster_t *c, const gw_cluster_t *old)
{
    if (!c || !old)
        return;
    memcpy(c->id, old->id, sizeof(c->id));
    if (!c->alive && old->alive) {
        c->alive = old->alive;
        atomic_store(&c->st_instances, old->alive);
        share_update(c);
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
    if (outcome(c, r, err, "EVALSHA lease") < 0 || r->type != REDIS_REPLY_INTEGER) {
        grant_local(c, qs);
        return;
    }
    uint64_t want = 0, left;
    for (gw_rate_q_t *q = qs; q; q = q->next)
        want += q->want; /* each at most a few seconds of a configured rate */
    if (gw_cluster__lease_reply(r->integer, want, &left) < 0) {
        bad_reply(c, "EVALSHA lease", "grant out of range");
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

/* Time in local mode: the spells that ended and the one under way. */
static uint64_t local_ms(gw_cluster_t *c)
{
    uint64_t since = atomic_load(&c->st_local_since), now = mono_ms();
    return atomic_load(&c->st_local_ms) + (since && now > since ? now - since : 0);
}

gw_cluster_stats_t gw_cluster_stats(const gw_cluster_t *c)
{
    gw_cluster_t *m = (gw_cluster_t *)c; /* atomics, and the primary under its lock */
    gw_cluster_stats_t st = {.up = atomic_load(&m->st_up),
                             .degraded = atomic_load(&m->st_degraded),
                             .calls_ok = atomic_load(&m->st_ok),
                             .calls_failed = atomic_load(&m->st_failed),
                             .calls_timeout = atomic_load(&m->st_timeout),
                             .rotations = atomic_load(&m->st_rotations),
                             .key_updates = atomic_load(&m->st_updates),
                             .rate_allowed = atomic_load(&m->st_rate_allowed),
                             .rate_denied = atomic_load(&m->st_rate_denied),
                             .rate_local = atomic_load(&m->st_rate_local),
                             .rate_calls = atomic_load(&m->st_rate_calls),
                             .lease_calls = atomic_load(&m->st_lease_calls),
                             .lease_bytes = atomic_load(&m->st_lease_bytes),
                             .lease_local = atomic_load(&m->st_lease_local),
                             .replies_oversized = atomic_load(&m->st_oversized),
                             .replies_bad = atomic_load(&m->st_bad_replies),
                             .instances = atomic_load(&m->st_instances),
                             .local_us = local_ms(m) * 1000u,
                             .failovers = atomic_load(&m->st_failovers)};
    pthread_mutex_lock(&m->mu);
    memcpy(st.primary, m->primary, sizeof(st.primary));
    pthread_mutex_unlock(&m->mu);
    return st;
}

static void on_poll_closed(uv_handle_t *h)
{
    gw_cluster_t *c = h->data;
    if (--c->handles > 0)
        return;
    free_fields(c);
    pthread_mutex_destroy(&c->mu);
    OPENSSL_cleanse(&c->cur, sizeof(c->cur));
    OPENSSL_cleanse(&c->next, sizeof(c->next));
    gw_free(c);
}

void gw_cluster_close(gw_cluster_t *c)
{
    if (!c)
        return;
    if (c->redis)
        gw_redis_close(c->redis); /* pending callbacks run now, with GW_E_CLOSED */
    c->redis = NULL;
    gw_sentinel_close(c->sent);
    c->sent = NULL;
    uv_close((uv_handle_t *)&c->poll, on_poll_closed);
    uv_close((uv_handle_t *)&c->beat, on_poll_closed);
    uv_close((uv_handle_t *)&c->kick, on_poll_closed);
}
