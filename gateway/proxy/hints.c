/* proxy/hints.c — 103 Early Hints made by the gateway (RFC 8297): the Link values a
 * route configures, and those it learns from the origin's shareable answers, sent to a
 * navigation as soon as it is routed, before the origin is asked.
 *
 * Learning (per worker proxy, an LRU of `early_hints.learn_entries` pages with a TTL of
 * `early_hints.learn_ttl`): the `Link` values with rel preload, modulepreload or preconnect of
 * the origin's last 2xx answer to a GET navigation (never a stored answer that stands in for its
 * 5xx or 304). Learned hints are a shared cache of those links, so they follow its rules (RFC
 * 9111 §4: the stored response is reused only for the same target URI and the same fields its
 * Vary names):
 *  - the key is the route, the listener's scheme, the authority (one for every spelling of an
 *    origin: gw_http_authority), the path WITH its query (a page learned from a request with a
 *    token in its query was hinted to every visitor of the path, token included), and, with
 *    early_hints_learn_private, whether the request carries credentials (what was learned from
 *    those goes only to those);
 *  - only from answers a shared cache could give anyone (gw_proxy__reusable: no Set-Cookie,
 *    not private, no-store or no-cache, heuristically cacheable or fresh), without a Vary
 *    other than Accept-Encoding (the links may depend on a field the key does not hold), and
 *    for a request without Authorization or Cookie unless the route says
 *    early_hints_learn_private (then RFC 9111 §3.5 asks public, s-maxage or must-revalidate);
 *  - a link whose target repeats a name or a value of the request's query is not learned: a
 *    token or an id reflected into a Link is that visitor's, and a reflecting URL must not
 *    let anyone plant links in the hints of a page.
 * Hints must never tell one visitor what another's personalised page links to. A 2xx with no
 * link left to learn forgets the page. At most one 103 goes to a request: the gateway's when it
 * has hints, else the origin's first (Chromium uses only the first). */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

#define HINTS_VALUE_MAX 4096 /* bytes of learned links kept per page */
/* Query parameters a page learned from may have: every link target is searched for each of
 * their names and values (repeats_query), so this bounds that work (at most 32 x 2 x 2
 * searches over 2 x 4 KiB per answer, about a millisecond); a page with more is not learned. */
#define HINTS_QUERY_PARAMS_MAX 32

struct gw_hint_ent {
    gw_list_t lru;            /* in the table's lru, most recent first */
    struct gw_hint_ent *next; /* hash chain */
    uint64_t hash, at_ms;
    size_t keylen, vlen;
    char data[]; /* key, then the links (one value per line) */
};

static uint64_t now_ms(void)
{
    return gw_now_ns() / 1000000;
}

