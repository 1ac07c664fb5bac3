/* Unit tests of proxy/coalesce.c: which requests may coalesce, their key, which responses may
 * be shared, the key's sizing, and the store that holds a
 * shared body once. */
#include "proxy_test_util.h"

#include "common/alloc.h"
#include "common/err.h"
#include "config/config.h"
#include "proxy/proxy_internal.h"

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }
#define NF(a) (sizeof(a) / sizeof((a)[0]))

static char *hdr_ae[] = {"accept-encoding"};
static gw_cfg_route_t route_default = {
    .coalesce = 1, .coalesce_headers = hdr_ae, .coalesce_headers_len = 1};

static gw_req_head_t get(const char *path, const gw_field_t *f, size_t n)
{
    return test_req(GW_REQ_H2, "GET", "app.test", path, f, n);
}

/* ---- which requests coalesce (RFC 9111 §4, §3.5, §5.2.1; RFC 9110 §13, §14) ---- */

typedef struct {
    const char *name, *value; /* one field, or name NULL */
    int ok;
} req_case_t;

static void request_rules(void **state)
{
    (void)state;
    static const req_case_t cases[] = {
        {NULL, NULL, 1},
        {"accept", "text/html", 1},
        {"range", "bytes=0-0", 0},
        {"Range", "bytes=0-", 0},
        {"if-range", "\"e1\"", 0},
        {"if-match", "*", 0},
        {"if-none-match", "*", 0},
        {"If-None-Match", "\"abc\"", 0},
        {"if-modified-since", "Sat, 01 Jan 2000 00:00:00 GMT", 0},
        {"if-unmodified-since", "Sat, 01 Jan 2000 00:00:00 GMT", 0},
        {"expect", "100-continue", 0},
        {"authorization", "Bearer x", 0},
        {"cookie", "s=1", 0},
        {"cache-control", "no-cache", 0},
        {"cache-control", "max-stale, No-Cache", 0},
        {"cache-control", "no-store", 0},
        {"cache-control", "max-age=0", 0},
        {"cache-control", "max-age = \"00\"", 0},
        {"cache-control", "max-age=60", 1},
        {"cache-control", "max-age=10, min-fresh=5", 1},
        {"cache-control", "no-transform", 1},
        {"pragma", "no-cache", 0},
        {"pragma", "x, no-cache", 0},
        {"pragma", "foo", 1},
    };
    for (size_t i = 0; i < NF(cases); i++) {
        gw_field_t f[1] = {{gw_slice_str(cases[i].name ? cases[i].name : "x"),
                            gw_slice_str(cases[i].value ? cases[i].value : "")}};
        gw_req_head_t h = get("/app.js", f, cases[i].name ? 1 : 0);
        int ok = gw_proxy__coalesce_request_ok(&route_default, &h);
        if (ok != cases[i].ok)
            fail_msg("%s: %s → %d, want %d", cases[i].name ? cases[i].name : "(none)",
                     cases[i].value ? cases[i].value : "", ok, cases[i].ok);
        size_t len;
        char *k = gw_proxy__coalesce_key(&route_default, &h, &len);
        assert_int_equal(k != NULL, cases[i].ok); /* no key, no coalescing */
        gw_free(k);
    }
    /* methods, bodies, the route's switches */
    gw_req_head_t h = get("/", NULL, 0);
    assert_true(gw_proxy__coalesce_request_ok(&route_default, &h));
    h.method = GW_SLICE_LIT("HEAD");
    assert_true(gw_proxy__coalesce_request_ok(&route_default, &h));
    static const char *const unsafe[] = {"POST", "PUT", "DELETE", "OPTIONS", "get", "PATCH"};
    for (size_t i = 0; i < NF(unsafe); i++) {
        h.method = gw_slice_str(unsafe[i]);
        assert_false(gw_proxy__coalesce_request_ok(&route_default, &h));
    }
    h = get("/", NULL, 0);
    h.end_stream = 0; /* a body follows */
    assert_false(gw_proxy__coalesce_request_ok(&route_default, &h));
    h = get("/", NULL, 0);
    h.content_length = 5; /* HTTP/1.1 GET with content */
    assert_false(gw_proxy__coalesce_request_ok(&route_default, &h));
    h.content_length = 0;
    assert_true(gw_proxy__coalesce_request_ok(&route_default, &h));
    gw_cfg_route_t off = route_default;
    off.coalesce = 0;
    assert_false(gw_proxy__coalesce_request_ok(&off, &h));
    gw_cfg_route_t priv = route_default;
    priv.coalesce_private = 1;
    gw_field_t auth[] = {F("authorization", "Bearer x"), F("cookie", "a=1")};
    h = get("/", auth, NF(auth));
    assert_false(gw_proxy__coalesce_request_ok(&route_default, &h));
    assert_true(gw_proxy__coalesce_request_ok(&priv, &h));
    /* coalesce_private allows credentials, never conditionals */
    gw_field_t cond[] = {F("authorization", "Bearer x"), F("if-none-match", "*")};
    h = get("/", cond, NF(cond));
    assert_false(gw_proxy__coalesce_request_ok(&priv, &h));
}

