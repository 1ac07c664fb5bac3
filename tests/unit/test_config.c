/* Unit tests of config/: the loader's defaults, every error class with FILE:LINE:COL, the
 * shipped configs, unit parsers and a failing-allocation sweep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include "test_util.h"
#include "config_test_util.h"

#include "common/alloc.h"
#include "common/err.h"
#include "config/config.h"
#include "gw_version.h"

static void minimal_contract_gets_defaults(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_int_equal(e.len, 0);
    assert_int_equal(c->listen_len, 1);
    assert_null(c->listen[0].tls);
    assert_int_equal(c->listen[0].protocols, GW_PROTO_F_H2C | GW_PROTO_F_HTTP1);
    assert_int_equal(c->listen[0].addr.ss.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&c->listen[0].addr.ss)->sin_port), 8080);
    assert_int_equal(c->upstreams_len, 1);
    assert_string_equal(c->upstreams[0].name, "app");
    assert_int_equal(c->upstreams[0].servers_len, 1);
    assert_string_equal(c->upstreams[0].servers[0].host, "127.0.0.1");
    assert_int_equal(c->upstreams[0].servers[0].weight, 1);
    assert_int_equal(c->upstreams[0].max_connections, 64);
    assert_int_equal(c->upstreams[0].pipeline, 1); /* no pipelining unless asked */
    assert_int_equal(c->upstreams[0].read_batch, 256 * 1024);
    assert_int_equal(c->upstreams[0].read_batch_wait_ms, 5);
    assert_int_equal(c->routes_len, 1);
    assert_int_equal(c->routes[0].upstream, 0);
    assert_string_equal(c->routes[0].host, "*");
    assert_true(c->routes[0].coalesce);
    assert_string_equal(c->routes[0].coalesce_headers[0], "accept-encoding");
    assert_true(c->workers >= 1);
    assert_int_equal(c->h2.initial_window_size, 256 * 1024);
    assert_int_equal(c->h2.connection_window_size, 1024 * 1024);
    assert_int_equal(c->h2.max_header_list_size, 64 * 1024);
    assert_int_equal(c->timeouts.idle_ms, 60000);
    assert_int_equal(c->limits.body_buffer, 128 * 1024);
    gw_config_del(c);
}

static void full_config_values(void **state)
{
    (void)state;
    const char *y = "workers: 3\n"
                    "log_level: debug\n"
                    "listen:\n"
                    "  - address: '[::1]:9443'\n"
                    "    protocols: [h2c]\n"
                    "    backlog: 100\n"
                    "upstreams:\n"
                    "  a:\n"
                    "    servers:\n"
                    "      - 127.0.0.1:1\n"
                    "      - { address: '[::1]:2', weight: 5 }\n"
                    "      - origin.example:80\n"
                    "    balance: least_conn\n"
                    "    idle_timeout: 500ms\n"
                    "    read_batch: 0\n"
                    "    read_batch_wait: 20ms\n"
                    "    health: { path: /health, interval: 2s, expect_status: 204, eject: 1m }\n"
                    "routes:\n"
                    "  - host: '*.example.com'\n"
                    "    path: /api\n"
                    "    upstream: a\n"
                    "    coalesce: false\n"
                    "    response_rate: 1MB/s\n"
                    "h2:\n"
                    "  initial_window_size: 1MiB\n"
                    "  connection_window_size: 4MiB\n"
                    "  settings_timeout: 3s\n"
                    "  max_priority_nodes: 64\n"
                    "throttle:\n"
                    "  per_client_rate: 8Mbit/s\n";
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(y, &c, &e), 0);
    assert_int_equal(c->workers, 3);
    assert_int_equal(c->log_level, 0);
    assert_int_equal(c->listen[0].addr.ss.ss_family, AF_INET6);
    assert_int_equal(c->listen[0].protocols, GW_PROTO_F_H2C);
    assert_int_equal(c->listen[0].backlog, 100);
    gw_cfg_upstream_t *u = &c->upstreams[0];
    assert_int_equal(u->servers_len, 3);
    assert_int_equal(u->servers[1].weight, 5);
    assert_string_equal(u->servers[1].host, "::1");
    assert_string_equal(u->servers[2].host, "origin.example");
    assert_int_equal(u->servers[2].addr.len, 0); /* a name: resolved by back/ */
    assert_int_equal(u->balance, GW_BALANCE_LEAST_CONN);
    assert_int_equal(u->idle_timeout_ms, 500);
    assert_int_equal(u->read_batch, 0);
    assert_int_equal(u->read_batch_wait_ms, 20);
    assert_string_equal(u->health_path, "/health");
    assert_int_equal(u->health_interval_ms, 2000);
    assert_int_equal(u->health_status, 204);
    assert_int_equal(u->eject_ms, 60000);
    assert_false(c->routes[0].coalesce);
    assert_int_equal(c->routes[0].response_rate, 1000000);
    assert_int_equal(c->h2.initial_window_size, 1048576);
    assert_int_equal(c->h2.settings_timeout_ms, 3000);
    assert_int_equal(c->h2.max_priority_nodes, 64);
    assert_int_equal(c->throttle.per_client_rate, 1000000);
    gw_config_del(c);
}

static void error_unknown_key(void **state)
{
    (void)state;
    gw_test_config_expect_error("listen:\n  - address: 127.0.0.1:8080\n    colour: blue\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                "routes: [{upstream: app}]\n",
                                "t.yaml:3:5: unknown key 'colour' in a listener");
    gw_test_config_expect_error(MINIMAL "frobnicate: 1\n", "t.yaml:8:1: unknown key 'frobnicate'");
    gw_test_config_expect_error(MINIMAL "h2:\n  settings_timeout_ms: 5\n",
                                "t.yaml:9:3: unknown key 'settings_timeout_ms' in h2; did you mean "
                                "'settings_timeout'?");
}

static void error_bad_type(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen: 127.0.0.1:8080\nupstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:1:9: 'listen' must be a list of listeners, not a scalar: write "
        "'listen: [{address: 127.0.0.1:8080}]'");
    gw_test_config_expect_error(MINIMAL "upstreams2: x\n",
                                "t.yaml:8:1: unknown key 'upstreams2'; did you mean 'upstreams'?");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000], max_connections: lots}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:2:63: 'max_connections' must be a non-negative integer, not 'lots'");
    gw_test_config_expect_error(
        MINIMAL "h2: {max_concurrent_streams: [1, 2]}\n",
        "t.yaml:8:30: 'max_concurrent_streams' must be a non-negative integer, not a "
        "list");
    gw_test_config_expect_error(
        MINIMAL "limits: {write_buffer: -5}\n",
        "t.yaml:8:24: 'write_buffer' must be a size (e.g. 64KiB, 1MB, 4096), not '-5'");
}

static void error_bad_unit(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        MINIMAL "timeouts: {idle: 30 parsecs}\n",
        "t.yaml:8:18: 'idle' must be a duration (e.g. 500ms, 30s, 5m), not '30 parsecs'");
    gw_test_config_expect_error(
        MINIMAL "h2: {initial_window_size: 64Kb}\n",
        "t.yaml:8:27: 'initial_window_size' must be a size (e.g. 64KiB, 1MB, 4096), not "
        "'64Kb'");
    gw_test_config_expect_error(
        MINIMAL "throttle: {response_rate: 1MB}\n",
        "t.yaml:8:27: 'response_rate' must be a rate (e.g. 1MB/s, 512KiB/s, 8Mbit/s), "
        "not '1MB'");
}

static void error_out_of_range(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        MINIMAL "h2: {max_frame_size: 1KiB}\n",
        "t.yaml:8:22: 'max_frame_size' is out of range: 1KiB (allowed 16384..16777215)");
    gw_test_config_expect_error(MINIMAL "h2: {initial_window_size: 4GiB}\n",
                                "t.yaml:8:27: 'initial_window_size' is out of range: 4GiB (allowed "
                                "1..2147483647)");
    gw_test_config_expect_error(
        MINIMAL "h2: {max_priority_nodes: 1000001}\n",
        "t.yaml:8:26: 'max_priority_nodes' is out of range: 1000001 (allowed "
        "0..1000000)");
    gw_test_config_expect_error(MINIMAL "workers: 0\n",
                                "t.yaml:8:10: 'workers' is out of range: 0 (allowed 1..256)");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000], pipeline: 65}}\n"
                                "routes: [{upstream: app}]\n",
                                "t.yaml:2:56: 'pipeline' is out of range: 65 (allowed 1..64)");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000], pipeline: 0}}\n"
                                "routes: [{upstream: app}]\n",
                                "t.yaml:2:56: 'pipeline' is out of range: 0 (allowed 1..64)");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000], read_batch: 65MiB}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:2:58: 'read_batch' is out of range: 65MiB (allowed 0..67108864)");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000], read_batch_wait: 0ms}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:2:63: 'read_batch_wait' is out of range: 0ms (allowed 1..60000)");
    gw_test_config_expect_error(
        MINIMAL "workers: 99999999999999999999999\n",
        "t.yaml:8:10: 'workers' is out of range: 99999999999999999999999 (allowed "
        "1..256)");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:99999}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:20: 'address' port is out of range (1-65535): '127.0.0.1:99999'");
}

