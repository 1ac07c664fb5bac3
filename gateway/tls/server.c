/* tls/server.c — the server role: listener contexts (certificates chosen by SNI, versions,
 * ciphers, ALPN selection, session tickets with rotating keys) and the self-signed certificate
 * of the demo config (see tls.h). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "tls/tls_internal.h"

typedef struct {
    SSL_CTX *ctx;
    char **names;
    size_t names_len;
} cert_ent_t;

/* The context OpenSSL's ticket callback keys the ticket's HMAC-SHA256 in (see set_mac) */
#ifdef OPENSSL_NO_DEPRECATED_3_0
typedef EVP_MAC_CTX ticket_mac_t;
#else
typedef HMAC_CTX ticket_mac_t;
#endif

/* A session ticket key (RFC 5077 layout of OpenSSL's callback: name, AES-CBC, HMAC-SHA256).
 * Keys made here are AES-256 with 32-byte HMAC keys; keys from tls.ticket_keys may be AES-128
 * with 16-byte HMAC keys (nghttpx's 48-byte format). */
typedef struct {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
    uint64_t born_ms;
    int valid;
    unsigned key_len; /* AES and HMAC key bytes: 16 or 32 */
    /* the HMAC keyed once, copied into each ticket's context (key_mac_make); NULL: keyed per
     * ticket (the EVP_MAC callback, or no memory). Owned: key_mac_free before it is dropped */
    ticket_mac_t *mac;
} ticket_key_t;

struct gw_tls_ctx {
    cert_ent_t *certs; /* certs[0] is the default */
    size_t certs_len;
    unsigned char alpn[64];
    size_t alpn_len;
    /* Ticket keys rotate every rotation_ms: tickets of the current key are accepted, those of
     * the previous one accepted and renewed, older ones refused (full handshake). Workers share
     * the context, hence the lock. */
    pthread_mutex_t ticket_lock;
    ticket_key_t keys[2]; /* [0] current, [1] previous */
    uint64_t rotation_ms;
    /* tls.ticket_keys: the operator's keys, [0] encrypts, all decrypt, nothing rotates (the
     * instances that share the file resume each other's sessions); NULL: keys[] above */
    ticket_key_t *file_keys;
    size_t file_keys_n;
    gw_tls_keyring_t *ring; /* shared keys (the cluster's); used while not empty */
    gw_tls_store_t *store;  /* tls.acme: certs[0] serves from it (one reference), else NULL */
    /* what certs[0] was made from, and its session id context: a store's certificates are put
     * in contexts of the same settings (store_ctx_make); tls outlives c (the generation's) */
    const gw_cfg_tls_t *tls;
    unsigned char sid[SSL_MAX_SID_CTX_LENGTH];
    unsigned sid_len;
    /* AES-128-CBC and AES-256-CBC fetched once: EVP_aes_*_cbc() are legacy objects that
     * OpenSSL 3 looks up in the provider store again on every EVP_EncryptInit_ex */
    EVP_CIPHER *aes_cbc[2];
    EVP_MD *sha256; /* the tickets' HMAC digest, fetched once (see ticket_mac_t) */
};

struct gw_tls_keyring {
    pthread_mutex_t lock;
    EVP_MD *sha256; /* the keys' HMAC digest (key_mac_make) */
    ticket_key_t keys[GW_TLS_KEYRING_MAX];
    size_t n;
};

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t (*clock_ms)(void) = mono_ms;

#ifdef GW_TEST_API
void gw_tls__set_clock(uint64_t (*now_ms)(void))
{
    clock_ms = now_ms ? now_ms : mono_ms;
}
#endif

static uint64_t wall_ms(void)
{
    return clock_ms();
}

static void key_mac_make(ticket_key_t *k, const EVP_MD *md);
static void key_mac_free(ticket_key_t *k);

static int new_ticket_key(ticket_key_t *k, uint64_t born_ms, const EVP_MD *md)
{
    if (RAND_bytes(k->name, sizeof(k->name)) != 1 || RAND_bytes(k->aes, sizeof(k->aes)) != 1 ||
        RAND_bytes(k->hmac, sizeof(k->hmac)) != 1)
        return -1;
    k->born_ms = born_ms;
    k->valid = 1;
    k->key_len = 32;
    key_mac_make(k, md);
    return 0;
}

/* Lazy rotation, under the lock: no timer, nothing runs while no handshakes happen. A new key
 * is born at `now`, the same reading the test uses: with a second clock reading it could be
 * born after `now`, and the unsigned difference then wrapped to a huge age, which rotated
 * keys in an endless loop and hung the worker (a handshake every few seconds, one in about a
 * hundred; issue 4's ticket test timing out under load). */
static void rotate_if_due(gw_tls_ctx_t *c)
{
    uint64_t now = wall_ms();
    while (now >= c->keys[0].born_ms && now - c->keys[0].born_ms >= c->rotation_ms) {
        ticket_key_t next;
        if (new_ticket_key(&next, now, c->sha256) < 0)
            return;
        /* a key older than two periods is dropped, not kept as "previous" */
        int stale = now - c->keys[0].born_ms >= 2 * c->rotation_ms;
        key_mac_free(&c->keys[1]);
        if (stale)
            key_mac_free(&c->keys[0]);
        c->keys[1] = stale ? (ticket_key_t){0} : c->keys[0];
        c->keys[0] = next;
        GW_LOG_DEBUG("tls_ticket_key_rotated", "period_ms=%llu",
                     (unsigned long long)c->rotation_ms);
    }
}

