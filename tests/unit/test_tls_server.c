/* Unit tests of front/tls (the sans-IO TLS module): a real OpenSSL client over memory BIOs is
 * the independent peer. ALPN server preference, SNI certificate choice (exact, "*.suffix",
 * default), the RFC 9113 §9.2.2 cipher rule, plaintext round trip, ciphertext fed byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_util.h"
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "common/err.h"
#include "tls/tls.h"
#include "tls/tls_internal.h"
#include "tls_test_util.h"

GW_TLS_TEST_CERTS(3, "/tmp/gw_tls_test_XXXXXX")
#define cert_a tcert[0]
#define key_a tkey[0]
#define cert_b tcert[1]
#define key_b tkey[1]
#define cert_c tcert[2]
#define key_c tkey[2]

typedef struct {
    SSL_CTX *cctx;
    SSL *cli;
    BIO *c_in, *c_out; /* client's read and write memory BIOs */
    gw_tls_ctx_t *sctx;
    gw_tls_conn_t *srv;
    int server_done;
} pair_t;

static const unsigned char ALPN_H2_FIRST[] = "\x02h2\x08http/1.1";
static const unsigned char ALPN_H1_FIRST[] = "\x08http/1.1\x02h2";

/* A new connection of both contexts (the previous one, if any, freed): server side and a
 * client over memory BIOs, neither started. */
static void pair_connect(pair_t *p)
{
    /* as if closed cleanly: OpenSSL makes the session of a connection freed without a
     * shutdown unresumable (ssl_clear_bad_session), and the ticket tests resume it */
    if (p->cli)
        SSL_set_shutdown(p->cli, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(p->cli);
    gw_tls_conn_del(p->srv);
    p->srv = gw_tls_conn_new(p->sctx);
    assert_non_null(p->srv);
    p->cli = SSL_new(p->cctx);
    p->c_in = BIO_new(BIO_s_mem());
    p->c_out = BIO_new(BIO_s_mem());
    SSL_set_bio(p->cli, p->c_in, p->c_out);
    SSL_set_connect_state(p->cli);
    p->server_done = 0;
}

/* Build a server context over the certs and a client with the given ALPN, SNI, max version
 * and TLS 1.2 cipher list (NULL = defaults). */
static void pair_init(pair_t *p, gw_cfg_tls_t *cfg, const unsigned char *alpn, size_t alpn_len,
                      const char *client_alpn, size_t client_alpn_len, const char *sni,
                      int max_version, const char *ciphers)
{
    memset(p, 0, sizeof(*p));
    assert_int_equal(gw_tls_ctx_new(cfg, alpn, alpn_len, NULL, &p->sctx), 0);
    p->cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(p->cctx);
    SSL_CTX_set_verify(p->cctx, SSL_VERIFY_NONE, NULL);
    if (max_version)
        SSL_CTX_set_max_proto_version(p->cctx, max_version);
    if (ciphers)
        assert_int_equal(SSL_CTX_set_cipher_list(p->cctx, ciphers), 1);
    pair_connect(p);
    if (client_alpn)
        assert_int_equal(SSL_set_alpn_protos(p->cli, (const unsigned char *)client_alpn,
                                             (unsigned)client_alpn_len),
                         0);
    if (sni)
        SSL_set_tlsext_host_name(p->cli, sni);
}

static void pair_free(pair_t *p)
{
    SSL_free(p->cli);
    SSL_CTX_free(p->cctx);
    gw_tls_conn_del(p->srv);
    gw_tls_ctx_del(p->sctx);
}

/* Move bytes both ways; client → server either whole or one byte at a time. */
static void pump(pair_t *p, int byte_by_byte)
{
    uint8_t buf[16384];
    int n;
    while ((n = BIO_read(p->c_out, buf, sizeof(buf))) > 0) {
        if (byte_by_byte) {
            for (int i = 0; i < n; i++) {
                assert_int_equal(gw_tls_feed(p->srv, buf + i, 1), 0);
                if (!p->server_done) {
                    int rv = gw_tls_handshake(p->srv);
                    assert_true(rv >= 0);
                    p->server_done = rv == 1;
                }
            }
        } else {
            assert_int_equal(gw_tls_feed(p->srv, buf, (size_t)n), 0);
        }
    }
    if (!p->server_done) {
        int rv = gw_tls_handshake(p->srv);
        assert_true(rv >= 0);
        p->server_done = rv == 1;
    }
    size_t m;
    while ((m = gw_tls_take_out(p->srv, buf, sizeof(buf))) > 0)
        assert_int_equal(BIO_write(p->c_in, buf, (int)m), (int)m);
}

static void handshake(pair_t *p, int byte_by_byte)
{
    for (int round = 0; round < 20; round++) {
        int rv = SSL_do_handshake(p->cli);
        if (rv != 1)
            assert_int_equal(SSL_get_error(p->cli, rv), SSL_ERROR_WANT_READ);
        pump(p, byte_by_byte);
        if (rv == 1 && p->server_done)
            return;
    }
    fail_msg("handshake did not complete");
}

static gw_cfg_tls_t base_cfg(gw_cfg_cert_t *certs, size_t n)
{
    return (gw_cfg_tls_t){.certs = certs, .certs_len = n, .min_version = 12, .prefer_h2 = 1};
}

static void test_alpn_server_preference(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    static const char both_h1_first[] = "\x08http/1.1\x02h2";
    pair_t p;
    /* the client lists http/1.1 first; the server's preference (h2 first) wins, RFC 7301 §3.2 */
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, both_h1_first,
              sizeof(both_h1_first) - 1, NULL, 0, NULL);
    handshake(&p, 0);
    assert_string_equal(gw_tls_alpn(p.srv), "h2");
    assert_string_equal(gw_tls_version(p.srv), "TLSv1.3");
    assert_true(gw_tls_h2_cipher_ok(p.srv));
    pair_free(&p);
    /* server preference http/1.1 first */
    static const char both_h2_first[] = "\x02h2\x08http/1.1";
    pair_init(&p, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, both_h2_first,
              sizeof(both_h2_first) - 1, NULL, 0, NULL);
    handshake(&p, 0);
    assert_string_equal(gw_tls_alpn(p.srv), "http/1.1");
    pair_free(&p);
    /* a client without ALPN: no protocol */
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, NULL, 0, NULL, 0, NULL);
    handshake(&p, 0);
    assert_string_equal(gw_tls_alpn(p.srv), "");
    pair_free(&p);
}

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    return x;
}

/* Which of cert_a, cert_b, cert_c x is: 'a', 'b', 'c', or '?' for none. */
static char cert_letter(X509 *x)
{
    const char *paths[] = {cert_a, cert_b, cert_c};
    char which = '?';
    for (int i = 0; i < 3; i++) {
        X509 *c = load_cert(paths[i]);
        if (X509_cmp(c, x) == 0)
            which = (char)('a' + i);
        X509_free(c);
    }
    return which;
}

/* Which of the three certificates the client was shown for this SNI name. */
static char served_for(gw_cfg_tls_t *cfg, const char *sni)
{
    pair_t p;
    pair_init(&p, cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, sni, 0, NULL);
    handshake(&p, 0);
    if (sni)
        assert_string_equal(gw_tls_sni(p.srv), sni);
    X509 *peer = SSL_get1_peer_certificate(p.cli);
    assert_non_null(peer);
    char which = cert_letter(peer);
    X509_free(peer);
    pair_free(&p);
    return which;
}

