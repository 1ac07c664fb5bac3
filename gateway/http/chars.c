/* http/chars.c — the byte classes of HTTP's syntax (one table) and the predicates over them. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http/http.h"

/* GW_HTTP_C_* of every byte value, sixteen a row (the row's first byte and, for the printable
 * rows, its characters in the comment). Generated from the character lists written beside
 * GW_HTTP_C_*; tests/unit/test_http_chars.c checks every byte against them. */
const uint8_t gw_http_char_class[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  8,  0,  0,  0,  0,  0,  0,  // 00
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  // 10
    8,  27, 24, 25, 27, 25, 27, 27, 26, 26, 27, 27, 26, 31, 31, 26, // 20  !"#$%&'()*+,-./
    31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 10, 26, 24, 26, 24, 26, // 30 0123456789:;<=>?
    26, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, // 40 @ABCDEFGHIJKLMNO
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 24, 24, 24, 25, 31, // 50 PQRSTUVWXYZ[\]^_
    25, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, // 60 `abcdefghijklmno
    31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 24, 25, 24, 27, 0,  // 70 pqrstuvwxyz{|}~.
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // 80
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // 90
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // a0
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // b0
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // c0
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // d0
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // e0
    8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  // f0
};

static int is_hex(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Every byte of s in class `cls` (one GW_HTTP_C_* bit), "%" only as the start of %HH when pct
 * is set. The common answer first: the bytes' classes ANDed together, four a step and one test
 * at the end (a field name or a path is checked at about half the instructions of a test and
 * a branch per byte); only a string with a byte outside the class (an error, or a %HH) takes
 * the byte loop. */
static int all_of(gw_slice_t s, uint8_t cls, int pct)
{
    const uint8_t *b = s.base;
    uint8_t all = cls;
    size_t k = 0;
    for (; k + 4 <= s.len; k += 4)
        all &= gw_http_char_class[b[k]] & gw_http_char_class[b[k + 1]] &
               gw_http_char_class[b[k + 2]] & gw_http_char_class[b[k + 3]];
    for (; k < s.len; k++)
        all &= gw_http_char_class[b[k]];
    if (all)
        return 1;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = s.base[i];
        if (gw_http_char_class[c] & cls)
            continue;
        if (!pct || c != '%' || i + 2 >= s.len || !is_hex(s.base[i + 1]) || !is_hex(s.base[i + 2]))
            return 0;
        i += 2;
    }
    return 1;
}

int gw_http_is_token(gw_slice_t s)
{
    return s.len && all_of(s, GW_HTTP_C_TCHAR, 0);
}

int gw_http_is_request_target(gw_slice_t s)
{
    return s.len && all_of(s, GW_HTTP_C_TARGET, 1);
}

static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

/* RFC 3986 §3.2.2 dec-octet "." dec-octet "." dec-octet "." dec-octet, the whole of p[0..n):
 * 0 to 255 without a leading zero. */
static int is_ipv4(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part && (i == n || p[i++] != '.'))
            return 0;
        size_t d = i;
        unsigned v = 0;
        while (i < n && is_digit(p[i]) && i - d < 3)
            v = v * 10 + (unsigned)(p[i++] - '0');
        if (i == d || v > 255 || (i - d > 1 && p[d] == '0'))
            return 0;
    }
    return i == n;
}

/* RFC 3986 §3.2.2 IPv6address, the whole of p[0..n): eight h16 (1 to 4 hex digits) separated
 * by ':', the last two of which may be an IPv4address, or fewer around one "::" that stands for
 * at least one zero group. No zone identifier (RFC 6874 is not part of http URIs). */
static int is_ipv6(const uint8_t *p, size_t n)
{
    size_t i = 0, groups = 0;
    int gap = 0;
    if (n >= 2 && p[0] == ':' && p[1] == ':') {
        gap = 1;
        i = 2;
    } else if (n && p[0] == ':') {
        return 0; /* one leading ':' is no "::" */
    }
    while (i < n) {
        size_t d = i;
        while (i < n && is_hex(p[i]) && i - d < 5)
            i++;
        if (i < n && p[i] == '.') { /* ls32 as an IPv4address: the last thing there is */
            if (!is_ipv4(p + d, n - d))
                return 0;
            groups += 2;
            break;
        }
        if (i == d || i - d > 4)
            return 0;
        groups++;
        if (i == n)
            break;
        if (p[i++] != ':' || i == n) /* a ':' ends nothing */
            return 0;
        if (p[i] == ':') {
            if (gap)
                return 0; /* "::" once */
            gap = 1;
            i++;
        }
    }
    return gap ? groups <= 7 : groups == 8;
}

