/* Unit tests of acme/ (the ACME protocol without I/O). Known vectors: base64url (RFC 4648
 * §10), the JWK thumbprint (RFC 7638 §3.1), the EC key of RFC 7515 §A.3 as a JWK. Every JWS
 * is verified with OpenSSL against the account's public key; the CSR is parsed and verified.
 * The order's state machine runs against a scripted server that checks each request (method,
 * URL, signature, nonce, jwk or kid) and answers: two names, a name already valid, Retry-After,
 * badNonce retried a bounded number of times in a row, problem documents, an invalid
 * authorization, a token that is not base64url, a poll that never ends, a failing allocation at
 * every step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "acme/order.h"
#include "common/alloc.h"
#include "common/err.h"

/* ---- helpers ----------------------------------------------------------------------------------
 */

static size_t b64url_decode(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0, bits = 0;
    uint32_t acc = 0;
    for (; *s; s++) {
        const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const char *p = strchr(A, *s);
        assert_non_null(p);
        acc = acc << 6 | (uint32_t)(p - A);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            assert_true(n < cap);
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

static char *b64url_decode_str(const char *s)
{
    char *out = calloc(1, strlen(s) + 1);
    b64url_decode(s, (uint8_t *)out, strlen(s));
    return out;
}

/* The EC key of RFC 7515 §A.3, built from its private scalar d alone. */
static EVP_PKEY *rfc7515_key(void)
{
    uint8_t d[32];
    assert_int_equal(b64url_decode("jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI", d, 32), 32);
    BIGNUM *bd = BN_bin2bn(d, 32, NULL);
    EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *pt = EC_POINT_new(g);
    assert_int_equal(EC_POINT_mul(g, pt, bd, NULL, NULL, NULL), 1);
    uint8_t pub[65];
    assert_int_equal(EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, pub, 65, NULL), 65);
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PRIV_KEY, bd);
    OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pub, 65);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *k = NULL;
    assert_int_equal(EVP_PKEY_fromdata_init(c), 1);
    assert_int_equal(EVP_PKEY_fromdata(c, &k, EVP_PKEY_KEYPAIR, params), 1);
    EVP_PKEY_CTX_free(c);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(b);
    EC_POINT_free(pt);
    EC_GROUP_free(g);
    BN_free(bd);
    return k;
}

/* Verify the JWS text against key; returns the decoded protected header and sets *payload to
 * the decoded payload (malloc'd). */
static json_t *verify_jws(EVP_PKEY *key, const char *jws_text, char **payload)
{
    json_t *jws = json_loads(jws_text, 0, NULL);
    assert_non_null(jws);
    const char *p64 = json_string_value(json_object_get(jws, "protected"));
    const char *pl64 = json_string_value(json_object_get(jws, "payload"));
    const char *s64 = json_string_value(json_object_get(jws, "signature"));
    assert_non_null(p64);
    assert_non_null(pl64);
    assert_non_null(s64);
    uint8_t sig[64];
    assert_int_equal(b64url_decode(s64, sig, sizeof(sig)), 64);
    /* R||S back to DER for OpenSSL's verifier (RFC 7518 §3.4) */
    ECDSA_SIG *es = ECDSA_SIG_new();
    ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL), BN_bin2bn(sig + 32, 32, NULL));
    uint8_t *der = NULL;
    int dl = i2d_ECDSA_SIG(es, &der);
    char input[8192];
    snprintf(input, sizeof(input), "%s.%s", p64, pl64);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key), 1);
    assert_int_equal(EVP_DigestVerify(md, der, (size_t)dl, (const uint8_t *)input, strlen(input)),
                     1);
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    ECDSA_SIG_free(es);
    char *prot = b64url_decode_str(p64);
    json_t *h = json_loads(prot, 0, NULL);
    assert_non_null(h);
    free(prot);
    *payload = b64url_decode_str(pl64);
    json_decref(jws);
    return h;
}

/* ---- encodings
 * ----------------------------------------------------------------------------------- */

static void test_b64url_rfc4648_vectors(void **state)
{
    (void)state;
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const want[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char *s = NULL;
        assert_int_equal(gw_acme_b64url((const uint8_t *)in[i], strlen(in[i]), &s), 0);
        assert_string_equal(s, want[i]);
        gw_free(s);
    }
    /* the two characters base64url changes (RFC 4648 §5), no padding */
    const uint8_t b[] = {0xfb, 0xff};
    char *s = NULL;
    assert_int_equal(gw_acme_b64url(b, 2, &s), 0);
    assert_string_equal(s, "-_8");
    gw_free(s);
}

