/* acme/order.h — the ACME protocol (RFC 8555) without I/O: the JSON Web Signature of each
 * request, the account key's thumbprint and key authorizations, the CSR, and the state machine
 * of one certificate order (account → order → authorizations → challenges → finalize →
 * certificate).
 *
 * The order never opens a socket or reads a clock. Its driver asks it what to do next
 * (gw_acme_order_next(): send a request, wait, publish a challenge answer, done, failed), does
 * it, and feeds back the server's answer (gw_acme_order_recv()) or says the wait or the
 * publication is over (gw_acme_order_resume()). Keys are OpenSSL's; JSON is jansson's and
 * stays inside this folder.
 *
 * A sketch of the driver:
 *
 *     gw_acme_order_new(&params, &o);
 *     for (;;) {
 *         gw_acme_action_t a;
 *         gw_acme_order_next(o, &a);
 *         switch (a.what) {
 *         case GW_ACME_DO_SEND:    answer = http(a.method, a.url, a.body); gw_acme_order_recv(o,
 * &answer); break; case GW_ACME_DO_WAIT:    sleep(a.delay_ms); gw_acme_order_resume(o); break; case
 * GW_ACME_DO_PUBLISH: serve(a.name, a.token, a.key_authz); gw_acme_order_resume(o); break; case
 * GW_ACME_DO_DONE:    install(a.body, a.body_len); return; case GW_ACME_DO_FAIL:
 * log(a.problem_type, a.detail); back off; return;
 *         }
 *     }
 */
#ifndef GW_ACME_ORDER_H
#define GW_ACME_ORDER_H

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

/* ---- encodings and signatures --------------------------------------------------------------- */

/* base64url without padding (RFC 7515 §2, RFC 4648 §5) of p[0..n) into a gw_malloc'd,
 * NUL-terminated string *out. 0 or GW_E_NOMEM. */
int gw_acme_b64url(const uint8_t *p, size_t n, char **out);

/* The public JWK (RFC 7517) of key, an EC P-256 key: {"crv":"P-256","kty":"EC","x":…,"y":…},
 * compact, members in lexicographic order, gw_malloc'd into *out. 0, GW_E_UNSUPPORTED (not a
 * P-256 key) or GW_E_NOMEM. */
int gw_acme_jwk(EVP_PKEY *key, char **out);

/* The JWK thumbprint (RFC 7638 §3) of the JWK in jwk_json: SHA-256 over the required members
 * of its kty (EC: crv, kty, x, y; RSA: e, kty, n) in canonical form, base64url, gw_malloc'd
 * into *out. 0, GW_E_PARSE (not a JWK, a member missing or not a string), GW_E_UNSUPPORTED
 * (another kty) or GW_E_NOMEM. */
int gw_acme_thumbprint(const char *jwk_json, char **out);

/* The key authorization of a challenge (RFC 8555 §8.1): token "." thumbprint, gw_malloc'd.
 * 0 or GW_E_NOMEM. */
int gw_acme_key_authz(const char *token, const char *thumbprint, char **out);

/* A request body signed with the account key (RFC 8555 §6.2, RFC 7515 flattened JSON
 * serialization): {"protected":…,"payload":…,"signature":…}, alg ES256, the protected header
 * carrying nonce and url and either the public key (`jwk`, kid NULL: newAccount) or kid (the
 * account URL). payload is the JSON text to sign, or NULL for POST-as-GET (an empty payload,
 * §6.3). gw_malloc'd into *out. 0, GW_E_UNSUPPORTED (not a P-256 key), GW_E_IO (OpenSSL
 * failed) or GW_E_NOMEM. */
int gw_acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
                const char *payload, char **out);

/* A PKCS#10 request for names[0..n) (n >= 1): subject CN names[0], a subjectAltName of every
 * name as dNSName, signed with key (SHA-256), DER, base64url (RFC 8555 §7.4), gw_malloc'd.
 * 0, GW_E_INVAL (no name), GW_E_IO or GW_E_NOMEM. */
