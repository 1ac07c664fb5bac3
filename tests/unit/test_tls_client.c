/* Unit tests of back/tls (client-side sans-IO TLS to origins). The peer is the server side
 * of front/tls (linked in this test only: back/ itself never depends on front/), and for TLS
 * 1.2 a plain OpenSSL server over memory BIOs. Handshake and verification (CA file, DNS name,
 * IP literal, unknown CA, verification off, missing host), SNI only for names, ALPN
 * http/1.1, session resumption per server (TLS 1.3 tickets used once, TLS 1.2 sessions kept),
 * plaintext round trip, close_notify both ways, ciphertext fed one byte at a time. */
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
#include <openssl/ssl.h>

#include "common/err.h"
#include "tls/tls.h"
#include "tls_test_util.h"

/* self-signed for localhost, 127.0.0.1, ::1: cert_a is also the CA file that trusts it */
GW_TLS_TEST_CERTS(2, "/tmp/gw_tls_conn_test_XXXXXX")
#define cert_a tcert[0]
#define key_a tkey[0]
#define cert_b tcert[1]
#define key_b tkey[1]

static const unsigned char ALPN_H1[] = "\x08http/1.1";

/* ---- a client/server pair in memory --------------------------------------------------------- */

typedef struct {
    gw_cfg_cert_t cert;
    gw_cfg_tls_t scfg;
    gw_tls_ctx_t *sctx;
    gw_tls_conn_t *srv;
    SSL_CTX *raw_ctx; /* instead of sctx/srv: a plain OpenSSL server (TLS 1.2 tests) */
    SSL *raw;
    BIO *raw_in, *raw_out;
    int server_done, server_failed;
    gw_tls_conn_t *cli;
    int client_done, client_rc;
} pair_t;

static void server_front(pair_t *p, const char *cert, const char *key)
{
    memset(p, 0, sizeof(*p));
    p->cert = (gw_cfg_cert_t){(char *)cert, (char *)key, NULL, 0};
    p->scfg = (gw_cfg_tls_t){.certs = &p->cert,
                             .certs_len = 1,
                             .min_version = 12,
                             .prefer_h2 = 0,
                             .session_tickets = 1,
                             .ticket_rotation_ms = 3600000};
    assert_int_equal(gw_tls_ctx_new(&p->scfg, ALPN_H1, sizeof(ALPN_H1) - 1, NULL, &p->sctx), 0);
}

static void server_new_conn(pair_t *p)
{
    if (p->sctx) {
        gw_tls_conn_del(p->srv);
        p->srv = gw_tls_conn_new(p->sctx);
        assert_non_null(p->srv);
    } else {
        if (p->raw)
            SSL_shutdown(p->raw); /* a server also forgets sessions of unclean ends */
        ERR_clear_error();
        SSL_free(p->raw);
        p->raw = SSL_new(p->raw_ctx);
        p->raw_in = BIO_new(BIO_s_mem());
        p->raw_out = BIO_new(BIO_s_mem());
        BIO_set_mem_eof_return(p->raw_in, -1);
        SSL_set_bio(p->raw, p->raw_in, p->raw_out);
        SSL_set_accept_state(p->raw);
    }
    p->server_done = p->server_failed = 0;
    p->client_done = p->client_rc = 0;
}

