/* acme/order.c — the state machine of one certificate order (RFC 8555 §7): directory, nonce,
 * account, order, each authorization and its challenge, finalize, the certificate. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "acme/acme_internal.h"
#include "common/alloc.h"
#include "common/err.h"

#define MAX_URL 2048
#define MAX_NONCE 256
#define MAX_TOKEN 256
#define MAX_DETAIL 512

struct gw_acme_order {
    gw_acme_state_t state;
    gw_acme_challenge_t challenge;
    char *directory, *email;
    char **names;
    size_t n_names;
    EVP_PKEY *akey, *ckey;
    char *thumb; /* the account key's thumbprint, for key authorizations */
    char *new_nonce, *new_account, *new_order;
    char *nonce; /* the next nonce to use, or NULL (then HEAD newNonce first) */
    char *kid, *order_url, *finalize_url, *cert_url;
    char **authz;
    size_t n_authz, cur;
    char *ch_name, *ch_url, *ch_token, *key_authz;
    unsigned polls;
    uint64_t delay_ms;
    int waiting;            /* a poll state whose WAIT has not been resumed yet */
    int fetching_nonce;     /* the SEND given is the HEAD newNonce */
    unsigned nonce_retried; /* badNonce refusals of the current request in a row */
    char *req_body; /* the signed body of the current POST, built once (it spends a nonce) */
    int req_built;
    char *chain;
    size_t chain_len;
    int fail_status;
    char *fail_type, *fail_detail;
    unsigned sent, nonce_retries;
    char *replaces;         /* the ARI certID newOrder names (RFC 9773 §5), or NULL */
    char *replaces_refused; /* the problem type that made it drop replaces, or NULL */
};

static const char *const STATE_NAMES[] = {
    [GW_ACME_S_DIRECTORY] = "directory",
    [GW_ACME_S_ACCOUNT] = "account",
    [GW_ACME_S_ORDER] = "order",
    [GW_ACME_S_AUTHZ] = "authz",
    [GW_ACME_S_PUBLISH] = "publish",
    [GW_ACME_S_CHALLENGE] = "challenge",
    [GW_ACME_S_POLL_AUTHZ] = "poll_authz",
    [GW_ACME_S_FINALIZE] = "finalize",
    [GW_ACME_S_POLL_ORDER] = "poll_order",
    [GW_ACME_S_CERT] = "cert",
    [GW_ACME_S_DONE] = "done",
    [GW_ACME_S_FAILED] = "failed",
};

const char *gw_acme_state_str(gw_acme_state_t s)
{
    return GW_NAME_OF(STATE_NAMES, s, "unknown");
}

const char *gw_acme_challenge_str(gw_acme_challenge_t c)
{
    return c == GW_ACME_CH_TLS_ALPN_01 ? "tls-alpn-01" : "http-01";
}

static void set_str(char **dst, const char *s)
{
    gw_free(*dst);
    *dst = s ? gw_strdup(s) : NULL;
}

/* The order fails: status, problem type and detail are kept for the FAIL action. Allocation
 * failures here leave a NULL type or detail, which next() replaces with a static text. */
static void fail(gw_acme_order_t *o, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(gw_acme_order_t *o, int status, const char *type, const char *fmt, ...)
{
    char detail[MAX_DETAIL];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    o->state = GW_ACME_S_FAILED;
    o->waiting = 0;
    o->fail_status = status;
    set_str(&o->fail_type, type);
    set_str(&o->fail_detail, detail);
}

void gw_acme_order_del(gw_acme_order_t *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n_names; i++)
        gw_free(o->names[i]);
    gw_free(o->names);
    for (size_t i = 0; i < o->n_authz; i++)
        gw_free(o->authz[i]);
    gw_free(o->authz);
    EVP_PKEY_free(o->akey);
    EVP_PKEY_free(o->ckey);
    char **strs[] = {&o->directory,       &o->email,        &o->thumb,       &o->new_nonce,
                     &o->new_account,     &o->new_order,    &o->nonce,       &o->kid,
                     &o->order_url,       &o->finalize_url, &o->cert_url,    &o->ch_name,
                     &o->ch_url,          &o->ch_token,     &o->key_authz,   &o->req_body,
                     &o->chain,           &o->fail_type,    &o->fail_detail, &o->replaces,
                     &o->replaces_refused};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        gw_free(*strs[i]);
    gw_free(o);
}

