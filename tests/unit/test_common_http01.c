/* Unit tests of common/http01: the process's table of http-01 answers (publish, find,
 * replace, withdraw by owner, its bounds) and readers on other threads while it changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "common/http01.h"

static const int A = 1, B = 2; /* two owners: their addresses */

static ssize_t find_str(const char *token, char *out, size_t cap)
{
    return gw_http01_find((const uint8_t *)token, strlen(token), out, cap);
}

static int teardown(void **state)
{
    (void)state;
    gw_http01_withdraw(&A);
    gw_http01_withdraw(&B);
    return 0;
}

static void publish_find_withdraw(void **state)
{
    (void)state;
    char out[GW_HTTP01_AUTHZ_MAX];
    assert_int_equal(find_str("tok1", out, sizeof(out)), GW_E_NOENT);
    assert_int_equal(gw_http01_publish(&A, "tok1", "tok1.thumb"), 0);
    assert_int_equal(gw_http01_publish(&A, "tok2", "tok2.thumb"), 0);
    assert_int_equal(gw_http01_publish(&B, "tok3", "tok3.thumb"), 0);
    assert_int_equal(gw_http01_count(), 3);
    ssize_t n = find_str("tok2", out, sizeof(out));
    assert_int_equal(n, 10);
    assert_memory_equal(out, "tok2.thumb", 10);
    /* exact match only: a prefix, a longer token, another case are other tokens */
    assert_int_equal(find_str("tok", out, sizeof(out)), GW_E_NOENT);
    assert_int_equal(find_str("tok10", out, sizeof(out)), GW_E_NOENT);
    assert_int_equal(find_str("TOK1", out, sizeof(out)), GW_E_NOENT);
    assert_int_equal(gw_http01_find((const uint8_t *)"tok1", 0, out, sizeof(out)), GW_E_NOENT);
    /* too small a buffer: said, nothing half-copied counts */
    assert_int_equal(find_str("tok1", out, 9), GW_E_BUFS);
    /* the owner's tokens go together; the other owner's stay */
    assert_int_equal(gw_http01_withdraw(&A), 2);
    assert_int_equal(gw_http01_withdraw(&A), 0);
    assert_int_equal(find_str("tok1", out, sizeof(out)), GW_E_NOENT);
    assert_int_equal(find_str("tok3", out, sizeof(out)), 10);
    assert_int_equal(gw_http01_count(), 1);
}

static void republish_replaces(void **state)
{
    (void)state;
    char out[GW_HTTP01_AUTHZ_MAX];
    assert_int_equal(gw_http01_publish(&A, "t", "t.one"), 0);
    assert_int_equal(gw_http01_publish(&B, "t", "t.second"), 0);
    assert_int_equal(gw_http01_count(), 1);
    assert_int_equal(find_str("t", out, sizeof(out)), 8);
    assert_memory_equal(out, "t.second", 8);
    /* it is B's now */
    assert_int_equal(gw_http01_withdraw(&A), 0);
    assert_int_equal(gw_http01_withdraw(&B), 1);
}

static void bounds(void **state)
{
    (void)state;
    char tok[GW_HTTP01_TOKEN_MAX + 2], authz[GW_HTTP01_AUTHZ_MAX + 2];
    memset(tok, 'a', sizeof(tok));
    memset(authz, 'b', sizeof(authz));
    tok[GW_HTTP01_TOKEN_MAX + 1] = 0;
    authz[GW_HTTP01_AUTHZ_MAX + 1] = 0;
    assert_int_equal(gw_http01_publish(NULL, "t", "t.x"), GW_E_INVAL);
    assert_int_equal(gw_http01_publish(&A, "", "t.x"), GW_E_INVAL);
    assert_int_equal(gw_http01_publish(&A, "t", ""), GW_E_INVAL);
    assert_int_equal(gw_http01_publish(&A, tok, "t.x"), GW_E_INVAL); /* one too long */
    assert_int_equal(gw_http01_publish(&A, "t", authz), GW_E_INVAL);
    tok[GW_HTTP01_TOKEN_MAX] = 0;
    authz[GW_HTTP01_AUTHZ_MAX] = 0;
    assert_int_equal(gw_http01_publish(&A, tok, authz), 0); /* the longest of each */
    char out[GW_HTTP01_AUTHZ_MAX];
    assert_int_equal(gw_http01_find((const uint8_t *)tok, GW_HTTP01_TOKEN_MAX, out, sizeof(out)),
                     GW_HTTP01_AUTHZ_MAX);
    assert_int_equal(gw_http01_withdraw(&A), 1);
}

