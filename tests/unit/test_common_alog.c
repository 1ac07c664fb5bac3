/* Unit tests of common/alog: the combined and JSON access log lines, escaping of hostile
 * bytes, request ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alog.h"
#include "common/err.h"

/* 2026-12-05T11:40:22.123456Z */
#define NOW_US 1796470822123456ull

static gw_alog_t sample(void)
{
    gw_alog_t r;
    gw_alog_init(&r);
    r.start_ns = 1000000000;
    r.head_ns = r.start_ns + 2500000; /* 2.5 ms */
    r.last_ns = r.start_ns + 3000000; /* 3 ms */
    r.end_ns = r.start_ns + 3250000;  /* 3.25 ms */
    r.peer = "127.0.0.1:51234";
    r.proto = "h2";
    r.method = GW_SLICE_LIT("GET");
    r.authority = GW_SLICE_LIT("example.com");
    r.path = GW_SLICE_LIT("/a?b=1");
    r.user_agent = GW_SLICE_LIT("curl/7.88.1");
    r.status = 200;
    r.bytes_out = 1024;
    return r;
}

static const char *line(gw_bytes_t *b, gw_alog_format_t f, const gw_alog_t *r)
{
    b->len = 0;
    assert_int_equal(gw_alog_format(b, f, r, NOW_US), 0);
    assert_int_equal(gw_bytes_append(b, "", 1), 0); /* NUL for the string compare */
    return (const char *)b->base;
}

/* The tests that format lines get an empty buffer in *state, freed after them. */
static int buf_setup(void **state)
{
    gw_bytes_t *b = malloc(sizeof(*b));
    if (!b)
        return -1;
    gw_bytes_init(b, 0);
    *state = b;
    return 0;
}

static int buf_teardown(void **state)
{
    gw_bytes_free(*state);
    free(*state);
    return 0;
}

static void combined_line(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    assert_string_equal(line(b, GW_ALOG_COMBINED, &r),
                        "127.0.0.1 - - [05/Dec/2026:11:40:22 +0000] \"GET /a?b=1 HTTP/2.0\" 200 "
                        "1024 \"-\" \"curl/7.88.1\"\n");
    r.proto = "http/1.1";
    r.peer = "[::1]:443";
    r.user_agent = GW_SLICE_LIT("a\"b\\c\x01\xff");
    r.referer = GW_SLICE_LIT("x");
    assert_string_equal(line(b, GW_ALOG_COMBINED, &r),
                        "::1 - - [05/Dec/2026:11:40:22 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1024 "
                        "\"x\" \"a\\x22b\\x5cc\\x01\\xff\"\n");
}

static void json_line(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    r.upstream = "app";
    r.route = "* /";
    r.server = "127.0.0.1:8080";
    r.connect_us = 150;
    r.upstream_head_us = 2100;
    r.retries = 1;
    r.coalesced = 1;
    r.tls_version = "TLSv1.3";
    r.tls_cipher = "TLS_AES_128_GCM_SHA256";
    r.sni = "example.com";
    r.client_verify = "SUCCESS";
    r.client_subject = "CN=alice,O=Example \\\"Q\\\"";
    memcpy(r.id, "abc-1", 5);
    r.id_len = 5;
    r.bytes_in = 7;
    assert_string_equal(
        line(b, GW_ALOG_JSON, &r),
        "{\"time\":\"2026-12-05T11:40:22.123Z\",\"client\":\"127.0.0.1\",\"client_port\":51234,"
        "\"request_id\":\"abc-1\",\"protocol\":\"h2\",\"tls_version\":\"TLSv1.3\","
        "\"tls_cipher\":\"TLS_AES_128_GCM_SHA256\",\"sni\":\"example.com\",\"method\":\"GET\","
        "\"authority\":\"example.com\",\"path\":\"/a?b=1\",\"request_line\":null,"
        "\"user_agent\":\"curl/7.88.1\","
        "\"referer\":null,\"status\":200,"
        "\"bytes_received\":7,\"bytes_sent\":1024,\"duration_ms\":3.250,"
        "\"time_to_head_ms\":2.500,\"time_to_last_byte_ms\":3.000,\"route\":\"* /\","
        "\"upstream\":\"app\",\"upstream_server\":\"127.0.0.1:8080\","
        "\"upstream_connect_ms\":0.150,\"upstream_header_ms\":2.100,"
        "\"upstream_response_ms\":null,\"retries\":1,"
        "\"coalesced\":true,\"pushed\":false,\"throttled\":false,\"h2_error\":null,"
        "\"tls_client_verify\":\"SUCCESS\","
        "\"tls_client_subject\":\"CN=alice,O=Example \\\\\\\"Q\\\\\\\"\","
        "\"remote_user\":null,\"auth\":null,\"cache\":null}\n");
}