int gw_acme_order_new(const gw_acme_params_t *p, gw_acme_order_t **out)
{
    if (!p->directory || !*p->directory || !p->names || p->n_names == 0 ||
        p->n_names > GW_ACME_MAX_NAMES || !p->account_key || !p->cert_key)
        return GW_E_INVAL;
    gw_acme_order_t *o = gw_calloc(1, sizeof(*o));
    if (!o)
        return GW_E_NOMEM;
    int rv = GW_E_NOMEM;
    o->challenge = p->challenge;
    o->directory = gw_strdup(p->directory);
    o->email = p->email ? gw_strdup(p->email) : NULL;
    o->names = gw_calloc(p->n_names, sizeof(*o->names));
    o->replaces = p->replaces ? gw_strdup(p->replaces) : NULL;
    if (!o->directory || (p->email && !o->email) || !o->names || (p->replaces && !o->replaces))
        goto fail;
    for (; o->n_names < p->n_names; o->n_names++)
        if (!(o->names[o->n_names] = gw_strdup(p->names[o->n_names])))
            goto fail;
    EVP_PKEY_up_ref(p->account_key);
    o->akey = p->account_key;
    EVP_PKEY_up_ref(p->cert_key);
    o->ckey = p->cert_key;
    char *jwk = NULL;
    if ((rv = gw_acme_jwk(o->akey, &jwk)) < 0)
        goto fail;
    rv = gw_acme_thumbprint(jwk, &o->thumb);
    gw_free(jwk);
    if (rv < 0)
        goto fail;
    o->state = GW_ACME_S_DIRECTORY;
    *out = o;
    return 0;
fail:
    gw_acme_order_del(o);
    return rv;
}

/* ---- what to send ------------------------------------------------------------------------------
 */

static int is_post(gw_acme_state_t s)
{
    return s != GW_ACME_S_DIRECTORY;
}

static const char *state_url(const gw_acme_order_t *o)
{
    switch (o->state) {
    case GW_ACME_S_DIRECTORY:
        return o->directory;
    case GW_ACME_S_ACCOUNT:
        return o->new_account;
    case GW_ACME_S_ORDER:
        return o->new_order;
    case GW_ACME_S_AUTHZ:
    case GW_ACME_S_POLL_AUTHZ:
        return o->authz[o->cur];
    case GW_ACME_S_CHALLENGE:
        return o->ch_url;
    case GW_ACME_S_FINALIZE:
        return o->finalize_url;
    case GW_ACME_S_POLL_ORDER:
        return o->order_url;
    case GW_ACME_S_CERT:
        return o->cert_url;
    default:
        return NULL;
    }
}

/* The JSON payload of the current state's POST, gw_malloc'd, or NULL with *rv 0 for a
 * POST-as-GET (RFC 8555 §6.3). */
static char *state_payload(const gw_acme_order_t *o, int *rv)
{
    json_t *j = NULL;
    char *csr = NULL;
    *rv = 0;
    switch (o->state) {
    case GW_ACME_S_ACCOUNT: {
        /* §7.3: an existing account for this key answers 200 with its URL, so asking again
         * after a restart finds it instead of making a second one */
        j = json_pack("{s:b}", "termsOfServiceAgreed", 1);
        if (j && o->email) {
            size_t n = strlen(o->email) + 8;
            char *mailto = gw_malloc(n);
            if (mailto) {
                snprintf(mailto, n, "mailto:%s", o->email);
                json_object_set_new(j, "contact", json_pack("[s]", mailto));
                gw_free(mailto);
            }
        }
        break;
    }
    case GW_ACME_S_ORDER: {
        json_t *ids = json_array();
        for (size_t i = 0; ids && i < o->n_names; i++)
            json_array_append_new(ids, json_pack("{s:s,s:s}", "type", "dns", "value", o->names[i]));
        if (ids && json_array_size(ids) == o->n_names)
            j = json_pack("{s:O}", "identifiers", ids);
        json_decref(ids);
        /* RFC 9773 §5: the certificate this order replaces, by its ARI certID */
        if (j && o->replaces && json_object_set_new(j, "replaces", json_string(o->replaces)) < 0) {
            json_decref(j);
            j = NULL;
        }
        break;
    }
    case GW_ACME_S_CHALLENGE:
        j = json_object(); /* §7.5.1: an empty object says "validate now" */
        break;
    case GW_ACME_S_FINALIZE:
        if ((*rv = gw_acme_csr(o->ckey, (const char *const *)o->names, o->n_names, &csr)) < 0)
            return NULL;
        j = json_pack("{s:s}", "csr", csr);
        gw_free(csr);
        break;
    default:
        return NULL; /* POST-as-GET */
    }
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    char *s = text ? gw_strdup(text) : NULL;
    free(text);
    if (!s)
        *rv = GW_E_NOMEM;
    return s;
}

