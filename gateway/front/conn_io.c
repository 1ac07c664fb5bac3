/* front/conn_io.c — one client connection's bytes: reading (TLS records, or the plaintext), the
 * protocol choice (ALPN, or on a cleartext listener the HTTP/2 preface against an HTTP/1.1
 * request line), and writing (gathered writes straight from the session's frame queue, the bound
 * on what is queued that pauses reading). */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "common/bucket.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "h2/errors.h"
#include "h2/frame.h"
#include "h2/session.h"

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* ---- write path -------------------------------------------------------------------------- */

/* The write queue is over limits.write_buffer: stop reading this client until it drains, so
 * a peer that does not read cannot make us buffer without bound. The flag says why.
 *
 * Not HTTP/2: its reads go on (RFC 9113 §5.2.2: a receiver MUST read in a timely fashion; a
 * WINDOW_UPDATE, a RST_STREAM or an urgent request left unread waited for as long as the client
 * took to read what the windows let the gateway send, for ever if it stopped). What reading
 * lets a client queue is bounded there by the session: streams (max_concurrent_streams, each
 * with at most limits.body_buffer of its response), the windows the gateway grants, and
 * control frames to answer (max_queued_control, then ENHANCE_YOUR_CALM); nothing is framed
 * while the write queue is over the bound (h2_send_step). */
static void pause_reads(conn_t *c)
{
    if ((c->flags & GW_CONN_F_READ_PAUSED) || c->state == CS_H2)
        return;
    c->flags |= GW_CONN_F_READ_PAUSED;
    GW_LOG_DEBUG("read_paused", "peer=%s reason=write_buffer queued=%zu", PEER(c), c->queued);
}

/* A client's TCP reset (RST: a browser tab closed, a client that closes with bytes unread or
 * with SO_LINGER 0) is common and benign; every other socket error is a real I/O failure. A
 * read sees the reset as ECONNRESET; a write as ECONNRESET, or EPIPE once the socket is known
 * to be reset. Both get reason=reset, never read_error or write_error. */
static int is_reset(ssize_t uverr)
{
    return uverr == UV_ECONNRESET || uverr == UV_EPIPE;
}

/* An end of stream that was a reset. libuv reports UV_EOF instead of UV_ECONNRESET when the
 * reset (POLLHUP) comes while the read that drained the last bytes was short (uv__stream_io's
 * short-circuit): the socket's pending error then still says ECONNRESET. And a write may have
 * taken that error first: a uv_write that fails at once reports it from a callback on the next
 * loop turn, after a read in the same epoll batch saw only the EOF (the error is read once).
 * The TCP state tells both apart from a FIN: a reset leaves the socket CLOSED, a FIN leaves it
 * in CLOSE_WAIT until the gateway closes it. The reason shows only in the debug log, so the
 * check runs only at log_level debug (a handshake-per-connection load closes every one). */
static int eof_was_reset(conn_t *c)
{
    if (!GW_LOG_ENABLED(GW_LOG_DEBUG))
        return 0;
    uv_os_fd_t fd;
    int err = 0;
    socklen_t len = sizeof(err);
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0)
        return 0;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        (err == ECONNRESET || err == EPIPE))
        return 1;
    struct tcp_info ti;
    len = sizeof(ti);
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE;
}

const char *gw_front__peer_end(const conn_t *c)
{
    return (c->flags & GW_CONN_F_RESET) ? "reset" : "peer_closed";
}