static void error_missing_required(void **state)
{
    (void)state;
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\nroutes: [{upstream: app}]\n",
                                "t.yaml:1:1: missing required key 'upstreams'");
    gw_test_config_expect_error(
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:1: missing required key 'listen'");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{path: /}]\n",
        "t.yaml:3:10: missing required key 'upstream' in a route");
    gw_test_config_expect_error(
        "listen: [{backlog: 5}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:10: missing required key 'address' in a listener");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {max_idle: 1}}\nroutes: [{upstream: app}]\n",
                                "t.yaml:2:13: missing required key 'servers' in upstream 'app'");
    gw_test_config_expect_error(
        "", "t.yaml:1:1: the config is empty: 'listen', 'upstreams' and 'routes' are "
            "required");
}

static void error_duplicate_listener_and_key(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen:\n  - address: 127.0.0.1:8080\n  - address: 127.0.0.1:8080\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:3:14: duplicate listener 127.0.0.1:8080 (first declared on line 2)");
    gw_test_config_expect_error(MINIMAL "workers: 1\nworkers: 2\n",
                                "t.yaml:9:1: duplicate key 'workers'");
}

static void error_route_checks(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: nowhere}]\n",
        "t.yaml:3:21: route names unknown upstream 'nowhere' (upstreams: app)");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                "routes: [{upstream: app, path: api}]\n",
                                "t.yaml:3:32: route path must start with '/', not 'api'");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
        "routes: [{upstream: app, host: 'a*b'}]\n",
        "t.yaml:3:32: route host must be a name, '*.suffix', '*' or an IPv6 literal such as "
        "'[::1]' (without a port), not 'a*b'");
    /* a ':' outside brackets (a port, a bare IPv6 address) or a malformed literal could never
     * match a request's host, which is compared without its port */
    static const char *const never[] = {"a.test:8080", "'::1'",        "'[::1]:80'", "'[zz]'",
                                        "'[::1'",      "'*.a.test:1'", "'[v1.a]'"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        char y[256], want[256];
        snprintf(y, sizeof(y),
                 "listen: [{address: 127.0.0.1:8080}]\n"
                 "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                 "routes: [{upstream: app, host: %s}]\n",
                 never[i]);
        const char *v = never[i][0] == '\'' ? never[i] + 1 : never[i];
        snprintf(want, sizeof(want),
                 "t.yaml:3:32: route host must be a name, '*.suffix', '*' or an IPv6 literal "
                 "such as '[::1]' (without a port), not '%.*s'",
                 (int)(strlen(v) - (v != never[i])), v);
        gw_test_config_expect_error(y, want);
    }
}

/* RFC 5952: an IPv6 route host is held in its canonical text, whatever the spelling written
 * (proxy/route.c compares the request's host in the same form); the default name follows. */
static void route_ipv6_host_is_canonical(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(
        gw_test_config_load("listen: [{address: 127.0.0.1:8080}]\n"
                            "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                            "routes:\n"
                            "  - {upstream: app, host: '[0:0::0001]'}\n"
                            "  - {upstream: app, host: '[2001:DB8:0:0::AB]', path: /x}\n"
                            "  - {upstream: app, host: '[::FFFF:0102:0304]'}\n"
                            "  - {upstream: app, host: '[1:0:0:2:0:0:0:3]'}\n"
                            "  - {upstream: app, host: '[::1]', name: same}\n",
                            &c, &e),
        0);
    assert_int_equal(e.len, 0);
    assert_string_equal(c->routes[0].host, "[::1]");
    assert_string_equal(c->routes[0].name, "[::1]/");
    assert_string_equal(c->routes[1].host, "[2001:db8::ab]");
    assert_string_equal(c->routes[1].name, "[2001:db8::ab]/x");
    assert_string_equal(c->routes[2].host, "[::ffff:1.2.3.4]");
    assert_string_equal(c->routes[3].host, "[1:0:0:2::3]"); /* the longer run of zeros */
    assert_string_equal(c->routes[4].host, "[::1]");
    gw_config_del(c);
}

static void error_tls_checks(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen:\n  - address: 127.0.0.1:8443\n"
        "    tls: {certificate: /nonexistent/c.pem, key: /nonexistent/k.pem}\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:3:24: certificate file '/nonexistent/c.pem' cannot be read: No such "
        "file or directory");
    gw_test_config_expect_error(
        "listen:\n  - address: 127.0.0.1:8443\n    protocols: [h2c]\n"
        "    tls: {certificate: /x/c.pem, key: /x/k.pem, self_signed: true}\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:3:17: protocol 'h2c' is not allowed on a TLS listener (use h2, "
        "http/1.1)");
    /* self_signed: a missing pair is fine (generated at start) */
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(
        gw_test_config_load("listen:\n  - address: 127.0.0.1:8443\n"
                            "    tls: {certificate: /x/c.pem, key: /x/k.pem, self_signed: true}\n"
                            "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                            "routes: [{upstream: app}]\n",
                            &c, &e),
        0);
    assert_non_null(c->listen[0].tls);
    assert_int_equal(c->listen[0].tls->certs_len, 1);
    assert_int_equal(c->listen[0].protocols, GW_PROTO_F_H2 | GW_PROTO_F_HTTP1);
    gw_config_del(c);
    /* fuzz_config's one-hour run: a `names:` whose every item is refused, beside
     * `certificates:`, was neither used nor freed (a leak LeakSanitizer reports in the ASan
     * build); an empty one is accepted and freed the same way */
    gw_test_config_expect_error(
        "listen:\n  - address: 127.0.0.1:8443\n"
        "    tls:\n      certificates:\n"
        "        - {certificate: /x/c.pem, key: /x/k.pem}\n"
        "      self_signed: true\n      names: [b.example: 1]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:7:15: 'names' must be a scalar, not a map");
    assert_int_equal(gw_test_config_load("listen:\n  - address: 127.0.0.1:8443\n"
                                         "    tls:\n      certificates:\n"
                                         "        - {certificate: /x/c.pem, key: /x/k.pem}\n"
                                         "      self_signed: true\n      names: []\n"
                                         "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                         "routes: [{upstream: app}]\n",
                                         &c, &e),
                     0);
    assert_int_equal(c->listen[0].tls->certs_len, 1);
    gw_config_del(c);
}

