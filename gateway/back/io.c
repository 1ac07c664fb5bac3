/* back/io.c — reading and writing an origin connection: request bytes out (through the client
 * TLS for an https upstream), response bytes in and through the h1 client codec.
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
 */
#include <string.h>

#include <netdb.h>
#include <sys/socket.h>

#include "back/back_internal.h"

#include "common/err.h"
#include "common/log.h"

static void tls_write_more(gw_back_conn_t *c);
static int tls_more_follows(gw_back_conn_t *c);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

#define MAX_IOV 64
#define MIN_READ_TAIL 2048
/* Plaintext encrypted per ciphertext write: bounds tls_out (records add ~1.5%). */
#define TLS_WRITE_BATCH 65536

/* TLS: ciphertext lands here and is fed to the session in the same read callback. One per
 * thread: a worker's loop runs one read callback at a time. */
static _Thread_local uint8_t tls_rbuf[GW_BACK_READ_BUF];

/* ---- writing ------------------------------------------------------------------------------ */

/* An upgrade request's bytes wait for its 101 (the tunnel): before, only its head goes. */
static int body_held(const gw_back_exch_t *x)
{
    return x->req.upgrade && !x->tunnel;
}

/* Bytes handed to the origin socket, for the metrics. */
static void count_out(gw_back_conn_t *c, size_t n)
{
    c->server->st.bytes_out += n;
    gw_back__stats(c->server->up->back)->bytes_out += n;
}

/* The write in flight is done: its bytes (plaintext, over TLS too) leave the head queue, then
 * the exchange's body. Returns how many were body bytes. */
static size_t account_written(gw_back_conn_t *c)
{
    size_t n = c->writing;
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
    return n;
}

static void on_write(uv_write_t *req, int status)
{
    gw_back_conn_t *c = GW_CONTAINER_OF(req, gw_back_conn_t, write_req);
    c->flags &= ~GW_BACK_CONN_F_WRITING;
    if (c->state == GW_BACK_CONN_CLOSING)
        return;
    if (status < 0) {
        gw_back__fail(c, GW_E_IO, 1);
        return;
    }
    size_t n = account_written(c);
    gw_back_exch_t *x = c->exch;
    if (x && c->state == GW_BACK_CONN_ACTIVE && !(c->flags & GW_BACK_CONN_F_GOT_BYTE) &&
        (x->phase < GW_BACK_X_HEAD))
        gw_back__arm(
            c,
            gw_back__ucfg(c)->response_timeout_ms); /* progress: the origin is taking the request */
    if (x && n && (c->flags & GW_BACK_CONN_F_TUNNEL))
        gw_back__arm(c, gw_back__config(c->server->up->back)->timeouts.tunnel_idle_ms);
    if (x && n) {
        gw_back__exch_marks(x, 0); /* may cancel x (and close c) */
        if (c->state == GW_BACK_CONN_CLOSING)
            return;
    }
    gw_back__write_more(c);
    if (c->flags & GW_BACK_CONN_F_TUNNEL) {
        gw_back__tunnel_shut(c);
        gw_back__tunnel_trim(c);
    }
}

