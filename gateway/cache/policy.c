/* cache/policy.c — RFC 9111 (HTTP caching, as a shared cache) and RFC 5861 (stale answers) as
 * pure functions over a request head and a response head. Times are seconds since the epoch,
 * passed in: nothing here reads a clock. Where the gateway is stricter than the RFC, the
 * comment says so. */
#include <stdio.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "common/err.h"
#include "http/http.h"

static int name_is(gw_slice_t name, const char *lit)
{
    return gw_slice_eq_nocase(name, gw_slice_str(lit));
}

static int has_field(const gw_field_t *f, size_t n, const char *name)
{
    gw_slice_t v;
    return gw_cache__field(f, n, name, &v);
}

/* The first field line named name as an HTTP-date: 0, or -1 (absent or invalid). */
static int field_date(const gw_field_t *f, size_t n, const char *name, int64_t *t)
{
    gw_slice_t v;
    if (!gw_cache__field(f, n, name, &v))
        return -1;
    return gw_http_date_parse(v, t);
}

static uint32_t cap32(int64_t v)
{
    if (v <= 0)
        return 0;
    return v > (int64_t)GW_HTTP_DELTA_MAX ? GW_HTTP_DELTA_MAX : (uint32_t)v;
}

const char *gw_cache_nostore_str(gw_cache_nostore_t w)
{
    static const char *const names[] = {
        [GW_CACHE_STORE] = "store",
        [GW_CACHE_NS_METHOD] = "method",
        [GW_CACHE_NS_STATUS] = "status",
        [GW_CACHE_NS_PARTIAL] = "partial",
        [GW_CACHE_NS_NO_STORE] = "no-store",
        [GW_CACHE_NS_PRIVATE] = "private",
        [GW_CACHE_NS_SET_COOKIE] = "set-cookie",
        [GW_CACHE_NS_AUTH] = "auth",
        [GW_CACHE_NS_VARY_STAR] = "vary-star",
        [GW_CACHE_NS_FRESHNESS] = "freshness",
    };
    return (unsigned)w < sizeof(names) / sizeof(names[0]) ? names[w] : "?";
}

int gw_cache_status_heuristic(unsigned st)
{
    /* RFC 9110 §15.1 */
    switch (st) {
    case 200:
    case 203:
    case 204:
    case 206:
    case 300:
    case 301:
    case 308:
    case 404:
    case 405:
    case 410:
    case 414:
    case 501:
        return 1;
    default:
        return 0;
    }
}

/* The statuses whose semantics the gateway knows (RFC 9111 §5.2.2.3 must-understand asks). */
static int status_understood(unsigned st)
{
    return gw_cache_status_heuristic(st) || st == 302 || st == 303 || st == 307 ||
           (st >= 400 && st <= 417) || st == 421 || st == 422 || st == 426 || st == 429 ||
           (st >= 500 && st <= 505);
}

static int vary_star(const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!name_is(f[i].name, "vary"))
            continue;
        gw_http_list_t l = gw_http_list(f[i].value, ',', 0);
        gw_slice_t d;
        while (gw_http_list_next(&l, &d))
            if (gw_slice_eq(d, GW_SLICE_LIT("*")))
                return 1;
    }
    return 0;
}

/* §3.5; a Cookie counts as Authorization, as for coalescing: origins personalise by cookie
 * without saying Vary: Cookie. rs: the answer's directives. */
static int for_credentials(const gw_cache_req_t *req, const gw_http_cc_t *rs)
{
    return (has_field(req->fields, req->nfields, "authorization") ||
            has_field(req->fields, req->nfields, "cookie")) &&
           !(rs->flags & (GW_HTTP_CC_PUBLIC | GW_HTTP_CC_S_MAXAGE | GW_HTTP_CC_MUST_REVALIDATE));
}

int gw_cache_for_credentials(const gw_cache_req_t *req, const gw_cache_resp_t *resp)
{
    gw_http_cc_t rs;
    gw_http_cc_fields(&rs, resp->fields, resp->nfields);
    return for_credentials(req, &rs);
}

