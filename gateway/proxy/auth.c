/* proxy/auth.c — a route's basic_auth (RFC 7617): the Authorization field read strictly, the
 * password checked against the users file's hash off the event loop, what was checked
 * remembered for a short while, and a client that keeps failing slowed down.
 *
 * The way of one request (gw_proxy__auth, from the request policy in request.c):
 *  - more than one Authorization field: 400 (RFC 9110 §11.6.2 gives one set of credentials;
 *    which one would count is ambiguous, so neither does);
 *  - none, another scheme, or malformed credentials: 401 with the challenge, nothing verified;
 *  - credentials verified on this worker within cache_ttl (the cache below): on at once;
 *  - the client's failed verifications over the last minute reached max_failures: 429 with
 *    Retry-After, nothing verified;
 *  - the same credentials (the cache key) already being checked on this worker: the stream
 *    waits for that verification instead of queuing its own (single flight), at most
 *    basic_auth.max_waiting streams per verification;
 *  - otherwise crypt_r runs on libuv's thread pool (bcrypt costs milliseconds: never on the
 *    loop), at most max_verifying verifications (distinct credentials) per route, beyond: 503.
 *    The stream waits with its px_t, holding (not crediting) request body bytes; the answer
 *    continues the policy (gw_proxy__auth_passed) and replays the held body, or gives a 401,
 *    to every stream that waits for it; a wrong password counts one failure per waiting
 *    stream, for its own client address. An unknown user is checked against another user's
 *    hash, so that a wrong name costs the same time as a wrong password.
 *
 * Who owns what while a verification is queued: the job (auth_job_t) owns its copies of the
 * hash and the password, and its waiters (auth_wait_t: one per stream, with the stream's
 * client address and held body). A stream may close (gw_proxy__auth_detach clears its
 * waiter's px and frees its held body; the waiter stays on the job, so that its failure is
 * still counted) and the proxy may close (gw_proxy__auth_close clears job->p of every job and
 * the px of every waiter): the after-work callback then finds them gone and only frees the
 * job and its waiters. The loop keeps running until every queued work request has come back
 * (libuv counts them as active), so the job itself is never lost.
 *
 * The cache: per worker and configuration generation (a reload starts empty), per route a
 * table of cache_entries slots in sets of 4, keyed by a SHA-256 of (route, user, password)
 * under a random secret of the proxy's (cred_key): the password itself is never kept. A slot holds
 * until cache_ttl; a full set replaces its oldest slot. */
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

#define WAYS 4
#define KEY_LEN 32
/* Failures are counted in the request-rate table the workers share (gw_proxy_set_rate_table:
 * per client address across workers, kept over a reload), under a tag of their own per route;
 * a proxy given none (unit tests) keeps a table of FAIL_CLIENTS addresses. Full of clients
 * still in debt, a table refuses a new one: 429 (it fails closed). */
#define FAIL_TAG 0x80000000u
#define FAIL_CLIENTS 4096
/* Failures are counted in tokens: one failure is 60, the bucket refills max_failures a second,
 * so max_failures failures a minute (the bucket's rate is whole tokens per second). */
#define FAIL_COST 60

typedef struct {
    uint8_t key[KEY_LEN];
    uint64_t until_ms; /* loop time it holds until; 0: empty */
    const gw_cfg_htuser_t *user;
} slot_t;

typedef struct {
    slot_t *slots; /* nsets * WAYS */
    size_t nsets;
    unsigned pending; /* verifications queued for the route (basic_auth.max_verifying) */
} cache_t;

struct gw_proxy_auth {
    EVP_MD_CTX *base; /* SHA-256 with the proxy's random secret absorbed (cred_key) */
    EVP_MD_CTX *work;
    cache_t *caches;        /* per route (index in cfg->routes); empty without basic_auth */
    gw_bucket_table_t *own; /* failures per client address without a shared table */
    gw_list_t jobs;         /* auth_job_t queued on the thread pool */
};

