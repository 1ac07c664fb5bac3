/* h2/send.c — submitting responses, DATA, trailers, RST_STREAM and PING, and framing what is
 * queued into the caller's iovq within the windows and in the scheduler's order. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/list.h"
#include "common/pool.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/sched.h"
#include "h2/session_internal.h"
#include "h2/tree.h"

static int frame_trailers(gw_h2_session_t *s, gw_h2_stream_t *st, gw_iovq_t *q);

/* Encode fields into HEADERS (or PUSH_PROMISE, RFC 9113 §6.6) + CONTINUATION frames within the
 * peer's frame size. */
int gw_h2__write_block(gw_h2_session_t *s, uint32_t sid, const gw_hpack_field_t *f, size_t n,
                       int end_stream, uint32_t promised)
{
    int rc;
    s->x->scratch.len = 0;
    if ((rc = gw_hpack_encode(&s->enc, f, n, &s->x->scratch)) < 0)
        return rc;
    size_t off = 0, len = s->x->scratch.len;
    int first = 1;
    do {
        size_t chunk = len - off;
        /* a PUSH_PROMISE spends 4 bytes of its payload on the promised id */
        size_t room = first && promised ? s->peer_max_frame - 4 : s->peer_max_frame;
        if (chunk > room)
            chunk = room;
        uint8_t flags = (off + chunk == len) ? GW_H2_F_END_HEADERS : 0;
        if (first && promised) {
            rc = gw_h2_frame_write_push_promise(&s->out, sid, flags, promised,
                                                s->x->scratch.base + off, chunk, 0, 0);
        } else if (first) {
            flags |= end_stream ? GW_H2_F_END_STREAM : 0;
            rc = gw_h2_frame_write_headers(&s->out, sid, flags, NULL, s->x->scratch.base + off,
                                           chunk, 0, 0);
        } else {
            rc = gw_h2_frame_write_continuation(&s->out, sid, flags, s->x->scratch.base + off,
                                                chunk);
        }
        if (rc < 0)
            return rc;
        first = 0;
        off += chunk;
    } while (off < len);
    return 0;
}

/* ---- public: output --------------------------------------------------------------------- */

static int stream_can_send(const gw_h2_session_t *s, const gw_h2_stream_t *st)
{
    if (gw_list_empty(&st->chunks))
        return 1; /* END_STREAM or trailers need no window */
    return s->conn_send_window > 0 && st->send_window > 0 && s->data_budget > 0 &&
           st->data_budget > 0;
}

/* The length of st's next DATA frame: what it has queued, within every window, budget and the
 * peer's SETTINGS_MAX_FRAME_SIZE. A frame spans as many chunks as that takes: a chunk ends where
 * an origin read ended (the bytes a read buffer had room for), which says nothing about where
 * a frame should, and every frame costs a header, a scheduler step and, over TLS, records. */
static size_t data_len(const gw_h2_session_t *s, const gw_h2_stream_t *st)
{
    size_t n = st->queued;
    if ((int64_t)n > s->conn_send_window)
        n = (size_t)s->conn_send_window;
    if ((int64_t)n > st->send_window)
        n = (size_t)st->send_window;
    if (n > s->peer_max_frame)
        n = s->peer_max_frame;
    if (n > s->data_budget)
        n = s->data_budget;
    if (n > st->data_budget)
        n = st->data_budget;
    return n;
}

/* The next DATA frame of st, which has chunks queued, into q (the payload by reference), and
 * what it takes from the windows and budgets; st leaves the scheduler when it must wait or is
 * done. *framed grows by the payload length. Returns 0, 1 when the connection's window or
 * budget is spent (every stream waits, and stays queued), or GW_E_NOMEM. */
