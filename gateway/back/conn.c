/* back/conn.c — one keep-alive connection to an origin server.
 *
 * States: CONNECTING → ACTIVE (one exchange) → IDLE (in the server's LIFO idle list) → ACTIVE
 * ... → CLOSING. One timer per connection, re-armed per phase: connect_timeout while
 * connecting, response_timeout until the response head (re-armed by request-write progress),
 * read_timeout between two body reads (stopped while the consumer paused us), idle_timeout
 * while idle. An idle connection keeps reading: the origin closing it, or sending anything,
 * closes it at once, and gw_back__conn_take_idle() peeks the socket again before a request that
 * could not be sent again (one with a body, or not idempotent) reuses it, so such a request is
 * never written into a connection the origin already gave up (RFC 9112 §9.3.1); a bodyless
 * idempotent one caught by that race is sent again elsewhere (fail: unanswered).
 * Memory is freed only from the uv_close callbacks.
 *
 * TLS upstreams: after the TCP connect the connection stays CONNECTING (flag HANDSHAKE) while
 * the sans-IO client TLS (back/tls.h) runs its handshake, under the same connect_timeout
 * deadline; a failed handshake or certificate check is a failed connect (GW_E_IO, counted by
 * passive health, retried like a refused connect). Then the plaintext paths are the cleartext
 * ones: c->out and the exchange's body queue hold plaintext, which is encrypted at write time
 * and consumed from its queues only when the ciphertext write completes (so body progress and
 * write marks mean the same as in cleartext); reads decrypt into the free tail of c->in,
 * where the h1 codec parses in place. An idle TLS connection still closes on any application
 * byte or alert, but a post-handshake message (a TLS 1.3 session ticket) keeps it. A retired
 * connection sends close_notify (RFC 8446 §6.1) before it closes; a close-delimited body
 * needs the origin's close_notify to count as complete (read_end).
 *
 * Pipelining (upstream `pipeline` > 1, RFC 9112 §9.3.2): an ACTIVE connection may carry up to
 * `pipeline` requests: `exch`, whose response is read now, and a ring of bodyless idempotent
 * requests written behind it, answered in order. A connection takes one only when its last
 * final response was HTTP/1.1 keep-alive (never right after the connect: §9.3.2), the one being
 * read is bodyless and idempotent, not paused and not known to be long. When a response
 * completes, the next entry becomes `exch` and the bytes after it in the same read are its
 * own. Whatever stops the connection (an error, a close, `Connection: close`, a timeout of the
 * response ahead) leaves the requests behind unanswered: they are sent again elsewhere
 * (gw_back__exch_unanswered). So are those waiting behind a response that turns out long (no
 * length, or more than GW_BACK_PIPE_LONG) or whose consumer pauses it: their entries stay as
 * placeholders (x NULL) whose responses are read and dropped. Once only placeholders remain the
 * connection drains them and is parked: the next such response would close it again, and a
 * dial per pause is the churn of issue 19 item 1. Only a placeholder's response that is itself
 * long closes it (nobody reads it, and a new connection costs less than an unbounded drain).
 */
#include <errno.h>
#include <string.h>

#include <netdb.h>
#include <sys/socket.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"

#define MAX_IOV 64
#define MIN_READ_TAIL 2048
/* Plaintext encrypted per ciphertext write: bounds tls_out (records add ~1.5%). */
#define TLS_WRITE_BATCH 65536

/* TLS: ciphertext lands here and is fed to the session in the same read callback. One per
 * thread: a worker's loop runs one read callback at a time. */
static _Thread_local uint8_t tls_rbuf[GW_BACK_READ_BUF];

const char *gw_back_conn_state_str(gw_back_conn_state_t s)
{
    switch (s) {
    case GW_BACK_CONN_CONNECTING:
        return "connecting";
    case GW_BACK_CONN_ACTIVE:
        return "active";
    case GW_BACK_CONN_IDLE:
        return "idle";
    case GW_BACK_CONN_CLOSING:
        return "closing";
    }
    return "?";
}

static const gw_cfg_upstream_t *ucfg(const gw_back_conn_t *c)
{
    return c->server->up->cfg;
}

static uv_loop_t *loop_of(const gw_back_conn_t *c)
{
    return gw_back__loop(c->server->up->back);
}

/* Drop one of the handles/requests that keep c's memory alive; free on the last one. */
static void conn_unref(gw_back_conn_t *c)
{
    if (--c->handles > 0)
        return;
    gw_iovq_free(&c->out);
    gw_rbuf_unref(c->in);
    gw_free(c->pipe);
    gw_h1_client_del(c->h1);
    gw_back_tls_del(c->tls);
    gw_bytes_free(&c->tls_out);
    gw_free(c);
}