/* One verification on the thread pool, and the streams that wait for its answer: the first
 * one queued it, later ones with the same key joined it (single flight: see the top). */
struct gw_auth_job {
    uv_work_t req;
    gw_proxy_t *p;               /* NULL once the proxy closed */
    gw_list_t link;              /* in auth->jobs while queued or running */
    gw_list_t waiters;           /* auth_wait_t */
    unsigned nwaiters;           /* on waiters, gone ones too (at most basic_auth.max_waiting) */
    size_t route;                /* index in the configuration */
    const gw_cfg_htuser_t *user; /* the user, NULL: unknown (checked against a stand-in) */
    uint8_t key[KEY_LEN];
    char *hash, *pass; /* copies (the thread pool reads them; the password is wiped) */
    size_t pass_len;
    int ok;
    unsigned keyed : 1; /* key was made (cred_key): the cache may take it, others may join */
};
typedef struct gw_auth_job auth_job_t;

/* A stream waiting for a job. It stays on the job's list after its stream closed (px NULL):
 * its failure is still counted for its client address when the answer comes. */
struct gw_auth_wait {
    px_t *px;                     /* NULL once the stream closed */
    gw_list_t link;               /* in job->waiters */
    struct sockaddr_storage addr; /* the client's (its failures are counted after it left) */
    /* request body bytes that came meanwhile (not credited), its end and trailers */
    uint8_t *body;
    size_t body_len, body_cap;
    gw_field_t *tr;
    size_t ntr;
    unsigned ended : 1;
};
typedef struct gw_auth_wait auth_wait_t;

/* ---- the Authorization field ---------------------------------------------------------------- */

static int b64val(uint8_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* base64 (RFC 4648 §4) with its padding, canonical (no stray bits), into out[0..cap). The
 * length decoded, or -1. */
static long b64_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    if (n == 0 || n % 4)
        return -1;
    size_t pad = in[n - 1] == '=' ? (in[n - 2] == '=' ? 2 : 1) : 0;
    size_t len = n / 4 * 3 - pad;
    if (len > cap)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            int last = i + 4 == n;
            if (last && in[i + j] == '=' && j >= 4 - (int)pad) {
                v[j] = 0;
                continue;
            }
            if ((v[j] = b64val(in[i + j])) < 0)
                return -1;
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if (i + 4 == n && ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff))))
            return -1; /* bits after the last byte must be zero (RFC 4648 §3.5) */
        uint8_t b[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
        for (int j = 0; j < 3 && o < len; j++)
            out[o++] = b[j];
    }
    return (long)o;
}

int gw_proxy__basic_credentials(gw_slice_t v, uint8_t *out, size_t cap, size_t *ulen, size_t *plen)
{
    /* RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]; the scheme
     * is case-insensitive (§11.1) */
    static const char scheme[] = "basic";
    size_t sl = sizeof(scheme) - 1;
    if (v.len <= sl + 1 || !gw_slice_eq_nocase((gw_slice_t){v.base, sl}, GW_SLICE_LIT("basic")) ||
        v.base[sl] != ' ')
        return GW_E_PARSE;
    size_t i = sl;
    while (i < v.len && v.base[i] == ' ')
        i++;
    /* token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" (§11.2); Basic's
     * is base64 (RFC 7617 §2), which the decoder checks strictly */
    long n = b64_decode(v.base + i, v.len - i, out, cap);
    if (n < 0)
        return GW_E_PARSE;
    /* user-pass = user-id ":" password; the user-id has no ':'; neither has a control
     * character (RFC 7617 §2) */
    uint8_t *colon = memchr(out, ':', (size_t)n);
    if (!colon)
        return GW_E_PARSE;
    for (long j = 0; j < n; j++)
        if (out[j] < 0x20 || out[j] == 0x7f)
            return GW_E_PARSE;
    *ulen = (size_t)(colon - out);
    *plen = (size_t)n - *ulen - 1;
    return 0;
}

