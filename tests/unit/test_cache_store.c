/* Unit tests of cache/store.c: insert and look up with Vary variants, replacement, the byte
 * budget and max_object, S3-FIFO keeping a hot set under a scan (counted against an LRU of the
 * same capacity), purge by URL and by prefix, readers keeping evicted entries alive, several
 * threads at once (run this file under the TSan build too), and the claim of an entry's one
 * background revalidation. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "cache/cache.h"
#include "common/alloc.h"
#include "common/err.h"

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }

/* A body of len bytes, each byte `fill`, in one buffer of cap bytes (cap >= len). */
static gw_rbuf_t *body_buf(size_t len, size_t cap, uint8_t fill)
{
    gw_rbuf_t *b = gw_rbuf_new(cap);
    assert_non_null(b);
    memset(b->data, fill, len);
    b->len = len;
    return b;
}

/* Put key for route (a tag) with a body of len bytes of `fill` (its own buffer of exactly len
 * bytes); the response fields and request fields given. Returns gw_cache_put's code. */
static int put_route(gw_cache_t *c, uint64_t route, const char *key, size_t len, uint8_t fill,
                     const gw_field_t *rf, size_t nrf, const gw_field_t *qf, size_t nqf)
{
    gw_rbuf_t *b = body_buf(len, len ? len : 1, fill);
    gw_rslice_t s = {b, 0, len};
    gw_cache_put_t p = {.key = key,
                        .keylen = strlen(key),
                        .req_fields = qf,
                        .nreq = nqf,
                        .status = 200,
                        .fields = rf,
                        .nfields = nrf,
                        .body = &s,
                        .nbody = len ? 1 : 0,
                        .route = route};
    int rv = gw_cache_put(c, &p);
    gw_rbuf_unref(b); /* the entry holds its own reference */
    return rv;
}

/* The same for route 0. */
static int put(gw_cache_t *c, const char *key, size_t len, uint8_t fill, const gw_field_t *rf,
               size_t nrf, const gw_field_t *qf, size_t nqf)
{
    return put_route(c, 0, key, len, fill, rf, nrf, qf, nqf);
}

/* The entry of key for route (a tag) and request fields qf[0..n), held; NULL on a miss. */
static gw_cache_entry_t *get_route(gw_cache_t *c, uint64_t route, const char *key,
                                   const gw_field_t *qf, size_t n)
{
    return gw_cache_get(c, key, strlen(key), route, qf, n);
}

/* The same for route 0. */
static gw_cache_entry_t *get(gw_cache_t *c, const char *key, const gw_field_t *qf, size_t n)
{
    return get_route(c, 0, key, qf, n);
}

static void insert_and_lookup(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    assert_non_null(c);
    gw_field_t rf[] = {F("content-type", "text/plain"), F("cache-control", "max-age=60")};
    assert_int_equal(put(c, "https://a/x", 100, 'x', rf, 2, NULL, 0), 0);
    gw_cache_entry_t *e = get(c, "https://a/x", NULL, 0);
    assert_non_null(e);
    assert_int_equal(e->status, 200);
    assert_int_equal(e->nfields, 2);
    assert_true(gw_slice_eq(e->fields[0].value, GW_SLICE_LIT("text/plain")));
    assert_int_equal(e->body_len, 100);
    assert_int_equal(e->nbody, 1);
    assert_int_equal(e->body[0].buf->data[e->body[0].off + 99], 'x');
    assert_string_equal(e->key, "https://a/x");
    gw_cache_unref(e);
    assert_null(get(c, "https://a/y", NULL, 0));
    assert_null(get(c, "https://a/x?", NULL, 0));
    /* a newer answer replaces the older one */
    assert_int_equal(put(c, "https://a/x", 50, 'z', rf, 2, NULL, 0), 0);
    e = get(c, "https://a/x", NULL, 0);
    assert_int_equal(e->body_len, 50);
    gw_cache_unref(e);
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 1);
    assert_int_equal(st.inserts, 2);
    assert_int_equal(st.replaced, 1);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 2);
    gw_cache_del(c);
}

/* peek finds what get finds without counting it; each entry has an id of its own, a
 * replacement another one */
static void peek_and_ids(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    gw_field_t rf[] = {F("cache-control", "max-age=60")};
    assert_int_equal(put(c, "https://a/x", 10, 'x', rf, 1, NULL, 0), 0);
    assert_int_equal(put(c, "https://a/y", 10, 'y', rf, 1, NULL, 0), 0);
    gw_cache_entry_t *x = gw_cache_peek(c, "https://a/x", 11, 0, NULL, 0);
    gw_cache_entry_t *y = gw_cache_peek(c, "https://a/y", 11, 0, NULL, 0);
    assert_non_null(x);
    assert_non_null(y);
    assert_null(gw_cache_peek(c, "https://a/z", 11, 0, NULL, 0));
    assert_true(x->id != 0 && y->id != 0 && x->id != y->id);
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.misses, 0);
    assert_int_equal(put(c, "https://a/x", 10, 'x', rf, 1, NULL, 0), 0); /* the same again */
    gw_cache_entry_t *x2 = get(c, "https://a/x", NULL, 0);
    assert_non_null(x2);
    assert_true(x2->id != x->id && x2->id != y->id);
    gw_cache_unref(x2);
    gw_cache_unref(y);
    gw_cache_unref(x);
    gw_cache_del(c);
}

/* Put the copy of e that gateway/proxy/cache.c's copy_key names: e's key, a 0 byte, the
 * coding and e's id; len bytes of `fill`. Returns gw_cache_put's code. */
static int put_copy(gw_cache_t *c, const gw_cache_entry_t *e, size_t len, uint8_t fill)
{
    char k[128];
    int tl =
        snprintf(k + e->keylen, sizeof(k) - e->keylen, "_gzip %llu", (unsigned long long)e->id);
    memcpy(k, e->key, e->keylen);
    k[e->keylen] = 0;
    gw_rbuf_t *b = body_buf(len, len, fill);
    gw_rslice_t sl = {b, 0, len};
    gw_cache_put_t p = {
        .key = k, .keylen = e->keylen + (size_t)tl, .status = 200, .body = &sl, .nbody = 1};
    int rv = gw_cache_put(c, &p);
    gw_rbuf_unref(b);
    return rv;
}

/* A purge of a URL removes the compressed copies made of its entries too (found by the entry's
 * id only, nothing else would reach them again), and so does a put that replaces the entry
 * and gw_cache_remove: the store's bytes go back to what they were before, not to the copies'. */
static void copies_go_with_their_entry(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    const uint64_t empty = st.bytes;
    gw_field_t rf[] = {F("cache-control", "max-age=60")};
    /* purge by URL */
    assert_int_equal(put(c, "https://a/x", 4000, 'x', rf, 1, NULL, 0), 0);
    assert_int_equal(put(c, "https://a/y", 4000, 'y', rf, 1, NULL, 0), 0);
    gw_cache_entry_t *x = gw_cache_peek(c, "https://a/x", 11, 0, NULL, 0);
    gw_cache_entry_t *y = gw_cache_peek(c, "https://a/y", 11, 0, NULL, 0);
    assert_int_equal(put_copy(c, x, 1000, 'g'), 0);
    assert_int_equal(put_copy(c, y, 1000, 'g'), 0);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 4);
    assert_int_equal(gw_cache_purge(c, "https://a/x", 11), 2); /* the entry and its copy */
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 2); /* y and its copy */
    assert_int_equal(st.purged, 2);
    assert_int_equal(gw_cache_purge(c, "https://a/y", 11), 2);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(st.bytes, empty);
    gw_cache_unref(x);
    gw_cache_unref(y);
    /* a replacement takes the old entry's copies along, not the new one's */
    assert_int_equal(put(c, "https://a/x", 4000, 'x', rf, 1, NULL, 0), 0);
    x = gw_cache_peek(c, "https://a/x", 11, 0, NULL, 0);
    assert_int_equal(put_copy(c, x, 1000, 'g'), 0);
    assert_int_equal(put(c, "https://a/x", 4000, 'X', rf, 1, NULL, 0), 0);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 1);
    gw_cache_entry_t *x2 = gw_cache_peek(c, "https://a/x", 11, 0, NULL, 0);
    assert_int_equal(put_copy(c, x2, 1000, 'g'), 0);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 2);
    /* gw_cache_remove: only while stored, with its copies */
    assert_int_equal(gw_cache_remove(c, x), 0); /* replaced already */
    assert_int_equal(gw_cache_remove(c, x2), 1);
    assert_int_equal(gw_cache_remove(c, x2), 0);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(st.bytes, empty);
    assert_null(gw_cache_peek(c, "https://a/x", 11, 0, NULL, 0));
    gw_cache_unref(x2);
    gw_cache_unref(x);
    gw_cache_del(c);
}

