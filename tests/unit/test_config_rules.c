/* Unit tests of config/template.c (compile, expand, the host rule) and config/rules.c (header
 * rules, hsts, origin_host, strip_prefix, redirect, respond, redirect_https): what loads, and
 * every load error with its FILE:LINE:COL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "config_test_util.h"

#include "common/alloc.h"
#include "common/err.h"
#include "config/config.h"
#include "config/template.h"

/* ---- templates ---------------------------------------------------------------------------- */

static gw_slice_t vars[GW_TMPL_VAR_N];

static void set_vars(void)
{
    vars[GW_TMPL_CLIENT_ADDR] = gw_slice_str("192.0.2.7");
    vars[GW_TMPL_REQUEST_ID] = gw_slice_str("abc123");
    vars[GW_TMPL_SCHEME] = gw_slice_str("https");
    vars[GW_TMPL_HOST] = gw_slice_str("example.com:8443");
    vars[GW_TMPL_TLS_CLIENT_SUBJECT] = gw_slice_str("CN=alice");
    vars[GW_TMPL_TLS_CLIENT_VERIFY] = gw_slice_str("SUCCESS");
    vars[GW_TMPL_REQUEST_URI] = gw_slice_str("/a/b?c=d");
    vars[GW_TMPL_PATH] = gw_slice_str("/a/b");
}

/* src compiles with `allowed` and expands to want, in a buffer of exactly its size. */
static void expands(const char *src, unsigned allowed, const char *want)
{
    gw_tmpl_t *t;
    const char *why = NULL;
    size_t at = 0;
    set_vars();
    assert_int_equal(gw_tmpl_compile(src, strlen(src), allowed, GW_TMPL_F_FIELD, &t, &why, &at), 0);
    size_t n = gw_tmpl_len(t, vars);
    assert_int_equal(n, strlen(want));
    char buf[256];
    memset(buf, 'Z', sizeof(buf));
    /* one byte short: nothing written */
    if (n)
        assert_int_equal(gw_tmpl_expand(t, vars, buf, n - 1), n);
    assert_int_equal(buf[0], 'Z');
    assert_int_equal(gw_tmpl_expand(t, vars, buf, n), n);
    assert_memory_equal(buf, want, n);
    assert_int_equal(buf[n], 'Z'); /* bounded: not a byte past it */
    gw_tmpl_del(t);
}

static void refused(const char *src, size_t len, unsigned allowed, unsigned flags,
                    const char *why_part, size_t want_at)
{
    gw_tmpl_t *t = (gw_tmpl_t *)1;
    const char *why = NULL;
    size_t at = 999;
    assert_int_equal(gw_tmpl_compile(src, len, allowed, flags, &t, &why, &at), GW_E_PARSE);
    assert_null(t);
    assert_non_null(why);
    if (!strstr(why, why_part))
        fail_msg("'%s' does not say '%s'", why, why_part);
    assert_int_equal(at, want_at);
}

static void template_expands_every_variable(void **state)
{
    (void)state;
    expands("plain", GW_TMPL_HEADER_VARS, "plain");
    expands("", GW_TMPL_HEADER_VARS, "");
    expands("$client_addr", GW_TMPL_HEADER_VARS, "192.0.2.7");
    expands("id=${request_id};s=$scheme", GW_TMPL_HEADER_VARS, "id=abc123;s=https");
    expands("$host|$tls_client_subject|$tls_client_verify", GW_TMPL_HEADER_VARS,
            "example.com:8443|CN=alice|SUCCESS");
    expands("$scheme://$host$request_uri", GW_TMPL_REDIRECT_VARS,
            "https://example.com:8443/a/b?c=d");
    expands("${path}x$$1 $$", GW_TMPL_REDIRECT_VARS, "/a/bx$1 $");
    expands("${host}_${host}", GW_TMPL_REDIRECT_VARS, "example.com:8443_example.com:8443");
}

