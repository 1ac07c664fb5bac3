/* h2/hpack_internal.h — tables shared by hpack.c and the generated huffman_table.c. */
#ifndef GW_H2_HPACK_INTERNAL_H
#define GW_H2_HPACK_INTERNAL_H

#include <stdint.h>

typedef struct {
    uint32_t code; /* right-aligned */
    uint8_t len;   /* bits */
} gw_hpack_huff_sym_t;

#define GW_HPACK_HUFF_SYM 1    /* a symbol was decoded */
#define GW_HPACK_HUFF_ACCEPT 2 /* input may end here (padding is a short EOS prefix) */
#define GW_HPACK_HUFF_FAIL 4   /* EOS decoded: an error (RFC 7541 §5.2) */

typedef struct {
    uint8_t next;
    uint8_t flags;
    uint8_t sym;
} gw_hpack_huff_dec_t;

extern const gw_hpack_huff_sym_t gw_hpack__huff_enc[257];
extern const gw_hpack_huff_dec_t gw_hpack__huff_dec[256][16];

#endif