/* basic auth's user is combined's third field, json's remote_user, and $remote_user (the
 * template equals combined for it: templates below) */
static void remote_user(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    r.user = "al\"ice";
    r.auth = GW_ALOG_AUTH_VERIFIED;
    assert_string_equal(
        line(b, GW_ALOG_COMBINED, &r),
        "127.0.0.1 - al\\x22ice [05/Dec/2026:11:40:22 +0000] \"GET /a?b=1 HTTP/2.0\" "
        "200 1024 \"-\" \"curl/7.88.1\"\n");
    const char *j = line(b, GW_ALOG_JSON, &r);
    assert_non_null(
        strstr(j, ",\"remote_user\":\"al\\\"ice\",\"auth\":\"verified\",\"cache\":null}\n"));
    r.user = NULL;
    r.auth = GW_ALOG_AUTH_FAILED;
    j = line(b, GW_ALOG_JSON, &r);
    assert_non_null(strstr(j, ",\"remote_user\":null,\"auth\":\"failed\",\"cache\":null}\n"));
}

static void json_escapes_hostile_bytes(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    /* quote, backslash, controls, DEL, valid UTF-8 (é, €, 😀), invalid UTF-8: a lone
     * continuation byte, an overlong '/', a surrogate, a truncated sequence */
    r.path = GW_SLICE_LIT("/\"\\\n\t\x01\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x80\xc0\xaf"
                          "\xed\xa0\x80\xe2\x80\xa8\xe2\x82");
    const char *s = line(b, GW_ALOG_JSON, &r);
    assert_non_null(strstr(s, "\"path\":\"/\\\"\\\\\\n\\t\\u0001\\u007f\xc3\xa9\xe2\x82\xac"
                              "\xf0\x9f\x98\x80\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                              "\\u2028\\ufffd\\ufffd\","));
    /* a value is cut at GW_ALOG_MAX_VALUE bytes: the line stays bounded */
    static uint8_t big[100000];
    memset(big, 'a', sizeof(big));
    r.path = (gw_slice_t){big, sizeof(big)};
    r.user_agent = (gw_slice_t){big, sizeof(big)};
    s = line(b, GW_ALOG_JSON, &r);
    assert_true(b->len < 2 * GW_ALOG_MAX_VALUE + 1024);
    assert_true(b->len > GW_ALOG_MAX_VALUE);
    line(b, GW_ALOG_COMBINED, &r);
    assert_true(b->len < 2 * GW_ALOG_MAX_VALUE + 1024);
    /* nothing present: nulls and dashes */
    gw_alog_t e;
    gw_alog_init(&e);
    s = line(b, GW_ALOG_JSON, &e);
    assert_non_null(strstr(s, "\"client\":null,\"client_port\":null,\"request_id\":null"));
    assert_non_null(strstr(s, "\"time_to_head_ms\":null"));
    assert_non_null(strstr(s, "\"upstream_connect_ms\":null"));
    s = line(b, GW_ALOG_COMBINED, &e);
    /* no request line read, no response: "-" and 444 (a status log readers take) */
    assert_string_equal(s, "- - - [05/Dec/2026:11:40:22 +0000] \"-\" 444 0 \"-\" \"-\"\n");
}

/* A record is reused (the stream pools keep them): gw_alog_init makes the previous request's
 * leftovers a fresh record whose line shows none of them; gw_alog_init_hot (the access log is
 * off) makes what the metrics count fresh. */
