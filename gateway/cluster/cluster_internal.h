/* cluster/cluster_internal.h — what the files of cluster/ share (not a public interface).
 *
 * redis.c:   the asynchronous Redis client (redis.h).
 * tickets.c: the shared ticket keys as stored in Redis (sans-IO): the value's layout, when
 *            they are due for rotation, and the next set.
 * cluster.c: the client's life; the poll loop on the main thread's loop that keeps the
 *            keyring equal to Redis, rotates under a lock, and reports when Redis fails; the
 *            primary (with sentinels: checked with ROLE, followed).
 * limits.c:  the shared rate decisions (one GCRA script call per key and loop turn) and the
 *            bandwidth leases, and their scripts.
 * heartbeat.c: how many instances are alive (the share of a limit decided alone), carried
 *            over a reload.
 * rates.c:   the questions' way from workers to the main loop (the hub) and the answers' way
 *            back (one sink per worker), across threads.
 * shared.c:  what other modules keep in Redis through the client (cluster.h's "shared
 *            values"): locks with a token, bounded values, hashes of records.
 * replies.c: what Redis answers, checked before use (sans-IO): the scripts' numbers bounded,
 *            a script's SHA1, a peer's text made safe for a log line, a sentinel's addresses.
 * sentinel.c: which Redis is the primary, asked of Redis Sentinel (cluster.sentinels), and
 *            the subscription to its switches, kept alive.
 */
#ifndef GW_CLUSTER_INTERNAL_H
#define GW_CLUSTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "tls/tls.h"

/* The value of KEY_PREFIX "tls:ticket-keys": "h2gk", version 1, n (1..GW_TLS_KEYRING_MAX),
 * the encrypting key's birth (Unix ms, 8 bytes big-endian), then n keys of GW_TLS_KEY_LEN
 * bytes, the encrypting one first. Written whole with SET, so readers never see half. */
#define GW_CLUSTER_KEYS_MAGIC "h2gk"
#define GW_CLUSTER_KEYS_HEAD 14
#define GW_CLUSTER_KEYS_MAX_LEN (GW_CLUSTER_KEYS_HEAD + GW_TLS_KEYRING_MAX * GW_TLS_KEY_LEN)
/* keys kept after a rotation: the new one and the one it replaces (tickets issued under the
 * replaced key resume for one more rotation period, then need a full handshake) */
#define GW_CLUSTER_KEYS_KEPT 2

typedef struct {
    uint64_t born_ms; /* when keys[0] began to encrypt */
    size_t n;
    uint8_t keys[GW_TLS_KEYRING_MAX * GW_TLS_KEY_LEN];
} gw_cluster_keys_t;

/* 0, or GW_E_PARSE when p[0..len) is not a value of the layout above. */
int gw_cluster__keys_parse(const uint8_t *p, size_t len, gw_cluster_keys_t *out);
/* The value of k into out (GW_CLUSTER_KEYS_MAX_LEN bytes): its length. */
size_t gw_cluster__keys_write(const gw_cluster_keys_t *k, uint8_t *out);
/* A key born more than this far in our future is not another instance's clock running ahead
 * but a wrong clock or a bad value: it is replaced, or no key would rotate until that date. */
#define GW_CLUSTER_KEYS_FUTURE_MS (24ull * 3600 * 1000)
/* Whether cur (NULL: Redis holds none, or nothing valid) must be replaced at now_ms: no keys,
 * the encrypting one rotation_ms old or more, or born more than GW_CLUSTER_KEYS_FUTURE_MS
 * ahead. A key born a little in the future (another instance's clock is ahead) is not due. */
int gw_cluster__keys_due(const gw_cluster_keys_t *cur, uint64_t now_ms, uint64_t rotation_ms);
/* The set after cur (NULL: none): fresh encrypts from now_ms, cur's encrypting key is kept to
 * decrypt (GW_CLUSTER_KEYS_KEPT in all). */
void gw_cluster__keys_rotate(const gw_cluster_keys_t *cur, const uint8_t fresh[GW_TLS_KEY_LEN],
                             uint64_t now_ms, gw_cluster_keys_t *next);

/* One worker's question (gw_cluster_hub_ask), queued on the hub, then decided on the main
 * loop. */
#define GW_CLUSTER_RATE_KEY_MAX 200
typedef struct gw_rate_q {
    struct gw_rate_q *next;
    gw_cluster_sink_t *sink;
    uint64_t token, rate, burst;
    int lease; /* a bandwidth lease of want bytes, not a request-rate question */
    uint64_t want;
    size_t klen;
    uint8_t key[GW_CLUSTER_RATE_KEY_MAX];
} gw_rate_q_t;

/* ---- replies.c: Redis's answers, checked ---- */

