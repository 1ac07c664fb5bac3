/* config/rules.c — the edge policy keys that rewrite or answer requests: header rules
 * (request_headers, response_headers: at the top level and per route), a route's origin_host,
 * strip_prefix, redirect and respond, a listener's hsts and redirect_https. Values with
 * variables are compiled here (config/template.h); every bad name or byte is an error at the
 * value. The rules are applied by gateway/proxy/rules.c and redirect.c. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"
#include "config/template.h"
#include "http/http.h"

/* An error at byte `at` of the scalar v: its own column when the scalar is written on one line
 * without escapes (plain, or quoted with as many bytes between the quotes as it has), else at
 * the scalar. */
static void err_in_scalar(ld_t *ld, yaml_node_t *v, size_t at, const char *what, const char *why)
{
    size_t line = v->start_mark.line + 1, col = v->start_mark.column + 1;
    int one_line = v->end_mark.line == v->start_mark.line;
    if (one_line && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        col += at;
    else if (one_line &&
             (v->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
              v->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE) &&
             v->end_mark.column - v->start_mark.column == v->data.scalar.length + 2)
        col += at + 1;
    gw_cfg__err_line(ld, line, col, "%s value %s", what, why);
}

/* The template of the scalar v (key names it in messages), or NULL (reported). */
static gw_tmpl_t *load_tmpl(ld_t *ld, yaml_node_t *v, const char *what, unsigned allowed,
                            unsigned flags)
{
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, what))
        return NULL;
    gw_tmpl_t *t;
    const char *why = NULL;
    size_t at = 0;
    int rv = gw_tmpl_compile((const char *)v->data.scalar.value, v->data.scalar.length, allowed,
                             flags, &t, &why, &at);
    if (rv == GW_E_NOMEM) {
        ld->nomem = 1;
        return NULL;
    }
    if (rv < 0) {
        if (!strcmp(why, "names a variable not allowed here") && !allowed)
            why = "names a variable: response header values are literal (a coalesced answer "
                  "is shared by requests whose variables differ)";
        err_in_scalar(ld, v, at, what, why);
        return NULL;
    }
    return t;
}

/* ---- header rules ------------------------------------------------------------------------ */

/* Why a field name may not be in a header rule, or NULL when it may. */
static const char *name_refused(const char *name, int response)
{
    gw_slice_t n = gw_slice_str(name);
    if (!gw_http_is_token(n))
        return name[0] == ':' ? "is a pseudo-header" : "is not a token (RFC 9110 §5.6.2)";
    if (gw_http_field_is_connection_specific(n) || !strcasecmp(name, "trailer") ||
        !strcasecmp(name, "http2-settings"))
        return "is a hop-by-hop field (RFC 9110 §7.6.1)";
    if (!strcasecmp(name, "content-length"))
        return "frames the message: the gateway writes it";
    if (!response && !strcasecmp(name, "host"))
        return "is the origin's address: use the route's origin_host";
    if (!response && !strcasecmp(name, "expect"))
        return "is answered by the gateway, never forwarded";
    return NULL;
}

/* name checked and lowercased (into a new string), or NULL (reported at k). */
static char *load_name(ld_t *ld, yaml_node_t *k, const char *name, const char *section,
                       int response)
{
    const char *why = name_refused(name, response);
    if (why) {
        gw_cfg__err_at(ld, k, "%s: field name '%s' %s", section, name, why);
        return NULL;
    }
    char *s = gw_cfg__xstrdup(ld, name);
    for (char *p = s; p && *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return s;
}

typedef struct {
    gw_cfg_hdr_rules_t *r;
    const char *section; /* "request_headers" or "response_headers" */
    int response;
} rules_ld_t;

/* set: / add: — a mapping of names to values. */
static void load_ops(ld_t *ld, rules_ld_t *x, yaml_node_t *v, const char *op, gw_cfg_hdr_t **out,
                     size_t *len)
{
    char what[64];
    snprintf(what, sizeof(what), "%s.%s", x->section, op);
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, what))
        return;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    gw_cfg_hdr_t *a = gw_calloc(n ? n : 1, sizeof(*a));
    if (!a) {
        ld->nomem = 1;
        return;
    }
    *out = a;
    *len = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = gw_cfg__node(ld, p->key), *val = gw_cfg__node(ld, p->value);
        const char *name = gw_cfg__scalar(k);
        if (!name) {
            gw_cfg__err_at(ld, k, "map keys must be scalars");
            continue;
        }
        for (size_t i = 0; i < *len; i++)
            if (!strcasecmp(a[i].name, name))
                gw_cfg__err_at(ld, k, "%s: field '%s' is named twice", what, name);
        char *lname = load_name(ld, k, name, what, x->response);
        gw_tmpl_t *t =
            load_tmpl(ld, val, what, x->response ? 0 : GW_TMPL_HEADER_VARS, GW_TMPL_F_FIELD);
        if (!lname || !t) {
            gw_free(lname);
            gw_tmpl_del(t);
            continue;
        }
        a[(*len)++] = (gw_cfg_hdr_t){.name = lname, .value = t};
    }
}