/* The ticket's HMAC-SHA256, keyed by the callback. OpenSSL 3 has two ticket callbacks. The
 * EVP_MAC one names the digest by a string, which the HMAC provider looks up in the provider
 * store on every call (EVP_MD_fetch, 9k instructions; a MAC context takes no EVP_MD), and
 * OpenSSL fetches the "HMAC" MAC for every ticket before calling it: about 20k instructions of
 * look-ups per ticket, two tickets per resumed TLS 1.3 handshake. The HMAC_CTX one is keyed
 * with the EVP_MD fetched once. It is deprecated since 3.0 but still in every 3.x (nginx's
 * ssl_session_ticket_key and h2o use it), hence the local pragma below; an OpenSSL built
 * without deprecated APIs gets the EVP_MAC callback. */
#ifdef OPENSSL_NO_DEPRECATED_3_0
static int set_mac(const gw_tls_ctx_t *c, EVP_MAC_CTX *hctx, const ticket_key_t *k)
{
    (void)c;
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, k->key_len);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, params);
}

static void key_mac_make(ticket_key_t *k, const EVP_MD *md)
{
    (void)md;
    k->mac = NULL;
}

static void key_mac_free(ticket_key_t *k)
{
    k->mac = NULL;
}
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Keying an HMAC hashes the key's two padded blocks into three new digest contexts (5.7k
 * instructions in callgrind); a copy of one keyed once duplicates the three (1.6k). A ticket
 * key's context is only read by the copies, so worker threads share it. */
static void key_mac_make(ticket_key_t *k, const EVP_MD *md)
{
    HMAC_CTX *h = HMAC_CTX_new();
    if (h && HMAC_Init_ex(h, k->hmac, (int)k->key_len, md, NULL) != 1) {
        HMAC_CTX_free(h);
        h = NULL;
        ERR_clear_error();
    }
    k->mac = h;
}

static void key_mac_free(ticket_key_t *k)
{
    HMAC_CTX_free(k->mac); /* cleanses the keyed digest states */
    k->mac = NULL;
}

static int set_mac(const gw_tls_ctx_t *c, HMAC_CTX *hctx, const ticket_key_t *k)
{
    if (k->mac)
        return HMAC_CTX_copy(hctx, k->mac);
    return HMAC_Init_ex(hctx, k->hmac, (int)k->key_len, c->sha256, NULL);
}
#pragma GCC diagnostic pop
#endif

/* The CBC IV of a new ticket and the id of a new session: bytes of a per-thread batch of CSPRNG
 * output, one RAND_bytes per 4 KiB instead of one per use (6.6k instructions of DRBG locking
 * and generation, and a getpid system call, each time; issue 42). A CBC IV must be
 * unpredictable to whoever chooses the plaintext (NIST SP 800-38A, appendix C), a session id
 * unguessable: bytes of the DRBG are, however they are batched, and each is used once. The
 * batch is per thread, so no lock; the process only forks to exec (binary upgrade), so no child
 * inherits it. */
#define RAND_POOL_BYTES 4096
static _Thread_local struct {
    unsigned char bytes[RAND_POOL_BYTES];
    size_t left; /* unused bytes at the end; zero-initialised (.tbss): empty */
} rand_pool;

static int pool_bytes(unsigned char *dst, size_t n)
{
    if (rand_pool.left < n) {
        if (RAND_bytes(rand_pool.bytes, RAND_POOL_BYTES) != 1)
            return -1;
        rand_pool.left = RAND_POOL_BYTES;
    }
    memcpy(dst, rand_pool.bytes + RAND_POOL_BYTES - rand_pool.left, n);
    rand_pool.left -= n;
    return 0;
}

/* OpenSSL draws a session id for every new session (TLS 1.2) and every ticket (TLS 1.3, where
 * the id stays inside the ticket), each a RAND_bytes of its own; this takes it from the pool.
 * *len is the longest id allowed (32); OpenSSL refuses an id its session cache already holds. */
static int session_id_cb(SSL *ssl, unsigned char *id, unsigned int *len)
{
    (void)ssl;
    return pool_bytes(id, *len) == 0;
}

/* OpenSSL's ticket callback over keys[0..n): keys[0] encrypts; a ticket of keys[0] decrypts
 * as 1, of another key as 2 (valid, renew it), of none as 0 (full handshake). */
static int ticket_crypt(const gw_tls_ctx_t *c, const ticket_key_t *keys, size_t n,
                        unsigned char key_name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                        ticket_mac_t *hctx, int enc)
{
    if (enc) {
        const ticket_key_t *k = &keys[0];
        if (pool_bytes(iv, 16) < 0) /* AES-CBC: 16 of the EVP_MAX_IV_LENGTH bytes */
            return -1;
        memcpy(key_name, k->name, 16);
        const EVP_CIPHER *cipher = c->aes_cbc[k->key_len != 16];
        if (EVP_EncryptInit_ex(cctx, cipher, NULL, k->aes, iv) == 1 && set_mac(c, hctx, k) == 1)
            return 1;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const ticket_key_t *k = &keys[i];
        if (k->valid && !memcmp(key_name, k->name, 16)) {
            const EVP_CIPHER *cipher = c->aes_cbc[k->key_len != 16];
            if (set_mac(c, hctx, k) == 1 && EVP_DecryptInit_ex(cctx, cipher, NULL, k->aes, iv) == 1)
                return i == 0 ? 1 : 2;
            return -1;
        }
    }
    return 0;
}

