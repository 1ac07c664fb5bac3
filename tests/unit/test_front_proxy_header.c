/* Unit tests of front/proxy_header.c: PROXY protocol headers (HAProxy's proxy-protocol.txt)
 * versions 1 and 2 from known vectors, every prefix of a valid header asking for more, and the
 * malformed ones refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include "test_util.h"
#include <netinet/in.h>

#include "common/err.h"
#include "front/proxy_header.h"

static const uint8_t SIG[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

static const char *addr_str(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    char ip[48];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        snprintf(buf, cap, "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        snprintf(buf, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        snprintf(buf, cap, "none");
    }
    return buf;
}

/* A valid header followed by the client's bytes: its length, and every shorter prefix wants
 * more. */
static gw_proxy_hdr_t parse_ok(const uint8_t *b, size_t hlen, size_t total)
{
    gw_proxy_hdr_t h;
    const char *why = NULL;
    for (size_t n = 0; n < hlen; n++)
        assert_int_equal(gw_proxy_hdr_parse(b, n, &h, &why), 0);
    assert_int_equal(gw_proxy_hdr_parse(b, total, &h, &why), (ssize_t)hlen);
    return h;
}

static void v1_vectors(void **state)
{
    (void)state;
    char a[80], d[80];
    const char *t4 = "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
    gw_proxy_hdr_t h = parse_ok((const uint8_t *)t4, 47, strlen(t4));
    assert_int_equal(h.version, 1);
    assert_false(h.local);
    assert_string_equal(addr_str(&h.src, a, sizeof(a)), "192.168.0.1:56324");
    assert_string_equal(addr_str(&h.dst, d, sizeof(d)), "192.168.0.11:443");
    assert_int_equal(h.src_len, sizeof(struct sockaddr_in));

    /* the longest line the spec allows: 107 bytes */
    const char *t6 = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                     "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_int_equal(strlen(t6), 104);
    h = parse_ok((const uint8_t *)t6, strlen(t6), strlen(t6));
    assert_string_equal(addr_str(&h.src, a, sizeof(a)),
                        "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
    const char *t6b = "PROXY TCP6 2001:db8::1 ::1 0 8443\r\n";
    h = parse_ok((const uint8_t *)t6b, strlen(t6b), strlen(t6b));
    assert_string_equal(addr_str(&h.src, a, sizeof(a)), "[2001:db8::1]:0");
    assert_string_equal(addr_str(&h.dst, d, sizeof(d)), "[::1]:8443");

    const char *u = "PROXY UNKNOWN\r\n";
    h = parse_ok((const uint8_t *)u, strlen(u), strlen(u));
    assert_true(h.local);
    const char *u2 = "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"; /* the rest is ignored */
    h = parse_ok((const uint8_t *)u2, strlen(u2), strlen(u2));
    assert_true(h.local);
}

static void v1_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n", /* port out of range */
        "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",    /* leading zero */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",       /* LF without CR */
        "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",     /* protocol */
        "PROXY TCP4 ::1 5.6.7.8 1 2\r\n",         /* IPv6 in TCP4 */
        "PROXY TCP6 1.2.3.4 ::1 1 2\r\n",         /* IPv4 in TCP6 */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",       /* three fields */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",   /* five fields */
        "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",    /* an empty field */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",    /* trailing space */
        "PROXY UNKNOWNX\r\n",                     /* not UNKNOWN */
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",      /* no header at all */
        "\x16\x03\x01\x02\x00",                   /* a TLS ClientHello */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gw_proxy_hdr_t h;
        const char *why = NULL;
        assert_int_equal(gw_proxy_hdr_parse((const uint8_t *)bad[i], strlen(bad[i]), &h, &why),
                         GW_E_PARSE);
        assert_non_null(why);
    }
    /* 107 bytes without a line end: too long (it cannot become valid) */
    char longl[120] = "PROXY TCP6 ";
    memset(longl + 11, 'f', sizeof(longl) - 12);
    gw_proxy_hdr_t h;
    const char *why = NULL;
    assert_int_equal(gw_proxy_hdr_parse((const uint8_t *)longl, 106, &h, &why), 0);
    assert_int_equal(gw_proxy_hdr_parse((const uint8_t *)longl, 107, &h, &why), GW_E_PARSE);
    assert_string_equal(why, "v1 line longer than 107 bytes");
}

