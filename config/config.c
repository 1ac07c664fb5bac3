/* config/config.c — YAML (libyaml document API) into gw_config_t, with every error collected
 * as "FILE:LINE:COL: message". Scalar fields of each section are described by tables of
 * field_t (name, kind, offset, range), so adding a key is one line plus its README entry.
 * This file holds the loader, the node helpers, the scalar tables, the top level and the
 * defaults; the list sections (listen with TLS, upstreams, routes) are in sections.c. */
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
#include "common/alog.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "config/config_internal.h"
#include "h2/defaults.h"

static const char *internal_name(const char *key);

/* ---- errors ------------------------------------------------------------------------------ */

void gw_config_errors_free(gw_config_errors_t *e)
{
    for (size_t i = 0; i < e->len; i++)
        gw_free(e->msgs[i]);
    gw_free(e->msgs);
    e->msgs = NULL;
    e->len = 0;
}

char *gw_cfg__xstrdup(ld_t *ld, const char *s)
{
    char *p = gw_strdup(s);
    if (!p)
        ld->nomem = 1;
    return p;
}

int gw_cfg__host_port(ld_t *ld, const char *text, gw_cfg_addr_t *addr, char **host)
{
    int rv = gw_parse_addr(text, addr);
    const char *end;
    size_t skip = 0;
    if (rv == GW_E_NOENT) {
        /* a host name: kept as text, resolved by whoever dials it */
        if (strlen(text) >= sizeof(addr->text))
            return GW_E_PARSE;
        memset(addr, 0, sizeof(*addr));
        strcpy(addr->text, text);
        end = strrchr(text, ':');
    } else if (rv < 0) {
        return rv == GW_E_RANGE ? GW_E_RANGE : GW_E_PARSE;
    } else {
        skip = text[0] == '['; /* an IPv6 literal's host is inside the brackets */
        end = skip ? strchr(text, ']') : strrchr(text, ':');
    }
    size_t hl = (size_t)(end - text) - skip;
    gw_free(*host);
    if (!(*host = gw_malloc(hl + 1))) {
        ld->nomem = 1;
        return GW_E_NOMEM;
    }
    memcpy(*host, text + skip, hl);
    (*host)[hl] = 0;
    return 0;
}

