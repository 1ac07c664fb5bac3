/* Unit tests of proxy/translate.c: what the origin is told of a client's request, and what the
 * client is told of the origin's response, as tables of inputs and the fields that must (or
 * must not) come out. */
#include "proxy_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/template.h"
#include "proxy/proxy_internal.h"

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }

static const gw_cfg_route_t route_all = {.add_x_forwarded = 1, .add_forwarded = 1, .add_via = 1};
static const gw_cfg_route_t route_none = {0};

typedef struct {
    gw_proxy_xlate_t x;
    gw_back_req_t req;
    int rv;
} out_t;

/* Translate h for a client at ip (TLS or not) on route r. */
static void run(out_t *o, const gw_cfg_route_t *r, const char *ip, int tls, const gw_req_head_t *h)
{
    static struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1)
        in4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1)
        in6->sin6_family = AF_INET6;
    gw_cstream_t s = {.peer = "peer", .peer_ip = ip, .addr = (struct sockaddr *)&ss, .tls = tls};
    memset(&o->x, 0, sizeof(o->x));
    o->rv = gw_proxy__translate(r, &s, h, 5, &o->x, &o->req);
}

static void done(out_t *o)
{
    if (o->x.f != o->x.fst)
        gw_free(o->x.f);
    if (o->x.buf != o->x.bst)
        gw_free(o->x.buf);
}

/* The value of the only field named n (case-insensitive), or NULL when there is none; fails
 * the test when there are several. */
static const char *field(const out_t *o, const char *n)
{
    static char v[4096];
    int seen = 0;
    for (size_t i = 0; i < o->req.fields_len; i++) {
        const gw_field_t *f = &o->req.fields[i];
        if (!gw_slice_eq_nocase(f->name, gw_slice_str(n)))
            continue;
        if (seen++)
            fail_msg("field %s appears twice", n);
        snprintf(v, sizeof(v), "%.*s", (int)f->value.len, (const char *)f->value.base);
    }
    return seen ? v : NULL;
}

static gw_req_head_t head(gw_req_proto_t proto, const char *method, const char *authority,
                          const gw_field_t *f, size_t n)
{
    return test_req(proto, method, authority, "/a?b", f, n);
}

/* RFC 9110 §7.6.1 and RFC 9113 §8.2.2: connection-specific fields, and the fields a
 * Connection field names, never reach the origin; other fields pass unchanged, in order. */
static void connection_specific_fields_dropped(void **state)
{
    (void)state;
    const gw_field_t f[] = {F("connection", "close, x-secret"),
                            F("keep-alive", "timeout=5"),
                            F("proxy-connection", "keep-alive"),
                            F("transfer-encoding", "chunked"),
                            F("upgrade", "websocket"),
                            F("te", "trailers"),
                            F("http2-settings", "AAAA"),
                            F("content-length", "5"),
                            F("expect", "100-continue"),
                            F("x-secret", "named by Connection"),
                            F("accept", "*/*"),
                            F("x-app", "1")};
    static const char *const gone[] = {"connection",        "keep-alive",     "proxy-connection",
                                       "transfer-encoding", "upgrade",        "te",
                                       "http2-settings",    "content-length", "expect",
                                       "x-secret"};
    for (int proto = GW_REQ_HTTP1; proto <= GW_REQ_H2; proto++) {
        gw_req_head_t h = head((gw_req_proto_t)proto, "GET", "a.test", f, 12);
        out_t o;
        run(&o, &route_none, "192.0.2.1", 0, &h);
        assert_int_equal(o.rv, 0);
        for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
            if (field(&o, gone[i]))
                fail_msg("proto %d: %s reached the origin", proto, gone[i]);
        assert_int_equal(o.req.fields_len, 2);
        assert_string_equal(field(&o, "accept"), "*/*");
        assert_string_equal(field(&o, "x-app"), "1");
        assert_true(gw_slice_eq(o.req.fields[0].name, GW_SLICE_LIT("accept")));
        done(&o);
    }
}

/* What the origin is told of the client, per forwarded_for (0 replace, 1 append) and whether
 * the peer is in trusted_proxies: its address and the listener's scheme, never the client's
 * :scheme; a client's own X-Forwarded-For / -Proto / -Host and Forwarded are kept (in front
 * of ours) only from a trusted proxy under append. */
