/* back/dispatch.c — gw_back_t: exchanges, the per-upstream wait queue, dispatch and retries.
 *
 * Dispatch order for an exchange: the balancer picks a healthy server with capacity; its most
 * recently used idle connection is taken (LIFO keeps a few connections warm and lets the
 * others reach idle_timeout), else a new one is dialled while the server is under
 * max_connections. When no server has capacity the exchange waits in its upstream's queue,
 * which is kept in comparator order; a connection that frees up or closes serves the queue
 * head first. New exchanges never overtake queued ones.
 *
 * Pipelining (an upstream's `pipeline` > 1, RFC 9112 §9.3.2): a bodyless idempotent request
 * joins the connection whose write is still pending in this loop iteration, else takes an idle
 * or new connection, else goes behind the requests in flight on a busy one (pipeline.c picks which)
 * instead of waiting in the queue. Writes are deferred to the back's `work` handle
 * (uv_prepare: after this iteration's callbacks, before the loop polls), so requests
 * dispatched together leave in one write(2). A pipelined
 * request that goes unanswered (the connection ends, or the response ahead of it turns out
 * long) is dispatched again from the same handle, never pipelined again, not counted as a
 * retry.
 *
 * Reentrancy: user callbacks may cancel their exchange; `in_cb` counts our frames on the stack
 * and `dead` defers the free to the outermost one.
 */
#include <string.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

/* Freed request-head buffers kept for the next requests (a head is serialized into one per
 * request: a malloc and a free each time otherwise), up to this many and this size. */
#define HEADS_KEEP GW_POOL_KEEP
#define HEADS_KEEP_CAP 4096

struct gw_back {
    uv_loop_t *loop;
    const gw_config_t *cfg;
    gw_back_upstream_t *ups;
    size_t ups_len;
    gw_back_stats_t st;
    uint64_t seq;
    gw_list_t exchs; /* every live exchange */
    gw_pool_t exch_pool;
    uv_prepare_t work;    /* deferred work: runs while flush or unanswered is not empty */
    gw_list_t flush;      /* connections with pipelined requests to write (flink) */
    gw_list_t unanswered; /* exchanges to dispatch again (rlink) */
    gw_bytes_t *heads;    /* spare request-head buffers (len 0), HEADS_KEEP slots */
    size_t heads_len;
    int handles; /* our timers still open */
    int deleting;
};

uv_loop_t *gw_back__loop(gw_back_t *b)
{
    return b->loop;
}

const gw_config_t *gw_back__config(gw_back_t *b)
{
    return b->cfg;
}

gw_back_stats_t *gw_back__stats(gw_back_t *b)
{
    return &b->st;
}

int gw_back_queue_fifo(const gw_back_req_t *a, uint64_t a_seq, const gw_back_req_t *b,
                       uint64_t b_seq)
{
    (void)a, (void)a_seq, (void)b, (void)b_seq;
    return 0;
}

int gw_back_queue_urgency(const gw_back_req_t *a, uint64_t a_seq, const gw_back_req_t *b,
                          uint64_t b_seq)
{
    (void)a_seq, (void)b_seq;
    return (int)a->urgency - (int)b->urgency;
}

int gw_back_status_for(int code)
{
    switch (code) {
    case GW_E_TIMEOUT:
        return 504;
    case GW_E_LIMIT:
    case GW_E_NOMEM:
    case GW_E_NOENT: /* every server ejected: unavailable for now, not a bad answer */
        return 503;
    default:
        return 502;
    }
}

/* ---- exchanges ------------------------------------------------------------------------------ */

static void exch_free(gw_back_exch_t *x)
{
    gw_back_t *b = x->up->back;
    GW_ASSERT(x->conn == NULL && !gw_list_linked(&x->qlink) && gw_list_empty(&x->wmarks));
    gw_list_remove(&x->all);
    gw_list_remove(&x->rlink);
    if (x->head.cap && x->head.cap <= HEADS_KEEP_CAP && b->heads_len < HEADS_KEEP) {
        x->head.len = 0;
        b->heads[b->heads_len++] = x->head;
    } else {
        gw_bytes_free(&x->head);
    }
    gw_iovq_free(&x->body);
    gw_pool_put(&b->exch_pool, x);
}

