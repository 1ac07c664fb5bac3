/* cluster/cluster.c — the shared ticket keys kept in step with Redis (see cluster.h), on the
 * main thread's loop. One poll at a time: GET the keys; when they are due, SET NX PX the
 * rotation lock of that generation and, holding it, SET the next keys; install what was read
 * or written into the keyring. Beside it, the client's life (start, compare on reload, stop),
 * up and down (local mode), and the primary (with sentinels: checked with ROLE, followed). The
 * shared limits are in limits.c, the heartbeat in heartbeat.c. */
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

/* What the kick timer does once the connection is let go. */
enum { KICK_NONE = 0, KICK_ASK, KICK_REFUSE };

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
void gw_cluster__share_update(gw_cluster_t *c)
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
    gw_cluster__share_update(c);
}

void gw_cluster__set_hub(gw_cluster_t *c, gw_cluster_hub_t *h)
{
    c->hub = h;
    gw_cluster__share_update(c);
}

void gw_cluster__degrade(gw_cluster_t *c, const char *why)
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
        gw_cluster__degrade(c, why);
        return -1;
    }
    if (err == GW_E_CLOSED)
        return -1; /* we are stopping, or letting this connection go for another */
    if (err < 0 || !r) {
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "%s: connection lost", what);
        gw_cluster__degrade(c, why);
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char text[151];
        gw_cluster__log_text(text, sizeof(text), r->str, r->len);
        atomic_fetch_add(&c->st_failed, 1);
        snprintf(why, sizeof(why), "%s: %s", what, text);
        gw_cluster__degrade(c, why);
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
void gw_cluster__bad_reply(gw_cluster_t *c, const char *what, const char *why)
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

/* The Redis client dropped the primary's connection: no reply for ping_interval + timeout
 * (silent_ms since the last one). Its pending calls fail next, and on_redis_up(0) follows. */
static void on_silent(void *ud, uint64_t silent_ms)
{
    gw_cluster_t *c = ud;
    atomic_fetch_add(&c->st_silent, 1);
    GW_LOG_WARN("cluster_primary_silent", "redis=%s master=%s silent_ms=%llu limit_ms=%llu",
                c->text, c->master ? c->master : "-", (unsigned long long)silent_ms,
                (unsigned long long)(c->ping_ms + c->timeout_ms));
}

uint64_t gw_cluster__ping_ms(const gw_cfg_cluster_t *cfg)
{
    if (cfg->ping_interval_ms)
        return cfg->ping_interval_ms;
    uint64_t p = cfg->poll_interval_ms;
    return p && p < GW_CLUSTER_PING_MAX_MS ? p : GW_CLUSTER_PING_MAX_MS;
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
        gw_cluster__degrade(c, "SET ticket keys: not connected");
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
        gw_cluster__degrade(c, "SET NX rotation lock: not connected");
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
    gw_cluster__load_scripts(c);
    on_poll(&c->poll);             /* no need to wait a whole interval for the keys */
    gw_cluster__on_beat(&c->beat); /* nor for the count */
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
    gw_cluster__degrade(c, why);
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
        gw_cluster__degrade(c, w);
        c->sha[0] = c->lsha[0] = 0;
        c->beating = 0; /* its callback ran (GW_E_IO) */
        gw_cluster__share_update(c);
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
    gw_cluster__share_update(c);
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
                         .ping_ms = c->ping_ms,
                         .on_state = on_redis_up,
                         .on_silent = on_silent,
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
    gw_cluster__share_update(c);
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
    gw_cluster__degrade(c, w);
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
    gw_cluster__degrade(c, w);
    gw_cluster__share_update(c);
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
    gw_cluster__make_id(c);
    atomic_store(&c->st_local_since, mono_ms()); /* alone until Redis answers */
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->text, sizeof(c->text), "%s", c->sent ? "-" : cfg->redis.text);
    c->db = cfg->db;
    c->timeout_ms = cfg->timeout_ms;
    c->connect_timeout_ms = cfg->connect_timeout_ms;
    c->poll_interval_ms = cfg->poll_interval_ms;
    c->ping_cfg_ms = cfg->ping_interval_ms;
    c->ping_ms = gw_cluster__ping_ms(cfg);
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
    uint64_t beat =
        c->poll_interval_ms < GW_CLUSTER_BEAT_MS ? c->poll_interval_ms : GW_CLUSTER_BEAT_MS;
    uv_timer_start(&c->beat, gw_cluster__on_beat, beat, beat);
    if (c->sent) {
        GW_LOG_INFO("cluster_start",
                    "sentinels=%zu master=%s db=%u key_prefix=%s timeout_ms=%llu ping_ms=%llu",
                    cfg->sentinels_len, c->master, c->db, c->prefix,
                    (unsigned long long)c->timeout_ms, (unsigned long long)c->ping_ms);
        gw_sentinel_ask(c->sent);
    } else {
        GW_LOG_INFO("cluster_start", "redis=%s db=%u key_prefix=%s timeout_ms=%llu ping_ms=%llu",
                    c->text, c->db, c->prefix, (unsigned long long)c->timeout_ms,
                    (unsigned long long)c->ping_ms);
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
           c->ping_cfg_ms == cfg->ping_interval_ms && c->rotation_ms == cfg->ticket_rotation_ms &&
           c->max_reply == cfg->max_reply;
#undef STR_EQ
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
                             .failovers = atomic_load(&m->st_failovers),
                             .silent = atomic_load(&m->st_silent)};
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
