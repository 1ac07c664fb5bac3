/* config/acl.c — a route's access list: `allow` and `deny`, lists of networks (ADDRESS or
 * ADDRESS/BITS, IPv4 and IPv6) built into prefix tries (common/nettrie.h) at load, so that a
 * request's check costs at most 32 or 128 steps however long the lists are. Each entry is
 * checked on its own node: not an address, a prefix length out of range, bits set past the
 * prefix length (`10.0.0.1/8`: refused, since it reads like a host and means a network). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"

int gw_cfg_acl_allows(const gw_cfg_acl_t *a, const struct sockaddr *sa)
{
    if (!a)
        return 1;
    /* deny wins: an address in both lists is refused */
    if (sa && gw_nettrie_match(&a->deny, sa))
        return 0;
    if (a->has_allow)
        return sa && gw_nettrie_match(&a->allow, sa);
    return 1;
}

/* One entry s of key at node at into t; an error is reported at the node. */
static void load_entry(ld_t *ld, yaml_node_t *at, const char *key, const char *s, gw_nettrie_t *t)
{
    char a[64];
    const char *slash = strchr(s, '/');
    size_t al = slash ? (size_t)(slash - s) : strlen(s);
    uint8_t addr[16] = {0};
    int family = 0;
    if (al && al < sizeof(a)) {
        memcpy(a, s, al);
        a[al] = 0;
        family = inet_pton(AF_INET, a, addr) == 1    ? AF_INET
                 : inet_pton(AF_INET6, a, addr) == 1 ? AF_INET6
                                                     : 0;
    }
    if (!family) {
        gw_cfg__err_at(ld, at,
                       "'%s' entry '%s' is not an IP address or network (192.0.2.7, "
                       "10.0.0.0/8, 2001:db8::/32)",
                       key, s);
        return;
    }
    unsigned max = family == AF_INET ? 32 : 128, bits = max;
    if (slash) {
        const char *d = slash + 1;
        unsigned long b = 0;
        size_t nd = strspn(d, "0123456789");
        if (nd && nd <= 3 && !d[nd])
            b = strtoul(d, NULL, 10);
        if (!nd || nd > 3 || d[nd] || b > max) {
            gw_cfg__err_at(ld, at, "'%s' entry '%s': the prefix length must be 0..%u for %s", key,
                           s, max, family == AF_INET ? "IPv4" : "IPv6");
            return;
        }
        bits = (unsigned)b;
    }
    /* the bits past the prefix must be zero: `10.0.0.1/8` is refused rather than read as
     * 10.0.0.0/8, since whoever wrote it may have meant the host alone */
    for (unsigned i = bits; i < max; i++) {
        if (addr[i / 8] & (0x80u >> (i % 8))) {
            uint8_t net[16];
            memcpy(net, addr, sizeof(net));
            for (unsigned j = bits; j < max; j++)
                net[j / 8] &= (uint8_t) ~(0x80u >> (j % 8));
            char ns[INET6_ADDRSTRLEN];
            inet_ntop(family, net, ns, sizeof(ns));
            gw_cfg__err_at(ld, at,
                           "'%s' entry '%s' has bits set past its prefix length: write %s/%u "
                           "for the network, or the address alone for one host",
                           key, s, ns, bits);
            return;
        }
    }
    if (gw_nettrie_add(t, family, addr, bits) == GW_E_NOMEM)
        ld->nomem = 1;
}

int gw_cfg__load_acl(ld_t *ld, const char *key, yaml_node_t *v, gw_cfg_route_t *r)
{
    int allow = !strcmp(key, "allow");
    if (!allow && strcmp(key, "deny"))
        return 0;
    if (!r->acl) {
        if (!(r->acl = gw_calloc(1, sizeof(*r->acl)))) {
            ld->nomem = 1;
            return 1;
        }
        gw_nettrie_init(&r->acl->allow);
        gw_nettrie_init(&r->acl->deny);
    }
    gw_nettrie_t *t = allow ? &r->acl->allow : &r->acl->deny;
    if (v->type == YAML_SCALAR_NODE && !gw_cfg__is_null(v)) {
        load_entry(ld, v, key, gw_cfg__scalar(v), t);
    } else if (v->type == YAML_SEQUENCE_NODE &&
               v->data.sequence.items.top > v->data.sequence.items.start) {
        for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
             i++) {
            yaml_node_t *it = gw_cfg__node(ld, *i);
            if (gw_cfg__expect(ld, it, YAML_SCALAR_NODE, key))
                load_entry(ld, it, key, gw_cfg__scalar(it), t);
        }
    } else {
        /* an empty allow would refuse everyone and an empty deny nobody: more likely a
         * mistake than meant, so both are refused */
        gw_cfg__err_at(ld, v,
                       "'%s' must be a network or a list of networks (10.0.0.0/8, ::1, "
                       "2001:db8::/32), not %s",
                       key, v->type == YAML_SEQUENCE_NODE ? "an empty list" : gw_cfg__kind_str(v));
    }
    if (allow)
        r->acl->has_allow = 1;
    return 1;
}
