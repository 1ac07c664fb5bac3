/* Unit tests of h2/validate.c: the field-name rule of RFC 9113 §8.2.1 and the request checks of
 * §8.3, as tables (the rules HTTP/2 shares with HTTP/1.1 are tested in test_http_fields.c). Header
 * blocks are fed field by field through the decoder's callback (gw_h2__on_field), then checked
 * whole (gw_h2__check_request), as the session does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "h2/session_internal.h"
#include "h2/validate.h"

/* §8.2.1: lowercase field characters only; ':' only first. Checked for every byte. */
static void field_names_byte_by_byte(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        /* "MUST NOT contain characters in the ranges 0x00-0x20, 0x41-0x5a, or 0x7f-0xff";
         * ':' only as the first character of a pseudo-header field */
        int want = c > 0x20 && !(c >= 0x41 && c <= 0x5a) && c < 0x7f && c != ':';
        uint8_t mid[3] = {'a', c, 'b'}, first[2] = {c, 'a'};
        if (gw_h2_field_name_valid((gw_slice_t){mid, 3}) != want)
            fail_msg("byte 0x%02x inside a name: want %d", b, want);
        if (gw_h2_field_name_valid((gw_slice_t){first, 2}) != (want || c == ':'))
            fail_msg("byte 0x%02x first: want %d", b, want || c == ':');
    }
    assert_false(gw_h2_field_name_valid(GW_SLICE_LIT("")));
    assert_true(gw_h2_field_name_valid(GW_SLICE_LIT(":path")));
    assert_false(gw_h2_field_name_valid(GW_SLICE_LIT("a:b")));
}

/* One header block: fields "name: value" (pseudo first as the client sent them), fed to the
 * decode callback, then the whole-request check. Returns the reason, or NULL when valid. */
static int connect_protocol; /* the session sent SETTINGS_ENABLE_CONNECT_PROTOCOL */

static const char *check(int trailers, const char *const *fields, size_t n, decode_ctx_t *c,
                         arena_t *a)
{
    memset(c, 0, sizeof(*c));
    memset(a, 0, sizeof(*a));
    c->arena = a;
    c->connect_protocol = connect_protocol;
    c->trailers = trailers;
    c->head.content_length = -1;
    for (size_t i = 0; i < n; i++) {
        const char *sep = strchr(fields[i] + 1, ':');
        gw_hpack_field_t f = {
            {(const uint8_t *)fields[i], (size_t)(sep - fields[i])}, gw_slice_str(sep + 2), 0};
        assert_int_equal(gw_h2__on_field(c, &f), 0);
    }
    assert_false(c->nomem);
    if (!trailers)
        gw_h2__check_request(c);
    return c->malformed ? c->why : NULL;
}

/* check() of the request fields f[0..n) (case i) says want (NULL: valid); returns it. */
static const char *expect_verdict(size_t i, const char *const *f, size_t n, const char *want,
                                  decode_ctx_t *c, arena_t *a)
{
    const char *why = check(0, f, n, c, a);
    if ((why == NULL) != (want == NULL) || (why && strcmp(why, want) != 0))
        fail_msg("case %zu: got \"%s\", want \"%s\"", i, why ? why : "(valid)",
                 want ? want : "(valid)");
    return why;
}

#define REQ ":method: GET", ":scheme: https", ":path: /"