/* §4.1: variants of one URL kept apart by the fields their Vary names */
static void vary_variants(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    gw_field_t rf[] = {F("vary", "Accept-Encoding"), F("cache-control", "max-age=60")};
    gw_field_t gz[] = {F("accept-encoding", "gzip, br")};
    gw_field_t gz2[] = {F("Accept-Encoding", "gzip,br")};
    gw_field_t id[] = {F("accept-encoding", "identity")};
    assert_int_equal(put(c, "https://a/v", 10, 'g', rf, 2, gz, 1), 0);
    assert_int_equal(put(c, "https://a/v", 20, 'i', rf, 2, id, 1), 0);
    assert_int_equal(put(c, "https://a/v", 30, 'n', rf, 2, NULL, 0), 0);
    gw_cache_entry_t *e = get(c, "https://a/v", gz2, 1);
    assert_non_null(e);
    assert_int_equal(e->body_len, 10);
    gw_cache_unref(e);
    e = get(c, "https://a/v", id, 1);
    assert_int_equal(e->body_len, 20);
    gw_cache_unref(e);
    e = get(c, "https://a/v", NULL, 0); /* absent: its own variant */
    assert_int_equal(e->body_len, 30);
    gw_cache_unref(e);
    gw_field_t br[] = {F("accept-encoding", "br")};
    assert_null(get(c, "https://a/v", br, 1));
    /* a Vary key longer than the lookup's local buffer (512 bytes) */
    char longv[700];
    memset(longv, 'l', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = 0;
    gw_field_t rl[] = {F("vary", "accept")};
    gw_field_t ql[] = {{GW_SLICE_LIT("accept"), gw_slice_str(longv)}};
    assert_int_equal(put(c, "https://a/long", 10, 'l', rl, 1, ql, 1), 0);
    e = get(c, "https://a/long", ql, 1);
    assert_non_null(e);
    gw_cache_unref(e);
    longv[600] = 'm';
    assert_null(get(c, "https://a/long", ql, 1));
    /* Vary: * is refused */
    gw_field_t star[] = {F("vary", "*")};
    assert_int_equal(put(c, "https://a/s", 10, 's', star, 1, NULL, 0), GW_E_INVAL);
    /* purge by URL drops every variant */
    assert_int_equal(put(c, "https://a/w", 10, 'w', NULL, 0, NULL, 0), 0);
    assert_int_equal(gw_cache_purge(c, "https://a/v", 11), 3);
    assert_null(get(c, "https://a/v", gz, 1));
    assert_null(get(c, "https://a/v", NULL, 0));
    e = get(c, "https://a/w", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    gw_cache_del(c);
}

static void purge_prefix(void **state)
{
    (void)state;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = 8 << 20, .max_object = 1 << 16, .shards = 8});
    char k[64];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "https://a/%s/%d", i % 2 ? "img" : "css", i);
        assert_int_equal(put(c, k, 10, 'p', NULL, 0, NULL, 0), 0);
    }
    assert_int_equal(put(c, "https://a/imgx", 10, 'p', NULL, 0, NULL, 0), 0);
    assert_int_equal(gw_cache_purge_prefix(c, "https://a/img/", 14), 50);
    assert_null(get(c, "https://a/img/1", NULL, 0));
    gw_cache_entry_t *e = get(c, "https://a/css/2", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    e = get(c, "https://a/imgx", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 51);
    assert_int_equal(st.purged, 50);
    gw_cache_del(c);
}

/* Put key (route 0, a body of 10 bytes) with the generation gen: gw_cache_put's code. */
static int put_gen(gw_cache_t *c, const char *key, uint64_t gen)
{
    gw_rbuf_t *b = body_buf(10, 10, 'g');
    gw_rslice_t s = {b, 0, 10};
    gw_cache_put_t p = {
        .key = key, .keylen = strlen(key), .status = 200, .body = &s, .nbody = 1, .gen = gen};
    int rv = gw_cache_put(c, &p);
    gw_rbuf_unref(b);
    return rv;
}

/* RFC 9111 §4.4 racing an answer: a put with the generation read before the request left is
 * refused once the key was purged, removed, or swept by a prefix purge since; a put of
 * another key, or with the generation read after, is stored; puts do not change it. */
static void invalidation_generations(void **state)
{
    (void)state;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = 8 << 20, .max_object = 1 << 16, .shards = 8});
    const char *k = "https://a/x";
    uint64_t g = gw_cache_gen(c, k, strlen(k));
    assert_int_not_equal(g, 0);
    uint64_t other = gw_cache_gen(c, "https://a/y", 11);
    assert_int_equal(put_gen(c, k, g), 0);
    assert_int_equal(gw_cache_gen(c, k, strlen(k)), g); /* a put is no invalidation */
    assert_int_equal(gw_cache_purge(c, k, strlen(k)), 1);
    assert_int_equal(put_gen(c, k, g), GW_E_CLOSED); /* the 304 or 200 in flight */
    assert_null(get(c, k, NULL, 0));
    if (gw_cache_gen(c, "https://a/y", 11) == other) /* unless they share a slot */
        assert_int_equal(put_gen(c, "https://a/y", other), 0);
    g = gw_cache_gen(c, k, strlen(k));
    assert_int_equal(put_gen(c, k, g), 0); /* asked after the purge */
    assert_int_equal(put_gen(c, k, 0), 0); /* 0: no check */
    /* a purge of a key with nothing stored still invalidates what is in flight */
    assert_int_equal(gw_cache_purge(c, "https://a/none", 14), 0);
    /* gw_cache_remove of the entry */
    gw_cache_entry_t *e = get(c, k, NULL, 0);
    assert_non_null(e);
    assert_int_equal(gw_cache_remove(c, e), 1);
    gw_cache_unref(e);
    assert_int_equal(put_gen(c, k, g), GW_E_CLOSED);
    /* a purge by prefix, of any prefix */
    g = gw_cache_gen(c, k, strlen(k));
    gw_cache_purge_prefix(c, "https://b/", 10);
    assert_int_equal(put_gen(c, k, g), GW_E_CLOSED);
    assert_null(get(c, k, NULL, 0));
    gw_cache_del(c);
}