static void reused_record(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    r.upstream = "app";
    r.route = "* /";
    r.server = "127.0.0.1:8080";
    r.connect_us = r.upstream_head_us = r.upstream_queue_us = r.upstream_resp_us = 77;
    r.h2_error = "CANCEL";
    r.referer = GW_SLICE_LIT("x");
    r.tls_version = "TLSv1.3";
    r.cache = "hit";
    r.user = "alice";
    r.retries = 3;
    r.coalesced = r.throttled = r.rate_limited = r.client_gone = 1;
    r.auth = GW_ALOG_AUTH_VERIFIED;
    r.route_ix = 2;
    memcpy(r.id, "abc-1", 5);
    r.id_len = 5;
    gw_alog_init(&r);
    r.end_ns = 1;
    assert_string_equal(line(b, GW_ALOG_COMBINED_TIMING, &r),
                        "- - - [05/Dec/2026:11:40:22 +0000] \"-\" 444 0 \"-\" \"-\" 0.000 - - - - "
                        "\"-\" \"-\"\n");
    /* every field the JSON line shows is as in a record never used */
    char reused[1024];
    snprintf(reused, sizeof(reused), "%s", line(b, GW_ALOG_JSON, &r));
    gw_alog_t fresh;
    memset(&fresh, 0, sizeof(fresh));
    gw_alog_init(&fresh);
    fresh.end_ns = 1;
    assert_string_equal(reused, line(b, GW_ALOG_JSON, &fresh));

    r = sample();
    r.upstream = "app";
    r.connect_us = r.upstream_head_us = r.upstream_queue_us = r.upstream_resp_us = 77;
    r.retries = 3;
    r.coalesced = r.rate_limited = 1;
    r.auth = GW_ALOG_AUTH_VERIFIED;
    r.route_ix = 2;
    r.id_len = 5;
    gw_alog_init_hot(&r);
    assert_int_equal(r.start_ns | r.end_ns | r.head_ns | r.last_ns | r.bytes_in | r.bytes_out, 0);
    assert_true(r.connect_us == -1 && r.upstream_head_us == -1 && r.upstream_queue_us == -1 &&
                r.upstream_resp_us == -1);
    assert_int_equal(r.route_ix, UINT32_MAX);
    assert_int_equal(r.status | r.retries | r.coalesced | r.rate_limited | r.auth | r.id_len, 0);
    assert_null(r.upstream);
}

/* combined_timing: combined, then nginx's $request_time $upstream_connect_time
 * $upstream_header_time $upstream_response_time and the request id; `-` for what is unknown,
 * 0.000 for the connect of a kept connection (as nginx logs it). */
static void combined_timing_line(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r = sample();
    r.proto = "http/1.0";
    r.server = "127.0.0.1:8080";
    r.connect_us = 1250;
    r.upstream_head_us = 2100;
    r.upstream_resp_us = 2900;
    memcpy(r.id, "abc-1", 5);
    r.id_len = 5;
    assert_string_equal(line(b, GW_ALOG_COMBINED_TIMING, &r),
                        "127.0.0.1 - - [05/Dec/2026:11:40:22 +0000] \"GET /a?b=1 HTTP/1.0\" 200 "
                        "1024 \"-\" \"curl/7.88.1\" 0.003 0.001 0.002 0.002 abc-1 \"-\" \"-\"\n");
    r.connect_us = -1; /* a kept connection */
    r.end_ns = r.start_ns + 1234567890ull;
    assert_non_null(strstr(line(b, GW_ALOG_COMBINED_TIMING, &r),
                           "\"curl/7.88.1\" 1.234 0.000 0.002 0.002 abc-1 \"-\" \"-\"\n"));
    /* the client certificate's verification and subject come last, escaped like the rest */
    r.client_verify = "FAILED:certificate has expired";
    r.client_subject = "CN=bob \"x\"";
    assert_non_null(strstr(line(b, GW_ALOG_COMBINED_TIMING, &r),
                           " abc-1 \"FAILED:certificate has expired\" \"CN=bob \\x22x\\x22\"\n"));
    /* answered by the gateway itself: no server tried, no origin times, no id */
    gw_alog_t g = sample();
    g.status = 429;
    assert_non_null(strstr(line(b, GW_ALOG_COMBINED_TIMING, &g),
                           "\" 429 1024 \"-\" \"curl/7.88.1\" 0.003 - - - - \"-\" \"-\"\n"));
    /* the same record in plain combined has nothing after the user agent */
    const char *c = line(b, GW_ALOG_COMBINED, &r);
    const char *tail = "\"curl/7.88.1\"\n";
    assert_string_equal(c + strlen(c) - strlen(tail), tail);
}

/* What the combined formats show for a request refused before its head was whole (the raw
 * request line, escaped, or "-") and for one that got no response head (the status nginx would
 * log: goaccess refuses a line with status 0); JSON keeps status 0 and gives the line. */