static void add_msg(ld_t *ld, size_t line, size_t col, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void err_line(ld_t *ld, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Append "FILE:LINE:COL: body" (or "FILE: body" for line 0) to e. 0 or GW_E_NOMEM. */
static int push_msg(gw_config_errors_t *e, const char *file, size_t line, size_t col,
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

static void add_msg(ld_t *ld, size_t line, size_t col, const char *fmt, va_list ap)
{
    ld->nerr++;
    if (!ld->errs)
        return;
    char body[512];
    vsnprintf(body, sizeof(body), fmt, ap);
    if (push_msg(ld->errs, ld->file, line, col, body) < 0)
        ld->nomem = 1;
}

int gw_config_error_add(gw_config_errors_t *e, const gw_cfg_pos_t *at, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    return push_msg(e, at && at->file ? at->file : "<config>", at ? at->line : 0, at ? at->col : 0,
                    body);
}

gw_cfg_pos_t gw_cfg__pos(ld_t *ld, yaml_node_t *n)
{
    return (gw_cfg_pos_t){.file = ld->c ? ld->c->path : NULL,
                          .line = (unsigned)n->start_mark.line + 1,
                          .col = (unsigned)n->start_mark.column + 1};
}

void gw_cfg__err_at(ld_t *ld, yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(ld, n ? n->start_mark.line + 1 : 1, n ? n->start_mark.column + 1 : 1, fmt, ap);
    va_end(ap);
}

static void err_line(ld_t *ld, size_t line, size_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(ld, line, col, fmt, ap);
    va_end(ap);
}

/* ---- node helpers ------------------------------------------------------------------------ */

yaml_node_t *gw_cfg__node(ld_t *ld, int id)
{
    return yaml_document_get_node(&ld->doc, id);
}

const char *gw_cfg__kind_str(yaml_node_t *n)
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

const char *gw_cfg__scalar(yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar written as plain `null`, `~` or nothing. */
static int is_null(yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = gw_cfg__scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null");
}

int gw_cfg__expect(ld_t *ld, yaml_node_t *n, yaml_node_type_t t, const char *key)
{
    if (n->type == t)
        return 1;
    const char *want = t == YAML_SCALAR_NODE     ? "a scalar"
                       : t == YAML_SEQUENCE_NODE ? "a list"
                                                 : "a map";
    gw_cfg__err_at(ld, n, "'%s' must be %s, not %s", key, want, gw_cfg__kind_str(n));
    return 0;
}

/* The value of key in map (a mapping node; its first occurrence), or NULL. */
static yaml_node_t *map_value(ld_t *ld, yaml_node_t *map, const char *key)
{
    if (map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = gw_cfg__scalar(gw_cfg__node(ld, p->key));
        if (k && !strcmp(k, key))
            return gw_cfg__node(ld, p->value);
    }
    return NULL;
}

/* Iterate a mapping; reports duplicate keys and non-scalar keys. */

void gw_cfg__each_pair(ld_t *ld, yaml_node_t *map, pair_cb cb, void *obj)
{
    yaml_node_pair_t *start = map->data.mapping.pairs.start;
    yaml_node_pair_t *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *k = gw_cfg__node(ld, p->key), *v = gw_cfg__node(ld, p->value);
        const char *key = gw_cfg__scalar(k);
        if (!key) {
            gw_cfg__err_at(ld, k, "map keys must be scalars");
            continue;
        }
        int dup = 0;
        for (yaml_node_pair_t *q = start; q < p && !dup; q++) {
            const char *qk = gw_cfg__scalar(gw_cfg__node(ld, q->key));
            dup = qk && !strcmp(qk, key);
        }
        if (dup) {
            gw_cfg__err_at(ld, k, "duplicate key '%s'", key);
            continue;
        }
        cb(ld, key, k, v, obj);
    }
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
    case F_ALOGFMT:
        return "combined, combined_timing or json";
    default:
        return "a non-negative integer";
    }
}

/* Parse v into the field; returns 1 if `key` is in the table (handled), 0 if unknown. */
int gw_cfg__set_field(ld_t *ld, const field_t *tab, size_t ntab, const char *key, yaml_node_t *v,
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
        gw_cfg__err_at(ld, v, "'%s' must be %s, not %s", key, kind_what(f->kind),
                       gw_cfg__kind_str(v));
        return 1;
    }
    const char *s = gw_cfg__scalar(v);
    char *p = (char *)obj + f->off;
    uint64_t x = 0;
    int rv = 0;
    switch (f->kind) {
    case F_STR: {
        char *d = gw_cfg__xstrdup(ld, s);
        gw_free(*(char **)p);
        *(char **)p = d;
        return 1;
    }
    case F_BOOL:
        if (parse_bool(s, (int *)p) < 0)
            gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_LOG: {
        gw_log_level_t l;
        if (gw_log_level_parse(s, &l) < 0)
            gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
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
            gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_ALOGFMT:
        if (!strcmp(s, "combined"))
            *(int *)p = GW_CFG_ALOG_COMBINED;
        else if (!strcmp(s, "json"))
            *(int *)p = GW_CFG_ALOG_JSON;
        else if (!strcmp(s, "combined_timing"))
            *(int *)p = GW_CFG_ALOG_COMBINED_TIMING;
        else
            gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    case F_TLSVER:
        if (!strcmp(s, "tls1.2"))
            *(int *)p = 12;
        else if (!strcmp(s, "tls1.3"))
            *(int *)p = 13;
        else
            gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
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
        gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    }
    if (rv == GW_E_RANGE || x < f->min || x > f->max) {
        gw_cfg__err_at(ld, v, "'%s' is out of range: %s (allowed %llu..%llu)", key, s,
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
    FLD(gw_cfg_h2_t, max_pushes, F_UINT, 0, 1000),
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
    {"drain_grace", "drain_grace_ms"},
    {"body", "body_ms"},
    {"request_body", "request_body_ms"},
    {"tunnel_idle", "tunnel_idle_ms"},
    {"learn_ttl", "learn_ttl_ms"},
    {"tunnel_drain", "tunnel_drain_ms"},
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
    {"timeout", "timeout_ms"},
    {"poll_interval", "poll_interval_ms"},
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

const char *gw_cfg__yaml_name(const char *name)
{
    for (size_t i = 0; i < NTAB(ms_keys); i++)
        if (!strcmp(ms_keys[i][1], name))
            return ms_keys[i][0];
    return name;
}

static const field_t timeout_fields[] = {
    FLD(gw_cfg_timeouts_t, handshake_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, first_request_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, header_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, idle_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, graceful_shutdown_ms, F_DUR, 0, DAY_MS),
    FLD(gw_cfg_timeouts_t, drain_grace_ms, F_DUR, 0, 60000),
    FLD(gw_cfg_timeouts_t, body_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, request_body_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, tunnel_idle_ms, F_DUR, 1, DAY_MS),
    FLD(gw_cfg_timeouts_t, tunnel_drain_ms, F_DUR, 0, DAY_MS),
};

static const field_t limit_fields[] = {
    FLD(gw_cfg_limits_t, max_connections, F_UINT, 1, 10000000),
    FLD(gw_cfg_limits_t, write_buffer, F_SIZE, 4096, 1ull << 30),
    FLD(gw_cfg_limits_t, max_request_head, F_SIZE, 1024, 16ull << 20),
    FLD(gw_cfg_limits_t, body_buffer, F_SIZE, 1024, 1ull << 30),
    FLD(gw_cfg_limits_t, coalesce_buffer, F_SIZE, 64 * 1024, 1ull << 30),
    FLD(gw_cfg_limits_t, draining_generations, F_UINT, 1, 256),
    FLD(gw_cfg_limits_t, max_tunnels, F_UINT, 0, 10000000),
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
    if (!gw_cfg__set_field(ld, t->tab, t->n, key, v, target))
        gw_cfg__err_unknown_key(ld, k, key, t->section, t->tab, t->n, NULL);
    return 0;
}

static void load_table(ld_t *ld, yaml_node_t *v, const char *section, const field_t *tab, size_t n,
                       void *target)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, section))
        return;
    table_obj_t t = {tab, n, section};
    void *pair[2] = {&t, target};
    gw_cfg__each_pair(ld, v, table_pair, pair);
}

/* -- strings list -- */
char **gw_cfg__load_str_list(ld_t *ld, yaml_node_t *v, const char *key, size_t *len)
{
    *len = 0;
    if (v->type == YAML_SCALAR_NODE && !is_null(v)) {
        char **out = gw_calloc(1, sizeof(char *));
        if (!out) {
            ld->nomem = 1;
            return NULL;
        }
        out[0] = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
        *len = 1;
        return out;
    }
    if (!gw_cfg__expect(ld, v, YAML_SEQUENCE_NODE, key))
        return NULL;
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    char **out = gw_calloc(n ? n : 1, sizeof(char *));
    if (!out) {
        ld->nomem = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = gw_cfg__node(ld, v->data.sequence.items.start[i]);
        if (!gw_cfg__expect(ld, it, YAML_SCALAR_NODE, key))
            continue;
        out[(*len)++] = gw_cfg__xstrdup(ld, gw_cfg__scalar(it));
    }
    return out;
}

void gw_cfg__free_str_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gw_free(l[i]);
    gw_free(l);
}

/* ---- top level ---- */

static const field_t top_fields[] = {
    FLD(gw_config_t, workers, F_UINT, 1, 256),
    FLD(gw_config_t, log_level, F_LOG, 0, 0),
    FLD(gw_config_t, state_dir, F_STR, 0, 0),
    FLD(gw_config_t, pid_file, F_STR, 0, 0),
};

static const field_t compression_fields[] = {
    FLD(gw_cfg_compression_t, min_size, F_SIZE, 0, 1ull << 30),
    FLD(gw_cfg_compression_t, gzip_level, F_UINT, 1, 9),
    FLD(gw_cfg_compression_t, gzip_window_bits, F_UINT, 9, 15),
    FLD(gw_cfg_compression_t, gzip_mem_level, F_UINT, 1, 9),
    FLD(gw_cfg_compression_t, brotli_level, F_UINT, 0, 11),
    FLD(gw_cfg_compression_t, brotli_window_bits, F_UINT, 10, 24),
    FLD(gw_cfg_compression_t, zstd_level, F_UINT, 1, 19),
    FLD(gw_cfg_compression_t, zstd_window_log, F_UINT, 10, 23),
    FLD(gw_cfg_compression_t, max_concurrent, F_UINT, 1, 1000000),
    FLD(gw_cfg_compression_t, max_memory, F_SIZE64, 64 * 1024, 1ull << 40),
    FLD(gw_cfg_compression_t, skip_private, F_BOOL, 0, 0),
};

static const field_t early_hints_fields[] = {
    FLD(gw_cfg_early_hints_t, learn_entries, F_UINT, 1, 1000000),
    FLD(gw_cfg_early_hints_t, learn_ttl_ms, F_DUR, 1, DAY_MS),
};

static int early_hints_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    if (!gw_cfg__set_field(ld, early_hints_fields, NTAB(early_hints_fields), key, v, obj))
        gw_cfg__err_unknown_key(ld, k, key, "early_hints", early_hints_fields,
                                NTAB(early_hints_fields), NULL);
    return 0;
}

