/* proxy/exchange.c — client streams ↔ origin exchanges: request translation, response
 * translation, hop-by-hop flow control with bounded buffers, gateway-made error answers, and
 * coalescing of identical in-flight requests.
 *
 * Two objects: px_t is the proxy's state of one client stream; ox_t is one origin exchange and
 * the streams it serves (its subscribers). Without coalescing an ox_t has one subscriber, which
 * also owns the request body. With coalescing, identical GET/HEAD requests that arrive before
 * the response head join the in-flight ox_t; at the head the proxy decides whether the response
 * may serve them all (the rules and their RFC 9111 review are in coalesce.c). The body is held
 * once, in the ox_t's store, by reference; each subscriber has a cursor into it and is handed
 * bytes as its client takes them (see "flow control" below). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "h2/priority.h"
#include "proxy/proxy_internal.h"

typedef struct ox ox_t;

typedef struct {
    gw_proxy_t *p;
    gw_cstream_t *s;
    const gw_cfg_route_t *route;
    ox_t *ox;               /* the exchange serving this stream, NULL once it ended */
    gw_list_t slink;        /* in ox->subs */
    gw_list_t ulink;        /* in p->uploading while the request body is still coming */
    uint64_t body_since;    /* loop ms of the last request body progress (read or credited) */
    gw_rbuf_t *acc;         /* small request body pieces gathered for one write (acc_flush) */
    gw_list_t alink;        /* in p->acc_pending while acc holds bytes */
    gw_req_head_t head;     /* shallow copy: slices valid until the stream closes */
    uint64_t body_inflight; /* request body bytes given to the back, not yet credited */
    int64_t req_cl;         /* request Content-Length, -1 unknown */
    uint64_t req_sent;      /* request body bytes received from the client */
    uint64_t delivered;     /* cursor: response body bytes handed to the client stream (after
                               a detach, bytes of the new response below it are not resent) */
    int64_t resp_cl;        /* response content-length sent, -1 none */
    unsigned status;        /* status of the response head sent, 0 before */
    unsigned resp_started : 1;
    unsigned resp_done : 1;
    unsigned req_done : 1; /* the client ended its request body */
    unsigned closed : 1;   /* the front is done with the stream: no more ops */
    unsigned reset : 1;
    unsigned follower : 1; /* joined another stream's exchange */
    const char *proto;
    uint64_t started_ms;
    char method[16];
    char path[160]; /* for the log, truncated */
} px_t;

struct ox {
    gw_proxy_t *p;
    const gw_cfg_route_t *route;
    gw_back_exch_t *bx; /* NULL once ended */
    gw_list_t subs;     /* px_t */
    size_t nsubs;
    px_t *owner;     /* the stream whose request (and body) this is */
    gw_list_t klink; /* in p->inflight while others may join */
    char *key;       /* coalescing key, NULL when not coalescible */
    size_t keylen;
    uint64_t hash;
    gw_list_t plink; /* in p->paused */
    uint64_t paused_since;
    gw_proxy__cbody_t body; /* the response body from the slowest subscriber's cursor on */
    gw_field_t *trailers;   /* translated response trailers (one block), sent after the body */
    size_t ntrailers;
    unsigned paused : 1;
    unsigned indexed : 1;
    unsigned complete : 1;   /* the origin response ended: subscribers finish at the body's end */
    unsigned pumping : 1;    /* inside pump(): the last sub_remove leaves freeing to it */
    unsigned authorized : 1; /* the requests carry Authorization (coalesce_private only) */
};

/* Per body write to the origin: what to credit back when it is written. */
typedef struct {
    px_t *px;
    size_t len;
} wctx_t;

/* ---- lifetime -------------------------------------------------------------------------------- */

static void on_sweep(uv_timer_t *t);

int gw_proxy_new(uv_loop_t *loop, const gw_config_t *cfg, gw_proxy_t **out)
{
    gw_proxy_t *p = gw_calloc(1, sizeof(*p));
    if (!p)
        return GW_E_NOMEM;
    p->cfg = cfg;
    p->loop = loop;
    gw_list_init(&p->paused);
    gw_list_init(&p->inflight);
    int rv = gw_back_new(loop, cfg, &p->back);
    if (rv < 0) {
        gw_free(p);
        return rv;
    }
    /* RFC 9218 urgency first, arrival order within one urgency (so FIFO when nobody signals) */
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        gw_back_set_queue_order(p->back, i, gw_back_queue_urgency);
    uv_timer_init(loop, &p->sweep);
    p->sweep.data = p;
    p->sweep_open = 1;
    gw_list_init(&p->uploading);
    uv_timer_init(loop, &p->upload_sweep);
    p->upload_sweep.data = p;
    p->upload_open = 1;
    gw_list_init(&p->acc_pending);
    uv_prepare_init(loop, &p->acc_flush);
    p->acc_flush.data = p;
    p->acc_open = 1;
    *out = p;
    return 0;
}

void gw_proxy_close(gw_proxy_t *p)
{
    if (!p)
        return;
    if (p->back) {
        gw_back_t *b = p->back;
        p->back = NULL;
        gw_back_del(b); /* live exchanges fail now: their callbacks answer or reset */
    }
    if (p->sweep_open) {
        p->sweep_open = 0;
        uv_close((uv_handle_t *)&p->sweep, NULL);
    }
    if (p->upload_open) {
        p->upload_open = 0;
        uv_close((uv_handle_t *)&p->upload_sweep, NULL);
    }
    if (p->acc_open) {
        p->acc_open = 0;
        uv_close((uv_handle_t *)&p->acc_flush, NULL);
    }
}

/* Freelists of fixed-size objects (STYLE.md: connections, streams, exchanges come from
 * freelists): malloc and free were the largest part of the proxy's per-request cost. Up to 512
 * of each kind are kept (~260 KiB): a worker with 512 streams in flight (h2load -c 32 -m 16)
 * frees that many within a few loop turns and needs them again right after. */
#define PROXY_FREE_KEEP 512

static void *obj_get(void **head, size_t *n, size_t size)
{
    void *o = *head;
    if (!o)
        return gw_calloc(1, size);
    memcpy(head, o, sizeof(void *));
    (*n)--;
    memset(o, 0, size);
    return o;
}

static void obj_put(void **head, size_t *n, void *o)
{
    if (*n >= PROXY_FREE_KEEP) {
        gw_free(o);
        return;
    }
    memcpy(o, head, sizeof(void *));
    *head = o;
    (*n)++;
}

static void obj_drain(void **head, size_t *n)
{
    while (*head) {
        void *o = *head;
        memcpy(head, o, sizeof(void *));
        gw_free(o);
    }
    *n = 0;
}

void gw_proxy_del(gw_proxy_t *p)
{
    if (!p)
        return;
    GW_ASSERT(!p->back && !p->sweep_open && !p->upload_open && !p->acc_open);
    obj_drain(&p->px_free, &p->px_nfree);
    obj_drain(&p->ox_free, &p->ox_nfree);
    gw_free(p);
}

void gw_proxy_set_rate_table(gw_proxy_t *p, gw_bucket_table_t *t)
{
    p->rates = t;
}

void gw_proxy_stats(const gw_proxy_t *p, gw_proxy_stats_t *out)
{
    *out = p->stats;
}

/* ---- request translation (RFC 9113 §8.3, RFC 9110 §7.6) ------------------------------------ */

/* Length first: most names differ there (strlen of a literal folds once inlined). */
static inline int name_is(gw_slice_t name, const char *lit)
{
    size_t n = strlen(lit);
    return name.len == n && gw_slice_eq_nocase(name, (gw_slice_t){(const uint8_t *)lit, n});
}

/* Connection-specific fields never forwarded (RFC 9110 §7.6.1, RFC 9113 §8.2.2). host and
 * content-length are rebuilt by the back from :authority and the body framing; expect is
 * answered by the front. */