static int ticket_keys_crypt(gw_tls_ctx_t *c, unsigned char key_name[16], unsigned char *iv,
                             EVP_CIPHER_CTX *cctx, ticket_mac_t *hctx, int enc)
{
    int rv;
    if (c->file_keys) /* never changes: no lock */
        return ticket_crypt(c, c->file_keys, c->file_keys_n, key_name, iv, cctx, hctx, enc);
    if (c->ring) {
        pthread_mutex_lock(&c->ring->lock);
        size_t n = c->ring->n;
        rv = n ? ticket_crypt(c, c->ring->keys, n, key_name, iv, cctx, hctx, enc) : 0;
        pthread_mutex_unlock(&c->ring->lock);
        if (n)
            return rv;
    }
    pthread_mutex_lock(&c->ticket_lock);
    rotate_if_due(c);
    rv = ticket_crypt(c, c->keys, 2, key_name, iv, cctx, hctx, enc);
    pthread_mutex_unlock(&c->ticket_lock);
    return rv;
}

static int ticket_cb(SSL *ssl, unsigned char key_name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     ticket_mac_t *hctx, int enc)
{
    gw_tls_ctx_t *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    int rv = ticket_keys_crypt(c, key_name, iv, cctx, hctx, enc);
    /* RFC 8446 §4.6.1, Appendix C.4: a TLS 1.3 client uses a ticket once, so a resumed
     * connection needs a new one, or every other reconnect is a full handshake. OpenSSL sends
     * it only when the key callback asks to renew (2); TLS 1.2 keeps renewing only tickets of
     * an older key. */
    if (!enc && rv == 1 && SSL_version(ssl) == TLS1_3_VERSION)
        rv = 2;
    return rv;
}

int gw_tls_keyring_new(gw_tls_keyring_t **out)
{
    gw_tls_keyring_t *r = gw_calloc(1, sizeof(*r));
    if (!r)
        return GW_E_NOMEM;
    r->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!r->sha256) {
        gw_free(r);
        return GW_E_IO;
    }
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return 0;
}

void gw_tls_keyring_del(gw_tls_keyring_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < GW_TLS_KEYRING_MAX; i++)
        key_mac_free(&r->keys[i]);
    OPENSSL_cleanse(r->keys, sizeof(r->keys));
    EVP_MD_free(r->sha256);
    pthread_mutex_destroy(&r->lock);
    gw_free(r);
}

int gw_tls_keyring_set(gw_tls_keyring_t *r, const uint8_t *keys, size_t n)
{
    if (n > GW_TLS_KEYRING_MAX)
        return GW_E_INVAL;
    ticket_key_t k[GW_TLS_KEYRING_MAX] = {0};
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = keys + i * GW_TLS_KEY_LEN;
        memcpy(k[i].name, p, 16);
        memcpy(k[i].aes, p + 16, 32);
        memcpy(k[i].hmac, p + 48, 32);
        k[i].key_len = 32;
        k[i].valid = 1;
        key_mac_make(&k[i], r->sha256);
    }
    ticket_key_t old[GW_TLS_KEYRING_MAX];
    pthread_mutex_lock(&r->lock);
    memcpy(old, r->keys, sizeof(old));
    memcpy(r->keys, k, sizeof(k));
    r->n = n;
    pthread_mutex_unlock(&r->lock);
    /* the old keys' contexts are used only under the lock: no handshake holds them now */
    for (size_t i = 0; i < GW_TLS_KEYRING_MAX; i++)
        key_mac_free(&old[i]);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(old, sizeof(old));
    return 0;
}

#ifdef GW_TEST_API
size_t gw_tls_keyring_len(gw_tls_keyring_t *r)
{
    pthread_mutex_lock(&r->lock);
    size_t n = r->n;
    pthread_mutex_unlock(&r->lock);
    return n;
}
#endif

void gw_tls_ctx_set_keyring(gw_tls_ctx_t *c, gw_tls_keyring_t *r)
{
    c->ring = r;
}

static void log_ssl_error(const char *event, const char *file)
{
    unsigned long e = ERR_get_error();
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    GW_LOG_ERROR(event, "file=%s reason=\"%s\"", file ? file : "-", buf);
    ERR_clear_error();
}

