/* h2/validate.h — the field rules of RFC 9113 §8.2 as pure predicates, shared by the session's
 * request validation (h2/validate.c) and by the proxy, which drops the same connection-specific
 * fields from HTTP/1.1 requests and origin responses (RFC 9110 §7.6.1). */
#ifndef GW_H2_VALIDATE_H
#define GW_H2_VALIDATE_H

#include <stdint.h>

#include "common/buf.h"

/* §8.2.1: a non-empty name of lowercase field characters (':' allowed first, for pseudo-header
 * fields, which are checked apart). */
int gw_h2_field_name_valid(gw_slice_t name);
/* §8.2.1: no NUL, CR or LF anywhere, no leading or trailing SP / HTAB. */
int gw_h2_field_value_valid(gw_slice_t value);
/* RFC 9110 §7.6.1, RFC 9113 §8.2.2: connection, keep-alive, proxy-connection,
 * transfer-encoding, upgrade and te (compared case-insensitively). HTTP/2 allows te only as
 * "trailers"; a proxy forwards none of them. */
int gw_h2_field_is_connection_specific(gw_slice_t name);
/* content-length as 1 to 18 digits into *out: 0, or -1 when it is not one. */
int gw_h2_content_length_parse(gw_slice_t v, int64_t *out);

#endif