static int hop_by_hop(gw_slice_t n)
{
    /* their lengths: 2, 7, 10, 14, 16, 17 (most names are none of these) */
    if (n.len != 2 && n.len != 7 && n.len != 10 && n.len != 14 && n.len != 16 && n.len != 17)
        return 0;
    static const gw_slice_t hop[] = {
        GW_SLICE_LIT("connection"),       GW_SLICE_LIT("keep-alive"),
        GW_SLICE_LIT("proxy-connection"), GW_SLICE_LIT("transfer-encoding"),
        GW_SLICE_LIT("upgrade"),          GW_SLICE_LIT("te"),
        GW_SLICE_LIT("http2-settings"),   GW_SLICE_LIT("content-length")};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (n.len == hop[i].len && gw_slice_eq_nocase(n, hop[i]))
            return 1;
    return 0;
}

/* The tokens of a message's Connection fields (RFC 9110 §7.6.1), split once per message so
 * that each field name is checked against a short list, not by re-parsing every Connection
 * value per field. More tokens than fit: `overflow` says to fall back to re-parsing. */
#define CONN_TOKENS 16
typedef struct {
    gw_slice_t tok[CONN_TOKENS];
    size_t n;
    int overflow;
    uint64_t lens;       /* bit len % 64 set for each token: most names are ruled out by it */
    const gw_field_t *f; /* the message's fields, for the fallback */
    size_t fn;
} conn_toks_t;

/* The next token of a comma-separated list at *p (before e), skipping separators and
 * whitespace; 0 at the end. */
static int next_token(const uint8_t **p, const uint8_t *e, gw_slice_t *tok)
{
    const uint8_t *q = *p;
    while (q < e && (*q == ' ' || *q == '\t' || *q == ','))
        q++;
    const uint8_t *b = q;
    while (q < e && *q != ',' && *q != ' ' && *q != '\t')
        q++;
    *p = q;
    *tok = (gw_slice_t){b, (size_t)(q - b)};
    return q > b;
}

/* Split the message's Connection fields into t; non-zero when it has any (one pass over the
 * fields for both questions). */
static int conn_toks(conn_toks_t *t, const gw_field_t *f, size_t n)
{
    int any = 0;
    t->n = 0;
    t->overflow = 0;
    t->lens = 0;
    t->f = f;
    t->fn = n;
    for (size_t i = 0; i < n; i++) {
        if (!name_is(f[i].name, "connection"))
            continue;
        any = 1;
        const uint8_t *p = f[i].value.base, *e = p + f[i].value.len;
        gw_slice_t tok;
        while (next_token(&p, e, &tok)) {
            if (t->n == CONN_TOKENS) {
                t->overflow = 1;
                return 1;
            }
            t->tok[t->n++] = tok;
            t->lens |= 1ull << (tok.len % 64);
        }
    }
    return any;
}

/* named_by_connection() past the length filter: compare with the tokens, or re-parse the
 * Connection fields when they had more tokens than fit. */
static int named_by_connection_slow(const conn_toks_t *t, gw_slice_t name)
{
    if (!t->overflow) {
        for (size_t i = 0; i < t->n; i++)
            if (t->tok[i].len == name.len && gw_slice_eq_nocase(t->tok[i], name))
                return 1;
        return 0;
    }
    for (size_t i = 0; i < t->fn; i++) {
        if (!name_is(t->f[i].name, "connection"))
            continue;
        const uint8_t *p = t->f[i].value.base, *e = p + t->f[i].value.len;
        gw_slice_t tok;
        while (next_token(&p, e, &tok))
            if (gw_slice_eq_nocase(tok, name))
                return 1;
    }
    return 0;
}

/* Whether `name` is one of the comma-separated tokens of any Connection field. Inline: most
 * names are ruled out by their length. */
static inline int named_by_connection(const conn_toks_t *t, gw_slice_t name)
{
    if (!t->overflow && !(t->lens & (1ull << (name.len % 64))))
        return 0;
    return named_by_connection_slow(t, name);
}

/* Scratch space for the translated fields: one block, sized before anything is written, so
 * the slices into it never move. */
#define XLATE_FIELDS 32
#define XLATE_BYTES 4096
typedef struct {
    gw_field_t *f;
    size_t n, cap;
    char *buf;
    size_t used, size;
    /* a usual request fits here, on the stack: no allocation per request */
    gw_field_t fst[XLATE_FIELDS];
    char bst[XLATE_BYTES];
} xlate_t;

static gw_slice_t put(xlate_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gw_slice_t put(xlate_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(x->buf + x->used, x->size - x->used, fmt, ap);
    va_end(ap);
    GW_ASSERT(n >= 0 && (size_t)n < x->size - x->used);
    gw_slice_t s = {(const uint8_t *)x->buf + x->used, (size_t)n};
    x->used += (size_t)n + 1;
    return s;
}

/* s into dst as a C string, cut to fit (for the access log). */
static void copy_cstr(char *dst, size_t size, gw_slice_t s)
{
    size_t n = s.len < size - 1 ? s.len : size - 1;
    if (n)
        memcpy(dst, s.base, n);
    dst[n] = 0;
}

/* put() without printf, for the fields of every request: the parts end to end. */
static gw_slice_t cat(xlate_t *x, const gw_slice_t *parts, size_t n)
{
    char *d = x->buf + x->used;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        GW_ASSERT(len + parts[i].len < x->size - x->used);
        if (parts[i].len)
            memcpy(d + len, parts[i].base, parts[i].len);
        len += parts[i].len;
    }
    d[len] = 0;
    x->used += len + 1;
    return (gw_slice_t){(const uint8_t *)d, len};
}

static void add(xlate_t *x, gw_slice_t name, gw_slice_t value)
{
    GW_ASSERT(x->n < x->cap);
    x->f[x->n++] = (gw_field_t){name, value};
}

/* Every value of fields named `name`, joined with sep, or {NULL,0} when there is none. */
static gw_slice_t join(xlate_t *x, const gw_req_head_t *h, gw_slice_t name, gw_slice_t sep)
{
    size_t start = x->used, seen = 0;
    for (size_t i = 0; i < h->fields_len; i++) {
        if (!gw_slice_eq_nocase(h->fields[i].name, name))
            continue;
        if (seen++) {
            memcpy(x->buf + x->used, sep.base, sep.len);
            x->used += sep.len;
        }
        memcpy(x->buf + x->used, h->fields[i].value.base, h->fields[i].value.len);
        x->used += h->fields[i].value.len;
    }
    if (!seen)
        return (gw_slice_t){0};
    gw_slice_t s = {(const uint8_t *)x->buf + start, x->used - start};
    x->buf[x->used++] = 0;
    return s;
}

static int tchar(uint8_t c)
{
    return gw_slice_is_token((gw_slice_t){&c, 1});
}

/* Whether v is a well-formed RFC 7239 §4 Forwarded value: 1#forwarded-element, each a list of
 * token "=" (token / quoted-string) pairs. A client's value that is not (an open quote above
 * all) could swallow the element we append (issue 18.3): such values are not forwarded. */
static int forwarded_ok(gw_slice_t v)
{
    const uint8_t *p = v.base, *e = p + v.len;
    while (p < e) {
        if (*p == ' ' || *p == '\t' || *p == ',' || *p == ';') {
            p++; /* OWS, empty list elements and pairs (RFC 9110 §5.6.1) */
            continue;
        }
        const uint8_t *t = p;
        while (p < e && tchar(*p))
            p++;
        if (p == t || p == e || *p != '=')
            return 0;
        p++;
        if (p < e && *p == '"') {
            /* RFC 9110 §5.6.4: qdtext / quoted-pair, no controls but HTAB */
            for (p++;; p++) {
                if (p == e)
                    return 0;
                if (*p == '"')
                    break;
                if (*p == '\\' && ++p == e)
                    return 0;
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                    return 0;
            }
            p++;
        } else {
            t = p;
            while (p < e && tchar(*p))
                p++;
            if (p == t)
                return 0;
        }
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p < e && *p != ',' && *p != ';')
            return 0;
    }
    return 1;
}

