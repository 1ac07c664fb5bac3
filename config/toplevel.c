/* config/toplevel.c — YAML (libyaml document API) into gw_config_t, with every error collected
 * as "FILE:LINE:COL: message": the entry points (string, file, the embedded default), the top
 * level and its scalar sections (h2, timeouts, limits, heap, throttle, compression, early_hints,
 * access_log, admin, cluster), the defaults and the checks across sections. Scalar fields are
 * described by tables of field_t (name, kind, offset, range; load.c reads them), so adding a
 * key is one line plus its README entry. The list sections are in listen.c, upstreams.c and
 * routes.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
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

/* ---- scalar sections ---------------------------------------------------------------------- */

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
    FLD(gw_cfg_h2_t, frame_ahead, F_SIZE, 1024, 1ull << 30),
    FLD(gw_cfg_h2_t, notsent_lowat, F_SIZE, 0, 64ull << 20),
    FLD(gw_cfg_h2_t, bulk_lowat, F_SIZE, 0, 64ull << 20),
};
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
    FLD(gw_cfg_limits_t, respond_body, F_SIZE, 0, 1u << 20),
};

static const field_t heap_fields[] = {
    FLD(gw_cfg_heap_t, idle_trim_ms, F_DUR, 0, 3600000),
    FLD(gw_cfg_heap_t, idle_trim_free, F_SIZE64, 0, 1ull << 40),
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

/* ---- top level ---- */

static const field_t top_fields[] = {
    FLD(gw_config_t, workers, F_UINT, 1, 256),
    FLD(gw_config_t, log_level, F_LOG, 0, 0),
    FLD(gw_config_t, state_dir, F_STR, 0, 0),
    FLD(gw_config_t, pid_file, F_STR, 0, 0),
    FLD(gw_config_t, error_page_max, F_SIZE, 1, 16u << 20),
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
    FLD(gw_cfg_cluster_t, ping_interval_ms, F_DUR, 10, 3600000),
    FLD(gw_cfg_cluster_t, ticket_rotation_ms, F_DUR, 1000, 7 * DAY_MS),
    FLD(gw_cfg_cluster_t, max_reply, F_SIZE, 1024, 16 * 1024 * 1024),
    FLD(gw_cfg_cluster_t, master, F_STR, 0, 0),
    FLD(gw_cfg_cluster_t, sentinel_password, F_STR, 0, 0),
};

/* cluster.sentinels: a list of HOST:PORT, each once, at most GW_CFG_SENTINELS_MAX. */
static void cluster_sentinels(ld_t *ld, yaml_node_t *v, gw_cfg_cluster_t *cl)
{
    if (!gw_cfg__expect(ld, v, YAML_SEQUENCE_NODE, "sentinels"))
        return;
    yaml_node_item_t *it = v->data.sequence.items.start, *end = v->data.sequence.items.top;
    if (it == end) {
        gw_cfg__err_at(ld, v, "cluster 'sentinels' must name at least one sentinel");
        return;
    }
    if (end - it > GW_CFG_SENTINELS_MAX) {
        gw_cfg__err_at(ld, v, "cluster 'sentinels' may name at most %d sentinels, not %d",
                       GW_CFG_SENTINELS_MAX, (int)(end - it));
        return;
    }
    for (; it < end; it++) {
        yaml_node_t *n = gw_cfg__node(ld, *it);
        if (!n || !gw_cfg__expect(ld, n, YAML_SCALAR_NODE, "sentinels"))
            continue;
        gw_cfg_sentinel_t *s = &cl->sentinels[cl->sentinels_len];
        int rv = gw_cfg__host_port(ld, gw_cfg__scalar(n), &s->addr, &s->host);
        if (rv == GW_E_PARSE || rv == GW_E_RANGE) {
            gw_cfg__err_addr(ld, n, "sentinels", rv, 0, "HOST:PORT or [IPv6]:PORT");
            continue;
        }
        if (rv < 0)
            continue;
        int dup = 0;
        for (size_t i = 0; i < cl->sentinels_len && !dup; i++)
            dup = !strcmp(cl->sentinels[i].addr.text, s->addr.text);
        if (dup) {
            gw_cfg__err_at(ld, n, "cluster 'sentinels' names %s twice", s->addr.text);
            gw_free(s->host);
            s->host = NULL;
            continue;
        }
        cl->sentinels_len++;
    }
}

/* The checks across the keys of the cluster section v: Redis is `redis` or `sentinels` (with
 * `master`), never both. */
static void cluster_check(ld_t *ld, yaml_node_t *v, gw_cfg_cluster_t *cl)
{
    yaml_node_t *redis = gw_cfg__map_value(ld, v, "redis");
    yaml_node_t *sent = gw_cfg__map_value(ld, v, "sentinels");
    yaml_node_t *master = gw_cfg__map_value(ld, v, "master");
    yaml_node_t *spw = gw_cfg__map_value(ld, v, "sentinel_password");
    if (redis && sent) {
        gw_cfg__err_at(ld, sent,
                       "cluster 'sentinels' and 'redis' exclude each other: the sentinels name "
                       "the Redis to use");
        return;
    }
    if (!redis && !sent) {
        gw_cfg__err_at(ld, v, "missing required key 'redis' (or 'sentinels') in cluster");
        return;
    }
    if (redis) {
        if (master)
            gw_cfg__err_at(ld, master, "cluster 'master' needs 'sentinels' (not 'redis')");
        if (spw)
            gw_cfg__err_at(ld, spw, "cluster 'sentinel_password' needs 'sentinels'");
        return;
    }
    if (!master) {
        gw_cfg__err_at(ld, sent,
                       "cluster 'sentinels' needs 'master': the name the sentinels monitor");
        return;
    }
    const char *m = cl->master ? cl->master : "";
    size_t ml = strlen(m), bad = 0;
    for (size_t i = 0; i < ml; i++)
        bad |= (unsigned char)m[i] <= 0x20 || (unsigned char)m[i] >= 0x7f;
    if (!ml || ml > GW_CFG_MASTER_NAME_MAX || bad)
        gw_cfg__err_at(ld, master,
                       "cluster 'master' must be 1 to %d printable characters without spaces",
                       GW_CFG_MASTER_NAME_MAX);
    if (cl->sentinels_len)
        cl->enabled = 1;
}

static int cluster_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_cluster_t *cl = obj;
    if (!strcmp(key, "sentinels")) {
        cluster_sentinels(ld, v, cl);
        return 0;
    }
    if (strcmp(key, "redis") != 0) {
        static const char *const more[] = {"redis", "sentinels", NULL};
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
    else if (!strcmp(key, "heap"))
        load_table(ld, v, "heap", heap_fields, NTAB(heap_fields), &c->heap);
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
        yaml_node_t *pv = gw_cfg__map_value(ld, v, "path");
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
            cluster_check(ld, v, &c->cluster);
            if (c->cluster.enabled && c->cluster.key_prefix && !c->cluster.key_prefix[0])
                gw_cfg__err_at(ld, v, "cluster 'key_prefix' must not be empty");
        }
    } else if (!strcmp(key, "acme")) {
        gw_cfg__load_acme(ld, v);
    } else if (!strcmp(key, "cache")) {
        gw_cfg__load_cache(ld, v);
    } else if (!strcmp(key, "admin")) {
        if (gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "admin")) {
            admin_ld_t x = {.a = &c->admin};
            gw_cfg__each_pair(ld, v, admin_pair, &x);
            if (!x.address)
                gw_cfg__err_at(ld, v, "missing required key 'address' in admin");
        }
    } else if (!strcmp(key, "forwarded_for")) {
        int w = gw_cfg__one_of(ld, v, key, "replace", "append");
        if (w < 0)
            return 0;
        t->forwarded_for = v;
        c->forwarded_append = w == 1;
    } else if (!strcmp(key, "error_pages")) {
        gw_cfg__load_error_pages(ld, v, &c->error_pages);
    } else if (!strcmp(key, "trusted_proxies")) {
        gw_cfg__load_nets(ld, v, key, 0, &c->trusted_proxies, &c->trusted_proxies_len);
    } else if (!strcmp(key, "request_headers") || !strcmp(key, "response_headers")) {
        int resp = key[2] == 's';
        gw_cfg__load_hdr_rules(ld, v, key, resp, resp ? &c->response_headers : &c->request_headers);
    } else if (!strcmp(key, "pid_file")) {
        gw_cfg__set_field(ld, top_fields, NTAB(top_fields), key, v, c);
        c->pid_file_at = gw_cfg__pos(ld, v);
    } else if (!gw_cfg__set_field(ld, top_fields, NTAB(top_fields), key, v, c)) {
        static const char *const more[] = {"listen",
                                           "upstreams",
                                           "routes",
                                           "h2",
                                           "timeouts",
                                           "limits",
                                           "heap",
                                           "throttle",
                                           "early_hints",
                                           "compression",
                                           "cache",
                                           "access_log",
                                           "admin",
                                           "cluster",
                                           "forwarded_for",
                                           "trusted_proxies",
                                           "request_headers",
                                           "response_headers",
                                           "error_pages",
                                           "acme",
                                           NULL};
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
        .frame_ahead = GW_H2_DEF_FRAME_AHEAD,
        .notsent_lowat = GW_H2_DEF_NOTSENT_LOWAT,
        .bulk_lowat = GW_H2_DEF_BULK_LOWAT,
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
        /* a coalesced response is held once for all its subscribers */
        .coalesce_buffer = 1024 * 1024,
        .draining_generations = 16,
        .max_tunnels = 10000,
        .respond_body = 64 * 1024,
    };
    /* server/heap.c: a burst of large responses leaves 9-42 MB free inside the workers'
     * arenas, which no trim threshold returns; a page load holds about 2 MiB */
    c->heap = (gw_cfg_heap_t){.idle_trim_ms = 1000, .idle_trim_free = 8u << 20};
    c->error_page_max = 64 * 1024;
    c->cache = (gw_cfg_cache_t){
        .memory = 256u << 20, /* per process, shared by the workers */
        .max_object = 8u << 20,
        .status_header = 1,
        .max_background_revalidations = 128, /* per worker */
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

/* The YAML text into ld->doc: 0, GW_E_PARSE (a syntax error, reported) or GW_E_NOMEM. */
static int parse_yaml(ld_t *ld, const char *text, size_t len)
{
    yaml_parser_t parser;
    int rv = 0;
    if (!yaml_parser_initialize(&parser))
        return GW_E_NOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld->doc)) {
        rv = GW_E_PARSE;
        if (parser.error == YAML_MEMORY_ERROR) {
            rv = GW_E_NOMEM;
        } else {
            yaml_mark_t m = parser.problem_mark;
            gw_cfg__err_line(ld, m.line + 1, m.column + 1, "YAML syntax error: %s%s%s%s",
                             parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                             parser.context ? parser.context : "",
                             gw_cfg__tab_at(text, len, m.line, m.column)
                                 ? " (a tab: tabs cannot indent YAML, indent with spaces)"
                                 : "");
        }
    }
    yaml_parser_delete(&parser);
    return rv;
}