/* Bookkeeping after any write: the bound, close-after, resuming paused reads. */
void gw_front__after_write(conn_t *c, size_t len, int status)
{
    c->queued -= len;
    if (status >= 0)
        W(c)->m.client_out += len;
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (status < 0) {
        if (is_reset(status)) {
            c->flags |= GW_CONN_F_RESET;
            gw_front__conn_close(c, "reset");
        } else {
            GW_LOG_DEBUG("client_io_error", "peer=%s op=write error=%s", PEER(c),
                         uv_err_name(status));
            gw_front__conn_close(c, "write_error");
        }
        return;
    }
    if (c->queued == 0 && gw_front__out_len(c) == 0 && (c->flags & GW_CONN_F_CLOSE_AFTER)) {
        gw_front__conn_close(c, "done");
        return;
    }
    size_t bound = CFG(c)->limits.write_buffer;
    if ((c->flags & GW_CONN_F_READ_PAUSED) && c->queued < bound) {
        c->flags &= ~GW_CONN_F_READ_PAUSED;
        GW_LOG_DEBUG("read_resumed", "peer=%s queued=%zu", PEER(c), c->queued);
        gw_front__process(c); /* requests waiting in c->b->in */
        if (c->flags & GW_CONN_F_CLOSED)
            return;
    }
    if (c->queued < bound) {
        if (c->state == CS_H1 && h1x_resp_owed(c->h1))
            gw_proxy_writable(PROXY(c), &c->h1->s);
        else if (c->state == CS_H2 && c->h2 && gw_h2_session_want_write(c->h2))
            gw_front__kick(c); /* frames held back while the socket was full */
    }
}

/* A write libuv refuses at once (the socket's descriptor gone or no longer writable after a
 * read error, or no memory for a long buffer array, libuv's uv_write2) has no callback: it is
 * named here, at debug level like one that fails later (gw_front__after_write), since the
 * reason the connection then closes with (write_error, h2_send_failed, handshake_failed) does
 * not say which. Returns GW_E_IO. */
static int write_refused(conn_t *c, int uverr)
{
    GW_LOG_DEBUG("client_io_error", "peer=%s op=write error=%s", PEER(c), uv_err_name(uverr));
    return GW_E_IO;
}

static void on_write(uv_write_t *req, int status)
{
    wreq_t *wr = GW_CONTAINER_OF(req, wreq_t, req);
    conn_t *c = wr->c;
    size_t len = wr->len;
    gw_free(wr);
    gw_front__after_write(c, len, status);
}

/* A gathered write: frame headers and payload slices straight from the session's iovq, each
 * payload pinned (its rbuf referenced) until the write callback. */
typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    size_t n;
    gw_iovq_ent_t ents[];
} wvec_t;

static void on_writev(uv_write_t *req, int status)
{
    wvec_t *wv = GW_CONTAINER_OF(req, wvec_t, req);
    conn_t *c = wv->c;
    size_t len = wv->len;
    for (size_t i = 0; i < wv->n; i++)
        gw_rbuf_unref(wv->ents[i].pin);
    gw_free(wv);
    gw_front__after_write(c, len, status);
}

#define WRITEV_MAX 64

/* Write what the socket takes now, without a write request: a uv_write that completes at
 * once still costs an allocation here and an epoll_ctl in libuv (the POLLOUT watcher is
 * re-armed on drain). Returns the bytes written (0 when the socket is full, a write is
 * already queued, or it failed: the queued path then reports the error from its callback). */
static size_t try_write(conn_t *c, const uv_buf_t *bufs, size_t n)
{
    int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)n);
    if (is_reset(w)) /* it took the socket's pending error: a later read sees only the EOF */
        c->flags |= GW_CONN_F_RESET;
    if (w <= 0)
        return 0;
    W(c)->m.client_out += (uint64_t)w;
    return (size_t)w;
}

