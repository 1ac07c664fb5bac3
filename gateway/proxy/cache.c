/* proxy/cache.c — the process's shared HTTP cache (gateway/cache/, RFC 9111 as a shared cache)
 * on the routes with `cache: true`: the lookup before a request goes to the origin, a fresh hit
 * sent from the stored buffers by reference (through the same store and flow control that hand
 * a coalesced body to its subscribers: flow.c), and the filter that keeps a miss's answer for
 * the store and commits it once its body ended whole.
 *
 * What serves now, in the words of RFC 9111:
 *  - a GET or HEAD without content, If-Match, If-Unmodified-Since, Expect or a client
 *    certificate is looked up under gw_cache_key (the listener's scheme, the authority, the
 *    path as sent) and the request's Vary fields (§4.1), credentials (Authorization, Cookie)
 *    or not: §3.5 limits what is stored from a request with credentials (policy.c), and reuse
 *    follows §4, which does not look at them (an answer that depends on them says so with
 *    Vary or private);
 *  - gw_cache_use() decides (§4.2.4, §5.2.1): a fresh answer is sent with its Age (§5.1,
 *    §4.2.3's current_age) and, with cache.status_header, Cache-Status (RFC 9211) "hit; ttl";
 *    a HEAD gets a stored GET's head (HEAD and GET share the entry), and a HEAD's 200 from
 *    the origin updates or removes the stored GET (§4.3.5: freshen_by_head); the
 *    client's If-None-Match or If-Modified-Since is evaluated on a fresh one (§4.3.2: 304);
 *    only-if-cached without a usable answer is a 504 (§5.2.1.7); anything else (stale, or the
 *    request's no-cache or max-age) goes to the origin, with If-None-Match and
 *    If-Modified-Since from the stored validators when it has some (§4.3.1): a 304 refreshes
 *    the stored head (§4.3.4) and the client gets the stored answer (stand_in), a 200
 *    replaces it, or removes it when it may not be stored itself (§4.3.3: drop_superseded),
 *    unless it answered the request's credentials alone (§3.5: then it leaves it be);
 *    when the origin answers 500, 502, 503, 504 or not at all, the stale entry
 *    answers within its stale-if-error window (RFC 5861 §4: stand_in_stale,
 *    gw_proxy__cache_error). Within its stale-while-revalidate window (RFC 5861 §3) a stale
 *    entry answers at once as a hit (Cache-Status "hit; ttl=-N; detail=stale-while-
 *    revalidate") while one background request revalidates it (revalidate.c: a stream whose
 *    client is the cache, through this same filter); when none can start, the request
 *    revalidates it itself;
 *  - a GET sent on (its own exchange, which followers may join as coalescing lets them) keeps
 *    the origin's head as the clients get it before any other filter rewrites it (identity
 *    body, no Age: the cache computes it) when gw_cache_storable() allows (§3: no no-store,
 *    private, Set-Cookie, Vary: *; explicit freshness), and references to every body slice
 *    while they stay within cache.max_object; the entry is put when the origin's answer ended
 *    whole (no trailers: they are not stored) and dropped with the exchange otherwise;
 *  - an unsafe method's 2xx or 3xx answer purges its target URI and the same-origin Location
 *    and Content-Location (§4.4) at its head;
 *  - the store holds the answer as the origin sent it (an identity body, or the origin's own
 *    Content-Encoding, which only a client whose Accept-Encoding takes it is sent: the others
 *    go forward as on a miss); a hit is compressed on the way out as the route compresses a
 *    forwarded answer (compress.c, gw_proxy__compress_hit: the same types, min_size, limits
 *    and gzip/br/zstd choice, Vary: Accept-Encoding, no Content-Length, a weak ETag); the
 *    first hit in a coding feeds the compressor 64 KiB at a time as its client takes it
 *    (ox->refill) and stores what it made as the entry's copy in that coding (its own key:
 *    the entry's, the coding and the entry's id; the entry's head, freshness and Vary key),
 *    which the next hits in that coding are sent as it is (copy_find). A HEAD gets the head
 *    the GET would (RFC 9110 §9.3.2), a 304 the compressed one's ETag and Vary; a Range is
 *    answered from the identity body (206, Vary added), as nginx, which never compresses a
 *    206, and as a forwarded Range request, which is not compressed either;
 *  - a hit brings what the forwarded answer would have: the page's 103 Early Hints (the
 *    route's, and the links learned from pages, learned again from the stored head by a worker
 *    that has not, or no longer, got them: hints.c) and its push promises (push.c), before its
 *    head; a promised request is a request like any other, answered from the store when it
 *    is there (RFC 9113 §8.4.2: it carries no credentials, only the page's Accept,
 *    Accept-Encoding, Accept-Language and User-Agent).
 *
 * Compress per hit, or store one copy per coding? Measured on a cached 20 KiB HTML page (2.7
 * KiB in gzip), h2load -n 2000 -c 4 -m 10, one worker, its CPU time from /proc (10 ms ticks)
 * on a 2-core machine shared with other jobs (load 6-10): an identity hit costs 5-10 us of
 * CPU, a hit compressed per request 125 us with gzip level 5 (the default gzip_level), 195 us
 * with br 4, 85 us with zstd 3: 12 to 25 times an identity hit. With a copy per coding
 * (h2load -n 20000, the same machine), a gzip, br or zstd hit costs 5.5-6 us, an identity hit
 * 7 us (more bytes to write), for 13 % more memory per coding asked for (2.7 KiB beside 20).
 * So a copy per coding, made by the first hit that needs it: the identity stays the one
 * stored answer (what revalidation, Range, HEAD and 304 work from), a copy only ever answers
 * a whole 200 of the entry it was made from. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* The answer an exchange keeps for the store. */
struct gw_proxy_cx {
    char *key; /* primary key (gw_cache_key) */
    size_t keylen;
    int64_t request_time; /* §4.2.3 request_time (s since the epoch) */
    uint64_t gen;         /* the key's gw_cache_gen() before the request left (0: unknown) */
    gw_field_t *req;      /* the asker's request fields (the Vary key is made of them) */
    size_t nreq;
    gw_field_t *head; /* the head as the clients get it, without Age */
    size_t nhead;
    unsigned status;
    gw_cache_meta_t meta;
    gw_rslice_t *body; /* each holds a reference */
    size_t nbody, cap;
    uint64_t len;
    int keep;                /* still meant for the store */
    int64_t cl;              /* the origin's Content-Length, -1 none */
    gw_cache_entry_t *stale; /* the stale entry the request revalidates (held), or NULL */
    int revalidated;         /* the origin said 304: the client gets stale's body */
    int superseded;          /* a full answer came for stale, which goes from the store once
                                this answer is stored or known not to be (drop_superseded) */
    const char *not_stored;  /* after a 304: why the updated answer may not be stored (the
                                entry was removed, or left as it was for "auth"), NULL when
                                it was refreshed */
};

static gw_slice_t scheme_of(const px_t *px)
{
    /* the listener's scheme, as coalescing keys it: never the client's word */
    return px->s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
}

static void creq_of(const px_t *px, gw_cache_req_t *q)
{
    const gw_req_head_t *h = &px->head;
    *q =
        (gw_cache_req_t){h->method, scheme_of(px), h->authority, h->path, h->fields, h->fields_len};
}

/* The cache section's policy, with route r's own stale windows where it has them. */
static gw_cache_policy_t policy_of(const gw_config_t *cfg, const gw_cfg_route_t *r)
{
    gw_cache_policy_t pol = {cfg->cache.heuristic, cfg->cache.stale_if_error,
                             cfg->cache.stale_while_revalidate};
    if (r->cache_stale_if_error >= 0)
        pol.stale_if_error = (uint32_t)r->cache_stale_if_error;
    if (r->cache_stale_while_revalidate >= 0)
        pol.stale_while_revalidate = (uint32_t)r->cache_stale_while_revalidate;
    return pol;
}