int gw_http_is_ip_literal(gw_slice_t s)
{
    /* RFC 3986 §3.2.2 also has IPvFuture ("[v1.xyz]"): no version is defined, no client sends
     * one, no origin can be reached at one and $host could never carry it (config/template.c),
     * so it is not a host here: one rule for the authority check, routes and $host */
    if (s.len < 4 || s.base[0] != '[' || s.base[s.len - 1] != ']')
        return 0;
    return is_ipv6(s.base + 1, s.len - 2);
}

size_t gw_http_ip_literal_canon(gw_slice_t s, char *out, size_t cap)
{
    char text[GW_HTTP_IP6_LITERAL_MAX], canon[INET6_ADDRSTRLEN];
    struct in6_addr a;
    /* a valid literal's address is at most 45 characters ("1111:...:6666:255.255.255.255") */
    if (!gw_http_is_ip_literal(s) || s.len - 2 >= sizeof(text))
        return 0;
    memcpy(text, s.base + 1, s.len - 2);
    text[s.len - 2] = 0;
    /* glibc's inet_ntop writes RFC 5952's form (the BIND code: lower case, the first longest
     * run of zeros of two groups or more as "::", ::ffff:a.b.c.d for mapped addresses) */
    if (inet_pton(AF_INET6, text, &a) != 1 || !inet_ntop(AF_INET6, &a, canon, sizeof(canon)))
        return 0;
    size_t n = strlen(canon);
    if (n + 3 > cap)
        return 0;
    out[0] = '[';
    memcpy(out + 1, canon, n);
    out[n + 1] = ']';
    out[n + 2] = 0;
    return n + 2;
}

int gw_http_authority(gw_slice_t scheme, gw_slice_t a, gw_http_authority_t *out)
{
    const uint8_t *e = a.base + a.len;
    const uint8_t *colon = NULL;
    if (a.len && a.base[0] == '[') { /* the port's ':' is after the literal's "]" */
        const uint8_t *rb = memchr(a.base, ']', a.len);
        if (rb && rb + 1 < e && rb[1] == ':')
            colon = rb + 1;
    } else if (a.len)
        colon = memchr(a.base, ':', a.len);
    out->host = (gw_slice_t){a.base, colon ? (size_t)(colon - a.base) : a.len};
    out->port = colon ? (gw_slice_t){colon + 1, (size_t)(e - colon - 1)} : (gw_slice_t){0};
    /* the port is a number: "080" is port 80 */
    while (out->port.len > 1 && out->port.base[0] == '0')
        out->port.base++, out->port.len--;
    /* RFC 3986 §6.2.3: an empty port and the scheme's default port are the same URI (the
     * port first: most have none, or another, and then the scheme is not read) */
    if ((gw_slice_eq(out->port, GW_SLICE_LIT("80")) &&
         gw_slice_eq_nocase(scheme, GW_SLICE_LIT("http"))) ||
        (gw_slice_eq(out->port, GW_SLICE_LIT("443")) &&
         gw_slice_eq_nocase(scheme, GW_SLICE_LIT("https"))))
        out->port.len = 0;
    /* RFC 4291 §2.2: one IPv6 address has many spellings ([::1], [0:0::1], [::0001]); keys
     * hold RFC 5952's, as routes compare them (proxy/route.c) */
    if (out->host.len && out->host.base[0] == '[') {
        size_t n = gw_http_ip_literal_canon(out->host, out->ip6, sizeof(out->ip6));
        if (!n) { /* no literal: the authority as written, one of its own in every key */
            out->host = a;
            out->port = (gw_slice_t){0};
            return -1;
        }
        out->host = (gw_slice_t){(const uint8_t *)out->ip6, n};
    }
    return 0;
}

int gw_http_authority_eq(const gw_http_authority_t *x, const gw_http_authority_t *y)
{
    return gw_slice_eq_nocase(x->host, y->host) && gw_slice_eq(x->port, y->port);
}

/* The bytes of an authority's host name or IPv4 address (gw_http_is_authority), sixteen a row:
 * A_HOST for every GW_HTTP_C_HOST byte (letters, digits, '-', '.', '_'), with A_DOT for '.'
 * and A_DIGIT for a digit; 0 for every other byte (the port's ':' among them). The values of
 * a name's bytes ANDed keep A_HOST when every byte is a host byte, and two neighbours' ANDed
 * keep A_DOT only when both are '.' (an empty label). Written from those lists;
 * tests/unit/test_http_chars.c holds gw_http_is_authority to the rules spelled out byte by
 * byte, on every byte value and every short string of the bytes that matter. */