static void test_thumbprint_rfc7638_example(void **state)
{
    (void)state;
    /* RFC 7638 §3.1, with the optional members it shows: they must not count */
    const char *jwk =
        "{\"kty\":\"RSA\",\"n\":"
        "\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1"
        "RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_"
        "RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n9"
        "1CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-"
        "csFCur-kEgU8awapJzKnqDKgw\",\"e\":\"AQAB\",\"alg\":\"RS256\",\"kid\":\"2011-04-29\"}";
    char *t = NULL;
    assert_int_equal(gw_acme_thumbprint(jwk, &t), 0);
    assert_string_equal(t, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    gw_free(t);
    assert_int_equal(gw_acme_thumbprint("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AA\"}", &t),
                     GW_E_PARSE);
    assert_int_equal(gw_acme_thumbprint("{\"kty\":\"oct\",\"k\":\"AA\"}", &t), GW_E_UNSUPPORTED);
    assert_int_equal(gw_acme_thumbprint("[1]", &t), GW_E_PARSE);
    assert_int_equal(gw_acme_thumbprint("{\"kty\":1}", &t), GW_E_PARSE);
}

static void test_jwk_of_rfc7515_a3_key(void **state)
{
    (void)state;
    EVP_PKEY *k = rfc7515_key();
    char *jwk = NULL;
    assert_int_equal(gw_acme_jwk(k, &jwk), 0);
    /* RFC 7515 §A.3's x and y, derived here from d */
    assert_string_equal(jwk, "{\"crv\":\"P-256\",\"kty\":\"EC\","
                             "\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\","
                             "\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\"}");
    /* the thumbprint of the canonical text is the thumbprint of the key */
    char *t1 = NULL, *t2 = NULL;
    assert_int_equal(gw_acme_thumbprint(jwk, &t1), 0);
    assert_int_equal(
        gw_acme_thumbprint("{\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\",\"use\":\"sig\","
                           "\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\",\"kty\":\"EC\","
                           "\"crv\":\"P-256\"}",
                           &t2),
        0);
    assert_string_equal(t1, t2);
    char *ka = NULL;
    assert_int_equal(gw_acme_key_authz("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", t1, &ka), 0);
    char want[256];
    snprintf(want, sizeof(want), "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.%s", t1);
    assert_string_equal(ka, want);
    gw_free(ka);
    gw_free(t1);
    gw_free(t2);
    gw_free(jwk);
    /* an RSA key is not an ES256 account key */
    EVP_PKEY *r = EVP_RSA_gen(1024);
    assert_int_equal(gw_acme_jwk(r, &jwk), GW_E_UNSUPPORTED);
    char *body = NULL;
    assert_int_equal(gw_acme_jws(r, NULL, "n", "https://a/", "{}", &body), GW_E_UNSUPPORTED);
    EVP_PKEY_free(r);
    EVP_PKEY_free(k);
}

static void test_jws_verifies_with_jwk_then_kid(void **state)
{
    (void)state;
    EVP_PKEY *k = EVP_EC_gen("P-256");
    char *body = NULL, *payload = NULL, *jwk = NULL;
    assert_int_equal(gw_acme_jws(k, NULL, "nonce1", "https://ca/new-acct", "{\"a\":1}", &body), 0);
    json_t *h = verify_jws(k, body, &payload);
    assert_string_equal(json_string_value(json_object_get(h, "alg")), "ES256");
    assert_string_equal(json_string_value(json_object_get(h, "nonce")), "nonce1");
    assert_string_equal(json_string_value(json_object_get(h, "url")), "https://ca/new-acct");
    assert_null(json_object_get(h, "kid"));
    assert_int_equal(gw_acme_jwk(k, &jwk), 0);
    char *hj = json_dumps(json_object_get(h, "jwk"), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(hj, jwk);
    assert_string_equal(payload, "{\"a\":1}");
    free(hj);
    free(payload);
    json_decref(h);
    gw_free(body);
    /* kid instead of jwk; POST-as-GET signs an empty payload (RFC 8555 §6.3) */
    assert_int_equal(gw_acme_jws(k, "https://ca/acct/7", "nonce2", "https://ca/o/1", NULL, &body),
                     0);
    h = verify_jws(k, body, &payload);
    assert_string_equal(json_string_value(json_object_get(h, "kid")), "https://ca/acct/7");
    assert_null(json_object_get(h, "jwk"));
    assert_string_equal(payload, "");
    free(payload);
    json_decref(h);
    gw_free(body);
    gw_free(jwk);
    EVP_PKEY_free(k);
}

/* key_type: rsa-2048: the CSR carries the RSA key and is signed with it (sha256WithRSA); the
 * account key stays P-256 (an RSA key is not one the JWS signs with). */
static void test_csr_with_an_rsa_2048_key(void **state)
{
    (void)state;
    EVP_PKEY *k = EVP_RSA_gen(2048);
    assert_non_null(k);
    const char *names[] = {"a.example", "b.example"};
    char *csr = NULL, *jws = NULL;
    assert_int_equal(gw_acme_csr(k, names, 2, &csr), 0);
    uint8_t der[4096];
    size_t n = b64url_decode(csr, der, sizeof(der));
    const uint8_t *p = der;
    X509_REQ *req = d2i_X509_REQ(NULL, &p, (long)n);
    assert_non_null(req);
    assert_int_equal(X509_REQ_verify(req, k), 1);
    EVP_PKEY *pub = X509_REQ_get0_pubkey(req);
    assert_int_equal(EVP_PKEY_get_base_id(pub), EVP_PKEY_RSA);
    assert_int_equal(EVP_PKEY_get_bits(pub), 2048);
    assert_int_equal(EVP_PKEY_eq(pub, k), 1);
    assert_int_equal(X509_REQ_get_signature_nid(req), NID_sha256WithRSAEncryption);
    /* another key does not verify it */
    EVP_PKEY *other = EVP_RSA_gen(2048);
    assert_int_equal(X509_REQ_verify(req, other), 0);
    assert_int_equal(gw_acme_jws(k, NULL, "n", "https://ca.test/x", "{}", &jws), GW_E_UNSUPPORTED);
    assert_null(jws);
    EVP_PKEY_free(other);
    X509_REQ_free(req);
    gw_free(csr);
    EVP_PKEY_free(k);
}

static void test_csr_carries_every_name(void **state)
{
    (void)state;
    EVP_PKEY *k = EVP_EC_gen("P-256");
    const char *names[] = {"a.example", "www.a.example"};
    char *csr = NULL;
    assert_int_equal(gw_acme_csr(k, names, 0, &csr), GW_E_INVAL);
    assert_int_equal(gw_acme_csr(k, names, 2, &csr), 0);
    uint8_t der[4096];
    size_t n = b64url_decode(csr, der, sizeof(der));
    const uint8_t *p = der;
    X509_REQ *req = d2i_X509_REQ(NULL, &p, (long)n);
    assert_non_null(req);
    assert_int_equal(X509_REQ_verify(req, k), 1);
    char cn[64];
    assert_true(X509_NAME_get_text_by_NID(X509_REQ_get_subject_name(req), NID_commonName, cn,
                                          sizeof(cn)) > 0);
    assert_string_equal(cn, "a.example");
    STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(req);
    GENERAL_NAMES *gens = X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL);
    assert_int_equal(sk_GENERAL_NAME_num(gens), 2);
    for (int i = 0; i < 2; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        assert_int_equal(g->type, GEN_DNS);
        assert_string_equal((const char *)ASN1_STRING_get0_data(g->d.dNSName), names[i]);
    }
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    gw_free(csr);
    EVP_PKEY_free(k);
}

/* ---- the order against a scripted server -------------------------------------------------------
 */

#define DIR "https://ca.test/dir"
#define NEW_NONCE "https://ca.test/nonce"
#define NEW_ACCT "https://ca.test/acct"
#define NEW_ORDER "https://ca.test/order"
#define ACCT_URL "https://ca.test/acct/1"
#define ORDER_URL "https://ca.test/order/1"
#define AUTHZ1 "https://ca.test/authz/1"
#define AUTHZ2 "https://ca.test/authz/2"
#define CHAL1 "https://ca.test/chal/1"
#define FINALIZE "https://ca.test/order/1/finalize"
#define CERT_URL "https://ca.test/cert/1"
#define TOKEN1 "tok1_-AZaz09"
#define CHAIN "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

static const char DIRECTORY[] = "{\"newNonce\":\"" NEW_NONCE "\",\"newAccount\":\"" NEW_ACCT
                                "\",\"newOrder\":\"" NEW_ORDER "\"}";

typedef struct {
    EVP_PKEY *akey, *ckey;
    gw_acme_order_t *o;
    char nonce[32];  /* the last nonce the server gave */
    unsigned issued; /* nonces given */
} server_t;

static const char *const NAMES[] = {"a.test", "b.test"};

static void server_start(server_t *s, gw_acme_challenge_t ch)
{
    memset(s, 0, sizeof(*s));
    s->akey = EVP_EC_gen("P-256");
    s->ckey = EVP_EC_gen("P-256");
    gw_acme_params_t p = {.directory = DIR,
                          .email = "ops@a.test",
                          .names = NAMES,
                          .n_names = 2,
                          .challenge = ch,
                          .account_key = s->akey,
                          .cert_key = s->ckey};
    assert_int_equal(gw_acme_order_new(&p, &s->o), 0);
}

static void server_stop(server_t *s)
{
    gw_acme_order_del(s->o);
    EVP_PKEY_free(s->akey);
    EVP_PKEY_free(s->ckey);
}

/* One exchange: the order must send method to url (a POST signed by the account key with the
 * last nonce given, jwk for newAccount and kid after); the server answers status with a fresh
 * nonce (unless no_nonce), location, retry_after and body. Returns the decoded payload of a
 * POST (malloc'd) or NULL. */
static char *exchange_(server_t *s, const char *method, const char *url, int status,
                       const char *location, const char *retry_after, const char *body,
                       int no_nonce)
{
    gw_acme_action_t a;
    assert_int_equal(gw_acme_order_next(s->o, &a), 0);
    assert_int_equal(a.what, GW_ACME_DO_SEND);
    assert_string_equal(a.method, method);
    assert_string_equal(a.url, url);
    char *payload = NULL;
    if (strcmp(method, "POST") == 0) {
        json_t *h = verify_jws(s->akey, a.body, &payload);
        assert_string_equal(json_string_value(json_object_get(h, "nonce")), s->nonce);
        assert_string_equal(json_string_value(json_object_get(h, "url")), url);
        if (strcmp(url, NEW_ACCT) == 0) {
            assert_non_null(json_object_get(h, "jwk"));
            assert_null(json_object_get(h, "kid"));
        } else {
            assert_string_equal(json_string_value(json_object_get(h, "kid")), ACCT_URL);
            assert_null(json_object_get(h, "jwk"));
        }
        json_decref(h);
        s->nonce[0] = 0; /* spent */
    }
    /* a nonce on every answer to a POST or a HEAD; the directory's GET carries none, so the
     * first POST needs a HEAD to newNonce */
    no_nonce = no_nonce || strcmp(method, "GET") == 0;
    if (!no_nonce)
        snprintf(s->nonce, sizeof(s->nonce), "nonce%u", ++s->issued);
    gw_acme_response_t r = {.status = status,
                            .location = location,
                            .replay_nonce = no_nonce ? NULL : s->nonce,
                            .retry_after = retry_after,
                            .body = (const uint8_t *)body,
                            .body_len = body ? strlen(body) : 0};
    gw_acme_order_recv(s->o, &r);
    return payload;
}
#define exchange(s, m, u, st, loc, ra, body) exchange_(s, m, u, st, loc, ra, body, 0)

static void expect_next(server_t *s, gw_acme_do_t what, gw_acme_action_t *a)
{
    assert_int_equal(gw_acme_order_next(s->o, a), 0);
    assert_int_equal(a->what, what);
}

/* From the directory to the new order with two authorizations. */
static void up_to_authz(server_t *s)
{
    free(exchange(s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange(s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    char *p = exchange(s, "POST", NEW_ACCT, 201, ACCT_URL, NULL, "{\"status\":\"valid\"}");
    json_t *j = json_loads(p, 0, NULL);
    assert_true(json_is_true(json_object_get(j, "termsOfServiceAgreed")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "contact"), 0)),
                        "mailto:ops@a.test");
    json_decref(j);
    free(p);
    assert_string_equal(gw_acme_order_account(s->o), ACCT_URL);
    p = exchange(s, "POST", NEW_ORDER, 201, ORDER_URL, NULL,
                 "{\"status\":\"pending\",\"authorizations\":[\"" AUTHZ1 "\",\"" AUTHZ2
                 "\"],\"finalize\":\"" FINALIZE "\"}");
    j = json_loads(p, 0, NULL);
    json_t *ids = json_object_get(j, "identifiers");
    assert_int_equal(json_array_size(ids), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ids, 1), "value")),
                        "b.test");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ids, 1), "type")), "dns");
    json_decref(j);
    free(p);
}

