/* Unit tests of proxy/hints.c: which requests are navigations, which Link values are learned
 * (rel lists, commas inside targets and quoted strings), which answers are never learned, the
 * 103 a navigation then gets (configured first, learned without duplicates), and which Link
 * targets a route with push promises (same origin, rel=preload, no nopush) with which
 * request. */
#define GW_PROXY_TEST_FIXTURE
#include "proxy_test_util.h"

#include "common/err.h"

static const char *yaml = "listen: [{address: 127.0.0.1:8080}]\n"
                          "upstreams:\n"
                          "  app: {servers: [127.0.0.1:9001]}\n"
                          "routes:\n"
                          "  - {host: '*', path: /, upstream: app, early_hints_learn: true,\n"
                          "     early_hints: ['</conf.css>; rel=preload; as=style'], push: true}\n";

/* A client stream that records the 103 it is sent. */
static char got[4096];
static size_t got_n;

static int f_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    (void)s;
    assert_int_equal(status, 103);
    got_n = n;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(got + k, sizeof(got) - k, "%.*s|", (int)f[i].value.len,
                              (const char *)f[i].value.base);
    return 0;
}

/* A push op that records the promised requests and answers from a script of return codes. */
static char pushed[4096];
static size_t pushed_k;
static int push_rc[16];
static size_t push_calls;

static int f_push(gw_cstream_t *s, const gw_req_head_t *r)
{
    (void)s;
    assert_true(r->pushed && r->end_stream && r->proto == GW_REQ_H2);
    pushed_k += (size_t)snprintf(
        pushed + pushed_k, sizeof(pushed) - pushed_k, "%.*s %.*s %.*s %.*s", (int)r->method.len,
        (const char *)r->method.base, (int)r->scheme.len, (const char *)r->scheme.base,
        (int)r->authority.len, (const char *)r->authority.base, (int)r->path.len,
        (const char *)r->path.base);
    for (size_t i = 0; i < r->fields_len; i++)
        pushed_k +=
            (size_t)snprintf(pushed + pushed_k, sizeof(pushed) - pushed_k, " %.*s=%.*s",
                             (int)r->fields[i].name.len, (const char *)r->fields[i].name.base,
                             (int)r->fields[i].value.len, (const char *)r->fields[i].value.base);
    pushed_k += (size_t)snprintf(pushed + pushed_k, sizeof(pushed) - pushed_k, "|");
    return push_rc[push_calls++ % 16];
}

static const gw_cstream_ops_t fops = {.interim = f_interim, .push = f_push};

static gw_req_head_t req(const char *path, const gw_field_t *f, size_t n)
{
    return test_req(GW_REQ_H2, "GET", "Shop.Test", path, f, n);
}

static void navigation(void **state)
{
    (void)state;
    gw_field_t nav[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")}};
    gw_field_t cors[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("cors")},
                         {GW_SLICE_LIT("accept"), GW_SLICE_LIT("text/html")}};
    gw_field_t html[] = {{GW_SLICE_LIT("accept"), GW_SLICE_LIT("application/xhtml+xml,TEXT/HTML")}};
    gw_field_t img[] = {{GW_SLICE_LIT("accept"), GW_SLICE_LIT("image/avif")}};
    gw_req_head_t h = req("/", nav, 1);
    assert_true(gw_proxy__is_navigation(&h));
    h = req("/", cors, 2);
    assert_false(gw_proxy__is_navigation(&h)); /* Fetch Metadata says what it is */
    h = req("/", html, 1);
    assert_true(gw_proxy__is_navigation(&h));
    h = req("/", img, 1);
    assert_false(gw_proxy__is_navigation(&h));
    h = req("/", nav, 1);
    h.method = GW_SLICE_LIT("POST");
    assert_false(gw_proxy__is_navigation(&h));
}