static int mkdirs_for(const char *path)
{
    char dir[4096];
    size_t n = strlen(path);
    if (n >= sizeof(dir))
        return -1;
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int gw_tls_make_self_signed(const char *cert_path, const char *key_path)
{
    int rv = GW_E_IO;
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    FILE *f = NULL;
    X509_EXTENSION *ext = NULL;
    if (mkdirs_for(cert_path) < 0 || mkdirs_for(key_path) < 0) {
        GW_LOG_ERROR("tls_self_signed_failed", "file=%s reason=\"%s\"", cert_path, strerror(errno));
        return GW_E_IO;
    }
    key = EVP_EC_gen("P-256");
    x = X509_new();
    if (!key || !x)
        goto fail;
    X509_set_version(x, 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 60L * 60 * 24 * 365);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1,
                               0);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"h2gate self-signed",
                               -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1");
    if (!ext || !X509_add_ext(x, ext, -1))
        goto fail;
    if (!X509_sign(x, key, EVP_sha256()))
        goto fail;
    int fd = open(key_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        if (fd >= 0)
            close(fd);
        GW_LOG_ERROR("tls_self_signed_failed", "file=%s reason=\"%s\"", key_path, strerror(errno));
        goto out;
    }
    if (!PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL))
        goto fail;
    fclose(f);
    f = fopen(cert_path, "w");
    if (!f) {
        GW_LOG_ERROR("tls_self_signed_failed", "file=%s reason=\"%s\"", cert_path, strerror(errno));
        goto out;
    }
    if (!PEM_write_X509(f, x))
        goto fail;
    GW_LOG_INFO("tls_self_signed", "certificate=%s key=%s", cert_path, key_path);
    rv = 0;
    goto out;
fail:
    log_ssl_error("tls_self_signed_failed", cert_path);
out:
    if (f)
        fclose(f);
    X509_EXTENSION_free(ext);
    X509_free(x);
    EVP_PKEY_free(key);
    return rv;
}

/* RFC 9113 §9.2.2: h2 over TLS 1.2 needs ephemeral key exchange and an AEAD; we offer only
 * such suites, so no blocklisted cipher can be negotiated at all. */
static const char default_ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                      "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                      "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    gw_tls_ctx_t *c = arg;
    if (c->store && gw_tls__store_alpn(ssl, out, outlen, in, inlen))
        return SSL_TLSEXT_ERR_OK; /* RFC 8737 §3: a tls-alpn-01 validation */
    /* server preference: walk our list in order, take the first the client offers */
    for (size_t i = 0; i < c->alpn_len; i += 1 + c->alpn[i]) {
        const unsigned char *ours = &c->alpn[i];
        for (unsigned j = 0; j < inlen; j += 1u + in[j]) {
            if (in[j] == ours[0] && j + 1 + in[j] <= inlen &&
                !memcmp(&in[j + 1], ours + 1, ours[0])) {
                *out = &in[j + 1];
                *outlen = in[j];
                return SSL_TLSEXT_ERR_OK;
            }
        }
    }
    /* RFC 7301 §3.2: no protocol in common → no_application_protocol alert */
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static int name_match(const char *pattern, const char *host)
{
    if (pattern[0] == '*' && pattern[1] == '.') {
        const char *dot = strchr(host, '.');
        return dot && strcasecmp(dot + 1, pattern + 2) == 0;
    }
    return strcasecmp(pattern, host) == 0;
}

/* The entry serving SNI name host: exact names first, then wildcards, else the default. */
static size_t pick_cert(const gw_tls_ctx_t *c, const char *host)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < c->certs_len; i++)
            for (size_t k = 0; k < c->certs[i].names_len; k++) {
                const char *n = c->certs[i].names[k];
                int wild = n[0] == '*';
                if (wild == pass && name_match(n, host))
                    return i;
            }
    return 0;
}

int gw_tls_misdirected(const gw_tls_conn_t *t, const uint8_t *authority, size_t len)
{
    if (t->client)
        return 0;
    SSL_CTX *cur = SSL_get_SSL_CTX(t->ssl);
    const gw_tls_ctx_t *c = SSL_CTX_get_app_data(cur);
    if (!c || c->certs_len < 2)
        return 0; /* one entry: one verification for every name */
    /* the host without its port (an IPv6 literal keeps its brackets: no SNI names one) */
    size_t n = len;
    if (n && authority[0] != '[') {
        const uint8_t *colon = memchr(authority, ':', n);
        if (colon)
            n = (size_t)(colon - authority);
        /* RFC 1034 §3.1: "b.test." is b.test, which routes take it for (proxy/route.c); the
         * default entry's it is not */
        if (n > 1 && authority[n - 1] == '.')
            n--;
    }
    char host[256];
    if (n >= sizeof(host) || (n && memchr(authority, 0, n)))
        return 0;
    if (n)
        memcpy(host, authority, n);
    host[n] = 0;
    SSL_CTX *want = c->certs[pick_cert(c, host)].ctx;
    if (want == cur)
        return 0;
    return ((SSL_CTX_get_verify_mode(cur) | SSL_CTX_get_verify_mode(want)) & SSL_VERIFY_PEER) != 0;
}

/* The certificate entry is chosen from the ClientHello, before OpenSSL looks for a session to
 * resume or makes a new one: the session id context checked (and stored in a new session) is
 * then the entry's, whose client_auth it stands for (peer.c), and the entry's verification
 * applies to the connection. RFC 6066 §3: ServerNameList (2-byte length), NameType host_name
 * (0), HostName (2-byte length). A name that cannot be read leaves the default entry. */
