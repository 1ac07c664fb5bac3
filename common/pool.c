#include "pool.h"

#include <string.h>

#include "alloc.h"
#include "err.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
/* A pooled object is free memory to everyone but the pool: the link stays readable. */
#define POISON(o, n)                                                                               \
    ASAN_POISON_MEMORY_REGION((char *)(o) + sizeof(gw_pool_free_t), (n) - sizeof(gw_pool_free_t))
#define UNPOISON(o, n) ASAN_UNPOISON_MEMORY_REGION((o), (n))
#else
#define POISON(o, n) ((void)(o), (void)(n))
#define UNPOISON(o, n) ((void)(o), (void)(n))
#endif

void gw_pool_init(gw_pool_t *p, size_t obj_size, size_t max, size_t free_keep)
{
    p->obj_size = obj_size < sizeof(gw_pool_free_t) ? sizeof(gw_pool_free_t) : obj_size;
    p->live = 0;
    p->max = max;
    p->free_cnt = 0;
    p->free_keep = free_keep;
    p->free = NULL;
}

void gw_pool_free(gw_pool_t *p)
{
    GW_ASSERT(p->live == 0);
    while (p->free) {
        gw_pool_free_t *n = p->free->next;
        UNPOISON(p->free, p->obj_size);
        gw_free(p->free);
        p->free = n;
    }
    p->free_cnt = 0;
}

void *gw_pool_get_raw(gw_pool_t *p)
{
    if (p->max && p->live >= p->max)
        return NULL;
    void *o;
    if (p->free) {
        o = p->free;
        p->free = p->free->next;
        p->free_cnt--;
        UNPOISON(o, p->obj_size);
    } else {
        o = gw_malloc(p->obj_size);
        if (!o)
            return NULL;
    }
    p->live++;
    return o;
}

void *gw_pool_get(gw_pool_t *p)
{
    void *o = gw_pool_get_raw(p);
    if (o)
        memset(o, 0, p->obj_size);
    return o;
}

void gw_pool_put(gw_pool_t *p, void *obj)
{
    if (!obj)
        return;
    GW_ASSERT(p->live > 0);
    p->live--;
    if (p->free_cnt >= p->free_keep) {
        gw_free(obj);
        return;
    }
    gw_pool_free_t *f = obj;
    f->next = p->free;
    p->free = f;
    p->free_cnt++;
    POISON(obj, p->obj_size);
}