/* v as an RFC 7239 §4 / RFC 9110 §5.6.4 quoted-string ("..." with '"' and '\\' escaped), in x. */
static gw_slice_t quoted(xlate_t *x, gw_slice_t v)
{
    char *d = x->buf + x->used;
    size_t k = 0;
    GW_ASSERT(2 * v.len + 3 <= x->size - x->used);
    d[k++] = '"';
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] == '"' || v.base[i] == '\\')
            d[k++] = '\\';
        d[k++] = (char)v.base[i];
    }
    d[k++] = '"';
    d[k] = 0;
    x->used += k + 1;
    return (gw_slice_t){(const uint8_t *)d, k};
}

/* Build the origin request. Returns 0, GW_E_PARSE (malformed: host disagrees with
 * :authority, RFC 9113 §8.3.1; no authority; an authority with bytes outside RFC 3986 §3.2),
 * GW_E_NOMEM. */
/* RFC 9218 urgency of the request, for the origin queue (issue 7: waiting exchanges leave the
 * queue most urgent first). The front's view wins: PRIORITY_UPDATE may have changed it. */
static uint8_t req_urgency(gw_cstream_t *s, const gw_req_head_t *h)
{
    if (s->ops->urgency) {
        int u = s->ops->urgency(s);
        if (u >= 0 && u <= 7)
            return (uint8_t)u;
    }
    uint8_t u = GW_H2_PRIO_DEFAULT_URGENCY, inc;
    for (size_t i = 0; i < h->fields_len; i++)
        if (name_is(h->fields[i].name, "priority")) /* §5: the last valid member wins */
            gw_h2_priority_parse(h->fields[i].value, &u, &inc);
    return u;
}

static int translate(px_t *px, const gw_req_head_t *h, xlate_t *x, gw_back_req_t *req)
{
    const gw_cfg_route_t *r = px->route;
    gw_cstream_t *s = px->s;
    size_t bytes = 512 + h->authority.len + h->path.len;
    for (size_t i = 0; i < h->fields_len; i++)
        bytes += h->fields[i].name.len + h->fields[i].value.len + 4;
    x->cap = h->fields_len + 4;
    x->size = bytes * 2;
    x->f = x->cap <= XLATE_FIELDS ? x->fst : gw_malloc(x->cap * sizeof(*x->f));
    x->buf = x->size <= XLATE_BYTES ? x->bst : gw_malloc(x->size);
    if (!x->f || !x->buf)
        return GW_E_NOMEM;
    int h2 = !strcmp(h->proto, "h2");
    conn_toks_t toks;
    int conn = conn_toks(&toks, h->fields, h->fields_len);
    gw_slice_t authority = h->authority;
    for (size_t i = 0; i < h->fields_len; i++) {
        const gw_field_t *f = &h->fields[i];
        if (name_is(f->name, "host")) {
            if (authority.len == 0)
                authority = f->value;
            else if (h2 && !gw_slice_eq_nocase(f->value, authority))
                return GW_E_PARSE;
            continue;
        }
        if (hop_by_hop(f->name) || name_is(f->name, "expect") ||
            (conn && named_by_connection(&toks, f->name)))
            continue;
        if (h2 && name_is(f->name, "cookie"))
            continue; /* joined below: RFC 9113 §8.2.3 */
        if ((r->add_x_forwarded &&
             (name_is(f->name, "x-forwarded-for") || name_is(f->name, "x-forwarded-proto"))) ||
            (r->add_forwarded && name_is(f->name, "forwarded")) ||
            (r->add_via && name_is(f->name, "via")))
            continue; /* rebuilt below with ours appended */
        add(x, f->name, f->value);
    }
    if (h2) {
        gw_slice_t c = join(x, h, GW_SLICE_LIT("cookie"), GW_SLICE_LIT("; "));
        if (c.base)
            add(x, GW_SLICE_LIT("cookie"), c);
    }
    /* Issue 18.3: the authority becomes Host and Forwarded host=: RFC 3986 §3.2 characters
     * only (the fronts check :authority and Host; an HTTP/2 host field standing in for a
     * missing :authority is checked here) */
    if (!gw_slice_is_authority(authority))
        return GW_E_PARSE;
    const char *ip = s->peer_ip ? s->peer_ip : "unknown";
    /* the scheme the client used is the listener's, whatever :scheme says (DESIGN.md: what the
     * origin is told about the client comes from the connection) */
    gw_slice_t proto = s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
    if (r->add_x_forwarded) {
        gw_slice_t prev = join(x, h, GW_SLICE_LIT("x-forwarded-for"), GW_SLICE_LIT(", "));
        gw_slice_t xff[] = {prev, GW_SLICE_LIT(", "), gw_slice_str(ip)};
        add(x, GW_SLICE_LIT("X-Forwarded-For"), prev.base ? cat(x, xff, 3) : cat(x, xff + 2, 1));
        add(x, GW_SLICE_LIT("X-Forwarded-Proto"), proto);
    }
    if (r->add_forwarded) {
        /* RFC 7239 §6: an IPv6 node is quoted and bracketed; §4: host is a quoted-string, its
         * '"' and '\\' escaped (none pass the authority check: kept so that the value can never
         * end the string early) */
        int v6 = strchr(ip, ':') != NULL;
        int prev_ok = 1;
        for (size_t i = 0; i < h->fields_len && prev_ok; i++)
            if (name_is(h->fields[i].name, "forwarded"))
                prev_ok = forwarded_ok(h->fields[i].value);
        gw_slice_t prev =
            prev_ok ? join(x, h, GW_SLICE_LIT("forwarded"), GW_SLICE_LIT(", ")) : (gw_slice_t){0};
        gw_slice_t host = quoted(x, authority);
        add(x, GW_SLICE_LIT("Forwarded"),
            put(x, "%.*s%sfor=%s%s%s%s;proto=%.*s;host=%.*s", (int)prev.len,
                prev.base ? (const char *)prev.base : "", prev.base ? ", " : "", v6 ? "\"[" : "",
                ip, v6 ? "]" : "", v6 ? "\"" : "", (int)proto.len, proto.base, (int)host.len,
                host.base));
    }
    if (r->add_via) {
        /* RFC 9110 §7.6.3: received-protocol received-by */
        gw_slice_t prev = join(x, h, GW_SLICE_LIT("via"), GW_SLICE_LIT(", "));
        gw_slice_t via[] = {prev, GW_SLICE_LIT(", "),
                            h2 ? GW_SLICE_LIT("2 h2gate") : GW_SLICE_LIT("1.1 h2gate")};
        add(x, GW_SLICE_LIT("Via"), prev.base ? cat(x, via, 3) : cat(x, via + 2, 1));
    }
    if (authority.len == 0)
        return GW_E_PARSE;
    int idem = gw_slice_eq(h->method, GW_SLICE_LIT("GET")) ||
               gw_slice_eq(h->method, GW_SLICE_LIT("HEAD")) ||
               gw_slice_eq(h->method, GW_SLICE_LIT("OPTIONS")) ||
               gw_slice_eq(h->method, GW_SLICE_LIT("PUT")) ||
               gw_slice_eq(h->method, GW_SLICE_LIT("DELETE")) ||
               gw_slice_eq(h->method, GW_SLICE_LIT("TRACE"));
    *req = (gw_back_req_t){
        .method = h->method,
        .target = h->path,
        .host = authority,
        .fields = x->f,
        .fields_len = x->n,
        .body_len = h->end_stream            ? 0
                    : h->content_length >= 0 ? h->content_length
                                             : -1,
        .idempotent = idem,
        .urgency = req_urgency(s, h),
        .client = s->addr,
    };
    /* a zero-length body announced with content-length: 0 and no END_STREAM yet */
    if (!h->end_stream && h->content_length == 0)
        req->body_len = 0;
    return 0;
}