int gw_acme_order_next(gw_acme_order_t *o, gw_acme_action_t *a)
{
    memset(a, 0, sizeof(*a));
    switch (o->state) {
    case GW_ACME_S_DONE:
        a->what = GW_ACME_DO_DONE;
        a->body = o->chain;
        a->body_len = o->chain_len;
        return 0;
    case GW_ACME_S_FAILED:
        a->what = GW_ACME_DO_FAIL;
        a->status = o->fail_status;
        a->problem_type = o->fail_type ? o->fail_type : "h2gate:internal";
        a->detail = o->fail_detail ? o->fail_detail : "out of memory";
        return 0;
    case GW_ACME_S_PUBLISH:
        a->what = GW_ACME_DO_PUBLISH;
        a->type = o->challenge;
        a->name = o->ch_name;
        a->token = o->ch_token;
        a->key_authz = o->key_authz;
        return 0;
    default:
        break;
    }
    if (o->waiting) {
        a->what = GW_ACME_DO_WAIT;
        a->delay_ms = o->delay_ms;
        return 0;
    }
    a->what = GW_ACME_DO_SEND;
    if (!is_post(o->state)) {
        a->method = "GET";
        a->url = o->directory;
        return 0;
    }
    if (!o->req_built && !o->nonce) {
        /* §7.2: a fresh nonce before the first POST, or when the last answer carried none */
        o->fetching_nonce = 1;
        a->method = "HEAD";
        a->url = o->new_nonce;
        return 0;
    }
    if (!o->req_built) {
        int rv;
        char *payload = state_payload(o, &rv);
        if (rv < 0)
            return rv;
        char *body = NULL;
        /* §6.2: the jwk in newAccount only, the kid (account URL) in every other request */
        rv = gw_acme_jws(o->akey, o->state == GW_ACME_S_ACCOUNT ? NULL : o->kid, o->nonce,
                         state_url(o), payload, &body);
        gw_free(payload);
        if (rv < 0)
            return rv;
        gw_free(o->nonce); /* a nonce is good for one request (§6.5) */
        o->nonce = NULL;
        gw_free(o->req_body);
        o->req_body = body;
        o->req_built = 1;
    }
    o->fetching_nonce = 0;
    a->method = "POST";
    a->url = state_url(o);
    a->body = o->req_body;
    a->body_len = strlen(o->req_body);
    return 0;
}

/* ---- what came back
 * ------------------------------------------------------------------------------ */

static int valid_url(const char *s)
{
    return s && (strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0) &&
           strlen(s) <= MAX_URL;
}

/* Copy the string member k of j into *dst when it is a URL; 0 or -1. */
static int take_url(json_t *j, const char *k, char **dst)
{
    const char *s = json_string_value(json_object_get(j, k));
    if (!valid_url(s))
        return -1;
    set_str(dst, s);
    return *dst ? 0 : -1;
}

/* Retry-After as delta-seconds (RFC 9110 §10.2.3), bounded; an HTTP-date or nothing gives the
 * default. */
static uint64_t retry_after_ms(const char *s)
{
    if (!s)
        return GW_ACME_POLL_DEFAULT_MS;
    uint64_t v = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9' && i < 9; i++)
        v = v * 10 + (uint64_t)(s[i] - '0');
    if (i == 0 || s[i])
        return GW_ACME_POLL_DEFAULT_MS;
    v *= 1000;
    return v < GW_ACME_POLL_MIN_MS   ? GW_ACME_POLL_MIN_MS
           : v > GW_ACME_POLL_MAX_MS ? GW_ACME_POLL_MAX_MS
                                     : v;
}

static void start_wait(gw_acme_order_t *o, const gw_acme_response_t *r, gw_acme_state_t next)
{
    if (++o->polls > GW_ACME_MAX_POLLS) {
        fail(o, 0, "h2gate:timeout", "still %s after %u polls", gw_acme_state_str(o->state),
             GW_ACME_MAX_POLLS);
        return;
    }
    o->state = next;
    o->waiting = 1;
    o->delay_ms = retry_after_ms(r->retry_after);
}

