/* common/method.h — request methods (RFC 9110 §9), one rule for both fronts and the proxy.
 *
 * Any token is a method (§9.1: "the method token is case-sensitive"; the set is extensible):
 * the HTTP/1.1 and HTTP/2 fronts accept the same methods and refuse the same non-tokens (400,
 * or RST_STREAM(PROTOCOL_ERROR) for HTTP/2). What the gateway does with a request depends on
 * the properties below, which it knows for the methods of RFC 9110 and RFC 5789 only: a method
 * it does not know (`BREW`, `PROPFIND`, a misspelt `get`) is forwarded as unsafe and
 * non-idempotent, so it is never sent twice (retry, pipelining) and never shares an answer
 * (coalescing). CONNECT (§9.3.6) is the one method the gateway refuses itself (405).
 */
#ifndef GW_COMMON_METHOD_H
#define GW_COMMON_METHOD_H

#include "common/buf.h"

/* GW_METHOD_F_*: what RFC 9110 §9.2 says of a method. */
enum {
    GW_METHOD_F_SAFE = 1u << 0,       /* §9.2.1: GET, HEAD, OPTIONS, TRACE */
    GW_METHOD_F_IDEMPOTENT = 1u << 1, /* §9.2.2: the safe ones, PUT, DELETE: may be sent again */
    GW_METHOD_F_CACHEABLE = 1u << 2,  /* §9.2.3: GET, HEAD, POST (RFC 9111 §3 narrows POST) */
};

/* Non-zero when m may be a method: a non-empty token (RFC 9110 §9.1, §5.6.2). */
int gw_method_valid(gw_slice_t m);

/* The GW_METHOD_F_* properties of m (compared case-sensitively); 0 for a method the gateway
 * does not know, whatever it is called. */
unsigned gw_method_flags(gw_slice_t m);

/* Shorthands of gw_method_flags(). */
static inline int gw_method_idempotent(gw_slice_t m)
{
    return (gw_method_flags(m) & GW_METHOD_F_IDEMPOTENT) != 0;
}

/* Non-zero for CONNECT (§9.3.6), which asks for a tunnel rather than a representation. */
int gw_method_is_connect(gw_slice_t m);

#endif