/* A file in /tmp holding text, for the keys that name one; its path into path (caller unlinks). */
static void temp_file(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/h2gate-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* The YAML of a listener with two certificate entries (self-signed pairs that need no file),
 * the listener's client_auth `la` and the second entry's `ea` (NULL: none), and a route with
 * `route` more keys. */
static void client_auth_doc(char *out, size_t cap, const char *la, const char *ea,
                            const char *route)
{
    snprintf(out, cap,
             "listen:\n"
             "  - address: 127.0.0.1:8443\n"
             "    tls:\n"
             "      self_signed: true\n"
             "      client_auth: %s\n"
             "      certificates:\n"
             "        - {certificate: /x/a.pem, key: /x/a.key, names: [a.test]}\n"
             "        - {certificate: /x/b.pem, key: /x/b.key, names: [b.test]%s%s}\n"
             "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
             "routes: [{upstream: app%s}]\n",
             la, ea ? ", client_auth: " : "", ea ? ea : "", route);
}

/* client_auth on a listener (inherited by its certificate entries) and on an entry (its own);
 * a route's client_cert and client_cert_chain; defaults; every error at its key. */
static void client_auth_keys(void **state)
{
    (void)state;
    char ca[64], crl[64], key[64], doc[2048], la[512], msg[512];
    temp_file(ca, sizeof(ca), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    temp_file(crl, sizeof(crl), "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n");
    temp_file(key, sizeof(key), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    gw_config_t *c;
    gw_config_errors_t e;
    snprintf(la, sizeof(la), "{ca: %s, mode: optional, depth: 3, crl: %s}", ca, crl);
    client_auth_doc(doc, sizeof(doc), la, "{mode: none}",
                    ", client_cert: required, client_cert_chain: true");
    assert_int_equal(gw_test_config_load(doc, &c, &e), 0);
    const gw_cfg_tls_t *t = c->listen[0].tls;
    assert_int_equal(t->certs_len, 2);
    const gw_cfg_client_auth_t *a0 = &t->certs[0].client_auth, *a1 = &t->certs[1].client_auth;
    assert_int_equal(a0->mode, GW_CFG_CLIENT_AUTH_OPTIONAL);
    assert_int_equal(a0->depth, 3);
    assert_string_equal(a0->ca, ca);
    assert_string_equal(a0->crl, crl);
    assert_int_equal(a0->ca_at.line, 5);
    assert_int_equal(a1->mode, GW_CFG_CLIENT_AUTH_NONE);
    assert_null(a1->ca);
    assert_int_equal(c->routes[0].client_cert_required, 1);
    assert_int_equal(c->routes[0].client_cert_chain, 1);
    gw_config_del(c);
    /* defaults: mode require, depth 1 (nginx's), no CRL; routes ask nothing */
    snprintf(la, sizeof(la), "{ca: %s}", ca);
    client_auth_doc(doc, sizeof(doc), la, NULL, "");
    assert_int_equal(gw_test_config_load(doc, &c, &e), 0);
    assert_int_equal(c->listen[0].tls->certs[1].client_auth.mode, GW_CFG_CLIENT_AUTH_REQUIRE);
    assert_int_equal(c->listen[0].tls->certs[1].client_auth.depth, 1);
    assert_null(c->listen[0].tls->certs[1].client_auth.crl);
    assert_int_equal(c->routes[0].client_cert_required, 0);
    assert_int_equal(c->routes[0].client_cert_chain, 0);
    gw_config_del(c);
    /* errors, each at its key */
    snprintf(la, sizeof(la), "{ca: %s, mode: sometimes}", ca);
    client_auth_doc(doc, sizeof(doc), la, NULL, "");
    snprintf(msg, sizeof(msg),
             "t.yaml:5:%zu: 'mode' must be none, optional or require, not "
             "'sometimes'",
             33 + strlen(ca));
    gw_test_config_expect_error(doc, msg);
    snprintf(la, sizeof(la), "{ca: %s, depth: 17}", ca);
    client_auth_doc(doc, sizeof(doc), la, NULL, "");
    snprintf(msg, sizeof(msg), "t.yaml:5:%zu: 'depth' is out of range: 17 (allowed 0..16)",
             34 + strlen(ca));
    gw_test_config_expect_error(doc, msg);
    client_auth_doc(doc, sizeof(doc), "{mode: optional}", NULL, "");
    gw_test_config_expect_error(
        doc, "t.yaml:5:20: client_auth needs 'ca': the PEM file of the CA certificates "
             "that client certificates must chain to");
    client_auth_doc(doc, sizeof(doc), "{ca: /nonexistent/ca.pem}", NULL, "");
    gw_test_config_expect_error(
        doc, "t.yaml:5:25: 'ca' file '/nonexistent/ca.pem' cannot be read: No such file "
             "or directory");
    snprintf(la, sizeof(la), "{ca: %s}", key);
    client_auth_doc(doc, sizeof(doc), la, NULL, "");
    snprintf(msg, sizeof(msg),
             "t.yaml:5:25: 'ca' file '%s' is not PEM: it holds no certificate "
             "(-----BEGIN CERTIFICATE-----)",
             key);
    gw_test_config_expect_error(doc, msg);
    snprintf(la, sizeof(la), "{ca: %s, crl: %s}", ca, ca);
    client_auth_doc(doc, sizeof(doc), la, NULL, "");
    snprintf(msg, sizeof(msg),
             "t.yaml:5:%zu: 'crl' file '%s' is not PEM: it holds no CRL "
             "(-----BEGIN X509 CRL-----)",
             32 + strlen(ca), ca);
    gw_test_config_expect_error(doc, msg);
    /* an entry's own client_auth is checked the same way */
    snprintf(la, sizeof(la), "{ca: %s}", ca);
    client_auth_doc(doc, sizeof(doc), la, "{ca: /nonexistent/b.pem, mode: optional}", "");
    gw_test_config_expect_error(
        doc, "t.yaml:8:85: 'ca' file '/nonexistent/b.pem' cannot be read: No such file "
             "or directory");
    client_auth_doc(doc, sizeof(doc), la, "{ca: /x, colour: blue}", "");
    gw_test_config_expect_error(doc, "t.yaml:8:89: unknown key 'colour' in client_auth");
    /* routes: client_cert is required or optional; required needs a listener that asks */
    client_auth_doc(doc, sizeof(doc), la, NULL, ", client_cert: always");
    gw_test_config_expect_error(
        doc, "t.yaml:10:39: 'client_cert' must be required or optional, not 'always'");
    gw_test_config_expect_error(
        MINIMAL "  - {path: /x, upstream: app, client_cert: required}\n",
        "t.yaml:8:44: client_cert: required needs a TLS listener with client_auth "
        "(mode optional or require): no client could ever pass");
    unlink(ca);
    unlink(crl);
    unlink(key);
}

static void all_errors_collected(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *y = "listen:\n  - address: 127.0.0.1:8080\n    colour: blue\n"
                    "upstreams:\n  app:\n    servers: [127.0.0.1:9000]\n    max_connections: lots\n"
                    "routes:\n  - { host: \"*\", path: /, upstream: nowhere }\n"
                    "timeouts: {idle: forever}\n";
    assert_int_equal(gw_test_config_load(y, &c, &e), GW_E_PARSE);
    assert_int_equal(e.len, 4);
    gw_test_config_assert_has(&e, "t.yaml:3:5: unknown key 'colour' in a listener");
    gw_test_config_assert_has(
        &e, "t.yaml:7:22: 'max_connections' must be a non-negative integer, not 'lots'");
    gw_test_config_assert_has(
        &e, "t.yaml:9:37: route names unknown upstream 'nowhere' (upstreams: app)");
    gw_test_config_assert_has(
        &e, "t.yaml:10:18: 'idle' must be a duration (e.g. 500ms, 30s, 5m), not 'forever'");
    gw_config_errors_free(&e);
}

static void yaml_syntax_error_has_position(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load("listen: [\n  {address: 1\n", &c, &e), GW_E_PARSE);
    assert_int_equal(e.len, 1);
    assert_true(strncmp(e.msgs[0], "t.yaml:", 7) == 0);
    assert_non_null(strstr(e.msgs[0], "YAML syntax error"));
    gw_config_errors_free(&e);
}

static void load_file(const char *path)
{
    gw_config_t *c;
    gw_config_errors_t e = {0};
    int rv = gw_config_load_file(path, &c, &e);
    for (size_t i = 0; i < e.len; i++)
        print_message("%s\n", e.msgs[i]);
    assert_int_equal(rv, 0);
    gw_config_del(c);
    gw_config_errors_free(&e);
}

static void shipped_configs_load(void **state)
{
    (void)state;
    /* relative paths in the shipped files (state/, certificates) are relative to the root */
    assert_int_equal(chdir(GW_SOURCE_ROOT), 0);
    load_file("config/gateway.yaml");
    DIR *d = opendir("config/examples");
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".yaml")) {
            char p[512];
            snprintf(p, sizeof(p), "config/examples/%s", de->d_name);
            load_file(p);
            n++;
        }
    }
    closedir(d);
    assert_true(n >= 3);
    gw_config_t *c;
    gw_config_errors_t e = {0};
    assert_int_equal(gw_config_load_default(&c, &e), 0);
    assert_int_equal(c->listen_len, 2);
    assert_non_null(c->listen[0].tls);
    assert_true(c->listen[0].tls->self_signed);
    assert_string_equal(c->listen[0].addr.text, "127.0.0.1:8443");
    assert_string_equal(c->listen[1].addr.text, "127.0.0.1:8080");
    assert_string_equal(c->path, "<embedded>");
    gw_config_del(c);

    gw_config_errors_t e2 = {0};
    assert_int_equal(gw_config_load_file("/nonexistent/x.yaml", &c, &e2), GW_E_NOENT);
    assert_int_equal(e2.len, 1);
    assert_string_equal(e2.msgs[0], "/nonexistent/x.yaml:1:1: cannot open: No such file or "
                                    "directory");
    gw_config_errors_free(&e2);
}

