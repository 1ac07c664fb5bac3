/* proxy/revalidate.c — stale-while-revalidate (RFC 5861 §3): a stale entry within its window
 * is sent to the client at once (cache.c), and one request of the cache's own revalidates it
 * in the background.
 *
 * The background request is an ordinary origin exchange whose client is the cache: a client
 * stream (gw_cstream_t) made here, whose ops take the answer and drop it. Everything else is
 * the path a client's revalidation takes: the request goes out with the stored validators
 * (cache.c's gw_proxy__cache_validators: If-None-Match, If-Modified-Since) or, without them,
 * unconditionally; the cache filter does what it does for a client (a 304 refreshes the stored
 * head through gw_cache_merge_304, a storable answer replaces the entry, one that may not be
 * stored removes it, a 5xx or no answer leaves the stale one); the route's timeouts are the
 * back's, as for any exchange. The stream is a GET of the client's URL with the client's
 * fields (the answer's Vary key is made of them), without its own conditions, Range and
 * Cache-Control: what the store needs is the whole answer, validated for everyone. It goes to
 * the origin at RFC 9218 urgency 7, behind the clients' requests, and never coalesces (others
 * may not join it: nobody waits for it).
 *
 * One at a time per stored answer, whichever worker finds it stale: the entry's claim
 * (gw_cache_claim), taken here and released when the request ends, however it ends. While it
 * is held, the requests within the window get the stale answer and start nothing. A worker
 * runs at most cache.max_background_revalidations at once (a scan over many stale URLs must
 * not make as many exchanges nobody waits for): past it, a request within the window gets the
 * stale answer at once and starts nothing (RFC 5861 §3 lets a cache serve it within the
 * window; the revalidation it SHOULD attempt is left to a later request, when one can start),
 * counted as GW_CACHE_BG_SKIPPED. Revalidating in the request instead would make its client
 * wait for the slow origin the window is there to hide, and load that origin as much.
 *
 * Lifetime: a revalidation lives in its proxy's list p->bg from its start until its stream
 * ended (its answer whole, an error answered, a reset); then it waits in p->bg_done for the
 * next loop turn (a stream is never closed from inside a call into the proxy: stream.h), when
 * the stream is closed, the result counted, the claim released and the entry dropped. When the
 * worker's proxy closes (a reload retiring the generation, the worker stopping), every
 * revalidation still running is cancelled there and then: the stale entry stays, and the next
 * request in its window starts another. Nothing waits for one: a graceful stop drains clients'
 * connections only. */
#include <stdio.h>
#include <string.h>

#include "cache/cache.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

struct gw_proxy_bg {
    gw_list_t link; /* in p->bg while its stream runs, then in p->bg_done */
    gw_proxy_t *p;
    gw_cstream_t s;      /* the stream whose client is the cache */
    gw_alog_t log;       /* what the cache filter says of the answer (s.log: cache, status) */
    gw_req_head_t head;  /* GET, the client's URL and fields (in mem) */
    gw_cache_entry_t *e; /* the stale entry: held and claimed */
    unsigned status;     /* the head the stream got; 0: none */
    uint64_t started_ns; /* gw_now_ns() at the start */
    unsigned done : 1;   /* the stream ended: in p->bg_done */
    unsigned reset : 1;  /* ... by a reset (the answer broke after its head) */
    unsigned stored : 1; /* the cache filter kept the answer (px->cache_stored) */
    char peer_ip[64];    /* the client's address that found the entry stale (X-Forwarded-For) */
    struct sockaddr_storage addr; /* the same, for the upstream's consistent hashing */
    gw_field_t *fields;           /* head.fields, their bytes after them (one block) */
};
typedef struct gw_proxy_bg bg_t;

/* ---- the stream whose client is the cache ---------------------------------------------------- */

static void on_reap(uv_timer_t *t);

