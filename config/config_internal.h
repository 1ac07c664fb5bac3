/* config/config_internal.h — what the files of config/ share (not a public interface).
 *
 * toplevel.c:  the entry points (string, file, embedded default), the top level and its
 *              scalar sections, the defaults, the checks across sections.
 * listen.c:    listen[] with protocols, PROXY protocol sources and TLS.
 * upstreams.c: upstreams with servers, pool fields and health checks.
 * routes.c:    routes[].
 * rules.c:     header rules, origin_host, strip_prefix, redirect, respond (routes and the top
 *              level); hsts and redirect_https (listeners). Values through template.c.
 * client_auth.c: client certificates: a listener's client_auth (files read and checked), a
 *              route's client_cert and client_cert_chain.
 * basic_auth.c: a route's basic_auth and the htpasswd file it names.
 * acme.c:      the acme section and a listener's tls.acme names.
 * cache.c:     the cache section and a route's cache switch.
 * load.c:      the loader's machinery (ld_t): errors at a node, the node helpers, the
 *              table-driven scalar fields, lists of strings and of networks.
 * config.c:    the configuration object: its release (gw_config_del) and its error list.
 * template.c:  values with variables (config/template.h): compiled, expanded; no YAML.
 * hints.c:     messages that help: "did you mean", a port alone or out of range, tabs.
 * units.c:     sizes, durations, rates, addresses and networks as written in the file.
 * acl.c:       a route's access list (allow, deny) into prefix tries.
 * error_pages.c: error_pages (top level and routes), their files read at load.
 *
 * The calls go one way, down this list: toplevel.c calls the sections; they and toplevel.c
 * call load.c, hints.c, acl.c and error_pages.c (acl.c and error_pages.c call load.c and config.c;
 * listen.c, routes.c and toplevel.c call rules.c too, which calls load.c); hints.c calls load.c;
 * load.c calls units.c and config.c; rules.c and config.c call template.c; units.c and template.c
 * call no file of config/.
 */
#ifndef GW_CONFIG_INTERNAL_H
#define GW_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "config/config.h"

typedef struct {
    const char *file;
    yaml_document_t doc;
    gw_config_errors_t *errs;
    gw_config_t *c;
    int nomem;
    size_t nerr;
} ld_t;

/* ---- table-driven scalar fields ------------------------------------------------------------ */

typedef enum {
    F_UINT,    /* unsigned */
    F_U32,     /* uint32_t */
    F_SIZE,    /* size_t, size units */
    F_SIZE64,  /* uint64_t, size units */
    F_U32SZ,   /* uint32_t, size units */
    F_DUR,     /* uint64_t ms */
    F_RATE,    /* uint64_t bytes/s */
    F_BOOL,    /* int */
    F_STR,     /* char * */
    F_LOG,     /* int gw_log_level_t */
    F_BAL,     /* gw_balance_t */
    F_TLSVER,  /* int 12/13 */
    F_ALOGFMT, /* int gw_cfg_alog_format_t */
} fkind_t;

typedef struct {
    const char *name;
    fkind_t kind;
    size_t off;
    uint64_t min, max;
} field_t;

#define FLD(type, member, kind, lo, hi)                                                            \
    {                                                                                              \
#member, kind, offsetof(type, member), lo, hi                                              \
    }

#define NTAB(t) (sizeof(t) / sizeof((t)[0]))
#define MAXU32 4294967295ull
#define DAY_MS 86400000ull

typedef int (*pair_cb)(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj);