static void learn_and_send(void **state)
{
    (void)state;
    const gw_cfg_route_t *r = &cfg->routes[0];
    gw_field_t nav[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")}};
    gw_field_t resp[] = {
        {GW_SLICE_LIT("Link"),
         GW_SLICE_LIT("</a,b.css>; rel=preload; as=style, "
                      "</x.js>; rel=\"prefetch\", "
                      "</m.js>; rel=\"modulepreload preload\"; title=\"a, b\"")},
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("<https://cdn.test>; rel=preconnect")},
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("</conf.css>; rel=preload; as=style")},
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("</next>; rel=next")},
    };
    gw_req_head_t h = req("/page?q=1", nav, 1);
    gw_cstream_t s = {.ops = &fops, .peer = "t", .tls = 1};
    /* nothing learned yet: the configured hint only */
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|");
    gw_proxy__hints_learn(px, r, 1, &h, 200, resp, 4);
    /* the same page (authority in other case): configured, then learned, the duplicate once;
     * prefetch and next are not preload-like */
    gw_req_head_t h2 = req("/page?q=1", nav, 1);
    h2.authority = GW_SLICE_LIT("shop.test");
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h2), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|"
                             "</a,b.css>; rel=preload; as=style|"
                             "</m.js>; rel=\"modulepreload preload\"; title=\"a, b\"|"
                             "<https://cdn.test>; rel=preconnect|");
    /* another query, the same page over cleartext: other pages, nothing learned for them */
    gw_req_head_t q2 = req("/page?q=2", nav, 1), q0 = req("/page", nav, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &q2), 1);
    assert_int_equal(got_n, 1);
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &q0), 1);
    assert_int_equal(got_n, 1);
    gw_cstream_t plain = s;
    plain.tls = 0;
    assert_int_equal(gw_proxy__hints_send(px, &plain, r, &h), 1);
    assert_int_equal(got_n, 1);
    /* answers that must never be learned replace nothing either */
    gw_field_t priv[] = {{GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=0, PRIVATE")},
                         {GW_SLICE_LIT("link"), GW_SLICE_LIT("</secret.css>; rel=preload")}};
    gw_req_head_t other = req("/other", nav, 1);
    gw_proxy__hints_learn(px, r, 1, &other, 200, priv, 2);
    gw_field_t ck[] = {{GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("a=b")},
                       {GW_SLICE_LIT("link"), GW_SLICE_LIT("</secret.css>; rel=preload")}};
    gw_proxy__hints_learn(px, r, 1, &other, 200, ck, 2);
    gw_field_t cookie[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")},
                           {GW_SLICE_LIT("cookie"), GW_SLICE_LIT("sid=1")}};
    gw_req_head_t withc = req("/other", cookie, 2);
    gw_proxy__hints_learn(px, r, 1, &withc, 200, &priv[1], 1);
    gw_proxy__hints_learn(px, r, 1, &other, 404, &priv[1], 1); /* not a 2xx */
    /* an answer that varies on a field outside the key (RFC 9111 §4.1), or may not be
     * reused without validation (§5.2.2.4) */
    gw_field_t vary[] = {{GW_SLICE_LIT("vary"), GW_SLICE_LIT("Accept-Encoding, Accept-Language")},
                         {GW_SLICE_LIT("link"), GW_SLICE_LIT("</fr.css>; rel=preload")}};
    gw_proxy__hints_learn(px, r, 1, &other, 200, vary, 2);
    gw_field_t nocache[] = {{GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("no-cache")},
                            {GW_SLICE_LIT("link"), GW_SLICE_LIT("</fr.css>; rel=preload")}};
    gw_proxy__hints_learn(px, r, 1, &other, 200, nocache, 2);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &other), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|");
    /* Vary: Accept-Encoding alone is learned */
    vary[0].value = GW_SLICE_LIT("accept-encoding");
    gw_proxy__hints_learn(px, r, 1, &other, 200, vary, 2);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &other), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|</fr.css>; rel=preload|");
    /* a 2xx without preload links forgets the page */
    gw_proxy__hints_learn(px, r, 1, &h, 200, &resp[3], 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h2), 1);
    assert_int_equal(got_n, 1);
}

/* A link whose target repeats a name or a value of the request's query (as sent or decoded,
 * in any case) is not learned; the others are. */