/* The request trailers that may go on to the origin, copied into out (room for n): RFC 9110
 * §6.5.1 forbids in trailers what frames, routes, authenticates, modifies the request or
 * describes the content, since it is acted on before the content arrives; connection-specific
 * fields never cross a hop (§7.6.1). An origin that merged them into the head would see a
 * different request than the one we checked (issue 18.12). */
static size_t req_trailers(const gw_field_t *in, size_t n, gw_field_t *out)
{
    static const char *const deny[] = {"host",
                                       "content-length",
                                       "expect",
                                       "trailer",
                                       "authorization",
                                       "proxy-authorization",
                                       "cookie",
                                       "content-encoding",
                                       "content-type",
                                       "content-range",
                                       "content-location",
                                       "range",
                                       "if-match",
                                       "if-none-match",
                                       "if-modified-since",
                                       "if-unmodified-since",
                                       "if-range",
                                       "max-forwards",
                                       "cache-control",
                                       "pragma",
                                       "forwarded",
                                       "x-forwarded-for",
                                       "x-forwarded-proto",
                                       "x-forwarded-host",
                                       "via",
                                       "priority",
                                       "http2-settings"};
    conn_toks_t toks;
    int conn = conn_toks(&toks, in, n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        gw_slice_t name = in[i].name;
        int drop = hop_by_hop(name) || (conn && named_by_connection(&toks, name));
        for (size_t j = 0; !drop && j < sizeof(deny) / sizeof(deny[0]); j++)
            drop = name_is(name, deny[j]);
        if (!drop)
            out[k++] = in[i];
    }
    return k;
}

/* ---- response translation ----------------------------------------------------------------- */

#define MAX_RESP_FIELDS 128

/* Response fields for the client: hop-by-hop removed, names lowercased (HTTP/2 requires it,
 * HTTP/1.1 clients do not care), Via appended. `lower` holds the lowercased names. */
static size_t resp_fields(const gw_cfg_route_t *route, const gw_back_field_t *in, size_t n,
                          gw_field_t *out, char *lower, size_t lower_size, int64_t *cl, int via)
{
    size_t k = 0, used = 0;
    conn_toks_t toks;
    int conn = conn_toks(&toks, in, n);
    *cl = -1;
    for (size_t i = 0; i < n && k < MAX_RESP_FIELDS - 1; i++) {
        gw_slice_t name = in[i].name;
        if (name_is(name, "content-length")) {
            /* digits only, validated by the back's parser, which also refuses values past
             * INT64_MAX; checked again here because a signed overflow is UB (issue 18.12):
             * an out-of-range value is unknown (-1) rather than a wrapped one */
            uint64_t v = 0;
            for (size_t j = 0; j < in[i].value.len && v <= (uint64_t)INT64_MAX; j++) {
                uint8_t d = in[i].value.base[j];
                v = d >= '0' && d <= '9' && v <= ((uint64_t)INT64_MAX - (d - '0')) / 10
                        ? v * 10 + (d - '0')
                        : (uint64_t)INT64_MAX + 1;
            }
            *cl = v <= (uint64_t)INT64_MAX ? (int64_t)v : -1;
            continue;
        }
        if (hop_by_hop(name) || (conn && named_by_connection(&toks, name)))
            continue;
        if (used + name.len > lower_size)
            break;
        gw_ascii_lower(lower + used, name.base, name.len);
        out[k++] = (gw_field_t){{(const uint8_t *)lower + used, name.len}, in[i].value};
        used += name.len;
    }
    if (via && route->add_via && k < MAX_RESP_FIELDS)
        out[k++] = (gw_field_t){GW_SLICE_LIT("via"), GW_SLICE_LIT("1.1 h2gate")};
    return k;
}

/* ---- in-flight index (the rules are in coalesce.c) ------------------------------------ */

static void unindex(ox_t *ox)
{
    if (ox->indexed) {
        ox->indexed = 0;
        gw_list_remove(&ox->klink);
    }
}

static ox_t *find_inflight(gw_proxy_t *p, const char *key, size_t len, uint64_t hash)
{
    gw_list_foreach(it, &p->inflight)
    {
        ox_t *ox = GW_CONTAINER_OF(it, ox_t, klink);
        if (ox->hash == hash && ox->keylen == len && !memcmp(ox->key, key, len) && ox->bx)
            return ox;
    }
    return NULL;
}

/* ---- ox lifetime --------------------------------------------------------------------------- */

static void ox_unpause(ox_t *ox)
{
    if (!ox->paused)
        return;
    ox->paused = 0;
    gw_list_remove(&ox->plink);
    if (ox->bx)
        gw_back_resume_reading(ox->bx);
}

/* Drop the exchange: no subscriber left, or it ended. */
static void ox_free(ox_t *ox)
{
    ox_unpause(ox);
    unindex(ox);
    if (ox->bx) {
        gw_back_exch_t *bx = ox->bx;
        ox->bx = NULL;
        gw_back_cancel(bx); /* pending body writes report back: their streams are closed */
    }
    gw_free(ox->key);
    gw_proxy__cbody_free(&ox->body);
    gw_free(ox->trailers);
    obj_put(&ox->p->ox_free, &ox->p->ox_nfree, ox);
}

static void sub_remove(px_t *px)
{
    ox_t *ox = px->ox;
    if (!ox)
        return;
    px->ox = NULL;
    gw_list_remove(&px->slink);
    ox->nsubs--;
    if (ox->owner == px)
        ox->owner = NULL;
    if (ox->nsubs == 0 && !ox->pumping)
        ox_free(ox);
}

/* The exchange ended (complete or failed): every subscriber leaves it. */
static void ox_end(ox_t *ox)
{
    ox->bx = NULL;
    size_t n = ox->nsubs;
    if (n == 0) {
        ox_free(ox);
        return;
    }
    for (size_t i = 0; i < n; i++) /* the last removal frees ox: do not look at it after */
        sub_remove(GW_CONTAINER_OF(ox->subs.next, px_t, slink));
}

/* ---- ending one stream ----------------------------------------------------------------------- */

/* One line per routed request, when the front is done with it (the access log). */
static void log_request(px_t *px)
{
    GW_LOG_INFO("request",
                "peer=%s proto=%s method=%s path=%s status=%u upstream=%s result=%s%s ms=%llu",
                px->s->peer, px->proto, px->method, px->path, px->status, px->route->upstream_name,
                px->reset       ? "reset"
                : px->resp_done ? "ok"
                                : "client_gone",
                px->follower ? " coalesced=1" : "",
                (unsigned long long)(uv_now(px->p->loop) - px->started_ms));
}

static void do_reset(px_t *px, gw_cs_reset_t code)
{
    if (px->closed || px->reset)
        return;
    px->reset = 1;
    px->s->ops->reset(px->s, code);
}

/* The response is complete towards the client: a request body still coming is not wanted. */
static void response_done(px_t *px)
{
    px->resp_done = 1;
    if (!px->req_done)
        do_reset(px, GW_CS_RESET_NO_ERROR); /* RFC 9113 §8.1: early response */
}

static void fail(px_t *px, int code)
{
    if (px->closed)
        return;
    if (!px->resp_started) {
        unsigned st = (unsigned)gw_back_status_for(code);
        px->status = st;
        px->resp_started = 1;
        const char *text = st == 504   ? "h2gate: the origin did not answer in time\n"
                           : st == 503 ? "h2gate: the origin is busy, try again later\n"
                                       : "h2gate: the origin failed to answer\n";
        GW_LOG_INFO("origin_error", "peer=%s upstream=%s code=%s status=%u", px->s->peer,
                    px->route->upstream_name, gw_errname(code), st);
        if (gw_proxy__answer(px->s, st, text) < 0)
            do_reset(px, GW_CS_RESET_INTERNAL);
        else
            response_done(px);
    } else {
        /* the head is gone: the client must see a broken response, not a short one */
        GW_LOG_INFO("origin_error", "peer=%s upstream=%s code=%s after_head=1", px->s->peer,
                    px->route->upstream_name, gw_errname(code));
        do_reset(px, GW_CS_RESET_INTERNAL);
    }
}

