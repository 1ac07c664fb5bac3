/* acme/shared.c — one certificate per name set for all the instances of a cluster (cluster.h's
 * shared values): the lock under which one instance orders, the sealed certificate every
 * instance picks up, the challenge records every instance answers. See acme_internal.h for
 * the rules; client.c calls in at a few hooks and is called back through gw_acme_share_cbs_t.
 *
 * Redis keys, under cluster.key_prefix, ID the name set's folder name in the state folder:
 *   acme:lock:ID        the orderer's token (SET NX PX GW_ACME_LOCK_MS, renewed every third
 *                       of it while the order runs, deleted by compare-and-delete at its end)
 *   acme:cert:ID        the sealed chain and key (gw_acme__seal)
 *   acme:challenges:ID  a hash "TYPE:NAME" → "TYPE\nNAME\nTOKEN\nKEY_AUTHZ" while it is ordered
 *   acme:orders         the id of the last name set whose order took the lock, for
 *                       GW_ACME_ORDERS_TTL_MS, set again every GW_ACME_ANNOUNCE_MS while the
 *                       order runs and left to expire after it. While it is there, the
 *                       instances read the challenge records of their name sets every
 *                       GW_ACME_CHALLENGE_POLL_MS; while it is not, only this key, every
 *                       acme.cluster_check_interval (one GET per instance, whatever the name
 *                       sets)
 *   acme:account        the account key every instance orders with, sealed (id "account", no
 *                       chain): read by an instance that took a lock, stored by the first
 *   acme:checks         each instance's acme.cluster_check_interval (field: the ms; value:
 *                       until when it holds, wall-clock ms), read by an orderer as it takes the
 *                       lock: its first validation waits for the slowest reader of acme:orders
 */
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acme/acme_internal.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"

/* ---- the sealed value (sans-IO) ------------------------------------------------------------ */

#define MAGIC "h2ga"
#define VERSION 1
#define NONCE_LEN 12 /* GCM's 96-bit IV (NIST SP 800-38D §8.2) */
#define TAG_LEN 16
#define HEAD (4 + 1 + 4 + 4) /* magic, version, chain length, key length (big-endian) */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The associated data: the layout's head, the name set's id and the chain, so that neither a
 * value moved to another name set nor a chain swapped beside the key opens. */
static int gcm_aad(EVP_CIPHER_CTX *x, const uint8_t *head, const char *id, const char *chain,
                   size_t cl)
{
    int n;
    uint8_t zero = 0;
    return EVP_CipherUpdate(x, NULL, &n, head, HEAD) == 1 &&
           EVP_CipherUpdate(x, NULL, &n, (const uint8_t *)id, (int)strlen(id)) == 1 &&
           EVP_CipherUpdate(x, NULL, &n, &zero, 1) == 1 &&
           (cl == 0 || EVP_CipherUpdate(x, NULL, &n, (const uint8_t *)chain, (int)cl) == 1);
}