enum { A_HOST = 1, A_DOT = 2, A_DIGIT = 4 };
static const uint8_t authority_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 00
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 10
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, // 20  !"#$%&'()*+,-./
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 0, 0, 0, // 30 0123456789:;<=>?
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // 40 @ABCDEFGHIJKLMNO
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, // 50 PQRSTUVWXYZ[\]^_
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // 60 `abcdefghijklmno
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, // 70 pqrstuvwxyz{|}~.
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 80
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 90
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // a0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // b0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // c0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // d0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // e0
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // f0
};

/* Whether p[0..n) is a host name or IPv4 address: 1 to 255 GW_HTTP_C_HOST bytes (RFC 3986
 * §3.2.2: "should limit these names to no more than 255 characters"), no empty label but the
 * root's (RFC 1034 §3.5: "a." is a name, ".a" and "a..b" are not). One pass, four bytes a
 * step, and one test at the end: every byte's value ANDed must keep A_HOST, and no pair of
 * neighbours (the first byte's neighbour being a '.') may keep A_DOT. */
static int is_host_name(const uint8_t *p, size_t n)
{
    if (!n || n > 255)
        return 0;
    const uint8_t *t = authority_byte;
    /* four bytes' values a word (the first in the low byte), ANDed with their left neighbours'
     * (the word shifted up a byte, the previous word's last value below) */
    const uint32_t ones = 0x01010101u;
    uint32_t prev = A_HOST | A_DOT, all = ones * A_HOST, dots = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w = t[p[i]] | (uint32_t)t[p[i + 1]] << 8 | (uint32_t)t[p[i + 2]] << 16 |
                     (uint32_t)t[p[i + 3]] << 24;
        all &= w;
        dots |= w & (w << 8 | prev);
        prev = w >> 24;
    }
    for (; i < n; i++) {
        uint32_t k = t[p[i]];
        all &= k | ~0xffu;
        dots |= k & prev;
        prev = k;
    }
    return (all & ones * A_HOST) == ones * A_HOST && !(dots & ones * A_DOT);
}

int gw_http_is_authority(gw_slice_t s)
{
    const uint8_t *p = s.base;
    size_t n = s.len;
    if (!n)
        return 1; /* RFC 9112 §3.2: a Host of a target without authority is empty */
    /* RFC 3986 §3.2.3: [ ":" port ], port = *DIGIT; an http(s) port is a TCP port (RFC 9110
     * §4.2.1), at most 65535: five digits, what $host carries. Read from the end: the host
     * ends at a ':' before the last five bytes or fewer, all digits; no host holds a ':', so
     * that is the first ':' of any authority that passes (a second one, a longer port or one
     * with another byte leaves a ':' in the host, which refuses it) */
    size_t h = n, k = n;
    while (k > 0 && n - k < 5 && (authority_byte[p[k - 1]] & A_DIGIT))
        k--;
    if (k > 0 && p[k - 1] == ':')
        h = k - 1;
    if (p[0] != '[') /* RFC 9110 §4.2.1: an http(s) URI's host is not empty (":80") */
        return is_host_name(p, h);
    /* RFC 3986 §3.2.2: IP-literal, the whole host ("[::1]x" and "[::1]]" are none) */
    return gw_http_is_ip_literal((gw_slice_t){p, h});
}

int gw_http_target_form(gw_slice_t t, gw_slice_t *authority, gw_slice_t *rest)
{
    if (t.len && t.base[0] == '/')
        return gw_http_is_request_target(t) ? GW_HTTP_TARGET_ORIGIN : -1;
    if (t.len == 1 && t.base[0] == '*')
        return GW_HTTP_TARGET_ASTERISK;
    size_t i = 0; /* the scheme: only its letters matter, http and https having no others */
    while (i < t.len && (t.base[i] | 0x20) >= 'a' && (t.base[i] | 0x20) <= 'z')
        i++;
    int http = (i == 4 && !strncasecmp((const char *)t.base, "http", 4)) ||
               (i == 5 && !strncasecmp((const char *)t.base, "https", 5));
    if (!http || t.len < i + 3 || memcmp(t.base + i, "://", 3) != 0)
        return -1;
    size_t a = i + 3, e = a;
    while (e < t.len && t.base[e] != '/' && t.base[e] != '?')
        e++;
    gw_slice_t auth = {t.base + a, e - a};
    /* '@' (userinfo) is not an authority byte; '[' and ']' only around an IP-literal host */
    if (!auth.len || !gw_http_is_authority(auth))
        return -1;
    gw_slice_t r = {t.base + e, t.len - e}; /* path-abempty [ "?" query ] */
    if (!all_of(r, GW_HTTP_C_TARGET, 1))
        return -1;
    *authority = auth;
    *rest = r;
    return GW_HTTP_TARGET_ABSOLUTE;
}