gw_cache_nostore_t gw_cache_storable(const gw_cache_policy_t *pol, const gw_cache_req_t *req,
                                     const gw_cache_resp_t *resp)
{
    const gw_field_t *f = resp->fields;
    size_t n = resp->nfields;
    unsigned st = resp->status;
    /* a HEAD's answer has no body to store; a stored GET answers HEADs (§4) */
    if (!gw_slice_eq(req->method, GW_SLICE_LIT("GET")))
        return GW_CACHE_NS_METHOD;
    /* §3.4: only complete answers are stored here. Content-Range means something in a 206
     * and a 416 only (RFC 9110 §14.4): a 200 carrying one is complete, the field stored */
    if (st == 206 || st == 416)
        return GW_CACHE_NS_PARTIAL;
    if (st < 200 || st == 304 || st > 599)
        return GW_CACHE_NS_STATUS; /* §3: final; a 304 only updates (§4.3.4) */
    gw_http_cc_t rq, rs;
    gw_http_cc_fields(&rq, req->fields, req->nfields);
    gw_http_cc_fields(&rs, f, n);
    /* §5.2.2.3: must-understand limits storing to the statuses the cache knows, and a cache
     * that knows the status ignores the answer's no-store */
    int understood = (rs.flags & GW_HTTP_CC_MUST_UNDERSTAND) && status_understood(st);
    if ((rq.flags & GW_HTTP_CC_NO_STORE) || ((rs.flags & GW_HTTP_CC_NO_STORE) && !understood))
        return GW_CACHE_NS_NO_STORE; /* §5.2.1.5, §5.2.2.5 */
    if (rs.flags & GW_HTTP_CC_PRIVATE)
        return GW_CACHE_NS_PRIVATE; /* §5.2.2.7: a shared cache; the qualified form too */
    if ((rs.flags & GW_HTTP_CC_MUST_UNDERSTAND) && !understood)
        return GW_CACHE_NS_STATUS;
    if (has_field(f, n, "set-cookie"))
        return GW_CACHE_NS_SET_COOKIE; /* stricter than §7.3: never shared */
    if (vary_star(f, n))
        return GW_CACHE_NS_VARY_STAR; /* §4.1 */
    if (for_credentials(req, &rs))
        return GW_CACHE_NS_AUTH; /* §3.5 */
    /* §3: explicit freshness (the lifetime may be 0: the answer is then stored stale, for
     * revalidation), or a heuristic one where allowed (§4.2.2) */
    if (rs.flags & (GW_HTTP_CC_MAX_AGE | GW_HTTP_CC_S_MAXAGE) || has_field(f, n, "expires"))
        return GW_CACHE_STORE;
    int64_t lm;
    if (pol->heuristic && (gw_cache_status_heuristic(st) || (rs.flags & GW_HTTP_CC_PUBLIC)) &&
        field_date(f, n, "last-modified", &lm) == 0)
        return GW_CACHE_STORE; /* §4.2.2: heuristic freshness, only from Last-Modified */
    return GW_CACHE_NS_FRESHNESS;
}

/* ---- freshness and age ---------------------------------------------------------------------- */

uint32_t gw_cache_lifetime(const gw_cache_policy_t *pol, const gw_cache_resp_t *resp,
                           int64_t response_time, int *heuristic)
{
    const gw_field_t *f = resp->fields;
    size_t n = resp->nfields;
    gw_http_cc_t cc;
    gw_http_cc_fields(&cc, f, n);
    if (heuristic)
        *heuristic = 0;
    /* §4.2.1: s-maxage (a shared cache) before max-age; a malformed or duplicated one with
     * another value makes the answer stale */
    if (cc.flags & GW_HTTP_CC_S_MAXAGE)
        return (cc.bad & GW_HTTP_CC_S_MAXAGE) ? 0 : cc.s_maxage;
    if (cc.flags & GW_HTTP_CC_MAX_AGE)
        return (cc.bad & GW_HTTP_CC_MAX_AGE) ? 0 : cc.max_age;
    int64_t date, t;
    if (field_date(f, n, "date", &date) < 0)
        date = response_time; /* RFC 9110 §6.6.1: a recipient dates what has no Date */
    gw_slice_t ev;
    if (gw_cache__field(f, n, "expires", &ev)) {
        /* §5.3: an invalid Expires ("0") is in the past */
        if (gw_http_date_parse(ev, &t) < 0)
            return 0;
        return cap32(t - date);
    }
    if (pol->heuristic &&
        (gw_cache_status_heuristic(resp->status) || (cc.flags & GW_HTTP_CC_PUBLIC)) &&
        field_date(f, n, "last-modified", &t) == 0 && t < date) {
        /* §4.2.2: "10% of the time since" Last-Modified, capped */
        uint64_t h = (uint64_t)(date - t) / 10;
        if (heuristic)
            *heuristic = 1;
        return h > GW_CACHE_HEURISTIC_MAX ? GW_CACHE_HEURISTIC_MAX : (uint32_t)h;
    }
    return 0;
}