static void test_sni_picks_certificate(void **state)
{
    (void)state;
    char *names_b[] = {"exact.example"};
    char *names_c[] = {"*.wild.example"};
    gw_cfg_cert_t certs[3] = {
        {.certificate = cert_a, .key = key_a},
        {.certificate = cert_b, .key = key_b, .names = names_b, .names_len = 1},
        {.certificate = cert_c, .key = key_c, .names = names_c, .names_len = 1},
    };
    gw_cfg_tls_t cfg = base_cfg(certs, 3);
    assert_int_equal(served_for(&cfg, "exact.example"), 'b');
    assert_int_equal(served_for(&cfg, "x.wild.example"), 'c');
    assert_int_equal(served_for(&cfg, "other.example"), 'a'); /* no match: default */
    assert_int_equal(served_for(&cfg, NULL), 'a');            /* no SNI: default */
    /* "*.wild.example" covers one label, not the bare suffix */
    assert_int_equal(served_for(&cfg, "wild.example"), 'a');
}

/* The chain the client gets is the certificate file's, leaf first, each certificate once, for
 * a file of a leaf and an intermediate as for a file of the leaf alone (the server builds no
 * chain of its own: SSL_MODE_NO_AUTO_CHAIN). cert_b stands in for the intermediate. */
static void test_chain_is_the_files(void **state)
{
    (void)state;
    char chain[GW_TEST_PATH + 8];
    snprintf(chain, sizeof(chain), "%s.chain", cert_a);
    FILE *out = fopen(chain, "w");
    assert_non_null(out);
    for (int i = 0; i < 2; i++) {
        X509 *x = load_cert(i == 0 ? cert_a : cert_b);
        assert_int_equal(PEM_write_X509(out, x), 1);
        X509_free(x);
    }
    fclose(out);
    for (int two = 0; two < 2; two++) {
        gw_cfg_cert_t certs[1] = {{.certificate = two ? chain : cert_a, .key = key_a}};
        gw_cfg_tls_t cfg = base_cfg(certs, 1);
        pair_t p;
        pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, NULL, 0, NULL, 0, NULL);
        handshake(&p, 0);
        STACK_OF(X509) *sent = SSL_get_peer_cert_chain(p.cli);
        assert_non_null(sent);
        assert_int_equal(sk_X509_num(sent), two ? 2 : 1);
        assert_int_equal(cert_letter(sk_X509_value(sent, 0)), 'a');
        if (two)
            assert_int_equal(cert_letter(sk_X509_value(sent, 1)), 'b');
        pair_free(&p);
    }
    unlink(chain);
}

static void test_tls12_cipher_rule_for_h2(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    cfg.ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA";
    /* RFC 9113 §9.2.2 / Appendix A: a CBC suite is on the blocklist */
    static const struct {
        const char *cipher;
        int h2_ok;
    } cases[] = {
        {"ECDHE-ECDSA-AES128-GCM-SHA256", 1},
        {"ECDHE-ECDSA-AES128-SHA", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pair_t p;
        pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL,
                  TLS1_2_VERSION, cases[i].cipher);
        handshake(&p, 0);
        const char *version = gw_tls_version(p.srv), *cipher = gw_tls_cipher(p.srv);
        int ok = !!gw_tls_h2_cipher_ok(p.srv);
        if (!version || strcmp(version, "TLSv1.2") != 0 || !cipher ||
            strcmp(cipher, cases[i].cipher) != 0 || ok != cases[i].h2_ok)
            fail_msg("cipher %s: got %s %s h2_ok %d (want TLSv1.2, %d)", cases[i].cipher,
                     version ? version : "(null)", cipher ? cipher : "(null)", ok, cases[i].h2_ok);
        pair_free(&p);
    }
}

/* Of the suites both sides have, the client's first choice is taken with the built-in lists,
 * the server's with a list of the configuration: a browser that lists AES-128-GCM first gets
 * it, not the SHA-384 suite OpenSSL's default TLS 1.3 order puts first (its key schedule alone
 * costs 3.7 % more per handshake), and a client without AES instructions that lists ChaCha20
 * first gets ChaCha20. */