static int send_data(gw_h2_session_t *s, gw_h2_stream_t *st, gw_iovq_t *q, size_t *framed)
{
    gw_h2_sched_node_t *node = &st->node;
    uint8_t hdr[GW_H2_FRAME_HDR_LEN];
    if (s->conn_send_window <= 0 || s->data_budget == 0)
        return 1;
    if (st->send_window <= 0 || st->data_budget == 0) {
        if (st->send_window <= 0)
            st->blocked = 1;
        else
            st->budget_blocked = 1;
        gw_h2_sched_remove(&s->x->sched, node);
        return 0;
    }
    size_t n = data_len(s, st);
    int last = n == st->queued;
    int eos = last && st->eos_queued && !st->has_trailers;
    gw_h2_frame_hdr_t h = {(uint32_t)n, GW_H2_FT_DATA, eos ? GW_H2_F_END_STREAM : 0, st->id};
    gw_h2_frame_hdr_pack(hdr, &h);
    if (gw_iovq_copy(q, hdr, sizeof(hdr)) < 0)
        return GW_E_NOMEM;
    /* the payload by reference, piece by piece; the chunks are consumed only once every piece
     * is in q */
    size_t left = n;
    for (gw_list_t *it = st->chunks.next; left; it = it->next) {
        const data_chunk_t *c = GW_CONTAINER_OF(it, data_chunk_t, link);
        size_t k = c->len < left ? c->len : left;
        if (gw_iovq_ref(q, c->buf, c->off, k) < 0)
            return GW_E_NOMEM;
        left -= k;
    }
    s->frames_out++;
    *framed += n;
    if (n && s->wu_earned < GW_H2_WU_EARNED_MAX)
        s->wu_earned += 2;
    s->conn_send_window -= n;
    st->send_window -= n;
    /* refilled before it runs dry: a stream that waits for its next bytes lets a less urgent
     * one take the link meanwhile */
    size_t lowat = s->p->o.writable_lowat;
    int refill = lowat && st->queued > lowat && st->queued - n <= lowat;
    st->queued -= n;
    st->sent += n;
    s->x->data_queued -= n;
    if (s->data_budget != SIZE_MAX)
        s->data_budget -= n;
    if (st->data_budget != SIZE_MAX)
        st->data_budget -= n;
    for (left = n; left;) {
        data_chunk_t *c = GW_CONTAINER_OF(st->chunks.next, data_chunk_t, link);
        size_t k = c->len < left ? c->len : left;
        c->off += k;
        c->len -= k;
        left -= k;
        if (c->len == 0) {
            gw_list_remove(&c->link);
            gw_h2__chunk_free(st, c);
        }
    }
    if (eos) {
        gw_h2__local_end(s, st);
        if (!gw_h2__find_stream(s, h.stream_id) || st->state == GW_H2_SS_CLOSED ||
            st->state == GW_H2_SS_HALF_CLOSED_LOCAL) {
            if (gw_h2__find_stream(s, h.stream_id))
                gw_h2_sched_remove(&s->x->sched, &st->node);
            return 0;
        }
    }
    if (gw_list_empty(&st->chunks) && !st->eos_queued) {
        gw_h2_sched_remove(&s->x->sched, node);
        if (s->p->cb.on_writable)
            s->p->cb.on_writable(s->user_data, st->id);
        return 0;
    }
    gw_h2_sched_sent(&s->x->sched, node, n);
    if (refill && s->p->cb.on_writable)
        s->p->cb.on_writable(s->user_data, st->id);
    return 0;
}

/* st has no data left: it leaves the scheduler and, when its end was asked for, its trailers
 * or an empty DATA frame with END_STREAM go into q. 0 or a negative code (the connection is
 * then in error when the trailers could not be encoded). */
static int send_end(gw_h2_session_t *s, gw_h2_stream_t *st, gw_iovq_t *q)
{
    uint8_t hdr[GW_H2_FRAME_HDR_LEN];
    gw_h2_sched_remove(&s->x->sched, &st->node);
    if (!st->eos_queued)
        return 0;
    if (st->has_trailers) {
        int rc = frame_trailers(s, st, q);
        if (rc < 0) {
            /* the encoder's table may now differ from the peer's */
            gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "header encoding failed", rc);
            return rc;
        }
        st->has_trailers = 0;
        st->trailers.len = 0;
    } else {
        gw_h2_frame_hdr_t h = {0, GW_H2_FT_DATA, GW_H2_F_END_STREAM, st->id};
        gw_h2_frame_hdr_pack(hdr, &h);
        if (gw_iovq_copy(q, hdr, sizeof(hdr)) < 0)
            return GW_E_NOMEM;
    }
    s->frames_out++;
    st->eos_queued = 0;
    gw_h2__local_end(s, st);
    return 0;
}