/* ---- the key ---- */

static int same_key(const gw_cfg_route_t *r, const gw_req_head_t *a, const gw_req_head_t *b)
{
    size_t la, lb;
    char *ka = gw_proxy__coalesce_key(r, a, &la);
    char *kb = gw_proxy__coalesce_key(r, b, &lb);
    assert_non_null(ka);
    assert_non_null(kb);
    int same = la == lb && !memcmp(ka, kb, la);
    gw_free(ka);
    gw_free(kb);
    return same;
}

static void key_parts(void **state)
{
    (void)state;
    gw_field_t gz[] = {F("accept-encoding", "gzip"), F("user-agent", "a")};
    gw_field_t gz2[] = {F("Accept-Encoding", "gzip"), F("user-agent", "b")};
    gw_field_t br[] = {F("accept-encoding", "br")};
    gw_field_t none[] = {F("user-agent", "a")};
    gw_field_t empty[] = {F("accept-encoding", "")};
    gw_field_t two[] = {F("accept-encoding", "gzip"), F("accept-encoding", "br")};
    gw_field_t one[] = {F("accept-encoding", "gzip,br")};
    gw_req_head_t a = get("/x", gz, NF(gz)), b = get("/x", gz2, NF(gz2));
    assert_true(same_key(&route_default, &a, &b)); /* other fields, name case: same */
    b.authority = GW_SLICE_LIT("APP.test");
    assert_true(same_key(&route_default, &a, &b)); /* RFC 3986 §6.2.2.1 */
    b.scheme = GW_SLICE_LIT("http");
    assert_false(same_key(&route_default, &a, &b)); /* Scheme in the key */
    /* one origin server in every spelling, as the cache keys it: RFC 3986 §6.2.3 (the
     * scheme's default port, leading zeros), RFC 4291 §2.2 (an IPv6 address) */
    b = get("/x", gz2, NF(gz2));
    b.authority = GW_SLICE_LIT("App.Test:0443");
    assert_true(same_key(&route_default, &a, &b));
    b.authority = GW_SLICE_LIT("app.test:");
    assert_true(same_key(&route_default, &a, &b));
    b.authority = GW_SLICE_LIT("app.test:80"); /* :80 is not https's default */
    assert_false(same_key(&route_default, &a, &b));
    a.authority = GW_SLICE_LIT("[::1]");
    b.authority = GW_SLICE_LIT("[0:0:0:0:0:0:0:1]:443");
    assert_true(same_key(&route_default, &a, &b));
    b.authority = GW_SLICE_LIT("[::1]:8443");
    assert_false(same_key(&route_default, &a, &b));
    b.authority = GW_SLICE_LIT("[::2]");
    assert_false(same_key(&route_default, &a, &b));
    a.scheme = b.scheme = GW_SLICE_LIT("http");
    b.authority = GW_SLICE_LIT("[0::1]:80");
    assert_true(same_key(&route_default, &a, &b));
    /* no literal (the fronts refuse it): keyed as written, without case, its port kept */
    a.authority = GW_SLICE_LIT("[zz]:80");
    b.authority = GW_SLICE_LIT("[ZZ]:80");
    assert_true(same_key(&route_default, &a, &b));
    b.authority = GW_SLICE_LIT("[zz]");
    assert_false(same_key(&route_default, &a, &b));
    a.authority = GW_SLICE_LIT("[::1]x");
    b.authority = GW_SLICE_LIT("[::1]");
    assert_false(same_key(&route_default, &a, &b));
    a = get("/x", gz, NF(gz));
    b = get("/x", gz2, NF(gz2));
    b.method = GW_SLICE_LIT("HEAD");
    assert_false(same_key(&route_default, &a, &b));
    b = get("/X", gz2, NF(gz2));
    assert_false(same_key(&route_default, &a, &b)); /* the path is case-sensitive */
    b = get("/x?q", gz2, NF(gz2));
    assert_false(same_key(&route_default, &a, &b));
    b = get("/x", br, NF(br));
    assert_false(same_key(&route_default, &a, &b));
    a = get("/x", none, NF(none));
    b = get("/x", empty, NF(empty));
    assert_false(same_key(&route_default, &a, &b)); /* absent is not empty */
    a = get("/x", two, NF(two));
    b = get("/x", one, NF(one));
    assert_false(same_key(&route_default, &a, &b)); /* distinct lines stay distinct */
    /* no part can borrow bytes from the next one */
    a = get("/x", NULL, 0);
    b = get("/x", NULL, 0);
    a.authority = GW_SLICE_LIT("ab");
    a.path = GW_SLICE_LIT("c");
    b.authority = GW_SLICE_LIT("a");
    b.path = GW_SLICE_LIT("bc");
    assert_false(same_key(&route_default, &a, &b));
}