void gw_cache_meta(const gw_cache_policy_t *pol, const gw_cache_resp_t *resp, int64_t request_time,
                   int64_t response_time, gw_cache_meta_t *m)
{
    const gw_field_t *f = resp->fields;
    size_t n = resp->nfields;
    gw_http_cc_t cc;
    gw_http_cc_fields(&cc, f, n);
    memset(m, 0, sizeof(*m));
    m->response_time = response_time;
    int heuristic;
    m->lifetime = gw_cache_lifetime(pol, resp, response_time, &heuristic);

    /* §4.2.3 */
    uint32_t age_value = 0;
    gw_slice_t av;
    if (gw_cache__field(f, n, "age", &av)) {
        /* §5.1: the first member of a list; an invalid value is ignored */
        gw_http_list_t l = gw_http_list(av, ',', 0);
        gw_slice_t first;
        if (!gw_http_list_next(&l, &first) || gw_http_delta_seconds(first, &age_value) < 0)
            age_value = 0;
    }
    int64_t date;
    if (field_date(f, n, "date", &date) < 0)
        date = response_time;
    int64_t apparent_age = response_time - date > 0 ? response_time - date : 0;
    int64_t response_delay = response_time - request_time > 0 ? response_time - request_time : 0;
    int64_t corrected_age_value = (int64_t)age_value + response_delay;
    m->initial_age = cap32(apparent_age > corrected_age_value ? apparent_age : corrected_age_value);

    /* §4.2.4: these forbid stale answers; s-maxage implies proxy-revalidate (§5.2.2.10) */
    uint32_t hard = GW_HTTP_CC_MUST_REVALIDATE | GW_HTTP_CC_PROXY_REVALIDATE | GW_HTTP_CC_NO_CACHE;
    if (cc.flags & GW_HTTP_CC_NO_CACHE)
        m->flags |= GW_CACHE_M_NO_CACHE;
    if (cc.flags & (hard | GW_HTTP_CC_S_MAXAGE))
        m->flags |= GW_CACHE_M_NO_STALE;
    if (heuristic)
        m->flags |= GW_CACHE_M_HEURISTIC;
    if (has_field(f, n, "etag") || has_field(f, n, "last-modified"))
        m->flags |= GW_CACHE_M_VALIDATOR;
    /* RFC 5861: the answer's own stale-while-revalidate / stale-if-error grant stale use even
     * with s-maxage (the origin said so of this answer); the configured defaults apply only
     * where no directive forbids stale answers; must-revalidate, proxy-revalidate and no-cache
     * forbid both */
    if (!(cc.flags & hard)) {
        int swr_ok = (cc.valid & GW_HTTP_CC_SWR) && !(cc.bad & GW_HTTP_CC_SWR);
        int sie_ok = (cc.valid & GW_HTTP_CC_SIE) && !(cc.bad & GW_HTTP_CC_SIE);
        int defaults = !(cc.flags & GW_HTTP_CC_S_MAXAGE);
        m->swr = swr_ok ? cc.swr : defaults ? pol->stale_while_revalidate : 0;
        m->sie = sie_ok ? cc.sie : defaults ? pol->stale_if_error : 0;
    }
}

uint32_t gw_cache_age(const gw_cache_meta_t *m, int64_t now)
{
    int64_t resident = now - m->response_time;
    return cap32((int64_t)m->initial_age + (resident > 0 ? resident : 0));
}

int gw_cache_fresh(const gw_cache_meta_t *m, int64_t now)
{
    return m->lifetime > gw_cache_age(m, now);
}