static void forwarding_fields_from_the_connection(void **state)
{
    (void)state;
    static const gw_cfg_net_t nets[] = {
        {AF_INET, {192, 0, 2, 0}, 24},
        {AF_INET6, {0x20, 0x01, 0x0d, 0xb8}, 32},
    };
    gw_cfg_route_t replace = route_all, append = route_all, append_other = route_all;
    append.forwarded_append = 1;
    append.trusted_proxies = nets;
    append.trusted_proxies_len = 2;
    /* append, but the peer is not one of the trusted proxies */
    static const gw_cfg_net_t ten[] = {{AF_INET, {10}, 8}};
    append_other.forwarded_append = 1;
    append_other.trusted_proxies = ten;
    append_other.trusted_proxies_len = 1;
    /* replace with the same list: the list alone trusts no one */
    replace.trusted_proxies = nets;
    replace.trusted_proxies_len = 2;
    const gw_field_t claims[] = {F("x-forwarded-for", "10.0.0.1"), F("x-forwarded-proto", "https"),
                                 F("via", "1.0 fred"), F("x-forwarded-host", "www.a.test"),
                                 F("forwarded", "for=10.0.0.1;proto=https")};
    static const struct {
        int route; /* 0 replace, 1 append (192.0.2.0/24 and 2001:db8::/32 trusted), 2 append
                      (10.0.0.0/8 trusted) */
        const char *ip;
        int tls;
        int claims; /* the client sent claims[] */
        const char *xff, *xfp, *xfh, *fwd, *via;
    } cases[] = {
        {0, "192.0.2.1", 0, 0, "192.0.2.1", "http", NULL,
         "for=192.0.2.1;proto=http;host=\"a.test\"", "2 h2gate"},
        {0, "192.0.2.1", 1, 0, "192.0.2.1", "https", NULL,
         "for=192.0.2.1;proto=https;host=\"a.test\"", "2 h2gate"},
        /* RFC 7239 §6: an IPv6 node is quoted and bracketed */
        {0, "2001:db8::1", 1, 0, "2001:db8::1", "https", NULL,
         "for=\"[2001:db8::1]\";proto=https;host=\"a.test\"", "2 h2gate"},
        /* replace (the default): the client's claims are dropped, Via still appends */
        {0, "192.0.2.1", 0, 1, "192.0.2.1", "http", NULL,
         "for=192.0.2.1;proto=http;host=\"a.test\"", "1.0 fred, 2 h2gate"},
        /* append from a peer that is not trusted: the same */
        {2, "192.0.2.1", 0, 1, "192.0.2.1", "http", NULL,
         "for=192.0.2.1;proto=http;host=\"a.test\"", "1.0 fred, 2 h2gate"},
        /* append from a trusted proxy: its list, then the peer; its scheme and host */
        {1, "192.0.2.1", 0, 1, "10.0.0.1, 192.0.2.1", "https", "www.a.test",
         "for=10.0.0.1;proto=https, for=192.0.2.1;proto=http;host=\"a.test\"",
         "1.0 fred, 2 h2gate"},
        {1, "2001:db8::7", 1, 1, "10.0.0.1, 2001:db8::7", "https", "www.a.test",
         "for=10.0.0.1;proto=https, for=\"[2001:db8::7]\";proto=https;host=\"a.test\"",
         "1.0 fred, 2 h2gate"},
        /* a trusted proxy that sent nothing: ours alone */
        {1, "192.0.2.1", 0, 0, "192.0.2.1", "http", NULL,
         "for=192.0.2.1;proto=http;host=\"a.test\"", "2 h2gate"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const gw_cfg_route_t *r = cases[i].route == 0   ? &replace
                                  : cases[i].route == 1 ? &append
                                                        : &append_other;
        gw_req_head_t h = head(GW_REQ_H2, "GET", "a.test", claims, cases[i].claims ? 5 : 0);
        out_t o;
        run(&o, r, cases[i].ip, cases[i].tls, &h);
        assert_int_equal(o.rv, 0);
        /* field() answers in one static buffer: copy each */
        char got[5][512];
        const char *names[5] = {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
                                "forwarded", "via"};
        const char *want[5] = {cases[i].xff, cases[i].xfp, cases[i].xfh, cases[i].fwd,
                               cases[i].via};
        int bad = 0;
        for (size_t k = 0; k < 5; k++) {
            const char *v = field(&o, names[k]);
            snprintf(got[k], sizeof(got[k]), "%s", v ? v : "(none)");
            bad |= !v != !want[k] || (v && strcmp(v, want[k]));
        }
        if (bad)
            fail_msg("case %zu: xff=%s xfp=%s xfh=%s fwd=%s via=%s", i, got[0], got[1], got[2],
                     got[3], got[4]);
        done(&o);
    }
    /* from a trusted proxy: an open quote could swallow ours, so its Forwarded
     * is dropped; an X-Forwarded-Proto that is not one http/https value is not believed */
    const gw_field_t odd[][2] = {
        {F("forwarded", "for=\"10.0.0.1"), F("x-forwarded-proto", "gopher")},
        {F("x-forwarded-proto", "https"), F("x-forwarded-proto", "http")},
    };
    for (size_t i = 0; i < 2; i++) {
        gw_req_head_t h = head(GW_REQ_H2, "GET", "a.test", odd[i], 2);
        out_t o;
        run(&o, &append, "192.0.2.1", 0, &h);
        assert_string_equal(field(&o, "forwarded"), "for=192.0.2.1;proto=http;host=\"a.test\"");
        assert_string_equal(field(&o, "x-forwarded-proto"), "http");
        done(&o);
    }
    /* an IPv4-mapped IPv6 peer counts as IPv4 */
    gw_req_head_t h = head(GW_REQ_H2, "GET", "a.test", claims, 1);
    out_t o;
    run(&o, &append, "::ffff:192.0.2.9", 0, &h);
    assert_string_equal(field(&o, "x-forwarded-for"), "10.0.0.1, ::ffff:192.0.2.9");
    done(&o);
    /* a route that adds none passes the client's fields through untouched */
    const gw_field_t f[] = {F("x-forwarded-for", "10.0.0.1"), F("via", "1.0 fred")};
    h = head(GW_REQ_HTTP1, "GET", "a.test", f, 2);
    run(&o, &route_none, "192.0.2.1", 1, &h);
    assert_int_equal(o.rv, 0);
    assert_string_equal(field(&o, "x-forwarded-for"), "10.0.0.1");
    assert_string_equal(field(&o, "via"), "1.0 fred");
    assert_null(field(&o, "x-forwarded-proto"));
    assert_null(field(&o, "forwarded"));
    done(&o);
    /* HTTP/1.1 received: Via says 1.1 */
    run(&o, &route_all, "192.0.2.1", 0, &h);
    assert_string_equal(field(&o, "via"), "1.0 fred, 1.1 h2gate");
    done(&o);
}

/* The single-address fields origins take for the client's (X-Real-IP and its kin) and the
 * pre-RFC 7239 spellings go where the forwarding fields go: dropped from a peer that is not a
 * trusted proxy on a route that tells the origin of the client (either family), kept from a
 * trusted proxy, passed on a route that tells nothing. Names that only look alike pass. */
static void client_address_fields_from_the_connection(void **state)
{
    (void)state;
    const gw_field_t claims[] = {
        F("X-Real-IP", "6.6.6.6"),
        F("client-ip", "6.6.6.6"),
        F("X-Client-IP", "6.6.6.6"),
        F("x-forwarded", "for=6.6.6.6"),
        F("Fly-Client-IP", "6.6.6.6"),
        F("forwarded-for", "6.6.6.6"),
        F("True-Client-IP", "6.6.6.6"),
        F("CF-Connecting-IP", "6.6.6.6"),
        F("fastly-client-ip", "6.6.6.6"),
        F("X-CLUSTER-CLIENT-IP", "6.6.6.6"),
        F("x-forwarded-client-ip", "6.6.6.6"),
    };
    const size_t nclaims = sizeof(claims) / sizeof(claims[0]);
    /* same lengths and first bytes as names above, or one byte more or less */
    const gw_field_t alike[] = {
        F("x-real-ipv", "a"),    F("x-real-i", "a"),       F("x-client-id", "a"),
        F("y-real-ip", "a"),     F("sec-ch-ua", "a"),      F("if-none-match", "a"),
        F("fly-client-id", "a"), F("true-client-id", "a"), F("cf-connecting-ix", "a"),
        F("x-forwarded-", "a"),  F("x-forwardedx", "a"),
    };
    const size_t nalike = sizeof(alike) / sizeof(alike[0]);
    gw_field_t all[32];
    memcpy(all, claims, sizeof(claims));
    memcpy(all + nclaims, alike, sizeof(alike));
    static const gw_cfg_net_t nets[] = {{AF_INET, {192, 0, 2, 0}, 24}};
    gw_cfg_route_t xf = {.add_x_forwarded = 1}, fwd = {.add_forwarded = 1};
    gw_cfg_route_t append = route_all;
    append.forwarded_append = 1;
    append.trusted_proxies = nets;
    append.trusted_proxies_len = 1;
    static const struct {
        int route; /* 0 both families, 1 x_forwarded only, 2 forwarded only, 3 none, 4 append
                      with 192.0.2.0/24 trusted */
        const char *ip;
        int kept; /* the claims reach the origin */
    } cases[] = {
        {0, "198.51.100.1", 0}, {1, "198.51.100.1", 0}, {2, "198.51.100.1", 0},
        {3, "198.51.100.1", 1}, {4, "192.0.2.1", 1},    {4, "198.51.100.1", 0},
    };
    const gw_cfg_route_t *routes[] = {&route_all, &xf, &fwd, &route_none, &append};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_req_head_t h = head(GW_REQ_HTTP1, "GET", "a.test", all, nclaims + nalike);
        out_t o;
        run(&o, routes[cases[i].route], cases[i].ip, 0, &h);
        assert_int_equal(o.rv, 0);
        for (size_t k = 0; k < nclaims; k++) {
            char n[64];
            snprintf(n, sizeof(n), "%.*s", (int)claims[k].name.len,
                     (const char *)claims[k].name.base);
            const char *v = field(&o, n);
            if (!v != !cases[i].kept)
                fail_msg("case %zu: %s %s", i, n, v ? "reached the origin" : "was dropped");
        }
        for (size_t k = 0; k < nalike; k++) {
            char n[64];
            snprintf(n, sizeof(n), "%.*s", (int)alike[k].name.len,
                     (const char *)alike[k].name.base);
            if (!field(&o, n))
                fail_msg("case %zu: %s was dropped", i, n);
        }
        done(&o);
    }
}

