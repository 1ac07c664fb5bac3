/* libFuzzer target: what an ACME server says about renewals (acme/renew.h). The first byte
 * picks the reader: even, a directory (its renewalInfo); odd, a renewalInfo answer, whose
 * Retry-After is the input up to the first newline when bit 1 is set (else absent) and whose
 * body is the rest. Whatever the bytes: no crash, no leak, and an accepted answer keeps the
 * promises of the header (a window whose end is after its start, Retry-After within its
 * bounds, the pick inside the window, a printable explanation); RFC 3339 times read back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acme/renew.h"
#include "common/alloc.h"
#include "common/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (!(mode & 1)) {
        char *u = NULL;
        int rv = gw_acme_ari_directory(p, n, &u);
        if ((rv == 0) != (u != NULL))
            abort();
        if (u && strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0)
            abort();
        gw_free(u);
        return 0;
    }
    char ra[64], *retry = NULL;
    if (mode & 2) {
        const uint8_t *nl = memchr(p, '\n', n);
        size_t l = nl ? (size_t)(nl - p) : n;
        if (l >= sizeof(ra))
            l = sizeof(ra) - 1;
        memcpy(ra, p, l);
        ra[l] = 0;
        retry = ra;
        p += nl ? l + 1 : n;
        n -= nl ? l + 1 : n;
    }
    gw_acme_ari_t w;
    if (gw_acme_ari_parse(p, n, retry, 1735700000, &w) == 0) {
        if (w.end <= w.start || w.retry_s < GW_ACME_ARI_RETRY_MIN_S ||
            w.retry_s > GW_ACME_ARI_RETRY_MAX_S)
            abort();
        int64_t t = gw_acme_ari_pick(&w, (uint64_t)size * 0x9E3779B97F4A7C15ull);
        if (t < w.start || t >= w.end)
            abort();
        for (const char *c = w.explanation; *c; c++)
            if (*c <= ' ' || *c > '~' || *c == '"')
                abort();
    }
    /* the input as one time string */
    char s[64];
    size_t l = n < sizeof(s) - 1 ? n : sizeof(s) - 1;
    memcpy(s, p, l);
    s[l] = 0;
    int64_t t;
    (void)gw_acme_rfc3339(s, &t);
    return 0;
}