static size_t hello_entry(const gw_tls_ctx_t *c, SSL *ssl)
{
    const unsigned char *p;
    size_t len;
    char host[256];
    if (!c || c->certs_len < 2 ||
        !SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len))
        return 0;
    if (len < 5 || (size_t)((p[0] << 8) | p[1]) != len - 2 || p[2] != TLSEXT_NAMETYPE_host_name)
        return 0;
    size_t n = (size_t)((p[3] << 8) | p[4]);
    if (n == 0 || n + 5 > len || n >= sizeof(host) || memchr(p + 5, 0, n))
        return 0;
    memcpy(host, p + 5, n);
    host[n] = 0;
    return pick_cert(c, host);
}

static int client_hello_cb(SSL *ssl, int *al, void *arg)
{
    (void)al;
    gw_tls_ctx_t *c = arg;
    size_t i = hello_entry(c, ssl);
    if (i != 0) {
        SSL_set_SSL_CTX(ssl, c->certs[i].ctx);
        gw_tls__client_auth_apply(ssl, c->certs[i].ctx);
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* The entry was chosen by client_hello_cb; acknowledging the name keeps it in the session
 * (gw_tls_sni). */
static int sni_cb(SSL *ssl, int *al, void *arg)
{
    (void)ssl;
    (void)al;
    (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

/* OpenSSL's reason for the last failure (its error queue emptied), e.g. "no start line". */
void gw_tls__ssl_reason(char *dst, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(dst, cap, "%s", r ? r : "unknown reason");
    ERR_clear_error();
}

/* Whether the PEM file at path holds a certificate, a private key (the first 64 KiB looked
 * at): what a file given as the other one holds, for the message. -1 when it cannot be read
 * (errno set). */
static int pem_holds(const char *path, int *cert, int *key)
{
    char buf[65536];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        errno = EIO;
        return -1;
    }
    buf[n] = 0;
    *cert = strstr(buf, "-----BEGIN CERTIFICATE-----") != NULL;
    *key = strstr(buf, "PRIVATE KEY-----") != NULL;
    return 0;
}

/* A certificate or key file of a listener cannot be used: into errs at the position of the key
 * that names it ("FILE:LINE:COL: key '...' does not match certificate '...'"), or logged as
 * event (file=, reason=) when errs is NULL. */
void gw_tls__cert_failed(gw_config_errors_t *errs, const gw_cfg_pos_t *at, const char *event,
                         const char *file, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (errs)
        gw_config_error_add(errs, at, "%s", msg);
    else
        GW_LOG_ERROR(event, "file=%s reason=\"%s\"", file ? file : "-", msg);
}

/* Why `path`, given as `what` (certificate or key) and refused by OpenSSL, is wrong: the file
 * cannot be read, it holds the other kind of PEM, or OpenSSL's reason. */
static void file_failed(gw_config_errors_t *errs, const gw_cfg_pos_t *at, const char *event,
                        const char *what, const char *path)
{
    char why[160];
    gw_tls__ssl_reason(why, sizeof(why));
    int has_cert = 0, has_key = 0;
    int want_key = !strcmp(what, "key");
    if (pem_holds(path, &has_cert, &has_key) < 0)
        gw_tls__cert_failed(errs, at, event, path, "%s '%s' cannot be read: %s", what, path,
                            strerror(errno));
    else if (want_key && has_cert && !has_key)
        gw_tls__cert_failed(errs, at, event, path,
                            "key '%s' holds a certificate, not a private key", path);
    else if (!want_key && has_key && !has_cert)
        gw_tls__cert_failed(errs, at, event, path,
                            "certificate '%s' holds a private key, not a certificate", path);
    else
        gw_tls__cert_failed(errs, at, event, path, "%s '%s' cannot be loaded: %s", what, path, why);
}

#ifndef OPENSSL_NO_DEPRECATED_3_0
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* The CertificateVerify of every full handshake is an EVP_DigestSignInit_ex and EVP_DigestSign
 * on the context's key. Loaded from PEM, the key is a provider's: each handshake makes a new
 * EVP_PKEY_CTX for it (key-manager name look-ups over the whole name map), fetches the ECDSA
 * signature and SHA-256 by name and duplicates the provider's key context, about 67k
 * instructions (callgrind) around the 242k of the signature itself. An EC_KEY with a method of
 * its own is a "foreign" key to OpenSSL 3.0, which signs it on its legacy path: the same
 * ECDSA_sign_ex with the default implementation (the method is a copy of EC_KEY_OpenSSL()'s),
 * without the provider round. h2o's keys take that path too (neverbleed's method). */
static EC_KEY_METHOD *ec_method;
static pthread_once_t ec_method_once = PTHREAD_ONCE_INIT;

static void ec_method_init(void)
{
    ec_method = EC_KEY_METHOD_new(EC_KEY_OpenSSL()); /* lives for the process */
}

EVP_PKEY *gw_tls__legacy_ec_key(EVP_PKEY *pk, X509 *cert)
{
    if (!pk || EVP_PKEY_get_base_id(pk) != EVP_PKEY_EC)
        return NULL;
    pthread_once(&ec_method_once, ec_method_init);
    EC_KEY *ec = ec_method ? EVP_PKEY_get1_EC_KEY(pk) : NULL;
    EVP_PKEY *fk = ec ? EVP_PKEY_new() : NULL;
    if (!fk || EC_KEY_set_method(ec, ec_method) != 1 || EVP_PKEY_assign_EC_KEY(fk, ec) != 1) {
        EC_KEY_free(ec);
        goto fail;
    }
    /* fk owns ec now */
    if (cert && X509_check_private_key(cert, fk) != 1)
        goto fail;
    return fk;
fail:
    EVP_PKEY_free(fk);
    ERR_clear_error();
    return NULL;
}
#pragma GCC diagnostic pop
#else
EVP_PKEY *gw_tls__legacy_ec_key(EVP_PKEY *pk, X509 *cert)
{
    (void)pk;
    (void)cert;
    return NULL;
}
#endif

/* The context's private key, when it is an EC key, becomes such a foreign key (the same key
 * material). Left as it is on any failure: the provider's path signs as well. */
static void sign_on_legacy_path(SSL_CTX *ctx)
{
    /* SSL_CTX_use_PrivateKey drops the context's certificate when the key does not match it,
     * which gw_tls__legacy_ec_key checks first; the context takes its own reference */
    EVP_PKEY *fk =
        gw_tls__legacy_ec_key(SSL_CTX_get0_privatekey(ctx), SSL_CTX_get0_certificate(ctx));
    if (fk && SSL_CTX_use_PrivateKey(ctx, fk) != 1)
        ERR_clear_error();
    EVP_PKEY_free(fk);
}

/* The context of certificate entry cert of listener tls: versions, suites, options, the
 * certificate files, the session id context, client_auth, ALPN, tickets and the callbacks.
 * like: the context made for certs[0] (cert), whose settings a certificate of the ACME store
 * gets (store_ctx_make): no files, and the session id context and client_auth as like has
 * them (c->sid), not read from the files again. */
static SSL_CTX *make_ctx(const gw_cfg_tls_t *tls, const gw_cfg_cert_t *cert, gw_tls_ctx_t *c,
                         gw_config_errors_t *errs, SSL_CTX *like)
{
    char why[160];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &cert->certificate_at, "tls_ctx_failed", NULL,
                            "no TLS context for certificate '%s': %s", cert->certificate, why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, tls->min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    /* With the built-in lists the client's order chooses among the suites both have (as
     * nginx's and h2o's defaults do): every suite we offer is an AEAD with forward secrecy,
     * and the client knows what it computes fastest (ChaCha20 without AES instructions). Our
     * order gave browsers, which put AES-128-GCM first, OpenSSL's first TLS 1.3 suite,
     * TLS_AES_256_GCM_SHA384: a SHA-384 key schedule (3.7 % more instructions per full
     * handshake) and AES-256 for every byte after. A list the operator wrote is in the order
     * meant (a fleet sharing sessions with nghttpx needs its suite, as a TLS 1.3 session
     * resumes only with a suite of the same hash), so it stays the server's preference. */
    if (tls->ciphers || tls->ciphersuites)
        SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (!tls->session_tickets)
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    /* The chain sent is the certificate file's (SSL_CTX_use_certificate_chain_file). Without
     * NO_AUTO_CHAIN, OpenSSL builds one again at every handshake whose file holds the leaf
     * alone: an X509_STORE_CTX and an X509_verify_cert against the context's store, which is
     * empty, so it only ever found the leaf; with client_auth the store holds the client CAs
     * (peer.c, on this context), and the chain would be completed from them. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN);
    if (!SSL_CTX_set_cipher_list(ctx, tls->ciphers ? tls->ciphers : default_ciphers)) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &tls->ciphers_at, "tls_ciphers_invalid", tls->ciphers,
                            "'ciphers' is not a cipher list OpenSSL accepts: '%s' (%s)",
                            tls->ciphers ? tls->ciphers : default_ciphers, why);
        goto fail;
    }
    if (tls->ciphersuites && !SSL_CTX_set_ciphersuites(ctx, tls->ciphersuites)) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &tls->ciphersuites_at, "tls_ciphersuites_invalid",
                            tls->ciphersuites,
                            "'ciphersuites' is not a TLS 1.3 suite list OpenSSL accepts: '%s' (%s)",
                            tls->ciphersuites, why);
        goto fail;
    }
    if (!cert->certificate)
        goto no_files; /* tls.acme: the store serves at each ClientHello */
    if (SSL_CTX_use_certificate_chain_file(ctx, cert->certificate) != 1) {
        file_failed(errs, &cert->certificate_at, "tls_certificate_invalid", "certificate",
                    cert->certificate);
        goto fail;
    }
    /* OpenSSL checks the key against the certificate as it loads it (X509_check_private_key)
     * and once more below */
    if (SSL_CTX_use_PrivateKey_file(ctx, cert->key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            gw_tls__cert_failed(errs, &cert->key_at, "tls_key_mismatch", cert->key,
                                "key '%s' does not match certificate '%s'", cert->key,
                                cert->certificate);
        } else {
            file_failed(errs, &cert->key_at, "tls_key_invalid", "key", cert->key);
        }
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        gw_tls__cert_failed(errs, &cert->key_at, "tls_key_mismatch", cert->key,
                            "key '%s' does not match certificate '%s'", cert->key,
                            cert->certificate);
        goto fail;
    }
    sign_on_legacy_path(ctx);
no_files:
    if (like) {
        /* a session resumes under the store's context of another certificate (SSL_set_SSL_CTX
         * takes the new context's id context for the connection) */
        if ((c->sid_len && SSL_CTX_set_session_id_context(ctx, c->sid, c->sid_len) != 1) ||
            gw_tls__client_auth_share(ctx, like, cert) < 0) {
            gw_tls__ssl_reason(why, sizeof(why));
            gw_tls__cert_failed(errs, &cert->certificate_at, "tls_ctx_failed", NULL,
                                "no TLS context for the ACME certificate: %s", why);
            goto fail;
        }
        goto settings;
    }
    /* sessions resume only under the same context: instances that share ticket keys share it
     * too (nghttpx's is "shrpx", for a fleet that moves from one to the other) */
    if (tls->session_id_context &&
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)tls->session_id_context,
                                       (unsigned)strlen(tls->session_id_context)) != 1) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &cert->certificate_at, "tls_session_id_context_invalid",
                            tls->session_id_context, "'session_id_context' '%s' refused: %s",
                            tls->session_id_context, why);
        goto fail;
    }
    /* the id context the entry ends with (client_auth's replaces session_id_context), kept
     * from certs[0] for the store's contexts */
    unsigned char sid[SSL_MAX_SID_CTX_LENGTH];
    unsigned sid_len = 0;
    if (tls->session_id_context) {
        sid_len = (unsigned)strlen(tls->session_id_context); /* accepted above: it fits */
        memcpy(sid, tls->session_id_context, sid_len);
    }
    if (gw_tls__client_auth_setup(ctx, tls, cert, errs, sid, &sid_len) < 0)
        goto fail;
    if (c && cert == &tls->certs[0]) {
        memcpy(c->sid, sid, sid_len);
        c->sid_len = sid_len;
    }