static void on_close(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void on_timer(uv_timer_t *t);
static void hold_end(gw_back_conn_t *c);
static void lowat_set(gw_back_conn_t *c, unsigned v);

/* Timeouts are re-armed at every request, read and return to the pool; most of them move the
 * deadline later. Restarting a libuv timer is a heap removal and insertion (about 4 % of the
 * CPU with 500 client connections), so a later deadline is only recorded and the timer, when
 * it fires early, re-arms itself for the rest. */
static void arm(gw_back_conn_t *c, uint64_t ms)
{
    if (ms == 0)
        ms = 1;
    c->deadline = uv_now(c->timer.loop) + ms;
    if (uv_is_active((uv_handle_t *)&c->timer) && uv_timer_get_due_in(&c->timer) <= ms)
        return;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

void gw_back__conn_close(gw_back_conn_t *c)
{
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    gw_back_server_t *s = c->server;
    gw_back_stats_t *st = gw_back__stats(s->up->back);
    if (c->state == GW_BACK_CONN_IDLE) {
        gw_list_remove(&c->link);
        s->idle_cnt--;
        st->idle--;
        s->st.idle--;
    }
    GW_ASSERT(c->exch == NULL && c->pipe_len == 0);
    gw_list_remove(&c->link); /* the active list (pipelining) */
    gw_back__flush_cancel(c);
    hold_end(c);
    if (s->pipe_hint == c)
        s->pipe_hint = NULL;
    if (c->tls) {
        /* Retired or failed after the handshake: close_notify. After a failed handshake the
         * alert OpenSSL queued goes instead. Best effort: one non-blocking write, none while
         * a write is in flight (uv_try_write refuses to overtake it). */
        if (c->state != GW_BACK_CONN_CONNECTING)
            gw_back_tls_shutdown(c->tls);
        uint8_t tail[512];
        size_t n = gw_back_tls_take_out(c->tls, tail, sizeof(tail));
        if (n) {
            uv_buf_t b = uv_buf_init((char *)tail, (unsigned)n);
            (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        }
    }
    c->state = GW_BACK_CONN_CLOSING;
    uv_timer_stop(&c->timer);
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->flags & GW_BACK_CONN_F_RESOLVING)
        uv_cancel((uv_req_t *)&c->gai); /* on_resolved still runs, with UV_ECANCELED */
    uv_close((uv_handle_t *)&c->tcp, on_close);
    uv_close((uv_handle_t *)&c->timer, on_close);
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        s->hc_conn = NULL;
        return; /* not counted in the pool */
    }
    s->open--;
    st->open--;
    st->closed++;
    s->st.open--;
    s->st.closed++;
    gw_back__slot_released(s);
}

/* Detach the exchange (if any) from c; the busy count follows. A connection is counted busy
 * from its dial or start until this, whatever it reads in between: with pipelining the
 * exchange being read may be a placeholder (NULL) while the connection still works. */
static gw_back_exch_t *detach(gw_back_conn_t *c)
{
    gw_back_exch_t *x = c->exch;
    c->exch = NULL;
    if (x)
        x->conn = NULL;
    if (c->flags & GW_BACK_CONN_F_BUSY) {
        c->flags &= ~GW_BACK_CONN_F_BUSY;
        c->server->busy--;
        gw_back__stats(c->server->up->back)->active--;
        c->server->st.active--;
    }
    return x;
}

/* ---- pipeline ring -------------------------------------------------------------------------- */

/* Flags that describe the response being read: they start afresh with the next one. */
#define RESPONSE_FLAGS                                                                             \
    (GW_BACK_CONN_F_GOT_BYTE | GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_DISCARD |                    \
     GW_BACK_CONN_F_LONG | GW_BACK_CONN_F_HEAD | GW_BACK_CONN_F_PIPELINED |                        \
     GW_BACK_CONN_F_NOBATCH)

static int is_head(const gw_back_exch_t *x)
{
    return x->req.method.len == 4 && memcmp(x->req.method.base, "HEAD", 4) == 0;
}

/* The response to x (NULL: a placeholder, its response dropped) is the next one read on c;
 * `flags` are added to the fresh response flags. */
static void begin_response(gw_back_conn_t *c, gw_back_exch_t *x, int head_only, unsigned flags)
{
    c->exch = x;
    c->flags = (c->flags & ~RESPONSE_FLAGS) | flags;
    if (!x)
        c->flags |= GW_BACK_CONN_F_DISCARD;
    else if (x->paused)
        c->flags |= GW_BACK_CONN_F_PAUSED;
    if (head_only)
        c->flags |= GW_BACK_CONN_F_HEAD;
    gw_h1_client_start(c->h1, head_only);
}

static unsigned pipe_cap(const gw_back_conn_t *c)
{
    return ucfg(c)->pipeline - 1;
}

static gw_back_pipe_t *pipe_at(gw_back_conn_t *c, unsigned i)
{
    return &c->pipe[(c->pipe_first + i) % pipe_cap(c)];
}

/* Requests in flight: the one being answered (or dropped) and those behind it. */
static unsigned inflight(const gw_back_conn_t *c)
{
    return (c->exch || (c->flags & GW_BACK_CONN_F_DISCARD) ? 1u : 0u) + c->pipe_len;
}

/* Entries behind the current response whose exchange is still waiting for it. */
static unsigned pipe_live(gw_back_conn_t *c)
{
    unsigned n = 0;
    for (unsigned i = 0; i < c->pipe_len; i++)
        n += pipe_at(c, i)->x != NULL;
    return n;
}

/* Every exchange waiting behind the current response leaves c unanswered (sent again from the
 * back's deferred work: nothing is called back from here). keep: their entries stay as
 * placeholders, because their requests are on the wire and their responses will come. */
static void pipe_evacuate(gw_back_conn_t *c, int keep)
{
    unsigned moved = 0;
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = pipe_at(c, i);
        if (!e->x)
            continue;
        gw_back_exch_t *x = e->x;
        e->x = NULL;
        x->conn = NULL;
        gw_back__exch_unanswered(x);
        moved++;
    }
    if (!keep)
        c->pipe_first = c->pipe_len = 0;
    else if (moved)
        /* Requests had to leave a long or stalled response: this server's answers are not
         * the quick ones pipelining pays for. Stop sending it pipelined requests for a while
         * rather than have the origin answer the same requests twice, again and again. */
        c->server->pipe_backoff_until = uv_now(loop_of(c)) + GW_BACK_PIPE_BACKOFF_MS;
}

/* Whether the connection waits for the client: the origin holds every request byte we had,
 * no final response came, and the body is not complete. A timeout or a close then is the
 * client's doing (its body stalled) as much as the origin's, and a failure caused by the
 * client never counts against the server (issue 18 item 5). This holds after an interim
 * response (103) too: an origin may send one before it reads the body. */
static int waiting_client(const gw_back_conn_t *c)
{
    const gw_back_exch_t *x = c->exch;
    return x && c->state == GW_BACK_CONN_ACTIVE && !x->head_seen && !x->body_ended &&
           x->body.bytes == 0 && c->out.bytes == 0 && !(c->flags & GW_BACK_CONN_F_WRITING);
}

/* The connection failed while carrying its exchange (and maybe some pipelined behind it). */
static void fail(gw_back_conn_t *c, int code, int count_failure)
{
    gw_back_server_t *s = c->server;
    if (waiting_client(c))
        count_failure = 0; /* the origin gave up on a body the client did not send */
    int before_response = !(c->flags & GW_BACK_CONN_F_GOT_BYTE);
    GW_LOG_INFO("back_conn_fail", "upstream=%s server=%s state=%s code=%s reused=%d got_byte=%d",
                s->up->cfg->name, s->cfg->addr.text, gw_back_conn_state_str(c->state),
                gw_errname(code), !!(c->flags & GW_BACK_CONN_F_REUSED), !before_response);
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        gw_back__server_fail(s, uv_now(loop_of(c)));
        gw_back__conn_close(c);
        return;
    }
    pipe_evacuate(c, 0);
    /* Unanswered, not failed: a request that waited in a pipeline, or one written into a
     * kept-alive connection the origin was closing (the race of RFC 9112 §9.3.1: reset or EOF
     * before any byte). Neither counts against the server nor uses up the request's retries:
     * the connection is gone, and the request goes again on another one. */
    int unanswered = before_response && ((c->flags & GW_BACK_CONN_F_PIPELINED) ||
                                         ((c->flags & GW_BACK_CONN_F_REUSED) && code == GW_E_IO));
    gw_back_exch_t *x = detach(c);
    if (count_failure && !unanswered)
        gw_back__server_fail(s, uv_now(loop_of(c)));
    gw_back__conn_close(c);
    if (x && unanswered && x->req.idempotent && !x->body_started_write)
        gw_back__exch_unanswered(x);
    else if (x)
        gw_back__exch_failed(x, code, before_response && code != GW_E_PARSE);
}

/* ---- writing ------------------------------------------------------------------------------ */

static void write_more(gw_back_conn_t *c);

static void on_write(uv_write_t *req, int status)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, write_req);
    c->flags &= ~GW_BACK_CONN_F_WRITING;
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (status < 0) {
        fail(c, GW_E_IO, 1);
        return;
    }
    size_t n = c->writing; /* plaintext bytes, over TLS too */
    c->writing = 0;
    c->tls_out.len = 0;
    size_t h = n < c->out.bytes ? n : c->out.bytes;
    gw_iovq_consume(&c->out, h);
    n -= h;
    gw_back_exch_t *x = c->exch;
    if (x && n) {
        gw_iovq_consume(&x->body, n);
        x->body_written += n;
        x->body_started_write = 1;
    }
    if (x && c->state == GW_BACK_CONN_ACTIVE && !(c->flags & GW_BACK_CONN_F_GOT_BYTE) &&
        !x->head_seen)
        arm(c, ucfg(c)->response_timeout_ms); /* progress: the origin is taking the request */
    if (x && n) {
        gw_back__exch_marks(x, 0); /* may cancel x (and close c) */
        if (c->state == GW_BACK_CONN_CLOSING)
            return;
    }
    write_more(c);
}