/* Coalesce_headers naming one field twice (as a hand-built route can: the
 * loader de-duplicates) made the key longer than its buffer; a long value overflowed the heap.
 * Run under ASan, an overflow is reported here. */
static void key_duplicate_headers_fit(void **state)
{
    (void)state;
    char *dup[] = {"accept", "Accept", "ACCEPT", "accept-encoding"};
    gw_cfg_route_t r = {.coalesce = 1, .coalesce_headers = dup, .coalesce_headers_len = 4};
    static char big[20000];
    memset(big, 'a', sizeof(big) - 1);
    gw_field_t f[] = {{GW_SLICE_LIT("accept"), gw_slice_str(big)},
                      {GW_SLICE_LIT("Accept"), gw_slice_str(big)},
                      F("accept-encoding", "gzip")};
    gw_req_head_t h = get("/", f, NF(f));
    size_t len;
    char *k = gw_proxy__coalesce_key(&r, &h, &len);
    assert_non_null(k);
    /* each of the three names holds both values */
    assert_true(len > 6 * (sizeof(big) - 1));
    assert_int_equal(strlen(k), len); /* NUL-terminated at its length, nothing beyond */
    gw_free(k);
}

/* ---- which responses are shared (RFC 9111 §3, §4; RFC 9110 §15.1) ---- */

typedef struct {
    unsigned status;
    const char *name, *value;
    int shared;
} resp_case_t;

/* Whether a response of status with the one field name: value (name NULL: no field) is shared;
 * a wrong answer names the case. */
static void expect_shared(unsigned status, const char *name, const char *value, int want)
{
    gw_field_t f[1] = {{gw_slice_str(name ? name : "x"), gw_slice_str(value ? value : "")}};
    int sh = gw_proxy__coalesce_shareable(&route_default, status, f, name ? 1 : 0, 0);
    if (sh != want)
        fail_msg("%u %s: %s → %d, want %d", status, name ? name : "", value ? value : "", sh, want);
}

static void response_rules(void **state)
{
    (void)state;
    /* no field: the statuses shared by default, and those that are not */
    static const unsigned shared[] = {200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501};
    static const unsigned not_shared[] = {206, 304, 302, 307, 400, 500, 502, 503};
    for (size_t i = 0; i < NF(shared); i++)
        expect_shared(shared[i], NULL, NULL, 1);
    for (size_t i = 0; i < NF(not_shared); i++)
        expect_shared(not_shared[i], NULL, NULL, 0);
    static const resp_case_t cases[] = {
        {206, "cache-control", "max-age=60", 0},
        {503, "cache-control", "max-age=5", 1},
        {302, "Cache-Control", "public", 1},
        {302, "cache-control", "s-maxage=5", 1},
        {302, "expires", "Thu, 01 Dec 2039 16:00:00 GMT", 1},
        {200, "cache-control", "private", 0},
        {200, "cache-control", "private=\"x-user\"", 0},
        {200, "cache-control", "max-age=5, Private", 0},
        {200, "cache-control", "no-store", 0},
        {200, "cache-control", "no-cache", 0},
        {200, "cache-control", "no-cache=\"set-cookie\"", 0},
        {200, "cache-control", "public, max-age=5", 1},
        {200, "cache-control", "no-transform", 1},
        {200, "set-cookie", "id=1", 0},
        {200, "Set-Cookie", "id=1", 0},
        {200, "vary", "*", 0},
        {200, "vary", "accept-encoding, *", 0},
        {200, "vary", "Accept-Encoding", 1},
        {200, "vary", "accept-encoding, user-agent", 0},
        {200, "vary", "", 1},
        {200, "pragma", "no-cache", 1}, /* RFC 9111 §5.4: no meaning in a response */
    };
    for (size_t i = 0; i < NF(cases); i++)
        expect_shared(cases[i].status, cases[i].name, cases[i].value, cases[i].shared);
}