static int compression_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_compression_t *z = obj;
    if (!strcmp(key, "types")) {
        gw_cfg__free_str_list(z->types, z->types_len);
        z->types = gw_cfg__load_str_list(ld, v, key, &z->types_len);
        for (size_t i = 0; i < z->types_len; i++)
            if (z->types[i] && (!z->types[i][0] || strchr(z->types[i], ' ')))
                gw_cfg__err_at(ld, v,
                               "compression type '%s' must be a media type, "
                               "'type/*' or '+suffix'",
                               z->types[i]);
    } else if (!gw_cfg__set_field(ld, compression_fields, NTAB(compression_fields), key, v, z)) {
        static const char *const more[] = {"types", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "compression", compression_fields,
                                NTAB(compression_fields), more);
    }
    return 0;
}

/* access_log.log_format: compiled once here (the workers format every line with it); an error
 * points at the value. */
static void access_log_template(ld_t *ld, yaml_node_t *map, gw_cfg_access_log_t *al)
{
    yaml_node_t *at = map;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = gw_cfg__node(ld, p->key);
        const char *ks = k ? gw_cfg__scalar(k) : NULL;
        if (ks && !strcmp(ks, "log_format"))
            at = gw_cfg__node(ld, p->value);
    }
    const char *why;
    size_t off;
    int rv = gw_alog_tmpl_new(al->log_format, &al->tmpl, &why, &off);
    if (rv == GW_E_NOMEM)
        gw_cfg__err_at(ld, at, "out of memory");
    else if (rv < 0)
        gw_cfg__err_at(ld, at, "access_log 'log_format': %s at byte %zu ('%.20s')", why, off,
                       al->log_format + off);
}