settings:
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, c);
    SSL_CTX_set_app_data(ctx, c);
    if (tls->session_tickets) {
#ifdef OPENSSL_NO_DEPRECATED_3_0
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        SSL_CTX_set_tlsext_ticket_key_cb(ctx, ticket_cb);
#pragma GCC diagnostic pop
#endif
        /* TLS 1.3: one ticket per handshake is enough for a browser */
        SSL_CTX_set_num_tickets(ctx, 1);
        /* the client certificate's chain record is checked in every ticket (peer.c); OpenSSL
         * calls the first context's (the connection's session context) whatever SNI chose */
        SSL_CTX_set_session_ticket_cb(ctx, NULL, gw_tls__ticket_decrypted, NULL);
    }
    SSL_CTX_set_generate_session_id(ctx, session_id_cb);
    SSL_CTX_set_client_hello_cb(ctx, client_hello_cb, c);
    SSL_CTX_set_tlsext_servername_callback(ctx, sni_cb);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* Whether start-up makes the default pair (tls.self_signed, both files missing). */
static int self_signed_due(const gw_cfg_tls_t *tls)
{
    return tls->self_signed && access(tls->certs[0].certificate, F_OK) != 0 &&
           access(tls->certs[0].key, F_OK) != 0;
}

int gw_tls_ctx_new(const gw_cfg_tls_t *tls, const unsigned char *alpn, size_t alpn_len,
                   gw_config_errors_t *errs, gw_tls_ctx_t **out)
{
    *out = NULL;
    if (alpn_len > sizeof(((gw_tls_ctx_t *)0)->alpn) || tls->certs_len == 0)
        return GW_E_INVAL;
    if (self_signed_due(tls)) {
        int rv = gw_tls_make_self_signed(tls->certs[0].certificate, tls->certs[0].key);
        if (rv < 0) {
            if (errs)
                gw_config_error_add(errs, &tls->certs[0].certificate_at,
                                    "the self-signed pair '%s', '%s' cannot be made (see "
                                    "event=tls_self_signed_failed)",
                                    tls->certs[0].certificate, tls->certs[0].key);
            return rv;
        }
    }
    gw_tls_ctx_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return GW_E_NOMEM;
    memcpy(c->alpn, alpn, alpn_len);
    c->alpn_len = alpn_len;
    c->tls = tls;
    pthread_mutex_init(&c->ticket_lock, NULL);
    c->rotation_ms = tls->ticket_rotation_ms ? tls->ticket_rotation_ms : 3600000;
    c->aes_cbc[0] = EVP_CIPHER_fetch(NULL, "AES-128-CBC", NULL);
    c->aes_cbc[1] = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!c->aes_cbc[0] || !c->aes_cbc[1] || !c->sha256 ||
        new_ticket_key(&c->keys[0], wall_ms(), c->sha256) < 0) {
        EVP_CIPHER_free(c->aes_cbc[0]);
        EVP_CIPHER_free(c->aes_cbc[1]);
        EVP_MD_free(c->sha256);
        pthread_mutex_destroy(&c->ticket_lock);
        gw_free(c);
        return GW_E_IO;
    }
    if (tls->ticket_keys && tls->ticket_key_len) {
        /* nghttpx's layout: name, AES key, HMAC key, each key_len bytes after the name */
        size_t kl = tls->ticket_key_len, half = (kl - 16) / 2;
        c->file_keys_n = tls->ticket_keys_len / kl;
        c->file_keys = gw_calloc(c->file_keys_n, sizeof(*c->file_keys));
        if (!c->file_keys) {
            gw_tls_ctx_del(c);
            return GW_E_NOMEM;
        }
        for (size_t i = 0; i < c->file_keys_n; i++) {
            const unsigned char *k = tls->ticket_keys + i * kl;
            ticket_key_t *t = &c->file_keys[i];
            memcpy(t->name, k, 16);
            memcpy(t->aes, k + 16, half);
            memcpy(t->hmac, k + 16 + half, half);
            t->key_len = (unsigned)half;
            t->valid = 1;
            key_mac_make(t, c->sha256);
        }
    }
    c->certs = gw_calloc(tls->certs_len, sizeof(*c->certs));
    if (!c->certs) {
        gw_tls_ctx_del(c);
        return GW_E_NOMEM;
    }
    for (size_t i = 0; i < tls->certs_len; i++) {
        c->certs[i].ctx = make_ctx(tls, &tls->certs[i], c, errs, NULL);
        if (!c->certs[i].ctx) {
            gw_tls_ctx_del(c);
            return GW_E_INVAL;
        }
        c->certs[i].names = tls->certs[i].names;
        c->certs[i].names_len = tls->certs[i].names_len;
        c->certs_len = i + 1;
    }
    *out = c;
    return 0;
}