/* A TLS 1.2-only OpenSSL server with a session cache (stateful resumption). */
static void server_raw12(pair_t *p)
{
    memset(p, 0, sizeof(*p));
    p->raw_ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(p->raw_ctx);
    SSL_CTX_set_max_proto_version(p->raw_ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(p->raw_ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_id_context(p->raw_ctx, (const unsigned char *)"t", 1);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(p->raw_ctx, cert_a), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(p->raw_ctx, key_a, SSL_FILETYPE_PEM), 1);
}

static void pair_free(pair_t *p)
{
    gw_tls_conn_del(p->cli);
    gw_tls_conn_del(p->srv);
    gw_tls_ctx_del(p->sctx);
    SSL_free(p->raw);
    SSL_CTX_free(p->raw_ctx);
}

static int server_feed(pair_t *p, const uint8_t *b, size_t n)
{
    if (p->srv)
        return gw_tls_feed(p->srv, b, n);
    return BIO_write(p->raw_in, b, (int)n) == (int)n ? 0 : -1;
}

static void server_step(pair_t *p)
{
    if (p->server_done || p->server_failed)
        return;
    int rv;
    if (p->srv) {
        rv = gw_tls_handshake(p->srv);
    } else {
        int r = SSL_do_handshake(p->raw);
        int e = SSL_get_error(p->raw, r);
        rv = r == 1 ? 1 : (e == SSL_ERROR_WANT_READ ? 0 : -1);
        ERR_clear_error();
    }
    p->server_done = rv == 1;
    p->server_failed = rv < 0;
}

static size_t server_take(pair_t *p, uint8_t *b, size_t cap)
{
    if (p->srv)
        return gw_tls_take_out(p->srv, b, cap);
    int n = BIO_read(p->raw_out, b, (int)cap);
    return n > 0 ? (size_t)n : 0;
}

static void client_step(pair_t *p)
{
    if (p->client_done || p->client_rc < 0)
        return;
    int rv = gw_tls_handshake(p->cli);
    p->client_rc = rv < 0 ? rv : 0;
    p->client_done = rv == 1;
}

/* Move ciphertext both ways, whole or one byte at a time. */
static void pump(pair_t *p, int byte_by_byte)
{
    uint8_t buf[32768];
    size_t n;
    while ((n = gw_tls_take_out(p->cli, buf, sizeof(buf))) > 0) {
        for (size_t i = 0; i < n; i += byte_by_byte ? 1 : n) {
            assert_int_equal(server_feed(p, buf + i, byte_by_byte ? 1 : n), 0);
            server_step(p);
        }
    }
    server_step(p);
    while ((n = server_take(p, buf, sizeof(buf))) > 0) {
        for (size_t i = 0; i < n; i += byte_by_byte ? 1 : n) {
            assert_int_equal(gw_tls_feed(p->cli, buf + i, byte_by_byte ? 1 : n), 0);
            client_step(p);
        }
    }
    client_step(p);
}

/* Run the handshake; returns the client's result (1 done, GW_E_PROTO failed). */
static int handshake(pair_t *p, int byte_by_byte)
{
    client_step(p);
    for (int round = 0; round < 20 && !(p->client_done && p->server_done); round++) {
        pump(p, byte_by_byte);
        if (p->client_rc < 0 || p->server_failed)
            break;
    }
    /* a failing client leaves its alert in the output: deliver it */
    pump(p, 0);
    return p->client_rc < 0 ? p->client_rc : p->client_done;
}

/* A new client connection; the previous one is retired cleanly (close_notify), as back/conn.c
 * does, which keeps its session resumable. */
static void client(pair_t *p, gw_tls_client_ctx_t *c, size_t server, const char *host)
{
    if (p->cli)
        gw_tls_shutdown(p->cli);
    gw_tls_conn_del(p->cli);
    p->cli = gw_tls_client_new(c, server, host);
    assert_non_null(p->cli);
}

static gw_cfg_upstream_t upstream(const char *ca, int verify, size_t servers)
{
    return (gw_cfg_upstream_t){
        .name = "u", .servers_len = servers, .tls = 1, .tls_verify = verify, .tls_ca = (char *)ca};
}

/* The server side of p (cert_a) and a client context for an upstream of servers servers
 * that trusts ca (verify: checks the certificate). */
static gw_tls_client_ctx_t *front_and_ctx(pair_t *p, const char *ca, int verify, size_t servers)
{
    server_front(p, cert_a, key_a);
    gw_cfg_upstream_t u = upstream(ca, verify, servers);
    gw_tls_client_ctx_t *c;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), 0);
    return c;
}

/* A new connection of p: the client of c for server and host, and their handshake
 * (byte_by_byte: one byte at a time); the handshake's result. */
static int connect_to(pair_t *p, gw_tls_client_ctx_t *c, size_t server, const char *host,
                      int byte_by_byte)
{
    server_new_conn(p);
    client(p, c, server, host);
    return handshake(p, byte_by_byte);
}