/* ---- the proxy's state ---------------------------------------------------------------------- */

int gw_proxy__auth_new(gw_proxy_t *p)
{
    const gw_config_t *cfg = p->cfg;
    size_t i;
    for (i = 0; i < cfg->routes_len && !cfg->routes[i].basic_auth; i++)
        ;
    if (i == cfg->routes_len)
        return 0; /* no route asks for it */
    struct gw_proxy_auth *a = gw_calloc(1, sizeof(*a));
    if (!a)
        return GW_E_NOMEM;
    gw_list_init(&a->jobs);
    p->auth = a;
    uint8_t secret[64]; /* one SHA-256 block */
    EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
    a->base = EVP_MD_CTX_new();
    a->work = EVP_MD_CTX_new();
    int ok = md && a->base && a->work && RAND_bytes(secret, sizeof(secret)) == 1 &&
             EVP_DigestInit_ex(a->base, md, NULL) == 1 &&
             EVP_DigestUpdate(a->base, secret, sizeof(secret)) == 1;
    OPENSSL_cleanse(secret, sizeof(secret));
    EVP_MD_free(md); /* the contexts hold their own reference */
    if (!ok)
        return GW_E_IO;
    if (!(a->caches = gw_calloc(cfg->routes_len, sizeof(*a->caches))))
        return GW_E_NOMEM;
    for (i = 0; i < cfg->routes_len; i++) {
        const gw_cfg_basic_auth_t *ba = cfg->routes[i].basic_auth;
        if (!ba || !ba->cache_entries || !ba->cache_ttl_ms)
            continue;
        cache_t *c = &a->caches[i];
        c->nsets = (ba->cache_entries + WAYS - 1) / WAYS;
        if (!(c->slots = gw_calloc(c->nsets * WAYS, sizeof(*c->slots))))
            return GW_E_NOMEM;
    }
    return 0;
}

/* The table of failures: the shared one, or the proxy's own (made at first use). */
static gw_bucket_table_t *fail_table(gw_proxy_t *p)
{
    if (p->rates)
        return p->rates;
    if (!p->auth->own) {
        unsigned prefix = p->cfg->throttle.ipv6_prefix ? p->cfg->throttle.ipv6_prefix : 64;
        if (gw_bucket_table_new(FAIL_CLIENTS, prefix, &p->auth->own) < 0)
            p->auth->own = NULL;
    }
    return p->auth->own;
}

void gw_proxy__auth_close(gw_proxy_t *p)
{
    if (!p->auth)
        return;
    /* queued verifications come back later, to nobody: they free themselves and their
     * waiters */
    gw_list_foreach_safe(it, tmp, &p->auth->jobs)
    {
        auth_job_t *j = GW_CONTAINER_OF(it, auth_job_t, link);
        gw_list_remove(&j->link);
        gw_list_init(&j->link);
        j->p = NULL;
        gw_list_foreach(wt, &j->waiters)
        {
            auth_wait_t *w = GW_CONTAINER_OF(wt, auth_wait_t, link);
            if (w->px) {
                w->px->x->auth = NULL;
                w->px = NULL;
            }
        }
    }
}

void gw_proxy__auth_free(gw_proxy_t *p)
{
    struct gw_proxy_auth *a = p->auth;
    if (!a)
        return;
    gw_proxy__auth_close(p);
    if (a->caches)
        for (size_t i = 0; i < p->cfg->routes_len; i++)
            gw_free(a->caches[i].slots);
    gw_free(a->caches);
    gw_bucket_table_del(a->own);
    EVP_MD_CTX_free(a->base);
    EVP_MD_CTX_free(a->work);
    gw_free(a);
    p->auth = NULL;
}

/* ---- the cache ------------------------------------------------------------------------------ */