/* Whether px's request may be answered from the store (and its answer stored). */
static int lookup_ok(const px_t *px)
{
    const gw_req_head_t *h = &px->head;
    if (!px->p->cache || h->protocol.len || px->s->tls_client_cert.len)
        return 0;
    if (!gw_slice_eq(h->method, GW_SLICE_LIT("GET")) &&
        !gw_slice_eq(h->method, GW_SLICE_LIT("HEAD")))
        return 0;
    if (!h->end_stream || h->content_length > 0)
        return 0; /* content: RFC 9110 §9.3.1 */
    if (!h->authority.len || !h->path.len || h->path.base[0] != '/')
        return 0; /* only origin-form is keyed (an absolute-form one came as its path) */
    /* If-None-Match, If-Modified-Since, Range and If-Range are evaluated against a stored
     * answer (RFC 9111 §4.3.2, RFC 9110 §14.2); If-Match and If-Unmodified-Since are the
     * origin's (§4.3.2). Authorization and Cookie do not keep a request from the store: RFC
     * 9111 §3.5 is about storing the answer to such a request (only with public, s-maxage or
     * must-revalidate: gw_cache_storable), and §4's conditions of reuse do not name them. So
     * what such a client gets from the store is only what any client could get (an answer that
     * depends on the credentials says Vary: Authorization, or private) */
    static const char *const never[] = {"if-match", "if-unmodified-since", "expect"};
    for (size_t i = 0; i < h->fields_len; i++)
        for (size_t k = 0; k < sizeof(never) / sizeof(never[0]); k++)
            if (gw_proxy__name_is(h->fields[i].name, never[k]))
                return 0;
    return 1;
}

/* The primary key of px's request into buf (cap bytes) or, when longer or buf is NULL, a new
 * block (*len its length); NULL out of memory. A key is built once when it fits 512 bytes: a
 * new block is copied from the stack (the miss that leads, gw_proxy__cache_lead), not built
 * again after the key was measured. */
static char *key_of(const px_t *px, char *buf, size_t cap, size_t *len)
{
    gw_cache_url_t u = {scheme_of(px), px->head.authority, px->head.path};
    char tmp[512];
    int own = !buf;
    if (own) {
        buf = tmp;
        cap = sizeof(tmp);
    }
    size_t n = gw_cache_key(&u, buf, cap);
    *len = n;
    if (!own && n <= cap)
        return buf;
    char *k = gw_malloc(n ? n : 1);
    if (!k)
        return NULL;
    if (n <= cap)
        memcpy(k, buf, n);
    else
        gw_cache_key(&u, k, n);
    return k;
}

static const char *fwd_str(unsigned fwd, gw_slice_t method)
{
    switch (fwd) {
    case GW_PROXY_CFWD_MISS:
        return "miss";
    case GW_PROXY_CFWD_STALE:
        return "stale";
    case GW_PROXY_CFWD_REQUEST:
        return "request";
    case GW_PROXY_CFWD_PARTIAL:
        return "partial";
    default:
        /* RFC 9211 §2.2: "method" when the method must go forward, else "bypass" */
        return gw_slice_eq(method, GW_SLICE_LIT("GET")) || gw_slice_eq(method, GW_SLICE_LIT("HEAD"))
                   ? "bypass"
                   : "method";
    }
}

/* ---- a hit ---------------------------------------------------------------------------------- */

/* only-if-cached with nothing usable (§5.2.1.7): 504. */
static int answer_unavailable(px_t *px)
{
    if (px->s->log)
        px->s->log->cache = "miss";
    px->status = 504;
    gw_proxy__resp_reached(px, PX_RESP_HEAD);
    if (gw_proxy__answer(px->s, 504, "h2gate: not in the cache (only-if-cached)\n") < 0)
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
    else
        gw_proxy__response_done(px);
    return 1;
}

/* The Cache-Status of an answer from the store: a hit, or (sie) a stale answer standing in for
 * an origin that failed (RFC 5861 §4): the origin's status (0: none came). */
typedef struct {
    int sie;
    int swr; /* stale within its stale-while-revalidate window, revalidated in the background */
    unsigned origin_status;
    int not_modified;       /* the request's condition is false on it: 304 (RFC 9110 §13.2.2) */
    gw_cache_range_t range; /* PARTIAL: 206 of [first, last]; UNSATISFIABLE: 416 */
    uint64_t first, last;
} hit_how_t;

