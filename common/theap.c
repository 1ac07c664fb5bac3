#include "theap.h"

#include "alloc.h"
#include "err.h"

void gw_theap_init(gw_theap_t *h)
{
    h->v = NULL;
    h->len = h->cap = 0;
}

void gw_theap_free(gw_theap_t *h)
{
    for (uint32_t i = 0; i < h->len; i++)
        h->v[i]->slot = GW_THEAP_NONE;
    gw_free(h->v);
    gw_theap_init(h);
}

static void put(gw_theap_t *h, uint32_t i, gw_theap_node_t *n)
{
    h->v[i] = n;
    n->slot = i;
}

static void sift_up(gw_theap_t *h, uint32_t i)
{
    gw_theap_node_t *n = h->v[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (h->v[p]->due <= n->due)
            break;
        put(h, i, h->v[p]);
        i = p;
    }
    put(h, i, n);
}

static void sift_down(gw_theap_t *h, uint32_t i)
{
    gw_theap_node_t *n = h->v[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && h->v[c + 1]->due < h->v[c]->due)
            c++;
        if (n->due <= h->v[c]->due)
            break;
        put(h, i, h->v[c]);
        i = c;
    }
    put(h, i, n);
}

int gw_theap_reserve(gw_theap_t *h, size_t n)
{
    if (n <= h->cap)
        return 0;
    if (n > UINT32_MAX - 1)
        return GW_E_NOMEM;
    /* grows by half: the array is a per-connection cost once thousands are idle */
    size_t ncap = h->cap ? h->cap + h->cap / 2 : 64;
    if (ncap < n)
        ncap = n;
    if (ncap > UINT32_MAX - 1)
        ncap = UINT32_MAX - 1;
    gw_theap_node_t **v = gw_realloc(h->v, ncap * sizeof(*v));
    if (!v)
        return GW_E_NOMEM;
    h->v = v;
    h->cap = (uint32_t)ncap;
    return 0;
}

int gw_theap_set(gw_theap_t *h, gw_theap_node_t *n, uint64_t due)
{
    if (gw_theap_queued(n)) {
        uint64_t old = n->due;
        n->due = due;
        if (due < old)
            sift_up(h, n->slot);
        else if (due > old)
            sift_down(h, n->slot);
        return 0;
    }
    if (h->len == h->cap && gw_theap_reserve(h, (size_t)h->len + 1) < 0)
        return GW_E_NOMEM;
    n->due = due;
    put(h, h->len++, n);
    sift_up(h, n->slot);
    return 0;
}

void gw_theap_remove(gw_theap_t *h, gw_theap_node_t *n)
{
    if (!gw_theap_queued(n))
        return;
    uint32_t i = n->slot;
    n->slot = GW_THEAP_NONE;
    gw_theap_node_t *last = h->v[--h->len];
    if (i == h->len)
        return;
    put(h, i, last);
    /* the moved node may belong above or below its new slot */
    if (i > 0 && h->v[(i - 1) / 2]->due > last->due)
        sift_up(h, i);
    else
        sift_down(h, i);
}