int gw_acme__seal(const uint8_t key[GW_ACME_SHARED_KEY_LEN], const char *id, const char *chain,
                  size_t cl, const char *kpem, size_t kl, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    if (cl > GW_ACME_SHARED_MAX || kl > GW_ACME_SHARED_MAX)
        return GW_E_RANGE;
    size_t len = HEAD + cl + NONCE_LEN + kl + TAG_LEN;
    uint8_t *v = gw_malloc(len);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int rv = GW_E_NOMEM, n = 0;
    if (!v || !x)
        goto out;
    memcpy(v, MAGIC, 4);
    v[4] = VERSION;
    put32(v + 5, (uint32_t)cl);
    put32(v + 9, (uint32_t)kl);
    memcpy(v + HEAD, chain, cl);
    uint8_t *nonce = v + HEAD + cl, *ct = nonce + NONCE_LEN, *tag = ct + kl;
    /* a random nonce per value: with a few values per name set and year, far from the 2^32
     * random nonces one key may take (SP 800-38D §8.3) */
    if (RAND_bytes(nonce, NONCE_LEN) != 1 ||
        EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
        !gcm_aad(x, v, id, chain, cl) ||
        EVP_EncryptUpdate(x, ct, &n, (const uint8_t *)kpem, (int)kl) != 1 ||
        EVP_EncryptFinal_ex(x, ct + n, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1) {
        rv = GW_E_INVAL;
        goto out;
    }
    *out = v;
    *out_len = len;
    v = NULL;
    rv = 0;
out:
    EVP_CIPHER_CTX_free(x);
    if (v)
        OPENSSL_clear_free(v, len);
    ERR_clear_error();
    return rv;
}

int gw_acme__open(const uint8_t key[GW_ACME_SHARED_KEY_LEN], const char *id, const uint8_t *v,
                  size_t len, char **chain, size_t *cl, char **kpem, size_t *kl)
{
    *chain = *kpem = NULL;
    if (len < HEAD + NONCE_LEN + TAG_LEN || memcmp(v, MAGIC, 4) != 0 || v[4] != VERSION)
        return GW_E_PARSE;
    size_t c = get32(v + 5), k = get32(v + 9);
    if (c > GW_ACME_SHARED_MAX || k > GW_ACME_SHARED_MAX ||
        len != HEAD + c + NONCE_LEN + k + TAG_LEN)
        return GW_E_PARSE;
    const uint8_t *nonce = v + HEAD + c, *ct = nonce + NONCE_LEN, *tag = ct + k;
    char *ch = gw_malloc(c + 1), *kp = gw_malloc(k + 1);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int rv = GW_E_NOMEM, n = 0, m = 0;
    if (!ch || !kp || !x)
        goto out;
    memcpy(ch, v + HEAD, c);
    ch[c] = 0;
    if (EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
        !gcm_aad(x, v, id, ch, c) ||
        (k && EVP_DecryptUpdate(x, (uint8_t *)kp, &n, ct, (int)k) != 1) ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, (void *)tag) != 1 ||
        EVP_DecryptFinal_ex(x, (uint8_t *)kp + n, &m) != 1) {
        rv = GW_E_INVAL; /* another key, another name set, or changed bytes */
        goto out;
    }
    kp[k] = 0;
    *chain = ch;
    *cl = c;
    *kpem = kp;
    *kl = k;
    ch = kp = NULL;
    rv = 0;
out:
    EVP_CIPHER_CTX_free(x);
    gw_free(ch);
    if (kp)
        OPENSSL_clear_free(kp, k + 1);
    ERR_clear_error();
    return rv;
}

int gw_acme__challenge_record(const char *type, const char *name, const char *token,
                              const char *key_authz, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s\n%s\n%s\n%s", type, name, token ? token : "", key_authz);
    return n > 0 && (size_t)n < cap ? n : GW_E_RANGE;
}

int gw_acme__challenge_parse(const uint8_t *v, size_t len, char *type, char *name, char *key_authz)
{
    const char *f[4];
    size_t fl[4], k = 0, start = 0;
    for (size_t i = 0; i <= len && k < 4; i++)
        if (i == len || v[i] == '\n') {
            f[k] = (const char *)v + start;
            fl[k++] = i - start;
            start = i + 1;
        }
    if (k != 4 || start != len + 1 || fl[0] == 0 || fl[0] >= 16 || fl[1] == 0 || fl[1] > 253 ||
        fl[3] == 0 || fl[3] > 512)
        return GW_E_PARSE;
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < fl[i]; j++)
            if (f[i][j] < 0x21 || f[i][j] > 0x7e)
                return GW_E_PARSE;
    memcpy(type, f[0], fl[0]);
    type[fl[0]] = 0;
    memcpy(name, f[1], fl[1]);
    name[fl[1]] = 0;
    memcpy(key_authz, f[3], fl[3]);
    key_authz[fl[3]] = 0;
    return 0;
}

/* ---- one name set's sharing ---------------------------------------------------------------- */

typedef enum {
    SH_IDLE,     /* nothing asked (a certificate is in use) */
    SH_LOOKING,  /* GET the stored certificate, then the lock */
    SH_LOCKING,  /* SET NX the lock */
    SH_WAITING,  /* another holds the lock: poll for its certificate */
    SH_ORDERING, /* the lock is ours (or Redis cannot say): the order runs */
} sh_state_t;

struct gw_acme_share {
    gw_acme_shared_t *hub;
    gw_acme_share_cbs_t cbs;
    void *ud;
    char id[300];
    char k_lock[360], k_cert[360], k_ch[360];
    char token[40];
    sh_state_t state;
    int locked;         /* we hold the lock (renewed by the timer) */
    int publishing;     /* an HSET is under way, then the wait (resume follows) */
    int polling;        /* an HGETALL is under way */
    int pending;        /* calls under way: the memory waits for them after close */
    int closed;         /* gw_acme__share_close was called */
    int alone;          /* this order runs without the cluster (logged) */
    int unreadable;     /* the stored value could not be opened: order for ourselves */
    uint8_t seen[32];   /* the challenge records installed (SHA-256 of the hash), all 0: none */
    int waited;         /* acme_cluster_wait was logged for this need */
    uint64_t since;     /* when gw_acme__share_want asked (loop ms): the grace's start */
    uint64_t announced; /* when our lock was taken and acme:orders set (loop ms), 0: not */
    unsigned ticks;     /* of the renew timer since the lock was taken */
    uv_timer_t poll, renew, wait;
    int handles;
};