/* Non-zero when a byte of x is CR, LF or NUL: the zero-byte test of x, x ^ CR.. and x ^ LF..
 * ((v - 0x01..) & ~v & 0x80.. is non-zero exactly when v has a zero byte). */
static uint64_t crlfnul8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t cr = x ^ ('\r' * ones), lf = x ^ ('\n' * ones);
    return ((x - ones) & ~x & highs) | ((cr - ones) & ~cr & highs) | ((lf - ones) & ~lf & highs);
}

/* crlfnul8() behind a one-test filter: field values rarely hold a byte below 0x0e (of those,
 * only HTAB is allowed), and (x - 0x0e..) & ~x & 0x80.. is non-zero exactly when one does. */
static int crlfnul_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    return ((x - 0x0e * ones) & ~x & highs) && crlfnul8(x);
}

/* Non-zero when a byte of x is below 0x20 or is 0x7f, the bytes that can break a run of field
 * bytes (HTAB, the one control byte that does not, takes the byte loop): each test is exact
 * for "any byte" (Bit Twiddling Hacks' hasless(x, 0x20) and haszero(x ^ 0x7f...)). */
static int field_stop_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t del = x ^ (0x7f * ones);
    return (((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs ? 1 : 0;
}

size_t gw_http_field_run(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i + 8 <= n) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (!field_stop_word(x)) {
            i += 8;
            continue;
        }
        for (size_t end = i + 8; i < end; i++) /* which byte, if not an HTAB */
            if (!gw_http_is_field_byte(p[i]))
                return i;
    }
    while (i < n && gw_http_is_field_byte(p[i]))
        i++;
    return i;
}

int gw_http_has_crlfnul(gw_slice_t s)
{
    const uint8_t *p = s.base;
    size_t n = s.len;
    uint64_t x;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, p + i, 8);
            if (crlfnul_word(x))
                return 1;
        }
        memcpy(&x, p + n - 8, 8); /* the last word, overlapping the previous one */
        return crlfnul_word(x);
    }
    if (n >= 4) { /* two overlapping halves cover every byte */
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return crlfnul_word((uint64_t)hi << 32 | lo);
    }
    if (n == 0)
        return 0;
    /* 1 to 3 bytes: first, middle and last, padded with spaces */
    x = 0x2020202020000000ull | p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16;
    return crlfnul_word(x);
}

static int path_hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* gw_http_path_as_read (http.h); the rules are RFC 3986 §6.2.2.2 (percent-encoded unreserved
 * bytes), RFC 2396 §3.3 (';' parameters) and RFC 3986 §5.2.4 (dot segments). */
size_t gw_http_path_as_read(gw_slice_t p, uint8_t *out)
{
    size_t n = 0, seg = 0; /* seg: where the current segment starts in out (after its '/') */
    int param = 0;
    for (size_t i = 0; i < p.len && p.base[i] != '?'; i++) {
        uint8_t c = p.base[i];
        if (c == '%' && i + 2 < p.len && path_hexval(p.base[i + 1]) >= 0 &&
            path_hexval(p.base[i + 2]) >= 0) {
            uint8_t d = (uint8_t)(path_hexval(p.base[i + 1]) << 4 | path_hexval(p.base[i + 2]));
            int unreserved = (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') ||
                             (d >= '0' && d <= '9') || d == '-' || d == '.' || d == '_' || d == '~';
            if (unreserved || d == '/' || d == '\\') {
                c = d == '\\' ? '/' : d;
                i += 2;
            }
        }
        if (c != '/') {
            if (c == ';')
                param = 1;
            if (!param)
                out[n++] = c;
            continue;
        }
        param = 0;
        /* the segment out[seg..n) ends: "." goes, ".." goes with the one before it */
        size_t sl = n - seg;
        if (sl == 1 && out[seg] == '.') {
            n = seg;
        } else if (sl == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            n = seg ? seg - 1 : 0;
            while (n > 0 && out[n - 1] != '/')
                n--;
        } else if (n > 0 && out[n - 1] == '/') {
            continue; /* an empty segment: a run of '/' is one */
        } else {
            out[n++] = '/';
        }
        if (n == 0)
            out[n++] = '/';
        seg = n;
    }
    size_t sl = n - seg; /* the last segment, without a '/' after it */
    if (sl == 1 && out[seg] == '.') {
        n = seg;
    } else if (sl == 2 && out[seg] == '.' && out[seg + 1] == '.') {
        n = seg ? seg - 1 : 0;
        while (n > 0 && out[n - 1] != '/')
            n--;
    }
    if (n == 0)
        out[n++] = '/';
    return n;
}