int gw_front__send_iovq(conn_t *c, gw_iovq_t *q)
{
    if (q->count && c->queued == 0) {
        struct iovec iov[WRITEV_MAX];
        uv_buf_t bufs[WRITEV_MAX];
        size_t k = gw_iovq_peek(q, iov, WRITEV_MAX);
        for (size_t i = 0; i < k; i++)
            bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
        gw_iovq_consume(q, try_write(c, bufs, k));
    }
    while (q->count) {
        wvec_t *wv = gw_malloc(sizeof(*wv) + WRITEV_MAX * sizeof(gw_iovq_ent_t));
        if (!wv)
            return GW_E_NOMEM;
        wv->c = c;
        wv->n = gw_iovq_take(q, wv->ents, WRITEV_MAX);
        wv->len = 0;
        uv_buf_t bufs[WRITEV_MAX];
        for (size_t i = 0; i < wv->n; i++) {
            bufs[i] = uv_buf_init(wv->ents[i].iov.iov_base, (unsigned)wv->ents[i].iov.iov_len);
            wv->len += wv->ents[i].iov.iov_len;
        }
        int rv = uv_write(&wv->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)wv->n, on_writev);
        if (rv < 0) {
            for (size_t i = 0; i < wv->n; i++)
                gw_rbuf_unref(wv->ents[i].pin);
            gw_free(wv);
            return write_refused(c, rv);
        }
        c->queued += wv->len;
    }
    if (c->queued >= CFG(c)->limits.write_buffer)
        pause_reads(c);
    return 0;
}

/* Frame headers and header blocks are copied into the output queue's copy block. A connection
 * needs one only during its write round: once the socket took the bytes it is empty again. One
 * block per worker, lent for the round, instead of 4 KiB per busy connection that its next round
 * finds cold. Bytes a write left queued keep their part of the block pinned (its references),
 * and the worker moves on to a fresh block once that one is nearly full. */
#define OQ_SCRATCH 4096
/* The same for the queue's entry array (a few entries a round; 24 bytes each): one per worker,
 * lent while the connection has none, kept by a connection whose round left bytes queued. */
#define OQ_ENTS 64

void gw_front__oq_lend(conn_t *c)
{
    gw_front_t *w = W(c);
    gw_iovq_t *q = &c->b->oq;
    if (!q->ents && (w->oq_ents || (w->oq_ents = gw_malloc(OQ_ENTS * sizeof(gw_iovq_ent_t)))) &&
        gw_iovq_lend(q, w->oq_ents, OQ_ENTS))
        w->oq_ents = NULL; /* the queue's until the round is over */
    if (q->copy_buf)
        return; /* a block of its own, still holding queued bytes */
    gw_rbuf_t *s = w->oq_scratch;
    if (s && s->cap - s->len < OQ_SCRATCH / 4) {
        if (__atomic_load_n(&s->refs, __ATOMIC_RELAXED) == 1) {
            s->len = 0;
        } else {
            gw_rbuf_unref(s);
            w->oq_scratch = s = NULL;
        }
    }
    if (!s && !(w->oq_scratch = s = gw_rbuf_new(OQ_SCRATCH)))
        return; /* the queue allocates one of its own */
    q->copy_buf = gw_rbuf_ref(s);
}

void gw_front__oq_return(conn_t *c)
{
    gw_iovq_t *q = &c->b->oq;
    gw_iovq_ent_t *e = gw_iovq_unlend(q);
    if (e && !W(c)->oq_ents)
        W(c)->oq_ents = e;
    else
        gw_free(e); /* another round, inside this one, took a second array */
    gw_rbuf_t *s = W(c)->oq_scratch;
    /* the worker's block, or one the queue took when it ran short, if nothing is left in it */
    if (q->copy_buf && (q->copy_buf == s || q->count == 0)) {
        gw_rbuf_unref(q->copy_buf);
        q->copy_buf = NULL;
    }
    if (s && __atomic_load_n(&s->refs, __ATOMIC_RELAXED) == 1)
        s->len = 0; /* no bytes of it are queued anywhere */
}

/* Queue n bytes at p behind what is queued, copied into the write request. */
static int queue_copy(conn_t *c, const void *p, size_t n)
{
    wreq_t *wr = gw_malloc(sizeof(*wr) + n);
    if (!wr)
        return GW_E_NOMEM;
    wr->c = c;
    wr->len = n;
    memcpy(wr->data, p, n);
    uv_buf_t b = uv_buf_init((char *)wr->data, (unsigned)n);
    int rv = uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rv < 0) {
        gw_free(wr);
        return write_refused(c, rv);
    }
    c->queued += n;
    return 0;
}

