/* config/upstreams.c — the upstreams section: per upstream its servers (addresses or names,
 * weights), pool and timeout fields and active health checks. */
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"

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
