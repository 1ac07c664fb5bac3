/* acme/renew.h — when to order, without I/O: the renewal time of a certificate (acme.renew_before
 * or a third of its lifetime), ACME Renewal Information (ARI, RFC 9773: the certificate's
 * identifier, the server's window and the time picked in it, when to ask again) and the hourly
 * cap on orders. Nothing here reads a clock or draws a random number: the driver (client.c)
 * passes them in, so that every rule is tested with scripted answers (tests/unit/test_acme.c).
 * Seen by the folder and its unit tests only. */
#ifndef GW_ACME_RENEW_H
#define GW_ACME_RENEW_H

#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

/* ---- renew_before ------------------------------------------------------------------------ */

/* When to renew a certificate valid from not_before to not_after (unix seconds):
 *   before_ms > 0   not_after - before_ms (a duration of the configuration);
 *   before_pct > 0  with before_pct % of the lifetime left;
 *   neither         with a third of the lifetime left (Let's Encrypt's advice: 30 days before
 *                   the end of a 90-day certificate).
 * A duration as long as the lifetime or longer cannot be honoured (the certificate would be
 * due as soon as issued, and every new one too): then at half the lifetime, and *halved is set
 * (the driver logs it). halved may be NULL. */
int64_t gw_acme_renew_at(int64_t not_before, int64_t not_after, uint64_t before_ms,
                         unsigned before_pct, int *halved);

/* ---- ARI (RFC 9773) ---------------------------------------------------------------------- */

/* The longest certID: base64url of a 20-byte-or-so key identifier and a serial of at most
 * 20 octets (RFC 5280 §4.1.2.2), with room to spare. */
#define GW_ACME_ARI_MAX_ID 256
/* Retry-After of a renewalInfo answer taken between a minute and a day; absent or unreadable
 * (RFC 9773 §4.3: clients set reasonable limits), and after an error, six hours. */
#define GW_ACME_ARI_RETRY_MIN_S 60
#define GW_ACME_ARI_RETRY_MAX_S 86400
#define GW_ACME_ARI_RETRY_DEFAULT_S 21600

/* The certificate identifier of leaf (RFC 9773 §4.1): base64url of the keyIdentifier of its
 * Authority Key Identifier extension, ".", base64url of its serial number's DER content octets
 * (the INTEGER's value without tag and length, so a leading 0x00 stays), into out
 * (GW_ACME_ARI_MAX_ID bytes). 0, GW_E_NOENT (no AKI keyIdentifier: ARI cannot name it) or
 * GW_E_RANGE. */
int gw_acme_ari_cert_id(X509 *leaf, char out[GW_ACME_ARI_MAX_ID]);

/* The renewalInfo URL of a directory (RFC 9773 §4: its "renewalInfo" member) into a gw_malloc'd
 * *out. 0, GW_E_NOENT (the server offers no ARI), GW_E_PARSE (not a JSON object, or the member
 * is not an http(s) URL) or GW_E_NOMEM. */
int gw_acme_ari_directory(const uint8_t *body, size_t len, char **out);

/* A renewalInfo answer (RFC 9773 §4.2). */
typedef struct {
    int64_t start, end;    /* suggestedWindow, unix seconds; end > start */
    uint64_t retry_s;      /* when to ask again, seconds from now (bounded, see above) */
    char explanation[256]; /* explanationURL, or empty: for the log */
} gw_acme_ari_t;

/* The answer's JSON body and Retry-After field (NULL: absent) read at unix time now into *out.
 * 0, or GW_E_PARSE (not a JSON object, no suggestedWindow, a time that is not RFC 3339, an end
 * not after its start): the driver falls back to renew_before. */
int gw_acme_ari_parse(const uint8_t *body, size_t len, const char *retry_after, int64_t now,
                      gw_acme_ari_t *out);

/* A time drawn uniformly in [start, end) from random (RFC 9773 §4.2: spreads the renewals of
 * many clients over the window). */
int64_t gw_acme_ari_pick(const gw_acme_ari_t *w, uint64_t random);

/* An RFC 3339 date-time ("2025-01-02T04:00:00Z", "…T04:00:00.5+01:00"; §5.6) as unix seconds
 * (fractions dropped) into *out. 0 or GW_E_PARSE. */
int gw_acme_rfc3339(const char *s, int64_t *out);

/* ---- the hourly cap ---------------------------------------------------------------------- */

/* The most orders a name set may start in an hour (acme.max_orders_per_hour's bound). */
#define GW_ACME_MAX_ORDERS_PER_HOUR 60

/* The orders of a name set the server saw lately (their newOrder, unix ms): a ring of the last
 * GW_ACME_MAX_ORDERS_PER_HOUR. */
typedef struct {
    int64_t at[GW_ACME_MAX_ORDERS_PER_HOUR];
    size_t n, next;
} gw_acme_starts_t;

/* The earliest time (ms, >= now) at which one more order may start with never more than max
 * (1..GW_ACME_MAX_ORDERS_PER_HOUR) in any hour: now when fewer than max were made in the hour
 * before now, else an hour after the oldest of the last max. A time after now (the clock was
 * set back) counts as now, so that the wait is never longer than an hour. */
int64_t gw_acme_cap_next(const gw_acme_starts_t *s, unsigned max, int64_t now_ms);

/* An order made at now_ms. */
void gw_acme_cap_record(gw_acme_starts_t *s, int64_t now_ms);

/* The ring as text, one time per line, oldest first, into out (cap bytes, NUL-terminated):
 * what the state folder keeps so that a restart keeps the count. Returns the length, or 0 when
 * it does not fit (GW_ACME_CAP_TEXT is always enough). */
#define GW_ACME_CAP_TEXT (GW_ACME_MAX_ORDERS_PER_HOUR * 21 + 1)
size_t gw_acme_cap_format(const gw_acme_starts_t *s, char *out, size_t cap);

/* The text of gw_acme_cap_format() into *s (emptied first); lines that are not a time are
 * skipped, at most GW_ACME_MAX_ORDERS_PER_HOUR kept (the last ones). */
void gw_acme_cap_parse(gw_acme_starts_t *s, const char *text, size_t len);

#endif