static void template_refuses_bad_values_at_their_offset(void **state)
{
    (void)state;
    refused("a$nope", 6, GW_TMPL_HEADER_VARS, 0, "unknown variable", 1);
    refused("x ${host", 8, GW_TMPL_HEADER_VARS, 0, "without its '}'", 2);
    refused("cost $5", 7, GW_TMPL_HEADER_VARS, 0, "unknown variable", 5);
    refused("cost $-", 7, GW_TMPL_HEADER_VARS, 0, "names no variable", 5);
    refused("a$", 2, GW_TMPL_HEADER_VARS, 0, "names no variable", 1);
    refused("${}", 3, GW_TMPL_HEADER_VARS, 0, "names no variable", 0);
    refused("/$request_uri", 13, GW_TMPL_HEADER_VARS, 0, "not allowed here", 1);
    refused("$client_addr", 12, GW_TMPL_REDIRECT_VARS, 0, "not allowed here", 0);
    refused("x$host", 6, 0, 0, "not allowed here", 1);
    refused("ab\r\nX-Evil: 1", 13, GW_TMPL_HEADER_VARS, 0, "CR or LF", 2);
    refused("ab\ncd", 5, GW_TMPL_HEADER_VARS, 0, "CR or LF", 2);
    refused("abc\0d", 5, GW_TMPL_HEADER_VARS, 0, "NUL", 3);
    refused("a\tb", 3, GW_TMPL_HEADER_VARS, 0, "control", 1);
    refused("a\x7f", 2, GW_TMPL_HEADER_VARS, 0, "control", 1);
    refused("caf\xc3\xa9", 5, GW_TMPL_HEADER_VARS, 0, "not ASCII", 3);
    refused(" lead", 5, GW_TMPL_HEADER_VARS, GW_TMPL_F_FIELD, "space", 0);
    refused("trail ", 6, GW_TMPL_HEADER_VARS, GW_TMPL_F_FIELD, "space", 5);
    refused("/a b", 4, GW_TMPL_REDIRECT_VARS, GW_TMPL_F_URI, "space", 2);
}

static void host_rule(void **state)
{
    (void)state;
    /* the fronts' authority rule (gw_http_is_authority), not empty: a host a request passed
     * the fronts with is one $host carries; an empty port is the default one */
    static const char *const good[] = {
        "example.com", "example.com:8443",    "a-b_c.d",   "127.0.0.1", "127.0.0.1:80",
        "[::1]",       "[2001:db8::1.2.3.4]", "localhost", "host:",     "[::1]:443"};
    static const char *const bad[] = {
        "", "evil@good", "good/evil", "good\\evil", ".lead", "a..b", "host:123456", "host:8a",
        "[::1", "[]", "[::1]x", "[::g]", "a b", "h%41", "a:1:2", "a~b", "a!b", "a,b", "a;b=c",
        /* hex, colons and dots, but no IPv6 address (RFC 3986 §3.2.2) */
        "[:::]", "[1:2]", "[::1.2.3]", "[1::2::3]", "[12345::1]", "[v1.a]"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!gw_tmpl_host_valid(gw_slice_str(good[i])))
            fail_msg("refused good host '%s'", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gw_tmpl_host_valid(gw_slice_str(bad[i])))
            fail_msg("accepted bad host '%s'", bad[i]);
}

/* ---- the loader ---------------------------------------------------------------------------- */

#define HEAD                                                                                       \
    "listen:\n"                                                                                    \
    "  - address: 127.0.0.1:8080\n"                                                                \
    "upstreams:\n"                                                                                 \
    "  app:\n"                                                                                     \
    "    servers: [127.0.0.1:9000]\n"

static int missing; /* errors expect_error did not find (each printed) */

/* gw_test_config_expect_error that counts a missing message in `missing` and goes on, so that
 * one run prints every message that changed. */
