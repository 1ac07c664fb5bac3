/* acme/jws.c — base64url, the account key as a JWK and its thumbprint, key authorizations, the
 * signed request bodies (JWS, ES256) and the CSR. */
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "acme/acme_internal.h"
#include "common/alloc.h"
#include "common/err.h"
#include "http/http.h"
#include "tls/tls.h"

int gw_acme_b64url(const uint8_t *p, size_t n, char **out)
{
    char *s = gw_malloc(GW_HTTP_BASE64_LEN(n) + 1);
    if (!s)
        return GW_E_NOMEM;
    gw_http_base64(p, n, s, 1);
    *out = s;
    return 0;
}

int gw_acme__is_b64url(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return 0;
    return 1;
}

/* The affine coordinates of a P-256 key, 32 bytes each (RFC 7518 §6.2.1.2: full length). */
static int ec_xy(EVP_PKEY *key, uint8_t x[32], uint8_t y[32])
{
    char curve[32];
    size_t cl = 0;
    if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_EC ||
        !EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, curve, sizeof(curve),
                                        &cl) ||
        strcmp(curve, SN_X9_62_prime256v1) != 0)
        return GW_E_UNSUPPORTED;
    BIGNUM *bx = NULL, *by = NULL;
    int rv = GW_E_IO;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) &&
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) &&
        BN_bn2binpad(bx, x, 32) == 32 && BN_bn2binpad(by, y, 32) == 32)
        rv = 0;
    BN_free(bx);
    BN_free(by);
    return rv;
}

int gw_acme_jwk(EVP_PKEY *key, char **out)
{
    uint8_t x[32], y[32];
    int rv = ec_xy(key, x, y);
    if (rv < 0)
        return rv;
    char *bx = NULL, *by = NULL;
    if (gw_acme_b64url(x, 32, &bx) < 0 || gw_acme_b64url(y, 32, &by) < 0) {
        gw_free(bx);
        return GW_E_NOMEM;
    }
    /* RFC 7638 §3.2: the required members in lexicographic order, no whitespace; the same text
     * serves as the `jwk` header and as the input of the thumbprint */
    size_t cap = strlen(bx) + strlen(by) + 64;
    char *s = gw_malloc(cap);
    if (s)
        snprintf(s, cap, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", bx, by);
    gw_free(bx);
    gw_free(by);
    if (!s)
        return GW_E_NOMEM;
    *out = s;
    return 0;
}

static int sha256_b64url(const void *p, size_t n, char **out)
{
    uint8_t md[32];
    unsigned int mdl = 0;
    if (!EVP_Digest(p, n, md, &mdl, EVP_sha256(), NULL) || mdl != 32)
        return GW_E_IO;
    return gw_acme_b64url(md, 32, out);
}

int gw_acme_thumbprint(const char *jwk_json, char **out)
{
    json_error_t jerr;
    json_t *jwk = json_loads(jwk_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(jwk)) {
        json_decref(jwk);
        return GW_E_PARSE;
    }
    static const char *const ec[] = {"crv", "kty", "x", "y", NULL};
    static const char *const rsa[] = {"e", "kty", "n", NULL};
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    const char *const *members = NULL;
    int rv = GW_E_UNSUPPORTED;
    if (!kty)
        rv = GW_E_PARSE;
    else if (strcmp(kty, "EC") == 0)
        members = ec;
    else if (strcmp(kty, "RSA") == 0)
        members = rsa;
    json_t *canon = members ? json_object() : NULL;
    char *text = NULL;
    if (members && !canon)
        rv = GW_E_NOMEM;
    for (size_t i = 0; canon && members[i]; i++) {
        json_t *v = json_object_get(jwk, members[i]);
        if (!json_is_string(v)) {
            rv = GW_E_PARSE;
            goto out;
        }
        if (json_object_set(canon, members[i], v) < 0) {
            rv = GW_E_NOMEM;
            goto out;
        }
    }
    if (canon) {
        /* RFC 7638 §3.3: sorted members, no whitespace; the members are base64url and names,
         * so no escaping question arises */
        text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
        rv = text ? sha256_b64url(text, strlen(text), out) : GW_E_NOMEM;
    }
out:
    free(text);
    json_decref(canon);
    json_decref(jwk);
    return rv;
}

int gw_acme_key_authz(const char *token, const char *thumbprint, char **out)
{
    size_t n = strlen(token) + strlen(thumbprint) + 2;
    char *s = gw_malloc(n);
    if (!s)
        return GW_E_NOMEM;
    snprintf(s, n, "%s.%s", token, thumbprint);
    *out = s;
    return 0;
}

/* ECDSA signature of in[0..n) with SHA-256 as JWS wants it (RFC 7518 §3.4): R and S, 32 bytes
 * each, concatenated (not DER). */
static int es256_sign(EVP_PKEY *key, const char *in, size_t n, uint8_t sig[64])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t der[80];
    size_t derlen = sizeof(der);
    ECDSA_SIG *es = NULL;
    int rv = GW_E_IO;
    if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(md, der, &derlen, (const uint8_t *)in, n) != 1)
        goto out;
    const uint8_t *p = der;
    es = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
    if (!es || BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32) != 32)
        goto out;
    rv = 0;