/* A malformed request is the client's fault, never the origin's (issue 19.3; RFC 9113 §8.1.1,
 * RFC 9112 §3): HTTP/2 resets the stream with PROTOCOL_ERROR, HTTP/1.1 is answered 400 while
 * no response head went out; never a 502, which would blame the origin in logs and metrics. */
static void bad_request(px_t *px, const char *why)
{
    if (px->closed)
        return;
    GW_LOG_INFO("bad_request", "peer=%s proto=%s reason=\"%s\"", px->s->peer, px->proto, why);
    if (px->resp_started || strcmp(px->proto, "http/1.1") != 0) {
        px->resp_started = 1;
        do_reset(px, GW_CS_RESET_PROTOCOL);
        return;
    }
    px->status = 400;
    px->resp_started = 1;
    if (gw_proxy__answer(px->s, 400, "h2gate: malformed request\n") < 0)
        do_reset(px, GW_CS_RESET_INTERNAL);
    else
        response_done(px);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static const gw_back_cbs_t back_cbs;

/* Start an origin exchange of px's own; with key (owned, keylen bytes) it is indexed for
 * followers. Answers px itself on a synchronous failure. */
static void dispatch(px_t *px, char *key, size_t keylen)
{
    gw_proxy_t *p = px->p;
    ox_t *ox = obj_get(&p->ox_free, &p->ox_nfree, sizeof(*ox));
    if (!ox) {
        gw_free(key);
        fail(px, GW_E_NOMEM);
        return;
    }
    ox->p = p;
    ox->route = px->route;
    gw_list_init(&ox->subs);
    gw_list_init(&ox->plink);
    gw_list_init(&ox->klink);
    gw_proxy__cbody_init(&ox->body);
    ox->owner = px;
    ox->authorized = gw_proxy__has_authorization(&px->head) != 0;
    xlate_t x;
    x.f = NULL;
    x.buf = NULL;
    x.n = 0;
    x.used = 0;
    gw_back_req_t req;
    int rv = translate(px, &px->head, &x, &req);
    if (rv == 0) {
        rv = p->back ? gw_back_request(p->back, px->route->upstream, &req, &back_cbs, ox, &ox->bx)
                     : GW_E_CLOSED;
        if (rv == 0)
            p->stats.origin_requests++;
    }
    if (x.f != x.fst)
        gw_free(x.f);
    if (x.buf != x.bst)
        gw_free(x.buf);
    if (rv < 0) {
        gw_free(key);
        obj_put(&p->ox_free, &p->ox_nfree, ox);
        if (rv == GW_E_PARSE) /* translate(): the head's authority */
            bad_request(px, "missing or invalid authority, or host does not match :authority");
        else if (rv == GW_E_INVAL) /* the back's serializer refused the head (issue 19.3) */
            bad_request(px, "request head cannot be sent as HTTP/1.1");
        else
            fail(px, rv);
        return;
    }
    gw_list_push_back(&ox->subs, &px->slink);
    ox->nsubs = 1;
    px->ox = ox;
    if (key) {
        ox->key = key;
        ox->keylen = keylen;
        ox->hash = gw_proxy__hash(key, keylen);
        ox->indexed = 1;
        gw_list_push_back(&p->inflight, &ox->klink);
    }
}

/* A follower leaves the shared exchange and fetches on its own (not coalescible again). */
static void detach(px_t *px)
{
    sub_remove(px);
    px->follower = 0;
    dispatch(px, NULL, 0);
}

/* ---- flow control --------------------------------------------------------------------------- */

static void on_sweep(uv_timer_t *t);

static void ox_pause(ox_t *ox)
{
    gw_proxy_t *p = ox->p;
    if (ox->paused || !ox->bx)
        return;
    ox->paused = 1;
    ox->paused_since = uv_now(p->loop);
    gw_list_push_back(&p->paused, &ox->plink);
    gw_back_pause_reading(ox->bx);
    if (p->sweep_open && !uv_is_active((uv_handle_t *)&p->sweep)) {
        uint64_t every = p->cfg->timeouts.body_ms / 4;
        uv_timer_start(&p->sweep, on_sweep, every ? every : 1, every ? every : 1);
    }
}

#define FOREACH_SUB(ox, px)                                                                        \
    for (gw_list_t *it_ = (ox)->subs.next, *nx_ = it_->next; it_ != &(ox)->subs;                   \
         it_ = nx_, nx_ = it_->next)                                                               \
        for (px_t *px = GW_CONTAINER_OF(it_, px_t, slink); px; px = NULL)

/* The response body is held once, in ox->body, by reference, for every subscriber (issue 19
 * item 2). Each subscriber's cursor (px->delivered) says how far it got; a client stream is
 * handed bytes while it holds less than limits.body_buffer (ops->pending), and the store keeps
 * the bytes from the slowest cursor to what the origin sent last. So an exchange holds the span
 * between its slowest and fastest subscriber (plus what each client stream has queued, which
 * references the same buffers), however many subscribe:
 *
 *  - the origin is read while some subscriber has everything and can take more ("hungry": its
 *    cursor is at the end and its stream holds less than body_buffer) and the span is under
 *    limits.coalesce_buffer; otherwise the read pauses (and the stall sweep watches it);
 *  - when a subscriber is hungry but the span reached coalesce_buffer, the followers that are
 *    coalesce_buffer behind the end detach and fetch on their own (their cursor carries over:
 *    the bytes they have are not resent), and the read goes on for the others.
 *
 * Followers on one HTTP/2 connection, which the scheduler serves one after another, so stay
 * attached as long as the response is within coalesce_buffer of the slowest of them. */

/* Whether px still takes body bytes. */
static int wants_body(const px_t *px)
{
    return !px->closed && !px->reset && px->resp_started && !px->resp_done;
}

/* Hand px what its stream can take; at the end of a complete response, finish it (trailers or
 * END_STREAM) and unsubscribe it. */
static void feed(ox_t *ox, px_t *px)
{
    if (px->closed)
        return;
    if (px->reset) {
        if (ox->complete)
            sub_remove(px); /* the front closes it later */
        return;
    }
    if (!px->resp_started)
        return;
    if (!px->resp_done) {
        size_t bound = ox->p->cfg->limits.body_buffer;
        gw_rslice_t sl;
        while (px->delivered < ox->body.end && px->s->ops->pending(px->s) < bound &&
               gw_proxy__cbody_at(&ox->body, px->delivered, &sl) == 0) {
            px->delivered += sl.len;
            if (px->s->ops->body(px->s, sl.buf, sl.off, sl.len, 0) < 0) {
                do_reset(px, GW_CS_RESET_INTERNAL);
                return;
            }
        }
    }
    if (!ox->complete || px->delivered < ox->body.end)
        return;
    if (!px->resp_done) {
        int rv = ox->trailers ? px->s->ops->trailers(px->s, ox->trailers, ox->ntrailers)
                              : px->s->ops->body(px->s, NULL, 0, 0, 1);
        if (rv < 0) {
            do_reset(px, GW_CS_RESET_INTERNAL);
            sub_remove(px);
            return;
        }
    }
    response_done(px);
    sub_remove(px);
}

/* Release what every subscriber has, detach the followers past coalesce_buffer, and pause or
 * resume the origin read (the rules above). */
static void regulate(ox_t *ox)
{
    gw_proxy_t *p = ox->p;
    size_t bound = p->cfg->limits.body_buffer;
    uint64_t cbuf = p->cfg->limits.coalesce_buffer;
    uint64_t end = ox->body.end, min = end;
    int hungry = 0, active = 0;
    FOREACH_SUB(ox, px)
    {
        if (!wants_body(px))
            continue;
        active = 1;
        if (px->delivered < min)
            min = px->delivered;
        /* a cursor past the end: a detached stream waiting for bytes it does not have yet */
        if (px->delivered >= end && px->s->ops->pending(px->s) < bound)
            hungry = 1;
    }
    if (hungry && ox->bx && end - min >= cbuf) {
        min = end;
        FOREACH_SUB(ox, px)
        {
            if (!wants_body(px))
                continue;
            if (px->delivered < end && end - px->delivered >= cbuf) {
                p->stats.detached++;
                GW_LOG_DEBUG("coalesce_detach", "peer=%s path=%s delivered=%llu behind=%llu",
                             px->s->peer, px->path, (unsigned long long)px->delivered,
                             (unsigned long long)(end - px->delivered));
                detach(px); /* ox survives: the hungry subscriber stays */
            } else if (px->delivered < min) {
                min = px->delivered;
            }
        }
    }
    gw_proxy__cbody_trim(&ox->body, min);
    if (!ox->bx)
        return;
    if (!active || (hungry && end - min < cbuf))
        ox_unpause(ox); /* nobody left to wait for (the rest is dropped), or room to read */
    else
        ox_pause(ox);
}

/* feed() every subscriber, then regulate(). Returns 1 when ox was freed (every subscriber
 * finished), else 0. */
static int pump(ox_t *ox)
{
    ox->pumping = 1;
    FOREACH_SUB(ox, px)
    {
        feed(ox, px);
    }
    if (ox->nsubs)
        regulate(ox);
    ox->pumping = 0;
    if (ox->nsubs == 0) {
        ox_free(ox);
        return 1;
    }
    return 0;
}

/* The exchange cannot go on (out of memory while holding the response): every subscriber
 * fails, the origin exchange is dropped. */
static void ox_abort(ox_t *ox, int code)
{
    if (ox->bx) {
        gw_back_exch_t *bx = ox->bx;
        ox->bx = NULL;
        gw_back_cancel(bx);
    }
    FOREACH_SUB(ox, px)
    {
        fail(px, code);
    }
    ox_end(ox);
}

/* A client that keeps its window shut holds at most the buffer bound, and only for
 * timeouts.body: then its stream is reset and the origin exchange dropped. */
static void on_sweep(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop);
    gw_list_foreach_safe(it, tmp, &p->paused)
    {
        ox_t *ox = GW_CONTAINER_OF(it, ox_t, plink);
        if (now - ox->paused_since < p->cfg->timeouts.body_ms)
            continue;
        ox_unpause(ox);
        gw_list_foreach_safe(s_it, s_tmp, &ox->subs)
        {
            px_t *px = GW_CONTAINER_OF(s_it, px_t, slink);
            GW_LOG_INFO("client_stalled", "peer=%s upstream=%s pending=%zu", px->s->peer,
                        px->route->upstream_name, px->s->ops->pending(px->s));
            p->stats.stalled++;
            do_reset(px, GW_CS_RESET_CANCEL);
        }
        /* the streams leave when the front closes them; the origin read stops now */
        if (ox->bx) {
            gw_back_exch_t *bx = ox->bx;
            ox->bx = NULL;
            gw_back_cancel(bx);
        }
        unindex(ox);
    }
    if (gw_list_empty(&p->paused))
        uv_timer_stop(&p->sweep);
}