static void tls_write_more(gw_back_conn_t *c);

static void write_more(gw_back_conn_t *c)
{
    if (c->tls) {
        tls_write_more(c);
        return;
    }
    if ((c->flags & GW_BACK_CONN_F_WRITING) || c->state != GW_BACK_CONN_ACTIVE)
        return;
    struct iovec iov[MAX_IOV];
    size_t k = gw_iovq_peek(&c->out, iov, MAX_IOV);
    size_t total = 0;
    uv_buf_t bufs[MAX_IOV];
    if (k && (!c->exch || c->exch->body.count == 0)) {
        /* Head bytes only: try them with one write(2) and no write request. A uv_write that
         * completes at once still costs an epoll_ctl in libuv (the POLLOUT watcher is re-armed
         * on drain), i.e. one syscall per proxied GET. Body bytes keep the uv_write path, whose
         * callback reports their progress to the exchange asynchronously. */
        for (size_t i = 0; i < k; i++) {
            bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
            total += iov[i].iov_len;
        }
        int n = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)k);
        if (n > 0) {
            gw_iovq_consume(&c->out, (size_t)n);
            if ((size_t)n == total)
                return;
            k = gw_iovq_peek(&c->out, iov, MAX_IOV);
        } /* else EAGAIN or an error: uv_write queues it, or reports the error from on_write */
        total = 0;
    }
    /* Only whole queued head entries precede body bytes: peek returns them in order. */
    if (k < MAX_IOV && c->exch && k == c->out.count)
        k += gw_iovq_peek(&c->exch->body, iov + k, MAX_IOV - k);
    if (k == 0)
        return;
    for (size_t i = 0; i < k; i++) {
        bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
        total += iov[i].iov_len;
    }
    c->writing = total;
    c->flags |= GW_BACK_CONN_F_WRITING;
    int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, (unsigned)k, on_write);
    if (rc < 0) {
        c->flags &= ~GW_BACK_CONN_F_WRITING;
        c->writing = 0;
        fail(c, GW_E_IO, 1);
    }
}

/* TLS: encrypt up to TLS_WRITE_BATCH bytes of queued plaintext (head, then body) and write
 * the ciphertext with whatever the session produced on its own (handshake flights). The
 * plaintext stays queued until on_write consumes `writing` bytes of it, exactly as in
 * cleartext; nothing is encrypted twice because one batch is in flight at a time. */
static void tls_write_more(gw_back_conn_t *c)
{
    int handshaking = c->state == GW_BACK_CONN_CONNECTING && (c->flags & GW_BACK_CONN_F_HANDSHAKE);
    if ((c->flags & GW_BACK_CONN_F_WRITING) || (c->state != GW_BACK_CONN_ACTIVE && !handshaking))
        return;
    size_t plain = 0;
    int body = 0;
    if (c->state == GW_BACK_CONN_ACTIVE) {
        struct iovec iov[MAX_IOV];
        size_t k = gw_iovq_peek(&c->out, iov, MAX_IOV);
        size_t from_out = k;
        if (k < MAX_IOV && c->exch && k == c->out.count)
            k += gw_iovq_peek(&c->exch->body, iov + k, MAX_IOV - k);
        for (size_t i = 0; i < k && plain < TLS_WRITE_BATCH; i++) {
            size_t n = iov[i].iov_len;
            if (n > TLS_WRITE_BATCH - plain)
                n = TLS_WRITE_BATCH - plain;
            if (gw_back_tls_write(c->tls, iov[i].iov_base, n) < 0) {
                GW_LOG_WARN("back_tls_error", "upstream=%s server=%s reason=\"%s\"", ucfg(c)->name,
                            c->server->cfg->addr.text, gw_back_tls_reason(c->tls));
                fail(c, GW_E_IO, 1);
                return;
            }
            plain += n;
            body |= i >= from_out;
        }
    }
    size_t pend = gw_back_tls_pending_out(c->tls);
    if (pend == 0)
        return;
    c->tls_out.len = 0;
    if (gw_bytes_reserve(&c->tls_out, pend) < 0) {
        fail(c, GW_E_NOMEM, 0);
        return;
    }
    c->tls_out.len = gw_back_tls_take_out(c->tls, c->tls_out.base, pend);
    uv_buf_t b = uv_buf_init((char *)c->tls_out.base, (unsigned)c->tls_out.len);
    if (!body) {
        /* Head or handshake bytes only: one write(2) and no write request when it all fits,
         * as in cleartext (no body progress to report). */
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n > 0 && (size_t)n == c->tls_out.len) {
            gw_iovq_consume(&c->out, plain);
            c->tls_out.len = 0;
            return;
        }
        if (n > 0)
            b = uv_buf_init(b.base + n, b.len - (unsigned)n);
    }
    c->writing = plain;
    c->flags |= GW_BACK_CONN_F_WRITING;
    int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        c->flags &= ~GW_BACK_CONN_F_WRITING;
        c->writing = 0;
        fail(c, GW_E_IO, 1);
    }
}

void gw_back__conn_flush(gw_back_conn_t *c)
{
    write_more(c);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Make sure c->in has a free tail of at least MIN_READ_TAIL bytes; bytes before it may be
 * referenced by the consumer (on_body slices) and are never rewritten. 0 or GW_E_NOMEM. */
static int in_tail(gw_back_conn_t *c)
{
    if (!c->in || c->in->cap - c->in->len < MIN_READ_TAIL) {
        gw_rbuf_unref(c->in);
        c->in = gw_rbuf_new(c->in_big && !c->tls ? GW_BACK_READ_BUF_MAX : GW_BACK_READ_BUF);
        if (!c->in)
            return GW_E_NOMEM;
        c->in->len = 0;
    }
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    gw_back_conn_t *c = h->data;
    if (c->tls) {
        *buf = uv_buf_init((char *)tls_rbuf, sizeof(tls_rbuf)); /* ciphertext: fed at once */
        return;
    }
    if (in_tail(c) < 0) {
        *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init((char *)c->in->data + c->in->len, (unsigned)(c->in->cap - c->in->len));
}

void gw_back__conn_update_reading(gw_back_conn_t *c);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

void gw_back__conn_update_reading(gw_back_conn_t *c)
{
    int want = c->state == GW_BACK_CONN_IDLE ||
               (c->state == GW_BACK_CONN_ACTIVE && !(c->flags & GW_BACK_CONN_F_PAUSED)) ||
               (c->state == GW_BACK_CONN_CONNECTING && (c->flags & GW_BACK_CONN_F_HANDSHAKE));
    int on = !!(c->flags & GW_BACK_CONN_F_READING);
    /* Nothing waits behind a response whose consumer is slow. */
    if (c->state == GW_BACK_CONN_ACTIVE && (c->flags & GW_BACK_CONN_F_PAUSED) && c->pipe_len)
        pipe_evacuate(c, 1);
    if (want && !on) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->flags |= GW_BACK_CONN_F_READING;
        if (c->lowat)
            gw_back__batch_update(c); /* the body left may be below the batch kept */
    } else if (!want && on) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags &= ~GW_BACK_CONN_F_READING;
        hold_end(c);
    }
    if (c->state == GW_BACK_CONN_ACTIVE && c->exch && c->exch->head_seen) {
        if (c->flags & GW_BACK_CONN_F_PAUSED)
            uv_timer_stop(&c->timer); /* a slow client is not a slow origin */
        else if (!uv_is_active((uv_handle_t *)&c->timer))
            arm(c, ucfg(c)->read_timeout_ms);
    }
}

