/* Unit tests of tls/store.c: the certificate store of an ACME listener, with a listener context
 * built from a tls with acme names and a plain OpenSSL client over memory BIOs. The stand-in
 * for the names; a certificate swapped in reaching new handshakes while a connection made
 * before keeps its own and still carries data; tls-alpn-01 (RFC 8737 §3): acme-tls/1 chosen,
 * the challenge certificate for the name with its critical acmeIdentifier holding the digest,
 * a handshake refused for a name without a challenge and after the challenges are withdrawn;
 * whether a stored chain is usable (expired, names not covered, key mismatch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/alloc.h"
#include "common/err.h"
#include "tls/tls.h"
#include "tls/tls_internal.h"
#include "tls_test_util.h"

/* a self-signed pair for localhost: the chain a store is given */
GW_TLS_TEST_CERTS(2, "/tmp/gw_tls_store_test_XXXXXX")

static const unsigned char ALPN[] = "\x02h2\x08http/1.1";
static char *names_a[] = {"a.test", "b.test"};

typedef struct {
    gw_cfg_cert_t cert;
    gw_cfg_tls_t cfg;
    gw_tls_ctx_t *ctx;
    gw_tls_store_t *store;
    SSL_CTX *cctx;
} fixture_t;

/* A listener on names_a serving the stand-in; tune (when not NULL) changes its tls first. */
static void fixture_init_with(fixture_t *f, void (*tune)(gw_cfg_tls_t *))
{
    memset(f, 0, sizeof(*f));
    f->cfg.certs = &f->cert;
    f->cfg.certs_len = 1;
    f->cfg.min_version = 12;
    f->cfg.acme = names_a;
    f->cfg.acme_len = 2;
    if (tune)
        tune(&f->cfg);
    assert_int_equal(gw_tls_ctx_new(&f->cfg, ALPN, sizeof(ALPN) - 1, NULL, &f->ctx), 0);
    assert_int_equal(gw_tls_store_new(&f->store), 0);
    assert_int_equal(gw_tls_store_set_self_signed(f->store, (const char *const *)names_a, 2), 0);
    gw_tls_ctx_set_store(f->ctx, f->store);
    f->cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(f->cctx, SSL_VERIFY_NONE, NULL);
}

static void fixture_init(fixture_t *f)
{
    fixture_init_with(f, NULL);
}

static void fixture_free(fixture_t *f)
{
    gw_tls_ctx_del(f->ctx); /* drops its reference on the store */
    gw_tls_store_unref(f->store);
    SSL_CTX_free(f->cctx);
}

typedef struct {
    SSL *cli;
    BIO *rb, *wb; /* the client's: bytes from the server, bytes to it */
    gw_tls_conn_t *srv;
} conn_t;

/* The server's "ping" reaches the client: the connection carries data. */
static void expect_ping(conn_t *c)
{
    assert_int_equal(gw_tls_write(c->srv, "ping", 4), 0);
    char buf[4096];
    size_t k = gw_tls_take_out(c->srv, buf, sizeof(buf));
    BIO_write(c->rb, buf, (int)k);
    char got[8] = {0};
    assert_int_equal(SSL_read(c->cli, got, sizeof(got)), 4);
    assert_string_equal(got, "ping");
}

/* Move bytes both ways until the client's handshake ends; its result (1 or <= 0). */
static int pump(conn_t *c)
{
    int rv = 0;
    for (int i = 0; i < 50; i++) {
        rv = SSL_do_handshake(c->cli);
        /* read now: moving bytes into the BIO below clears its retry flags */
        int err = rv == 1 ? SSL_ERROR_NONE : SSL_get_error(c->cli, rv);
        char buf[16384];
        int n;
        while ((n = BIO_read(c->wb, buf, sizeof(buf))) > 0)
            assert_int_equal(gw_tls_feed(c->srv, buf, (size_t)n), 0);
        gw_tls_handshake(c->srv);
        size_t k;
        while ((k = gw_tls_take_out(c->srv, buf, sizeof(buf))) > 0)
            BIO_write(c->rb, buf, (int)k);
        if (rv == 1 || err != SSL_ERROR_WANT_READ)
            break;
    }
    ERR_clear_error();
    return rv;
}