static int rules_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    rules_ld_t *x = obj;
    gw_cfg_hdr_rules_t *r = x->r;
    if (!strcmp(key, "set") && !r->set) {
        load_ops(ld, x, v, "set", &r->set, &r->set_len);
    } else if (!strcmp(key, "add") && !r->add) {
        load_ops(ld, x, v, "add", &r->add, &r->add_len);
    } else if (!strcmp(key, "remove") && !r->remove) {
        char what[64];
        snprintf(what, sizeof(what), "%s.remove", x->section);
        r->remove = gw_cfg__load_str_list(ld, v, what, &r->remove_len);
        yaml_node_item_t *items =
            v->type == YAML_SEQUENCE_NODE ? v->data.sequence.items.start : NULL;
        size_t k2 = 0;
        for (size_t i = 0; r->remove && i < r->remove_len; i++) {
            yaml_node_t *at = items ? gw_cfg__node(ld, items[i]) : v;
            char *l = r->remove[i] ? load_name(ld, at, r->remove[i], what, x->response) : NULL;
            gw_free(r->remove[i]);
            if (l)
                r->remove[k2++] = l;
        }
        r->remove_len = k2;
    } else {
        static const char *const more[] = {"set", "add", "remove", NULL};
        gw_cfg__err_unknown_key(ld, k, key, x->section, NULL, 0, more);
    }
    return 0;
}

void gw_cfg__load_hdr_rules(ld_t *ld, yaml_node_t *v, const char *section, int response,
                            gw_cfg_hdr_rules_t *out)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, section))
        return;
    rules_ld_t x = {.r = out, .section = section, .response = response};
    gw_cfg__each_pair(ld, v, rules_pair, &x);
}

/* ---- routes: origin_host, strip_prefix, redirect, respond ------------------------------- */

typedef struct {
    gw_cfg_route_t *r;
    yaml_node_t *to, *content_type, *body;
} answer_ld_t;

static int redirect_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    answer_ld_t *x = obj;
    if (!strcmp(key, "to")) {
        x->to = v;
        gw_tmpl_del(x->r->redirect_to);
        x->r->redirect_to = load_tmpl(ld, v, "redirect.to", GW_TMPL_REDIRECT_VARS, GW_TMPL_F_URI);
    } else if (!strcmp(key, "status")) {
        static const field_t f[] = {
            {"status", F_UINT, offsetof(gw_cfg_route_t, redirect_status), 301, 308}};
        if (gw_cfg__set_field(ld, f, 1, key, v, x->r) && x->r->redirect_status != 301 &&
            x->r->redirect_status != 302 && x->r->redirect_status != 307 &&
            x->r->redirect_status != 308)
            gw_cfg__err_at(ld, v, "redirect status must be 301, 302, 307 or 308, not %u",
                           x->r->redirect_status);
    } else {
        static const char *const more[] = {"to", "status", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "redirect", NULL, 0, more);
    }
    return 0;
}