/* Codec events; user_data is the connection. A non-zero return stops the codec at once: the
 * exchange is gone (cancelled from a callback, which closed the connection) or the health
 * check is over. */

static int p_head(void *data, const gw_h1_msg_t *m)
{
    gw_back_conn_t *c = data;
    gw_back_head_t h = {(int)m->status, (int)m->version_minor, m->fields, m->fields_len};
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        if (h.status >= 200) {
            gw_back_server_t *s = c->server;
            unsigned want = s->up->cfg->health_status ? s->up->cfg->health_status : 200;
            if ((unsigned)h.status == want) {
                if (s->ejected_until)
                    GW_LOG_INFO("back_server_return", "upstream=%s server=%s reason=health",
                                s->up->cfg->name, s->cfg->addr.text);
                s->ejected_until = 0;
                s->fails = 0;
            } else {
                gw_back__server_fail(s, uv_now(loop_of(c)));
            }
            gw_back__conn_close(c);
            return GW_E_CLOSED;
        }
        return 0;
    }
    gw_back_exch_t *x = c->exch;
    if (h.status >= 200) {
        gw_back__server_ok(c->server);
        arm(c, ucfg(c)->read_timeout_ms);
        if (m->version_minor >= 1 && gw_h1_client_keep_alive(c->h1))
            c->flags |= GW_BACK_CONN_F_PERSIST;
        else
            c->flags &= ~GW_BACK_CONN_F_PERSIST;
        /* A body without a length (a stream of events may never end) or a large one would
         * hold whatever waits behind it: those requests go elsewhere. A body up to
         * GW_BACK_PIPE_LONG crosses a LAN in about a millisecond; a slow client pauses it,
         * which moves them too (gw_back__conn_update_reading). */
        int bodyless = (c->flags & GW_BACK_CONN_F_HEAD) || h.status == 204 || h.status == 304;
        if (!bodyless &&
            (m->content_length < 0 || m->content_length > (int64_t)GW_BACK_PIPE_LONG)) {
            c->flags |= GW_BACK_CONN_F_LONG;
            if (c->pipe_len)
                pipe_evacuate(c, 1);
            if (!x) {
                /* Nobody reads it, and its body may not end: close rather than drain. */
                GW_LOG_DEBUG("back_conn_close", "server=%s reason=long_placeholder",
                             c->server->cfg->addr.text);
                pipe_evacuate(c, 0);
                detach(c);
                gw_back__conn_close(c);
                return GW_E_CLOSED;
            }
        }
    }
    if (!x)
        return 0; /* a placeholder's response: dropped */
    if (gw_back__deliver_head(x, &h, h.status < 200))
        return GW_E_CLOSED;
    if (h.status >= 200)
        gw_back__conn_update_reading(c);
    return 0;
}

static int p_body(void *data, size_t off, size_t len)
{
    gw_back_conn_t *c = data;
    if (!c->exch)
        return 0; /* a placeholder's response: dropped */
    return gw_back__deliver_body(c->exch, c->in, off, len) ? GW_E_CLOSED : 0;
}

static int p_trailers(void *data, const gw_field_t *f, size_t n)
{
    gw_back_conn_t *c = data;
    return c->exch && gw_back__deliver_trailers(c->exch, f, n) ? GW_E_CLOSED : 0;
}

static int p_complete(void *data)
{
    gw_back_conn_t *c = data;
    c->msg_done = 1; /* handled after feed returns, outside the codec */
    return 0;
}

static const gw_h1_client_cbs_t codec_cbs = {p_head, p_body, p_trailers, p_complete};

static int tls_more_follows(gw_back_conn_t *c);

/* The next pipelined entry becomes the response to read. */
static void promote(gw_back_conn_t *c)
{
    gw_back_pipe_t e = *pipe_at(c, 0);
    c->pipe_first = (c->pipe_first + 1) % pipe_cap(c);
    c->pipe_len--;
    c->flags |= GW_BACK_CONN_F_REUSED;
    begin_response(c, e.x, e.head_only, GW_BACK_CONN_F_PIPELINED);
    arm(c, ucfg(c)->response_timeout_ms);
    gw_back__conn_update_reading(c);
}

/* The response being read ended, with `rest` more bytes in this read after it; eof: it was
 * ended by the origin's close. Returns 1 when c goes on with the next pipelined response (the
 * `rest` bytes are its own), 0 when c was parked or closed. */
static int complete(gw_back_conn_t *c, size_t rest, int eof)
{
    gw_back_exch_t *x = c->exch;
    gw_back_server_t *s = c->server;
    unsigned maxr = ucfg(c)->max_requests_per_connection;
    int keep_alive = gw_h1_client_keep_alive(c->h1) && !eof;
    /* Only placeholders behind (their exchanges left for another connection): their answers
     * are on the way and short ones are cheaper to read and drop than a new connection, which
     * the next pause or long response would cost again. Not past max_requests_per_connection:
     * the connection would be retired after them anyway. */
    int drain = c->pipe_len && !pipe_live(c) && !(maxr && c->requests >= maxr);
    if (c->pipe_len && keep_alive && (drain || pipe_live(c))) {
        GW_LOG_DEBUG("back_exch_done", "server=%s status=%u reuse=%s requests=%u",
                     s->cfg->addr.text, gw_h1_client_status(c->h1), drain ? "drain" : "pipelined",
                     c->requests);
        if (x)
            x->conn = NULL;
        c->exch = NULL;
        promote(c);
        if (x)
            gw_back__deliver_complete(x);
        if (c->state != GW_BACK_CONN_ACTIVE)
            return 0;              /* closed from the callback */
        gw_back__slot_released(s); /* a pipeline slot opened: a queued exchange may take it */
        return c->state == GW_BACK_CONN_ACTIVE;
    }
    /* Nothing (alive) behind it: the cleartext rules. An origin that sent bytes after the
     * response has desynchronised the connection; with requests behind it, the connection ends
     * here (the origin closes it, or only placeholders remain) and they are sent again. */
    int request_done = !x || (x->body_ended && x->body.bytes == 0 &&
                              ((c->flags & GW_BACK_CONN_F_PIPELINED) || c->pipe_len ||
                               (c->out.bytes == 0 && !(c->flags & GW_BACK_CONN_F_WRITING))));
    int reuse = keep_alive && c->pipe_len == 0 && rest == 0 && !(c->tls && tls_more_follows(c)) &&
                request_done && !(maxr && c->requests >= maxr);
    GW_LOG_DEBUG("back_exch_done", "server=%s status=%u reuse=%d requests=%u", s->cfg->addr.text,
                 gw_h1_client_status(c->h1), reuse, c->requests);
    pipe_evacuate(c, 0);
    detach(c);
    if (reuse)
        gw_back__conn_free_again(c);
    else
        gw_back__conn_close(c);
    if (x)
        gw_back__deliver_complete(x);
    return 0;
}

