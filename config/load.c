/* config/load.c — the loader's machinery, shared by every section: the error list
 * ("FILE:LINE:COL: message"), the YAML node helpers, the table-driven scalar fields (field_t:
 * name, kind, offset, range) and the lists of strings and networks. It knows no section: the
 * top level (config.c) and the list sections (listen.c, upstreams.c, routes.c) call it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "config/config_internal.h"

/* ---- errors ------------------------------------------------------------------------------ */

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

static void add_msg(ld_t *ld, size_t line, size_t col, const char *fmt, va_list ap)
{
    ld->nerr++;
    if (!ld->errs)
        return;
    char body[512];
    vsnprintf(body, sizeof(body), fmt, ap);
    if (gw_cfg__push_msg(ld->errs, ld->file, line, col, body) < 0)
        ld->nomem = 1;
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

void gw_cfg__err_line(ld_t *ld, size_t line, size_t col, const char *fmt, ...)
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

int gw_cfg__is_null(yaml_node_t *n)
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

int gw_cfg__one_of(ld_t *ld, yaml_node_t *v, const char *key, const char *a, const char *b)
{
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
        return -1;
    const char *s = gw_cfg__scalar(v);
    if (!strcmp(s, a))
        return 0;
    if (!strcmp(s, b))
        return 1;
    gw_cfg__err_at(ld, v, "'%s' must be %s or %s, not '%s'", key, a, b, s);
    return -1;
}

yaml_node_t *gw_cfg__map_value(ld_t *ld, yaml_node_t *map, const char *key)
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

/* ---- table-driven scalar fields ---------------------------------------------------------- */

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
    {"ping_interval", "ping_interval_ms"},
    {"idle_trim", "idle_trim_ms"},
    {"cluster_check_interval", "cluster_check_interval_ms"},
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

/* The words of the enumerated kinds, and the value each stands for. */
static const struct {
    fkind_t kind;
    const char *word;
    int value;
} words[] = {
    {F_BAL, "round_robin", GW_BALANCE_ROUND_ROBIN},
    {F_BAL, "least_conn", GW_BALANCE_LEAST_CONN},
    {F_BAL, "hash_client", GW_BALANCE_HASH_CLIENT},
    {F_ALOGFMT, "combined", GW_CFG_ALOG_COMBINED},
    {F_ALOGFMT, "json", GW_CFG_ALOG_JSON},
    {F_ALOGFMT, "combined_timing", GW_CFG_ALOG_COMBINED_TIMING},
    {F_TLSVER, "tls1.2", 12},
    {F_TLSVER, "tls1.3", 13},
};

/* s, the value of a field of an enumerated kind (F_BOOL, F_LOG, F_BAL, F_ALOGFMT, F_TLSVER),
 * into the field at p: 0, or GW_E_PARSE when s is not one of the kind's words. */
static int set_word(fkind_t kind, const char *s, char *p)
{
    if (kind == F_BOOL)
        return parse_bool(s, (int *)p);
    if (kind == F_LOG) {
        gw_log_level_t l;
        if (gw_log_level_parse(s, &l) < 0)
            return GW_E_PARSE;
        *(int *)p = (int)l;
        return 0;
    }
    for (size_t i = 0; i < NTAB(words); i++) {
        if (words[i].kind != kind || strcmp(words[i].word, s))
            continue;
        if (kind == F_BAL)
            *(gw_balance_t *)p = (gw_balance_t)words[i].value;
        else
            *(int *)p = words[i].value;
        return 0;
    }
    return GW_E_PARSE;
}

/* s, the value of a field of a numeric kind, into *x: 0, GW_E_PARSE (not a number of that
 * kind) or GW_E_RANGE (too large for 64 bits). */
static int parse_number(fkind_t kind, const char *s, uint64_t *x)
{
    switch (kind) {
    case F_SIZE:
    case F_SIZE64:
    case F_U32SZ:
        return gw_parse_size(s, x);
    case F_DUR:
        return gw_parse_duration(s, x);
    case F_RATE:
        return gw_parse_rate(s, x);
    default:
        break;
    }
    uint64_t m = 0;
    if (!*s)
        return GW_E_PARSE;
    for (const char *u = s; *u; u++) {
        if (*u < '0' || *u > '9')
            return GW_E_PARSE;
        if (m > (UINT64_MAX - 9) / 10)
            return GW_E_RANGE;
        m = m * 10 + (uint64_t)(*u - '0');
    }
    *x = m;
    return 0;
}

/* x into the field at p, as wide as the kind says. */
static void store_number(fkind_t kind, char *p, uint64_t x)
{
    switch (kind) {
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
}

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
    if (f->kind == F_STR) {
        char *d = gw_cfg__xstrdup(ld, s);
        gw_free(*(char **)p);
        *(char **)p = d;
        return 1;
    }
    uint64_t x = 0;
    int word = f->kind == F_BOOL || f->kind == F_LOG || f->kind == F_BAL || f->kind == F_ALOGFMT ||
               f->kind == F_TLSVER;
    int rv = word ? set_word(f->kind, s, p) : parse_number(f->kind, s, &x);
    if (rv == GW_E_PARSE) {
        gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, kind_what(f->kind), s);
        return 1;
    }
    if (word)
        return 1;
    if (rv == GW_E_RANGE || x < f->min || x > f->max) {
        gw_cfg__err_at(ld, v, "'%s' is out of range: %s (allowed %llu..%llu)", key, s,
                       (unsigned long long)f->min, (unsigned long long)f->max);
        return 1;
    }
    store_number(f->kind, p, x);
    return 1;
}

/* ---- lists ------------------------------------------------------------------------------- */

char **gw_cfg__load_str_list(ld_t *ld, yaml_node_t *v, const char *key, size_t *len)
{
    *len = 0;
    if (v->type == YAML_SCALAR_NODE && !gw_cfg__is_null(v)) {
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

void *gw_cfg__load_list(ld_t *ld, yaml_node_t *v, const char *key, const char *what, size_t elem,
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

/* `any` is spelled out because (for proxy_protocol_from) it lets any client name any address. */
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
        } else if (!names[i] || gw_cfg__parse_net(names[i], &(*out)[*len]) < 0) {
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