static void expect_error(const char *text, const char *msg)
{
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(text, &c, &e), GW_E_PARSE);
    assert_null(c);
    if (!gw_test_config_has_error(&e, msg)) {
        print_message("missing error: %s\n", msg);
        missing++;
    }
    gw_config_errors_free(&e);
}

static void rules_load(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *text = HEAD "request_headers: {set: {X-Top: '1'}}\n"
                            "routes:\n"
                            "  - host: '*'\n"
                            "    path: /api\n"
                            "    upstream: app\n"
                            "    strip_prefix: /api\n"
                            "    origin_host: 'backend:81'\n"
                            "    request_headers:\n"
                            "      set: {X-Client: '$client_addr', X-B: b}\n"
                            "      add: {X-Id: '${request_id}'}\n"
                            "      remove: [X-Secret, Cookie]\n"
                            "    response_headers: {set: {Cache-Control: no-store}}\n"
                            "  - {host: '*', path: /r, upstream: app, redirect: {to: '$path/'}}\n"
                            "  - {host: '*', path: /h, upstream: app, respond: {body: ok}}\n";
    assert_int_equal(gw_test_config_load(text, &c, &e), 0);
    const gw_cfg_route_t *r = &c->routes[0];
    assert_int_equal(c->request_headers.set_len, 1);
    assert_string_equal(c->request_headers.set[0].name, "x-top");
    assert_ptr_equal(r->top_request_headers, &c->request_headers);
    assert_int_equal(r->request_headers.set_len, 2);
    assert_string_equal(r->request_headers.set[0].name, "x-client");
    assert_true(r->request_headers.set[0].value->uses & (1u << GW_TMPL_CLIENT_ADDR));
    assert_int_equal(r->request_headers.add_len, 1);
    assert_int_equal(r->request_headers.remove_len, 2);
    assert_string_equal(r->request_headers.remove[1], "cookie");
    assert_int_equal(r->response_headers.set_len, 1);
    assert_string_equal(r->strip_prefix, "/api");
    assert_string_equal(r->origin_host, "backend:81");
    assert_int_equal(c->routes[1].redirect_status, 302); /* the default */
    assert_non_null(c->routes[1].redirect_to);
    assert_int_equal(c->routes[2].respond_status, 200);
    assert_string_equal(c->routes[2].respond_body, "ok");
    assert_string_equal(c->routes[2].respond_content_type, "text/plain; charset=utf-8");
    assert_int_equal(c->listen[0].redirect_https_port, 443);
    gw_config_del(c);
}

static void hsts_and_redirect_https_load(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *text = "listen:\n"
                       "  - address: 127.0.0.1:8443\n"
                       "    tls: {certificate: /dev/null, key: /dev/null}\n"
                       "    hsts: {max_age: 63072000, include_subdomains: true, preload: true}\n"
                       "  - address: 127.0.0.1:8080\n"
                       "    redirect_https: true\n"
                       "    redirect_https_port: 8443\n"
                       "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                       "routes:\n  - {host: '*', path: /, upstream: app}\n";
    assert_int_equal(gw_test_config_load(text, &c, &e), 0);
    assert_string_equal(c->listen[0].hsts, "max-age=63072000; includeSubDomains; preload");
    assert_int_equal(c->listen[1].redirect_https, 1);
    assert_int_equal(c->listen[1].redirect_https_port, 8443);
    gw_config_del(c);
}

#define ROUTE(extra) HEAD "routes:\n  - host: '*'\n    path: /api\n    upstream: app\n" extra

