/* Unit tests of proxy/chain: which response filters each route runs, in which order, and the
 * hooks the chain runs for a follower that detaches. */
#define GW_PROXY_TEST_FIXTURE
#include "proxy_test_util.h"

#include "common/alloc.h"
#include "common/err.h"

static const char *yaml = "listen: [{address: 127.0.0.1:8080}]\n"
                          "upstreams:\n"
                          "  u: {servers: [127.0.0.1:9001]}\n"
                          "routes:\n"
                          "  - {host: plain.test, path: /, upstream: u, coalesce: false}\n"
                          "  - {host: shared.test, path: /, upstream: u}\n"
                          "  - {host: push.test, path: /, upstream: u, coalesce: false, "
                          "push: true}\n"
                          "  - {host: zip.test, path: /, upstream: u, coalesce: false, "
                          "compress: true}\n"
                          "  - {host: all.test, path: /, upstream: u, push: true, compress: "
                          "true, early_hints_learn: true, intercept_errors: true}\n"
                          "  - {host: errors.test, path: /, upstream: u, coalesce: false, "
                          "intercept_errors: true}\n"

                          "  - {host: hdr.test, path: /, upstream: u, coalesce: false, "
                          "compress: true, response_headers: {remove: [server]}}\n"
                          "  - {host: cache.test, path: /, upstream: u, cache: true, "
                          "compress: true}\n";

/* The names of the filters of the route for host, space-separated, into out. */
static const char *chain_names(const char *host, char *out, size_t cap)
{
    const gw_cfg_route_t *r = gw_proxy_route(px, gw_slice_str(host), GW_SLICE_LIT("/"));
    assert_non_null(r);
    const gw_proxy_chain_t *c = gw_proxy__chain_of(px, r);
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < c->n; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? " " : "", c->f[i]->name);
    return out;
}

/* Each route runs the filters its configuration asks for, always in the chain's order; the
 * early hints filter runs everywhere (an origin's 103 is relayed on any route). */
static void filters_registered_per_route_in_chain_order(void **state)
{
    (void)state;
    char b[128];
    assert_string_equal(chain_names("plain.test", b, sizeof(b)), "hints");
    assert_string_equal(chain_names("shared.test", b, sizeof(b)), "coalesce hints");
    assert_string_equal(chain_names("push.test", b, sizeof(b)), "hints push");
    assert_string_equal(chain_names("zip.test", b, sizeof(b)), "hints compress");
    assert_string_equal(chain_names("all.test", b, sizeof(b)),
                        "coalesce hints push compress errpage");
    /* the response header rules last: they see what the client gets */
    assert_string_equal(chain_names("hdr.test", b, sizeof(b)), "hints compress headers");
    assert_string_equal(chain_names("errors.test", b, sizeof(b)), "hints errpage");
    /* the cache first: it keeps what the origin sent, before any filter rewrites it */
    assert_string_equal(chain_names("cache.test", b, sizeof(b)), "cache coalesce hints compress");
    assert_int_equal(GW_PROXY_FILTER_N, 7);
}

/* A filter rewriting a value takes bytes that live as long as the head: up to the room, then
 * NULL (never an overflow). */
static void resp_room_is_bounded(void **state)
{
    (void)state;
    static gw_proxy_resp_t r;
    r.room_used = 0;
    char *a = gw_proxy__resp_room(&r, 256);
    assert_ptr_equal(a, r.room);
    char *b = gw_proxy__resp_room(&r, sizeof(r.room) - 256);
    assert_ptr_equal(b, r.room + 256);
    assert_null(gw_proxy__resp_room(&r, 1));
}

/* A follower whose head went out compressed may leave the exchange only when the pieces the
 * compressor was fed were kept: the compression filter's on_detach copies them to the stream
 * (its new exchange makes the same bytes again) or refuses (the stream is reset). Through the
 * chain of a compressing route; a route without compression never refuses. */
static void detach_of_a_compressed_follower_through_the_chain(void **state)
{
    (void)state;
    const gw_cfg_route_t *zr = gw_proxy_route(px, GW_SLICE_LIT("zip.test"), GW_SLICE_LIT("/"));
    const gw_cfg_route_t *pr = gw_proxy_route(px, GW_SLICE_LIT("plain.test"), GW_SLICE_LIT("/"));
    gw_proxy__oxz_t oz = {0}; /* a compressing exchange's state beside its compressor */
    ox_t ox = {.p = px, .route = zr, .chain = gw_proxy__chain_of(px, zr), .z = &oz};
    px_t s = {.p = px, .route = zr, .resp = PX_RESP_HEAD, .zc = GW_ZC_GZIP};
    assert_true(gw_proxy__chain_detach(&ox, &s) < 0); /* nothing recorded */

    ox.zrecord = 1;
    assert_int_equal(gw_zchunks_push(&ox.z->zchunks, 100), 0);
    assert_int_equal(gw_zchunks_push(&ox.z->zchunks, 7), 0);
    assert_int_equal(gw_proxy__chain_detach(&ox, &s), 0);
    assert_non_null(s.x); /* the pieces are kept beside the stream, made for them */
    assert_int_equal(s.x->zrep.n, 2);
    assert_int_equal(s.x->zrep.len[0], 100);
    assert_int_equal(s.x->zrep.len[1], 7);
    gw_zchunks_free(&s.x->zrep);

    px_t plain = {.p = px, .route = zr, .resp = PX_RESP_HEAD}; /* sent as it came */
    ox.zrecord = 0;
    assert_int_equal(gw_proxy__chain_detach(&ox, &plain), 0);
    ox_t other = {.p = px, .route = pr, .chain = gw_proxy__chain_of(px, pr)};
    assert_int_equal(gw_proxy__chain_detach(&other, &s), 0);
    gw_zchunks_free(&ox.z->zchunks);
    gw_free(s.x);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(filters_registered_per_route_in_chain_order),
    cmocka_unit_test(resp_room_is_bounded),
    cmocka_unit_test(detach_of_a_compressed_follower_through_the_chain),
};

GW_TEST_MAIN_GROUP(tests, setup, teardown)
