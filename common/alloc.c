#include "alloc.h"

#include <stdlib.h>

static _Thread_local unsigned long fail_countdown;
static _Thread_local int fail_hit;

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

void *gw_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *gw_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *gw_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void gw_free(void *p)
{
    free(p);
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