/* A route's tag is what it matches (host and path prefix), whatever else it says */
static void route_tags(void **state)
{
    (void)state;
    uint64_t a = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/"));
    assert_true(a == gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/")));
    assert_true(a != gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/a/")));
    assert_true(a != gw_cache_route_tag(GW_SLICE_LIT("a.example"), GW_SLICE_LIT("/")));
    /* the host and the path are not one string */
    assert_true(gw_cache_route_tag(GW_SLICE_LIT("a"), GW_SLICE_LIT("/b")) !=
                gw_cache_route_tag(GW_SLICE_LIT("a/"), GW_SLICE_LIT("b")));
}

/* A reload keeps the entries of the routes still there, drops the others at once (their bytes
 * are given back), and refuses later answers of a removed route. */
static void keep_routes(void **state)
{
    (void)state;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = 8 << 20, .max_object = 1 << 16, .shards = 8});
    uint64_t ra = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/a/"));
    uint64_t rb = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/b/"));
    uint64_t rc = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/c/"));
    char k[64];
    for (int i = 0; i < 90; i++) {
        uint64_t r = i % 3 == 0 ? ra : i % 3 == 1 ? rb : rc;
        snprintf(k, sizeof(k), "https://h/%c/%d", "abc"[i % 3], i);
        assert_int_equal(put_route(c, r, k, 1000, 'r', NULL, 0, NULL, 0), 0); /* every route */
    }
    gw_cache_stats_t before, st;
    gw_cache_stats(c, &before);
    assert_int_equal(before.objects, 90);
    uint64_t keep[] = {rc, ra};
    assert_int_equal(gw_cache_keep_routes(c, keep, 2), 30);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 60);
    assert_int_equal(st.dropped, 30);
    assert_int_equal(st.purged, 0);
    assert_true(st.bytes + 30 * 1000 < before.bytes);
    assert_null(get_route(c, rb, "https://h/b/1", NULL, 0));
    gw_cache_entry_t *e = get_route(c, ra, "https://h/a/0", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    e = get_route(c, rc, "https://h/c/2", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    /* b's answers are refused from now on (a draining connection's), a and c stored */
    assert_int_equal(put_route(c, rb, "https://h/b/1", 10, 'r', NULL, 0, NULL, 0), GW_E_NOENT);
    assert_null(get_route(c, rb, "https://h/b/1", NULL, 0));
    assert_int_equal(put_route(c, rc, "https://h/c/new", 10, 'r', NULL, 0, NULL, 0), 0);
    /* b back in a later reload: stored again */
    uint64_t all[] = {ra, rb, rc};
    assert_int_equal(gw_cache_keep_routes(c, all, 3), 0);
    assert_int_equal(put_route(c, rb, "https://h/b/1", 10, 'r', NULL, 0, NULL, 0), 0);
    /* none: the store is emptied and stores nothing more */
    assert_int_equal(gw_cache_keep_routes(c, NULL, 0), 62);
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(put_route(c, ra, "https://h/a/0", 10, 'r', NULL, 0, NULL, 0), GW_E_NOENT);
    gw_cache_del(c);
}

/* A lookup names its route: an entry another route stored is a miss (a reload put a new route
 * in front of the one that stored the URL, with another upstream), and the new route's answer
 * replaces it, so the old one's is not served to either route afterwards. Vary variants of
 * one URL stored by two routes stay each its route's. */
static void lookup_is_per_route(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    uint64_t old = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/"));
    uint64_t new = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/api/"));
    assert_int_equal(put_route(c, old, "https://h/api/x", 100, 'o', NULL, 0, NULL, 0), 0);
    gw_cache_entry_t *e = get_route(c, old, "https://h/api/x", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    assert_null(get_route(c, new, "https://h/api/x", NULL, 0));
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    /* the new route's answer replaces the old one's */
    assert_int_equal(put_route(c, new, "https://h/api/x", 50, 'n', NULL, 0, NULL, 0), 0);
    e = get_route(c, new, "https://h/api/x", NULL, 0);
    assert_non_null(e);
    assert_int_equal(e->body_len, 50);
    assert_int_equal(e->body[0].buf->data[e->body[0].off], 'n');
    gw_cache_unref(e);
    assert_null(get_route(c, old, "https://h/api/x", NULL, 0));
    gw_cache_stats(c, &st);
    assert_int_equal(st.objects, 1);
    assert_int_equal(st.replaced, 1);
    /* variants: each route finds its own */
    gw_field_t rf[] = {F("vary", "accept-language")};
    gw_field_t en[] = {F("accept-language", "en")}, fr[] = {F("accept-language", "fr")};
    assert_int_equal(put_route(c, old, "https://h/v", 10, 'o', rf, 1, en, 1), 0);
    assert_int_equal(put_route(c, new, "https://h/v", 20, 'n', rf, 1, fr, 1), 0);
    assert_null(get_route(c, new, "https://h/v", en, 1));
    e = get_route(c, new, "https://h/v", fr, 1);
    assert_non_null(e);
    assert_int_equal(e->body_len, 20);
    gw_cache_unref(e);
    e = get_route(c, old, "https://h/v", en, 1);
    assert_non_null(e);
    assert_int_equal(e->body_len, 10);
    gw_cache_unref(e);
    gw_cache_del(c);
}

/* max_object bounds the charge (body buffers whole, head, key); memory <= budget options */
static void limits(void **state)
{
    (void)state;
    assert_null(gw_cache_new(&(gw_cache_opts_t){.memory = 1000, .max_object = 1001}));
    assert_null(gw_cache_new(&(gw_cache_opts_t){.memory = 0, .max_object = 0}));
    assert_null(gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1, .shards = 3}));
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 4096});
    assert_int_equal(put(c, "https://a/big", 4096, 'b', NULL, 0, NULL, 0), GW_E_LIMIT);
    assert_int_equal(put(c, "https://a/ok", 2048, 'b', NULL, 0, NULL, 0), 0);
    /* a body that fills 3/4 of its buffer is kept by reference, the buffer charged whole: 3,100
     * bytes of 4,096 are refused; 3,000 bytes of it are copied, charged as they are: stored */
    gw_rbuf_t *big = body_buf(3100, 4096, 'q');
    gw_rslice_t s = {big, 0, 3100};
    gw_cache_put_t p = {
        .key = "https://a/slice", .keylen = 15, .status = 200, .body = &s, .nbody = 1};
    assert_int_equal(gw_cache_put(c, &p), GW_E_LIMIT);
    s.len = 3000;
    assert_int_equal(gw_cache_put(c, &p), 0);
    gw_rbuf_unref(big);
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.refused, 2);
    assert_int_equal(st.objects, 2);
    gw_cache_del(c);
    /* shards: as many as keep each >= 4 max_object, up to 64 */
    c = gw_cache_new(&(gw_cache_opts_t){.memory = 256u << 20, .max_object = 8u << 20});
    assert_int_equal(gw_cache_shards(c), 8);
    gw_cache_del(c);
    c = gw_cache_new(&(gw_cache_opts_t){.memory = 256u << 20, .max_object = 64u << 10});
    assert_int_equal(gw_cache_shards(c), 64);
    gw_cache_del(c);
    c = gw_cache_new(&(gw_cache_opts_t){.memory = 8u << 20, .max_object = 8u << 20});
    assert_int_equal(gw_cache_shards(c), 1);
    gw_cache_del(c);
}

/* S3-FIFO's rules, one at a time (Yang et al., SOSP 2023, Algorithm 1), in one shard that
 * holds 10 objects: an object not read while in small leaves first, its key goes to the ghost
 * queue, and inserted again it enters main, where a scan of one-time keys does not reach it. */