static void refused_and_unanswered_requests(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_t r;
    gw_alog_init(&r);
    r.peer = "10.0.0.1:4000";
    r.proto = "http/1.1";
    r.status = 400;
    r.request_line = GW_SLICE_LIT("BR@W /x\"y\x01 HTTP/1.1");
    assert_string_equal(line(b, GW_ALOG_COMBINED, &r),
                        "10.0.0.1 - - [05/Dec/2026:11:40:22 +0000] \"BR@W /x\\x22y\\x01 "
                        "HTTP/1.1\" 400 0 \"-\" \"-\"\n");
    assert_non_null(strstr(line(b, GW_ALOG_JSON, &r),
                           "\"method\":null,\"authority\":null,\"path\":null,"
                           "\"request_line\":\"BR@W /x\\\"y\\u0001 HTTP/1.1\""));
    r.request_line = (gw_slice_t){NULL, 0};
    r.status = 408;
    assert_non_null(strstr(line(b, GW_ALOG_COMBINED, &r), "] \"-\" 408 0 "));
    static const struct {
        const char *h2_error;
        int client_gone;
        unsigned clf;
    } cases[] = {
        {NULL, 0, 444},
        {NULL, 1, 499},
        {"CANCEL", 1, 499},
        {"PROTOCOL_ERROR", 0, 400},
        {"REFUSED_STREAM", 0, 503},
        {"ENHANCE_YOUR_CALM", 0, 429},
        {"INTERNAL_ERROR", 0, 500},
        {"CANCEL", 0, 444},
        {"FLOW_CONTROL_ERROR", 0, 400},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_alog_t u = sample();
        u.status = 0;
        u.h2_error = cases[i].h2_error;
        u.client_gone = (uint8_t)cases[i].client_gone;
        assert_int_equal(gw_alog_clf_status(&u), cases[i].clf);
        char want[64];
        snprintf(want, sizeof(want), "HTTP/2.0\" %u 1024 ", cases[i].clf);
        assert_non_null(strstr(line(b, GW_ALOG_COMBINED_TIMING, &u), want));
        assert_non_null(strstr(line(b, GW_ALOG_JSON, &u), "\"status\":0,"));
    }
    gw_alog_t a = sample();
    a.status = 204;
    a.client_gone = 1; /* answered: the answer's status */
    assert_int_equal(gw_alog_clf_status(&a), 204);
}

/* gw_alog_tmpl_new() refuses text with GW_E_INVAL, no template, the reason why at offset at. */
static void expect_bad_template(const char *text, const char *why, size_t at)
{
    gw_alog_tmpl_t *t = NULL;
    const char *got = NULL;
    size_t got_at = 0;
    int rv = gw_alog_tmpl_new(text, &t, &got, &got_at);
    if (rv != GW_E_INVAL || t || !got || strcmp(got, why) != 0 || got_at != at)
        fail_msg("template \"%s\": %s, %s \"%s\" at %zu (want GW_E_INVAL, \"%s\" at %zu)", text,
                 gw_errname(rv), t ? "a template" : "no template", got ? got : "(null)", got_at,
                 why, at);
}

/* log_format templates: every variable, nginx's escaping and dashes, and the two combined
 * formats written as templates give the same lines as the built-in ones. */