static void learn_not_the_query(void **state)
{
    (void)state;
    const gw_cfg_route_t *r = &cfg->routes[0];
    gw_field_t nav[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")}};
    gw_field_t resp[] = {{GW_SLICE_LIT("link"), GW_SLICE_LIT("</api?token=S3CRET>; rel=preload, "
                                                             "</u/s3cret.css>; rel=preload, "
                                                             "</a%2Fb.js>; rel=preload, "
                                                             "</evil.js>; rel=preload, "
                                                             "</tracking/data.json>; rel=preload, "
                                                             "</site.css>; rel=preload")}};
    gw_req_head_t h = req("/q?token=S3CRET&x=a/b&u=%2Fevil%2Ejs&sessionid&utm+name=", nav, 1);
    gw_cstream_t s = {.ops = &fops, .peer = "t", .tls = 1};
    gw_proxy__hints_learn(px, r, 1, &h, 200, resp, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h), 1);
    /* S3CRET (value, any case), a/b (decoded in the target), /evil.js (decoded in the
     * query), tracking/data.json... holds no name or value: learned, as site.css */
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|"
                             "</tracking/data.json>; rel=preload|</site.css>; rel=preload|");
    /* a name without a value counts too */
    gw_req_head_t h2 = req("/q2?data", nav, 1);
    gw_proxy__hints_learn(px, r, 1, &h2, 200, resp, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h2), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|</api?token=S3CRET>; rel=preload|"
                             "</u/s3cret.css>; rel=preload|</a%2Fb.js>; rel=preload|"
                             "</evil.js>; rel=preload|</site.css>; rel=preload|");
    /* 32 parameters are searched for; a page with a 33rd is not learned at all */
    char path[512];
    size_t k = (size_t)snprintf(path, sizeof(path), "/many?p0=0");
    for (int i = 1; i < 32; i++)
        k += (size_t)snprintf(path + k, sizeof(path) - k, "&p%d=%d", i, i);
    gw_req_head_t h32 = req(path, nav, 1);
    gw_proxy__hints_learn(px, r, 1, &h32, 200, resp, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h32), 1);
    /* conf.css, and the targets without a digit or a 'p': evil.js, tracking/data.json,
     * site.css */
    assert_int_equal(got_n, 4);
    snprintf(path + k, sizeof(path) - k, "&p32=32");
    gw_req_head_t h33 = req(path, nav, 1);
    gw_proxy__hints_learn(px, r, 1, &h33, 200, resp, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &h33), 1);
    assert_int_equal(got_n, 1);
}

/* RFC 9111 §3.5 with early_hints_learn_private: a page learned from a request with
 * credentials is hinted only to requests with credentials, and only when the answer says
 * public, s-maxage or must-revalidate; anonymous requests never get it. */
static void learn_private_keyed_on_credentials(void **state)
{
    (void)state;
    gw_cfg_route_t pr = cfg->routes[0];
    pr.early_hints_learn_private = 1;
    pr.early_hints_len = 0;
    /* hints_send finds the route's index from its address: use the config's own slot */
    gw_cfg_route_t saved = cfg->routes[0];
    cfg->routes[0] = pr;
    const gw_cfg_route_t *r = &cfg->routes[0];
    gw_field_t alice[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")},
                          {GW_SLICE_LIT("cookie"), GW_SLICE_LIT("sid=alice")}};
    gw_field_t bob[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")},
                        {GW_SLICE_LIT("authorization"), GW_SLICE_LIT("Bearer bob")}};
    gw_field_t anon[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")}};
    gw_field_t plain[] = {{GW_SLICE_LIT("link"), GW_SLICE_LIT("</inbox.css>; rel=preload")}};
    gw_field_t pub[] = {{GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("public, max-age=60")},
                        {GW_SLICE_LIT("link"), GW_SLICE_LIT("</inbox.css>; rel=preload")}};
    gw_req_head_t ha = req("/inbox", alice, 2), hb = req("/inbox", bob, 2),
                  hn = req("/inbox", anon, 1);
    gw_cstream_t s = {.ops = &fops, .peer = "t", .tls = 1};
    gw_proxy__hints_learn(px, r, 1, &ha, 200, plain, 1); /* §3.5: not without public */
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &hb), 0);
    gw_proxy__hints_learn(px, r, 1, &ha, 200, pub, 2);
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &hn), 0); /* anonymous: another key */
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, r, &hb), 1);
    assert_string_equal(got, "</inbox.css>; rel=preload|");
    cfg->routes[0] = saved;
    /* without early_hints_learn_private, a request with credentials gets what anonymous
     * answers taught (nothing personal in it): the same key */
    gw_field_t pub2[] = {{GW_SLICE_LIT("link"), GW_SLICE_LIT("</public.css>; rel=preload")}};
    gw_req_head_t hn2 = req("/news", anon, 1), ha2 = req("/news", alice, 2);
    gw_proxy__hints_learn(px, &cfg->routes[0], 1, &hn2, 200, pub2, 1);
    got_n = 0;
    assert_int_equal(gw_proxy__hints_send(px, &s, &cfg->routes[0], &ha2), 1);
    assert_string_equal(got, "</conf.css>; rel=preload; as=style|</public.css>; rel=preload|");
}