struct gw_acme_shared {
    gw_cluster_t *cluster;
    uv_loop_t *loop;
    uint8_t key[GW_ACME_SHARED_KEY_LEN];
    int down_logged; /* acme_cluster_unavailable was logged and nothing worked since */
    size_t shares;   /* shares alive: the memory waits for the last one */
    int deleted;     /* gw_acme__shared_del was called */
    /* acme:orders as last read: some instance orders (the records are read), when to read it
     * again (loop ms), a GET under way */
    int active;
    uint64_t next_check;
    int checking;
    uint64_t check_ms;   /* acme.cluster_check_interval */
    uint64_t declare_at; /* when to set our field of acme:checks again (loop ms; 0: now) */
    uint64_t fleet_ms;   /* the longest interval in acme:checks as last read (0: none) */
};

int gw_acme__shared_new(uv_loop_t *loop, gw_acme_shared_t **out)
{
    gw_acme_shared_t *h = gw_calloc(1, sizeof(*h));
    if (!h)
        return GW_E_NOMEM;
    h->loop = loop;
    h->check_ms = GW_ACME_ACTIVE_CHECK_MS;
    *out = h;
    return 0;
}

void gw_acme__shared_set_cluster(gw_acme_shared_t *h, gw_cluster_t *c)
{
    h->cluster = c;
}

void gw_acme__shared_set_check(gw_acme_shared_t *h, uint64_t ms)
{
    h->check_ms = ms ? ms : GW_ACME_ACTIVE_CHECK_MS;
    h->declare_at = 0; /* declared at the next poll tick: the others' orders count with it */
    /* a shorter interval: the next read comes by it, not by the old one */
    uint64_t by = uv_now(h->loop) + h->check_ms;
    if (h->next_check > by)
        h->next_check = by;
}

/* The longest an idle instance takes to see acme:orders: it reads it from a poll tick
 * (GW_ACME_CHALLENGE_POLL_MS apart) once its interval has passed, so at the next whole tick;
 * the slowest of them reads by the longest interval declared in acme:checks, or ours. */
static uint64_t check_span(const gw_acme_shared_t *h)
{
    uint64_t ms = h->fleet_ms > h->check_ms ? h->fleet_ms : h->check_ms;
    return (ms + GW_ACME_CHALLENGE_POLL_MS - 1) / GW_ACME_CHALLENGE_POLL_MS *
           GW_ACME_CHALLENGE_POLL_MS;
}

/* The wall clock in ms: acme:checks is read by other hosts (minutes of skew are harmless). */
static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Our interval in acme:checks, for GW_ACME_CHECKS_TTL_MS, set again every
 * GW_ACME_CHECKS_DECLARE_MS, from the poll ticks whatever the share does (not connected: at the
 * next tick; a set that fails on the way: at the next declaration). */
static void declare_check(gw_acme_shared_t *h, uint64_t now)
{
    if (h->declare_at && now < h->declare_at)
        return;
    char field[24], until[24];
    snprintf(field, sizeof(field), "%llu", (unsigned long long)h->check_ms);
    int n = snprintf(until, sizeof(until), "%llu",
                     (unsigned long long)(wall_ms() + GW_ACME_CHECKS_TTL_MS));
    int rv = gw_cluster_hset(h->cluster, GW_ACME_CHECKS_KEY, field, (const uint8_t *)until,
                             (size_t)n, GW_ACME_CHECKS_TTL_MS, NULL, NULL);
    h->declare_at = now + (rv == 0 ? GW_ACME_CHECKS_DECLARE_MS : GW_ACME_CHALLENGE_POLL_MS);
}

void gw_acme__shared_set_key(gw_acme_shared_t *h, const uint8_t *key)
{
    if (key)
        memcpy(h->key, key, sizeof(h->key));
    else
        OPENSSL_cleanse(h->key, sizeof(h->key));
}

void gw_acme__shared_del(gw_acme_shared_t *h)
{
    if (!h)
        return;
    OPENSSL_cleanse(h->key, sizeof(h->key));
    h->cluster = NULL; /* closed after us: the shares' late answers send nothing more */
    h->deleted = 1;
    if (h->shares == 0)
        gw_free(h);
}

static void look(gw_acme_share_t *s);
static void on_renew(uv_timer_t *t);
static void on_wait(uv_timer_t *t);
static void on_publish_wait(uv_timer_t *t);

static void maybe_free(gw_acme_share_t *s)
{
    if (!s->closed || s->pending || s->handles)
        return;
    gw_acme_shared_t *h = s->hub;
    gw_free(s);
    if (--h->shares == 0 && h->deleted)
        gw_free(h);
}