/* ---- back callbacks ---------------------------------------------------------------------- */

static void b_interim(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    (void)x;
    ox_t *ox = ud;
    /* 100 Continue answers our own request body handling; 103 Early Hints goes to the
     * client (RFC 8297) */
    if (h->status != 103)
        return;
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[8192];
    int64_t cl;
    size_t n = resp_fields(ox->route, h->fields, h->fields_len, f, lower, sizeof(lower), &cl, 0);
    FOREACH_SUB(ox, px)
    {
        if (!px->closed && !px->resp_started && px->s->ops->interim(px->s, 103, f, n) < 0)
            do_reset(px, GW_CS_RESET_INTERNAL);
    }
}

static void b_head(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    (void)x;
    ox_t *ox = ud;
    unindex(ox); /* from now on a new request gets an exchange of its own */
    if (ox->nsubs > 1 && !gw_proxy__coalesce_shareable(ox->route, (unsigned)h->status, h->fields,
                                                       h->fields_len, ox->authorized)) {
        /* the followers go to the origin on their own; the first subscriber keeps this one */
        px_t *keep = GW_CONTAINER_OF(ox->subs.next, px_t, slink);
        FOREACH_SUB(ox, px)
        {
            if (px != keep) {
                ox->p->stats.not_shared++;
                detach(px);
            }
        }
    }
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[16384];
    int64_t cl;
    size_t n = resp_fields(ox->route, h->fields, h->fields_len, f, lower, sizeof(lower), &cl, 1);
    FOREACH_SUB(ox, px)
    {
        if (px->closed || px->reset)
            continue;
        if (px->resp_started) {
            /* a detached stream whose head went out: the new response must be the same one */
            if ((unsigned)h->status != px->status || cl != px->resp_cl)
                do_reset(px, GW_CS_RESET_INTERNAL); /* leaves when the front closes it */
            continue;
        }
        /* RFC 9110 §6.4.1: no content after HEAD, 204 and 304 */
        int no_body = px->s->head_only || h->status == 204 || h->status == 304 || cl == 0;
        px->status = (unsigned)h->status;
        px->resp_cl = cl;
        px->resp_started = 1;
        if (px->s->ops->respond(px->s, (unsigned)h->status, f, n, cl, no_body) < 0)
            do_reset(px, GW_CS_RESET_INTERNAL);
        else if (no_body)
            px->resp_done = 1; /* response_done() at on_complete, when the origin is done */
    }
}

/* Body bytes go into the store, and from there to every subscriber that can take them. */
static void b_body(gw_back_exch_t *x, void *ud, gw_rslice_t b)
{
    (void)x;
    ox_t *ox = ud;
    if (gw_proxy__cbody_append(&ox->body, b.buf, b.off, b.len) < 0) {
        ox_abort(ox, GW_E_NOMEM);
        return;
    }
    pump(ox);
}

/* Trailers are kept (translated, in one block) until each subscriber reached the body's end. */
static void b_trailers(gw_back_exch_t *x, void *ud, const gw_back_field_t *tf, size_t tn)
{
    (void)x;
    ox_t *ox = ud;
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[8192];
    int64_t cl;
    size_t n = resp_fields(ox->route, tf, tn, f, lower, sizeof(lower), &cl, 0);
    size_t bytes = n * sizeof(gw_field_t) + 1;
    for (size_t i = 0; i < n; i++)
        bytes += f[i].name.len + f[i].value.len;
    gw_field_t *t = gw_malloc(bytes);
    if (!t) {
        ox_abort(ox, GW_E_NOMEM);
        return;
    }
    uint8_t *d = (uint8_t *)(t + n);
    for (size_t i = 0; i < n; i++) {
        gw_slice_t nv[2] = {f[i].name, f[i].value};
        for (int k = 0; k < 2; k++) {
            if (nv[k].len)
                memcpy(d, nv[k].base, nv[k].len);
            nv[k].base = d;
            d += nv[k].len;
        }
        t[i] = (gw_field_t){nv[0], nv[1]};
    }
    gw_free(ox->trailers);
    ox->trailers = t;
    ox->ntrailers = n;
}

