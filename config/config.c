/* config/config.c — YAML (libyaml document API) into gw_config_t, with every error collected
 * as "FILE:LINE:COL: message". Scalar fields of each section are described by tables of
 * field_t (name, kind, offset, range), so adding a key is one line plus its README entry. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "config/config.h"
#include "h2/defaults.h"

/* ---- errors ------------------------------------------------------------------------------ */

void gw_config_errors_free(gw_config_errors_t *e)
{
    for (size_t i = 0; i < e->len; i++)
        gw_free(e->msgs[i]);
    gw_free(e->msgs);
    e->msgs = NULL;
    e->len = 0;
}

typedef struct {
    const char *file;
    yaml_document_t doc;
    gw_config_errors_t *errs;
    gw_config_t *c;
    int nomem;
    size_t nerr;
} ld_t;

static char *xstrdup(ld_t *ld, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = gw_malloc(n);
    if (!p) {
        ld->nomem = 1;
        return NULL;
    }
    memcpy(p, s, n);
    return p;
}

__attribute__((format(printf, 4, 0))) static void add_msg(ld_t *ld, size_t line, size_t col,
                                                          const char *fmt, va_list ap)
{
    ld->nerr++;
    if (!ld->errs)
        return;
    char body[512];
    vsnprintf(body, sizeof(body), fmt, ap);
    size_t n = strlen(ld->file) + strlen(body) + 48;
    char *m = gw_malloc(n);
    char **nv = gw_realloc(ld->errs->msgs, (ld->errs->len + 1) * sizeof(char *));
    if (!m || !nv) {
        gw_free(m);
        if (nv)
            ld->errs->msgs = nv;
        ld->nomem = 1;
        return;
    }
    ld->errs->msgs = nv;
    snprintf(m, n, "%s:%zu:%zu: %s", ld->file, line, col, body);
    ld->errs->msgs[ld->errs->len++] = m;
}

__attribute__((format(printf, 3, 4))) static void err_at(ld_t *ld, yaml_node_t *n, const char *fmt,
                                                         ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(ld, n ? n->start_mark.line + 1 : 1, n ? n->start_mark.column + 1 : 1, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 5))) static void err_line(ld_t *ld, size_t line, size_t col,
                                                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(ld, line, col, fmt, ap);
    va_end(ap);
}

/* ---- node helpers ------------------------------------------------------------------------ */

static yaml_node_t *node(ld_t *ld, int id)
{
    return yaml_document_get_node(&ld->doc, id);
}

static const char *kind_str(yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a map";
    default:
        return "nothing";
    }
}

static const char *scalar(yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar written as plain `null`, `~` or nothing. */
static int is_null(yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null");
}

static int expect(ld_t *ld, yaml_node_t *n, yaml_node_type_t t, const char *key)
{
    if (n->type == t)
        return 1;
    const char *want = t == YAML_SCALAR_NODE     ? "a scalar"
                       : t == YAML_SEQUENCE_NODE ? "a list"
                                                 : "a map";
    err_at(ld, n, "'%s' must be %s, not %s", key, want, kind_str(n));
    return 0;
}

/* Iterate a mapping; reports duplicate keys and non-scalar keys. */
typedef int (*pair_cb)(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj);

static void each_pair(ld_t *ld, yaml_node_t *map, pair_cb cb, void *obj)
{
    yaml_node_pair_t *start = map->data.mapping.pairs.start;
    yaml_node_pair_t *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *k = node(ld, p->key), *v = node(ld, p->value);
        const char *key = scalar(k);
        if (!key) {
            err_at(ld, k, "map keys must be scalars");
            continue;
        }
        int dup = 0;
        for (yaml_node_pair_t *q = start; q < p && !dup; q++) {
            const char *qk = scalar(node(ld, q->key));
            dup = qk && !strcmp(qk, key);
        }
        if (dup) {
            err_at(ld, k, "duplicate key '%s'", key);
            continue;
        }
        cb(ld, key, k, v, obj);
    }
}

/* ---- table-driven scalar fields ------------------------------------------------------------ */

typedef enum {
    F_UINT,   /* unsigned */
    F_U32,    /* uint32_t */
    F_SIZE,   /* size_t, size units */
    F_SIZE64, /* uint64_t, size units */
    F_U32SZ,  /* uint32_t, size units */
    F_DUR,    /* uint64_t ms */
    F_RATE,   /* uint64_t bytes/s */
    F_BOOL,   /* int */
    F_STR,    /* char * */
    F_LOG,    /* int gw_log_level_t */
    F_BAL,    /* gw_balance_t */
    F_TLSVER, /* int 12/13 */
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

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) {
        *out = 0;
        return 0;
    }
    return GW_E_PARSE;
}

