/* libFuzzer target: the PROXY protocol header parser (front/proxy_header.c) on the first bytes
 * of a connection, as a balancer (or anyone who reaches a proxy_protocol listener) sends them.
 * Properties: the parser reads nothing past len (ASan), a header it accepts is no longer than
 * its input and the version's bound, the same bytes followed by anything parse the same, and
 * every shorter prefix of an accepted header asks for more rather than failing. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "front/proxy_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_proxy_hdr_t h, h2;
    const char *why = NULL;
    /* an exact-size copy: ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    ssize_t n = gw_proxy_hdr_parse(buf, size, &h, &why);
    if (n == GW_E_PARSE && !why)
        abort();
    if (n > 0) {
        if ((size_t)n > size || (h.version == 1 && n > 107) ||
            (h.version == 2 && n > GW_PROXY_HDR_V2_MAX))
            abort();
        if (!h.local && h.src.ss_family != AF_INET && h.src.ss_family != AF_INET6)
            abort();
        for (size_t k = 0; k < (size_t)n; k++)
            if (gw_proxy_hdr_parse(buf, k, &h2, &why) != 0)
                abort();
        uint8_t *more = malloc(size + 8);
        if (more) {
            memcpy(more, buf, size);
            memset(more + size, 'x', 8);
            if (gw_proxy_hdr_parse(more, size + 8, &h2, &why) != n ||
                memcmp(&h.src, &h2.src, sizeof(h.src)) != 0)
                abort();
            free(more);
        }
    }
    free(buf);
    return 0;
}