static int send_raw(conn_t *c, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    if (c->queued == 0) {
        uv_buf_t b0 = uv_buf_init((char *)p, (unsigned)n);
        size_t done = try_write(c, &b0, 1);
        p = (const uint8_t *)p + done;
        n -= done;
        if (n == 0)
            return 0;
    }
    return queue_copy(c, p, n);
}

/* A write request that owns the TLS output buffer it writes from (gw_tls_out_hand_over). */
typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    void *base;
    size_t cap;
} wtls_t;

static void on_write_tls(uv_write_t *req, int status)
{
    wtls_t *wt = GW_CONTAINER_OF(req, wtls_t, req);
    conn_t *c = wt->c;
    size_t len = wt->len;
    gw_tls_out_release(wt->base, wt->cap);
    gw_free(wt);
    gw_front__after_write(c, len, status);
}

/* Below this, what the socket did not take is copied into the write request; from it on, the
 * TLS output buffer that holds it goes with the request (the next records go to another). */
#define TLS_HAND_OVER_MIN 4096u

/* Send the TLS records pending in c->tls. The socket first, without a write request (one
 * costs an allocation, and an epoll_ctl in libuv even when the kernel takes it all); what it
 * does not take is written from where it lies: a round frames h2.frame_ahead beyond what the
 * socket takes (32 KiB by default), and that rest was copied every round. A uv_write after a
 * partial uv_try_write makes a write(2) of its own at once, sure to fail with EAGAIN (the
 * socket was just filled): so once a round found the socket full, the next rounds go to
 * uv_write directly, whose write(2) is then the only attempt, until one is taken whole. */
static int send_tls(conn_t *c)
{
    size_t n;
    const uint8_t *p = gw_tls_out_peek(c->tls, &n);
    if (n == 0)
        return 0;
    if (c->queued == 0 && (!(c->flags & GW_CONN_F_WFULL) || n < TLS_HAND_OVER_MIN)) {
        uv_buf_t b0 = uv_buf_init((char *)p, (unsigned)n);
        size_t done = try_write(c, &b0, 1);
        gw_tls_out_consume(c->tls, done);
        if (done == n) {
            c->flags &= (uint16_t)~GW_CONN_F_WFULL;
            return 0;
        }
        c->flags |= GW_CONN_F_WFULL;
        p += done;
        n -= done;
    }
    if (n < TLS_HAND_OVER_MIN) {
        int rv = queue_copy(c, p, n);
        gw_tls_out_consume(c->tls, n);
        return rv;
    }
    wtls_t *wt = gw_malloc(sizeof(*wt));
    if (!wt)
        return GW_E_NOMEM;
    size_t off;
    wt->c = c;
    wt->base = gw_tls_out_hand_over(c->tls, &off, &wt->len, &wt->cap);
    uv_buf_t b = uv_buf_init((char *)wt->base + off, (unsigned)wt->len);
    int direct = c->queued == 0; /* libuv writes at once: nothing is queued before it */
    int rv = uv_write(&wt->req, (uv_stream_t *)&c->tcp, &b, 1, on_write_tls);
    if (rv < 0) {
        gw_tls_out_release(wt->base, wt->cap);
        gw_free(wt);
        return write_refused(c, rv);
    }
    c->queued += wt->len;
    if (direct && c->tcp.write_queue_size == 0)
        c->flags &= (uint16_t)~GW_CONN_F_WFULL; /* the kernel took it whole */
    return 0;
}

