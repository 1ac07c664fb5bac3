/* config/cache.c — the `cache:` section (the shared HTTP cache, gateway/cache/) and a route's
 * `cache` (gateway/proxy/cache.c serves from the cache on the routes that set it): true, false,
 * or a map of the route's own stale windows, which turns it on. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static const field_t cache_fields[] = {
    FLD(gw_cfg_cache_t, memory, F_SIZE, 1u << 20, 1ull << 40),
    FLD(gw_cfg_cache_t, max_object, F_SIZE, 1u << 10, 1ull << 30),
    FLD(gw_cfg_cache_t, heuristic, F_BOOL, 0, 0),
    FLD(gw_cfg_cache_t, status_header, F_BOOL, 0, 0),
    FLD(gw_cfg_cache_t, max_background_revalidations, F_UINT, 1, 100000),
};

/* The longest stale window: a year, in seconds. */
#define STALE_MAX (366u * 86400u)

/* A stale window (a duration in whole seconds, 0 to a year) at v for key into *out. */
static void load_window(ld_t *ld, const char *key, yaml_node_t *v, uint32_t *out)
{
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
        return;
    const char *s = gw_cfg__scalar(v);
    uint64_t ms;
    if (gw_parse_duration(s, &ms) < 0)
        gw_cfg__err_at(ld, v, "cache '%s' must be a duration (e.g. 0, 30s, 5m, 1h), not '%s'", key,
                       s);
    else if (ms % 1000)
        gw_cfg__err_at(ld, v,
                       "cache '%s' must be whole seconds (Cache-Control counts seconds), "
                       "not '%s'",
                       key, s);
    else if (ms / 1000 > STALE_MAX)
        gw_cfg__err_at(ld, v, "cache '%s' is out of range: %s (allowed 0 to 366d)", key, s);
    else
        *out = (uint32_t)(ms / 1000);
}

typedef struct {
    gw_cfg_cache_t *c;
    yaml_node_t *max_object;
} cache_ld_t;

static int cache_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    cache_ld_t *x = obj;
    if (!strcmp(key, "stale_if_error")) {
        load_window(ld, key, v, &x->c->stale_if_error);
    } else if (!strcmp(key, "stale_while_revalidate")) {
        load_window(ld, key, v, &x->c->stale_while_revalidate);
    } else if (gw_cfg__set_field(ld, cache_fields, NTAB(cache_fields), key, v, x->c)) {
        if (!strcmp(key, "max_object"))
            x->max_object = v;
    } else {
        static const char *const more[] = {"stale_if_error", "stale_while_revalidate", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "cache", cache_fields, NTAB(cache_fields), more);
    }
    return 0;
}

void gw_cfg__load_cache(ld_t *ld, yaml_node_t *v)
{
    gw_cfg_cache_t *c = &ld->c->cache;
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "cache"))
        return;
    c->enabled = 1;
    c->at = gw_cfg__pos(ld, v);
    cache_ld_t x = {.c = c};
    gw_cfg__each_pair(ld, v, cache_pair, &x);
    if (c->max_object > c->memory)
        gw_cfg__err_at(ld, x.max_object ? x.max_object : v,
                       "cache 'max_object' (%zu bytes) must not be larger than 'memory' (%zu "
                       "bytes)",
                       c->max_object, c->memory);
}

static int route_cache_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_route_t *r = obj;
    uint32_t w = 0;
    if (!strcmp(key, "stale_if_error")) {
        load_window(ld, key, v, &w);
        r->cache_stale_if_error = w;
    } else if (!strcmp(key, "stale_while_revalidate")) {
        load_window(ld, key, v, &w);
        r->cache_stale_while_revalidate = w;
    } else {
        static const char *const keys[] = {"stale_if_error", "stale_while_revalidate", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "a route's cache", NULL, 0, keys);
    }
    return 0;
}

int gw_cfg__route_cache(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r)
{
    static const field_t f[] = {{"cache", F_BOOL, offsetof(gw_cfg_route_t, cache), 0, 0}};
    if (strcmp(key, "cache") != 0)
        return 0;
    if (v->type == YAML_MAPPING_NODE) { /* the route's own windows: caching on */
        r->cache = 1;
        gw_cfg__each_pair(ld, v, route_cache_pair, r);
    } else {
        gw_cfg__set_field(ld, f, 1, key, v, r);
    }
    return 1;
}
