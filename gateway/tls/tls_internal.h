/* tls/tls_internal.h — what the files of gateway/tls/ share (not a public interface).
 *
 * conn.c:   the connection of either role: our BIO over two byte buffers, feed, handshake,
 *           read, write, the output, shutdown, reasons and the negotiated parameters.
 * server.c: the server role: listener contexts (certificates by SNI, ALPN selection, ticket
 *           keys and their rotation) and the self-signed certificate of the demo config.
 * peer.c:   client certificates in the server role: a certificate entry's client_auth (CA,
 *           CRL, mode, depth, session id context), the verified chain a session keeps, and
 *           what a handshake made of the client's.
 * store.c:  the certificate store of an ACME listener: its certificate read at each
 *           ClientHello (each in a context of its own), the self-signed stand-in, the
 *           tls-alpn-01 answers.
 * client.c: the client role: upstream contexts (verification, ALPN, the session kept per
 *           server) and the host checks and SNI of each connection.
 */
#ifndef GW_TLS_INTERNAL_H
#define GW_TLS_INTERNAL_H

#include <openssl/ssl.h>

#include "common/buf.h"
#include "tls/tls.h"

struct gw_tls_conn {
    SSL *ssl;
    BIO *bio;                    /* owned by ssl, both directions: reads from in, appends to out */
    gw_bytes_t in;               /* ciphertext from the peer not read by OpenSSL yet (the
                                  * thread's buffer, lent while it holds bytes: conn.c) */
    size_t in_off;               /* how much of in OpenSSL has read */
    gw_bytes_t out;              /* ciphertext records not yet taken (the thread's buffer,
                                  * lent while it holds bytes: conn.c) */
    size_t out_off;              /* how much of out was already taken */
    gw_tls_client_ctx_t *client; /* client role: its context (one reference), else NULL */
    uint32_t server;             /* client role: the origin server's session slot */
    uint8_t no_host;             /* client role: verification on, nothing to verify against */
    char *reason;                /* why the last call failed (allocated), or NULL */
    char *peer_verify;           /* server role: "FAILED:..." once asked for (peer.c), or NULL */
    char *peer_subject;          /* server role: the client certificate's subject, or NULL */
};

/* A connection over ssl_ctx in the given role (client: connect state, else accept state), or
 * NULL when out of memory. */
gw_tls_conn_t *gw_tls__conn_alloc(SSL_CTX *ssl_ctx, int client);
/* Set t's reason: fmt, or OpenSSL's last error reason when fmt is NULL (fallback when there is
 * none). Clears OpenSSL's error queue. */
void gw_tls__set_reason(gw_tls_conn_t *t, const char *fallback, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* server.c: OpenSSL's reason for the last failure into dst (its error queue emptied). */
void gw_tls__ssl_reason(char *dst, size_t cap);
/* server.c: a file of a listener that cannot be used: into errs at `at` ("FILE:LINE:COL: ..."),
 * or logged as event (file=, reason=) when errs is NULL. */
void gw_tls__cert_failed(gw_config_errors_t *errs, const gw_cfg_pos_t *at, const char *event,
                         const char *file, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* peer.c: set up ctx for cert's client_auth (nothing for mode none): CA, CRL, verification
 * mode and depth, the session id context (also into sid[SSL_MAX_SID_CTX_LENGTH] and *sid_len
 * unless sid is NULL). 0, or -1 with what is wrong reported as gw_tls__cert_failed does. */
int gw_tls__client_auth_setup(SSL_CTX *ctx, const gw_cfg_tls_t *tls, const gw_cfg_cert_t *cert,
                              gw_config_errors_t *errs, unsigned char *sid, unsigned *sid_len);
/* peer.c: OpenSSL's decrypt_ticket callback (SSL_CTX_set_session_ticket_cb) of every server
 * context: a ticket whose session holds a client certificate resumes only with a well-formed
 * chain record; otherwise a full handshake (OpenSSL's own choice for the other statuses). */
SSL_TICKET_RETURN gw_tls__ticket_decrypted(SSL *ssl, SSL_SESSION *sess, const unsigned char *name,
                                           size_t name_len, SSL_TICKET_STATUS status, void *arg);
/* peer.c: whether rec (len bytes) is a well-formed chain record (a version byte, then per
 * intermediate a 3-byte length and one DER SEQUENCE of that length; at most 16 of them and
 * GW_TLS_CHAIN_RECORD_MAX bytes): 0, or -1. */
int gw_tls__chain_rec_check(const uint8_t *rec, size_t len);
/* peer.c: ctx (a stored certificate's, store.c) judges client certificates as from (the
 * listener's first context, set up by gw_tls__client_auth_setup) does: the same store (CA and
 * CRL, as loaded then, not read again), CA names, mode, depth and verification callbacks.
 * Nothing for mode none. 0, or -1 (no memory). */
int gw_tls__client_auth_share(SSL_CTX *ctx, SSL_CTX *from, const gw_cfg_cert_t *cert);
/* peer.c: ssl moved to ctx (SNI): take ctx's verification mode, depth and CRL check. */
void gw_tls__client_auth_apply(SSL *ssl, SSL_CTX *ctx);
/* store.c: the ClientHello callback of a context that serves from s (SSL_client_hello_cb_fn's
 * contract), and the ALPN choice for a connection it gave a challenge certificate (1 and
 * acme-tls/1 in *out, or 0: not such a connection). */
int gw_tls__store_hello(SSL *ssl, gw_tls_store_t *s, int *al);
/* server.c: a context with a listener's settings serving leaf, chain (may be NULL) and key,
 * taking references of its own; NULL on failure (logged). */
typedef SSL_CTX *gw_tls__ctx_maker(void *arg, X509 *leaf, STACK_OF(X509) * chain, EVP_PKEY *key);
/* store.c: the certificate s serves now and each one installed after are put in a context made
 * by make(arg, ...) (main loop only). make NULL ends arg's binding when it is still s's (a
 * listener context going away): handshakes then take the certificate itself. */
void gw_tls__store_bind(gw_tls_store_t *s, gw_tls__ctx_maker *make, void *arg);
int gw_tls__store_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen);
/* server.c: when pk is an EC key, a new one of the same key material that OpenSSL 3.0 signs on
 * its legacy path (an EC_KEY with a method of its own: no provider look-ups per handshake),
 * checked against cert unless it is NULL; NULL for any other key or on any failure (pk signs
 * as well). */
EVP_PKEY *gw_tls__legacy_ec_key(EVP_PKEY *pk, X509 *cert);
/* client.c: the verification failure of a client connection, or NULL. */
const char *gw_tls__client_verify_error(const gw_tls_conn_t *t);
/* client.c: drop the connection's reference on its client context. */
void gw_tls__client_ctx_unref(gw_tls_client_ctx_t *c);

#endif