/* Plaintext both ways after the handshake, then the server's close_notify. */
static void round_trip(pair_t *p)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    assert_int_equal(gw_tls_write(p->cli, req, sizeof(req) - 1), 0);
    pump(p, 0);
    char got[256];
    ssize_t n = gw_tls_read(p->srv, got, sizeof(got));
    assert_int_equal(n, (ssize_t)(sizeof(req) - 1));
    assert_memory_equal(got, req, sizeof(req) - 1);
    /* 100 KB back: several records; the client reads them in pieces smaller than a record */
    static uint8_t body[100000], back[100000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (uint8_t)(i * 7 + 3);
    assert_int_equal(gw_tls_write(p->srv, body, sizeof(body)), 0);
    pump(p, 0);
    size_t have = 0;
    for (;;) {
        ssize_t r = gw_tls_read(p->cli, back + have, 3000);
        if (r == GW_E_AGAIN)
            break;
        assert_true(r > 0);
        have += (size_t)r;
    }
    assert_int_equal(have, sizeof(body));
    assert_memory_equal(back, body, sizeof(body));
    gw_tls_shutdown(p->srv);
    pump(p, 0);
    assert_int_equal(gw_tls_read(p->cli, back, sizeof(back)), GW_E_CLOSED);
}

/* front_and_ctx(), then a first connection to server 0 for host (byte_by_byte: one byte at a
 * time) whose handshake must succeed; the client context. */
static gw_tls_client_ctx_t *connected(pair_t *p, const char *ca, int verify, size_t servers,
                                      const char *host, int byte_by_byte)
{
    gw_tls_client_ctx_t *c = front_and_ctx(p, ca, verify, servers);
    int rv = connect_to(p, c, 0, host, byte_by_byte);
    if (rv != 1)
        fail_msg("handshake with %s (verify %d, byte by byte %d): %d", host, verify, byte_by_byte,
                 rv);
    return c;
}

/* ---- tests ------------------------------------------------------------------------------------
 */

static void test_dns_name_verified_sni_alpn(void **state)
{
    (void)state;
    pair_t p;
    gw_tls_client_ctx_t *c = connected(&p, cert_a, 1, 1, "localhost", 0);
    assert_true(p.server_done);
    assert_string_equal(gw_tls_reason(p.cli), "");
    assert_non_null(gw_tls_sni(p.srv));
    assert_string_equal(gw_tls_sni(p.srv), "localhost"); /* RFC 6066 §3 */
    assert_string_equal(gw_tls_alpn(p.cli), "http/1.1");
    assert_string_equal(gw_tls_alpn(p.srv), "http/1.1");
    assert_string_equal(gw_tls_version(p.cli), "TLSv1.3");
    assert_int_equal(gw_tls_resumed(p.cli), 0);
    round_trip(&p);
    /* our close_notify reaches the server */
    gw_tls_shutdown(p.cli);
    assert_true(gw_tls_pending_out(p.cli) > 0);
    pump(&p, 0);
    char b[16];
    assert_int_equal(gw_tls_read(p.srv, b, sizeof(b)), GW_E_CLOSED);
    pair_free(&p);
    gw_tls_client_ctx_del(c);
}

static void test_ip_literals_checked_as_ip_without_sni(void **state)
{
    (void)state;
    const char *hosts[] = {"127.0.0.1", "::1"};
    gw_cfg_upstream_t u = upstream(cert_a, 1, 1);
    gw_tls_client_ctx_t *c;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), 0);
    for (size_t i = 0; i < 2; i++) {
        pair_t p;
        server_front(&p, cert_a, key_a);
        assert_int_equal(connect_to(&p, c, 0, hosts[i], 0), 1);
        assert_null(gw_tls_sni(p.srv)); /* RFC 6066 §3: no literal addresses in HostName */
        round_trip(&p);
        pair_free(&p);
    }
    gw_tls_client_ctx_del(c);
}

