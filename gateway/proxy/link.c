/* proxy/link.c — reading Link fields (RFC 8288): their link-values one by one and the rel
 * tokens and parameters of each, for the early hints (hints.c) and server push (push.c). */
#include <string.h>

#include "http/http.h"
#include "proxy/proxy_internal.h"

/* Which of the rel tokens the link-value (one element of a Link field) has (RFC 8288 §3.3: rel
 * is a space-separated list, maybe quoted): bit 0 preload, 1 modulepreload, 2 preconnect; bit 3
 * a nopush parameter (the W3C Preload convention: preload, do not push). */
unsigned gw_proxy__link_rels(gw_slice_t v)
{
    const uint8_t *gt = memchr(v.base, '>', v.len);
    if (!gt || v.len == 0 || v.base[0] != '<')
        return 0;
    unsigned out = 0;
    /* the parameters after the <target>: `*( OWS ";" OWS link-param )` (RFC 8288 §3) */
    gw_http_list_t params = gw_http_list((gw_slice_t){gt + 1, (size_t)(v.base + v.len - gt - 1)},
                                         ';', GW_HTTP_LIST_F_QUOTED);
    gw_slice_t param, name, value;
    while (gw_http_list_next(&params, &param)) {
        if (!gw_http_param_split(param, &name, &value)) {
            if (gw_slice_eq_nocase(name, GW_SLICE_LIT("nopush")))
                out |= GW_PROXY_LINK_NOPUSH;
            continue;
        }
        if (!gw_slice_eq_nocase(name, GW_SLICE_LIT("rel")))
            continue;
        gw_http_list_t rels = gw_http_list(value, ' ', GW_HTTP_LIST_F_SPACE);
        gw_slice_t tok;
        while (gw_http_list_next(&rels, &tok)) {
            if (gw_slice_eq_nocase(tok, GW_SLICE_LIT("preload")))
                out |= GW_PROXY_LINK_PRELOAD;
            else if (gw_slice_eq_nocase(tok, GW_SLICE_LIT("modulepreload")))
                out |= GW_PROXY_LINK_MODULEPRELOAD;
            else if (gw_slice_eq_nocase(tok, GW_SLICE_LIT("preconnect")))
                out |= GW_PROXY_LINK_PRECONNECT;
        }
    }
    return out;
}

/* The next link-value and its rel bits (gw_proxy__link_rels) in *rels; {NULL, 0} after the last. */
gw_slice_t gw_proxy__link_next(gw_proxy__link_iter_t *it, unsigned *rels)
{
    for (;;) {
        /* RFC 8288 §3: a comma inside the <target> or a quoted string does not end a
         * link-value */
        gw_http_list_t l = {it->p, it->e, ',', GW_HTTP_LIST_F_ANGLE | GW_HTTP_LIST_F_QUOTED};
        gw_slice_t v;
        int got = it->p && gw_http_list_next(&l, &v);
        it->p = l.p;
        if (got) {
            *rels = gw_proxy__link_rels(v);
            return v;
        }
        while (it->i < it->n && !gw_proxy__name_is(it->f[it->i].name, "link"))
            it->i++;
        if (it->i == it->n)
            return (gw_slice_t){0};
        it->p = it->f[it->i].value.base;
        it->e = it->p + it->f[it->i].value.len;
        it->i++;
    }
}