/* Encrypt (if TLS) and send c->b->out; TLS handshake bytes are sent too. */
int gw_front__flush(conn_t *c)
{
    int rv = 0;
    size_t k = gw_front__out_len(c);
    if (k && c->h1 && c->thr && c->thr->out) {
        /* HTTP/1.1 response bytes: as many as the buckets allow, the rest waits in c->b->out
         * (counted by h1s_pending, so the origin read pauses) for the throttle timer */
        uint64_t now = gw_front__now_us(), wait;
        size_t a = gw_front__out_avail(c, now, k, c->h1->rb, &wait);
        if (a < k)
            k = a;
        gw_front__out_charge(c, k, c->h1->rb, now);
        if (k < c->b->out.len) {
            if (k)
                gw_front__out_avail(c, now, c->b->out.len - k, c->h1->rb, &wait);
            c->flags |= GW_CONN_F_THR_OUT;
            gw_front__thr_arm(c, wait ? wait : 1000);
        }
    }
    if (c->tls) {
        if (k && (rv = gw_tls_write(c->tls, c->b->out.base, k)) < 0)
            return rv;
        if (k)
            gw_bytes_consume(&c->b->out, k);
        /* Closing: the close_notify goes after the last plaintext byte (a gateway-made 400
         * or 408 included), never before it: OpenSSL refuses to write after SSL_shutdown, and
         * the answer was lost (RFC 8446 §6.1: close_notify ends the data we send). A tail
         * the throttle holds back gets it once the timer has written it. */
        if ((c->flags & GW_CONN_F_CLOSE_AFTER) && !(c->flags & GW_CONN_F_TLS_BYE) &&
            gw_front__out_len(c) == 0) {
            c->flags |= GW_CONN_F_TLS_BYE;
            gw_tls_shutdown(c->tls);
        }
        if ((rv = send_tls(c)) < 0)
            return rv;
    } else if (k) {
        rv = send_raw(c, c->b->out.base, k);
        gw_bytes_consume(&c->b->out, k);
    }
    if (c->queued >= CFG(c)->limits.write_buffer)
        pause_reads(c);
    return rv;
}

/* ---- protocol choice ------------------------------------------------------------------------ */

static void sniff(conn_t *c)
{
    unsigned protos = c->l->cfg->protocols;
    size_t n = c->b->in.len < GW_H2_PREFACE_LEN ? c->b->in.len : GW_H2_PREFACE_LEN;
    if (n && memcmp(c->b->in.base, GW_H2_PREFACE, n) == 0) {
        if (n < GW_H2_PREFACE_LEN)
            return; /* could still be the preface */
        if (protos & GW_PROTO_F_H2C) {
            if (gw_front__start_h2(c) < 0) {
                gw_front__conn_close(c, "nomem");
                return;
            }
            gw_front__process_h2(c);
        } else {
            GW_LOG_INFO("protocol_refused", "peer=%s protocol=h2c", PEER(c));
            gw_front__conn_close(c, "h2c_not_allowed");
        }
        return;
    }
    if (!(protos & GW_PROTO_F_HTTP1)) {
        /* an h2c-only listener: anything but the preface is a connection error
         * PROTOCOL_ERROR (RFC 9113 §3.4) */
        GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x", PEER(c), c->b->in.base[0]);
        (void)gw_h2_frame_write_goaway(&c->b->out, 0, GW_H2_PROTOCOL_ERROR, NULL, 0);
        gw_front__finish(c, "bad_preface");
        return;
    }
    /* RFC 9112 §3: request-line = method SP request-target SP HTTP-version. Visible ASCII up
     * to the first SP may be a method: the line then goes to the HTTP/1.1 parser if it ends
     * like one (below), which answers a method that is not a token (`BR@W`) with 400 as it
     * does on a TLS listener (http/http.h: one rule). Anything else on the first bytes (a
     * TLS ClientHello, binary) closes the connection at once. */
    size_t i = 0, head_max = CFG(c)->limits.max_request_head;
    while (i < c->b->in.len && c->b->in.base[i] > 0x20 && c->b->in.base[i] < 0x7f)
        i++;
    if (i == c->b->in.len && i < head_max)
        return; /* still inside a plausible method */
    if (i == 0 || (i < c->b->in.len && c->b->in.base[i] != ' ')) {
        GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x", PEER(c), c->b->in.base[0]);
        gw_front__conn_close(c, "bad_preface");
        return;
    }
    /* Only a request line whose version is HTTP/1.0 or HTTP/1.1 gets HTTP/1.1
     * answers (a 400 for what is malformed after it). Anything else is no HTTP/1.x client: it
     * cannot read an HTTP/1.1 400, and a broken HTTP/2 preface is a connection error (RFC 9113
     * §3.4): GOAWAY(PROTOCOL_ERROR) when the bytes begin like the preface ("PRI"), then close. A
     * line longer than a whole head goes to the HTTP/1.1 parser, which answers 431. */
    const uint8_t *nl = memchr(c->b->in.base, '\n', c->b->in.len);
    if (!nl && c->b->in.len < head_max)
        return; /* the request line is not complete yet */
    if (nl) {
        size_t ll = (size_t)(nl - c->b->in.base);
        if (ll && nl[-1] == '\r')
            ll--;
        static const char v10[] = " HTTP/1.0", v11[] = " HTTP/1.1";
        size_t vl = sizeof(v10) - 1;
        const uint8_t *v = ll > vl ? c->b->in.base + ll - vl : NULL;
        if (!v || (memcmp(v, v10, vl) != 0 && memcmp(v, v11, vl) != 0)) {
            int like_h2 = c->b->in.len >= 3 && memcmp(c->b->in.base, GW_H2_PREFACE, 3) == 0;
            GW_LOG_INFO("bad_preface", "peer=%s first_byte=0x%02x not_http1=1 goaway=%d", PEER(c),
                        c->b->in.base[0], like_h2);
            if (like_h2)
                (void)gw_h2_frame_write_goaway(&c->b->out, 0, GW_H2_PROTOCOL_ERROR, NULL, 0);
            gw_front__finish(c, "bad_preface");
            return;
        }
    }
    if (gw_front__start_h1(c) < 0) {
        gw_front__conn_close(c, "nomem");
        return;
    }
    gw_front__process_h1(c);
}