/* The most instances a heartbeat count may say are alive: a larger count (or one below 1,
 * which cannot be: the instance that asked is one) is not Redis's answer to our script. */
#define GW_CLUSTER_INSTANCES_MAX 4096u

/* The longest Retry-After a shared refusal gives (1 day), whatever Redis says. */
#define GW_CLUSTER_RETRY_MAX_S 86400u
/* SCRIPT LOAD's answer: the script's SHA1 in lowercase hex. */
#define GW_CLUSTER_SHA_LEN 40

/* The rate script's {ok, retry_us} for n questions: *allowed = ok and *retry_s its retry in
 * whole seconds, rounded up, 1..GW_CLUSTER_RETRY_MAX_S. 0, or GW_E_PARSE when ok is not in
 * 0..n (the questions are then decided locally). */
int gw_cluster__rate_reply(long long ok, long long retry_us, uint64_t n, uint64_t *allowed,
                           unsigned *retry_s);
/* The lease script's grant for want bytes in all: 0 and *out, or GW_E_PARSE when it is not in
 * 0..want. */
int gw_cluster__lease_reply(long long granted, uint64_t want, uint64_t *out);
/* The longest host a sentinel may name (a DNS name's 253, with room). */
#define GW_CLUSTER_HOST_MAX 255

/* A sentinel's answer to get-master-addr-by-name: host (1..GW_CLUSTER_HOST_MAX bytes of
 * letters, digits and . - : _ %) into out_host (NUL-ended) and port (decimal, 1..65535) into
 * *out_port: 0, or GW_E_PARSE. */
int gw_cluster__primary_addr(const char *host, size_t hl, const char *port, size_t pl,
                             char out_host[GW_CLUSTER_HOST_MAX + 1], unsigned *out_port);
/* A +switch-master message, "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT", for master: the old and
 * new addresses as HOST:PORT ([HOST]:PORT for IPv6) into from and to (cap bytes each, at least
 * GW_CLUSTER_HOST_MAX + 8). 0, or GW_E_PARSE (another master's, or malformed). */
int gw_cluster__switch_msg(const char *msg, size_t len, const char *master, char *from, size_t fcap,
                           char *to, size_t tcap);

/* The heartbeat script's count of instances alive (the asker included): 0 and *out, or
 * GW_E_PARSE when it is not in 1..GW_CLUSTER_INSTANCES_MAX. */
int gw_cluster__alive_reply(long long n, unsigned *out);
/* Whether s[0..len) is a script SHA1 as SCRIPT LOAD answers it. */
int gw_cluster__sha_ok(const char *s, size_t len);
/* src[0..len) (a Redis error or status line; NULL is empty) into dst (cap bytes, NUL-ended,
 * cut to fit): printable ASCII kept, anything else and '"' and '\' as '?', so that a peer's
 * text cannot end a log value or add a line. */
void gw_cluster__log_text(char *dst, size_t cap, const char *src, size_t len);

/* ---- sentinel.c: the primary, as Redis Sentinel names it ---- */

typedef struct gw_sentinel gw_sentinel_t;
/* Called from the sentinel's own timer (never inside a callback of one of its connections). */
typedef struct {
    /* A sentinel (from, HOST:PORT) named host:port the primary, the greatest config-epoch
     * of those not refused yet in this round: the caller checks it and says gw_sentinel_ok
     * or gw_sentinel_refused. */
    void (*on_primary)(void *ud, const char *host, unsigned port, const char *from);
    /* Every sentinel failed (why: the last failure); another round follows after a backoff. */
    void (*on_none)(void *ud, const char *why);
    /* +switch-master for our master (from, to: HOST:PORT); a round follows at once. */
    void (*on_switch)(void *ud, const char *from, const char *to);
    void *ud;
} gw_sentinel_cbs_t;
/* The sentinels of cfg (cfg->sentinels, master, sentinel_password, timeout, connect_timeout,
 * max_reply, copied), idle until gw_sentinel_ask. 0 or GW_E_NOMEM. */
int gw_sentinel_new(uv_loop_t *loop, const gw_cfg_cluster_t *cfg, const gw_sentinel_cbs_t *cb,
                    gw_sentinel_t **out);
/* Ask for the primary, unless a round is under way (or waits for its backoff). */
void gw_sentinel_ask(gw_sentinel_t *s);
/* The caller took the primary last named: the round is over. */
void gw_sentinel_ok(gw_sentinel_t *s);
/* The caller refused it (why: for the log): the next sentinel is asked. */
void gw_sentinel_refused(gw_sentinel_t *s, const char *why);
/* Close every connection (their callbacks run now); the memory goes once the loop has run. */
void gw_sentinel_close(gw_sentinel_t *s);

