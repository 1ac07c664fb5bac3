/* config/sections.c — the list sections of the config: listen[] (with its TLS certificates),
 * upstreams (servers, health) and routes[], each checked as it is read (see config.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "config/config_internal.h"
#include "h2/defaults.h"

/* ---- tls ---- */

static const field_t tls_fields[] = {
    FLD(gw_cfg_tls_t, min_version, F_TLSVER, 0, 0),
    FLD(gw_cfg_tls_t, prefer_h2, F_BOOL, 0, 0),
    FLD(gw_cfg_tls_t, session_tickets, F_BOOL, 0, 0),
    FLD(gw_cfg_tls_t, ticket_rotation_ms, F_DUR, 1000, 30 * DAY_MS),
    FLD(gw_cfg_tls_t, ciphers, F_STR, 0, 0),
    FLD(gw_cfg_tls_t, ciphersuites, F_STR, 0, 0),
    FLD(gw_cfg_tls_t, session_id_context, F_STR, 0, 0),
    FLD(gw_cfg_tls_t, self_signed, F_BOOL, 0, 0),
};

typedef struct {
    gw_cfg_cert_t cert;
    yaml_node_t *cert_node, *key_node;
} cert_ld_t;

static int cert_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    cert_ld_t *c = obj;
    if (!strcmp(key, "certificate") || !strcmp(key, "key")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        char **dst = !strcmp(key, "key") ? &c->cert.key : &c->cert.certificate;
        gw_free(*dst);
        *dst = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        if (!strcmp(key, "key")) {
            c->key_node = v;
            c->cert.key_at = gw_cfg__pos(ld, v);
        } else {
            c->cert_node = v;
            c->cert.certificate_at = gw_cfg__pos(ld, v);
        }
    } else if (!strcmp(key, "names")) {
        gw_cfg__free_str_list(c->cert.names, c->cert.names_len);
        c->cert.names = gw_cfg__load_str_list(ld, v, key, &c->cert.names_len);
    } else {
        static const char *const more[] = {"certificate", "key", "names", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a certificate", NULL, 0, more);
    }
    return 0;
}

static int push_cert(ld_t *ld, gw_cfg_tls_t *t, cert_ld_t *c)
{
    gw_cfg_cert_t *n = gw_realloc(t->certs, (t->certs_len + 1) * sizeof(*n));
    if (!n) {
        ld->nomem = 1;
        gw_free(c->cert.certificate);
        gw_free(c->cert.key);
        gw_cfg__free_str_list(c->cert.names, c->cert.names_len);
        return GW_E_NOMEM;
    }
    t->certs = n;
    t->certs[t->certs_len++] = c->cert;
    return 0;
}

typedef struct {
    gw_cfg_tls_t *tls;
    cert_ld_t top; /* certificate/key written directly in tls: */
    yaml_node_t *certs_node;
    yaml_node_t *map;
    yaml_node_t *keys_node; /* ticket_keys */
} tls_ld_t;