static int respond_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    answer_ld_t *x = obj;
    gw_cfg_route_t *r = x->r;
    if (!strcmp(key, "status")) {
        static const field_t f[] = {
            {"status", F_UINT, offsetof(gw_cfg_route_t, respond_status), 200, 599}};
        gw_cfg__set_field(ld, f, 1, key, v, r);
    } else if (!strcmp(key, "body")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, "respond.body"))
            return 0;
        x->body = v;
        gw_free(r->respond_body);
        r->respond_body_len = v->data.scalar.length;
        if (r->respond_body_len > ld->c->limits.respond_body) {
            gw_cfg__err_at(ld, v, "respond.body has %zu bytes, more than limits.respond_body (%zu)",
                           r->respond_body_len, ld->c->limits.respond_body);
            r->respond_body = NULL;
            r->respond_body_len = 0;
            return 0;
        }
        if ((r->respond_body = gw_malloc(r->respond_body_len + 1)) == NULL) {
            ld->nomem = 1;
            return 0;
        }
        memcpy(r->respond_body, v->data.scalar.value, r->respond_body_len);
        r->respond_body[r->respond_body_len] = 0;
    } else if (!strcmp(key, "content_type")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, "respond.content_type"))
            return 0;
        x->content_type = v;
        gw_free(r->respond_content_type);
        r->respond_content_type = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        gw_slice_t ct = gw_slice_str(r->respond_content_type ? r->respond_content_type : "");
        if (r->respond_content_type &&
            (!ct.len || !gw_http_field_value_valid(ct) || memchr(ct.base, '\t', ct.len)))
            gw_cfg__err_at(ld, v,
                           "respond.content_type must be a media type like "
                           "'text/html; charset=utf-8' (visible ASCII and spaces)");
    } else {
        static const char *const more[] = {"status", "body", "content_type", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "respond", NULL, 0, more);
    }
    return 0;
}

int gw_cfg__route_rules_pair(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r,
                             gw_cfg_route_rules_ld_t *x)
{
    if (!strcmp(key, "request_headers") || !strcmp(key, "response_headers")) {
        int resp = key[2] == 's';
        gw_cfg__load_hdr_rules(ld, v, key, resp, resp ? &r->response_headers : &r->request_headers);
    } else if (!strcmp(key, "origin_host")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 1;
        gw_free(r->origin_host);
        r->origin_host = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        if (r->origin_host && !gw_tmpl_host_valid(gw_slice_str(r->origin_host)))
            gw_cfg__err_at(ld, v,
                           "origin_host must be a host name, an IPv4 address or an [IPv6] "
                           "literal with an optional :port, not '%s'",
                           r->origin_host);
    } else if (!strcmp(key, "strip_prefix")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 1;
        x->strip = v;
        gw_free(r->strip_prefix);
        r->strip_prefix = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        const char *s = r->strip_prefix;
        if (s &&
            (s[0] != '/' || !s[1] || !gw_http_is_request_target(gw_slice_str(s)) || strchr(s, '?')))
            gw_cfg__err_at(ld, v,
                           "strip_prefix must be a path of more than '/' (no query), not '%s'", s);
    } else if (!strcmp(key, "redirect")) {
        x->redirect = v;
        if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, key))
            return 1;
        answer_ld_t a = {.r = r};
        r->redirect_status = 302;
        gw_cfg__each_pair(ld, v, redirect_pair, &a);
        if (!a.to)
            gw_cfg__err_at(ld, v, "missing required key 'to' in redirect");
    } else if (!strcmp(key, "respond")) {
        x->respond = v;
        if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, key))
            return 1;
        answer_ld_t a = {.r = r};
        r->respond_status = 200;
        gw_cfg__each_pair(ld, v, respond_pair, &a);
        /* RFC 9110 §15.3.5, §15.4.5: no content in a 204 or a 304 */
        if ((r->respond_status == 204 || r->respond_status == 304) && r->respond_body_len)
            gw_cfg__err_at(ld, a.body, "respond.body must be empty with status %u",
                           r->respond_status);
        if (!r->respond_content_type)
            r->respond_content_type = gw_cfg__xstrdup(ld, "text/plain; charset=utf-8");
    } else {
        return 0;
    }
    return 1;
}