void gw_back__tunnel_shut(gw_back_conn_t *c)
{
    gw_back_exch_t *x = c->exch;
    if (!x || !x->body_ended || (c->flags & (GW_BACK_CONN_F_SHUT_WR | GW_BACK_CONN_F_WRITING)) ||
        x->body.bytes || c->out.bytes || c->state != GW_BACK_CONN_ACTIVE)
        return;
    c->flags |= GW_BACK_CONN_F_SHUT_WR;
    /* Cleartext: the origin reads EOF (a WebSocket server answers with its own close). Over
     * TLS a close_notify would end the session both ways for many servers: nothing is sent,
     * the tunnel ends when either side closes. */
    uv_os_fd_t fd;
    if (!c->tls && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
        (void)shutdown(fd, SHUT_WR);
}

static void tls_write_more(gw_back_conn_t *c);

void gw_back__write_more(gw_back_conn_t *c)
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
    if (k && (!c->exch || c->exch->body.count == 0 || body_held(c->exch))) {
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
            count_out(c, (size_t)n);
            gw_iovq_consume(&c->out, (size_t)n);
            if ((size_t)n == total)
                return;
            k = gw_iovq_peek(&c->out, iov, MAX_IOV);
        } /* else EAGAIN or an error: uv_write queues it, or reports the error from on_write */
        total = 0;
    }
    /* Only whole queued head entries precede body bytes: peek returns them in order. */
    if (k < MAX_IOV && c->exch && k == c->out.count && !body_held(c->exch))
        k += gw_iovq_peek(&c->exch->body, iov + k, MAX_IOV - k);
    if (k == 0)
        return;
    for (size_t i = 0; i < k; i++) {
        bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
        total += iov[i].iov_len;
    }
    c->writing = total;
    c->flags |= GW_BACK_CONN_F_WRITING;
    count_out(c, total);
    int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, (unsigned)k, on_write);
    if (rc < 0) {
        c->flags &= ~GW_BACK_CONN_F_WRITING;
        c->writing = 0;
        gw_back__fail(c, GW_E_IO, 1);
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
        if (k < MAX_IOV && c->exch && k == c->out.count && !body_held(c->exch))
            k += gw_iovq_peek(&c->exch->body, iov + k, MAX_IOV - k);
        for (size_t i = 0; i < k && plain < TLS_WRITE_BATCH; i++) {
            size_t n = iov[i].iov_len;
            if (n > TLS_WRITE_BATCH - plain)
                n = TLS_WRITE_BATCH - plain;
            if (gw_tls_write(c->tls, iov[i].iov_base, n) < 0) {
                GW_LOG_WARN("back_tls_error", "upstream=%s server=%s reason=\"%s\"",
                            gw_back__ucfg(c)->name, c->server->cfg->addr.text,
                            gw_tls_reason(c->tls));
                gw_back__fail(c, GW_E_IO, 1);
                return;
            }
            plain += n;
            body |= i >= from_out;
        }
    }
    size_t pend = gw_tls_pending_out(c->tls);
    if (pend == 0)
        return;
    c->tls_out.len = 0;
    if (gw_bytes_reserve(&c->tls_out, pend) < 0) {
        gw_back__fail(c, GW_E_NOMEM, 0);
        return;
    }
    c->tls_out.len = gw_tls_take_out(c->tls, c->tls_out.base, pend);
    uv_buf_t b = uv_buf_init((char *)c->tls_out.base, (unsigned)c->tls_out.len);
    if (!body) {
        /* Head or handshake bytes only: one write(2) and no write request when it all fits,
         * as in cleartext (no body progress to report). */
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n > 0)
            count_out(c, (size_t)n);
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
    count_out(c, b.len);
    int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        c->flags &= ~GW_BACK_CONN_F_WRITING;
        c->writing = 0;
        gw_back__fail(c, GW_E_IO, 1);
    }
}

