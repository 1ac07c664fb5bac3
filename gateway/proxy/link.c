/* proxy/link.c — reading Link fields (RFC 8288): their link-values one by one and the rel
 * tokens and parameters of each, for the early hints (hints.c) and server push (push.c). */
#include <string.h>

#include "proxy/proxy_internal.h"

/* The parameters of a link-value after its <target>, one per call: *p moves past it; the
 * trimmed parameter, or {NULL, 0} at the end. */
static gw_slice_t next_param(const uint8_t **p, const uint8_t *e)
{
    if (*p >= e)
        return (gw_slice_t){0};
    const uint8_t *semi = memchr(*p, ';', (size_t)(e - *p));
    gw_slice_t param = gw_slice_trim((gw_slice_t){*p, (size_t)((semi ? semi : e) - *p)});
    *p = semi ? semi + 1 : e;
    return param; /* never NULL-based: an empty parameter is not the end */
}

/* Which of the rel tokens the link-value (one element of a Link field) has (RFC 8288 §3.3: rel
 * is a space-separated list, maybe quoted): bit 0 preload, 1 modulepreload, 2 preconnect; bit 3
 * a nopush parameter (the W3C Preload convention: preload, do not push). */
unsigned gw_proxy__link_rels(gw_slice_t v)
{
    const uint8_t *gt = memchr(v.base, '>', v.len);
    if (!gt || v.len == 0 || v.base[0] != '<')
        return 0;
    unsigned out = 0;
    const uint8_t *p = gt + 1, *e = v.base + v.len;
    gw_slice_t param;
    while ((param = next_param(&p, e)).base) {
        if (gw_slice_eq_nocase(param, GW_SLICE_LIT("nopush")))
            out |= GW_PROXY_LINK_NOPUSH;
        if (param.len < 4 || !gw_slice_eq_nocase((gw_slice_t){param.base, 4}, GW_SLICE_LIT("rel=")))
            continue;
        gw_slice_t rel = {param.base + 4, param.len - 4};
        if (rel.len >= 2 && rel.base[0] == '"' && rel.base[rel.len - 1] == '"')
            rel = (gw_slice_t){rel.base + 1, rel.len - 2};
        const uint8_t *q = rel.base, *re = rel.base + rel.len;
        while (q < re) {
            const uint8_t *sp = memchr(q, ' ', (size_t)(re - q));
            gw_slice_t tok = {q, (size_t)((sp ? sp : re) - q)};
            q = sp ? sp + 1 : re;
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

/* The next link-value of a Link field value (RFC 8288 §3: a comma ends one unless inside
 * <...> or a quoted string), trimmed; *p moves past it. {NULL, 0} at the end. */
static gw_slice_t next_link(const uint8_t **p, const uint8_t *e)
{
    while (*p < e) {
        const uint8_t *c = *p;
        int in_uri = 0, in_q = 0;
        for (; c < e; c++) {
            if (*c == '<' && !in_q)
                in_uri = 1;
            else if (*c == '>' && !in_q)
                in_uri = 0;
            else if (*c == '"' && !in_uri)
                in_q = !in_q;
            else if (*c == ',' && !in_uri && !in_q)
                break;
        }
        gw_slice_t v = gw_slice_trim((gw_slice_t){*p, (size_t)(c - *p)});
        *p = c < e ? c + 1 : e;
        if (v.len)
            return v;
    }
    return (gw_slice_t){0};
}

/* The next link-value and its rel bits (gw_proxy__link_rels) in *rels; {NULL, 0} after the last. */
gw_slice_t gw_proxy__link_next(gw_proxy__link_iter_t *it, unsigned *rels)
{
    for (;;) {
        gw_slice_t v = it->p ? next_link(&it->p, it->e) : (gw_slice_t){0};
        if (v.base) {
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
