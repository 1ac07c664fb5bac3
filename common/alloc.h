/* common/alloc.h — the allocator every h2gate module uses.
 *
 * Thin wrappers over malloc so that tests can make the n-th allocation fail (the
 * failing-allocation sweep of the unit tests, tests/unit/test_alloc_fail.c). The countdown is
 * per thread.
 */
#ifndef GW_COMMON_ALLOC_H
#define GW_COMMON_ALLOC_H

#include <stddef.h>

void *gw_malloc(size_t n);
void *gw_calloc(size_t count, size_t size);
void *gw_realloc(void *p, size_t n);
void gw_free(void *p);
/* A gw_malloc'd copy of the string s; NULL for a NULL s or when out of memory. */
char *gw_strdup(const char *s);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Test hook: make the n-th allocation from now fail (1 = the next one), 0 disables.
 * gw_alloc_fail_hit() tells whether an injected failure has happened since the last arm. */
void gw_alloc_fail_after(unsigned long n);
int gw_alloc_fail_hit(void);

/* Test hook: count, on this thread, the bytes of the blocks these functions hand out (the
 * allocator's usable size, rounding included) minus those given back, from
 * gw_alloc_count_start() until gw_alloc_count_stop(). Tests measure what an object really
 * keeps, e.g. an idle HTTP/2 session. Blocks allocated before the start and freed while
 * counting make the figure smaller: start before creating what is measured. */
void gw_alloc_count_start(void);
void gw_alloc_count_stop(void);
long long gw_alloc_count_live(void);   /* bytes live now (may be negative, see above) */
long long gw_alloc_count_allocs(void); /* allocations since the start */
#endif

#endif
