/* Unit tests of proxy/tunnel.c: the WebSocket handshake the gateway checks on both sides, the
 * client's key (RFC 6455 §4.1, §4.2.1) and the origin's 101 (RFC 6455 §4.1, RFC 9110 §7.8),
 * as tables of fields and the verdict each must get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/err.h"
#include "proxy/proxy_internal.h"

#define F(n, v)                                                                                    \
    {                                                                                              \
        GW_SLICE_LIT(n), GW_SLICE_LIT(v)                                                           \
    }

/* RFC 6455 §1.3: the example key and the accept value it gets */
#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void accept_of_the_rfc_example(void **state)
{
    (void)state;
    char out[GW_WS_ACCEPT_LEN + 1];
    assert_int_equal(gw_proxy__ws_accept(KEY, strlen(KEY), out), 0);
    assert_string_equal(out, ACCEPT);
}

/* A handshake carries one Sec-WebSocket-Key, 16 bytes in base64 (22 characters and "=="). */
static void client_key(void **state)
{
    (void)state;
    static const struct {
        gw_field_t f[3];
        size_t n;
        int ok;
    } cases[] = {
        {{F("sec-websocket-key", KEY)}, 1, 1},
        {{F("Sec-WebSocket-Key", " " KEY " ")}, 1, 1}, /* OWS around it, any case of name */
        {{F("upgrade", "websocket")}, 1, 0},           /* none */
        {{F("sec-websocket-key", KEY), F("sec-websocket-key", KEY)}, 2, 0}, /* repeated */
        {{F("sec-websocket-key", "short")}, 1, 0},
        {{F("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ")}, 1, 0},           /* no padding */
        {{F("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=")}, 1, 0},          /* 23 */
        {{F("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZSBub25jZQ==")}, 1, 0}, /* 22 bytes */
        {{F("sec-websocket-key", "dGhlIHNhbXBsZSBub2*jZQ==")}, 1, 0},         /* alphabet */
        {{F("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZ===")}, 1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[GW_WS_KEY_LEN + 1] = "";
        int rv = gw_proxy__ws_h1_key(cases[i].f, cases[i].n, out);
        if (cases[i].ok != (rv == 0))
            fail_msg("case %zu: rv %d", i, rv);
        if (cases[i].ok)
            assert_string_equal(out, KEY);
        assert_int_equal(gw_proxy__ws_h1_key(cases[i].f, cases[i].n, NULL), rv);
    }
}

/* Everything a WebSocket client checks of a 101 (RFC 6455 §4.1), which the gateway checks for
 * its clients since neither sees the origin's 101 as it was. */
static void origin_101(void **state)
{
    (void)state;
    static const struct {
        gw_field_t f[4];
        size_t n;
        const char *key;
        int ok;
    } cases[] = {
        {{F("Upgrade", "websocket"), F("Connection", "Upgrade"), F("Sec-WebSocket-Accept", ACCEPT)},
         3,
         KEY,
         1},
        {{F("upgrade", "WebSocket"), F("connection", "keep-alive, upgrade"),
          F("sec-websocket-accept", " " ACCEPT)},
         3,
         KEY,
         1},
        /* Upgrade: missing, another protocol, more than websocket, repeated */
        {{F("Connection", "Upgrade"), F("Sec-WebSocket-Accept", ACCEPT)}, 2, KEY, 0},
        {{F("Upgrade", "h2c"), F("Connection", "Upgrade"), F("Sec-WebSocket-Accept", ACCEPT)},
         3,
         KEY,
         0},
        {{F("Upgrade", "websocket, h2c"), F("Connection", "Upgrade"),
          F("Sec-WebSocket-Accept", ACCEPT)},
         3,
         KEY,
         0},
        {{F("Upgrade", "websocket"), F("Upgrade", "websocket"), F("Connection", "Upgrade"),
          F("Sec-WebSocket-Accept", ACCEPT)},
         4,
         KEY,
         0},
        /* Connection without upgrade, or none */
        {{F("Upgrade", "websocket"), F("Connection", "keep-alive"),
          F("Sec-WebSocket-Accept", ACCEPT)},
         3,
         KEY,
         0},
        {{F("Upgrade", "websocket"), F("Sec-WebSocket-Accept", ACCEPT)}, 2, KEY, 0},
        /* the accept value: missing, wrong, repeated, or no key to check it against */
        {{F("Upgrade", "websocket"), F("Connection", "Upgrade")}, 2, KEY, 0},
        {{F("Upgrade", "websocket"), F("Connection", "Upgrade"),
          F("Sec-WebSocket-Accept", "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")},
         3,
         KEY,
         0},
        {{F("Upgrade", "websocket"), F("Connection", "Upgrade"), F("Sec-WebSocket-Accept", ACCEPT),
          F("Sec-WebSocket-Accept", ACCEPT)},
         4,
         KEY,
         0},
        {{F("Upgrade", "websocket"), F("Connection", "Upgrade"), F("Sec-WebSocket-Accept", ACCEPT)},
         3,
         NULL,
         0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *bad = gw_proxy__ws_check_101(cases[i].f, cases[i].n, cases[i].key);
        if (cases[i].ok != (bad == NULL))
            fail_msg("case %zu: %s", i, bad ? bad : "accepted");
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(accept_of_the_rfc_example),
    cmocka_unit_test(client_key),
    cmocka_unit_test(origin_101),
};

GW_TEST_MAIN(tests)
