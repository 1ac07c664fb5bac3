/* h2/inbound.c — inbound frames: the input state machine (preface, frame header, payload),
 * header blocks gathered and decoded, DATA with flow control, SETTINGS, PING, GOAWAY,
 * WINDOW_UPDATE, RST_STREAM and PRIORITY_UPDATE, and the limits each one is charged to. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/list.h"
#include "common/pool.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/sched.h"
#include "h2/session_internal.h"
#include "h2/tree.h"
#include "http/http.h"

static int finish_block(gw_h2_session_t *s);

/* ---- inbound frames --------------------------------------------------------------------- */

static int begin_block(gw_h2_session_t *s, uint32_t sid, const gw_h2_frame_t *f, int reject)
{
    if (!gw_h2__ext(s))
        return gw_h2__nomem(s);
    s->hb_sid = sid;
    s->x->hb_end_stream = (f->hdr.flags & GW_H2_F_END_STREAM) != 0;
    s->x->hb_reject = reject;
    s->x->hb_has_pri = f->u.headers.has_priority;
    s->x->hb_pri = f->u.headers.pri;
    s->x->hb_frames = 1;
    s->x->hb.len = 0;
    if (f->u.headers.block.len > s->p->o.max_header_block) {
        COUNT(s, header_block_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "header block too large");
    }
    if (gw_bytes_append(&s->x->hb, f->u.headers.block.base, f->u.headers.block.len) < 0)
        return gw_h2__nomem(s);
    if (f->hdr.flags & GW_H2_F_END_HEADERS)
        return finish_block(s);
    return 0;
}

static int on_headers_frame(gw_h2_session_t *s, const gw_h2_frame_t *f, int reject)
{
    uint32_t sid = f->hdr.stream_id;
    if (f->u.headers.block.len == 0 &&
        !(f->hdr.flags & (GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS))) {
        int rc = gw_h2__count_empty(s);
        if (rc < 0)
            return rc;
    }
    if ((sid & 1) == 0)
        return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "client stream id must be odd");
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    if (!st && sid <= s->last_peer_id) {
        /* trailers of a stream we reset and forgot: decode (HPACK state), then drop */
        if (gw_h2__recently_reset(s, sid))
            return begin_block(s, sid, f, 2);
        return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "stream id not increasing");
    }
    return begin_block(s, sid, f, reject);
}

static int on_continuation(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    if (s->hb_sid == 0)
        return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "CONTINUATION without HEADERS");
    if (f->u.continuation.block.len == 0 && !(f->hdr.flags & GW_H2_F_END_HEADERS)) {
        int rc = gw_h2__count_empty(s);
        if (rc < 0)
            return rc;
    }
    if (++s->x->hb_frames > s->p->o.max_continuations + 1 ||
        s->x->hb.len + f->u.continuation.block.len > s->p->o.max_header_block) {
        /* endless CONTINUATION (CVE-2024-27316 and friends): cut it off */
        COUNT(s, header_block_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "header block too large");
    }
    if (gw_bytes_append(&s->x->hb, f->u.continuation.block.base, f->u.continuation.block.len) < 0)
        return gw_h2__nomem(s);
    if (f->hdr.flags & GW_H2_F_END_HEADERS)
        return finish_block(s);
    return 0;
}

/* After a callback: the callback may have reset or released the stream, so look it up
 * again. Returns 0 or a fatal code; *live is 1 when the stream is still there and not closed. */
static int call_rc(gw_h2_session_t *s, uint32_t sid, int rc, gw_h2_stream_t **live)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    *live = st && st->state != GW_H2_SS_CLOSED ? st : NULL;
    if (rc >= 0)
        return 0;
    if (gw_err_is_fatal(rc))
        return gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "application error", rc);
    if (*live) {
        gw_h2_stream_t *x = *live;
        *live = NULL;
        return gw_h2__stream_error(s, sid, x, GW_H2_INTERNAL_ERROR, 0);
    }
    return 0;
}