static void test_client_order_picks_the_suite(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    static const struct {
        int tls12;
        const char *offer, *want;
    } cases[] = {
        {0, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256",
         "TLS_AES_128_GCM_SHA256"},
        {0, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"},
        {1, "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
         "ECDHE-ECDSA-CHACHA20-POLY1305"},
        {1, "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256",
         "ECDHE-ECDSA-AES256-GCM-SHA384"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pair_t p;
        pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL,
                  cases[i].tls12 ? TLS1_2_VERSION : 0, cases[i].tls12 ? cases[i].offer : NULL);
        if (!cases[i].tls12)
            assert_int_equal(SSL_set_ciphersuites(p.cli, cases[i].offer), 1);
        handshake(&p, 0);
        const char *cipher = gw_tls_cipher(p.srv);
        if (!cipher || strcmp(cipher, cases[i].want) != 0)
            fail_msg("offer %s: got %s, want %s", cases[i].offer, cipher ? cipher : "(null)",
                     cases[i].want);
        pair_free(&p);
    }
    /* a list the operator wrote is the server's order */
    cfg.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256";
    pair_t p;
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    assert_int_equal(SSL_set_ciphersuites(p.cli, "TLS_AES_128_GCM_SHA256:"
                                                 "TLS_CHACHA20_POLY1305_SHA256"),
                     1);
    handshake(&p, 0);
    assert_string_equal(gw_tls_cipher(p.srv), "TLS_CHACHA20_POLY1305_SHA256");
    pair_free(&p);
}

static void round_trip(int byte_by_byte)
{
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    handshake(&p, byte_by_byte);
    static const char req[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    assert_int_equal(SSL_write(p.cli, req, sizeof(req) - 1), (int)sizeof(req) - 1);
    pump(&p, byte_by_byte);
    char got[256];
    size_t have = 0;
    ssize_t n;
    while ((n = gw_tls_read(p.srv, got + have, sizeof(got) - have)) > 0)
        have += (size_t)n;
    assert_true(n == GW_E_AGAIN); /* nothing more buffered: one contract for both roles */
    assert_int_equal(have, sizeof(req) - 1);
    assert_memory_equal(got, req, have);
    /* server → client */
    assert_int_equal(gw_tls_write(p.srv, "pong", 4), 0);
    pump(&p, byte_by_byte);
    char back[16];
    int r = SSL_read(p.cli, back, sizeof(back));
    /* TLS 1.3 session tickets may arrive first: read until the data */
    while (r <= 0 && SSL_get_error(p.cli, r) == SSL_ERROR_WANT_READ) {
        pump(&p, byte_by_byte);
        r = SSL_read(p.cli, back, sizeof(back));
        if (r <= 0 && BIO_ctrl_pending(p.c_in) == 0)
            break;
    }
    assert_int_equal(r, 4);
    assert_memory_equal(back, "pong", 4);
    /* close_notify from the client: the server reports GW_E_CLOSED */
    SSL_shutdown(p.cli);
    pump(&p, byte_by_byte);
    assert_int_equal(gw_tls_read(p.srv, got, sizeof(got)), GW_E_CLOSED);
    pair_free(&p);
}

static void test_round_trip_whole(void **state)
{
    (void)state;
    round_trip(0);
}

static void test_round_trip_byte_by_byte(void **state)
{
    (void)state;
    round_trip(1);
}

/* The connection's read loop stops when gw_tls_drained() says so: fed records whole, one byte at
 * a time or cut in the middle, read through buffers smaller and larger than a record, the loop
 * must never stop while a read would still return bytes (a further read then returns 0), and
 * data followed by close_notify still ends with GW_E_CLOSED. */
static void test_drained_stops_reads_without_loss(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    static uint8_t big[40000], got[40000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7 + i / 256);
    static const size_t caps[] = {1, 100, 16384, 40000};
    static const size_t cuts[] = {0, 1, 7, 5000};
    for (size_t ci = 0; ci < 4; ci++) {
        for (size_t ki = 0; ki < 4; ki++) {
            pair_t p;
            pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0,
                      NULL);
            handshake(&p, 0);
            /* three records: 3 bytes, 4 bytes, 40000 bytes (split into 16 KiB records) */
            assert_int_equal(SSL_write(p.cli, big, 3), 3);
            assert_int_equal(SSL_write(p.cli, big + 3, 4), 4);
            assert_int_equal(SSL_write(p.cli, big + 7, (int)sizeof(big) - 7), (int)sizeof(big) - 7);
            if (ki == 3)
                SSL_shutdown(p.cli); /* close_notify right behind the data */
            uint8_t wire[65536];
            int wn = BIO_read(p.c_out, wire, sizeof(wire));
            assert_true(wn > 0);
            size_t have = 0, fed = 0, step = cuts[ki] ? cuts[ki] : (size_t)wn;
            int closed = 0;
            while (fed < (size_t)wn) {
                size_t k = (size_t)wn - fed < step ? (size_t)wn - fed : step;
                assert_int_equal(gw_tls_feed(p.srv, wire + fed, k), 0);
                fed += k;
                for (;;) { /* conn.c's loop */
                    size_t room = sizeof(got) - have < caps[ci] ? sizeof(got) - have : caps[ci];
                    ssize_t r = gw_tls_read(p.srv, got + have, room);
                    if (r == GW_E_CLOSED) {
                        closed = 1;
                        break;
                    }
                    if (r == GW_E_AGAIN) /* one contract for both roles */
                        break;
                    assert_true(r > 0);
                    have += (size_t)r;
                    if (gw_tls_drained(p.srv)) {
                        assert_true(have == sizeof(got) ||
                                    gw_tls_read(p.srv, got + have, sizeof(got) - have) ==
                                        GW_E_AGAIN);
                        break;
                    }
                }
            }
            assert_int_equal(have, sizeof(big));
            assert_memory_equal(got, big, sizeof(big));
            assert_int_equal(closed, ki == 3);
            pair_free(&p);
        }
    }
}

static void test_missing_key_file_fails(void **state)
{
    (void)state;
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/nope/key.pem", dir);
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = missing}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    gw_tls_ctx_t *c = NULL;
    int rv = gw_tls_ctx_new(&cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, NULL, &c);
    assert_true(rv < 0);
    assert_null(c);
}

/* The message of each failure names the file and is placed at the key naming it: what
 * `h2gate -t`, start-up and reload print. gw_tls_ctx_check loads every pair as
 * gw_tls_ctx_new does, reports them all, and generates no self-signed pair. */
static void test_check_says_which_file_and_why(void **state)
{
    (void)state;
    static const gw_cfg_pos_t cpos = {"t.yaml", 4, 20}, kpos = {"t.yaml", 5, 12},
                              cipos = {"t.yaml", 6, 16};
    char want[4][512];
    gw_cfg_cert_t certs[3] = {
        {.certificate = cert_a, .key = key_b, .certificate_at = cpos, .key_at = kpos},
        {.certificate = cert_b, .key = cert_b, .certificate_at = cpos, .key_at = kpos},
        {.certificate = key_c, .key = key_c, .certificate_at = cpos, .key_at = kpos},
    };
    snprintf(want[0], sizeof(want[0]), "t.yaml:5:12: key '%s' does not match certificate '%s'",
             key_b, cert_a);
    snprintf(want[1], sizeof(want[1]),
             "t.yaml:5:12: key '%s' holds a certificate, not a private key", cert_b);
    snprintf(want[2], sizeof(want[2]),
             "t.yaml:4:20: certificate '%s' holds a private key, not a certificate", key_c);
    gw_cfg_tls_t cfg = base_cfg(certs, 3);
    gw_config_errors_t e = {0};
    assert_int_equal(gw_tls_ctx_check(&cfg, &e), GW_E_INVAL);
    assert_int_equal(e.len, 3); /* every pair, not only the first */
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(e.msgs[i], want[i]);
    gw_config_errors_free(&e);
    /* gw_tls_ctx_new says the same, and logs nothing of it when given the list */
    gw_tls_ctx_t *c = NULL;
    assert_int_equal(gw_tls_ctx_new(&cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, &e, &c),
                     GW_E_INVAL);
    assert_null(c);
    assert_int_equal(e.len, 1);
    assert_string_equal(e.msgs[0], want[0]);
    gw_config_errors_free(&e);
    /* a cipher list OpenSSL refuses, at `ciphers` */
    gw_cfg_cert_t good[1] = {{.certificate = cert_a, .key = key_a}};
    cfg = base_cfg(good, 1);
    cfg.ciphers = "NOPE-CIPHER";
    cfg.ciphers_at = cipos;
    assert_int_equal(gw_tls_ctx_check(&cfg, &e), GW_E_INVAL);
    assert_int_equal(e.len, 1);
    assert_string_equal(e.msgs[0], "t.yaml:6:16: 'ciphers' is not a cipher list OpenSSL accepts: "
                                   "'NOPE-CIPHER' (no cipher match)");
    gw_config_errors_free(&e);
    cfg.ciphers = NULL;
    assert_int_equal(gw_tls_ctx_check(&cfg, &e), 0);
    assert_int_equal(e.len, 0);
    /* a self-signed pair start-up would make: skipped, and not made */
    char sc[200], sk[200];
    snprintf(sc, sizeof(sc), "%s/ss/cert.pem", dir);
    snprintf(sk, sizeof(sk), "%s/ss/key.pem", dir);
    gw_cfg_cert_t ss[1] = {{.certificate = sc, .key = sk}};
    cfg = base_cfg(ss, 1);
    cfg.self_signed = 1;
    assert_int_equal(gw_tls_ctx_check(&cfg, &e), 0);
    assert_int_equal(e.len, 0);
    assert_int_equal(access(sc, F_OK), -1);
    assert_int_equal(access(sk, F_OK), -1);
}

/* Client side: read exactly n plaintext bytes, pumping as needed (tickets may come first). */
static void client_read_all(pair_t *p, uint8_t *dst, size_t n)
{
    size_t have = 0;
    for (int round = 0; have < n && round < 1000; round++) {
        pump(p, 0);
        int r = SSL_read(p->cli, dst + have, (int)(n - have));
        if (r > 0)
            have += (size_t)r;
        else
            assert_int_equal(SSL_get_error(p->cli, r), SSL_ERROR_WANT_READ);
    }
    assert_int_equal(have, n);
}