/* A call's failure: the cluster cannot say, so this instance decides alone (logged once until
 * a call works again). */
static void unavailable(gw_acme_share_t *s, const char *what, int err)
{
    if (!s->hub->down_logged)
        GW_LOG_WARN("acme_cluster_unavailable",
                    "id=%s call=\"%s\" reason=\"%s\" action=\"each instance orders alone\"", s->id,
                    what, gw_strerror(err));
    s->hub->down_logged = 1;
}

static void worked(gw_acme_share_t *s)
{
    if (s->hub->down_logged)
        GW_LOG_INFO("acme_cluster_available", "id=%s", s->id);
    s->hub->down_logged = 0;
}

/* A call that could not be sent (not connected): while the client may still be connecting
 * (at start, GW_ACME_CONNECT_GRACE_MS), asked again shortly; 1 then, else 0. */
static int in_grace(gw_acme_share_t *s, int rv)
{
    if (rv != GW_E_IO || uv_now(s->hub->loop) - s->since >= GW_ACME_CONNECT_GRACE_MS)
        return 0;
    s->state = SH_WAITING;
    uv_timer_start(&s->wait, on_wait, 250, 0);
    return 1;
}

/* Order without the lock: Redis cannot say who else orders. */
static void order_alone(gw_acme_share_t *s)
{
    s->state = SH_ORDERING;
    s->alone = 1;
    s->cbs.order(s->ud);
}

/* acme:orders set (again) for the lock's life: the idle instances start reading the challenge
 * records at their next check. A failure is the lock's to notice. */
static void announce(gw_acme_share_t *s)
{
    if (s->hub->cluster)
        (void)gw_cluster_put(s->hub->cluster, GW_ACME_ORDERS_KEY, (const uint8_t *)s->id,
                             strlen(s->id), GW_ACME_ORDERS_TTL_MS, NULL, NULL);
}

/* The cluster's account (acme:account, sealed like a certificate with the id "account" and
 * an empty chain) answered: ours from now on when it opens; stored when there is none. Then
 * the order, whatever the answer (an account of our own is as good for one order). */
static void on_account(void *ud, int result, const uint8_t *v, size_t len)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (s->closed || s->state != SH_ORDERING) {
        maybe_free(s);
        return;
    }
    char *chain = NULL, *kpem = NULL, *own = NULL;
    size_t cl = 0, kl = 0, ol = 0;
    uint8_t *sealed = NULL;
    size_t sl = 0;
    if (result >= 0 && v) {
        int rv = gw_acme__open(s->hub->key, GW_ACME_ACCOUNT_ID, v, len, &chain, &cl, &kpem, &kl);
        if (rv < 0 || s->cbs.account(s->ud, kpem, kl) < 0)
            GW_LOG_WARN("acme_cluster_account_unreadable",
                        "id=%s bytes=%zu reason=\"%s\" action=\"ordering with this instance's "
                        "account\"",
                        s->id, len,
                        rv < 0 ? "it does not open with our shared_key" : "not a P-256 key");
    } else if (result >= 0 && s->hub->cluster && s->cbs.account_pem(s->ud, &own, &ol) == 0 &&
               gw_acme__seal(s->hub->key, GW_ACME_ACCOUNT_ID, "", 0, own, ol, &sealed, &sl) == 0 &&
               gw_cluster_put(s->hub->cluster, GW_ACME_ACCOUNT_KEY, sealed, sl, 0, NULL, NULL) ==
                   0) {
        /* the first order of the cluster: its account is everyone's (two first orders at once
         * store one after the other: the last one stays, and the other's account serves one
         * order) */
        GW_LOG_INFO("acme_cluster_account", "id=%s source=us", s->id);
    }
    gw_free(chain);
    if (kpem)
        OPENSSL_clear_free(kpem, kl + 1);
    if (own)
        OPENSSL_cleanse(own, ol);
    gw_free(own);
    if (sealed)
        OPENSSL_clear_free(sealed, sl);
    s->cbs.order(s->ud);
}

/* acme:checks answered: the longest interval still current is what the first publish of our
 * order waits for (check_span); a failed read leaves the last one known. The ACME server's
 * round trips before the first challenge (account, order, authorizations) outlast this read. */
