/* Unit tests of common/buf: slices, refcounted buffers, byte buffers and the iovec queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"

static void slices_compare(void **state)
{
    (void)state;
    assert_true(gw_slice_eq(GW_SLICE_LIT("abc"), gw_slice_str("abc")));
    assert_false(gw_slice_eq(GW_SLICE_LIT("abc"), GW_SLICE_LIT("abd")));
    assert_false(gw_slice_eq(GW_SLICE_LIT("abc"), GW_SLICE_LIT("ab")));
    assert_true(gw_slice_eq_nocase(GW_SLICE_LIT("Content-Length"), GW_SLICE_LIT("content-length")));
    assert_false(gw_slice_eq_nocase(GW_SLICE_LIT("a["), GW_SLICE_LIT("a{")));
}

static void rbuf_refcount(void **state)
{
    (void)state;
    gw_rbuf_t *b = gw_rbuf_new(100);
    assert_non_null(b);
    assert_int_equal(b->refs, 1);
    gw_rbuf_ref(b);
    assert_int_equal(b->refs, 2);
    gw_rbuf_unref(b);
    assert_int_equal(b->refs, 1);
    gw_rbuf_unref(b); /* freed: ASan would report a leak otherwise */
    gw_rbuf_unref(NULL);
}

static void bytes_grow_and_limit(void **state)
{
    (void)state;
    gw_bytes_t b;
    gw_bytes_init(&b, 100);
    for (int i = 0; i < 10; i++)
        assert_int_equal(gw_bytes_append(&b, "0123456789", 10), 0);
    assert_int_equal(b.len, 100);
    assert_int_equal(gw_bytes_append(&b, "x", 1), GW_E_LIMIT);
    gw_bytes_consume(&b, 95);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.base, "56789", 5);
    gw_bytes_free(&b);
}

/* A fresh buffer (one reference) holding len bytes: a copy of src, or the byte fill when src is
 * NULL. */
static gw_rbuf_t *rbuf_with(const void *src, int fill, size_t len)
{
    gw_rbuf_t *b = gw_rbuf_new(len);
    assert_non_null(b);
    if (src)
        memcpy(b->data, src, len);
    else
        memset(b->data, fill, len);
    return b;
}

static void iovq_copy_merges_and_ref_pins(void **state)
{
    (void)state;
    gw_iovq_t q;
    gw_iovq_init(&q);
    assert_int_equal(gw_iovq_copy(&q, "hello ", 6), 0);
    assert_int_equal(gw_iovq_copy(&q, "world", 5), 0);
    struct iovec v[8];
    assert_int_equal(gw_iovq_peek(&q, v, 8), 1); /* adjacent copies merged */
    gw_rbuf_t *payload = rbuf_with("DATA", 0, 4);
    assert_int_equal(gw_iovq_ref(&q, payload, 1, 3), 0);
    assert_int_equal(payload->refs, 2);
    assert_int_equal(gw_iovq_copy(&q, "!", 1), 0);
    assert_int_equal(q.bytes, 15);
    assert_int_equal(gw_iovq_peek(&q, v, 8), 3);
    assert_ptr_equal(v[1].iov_base, payload->data + 1); /* by reference, not copied */
    uint8_t flat[32];
    assert_int_equal(gw_iovq_flatten(&q, flat, sizeof(flat)), 15);
    assert_memory_equal(flat, "hello worldATA!", 15);

    gw_iovq_consume(&q, 12); /* into the payload entry */
    assert_int_equal(payload->refs, 2);
    gw_iovq_consume(&q, 2); /* payload entry done: pin released */
    assert_int_equal(payload->refs, 1);
    assert_int_equal(q.bytes, 1);
    gw_iovq_free(&q);
    gw_rbuf_unref(payload);
}