/* The client receives n bytes of the server's records from view c, which the server then
 * consumes. */
static void deliver(pair_t *p, const uint8_t *c, size_t n)
{
    assert_int_equal(BIO_write(p->c_in, c, (int)n), (int)n);
    gw_tls_out_consume(p->srv, n);
}

/* The client reads n bytes of plaintext, and they are want. */
static void expect_plain(pair_t *p, const void *want, size_t n)
{
    uint8_t got[64];
    assert_true(n <= sizeof(got));
    client_read_all(p, got, n);
    assert_memory_equal(got, want, n);
}

/* gw_tls_writev gathers small pieces into one record (a record each would cost 22 bytes and
 * an AEAD pass apiece), keeps the byte order across gathered and direct pieces, and the
 * zero-copy view of the ciphertext can be consumed in parts. */
static void test_writev_gathers_small_pieces(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    handshake(&p, 0);
    assert_int_equal(gw_tls_pending_out(p.srv), 0);

    static uint8_t plain[40 * 30 + 20000 + 3 * 7];
    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (uint8_t)(i * 131 + 7);
    struct iovec v[44];
    size_t off = 0;
    for (int i = 0; i < 40; i++, off += 30)
        v[i] = (struct iovec){plain + off, 30};
    v[40] = (struct iovec){plain + off, 20000};
    off += 20000;
    for (int i = 41; i < 44; i++, off += 7)
        v[i] = (struct iovec){plain + off, 7};

    /* 40 small pieces alone: one record (1200 bytes + 22 of TLS 1.3 framing) */
    assert_int_equal(gw_tls_writev(p.srv, v, 40), 0);
    size_t one = gw_tls_pending_out(p.srv);
    assert_true(one >= 1200 + 22 && one < 1200 + 2 * 22);
    /* the same pieces one SSL_write each cost a record each */
    static uint8_t got[sizeof(plain)];
    client_read_all(&p, got, 1200);
    assert_memory_equal(got, plain, 1200);
    for (int i = 0; i < 40; i++)
        assert_int_equal(gw_tls_write(p.srv, v[i].iov_base, v[i].iov_len), 0);
    assert_true(gw_tls_pending_out(p.srv) >= 1200 + 40 * 22);
    client_read_all(&p, got, 1200);
    assert_memory_equal(got, plain, 1200);

    /* the whole mix reaches the client intact and in order */
    assert_int_equal(gw_tls_writev(p.srv, v, 44), 0);
    size_t n;
    const uint8_t *c0 = gw_tls_out_peek(p.srv, &n);
    assert_true(n > sizeof(plain));
    /* consume in two parts through the zero-copy view */
    deliver(&p, c0, 100);
    size_t n2;
    const uint8_t *c1 = gw_tls_out_peek(p.srv, &n2);
    assert_int_equal(n2, n - 100);
    assert_ptr_equal(c1, c0 + 100);
    deliver(&p, c1, n2);
    assert_int_equal(gw_tls_pending_out(p.srv), 0);
    client_read_all(&p, got, sizeof(got));
    assert_memory_equal(got, plain, sizeof(plain));
    pair_free(&p);
}

/* The plaintext lengths of the TLS 1.3 records in the server's pending output (AES-GCM: a
 * 5-byte header, then the content, its 1-byte inner type and a 16-byte tag). Their count. */
static size_t out_records(const pair_t *p, size_t *len, size_t cap)
{
    size_t n, k = 0;
    const uint8_t *c = gw_tls_out_peek(p->srv, &n);
    while (n) {
        assert_true(n >= 5 && k < cap);
        size_t rl = (size_t)c[3] << 8 | c[4];
        assert_true(rl >= 17 && n >= 5 + rl);
        len[k++] = rl - 17;
        c += 5 + rl;
        n -= 5 + rl;
    }
    return k;
}

/* A DATA frame whose payload is sent by reference (its header a 9-byte piece of its own) goes
 * out in the records of the byte stream, not as a 9-byte record and then its payload: a record
 * costs an AEAD pass and 22 bytes on the wire, and the client a decryption. Every record but
 * the last is full (16 KiB of plaintext). */
static void test_writev_frame_header_shares_record(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    handshake(&p, 0);
    assert_int_equal(gw_tls_pending_out(p.srv), 0);

    /* header, 16 KiB payload, header, 16 KiB, header, 3000 in two chunks, header, 40000 */
    static const size_t piece[] = {9, 16384, 9, 16384, 9, 1000, 2000, 9, 40000};
    enum { NP = sizeof(piece) / sizeof(piece[0]) };
    static uint8_t plain[4 * 9 + 2 * 16384 + 3000 + 40000];
    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (uint8_t)(i * 37 + 11);
    struct iovec v[NP];
    size_t off = 0;
    for (size_t i = 0; i < NP; i++) {
        v[i] = (struct iovec){plain + off, piece[i]};
        off += piece[i];
    }
    assert_int_equal(off, sizeof(plain));
    assert_int_equal(gw_tls_writev(p.srv, v, NP), 0);
    size_t len[16];
    size_t k = out_records(&p, len, 16);
    /* 75,804 bytes: 4 full records and the rest (a record per piece made 8, three of 9 bytes) */
    assert_int_equal(k, (sizeof(plain) + 16383) / 16384);
    for (size_t i = 0; i + 1 < k; i++)
        assert_int_equal(len[i], 16384);
    assert_int_equal(len[k - 1], sizeof(plain) - (k - 1) * 16384);
    static uint8_t got[sizeof(plain)];
    client_read_all(&p, got, sizeof(got));
    assert_memory_equal(got, plain, sizeof(plain));

    /* a 16 KiB frame alone (16,393 bytes): a full record and the 9 bytes left */
    assert_int_equal(gw_tls_writev(p.srv, v, 2), 0);
    k = out_records(&p, len, 16);
    assert_int_equal(k, 2);
    assert_int_equal(len[0], 16384);
    assert_int_equal(len[1], 9);
    client_read_all(&p, got, 9 + 16384);
    assert_memory_equal(got, plain, 9 + 16384);
    pair_free(&p);
}

/* What the socket did not take is written from the output buffer that holds it, handed over to
 * the write request instead of copied into it (a round frames h2.frame_ahead, 32 KiB, beyond
 * what the socket takes): the same bytes in place, the connection's next records go elsewhere,
 * and the buffer, once written and released, serves the thread's next write. */