static int tls_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    tls_ld_t *t = obj;
    if (!strcmp(key, "certificate") || !strcmp(key, "key") || !strcmp(key, "names"))
        return cert_pair(ld, key, k, v, &t->top);
    if (!strcmp(key, "certificates")) {
        if (!gw_cfg__expect(ld, v, YAML_SEQUENCE_NODE, key))
            return 0;
        t->certs_node = v;
        return 0;
    }
    if (!strcmp(key, "alpn_preference")) {
        const char *s = v->type == YAML_SCALAR_NODE ? gw_cfg__scalar(v) : NULL;
        if (s && !strcmp(s, "h2"))
            t->tls->prefer_h2 = 1;
        else if (s && !strcmp(s, "http/1.1"))
            t->tls->prefer_h2 = 0;
        else
            gw_cfg__err_at(ld, v, "'alpn_preference' must be h2 or http/1.1");
        return 0;
    }
    if (!strcmp(key, "ticket_keys")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        gw_free(t->tls->ticket_keys_path);
        t->tls->ticket_keys_path = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        t->keys_node = v;
        return 0;
    }
    if (!strcmp(key, "ticket_key_cipher")) {
        const char *s = v->type == YAML_SCALAR_NODE ? gw_cfg__scalar(v) : NULL;
        if (s && !strcmp(s, "aes-128-cbc"))
            t->tls->ticket_key_len = 48;
        else if (s && !strcmp(s, "aes-256-cbc"))
            t->tls->ticket_key_len = 80;
        else
            gw_cfg__err_at(ld, v, "'ticket_key_cipher' must be aes-128-cbc or aes-256-cbc");
        return 0;
    }
    if (!strcmp(key, "ciphers"))
        t->tls->ciphers_at = gw_cfg__pos(ld, v);
    else if (!strcmp(key, "ciphersuites"))
        t->tls->ciphersuites_at = gw_cfg__pos(ld, v);
    if (!gw_cfg__set_field(ld, tls_fields, NTAB(tls_fields), key, v, t->tls)) {
        static const char *const more[] = {"certificate",     "key",         "names",
                                           "certificates",    "ticket_keys", "ticket_key_cipher",
                                           "alpn_preference", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "tls", tls_fields, NTAB(tls_fields), more);
    }
    return 0;
}

#define TICKET_KEYS_MAX 64

/* tls.ticket_keys (nghttpx's --tls-ticket-key-file format): read now, so that a bad file is a
 * configuration error, and a reload reads the file again. */
static void load_ticket_keys(ld_t *ld, gw_cfg_tls_t *tls, yaml_node_t *n)
{
    const char *path = tls->ticket_keys_path;
    unsigned kl = tls->ticket_key_len;
    if (!path)
        return;
    FILE *f = fopen(path, "rb");
    if (!f) {
        gw_cfg__err_at(ld, n, "ticket_keys file '%s' cannot be read: %s", path, strerror(errno));
        return;
    }
    unsigned char buf[TICKET_KEYS_MAX * 80 + 1];
    size_t len = fread(buf, 1, sizeof(buf), f);
    int err = ferror(f);
    fclose(f);
    if (err)
        gw_cfg__err_at(ld, n, "ticket_keys file '%s' cannot be read", path);
    else if (len == 0 || len % kl || len / kl > TICKET_KEYS_MAX)
        gw_cfg__err_at(ld, n,
                       "ticket_keys file '%s' has %zu bytes: it must hold 1 to %d keys of %u bytes "
                       "(%s: a 16-byte name, a %u-byte AES key, a %u-byte HMAC key)",
                       path, len, TICKET_KEYS_MAX, kl, kl == 48 ? "aes-128-cbc" : "aes-256-cbc",
                       (kl - 16) / 2, (kl - 16) / 2);
    else if (!(tls->ticket_keys = gw_malloc(len)))
        ld->nomem = 1;
    else {
        memcpy(tls->ticket_keys, buf, len);
        tls->ticket_keys_len = len;
    }
    explicit_bzero(buf, sizeof(buf));
}

static void check_file(ld_t *ld, yaml_node_t *n, const char *what, const char *path)
{
    if (access(path, R_OK) != 0)
        gw_cfg__err_at(ld, n, "%s file '%s' cannot be read: %s", what, path, strerror(errno));
}

static void check_cert(ld_t *ld, gw_cfg_tls_t *tls, cert_ld_t *c, yaml_node_t *where)
{
    if (!c->cert.certificate)
        gw_cfg__err_at(ld, where, "missing required key 'certificate'");
    if (!c->cert.key)
        gw_cfg__err_at(ld, where, "missing required key 'key'");
    if (!c->cert.certificate || !c->cert.key)
        return;
    /* A self-signed pair is generated at start when both files are missing. */
    if (tls->self_signed && access(c->cert.certificate, F_OK) != 0 &&
        access(c->cert.key, F_OK) != 0)
        return;
    check_file(ld, c->cert_node, "certificate", c->cert.certificate);
    check_file(ld, c->key_node, "key", c->cert.key);
}