/* Fire marks without freeing x. status 0: those written so far; < 0: all of them. */
const char *gw_back_xphase_str(gw_back_xphase_t p)
{
    static const char *const n[] = {"waiting", "interim", "head", "complete"};
    return GW_NAME_OF(n, p, "?");
}

static void fire_marks(gw_back_exch_t *x, int status)
{
    while (!gw_list_empty(&x->wmarks)) {
        gw_back_wmark_t *m = GW_CONTAINER_OF(x->wmarks.next, gw_back_wmark_t, link);
        if (status == 0 && m->end > x->body_written)
            break;
        gw_list_remove(&m->link);
        gw_back_written_cb cb = m->cb;
        void *ud = m->user_data;
        gw_free(m);
        x->in_cb++;
        if (cb)
            cb(ud, status);
        x->in_cb--;
        if (x->dead && status == 0)
            break; /* cancelled from the callback: cancel fired the rest */
    }
}

void gw_back__exch_marks(gw_back_exch_t *x, int status)
{
    fire_marks(x, status);
    if (x->dead && x->in_cb == 0)
        exch_free(x);
}

static int leave(gw_back_exch_t *x)
{
    x->in_cb--;
    if (x->dead && x->in_cb == 0) {
        exch_free(x);
        return 1;
    }
    return x->dead;
}

int gw_back__deliver_head(gw_back_exch_t *x, const gw_back_head_t *h, int interim)
{
    x->in_cb++;
    if (interim) {
        if (x->phase < GW_BACK_X_INTERIM)
            x->phase = GW_BACK_X_INTERIM;
        if (x->cbs.on_interim)
            x->cbs.on_interim(x, x->user_data, h);
    } else {
        x->phase = GW_BACK_X_HEAD;
        if (x->cbs.on_head)
            x->cbs.on_head(x, x->user_data, h);
    }
    return leave(x);
}

int gw_back__deliver_body(gw_back_exch_t *x, gw_rbuf_t *buf, size_t off, size_t len)
{
    x->in_cb++;
    if (x->cbs.on_body)
        x->cbs.on_body(x, x->user_data, (gw_rslice_t){buf, off, len});
    return leave(x);
}

int gw_back__deliver_trailers(gw_back_exch_t *x, const gw_back_field_t *f, size_t n)
{
    x->in_cb++;
    if (x->cbs.on_trailers)
        x->cbs.on_trailers(x, x->user_data, f, n);
    return leave(x);
}

/* Terminal: x is detached from any connection and out of the queue. */
static void finish(gw_back_exch_t *x, int code)
{
    fire_marks(x, code ? code : GW_E_CLOSED); /* unwritten body bytes (early response) */
    x->in_cb++;
    x->dead = 1;
    if (code == 0) {
        x->phase = GW_BACK_X_COMPLETE;
        if (x->cbs.on_complete)
            x->cbs.on_complete(x, x->user_data);
    } else {
        GW_LOG_DEBUG("back_exch_error", "upstream=%s code=%s phase=%s", x->up->cfg->name,
                     gw_errname(code), gw_back_xphase_str((gw_back_xphase_t)x->phase));
        if (x->cbs.on_error)
            x->cbs.on_error(x, x->user_data, code);
    }
    leave(x);
}

void gw_back__deliver_complete(gw_back_exch_t *x)
{
    finish(x, 0);
}

/* ---- queue ---------------------------------------------------------------------------------- */

static void on_queue_timer(uv_timer_t *t);

/* Every enqueue sets its deadline to now + queue_timeout, so deadlines only grow: a timer that
 * is already armed fires no later than the earliest waiting deadline, and only the timer
 * itself (walk = 1) needs to look at the whole queue. Without that, a saturated pool walked
 * hundreds of waiting exchanges for every request enqueued or dispatched. An exchange that
 * left the queue early at most makes the timer fire once for nothing. */
static void arm_queue_timer(gw_back_upstream_t *up, int walk)
{
    if (gw_list_empty(&up->queue) || up->back->deleting) {
        uv_timer_stop(&up->queue_timer);
        return;
    }
    if (!walk && uv_is_active((uv_handle_t *)&up->queue_timer))
        return;
    uint64_t min = UINT64_MAX, now = uv_now(up->back->loop);
    gw_list_foreach(it, &up->queue)
    {
        gw_back_exch_t *x = GW_CONTAINER_OF(it, gw_back_exch_t, qlink);
        if (x->queue_deadline < min)
            min = x->queue_deadline;
    }
    uv_timer_start(&up->queue_timer, on_queue_timer, min > now ? min - now : 0, 0);
}

