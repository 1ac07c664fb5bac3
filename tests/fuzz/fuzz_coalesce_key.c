/* libFuzzer target: the coalescing rules of proxy/coalesce.c over arbitrary requests and routes
 * (the key overflowed its buffer when coalesce_headers named one field twice in
 * different case, which a hand-built or fuzzed route still can: only the loader de-duplicates).
 *
 * Input: byte 0 = number of coalesce_headers names (low 3 bits), coalesce_private (bit 3),
 * end_stream (bit 4); byte 1 = response status - 100 (scaled to 100..599); the rest split at
 * '\n' into the route's names, then method, scheme, authority, path, then field name/value
 * pairs (at most 64 fields). Checked: a key exists exactly when the request may coalesce; the
 * key is the same when computed twice and when the route's names change case; the response rule
 * does not read out of bounds. ASan reports any write past the key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "proxy/proxy_internal.h"

#include "fuzz_input.h"

#define MAX_FIELDS 64
#define MAX_NAMES 7

static char *cstr(gw_slice_t s)
{
    char *c = malloc(s.len + 1);
    if (!c)
        abort();
    memcpy(c, s.base, s.len);
    c[s.len] = 0;
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned nnames = data[0] & MAX_NAMES;
    const uint8_t *p = data + 2, *e = data + size;
    char *names[MAX_NAMES], *upper[MAX_NAMES];
    for (unsigned i = 0; i < nnames; i++) {
        names[i] = cstr(fz_next_piece(&p, e));
        upper[i] = cstr(gw_slice_str(names[i]));
        for (char *c = upper[i]; *c; c++)
            if (*c >= 'a' && *c <= 'z')
                *c = (char)(*c - 'a' + 'A');
    }
    gw_cfg_route_t r = {.coalesce = 1,
                        .coalesce_private = (data[0] >> 3) & 1,
                        .coalesce_headers = names,
                        .coalesce_headers_len = nnames};
    gw_req_head_t h = {.content_length = -1, .end_stream = (data[0] >> 4) & 1, .proto = GW_REQ_H2};
    h.method = fz_next_piece(&p, e);
    h.scheme = fz_next_piece(&p, e);
    h.authority = fz_next_piece(&p, e);
    h.path = fz_next_piece(&p, e);
    gw_field_t f[MAX_FIELDS];
    size_t n = 0;
    while (p < e && n < MAX_FIELDS) {
        f[n].name = fz_next_piece(&p, e);
        f[n].value = fz_next_piece(&p, e);
        n++;
    }
    h.fields = f;
    h.fields_len = n;

    int ok = gw_proxy__coalesce_request_ok(&r, &h);
    size_t l1 = 0, l2 = 0, l3 = 0;
    char *k1 = gw_proxy__coalesce_key(&r, &h, &l1);
    if (!!k1 != ok)
        abort(); /* no allocation fails here */
    if (k1) {
        char *k2 = gw_proxy__coalesce_key(&r, &h, &l2);
        gw_cfg_route_t ru = r;
        ru.coalesce_headers = upper;
        char *k3 = gw_proxy__coalesce_key(&ru, &h, &l3);
        if (!k2 || !k3 || l1 != l2 || l1 != l3 || memcmp(k1, k2, l1) || memcmp(k1, k3, l1) ||
            k1[l1] != 0)
            abort();
        gw_free(k2);
        gw_free(k3);
    }
    gw_free(k1);
    unsigned status = 100 + data[1] * 500u / 256u;
    (void)gw_proxy__coalesce_shareable(&r, status, f, n, (int)(status & 1));
    for (unsigned i = 0; i < nnames; i++) {
        free(names[i]);
        free(upper[i]);
    }
    return 0;
}