/* A new client connection to f's listener offering sess (when not NULL); pump's result. */
static int connect_sess(fixture_t *f, conn_t *c, const char *sni, const char *alpn_wire,
                        unsigned alpn_len, SSL_SESSION *sess)
{
    c->cli = SSL_new(f->cctx);
    if (sess)
        assert_int_equal(SSL_set_session(c->cli, sess), 1);
    c->rb = BIO_new(BIO_s_mem());
    c->wb = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(c->rb, -1); /* empty: "retry", not end of file */
    SSL_set_bio(c->cli, c->rb, c->wb);
    SSL_set_connect_state(c->cli);
    SSL_set_tlsext_host_name(c->cli, sni);
    if (alpn_wire)
        SSL_set_alpn_protos(c->cli, (const unsigned char *)alpn_wire, alpn_len);
    c->srv = gw_tls_conn_new(f->ctx);
    assert_non_null(c->srv);
    return pump(c);
}

static int connect_to(fixture_t *f, conn_t *c, const char *sni, const char *alpn_wire,
                      unsigned alpn_len)
{
    return connect_sess(f, c, sni, alpn_wire, alpn_len, NULL);
}

static void conn_free(conn_t *c)
{
    /* as if closed cleanly: OpenSSL makes the session of a connection freed without a
     * shutdown unresumable (ssl_clear_bad_session), and the session tests resume it */
    SSL_set_shutdown(c->cli, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_set_shutdown(c->srv->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c->cli);
    gw_tls_conn_del(c->srv);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static char buf[2][8192];
    static int which;
    char *b = buf[which++ & 1];
    *len = fread(b, 1, sizeof(buf[0]), fp);
    fclose(fp);
    return b;
}

static void test_stand_in_then_swapped_live(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    conn_t before;
    assert_int_equal(connect_to(&f, &before, "b.test", "\x08http/1.1", 9), 1);
    X509 *x = SSL_get1_peer_certificate(before.cli);
    assert_int_equal(X509_check_host(x, "a.test", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "b.test", 0, 0, NULL), 1);
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
    /* signed by its own key, as served (the stand-in is read back from its DER once) */
    assert_int_equal(X509_verify(x, X509_get0_pubkey(x)), 1);
    X509_free(x);
    /* the stored pair (for localhost) swapped in */
    size_t cl, kl;
    char *chain = read_file(tcert[0], &cl), *key = read_file(tkey[0], &kl);
    assert_int_equal(gw_tls_store_set_pem(f.store, chain, cl, key, kl), 0);
    conn_t after;
    assert_int_equal(connect_to(&f, &after, "a.test", "\x08http/1.1", 9), 1);
    x = SSL_get1_peer_certificate(after.cli);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "a.test", 0, 0, NULL), 0);
    X509_free(x);
    /* the connection made before still carries data both ways */
    expect_ping(&before);
    /* a key that does not match the chain is refused, and the certificate stays */
    size_t ol;
    char *other = read_file(tkey[1], &ol);
    chain = read_file(tcert[0], &cl);
    assert_int_equal(gw_tls_store_set_pem(f.store, chain, cl, other, ol), GW_E_PARSE);
    assert_int_equal(gw_tls_store_set_pem(f.store, "junk", 4, other, ol), GW_E_PARSE);
    conn_t again;
    assert_int_equal(connect_to(&f, &again, "a.test", NULL, 0), 1);
    x = SSL_get1_peer_certificate(again.cli);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    X509_free(x);
    /* each certificate is served in a context of its own, made once and kept by the
     * connections that use it */
    assert_ptr_equal(SSL_get_SSL_CTX(again.srv->ssl), SSL_get_SSL_CTX(after.srv->ssl));
    assert_ptr_not_equal(SSL_get_SSL_CTX(before.srv->ssl), SSL_get_SSL_CTX(after.srv->ssl));
    conn_free(&before);
    conn_free(&after);
    conn_free(&again);
    fixture_free(&f);
}

/* The key a handshake took from the store signs with ECDSA on OpenSSL's legacy path (an EC_KEY
 * with a method of its own, made when the store took it), as a configured key does
 * (test_ec_key_signs_on_legacy_path in test_tls_server.c): the provider's path cost about
 * 27,000 more instructions per full handshake in EVP_DigestSignInit. The self-signed stand-in,
 * then a stored certificate, over TLS 1.3 and 1.2; the client checks each signature. */
