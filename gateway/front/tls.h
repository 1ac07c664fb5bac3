/* front/tls.h — TLS termination as a sans-IO module: bytes in, bytes out, over OpenSSL memory
 * BIOs. The connection glue feeds ciphertext read from the socket with gw_tls_feed(), reads
 * plaintext with gw_tls_read(), writes plaintext with gw_tls_write(), and sends whatever
 * gw_tls_pending_out() holds. No sockets, no event loop here. */
#ifndef GW_FRONT_TLS_H
#define GW_FRONT_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/types.h>

#include "config/config.h"

typedef struct gw_tls_ctx gw_tls_ctx_t; /* per listener, shared read-only by workers */
typedef struct gw_tls_conn gw_tls_conn_t;

/* Build the context of a TLS listener: certificates (SNI choice: exact names, then "*.suffix",
 * then certs[0]), versions, ciphers, ALPN offer `alpn` (wire format, e.g. "\x08http/1.1").
 * Generates the self-signed pair first when tls->self_signed and both files are missing.
 * Logs the failing file and OpenSSL's reason; returns 0 or GW_E_INVAL / GW_E_IO / GW_E_NOMEM. */
int gw_tls_ctx_new(const gw_cfg_tls_t *tls, const unsigned char *alpn, size_t alpn_len,
                   gw_tls_ctx_t **out);
void gw_tls_ctx_del(gw_tls_ctx_t *c);

gw_tls_conn_t *gw_tls_conn_new(gw_tls_ctx_t *c);
void gw_tls_conn_del(gw_tls_conn_t *t);

/* Ciphertext from the peer. 0 or GW_E_NOMEM. */
int gw_tls_feed(gw_tls_conn_t *t, const void *p, size_t n);
/* Drive the handshake: 1 when complete, 0 when more input is needed, GW_E_PROTO on failure. */
int gw_tls_handshake(gw_tls_conn_t *t);
/* Plaintext: bytes read (> 0), 0 when none are available now, GW_E_CLOSED on close_notify,
 * GW_E_PROTO on a TLS error. */
ssize_t gw_tls_read(gw_tls_conn_t *t, void *buf, size_t cap);
/* Non-zero when a gw_tls_read() now would find nothing: OpenSSL has read every byte fed and
 * holds no record data, processed or not (SSL_has_pending). Lets a read loop stop without the
 * call that fails with "want read". */
int gw_tls_drained(gw_tls_conn_t *t);
/* Encrypt plaintext; 0 or GW_E_PROTO. */
int gw_tls_write(gw_tls_conn_t *t, const void *p, size_t n);
/* Encrypt the pieces in order, small neighbours gathered into one record. 0 or GW_E_PROTO. */
int gw_tls_writev(gw_tls_conn_t *t, const struct iovec *v, size_t cnt);
/* Ciphertext waiting to be sent: copy up to cap bytes out, returns how many. */
size_t gw_tls_take_out(gw_tls_conn_t *t, void *buf, size_t cap);
size_t gw_tls_pending_out(gw_tls_conn_t *t);
/* Zero-copy view of the pending ciphertext (valid until the next TLS call on t), and how much
 * of it was sent. */
const uint8_t *gw_tls_out_peek(gw_tls_conn_t *t, size_t *len);
void gw_tls_out_consume(gw_tls_conn_t *t, size_t n);
/* Idle connection: give back the memory the empty ciphertext buffers grew to (no-op while
 * either holds bytes; an allocation failure just keeps the old buffers). */
void gw_tls_trim(gw_tls_conn_t *t);
/* Queue a close_notify. */
void gw_tls_shutdown(gw_tls_conn_t *t);

/* After the handshake: the ALPN protocol ("h2", "http/1.1", or "" if none), the TLS version
 * and the SNI name sent (or NULL). */
const char *gw_tls_alpn(gw_tls_conn_t *t);
const char *gw_tls_version(gw_tls_conn_t *t);
const char *gw_tls_sni(gw_tls_conn_t *t);

/* RFC 9113 §9.2.2: HTTP/2 over TLS 1.2 needs an ephemeral key exchange and an AEAD cipher.
 * Non-zero when the negotiated parameters allow HTTP/2 (always for TLS 1.3). */
int gw_tls_h2_cipher_ok(gw_tls_conn_t *t);
/* The negotiated cipher's name, for logs. */
const char *gw_tls_cipher(gw_tls_conn_t *t);

/* Tests only: the millisecond clock of ticket key rotation (NULL: CLOCK_MONOTONIC again). */
void gw_tls__set_clock(uint64_t (*now_ms)(void));

/* Generate a self-signed P-256 certificate for localhost / 127.0.0.1 / ::1 into cert_path and
 * key_path (key file mode 0600, parent directory created). 0 or GW_E_IO. */
int gw_tls_make_self_signed(const char *cert_path, const char *key_path);

#endif
