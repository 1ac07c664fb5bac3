/* front/proxy_header.c — PROXY protocol v1 (a text line) and v2 (binary) headers, as HAProxy's
 * proxy-protocol.txt specifies them. */
#include "front/proxy_header.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "common/err.h"

static const uint8_t V2_SIG[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                   0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
#define V1_MAX 107 /* "PROXY TCP6 " + 2 x 39 + 2 x 5 + 4 spaces + CRLF (spec §2.1) */

static ssize_t bad(const char **why, const char *w)
{
    *why = w;
    return GW_E_PARSE;
}

/* A decimal port 0..65535 without leading zeros (spec §2.1: "0" alone is fine). */
static int parse_port(const char *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

static int parse_addr(int af, const char *s, size_t n, struct sockaddr_storage *ss, uint16_t port,
                      socklen_t *len)
{
    char tmp[48];
    if (n == 0 || n >= sizeof(tmp))
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    memset(ss, 0, sizeof(*ss));
    if (af == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        if (inet_pton(AF_INET, tmp, &a->sin_addr) != 1)
            return -1;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        *len = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET6, tmp, &a->sin6_addr) != 1)
            return -1;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        *len = sizeof(*a);
    }
    return 0;
}

/* v1: "PROXY" SP ("TCP4" | "TCP6" | "UNKNOWN") [SP src SP dst SP sport SP dport] CRLF. */
static ssize_t parse_v1(const uint8_t *buf, size_t len, gw_proxy_hdr_t *out, const char **why)
{
    const uint8_t *nl = memchr(buf, '\n', len < V1_MAX ? len : V1_MAX);
    if (!nl)
        return len < V1_MAX ? 0 : bad(why, "v1 line longer than 107 bytes");
    size_t n = (size_t)(nl - buf) + 1;
    if (n < 2 || buf[n - 2] != '\r')
        return bad(why, "v1 line not ended by CRLF");
    const char *s = (const char *)buf + 6, *end = (const char *)buf + n - 2;
    memset(out, 0, sizeof(*out));
    out->version = 1;
    if (end - s >= 7 && !memcmp(s, "UNKNOWN", 7) && (end - s == 7 || s[7] == ' ')) {
        out->local = 1; /* spec §2.1: the rest of the line is ignored */
        return (ssize_t)n;
    }
    int af;
    if (end - s >= 5 && !memcmp(s, "TCP4 ", 5))
        af = AF_INET;
    else if (end - s >= 5 && !memcmp(s, "TCP6 ", 5))
        af = AF_INET6;
    else
        return bad(why, "v1 protocol is not TCP4, TCP6 or UNKNOWN");
    s += 5;
    const char *f[4];
    size_t fl[4];
    for (int i = 0; i < 4; i++) {
        const char *sp = i < 3 ? memchr(s, ' ', (size_t)(end - s)) : end;
        if (!sp || sp == s)
            return bad(why, "v1 line does not have four address fields");
        f[i] = s;
        fl[i] = (size_t)(sp - s);
        s = sp + (i < 3);
    }
    if (memchr(f[3], ' ', fl[3]))
        return bad(why, "v1 line has more than four address fields");
    uint16_t sport, dport;
    if (parse_port(f[2], fl[2], &sport) < 0 || parse_port(f[3], fl[3], &dport) < 0)
        return bad(why, "v1 port is not a number from 0 to 65535");
    if (parse_addr(af, f[0], fl[0], &out->src, sport, &out->src_len) < 0 ||
        parse_addr(af, f[1], fl[1], &out->dst, dport, &out->dst_len) < 0)
        return bad(why, af == AF_INET ? "v1 address is not IPv4" : "v1 address is not IPv6");
    return (ssize_t)n;
}

/* v2: the signature, version/command, family/transport, a 16-bit length, the addresses, TLVs. */
static ssize_t parse_v2(const uint8_t *buf, size_t len, gw_proxy_hdr_t *out, const char **why)
{
    if (len < 16)
        return 0;
    if ((buf[12] >> 4) != 2)
        return bad(why, "v2 version is not 2");
    unsigned cmd = buf[12] & 0x0F, fam = buf[13] >> 4, proto = buf[13] & 0x0F;
    size_t alen = (size_t)buf[14] << 8 | buf[15];
    if (cmd > 1)
        return bad(why, "v2 command is not LOCAL or PROXY");
    if (16 + alen > GW_PROXY_HDR_V2_MAX)
        return bad(why, "v2 header longer than 1024 bytes");
    if (len < 16 + alen)
        return 0;
    memset(out, 0, sizeof(*out));
    out->version = 2;
    /* LOCAL: the balancer's own connection (health checks); UNSPEC or UNIX families, or a
     * transport other than STREAM: nothing we can use as the client's address (spec §2.2) */
    if (cmd == 0 || fam == 0 || fam == 3 || proto != 1) {
        if (fam > 3 || proto > 2)
            return bad(why, "v2 family or transport unknown");
        out->local = 1;
        return (ssize_t)(16 + alen);
    }
    const uint8_t *a = buf + 16;
    if (fam == 1) {
        if (alen < 12)
            return bad(why, "v2 IPv4 address block shorter than 12 bytes");
        struct sockaddr_in *s = (struct sockaddr_in *)&out->src,
                           *d = (struct sockaddr_in *)&out->dst;
        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, a, 4);
        memcpy(&d->sin_addr, a + 4, 4);
        memcpy(&s->sin_port, a + 8, 2);
        memcpy(&d->sin_port, a + 10, 2);
        out->src_len = out->dst_len = sizeof(*s);
    } else if (fam == 2) {
        if (alen < 36)
            return bad(why, "v2 IPv6 address block shorter than 36 bytes");
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out->src,
                            *d = (struct sockaddr_in6 *)&out->dst;
        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, a, 16);
        memcpy(&d->sin6_addr, a + 16, 16);
        memcpy(&s->sin6_port, a + 32, 2);
        memcpy(&d->sin6_port, a + 34, 2);
        out->src_len = out->dst_len = sizeof(*s);
    } else {
        return bad(why, "v2 family unknown");
    }
    return (ssize_t)(16 + alen); /* TLVs after the addresses are skipped */
}

ssize_t gw_proxy_hdr_parse(const uint8_t *buf, size_t len, gw_proxy_hdr_t *out, const char **why)
{
    static const char v1[] = "PROXY ";
    size_t k = len < 12 ? len : 12;
    int maybe_v2 = memcmp(buf, V2_SIG, k) == 0;
    size_t k1 = len < 6 ? len : 6;
    int maybe_v1 = memcmp(buf, v1, k1) == 0;
    if (maybe_v2 && len >= 12)
        return parse_v2(buf, len, out, why);
    if (maybe_v1 && len >= 6)
        return parse_v1(buf, len, out, why);
    if (maybe_v1 || maybe_v2)
        return 0; /* a prefix of either: wait */
    return bad(why, "no PROXY protocol header");
}