/* front: a retry, which already waited its turn, goes before its equals. */
static int enqueue(gw_back_exch_t *x, int front)
{
    gw_back_upstream_t *up = x->up;
    if (up->queued >= up->cfg->queue_size)
        return GW_E_LIMIT;
    /* Insert after the last element that is not after x: FIFO among equals. */
    gw_list_t *pos = up->queue.prev;
    while (pos != &up->queue) {
        gw_back_exch_t *y = GW_CONTAINER_OF(pos, gw_back_exch_t, qlink);
        int c = up->cmp(&x->req, x->seq, &y->req, y->seq);
        if (front ? c > 0 : c >= 0)
            break;
        pos = pos->prev;
    }
    gw_list_insert_before(pos->next, &x->qlink);
    up->queued++;
    up->back->st.queued++;
    x->queued_ns = gw_now_ns();
    x->queue_deadline = uv_now(up->back->loop) + up->cfg->queue_timeout_ms;
    arm_queue_timer(up, 0);
    return 0;
}

/* x leaves the queue and goes back in at its comparator position; same deadline, so the
 * queue timer (armed for the earliest deadline) stays right. */
static void requeue(gw_back_exch_t *x)
{
    gw_back_upstream_t *up = x->up;
    gw_list_remove(&x->qlink);
    gw_list_t *pos = up->queue.prev;
    while (pos != &up->queue) {
        gw_back_exch_t *y = GW_CONTAINER_OF(pos, gw_back_exch_t, qlink);
        if (up->cmp(&x->req, x->seq, &y->req, y->seq) >= 0)
            break;
        pos = pos->prev;
    }
    gw_list_insert_before(pos->next, &x->qlink);
}

/* The wait in the queue so far, to the exchange's total (the metric of the pool's cap). */
static void wait_ends(gw_back_exch_t *x)
{
    if (!x->queued_ns)
        return;
    uint64_t now = gw_now_ns();
    x->queue_us += now > x->queued_ns ? (now - x->queued_ns) / 1000 : 0;
    x->queued_ns = 0;
}

static void dequeue(gw_back_exch_t *x)
{
    if (!gw_list_linked(&x->qlink))
        return;
    gw_list_remove(&x->qlink);
    x->up->queued--;
    x->up->back->st.queued--;
    wait_ends(x);
}