static void iovq_many_entries_wrap(void **state)
{
    (void)state;
    gw_iovq_t q;
    gw_iovq_init(&q);
    gw_rbuf_t *p = rbuf_with(NULL, 'z', 1000);
    size_t total = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 7; i++) {
            assert_int_equal(gw_iovq_ref(&q, p, (size_t)i, 10), 0);
            assert_int_equal(gw_iovq_copy(&q, "hdr", 3), 0);
            total += 13;
        }
        gw_iovq_consume(&q, 50);
        total -= 50;
        assert_int_equal(q.bytes, total);
    }
    gw_iovq_free(&q);
    assert_int_equal(p->refs, 1);
    gw_rbuf_unref(p);
}

static void iovq_alloc_failure_is_reported(void **state)
{
    (void)state;
    static uint8_t src[5000];
    memset(src, 'q', sizeof(src));
    for (unsigned long n = 1; n < 10; n++) {
        gw_iovq_t q;
        gw_iovq_init(&q);
        gw_alloc_fail_after(n);
        int rv = 0;
        for (int i = 0; i < 40 && rv == 0; i++)
            rv = gw_iovq_copy(&q, src, 40 + (size_t)i * 100);
        gw_alloc_fail_after(0);
        assert_true(rv == 0 || rv == GW_E_NOMEM);
        gw_iovq_free(&q); /* no leak whatever failed */
    }
}

static void iovq_take_moves_pins(void **state)
{
    (void)state;
    gw_iovq_t q;
    gw_iovq_init(&q);
    gw_rbuf_t *p = rbuf_with("payload-payload!", 0, 16);
    assert_int_equal(gw_iovq_copy(&q, "HDR1", 4), 0);
    assert_int_equal(gw_iovq_ref(&q, p, 0, 16), 0);
    assert_int_equal(gw_iovq_copy(&q, "HDR2", 4), 0);
    assert_int_equal(p->refs, 2);
    gw_iovq_ent_t e[8];
    size_t n = gw_iovq_take(&q, e, 8);
    assert_int_equal(n, 3);
    assert_int_equal(q.bytes, 0);
    assert_ptr_equal(e[1].iov.iov_base, p->data); /* by reference */
    assert_ptr_equal(e[1].pin, p);
    /* new copies after a take must not overwrite the bytes we still hold */
    assert_int_equal(gw_iovq_copy(&q, "XXXX", 4), 0);
    assert_memory_equal(e[0].iov.iov_base, "HDR1", 4);
    assert_memory_equal(e[2].iov.iov_base, "HDR2", 4);
    for (size_t i = 0; i < n; i++)
        gw_rbuf_unref(e[i].pin);
    assert_int_equal(p->refs, 1);
    gw_iovq_free(&q);
    gw_rbuf_unref(p);
}

/* A write round's entry array: a queue without one uses the lent array and gives it back when
 * the round left nothing queued; bytes still queued keep it (the queue's own from then on, freed
 * with it), as does a queue that grew past it; a queue with an array keeps its own. */
static void iovq_lent_entries_go_back_when_empty(void **state)
{
    (void)state;
    gw_iovq_t q;
    gw_iovq_init(&q);
    gw_iovq_ent_t *lent = gw_malloc(4 * sizeof(*lent));
    assert_int_equal(gw_iovq_lend(&q, lent, 4), 1);
    assert_int_equal(gw_iovq_copy(&q, "HDR", 3), 0);
    assert_ptr_equal(q.ents, lent);
    gw_iovq_consume(&q, 3);
    assert_ptr_equal(gw_iovq_unlend(&q), lent); /* written whole: back to the lender */
    assert_null(q.ents);
    assert_null(gw_iovq_unlend(&q)); /* nothing lent any more */

    /* a partial write: the bytes left are still in the array, the queue keeps it */
    assert_int_equal(gw_iovq_lend(&q, lent, 4), 1);
    assert_int_equal(gw_iovq_copy(&q, "HDR", 3), 0);
    gw_iovq_consume(&q, 1);
    assert_null(gw_iovq_unlend(&q));
    assert_ptr_equal(q.ents, lent);
    gw_iovq_ent_t *other = gw_malloc(4 * sizeof(*other));
    assert_int_equal(gw_iovq_lend(&q, other, 4), 0); /* it has its own: the lender keeps it */
    uint8_t flat[8];
    assert_int_equal(gw_iovq_flatten(&q, flat, sizeof(flat)), 2);
    assert_memory_equal(flat, "DR", 2);
    gw_iovq_free(&q); /* frees the array it kept */

    /* more entries than lent: the queue grows into an array of its own and keeps that */
    gw_iovq_init(&q);
    assert_int_equal(gw_iovq_lend(&q, other, 4), 1);
    gw_rbuf_t *p = rbuf_with("0123456789", 0, 10);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(gw_iovq_ref(&q, p, i, 1), 0);
    assert_true(q.cap > 4);
    assert_int_equal(gw_iovq_flatten(&q, flat, sizeof(flat)), 6);
    assert_memory_equal(flat, "012345", 6);
    gw_iovq_consume(&q, 6);
    assert_null(gw_iovq_unlend(&q)); /* the lent array was freed when it grew */
    assert_int_equal(p->refs, 1);
    gw_iovq_free(&q);
    gw_rbuf_unref(p);
}

