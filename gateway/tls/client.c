/* tls/client.c — the client role, towards HTTPS origins: upstream contexts (verification
 * against tls_ca or the system store, TLS 1.2 or later, ALPN "http/1.1", the session kept per
 * server) and, per connection, the host checks and SNI (see tls.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "tls/tls_internal.h"

/* RFC 7301 §3.1 wire format: one length-prefixed protocol name. */
static const unsigned char alpn_h1[] = "\x08http/1.1";
#define ALPN_H1_LEN (sizeof(alpn_h1) - 1)

struct gw_tls_client_ctx {
    SSL_CTX *ssl_ctx;
    const gw_cfg_upstream_t *cfg;
    SSL_SESSION **sess; /* one slot per server: the session to offer next (or NULL) */
    size_t sess_len;
    unsigned refs; /* the creator's, plus one per live connection */
};

/* ex_data slot of SSL objects pointing back at their connection (for the session callback). */
static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void ex_init(void)
{
    ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

void gw_tls__client_ctx_unref(gw_tls_client_ctx_t *c)
{
    if (--c->refs > 0)
        return;
    for (size_t i = 0; i < c->sess_len; i++)
        SSL_SESSION_free(c->sess[i]);
    gw_free(c->sess);
    SSL_CTX_free(c->ssl_ctx);
    gw_free(c);
}

/* OpenSSL hands us each new session (TLS 1.2: at the end of a full handshake; TLS 1.3: per
 * NewSessionTicket, after the handshake, while we read). Keep the latest one per server. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    gw_tls_conn_t *t = SSL_get_ex_data(ssl, ex_index);
    if (!t || !t->client || t->server >= t->client->sess_len || !SSL_SESSION_is_resumable(sess))
        return 0; /* not kept: OpenSSL frees it */
    SSL_SESSION **slot = &t->client->sess[t->server];
    SSL_SESSION_free(*slot);
    *slot = sess;
    return 1; /* we own the reference now */
}

static void ssl_reason(char *dst, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(dst, cap, "%s", r ? r : fallback);
    ERR_clear_error();
}

/* The CA file (or the system store) cannot be used: into errs at tls_ca's position, or logged
 * when errs is NULL (a worker building its context). */
static void ca_failed(const gw_cfg_upstream_t *u, gw_config_errors_t *errs, const char *verb,
                      const char *why)
{
    if (!errs)
        GW_LOG_ERROR("back_tls_ca_invalid", "upstream=%s file=%s reason=\"%s\"", u->name,
                     u->tls_ca ? u->tls_ca : "(system store)", why);
    else if (u->tls_ca)
        gw_config_error_add(errs, &u->tls_ca_at, "tls_ca '%s' of upstream '%s' cannot be %s: %s",
                            u->tls_ca, u->name, verb, why);
    else
        gw_config_error_add(errs, &u->tls_ca_at,
                            "upstream '%s': the system's CA store cannot be loaded: %s", u->name,
                            why);
}

