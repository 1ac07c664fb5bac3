/* cluster/replies.c — what Redis answers, checked before it is used (sans-IO). Redis is a peer
 * like an origin: a broken, hostile or impersonated one may answer anything, so every number is
 * bounded in unsigned arithmetic and every text made safe before it reaches a header or a log
 * line. */
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
