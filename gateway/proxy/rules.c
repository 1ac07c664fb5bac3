/* proxy/rules.c — the header rules of config/rules.c at work: the request rules on the fields
 * the origin is told (translate.c calls them after the forwarding fields are made, so that an
 * operator's rule has the last word and a client's copy of a field never survives a `remove`
 * or a `set`), the response rules as the last filter of the chain and on the gateway's own
 * answers (redirect.c), the template variables of a request, and strip_prefix.
 *
 * The top level's rules apply first, then the route's: a route adds to the top level's and can
 * take back what they did (remove, or set over it). Response values are literal (the loader
 * refuses variables in them): an answer shared by coalesced requests gets the same fields for
 * every one of them, so no follower can get the leader's $request_id. */
#include <string.h>

#include "common/err.h"
#include "config/template.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* A value from the client or the connection that may go into a field: none of the bytes a
 * field value may not hold (a certificate subject is the peer's words); otherwise empty. */
static gw_slice_t field_safe(gw_slice_t v)
{
    for (size_t i = 0; i < v.len; i++)
        if (!gw_http_is_field_byte(v.base[i]))
            return (gw_slice_t){0};
    return v;
}

void gw_proxy__tmpl_vars(const gw_cstream_t *s, const gw_req_head_t *h, gw_slice_t authority,
                         gw_slice_t *vars)
{
    vars[GW_TMPL_CLIENT_ADDR] = gw_slice_str(s->peer_ip ? s->peer_ip : "");
    vars[GW_TMPL_REQUEST_ID] = s->log && s->log->id_len
                                   ? (gw_slice_t){(const uint8_t *)s->log->id, s->log->id_len}
                                   : (gw_slice_t){0};
    /* the connection's scheme, never the client's :scheme */
    vars[GW_TMPL_SCHEME] = s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
    /* a host that is not one (userinfo, a path, a backslash...) is left out, never copied */
    vars[GW_TMPL_HOST] = gw_tmpl_host_valid(authority) ? authority : (gw_slice_t){0};
    /* the subject of a certificate that verified, else empty (config/template.h): under
     * client_auth mode optional a failed one (expired, of an unknown CA) is still there to
     * read, with whatever subject its maker chose, and an origin told it would take it for
     * an identity the gateway vouched for */
    int verified = s->tls_client_verify && !strcmp(s->tls_client_verify, "SUCCESS");
    vars[GW_TMPL_TLS_CLIENT_SUBJECT] = verified && s->tls_client_subject
                                           ? field_safe(gw_slice_str(s->tls_client_subject))
                                           : (gw_slice_t){0};
    vars[GW_TMPL_TLS_CLIENT_VERIFY] =
        field_safe(gw_slice_str(s->tls_client_verify ? s->tls_client_verify : ""));
    vars[GW_TMPL_REQUEST_URI] = h->path;
    const uint8_t *q = h->path.len ? memchr(h->path.base, '?', h->path.len) : NULL;
    vars[GW_TMPL_PATH] = (gw_slice_t){h->path.base, q ? (size_t)(q - h->path.base) : h->path.len};
}

/* ---- request rules --------------------------------------------------------------------- */

static void room_of(const gw_cfg_hdr_rules_t *r, const gw_slice_t *vars, size_t *bytes,
                    size_t *fields)
{
    for (size_t i = 0; i < r->set_len; i++)
        *bytes += gw_tmpl_len(r->set[i].value, vars) + 1;
    for (size_t i = 0; i < r->add_len; i++)
        *bytes += gw_tmpl_len(r->add[i].value, vars) + 1;
    *fields += r->set_len + r->add_len;
}

void gw_proxy__req_rules_room(const gw_cfg_route_t *r, const gw_slice_t *vars, size_t *bytes,
                              size_t *fields)
{
    if (r->top_request_headers)
        room_of(r->top_request_headers, vars, bytes, fields);
    room_of(&r->request_headers, vars, bytes, fields);
}

/* Drop every field named name from f[0..*n), in place. */
static void drop_named(gw_field_t *f, size_t *n, const char *name)
{
    size_t k = 0;
    gw_slice_t nm = gw_slice_str(name);
    for (size_t i = 0; i < *n; i++)
        if (!(f[i].name.len == nm.len && gw_slice_eq_nocase(f[i].name, nm)))
            f[k++] = f[i];
    *n = k;
}

/* One field of a rule, its value expanded into buf (room counted by gw_proxy__req_rules_room). */
static void put_rule(const gw_cfg_hdr_t *h, const gw_slice_t *vars, gw_field_t *f, size_t *n,
                     size_t cap, char *buf, size_t *used, size_t size)
{
    GW_ASSERT(*n < cap);
    size_t len = gw_tmpl_expand(h->value, vars, buf + *used, size - *used);
    GW_ASSERT(len < size - *used);
    buf[*used + len] = 0;
    f[(*n)++] = (gw_field_t){gw_slice_str(h->name), {(const uint8_t *)buf + *used, len}};
    *used += len + 1;
}

static void apply_req(const gw_cfg_hdr_rules_t *r, const gw_slice_t *vars, gw_field_t *f, size_t *n,
                      size_t cap, char *buf, size_t *used, size_t size)
{
    for (size_t i = 0; i < r->remove_len; i++)
        drop_named(f, n, r->remove[i]);
    for (size_t i = 0; i < r->set_len; i++) {
        drop_named(f, n, r->set[i].name);
        put_rule(&r->set[i], vars, f, n, cap, buf, used, size);
    }
    for (size_t i = 0; i < r->add_len; i++)
        put_rule(&r->add[i], vars, f, n, cap, buf, used, size);
}

void gw_proxy__req_rules_apply(const gw_cfg_route_t *r, const gw_slice_t *vars, gw_field_t *f,
                               size_t *n, size_t cap, char *buf, size_t *used, size_t size)
{
    if (r->top_request_headers)
        apply_req(r->top_request_headers, vars, f, n, cap, buf, used, size);
    apply_req(&r->request_headers, vars, f, n, cap, buf, used, size);
}

int gw_proxy__has_req_rules(const gw_cfg_route_t *r)
{
    const gw_cfg_hdr_rules_t *t = r->top_request_headers;
    return r->request_headers.set_len || r->request_headers.add_len ||
           r->request_headers.remove_len || (t && (t->set_len || t->add_len || t->remove_len));
}

/* ---- strip_prefix ------------------------------------------------------------------------- */

int gw_proxy__strip_prefix(const char *prefix, gw_slice_t path, gw_slice_t *rest)
{
    size_t pl = strlen(prefix);
    if (path.len < pl || memcmp(path.base, prefix, pl) != 0)
        return -1;
    if (prefix[pl - 1] == '/') {
        /* "/api/" cuts "/api", so that what remains keeps its leading '/' */
        *rest = (gw_slice_t){path.base + pl - 1, path.len - pl + 1};
        return 0;
    }
    /* "/api" matches "/api", "/api/..." and "/api?...", never "/apix" (a whole segment) */
    if (path.len > pl && path.base[pl] != '/' && path.base[pl] != '?')
        return -1;
    *rest = (gw_slice_t){path.base + pl, path.len - pl};
    return rest->len == 0 || rest->base[0] == '?' ? 1 : 0;
}

/* ---- response rules ---------------------------------------------------------------------- */

static gw_slice_t literal(const gw_tmpl_t *t)
{
    return (gw_slice_t){(const uint8_t *)t->text, t->lit_len};
}

static size_t apply_resp(const gw_cfg_hdr_rules_t *r, gw_field_t *f, size_t n, size_t cap)
{
    for (size_t i = 0; i < r->remove_len; i++)
        drop_named(f, &n, r->remove[i]);
    for (size_t i = 0; i < r->set_len; i++) {
        drop_named(f, &n, r->set[i].name);
        if (n < cap)
            f[n++] = (gw_field_t){gw_slice_str(r->set[i].name), literal(r->set[i].value)};
    }
    for (size_t i = 0; i < r->add_len && n < cap; i++)
        f[n++] = (gw_field_t){gw_slice_str(r->add[i].name), literal(r->add[i].value)};
    return n;
}

size_t gw_proxy__resp_rules_apply(const gw_cfg_route_t *r, gw_field_t *f, size_t n, size_t cap)
{
    if (r->top_response_headers)
        n = apply_resp(r->top_response_headers, f, n, cap);
    return apply_resp(&r->response_headers, f, n, cap);
}

static int headers_wants(const gw_cfg_route_t *r)
{
    const gw_cfg_hdr_rules_t *t = r->top_response_headers, *o = &r->response_headers;
    return o->set_len || o->add_len || o->remove_len ||
           (t && (t->set_len || t->add_len || t->remove_len));
}

/* The final head only: an interim answer (103) carries hints, not the page's policy fields;
 * trailers are left alone too. Last in the chain: the rules see what the client would get. */
static int headers_on_head(ox_t *ox, gw_proxy_resp_t *r)
{
    r->n = gw_proxy__resp_rules_apply(ox->route, r->f, r->n, GW_PROXY_MAX_RESP_FIELDS);
    return 0;
}

const gw_proxy_filter_t gw_proxy__filter_headers = {
    .name = "headers",
    .wants = headers_wants,
    .on_head = headers_on_head,
};