static void s3fifo_rules(void **state)
{
    (void)state;
    /* what an object costs, to size a store of 10 */
    gw_cache_t *c0 =
        gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 4 << 10, .shards = 1});
    gw_cache_stats_t a, b;
    gw_cache_stats(c0, &a);
    assert_int_equal(put(c0, "https://s/k00", 1000, 'x', NULL, 0, NULL, 0), 0);
    gw_cache_stats(c0, &b);
    gw_cache_del(c0);
    size_t per = b.bytes - a.bytes, fixed = a.bytes;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){
        .memory = fixed + 10 * per + per / 2, .max_object = per + 64, .shards = 1});
    char k[32];
    /* A is inserted and never read; B is read once; 8 others fill the store */
    assert_int_equal(put(c, "https://s/A", 1000, 'a', NULL, 0, NULL, 0), 0);
    assert_int_equal(put(c, "https://s/B", 1000, 'b', NULL, 0, NULL, 0), 0);
    gw_cache_unref(get(c, "https://s/B", NULL, 0));
    for (int i = 0; i < 8; i++) {
        snprintf(k, sizeof(k), "https://s/f%d", i);
        assert_int_equal(put(c, k, 1000, 'f', NULL, 0, NULL, 0), 0);
    }
    gw_cache_stats(c, &a);
    assert_int_equal(a.objects, 10);
    assert_int_equal(a.evictions, 0);
    /* the 11th evicts from small: A (the oldest, never read) leaves, B (read) goes to main */
    assert_int_equal(put(c, "https://s/C", 1000, 'c', NULL, 0, NULL, 0), 0);
    gw_cache_stats(c, &a);
    assert_int_equal(a.evictions, 1);
    assert_int_equal(a.ghosts, 1);
    assert_null(get(c, "https://s/A", NULL, 0));
    gw_cache_entry_t *e = get(c, "https://s/B", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    /* A comes back: its key is in the ghost queue, so it enters main */
    assert_int_equal(put(c, "https://s/A", 1000, 'a', NULL, 0, NULL, 0), 0);
    gw_cache_stats(c, &a);
    assert_int_equal(a.ghosts, 1); /* A's ghost left; the object it evicted became one */
    /* a scan of 100 one-time keys passes through small only: A and B, in main, stay */
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "https://s/scan%d", i);
        assert_int_equal(put(c, k, 1000, 's', NULL, 0, NULL, 0), 0);
    }
    e = get(c, "https://s/A", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    e = get(c, "https://s/B", NULL, 0);
    assert_non_null(e);
    gw_cache_unref(e);
    gw_cache_stats(c, &a);
    assert_true(a.objects <= 10);
    /* a replacement (a 304's refreshed head) of an object in main stays in main: D, read once
     * in small, reaches main with no reads left; replaced, it outlives the next scan (back in
     * small with no reads, it would be the first to go) */
    assert_int_equal(put(c, "https://s/D", 1000, 'd', NULL, 0, NULL, 0), 0);
    gw_cache_unref(get(c, "https://s/D", NULL, 0));
    for (int i = 100; i < 120; i++) {
        snprintf(k, sizeof(k), "https://s/scan%d", i);
        assert_int_equal(put(c, k, 1000, 's', NULL, 0, NULL, 0), 0);
    }
    assert_int_equal(put(c, "https://s/D", 1000, 'D', NULL, 0, NULL, 0), 0);
    for (int i = 120; i < 220; i++) {
        snprintf(k, sizeof(k), "https://s/scan%d", i);
        assert_int_equal(put(c, k, 1000, 's', NULL, 0, NULL, 0), 0);
    }
    e = get(c, "https://s/D", NULL, 0);
    assert_non_null(e);
    assert_int_equal(e->body[0].buf->data[0], 'D');
    gw_cache_unref(e);
    gw_cache_del(c);
}

/* The body by reference, whole or a range, across the buffers it spans */
static void body_slices(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 16});
    /* 10 bytes "0123456789" in three slices: two of one buffer, one of another, each filling
     * at least 3/4 of its buffer (kept by reference: the copy rule) */
    gw_rbuf_t *a = body_buf(0, 8, 0), *b = body_buf(0, 3, 0);
    memcpy(a->data, "0123y456", 8);
    memcpy(b->data, "789", 3);
    gw_rslice_t sl[] = {{a, 0, 4}, {a, 5, 3}, {b, 0, 3}};
    gw_cache_put_t p = {.key = "https://b/", .keylen = 10, .status = 200, .body = sl, .nbody = 3};
    assert_int_equal(gw_cache_put(c, &p), 0);
    gw_rbuf_unref(a);
    gw_rbuf_unref(b);
    gw_cache_entry_t *e = get(c, "https://b/", NULL, 0);
    assert_int_equal(e->body_len, 10);
    assert_int_equal(e->nbody, 3);
    assert_ptr_equal(e->body[0].buf, a);
    struct {
        uint64_t off, len;
        const char *want;
        ssize_t n;
    } cases[] = {{0, 10, "0123456789", 3}, {0, 4, "0123", 1}, {3, 2, "34", 2},
                 {5, 5, "56789", 2},       {9, 1, "9", 1},    {4, 0, "", 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_rslice_t out[4];
        ssize_t n = gw_cache_body_slices(e, cases[i].off, cases[i].len, out, 4);
        assert_int_equal(n, cases[i].n);
        char got[16];
        size_t at = 0;
        for (ssize_t j = 0; j < n; j++) {
            memcpy(got + at, out[j].buf->data + out[j].off, out[j].len);
            at += out[j].len;
        }
        got[at] = 0;
        assert_string_equal(got, cases[i].want);
    }
    gw_rslice_t one[1];
    assert_int_equal(gw_cache_body_slices(e, 0, 10, one, 1), -1); /* cap too small */
    assert_int_equal(gw_cache_body_slices(e, 8, 3, one, 1), -1);  /* past the end */
    assert_int_equal(gw_cache_body_slices(e, 11, 0, one, 1), -1);
    gw_cache_unref(e);
    gw_cache_del(c);
}

/* A reader keeps an evicted (or purged) entry's head and body alive */
static void reader_outlives_eviction(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 64 << 10, .max_object = 8 << 10});
    gw_field_t rf[] = {F("etag", "\"keep\"")};
    assert_int_equal(put(c, "https://a/keep", 4000, 'k', rf, 1, NULL, 0), 0);
    gw_cache_entry_t *e = get(c, "https://a/keep", NULL, 0);
    assert_non_null(e);
    char k[64];
    /* far more than fits, each read once too (so that they reach main as "keep" did, and
     * "keep", the oldest there, leaves the store) */
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "https://a/%d", i);
        assert_int_equal(put(c, k, 4000, 'f', NULL, 0, NULL, 0), 0);
        gw_cache_unref(get(c, k, NULL, 0));
    }
    gw_cache_entry_t *again = get(c, "https://a/keep", NULL, 0);
    assert_null(again);
    /* still readable (ASan would flag a freed block) */
    assert_true(gw_slice_eq(e->fields[0].value, GW_SLICE_LIT("\"keep\"")));
    for (size_t i = 0; i < e->body_len; i++)
        assert_int_equal(e->body[0].buf->data[i], 'k');
    gw_cache_unref(e);
    gw_cache_del(c);
}

/* A scan of 100,000 distinct keys never takes the store past its budget */
static void scan_stays_within_budget(void **state)
{
    (void)state;
    const size_t memory = 2 << 20;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 64 << 10});
    assert_true(gw_cache_shards(c) > 1);
    char k[64];
    gw_cache_stats_t st;
    for (int i = 0; i < 100000; i++) {
        snprintf(k, sizeof(k), "https://scan.example/item/%d?page=%d", i, i % 7);
        assert_int_equal(put(c, k, 200 + (size_t)(i % 1800), 's', NULL, 0, NULL, 0), 0);
        if (i % 1000 == 0) {
            gw_cache_stats(c, &st);
            if (st.bytes > memory)
                fail_msg("after %d keys: %llu bytes > %zu", i, (unsigned long long)st.bytes,
                         memory);
        }
    }
    gw_cache_stats(c, &st);
    assert_true(st.bytes <= memory);
    assert_true(st.bytes > memory / 2); /* and it is used, not emptied */
    assert_true(st.objects > 500);
    assert_int_equal(st.inserts, 100000);
    assert_int_equal(st.evictions + st.objects, 100000);
    gw_cache_del(c);
}

