/* common/pool.h — freelist pool of fixed-size objects with a hard cap.
 *
 * Connections, streams and exchanges come from pools: gw_pool_get reuses a freed object
 * before allocating, and fails with NULL once `max` objects are live (the caller answers
 * with its layer's limit behaviour). Objects are not zeroed on reuse unless asked.
 * Under AddressSanitizer an object waiting on the freelist is poisoned (all but its link), so a
 * use after gw_pool_put() is reported as it would be after free().
 */
#ifndef GW_COMMON_POOL_H
#define GW_COMMON_POOL_H

#include <stddef.h>

typedef struct gw_pool_free {
    struct gw_pool_free *next;
} gw_pool_free_t;

typedef struct {
    size_t obj_size;
    size_t live;      /* objects handed out and not yet put back */
    size_t max;       /* cap on live objects; 0 = unbounded */
    size_t free_cnt;  /* objects on the freelist */
    size_t free_keep; /* at most this many are kept on the freelist; the rest are freed */
    gw_pool_free_t *free;
} gw_pool_t;

/* The freelist bound every layer uses for its per-request objects (streams, exchanges): as
 * many as a busy worker has in flight (512 concurrent streams are usual), so that a steady load
 * allocates nothing. */
#define GW_POOL_KEEP 512

void gw_pool_init(gw_pool_t *p, size_t obj_size, size_t max, size_t free_keep);
/* Frees the freelist. Live objects must have been put back. */
void gw_pool_free(gw_pool_t *p);
/* A zeroed object, or NULL when out of memory or at the cap. */
void *gw_pool_get(gw_pool_t *p);
/* The same without zeroing: the contents are whatever the last user left (or fresh malloc
 * bytes). For objects whose owner initialises only the part it uses. */
void *gw_pool_get_raw(gw_pool_t *p);
void gw_pool_put(gw_pool_t *p, void *obj);

#endif
