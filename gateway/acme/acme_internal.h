/* acme/acme_internal.h — what the files of gateway/acme/ share (not a public interface).
 *
 * jws.c:   base64url, the account key as a JWK and its thumbprint, key authorizations, the
 *          signed request bodies (JWS, ES256) and the CSR.
 * order.c: the state machine of one order, from the directory to the certificate chain.
 * shared.c: with `cluster:`, one certificate per name set for all instances: the lock under
 *          which one orders, the sealed chain and key in Redis, the shared challenges.
 * renew.c: when to order (renew.h): renew_before, ARI (RFC 9773), the hourly cap.
 */
#ifndef GW_ACME_INTERNAL_H
#define GW_ACME_INTERNAL_H

#include <stddef.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <uv.h>

#include "acme/order.h"
#include "cluster/cluster.h"

/* The prefix of the ACME error types (RFC 8555 §6.7). */
#define GW_ACME_ERR_PREFIX "urn:ietf:params:acme:error:"

/* s is non-empty and only of the base64url alphabet (RFC 4648 §5), no padding. */
int gw_acme__is_b64url(const char *s);

/* ---- shared.c: the certificates of a cluster's instances ------------------------------------
 *
 * The rules, per name set (ID: its folder's name in the state folder, the same on every
 * instance for the same names):
 * - An instance that needs a certificate (none usable, or its renewal is due) first reads the
 *   stored one (acme:cert:ID) and installs it when it is usable and not due (fresh). Else it
 *   takes the lock (SET NX PX GW_ACME_LOCK_MS with a random token): holding it, it orders,
 *   renewing it every third of its life; not holding it, it waits and reads again every
 *   GW_ACME_WAIT_POLL_MS (the certificate, else the lock: one let go or expired is taken).
 * - The ordering instance publishes each challenge (acme:challenges:ID, a hash of records
 *   TYPE\nNAME\nTOKEN\nKEY_AUTHZ) before it asks the server to validate, then waits
 *   GW_ACME_PUBLISH_WAIT_MS: every other instance reads the records every
 *   GW_ACME_CHALLENGE_POLL_MS while an order runs and installs them in its stores, so it has
 *   had two reads. An order runs while acme:orders is there: the orderer sets it when it takes
 *   the lock and again every GW_ACME_ANNOUNCE_MS, each time for GW_ACME_ORDERS_TTL_MS. The
 *   instances read that key every check interval, and the records only while it is
 *   there (or while they wait for another's lock): nothing else while idle. So the first
 *   publish of an order waits until that interval + GW_ACME_PUBLISH_WAIT_MS after the lock
 *   was taken, when an idle instance has seen the order and read the records twice. The
 *   interval is acme.cluster_check_interval (gw_acme__shared_set_check, default
 *   GW_ACME_ACTIVE_CHECK_MS), which may differ between instances: each declares its own in
 *   acme:checks (a hash, field: the interval in ms; value: until when, wall-clock ms; the
 *   field set again every GW_ACME_CHECKS_DECLARE_MS and at a reload, the hash kept for
 *   GW_ACME_CHECKS_TTL_MS), and the orderer reads it when it takes the lock and waits by the
 *   longest interval declared and still current, or its own when that is longer.
 * - The chain and key are stored sealed (AES-256-GCM under acme.shared_key; the head, the ID
 *   and the chain authenticated beside the key) before the lock is let go.
 * - One account: holding a lock, an instance reads acme:account (the account key sealed as a
 *   certificate's key is, id GW_ACME_ACCOUNT_ID) and orders with it; when there is none it
 *   stores its own. A value that does not open leaves it with its own account.
 * - Redis down or slow (a call fails, or no connection GW_ACME_CONNECT_GRACE_MS after the
 *   need arose): the instance orders alone, as without a cluster (acme_cluster_unavailable,
 *   once until a call works again).
 * - A stored value that does not open with our key: logged (acme_shared_unreadable), the
 *   instance orders for itself under the lock and never overwrites that value. */
#define GW_ACME_SHARED_KEY_LEN 32
#define GW_ACME_LOCK_MS 60000u
#define GW_ACME_WAIT_POLL_MS 2000u
#define GW_ACME_CHALLENGE_POLL_MS 1000u
#define GW_ACME_PUBLISH_WAIT_MS (2 * GW_ACME_CHALLENGE_POLL_MS + 500u)
#define GW_ACME_ACTIVE_CHECK_MS 10000u /* acme.cluster_check_interval's default */
#define GW_ACME_ANNOUNCE_MS 5000u      /* divides GW_ACME_LOCK_MS / 3 */
#define GW_ACME_ORDERS_TTL_MS (3 * GW_ACME_ANNOUNCE_MS)
#define GW_ACME_ORDERS_KEY "acme:orders"
#define GW_ACME_CHECKS_KEY "acme:checks"
#define GW_ACME_CHECKS_TTL_MS 3600000u
#define GW_ACME_CHECKS_DECLARE_MS 300000u
/* The account every instance orders with (sealed, gw_acme__seal with this id and no chain). */
#define GW_ACME_ACCOUNT_KEY "acme:account"
#define GW_ACME_ACCOUNT_ID "account"
#define GW_ACME_CHALLENGE_TTL_MS 600000u /* records left by a crashed orderer go */
#define GW_ACME_CHALLENGES_MAX 100       /* records installed from one read */
/* Redis not connected yet (at start): asked again every 250 ms this long, then alone. */
#define GW_ACME_CONNECT_GRACE_MS 3000u
/* The longest chain and key PEM sealed or opened (more than any real chain). */
#define GW_ACME_SHARED_MAX (64u * 1024)