/* The error of the challenge of our type in an authorization, for the log. */
static void fail_authz(gw_acme_order_t *o, json_t *authz, const char *status)
{
    json_t *chs = json_object_get(authz, "challenges");
    size_t i;
    json_t *c;
    json_array_foreach(chs, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        json_t *e = json_object_get(c, "error");
        if (t && strcmp(t, gw_acme_challenge_str(o->challenge)) == 0 && json_is_object(e)) {
            const char *et = json_string_value(json_object_get(e, "type"));
            const char *ed = json_string_value(json_object_get(e, "detail"));
            fail(o, 0, et ? et : "h2gate:protocol", "authorization of %s %s: %s", o->ch_name,
                 status, ed ? ed : "no detail");
            return;
        }
    }
    fail(o, 0, "h2gate:protocol", "authorization of %s %s", o->ch_name ? o->ch_name : "?", status);
}

static void next_authz(gw_acme_order_t *o)
{
    o->polls = 0;
    if (++o->cur < o->n_authz)
        o->state = GW_ACME_S_AUTHZ;
    else
        o->state = GW_ACME_S_FINALIZE;
}

static int our_name(const gw_acme_order_t *o, const char *name)
{
    for (size_t i = 0; name && i < o->n_names; i++)
        if (strcasecmp(o->names[i], name) == 0)
            return 1;
    return 0;
}

static void on_authz(gw_acme_order_t *o, json_t *j, const gw_acme_response_t *r)
{
    const char *status = json_string_value(json_object_get(j, "status"));
    const char *name =
        json_string_value(json_object_get(json_object_get(j, "identifier"), "value"));
    if (!status || !our_name(o, name)) {
        fail(o, r->status, "h2gate:protocol", "authorization %s: no status or not one of our names",
             o->authz[o->cur]);
        return;
    }
    set_str(&o->ch_name, name);
    if (strcmp(status, "valid") == 0) {
        next_authz(o);
        return;
    }
    if (strcmp(status, "pending") != 0) {
        if (o->state == GW_ACME_S_POLL_AUTHZ && strcmp(status, "processing") == 0)
            start_wait(o, r, GW_ACME_S_POLL_AUTHZ);
        else
            fail_authz(o, j, status);
        return;
    }
    if (o->state == GW_ACME_S_POLL_AUTHZ) { /* pending still: validation not done */
        start_wait(o, r, GW_ACME_S_POLL_AUTHZ);
        return;
    }
    json_t *chs = json_object_get(j, "challenges");
    size_t i;
    json_t *c;
    json_array_foreach(chs, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (!t || strcmp(t, gw_acme_challenge_str(o->challenge)) != 0)
            continue;
        const char *token = json_string_value(json_object_get(c, "token"));
        /* RFC 8555 §8.3: base64url; it lands in a path and a certificate, so it is checked */
        if (!gw_acme__is_b64url(token) || strlen(token) > MAX_TOKEN ||
            take_url(c, "url", &o->ch_url) < 0) {
            fail(o, r->status, "h2gate:protocol", "challenge of %s: bad token or url", name);
            return;
        }
        set_str(&o->ch_token, token);
        gw_free(o->key_authz);
        o->key_authz = NULL;
        if (!o->ch_token || gw_acme_key_authz(token, o->thumb, &o->key_authz) < 0) {
            fail(o, 0, "h2gate:internal", "out of memory");
            return;
        }
        o->state = GW_ACME_S_PUBLISH;
        return;
    }
    fail(o, r->status, "h2gate:protocol", "the server offers no %s challenge for %s",
         gw_acme_challenge_str(o->challenge), name);
}

static void on_order_status(gw_acme_order_t *o, json_t *j, const gw_acme_response_t *r)
{
    const char *status = json_string_value(json_object_get(j, "status"));
    if (status && strcmp(status, "valid") == 0) {
        if (take_url(j, "certificate", &o->cert_url) < 0)
            fail(o, r->status, "h2gate:protocol", "a valid order without a certificate URL");
        else
            o->state = GW_ACME_S_CERT;
    } else if (status && (strcmp(status, "processing") == 0 || strcmp(status, "ready") == 0)) {
        start_wait(o, r, GW_ACME_S_POLL_ORDER);
    } else {
        json_t *e = json_object_get(j, "error");
        const char *ed = json_string_value(json_object_get(e, "detail"));
        const char *et = json_string_value(json_object_get(e, "type"));
        fail(o, r->status, et ? et : "h2gate:protocol", "order %s: %s",
             status ? status : "without status", ed ? ed : "no detail");
    }
}