static gw_cfg_tls_t *load_tls(ld_t *ld, yaml_node_t *v)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "tls"))
        return NULL;
    gw_cfg_tls_t *tls = gw_calloc(1, sizeof(*tls));
    if (!tls) {
        ld->nomem = 1;
        return NULL;
    }
    tls->min_version = 12;
    tls->prefer_h2 = 1;
    tls->session_tickets = 1;
    tls->ticket_rotation_ms = 3600000;
    tls->ticket_key_len = 48;
    tls_ld_t t = {.tls = tls, .map = v};
    gw_cfg__each_pair(ld, v, tls_pair, &t);
    if (t.keys_node)
        load_ticket_keys(ld, tls, t.keys_node);
    if (!tls->session_id_context)
        tls->session_id_context = gw_cfg__xstrdup(ld, "h2gate");
    else if (!tls->session_id_context[0] || strlen(tls->session_id_context) > 32)
        gw_cfg__err_at(ld, v, "'session_id_context' must be 1 to 32 bytes");
    int have_top = t.top.cert.certificate || t.top.cert.key || t.top.cert.names_len;
    if (have_top || !t.certs_node) {
        check_cert(ld, tls, &t.top, v);
        push_cert(ld, tls, &t.top);
    } else {
        /* a `names:` with no name (empty, or every item refused) beside `certificates:` */
        gw_cfg__free_str_list(t.top.cert.names, t.top.cert.names_len);
    }
    if (t.certs_node) {
        yaml_node_item_t *it = t.certs_node->data.sequence.items.start;
        for (; it < t.certs_node->data.sequence.items.top; it++) {
            yaml_node_t *cn = gw_cfg__node(ld, *it);
            if (!gw_cfg__expect(ld, cn, YAML_MAPPING_NODE, "certificates"))
                continue;
            cert_ld_t c = {0};
            gw_cfg__each_pair(ld, cn, cert_pair, &c);
            check_cert(ld, tls, &c, cn);
            push_cert(ld, tls, &c);
        }
    }
    return tls;
}

void gw_cfg__free_tls(gw_cfg_tls_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->certs_len; i++) {
        gw_free(t->certs[i].certificate);
        gw_free(t->certs[i].key);
        gw_cfg__free_str_list(t->certs[i].names, t->certs[i].names_len);
    }
    gw_free(t->certs);
    gw_free(t->ciphers);
    gw_free(t->ciphersuites);
    gw_free(t->ticket_keys_path);
    gw_free(t->session_id_context);
    if (t->ticket_keys)
        explicit_bzero(t->ticket_keys, t->ticket_keys_len);
    gw_free(t->ticket_keys);
    gw_free(t);
}

/* ---- listen ---- */

typedef struct {
    gw_cfg_listen_t *l;
    yaml_node_t *addr_node, *proto_node;
    yaml_node_t *pp_node; /* proxy_protocol's value */
    int pp_from;          /* proxy_protocol_from named a network, or any (valid or not) */
} listen_ld_t;