static void on_checks(void *ud, int result, size_t n, const uint8_t *const *f, const size_t *fl,
                      const uint8_t *const *v, const size_t *vl)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (result >= 0 && !s->closed) {
        uint64_t now = wall_ms(), most = 0;
        for (size_t i = 0; i < n; i++) {
            char a[24], b[24];
            if (fl[i] >= sizeof(a) || vl[i] >= sizeof(b))
                continue;
            memcpy(a, f[i], fl[i]);
            a[fl[i]] = '\0';
            memcpy(b, v[i], vl[i]);
            b[vl[i]] = '\0';
            char *ea, *eb;
            unsigned long long ms = strtoull(a, &ea, 10), until = strtoull(b, &eb, 10);
            /* acme.cluster_check_interval is at most 10 minutes */
            if (*ea || *eb || ea == a || eb == b || until < now || ms > 600000u)
                continue;
            if (ms > most)
                most = ms;
        }
        s->hub->fleet_ms = most;
        if (most > s->hub->check_ms)
            GW_LOG_INFO("acme_cluster_check_longer",
                        "id=%s check_ms=%llu ours_ms=%llu reason=\"an instance declared a "
                        "longer cluster_check_interval: the first validation waits for it\"",
                        s->id, (unsigned long long)most, (unsigned long long)s->hub->check_ms);
    }
    maybe_free(s);
}

static void read_checks(gw_acme_share_t *s)
{
    if (s->hub->cluster &&
        gw_cluster_hgetall(s->hub->cluster, GW_ACME_CHECKS_KEY, on_checks, s) == 0)
        s->pending++;
}

/* Before an order under the lock: the cluster's account (on_account), then the order. */
static void account_sync(gw_acme_share_t *s)
{
    if (s->hub->cluster &&
        gw_cluster_get(s->hub->cluster, GW_ACME_ACCOUNT_KEY, on_account, s) == 0) {
        s->pending++;
        return;
    }
    s->cbs.order(s->ud);
}

static void on_lock(void *ud, int result)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (s->closed || s->state != SH_LOCKING) {
        if (result == 1 && s->hub->cluster)
            gw_cluster_unlock(s->hub->cluster, s->k_lock, s->token, NULL, NULL);
        maybe_free(s);
        return;
    }
    if (result == GW_E_CLOSED && s->hub->cluster) {
        look(s); /* the cluster was replaced (a reload): ask the new one */
        return;
    }
    if (result < 0) {
        unavailable(s, "SET NX lock", result);
        order_alone(s);
        return;
    }
    worked(s);
    if (result == 1) {
        s->locked = 1;
        s->alone = 0;
        s->state = SH_ORDERING;
        s->ticks = 0;
        uv_timer_start(&s->renew, on_renew, GW_ACME_ANNOUNCE_MS, GW_ACME_ANNOUNCE_MS);
        GW_LOG_INFO("acme_cluster_lock", "id=%s held=us ttl_ms=%u", s->id, GW_ACME_LOCK_MS);
        announce(s);
        s->announced = uv_now(s->hub->loop);
        read_checks(s);
        account_sync(s); /* then the order */
        return;
    }
    if (!s->waited)
        GW_LOG_INFO("acme_cluster_wait", "id=%s reason=\"another instance orders these names\"",
                    s->id);
    s->waited = 1;
    s->state = SH_WAITING;
    uv_timer_start(&s->wait, on_wait, GW_ACME_WAIT_POLL_MS, 0);
}

static void take_lock(gw_acme_share_t *s)
{
    s->state = SH_LOCKING;
    if (!s->hub->cluster) {
        order_alone(s);
        return;
    }
    int rv = gw_cluster_lock(s->hub->cluster, s->k_lock, s->token, GW_ACME_LOCK_MS, on_lock, s);
    if (rv < 0 && in_grace(s, rv))
        return;
    if (rv < 0) {
        unavailable(s, "SET NX lock", rv);
        order_alone(s);
        return;
    }
    s->pending++;
}

static void on_cert(void *ud, int result, const uint8_t *v, size_t len)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (s->closed || s->state != SH_LOOKING) {
        maybe_free(s);
        return;
    }
    if (result == GW_E_CLOSED && s->hub->cluster) {
        look(s);
        return;
    }
    if (result < 0) {
        unavailable(s, "GET certificate", result);
        order_alone(s);
        return;
    }
    worked(s);
    if (v) {
        char *chain = NULL, *kpem = NULL;
        size_t cl = 0, kl = 0;
        int rv = gw_acme__open(s->hub->key, s->id, v, len, &chain, &cl, &kpem, &kl);
        if (rv < 0) {
            /* never overwritten by us: the instances that can read it keep using it */
            if (!s->unreadable)
                GW_LOG_ERROR("acme_shared_unreadable",
                             "id=%s bytes=%zu reason=\"%s\" action=\"ordering for this "
                             "instance; check that every instance has the same acme.shared_key\"",
                             s->id, len,
                             rv == GW_E_PARSE ? "not an h2gate sealed certificate"
                                              : "it does not open with our shared_key (another "
                                                "key, another name set, or changed bytes)");
            s->unreadable = 1;
        } else {
            s->unreadable = 0;
            int fresh = s->cbs.fresh(s->ud, chain, cl, kpem, kl);
            if (fresh) {
                s->state = SH_IDLE;
                GW_LOG_INFO("acme_cluster_pickup", "id=%s bytes=%zu", s->id, len);
                s->cbs.install(s->ud, chain, cl, kpem, kl);
            }
            gw_free(chain);
            OPENSSL_clear_free(kpem, kl + 1);
            if (fresh)
                return;
        }
    }
    take_lock(s);
}

