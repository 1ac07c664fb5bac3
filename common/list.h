/* common/list.h — intrusive circular doubly linked list (no allocation).
 *
 * Embed a gw_list_t in the element, keep a gw_list_t head, recover the element with
 * GW_CONTAINER_OF. An unlinked node points to itself, so gw_list_remove is idempotent.
 */
#ifndef GW_COMMON_LIST_H
#define GW_COMMON_LIST_H

#include <stddef.h>

typedef struct gw_list {
    struct gw_list *prev, *next;
} gw_list_t;

static inline void gw_list_init(gw_list_t *h)
{
    h->prev = h->next = h;
}
static inline int gw_list_empty(const gw_list_t *h)
{
    return h->next == h;
}
static inline int gw_list_linked(const gw_list_t *n)
{
    return n->next != n;
}
static inline void gw_list_insert_before(gw_list_t *pos, gw_list_t *n)
{
    n->prev = pos->prev;
    n->next = pos;
    pos->prev->next = n;
    pos->prev = n;
}
static inline void gw_list_push_back(gw_list_t *h, gw_list_t *n)
{
    gw_list_insert_before(h, n);
}
static inline void gw_list_push_front(gw_list_t *h, gw_list_t *n)
{
    gw_list_insert_before(h->next, n);
}
static inline void gw_list_remove(gw_list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline gw_list_t *gw_list_pop_front(gw_list_t *h)
{
    if (gw_list_empty(h))
        return NULL;
    gw_list_t *n = h->next;
    gw_list_remove(n);
    return n;
}

#define gw_list_foreach(it, h) for (gw_list_t *it = (h)->next; it != (h); it = it->next)
#define gw_list_foreach_safe(it, tmp, h)                                                           \
    for (gw_list_t *it = (h)->next, *tmp = it->next; it != (h); it = tmp, tmp = it->next)

#endif