static int listen_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    listen_ld_t *x = obj;
    if (!strcmp(key, "address")) {
        x->addr_node = v;
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        int rv = gw_parse_addr(gw_cfg__scalar(v), &x->l->addr);
        if (rv < 0)
            gw_cfg__err_addr(ld, v, "address", rv, 1, "IP:PORT or [IPv6]:PORT");
    } else if (!strcmp(key, "tls")) {
        gw_cfg__free_tls(x->l->tls);
        x->l->tls = load_tls(ld, v);
    } else if (!strcmp(key, "protocols")) {
        x->proto_node = v;
    } else if (!strcmp(key, "backlog")) {
        static const field_t f[] = {FLD(gw_cfg_listen_t, backlog, F_UINT, 1, 65535)};
        gw_cfg__set_field(ld, f, 1, key, v, x->l);
    } else if (!strcmp(key, "early_hints")) {
        static const field_t f[] = {
            {"early_hints", F_BOOL, offsetof(gw_cfg_listen_t, early_hints), 0, 0}};
        gw_cfg__set_field(ld, f, 1, key, v, x->l);
    } else if (!strcmp(key, "push")) {
        static const field_t f[] = {{"push", F_BOOL, offsetof(gw_cfg_listen_t, push), 0, 0}};
        gw_cfg__set_field(ld, f, 1, key, v, x->l);
    } else if (!strcmp(key, "proxy_protocol")) {
        x->pp_node = v;
        static const field_t f[] = {
            {"proxy_protocol", F_BOOL, offsetof(gw_cfg_listen_t, proxy_protocol), 0, 0}};
        gw_cfg__set_field(ld, f, 1, key, v, x->l);
    } else if (!strcmp(key, "proxy_protocol_timeout")) {
        static const field_t f[] = {{"proxy_protocol_timeout", F_DUR,
                                     offsetof(gw_cfg_listen_t, proxy_timeout_ms), 1, 3600000}};
        gw_cfg__set_field(ld, f, 1, key, v, x->l);
    } else if (!strcmp(key, "proxy_protocol_from")) {
        x->pp_from = gw_cfg__load_nets(ld, v, key, 1, &x->l->proxy_from, &x->l->proxy_from_len) > 0;
    } else {
        static const char *const more[] = {"address",
                                           "tls",
                                           "protocols",
                                           "backlog",
                                           "early_hints",
                                           "push",
                                           "proxy_protocol",
                                           "proxy_protocol_timeout",
                                           "proxy_protocol_from",
                                           NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a listener", NULL, 0, more);
    }
    return 0;
}

/* "10.0.0.0/8", "192.168.1.7", "::1", "2001:db8::/32": 0 and *n, or -1. */
static int parse_net(const char *s, gw_cfg_net_t *n)
{
    char a[64];
    const char *slash = strchr(s, '/');
    size_t al = slash ? (size_t)(slash - s) : strlen(s);
    if (al == 0 || al >= sizeof(a))
        return -1;
    memcpy(a, s, al);
    a[al] = 0;
    memset(n, 0, sizeof(*n));
    unsigned max;
    if (inet_pton(AF_INET, a, n->addr) == 1) {
        n->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, a, n->addr) == 1) {
        n->family = AF_INET6;
        max = 128;
    } else {
        return -1;
    }
    n->bits = max;
    if (slash) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (!slash[1] || *end || b > max)
            return -1;
        n->bits = (unsigned)b;
    }
    return 0;
}

/* A list of networks at v into *out; with allow_any, `any` (alone or in the list) is every IPv4
 * and IPv6 source, spelled out because (for proxy_protocol_from) it lets any client name any
 * address. Returns how many names were given (0: an empty list), each bad one reported. */
int gw_cfg__load_nets(ld_t *ld, yaml_node_t *v, const char *key, int allow_any, gw_cfg_net_t **out,
                      size_t *len)
{
    size_t n;
    char **names = gw_cfg__load_str_list(ld, v, key, &n);
    yaml_node_item_t *items = v->type == YAML_SEQUENCE_NODE ? v->data.sequence.items.start : NULL;
    gw_free(*out);
    /* one more than the names: `any` takes two (0.0.0.0/0 and ::/0) */
    *out = n ? gw_calloc(n + 1, sizeof(**out)) : NULL;
    *len = 0;
    if (n && !*out)
        ld->nomem = 1;
    int any = 0;
    for (size_t i = 0; i < n && *out; i++) {
        yaml_node_t *at = items ? gw_cfg__node(ld, items[i]) : v;
        if (allow_any && names[i] && !strcmp(names[i], "any")) {
            if (!any) {
                (*out)[(*len)++] = (gw_cfg_net_t){.family = AF_INET};
                (*out)[(*len)++] = (gw_cfg_net_t){.family = AF_INET6};
            }
            any = 1;
        } else if (!names[i] || parse_net(names[i], &(*out)[*len]) < 0) {
            gw_cfg__err_at(ld, at,
                           "'%s' is not a network (an address, or ADDRESS/BITS: 10.0.0.0/8, "
                           "2001:db8::/32%s)",
                           names[i] ? names[i] : "", allow_any ? "; or any" : "");
        } else {
            (*len)++;
        }
    }
    gw_cfg__free_str_list(names, n);
    return (int)n;
}