/* The origin is done: subscribers at the end finish now, the others as they catch up. */
static void b_complete(gw_back_exch_t *x, void *ud)
{
    (void)x;
    ox_t *ox = ud;
    ox->bx = NULL;
    ox->complete = 1;
    ox_unpause(ox);
    pump(ox);
}

static void b_error(gw_back_exch_t *x, void *ud, int code)
{
    (void)x;
    ox_t *ox = ud;
    ox->bx = NULL;
    FOREACH_SUB(ox, px)
    {
        fail(px, code);
    }
    ox_end(ox);
}

static const gw_back_cbs_t back_cbs = {b_interim, b_head, b_body, b_trailers, b_complete, b_error};

/* ---- front entry points ---------------------------------------------------------------------- */

/* ---- request body timeout (timeouts.request_body, issue 18 item 5) ---------------------------
 *
 * A request whose body stops arriving must not hold an origin connection until the origin's
 * response_timeout fires and blames the origin: five such requests per server ejected it, and
 * one HTTP/2 connection could hold every origin connection of a worker. The clock runs only
 * while the gateway waits for the client: every body byte passed on was also credited back
 * (px->body_inflight == 0), so an origin that reads slowly, and the window it closes, is never
 * counted against the client. */

static void on_upload_sweep(uv_timer_t *t);
static void abort_own(px_t *px);

static void upload_watch(px_t *px)
{
    gw_proxy_t *p = px->p;
    px->body_since = uv_now(p->loop);
    gw_list_push_back(&p->uploading, &px->ulink);
    if (p->upload_open && !uv_is_active((uv_handle_t *)&p->upload_sweep)) {
        uint64_t every = p->cfg->timeouts.request_body_ms / 4;
        if (every > 1000)
            every = 1000;
        uv_timer_start(&p->upload_sweep, on_upload_sweep, every ? every : 1, every ? every : 1);
    }
}

static void upload_unwatch(px_t *px)
{
    gw_list_remove(&px->ulink); /* a no-op on a self-linked node */
    gw_list_init(&px->ulink);
}

static void on_upload_sweep(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop), limit = p->cfg->timeouts.request_body_ms;
    gw_list_foreach_safe(it, tmp, &p->uploading)
    {
        px_t *px = GW_CONTAINER_OF(it, px_t, ulink);
        if (px->req_done || px->closed || px->reset || px->resp_started) {
            upload_unwatch(px); /* the response is under way: its own timeouts apply */
            continue;
        }
        if (px->body_inflight || now - px->body_since < limit)
            continue;
        upload_unwatch(px);
        p->stats.upload_stalled++;
        GW_LOG_INFO("request_body_timeout",
                    "peer=%s proto=%s path=%s upstream=%s received=%llu status=408", px->s->peer,
                    px->proto, px->path, px->route->upstream_name,
                    (unsigned long long)px->req_sent);
        /* the client's fault: the origin exchange is cancelled, never counted as a server
         * failure (gw_back_cancel), and the client gets 408 (RFC 9110 §15.5.9) followed by
         * the end of the request (HTTP/1.1: the connection closes, the rest of the body will
         * never be read; HTTP/2: RST_STREAM(NO_ERROR) after the response, RFC 9113 §8.1) */
        abort_own(px);
        px->status = 408;
        px->resp_started = 1;
        if (gw_proxy__answer(px->s, 408, "h2gate: the request body stopped arriving\n") < 0)
            do_reset(px, GW_CS_RESET_CANCEL);
        else
            response_done(px);
    }
    if (gw_list_empty(&p->uploading))
        uv_timer_stop(&p->upload_sweep);
}

/* A final answer made here, before any exchange (no route, 429), to a request that may still
 * be sending its body. Over HTTP/2 the stream is then reset with NO_ERROR once the answer is
 * framed (RFC 9113 §8.1: "a server can send a complete response prior to the client sending an
 * entire request ... by sending a RST_STREAM with an error code of NO_ERROR"): left
 * half-closed, the stream would keep the connection out of its idle timeout for ever (issue 18
 * item 8). HTTP/1.1 reads and drops the body as before, keeping the connection. */
static int answer_early(gw_cstream_t *s, const gw_req_head_t *h, unsigned status, const char *text,
                        const gw_field_t *f, size_t n)
{
    int rv = gw_proxy__answer_fields(s, status, text, f, n);
    if (rv >= 0 && !h->end_stream && strcmp(h->proto, "http/1.1") != 0)
        s->ops->reset(s, GW_CS_RESET_NO_ERROR);
    return rv;
}

int gw_proxy_request(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h)
{
    p->stats.requests++;
    s->proxy_data = NULL;
    const gw_cfg_route_t *r = gw_proxy_route(p, h->authority, h->path);
    if (!r) {
        GW_LOG_INFO("no_route", "peer=%s proto=%s method=%.*s authority=%.*s path=%.*s status=404",
                    s->peer, h->proto, (int)h->method.len, h->method.base, (int)h->authority.len,
                    h->authority.base, (int)h->path.len, h->path.base);
        return answer_early(s, h, 404, "h2gate: no route for this host and path\n", NULL, 0);
    }
    unsigned retry;
    if (!gw_proxy__rate_allow(p->rates, r, (size_t)(r - p->cfg->routes), s->addr,
                              gw_now_ns() / 1000, &retry)) {
        /* RFC 6585 §4: 429 Too Many Requests, answered here: the origin never sees it */
        char ra[16];
        snprintf(ra, sizeof(ra), "%u", retry);
        const gw_field_t f[] = {{GW_SLICE_LIT("retry-after"), gw_slice_str(ra)}};
        p->stats.rate_limited++;
        GW_LOG_INFO("rate_limited",
                    "peer=%s proto=%s method=%.*s path=%.*s upstream=%s status=429 "
                    "retry_after=%u",
                    s->peer, h->proto, (int)h->method.len, h->method.base, (int)h->path.len,
                    h->path.base, r->upstream_name, retry);
        return answer_early(s, h, 429, "h2gate: too many requests, slow down\n", f, 1);
    }
    px_t *px = obj_get(&p->px_free, &p->px_nfree, sizeof(*px));
    if (!px)
        return GW_E_NOMEM;
    px->p = p;
    px->s = s;
    px->route = r;
    px->head = *h;
    px->req_cl = h->content_length;
    px->resp_cl = -1;
    px->req_done = h->end_stream != 0;
    px->proto = h->proto;
    px->started_ms = uv_now(p->loop);
    copy_cstr(px->method, sizeof(px->method), h->method);
    copy_cstr(px->path, sizeof(px->path), h->path);
    gw_list_init(&px->slink);
    gw_list_init(&px->ulink);
    gw_list_init(&px->alink);
    if (!px->req_done)
        upload_watch(px);
    s->proxy_data = px;

    /* the key holds the scheme the origin is told (the listener's, DESIGN.md "Safe
     * sharing"), not the client's :scheme */
    gw_req_head_t kh = *h;
    kh.scheme = s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
    size_t klen;
    char *key = gw_proxy__coalesce_key(r, &kh, &klen);
    if (key) {
        ox_t *ox = find_inflight(p, key, klen, gw_proxy__hash(key, klen));
        if (ox) {
            gw_free(key);
            gw_list_push_back(&ox->subs, &px->slink);
            ox->nsubs++;
            px->ox = ox;
            px->follower = 1;
            p->stats.coalesced++;
            return 0;
        }
    }
    dispatch(px, key, klen);
    return 0;
}

static void on_written(void *ud, int status)
{
    (void)status;
    wctx_t *w = ud;
    px_t *px = w->px;
    px->body_inflight -= w->len;
    if (!px->body_inflight)
        px->body_since = uv_now(px->p->loop); /* from now on the wait is for the client */
    if (!px->closed)
        px->s->ops->credit(px->s, w->len);
    gw_free(w);
}

/* The request body only flows on the stream's own exchange (coalesced requests have none). */
static gw_back_exch_t *own_bx(px_t *px)
{
    return px && px->ox && px->ox->owner == px ? px->ox->bx : NULL;
}