static const field_t access_log_fields[] = {
    FLD(gw_cfg_access_log_t, path, F_STR, 0, 0),
    FLD(gw_cfg_access_log_t, format, F_ALOGFMT, 0, 0),
    FLD(gw_cfg_access_log_t, log_format, F_STR, 0, 0),
    FLD(gw_cfg_access_log_t, request_id, F_BOOL, 0, 0),
};

typedef struct {
    gw_cfg_admin_t *a;
    int address; /* the key was there (valid or not) */
} admin_ld_t;

static int admin_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    admin_ld_t *x = obj;
    gw_cfg_admin_t *a = x->a;
    static const field_t f[] = {FLD(gw_cfg_admin_t, timeout_ms, F_DUR, 10, 60000)};
    if (strcmp(key, "address") != 0) {
        if (!gw_cfg__set_field(ld, f, NTAB(f), key, v, a)) {
            static const char *const more[] = {"address", NULL};
            gw_cfg__err_unknown_key(ld, k, key, "admin", f, NTAB(f), more);
        }
        return 0;
    }
    x->address = 1;
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
        return 0;
    int rv = gw_parse_addr(gw_cfg__scalar(v), &a->addr);
    if (rv < 0)
        gw_cfg__err_addr(ld, v, "address", rv, 1, "IP:PORT or [IPv6]:PORT");
    else
        a->enabled = 1;
    return 0;
}

