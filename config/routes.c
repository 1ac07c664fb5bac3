/* config/routes.c — the routes[] section: host and path patterns, the upstream each names
 * (checked against the upstreams read before), the per-route switches and lists. */
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "config/config_internal.h"
#include "http/http.h"

/* Drop later duplicates from a list of field names, compared case-insensitively (field names
 * are, RFC 9110 §5.1): `[accept, Accept]` is one field. */
static void dedup_nocase(char **l, size_t *n)
{
    if (!l)
        return;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++)
            dup = l[i] && l[j] && gw_slice_eq_nocase(gw_slice_str(l[i]), gw_slice_str(l[j]));
        if (dup)
            gw_free(l[i]);
        else
            l[k++] = l[i];
    }
    *n = k;
}

/* ---- routes ---- */

static const field_t route_fields[] = {
    {"coalesce", F_BOOL, offsetof(gw_cfg_route_t, coalesce), 0, 0},
    {"coalesce_private", F_BOOL, offsetof(gw_cfg_route_t, coalesce_private), 0, 0},
    {"x_forwarded", F_BOOL, offsetof(gw_cfg_route_t, add_x_forwarded), 0, 0},
    {"forwarded", F_BOOL, offsetof(gw_cfg_route_t, add_forwarded), 0, 0},
    {"via", F_BOOL, offsetof(gw_cfg_route_t, add_via), 0, 0},
    FLD(gw_cfg_route_t, response_rate, F_RATE, 0, 1ull << 40),
    FLD(gw_cfg_route_t, request_rate, F_UINT, 0, 1000000),
    FLD(gw_cfg_route_t, request_burst, F_UINT, 0, 1000000),
    {"compress", F_BOOL, offsetof(gw_cfg_route_t, compress), 0, 0},
    {"websocket", F_BOOL, offsetof(gw_cfg_route_t, websocket), 0, 0},
    {"early_hints_h1", F_BOOL, offsetof(gw_cfg_route_t, early_hints_h1), 0, 0},
    {"early_hints_learn", F_BOOL, offsetof(gw_cfg_route_t, early_hints_learn), 0, 0},
    {"early_hints_learn_private", F_BOOL, offsetof(gw_cfg_route_t, early_hints_learn_private), 0,
     0},
    {"push", F_BOOL, offsetof(gw_cfg_route_t, push), 0, 0},
    {"intercept_errors", F_BOOL, offsetof(gw_cfg_route_t, intercept_errors), 0, 0},
};

typedef struct {
    gw_cfg_route_t *r;
    yaml_node_t *host, *path, *up, *name, *push;
    gw_cfg_route_rules_ld_t rules; /* rules.c's keys */
} route_ld_t;

/* RFC 8288 §3: link-value = "<" URI-Reference ">" *( OWS ";" OWS link-param ); checked loosely
 * (a target in angle brackets, then printable bytes), since it goes out as a field value. */
static int link_value_ok(const char *s)
{
    if (s[0] != '<')
        return 0;
    const char *gt = strchr(s, '>');
    if (!gt || gt == s + 1)
        return 0;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            return 0;
    for (const char *p = s + 1; p < gt; p++)
        if (*p == ' ' || *p == '<')
            return 0;
    return 1;
}