static void test_output_handed_over_without_copy(void **state)
{
    (void)state;
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    handshake(&p, 0);
    size_t off, len, cap, n;
    assert_null(gw_tls_out_hand_over(p.srv, &off, &len, &cap)); /* nothing pending */
    static uint8_t plain[40000];
    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (uint8_t)(i * 13 + 5);
    assert_int_equal(gw_tls_write(p.srv, plain, sizeof(plain)), 0);
    const uint8_t *c0 = gw_tls_out_peek(p.srv, &n);
    deliver(&p, c0, 1000); /* the socket took 1000 bytes */
    const uint8_t *c1 = gw_tls_out_peek(p.srv, &n);
    uint8_t *base = gw_tls_out_hand_over(p.srv, &off, &len, &cap);
    assert_non_null(base);
    assert_ptr_equal(base + off, c1);
    assert_int_equal(len, n);
    assert_true(cap >= off + len);
    assert_int_equal(gw_tls_pending_out(p.srv), 0);
    /* the next records go to another buffer; the handed-over bytes are intact */
    static const char more[] = "after the hand-over";
    assert_int_equal(gw_tls_write(p.srv, more, sizeof(more)), 0);
    size_t n2;
    const uint8_t *c2 = gw_tls_out_peek(p.srv, &n2);
    assert_true(c2 + n2 <= base || c2 >= base + cap);
    assert_int_equal(BIO_write(p.c_in, base + off, (int)len), (int)len);
    static uint8_t got[sizeof(plain)];
    client_read_all(&p, got, sizeof(got)); /* the records written after it follow */
    assert_memory_equal(got, plain, sizeof(plain));
    expect_plain(&p, more, sizeof(more));
    /* written and released: the thread keeps the larger of it and its own (the next round of a
     * transfer would grow a small one again), and the next records go to that */
    assert_int_equal(gw_tls_write(p.srv, more, sizeof(more)), 0);
    uint8_t *small = (uint8_t *)gw_tls_out_peek(p.srv, &n2);
    assert_true(small + n2 <= base || small >= base + cap);
    deliver(&p, small, n2); /* that buffer goes back to the thread */
    expect_plain(&p, more, sizeof(more));
    gw_tls_out_release(base, cap); /* larger than the thread's: kept instead */
    assert_int_equal(gw_tls_write(p.srv, plain, sizeof(plain)), 0);
    assert_ptr_equal(gw_tls_out_peek(p.srv, &n2), base);
    uint8_t *big = gw_tls_out_hand_over(p.srv, &off, &len, &cap);
    assert_ptr_equal(big, base);
    assert_int_equal(BIO_write(p.c_in, big + off, (int)len), (int)len);
    client_read_all(&p, got, sizeof(got));
    assert_memory_equal(got, plain, sizeof(plain));
    gw_tls_out_release(big, cap); /* the thread has none now: kept */
    assert_int_equal(gw_tls_write(p.srv, more, sizeof(more)), 0);
    assert_ptr_equal(gw_tls_out_peek(p.srv, &n2), big);
    deliver(&p, big, n2);
    expect_plain(&p, more, sizeof(more));
    pair_free(&p);
}

/* Two connections to one certificate's context, each with h2 agreed and its handshake done:
 * what the tests of buffers shared between a worker's connections start from. */
static void two_h2_pairs(pair_t *a, pair_t *b)
{
    gw_cfg_cert_t certs[1] = {{.certificate = cert_a, .key = key_a}};
    gw_cfg_tls_t cfg = base_cfg(certs, 1);
    pair_init(a, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    pair_init(b, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, NULL, 0, NULL);
    handshake(a, 0);
    handshake(b, 0);
}

/* Connections that take turns write their records into one buffer, the one the last of them
 * gave back when its records were sent: it is still in the cache, where a buffer kept by each
 * connection between requests was cold with hundreds of them (conn.c). A connection whose
 * records are not all sent keeps its buffer, and the others write elsewhere meanwhile. */
static void test_output_buffer_lent_between_connections(void **state)
{
    (void)state;
    pair_t a, b;
    two_h2_pairs(&a, &b);
    static const char ma[] = "response of a", mb[] = "response of b";
    size_t n;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(gw_tls_write(a.srv, ma, sizeof(ma)), 0);
        const uint8_t *pa = gw_tls_out_peek(a.srv, &n);
        deliver(&a, pa, n);
        assert_int_equal(gw_tls_write(b.srv, mb, sizeof(mb)), 0);
        const uint8_t *pb = gw_tls_out_peek(b.srv, &n);
        assert_ptr_equal(pb, pa);
        deliver(&b, pb, n);
        expect_plain(&a, ma, sizeof(ma));
        expect_plain(&b, mb, sizeof(mb));
    }
    /* a's records half sent: b writes into another buffer, and a's rest is intact */
    assert_int_equal(gw_tls_write(a.srv, ma, sizeof(ma)), 0);
    const uint8_t *pa = gw_tls_out_peek(a.srv, &n);
    deliver(&a, pa, 10);
    assert_int_equal(gw_tls_write(b.srv, mb, sizeof(mb)), 0);
    size_t nb;
    const uint8_t *pb = gw_tls_out_peek(b.srv, &nb);
    assert_true(pb + nb <= pa || pb >= pa + n);
    deliver(&b, pb, nb);
    size_t na;
    const uint8_t *pa2 = gw_tls_out_peek(a.srv, &na);
    assert_ptr_equal(pa2, pa + 10);
    assert_int_equal(na, n - 10);
    deliver(&a, pa2, na);
    expect_plain(&a, ma, sizeof(ma));
    expect_plain(&b, mb, sizeof(mb));
    pair_free(&a);
    pair_free(&b);
}

/* One request and its answer: the client's record read by the server (gw_tls_read until
 * "again", as the front's loop stops), the server's written and read by the client. */
static void exchange(pair_t *p, const char *req, const char *resp)
{
    size_t n = strlen(req);
    assert_int_equal(SSL_write(p->cli, req, (int)n), (int)n);
    pump(p, 0);
    char got[64];
    ssize_t r = gw_tls_read(p->srv, got, sizeof(got));
    assert_int_equal(r, (ssize_t)n);
    assert_memory_equal(got, req, n);
    assert_true(gw_tls_drained(p->srv));
    assert_int_equal(gw_tls_write(p->srv, resp, strlen(resp)), 0);
    expect_plain(p, resp, strlen(resp));
}

/* OpenSSL's record buffers (taken and given back per record: SSL_MODE_RELEASE_BUFFERS) come
 * from the thread's few kept blocks once the first records made them (gw_tls_alloc_init, run
 * by the suite's setup as by h2gate's main): connections taking turns with one record each way
 * allocate no new one, and every byte still arrives. Without the hook each record's buffer was
 * a fresh malloc (and a free when it was empty), and nothing was counted here. */
static void test_record_buffers_kept_between_connections(void **state)
{
    (void)state;
    pair_t a, b;
    two_h2_pairs(&a, &b);
    exchange(&a, "GET a", "answer a");
    exchange(&b, "GET b", "answer b");
    unsigned long hits0, misses0, hits, misses;
    gw_tls__recbuf_stats(&hits0, &misses0);
    for (int round = 0; round < 5; round++) {
        exchange(&a, "GET a again", "answer a again");
        exchange(&b, "GET b again", "answer b again");
    }
    gw_tls__recbuf_stats(&hits, &misses);
    assert_int_equal(misses, misses0);
    /* a read and a write buffer per exchange, at least, served from the kept blocks */
    assert_true(hits - hits0 >= 2 * 10);
    pair_free(&a);
    pair_free(&b);
}

/* The free hook sees every block OpenSSL frees, about a thousand per full handshake, and no
 * size: it tells the kept record buffers (aligned to a page, conn.c) from the others by the
 * address, and asks glibc for a block's size only for the few that could be one. Asking it for
 * every block cost about 30,000 instructions per handshake (scripts/lib/cg_handshake.sh): here
 * every free was sized. Two handshakes (client and server in this thread) and their requests. */