/* The cache key of (route, user, password): SHA-256 of the proxy's random secret (one block,
 * absorbed once into a->base) followed by the route, the user's length, the user and the
 * password. The key never leaves the process, so a plain prefix-keyed hash serves (length
 * extension gives nothing to someone who never sees a key); HMAC() cost 7 us a call where this
 * costs 0.6 us. */
static int cred_key(struct gw_proxy_auth *a, size_t route, const uint8_t *user, size_t ul,
                    const uint8_t *pass, size_t pl, uint8_t key[KEY_LEN])
{
    uint32_t hdr[2] = {(uint32_t)route, (uint32_t)ul}; /* no two (user, password) splits meet */
    unsigned kl = KEY_LEN;
    if (EVP_MD_CTX_copy_ex(a->work, a->base) != 1 || EVP_DigestUpdate(a->work, hdr, 8) != 1 ||
        EVP_DigestUpdate(a->work, user, ul) != 1 || EVP_DigestUpdate(a->work, pass, pl) != 1 ||
        EVP_DigestFinal_ex(a->work, key, &kl) != 1)
        return GW_E_NOMEM; /* no key: the cache is neither asked nor filled */
    return 0;
}

static slot_t *cache_set(cache_t *c, const uint8_t key[KEY_LEN])
{
    uint64_t h;
    memcpy(&h, key, sizeof(h));
    return &c->slots[(h % c->nsets) * WAYS];
}

static const gw_cfg_htuser_t *cache_find(cache_t *c, const uint8_t key[KEY_LEN], uint64_t now)
{
    if (!c->slots)
        return NULL;
    slot_t *s = cache_set(c, key);
    for (int i = 0; i < WAYS; i++)
        if (s[i].until_ms > now && CRYPTO_memcmp(s[i].key, key, KEY_LEN) == 0)
            return s[i].user;
    return NULL;
}

static void cache_put(cache_t *c, const uint8_t key[KEY_LEN], const gw_cfg_htuser_t *user,
                      uint64_t now, uint64_t ttl)
{
    if (!c->slots)
        return;
    slot_t *s = cache_set(c, key), *v = &s[0];
    for (int i = 0; i < WAYS; i++) {
        if (s[i].until_ms > now && !memcmp(s[i].key, key, KEY_LEN)) {
            v = &s[i]; /* verified again (two streams at once): refreshed */
            break;
        }
        if (s[i].until_ms < v->until_ms)
            v = &s[i]; /* empty, expired, or the oldest: every slot has the same TTL */
    }
    memcpy(v->key, key, KEY_LEN);
    v->until_ms = now + ttl;
    v->user = user;
}

/* ---- answers -------------------------------------------------------------------------------- */

static void log_auth(gw_cstream_t *s, gw_alog_auth_t how, const gw_cfg_htuser_t *u)
{
    if (!s->log)
        return;
    s->log->auth = (uint8_t)how;
    if (u)
        s->log->user = u->user;
}

/* 401 with the challenge (RFC 7617 §2; charset §2.1: user-ids and passwords are UTF-8). */
static int answer_401(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                      const char *why)
{
    char ch[300];
    snprintf(ch, sizeof(ch), "Basic realm=\"%s\", charset=\"UTF-8\"", r->basic_auth->realm);
    const gw_field_t f[] = {{GW_SLICE_LIT("www-authenticate"), gw_slice_str(ch)}};
    GW_LOG_INFO("auth_refused", "peer=%s route=%s reason=%s status=401", s->peer, r->name, why);
    return gw_proxy__answer_text(s, h, 401, "h2gate: authentication required\n", f, 1);
}

/* The client's failure bucket on route idx in *t, or NULL (no limit, or a client that is not
 * IP); *refused: the table is full of clients still in debt (fail closed). */
