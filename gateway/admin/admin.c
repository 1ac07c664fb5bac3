/* admin/admin.c — the admin listener (admin.h): one libuv loop on its own thread, so nothing on
 * it holds up the signal loop or a client.
 *
 * It must keep answering probes whatever its other clients do:
 * - a request head must come within admin.timeout of the accept, and an answer go out within
 *   admin.timeout of being made, or the connection is closed;
 * - at ADMIN_CONNS_MAX connections a new one still gets in: the oldest connection not waiting
 *   for a scrape is closed for it (one still reading its head first);
 * - scrapes never take the last ADMIN_PROBE_SLOTS connections, so there is always one to
 *   close for a probe;
 * - a scrape (gw_server_metrics) waits up to a second for the workers' snapshots: it runs on a
 *   thread of its own (the scraper), and the connections that ask while one runs share the
 *   next, so the admin loop goes on answering /healthz and /readyz meanwhile.
 *
 * The cache's endpoints act on the process's one store (server.h gw_server_cache_*), which the
 * workers share under its shard locks: a purge here is seen by every worker's next lookup, and
 * holds one shard's lock at a time (a purge by prefix walks them all, on this loop). */
#include "admin/admin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "cache/cache.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/list.h"
#include "common/clock.h"
#include "common/log.h"
#include "h1/parser.h"
#include "h1/serializer.h"

#define ADMIN_HEAD_MAX 8192
#define ADMIN_CONNS_MAX 64
/* connections a scrape may never take: a health probe always finds one to take over */
#define ADMIN_PROBE_SLOTS 4

/* One admin connection's life: the head is read, then (for /metrics) it waits for a scrape,
 * then its answer is written and it closes. */
typedef enum {
    AC_HEAD,   /* reading the request head (timer: admin.timeout from the accept) */
    AC_SCRAPE, /* /metrics: waiting for the scraper (no timer: a scrape ends within ~1 s) */
    AC_WRITE,  /* the answer is being written (timer: admin.timeout) */
} astate_t;

static const char *astate_str(astate_t s)
{
    switch (s) {
    case AC_HEAD:
        return "head";
    case AC_SCRAPE:
        return "scrape";
    case AC_WRITE:
        return "write";
    }
    return "?";
}

struct gw_admin {
    gw_server_t *srv;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    uv_async_t scraped; /* the scraper has a result */
    uv_thread_t thread;
    gw_list_t conns; /* aconn_t, oldest first */
    size_t nconns;
    gw_list_t waiting; /* AC_SCRAPE connections for the next scrape */
    gw_list_t batch;   /* AC_SCRAPE connections the running scrape answers */
    size_t nscrape;    /* connections in AC_SCRAPE (waiting and batch) */
    int scraping;      /* the scraper runs for batch */
    uint64_t timeout_ms;
    char addr[64];
    /* A connection there is no memory for is accepted into refused and closed at once: left
     * unaccepted, libuv would stop polling the listener for good (uv__server_io stops reading
     * while a connection it handed over waits for uv_accept). */
    uv_tcp_t refused;
    int refusing;             /* refused is closing */
    int refuse_waits;         /* another such connection waits for refused's close */
    gw_log_limit_t nomem_log; /* event=admin_conn_nomem: one line a second */
    /* the scraper's thread, and what it shares with the loop (under mu) */
    uv_thread_t scraper;
    uv_mutex_t mu;
    uv_cond_t cond;
    int want; /* a scrape is asked for */
    int quit;
    int done; /* result holds a finished scrape */
    int result_rv;
    gw_bytes_t result;
};

typedef struct {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    gw_admin_t *a;
    gw_list_t link;  /* in a->conns */
    gw_list_t wlink; /* in a->waiting or a->batch while AC_SCRAPE */
    gw_h1_parser_t *p;
    gw_bytes_t in, out;
    int handles; /* open handles before free */
    astate_t state;
    int head_only; /* a HEAD request */
    int closing;
} aconn_t;

static void on_aconn_closed(uv_handle_t *h)
{
    aconn_t *c = h->data;
    if (--c->handles > 0)
        return;
    gw_h1_parser_del(c->p);
    gw_bytes_free(&c->in);
    gw_bytes_free(&c->out);
    gw_free(c);
}