static const char AUTHZ1_PENDING[] =
    "{\"status\":\"pending\",\"identifier\":{\"type\":\"dns\",\"value\":\"a.test\"},"
    "\"challenges\":[{\"type\":\"dns-01\",\"url\":\"https://ca.test/chal/9\",\"token\":\"x\"},"
    "{\"type\":\"http-01\",\"url\":\"" CHAL1 "\",\"token\":\"" TOKEN1 "\",\"status\":\"pending\"},"
    "{\"type\":\"tls-alpn-01\",\"url\":\"https://ca.test/chal/3\",\"token\":\"" TOKEN1 "\"}]}";

static void test_order_two_names_to_the_chain(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    up_to_authz(&s);
    free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL, AUTHZ1_PENDING));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_PUBLISH, &a);
    assert_int_equal(a.type, GW_ACME_CH_HTTP_01);
    assert_string_equal(a.name, "a.test");
    assert_string_equal(a.token, TOKEN1);
    char *jwk = NULL, *thumb = NULL, want[256];
    assert_int_equal(gw_acme_jwk(s.akey, &jwk), 0);
    assert_int_equal(gw_acme_thumbprint(jwk, &thumb), 0);
    snprintf(want, sizeof(want), "%s.%s", TOKEN1, thumb);
    assert_string_equal(a.key_authz, want);
    gw_free(jwk);
    gw_free(thumb);
    /* asked again before the driver resumes: the same action */
    expect_next(&s, GW_ACME_DO_PUBLISH, &a);
    gw_acme_order_resume(s.o);
    char *p = exchange(&s, "POST", CHAL1, 200, NULL, "3", "{\"status\":\"processing\"}");
    assert_string_equal(p, "{}");
    free(p);
    expect_next(&s, GW_ACME_DO_WAIT, &a);
    assert_int_equal(a.delay_ms, 3000);
    gw_acme_order_resume(s.o);
    free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL,
                  "{\"status\":\"pending\",\"identifier\":{\"value\":\"a.test\"}}"));
    expect_next(&s, GW_ACME_DO_WAIT, &a);
    assert_int_equal(a.delay_ms, GW_ACME_POLL_DEFAULT_MS);
    gw_acme_order_resume(s.o);
    p = exchange(&s, "POST", AUTHZ1, 200, NULL, NULL,
                 "{\"status\":\"valid\",\"identifier\":{\"value\":\"a.test\"}}");
    assert_string_equal(p, ""); /* POST-as-GET */
    free(p);
    /* the second name is valid already (an earlier order): no challenge */
    free(exchange(&s, "POST", AUTHZ2, 200, NULL, NULL,
                  "{\"status\":\"valid\",\"identifier\":{\"value\":\"B.test\"}}"));
    p = exchange(&s, "POST", FINALIZE, 200, NULL, NULL, "{\"status\":\"processing\"}");
    json_t *j = json_loads(p, 0, NULL);
    const char *csr = json_string_value(json_object_get(j, "csr"));
    assert_non_null(csr);
    uint8_t der[4096];
    size_t n = b64url_decode(csr, der, sizeof(der));
    const uint8_t *dp = der;
    X509_REQ *req = d2i_X509_REQ(NULL, &dp, (long)n);
    assert_non_null(req);
    assert_int_equal(X509_REQ_verify(req, s.ckey),
                     1); /* the certificate's key, not the account's */
    X509_REQ_free(req);
    json_decref(j);
    free(p);
    expect_next(&s, GW_ACME_DO_WAIT, &a);
    gw_acme_order_resume(s.o);
    free(exchange(&s, "POST", ORDER_URL, 200, NULL, NULL,
                  "{\"status\":\"valid\",\"certificate\":\"" CERT_URL "\"}"));
    free(exchange(&s, "POST", CERT_URL, 200, NULL, NULL, CHAIN));
    expect_next(&s, GW_ACME_DO_DONE, &a);
    assert_int_equal(a.body_len, strlen(CHAIN));
    assert_memory_equal(a.body, CHAIN, a.body_len);
    assert_int_equal(gw_acme_order_state(s.o), GW_ACME_S_DONE);
    assert_int_equal(gw_acme_order_sent(s.o), 12);
    assert_int_equal(gw_acme_order_nonce_retries(s.o), 0);
    server_stop(&s);
}