static void load_protocols(ld_t *ld, gw_cfg_listen_t *l, yaml_node_t *v)
{
    size_t n;
    char **names = gw_cfg__load_str_list(ld, v, "protocols", &n);
    unsigned flags = 0;
    yaml_node_item_t *items = v->type == YAML_SEQUENCE_NODE ? v->data.sequence.items.start : NULL;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *at = items ? gw_cfg__node(ld, items[i]) : v;
        const char *s = names[i];
        unsigned f = 0;
        if (s && !strcmp(s, "h2") && l->tls)
            f = GW_PROTO_F_H2;
        else if (s && !strcmp(s, "h2c") && !l->tls)
            f = GW_PROTO_F_H2C;
        else if (s && !strcmp(s, "http/1.1"))
            f = GW_PROTO_F_HTTP1;
        if (!f)
            gw_cfg__err_at(ld, at, "protocol '%s' is not allowed on a %s listener (use %s)",
                           s ? s : "", l->tls ? "TLS" : "cleartext",
                           l->tls ? "h2, http/1.1" : "h2c, http/1.1");
        flags |= f;
    }
    if (n == 0)
        gw_cfg__err_at(ld, v, "'protocols' must name at least one protocol");
    gw_cfg__free_str_list(names, n);
    l->protocols = flags;
}

/* The array for the non-empty YAML list v of key (elements of elem bytes, zeroed, *n of them),
 * or NULL with the error reported: not a list, an empty list (`what` names one element), or no
 * memory. */
static void *load_list(ld_t *ld, yaml_node_t *v, const char *key, const char *what, size_t elem,
                       size_t *n)
{
    if (!gw_cfg__expect(ld, v, YAML_SEQUENCE_NODE, key))
        return NULL;
    *n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (*n == 0) {
        gw_cfg__err_at(ld, v, "'%s' must have at least one %s", key, what);
        return NULL;
    }
    void *a = gw_calloc(*n, elem);
    if (!a)
        ld->nomem = 1;
    return a;
}

void gw_cfg__load_listen(ld_t *ld, yaml_node_t *v)
{
    size_t n;
    gw_config_t *c = ld->c;
    if (v->type == YAML_SCALAR_NODE) {
        /* nginx's `listen 8443;` written here: say what the list looks like */
        gw_cfg_addr_t a;
        const char *text = gw_cfg__scalar(v), *port = text;
        while (*port == ':' || *port == '*')
            port++;
        int digits = *port && strspn(port, "0123456789") == strlen(port);
        int ok = gw_parse_addr(text, &a) == 0;
        gw_cfg__err_at(ld, v,
                       "'listen' must be a list of listeners, not a scalar: write "
                       "'listen: [{address: %s%s}]'",
                       ok       ? text
                       : digits ? "0.0.0.0:"
                                : "IP:PORT",
                       ok || !digits ? "" : port);
        return;
    }
    if (!(c->listen = load_list(ld, v, "listen", "listener", sizeof(*c->listen), &n)))
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *ln = gw_cfg__node(ld, v->data.sequence.items.start[i]);
        if (!gw_cfg__expect(ld, ln, YAML_MAPPING_NODE, "listen"))
            continue;
        gw_cfg_listen_t *l = &c->listen[c->listen_len++];
        l->backlog = 511;
        l->early_hints = 1;
        l->push = 1;
        l->proxy_timeout_ms = 5000;
        l->line = (int)ln->start_mark.line + 1;
        listen_ld_t x = {.l = l};
        gw_cfg__each_pair(ld, ln, listen_pair, &x);
        /* an empty list once meant "any source": anyone could then name any address (and so
         * pass per-client limits, forge X-Forwarded-For and the logs), so trust is explicit */
        if (l->proxy_protocol && !x.pp_from)
            gw_cfg__err_at(ld, x.pp_node,
                           "proxy_protocol needs proxy_protocol_from: the addresses of the "
                           "balancers allowed to send the header (or any, to let every source "
                           "name the client's address)");
        if (!x.addr_node) {
            gw_cfg__err_at(ld, ln, "missing required key 'address' in a listener");
            continue;
        }
        if (x.proto_node)
            load_protocols(ld, l, x.proto_node);
        else
            l->protocols = GW_PROTO_F_HTTP1 | (l->tls ? GW_PROTO_F_H2 : GW_PROTO_F_H2C);
        for (size_t j = 0; j + 1 < c->listen_len && l->addr.len; j++)
            if (c->listen[j].addr.len == l->addr.len &&
                !memcmp(&c->listen[j].addr.ss, &l->addr.ss, l->addr.len))
                gw_cfg__err_at(ld, x.addr_node, "duplicate listener %s (first declared on line %d)",
                               l->addr.text, c->listen[j].line);
    }
}

