#include "alloc.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#ifdef GW_TEST_API
static _Thread_local unsigned long fail_countdown;
static _Thread_local int fail_hit;
static _Thread_local int counting;
static _Thread_local long long count_live, count_allocs;

/* Usable size: what the block really takes, so a test sees the allocator's rounding too. */
static void count_add(void *p, int sign)
{
    if (counting && p) {
        count_live += sign * (long long)malloc_usable_size(p);
        if (sign > 0)
            count_allocs++;
    }
}

static int should_fail(void)
{
    if (fail_countdown == 0)
        return 0;
    if (--fail_countdown == 0) {
        fail_hit = 1;
        return 1;
    }
    return 0;
}
#else
/* without the tests' hooks: nothing is counted, nothing fails on purpose */
static inline void count_add(void *p, int sign)
{
    (void)p, (void)sign;
}

static inline int should_fail(void)
{
    return 0;
}
#endif

void *gw_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = malloc(n ? n : 1);
    count_add(p, 1);
    return p;
}

char *gw_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = gw_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void *gw_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    count_add(p, 1);
    return p;
}

void *gw_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
#ifdef GW_TEST_API
    if (counting) {
        long long old = p ? (long long)malloc_usable_size(p) : 0;
        void *q = realloc(p, n ? n : 1);
        if (q) {
            count_live -= old;
            count_add(q, 1);
        }
        return q;
    }
#endif
    return realloc(p, n ? n : 1);
}

void gw_free(void *p)
{
    count_add(p, -1);
    free(p);
}

#ifdef GW_TEST_API
void gw_alloc_count_start(void)
{
    counting = 1;
    count_live = count_allocs = 0;
}

void gw_alloc_count_stop(void)
{
    counting = 0;
}

long long gw_alloc_count_live(void)
{
    return count_live;
}

long long gw_alloc_count_allocs(void)
{
    return count_allocs;
}

void gw_alloc_fail_after(unsigned long n)
{
    fail_countdown = n;
    fail_hit = 0;
}

int gw_alloc_fail_hit(void)
{
    return fail_hit;
}
#endif
