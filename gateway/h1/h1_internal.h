/* h1/h1_internal.h — helpers shared by the files of h1/ (not a public interface). */
#ifndef GW_H1_INTERNAL_H
#define GW_H1_INTERNAL_H

#include "common/buf.h"

/* Non-zero when s is a non-empty token (RFC 9110 §5.6.2): a valid method or field name.
 * In parser.c. */
int gw_h1__is_token(gw_slice_t s);

#endif