ssize_t gw_h2_session_send(gw_h2_session_t *s, gw_iovq_t *q)
{
    return gw_h2_session_send_some(s, q, SIZE_MAX);
}

ssize_t gw_h2_session_send_some(gw_h2_session_t *s, gw_iovq_t *q, size_t data_max)
{
    size_t before = q->bytes, framed = 0;
    if (s->out.len) {
        if (gw_iovq_copy(q, s->out.base, s->out.len) < 0)
            return GW_E_NOMEM;
        s->out.len = 0;
        s->ctrl_queued = 0;
    }
    if (s->phase == GW_H2_CONN_CLOSING || !s->x)
        return (ssize_t)(q->bytes - before);
    gw_h2_sched_node_t *node;
    /* the scheduler is asked frame by frame, and no further than data_max: what it is not
     * asked for now it decides again at the next call, among the streams ready then */
    while (framed < data_max && (node = gw_h2_sched_next(&s->x->sched))) {
        gw_h2_stream_t *st = GW_CONTAINER_OF(node, gw_h2_stream_t, node);
        int rc = gw_list_empty(&st->chunks) ? send_end(s, st, q) : send_data(s, st, q, &framed);
        if (rc < 0)
            return rc;
        if (rc == 1)
            break; /* everyone waits for the connection window; streams stay queued */
    }
    return (ssize_t)(q->bytes - before);
}

int gw_h2_session_want_write(const gw_h2_session_t *s)
{
    if (s->out.len)
        return 1;
    if (s->phase == GW_H2_CONN_CLOSING || !s->x)
        return 0;
    gw_list_foreach(it, &s->x->sched.queue)
    {
        const gw_h2_stream_t *st =
            GW_CONTAINER_OF(GW_CONTAINER_OF(it, gw_h2_sched_node_t, link), gw_h2_stream_t, node);
        if (stream_can_send(s, st))
            return 1;
    }
    return 0;
}

/* ---- public: submitting ----------------------------------------------------------------- */

static gw_h2_stream_t *writable_stream(gw_h2_session_t *s, uint32_t sid)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    if (!st || s->phase == GW_H2_CONN_CLOSING)
        return NULL;
    if (st->state != GW_H2_SS_OPEN && st->state != GW_H2_SS_HALF_CLOSED_REMOTE)
        return NULL;
    return st;
}

static int encode_fields(gw_h2_session_t *s, uint32_t sid, const char *status,
                         const gw_h2_header_t *fields, size_t n, int end_stream)
{
    size_t extra = status ? 1 : 0;
    gw_hpack_field_t fst[48]; /* a usual head: no allocation */
    gw_hpack_field_t *f = n + extra <= 48 ? fst : gw_malloc((n + extra) * sizeof(*f));
    int rc;
    if (!f)
        return GW_E_NOMEM;
    if (status)
        f[0] = (gw_hpack_field_t){GW_SLICE_LIT(":status"), gw_slice_str(status), 0};
    for (size_t i = 0; i < n; i++)
        f[i + extra] = (gw_hpack_field_t){fields[i].name, fields[i].value, 0};
    size_t mark = s->out.len;
    rc = gw_h2__write_block(s, sid, f, n + extra, end_stream, 0);
    if (rc < 0)
        s->out.len = mark;
    if (f != fst)
        gw_free(f);
    if (rc == GW_E_NOMEM) {
        /* the encoder's dynamic table may now differ from the peer's: fail the connection */
        gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "header encoding failed", GW_E_NOMEM);
    }
    return rc;
}

