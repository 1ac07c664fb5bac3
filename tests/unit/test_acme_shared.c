/* Unit tests of acme/shared.c without Redis: the sealed certificate value (AES-256-GCM) opens
 * with the key and name set it was sealed for and with nothing else; every changed byte, a
 * cut value, another key or another name set is refused; lengths are bounded both ways; the
 * challenge records round-trip and malformed ones are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "acme/acme_internal.h"
#include "common/alloc.h"
#include "common/err.h"

static const char CHAIN[] = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
static const char KEY[] = "-----BEGIN PRIVATE KEY-----\nMIGHsecret\n-----END PRIVATE KEY-----\n";
static const char ID[] = "a.test-0123456789ab";

static void key_of(uint8_t k[GW_ACME_SHARED_KEY_LEN], uint8_t seed)
{
    for (size_t i = 0; i < GW_ACME_SHARED_KEY_LEN; i++)
        k[i] = (uint8_t)(seed + i * 7);
}

static void seal(const uint8_t *k, uint8_t **v, size_t *vl)
{
    assert_int_equal(gw_acme__seal(k, ID, CHAIN, strlen(CHAIN), KEY, strlen(KEY), v, vl), 0);
}

static int opens(const uint8_t *k, const char *id, const uint8_t *v, size_t vl)
{
    char *c = NULL, *p = NULL;
    size_t cl = 0, pl = 0;
    int rv = gw_acme__open(k, id, v, vl, &c, &cl, &p, &pl);
    if (rv == 0) {
        assert_int_equal(cl, strlen(CHAIN));
        assert_string_equal(c, CHAIN);
        assert_int_equal(pl, strlen(KEY));
        assert_string_equal(p, KEY);
    } else {
        assert_null(c);
        assert_null(p);
    }
    gw_free(c);
    gw_free(p);
    return rv;
}

static void test_seal_round_trip_and_key_not_in_clear(void **state)
{
    (void)state;
    uint8_t k[GW_ACME_SHARED_KEY_LEN];
    key_of(k, 1);
    uint8_t *v, *w;
    size_t vl, wl;
    seal(k, &v, &vl);
    assert_int_equal(opens(k, ID, v, vl), 0);
    /* the chain is there in clear (it is public), the key is not */
    assert_non_null(memmem(v, vl, CHAIN, strlen(CHAIN)));
    assert_null(memmem(v, vl, "secret", 6));
    assert_null(memmem(v, vl, "PRIVATE KEY", 11));
    /* a fresh nonce each time: two seals of the same differ */
    seal(k, &w, &wl);
    assert_int_equal(vl, wl);
    assert_memory_not_equal(v, w, vl);
    assert_int_equal(opens(k, ID, w, wl), 0);
    gw_free(v);
    gw_free(w);
}

static void test_every_changed_byte_is_refused(void **state)
{
    (void)state;
    uint8_t k[GW_ACME_SHARED_KEY_LEN];
    key_of(k, 2);
    uint8_t *v;
    size_t vl;
    seal(k, &v, &vl);
    for (size_t i = 0; i < vl; i++) {
        for (unsigned bit = 0; bit < 8; bit += 7) {
            v[i] ^= (uint8_t)(1u << bit);
            int rv = opens(k, ID, v, vl);
            /* the head's magic, version and lengths fail the layout, the rest the tag */
            if (rv != GW_E_PARSE)
                assert_int_equal(rv, GW_E_INVAL);
            v[i] ^= (uint8_t)(1u << bit);
        }
    }
    assert_int_equal(opens(k, ID, v, vl), 0);
    gw_free(v);
}

static void test_another_key_or_name_set_or_a_cut_value_is_refused(void **state)
{
    (void)state;
    uint8_t k[GW_ACME_SHARED_KEY_LEN], other[GW_ACME_SHARED_KEY_LEN];
    key_of(k, 3);
    key_of(other, 4);
    uint8_t *v;
    size_t vl;
    seal(k, &v, &vl);
    assert_int_equal(opens(other, ID, v, vl), GW_E_INVAL);
    assert_int_equal(opens(k, "b.test-0123456789ab", v, vl), GW_E_INVAL);
    assert_int_equal(opens(k, "a.test-0123456789a", v, vl), GW_E_INVAL);
    for (size_t n = 0; n < vl; n++)
        assert_int_equal(opens(k, ID, v, n), GW_E_PARSE);
    uint8_t *longer = gw_malloc(vl + 1);
    memcpy(longer, v, vl);
    longer[vl] = 0;
    assert_int_equal(opens(k, ID, longer, vl + 1), GW_E_PARSE);
    gw_free(longer);
    gw_free(v);
}