const char *gw_cache_use_str(gw_cache_use_t u)
{
    static const char *const names[] = {"fresh", "stale-while-revalidate", "revalidate",
                                        "unavailable"};
    return (unsigned)u < 4 ? names[u] : "?";
}

gw_cache_use_t gw_cache_use(const gw_cache_meta_t *m, const gw_cache_req_t *req, int64_t now)
{
    gw_http_cc_t rq;
    gw_http_cc_fields(&rq, req->fields, req->nfields);
    gw_cache_use_t need =
        (rq.flags & GW_HTTP_CC_ONLY_IF_CACHED) ? GW_CACHE_USE_UNAVAILABLE : GW_CACHE_USE_REVALIDATE;
    /* §5.4: Pragma no-cache counts only without Cache-Control */
    int pragma = !has_field(req->fields, req->nfields, "cache-control") &&
                 gw_http_pragma_no_cache(req->fields, req->nfields);
    if ((rq.flags & GW_HTTP_CC_NO_CACHE) || pragma)
        return need; /* §5.2.1.4 */
    if (m->flags & GW_CACHE_M_NO_CACHE)
        return need; /* §5.2.2.4 */
    uint32_t age = gw_cache_age(m, now);
    /* §5.2.1.1; max-age=0 always (an answer of age 0 is not older than 0 s, but a client
     * sends it to have the answer validated: browsers on reload, and the rule) */
    if ((rq.valid & GW_HTTP_CC_MAX_AGE) && (age > rq.max_age || rq.max_age == 0))
        return need;
    if (m->lifetime > age) {
        if ((rq.valid & GW_HTTP_CC_MIN_FRESH) && m->lifetime - age < rq.min_fresh)
            return need; /* §5.2.1.3 */
        return GW_CACHE_USE_FRESH;
    }
    uint32_t stale = age - m->lifetime;
    /* §5.2.1.2, never past must-revalidate, proxy-revalidate, s-maxage (§4.2.4) */
    if ((rq.valid & GW_HTTP_CC_MAX_STALE) && !(m->flags & GW_CACHE_M_NO_STALE) &&
        stale <= rq.max_stale)
        return GW_CACHE_USE_FRESH;
    if (m->swr && stale <= m->swr)
        return GW_CACHE_USE_STALE_SWR; /* RFC 5861 §3 */
    return need;
}

int gw_cache_stale_if_error(const gw_cache_meta_t *m, const gw_cache_req_t *req, unsigned status,
                            int64_t now)
{
    if (status != 0 && status != 500 && status != 502 && status != 503 && status != 504)
        return 0; /* RFC 5861 §4: "an error is any situation that would result in a 500, 502,
                     503, or 504" */
    gw_http_cc_t rq;
    gw_http_cc_fields(&rq, req->fields, req->nfields);
    if (rq.flags & GW_HTTP_CC_NO_CACHE)
        return 0; /* the client asked for a validated answer */
    uint32_t window = m->sie;
    /* the request's stale-if-error (RFC 5861 §4), unless the answer forbids stale use */
    if (!(m->flags & GW_CACHE_M_NO_STALE) && (rq.valid & GW_HTTP_CC_SIE) && rq.sie > window)
        window = rq.sie;
    uint32_t age = gw_cache_age(m, now);
    uint32_t stale = age > m->lifetime ? age - m->lifetime : 0;
    return window > 0 && stale <= window;
}

/* ---- conditional requests and ranges -------------------------------------------------------- */

const char *gw_cache_cond_str(gw_cache_cond_t c)
{
    static const char *const names[] = {"none", "not-modified", "failed", "forward"};
    return (unsigned)c < 4 ? names[c] : "?";
}

const char *gw_cache_range_str(gw_cache_range_t r)
{
    static const char *const names[] = {"none", "partial", "unsatisfiable", "forward"};
    return (unsigned)r < 4 ? names[r] : "?";
}

/* An entity-tag (RFC 9110 §8.8.3): optional "W/" then a quoted opaque-tag. The opaque part into
 * *opaque (with its quotes), *weak set: 1, or 0 when t is not one. */