static const char *kind_what(fkind_t k)
{
    switch (k) {
    case F_SIZE:
    case F_SIZE64:
    case F_U32SZ:
        return "a size (e.g. 64KiB, 1MB, 4096)";
    case F_DUR:
        return "a duration (e.g. 500ms, 30s, 5m)";
    case F_RATE:
        return "a rate (e.g. 1MB/s, 512KiB/s, 8Mbit/s)";
    case F_BOOL:
        return "true or false";
    case F_LOG:
        return "one of debug, info, warn, error, off";
    case F_BAL:
        return "one of round_robin, least_conn, hash_client";
    case F_TLSVER:
        return "tls1.2 or tls1.3";
    default:
        return "a non-negative integer";
    }
}

static const char *internal_name(const char *key);

/* Parse v into the field; returns 1 if `key` is in the table (handled), 0 if unknown. */
static int set_field(ld_t *ld, const field_t *tab, size_t ntab, const char *key, yaml_node_t *v,
                     void *obj)
{
    const field_t *f = NULL;
    const char *iname = internal_name(key);
    for (size_t i = 0; i < ntab; i++)
        if (!strcmp(tab[i].name, iname))
            f = &tab[i];
    if (!f)
        return 0;
    if (v->type != YAML_SCALAR_NODE) {
        err_at(ld, v, "'%s' must be %s, not %s", key, kind_what(f->kind), kind_str(v));
        return 1;
    }
    const char *s = scalar(v);
    char *p = (char *)obj + f->off;
    uint64_t x = 0;
    int rv = 0;
    switch (f->kind) {
    case F_STR: {
        char *d = xstrdup(ld, s);
        gw_free(*(char **)p);
        *(char **)p = d;
        return 1;
    }
    case F_BOOL:
        if (parse_bool(s, (int *)p) < 0)
            err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_LOG: {
        gw_log_level_t l;
        if (gw_log_level_parse(s, &l) < 0)
            err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        else
            *(int *)p = (int)l;
        return 1;
    }
    case F_BAL:
        if (!strcmp(s, "round_robin"))
            *(gw_balance_t *)p = GW_BALANCE_ROUND_ROBIN;
        else if (!strcmp(s, "least_conn"))
            *(gw_balance_t *)p = GW_BALANCE_LEAST_CONN;
        else if (!strcmp(s, "hash_client"))
            *(gw_balance_t *)p = GW_BALANCE_HASH_CLIENT;
        else
            err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_TLSVER:
        if (!strcmp(s, "tls1.2"))
            *(int *)p = 12;
        else if (!strcmp(s, "tls1.3"))
            *(int *)p = 13;
        else
            err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_SIZE:
    case F_SIZE64:
    case F_U32SZ:
        rv = gw_parse_size(s, &x);
        break;
    case F_DUR:
        rv = gw_parse_duration(s, &x);
        break;
    case F_RATE:
        rv = gw_parse_rate(s, &x);
        break;
    case F_UINT:
    case F_U32: {
        uint64_t m = 0;
        const char *u = s;
        if (!*u)
            rv = GW_E_PARSE;
        for (; *u && rv == 0; u++) {
            if (*u < '0' || *u > '9')
                rv = GW_E_PARSE;
            else if (m > (UINT64_MAX - 9) / 10)
                rv = GW_E_RANGE;
            else
                m = m * 10 + (uint64_t)(*u - '0');
        }
        x = m;
        break;
    }
    }
    if (rv == GW_E_PARSE) {
        err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    }
    if (rv == GW_E_RANGE || x < f->min || x > f->max) {
        err_at(ld, v, "'%s' is out of range: %s (allowed %llu..%llu)", key, s,
               (unsigned long long)f->min, (unsigned long long)f->max);
        return 1;
    }
    switch (f->kind) {
    case F_UINT:
        *(unsigned *)p = (unsigned)x;
        break;
    case F_U32:
    case F_U32SZ:
        *(uint32_t *)p = (uint32_t)x;
        break;
    case F_SIZE:
        *(size_t *)p = (size_t)x;
        break;
    default:
        *(uint64_t *)p = x;
        break;
    }
    return 1;
}

#define NTAB(t) (sizeof(t) / sizeof((t)[0]))
#define MAXU32 4294967295ull
#define DAY_MS 86400000ull

/* ---- sections ----------------------------------------------------------------------------- */