static void test_order_tls_alpn_picks_its_challenge(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_TLS_ALPN_01);
    up_to_authz(&s);
    free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL, AUTHZ1_PENDING));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_PUBLISH, &a);
    assert_int_equal(a.type, GW_ACME_CH_TLS_ALPN_01);
    gw_acme_order_resume(s.o);
    free(exchange(&s, "POST", "https://ca.test/chal/3", 200, NULL, NULL, "{}"));
    server_stop(&s);
}

static const char BAD_NONCE[] =
    "{\"type\":\"urn:ietf:params:acme:error:badNonce\",\"detail\":\"JWS has an invalid anti-replay "
    "nonce\"}";

static void test_bad_nonce_retried_with_the_new_nonce_a_bounded_number_of_times(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    /* the same request again, signed over the nonce of the refusal (exchange() checks it) */
    free(exchange(&s, "POST", NEW_ACCT, 400, NULL, NULL, BAD_NONCE));
    free(exchange(&s, "POST", NEW_ACCT, 200, ACCT_URL, NULL, "{\"status\":\"valid\"}"));
    assert_int_equal(gw_acme_order_nonce_retries(s.o), 1);
    /* a refusal without a nonce: the retry fetches one first */
    free(exchange_(&s, "POST", NEW_ORDER, 400, NULL, NULL, BAD_NONCE, 1));
    free(exchange(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    /* refused again and again (a server refusing some good nonces, RFC 8555 §6.5): retried
     * GW_ACME_MAX_NONCE_RETRIES times in a row for one request, counting the refusal above */
    for (unsigned i = 1; i < GW_ACME_MAX_NONCE_RETRIES; i++)
        free(exchange(&s, "POST", NEW_ORDER, 400, NULL, NULL, BAD_NONCE));
    assert_int_equal(gw_acme_order_nonce_retries(s.o), 1 + GW_ACME_MAX_NONCE_RETRIES);
    /* one more in a row: the order fails with the server's words */
    free(exchange(&s, "POST", NEW_ORDER, 400, NULL, NULL, BAD_NONCE));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_int_equal(a.status, 400);
    assert_string_equal(a.problem_type, "urn:ietf:params:acme:error:badNonce");
    assert_non_null(strstr(a.detail, "invalid anti-replay nonce"));
    assert_int_equal(gw_acme_order_nonce_retries(s.o), 1 + GW_ACME_MAX_NONCE_RETRIES);
    server_stop(&s);
}

static void test_bad_nonce_count_starts_again_after_an_answer(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    /* GW_ACME_MAX_NONCE_RETRIES refusals before each of two requests: both go through */
    for (unsigned i = 0; i < GW_ACME_MAX_NONCE_RETRIES; i++)
        free(exchange(&s, "POST", NEW_ACCT, 400, NULL, NULL, BAD_NONCE));
    free(exchange(&s, "POST", NEW_ACCT, 200, ACCT_URL, NULL, "{\"status\":\"valid\"}"));
    for (unsigned i = 0; i < GW_ACME_MAX_NONCE_RETRIES; i++)
        free(exchange(&s, "POST", NEW_ORDER, 400, NULL, NULL, BAD_NONCE));
    free(exchange(&s, "POST", NEW_ORDER, 201, ORDER_URL, NULL,
                  "{\"status\":\"pending\",\"authorizations\":[\"" AUTHZ1
                  "\"],\"finalize\":\"" FINALIZE "\"}"));
    assert_int_equal(gw_acme_order_state(s.o), GW_ACME_S_AUTHZ);
    assert_int_equal(gw_acme_order_nonce_retries(s.o), 2 * GW_ACME_MAX_NONCE_RETRIES);
    server_stop(&s);
}

static void test_problem_document_fails_with_its_detail(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    free(exchange(&s, "POST", NEW_ACCT, 403, NULL, NULL,
                  "{\"type\":\"urn:ietf:params:acme:error:unauthorized\",\"detail\":\"no "
                  "account for you\",\"status\":403}"));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_int_equal(a.status, 403);
    assert_string_equal(a.problem_type, "urn:ietf:params:acme:error:unauthorized");
    assert_non_null(strstr(a.detail, "no account for you"));
    /* after a failure, answers change nothing */
    gw_acme_response_t r = {.status = 200};
    gw_acme_order_recv(s.o, &r);
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    server_stop(&s);
}

static void test_malformed_answers_fail_the_order(void **state)
{
    (void)state;
    static const char *const dirs[] = {
        "not json", "[]", "{\"newNonce\":\"" NEW_NONCE "\",\"newAccount\":\"" NEW_ACCT "\"}",
        "{\"newNonce\":\"ftp://x\",\"newAccount\":\"" NEW_ACCT "\",\"newOrder\":\"" NEW_ORDER "\"}",
        "{\"newNonce\":\"" NEW_NONCE "\",\"newNonce\":\"" NEW_NONCE "\",\"newAccount\":\"" NEW_ACCT
        "\",\"newOrder\":\"" NEW_ORDER "\"}"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        server_t s;
        server_start(&s, GW_ACME_CH_HTTP_01);
        free(exchange(&s, "GET", DIR, 200, NULL, NULL, dirs[i]));
        gw_acme_action_t a;
        expect_next(&s, GW_ACME_DO_FAIL, &a);
        assert_string_equal(a.problem_type, "h2gate:protocol");
        server_stop(&s);
    }
    /* an account without a Location; a 500 without a problem document; a HEAD without a nonce */
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    free(exchange(&s, "POST", NEW_ACCT, 201, NULL, NULL, "{\"status\":\"valid\"}"));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_non_null(strstr(a.detail, "location missing"));
    server_stop(&s);
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 500, NULL, NULL, "oops"));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_int_equal(a.status, 500);
    assert_string_equal(a.problem_type, "h2gate:http");
    server_stop(&s);
    server_start(&s, GW_ACME_CH_HTTP_01);
    free(exchange(&s, "GET", DIR, 200, NULL, NULL, DIRECTORY));
    free(exchange_(&s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL, 1));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    server_stop(&s);
    /* the transport's failure, with the URL it was for */
    server_start(&s, GW_ACME_CH_HTTP_01);
    expect_next(&s, GW_ACME_DO_SEND, &a);
    gw_acme_order_transport_failed(s.o, "connection refused");
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.problem_type, "h2gate:transport");
    assert_string_equal(a.detail, "directory " DIR ": connection refused");
    server_stop(&s);
}