/* ---- upstreams ---- */

static const field_t upstream_fields[] = {
    FLD(gw_cfg_upstream_t, balance, F_BAL, 0, 0),
    FLD(gw_cfg_upstream_t, tls, F_BOOL, 0, 0),
    FLD(gw_cfg_upstream_t, tls_verify, F_BOOL, 0, 0),
    FLD(gw_cfg_upstream_t, tls_ca, F_STR, 0, 0),
    FLD(gw_cfg_upstream_t, max_connections, F_UINT, 1, 100000),
    FLD(gw_cfg_upstream_t, max_idle, F_UINT, 0, 100000),
    FLD(gw_cfg_upstream_t, idle_timeout_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, idle_purge_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, max_requests_per_connection, F_UINT, 0, 4000000000u),
    FLD(gw_cfg_upstream_t, connect_timeout_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, response_timeout_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, read_timeout_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, queue_size, F_UINT, 0, 1000000),
    FLD(gw_cfg_upstream_t, queue_timeout_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_upstream_t, retries, F_UINT, 0, 5),
    FLD(gw_cfg_upstream_t, pipeline, F_UINT, 1, GW_CFG_PIPELINE_MAX),
    FLD(gw_cfg_upstream_t, read_batch, F_SIZE, 0, 64u << 20),
    FLD(gw_cfg_upstream_t, read_batch_wait_ms, F_DUR, 1, 60000),
};

static const field_t health_fields[] = {
    FLD(gw_cfg_upstream_t, fail_threshold, F_UINT, 1, 1000),
    FLD(gw_cfg_upstream_t, eject_ms, F_DUR, 1, DAY_MS),
    {"path", F_STR, offsetof(gw_cfg_upstream_t, health_path), 0, 0},
    {"interval", F_DUR, offsetof(gw_cfg_upstream_t, health_interval_ms), 100, DAY_MS},
    {"expect_status", F_UINT, offsetof(gw_cfg_upstream_t, health_status), 100, 599},
};