void gw_front__process(conn_t *c)
{
    if (c->flags & GW_CONN_F_CLOSED)
        return;
    if (c->state == CS_SNIFF && gw_front__in_len(c))
        sniff(c);
    else if (c->state == CS_H1)
        gw_front__process_h1(c);
    else if (c->state == CS_H2)
        gw_front__process_h2(c);
    if (!(c->flags & GW_CONN_F_CLOSED)) {
        int want = !(c->flags & (GW_CONN_F_READ_PAUSED | GW_CONN_F_EOF | GW_CONN_F_CLOSE_AFTER));
        /* HTTP/1.1 over its request_body_rate: the socket waits for the throttle timer */
        if (want && c->state != CS_H2 && (c->flags & GW_CONN_F_THR_IN))
            want = 0;
        /* HTTP/1.1: while a response is awaited, reading goes on only as far as a bound
         * (h1_stream.c: the client's end is seen at once) */
        if (want && c->state == CS_H1 && !gw_front__h1_want_read(c))
            want = 0;
        if (want && !uv_is_active((uv_handle_t *)&c->tcp))
            uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        else if (!want && uv_is_active((uv_handle_t *)&c->tcp))
            uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* ---- read path ------------------------------------------------------------------------------ */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    buf->base = (char *)W(c)->readbuf;
    buf->len = sizeof(W(c)->readbuf);
}

static void after_handshake(conn_t *c)
{
    const char *alpn = gw_tls_alpn(c->tls);
    GW_LOG_DEBUG("tls_established", "peer=%s version=%s alpn=%s sni=%s", PEER(c),
                 gw_tls_version(c->tls), alpn[0] ? alpn : "-",
                 gw_tls_sni(c->tls) ? gw_tls_sni(c->tls) : "-");
    if (!strcmp(alpn, "acme-tls/1")) {
        /* RFC 8737 §3: a tls-alpn-01 validation; the handshake was the answer, and nothing else
         * is served on such a connection */
        gw_front__conn_close(c, "acme_tls_alpn");
        return;
    }
    gw_front__arm(c, CFG(c)->timeouts.first_request_ms);
    if (!strcmp(alpn, "h2")) {
        if (gw_front__start_h2(c) < 0) {
            gw_front__conn_close(c, "nomem");
            return;
        }
        if (!gw_tls_h2_cipher_ok(c->tls)) {
            /* RFC 9113 §9.2.2: a blocklisted TLS 1.2 cipher → INADEQUATE_SECURITY */
            GW_LOG_INFO("h2_inadequate_security", "peer=%s cipher=%s", PEER(c),
                        gw_tls_cipher(c->tls));
            gw_h2_session_terminate(c->h2, GW_H2_INADEQUATE_SECURITY,
                                    "TLS 1.2 cipher not allowed for HTTP/2");
            gw_front__h2_pump(c);
        }
        return;
    }
    if (!(c->l->cfg->protocols & GW_PROTO_F_HTTP1)) {
        gw_front__conn_close(c, "no_protocol");
        return;
    }
    /* ALPN http/1.1 or http/1.0 (server/generation.c's alpn_for), or no ALPN at all (RFC 7301:
     * HTTP/1.1 is the default) */
    if (gw_front__start_h1(c) < 0)
        gw_front__conn_close(c, "nomem");
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread == UV_EOF) {
        c->flags |= GW_CONN_F_EOF;
        if (eof_was_reset(c))
            c->flags |= GW_CONN_F_RESET;
        uv_read_stop(s);
        if (c->state == CS_H1 && !gw_h1_parser_in_message(c->h1->p) && gw_front__in_len(c) == 0 &&
            c->queued == 0 && !h1x_active(c->h1))
            gw_front__conn_close(c, gw_front__peer_end(c));
        else if (c->state == CS_H2)
            gw_front__conn_close(c, gw_front__peer_end(c));
        else if (c->state != CS_H1 && c->state != CS_CLOSING)
            gw_front__conn_close(c, gw_front__peer_end(c));
        else if (c->state == CS_H1)
            gw_front__process(c);
        return;
    }
    if (nread < 0) {
        c->flags |= GW_CONN_F_EOF; /* the client is gone (the access log's 499) */
        if (is_reset(nread)) {
            c->flags |= GW_CONN_F_RESET;
            gw_front__conn_close(c, "reset");
        } else {
            GW_LOG_DEBUG("client_io_error", "peer=%s op=read error=%s", PEER(c),
                         uv_err_name((int)nread));
            gw_front__conn_close(c, "read_error");
        }
        return;
    }
    if (nread == 0 || c->state == CS_CLOSING)
        return;
    W(c)->m.client_in += (uint64_t)nread;
    if (c->state == CS_PROXY)
        gw_front__proxy_header(c, buf->base, (size_t)nread);
    else
        gw_front__on_data(c, buf->base, (size_t)nread);
}

