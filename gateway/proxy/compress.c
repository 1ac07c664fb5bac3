/* proxy/compress.c — compression of origin responses: the choice of a coding from
 * Accept-Encoding (RFC 9110 §12.5.3), the rules that allow it, and the rewrite of the response
 * head. The compressors themselves, and the memory they are charged, are in zstream.c. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

/* ---- negotiation (RFC 9110 §12.5.3) -----------------------------------------------------------
 */

static int tok_eq(gw_slice_t a, const char *b)
{
    return gw_slice_eq_nocase(a, gw_slice_str(b));
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths; -1 if bad. */
static int parse_q(gw_slice_t v)
{
    if (v.len == 0 || v.len > 5 || (v.base[0] != '0' && v.base[0] != '1'))
        return -1;
    int q = (v.base[0] - '0') * 1000;
    if (v.len == 1)
        return q;
    if (v.base[1] != '.')
        return -1;
    int scale = 100;
    for (size_t i = 2; i < v.len; i++, scale /= 10) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return -1;
        q += (v.base[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* The q of coding in the Accept-Encoding values (several fields join with ","): its own entry,
 * else "*"'s, else -1 (not mentioned). */
static int q_of(const gw_slice_t *vals, size_t n, const char *coding)
{
    int q_self = -1, q_star = -1;
    for (size_t k = 0; k < n; k++) {
        gw_http_list_t items = gw_http_list(vals[k], ',', 0);
        gw_slice_t item;
        while (gw_http_list_next(&items, &item)) {
            gw_http_list_t params;
            gw_slice_t name = gw_http_elem_params(item, 0, &params);
            gw_slice_t param, pn, pv;
            int q = 1000;
            while (gw_http_list_next(&params, &param)) { /* parameters: only q matters */
                /* weight = OWS ";" OWS "q=" qvalue (RFC 9110 §12.4.2): no space around "=" */
                if (gw_http_param_split(param, &pn, &pv) && pn.len == 1 &&
                    (pn.base[0] | 0x20) == 'q' && param.base[1] == '=') {
                    int v = parse_q(pv);
                    q = v < 0 ? 0 : v; /* an invalid weight accepts nothing */
                }
            }
            if (name.len == 0)
                continue;
            if (tok_eq(name, coding) && q > q_self)
                q_self = q;
            else if (tok_eq(name, "*") && q > q_star)
                q_star = q;
        }
    }
    return q_self >= 0 ? q_self : q_star;
}

gw_zcoding_t gw_proxy__choose_coding(const gw_slice_t *vals, size_t n, unsigned available)
{
    if (n == 0)
        return GW_ZC_NONE; /* no Accept-Encoding: any coding is allowed, but none is asked */
    /* the highest q wins; among equals, zstd, then br, then gzip */
    static const struct {
        gw_zcoding_t c;
        const char *name;
    } order[] = {{GW_ZC_ZSTD, "zstd"}, {GW_ZC_BR, "br"}, {GW_ZC_GZIP, "gzip"}};
    gw_zcoding_t best = GW_ZC_NONE;
    int best_q = 0;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (!(available & (1u << order[i].c)))
            continue;
        int q = q_of(vals, n, order[i].name);
        if (q > best_q) {
            best = order[i].c;
            best_q = q;
        }
    }
    return best;
}

const char *gw_proxy__coding_str(gw_zcoding_t c)
{
    static const char *const n[] = {"identity", "gzip", "br", "zstd"};
    return GW_NAME_OF(n, c, "?");
}

const char *gw_proxy_coding_name(gw_zcoding_t c)
{
    return gw_proxy__coding_str(c);
}

const char *gw_proxy_zskip_name(gw_zskip_t k)
{
    static const char *const n[] = {"compressed", "status", "encoded", "no_transform",
                                    "type",       "range",  "private", "small",
                                    "client",     "busy",   "memory"};
    return GW_NAME_OF(n, k, "?");
}

/* ---- the rules ---------------------------------------------------------------------------- */

int gw_proxy__type_listed(const gw_cfg_compression_t *z, gw_slice_t ctype)
{
    gw_http_list_t params; /* the media type without its parameters (RFC 9110 §8.3.1) */
    gw_slice_t t = gw_http_elem_params(ctype, GW_HTTP_LIST_F_QUOTED, &params);
    if (!t.len)
        return 0;
    for (size_t i = 0; i < z->types_len; i++) {
        const char *want = z->types[i];
        size_t wl = strlen(want);
        if (want[0] == '+') { /* a structured syntax suffix (RFC 6838 §4.2.8) */
            if (t.len > wl &&
                gw_slice_eq_nocase((gw_slice_t){t.base + t.len - wl, wl}, gw_slice_str(want)))
                return 1;
        } else if (wl >= 2 && want[wl - 1] == '*' && want[wl - 2] == '/') {
            if (t.len >= wl - 1 && gw_slice_eq_nocase((gw_slice_t){t.base, wl - 1},
                                                      (gw_slice_t){(const uint8_t *)want, wl - 1}))
                return 1;
        } else if (gw_slice_eq_nocase(t, gw_slice_str(want))) {
            return 1;
        }
    }
    return 0;
}

gw_zskip_t gw_proxy__zadmit(const gw_cfg_compression_t *z, uint64_t active, uint64_t charged,
                            uint64_t weight)
{
    if (active >= z->max_concurrent)
        return GW_ZSKIP_BUSY;
    /* unsigned and without a sum that could wrap: a weight can be anything a config makes */
    if (charged > z->max_memory || weight > z->max_memory - charged)
        return GW_ZSKIP_MEMORY;
    return GW_ZSKIP_NONE;
}

gw_zskip_t gw_proxy__zdecide(const gw_cfg_compression_t *z, const gw_req_head_t *req,
                             unsigned status, const gw_field_t *rf, size_t rn, int64_t cl,
                             gw_zcoding_t chosen)
{
    const gw_field_t *ct = gw_proxy__field(rf, rn, "content-type");
    if (status != 200 || gw_slice_eq(req->method, GW_SLICE_LIT("HEAD")))
        return GW_ZSKIP_STATUS;
    if (gw_proxy__field(rf, rn, "content-encoding"))
        return GW_ZSKIP_ENCODED;
    if (gw_proxy__list_has(rf, rn, "cache-control", "no-transform"))
        return GW_ZSKIP_NO_TRANSFORM;
    if (!ct || !gw_proxy__type_listed(z, ct->value))
        return GW_ZSKIP_TYPE;
    if (gw_proxy__field(req->fields, req->fields_len, "range"))
        return GW_ZSKIP_RANGE;
    if (z->skip_private && (gw_proxy__field(rf, rn, "set-cookie") ||
                            gw_proxy__list_has(rf, rn, "cache-control", "private") ||
                            gw_proxy__list_has(rf, rn, "cache-control", "no-store")))
        return GW_ZSKIP_PRIVATE;
    if (cl >= 0 && (uint64_t)cl < z->min_size)
        return GW_ZSKIP_SMALL;
    if (chosen == GW_ZC_NONE)
        return GW_ZSKIP_CLIENT;
    return GW_ZSKIP_NONE;
}

size_t gw_proxy__zhead(gw_field_t *f, size_t n, size_t cap, gw_zcoding_t c, int compressed,
                       char *etag_buf, size_t etag_cap)
{
    size_t k = 0;
    int vary_done = 0;
    for (size_t i = 0; i < n; i++) {
        gw_field_t x = f[i];
        if (compressed && (tok_eq(x.name, "content-length") || tok_eq(x.name, "accept-ranges")))
            continue;
        if (compressed && tok_eq(x.name, "etag") && x.value.len >= 2 && x.value.base[0] == '"' &&
            x.value.len + 2 <= etag_cap) {
            /* RFC 9110 §8.8.3: another representation; a weak validator still matches */
            memcpy(etag_buf, "W/", 2);
            memcpy(etag_buf + 2, x.value.base, x.value.len);
            x.value = (gw_slice_t){(const uint8_t *)etag_buf, x.value.len + 2};
        }
        if (tok_eq(x.name, "vary") && !vary_done) {
            gw_field_t one = {x.name, x.value};
            if (gw_proxy__list_has(&one, 1, "vary", "accept-encoding") ||
                gw_proxy__list_has(&one, 1, "vary", "*"))
                vary_done = 1;
        }
        f[k++] = x;
    }
    if (!vary_done && k < cap) /* added to the origin's Vary, which stays */
        f[k++] = (gw_field_t){GW_SLICE_LIT("vary"), GW_SLICE_LIT("Accept-Encoding")};
    if (compressed && k < cap)
        f[k++] =
            (gw_field_t){GW_SLICE_LIT("content-encoding"), gw_slice_str(gw_proxy__coding_str(c))};
    return k;
}

/* ---- one exchange's compression ----------------------------------------------------- */

/* The state beside the compressor (ox->z), before the first one is made: 0 or GW_E_NOMEM. It
 * stays until compress_release (the pieces recorded outlive the compressor). */
static int oxz_get(ox_t *ox)
{
    if (!ox->z && !(ox->z = gw_calloc(1, sizeof(*ox->z))))
        return GW_E_NOMEM;
    return 0;
}

/* The compressor is done (or dropped): its slot and memory go back. */
static void zip_end(ox_t *ox)
{
    if (!ox->zip)
        return;
    gw_zstream_del(ox->zip);
    ox->zip = NULL;
    ox->p->zst.active--;
}

/* The Accept-Encoding field values of h (the first 16) into ae: their count. */
static size_t accept_encodings(const gw_req_head_t *h, gw_slice_t ae[16])
{
    size_t nae = 0;
    for (size_t i = 0; i < h->fields_len && nae < 16; i++)
        if (gw_proxy__name_is(h->fields[i].name, "accept-encoding"))
            ae[nae++] = h->fields[i].value;
    return nae;
}

/* The coding px's request gets for this response head, decided as for the request req (px's
 * own, or the GET a cache hit stands for), and why not when none. */
static gw_zskip_t zchoice_as(const gw_cfg_compression_t *z, const px_t *px,
                             const gw_req_head_t *req, unsigned status, const gw_field_t *f,
                             size_t n, int64_t cl, gw_zcoding_t *zc)
{
    gw_slice_t ae[16];
    size_t nae = accept_encodings(&px->head, ae);
    *zc = gw_proxy__choose_coding(ae, nae, gw_zstream_available());
    return gw_proxy__zdecide(z, req, status, f, n, cl, *zc);
}

/* The coding a request gets for this response head, and why not when none. */
static gw_zskip_t zchoice(const gw_cfg_compression_t *z, const px_t *px, unsigned status,
                          const gw_field_t *f, size_t n, int64_t cl, gw_zcoding_t *zc)
{
    return zchoice_as(z, px, &px->head, status, f, n, cl, zc);
}

/* Compression of this exchange's response (compress.c), decided from its first subscriber's
 * request. Followers whose own request gets the same answer share the compressed bytes (the
 * coalescing key holds Accept-Encoding unless the route's coalesce_headers leave it out); the
 * others go to the origin on their own. While followers remain, the sizes of the pieces fed
 * to the compressor are kept, so one that falls behind can remake the same bytes alone.
 *
 * A detached stream whose head went out (first->resp >= PX_RESP_HEAD) must get the coding it
 * was promised, or be reset. */
static gw_zskip_t compress_decide(ox_t *ox, unsigned status, const gw_field_t *f, size_t n,
                                  int64_t cl, gw_zcoding_t *coding)
{
    gw_proxy_t *p = ox->p;
    const gw_cfg_compression_t *z = &p->cfg->compression;
    px_t *first = GW_CONTAINER_OF(ox->subs.next, px_t, slink);
    gw_zcoding_t zc;
    gw_zskip_t zs = zchoice(z, first, status, f, n, cl, &zc);
    int resumed = first->resp >= PX_RESP_HEAD;
    if (resumed && (first->zc == GW_ZC_NONE || zs != GW_ZSKIP_NONE || zc != first->zc))
        return zs == GW_ZSKIP_NONE ? GW_ZSKIP_STATUS : zs; /* not compressed: checked by caller */
    /* within max_concurrent and max_memory, each compressor charged its coding's weight */
    if (zs == GW_ZSKIP_NONE)
        zs = gw_proxy__zadmit(z, p->zst.active, *p->zcharged, p->zweight[zc]);
    if (zs == GW_ZSKIP_NONE && (oxz_get(ox) < 0 || gw_zstream_new(z, zc, &p->zst.mem, p->zcharged,
                                                                  p->zweight[zc], &ox->zip) < 0))
        zs = GW_ZSKIP_BUSY;
    *coding = zs == GW_ZSKIP_NONE ? zc : GW_ZC_NONE;
    if (zs != GW_ZSKIP_NONE) {
        p->zst.skipped[zs]++;
        return zs;
    }
    p->zst.active++;
    p->zst.streams[zc]++;
    if (resumed) {
        if (first->x) { /* moved: this exchange replays them */
            ox->z->zchunks = first->x->zrep;
            first->x->zrep = (gw_zchunks_t){0};
        }
        ox->zreplay = ox->z->zchunks.n > 0;
        return zs;
    }
    FOREACH_SUB(ox, px)
    {
        if (px == first)
            continue;
        gw_zcoding_t fc;
        if (zchoice(z, px, status, f, n, cl, &fc) == GW_ZSKIP_NONE && fc == zc) {
            p->zst.shared++;
        } else {
            p->stats.not_shared++;
            gw_proxy__detach(px);
        }
    }
    ox->zrecord = ox->nsubs > 1;
    return zs;
}

/* Feed origin bytes to the compressor. Replaying, they are gathered into the pieces the
 * first exchange was fed (each flushed); recording, each read's size is kept. */
static int zfeed(ox_t *ox, const uint8_t *in, size_t len)
{
    gw_proxy_t *p = ox->p;
    gw_zcoding_t c = gw_zstream_coding(ox->zip);
    uint64_t before = ox->body.end;
    int rv = 0;
    p->zst.in[c] += len;
    while (ox->zreplay && len) {
        size_t want = ox->z->zchunks.len[ox->z->zrep_i];
        if (!ox->z->zpend && !(ox->z->zpend = gw_malloc(want ? want : 1)))
            return GW_E_NOMEM;
        size_t take = want - ox->z->zpend_len < len ? want - ox->z->zpend_len : len;
        memcpy(ox->z->zpend + ox->z->zpend_len, in, take);
        ox->z->zpend_len += take;
        in += take;
        len -= take;
        if (ox->z->zpend_len < want)
            break; /* the piece is not complete yet */
        rv = gw_zstream_run(ox->zip, ox->z->zpend, want, 0, &ox->body);
        gw_free(ox->z->zpend);
        ox->z->zpend = NULL;
        ox->z->zpend_len = 0;
        if (rv < 0)
            break;
        if (++ox->z->zrep_i == ox->z->zchunks.n) {
            ox->zreplay = 0; /* past what the first exchange made: its own pace from now */
            gw_zchunks_free(&ox->z->zchunks);
        }
    }
    if (rv == 0 && !ox->zreplay && len) {
        if (ox->zrecord && ox->nsubs < 2) { /* nobody left who could fall behind */
            ox->zrecord = 0;
            gw_zchunks_free(&ox->z->zchunks);
        }
        if (ox->zrecord && len > UINT32_MAX)
            return GW_E_FATAL;
        rv = ox->zrecord ? gw_zchunks_push(&ox->z->zchunks, (uint32_t)len) : 0;
        if (rv == 0)
            rv = gw_zstream_run(ox->zip, in, len, 0, &ox->body);
    }
    p->zst.out[c] += ox->body.end - before;
    return rv;
}

/* The origin's body ended: what is still gathered goes in, and the stream ends. */
static int zfinish(ox_t *ox)
{
    gw_proxy_t *p = ox->p;
    gw_zcoding_t c = gw_zstream_coding(ox->zip);
    uint64_t before = ox->body.end;
    int rv = 0;
    if (ox->z->zpend_len)
        rv = gw_zstream_run(ox->zip, ox->z->zpend, ox->z->zpend_len, 0, &ox->body);
    if (rv == 0)
        rv = gw_zstream_run(ox->zip, NULL, 0, 1, &ox->body);
    p->zst.out[c] += ox->body.end - before;
    zip_end(ox);
    return rv;
}

/* ---- a body the gateway holds whole (a cache hit) ------------------------------------------- */

/* Up to this much of ox->z->zsrc goes into the compressor per refill: a large hit is compressed
 * as its client takes it, as a forwarded answer is at the origin's pace, not in one go. */
#define ZREFILL_IN (64u * 1024)

int gw_proxy__zrefill(ox_t *ox)
{
    size_t budget = ZREFILL_IN;
    gw_rslice_t sl;
    int rv = 0;
    while (rv == 0 && budget && gw_proxy__cbody_at(&ox->z->zsrc, ox->z->zsrc_pos, &sl) == 0) {
        size_t take = sl.len < budget ? sl.len : budget;
        rv = zfeed(ox, sl.buf->data + sl.off, take);
        ox->z->zsrc_pos += take;
        budget -= take;
    }
    gw_proxy__cbody_trim(&ox->z->zsrc, ox->z->zsrc_pos);
    if (rv == 0 && ox->z->zsrc_pos < ox->z->zsrc.end)
        return 0;
    if (rv == 0)
        rv = zfinish(ox);
    else
        zip_end(ox);
    gw_proxy__cbody_free(&ox->z->zsrc);
    ox->refill = NULL;
    ox->complete = 1;
    return rv;
}

int gw_proxy__codings_accepted(const gw_req_head_t *h, gw_slice_t ce)
{
    gw_slice_t ae[16];
    size_t nae = accept_encodings(h, ae);
    /* RFC 9110 §12.5.3: a request without Accept-Encoding has no preference, so the coding
     * the origin chose (without Vary: Accept-Encoding) is what it would have sent it too; a
     * client that names its codings gets only those */
    if (!nae)
        return 1;
    gw_http_list_t items = gw_http_list(ce, ',', 0);
    gw_slice_t c;
    char name[32];
    while (gw_http_list_next(&items, &c)) {
        if (!c.len || tok_eq(c, "identity"))
            continue;
        if (c.len >= sizeof(name))
            return 0;
        memcpy(name, c.base, c.len);
        name[c.len] = 0;
        if (q_of(ae, nae, name) <= 0)
            return 0;
    }
    return 1;
}

/* What the route's compression makes of a stored answer's 200 (status stored, head sf[0..sn),
 * full_len bytes) for px, as compress_head decides it for a forwarded one: a GET without Range
 * (a HEAD gets the head of that GET, RFC 9110 §9.3.2; a 206 or a 304 stands for it, RFC 9110
 * §15.3.7, §15.4.5). The coding into *zc. */
static gw_zskip_t hit_decide(const gw_cfg_compression_t *z, const px_t *px, unsigned stored,
                             const gw_field_t *sf, size_t sn, uint64_t full_len, gw_zcoding_t *zc)
{
    gw_req_head_t get = {.method = GW_SLICE_LIT("GET")};
    return zchoice_as(z, px, &get, stored, sf, sn, (int64_t)full_len, zc);
}

gw_zcoding_t gw_proxy__zhit_coding(const px_t *px, unsigned stored, const gw_field_t *sf, size_t sn,
                                   uint64_t full_len)
{
    gw_zcoding_t zc;
    if (!px->route->compress ||
        hit_decide(&px->p->cfg->compression, px, stored, sf, sn, full_len, &zc) != GW_ZSKIP_NONE)
        return GW_ZC_NONE;
    return zc;
}

gw_zcoding_t gw_proxy__compress_hit(ox_t *ox, px_t *px, unsigned status, unsigned stored,
                                    const gw_field_t *sf, size_t sn, gw_field_t *f, size_t *n,
                                    size_t cap, int64_t *cl, uint64_t full_len, int head_only,
                                    int have_copy, char *etag, size_t etag_cap)
{
    gw_proxy_t *p = ox->p;
    const gw_cfg_compression_t *z = &p->cfg->compression;
    if (!ox->route->compress)
        return GW_ZC_NONE;
    gw_zcoding_t zc;
    gw_zskip_t zs = hit_decide(z, px, stored, sf, sn, full_len, &zc);
    if (zs != GW_ZSKIP_NONE && zs != GW_ZSKIP_CLIENT)
        return GW_ZC_NONE; /* not compressible whatever the client: no Vary either */
    /* a range is of the identity body (nginx compresses no 206 either): Vary only */
    int whole = status == 200 || status == 304;
    int made = 0; /* a body in the coding: a compressor, or the caller's copy */
    if (zs == GW_ZSKIP_NONE && status == 200 && !head_only && full_len && have_copy) {
        made = 1;
    } else if (zs == GW_ZSKIP_NONE && status == 200 && !head_only && full_len) {
        zs = gw_proxy__zadmit(z, p->zst.active, *p->zcharged, p->zweight[zc]);
        if (zs == GW_ZSKIP_NONE &&
            (oxz_get(ox) < 0 ||
             gw_zstream_new(z, zc, &p->zst.mem, p->zcharged, p->zweight[zc], &ox->zip) < 0))
            zs = GW_ZSKIP_BUSY;
        if (zs == GW_ZSKIP_NONE) {
            p->zst.active++;
            p->zst.streams[zc]++;
            gw_proxy__cbody_init(&ox->z->zsrc);
            ox->refill = gw_proxy__zrefill;
            made = 1;
        }
    }
    if (zs != GW_ZSKIP_NONE)
        p->zst.skipped[zs]++;
    /* the head says compressed when the body is, and on a HEAD or a 304 (no body to make) */
    int compressed = zs == GW_ZSKIP_NONE && whole && (made || head_only || status == 304);
    *n = gw_proxy__zhead(f, *n, cap, zc, compressed, etag, etag_cap);
    if (!compressed)
        return GW_ZC_NONE;
    *cl = -1;
    if (status == 304) /* its ETag and Vary are the compressed one's; it has no content */
        for (size_t i = 0; i < *n; i++)
            if (tok_eq(f[i].name, "content-encoding"))
                f[i] = f[--*n];
    return zc;
}

/* ---- the filter ----------------------------------------------------------------------------- */

static int compress_wants(const gw_cfg_route_t *r)
{
    return r->compress;
}

static int compress_head(ox_t *ox, gw_proxy_resp_t *r)
{
    if (gw_list_empty(&ox->subs))
        return 0;
    /* a background revalidation (never coalesced: its only subscriber) stores the identity
     * answer (the cache filter is before this one) and sends it nowhere: compressing it would
     * cost a compressor and count in the compression metrics for no client */
    if (GW_CONTAINER_OF(ox->subs.next, px_t, slink)->s->internal)
        return 0;
    gw_zcoding_t zc = GW_ZC_NONE;
    gw_zskip_t zs = compress_decide(ox, r->status, r->f, r->n, r->cl, &zc);
    /* Vary: Accept-Encoding also on what was sent as it is because of the client's
     * Accept-Encoding (or load), so that caches behind the client stay right */
    if (zs == GW_ZSKIP_NONE || zs == GW_ZSKIP_CLIENT || zs == GW_ZSKIP_BUSY ||
        zs == GW_ZSKIP_MEMORY) {
        char *etag = gw_proxy__resp_room(r, 256);
        r->n = gw_proxy__zhead(r->f, r->n, GW_PROXY_MAX_RESP_FIELDS, zc, zs == GW_ZSKIP_NONE, etag,
                               etag ? 256 : 0);
    }
    if (zs == GW_ZSKIP_NONE)
        r->cl = -1;
    r->coding = zc;
    return 0;
}

/* The origin's bytes go into the compressor, whose output goes into the store. */
static int compress_body(ox_t *ox, gw_rslice_t *b)
{
    if (!ox->zip)
        return 0;
    int rv = zfeed(ox, b->buf->data + b->off, b->len);
    return rv < 0 ? rv : GW_PROXY_F_TAKEN;
}

/* The end of the compressed stream (gzip: its CRC and length). */
static int compress_end(ox_t *ox)
{
    return ox->zip ? zfinish(ox) : 0;
}

/* Compressed bytes went out: the new exchange must remake them, piece by piece. */
static int compress_detach(ox_t *ox, px_t *px)
{
    if (px->resp < PX_RESP_HEAD || px->zc == GW_ZC_NONE)
        return 0;
    if (!ox->zrecord)
        return GW_E_INVAL; /* the pieces were not kept: the same bytes cannot be made again */
    gw_proxy__pxx_t *x = gw_proxy__px_x(px);
    return x ? gw_zchunks_copy(&x->zrep, &ox->z->zchunks) : GW_E_NOMEM;
}

static void compress_release(ox_t *ox)
{
    zip_end(ox);
    if (!ox->z)
        return;
    gw_proxy__cbody_free(&ox->z->zsrc);
    gw_zchunks_free(&ox->z->zchunks);
    gw_free(ox->z->zpend);
    gw_free(ox->z);
    ox->z = NULL;
}

const gw_proxy_filter_t gw_proxy__filter_compress = {
    .name = "compress",
    .wants = compress_wants,
    .on_head = compress_head,
    .on_body = compress_body,
    .on_end = compress_end,
    .on_detach = compress_detach,
    .release = compress_release,
};
