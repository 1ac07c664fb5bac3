#include "pool.h"

#include <string.h>

#include "alloc.h"
#include "err.h"

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
        gw_free(p->free);
        p->free = n;
    }
    p->free_cnt = 0;
}

void *gw_pool_get(gw_pool_t *p)
{
    if (p->max && p->live >= p->max)
        return NULL;
    void *o;
    if (p->free) {
        o = p->free;
        p->free = p->free->next;
        p->free_cnt--;
    } else {
        o = gw_malloc(p->obj_size);
        if (!o)
            return NULL;
    }
    memset(o, 0, p->obj_size);
    p->live++;
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
}
