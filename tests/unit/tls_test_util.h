/* tests/unit/tls_test_util.h — certificates for the TLS unit tests: n self-signed pairs (for
 * localhost, 127.0.0.1 and ::1) in a fresh temporary directory, DIR/a/cert.pem, DIR/a/key.pem,
 * DIR/b/..., and their removal. */
#ifndef GW_TLS_TEST_UTIL_H
#define GW_TLS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls/tls.h"

#define GW_TEST_PATH 128

/* cert[i], key[i] for i < n get their paths under dir (a mkdtemp template, filled in). 0 or
 * -1. */
static inline int gw_test_certs_make(char *dir, int n, char (*cert)[GW_TEST_PATH],
                                     char (*key)[GW_TEST_PATH])
{
    if (!mkdtemp(dir))
        return -1;
    for (int i = 0; i < n; i++) {
        snprintf(cert[i], GW_TEST_PATH, "%s/%c/cert.pem", dir, 'a' + i);
        snprintf(key[i], GW_TEST_PATH, "%s/%c/key.pem", dir, 'a' + i);
        if (gw_tls_make_self_signed(cert[i], key[i]) < 0)
            return -1;
    }
    return 0;
}

static inline void gw_test_certs_remove(const char *dir, int n, char (*cert)[GW_TEST_PATH],
                                        char (*key)[GW_TEST_PATH])
{
    char p[GW_TEST_PATH];
    for (int i = 0; i < n; i++) {
        unlink(cert[i]);
        unlink(key[i]);
        snprintf(p, sizeof(p), "%s/%c", dir, 'a' + i);
        rmdir(p);
    }
    rmdir(dir);
}

/* The suite's certificates: dir, tcert[n], tkey[n], and the group setup/teardown that make
 * and remove them (cert_a = tcert[0], ... in the test files). */
#define GW_TLS_TEST_CERTS(n, tmpl)                                                                 \
    static char dir[64];                                                                           \
    static char tcert[n][GW_TEST_PATH], tkey[n][GW_TEST_PATH];                                     \
    static int setup_all(void **state)                                                             \
    {                                                                                              \
        (void)state;                                                                               \
        gw_tls_alloc_init(); /* as h2gate's main does, before anything else uses OpenSSL */        \
        snprintf(dir, sizeof(dir), "%s", tmpl);                                                    \
        return gw_test_certs_make(dir, n, tcert, tkey);                                            \
    }                                                                                              \
    static int teardown_all(void **state)                                                          \
    {                                                                                              \
        (void)state;                                                                               \
        gw_test_certs_remove(dir, n, tcert, tkey);                                                 \
        return 0;                                                                                  \
    }

/* The handshake of cli was signed with ECDSA by pk, the server's key, on OpenSSL's legacy path:
 * an EC_KEY with a method of its own, not OpenSSL's default (the provider's path cost about
 * 27,000 more instructions per full handshake). Without the EC_KEY API the provider's path
 * signs, and only the signature's type is checked. */
static inline void gw_test_expect_legacy_ec_signer(SSL *cli, EVP_PKEY *pk)
{
    int sig = 0;
    assert_int_equal(SSL_get_peer_signature_type_nid(cli, &sig), 1);
    assert_int_equal(sig, EVP_PKEY_EC);
    assert_non_null(pk);
#ifndef OPENSSL_NO_DEPRECATED_3_0
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const EC_KEY *ec = EVP_PKEY_get0_EC_KEY(pk);
    assert_non_null(ec);
    assert_ptr_not_equal(EC_KEY_get_method(ec), EC_KEY_OpenSSL());
#pragma GCC diagnostic pop
#endif
}

/* TLS 1.3: the client cli reads what the server sent after its Finished (the ticket), nothing
 * more waiting; the resumable session it then holds (the caller frees it). The error queue
 * that read left is cleared. */
static inline SSL_SESSION *gw_test_take_ticket(SSL *cli)
{
    char buf[64];
    int n = SSL_read(cli, buf, sizeof(buf));
    assert_true(n <= 0);
    assert_int_equal(SSL_get_error(cli, n), SSL_ERROR_WANT_READ);
    SSL_SESSION *sess = SSL_get1_session(cli);
    assert_non_null(sess);
    assert_true(SSL_SESSION_is_resumable(sess));
    ERR_clear_error();
    return sess;
}

#endif