static void templates(void **state)
{
    gw_bytes_t *b = *state;
    gw_alog_tmpl_t *t;
    const char *why;
    size_t at;
    expect_bad_template("", "empty", 0);
    expect_bad_template("$status $nope", "unknown variable", 8);
    expect_bad_template("a $ b", "a $ without a variable name", 2);
    expect_bad_template("${status", "a ${ without a variable name and }", 0);
    expect_bad_template("${}", "a ${ without a variable name and }", 0);
    expect_bad_template("x\ty", "control byte", 1);
    expect_bad_template("$Status", "a $ without a variable name", 0);
    char many[600] = "";
    for (int i = 0; i < 65; i++)
        strcat(many, "$status ");
    assert_int_equal(gw_alog_tmpl_new(many, &t, &why, &at), GW_E_INVAL);
    /* every variable */
    gw_alog_t r = sample();
    r.server = "127.0.0.1:8080";
    r.route = "api";
    r.upstream = "app";
    r.connect_us = -1;
    r.upstream_head_us = 2100;
    r.upstream_resp_us = 2900;
    r.retries = 2;
    r.bytes_in = 9;
    r.tls_version = "TLSv1.3";
    r.client_verify = "SUCCESS";
    r.client_subject = "CN=a b";
    r.referer = GW_SLICE_LIT("r\"ef");
    memcpy(r.id, "id-1", 4);
    r.id_len = 4;
    char all[1024] = "";
    for (size_t i = 0; gw_alog_tmpl_vars(i); i++) {
        strcat(all, i ? "|${" : "${");
        strcat(all, gw_alog_tmpl_vars(i));
        strcat(all, "}");
    }
    assert_int_equal(gw_alog_tmpl_new(all, &t, &why, &at), 0);
    b->len = 0;
    assert_int_equal(gw_alog_format_tmpl(b, t, &r, NOW_US), 0);
    assert_int_equal(gw_bytes_append(b, "", 1), 0);
    assert_string_equal((const char *)b->base,
                        "127.0.0.1|51234|-|05/Dec/2026:11:40:22 +0000|2026-12-05T11:40:22+00:00|"
                        "1796470822.123|GET /a?b=1 HTTP/2.0|GET|/a?b=1|HTTP/2.0|example.com|200|"
                        "1024|9|r\\x22ef|curl/7.88.1|0.003|127.0.0.1:8080|0.000|0.002|0.002|id-1|"
                        "TLSv1.3|-|-|SUCCESS|CN=a b|api|app|2|-\n");
    gw_alog_tmpl_del(t);
    /* combined and combined_timing as templates */
    static const char *const combined =
        "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent "
        "\"$http_referer\" \"$http_user_agent\"";
    char timing[512];
    snprintf(timing, sizeof(timing), "%s %s", combined,
             "$request_time $upstream_connect_time $upstream_header_time "
             "$upstream_response_time $request_id \"$ssl_client_verify\" \"$ssl_client_s_dn\"");
    gw_alog_t recs[5];
    recs[0] = r;
    recs[1] = sample();
    recs[1].status = 0;
    recs[1].client_gone = 1;
    gw_alog_init(&recs[2]);
    recs[2].status = 400;
    recs[2].request_line = GW_SLICE_LIT("BR@W /\x01 HTTP/1.1");
    gw_alog_init(&recs[3]);
    recs[3].client_verify = "FAILED:certificate revoked";
    recs[4] = sample();
    recs[4].user = "bob";
    gw_alog_tmpl_t *tc, *tt;
    assert_int_equal(gw_alog_tmpl_new(combined, &tc, &why, &at), 0);
    assert_int_equal(gw_alog_tmpl_new(timing, &tt, &why, &at), 0);
    gw_bytes_t want;
    gw_bytes_init(&want, 0);
    for (int k = 0; k < 5; k++) {
        for (int f = 0; f < 2; f++) {
            b->len = want.len = 0;
            assert_int_equal(gw_alog_format_tmpl(b, f ? tt : tc, &recs[k], NOW_US), 0);
            assert_int_equal(gw_alog_format(&want, f ? GW_ALOG_COMBINED_TIMING : GW_ALOG_COMBINED,
                                            &recs[k], NOW_US),
                             0);
            if (b->len != want.len || memcmp(b->base, want.base, b->len))
                fail_msg("record %d format %d:\n%.*s%.*s", k, f, (int)b->len, (const char *)b->base,
                         (int)want.len, (const char *)want.base);
        }
    }
    gw_alog_tmpl_del(tc);
    gw_alog_tmpl_del(tt);
    gw_bytes_free(&want);
}

static void request_ids(void **state)
{
    (void)state;
    assert_true(gw_alog_id_valid(GW_SLICE_LIT("abc-DEF_0.9:x")));
    GW_EXPECT_EACH(gw_alog_id_valid, 0, "", "a b", "a\"b", "a\r\nx-injected: 1");
    char long_id[GW_ALOG_ID_MAX + 1];
    memset(long_id, 'a', sizeof(long_id));
    assert_true(gw_alog_id_valid((gw_slice_t){(const uint8_t *)long_id, GW_ALOG_ID_MAX}));
    assert_false(gw_alog_id_valid((gw_slice_t){(const uint8_t *)long_id, GW_ALOG_ID_MAX + 1}));
    gw_alog_t r;
    gw_alog_init(&r);
    gw_alog_id_make(&r, 0x0123456789abcdefull, 42);
    assert_int_equal(r.id_len, 32);
    assert_memory_equal(r.id, "0123456789abcdef000000000000002a", 32);
    assert_true(gw_alog_id_valid((gw_slice_t){(const uint8_t *)r.id, r.id_len}));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(combined_line, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(json_line, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(remote_user, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(json_escapes_hostile_bytes, buf_setup, buf_teardown),
    cmocka_unit_test(request_ids),
    cmocka_unit_test_setup_teardown(combined_timing_line, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(reused_record, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(refused_and_unanswered_requests, buf_setup, buf_teardown),
    cmocka_unit_test_setup_teardown(templates, buf_setup, buf_teardown),
};

GW_TEST_MAIN(tests)
