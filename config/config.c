/* config/config.c — the configuration object: its release (every string and list the loader
 * allocated) and its error list. It calls no other file of config/: the loader's files build
 * on it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/alog.h"
#include "common/err.h"
#include "config/config_internal.h"
#include "config/template.h"

/* ---- errors ------------------------------------------------------------------------------ */

void gw_config_errors_free(gw_config_errors_t *e)
{
    for (size_t i = 0; i < e->len; i++)
        gw_free(e->msgs[i]);
    gw_free(e->msgs);
    e->msgs = NULL;
    e->len = 0;
}

int gw_cfg__push_msg(gw_config_errors_t *e, const char *file, size_t line, size_t col,
                     const char *body)
{
    size_t n = strlen(file) + strlen(body) + 48;
    char *m = gw_malloc(n);
    char **nv = gw_realloc(e->msgs, (e->len + 1) * sizeof(char *));
    if (nv)
        e->msgs = nv;
    if (!m || !nv) {
        gw_free(m);
        return GW_E_NOMEM;
    }
    if (line)
        snprintf(m, n, "%s:%zu:%zu: %s", file, line, col, body);
    else
        snprintf(m, n, "%s: %s", file, body);
    e->msgs[e->len++] = m;
    return 0;
}

int gw_config_error_add(gw_config_errors_t *e, const gw_cfg_pos_t *at, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    return gw_cfg__push_msg(e, at && at->file ? at->file : "<config>", at ? at->line : 0,
                            at ? at->col : 0, body);
}

/* ---- release ----------------------------------------------------------------------------- */

void gw_cfg__free_str_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gw_free(l[i]);
    gw_free(l);
}

void gw_cfg__free_tls(gw_cfg_tls_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->certs_len; i++) {
        gw_free(t->certs[i].certificate);
        gw_free(t->certs[i].key);
        gw_cfg__free_str_list(t->certs[i].names, t->certs[i].names_len);
        gw_free(t->certs[i].client_auth.ca);
        gw_free(t->certs[i].client_auth.crl);
    }
    gw_free(t->certs);
    gw_cfg__free_str_list(t->acme, t->acme_len);
    gw_free(t->ciphers);
    gw_free(t->ciphersuites);
    gw_free(t->ticket_keys_path);
    gw_free(t->session_id_context);
    if (t->ticket_keys)
        explicit_bzero(t->ticket_keys, t->ticket_keys_len);
    gw_free(t->ticket_keys);
    gw_free(t);
}

void gw_cfg__free_hdr_rules(gw_cfg_hdr_rules_t *r)
{
    for (size_t i = 0; i < r->set_len; i++) {
        gw_free(r->set[i].name);
        gw_tmpl_del(r->set[i].value);
    }
    for (size_t i = 0; i < r->add_len; i++) {
        gw_free(r->add[i].name);
        gw_tmpl_del(r->add[i].value);
    }
    gw_free(r->set);
    gw_free(r->add);
    gw_cfg__free_str_list(r->remove, r->remove_len);
}

void gw_cfg__free_error_pages(gw_cfg_error_pages_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        gw_free(p->v[i].path);
        gw_free(p->v[i].body);
    }
    gw_free(p->v);
    p->v = NULL;
    p->n = 0;
}

void gw_config_del(gw_config_t *c)
{
    if (!c)
        return;
    gw_free(c->path);
    gw_free(c->state_dir);
    gw_free(c->acme.directory);
    gw_free(c->acme.directory_ca);
    gw_free(c->acme.email);
    gw_free(c->acme.state);
    gw_free(c->acme.shared_key);
    /* config/ has no OpenSSL for OPENSSL_cleanse: a volatile wipe of the shared key */
    for (volatile uint8_t *b = c->acme.shared_key_bytes;
         b < c->acme.shared_key_bytes + sizeof(c->acme.shared_key_bytes); b++)
        *b = 0;
    gw_free(c->pid_file);
    gw_free(c->trusted_proxies);
    gw_cfg__free_error_pages(&c->error_pages);
    gw_cfg__free_str_list(c->compression.types, c->compression.types_len);
    gw_free(c->access_log.path);
    gw_free(c->access_log.log_format);
    gw_alog_tmpl_del(c->access_log.tmpl);
    gw_free(c->cluster.redis_host);
    gw_free(c->cluster.password);
    gw_free(c->cluster.key_prefix);
    for (size_t i = 0; i < c->cluster.sentinels_len; i++)
        gw_free(c->cluster.sentinels[i].host);
    gw_free(c->cluster.master);
    gw_free(c->cluster.sentinel_password);
    for (size_t i = 0; i < c->listen_len; i++) {
        gw_cfg__free_tls(c->listen[i].tls);
        gw_free(c->listen[i].proxy_from);
        gw_free(c->listen[i].hsts);
    }
    gw_free(c->listen);
    for (size_t i = 0; i < c->upstreams_len; i++) {
        gw_cfg_upstream_t *u = &c->upstreams[i];
        gw_free(u->name);
        for (size_t j = 0; j < u->servers_len; j++)
            gw_free(u->servers[j].host);
        gw_free(u->servers);
        gw_free(u->tls_ca);
        gw_free(u->health_path);
    }
    gw_free(c->upstreams);
    for (size_t i = 0; i < c->routes_len; i++) {
        gw_cfg_route_t *r = &c->routes[i];
        gw_free(r->name);
        gw_free(r->host);
        gw_free(r->path);
        gw_free(r->upstream_name);
        gw_cfg__free_str_list(r->coalesce_headers, r->coalesce_headers_len);
        gw_cfg__free_str_list(r->early_hints, r->early_hints_len);
        gw_cfg__free_hdr_rules(&r->request_headers);
        gw_cfg__free_hdr_rules(&r->response_headers);
        gw_free(r->origin_host);
        gw_free(r->strip_prefix);
        gw_tmpl_del(r->redirect_to);
        gw_free(r->respond_body);
        gw_free(r->respond_content_type);
        gw_cfg__free_error_pages(&r->error_pages);
        if (r->acl) {
            gw_nettrie_free(&r->acl->allow);
            gw_nettrie_free(&r->acl->deny);
            gw_free(r->acl);
        }
        gw_cfg__free_basic_auth(r->basic_auth);
    }
    gw_free(c->routes);
    gw_cfg__free_hdr_rules(&c->request_headers);
    gw_cfg__free_hdr_rules(&c->response_headers);
    gw_free(c);
}