/* The stream ended: closed on the next loop turn (never inside a call into the proxy). */
static void bg_ended(bg_t *bg)
{
    if (bg->done)
        return;
    bg->done = 1;
    gw_list_remove(&bg->link);
    gw_list_push_back(&bg->p->bg_done, &bg->link);
    if (bg->p->bg_open && !uv_is_active((uv_handle_t *)&bg->p->bg_reap))
        uv_timer_start(&bg->p->bg_reap, on_reap, 0, 0);
}

static int bg_respond(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n, int64_t cl,
                      int end_stream)
{
    (void)f, (void)n, (void)cl;
    bg_t *bg = s->impl;
    bg->status = status;
    px_t *px = s->proxy_data;
    bg->stored = px && px->cache_stored;
    if (end_stream)
        bg_ended(bg);
    return 0;
}

static int bg_interim(gw_cstream_t *s, unsigned status, const gw_field_t *f, size_t n)
{
    (void)s, (void)status, (void)f, (void)n;
    return 0; /* a 103 is nobody's business here */
}

static int bg_body(gw_cstream_t *s, gw_rbuf_t *buf, size_t off, size_t len, int end_stream)
{
    (void)buf, (void)off, (void)len; /* the store holds the bytes it keeps: these go */
    if (end_stream)
        bg_ended(s->impl);
    return 0;
}

static int bg_trailers(gw_cstream_t *s, const gw_field_t *f, size_t n)
{
    (void)f, (void)n;
    bg_ended(s->impl);
    return 0;
}

static void bg_reset(gw_cstream_t *s, gw_cs_reset_t code)
{
    (void)code;
    bg_t *bg = s->impl;
    bg->reset = 1;
    bg_ended(bg);
}

static void bg_credit(gw_cstream_t *s, size_t n)
{
    (void)s, (void)n; /* no request body */
}

static size_t bg_pending(gw_cstream_t *s)
{
    (void)s;
    return 0; /* takes every byte at once: the origin is never paused for it */
}

static int bg_urgency(gw_cstream_t *s)
{
    (void)s;
    return 7; /* RFC 9218 §4.1: the lowest; clients' requests leave the origin queue first */
}

static const gw_cstream_ops_t bg_ops = {
    .respond = bg_respond,
    .interim = bg_interim,
    .body = bg_body,
    .trailers = bg_trailers,
    .reset = bg_reset,
    .credit = bg_credit,
    .pending = bg_pending,
    .urgency = bg_urgency,
    .push = NULL,
};

/* ---- start --------------------------------------------------------------------------------- */

/* The client's fields the background request does not carry: its own conditions and Range
 * (the cache asks for the whole answer, with the stored validators), its Cache-Control and
 * Pragma (the request is the cache's, and a client's no-store must not keep the answer out),
 * and its credentials, Authorization and Cookie: the stored answer is revalidated for every
 * client, and an answer to one client's credentials may not refresh it unless it says
 * public, s-maxage or must-revalidate (RFC 9111 §3.5). */