/* The value stored for name set id: chain (clear, authenticated) and kpem (encrypted), in a
 * gw_malloc'd *out. 0, GW_E_RANGE (too long), GW_E_INVAL (OpenSSL failed) or GW_E_NOMEM. */
int gw_acme__seal(const uint8_t key[GW_ACME_SHARED_KEY_LEN], const char *id, const char *chain,
                  size_t cl, const char *kpem, size_t kl, uint8_t **out, size_t *out_len);
/* v[0..len) opened: gw_malloc'd NUL-ended *chain and *kpem (clear it before freeing). 0,
 * GW_E_PARSE (not the layout, or lengths past GW_ACME_SHARED_MAX), GW_E_INVAL (another key,
 * another id, or changed bytes: the tag does not match) or GW_E_NOMEM. */
int gw_acme__open(const uint8_t key[GW_ACME_SHARED_KEY_LEN], const char *id, const uint8_t *v,
                  size_t len, char **chain, size_t *cl, char **kpem, size_t *kl);
/* A challenge record {type, name, token, key_authz} into out: its length, or GW_E_RANGE. */
int gw_acme__challenge_record(const char *type, const char *name, const char *token,
                              const char *key_authz, char *out, size_t cap);
/* A record read back (bounded: type < 16, name <= 253, key_authz <= 512 printable bytes)
 * into type[16], name[254], key_authz[513]. 0 or GW_E_PARSE. */
int gw_acme__challenge_parse(const uint8_t *v, size_t len, char *type, char *name, char *key_authz);

/* The client's end: the cluster and the key (both may change at a reload). */
typedef struct gw_acme_shared gw_acme_shared_t;
int gw_acme__shared_new(uv_loop_t *loop, gw_acme_shared_t **out);
void gw_acme__shared_set_cluster(gw_acme_shared_t *h, gw_cluster_t *c); /* NULL: none */
void gw_acme__shared_set_key(gw_acme_shared_t *h, const uint8_t *key);  /* NULL: none */
/* How often acme:orders is read (ms, > 0; on the poll ticks, so rounded up to a multiple of
 * GW_ACME_CHALLENGE_POLL_MS), and what an order's first publish waits past the lock (that,
 * with GW_ACME_PUBLISH_WAIT_MS). A shorter one takes effect at once. */
void gw_acme__shared_set_check(gw_acme_shared_t *h, uint64_t ms);
void gw_acme__shared_del(gw_acme_shared_t *h); /* its memory waits for the last share */

/* One name set's end; ud is the client's job. */
typedef struct gw_acme_share gw_acme_share_t;
typedef struct {
    void (*order)(void *ud); /* order now: the lock is ours, or Redis cannot say */
    /* whether this chain and key serve every name and are not due for renewal */
    int (*fresh)(void *ud, const char *chain, size_t cl, const char *kpem, size_t kl);
    /* another instance's certificate: into the store and the state folder */
    void (*install)(void *ud, const char *chain, size_t cl, const char *kpem, size_t kl);
    /* another instance's challenge of type ("tls-alpn-01" or "http-01"; 0 when installed),
     * and all of them gone */
    int (*challenge)(void *ud, const char *type, const char *name, const char *key_authz);
    void (*clear)(void *ud);
    void (*resume)(void *ud); /* a publish was seen by the others (or could not be made) */
    /* the cluster's account key (PEM) to order with from now on: 0, or < 0 (not a P-256
     * key: the instance's own stays) */
    int (*account)(void *ud, const char *kpem, size_t kl);
    /* the instance's account key as PEM into a gw_malloc'd *pem (cleared and freed by the
     * caller), to store as the cluster's: 0 or < 0 */
    int (*account_pem)(void *ud, char **pem, size_t *len);
} gw_acme_share_cbs_t;
int gw_acme__share_new(gw_acme_shared_t *hub, const char *id, const gw_acme_share_cbs_t *cbs,
                       void *ud, gw_acme_share_t **out);
/* A certificate is needed: the stored one, or an order (cbs->order) under the lock. */
void gw_acme__share_want(gw_acme_share_t *s);
/* The order's challenge: 0 and cbs->resume later, or < 0 (not shared: resume now). */
int gw_acme__share_publish(gw_acme_share_t *s, const char *type, const char *name,
                           const char *token, const char *key_authz);
/* The order ended: stored (sealed) and the lock let go; or failed (the lock kept for most of
 * the backoff). */
void gw_acme__share_done(gw_acme_share_t *s, const char *chain, size_t cl, EVP_PKEY *key);
void gw_acme__share_failed(gw_acme_share_t *s, uint64_t retry_in_ms);
/* Lets the lock go; the memory goes once the calls under way have answered. NULL ignored. */
void gw_acme__share_close(gw_acme_share_t *s);

#endif