static void test_frees_of_other_blocks_not_sized(void **state)
{
    (void)state;
    unsigned long frees0, sized0, frees, sized;
    gw_tls__free_stats(&frees0, &sized0);
    pair_t a, b;
    two_h2_pairs(&a, &b);
    exchange(&a, "GET a", "answer a");
    exchange(&b, "GET b", "answer b");
    pair_free(&a);
    pair_free(&b);
    gw_tls__free_stats(&frees, &sized);
    frees -= frees0;
    sized -= sized0;
    print_message("frees %lu, sized %lu\n", frees, sized);
    assert_true(frees > 1000);
    /* the record buffers given back, and the odd other block at a page boundary */
    assert_true(sized * 20 < frees);
}

static uint64_t fake_ms;
static uint64_t moving_clock(void)
{
    return fake_ms++; /* every reading a millisecond later than the one before */
}

/* A rotation must end whatever the clock
 * does between two readings. A new key used to take a second reading of the clock, a
 * millisecond later than the `now` it was compared with; the unsigned age wrapped and the
 * rotation looped forever (the worker hung). Handshakes a rotation period apart, with a clock
 * that moves at every reading; SIGALRM fails the test instead of letting it hang. */
static void test_ticket_rotation_ends_with_a_moving_clock(void **state)
{
    (void)state;
    gw_cfg_cert_t c = {cert_a, key_a, NULL, 0};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 1;
    cfg.ticket_rotation_ms = 1000;
    fake_ms = 1000000;
    gw_tls__set_clock(moving_clock);
    alarm(20);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, TLS1_2_VERSION,
              NULL);
    for (int round = 0; round < 5; round++) {
        if (round) { /* a new connection of the same listener, a period and a half later */
            fake_ms += 1500;
            pair_connect(&p);
        }
        handshake(&p, 0); /* issues a ticket: the key rotates first */
    }
    alarm(0);
    pair_free(&p);
    gw_tls__set_clock(NULL);
}

/* A full TLS 1.2 handshake on p, then the session its client got. */
static SSL_SESSION *first_session(pair_t *p)
{
    handshake(p, 0);
    assert_int_equal(SSL_session_reused(p->cli), 0);
    SSL_SESSION *sess = SSL_get1_session(p->cli);
    assert_non_null(sess);
    return sess;
}

/* A new connection of p offering sess: whether the server resumed it. */
static int resumes(pair_t *p, SSL_SESSION *sess)
{
    pair_connect(p);
    assert_int_equal(SSL_set_session(p->cli, sess), 1);
    handshake(p, 0);
    return SSL_session_reused(p->cli);
}

/* Listeners given one keyring resume each other's sessions (as instances sharing the
 * keys in Redis do); an empty ring leaves each to its own keys; a ticket of the ring's second
 * key still resumes. */
static void test_keyring_shared_between_contexts(void **state)
{
    (void)state;
    gw_cfg_cert_t c = {cert_a, key_a, NULL, 0};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 1;
    gw_tls_keyring_t *ring;
    assert_int_equal(gw_tls_keyring_new(&ring), 0);
    uint8_t keys[2 * GW_TLS_KEY_LEN];
    for (size_t i = 0; i < sizeof(keys); i++)
        keys[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(gw_tls_keyring_set(ring, keys, 1), 0);
    assert_int_equal(gw_tls_keyring_len(ring), 1);
    pair_t a, b;
    pair_init(&a, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, TLS1_2_VERSION,
              NULL);
    pair_init(&b, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, TLS1_2_VERSION,
              NULL);
    /* without the ring, b does not know a's keys */
    SSL_SESSION *s0 = first_session(&a);
    assert_int_equal(resumes(&b, s0), 0);
    SSL_SESSION_free(s0);
    gw_tls_ctx_set_keyring(a.sctx, ring);
    gw_tls_ctx_set_keyring(b.sctx, ring);
    pair_connect(&a);
    SSL_SESSION *s1 = first_session(&a);
    assert_int_equal(resumes(&a, s1), 1);
    assert_int_equal(resumes(&b, s1), 1);
    /* the ring rotates: a new key encrypts, the old one (second) still decrypts */
    uint8_t rotated[2 * GW_TLS_KEY_LEN];
    memset(rotated, 0x5a, GW_TLS_KEY_LEN);
    memcpy(rotated + GW_TLS_KEY_LEN, keys, GW_TLS_KEY_LEN);
    assert_int_equal(gw_tls_keyring_set(ring, rotated, 2), 0);
    assert_int_equal(resumes(&b, s1), 1);
    /* a ring with only the new key: the old ticket needs a full handshake */
    assert_int_equal(gw_tls_keyring_set(ring, rotated, 1), 0);
    assert_int_equal(resumes(&a, s1), 0);
    SSL_SESSION_free(s1);
    /* emptied: each context's own keys again, not shared */
    assert_int_equal(gw_tls_keyring_set(ring, NULL, 0), 0);
    pair_connect(&a);
    SSL_SESSION *s2 = first_session(&a);
    assert_int_equal(resumes(&b, s2), 0);
    assert_int_equal(resumes(&a, s2), 1);
    SSL_SESSION_free(s2);
    assert_int_equal(gw_tls_keyring_set(ring, keys, GW_TLS_KEYRING_MAX + 1), GW_E_INVAL);
    pair_free(&a);
    pair_free(&b);
    gw_tls_keyring_del(ring);
}

/* A ticket's key name and CBC IV (RFC 5077 §4's layout, OpenSSL's: 16-byte key name, IV,
 * encrypted state, HMAC). */
static void ticket_name_iv(const SSL_SESSION *sess, uint8_t name[16], uint8_t iv[16])
{
    const unsigned char *tick;
    size_t len;
    SSL_SESSION_get0_ticket(sess, &tick, &len);
    assert_true(len > 16 + 16 + 32);
    memcpy(name, tick, 16);
    memcpy(iv, tick + 16, 16);
}

/* A new TLS 1.3 connection of p offering sess, the ticket it got taken: whether it resumed,
 * and the new session in *next. */
static int resumes13(pair_t *p, SSL_SESSION *sess, SSL_SESSION **next)
{
    pair_connect(p);
    assert_int_equal(SSL_set_session(p->cli, sess), 1);
    handshake(p, 0);
    *next = gw_test_take_ticket(p->cli);
    return SSL_session_reused(p->cli);
}

static int cmp_bytes(const void *a, const void *b, void *size)
{
    return memcmp(a, b, *(const size_t *)size);
}

/* No two of the n items of size bytes at base are equal (they are sorted in place). */
static void assert_all_distinct(void *base, size_t n, size_t size)
{
    qsort_r(base, n, size, cmp_bytes, &size);
    const uint8_t *b = base;
    for (size_t i = 1; i < n; i++)
        assert_memory_not_equal(b + (i - 1) * size, b + i * size, size);
}

/* A browser uses a TLS 1.3 ticket once (RFC 8446 §C.4): each resumed connection must get a
 * new ticket, which resumes the next. 300 in a row (the IVs come from batches of 256) all
 * resume, under one key, and no two tickets share a CBC IV. */
static void test_tls13_tickets_chain_with_distinct_ivs(void **state)
{
    (void)state;
    enum { N = 300 };
    gw_cfg_cert_t c = {.certificate = cert_a, .key = key_a};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 1;
    pair_t p;
    pair_init(&p, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, 0, NULL);
    handshake(&p, 0);
    assert_int_equal(SSL_version(p.cli), TLS1_3_VERSION);
    SSL_SESSION *sess = gw_test_take_ticket(p.cli);
    static uint8_t ivs[N][16];
    uint8_t name0[16], name[16];
    ticket_name_iv(sess, name0, ivs[0]);
    for (int i = 1; i < N; i++) {
        SSL_SESSION *next;
        assert_int_equal(resumes13(&p, sess, &next), 1);
        SSL_SESSION_free(sess);
        sess = next;
        ticket_name_iv(sess, name, ivs[i]);
        assert_memory_equal(name, name0, 16);
    }
    SSL_SESSION_free(sess);
    assert_all_distinct(ivs, N, sizeof(ivs[0]));
    pair_free(&p);
}

static uint64_t set_ms;
static uint64_t set_clock(void)
{
    return set_ms;
}

/* Rotation (ticket_rotation 1 s here): a ticket of the previous key still resumes and is
 * renewed under the current key; one two keys old needs a full handshake. */
static void test_tls13_tickets_resume_across_rotation(void **state)
{
    (void)state;
    gw_cfg_cert_t c = {.certificate = cert_a, .key = key_a};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 1;
    cfg.ticket_rotation_ms = 1000;
    set_ms = 5000000;
    gw_tls__set_clock(set_clock);
    pair_t p;
    pair_init(&p, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, 0, NULL);
    handshake(&p, 0);
    SSL_SESSION *a = gw_test_take_ticket(p.cli), *b, *b2, *d;
    uint8_t name_a[16], name_b[16], iv[16];
    ticket_name_iv(a, name_a, iv);
    set_ms += 1500; /* a new key; a's is the previous one */
    assert_int_equal(resumes13(&p, a, &b), 1);
    ticket_name_iv(b, name_b, iv);
    assert_memory_not_equal(name_a, name_b, 16);
    set_ms += 1000; /* another new key: b's is the previous, a's is gone */
    assert_int_equal(resumes13(&p, b, &b2), 1);
    assert_int_equal(resumes13(&p, a, &d), 0);
    SSL_SESSION_free(a);
    SSL_SESSION_free(b);
    SSL_SESSION_free(b2);
    SSL_SESSION_free(d);
    pair_free(&p);
    gw_tls__set_clock(NULL);
}

/* OpenSSL's own server, keyed with tls.ticket_keys' 80-byte key (name, AES-256 key, HMAC
 * key) through SSL_CTX_set_tlsext_ticket_keys (name, HMAC key, AES key: the same ticket
 * format): whether it resumes sess, a client of p's over memory BIOs. */
static int openssl_resumes(pair_t *p, const unsigned char key[80], SSL_SESSION *sess)
{
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(sctx);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(sctx, cert_a), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(sctx, key_a, SSL_FILETYPE_PEM), 1);
    unsigned char k[80];
    memcpy(k, key, 16);
    memcpy(k + 16, key + 48, 32);
    memcpy(k + 48, key + 16, 32);
    assert_int_equal(SSL_CTX_set_tlsext_ticket_keys(sctx, k, sizeof(k)), 1);
    SSL *srv = SSL_new(sctx), *cli = SSL_new(p->cctx);
    BIO *c2s = BIO_new(BIO_s_mem()), *s2c = BIO_new(BIO_s_mem());
    BIO_up_ref(c2s);
    BIO_up_ref(s2c);
    SSL_set_bio(srv, c2s, s2c);
    SSL_set_bio(cli, s2c, c2s);
    SSL_set_accept_state(srv);
    SSL_set_connect_state(cli);
    assert_int_equal(SSL_set_session(cli, sess), 1);
    int cd = 0, sd = 0;
    for (int round = 0; round < 20 && !(cd && sd); round++) {
        if (!cd)
            cd = SSL_do_handshake(cli) == 1;
        if (!sd)
            sd = SSL_do_handshake(srv) == 1;
    }
    assert_true(cd && sd);
    int reused = SSL_session_reused(srv);
    SSL_free(cli);
    SSL_free(srv);
    SSL_CTX_free(sctx);
    return reused;
}