static const field_t cluster_fields[] = {
    FLD(gw_cfg_cluster_t, password, F_STR, 0, 0),
    FLD(gw_cfg_cluster_t, db, F_UINT, 0, 1000000),
    FLD(gw_cfg_cluster_t, key_prefix, F_STR, 0, 0),
    FLD(gw_cfg_cluster_t, timeout_ms, F_DUR, 1, 60000),
    FLD(gw_cfg_cluster_t, connect_timeout_ms, F_DUR, 1, 600000),
    FLD(gw_cfg_cluster_t, poll_interval_ms, F_DUR, 10, 3600000),
    FLD(gw_cfg_cluster_t, ticket_rotation_ms, F_DUR, 1000, 7 * DAY_MS),
    FLD(gw_cfg_cluster_t, max_reply, F_SIZE, 1024, 16 * 1024 * 1024),
};

static int cluster_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_cluster_t *cl = obj;
    if (strcmp(key, "redis") != 0) {
        static const char *const more[] = {"redis", NULL};
        if (!gw_cfg__set_field(ld, cluster_fields, NTAB(cluster_fields), key, v, obj))
            gw_cfg__err_unknown_key(ld, k, key, "cluster", cluster_fields, NTAB(cluster_fields),
                                    more);
        return 0;
    }
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
        return 0;
    const char *text = gw_cfg__scalar(v);
    /* a host name is resolved when the client connects */
    int rv = gw_cfg__host_port(ld, text, &cl->redis, &cl->redis_host);
    if (rv == GW_E_PARSE || rv == GW_E_RANGE)
        gw_cfg__err_addr(ld, v, "redis", rv, 0, "HOST:PORT or [IPv6]:PORT");
    else if (rv == 0)
        cl->enabled = 1;
    return 0;
}