/* Verification failures: the reason names the check, and the server gets our alert. */
static void expect_verify_failure(const char *ca, const char *host, const char *reason)
{
    pair_t p;
    gw_tls_client_ctx_t *c = front_and_ctx(&p, ca, 1, 1);
    assert_int_equal(connect_to(&p, c, 0, host, 0), GW_E_PROTO);
    assert_string_equal(gw_tls_reason(p.cli), reason);
    /* the alert made the server fail too (it never sees a Finished) */
    char b[16];
    assert_true(p.server_failed || gw_tls_read(p.srv, b, sizeof(b)) < 0);
    pair_free(&p);
    gw_tls_client_ctx_del(c);
}

static void test_hostname_mismatch(void **state)
{
    (void)state;
    expect_verify_failure(cert_a, "example.org", "certificate verify failed: hostname mismatch");
    /* no partial match on a parent or child name either */
    expect_verify_failure(cert_a, "a.localhost", "certificate verify failed: hostname mismatch");
}

static void test_ip_mismatch(void **state)
{
    (void)state;
    expect_verify_failure(cert_a, "10.1.2.3", "certificate verify failed: IP address mismatch");
}

static void test_unknown_ca(void **state)
{
    (void)state;
    /* cert_b is another self-signed certificate: it does not vouch for cert_a */
    expect_verify_failure(cert_b, "localhost",
                          "certificate verify failed: self-signed certificate");
    /* the system store does not know our self-signed certificate either (tls_ca unset) */
    expect_verify_failure(NULL, "localhost", "certificate verify failed: self-signed certificate");
}

static void test_verify_off_accepts_anything_and_still_sends_sni(void **state)
{
    (void)state;
    pair_t p;
    gw_tls_client_ctx_t *c = connected(&p, cert_b, 0, 1, "example.org", 0); /* tls_ca is ignored */
    assert_string_equal(gw_tls_sni(p.srv), "example.org");
    round_trip(&p);
    pair_free(&p);
    gw_tls_client_ctx_del(c);
}

static void test_verify_without_host_fails(void **state)
{
    (void)state;
    gw_cfg_upstream_t u = upstream(cert_a, 1, 1);
    gw_tls_client_ctx_t *c;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), 0);
    const char *hosts[] = {NULL, ""};
    for (size_t i = 0; i < 2; i++) {
        gw_tls_conn_t *t = gw_tls_client_new(c, 0, hosts[i]);
        assert_non_null(t);
        assert_int_equal(gw_tls_handshake(t), GW_E_PROTO);
        assert_string_equal(gw_tls_reason(t), "no host name to verify the certificate against");
        assert_int_equal(gw_tls_pending_out(t), 0); /* nothing was sent */
        gw_tls_conn_del(t);
    }
    gw_tls_client_ctx_del(c);
}

static void test_bad_ca_file(void **state)
{
    (void)state;
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none.pem", dir);
    gw_cfg_upstream_t u = upstream(missing, 1, 1);
    gw_tls_client_ctx_t *c = (gw_tls_client_ctx_t *)&u;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), GW_E_INVAL);
    assert_null(c);
    /* a key file is not a CA bundle */
    u.tls_ca = key_a;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), GW_E_INVAL);
    /* not verifying: the CA file is not even read */
    u.tls_verify = 0;
    u.tls_ca = missing;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), 0);
    gw_tls_client_ctx_del(c);
}

static void test_byte_by_byte(void **state)
{
    (void)state;
    pair_t p;
    gw_tls_client_ctx_t *c = connected(&p, cert_a, 1, 1, "localhost", 1);
    /* a response split at every byte still decrypts whole */
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_int_equal(gw_tls_write(p.srv, resp, sizeof(resp) - 1), 0);
    uint8_t buf[4096];
    size_t n = gw_tls_take_out(p.srv, buf, sizeof(buf));
    char got[128];
    size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(gw_tls_feed(p.cli, buf + i, 1), 0);
        ssize_t r;
        while ((r = gw_tls_read(p.cli, got + have, sizeof(got) - have)) > 0)
            have += (size_t)r;
        assert_int_equal(r, GW_E_AGAIN);
    }
    assert_int_equal(have, sizeof(resp) - 1);
    assert_memory_equal(got, resp, have);
    pair_free(&p);
    gw_tls_client_ctx_del(c);
}