/* The ghost queue holds as many keys as the shard holds entries: in a large shard of small
 * objects, tens of thousands. Its index grows with it, so a ghost lookup (one at each put)
 * compares a few keys, not a fixed table's long chains: with 256 buckets, the 9,400 ghosts of
 * this 4 MiB shard made chains of up to 51 (5 since it grows). The index is charged: the
 * budget holds. */
static void ghost_index_grows_with_the_queue(void **state)
{
    (void)state;
    const size_t memory = 4 << 20;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 1 << 20});
    assert_int_equal(gw_cache_shards(c), 1);
    char k[64];
    gw_cache_stats_t st;
    for (int i = 0; i < 40000; i++) {
        snprintf(k, sizeof(k), "https://scan.example/p/%d", i);
        assert_int_equal(put(c, k, 100, 'g', NULL, 0, NULL, 0), 0);
    }
    gw_cache_stats(c, &st);
    size_t chain = gw_cache_ghost_chain_max(c);
    print_message("%llu objects, %llu ghosts, longest ghost chain %zu\n",
                  (unsigned long long)st.objects, (unsigned long long)st.ghosts, chain);
    assert_true(st.ghosts > 8000);
    assert_true(chain <= 12);
    assert_true(st.bytes <= memory);
    gw_cache_del(c);
}

/* The store never trims the heap itself: malloc_trim took up to 4.6 ms on the inserting
 * worker's thread, a stall of its event loop. It says a trim is due, once for each memory/16
 * bytes evicted, to the caller (the proxy runs it on libuv's thread pool). This file's
 * malloc_trim stands in for glibc's and counts the calls the store makes. */
static int trims;

int malloc_trim(size_t pad);
int malloc_trim(size_t pad)
{
    (void)pad;
    __atomic_add_fetch(&trims, 1, __ATOMIC_RELAXED);
    return 0;
}

static void trim_is_only_said_due(void **state)
{
    (void)state;
    const size_t memory = 1 << 20;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 64 << 10});
    char k[64];
    gw_cache_stats_t st;
    size_t due = 0, puts = 0;
    __atomic_store_n(&trims, 0, __ATOMIC_RELAXED); /* the earlier tests' evictions too */
    assert_int_equal(gw_cache_trim_due(c), 0);
    for (int i = 0; i < 4000; i++) {
        snprintf(k, sizeof(k), "https://scan.example/t/%d", i);
        assert_int_equal(put(c, k, 1000, 't', NULL, 0, NULL, 0), 0);
        puts++;
        if (gw_cache_trim_due(c)) {
            due++;
            assert_int_equal(gw_cache_trim_due(c), 0); /* said once */
        }
    }
    gw_cache_stats(c, &st);
    /* 3,224 evicted entries of ~1.3 KiB (body, entry block, key): 4 MiB, 62 steps of 64 KiB */
    print_message("%llu evictions, %zu trims due over %zu puts, %d run by the store\n",
                  (unsigned long long)st.evictions, due, puts, trims);
    assert_int_equal(trims, 0);
    assert_true(st.evictions > 2500);
    assert_in_range(due, 50, 70);
    gw_cache_del(c);
}

/* A purge, gw_cache_remove and a reload's walk give memory back as evictions do: once
 * memory/16 bytes left the store, a trim is due, for their caller to run (a purge of
 * everything is followed by no put that would find it). */
static void purges_and_reloads_make_a_trim_due(void **state)
{
    (void)state;
    const size_t memory = 1 << 20;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 64 << 10});
    char k[64];
    /* 1/16 of the memory is 64 KiB: 40 entries of 4 KiB are 2.5 steps */
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "https://p.example/%d", i);
        assert_int_equal(put(c, k, 4096, 'p', NULL, 0, NULL, 0), 0);
    }
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(gw_cache_trim_due(c), 0); /* nothing left the store */
    assert_int_equal(gw_cache_purge(c, "https://p.example/0", 19), 1);
    assert_int_equal(gw_cache_trim_due(c), 0); /* 4 KiB: not a step yet */
    assert_int_equal(gw_cache_purge_prefix(c, "https://p.example/", 18), 39);
    assert_int_equal(gw_cache_trim_due(c), 1);
    assert_int_equal(gw_cache_trim_due(c), 0); /* said once */
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "https://p.example/%d", i);
        assert_int_equal(put(c, k, 4096, 'p', NULL, 0, NULL, 0), 0);
    }
    assert_int_equal(gw_cache_trim_due(c), 0);
    assert_int_equal(gw_cache_keep_routes(c, NULL, 0), 40); /* a reload: no route caches */
    assert_int_equal(gw_cache_trim_due(c), 1);
    gw_cache_del(c);
}

/* What the allocator really holds (its usable sizes, rounding included) after a scan stays
 * close to what the store charged, and within the budget with 10 % for malloc's rounding: the
 * budget counts what matters. */
static void charge_matches_the_allocator(void **state)
{
    (void)state;
    const size_t memory = 1 << 20;
    gw_alloc_count_start();
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 64 << 10});
    char k[64];
    gw_field_t rf[] = {F("content-type", "text/css"), F("cache-control", "max-age=600"),
                       F("etag", "\"0123456789abcdef\"")};
    for (int i = 0; i < 20000; i++) {
        snprintf(k, sizeof(k), "https://scan.example/asset/%d.css", i);
        assert_int_equal(put(c, k, 100 + (size_t)(i % 3000), 'a', rf, 3, NULL, 0), 0);
    }
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    long long live = gw_alloc_count_live();
    print_message("charged %llu bytes for %llu objects, the allocator holds %lld\n",
                  (unsigned long long)st.bytes, (unsigned long long)st.objects, live);
    assert_true(st.bytes <= memory);
    assert_true(live >= (long long)st.bytes * 9 / 10);
    assert_true(live <= (long long)memory * 11 / 10);
    gw_cache_del(c);
    assert_int_equal(gw_alloc_count_live(), 0);
    gw_alloc_count_stop();
}

/* An origin connection as back/io.c reads it: answers (a head, then the body) back to back in
 * 16 KiB buffers, a new one when less than 2 KiB of the current one is free. */
typedef struct {
    gw_rbuf_t *cur;
} conn_t;

/* n bytes of `fill` read on k: the slices they landed in (each with a reference) into out;
 * their count. */
static size_t conn_read(conn_t *k, size_t n, uint8_t fill, gw_rslice_t *out)
{
    size_t m = 0;
    while (n) {
        if (!k->cur || k->cur->cap - k->cur->len < 2048) {
            gw_rbuf_unref(k->cur);
            k->cur = body_buf(0, 16384, 0);
        }
        size_t take = k->cur->cap - k->cur->len < n ? k->cur->cap - k->cur->len : n;
        memset(k->cur->data + k->cur->len, fill, take);
        out[m++] = (gw_rslice_t){gw_rbuf_ref(k->cur), k->cur->len, take};
        k->cur->len += take;
        n -= take;
    }
    return m;
}

/* An answer of len body bytes read on k after a 200-byte head, put under key: put's code. */
static int conn_put(gw_cache_t *c, conn_t *k, const char *key, size_t len, const gw_field_t *rf,
                    size_t nrf)
{
    gw_rslice_t hs[4], bs[16];
    size_t nh = conn_read(k, 200, 'h', hs), nb = conn_read(k, len, (uint8_t)('a' + len % 26), bs);
    gw_cache_put_t p = {.key = key,
                        .keylen = strlen(key),
                        .status = 200,
                        .fields = rf,
                        .nfields = nrf,
                        .body = bs,
                        .nbody = nb};
    int rv = gw_cache_put(c, &p);
    for (size_t i = 0; i < nh; i++)
        gw_rbuf_unref(hs[i].buf);
    for (size_t i = 0; i < nb; i++)
        gw_rbuf_unref(bs[i].buf);
    return rv;
}