static void on_json(gw_acme_order_t *o, json_t *j, const gw_acme_response_t *r)
{
    switch (o->state) {
    case GW_ACME_S_DIRECTORY:
        if (take_url(j, "newNonce", &o->new_nonce) < 0 ||
            take_url(j, "newAccount", &o->new_account) < 0 ||
            take_url(j, "newOrder", &o->new_order) < 0) {
            fail(o, r->status, "h2gate:protocol",
                 "the directory lacks newNonce, newAccount or newOrder");
            return;
        }
        if (!json_is_string(json_object_get(j, "renewalInfo"))) {
            /* RFC 9773 §5: no replaces to a server that does not offer ARI */
            gw_free(o->replaces);
            o->replaces = NULL;
        }
        o->state = GW_ACME_S_ACCOUNT;
        return;
    case GW_ACME_S_ACCOUNT: {
        const char *status = json_string_value(json_object_get(j, "status"));
        if (!valid_url(r->location) || (status && strcmp(status, "valid") != 0)) {
            fail(o, r->status, "h2gate:protocol", "account %s, location %s",
                 status ? status : "without status", r->location ? "given" : "missing");
            return;
        }
        set_str(&o->kid, r->location);
        o->state = o->kid ? GW_ACME_S_ORDER : GW_ACME_S_FAILED;
        return;
    }
    case GW_ACME_S_ORDER: {
        json_t *az = json_object_get(j, "authorizations");
        size_t n = json_array_size(az);
        if (!valid_url(r->location) || n == 0 || n > o->n_names ||
            take_url(j, "finalize", &o->finalize_url) < 0) {
            fail(o, r->status, "h2gate:protocol",
                 "the new order lacks a location, authorizations or finalize URL");
            return;
        }
        set_str(&o->order_url, r->location);
        o->authz = gw_calloc(n, sizeof(*o->authz));
        if (!o->authz || !o->order_url) {
            fail(o, 0, "h2gate:internal", "out of memory");
            return;
        }
        for (size_t i = 0; i < n; i++) {
            const char *u = json_string_value(json_array_get(az, i));
            if (!valid_url(u)) {
                fail(o, r->status, "h2gate:protocol", "authorization %zu is not a URL", i);
                return;
            }
            if (!(o->authz[o->n_authz++] = gw_strdup(u))) {
                fail(o, 0, "h2gate:internal", "out of memory");
                return;
            }
        }
        o->cur = 0;
        o->polls = 0;
        o->state = GW_ACME_S_AUTHZ;
        return;
    }
    case GW_ACME_S_AUTHZ:
    case GW_ACME_S_POLL_AUTHZ:
        on_authz(o, j, r);
        return;
    case GW_ACME_S_CHALLENGE: {
        const char *status = json_string_value(json_object_get(j, "status"));
        if (status && strcmp(status, "invalid") == 0) {
            json_t *e = json_object_get(j, "error");
            const char *et = json_string_value(json_object_get(e, "type"));
            const char *ed = json_string_value(json_object_get(e, "detail"));
            fail(o, r->status, et ? et : "h2gate:protocol", "challenge of %s invalid: %s",
                 o->ch_name, ed ? ed : "no detail");
            return;
        }
        o->polls = 0;
        start_wait(o, r, GW_ACME_S_POLL_AUTHZ);
        return;
    }
    case GW_ACME_S_FINALIZE:
        o->polls = 0;
        /* fall through */
    case GW_ACME_S_POLL_ORDER:
        on_order_status(o, j, r);
        return;
    default:
        return;
    }
}

static const char CERT_BEGIN[] = "-----BEGIN CERTIFICATE-----";