static void request_heads(void **state)
{
    (void)state;
    static const struct {
        const char *f[6];
        size_t n;
        const char *why; /* NULL: valid */
    } cases[] = {
        {{REQ}, 3, NULL},
        {{REQ, ":authority: a.test"}, 4, NULL},
        {{REQ, "te: trailers"}, 4, NULL},
        {{REQ, "content-length: 5", "content-length: 5"}, 5, NULL},
        {{":method: CONNECT", ":authority: a.test:443"}, 2, NULL},
        {{":scheme: https", ":path: /"}, 2, "missing :method"},
        {{":method: GET", ":path: /"}, 2, "missing :scheme or :path"},
        {{":method: GET", ":scheme: https"}, 2, "missing :scheme or :path"},
        {{REQ, ":method: GET"}, 4, "duplicate pseudo-header"},
        {{":method: GET", "accept: */*", ":scheme: https", ":path: /"},
         4,
         "pseudo-header after regular field"},
        {{REQ, ":status: 200"}, 4, "unknown or response pseudo-header"},
        {{REQ, "Accept: */*"}, 4, "invalid field name"},
        {{REQ, "x-a: b\r\nx-b: c"}, 4, "invalid field value"},
        {{REQ, "connection: close"}, 4, "connection-specific header field"},
        {{REQ, "keep-alive: 5"}, 4, "connection-specific header field"},
        {{REQ, "transfer-encoding: chunked"}, 4, "connection-specific header field"},
        {{REQ, "upgrade: websocket"}, 4, "connection-specific header field"},
        {{REQ, "proxy-connection: close"}, 4, "connection-specific header field"},
        {{REQ, "te: gzip"}, 4, "te other than trailers"},
        {{REQ, "content-length: 5", "content-length: 6"}, 5, "conflicting content-length"},
        {{REQ, "content-length: five"}, 4, "invalid content-length"},
        {{REQ, ":protocol: websocket"}, 4, ":protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL"},
        {{":method: CONNECT", ":protocol: websocket", ":scheme: https", ":path: /chat",
          ":authority: a.test"},
         5,
         ":protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL"},
        {{":method: CONNECT", ":authority: a.test", ":path: /"}, 3, "malformed CONNECT"},
        {{":method: CONNECT"}, 1, "malformed CONNECT"},
        {{":method: GET", ":scheme: https", ":path: "}, 3, "empty :path"},
        {{":method: ", ":scheme: https", ":path: /"}, 3, "empty :method"},
        {{":method: G(T", ":scheme: https", ":path: /"}, 3, "invalid :method"},
        {{":method: GET", ":scheme: https", ":path: /a b"}, 3, "invalid :path"},
        {{":method: GET", ":scheme: ftp", ":path: /"}, 3, "invalid :scheme"},
        {{":method: GET", ":scheme: https", ":path: h.test"},
         3,
         ":path neither origin-form nor * for OPTIONS"},
        {{":method: GET", ":scheme: https", ":path: *"},
         3,
         ":path neither origin-form nor * for OPTIONS"},
        {{":method: OPTIONS", ":scheme: https", ":path: *"}, 3, NULL},
        {{REQ, ":authority: user@a.test"}, 4, "invalid :authority"},
        /* the translator takes :authority as checked here (gw_req_head_t.authority) */
        {{REQ, ":authority: a b.test"}, 4, "invalid :authority"},
        {{REQ, ":authority: a!b"}, 4, "invalid :authority"},
        {{REQ, ":authority: a..test:80"}, 4, "invalid :authority"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        decode_ctx_t c;
        arena_t a;
        const char *why = expect_verdict(i, cases[i].f, cases[i].n, cases[i].why, &c, &a);
        if (!why) { /* regular fields kept, in order; pseudo-header fields apart */
            size_t regular = 0;
            for (size_t k = 0; k < cases[i].n; k++)
                regular += cases[i].f[k][0] != ':';
            assert_int_equal(c.n, regular);
        }
        gw_h2__arena_free(&a);
    }
}

/* RFC 8441 §4 once SETTINGS_ENABLE_CONNECT_PROTOCOL was sent: an extended CONNECT needs
 * :protocol, :scheme, :path and :authority; :protocol on anything but CONNECT is malformed; a
 * plain CONNECT stays what §8.5 says. */
static void extended_connect(void **state)
{
    (void)state;
    static const struct {
        const char *f[6];
        size_t n;
        const char *why;
    } cases[] = {
        {{":method: CONNECT", ":protocol: websocket", ":scheme: https", ":path: /chat",
          ":authority: a.test"},
         5,
         NULL},
        {{REQ, ":protocol: websocket"}, 4, ":protocol on a request that is not CONNECT"},
        {{":method: CONNECT", ":protocol: websocket", ":scheme: https", ":authority: a.test"},
         4,
         "missing :scheme or :path"},
        {{":method: CONNECT", ":protocol: websocket", ":path: /", ":authority: a.test"},
         4,
         "missing :scheme or :path"},
        {{":method: CONNECT", ":protocol: websocket", ":scheme: https", ":path: /"},
         4,
         "extended CONNECT without :authority"},
        {{":method: CONNECT", ":protocol: web socket", ":scheme: https", ":path: /",
          ":authority: a"},
         5,
         "invalid :protocol"},
        {{":method: CONNECT", ":scheme: https", ":path: /", ":authority: a.test"},
         4,
         "malformed CONNECT"},
        {{":method: CONNECT", ":authority: a.test:443"}, 2, NULL},
    };
    connect_protocol = 1;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        decode_ctx_t c;
        arena_t a;
        expect_verdict(i, cases[i].f, cases[i].n, cases[i].why, &c, &a);
        gw_h2__arena_free(&a);
    }
    connect_protocol = 0;
}

/* Trailers: no pseudo-header fields, and content-length there is not the body's length. */
static void trailer_blocks(void **state)
{
    (void)state;
    decode_ctx_t c;
    arena_t a;
    static const char *const ok[] = {"x-checksum: abc", "content-length: 9"};
    assert_null(check(1, ok, 2, &c, &a));
    assert_int_equal(c.head.content_length, -1);
    assert_int_equal(c.n, 2);
    gw_h2__arena_free(&a);
    static const char *const bad[] = {"x-checksum: abc", ":path: /"};
    assert_string_equal(check(1, bad, 2, &c, &a), "pseudo-header in trailers");
    gw_h2__arena_free(&a);
}

/* The priority field of a request is noted for the scheduler (RFC 9218 §4). */
static void priority_field_noted(void **state)
{
    (void)state;
    decode_ctx_t c;
    arena_t a;
    static const char *const f[] = {REQ, "priority: u=1, i"};
    assert_null(check(0, f, 4, &c, &a));
    assert_true(gw_slice_eq(c.priority, GW_SLICE_LIT("u=1, i")));
    gw_h2__arena_free(&a);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(field_names_byte_by_byte), cmocka_unit_test(request_heads),
    cmocka_unit_test(trailer_blocks),           cmocka_unit_test(extended_connect),
    cmocka_unit_test(priority_field_noted),
};

GW_TEST_MAIN(tests)
