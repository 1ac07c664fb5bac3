/* tls/tls.h — TLS for both ends of the gateway as one sans-IO module: bytes in, bytes out, over
 * OpenSSL 3 with a BIO of our own. No sockets and no event loop here: the connection glue
 * (front/ for clients, back/ for origins) feeds the ciphertext it reads with gw_tls_feed(),
 * drives gw_tls_handshake(), reads plaintext with gw_tls_read(), encrypts with gw_tls_write()
 * or gw_tls_writev(), and sends what gw_tls_out_peek() / gw_tls_take_out() hand it.
 *
 * Two roles, one connection object and one contract:
 * - server (front/): a context per listener, shared read-only by the workers: certificates
 *   chosen by SNI, versions, ciphers, ALPN, session tickets with rotating keys;
 * - client (back/): a context per TLS upstream and worker: verification of the origin's
 *   certificate against its host (RFC 6125), SNI (RFC 6066 §3), ALPN "http/1.1", TLS 1.2 or
 *   later (RFC 8996), one resumable session kept per server (a TLS 1.3 ticket used once,
 *   RFC 8446 §C.4). A connection deleted after its handshake without gw_tls_shutdown() (it
 *   failed) makes its session unusable. Client contexts belong to one worker: nothing locked.
 */
#ifndef GW_TLS_TLS_H
#define GW_TLS_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "config/config.h"

typedef struct gw_tls_ctx gw_tls_ctx_t;               /* server: per listener */
typedef struct gw_tls_client_ctx gw_tls_client_ctx_t; /* client: per TLS upstream and worker */
typedef struct gw_tls_conn gw_tls_conn_t;             /* one connection, either role */

/* ---- process set-up (conn.c) ------------------------------------------------------------ */

/* Before anything else uses OpenSSL (first thing in main): OpenSSL's allocations go through
 * the gateway's functions, which keep a few of the record buffers a connection takes and gives
 * back per record (SSL_MODE_RELEASE_BUFFERS) per thread instead of handing them to glibc each
 * time. Once OpenSSL has allocated anything it is too late: OpenSSL's own functions then serve,
 * as without the call. */
void gw_tls_alloc_init(void);

/* ---- server role (server.c) ------------------------------------------------------------- */

/* Build the context of a TLS listener: certificates (SNI choice: exact names, then "*.suffix",
 * then certs[0]), versions, ciphers, ALPN offer `alpn` (wire format, e.g. "\x08http/1.1").
 * Generates the self-signed pair first when tls->self_signed and both files are missing.
 * Returns 0 or GW_E_INVAL / GW_E_IO / GW_E_NOMEM. What is wrong (a file that cannot be read,
 * holds the other kind of PEM or is refused, a key that does not match its certificate, a
 * cipher list OpenSSL refuses) is appended to errs as "FILE:LINE:COL: message" at the key
 * that names it, e.g. "gw.yaml:7:12: key 'k.pem' does not match certificate 'c.pem'"; with
 * errs NULL it is logged (event=tls_key_mismatch file=... reason=...). */
int gw_tls_ctx_new(const gw_cfg_tls_t *tls, const unsigned char *alpn, size_t alpn_len,
                   gw_config_errors_t *errs, gw_tls_ctx_t **out);
/* What gw_tls_ctx_new would load for tls, loaded by the same code and freed (`h2gate -t`):
 * every certificate/key pair (chain, key, that they match), cipher lists. Nothing is created:
 * a pair tls->self_signed would generate (both files missing) is skipped. Every pair is
 * checked; each failure is appended to errs as gw_tls_ctx_new does. 0 or GW_E_INVAL. */
int gw_tls_ctx_check(const gw_cfg_tls_t *tls, gw_config_errors_t *errs);
void gw_tls_ctx_del(gw_tls_ctx_t *c);
/* A server connection of listener context c. NULL when out of memory. */
gw_tls_conn_t *gw_tls_conn_new(gw_tls_ctx_t *c);

/* ---- the certificate store of an ACME listener (store.c) ---------------------------------- */

/* What a listener with tls.acme serves, read at each ClientHello: its current certificate (a
 * self-signed stand-in until the ACME client installs one; a new one reaches new handshakes,
 * connections already up keep theirs) and the tls-alpn-01 answers (RFC 8737 §3: to a
 * ClientHello that offers ALPN acme-tls/1 for a name with a pending challenge, that name's
 * challenge certificate and acme-tls/1; for a name without one, the handshake fails).
 * Reference-counted, thread-safe: the workers' handshakes read it, the main loop writes. */