/* gw_ascii_lower against its byte-by-byte definition: every byte value at every position of
 * every length up to 24 (both the word loop and the tail). */
static void ascii_lower_matches_bytewise(void **state)
{
    (void)state;
    uint8_t s[24];
    char d[24];
    for (size_t n = 0; n <= sizeof(s); n++) {
        for (size_t pos = 0; pos < (n ? n : 1); pos++) {
            for (int c = 0; c < 256; c++) {
                for (size_t i = 0; i < n; i++)
                    s[i] = (uint8_t)(0x41 + (i * 7 + n) % 60);
                if (n)
                    s[pos] = (uint8_t)c;
                gw_ascii_lower(d, s, n);
                for (size_t i = 0; i < n; i++)
                    assert_int_equal((uint8_t)d[i], s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
            }
        }
    }
    /* in place */
    char t[] = "Content-Type: X-UPPER-lower";
    gw_ascii_lower(t, (const uint8_t *)t, strlen(t));
    assert_string_equal(t, "content-type: x-upper-lower");
}

static int lc(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* gw_mem_eq / gw_mem_eq_nocase (and the slice forms) against byte-by-byte definitions: for
 * every length up to 40 (the 4-byte, word loop and overlapping-tail paths), b equal to a or
 * to a with its letters' case swapped, then one byte changed to every value at every
 * position, so a difference hidden in any word, in the overlap or in the case bit shows. */
static void mem_eq_matches_bytewise(void **state)
{
    (void)state;
    uint8_t a[40], b[40];
    for (size_t n = 0; n <= sizeof(a); n++) {
        for (size_t i = 0; i < n; i++)
            a[i] = (uint8_t)("Xy-Z@[`{aZ\x80\xc1\xe1~ 09"[(i * 5 + n) % 18]);
        for (int swap = 0; swap < 2; swap++) {
            for (size_t pos = 0; pos < (n ? n : 1); pos++) {
                for (int c = 0; c < 256; c++) {
                    for (size_t i = 0; i < n; i++)
                        b[i] = swap && ((a[i] | 0x20) >= 'a' && (a[i] | 0x20) <= 'z')
                                   ? (uint8_t)(a[i] ^ 0x20)
                                   : a[i];
                    if (n)
                        b[pos] = (uint8_t)c;
                    int eq = 1, eqi = 1;
                    for (size_t i = 0; i < n; i++) {
                        eq &= a[i] == b[i];
                        eqi &= lc(a[i]) == lc(b[i]);
                    }
                    assert_int_equal(gw_mem_eq(a, b, n), eq);
                    assert_int_equal(gw_mem_eq_nocase(a, b, n), eqi);
                    assert_int_equal(gw_slice_eq((gw_slice_t){a, n}, (gw_slice_t){b, n}), eq);
                    assert_int_equal(gw_slice_eq_nocase((gw_slice_t){a, n}, (gw_slice_t){b, n}),
                                     eqi);
                    if (n) /* lengths differ: never equal */
                        assert_false(
                            gw_slice_eq_nocase((gw_slice_t){a, n}, (gw_slice_t){b, n - 1}));
                }
            }
        }
    }
}

/* The inline reserve/append fast path and the growing path agree with the limit: exactly max
 * bytes fit, one more is GW_E_LIMIT with the buffer unchanged, also when the room is already
 * allocated (cap never passes max). */
static void bytes_reserve_fast_path(void **state)
{
    (void)state;
    gw_bytes_t b;
    gw_bytes_init(&b, 70);
    assert_int_equal(gw_bytes_reserve(&b, 10), 0);
    assert_int_equal(b.cap, 64);
    assert_int_equal(gw_bytes_append(&b, "abcdefgh", 8), 0);
    assert_int_equal(gw_bytes_reserve(&b, 56), 0); /* within cap: no growth */
    assert_int_equal(b.cap, 64);
    assert_int_equal(gw_bytes_reserve(&b, 62), 0); /* grows to max, not 128 */
    assert_int_equal(b.cap, 70);
    assert_int_equal(gw_bytes_reserve(&b, 63), GW_E_LIMIT);
    assert_int_equal(gw_bytes_append(&b, "x", 0), 0);
    for (int i = 0; i < 62; i++)
        assert_int_equal(gw_bytes_append(&b, "x", 1), 0);
    assert_int_equal(b.len, 70);
    assert_int_equal(gw_bytes_append(&b, "y", 1), GW_E_LIMIT);
    assert_int_equal(b.len, 70);
    assert_memory_equal(b.base, "abcdefghx", 9);
    gw_bytes_free(&b);
    gw_bytes_t e;
    gw_bytes_init(&e, 0);
    assert_int_equal(gw_bytes_append(&e, NULL, 0), 0); /* empty: no buffer needed */
    assert_null(e.base);
    gw_alloc_fail_after(1);
    assert_int_equal(gw_bytes_append(&e, "z", 1), GW_E_NOMEM);
    assert_int_equal(e.len, 0);
    gw_alloc_fail_after(0);
    gw_bytes_free(&e);
}

static void fmt_u64_matches_printf(void **state)
{
    (void)state;
    const uint64_t v[] = {0, 7, 10, 99, 1024, 4294967296ull, 18446744073709551615ull};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]) + 100000 + 2 * 20; i++) {
        /* the listed values, then 0..99999 (every digit count and pair to five digits), then
         * 10^k - 1 and 10^k for every k (odd and even digit counts up to 20) */
        uint64_t x = i < 7 ? v[i] : i < 7 + 100000 ? (uint64_t)(i - 7) : 0;
        if (i >= 7 + 100000) {
            uint64_t p = 1;
            for (size_t k = 0; k < (i - 7 - 100000) / 2; k++)
                p *= 10;
            x = (i - 7 - 100000) % 2 ? p : p - 1;
        }
        char a[24], b[24];
        memset(a, 'x', sizeof(a));
        size_t n = gw_fmt_u64(a, x);
        snprintf(b, sizeof(b), "%llu", (unsigned long long)x);
        assert_string_equal(a, b);
        assert_int_equal(n, strlen(b));
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(fmt_u64_matches_printf),
    cmocka_unit_test(slices_compare),
    cmocka_unit_test(rbuf_refcount),
    cmocka_unit_test(bytes_grow_and_limit),
    cmocka_unit_test(iovq_copy_merges_and_ref_pins),
    cmocka_unit_test(iovq_many_entries_wrap),
    cmocka_unit_test(iovq_alloc_failure_is_reported),
    cmocka_unit_test(iovq_take_moves_pins),
    cmocka_unit_test(iovq_lent_entries_go_back_when_empty),
    cmocka_unit_test(ascii_lower_matches_bytewise),
    cmocka_unit_test(mem_eq_matches_bytewise),
    cmocka_unit_test(bytes_reserve_fast_path),
};

GW_TEST_MAIN(tests)