static void unit_parsers(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(gw_parse_size("123", &v), 0), assert_int_equal(v, 123);
    assert_int_equal(gw_parse_size("64KiB", &v), 0), assert_int_equal(v, 65536);
    assert_int_equal(gw_parse_size("1MB", &v), 0), assert_int_equal(v, 1000000);
    assert_int_equal(gw_parse_size("2MiB", &v), 0), assert_int_equal(v, 2097152);
    assert_int_equal(gw_parse_size("1GiB", &v), 0), assert_int_equal(v, 1073741824);
    assert_int_equal(gw_parse_size("10k", &v), 0), assert_int_equal(v, 10240);
    assert_int_equal(gw_parse_size("16 KiB", &v), 0), assert_int_equal(v, 16384);
    assert_int_equal(gw_parse_size("1.5MB", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_size("KiB", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_size("5 apples", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_size("-1", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_size("99999999999999999999GiB", &v), GW_E_RANGE);
    assert_int_equal(gw_parse_size("17179869184GiB", &v), GW_E_RANGE);
    assert_int_equal(gw_parse_duration("500ms", &v), 0), assert_int_equal(v, 500);
    assert_int_equal(gw_parse_duration("30s", &v), 0), assert_int_equal(v, 30000);
    assert_int_equal(gw_parse_duration("5m", &v), 0), assert_int_equal(v, 300000);
    assert_int_equal(gw_parse_duration("1h", &v), 0), assert_int_equal(v, 3600000);
    assert_int_equal(gw_parse_duration("2d", &v), 0), assert_int_equal(v, 172800000);
    assert_int_equal(gw_parse_duration("7", &v), 0), assert_int_equal(v, 7000);
    assert_int_equal(gw_parse_duration("3 weeks", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_duration("18446744073709551615d", &v), GW_E_RANGE);
    assert_int_equal(gw_parse_rate("1MB/s", &v), 0), assert_int_equal(v, 1000000);
    assert_int_equal(gw_parse_rate("512KiB/s", &v), 0), assert_int_equal(v, 524288);
    assert_int_equal(gw_parse_rate("8Mbit/s", &v), 0), assert_int_equal(v, 1000000);
    assert_int_equal(gw_parse_rate("100kbit/s", &v), 0), assert_int_equal(v, 12500);
    assert_int_equal(gw_parse_rate("1MB", &v), GW_E_PARSE);
    assert_int_equal(gw_parse_rate("1MB/h", &v), GW_E_PARSE);
    gw_cfg_addr_t a;
    assert_int_equal(gw_parse_addr("127.0.0.1:80", &a), 0);
    assert_int_equal(a.ss.ss_family, AF_INET);
    assert_int_equal(gw_parse_addr("[::1]:443", &a), 0);
    assert_int_equal(a.ss.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&a.ss)->sin6_port), 443);
    assert_int_equal(gw_parse_addr("localhost:8080", &a), 0);
    assert_int_equal(a.ss.ss_family, AF_INET);
    assert_int_equal(gw_parse_addr("::1:80", &a), GW_E_PARSE);
    assert_int_equal(gw_parse_addr("127.0.0.1", &a), GW_E_PARSE);
    assert_int_equal(gw_parse_addr("127.0.0.1:0", &a), GW_E_RANGE);
    assert_int_equal(gw_parse_addr("127.0.0.1:65536", &a), GW_E_RANGE);
    assert_int_equal(gw_parse_addr("127.0.0.1:8x", &a), GW_E_PARSE);
    assert_int_equal(gw_parse_addr("example.com:80", &a), GW_E_NOENT);
}

static void alloc_failure_sweep(void **state)
{
    (void)state;
    const char *y = MINIMAL "h2: {initial_window_size: 512KiB}\n"
                            "upstreams2: 1\n"; /* includes an error path too */
    int saw_success = 0;
    for (unsigned long n = 1; n < 2000 && !saw_success; n++) {
        gw_config_t *c = NULL;
        gw_config_errors_t e = {0};
        gw_alloc_fail_after(n);
        int rv = gw_config_load_string("t.yaml", y, strlen(y), &c, &e);
        int hit = gw_alloc_fail_hit();
        gw_alloc_fail_after(0);
        if (!hit) {
            assert_int_equal(rv, GW_E_PARSE); /* the unknown key, reported */
            assert_int_equal(e.len, 1);
            saw_success = 1;
        } else {
            assert_true(rv == GW_E_NOMEM || rv == GW_E_PARSE);
            assert_null(c);
        }
        gw_config_del(c);
        gw_config_errors_free(&e);
    }
    assert_true(saw_success);
    /* and the same for a config that loads */
    gw_test_config_sweep_loads(MINIMAL, 2000, NULL);
}

/* limits.coalesce_buffer: default 1 MiB, sizes accepted, out of range
 * reported with its position. */
static void coalesce_buffer_limit(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_int_equal(c->limits.coalesce_buffer, 1024 * 1024);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL "limits: {coalesce_buffer: 256KiB}\n", &c, &e), 0);
    assert_int_equal(c->limits.coalesce_buffer, 256 * 1024);
    assert_int_equal(c->limits.body_buffer, 128 * 1024);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(MINIMAL "limits: {coalesce_buffer: 1KiB}\n",
                                "t.yaml:8:27: 'coalesce_buffer' is out of range: 1KiB (allowed "
                                "65536..1073741824)");
    gw_test_config_expect_error(MINIMAL "limits: {coalesce_buffer: 2GiB}\n",
                                "t.yaml:8:27: 'coalesce_buffer' is out of range: 2GiB (allowed "
                                "65536..1073741824)");
    gw_test_config_expect_error(
        MINIMAL "limits: {coalesce_buffer: many}\n",
        "t.yaml:8:27: 'coalesce_buffer' must be a size (e.g. 64KiB, 1MB, 4096), not 'many'");
}

/* heap: idle_trim (a duration, 0 = never) and idle_trim_free (a size): defaults 1 s and 8 MiB,
 * values kept, each bad value reported at its position. */
static void heap_idle_trim(void **state)
{
    (void)state;
    gw_config_t *c = gw_test_config_expect_ok(MINIMAL);
    assert_int_equal(c->heap.idle_trim_ms, 1000);
    assert_int_equal(c->heap.idle_trim_free, 8u << 20);
    gw_config_del(c);
    c = gw_test_config_expect_ok(MINIMAL "heap: {idle_trim: 2500ms, idle_trim_free: 64MiB}\n");
    assert_int_equal(c->heap.idle_trim_ms, 2500);
    assert_int_equal(c->heap.idle_trim_free, 64u << 20);
    gw_config_del(c);
    c = gw_test_config_expect_ok(MINIMAL "heap:\n  idle_trim: 0\n  idle_trim_free: 0\n");
    assert_int_equal(c->heap.idle_trim_ms, 0);
    assert_int_equal(c->heap.idle_trim_free, 0);
    gw_config_del(c);
    gw_test_config_expect_error(MINIMAL "heap: {idle_trim: 2h}\n",
                                "t.yaml:8:19: 'idle_trim' is out of range: 2h (allowed "
                                "0..3600000)");
    gw_test_config_expect_error(
        MINIMAL "heap: {idle_trim: soon}\n",
        "t.yaml:8:19: 'idle_trim' must be a duration (e.g. 500ms, 30s, 5m), not 'soon'");
    gw_test_config_expect_error(MINIMAL "heap:\n  idle_trim_free: 2048GiB\n",
                                "t.yaml:9:19: 'idle_trim_free' is out of range: 2048GiB (allowed "
                                "0..1099511627776)");
    gw_test_config_expect_error(
        MINIMAL "heap:\n  idle_trim_free: -1\n",
        "t.yaml:9:19: 'idle_trim_free' must be a size (e.g. 64KiB, 1MB, 4096), not '-1'");
    gw_test_config_expect_error(MINIMAL "heap: {trim: 1s}\n",
                                "t.yaml:8:8: unknown key 'trim' in heap");
    gw_test_config_expect_error(MINIMAL "heap: 1s\n",
                                "t.yaml:8:7: 'heap' must be a map, not a scalar");
}

/* acme.cluster_check_interval: how often an instance of a cluster reads acme:orders (and what
 * the orderer waits past its lock): default 10 s, 1 s..10 min, a bad value refused at its
 * position. A binary without the ACME client refuses the section itself. */
#define ACME_CHECK(v)                                                                              \
    MINIMAL "acme: {directory: https://ca.test/dir, cluster_check_interval: " v "}\n"
static void acme_cluster_check_interval(void **state)
{
    (void)state;
    if (!GW_HAVE_ACME)
        skip();
    gw_config_t *c = gw_test_config_expect_ok(MINIMAL "acme: {directory: https://ca.test/dir}\n");
    assert_int_equal(c->acme.cluster_check_interval_ms, 10000);
    gw_config_del(c);
    c = gw_test_config_expect_ok(ACME_CHECK("1s"));
    assert_int_equal(c->acme.cluster_check_interval_ms, 1000);
    gw_config_del(c);
    c = gw_test_config_expect_ok(ACME_CHECK("10m"));
    assert_int_equal(c->acme.cluster_check_interval_ms, 600000);
    gw_config_del(c);
    c = gw_test_config_expect_ok(ACME_CHECK("2500ms"));
    assert_int_equal(c->acme.cluster_check_interval_ms, 2500);
    gw_config_del(c);
    gw_test_config_expect_error(ACME_CHECK("999ms"),
                                "t.yaml:8:64: 'cluster_check_interval' is out of range: 999ms "
                                "(allowed 1000..600000)");
    gw_test_config_expect_error(ACME_CHECK("11m"),
                                "t.yaml:8:64: 'cluster_check_interval' is out of range: 11m "
                                "(allowed 1000..600000)");
    gw_test_config_expect_error(ACME_CHECK("0"),
                                "t.yaml:8:64: 'cluster_check_interval' is out of range: 0 "
                                "(allowed 1000..600000)");
    gw_test_config_expect_error(ACME_CHECK("often"),
                                "t.yaml:8:64: 'cluster_check_interval' must be a duration (e.g. "
                                "500ms, 30s, 5m), not 'often'");
    gw_test_config_expect_error(ACME_CHECK("[1s]"),
                                "t.yaml:8:64: 'cluster_check_interval' must be a duration (e.g. "
                                "500ms, 30s, 5m), not a list");
    /* the internal spelling is no key of the file */
    gw_test_config_expect_error(
        MINIMAL "acme: {directory: https://ca.test/dir, cluster_check_interval_ms: 1000}\n",
        "t.yaml:8:40: unknown key 'cluster_check_interval_ms' in acme; did you mean "
        "'cluster_check_interval'?");
}

/* routes[].coalesce_headers names one field once, whatever the case (a name
 * listed twice in different case overflowed the coalescing key's buffer). */
static void coalesce_headers_deduplicated(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *y = "listen: [{address: 127.0.0.1:8080}]\n"
                    "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                    "routes:\n"
                    "  - {upstream: app, coalesce_headers: [accept, Accept, accept-encoding, "
                    "ACCEPT, Accept-Encoding, x-a]}\n";
    assert_int_equal(gw_test_config_load(y, &c, &e), 0);
    const gw_cfg_route_t *r = &c->routes[0];
    assert_int_equal(r->coalesce_headers_len, 3);
    assert_string_equal(r->coalesce_headers[0], "accept");
    assert_string_equal(r->coalesce_headers[1], "accept-encoding");
    assert_string_equal(r->coalesce_headers[2], "x-a");
    gw_config_del(c);
    gw_config_errors_free(&e);
}

/* upstreams.*.idle_purge: default 5 s, a duration, positions on error. */
static void upstream_idle_purge(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_int_equal(c->upstreams[0].idle_purge_ms, 5000);
    gw_config_del(c);
    gw_config_errors_free(&e);
    const char *y = "listen: [{address: 127.0.0.1:8080}]\n"
                    "upstreams: {app: {servers: [127.0.0.1:9000], idle_purge: 250ms}}\n"
                    "routes: [{upstream: app}]\n";
    assert_int_equal(gw_test_config_load(y, &c, &e), 0);
    assert_int_equal(c->upstreams[0].idle_purge_ms, 250);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000], idle_purge: soon}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:2:58: 'idle_purge' must be a duration (e.g. 500ms, 30s, 5m), not 'soon'");
}