int gw_h2_session_submit_response(gw_h2_session_t *s, uint32_t stream_id, unsigned status,
                                  const gw_h2_header_t *fields, size_t n, int end_stream)
{
    gw_h2_stream_t *st = writable_stream(s, stream_id);
    char code[4];
    int rc, reserved = 0;
    if (!st) {
        /* a promised stream: its response HEADERS move it from reserved (local) to
         * half-closed (remote) (RFC 9113 §5.1); a push has no interim responses (§8.4.2) */
        st = gw_h2__find_stream(s, stream_id);
        if (!st || st->state != GW_H2_SS_RESERVED_LOCAL || s->phase == GW_H2_CONN_CLOSING)
            return GW_E_NOENT;
        if (status < 200)
            return GW_E_INVAL;
        reserved = 1;
    }
    if (st->head_sent || status < 100 || status > 999 || (status < 200 && end_stream))
        return GW_E_INVAL;
    code[0] = (char)('0' + status / 100);
    code[1] = (char)('0' + status / 10 % 10);
    code[2] = (char)('0' + status % 10);
    code[3] = 0;
    if ((rc = encode_fields(s, stream_id, code, fields, n, end_stream)) < 0)
        return rc == GW_E_NOMEM ? GW_E_NOMEM : GW_E_INVAL;
    s->frames_out++;
    if (status >= 200)
        st->head_sent = 1;
    if (reserved)
        st->state = GW_H2_SS_HALF_CLOSED_REMOTE;
    if (end_stream)
        gw_h2__local_end(s, st);
    return 0;
}

int gw_h2_session_submit_data(gw_h2_session_t *s, uint32_t stream_id, gw_rbuf_t *buf, size_t off,
                              size_t len, int end_stream)
{
    gw_h2_stream_t *st = writable_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    if (!st->head_sent || st->eos_queued)
        return GW_E_INVAL;
    if (len) {
        if (!buf || off > buf->cap || len > buf->cap - off)
            return GW_E_INVAL;
        data_chunk_t *c = st->chunk0_used ? gw_malloc(sizeof(*c)) : &st->chunk0;
        if (!c)
            return GW_E_NOMEM;
        if (c == &st->chunk0)
            st->chunk0_used = 1;
        c->buf = gw_rbuf_ref(buf);
        c->off = off;
        c->len = len;
        gw_list_push_back(&st->chunks, &c->link);
        st->queued += len;
        s->x->data_queued += len;
    }
    if (end_stream)
        st->eos_queued = 1;
    if (len || end_stream) {
        if (st->send_window > 0 || !len)
            gw_h2_sched_add(&s->x->sched, &st->node);
        else
            st->blocked = 1;
    }
    return 0;
}

/* Trailer fields kept until they are framed: per field a uint32_t name length, a uint32_t
 * value length, then the name and value bytes. */
static int pack_fields(gw_bytes_t *b, const gw_h2_header_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t l[2] = {(uint32_t)f[i].name.len, (uint32_t)f[i].value.len};
        if (f[i].name.len > UINT32_MAX || f[i].value.len > UINT32_MAX)
            return GW_E_INVAL;
        if (gw_bytes_append(b, l, sizeof(l)) < 0 ||
            gw_bytes_append(b, f[i].name.base, f[i].name.len) < 0 ||
            gw_bytes_append(b, f[i].value.base, f[i].value.len) < 0)
            return GW_E_NOMEM;
    }
    return 0;
}

/* Encode st's kept trailers as HEADERS(+CONTINUATION) with END_STREAM and append them to q,
 * after whatever s->out holds: s->out was encoded before, so it must reach the wire before
 * (RFC 7541 §2.3.2: the decoder's table changes in the order blocks arrive; trailers
 * encoded at submit time but framed after their stream's DATA put the HEADERS of
 * other streams, encoded later and written earlier, out of step with the peer). */