typedef struct {
    yaml_node_t *listen, *upstreams, *routes, *forwarded_for;
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
    else if (!strcmp(key, "early_hints")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "early_hints"))
            gw_cfg__each_pair(ld, v, early_hints_pair, &c->early_hints);
    } else if (!strcmp(key, "compression")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "compression"))
            gw_cfg__each_pair(ld, v, compression_pair, &c->compression);
    } else if (!strcmp(key, "access_log")) {
        load_table(ld, v, "access_log", access_log_fields, NTAB(access_log_fields), &c->access_log);
        yaml_node_t *pv = map_value(ld, v, "path");
        if (pv)
            c->access_log.path_at = gw_cfg__pos(ld, pv);
        if (c->access_log.path && !strcmp(c->access_log.path, "off")) {
            gw_free(c->access_log.path);
            c->access_log.path = NULL;
        } else if (c->access_log.path && !c->access_log.path[0]) {
            gw_cfg__err_at(ld, v, "access_log 'path' must be a file name, stderr or off");
        }
        if (c->access_log.log_format && !c->access_log.tmpl)
            access_log_template(ld, v, &c->access_log);
    } else if (!strcmp(key, "cluster")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "cluster")) {
            gw_cfg__each_pair(ld, v, cluster_pair, &c->cluster);
            if (!c->cluster.enabled)
                gw_cfg__err_at(ld, v, "missing required key 'redis' in cluster");
            else if (c->cluster.key_prefix && !c->cluster.key_prefix[0])
                gw_cfg__err_at(ld, v, "cluster 'key_prefix' must not be empty");
        }
    } else if (!strcmp(key, "admin")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "admin")) {
            admin_ld_t x = {.a = &c->admin};
            gw_cfg__each_pair(ld, v, admin_pair, &x);
            if (!x.address)
                gw_cfg__err_at(ld, v, "missing required key 'address' in admin");
        }
    } else if (!strcmp(key, "forwarded_for")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        t->forwarded_for = v;
        const char *m = gw_cfg__scalar(v);
        if (!strcmp(m, "append"))
            c->forwarded_append = 1;
        else if (!strcmp(m, "replace"))
            c->forwarded_append = 0;
        else
            gw_cfg__err_at(ld, v, "'forwarded_for' must be replace or append, not '%s'", m);
    } else if (!strcmp(key, "trusted_proxies")) {
        gw_cfg__load_nets(ld, v, key, 0, &c->trusted_proxies, &c->trusted_proxies_len);
    } else if (!strcmp(key, "pid_file")) {
        gw_cfg__set_field(ld, top_fields, NTAB(top_fields), key, v, c);
        c->pid_file_at = gw_cfg__pos(ld, v);
    } else if (!gw_cfg__set_field(ld, top_fields, NTAB(top_fields), key, v, c)) {
        static const char *const more[] = {
            "listen",        "upstreams",       "routes",      "h2",         "timeouts", "limits",
            "throttle",      "early_hints",     "compression", "access_log", "admin",    "cluster",
            "forwarded_for", "trusted_proxies", NULL};
        gw_cfg__err_unknown_key(ld, k, key, NULL, top_fields, NTAB(top_fields), more);
    }
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
        .max_pushes = GW_H2_DEF_MAX_PUSHES,
    };
    c->timeouts = (gw_cfg_timeouts_t){
        .handshake_ms = 10000,
        .first_request_ms = 10000,
        .header_ms = 10000,
        .idle_ms = 60000,
        .graceful_shutdown_ms = 30000,
        .drain_grace_ms = 1000,
        .body_ms = 60000,
        .request_body_ms = 30000,
        .tunnel_idle_ms = 600000,
        .tunnel_drain_ms = 300000,
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
        .draining_generations = 16,
        .max_tunnels = 10000,
    };
    c->throttle.ipv6_prefix = 64; /* one subscriber or host per /64 (RFC 6177) */
    c->access_log.request_id = 1;
    c->early_hints.learn_entries = 1024;
    c->early_hints.learn_ttl_ms = 600000;
    c->admin.timeout_ms = 2000; /* a probe's or a scraper's head is in one packet */
    c->cluster.timeout_ms = 20; /* Envoy's global rate limit default */
    c->cluster.connect_timeout_ms = 1000;
    c->cluster.poll_interval_ms = 1000;
    c->cluster.ticket_rotation_ms = 3600000;
    /* the largest reply the cluster expects is the ticket keys' value (GET: 14 + 4 x 80 bytes)
     * or an error line (a script error names the script and its line): well under 1 KiB */
    c->cluster.max_reply = 16 * 1024;
    c->compression = (gw_cfg_compression_t){
        .min_size = 256,
        .gzip_level = 5,
        .gzip_window_bits = 15,
        .gzip_mem_level = 8,
        .brotli_level = 4,
        .brotli_window_bits = 18,
        .zstd_level = 3,
        .zstd_window_log = 18,
        .max_concurrent = 1024,
        /* 1024 br streams at the defaults would hold 2 GiB a worker */
        .max_memory = 64ull << 20,
        .skip_private = 1,
    };
}