static void expect_legacy_ec_signer(fixture_t *f, int version, const char *host)
{
    conn_t c;
    SSL_CTX_set_max_proto_version(f->cctx, version);
    assert_int_equal(connect_to(f, &c, "a.test", "\x02h2", 3), 1);
    assert_int_equal(SSL_version(c.cli), version);
    X509 *x = SSL_get1_peer_certificate(c.cli);
    assert_int_equal(X509_check_host(x, host, 0, 0, NULL), 1);
    X509_free(x);
    gw_test_expect_legacy_ec_signer(c.cli, SSL_get_privatekey(c.srv->ssl));
    expect_ping(&c); /* the connection carries data after the handshake it signed */
    conn_free(&c);
}

static void test_stored_ec_key_signs_on_legacy_path(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    expect_legacy_ec_signer(&f, TLS1_3_VERSION, "a.test");
    expect_legacy_ec_signer(&f, TLS1_2_VERSION, "a.test");
    size_t cl, kl;
    char *chain = read_file(tcert[0], &cl), *key = read_file(tkey[0], &kl);
    assert_int_equal(gw_tls_store_set_pem(f.store, chain, cl, key, kl), 0);
    expect_legacy_ec_signer(&f, TLS1_3_VERSION, "localhost");
    expect_legacy_ec_signer(&f, TLS1_2_VERSION, "localhost");
    fixture_free(&f);
}

/* A connection to f offering sess: whether it resumed; the session it ends with in *next
 * (when not NULL). */
static int resumes(fixture_t *f, SSL_SESSION *sess, SSL_SESSION **next)
{
    conn_t c;
    assert_int_equal(connect_sess(f, &c, "a.test", "\x02h2", 3, sess), 1);
    int reused = SSL_session_reused(c.cli);
    if (next)
        *next = gw_test_take_ticket(c.cli);
    conn_free(&c);
    return reused;
}

static void tune_tickets_a(gw_cfg_tls_t *t)
{
    t->session_tickets = 1;
    t->session_id_context = "fleet-a";
}

static void tune_tickets_b(gw_cfg_tls_t *t)
{
    t->session_tickets = 1;
    t->session_id_context = "fleet-b";
}

static void tune_no_tickets(gw_cfg_tls_t *t)
{
    t->session_id_context = "fleet-a";
}

/* Each certificate of the store is served in a context of its own, and a session resumes
 * across them: a ticket (or, without tickets, a session id or TLS 1.3 stateful ticket of the
 * listener's cache) issued with the stand-in resumes after the issued certificate is
 * swapped in, and one issued then resumes too. The contexts keep the listener's session id
 * context: a listener of another one (session_id_context fleet-b) refuses the sessions even
 * with the same ticket keys (a keyring), as it does for configured certificates. */
static void test_sessions_resume_across_stored_certificates(void **state)
{
    (void)state;
    size_t cl, kl;
    gw_tls_keyring_t *ring;
    assert_int_equal(gw_tls_keyring_new(&ring), 0);
    uint8_t keys[GW_TLS_KEY_LEN];
    for (size_t i = 0; i < sizeof(keys); i++)
        keys[i] = (uint8_t)(i * 5 + 3);
    assert_int_equal(gw_tls_keyring_set(ring, keys, 1), 0);
    const int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
    for (int tickets = 1; tickets >= 0; tickets--)
        for (size_t v = 0; v < 2; v++) {
            fixture_t a, b;
            fixture_init_with(&a, tickets ? tune_tickets_a : tune_no_tickets);
            fixture_init_with(&b, tune_tickets_b);
            gw_tls_ctx_set_keyring(a.ctx, ring);
            gw_tls_ctx_set_keyring(b.ctx, ring);
            SSL_CTX_set_max_proto_version(a.cctx, versions[v]);
            SSL_CTX_set_max_proto_version(b.cctx, versions[v]);
            conn_t c;
            assert_int_equal(connect_to(&a, &c, "a.test", "\x02h2", 3), 1);
            assert_int_equal(SSL_version(c.cli), versions[v]);
            SSL_SESSION *s0 = gw_test_take_ticket(c.cli);
            conn_free(&c);
            char *chain = read_file(tcert[0], &cl), *key = read_file(tkey[0], &kl);
            assert_int_equal(gw_tls_store_set_pem(a.store, chain, cl, key, kl), 0);
            /* the stand-in's session, after the swap */
            SSL_SESSION *s1 = NULL, *s2 = NULL;
            assert_int_equal(resumes(&a, s0, &s1), 1);
            /* a full handshake gets the issued certificate; its session resumes */
            assert_int_equal(connect_to(&a, &c, "a.test", "\x02h2", 3), 1);
            assert_int_equal(SSL_session_reused(c.cli), 0);
            X509 *x = SSL_get1_peer_certificate(c.cli);
            assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
            X509_free(x);
            SSL_SESSION *s3 = gw_test_take_ticket(c.cli);
            conn_free(&c);
            assert_int_equal(resumes(&a, s3, &s2), 1);
            assert_int_equal(resumes(&a, s2, NULL), 1);
            if (tickets) { /* another session id context: full handshakes */
                assert_int_equal(resumes(&b, s0, NULL), 0);
                assert_int_equal(resumes(&b, s3, NULL), 0);
            }
            SSL_SESSION_free(s0);
            SSL_SESSION_free(s1);
            SSL_SESSION_free(s2);
            SSL_SESSION_free(s3);
            fixture_free(&a);
            fixture_free(&b);
        }
    gw_tls_keyring_del(ring);
}

