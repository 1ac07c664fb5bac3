/* tls/store.c — the certificate store of a listener whose certificate comes from the ACME
 * client: what the handshake serves (read at each ClientHello, so a new certificate is served
 * to new handshakes without a reload, and connections already up keep theirs), each
 * certificate in a context of its own made once as it arrives, the self-signed stand-in until
 * the first certificate, and the tls-alpn-01 answers (RFC 8737). */
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "tls/tls_internal.h"

typedef struct {
    char *name;
    X509 *cert;
    EVP_PKEY *key;
} challenge_t;

struct gw_tls_store {
    atomic_uint refs;
    pthread_mutex_t lock; /* the workers' handshakes read, the main loop writes */
    X509 *leaf;
    STACK_OF(X509) * chain; /* the intermediates, leaf excluded */
    EVP_PKEY *key;
    /* the certificate above in a context of the listener's settings (one reference), made by
     * make(make_arg, ...) as it is installed, which handshakes switch to; NULL while no listener
     * context is bound or the making failed: handshakes take the certificate itself */
    SSL_CTX *ctx;
    gw_tls__ctx_maker *make; /* written by the main loop only, as the certificate */
    void *make_arg;
    challenge_t *ch;
    size_t ch_len;
};

static const char ACME_TLS_1[] = "acme-tls/1";

int gw_tls_store_new(gw_tls_store_t **out)
{
    gw_tls_store_t *s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

void gw_tls_store_ref(gw_tls_store_t *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void gw_tls_store_clear_challenges(gw_tls_store_t *s)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->ch_len; i++) {
        gw_free(s->ch[i].name);
        X509_free(s->ch[i].cert);
        EVP_PKEY_free(s->ch[i].key);
    }
    gw_free(s->ch);
    s->ch = NULL;
    s->ch_len = 0;
    pthread_mutex_unlock(&s->lock);
}

void gw_tls_store_unref(gw_tls_store_t *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    gw_tls_store_clear_challenges(s);
    X509_free(s->leaf);
    sk_X509_pop_free(s->chain, X509_free);
    EVP_PKEY_free(s->key);
    SSL_CTX_free(s->ctx);
    pthread_mutex_destroy(&s->lock);
    gw_free(s);
}

X509_EXTENSION *gw_tls_names_ext(X509_NAME *subj, const char *const *names, size_t n)
{
    /* a CN holds at most 64 characters (RFC 5280 ub-common-name); the names are in the SAN,
     * which is what counts (RFC 6125 §6.4.4, RFC 8555 §7.4), so a longer first name goes
     * without CN */
    if (n == 0 || (strlen(names[0]) <= 64 &&
                   !X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
                                               (const unsigned char *)names[0], -1, -1, 0)))
        return NULL;
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    X509_EXTENSION *ext = NULL;
    for (size_t i = 0; gens && i < n; i++) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();
        if (!g || !ia5 || !ASN1_STRING_set(ia5, names[i], (int)strlen(names[i]))) {
            GENERAL_NAME_free(g);
            ASN1_IA5STRING_free(ia5);
            goto out;
        }
        GENERAL_NAME_set0_value(g, GEN_DNS, ia5);
        if (!sk_GENERAL_NAME_push(gens, g)) {
            GENERAL_NAME_free(g);
            goto out;
        }
    }
    if (gens)
        ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
out:
    GENERAL_NAMES_free(gens);
    return ext;
}

/* x as read from its DER. OpenSSL keeps the encoding of a certificate it parsed, and encodes
 * one built in memory again each time it is written: at every handshake that sends it, about
 * 30,000 instructions of ASN1_item_ex_i2d for the stand-in. NULL on failure. */
static X509 *reparsed(X509 *x)
{
    unsigned char *der = NULL;
    int n = i2d_X509(x, &der);
    const unsigned char *p = der;
    X509 *y = n > 0 ? d2i_X509(NULL, &p, n) : NULL;
    OPENSSL_free(der);
    return y;
}

/* A certificate for names[0..n) with key, valid from an hour ago for `days`, signed by itself
 * and read back from its DER (reparsed); ext (owned by the caller) added when not NULL. */