/* The socket ended (nread is UV_EOF or an error code) on an ACTIVE connection. Over TLS the
 * origin's close_notify comes here as UV_EOF with clean = 1; a TCP FIN without one (clean = 0)
 * is an incomplete close (RFC 9112 §9.8): a body with a length or chunked framing is checked
 * whole by the codec anyway, but a close-delimited body that ends that way may be truncated,
 * so it is not treated as complete. */
static void read_end(gw_back_conn_t *c, ssize_t nread, int clean)
{
    int rc = nread == UV_EOF ? gw_h1_client_eof(c->h1) : GW_E_IO;
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (rc == 0 && (c->flags & GW_BACK_CONN_F_HEALTH)) {
        gw_back__conn_close(c);
        return;
    }
    if (rc == 0 && c->msg_done) {
        c->msg_done = 0;
        if (!clean) {
            GW_LOG_WARN("back_tls_incomplete_close",
                        "upstream=%s server=%s reason=\"close-delimited body ended by a TCP FIN "
                        "without close_notify\"",
                        ucfg(c)->name, c->server->cfg->addr.text);
            fail(c, GW_E_IO, 1);
            return;
        }
        complete(c, 0, 1); /* close-delimited body */
        return;
    }
    /* EOF or reset on a reused connection before any byte is the keep-alive race, not a
     * sick server: do not count it for passive health. */
    int race = (c->flags & GW_BACK_CONN_F_REUSED) && !(c->flags & GW_BACK_CONN_F_GOT_BYTE);
    fail(c, GW_E_IO, !race);
}

/* Whether more plaintext follows a completed response over TLS (then the connection is not
 * reused, as when bytes follow it in a cleartext read). Reads the rest of what was fed: an
 * origin that sent more than one response has desynchronised the connection anyway. */
static int tls_more_follows(gw_back_conn_t *c)
{
    uint8_t probe[256];
    return gw_back_tls_read(c->tls, probe, sizeof(probe)) != GW_E_AGAIN;
}

/* n response bytes were just placed at the free tail of c->in: parse them. Returns 1 when
 * the connection is done with this read (response complete and no pipelined one follows,
 * failed, or closed from a callback), 0 when more bytes may come. */
static int feed_in(gw_back_conn_t *c, size_t n)
{
    size_t off = c->in->len;
    c->in->len += n;
    c->flags |= GW_BACK_CONN_F_GOT_BYTE;
    if (c->exch && c->exch->head_seen && !(c->flags & GW_BACK_CONN_F_PAUSED))
        arm(c, ucfg(c)->read_timeout_ms);
    for (;;) {
        c->msg_done = 0;
        ssize_t used = gw_h1_client_feed(c->h1, c->in->data, off, n);
        if (c->state == GW_BACK_CONN_CLOSING) {
            c->msg_done = 0;
            return 1; /* cancelled from a callback, or a health check that finished */
        }
        if (used < 0) {
            c->msg_done = 0;
            fail(c, (int)used == GW_E_NOMEM ? GW_E_NOMEM : GW_E_PARSE, 1);
            return 1;
        }
        if (!c->msg_done)
            return 0;
        c->msg_done = 0;
        size_t rest = n - (size_t)used;
        if (!complete(c, rest, 0))
            return 1;
        if (rest == 0)
            return 0;
        /* The next pipelined response starts in this read. */
        off += (size_t)used;
        n = rest;
        c->flags |= GW_BACK_CONN_F_GOT_BYTE;
    }
}

static void tls_handshake_step(gw_back_conn_t *c);

/* Ciphertext arrived on a TLS connection (in tls_rbuf). */
static void tls_recv(gw_back_conn_t *c, size_t n)
{
    if (gw_back_tls_feed(c->tls, tls_rbuf, n) < 0) {
        if (c->state == GW_BACK_CONN_IDLE)
            gw_back__conn_close(c);
        else
            fail(c, GW_E_NOMEM, 0);
        return;
    }
    if (c->flags & GW_BACK_CONN_F_HANDSHAKE) {
        tls_handshake_step(c);
        return;
    }
    if (c->state == GW_BACK_CONN_IDLE) {
        /* A TLS 1.3 ticket or a partial record keeps an idle connection; application data,
         * close_notify or any error is the RFC 9112 §9.3.1 case of the cleartext path. */
        uint8_t probe[256];
        ssize_t r = gw_back_tls_read(c->tls, probe, sizeof(probe));
        if (r == GW_E_AGAIN)
            return;
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=%s", c->server->cfg->addr.text,
                     r > 0              ? "unexpected_bytes"
                     : r == GW_E_CLOSED ? "close_notify"
                                        : "tls_error");
        gw_back__conn_close(c);
        return;
    }
    /* ACTIVE: decrypt everything fed (at most one read of ciphertext plus a partial record)
     * into c->in, parsing as we go; a pause asked from a callback takes effect at the next
     * socket read, as in cleartext. */
    for (;;) {
        if (in_tail(c) < 0) {
            fail(c, GW_E_NOMEM, 0);
            return;
        }
        ssize_t r = gw_back_tls_read(c->tls, c->in->data + c->in->len, c->in->cap - c->in->len);
        if (r == GW_E_AGAIN)
            break;
        if (r == GW_E_CLOSED) {
            read_end(c, UV_EOF, 1); /* close_notify: the origin's end of the stream */
            return;
        }
        if (r < 0) {
            GW_LOG_WARN("back_tls_error", "upstream=%s server=%s reason=\"%s\"", ucfg(c)->name,
                        c->server->cfg->addr.text, gw_back_tls_reason(c->tls));
            fail(c, GW_E_IO, 1);
            return;
        }
        if (feed_in(c, (size_t)r))
            return;
    }
    write_more(c); /* reading may have produced TLS output (a KeyUpdate answer) */
}

/* ---- read batching ---------------------------------------------------------------------------
 *
 * A body arrives in many segments, and a reader that sleeps between them wakes for each: the
 * wakeup, the epoll_wait and a short read cost more than the copy. Inside a Content-Length
 * body the socket gets SO_RCVLOWAT = min(rest of the body, read_batch) (socket(7)): Linux's
 * TCP then reports it readable only with that many bytes queued, or on EOF, an error, memory
 * pressure or a nearly closed window (tcp_epollin_ready), so the rest of a body up to
 * read_batch costs one wakeup and full reads. The bytes held back wait at most
 * read_batch_wait: the upstream's timer sets a connection that got no read for that long back
 * to the default for the rest of its response (a slow origin streams as it comes). Plain TCP
 * only: over TLS the ciphertext still to come is not the plaintext left (a record may be
 * half read). */

/* Below this, a batch saves less than the two setsockopt(2) it costs. */
#define BATCH_MIN GW_BACK_READ_BUF

