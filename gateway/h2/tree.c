/* h2/tree.c — RFC 7540 §5.3 dependency tree with weighted fair sharing (see tree.h). */
#include "h2/tree.h"

#include "common/alloc.h"
#include "common/err.h"

#define NONE (-1)
#define ROOT 0

typedef enum {
    N_FREE = 0,
    N_IDLE,   /* placeholder named by PRIORITY, stream not opened (RFC 7540 §5.3.4) */
    N_OPEN,   /* open or half-closed stream: never evicted */
    N_CLOSED, /* placeholder of a closed stream (§5.3.4) */
} nstate_t;

typedef struct {
    uint32_t id;
    int32_t parent, first_child, next_sib, prev_sib; /* indexes into t->n, NONE */
    uint16_t weight;                                 /* 1..256 */
    uint8_t state;                                   /* nstate_t */
    uint8_t ready;                                   /* has DATA and a window */
    uint32_t nready;                                 /* ready nodes in the subtree, self included */
    uint64_t vt;     /* virtual time among siblings: bytes * 256 / weight sent by the subtree */
    uint64_t vclock; /* as a parent: vt of the child picked last (new ready children start here) */
    int32_t ph_prev, ph_next; /* placeholder FIFO (idle/closed, oldest first), NONE */
    void *data;
} tnode_t;

struct gw_h2_tree {
    size_t cap; /* max nodes, root excluded */
    size_t used;
    int32_t free_head;        /* free nodes chained by next_sib */
    int32_t ph_head, ph_tail; /* placeholders in the order they became one: head goes first */
    uint64_t evictions;
    tnode_t *n;   /* cap + 1 entries; n[0] is the root (stream 0) */
    int32_t *tab; /* id -> node index, open addressing with linear probing; NONE = empty */
    uint32_t mask;
};

/* ---- id index ------------------------------------------------------------------------------ */

static uint32_t home(const gw_h2_tree_t *t, uint32_t id)
{
    return (id * 2654435761u) & t->mask; /* Fibonacci hashing */
}

static int32_t find(const gw_h2_tree_t *t, uint32_t id)
{
    if (id == 0)
        return ROOT;
    for (uint32_t i = home(t, id);; i = (i + 1) & t->mask) {
        int32_t x = t->tab[i];
        if (x == NONE)
            return NONE;
        if (t->n[x].id == id)
            return x;
    }
}

static void index_add(gw_h2_tree_t *t, int32_t x)
{
    uint32_t i = home(t, t->n[x].id);
    while (t->tab[i] != NONE)
        i = (i + 1) & t->mask;
    t->tab[i] = x;
}

/* Linear-probing deletion by backward shift: no tombstones, so lookups stay short. */
static void index_del(gw_h2_tree_t *t, int32_t x)
{
    uint32_t i = home(t, t->n[x].id);
    while (t->tab[i] != x)
        i = (i + 1) & t->mask;
    for (uint32_t j = (i + 1) & t->mask; t->tab[j] != NONE; j = (j + 1) & t->mask) {
        uint32_t k = home(t, t->n[t->tab[j]].id);
        /* the entry at j may move to i if its home is not in the cyclic range (i, j] */
        if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
            t->tab[i] = t->tab[j];
            i = j;
        }
    }
    t->tab[i] = NONE;
}

/* ---- placeholder FIFO ------------------------------------------------------------------------ */

static void ph_unlink(gw_h2_tree_t *t, int32_t x)
{
    tnode_t *n = &t->n[x];
    if (n->ph_prev == NONE && t->ph_head != x)
        return; /* not in the list */
    if (n->ph_prev != NONE)
        t->n[n->ph_prev].ph_next = n->ph_next;
    else
        t->ph_head = n->ph_next;
    if (n->ph_next != NONE)
        t->n[n->ph_next].ph_prev = n->ph_prev;
    else
        t->ph_tail = n->ph_prev;
    n->ph_prev = n->ph_next = NONE;
}

static void ph_push(gw_h2_tree_t *t, int32_t x)
{
    ph_unlink(t, x);
    tnode_t *n = &t->n[x];
    n->ph_prev = t->ph_tail;
    if (t->ph_tail != NONE)
        t->n[t->ph_tail].ph_next = x;
    else
        t->ph_head = x;
    t->ph_tail = x;
}

/* ---- structure ------------------------------------------------------------------------------- */

/* Add d to nready of x and its ancestors. A subtree that turns ready joins its siblings at
 * their current virtual time, so that it does not claim the time it was idle. */
static void add_ready(gw_h2_tree_t *t, int32_t x, int32_t d)
{
    while (x != NONE) {
        tnode_t *n = &t->n[x];
        uint32_t before = n->nready;
        n->nready = (uint32_t)((int32_t)n->nready + d);
        if (before == 0 && n->nready > 0 && n->parent != NONE) {
            uint64_t clk = t->n[n->parent].vclock;
            if (n->vt < clk)
                n->vt = clk;
        }
        x = n->parent;
    }
}