/* The copy rule: small answers that share the origin's read buffer are copied, each into a
 * buffer of its own length; a large body keeps the buffers it fills by reference and copies the
 * ends it shares with other answers into one buffer, which a put of the stored body keeps */
static void copy_rule(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 1 << 18});
    conn_t k = {NULL};
    assert_int_equal(conn_put(c, &k, "https://r/a", 300, NULL, 0), 0);
    assert_int_equal(conn_put(c, &k, "https://r/b", 1000, NULL, 0), 0);
    gw_rbuf_t *read = k.cur;
    gw_cache_entry_t *a = get(c, "https://r/a", NULL, 0), *b = get(c, "https://r/b", NULL, 0);
    assert_int_equal(a->nbody, 1);
    assert_true(a->body[0].buf != read && a->body[0].buf->cap == 300);
    assert_int_equal(a->body[0].off, 0);
    assert_int_equal(a->body_len, 300);
    assert_true(a->body[0].buf->data[299] == 'a' + 300 % 26);
    assert_true(b->body[0].buf != read && b->body[0].buf->cap == 1000);
    assert_true(a->charge < 1024 && b->charge < 1024 + 700); /* not 16 KiB each */
    gw_cache_unref(a);
    gw_cache_unref(b);
    gw_rbuf_unref(k.cur);

    /* a body from 5,000 bytes into buffer A, all of B and C, 3,000 bytes of D */
    gw_rbuf_t *bufs[4];
    for (int i = 0; i < 4; i++) {
        bufs[i] = body_buf(16384, 16384, 0);
        for (size_t j = 0; j < 16384; j++)
            bufs[i]->data[j] = (uint8_t)('0' + (i * 16384 + j) % 10);
    }
    gw_rslice_t sl[] = {
        {bufs[0], 5000, 11384}, {bufs[1], 0, 16384}, {bufs[2], 0, 16384}, {bufs[3], 0, 3000}};
    gw_cache_put_t p = {
        .key = "https://r/big", .keylen = 13, .status = 200, .body = sl, .nbody = 4};
    assert_int_equal(gw_cache_put(c, &p), 0);
    gw_cache_entry_t *e = get(c, "https://r/big", NULL, 0);
    assert_int_equal(e->nbody, 4);
    assert_int_equal(e->body_len, 11384 + 2 * 16384 + 3000);
    assert_ptr_equal(e->body[1].buf, bufs[1]); /* filled: by reference */
    assert_ptr_equal(e->body[2].buf, bufs[2]);
    assert_ptr_equal(e->body[0].buf, e->body[3].buf); /* the ends: one copy */
    assert_true(e->body[0].buf != bufs[0] && e->body[0].buf->cap == 11384 + 3000);
    assert_int_equal(e->body[3].off, 11384);
    /* the whole body, byte for byte */
    gw_rslice_t out[4];
    assert_int_equal(gw_cache_body_slices(e, 0, e->body_len, out, 4), 4);
    size_t pos = 5000;
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < out[i].len; j++, pos++)
            if (out[i].buf->data[out[i].off + j] != (uint8_t)('0' + pos % 10))
                fail_msg("byte %zu of the body differs", pos - 5000);
    /* charged: B and C whole, the copy, the entry's block */
    size_t bufs_charge = 2 * (16384 + 32) + 11384 + 3000 + 24;
    assert_true(e->charge >= bufs_charge && e->charge <= bufs_charge + 512);
    /* put again as stored (a 304 refreshes the head so): the same buffers, nothing copied
     * again, the copy that holds both ends charged once */
    gw_cache_put_t again = {
        .key = "https://r/big", .keylen = 13, .status = 200, .body = e->body, .nbody = e->nbody};
    assert_int_equal(gw_cache_put(c, &again), 0);
    gw_cache_entry_t *e2 = get(c, "https://r/big", NULL, 0);
    assert_true(e2 != e);
    assert_int_equal(e2->nbody, 4);
    for (int i = 0; i < 4; i++)
        assert_ptr_equal(e2->body[i].buf, e->body[i].buf);
    assert_int_equal(e2->charge, e->charge);
    gw_cache_unref(e2);
    gw_cache_unref(e);
    for (int i = 0; i < 4; i++)
        gw_rbuf_unref(bufs[i]);
    gw_cache_del(c);
}

/* The scan of charge_matches_the_allocator with answers read as an origin connection gives
 * them (several in one read buffer), the copy rule on or off: what the store charged, what
 * the allocator holds, the objects kept */
typedef struct {
    unsigned long long bytes, objects, body;
    long long live;
} scan_t;

static void keepalive_scan(int copy, scan_t *r)
{
    const size_t memory = 4 << 20;
    gw_alloc_count_start();
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 64 << 10});
    gw_cache_copy_rule(c, copy);
    gw_field_t rf[] = {F("content-type", "text/html"), F("cache-control", "max-age=600"),
                       F("etag", "\"0123456789abcdef\"")};
    conn_t k = {NULL};
    char key[64];
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "https://scan.example/page/%d", i);
        /* 200 B to 8 KiB, mixed */
        assert_int_equal(conn_put(c, &k, key, 200 + (size_t)(i * 7919) % 8000, rf, 3), 0);
    }
    gw_rbuf_unref(k.cur); /* the connection is gone: what is left is the store's */
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    r->bytes = st.bytes;
    r->objects = st.objects;
    r->live = gw_alloc_count_live();
    r->body = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "https://scan.example/page/%d", i);
        gw_cache_entry_t *e = get(c, key, NULL, 0);
        if (e)
            r->body += e->body_len;
        gw_cache_unref(e);
    }
    assert_true(st.bytes <= memory);
    gw_cache_del(c);
    assert_int_equal(gw_alloc_count_live(), 0);
    gw_alloc_count_stop();
}

/* With the copy rule the charge is what the allocator holds, within 5 %, whatever the read
 * buffers were shared by; without it, each answer is charged the read buffers it touched whole
 * (16 KiB for a 300-byte answer), so the store keeps a fraction of the objects, and the charge
 * stops being what is held: buffers shared by several stored answers are charged to each, while
 * a store that charged body lengths instead would hold more than its budget */
static void copy_rule_charge_is_what_is_held(void **state)
{
    (void)state;
    scan_t on, off;
    keepalive_scan(1, &on);
    keepalive_scan(0, &off);
    print_message("copy rule on:  charged %llu bytes for %llu objects (%llu body bytes), the "
                  "allocator holds %lld\n",
                  on.bytes, on.objects, on.body, on.live);
    print_message("copy rule off: charged %llu bytes for %llu objects (%llu body bytes), the "
                  "allocator holds %lld\n",
                  off.bytes, off.objects, off.body, off.live);
    assert_true(on.live >= (long long)on.bytes * 95 / 100);
    assert_true(on.live <= (long long)on.bytes * 105 / 100);
    assert_true(on.body >= on.bytes * 8 / 10); /* the budget holds answers, not slack */
    assert_true(on.objects >= 3 * off.objects);
    /* off: the shared buffers charged to each answer (3x what is held, measured), and held
     * half as much again as the stored bodies' lengths (1.5x, measured) */
    assert_true(off.bytes >= 2 * (unsigned long long)off.live);
    assert_true(off.live >= (long long)off.body * 13 / 10);
}

/* Every allocation of new, put (with the index growing and ghosts kept), get, purge and del
 * fails in turn: 0 or GW_E_NOMEM, never a crash or a leak (ASan) */