static void test_invalid_authorization_reports_the_challenge_error(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    up_to_authz(&s);
    free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL, AUTHZ1_PENDING));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_PUBLISH, &a);
    gw_acme_order_resume(s.o);
    free(exchange(&s, "POST", CHAL1, 200, NULL, "0", "{\"status\":\"processing\"}"));
    expect_next(&s, GW_ACME_DO_WAIT, &a);
    assert_int_equal(a.delay_ms, GW_ACME_POLL_MIN_MS);
    gw_acme_order_resume(s.o);
    free(exchange(
        &s, "POST", AUTHZ1, 200, NULL, NULL,
        "{\"status\":\"invalid\",\"identifier\":{\"value\":\"a.test\"},\"challenges\":[{\"type\":"
        "\"http-01\",\"url\":\"" CHAL1 "\",\"token\":\"" TOKEN1 "\",\"status\":\"invalid\","
        "\"error\":{\"type\":\"urn:ietf:params:acme:error:connection\",\"detail\":\"Connection "
        "refused\"}}]}"));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_string_equal(a.problem_type, "urn:ietf:params:acme:error:connection");
    assert_string_equal(a.detail, "authorization of a.test invalid: Connection refused");
    server_stop(&s);
}

static void test_unsafe_token_or_foreign_name_refused(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        /* a token that would climb out of the challenge path */
        "{\"status\":\"pending\",\"identifier\":{\"value\":\"a.test\"},\"challenges\":[{\"type\":"
        "\"http-01\",\"url\":\"" CHAL1 "\",\"token\":\"../../etc\"}]}",
        /* a name we did not ask for */
        "{\"status\":\"pending\",\"identifier\":{\"value\":\"evil.test\"},\"challenges\":[{"
        "\"type\":"
        "\"http-01\",\"url\":\"" CHAL1 "\",\"token\":\"" TOKEN1 "\"}]}",
        /* no challenge of our type */
        "{\"status\":\"pending\",\"identifier\":{\"value\":\"a.test\"},\"challenges\":[{\"type\":"
        "\"dns-01\",\"url\":\"" CHAL1 "\",\"token\":\"" TOKEN1 "\"}]}",
    };
    for (size_t i = 0; i < 3; i++) {
        server_t s;
        server_start(&s, GW_ACME_CH_HTTP_01);
        up_to_authz(&s);
        free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL, bodies[i]));
        gw_acme_action_t a;
        expect_next(&s, GW_ACME_DO_FAIL, &a);
        assert_string_equal(a.problem_type, "h2gate:protocol");
        server_stop(&s);
    }
}