static void full_table_refuses(void **state)
{
    (void)state;
    char tok[16], authz[32], out[GW_HTTP01_AUTHZ_MAX];
    for (int i = 0; i < GW_HTTP01_MAX; i++) {
        snprintf(tok, sizeof(tok), "t%d", i);
        snprintf(authz, sizeof(authz), "t%d.x", i);
        assert_int_equal(gw_http01_publish(i % 2 ? &A : &B, tok, authz), 0);
    }
    assert_int_equal(gw_http01_count(), GW_HTTP01_MAX);
    assert_int_equal(gw_http01_publish(&A, "one-more", "one-more.x"), GW_E_LIMIT);
    /* a token already there is replaced even when full */
    assert_int_equal(gw_http01_publish(&A, "t0", "t0.y"), 0);
    assert_int_equal(find_str("t0", out, sizeof(out)), 4);
    assert_memory_equal(out, "t0.y", 4);
    assert_int_equal(find_str("one-more", out, sizeof(out)), GW_E_NOENT);
    /* withdrawn entries are free again */
    assert_int_equal(gw_http01_withdraw(&B), GW_HTTP01_MAX / 2 - 1);
    assert_int_equal(gw_http01_publish(&A, "one-more", "one-more.x"), 0);
    assert_int_equal(find_str("one-more", out, sizeof(out)), 10);
    assert_int_equal(find_str("t255", out, sizeof(out)), 6);
}

/* Readers on other threads while the main one publishes and withdraws: each answer found is
 * whole (the key authorization of that very token), never another's or a torn copy. */
static atomic_int stop; /* atomic: the readers poll it (a volatile int is a race) */

static void *reader(void *arg)
{
    (void)arg;
    unsigned long found = 0;
    char out[GW_HTTP01_AUTHZ_MAX], tok[16];
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        snprintf(tok, sizeof(tok), "r%u", i % 8);
        ssize_t n = find_str(tok, out, sizeof(out));
        if (n == GW_E_NOENT)
            continue;
        size_t tl = strlen(tok);
        if (n != (ssize_t)(tl + 7) || memcmp(out, tok, tl) != 0 ||
            memcmp(out + tl, ".thumb!", 7) != 0)
            return NULL;
        found++;
    }
    return (void *)(found ? found : 1);
}

static void threads_read_while_it_changes(void **state)
{
    (void)state;
    pthread_t th[2];
    atomic_store(&stop, 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, NULL), 0);
    char tok[16], authz[32];
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < 8; i++) {
            snprintf(tok, sizeof(tok), "r%d", i);
            snprintf(authz, sizeof(authz), "r%d.thumb!", i);
            assert_int_equal(gw_http01_publish(&A, tok, authz), 0);
        }
        assert_int_equal(gw_http01_withdraw(&A), 8);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        assert_non_null(r); /* NULL: a reader saw a wrong answer */
    }
    assert_int_equal(gw_http01_count(), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(publish_find_withdraw, teardown),
    cmocka_unit_test_teardown(republish_replaces, teardown),
    cmocka_unit_test_teardown(bounds, teardown),
    cmocka_unit_test_teardown(full_table_refuses, teardown),
    cmocka_unit_test_teardown(threads_read_while_it_changes, teardown),
};

GW_TEST_MAIN(tests)