static void lowat_set(gw_back_conn_t *c, unsigned v)
{
    uv_os_fd_t fd;
    int val = v ? (int)v : 1;
    if (v == c->lowat || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    /* The kernel caps it (half of tcp_rmem[2]) and grows the receive buffer to fit it. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &val, sizeof(val)) == 0)
        c->lowat = v;
}

static void hold_end(gw_back_conn_t *c)
{
    if (!gw_list_linked(&c->hlink))
        return;
    gw_back_upstream_t *up = c->server->up;
    gw_list_remove(&c->hlink);
    if (gw_list_empty(&up->holds))
        uv_timer_stop(&up->batch_timer);
}

void gw_back__batch_update(gw_back_conn_t *c)
{
    const gw_cfg_upstream_t *u = ucfg(c);
    uint64_t want = 0;
    if (!c->tls && u->read_batch && c->state == GW_BACK_CONN_ACTIVE &&
        (c->flags & GW_BACK_CONN_F_READING) &&
        !(c->flags & (GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_NOBATCH))) {
        int64_t left = gw_h1_client_body_left(c->h1);
        if (left >= BATCH_MIN)
            want = (uint64_t)left < u->read_batch ? (uint64_t)left : u->read_batch;
    }
    lowat_set(c, (unsigned)want);
    if (!c->lowat || !(c->flags & GW_BACK_CONN_F_READING)) {
        hold_end(c); /* a lowat kept while reading is stopped is set afresh when it starts */
        return;
    }
    gw_back_upstream_t *up = c->server->up;
    c->batch_since = uv_now(c->tcp.loop);
    if (!gw_list_linked(&c->hlink)) {
        if (gw_list_empty(&up->holds))
            uv_timer_start(&up->batch_timer, gw_back__batch_sweep, u->read_batch_wait_ms,
                           u->read_batch_wait_ms);
        gw_list_push_back(&up->holds, &c->hlink);
    }
}

void gw_back__batch_sweep(uv_timer_t *t)
{
    gw_back_upstream_t *up = t->data;
    uint64_t now = uv_now(t->loop), wait = up->cfg->read_batch_wait_ms;
    gw_list_t *n = up->holds.next;
    while (n != &up->holds) {
        gw_back_conn_t *c = GW_CONTAINER_OF(n, gw_back_conn_t, hlink);
        n = n->next;
        if (now - c->batch_since < wait)
            continue;
        c->flags |= GW_BACK_CONN_F_NOBATCH;
        lowat_set(c, 0); /* the kernel reports the bytes queued at once */
        hold_end(c);
        gw_back__stats(up->back)->batch_expired++;
        c->server->st.batch_expired++;
    }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    gw_back_conn_t *c = st->data;
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (nread == 0) { /* EAGAIN: the socket is drained */
        if (!c->tls)
            gw_back__batch_update(c);
        return;
    }
    if (nread > 0 && c->tls) {
        tls_recv(c, (size_t)nread);
        return;
    }
    if (c->state == GW_BACK_CONN_IDLE) {
        /* RFC 9112 §9.3.1: an origin may close an idle connection at any time; bytes on an
         * idle connection cannot belong to any request. Either way it is unusable. */
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=%s", c->server->cfg->addr.text,
                     nread < 0 ? uv_err_name((int)nread) : "unexpected_bytes");
        gw_back__conn_close(c);
        return;
    }
    if (nread < 0) {
        if (c->state == GW_BACK_CONN_CONNECTING) { /* during the TLS handshake */
            GW_LOG_WARN("back_tls_handshake_failed", "upstream=%s server=%s reason=\"%s\"",
                        ucfg(c)->name, c->server->cfg->addr.text,
                        nread == UV_EOF ? "connection closed by the origin"
                                        : uv_err_name((int)nread));
            fail(c, GW_E_IO, 1);
            return;
        }
        read_end(c, nread, !c->tls);
        return;
    }
    if ((size_t)nread == buf->len && !c->in_big)
        c->in_big = 1; /* a body bigger than the buffer is coming: read it in larger pieces */
    if (feed_in(c, (size_t)nread))
        return;
    if ((size_t)nread < buf->len)
        gw_back__batch_update(c); /* the socket is drained */
}

/* ---- timers, connect ------------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t)
{
    gw_back_conn_t *c = t->data;
    uint64_t now = uv_now(t->loop);
    if (now < c->deadline) { /* fired for an older, earlier deadline */
        uv_timer_start(t, on_timer, c->deadline - now, 0);
        return;
    }
    switch (c->state) {
    case GW_BACK_CONN_CONNECTING:
        if (c->flags & GW_BACK_CONN_F_HANDSHAKE)
            GW_LOG_WARN("back_tls_handshake_failed", "upstream=%s server=%s reason=\"timeout\"",
                        ucfg(c)->name, c->server->cfg->addr.text);
        fail(c, c->dial_err ? c->dial_err : GW_E_TIMEOUT, 1);
        break;
    case GW_BACK_CONN_ACTIVE:
        if (c->dial_err) {
            fail(c, c->dial_err, 0); /* deferred out-of-memory from gw_back__conn_start */
            break;
        }
        /* The origin holds every request byte we had and no response came, but the client
         * has not sent the rest of its body: the wait is the client's, bounded by the front's
         * timeouts.request_body. The response timer runs only once the request is sent
         * whole (issue 18 item 5: a stalled upload counted as a server failure, and five
         * ejected the server). */
        if (waiting_client(c)) {
            arm(c, ucfg(c)->response_timeout_ms);
            break;
        }
        /* Response head or body read timeout: the request may have taken effect, so it is
         * not retried; a server that stalls counts as failing. */
        c->flags |= GW_BACK_CONN_F_GOT_BYTE;
        fail(c, GW_E_TIMEOUT, 1);
        break;
    case GW_BACK_CONN_IDLE:
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=idle_timeout", c->server->cfg->addr.text);
        gw_back__conn_close(c);
        break;
    case GW_BACK_CONN_CLOSING:
        break;
    }
}

/* The connection is up (TCP, and TLS when configured): send the health check request or
 * start the bound exchange. */
static void connected(gw_back_conn_t *c)
{
    if (c->flags & GW_BACK_CONN_F_HEALTH) {
        const gw_cfg_upstream_t *u = ucfg(c);
        char line[1024];
        int n = snprintf(line, sizeof(line),
                         "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u->health_path,
                         c->server->cfg->host ? c->server->cfg->host : c->server->cfg->addr.text);
        c->state = GW_BACK_CONN_ACTIVE;
        gw_h1_client_start(c->h1, 0);
        if (n < 0 || (size_t)n >= sizeof(line) || gw_iovq_copy(&c->out, line, (size_t)n) < 0) {
            fail(c, GW_E_NOMEM, 0);
            return;
        }
        arm(c, u->response_timeout_ms);
        gw_back__conn_update_reading(c);
        write_more(c);
        return;
    }
    gw_back_exch_t *x = c->exch;
    GW_ASSERT(x != NULL);
    gw_back__conn_start(c, x);
}

/* One step of the TLS handshake, after the connect or a read. The connect timer keeps
 * running: connect, name resolution and handshake share connect_timeout. */
