/* front/throttle.c — per-connection throttling: the response buckets (connection,
 * client address, route), the request body bucket, and how the HTTP/2 session's data budget
 * and window credit follow them. */
#include "common/alloc.h"
#include "common/bucket.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "h2/session.h"

/* ---- throttle ---------------------------------------------------------------------------- */

/* Response bytes spend tokens of up to three buckets as they are emitted: the connection's
 * (throttle.response_rate), the client address's (throttle.per_client_rate, shared by every
 * connection of that client in every worker) and, per request, its route's on this connection
 * (routes[].response_rate). When one runs short the emitter stops — the bytes stay in the
 * HTTP/2 session or in c->b->out, both counted by ops->pending, so the proxy stops reading the
 * origin — and the connection's thr timer is armed for when a grain of tokens (16 KiB or a
 * hundredth of a second, bucket.h) is back: nothing sleeps, nothing spins. Uploads spend the
 * body bucket: HTTP/1.1 stops reading the socket, HTTP/2 holds back window credit. */

uint64_t gw_front__now_us(void)
{
    return gw_now_ns() / 1000;
}

/* Wake up in wait_us: at least 1 ms (libuv timers count ms; never a 0 ms timer). An earlier
 * wake-up already armed is kept. */
void gw_front__thr_arm(conn_t *c, uint64_t wait_us)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    c->thr->waits++;
    uint64_t ms = (wait_us + 999) / 1000;
    if (ms == 0)
        ms = 1;
    uint64_t due = uv_now(&W(c)->loop) + ms;
    if (gw_theap_queued(&c->thr->tnode) && c->thr->tnode.due <= due)
        return;
    gw_front__ticker_set(W(c), &c->thr->tnode, due);
}

/* Request body bytes are limited by throttle.request_body_rate. */
int gw_front__body_limited(const conn_t *c)
{
    return c->thr && gw_bucket_limited(&c->thr->body_b);
}

/* One local bucket's say in out_avail(): a is lowered to what b has, or to 0 when b has less
 * than its grain (or than `want`, when less is wanted), with *wait the time until it has. */
static void limit_by(gw_bucket_t *b, uint64_t now, size_t want, size_t *a, uint64_t *wait)
{
    if (!b || !gw_bucket_limited(b))
        return;
    uint64_t v = gw_bucket_avail(b, now);
    size_t g = gw_bucket_grain(b);
    if (g > want)
        g = want;
    if (v < g) {
        *a = 0;
        uint64_t w = gw_bucket_wait_us(b, g, now);
        if (w > *wait)
            *wait = w;
    } else if (v < *a) {
        *a = (size_t)v;
    }
}

/* While a client's bytes wait for a lease, its writers look again this often. */
#define LEASE_POLL_US 5000

/* A lease from what the instances share: about 100 ms of the client's rate, at least a grain. */
static uint64_t lease_size(conn_t *c)
{
    uint64_t rate = CFG(c)->throttle.per_client_rate;
    uint64_t l = rate / 10;
    size_t g = gw_bucket_table_grain(c->thr->client);
    return l > g ? l : g;
}

/* Ask the cluster for want bytes of the client's rate; 0, or negative (decide locally). */
static int lease_ask(conn_t *c, uint64_t want, uint64_t token)
{
    gw_front_t *w = W(c);
    const gw_cfg_throttle_t *th = &CFG(c)->throttle;
    char key[64];
    int kl = gw_bucket_addr_text(&c->addr.sa, th->ipv6_prefix, key, sizeof(key));
    if (!kl)
        return GW_E_INVAL;
    uint64_t burst =
        th->per_client_burst ? th->per_client_burst : gw_bucket_default_burst(th->per_client_rate);
    return w->ops->lease(w, (const uint8_t *)key, (size_t)kl, th->per_client_rate, burst, want,
                         token);
}

/* Response bytes the connection may emit now (SIZE_MAX: unlimited), under the connection and
 * client buckets and rb (a route's, may be NULL). 0 with *wait > 0: wake up then. */