/* load.c */
char *gw_cfg__xstrdup(ld_t *ld, const char *s);
/* An error at n's position (line 1, column 1 when n is NULL); counted in ld->nerr. */
void gw_cfg__err_at(ld_t *ld, yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error at line:col (from 1; line 0 leaves the position out). */
void gw_cfg__err_line(ld_t *ld, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
yaml_node_t *gw_cfg__node(ld_t *ld, int id);
const char *gw_cfg__kind_str(yaml_node_t *n);
const char *gw_cfg__scalar(yaml_node_t *n);
/* A scalar written as plain `null`, `~` or nothing. */
int gw_cfg__is_null(yaml_node_t *n);
int gw_cfg__expect(ld_t *ld, yaml_node_t *n, yaml_node_type_t t, const char *key);
/* Which of two words the scalar v of key is: 0 for a, 1 for b; -1 after reporting
 * "'key' must be a or b, not '...'" (or that v is not a scalar). */
int gw_cfg__one_of(ld_t *ld, yaml_node_t *v, const char *key, const char *a, const char *b);
/* The value of key in map (a mapping node; its first occurrence), or NULL. */
yaml_node_t *gw_cfg__map_value(ld_t *ld, yaml_node_t *map, const char *key);
/* cb for every pair of the mapping map; duplicate keys and non-scalar keys are reported and
 * skipped. */
void gw_cfg__each_pair(ld_t *ld, yaml_node_t *map, pair_cb cb, void *obj);
/* Parse v into the field of tab named key (its YAML spelling) in obj; returns 1 if `key` is in
 * the table (handled, errors reported), 0 if unknown. */
int gw_cfg__set_field(ld_t *ld, const field_t *tab, size_t ntab, const char *key, yaml_node_t *v,
                      void *obj);
/* A scalar or a list of scalars at v for key, as an allocated array of *len strings (freed
 * with gw_cfg__free_str_list); NULL when it is neither (reported) or out of memory. */
char **gw_cfg__load_str_list(ld_t *ld, yaml_node_t *v, const char *key, size_t *len);
/* The array for the non-empty YAML list v of key (elements of elem bytes, zeroed, *n of them),
 * or NULL with the error reported: not a list, an empty list (`what` names one element), or no
 * memory. */
void *gw_cfg__load_list(ld_t *ld, yaml_node_t *v, const char *key, const char *what, size_t elem,
                        size_t *n);
/* A list of networks (ADDRESS or ADDRESS/BITS) at v for key, into *out (replacing it, freed
 * with gw_free) and *len; each bad entry is an error at its node. allow_any: `any` is every
 * IPv4 and IPv6 source. Returns how many names were given (0: an empty list). */
int gw_cfg__load_nets(ld_t *ld, yaml_node_t *v, const char *key, int allow_any, gw_cfg_net_t **out,
                      size_t *len);
/* HOST:PORT, [IPv6]:PORT or NAME:PORT into *addr (for a name only .text is set: it is resolved
 * when dialled) and its host part, allocated, into *host (replacing what was there). 0,
 * GW_E_PARSE (not an address: the caller says so, gw_cfg__err_addr), GW_E_RANGE (the port is
 * not 1..65535) or GW_E_NOMEM (ld->nomem is set). */
int gw_cfg__host_port(ld_t *ld, const char *text, gw_cfg_addr_t *addr, char **host);
/* Where n was written, for the gw_config_t (see gw_cfg_pos_t). */
gw_cfg_pos_t gw_cfg__pos(ld_t *ld, yaml_node_t *n);
/* The YAML spelling of a table's field name (settings_timeout_ms is written settings_timeout). */
const char *gw_cfg__yaml_name(const char *name);

/* hints.c */
/* The closest candidate to a word written where it is not valid: feed every valid word with
 * gw_cfg__suggest(); best stays NULL unless one is a typo away (a few edits, case ignored). */
typedef struct {
    const char *best; /* points to the candidate given */
    size_t dist;      /* start with SIZE_MAX */
} gw_cfg_suggest_t;
void gw_cfg__suggest(gw_cfg_suggest_t *sg, const char *word, const char *cand);
/* "unknown key 'KEY'" (" in WHERE" when where is not NULL), then "; did you mean 'X'?" when a
 * key valid there is close to it: the names of tab[0..ntab) as written in YAML, and the
 * NULL-terminated list more (tab and more may be NULL). */
void gw_cfg__err_unknown_key(ld_t *ld, yaml_node_t *k, const char *key, const char *where,
                             const field_t *tab, size_t ntab, const char *const *more);
/* An address that gw_parse_addr (or gw_cfg__host_port) refused with rv, reported at v:
 * a port out of range says so; a port alone (`8443`, `:8443`) says how to write it (listen=1:
 * with the interfaces to bind; 0: with the host to reach); anything else "'KEY' must be FORMS,
 * not 'TEXT'". */
void gw_cfg__err_addr(ld_t *ld, yaml_node_t *v, const char *key, int rv, int listen,
                      const char *forms);
/* Whether a tab is where libyaml stopped (line and column from 0) or in that line's
 * indentation (text[0..len) is the document). */
int gw_cfg__tab_at(const char *text, size_t len, size_t line, size_t column);

/* listen.c */
void gw_cfg__load_listen(ld_t *ld, yaml_node_t *v);
/* client_auth.c */
/* client_auth's mapping v into *a (what it held freed): mode (default require), ca, crl, depth;
 * the files are read and checked for PEM now (errors at their keys). */
void gw_cfg__load_client_auth(ld_t *ld, yaml_node_t *v, gw_cfg_client_auth_t *a);
/* A deep copy of src into dst (a certificate inheriting its listener's): 0, or -1 out of
 * memory (ld->nomem set). */
int gw_cfg__copy_client_auth(ld_t *ld, gw_cfg_client_auth_t *dst, const gw_cfg_client_auth_t *src);
/* A route's client_cert (required|optional) or client_cert_chain (bool) into r: 1 when key is
 * one of them (errors reported), else 0. The listeners must be loaded. */
int gw_cfg__route_client_cert(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r);
/* upstreams.c */
void gw_cfg__load_upstreams(ld_t *ld, yaml_node_t *v);
/* routes.c (after the listeners and the upstreams: a route names them) */
void gw_cfg__load_routes(ld_t *ld, yaml_node_t *v);
/* basic_auth.c: a route's basic_auth mapping v into *out (replacing it), its users file read */
void gw_cfg__load_basic_auth(ld_t *ld, yaml_node_t *v, gw_cfg_basic_auth_t **out);
void gw_cfg__free_basic_auth(gw_cfg_basic_auth_t *a);

/* rules.c (listen.c, routes.c and toplevel.c call it) */
/* request_headers / response_headers (section names the key) at v into *out. */
void gw_cfg__load_hdr_rules(ld_t *ld, yaml_node_t *v, const char *section, int response,
                            gw_cfg_hdr_rules_t *out);
/* Where a route's or a listener's keys of rules.c were written, for the checks after all. */
typedef struct {
    yaml_node_t *strip, *redirect, *respond;
} gw_cfg_route_rules_ld_t;
typedef struct {
    yaml_node_t *hsts, *redirect_https, *redirect_https_port;
} gw_cfg_listen_rules_ld_t;
/* A route key of rules.c (request_headers, response_headers, origin_host, strip_prefix,
 * redirect, respond) into r: 1 when key is one (errors reported), else 0. */
int gw_cfg__route_rules_pair(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r,
                             gw_cfg_route_rules_ld_t *x);
/* After the route's keys: what needs several of them (strip_prefix against path). */
void gw_cfg__route_rules_check(ld_t *ld, gw_cfg_route_t *r, const gw_cfg_route_rules_ld_t *x);
/* A listener key of rules.c (hsts, redirect_https, redirect_https_port): 1 when key is one. */
int gw_cfg__listen_rules_pair(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_listen_t *l,
                              gw_cfg_listen_rules_ld_t *x);
/* After the listener's keys: hsts only with tls, redirect_https only without. */
void gw_cfg__listen_rules_check(ld_t *ld, gw_cfg_listen_t *l, const gw_cfg_listen_rules_ld_t *x);

/* config.c */
/* Append "FILE:LINE:COL: body" (or "FILE: body" for line 0) to e: 0 or GW_E_NOMEM. */
int gw_cfg__push_msg(gw_config_errors_t *e, const char *file, size_t line, size_t col,
                     const char *body);
void gw_cfg__free_str_list(char **l, size_t n);
void gw_cfg__free_tls(gw_cfg_tls_t *t);
void gw_cfg__free_hdr_rules(gw_cfg_hdr_rules_t *r);

/* acl.c */
/* key `allow` or `deny` of route r with value v, into r->acl (made on the first): 1 when key
 * is one of them (errors reported at each entry), else 0. */
int gw_cfg__load_acl(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r);

/* error_pages.c */
/* The map v (STATUS: FILE) into *pages (replacing it); the files are read later. */
void gw_cfg__load_error_pages(ld_t *ld, yaml_node_t *v, gw_cfg_error_pages_t *pages);
/* Read every page file of the top level and the routes (at most c->error_page_max bytes
 * each); a file that cannot be read or is too large is an error at its name. */
void gw_cfg__read_error_pages(ld_t *ld);

/* config.c (release) */
void gw_cfg__free_error_pages(gw_cfg_error_pages_t *p);

/* acme.c: the acme section at v into ld->c->acme; a listener's tls.acme names at v; the checks
 * across sections (every tls.acme has an acme section; the state folder's default). */
void gw_cfg__load_acme(ld_t *ld, yaml_node_t *v);
void gw_cfg__load_tls_acme(ld_t *ld, gw_cfg_tls_t *tls, yaml_node_t *v);
void gw_cfg__check_acme(ld_t *ld);

/* cache.c: the cache section at v into ld->c->cache (its defaults set by toplevel.c); a
 * route's `cache` key (1 when key is it, errors reported); the checks after every section. */
void gw_cfg__load_cache(ld_t *ld, yaml_node_t *v);
int gw_cfg__route_cache(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r);

/* units.c */
/* "10.0.0.0/8", "192.168.1.7", "::1", "2001:db8::/32" into *n: 0, or -1. */
int gw_cfg__parse_net(const char *s, gw_cfg_net_t *n);

#endif
