/* common/clock.h — monotonic time in milliseconds and nanoseconds.
 * Codecs never call these: the IO layer reads the clock and passes `now` in. */
#ifndef GW_COMMON_CLOCK_H
#define GW_COMMON_CLOCK_H

#include <stdint.h>

uint64_t gw_now_ns(void);
static inline uint64_t gw_now_ms(void)
{
    return gw_now_ns() / 1000000u;
}

#endif