/* Answer a header list above our limit with 431 (RFC 9113 §10.5.1, RFC 6585 §5). */
static int refuse_431(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st)
{
    gw_hpack_field_t f = {GW_SLICE_LIT(":status"), GW_SLICE_LIT("431"), 0};
    COUNT(s, header_list_hits);
    int rc = gw_h2__write_block(s, sid, &f, 1, 1, 0);
    if (rc == GW_E_NOMEM)
        return gw_h2__nomem(s);
    if (rc < 0)
        return gw_h2__conn_error(s, GW_H2_COMPRESSION_ERROR, "encoder failure");
    /* we will not read the rest of the request (RFC 9113 §8.1: NO_ERROR reset after a
     * complete response) */
    if (!s->x->hb_end_stream) {
        if (gw_h2_frame_write_rst_stream(&s->out, sid, GW_H2_NO_ERROR) < 0)
            return gw_h2__nomem(s);
        COUNT(s, resets_sent);
        gw_h2__remember_rst(s, sid);
    }
    if (st) {
        st->rst_sent = 1;
        gw_h2__close_stream(s, st, GW_H2_NO_ERROR, 0);
    }
    return gw_h2__ctrl_check(s);
}

/* A new stream's request the session answers or resets itself: told to the layer above
 * (on_refused), with what was decoded of its head. */
static void refused(gw_h2_session_t *s, decode_ctx_t *c, unsigned status, uint32_t code,
                    const char *why)
{
    if (!s->p->cb.on_refused)
        return;
    c->head.headers = c->h;
    c->head.headers_len = c->n;
    c->head.end_stream = s->x->hb_end_stream;
    s->p->cb.on_refused(s->user_data, &c->head, status, code, why);
}

/* A block on a stream we reset (known, or forgotten since) is decoded only for the HPACK
 * state (RFC 9113 §4.3, §5.1: such frames may be in flight): its fields are not copied
 * anywhere, and each such block is charged to the control budget (thousands of small HEADERS
 * frames, each naming a 4 KB table entry, would otherwise make the stream's arena grow by
 * their whole decoded size and cost nothing). */
static int discard_block(gw_h2_session_t *s)
{
    int rc;
    COUNT(s, discarded_blocks);
    if ((rc = gw_h2__count_control(s)) < 0) {
        s->x->hb.len = 0;
        return rc;
    }
    gw_hpack_dec_begin(&s->dec, s->p->o.max_header_list_size);
    size_t dlen = s->x->hb.len;
    static const uint8_t none[1];
    /* no callback: the decoder's table-only mode, which updates the table and copies no field
     * that does not enter it */
    ssize_t dn =
        gw_hpack_decode(&s->dec, s->x->hb.base ? s->x->hb.base : none, dlen, 1, NULL, NULL);
    int dend = dn < 0 ? (int)dn : gw_hpack_dec_end(&s->dec);
    s->x->hb.len = 0;
    if (dn == GW_E_NOMEM || dend == GW_E_NOMEM)
        return gw_h2__nomem(s);
    if (dn < 0 || (size_t)dn != dlen || (dend < 0 && dend != GW_E_LIMIT))
        return gw_h2__conn_error(s, GW_H2_COMPRESSION_ERROR, "HPACK decoding failed");
    return 0;
}

/* Decode the block into c, whatever happens to the stream: the HPACK state is shared (RFC 9113
 * §4.3). Returns 0, 1 when the field list passed SETTINGS_MAX_HEADER_LIST_SIZE (what fitted
 * is in c), or -1 on a connection error, whose code is then in *rc. */
static int decode_block(gw_h2_session_t *s, decode_ctx_t *c, int *rc)
{
    gw_hpack_dec_begin(&s->dec, s->p->o.max_header_list_size);
    size_t blen = s->x->hb.len;
    static const uint8_t empty[1];
    /* an empty block may have no buffer yet: never pass NULL + 0 (UB in pointer arithmetic) */
    ssize_t n = gw_hpack_decode(&s->dec, s->x->hb.base ? s->x->hb.base : empty, blen, 1,
                                gw_h2__on_field, c);
    int end = n < 0 ? (int)n : gw_hpack_dec_end(&s->dec);
    s->x->hb.len = 0;
    if (n == GW_E_NOMEM || end == GW_E_NOMEM || c->nomem) {
        *rc = gw_h2__nomem(s);
        return -1;
    }
    if (n < 0 || (size_t)n != blen || (end < 0 && end != GW_E_LIMIT)) {
        *rc = gw_h2__conn_error(s, GW_H2_COMPRESSION_ERROR, "HPACK decoding failed");
        return -1;
    }
    return end == GW_E_LIMIT;
}