static void unlink_node(gw_h2_tree_t *t, int32_t x)
{
    tnode_t *n = &t->n[x];
    if (n->parent == NONE)
        return;
    if (n->nready)
        add_ready(t, n->parent, -(int32_t)n->nready);
    if (n->prev_sib != NONE)
        t->n[n->prev_sib].next_sib = n->next_sib;
    else
        t->n[n->parent].first_child = n->next_sib;
    if (n->next_sib != NONE)
        t->n[n->next_sib].prev_sib = n->prev_sib;
    n->parent = n->next_sib = n->prev_sib = NONE;
}

static void link_node(gw_h2_tree_t *t, int32_t x, int32_t p)
{
    tnode_t *n = &t->n[x];
    GW_ASSERT(n->parent == NONE && x != p);
    n->parent = p;
    n->prev_sib = NONE;
    n->next_sib = t->n[p].first_child;
    if (n->next_sib != NONE)
        t->n[n->next_sib].prev_sib = x;
    t->n[p].first_child = x;
    if (n->nready) {
        uint64_t clk = t->n[p].vclock;
        if (n->vt < clk)
            n->vt = clk;
        add_ready(t, p, (int32_t)n->nready);
    }
}

/* Is a in the subtree below x? */
static int is_descendant(const gw_h2_tree_t *t, int32_t a, int32_t x)
{
    for (int32_t p = t->n[a].parent; p != NONE; p = t->n[p].parent)
        if (p == x)
            return 1;
    return 0;
}

/* §5.3.4: a removed node's children go to its parent, sharing its weight in proportion to
 * their own weights (at least 1). */
static void evict(gw_h2_tree_t *t, int32_t x)
{
    tnode_t *n = &t->n[x];
    unsigned sum = 0;
    for (int32_t c = n->first_child; c != NONE; c = t->n[c].next_sib)
        sum += t->n[c].weight;
    int32_t p = n->parent;
    int32_t c;
    while ((c = n->first_child) != NONE) {
        unsigned w = (unsigned)n->weight * t->n[c].weight / sum;
        t->n[c].weight = (uint16_t)(w ? w : 1);
        unlink_node(t, c);
        link_node(t, c, p);
    }
    unlink_node(t, x);
    ph_unlink(t, x);
    index_del(t, x);
    n->state = N_FREE;
    n->next_sib = t->free_head;
    t->free_head = x;
    t->used--;
    t->evictions++;
}

/* A fresh node for id under the root with the default weight; evicts the oldest placeholder
 * when full. NONE when every node is an open stream. */
static int32_t alloc_node(gw_h2_tree_t *t, uint32_t id, nstate_t st)
{
    if (t->free_head == NONE) {
        if (t->ph_head == NONE)
            return NONE;
        evict(t, t->ph_head);
    }
    int32_t x = t->free_head;
    tnode_t *n = &t->n[x];
    t->free_head = n->next_sib;
    *n = (tnode_t){.id = id,
                   .parent = NONE,
                   .first_child = NONE,
                   .next_sib = NONE,
                   .prev_sib = NONE,
                   .weight = GW_H2_TREE_DEFAULT_WEIGHT,
                   .state = (uint8_t)st,
                   .ph_prev = NONE,
                   .ph_next = NONE};
    t->used++;
    index_add(t, x);
    if (st != N_OPEN)
        ph_push(t, x);
    link_node(t, x, ROOT);
    return x;
}

int gw_h2_tree_new(gw_h2_tree_t **out, size_t max_nodes)
{
    if (max_nodes == 0 || max_nodes > (1u << 28))
        return GW_E_INVAL;
    gw_h2_tree_t *t = gw_calloc(1, sizeof(*t));
    if (!t)
        return GW_E_NOMEM;
    size_t slots = 4;
    while (slots < 2 * max_nodes) /* load factor at most 1/2 */
        slots *= 2;
    t->n = gw_calloc(max_nodes + 1, sizeof(*t->n));
    t->tab = gw_calloc(slots, sizeof(*t->tab));
    if (!t->n || !t->tab) {
        gw_free(t->n);
        gw_free(t->tab);
        gw_free(t);
        return GW_E_NOMEM;
    }
    t->mask = (uint32_t)(slots - 1);
    for (size_t i = 0; i < slots; i++)
        t->tab[i] = NONE;
    t->ph_head = t->ph_tail = NONE;
    t->cap = max_nodes;
    t->n[ROOT] = (tnode_t){.parent = NONE,
                           .first_child = NONE,
                           .next_sib = NONE,
                           .prev_sib = NONE,
                           .weight = GW_H2_TREE_DEFAULT_WEIGHT,
                           .state = N_OPEN,
                           .ph_prev = NONE,
                           .ph_next = NONE};
    t->free_head = NONE;
    for (size_t i = max_nodes; i >= 1; i--) {
        t->n[i].next_sib = t->free_head;
        t->free_head = (int32_t)i;
    }
    *out = t;
    return 0;
}

