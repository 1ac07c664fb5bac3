/* cluster/tickets.c — the shared TLS ticket keys as Redis holds them (sans-IO: bytes in, bytes
 * out; the caller reads the clock and draws the random key). */
#include <string.h>

#include "cluster/cluster_internal.h"
#include "common/err.h"

int gw_cluster__keys_parse(const uint8_t *p, size_t len, gw_cluster_keys_t *out)
{
    if (len < GW_CLUSTER_KEYS_HEAD || memcmp(p, GW_CLUSTER_KEYS_MAGIC, 4) != 0 || p[4] != 1)
        return GW_E_PARSE;
    size_t n = p[5];
    if (n == 0 || n > GW_TLS_KEYRING_MAX || len != GW_CLUSTER_KEYS_HEAD + n * GW_TLS_KEY_LEN)
        return GW_E_PARSE;
    uint64_t born = 0;
    for (int i = 0; i < 8; i++)
        born = born << 8 | p[6 + i];
    out->born_ms = born;
    out->n = n;
    memcpy(out->keys, p + GW_CLUSTER_KEYS_HEAD, n * GW_TLS_KEY_LEN);
    return 0;
}

size_t gw_cluster__keys_write(const gw_cluster_keys_t *k, uint8_t *out)
{
    memcpy(out, GW_CLUSTER_KEYS_MAGIC, 4);
    out[4] = 1;
    out[5] = (uint8_t)k->n;
    for (int i = 0; i < 8; i++)
        out[6 + i] = (uint8_t)(k->born_ms >> (56 - 8 * i));
    memcpy(out + GW_CLUSTER_KEYS_HEAD, k->keys, k->n * GW_TLS_KEY_LEN);
    return GW_CLUSTER_KEYS_HEAD + k->n * GW_TLS_KEY_LEN;
}

int gw_cluster__keys_due(const gw_cluster_keys_t *cur, uint64_t now_ms, uint64_t rotation_ms)
{
    if (!cur || cur->n == 0)
        return 1;
    if (cur->born_ms > now_ms)
        return cur->born_ms - now_ms > GW_CLUSTER_KEYS_FUTURE_MS;
    return now_ms - cur->born_ms >= rotation_ms;
}

void gw_cluster__keys_rotate(const gw_cluster_keys_t *cur, const uint8_t fresh[GW_TLS_KEY_LEN],
                             uint64_t now_ms, gw_cluster_keys_t *next)
{
    next->born_ms = now_ms;
    memcpy(next->keys, fresh, GW_TLS_KEY_LEN);
    next->n = 1;
    if (cur && cur->n && GW_CLUSTER_KEYS_KEPT > 1) {
        memcpy(next->keys + GW_TLS_KEY_LEN, cur->keys, GW_TLS_KEY_LEN);
        next->n = 2;
    }
}