/* Read the stored certificate; when it is not fresh, take the lock. */
static void look(gw_acme_share_t *s)
{
    s->state = SH_LOOKING;
    if (!s->hub->cluster) {
        order_alone(s);
        return;
    }
    int rv = gw_cluster_get(s->hub->cluster, s->k_cert, on_cert, s);
    if (rv < 0 && in_grace(s, rv))
        return;
    if (rv < 0) {
        unavailable(s, "GET certificate", rv);
        order_alone(s);
        return;
    }
    s->pending++;
}

void gw_acme__share_want(gw_acme_share_t *s)
{
    if (s->state == SH_WAITING || s->state == SH_LOOKING || s->state == SH_LOCKING)
        return; /* already on its way */
    s->since = uv_now(s->hub->loop);
    s->waited = 0;
    look(s);
}

static void on_wait(uv_timer_t *t)
{
    gw_acme_share_t *s = t->data;
    if (s->state == SH_WAITING)
        look(s); /* the certificate, or the lock if it was let go or expired */
}

static void on_renewed(void *ud, int result)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (!s->closed && s->locked && result == 0) {
        /* it expired (Redis stalled longer than its life, or was flushed): another may order
         * now; this order goes on, and the one that ends first stores its certificate */
        s->locked = 0;
        GW_LOG_WARN("acme_cluster_lock_lost", "id=%s", s->id);
    }
    maybe_free(s);
}

/* Every GW_ACME_ANNOUNCE_MS while the lock is ours: acme:orders again, and the lock every
 * third of its life. */
static void on_renew(uv_timer_t *t)
{
    gw_acme_share_t *s = t->data;
    if (!s->hub->cluster || s->state != SH_ORDERING)
        return;
    announce(s); /* a lock lost (acme_cluster_lock_lost) does not end the order */
    if (!s->locked)
        return;
    if (++s->ticks % (GW_ACME_LOCK_MS / 3 / GW_ACME_ANNOUNCE_MS) != 0)
        return;
    if (gw_cluster_lock_renew(s->hub->cluster, s->k_lock, s->token, GW_ACME_LOCK_MS, on_renewed,
                              s) == 0)
        s->pending++;
}

/* ---- challenges ---- */

static void on_published(void *ud, int result)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    if (s->closed || !s->publishing) {
        maybe_free(s);
        return;
    }
    if (result < 0) {
        unavailable(s, "HSET challenge", result);
        s->publishing = 0;
        s->cbs.resume(s->ud); /* only this instance answers it */
        return;
    }
    /* the others read the records every GW_ACME_CHALLENGE_POLL_MS: give them two reads; an
     * instance that was idle when the lock was taken reads them only once its next check of
     * acme:orders has seen the order: the first publish waits for that too */
    uint64_t now = uv_now(s->hub->loop), wait = GW_ACME_PUBLISH_WAIT_MS;
    uint64_t seen_by = s->announced + check_span(s->hub) + GW_ACME_PUBLISH_WAIT_MS;
    if (s->announced && seen_by > now + wait)
        wait = seen_by - now;
    uv_timer_start(&s->wait, on_publish_wait, wait, 0);
}

static void on_publish_wait(uv_timer_t *t)
{
    gw_acme_share_t *s = t->data;
    if (!s->publishing)
        return;
    s->publishing = 0;
    s->cbs.resume(s->ud);
}

int gw_acme__share_publish(gw_acme_share_t *s, const char *type, const char *name,
                           const char *token, const char *key_authz)
{
    char rec[1024], field[300];
    int n = gw_acme__challenge_record(type, name, token, key_authz, rec, sizeof(rec));
    if (n < 0 || snprintf(field, sizeof(field), "%s:%s", type, name) >= (int)sizeof(field) ||
        !s->hub->cluster)
        return GW_E_RANGE;
    int rv = gw_cluster_hset(s->hub->cluster, s->k_ch, field, (const uint8_t *)rec, (size_t)n,
                             GW_ACME_CHALLENGE_TTL_MS, on_published, s);
    if (rv < 0) {
        unavailable(s, "HSET challenge", rv);
        return rv;
    }
    s->pending++;
    uv_timer_stop(&s->wait); /* an earlier publish's wait (an order restarted): this one's */
    s->publishing = 1;
    return 0;
}