/* RFC 9110 §15.4.5: the fields a 304 carries of the 200 it stands for. */
static int in_304(gw_slice_t name)
{
    static const char *const keep[] = {"content-location", "date",   "etag", "vary",
                                       "cache-control",    "expires"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (gw_proxy__name_is(name, keep[i]))
            return 1;
    return 0;
}

/* Send e to px: the stored head with Age and Cache-Status, then the body from an exchange of
 * its own that holds the entry's buffers (no origin: it is complete from the start), handed to
 * the client as it reads (flow.c). */

static gw_cache_entry_t *copy_find(px_t *px, const gw_cache_entry_t *e, gw_zcoding_t zc);
static void copy_keep(ox_t *ox, const px_t *px, const gw_cache_entry_t *e, gw_zcoding_t zc);

static int send_hit(px_t *px, const gw_cache_entry_t *e, int64_t now, hit_how_t how)
{
    gw_proxy_t *p = px->p;
    unsigned status = how.not_modified                            ? 304
                      : how.range == GW_CACHE_RANGE_PARTIAL       ? 206
                      : how.range == GW_CACHE_RANGE_UNSATISFIABLE ? 416
                                                                  : e->status;
    /* RFC 9110 §14.4: the bytes of a 206, none with a 416 */
    uint64_t off = status == 206 ? how.first : 0;
    uint64_t len = status == 206 ? how.last - how.first + 1 : status == 416 ? 0 : e->body_len;
    int no_body = px->s->head_only || status == 204 || status == 304 || len == 0;
    ox_t *ox = gw_proxy__ox_new(px);
    if (!ox) {
        gw_proxy__fail(px, GW_E_NOMEM);
        return 1;
    }
    ox->owner = px;
    gw_list_push_back(&ox->subs, &px->slink);
    ox->nsubs = 1;
    px->ox = ox;
    if (px->s->log)
        px->s->log->cache = how.sie ? "stale-if-error" : how.swr ? "stale-while-revalidate" : "hit";
    if (how.sie || how.swr)
        gw_cache_count(p->cache,
                       how.sie ? GW_CACHE_EV_STALE_IF_ERROR : GW_CACHE_EV_STALE_WHILE_REVALIDATE);

    gw_field_t f[GW_PROXY_MAX_RESP_FIELDS];
    size_t n = 0;
    for (size_t i = 0; i < e->nfields && n < GW_PROXY_MAX_RESP_FIELDS - 5; i++)
        if (how.not_modified ? in_304(e->fields[i].name)
                             : !((status == 206 || status == 416) &&
                                 gw_proxy__name_is(e->fields[i].name, "content-range")))
            f[n++] = e->fields[i]; /* a 206 or 416 gets its own Content-Range below */
    /* compressed on the way out as the forwarded answer is (compress.c): the store holds the
     * identity body, the coding is the client's (Vary: Accept-Encoding); a whole body in a
     * coding comes from the copy an earlier hit made, else it is compressed now and kept */
    int64_t cl = status == 204 || status == 304 ? -1 : (int64_t)len;
    char etag[256];
    gw_zcoding_t want = status == 200 && !no_body ? gw_proxy__zhit_coding(px, e->status, e->fields,
                                                                          e->nfields, e->body_len)
                                                  : GW_ZC_NONE;
    gw_cache_entry_t *copy = want != GW_ZC_NONE ? copy_find(px, e, want) : NULL;
    px->zc = (uint8_t)gw_proxy__compress_hit(ox, px, status, e->status, e->fields, e->nfields, f,
                                             &n, GW_PROXY_MAX_RESP_FIELDS - 3, &cl, e->body_len,
                                             px->s->head_only, copy != NULL, etag, sizeof(etag));
    if (ox->zip)
        copy_keep(ox, px, e, (gw_zcoding_t)px->zc);
    /* the body into ox->body as it is (the stored one, or its copy), or into ox->zsrc for the
     * compressor (ox->refill) */
    const gw_cache_entry_t *src = copy ? copy : e;
    if (copy)
        off = 0, len = copy->body_len;
    gw_proxy__cbody_t *into = ox->zip ? &ox->z->zsrc : &ox->body;
    uint64_t pos = 0; /* the body's slices [pos, pos + len) that overlap [off, off + len) */
    for (size_t i = 0; i < src->nbody && !no_body && pos < off + len; i++) {
        const gw_rslice_t *b = &src->body[i];
        uint64_t a = pos;
        pos += b->len;
        if (pos <= off)
            continue;
        size_t from = off > a ? (size_t)(off - a) : 0;
        size_t to = off + len < pos ? (size_t)(off + len - a) : b->len;
        if (gw_proxy__cbody_append(into, b->buf, b->off + from, to - from) < 0) {
            if (copy)
                gw_cache_unref(copy);
            gw_proxy__sub_remove(px); /* frees ox */
            gw_proxy__fail(px, GW_E_NOMEM);
            return 1;
        }
    }
    if (copy)
        gw_cache_unref(copy); /* ox->body holds its own references */
    ox->complete = !ox->refill;
    char age[24], cstatus[128], crange[64];
    if (status == 206 || status == 416) {
        size_t rl =
            status == 206
                ? gw_cache_content_range(crange, sizeof(crange), how.first, how.last, e->body_len)
                : gw_cache_content_range(crange, sizeof(crange), 1, 0, e->body_len);
        f[n++] = (gw_field_t){GW_SLICE_LIT("content-range"), {(const uint8_t *)crange, rl}};
    }
    int alen = snprintf(age, sizeof(age), "%u", gw_cache_age(&e->meta, now));
    f[n++] = (gw_field_t){GW_SLICE_LIT("age"), {(const uint8_t *)age, (size_t)alen}};
    if (p->cfg->cache.status_header) {
        /* RFC 9211 §2.1: not forwarded, so a hit, with a negative ttl when stale (§2.4) */
        gw_cache_status_t st = {.hit = 1,
                                .has_ttl = 1,
                                .ttl = gw_cache_ttl(&e->meta, now),
                                .detail = how.swr ? "stale-while-revalidate" : NULL};
        if (how.sie) /* RFC 9211 §2.2: it went forward, and the stale answer came back */
            st = (gw_cache_status_t){.fwd = "stale",
                                     .fwd_status = how.origin_status,
                                     .has_ttl = 1,
                                     .ttl = st.ttl,
                                     .detail = "stale-if-error"};
        size_t sl = gw_cache_status_fmt(&st, cstatus, sizeof(cstatus));
        if (sl)
            f[n++] = (gw_field_t){GW_SLICE_LIT("cache-status"), {(const uint8_t *)cstatus, sl}};
    }
    n = gw_proxy__resp_rules_apply(px->route, f, n, GW_PROXY_MAX_RESP_FIELDS);
    /* what the forwarded answer would have brought first: the page's 103 (learned from the
     * stored head, hints.c) and its push promises (RFC 9113 §8.4.1: before the head) */
    gw_proxy__hints_stored(px, e->status, e->fields, e->nfields);
    gw_proxy__push_links(p, px->s, px->route, &px->head, status, f, n);
    px->status = status;
    px->resp_cl = cl;
    gw_proxy__resp_reached(px, PX_RESP_HEAD);
    if (px->s->ops->respond(px->s, status, f, n, cl, no_body) < 0)
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
    else if (no_body)
        gw_proxy__resp_reached(px, PX_RESP_DONE);
    gw_proxy__pump(ox); /* the body, as the client takes it; the end frees ox */
    return 1;
}

/* Whether the request has a condition of its own (If-None-Match, If-Modified-Since) or a
 * Range: it goes to the origin as it is, whose 304 or 206 is for this client only. */
static int conditional(const gw_req_head_t *h)
{
    return gw_proxy__field(h->fields, h->fields_len, "if-none-match") ||
           gw_proxy__field(h->fields, h->fields_len, "if-modified-since") ||
           gw_proxy__field(h->fields, h->fields_len, "range");
}

/* RFC 9111 §4.3.1: a GET for a stored answer that has validators goes to the origin with
 * If-None-Match (its ETag) and If-Modified-Since (its Last-Modified) (the contract is in
 * proxy_internal.h). */
int gw_proxy__cache_validators(px_t *px, gw_cache_entry_t *e)
{
    if (px->x && px->x->cfields)
        return 0;
    gw_req_head_t *h = &px->head;
    const gw_field_t *etag = gw_proxy__field(e->fields, e->nfields, "etag");
    const gw_field_t *lm = gw_proxy__field(e->fields, e->nfields, "last-modified");
    if ((!etag && !lm) || !gw_slice_eq(h->method, GW_SLICE_LIT("GET")))
        return 0;
    gw_proxy__pxx_t *x = gw_proxy__px_x(px);
    if (!x)
        return 0;
    size_t n = h->fields_len;
    size_t bytes = (etag ? etag->value.len : 0) + (lm ? lm->value.len : 0);
    gw_field_t *f = gw_malloc((n + 2) * sizeof(*f) + bytes + 1);
    if (!f)
        return 0;
    if (n)
        memcpy(f, h->fields, n * sizeof(*f));
    uint8_t *d = (uint8_t *)(f + n + 2);
    const gw_field_t *v[2] = {etag, lm};
    static const char *const as[2] = {"if-none-match", "if-modified-since"};
    for (int k = 0; k < 2; k++) {
        if (!v[k])
            continue;
        memcpy(d, v[k]->value.base, v[k]->value.len);
        f[n++] = (gw_field_t){gw_slice_str(as[k]), {d, v[k]->value.len}};
        d += v[k]->value.len;
    }
    x->cfields = f;
    x->cstale = e;
    h->fields = f;
    h->fields_len = n;
    return 1;
}

void gw_proxy__cache_px_free(px_t *px)
{
    gw_proxy__pxx_t *x = px->x;
    if (!x)
        return;
    if (x->cstale)
        gw_cache_unref(x->cstale);
    x->cstale = NULL;
    gw_free(x->cfields);
    x->cfields = NULL;
}

int gw_proxy__cache_serve(px_t *px)
{
    px->cache_fwd = GW_PROXY_CFWD_BYPASS;
    if (!lookup_ok(px))
        return 0;
    const gw_req_head_t *h = &px->head;
    char kb[512];
    size_t klen;
    char *key = key_of(px, kb, sizeof(kb), &klen);
    if (!key)
        return 0; /* out of memory: the origin answers */
    /* only what this route stored: a reload may have put it in front of the route that
     * stored the URL, whose upstream is another (store.c: "Routes") */
    uint64_t tag = gw_cache_route_tag(gw_slice_str(px->route->host), gw_slice_str(px->route->path));
    /* before the lookup: an invalidation from now on keeps what the origin answers this
     * request (a 304 for the entry found, a 200) out of the store */
    px->cache_gen = gw_cache_gen(px->p->cache, key, klen);
    gw_cache_entry_t *e = gw_cache_get(px->p->cache, key, klen, tag, h->fields, h->fields_len);
    if (key != kb)
        gw_free(key);
    const gw_field_t *ce = e ? gw_proxy__field(e->fields, e->nfields, "content-encoding") : NULL;
    if (ce && !gw_proxy__codings_accepted(h, ce->value)) {
        /* the origin's own coding, stored as it came: only for a client that decodes it
         * (whatever its Vary said); the others go forward as on a miss */
        gw_cache_unref(e);
        e = NULL;
    }
    gw_cache_req_t q;
    creq_of(px, &q);
    int64_t now = (int64_t)time(NULL);
    if (!e) {
        px->cache_fwd = GW_PROXY_CFWD_MISS;
        gw_http_cc_t cc;
        gw_http_cc_fields(&cc, h->fields, h->fields_len);
        return cc.flags & GW_HTTP_CC_ONLY_IF_CACHED ? answer_unavailable(px) : 0;
    }
    int rv = 0;
    gw_cache_use_t use = gw_cache_use(&e->meta, &q, now);
    GW_LOG_DEBUG("cache_lookup", "use=%s", gw_cache_use_str(use));
    /* RFC 5861 §3: within the window, the stale answer now and one revalidation in the
     * background (revalidate.c); when none can start, the request revalidates it itself */
    if (use == GW_CACHE_USE_STALE_SWR && !gw_proxy__revalidate(px, e))
        use = GW_CACHE_USE_REVALIDATE;
    switch (use) {
    case GW_CACHE_USE_STALE_SWR:
    case GW_CACHE_USE_FRESH: {
        gw_cache_resp_t sr = {e->status, e->fields, e->nfields};
        gw_cache_cond_t cond = gw_cache_conditional(&q, &sr);
        hit_how_t how = {.not_modified = cond == GW_CACHE_COND_NOT_MODIFIED,
                         .swr = use == GW_CACHE_USE_STALE_SWR};
        if (!how.not_modified && !px->s->head_only)
            how.range = gw_cache_range(&q, &sr, e->body_len, &how.first, &how.last);
        GW_LOG_DEBUG("cache_hit", "cond=%s range=%s", gw_cache_cond_str(cond),
                     gw_cache_range_str(how.range));
        if (how.range == GW_CACHE_RANGE_FORWARD) {
            px->cache_fwd = GW_PROXY_CFWD_PARTIAL; /* several ranges: the origin's */
            break;
        }
        rv = send_hit(px, e, now, how);
        break;
    }
    case GW_CACHE_USE_UNAVAILABLE:
        rv = answer_unavailable(px);
        break;
    default: /* stale past the windows, or the request's no-cache or max-age */
        px->cache_fwd = gw_cache_fresh(&e->meta, now) ? GW_PROXY_CFWD_REQUEST : GW_PROXY_CFWD_STALE;
        if (conditional(h))
            break; /* the client's own condition or range goes to the origin as it is */
        if (gw_proxy__cache_validators(px, e))
            return 0; /* px holds e until its exchange takes it (gw_proxy__cache_lead) */
        gw_proxy__pxx_t *x =
            gw_slice_eq(h->method, GW_SLICE_LIT("GET")) ? gw_proxy__px_x(px) : NULL;
        if (x) {
            x->cstale = e; /* for stale-if-error, should the origin fail */
            return 0;
        }
        break;
    }
    gw_cache_unref(e);
    return rv;
}

void gw_proxy__cache_lead(px_t *px)
{
    ox_t *ox = px->ox;
    if (!ox || ox->owner != px || px->follower || px->cache_fwd == GW_PROXY_CFWD_BYPASS ||
        !gw_slice_eq(px->head.method, GW_SLICE_LIT("GET")))
        return; /* HEAD answers carry no body to store (RFC 9111 §3) */
    struct gw_proxy_cx *cx = gw_calloc(1, sizeof(*cx));
    if (!cx)
        return; /* not stored: the answer goes on */
    if (!(cx->key = key_of(px, NULL, 0, &cx->keylen))) {
        gw_free(cx);
        return;
    }
    cx->request_time = (int64_t)time(NULL);
    cx->gen = px->cache_gen;
    cx->keep = 1;
    cx->stale = gw_proxy__px_cstale(px); /* the exchange holds it from now on */
    if (px->x)
        px->x->cstale = NULL;
    ox->cx = cx;
}

static void drop_superseded(gw_proxy_t *p, struct gw_proxy_cx *cx);

/* Whether the stored answer e may go to px, a subscriber of the exchange it answers for the
 * request it was found for (a stale stand-in, RFC 5861 §4; the head a HEAD updated, RFC 9111
 * §4.3.5): e is that request's variant (§4.1), and coalescing keys only on coalesce_headers,
 * so px may be of another one (another Accept-Language, Cookie...), which a shared cache never
 * answers with e. Checked against e's own Vary key, not the asker's request: once the owner's
 * client left, the asker is a follower, and e is still the owner's variant. */
static int same_variant(const gw_cache_entry_t *e, const px_t *px)
{
    return gw_cache_vary_matches(e, px->head.fields, px->head.fields_len);
}

int gw_proxy__cache_error(ox_t *ox, int code)
{
    struct gw_proxy_cx *cx = ox->cx;
    if (cx && cx->superseded) {
        /* a full answer's head came first (RFC 9111 §4.3.3), then its body broke: the stale
         * entry stands in for nothing, and goes */
        drop_superseded(ox->p, cx);
        return 0;
    }
    if (!cx || !cx->stale || gw_list_empty(&ox->subs))
        return 0;
    gw_cache_count(ox->p->cache, GW_CACHE_EV_REVALIDATION_FAILED); /* no answer came */
    px_t *a = ox->owner ? ox->owner : GW_CONTAINER_OF(ox->subs.next, px_t, slink);
    gw_cache_req_t q;
    creq_of(a, &q);
    int64_t now = (int64_t)time(NULL);
    if (!gw_cache_stale_if_error(&cx->stale->meta, &q, 0, now)) /* 0: no answer (RFC 5861 §4) */
        return 0;
    gw_cache_entry_t *e = cx->stale; /* ours now: ox and cx go with the last subscriber */
    cx->stale = NULL;
    GW_LOG_INFO("cache_stale_if_error", "upstream=%s code=%s age=%u", ox->route->upstream_name,
                gw_errname(code), gw_cache_age(&e->meta, now));
    ox->pumping = 1; /* the last sub_remove leaves freeing ox to us */
    FOREACH_SUB(ox, px)
    {
        gw_proxy__sub_remove(px);
        if (px->closed)
            continue;
        if (px->resp >= PX_RESP_HEAD || !same_variant(e, px))
            gw_proxy__fail(px, code); /* a head went out, or another variant: as without the
                                         cache */
        else
            send_hit(px, e, now, (hit_how_t){.sie = 1});
    }
    ox->pumping = 0;
    if (ox->nsubs == 0)
        gw_proxy__ox_free(ox);
    gw_cache_unref(e);
    return 1;
}

/* ---- the filter ------------------------------------------------------------------------------ */

static int cache_body_keep(struct gw_proxy_cx *cx, const gw_rslice_t *b);
static void commit(ox_t *ox, struct gw_proxy_cx *cx);
static void trim_if_due(gw_proxy_t *p);

static void cx_drop_body(struct gw_proxy_cx *cx)
{
    for (size_t i = 0; i < cx->nbody; i++)
        gw_rbuf_unref(cx->body[i].buf);
    gw_free(cx->body);
    cx->body = NULL;
    cx->nbody = cx->cap = 0;
}

/* RFC 9111 §4.3.3: a full answer to a request for a stored answer (a revalidation with its
 * validators, or an unconditional request when it has none) "indicates that none of the
 * stored responses nominated in the conditional request are suitable": the cache may store
 * the new one (§3), and must not reuse the old one, fresh or stale (not within
 * stale-while-revalidate, not as stale-if-error's stand-in). A new answer that is stored under
 * the same Vary key replaces it (gw_cache_put); whatever else happens to it (not storable:
 * private, no-store, Vary: *, no freshness, past max_object, trailers, cut midway; another
 * Vary key; refused by the store), the stale entry goes now. Only the entry the request was
 * answered from is removed: the other variants of the URL were not nominated (§4.4's
 * invalidation of every variant is for unsafe methods). Nor is it removed by an answer for the
 * request's credentials alone (Authorization or Cookie, and none of public, s-maxage,
 * must-revalidate: gw_cache_for_credentials, §3.5): the origin judged the stored answer for
 * those credentials, which a shared cache may not store and which is not what the other
 * clients get; the stored answer stays theirs to revalidate or to stand in for a failing
 * origin. A response the cache may not store changes nothing it stores for others, but where
 * §4.4 (unsafe methods) says so. gw_cache_remove does nothing
 * when the entry went or was replaced meanwhile (a newer answer is never removed), and the
 * generation it bumps comes after this exchange's own put, so the invalidation race rule
 * (invalidated_since, gw_cache_put's gen) is unchanged. */
static void drop_superseded(gw_proxy_t *p, struct gw_proxy_cx *cx)
{
    if (!cx->superseded || !cx->stale || !p->cache)
        return;
    cx->superseded = 0;
    const gw_cache_entry_t *e = cx->stale;
    int gone = gw_cache_remove(p->cache, cx->stale);
    trim_if_due(p);
    GW_LOG_DEBUG("cache_superseded", "key=%.*s removed=%d",
                 (int)(e->keylen > 200 ? 200 : e->keylen), e->key, gone);
}

static void cache_release(ox_t *ox)
{
    struct gw_proxy_cx *cx = ox->cx;
    if (!cx)
        return;
    drop_superseded(ox->p, cx); /* its answer broke before it ended: not stored */
    ox->cx = NULL;
    cx_drop_body(cx);
    gw_free(cx->key);
    gw_free(cx->req);
    gw_free(cx->head);
    if (cx->stale)
        gw_cache_unref(cx->stale);
    gw_free(cx);
}

static int cache_wants(const gw_cfg_route_t *r)
{
    return r->cache;
}

/* RFC 9111 §4.4: an unsafe method's non-error answer invalidates what it names. */
static void invalidate(gw_proxy_t *p, const gw_cache_req_t *q, const gw_cache_resp_t *rs)
{
    if (!p->cache || (gw_http_method_flags(q->method) & GW_HTTP_METHOD_F_SAFE))
        return;
    gw_cache_url_t u[3];
    size_t n = gw_cache_invalidation(q, rs, u);
    for (size_t i = 0; i < n; i++) {
        char kb[512];
        size_t klen = gw_cache_key(&u[i], kb, sizeof(kb));
        char *k = klen <= sizeof(kb) ? kb : gw_malloc(klen);
        if (!k)
            continue;
        if (k != kb)
            gw_cache_key(&u[i], k, klen);
        size_t gone = gw_cache_purge(p->cache, k, klen);
        GW_LOG_DEBUG("cache_invalidate", "key=%.*s purged=%zu", (int)(klen > 200 ? 200 : klen), k,
                     gone);
        if (k != kb)
            gw_free(k);
    }
}

/* Whether the key was invalidated (an unsafe method's answer, a purge, a removal: RFC 9111
 * §4.4) since the request that got this answer left: the answer may be from before the change
 * and is not stored; a 304 refreshes nothing. */
static int invalidated_since(gw_proxy_t *p, const struct gw_proxy_cx *cx)
{
    return cx->gen && gw_cache_gen(p->cache, cx->key, cx->keylen) != cx->gen;
}

/* Whether the head is kept: 0, or why not (a Cache-Status detail token). */
static const char *keep_head(ox_t *ox, struct gw_proxy_cx *cx, gw_proxy_resp_t *r,
                             const gw_cache_req_t *q, const gw_cache_resp_t *rs)
{
    const gw_config_t *cfg = ox->p->cfg;
    gw_cache_policy_t pol = policy_of(cfg, ox->route);
    gw_cache_nostore_t why = gw_cache_storable(&pol, q, rs);
    if (why != GW_CACHE_STORE)
        return gw_cache_nostore_str(why);
    if (r->cl >= 0 && (uint64_t)r->cl > cfg->cache.max_object)
        return "too-large";
    if (ox->route->intercept_errors && r->status >= 500)
        return "error-page"; /* the client gets the page, not what the origin sent */
    if (invalidated_since(ox->p, cx))
        return "invalidated";
    /* the answer is the owner's request's variant (RFC 9111 §4.1): once its client left, the
     * asker is a follower whose Vary fields may differ (the coalescing key holds only
     * coalesce_headers), and its request never reached the origin. Keyed on it, an `fr`
     * answer was stored as the `en` variant; not stored */
    if (r->asker != ox->owner)
        return "owner-gone";
    /* the head as the clients get it, without Age: a reuse computes its own (§4.2.3) */
    gw_field_t f[GW_PROXY_MAX_RESP_FIELDS];
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (gw_cache_field_stored(r->f[i].name)) /* §3.1: not Age, Proxy-*, hop-by-hop */
            f[n++] = r->f[i];
    const px_t *a = r->asker;
    if (gw_proxy__fields_dup(f, n, &cx->head) < 0 ||
        gw_proxy__fields_dup(a->head.fields, a->head.fields_len, &cx->req) < 0)
        return "memory";
    cx->nhead = n;
    cx->nreq = a->head.fields_len;
    cx->status = r->status;
    cx->cl = r->cl;
    gw_cache_meta(&pol, rs, cx->request_time, (int64_t)time(NULL), &cx->meta);
    return NULL;
}

/* The origin's 304 validated the stale entry (RFC 9111 §4.3.3, §4.3.4): the client, whose
 * request was not conditional, gets the stored answer with the 304's updating fields (the
 * filters after this one see it as the answer, and its body at the end: cache_end); the
 * store gets it back refreshed, the same body by reference. 0 or a negative code. */
static int stand_in(ox_t *ox, struct gw_proxy_cx *cx, gw_proxy_resp_t *r, const gw_cache_req_t *q)
{
    const gw_cache_entry_t *e = cx->stale;
    gw_field_t merged[GW_PROXY_MAX_RESP_FIELDS];
    ssize_t m =
        gw_cache_merge_304(e->fields, e->nfields, r->f, r->n, merged, GW_PROXY_MAX_RESP_FIELDS - 2);
    if (m < 0 || gw_proxy__fields_dup(merged, (size_t)m, &cx->head) < 0 ||
        gw_proxy__fields_dup(q->fields, q->nfields, &cx->req) < 0)
        return GW_E_NOMEM;
    cx->nhead = (size_t)m;
    cx->nreq = q->nfields;
    cx->status = e->status;
    cx->revalidated = 1;
    const gw_config_t *cfg = ox->p->cfg;
    gw_cache_policy_t pol = policy_of(cfg, ox->route);
    gw_cache_resp_t rs = {e->status, cx->head, cx->nhead};
    int64_t now = (int64_t)time(NULL);
    gw_cache_meta(&pol, &rs, cx->request_time, now, &cx->meta);
    /* the refreshed answer is stored again when it still may be. A 304 updates the stored
     * answer (RFC 9111 §4.3.4, its fields as §3.2 says), and an answer that says no-store,
     * private (or another §3 refusal) must not be stored: the entry is removed, not refreshed
     * nor left to be revalidated again; this client still gets it (§4.3.3: validated) */
    gw_cache_nostore_t why = gw_cache_storable(&pol, q, &rs);
    cx->keep = why == GW_CACHE_STORE;
    if (invalidated_since(ox->p, cx)) {
        /* the entry was invalidated while this revalidation was in flight (RFC 9111 §4.4):
         * the 304 may predate the change and must not bring it back. This client asked
         * before the change and gets the validated answer; the next one goes to the origin */
        cx->keep = 0;
        cx->not_stored = "invalidated";
    } else if (why == GW_CACHE_NS_AUTH) {
        /* a 304 to a request with credentials whose fields do not say public, s-maxage or
         * must-revalidate: its fields may be that client's (§3.5), so they do not go into the
         * stored answer, which stays as it was (stale) for another request to revalidate */
        cx->not_stored = gw_cache_nostore_str(why);
    } else if (!cx->keep) {
        cx->not_stored = gw_cache_nostore_str(why);
        int gone = gw_cache_remove(ox->p->cache, cx->stale);
        GW_LOG_DEBUG("cache_not_refreshed", "key=%.*s why=%s removed=%d",
                     (int)(e->keylen > 200 ? 200 : e->keylen), e->key, cx->not_stored, gone);
    }
    for (size_t i = 0; i < e->nbody && cx->keep; i++) {
        if (cache_body_keep(cx, &e->body[i]) < 0)
            return GW_E_NOMEM;
    }
    /* the head the clients get: the merged fields and Age (§5.1) */
    r->status = e->status;
    r->n = 0;
    for (size_t i = 0; i < cx->nhead; i++)
        r->f[r->n++] = cx->head[i];
    char age[24];
    int alen = snprintf(age, sizeof(age), "%u", gw_cache_age(&cx->meta, now));
    char *v = gw_proxy__resp_room(r, (size_t)alen);
    if (v) {
        memcpy(v, age, (size_t)alen);
        r->f[r->n++] = (gw_field_t){GW_SLICE_LIT("age"), {(const uint8_t *)v, (size_t)alen}};
    }
    r->cl = e->status == 204 ? -1 : (int64_t)e->body_len;
    return 0;
}

/* The origin answered 500, 502, 503 or 504 and the stale entry may stand in (RFC 5861 §4): the
 * clients get it as stored, with its Age; its body at the end (cache_end), the origin's
 * dropped; nothing is stored. */
static void stand_in_stale(struct gw_proxy_cx *cx, gw_proxy_resp_t *r, int64_t now)
{
    const gw_cache_entry_t *e = cx->stale;
    cx->revalidated = 1;
    cx->keep = 0;
    cx_drop_body(cx);
    r->status = e->status;
    r->n = 0;
    for (size_t i = 0; i < e->nfields && r->n < GW_PROXY_MAX_RESP_FIELDS - 2; i++)
        r->f[r->n++] = e->fields[i]; /* the entry lives as long as ox (cx->stale) */
    char age[24];
    int alen = snprintf(age, sizeof(age), "%u", gw_cache_age(&e->meta, now));
    char *v = gw_proxy__resp_room(r, (size_t)alen);
    if (v) {
        memcpy(v, age, (size_t)alen);
        r->f[r->n++] = (gw_field_t){GW_SLICE_LIT("age"), {(const uint8_t *)v, (size_t)alen}};
    }
    r->cl = e->status == 204 ? -1 : (int64_t)e->body_len;
}

/* Whether f[0..n) has a field line named name and the first one has v's value. */
static int same_value(const gw_field_t *f, size_t n, const char *name, const gw_field_t *v)
{
    const gw_field_t *s = gw_proxy__field(f, n, name);
    return s && gw_slice_eq(s->value, v->value);
}

/* Whether a HEAD's 200 (fields h[0..n)) describes the stored GET answer e (RFC 9111 §4.3.5):
 * each validator it carries (ETag, Last-Modified) matches e's, and its Content-Length, when it
 * has one, is e's length. */
static int head_matches(const gw_cache_entry_t *e, const gw_field_t *h, size_t n)
{
    static const char *const validators[] = {"etag", "last-modified"};
    for (size_t i = 0; i < 2; i++) {
        const gw_field_t *v = gw_proxy__field(h, n, validators[i]);
        if (v && !same_value(e->fields, e->nfields, validators[i], v))
            return 0;
    }
    const gw_field_t *cl = gw_proxy__field(h, n, "content-length");
    if (!cl)
        return 1;
    uint64_t len = 0;
    if (!cl->value.len || cl->value.len > 19)
        return 0;
    for (size_t i = 0; i < cl->value.len; i++) {
        uint8_t c = cl->value.base[i];
        if (c < '0' || c > '9')
            return 0;
        len = len * 10 + (uint64_t)(c - '0');
    }
    return len == e->body_len;
}

/* The HEAD's client gets the stored head as a HEAD's 200 updated it (f[0..n): slices into e
 * and r), with its Age: the fields are copied into a cx of ox's (for a HEAD it has none: no
 * body to store), which keeps them until the head went out. Out of memory, the origin's head
 * goes as it came. */
static void head_as_stored(ox_t *ox, gw_proxy_resp_t *r, const gw_cache_entry_t *e,
                           const gw_field_t *f, size_t n, const gw_cache_meta_t *meta, int64_t now)
{
    struct gw_proxy_cx *cx = ox->cx ? NULL : gw_calloc(1, sizeof(*cx));
    if (!cx)
        return;
    if (gw_proxy__fields_dup(f, n, &cx->head) < 0) {
        gw_free(cx);
        return;
    }
    cx->nhead = n;
    cx->cl = -1;
    ox->cx = cx; /* keep 0: nothing for the store, cache_release frees it */
    r->n = 0;
    for (size_t i = 0; i < n && r->n < GW_PROXY_MAX_RESP_FIELDS - 2; i++)
        r->f[r->n++] = cx->head[i];
    char age[24];
    int alen = snprintf(age, sizeof(age), "%u", gw_cache_age(meta, now));
    char *v = gw_proxy__resp_room(r, (size_t)alen);
    if (v) {
        memcpy(v, age, (size_t)alen);
        r->f[r->n++] = (gw_field_t){GW_SLICE_LIT("age"), {(const uint8_t *)v, (size_t)alen}};
    }
    r->cl = (int64_t)e->body_len;
}

/* RFC 9111 §4.3.5: a HEAD's 200 updates the stored GET answer that could have been chosen for
 * it (the same key and Vary key, a coding the client takes): when the validators it carries
 * and its Content-Length match, the stored head gets its fields as a 304's would (§3.2:
 * gw_cache_merge_304) and a new freshness, the body kept by reference; otherwise the stored
 * answer no longer describes the resource and is removed (the RFC's "consider it stale": an
 * entry known to be wrong is not served, not even within a stale window). An updated head
 * that may not be stored (no-store, private) removes it too (§3). When it was updated, the
 * HEAD's client gets the stored head as updated (the fields the origin did not send again
 * included), as a 304's client gets the refreshed answer (§4.3.4): what a GET would now get.
 *
 * A HEAD answered 404 or 410 says the resource is not there (RFC 9110 §15.5.5, §15.5.11), for
 * any client: a stored GET answer of another status no longer describes it and is removed.
 * §4.3.5 speaks of a 200 only; updating the stored 200 with a 410's fields (and its freshness)
 * would serve for that long an answer the origin says is gone. */
static void freshen_by_head(ox_t *ox, const px_t *a, gw_proxy_resp_t *r)
{
    gw_proxy_t *p = ox->p;
    char kb[512];
    size_t klen;
    char *key = key_of(a, kb, sizeof(kb), &klen);
    if (!key)
        return;
    uint64_t tag = gw_cache_route_tag(gw_slice_str(ox->route->host), gw_slice_str(ox->route->path));
    gw_cache_entry_t *e =
        gw_cache_peek(p->cache, key, klen, tag, a->head.fields, a->head.fields_len);
    if (r->status != 200) {
        /* 404 or 410: every stored variant goes (any coding), unless the one this HEAD would
         * have been answered from says the same */
        int same = e && e->status == r->status;
        if (e)
            gw_cache_unref(e);
        if (!same) {
            size_t gone = gw_cache_purge(p->cache, key, klen);
            trim_if_due(p);
            GW_LOG_DEBUG("cache_head_invalidate", "key=%.*s why=gone status=%u purged=%zu",
                         (int)(klen > 200 ? 200 : klen), key, r->status, gone);
        }
        if (key != kb)
            gw_free(key);
        return;
    }
    if (key != kb)
        gw_free(key);
    if (e && a != ox->owner) {
        /* the owner's client left: the HEAD answered its request, whose variant (§4.1) may not
         * be the asker's, the entry found here: it updates nothing */
        gw_cache_unref(e);
        return;
    }
    if (!e)
        return;
    const gw_field_t *ce = gw_proxy__field(e->fields, e->nfields, "content-encoding");
    const gw_field_t *hce =
        gw_proxy__field(r->origin->fields, r->origin->fields_len, "content-encoding");
    if ((ce && !gw_proxy__codings_accepted(&a->head, ce->value)) || !ce != !hce ||
        (ce && !gw_slice_eq_nocase(ce->value, hce->value))) {
        /* not one this request is answered from (gw_proxy__cache_serve), or the HEAD's answer
         * is another representation (an origin that compresses by Accept-Encoding without
         * Vary): its length says nothing of the stored one */
        gw_cache_unref(e);
        return;
    }
    const char *why = NULL;
    gw_field_t merged[GW_PROXY_MAX_RESP_FIELDS];
    ssize_t m = 0;
    if (e->status != 200 || !head_matches(e, r->origin->fields, r->origin->fields_len))
        why = "changed"; /* another status, validator or length: not the stored answer's */
    else if ((m = gw_cache_merge_304(e->fields, e->nfields, r->f, r->n, merged,
                                     GW_PROXY_MAX_RESP_FIELDS)) < 0)
        why = "too-many-fields";
    if (!why) {
        gw_cache_policy_t pol = policy_of(p->cfg, ox->route);
        gw_cache_req_t q;
        creq_of(a, &q);
        q.method = GW_SLICE_LIT("GET"); /* the stored answer is the GET's */
        gw_cache_resp_t rs = {e->status, merged, (size_t)m};
        gw_cache_nostore_t ns = gw_cache_storable(&pol, &q, &rs);
        if (ns == GW_CACHE_NS_AUTH) {
            /* the HEAD had credentials and its answer says neither public, s-maxage nor
             * must-revalidate: its fields may be that client's (§3.5), the stored answer
             * is left as it is */
            gw_cache_unref(e);
            return;
        }
        if (ns != GW_CACHE_STORE)
            why = gw_cache_nostore_str(ns);
    }
    if (!why) {
        int64_t now = (int64_t)time(NULL);
        int64_t took = (int64_t)((gw_now_ns() - ox->started_ns) / 1000000000u);
        gw_cache_policy_t pol = policy_of(p->cfg, ox->route);
        gw_cache_resp_t rs = {e->status, merged, (size_t)m};
        gw_cache_put_t put = {.key = e->key,
                              .keylen = e->keylen,
                              .req_fields = a->head.fields,
                              .nreq = a->head.fields_len,
                              .status = e->status,
                              .fields = merged,
                              .nfields = (size_t)m,
                              .body = e->body,
                              .nbody = e->nbody,
                              .route = tag,
                              .gen = a->cache_gen};
        gw_cache_meta(&pol, &rs, now - took, now, &put.meta);
        int rv = gw_cache_put(p->cache, &put);
        trim_if_due(p);
        GW_LOG_DEBUG("cache_head_update", "key=%.*s code=%s",
                     (int)(e->keylen > 200 ? 200 : e->keylen), e->key,
                     rv < 0 ? gw_errname(rv) : "ok");
        if (rv == 0) {
            head_as_stored(ox, r, e, merged, (size_t)m, &put.meta, now);
            FOREACH_SUB(ox, px) /* the asker's variant's head: the others fetch on their own */
            {
                if (!same_variant(e, px))
                    gw_proxy__detach(px);
            }
        }
    } else {
        int gone = gw_cache_remove(p->cache, e);
        trim_if_due(p);
        GW_LOG_DEBUG("cache_head_invalidate", "key=%.*s why=%s removed=%d",
                     (int)(e->keylen > 200 ? 200 : e->keylen), e->key, why, gone);
    }
    gw_cache_unref(e);
}

static int cache_head(ox_t *ox, gw_proxy_resp_t *r)
{
    const px_t *a = r->asker;
    gw_cache_req_t q;
    creq_of(a, &q);
    gw_cache_resp_t rs = {r->status, r->origin->fields, r->origin->fields_len};
    invalidate(ox->p, &q, &rs);
    struct gw_proxy_cx *cx = ox->cx; /* before freshen_by_head, which may give ox one */
    if ((r->status == 200 || r->status == 404 || r->status == 410) && ox->p->cache &&
        a->cache_fwd != GW_PROXY_CFWD_BYPASS && gw_slice_eq(a->head.method, GW_SLICE_LIT("HEAD")))
        freshen_by_head(ox, a, r);
    /* no fwd-status (RFC 9211 §2.3): the status the client sees is the origin's own */
    gw_cache_status_t st = {.fwd = fwd_str(a->cache_fwd, a->head.method)};
    int64_t now = (int64_t)time(NULL);
    if (cx && cx->stale && r->status != 304) /* a stored answer asked of the origin again */
        gw_cache_count(ox->p->cache, r->status >= 500 ? GW_CACHE_EV_REVALIDATION_FAILED
                                                      : GW_CACHE_EV_REVALIDATED_MODIFIED);
    int stale_served = 0;
    if (cx && cx->stale && r->status == 304) {
        int rv = stand_in(ox, cx, r, &q);
        if (rv < 0)
            return rv;
        gw_cache_count(ox->p->cache, cx->not_stored ? GW_CACHE_EV_REVALIDATED_NOT_STORED
                                                    : GW_CACHE_EV_REVALIDATED_NOT_MODIFIED);
        st.fwd_status = 304; /* RFC 9211 §2.3: what the origin said, the client gets a 200 */
        st.stored = cx->keep;
        st.detail = cx->not_stored;
    } else if (cx && cx->stale && r->status >= 500 &&
               gw_cache_stale_if_error(&cx->stale->meta, &q, r->status, now)) {
        stand_in_stale(cx, r, now); /* RFC 5861 §4 */
        FOREACH_SUB(ox, px)         /* the asker's variant: the others fetch on their own */
        {
            if (!same_variant(cx->stale, px))
                gw_proxy__detach(px);
        }
        stale_served = 1;
        st.fwd = "stale";
        st.fwd_status = r->origin->status;
        st.has_ttl = 1;
        st.ttl = gw_cache_ttl(&cx->stale->meta, now);
        st.detail = "stale-if-error";
    } else if (cx) {
        /* a full answer for the stored one (RFC 9111 §4.3.3): it replaces it, or it goes.
         * A 5xx is the origin failing, not a new answer (§4.3.3: the cache may act as if it
         * had not answered), and a 206 is no full answer. An answer for the request's
         * credentials alone (§3.5) is not one the other clients would get: the origin chose
         * it by those credentials, so the stored answer stays theirs (drop_superseded) */
        cx->superseded =
            cx->stale && r->status < 500 && r->status != 206 && !gw_cache_for_credentials(&q, &rs);
        st.detail = keep_head(ox, cx, r, &q, &rs);
        st.stored = st.detail == NULL;
        if (st.detail) {
            cx->keep = 0;
            drop_superseded(ox->p, cx); /* before the head reaches anyone */
        } else if (cx->cl == 0) {
            commit(ox, cx); /* whole already: stored before the head goes out */
        }
    }
    FOREACH_SUB(ox, px) /* the access log's cache field: each its own, the answer is shared */
    {
        px->cache_stored = st.stored != 0;
        if (stale_served && !px->closed)
            gw_cache_count(ox->p->cache, GW_CACHE_EV_STALE_IF_ERROR);
        if (px->s->log && !px->closed)
            px->s->log->cache =
                cx && cx->revalidated
                    ? (cx->stale && st.fwd_status == 304 ? "revalidated" : "stale-if-error")
                    : fwd_str(px->cache_fwd, px->head.method);
    }
    if (!ox->p->cfg->cache.status_header || r->n >= GW_PROXY_MAX_RESP_FIELDS)
        return 0;
    char buf[160];
    size_t len = gw_cache_status_fmt(&st, buf, sizeof(buf));
    char *v = len ? gw_proxy__resp_room(r, len) : NULL;
    if (v) {
        memcpy(v, buf, len);
        r->f[r->n++] = (gw_field_t){GW_SLICE_LIT("cache-status"), {(const uint8_t *)v, len}};
    }
    return 0;
}

/* A reference to b's bytes appended to cx's body: 0 or GW_E_NOMEM. */
static int cache_body_keep(struct gw_proxy_cx *cx, const gw_rslice_t *b)
{
    gw_rslice_t *last = cx->nbody ? &cx->body[cx->nbody - 1] : NULL;
    if (last && last->buf == b->buf && last->off + last->len == b->off) {
        last->len += b->len; /* the next bytes of the same read buffer */
    } else {
        if (cx->nbody == cx->cap) {
            size_t cap = cx->cap ? cx->cap * 2 : 8;
            gw_rslice_t *nb = gw_realloc(cx->body, cap * sizeof(*nb));
            if (!nb)
                return GW_E_NOMEM;
            cx->body = nb;
            cx->cap = cap;
        }
        cx->body[cx->nbody++] = (gw_rslice_t){gw_rbuf_ref(b->buf), b->off, b->len};
    }
    cx->len += b->len;
    return 0;
}

static int cache_body(ox_t *ox, gw_rslice_t *b)
{
    struct gw_proxy_cx *cx = ox->cx;
    if (cx && cx->revalidated)
        return GW_PROXY_F_TAKEN; /* the stored body stands in (cache_end): the origin's goes */
    if (!cx || !cx->keep || !b->len)
        return 0;
    if (cx->len + b->len > ox->p->cfg->cache.max_object || cache_body_keep(cx, b) < 0) {
        cx->keep = 0; /* streamed, not stored: the references go now */
        cx_drop_body(cx);
        drop_superseded(ox->p, cx);
    } else if (cx->cl >= 0 && cx->len == (uint64_t)cx->cl) {
        /* whole by its Content-Length (the back checks the framing): stored before these last
         * bytes reach anyone, so the client's next request, on any worker, finds it */
        commit(ox, cx);
    }
    return 0;
}

static int cache_trailers(ox_t *ox, gw_proxy_resp_t *r)
{
    (void)r;
    if (ox->cx) {
        ox->cx->keep = 0; /* the entry has no trailers: an answer with them is not stored */
        cx_drop_body(ox->cx);
        drop_superseded(ox->p, ox->cx);
    }
    return 0;
}

/* The origin's answer ended whole: into the store, its body by reference. */
static int cache_end(ox_t *ox)
{
    struct gw_proxy_cx *cx = ox->cx;
    if (cx && cx->revalidated) {
        /* after a 304, the stored body stands in for the origin's (none), through the filters
         * after this one: what they hold goes out at their own on_end, which follows */
        const gw_cache_entry_t *e = cx->stale;
        for (size_t i = 0; i < e->nbody; i++) {
            int rv = gw_proxy__chain_body_after(ox, &gw_proxy__filter_cache, e->body[i]);
            if (rv < 0)
                return rv;
        }
    }
    if (cx)
        commit(ox, cx);
    return 0;
}

/* ---- giving the heap's free pages back --------------------------------------------------- */

/* A trim the store says is due (gw_cache_trim_due: store.c's "Memory") goes to the heap's one
 * trimmer (gw_proxy_set_trim: server/heap.c), which runs malloc_trim(0) on libuv's thread pool,
 * never on this worker's loop (whose connections it stalled for up to 4.6 ms), and one at a
 * time in the process: one asked while another runs follows it. */
static void trim_if_due(gw_proxy_t *p)
{
    if (p->trim && gw_cache_trim_due(p->cache))
        p->trim(p->trim_data);
}

/* Put the kept answer into the store (once): its body by reference, or copied where it fills
 * little of a read buffer (store.c's copy rule). Then the stale entry it answered for goes,
 * unless the put replaced it (drop_superseded). */
static void commit(ox_t *ox, struct gw_proxy_cx *cx)
{
    if (!cx->keep || !cx->head || !ox->p->cache) {
        drop_superseded(ox->p, cx);
        return;
    }
    gw_cache_put_t put = {
        .key = cx->key,
        .keylen = cx->keylen,
        .req_fields = cx->req,
        .nreq = cx->nreq,
        .status = cx->status,
        .fields = cx->head,
        .nfields = cx->nhead,
        .body = cx->body,
        .nbody = cx->nbody,
        .meta = cx->meta,
        /* a reload that removes the route drops its entries (gw_cache_keep_routes) */
        .route = gw_cache_route_tag(gw_slice_str(ox->route->host), gw_slice_str(ox->route->path)),
        .gen = cx->gen,
    };
    int rv = gw_cache_put(ox->p->cache, &put);
    trim_if_due(ox->p);
    if (rv < 0)
        GW_LOG_DEBUG("cache_not_stored", "key=%.*s code=%s",
                     (int)(cx->keylen > 200 ? 200 : cx->keylen), cx->key, gw_errname(rv));
    cx_drop_body(cx); /* the entry holds its own references */
    cx->keep = 0;
    drop_superseded(ox->p, cx); /* after the put: its generation check is the request's */
}

const gw_proxy_filter_t gw_proxy__filter_cache = {
    .name = "cache",
    .wants = cache_wants,
    .on_head = cache_head,
    .on_body = cache_body,
    .on_trailers = cache_trailers,
    .on_end = cache_end,
    .release = cache_release,
};

/* ---- copies per coding ------------------------------------------------------------------------
 */

/* The key of the copy of e in coding zc: e's key, a 0 byte (a URL's key holds none), the
 * coding's name and e's id (a 304 that refreshed e, a 200 that replaced it, make another
 * entry: the old copies are never found again, and go as the store evicts them), into buf
 * (cap bytes) or, when longer, a new block (*len its length); NULL out of memory. */
static char *copy_key(const gw_cache_entry_t *e, gw_zcoding_t zc, char *buf, size_t cap,
                      size_t *len)
{
    char tail[48];
    int tl = snprintf(tail, sizeof(tail), "_%s %llu", gw_proxy__coding_str(zc),
                      (unsigned long long)e->id);
    tail[0] = 0;
    *len = e->keylen + (size_t)tl;
    char *k = *len <= cap ? buf : gw_malloc(*len);
    if (k) {
        memcpy(k, e->key, e->keylen);
        memcpy(k + e->keylen, tail, (size_t)tl);
    }
    return k;
}

/* The copy of e in coding zc that an earlier hit made and stored (copy_keep) for px's request
 * (the same Vary key), or NULL. The caller unrefs it. */
static gw_cache_entry_t *copy_find(px_t *px, const gw_cache_entry_t *e, gw_zcoding_t zc)
{
    char kb[640];
    size_t kl;
    char *k = copy_key(e, zc, kb, sizeof(kb), &kl);
    if (!k)
        return NULL;
    /* not counted: this hit was counted when e was found */
    uint64_t tag = gw_cache_route_tag(gw_slice_str(px->route->host), gw_slice_str(px->route->path));
    gw_cache_entry_t *d =
        gw_cache_peek(px->p->cache, k, kl, tag, px->head.fields, px->head.fields_len);
    if (k != kb)
        gw_free(k);
    return d;
}

/* ox->refill of a hit that compresses e and keeps what it makes (ox->cx): the compressed bytes
 * are referenced as they come, and stored as e's copy once the stream ended whole. */
static int copy_refill(ox_t *ox)
{
    struct gw_proxy_cx *cx = ox->cx;
    uint64_t pos = ox->body.end;
    int rv = gw_proxy__zrefill(ox);
    gw_rslice_t sl;
    while (cx->keep && pos < ox->body.end && gw_proxy__cbody_at(&ox->body, pos, &sl) == 0) {
        pos += sl.len;
        if (cx->len + sl.len > ox->p->cfg->cache.max_object || cache_body_keep(cx, &sl) < 0) {
            cx->keep = 0;
            cx_drop_body(cx);
        }
    }
    if (rv < 0) {
        cx->keep = 0;
        cx_drop_body(cx);
    } else if (ox->complete) {
        commit(ox, cx);
    }
    return rv;
}

/* A hit compresses e in coding zc for px (ox->zip): what it makes is kept for the store, under
 * copy_key, with e's head, freshness and Vary key (the request's fields), so the next hit in
 * that coding is sent as it is (copy_find). Out of memory, it is only not kept. */
static void copy_keep(ox_t *ox, const px_t *px, const gw_cache_entry_t *e, gw_zcoding_t zc)
{
    struct gw_proxy_cx *cx = ox->p->cache ? gw_calloc(1, sizeof(*cx)) : NULL;
    if (!cx)
        return;
    cx->key = copy_key(e, zc, NULL, 0, &cx->keylen);
    if (!cx->key || gw_proxy__fields_dup(e->fields, e->nfields, &cx->head) < 0 ||
        gw_proxy__fields_dup(px->head.fields, px->head.fields_len, &cx->req) < 0) {
        ox->cx = cx;
        cache_release(ox);
        return;
    }
    cx->nhead = e->nfields;
    cx->nreq = px->head.fields_len;
    cx->status = e->status;
    cx->meta = e->meta;
    cx->cl = -1;
    cx->keep = 1;
    cx->gen = px->cache_gen; /* a copy of an entry purged meanwhile is not stored */
    ox->cx = cx;
    ox->refill = copy_refill;
}
