/* h2/priority.h — the Priority field of RFC 9218 (extensible priorities), sans-IO.
 *
 * The same value travels in the `priority` request/response header (RFC 9218 §5, §8) and in
 * the PRIORITY_UPDATE frame (§7.1). It is a Structured Fields dictionary (RFC 8941 §3.2); we
 * parse the subset RFC 9218 §4 defines: `u` (urgency, Integer 0-7, default 3) and `i`
 * (incremental, Boolean, default false). Unknown keys, their values and parameters are skipped;
 * a malformed member is ignored up to the next top-level comma; a `u` outside 0-7 or of another
 * type is ignored (§4.1), so is an `i` that is not a Boolean (§4.2). The last occurrence of a
 * key wins (RFC 8941 §4.2.2), so `u=1, u=9` leaves the default. Nothing is allocated.
 */
#ifndef GW_H2_PRIORITY_H
#define GW_H2_PRIORITY_H

#include <stdint.h>

#include "common/buf.h"

#define GW_H2_PRIO_DEFAULT_URGENCY 3
#define GW_H2_PRIO_F_URGENCY 0x1     /* a valid `u` was present */
#define GW_H2_PRIO_F_INCREMENTAL 0x2 /* a valid `i` was present */

/* Parse the Priority field value v. *urgency and *incremental are set to the defaults (3, 0)
 * and then to the values found. Returns the GW_H2_PRIO_F_* bits of the parameters present
 * (0 = none, defaults apply); never fails. urgency/incremental must not be NULL. */
int gw_h2_priority_parse(gw_slice_t v, uint8_t *urgency, uint8_t *incremental);

#endif