int gw_proxy__is_navigation(const gw_req_head_t *h)
{
    /* a push carries the page's Accept but is a subresource: no 103 on it, nothing learned */
    if (h->pushed || !gw_slice_eq(h->method, GW_SLICE_LIT("GET")))
        return 0;
    const gw_field_t *mode = gw_proxy__field(h->fields, h->fields_len, "sec-fetch-mode");
    if (mode) /* the Fetch Metadata of the request says what it is */
        return gw_slice_eq_nocase(gw_slice_trim(mode->value), GW_SLICE_LIT("navigate"));
    const gw_field_t *af = gw_proxy__field(h->fields, h->fields_len, "accept");
    gw_slice_t acc = af ? af->value : (gw_slice_t){0};
    for (size_t i = 0; acc.base && i + 9 <= acc.len; i++)
        if (gw_slice_eq_nocase((gw_slice_t){acc.base + i, 9}, GW_SLICE_LIT("text/html")))
            return 1;
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------ */

/* The learned table's key of request h on route r (the config's index ri), received on a
 * listener with TLS (tls) or not: ri, the scheme, whether the request carries credentials on a
 * route that learns from those (early_hints_learn_private: the pages learned from them go only
 * to them; elsewhere they are never learned from, and get what anonymous answers taught), the
 * authority as the coalescing key holds it (gw_http_authority of the listener's scheme,
 * lowercased: [::1] and [0::1]:80 are one page of http), a 0 byte, the path with its query
 * (byte for byte, as the coalescing key); its length, or 0 when it does not fit cap. */
#define KEY_HEAD 6
static size_t key_of(const gw_cfg_route_t *r, size_t ri, int tls, const gw_req_head_t *h, char *out,
                     size_t cap)
{
    gw_http_authority_t au;
    /* a malformed literal (the fronts refuse it) is kept as written */
    (void)gw_http_authority(tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http"), h->authority, &au);
    size_t al = au.host.len + (au.port.len ? 1 + au.port.len : 0);
    size_t n = KEY_HEAD + al + 1 + h->path.len;
    if (n > cap)
        return 0;
    uint32_t ri32 = (uint32_t)ri;
    memcpy(out, &ri32, 4);
    out[4] = tls ? 's' : '-';
    out[5] = r->early_hints_learn_private && gw_proxy__has_credentials(h) ? 'A' : '-';
    char *a = out + KEY_HEAD;
    gw_ascii_lower(a, au.host.base, au.host.len); /* RFC 3986 §6.2.2.1 */
    if (au.port.len) {
        a[au.host.len] = ':';
        memcpy(a + au.host.len + 1, au.port.base, au.port.len);
    }
    a[al] = 0;
    if (h->path.len)
        memcpy(a + al + 1, h->path.base, h->path.len);
    return n;
}

static struct gw_hint_ent **slot(gw_proxy_hints_t *t, const char *key, size_t n, uint64_t hash)
{
    struct gw_hint_ent **pp = &t->tab[hash & (t->tab_cap - 1)];
    while (*pp && !((*pp)->hash == hash && (*pp)->keylen == n && !memcmp((*pp)->data, key, n)))
        pp = &(*pp)->next;
    return pp;
}

static void ent_remove(gw_proxy_hints_t *t, struct gw_hint_ent **pp)
{
    struct gw_hint_ent *e = *pp;
    *pp = e->next;
    gw_list_remove(&e->lru);
    gw_free(e);
    t->n--;
}

void gw_proxy__hints_free(gw_proxy_hints_t *t)
{
    for (size_t i = 0; i < t->tab_cap; i++)
        while (t->tab[i])
            ent_remove(t, &t->tab[i]);
    gw_free(t->tab);
    t->tab = NULL;
    t->tab_cap = 0;
}

static int table_ready(gw_proxy_hints_t *t, size_t max)
{
    if (t->tab)
        return 0;
    size_t cap = 16;
    while (cap < max && cap < (1u << 20))
        cap <<= 1;
    t->tab = gw_calloc(cap, sizeof(*t->tab));
    if (!t->tab)
        return GW_E_NOMEM;
    t->tab_cap = cap;
    gw_list_init(&t->lru);
    return 0;
}

/* ---- learning ------------------------------------------------------------------------------- */

static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* s lowercased (ASCII: an origin may change the case) into out, which has room for s.len bytes;
 * with decode, percent-decoded too (RFC 3986 §2.1; '+' as a space, as forms encode it; a '%'
 * without two hex digits stays as it is), which never makes it longer. */
static gw_slice_t fold(gw_slice_t s, uint8_t *out, int decode)
{
    size_t k = 0;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = s.base[i];
        int hi = decode && c == '%' && i + 2 < s.len ? hexval(s.base[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(s.base[i + 2]) : -1;
        if (lo >= 0) {
            c = (uint8_t)(hi << 4 | lo);
            i += 2;
        } else if (decode && c == '+') {
            c = ' ';
        }
        out[k++] = c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
    }
    return (gw_slice_t){out, k};
}

/* The number of parameters of the query of path (0 without one). */
static size_t query_params(gw_slice_t path)
{
    const uint8_t *q = memchr(path.base, '?', path.len);
    size_t n = 0;
    for (const uint8_t *p = q, *e = path.base + path.len; p && p < e; n++)
        p = memchr(p + 1, '&', (size_t)(e - p - 1));
    return n;
}

/* Whether the link target t repeats a name or a value of the query of path: any of them, as
 * sent or percent-decoded, found in the target as written or decoded, case aside. Errs towards
 * "yes": a short name or value found by chance costs one learned link, a reflected one would
 * go to every visitor. The query fits the learned key (2 KiB) and has at most
 * HINTS_QUERY_PARAMS_MAX parameters, the target fits the links kept (HINTS_VALUE_MAX). */
static int repeats_query(gw_slice_t t, gw_slice_t path)
{
    const uint8_t *q = memchr(path.base, '?', path.len);
    if (!q)
        return 0;
    uint8_t tbuf[2][HINTS_VALUE_MAX], pbuf[2][2048];
    if (t.len > sizeof(tbuf[0]))
        return 1;
    gw_slice_t hay[2] = {fold(t, tbuf[0], 0), fold(t, tbuf[1], 1)};
    int nhay = gw_slice_eq(hay[0], hay[1]) ? 1 : 2; /* nothing to decode: one search */
    const uint8_t *p = q + 1, *e = path.base + path.len;
    while (p < e) {
        const uint8_t *amp = memchr(p, '&', (size_t)(e - p));
        const uint8_t *end = amp ? amp : e;
        const uint8_t *eq = memchr(p, '=', (size_t)(end - p));
        gw_slice_t parts[2] = {{p, (size_t)((eq ? eq : end) - p)},
                               eq ? (gw_slice_t){eq + 1, (size_t)(end - eq - 1)} : (gw_slice_t){0}};
        for (int k = 0; k < 2; k++) {
            if (!parts[k].len)
                continue;
            if (parts[k].len > sizeof(pbuf[0]))
                return 1;
            gw_slice_t needle[2] = {fold(parts[k], pbuf[0], 0), fold(parts[k], pbuf[1], 1)};
            int nneedle = gw_slice_eq(needle[0], needle[1]) ? 1 : 2;
            for (int h = 0; h < nhay; h++)
                for (int n = 0; n < nneedle; n++)
                    if (needle[n].len &&
                        memmem(hay[h].base, hay[h].len, needle[n].base, needle[n].len))
                        return 1;
        }
        p = amp ? amp + 1 : e;
    }
    return 0;
}

/* The preload-like link values of the Link fields, one per line, into out, but those whose
 * target repeats the query of path (repeats_query); their length. */
static size_t collect_links(const gw_field_t *f, size_t n, gw_slice_t path, char *out, size_t cap)
{
    size_t k = 0;
    gw_proxy__link_iter_t it = {.f = f, .n = n};
    gw_slice_t v;
    unsigned rels;
    while ((v = gw_proxy__link_next(&it, &rels)).base) {
        if (!(rels &
              (GW_PROXY_LINK_PRELOAD | GW_PROXY_LINK_MODULEPRELOAD | GW_PROXY_LINK_PRECONNECT)) ||
            k + v.len + 1 > cap)
            continue;
        const uint8_t *gt = memchr(v.base, '>', v.len); /* link_rels: <target> is there */
        if (repeats_query((gw_slice_t){v.base + 1, (size_t)(gt - v.base - 1)}, path))
            continue;
        memcpy(out + k, v.base, v.len);
        k += v.len;
        out[k++] = '\n';
    }
    return k;
}

void gw_proxy__hints_learn(gw_proxy_t *p, const gw_cfg_route_t *r, int tls,
                           const gw_req_head_t *req, unsigned status, const gw_field_t *f, size_t n)
{
    if (!r->early_hints_learn || status < 200 || status > 299 || !gw_proxy__is_navigation(req))
        return;
    int creds = gw_proxy__has_credentials(req);
    if ((creds && !r->early_hints_learn_private) ||
        query_params(req->path) > HINTS_QUERY_PARAMS_MAX)
        return;
    /* only what a shared cache could give anyone who opens the same URL (RFC 9111 §3, §3.5,
     * §4.1; Set-Cookie stricter): the links of an answer that varies on anything but the
     * encoding may depend on a field the key does not hold */
    static const char *const vary_ok[] = {"accept-encoding"};
    if (!gw_proxy__reusable(status, f, n, vary_ok, 1, creds))
        return;
    gw_proxy_hints_t *t = &p->hints;
    size_t max = p->cfg->early_hints.learn_entries;
    if (table_ready(t, max) < 0)
        return;
    char key[2048], links[HINTS_VALUE_MAX];
    size_t kl = key_of(r, (size_t)(r - p->cfg->routes), tls, req, key, sizeof(key));
    if (!kl)
        return;
    uint64_t hash = gw_proxy__hash(key, kl);
    struct gw_hint_ent **pp = slot(t, key, kl, hash);
    size_t vl = collect_links(f, n, req->path, links, sizeof(links));
    if (*pp) /* the new answer replaces what was learned */
        ent_remove(t, pp);
    if (!vl)
        return; /* the page no longer preloads anything: forgotten */
    while (t->n >= max && !gw_list_empty(&t->lru)) {
        struct gw_hint_ent *old = GW_CONTAINER_OF(t->lru.prev, struct gw_hint_ent, lru);
        ent_remove(t, slot(t, old->data, old->keylen, old->hash));
        t->st.evicted++;
    }
    struct gw_hint_ent *e = gw_malloc(sizeof(*e) + kl + vl);
    if (!e)
        return;
    e->hash = hash;
    e->at_ms = now_ms();
    e->keylen = kl;
    e->vlen = vl;
    memcpy(e->data, key, kl);
    memcpy(e->data + kl, links, vl);
    pp = slot(t, key, kl, hash);
    e->next = NULL;
    *pp = e;
    gw_list_push_front(&t->lru, &e->lru);
    t->n++;
    t->st.learned++;
}

/* ---- sending ----------------------------------------------------------------------------- */

int gw_proxy__hints_send(gw_proxy_t *p, gw_cstream_t *s, const gw_cfg_route_t *r,
                         const gw_req_head_t *h)
{
    if ((!r->early_hints_len && !r->early_hints_learn) || s->no_hints ||
        !gw_proxy__is_navigation(h) || (h->proto == GW_REQ_HTTP1 && !r->early_hints_h1))
        return 0;
    gw_field_t f[64];
    size_t n = 0;
    for (size_t i = 0; i < r->early_hints_len && n < 64; i++)
        f[n++] = (gw_field_t){GW_SLICE_LIT("link"), gw_slice_str(r->early_hints[i])};
    size_t configured = n, learned = 0;
    gw_proxy_hints_t *t = &p->hints;
    if (r->early_hints_learn && t->tab) {
        char key[2048];
        size_t kl = key_of(r, (size_t)(r - p->cfg->routes), s->tls, h, key, sizeof(key));
        struct gw_hint_ent **pp = kl ? slot(t, key, kl, gw_proxy__hash(key, kl)) : NULL;
        if (pp && *pp && now_ms() - (*pp)->at_ms > p->cfg->early_hints.learn_ttl_ms) {
            ent_remove(t, pp); /* stale */
            t->st.expired++;
        } else if (pp && *pp) {
            struct gw_hint_ent *e = *pp;
            gw_list_remove(&e->lru);
            gw_list_push_front(&t->lru, &e->lru);
            const char *v = e->data + e->keylen, *end = v + e->vlen;
            while (v < end && n < 64) {
                const char *nl = memchr(v, '\n', (size_t)(end - v));
                gw_slice_t one = {(const uint8_t *)v, (size_t)(nl - v)};
                v = nl + 1;
                int dup = 0; /* a configured hint already says it */
                for (size_t k = 0; k < configured && !dup; k++)
                    dup = gw_slice_eq(f[k].value, one);
                if (!dup) {
                    f[n++] = (gw_field_t){GW_SLICE_LIT("link"), one};
                    learned++;
                }
            }
        }
    }
    if (!n)
        return 0;
    if (s->ops->interim(s, 103, f, n) < 0)
        return 0;
    if (configured)
        t->st.sent_configured++;
    if (learned)
        t->st.sent_learned++;
    return 1;
}

/* Whether the learned table has a live entry for request h (no side effect). */
static int known(gw_proxy_t *p, const gw_cfg_route_t *r, int tls, const gw_req_head_t *h)
{
    gw_proxy_hints_t *t = &p->hints;
    char key[2048];
    size_t kl = t->tab ? key_of(r, (size_t)(r - p->cfg->routes), tls, h, key, sizeof(key)) : 0;
    struct gw_hint_ent **pp = kl ? slot(t, key, kl, gw_proxy__hash(key, kl)) : NULL;
    return pp && *pp && now_ms() - (*pp)->at_ms <= p->cfg->early_hints.learn_ttl_ms;
}

void gw_proxy__hints_stored(px_t *px, unsigned status, const gw_field_t *f, size_t n)
{
    const gw_cfg_route_t *r = px->route;
    if (px->hinted || px->ws)
        return;
    /* the stored head is the origin's answer: it teaches this worker what the forwarded one
     * taught the worker that stored it (same rules, hints_head), once per learn_ttl */
    if (r->early_hints_learn && !px->s->tls_client_cert.len &&
        !known(px->p, r, px->s->tls, &px->head))
        gw_proxy__hints_learn(px->p, r, px->s->tls, &px->head, status, f, n);
    px->hinted = gw_proxy__hints_send(px->p, px->s, r, &px->head) != 0;
}

/* ---- the origin's 103 -------------------------------------------------------------------- */

size_t gw_proxy__hint_fields(gw_field_t *f, size_t n)
{
    /* RFC 8297 §2: a 103 tells the client the fields the final answer will probably carry, so
     * that it can start on them (the Link fields: RFC 8288); a browser reads from it only the
     * Link fields and the policies that bound what those make it fetch (HTML, "early hints":
     * Content-Security-Policy, Referrer-Policy, Cross-Origin-Embedder-Policy). Anything else
     * (a Set-Cookie, a field about the user) has no use in one and is not relayed. */
    static const char *const keep[] = {"link", "content-security-policy", "referrer-policy",
                                       "cross-origin-embedder-policy"};
    size_t k = 0, links = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sizeof(keep) / sizeof(keep[0]); j++)
            if (gw_proxy__name_is(f[i].name, keep[j])) {
                links += j == 0;
                f[k++] = f[i];
                break;
            }
    return links ? k : 0;
}

/* ---- the filter ----------------------------------------------------------------------------- */

/* The origin's 103 f[0..n) to px, unless px already had one (one 103 per request: Chromium
 * uses only the first) or its final head went out. */
static void relay(ox_t *ox, px_t *px, const gw_field_t *f, size_t n)
{
    if (px->closed || px->reset || px->resp >= PX_RESP_HEAD)
        return;
    if (px->hinted) {
        ox->p->hints.st.dropped_origin++;
        return;
    }
    px->hinted = 1;
    ox->p->hints.st.sent_origin++;
    if (px->s->ops->interim(px->s, 103, f, n) < 0)
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
}

/* RFC 8297: the gateway's hints go before anything is asked of the origin. */
static void hints_request(px_t *px)
{
    if (!px->ws)
        px->hinted = gw_proxy__hints_send(px->p, px->s, px->route, &px->head) != 0;
}

/* 100 Continue answers our own request body handling; 103 Early Hints goes to the client
 * (RFC 8297), with only the fields a 103 may carry (gw_proxy__hint_fields). It answers the
 * owner's request: the owner gets it now. Whether the followers may see anything of this
 * answer is known only at the final head (the coalesce filter): until then the first 103 is
 * held for them (hints_deliver sends it to those that share the answer; those that fetch on
 * their own get their own exchange's 103 instead). */
static void hints_interim(ox_t *ox, gw_proxy_resp_t *r)
{
    if (r->status != 103)
        return;
    r->n = gw_proxy__hint_fields(r->f, r->n);
    if (!r->n)
        return; /* nothing to hint at */
    if (ox->owner)
        relay(ox, ox->owner, r->f, r->n);
    if (ox->key && !ox->hint && gw_proxy__fields_dup(r->f, r->n, &ox->hint) == 0)
        ox->nhint = r->n; /* out of memory: the followers get no 103, nothing worse */
}

/* Learn (or forget) the page's links from the answer to the request the origin answered: from
 * the origin's own head, its status with its fields. r->status may be a stored entry's that
 * stands in (the cache filter runs first): a stale 200 for the origin's 503 (RFC 5861 §4), a
 * stored 200 for its 304. An error page's links are not the page's, and a 304 teaches nothing
 * (nor forgets: its fields seldom repeat the Link of the answer it validates). */
static int hints_head(ox_t *ox, gw_proxy_resp_t *r)
{
    /* an answer to a client certificate's holder may be personal, as to a cookie's */
    if (ox->route->early_hints_learn && !r->asker->s->tls_client_cert.len)
        gw_proxy__hints_learn(ox->p, ox->route, r->asker->s->tls, &r->asker->head,
                              (unsigned)r->origin->status, r->origin->fields,
                              r->origin->fields_len);
    return 0;
}

/* The answer is shared: so is the 103 it came with. */
static void hints_deliver(ox_t *ox, px_t *px, const gw_proxy_resp_t *r)
{
    (void)r;
    if (px->follower && ox->hint)
        relay(ox, px, ox->hint, ox->nhint);
}

static void hints_release(ox_t *ox)
{
    gw_free(ox->hint);
    ox->hint = NULL;
}

/* On every route: an origin's 103 is relayed wherever it comes from. */
const gw_proxy_filter_t gw_proxy__filter_hints = {
    .name = "hints",
    .on_request = hints_request,
    .on_interim = hints_interim,
    .on_head = hints_head,
    .on_deliver = hints_deliver,
    .release = hints_release,
};
