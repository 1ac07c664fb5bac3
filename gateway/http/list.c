/* http/list.c — the elements of a list and the parameters of an element (RFC 9110 §5.6). */
#include <string.h>

#include "http/http.h"

/* Where the element starting at p ends: at the first separator (sep, or whitespace with
 * GW_HTTP_LIST_F_SPACE) outside what flags protects, or at end. */
static const uint8_t *elem_end(const uint8_t *p, const uint8_t *end, uint8_t sep, unsigned flags)
{
    int in_quote = 0, in_angle = 0;
    for (; p < end; p++) {
        uint8_t c = *p;
        if (in_quote) {
            if (c == '\\' && p + 1 < end)
                p++; /* a quoted-pair: the next byte is data */
            else if (c == '"')
                in_quote = 0;
        } else if (in_angle) {
            in_angle = c != '>';
        } else if (c == sep || ((flags & GW_HTTP_LIST_F_SPACE) && (c == ' ' || c == '\t'))) {
            break;
        } else if (c == '"' && (flags & GW_HTTP_LIST_F_QUOTED)) {
            in_quote = 1;
        } else if (c == '<' && (flags & GW_HTTP_LIST_F_ANGLE)) {
            in_angle = 1;
        }
    }
    return p;
}

int gw_http_list_next(gw_http_list_t *l, gw_slice_t *elem)
{
    /* separators and OWS before the element: empty elements are skipped (§5.6.1) */
    while (l->p < l->end && (*l->p == l->sep || *l->p == ' ' || *l->p == '\t'))
        l->p++;
    if (l->p >= l->end)
        return 0;
    const uint8_t *b = l->p;
    l->p = elem_end(b, l->end, l->sep, l->flags);
    const uint8_t *e = l->p;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *elem = (gw_slice_t){b, (size_t)(e - b)};
    return 1;
}

gw_slice_t gw_http_elem_params(gw_slice_t elem, unsigned flags, gw_http_list_t *params)
{
    gw_http_list_t all = gw_http_list(elem, ';', flags);
    const uint8_t *semi = elem_end(all.p, all.end, ';', flags & ~GW_HTTP_LIST_F_SPACE);
    *params = all;
    params->p = semi;
    return gw_slice_trim((gw_slice_t){all.p, (size_t)(semi - all.p)});
}

int gw_http_param_split(gw_slice_t param, gw_slice_t *name, gw_slice_t *value)
{
    const uint8_t *eq = param.len ? memchr(param.base, '=', param.len) : NULL;
    if (!eq) {
        *name = gw_slice_trim(param);
        *value = (gw_slice_t){0};
        return 0;
    }
    *name = gw_slice_trim((gw_slice_t){param.base, (size_t)(eq - param.base)});
    gw_slice_t v = gw_slice_trim((gw_slice_t){eq + 1, (size_t)(param.base + param.len - eq - 1)});
    if (v.len >= 2 && v.base[0] == '"' && v.base[v.len - 1] == '"')
        v = (gw_slice_t){v.base + 1, v.len - 2};
    *value = v;
    return 1;
}
