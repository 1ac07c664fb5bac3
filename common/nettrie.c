/* common/nettrie.c — binary prefix tries of IP networks (see nettrie.h). */
#include "common/nettrie.h"

#include <netinet/in.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"

void gw_nettrie_init(gw_nettrie_t *t)
{
    memset(t, 0, sizeof(*t));
}

void gw_nettrie_free(gw_nettrie_t *t)
{
    gw_free(t->v4.nodes);
    gw_free(t->v6.nodes);
    memset(t, 0, sizeof(*t));
}

/* Bit i (0: the most significant of a[0]) of the address a. */
static inline unsigned bit_at(const uint8_t *a, unsigned i)
{
    return (a[i >> 3] >> (7 - (i & 7))) & 1u;
}

/* Room for `more` nodes in f: 0 or GW_E_NOMEM (f unchanged). */
static int reserve(gw_nettrie_fam_t *f, size_t more)
{
    if (f->n + more <= f->cap)
        return 0;
    size_t cap = f->cap ? f->cap : 64;
    while (cap < f->n + more)
        cap *= 2;
    if (cap > UINT32_MAX)
        return GW_E_NOMEM;
    gw_nettrie_node_t *nv = gw_realloc(f->nodes, cap * sizeof(*nv));
    if (!nv)
        return GW_E_NOMEM;
    f->nodes = nv;
    f->cap = cap;
    return 0;
}

/* the first 96 bits of an IPv4-mapped IPv6 address (RFC 4291 §2.5.5.2) */
static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int gw_nettrie_add(gw_nettrie_t *t, int family, const uint8_t *addr, unsigned bits)
{
    /* RFC 4291 §2.5.5.2: a network inside ::ffff:0:0/96 is an IPv4 one, kept as such: an
     * IPv4-mapped client is looked up as IPv4 (gw_nettrie_match), and a plain IPv4 client
     * never in the IPv6 set (a deny written mapped let it through) */
    if (family == AF_INET6 && bits >= 96 && bits <= 128 && !memcmp(addr, mapped, sizeof(mapped)))
        return gw_nettrie_add(t, AF_INET, addr + 12, bits - 96);
    gw_nettrie_fam_t *f = family == AF_INET ? &t->v4 : family == AF_INET6 ? &t->v6 : NULL;
    if (!f || bits > (family == AF_INET ? 32u : 128u))
        return GW_E_INVAL;
    /* the root and one node per bit at most: reserved first, so that a failure leaves the set
     * as it was */
    if (reserve(f, (size_t)bits + 1) < 0)
        return GW_E_NOMEM;
    if (f->n == 0)
        f->nodes[f->n++] = (gw_nettrie_node_t){{0, 0}, 0};
    t->prefixes++;
    uint32_t at = 0;
    for (unsigned i = 0; i < bits; i++) {
        if (f->nodes[at].end)
            return 0; /* inside a network already there */
        unsigned b = bit_at(addr, i);
        if (!f->nodes[at].kid[b]) {
            f->nodes[f->n] = (gw_nettrie_node_t){{0, 0}, 0};
            f->nodes[at].kid[b] = (uint32_t)f->n++;
        }
        at = f->nodes[at].kid[b];
    }
    /* everything below is now covered: the walk stops here (the nodes below stay unused) */
    f->nodes[at] = (gw_nettrie_node_t){{0, 0}, 1};
    return 0;
}

static int lookup_fam(const gw_nettrie_fam_t *f, const uint8_t *addr, unsigned max)
{
    if (!f->n)
        return 0;
    uint32_t at = 0;
    for (unsigned i = 0;; i++) {
        const gw_nettrie_node_t *nd = &f->nodes[at];
        if (nd->end)
            return 1;
        if (i == max || !(at = nd->kid[bit_at(addr, i)]))
            return 0;
    }
}

#ifdef GW_TEST_API
int gw_nettrie_lookup(const gw_nettrie_t *t, int family, const uint8_t *addr)
{
    if (family == AF_INET)
        return lookup_fam(&t->v4, addr, 32);
    if (family == AF_INET6)
        return lookup_fam(&t->v6, addr, 128);
    return 0;
}
#endif

int gw_nettrie_match(const gw_nettrie_t *t, const struct sockaddr *sa)
{
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET)
        return lookup_fam(&t->v4, (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, 32);
    if (sa->sa_family != AF_INET6)
        return 0;
    const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!memcmp(a, mapped, sizeof(mapped)) && lookup_fam(&t->v4, a + 12, 32))
        return 1;
    return lookup_fam(&t->v6, a, 128);
}