/* RFC 9113 §8.2.3: HTTP/2 cookie fields are joined with "; " into one; HTTP/1.1 has one
 * already and passes as it came. */
static void cookies_joined_for_h2_only(void **state)
{
    (void)state;
    const gw_field_t f[] = {F("cookie", "a=1"), F("accept", "*/*"), F("cookie", "b=2")};
    gw_req_head_t h = head(GW_REQ_H2, "GET", "a.test", f, 3);
    out_t o;
    run(&o, &route_none, "192.0.2.1", 0, &h);
    assert_int_equal(o.rv, 0);
    assert_string_equal(field(&o, "cookie"), "a=1; b=2");
    done(&o);
    const gw_field_t one[] = {F("cookie", "a=1; b=2")};
    h = head(GW_REQ_HTTP1, "GET", "a.test", one, 1);
    run(&o, &route_none, "192.0.2.1", 0, &h);
    assert_string_equal(field(&o, "cookie"), "a=1; b=2");
    done(&o);
}

/* Host: from :authority; RFC 9113 §8.3.1: an HTTP/2 host field that disagrees is malformed;
 * no authority at all, or a host field standing in for it with bytes outside RFC 3986 §3.2,
 * is malformed too (a 400 upstream). The head's own authority is the front's to check
 * (gw_req_head_t; test_h2_validate, test_h1_parser): the translator takes it as it is. */