/* Read whatever the server sent after the handshake (TLS 1.3 tickets): no plaintext. */
static void take_tickets(pair_t *p)
{
    pump(p, 0);
    char b[16];
    assert_int_equal(gw_tls_read(p->cli, b, sizeof(b)), GW_E_AGAIN);
}

static void test_tls13_tickets_resume_once_per_server(void **state)
{
    (void)state;
    pair_t p;
    /* 1: full handshake; its ticket is kept for server 0 */
    gw_tls_client_ctx_t *c = connected(&p, cert_a, 1, 2, "localhost", 0);
    assert_int_equal(gw_tls_resumed(p.cli), 0);
    take_tickets(&p);
    /* 2: server 1 has no session of its own */
    assert_int_equal(connect_to(&p, c, 1, "localhost", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 0);
    /* 3: server 0 resumes with the ticket, which is then gone (RFC 8446 §C.4) */
    assert_int_equal(connect_to(&p, c, 0, "localhost", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 1);
    gw_tls_conn_t *keep = p.cli; /* its new ticket is not read yet */
    p.cli = NULL;
    assert_int_equal(connect_to(&p, c, 0, "localhost", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 0); /* 4: no ticket left: full handshake */
    take_tickets(&p);
    /* 5: the ticket of connection 4 resumes, and the resumed session still verifies */
    assert_int_equal(connect_to(&p, c, 0, "localhost", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 1);
    round_trip(&p);
    gw_tls_shutdown(keep);
    gw_tls_conn_del(keep);
    pair_free(&p);
    /* the context outlives its creator's reference while a connection holds it */
    gw_tls_conn_t *late = gw_tls_client_new(c, 0, "localhost");
    assert_non_null(late);
    gw_tls_client_ctx_del(c);
    assert_true(gw_tls_handshake(late) == 0 && gw_tls_pending_out(late) > 0);
    gw_tls_conn_del(late);
}

static void test_tls12_session_kept_for_reuse(void **state)
{
    (void)state;
    pair_t p;
    server_raw12(&p);
    gw_cfg_upstream_t u = upstream(cert_a, 1, 1);
    gw_tls_client_ctx_t *c;
    assert_int_equal(gw_tls_client_ctx_new(&u, &c), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(connect_to(&p, c, 0, "127.0.0.1", 0), 1);
        assert_string_equal(gw_tls_version(p.cli), "TLSv1.2");
        assert_string_equal(gw_tls_alpn(p.cli), ""); /* this server does no ALPN */
        /* the first is full, the next two resume the same session */
        assert_int_equal(gw_tls_resumed(p.cli), i > 0);
        assert_int_equal(SSL_session_reused(p.raw), i > 0);
    }
    /* a connection abandoned without close_notify (a failure) spoils the session */
    gw_tls_conn_del(p.cli);
    p.cli = NULL;
    assert_int_equal(connect_to(&p, c, 0, "127.0.0.1", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 0);
    /* and the full handshake's new session is kept again */
    assert_int_equal(connect_to(&p, c, 0, "127.0.0.1", 0), 1);
    assert_int_equal(gw_tls_resumed(p.cli), 1);
    pair_free(&p);
    gw_tls_client_ctx_del(c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dns_name_verified_sni_alpn),
    cmocka_unit_test(test_ip_literals_checked_as_ip_without_sni),
    cmocka_unit_test(test_hostname_mismatch),
    cmocka_unit_test(test_ip_mismatch),
    cmocka_unit_test(test_unknown_ca),
    cmocka_unit_test(test_verify_off_accepts_anything_and_still_sends_sni),
    cmocka_unit_test(test_verify_without_host_fails),
    cmocka_unit_test(test_bad_ca_file),
    cmocka_unit_test(test_byte_by_byte),
    cmocka_unit_test(test_tls13_tickets_resume_once_per_server),
    cmocka_unit_test(test_tls12_session_kept_for_reuse),
};

GW_TEST_MAIN_GROUP(tests, setup_all, teardown_all)