#define TLS_READ_ROOM 2048

void gw_front__on_data(conn_t *c, const char *data, size_t nread)
{
    uv_stream_t *s = (uv_stream_t *)&c->tcp;
    if (c->tls) {
        if (gw_tls_feed(c->tls, data, nread) < 0) {
            gw_front__conn_close(c, "nomem");
            return;
        }
        if (c->state == CS_HANDSHAKE) {
            int h = gw_tls_handshake(c->tls);
            /* RFC 9113 §3.4: the server's preface may go at once. Over h2 the handshake's last
             * flight (TLS 1.3's tickets; TLS 1.2's ticket and Finished) waits for it, and the
             * pump in gw_front__process writes both: one write(2) and one segment, not two */
            int hold = h == 1 && !strcmp(gw_tls_alpn(c->tls), "h2");
            if ((!hold && gw_front__flush(c) < 0) || h < 0) {
                W(c)->m.tls[2]++;
                gw_front__client_cert_count(c, 1);
                gw_front__conn_close(c, "handshake_failed");
                return;
            }
            if (h == 0)
                return;
            W(c)->m.tls[gw_tls_resumed(c->tls) ? 1 : 0]++;
            gw_front__client_cert_count(c, 0);
            if (gw_front__client_cert_init(c) < 0) {
                gw_front__conn_close(c, "nomem");
                return;
            }
            after_handshake(c);
            if (c->flags & (GW_CONN_F_CLOSED | GW_CONN_F_CLOSE_AFTER))
                return;
        }
        if (gw_front__need_busy(c) < 0) {
            gw_front__conn_close(c, "nomem");
            return;
        }
        for (;;) {
            /* A record's plaintext goes where there is room (at least TLS_READ_ROOM), else
             * into the worker's read buffer, whose ciphertext gw_tls_feed has copied, and from
             * there into c->b->in by gw_bytes_append (which grows it by doubling). Reserving a
             * record's size in c->b->in first made every request of a connection that goes
             * idle between requests allocate and free 16 KiB for its 50-byte HEADERS record
             * (glibc's large-chunk paths, about 300 instructions a request in manyconns);
             * an upload's records still go straight into c->b->in once it has grown. A record
             * larger than the room is read in parts: the loop goes on until OpenSSL holds
             * nothing (gw_tls_drained). */
            int direct = c->b->in.cap - c->b->in.len >= TLS_READ_ROOM;
            uint8_t *dst = direct ? c->b->in.base + c->b->in.len : W(c)->readbuf;
            size_t room = direct ? c->b->in.cap - c->b->in.len : sizeof(W(c)->readbuf);
            ssize_t r = gw_tls_read(c->tls, dst, room);
            if (r == GW_E_CLOSED) {
                c->flags |= GW_CONN_F_EOF;
                break;
            }
            if (r == GW_E_AGAIN || r == 0)
                break; /* no whole record buffered */
            if (r < 0) {
                gw_front__conn_close(c, "tls_error");
                return;
            }
            if (direct) {
                c->b->in.len += (size_t)r;
            } else if (gw_bytes_append(&c->b->in, dst, (size_t)r) < 0) {
                gw_front__conn_close(c, "input_overflow");
                return;
            }
            if (gw_tls_drained(c->tls))
                break; /* the next read would only fail with "want read" */
        }
        if (c->state != CS_H2)  /* HTTP/2: the pump writes it with the frames */
            gw_front__flush(c); /* TLS may have something to say (key updates, alerts) */
    } else {
        if (gw_front__need_busy(c) < 0) {
            gw_front__conn_close(c, "nomem");
            return;
        }
        if (gw_bytes_append(&c->b->in, data, nread) < 0) {
            gw_front__conn_close(c, "input_overflow");
            return;
        }
    }
    gw_front__process(c);
    if (!(c->flags & GW_CONN_F_CLOSED) && c->state == CS_H1 && gw_front__body_limited(c)) {
        /* upload rate, HTTP/1.1: bytes read spend the body bucket; in debt (or short of a
         * grain) the socket is not read until the timer says the tokens are back, so the
         * kernel's receive window pushes back on the client */
        uint64_t now = gw_front__now_us();
        gw_bucket_spend(&c->thr->body_b, nread, now);
        uint64_t w = gw_bucket_wait_us(&c->thr->body_b, gw_bucket_grain(&c->thr->body_b), now);
        if (w) {
            c->flags |= GW_CONN_F_THR_IN;
            uv_read_stop(s);
            gw_front__thr_arm(c, w);
        }
    }
    if (!(c->flags & GW_CONN_F_CLOSED))
        gw_front__release_idle_buffers(c);
    /* Bounded input: a peer that sends while we cannot answer (write queue full) is paused. */
    if (!(c->flags & GW_CONN_F_CLOSED) &&
        (c->flags & (GW_CONN_F_READ_PAUSED | GW_CONN_F_CLOSE_AFTER)))
        uv_read_stop(s);
}

void gw_front__read_start(conn_t *c)
{
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}