static const field_t h2_fields[] = {
    FLD(gw_cfg_h2_t, max_concurrent_streams, F_UINT, 1, 100000),
    FLD(gw_cfg_h2_t, initial_window_size, F_U32SZ, 1, 2147483647ull),
    FLD(gw_cfg_h2_t, connection_window_size, F_U32SZ, 65535, 2147483647ull),
    FLD(gw_cfg_h2_t, max_frame_size, F_U32SZ, 16384, 16777215),
    FLD(gw_cfg_h2_t, header_table_size, F_U32SZ, 0, 1048576),
    FLD(gw_cfg_h2_t, max_header_list_size, F_U32SZ, 1024, 16777216),
    FLD(gw_cfg_h2_t, settings_timeout_ms, F_DUR, 100, DAY_MS),
    FLD(gw_cfg_h2_t, max_requests_per_connection, F_UINT, 1, 4000000000u),
    FLD(gw_cfg_h2_t, reset_budget, F_UINT, 1, 1000000),
    FLD(gw_cfg_h2_t, reset_window_ms, F_DUR, 100, DAY_MS),
    FLD(gw_cfg_h2_t, control_frame_budget, F_UINT, 1, 1000000),
    FLD(gw_cfg_h2_t, empty_frame_budget, F_UINT, 1, 1000000),
    FLD(gw_cfg_h2_t, max_queued_control, F_UINT, 1, 1000000),
    FLD(gw_cfg_h2_t, max_priority_nodes, F_UINT, 0, 1000000),
};
/* Keys are written without the _ms suffix in YAML; map them here. */
static const char *const ms_keys[][2] = {
    {"settings_timeout", "settings_timeout_ms"},
    {"reset_window", "reset_window_ms"},
    {"handshake", "handshake_ms"},
    {"first_request", "first_request_ms"},
    {"header", "header_ms"},
    {"idle", "idle_ms"},
    {"graceful_shutdown", "graceful_shutdown_ms"},
    {"body", "body_ms"},
    {"request_body", "request_body_ms"},
    {"idle_timeout", "idle_timeout_ms"},
    {"idle_purge", "idle_purge_ms"},
    {"connect_timeout", "connect_timeout_ms"},
    {"response_timeout", "response_timeout_ms"},
    {"read_timeout", "read_timeout_ms"},
    {"queue_timeout", "queue_timeout_ms"},
    {"read_batch_wait", "read_batch_wait_ms"},
    {"eject", "eject_ms"},
    {"health_interval", "health_interval_ms"},
    {"ticket_rotation", "ticket_rotation_ms"},
};

static const char *internal_name(const char *key)
{
    for (size_t i = 0; i < NTAB(ms_keys); i++)
        if (!strcmp(ms_keys[i][0], key))
            return ms_keys[i][1];
    if (strlen(key) > 3 && !strcmp(key + strlen(key) - 3, "_ms"))
        return ""; /* the internal spelling is not accepted in files */
    return key;
}

static const field_t timeout_fields[] = {
    FLD(gw_cfg_timeouts_t, handshake_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, first_request_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, header_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, idle_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, graceful_shutdown_ms, F_DUR, 0, DAY_MS),
    FLD(gw_cfg_timeouts_t, body_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, request_body_ms, F_DUR, 1, DAY_MS),
};

static const field_t limit_fields[] = {
    FLD(gw_cfg_limits_t, max_connections, F_UINT, 1, 10000000),
    FLD(gw_cfg_limits_t, write_buffer, F_SIZE, 4096, 1ull << 30),
    FLD(gw_cfg_limits_t, max_request_head, F_SIZE, 1024, 16ull << 20),
    FLD(gw_cfg_limits_t, body_buffer, F_SIZE, 1024, 1ull << 30),
    FLD(gw_cfg_limits_t, coalesce_buffer, F_SIZE, 64 * 1024, 1ull << 30),
};

static const field_t throttle_fields[] = {
    FLD(gw_cfg_throttle_t, response_rate, F_RATE, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, response_burst, F_SIZE64, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, per_client_rate, F_RATE, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, per_client_burst, F_SIZE64, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, request_body_rate, F_RATE, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, request_body_burst, F_SIZE64, 0, 1ull << 40),
    FLD(gw_cfg_throttle_t, ipv6_prefix, F_UINT, 16, 128),
};

typedef struct {
    const field_t *tab;
    size_t n;
    const char *section;
} table_obj_t;

static int table_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    table_obj_t *t = ((table_obj_t **)obj)[0];
    void *target = ((void **)obj)[1];
    if (!set_field(ld, t->tab, t->n, key, v, target))
        err_at(ld, k, "unknown key '%s' in %s", key, t->section);
    return 0;
}

static void load_table(ld_t *ld, yaml_node_t *v, const char *section, const field_t *tab, size_t n,
                       void *target)
{
    if (!expect(ld, v, YAML_MAPPING_NODE, section))
        return;
    table_obj_t t = {tab, n, section};
    void *pair[2] = {&t, target};
    each_pair(ld, v, table_pair, pair);
}

/* -- strings list -- */
static char **load_str_list(ld_t *ld, yaml_node_t *v, const char *key, size_t *len)
{
    *len = 0;
    if (v->type == YAML_SCALAR_NODE && !is_null(v)) {
        char **out = gw_calloc(1, sizeof(char *));
        if (!out) {
            ld->nomem = 1;
            return NULL;
        }
        out[0] = xstrdup(ld, scalar(v));
        *len = 1;
        return out;
    }
    if (!expect(ld, v, YAML_SEQUENCE_NODE, key))
        return NULL;
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    char **out = gw_calloc(n ? n : 1, sizeof(char *));
    if (!out) {
        ld->nomem = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = node(ld, v->data.sequence.items.start[i]);
        if (!expect(ld, it, YAML_SCALAR_NODE, key))
            continue;
        out[(*len)++] = xstrdup(ld, scalar(it));
    }
    return out;
}