/* timeouts.request_body: default 30 s, a duration. */
static void timeouts_request_body(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_int_equal(c->timeouts.request_body_ms, 30000);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL "timeouts: {request_body: 2s}\n", &c, &e), 0);
    assert_int_equal(c->timeouts.request_body_ms, 2000);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(
        MINIMAL "timeouts: {request_body: 0ms}\n",
        "t.yaml:8:26: 'request_body' is out of range: 0ms (allowed 1..86400000)");
}

/* listen[].proxy_protocol_from: networks parsed and matched (IPv4, IPv6 prefixes that end
 * inside a byte, an address alone, IPv4-mapped IPv6 sources counted as IPv4). */
static int in_net(const gw_cfg_net_t *n, const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, addr, &a->sin_addr), 1);
    }
    return gw_cfg_net_match(n, (const struct sockaddr *)&ss);
}

static void proxy_protocol_networks(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *y = "listen:\n"
                    "  - address: 127.0.0.1:8080\n"
                    "    proxy_protocol: true\n"
                    "    proxy_protocol_from: [10.0.0.0/8, 192.168.1.7, '2001:db8::/33', "
                    "172.16.0.0/12]\n"
                    "upstreams:\n  app:\n    servers: [127.0.0.1:9001]\n"
                    "routes:\n  - upstream: app\n";
    assert_int_equal(gw_test_config_load(y, &c, &e), 0);
    const gw_cfg_listen_t *l = &c->listen[0];
    assert_true(l->proxy_protocol);
    assert_int_equal(l->proxy_timeout_ms, 5000);
    assert_int_equal(l->proxy_from_len, 4);
    assert_true(in_net(&l->proxy_from[0], "10.255.0.1"));
    assert_false(in_net(&l->proxy_from[0], "11.0.0.1"));
    assert_true(in_net(&l->proxy_from[0], "::ffff:10.1.2.3")); /* IPv4-mapped */
    assert_true(in_net(&l->proxy_from[1], "192.168.1.7"));
    assert_false(in_net(&l->proxy_from[1], "192.168.1.8"));
    assert_true(in_net(&l->proxy_from[2], "2001:db8:7fff::1"));
    assert_false(in_net(&l->proxy_from[2], "2001:db8:8000::1")); /* bit 33 differs */
    assert_false(in_net(&l->proxy_from[2], "10.0.0.1"));
    assert_true(in_net(&l->proxy_from[3], "172.31.255.255"));
    assert_false(in_net(&l->proxy_from[3], "172.32.0.0"));
    gw_config_del(c);
    gw_config_errors_free(&e);
}

/* forwarded_for (replace | append) and trusted_proxies: every route gets them; append needs
 * someone to trust; bad values and networks are refused where they are written. */
static void forwarded_for_and_trusted_proxies(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_false(c->forwarded_append);
    assert_int_equal(c->trusted_proxies_len, 0);
    assert_false(c->routes[0].forwarded_append);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL "forwarded_for: append\n"
                                                 "trusted_proxies: [10.0.0.0/8, '2001:db8::/32']\n",
                                         &c, &e),
                     0);
    assert_true(c->forwarded_append);
    assert_int_equal(c->trusted_proxies_len, 2);
    assert_true(c->routes[0].forwarded_append);
    assert_ptr_equal(c->routes[0].trusted_proxies, c->trusted_proxies);
    assert_int_equal(c->routes[0].trusted_proxies_len, 2);
    assert_true(in_net(&c->routes[0].trusted_proxies[0], "10.1.2.3"));
    assert_true(in_net(&c->routes[0].trusted_proxies[1], "2001:db8::1"));
    gw_config_del(c);
    gw_config_errors_free(&e);
    /* a list under replace trusts no one, and is accepted (switching modes keeps it) */
    assert_int_equal(
        gw_test_config_load(MINIMAL "forwarded_for: replace\ntrusted_proxies: 10.0.0.1\n", &c, &e),
        0);
    assert_false(c->routes[0].forwarded_append);
    assert_int_equal(c->trusted_proxies_len, 1);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(
        MINIMAL "forwarded_for: append\n",
        "t.yaml:8:16: forwarded_for: append needs trusted_proxies (the networks of the "
        "proxies whose X-Forwarded-For is kept)");
    gw_test_config_expect_error(
        MINIMAL "forwarded_for: keep\ntrusted_proxies: [10.0.0.0/8]\n",
        "t.yaml:8:16: 'forwarded_for' must be replace or append, not 'keep'");
    gw_test_config_expect_error(
        MINIMAL "forwarded_for: append\ntrusted_proxies: [10.0.0.0/8, 10.0.0.0/33]\n",
        "t.yaml:9:31: '10.0.0.0/33' is not a network (an address, or ADDRESS/BITS: "
        "10.0.0.0/8, 2001:db8::/32)");
}

/* proxy_protocol without proxy_protocol_from used to trust every source: it is refused, with
 * where and why; `any` spelled out (alone or in the list) trusts every IPv4 and IPv6 source. */
static void proxy_protocol_needs_its_sources(void **state)
{
    (void)state;
#define PP_HEAD "listen:\n  - address: 127.0.0.1:8080\n    proxy_protocol: true\n"
#define PP_TAIL "upstreams:\n  app:\n    servers: [127.0.0.1:9001]\nroutes:\n  - upstream: app\n"
    const char *why = "proxy_protocol needs proxy_protocol_from: the addresses of the balancers "
                      "allowed to send the header (or any, to let every source name the "
                      "client's address)";
    char msg[300];
    snprintf(msg, sizeof(msg), "t.yaml:3:21: %s", why);
    gw_test_config_expect_error(PP_HEAD PP_TAIL, msg);
    gw_test_config_expect_error(PP_HEAD "    proxy_protocol_from: []\n" PP_TAIL, msg);
    /* a bad network is reported as such, not as a missing list */
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(
        gw_test_config_load(PP_HEAD "    proxy_protocol_from: [nonsense]\n" PP_TAIL, &c, &e),
        GW_E_PARSE);
    assert_int_equal(e.len, 1);
    assert_string_equal(e.msgs[0], "t.yaml:4:27: 'nonsense' is not a network (an address, or "
                                   "ADDRESS/BITS: 10.0.0.0/8, 2001:db8::/32; or any)");
    gw_config_errors_free(&e);
    /* off: nothing to trust, nothing needed */
    assert_int_equal(
        gw_test_config_load(
            "listen:\n  - address: 127.0.0.1:8080\n    proxy_protocol: false\n" PP_TAIL, &c, &e),
        0);
    gw_config_del(c);
    gw_config_errors_free(&e);
    const char *anys[] = {PP_HEAD "    proxy_protocol_from: any\n" PP_TAIL,
                          PP_HEAD "    proxy_protocol_from: [10.0.0.0/8, any, any]\n" PP_TAIL};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(gw_test_config_load(anys[i], &c, &e), 0);
        const gw_cfg_listen_t *l = &c->listen[0];
        int v4 = 0, v6 = 0, mapped = 0;
        for (size_t k = 0; k < l->proxy_from_len; k++) {
            v4 |= in_net(&l->proxy_from[k], "203.0.113.9");
            v6 |= in_net(&l->proxy_from[k], "2001:db8::9");
            mapped |= in_net(&l->proxy_from[k], "::ffff:198.51.100.1");
        }
        assert_true(v4 && v6 && mapped);
        assert_int_equal(l->proxy_from_len, i == 0 ? 2 : 3);
        gw_config_del(c);
        gw_config_errors_free(&e);
    }
#undef PP_HEAD
#undef PP_TAIL
}

