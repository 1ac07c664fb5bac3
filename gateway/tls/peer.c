/* tls/peer.c — client certificates in the server role: a certificate entry's client_auth set
 * up on its context (CA, CRL, mode, depth, the session id context that keeps sessions apart),
 * the verified chain a session keeps for its resumptions, and what a connection's handshake
 * made of the client's certificate (tls.h). */
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "tls/tls_internal.h"

/* mode optional: a certificate that fails verification is recorded (SSL_get_verify_result)
 * and the handshake goes on; the route decides (client_cert: required) */
static int verify_optional(int ok, X509_STORE_CTX *x)
{
    (void)ok;
    (void)x;
    return 1;
}

/* The chain record: the intermediates of a verified client certificate, kept in its session
 * (OpenSSL's ticket application data) for Client-Cert-Chain on a resumed connection. OpenSSL
 * keeps the peer's leaf and the verification's result in the session, not the chain it
 * verified (RFC 9440 §2.3 wants the intermediates of that chain, the leaf's issuer first).
 * Layout: a version byte, then per certificate a 3-byte big-endian length and its DER. It is
 * written at the verification, before OpenSSL caches the session (TLS 1.2 session ids, TLS
 * 1.3 without tickets) or encrypts it into a ticket, so every way of resuming has it; a
 * resumed TLS 1.3 session's next ticket is a copy of it that keeps the record. */
#define CHAIN_REC_V1 1
#define CHAIN_REC_CERTS 16 /* client_auth.depth is at most 16 */

/* One DER SEQUENCE of exactly len bytes (tag, a definite length that matches): 1, else 0. */
static int der_sequence(const uint8_t *p, size_t len)
{
    if (len < 2 || p[0] != 0x30)
        return 0;
    size_t hdr = 2, n = p[1];
    if (n & 0x80) {
        size_t k = n & 0x7f;
        if (k == 0 || k > 3 || len < 2 + k)
            return 0;
        n = 0;
        for (size_t i = 0; i < k; i++)
            n = n << 8 | p[2 + i];
        hdr += k;
    }
    return hdr + n == len;
}

/* The certificate after *off in record rec (len bytes), checked: into *der, *dlen and *off
 * moved past it. 1, 0 at the record's end, -1 when the record is malformed. */
static int chain_rec_next(const uint8_t *rec, size_t len, size_t *off, const uint8_t **der,
                          size_t *dlen)
{
    if (*off == len)
        return 0;
    if (len - *off < 3)
        return -1;
    const uint8_t *p = rec + *off;
    size_t n = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
    if (n > len - *off - 3 || !der_sequence(p + 3, n))
        return -1;
    *der = p + 3;
    *dlen = n;
    *off += 3 + n;
    return 1;
}

int gw_tls__chain_rec_check(const uint8_t *rec, size_t len)
{
    if (!rec || len < 1 || len > GW_TLS_CHAIN_RECORD_MAX || rec[0] != CHAIN_REC_V1)
        return -1;
    size_t off = 1, n = 0, dlen;
    const uint8_t *der;
    int rv;
    while ((rv = chain_rec_next(rec, len, &off, &der, &dlen)) == 1)
        if (++n > CHAIN_REC_CERTS)
            return -1;
    return rv;
}

/* The session id context of a session that must not resume anywhere: 0xff bytes, which no
 * configured context (UTF-8 text) holds and no SHA-256 of an entry's (set_sid_ctx) will. */
static void make_unresumable(SSL_SESSION *sess)
{
    unsigned char none[SSL_MAX_SID_CTX_LENGTH];
    memset(none, 0xff, sizeof(none));
    SSL_SESSION_set1_id_context(sess, none, sizeof(none));
}

/* The record of chain ch (leaf, intermediates, trust anchor; NULL: verification failed, an
 * empty record) into sess. 0, or -1 when it does not fit GW_TLS_CHAIN_RECORD_MAX (or no
 * memory). */
static int chain_rec_store(SSL_SESSION *sess, STACK_OF(X509) * ch)
{
    int n = ch ? sk_X509_num(ch) : 0;
    size_t len = 1;
    for (int i = 1; i < n - 1; i++) {
        int d = i2d_X509(sk_X509_value(ch, i), NULL);
        if (d <= 0 || (size_t)d > GW_TLS_CHAIN_RECORD_MAX)
            return -1;
        len += 3 + (size_t)d;
    }
    if (len > GW_TLS_CHAIN_RECORD_MAX)
        return -1;
    uint8_t *rec = gw_malloc(len), *w = rec;
    if (!rec)
        return -1;
    *w++ = CHAIN_REC_V1;
    for (int i = 1; i < n - 1; i++) {
        X509 *x = sk_X509_value(ch, i);
        size_t d = (size_t)i2d_X509(x, NULL);
        w[0] = (uint8_t)(d >> 16);
        w[1] = (uint8_t)(d >> 8);
        w[2] = (uint8_t)d;
        w += 3;
        i2d_X509(x, &w);
    }
    int ok = SSL_SESSION_set1_ticket_appdata(sess, rec, len);
    gw_free(rec);
    return ok == 1 ? 0 : -1;
}