void gw_back__conn_flush(gw_back_conn_t *c)
{
    gw_back__write_more(c);
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

/* The timeout between two reads of the response: a tunnel's is its idle timeout. */
static uint64_t read_timeout(gw_back_conn_t *c)
{
    return (c->flags & GW_BACK_CONN_F_TUNNEL)
               ? gw_back__config(c->server->up->back)->timeouts.tunnel_idle_ms
               : gw_back__ucfg(c)->read_timeout_ms;
}

void gw_back__conn_update_reading(gw_back_conn_t *c)
{
    int want = c->state == GW_BACK_CONN_IDLE ||
               (c->state == GW_BACK_CONN_ACTIVE && !(c->flags & GW_BACK_CONN_F_PAUSED)) ||
               (c->state == GW_BACK_CONN_CONNECTING && (c->flags & GW_BACK_CONN_F_HANDSHAKE));
    int on = !!(c->flags & GW_BACK_CONN_F_READING);
    /* Nothing waits behind a response whose consumer is slow. */
    if (c->state == GW_BACK_CONN_ACTIVE && (c->flags & GW_BACK_CONN_F_PAUSED) && c->pipe_len)
        gw_back__pipe_evacuate(c, 1);
    if (want && !on) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->flags |= GW_BACK_CONN_F_READING;
        if (c->lowat)
            gw_back__batch_update(c); /* the body left may be below the batch kept */
    } else if (!want && on) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags &= ~GW_BACK_CONN_F_READING;
        gw_back__hold_end(c);
    }
    if (c->state == GW_BACK_CONN_ACTIVE && c->exch && (c->exch->phase >= GW_BACK_X_HEAD)) {
        if (c->flags & GW_BACK_CONN_F_PAUSED)
            uv_timer_stop(&c->timer); /* a slow client is not a slow origin */
        else if (!uv_is_active((uv_handle_t *)&c->timer))
            gw_back__arm(c, read_timeout(c));
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
                gw_back__server_fail(s, uv_now(gw_back__loop_of(c)));
            }
            gw_back__conn_close(c);
            return GW_E_CLOSED;
        }
        return 0;
    }
    gw_back_exch_t *x = c->exch;
    if (h.status == 101 && x && x->req.upgrade) {
        /* RFC 9110 §15.2.2: the switch the request asked for; the codec reports every byte
         * after this head as tunnel data. Out of the pool's count from now on. */
        gw_back__server_ok(c->server);
        c->flags |= GW_BACK_CONN_F_TUNNEL | GW_BACK_CONN_F_LONG;
        c->flags &= ~GW_BACK_CONN_F_PERSIST;
        c->server->tunnels++;
        gw_back__stats(c->server->up->back)->tunnels++;
        x->tunnel = 1;
        x->body_ended = 0; /* a new byte stream towards the origin opens */
        gw_back__arm(c, read_timeout(c));
        if (gw_back__deliver_head(x, &h, 0))
            return GW_E_CLOSED;
        gw_back__conn_update_reading(c);
        gw_back__write_more(c);            /* bytes the client sent before the switch */
        gw_back__slot_released(c->server); /* a queued exchange may have its place */
        return 0;
    }
    if (h.status >= 200) {
        gw_back__server_ok(c->server);
        gw_back__arm(c, gw_back__ucfg(c)->read_timeout_ms);
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
                gw_back__pipe_evacuate(c, 1);
            if (!x) {
                /* Nobody reads it, and its body may not end: close rather than drain. */
                GW_LOG_DEBUG("back_conn_close", "server=%s reason=long_placeholder",
                             c->server->cfg->addr.text);
                gw_back__pipe_evacuate(c, 0);
                gw_back__detach(c);
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

const gw_h1_client_cbs_t gw_back__codec_cbs = {p_head, p_body, p_trailers, p_complete};

static int tls_more_follows(gw_back_conn_t *c);

/* The next pipelined entry becomes the response to read. */
static void promote(gw_back_conn_t *c)
{
    gw_back_pipe_t e = *gw_back__pipe_at(c, 0);
    c->pipe_first = (c->pipe_first + 1) % gw_back__pipe_cap(c);
    c->pipe_len--;
    c->flags |= GW_BACK_CONN_F_REUSED;
    gw_back__begin_response(c, e.x, e.head_only, GW_BACK_CONN_F_PIPELINED);
    gw_back__arm(c, gw_back__ucfg(c)->response_timeout_ms);
    gw_back__conn_update_reading(c);
}

/* A uv_write the kernel took whole reports in libuv's pending phase of the next loop turn; one
 * started in the prepare phase (proxy/upload.c hands gathered body pieces over there) reports
 * only after the next poll, which may already bring the origin's answer. With libuv's queue
 * empty every byte is the kernel's: account for them now, as on_write would, so that a request
 * sent whole lets its connection be reused. The write request stays in flight (WRITING, so
 * nothing else uses it); on_write then finds nothing left to account and only writes what
 * queued since. The exchange's write marks fire when it completes. Returns whether no write
 * is owed to the kernel. */
static int settle_write(gw_back_conn_t *c)
{
    if (!(c->flags & GW_BACK_CONN_F_WRITING))
        return 1;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) != 0)
        return 0;
    (void)account_written(c);
    return 1;
}