/* RFC 9111 §3.5: with coalesce_private, a response to requests with Authorization or Cookie
 * is shared only when it says public, s-maxage or must-revalidate; requests with credentials
 * and anonymous ones never share a key. */
static void authorized_requests(void **state)
{
    (void)state;
    static const struct {
        const char *cc;
        int shared;
    } cases[] = {
        {NULL, 0},
        {"max-age=60", 0},
        {"public", 1},
        {"s-maxage=10", 1},
        {"max-age=60, must-revalidate", 1},
        {"public, private", 0},
    };
    for (size_t i = 0; i < NF(cases); i++) {
        gw_field_t f[1] = {
            {gw_slice_str("cache-control"), gw_slice_str(cases[i].cc ? cases[i].cc : "")}};
        int sh = gw_proxy__coalesce_shareable(&route_default, 200, f, cases[i].cc ? 1 : 0, 1);
        if (sh != cases[i].shared)
            fail_msg("authorized, cache-control %s → %d, want %d", cases[i].cc ? cases[i].cc : "-",
                     sh, cases[i].shared);
        /* the same response to anonymous requests is shared (a 200) */
        assert_int_equal(
            gw_proxy__coalesce_shareable(&route_default, 200, f, cases[i].cc ? 1 : 0, 0),
            !(cases[i].cc && strstr(cases[i].cc, "private")));
    }
    gw_cfg_route_t priv = route_default;
    priv.coalesce_private = 1;
    gw_field_t fa[] = {{gw_slice_str("authorization"), gw_slice_str("Basic YTpi")}};
    gw_field_t fb[] = {{gw_slice_str("Authorization"), gw_slice_str("Basic Yzpk")}};
    gw_req_head_t a = {0}, b = {0}, anon = {0};
    a.method = b.method = anon.method = gw_slice_str("GET");
    a.scheme = b.scheme = anon.scheme = gw_slice_str("https");
    a.authority = b.authority = anon.authority = gw_slice_str("example.com");
    a.path = b.path = anon.path = gw_slice_str("/x");
    a.end_stream = b.end_stream = anon.end_stream = 1;
    a.content_length = b.content_length = anon.content_length = -1;
    a.fields = fa, a.fields_len = 1;
    b.fields = fb, b.fields_len = 1;
    assert_true(gw_proxy__has_credentials(&a));
    assert_false(gw_proxy__has_credentials(&anon));
    size_t la, lb, ln;
    char *ka = gw_proxy__coalesce_key(&priv, &a, &la);
    char *kb = gw_proxy__coalesce_key(&priv, &b, &lb);
    char *kn = gw_proxy__coalesce_key(&priv, &anon, &ln);
    assert_non_null(ka);
    assert_non_null(kb);
    assert_non_null(kn);
    assert_true(la == lb && memcmp(ka, kb, la) == 0);  /* both authorised: may share (if public) */
    assert_false(la == ln && memcmp(ka, kn, la) == 0); /* authorised vs anonymous: never */
    gw_free(ka);
    gw_free(kb);
    gw_free(kn);
    /* a Cookie is a credential as Authorization is: never the anonymous key, the same key as
     * other requests with credentials (a cookie holder's page reached anonymous clients) */
    gw_field_t fc[] = {{gw_slice_str("Cookie"), gw_slice_str("session=alice-secret")}};
    gw_req_head_t c = a;
    c.fields = fc;
    assert_true(gw_proxy__has_credentials(&c));
    size_t lc;
    char *kc = gw_proxy__coalesce_key(&priv, &c, &lc);
    kn = gw_proxy__coalesce_key(&priv, &anon, &ln);
    ka = gw_proxy__coalesce_key(&priv, &a, &la);
    assert_non_null(kc);
    assert_false(lc == ln && memcmp(kc, kn, lc) == 0);
    assert_true(lc == la && memcmp(kc, ka, lc) == 0);
    gw_free(kc);
    gw_free(kn);
    gw_free(ka);
}