static int dropped(gw_slice_t name)
{
    static const char *const drop[] = {
        "if-none-match", "if-modified-since", "if-range", "range", "cache-control",
        "pragma",        "authorization",     "cookie"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (gw_proxy__name_is(name, drop[i]))
            return 1;
    return 0;
}

static char *copy_slice(char *d, gw_slice_t in, gw_slice_t *out)
{
    if (in.len)
        memcpy(d, in.base, in.len);
    *out = (gw_slice_t){(const uint8_t *)d, in.len};
    return d + in.len;
}

/* bg->head: GET, px's scheme, authority and path, its fields but the dropped ones, copied into
 * one block. 0 or GW_E_NOMEM. */
static int copy_head(bg_t *bg, const px_t *px)
{
    const gw_req_head_t *h = &px->head;
    size_t n = 0, bytes = h->scheme.len + h->authority.len + h->path.len;
    for (size_t i = 0; i < h->fields_len; i++)
        if (!dropped(h->fields[i].name)) {
            n++;
            bytes += h->fields[i].name.len + h->fields[i].value.len;
        }
    gw_field_t *f = gw_malloc(n * sizeof(*f) + bytes + 1);
    if (!f)
        return GW_E_NOMEM;
    char *d = (char *)(f + n);
    gw_req_head_t *o = &bg->head;
    *o = (gw_req_head_t){.method = GW_SLICE_LIT("GET"),
                         .content_length = -1,
                         .end_stream = 1,
                         .proto = h->proto,
                         .route = px->route};
    d = copy_slice(d, h->scheme, &o->scheme);
    d = copy_slice(d, h->authority, &o->authority);
    d = copy_slice(d, h->path, &o->path);
    size_t k = 0;
    for (size_t i = 0; i < h->fields_len; i++) {
        if (dropped(h->fields[i].name))
            continue;
        d = copy_slice(d, h->fields[i].name, &f[k].name);
        d = copy_slice(d, h->fields[i].value, &f[k].value);
        k++;
    }
    o->fields = f;
    o->fields_len = n;
    bg->fields = f;
    return 0;
}

static void bg_free(bg_t *bg)
{
    gw_free(bg->fields);
    gw_free(bg);
}

int gw_proxy__revalidate(px_t *client, gw_cache_entry_t *e)
{
    gw_proxy_t *p = client->p;
    if (!p->back || !p->bg_open || !p->cache)
        return 0; /* closing: the client's own request revalidates */
    if (!gw_cache_claim(e))
        return 1; /* one is under way: the stale answer, and nothing more */
    if (p->nbg >= p->cfg->cache.max_background_revalidations) {
        gw_cache_claim_end(p->cache, e, GW_CACHE_BG_SKIPPED); /* the stale answer alone */
        return 1;
    }
    bg_t *bg = gw_calloc(1, sizeof(*bg));
    if (!bg || copy_head(bg, client) < 0) {
        gw_free(bg);
        gw_cache_claim_end(NULL, e, GW_CACHE_BG_N); /* not started: not counted */
        return 0;
    }
    bg->p = p;
    bg->e = gw_cache_ref(e);
    bg->started_ns = gw_now_ns();
    gw_alog_init(&bg->log);
    const gw_cstream_t *cs = client->s;
    if (cs->peer_ip)
        snprintf(bg->peer_ip, sizeof(bg->peer_ip), "%s", cs->peer_ip);
    if (cs->addr) {
        size_t al = cs->addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in);
        memcpy(&bg->addr, cs->addr, al);
    }
    bg->s = (gw_cstream_t){
        .ops = &bg_ops,
        .impl = bg,
        .peer = "cache",
        .peer_ip = cs->peer_ip ? bg->peer_ip : NULL,
        .addr = cs->addr ? (const struct sockaddr *)&bg->addr : NULL,
        .log = &bg->log,
        .tls = cs->tls, /* the key's scheme, and what the origin is told, as for the client */
        .no_hints = 1,
        .no_push = 1,
        .internal = 1,
        .listen = cs->listen,
        .error_pages = cs->error_pages,
    };
    gw_list_push_back(&p->bg, &bg->link);
    p->nbg++;
    px_t *px = gw_proxy__stream_new(p, &bg->s, &bg->head, client->route);
    if (!px) {
        gw_list_remove(&bg->link);
        p->nbg--;
        gw_cache_claim_end(NULL, e, GW_CACHE_BG_N);
        gw_cache_unref(bg->e);
        bg_free(bg);
        return 0;
    }
    px->cache_fwd = GW_PROXY_CFWD_STALE;
    /* the generation the client read before it found e: an invalidation since (RFC 9111
     * §4.4) keeps this revalidation's 304 from refreshing e back into the store */
    px->cache_gen = client->cache_gen;
    /* with the stored validators (RFC 9111 §4.3.1) when it has some; the stream holds e as
     * the stale entry either way (a 5xx then leaves it as it is: stand_in_stale in cache.c) */
    gw_cache_entry_t *held = gw_cache_ref(e);
    int conditional = gw_proxy__cache_validators(px, held);
    gw_proxy__pxx_t *x = conditional ? px->x : gw_proxy__px_x(px);
    if (x && !conditional)
        x->cstale = held;
    else if (!x)
        gw_cache_unref(held); /* no memory to hold it: revalidated without stale-if-error */
    GW_LOG_DEBUG("cache_revalidate_start", "path=%.*s conditional=%d", PX_PATH(px), conditional);
    gw_proxy__dispatch(px, NULL, 0); /* a failure at once is answered: the stream ends */
    gw_proxy__cache_lead(px);
    return 1;
}