static gw_bucket_entry_t *fail_entry(gw_proxy_t *p, const gw_cfg_route_t *r, size_t idx,
                                     const struct sockaddr *sa, uint64_t now_us,
                                     gw_bucket_table_t **t, int *refused)
{
    *refused = 0;
    if (!r->basic_auth->max_failures || !gw_bucket_table_keyed(sa))
        return NULL;
    if (!(*t = fail_table(p))) {
        *refused = 1;
        return NULL;
    }
    uint64_t rate = r->basic_auth->max_failures;
    gw_bucket_entry_t *e =
        gw_bucket_table_acquire(*t, sa, FAIL_TAG | (unsigned)idx, rate, rate * FAIL_COST, now_us);
    *refused = e == NULL;
    return e;
}

/* 0 when the client may have a password verified; else its 429 was answered (*rv). */
static int limited(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                   size_t idx, int *rv)
{
    uint64_t now = gw_now_ns() / 1000, wait = 0;
    int refused;
    gw_bucket_table_t *t = NULL;
    gw_bucket_entry_t *e = fail_entry(p, r, idx, s->addr, now, &t, &refused);
    if (!e && !refused)
        return 0;
    if (e) {
        if (gw_bucket_table_avail(t, e, now) >= FAIL_COST) {
            gw_bucket_table_release(t, e);
            return 0;
        }
        wait = gw_bucket_table_wait_us(t, e, FAIL_COST, now);
        gw_bucket_table_release(t, e);
    }
    unsigned retry = (unsigned)((wait + 999999) / 1000000);
    char ra[16];
    snprintf(ra, sizeof(ra), "%u", retry ? retry : 1);
    const gw_field_t f[] = {{GW_SLICE_LIT("retry-after"), gw_slice_str(ra)}};
    log_auth(s, GW_ALOG_AUTH_LIMITED, NULL);
    GW_LOG_INFO("auth_limited", "peer=%s route=%s status=429 retry_after=%s", s->peer, r->name, ra);
    *rv = gw_proxy__answer_text(s, h, 429, "h2gate: too many failed logins, slow down\n", f, 1);
    return 1;
}

static void failed(gw_proxy_t *p, const gw_cfg_route_t *r, size_t idx, const struct sockaddr *sa)
{
    uint64_t now = gw_now_ns() / 1000;
    int refused;
    gw_bucket_table_t *t = NULL;
    gw_bucket_entry_t *e = fail_entry(p, r, idx, sa, now, &t, &refused);
    if (!e)
        return;
    gw_bucket_table_spend(t, e, FAIL_COST, now);
    gw_bucket_table_release(t, e);
}

/* ---- verification on the thread pool -------------------------------------------------------- */

static void wait_free(auth_wait_t *w)
{
    gw_free(w->body);
    gw_free(w->tr);
    gw_free(w);
}

/* The job and every waiter still on it. */
static void job_free(auth_job_t *j)
{
    gw_list_t *it;
    while ((it = gw_list_pop_front(&j->waiters)))
        wait_free(GW_CONTAINER_OF(it, auth_wait_t, link));
    if (j->pass) {
        OPENSSL_cleanse(j->pass, j->pass_len);
        gw_free(j->pass);
    }
    gw_free(j->hash);
    gw_free(j);
}

/* On a thread of the pool: only the job's own copies are read. libc's calloc, not gw_calloc:
 * the failing-allocation hooks of the tests are the loop thread's. */
static void on_work(uv_work_t *req)
{
    auth_job_t *j = GW_CONTAINER_OF(req, auth_job_t, req);
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd)
        return; /* j->ok stays 0: refused, never let in */
    const char *out = crypt_r(j->pass, j->hash, cd);
    size_t hl = strlen(j->hash);
    j->ok = out && out[0] != '*' && strlen(out) == hl && CRYPTO_memcmp(out, j->hash, hl) == 0;
    OPENSSL_cleanse(cd, sizeof(*cd));
    free(cd);
}