static void failing_allocations(void **state)
{
    (void)state;
    for (unsigned long n = 1; n < 400; n++) {
        gw_alloc_fail_after(n);
        gw_cache_t *c = gw_cache_new(
            &(gw_cache_opts_t){.memory = 64 << 10, .max_object = 4 << 10, .shards = 2});
        if (!c)
            continue;
        char k[32];
        for (int i = 0; i < 120; i++) {
            snprintf(k, sizeof(k), "https://f/%d", i);
            gw_rbuf_t *b = gw_rbuf_new(300);
            if (!b)
                continue;
            gw_rslice_t sl = {b, 0, 300};
            gw_cache_put_t p = {
                .key = k, .keylen = strlen(k), .status = 200, .body = &sl, .nbody = 1};
            int rv = gw_cache_put(c, &p);
            assert_true(rv == 0 || rv == GW_E_NOMEM);
            gw_rbuf_unref(b);
            gw_cache_unref(gw_cache_get(c, k, strlen(k), 0, NULL, 0));
        }
        gw_cache_purge(c, "https://f/7", 11);
        gw_cache_purge_prefix(c, "https://f/1", 11);
        gw_cache_del(c);
    }
    gw_alloc_fail_after(0);
}

/* ---- the hot set under a scan: S3-FIFO against LRU of the same capacity ------------------- */

/* An LRU of `cap` keys (ints), enough for the comparison: a doubly linked list over an array
 * indexed by key. */
typedef struct {
    int *prev, *next;
    char *in;
    int head, tail; /* head most recent */
    size_t n, cap;
} lru_t;

static void lru_init(lru_t *l, size_t keys, size_t cap)
{
    l->prev = calloc(keys, sizeof(int));
    l->next = calloc(keys, sizeof(int));
    l->in = calloc(keys, 1);
    l->head = l->tail = -1;
    l->n = 0;
    l->cap = cap;
}

static void lru_unlink(lru_t *l, int k)
{
    if (l->prev[k] >= 0)
        l->next[l->prev[k]] = l->next[k];
    else
        l->head = l->next[k];
    if (l->next[k] >= 0)
        l->prev[l->next[k]] = l->prev[k];
    else
        l->tail = l->prev[k];
}

static void lru_front(lru_t *l, int k)
{
    l->prev[k] = -1;
    l->next[k] = l->head;
    if (l->head >= 0)
        l->prev[l->head] = k;
    l->head = k;
    if (l->tail < 0)
        l->tail = k;
}

/* A read of k: 1 on a hit; a miss inserts it (evicting the least recent). */
static int lru_access(lru_t *l, int k)
{
    if (l->in[k]) {
        lru_unlink(l, k);
        lru_front(l, k);
        return 1;
    }
    if (l->n == l->cap) {
        int t = l->tail;
        lru_unlink(l, t);
        l->in[t] = 0;
        l->n--;
    }
    lru_front(l, k);
    l->in[k] = 1;
    l->n++;
    return 0;
}

static void lru_free(lru_t *l)
{
    free(l->prev);
    free(l->next);
    free(l->in);
}

/* A hot set of 2/5 of the capacity read in turn, 2 scan keys (each read once, never again)
 * between two hot reads: 3 x 2/5 of the capacity of distinct keys pass between two reads of a
 * hot key, more than either cache holds. LRU loses every hot key to the scan; S3-FIFO keeps
 * them in main (a hot key's second read finds it in the ghost queue, which remembers as many
 * keys as the store holds), since the scan only passes through the small queue. Same
 * workload, same capacity in objects. */
static void hot_set_survives_a_scan(void **state)
{
    (void)state;
    const int rounds = 100000, scan_per_hot = 2;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = 512 << 10, .max_object = 64 << 10, .shards = 1});
    /* what one object costs, to give the LRU the same number of objects */
    assert_int_equal(put(c, "https://h/probe", 1000, 'p', NULL, 0, NULL, 0), 0);
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    gw_cache_stats_t empty;
    gw_cache_t *c0 =
        gw_cache_new(&(gw_cache_opts_t){.memory = 512 << 10, .max_object = 64 << 10, .shards = 1});
    gw_cache_stats(c0, &empty);
    gw_cache_del(c0);
    size_t per_object = st.bytes - empty.bytes;
    size_t capacity = (512 << 10) / per_object;
    const int hot = (int)capacity * 2 / 5;
    assert_true(capacity < (size_t)(hot - 1 + hot * scan_per_hot)); /* LRU cannot keep them */
    assert_int_equal(gw_cache_purge(c, "https://h/probe", 15), 1);

    lru_t l;
    int keys = hot + rounds * scan_per_hot;
    lru_init(&l, (size_t)keys, capacity);
    long s3_hits = 0, lru_hits = 0;
    int scan = hot;
    char k[64];
    for (int r = 0; r < rounds; r++) {
        int h = r % hot;
        snprintf(k, sizeof(k), "https://h/hot/%d", h);
        gw_cache_entry_t *e = get(c, k, NULL, 0);
        if (e) {
            s3_hits++;
            gw_cache_unref(e);
        } else {
            assert_int_equal(put(c, k, 1000, 'h', NULL, 0, NULL, 0), 0);
        }
        lru_hits += lru_access(&l, h);
        for (int j = 0; j < scan_per_hot; j++, scan++) {
            snprintf(k, sizeof(k), "https://h/scan/%d", scan);
            e = get(c, k, NULL, 0);
            GW_ASSERT(e == NULL);
            assert_int_equal(put(c, k, 1000, 's', NULL, 0, NULL, 0), 0);
            lru_access(&l, scan);
        }
    }
    print_message("hot-set hits over %d reads: S3-FIFO %ld, LRU %ld (capacity %zu objects)\n",
                  rounds, s3_hits, lru_hits, capacity);
    assert_int_equal(lru_hits, 0);
    assert_true(s3_hits > rounds * 9 / 10);
    lru_free(&l);
    gw_cache_del(c);
}

/* ---- threads --------------------------------------------------------------------------------- */

typedef struct {
    gw_cache_t *c;
    uint64_t route;
    char prefix;
    int *stop;   /* atomic */
    long stored; /* atomic */
} putter_t;

static void *putter(void *arg)
{
    putter_t *w = arg;
    char k[64];
    for (unsigned i = 0; !__atomic_load_n(w->stop, __ATOMIC_ACQUIRE); i++) {
        snprintf(k, sizeof(k), "https://h/%c/%u", w->prefix, i % 500);
        if (put_route(w->c, w->route, k, 200, 'p', NULL, 0, NULL, 0) == 0)
            __atomic_add_fetch(&w->stored, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Puts of a route race the reload that removes it: once gw_cache_keep_routes returns, no entry
 * of the removed route is left, whatever the puts under way did meanwhile. */
static void keep_routes_while_putting(void **state)
{
    (void)state;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = 8 << 20, .max_object = 1 << 16, .shards = 4});
    uint64_t ra = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/a/"));
    uint64_t rb = gw_cache_route_tag(GW_SLICE_LIT("*"), GW_SLICE_LIT("/b/"));
    int stop = 0;
    putter_t w[2] = {{.c = c, .route = ra, .prefix = 'a', .stop = &stop},
                     {.c = c, .route = rb, .prefix = 'b', .stop = &stop}};
    pthread_t t[2];
    for (int round = 0; round < 20; round++) {
        __atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
        uint64_t both[] = {ra, rb};
        assert_true(gw_cache_keep_routes(c, both, 2) >= 0);
        long b0 = __atomic_load_n(&w[1].stored, __ATOMIC_ACQUIRE);
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&t[i], NULL, putter, &w[i]), 0);
        while (__atomic_load_n(&w[1].stored, __ATOMIC_ACQUIRE) < b0 + 50)
            ; /* b's entries are in */
        assert_true(gw_cache_keep_routes(c, &ra, 1) > 0);
        /* puts of both go on for a while: b's are refused */
        long a0 = __atomic_load_n(&w[0].stored, __ATOMIC_ACQUIRE);
        while (__atomic_load_n(&w[0].stored, __ATOMIC_ACQUIRE) < a0 + 50)
            ;
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        char k[64];
        for (unsigned i = 0; i < 500; i++) {
            snprintf(k, sizeof(k), "https://h/b/%u", i);
            assert_null(get(c, k, NULL, 0));
        }
        gw_cache_stats_t st;
        gw_cache_stats(c, &st);
        assert_true(st.objects > 0 && st.objects <= 500); /* a's */
    }
    gw_cache_del(c);
}