/* tls.ticket_keys: listeners given the same keys resume each other's tickets, in both
 * formats (48 bytes: AES-128 and 16-byte HMAC keys; 80: AES-256, 32-byte HMAC keys), one with
 * other keys under the same name does not (its HMAC fails), and OpenSSL's own server given
 * the 80-byte key resumes h2gate's tickets (the HMAC and the cipher are the standard ones). */
static void test_tls13_file_keys_shared_between_contexts(void **state)
{
    (void)state;
    gw_cfg_cert_t c = {.certificate = cert_a, .key = key_a};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 1;
    unsigned char keys[2 * 80];
    for (size_t i = 0; i < sizeof(keys); i++)
        keys[i] = (unsigned char)(i * 13 + 5);
    for (unsigned kl = 48; kl <= 80; kl += 32) {
        cfg.ticket_keys = keys;
        cfg.ticket_keys_len = 2 * kl;
        cfg.ticket_key_len = kl;
        pair_t a, b, other;
        pair_init(&a, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, 0, NULL);
        pair_init(&b, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, 0, NULL);
        unsigned char keys2[80];
        memcpy(keys2, keys, 16); /* the same key name, other AES and HMAC keys */
        memset(keys2 + 16, 0x77, sizeof(keys2) - 16);
        cfg.ticket_keys = keys2;
        cfg.ticket_keys_len = kl;
        pair_init(&other, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, 0, NULL);
        handshake(&a, 0);
        SSL_SESSION *s0 = gw_test_take_ticket(a.cli), *s1, *s2, *s3;
        uint8_t name[16], iv[16];
        ticket_name_iv(s0, name, iv);
        assert_memory_equal(name, keys, 16); /* the file's first key encrypts */
        assert_int_equal(resumes13(&b, s0, &s1), 1);
        assert_int_equal(resumes13(&a, s1, &s2), 1);
        if (kl == 80)
            assert_int_equal(openssl_resumes(&a, keys, s2), 1);
        assert_int_equal(resumes13(&other, s2, &s3), 0);
        SSL_SESSION_free(s0);
        SSL_SESSION_free(s1);
        SSL_SESSION_free(s2);
        SSL_SESSION_free(s3);
        pair_free(&a);
        pair_free(&b);
        pair_free(&other);
    }
}

/* Without tickets a TLS 1.2 client resumes by the session id (RFC 5246 §7.4.1.3). The server
 * takes its ids from batches of CSPRNG output (128 ids a batch, fewer when ticket IVs share
 * it): 200 new sessions get 200 distinct 32-byte ids, and they resume. */
static void test_tls12_session_ids_distinct_and_resume(void **state)
{
    (void)state;
    enum { N = 200 };
    gw_cfg_cert_t c = {.certificate = cert_a, .key = key_a};
    gw_cfg_tls_t cfg = base_cfg(&c, 1);
    cfg.session_tickets = 0;
    pair_t p;
    pair_init(&p, &cfg, ALPN_H1_FIRST, sizeof(ALPN_H1_FIRST) - 1, NULL, 0, NULL, TLS1_2_VERSION,
              NULL);
    static uint8_t ids[N][32];
    for (int i = 0; i < N; i++) {
        if (i)
            pair_connect(&p);
        SSL_SESSION *sess = first_session(&p);
        /* closed cleanly: OpenSSL drops a session from its cache when its connection is
         * freed without a close_notify sent (ssl_clear_bad_session) */
        gw_tls_shutdown(p.srv);
        unsigned len = 0;
        const unsigned char *id = SSL_SESSION_get_id(sess, &len);
        assert_int_equal(len, 32);
        memcpy(ids[i], id, 32);
        if (i % 40 == 0)
            assert_int_equal(resumes(&p, sess), 1);
        SSL_SESSION_free(sess);
    }
    assert_all_distinct(ids, N, sizeof(ids[0]));
    pair_free(&p);
}

