/* common/hash.h — FNV-1a, the one non-cryptographic hash of the project (hash tables, the
 * upstream ring, per-connection sets). Inline, sans-IO.
 *
 * Callers chain: h = gw_fnv1a64(GW_FNV64_BASIS, a, an); h = gw_fnv1a64(h, b, bn). None of the
 * tables keyed by it is exposed to a chosen-key attacker without a bound (each is sized and
 * evicts), so a keyed hash is not needed.
 */
#ifndef GW_COMMON_HASH_H
#define GW_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define GW_FNV64_BASIS 1469598103934665603ull
#define GW_FNV32_BASIS 2166136261u

static inline uint64_t gw_fnv1a64_byte(uint64_t h, uint8_t c)
{
    return (h ^ c) * 1099511628211ull;
}

static inline uint64_t gw_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = gw_fnv1a64_byte(h, b[i]);
    return h;
}

static inline uint32_t gw_fnv1a32(uint32_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

#endif