/* HEADERS on stream st, which we know: trailers, or a frame on a closed half. */
static int finish_trailers(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st, decode_ctx_t *c,
                           int overflow)
{
    if (st->state == GW_H2_SS_HALF_CLOSED_REMOTE || (st->state == GW_H2_SS_CLOSED && !st->rst_sent))
        return gw_h2__stream_error(s, sid, st, GW_H2_STREAM_CLOSED, 1);
    if (st->state == GW_H2_SS_CLOSED)
        return 0; /* we reset it: ignore (§5.1) */
    if (overflow) {
        /* a 431 here would be a second final response head on a stream whose request already
         * went on (and whose response may be under way): the stream is reset instead. RFC 9113
         * §10.5.1 offers 431 for a request head only; a trailer section past our
         * SETTINGS_MAX_HEADER_LIST_SIZE is load we refuse. */
        COUNT(s, header_list_hits);
        return gw_h2__stream_error(s, sid, st, GW_H2_ENHANCE_YOUR_CALM, 1);
    }
    if (!c->malformed && !s->x->hb_end_stream)
        gw_h2__bad(c, "trailers without END_STREAM");
    if (!c->malformed && st->content_length >= 0 && st->data_recv != (uint64_t)st->content_length)
        gw_h2__bad(c, "content-length mismatch");
    if (c->malformed || s->x->hb_reject) {
        COUNT(s, malformed_requests);
        return gw_h2__stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
    }
    if (s->p->cb.on_trailers && st->seen) {
        int rc = call_rc(s, sid, s->p->cb.on_trailers(s->user_data, sid, c->h, c->n), &st);
        if (rc < 0 || !st)
            return rc;
    }
    return gw_h2__remote_end(s, st);
}

/* Whether a new stream may open: not after our GOAWAY, not past SETTINGS_MAX_CONCURRENT_STREAMS
 * (pushed streams hold none of the client's slots), not with a head past
 * SETTINGS_MAX_HEADER_LIST_SIZE, not malformed. 1, or 0 with the stream refused, reset and
 * reported (on_refused) and the code to return in *rc. */
static int may_open(gw_h2_session_t *s, uint32_t sid, decode_ctx_t *c, int overflow, int *rc)
{
    if (s->phase >= GW_H2_CONN_GOAWAY_SENT ||
        s->active - (gw_h2__push(s) ? gw_h2__push(s)->held : 0) >= s->p->o.max_concurrent_streams) {
        /* §5.1.2: REFUSED_STREAM; it also costs us a frame, so it counts as a provoked reset
         * unless we stopped accepting because of our own GOAWAY */
        COUNT(s, streams_refused);
        *rc = gw_h2__stream_error(s, sid, NULL, GW_H2_REFUSED_STREAM,
                                  s->phase < GW_H2_CONN_GOAWAY_SENT);
        refused(s, c, 0, GW_H2_REFUSED_STREAM, NULL);
        return 0;
    }
    if (overflow) {
        *rc = refuse_431(s, sid, NULL);
        refused(s, c, 431, GW_H2_NO_ERROR, "header list too large");
        return 0;
    }
    gw_h2__check_request(c);
    if (c->malformed || s->x->hb_reject) {
        COUNT(s, malformed_requests);
        *rc = gw_h2__stream_error(s, sid, NULL, GW_H2_PROTOCOL_ERROR, 1);
        refused(s, c, 0, GW_H2_PROTOCOL_ERROR, c->why ? c->why : "invalid HEADERS frame");
        return 0;
    }
    return 1;
}

/* A request head on a new stream: open it in the block *blk (decoded there, tmp its arena;
 * *blk becomes NULL once the stream owns it), give it its priority and hand it up. */