/* One page per origin server whatever the spelling of its authority (RFC 3986 §6.2.2-6.2.3,
 * RFC 4291 §2.2): the host without case, an IPv6 address as RFC 5952 writes it, the
 * listener's default port dropped; an authority that holds no literal (the fronts refuse it)
 * is keyed as written. */
static void learn_one_page_per_origin(void **state)
{
    (void)state;
    const gw_cfg_route_t *r = &cfg->routes[0];
    gw_field_t nav[] = {{GW_SLICE_LIT("sec-fetch-mode"), GW_SLICE_LIT("navigate")}};
    gw_field_t resp[] = {{GW_SLICE_LIT("link"), GW_SLICE_LIT("</v6.css>; rel=preload")}};
    gw_cstream_t s = {.ops = &fops, .peer = "t", .tls = 1};
    static const struct {
        const char *learned, *asked;
        size_t links; /* in the 103: the configured one, and the learned one if the same page */
    } v[] = {
        {"[::1]", "[0:0::0001]:443", 2},
        {"[::1]", "[::1]:0443", 2},
        {"[2001:DB8::AB]", "[2001:db8:0::ab]", 2},
        {"[::1]", "[::1]:80", 1}, /* not https's default port */
        {"[::1]", "[::2]", 1},
        {"[ZZ]:443", "[zz]:443", 2},
        {"[zz]:443", "[zz]", 1},
        {"[::1]x", "[::1]", 1},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char path[32];
        snprintf(path, sizeof(path), "/v6/%zu", i);
        gw_req_head_t a = req(path, nav, 1), b = req(path, nav, 1);
        a.authority = gw_slice_str(v[i].learned);
        b.authority = gw_slice_str(v[i].asked);
        gw_proxy__hints_learn(px, r, 1, &a, 200, resp, 1);
        got_n = 0;
        assert_int_equal(gw_proxy__hints_send(px, &s, r, &b), 1);
        assert_int_equal(got_n, v[i].links);
    }
}

/* RFC 8297: the origin's 103 keeps its Link fields and the policies that bound them, nothing
 * else; without a Link there is nothing to send. */
static void hint_fields(void **state)
{
    (void)state;
    gw_field_t f[] = {{GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("sid=alice")},
                      {GW_SLICE_LIT("link"), GW_SLICE_LIT("</a.css>; rel=preload")},
                      {GW_SLICE_LIT("x-user"), GW_SLICE_LIT("alice")},
                      {GW_SLICE_LIT("content-security-policy"), GW_SLICE_LIT("default-src 'self'")},
                      {GW_SLICE_LIT("link"), GW_SLICE_LIT("</b.js>; rel=preload")}};
    assert_int_equal(gw_proxy__hint_fields(f, 5), 3);
    assert_true(gw_proxy__name_is(f[0].name, "link"));
    assert_true(gw_proxy__name_is(f[1].name, "content-security-policy"));
    assert_true(gw_slice_eq(f[2].value, GW_SLICE_LIT("</b.js>; rel=preload")));
    gw_field_t g[] = {{GW_SLICE_LIT("referrer-policy"), GW_SLICE_LIT("no-referrer")},
                      {GW_SLICE_LIT("set-cookie"), GW_SLICE_LIT("a=b")}};
    assert_int_equal(gw_proxy__hint_fields(g, 2), 0);
}