int gw_acme_csr(EVP_PKEY *key, const char *const *names, size_t n, char **out);

/* ---- one order --------------------------------------------------------------------------------
 */

typedef enum {
    GW_ACME_CH_HTTP_01,     /* RFC 8555 §8.3 */
    GW_ACME_CH_TLS_ALPN_01, /* RFC 8737 */
} gw_acme_challenge_t;

/* The challenge type's name in the protocol ("http-01", "tls-alpn-01"). */
const char *gw_acme_challenge_str(gw_acme_challenge_t c);

/* Where an order stands: each state but the last two is waiting for one answer. Before a POST
 * when no nonce is at hand, the SEND is a HEAD to newNonce first (RFC 8555 §7.2). */
typedef enum {
    GW_ACME_S_DIRECTORY,  /* GET the directory */
    GW_ACME_S_ACCOUNT,    /* POST newAccount with the jwk: found or created, Location is kid */
    GW_ACME_S_ORDER,      /* POST newOrder with every name */
    GW_ACME_S_AUTHZ,      /* POST-as-GET one authorization */
    GW_ACME_S_PUBLISH,    /* the driver publishes the challenge answer */
    GW_ACME_S_CHALLENGE,  /* POST {} to the challenge: the server may validate now */
    GW_ACME_S_POLL_AUTHZ, /* POST-as-GET the authorization until valid or invalid */
    GW_ACME_S_FINALIZE,   /* POST the CSR */
    GW_ACME_S_POLL_ORDER, /* POST-as-GET the order until valid (certificate URL) */
    GW_ACME_S_CERT,       /* POST-as-GET the certificate chain */
    GW_ACME_S_DONE,       /* the chain is here */
    GW_ACME_S_FAILED,     /* an error: the driver backs off and starts a new order */
} gw_acme_state_t;

const char *gw_acme_state_str(gw_acme_state_t s);

typedef struct {
    const char *directory;    /* the directory URL */
    const char *email;        /* the account's contact, or NULL */
    const char *const *names; /* the DNS names of the certificate, at least one */
    size_t n_names;           /* at most GW_ACME_MAX_NAMES */
    gw_acme_challenge_t challenge;
    EVP_PKEY *account_key; /* P-256; referenced (up_ref) by the order */
    EVP_PKEY *cert_key;    /* the certificate's key, for the CSR; referenced */
    /* the ARI certID (RFC 9773 §4.1) of the certificate this order renews, or NULL: sent as
     * newOrder's `replaces` (§5) when the directory offers renewalInfo. A newOrder refused
     * because of it (alreadyReplaced, or any other problem but badNonce and rateLimited: a
     * server may refuse a predecessor of another account, or one it does not know) is sent
     * once more without it. */
    const char *replaces;
} gw_acme_params_t;

#define GW_ACME_MAX_NAMES 100
/* What the order reads of one answer at most, and the most polls of one authorization or of
 * the order before it fails: bounds on what the server can make us do. */
#define GW_ACME_MAX_BODY (256u * 1024)
#define GW_ACME_MAX_POLLS 60
/* The wait between polls when the server gives no Retry-After, and the bounds put on one it
 * gives (RFC 8555 §7.5.1, §7.4). */
#define GW_ACME_POLL_DEFAULT_MS 1000
#define GW_ACME_POLL_MIN_MS 100
#define GW_ACME_POLL_MAX_MS 60000
/* The badNonce refusals of one request retried in a row (RFC 8555 §6.5) before the order fails:
 * at pebble's default 5 % of good nonces refused, six in a row happen once in 64 million. */
#define GW_ACME_MAX_NONCE_RETRIES 5

typedef enum {
    GW_ACME_DO_SEND,    /* send method url [body]; feed the answer to gw_acme_order_recv() */
    GW_ACME_DO_WAIT,    /* wait delay_ms, then gw_acme_order_resume() */
    GW_ACME_DO_PUBLISH, /* serve key_authz for name/token, then gw_acme_order_resume() */
    GW_ACME_DO_DONE,    /* body[0..body_len) is the PEM chain, leaf first */
    GW_ACME_DO_FAIL,    /* status, problem_type and detail say why (see gw_acme_action_t) */
} gw_acme_do_t;