/* ---- the shared body store ---- */

static void store(void **state)
{
    (void)state;
    gw_proxy__cbody_t b;
    gw_proxy__cbody_init(&b);
    gw_rbuf_t *r1 = gw_rbuf_new(100), *r2 = gw_rbuf_new(100);
    for (int i = 0; i < 100; i++)
        r1->data[i] = (uint8_t)i, r2->data[i] = (uint8_t)(100 + i);
    gw_rslice_t s;
    assert_int_equal(gw_proxy__cbody_at(&b, 0, &s), GW_E_INVAL);
    assert_int_equal(gw_proxy__cbody_append(&b, r1, 0, 10), 0);
    assert_int_equal(gw_proxy__cbody_append(&b, r1, 10, 30), 0); /* continues: merged */
    assert_int_equal(b.n, 1);
    assert_int_equal(gw_proxy__cbody_append(&b, r2, 0, 50), 0);
    assert_int_equal(gw_proxy__cbody_append(&b, r1, 50, 10), 0); /* not contiguous */
    assert_int_equal(b.n, 3);
    assert_int_equal(b.base, 0);
    assert_int_equal(b.end, 100);
    assert_int_equal(r1->refs, 3); /* ours + two slices */
    assert_int_equal(gw_proxy__cbody_at(&b, 35, &s), 0);
    assert_ptr_equal(s.buf, r1);
    assert_int_equal(s.off, 35);
    assert_int_equal(s.len, 5);
    assert_int_equal(gw_proxy__cbody_at(&b, 40, &s), 0);
    assert_ptr_equal(s.buf, r2);
    assert_int_equal(s.off, 0);
    assert_int_equal(s.len, 50);
    assert_int_equal(gw_proxy__cbody_at(&b, 95, &s), 0);
    assert_int_equal(s.off, 55);
    assert_int_equal(s.len, 5);
    assert_int_equal(gw_proxy__cbody_at(&b, 100, &s), GW_E_INVAL);
    gw_proxy__cbody_trim(&b, 39); /* the first slice is still needed */
    assert_int_equal(b.base, 0);
    gw_proxy__cbody_trim(&b, 45);
    assert_int_equal(b.base, 40);
    assert_int_equal(b.n, 2);
    assert_int_equal(r1->refs, 2);
    assert_int_equal(gw_proxy__cbody_at(&b, 20, &s), GW_E_INVAL); /* released */
    gw_proxy__cbody_trim(&b, 200);
    assert_int_equal(b.n, 0);
    assert_int_equal(b.base, 100);
    assert_int_equal(r1->refs, 1);
    assert_int_equal(r2->refs, 1);
    /* a ring that wraps and grows keeps its order */
    uint64_t off = 100;
    for (int round = 0; round < 50; round++) {
        for (int k = 0; k < 7; k++)
            assert_int_equal(gw_proxy__cbody_append(&b, (k & 1) ? r1 : r2, (size_t)k, 1), 0);
        assert_int_equal(gw_proxy__cbody_at(&b, off + 3, &s), 0);
        assert_ptr_equal(s.buf, r1);
        assert_int_equal(s.off, 3);
        assert_int_equal(s.len, 1);
        gw_proxy__cbody_trim(&b, off + 5 - (uint64_t)(round % 2));
        off += 7;
    }
    gw_proxy__cbody_free(&b);
    assert_int_equal(r1->refs, 1);
    assert_int_equal(r2->refs, 1);
    gw_rbuf_unref(r1);
    gw_rbuf_unref(r2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(request_rules),
    cmocka_unit_test(key_parts),
    cmocka_unit_test(key_duplicate_headers_fit),
    cmocka_unit_test(response_rules),
    cmocka_unit_test(authorized_requests),
    cmocka_unit_test(store),
};

GW_TEST_MAIN(tests)