static void test_lengths_are_bounded(void **state)
{
    (void)state;
    uint8_t k[GW_ACME_SHARED_KEY_LEN];
    key_of(k, 5);
    size_t big = GW_ACME_SHARED_MAX + 1;
    char *b = gw_malloc(big);
    memset(b, 'A', big);
    uint8_t *v = NULL;
    size_t vl = 0;
    assert_int_equal(gw_acme__seal(k, ID, b, big, KEY, strlen(KEY), &v, &vl), GW_E_RANGE);
    assert_null(v);
    assert_int_equal(gw_acme__seal(k, ID, CHAIN, strlen(CHAIN), b, big, &v, &vl), GW_E_RANGE);
    /* at the bound: sealed and opened */
    assert_int_equal(gw_acme__seal(k, ID, b, big - 1, KEY, strlen(KEY), &v, &vl), 0);
    char *c, *p;
    size_t cl, pl;
    assert_int_equal(gw_acme__open(k, ID, v, vl, &c, &cl, &p, &pl), 0);
    assert_int_equal(cl, big - 1);
    gw_free(c);
    gw_free(p);
    /* a head announcing a chain past the bound is refused before anything is read */
    v[5] = 0x7f;
    assert_int_equal(opens(k, ID, v, vl), GW_E_PARSE);
    gw_free(v);
    gw_free(b);
}

static void test_failing_allocations_never_crash_or_leak(void **state)
{
    (void)state;
    uint8_t k[GW_ACME_SHARED_KEY_LEN];
    key_of(k, 6);
    for (unsigned long n = 1;; n++) {
        uint8_t *v = NULL;
        size_t vl = 0;
        gw_alloc_fail_after(n);
        int rv = gw_acme__seal(k, ID, CHAIN, strlen(CHAIN), KEY, strlen(KEY), &v, &vl);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rv, 0);
            for (unsigned long m = 1;; m++) {
                char *c = NULL, *p = NULL;
                size_t cl, pl;
                gw_alloc_fail_after(m);
                int r2 = gw_acme__open(k, ID, v, vl, &c, &cl, &p, &pl);
                int hit2 = gw_alloc_fail_hit();
                gw_alloc_fail_after(0);
                gw_free(c);
                gw_free(p);
                if (!hit2) {
                    assert_int_equal(r2, 0);
                    break;
                }
                assert_int_equal(r2, GW_E_NOMEM);
            }
            gw_free(v);
            break;
        }
        assert_int_equal(rv, GW_E_NOMEM);
        assert_null(v);
    }
}

static void test_challenge_records_round_trip_and_bounds(void **state)
{
    (void)state;
    char rec[1024], type[16], name[254], ka[513];
    int n = gw_acme__challenge_record("tls-alpn-01", "a.test", "tok_1", "tok_1.thumb", rec,
                                      sizeof(rec));
    assert_int_equal(n, (int)strlen("tls-alpn-01\na.test\ntok_1\ntok_1.thumb"));
    assert_int_equal(gw_acme__challenge_parse((uint8_t *)rec, (size_t)n, type, name, ka), 0);
    assert_string_equal(type, "tls-alpn-01");
    assert_string_equal(name, "a.test");
    assert_string_equal(ka, "tok_1.thumb");
    assert_int_equal(gw_acme__challenge_record("t", "n", "x", "y", rec, 7), GW_E_RANGE);
    static const char *const bad[] = {
        "tls-alpn-01\na.test\ntok",             /* three fields */
        "tls-alpn-01\na.test\ntok\nka\nmore",   /* five */
        "\na.test\ntok\nka",                    /* empty type */
        "tls-alpn-01\n\ntok\nka",               /* empty name */
        "tls-alpn-01\na.test\ntok\n",           /* empty key authorization */
        "tls-alpn-01\na test\ntok\nka",         /* a space */
        "tls-alpn-01\na.test\ntok\nk\"a",       /* fine: printable */
        "a-type-far-too-long\na.test\ntok\nka", /* type of 16 or more */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rv = gw_acme__challenge_parse((const uint8_t *)bad[i], strlen(bad[i]), type, name, ka);
        assert_int_equal(rv, i == 6 ? 0 : GW_E_PARSE);
    }
    char longka[600];
    memset(longka, 'k', sizeof(longka));
    n = snprintf(rec, sizeof(rec), "tls-alpn-01\na.test\ntok\n%.*s", 513, longka);
    assert_int_equal(gw_acme__challenge_parse((uint8_t *)rec, (size_t)n, type, name, ka),
                     GW_E_PARSE);
    n = snprintf(rec, sizeof(rec), "tls-alpn-01\na.test\ntok\n%.*s", 512, longka);
    assert_int_equal(gw_acme__challenge_parse((uint8_t *)rec, (size_t)n, type, name, ka), 0);
    assert_int_equal(strlen(ka), 512);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_round_trip_and_key_not_in_clear),
        cmocka_unit_test(test_every_changed_byte_is_refused),
        cmocka_unit_test(test_another_key_or_name_set_or_a_cut_value_is_refused),
        cmocka_unit_test(test_lengths_are_bounded),
        cmocka_unit_test(test_failing_allocations_never_crash_or_leak),
        cmocka_unit_test(test_challenge_records_round_trip_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