static void push_targets(void **state)
{
    (void)state;
    const gw_cfg_route_t *r = &cfg->routes[0];
    gw_field_t fields[] = {{GW_SLICE_LIT("accept"), GW_SLICE_LIT("text/html")},
                           {GW_SLICE_LIT("cookie"), GW_SLICE_LIT("id=1")},
                           {GW_SLICE_LIT("user-agent"), GW_SLICE_LIT("UA")},
                           {GW_SLICE_LIT("accept-encoding"), GW_SLICE_LIT("gzip")},
                           {GW_SLICE_LIT("accept-language"), GW_SLICE_LIT("de")}};
    gw_field_t resp[] = {
        {GW_SLICE_LIT("Link"),
         GW_SLICE_LIT("</a.css>; rel=preload; as=style, </b.js>; rel=preload; nopush, "
                      "</c.mjs>; rel=modulepreload, <d.css>; rel=preload, "
                      "<//SHOP.test/e.css?v=1#top>; rel=\"stylesheet preload\"")},
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("<https://shop.test/f.css>; rel=preload, "
                                            "<http://shop.test/g.css>; rel=preload, "
                                            "<https://cdn.test/h.css>; rel=preload, "
                                            "<https://shop.test>; rel=preload, "
                                            "</sp ace.css>; rel=preload")},
        {GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/html")},
    };
    gw_req_head_t h = req("/page", fields, 5);
    gw_cstream_t s = {.ops = &fops, .peer = "t"};
    memset(push_rc, 0, sizeof(push_rc));
    pushed_k = push_calls = 0;
    pushed[0] = 0;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h, 200, resp, 3), 3);
    assert_string_equal(pushed, "GET https Shop.Test /a.css accept=text/html user-agent=UA "
                                "accept-encoding=gzip accept-language=de|"
                                "GET https Shop.Test /e.css?v=1 accept=text/html user-agent=UA "
                                "accept-encoding=gzip accept-language=de|"
                                "GET https Shop.Test /f.css accept=text/html user-agent=UA "
                                "accept-encoding=gzip accept-language=de|");
    /* not a 2xx, not GET, a pushed request, HTTP/1.1, the listener's no_push: nothing */
    pushed_k = push_calls = 0;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h, 404, resp, 3), 0);
    gw_req_head_t head = h;
    head.method = GW_SLICE_LIT("HEAD");
    assert_int_equal(gw_proxy__push_links(px, &s, r, &head, 200, resp, 3), 0);
    gw_req_head_t p = h;
    p.pushed = 1;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &p, 200, resp, 3), 0);
    gw_req_head_t h1 = h;
    h1.proto = GW_REQ_HTTP1;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h1, 200, resp, 3), 0);
    gw_cstream_t off = s;
    off.no_push = 1;
    assert_int_equal(gw_proxy__push_links(px, &off, r, &h, 200, resp, 3), 0);
    assert_int_equal(push_calls, 0);
    /* a duplicate lets the next link through; a limit stops the answer's other links */
    gw_proxy_hint_stats_t before, after;
    gw_proxy_hint_stats(px, &before);
    push_rc[0] = GW_E_EXIST;
    push_rc[1] = GW_E_LIMIT;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h, 200, resp, 3), 0);
    assert_int_equal(push_calls, 2);
    gw_proxy_hint_stats(px, &after);
    assert_int_equal(after.push_duplicate - before.push_duplicate, 1);
    assert_int_equal(after.push_limit - before.push_limit, 1);
    /* the client disabled push: the first refusal ends it */
    push_calls = 0;
    push_rc[0] = GW_E_UNSUPPORTED;
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h, 200, resp, 3), 0);
    assert_int_equal(push_calls, 1);
    /* the page's authority, read once for all its links: an IPv6 one in any spelling, with
     * https's default port or without (RFC 3986 §6.2.3, RFC 4291 §2.2) */
    gw_field_t v6[] = {
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("<https://[0:0::1]:443/a.css>; rel=preload, "
                                            "<//[::0001]/b.css>; rel=preload, "
                                            "<https://[::1]:8443/c.css>; rel=preload, "
                                            "<https://[::2]/d.css>; rel=preload, "
                                            "</e.css>; rel=preload")}};
    memset(push_rc, 0, sizeof(push_rc));
    pushed_k = push_calls = 0;
    pushed[0] = 0;
    gw_req_head_t h6 = test_req(GW_REQ_H2, "GET", "[::1]", "/page", NULL, 0);
    assert_int_equal(gw_proxy__push_links(px, &s, r, &h6, 200, v6, 1), 3);
    assert_string_equal(pushed, "GET https [::1] /a.css|GET https [::1] /b.css|"
                                "GET https [::1] /e.css|");
    /* a page's authority that is none (the fronts refuse it): absolute paths only */
    pushed_k = push_calls = 0;
    pushed[0] = 0;
    gw_field_t zz[] = {{GW_SLICE_LIT("link"), GW_SLICE_LIT("<https://[zz]/a.css>; rel=preload, "
                                                           "<//[zz]/b.css>; rel=preload, "
                                                           "</c.css>; rel=preload")}};
    gw_req_head_t hz = test_req(GW_REQ_H2, "GET", "[zz]", "/page", NULL, 0);
    assert_int_equal(gw_proxy__push_links(px, &s, r, &hz, 200, zz, 1), 1);
    assert_string_equal(pushed, "GET https [zz] /c.css|");
}