/* throttle.ipv6_prefix: default 64, range 16..128 with its position. */
static void throttle_ipv6_prefix(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_int_equal(c->throttle.ipv6_prefix, 64);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL "throttle: {ipv6_prefix: 128}\n", &c, &e), 0);
    assert_int_equal(c->throttle.ipv6_prefix, 128);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(MINIMAL "throttle: {ipv6_prefix: 8}\n",
                                "t.yaml:8:25: 'ipv6_prefix' is out of range: 8 (allowed 16..128)");
    gw_test_config_expect_error(
        MINIMAL "throttle: {ipv6_prefix: 129}\n",
        "t.yaml:8:25: 'ipv6_prefix' is out of range: 129 (allowed 16..128)");
}

/* Operations keys, their defaults and their errors. */
static void operations_keys(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(MINIMAL, &c, &e), 0);
    assert_null(c->access_log.path);
    assert_int_equal(c->access_log.format, GW_CFG_ALOG_COMBINED);
    assert_int_equal(c->access_log.request_id, 1);
    assert_int_equal(c->admin.enabled, 0);
    assert_int_equal(c->admin.timeout_ms, 2000);
    assert_null(c->pid_file);
    assert_int_equal(c->timeouts.drain_grace_ms, 1000);
    assert_int_equal(c->limits.draining_generations, 16);
    assert_string_equal(c->routes[0].name, "*/");
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL
                                         "access_log: {path: /var/log/a.log, format: json, "
                                         "request_id: false}\n"
                                         "admin: {address: '127.0.0.1:9901', timeout: 500ms}\n"
                                         "pid_file: /run/h.pid\n"
                                         "timeouts: {drain_grace: 0}\n"
                                         "limits: {draining_generations: 2}\n",
                                         &c, &e),
                     0);
    assert_string_equal(c->access_log.path, "/var/log/a.log");
    assert_int_equal(c->access_log.format, GW_CFG_ALOG_JSON);
    assert_int_equal(c->access_log.request_id, 0);
    assert_int_equal(c->admin.enabled, 1);
    assert_string_equal(c->admin.addr.text, "127.0.0.1:9901");
    assert_int_equal(c->admin.timeout_ms, 500);
    assert_string_equal(c->pid_file, "/run/h.pid");
    assert_int_equal(c->timeouts.drain_grace_ms, 0);
    assert_int_equal(c->limits.draining_generations, 2);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(gw_test_config_load(MINIMAL "access_log: {path: 'off'}\n", &c, &e), 0);
    assert_null(c->access_log.path);
    gw_config_del(c);
    gw_config_errors_free(&e);
    assert_int_equal(
        gw_test_config_load("listen:\n  - address: 127.0.0.1:8080\nupstreams:\n  app:\n"
                            "    servers: [127.0.0.1:9000]\nroutes:\n"
                            "  - { name: api, host: a.example, path: /v1/, upstream: app }\n"
                            "  - { host: b.example, path: /, upstream: app }\n",
                            &c, &e),
        0);
    assert_string_equal(c->routes[0].name, "api");
    assert_string_equal(c->routes[1].name, "b.example/");
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(
        MINIMAL "access_log: {format: xml}\n",
        "t.yaml:8:22: 'format' must be combined, combined_timing or json, not 'xml'");
    gw_test_config_expect_error(
        MINIMAL "access_log: {log_format: '$remote_addr $bogus'}\n",
        "t.yaml:8:26: access_log 'log_format': unknown variable at byte 13 ('$bogus')");
    assert_int_equal(
        gw_test_config_load(
            MINIMAL "access_log: {path: stderr, log_format: '$status ${request}'}\n", &c, &e),
        0);
    assert_non_null(c->access_log.tmpl);
    gw_config_del(c);
    gw_config_errors_free(&e);
    gw_test_config_expect_error(
        MINIMAL "access_log: {path: ''}\n",
        "t.yaml:8:13: access_log 'path' must be a file name, stderr or off");
    gw_test_config_expect_error(
        MINIMAL "admin: {address: nowhere}\n",
        "t.yaml:8:18: 'address' must be IP:PORT or [IPv6]:PORT, not 'nowhere'");
    gw_test_config_expect_error(MINIMAL "admin: {port: 1}\n",
                                "t.yaml:8:9: unknown key 'port' in admin");
    gw_test_config_expect_error(MINIMAL "admin: {}\n",
                                "t.yaml:8:8: missing required key 'address' in admin");
    gw_test_config_expect_error(MINIMAL "admin: {timeout: 1s}\n",
                                "t.yaml:8:8: missing required key 'address' in admin");
    gw_test_config_expect_error(MINIMAL "admin: {address: '127.0.0.1:9901', timeout: 5ms}\n",
                                "t.yaml:8:45: 'timeout' is out of range: 5ms (allowed 10..60000)");
    gw_test_config_expect_error(
        MINIMAL "limits: {draining_generations: 0}\n",
        "t.yaml:8:32: 'draining_generations' is out of range: 0 (allowed 1..256)");
    gw_test_config_expect_error(
        MINIMAL "timeouts: {drain_grace: 2m}\n",
        "t.yaml:8:25: 'drain_grace' is out of range: 2m (allowed 0..60000)");
    gw_test_config_expect_error("listen:\n  - address: 127.0.0.1:8080\nupstreams:\n  app:\n"
                                "    servers: [127.0.0.1:9000]\nroutes:\n"
                                "  - { name: x, path: /a, upstream: app }\n"
                                "  - { name: x, path: /b, upstream: app }\n",
                                "t.yaml:8:13: duplicate route name 'x' (first on line 7)");
}

/* A misspelt key gets the closest key valid at that place (a few edits away, a swap of two
 * neighbours counting one); a key far from every valid one gets no guess. */
static void unknown_key_did_you_mean(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams:\n  app:\n    sevrers: [127.0.0.1:9000]\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:4:5: unknown key 'sevrers' in upstream 'app'; did you mean 'servers'?");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000], max_conections: 3}}\n"
        "routes: [{upstream: app}]\n",
        "t.yaml:2:46: unknown key 'max_conections' in upstream 'app'; did you mean "
        "'max_connections'?");
    gw_test_config_expect_error(MINIMAL "Timeouts: {idle: 5s}\n",
                                "t.yaml:8:1: unknown key 'Timeouts'; did you mean 'timeouts'?");
    gw_test_config_expect_error(
        MINIMAL "timeouts: {idel: 5s}\n",
        "t.yaml:8:12: unknown key 'idel' in timeouts; did you mean 'idle'?");
    gw_test_config_expect_error(MINIMAL "timeouts: {handshake_ms: 5s}\n",
                                "t.yaml:8:12: unknown key 'handshake_ms' in timeouts; did you mean "
                                "'handshake'?");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080, protocol: [h2c]}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:36: unknown key 'protocol' in a listener; did you mean 'protocols'?");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: [127.0.0.1:9000]}}\n"
                                "routes: [{upstream: app, hots: a.example}]\n",
                                "t.yaml:3:26: unknown key 'hots' in a route; did you mean 'host'?");
    gw_test_config_expect_error(
        MINIMAL "admin: {adress: 127.0.0.1:9100}\n",
        "t.yaml:8:9: unknown key 'adress' in admin; did you mean 'address'?");
    /* nothing close: the plain message */
    gw_test_config_expect_error(MINIMAL "h2: {colour: blue}\n",
                                "t.yaml:8:6: unknown key 'colour' in h2");
}