/* The answer for one stream still waiting (w->px set), ok or not. */
static void answer_waiter(gw_proxy_t *p, const gw_cfg_route_t *r, auth_job_t *j, auth_wait_t *w,
                          int ok, gw_alog_auth_t how)
{
    px_t *px = w->px;
    px->x->auth = NULL;
    w->px = NULL;
    gw_cstream_t *s = px->s;
    if (px->resp != PX_RESP_NONE || px->reset) {
        /* answered meanwhile (timeouts.request_body): the held bytes are not wanted */
        if (w->body_len)
            s->ops->credit(s, w->body_len);
        return;
    }
    if (!ok) {
        log_auth(s, GW_ALOG_AUTH_FAILED, NULL);
        px->resp = PX_RESP_DONE;
        int rv = answer_401(s, &px->head, r, j->user ? "password" : "user");
        if (w->body_len)
            s->ops->credit(s, w->body_len); /* dropped, as any body of an early answer */
        if (rv < 0)
            gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
        return;
    }
    log_auth(s, how, j->user);
    int rv = gw_proxy__auth_passed(px);
    if (rv < 0 && !px->closed) {
        if (w->body_len)
            s->ops->credit(s, w->body_len);
        gw_proxy__fail(px, rv);
    } else {
        /* the body that came meanwhile goes on as if it came now (credited as it is written) */
        if (w->body_len)
            gw_proxy_body(p, s, w->body, w->body_len);
        if (w->ended)
            gw_proxy_body_end(p, s, w->tr, w->ntr);
    }
}

static void on_after_work(uv_work_t *req, int status)
{
    auth_job_t *j = GW_CONTAINER_OF(req, auth_job_t, req);
    gw_proxy_t *p = j->p;
    if (!p) { /* the proxy closed meanwhile (and so did every stream of it) */
        GW_LOG_DEBUG("auth_gone", "proxy=closed ok=%d", j->ok);
        job_free(j);
        return;
    }
    gw_list_remove(&j->link); /* no one joins it any more */
    p->auth->caches[j->route].pending--;
    const gw_cfg_route_t *r = &p->cfg->routes[j->route];
    int ok = status == 0 && j->ok && j->user;
    if (ok && j->keyed)
        cache_put(&p->auth->caches[j->route], j->key, j->user, uv_now(p->loop),
                  r->basic_auth->cache_ttl_ms);
    /* One waiter at a time off the list: answering one may close others (a connection that
     * fails), which only clears their px while they stay on the list; j->p is cleared if the
     * proxy closes meanwhile. */
    gw_alog_auth_t how = GW_ALOG_AUTH_VERIFIED; /* the first let in; the others: cached */
    gw_list_t *it;
    while ((it = gw_list_pop_front(&j->waiters))) {
        auth_wait_t *w = GW_CONTAINER_OF(it, auth_wait_t, link);
        if (j->p) {
            if (!ok) /* counted per client, also when it left: a reset escapes nothing */
                failed(p, r, j->route, (const struct sockaddr *)&w->addr);
            if (!w->px) /* the stream closed while it waited */
                GW_LOG_DEBUG("auth_gone", "route=%s ok=%d", r->name, ok);
            else {
                answer_waiter(p, r, j, w, ok, how);
                how = GW_ALOG_AUTH_CACHED;
            }
        }
        wait_free(w);
    }
    job_free(j);
}

/* A job of route idx queued or running with this key, or NULL. */
static auth_job_t *job_find(struct gw_proxy_auth *a, size_t idx, const uint8_t key[KEY_LEN])
{
    gw_list_foreach(it, &a->jobs)
    {
        auth_job_t *j = GW_CONTAINER_OF(it, auth_job_t, link);
        if (j->keyed && j->route == idx && CRYPTO_memcmp(j->key, key, KEY_LEN) == 0)
            return j;
    }
    return NULL;
}

static int answer_busy(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h,
                       const gw_cfg_route_t *r, size_t idx, unsigned waiters)
{
    /* the thread pool is a shared, bounded resource: what would queue behind this many
     * waits as a 503 instead (RFC 9110 §15.6.4) */
    const gw_field_t f[] = {{GW_SLICE_LIT("retry-after"), GW_SLICE_LIT("1")}};
    log_auth(s, GW_ALOG_AUTH_BUSY, NULL);
    GW_LOG_INFO("auth_busy", "peer=%s route=%s pending=%u waiters=%u status=503", s->peer, r->name,
                p->auth->caches[idx].pending, waiters);
    return gw_proxy__answer_text(s, h, 503, "h2gate: too many logins at once, try again\n", f, 1);
}