/* The context of u, built by the one code path of workers and checks. */
static int client_ctx_build(const gw_cfg_upstream_t *u, gw_config_errors_t *errs,
                            gw_tls_client_ctx_t **out)
{
    *out = NULL;
    pthread_once(&ex_once, ex_init); /* workers build their contexts concurrently */
    if (ex_index < 0)
        return GW_E_NOMEM;
    gw_tls_client_ctx_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return GW_E_NOMEM;
    c->refs = 1;
    c->cfg = u;
    c->sess_len = u->servers_len;
    c->sess = gw_calloc(c->sess_len ? c->sess_len : 1, sizeof(*c->sess));
    c->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (!c->sess || !c->ssl_ctx) {
        ERR_clear_error();
        gw_tls__client_ctx_unref(c);
        return GW_E_NOMEM;
    }
    SSL_CTX *x = c->ssl_ctx;
    /* RFC 8996: no TLS 1.0 or 1.1. */
    SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
    SSL_CTX_set_options(x, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(x, SSL_MODE_RELEASE_BUFFERS);
    /* SSL_CTX_set_alpn_protos returns 0 on success. */
    if (SSL_CTX_set_alpn_protos(x, alpn_h1, (unsigned)ALPN_H1_LEN) != 0) {
        ERR_clear_error();
        gw_tls__client_ctx_unref(c);
        return GW_E_NOMEM;
    }
    SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(x, on_new_session);
    if (u->tls_verify) {
        if (u->tls_ca && access(u->tls_ca, R_OK) != 0) {
            ca_failed(u, errs, "read", strerror(errno));
            gw_tls__client_ctx_unref(c);
            return GW_E_INVAL;
        }
        int ok = u->tls_ca ? SSL_CTX_load_verify_locations(x, u->tls_ca, NULL)
                           : SSL_CTX_set_default_verify_paths(x);
        if (ok != 1) {
            char why[160];
            ssl_reason(why, sizeof(why), "cannot load");
            ca_failed(u, errs, "loaded", why);
            gw_tls__client_ctx_unref(c);
            return GW_E_INVAL;
        }
        SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(x, SSL_VERIFY_NONE, NULL);
    }
    *out = c;
    return 0;
}

int gw_tls_client_ctx_new(const gw_cfg_upstream_t *u, gw_tls_client_ctx_t **out)
{
    return client_ctx_build(u, NULL, out);
}

int gw_tls_client_ctx_check(const gw_cfg_upstream_t *u, gw_config_errors_t *errs)
{
    gw_tls_client_ctx_t *c;
    int rv = client_ctx_build(u, errs, &c);
    if (rv == 0)
        gw_tls__client_ctx_unref(c);
    return rv;
}

void gw_tls_client_ctx_del(gw_tls_client_ctx_t *c)
{
    if (c)
        gw_tls__client_ctx_unref(c);
}

static int is_ip_literal(const char *host)
{
    unsigned char a[16];
    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

/* Name checks and SNI for one connection. 0 or -1 (out of memory). */
static int set_peer(gw_tls_conn_t *t, const char *host)
{
    int verify = t->client->cfg->tls_verify;
    if (!host || !*host) {
        t->no_host = verify;
        return 0;
    }
    if (is_ip_literal(host)) {
        /* RFC 6066 §3: no SNI for an address; RFC 6125: match iPAddress SAN entries only. */
        if (verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) != 1)
            return -1;
        return 0;
    }
    if (SSL_set_tlsext_host_name(t->ssl, host) != 1)
        return -1;
    if (verify) {
        /* RFC 6125 §6.4.3: a wildcard only as the whole left-most label. */
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (SSL_set1_host(t->ssl, host) != 1)
            return -1;
    }
    return 0;
}

gw_tls_conn_t *gw_tls_client_new(gw_tls_client_ctx_t *c, size_t server, const char *host)
{
    gw_tls_conn_t *t = gw_tls__conn_alloc(c->ssl_ctx, 1);
    if (!t)
        return NULL;
    t->client = c;
    t->server = (uint32_t)server;
    c->refs++;
    if (!SSL_set_ex_data(t->ssl, ex_index, t) || set_peer(t, host) < 0)
        goto fail;
    if (server < c->sess_len && c->sess[server]) {
        SSL_SESSION *s = c->sess[server];
        if (!SSL_SESSION_is_resumable(s)) {
            /* its connection ended without close_notify: OpenSSL marked it bad */
            SSL_SESSION_free(s);
            c->sess[server] = NULL;
        } else if (SSL_set_session(t->ssl, s) == 1 &&
                   SSL_SESSION_get_protocol_version(s) >= TLS1_3_VERSION) {
            /* RFC 8446 §C.4: a client SHOULD NOT reuse a ticket for multiple connections. */
            SSL_SESSION_free(s);
            c->sess[server] = NULL;
        }
    }
    ERR_clear_error();
    return t;
fail:
    ERR_clear_error();
    gw_tls_conn_del(t); /* drops the reference taken above */
    return NULL;
}

const char *gw_tls__client_verify_error(const gw_tls_conn_t *t)
{
    long vr = SSL_get_verify_result(t->ssl);
    if (SSL_get_verify_mode(t->ssl) == SSL_VERIFY_NONE || vr == X509_V_OK)
        return NULL;
    return X509_verify_cert_error_string(vr);
}
