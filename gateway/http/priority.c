/* http/priority.c — the Priority field of RFC 9218 §4 over the Dictionary of RFC 8941. */
#include "http/http.h"

int gw_http_priority_parse(gw_slice_t v, uint8_t *urgency, uint8_t *incremental)
{
    gw_http_sf_t c = gw_http_sf(v);
    gw_http_sf_member_t m;
    int found = 0, rv;
    *urgency = GW_HTTP_PRIO_DEFAULT_URGENCY;
    *incremental = 0;
    while ((rv = gw_http_sf_dict_next(&c, &m)) != 0) {
        if (rv < 0 || m.key.len != 1)
            continue; /* §4: a malformed member is ignored, the others still count */
        if (m.key.base[0] == 'u') {
            /* §4.1: an urgency outside 0-7 (or not an Integer) is ignored; as the last
             * occurrence replaces earlier ones (RFC 8941 §4.2.2), the default comes back */
            if (m.value.type == GW_HTTP_SF_INTEGER && m.value.integer >= 0 &&
                m.value.integer <= 7) {
                *urgency = (uint8_t)m.value.integer;
                found |= GW_HTTP_PRIO_F_URGENCY;
            } else {
                *urgency = GW_HTTP_PRIO_DEFAULT_URGENCY;
                found &= ~GW_HTTP_PRIO_F_URGENCY;
            }
        } else if (m.key.base[0] == 'i') {
            /* §4.2: a value that is not a Boolean is ignored */
            if (m.value.type == GW_HTTP_SF_BOOLEAN) {
                *incremental = (uint8_t)m.value.integer;
                found |= GW_HTTP_PRIO_F_INCREMENTAL;
            } else {
                *incremental = 0;
                found &= ~GW_HTTP_PRIO_F_INCREMENTAL;
            }
        }
    }
    return found;
}
