/* cache/cache_internal.h — what the files of cache/ share (not a public interface).
 *
 * policy.c: RFC 9111 and RFC 5861 as pure functions over heads: storable, freshness, age, the
 *           request's directives, conditional requests, ranges, 304 updates, invalidation.
 * key.c:    the primary key (the URL, normalised) and the Vary key (§4.1).
 * store.c:  the store: shards, each a hash index and S3-FIFO queues under one lock, the byte
 *           budget, refcounted entries.
 *
 * policy.c and store.c call key.c; key.c calls neither.
 */
#ifndef GW_CACHE_INTERNAL_H
#define GW_CACHE_INTERNAL_H

#include "cache/cache.h"

/* The first field line named name in f[0..n) into *v: 1, or 0 when there is none. */
int gw_cache__field(const gw_field_t *f, size_t n, const char *name, gw_slice_t *v);

#endif