static int frame_trailers(gw_h2_session_t *s, gw_h2_stream_t *st, gw_iovq_t *q)
{
    size_t n = 0;
    for (size_t at = 0; at < st->trailers.len; n++) {
        uint32_t l[2];
        memcpy(l, st->trailers.base + at, sizeof(l));
        at += sizeof(l) + l[0] + l[1];
    }
    gw_hpack_field_t fst[16];
    gw_hpack_field_t *f = n <= 16 ? fst : gw_malloc(n * sizeof(*f));
    if (!f)
        return GW_E_NOMEM;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l[2];
        memcpy(l, st->trailers.base + at, sizeof(l));
        at += sizeof(l);
        f[i] = (gw_hpack_field_t){
            {st->trailers.base + at, l[0]}, {st->trailers.base + at + l[0], l[1]}, 0};
        at += l[0] + l[1];
    }
    int rc = 0;
    if (s->out.len) {
        if (gw_iovq_copy(q, s->out.base, s->out.len) < 0)
            rc = GW_E_NOMEM;
        else
            s->out.len = 0;
    }
    if (rc == 0)
        rc = gw_h2__write_block(s, st->id, f, n, 1, 0);
    if (rc == 0 && gw_iovq_copy(q, s->out.base, s->out.len) < 0)
        rc = GW_E_NOMEM;
    s->out.len = 0;
    if (f != fst)
        gw_free(f);
    return rc;
}

int gw_h2_session_submit_trailers(gw_h2_session_t *s, uint32_t stream_id,
                                  const gw_h2_header_t *fields, size_t n)
{
    gw_h2_stream_t *st = writable_stream(s, stream_id);
    int rc;
    if (!st)
        return GW_E_NOENT;
    if (!st->head_sent || st->eos_queued)
        return GW_E_INVAL;
    for (size_t i = 0; i < n; i++) /* what gw_hpack_encode asks of names */
        for (size_t k = 0; k < fields[i].name.len; k++)
            if (fields[i].name.base[k] >= 'A' && fields[i].name.base[k] <= 'Z')
                return GW_E_INVAL;
    st->trailers.len = 0;
    if ((rc = pack_fields(&st->trailers, fields, n)) < 0) {
        st->trailers.len = 0;
        return rc;
    }
    st->has_trailers = 1;
    st->eos_queued = 1;
    if (gw_list_empty(&st->chunks) || st->send_window > 0)
        gw_h2_sched_add(&s->x->sched, &st->node);
    return 0;
}

int gw_h2_session_submit_rst(gw_h2_session_t *s, uint32_t stream_id, uint32_t error_code)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st || st->state == GW_H2_SS_CLOSED || s->phase == GW_H2_CONN_CLOSING)
        return GW_E_NOENT;
    if (gw_h2_frame_write_rst_stream(&s->out, stream_id, error_code) < 0)
        return GW_E_NOMEM;
    COUNT(s, resets_sent);
    gw_h2__remember_rst(s, stream_id);
    st->rst_sent = 1;
    gw_h2__close_stream(s, st, error_code, 0);
    return 0;
}

/* ---- public: server push (RFC 9113 §8.4) -------------------------------------------------- */

int gw_h2_session_can_push(const gw_h2_session_t *s)
{
    if (s->peer_no_push)
        return GW_E_UNSUPPORTED;
    /* §6.8: nothing new after a GOAWAY, ours (the first one of a graceful shutdown too) or
     * the peer's */
    if (s->phase != GW_H2_CONN_OPEN || s->peer_goaway)
        return GW_E_CLOSED;
    const push_state_t *ps = gw_h2__push(s);
    /* §5.1.2: the peer's SETTINGS_MAX_CONCURRENT_STREAMS bounds the streams we open; reserved
     * ones are counted too, so that a promised response never waits for a slot */
    if ((ps ? ps->promised : 0) >= s->p->o.max_pushes ||
        (ps ? ps->open : 0) >= s->peer_max_streams ||
        (ps ? ps->last_id : 0) >= GW_H2_STREAM_ID_MASK - 1)
        return GW_E_LIMIT;
    return 0;
}