static void load_server(ld_t *ld, gw_cfg_upstream_t *u, yaml_node_t *sn)
{
    gw_cfg_server_t *s = &u->servers[u->servers_len];
    s->weight = 1;
    yaml_node_t *addr = NULL;
    if (sn->type == YAML_SCALAR_NODE) {
        addr = sn;
    } else if (sn->type == YAML_MAPPING_NODE) {
        yaml_node_pair_t *p = sn->data.mapping.pairs.start;
        for (; p < sn->data.mapping.pairs.top; p++) {
            yaml_node_t *k = gw_cfg__node(ld, p->key), *v = gw_cfg__node(ld, p->value);
            const char *key = gw_cfg__scalar(k);
            if (key && !strcmp(key, "address")) {
                addr = v;
            } else if (key && !strcmp(key, "weight")) {
                static const field_t f[] = {FLD(gw_cfg_server_t, weight, F_UINT, 1, 1000)};
                gw_cfg__set_field(ld, f, 1, key, v, s);
            } else if (key) {
                static const char *const more[] = {"address", "weight", NULL};
                gw_cfg__err_unknown_key(ld, k, key, "a server", NULL, 0, more);
            } else {
                gw_cfg__err_at(ld, k, "map keys must be scalars");
            }
        }
        if (!addr) {
            gw_cfg__err_at(ld, sn, "missing required key 'address' in a server");
            return;
        }
    } else {
        gw_cfg__err_at(ld, sn, "a server must be HOST:PORT or a map with 'address', not %s",
                       gw_cfg__kind_str(sn));
        return;
    }
    if (!gw_cfg__expect(ld, addr, YAML_SCALAR_NODE, "address"))
        return;
    const char *text = gw_cfg__scalar(addr);
    /* a host name is resolved by back/ when it dials */
    int rv = gw_cfg__host_port(ld, text, &s->addr, &s->host);
    if (rv == GW_E_PARSE || rv == GW_E_RANGE)
        gw_cfg__err_addr(ld, addr, "address", rv, 0, "HOST:PORT or [IPv6]:PORT");
    if (rv == 0)
        u->servers_len++;
}

typedef struct {
    gw_cfg_upstream_t *u;
    yaml_node_t *servers;
} up_ld_t;

static int health_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    if (!gw_cfg__set_field(ld, health_fields, NTAB(health_fields), key, v, obj))
        gw_cfg__err_unknown_key(ld, k, key, "health", health_fields, NTAB(health_fields), NULL);
    return 0;
}

static int upstream_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    up_ld_t *x = obj;
    if (!strcmp(key, "servers")) {
        x->servers = v;
    } else if (!strcmp(key, "health")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, key))
            gw_cfg__each_pair(ld, v, health_pair, x->u);
    } else if (!gw_cfg__set_field(ld, upstream_fields, NTAB(upstream_fields), key, v, x->u)) {
        static const char *const more[] = {"servers", "health", NULL};
        char where[160];
        snprintf(where, sizeof(where), "upstream '%s'", x->u->name);
        gw_cfg__err_unknown_key(ld, k, key, where, upstream_fields, NTAB(upstream_fields), more);
    } else if (!strcmp(key, "tls_ca")) {
        x->u->tls_ca_at = gw_cfg__pos(ld, v);
    }
    return 0;
}

static int upstreams_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    (void)obj;
    gw_config_t *c = ld->c;
    gw_cfg_upstream_t *u = &c->upstreams[c->upstreams_len++];
    u->name = gw_cfg__xstrdup(ld, key);
    u->balance = GW_BALANCE_ROUND_ROBIN;
    u->tls_verify = 1;
    u->max_connections = 64;
    u->max_idle = UINT32_MAX; /* unset: min(32, max_connections) below */
    u->idle_timeout_ms = 60000;
    u->idle_purge_ms = 5000; /* HAProxy's pool-purge-delay default */
    u->max_requests_per_connection = 10000;
    u->connect_timeout_ms = 5000;
    u->response_timeout_ms = 30000;
    u->read_timeout_ms = 30000;
    u->queue_size = 1024;
    u->queue_timeout_ms = 10000;
    u->retries = 1;
    u->pipeline = 1;
    u->read_batch = 256u << 10;
    u->read_batch_wait_ms = 5;
    u->fail_threshold = 5;
    u->eject_ms = 10000;
    u->health_interval_ms = 5000;
    u->health_status = 200;
    if (!u->name)
        return 0;
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, key))
        return 0;
    up_ld_t x = {.u = u};
    gw_cfg__each_pair(ld, v, upstream_pair, &x);
    if (!x.servers) {
        gw_cfg__err_at(ld, k, "missing required key 'servers' in upstream '%s'", key);
        return 0;
    }
    yaml_node_t *sv = x.servers;
    size_t n = sv->type == YAML_SEQUENCE_NODE
                   ? (size_t)(sv->data.sequence.items.top - sv->data.sequence.items.start)
                   : 1;
    u->servers = gw_calloc(n ? n : 1, sizeof(*u->servers));
    if (!u->servers) {
        ld->nomem = 1;
        return 0;
    }
    if (sv->type == YAML_SEQUENCE_NODE) {
        if (n == 0)
            gw_cfg__err_at(ld, sv, "upstream '%s' must have at least one server", key);
        for (size_t i = 0; i < n; i++)
            load_server(ld, u, gw_cfg__node(ld, sv->data.sequence.items.start[i]));
    } else {
        load_server(ld, u, sv);
    }
    if (u->max_idle == UINT32_MAX)
        u->max_idle = u->max_connections < 32 ? u->max_connections : 32;
    if (u->max_idle > u->max_connections)
        gw_cfg__err_at(ld, v, "'max_idle' (%u) exceeds 'max_connections' (%u) in upstream '%s'",
                       u->max_idle, u->max_connections, key);
    return 0;
}