typedef struct gw_tls_store gw_tls_store_t;
int gw_tls_store_new(gw_tls_store_t **out); /* 0 or GW_E_NOMEM; one reference */
void gw_tls_store_ref(gw_tls_store_t *s);
void gw_tls_store_unref(gw_tls_store_t *s); /* NULL ignored */
/* The names of a certificate or a request for names[0..n) (n > 0): names[0] as subj's CN when
 * it fits (64 characters), and every name as a DNS subjectAltName in the extension returned
 * (the caller adds and frees it); NULL on failure. */
struct X509_name_st;      /* OpenSSL's X509_NAME */
struct X509_extension_st; /* OpenSSL's X509_EXTENSION */
struct X509_extension_st *gw_tls_names_ext(struct X509_name_st *subj, const char *const *names,
                                           size_t n);
/* Serve a self-signed certificate for names[0..n) (P-256, 30 days) from now. 0, GW_E_INVAL (no
 * name) or GW_E_NOMEM. */
int gw_tls_store_set_self_signed(gw_tls_store_t *s, const char *const *names, size_t n);
/* Serve the PEM chain (leaf first, then intermediates) with the PEM key from now. 0 or
 * GW_E_PARSE (no certificate, no key, or a key that does not match the leaf). */
int gw_tls_store_set_pem(gw_tls_store_t *s, const char *chain, size_t chain_len, const char *key,
                         size_t key_len);
/* Whether a stored chain and key can serve names[0..n) at unix time now: 0 and the leaf's
 * notBefore and notAfter (unix times) in *not_before, *not_after; GW_E_PARSE (unreadable, key
 * mismatch), GW_E_RANGE (expired) or GW_E_NOENT (a name not covered). */
int gw_tls_pem_usable(const char *chain, size_t chain_len, const char *key, size_t key_len,
                      const char *const *names, size_t n, int64_t now, int64_t *not_before,
                      int64_t *not_after);
/* Answer tls-alpn-01 for name with a certificate carrying digest (the SHA-256 of the key
 * authorization) in its acmeIdentifier extension; replaces the name's previous one. 0 or
 * GW_E_NOMEM. */
int gw_tls_store_set_challenge(gw_tls_store_t *s, const char *name, const uint8_t digest[32]);
void gw_tls_store_clear_challenges(gw_tls_store_t *s);
/* The notAfter (unix time) of the certificate s serves now (the stand-in's too) into *out,
 * for the metrics; any thread. 0, or GW_E_NOENT (nothing served yet). */
int gw_tls_store_not_after(gw_tls_store_t *s, int64_t *out);
/* The listener context c serves from s (a reference is taken, dropped with c): each
 * certificate s takes, now and later, is put in a context of c's settings, made once (on the
 * thread that installs it). c must have been built from a tls with acme names (certs[0]
 * without files), and that tls must outlive c. */
void gw_tls_ctx_set_store(gw_tls_ctx_t *c, gw_tls_store_t *s);

/* A ring of session ticket keys that listener contexts share, filled from outside (the cluster
 * module keeps it equal to the keys in Redis, so every instance resumes every other's
 * sessions). While it holds keys, a context given it encrypts tickets with its first key and
 * decrypts with any, and does not rotate its own; while it is empty the context's own rotating
 * keys serve. A listener's tls.ticket_keys file still comes first. Thread-safe; it must outlive
 * the contexts given it. */
typedef struct gw_tls_keyring gw_tls_keyring_t;
#define GW_TLS_KEY_LEN 80 /* a key: name 16 bytes, AES-256 key 32, HMAC-SHA256 key 32 */
#define GW_TLS_KEYRING_MAX 4
int gw_tls_keyring_new(gw_tls_keyring_t **out);
void gw_tls_keyring_del(gw_tls_keyring_t *r);
/* Replace the ring's keys with n (0..GW_TLS_KEYRING_MAX) keys of GW_TLS_KEY_LEN bytes, the first
 * the one that encrypts. 0, or GW_E_INVAL for too many. */
int gw_tls_keyring_set(gw_tls_keyring_t *r, const uint8_t *keys, size_t n);
/* Give context c the ring (NULL: none) before it serves a connection. */
void gw_tls_ctx_set_keyring(gw_tls_ctx_t *c, gw_tls_keyring_t *r);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* The number of keys in the ring now. */
size_t gw_tls_keyring_len(gw_tls_keyring_t *r);
/* The millisecond clock of ticket key rotation (NULL: CLOCK_MONOTONIC again). */
void gw_tls__set_clock(uint64_t (*now_ms)(void));
/* This thread's record buffers of gw_tls_alloc_init so far: served from the thread's stack
 * (*hits) or newly allocated (*misses). */
