/* proxy/chain.c — the response filter chain: which filters each route runs (registered per
 * route when the proxy is made, in the order of GW_PROXY_FILTERS), the run of each hook over a
 * route's filters, and the end of the chain, where the response leaves the filters: the head to
 * each subscriber, the body into the exchange's store (flow.c hands it on from there), the
 * trailers kept for after the body. The interface and the order are in proxy_internal.h. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "proxy/proxy_internal.h"

#define GW_PROXY_FILTER_ENTRY(name) &gw_proxy__filter_##name,
static const gw_proxy_filter_t *const filters[] = {GW_PROXY_FILTERS(GW_PROXY_FILTER_ENTRY)};

int gw_proxy__chains_new(gw_proxy_t *p)
{
    const gw_config_t *cfg = p->cfg;
    p->chains = gw_calloc(cfg->routes_len ? cfg->routes_len : 1, sizeof(*p->chains));
    if (!p->chains)
        return GW_E_NOMEM;
    for (size_t i = 0; i < cfg->routes_len; i++) {
        gw_proxy_chain_t *c = &p->chains[i];
        for (size_t k = 0; k < GW_PROXY_FILTER_N; k++)
            if (!filters[k]->wants || filters[k]->wants(&cfg->routes[i]))
                c->f[c->n++] = filters[k];
    }
    return 0;
}

void gw_proxy__chains_free(gw_proxy_t *p)
{
    gw_free(p->chains);
    p->chains = NULL;
}

const gw_proxy_chain_t *gw_proxy__chain_of(const gw_proxy_t *p, const gw_cfg_route_t *r)
{
    return &p->chains[r - p->cfg->routes];
}

/* A response on its way in, for the hooks: the origin's head h (NULL for trailers), its
 * fields f[0..n) translated for the clients, their lowercased names in at most names_cap bytes
 * of r->names (the same bounds as before the chain: 16 KiB for a final head, 8 KiB for an
 * interim one and trailers), Via added to a final head. */
static void resp_init(gw_proxy_resp_t *r, const ox_t *ox, const gw_back_head_t *h,
                      const gw_field_t *f, size_t n, size_t names_cap, int via)
{
    GW_ASSERT(names_cap <= sizeof(r->names));
    r->origin = h;
    r->asker = NULL;
    r->status = h ? (unsigned)h->status : 0;
    r->coding = GW_ZC_NONE;
    r->room_used = 0;
    r->n = gw_proxy__resp_fields(ox->route, f, n, r->f, r->names, names_cap, &r->cl, via);
}

char *gw_proxy__resp_room(gw_proxy_resp_t *r, size_t n)
{
    if (n > sizeof(r->room) - r->room_used)
        return NULL;
    char *b = r->room + r->room_used;
    r->room_used += n;
    return b;
}

/* ---- the hooks over a route's filters ------------------------------------------------------ */

void gw_proxy__chain_request(px_t *px)
{
    const gw_proxy_chain_t *c = gw_proxy__chain_of(px->p, px->route);
    for (size_t i = 0; i < c->n; i++)
        if (c->f[i]->on_request)
            c->f[i]->on_request(px);
}

void gw_proxy__chain_interim(ox_t *ox, const gw_back_head_t *h)
{
    gw_proxy_resp_t r;
    resp_init(&r, ox, h, h->fields, h->fields_len, 8192, 0);
    const gw_proxy_chain_t *c = ox->chain;
    for (size_t i = 0; i < c->n; i++)
        if (c->f[i]->on_interim)
            c->f[i]->on_interim(ox, &r);
}

/* The end of the chain for a final head: each subscriber that has had none gets it, after the
 * on_deliver hooks (what must reach its client before the head: a 103, push promises). */
static void deliver(ox_t *ox, gw_proxy_resp_t *r)
{
    const gw_proxy_chain_t *c = ox->chain;
    FOREACH_SUB(ox, px)
    {
        if (px->closed || px->reset)
            continue;
        if ((px->resp >= PX_RESP_HEAD)) {
            /* a detached stream whose head went out: the new response must be the same one */
            if (r->status != px->status || r->cl != px->resp_cl || r->coding != px->zc)
                gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL); /* leaves when the front closes it */
            continue;
        }
        for (size_t i = 0; i < c->n; i++)
            if (c->f[i]->on_deliver)
                c->f[i]->on_deliver(ox, px, r);
        /* RFC 9110 §6.4.1: no content after HEAD, 204 and 304 */
        int no_body = px->s->head_only || r->status == 204 || r->status == 304 || r->cl == 0;
        px->status = r->status;
        px->resp_cl = r->cl;
        px->zc = (uint8_t)r->coding;
        gw_proxy__resp_reached(px, PX_RESP_HEAD);
        if (px->s->ops->respond(px->s, r->status, r->f, r->n, r->cl, no_body) < 0)
            gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
        else if (no_body)
            gw_proxy__resp_reached(
                px, PX_RESP_DONE); /* response_done() at on_complete, when the origin is done */
    }
}

