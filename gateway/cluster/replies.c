/* cluster/replies.c — what Redis answers, checked before it is used (sans-IO). Redis is a peer
 * like an origin: a broken, hostile or impersonated one may answer anything, so every number is
 * bounded in unsigned arithmetic and every text made safe before it reaches a header or a log
 * line. */
#include <stdio.h>
#include <string.h>

#include "cluster/cluster_internal.h"
#include "common/err.h"

int gw_cluster__rate_reply(long long ok, long long retry_us, uint64_t n, uint64_t *allowed,
                           unsigned *retry_s)
{
    /* the script lets at most the n it was asked about go, and never fewer than none */
    if (ok < 0 || (unsigned long long)ok > n)
        return GW_E_PARSE;
    *allowed = (uint64_t)ok;
    /* RFC 9110 §10.2.3 delay-seconds, rounded up so that a client that waits succeeds; a
     * refusal always says at least 1 s (0 or less from the script: the budget refills within
     * the second) and at most GW_CLUSTER_RETRY_MAX_S */
    uint64_t us = retry_us > 0 ? (uint64_t)retry_us : 0;
    uint64_t s = us / 1000000u + (us % 1000000u != 0);
    if (s < 1)
        s = 1;
    if (s > GW_CLUSTER_RETRY_MAX_S)
        s = GW_CLUSTER_RETRY_MAX_S;
    *retry_s = (unsigned)s;
    return 0;
}

int gw_cluster__lease_reply(long long granted, uint64_t want, uint64_t *out)
{
    /* the script grants math.min(want, tokens), floored at 0 */
    if (granted < 0 || (unsigned long long)granted > want)
        return GW_E_PARSE;
    *out = (uint64_t)granted;
    return 0;
}

int gw_cluster__alive_reply(long long n, unsigned *out)
{
    /* the asker has just added itself, so at least 1; the bound keeps a share (a limit divided
     * by it) from going to nothing on a peer's word */
    if (n < 1 || (unsigned long long)n > GW_CLUSTER_INSTANCES_MAX)
        return GW_E_PARSE;
    *out = (unsigned)n;
    return 0;
}

/* A host as a sentinel names it: an IPv4 or IPv6 address, or (announce-hostnames) a name. */
static int host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == ':' || ch == '_' || ch == '%';
}

int gw_cluster__primary_addr(const char *host, size_t hl, const char *port, size_t pl,
                             char out_host[GW_CLUSTER_HOST_MAX + 1], unsigned *out_port)
{
    if (!host || !port || hl < 1 || hl > GW_CLUSTER_HOST_MAX || pl < 1 || pl > 5)
        return GW_E_PARSE;
    for (size_t i = 0; i < hl; i++)
        if (!host_char(host[i]))
            return GW_E_PARSE;
    unsigned p = 0;
    for (size_t i = 0; i < pl; i++) {
        if (port[i] < '0' || port[i] > '9')
            return GW_E_PARSE;
        p = p * 10 + (unsigned)(port[i] - '0');
    }
    if (p < 1 || p > 65535)
        return GW_E_PARSE;
    memcpy(out_host, host, hl);
    out_host[hl] = 0;
    *out_port = p;
    return 0;
}

/* HOST:PORT of a checked address into out ([HOST]:PORT when the host is IPv6). */
static int addr_text(const char *h, size_t hl, const char *p, size_t pl, char *out, size_t cap)
{
    char host[GW_CLUSTER_HOST_MAX + 1];
    unsigned port;
    if (gw_cluster__primary_addr(h, hl, p, pl, host, &port) < 0)
        return GW_E_PARSE;
    int v6 = memchr(host, ':', hl) != NULL;
    int n = snprintf(out, cap, v6 ? "[%s]:%u" : "%s:%u", host, port);
    return n > 0 && (size_t)n < cap ? 0 : GW_E_PARSE;
}

int gw_cluster__switch_msg(const char *msg, size_t len, const char *master, char *from, size_t fcap,
                           char *to, size_t tcap)
{
    /* five words separated by single spaces (Redis's sentinel.c: "%s %s %d %s %d") */
    const char *w[5];
    size_t wl[5], n = 0, i = 0;
    while (i <= len && n < 5) {
        size_t j = i;
        while (j < len && msg[j] != ' ')
            j++;
        w[n] = msg + i;
        wl[n++] = j - i;
        i = j + 1;
    }
    if (n != 5 || i <= len || !master || strlen(master) != wl[0] ||
        memcmp(w[0], master, wl[0]) != 0)
        return GW_E_PARSE;
    if (addr_text(w[1], wl[1], w[2], wl[2], from, fcap) < 0 ||
        addr_text(w[3], wl[3], w[4], wl[4], to, tcap) < 0)
        return GW_E_PARSE;
    return 0;
}

int gw_cluster__sha_ok(const char *s, size_t len)
{
    if (!s || len != GW_CLUSTER_SHA_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

void gw_cluster__log_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t o = 0;
    if (!cap)
        return;
    for (size_t i = 0; src && i < len && o + 1 < cap; i++) {
        unsigned char ch = (unsigned char)src[i];
        /* a log line is key=value with "quoted" values: no line breaks, quotes or escapes */
        dst[o++] = ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? (char)ch : '?';
    }
    dst[o] = 0;
}