/* OpenSSL's verification of the client's certificate, then the chain record into the new
 * session. A chain past GW_TLS_CHAIN_RECORD_MAX makes the session unresumable: the client's
 * next connection makes a full handshake and its Client-Cert-Chain comes from that
 * verification, never a resumption without it. */
static int verify_and_record(X509_STORE_CTX *x, void *arg)
{
    (void)arg;
    int ok = X509_verify_cert(x);
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    SSL_SESSION *sess = ssl ? SSL_get_session(ssl) : NULL;
    if (sess) {
        /* the same test as the result OpenSSL keeps (ssl_verify_cert_chain) */
        int verified = ok > 0 && X509_STORE_CTX_get_error(x) == X509_V_OK;
        if (chain_rec_store(sess, verified ? X509_STORE_CTX_get0_chain(x) : NULL) < 0)
            make_unresumable(sess);
    }
    return ok > 0 ? ok : 0;
}

SSL_TICKET_RETURN gw_tls__ticket_decrypted(SSL *ssl, SSL_SESSION *sess, const unsigned char *name,
                                           size_t name_len, SSL_TICKET_STATUS status, void *arg)
{
    (void)ssl;
    (void)name;
    (void)name_len;
    (void)arg;
    if (status != SSL_TICKET_SUCCESS && status != SSL_TICKET_SUCCESS_RENEW)
        return SSL_TICKET_RETURN_IGNORE_RENEW; /* what OpenSSL does without this callback */
    /* Our ticket keys authenticate the ticket, still: a session with a client certificate
     * resumes only with a well-formed chain record. A ticket without one (minted by an
     * instance sharing the keys that predates the record) or with a bad one: a full
     * handshake, which verifies the certificate again. */
    void *rec = NULL;
    size_t len = 0;
    if (SSL_SESSION_get0_peer(sess) && (SSL_SESSION_get0_ticket_appdata(sess, &rec, &len) != 1 ||
                                        gw_tls__chain_rec_check(rec, len) < 0))
        return SSL_TICKET_RETURN_IGNORE_RENEW;
    return status == SSL_TICKET_SUCCESS ? SSL_TICKET_RETURN_USE : SSL_TICKET_RETURN_USE_RENEW;
}

/* The bytes of the file at path into md (0), or -1. */
static int digest_file(EVP_MD_CTX *md, const char *path)
{
    unsigned char buf[16384];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n;
    int rv = 0;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        if (EVP_DigestUpdate(md, buf, n) != 1)
            rv = -1;
    if (ferror(f))
        rv = -1;
    fclose(f);
    return rv;
}

/* The session id context of an entry that asks for client certificates: SHA-256 of the
 * listener's session_id_context, the mode, the depth and the bytes of the CA and CRL files.
 * A session (its ticket carries the peer's certificate and verify result) resumes only on an
 * entry that would have judged the certificate the same way: another CA, mode or depth, or a
 * new CRL (reload), and the client makes a full handshake. Computed from the configuration
 * alone, so instances sharing ticket keys (cluster) and this configuration resume each other's
 * sessions. 0, or -1. */
static int set_sid_ctx(SSL_CTX *ctx, const gw_cfg_tls_t *tls, const gw_cfg_client_auth_t *a,
                       unsigned char *sid, unsigned *sid_len)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char params[64];
    int pl = snprintf(params, sizeof(params), "|client_auth|%d|%u|", a->mode, a->depth);
    const char *base = tls->session_id_context ? tls->session_id_context : "";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(md, base, strlen(base)) == 1 &&
             EVP_DigestUpdate(md, params, (size_t)pl) == 1 && digest_file(md, a->ca) == 0 &&
             EVP_DigestUpdate(md, "|", 1) == 1 && (!a->crl || digest_file(md, a->crl) == 0) &&
             EVP_DigestFinal_ex(md, d, &dl) == 1;
    EVP_MD_CTX_free(md);
    /* SSL_MAX_SID_CTX_LENGTH is 32: SHA-256 fits */
    if (!ok || SSL_CTX_set_session_id_context(ctx, d, dl) != 1)
        return -1;
    if (sid) {
        memcpy(sid, d, dl);
        *sid_len = dl;
    }
    return 0;
}