static X509 *make_cert(const char *const *names, size_t n, EVP_PKEY *key, long days,
                       X509_EXTENSION *ext)
{
    X509 *x = X509_new();
    X509_EXTENSION *san = NULL;
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    if (!x || RAND_bytes(serial, sizeof(serial)) != 1)
        goto fail;
    serial[0] &= 0x7f;
    if (!(bn = BN_bin2bn(serial, sizeof(serial), NULL)) ||
        !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || !X509_set_version(x, 2) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), days * 86400) || !X509_set_pubkey(x, key))
        goto fail;
    X509_NAME *subj = X509_get_subject_name(x);
    if (!(san = gw_tls_names_ext(subj, names, n)) || !X509_set_issuer_name(x, subj))
        goto fail;
    if (!X509_add_ext(x, san, -1) || (ext && !X509_add_ext(x, ext, -1)) ||
        !X509_sign(x, key, EVP_sha256()))
        goto fail;
    X509_EXTENSION_free(san);
    BN_free(bn);
    X509 *y = reparsed(x);
    X509_free(x);
    if (!y)
        ERR_clear_error();
    return y;
fail:
    X509_EXTENSION_free(san);
    BN_free(bn);
    X509_free(x);
    ERR_clear_error();
    return NULL;
}

/* A handshake switches to the context made here for the certificate (SSL_set_SSL_CTX at the
 * ClientHello, as for a configured entry): what OpenSSL checks when a certificate is set (the
 * key against the leaf, the security level of each certificate, the chain copied) is done
 * once, not at each handshake as SSL_use_cert_and_key did (about 24,000 instructions). The
 * key signs on OpenSSL's legacy path: gw_tls_store_set_pem and _set_self_signed make an EC key,
 * once, into such a key, as a configured key is (server.c). */
static void install(gw_tls_store_t *s, X509 *leaf, STACK_OF(X509) * chain, EVP_PKEY *key)
{
    SSL_CTX *ctx = s->make ? s->make(s->make_arg, leaf, chain, key) : NULL;
    pthread_mutex_lock(&s->lock);
    X509 *ol = s->leaf;
    STACK_OF(X509) *oc = s->chain;
    EVP_PKEY *ok = s->key;
    SSL_CTX *ox = s->ctx;
    s->leaf = leaf;
    s->chain = chain;
    s->key = key;
    s->ctx = ctx;
    pthread_mutex_unlock(&s->lock);
    /* a handshake that took them holds its own references (SSL_set_SSL_CTX, or
     * SSL_use_cert_and_key): a connection made before keeps its certificate */
    X509_free(ol);
    sk_X509_pop_free(oc, X509_free);
    EVP_PKEY_free(ok);
    SSL_CTX_free(ox);
}

void gw_tls__store_bind(gw_tls_store_t *s, gw_tls__ctx_maker *make, void *arg)
{
    if (!make && s->make_arg != arg)
        return; /* another context's binding since */
    s->make = make;
    s->make_arg = make ? arg : NULL;
    X509 *leaf = NULL;
    STACK_OF(X509) *chain = NULL;
    EVP_PKEY *key = NULL;
    SSL_CTX *ox = NULL;
    pthread_mutex_lock(&s->lock);
    if (!make) { /* the contexts of the binding that ends go */
        ox = s->ctx;
        s->ctx = NULL;
    } else if (s->leaf && (!s->chain || (chain = X509_chain_up_ref(s->chain)) != NULL)) {
        leaf = s->leaf; /* the certificate served now, in a context of the new binding */
        X509_up_ref(leaf);
        key = s->key;
        EVP_PKEY_up_ref(key);
    }
    pthread_mutex_unlock(&s->lock);
    SSL_CTX_free(ox);
    if (leaf)
        install(s, leaf, chain, key);
    ERR_clear_error();
}

int gw_tls_store_set_self_signed(gw_tls_store_t *s, const char *const *names, size_t n)
{
    if (n == 0)
        return GW_E_INVAL;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    /* signs on the legacy path; the certificate's context checks it against the leaf once */
    EVP_PKEY *fk = gw_tls__legacy_ec_key(key, NULL);
    if (fk) {
        EVP_PKEY_free(key);
        key = fk;
    }
    X509 *x = key ? make_cert(names, n, key, 30, NULL) : NULL;
    if (!x) {
        EVP_PKEY_free(key);
        ERR_clear_error();
        return GW_E_NOMEM;
    }
    install(s, x, NULL, key);
    return 0;
}