static int open_stream(gw_h2_session_t *s, uint32_t sid, decode_ctx_t *c, int overflow, void **blk,
                       arena_t *tmp)
{
    int rc = 0;
    /* a new stream: the idle ids below it are now closed (§5.1.1) */
    s->last_peer_id = sid;
    if (!may_open(s, sid, c, overflow, &rc))
        return rc;
    if (!*blk)
        return gw_h2__nomem(s);
    gw_h2_stream_t *st = gw_h2__stream_new(s, sid, *blk, tmp);
    *blk = NULL;
    st->content_length = c->head.content_length;
    st->seen = 1;
    gw_h2__apply_open_priority(s, st, c->priority);
    if (s->x->hb_has_pri && (rc = gw_h2__apply_7540(s, sid, &s->x->hb_pri)) < 0)
        return rc;
    if (s->x->tree && gw_h2_tree_open(s->x->tree, sid) == 0) {
        if (!st->prio9218)
            gw_h2_sched_set_tree(&s->x->sched, &st->node, 1);
    }
    s->streams_opened++;
    s->requests++;
    c->head.headers = c->h;
    c->head.headers_len = c->n;
    c->head.end_stream = s->x->hb_end_stream;
    if (c->head.end_stream && c->head.content_length > 0) {
        st->seen = 0;
        COUNT(s, malformed_requests);
        /* before the reset: the stream's arena, which holds the head, goes with it */
        refused(s, c, 0, GW_H2_PROTOCOL_ERROR, "content-length without content");
        return gw_h2__stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
    }
    if (s->p->o.max_requests_per_connection && s->requests >= s->p->o.max_requests_per_connection &&
        s->phase < GW_H2_CONN_GOAWAY_SENT) {
        COUNT(s, max_requests_hits);
        if ((rc = gw_h2_session_shutdown(s, 1)) < 0)
            return gw_h2__nomem(s);
    }
    if (c->priority.base && s->p->cb.on_priority)
        s->p->cb.on_priority(s->user_data, sid, c->priority);
    if (s->p->cb.on_request) {
        rc = call_rc(s, sid, s->p->cb.on_request(s->user_data, &c->head), &st);
        if (rc < 0 || !st)
            return rc;
    }
    if (s->x->hb_end_stream)
        rc = gw_h2__remote_end(s, st);
    return rc;
}

/* The end of a header block (END_HEADERS): trailers of a stream we know, or a new stream. */
static int finish_block(gw_h2_session_t *s)
{
    uint32_t sid = s->hb_sid;
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    arena_t tmp = {NULL};
    void *blk = NULL; /* a new stream's block, holding tmp's first block */
    decode_ctx_t c;
    int rc = 0;

    s->hb_sid = 0;
    if ((!st && s->x->hb_reject == 2) || (st && st->state == GW_H2_SS_CLOSED && st->rst_sent))
        return discard_block(s);
    /* a new stream's fields are decoded into the block it will live in; without memory for
     * one the block is decoded all the same (the HPACK state is shared, RFC 9113 §4.3) and
     * opening the stream fails */
    if (!st)
        blk = gw_h2__blk_get(s, &tmp);
    memset(&c, 0, sizeof(c));
    c.s = s;
    c.connect_protocol = s->p->o.enable_connect_protocol;
    c.trailers = st != NULL;
    c.head.content_length = -1;
    c.head.stream_id = sid;
    c.arena = st ? &st->arena : &tmp;
    int overflow = decode_block(s, &c, &rc);
    if (overflow < 0)
        goto out;
    if (st)
        rc = finish_trailers(s, sid, st, &c, overflow);
    else if (s->x->hb_reject != 2) /* 2: a forgotten stream we reset */
        rc = open_stream(s, sid, &c, overflow, &blk, &tmp);
out:
    gw_h2__arena_free(&tmp);
    if (blk)
        gw_pool_put(&s->p->blocks, blk);
    return rc;
}

static int on_data_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    uint32_t sid = f->hdr.stream_id;
    uint32_t flen = f->hdr.length;
    int rc;

    /* connection window first: every DATA frame counts (RFC 9113 §6.9) */
    if ((int64_t)flen > s->conn_recv_window)
        return gw_h2__conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "connection window exceeded");
    s->conn_recv_window -= flen;
    /* empty DATA without END_STREAM carries nothing: counted whatever the stream's state (a
     * flood on a stream we reset, whose frames are otherwise ignored, was free) */
    size_t dlen = f->u.data.data.len;
    if (dlen == 0 && !(f->hdr.flags & GW_H2_F_END_STREAM) && (rc = gw_h2__count_empty(s)) < 0)
        return rc;

    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    if (st && st->state == GW_H2_SS_RESERVED_LOCAL) /* §5.1 reserved (local) */
        return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "DATA on a reserved stream");
    if (!st || st->state == GW_H2_SS_HALF_CLOSED_REMOTE || st->state == GW_H2_SS_CLOSED) {
        if ((rc = gw_h2__credit_conn(s, flen)) < 0)
            return rc;
        if ((st && st->rst_sent) || (!st && gw_h2__recently_reset(s, sid)))
            return 0; /* §5.1: ignore frames after our RST_STREAM (they may be in flight) */
        return gw_h2__stream_error(s, sid, st, GW_H2_STREAM_CLOSED, 1);
    }
    if ((int64_t)flen > st->recv_window) {
        if ((rc = gw_h2__credit_conn(s, flen)) < 0)
            return rc;
        return gw_h2__stream_error(s, sid, st, GW_H2_FLOW_CONTROL_ERROR, 1);
    }
    st->recv_window -= flen;
    /* padding is nobody's to consume: give it back now */
    if (f->u.data.pad_len) {
        st->recv_pending += f->u.data.pad_len;
        if ((rc = gw_h2__credit_conn(s, f->u.data.pad_len)) < 0)
            return rc;
    }
    st->data_recv += dlen;
    if (st->content_length >= 0 && st->data_recv > (uint64_t)st->content_length) {
        COUNT(s, malformed_requests);
        if ((rc = gw_h2__credit_conn(s, dlen)) < 0)
            return rc;
        return gw_h2__stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
    }
    if ((f->hdr.flags & GW_H2_F_END_STREAM) && st->content_length >= 0 &&
        st->data_recv != (uint64_t)st->content_length) {
        COUNT(s, malformed_requests);
        if ((rc = gw_h2__credit_conn(s, dlen)) < 0)
            return rc;
        return gw_h2__stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
    }
    if (dlen) {
        st->recv_unconsumed += dlen;
        if (s->p->cb.on_data) {
            rc = call_rc(s, sid, s->p->cb.on_data(s->user_data, sid, f->u.data.data.base, dlen),
                         &st);
            if (rc < 0 || !st)
                return rc;
        } else {
            gw_h2_session_consume(s, sid, dlen);
        }
    }
    if (f->hdr.flags & GW_H2_F_END_STREAM)
        return gw_h2__remote_end(s, st);
    return 0;
}