static void on_queue_timer(uv_timer_t *t)
{
    gw_back_upstream_t *up = t->data;
    uint64_t now = uv_now(up->back->loop);
    gw_list_foreach_safe(it, tmp, &up->queue)
    {
        gw_back_exch_t *x = GW_CONTAINER_OF(it, gw_back_exch_t, qlink);
        if (x->queue_deadline <= now) {
            dequeue(x);
            finish(x, GW_E_TIMEOUT);
            /* finish may have changed the queue (a callback started or cancelled others). */
            tmp = up->queue.next;
        }
    }
    arm_queue_timer(up, 1);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void on_work(uv_prepare_t *h);

/* Whether x may be pipelined: RFC 9112 §9.3.2 advises against pipelining non-idempotent
 * requests, and a request body would hold the connection's write side. */
static int pipelineable(const gw_back_exch_t *x)
{
    return x->up->cfg->pipeline > 1 && GW_BACK_RESENDABLE(&x->req) && !x->no_pipeline;
}

/* Put x on a connection of s: with pipelining, first the connection whose write is pending
 * in this loop iteration (requests dispatched together leave together), then an idle one,
 * a new one, and last a busy one with room in its pipeline. 0, or GW_E_AGAIN when s had no
 * capacity after all (its idle connections were dead and it is full), or GW_E_NOMEM. */
static int assign(gw_back_exch_t *x, gw_back_server_t *s)
{
    int pipe = pipelineable(x);
    gw_back_conn_t *c;
    if (pipe && (c = gw_back__conn_batch_slot(s)) != NULL)
        return gw_back__conn_pipeline(c, x);
    c = gw_back__conn_take_idle(s, !GW_BACK_RESENDABLE(&x->req));
    if (c) {
        x->up->back->st.reused++;
        s->st.reused++;
        gw_back__conn_start(c, x);
        return 0;
    }
    if (s->open - s->tunnels < (s->up->cfg->max_connections ? s->up->cfg->max_connections : 1))
        return gw_back__conn_dial(s, x);
    if (pipe && (c = gw_back__conn_pipe_slot(s)) != NULL)
        return gw_back__conn_pipeline(c, x);
    return GW_E_AGAIN;
}

/* Try to start x now, else queue it. 0, GW_E_NOENT, GW_E_LIMIT, GW_E_NOMEM. */
static int dispatch(gw_back_exch_t *x, gw_back_server_t *exclude, int retry)
{
    gw_back_upstream_t *up = x->up;
    uint64_t now = uv_now(up->back->loop);
    for (int attempt = 0; attempt < 4 && gw_list_empty(&up->queue); attempt++) {
        int all_ejected = 0;
        gw_back_server_t *s =
            gw_back__pick(up, x->req.client, exclude, &all_ejected, now, pipelineable(x));
        if (!s) {
            if (all_ejected)
                return GW_E_NOENT;
            break;
        }
        int rc = assign(x, s);
        if (rc != GW_E_AGAIN)
            return rc;
    }
    if (gw_list_empty(&up->queue)) {
        /* No capacity now; if nobody is healthy any more there is nothing to wait for. */
        size_t healthy = 0;
        for (size_t i = 0; i < up->servers_len; i++)
            healthy += (size_t)gw_back__server_healthy(&up->servers[i], now);
        if (healthy == 0)
            return GW_E_NOENT;
    }
    return enqueue(x, retry);
}

static void dispatch_queue(gw_back_upstream_t *up)
{
    /* Connection closes inside assign() call back in here: one loop at a time. */
    if (up->back->deleting || up->dispatching)
        return;
    up->dispatching = 1;
    uint64_t now = uv_now(up->back->loop);
    while (!gw_list_empty(&up->queue)) {
        gw_back_exch_t *x = GW_CONTAINER_OF(up->queue.next, gw_back_exch_t, qlink);
        int all_ejected = 0;
        gw_back_server_t *s =
            gw_back__pick(up, x->req.client, NULL, &all_ejected, now, pipelineable(x));
        if (!s) {
            if (!all_ejected)
                break;
            dequeue(x);
            finish(x, GW_E_NOENT);
            continue;
        }
        dequeue(x);
        int rc = assign(x, s);
        if (rc == GW_E_AGAIN) {
            /* Lost the slot (dead idle connections): back to the head of the queue. */
            gw_list_push_front(&up->queue, &x->qlink);
            up->queued++;
            up->back->st.queued++;
            x->queued_ns = gw_now_ns();
            break;
        }
        if (rc < 0)
            finish(x, rc);
    }
    up->dispatching = 0;
    arm_queue_timer(up, 0);
}

/* Deferred work, before the loop polls: first the unanswered exchanges (at the front of the
 * queue when they must wait: they were sent before the ones waiting), then the pipelined
 * writes. Either may add to the other (a failed write leaves exchanges unanswered). */
static void on_work(uv_prepare_t *h)
{
    gw_back_t *b = h->data;
    for (;;) {
        gw_list_t *n = gw_list_pop_front(&b->unanswered);
        if (n) {
            gw_back_exch_t *x = GW_CONTAINER_OF(n, gw_back_exch_t, rlink);
            GW_LOG_DEBUG("back_unanswered", "upstream=%s server=%s", x->up->cfg->name,
                         x->server ? x->server->cfg->addr.text : "-");
            int rc = dispatch(x, NULL, 1);
            if (rc < 0)
                finish(x, rc);
            continue;
        }
        if ((n = gw_list_pop_front(&b->flush)) != NULL) {
            gw_back__conn_flush(GW_CONTAINER_OF(n, gw_back_conn_t, flink));
            continue;
        }
        break;
    }
    uv_prepare_stop(h);
}

void gw_back__conn_free_again(gw_back_conn_t *c)
{
    gw_back__conn_park(c); /* the queue head then takes it (LIFO: it is the first idle one) */
    dispatch_queue(c->server->up);
}

void gw_back__slot_released(gw_back_server_t *s)
{
    dispatch_queue(s->up);
}

static void work_later(gw_back_t *b)
{
    if (!b->deleting)
        uv_prepare_start(&b->work, on_work);
}

void gw_back__exch_unanswered(gw_back_exch_t *x)
{
    gw_back_t *b = x->up->back;
    GW_ASSERT(x->conn == NULL && !gw_list_linked(&x->qlink));
    x->no_pipeline = 1;
    b->st.unanswered++;
    if (x->server)
        x->server->st.unanswered++;
    gw_list_push_back(&b->unanswered, &x->rlink);
    work_later(b);
}

void gw_back__flush_later(gw_back_conn_t *c)
{
    gw_back_t *b = c->server->up->back;
    c->server->pipe_hint = c; /* the batch that the next requests may join */
    if (gw_list_linked(&c->flink))
        return;
    gw_list_push_back(&b->flush, &c->flink);
    work_later(b);
}

void gw_back__flush_cancel(gw_back_conn_t *c)
{
    gw_list_remove(&c->flink);
}

void gw_back__exch_failed(gw_back_exch_t *x, int code, int before_response)
{
    gw_back_t *b = x->up->back;
    if (!b->deleting && before_response && x->req.idempotent && !x->body_started_write &&
        x->tries < x->up->cfg->retries) {
        x->tries++;
        b->st.retries++;
        GW_LOG_INFO("back_retry", "upstream=%s server=%s code=%s try=%u", x->up->cfg->name,
                    x->server ? x->server->cfg->addr.text : "-", gw_errname(code), x->tries);
        int rc = dispatch(x, x->server, 1);
        if (rc == 0)
            return;
    }
    finish(x, code);
}

/* ---- public API ----------------------------------------------------------------------------- */

static void on_timer_close(uv_handle_t *h)
{
    gw_back_t *b = h->data;
    if (--b->handles > 0)
        return;
    for (size_t i = 0; i < b->ups_len; i++) {
        gw_free(b->ups[i].servers);
        gw_free(b->ups[i].ring);
    }
    gw_free(b->ups);
    gw_pool_free(&b->exch_pool);
    for (size_t i = 0; i < b->heads_len; i++)
        gw_bytes_free(&b->heads[i]);
    gw_free(b->heads);
    gw_free(b);
}

static void on_hc_timer(uv_timer_t *t)
{
    gw_back__health_check(t->data);
}

/* One more timer handle of b (each is closed, and counted down, in gw_back_del). */
static void timer_init(gw_back_t *b, uv_timer_t *t, void *data)
{
    uv_timer_init(b->loop, t);
    t->data = data;
    b->handles++;
}

int gw_back_new(uv_loop_t *loop, const gw_config_t *cfg, gw_back_t **out)
{
    int rc = GW_E_NOMEM;
    *out = NULL;
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        if (cfg->upstreams[i].servers_len == 0)
            return GW_E_INVAL;
    gw_back_t *b = gw_calloc(1, sizeof(*b));
    if (!b)
        return GW_E_NOMEM;
    b->loop = loop;
    b->cfg = cfg;
    gw_list_init(&b->exchs);
    gw_list_init(&b->flush);
    gw_list_init(&b->unanswered);
    /* Keep as many free exchanges as a busy worker has in flight (512 streams are usual). */
    gw_pool_init(&b->exch_pool, sizeof(gw_back_exch_t), 0, 1024);
    b->heads = gw_calloc(HEADS_KEEP, sizeof(*b->heads));
    b->ups = gw_calloc(cfg->upstreams_len ? cfg->upstreams_len : 1, sizeof(*b->ups));
    if (!b->ups || !b->heads)
        goto fail;
    b->ups_len = cfg->upstreams_len;
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        gw_back_upstream_t *up = &b->ups[i];
        up->back = b;
        up->cfg = &cfg->upstreams[i];
        up->index = i;
        up->cmp = gw_back_queue_fifo;
        gw_list_init(&up->queue);
        gw_list_init(&up->holds);
        up->servers = gw_calloc(up->cfg->servers_len, sizeof(*up->servers));
        if (!up->servers)
            goto fail;
        up->servers_len = up->cfg->servers_len;
        for (size_t j = 0; j < up->servers_len; j++) {
            gw_back_server_t *s = &up->servers[j];
            s->up = up;
            s->cfg = &up->cfg->servers[j];
            s->index = j;
            gw_list_init(&s->idle);
            gw_list_init(&s->active);
        }
        if (gw_back__ring_build(up) < 0)
            goto fail;
        int trc = up->cfg->tls ? gw_tls_client_ctx_new(up->cfg, &up->tls) : 0;
        if (trc < 0) {
            rc = trc; /* GW_E_INVAL: tls_ca cannot be loaded (logged) */
            goto fail;
        }
    }
    /* Handles last: after this point the object is freed through uv_close only. */
    uv_prepare_init(loop, &b->work);
    b->work.data = b;
    b->handles++;
    for (size_t i = 0; i < cfg->upstreams_len; i++) {
        gw_back_upstream_t *up = &b->ups[i];
        timer_init(b, &up->queue_timer, up);
        timer_init(b, &up->batch_timer, up);
        timer_init(b, &up->purge_timer, up);
        for (size_t j = 0; j < up->servers_len; j++) {
            gw_back_server_t *s = &up->servers[j];
            timer_init(b, &s->hc_timer, s);
            if (up->cfg->health_path && up->cfg->health_interval_ms)
                uv_timer_start(&s->hc_timer, on_hc_timer, up->cfg->health_interval_ms,
                               up->cfg->health_interval_ms);
        }
    }
    *out = b;
    return 0;
fail:
    if (b->ups)
        for (size_t i = 0; i < cfg->upstreams_len; i++) {
            gw_free(b->ups[i].servers);
            gw_free(b->ups[i].ring);
            gw_tls_client_ctx_del(b->ups[i].tls);
        }
    gw_free(b->ups);
    gw_free(b->heads);
    gw_free(b);
    return rc;
}

