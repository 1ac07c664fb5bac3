/* h2/validate.h — the field-name rule of RFC 9113 §8.2.1, the one field rule HTTP/2 adds to
 * those of HTTP (http/http.h: field values, connection-specific fields, Content-Length). The
 * request checks of §8.1-§8.3 run inside the session (h2/validate.c). */
#ifndef GW_H2_VALIDATE_H
#define GW_H2_VALIDATE_H

#include "common/buf.h"

/* §8.2.1: a non-empty name of lowercase field characters (':' allowed first, for pseudo-header
 * fields, which are checked apart). */
int gw_h2_field_name_valid(gw_slice_t name);

#endif