/* One thing to do. Every pointer is into the order and stays valid until the next call on it. */
typedef struct {
    gw_acme_do_t what;
    const char *method;       /* SEND: "GET", "HEAD" or "POST" (application/jose+json) */
    const char *url;          /* SEND */
    const char *body;         /* SEND: the JWS of a POST, else NULL; DONE: the chain */
    size_t body_len;          /* SEND, DONE */
    uint64_t delay_ms;        /* WAIT */
    gw_acme_challenge_t type; /* PUBLISH */
    const char *name;         /* PUBLISH: the DNS name being validated */
    const char *token;        /* PUBLISH: the challenge's token (base64url, checked) */
    const char *key_authz;    /* PUBLISH: what the validation must find */
    int status;               /* FAIL: the HTTP status, 0 when the failure is not an answer's */
    const char *problem_type; /* FAIL: urn:ietf:params:acme:error:…, or ours ("h2gate:…") */
    const char *detail;       /* FAIL: the server's detail or our reason; never NULL */
} gw_acme_action_t;

/* The server's answer to a SEND. Strings are NUL-terminated or NULL when the field is absent;
 * they are read during the call only. */
typedef struct {
    int status;               /* HTTP status */
    const char *location;     /* Location */
    const char *replay_nonce; /* Replay-Nonce */
    const char *retry_after;  /* Retry-After */
    const char *content_type; /* Content-Type */
    const uint8_t *body;      /* the body (need not be NUL-terminated) */
    size_t body_len;
} gw_acme_response_t;

typedef struct gw_acme_order gw_acme_order_t;

/* A new order in GW_ACME_S_DIRECTORY. The strings of p are copied. 0, GW_E_INVAL (no name, too
 * many, no directory, a key missing), GW_E_UNSUPPORTED (the account key not P-256) or
 * GW_E_NOMEM. */
int gw_acme_order_new(const gw_acme_params_t *p, gw_acme_order_t **out);
void gw_acme_order_del(gw_acme_order_t *o);

/* What to do now, into *a (pointers valid until the next call on o). Calling it again without
 * recv/resume gives the same action. 0 or GW_E_NOMEM (then nothing changed: call again). */
int gw_acme_order_next(gw_acme_order_t *o, gw_acme_action_t *a);

/* The answer to the SEND that next() gave. Never fails: what goes wrong becomes the FAIL
 * action (or a retry of the same request after a badNonce, RFC 8555 §6.5, up to
 * GW_ACME_MAX_NONCE_RETRIES times in a row). */
void gw_acme_order_recv(gw_acme_order_t *o, const gw_acme_response_t *r);

/* The WAIT is over or the PUBLISH done: go on. A no-op in other states. */
void gw_acme_order_resume(gw_acme_order_t *o);

/* The driver could not send the request (connect, TLS, timeout): the order fails with
 * status 0, problem type "h2gate:transport" and the reason given (copied). */
void gw_acme_order_transport_failed(gw_acme_order_t *o, const char *reason);

gw_acme_state_t gw_acme_order_state(const gw_acme_order_t *o);
/* The account URL (kid) once known, else NULL. */
const char *gw_acme_order_account(const gw_acme_order_t *o);
/* How many requests were sent and how many of them were retried after a badNonce. */
unsigned gw_acme_order_sent(const gw_acme_order_t *o);
unsigned gw_acme_order_nonce_retries(const gw_acme_order_t *o);
/* Whether newOrder carries (or carried) `replaces`: 1 while it does, 0 when it was not given,
 * the directory offers no renewalInfo, or it was dropped after a refusal; then
 * gw_acme_order_replaces_refused() gives the refusal's problem type (else NULL). */
int gw_acme_order_replaces(const gw_acme_order_t *o);
const char *gw_acme_order_replaces_refused(const gw_acme_order_t *o);

#endif