void gw_config_del(gw_config_t *c)
{
    if (!c)
        return;
    gw_free(c->path);
    gw_free(c->state_dir);
    gw_free(c->pid_file);
    gw_free(c->trusted_proxies);
    gw_cfg__free_str_list(c->compression.types, c->compression.types_len);
    gw_free(c->access_log.path);
    gw_free(c->access_log.log_format);
    gw_alog_tmpl_del(c->access_log.tmpl);
    gw_free(c->cluster.redis_host);
    gw_free(c->cluster.password);
    gw_free(c->cluster.key_prefix);
    for (size_t i = 0; i < c->listen_len; i++) {
        gw_cfg__free_tls(c->listen[i].tls);
        gw_free(c->listen[i].proxy_from);
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
            err_line(&ld, m.line + 1, m.column + 1, "YAML syntax error: %s%s%s%s",
                     parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                     parser.context ? parser.context : "",
                     gw_cfg__tab_at(text, len, m.line, m.column)
                         ? " (a tab: tabs cannot indent YAML, indent with spaces)"
                         : "");
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
    c->path = gw_cfg__xstrdup(&ld, name);
    c->state_dir = gw_cfg__xstrdup(&ld, "state");

    yaml_node_t *root = yaml_document_get_root_node(&ld.doc);
    if (!root || is_null(root)) {
        err_line(&ld, 1, 1, "the config is empty: 'listen', 'upstreams' and 'routes' are required");
    } else if (gw_cfg__expect(&ld, root, YAML_MAPPING_NODE, "the config")) {
        top_ld_t t = {0};
        gw_cfg__each_pair(&ld, root, top_pair, &t);
        if (t.listen)
            gw_cfg__load_listen(&ld, t.listen);
        else
            gw_cfg__err_at(&ld, root, "missing required key 'listen'");
        if (t.upstreams)
            gw_cfg__load_upstreams(&ld, t.upstreams);
        else
            gw_cfg__err_at(&ld, root, "missing required key 'upstreams'");
        if (t.routes)
            gw_cfg__load_routes(&ld, t.routes);
        else
            gw_cfg__err_at(&ld, root, "missing required key 'routes'");
        if (c->forwarded_append && !c->trusted_proxies_len)
            gw_cfg__err_at(&ld, t.forwarded_for,
                           "forwarded_for: append needs trusted_proxies (the networks of the "
                           "proxies whose X-Forwarded-For is kept)");
        for (size_t i = 0; i < c->routes_len; i++) {
            c->routes[i].forwarded_append = c->forwarded_append;
            c->routes[i].trusted_proxies = c->trusted_proxies;
            c->routes[i].trusted_proxies_len = c->trusted_proxies_len;
        }
        if (c->cluster.enabled && !c->cluster.key_prefix)
            c->cluster.key_prefix = gw_cfg__xstrdup(&ld, "h2gate:");
        if (!c->compression.types) {
            /* what browsers fetch as text: worth compressing (issue 22) */
            static const char *const def[] = {"text/*",
                                              "application/javascript",
                                              "application/json",
                                              "application/xml",
                                              "image/svg+xml",
                                              "+json",
                                              "+xml"};
            c->compression.types = gw_calloc(NTAB(def), sizeof(char *));
            if (!c->compression.types)
                ld.nomem = 1;
            for (size_t i = 0; c->compression.types && i < NTAB(def); i++)
                c->compression.types[c->compression.types_len++] = gw_cfg__xstrdup(&ld, def[i]);
        }
        if (c->h2.connection_window_size < c->h2.initial_window_size)
            gw_cfg__err_at(&ld, root,
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
    ld_t ld = {.file = path, .errs = errs};
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        err_line(&ld, 1, 1, "cannot open: %s", strerror(e));
        return e == ENOENT ? GW_E_NOENT : GW_E_IO;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        /* fopen opens a directory for reading; reading it then fails (EISDIR) */
        fclose(f);
        err_line(&ld, 1, 1, "is a directory, not a config file");
        return GW_E_IO;
    }
    gw_bytes_t b;
    gw_bytes_init(&b, 16u << 20);
    int rv = 0;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if ((rv = gw_bytes_append(&b, chunk, n)) < 0)
            break;
    if (rv == 0 && ferror(f)) {
        err_line(&ld, 1, 1, "cannot read: %s", strerror(errno));
        rv = GW_E_IO;
    }
    fclose(f);
    if (rv == GW_E_LIMIT) {
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