static void each_load_error(void **state)
{
    (void)state;
    /* header names */
    expect_error(ROUTE("    request_headers: {set: {Connection: close}}\n"),
                 "t.yaml:10:29: request_headers.set: field name 'Connection' is a hop-by-hop "
                 "field (RFC 9110 §7.6.1)");
    expect_error(ROUTE("    request_headers: {add: {Transfer-Encoding: chunked}}\n"),
                 "t.yaml:10:29: request_headers.add: field name 'Transfer-Encoding' is a "
                 "hop-by-hop field (RFC 9110 §7.6.1)");
    expect_error(ROUTE("    response_headers: {set: {Content-Length: '1'}}\n"),
                 "t.yaml:10:30: response_headers.set: field name 'Content-Length' frames the "
                 "message: the gateway writes it");
    expect_error(ROUTE("    request_headers: {set: {':path': /x}}\n"),
                 "t.yaml:10:29: request_headers.set: field name ':path' is a pseudo-header");
    expect_error(ROUTE("    request_headers: {set: {'a b': x}}\n"),
                 "t.yaml:10:29: request_headers.set: field name 'a b' is not a token (RFC "
                 "9110 §5.6.2)");
    expect_error(ROUTE("    request_headers: {set: {Host: x}}\n"),
                 "t.yaml:10:29: request_headers.set: field name 'Host' is the origin's "
                 "address: use the route's origin_host");
    expect_error(ROUTE("    request_headers: {remove: [Upgrade]}\n"),
                 "t.yaml:10:32: request_headers.remove: field name 'Upgrade' is a hop-by-hop "
                 "field (RFC 9110 §7.6.1)");
    expect_error(ROUTE("    request_headers: {set: {X-A: '1', x-a: '2'}}\n"),
                 "t.yaml:10:39: request_headers.set: field 'x-a' is named twice");
    expect_error(ROUTE("    request_headers: {sett: {X-A: '1'}}\n"),
                 "t.yaml:10:23: unknown key 'sett' in request_headers; did you mean 'set'?");
    /* values: the column of the bad byte in a plain scalar */
    expect_error(ROUTE("    request_headers: {set: {X-A: a$nope}}\n"),
                 "t.yaml:10:35: request_headers.set value names an unknown variable");
    expect_error(ROUTE("    request_headers: {set: {X-A: \"a\\r\\nX-Evil: 1\"}}\n"),
                 "t.yaml:10:34: request_headers.set value holds a CR or LF");
    expect_error(ROUTE("    response_headers: {set: {X-Id: $request_id}}\n"),
                 "t.yaml:10:36: response_headers.set value names a variable: response header "
                 "values are literal (a coalesced answer is shared by requests whose variables "
                 "differ)");
    expect_error(HEAD "response_headers: {add: {X-A: $client_addr}}\n"
                      "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:6:31: response_headers.add value names a variable: response header "
                 "values are literal (a coalesced answer is shared by requests whose variables "
                 "differ)");
    expect_error(ROUTE("    request_headers: {set: {X-A: $request_uri}}\n"),
                 "t.yaml:10:34: request_headers.set value names a variable not allowed here");
    /* origin_host, strip_prefix */
    expect_error(ROUTE("    origin_host: 'a@b'\n"),
                 "t.yaml:10:18: origin_host must be a host name, an IPv4 address or an [IPv6] "
                 "literal with an optional :port, not 'a@b'");
    expect_error(ROUTE("    strip_prefix: /other\n"),
                 "t.yaml:10:19: strip_prefix '/other' is not a prefix of the route's path "
                 "'/api'");
    expect_error(ROUTE("    strip_prefix: /\n"),
                 "t.yaml:10:19: strip_prefix must be a path of more than '/' (no query), not "
                 "'/'");
    /* redirect, respond */
    expect_error(ROUTE("    redirect: {to: /x, status: 303}\n"),
                 "t.yaml:10:32: redirect status must be 301, 302, 307 or 308, not 303");
    expect_error(ROUTE("    redirect: {status: 301}\n"),
                 "t.yaml:10:15: missing required key 'to' in redirect");
    expect_error(ROUTE("    redirect: {to: '$client_addr/x'}\n"),
                 "t.yaml:10:21: redirect.to value names a variable not allowed here");
    expect_error(ROUTE("    redirect: {to: '/a b'}\n"),
                 "t.yaml:10:23: redirect.to value holds a space (a URI has none: write %20)");
    expect_error(ROUTE("    redirect: {to: /x}\n    respond: {status: 200}\n"),
                 "t.yaml:11:14: a route has either redirect or respond, not both");
    expect_error(ROUTE("    respond: {status: 101}\n"),
                 "t.yaml:10:23: 'status' is out of range: 101 (allowed 200..599)");
    expect_error(ROUTE("    respond: {status: 204, body: x}\n"),
                 "t.yaml:10:34: respond.body must be empty with status 204");
    expect_error("limits: {respond_body: 4}\n" ROUTE("    respond: {body: hello}\n"),
                 "t.yaml:11:21: respond.body has 5 bytes, more than limits.respond_body (4)");
    expect_error(ROUTE("    respond: {content_type: \"text/html\\n\"}\n"),
                 "t.yaml:10:29: respond.content_type must be a media type like 'text/html; "
                 "charset=utf-8' (visible ASCII and spaces)");
    /* listeners */
    expect_error("listen:\n  - address: 127.0.0.1:8080\n    hsts: {max_age: 10}\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                 "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:3:11: hsts is for TLS listeners only (RFC 6797 §7.2)");
    expect_error("listen:\n  - address: 127.0.0.1:8443\n"
                 "    tls: {certificate: /dev/null, key: /dev/null}\n"
                 "    hsts: {max_age: 100, preload: true}\n"
                 "    redirect_https: true\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                 "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:4:11: hsts preload needs max_age of at least 31536000 (one year) and "
                 "include_subdomains: true");
    expect_error("listen:\n  - address: 127.0.0.1:8443\n"
                 "    tls: {certificate: /dev/null, key: /dev/null}\n"
                 "    redirect_https: true\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                 "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:4:21: redirect_https is for cleartext listeners: this one has tls");
    expect_error("listen:\n  - address: 127.0.0.1:8080\n    hsts: {include_subdomains: true}\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                 "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:3:11: missing required key 'max_age' in hsts (seconds)");
    expect_error("listen:\n  - address: 127.0.0.1:8080\n    redirect_https_port: 8443\n"
                 "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                 "routes:\n  - {host: '*', path: /, upstream: app}\n",
                 "t.yaml:3:26: redirect_https_port needs redirect_https: true");
    assert_int_equal(missing, 0);
}

/* Every allocation of the rules' loading fails in turn: GW_E_NOMEM, nothing leaks (the
 * sanitizer build checks), until the config loads. */
static void alloc_failure_sweep(void **state)
{
    (void)state;
    const char *y = "listen:\n"
                    "  - address: 127.0.0.1:8443\n"
                    "    tls: {certificate: /dev/null, key: /dev/null}\n"
                    "    hsts: {max_age: 100}\n"
                    "  - {address: 127.0.0.1:8080, redirect_https: true}\n"
                    "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n"
                    "request_headers: {set: {X-A: '$host'}, remove: [X-B]}\n"
                    "response_headers: {add: {X-C: c}}\n"
                    "routes:\n"
                    "  - host: '*'\n"
                    "    path: /api\n"
                    "    upstream: app\n"
                    "    strip_prefix: /api\n"
                    "    origin_host: b\n"
                    "    request_headers: {set: {X-D: '$client_addr-$scheme'}, add: {X-E: e}}\n"
                    "    response_headers: {remove: [X-F, X-G]}\n"
                    "  - {host: '*', path: /r, upstream: app, redirect: {to: '$path?x'}}\n"
                    "  - {host: '*', path: /h, upstream: app, respond: {body: ok}}\n";
    gw_test_config_sweep_loads(y, 4000, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(template_expands_every_variable),
        cmocka_unit_test(template_refuses_bad_values_at_their_offset),
        cmocka_unit_test(host_rule),
        cmocka_unit_test(rules_load),
        cmocka_unit_test(hsts_and_redirect_https_load),
        cmocka_unit_test(each_load_error),
        cmocka_unit_test(alloc_failure_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