/* ---- end ----------------------------------------------------------------------------------- */

/* How it ended: what the cache filter said of the answer (the access log's cache field of its
 * stream), whether it kept it, or that no answer came. */
static gw_cache_bg_t result_of(const bg_t *bg, int cancelled)
{
    if (!bg->done)
        return cancelled ? GW_CACHE_BG_CANCELLED : GW_CACHE_BG_FAILED;
    const char *c = bg->log.cache ? bg->log.cache : "";
    if (bg->reset || bg->status == 0 || !strcmp(c, "stale-if-error"))
        return GW_CACHE_BG_FAILED;
    if (!strcmp(c, "revalidated")) /* a 304: refreshed, or removed when it says no-store */
        return bg->stored ? GW_CACHE_BG_REFRESHED : GW_CACHE_BG_NOT_STORED;
    if (bg->stored)
        return GW_CACHE_BG_REPLACED;
    return bg->status >= 500 ? GW_CACHE_BG_FAILED : GW_CACHE_BG_NOT_STORED;
}

/* Close bg's stream (its exchange, if any, cancelled), count and log the result, release the
 * claim and the entry. */
static void bg_finish(bg_t *bg, int cancelled)
{
    gw_proxy_t *p = bg->p;
    gw_cache_bg_t r = result_of(bg, cancelled);
    gw_list_remove(&bg->link);
    p->nbg--;
    gw_proxy_stream_closed(p, &bg->s);
    uint64_t ms = (gw_now_ns() - bg->started_ns) / 1000000u;
    if (r == GW_CACHE_BG_FAILED || r == GW_CACHE_BG_CANCELLED)
        GW_LOG_INFO("cache_revalidate", "key=%.*s result=%s status=%u ms=%llu",
                    (int)(bg->e->keylen > 200 ? 200 : bg->e->keylen), bg->e->key,
                    gw_cache_bg_str(r), bg->status, (unsigned long long)ms);
    else
        GW_LOG_DEBUG("cache_revalidate", "key=%.*s result=%s status=%u ms=%llu",
                     (int)(bg->e->keylen > 200 ? 200 : bg->e->keylen), bg->e->key,
                     gw_cache_bg_str(r), bg->status, (unsigned long long)ms);
    gw_cache_claim_end(p->cache, bg->e, r);
    gw_cache_unref(bg->e);
    bg_free(bg);
}

static void on_reap(uv_timer_t *t)
{
    gw_proxy_t *p = t->data;
    while (!gw_list_empty(&p->bg_done))
        bg_finish(GW_CONTAINER_OF(p->bg_done.next, bg_t, link), 0);
}

void gw_proxy__revalidate_close(gw_proxy_t *p)
{
    if (p->bg_open)
        uv_timer_stop(&p->bg_reap);
    while (!gw_list_empty(&p->bg_done))
        bg_finish(GW_CONTAINER_OF(p->bg_done.next, bg_t, link), 0);
    while (!gw_list_empty(&p->bg))
        bg_finish(GW_CONTAINER_OF(p->bg.next, bg_t, link), 1);
}
