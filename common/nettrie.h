/* common/nettrie.h — sets of IP networks (CIDR prefixes) with a lookup whose cost does not grow
 * with the set: one binary prefix trie per family, walked one bit of the address at a time, so
 * a lookup takes at most 32 (IPv4) or 128 (IPv6) steps whether the set holds one network or a
 * million. Built once (a configuration's access lists, at load), then only read: lookups take
 * a const trie and may run in several threads at once.
 *
 * Memory: at most one node (12 bytes) per bit of each prefix added, less where prefixes share
 * their leading bits; a prefix inside one already added costs nothing, and adding a shorter one
 * drops what it covers from the walk.
 */
#ifndef GW_COMMON_NETTRIE_H
#define GW_COMMON_NETTRIE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct {
    uint32_t kid[2]; /* the children for bit 0 and bit 1; 0: none (the root is never a child) */
    uint32_t end;    /* 1: a prefix ends here, every address below matches */
} gw_nettrie_node_t;

/* The trie of one family: nodes[0] is the root (allocated on the first add). */
typedef struct {
    gw_nettrie_node_t *nodes;
    size_t n, cap;
} gw_nettrie_fam_t;

typedef struct {
    gw_nettrie_fam_t v4, v6;
    size_t prefixes; /* networks added (for logs and tests) */
} gw_nettrie_t;

/* An empty set in caller storage; gw_nettrie_free releases what the adds allocated. */
void gw_nettrie_init(gw_nettrie_t *t);
void gw_nettrie_free(gw_nettrie_t *t);

/* Add the network addr/bits of family (AF_INET: 4 bytes of addr, bits 0..32; AF_INET6: 16
 * bytes, bits 0..128; network byte order). Bits past the prefix are ignored; a network inside
 * ::ffff:0:0/96 is added as the IPv4 network it maps, as a mapped address is matched. 0, GW_E_INVAL
 * (another family, bits out of range) or GW_E_NOMEM (the set is unchanged then). */
int gw_nettrie_add(gw_nettrie_t *t, int family, const uint8_t *addr, unsigned bits);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Whether the address addr of family (4 or 16 bytes, network byte order) is in some network of
 * t: 1 or 0 (0 for another family). */
int gw_nettrie_lookup(const gw_nettrie_t *t, int family, const uint8_t *addr);
#endif

/* The same for a socket address (AF_INET or AF_INET6; anything else is in no network). An
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291 §2.5.5.2) is in the IPv4 networks that
 * hold a.b.c.d, as well as in the IPv6 networks that hold it as written. */
int gw_nettrie_match(const gw_nettrie_t *t, const struct sockaddr *sa);

#endif