void gw_h2_tree_del(gw_h2_tree_t *t)
{
    if (!t)
        return;
    gw_free(t->n);
    gw_free(t->tab);
    gw_free(t);
}

int gw_h2_tree_set(gw_h2_tree_t *t, uint32_t id, uint32_t dep, unsigned weight, int exclusive)
{
    if (id == 0 || id == dep || weight < 1 || weight > 256)
        return GW_E_INVAL;
    int32_t x = find(t, id);
    if (x == NONE && (x = alloc_node(t, id, N_IDLE)) == NONE)
        return GW_E_LIMIT;
    int32_t p = find(t, dep);
    if (p == NONE) { /* §5.3.1: a dependency on a stream not in the tree: default priority */
        p = ROOT;
        weight = GW_H2_TREE_DEFAULT_WEIGHT;
        exclusive = 0;
    }
    if (is_descendant(t, p, x)) { /* §5.3.3: the descendant moves to x's parent first */
        int32_t xp = t->n[x].parent;
        unlink_node(t, p);
        link_node(t, p, xp);
    }
    unlink_node(t, x);
    if (exclusive) { /* §5.3.1: x becomes the sole child of p, p's children its own */
        int32_t c;
        while ((c = t->n[p].first_child) != NONE) {
            unlink_node(t, c);
            link_node(t, c, x);
        }
    }
    t->n[x].weight = (uint16_t)weight;
    link_node(t, x, p);
    return 0;
}

int gw_h2_tree_open(gw_h2_tree_t *t, uint32_t id)
{
    int32_t x = find(t, id);
    if (x == NONE && (x = alloc_node(t, id, N_OPEN)) == NONE)
        return GW_E_LIMIT;
    t->n[x].state = N_OPEN;
    ph_unlink(t, x);
    return 0;
}

void gw_h2_tree_close(gw_h2_tree_t *t, uint32_t id)
{
    int32_t x = find(t, id);
    if (x == NONE || x == ROOT)
        return;
    gw_h2_tree_deactivate(t, id);
    t->n[x].state = N_CLOSED;
    t->n[x].data = NULL;
    ph_push(t, x); /* the most recent placeholder */
}

int gw_h2_tree_activate(gw_h2_tree_t *t, uint32_t id, void *data)
{
    if (id == 0)
        return GW_E_INVAL;
    int32_t x = find(t, id);
    if (x == NONE && (x = alloc_node(t, id, N_OPEN)) == NONE)
        return GW_E_LIMIT;
    tnode_t *n = &t->n[x];
    n->state = N_OPEN;
    ph_unlink(t, x);
    n->data = data;
    if (!n->ready) {
        n->ready = 1;
        add_ready(t, x, 1);
    }
    return 0;
}

void gw_h2_tree_deactivate(gw_h2_tree_t *t, uint32_t id)
{
    int32_t x = find(t, id);
    if (x == NONE || x == ROOT || !t->n[x].ready)
        return;
    t->n[x].ready = 0;
    add_ready(t, x, -1);
}

void *gw_h2_tree_pick(gw_h2_tree_t *t)
{
    int32_t x = ROOT;
    for (;;) {
        if (x != ROOT && t->n[x].ready)
            return t->n[x].data;
        int32_t best = NONE;
        for (int32_t c = t->n[x].first_child; c != NONE; c = t->n[c].next_sib)
            if (t->n[c].nready && (best == NONE || t->n[c].vt < t->n[best].vt))
                best = c;
        if (best == NONE)
            return NULL;
        t->n[x].vclock = t->n[best].vt;
        x = best;
    }
}

void gw_h2_tree_sent(gw_h2_tree_t *t, uint32_t id, size_t bytes)
{
    int32_t x = find(t, id);
    if (x == NONE)
        return;
    uint64_t b = bytes ? bytes : 1;
    for (; x != ROOT && x != NONE; x = t->n[x].parent)
        t->n[x].vt += b * 256u / t->n[x].weight;
}

#ifdef GW_TEST_API
int gw_h2_tree_get(const gw_h2_tree_t *t, uint32_t id, uint32_t *dep, unsigned *weight)
{
    int32_t x = find(t, id);
    if (x == NONE || x == ROOT)
        return GW_E_NOENT;
    if (dep)
        *dep = t->n[t->n[x].parent].id;
    if (weight)
        *weight = t->n[x].weight;
    return 0;
}

size_t gw_h2_tree_size(const gw_h2_tree_t *t)
{
    return t->used;
}
#endif

uint64_t gw_h2_tree_evictions(const gw_h2_tree_t *t)
{
    return t->evictions;
}