static int route_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    route_ld_t *x = obj;
    if (!strcmp(key, "name")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        gw_free(x->r->name);
        x->r->name = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        x->name = v;
    } else if (!strcmp(key, "host") || !strcmp(key, "path") || !strcmp(key, "upstream")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        char **dst = key[0] == 'h'   ? &x->r->host
                     : key[0] == 'p' ? &x->r->path
                                     : &x->r->upstream_name;
        *(key[0] == 'h' ? &x->host : key[0] == 'p' ? &x->path : &x->up) = v;
        gw_free(*dst);
        *dst = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
    } else if (!strcmp(key, "coalesce_headers")) {
        gw_cfg__free_str_list(x->r->coalesce_headers, x->r->coalesce_headers_len);
        x->r->coalesce_headers = gw_cfg__load_str_list(ld, v, key, &x->r->coalesce_headers_len);
        dedup_nocase(x->r->coalesce_headers, &x->r->coalesce_headers_len);
    } else if (!strcmp(key, "early_hints")) {
        gw_cfg__free_str_list(x->r->early_hints, x->r->early_hints_len);
        x->r->early_hints = gw_cfg__load_str_list(ld, v, key, &x->r->early_hints_len);
        for (size_t i = 0; i < x->r->early_hints_len; i++)
            if (x->r->early_hints[i] && !link_value_ok(x->r->early_hints[i]))
                gw_cfg__err_at(ld, v,
                               "early_hints entry '%s' must be a Link value like "
                               "'</app.css>; rel=preload; as=style'",
                               x->r->early_hints[i]);
    } else if (gw_cfg__route_rules_pair(ld, key, v, x->r, &x->rules)) {
        /* rules.c: header rules, origin_host, strip_prefix, redirect, respond */
    } else if (!strcmp(key, "basic_auth")) {
        gw_cfg__load_basic_auth(ld, v, &x->r->basic_auth);
    } else if (!strcmp(key, "push") &&
               gw_cfg__set_field(ld, route_fields, NTAB(route_fields), key, v, x->r)) {
        x->push = v;
    } else if (!strcmp(key, "error_pages")) {
        gw_cfg__load_error_pages(ld, v, &x->r->error_pages);
    } else if (gw_cfg__route_client_cert(ld, key, v, x->r)) {
        /* client_auth.c */
    } else if (gw_cfg__route_cache(ld, key, v, x->r)) {
        /* cache.c */
    } else if (!gw_cfg__load_acl(ld, key, v, x->r) &&
               !gw_cfg__set_field(ld, route_fields, NTAB(route_fields), key, v, x->r)) {
        static const char *const more[] = {"name",
                                           "host",
                                           "path",
                                           "upstream",
                                           "coalesce_headers",
                                           "early_hints",
                                           "allow",
                                           "deny",
                                           "error_pages",
                                           "request_headers",
                                           "response_headers",
                                           "origin_host",
                                           "strip_prefix",
                                           "redirect",
                                           "respond",
                                           "client_cert",
                                           "client_cert_chain",
                                           "basic_auth",
                                           "cache",
                                           NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a route", route_fields, NTAB(route_fields), more);
    }
    return 0;
}

/* What a request's host can be compared with (proxy/route.c compares the host without its
 * port): "*", "*.suffix", a name, or an IPv6 literal as RFC 3986 §3.2.2 writes it ("[::1]").
 * A ':' outside brackets (a port, "::1") would never match anything. */
static int valid_host_pattern(const char *h)
{
    if (!strcmp(h, "*"))
        return 1;
    if (h[0] == '[')
        return gw_http_is_ip_literal(gw_slice_str(h));
    if (h[0] == '*') {
        if (h[1] != '.' || !h[2])
            return 0;
        h += 2;
    }
    if (!*h)
        return 0;
    for (; *h; h++) {
        char ch = *h;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.'))
            return 0;
    }
    return 1;
}

/* An IPv6 literal host is held in its canonical text (RFC 5952: "[0:0::0001]" is "[::1]"), the
 * form proxy/route.c compares the request's host in, so that any spelling on either side
 * names the same address; the default route name is made of it too. */
static void canon_host(ld_t *ld, gw_cfg_route_t *r)
{
    char canon[GW_HTTP_IP6_LITERAL_MAX];
    if (!gw_http_ip_literal_canon(gw_slice_str(r->host), canon, sizeof(canon)) ||
        !strcmp(canon, r->host))
        return;
    char *d = gw_cfg__xstrdup(ld, canon);
    if (!d)
        return;
    gw_free(r->host);
    r->host = d;
}

/* A route's path must be what origins read it as (gw_http_path_as_read): requests are refused
 * when the path they name once so read takes another route (proxy/request.c), which would be
 * every request of a route whose own path reads otherwise. */
static void path_as_read(ld_t *ld, yaml_node_t *at, const char *path)
{
    size_t len = strlen(path);
    uint8_t st[256], *out = len < sizeof(st) ? st : gw_malloc(len + 1);
    if (!out) {
        ld->nomem = 1;
        return;
    }
    size_t n = gw_http_path_as_read(gw_slice_str(path), out);
    if (n != len || memcmp(out, path, n))
        gw_cfg__err_at(ld, at,
                       "route path '%s' reads as '%.*s' to origins (dot segments, '//', ';' "
                       "parameters, a query, percent-encoded letters, digits or slashes): "
                       "write it so",
                       path, (int)n, (const char *)out);
    if (out != st)
        gw_free(out);
}

/* "route names unknown upstream 'X'", the closest name if one is a typo away, and the names
 * there are (as many as the message holds). */
static void err_unknown_upstream(ld_t *ld, yaml_node_t *at, const char *name)
{
    const gw_config_t *c = ld->c;
    gw_cfg_suggest_t sg = {.dist = SIZE_MAX};
    char known[320];
    size_t kl = 0;
    known[0] = 0;
    for (size_t i = 0; i < c->upstreams_len; i++) {
        const char *n = c->upstreams[i].name;
        if (!n)
            continue;
        gw_cfg__suggest(&sg, name, n);
        size_t need = strlen(n) + 2;
        if (kl + need + 5 >= sizeof(known)) {
            memcpy(known + kl, kl ? ", ..." : "...", kl ? 6 : 4);
            break;
        }
        kl += (size_t)snprintf(known + kl, sizeof(known) - kl, "%s%s", kl ? ", " : "", n);
    }
    gw_cfg__err_at(ld, at, "route names unknown upstream '%s'%s%s%s (upstreams: %s)", name,
                   sg.best ? "; did you mean '" : "", sg.best ? sg.best : "", sg.best ? "'?" : "",
                   known);
}