/* The response being read ended, with `rest` more bytes in this read after it; eof: it was
 * ended by the origin's close. Returns 1 when c goes on with the next pipelined response (the
 * `rest` bytes are its own), 0 when c was parked or closed. */
static int complete(gw_back_conn_t *c, size_t rest, int eof)
{
    gw_back_exch_t *x = c->exch;
    gw_back_server_t *s = c->server;
    unsigned maxr = gw_back__ucfg(c)->max_requests_per_connection;
    /* An upgrade answered otherwise than by a 101 (RFC 9110 §7.8: the server may ignore
     * Upgrade) ends the connection's use all the same: an origin that half switched may send
     * bytes after this answer, and they must not become the next request's answer. */
    int keep_alive = gw_h1_client_keep_alive(c->h1) && !eof && !(x && x->req.upgrade);
    /* Only placeholders behind (their exchanges left for another connection): their answers
     * are on the way and short ones are cheaper to read and drop than a new connection, which
     * the next pause or long response would cost again. Not past max_requests_per_connection:
     * the connection would be retired after them anyway. */
    int drain = c->pipe_len && !gw_back__pipe_live(c) && !(maxr && c->requests >= maxr);
    if (c->pipe_len && keep_alive && (drain || gw_back__pipe_live(c))) {
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
    int written = settle_write(c);
    int request_done =
        !x ||
        (x->body_ended && x->body.bytes == 0 &&
         ((c->flags & GW_BACK_CONN_F_PIPELINED) || c->pipe_len || (c->out.bytes == 0 && written)));
    int reuse = keep_alive && c->pipe_len == 0 && rest == 0 && !(c->tls && tls_more_follows(c)) &&
                request_done && !(maxr && c->requests >= maxr);
    GW_LOG_DEBUG("back_exch_done", "server=%s status=%u reuse=%d requests=%u", s->cfg->addr.text,
                 gw_h1_client_status(c->h1), reuse, c->requests);
    gw_back__pipe_evacuate(c, 0);
    gw_back__detach(c);
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
                        gw_back__ucfg(c)->name, c->server->cfg->addr.text);
            gw_back__fail(c, GW_E_IO, 1);
            return;
        }
        complete(c, 0, 1); /* close-delimited body */
        return;
    }
    /* EOF or reset on a reused connection before any byte is the keep-alive race, not a
     * sick server: do not count it for passive health. */
    int race = (c->flags & GW_BACK_CONN_F_REUSED) && !(c->flags & GW_BACK_CONN_F_GOT_BYTE);
    gw_back__fail(c, GW_E_IO, !race);
}

/* Whether more plaintext follows a completed response over TLS (then the connection is not
 * reused, as when bytes follow it in a cleartext read). Reads the rest of what was fed: an
 * origin that sent more than one response has desynchronised the connection anyway. */
static int tls_more_follows(gw_back_conn_t *c)
{
    uint8_t probe[256];
    return gw_tls_read(c->tls, probe, sizeof(probe)) != GW_E_AGAIN;
}

/* n response bytes were just placed at the free tail of c->in: parse them. Returns 1 when
 * the connection is done with this read (response complete and no pipelined one follows,
 * failed, or closed from a callback), 0 when more bytes may come. */