void gw_cfg__route_rules_check(ld_t *ld, gw_cfg_route_t *r, const gw_cfg_route_rules_ld_t *x)
{
    gw_config_t *c = ld->c;
    r->top_request_headers = &c->request_headers;
    r->top_response_headers = &c->response_headers;
    if (x->redirect && x->respond)
        gw_cfg__err_at(ld, x->respond, "a route has either redirect or respond, not both");
    /* the prefix is cut from what the route matched: a route whose own path does not start
     * with it would forward paths the prefix never matches */
    if (r->strip_prefix && r->path && strncmp(r->path, r->strip_prefix, strlen(r->strip_prefix)))
        gw_cfg__err_at(ld, x->strip, "strip_prefix '%s' is not a prefix of the route's path '%s'",
                       r->strip_prefix, r->path);
}

/* ---- listeners: hsts, redirect_https ------------------------------------------------------ */

typedef struct {
    unsigned max_age;
    int include_subdomains, preload;
} hsts_t;

static const field_t hsts_fields[] = {
    FLD(hsts_t, max_age, F_UINT, 0, MAXU32),
    FLD(hsts_t, include_subdomains, F_BOOL, 0, 0),
    FLD(hsts_t, preload, F_BOOL, 0, 0),
};

typedef struct {
    hsts_t h;
    int have_max_age;
} hsts_ld_t;

static int hsts_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    hsts_ld_t *x = obj;
    if (!gw_cfg__set_field(ld, hsts_fields, NTAB(hsts_fields), key, v, &x->h))
        gw_cfg__err_unknown_key(ld, k, key, "hsts", hsts_fields, NTAB(hsts_fields), NULL);
    else if (!strcmp(key, "max_age"))
        x->have_max_age = 1;
    return 0;
}

int gw_cfg__listen_rules_pair(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_listen_t *l,
                              gw_cfg_listen_rules_ld_t *x)
{
    if (!strcmp(key, "hsts")) {
        x->hsts = v;
        if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, key))
            return 1;
        hsts_ld_t h = {0};
        gw_cfg__each_pair(ld, v, hsts_pair, &h);
        if (!h.have_max_age) {
            gw_cfg__err_at(ld, v, "missing required key 'max_age' in hsts (seconds)");
            return 1;
        }
        /* the preload list's submission rules (hstspreload.org): a year at least, and every
         * subdomain */
        if (h.h.preload && (h.h.max_age < 31536000 || !h.h.include_subdomains))
            gw_cfg__err_at(ld, v,
                           "hsts preload needs max_age of at least 31536000 (one year) and "
                           "include_subdomains: true");
        char val[96];
        snprintf(val, sizeof(val), "max-age=%u%s%s", h.h.max_age,
                 h.h.include_subdomains ? "; includeSubDomains" : "",
                 h.h.preload ? "; preload" : "");
        gw_free(l->hsts);
        l->hsts = gw_cfg__xstrdup(ld, val);
    } else if (!strcmp(key, "redirect_https")) {
        x->redirect_https = v;
        static const field_t f[] = {
            {"redirect_https", F_BOOL, offsetof(gw_cfg_listen_t, redirect_https), 0, 0}};
        gw_cfg__set_field(ld, f, 1, key, v, l);
    } else if (!strcmp(key, "redirect_https_port")) {
        x->redirect_https_port = v;
        static const field_t f[] = {{"redirect_https_port", F_UINT,
                                     offsetof(gw_cfg_listen_t, redirect_https_port), 1, 65535}};
        gw_cfg__set_field(ld, f, 1, key, v, l);
    } else {
        return 0;
    }
    return 1;
}

void gw_cfg__listen_rules_check(ld_t *ld, gw_cfg_listen_t *l, const gw_cfg_listen_rules_ld_t *x)
{
    if (!l->redirect_https_port)
        l->redirect_https_port = 443;
    /* RFC 6797 §7.2: an HSTS host must not send the field over non-secure transport */
    if (x->hsts && !l->tls)
        gw_cfg__err_at(ld, x->hsts, "hsts is for TLS listeners only (RFC 6797 §7.2)");
    if (l->redirect_https && l->tls)
        gw_cfg__err_at(ld, x->redirect_https,
                       "redirect_https is for cleartext listeners: this one has tls");
    if (x->redirect_https_port && !l->redirect_https)
        gw_cfg__err_at(ld, x->redirect_https_port,
                       "redirect_https_port needs redirect_https: true");
}