void gw_back_del(gw_back_t *b)
{
    if (!b)
        return;
    b->deleting = 1;
    uv_prepare_stop(&b->work);
    while (!gw_list_empty(&b->exchs)) {
        gw_back_exch_t *x = GW_CONTAINER_OF(b->exchs.next, gw_back_exch_t, all);
        dequeue(x);
        if (x->conn)
            gw_back__conn_abort(x->conn);
        finish(x, GW_E_CLOSED);
    }
    for (size_t i = 0; i < b->ups_len; i++) {
        gw_back_upstream_t *up = &b->ups[i];
        for (size_t j = 0; j < up->servers_len; j++) {
            gw_back_server_t *s = &up->servers[j];
            while (!gw_list_empty(&s->idle))
                gw_back__conn_close(GW_CONTAINER_OF(s->idle.next, gw_back_conn_t, link));
            if (s->hc_conn)
                gw_back__conn_close(s->hc_conn);
            uv_close((uv_handle_t *)&s->hc_timer, on_timer_close);
            s->hc_timer.data = b;
        }
        uv_close((uv_handle_t *)&up->queue_timer, on_timer_close);
        up->queue_timer.data = b;
        uv_close((uv_handle_t *)&up->batch_timer, on_timer_close);
        up->batch_timer.data = b;
        uv_close((uv_handle_t *)&up->purge_timer, on_timer_close);
        up->purge_timer.data = b;
        /* Connections still closing hold their own reference on the context. */
        gw_tls_client_ctx_del(up->tls);
        up->tls = NULL;
    }
    uv_close((uv_handle_t *)&b->work, on_timer_close);
}