/* why: one token for `reason=` (config/README.md, admin_conn_closed), or NULL for an end that
 * is not logged (the answer written, the client gone, the listener stopping). */
static void aconn_close(aconn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (why)
        GW_LOG_DEBUG("admin_conn_closed", "address=%s state=%s reason=%s", c->a->addr,
                     astate_str(c->state), why);
    if (c->state == AC_SCRAPE) {
        gw_list_remove(&c->wlink);
        c->a->nscrape--;
    }
    gw_list_remove(&c->link);
    c->a->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_aconn_closed);
    uv_close((uv_handle_t *)&c->timer, on_aconn_closed);
}

static void on_timeout(uv_timer_t *t)
{
    aconn_close(t->data, "timeout");
}

/* The answer written, or not: a write the socket refused (the client reset the connection
 * before taking it all) is logged as one refused at once is. UV_ECANCELED is a close while
 * writing (a timeout, a stop), logged by its own reason. */
static void on_written(uv_write_t *req, int status)
{
    if (status < 0 && status != UV_ECANCELED)
        aconn_close(req->data, "write_error");
    else
        aconn_close(req->data, NULL);
}

/* The answer, with an Allow field when allow is not NULL (a 405: RFC 9110 §15.5.6). */
static void respond_allow(aconn_t *c, unsigned status, const char *ctype, const char *allow,
                          const uint8_t *body, size_t len)
{
    if (c->state == AC_SCRAPE) {
        gw_list_remove(&c->wlink);
        c->a->nscrape--;
    }
    c->state = AC_WRITE;
    char clen[24];
    clen[gw_fmt_u64(clen, len)] = 0;
    gw_field_t f[] = {{GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")},
                      {GW_SLICE_LIT("content-type"), gw_slice_str(ctype)},
                      {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("no-store")},
                      {GW_SLICE_LIT("allow"), allow ? gw_slice_str(allow) : GW_SLICE_LIT("")}};
    int rv = gw_h1_response_head(&c->out, status, f, allow ? 4 : 3, (int64_t)len, 0);
    if (rv == 0 && !c->head_only && len)
        rv = gw_bytes_append(&c->out, body, len);
    if (rv < 0) {
        aconn_close(c, "nomem");
        return;
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_start(&c->timer, on_timeout, c->a->timeout_ms, 0); /* a reader that never reads */
    uv_buf_t b = uv_buf_init((char *)c->out.base, (unsigned)c->out.len);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        aconn_close(c, "write_error");
}

static void respond(aconn_t *c, unsigned status, const char *ctype, const uint8_t *body, size_t len)
{
    respond_allow(c, status, ctype, NULL, body, len);
}

static void respond_text(aconn_t *c, unsigned status, const char *text)
{
    respond(c, status, "text/plain; charset=utf-8", (const uint8_t *)text, strlen(text));
}

static void respond_json(aconn_t *c, unsigned status, const char *json)
{
    respond(c, status, "application/json", (const uint8_t *)json, strlen(json));
}

/* 405 with what the path allows. */
static void respond_405(aconn_t *c, const char *allow)
{
    char text[96];
    snprintf(text, sizeof(text), "h2gate admin: %s only here\n", allow);
    respond_allow(c, 405, "text/plain; charset=utf-8", allow, (const uint8_t *)text, strlen(text));
}

/* ---- scrapes ------------------------------------------------------------------------------ */

/* The scraper's thread: one gw_server_metrics at a time, when the loop asks. */
static void scraper_main(void *arg)
{
    gw_admin_t *a = arg;
    uv_mutex_lock(&a->mu);
    for (;;) {
        while (!a->want && !a->quit)
            uv_cond_wait(&a->cond, &a->mu);
        if (a->quit)
            break;
        a->want = 0;
        uv_mutex_unlock(&a->mu);
        gw_bytes_t body;
        gw_bytes_init(&body, 0);
        int rv = gw_server_metrics(a->srv, &body); /* up to a second */
        uv_mutex_lock(&a->mu);
        gw_bytes_free(&a->result);
        a->result = body;
        a->result_rv = rv;
        a->done = 1;
        uv_async_send(&a->scraped);
    }
    uv_mutex_unlock(&a->mu);
}

/* Start a scrape for the connections waiting, unless one runs (they get the next). */
static void scrape_kick(gw_admin_t *a)
{
    if (a->scraping || gw_list_empty(&a->waiting))
        return;
    gw_list_t *n;
    while ((n = gw_list_pop_front(&a->waiting)) != NULL)
        gw_list_push_back(&a->batch, n);
    a->scraping = 1;
    uv_mutex_lock(&a->mu);
    a->want = 1;
    uv_cond_signal(&a->cond);
    uv_mutex_unlock(&a->mu);
}

static void on_scraped(uv_async_t *h)
{
    gw_admin_t *a = h->data;
    uv_mutex_lock(&a->mu);
    int done = a->done, rv = a->result_rv;
    gw_bytes_t body = a->result;
    gw_bytes_init(&a->result, 0);
    a->done = 0;
    uv_mutex_unlock(&a->mu);
    if (!done)
        return;
    a->scraping = 0;
    gw_list_t *n;
    while ((n = a->batch.next) != &a->batch) { /* respond() takes each out of the batch */
        aconn_t *c = GW_CONTAINER_OF(n, aconn_t, wlink);
        if (rv < 0)
            respond_text(c, 500, "h2gate admin: out of memory\n");
        else
            respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", body.base, body.len);
    }
    gw_bytes_free(&body);
    scrape_kick(a);
}

/* ---- the cache ---------------------------------------------------------------------------- */

/* {"error":"msg"} into out (cap bytes, NUL-terminated): msg's quotes, backslashes and bytes
 * outside printable ASCII escaped (RFC 8259 §7), so that a parameter name can be quoted. */
static void json_error(char *out, size_t cap, const char *msg)
{
    size_t at = (size_t)snprintf(out, cap, "{\"error\":\"");
    for (const unsigned char *p = (const unsigned char *)msg; *p && at + 8 < cap; p++) {
        if (*p == '"' || *p == '\\')
            at += (size_t)snprintf(out + at, cap - at, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            at += (size_t)snprintf(out + at, cap - at, "\\u%04x", *p);
        else
            out[at++] = (char)*p;
    }
    snprintf(out + at, cap - at, "\"}\n");
}

static void respond_error(aconn_t *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void respond_error(aconn_t *c, unsigned status, const char *fmt, ...)
{
    char msg[384], json[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_error(json, sizeof(json), msg);
    respond_json(c, status, json);
}

static int hexval(uint8_t ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch |= 0x20;
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Percent-decode v (RFC 3986 §2.1; a "+" stays a "+": a URL holds no space for it to stand
 * for) into out (v.len bytes suffice): its length, or -1 - (offset of the bad "%"). */
static ssize_t pct_decode(gw_slice_t v, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] != '%') {
            out[n++] = (char)v.base[i];
            continue;
        }
        /* the parser refused such a target already (gw_http_is_request_target): checked
         * again, as this reads past the "%" */
        int hi = i + 2 < v.len ? hexval(v.base[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(v.base[i + 2]) : -1;
        if (lo < 0)
            return -1 - (ssize_t)i;
        out[n++] = (char)(hi << 4 | lo);
        i += 2;
    }
    return (ssize_t)n;
}

/* Why abs is not a URL gw_cache_url_parse takes (it refused it): for the 400's message. */
static const char *url_problem(gw_slice_t abs)
{
    const uint8_t *colon = abs.len ? memchr(abs.base, ':', abs.len) : NULL;
    size_t at = colon ? (size_t)(colon - abs.base) : 0;
    if (!colon || abs.len - at < 3 || colon[1] != '/' || colon[2] != '/')
        return "is not an absolute URL (scheme://host/path)";
    gw_slice_t scheme = {abs.base, at};
    if (!gw_slice_eq_nocase(scheme, GW_SLICE_LIT("http")) &&
        !gw_slice_eq_nocase(scheme, GW_SLICE_LIT("https")))
        return "is not an http or https URL (the cache holds no other)";
    size_t h = at + 3, e = h;
    while (e < abs.len && abs.base[e] != '/' && abs.base[e] != '?' && abs.base[e] != '#')
        e++;
    if (e == h)
        return "has no host";
    if (e < abs.len && abs.base[e] == '?')
        return "has a query but no path (write scheme://host/?query)";
    return "has an invalid authority (host[:port], without userinfo)";
}

/* POST /cache/purge?url=URL or ?prefix=URL: URL (percent-encoded in the query) is the absolute
 * URL as the client asked for it, keyed as the cache keys requests (gw_cache_key: the scheme
 * and the host lowercased, the default port dropped, the path and query byte for byte). */
static void cache_purge(aconn_t *c, gw_slice_t query)
{
    gw_slice_t val = {0};
    const char *which = NULL;
    size_t seen = 0;
    while (query.len) {
        const uint8_t *amp = memchr(query.base, '&', query.len);
        gw_slice_t item = {query.base, amp ? (size_t)(amp - query.base) : query.len};
        query = amp ? (gw_slice_t){amp + 1, query.len - item.len - 1} : (gw_slice_t){0};
        if (!item.len)
            continue;
        const uint8_t *eq = memchr(item.base, '=', item.len);
        gw_slice_t name = {item.base, eq ? (size_t)(eq - item.base) : item.len};
        gw_slice_t v = eq ? (gw_slice_t){eq + 1, item.len - name.len - 1} : (gw_slice_t){0};
        if (gw_slice_eq(name, GW_SLICE_LIT("url")))
            which = "url";
        else if (gw_slice_eq(name, GW_SLICE_LIT("prefix")))
            which = "prefix";
        else {
            respond_error(c, 400,
                          "unknown parameter \"%.*s\": give url=URL or prefix=URL, the URL "
                          "percent-encoded (its & as %%26)",
                          (int)(name.len > 64 ? 64 : name.len), (const char *)name.base);
            return;
        }
        val = v;
        seen++;
    }
    if (seen != 1) {
        respond_error(c, 400,
                      seen ? "give one parameter, url=URL or prefix=URL, once"
                           : "missing parameter: url=URL or prefix=URL (the absolute "
                             "URL, percent-encoded)");
        return;
    }
    if (!val.len) {
        respond_error(c, 400, "%s is empty", which);
        return;
    }
    char *abs = gw_malloc(val.len);
    char *key = NULL;
    if (!abs)
        goto nomem;
    ssize_t n = pct_decode(val, abs);
    if (n < 0) {
        respond_error(c, 400,
                      "%s has a bad percent-encoding at byte %zd (a %% is followed by two hex "
                      "digits)",
                      which, -n - 1);
        goto out;
    }
    /* what no request target holds (gw_http_is_request_target): no entry is keyed with it */
    for (ssize_t i = 0; i < n; i++)
        if ((uint8_t)abs[i] <= 0x20 || (uint8_t)abs[i] >= 0x7f) {
            respond_error(c, 400,
                          "%s decodes to a URL with byte 0x%02x at byte %zd: a control, a space "
                          "or a byte past ASCII, which no request target holds (a %%XX of the URL "
                          "itself is written %%25XX)",
                          which, (uint8_t)abs[i], i);
            goto out;
        }
    gw_slice_t url = {(const uint8_t *)abs, (size_t)n};
    gw_cache_url_t u;
    if (gw_cache_url_parse(url, &u) < 0) {
        respond_error(c, 400, "%s \"%.*s\" %s", which, (int)(n > 200 ? 200 : n), abs,
                      url_problem(url));
        goto out;
    }
    size_t klen = gw_cache_key(&u, NULL, 0);
    if (!(key = gw_malloc(klen)))
        goto nomem;
    gw_cache_key(&u, key, klen);
    size_t purged = 0;
    int prefix = which[0] == 'p';
    if (gw_server_cache_purge(c->a->srv, key, klen, prefix, &purged) < 0) {
        respond_error(c, 404, "no cache: no route has cache: true");
        goto out;
    }
    GW_LOG_INFO("cache_purged", "%s=%.*s purged=%zu", which, (int)(klen > 200 ? 200 : klen), key,
                purged);
    char json[48];
    snprintf(json, sizeof(json), "{\"purged\": %zu}\n", purged);
    respond_json(c, 200, json);
    goto out;
nomem:
    respond_text(c, 500, "h2gate admin: out of memory\n");
out:
    gw_free(abs);
    gw_free(key);
}

/* GET /cache/stats: the store's counters (gw_cache_stats_t) and its configured budget. */
static void cache_stats(aconn_t *c)
{
    gw_cache_stats_t st;
    size_t memory, max_object;
    if (gw_server_cache_stats(c->a->srv, &st, &memory, &max_object) < 0) {
        respond_error(c, 404, "no cache: no route has cache: true");
        return;
    }
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"hits\": %llu, \"misses\": %llu, \"inserts\": %llu, \"replaced\": %llu, "
             "\"evictions\": %llu, \"purged\": %llu, \"dropped\": %llu, \"refused\": %llu, "
             "\"bytes\": %llu, \"objects\": %llu, \"ghosts\": %llu, \"memory\": %zu, "
             "\"max_object\": %zu, \"stale_served\": {\"stale_if_error\": %llu, "
             "\"stale_while_revalidate\": %llu}, \"revalidations\": {\"not_modified\": %llu, "
             "\"modified\": %llu, \"failed\": %llu, \"not_stored\": %llu}}\n",
             (unsigned long long)st.hits, (unsigned long long)st.misses,
             (unsigned long long)st.inserts, (unsigned long long)st.replaced,
             (unsigned long long)st.evictions, (unsigned long long)st.purged,
             (unsigned long long)st.dropped, (unsigned long long)st.refused,
             (unsigned long long)st.bytes, (unsigned long long)st.objects,
             (unsigned long long)st.ghosts, memory, max_object,
             (unsigned long long)st.ev[GW_CACHE_EV_STALE_IF_ERROR],
             (unsigned long long)st.ev[GW_CACHE_EV_STALE_WHILE_REVALIDATE],
             (unsigned long long)st.ev[GW_CACHE_EV_REVALIDATED_NOT_MODIFIED],
             (unsigned long long)st.ev[GW_CACHE_EV_REVALIDATED_MODIFIED],
             (unsigned long long)st.ev[GW_CACHE_EV_REVALIDATION_FAILED],
             (unsigned long long)st.ev[GW_CACHE_EV_REVALIDATED_NOT_STORED]);
    respond_json(c, 200, json);
}

/* ---- requests ----------------------------------------------------------------------------- */

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    aconn_t *c = ud;
    gw_admin_t *a = c->a;
    c->head_only = gw_slice_eq(m->method, GW_SLICE_LIT("HEAD"));
    int get = c->head_only || gw_slice_eq(m->method, GW_SLICE_LIT("GET"));
    gw_slice_t path = m->target, query = {0};
    for (size_t i = 0; i < path.len; i++)
        if (path.base[i] == '?') {
            query = (gw_slice_t){path.base + i + 1, path.len - i - 1};
            path.len = i;
        }
    if (gw_slice_eq(path, GW_SLICE_LIT("/cache/purge"))) {
        if (gw_slice_eq(m->method, GW_SLICE_LIT("POST")))
            cache_purge(c, query);
        else
            respond_405(c, "POST");
        return 0;
    }
    if (!get) {
        respond_405(c, "GET, HEAD");
        return 0;
    }
    if (gw_slice_eq(path, GW_SLICE_LIT("/cache/stats"))) {
        cache_stats(c);
    } else if (gw_slice_eq(path, GW_SLICE_LIT("/metrics"))) {
        if (a->nscrape >= ADMIN_CONNS_MAX - ADMIN_PROBE_SLOTS) {
            respond_text(c, 503, "h2gate admin: too many scrapes at once\n");
            return 0;
        }
        c->state = AC_SCRAPE;
        a->nscrape++;
        gw_list_push_back(&a->waiting, &c->wlink);
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_timer_stop(&c->timer);
        scrape_kick(a);
    } else if (gw_slice_eq(path, GW_SLICE_LIT("/healthz"))) {
        respond_text(c, 200, "ok\n");
    } else if (gw_slice_eq(path, GW_SLICE_LIT("/readyz"))) {
        if (gw_server_ready(a->srv))
            respond_text(c, 200, "ready\n");
        else
            respond_text(c, 503, "not ready: starting or draining\n");
    } else {
        respond_text(c, 404,
                     "h2gate admin: /metrics, /healthz, /readyz, /cache/stats, /cache/purge\n");
    }
    return 0;
}

static int on_body(void *ud, const uint8_t *p, size_t n)
{
    (void)ud, (void)p, (void)n;
    return 0;
}

static int on_complete(void *ud)
{
    (void)ud;
    return 0;
}

static const gw_h1_callbacks_t cbs = {on_head, on_body, on_complete, NULL};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    aconn_t *c = h->data;
    if (gw_bytes_reserve(&c->in, 2048) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->in.base + c->in.len, (unsigned)(c->in.cap - c->in.len));
}

/* The head is gathered whole (at most ADMIN_HEAD_MAX bytes), then parsed in one piece, so the
 * slices the parser hands out point into one buffer that does not move. */
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    aconn_t *c = s->data;
    if (nread < 0) {
        aconn_close(c, NULL);
        return;
    }
    if (nread == 0 || c->state != AC_HEAD)
        return;
    c->in.len += (size_t)nread;
    const uint8_t *end = NULL;
    for (size_t i = 3; i < c->in.len && !end; i++)
        if (!memcmp(c->in.base + i - 3, "\r\n\r\n", 4))
            end = c->in.base + i + 1;
    if (!end) {
        if (c->in.len > ADMIN_HEAD_MAX)
            respond_text(c, 431, "h2gate admin: request head too large\n");
        return;
    }
    ssize_t n = gw_h1_parser_feed(c->p, c->in.base, (size_t)(end - c->in.base));
    if (c->state != AC_HEAD)
        return; /* on_head took it */
    unsigned st = n < 0 ? gw_h1_parser_error_status(c->p) : 0;
    const char *why = n < 0 ? gw_h1_parser_error_reason(c->p) : NULL;
    char text[256];
    snprintf(text, sizeof(text), "h2gate admin: bad request%s%s%s\n", why ? ": " : "",
             why ? why : "",
             why && !strcmp(why, "invalid request-target")
                 ? " (a % not followed by two hex digits, a space, a control or a byte past "
                   "ASCII: percent-encode them)"
                 : "");
    respond_text(c, st ? st : 400, text);
}

/* At ADMIN_CONNS_MAX, the connection to close for a new one: the oldest still reading its head,
 * else the oldest writing (never one waiting for a scrape: scrapes leave ADMIN_PROBE_SLOTS). */
static aconn_t *victim(gw_admin_t *a)
{
    aconn_t *writing = NULL;
    gw_list_foreach(it, &a->conns)
    {
        aconn_t *c = GW_CONTAINER_OF(it, aconn_t, link);
        if (c->state == AC_HEAD)
            return c;
        if (c->state == AC_WRITE && !writing)
            writing = c;
    }
    return writing;
}

static void on_connection(uv_stream_t *server, int status);

static void on_refused_closed(uv_handle_t *h)
{
    gw_admin_t *a = h->data;
    a->refusing = 0;
    if (a->refuse_waits && !uv_is_closing((uv_handle_t *)&a->listener)) {
        a->refuse_waits = 0;
        on_connection((uv_stream_t *)&a->listener, 0); /* the one libuv still holds */
    }
}

/* No memory for a new connection: take it off libuv's hands all the same and close it. */
static void refuse(gw_admin_t *a, uv_stream_t *server)
{
    if (a->refusing) {
        a->refuse_waits = 1; /* the listener is not polled until on_refused_closed */
        return;              /* nor is the connection counted until then */
    }
    uint64_t n = gw_log_limit(&a->nomem_log, gw_now_ms(), 1000); /* one line a second */
    if (n)
        GW_LOG_WARN("admin_conn_nomem", "address=%s refused=%llu", a->addr, (unsigned long long)n);
    a->refusing = 1;
    uv_tcp_init(&a->loop, &a->refused);
    a->refused.data = a;
    (void)uv_accept(server, (uv_stream_t *)&a->refused);
    uv_close((uv_handle_t *)&a->refused, on_refused_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
    gw_admin_t *a = server->data;
    if (status < 0)
        return;
    if (a->nconns >= ADMIN_CONNS_MAX) {
        aconn_t *v = victim(a);
        if (v)
            aconn_close(v, "evicted");
    }
    aconn_t *c = gw_calloc(1, sizeof(*c));
    if (!c) {
        refuse(a, server);
        return;
    }
    c->a = a;
    c->state = AC_HEAD;
    gw_bytes_init(&c->in, ADMIN_HEAD_MAX + 4096);
    gw_bytes_init(&c->out, 0);
    gw_h1_limits_t lim = {ADMIN_HEAD_MAX, 64};
    c->p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cbs, c);
    uv_tcp_init(&a->loop, &c->tcp);
    uv_timer_init(&a->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    gw_list_push_back(&a->conns, &c->link);
    a->nconns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || !c->p || a->nconns > ADMIN_CONNS_MAX) {
        aconn_close(c, "refused");
        return;
    }
    uv_timer_start(&c->timer, on_timeout, a->timeout_ms, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- start and stop ----------------------------------------------------------------------- */

static void on_stop(uv_async_t *h)
{
    gw_admin_t *a = h->data;
    uv_close((uv_handle_t *)&a->listener, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_close((uv_handle_t *)&a->scraped, NULL);
    gw_list_foreach_safe(it, tmp, &a->conns) aconn_close(GW_CONTAINER_OF(it, aconn_t, link), NULL);
}

static void admin_main(void *arg)
{
    gw_admin_t *a = arg;
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

static void scraper_stop(gw_admin_t *a)
{
    uv_mutex_lock(&a->mu);
    a->quit = 1;
    uv_cond_signal(&a->cond);
    uv_mutex_unlock(&a->mu);
    uv_thread_join(&a->scraper);
}

/* What gw_admin_start made, when its loop's thread does not run. */
static void admin_free(gw_admin_t *a)
{
    uv_close((uv_handle_t *)&a->listener, NULL);
    uv_close((uv_handle_t *)&a->scraped, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_loop_close(&a->loop);
    uv_mutex_destroy(&a->mu);
    uv_cond_destroy(&a->cond);
    gw_bytes_free(&a->result);
    gw_free(a);
}

int gw_admin_start(gw_server_t *srv, const gw_cfg_admin_t *cfg, gw_admin_t **out)
{
    *out = NULL;
    const gw_cfg_addr_t *addr = &cfg->addr;
    gw_admin_t *a = gw_calloc(1, sizeof(*a));
    if (!a || uv_loop_init(&a->loop) != 0) {
        gw_free(a);
        return GW_E_NOMEM;
    }
    if (uv_mutex_init(&a->mu) != 0 || uv_cond_init(&a->cond) != 0) {
        uv_loop_close(&a->loop);
        gw_free(a);
        return GW_E_NOMEM;
    }
    a->srv = srv;
    a->timeout_ms = cfg->timeout_ms;
    snprintf(a->addr, sizeof(a->addr), "%s", addr->text);
    gw_list_init(&a->conns);
    gw_list_init(&a->waiting);
    gw_list_init(&a->batch);
    gw_bytes_init(&a->result, 0);
    uv_tcp_init(&a->loop, &a->listener);
    a->listener.data = a;
    uv_async_init(&a->loop, &a->scraped, on_scraped);
    a->scraped.data = a;
    uv_async_init(&a->loop, &a->stop, on_stop);
    a->stop.data = a;
    /* the server's: refused when another process listens there; inherited from the old
     * process of a binary upgrade (both accept on it while the old one drains) */
    int fd, e = 0;
    int rv = gw_server_admin_socket(srv, addr, &fd);
    if (rv == 0 && (e = uv_tcp_open(&a->listener, fd)) < 0)
        close(fd);
    if (rv == 0 && e == 0)
        e = uv_listen((uv_stream_t *)&a->listener, 64, on_connection);
    if (rv == 0 && e < 0) {
        GW_LOG_ERROR("admin_failed", "address=%s reason=\"%s\"", addr->text, uv_strerror(e));
        rv = GW_E_IO;
    }
    if (rv < 0) {
        admin_free(a);
        return rv;
    }
    if (uv_thread_create(&a->scraper, scraper_main, a) != 0) {
        admin_free(a);
        return GW_E_IO;
    }
    if (uv_thread_create(&a->thread, admin_main, a) != 0) {
        scraper_stop(a);
        admin_free(a);
        return GW_E_IO;
    }
    GW_LOG_INFO("admin_listening",
                "address=%s paths=/metrics,/healthz,/readyz,/cache/stats,/cache/purge "
                "timeout_ms=%llu",
                addr->text, (unsigned long long)a->timeout_ms);
    *out = a;
    return 0;
}

void gw_admin_stop(gw_admin_t *a)
{
    if (!a)
        return;
    /* the scraper first: its last uv_async_send must find the loop still open */
    scraper_stop(a);
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    uv_loop_close(&a->loop);
    uv_mutex_destroy(&a->mu);
    uv_cond_destroy(&a->cond);
    gw_bytes_free(&a->result);
    gw_free(a);
}