/* RFC 9218 §7.1 (frame.c already rejected a non-zero stream id and prioritized id 0 with
 * PROTOCOL_ERROR): re-queue an open (or pushed) stream at its new priority; remember one for
 * an idle client stream; ignore closed streams and unknown even ids. */
static int on_priority_update(gw_h2_session_t *s, uint32_t sid, gw_slice_t value)
{
    uint8_t u, inc;
    gw_http_priority_parse(value, &u, &inc);
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    if (st) {
        if (st->state != GW_H2_SS_CLOSED) {
            gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
            gw_h2__mark_prio9218(s, st);
        }
        return 0;
    }
    if (!(sid & 1) || sid <= s->last_peer_id)
        return 0;
    return gw_h2__prio_pending_put(s, sid, u, inc);
}

/* RFC 9113 §6.9.2: the change of SETTINGS_INITIAL_WINDOW_SIZE applied to every stream's send
 * window; an overflow is a connection FLOW_CONTROL_ERROR. value: the frame's last value, the
 * one in force; peak: its largest. The values of one frame are processed in order (§6.5.3), so
 * each is a change of its own that must not overflow a window: the window after value v is
 * w + v - initial, largest for the largest v, which is checked (a frame [2^31-1, 65535] on a
 * stream whose window grew past the initial one overflows at its first entry). */
static int apply_initial_window(gw_h2_session_t *s, uint32_t value, uint32_t peak)
{
    int64_t delta = (int64_t)value - (int64_t)s->peer_initial_window;
    int64_t peak_delta = (int64_t)peak - (int64_t)s->peer_initial_window;
    if (!s->x) { /* no streams */
        s->peer_initial_window = value;
        return 0;
    }
    gw_list_foreach(it, &s->x->streams)
    {
        gw_h2_stream_t *x = GW_CONTAINER_OF(it, gw_h2_stream_t, link);
        if (x->send_window + peak_delta > GW_H2_MAX_WINDOW)
            return gw_h2__conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "stream window overflow");
    }
    s->peer_initial_window = value;
    COUNT(s, window_walks);
    /* the callbacks may release streams: collect the ids first, call afterwards */
    uint32_t *woken = s->p->cb.on_writable ? gw_malloc((s->active + 1) * sizeof(*woken)) : NULL;
    size_t nw = 0;
    gw_list_foreach(it, &s->x->streams)
    {
        gw_h2_stream_t *x = GW_CONTAINER_OF(it, gw_h2_stream_t, link);
        x->send_window += delta;
        if (x->blocked && x->send_window > 0 && x->state != GW_H2_SS_CLOSED) {
            x->blocked = 0;
            gw_h2_sched_add(&s->x->sched, &x->node);
            if (woken && nw < s->active)
                woken[nw++] = x->id;
        }
    }
    /* without memory the wake-ups are lost, not the data: want_write still says so */
    for (size_t k = 0; k < nw; k++)
        s->p->cb.on_writable(s->user_data, woken[k]);
    gw_free(woken);
    return 0;
}