void gw_back_exch_info(const gw_back_exch_t *x, gw_back_exch_info_t *out)
{
    out->server = x->server ? x->server->cfg->addr.text : NULL;
    out->retries = x->tries;
    out->connect_us = x->conn && x->conn->requests == 1 ? (int64_t)x->conn->connect_us : -1;
    uint64_t q = x->queue_us, now;
    if (x->queued_ns && (now = gw_now_ns()) > x->queued_ns)
        q += (now - x->queued_ns) / 1000;
    out->queue_us = (int64_t)q;
}

int gw_back_request(gw_back_t *b, size_t upstream, const gw_back_req_t *req,
                    const gw_back_cbs_t *cbs, void *user_data, gw_back_exch_t **out)
{
    int rc;
    *out = NULL;
    if (upstream >= b->ups_len)
        return GW_E_RANGE;
    if (b->deleting)
        return GW_E_CLOSED;
    gw_back_exch_t *x = gw_pool_get(&b->exch_pool);
    if (!x)
        return GW_E_NOMEM;
    gw_list_init(&x->qlink);
    gw_list_init(&x->wmarks);
    gw_list_init(&x->all);
    gw_list_init(&x->rlink);
    gw_iovq_init(&x->body);
    if (b->heads_len)
        x->head = b->heads[--b->heads_len];
    else
        gw_bytes_init(&x->head, 0);
    x->up = &b->ups[upstream];
    gw_h1_request_t h1req = {req->method, req->target,     req->host,
                             req->fields, req->fields_len, req->body_len};
    rc = gw_h1_request_head(&x->head, &h1req);
    if (rc < 0)
        goto fail;
    x->req = *req;
    x->req.method = (gw_slice_t){x->head.base, req->method.len}; /* the head starts with it */
    x->req.target = x->req.host = (gw_slice_t){NULL, 0};
    x->req.fields = NULL;
    x->req.fields_len = 0;
    x->req.client = NULL;
    if (req->client && (req->client->sa_family == AF_INET || req->client->sa_family == AF_INET6)) {
        memcpy(&x->client, req->client,
               req->client->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                 : sizeof(struct sockaddr_in6));
        x->req.client = (const struct sockaddr *)&x->client;
    }
    if (req->body_len == 0)
        x->body_ended = 1;
    if (cbs)
        x->cbs = *cbs;
    x->user_data = user_data;
    x->seq = ++b->seq;
    gw_list_push_back(&b->exchs, &x->all);
    rc = dispatch(x, NULL, 0);
    if (rc < 0) {
        dequeue(x);
        goto fail;
    }
    b->st.requests++;
    *out = x;
    return 0;
fail:
    GW_ASSERT(x->conn == NULL);
    exch_free(x);
    return rc;
}