/* cluster.c: how often an idle connection to Redis (the primary's, the subscription to a
 * sentinel) is sent PING: cluster.ping_interval, or by default poll_interval, at most
 * GW_CLUSTER_PING_MAX_MS. One silent for this + timeout is dropped. */
#define GW_CLUSTER_PING_MAX_MS 1000
uint64_t gw_cluster__ping_ms(const gw_cfg_cluster_t *cfg);

/* cluster.c: decide the questions of one loop turn (a list linked by next); each is answered
 * (gw_cluster__answer) now or when Redis replies. */
void gw_cluster__rates(gw_cluster_t *c, gw_rate_q_t *list);
/* cluster.c: c's share goes to h from now on (NULL: c is no longer the hub's). Main thread. */
void gw_cluster__set_hub(gw_cluster_t *c, gw_cluster_hub_t *h);
/* rates.c: what gw_cluster_hub_share answers from now on (0 counts as 1). */
void gw_cluster__hub_share(gw_cluster_hub_t *h, unsigned share);
/* rates.c: send q's answer to its sink and free q. */
void gw_cluster__answer(gw_rate_q_t *q, gw_rate_verdict_t v, unsigned retry_after_s);
/* rates.c: send the answer to q's lease (granted bytes; local: Redis could not answer). */
void gw_cluster__grant(gw_rate_q_t *q, uint64_t granted, int local);

/* ---- cluster.c's client, for limits.c, heartbeat.c and shared.c ---- */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
struct gw_redis;

/* The heartbeat: every GW_CLUSTER_BEAT_MS (or poll_interval, when shorter) an instance puts itself
 * in the sorted set PREFIX "instances" with the score Redis's now + GW_CLUSTER_ALIVE_MS, drops the
 * members whose score has passed and reads how many are left. One key and one call whatever the
 * keyspace holds (a SCAN for per-instance keys would walk every rate key too), and the scores are
 * Redis's clock, so instances' clocks do not matter. An instance that stops counts for
 * GW_CLUSTER_ALIVE_MS more. */
#define GW_CLUSTER_BEAT_MS 1000
#define GW_CLUSTER_ALIVE_MS 3000

struct gw_cluster {
    uv_loop_t *loop;
    gw_tls_keyring_t *ring;
    struct gw_redis *redis;
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
    char from[64];   /* the sentinel that named the current one */
    int verified;    /* the connection is to the primary (ROLE said so; cluster.redis: up) */
    uv_timer_t kick; /* lets the connection go outside its own callbacks, then asks again */
    int kick_act;    /* KICK_* */
    struct gw_redis *kick_redis; /* the connection the kick is about (another one: stale) */
    char kick_why[200];
    pthread_mutex_t mu; /* primary, read by scrapes */
    char primary[GW_CLUSTER_ADDR_MAX];
    atomic_ullong st_failovers;
    unsigned db;
    uint64_t timeout_ms, connect_timeout_ms, poll_interval_ms, rotation_ms;
    uint64_t ping_cfg_ms; /* cluster.ping_interval as configured (0: the default) */
    uint64_t ping_ms;     /* the keepalive of the primary's connection (gw_cluster__ping_ms) */
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
    atomic_ullong st_silent; /* connections to the primary dropped as silent */
    atomic_uint st_instances;
    atomic_ullong st_local_ms;    /* time in local mode, spells that ended */
    atomic_ullong st_local_since; /* when the current spell began (monotonic ms); 0: up */
};

/* cluster.c: what the hub tells the workers (1 while Redis decides, else the instances last
 * seen alive); the local mode begun, with why (logged once per outage); a reply of the right
 * type whose value cannot be Redis's, counted and logged. */
void gw_cluster__share_update(gw_cluster_t *c);
void gw_cluster__degrade(gw_cluster_t *c, const char *why);
void gw_cluster__bad_reply(gw_cluster_t *c, const char *what, const char *why);
/* limits.c: SCRIPT LOAD the rate and lease scripts (on each primary, and after NOSCRIPT). */
void gw_cluster__load_scripts(gw_cluster_t *c);
/* heartbeat.c: this instance's name in the heartbeat set (at the start); one heartbeat now,
 * unless one is under way or Redis is not there (also the beat timer's callback). */
void gw_cluster__make_id(gw_cluster_t *c);
void gw_cluster__on_beat(uv_timer_t *t);

/* A call's outcome counted and logged as the client's own (degraded/recovered): 0 when it
 * answered, -1 when it failed (an error reply included). */
int gw_cluster__outcome(gw_cluster_t *c, const redisReply *r, int err, const char *what);
struct gw_redis *gw_cluster__redis(gw_cluster_t *c);
const char *gw_cluster__prefix(const gw_cluster_t *c);
size_t gw_cluster__max_reply(const gw_cluster_t *c);

#endif
