/* acme/client.c — the ACME client on the main loop: the state folder, one job per name set
 * that runs its order (order.c) over back/'s HTTP/1.1 + TLS client, answers tls-alpn-01
 * through the listener's store and http-01 through common/http01.h's table, and installs the
 * certificate; when to renew (renew.c: ARI's window asked of the server, or renew_before),
 * backoff after a failure, the hourly cap. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acme/acme.h"
#include "acme/acme_internal.h"
#include "acme/renew.h"
#include "back/back.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/http01.h"
#include "common/log.h"
#include "gw_version.h"

#define MAX_FILE (1u << 20)
#define MAX_FIELD 2048

/* ---- the state folder --------------------------------------------------------------------- */

/* path made with every missing folder, each 0700; an existing last folder with a wider mode is
 * narrowed to 0700 (it holds private keys). 0 or -1 (errno). */
static int mkdirs_0700(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(p, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if ((st.st_mode & 0077) && chmod(p, 0700) != 0)
        return -1;
    return 0;
}

/* The whole file (at most MAX_FILE bytes) into a gw_malloc'd, NUL-terminated *out. 0 or -1. */
static int read_all(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *b = gw_malloc(MAX_FILE + 1);
    size_t n = 0;
    ssize_t r = 0;
    while (b && n < MAX_FILE && (r = read(fd, b + n, MAX_FILE - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (!b || r < 0) {
        gw_free(b);
        return -1;
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

/* data written to path through path.tmp (mode 0600) and a rename: a reader never sees half a
 * file. 0 or -1 (errno). */
static int write_all(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* created exclusively, never through a symlink; a leftover of a crash is removed first */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcasecmp(*(const char *const *)a, *(const char *const *)b);
}

/* The folder of a name set under state: its first name (for people) and 12 hex digits of the
 * SHA-256 of the set (sorted, lower case, one per line), so that the same names in another
 * order share it. */
static int names_dir(const char *state, char *const *names, size_t n, char *out, size_t cap)
{
    const char **sorted = gw_calloc(n, sizeof(*sorted));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t d[32];
    int rv = GW_E_NOMEM;
    if (!sorted || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        goto out;
    memcpy(sorted, names, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), by_name);
    for (size_t i = 0; i < n; i++)
        for (const char *c = sorted[i];; c++) {
            char ch = *c ? (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c) : '\n';
            EVP_DigestUpdate(md, &ch, 1);
            if (!*c)
                break;
        }
    if (EVP_DigestFinal_ex(md, d, NULL) != 1)
        goto out;
    char first[254];
    snprintf(first, sizeof(first), "%s", names[0]);
    for (char *c = first; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c + 32);
    rv = snprintf(out, cap, "%s/%s-%02x%02x%02x%02x%02x%02x", state, first, d[0], d[1], d[2], d[3],
                  d[4], d[5]) < (int)cap
             ? 0
             : GW_E_RANGE;
out:
    EVP_MD_CTX_free(md);
    gw_free(sorted);
    return rv;
}

/* The stored chain and key of a name set, when they serve every name now: 1 (and *store set
 * when store is not NULL; the leaf's notBefore and notAfter, unix times, in v[0] and v[1]),
 * else 0. */
static int stored_usable(const char *dir, char *const *names, size_t n, gw_tls_store_t *store,
                         int64_t v[2])
{
    char cp[4200], kp[4200];
    snprintf(cp, sizeof(cp), "%s/cert.pem", dir);
    snprintf(kp, sizeof(kp), "%s/key.pem", dir);
    char *chain = NULL, *key = NULL;
    size_t cl = 0, kl = 0;
    int ok = 0;
    if (read_all(cp, &chain, &cl) == 0 && read_all(kp, &key, &kl) == 0 &&
        gw_tls_pem_usable(chain, cl, key, kl, (const char *const *)names, n, (int64_t)time(NULL),
                          &v[0], &v[1]) == 0)
        ok = !store || gw_tls_store_set_pem(store, chain, cl, key, kl) == 0;
    if (key)
        OPENSSL_cleanse(key, kl);
    gw_free(chain);
    gw_free(key);
    return ok;
}

static void log_names(char *buf, size_t cap, char *const *names, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? "," : "", names[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* Of the certificates stored for other name sets (the listener's names changed), the one that
 * covers most of names[0..n) now, installed in store: how many it covers (0: none, store
 * untouched); its folder into best. A name set that grew keeps serving its old names a valid
 * certificate while the new set is ordered. */
static size_t stored_fallback(const char *state, const char *skip, char *const *names, size_t n,
                              gw_tls_store_t *store, char *best, size_t cap)
{
    DIR *d = opendir(state);
    if (!d)
        return 0;
    size_t most = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char sub[4096], cp[4200], kp[4200];
        if (e->d_name[0] == '.' ||
            snprintf(sub, sizeof(sub), "%s/%s", state, e->d_name) >= (int)sizeof(sub) ||
            !strcmp(sub, skip))
            continue;
        snprintf(cp, sizeof(cp), "%s/cert.pem", sub);
        snprintf(kp, sizeof(kp), "%s/key.pem", sub);
        char *chain = NULL, *key = NULL;
        size_t cl = 0, kl = 0, covered = 0;
        if (read_all(cp, &chain, &cl) == 0 && read_all(kp, &key, &kl) == 0) {
            int64_t nb, na, now = (int64_t)time(NULL);
            for (size_t i = 0; i < n; i++)
                covered += gw_tls_pem_usable(chain, cl, key, kl, (const char *const *)&names[i], 1,
                                             now, &nb, &na) == 0;
            if (covered > most && gw_tls_store_set_pem(store, chain, cl, key, kl) == 0) {
                most = covered;
                snprintf(best, cap, "%s", sub);
            }
        }
        if (key)
            OPENSSL_cleanse(key, kl);
        gw_free(chain);
        gw_free(key);
    }
    closedir(d);
    return most;
}

int gw_acme_store_prepare(const gw_cfg_acme_t *acme, const gw_cfg_tls_t *tls,
                          gw_config_errors_t *errs, gw_tls_store_t **out)
{
    *out = NULL;
    char dir[4096], names[2048];
    if (mkdirs_0700(acme->state) != 0) {
        gw_config_error_add(errs, &acme->at, "acme 'state' folder '%s' cannot be made: %s",
                            acme->state, strerror(errno));
        return GW_E_IO;
    }
    int rv = names_dir(acme->state, tls->acme, tls->acme_len, dir, sizeof(dir));
    if (rv < 0)
        return rv;
    gw_tls_store_t *s;
    if ((rv = gw_tls_store_new(&s)) < 0)
        return rv;
    log_names(names, sizeof(names), tls->acme, tls->acme_len);
    int64_t v[2] = {0, 0};
    char other[4096];
    size_t covered = 0;
    if (stored_usable(dir, tls->acme, tls->acme_len, s, v)) {
        GW_LOG_INFO("acme_certificate_stored", "names=%s not_after=%lld dir=%s", names,
                    (long long)v[1], dir);
    } else if ((covered = stored_fallback(acme->state, dir, tls->acme, tls->acme_len, s, other,
                                          sizeof(other))) > 0) {
        GW_LOG_INFO("acme_waiting",
                    "names=%s reason=\"no certificate stored for these names: serving the one "
                    "of %s, which covers %zu of them, until the ACME server issues one\"",
                    names, other, covered);
    } else if ((rv = gw_tls_store_set_self_signed(s, (const char *const *)tls->acme,
                                                  tls->acme_len)) < 0) {
        gw_tls_store_unref(s);
        return rv;
    } else {
        GW_LOG_INFO("acme_waiting",
                    "names=%s reason=\"no usable certificate stored: serving a "
                    "self-signed one until the ACME server issues one\"",
                    names);
    }
    *out = s;
    return 0;
}

/* ---- the client ----------------------------------------------------------------------------- */

typedef struct job job_t;

struct gw_acme {
    uv_loop_t *loop;
    gw_config_t bcfg; /* back/'s view: one upstream, the directory's origin */
    gw_cfg_upstream_t up;
    gw_cfg_server_t srv;
    gw_back_t *back;
    char *origin; /* "https://host:port" as the URLs start */
    int https;
    char *directory, *directory_ca, *email, *state; /* copies of the section */
    gw_cfg_acme_challenge_t challenge;
    gw_cfg_acme_key_t key_type;
    EVP_PKEY *account_key;
    job_t **jobs;
    size_t jobs_len;
    int closing;
    gw_acme_shared_t *shared; /* the cluster's end (acme/shared.c) */
    int jobs_shared;          /* the jobs were made with a share each */
    uint64_t renew_before_ms; /* acme.renew_before, one of the two or neither */
    unsigned renew_before_pct;
    unsigned max_orders_per_hour;
    gw_acme_counters_t *counters; /* the server's, or NULL */
    /* ARI (RFC 9773): whether the directory offers renewalInfo, learned by the first job that
     * asks; its URL */
    enum { ARI_UNKNOWN, ARI_NONE, ARI_ON } ari;
    char *ari_url;
};

struct job {
    gw_acme_t *a;
    char **names;
    size_t names_len;
    char dir[4096];
    char log_names[2048];
    gw_tls_store_t *store; /* one reference */
    gw_acme_order_t *order;
    EVP_PKEY *cert_key;
    uv_timer_t timer;
    int timer_open;
    gw_back_exch_t *x;
    /* the answer being read */
    int status;
    char location[MAX_FIELD], nonce[MAX_FIELD], retry_after[64];
    int has_location, has_nonce, has_retry_after;
    gw_bytes_t body;
    int too_large;
    unsigned failures;
    unsigned orders;         /* orders started, for the log */
    gw_acme_share_t *share;  /* with a cluster: the name set's shared certificate */
    gw_acme_starts_t starts; /* when the last orders reached newOrder (unix ms): the cap, kept
                                in the name set's folder (orders) across restarts */
    int counted;             /* the order under way is in starts */
    int renewal;             /* the order under way is to replace a usable certificate */
    int64_t halved_for;      /* the not_after whose renew_before past the lifetime was logged */
    /* ARI: what is being asked (the answer goes to ari_answer, not to the order), the
     * certificate asked about, when to ask again (unix s; 0: at the next check), the failures
     * in a row, the last window and the time picked in it (0: none) */
    enum { ARI_IDLE, ARI_DIRECTORY, ARI_INFO } ari_phase;
    char ari_id[GW_ACME_ARI_MAX_ID];
    int64_t ari_next;
    unsigned ari_failures;
    int64_t ari_start, ari_end, ari_pick;
};

static void job_step(job_t *j);
static void ari_answer(job_t *j, const char *error);

static void job_free(job_t *j)
{
    for (size_t i = 0; i < j->names_len; i++)
        gw_free(j->names[i]);
    gw_free(j->names);
    gw_tls_store_unref(j->store);
    gw_acme_order_del(j->order);
    EVP_PKEY_free(j->cert_key);
    gw_bytes_free(&j->body);
    gw_free(j);
}

static void on_timer_closed(uv_handle_t *h)
{
    job_free(h->data);
}

static void job_close(job_t *j)
{
    if (j->x) {
        gw_back_cancel(j->x);
        j->x = NULL;
    }
    if (j->store)
        gw_tls_store_clear_challenges(j->store);
    gw_http01_withdraw(j);
    gw_acme__share_close(j->share);
    j->share = NULL;
    if (j->timer_open)
        uv_close((uv_handle_t *)&j->timer, on_timer_closed);
    else
        job_free(j);
}

/* The path of url on the directory's origin into *path, or NULL when it is on another. */
static const char *same_origin(const gw_acme_t *a, const char *url)
{
    size_t n = strlen(a->origin);
    if (strncasecmp(url, a->origin, n) != 0 || (url[n] != '/' && url[n] != 0))
        return NULL;
    return url[n] ? url + n : "/";
}

static void copy_field(char *dst, size_t cap, int *has, gw_slice_t v)
{
    if (v.len >= cap)
        return; /* longer than any URL or nonce we take: as if absent */
    memcpy(dst, v.base, v.len);
    dst[v.len] = 0;
    *has = 1;
}

static void on_head(gw_back_exch_t *x, void *user_data, const gw_back_head_t *head)
{
    (void)x;
    job_t *j = user_data;
    j->status = head->status;
    for (size_t i = 0; i < head->fields_len; i++) {
        gw_slice_t n = head->fields[i].name, v = head->fields[i].value;
        if (gw_slice_eq_nocase(n, GW_SLICE_LIT("location")))
            copy_field(j->location, sizeof(j->location), &j->has_location, v);
        else if (gw_slice_eq_nocase(n, GW_SLICE_LIT("replay-nonce")))
            copy_field(j->nonce, sizeof(j->nonce), &j->has_nonce, v);
        else if (gw_slice_eq_nocase(n, GW_SLICE_LIT("retry-after")))
            copy_field(j->retry_after, sizeof(j->retry_after), &j->has_retry_after, v);
    }
}

static void on_body(gw_back_exch_t *x, void *user_data, gw_rslice_t body)
{
    (void)x;
    job_t *j = user_data;
    if (j->too_large || j->body.len + body.len > GW_ACME_MAX_BODY) {
        j->too_large = 1;
        return;
    }
    if (gw_bytes_append(&j->body, body.buf->data + body.off, body.len) < 0)
        j->too_large = 1;
}

static void on_complete(gw_back_exch_t *x, void *user_data)
{
    (void)x;
    job_t *j = user_data;
    j->x = NULL;
    if (j->ari_phase != ARI_IDLE) {
        ari_answer(j, j->too_large ? "the answer is too large" : NULL);
        return;
    }
    if (j->too_large) {
        gw_acme_order_transport_failed(j->order, "the answer is too large");
    } else {
        gw_acme_response_t r = {.status = j->status,
                                .location = j->has_location ? j->location : NULL,
                                .replay_nonce = j->has_nonce ? j->nonce : NULL,
                                .retry_after = j->has_retry_after ? j->retry_after : NULL,
                                .body = j->body.base,
                                .body_len = j->body.len};
        unsigned before = gw_acme_order_nonce_retries(j->order);
        int replaces = gw_acme_order_replaces(j->order);
        gw_acme_order_recv(j->order, &r);
        if (gw_acme_order_nonce_retries(j->order) != before)
            GW_LOG_INFO("acme_bad_nonce", "names=%s state=%s action=retry", j->log_names,
                        gw_acme_state_str(gw_acme_order_state(j->order)));
        if (replaces && gw_acme_order_replaces_refused(j->order))
            GW_LOG_WARN("acme_ari_replaces_refused",
                        "names=%s status=%d type=%s action=\"new order without replaces\"",
                        j->log_names, j->status, gw_acme_order_replaces_refused(j->order));
    }
    job_step(j);
}

static void on_error(gw_back_exch_t *x, void *user_data, int code)
{
    (void)x;
    job_t *j = user_data;
    j->x = NULL;
    char why[128];
    snprintf(why, sizeof(why), "%s (see back_tls_handshake_failed for a TLS reason)",
             gw_strerror(code));
    if (j->ari_phase != ARI_IDLE) {
        ari_answer(j, why);
        return;
    }
    gw_acme_order_transport_failed(j->order, why);
    job_step(j);
}

static void on_written(void *user_data, int status)
{
    (void)user_data;
    (void)status; /* a failed write ends the exchange with on_error */
}

static const gw_back_cbs_t CBS = {
    .on_head = on_head, .on_body = on_body, .on_complete = on_complete, .on_error = on_error};

/* Send a request to the directory's origin, its answer to the callbacks above (j->x set); 0,
 * or a negative code with the reason in why (nothing under way). */
static int http_send(job_t *j, const gw_acme_action_t *act, char *why, size_t cap)
{
    gw_acme_t *a = j->a;
    const char *path = same_origin(a, act->url);
    if (!path) {
        snprintf(why, cap, "%.160s is not on the directory's origin %.64s", act->url, a->origin);
        return GW_E_INVAL;
    }
    j->status = 0;
    j->has_location = j->has_nonce = j->has_retry_after = 0;
    j->too_large = 0;
    j->body.len = 0;
    int post = !strcmp(act->method, "POST");
    gw_back_field_t fields[3];
    size_t nf = 0;
    fields[nf++] =
        (gw_back_field_t){GW_SLICE_LIT("user-agent"), GW_SLICE_LIT("h2gate/" GW_VERSION)};
    if (post) {
        /* RFC 8555 §6.2: application/jose+json; the chain is asked as PEM (§7.4.2) */
        fields[nf++] =
            (gw_back_field_t){GW_SLICE_LIT("content-type"), GW_SLICE_LIT("application/jose+json")};
        fields[nf++] =
            (gw_back_field_t){GW_SLICE_LIT("accept"), GW_SLICE_LIT("application/pem-certificate-"
                                                                   "chain, application/json")};
    }
    const char *host = a->origin + (a->https ? 8 : 7);
    gw_back_req_t req = {.method = gw_slice_str(act->method),
                         .target = gw_slice_str(path),
                         .host = gw_slice_str(host),
                         .fields = fields,
                         .fields_len = nf,
                         .body_len = post ? (int64_t)act->body_len : 0,
                         .idempotent = !post,
                         .urgency = 3};
    int rv = gw_back_request(a->back, 0, &req, &CBS, j, &j->x);
    if (rv == 0 && post && act->body_len) {
        gw_rbuf_t *b = gw_rbuf_new(act->body_len);
        if (!b) {
            rv = GW_E_NOMEM;
        } else {
            memcpy(b->data, act->body, act->body_len);
            b->len = act->body_len;
            rv = gw_back_write_body(j->x, b, 0, act->body_len, on_written, j);
            gw_rbuf_unref(b);
            if (rv == 0)
                rv = gw_back_end_body(j->x, NULL, 0);
        }
        if (rv < 0) {
            gw_back_cancel(j->x);
            j->x = NULL;
        }
    }
    if (rv < 0) {
        j->x = NULL;
        snprintf(why, cap, "%s", gw_strerror(rv));
    }
    return rv;
}

/* Send the order's request; 0, or the order failed (then the caller steps again). */
static void job_send(job_t *j, const gw_acme_action_t *act)
{
    char why[320];
    if (http_send(j, act, why, sizeof(why)) < 0)
        gw_acme_order_transport_failed(j->order, why);
}

static void on_timer(uv_timer_t *t);

static void job_start_order(job_t *j);
static void job_check(job_t *j);
static void count(gw_acme_t *a, size_t off);

static void arm(job_t *j, uint64_t ms)
{
    uv_timer_start(&j->timer, on_timer, ms, 0);
}

/* The chain and its key into the state folder, then into the store. */
static int job_install(job_t *j, const char *chain, size_t chain_len)
{
    char cp[4200], kp[4200];
    snprintf(cp, sizeof(cp), "%s/cert.pem", j->dir);
    snprintf(kp, sizeof(kp), "%s/key.pem", j->dir);
    BIO *b = BIO_new(BIO_s_mem());
    char *kpem = NULL;
    long kl = 0;
    int rv = GW_E_NOMEM;
    if (!b || !PEM_write_bio_PrivateKey(b, j->cert_key, NULL, NULL, 0, NULL, NULL) ||
        (kl = BIO_get_mem_data(b, &kpem)) <= 0)
        goto out;
    rv = 0;
    if (mkdirs_0700(j->dir) != 0 || write_all(kp, kpem, (size_t)kl) != 0 ||
        write_all(cp, chain, chain_len) != 0) {
        GW_LOG_ERROR("acme_state_failed", "names=%s dir=%s reason=\"%s\"", j->log_names, j->dir,
                     strerror(errno));
        rv = GW_E_IO;
        /* still served: the certificate is good, only a restart will not find it */
    }
    int srv = gw_tls_store_set_pem(j->store, chain, chain_len, kpem, (size_t)kl);
    rv = srv < 0 ? srv : rv;
out:
    BIO_free(b);
    ERR_clear_error();
    return rv;
}

/* The wall clock in ms: the cap's times outlive the process (a monotonic clock would not). */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The cap's times into the name set's folder, so that a restart (a crash loop) does not start
 * the count again. A failure is logged: the cap still holds in this process. */
static void cap_save(job_t *j)
{
    char path[4200], text[GW_ACME_CAP_TEXT];
    snprintf(path, sizeof(path), "%s/orders", j->dir);
    size_t n = gw_acme_cap_format(&j->starts, text, sizeof(text));
    if (mkdirs_0700(j->dir) != 0 || write_all(path, text, n) != 0)
        GW_LOG_WARN("acme_state_failed", "names=%s file=%s reason=\"%s\"", j->log_names, path,
                    strerror(errno));
}

static void count(gw_acme_t *a, size_t off)
{
    if (a->counters)
        atomic_fetch_add((atomic_uint_fast64_t *)(void *)((char *)a->counters + off), 1);
}

static void job_failed(job_t *j, const gw_acme_action_t *act)
{
    gw_tls_store_clear_challenges(j->store);
    gw_http01_withdraw(j);
    j->failures++;
    count(j->a, offsetof(gw_acme_counters_t, failed));
    if (j->renewal)
        count(j->a, offsetof(gw_acme_counters_t, renewal_failures));
    uint64_t wait = GW_ACME_BACKOFF_FIRST_MS;
    for (unsigned i = 1; i < j->failures && wait < GW_ACME_BACKOFF_MAX_MS; i++)
        wait *= 2;
    if (wait > GW_ACME_BACKOFF_MAX_MS)
        wait = GW_ACME_BACKOFF_MAX_MS;
    /* jitter: between half and all of it, so that instances and name sets spread out */
    uint32_t r = 0;
    RAND_bytes((unsigned char *)&r, sizeof(r));
    wait = wait / 2 + (uint64_t)r % (wait / 2 + 1);
    GW_LOG_ERROR("acme_order_failed",
                 "names=%s state=%s status=%d type=%s detail=\"%s\" failures=%u retry_in_ms=%llu",
                 j->log_names, gw_acme_state_str(gw_acme_order_state(j->order)), act->status,
                 act->problem_type, act->detail, j->failures, (unsigned long long)wait);
    gw_acme_order_del(j->order);
    j->order = NULL;
    if (j->share)
        gw_acme__share_failed(j->share, wait);
    arm(j, wait);
}

static void job_step(job_t *j)
{
    if (!j->order)
        return;
    for (;;) {
        gw_acme_action_t act;
        if (gw_acme_order_next(j->order, &act) < 0) {
            arm(j, 1000); /* out of memory: try again in a while */
            return;
        }
        switch (act.what) {
        case GW_ACME_DO_SEND:
            if (!j->counted && gw_acme_order_state(j->order) == GW_ACME_S_ORDER &&
                !strcmp(act.method, "POST")) {
                /* what the cap counts: orders the server sees (RFC 8555 §7.4, newOrder) */
                gw_acme_cap_record(&j->starts, wall_ms());
                cap_save(j);
                j->counted = 1;
            }
            GW_LOG_DEBUG("acme_request", "names=%s state=%s method=%s url=%s", j->log_names,
                         gw_acme_state_str(gw_acme_order_state(j->order)), act.method, act.url);
            job_send(j, &act);
            if (j->x)
                return;
            continue; /* the order failed: its FAIL comes next */
        case GW_ACME_DO_WAIT:
            arm(j, act.delay_ms);
            return;
        case GW_ACME_DO_PUBLISH: {
            uint8_t d[32];
            unsigned dl = 0;
            if (act.type == GW_ACME_CH_HTTP_01) {
                /* in the table the cleartext listeners of every worker answer from, before
                 * the challenge is POSTed (the next SEND). The order validates its names one
                 * after the other, publishing the next only once the last is valid: the
                 * job's earlier token is done with, so a job holds one entry at a time */
                gw_http01_withdraw(j);
                if (gw_http01_publish(j, act.token, act.key_authz) < 0) {
                    gw_acme_order_transport_failed(j->order,
                                                   "the http-01 answers are full or the token "
                                                   "too long");
                    continue;
                }
            } else if (!EVP_Digest(act.key_authz, strlen(act.key_authz), d, &dl, EVP_sha256(),
                                   NULL) ||
                       gw_tls_store_set_challenge(j->store, act.name, d) < 0) {
                gw_acme_order_transport_failed(j->order,
                                               "the challenge certificate cannot be made");
                continue;
            }
            GW_LOG_INFO("acme_challenge", "names=%s name=%s type=%s", j->log_names, act.name,
                        gw_acme_challenge_str(act.type));
            if (j->share && gw_acme__share_publish(j->share, gw_acme_challenge_str(act.type),
                                                   act.name, act.token, act.key_authz) == 0)
                return; /* share_resume() goes on once the others have seen it */
            gw_acme_order_resume(j->order);
            continue;
        }
        case GW_ACME_DO_DONE: {
            gw_tls_store_clear_challenges(j->store);
            gw_http01_withdraw(j);
            int64_t v[2] = {0, 0};
            int rv = job_install(j, act.body, act.body_len);
            if (rv == GW_E_PARSE || rv == GW_E_NOMEM) {
                gw_acme_action_t f = {.status = 0,
                                      .problem_type = "h2gate:certificate",
                                      .detail =
                                          "the chain does not match the key or cannot be read"};
                job_failed(j, &f);
                return;
            }
            stored_usable(j->dir, j->names, j->names_len, NULL, v);
            GW_LOG_INFO("acme_certificate_installed",
                        "names=%s not_after=%lld dir=%s requests=%u account=%s", j->log_names,
                        (long long)v[1], j->dir, gw_acme_order_sent(j->order),
                        gw_acme_order_account(j->order));
            j->failures = 0;
            if (j->share)
                gw_acme__share_done(j->share, act.body, act.body_len, j->cert_key);
            count(j->a, offsetof(gw_acme_counters_t, issued));
            gw_acme_order_del(j->order);
            j->order = NULL;
            job_check(j); /* ARI asked at once for the new certificate, or its renewal time */
            return;
        }
        case GW_ACME_DO_FAIL:
            job_failed(j, &act);
            return;
        }
    }
}

static int stored_cert_id(const char *dir, char id[GW_ACME_ARI_MAX_ID]);

static void job_start_order(job_t *j)
{
    gw_acme_t *a = j->a;
    /* the hourly cap, on top of the backoff: a name set that keeps failing, a crowd of
     * reloads, a certificate that keeps expiring never make the server see more than a few
     * orders an hour. Attempts that never reached newOrder (the server unreachable) are not
     * counted: they cost the server nothing, and the certificate comes soon after it is back */
    int64_t now_ms = wall_ms();
    int64_t at = gw_acme_cap_next(&j->starts, a->max_orders_per_hour, now_ms);
    if (at > now_ms) {
        GW_LOG_WARN("acme_order_deferred",
                    "names=%s reason=\"%u orders in the last hour (acme.max_orders_per_hour)\" "
                    "retry_in_ms=%lld",
                    j->log_names, a->max_orders_per_hour, (long long)(at - now_ms));
        arm(j, (uint64_t)(at - now_ms));
        return;
    }
    j->counted = 0;
    /* RFC 9773 §5: a renewal names the certificate it replaces (order.c drops it when the
     * directory offers no renewalInfo, and retries without it when the server refuses it) */
    char replaces[GW_ACME_ARI_MAX_ID];
    int has_replaces = a->ari == ARI_ON && stored_cert_id(j->dir, replaces) == 0;
    EVP_PKEY_free(j->cert_key);
    /* a new key for each certificate */
    j->cert_key = a->key_type == GW_CFG_ACME_RSA_2048 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    gw_acme_params_t p = {.directory = a->directory,
                          .email = a->email,
                          .names = (const char *const *)j->names,
                          .n_names = j->names_len,
                          .challenge = a->challenge == GW_CFG_ACME_HTTP_01 ? GW_ACME_CH_HTTP_01
                                                                           : GW_ACME_CH_TLS_ALPN_01,
                          .account_key = a->account_key,
                          .cert_key = j->cert_key,
                          .replaces = has_replaces ? replaces : NULL};
    if (!j->cert_key || gw_acme_order_new(&p, &j->order) < 0) {
        ERR_clear_error();
        arm(j, 1000);
        return;
    }
    j->orders++;
    GW_LOG_INFO("acme_order_start", "names=%s directory=%s attempt=%u replaces=%s", j->log_names,
                a->directory, j->orders, has_replaces ? replaces : "-");
    job_step(j);
}

/* Whether dir holds a key of another type than key_type (key_type was changed: the stored
 * certificate is served until one with a key of the new type is issued). 1, or 0 (the same
 * type, or no key readable: stored_usable decides then). */
static int stored_key_other(const char *dir, gw_cfg_acme_key_t key_type)
{
    char kp[4200], *pem = NULL;
    size_t kl = 0;
    snprintf(kp, sizeof(kp), "%s/key.pem", dir);
    if (read_all(kp, &pem, &kl) != 0)
        return 0;
    BIO *b = BIO_new_mem_buf(pem, (int)kl);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    int other = k && !(key_type == GW_CFG_ACME_RSA_2048
                           ? EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA && EVP_PKEY_get_bits(k) == 2048
                           : EVP_PKEY_get_base_id(k) == EVP_PKEY_EC);
    EVP_PKEY_free(k);
    BIO_free(b);
    OPENSSL_cleanse(pem, kl);
    gw_free(pem);
    ERR_clear_error();
    return other;
}

/* When a certificate valid from v[0] to v[1] is renewed by acme.renew_before (ARI aside). */
static int64_t renewal_time(const gw_acme_t *a, const int64_t v[2])
{
    int halved = 0;
    return gw_acme_renew_at(v[0], v[1], a->renew_before_ms, a->renew_before_pct, &halved);
}

/* The ARI certID of the stored leaf of dir into id (RFC 9773 §4.1). 0 or a negative code (no
 * file, no Authority Key Identifier). */
static int stored_cert_id(const char *dir, char id[GW_ACME_ARI_MAX_ID])
{
    char cp[4200];
    snprintf(cp, sizeof(cp), "%s/cert.pem", dir);
    FILE *f = fopen(cp, "re");
    if (!f)
        return GW_E_IO;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    int rv = x ? gw_acme_ari_cert_id(x, id) : GW_E_PARSE;
    X509_free(x);
    ERR_clear_error();
    return rv;
}

/* Ask the server about the stored certificate: its directory first, the first time, for the
 * renewalInfo URL; the answer goes to ari_answer(). */
static void ari_ask(job_t *j)
{
    gw_acme_t *a = j->a;
    char url[2048 + GW_ACME_ARI_MAX_ID + 2], why[320];
    if (a->ari == ARI_UNKNOWN) {
        j->ari_phase = ARI_DIRECTORY;
        snprintf(url, sizeof(url), "%s", a->directory);
    } else {
        /* §4.1: the renewalInfo URL, "/", the certID */
        j->ari_phase = ARI_INFO;
        size_t n = strlen(a->ari_url);
        snprintf(url, sizeof(url), "%s%s%s", a->ari_url, n && a->ari_url[n - 1] == '/' ? "" : "/",
                 j->ari_id);
    }
    gw_acme_action_t act = {.what = GW_ACME_DO_SEND, .method = "GET", .url = url};
    if (http_send(j, &act, why, sizeof(why)) < 0)
        ari_answer(j, why);
}

/* ARI's answer (error: why it failed, or NULL: the answer is in j). A failure leaves the
 * renewal to the window picked before for this certificate, else to renew_before, and asks
 * again after a backoff (a minute, doubled up to six hours); then the job checks again. */
static void ari_answer(job_t *j, const char *error)
{
    gw_acme_t *a = j->a;
    int64_t now = (int64_t)time(NULL);
    char why[320];
    int phase = j->ari_phase;
    j->ari_phase = ARI_IDLE;
    if (!error && j->status != 200) {
        snprintf(why, sizeof(why), "%s answered %d",
                 phase == ARI_DIRECTORY ? "the directory" : "renewalInfo", j->status);
        error = why;
    }
    if (!error && phase == ARI_DIRECTORY) {
        char *u = NULL;
        int rv = gw_acme_ari_directory(j->body.base, j->body.len, &u);
        if (rv == GW_E_NOENT) {
            a->ari = ARI_NONE;
            GW_LOG_INFO("acme_ari_unsupported",
                        "directory=%s reason=\"no renewalInfo in the directory: renewals follow "
                        "acme.renew_before\"",
                        a->directory);
            job_check(j);
            return;
        }
        if (rv == 0) {
            gw_free(a->ari_url);
            a->ari_url = u;
            a->ari = ARI_ON;
            ari_ask(j); /* now the certificate's renewalInfo */
            return;
        }
        error = rv == GW_E_NOMEM ? "out of memory"
                                 : "the directory is not JSON or its "
                                   "renewalInfo is not a URL";
    }
    gw_acme_ari_t w;
    if (!error && gw_acme_ari_parse(j->body.base, j->body.len,
                                    j->has_retry_after ? j->retry_after : NULL, now, &w) < 0)
        error = "the answer is not a renewalInfo object with a suggestedWindow whose end is "
                "after its start";
    if (error) {
        j->ari_failures++;
        uint64_t wait = 60;
        for (unsigned i = 1; i < j->ari_failures && wait < GW_ACME_ARI_RETRY_DEFAULT_S; i++)
            wait *= 2;
        if (wait > GW_ACME_ARI_RETRY_DEFAULT_S)
            wait = GW_ACME_ARI_RETRY_DEFAULT_S;
        j->ari_next = now + (int64_t)wait;
        GW_LOG_WARN("acme_ari_failed",
                    "names=%s cert_id=%s reason=\"%s\" failures=%u retry_in_s=%llu fallback=%s",
                    j->log_names, j->ari_id, error, j->ari_failures, (unsigned long long)wait,
                    j->ari_pick ? "last_window" : "renew_before");
        job_check(j);
        return;
    }
    j->ari_failures = 0;
    j->ari_next = now + (int64_t)w.retry_s;
    if (w.start != j->ari_start || w.end != j->ari_end || !j->ari_pick) {
        /* §4.2: a time chosen uniformly in the window, kept while the window stays */
        uint64_t r = 0;
        RAND_bytes((unsigned char *)&r, sizeof(r));
        j->ari_start = w.start;
        j->ari_end = w.end;
        j->ari_pick = gw_acme_ari_pick(&w, r);
        GW_LOG_INFO("acme_ari_window",
                    "names=%s cert_id=%s start=%lld end=%lld renew_at=%lld retry_in_s=%llu "
                    "explanation=\"%s\"",
                    j->log_names, j->ari_id, (long long)w.start, (long long)w.end,
                    (long long)j->ari_pick, (unsigned long long)w.retry_s, w.explanation);
    }
    job_check(j);
}

/* The longest single wait of the timer: the renewal time is checked again at least daily. */
#define CHECK_MAX_MS (24u * 3600 * 1000)

/* An idle job: order now when no usable certificate is stored, or when its renewal time has
 * come: the time picked in ARI's window when the server offers it (asked first when due,
 * RFC 9773), else acme.renew_before (default: with a third of the lifetime left, the time
 * Let's Encrypt advises, from a 90-day certificate 30 days before its end); else wait for
 * the earlier of that time and ARI's next question. */
static void job_check(job_t *j)
{
    gw_acme_t *a = j->a;
    if (j->ari_phase != ARI_IDLE || j->x)
        return; /* a question is under way: its answer checks again */
    int64_t v[2] = {0, 0}, now = (int64_t)time(NULL);
    j->renewal = 0;
    if (stored_key_other(j->dir, j->a->key_type)) {
        GW_LOG_INFO("acme_key_type_changed", "names=%s key_type=%s", j->log_names,
                    j->a->key_type == GW_CFG_ACME_RSA_2048 ? "rsa-2048" : "ec-p256");
    } else if (stored_usable(j->dir, j->names, j->names_len, NULL, v)) {
        int halved = 0;
        int64_t renew_at =
            gw_acme_renew_at(v[0], v[1], a->renew_before_ms, a->renew_before_pct, &halved);
        const char *by = "renew_before";
        if (halved && j->halved_for != v[1]) {
            j->halved_for = v[1];
            GW_LOG_WARN("acme_renew_before_too_long",
                        "names=%s renew_before_s=%llu lifetime_s=%lld renew_at=%lld "
                        "reason=\"renew_before is not shorter than the certificate's lifetime: "
                        "renewing at half of it\"",
                        j->log_names, (unsigned long long)(a->renew_before_ms / 1000),
                        (long long)(v[1] - v[0]), (long long)renew_at);
        }
        char id[GW_ACME_ARI_MAX_ID];
        int ari = a->ari != ARI_NONE && stored_cert_id(j->dir, id) == 0;
        if (ari && strcmp(id, j->ari_id) != 0) {
            /* another certificate than the one asked about: a new question, a new pick */
            snprintf(j->ari_id, sizeof(j->ari_id), "%s", id);
            j->ari_next = 0;
            j->ari_failures = 0;
            j->ari_pick = j->ari_start = j->ari_end = 0;
        }
        if (ari && j->ari_next <= now) {
            ari_ask(j);
            return;
        }
        if (ari && j->ari_pick) {
            renew_at = j->ari_pick;
            by = "ari";
        }
        if (renew_at > now) {
            int64_t wake = ari && j->ari_next < renew_at ? j->ari_next : renew_at;
            uint64_t ms = (uint64_t)(wake - now) * 1000;
            arm(j, ms < CHECK_MAX_MS ? ms : CHECK_MAX_MS);
            return;
        }
        GW_LOG_INFO("acme_renewal_due", "names=%s not_after=%lld renew_at=%lld by=%s", j->log_names,
                    (long long)v[1], (long long)renew_at, by);
        j->renewal = 1;
    }
    if (!j->a->account_key) {
        GW_LOG_ERROR("acme_order_skipped",
                     "names=%s reason=\"no account key (see acme_account_key_invalid)\"",
                     j->log_names);
        return;
    }
    if (j->share)
        gw_acme__share_want(j->share); /* another instance's, or an order under the lock */
    else
        job_start_order(j);
}

static void on_timer(uv_timer_t *t)
{
    job_t *j = t->data;
    if (j->order) {
        gw_acme_order_resume(j->order); /* a poll's wait is over */
        job_step(j);
    } else {
        job_check(j); /* a backoff or the wait for a renewal is over */
    }
}

/* ---- the cluster's hooks (acme/shared.c) ---------------------------------------------------- */

static void share_order(void *ud)
{
    job_t *j = ud;
    if (!j->order)
        job_start_order(j);
}

/* Whether the stored chain serves every name and is not due: by renew_before, and by ARI
 * when it is the certificate whose window's time has come (the one this job found due: the
 * cluster's copy of it is not a fresh one). */
static int share_fresh(void *ud, const char *chain, size_t cl, const char *kpem, size_t kl)
{
    job_t *j = ud;
    int64_t v[2], now = (int64_t)time(NULL);
    if (gw_tls_pem_usable(chain, cl, kpem, kl, (const char *const *)j->names, j->names_len, now,
                          &v[0], &v[1]) != 0 ||
        renewal_time(j->a, v) <= now)
        return 0;
    if (!j->ari_pick || j->ari_pick > now || j->a->ari != ARI_ON)
        return 1;
    BIO *b = BIO_new_mem_buf(chain, (int)cl);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    char id[GW_ACME_ARI_MAX_ID];
    int same = x && gw_acme_ari_cert_id(x, id) == 0 && strcmp(id, j->ari_id) == 0;
    X509_free(x);
    BIO_free(b);
    ERR_clear_error();
    return !same;
}

/* Another instance's certificate: the same path as one of ours, into the state folder and the
 * store; the renewal's timer from its dates (not from the folder, which may not be writable). */
static void share_install(void *ud, const char *chain, size_t cl, const char *kpem, size_t kl)
{
    job_t *j = ud;
    char cp[4200], kp[4200];
    snprintf(cp, sizeof(cp), "%s/cert.pem", j->dir);
    snprintf(kp, sizeof(kp), "%s/key.pem", j->dir);
    if (mkdirs_0700(j->dir) != 0 || write_all(kp, kpem, kl) != 0 || write_all(cp, chain, cl) != 0)
        GW_LOG_ERROR("acme_state_failed", "names=%s dir=%s reason=\"%s\"", j->log_names, j->dir,
                     strerror(errno));
    int64_t v[2] = {0, 0}, now = (int64_t)time(NULL);
    if (gw_tls_pem_usable(chain, cl, kpem, kl, (const char *const *)j->names, j->names_len, now,
                          &v[0], &v[1]) != 0 ||
        gw_tls_store_set_pem(j->store, chain, cl, kpem, kl) < 0) {
        ERR_clear_error();
        arm(j, GW_ACME_BACKOFF_FIRST_MS); /* checked again soon */
        return;
    }
    GW_LOG_INFO("acme_certificate_installed", "names=%s not_after=%lld dir=%s source=cluster",
                j->log_names, (long long)v[1], j->dir);
    j->failures = 0;
    char id[GW_ACME_ARI_MAX_ID];
    if (j->a->ari == ARI_ON && stored_cert_id(j->dir, id) == 0 &&
        stored_usable(j->dir, j->names, j->names_len, NULL, v)) {
        /* written: ARI is asked about it as about one of ours (job_check), else it would wait
         * for renew_before */
        job_check(j);
        return;
    }
    uint64_t ms = (uint64_t)(renewal_time(j->a, v) - now) * 1000;
    arm(j, ms < CHECK_MAX_MS ? ms : CHECK_MAX_MS);
}

static int share_challenge(void *ud, const char *type, const char *name, const char *key_authz)
{
    job_t *j = ud;
    uint8_t d[32];
    unsigned dl = 0;
    size_t i = 0;
    while (i < j->names_len && strcasecmp(j->names[i], name) != 0)
        i++;
    if (i == j->names_len)
        return GW_E_NOENT; /* not one of this name set's names */
    if (!strcmp(type, "http-01")) {
        /* RFC 8555 §8.1: the key authorization is the token "." the account key's
         * thumbprint; the token is what the validator asks for */
        const char *dot = strchr(key_authz, '.');
        char token[GW_HTTP01_TOKEN_MAX + 1];
        size_t tl = dot ? (size_t)(dot - key_authz) : 0;
        if (!tl || tl > GW_HTTP01_TOKEN_MAX)
            return GW_E_PARSE;
        memcpy(token, key_authz, tl);
        token[tl] = 0;
        return gw_http01_publish(j, token, key_authz);
    }
    /* RFC 8737 §3: the acmeIdentifier extension holds the SHA-256 of the key authorization */
    if (!EVP_Digest(key_authz, strlen(key_authz), d, &dl, EVP_sha256(), NULL))
        return GW_E_NOMEM;
    return gw_tls_store_set_challenge(j->store, name, d);
}

static void share_clear(void *ud)
{
    job_t *j = ud;
    if (!j->order) {
        gw_tls_store_clear_challenges(j->store);
        gw_http01_withdraw(j);
    }
}

static void share_resume(void *ud)
{
    job_t *j = ud;
    /* only an order waiting for its publish (a late answer for an order a reload replaced
     * must not step one that has a request in flight) */
    if (!j->order || j->x || gw_acme_order_state(j->order) != GW_ACME_S_PUBLISH)
        return;
    gw_acme_order_resume(j->order);
    job_step(j);
}

/* The cluster's account key: ordered with from now on, and written as this instance's
 * account.key (a restart without Redis keeps the account). */
static int share_account(void *ud, const char *kpem, size_t kl)
{
    job_t *j = ud;
    gw_acme_t *a = j->a;
    BIO *b = BIO_new_mem_buf(kpem, (int)kl);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    char *jwk = NULL;
    if (!k || gw_acme_jwk(k, &jwk) < 0) { /* only a P-256 key has a JWK here */
        EVP_PKEY_free(k);
        ERR_clear_error();
        return GW_E_UNSUPPORTED;
    }
    gw_free(jwk);
    if (a->account_key && EVP_PKEY_eq(a->account_key, k) == 1) {
        EVP_PKEY_free(k);
        return 0;
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/account.key", a->state);
    if (write_all(path, kpem, kl) != 0)
        GW_LOG_WARN("acme_state_failed", "file=%s reason=\"%s\"", path, strerror(errno));
    EVP_PKEY_free(a->account_key); /* orders under way hold their own reference */
    a->account_key = k;
    GW_LOG_INFO("acme_cluster_account", "names=%s source=cluster file=%s", j->log_names, path);
    ERR_clear_error();
    return 0;
}

static int share_account_pem(void *ud, char **pem, size_t *len)
{
    job_t *j = ud;
    BIO *b = BIO_new(BIO_s_mem());
    char *p = NULL;
    long n = 0;
    int rv = GW_E_NOMEM;
    if (j->a->account_key && b &&
        PEM_write_bio_PrivateKey(b, j->a->account_key, NULL, NULL, 0, NULL, NULL) &&
        (n = BIO_get_mem_data(b, &p)) > 0 && (*pem = gw_malloc((size_t)n)) != NULL) {
        memcpy(*pem, p, (size_t)n);
        *len = (size_t)n;
        rv = 0;
    }
    if (p && n > 0)
        OPENSSL_cleanse(p, (size_t)n);
    BIO_free(b);
    ERR_clear_error();
    return rv;
}

static const gw_acme_share_cbs_t SHARE_CBS = {.order = share_order,
                                              .account = share_account,
                                              .account_pem = share_account_pem,
                                              .fresh = share_fresh,
                                              .install = share_install,
                                              .challenge = share_challenge,
                                              .clear = share_clear,
                                              .resume = share_resume};

/* The job's share, named by its folder (the same name set has the same on every instance). */
static void job_share(job_t *j)
{
    const char *id = strrchr(j->dir, '/');
    if (gw_acme__share_new(j->a->shared, id ? id + 1 : j->dir, &SHARE_CBS, j, &j->share) < 0) {
        j->share = NULL;
        GW_LOG_ERROR("acme_cluster_unavailable",
                     "names=%s reason=\"out of memory\" action=\"ordering alone\"", j->log_names);
    }
}

/* ---- the client's life ------------------------------------------------------------------------
 */

int gw_acme_new(uv_loop_t *loop, gw_acme_t **out)
{
    gw_acme_t *a = gw_calloc(1, sizeof(*a));
    if (!a)
        return GW_E_NOMEM;
    a->loop = loop;
    if (gw_acme__shared_new(loop, &a->shared) < 0) {
        gw_free(a);
        return GW_E_NOMEM;
    }
    *out = a;
    return 0;
}

void gw_acme_set_cluster(gw_acme_t *a, gw_cluster_t *c)
{
    if (a)
        gw_acme__shared_set_cluster(a->shared, c);
}

void gw_acme_set_counters(gw_acme_t *a, gw_acme_counters_t *c)
{
    a->counters = c;
}

static void drop_all(gw_acme_t *a)
{
    for (size_t i = 0; i < a->jobs_len; i++)
        job_close(a->jobs[i]);
    gw_free(a->jobs);
    a->jobs = NULL;
    a->jobs_len = 0;
    gw_back_del(a->back); /* its handles close on the loop */
    a->back = NULL;
    gw_free(a->origin);
    gw_free(a->srv.host);
    gw_free(a->up.tls_ca);
    gw_free(a->directory);
    gw_free(a->directory_ca);
    gw_free(a->email);
    gw_free(a->state);
    gw_free(a->ari_url);
    a->ari_url = NULL;
    a->ari = ARI_UNKNOWN;
    a->origin = a->srv.host = a->up.tls_ca = NULL;
    a->directory = a->directory_ca = a->email = a->state = NULL;
    EVP_PKEY_free(a->account_key);
    a->account_key = NULL;
}

static int streq(const char *x, const char *y)
{
    return (!x && !y) || (x && y && !strcmp(x, y));
}

/* Whether the client runs for the same section and the same name sets, in listener order. */
static int same_setup(const gw_acme_t *a, const gw_config_t *cfg)
{
    /* sharing turned on or off (cluster or shared_key): the jobs are made again */
    if (a->jobs_shared != (cfg->cluster.enabled && cfg->acme.has_shared_key))
        return 0;
    if (!a->directory || !streq(a->directory, cfg->acme.directory) ||
        !streq(a->directory_ca, cfg->acme.directory_ca) || !streq(a->email, cfg->acme.email) ||
        !streq(a->state, cfg->acme.state) || a->challenge != cfg->acme.challenge ||
        a->key_type != cfg->acme.key_type)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < cfg->listen_len; i++) {
        const gw_cfg_tls_t *t = cfg->listen[i].tls;
        if (!t || !t->acme)
            continue;
        if (k >= a->jobs_len || a->jobs[k]->names_len != t->acme_len)
            return 0;
        for (size_t n = 0; n < t->acme_len; n++)
            if (strcmp(a->jobs[k]->names[n], t->acme[n]) != 0)
                return 0;
        k++;
    }
    return k == a->jobs_len;
}

/* The directory URL's origin as back/'s one upstream: "https://HOST[:PORT]/…". */
static int setup_origin(gw_acme_t *a)
{
    const char *u = a->directory;
    a->https = !strncmp(u, "https://", 8);
    const char *h = u + (a->https ? 8 : 7);
    size_t hl = strcspn(h, "/?#");
    if (hl == 0 || hl >= sizeof(a->srv.addr.text) - 8)
        return GW_E_INVAL;
    char auth[128], hostport[128];
    memcpy(auth, h, hl);
    auth[hl] = 0;
    /* the port: after the last colon outside an IPv6 literal's brackets */
    const char *close = strrchr(auth, ']');
    const char *colon = strrchr(close ? close : auth, ':');
    int hn = colon ? snprintf(hostport, sizeof(hostport), "%s", auth)
                   : snprintf(hostport, sizeof(hostport), "%s:%s", auth, a->https ? "443" : "80");
    if (hn < 0 || (size_t)hn >= sizeof(a->srv.addr.text))
        return GW_E_INVAL;
    size_t ol = (size_t)(h - u) + hl;
    if (!(a->origin = gw_malloc(ol + 1)))
        return GW_E_NOMEM;
    memcpy(a->origin, u, ol);
    a->origin[ol] = 0;
    const char *pc = strrchr(hostport, ':');
    size_t host_len = (size_t)(pc - hostport);
    const char *hs = hostport;
    if (hs[0] == '[') {
        hs++;
        host_len -= 2;
    }
    if (!(a->srv.host = gw_malloc(host_len + 1)))
        return GW_E_NOMEM;
    memcpy(a->srv.host, hs, host_len);
    a->srv.host[host_len] = 0;
    int rv = gw_parse_addr(hostport, &a->srv.addr);
    if (rv == GW_E_NOENT) { /* a name: resolved at each dial */
        memset(&a->srv.addr, 0, sizeof(a->srv.addr));
        memcpy(a->srv.addr.text, hostport, (size_t)hn + 1);
    } else if (rv < 0) {
        return GW_E_INVAL;
    }
    a->srv.weight = 1;
    gw_cfg_upstream_t *up = &a->up;
    up->name = "acme";
    up->servers = &a->srv;
    up->servers_len = 1;
    up->tls = a->https;
    up->tls_verify = 1;
    up->tls_ca = a->directory_ca ? gw_strdup(a->directory_ca) : NULL;
    up->max_connections = 2;
    up->max_idle = 1;
    up->idle_timeout_ms = 30000;
    up->idle_purge_ms = 5000;
    up->max_requests_per_connection = 1000;
    up->connect_timeout_ms = 10000;
    up->response_timeout_ms = 30000;
    up->read_timeout_ms = 30000;
    up->queue_size = 64;
    up->queue_timeout_ms = 30000;
    up->retries = 1;
    up->pipeline = 1;
    /* a server that fails is retried by the jobs' backoff, never ejected by passive health */
    up->fail_threshold = UINT32_MAX;
    up->eject_ms = 1000;
    a->bcfg.upstreams = up;
    a->bcfg.upstreams_len = 1;
    return gw_back_new(a->loop, &a->bcfg, &a->back);
}

/* The account key from the state folder, made (0600) on the first run. */
static EVP_PKEY *account_key(const char *state)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/account.key", state);
    FILE *f = fopen(path, "re");
    EVP_PKEY *k = NULL;
    if (f) {
        k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        if (!k)
            GW_LOG_ERROR("acme_account_key_invalid", "file=%s reason=\"not a PEM private key\"",
                         path);
        ERR_clear_error();
        return k;
    }
    if (errno != ENOENT) {
        GW_LOG_ERROR("acme_account_key_invalid", "file=%s reason=\"%s\"", path, strerror(errno));
        return NULL;
    }
    k = EVP_EC_gen("P-256");
    BIO *b = BIO_new(BIO_s_mem());
    char *pem = NULL;
    long n = 0;
    if (!k || !b || !PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) ||
        (n = BIO_get_mem_data(b, &pem)) <= 0 || write_all(path, pem, (size_t)n) != 0) {
        GW_LOG_ERROR("acme_account_key_invalid", "file=%s reason=\"cannot be written: %s\"", path,
                     strerror(errno));
        EVP_PKEY_free(k);
        k = NULL;
    } else {
        GW_LOG_INFO("acme_account_key_made", "file=%s", path);
    }
    BIO_free(b);
    ERR_clear_error();
    return k;
}

void gw_acme_apply(gw_acme_t *a, const gw_config_t *cfg, gw_tls_store_t *const *stores)
{
    if (a->closing)
        return;
    /* the key file's bytes as this generation read them (a reload may change them alone) */
    gw_acme__shared_set_key(a->shared,
                            cfg->acme.has_shared_key ? cfg->acme.shared_key_bytes : NULL);
    gw_acme__shared_set_check(a->shared, cfg->acme.cluster_check_interval_ms);
    /* when to order: taken by the jobs at their next check (an idle one checks below) */
    a->renew_before_ms = cfg->acme.renew_before_ms;
    a->renew_before_pct = cfg->acme.renew_before_pct;
    a->max_orders_per_hour = cfg->acme.max_orders_per_hour;
    if (same_setup(a, cfg)) {
        /* the orders go on; what they install goes to the new generation's stores */
        size_t k = 0;
        for (size_t i = 0; i < cfg->listen_len; i++) {
            if (!stores[i])
                continue;
            job_t *j = a->jobs[k++];
            gw_tls_store_clear_challenges(j->store);
            gw_tls_store_ref(stores[i]);
            gw_tls_store_unref(j->store);
            j->store = stores[i];
            gw_acme_state_t st = j->order ? gw_acme_order_state(j->order) : GW_ACME_S_DONE;
            if (st == GW_ACME_S_CHALLENGE || st == GW_ACME_S_POLL_AUTHZ) {
                /* its challenge was published in the old store, which new handshakes no
                 * longer reach: a new order publishes in the new one */
                gw_acme_order_del(j->order);
                j->order = NULL;
                gw_http01_withdraw(j);
                uv_timer_stop(&j->timer);
                if (j->x) {
                    gw_back_cancel(j->x);
                    j->x = NULL;
                }
                job_start_order(j);
            } else if (!j->order && j->failures == 0) {
                /* idle: its stored certificate may have gone or expired meanwhile, and
                 * renew_before may have changed */
                job_check(j);
            }
        }
        return;
    }
    drop_all(a);
    a->jobs_shared = 0;
    if (!cfg->acme.enabled)
        return;
    size_t n = 0;
    for (size_t i = 0; i < cfg->listen_len; i++)
        n += stores[i] != NULL;
    if (n == 0)
        return;
    a->directory = gw_strdup(cfg->acme.directory);
    a->directory_ca = cfg->acme.directory_ca ? gw_strdup(cfg->acme.directory_ca) : NULL;
    a->email = cfg->acme.email ? gw_strdup(cfg->acme.email) : NULL;
    a->state = gw_strdup(cfg->acme.state);
    a->challenge = cfg->acme.challenge;
    a->key_type = cfg->acme.key_type;
    a->jobs = gw_calloc(n, sizeof(*a->jobs));
    if (!a->directory || !a->state || !a->jobs || setup_origin(a) < 0) {
        GW_LOG_ERROR("acme_failed",
                     "directory=%s reason=\"cannot set up the client (out of "
                     "memory, or directory_ca cannot be loaded: see back_tls_ca_invalid)\"",
                     cfg->acme.directory);
        drop_all(a);
        return;
    }
    a->account_key = account_key(a->state);
    a->jobs_shared = cfg->cluster.enabled && cfg->acme.has_shared_key;
    for (size_t i = 0; i < cfg->listen_len; i++) {
        const gw_cfg_tls_t *t = cfg->listen[i].tls;
        if (!stores[i])
            continue;
        job_t *j = gw_calloc(1, sizeof(*j));
        if (!j)
            break;
        j->a = a;
        gw_bytes_init(&j->body, GW_ACME_MAX_BODY);
        j->names = gw_calloc(t->acme_len, sizeof(*j->names));
        for (size_t k = 0; j->names && k < t->acme_len; k++)
            if ((j->names[j->names_len] = gw_strdup(t->acme[k])) != NULL)
                j->names_len++;
        if (!j->names || j->names_len != t->acme_len ||
            names_dir(a->state, t->acme, t->acme_len, j->dir, sizeof(j->dir)) < 0 ||
            uv_timer_init(a->loop, &j->timer) != 0) {
            job_free(j);
            break;
        }
        j->timer.data = j;
        j->timer_open = 1;
        log_names(j->log_names, sizeof(j->log_names), j->names, j->names_len);
        char op[4200], *text = NULL;
        size_t tl = 0;
        snprintf(op, sizeof(op), "%s/orders", j->dir);
        if (read_all(op, &text, &tl) == 0) /* the orders of the last hour, before a restart */
            gw_acme_cap_parse(&j->starts, text, tl);
        gw_free(text);
        gw_tls_store_ref(stores[i]);
        j->store = stores[i];
        if (cfg->cluster.enabled && cfg->acme.has_shared_key)
            job_share(j);
        a->jobs[a->jobs_len++] = j;
        job_check(j); /* a usable stored certificate: no order until its renewal */
    }
}

void gw_acme_close(gw_acme_t *a)
{
    if (!a)
        return;
    a->closing = 1;
    /* the jobs free themselves when their timers have closed, back/ when its handles have:
     * neither refers to a afterwards */
    drop_all(a);
    gw_acme__shared_del(a->shared); /* the shares no longer refer to it */
    gw_free(a);
}