/* FNV-1a of the authority (lowercased), a 0 byte and the path: one promise per resource. */
static uint64_t push_key(gw_slice_t authority, gw_slice_t path)
{
    uint64_t h = GW_FNV64_BASIS;
    for (size_t i = 0; i < authority.len; i++) {
        uint8_t c = authority.base[i];
        h = gw_fnv1a64_byte(h, (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32u : c));
    }
    h = gw_fnv1a64_byte(h, 0);
    return gw_fnv1a64(h, path.base, path.len);
}

/* A copy of v in the arena (NULL, 0 stays so); 0 or GW_E_NOMEM. */
static int arena_slice(arena_t *a, gw_slice_t *v)
{
    if (!v->len)
        return 0;
    uint8_t *d = gw_h2__arena_alloc(a, v->len);
    if (!d)
        return GW_E_NOMEM;
    memcpy(d, v->base, v->len);
    v->base = d;
    return 0;
}

static int name_ok(gw_slice_t n)
{
    if (!n.len || n.base[0] == ':')
        return 0;
    for (size_t k = 0; k < n.len; k++)
        if (n.base[k] >= 'A' && n.base[k] <= 'Z')
            return 0;
    return 1;
}

/* §8.4.1: a promised request is safe, cacheable and without content: GET (or HEAD), a path;
 * its fields are regular ones in lowercase (at most 64). */
static int push_request_ok(const gw_h2_head_t *req)
{
    if (!req->method.len || !req->scheme.len || !req->authority.len || !req->path.len ||
        req->path.base[0] != '/' || req->headers_len > 64)
        return 0;
    for (size_t i = 0; i < req->headers_len; i++)
        if (!name_ok(req->headers[i].name))
            return 0;
    return 1;
}

/* The promised request, copied into arena a (the new stream's) as stream id's head, into
 * *out: 0 or GW_E_NOMEM. */
static int copy_head(arena_t *a, uint32_t id, const gw_h2_head_t *req, gw_h2_head_t **out)
{
    gw_h2_head_t *h = gw_h2__arena_alloc(a, sizeof(*h));
    gw_h2_header_t *hf =
        req->headers_len ? gw_h2__arena_alloc(a, req->headers_len * sizeof(*hf)) : NULL;
    if (!h || (!hf && req->headers_len))
        return GW_E_NOMEM;
    *h = (gw_h2_head_t){.stream_id = id,
                        .method = req->method,
                        .scheme = req->scheme,
                        .authority = req->authority,
                        .path = req->path,
                        .headers = hf,
                        .headers_len = req->headers_len,
                        .content_length = -1,
                        .end_stream = 1};
    if (arena_slice(a, &h->method) < 0 || arena_slice(a, &h->scheme) < 0 ||
        arena_slice(a, &h->authority) < 0 || arena_slice(a, &h->path) < 0)
        return GW_E_NOMEM;
    for (size_t i = 0; i < req->headers_len; i++) {
        hf[i] = req->headers[i];
        if (arena_slice(a, &hf[i].name) < 0 || arena_slice(a, &hf[i].value) < 0)
            return GW_E_NOMEM;
    }
    *out = h;
    return 0;
}

/* PUSH_PROMISE of h (promising stream id) on parent_id into the session's output. 0, or
 * GW_E_NOMEM with the connection failed: the encoder's table may now differ from the peer's. */
static int write_promise(gw_h2_session_t *s, uint32_t parent_id, const gw_h2_head_t *h, uint32_t id)
{
    gw_hpack_field_t f[68];
    size_t n = 0;
    f[n++] = (gw_hpack_field_t){GW_SLICE_LIT(":method"), h->method, 0};
    f[n++] = (gw_hpack_field_t){GW_SLICE_LIT(":scheme"), h->scheme, 0};
    f[n++] = (gw_hpack_field_t){GW_SLICE_LIT(":authority"), h->authority, 0};
    f[n++] = (gw_hpack_field_t){GW_SLICE_LIT(":path"), h->path, 0};
    for (size_t i = 0; i < h->headers_len; i++)
        f[n++] = (gw_hpack_field_t){h->headers[i].name, h->headers[i].value, 0};
    size_t mark = s->out.len;
    if (gw_h2__write_block(s, parent_id, f, n, 0, id) < 0) {
        s->out.len = mark;
        gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "header encoding failed", GW_E_NOMEM);
        return GW_E_NOMEM;
    }
    return 0;
}

