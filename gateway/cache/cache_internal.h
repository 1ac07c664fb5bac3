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
#include "http/http.h"

/* The first field line named name in f[0..n) into *v: 1, or 0 when there is none. */
int gw_cache__field(const gw_field_t *f, size_t n, const char *name, gw_slice_t *v);

/* An authority as the key writes it (gw_cache__authority). host points into the authority or,
 * for an IPv6 literal, into ip6: the struct is not to be copied. */
typedef struct {
    gw_slice_t host; /* a name or IPv4 address as written (not lowercased), or an IPv6
                        literal's canonical text (RFC 5952, gw_http_ip_literal_canon) */
    gw_slice_t port; /* its digits without leading zeros; empty when absent, empty or the
                        scheme's default (RFC 3986 §6.2.3) */
    char ip6[GW_HTTP_IP6_LITERAL_MAX];
} gw_cache__auth_t;

/* The authority a (gw_http_is_authority) of a URL of scheme into *out: 0, or -1 when its host
 * opens a "[" that is no IPv6 literal. Two authorities name the same origin server when
 * gw_cache__same_authority says so. */
int gw_cache__authority(gw_slice_t scheme, gw_slice_t a, gw_cache__auth_t *out);

/* Whether x and y are the same authority: hosts compared without case (RFC 3986 §6.2.2.1;
 * IPv6 ones as addresses, already canonical), ports as numbers. */
int gw_cache__same_authority(const gw_cache__auth_t *x, const gw_cache__auth_t *y);

#endif
