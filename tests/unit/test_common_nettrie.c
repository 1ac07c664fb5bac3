/* Unit tests of common/nettrie: the prefix trie against a linear matcher (every prefix compared
 * in turn) on random prefixes and addresses, the IPv4-mapped rule, the edges (/0, /32, /128,
 * covered and covering prefixes) and a set of 10,000 networks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/nettrie.h"

typedef struct {
    int family;
    uint8_t addr[16];
    unsigned bits;
} net_t;

/* The reference: whether a (of family) is in n, comparing the leading bits one by one. */
static int in_net(const net_t *n, int family, const uint8_t *a)
{
    if (n->family != family)
        return 0;
    for (unsigned i = 0; i < n->bits; i++) {
        unsigned x = (a[i / 8] >> (7 - i % 8)) & 1, y = (n->addr[i / 8] >> (7 - i % 8)) & 1;
        if (x != y)
            return 0;
    }
    return 1;
}

static int linear(const net_t *v, size_t n, int family, const uint8_t *a)
{
    for (size_t i = 0; i < n; i++)
        if (in_net(&v[i], family, a))
            return 1;
    return 0;
}

/* xorshift64: the same sequence on every run, so that a failure can be replayed */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t x = rnd_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rnd_state = x;
}

static void rnd_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* An address near one of v's networks half of the time (inside it or a bit off), otherwise
 * anywhere: random addresses alone would almost never fall in a long prefix. */
static void pick_addr(const net_t *v, size_t n, int family, uint8_t *a)
{
    size_t len = family == AF_INET ? 4 : 16;
    rnd_bytes(a, len);
    if (!n || rnd() % 2)
        return;
    const net_t *b = &v[rnd() % n];
    if (b->family != family)
        return;
    uint8_t tail[16];
    memcpy(tail, a, len);
    memcpy(a, b->addr, len);
    for (unsigned i = b->bits; i < len * 8; i++) { /* the host part random */
        uint8_t m = (uint8_t)(0x80 >> (i % 8));
        a[i / 8] = (uint8_t)((a[i / 8] & ~m) | (tail[i / 8] & m));
    }
    if (b->bits && rnd() % 3 == 0) { /* one bit of the prefix flipped: just outside */
        unsigned i = (unsigned)(rnd() % b->bits);
        a[i / 8] ^= (uint8_t)(0x80 >> (i % 8));
    }
}

/* n random networks of both families, prefix lengths spread over the whole range (short ones
 * rarer: they would cover everything). */
static void rnd_nets(net_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i].family = rnd() % 2 ? AF_INET : AF_INET6;
        unsigned max = v[i].family == AF_INET ? 32 : 128;
        unsigned min = v[i].family == AF_INET ? 8 : 16;
        v[i].bits = min + (unsigned)(rnd() % (max - min + 1));
        memset(v[i].addr, 0, sizeof(v[i].addr));
        rnd_bytes(v[i].addr, v[i].family == AF_INET ? 4 : 16);
    }
}

static void check_against_linear(size_t nnets, size_t nprobe)
{
    net_t *v = calloc(nnets ? nnets : 1, sizeof(*v));
    assert_non_null(v);
    rnd_nets(v, nnets);
    gw_nettrie_t t;
    gw_nettrie_init(&t);
    for (size_t i = 0; i < nnets; i++)
        assert_int_equal(gw_nettrie_add(&t, v[i].family, v[i].addr, v[i].bits), 0);
    assert_int_equal(t.prefixes, nnets);
    size_t hits = 0;
    for (size_t k = 0; k < nprobe; k++) {
        int family = rnd() % 2 ? AF_INET : AF_INET6;
        uint8_t a[16] = {0};
        pick_addr(v, nnets, family, a);
        int want = linear(v, nnets, family, a);
        int got = gw_nettrie_lookup(&t, family, a);
        if (got != want) {
            char s[64];
            inet_ntop(family, a, s, sizeof(s));
            fail_msg("%s: trie %d, linear %d (%zu networks)", s, got, want, nnets);
        }
        hits += (size_t)want;
    }
    /* the probes hit and missed both, or the comparison proved little */
    if (nnets >= 10) {
        assert_true(hits > nprobe / 10);
        assert_true(hits < nprobe);
    }
    gw_nettrie_free(&t);
    free(v);
}