/* A port outside 1..65535 says so, wherever an address is written. */
static void address_port_out_of_range(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen: [{address: '127.0.0.1:0'}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:20: 'address' port is out of range (1-65535): '127.0.0.1:0'");
    gw_test_config_expect_error(
        "listen: [{address: '[::1]:65536'}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:20: 'address' port is out of range (1-65535): '[::1]:65536'");
    gw_test_config_expect_error("listen: [{address: 127.0.0.1:8080}]\n"
                                "upstreams: {app: {servers: ['origin.example:123456789012']}}\n"
                                "routes: [{upstream: app}]\n",
                                "t.yaml:2:29: 'address' port is out of range (1-65535): "
                                "'origin.example:123456789012'");
    gw_test_config_expect_error(
        MINIMAL "admin: {address: 127.0.0.1:70000}\n",
        "t.yaml:8:18: 'address' port is out of range (1-65535): '127.0.0.1:70000'");
    gw_test_config_expect_error(
        MINIMAL "cluster: {redis: 'redis.example:0'}\n",
        "t.yaml:8:18: 'redis' port is out of range (1-65535): 'redis.example:0'");
    gw_cfg_addr_t a;
    assert_int_equal(gw_parse_addr("127.0.0.1:65535", &a), 0);
    assert_int_equal(gw_parse_addr("127.0.0.1:99999999999999999999", &a), GW_E_RANGE);
    assert_int_equal(gw_parse_addr(":8080", &a), GW_E_PARSE); /* not a host named "" */
}

/* nginx's `listen 8443` habit: a port alone is refused with the addresses that would say it
 * (the interfaces are the operator's choice, not a default). */
static void address_port_alone_says_how(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen: [{address: 8443}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:20: 'address' names a port but no interface: write '0.0.0.0:8443' "
        "(every IPv4 interface), '[::]:8443' (every IPv6 interface) or "
        "'127.0.0.1:8443' (this host only), not '8443'");
    gw_test_config_expect_error(
        "listen: [{address: ':8443'}]\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:20: 'address' names a port but no interface: write '0.0.0.0:8443' "
        "(every IPv4 interface), '[::]:8443' (every IPv6 interface) or "
        "'127.0.0.1:8443' (this host only), not ':8443'");
    gw_test_config_expect_error(
        MINIMAL "admin: {address: '*:9100'}\n",
        "t.yaml:8:18: 'address' names a port but no interface: write '0.0.0.0:9100' "
        "(every IPv4 interface), '[::]:9100' (every IPv6 interface) or "
        "'127.0.0.1:9100' (this host only), not '*:9100'");
    gw_test_config_expect_error(
        "listen: [{address: 127.0.0.1:8080}]\n"
        "upstreams: {app: {servers: [':9000']}}\nroutes: [{upstream: app}]\n",
        "t.yaml:2:29: 'address' names a port but no host: write '127.0.0.1:9000' "
        "(this host) or HOST:9000, not ':9000'");
    gw_test_config_expect_error(
        "listen: 8443\n"
        "upstreams: {app: {servers: [127.0.0.1:9000]}}\nroutes: [{upstream: app}]\n",
        "t.yaml:1:9: 'listen' must be a list of listeners, not a scalar: write "
        "'listen: [{address: 0.0.0.0:8443}]'");
}

/* libyaml only says "found character that cannot start any token" for a tab. */
static void yaml_tab_says_tabs_cannot_indent(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        "listen:\n\t- address: 127.0.0.1:8080\n",
        "t.yaml:2:1: YAML syntax error: found character that cannot start any token "
        "while scanning for the next token (a tab: tabs cannot indent YAML, indent "
        "with spaces)");
    gw_test_config_expect_error(
        MINIMAL "h2:\n  \tmax_pushes: 1\n",
        "t.yaml:9:3: YAML syntax error: found character that cannot start any token "
        "while scanning for the next token (a tab: tabs cannot indent YAML, indent "
        "with spaces)");
    /* another syntax error gets no word about tabs */
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load("listen: [\n  {address: 1\n", &c, &e), GW_E_PARSE);
    assert_int_equal(e.len, 1);
    assert_null(strstr(e.msgs[0], "tab"));
    gw_config_errors_free(&e);
}

/* -c DIRECTORY: said to be a directory (it read as an empty config). */
static void config_path_is_a_directory(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e = {0};
    const char *dir = GW_SOURCE_ROOT "/config";
    assert_int_equal(gw_config_load_file(dir, &c, &e), GW_E_IO);
    assert_null(c);
    assert_int_equal(e.len, 1);
    assert_string_equal(e.msgs[0], GW_SOURCE_ROOT "/config:1:1: is a directory, not a config file");
    gw_config_errors_free(&e);
}

/* A route naming an upstream that does not exist: the upstreams there are, and the closest. */
static void unknown_upstream_lists_known(void **state)
{
    (void)state;
    const char *head = "listen: [{address: 127.0.0.1:8080}]\n"
                       "upstreams:\n"
                       "  app: {servers: [127.0.0.1:9000]}\n"
                       "  static: {servers: [127.0.0.1:9001]}\n";
    char y[512];
    snprintf(y, sizeof(y), "%sroutes: [{upstream: statc}]\n", head);
    gw_test_config_expect_error(
        y, "t.yaml:5:21: route names unknown upstream 'statc'; did you mean 'static'? "
           "(upstreams: app, static)");
    snprintf(y, sizeof(y), "%sroutes: [{upstream: images}]\n", head);
    gw_test_config_expect_error(
        y, "t.yaml:5:21: route names unknown upstream 'images' (upstreams: app, static)");
    /* a list that does not fit the message ends with "..." (never starts with a comma) */
    char longname[401], big[1024];
    memset(longname, 'u', 400);
    longname[400] = 0;
    snprintf(big, sizeof(big),
             "listen: [{address: 127.0.0.1:8080}]\nupstreams: {%s: {servers: [127.0.0.1:9000]}}\n"
             "routes: [{upstream: app}]\n",
             longname);
    gw_test_config_expect_error(big,
                                "t.yaml:3:21: route names unknown upstream 'app' (upstreams: ...)");
}

/* The keys that name files keep where they were written, so that what only start-up can
 * find (a key that does not match its certificate, a log directory missing) is reported at
 * FILE:LINE:COL too; gw_config_error_add writes such a line. */
static void file_keys_keep_their_position(void **state)
{
    (void)state;
    gw_config_t *c;
    gw_config_errors_t e;
    const char *y = "listen:\n"
                    "  - address: 127.0.0.1:8443\n"
                    "    tls:\n"
                    "      certificate: /x/c.pem\n"
                    "      key:   /x/k.pem\n"
                    "      self_signed: true\n"
                    "      ciphers: ECDHE-ECDSA-AES128-GCM-SHA256\n"
                    "upstreams:\n"
                    "  app: {servers: [127.0.0.1:9000], tls: true, tls_ca: /x/ca.pem}\n"
                    "routes: [{upstream: app}]\n"
                    "access_log: {format: json, path: /x/access.log}\n"
                    "pid_file: /x/h2gate.pid\n";
    assert_int_equal(gw_test_config_load(y, &c, &e), 0);
    const gw_cfg_cert_t *cert = &c->listen[0].tls->certs[0];
    assert_string_equal(cert->certificate_at.file, "t.yaml");
    assert_int_equal(cert->certificate_at.line, 4);
    assert_int_equal(cert->certificate_at.col, 20);
    assert_int_equal(cert->key_at.line, 5);
    assert_int_equal(cert->key_at.col, 14);
    assert_int_equal(c->listen[0].tls->ciphers_at.line, 7);
    assert_int_equal(c->listen[0].tls->ciphersuites_at.line, 0); /* not written */
    assert_int_equal(c->upstreams[0].tls_ca_at.line, 9);
    assert_int_equal(c->upstreams[0].tls_ca_at.col, 55);
    assert_int_equal(c->access_log.path_at.line, 11);
    assert_int_equal(c->access_log.path_at.col, 34);
    assert_int_equal(c->pid_file_at.line, 12);
    assert_int_equal(c->pid_file_at.col, 11);
    gw_config_errors_t later = {0};
    assert_int_equal(gw_config_error_add(&later, &cert->key_at,
                                         "key '%s' does not match certificate '%s'", cert->key,
                                         cert->certificate),
                     0);
    assert_int_equal(gw_config_error_add(&later, NULL, "no position"), 0);
    assert_int_equal(later.len, 2);
    assert_string_equal(later.msgs[0],
                        "t.yaml:5:14: key '/x/k.pem' does not match certificate '/x/c.pem'");
    assert_string_equal(later.msgs[1], "<config>: no position");
    gw_config_errors_free(&later);
    gw_config_del(c);
}

#define ROUTES_HEAD                                                                                \
    "listen:\n"                                                                                    \
    "  - address: 127.0.0.1:8080\n"                                                                \
    "upstreams:\n"                                                                                 \
    "  app:\n"                                                                                     \
    "    servers: [127.0.0.1:9000]\n"                                                              \
    "routes:\n"                                                                                    \
    "  - upstream: app\n"

static int allows(const gw_cfg_route_t *r, const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(ip, ':')) {
        ss.ss_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
    } else {
        ss.ss_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &((struct sockaddr_in *)&ss)->sin_addr), 1);
    }
    return gw_cfg_acl_allows(r->acl, (struct sockaddr *)&ss);
}

/* allow/deny: a network or a list; deny wins; allow refuses the addresses outside it; a bare
 * address is one host; an IPv4-mapped client is checked as IPv4. */
static void acl_semantics(void **state)
{
    (void)state;
    const char *text = ROUTES_HEAD "    path: /a\n"
                                   "    allow: [10.0.0.0/8, '2001:db8::/32']\n"
                                   "    deny: [10.1.0.0/16, '2001:db8::7']\n"
                                   "  - upstream: app\n"
                                   "    path: /d\n"
                                   "    deny: 192.0.2.1\n"
                                   "  - upstream: app\n";
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(text, &c, &e), 0);
    const gw_cfg_route_t *a = &c->routes[0], *d = &c->routes[1];
    assert_true(allows(a, "10.2.3.4"));
    assert_false(allows(a, "10.1.3.4")); /* deny wins */
    assert_false(allows(a, "11.0.0.1")); /* not in allow */
    assert_true(allows(a, "2001:db8::8"));
    assert_false(allows(a, "2001:db8::7"));
    assert_true(allows(a, "::ffff:10.2.3.4"));
    assert_false(allows(a, "::ffff:10.1.3.4"));
    assert_false(gw_cfg_acl_allows(a->acl, NULL)); /* no IP address: not in allow */
    assert_false(allows(d, "192.0.2.1"));
    assert_true(allows(d, "192.0.2.2"));
    assert_true(allows(d, "::1"));
    assert_true(gw_cfg_acl_allows(d->acl, NULL));
    assert_null(c->routes[2].acl);
    assert_true(gw_cfg_acl_allows(c->routes[2].acl, NULL));
    gw_config_del(c);
}