/* What depends on several sections, once they are all read. */
static void cross_checks(ld_t *ld, yaml_node_t *root, const top_ld_t *t)
{
    gw_config_t *c = ld->c;
    if (c->forwarded_append && !c->trusted_proxies_len)
        gw_cfg__err_at(ld, t->forwarded_for,
                       "forwarded_for: append needs trusted_proxies (the networks of the "
                       "proxies whose X-Forwarded-For is kept)");
    for (size_t i = 0; i < c->routes_len; i++) {
        c->routes[i].forwarded_append = c->forwarded_append;
        c->routes[i].trusted_proxies = c->trusted_proxies;
        c->routes[i].trusted_proxies_len = c->trusted_proxies_len;
    }
    gw_cfg__read_error_pages(ld); /* error_page_max is known now */
    if (c->cluster.enabled && !c->cluster.key_prefix)
        c->cluster.key_prefix = gw_cfg__xstrdup(ld, "h2gate:");
    gw_cfg__check_acme(ld);
    if (!c->compression.types) {
        /* what browsers fetch as text: worth compressing */
        static const char *const def[] = {"text/*",
                                          "application/javascript",
                                          "application/json",
                                          "application/xml",
                                          "image/svg+xml",
                                          "+json",
                                          "+xml"};
        c->compression.types = gw_calloc(NTAB(def), sizeof(char *));
        if (!c->compression.types)
            ld->nomem = 1;
        for (size_t i = 0; c->compression.types && i < NTAB(def); i++)
            c->compression.types[c->compression.types_len++] = gw_cfg__xstrdup(ld, def[i]);
    }
    if (c->h2.connection_window_size < c->h2.initial_window_size)
        gw_cfg__err_at(ld, root,
                       "h2.connection_window_size (%u) is smaller than "
                       "h2.initial_window_size (%u)",
                       c->h2.connection_window_size, c->h2.initial_window_size);
}

