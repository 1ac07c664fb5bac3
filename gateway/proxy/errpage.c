/* proxy/errpage.c — error pages (config error_pages) on the worker: each route's table of
 * pages (its own, then the top level's for the other statuses; one more table, of the top
 * level's alone, for requests without a route), the body of the gateway's own answers
 * (gw_proxy__answer), and the `errpage` response filter: on a route with
 * intercept_errors, an origin 5xx with a page keeps its status and fields but the page replaces
 * its body. The configuration holds each file's bytes once; a worker copies them once into
 * refcounted buffers (the counts are not atomic: workers never share one), and every answer
 * then sends its page by reference. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "proxy/proxy_internal.h"

struct gw_proxy_errpages {
    gw_proxy_errpage_t *v;
    size_t n;
};

/* A page into t: a reference to buf when given (the top level's, shared), else a buffer of
 * its own. */
static int add_page(struct gw_proxy_errpages *t, const gw_cfg_error_page_t *pg, gw_rbuf_t *buf)
{
    if (!buf) {
        if (!(buf = gw_rbuf_new(pg->len ? pg->len : 1)))
            return GW_E_NOMEM;
        if (pg->len)
            memcpy(buf->data, pg->body, pg->len);
        buf->len = pg->len;
    } else {
        gw_rbuf_ref(buf);
    }
    t->v[t->n++] = (gw_proxy_errpage_t){.status = pg->status, .type = pg->type, .buf = buf};
    return 0;
}

int gw_proxy__errpages_new(gw_proxy_t *p)
{
    const gw_config_t *c = p->cfg;
    size_t nt = c->routes_len + 1, ntop = c->error_pages.n;
    if (!(p->errpages = gw_calloc(nt, sizeof(*p->errpages))))
        return GW_E_NOMEM;
    /* the table without a route first: the top level's buffers, shared by the routes */
    struct gw_proxy_errpages *top = &p->errpages[c->routes_len];
    if (ntop && !(top->v = gw_calloc(ntop, sizeof(*top->v))))
        return GW_E_NOMEM;
    for (size_t i = 0; i < ntop; i++)
        if (add_page(top, &c->error_pages.v[i], NULL) < 0)
            return GW_E_NOMEM;
    for (size_t r = 0; r < c->routes_len; r++) {
        const gw_cfg_error_pages_t *own = &c->routes[r].error_pages;
        struct gw_proxy_errpages *t = &p->errpages[r];
        if (own->n + ntop && !(t->v = gw_calloc(own->n + ntop, sizeof(*t->v))))
            return GW_E_NOMEM;
        for (size_t i = 0; i < own->n; i++)
            if (add_page(t, &own->v[i], NULL) < 0)
                return GW_E_NOMEM;
        /* the top level's pages the route does not override, sharing the top's buffers */
        for (size_t i = 0; i < ntop; i++)
            if (gw_cfg_error_page(c, &c->routes[r], top->v[i].status) == &c->error_pages.v[i] &&
                add_page(t, &c->error_pages.v[i], top->v[i].buf) < 0)
                return GW_E_NOMEM;
    }
    return 0;
}

void gw_proxy__errpages_free(gw_proxy_t *p)
{
    if (!p->errpages)
        return;
    for (size_t r = 0; r <= p->cfg->routes_len; r++) {
        for (size_t i = 0; i < p->errpages[r].n; i++)
            gw_rbuf_unref(p->errpages[r].v[i].buf);
        gw_free(p->errpages[r].v);
    }
    gw_free(p->errpages);
    p->errpages = NULL;
}

const gw_proxy_errpages_t *gw_proxy__errpages_of(const gw_proxy_t *p, const gw_cfg_route_t *r)
{
    if (!p->errpages)
        return NULL;
    return &p->errpages[r ? (size_t)(r - p->cfg->routes) : p->cfg->routes_len];
}

const gw_proxy_errpage_t *gw_proxy__errpage_find(const gw_proxy_errpages_t *t, unsigned status)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (t->v[i].status == status)
            return &t->v[i];
    return NULL;
}

/* ---- the filter: origin 5xx bodies replaced (intercept_errors) ----------------------------- */

/* The fields of the origin's head that describe the body it sent, not the page sent instead
 * (RFC 9110 §8: representation metadata and validators). */
static int describes_body(gw_slice_t name)
{
    static const char *const names[] = {
        "content-type",     "content-encoding",
        "content-language", "content-location",
        "content-range",    "content-md5",
        "content-digest",   "repr-digest",
        "digest",           "etag",
        "last-modified",    "accept-ranges",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (gw_proxy__name_is(name, names[i]))
            return 1;
    return 0;
}

static int errpage_wants(const gw_cfg_route_t *r)
{
    return r->intercept_errors;
}

static int errpage_head(ox_t *ox, gw_proxy_resp_t *r)
{
    if (r->status < 500 || r->status > 599)
        return 0;
    const gw_proxy_errpage_t *pg =
        gw_proxy__errpage_find(gw_proxy__errpages_of(ox->p, ox->route), r->status);
    if (!pg)
        return 0;
    ox->errpage = pg;
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!describes_body(r->f[i].name))
            r->f[k++] = r->f[i];
    if (k == GW_PROXY_MAX_RESP_FIELDS)
        k--; /* a head that full loses its last field to the page's type */
    r->f[k++] = (gw_field_t){GW_SLICE_LIT("content-type"), gw_slice_str(pg->type)};
    r->n = k;
    r->cl = (int64_t)pg->buf->len;
    r->coding = GW_ZC_NONE;
    return 0;
}

/* The origin's body is dropped: the page is stored at the end instead. */
static int errpage_body(ox_t *ox, gw_rslice_t *b)
{
    (void)b;
    return ox->errpage ? GW_PROXY_F_TAKEN : 0;
}

static int errpage_end(ox_t *ox)
{
    const gw_proxy_errpage_t *pg = ox->errpage;
    if (!pg)
        return 0;
    /* trailers would describe the body that was dropped */
    gw_free(ox->trailers);
    ox->trailers = NULL;
    ox->ntrailers = 0;
    return pg->buf->len ? gw_proxy__cbody_append(&ox->body, pg->buf, 0, pg->buf->len) : 0;
}

const gw_proxy_filter_t gw_proxy__filter_errpage = {
    .name = "errpage",
    .wants = errpage_wants,
    .on_head = errpage_head,
    .on_body = errpage_body,
    .on_end = errpage_end,
};