static void acl_errors(void **state)
{
    (void)state;
    gw_test_config_expect_error(
        ROUTES_HEAD "    allow: [10.0.0.0/8, 10.0.0.1/8]\n",
        "t.yaml:8:25: 'allow' entry '10.0.0.1/8' has bits set past its prefix length: "
        "write 10.0.0.0/8 for the network, or the address alone for one host");
    gw_test_config_expect_error(
        ROUTES_HEAD "    deny: [10.0.0.0/33]\n",
        "t.yaml:8:12: 'deny' entry '10.0.0.0/33': the prefix length must be 0..32 for "
        "IPv4");
    gw_test_config_expect_error(
        ROUTES_HEAD "    deny: ['::/129']\n",
        "t.yaml:8:12: 'deny' entry '::/129': the prefix length must be 0..128 for IPv6");
    gw_test_config_expect_error(
        ROUTES_HEAD "    deny: [10.0.0.0/]\n",
        "t.yaml:8:12: 'deny' entry '10.0.0.0/': the prefix length must be 0..32 for IPv4");
    gw_test_config_expect_error(
        ROUTES_HEAD "    allow: example.com\n",
        "t.yaml:8:12: 'allow' entry 'example.com' is not an IP address or network "
        "(192.0.2.7, 10.0.0.0/8, 2001:db8::/32)");
    gw_test_config_expect_error(
        ROUTES_HEAD "    allow: []\n",
        "t.yaml:8:12: 'allow' must be a network or a list of networks (10.0.0.0/8, ::1, "
        "2001:db8::/32), not an empty list");
    gw_test_config_expect_error(ROUTES_HEAD "    alow: [10.0.0.0/8]\n",
                                "t.yaml:8:5: unknown key 'alow' in a route; did you mean 'allow'?");
}

/* Write n bytes of 'x' to a temporary file whose name ends with suffix; its path into out. */
static void page_file(char *out, size_t cap, const char *suffix, size_t n)
{
    snprintf(out, cap, "/tmp/gw-test-page-%d%s", (int)getpid(), suffix);
    FILE *f = fopen(out, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc('x', f);
    fclose(f);
}

static void error_pages_loaded(void **state)
{
    (void)state;
    char html[128], json[128], other[128], text[2048];
    page_file(html, sizeof(html), ".HTML", 10);
    page_file(json, sizeof(json), ".json", 3);
    page_file(other, sizeof(other), ".page", 0);
    snprintf(text, sizeof(text),
             ROUTES_HEAD "    error_pages: {502: %s}\n"
                         "    intercept_errors: true\n"
                         "  - upstream: app\n"
                         "    path: /b\n"
                         "error_pages: {502: %s, 503: %s, 404: %s}\n",
             json, html, other, html);
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(text, &c, &e), 0);
    assert_int_equal(c->error_page_max, 64 * 1024);
    const gw_cfg_error_page_t *p = gw_cfg_error_page(c, &c->routes[0], 502);
    assert_non_null(p);
    assert_int_equal(p->len, 3);
    assert_string_equal(p->type, "application/json");
    assert_true(c->routes[0].intercept_errors);
    p = gw_cfg_error_page(c, &c->routes[1], 502); /* the top level's */
    assert_int_equal(p->len, 10);
    assert_string_equal(p->type, "text/html; charset=utf-8");
    p = gw_cfg_error_page(c, &c->routes[0], 503);
    assert_int_equal(p->len, 0);
    assert_string_equal(p->type, "application/octet-stream");
    assert_non_null(gw_cfg_error_page(c, NULL, 404));
    assert_null(gw_cfg_error_page(c, NULL, 504));
    gw_config_del(c);
    unlink(html);
    unlink(json);
    unlink(other);
}

static void error_pages_errors(void **state)
{
    (void)state;
    char big[128], text[2048], want[512];
    page_file(big, sizeof(big), ".txt", 101);
    snprintf(text, sizeof(text), ROUTES_HEAD "error_page_max: 100\nerror_pages: {503: %s}\n", big);
    snprintf(want, sizeof(want),
             "t.yaml:9:20: error page '%s' has 101 bytes, more than error_page_max (100)", big);
    gw_test_config_expect_error(text, want);
    snprintf(text, sizeof(text), ROUTES_HEAD "error_page_max: 101\nerror_pages: {503: %s}\n", big);
    gw_config_t *c;
    gw_config_errors_t e;
    assert_int_equal(gw_test_config_load(text, &c, &e), 0);
    gw_config_del(c);
    unlink(big);
    gw_test_config_expect_error(
        ROUTES_HEAD "    error_pages: {503: /nonexistent/page.html}\n",
        "t.yaml:8:24: error page '/nonexistent/page.html' cannot be read: No such file "
        "or directory");
    gw_test_config_expect_error(ROUTES_HEAD "error_pages: {503: /tmp}\n",
                                "t.yaml:8:20: error page '/tmp' is not a regular file");
    gw_test_config_expect_error(
        ROUTES_HEAD "error_pages: {200: x.html}\n",
        "t.yaml:8:15: error_pages: '200' is not a status the gateway answers with (400, "
        "401, 403, 404, 405, 408, 429, or 500..599)");
    gw_test_config_expect_error(
        ROUTES_HEAD "error_pages: {402: x.html}\n",
        "t.yaml:8:15: error_pages: '402' is not a status the gateway answers with (400, "
        "401, 403, 404, 405, 408, 429, or 500..599)");
    gw_test_config_expect_error(ROUTES_HEAD "error_pages: [x.html]\n",
                                "t.yaml:8:14: 'error_pages' must be a map, not a list");
    gw_test_config_expect_error(
        ROUTES_HEAD "error_page_max: 0\n",
        "t.yaml:8:17: 'error_page_max' is out of range: 0 (allowed 1..16777216)");
}

/* What acl_and_pages_alloc_failure_sweep checks of the config once it loads. */
static void acl_and_pages_loaded(const gw_config_t *c)
{
    assert_non_null(gw_cfg_error_page(c, &c->routes[0], 404));
    assert_false(allows(&c->routes[0], "10.1.2.3"));
}

/* Every allocation of the access lists and error pages may fail: the load says GW_E_NOMEM and
 * leaves nothing behind (ASan's leak check in build-san), until it succeeds. */
static void acl_and_pages_alloc_failure_sweep(void **state)
{
    (void)state;
    char html[128], text[1024];
    page_file(html, sizeof(html), ".html", 20);
    snprintf(text, sizeof(text),
             ROUTES_HEAD "    allow: [10.0.0.0/8, '2001:db8::/32']\n"
                         "    deny: 10.1.2.3\n"
                         "    error_pages: {503: %s}\n"
                         "error_pages: {502: %s, 404: %s}\n",
             html, html, html);
    gw_test_config_sweep_loads(text, 4000, acl_and_pages_loaded);
    unlink(html);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(operations_keys),
    cmocka_unit_test(minimal_contract_gets_defaults),
    cmocka_unit_test(route_ipv6_host_is_canonical),
    cmocka_unit_test(full_config_values),
    cmocka_unit_test(error_unknown_key),
    cmocka_unit_test(error_bad_type),
    cmocka_unit_test(error_bad_unit),
    cmocka_unit_test(error_out_of_range),
    cmocka_unit_test(error_missing_required),
    cmocka_unit_test(error_duplicate_listener_and_key),
    cmocka_unit_test(error_route_checks),
    cmocka_unit_test(error_tls_checks),
    cmocka_unit_test(client_auth_keys),
    cmocka_unit_test(all_errors_collected),
    cmocka_unit_test(yaml_syntax_error_has_position),
    cmocka_unit_test(shipped_configs_load),
    cmocka_unit_test(unit_parsers),
    cmocka_unit_test(alloc_failure_sweep),
    cmocka_unit_test(coalesce_buffer_limit),
    cmocka_unit_test(heap_idle_trim),
    cmocka_unit_test(acme_cluster_check_interval),
    cmocka_unit_test(coalesce_headers_deduplicated),
    cmocka_unit_test(throttle_ipv6_prefix),
    cmocka_unit_test(upstream_idle_purge),
    cmocka_unit_test(timeouts_request_body),
    cmocka_unit_test(proxy_protocol_networks),
    cmocka_unit_test(forwarded_for_and_trusted_proxies),
    cmocka_unit_test(proxy_protocol_needs_its_sources),
    cmocka_unit_test(unknown_key_did_you_mean),
    cmocka_unit_test(address_port_out_of_range),
    cmocka_unit_test(address_port_alone_says_how),
    cmocka_unit_test(yaml_tab_says_tabs_cannot_indent),
    cmocka_unit_test(config_path_is_a_directory),
    cmocka_unit_test(unknown_upstream_lists_known),
    cmocka_unit_test(file_keys_keep_their_position),
    cmocka_unit_test(acl_semantics),
    cmocka_unit_test(acl_errors),
    cmocka_unit_test(error_pages_loaded),
    cmocka_unit_test(error_pages_errors),
    cmocka_unit_test(acl_and_pages_alloc_failure_sweep),
};

GW_TEST_MAIN(tests)