/* Every CRL of the PEM file at path into store: how many, or -1 (OpenSSL's error left). */
static int load_crls(X509_STORE *store, const char *path)
{
    BIO *b = BIO_new_file(path, "r");
    if (!b)
        return -1;
    int n = 0;
    X509_CRL *crl;
    while ((crl = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL)) != NULL) {
        int ok = X509_STORE_add_crl(store, crl);
        X509_CRL_free(crl);
        if (!ok) {
            BIO_free(b);
            return -1;
        }
        n++;
    }
    unsigned long e = ERR_peek_last_error();
    BIO_free(b);
    /* the end of the file reads as "no start line"; anything else is a CRL that does not parse */
    if (n > 0 && ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
        ERR_clear_error();
        return n;
    }
    return -1;
}

int gw_tls__client_auth_setup(SSL_CTX *ctx, const gw_cfg_tls_t *tls, const gw_cfg_cert_t *cert,
                              gw_config_errors_t *errs, unsigned char *sid, unsigned *sid_len)
{
    const gw_cfg_client_auth_t *a = &cert->client_auth;
    char why[160];
    if (a->mode == GW_CFG_CLIENT_AUTH_NONE)
        return 0;
    if (SSL_CTX_load_verify_file(ctx, a->ca) != 1) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &a->ca_at, "tls_client_ca_invalid", a->ca,
                            "'ca' file '%s' cannot be loaded: %s", a->ca, why);
        return -1;
    }
    /* the CertificateRequest names the CAs (RFC 8446 §4.2.4), so that a client holding several
     * certificates picks one of ours */
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(a->ca);
    if (names)
        SSL_CTX_set_client_CA_list(ctx, names);
    ERR_clear_error();
    if (a->crl) {
        X509_STORE *st = SSL_CTX_get_cert_store(ctx);
        if (load_crls(st, a->crl) < 0) {
            gw_tls__ssl_reason(why, sizeof(why));
            gw_tls__cert_failed(errs, &a->crl_at, "tls_client_crl_invalid", a->crl,
                                "'crl' file '%s' cannot be loaded: %s", a->crl, why);
            return -1;
        }
        /* the leaf's issuer must have a CRL in the file: a certificate whose CA has none fails
         * ("unable to get certificate CRL") rather than pass unchecked */
        X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK);
    }
    int require = a->mode == GW_CFG_CLIENT_AUTH_REQUIRE;
    /* require: OpenSSL ends the handshake with the alert of the failure (RFC 8446 §6.2:
     * certificate_required when none is sent, certificate_expired, certificate_revoked,
     * unknown_ca, bad_certificate) */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (require ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       require ? NULL : verify_optional);
    SSL_CTX_set_verify_depth(ctx, (int)a->depth);
    SSL_CTX_set_cert_verify_callback(ctx, verify_and_record, NULL);
    if (set_sid_ctx(ctx, tls, a, sid, sid_len) < 0) {
        gw_tls__ssl_reason(why, sizeof(why));
        gw_tls__cert_failed(errs, &a->ca_at, "tls_client_ca_invalid", a->ca,
                            "'ca' file '%s' cannot be read for the session id context: %s", a->ca,
                            why);
        return -1;
    }
    return 0;
}

int gw_tls__client_auth_share(SSL_CTX *ctx, SSL_CTX *from, const gw_cfg_cert_t *cert)
{
    if (cert->client_auth.mode == GW_CFG_CLIENT_AUTH_NONE)
        return 0;
    /* the CA and CRL files as loaded with the listener: one read at a reload, and a certificate
     * installed later does not apply a file changed since */
    SSL_CTX_set1_cert_store(ctx, SSL_CTX_get_cert_store(from));
    STACK_OF(X509_NAME) *names = SSL_CTX_get_client_CA_list(from);
    if (names) {
        STACK_OF(X509_NAME) *dup = SSL_dup_CA_list(names);
        if (!dup)
            return -1;
        SSL_CTX_set_client_CA_list(ctx, dup);
    }
    SSL_CTX_set_verify(ctx, SSL_CTX_get_verify_mode(from), SSL_CTX_get_verify_callback(from));
    SSL_CTX_set_verify_depth(ctx, SSL_CTX_get_verify_depth(from));
    SSL_CTX_set_cert_verify_callback(ctx, verify_and_record, NULL);
    return X509_VERIFY_PARAM_set1(SSL_CTX_get0_param(ctx), SSL_CTX_get0_param(from)) == 1 ? 0 : -1;
}