size_t gw_front__out_avail(conn_t *c, uint64_t now, size_t want, gw_bucket_t *rb, uint64_t *wait)
{
    size_t a = SIZE_MAX;
    *wait = 0;
    limit_by(&c->thr->resp_b, now, want, &a, wait);
    limit_by(rb, now, want, &a, wait);
    if (c->thr->client) {
        gw_bucket_table_t *t = c->g->clients;
        size_t g = gw_bucket_table_grain(c->thr->client);
        uint64_t v, ask = 0, token = 0;
        int leased = 0;
        if (CFG(c)->cluster.enabled) {
            /* with a cluster, also no more than the bytes Redis granted this instance */
            leased = gw_bucket_table_avail_leased(t, c->thr->client, lease_size(c), now, &v, &ask,
                                                  &token);
            if (ask && lease_ask(c, ask, token) < 0) /* could not ask: local, its share */
                gw_bucket_table_lease_grant(
                    t, token, 0, W(c)->ops->local_share ? W(c)->ops->local_share(W(c)) : 1, now);
        } else {
            v = gw_bucket_table_avail(t, c->thr->client, now);
        }
        if (g > want)
            g = want;
        if (v < g) {
            a = 0;
            uint64_t w =
                leased ? LEASE_POLL_US : gw_bucket_table_wait_us(t, c->thr->client, g, now);
            if (w > *wait)
                *wait = w;
        } else if (v < a) {
            a = (size_t)v;
        }
    }
    return a;
}

/* n response bytes were emitted. The client bucket may go into debt when another connection of
 * the same client spent it meanwhile (another worker): the debt is paid before the next
 * grant, so the long-run rate holds. */
void gw_front__out_charge(conn_t *c, size_t n, gw_bucket_t *rb, uint64_t now)
{
    if (!n)
        return;
    W(c)->m.throttled_bytes += n;
    gw_bucket_spend(&c->thr->resp_b, n, now);
    if (rb)
        gw_bucket_spend(rb, n, now);
    if (c->thr->client)
        gw_bucket_table_spend(c->g->clients, c->thr->client, n, now);
}

/* The connection's bucket for route r, or NULL when r has no response_rate (or no memory for
 * the table: then the route is not throttled on this connection). */
gw_bucket_t *gw_front__route_bucket(conn_t *c, const gw_cfg_route_t *r)
{
    const gw_config_t *cfg = CFG(c);
    if (!r || !r->response_rate)
        return NULL;
    if (!c->thr->route_b &&
        !(c->thr->route_b = gw_calloc(cfg->routes_len, sizeof(*c->thr->route_b))))
        return NULL;
    gw_bucket_t *b = &c->thr->route_b[r - cfg->routes];
    if (!gw_bucket_limited(b))
        gw_bucket_init(b, r->response_rate, 0, gw_front__now_us());
    return b;
}

/* How long the throttled tail of c->b->out takes at the slowest configured rate (for the close
 * deadline of a finishing connection). */
uint64_t gw_front__tail_ms(conn_t *c)
{
    uint64_t rate = UINT64_MAX;
    if (!c->thr || !c->b)
        return 0;
    if (c->thr->resp_b.rate)
        rate = c->thr->resp_b.rate;
    if (c->thr->client && CFG(c)->throttle.per_client_rate < rate)
        rate = CFG(c)->throttle.per_client_rate;
    if (c->h1 && c->h1->rb && c->h1->rb->rate < rate)
        rate = c->h1->rb->rate;
    return rate == UINT64_MAX || !c->b->out.len ? 0 : (uint64_t)c->b->out.len * 1000 / rate + 1;
}

/* ---- HTTP/2 throttle ------------------------------------------------------------------------ */

/* Before a send: the session may frame as many DATA bytes as the connection and client buckets
 * allow now, and each route-limited stream as many as its route's bucket allows. */
void gw_front__h2_budget(conn_t *c, uint64_t now)
{
    if (!c->thr || !c->thr->out)
        return;
    uint64_t w;
    c->thr->h2_given = gw_front__out_avail(c, now, SIZE_MAX, NULL, &w);
    gw_h2_session_set_data_budget(c->h2, 0, c->thr->h2_given);
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->rb)
            continue;
        size_t a = SIZE_MAX;
        limit_by(x->rb, now, SIZE_MAX, &a, &w);
        x->given = a;
        gw_h2_session_set_data_budget(c->h2, x->sid, a);
    }
}

/* Charge the route buckets for what streams in list framed. Streams sharing a route each got
 * the whole balance, so the bucket may go into debt by a grain or so: paid back before the
 * next grant. */
static void h2_charge_streams(conn_t *c, gw_list_t *list, uint64_t now)
{
    gw_list_foreach(it, list)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->rb)
            continue;
        size_t left = gw_h2_session_data_budget(c->h2, x->sid);
        if (x->given != SIZE_MAX && x->given >= left)
            gw_bucket_spend(x->rb, x->given - left, now);
        x->given = left;
    }
}

