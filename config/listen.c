/* config/listen.c — the listen[] section: listeners, their protocols, PROXY protocol sources
 * and TLS (certificates by name, ticket keys), each checked as it is read. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"

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
    int client_auth; /* it has its own client_auth (otherwise it inherits the listener's) */
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
    } else if (!strcmp(key, "client_auth")) {
        gw_cfg__load_client_auth(ld, v, &c->cert.client_auth);
        c->client_auth = 1;
    } else {
        static const char *const more[] = {"certificate", "key", "names", "client_auth", NULL};
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
        gw_free(c->cert.client_auth.ca);
        gw_free(c->cert.client_auth.crl);
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
    yaml_node_t *keys_node;           /* ticket_keys */
    yaml_node_t *acme_node;           /* acme */
    gw_cfg_client_auth_t client_auth; /* the listener's, inherited by its certificates */
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
    if (!strcmp(key, "client_auth")) {
        gw_cfg__load_client_auth(ld, v, &t->client_auth);
        return 0;
    }
    if (!strcmp(key, "acme")) {
        t->acme_node = v;
        gw_cfg__load_tls_acme(ld, t->tls, v);
        return 0;
    }
    if (!strcmp(key, "alpn_preference")) {
        int w = gw_cfg__one_of(ld, v, key, "h2", "http/1.1");
        if (w >= 0)
            t->tls->prefer_h2 = w == 0;
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
        int w = gw_cfg__one_of(ld, v, key, "aes-128-cbc", "aes-256-cbc");
        if (w >= 0)
            t->tls->ticket_key_len = w == 0 ? 48 : 80; /* key name, HMAC and AES key bytes */
        return 0;
    }
    if (!strcmp(key, "ciphers"))
        t->tls->ciphers_at = gw_cfg__pos(ld, v);
    else if (!strcmp(key, "ciphersuites"))
        t->tls->ciphersuites_at = gw_cfg__pos(ld, v);
    if (!gw_cfg__set_field(ld, tls_fields, NTAB(tls_fields), key, v, t->tls)) {
        static const char *const more[] = {"certificate",
                                           "key",
                                           "names",
                                           "certificates",
                                           "ticket_keys",
                                           "ticket_key_cipher",
                                           "alpn_preference",
                                           "client_auth",
                                           "acme",
                                           NULL};
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

/* A `certificates:` entry beside tls.acme is reached only by SNI (the ACME pair is the
 * default): it needs names, and none of them an ACME name, which would have two certificates. */
static void check_beside_acme(ld_t *ld, const gw_cfg_tls_t *tls, const cert_ld_t *c,
                              yaml_node_t *where)
{
    if (!c->cert.names_len)
        gw_cfg__err_at(ld, where,
                       "a 'certificates:' entry beside tls 'acme' needs 'names': the ACME "
                       "certificate is the default, so an entry without names is never served");
    for (size_t i = 0; i < c->cert.names_len; i++)
        for (size_t k = 0; k < tls->acme_len; k++)
            if (c->cert.names[i] && tls->acme[k] && !strcasecmp(c->cert.names[i], tls->acme[k]))
                gw_cfg__err_at(ld, where,
                               "name '%s' is both in tls 'acme' and in a 'certificates:' "
                               "entry: give each name one certificate",
                               c->cert.names[i]);
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
    if (t.acme_node) {
        /* the ACME certificate is the listener's own pair (certs[0], the default): it stands
         * where certificate/key/names would; `certificates:` entries may sit beside it, each
         * chosen by SNI for its names (an ACME name in an entry would be ambiguous) */
        if (have_top || tls->self_signed)
            gw_cfg__err_at(ld, t.acme_node,
                           "tls 'acme' replaces certificate, key, names and self_signed: the "
                           "ACME certificate is the listener's default (other certificates go "
                           "in 'certificates:' entries with their names)");
        gw_cfg__free_str_list(t.top.cert.names, t.top.cert.names_len);
        gw_free(t.top.cert.certificate);
        gw_free(t.top.cert.key);
        cert_ld_t acme = {0}; /* certs[0] without files: the ACME client fills it */
        if (tls->acme && tls->acme_len) {
            acme.cert.names = gw_calloc(tls->acme_len, sizeof(char *));
            if (!acme.cert.names)
                ld->nomem = 1;
            for (size_t i = 0; acme.cert.names && i < tls->acme_len; i++)
                if (tls->acme[i])
                    acme.cert.names[acme.cert.names_len++] = gw_cfg__xstrdup(ld, tls->acme[i]);
        }
        gw_cfg__copy_client_auth(ld, &acme.cert.client_auth, &t.client_auth);
        push_cert(ld, tls, &acme);
    } else if (have_top || !t.certs_node) {
        check_cert(ld, tls, &t.top, v);
        gw_cfg__copy_client_auth(ld, &t.top.cert.client_auth, &t.client_auth);
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
            if (!c.client_auth)
                gw_cfg__copy_client_auth(ld, &c.cert.client_auth, &t.client_auth);
            if (t.acme_node)
                check_beside_acme(ld, tls, &c, cn);
            push_cert(ld, tls, &c);
        }
    }
    gw_free(t.client_auth.ca);
    gw_free(t.client_auth.crl);
    return tls;
}

/* ---- listen ---- */

typedef struct {
    gw_cfg_listen_t *l;
    yaml_node_t *addr_node, *proto_node;
    yaml_node_t *pp_node;           /* proxy_protocol's value */
    int pp_from;                    /* proxy_protocol_from named a network, or any (valid or not) */
    gw_cfg_listen_rules_ld_t rules; /* rules.c's keys */
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
    } else if (!gw_cfg__listen_rules_pair(ld, key, v, x->l, &x->rules)) {
        static const char *const more[] = {"address",
                                           "tls",
                                           "protocols",
                                           "backlog",
                                           "early_hints",
                                           "push",
                                           "proxy_protocol",
                                           "proxy_protocol_timeout",
                                           "proxy_protocol_from",
                                           "hsts",
                                           "redirect_https",
                                           "redirect_https_port",
                                           NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a listener", NULL, 0, more);
    }
    return 0;
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
    if (!(c->listen = gw_cfg__load_list(ld, v, "listen", "listener", sizeof(*c->listen), &n)))
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
        gw_cfg__listen_rules_check(ld, l, &x.rules);
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