static char ca_path[GW_TEST_PATH];

static void tune_client_auth(gw_cfg_tls_t *t)
{
    t->certs[0].client_auth.mode = GW_CFG_CLIENT_AUTH_REQUIRE;
    t->certs[0].client_auth.ca = ca_path;
    t->certs[0].client_auth.depth = 1;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

/* A TLS 1.2 connection to f, with the pair i as client certificate when i >= 0: whether the
 * handshake succeeded and the server verified the certificate; the certificate served into
 * *served (when not NULL, one reference). */
static int client_auth_passes(fixture_t *f, int i, X509 **served)
{
    SSL_CTX_set_max_proto_version(f->cctx, TLS1_2_VERSION);
    SSL_CTX_use_certificate(f->cctx, NULL);
    if (i >= 0) {
        assert_int_equal(SSL_CTX_use_certificate_file(f->cctx, tcert[i], SSL_FILETYPE_PEM), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(f->cctx, tkey[i], SSL_FILETYPE_PEM), 1);
    }
    conn_t c;
    int ok = connect_to(f, &c, "a.test", "\x02h2", 3) == 1 && gw_tls_client_verified(c.srv);
    if (served)
        *served = ok ? SSL_get1_peer_certificate(c.cli) : NULL;
    conn_free(&c);
    SSL_CTX_free(f->cctx); /* a client without the certificate for the next one */
    f->cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(f->cctx, SSL_VERIFY_NONE, NULL);
    return ok;
}

/* The listener's client_auth applies in the context of each stored certificate, with the CA
 * file as the listener loaded it: a client certificate of that CA passes, none fails, with the
 * stand-in and with the certificate swapped in after the CA file changed on disk (a change the
 * next reload applies, not a renewal). */
static void test_client_auth_of_the_listener_in_stored_contexts(void **state)
{
    (void)state;
    size_t n, cl, kl;
    snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
    char *pem = read_file(tcert[1], &n);
    write_file(ca_path, pem, n);
    fixture_t f;
    fixture_init_with(&f, tune_client_auth);
    X509 *x;
    assert_int_equal(client_auth_passes(&f, 1, &x), 1);
    assert_int_equal(X509_check_host(x, "a.test", 0, 0, NULL), 1); /* the stand-in */
    X509_free(x);
    assert_int_equal(client_auth_passes(&f, -1, NULL), 0);
    assert_int_equal(client_auth_passes(&f, 0, NULL), 0);
    pem = read_file(tcert[0], &n);
    write_file(ca_path, pem, n); /* another CA on disk, not loaded */
    char *chain = read_file(tcert[0], &cl), *key = read_file(tkey[0], &kl);
    assert_int_equal(gw_tls_store_set_pem(f.store, chain, cl, key, kl), 0);
    assert_int_equal(client_auth_passes(&f, 1, &x), 1);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "a.test", 0, 0, NULL), 0);
    X509_free(x);
    assert_int_equal(client_auth_passes(&f, -1, NULL), 0);
    assert_int_equal(client_auth_passes(&f, 0, NULL), 0);
    fixture_free(&f);
    unlink(ca_path);
}