static void free_str_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gw_free(l[i]);
    gw_free(l);
}

/* ---- tls ---- */

static const field_t tls_fields[] = {
    FLD(gw_cfg_tls_t, min_version, F_TLSVER, 0, 0),
    FLD(gw_cfg_tls_t, prefer_h2, F_BOOL, 0, 0),
    FLD(gw_cfg_tls_t, session_tickets, F_BOOL, 0, 0),
    FLD(gw_cfg_tls_t, ticket_rotation_ms, F_DUR, 1000, 30 * DAY_MS),
    FLD(gw_cfg_tls_t, ciphers, F_STR, 0, 0),
    FLD(gw_cfg_tls_t, ciphersuites, F_STR, 0, 0),
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
        if (!expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        char **dst = !strcmp(key, "key") ? &c->cert.key : &c->cert.certificate;
        gw_free(*dst);
        *dst = xstrdup(ld, scalar(v));
        if (!strcmp(key, "key"))
            c->key_node = v;
        else
            c->cert_node = v;
    } else if (!strcmp(key, "names")) {
        free_str_list(c->cert.names, c->cert.names_len);
        c->cert.names = load_str_list(ld, v, key, &c->cert.names_len);
    } else {
        err_at(ld, k, "unknown key '%s' in a certificate", key);
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
        free_str_list(c->cert.names, c->cert.names_len);
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
} tls_ld_t;

static int tls_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    tls_ld_t *t = obj;
    if (!strcmp(key, "certificate") || !strcmp(key, "key") || !strcmp(key, "names"))
        return cert_pair(ld, key, k, v, &t->top);
    if (!strcmp(key, "certificates")) {
        if (!expect(ld, v, YAML_SEQUENCE_NODE, key))
            return 0;
        t->certs_node = v;
        return 0;
    }
    if (!strcmp(key, "alpn_preference")) {
        const char *s = v->type == YAML_SCALAR_NODE ? scalar(v) : NULL;
        if (s && !strcmp(s, "h2"))
            t->tls->prefer_h2 = 1;
        else if (s && !strcmp(s, "http/1.1"))
            t->tls->prefer_h2 = 0;
        else
            err_at(ld, v, "'alpn_preference' must be h2 or http/1.1");
        return 0;
    }
    if (!set_field(ld, tls_fields, NTAB(tls_fields), key, v, t->tls))
        err_at(ld, k, "unknown key '%s' in tls", key);
    return 0;
}

static void check_file(ld_t *ld, yaml_node_t *n, const char *what, const char *path)
{
    if (access(path, R_OK) != 0)
        err_at(ld, n, "%s file '%s' cannot be read: %s", what, path, strerror(errno));
}

static void check_cert(ld_t *ld, gw_cfg_tls_t *tls, cert_ld_t *c, yaml_node_t *where)
{
    if (!c->cert.certificate)
        err_at(ld, where, "missing required key 'certificate'");
    if (!c->cert.key)
        err_at(ld, where, "missing required key 'key'");
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
    if (!expect(ld, v, YAML_MAPPING_NODE, "tls"))
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
    tls_ld_t t = {.tls = tls, .map = v};
    each_pair(ld, v, tls_pair, &t);
    int have_top = t.top.cert.certificate || t.top.cert.key || t.top.cert.names_len;
    if (have_top || !t.certs_node) {
        check_cert(ld, tls, &t.top, v);
        push_cert(ld, tls, &t.top);
    }
    if (t.certs_node) {
        yaml_node_item_t *it = t.certs_node->data.sequence.items.start;
        for (; it < t.certs_node->data.sequence.items.top; it++) {
            yaml_node_t *cn = node(ld, *it);
            if (!expect(ld, cn, YAML_MAPPING_NODE, "certificates"))
                continue;
            cert_ld_t c = {0};
            each_pair(ld, cn, cert_pair, &c);
            check_cert(ld, tls, &c, cn);
            push_cert(ld, tls, &c);
        }
    }
    return tls;
}

static void free_tls(gw_cfg_tls_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->certs_len; i++) {
        gw_free(t->certs[i].certificate);
        gw_free(t->certs[i].key);
        free_str_list(t->certs[i].names, t->certs[i].names_len);
    }
    gw_free(t->certs);
    gw_free(t->ciphers);
    gw_free(t->ciphersuites);
    gw_free(t);
}

/* ---- listen ---- */

typedef struct {
    gw_cfg_listen_t *l;
    yaml_node_t *addr_node, *proto_node;
} listen_ld_t;

static int listen_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    listen_ld_t *x = obj;
    if (!strcmp(key, "address")) {
        x->addr_node = v;
        if (!expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        int rv = gw_parse_addr(scalar(v), &x->l->addr);
        if (rv < 0)
            err_at(ld, v, "'address' must be IP:PORT or [IPv6]:PORT, not '%s'", scalar(v));
    } else if (!strcmp(key, "tls")) {
        free_tls(x->l->tls);
        x->l->tls = load_tls(ld, v);
    } else if (!strcmp(key, "protocols")) {
        x->proto_node = v;
    } else if (!strcmp(key, "backlog")) {
        static const field_t f[] = {FLD(gw_cfg_listen_t, backlog, F_UINT, 1, 65535)};
        set_field(ld, f, 1, key, v, x->l);
    } else {
        err_at(ld, k, "unknown key '%s' in a listener", key);
    }
    return 0;
}