out:
    ECDSA_SIG_free(es);
    EVP_MD_CTX_free(md);
    return rv;
}

int gw_acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
                const char *payload, char **out)
{
    int rv = GW_E_NOMEM;
    char *jwk = NULL, *prot_text = NULL, *prot64 = NULL, *pay64 = NULL, *sig64 = NULL,
         *input = NULL;
    json_t *prot = NULL, *jws = NULL;
    if (!kid && (rv = gw_acme_jwk(key, &jwk)) < 0)
        goto out;
    rv = GW_E_NOMEM;
    prot = json_object();
    if (!prot || json_object_set_new(prot, "alg", json_string("ES256")) < 0 ||
        json_object_set_new(prot, "nonce", json_string(nonce)) < 0 ||
        json_object_set_new(prot, "url", json_string(url)) < 0)
        goto out;
    if (kid) {
        if (json_object_set_new(prot, "kid", json_string(kid)) < 0)
            goto out;
    } else {
        json_t *k = json_loads(jwk, 0, NULL);
        if (!k || json_object_set_new(prot, "jwk", k) < 0)
            goto out;
    }
    prot_text = json_dumps(prot, JSON_COMPACT | JSON_SORT_KEYS);
    if (!prot_text || gw_acme_b64url((const uint8_t *)prot_text, strlen(prot_text), &prot64) < 0)
        goto out;
    /* RFC 8555 §6.3: POST-as-GET signs an empty payload (not "{}") */
    if (gw_acme_b64url((const uint8_t *)(payload ? payload : ""), payload ? strlen(payload) : 0,
                       &pay64) < 0)
        goto out;
    size_t il = strlen(prot64) + 1 + strlen(pay64);
    input = gw_malloc(il + 1);
    if (!input)
        goto out;
    snprintf(input, il + 1, "%s.%s", prot64, pay64);
    uint8_t sig[64];
    if ((rv = es256_sign(key, input, il, sig)) < 0)
        goto out;
    rv = GW_E_NOMEM;
    if (gw_acme_b64url(sig, sizeof(sig), &sig64) < 0)
        goto out;
    jws = json_pack("{s:s, s:s, s:s}", "protected", prot64, "payload", pay64, "signature", sig64);
    char *text = jws ? json_dumps(jws, JSON_COMPACT) : NULL;
    if (!text)
        goto out;
    *out = gw_strdup(text);
    free(text);
    rv = *out ? 0 : GW_E_NOMEM;
out:
    json_decref(jws);
    json_decref(prot);
    free(prot_text);
    gw_free(jwk);
    gw_free(prot64);
    gw_free(pay64);
    gw_free(sig64);
    gw_free(input);
    return rv;
}

int gw_acme_csr(EVP_PKEY *key, const char *const *names, size_t n, char **out)
{
    if (n == 0)
        return GW_E_INVAL;
    int rv = GW_E_IO;
    X509_REQ *req = X509_REQ_new();
    STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
    uint8_t *der = NULL;
    if (!req || !exts || !X509_REQ_set_version(req, 0) || !X509_REQ_set_pubkey(req, key))
        goto out;
    X509_EXTENSION *ext = gw_tls_names_ext(X509_REQ_get_subject_name(req), names, n);
    if (!ext || !sk_X509_EXTENSION_push(exts, ext)) {
        X509_EXTENSION_free(ext);
        goto out;
    }
    if (!X509_REQ_add_extensions(req, exts) || !X509_REQ_sign(req, key, EVP_sha256()))
        goto out;
    int dl = i2d_X509_REQ(req, &der);
    if (dl <= 0)
        goto out;
    rv = gw_acme_b64url(der, (size_t)dl, out);
out:
    OPENSSL_free(der);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    return rv;
}
