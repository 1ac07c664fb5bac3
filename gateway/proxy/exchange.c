/* proxy/exchange.c — one client stream ↔ one origin exchange: request translation, response
 * translation, hop-by-hop flow control with bounded buffers, gateway-made error answers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

/* px_t: the proxy's state of one client stream (s->proxy_data). */
typedef struct {
    gw_proxy_t *p;
    gw_cstream_t *s;
    const gw_cfg_route_t *route;
    gw_back_exch_t *bx;     /* NULL once the exchange ended (or never started) */
    gw_list_t plink;        /* in p->paused while the origin is paused for this client */
    uint64_t paused_since;  /* loop time of the pause */
    uint64_t body_inflight; /* request body bytes given to the back, not yet credited */
    int64_t req_cl;         /* request Content-Length, -1 unknown */
    uint64_t req_sent;      /* request body bytes received from the client */
    unsigned status;        /* status of the response head sent, 0 before */
    unsigned resp_started : 1;
    unsigned resp_done : 1;
    unsigned req_done : 1; /* the client ended its request body */
    unsigned closed : 1;   /* the front is done with the stream: no more ops */
    unsigned paused : 1;
    unsigned reset : 1;
    const char *proto;
    uint64_t started_ms;
    char method[16];
    char path[160]; /* for the log, truncated */
} px_t;

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
    int rv = gw_back_new(loop, cfg, &p->back);
    if (rv < 0) {
        gw_free(p);
        return rv;
    }
    uv_timer_init(loop, &p->sweep);
    p->sweep.data = p;
    p->sweep_open = 1;
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
}

void gw_proxy_del(gw_proxy_t *p)
{
    if (!p)
        return;
    GW_ASSERT(!p->back && !p->sweep_open);
    gw_free(p);
}

void gw_proxy_stats(const gw_proxy_t *p, gw_proxy_stats_t *out)
{
    *out = p->stats;
}

/* ---- request translation (RFC 9113 §8.3, RFC 9110 §7.6) ------------------------------------ */

static int name_is(gw_slice_t name, const char *lit)
{
    return gw_slice_eq_nocase(name, gw_slice_str(lit));
}

/* Connection-specific fields never forwarded (RFC 9110 §7.6.1, RFC 9113 §8.2.2). host and
 * content-length are rebuilt by the back from :authority and the body framing; expect is
 * answered by the front. */