static int etag_split(gw_slice_t t, gw_slice_t *opaque, int *weak)
{
    *weak = t.len >= 2 && t.base[0] == 'W' && t.base[1] == '/';
    if (*weak) {
        t.base += 2;
        t.len -= 2;
    }
    if (t.len < 2 || t.base[0] != '"' || t.base[t.len - 1] != '"')
        return 0;
    for (size_t i = 1; i + 1 < t.len; i++)
        if (t.base[i] == '"')
            return 0;
    *opaque = t;
    return 1;
}

/* §8.8.3.2: weak comparison (strong when strong is set: neither may be weak). */
static int etag_match(gw_slice_t a, gw_slice_t b, int strong)
{
    gw_slice_t oa, ob;
    int wa, wb;
    if (!etag_split(a, &oa, &wa) || !etag_split(b, &ob, &wb))
        return 0;
    if (strong && (wa || wb))
        return 0;
    return gw_slice_eq(oa, ob);
}

gw_cache_cond_t gw_cache_conditional(const gw_cache_req_t *req, const gw_cache_resp_t *stored)
{
    const gw_field_t *q = req->fields;
    size_t nq = req->nfields;
    if (!gw_slice_eq(req->method, GW_SLICE_LIT("GET")) &&
        !gw_slice_eq(req->method, GW_SLICE_LIT("HEAD")))
        return GW_CACHE_COND_FORWARD;
    /* RFC 9110 §13.2.2 steps 1-2; RFC 9111 §4.3.2: preconditions meant for the origin */
    if (has_field(q, nq, "if-match") || has_field(q, nq, "if-unmodified-since"))
        return GW_CACHE_COND_FORWARD;
    gw_slice_t etag;
    int have_etag = gw_cache__field(stored->fields, stored->nfields, "etag", &etag);
    int inm = 0, match = 0;
    for (size_t i = 0; i < nq; i++) {
        if (!name_is(q[i].name, "if-none-match"))
            continue;
        inm = 1; /* step 3 */
        gw_http_list_t l = gw_http_list(q[i].value, ',', GW_HTTP_LIST_F_QUOTED);
        gw_slice_t t;
        while (gw_http_list_next(&l, &t))
            if (gw_slice_eq(t, GW_SLICE_LIT("*")) || (have_etag && etag_match(t, etag, 0)))
                match = 1;
    }
    if (inm)
        return match ? GW_CACHE_COND_NOT_MODIFIED : GW_CACHE_COND_FAILED;
    int64_t ims, lm;
    if (field_date(q, nq, "if-modified-since", &ims) < 0)
        return GW_CACHE_COND_NONE; /* step 4: absent or not a date (§13.1.3: ignored) */
    if (field_date(stored->fields, stored->nfields, "last-modified", &lm) < 0 &&
        field_date(stored->fields, stored->nfields, "date", &lm) < 0)
        return GW_CACHE_COND_FAILED; /* nothing to compare: the whole answer */
    return lm <= ims ? GW_CACHE_COND_NOT_MODIFIED : GW_CACHE_COND_FAILED;
}

/* 1*DIGIT at *p (saturating): 1, or 0 when there is no digit. */
static int num(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *s = *p;
    uint64_t x = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        uint64_t d = (uint64_t)(**p - '0');
        x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        (*p)++;
    }
    *v = x;
    return *p > s;
}

/* §13.1.5: If-Range matches the stored answer (a strong ETag, or the Last-Modified date of a
 * strong validator: at least one second before Date, §8.8.2.2). */
static int if_range_ok(gw_slice_t v, const gw_cache_resp_t *st)
{
    gw_slice_t etag;
    if (v.len && (v.base[0] == '"' || v.base[0] == 'W'))
        return gw_cache__field(st->fields, st->nfields, "etag", &etag) && etag_match(v, etag, 1);
    int64_t d, lm, date;
    if (gw_http_date_parse(v, &d) < 0 ||
        field_date(st->fields, st->nfields, "last-modified", &lm) < 0 ||
        field_date(st->fields, st->nfields, "date", &date) < 0)
        return 0;
    return d == lm && date - lm >= 1;
}