typedef struct {
    gw_cache_t *c;
    unsigned seed;
    long hits, bad;
} worker_t;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* Random puts, gets (holding a few entries across later operations) and purges over a small
 * key space; every entry read must hold its own key's bytes. */
static void *worker(void *arg)
{
    worker_t *w = arg;
    gw_cache_entry_t *held[4] = {0};
    char k[64];
    gw_field_t q[] = {F("accept-encoding", "gzip")};
    gw_field_t rf[] = {F("vary", "accept-encoding")};
    for (int i = 0; i < 20000; i++) {
        unsigned key = rnd(&w->seed) % 300, op = rnd(&w->seed) % 10;
        snprintf(k, sizeof(k), "https://t/%u", key);
        if (op < 4) {
            int rv = put(w->c, k, 500 + key * 7, (uint8_t)key, rf, key % 2, q, 1);
            if (rv != 0)
                w->bad++;
        } else if (op < 9) {
            gw_cache_entry_t *e = gw_cache_get(w->c, k, strlen(k), 0, q, 1);
            if (e) {
                w->hits++;
                if (e->body_len != 500 + key * 7 ||
                    e->body[0].buf->data[e->body[0].off + e->body_len - 1] != (uint8_t)key)
                    w->bad++;
                size_t slot = key % 4;
                gw_cache_unref(held[slot]);
                held[slot] = e; /* kept while others evict and purge it */
            }
        } else if (key % 50 == 0) {
            gw_cache_purge_prefix(w->c, "https://t/1", 11);
        } else {
            gw_cache_purge(w->c, k, strlen(k));
        }
    }
    for (int i = 0; i < 4; i++) {
        if (held[i] && held[i]->body[0].buf->data[0] != (uint8_t)atoi(held[i]->key + 10))
            w->bad++;
        gw_cache_unref(held[i]);
    }
    return NULL;
}

static void threads(void **state)
{
    (void)state;
    const size_t memory = 256 << 10;
    gw_cache_t *c =
        gw_cache_new(&(gw_cache_opts_t){.memory = memory, .max_object = 16 << 10, .shards = 4});
    pthread_t t[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){.c = c, .seed = 17u + (unsigned)i * 7919u};
        assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
    }
    long hits = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].bad, 0);
        hits += w[i].hits;
    }
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_true(st.bytes <= memory);
    assert_true(hits > 0);
    assert_int_equal(st.hits, (uint64_t)hits);
    assert_true(st.evictions > 0);
    gw_cache_del(c);
}

/* Threads racing for one entry's revalidation claim: the number of winners. */
typedef struct {
    gw_cache_entry_t *e;
    int won;
} claimer_t;

static void *claimer(void *arg)
{
    claimer_t *c = arg;
    for (int i = 0; i < 1000; i++)
        c->won += gw_cache_claim(c->e); /* never released here: one claim in all */
    return NULL;
}

/* RFC 5861 §3's one background revalidation per stored answer: one claim among every worker
 * until it ends, another after; an entry that replaced the claimed one starts unclaimed; the
 * results are counted, a claim given up unstarted (GW_CACHE_BG_N) is not. */
static void one_revalidation_per_entry(void **state)
{
    (void)state;
    gw_cache_t *c = gw_cache_new(&(gw_cache_opts_t){.memory = 1 << 20, .max_object = 64 << 10});
    assert_int_equal(put(c, "https://a/r", 100, 'r', NULL, 0, NULL, 0), 0);
    gw_cache_entry_t *e = get(c, "https://a/r", NULL, 0);
    assert_non_null(e);
    pthread_t t[4];
    claimer_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (claimer_t){.e = e};
        assert_int_equal(pthread_create(&t[i], NULL, claimer, &w[i]), 0);
    }
    int won = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        won += w[i].won;
    }
    assert_int_equal(won, 1);
    gw_cache_entry_t *again = get(c, "https://a/r", NULL, 0); /* another worker's lookup */
    assert_ptr_equal(again, e);
    assert_int_equal(gw_cache_claim(again), 0);
    gw_cache_unref(again);
    /* the revalidation replaced the entry: the new one is free, the old still claimed */
    assert_int_equal(put(c, "https://a/r", 100, 's', NULL, 0, NULL, 0), 0);
    gw_cache_entry_t *fresh = get(c, "https://a/r", NULL, 0);
    assert_ptr_not_equal(fresh, e);
    assert_int_equal(gw_cache_claim(fresh), 1);
    gw_cache_claim_end(c, fresh, GW_CACHE_BG_N); /* given up before it started */
    gw_cache_claim_end(c, e, GW_CACHE_BG_REPLACED);
    assert_int_equal(gw_cache_claim(e), 1); /* released: claimable again */
    gw_cache_claim_end(c, e, GW_CACHE_BG_FAILED);
    gw_cache_entry_t *held = gw_cache_ref(fresh); /* a reference of its own */
    gw_cache_unref(fresh);
    assert_int_equal(held->body[0].buf->data[0], 's');
    gw_cache_unref(held);
    gw_cache_unref(e); /* out of the store: freed now (ASan) */
    gw_cache_stats_t st;
    gw_cache_stats(c, &st);
    assert_int_equal(st.bg[GW_CACHE_BG_REPLACED], 1);
    assert_int_equal(st.bg[GW_CACHE_BG_FAILED], 1);
    assert_int_equal(st.bg[GW_CACHE_BG_REFRESHED] + st.bg[GW_CACHE_BG_NOT_STORED] +
                         st.bg[GW_CACHE_BG_CANCELLED],
                     0);
    assert_string_equal(gw_cache_bg_str(GW_CACHE_BG_NOT_STORED), "not_stored");
    gw_cache_del(c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(insert_and_lookup),
    cmocka_unit_test(peek_and_ids),
    cmocka_unit_test(copies_go_with_their_entry),
    cmocka_unit_test(vary_variants),
    cmocka_unit_test(purge_prefix),
    cmocka_unit_test(invalidation_generations),
    cmocka_unit_test(route_tags),
    cmocka_unit_test(keep_routes),
    cmocka_unit_test(lookup_is_per_route),
    cmocka_unit_test(limits),
    cmocka_unit_test(body_slices),
    cmocka_unit_test(s3fifo_rules),
    cmocka_unit_test(reader_outlives_eviction),
    cmocka_unit_test(scan_stays_within_budget),
    cmocka_unit_test(ghost_index_grows_with_the_queue),
    cmocka_unit_test(trim_is_only_said_due),
    cmocka_unit_test(purges_and_reloads_make_a_trim_due),
    cmocka_unit_test(charge_matches_the_allocator),
    cmocka_unit_test(copy_rule),
    cmocka_unit_test(copy_rule_charge_is_what_is_held),
    cmocka_unit_test(failing_allocations),
    cmocka_unit_test(hot_set_survives_a_scan),
    cmocka_unit_test(threads),
    cmocka_unit_test(keep_routes_while_putting),
    cmocka_unit_test(one_revalidation_per_entry),
};

GW_TEST_MAIN(tests)