static int feed_in(gw_back_conn_t *c, size_t n)
{
    size_t off = c->in->len;
    c->in->len += n;
    c->flags |= GW_BACK_CONN_F_GOT_BYTE;
    if (c->exch && (c->exch->phase >= GW_BACK_X_HEAD) && !(c->flags & GW_BACK_CONN_F_PAUSED))
        gw_back__arm(c, read_timeout(c));
    for (;;) {
        c->msg_done = 0;
        ssize_t used = gw_h1_client_feed(c->h1, c->in->data, off, n);
        if (c->state == GW_BACK_CONN_CLOSING) {
            c->msg_done = 0;
            return 1; /* cancelled from a callback, or a health check that finished */
        }
        if (used < 0) {
            c->msg_done = 0;
            gw_back__fail(c, (int)used == GW_E_NOMEM ? GW_E_NOMEM : GW_E_PARSE, 1);
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

/* A tunnel may stay silent for minutes: its read buffer goes once a read was passed on (the
 * store holds its own reference to what the client has not taken), and the next read gets a
 * fresh one. About 16 KiB less per idle tunnel. */
static void tunnel_drop_in(gw_back_conn_t *c)
{
    if ((c->flags & GW_BACK_CONN_F_TUNNEL) && c->state == GW_BACK_CONN_ACTIVE && c->in) {
        gw_rbuf_unref(c->in);
        c->in = NULL;
    }
    gw_back__tunnel_trim(c);
}

/* Nor does it keep empty write queues (the head's 4 KiB copy block, entry rings). */
void gw_back__tunnel_trim(gw_back_conn_t *c)
{
    if (!(c->flags & GW_BACK_CONN_F_TUNNEL) || c->state != GW_BACK_CONN_ACTIVE ||
        (c->flags & GW_BACK_CONN_F_WRITING))
        return;
    if (c->out.count == 0 && (c->out.ents || c->out.copy_buf))
        gw_iovq_free(&c->out);
    if (c->exch && c->exch->body.count == 0 && (c->exch->body.ents || c->exch->body.copy_buf))
        gw_iovq_free(&c->exch->body);
}

/* Ciphertext arrived on a TLS connection (in tls_rbuf). */
static void tls_recv(gw_back_conn_t *c, size_t n)
{
    if (gw_tls_feed(c->tls, tls_rbuf, n) < 0) {
        if (c->state == GW_BACK_CONN_IDLE)
            gw_back__conn_close(c);
        else
            gw_back__fail(c, GW_E_NOMEM, 0);
        return;
    }
    if (c->flags & GW_BACK_CONN_F_HANDSHAKE) {
        gw_back__tls_handshake_step(c);
        return;
    }
    if (c->state == GW_BACK_CONN_IDLE) {
        /* A TLS 1.3 ticket or a partial record keeps an idle connection; application data,
         * close_notify or any error is the RFC 9112 §9.3.1 case of the cleartext path. */
        uint8_t probe[256];
        ssize_t r = gw_tls_read(c->tls, probe, sizeof(probe));
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
            gw_back__fail(c, GW_E_NOMEM, 0);
            return;
        }
        ssize_t r = gw_tls_read(c->tls, c->in->data + c->in->len, c->in->cap - c->in->len);
        if (r == GW_E_AGAIN)
            break;
        if (r == GW_E_CLOSED) {
            read_end(c, UV_EOF, 1); /* close_notify: the origin's end of the stream */
            return;
        }
        if (r < 0) {
            GW_LOG_WARN("back_tls_error", "upstream=%s server=%s reason=\"%s\"",
                        gw_back__ucfg(c)->name, c->server->cfg->addr.text, gw_tls_reason(c->tls));
            gw_back__fail(c, GW_E_IO, 1);
            return;
        }
        if (feed_in(c, (size_t)r))
            return;
    }
    tunnel_drop_in(c);
    gw_back__write_more(c); /* reading may have produced TLS output (a KeyUpdate answer) */
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
    if (nread > 0) {
        c->server->st.bytes_in += (uint64_t)nread;
        gw_back__stats(c->server->up->back)->bytes_in += (uint64_t)nread;
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
                        gw_back__ucfg(c)->name, c->server->cfg->addr.text,
                        nread == UV_EOF ? "connection closed by the origin"
                                        : uv_err_name((int)nread));
            gw_back__fail(c, GW_E_IO, 1);
            return;
        }
        read_end(c, nread, !c->tls);
        return;
    }
    if ((size_t)nread == buf->len && !c->in_big)
        c->in_big = 1; /* a body bigger than the buffer is coming: read it in larger pieces */
    if (feed_in(c, (size_t)nread))
        return;
    tunnel_drop_in(c);
    if ((size_t)nread < buf->len)
        gw_back__batch_update(c); /* the socket is drained */
}