void gw_proxy__chain_head(ox_t *ox, const gw_back_head_t *h)
{
    gw_proxy_resp_t r;
    resp_init(&r, ox, h, h->fields, h->fields_len, sizeof(r.names), 1);
    /* the request the origin answered is the owner's; without it, a follower's (same key) */
    r.asker = ox->owner ? ox->owner : GW_CONTAINER_OF(ox->subs.next, px_t, slink);
    const gw_proxy_chain_t *c = ox->chain;
    unsigned pumping = ox->pumping;
    ox->pumping = 1; /* a filter that detaches the last subscriber must not free ox under us */
    int rv = 0;
    for (size_t i = 0; i < c->n && rv == 0; i++)
        if (c->f[i]->on_head)
            rv = c->f[i]->on_head(ox, &r);
    ox->pumping = pumping;
    if (rv < 0) {
        gw_proxy__ox_abort(ox, rv);
        return;
    }
    if (ox->nsubs == 0) { /* nobody may have this answer (the owner had gone) */
        gw_proxy__ox_free(ox);
        return;
    }
    deliver(ox, &r);
}

void gw_proxy__chain_body(ox_t *ox, gw_rslice_t b)
{
    const gw_proxy_chain_t *c = ox->chain;
    int rv = 0;
    for (size_t i = 0; i < c->n && rv == 0; i++)
        if (c->f[i]->on_body)
            rv = c->f[i]->on_body(ox, &b);
    /* the end of the chain: the bytes no filter took go into the store as they are */
    if (rv == 0)
        rv = gw_proxy__cbody_append(&ox->body, b.buf, b.off, b.len);
    if (rv < 0) {
        gw_proxy__ox_abort(ox, GW_E_NOMEM);
        return;
    }
    gw_proxy__pump(ox);
}

int gw_proxy__chain_body_after(ox_t *ox, const gw_proxy_filter_t *f, gw_rslice_t b)
{
    const gw_proxy_chain_t *c = ox->chain;
    size_t i = 0;
    while (i < c->n && c->f[i] != f)
        i++;
    int rv = 0;
    for (i++; i < c->n && rv == 0; i++)
        if (c->f[i]->on_body)
            rv = c->f[i]->on_body(ox, &b);
    if (rv == 0)
        rv = gw_proxy__cbody_append(&ox->body, b.buf, b.off, b.len);
    return rv == GW_PROXY_F_TAKEN ? 0 : rv;
}

void gw_proxy__chain_trailers(ox_t *ox, const gw_field_t *f, size_t n)
{
    gw_proxy_resp_t r;
    resp_init(&r, ox, NULL, f, n, 8192, 0);
    const gw_proxy_chain_t *c = ox->chain;
    int rv = 0;
    for (size_t i = 0; i < c->n && rv == 0; i++)
        if (c->f[i]->on_trailers)
            rv = c->f[i]->on_trailers(ox, &r);
    /* the end of the chain: kept, in one block, until each subscriber reached the body's end */
    gw_field_t *t = NULL;
    if (rv == 0 && gw_proxy__fields_dup(r.f, r.n, &t) < 0)
        rv = GW_E_NOMEM;
    if (rv < 0) {
        gw_proxy__ox_abort(ox, rv);
        return;
    }
    gw_free(ox->trailers);
    ox->trailers = t;
    ox->ntrailers = r.n;
}

void gw_proxy__chain_end(ox_t *ox)
{
    const gw_proxy_chain_t *c = ox->chain;
    for (size_t i = 0; i < c->n; i++) {
        int rv = c->f[i]->on_end ? c->f[i]->on_end(ox) : 0;
        if (rv < 0) {
            gw_proxy__ox_abort(ox, rv);
            return;
        }
    }
    /* the end of the chain: subscribers at the end finish now, the others as they catch up */
    ox->complete = 1;
    gw_proxy__ox_unpause(ox);
    gw_proxy__pump(ox);
}

int gw_proxy__chain_detach(ox_t *ox, px_t *px)
{
    const gw_proxy_chain_t *c = ox->chain;
    for (size_t i = 0; i < c->n; i++) {
        int rv = c->f[i]->on_detach ? c->f[i]->on_detach(ox, px) : 0;
        if (rv < 0)
            return rv;
    }
    return 0;
}

void gw_proxy__chain_release(ox_t *ox)
{
    const gw_proxy_chain_t *c = ox->chain;
    for (size_t i = 0; i < c->n; i++)
        if (c->f[i]->release)
            c->f[i]->release(ox);
}