/* A stream's state made for a wait that could not start goes back; NULL. */
static px_t *px_unmake(gw_proxy_t *p, gw_cstream_t *s, px_t *px)
{
    s->proxy_data = NULL;
    gw_proxy__upload_unwatch(px);
    gw_free(px->x);
    gw_pool_put(&p->px_pool, px);
    return NULL;
}

int gw_proxy__auth(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                   int *rv)
{
    const gw_cfg_basic_auth_t *ba = r->basic_auth;
    size_t idx = (size_t)(r - p->cfg->routes);
    const gw_field_t *af = NULL;
    for (size_t i = 0; i < h->fields_len; i++) {
        if (!gw_proxy__name_is(h->fields[i].name, "authorization"))
            continue;
        if (af) {
            log_auth(s, GW_ALOG_AUTH_MISSING, NULL);
            GW_LOG_INFO("auth_refused", "peer=%s route=%s reason=repeated status=400", s->peer,
                        r->name);
            *rv = gw_proxy__answer_text(s, h, 400, "h2gate: more than one Authorization field\n",
                                        NULL, 0);
            return 1;
        }
        af = &h->fields[i];
    }
    uint8_t cred[GW_PROXY_AUTH_CRED_MAX];
    size_t ul, pl;
    if (!af || gw_proxy__basic_credentials(af->value, cred, sizeof(cred), &ul, &pl) < 0) {
        log_auth(s, GW_ALOG_AUTH_MISSING, NULL);
        *rv = answer_401(s, h, r, af ? "malformed" : "none");
        return 1;
    }
    const uint8_t *pass = cred + ul + 1;
    const gw_cfg_htuser_t *u = gw_cfg_htuser_find(ba, (const char *)cred, ul);
    uint8_t key[KEY_LEN];
    /* keyed for an unknown user too: its streams join one check as a known user's do */
    int keyed = cred_key(p->auth, idx, cred, ul, pass, pl, key) == 0;
    const gw_cfg_htuser_t *hit =
        keyed && u ? cache_find(&p->auth->caches[idx], key, uv_now(p->loop)) : NULL;
    if (hit == u && hit) {
        OPENSSL_cleanse(cred, sizeof(cred));
        log_auth(s, GW_ALOG_AUTH_CACHED, u);
        return 0;
    }
    if (limited(p, s, h, r, idx, rv)) {
        OPENSSL_cleanse(cred, sizeof(cred));
        return 1;
    }
    /* single flight: the same credentials already being checked are waited for, not checked
     * again (a browser's or a benchmark's first requests all carry them at once) */
    auth_job_t *j = keyed ? job_find(p->auth, idx, key) : NULL;
    if (j ? j->nwaiters >= ba->max_waiting : p->auth->caches[idx].pending >= ba->max_verifying) {
        OPENSSL_cleanse(cred, sizeof(cred));
        *rv = answer_busy(p, s, h, r, idx, j ? j->nwaiters : 0);
        return 1;
    }
    auth_wait_t *w = gw_calloc(1, sizeof(*w));
    auth_job_t *nj = NULL;
    /* an unknown user is checked against a known one's hash: the same cost, never a match */
    const char *hash = u ? u->hash : ba->users[0].hash;
    if (w && !j && (nj = gw_calloc(1, sizeof(*nj)))) {
        gw_list_init(&nj->waiters);
        nj->hash = gw_malloc(strlen(hash) + 1);
        nj->pass = gw_malloc(pl + 1);
    }
    int made = w && (j || (nj && nj->hash && nj->pass));
    px_t *px = made ? gw_proxy__stream_new(p, s, h, r) : NULL;
    if (px && !gw_proxy__px_x(px)) /* the wait is kept in px->x */
        px = px_unmake(p, s, px);
    if (!px) {
        OPENSSL_cleanse(cred, sizeof(cred));
        gw_free(w);
        if (nj)
            job_free(nj);
        *rv = GW_E_NOMEM;
        return 1;
    }
    if (s->addr && gw_bucket_table_keyed(s->addr))
        memcpy(&w->addr, s->addr,
               s->addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                             : sizeof(struct sockaddr_in6));
    if (!j) {
        j = nj;
        memcpy(j->hash, hash, strlen(hash) + 1);
        memcpy(j->pass, pass, pl);
        j->pass[pl] = 0;
        j->pass_len = pl;
        memcpy(j->key, key, KEY_LEN);
        j->keyed = keyed != 0;
        j->p = p;
        j->route = idx;
        j->user = u;
        if (uv_queue_work(p->loop, &j->req, on_work, on_after_work) < 0) {
            OPENSSL_cleanse(cred, sizeof(cred));
            px_unmake(p, s, px); /* the stream is answered as one that never had it */
            gw_free(w);
            job_free(j);
            *rv = GW_E_NOMEM;
            return 1;
        }
        gw_list_push_back(&p->auth->jobs, &j->link);
        p->auth->caches[idx].pending++;
    }
    OPENSSL_cleanse(cred, sizeof(cred));
    w->px = px;
    gw_list_push_back(&j->waiters, &w->link);
    j->nwaiters++;
    px->x->auth = w;
    *rv = 0;
    return 1;
}