static void load_protocols(ld_t *ld, gw_cfg_listen_t *l, yaml_node_t *v)
{
    size_t n;
    char **names = load_str_list(ld, v, "protocols", &n);
    unsigned flags = 0;
    yaml_node_item_t *items = v->type == YAML_SEQUENCE_NODE ? v->data.sequence.items.start : NULL;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *at = items ? node(ld, items[i]) : v;
        const char *s = names[i];
        unsigned f = 0;
        if (s && !strcmp(s, "h2") && l->tls)
            f = GW_PROTO_F_H2;
        else if (s && !strcmp(s, "h2c") && !l->tls)
            f = GW_PROTO_F_H2C;
        else if (s && !strcmp(s, "http/1.1"))
            f = GW_PROTO_F_HTTP1;
        if (!f)
            err_at(ld, at, "protocol '%s' is not allowed on a %s listener (use %s)", s ? s : "",
                   l->tls ? "TLS" : "cleartext", l->tls ? "h2, http/1.1" : "h2c, http/1.1");
        flags |= f;
    }
    if (n == 0)
        err_at(ld, v, "'protocols' must name at least one protocol");
    free_str_list(names, n);
    l->protocols = flags;
}

/* The array for the non-empty YAML list v of key (elements of elem bytes, zeroed, *n of them),
 * or NULL with the error reported: not a list, an empty list (`what` names one element), or no
 * memory. */
static void *load_list(ld_t *ld, yaml_node_t *v, const char *key, const char *what, size_t elem,
                       size_t *n)
{
    if (!expect(ld, v, YAML_SEQUENCE_NODE, key))
        return NULL;
    *n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (*n == 0) {
        err_at(ld, v, "'%s' must have at least one %s", key, what);
        return NULL;
    }
    void *a = gw_calloc(*n, elem);
    if (!a)
        ld->nomem = 1;
    return a;
}

static void load_listen(ld_t *ld, yaml_node_t *v)
{
    size_t n;
    gw_config_t *c = ld->c;
    if (!(c->listen = load_list(ld, v, "listen", "listener", sizeof(*c->listen), &n)))
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *ln = node(ld, v->data.sequence.items.start[i]);
        if (!expect(ld, ln, YAML_MAPPING_NODE, "listen"))
            continue;
        gw_cfg_listen_t *l = &c->listen[c->listen_len++];
        l->backlog = 511;
        l->line = (int)ln->start_mark.line + 1;
        listen_ld_t x = {.l = l};
        each_pair(ld, ln, listen_pair, &x);
        if (!x.addr_node) {
            err_at(ld, ln, "missing required key 'address' in a listener");
            continue;
        }
        if (x.proto_node)
            load_protocols(ld, l, x.proto_node);
        else
            l->protocols = GW_PROTO_F_HTTP1 | (l->tls ? GW_PROTO_F_H2 : GW_PROTO_F_H2C);
        for (size_t j = 0; j + 1 < c->listen_len && l->addr.len; j++)
            if (c->listen[j].addr.len == l->addr.len &&
                !memcmp(&c->listen[j].addr.ss, &l->addr.ss, l->addr.len))
                err_at(ld, x.addr_node, "duplicate listener %s (first declared on line %d)",
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
            yaml_node_t *k = node(ld, p->key), *v = node(ld, p->value);
            const char *key = scalar(k);
            if (key && !strcmp(key, "address")) {
                addr = v;
            } else if (key && !strcmp(key, "weight")) {
                static const field_t f[] = {FLD(gw_cfg_server_t, weight, F_UINT, 1, 1000)};
                set_field(ld, f, 1, key, v, s);
            } else {
                err_at(ld, k, "unknown key '%s' in a server", key ? key : "?");
            }
        }
        if (!addr) {
            err_at(ld, sn, "missing required key 'address' in a server");
            return;
        }
    } else {
        err_at(ld, sn, "a server must be HOST:PORT or a map with 'address', not %s", kind_str(sn));
        return;
    }
    if (!expect(ld, addr, YAML_SCALAR_NODE, "address"))
        return;
    const char *text = scalar(addr);
    int rv = gw_parse_addr(text, &s->addr);
    if (rv == GW_E_NOENT) {
        /* A host name: kept as text, resolved by back/ when it dials. */
        const char *colon = strrchr(text, ':');
        if (strlen(text) < sizeof(s->addr.text)) {
            memset(&s->addr, 0, sizeof(s->addr));
            strcpy(s->addr.text, text);
        } else {
            rv = GW_E_PARSE;
        }
        if (rv == GW_E_NOENT) {
            size_t hl = (size_t)(colon - text);
            s->host = gw_malloc(hl + 1);
            if (!s->host) {
                ld->nomem = 1;
                return;
            }
            memcpy(s->host, text, hl);
            s->host[hl] = 0;
            u->servers_len++;
            return;
        }
    }
    if (rv < 0) {
        err_at(ld, addr, "server address must be HOST:PORT or [IPv6]:PORT, not '%s'", text);
        return;
    }
    const char *end = text[0] == '[' ? strchr(text, ']') : strrchr(text, ':');
    size_t hl = (size_t)(end - text) - (text[0] == '[');
    s->host = gw_malloc(hl + 1);
    if (!s->host) {
        ld->nomem = 1;
        return;
    }
    memcpy(s->host, text + (text[0] == '['), hl);
    s->host[hl] = 0;
    u->servers_len++;
}