static int apply_settings(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    /* SETTINGS_INITIAL_WINDOW_SIZE walks every open stream: applied once per frame, with the
     * last value the frame carries (§6.5.3 processes the values in order, so the last one is
     * the one in force after the frame), not once per entry (a 16 KB frame carries 2,730
     * entries). The frame codec already refused a value above 2^31-1. */
    int iws_seen = 0;
    uint32_t iws = 0, iws_peak = 0;
    for (size_t i = 0; i < f->u.settings.n; i++) {
        gw_h2_setting_t st = gw_h2_settings_get(f, i);
        switch (st.id) {
        case GW_H2_SETTINGS_HEADER_TABLE_SIZE:
            gw_hpack_enc_set_peer_max(&s->enc, st.value);
            break;
        case GW_H2_SETTINGS_INITIAL_WINDOW_SIZE:
            iws_seen = 1;
            iws = st.value;
            if (iws > iws_peak)
                iws_peak = iws;
            break;
        case GW_H2_SETTINGS_MAX_FRAME_SIZE:
            s->peer_max_frame = st.value;
            break;
        case GW_H2_SETTINGS_MAX_HEADER_LIST_SIZE:
            s->peer_max_header_list = st.value;
            break;
        case GW_H2_SETTINGS_ENABLE_PUSH: /* §6.5.2; promises already made stand */
            s->peer_no_push = st.value == 0;
            break;
        case GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS: /* the streams we may open: pushes */
            s->peer_max_streams = st.value;
            break;
        default:
            break;
        }
    }
    return iws_seen ? apply_initial_window(s, iws, iws_peak) : 0;
}

/* RFC 9218 §7.1 */
static int on_priority_update_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    int rc;
    if ((rc = gw_h2__count_control(s)) < 0)
        return rc;
    /* applied first, so the callback sees the new priority (the front moves a queued origin
     * exchange by it) */
    rc = on_priority_update(s, f->u.priority_update.prioritized_id, f->u.priority_update.value);
    if (rc == 0 && s->p->cb.on_priority)
        s->p->cb.on_priority(s->user_data, f->u.priority_update.prioritized_id,
                             f->u.priority_update.value);
    return rc;
}

/* §6.4 */
static int on_rst_stream_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, f->hdr.stream_id);
    int rc;
    COUNT(s, resets_received);
    if ((rc = gw_h2__count_reset(s)) < 0)
        return rc;
    if (st && st->state != GW_H2_SS_CLOSED) {
        if (st->pushed) /* §8.4.2: the client declines (or cancels) a pushed response */
            COUNT(s, pushes_cancelled);
        gw_h2__close_stream(s, st, f->u.rst_stream.error_code, 1);
    }
    return 0;
}

/* §6.5 */
static int on_settings_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    int rc;
    if (f->hdr.flags & GW_H2_F_ACK) {
        if (!s->settings_acked)
            gw_hpack_dec_set_max_table_size(&s->dec, s->p->o.header_table_size);
        s->settings_acked = 1;
        return 0;
    }
    s->got_settings = 1;
    /* entries, not frames, are charged: one frame may carry thousands */
    if ((rc = gw_h2__count_control_n(s, f->u.settings.n ? f->u.settings.n : 1)) < 0)
        return rc;
    if ((rc = apply_settings(s, f)) < 0)
        return rc;
    if (gw_h2_frame_write_settings(&s->out, 1, NULL, 0) < 0)
        return gw_h2__nomem(s);
    return gw_h2__ctrl_check(s);
}

/* §6.7 */
static int on_ping_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    int rc;
    if (f->hdr.flags & GW_H2_F_ACK) {
        if (s->phase == GW_H2_CONN_SHUTDOWN_PENDING &&
            memcmp(f->u.ping.opaque, SHUTDOWN_PING, 8) == 0) {
            s->phase = GW_H2_CONN_OPEN;
            if (gw_h2_session_shutdown(s, 1) < 0)
                return gw_h2__nomem(s);
        }
        return 0;
    }
    if ((rc = gw_h2__count_control(s)) < 0)
        return rc;
    if (gw_h2_frame_write_ping(&s->out, 1, f->u.ping.opaque) < 0)
        return gw_h2__nomem(s);
    return gw_h2__ctrl_check(s);
}

