/* back/tls.h — client-side TLS to HTTPS origins, as a sans-IO module: bytes in, bytes out, over
 * OpenSSL memory BIOs. No sockets and no event loop here: back/conn.c feeds the ciphertext it
 * reads with gw_back_tls_feed(), drives gw_back_tls_handshake(), reads plaintext with
 * gw_back_tls_read(), encrypts with gw_back_tls_write(), and sends what gw_back_tls_take_out()
 * hands it. The module is independent of front/tls (the server side): back/ never depends on
 * front/.
 *
 * What a connection checks (upstream `tls: true`):
 * - TLS 1.2 or later (RFC 8996 deprecates 1.0 and 1.1); ALPN offer "http/1.1" (RFC 7301);
 * - with `tls_verify` (the default) the chain is verified against `tls_ca`, or the system
 *   default store when `tls_ca` is unset, and the certificate must match the server's host:
 *   a DNS name against subjectAltName dNSName entries (RFC 6125 §6.4; no partial wildcards), an
 *   IP literal against iPAddress entries (RFC 6125 §1.7.2: never against a DNS name);
 * - SNI (RFC 6066 §3) carries the server's host name; never for an IP literal (§3: "Literal
 *   IPv4 and IPv6 addresses are not permitted in HostName").
 *
 * Session resumption: each context keeps one session per server (the index given to
 * gw_back_tls_new()). A TLS 1.3 ticket is used once (RFC 8446 §C.4); a TLS 1.2 session stays
 * until a newer one replaces it. A connection deleted after its handshake without
 * gw_back_tls_shutdown() (it failed) makes its session unusable: OpenSSL marks the session
 * of a connection that did not end cleanly as not resumable, and it is dropped.
 * Contexts belong to one worker: nothing here is locked.
 */
#ifndef GW_BACK_TLS_H
#define GW_BACK_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "config/config.h"

typedef struct gw_back_tls_ctx gw_back_tls_ctx_t; /* one per TLS upstream and worker */
typedef struct gw_back_tls gw_back_tls_t;         /* one per origin connection */

/* Build the client context of upstream `u` (u->tls set): verification mode, CA file or system
 * store, minimum version, ALPN, a session slot per server of `u`. `u` must outlive the context.
 * Returns 0 and *out, GW_E_INVAL (tls_ca cannot be loaded; logged with OpenSSL's reason) or
 * GW_E_NOMEM. */
int gw_back_tls_ctx_new(const gw_cfg_upstream_t *u, gw_back_tls_ctx_t **out);
/* Drop the creator's reference. Connections made from the context keep it alive until they
 * are deleted, so it may be called while some are still closing. NULL is ignored. */
void gw_back_tls_ctx_del(gw_back_tls_ctx_t *c);

/* A client connection to server `server` (index into u->servers, < u->servers_len) whose
 * certificate must match `host` (a DNS name, or an IPv4/IPv6 literal without brackets; copied).
 * With verification on, a NULL or empty host fails the handshake. A cached session of that
 * server is offered. Returns NULL when out of memory. */
gw_back_tls_t *gw_back_tls_new(gw_back_tls_ctx_t *c, size_t server, const char *host);
void gw_back_tls_del(gw_back_tls_t *t);

/* Ciphertext read from the origin (copied). 0 or GW_E_NOMEM. */
int gw_back_tls_feed(gw_back_tls_t *t, const void *p, size_t n);
/* Drive the handshake: 1 when complete, 0 when it needs more input (send what
 * gw_back_tls_take_out() holds first), GW_E_PROTO on failure: gw_back_tls_reason() says why,
 * and an alert for the origin may be waiting in the output. */
int gw_back_tls_handshake(gw_back_tls_t *t);
/* Plaintext of the response into buf[0..cap): bytes read (> 0), GW_E_AGAIN when no whole
 * record is buffered (post-handshake messages such as TLS 1.3 tickets are consumed here),
 * GW_E_CLOSED on the origin's close_notify, GW_E_PROTO on a TLS error (reason set). */
ssize_t gw_back_tls_read(gw_back_tls_t *t, void *buf, size_t cap);
/* Encrypt p[0..n) into the output (after the handshake). 0 or GW_E_PROTO (reason set). */
int gw_back_tls_write(gw_back_tls_t *t, const void *p, size_t n);
/* Ciphertext waiting to be sent, and a copy of up to cap bytes of it out (returns how many;
 * they leave the output). */
size_t gw_back_tls_pending_out(const gw_back_tls_t *t);
size_t gw_back_tls_take_out(gw_back_tls_t *t, void *buf, size_t cap);
/* Queue a close_notify (RFC 8446 §6.1) when the handshake completed; no-op otherwise. */
void gw_back_tls_shutdown(gw_back_tls_t *t);

/* Why the handshake, a read or a write failed, e.g. "certificate verify failed: hostname
 * mismatch" or "wrong version number"; "" when nothing failed. Valid until gw_back_tls_del. */
const char *gw_back_tls_reason(const gw_back_tls_t *t);
/* After the handshake: "TLSv1.3", the ALPN protocol ("" when the origin chose none), whether
 * the session was resumed (1/0), and the cipher's name. */
const char *gw_back_tls_version(const gw_back_tls_t *t);
const char *gw_back_tls_alpn(const gw_back_tls_t *t);
int gw_back_tls_resumed(const gw_back_tls_t *t);
const char *gw_back_tls_cipher(const gw_back_tls_t *t);

#endif