/* The PEM chain (leaf first) and key parsed; 0 or GW_E_PARSE. */
static int parse_pem(const char *chain, size_t chain_len, const char *key, size_t key_len,
                     X509 **leaf, STACK_OF(X509) * *rest, EVP_PKEY **pkey)
{
    *leaf = NULL;
    *rest = NULL;
    *pkey = NULL;
    BIO *b = BIO_new_mem_buf(chain, (int)chain_len);
    BIO *kb = BIO_new_mem_buf(key, (int)key_len);
    if (!b || !kb)
        goto fail;
    *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    if (!*leaf || !(*rest = sk_X509_new_null()))
        goto fail;
    X509 *x;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(*rest, x)) {
            X509_free(x);
            goto fail;
        }
    *pkey = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
    if (!*pkey || X509_check_private_key(*leaf, *pkey) != 1)
        goto fail;
    BIO_free(b);
    BIO_free(kb);
    ERR_clear_error();
    return 0;
fail:
    BIO_free(b);
    BIO_free(kb);
    X509_free(*leaf);
    sk_X509_pop_free(*rest, X509_free);
    EVP_PKEY_free(*pkey);
    *leaf = NULL;
    *rest = NULL;
    *pkey = NULL;
    ERR_clear_error();
    return GW_E_PARSE;
}

int gw_tls_store_set_pem(gw_tls_store_t *s, const char *chain, size_t chain_len, const char *key,
                         size_t key_len)
{
    X509 *leaf;
    STACK_OF(X509) * rest;
    EVP_PKEY *pkey;
    int rv = parse_pem(chain, chain_len, key, key_len, &leaf, &rest, &pkey);
    if (rv < 0)
        return rv;
    EVP_PKEY *fk = gw_tls__legacy_ec_key(pkey, leaf);
    if (fk) {
        EVP_PKEY_free(pkey);
        pkey = fk;
    }
    install(s, leaf, rest, pkey);
    return 0;
}

int gw_tls_pem_usable(const char *chain, size_t chain_len, const char *key, size_t key_len,
                      const char *const *names, size_t n, int64_t now, int64_t *not_before,
                      int64_t *not_after)
{
    X509 *leaf;
    STACK_OF(X509) * rest;
    EVP_PKEY *pkey;
    int rv = parse_pem(chain, chain_len, key, key_len, &leaf, &rest, &pkey);
    if (rv < 0)
        return rv;
    struct tm tb, ta;
    if (ASN1_TIME_to_tm(X509_get0_notBefore(leaf), &tb) != 1 ||
        ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &ta) != 1) {
        rv = GW_E_PARSE;
        goto out;
    }
    *not_before = (int64_t)timegm(&tb);
    *not_after = (int64_t)timegm(&ta);
    if (*not_after <= now) {
        rv = GW_E_RANGE;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (X509_check_host(leaf, names[i], 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) != 1) {
            rv = GW_E_NOENT;
            goto out;
        }
out:
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    EVP_PKEY_free(pkey);
    ERR_clear_error();
    return rv;
}

int gw_tls_store_set_challenge(gw_tls_store_t *s, const char *name, const uint8_t digest[32])
{
    /* RFC 8737 §3: id-pe-acmeIdentifier, critical, its value the DER of an OCTET STRING of
     * the SHA-256 of the key authorization */
    uint8_t der[34] = {0x04, 0x20};
    memcpy(der + 2, digest, 32);
    ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    X509_EXTENSION *ext = NULL;
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    char *nm = gw_strdup(name);
    int rv = GW_E_NOMEM;
    if (!oid || !os || !nm || !ASN1_OCTET_STRING_set(os, der, sizeof(der)) ||
        !(ext = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, os)) || !(key = EVP_EC_gen("P-256")) ||
        !(x = make_cert(&name, 1, key, 7, ext)))
        goto out;
    pthread_mutex_lock(&s->lock);
    size_t i = 0;
    while (i < s->ch_len && strcasecmp(s->ch[i].name, name) != 0)
        i++;
    if (i == s->ch_len) {
        challenge_t *n = gw_realloc(s->ch, (s->ch_len + 1) * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&s->lock);
            goto out;
        }
        s->ch = n;
        s->ch_len++;
    } else {
        gw_free(s->ch[i].name);
        X509_free(s->ch[i].cert);
        EVP_PKEY_free(s->ch[i].key);
    }
    s->ch[i] = (challenge_t){.name = nm, .cert = x, .key = key};
    pthread_mutex_unlock(&s->lock);
    nm = NULL;
    x = NULL;
    key = NULL;
    rv = 0;
out:
    gw_free(nm);
    X509_free(x);
    EVP_PKEY_free(key);
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
    ASN1_OBJECT_free(oid);
    ERR_clear_error();
    return rv;
}

/* ---- at the handshake ---------------------------------------------------------------------- */