static void trie_agrees_with_linear_small_sets(void **state)
{
    (void)state;
    for (size_t n = 0; n < 40; n++)
        check_against_linear(n, 400);
}

static void trie_agrees_with_linear_10000_networks(void **state)
{
    (void)state;
    check_against_linear(10000, 5000);
}

static void add_v(gw_nettrie_t *t, const char *s, unsigned bits)
{
    uint8_t a[16];
    int family = strchr(s, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, s, a), 1);
    assert_int_equal(gw_nettrie_add(t, family, a, bits), 0);
}

static int has(const gw_nettrie_t *t, const char *s)
{
    uint8_t a[16];
    int family = strchr(s, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, s, a), 1);
    return gw_nettrie_lookup(t, family, a);
}

static int has_sa(const gw_nettrie_t *t, const char *s)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(s, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, s, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, s, &s4->sin_addr), 1);
    }
    return gw_nettrie_match(t, (struct sockaddr *)&ss);
}

static void edges(void **state)
{
    (void)state;
    gw_nettrie_t t;
    gw_nettrie_init(&t);
    assert_false(has(&t, "10.0.0.1"));
    assert_false(has(&t, "::1"));
    add_v(&t, "10.1.2.3", 32);
    assert_true(has(&t, "10.1.2.3"));
    assert_false(has(&t, "10.1.2.2"));
    add_v(&t, "10.1.0.0", 16); /* covers the /32 */
    assert_true(has(&t, "10.1.200.7"));
    assert_true(has(&t, "10.1.2.3"));
    add_v(&t, "10.1.7.0", 24); /* inside the /16: changes nothing */
    assert_true(has(&t, "10.1.8.1"));
    assert_false(has(&t, "10.2.0.0"));
    add_v(&t, "2001:db8::", 32);
    add_v(&t, "::1", 128);
    assert_true(has(&t, "2001:db8:ffff::5"));
    assert_false(has(&t, "2001:db9::"));
    assert_true(has(&t, "::1"));
    assert_false(has(&t, "::2"));
    assert_false(has(&t, "::"));
    /* the families are apart: 10.1.x.x is not ::a01:x */
    assert_false(has(&t, "::a01:203"));
    /* an IPv4-mapped client is in the IPv4 networks; a plain IPv4 never in IPv6 ones */
    assert_true(has_sa(&t, "::ffff:10.1.2.3"));
    assert_false(has_sa(&t, "::ffff:10.2.2.3"));
    assert_true(has_sa(&t, "10.1.99.1"));
    assert_true(has_sa(&t, "::1"));
    assert_false(has_sa(&t, "0.0.0.1"));
    assert_int_equal(gw_nettrie_add(&t, AF_INET, (const uint8_t *)"\0\0\0\0", 33), GW_E_INVAL);
    assert_int_equal(gw_nettrie_add(&t, AF_UNIX, (const uint8_t *)"\0\0\0\0", 1), GW_E_INVAL);
    gw_nettrie_free(&t);

    /* /0 holds every address of its family, and only of its family */
    gw_nettrie_init(&t);
    add_v(&t, "0.0.0.0", 0);
    assert_true(has(&t, "255.255.255.255"));
    assert_true(has_sa(&t, "::ffff:1.2.3.4"));
    assert_false(has_sa(&t, "2001:db8::1"));
    add_v(&t, "::", 0);
    assert_true(has_sa(&t, "2001:db8::1"));
    gw_nettrie_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edges),
        cmocka_unit_test(trie_agrees_with_linear_small_sets),
        cmocka_unit_test(trie_agrees_with_linear_10000_networks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