static void test_polls_are_bounded(void **state)
{
    (void)state;
    server_t s;
    server_start(&s, GW_ACME_CH_HTTP_01);
    up_to_authz(&s);
    free(exchange(&s, "POST", AUTHZ1, 200, NULL, NULL,
                  "{\"status\":\"valid\",\"identifier\":{\"value\":\"a.test\"}}"));
    free(exchange(&s, "POST", AUTHZ2, 200, NULL, NULL,
                  "{\"status\":\"valid\",\"identifier\":{\"value\":\"b.test\"}}"));
    free(exchange(&s, "POST", FINALIZE, 200, NULL, "100000", "{\"status\":\"processing\"}"));
    gw_acme_action_t a;
    expect_next(&s, GW_ACME_DO_WAIT, &a);
    assert_int_equal(a.delay_ms, GW_ACME_POLL_MAX_MS);
    for (int i = 1; i < GW_ACME_MAX_POLLS; i++) {
        gw_acme_order_resume(s.o);
        free(exchange(&s, "POST", ORDER_URL, 200, NULL, "Wed, 21 Oct 2015 07:28:00 GMT",
                      "{\"status\":\"processing\"}"));
        expect_next(&s, GW_ACME_DO_WAIT, &a);
        assert_int_equal(a.delay_ms, GW_ACME_POLL_DEFAULT_MS);
    }
    gw_acme_order_resume(s.o);
    free(exchange(&s, "POST", ORDER_URL, 200, NULL, NULL, "{\"status\":\"processing\"}"));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_string_equal(a.problem_type, "h2gate:timeout");
    server_stop(&s);
}