void gw_cfg__load_upstreams(ld_t *ld, yaml_node_t *v)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "upstreams"))
        return;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n == 0) {
        gw_cfg__err_at(ld, v, "'upstreams' must define at least one upstream");
        return;
    }
    ld->c->upstreams = gw_calloc(n, sizeof(*ld->c->upstreams));
    if (!ld->c->upstreams) {
        ld->nomem = 1;
        return;
    }
    gw_cfg__each_pair(ld, v, upstreams_pair, NULL);
}

/* Drop later duplicates from a list of field names, compared case-insensitively (field names
 * are, RFC 9110 §5.1): `[accept, Accept]` is one field (issue 18 item 2). */
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
};

typedef struct {
    gw_cfg_route_t *r;
    yaml_node_t *host, *path, *up, *name, *push;
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
    } else if (!strcmp(key, "push") &&
               gw_cfg__set_field(ld, route_fields, NTAB(route_fields), key, v, x->r)) {
        x->push = v;
    } else if (!gw_cfg__set_field(ld, route_fields, NTAB(route_fields), key, v, x->r)) {
        static const char *const more[] = {
            "name", "host", "path", "upstream", "coalesce_headers", "early_hints", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a route", route_fields, NTAB(route_fields), more);
    }
    return 0;
}

static int valid_host_pattern(const char *h)
{
    if (!strcmp(h, "*"))
        return 1;
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
              ch == '-' || ch == '.' || ch == ':' || ch == '[' || ch == ']'))
            return 0;
    }
    return 1;
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
    if (!(c->routes = load_list(ld, v, "routes", "route", sizeof(*c->routes), &n)))
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *rn = gw_cfg__node(ld, v->data.sequence.items.start[i]);
        if (!gw_cfg__expect(ld, rn, YAML_MAPPING_NODE, "routes"))
            continue;
        gw_cfg_route_t *r = &c->routes[c->routes_len++];
        r->line = (int)rn->start_mark.line + 1;
        r->coalesce = 1;
        r->websocket = 1;
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
            gw_cfg__err_at(ld, x.host, "route host must be a name, '*.suffix' or '*', not '%s'",
                           r->host);
        if (!r->path)
            r->path = gw_cfg__xstrdup(ld, "/");
        else if (r->path[0] != '/')
            gw_cfg__err_at(ld, x.path, "route path must start with '/', not '%s'", r->path);
        if (ld->nomem)
            return;
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

int gw_cfg_net_match(const gw_cfg_net_t *n, const struct sockaddr *sa)
{
    const uint8_t *a;
    int fam = sa->sa_family;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (fam == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (fam == AF_INET6) {
        a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (n->family == AF_INET && !memcmp(a, mapped, 12)) {
            a += 12; /* ::ffff:a.b.c.d is a.b.c.d */
            fam = AF_INET;
        }
    } else {
        return 0;
    }
    if (fam != n->family)
        return 0;
    unsigned full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(a, n->addr, full))
        return 0;
    if (rest) {
        uint8_t mask = (uint8_t)(0xFF << (8 - rest));
        if ((a[full] & mask) != (n->addr[full] & mask))
            return 0;
    }
    return 1;
}