/* The rel bits of one link-value (RFC 8288 §3): parameters split at ";" outside quoted
 * strings, "=" with optional whitespace around it, rel a space-separated list. */
static void link_rels(void **state)
{
    (void)state;
    struct {
        const char *v;
        unsigned want;
    } cases[] = {
        {"</a.css>; rel=preload", GW_PROXY_LINK_PRELOAD},
        {"</a.css>;rel=\"preload  modulepreload\"",
         GW_PROXY_LINK_PRELOAD | GW_PROXY_LINK_MODULEPRELOAD},
        {"</a.css>; REL = Preconnect", GW_PROXY_LINK_PRECONNECT},
        {"</a.css>; rel=preload; nopush", GW_PROXY_LINK_PRELOAD | GW_PROXY_LINK_NOPUSH},
        {"</a;b.css>; rel=preload", GW_PROXY_LINK_PRELOAD},
        /* a quoted ";" does not start a parameter: the title is one value */
        {"</a.css>; title=\"x;rel=preload;y\"", 0},
        {"</a.css>; title=\"x;nopush\"; rel=preconnect", GW_PROXY_LINK_PRECONNECT},
        {"</a.css>; rel=prefetch", 0},
        {"</a.css>", 0},
        {"/a.css; rel=preload", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned bits = gw_proxy__link_rels(gw_slice_str(cases[i].v));
        if (bits != cases[i].want)
            fail_msg("%s: %u, want %u", cases[i].v, bits, cases[i].want);
    }
    /* the link-values of two Link fields, in order: a comma in a <target> or a quoted string
     * does not end one */
    gw_field_t f[] = {
        {GW_SLICE_LIT("link"), GW_SLICE_LIT("</a,b.css>; rel=preload, , </c.js>; title=\"1,2\"; "
                                            "rel=modulepreload")},
        {GW_SLICE_LIT("vary"), GW_SLICE_LIT("accept")},
        {GW_SLICE_LIT("Link"), GW_SLICE_LIT("<https://cdn.example>; rel=preconnect")},
    };
    gw_proxy__link_iter_t it = {.f = f, .n = 3};
    const char *want[] = {"</a,b.css>; rel=preload", "</c.js>; title=\"1,2\"; rel=modulepreload",
                          "<https://cdn.example>; rel=preconnect"};
    unsigned want_rels[] = {GW_PROXY_LINK_PRELOAD, GW_PROXY_LINK_MODULEPRELOAD,
                            GW_PROXY_LINK_PRECONNECT};
    unsigned rels;
    for (size_t i = 0; i < 3; i++) {
        gw_slice_t v = gw_proxy__link_next(&it, &rels);
        assert_true(gw_slice_eq(v, gw_slice_str(want[i])));
        assert_int_equal(rels, want_rels[i]);
    }
    assert_null(gw_proxy__link_next(&it, &rels).base);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(navigation),
    cmocka_unit_test(learn_and_send),
    cmocka_unit_test(learn_not_the_query),
    cmocka_unit_test(learn_private_keyed_on_credentials),
    cmocka_unit_test(learn_one_page_per_origin),
    cmocka_unit_test(hint_fields),
    cmocka_unit_test(push_targets),
    cmocka_unit_test(link_rels),
};

GW_TEST_MAIN_GROUP(tests, setup, teardown)