typedef struct {
    gw_cfg_upstream_t *u;
    yaml_node_t *servers;
} up_ld_t;

static int health_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    if (!set_field(ld, health_fields, NTAB(health_fields), key, v, obj))
        err_at(ld, k, "unknown key '%s' in health", key);
    return 0;
}

static int upstream_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    up_ld_t *x = obj;
    if (!strcmp(key, "servers")) {
        x->servers = v;
    } else if (!strcmp(key, "health")) {
        if (expect(ld, v, YAML_MAPPING_NODE, key))
            each_pair(ld, v, health_pair, x->u);
    } else if (!set_field(ld, upstream_fields, NTAB(upstream_fields), key, v, x->u)) {
        err_at(ld, k, "unknown key '%s' in upstream '%s'", key, x->u->name);
    }
    return 0;
}

static int upstreams_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    (void)obj;
    gw_config_t *c = ld->c;
    gw_cfg_upstream_t *u = &c->upstreams[c->upstreams_len++];
    u->name = xstrdup(ld, key);
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
    if (!expect(ld, v, YAML_MAPPING_NODE, key))
        return 0;
    up_ld_t x = {.u = u};
    each_pair(ld, v, upstream_pair, &x);
    if (!x.servers) {
        err_at(ld, k, "missing required key 'servers' in upstream '%s'", key);
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
            err_at(ld, sv, "upstream '%s' must have at least one server", key);
        for (size_t i = 0; i < n; i++)
            load_server(ld, u, node(ld, sv->data.sequence.items.start[i]));
    } else {
        load_server(ld, u, sv);
    }
    if (u->max_idle == UINT32_MAX)
        u->max_idle = u->max_connections < 32 ? u->max_connections : 32;
    if (u->max_idle > u->max_connections)
        err_at(ld, v, "'max_idle' (%u) exceeds 'max_connections' (%u) in upstream '%s'",
               u->max_idle, u->max_connections, key);
    return 0;
}

static void load_upstreams(ld_t *ld, yaml_node_t *v)
{
    if (!expect(ld, v, YAML_MAPPING_NODE, "upstreams"))
        return;
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n == 0) {
        err_at(ld, v, "'upstreams' must define at least one upstream");
        return;
    }
    ld->c->upstreams = gw_calloc(n, sizeof(*ld->c->upstreams));
    if (!ld->c->upstreams) {
        ld->nomem = 1;
        return;
    }
    each_pair(ld, v, upstreams_pair, NULL);
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
};

typedef struct {
    gw_cfg_route_t *r;
    yaml_node_t *host, *path, *up;
} route_ld_t;

