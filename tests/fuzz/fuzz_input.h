/* fuzz_input.h — how the fuzz targets that take text pieces cut their input. */
#ifndef GW_FUZZ_INPUT_H
#define GW_FUZZ_INPUT_H

#include <stdint.h>

#include "common/buf.h"

/* The next piece of [*p, e) up to a newline (not included), *p moved past it; an empty piece
 * at the end. */
static inline gw_slice_t fz_next_piece(const uint8_t **p, const uint8_t *e)
{
    const uint8_t *b = *p, *q = b;
    while (q < e && *q != '\n')
        q++;
    *p = q < e ? q + 1 : q;
    return (gw_slice_t){b, (size_t)(q - b)};
}

#endif