/* The chain record a session keeps for Client-Cert-Chain comes back from a ticket: only a
 * well-formed one is taken (a version byte; per certificate a 3-byte length and one DER
 * SEQUENCE of exactly that length; at most 16 and GW_TLS_CHAIN_RECORD_MAX bytes). */
static void test_chain_record_is_checked(void **state)
{
    (void)state;
    static const uint8_t empty[] = {1};
    static const uint8_t one[] = {1, 0, 0, 4, 0x30, 2, 5, 0};
    static const uint8_t two[] = {1, 0, 0, 2, 0x30, 0, 0, 0, 4, 0x30, 0x81, 1, 7};
    assert_int_equal(gw_tls__chain_rec_check(empty, sizeof(empty)), 0);
    assert_int_equal(gw_tls__chain_rec_check(one, sizeof(one)), 0);
    assert_int_equal(gw_tls__chain_rec_check(two, sizeof(two)), 0);
    static const uint8_t *bad[] = {
        (const uint8_t *)"\x02",                             /* another version */
        (const uint8_t *)"\x01\x00\x00",                     /* a length cut short */
        (const uint8_t *)"\x01\x00\x00\x05\x30\x02\x05\x00", /* longer than the record */
        (const uint8_t *)"\x01\x00\x00\x04\x31\x02\x05\x00", /* not a SEQUENCE */
        (const uint8_t *)"\x01\x00\x00\x04\x30\x03\x05\x00", /* its DER length differs */
        (const uint8_t *)"\x01\x00\x00\x04\x30\x80\x05\x00", /* indefinite length */
    };
    static const size_t bad_len[] = {1, 3, 8, 8, 8, 8};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gw_tls__chain_rec_check(bad[i], bad_len[i]), -1);
    assert_int_equal(gw_tls__chain_rec_check(NULL, 0), -1);
    assert_int_equal(gw_tls__chain_rec_check(one, sizeof(one) - 1), -1); /* cut short */
    /* 16 certificates pass, 17 do not; nor a record over the bound */
    uint8_t rec[1 + 17 * 5];
    rec[0] = 1;
    for (size_t i = 0; i < 17; i++)
        memcpy(rec + 1 + i * 5, "\x00\x00\x02\x30\x00", 5);
    assert_int_equal(gw_tls__chain_rec_check(rec, 1 + 16 * 5), 0);
    assert_int_equal(gw_tls__chain_rec_check(rec, sizeof(rec)), -1);
    size_t big = GW_TLS_CHAIN_RECORD_MAX + 1, n = big - 1 - 3 - 4;
    uint8_t *r = calloc(1, big);
    assert_non_null(r);
    r[0] = 1;
    r[1] = (uint8_t)((n + 4) >> 16);
    r[2] = (uint8_t)((n + 4) >> 8);
    r[3] = (uint8_t)(n + 4);
    r[4] = 0x30;
    r[5] = 0x82;
    r[6] = (uint8_t)(n >> 8);
    r[7] = (uint8_t)n;
    assert_int_equal(gw_tls__chain_rec_check(r, big), -1);
    /* the same certificate one byte shorter fits */
    n--;
    r[3] = (uint8_t)(n + 4);
    r[6] = (uint8_t)(n >> 8);
    r[7] = (uint8_t)n;
    assert_int_equal(gw_tls__chain_rec_check(r, big - 1), 0);
    free(r);
}

/* The server's ECDSA key signs on OpenSSL's legacy path (a copy of the default EC_KEY method
 * makes it "foreign"): a full handshake's CertificateVerify (TLS 1.3) or ServerKeyExchange
 * (TLS 1.2) then skips the provider round of about 67k instructions (callgrind,
 * scripts/lib/cg_handshake.sh). The client checks the signature in both versions; SNI's other
 * contexts take the same key form. */
static void test_ec_key_signs_on_legacy_path(void **state)
{
    (void)state;
    char *names_b[] = {"b.example"};
    gw_cfg_cert_t certs[2] = {
        {.certificate = cert_a, .key = key_a},
        {.certificate = cert_b, .key = key_b, .names = names_b, .names_len = 1}};
    gw_cfg_tls_t cfg = base_cfg(certs, 2);
    static const struct {
        int version;
        const char *sni;
        char letter;
    } cases[] = {{TLS1_3_VERSION, NULL, 'a'},
                 {TLS1_2_VERSION, NULL, 'a'},
                 {TLS1_3_VERSION, "b.example", 'b'}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pair_t p;
        pair_init(&p, &cfg, ALPN_H2_FIRST, sizeof(ALPN_H2_FIRST) - 1, "\x02h2", 3, cases[i].sni,
                  cases[i].version, NULL);
        handshake(&p, 0);
        assert_int_equal(SSL_version(p.cli), cases[i].version);
        assert_int_equal(cert_letter(SSL_get0_peer_certificate(p.cli)), cases[i].letter);
        gw_test_expect_legacy_ec_signer(p.cli,
                                        SSL_CTX_get0_privatekey(SSL_get_SSL_CTX(p.srv->ssl)));
        pair_free(&p);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_alpn_server_preference),
    cmocka_unit_test(test_sni_picks_certificate),
    cmocka_unit_test(test_chain_is_the_files),
    cmocka_unit_test(test_tls12_cipher_rule_for_h2),
    cmocka_unit_test(test_client_order_picks_the_suite),
    cmocka_unit_test(test_round_trip_whole),
    cmocka_unit_test(test_round_trip_byte_by_byte),
    cmocka_unit_test(test_writev_gathers_small_pieces),
    cmocka_unit_test(test_writev_frame_header_shares_record),
    cmocka_unit_test(test_output_handed_over_without_copy),
    cmocka_unit_test(test_output_buffer_lent_between_connections),
    cmocka_unit_test(test_record_buffers_kept_between_connections),
    cmocka_unit_test(test_frees_of_other_blocks_not_sized),
    cmocka_unit_test(test_drained_stops_reads_without_loss),
    cmocka_unit_test(test_missing_key_file_fails),
    cmocka_unit_test(test_check_says_which_file_and_why),
    cmocka_unit_test(test_ticket_rotation_ends_with_a_moving_clock),
    cmocka_unit_test(test_keyring_shared_between_contexts),
    cmocka_unit_test(test_tls13_tickets_chain_with_distinct_ivs),
    cmocka_unit_test(test_tls13_tickets_resume_across_rotation),
    cmocka_unit_test(test_tls13_file_keys_shared_between_contexts),
    cmocka_unit_test(test_tls12_session_ids_distinct_and_resume),
    cmocka_unit_test(test_chain_record_is_checked),
    cmocka_unit_test(test_ec_key_signs_on_legacy_path),
};

GW_TEST_MAIN_GROUP(tests, setup_all, teardown_all)
