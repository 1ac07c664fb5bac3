/* acme/acme.h — the ACME client of the process (RFC 8555, RFC 8737): the certificates of the
 * listeners with tls.acme, obtained on the main loop and served through their stores
 * (tls/tls.h) without a reload.
 *
 * Life of a listener's certificate:
 *   start or reload  gw_acme_store_prepare(): the stored certificate when it is usable (it
 *                    covers every name and has not expired), else the stored certificate of
 *                    another name set covering most of the names, else a self-signed stand-in
 *                    for the names (logged as acme_waiting);
 *   the main loop    gw_acme_apply(): for each name set without a usable stored certificate,
 *                    an order (acme/order.h) over back/'s HTTP/1.1 + TLS client; tls-alpn-01
 *                    answered by the store, http-01 by the cleartext listeners from
 *                    common/http01.h's table (published before the challenge is submitted,
 *                    withdrawn when the order ends); the certificate's key of acme.key_type;
 *                    the chain and key written to the state folder, then
 *                    installed in the store (acme_certificate_installed);
 *   renewal          at a time picked in the server's window when it offers ARI (RFC 9773,
 *                    acme_ari_window), else at acme.renew_before (default: a third of the
 *                    lifetime left) (acme_renewal_due), a new order; the certificate in use
 *                    stays until the new one is installed;
 *   a failure        logged with the server's problem type and detail (acme_order_failed), the
 *                    challenges withdrawn, a new order after an exponential backoff with
 *                    jitter (GW_ACME_BACKOFF_*), the stand-in still served;
 *   the hourly cap   never more than acme.max_orders_per_hour orders of a name set in an hour
 *                    (acme_order_deferred), whatever the backoff says.
 * The state folder (acme.state, made 0700) holds account.key (0600; with a cluster, the
 * cluster's account from Redis, acme/shared.c) and one folder per name
 * set with cert.pem and key.pem (0600). Every request goes to the directory's origin: a URL
 * the server gives on another origin fails the order.
 */
#ifndef GW_ACME_ACME_H
#define GW_ACME_ACME_H

#include <stdatomic.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "config/config.h"
#include "tls/tls.h"

typedef struct gw_acme gw_acme_t;

/* The first wait after a failure, doubled at each failure in a row up to the last, each drawn
 * between half and all of it (jitter). */
#define GW_ACME_BACKOFF_FIRST_MS 2000u
#define GW_ACME_BACKOFF_MAX_MS 3600000u

/* The store a listener with tls.acme serves from, new, into *out: its stored certificate when
 * usable, else a self-signed one for its names. Run on the main thread when a generation is
 * built. 0, GW_E_IO (the state folder cannot be made: errs has why) or GW_E_NOMEM. */
int gw_acme_store_prepare(const gw_cfg_acme_t *acme, const gw_cfg_tls_t *tls,
                          gw_config_errors_t *errs, gw_tls_store_t **out);

/* A client on loop (the main loop), idle until gw_acme_apply(). 0 or GW_E_NOMEM. */
int gw_acme_new(uv_loop_t *loop, gw_acme_t **out);

/* What the client counts, for the metrics scrape: owned by the caller (the server), which
 * outlives the client, written by the client on the main loop and read from other threads. */
typedef struct {
    atomic_uint_fast64_t issued;           /* orders that ended with a certificate installed */
    atomic_uint_fast64_t failed;           /* orders that failed (each one backed off) */
    atomic_uint_fast64_t renewal_failures; /* of those, orders that were to replace a usable
                                              certificate */
} gw_acme_counters_t;

/* Count into c from now on (NULL: stop counting). */
void gw_acme_set_counters(gw_acme_t *a, gw_acme_counters_t *c);

/* Follow cfg: stores[i] is the store of cfg->listen[i] (NULL for a listener without
 * tls.acme). With the same acme section and the same name sets as before, the orders under
 * way go on and write into the new stores; otherwise they are cancelled and the name sets
 * without a usable stored certificate are ordered anew. */
void gw_acme_apply(gw_acme_t *a, const gw_config_t *cfg, gw_tls_store_t *const *stores);

/* The cluster whose instances share the certificates (acme/shared.c; with acme.shared_key):
 * set before gw_acme_apply and whenever the server replaces its cluster client, before it
 * closes the old one. NULL: none. */
void gw_acme_set_cluster(gw_acme_t *a, gw_cluster_t *c);

/* Cancel everything and free a once libuv has closed its handles (run the loop after). NULL
 * is ignored. */
void gw_acme_close(gw_acme_t *a);

#endif