static void test_tls_alpn_01_answers_only_pending_names(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    uint8_t digest[32];
    for (int i = 0; i < 32; i++)
        digest[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(gw_tls_store_set_challenge(f.store, "a.test", digest), 0);
    conn_t c;
    assert_int_equal(connect_to(&f, &c, "A.test",
                                "\x0a"
                                "acme-tls/1",
                                11),
                     1);
    const unsigned char *sel;
    unsigned sl;
    SSL_get0_alpn_selected(c.cli, &sel, &sl);
    assert_int_equal(sl, 10);
    assert_memory_equal(sel, "acme-tls/1", 10);
    assert_string_equal(gw_tls_alpn(c.srv), "acme-tls/1");
    X509 *x = SSL_get1_peer_certificate(c.cli);
    assert_int_equal(X509_check_host(x, "a.test", 0, 0, NULL), 1);
    ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    int at = X509_get_ext_by_OBJ(x, oid, -1);
    assert_true(at >= 0);
    X509_EXTENSION *ext = X509_get_ext(x, at);
    assert_int_equal(X509_EXTENSION_get_critical(ext), 1);
    const ASN1_OCTET_STRING *v = X509_EXTENSION_get_data(ext);
    assert_int_equal(ASN1_STRING_length(v), 34);
    assert_memory_equal(ASN1_STRING_get0_data(v), "\x04\x20", 2);
    assert_memory_equal(ASN1_STRING_get0_data(v) + 2, digest, 32);
    ASN1_OBJECT_free(oid);
    X509_free(x);
    conn_free(&c);
    /* a name without a challenge: no certificate for it, the handshake fails */
    assert_true(connect_to(&f, &c, "b.test",
                           "\x0a"
                           "acme-tls/1",
                           11) != 1);
    conn_free(&c);
    /* an ordinary client of a.test meanwhile gets the ordinary certificate, not the challenge */
    assert_int_equal(connect_to(&f, &c, "a.test", "\x02h2", 3), 1);
    x = SSL_get1_peer_certificate(c.cli);
    oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    assert_true(X509_get_ext_by_OBJ(x, oid, -1) < 0);
    ASN1_OBJECT_free(oid);
    X509_free(x);
    conn_free(&c);
    /* withdrawn: refused again */
    gw_tls_store_clear_challenges(f.store);
    assert_true(connect_to(&f, &c, "a.test",
                           "\x0a"
                           "acme-tls/1",
                           11) != 1);
    conn_free(&c);
    fixture_free(&f);
}

static void test_pem_usable(void **state)
{
    (void)state;
    size_t cl, kl, ol;
    char *chain = read_file(tcert[0], &cl), *key = read_file(tkey[0], &kl);
    const char *lh[] = {"localhost"}, *two[] = {"localhost", "a.test"};
    int64_t nb = 0, na = 0, now = (int64_t)time(NULL);
    assert_int_equal(gw_tls_pem_usable(chain, cl, key, kl, lh, 1, now, &nb, &na), 0);
    assert_true(na > now + 300LL * 86400);
    assert_true(nb <= now && nb > now - 86400);
    /* past notAfter */
    assert_int_equal(gw_tls_pem_usable(chain, cl, key, kl, lh, 1, na, &nb, &na), GW_E_RANGE);
    assert_int_equal(gw_tls_pem_usable(chain, cl, key, kl, two, 2, now, &nb, &na), GW_E_NOENT);
    char *other = read_file(tkey[1], &ol);
    chain = read_file(tcert[0], &cl);
    assert_int_equal(gw_tls_pem_usable(chain, cl, other, ol, lh, 1, now, &nb, &na), GW_E_PARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stand_in_then_swapped_live),
        cmocka_unit_test(test_tls_alpn_01_answers_only_pending_names),
        cmocka_unit_test(test_pem_usable),
        cmocka_unit_test(test_stored_ec_key_signs_on_legacy_path),
        cmocka_unit_test(test_sessions_resume_across_stored_certificates),
        cmocka_unit_test(test_client_auth_of_the_listener_in_stored_contexts),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