static void tls_handshake_step(gw_back_conn_t *c)
{
    int rc = gw_back_tls_handshake(c->tls);
    write_more(c); /* our flight, or the alert of a failure */
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (rc < 0) {
        GW_LOG_WARN("back_tls_handshake_failed", "upstream=%s server=%s reason=\"%s\"",
                    ucfg(c)->name, c->server->cfg->addr.text, gw_back_tls_reason(c->tls));
        c->dial_err = GW_E_IO;
        fail(c, GW_E_IO, 1);
        return;
    }
    if (rc == 0)
        return;
    c->flags &= ~GW_BACK_CONN_F_HANDSHAKE;
    GW_LOG_DEBUG("back_tls_connected", "server=%s version=%s cipher=%s alpn=%s resumed=%d",
                 c->server->cfg->addr.text, gw_back_tls_version(c->tls), gw_back_tls_cipher(c->tls),
                 gw_back_tls_alpn(c->tls), gw_back_tls_resumed(c->tls));
    connected(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, connect_req);
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (status < 0) {
        c->dial_err = GW_E_IO;
        fail(c, GW_E_IO, 1);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (c->tls) {
        c->flags |= GW_BACK_CONN_F_HANDSHAKE;
        gw_back__conn_update_reading(c);
        tls_handshake_step(c);
        return;
    }
    connected(c);
}

static gw_back_conn_t *conn_new(gw_back_server_t *s)
{
    uv_loop_t *loop = gw_back__loop(s->up->back);
    gw_back_conn_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    /* Bounds a response head and a trailer section (past them: GW_E_PARSE). */
    gw_h1_limits_t lim = {GW_BACK_MAX_HEAD, GW_BACK_MAX_FIELDS};
    c->h1 = gw_h1_client_new(&lim, &codec_cbs, c);
    if (s->up->tls)
        c->tls = gw_back_tls_new(s->up->tls, s->index, s->cfg->host);
    if (!c->h1 || (s->up->tls && !c->tls)) {
        gw_h1_client_del(c->h1);
        gw_free(c);
        return NULL;
    }
    gw_bytes_init(&c->tls_out, 0);
    gw_list_init(&c->link);
    gw_list_init(&c->flink);
    gw_list_init(&c->hlink);
    gw_iovq_init(&c->out);
    c->server = s;
    c->state = GW_BACK_CONN_CONNECTING;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    return c;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, gai);
    c->flags &= ~GW_BACK_CONN_F_RESOLVING;
    if (c->state == GW_BACK_CONN_CLOSING) {
        uv_freeaddrinfo(res);
        conn_unref(c); /* may be the last reference: the handles may have closed already */
        return;
    }
    c->handles--; /* tcp and timer are still open: never the last */
    int rc = status < 0 || !res
                 ? UV_EAI_NONAME
                 : uv_tcp_connect(&c->connect_req, &c->tcp, res->ai_addr, on_connect);
    if (rc < 0)
        GW_LOG_WARN("back_resolve_fail", "upstream=%s server=%s err=%s", c->server->up->cfg->name,
                    c->server->cfg->addr.text, uv_err_name(rc));
    uv_freeaddrinfo(res);
    if (rc < 0) {
        c->dial_err = GW_E_IO;
        fail(c, GW_E_IO, 1);
    }
}

/* A server written as NAME:PORT: resolve it at each dial (the connect timeout covers it). */
static int start_resolve(gw_back_conn_t *c)
{
    const gw_cfg_server_t *sc = c->server->cfg;
    const char *colon = strrchr(sc->addr.text, ':');
    if (!colon || !sc->host)
        return UV_EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(loop_of(c), &c->gai, on_resolved, sc->host, colon + 1, &hints);
    if (rc == 0) {
        c->flags |= GW_BACK_CONN_F_RESOLVING;
        c->handles++;
    }
    return rc;
}

static void start_connect(gw_back_conn_t *c)
{
    const gw_cfg_server_t *sc = c->server->cfg;
    int rc;
    if (sc->addr.ss.ss_family == AF_INET || sc->addr.ss.ss_family == AF_INET6)
        rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&sc->addr.ss,
                            on_connect);
    else
        rc = start_resolve(c);
    if (rc < 0) {
        /* Report asynchronously (callbacks never fire from gw_back_request). */
        c->dial_err = GW_E_IO;
        arm(c, 0);
        return;
    }
    arm(c, ucfg(c)->connect_timeout_ms);
}

int gw_back__conn_dial(gw_back_server_t *s, gw_back_exch_t *x)
{
    gw_back_conn_t *c = conn_new(s);
    if (!c)
        return GW_E_NOMEM;
    gw_back_stats_t *st = gw_back__stats(s->up->back);
    s->open++;
    s->busy++;
    st->open++;
    st->opened++;
    st->active++;
    s->st.open++;
    s->st.opened++;
    s->st.active++;
    c->flags |= GW_BACK_CONN_F_BUSY;
    c->exch = x;
    x->conn = c;
    x->server = s;
    start_connect(c);
    return 0;
}

void gw_back__conn_start(gw_back_conn_t *c, gw_back_exch_t *x)
{
    if (c->state == GW_BACK_CONN_IDLE) {
        gw_list_remove(&c->link);
        c->server->idle_cnt--;
        gw_back__stats(c->server->up->back)->idle--;
        c->server->st.idle--;
        c->server->busy++;
        gw_back__stats(c->server->up->back)->active++;
        c->server->st.active++;
        c->flags |= GW_BACK_CONN_F_REUSED | GW_BACK_CONN_F_BUSY;
        c->exch = x;
        x->conn = c;
        x->server = c->server;
    } else {
        c->flags &= ~GW_BACK_CONN_F_REUSED;
    }
    GW_ASSERT(c->pipe_len == 0);
    if (ucfg(c)->pipeline > 1 && !gw_list_linked(&c->link))
        gw_list_push_back(&c->server->active, &c->link);
    c->state = GW_BACK_CONN_ACTIVE;
    c->requests++;
    begin_response(c, x, is_head(x), 0);
    c->dial_err = 0;
    if (gw_iovq_copy(&c->out, x->head.base, x->head.len) < 0) {
        /* Report from the timer: this may run inside gw_back_request(), which never calls
         * back synchronously. */
        c->dial_err = GW_E_NOMEM;
        arm(c, 0);
        return;
    }
    arm(c, ucfg(c)->response_timeout_ms);
    gw_back__conn_update_reading(c);
    if (ucfg(c)->pipeline > 1)
        gw_back__flush_later(c); /* requests dispatched with this one may join its write */
    else
        write_more(c);
}

gw_back_conn_t *gw_back__conn_take_idle(gw_back_server_t *s, int careful)
{
    while (!gw_list_empty(&s->idle)) {
        gw_back_conn_t *c = GW_CONTAINER_OF(s->idle.next, gw_back_conn_t, link);
        /* The read callback may not have run yet for a close that already arrived: peek, for
         * a request that could not be sent again. Not for a bodyless idempotent one, which
         * goes again elsewhere if it meets the close (a syscall per request saved: about one
         * in twenty requests under load, nearly every one when requests come further apart),
         * nor for a connection parked in this same loop iteration (the poll that could report
         * a close has not run since). */
        uv_os_fd_t fd;
        int dead = 0;
        if (careful && c->idle_since != uv_now(loop_of(c))) {
            char b;
            dead = uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
                   recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
                   (errno != EAGAIN && errno != EWOULDBLOCK);
        }
        if (!dead)
            return c;
        GW_LOG_DEBUG("back_idle_close", "server=%s reason=dead_on_reuse", s->cfg->addr.text);
        gw_back__conn_close(c);
    }
    return NULL;
}