/* After a send: charge what was framed, and arm the throttle timer when DATA is held back by
 * an empty budget. */
void gw_front__h2_charge(conn_t *c, uint64_t now)
{
    if (!c->thr || !c->thr->out)
        return;
    size_t left = gw_h2_session_data_budget(c->h2, 0);
    if (c->thr->h2_given != SIZE_MAX && c->thr->h2_given >= left)
        gw_front__out_charge(c, c->thr->h2_given - left, NULL, now);
    c->thr->h2_given = left;
    h2_charge_streams(c, &c->b->h2_streams, now);
    h2_charge_streams(c, &c->b->h2_gone, now);
    uint64_t wait = UINT64_MAX;
    int queued = 0;
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        size_t q = gw_h2_session_stream_queued(c->h2, x->sid);
        if (!q)
            continue;
        queued = 1;
        if (x->rb && x->given == 0) {
            size_t g = gw_bucket_grain(x->rb);
            uint64_t w = gw_bucket_wait_us(x->rb, g < q ? g : q, now);
            if (w < wait)
                wait = w;
        }
    }
    if (queued && left == 0) {
        uint64_t w;
        if (gw_front__out_avail(c, now, SIZE_MAX, NULL, &w) > 0 || w == 0)
            w = 1000; /* another worker spent the client's tokens meanwhile: look again */
        if (w < wait)
            wait = w;
    }
    if (wait != UINT64_MAX) {
        c->flags |= GW_CONN_F_THR_OUT;
        gw_front__thr_arm(c, wait);
    }
}

/* Give back held window credit as the upload bucket allows. The peer may send only what our
 * windows allow (RFC 9113 §6.9), so once the initial windows are used up the upload runs at
 * the rate the credit is given back — reads go on, so PING, SETTINGS and WINDOW_UPDATE for
 * the downloads on the same connection are never held up. */
void gw_front__h2_credit_release(conn_t *c, uint64_t now)
{
    int any = 0;
    c->flags &= ~GW_CONN_F_THR_IN;
    if (!c->b)
        return; /* no streams */
    gw_list_foreach(it, &c->b->h2_streams)
    {
        h2s_t *x = GW_CONTAINER_OF(it, h2s_t, link);
        if (!x->owed)
            continue;
        uint64_t v = gw_bucket_avail(&c->thr->body_b, now);
        size_t g = gw_bucket_grain(&c->thr->body_b);
        if (g > x->owed)
            g = x->owed;
        size_t k = v < x->owed ? (size_t)v : x->owed;
        if (v >= g) {
            gw_bucket_spend(&c->thr->body_b, k, now);
            x->owed -= k;
            gw_h2_session_consume(c->h2, x->sid, k);
            any = 1;
        }
        if (x->owed) {
            size_t g2 = gw_bucket_grain(&c->thr->body_b);
            c->flags |= GW_CONN_F_THR_IN;
            gw_front__thr_arm(c,
                              gw_bucket_wait_us(&c->thr->body_b, g2 < x->owed ? g2 : x->owed, now));
            break;
        }
    }
    if (any && gw_h2_session_want_write(c->h2))
        gw_front__kick(c); /* the WINDOW_UPDATEs */
}

/* The throttle timer: tokens are back. */
void gw_front__on_throttle(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    uint64_t now = gw_front__now_us();
    c->flags &= ~GW_CONN_F_THR_OUT;
    if (c->flags & GW_CONN_F_THR_IN) {
        if (c->state == CS_H2) {
            gw_front__h2_credit_release(c, now);
        } else {
            uint64_t w = gw_bucket_wait_us(&c->thr->body_b, gw_bucket_grain(&c->thr->body_b), now);
            if (w) {
                gw_front__thr_arm(c, w);
            } else {
                c->flags &= ~GW_CONN_F_THR_IN;
                GW_LOG_DEBUG("read_resumed", "peer=%s reason=request_body_rate", PEER(c));
                gw_front__process(c); /* reads start again */
            }
        }
    }
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_H2) {
        gw_front__h2_pump(c);
    } else if (gw_front__out_len(c)) {
        /* the held tail: a write the socket takes at once (try_write) has no callback, so the
         * bookkeeping of after_write (origin resume, close-after) runs here */
        if (gw_front__flush(c) < 0)
            gw_front__conn_close(c, "write_error");
        else
            gw_front__after_write(c, 0, 0);
    }
}