static int queue_body(gw_back_exch_t *x, const void *p, size_t n)
{
    int rc = gw_iovq_copy(&x->body, p, n);
    if (rc == 0)
        x->body_queued += n;
    return rc;
}

int gw_back_write_body(gw_back_exch_t *x, gw_rbuf_t *buf, size_t off, size_t len,
                       gw_back_written_cb done_cb, void *user_data)
{
    int rc;
    /* len 0 is refused: its done_cb could only fire synchronously or never. A tunnel takes
     * bytes once its 101 came, as they are. */
    if (x->dead || len == 0 || (x->req.body_len == 0 && !x->req.upgrade) ||
        (x->body_ended && !(x->req.upgrade && !x->tunnel)))
        return GW_E_INVAL;
    if (x->req.body_len > 0 && x->body_payload + len > (uint64_t)x->req.body_len)
        return GW_E_INVAL;
    gw_back_wmark_t *m = gw_calloc(1, sizeof(*m));
    if (!m)
        return GW_E_NOMEM;
    if (len) {
        /* RFC 9112 §7.1: chunk = chunk-size CRLF chunk-data CRLF; a zero-size chunk would be
         * the last-chunk, so empty writes send nothing. */
        if (x->req.body_len < 0 && !x->req.upgrade) {
            uint8_t sz[GW_H1_CHUNK_HEAD_MAX];
            if ((rc = queue_body(x, sz, gw_h1_chunk_head(sz, len))) < 0)
                goto fail;
        }
        if ((rc = gw_iovq_ref(&x->body, buf, off, len)) < 0)
            goto fail;
        x->body_queued += len;
        if (x->req.body_len < 0 && !x->req.upgrade &&
            (rc = queue_body(x, GW_H1_CHUNK_END, GW_H1_CHUNK_END_LEN)) < 0)
            goto fail;
    }
    x->body_payload += len;
    m->end = x->body_queued;
    m->cb = done_cb;
    m->user_data = user_data;
    gw_list_push_back(&x->wmarks, &m->link);
    if (x->conn && x->conn->state == GW_BACK_CONN_ACTIVE)
        gw_back__conn_flush(x->conn);
    return 0;
fail:
    gw_free(m);
    return rc;
}