void gw_back__conn_abort(gw_back_conn_t *c)
{
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = pipe_at(c, i);
        if (e->x)
            e->x->conn = NULL;
    }
    c->pipe_first = c->pipe_len = 0;
    detach(c);
    gw_back__conn_close(c);
}

void gw_back__conn_cancel(gw_back_conn_t *c, gw_back_exch_t *x)
{
    if (c->exch == x) {
        pipe_evacuate(c, 0);
        detach(c);
        gw_back__conn_close(c);
        return;
    }
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = pipe_at(c, i);
        if (e->x == x) {
            e->x = NULL; /* its request is on the wire: drop the response when it comes */
            x->conn = NULL;
            return;
        }
    }
    GW_ASSERT(!"cancelled exchange not found on its connection");
}

/* Whether c takes one more pipelined request now (see the file comment). */
static int pipeline_ok(gw_back_conn_t *c)
{
    const gw_cfg_upstream_t *u = ucfg(c);
    gw_back_exch_t *x = c->exch;
    if (c->state != GW_BACK_CONN_ACTIVE || inflight(c) >= u->pipeline ||
        (u->max_requests_per_connection && c->requests >= u->max_requests_per_connection))
        return 0;
    if ((c->flags & (GW_BACK_CONN_F_PERSIST | GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_LONG)) !=
        GW_BACK_CONN_F_PERSIST)
        return 0;
    if (c->server->pipe_backoff_until && uv_now(loop_of(c)) < c->server->pipe_backoff_until)
        return 0;
    return !x || GW_BACK_RESENDABLE(&x->req);
}

gw_back_conn_t *gw_back__conn_batch_slot(gw_back_server_t *s)
{
    gw_back_conn_t *h = s->pipe_hint;
    return h && gw_list_linked(&h->flink) && pipeline_ok(h) ? h : NULL;
}

gw_back_conn_t *gw_back__conn_pipe_slot(gw_back_server_t *s)
{
    if (s->up->cfg->pipeline <= 1)
        return NULL;
    gw_back_conn_t *c = gw_back__conn_batch_slot(s);
    if (c)
        return c;
    /* The connection with the fewest requests in flight: the shortest wait. */
    gw_back_conn_t *best = NULL;
    unsigned best_n = UINT32_MAX;
    gw_list_foreach(it, &s->active)
    {
        c = GW_CONTAINER_OF(it, gw_back_conn_t, link);
        if (!pipeline_ok(c))
            continue;
        unsigned n = inflight(c);
        if (n < best_n) {
            best = c;
            best_n = n;
        }
    }
    return best;
}

int gw_back__conn_pipeline(gw_back_conn_t *c, gw_back_exch_t *x)
{
    GW_ASSERT(pipeline_ok(c));
    if (!c->pipe && !(c->pipe = gw_calloc(pipe_cap(c), sizeof(*c->pipe))))
        return GW_E_NOMEM;
    if (gw_iovq_copy(&c->out, x->head.base, x->head.len) < 0)
        return GW_E_NOMEM;
    *pipe_at(c, c->pipe_len) = (gw_back_pipe_t){x, is_head(x)};
    c->pipe_len++;
    c->requests++;
    x->conn = c;
    x->server = c->server;
    gw_back__stats(c->server->up->back)->pipelined++;
    c->server->st.pipelined++;
    gw_back__flush_later(c);
    return 0;
}

/* Park c in its server's idle list (most recent first). */
void gw_back__conn_park(gw_back_conn_t *c)
{
    gw_back_server_t *s = c->server;
    GW_ASSERT(c->exch == NULL && c->pipe_len == 0);
    /* Parked even beyond max_idle: closing on the turn a connection becomes idle closes, at
     * every dip in load, the connections the next burst dials again (issue 19 item 1: 20,000
     * new origin connections per 200,000 requests). The excess is closed by the purge timer,
     * a fraction per idle_purge period, as HAProxy's pool-purge-delay does. */
    if (s->idle_cnt >= s->up->cfg->max_idle && !uv_is_active((uv_handle_t *)&s->up->purge_timer))
        uv_timer_start(&s->up->purge_timer, gw_back__idle_purge, s->up->cfg->idle_purge_ms, 0);
    gw_list_remove(&c->link); /* the active list (pipelining) */
    gw_back__flush_cancel(c);
    hold_end(c);
    lowat_set(c, 0); /* the next response head is awaited byte by byte */
    if (s->pipe_hint == c)
        s->pipe_hint = NULL;
    c->state = GW_BACK_CONN_IDLE;
    c->flags &= ~GW_BACK_CONN_F_PAUSED;
    gw_list_push_front(&s->idle, &c->link);
    s->idle_cnt++;
    gw_back__stats(s->up->back)->idle++;
    s->st.idle++;
    c->idle_since = uv_now(loop_of(c));
    gw_bytes_free(&c->tls_out); /* an idle connection does not keep a ciphertext batch */
    gw_bytes_init(&c->tls_out, 0);
    if (c->in_big) { /* nor a large read buffer: the next response starts small again */
        c->in_big = 0;
        gw_rbuf_unref(c->in);
        c->in = NULL;
    }
    arm(c, s->up->cfg->idle_timeout_ms);
    gw_back__conn_update_reading(c);
}

void gw_back__idle_purge(uv_timer_t *t)
{
    gw_back_upstream_t *up = t->data;
    uint64_t now = uv_now(t->loop), after = up->cfg->idle_purge_ms;
    unsigned max_idle = up->cfg->max_idle;
    int again = 0;
    for (size_t i = 0; i < up->servers_len; i++) {
        gw_back_server_t *s = &up->servers[i];
        if (s->idle_cnt <= max_idle)
            continue;
        unsigned excess = s->idle_cnt - max_idle, n = (excess + 1) / 2;
        /* from the tail: the list is most recently used first */
        gw_list_t *l = s->idle.prev;
        while (n && l != &s->idle) {
            gw_back_conn_t *c = GW_CONTAINER_OF(l, gw_back_conn_t, link);
            l = l->prev;
            if (now - c->idle_since < after)
                break; /* the rest were used more recently still */
            GW_LOG_DEBUG("back_idle_close", "server=%s reason=purge idle=%u max_idle=%u",
                         s->cfg->addr.text, s->idle_cnt, max_idle);
            gw_back__conn_close(c);
            gw_back__stats(up->back)->purged++;
            s->st.purged++;
            n--;
        }
        again |= s->idle_cnt > max_idle;
    }
    if (again)
        uv_timer_start(t, gw_back__idle_purge, after, 0);
}

void gw_back__health_check(gw_back_server_t *s)
{
    if (s->hc_conn || !s->up->cfg->health_path)
        return;
    gw_back_conn_t *c = conn_new(s);
    if (!c)
        return;
    c->flags |= GW_BACK_CONN_F_HEALTH;
    s->hc_conn = c;
    start_connect(c);
}