/* §6.9 */
static int on_window_update_frame(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    uint32_t inc = f->u.window_update.increment, sid = f->hdr.stream_id;
    int rc;
    /* RFC 9113 §6.9: a receiver credits the DATA it consumed. Updates that answer our DATA (a
     * stream's and the connection's per frame) are flow control, not a flood: a client with
     * small windows downloading fast sends thousands. Only the others count. */
    if (s->wu_earned)
        s->wu_earned--;
    else if ((rc = gw_h2__count_control(s)) < 0)
        return rc;
    if (sid == 0) {
        if (s->conn_send_window + inc > GW_H2_MAX_WINDOW)
            return gw_h2__conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "connection window overflow");
        s->conn_send_window += inc;
        return 0;
    }
    gw_h2_stream_t *st = gw_h2__find_stream(s, sid);
    if (!st || st->state == GW_H2_SS_CLOSED)
        return 0; /* may cross our END_STREAM or RST_STREAM (§6.9) */
    if (st->send_window + inc > GW_H2_MAX_WINDOW)
        return gw_h2__stream_error(s, sid, st, GW_H2_FLOW_CONTROL_ERROR, 1);
    st->send_window += inc;
    if (st->blocked && st->send_window > 0) {
        st->blocked = 0;
        gw_h2_sched_add(&s->x->sched, &st->node);
        if (s->p->cb.on_writable)
            s->p->cb.on_writable(s->user_data, st->id);
    }
    return 0;
}

/* The checks every frame passes before its own: the header block's CONTINUATIONs (§6.10), the
 * preface's SETTINGS (§3.4), the frame's syntax (frame.c), idle streams (§5.1). Returns 1 to
 * go on with f parsed (*reject set when a HEADERS frame is to be decoded, then reset), or 0
 * with the frame handled and the code to return in *rc. */
static int frame_ok(gw_h2_session_t *s, const gw_h2_frame_hdr_t *h, const uint8_t *payload,
                    gw_h2_frame_t *f, int *reject, int *rc)
{
    gw_h2_frame_err_t err;
    *rc = 0;
    /* §6.10: nothing may come between HEADERS and its last CONTINUATION */
    if (s->hb_sid && (h->type != GW_H2_FT_CONTINUATION || h->stream_id != s->hb_sid)) {
        *rc = gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "frame inside a header block");
        return 0;
    }
    /* §3.4: the client preface ends with a SETTINGS frame */
    if (!s->got_settings && (h->type != GW_H2_FT_SETTINGS || (h->flags & GW_H2_F_ACK))) {
        *rc = gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "first frame is not SETTINGS");
        return 0;
    }
    int prc = gw_h2_frame_parse(h, payload, f, &err);
    if (prc == 1)
        return 0; /* unknown type */
    if (prc == GW_E_PROTO) {
        *rc = gw_h2__conn_error(s, err.code, err.reason);
        return 0;
    }
    /* §5.1 idle: only HEADERS and PRIORITY may open or touch an idle stream; the client's
     * streams are odd, ours (pushed) even and idle above the last one we promised */
    uint32_t last_used =
        (h->stream_id & 1) ? s->last_peer_id : (gw_h2__push(s) ? gw_h2__push(s)->last_id : 0);
    if (h->stream_id && h->stream_id > last_used && h->type != GW_H2_FT_HEADERS &&
        h->type != GW_H2_FT_PRIORITY && h->type != GW_H2_FT_PUSH_PROMISE && !s->hb_sid) {
        *rc = gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "frame on an idle stream");
        return 0;
    }
    *reject = 0;
    if (prc == GW_E_STREAM) {
        if (h->type != GW_H2_FT_HEADERS) {
            gw_h2_stream_t *st = gw_h2__find_stream(s, h->stream_id);
            if (h->type == GW_H2_FT_PRIORITY && (*rc = gw_h2__count_control(s)) < 0)
                return 0;
            *rc = gw_h2__stream_error(s, h->stream_id, st, err.code, 1);
            return 0;
        }
        *reject = 1; /* decode the block for HPACK's sake, then reset */
    }
    return 1;
}