/* ---- ARI's replaces (RFC 9773 §5) ---- */

#define CERT_ID "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE"

static const char DIRECTORY_ARI[] =
    "{\"newNonce\":\"" NEW_NONCE "\",\"newAccount\":\"" NEW_ACCT "\",\"newOrder\":\"" NEW_ORDER
    "\",\"renewalInfo\":\"https://ca.test/ari\"}";
static const char NEW_ORDER_OK[] =
    "{\"status\":\"pending\",\"authorizations\":[\"" AUTHZ1 "\"],\"finalize\":\"" FINALIZE "\"}";

/* An order renewing CERT_ID against a directory (dir), up to the account. */
static void replaces_start(server_t *s, const char *dir)
{
    memset(s, 0, sizeof(*s));
    s->akey = EVP_EC_gen("P-256");
    s->ckey = EVP_EC_gen("P-256");
    gw_acme_params_t p = {.directory = DIR,
                          .names = NAMES,
                          .n_names = 2,
                          .challenge = GW_ACME_CH_HTTP_01,
                          .account_key = s->akey,
                          .cert_key = s->ckey,
                          .replaces = CERT_ID};
    assert_int_equal(gw_acme_order_new(&p, &s->o), 0);
    assert_int_equal(gw_acme_order_replaces(s->o), 1);
    free(exchange(s, "GET", DIR, 200, NULL, NULL, dir));
    free(exchange(s, "HEAD", NEW_NONCE, 200, NULL, NULL, NULL));
    free(exchange(s, "POST", NEW_ACCT, 200, ACCT_URL, NULL, "{\"status\":\"valid\"}"));
}

/* The newOrder payload's replaces member, or NULL (p is freed). */
static char *payload_replaces(char *p)
{
    json_t *j = json_loads(p, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "identifiers")), 2);
    const char *r = json_string_value(json_object_get(j, "replaces"));
    char *out = r ? strdup(r) : NULL;
    json_decref(j);
    free(p);
    return out;
}

static void test_replaces_sent_when_the_directory_offers_ari(void **state)
{
    (void)state;
    server_t s;
    replaces_start(&s, DIRECTORY_ARI);
    char *r = payload_replaces(exchange(&s, "POST", NEW_ORDER, 201, ORDER_URL, NULL, NEW_ORDER_OK));
    assert_non_null(r);
    assert_string_equal(r, CERT_ID);
    free(r);
    assert_int_equal(gw_acme_order_state(s.o), GW_ACME_S_AUTHZ);
    assert_null(gw_acme_order_replaces_refused(s.o));
    server_stop(&s);
    /* without renewalInfo in the directory: not sent (RFC 9773 §5 SHOULD NOT) */
    replaces_start(&s, DIRECTORY);
    assert_int_equal(gw_acme_order_replaces(s.o), 0);
    assert_null(
        payload_replaces(exchange(&s, "POST", NEW_ORDER, 201, ORDER_URL, NULL, NEW_ORDER_OK)));
    server_stop(&s);
}