gw_cache_range_t gw_cache_range(const gw_cache_req_t *req, const gw_cache_resp_t *stored,
                                uint64_t len, uint64_t *first, uint64_t *last)
{
    const gw_field_t *q = req->fields;
    size_t nq = req->nfields;
    gw_slice_t rv = {0}, ir;
    size_t nrange = 0;
    for (size_t i = 0; i < nq; i++)
        if (name_is(q[i].name, "range")) {
            rv = q[i].value;
            nrange++;
        }
    /* §14.2: GET only, and a Range of a 200; two Range lines are not one valid value */
    if (nrange != 1 || !gw_slice_eq(req->method, GW_SLICE_LIT("GET")) || stored->status != 200)
        return GW_CACHE_RANGE_NONE;
    if (gw_cache__field(q, nq, "if-range", &ir) && !if_range_ok(ir, stored))
        return GW_CACHE_RANGE_NONE; /* §13.1.5: the whole answer */
    /* §14.1.2: bytes=range-set, the unit case-insensitive */
    if (rv.len < 6 || !gw_mem_eq_nocase(rv.base, (const uint8_t *)"bytes=", 6))
        return GW_CACHE_RANGE_NONE;
    gw_http_list_t l = gw_http_list((gw_slice_t){rv.base + 6, rv.len - 6}, ',', 0);
    gw_slice_t spec;
    size_t count = 0;
    uint64_t a = 0, b = 0;
    int suffix = 0, open = 0;
    while (gw_http_list_next(&l, &spec)) {
        const uint8_t *p = spec.base, *end = spec.base + spec.len;
        uint64_t x = 0, y = 0;
        int sfx = 0, opn = 0;
        if (p < end && *p == '-') {
            p++;
            if (!num(&p, end, &x)) /* suffix-range = "-" suffix-length */
                return GW_CACHE_RANGE_NONE;
            sfx = 1;
        } else {
            if (!num(&p, end, &x) || p == end || *p++ != '-')
                return GW_CACHE_RANGE_NONE;
            if (p == end)
                opn = 1;
            else if (!num(&p, end, &y) || y < x)
                return GW_CACHE_RANGE_NONE; /* §14.1.1: last < first is invalid */
        }
        if (p != end)
            return GW_CACHE_RANGE_NONE;
        if (count++ == 0) {
            a = x;
            b = y;
            suffix = sfx;
            open = opn;
        }
    }
    if (count == 0)
        return GW_CACHE_RANGE_NONE;
    if (count > 1)
        return GW_CACHE_RANGE_FORWARD; /* multipart/byteranges: the origin's job */
    if (suffix) {
        if (a == 0 || len == 0)
            return GW_CACHE_RANGE_UNSATISFIABLE; /* §14.1.3 */
        *first = a >= len ? 0 : len - a;
        *last = len - 1;
        return GW_CACHE_RANGE_PARTIAL;
    }
    if (a >= len)
        return GW_CACHE_RANGE_UNSATISFIABLE; /* §14.1.1: first-pos past the end */
    *first = a;
    *last = open || b >= len ? len - 1 : b;
    return GW_CACHE_RANGE_PARTIAL;
}