static int on_frame(gw_h2_session_t *s, const gw_h2_frame_hdr_t *h, const uint8_t *payload,
                    uint64_t now)
{
    gw_h2_frame_t f;
    int rc, reject;

    s->frames_in++;
    gw_h2__roll_budget(s, now);
    if (!frame_ok(s, h, payload, &f, &reject, &rc))
        return rc;
    switch (h->type) {
    case GW_H2_FT_DATA:
        return on_data_frame(s, &f);
    case GW_H2_FT_HEADERS:
        return on_headers_frame(s, &f, reject);
    case GW_H2_FT_CONTINUATION:
        return on_continuation(s, &f);
    case GW_H2_FT_PRIORITY: /* RFC 7540 §6.3: deprecated (RFC 9113 §5.3.2) but honoured */
        if ((rc = gw_h2__count_control(s)) < 0)
            return rc;
        return gw_h2__apply_7540(s, h->stream_id, &f.u.priority);
    case GW_H2_FT_PRIORITY_UPDATE:
        return on_priority_update_frame(s, &f);
    case GW_H2_FT_RST_STREAM:
        return on_rst_stream_frame(s, &f);
    case GW_H2_FT_SETTINGS:
        return on_settings_frame(s, &f);
    case GW_H2_FT_PING:
        return on_ping_frame(s, &f);
    case GW_H2_FT_GOAWAY:
        s->peer_goaway = 1;
        if (s->p->cb.on_goaway)
            s->p->cb.on_goaway(s->user_data, f.u.goaway.last_stream_id, f.u.goaway.error_code,
                               f.u.goaway.debug);
        return 0;
    case GW_H2_FT_WINDOW_UPDATE:
        return on_window_update_frame(s, &f);
    case GW_H2_FT_PUSH_PROMISE:
        /* §8.4: a client cannot push */
        return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "PUSH_PROMISE from a client");
    default:
        return 0;
    }
}

/* ---- public: input ---------------------------------------------------------------------- */

ssize_t gw_h2_session_recv(gw_h2_session_t *s, const uint8_t *buf, size_t len, uint64_t now_ms)
{
    size_t off = 0;
    int rc = 0;

    if (s->phase == GW_H2_CONN_CLOSING)
        return GW_E_CLOSED;
    while (off < len && s->phase != GW_H2_CONN_CLOSING) {
        switch (s->in_state) {
        case IN_PREFACE: {
            size_t n = GW_H2_PREFACE_LEN - s->preface_pos;
            if (n > len - off)
                n = len - off;
            if (memcmp(buf + off, &GW_H2_PREFACE[s->preface_pos], n) != 0)
                return gw_h2__conn_error(s, GW_H2_PROTOCOL_ERROR, "invalid connection preface");
            s->preface_pos += n;
            off += n;
            if (s->preface_pos == GW_H2_PREFACE_LEN)
                s->in_state = IN_HDR;
            break;
        }
        case IN_HDR: {
            size_t n = GW_H2_FRAME_HDR_LEN - s->hdr_have;
            if (n > len - off)
                n = len - off;
            memcpy(s->hdr_buf + s->hdr_have, buf + off, n);
            s->hdr_have += n;
            off += n;
            if (s->hdr_have < GW_H2_FRAME_HDR_LEN)
                break;
            s->hdr_have = 0;
            gw_h2_frame_hdr_parse(s->hdr_buf, &s->hdr);
            gw_h2_frame_err_t err;
            if (gw_h2_frame_check_hdr(&s->hdr, s->p->o.max_frame_size, &err) < 0)
                return gw_h2__conn_error(s, err.code, err.reason);
            if (s->x)
                s->x->in.len = 0;
            if (s->hdr.length == 0) {
                if ((rc = on_frame(s, &s->hdr, NULL, now_ms)) < 0)
                    return rc;
            } else {
                s->in_state = IN_PAYLOAD;
            }
            break;
        }
        case IN_PAYLOAD: {
            size_t avail = len - off;
            if ((!s->x || s->x->in.len == 0) && avail >= s->hdr.length) {
                /* whole payload in the caller's buffer: parse in place */
                off += s->hdr.length;
                s->in_state = IN_HDR;
                if ((rc = on_frame(s, &s->hdr, buf + off - s->hdr.length, now_ms)) < 0)
                    return rc;
                break;
            }
            if (!gw_h2__ext(s))
                return gw_h2__nomem(s);
            size_t n = s->hdr.length - s->x->in.len;
            if (n > avail)
                n = avail;
            if (gw_bytes_append(&s->x->in, buf + off, n) < 0)
                return gw_h2__nomem(s);
            off += n;
            if (s->x->in.len == s->hdr.length) {
                s->in_state = IN_HDR;
                rc = on_frame(s, &s->hdr, s->x->in.base, now_ms);
                s->x->in.len = 0;
                if (rc < 0)
                    return rc;
            }
            break;
        }
        case IN_DEAD:
            return GW_E_CLOSED;
        }
    }
    if (s->phase == GW_H2_CONN_CLOSING)
        return s->fatal_rc;
    return (ssize_t)len;
}