static void on_records(void *ud, int result, size_t n, const uint8_t *const *f, const size_t *fl,
                       const uint8_t *const *v, const size_t *vl)
{
    gw_acme_share_t *s = ud;
    s->pending--;
    s->polling = 0;
    if (s->closed || result < 0 || s->state == SH_ORDERING) {
        maybe_free(s);
        return;
    }
    /* the set changed since the last read: install it again, whole */
    uint8_t d[32] = {0};
    EVP_MD_CTX *md = n ? EVP_MD_CTX_new() : NULL;
    if (n) {
        unsigned dl = 0;
        if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
            EVP_MD_CTX_free(md);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            EVP_DigestUpdate(md, f[i], fl[i]);
            EVP_DigestUpdate(md, "\0", 1);
            EVP_DigestUpdate(md, v[i], vl[i]);
            EVP_DigestUpdate(md, "\0", 1);
        }
        EVP_DigestFinal_ex(md, d, &dl);
        EVP_MD_CTX_free(md);
    }
    if (!memcmp(d, s->seen, sizeof(d)))
        return;
    memcpy(s->seen, d, sizeof(d));
    s->cbs.clear(s->ud);
    size_t installed = 0;
    for (size_t i = 0; i < n && i < GW_ACME_CHALLENGES_MAX; i++) {
        char type[16], name[254], ka[513];
        if (gw_acme__challenge_parse(v[i], vl[i], type, name, ka) < 0 ||
            (strcmp(type, "tls-alpn-01") != 0 && strcmp(type, "http-01") != 0))
            continue;
        if (s->cbs.challenge(s->ud, type, name, ka) == 0)
            installed++;
    }
    if (n)
        GW_LOG_INFO("acme_cluster_challenges", "id=%s records=%zu installed=%zu", s->id, n,
                    installed);
}

static void on_active(void *ud, int result, const uint8_t *v, size_t len)
{
    (void)len;
    gw_acme_share_t *s = ud;
    gw_acme_shared_t *h = s->hub; /* alive while one of its shares is */
    s->pending--;
    h->checking = 0;
    if (result >= 0)
        h->active = v != NULL;
    maybe_free(s);
}

/* acme:orders read when its time has come, by whichever share's timer fires first. */
static void check_active(gw_acme_share_t *s, uint64_t now)
{
    gw_acme_shared_t *h = s->hub;
    if (h->checking || now < h->next_check)
        return;
    h->next_check = now + h->check_ms;
    if (gw_cluster_get(h->cluster, GW_ACME_ORDERS_KEY, on_active, s) == 0) {
        h->checking = 1;
        s->pending++;
    }
}

static void on_poll(uv_timer_t *t)
{
    gw_acme_share_t *s = t->data;
    if (s->hub->cluster)
        declare_check(s->hub, uv_now(s->hub->loop));
    if (s->polling || s->state == SH_ORDERING || !s->hub->cluster)
        return;
    check_active(s, uv_now(s->hub->loop));
    /* the records are read while an order runs: one this instance waits for (another holds
     * the lock), one acme:orders tells of, or once more after one to withdraw its records */
    static const uint8_t none[32];
    if (s->state != SH_WAITING && !s->hub->active && !memcmp(s->seen, none, sizeof(none)))
        return;
    if (gw_cluster_hgetall(s->hub->cluster, s->k_ch, on_records, s) == 0) {
        s->pending++;
        s->polling = 1;
    }
}

/* ---- the order's end ---- */

static void release(gw_acme_share_t *s)
{
    if (s->hub->cluster) {
        gw_cluster_del(s->hub->cluster, s->k_ch, NULL, NULL);
        if (s->locked)
            gw_cluster_unlock(s->hub->cluster, s->k_lock, s->token, NULL, NULL);
    }
    s->locked = 0;
    s->publishing = 0;
    s->announced = 0;
    uv_timer_stop(&s->renew);
    uv_timer_stop(&s->wait);
    memset(s->seen, 0, sizeof(s->seen));
}