int gw_tls_ctx_check(const gw_cfg_tls_t *tls, gw_config_errors_t *errs)
{
    int rv = 0;
    /* a pair start-up would generate is not generated here: nothing to load yet */
    for (size_t i = self_signed_due(tls) ? 1 : 0; i < tls->certs_len; i++) {
        SSL_CTX *ctx = make_ctx(tls, &tls->certs[i], NULL, errs, NULL);
        if (!ctx)
            rv = GW_E_INVAL; /* and the other pairs are checked too */
        SSL_CTX_free(ctx);
    }
    return rv;
}

/* tls.acme: certs[0] serves from the store (its certificate, or a tls-alpn-01 answer); a name
 * of a `certificates:` entry beside it switches to that entry's files as client_hello_cb does */
static int store_hello(SSL *ssl, int *al, void *arg)
{
    gw_tls_ctx_t *c = arg;
    size_t i = hello_entry(c, ssl);
    if (i != 0) {
        SSL_set_SSL_CTX(ssl, c->certs[i].ctx);
        gw_tls__client_auth_apply(ssl, c->certs[i].ctx);
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    return gw_tls__store_hello(ssl, c->store, al);
}

/* A context for a certificate of the store, made once as the store takes it (main loop), with
 * the settings of certs[0], which connections start in: store_hello switches to it, as
 * client_hello_cb does to an entry's. */
static SSL_CTX *store_ctx_make(void *arg, X509 *leaf, STACK_OF(X509) * chain, EVP_PKEY *key)
{
    gw_tls_ctx_t *c = arg;
    SSL_CTX *ctx = make_ctx(c->tls, &c->tls->certs[0], c, NULL, c->certs[0].ctx);
    if (ctx && SSL_CTX_use_cert_and_key(ctx, leaf, key, chain, 1) != 1) {
        char why[160];
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(NULL, &c->tls->certs[0].certificate_at, "tls_ctx_failed", NULL,
                            "the ACME certificate cannot be set in its context: %s", why);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void gw_tls_ctx_set_store(gw_tls_ctx_t *c, gw_tls_store_t *s)
{
    gw_tls_store_ref(s);
    if (c->store)
        gw_tls__store_bind(c->store, NULL, c);
    gw_tls_store_unref(c->store);
    c->store = s;
    gw_tls__store_bind(s, store_ctx_make, c);
    SSL_CTX_set_client_hello_cb(c->certs[0].ctx, store_hello, c);
}

void gw_tls_ctx_del(gw_tls_ctx_t *c)
{
    if (!c)
        return;
    if (c->store)
        gw_tls__store_bind(c->store, NULL, c); /* its contexts point at c */
    gw_tls_store_unref(c->store);
    for (size_t i = 0; i < c->certs_len; i++)
        SSL_CTX_free(c->certs[i].ctx);
    gw_free(c->certs);
    key_mac_free(&c->keys[0]);
    key_mac_free(&c->keys[1]);
    OPENSSL_cleanse(c->keys, sizeof(c->keys));
    for (size_t i = 0; c->file_keys && i < c->file_keys_n; i++)
        key_mac_free(&c->file_keys[i]);
    if (c->file_keys)
        OPENSSL_cleanse(c->file_keys, c->file_keys_n * sizeof(*c->file_keys));
    gw_free(c->file_keys);
    EVP_CIPHER_free(c->aes_cbc[0]);
    EVP_CIPHER_free(c->aes_cbc[1]);
    EVP_MD_free(c->sha256);
    pthread_mutex_destroy(&c->ticket_lock);
    gw_free(c);
}

gw_tls_conn_t *gw_tls_conn_new(gw_tls_ctx_t *c)
{
    return gw_tls__conn_alloc(c->certs[0].ctx, 0);
}
