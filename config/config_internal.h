/* config/config_internal.h — what the files of config/ share (not a public interface).
 *
 * config.c:   the loader (ld_t), its error list, the node helpers, the table-driven scalar
 *             fields, the scalar sections, the top level, the defaults and gw_config_del.
 * sections.c: listen[] with TLS, upstreams with servers and health, routes[].
 * hints.c:    messages that help: "did you mean", a port alone or out of range, tabs.
 * units.c:    sizes, durations, rates and addresses as written in the file.
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

/* config.c */
char *gw_cfg__xstrdup(ld_t *ld, const char *s);
void gw_cfg__err_at(ld_t *ld, yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
yaml_node_t *gw_cfg__node(ld_t *ld, int id);
const char *gw_cfg__kind_str(yaml_node_t *n);
const char *gw_cfg__scalar(yaml_node_t *n);
int gw_cfg__expect(ld_t *ld, yaml_node_t *n, yaml_node_type_t t, const char *key);
void gw_cfg__each_pair(ld_t *ld, yaml_node_t *map, pair_cb cb, void *obj);
int gw_cfg__set_field(ld_t *ld, const field_t *tab, size_t ntab, const char *key, yaml_node_t *v,
                      void *obj);
char **gw_cfg__load_str_list(ld_t *ld, yaml_node_t *v, const char *key, size_t *len);
/* HOST:PORT, [IPv6]:PORT or NAME:PORT into *addr (for a name only .text is set: it is resolved
 * when dialled) and its host part, allocated, into *host (replacing what was there). 0,
 * GW_E_PARSE (not an address: the caller says so, gw_cfg__err_addr), GW_E_RANGE (the port is
 * not 1..65535) or GW_E_NOMEM (ld->nomem is set). */
int gw_cfg__host_port(ld_t *ld, const char *text, gw_cfg_addr_t *addr, char **host);
void gw_cfg__free_str_list(char **l, size_t n);
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

/* sections.c */
/* A list of networks (ADDRESS or ADDRESS/BITS) at v for key, into *out (replacing it, freed
 * with gw_free) and *len; each bad entry is an error at its node. allow_any: `any` is every
 * IPv4 and IPv6 source. Returns how many names were given (0: an empty list). */
int gw_cfg__load_nets(ld_t *ld, yaml_node_t *v, const char *key, int allow_any, gw_cfg_net_t **out,
                      size_t *len);
void gw_cfg__free_tls(gw_cfg_tls_t *t);
void gw_cfg__load_listen(ld_t *ld, yaml_node_t *v);
void gw_cfg__load_upstreams(ld_t *ld, yaml_node_t *v);
void gw_cfg__load_routes(ld_t *ld, yaml_node_t *v);

#endif