/* Whether some listener could carry a push (RFC 9113 §8.4 is HTTP/2 only). */
static int push_listener(const gw_config_t *c)
{
    for (size_t i = 0; i < c->listen_len; i++)
        if (c->listen[i].push && (c->listen[i].protocols & (GW_PROTO_F_H2 | GW_PROTO_F_H2C)))
            return 1;
    return 0;
}

void gw_cfg__load_routes(ld_t *ld, yaml_node_t *v)
{
    size_t n;
    gw_config_t *c = ld->c;
    if (!(c->routes = gw_cfg__load_list(ld, v, "routes", "route", sizeof(*c->routes), &n)))
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *rn = gw_cfg__node(ld, v->data.sequence.items.start[i]);
        if (!gw_cfg__expect(ld, rn, YAML_MAPPING_NODE, "routes"))
            continue;
        gw_cfg_route_t *r = &c->routes[c->routes_len++];
        r->line = (int)rn->start_mark.line + 1;
        r->coalesce = 1;
        r->websocket = 1;
        r->cache_stale_if_error = r->cache_stale_while_revalidate = -1; /* the cache section's */
        r->add_x_forwarded = 1;
        r->add_forwarded = 0;
        r->add_via = 1;
        route_ld_t x = {.r = r};
        gw_cfg__each_pair(ld, rn, route_pair, &x);
        if (!r->coalesce_headers && !ld->nomem) {
            r->coalesce_headers = gw_calloc(1, sizeof(char *));
            if (r->coalesce_headers) {
                r->coalesce_headers[0] = gw_cfg__xstrdup(ld, "accept-encoding");
                r->coalesce_headers_len = 1;
            } else {
                ld->nomem = 1;
            }
        }
        if (ld->nomem)
            return; /* strings may be missing: the load fails with GW_E_NOMEM anyway */
        if (!r->host)
            r->host = gw_cfg__xstrdup(ld, "*");
        else if (!valid_host_pattern(r->host))
            gw_cfg__err_at(ld, x.host,
                           "route host must be a name, '*.suffix', '*' or an IPv6 literal such as "
                           "'[::1]' (without a port), not '%s'",
                           r->host);
        else if (r->host[0] == '[')
            canon_host(ld, r);
        if (!r->path)
            r->path = gw_cfg__xstrdup(ld, "/");
        else if (r->path[0] != '/')
            gw_cfg__err_at(ld, x.path, "route path must start with '/', not '%s'", r->path);
        else
            path_as_read(ld, x.path, r->path);
        if (ld->nomem)
            return;
        gw_cfg__route_rules_check(ld, r, &x.rules);
        /* a route's name labels its metrics and log lines: by default its host and path */
        if (!r->name) {
            size_t hl = strlen(r->host), pl = strlen(r->path);
            r->name = gw_malloc(hl + pl + 1);
            if (!r->name) {
                ld->nomem = 1;
                return;
            }
            memcpy(r->name, r->host, hl);
            memcpy(r->name + hl, r->path, pl + 1);
        } else if (!r->name[0] || strlen(r->name) > 128) {
            gw_cfg__err_at(ld, x.name, "route name must be 1 to 128 characters");
        }
        for (size_t j = 0; j + 1 < c->routes_len; j++)
            if (x.name && c->routes[j].name && !strcmp(c->routes[j].name, r->name))
                gw_cfg__err_at(ld, x.name, "duplicate route name '%s' (first on line %d)", r->name,
                               c->routes[j].line);
        if (r->push && !push_listener(c))
            gw_cfg__err_at(ld, x.push,
                           "push: true needs a listener that speaks HTTP/2 (h2 or h2c) and does "
                           "not say push: false; every listener here is HTTP/1.1 only or has push "
                           "off");
        if (!x.up) {
            gw_cfg__err_at(ld, rn, "missing required key 'upstream' in a route");
            continue;
        }
        size_t j = 0;
        while (j < c->upstreams_len &&
               (!c->upstreams[j].name || strcmp(c->upstreams[j].name, r->upstream_name)))
            j++;
        if (j == c->upstreams_len)
            err_unknown_upstream(ld, x.up, r->upstream_name);
        r->upstream = j;
    }
}
