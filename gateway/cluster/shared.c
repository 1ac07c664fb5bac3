/* cluster/shared.c — values other modules keep in Redis (cluster.h's "shared values"): a lock
 * with a token (SET NX PX; renewed and released only by its holder, through a script that
 * compares the token first), bounded values and hashes of records. Each call is one command
 * on the cluster's client, its failure counted and logged as the client's own calls are. */
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/alloc.h"
#include "common/err.h"

#define KEY_MAX 400
/* what a reply's framing takes beside its values: the type and length lines of a bulk string
 * ("$N\r\n" … "\r\n"), counted generously for an array of a few of them */
#define FRAMING 256

/* The token's compare-and-renew and compare-and-delete: a holder whose lock expired (and
 * another took it) must neither extend nor remove the other's. */
static const char RENEW_LUA[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then return "
                                "redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
static const char UNLOCK_LUA[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then return "
                                 "redis.call('DEL', KEYS[1]) else return 0 end";
static const char HSET_LUA[] = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                               "redis.call('PEXPIRE', KEYS[1], ARGV[3]) return 1";

typedef enum { K_LOCK, K_INT, K_OK, K_GET, K_HASH } kind_t;

typedef struct {
    gw_cluster_t *c;
    kind_t kind;
    const char *what; /* for the log */
    gw_cluster_done_cb done;
    gw_cluster_value_cb value;
    gw_cluster_hash_cb hash;
    void *ud;
} call_t;

static int full_key(const gw_cluster_t *c, const char *key, char *out)
{
    int n = snprintf(out, KEY_MAX + 64, "%s%s", gw_cluster__prefix(c), key);
    return n > 0 && n < KEY_MAX + 64 && strlen(key) <= KEY_MAX ? n : -1;
}

static void on_reply(void *ud, const redisReply *r, int err)
{
    call_t *k = ud;
    gw_cluster_t *c = k->c;
    int rv = 0;
    if (err == GW_E_CLOSED)
        rv = GW_E_CLOSED;
    else if (gw_cluster__outcome(c, r, err, k->what) < 0)
        rv = err == GW_E_TIMEOUT ? GW_E_TIMEOUT : GW_E_IO;
    if (rv == 0) {
        switch (k->kind) {
        case K_LOCK: /* OK when set, nil when another holds it */
            if (r->type == REDIS_REPLY_STATUS)
                rv = 1;
            else if (r->type != REDIS_REPLY_NIL)
                rv = GW_E_PARSE;
            break;
        case K_INT:
            rv = r->type == REDIS_REPLY_INTEGER ? (r->integer > 0) : GW_E_PARSE;
            break;
        case K_OK:
            rv = r->type == REDIS_REPLY_ERROR ? GW_E_IO : 0;
            break;
        case K_GET:
            if (r->type == REDIS_REPLY_STRING) {
                k->value(k->ud, 0, (const uint8_t *)r->str, r->len);
                gw_free(k);
                return;
            }
            rv = r->type == REDIS_REPLY_NIL ? 0 : GW_E_PARSE;
            if (rv == 0) {
                k->value(k->ud, 0, NULL, 0);
                gw_free(k);
                return;
            }
            break;
        case K_HASH: {
            /* RESP2: a flat array field, value, field, value… */
            if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
                rv = GW_E_PARSE;
                break;
            }
            size_t n = r->elements / 2;
            const uint8_t **f = gw_calloc(n + 1, sizeof(*f)), **v = gw_calloc(n + 1, sizeof(*v));
            size_t *fl = gw_calloc(n + 1, sizeof(*fl)), *vl = gw_calloc(n + 1, sizeof(*vl));
            if (!f || !v || !fl || !vl)
                rv = GW_E_NOMEM;
            for (size_t i = 0; rv == 0 && i < n; i++) {
                const redisReply *a = r->element[2 * i], *b = r->element[2 * i + 1];
                if (a->type != REDIS_REPLY_STRING || b->type != REDIS_REPLY_STRING) {
                    rv = GW_E_PARSE;
                    break;
                }
                f[i] = (const uint8_t *)a->str;
                fl[i] = a->len;
                v[i] = (const uint8_t *)b->str;
                vl[i] = b->len;
            }
            if (rv == 0)
                k->hash(k->ud, 0, n, f, fl, v, vl);
            gw_free(f);
            gw_free(v);
            gw_free(fl);
            gw_free(vl);
            if (rv == 0) {
                gw_free(k);
                return;
            }
            break;
        }
        }
    }
    if (k->done)
        k->done(k->ud, rv);
    else if (k->value)
        k->value(k->ud, rv, NULL, 0);
    else if (k->hash)
        k->hash(k->ud, rv, 0, NULL, NULL, NULL, NULL);
    gw_free(k);
}

static int send_call(gw_cluster_t *c, call_t *proto, int argc, const char **argv,
                     const size_t *lens)
{
    gw_redis_t *r = gw_cluster__redis(c);
    if (!r || !gw_redis_up(r))
        return GW_E_IO;
    call_t *k = gw_malloc(sizeof(*k));
    if (!k)
        return GW_E_NOMEM;
    *k = *proto;
    k->c = c;
    int rv = gw_redis_command(r, argc, argv, lens, on_reply, k);
    if (rv < 0)
        gw_free(k);
    return rv;
}

int gw_cluster_lock(gw_cluster_t *c, const char *key, const char *token, uint64_t ttl_ms,
                    gw_cluster_done_cb cb, void *user_data)
{
    char k[KEY_MAX + 64], px[24];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    snprintf(px, sizeof(px), "%llu", (unsigned long long)ttl_ms);
    const char *argv[] = {"SET", k, token, "NX", "PX", px};
    size_t lens[] = {3, (size_t)kl, strlen(token), 2, 2, strlen(px)};
    call_t p = {.kind = K_LOCK, .what = "SET NX lock", .done = cb, .ud = user_data};
    return send_call(c, &p, 6, argv, lens);
}

static int script(gw_cluster_t *c, const char *lua, size_t lua_len, const char *key, const char *a1,
                  size_t a1l, const char *a2, size_t a2l, const char *a3, call_t *p)
{
    char k[KEY_MAX + 64];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    const char *argv[] = {"EVAL", lua, "1", k, a1, a2, a3};
    size_t lens[] = {4, lua_len, 1, (size_t)kl, a1l, a2l, a3 ? strlen(a3) : 0};
    return send_call(c, p, a3 ? 7 : a2 ? 6 : 5, argv, lens);
}

int gw_cluster_lock_renew(gw_cluster_t *c, const char *key, const char *token, uint64_t ttl_ms,
                          gw_cluster_done_cb cb, void *user_data)
{
    char px[24];
    int pl = snprintf(px, sizeof(px), "%llu", (unsigned long long)ttl_ms);
    call_t p = {.kind = K_INT, .what = "EVAL lock renewal", .done = cb, .ud = user_data};
    return script(c, RENEW_LUA, sizeof(RENEW_LUA) - 1, key, token, strlen(token), px, (size_t)pl,
                  NULL, &p);
}

static void ignore_done(void *ud, int result)
{
    (void)ud;
    (void)result;
}

int gw_cluster_unlock(gw_cluster_t *c, const char *key, const char *token, gw_cluster_done_cb cb,
                      void *user_data)
{
    call_t p = {
        .kind = K_INT, .what = "EVAL lock release", .done = cb ? cb : ignore_done, .ud = user_data};
    return script(c, UNLOCK_LUA, sizeof(UNLOCK_LUA) - 1, key, token, strlen(token), NULL, 0, NULL,
                  &p);
}

size_t gw_cluster_max_value(const gw_cluster_t *c)
{
    size_t m = gw_cluster__max_reply(c);
    return m > FRAMING ? m - FRAMING : 0;
}

int gw_cluster_put(gw_cluster_t *c, const char *key, const uint8_t *v, size_t len, uint64_t ttl_ms,
                   gw_cluster_done_cb cb, void *user_data)
{
    if (len > gw_cluster_max_value(c))
        return GW_E_RANGE;
    char k[KEY_MAX + 64], px[24];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    snprintf(px, sizeof(px), "%llu", (unsigned long long)ttl_ms);
    const char *argv[] = {"SET", k, (const char *)v, "PX", px};
    size_t lens[] = {3, (size_t)kl, len, 2, strlen(px)};
    call_t p = {.kind = K_OK, .what = "SET value", .done = cb ? cb : ignore_done, .ud = user_data};
    return send_call(c, &p, ttl_ms ? 5 : 3, argv, lens);
}

int gw_cluster_get(gw_cluster_t *c, const char *key, gw_cluster_value_cb cb, void *user_data)
{
    char k[KEY_MAX + 64];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    const char *argv[] = {"GET", k};
    size_t lens[] = {3, (size_t)kl};
    call_t p = {.kind = K_GET, .what = "GET value", .value = cb, .ud = user_data};
    return send_call(c, &p, 2, argv, lens);
}

int gw_cluster_hset(gw_cluster_t *c, const char *key, const char *field, const uint8_t *v,
                    size_t len, uint64_t ttl_ms, gw_cluster_done_cb cb, void *user_data)
{
    if (len > gw_cluster_max_value(c))
        return GW_E_RANGE;
    char px[24];
    snprintf(px, sizeof(px), "%llu", (unsigned long long)ttl_ms);
    call_t p = {.kind = K_INT, .what = "EVAL HSET", .done = cb ? cb : ignore_done, .ud = user_data};
    return script(c, HSET_LUA, sizeof(HSET_LUA) - 1, key, field, strlen(field), (const char *)v,
                  len, px, &p);
}

int gw_cluster_hgetall(gw_cluster_t *c, const char *key, gw_cluster_hash_cb cb, void *user_data)
{
    char k[KEY_MAX + 64];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    const char *argv[] = {"HGETALL", k};
    size_t lens[] = {7, (size_t)kl};
    call_t p = {.kind = K_HASH, .what = "HGETALL", .hash = cb, .ud = user_data};
    return send_call(c, &p, 2, argv, lens);
}

int gw_cluster_del(gw_cluster_t *c, const char *key, gw_cluster_done_cb cb, void *user_data)
{
    char k[KEY_MAX + 64];
    int kl = full_key(c, key, k);
    if (kl < 0)
        return GW_E_RANGE;
    const char *argv[] = {"DEL", k};
    size_t lens[] = {3, (size_t)kl};
    call_t p = {.kind = K_OK, .what = "DEL", .done = cb ? cb : ignore_done, .ud = user_data};
    return send_call(c, &p, 2, argv, lens);
}