static void host_and_authority(void **state)
{
    (void)state;
    static const struct {
        gw_req_proto_t proto;
        const char *authority;
        gw_field_t host;
        int nhost;
        int rv;
        const char *want;
    } cases[] = {
        {GW_REQ_H2, "a.test", {{0}}, 0, 0, "a.test"},
        {GW_REQ_H2, "a.test", F("host", "A.TEST"), 1, 0, "a.test"},
        {GW_REQ_H2, "a.test", F("host", "b.test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "c.test:8080"), 1, 0, "c.test:8080"},
        {GW_REQ_H2, "", {{0}}, 0, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "c\".test"), 1, GW_E_PARSE, NULL},
        /* an HTTP/2 host field standing in for :authority: the same host name rule */
        {GW_REQ_H2, "", F("host", "a b.test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "user@a.test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "%61.test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "a,b.test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_H2, "", F("host", "[::1]:8443"), 1, 0, "[::1]:8443"},
        {GW_REQ_HTTP1, "", F("host", "a..test"), 1, GW_E_PARSE, NULL},
        {GW_REQ_HTTP1, "a.test", {{0}}, 0, 0, "a.test"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_req_head_t h =
            head(cases[i].proto, "GET", cases[i].authority, &cases[i].host, (size_t)cases[i].nhost);
        out_t o;
        run(&o, &route_all, "192.0.2.1", 0, &h);
        if (o.rv != cases[i].rv)
            fail_msg("case %zu: rv %d, want %d", i, o.rv, cases[i].rv);
        if (cases[i].want) {
            char got[64];
            snprintf(got, sizeof(got), "%.*s", (int)o.req.host.len, (const char *)o.req.host.base);
            assert_string_equal(got, cases[i].want);
            assert_null(field(&o, "host")); /* the back writes Host from req.host */
        }
        done(&o);
    }
}

/* Method, target, body framing, retry safety and urgency of the origin request. */
typedef struct {
    const char *method;
    int end_stream;
    int64_t cl;       /* content_length of the head */
    int64_t body_len; /* what the back is told */
    int idem;         /* RFC 9110 §9.2.2 */
} line_case_t;

static void request_line_body_and_retry_safety(void **state)
{
    (void)state;
    static const line_case_t cases[] = {
        {"GET", 1, -1, 0, 1},   {"HEAD", 1, -1, 0, 1},   {"OPTIONS", 1, -1, 0, 1},
        {"PUT", 0, 10, 10, 1},  {"DELETE", 1, -1, 0, 1}, {"TRACE", 1, -1, 0, 1},
        {"POST", 0, -1, -1, 0}, {"POST", 0, 7, 7, 0},    {"POST", 0, 0, 0, 0},
        {"PATCH", 1, -1, 0, 0}, {"get", 1, -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_req_head_t h = head(GW_REQ_H2, cases[i].method, "a.test", NULL, 0);
        h.end_stream = cases[i].end_stream;
        h.content_length = cases[i].cl;
        out_t o;
        run(&o, &route_none, "192.0.2.1", 0, &h);
        assert_int_equal(o.rv, 0);
        if (o.req.body_len != cases[i].body_len || o.req.idempotent != cases[i].idem)
            fail_msg("case %zu (%s): body_len %lld idempotent %d", i, cases[i].method,
                     (long long)o.req.body_len, o.req.idempotent);
        assert_true(gw_slice_eq(o.req.method, gw_slice_str(cases[i].method)));
        assert_true(gw_slice_eq(o.req.target, GW_SLICE_LIT("/a?b")));
        assert_int_equal(o.req.urgency, 5);
        done(&o);
    }
}

/* Requests larger than the stack scratch (32 fields, 4 KiB) translate the same, on the heap. */
static void large_request_on_the_heap(void **state)
{
    (void)state;
    gw_field_t f[200];
    char names[200][16];
    static char big[3000];
    memset(big, 'v', sizeof(big) - 1);
    for (int i = 0; i < 200; i++) {
        snprintf(names[i], sizeof(names[i]), "x-f%d", i);
        f[i] = (gw_field_t){gw_slice_str(names[i]), i == 7 ? gw_slice_str(big) : GW_SLICE_LIT("1")};
    }
    gw_req_head_t h = head(GW_REQ_H2, "GET", "a.test", f, 200);
    out_t o;
    run(&o, &route_all, "192.0.2.1", 0, &h);
    assert_int_equal(o.rv, 0);
    assert_true(o.x.f != o.x.fst);
    assert_int_equal(o.req.fields_len, 200 + 4);
    assert_string_equal(field(&o, "x-f199"), "1");
    assert_int_equal(strlen(field(&o, "x-f7")), sizeof(big) - 1);
    assert_string_equal(field(&o, "x-forwarded-for"), "192.0.2.1");
    done(&o);
}

/* RFC 9110 §6.5.1: trailers that frame, route, authenticate or describe the content are not
 * forwarded, nor are connection-specific fields; the rest are. */
/* RFC 9440: the client's Client-Cert and Client-Cert-Chain never reach the origin, whatever the
 * route, with or without a certificate on the connection (in any case of the name); the
 * connection's verified certificate goes as Client-Cert, and its chain only when the route
 * says client_cert_chain. Nor do they pass as trailers. */
static void client_cert_fields_from_the_connection(void **state)
{
    (void)state;
    const gw_field_t in[] = {F("Client-Cert", ":Zm9yZ2Vk:"), F("x-a", "1"),
                             F("client-cert-chain", ":Zm9yZ2Vk:"), F("CLIENT-CERT", ":YQ==:")};
    gw_req_head_t h = head(GW_REQ_H2, "GET", "example.com", in, 4);
    const gw_cfg_route_t chain = {.client_cert_chain = 1};
    const gw_cfg_route_t *routes[] = {&route_all, &route_none, &chain};
    for (size_t i = 0; i < 3; i++) {
        out_t o;
        run(&o, routes[i], "10.0.0.1", 1, &h);
        assert_int_equal(o.rv, 0);
        assert_null(field(&o, "client-cert"));
        assert_null(field(&o, "client-cert-chain"));
        assert_string_equal(field(&o, "x-a"), "1");
        done(&o);
    }
    static struct sockaddr_in sin = {.sin_family = AF_INET};
    gw_cstream_t s = {.peer = "peer",
                      .peer_ip = "10.0.0.1",
                      .addr = (struct sockaddr *)&sin,
                      .tls = 1,
                      .tls_client_verify = "SUCCESS",
                      .tls_client_subject = "CN=a",
                      .tls_client_cert = GW_SLICE_LIT(":bGVhZg==:"),
                      .tls_client_cert_chain = GW_SLICE_LIT(":aW50ZXI=:, :bWlk:")};
    for (size_t i = 0; i < 3; i++) {
        out_t o;
        memset(&o.x, 0, sizeof(o.x));
        o.rv = gw_proxy__translate(routes[i], &s, &h, 3, &o.x, &o.req);
        assert_int_equal(o.rv, 0);
        assert_string_equal(field(&o, "client-cert"), ":bGVhZg==:");
        if (routes[i] == &chain)
            assert_string_equal(field(&o, "client-cert-chain"), ":aW50ZXI=:, :bWlk:");
        else
            assert_null(field(&o, "client-cert-chain"));
        done(&o);
    }
    gw_field_t out[4];
    assert_int_equal(gw_proxy__req_trailers(in, 4, out), 1);
    assert_true(gw_slice_eq(out[0].name, GW_SLICE_LIT("x-a")));
}

static void request_trailers_filtered(void **state)
{
    (void)state;
    const gw_field_t in[] = {F("x-checksum", "abc"),
                             F("host", "evil.test"),
                             F("content-length", "9"),
                             F("authorization", "Bearer x"),
                             F("cookie", "a=1"),
                             F("x-forwarded-for", "10.0.0.1"),
                             F("connection", "x-other"),
                             F("x-other", "named"),
                             F("te", "trailers"),
                             F("server-timing", "db;dur=5"),
                             F("priority", "u=0"),
                             F("content-type", "text/plain"),
                             F("forwarded", "for=6.6.6.6"),
                             F("x-forwarded-ssl", "on"),
                             F("X-Real-IP", "6.6.6.6"),
                             F("true-client-ip", "6.6.6.6"),
                             F("client-ip", "6.6.6.6")};
    gw_field_t out[17];
    size_t k = gw_proxy__req_trailers(in, 17, out);
    assert_int_equal(k, 2);
    assert_true(gw_slice_eq(out[0].name, GW_SLICE_LIT("x-checksum")));
    assert_true(gw_slice_eq(out[1].name, GW_SLICE_LIT("server-timing")));
}

/* The origin's response fields as the client gets them: connection-specific fields and those
 * its Connection names removed, names lowercased, content-length taken out (an out-of-range
 * value is unknown, never wrapped), Via appended only when asked and the route adds it. */
static void response_fields(void **state)
{
    (void)state;
    const gw_field_t in[] = {F("Content-Type", "text/html"),
                             F("Connection", "close, X-Hop"),
                             F("X-Hop", "1"),
                             F("Keep-Alive", "timeout=5"),
                             F("Transfer-Encoding", "chunked"),
                             F("Content-Length", "42"),
                             F("Set-Cookie", "a=1"),
                             F("Set-Cookie", "b=2")};
    gw_field_t out[GW_PROXY_MAX_RESP_FIELDS];
    char lower[256];
    int64_t cl;
    size_t k = gw_proxy__resp_fields(&route_all, in, 8, out, lower, sizeof(lower), &cl, 1);
    assert_int_equal(cl, 42);
    assert_int_equal(k, 4);
    assert_true(gw_slice_eq(out[0].name, GW_SLICE_LIT("content-type")));
    assert_true(gw_slice_eq(out[1].name, GW_SLICE_LIT("set-cookie")));
    assert_true(gw_slice_eq(out[2].value, GW_SLICE_LIT("b=2")));
    assert_true(gw_slice_eq(out[3].name, GW_SLICE_LIT("via")));
    assert_true(gw_slice_eq(out[3].value, GW_SLICE_LIT("1.1 h2gate")));
    /* no Via on interim heads and trailers (via = 0), nor on a route without it */
    assert_int_equal(gw_proxy__resp_fields(&route_all, in, 8, out, lower, sizeof(lower), &cl, 0),
                     3);
    assert_int_equal(gw_proxy__resp_fields(&route_none, in, 8, out, lower, sizeof(lower), &cl, 1),
                     3);
    static const struct {
        const char *v;
        int64_t cl;
    } lens[] = {{"0", 0},
                {"9223372036854775807", INT64_MAX},
                {"9223372036854775808", -1},
                {"99999999999999999999999", -1}};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        gw_field_t one = {GW_SLICE_LIT("content-length"), gw_slice_str(lens[i].v)};
        assert_int_equal(
            gw_proxy__resp_fields(&route_none, &one, 1, out, lower, sizeof(lower), &cl, 0), 0);
        if (cl != lens[i].cl)
            fail_msg("content-length %s: %lld", lens[i].v, (long long)cl);
    }
    gw_proxy__resp_fields(&route_none, in, 1, out, lower, sizeof(lower), &cl, 0);
    assert_int_equal(cl, -1); /* none */
}

static void proto_names(void **state)
{
    (void)state;
    assert_string_equal(gw_req_proto_str(GW_REQ_H2), "h2");
    assert_string_equal(gw_req_proto_str(GW_REQ_HTTP1), "http/1.1");
}

/* strip_prefix cuts whole segments unless the prefix ends with '/'; what stays is a path. */
static void strip_prefix_table(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *path, *want; /* want NULL: not cut */
    } t[] = {
        {"/api", "/api", "/"},     {"/api", "/api?q=1", "/?q=1"}, {"/api", "/api/x?q", "/x?q"},
        {"/api", "/apix", NULL},   {"/api", "/ap", NULL},         {"/api", "/other/api", NULL},
        {"/api/", "/api/x", "/x"}, {"/api/", "/api/", "/"},       {"/api/", "/api", NULL},
        {"/a/b", "/a/b/c", "/c"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        gw_slice_t rest;
        int rv = gw_proxy__strip_prefix(t[i].prefix, gw_slice_str(t[i].path), &rest);
        if (!t[i].want) {
            assert_int_equal(rv, -1);
            continue;
        }
        char got[64];
        snprintf(got, sizeof(got), "%s%.*s", rv == 1 ? "/" : "", (int)rest.len,
                 (const char *)rest.base);
        assert_string_equal(got, t[i].want);
    }
}

static gw_tmpl_t *tmpl(const char *s)
{
    gw_tmpl_t *t;
    const char *why;
    size_t at;
    assert_int_equal(
        gw_tmpl_compile(s, strlen(s), GW_TMPL_HEADER_VARS, GW_TMPL_F_FIELD, &t, &why, &at), 0);
    return t;
}

/* Request rules come after the forwarding fields: a set replaces ours and the client's, a
 * remove drops them, the top level's go first; values larger than the on-stack scratch space
 * still fit (the room is counted before anything is written). strip_prefix and origin_host
 * change the target and the Host; X-Forwarded-Host keeps the client's host. */
static void request_rules_after_forwarding(void **state)
{
    (void)state;
    static char big[3000]; /* with the rest, past GW_PROXY_XLATE_BYTES */
    memset(big, 'v', sizeof(big) - 1);
    gw_cfg_hdr_t top_set[] = {{"x-top", tmpl("top")}, {"x-both", tmpl("top")}};
    gw_cfg_hdr_rules_t top = {.set = top_set, .set_len = 2};
    gw_cfg_hdr_t set[] = {{"x-forwarded-for", tmpl("$client_addr;$scheme")},
                          {"x-both", tmpl("route")}};
    gw_cfg_hdr_t add[] = {{"x-big", tmpl(big)}, {"x-host", tmpl("[$host]")}};
    char *rm[] = {"via", "x-secret"};
    gw_cfg_route_t r = route_all;
    r.request_headers = (gw_cfg_hdr_rules_t){
        .set = set, .set_len = 2, .add = add, .add_len = 2, .remove = rm, .remove_len = 2};
    r.top_request_headers = &top;
    r.strip_prefix = "/a";
    r.origin_host = "backend:81";
    const gw_field_t f[] = {F("x-forwarded-for", "6.6.6.6"), F("x-secret", "s"),
                            F("x-both", "client"), F("x-keep", "k")};
    gw_req_head_t h = head(GW_REQ_HTTP1, "GET", "example.com", f, 4);
    out_t o;
    run(&o, &r, "192.0.2.1", 1, &h);
    assert_int_equal(o.rv, 0);
    assert_string_equal(field(&o, "x-forwarded-for"), "192.0.2.1;https");
    assert_null(field(&o, "x-secret"));
    assert_null(field(&o, "via"));
    assert_string_equal(field(&o, "x-top"), "top");
    assert_string_equal(field(&o, "x-both"), "route");
    assert_string_equal(field(&o, "x-keep"), "k");
    assert_string_equal(field(&o, "x-big"), big);
    assert_string_equal(field(&o, "x-host"), "[example.com]");
    assert_string_equal(field(&o, "x-forwarded-host"), "example.com");
    assert_true(gw_slice_eq(o.req.target, GW_SLICE_LIT("/?b")));
    assert_true(gw_slice_eq(o.req.host, GW_SLICE_LIT("backend:81")));
    done(&o);
    /* a host $host could not carry is no authority (the fronts' rule, http/http.h): an
     * HTTP/2 host field standing in for :authority is never sent on with $host left empty */
    const gw_field_t hf[] = {F("host", "a!b")};
    h = head(GW_REQ_H2, "GET", "", hf, 1);
    run(&o, &r, "192.0.2.1", 0, &h);
    assert_int_equal(o.rv, GW_E_PARSE);
    done(&o);
    gw_tmpl_del(top_set[0].value);
    gw_tmpl_del(top_set[1].value);
    gw_tmpl_del(set[0].value);
    gw_tmpl_del(set[1].value);
    gw_tmpl_del(add[0].value);
    gw_tmpl_del(add[1].value);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(connection_specific_fields_dropped),
    cmocka_unit_test(forwarding_fields_from_the_connection),
    cmocka_unit_test(client_address_fields_from_the_connection),
    cmocka_unit_test(cookies_joined_for_h2_only),
    cmocka_unit_test(host_and_authority),
    cmocka_unit_test(request_line_body_and_retry_safety),
    cmocka_unit_test(large_request_on_the_heap),
    cmocka_unit_test(request_trailers_filtered),
    cmocka_unit_test(client_cert_fields_from_the_connection),
    cmocka_unit_test(response_fields),
    cmocka_unit_test(proto_names),
    cmocka_unit_test(strip_prefix_table),
    cmocka_unit_test(request_rules_after_forwarding),
};

GW_TEST_MAIN(tests)