void gw_acme__share_done(gw_acme_share_t *s, const char *chain, size_t cl, EVP_PKEY *key)
{
    int was_alone = s->alone;
    s->state = SH_IDLE;
    s->alone = 0;
    if (!s->hub->cluster) {
        release(s);
        return;
    }
    uint8_t *v = NULL;
    size_t vl = 0;
    BIO *b = BIO_new(BIO_s_mem());
    char *kpem = NULL;
    long kl = 0;
    int rv = GW_E_NOMEM;
    if (s->unreadable)
        rv = GW_E_EXIST;
    else if (b && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) &&
             (kl = BIO_get_mem_data(b, &kpem)) > 0)
        rv = gw_acme__seal(s->hub->key, s->id, chain, cl, kpem, (size_t)kl, &v, &vl);
    if (kpem)
        OPENSSL_cleanse(kpem, (size_t)kl);
    BIO_free(b);
    ERR_clear_error();
    if (rv == 0)
        rv = gw_cluster_put(s->hub->cluster, s->k_cert, v, vl, 0, NULL, NULL);
    if (rv == 0)
        GW_LOG_INFO("acme_cluster_stored", "id=%s bytes=%zu lock=%s", s->id, vl,
                    was_alone ? "none" : "held");
    else
        GW_LOG_WARN("acme_cluster_not_stored", "id=%s reason=\"%s\"", s->id,
                    rv == GW_E_EXIST   ? "the value stored is not readable with our shared_key"
                    : rv == GW_E_RANGE ? "larger than cluster.max_reply allows"
                                       : gw_strerror(rv));
    if (v)
        OPENSSL_clear_free(v, vl);
    release(s);
}

void gw_acme__share_failed(gw_acme_share_t *s, uint64_t retry_in_ms)
{
    /* the lock is kept for most of the backoff: the others do not order in its place at once
     * (a few orders per hour per name set, whoever orders) and take over if we do not come
     * back */
    s->state = SH_IDLE;
    s->alone = 0;
    s->publishing = 0;
    s->announced = 0;
    uv_timer_stop(&s->renew);
    uv_timer_stop(&s->wait);
    if (s->hub->cluster) {
        gw_cluster_del(s->hub->cluster, s->k_ch, NULL, NULL);
        /* it lapses before our retry, which then finds it free (or taken by another) */
        uint64_t ttl = retry_in_ms > 1000 ? retry_in_ms - 500 : retry_in_ms / 2 + 1;
        if (s->locked &&
            gw_cluster_lock_renew(s->hub->cluster, s->k_lock, s->token, ttl, on_renewed, s) == 0)
            s->pending++;
    }
    s->locked = 0; /* it expires before our retry; a new lock is taken then */
}

/* ---- life ---- */

static const char *const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

int gw_acme__share_new(gw_acme_shared_t *hub, const char *id, const gw_acme_share_cbs_t *cbs,
                       void *ud, gw_acme_share_t **out)
{
    gw_acme_share_t *s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->hub = hub;
    hub->shares++;
    s->cbs = *cbs;
    s->ud = ud;
    uint8_t r[16];
    if (snprintf(s->id, sizeof(s->id), "%s", id) >= (int)sizeof(s->id) ||
        RAND_bytes(r, sizeof(r)) != 1) {
        gw_free(s);
        hub->shares--;
        return GW_E_RANGE;
    }
    for (size_t i = 0; i < sizeof(r); i++)
        s->token[i] = ID_ALPHABET[r[i] % 36];
    snprintf(s->k_lock, sizeof(s->k_lock), "acme:lock:%s", id);
    snprintf(s->k_cert, sizeof(s->k_cert), "acme:cert:%s", id);
    snprintf(s->k_ch, sizeof(s->k_ch), "acme:challenges:%s", id);
    uv_timer_t *ts[] = {&s->poll, &s->renew, &s->wait};
    for (size_t i = 0; i < 3; i++) {
        uv_timer_init(hub->loop, ts[i]);
        ts[i]->data = s;
        s->handles++;
    }
    uv_timer_start(&s->poll, on_poll, 0, GW_ACME_CHALLENGE_POLL_MS);
    *out = s;
    return 0;
}

static void share_unref_handle(uv_handle_t *t)
{
    gw_acme_share_t *s = t->data;
    s->handles--;
    maybe_free(s);
}

void gw_acme__share_close(gw_acme_share_t *s)
{
    if (!s)
        return;
    if (s->hub->cluster) {
        if (s->state == SH_ORDERING || s->publishing)
            gw_cluster_del(s->hub->cluster, s->k_ch, NULL, NULL);
        if (s->locked)
            gw_cluster_unlock(s->hub->cluster, s->k_lock, s->token, NULL, NULL);
    }
    s->locked = 0;
    s->closed = 1;
    uv_close((uv_handle_t *)&s->poll, share_unref_handle);
    uv_close((uv_handle_t *)&s->renew, share_unref_handle);
    uv_close((uv_handle_t *)&s->wait, share_unref_handle);
}