/* ---- a waiting stream's body and end -------------------------------------------------------- */

int gw_proxy__auth_hold(px_t *px, const uint8_t *data, size_t len)
{
    auth_wait_t *w = px->x ? px->x->auth : NULL;
    if (!w)
        return 0;
    if (w->body_len + len > px->p->cfg->limits.body_buffer) {
        /* more than an exchange would hold: the client is not waiting for credit. Dropped and
         * credited; the stream is answered 413 (or reset once answered) without its body */
        px->s->ops->credit(px->s, len);
        if (px->resp == PX_RESP_NONE) {
            px->resp = PX_RESP_DONE;
            if (gw_proxy__answer_text(px->s, &px->head, 413,
                                      "h2gate: request body too large while credentials are "
                                      "checked\n",
                                      NULL, 0) < 0)
                gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
        }
        return 1;
    }
    if (w->body_len + len > w->body_cap) {
        size_t nc = w->body_cap ? w->body_cap : 4096;
        while (nc < w->body_len + len)
            nc *= 2;
        uint8_t *nb = gw_realloc(w->body, nc);
        if (!nb) {
            px->s->ops->credit(px->s, len);
            gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
            return 1;
        }
        w->body = nb;
        w->body_cap = nc;
    }
    memcpy(w->body + w->body_len, data, len);
    w->body_len += len;
    px->body_since = uv_now(px->p->loop);
    return 1;
}

int gw_proxy__auth_hold_end(px_t *px, const gw_field_t *tr, size_t n)
{
    auth_wait_t *w = px->x ? px->x->auth : NULL;
    if (!w)
        return 0;
    w->ended = 1;
    px->body_since = uv_now(px->p->loop);
    if (n && gw_proxy__fields_dup(tr, n, &w->tr) == 0)
        w->ntr = n;
    return 1;
}

void gw_proxy__auth_detach(px_t *px)
{
    auth_wait_t *w = px->x ? px->x->auth : NULL;
    if (!w)
        return;
    px->x->auth = NULL;
    /* the verification still runs; the waiter stays on it (its failure is still counted)
     * and its answer finds nobody. The stream is closed: nothing to credit, nothing held */
    w->px = NULL;
    gw_free(w->body);
    w->body = NULL;
    w->body_len = w->body_cap = 0;
}