static int hop_by_hop(gw_slice_t n)
{
    static const char *const hop[] = {"connection", "keep-alive",        "proxy-connection",
                                      "transfer-encoding", "upgrade",    "te",
                                      "http2-settings",    "content-length"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (name_is(n, hop[i]))
            return 1;
    return 0;
}

/* Whether `name` is one of the comma-separated tokens of any Connection field. */
static int named_by_connection(const gw_field_t *f, size_t n, gw_slice_t name)
{
    for (size_t i = 0; i < n; i++) {
        if (!name_is(f[i].name, "connection"))
            continue;
        const uint8_t *p = f[i].value.base, *e = p + f[i].value.len;
        while (p < e) {
            while (p < e && (*p == ' ' || *p == '\t' || *p == ','))
                p++;
            const uint8_t *t = p;
            while (p < e && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if (p > t && gw_slice_eq_nocase((gw_slice_t){t, (size_t)(p - t)}, name))
                return 1;
        }
    }
    return 0;
}

/* Scratch space for the translated fields: one block, sized before anything is written, so
 * the slices into it never move. */
typedef struct {
    gw_field_t *f;
    size_t n, cap;
    char *buf;
    size_t used, size;
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

static void add(xlate_t *x, gw_slice_t name, gw_slice_t value)
{
    GW_ASSERT(x->n < x->cap);
    x->f[x->n++] = (gw_field_t){name, value};
}

/* Every value of fields named `name`, joined with sep, or {NULL,0} when there is none. */
static gw_slice_t join(xlate_t *x, const gw_req_head_t *h, const char *name, const char *sep)
{
    size_t start = x->used, seen = 0;
    for (size_t i = 0; i < h->fields_len; i++) {
        if (!name_is(h->fields[i].name, name))
            continue;
        if (seen++) {
            memcpy(x->buf + x->used, sep, strlen(sep));
            x->used += strlen(sep);
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

/* Build the origin request. Returns 0, GW_E_PARSE (malformed: host disagrees with
 * :authority, RFC 9113 §8.3.1), GW_E_NOMEM. */
static int translate(px_t *px, const gw_req_head_t *h, xlate_t *x, gw_back_req_t *req)
{
    const gw_cfg_route_t *r = px->route;
    gw_cstream_t *s = px->s;
    size_t bytes = 512 + h->authority.len + h->path.len;
    for (size_t i = 0; i < h->fields_len; i++)
        bytes += h->fields[i].name.len + h->fields[i].value.len + 4;
    x->cap = h->fields_len + 4;
    x->size = bytes * 2;
    x->f = gw_malloc(x->cap * sizeof(*x->f));
    x->buf = gw_malloc(x->size);
    if (!x->f || !x->buf)
        return GW_E_NOMEM;
    int h2 = !strcmp(h->proto, "h2");
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
            named_by_connection(h->fields, h->fields_len, f->name))
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
        gw_slice_t c = join(x, h, "cookie", "; ");
        if (c.base)
            add(x, GW_SLICE_LIT("cookie"), c);
    }
    const char *ip = s->peer_ip ? s->peer_ip : "unknown";
    if (r->add_x_forwarded) {
        gw_slice_t prev = join(x, h, "x-forwarded-for", ", ");
        add(x, GW_SLICE_LIT("X-Forwarded-For"),
            prev.base ? put(x, "%.*s, %s", (int)prev.len, prev.base, ip) : put(x, "%s", ip));
        add(x, GW_SLICE_LIT("X-Forwarded-Proto"),
            put(x, "%.*s", (int)h->scheme.len, h->scheme.base));
    }
    if (r->add_forwarded) {
        /* RFC 7239 §6: an IPv6 node is quoted and bracketed */
        int v6 = strchr(ip, ':') != NULL;
        gw_slice_t prev = join(x, h, "forwarded", ", ");
        add(x, GW_SLICE_LIT("Forwarded"),
            put(x, "%.*s%sfor=%s%s%s%s;proto=%.*s;host=\"%.*s\"", (int)prev.len,
                prev.base ? (const char *)prev.base : "", prev.base ? ", " : "", v6 ? "\"[" : "",
                ip, v6 ? "]" : "", v6 ? "\"" : "", (int)h->scheme.len, h->scheme.base,
                (int)authority.len, authority.base));
    }
    if (r->add_via) {
        /* RFC 9110 §7.6.3: received-protocol received-by */
        gw_slice_t prev = join(x, h, "via", ", ");
        add(x, GW_SLICE_LIT("Via"),
            put(x, "%.*s%s%s h2gate", (int)prev.len, prev.base ? (const char *)prev.base : "",
                prev.base ? ", " : "", h2 ? "2" : "1.1"));
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
        .body_len = h->end_stream ? 0 : h->content_length >= 0 ? h->content_length : -1,
        .idempotent = idem,
        .urgency = 3,
        .client = s->addr,
    };
    /* a zero-length body announced with content-length: 0 and no END_STREAM yet */
    if (!h->end_stream && h->content_length == 0)
        req->body_len = 0;
    return 0;
}

/* ---- response translation ----------------------------------------------------------------- */

#define MAX_RESP_FIELDS 128

/* Response fields for the client: hop-by-hop removed, names lowercased (HTTP/2 requires it,
 * HTTP/1.1 clients do not care), Via appended. `lower` holds the lowercased names. */
static size_t resp_fields(const px_t *px, const gw_back_field_t *in, size_t n, gw_field_t *out,
                          char *lower, size_t lower_size, int64_t *cl, int via)
{
    size_t k = 0, used = 0;
    *cl = -1;
    for (size_t i = 0; i < n && k < MAX_RESP_FIELDS - 1; i++) {
        gw_slice_t name = in[i].name;
        if (name_is(name, "content-length")) {
            long long v = 0;
            for (size_t j = 0; j < in[i].value.len; j++)
                v = v * 10 + (in[i].value.base[j] - '0'); /* validated by the back */
            *cl = v;
            continue;
        }
        if (hop_by_hop(name) || named_by_connection(in, n, name))
            continue;
        if (used + name.len > lower_size)
            break;
        for (size_t j = 0; j < name.len; j++) {
            uint8_t ch = name.base[j];
            lower[used + j] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        }
        out[k++] = (gw_field_t){{(const uint8_t *)lower + used, name.len}, in[i].value};
        used += name.len;
    }
    if (via && px->route->add_via && k < MAX_RESP_FIELDS)
        out[k++] = (gw_field_t){GW_SLICE_LIT("via"), GW_SLICE_LIT("1.1 h2gate")};
    return k;
}

/* ---- flow control --------------------------------------------------------------------------- */

static void unpause(px_t *px)
{
    if (!px->paused)
        return;
    px->paused = 0;
    gw_list_remove(&px->plink);
    if (px->bx)
        gw_back_resume_reading(px->bx);
}

static void check_pressure(px_t *px)
{
    gw_proxy_t *p = px->p;
    if (px->closed || !px->bx || px->paused)
        return;
    if (px->s->ops->pending(px->s) < p->cfg->limits.body_buffer)
        return;
    px->paused = 1;
    px->paused_since = uv_now(p->loop);
    gw_list_push_back(&p->paused, &px->plink);
    gw_back_pause_reading(px->bx);
    if (p->sweep_open && !uv_is_active((uv_handle_t *)&p->sweep)) {
        uint64_t every = p->cfg->timeouts.body_ms / 4;
        uv_timer_start(&p->sweep, on_sweep, every ? every : 1, every ? every : 1);
    }
}

/* ---- ending ------------------------------------------------------------------------------- */

/* One line per routed request, when the front is done with it (the access log). */
static void log_request(px_t *px)
{
    GW_LOG_INFO("request",
                "peer=%s proto=%s method=%s path=%s status=%u upstream=%s result=%s ms=%llu",
                px->s->peer, px->proto, px->method, px->path, px->status,
                px->route->upstream_name,
                px->reset ? "reset" : px->resp_done ? "ok" : "client_gone",
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
    unpause(px);
    if (!px->req_done)
        do_reset(px, GW_CS_RESET_NO_ERROR); /* RFC 9113 §8.1: early response */
}

static void fail(px_t *px, int code)
{
    unpause(px);
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

/* ---- back callbacks ---------------------------------------------------------------------- */

static void b_interim(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    (void)x;
    px_t *px = ud;
    /* 100 Continue answers our own request body handling; 103 Early Hints goes to the
     * client (RFC 8297) */
    if (px->closed || h->status != 103)
        return;
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[8192];
    int64_t cl;
    size_t n = resp_fields(px, h->fields, h->fields_len, f, lower, sizeof(lower), &cl, 0);
    if (px->s->ops->interim(px->s, 103, f, n) < 0)
        do_reset(px, GW_CS_RESET_INTERNAL);
}

static void b_head(gw_back_exch_t *x, void *ud, const gw_back_head_t *h)
{
    (void)x;
    px_t *px = ud;
    if (px->closed)
        return;
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[16384];
    int64_t cl;
    size_t n = resp_fields(px, h->fields, h->fields_len, f, lower, sizeof(lower), &cl, 1);
    /* RFC 9110 §6.4.1: no content after HEAD, 204 and 304 */
    int no_body = px->s->head_only || h->status == 204 || h->status == 304 || cl == 0;
    px->status = (unsigned)h->status;
    px->resp_started = 1;
    if (px->s->ops->respond(px->s, (unsigned)h->status, f, n, cl, no_body) < 0) {
        do_reset(px, GW_CS_RESET_INTERNAL);
        return;
    }
    if (no_body)
        px->resp_done = 1; /* response_done() runs at on_complete, when the origin is done */
}

static void b_body(gw_back_exch_t *x, void *ud, gw_rslice_t b)
{
    (void)x;
    px_t *px = ud;
    if (px->closed || px->resp_done || px->reset)
        return;
    if (px->s->ops->body(px->s, b.buf, b.off, b.len, 0) < 0) {
        do_reset(px, GW_CS_RESET_INTERNAL);
        return;
    }
    check_pressure(px);
}

static void b_trailers(gw_back_exch_t *x, void *ud, const gw_back_field_t *tf, size_t tn)
{
    (void)x;
    px_t *px = ud;
    if (px->closed || px->resp_done || px->reset)
        return;
    gw_field_t f[MAX_RESP_FIELDS];
    char lower[8192];
    int64_t cl;
    size_t n = resp_fields(px, tf, tn, f, lower, sizeof(lower), &cl, 0);
    if (px->s->ops->trailers(px->s, f, n) < 0)
        do_reset(px, GW_CS_RESET_INTERNAL);
    else
        px->resp_done = 1;
}

static void b_complete(gw_back_exch_t *x, void *ud)
{
    (void)x;
    px_t *px = ud;
    px->bx = NULL;
    unpause(px);
    if (px->closed || px->reset)
        return;
    if (!px->resp_done && px->s->ops->body(px->s, NULL, 0, 0, 1) < 0) {
        do_reset(px, GW_CS_RESET_INTERNAL);
        return;
    }
    response_done(px);
}

static void b_error(gw_back_exch_t *x, void *ud, int code)
{
    (void)x;
    px_t *px = ud;
    px->bx = NULL;
    fail(px, code);
}

static const gw_back_cbs_t back_cbs = {b_interim, b_head, b_body, b_trailers, b_complete, b_error};

/* ---- stall sweep ---------------------------------------------------------------------------- */

/* A client that keeps its window shut holds at most the buffer bound, and only for
 * timeouts.body: then its stream is reset and the origin exchange dropped. */
static void on_sweep(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop);
    gw_list_foreach_safe(it, tmp, &p->paused)
    {
        px_t *px = GW_CONTAINER_OF(it, px_t, plink);
        if (now - px->paused_since < p->cfg->timeouts.body_ms)
            continue;
        GW_LOG_INFO("client_stalled", "peer=%s upstream=%s pending=%zu", px->s->peer,
                    px->route->upstream_name, px->s->ops->pending(px->s));
        p->stats.stalled++;
        unpause(px);
        if (px->bx) {
            gw_back_exch_t *bx = px->bx;
            px->bx = NULL;
            gw_back_cancel(bx);
        }
        do_reset(px, GW_CS_RESET_CANCEL);
    }
    if (gw_list_empty(&p->paused))
        uv_timer_stop(&p->sweep);
}

/* ---- front entry points ---------------------------------------------------------------------- */

int gw_proxy_request(gw_proxy_t *p, gw_cstream_t *s, const gw_req_head_t *h)
{
    p->stats.requests++;
    s->proxy_data = NULL;
    const gw_cfg_route_t *r = gw_proxy_route(p, h->authority, h->path);
    if (!r) {
        GW_LOG_INFO("no_route", "peer=%s proto=%s method=%.*s authority=%.*s path=%.*s status=404",
                    s->peer, h->proto, (int)h->method.len, h->method.base, (int)h->authority.len,
                    h->authority.base, (int)h->path.len, h->path.base);
        return gw_proxy__answer(s, 404, "h2gate: no route for this host and path\n");
    }
    px_t *px = gw_calloc(1, sizeof(*px));
    if (!px)
        return GW_E_NOMEM;
    px->p = p;
    px->s = s;
    px->route = r;
    px->req_cl = h->content_length;
    px->req_done = h->end_stream != 0;
    px->proto = h->proto;
    px->started_ms = uv_now(p->loop);
    snprintf(px->method, sizeof(px->method), "%.*s", (int)h->method.len, h->method.base);
    snprintf(px->path, sizeof(px->path), "%.*s", (int)h->path.len, h->path.base);
    gw_list_init(&px->plink);
    s->proxy_data = px;

    xlate_t x = {0};
    gw_back_req_t req;
    int rv = translate(px, h, &x, &req);
    if (rv == 0) {
        if (!p->back)
            rv = GW_E_CLOSED;
        else
            rv = gw_back_request(p->back, r->upstream, &req, &back_cbs, px, &px->bx);
        if (rv == 0)
            p->stats.origin_requests++;
    }
    gw_free(x.f);
    gw_free(x.buf);
    if (rv == GW_E_PARSE) {
        GW_LOG_INFO("bad_request", "peer=%s proto=%s reason=\"host does not match :authority\"",
                    s->peer, h->proto);
        px->resp_started = 1;
        do_reset(px, GW_CS_RESET_PROTOCOL);
        return 0;
    }
    if (rv < 0) {
        px->bx = NULL;
        fail(px, rv == GW_E_INVAL ? GW_E_PARSE : rv);
    }
    return 0;
}

static void on_written(void *ud, int status)
{
    (void)status;
    wctx_t *w = ud;
    px_t *px = w->px;
    px->body_inflight -= w->len;
    if (!px->closed)
        px->s->ops->credit(px->s, w->len);
    gw_free(w);
}

void gw_proxy_body(gw_proxy_t *p, gw_cstream_t *s, const uint8_t *data, size_t len)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || !px->bx || px->resp_done || px->reset || len == 0) {
        s->ops->credit(s, len); /* nobody wants these bytes: dropped */
        return;
    }
    px->req_sent += len;
    gw_rbuf_t *b = gw_rbuf_new(len);
    wctx_t *w = gw_malloc(sizeof(*w));
    int rv = GW_E_NOMEM;
    if (b && w) {
        memcpy(b->data, data, len);
        b->len = len;
        *w = (wctx_t){px, len};
        px->body_inflight += len;
        rv = gw_back_write_body(px->bx, b, 0, len, on_written, w);
        if (rv < 0)
            px->body_inflight -= len;
    }
    gw_rbuf_unref(b); /* the back holds its own reference */
    if (rv < 0) {
        gw_free(w);
        s->ops->credit(s, len);
        /* more bytes than the announced Content-Length, or out of memory: never sent on as a
         * desynchronised request */
        gw_back_exch_t *bx = px->bx;
        px->bx = NULL;
        gw_back_cancel(bx);
        unpause(px);
        if (px->resp_started)
            do_reset(px, rv == GW_E_INVAL ? GW_CS_RESET_PROTOCOL : GW_CS_RESET_INTERNAL);
        else if (rv == GW_E_INVAL)
            do_reset(px, GW_CS_RESET_PROTOCOL);
        else
            fail(px, rv);
    }
}

void gw_proxy_body_end(gw_proxy_t *p, gw_cstream_t *s, const gw_field_t *tr, size_t n)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px || px->req_done)
        return;
    px->req_done = 1;
    if (!px->bx || px->reset)
        return;
    if (px->req_cl >= 0 && (uint64_t)px->req_cl != px->req_sent) {
        /* RFC 9113 §8.1.1: content-length disagrees with the DATA: malformed */
        gw_back_exch_t *bx = px->bx;
        px->bx = NULL;
        gw_back_cancel(bx);
        do_reset(px, GW_CS_RESET_PROTOCOL);
        return;
    }
    if (px->req_cl == 0)
        return; /* no body was announced to the origin */
    int rv = gw_back_end_body(px->bx, px->req_cl < 0 ? tr : NULL,
                              px->req_cl < 0 ? n : 0);
    if (rv < 0) {
        gw_back_exch_t *bx = px->bx;
        px->bx = NULL;
        gw_back_cancel(bx);
        fail(px, rv == GW_E_INVAL ? GW_E_PARSE : rv);
    }
}

void gw_proxy_writable(gw_proxy_t *p, gw_cstream_t *s)
{
    px_t *px = s->proxy_data;
    if (!px || !px->paused)
        return;
    if (s->ops->pending(s) < p->cfg->limits.body_buffer)
        unpause(px);
}

void gw_proxy_stream_closed(gw_proxy_t *p, gw_cstream_t *s)
{
    (void)p;
    px_t *px = s->proxy_data;
    if (!px)
        return;
    s->proxy_data = NULL;
    log_request(px);
    px->closed = 1;
    unpause(px);
    if (px->bx) {
        gw_back_exch_t *bx = px->bx;
        px->bx = NULL;
        gw_back_cancel(bx); /* pending body writes report back here: px->closed stops them */
    }
    GW_ASSERT(px->body_inflight == 0);
    gw_free(px);
}