void gw_acme_order_recv(gw_acme_order_t *o, const gw_acme_response_t *r)
{
    if (o->state == GW_ACME_S_DONE || o->state == GW_ACME_S_FAILED || o->waiting ||
        o->state == GW_ACME_S_PUBLISH)
        return;
    o->sent++;
    const char *n = r->replay_nonce;
    /* §6.5.1: a nonce is base64url; anything else is not kept */
    if (n && gw_acme__is_b64url(n) && strlen(n) <= MAX_NONCE)
        set_str(&o->nonce, n);
    if (o->fetching_nonce) {
        o->fetching_nonce = 0;
        if (!o->nonce)
            fail(o, r->status, "h2gate:protocol", "newNonce answered %d without a nonce",
                 r->status);
        return;
    }
    if (r->body_len > GW_ACME_MAX_BODY) {
        fail(o, r->status, "h2gate:protocol", "an answer of %zu bytes (limit %u)", r->body_len,
             GW_ACME_MAX_BODY);
        return;
    }
    json_t *j = NULL;
    if (r->status >= 400) {
        /* RFC 8555 §6.7, RFC 7807: the problem document says what went wrong */
        j = json_loadb((const char *)r->body, r->body_len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        const char *detail = json_string_value(json_object_get(j, "detail"));
        if (type && strcmp(type, GW_ACME_ERR_PREFIX "badNonce") == 0 &&
            o->nonce_retried < GW_ACME_MAX_NONCE_RETRIES) {
            /* §6.5: retry with the nonce this answer carried. A server may refuse a good nonce
             * now and then (pebble refuses 5 % by default, as §6.5 allows), so a few refusals
             * in a row are retried; an endless run of them is a broken server */
            o->nonce_retried++;
            o->nonce_retries++;
            o->req_built = 0;
        } else if (o->state == GW_ACME_S_ORDER && o->replaces &&
                   !(type && strcmp(type, GW_ACME_ERR_PREFIX "rateLimited") == 0)) {
            /* RFC 9773 §5: a server refuses a replaces naming a certificate already replaced
             * (409 alreadyReplaced), and may refuse one of another account or one it does not
             * know (another instance's, a lost state folder): the order itself is still
             * wanted, so newOrder goes once more without it (with this answer's nonce) */
            set_str(&o->replaces_refused, type ? type : "h2gate:http");
            gw_free(o->replaces);
            o->replaces = NULL;
            o->req_built = 0;
        } else {
            fail(o, r->status, type ? type : "h2gate:http", "%s %s: %s",
                 gw_acme_state_str(o->state), state_url(o) ? state_url(o) : "",
                 detail ? detail : "no problem document");
        }
        json_decref(j);
        return;
    }
    o->req_built = 0;
    o->nonce_retried = 0;
    if (r->status < 200 || r->status > 299) {
        fail(o, r->status, "h2gate:http", "%s answered %d", gw_acme_state_str(o->state), r->status);
        return;
    }
    if (o->state == GW_ACME_S_CERT) {
        /* §7.4.2: application/pem-certificate-chain, the leaf first */
        if (r->body_len < sizeof(CERT_BEGIN) - 1 ||
            memcmp(r->body, CERT_BEGIN, sizeof(CERT_BEGIN) - 1) != 0) {
            fail(o, r->status, "h2gate:protocol", "the certificate is not a PEM chain");
            return;
        }
        o->chain = gw_malloc(r->body_len + 1);
        if (!o->chain) {
            fail(o, 0, "h2gate:internal", "out of memory");
            return;
        }
        memcpy(o->chain, r->body, r->body_len);
        o->chain[r->body_len] = 0;
        o->chain_len = r->body_len;
        o->state = GW_ACME_S_DONE;
        return;
    }
    json_error_t jerr;
    j = json_loadb((const char *)r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(j)) {
        fail(o, r->status, "h2gate:protocol", "%s: the answer is not a JSON object (%s)",
             gw_acme_state_str(o->state), j ? "not an object" : jerr.text);
        json_decref(j);
        return;
    }
    on_json(o, j, r);
    json_decref(j);
}

void gw_acme_order_resume(gw_acme_order_t *o)
{
    if (o->state == GW_ACME_S_PUBLISH)
        o->state = GW_ACME_S_CHALLENGE;
    else
        o->waiting = 0;
}

void gw_acme_order_transport_failed(gw_acme_order_t *o, const char *reason)
{
    if (o->state != GW_ACME_S_DONE && o->state != GW_ACME_S_FAILED)
        fail(o, 0, "h2gate:transport", "%s %s: %s", gw_acme_state_str(o->state),
             o->fetching_nonce ? o->new_nonce : state_url(o), reason ? reason : "failed");
}

gw_acme_state_t gw_acme_order_state(const gw_acme_order_t *o)
{
    return o->state;
}

const char *gw_acme_order_account(const gw_acme_order_t *o)
{
    return o->kid;
}

unsigned gw_acme_order_sent(const gw_acme_order_t *o)
{
    return o->sent;
}

unsigned gw_acme_order_nonce_retries(const gw_acme_order_t *o)
{
    return o->nonce_retries;
}

int gw_acme_order_replaces(const gw_acme_order_t *o)
{
    return o->replaces != NULL;
}

const char *gw_acme_order_replaces_refused(const gw_acme_order_t *o)
{
    return o->replaces_refused;
}