static int acme_idx = -1;
static pthread_once_t acme_once = PTHREAD_ONCE_INIT;
static void acme_idx_init(void)
{
    acme_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The host name of the server_name extension (RFC 6066 §3) into host[cap], or 0. */
static int hello_sni(SSL *ssl, char *host, size_t cap)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) || len < 5)
        return 0;
    size_t list = (size_t)p[0] << 8 | p[1];
    if (list + 2 != len || p[2] != TLSEXT_NAMETYPE_host_name)
        return 0;
    size_t n = (size_t)p[3] << 8 | p[4];
    if (n == 0 || n + 5 > len || n >= cap || memchr(p + 5, 0, n))
        return 0;
    memcpy(host, p + 5, n);
    host[n] = 0;
    return 1;
}

/* Whether the ALPN extension (RFC 7301 §3.1) offers acme-tls/1. */
static int hello_offers_acme(SSL *ssl)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                   &len) ||
        len < 2)
        return 0;
    size_t list = (size_t)p[0] << 8 | p[1];
    if (list + 2 != len)
        return 0;
    for (size_t i = 2; i < len; i += 1u + p[i])
        if (p[i] == sizeof(ACME_TLS_1) - 1 && i + 1 + p[i] <= len &&
            !memcmp(p + i + 1, ACME_TLS_1, p[i]))
            return 1;
    return 0;
}

int gw_tls__store_hello(SSL *ssl, gw_tls_store_t *s, int *al)
{
    pthread_once(&acme_once, acme_idx_init);
    int rv = SSL_CLIENT_HELLO_SUCCESS;
    SSL_CTX *ctx = NULL;
    pthread_mutex_lock(&s->lock);
    if (hello_offers_acme(ssl)) {
        /* RFC 8737 §3: the challenge certificate of the name asked for, and only with
         * acme-tls/1; no challenge pending for it: the handshake fails */
        char host[256];
        size_t i = 0;
        if (hello_sni(ssl, host, sizeof(host)))
            while (i < s->ch_len && strcasecmp(s->ch[i].name, host) != 0)
                i++;
        else
            i = s->ch_len;
        if (i < s->ch_len && SSL_use_cert_and_key(ssl, s->ch[i].cert, s->ch[i].key, NULL, 1) == 1) {
            SSL_set_ex_data(ssl, acme_idx, (void *)ACME_TLS_1);
            /* the validator sends no client certificate, and an acme-tls/1 connection carries
             * no request: the listener's client_auth does not apply to it */
            SSL_set_verify(ssl, SSL_VERIFY_NONE, NULL);
        } else {
            *al = SSL_AD_UNRECOGNIZED_NAME;
            rv = SSL_CLIENT_HELLO_ERROR;
        }
    } else if (s->ctx) {
        ctx = s->ctx;
        SSL_CTX_up_ref(ctx); /* an install may drop the store's reference once unlocked */
    } else if (!s->leaf || SSL_use_cert_and_key(ssl, s->leaf, s->key, s->chain, 1) != 1) {
        *al = SSL_AD_INTERNAL_ERROR;
        rv = SSL_CLIENT_HELLO_ERROR;
    }
    pthread_mutex_unlock(&s->lock);
    /* the context has the listener's settings (server.c): its verification mode, store and CA
     * names are those the connection took from the listener's first context, and its session
     * id context is the same, so sessions resume across certificates */
    if (ctx && !SSL_set_SSL_CTX(ssl, ctx)) {
        *al = SSL_AD_INTERNAL_ERROR;
        rv = SSL_CLIENT_HELLO_ERROR;
    }
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rv;
}

int gw_tls__store_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen)
{
    pthread_once(&acme_once, acme_idx_init);
    if (!SSL_get_ex_data(ssl, acme_idx))
        return 0;
    for (unsigned j = 0; j < inlen; j += 1u + in[j])
        if (in[j] == sizeof(ACME_TLS_1) - 1 && j + 1 + in[j] <= inlen &&
            !memcmp(&in[j + 1], ACME_TLS_1, in[j])) {
            *out = &in[j + 1];
            *outlen = in[j];
            return 1;
        }
    return 0;
}

int gw_tls_store_not_after(gw_tls_store_t *s, int64_t *out)
{
    struct tm t;
    int rv = GW_E_NOENT;
    pthread_mutex_lock(&s->lock);
    if (s->leaf && ASN1_TIME_to_tm(X509_get0_notAfter(s->leaf), &t) == 1) {
        *out = (int64_t)timegm(&t);
        rv = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rv;
}