/* The document's root into ld->c: the top-level keys, then the list sections in the order
 * they depend on each other (routes name listeners and upstreams), then the cross checks. */
static void load_root(ld_t *ld)
{
    yaml_node_t *root = yaml_document_get_root_node(&ld->doc);
    if (!root || gw_cfg__is_null(root)) {
        gw_cfg__err_line(ld, 1, 1,
                         "the config is empty: 'listen', 'upstreams' and 'routes' are required");
        return;
    }
    if (!gw_cfg__expect(ld, root, YAML_MAPPING_NODE, "the config"))
        return;
    top_ld_t t = {0};
    gw_cfg__each_pair(ld, root, top_pair, &t);
    if (t.listen)
        gw_cfg__load_listen(ld, t.listen);
    else
        gw_cfg__err_at(ld, root, "missing required key 'listen'");
    if (t.upstreams)
        gw_cfg__load_upstreams(ld, t.upstreams);
    else
        gw_cfg__err_at(ld, root, "missing required key 'upstreams'");
    if (t.routes)
        gw_cfg__load_routes(ld, t.routes);
    else
        gw_cfg__err_at(ld, root, "missing required key 'routes'");
    cross_checks(ld, root, &t);
}

int gw_config_load_string(const char *name, const char *text, size_t len, gw_config_t **out,
                          gw_config_errors_t *errs)
{
    *out = NULL;
    ld_t ld = {.file = name, .errs = errs};
    int rv = parse_yaml(&ld, text, len);
    if (rv < 0)
        return rv;
    gw_config_t *c = gw_calloc(1, sizeof(*c));
    if (!c) {
        yaml_document_delete(&ld.doc);
        return GW_E_NOMEM;
    }
    ld.c = c;
    set_defaults(c);
    c->path = gw_cfg__xstrdup(&ld, name);
    c->state_dir = gw_cfg__xstrdup(&ld, "state");
    load_root(&ld);
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
        gw_cfg__err_line(&ld, 1, 1, "cannot open: %s", strerror(e));
        return e == ENOENT ? GW_E_NOENT : GW_E_IO;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        /* fopen opens a directory for reading; reading it then fails (EISDIR) */
        fclose(f);
        gw_cfg__err_line(&ld, 1, 1, "is a directory, not a config file");
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
        gw_cfg__err_line(&ld, 1, 1, "cannot read: %s", strerror(errno));
        rv = GW_E_IO;
    }
    fclose(f);
    if (rv == GW_E_LIMIT) {
        gw_cfg__err_line(&ld, 1, 1, "file is larger than 16 MiB");
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