static int route_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    route_ld_t *x = obj;
    if (!strcmp(key, "host") || !strcmp(key, "path") || !strcmp(key, "upstream")) {
        if (!expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        char **dst = key[0] == 'h'   ? &x->r->host
                     : key[0] == 'p' ? &x->r->path
                                     : &x->r->upstream_name;
        *(key[0] == 'h' ? &x->host : key[0] == 'p' ? &x->path : &x->up) = v;
        gw_free(*dst);
        *dst = xstrdup(ld, scalar(v));
    } else if (!strcmp(key, "coalesce_headers")) {
        free_str_list(x->r->coalesce_headers, x->r->coalesce_headers_len);
        x->r->coalesce_headers = load_str_list(ld, v, key, &x->r->coalesce_headers_len);
        dedup_nocase(x->r->coalesce_headers, &x->r->coalesce_headers_len);
    } else if (!set_field(ld, route_fields, NTAB(route_fields), key, v, x->r)) {
        err_at(ld, k, "unknown key '%s' in a route", key);
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

static void load_routes(ld_t *ld, yaml_node_t *v)
{
    size_t n;
    gw_config_t *c = ld->c;
    if (!(c->routes = load_list(ld, v, "routes", "route", sizeof(*c->routes), &n)))
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *rn = node(ld, v->data.sequence.items.start[i]);
        if (!expect(ld, rn, YAML_MAPPING_NODE, "routes"))
            continue;
        gw_cfg_route_t *r = &c->routes[c->routes_len++];
        r->line = (int)rn->start_mark.line + 1;
        r->coalesce = 1;
        r->add_x_forwarded = 1;
        r->add_forwarded = 0;
        r->add_via = 1;
        route_ld_t x = {.r = r};
        each_pair(ld, rn, route_pair, &x);
        if (!r->coalesce_headers && !ld->nomem) {
            r->coalesce_headers = gw_calloc(1, sizeof(char *));
            if (r->coalesce_headers) {
                r->coalesce_headers[0] = xstrdup(ld, "accept-encoding");
                r->coalesce_headers_len = 1;
            } else {
                ld->nomem = 1;
            }
        }
        if (ld->nomem)
            return; /* strings may be missing: the load fails with GW_E_NOMEM anyway */
        if (!r->host)
            r->host = xstrdup(ld, "*");
        else if (!valid_host_pattern(r->host))
            err_at(ld, x.host, "route host must be a name, '*.suffix' or '*', not '%s'", r->host);
        if (!r->path)
            r->path = xstrdup(ld, "/");
        else if (r->path[0] != '/')
            err_at(ld, x.path, "route path must start with '/', not '%s'", r->path);
        if (ld->nomem)
            return;
        if (!x.up) {
            err_at(ld, rn, "missing required key 'upstream' in a route");
            continue;
        }
        size_t j = 0;
        while (j < c->upstreams_len &&
               (!c->upstreams[j].name || strcmp(c->upstreams[j].name, r->upstream_name)))
            j++;
        if (j == c->upstreams_len)
            err_at(ld, x.up, "route names unknown upstream '%s'", r->upstream_name);
        r->upstream = j;
    }
}

/* ---- top level ---- */

static const field_t top_fields[] = {
    FLD(gw_config_t, workers, F_UINT, 1, 256),
    FLD(gw_config_t, log_level, F_LOG, 0, 0),
    FLD(gw_config_t, state_dir, F_STR, 0, 0),
};

typedef struct {
    yaml_node_t *listen, *upstreams, *routes;
} top_ld_t;

static int top_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    top_ld_t *t = obj;
    gw_config_t *c = ld->c;
    if (!strcmp(key, "listen"))
        t->listen = v;
    else if (!strcmp(key, "upstreams"))
        t->upstreams = v;
    else if (!strcmp(key, "routes"))
        t->routes = v;
    else if (!strcmp(key, "h2"))
        load_table(ld, v, "h2", h2_fields, NTAB(h2_fields), &c->h2);
    else if (!strcmp(key, "timeouts"))
        load_table(ld, v, "timeouts", timeout_fields, NTAB(timeout_fields), &c->timeouts);
    else if (!strcmp(key, "limits"))
        load_table(ld, v, "limits", limit_fields, NTAB(limit_fields), &c->limits);
    else if (!strcmp(key, "throttle"))
        load_table(ld, v, "throttle", throttle_fields, NTAB(throttle_fields), &c->throttle);
    else if (!set_field(ld, top_fields, NTAB(top_fields), key, v, c))
        err_at(ld, k, "unknown key '%s'", key);
    return 0;
}

static void set_defaults(gw_config_t *c)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->workers = ncpu > 0 ? (unsigned)(ncpu > 256 ? 256 : ncpu) : 1;
    c->log_level = GW_LOG_INFO;
    c->h2 = (gw_cfg_h2_t){
        .max_concurrent_streams = GW_H2_DEF_MAX_CONCURRENT_STREAMS,
        .initial_window_size = GW_H2_DEF_INITIAL_WINDOW_SIZE,
        .connection_window_size = GW_H2_DEF_CONNECTION_WINDOW_SIZE,
        .max_frame_size = GW_H2_DEF_MAX_FRAME_SIZE,
        .header_table_size = GW_H2_DEF_HEADER_TABLE_SIZE,
        .max_header_list_size = GW_H2_DEF_MAX_HEADER_LIST_SIZE,
        .settings_timeout_ms = GW_H2_DEF_SETTINGS_TIMEOUT_MS,
        .max_requests_per_connection = GW_H2_DEF_MAX_REQUESTS_PER_CONNECTION,
        .reset_budget = GW_H2_DEF_RESET_BUDGET,
        .reset_window_ms = GW_H2_DEF_RESET_WINDOW_MS,
        .control_frame_budget = GW_H2_DEF_CONTROL_FRAME_BUDGET,
        .empty_frame_budget = GW_H2_DEF_EMPTY_FRAME_BUDGET,
        .max_queued_control = GW_H2_DEF_MAX_QUEUED_CONTROL,
        .max_priority_nodes = GW_H2_DEF_MAX_PRIORITY_NODES,
    };
    c->timeouts = (gw_cfg_timeouts_t){
        .handshake_ms = 10000,
        .first_request_ms = 10000,
        .header_ms = 10000,
        .idle_ms = 60000,
        .graceful_shutdown_ms = 30000,
        .body_ms = 60000,
        .request_body_ms = 30000,
    };
    c->limits = (gw_cfg_limits_t){
        .max_connections = 10000,
        .write_buffer = 256 * 1024,
        .max_request_head = 64 * 1024,
        /* 64 KiB cost ~50% more CPU per 256 KiB response (origin read pause/resume churn);
         * nghttpx's backend response buffer is 128K too */
        .body_buffer = 128 * 1024,
        /* a coalesced response is held once for all its subscribers (issue 19 item 2) */
        .coalesce_buffer = 1024 * 1024,
    };
    c->throttle.ipv6_prefix = 64; /* one subscriber or host per /64 (RFC 6177) */
}