size_t gw_cache_content_range(char *out, size_t cap, uint64_t first, uint64_t last, uint64_t len)
{
    int n = first > last ? snprintf(out, cap, "bytes */%llu", (unsigned long long)len)
                         : snprintf(out, cap, "bytes %llu-%llu/%llu", (unsigned long long)first,
                                    (unsigned long long)last, (unsigned long long)len);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

/* ---- 304 and invalidation ------------------------------------------------------------------ */

int gw_cache_field_stored(gw_slice_t name)
{
    /* §3.1: "Header fields that are specific to the proxy that a cache uses when forwarding a
     * request MUST NOT be stored" */
    static const char *const never[] = {"proxy-authenticate", "proxy-authentication-info",
                                        "proxy-authorization", "age"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (name_is(name, never[i]))
            return 0;
    return !gw_http_field_is_connection_specific(name); /* §3.1 */
}

int gw_cache_304_updates(gw_slice_t name)
{
    static const char *const keep[] = {"content-length", "content-encoding", "content-range",
                                       "vary"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (name_is(name, keep[i]))
            return 0;
    if (name.len >= 6 && gw_mem_eq_nocase(name.base, (const uint8_t *)"proxy-", 6))
        return 0; /* §3.1: the proxy's own (Proxy-Authenticate, Proxy-Authentication-Info) */
    return gw_cache_field_stored(name);
}

ssize_t gw_cache_merge_304(const gw_field_t *stored, size_t ns, const gw_field_t *upd, size_t nu,
                           gw_field_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < ns; i++) {
        int replaced = 0;
        for (size_t j = 0; j < nu && !replaced; j++)
            replaced = gw_slice_eq_nocase(stored[i].name, upd[j].name) &&
                       gw_cache_304_updates(upd[j].name);
        if (replaced)
            continue;
        if (k == cap)
            return -1;
        out[k++] = stored[i];
    }
    for (size_t j = 0; j < nu; j++) {
        if (!gw_cache_304_updates(upd[j].name))
            continue;
        if (k == cap)
            return -1;
        out[k++] = upd[j];
    }
    return (ssize_t)k;
}

/* A Location or Content-Location value v naming the origin of req: its path (without the
 * fragment) into *path: 1, or 0 (another origin, a relative path, not a URL we read). */
static int same_origin_path(const gw_cache_req_t *req, gw_slice_t v, gw_slice_t *path)
{
    const uint8_t *hash = v.len ? memchr(v.base, '#', v.len) : NULL;
    if (hash)
        v.len = (size_t)(hash - v.base);
    if (v.len && v.base[0] == '/') {
        if (v.len >= 2 && v.base[1] == '/')
            return 0; /* a network-path reference: another authority, read no further */
        *path = v;
        return 1;
    }
    /* an absolute URL; a relative path is left alone (the RFC says MAY, and resolving dot
     * segments against the target is not ours to guess) */
    gw_cache_url_t u;
    if (gw_cache_url_parse(v, &u) < 0 || !gw_slice_eq_nocase(u.scheme, req->scheme))
        return 0;
    /* the same origin as the key compares it: a host in any case, an IPv6 address in any
     * spelling ([::1], [0::1]), the default port written or not */
    gw_http_authority_t x, y;
    if (gw_http_authority(u.scheme, u.authority, &x) < 0 ||
        gw_http_authority(req->scheme, req->authority, &y) < 0 || !gw_http_authority_eq(&x, &y))
        return 0;
    *path = u.path;
    return 1;
}

size_t gw_cache_invalidation(const gw_cache_req_t *req, const gw_cache_resp_t *resp,
                             gw_cache_url_t out[3])
{
    if (gw_http_method_flags(req->method) & GW_HTTP_METHOD_F_SAFE)
        return 0;
    if (resp->status < 200 || resp->status > 399)
        return 0; /* §4.4: "a non-error status code" */
    size_t k = 0;
    out[k++] = (gw_cache_url_t){req->scheme, req->authority, req->path};
    static const char *const names[] = {"location", "content-location"};
    for (size_t i = 0; i < 2; i++) {
        gw_slice_t v, path;
        if (gw_cache__field(resp->fields, resp->nfields, names[i], &v) &&
            same_origin_path(req, v, &path))
            out[k++] = (gw_cache_url_t){req->scheme, req->authority, path};
    }
    return k;
}

/* ---- Cache-Status (RFC 9211) ----------------------------------------------------------------- */

int64_t gw_cache_ttl(const gw_cache_meta_t *m, int64_t now)
{
    return (int64_t)m->lifetime - (int64_t)gw_cache_age(m, now);
}

size_t gw_cache_status_fmt(const gw_cache_status_t *st, char *out, size_t cap)
{
    /* §2: cache name, then parameters; fwd and detail are tokens here (RFC 8941 §3.3.4) */
    size_t at = 0;
    int n = snprintf(out, cap, "h2gate");
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n >= 0 && (size_t)n < cap - at)                                                        \
            at += (size_t)n;                                                                       \
        else                                                                                       \
            return 0;                                                                              \
        n = snprintf(out + at, cap - at, __VA_ARGS__);                                             \
    } while (0)
    if (st->hit)
        ADD("; hit");
    if (st->fwd)
        ADD("; fwd=%s", st->fwd);
    if (st->fwd_status)
        ADD("; fwd-status=%u", st->fwd_status);
    if (st->has_ttl)
        ADD("; ttl=%lld", (long long)st->ttl);
    if (st->stored)
        ADD("; stored");
    if (st->collapsed)
        ADD("; collapsed");
    if (st->detail)
        ADD("; detail=%s", st->detail);
    ADD("%s", "");
#undef ADD
    return at;
}