static void test_replaces_refused_then_the_order_without_it(void **state)
{
    (void)state;
    static const char *const refusals[] = {
        "{\"type\":\"urn:ietf:params:acme:error:alreadyReplaced\",\"detail\":\"already "
        "replaced\",\"status\":409}",
        "{\"type\":\"urn:ietf:params:acme:error:malformed\",\"detail\":\"no such "
        "certificate\",\"status\":400}",
    };
    static const int status[] = {409, 400};
    for (size_t i = 0; i < 2; i++) {
        server_t s;
        replaces_start(&s, DIRECTORY_ARI);
        /* a badNonce first is retried with replaces still in */
        char *r = payload_replaces(exchange(&s, "POST", NEW_ORDER, 400, NULL, NULL, BAD_NONCE));
        assert_string_equal(r, CERT_ID);
        free(r);
        r = payload_replaces(exchange(&s, "POST", NEW_ORDER, status[i], NULL, NULL, refusals[i]));
        assert_string_equal(r, CERT_ID);
        free(r);
        assert_int_equal(gw_acme_order_replaces(s.o), 0);
        assert_string_equal(gw_acme_order_replaces_refused(s.o),
                            i == 0 ? "urn:ietf:params:acme:error:alreadyReplaced"
                                   : "urn:ietf:params:acme:error:malformed");
        /* the same newOrder again, signed over the refusal's nonce, without replaces */
        assert_null(
            payload_replaces(exchange(&s, "POST", NEW_ORDER, 201, ORDER_URL, NULL, NEW_ORDER_OK)));
        assert_int_equal(gw_acme_order_state(s.o), GW_ACME_S_AUTHZ);
        server_stop(&s);
    }
    /* refused again without it, or rate limited: the order fails with the server's words */
    server_t s;
    gw_acme_action_t a;
    replaces_start(&s, DIRECTORY_ARI);
    free(exchange(&s, "POST", NEW_ORDER, 409, NULL, NULL, refusals[0]));
    free(exchange(&s, "POST", NEW_ORDER, 409, NULL, NULL, refusals[0]));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_string_equal(a.problem_type, "urn:ietf:params:acme:error:alreadyReplaced");
    server_stop(&s);
    replaces_start(&s, DIRECTORY_ARI);
    free(exchange(&s, "POST", NEW_ORDER, 429, NULL, NULL,
                  "{\"type\":\"urn:ietf:params:acme:error:rateLimited\",\"detail\":\"slow "
                  "down\"}"));
    expect_next(&s, GW_ACME_DO_FAIL, &a);
    assert_string_equal(a.problem_type, "urn:ietf:params:acme:error:rateLimited");
    assert_null(gw_acme_order_replaces_refused(s.o));
    server_stop(&s);
}

static void test_order_params_checked(void **state)
{
    (void)state;
    EVP_PKEY *k = EVP_EC_gen("P-256"), *r = EVP_RSA_gen(1024);
    gw_acme_order_t *o = NULL;
    gw_acme_params_t p = {
        .directory = DIR, .names = NAMES, .n_names = 0, .account_key = k, .cert_key = k};
    assert_int_equal(gw_acme_order_new(&p, &o), GW_E_INVAL);
    p.n_names = GW_ACME_MAX_NAMES + 1;
    assert_int_equal(gw_acme_order_new(&p, &o), GW_E_INVAL);
    p.n_names = 1;
    p.directory = NULL;
    assert_int_equal(gw_acme_order_new(&p, &o), GW_E_INVAL);
    p.directory = DIR;
    p.account_key = r;
    assert_int_equal(gw_acme_order_new(&p, &o), GW_E_UNSUPPORTED);
    p.account_key = k;
    p.replaces = "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE";
    /* a failing allocation anywhere in the constructor is an error, never a crash or a leak */
    for (unsigned long n = 1;; n++) {
        gw_alloc_fail_after(n);
        int rv = gw_acme_order_new(&p, &o);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rv, 0);
            gw_acme_order_del(o);
            break;
        }
        assert_int_equal(rv, GW_E_NOMEM);
    }
    EVP_PKEY_free(k);
    EVP_PKEY_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url_rfc4648_vectors),
        cmocka_unit_test(test_thumbprint_rfc7638_example),
        cmocka_unit_test(test_jwk_of_rfc7515_a3_key),
        cmocka_unit_test(test_jws_verifies_with_jwk_then_kid),
        cmocka_unit_test(test_csr_carries_every_name),
        cmocka_unit_test(test_csr_with_an_rsa_2048_key),
        cmocka_unit_test(test_order_two_names_to_the_chain),
        cmocka_unit_test(test_order_tls_alpn_picks_its_challenge),
        cmocka_unit_test(test_bad_nonce_retried_with_the_new_nonce_a_bounded_number_of_times),
        cmocka_unit_test(test_bad_nonce_count_starts_again_after_an_answer),
        cmocka_unit_test(test_problem_document_fails_with_its_detail),
        cmocka_unit_test(test_malformed_answers_fail_the_order),
        cmocka_unit_test(test_invalid_authorization_reports_the_challenge_error),
        cmocka_unit_test(test_unsafe_token_or_foreign_name_refused),
        cmocka_unit_test(test_polls_are_bounded),
        cmocka_unit_test(test_order_params_checked),
        cmocka_unit_test(test_replaces_sent_when_the_directory_offers_ari),
        cmocka_unit_test(test_replaces_refused_then_the_order_without_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