void gw_config_del(gw_config_t *c)
{
    if (!c)
        return;
    gw_free(c->path);
    gw_free(c->state_dir);
    for (size_t i = 0; i < c->listen_len; i++)
        free_tls(c->listen[i].tls);
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
        gw_free(r->host);
        gw_free(r->path);
        gw_free(r->upstream_name);
        free_str_list(r->coalesce_headers, r->coalesce_headers_len);
    }
    gw_free(c->routes);
    gw_free(c);
}

int gw_config_load_string(const char *name, const char *text, size_t len, gw_config_t **out,
                          gw_config_errors_t *errs)
{
    *out = NULL;
    ld_t ld = {.file = name, .errs = errs};
    yaml_parser_t parser;
    int rv = GW_E_PARSE;
    if (!yaml_parser_initialize(&parser))
        return GW_E_NOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld.doc)) {
        if (parser.error == YAML_MEMORY_ERROR) {
            rv = GW_E_NOMEM;
        } else {
            yaml_mark_t m = parser.problem_mark;
            err_line(&ld, m.line + 1, m.column + 1, "YAML syntax error: %s%s%s",
                     parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                     parser.context ? parser.context : "");
        }
        yaml_parser_delete(&parser);
        return rv;
    }
    yaml_parser_delete(&parser);

    gw_config_t *c = gw_calloc(1, sizeof(*c));
    if (!c) {
        yaml_document_delete(&ld.doc);
        return GW_E_NOMEM;
    }
    ld.c = c;
    set_defaults(c);
    c->path = xstrdup(&ld, name);
    c->state_dir = xstrdup(&ld, "state");

    yaml_node_t *root = yaml_document_get_root_node(&ld.doc);
    if (!root || is_null(root)) {
        err_line(&ld, 1, 1, "the config is empty: 'listen', 'upstreams' and 'routes' are required");
    } else if (expect(&ld, root, YAML_MAPPING_NODE, "the config")) {
        top_ld_t t = {0};
        each_pair(&ld, root, top_pair, &t);
        if (t.listen)
            load_listen(&ld, t.listen);
        else
            err_at(&ld, root, "missing required key 'listen'");
        if (t.upstreams)
            load_upstreams(&ld, t.upstreams);
        else
            err_at(&ld, root, "missing required key 'upstreams'");
        if (t.routes)
            load_routes(&ld, t.routes);
        else
            err_at(&ld, root, "missing required key 'routes'");
        if (c->h2.connection_window_size < c->h2.initial_window_size)
            err_at(&ld, root,
                   "h2.connection_window_size (%u) is smaller than "
                   "h2.initial_window_size (%u)",
                   c->h2.connection_window_size, c->h2.initial_window_size);
    }
    yaml_document_delete(&ld.doc);
    if (ld.nomem) {
        gw_config_del(c);
        return GW_E_NOMEM;
    }
    if (ld.nerr) {
        gw_config_del(c);
        return GW_E_PARSE;
    }
    *out = c;
    return 0;
}

int gw_config_load_file(const char *path, gw_config_t **out, gw_config_errors_t *errs)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        ld_t ld = {.file = path, .errs = errs};
        err_line(&ld, 1, 1, "cannot open: %s", strerror(errno));
        return errno == ENOENT ? GW_E_NOENT : GW_E_IO;
    }
    gw_bytes_t b;
    gw_bytes_init(&b, 16u << 20);
    int rv = 0;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if ((rv = gw_bytes_append(&b, chunk, n)) < 0)
            break;
    fclose(f);
    if (rv == GW_E_LIMIT) {
        ld_t ld = {.file = path, .errs = errs};
        err_line(&ld, 1, 1, "file is larger than 16 MiB");
        rv = GW_E_PARSE;
    }
    if (rv == 0)
        rv = gw_config_load_string(path, b.base ? (const char *)b.base : "", b.len, out, errs);
    gw_bytes_free(&b);
    return rv;
}

int gw_config_load_default(gw_config_t **out, gw_config_errors_t *errs)
{
    return gw_config_load_string("<embedded>", gw_config_default_yaml,
                                 strlen(gw_config_default_yaml), out, errs);
}

const char *gw_balance_str(gw_balance_t b)
{
    static const char *const n[] = {[GW_BALANCE_ROUND_ROBIN] = "round_robin",
                                    [GW_BALANCE_LEAST_CONN] = "least_conn",
                                    [GW_BALANCE_HASH_CLIENT] = "hash_client"};
    return GW_NAME_OF(n, b, "unknown");
}