static void abort_own(px_t *px)
{
    ox_t *ox = px->ox;
    if (ox && ox->bx) {
        gw_back_exch_t *bx = ox->bx;
        ox->bx = NULL;
        gw_back_cancel(bx);
    }
    sub_remove(px);
}

/* Request body pieces (issue 18 item 7). Each write to the back costs a buffer, a write
 * context, a write mark and a queue entry, about 150 bytes, while the bounds
 * (limits.body_buffer, the HTTP/2 window) count payload bytes: one-byte DATA frames or chunks
 * made the memory 150 times the bound. So pieces smaller than ACC_SMALL are copied into one
 * buffer per stream (ACC_CAP) and handed to the back once per loop turn (or when the buffer is
 * full, or before the body ends): the overhead is per ACC_CAP bytes, not per piece. */
#define ACC_SMALL 4096
#define ACC_CAP (16 * 1024)

/* Hand len bytes of b (from off) to the back as one write; on failure the stream is ended as
 * the error says. The caller keeps its reference to b. */
static void body_write(px_t *px, gw_rbuf_t *b, size_t len)
{
    gw_back_exch_t *bx = own_bx(px);
    int rv = GW_E_CLOSED;
    wctx_t *w = NULL;
    if (bx && !px->resp_done && !px->reset) {
        w = gw_malloc(sizeof(*w));
        rv = GW_E_NOMEM;
        if (w) {
            *w = (wctx_t){px, len};
            rv = gw_back_write_body(bx, b, 0, len, on_written, w);
        }
    }
    if (rv == 0)
        return;
    gw_free(w);
    px->body_inflight -= len;
    if (!px->closed)
        px->s->ops->credit(px->s, len);
    if (rv == GW_E_CLOSED)
        return; /* nobody wants these bytes any more: dropped */
    /* more bytes than the announced Content-Length, or out of memory: never sent on as a
     * desynchronised request */
    abort_own(px);
    if (rv == GW_E_INVAL)
        do_reset(px, GW_CS_RESET_PROTOCOL);
    else
        fail(px, rv);
}

/* Write what px->acc gathered (it goes before any later piece or the body's end). */
static void acc_flush_one(px_t *px)
{
    gw_rbuf_t *b = px->acc;
    if (!b)
        return;
    px->acc = NULL;
    gw_list_remove(&px->alink);
    gw_list_init(&px->alink);
    body_write(px, b, b->len);
    gw_rbuf_unref(b); /* the back holds its own reference */
}

/* Drop what px->acc gathered (the stream or its exchange ended): credited back. */
static void acc_drop(px_t *px)
{
    gw_rbuf_t *b = px->acc;
    if (!b)
        return;
    px->acc = NULL;
    gw_list_remove(&px->alink);
    gw_list_init(&px->alink);
    px->body_inflight -= b->len;
    if (!px->closed)
        px->s->ops->credit(px->s, b->len);
    gw_rbuf_unref(b);
}

static void on_acc_flush(uv_prepare_t *h)
{
    gw_proxy_t *p = h->data;
    while (!gw_list_empty(&p->acc_pending))
        acc_flush_one(GW_CONTAINER_OF(p->acc_pending.next, px_t, alink));
    uv_prepare_stop(h);
}

void gw_proxy_body(gw_proxy_t *p, gw_cstream_t *s, const uint8_t *data, size_t len)
{
    px_t *px = s->proxy_data;
    gw_back_exch_t *bx = own_bx(px);
    if (!bx || px->resp_done || px->reset || len == 0) {
        s->ops->credit(s, len); /* nobody wants these bytes: dropped */
        return;
    }
    px->req_sent += len;
    px->body_since = uv_now(px->p->loop);
    px->body_inflight += len;
    if (px->acc && (len >= ACC_SMALL || px->acc->len + len > px->acc->cap))
        acc_flush_one(px); /* full, or a large piece follows: the gathered bytes go first */
    if (len < ACC_SMALL && own_bx(px)) {
        if (!px->acc) {
            px->acc = gw_rbuf_new(ACC_CAP);
            if (!px->acc) {
                px->body_inflight -= len;
                s->ops->credit(s, len);
                abort_own(px);
                fail(px, GW_E_NOMEM);
                return;
            }
            px->acc->len = 0;
            gw_list_push_back(&p->acc_pending, &px->alink);
            if (p->acc_open && !uv_is_active((uv_handle_t *)&p->acc_flush))
                uv_prepare_start(&p->acc_flush, on_acc_flush);
        }
        memcpy(px->acc->data + px->acc->len, data, len);
        px->acc->len += len;
        return;
    }
    gw_rbuf_t *b = gw_rbuf_new(len);
    if (!b) {
        px->body_inflight -= len;
        s->ops->credit(s, len);
        abort_own(px);
        fail(px, GW_E_NOMEM);
        return;
    }
    memcpy(b->data, data, len);
    b->len = len;
    body_write(px, b, len);
    gw_rbuf_unref(b); /* the back holds its own reference */
}

void gw_proxy_body_end(gw_proxy_t *p, gw_cstream_t *s, const gw_field_t *tr, size_t n)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || px->req_done)
        return;
    px->req_done = 1;
    upload_unwatch(px);
    acc_flush_one(px); /* the gathered pieces go before the end */
    gw_back_exch_t *bx = own_bx(px);
    if (!bx || px->reset)
        return;
    if (px->req_cl >= 0 && (uint64_t)px->req_cl != px->req_sent) {
        /* RFC 9113 §8.1.1: content-length disagrees with the DATA: malformed */
        abort_own(px);
        do_reset(px, GW_CS_RESET_PROTOCOL);
        return;
    }
    if (px->req_cl == 0)
        return; /* no body was announced to the origin */
    gw_field_t fst[16], *f = fst;
    size_t k = 0;
    if (px->req_cl < 0 && n) {
        f = n <= 16 ? fst : gw_malloc(n * sizeof(*f));
        if (!f) {
            abort_own(px);
            fail(px, GW_E_NOMEM);
            return;
        }
        k = req_trailers(tr, n, f);
    }
    int rv = gw_back_end_body(bx, k ? f : NULL, k);
    if (f != fst)
        gw_free(f);
    if (rv < 0) {
        abort_own(px);
        if (rv == GW_E_INVAL) /* a trailer the serializer refused: the client's (issue 19.3) */
            bad_request(px, "invalid request trailer");
        else
            fail(px, rv);
    }
}

void gw_proxy_reprioritize(gw_proxy_t *p, gw_cstream_t *s)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || !px->ox || !px->ox->bx)
        return;
    /* a coalesced exchange waits for its most urgent subscriber */
    uint8_t u = 7;
    gw_list_foreach(it, &px->ox->subs)
    {
        px_t *q = GW_CONTAINER_OF(it, px_t, slink);
        if (q->closed)
            continue;
        uint8_t v = req_urgency(q->s, &q->head);
        if (v < u)
            u = v;
    }
    gw_back_set_urgency(px->ox->bx, u);
}

void gw_proxy_writable(gw_proxy_t *p, gw_cstream_t *s)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || !px->ox)
        return;
    /* the stream takes bytes held for it; the origin read resumes if it may (regulate()) */
    pump(px->ox);
}

void gw_proxy_stream_closed(gw_proxy_t *p, gw_cstream_t *s)
{
    px_t *px = s->proxy_data;
    if (!px)
        return;
    s->proxy_data = NULL;
    log_request(px);
    px->closed = 1;
    upload_unwatch(px);
    acc_drop(px);
    /* a leader cancelled by its client does not cancel the followers: the exchange goes on
     * while anyone is subscribed */
    sub_remove(px);
    GW_ASSERT(px->body_inflight == 0);
    obj_put(&p->px_free, &p->px_nfree, px);
}
