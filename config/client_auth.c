/* config/client_auth.c — client certificates: a TLS listener's (or one of its certificates')
 * client_auth {ca, mode, depth, crl}, and a route's client_cert / client_cert_chain. The files
 * are read here so that a missing or non-PEM file is a configuration error at its key; whether
 * OpenSSL accepts what they hold is judged by tls/ (gw_tls_ctx_new / gw_tls_ctx_check), at the
 * same positions. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "common/alloc.h"
#include "config/config_internal.h"

#define CLIENT_AUTH_DEPTH_MAX 16
#define CLIENT_AUTH_DEPTH_DEFAULT 1 /* nginx's ssl_verify_depth: root → intermediate → leaf */
#define PEM_FILE_MAX (16u << 20)    /* a CA bundle or a CRL file larger than this is refused */

typedef struct {
    gw_cfg_client_auth_t *a;
    yaml_node_t *ca, *crl;
    int mode_set;
} ca_ld_t;

static int client_auth_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    ca_ld_t *x = obj;
    if (!strcmp(key, "ca") || !strcmp(key, "crl")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        int ca = key[1] == 'a';
        char **dst = ca ? &x->a->ca : &x->a->crl;
        gw_free(*dst);
        *dst = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        *(ca ? &x->ca : &x->crl) = v;
        *(ca ? &x->a->ca_at : &x->a->crl_at) = gw_cfg__pos(ld, v);
    } else if (!strcmp(key, "mode")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        static const char *const modes[] = {"none", "optional", "require"};
        const char *s = gw_cfg__scalar(v);
        size_t m = 0;
        while (m < 3 && strcmp(s, modes[m]))
            m++;
        if (m == 3)
            gw_cfg__err_at(ld, v, "'mode' must be none, optional or require, not '%s'", s);
        else
            x->a->mode = (int)m;
        x->mode_set = 1;
    } else if (!strcmp(key, "depth")) {
        static const field_t f[] = {
            {"depth", F_UINT, offsetof(gw_cfg_client_auth_t, depth), 0, CLIENT_AUTH_DEPTH_MAX}};
        gw_cfg__set_field(ld, f, 1, key, v, x->a);
    } else {
        static const char *const more[] = {"ca", "mode", "depth", "crl", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "client_auth", NULL, 0, more);
    }
    return 0;
}

/* Whether the file at path (given for key) can be read and holds `marker`; reported at n. */
static void check_pem(ld_t *ld, yaml_node_t *n, const char *key, const char *path,
                      const char *marker, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gw_cfg__err_at(ld, n, "'%s' file '%s' cannot be read: %s", key, path, strerror(errno));
        return;
    }
    size_t cap = 65536, len = 0;
    char *buf = gw_malloc(cap + 1);
    int err = 0;
    while (buf && !err) {
        if (len == cap) {
            if (cap >= PEM_FILE_MAX) {
                err = E2BIG;
                break;
            }
            char *nb = gw_realloc(buf, cap * 2 + 1);
            if (!nb) {
                gw_free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            err = ferror(f) ? EIO : -1;
    }
    fclose(f);
    if (!buf) {
        ld->nomem = 1;
        return;
    }
    buf[len] = 0;
    if (err == E2BIG)
        gw_cfg__err_at(ld, n, "'%s' file '%s' is larger than %u MiB", key, path,
                       PEM_FILE_MAX >> 20);
    else if (err == EIO)
        gw_cfg__err_at(ld, n, "'%s' file '%s' cannot be read: %s", key, path, strerror(EIO));
    else if (!strstr(buf, marker))
        gw_cfg__err_at(ld, n, "'%s' file '%s' is not PEM: it holds no %s (%s)", key, path, what,
                       marker);
    gw_free(buf);
}

void gw_cfg__load_client_auth(ld_t *ld, yaml_node_t *v, gw_cfg_client_auth_t *a)
{
    gw_free(a->ca);
    gw_free(a->crl);
    *a = (gw_cfg_client_auth_t){.mode = GW_CFG_CLIENT_AUTH_REQUIRE,
                                .depth = CLIENT_AUTH_DEPTH_DEFAULT};
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "client_auth"))
        return;
    ca_ld_t x = {.a = a};
    gw_cfg__each_pair(ld, v, client_auth_pair, &x);
    if (a->mode == GW_CFG_CLIENT_AUTH_NONE)
        return; /* nothing asked for: the files are not needed */
    if (!x.ca)
        gw_cfg__err_at(ld, v,
                       "client_auth needs 'ca': the PEM file of the CA certificates that client "
                       "certificates must chain to");
    else if (a->ca)
        check_pem(ld, x.ca, "ca", a->ca, "-----BEGIN CERTIFICATE-----", "certificate");
    if (x.crl && a->crl)
        check_pem(ld, x.crl, "crl", a->crl, "-----BEGIN X509 CRL-----", "CRL");
}

int gw_cfg__copy_client_auth(ld_t *ld, gw_cfg_client_auth_t *dst, const gw_cfg_client_auth_t *src)
{
    *dst = *src;
    dst->ca = src->ca ? gw_cfg__xstrdup(ld, src->ca) : NULL;
    dst->crl = src->crl ? gw_cfg__xstrdup(ld, src->crl) : NULL;
    return ld->nomem ? -1 : 0;
}

/* Whether some listener asks for client certificates (its own client_auth or a certificate's). */
static int any_client_auth(const gw_config_t *c)
{
    for (size_t i = 0; i < c->listen_len; i++)
        for (size_t j = 0; c->listen[i].tls && j < c->listen[i].tls->certs_len; j++)
            if (c->listen[i].tls->certs[j].client_auth.mode != GW_CFG_CLIENT_AUTH_NONE)
                return 1;
    return 0;
}

int gw_cfg__route_client_cert(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r)
{
    if (!strcmp(key, "client_cert")) {
        int w = gw_cfg__one_of(ld, v, key, "required", "optional");
        if (w >= 0)
            r->client_cert_required = w == 0;
        if (w == 0 && !any_client_auth(ld->c))
            gw_cfg__err_at(ld, v,
                           "client_cert: required needs a TLS listener with client_auth (mode "
                           "optional or require): no client could ever pass");
        return 1;
    }
    if (!strcmp(key, "client_cert_chain")) {
        static const field_t f[] = {
            {"client_cert_chain", F_BOOL, offsetof(gw_cfg_route_t, client_cert_chain), 0, 0}};
        gw_cfg__set_field(ld, f, 1, key, v, r);
        return 1;
    }
    return 0;
}