static size_t v2(uint8_t *b, uint8_t ver_cmd, uint8_t fam, const uint8_t *addr, size_t alen)
{
    memcpy(b, SIG, 12);
    b[12] = ver_cmd;
    b[13] = fam;
    b[14] = (uint8_t)(alen >> 8);
    b[15] = (uint8_t)alen;
    if (alen)
        memcpy(b + 16, addr, alen);
    return 16 + alen;
}

static void v2_vectors(void **state)
{
    (void)state;
    uint8_t b[2048];
    char a[80], d[80];
    /* PROXY, TCP over IPv4: 10.0.0.1:1234 -> 10.0.0.2:443, then a TLV (type 0x04, NOOP) */
    const uint8_t a4[] = {10,   0,    0,    1,    10,   0,    0,    2,   0x04,
                          0xD2, 0x01, 0xBB, 0x04, 0x00, 0x02, 0xAA, 0xBB};
    size_t n = v2(b, 0x21, 0x11, a4, sizeof(a4));
    memcpy(b + n, "PRI * HTTP/2.0", 14);
    gw_proxy_hdr_t h = parse_ok(b, n, n + 14);
    assert_int_equal(h.version, 2);
    assert_false(h.local);
    assert_string_equal(addr_str(&h.src, a, sizeof(a)), "10.0.0.1:1234");
    assert_string_equal(addr_str(&h.dst, d, sizeof(d)), "10.0.0.2:443");

    /* IPv6 */
    uint8_t a6[36] = {0};
    a6[0] = 0x20, a6[1] = 0x01, a6[2] = 0x0d, a6[3] = 0xb8, a6[15] = 7;
    a6[31] = 1;
    a6[32] = 0xFF, a6[33] = 0xFF, a6[34] = 0x00, a6[35] = 0x50;
    n = v2(b, 0x21, 0x21, a6, sizeof(a6));
    h = parse_ok(b, n, n);
    assert_string_equal(addr_str(&h.src, a, sizeof(a)), "[2001:db8::7]:65535");
    assert_string_equal(addr_str(&h.dst, d, sizeof(d)), "[::1]:80");

    /* LOCAL (the balancer's health check): no address, the socket's stands */
    n = v2(b, 0x20, 0x00, NULL, 0);
    h = parse_ok(b, n, n);
    assert_true(h.local);
    /* LOCAL with an address block: skipped */
    n = v2(b, 0x20, 0x11, a4, 12);
    h = parse_ok(b, n, n);
    assert_true(h.local);
    /* UNIX sockets and UDP: nothing to use */
    uint8_t au[216] = {0};
    n = v2(b, 0x21, 0x31, au, sizeof(au));
    h = parse_ok(b, n, n);
    assert_true(h.local);
    n = v2(b, 0x21, 0x12, a4, 12);
    h = parse_ok(b, n, n);
    assert_true(h.local);
}

static void v2_malformed(void **state)
{
    (void)state;
    uint8_t b[2048];
    const uint8_t a4[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2};
    struct {
        uint8_t vc, fam;
        size_t alen;
        const char *why;
    } cases[] = {
        {0x11, 0x11, 12, "v2 version is not 2"},
        {0x22, 0x11, 12, "v2 command is not LOCAL or PROXY"},
        {0x21, 0x41, 12, "v2 family unknown"},
        {0x21, 0x11, 8, "v2 IPv4 address block shorter than 12 bytes"},
        {0x21, 0x21, 12, "v2 IPv6 address block shorter than 36 bytes"},
        {0x21, 0x11, 1100, "v2 header longer than 1024 bytes"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t addr[1200] = {0};
        memcpy(addr, a4, sizeof(a4));
        size_t n = v2(b, cases[i].vc, cases[i].fam, addr, cases[i].alen);
        gw_proxy_hdr_t h;
        const char *why = NULL;
        assert_int_equal(gw_proxy_hdr_parse(b, n, &h, &why), GW_E_PARSE);
        assert_string_equal(why, cases[i].why);
    }
    /* a signature that goes wrong part way */
    memcpy(b, SIG, 12);
    b[7] = 'X';
    gw_proxy_hdr_t h;
    const char *why = NULL;
    assert_int_equal(gw_proxy_hdr_parse(b, 16, &h, &why), GW_E_PARSE);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(v1_vectors),
    cmocka_unit_test(v1_malformed),
    cmocka_unit_test(v2_vectors),
    cmocka_unit_test(v2_malformed),
};

GW_TEST_MAIN(tests)