int gw_back_end_body(gw_back_exch_t *x, const gw_back_field_t *trailers, size_t n)
{
    int rc;
    if (x->dead || x->body_ended)
        return GW_E_INVAL;
    if (x->tunnel) { /* the client's half-close: the origin's read side ends */
        x->body_ended = 1;
        if (x->conn)
            gw_back__tunnel_shut(x->conn);
        return 0;
    }
    if (x->req.body_len == 0)
        return GW_E_INVAL; /* no body announced (an upgrade refused): nothing to end */
    if (x->req.body_len > 0) {
        if (x->body_payload != (uint64_t)x->req.body_len || n)
            return GW_E_INVAL;
    } else {
        gw_bytes_t end;
        gw_bytes_init(&end, 0);
        rc = gw_h1_last_chunk(&end, trailers, n);
        if (rc == 0)
            rc = queue_body(x, end.base, end.len);
        gw_bytes_free(&end);
        if (rc < 0)
            return rc;
    }
    x->body_ended = 1;
    if (x->conn && x->conn->state == GW_BACK_CONN_ACTIVE)
        gw_back__conn_flush(x->conn);
    return 0;
}

void gw_back_pause_reading(gw_back_exch_t *x)
{
    x->paused = 1;
    /* A pipelined exchange takes its flag to the connection when its response comes. */
    if (x->conn && x->conn->state == GW_BACK_CONN_ACTIVE && x->conn->exch == x) {
        x->conn->flags |= GW_BACK_CONN_F_PAUSED;
        gw_back__conn_update_reading(x->conn);
    }
}

void gw_back_resume_reading(gw_back_exch_t *x)
{
    x->paused = 0;
    if (x->conn && x->conn->state == GW_BACK_CONN_ACTIVE && x->conn->exch == x) {
        x->conn->flags &= ~GW_BACK_CONN_F_PAUSED;
        gw_back__conn_update_reading(x->conn);
    }
}

void gw_back_cancel(gw_back_exch_t *x)
{
    if (x->dead)
        return;
    x->dead = 1;
    dequeue(x);
    gw_list_remove(&x->rlink);
    if (x->conn)
        gw_back__conn_cancel(x->conn, x); /* never back to the pool half-read */
    x->in_cb++;
    fire_marks(x, GW_E_CLOSED);
    x->in_cb--;
    if (x->in_cb == 0)
        exch_free(x);
}

static void add_stats(gw_back_stats_t *o, const gw_back_stats_t *s)
{
    o->opened += s->opened;
    o->reused += s->reused;
    o->closed += s->closed;
    o->failures += s->failures;
    o->ejections += s->ejections;
    o->pipelined += s->pipelined;
    o->unanswered += s->unanswered;
    o->purged += s->purged;
    o->open += s->open;
    o->active += s->active;
    o->idle += s->idle;
}

void gw_back_stats(const gw_back_t *b, size_t up, gw_back_stats_t *out)
{
    if (up == SIZE_MAX || up >= b->ups_len) {
        *out = b->st;
        return;
    }
    memset(out, 0, sizeof(*out));
    for (size_t j = 0; j < b->ups[up].servers_len; j++)
        add_stats(out, &b->ups[up].servers[j].st);
    out->queued = b->ups[up].queued;
}

int gw_back_server_stats(const gw_back_t *b, size_t up, size_t srv, gw_back_stats_t *out)
{
    if (up >= b->ups_len || srv >= b->ups[up].servers_len)
        return GW_E_RANGE;
    *out = b->ups[up].servers[srv].st;
    return 0;
}

int gw_back_server_ejected(const gw_back_t *b, size_t up, size_t srv)
{
    if (up >= b->ups_len || srv >= b->ups[up].servers_len)
        return GW_E_RANGE;
    gw_back_server_t *s = &b->ups[up].servers[srv];
    return !gw_back__server_healthy(s, uv_now(b->loop));
}

void gw_back_set_urgency(gw_back_exch_t *x, uint8_t urgency)
{
    if (x->req.urgency == urgency)
        return;
    x->req.urgency = urgency;
    if (gw_list_linked(&x->qlink))
        requeue(x);
}

int gw_back_set_queue_order(gw_back_t *b, size_t up, gw_back_queue_cmp_fn cmp)
{
    if (up >= b->ups_len || !cmp)
        return GW_E_RANGE;
    b->ups[up].cmp = cmp;
    return 0;
}