void gw_tls__client_auth_apply(SSL *ssl, SSL_CTX *ctx)
{
    /* SSL_set_SSL_CTX moves the certificate, the store and the CA names, not what SSL_new
     * copied from the first context: the verification mode and its parameters */
    SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), SSL_CTX_get_verify_callback(ctx));
    SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(ctx));
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_clear_flags(p, X509_V_FLAG_CRL_CHECK);
    X509_VERIFY_PARAM_set_flags(p, X509_VERIFY_PARAM_get_flags(SSL_CTX_get0_param(ctx)) &
                                       X509_V_FLAG_CRL_CHECK);
}

int gw_tls_client_asked(const gw_tls_conn_t *t)
{
    return !t->client && (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER) != 0;
}

int gw_tls_client_verified(const gw_tls_conn_t *t)
{
    return gw_tls_client_asked(t) && SSL_get0_peer_certificate(t->ssl) &&
           SSL_get_verify_result(t->ssl) == X509_V_OK;
}

const char *gw_tls_client_verify(gw_tls_conn_t *t)
{
    if (t->peer_verify)
        return t->peer_verify;
    if (!gw_tls_client_asked(t))
        return "NONE";
    /* a failed verification first: after a handshake it ended (mode require) OpenSSL keeps
     * the result but not the certificate */
    long r = SSL_get_verify_result(t->ssl);
    if (r == X509_V_OK)
        return SSL_get0_peer_certificate(t->ssl) ? "SUCCESS" : "NONE";
    char buf[192];
    snprintf(buf, sizeof(buf), "FAILED:%s", X509_verify_cert_error_string(r));
    t->peer_verify = gw_strdup(buf);
    return t->peer_verify ? t->peer_verify : "FAILED";
}

const char *gw_tls_client_subject(gw_tls_conn_t *t)
{
    if (t->peer_subject)
        return t->peer_subject;
    X509 *x = gw_tls_client_asked(t) ? SSL_get0_peer_certificate(t->ssl) : NULL;
    if (!x)
        return "";
    BIO *b = BIO_new(BIO_s_mem());
    if (!b)
        return "";
    /* RFC 4514 (RFC 2253's order and escapes; bytes past ASCII escaped, so a log line stays
     * ASCII) */
    char *p = NULL;
    if (X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
        long n = BIO_get_mem_data(b, &p);
        if (n >= 0 && (t->peer_subject = gw_malloc((size_t)n + 1))) {
            memcpy(t->peer_subject, p, (size_t)n);
            t->peer_subject[n] = 0;
        }
    }
    BIO_free(b);
    ERR_clear_error();
    return t->peer_subject ? t->peer_subject : "";
}

int gw_tls_client_der(const gw_tls_conn_t *t, size_t i, uint8_t **der, size_t *len)
{
    *der = NULL;
    *len = 0;
    if (!gw_tls_client_verified(t))
        return 0;
    X509 *x = NULL;
    if (i == 0) {
        x = SSL_get0_peer_certificate(t->ssl);
    } else if (SSL_session_reused(t->ssl)) {
        /* the chain verified when the session was made: its record (checked when its ticket
         * was decrypted, or written by this process for a session it cached) */
        void *rec = NULL;
        size_t rlen = 0, off = 1, dlen = 0;
        const uint8_t *d = NULL;
        if (SSL_SESSION_get0_ticket_appdata(SSL_get_session(t->ssl), &rec, &rlen) != 1 ||
            gw_tls__chain_rec_check(rec, rlen) < 0)
            return 0;
        for (size_t k = 0; k < i; k++)
            if (chain_rec_next(rec, rlen, &off, &d, &dlen) != 1)
                return 0;
        uint8_t *p = gw_malloc(dlen);
        if (!p)
            return GW_E_NOMEM;
        memcpy(p, d, dlen);
        *der = p;
        *len = dlen;
        return 1;
    } else {
        /* the chain of the verification: leaf, intermediates, trust anchor; only the
         * intermediates go (RFC 9440 §2.3 leaves out the leaf) */
        STACK_OF(X509) *ch = SSL_get0_verified_chain(t->ssl);
        int n = ch ? sk_X509_num(ch) : 0;
        if ((int)i >= n - 1)
            return 0;
        x = sk_X509_value(ch, (int)i);
    }
    if (!x)
        return 0;
    int n = i2d_X509(x, NULL);
    if (n <= 0)
        return GW_E_NOMEM;
    uint8_t *p = gw_malloc((size_t)n);
    if (!p)
        return GW_E_NOMEM;
    uint8_t *w = p;
    i2d_X509(x, &w);
    *der = p;
    *len = (size_t)n;
    return 1;
}

const char *gw_tls_client_result(const gw_tls_conn_t *t)
{
    if (!gw_tls_client_asked(t))
        return NULL;
    if (SSL_get_verify_result(t->ssl) != X509_V_OK)
        return "failed";
    return SSL_get0_peer_certificate(t->ssl) ? "success" : "none";
}