/* A pushed response depends on its parent (RFC 7540 §5.3.5); with RFC 9218 priorities it is one
 * level less urgent than the parent. */
static void push_priority(gw_h2_session_t *s, gw_h2_stream_t *st, uint32_t parent_id,
                          uint8_t parent_urgency, int parent_inc, int parent_tree)
{
    if (parent_tree && s->x->tree && gw_h2_tree_set(s->x->tree, st->id, parent_id, 16, 0) == 0 &&
        gw_h2_tree_open(s->x->tree, st->id) == 0) {
        gw_h2_sched_set_tree(&s->x->sched, &st->node, 1);
    } else {
        st->prio9218 = 1;
        gw_h2_sched_set_priority(&s->x->sched, &st->node,
                                 parent_urgency < 7 ? (uint8_t)(parent_urgency + 1) : 7,
                                 parent_inc);
    }
}

int gw_h2_session_submit_push(gw_h2_session_t *s, uint32_t parent_id, const gw_h2_head_t *req,
                              uint32_t *promised_id, const gw_h2_head_t **stored)
{
    int rc = gw_h2_session_can_push(s);
    if (rc < 0)
        return rc;
    /* §8.4: only on a stream the client opened, while it is open or half-closed (remote)
     * for us, and not after we reset it */
    gw_h2_stream_t *parent = (parent_id & 1) ? writable_stream(s, parent_id) : NULL;
    if (!parent || parent->rst_sent)
        return GW_E_NOENT;
    if (!push_request_ok(req))
        return GW_E_INVAL;
    cold_t *cold = gw_h2__cold_part(s);
    if (!cold)
        return GW_E_NOMEM;
    if (!cold->push) {
        cold->push = gw_calloc(1, sizeof(*cold->push) + s->p->o.max_pushes * sizeof(uint64_t));
        if (!cold->push)
            return GW_E_NOMEM;
    }
    push_state_t *ps = cold->push;
    uint64_t key = push_key(req->authority, req->path);
    for (uint32_t i = 0; i < ps->promised; i++)
        if (ps->seen[i] == key)
            return GW_E_EXIST;

    /* the promised request, kept in the new stream's arena for the layer above */
    arena_t tmp = {NULL};
    void *blk = gw_h2__blk_get(s, &tmp);
    if (!blk)
        return GW_E_NOMEM;
    uint32_t id = ps->last_id + 2; /* §5.1.1: even, increasing */
    gw_h2_head_t *h = NULL;
    if ((rc = copy_head(&tmp, id, req, &h)) < 0 || (rc = write_promise(s, parent_id, h, id)) < 0) {
        gw_h2__arena_free(&tmp);
        gw_pool_put(&s->p->blocks, blk);
        return rc;
    }
    uint8_t pu = parent->node.urgency;
    int pinc = parent->node.incremental, parent_tree = parent->node.tree;
    gw_h2_stream_t *st = gw_h2__stream_new(s, id, blk, &tmp);
    st->state = GW_H2_SS_RESERVED_LOCAL;
    st->seen = 1; /* the layer above releases it */
    st->pushed = 1;
    st->push_open = 1;
    st->recv_window = 0; /* the client sends nothing on it */
    s->frames_out++;
    ps->last_id = id;
    ps->seen[ps->promised++] = key;
    ps->open++;
    ps->held++;
    COUNT(s, pushes_promised);
    push_priority(s, st, parent_id, pu, pinc, parent_tree);
    *promised_id = id;
    if (stored)
        *stored = h;
    return 0;
}