void gw_tls__recbuf_stats(unsigned long *hits, unsigned long *misses);
/* This thread's OpenSSL frees of a block (not NULL) so far (*frees), and how many of them
 * asked glibc for the block's size to tell whether it is a record buffer (*sized). */
void gw_tls__free_stats(unsigned long *frees, unsigned long *sized);
#endif
/* Generate a self-signed P-256 certificate for localhost / 127.0.0.1 / ::1 into cert_path and
 * key_path (key file mode 0600, parent directory created). 0 or GW_E_IO. */
int gw_tls_make_self_signed(const char *cert_path, const char *key_path);

/* ---- client role (client.c) ------------------------------------------------------------- */

/* Build the client context of upstream `u` (u->tls set): verification mode, CA file or system
 * store, minimum version, ALPN, a session slot per server of `u`. `u` must outlive the context.
 * Returns 0 and *out, GW_E_INVAL (tls_ca cannot be loaded; logged with OpenSSL's reason) or
 * GW_E_NOMEM. */
int gw_tls_client_ctx_new(const gw_cfg_upstream_t *u, gw_tls_client_ctx_t **out);
/* What gw_tls_client_ctx_new would load for u, loaded by the same code and freed: its tls_ca
 * (or the system store) when it verifies. The main thread runs it before the workers build
 * their contexts (start-up, reload) and `h2gate -t` runs it. 0, or GW_E_INVAL / GW_E_NOMEM
 * with the failure appended to errs as "FILE:LINE:COL: tls_ca '...' of upstream '...' cannot
 * be loaded: REASON" (at tls_ca's position). */
int gw_tls_client_ctx_check(const gw_cfg_upstream_t *u, gw_config_errors_t *errs);
/* Drop the creator's reference. Connections made from the context keep it alive until they
 * are deleted, so it may be called while some are still closing. NULL is ignored. */
void gw_tls_client_ctx_del(gw_tls_client_ctx_t *c);
/* A client connection to server `server` (index into u->servers, < u->servers_len) whose
 * certificate must match `host` (a DNS name, or an IPv4/IPv6 literal without brackets; copied).
 * With verification on, a NULL or empty host fails the handshake. A cached session of that
 * server is offered. Returns NULL when out of memory. */
gw_tls_conn_t *gw_tls_client_new(gw_tls_client_ctx_t *c, size_t server, const char *host);

/* ---- one connection, either role (conn.c) ----------------------------------------------- */

void gw_tls_conn_del(gw_tls_conn_t *t);
/* Ciphertext from the peer (copied). 0 or GW_E_NOMEM. */
int gw_tls_feed(gw_tls_conn_t *t, const void *p, size_t n);
/* Drive the handshake: 1 when complete, 0 when it needs more input (send what the output
 * holds first), GW_E_PROTO on failure: gw_tls_reason() says why, and an alert for the peer
 * may be waiting in the output. */
int gw_tls_handshake(gw_tls_conn_t *t);
/* Plaintext into buf[0..cap): bytes read (> 0), GW_E_AGAIN when no whole record is buffered
 * (post-handshake messages such as TLS 1.3 tickets are consumed here), GW_E_CLOSED on the
 * peer's close_notify, GW_E_PROTO on a TLS error (reason set). */
ssize_t gw_tls_read(gw_tls_conn_t *t, void *buf, size_t cap);
/* Non-zero when a gw_tls_read() now would find nothing: OpenSSL has read every byte fed and
 * holds no record data, processed or not (SSL_has_pending). Lets a read loop stop without the
 * call that fails with "want read". */
int gw_tls_drained(const gw_tls_conn_t *t);
/* Encrypt p[0..n) into the output (after the handshake). 0 or GW_E_PROTO (reason set). */
int gw_tls_write(gw_tls_conn_t *t, const void *p, size_t n);
/* Encrypt the pieces in order as one byte stream cut into full records (16 KiB of plaintext;
 * the last one what is left): a piece does not start a record of its own. 0 or GW_E_PROTO. */
int gw_tls_writev(gw_tls_conn_t *t, const struct iovec *v, size_t cnt);
/* Ciphertext waiting to be sent; a copy of up to cap bytes of it out (returns how many; they
 * leave the output); or a zero-copy view of it (valid until the next TLS call on t, and no
 * longer once all of it is consumed: the emptied buffer goes back to the thread, for the next
 * connection that writes) and how much of it was sent. */
size_t gw_tls_pending_out(const gw_tls_conn_t *t);
size_t gw_tls_take_out(gw_tls_conn_t *t, void *buf, size_t cap);
/* The pending output handed over without a copy: the buffer that holds it becomes the
 * caller's (returned; the bytes are at base + *off, *len of them, *cap the buffer's size) until
 * gw_tls_out_release(), and t writes its next records elsewhere. NULL when nothing is pending.
 * For a write that outlives the call: the socket did not take all of it. */
void *gw_tls_out_hand_over(gw_tls_conn_t *t, size_t *off, size_t *len, size_t *cap);
/* A buffer of gw_tls_out_hand_over() once written: the thread keeps it for the next
 * connection that writes (as if its connection had sent it all) unless it keeps a larger one;
 * else it is freed. */
void gw_tls_out_release(void *base, size_t cap);

const uint8_t *gw_tls_out_peek(const gw_tls_conn_t *t, size_t *len);
void gw_tls_out_consume(gw_tls_conn_t *t, size_t n);
/* Idle connection: give back the memory the empty ciphertext buffers grew to (no-op while
 * either holds bytes; an allocation failure just keeps the old buffers). */
void gw_tls_trim(gw_tls_conn_t *t);
/* Queue a close_notify (RFC 8446 §6.1) when the handshake completed; no-op otherwise. */
void gw_tls_shutdown(gw_tls_conn_t *t);

/* Why the handshake, a read or a write failed, e.g. "certificate verify failed: hostname
 * mismatch" or "wrong version number"; "" when nothing failed. Valid until the next call. */
const char *gw_tls_reason(const gw_tls_conn_t *t);
/* After the handshake: the ALPN protocol ("h2", "http/1.1", or "" if none), the TLS version
 * ("TLSv1.3"), the cipher's name ("-" before), whether the session was resumed (1/0), and
 * (server role) the SNI name the client sent, or NULL. */
const char *gw_tls_alpn(const gw_tls_conn_t *t);
const char *gw_tls_version(const gw_tls_conn_t *t);
const char *gw_tls_cipher(const gw_tls_conn_t *t);
int gw_tls_resumed(const gw_tls_conn_t *t);
const char *gw_tls_sni(const gw_tls_conn_t *t);
/* Whether a request for authority[0..len) (host[:port]) on server connection t must be answered 421
 * Misdirected Request (RFC 9110 §15.5.20): its host's certificate entry is not the one the
 * handshake chose by SNI, and either of them asks for client certificates (client_auth). The
 * connection's verification is its entry's (CA, mode, depth, CRL): a certificate verified
 * for another name's entry must not stand for a client of this one. 0 in the client role. */
int gw_tls_misdirected(const gw_tls_conn_t *t, const uint8_t *authority, size_t len);
/* ---- client certificates, server role (peer.c) -------------------------------------------- */

/* After the handshake (or its failure) of a server connection. Whether its certificate entry
 * asked for a client certificate (client_auth mode optional or require); 0 in the client role. */
int gw_tls_client_asked(const gw_tls_conn_t *t);
/* Whether the client sent a certificate that verified (a resumed session: the one it verified
 * then, kept in the session). */
int gw_tls_client_verified(const gw_tls_conn_t *t);
/* "SUCCESS", "FAILED:reason" (OpenSSL's, e.g. "FAILED:certificate has expired"; only under
 * mode optional, or after a failed handshake) or "NONE" (none sent, or none asked for). Valid
 * as long as t. */
const char *gw_tls_client_verify(gw_tls_conn_t *t);
/* The client certificate's subject as RFC 4514 text (ASCII: other bytes escaped), "" when
 * none. Valid as long as t. */
const char *gw_tls_client_subject(gw_tls_conn_t *t);
/* The DER of certificate i of a verified client: 0 the leaf, 1.. the intermediates of the
 * verification's chain (not the trust anchor). A resumed session gives the same: the session
 * (its ticket) keeps them, at most GW_TLS_CHAIN_RECORD_MAX bytes in all; a session whose chain
 * is longer is not resumed. 1 with *der (allocated: gw_free) and *len; 0 when there is no such
 * certificate; GW_E_NOMEM. */
int gw_tls_client_der(const gw_tls_conn_t *t, size_t i, uint8_t **der, size_t *len);
/* The bytes of a client certificate's intermediates that a session keeps (their DER, 3 bytes
 * each more, 1 in all more); config/README.md says it. */
#define GW_TLS_CHAIN_RECORD_MAX 8192

/* For the metric: "success", "failed" or "none" when a certificate was asked for, else NULL. */
const char *gw_tls_client_result(const gw_tls_conn_t *t);

/* RFC 9113 §9.2.2: HTTP/2 over TLS 1.2 needs an ephemeral key exchange and an AEAD cipher.
 * Non-zero when the negotiated parameters allow HTTP/2 (always for TLS 1.3). */
int gw_tls_h2_cipher_ok(const gw_tls_conn_t *t);

#endif
