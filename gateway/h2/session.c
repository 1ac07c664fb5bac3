/* h2/session.c — HTTP/2 server session: its lifetime, connection errors and budgets, timers,
 * shutdown, and the public getters and setters. The stream store is in stream.c, request
 * validation in validate.c, inbound frames in inbound.c, submitting and sending in send.c.
 *
 * Input path: recv() runs the explicit inbound state machine (preface, frame header, payload),
 * parses a whole payload in place when the caller's buffer holds it and buffers it otherwise,
 * and dispatches the frame. A header block (HEADERS + CONTINUATION) is gathered, capped, then
 * decoded in one go with HPACK into a per-stream arena and validated (RFC 9113 §8.1-§8.3).
 *
 * Output path: every non-DATA frame is serialized at once into `out` in submission order;
 * send() moves it into the caller's iovq, then asks the scheduler for DATA within the windows.
 * DATA payload is queued by reference (gw_rbuf_t) and never copied.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/list.h"
#include "common/pool.h"
#include "h2/defaults.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/sched.h"
#include "h2/session_internal.h"
#include "h2/tree.h"

/* Counters that only some connections ever move live apart; a lost count (no memory) goes to
 * a sink. */
cold_t *gw_h2__cold_part(gw_h2_session_t *s)
{
    if (!s->cold)
        s->cold = gw_calloc(1, sizeof(*s->cold));
    return s->cold;
}

gw_h2_stats_t *gw_h2__cold(gw_h2_session_t *s)
{
    static _Thread_local gw_h2_stats_t sink;
    cold_t *c = gw_h2__cold_part(s);
    return c ? &c->st : &sink;
}

/* The stream part, created on first need. NULL when out of memory. */
sess_ext_t *gw_h2__ext(gw_h2_session_t *s)
{
    if (s->x)
        return s->x;
    sess_ext_t *x = gw_calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    gw_list_init(&x->streams);
    gw_h2_sched_init(&x->sched, &gw_h2_sched_priority);
    gw_bytes_init(&x->in, 0);
    gw_bytes_init(&x->hb, 0);
    gw_bytes_init(&x->scratch, 0);
    s->x = x;
    return x;
}

static void ext_free(sess_ext_t *x)
{
    if (!x)
        return;
    gw_bytes_free(&x->in);
    gw_bytes_free(&x->hb);
    gw_bytes_free(&x->scratch);
    gw_free(x->prio_pend);
    gw_h2_tree_del(x->tree);
    gw_free(x);
}

void gw_h2_options_default(gw_h2_options_t *o)
{
    memset(o, 0, sizeof(*o));
    o->max_concurrent_streams = GW_H2_DEF_MAX_CONCURRENT_STREAMS;
    o->initial_window_size = GW_H2_DEF_INITIAL_WINDOW_SIZE;
    o->connection_window_size = GW_H2_DEF_CONNECTION_WINDOW_SIZE;
    o->max_frame_size = GW_H2_DEF_MAX_FRAME_SIZE;
    o->header_table_size = GW_H2_DEF_HEADER_TABLE_SIZE;
    o->max_header_list_size = GW_H2_DEF_MAX_HEADER_LIST_SIZE;
    o->settings_timeout_ms = GW_H2_DEF_SETTINGS_TIMEOUT_MS;
    o->max_requests_per_connection = GW_H2_DEF_MAX_REQUESTS_PER_CONNECTION;
    o->reset_budget = GW_H2_DEF_RESET_BUDGET;
    o->reset_window_ms = GW_H2_DEF_RESET_WINDOW_MS;
    o->control_frame_budget = GW_H2_DEF_CONTROL_FRAME_BUDGET;
    o->empty_frame_budget = GW_H2_DEF_EMPTY_FRAME_BUDGET;
    o->max_queued_control = GW_H2_DEF_MAX_QUEUED_CONTROL;
    o->encoder_table_size = 4096;
    o->max_header_block = 0; /* derived in fill_defaults */
    o->max_continuations = 64;
    o->max_priority_nodes = GW_H2_DEF_MAX_PRIORITY_NODES; /* derived in fill_defaults */
    o->max_pushes = GW_H2_DEF_MAX_PUSHES;
}

static void fill_defaults(gw_h2_options_t *o)
{
    gw_h2_options_t d;
    gw_h2_options_default(&d);
#define DEF_(f)                                                                                    \
    if (!o->f)                                                                                     \
    o->f = d.f
    DEF_(max_concurrent_streams);
    DEF_(initial_window_size);
    DEF_(connection_window_size);
    DEF_(max_frame_size);
    DEF_(max_header_list_size);
    DEF_(settings_timeout_ms);
    DEF_(reset_budget);
    DEF_(reset_window_ms);
    DEF_(control_frame_budget);
    DEF_(empty_frame_budget);
    DEF_(max_queued_control);
    DEF_(max_continuations);
    DEF_(encoder_table_size);
#undef DEF_
    if (!o->max_header_block)
        o->max_header_block = (size_t)o->max_header_list_size + 16 * 1024;
    if (!o->max_priority_nodes)
        o->max_priority_nodes = 2 * o->max_concurrent_streams;
}

static int map_code(uint32_t code)
{
    switch (code) {
    case GW_H2_FLOW_CONTROL_ERROR:
        return GW_E_FLOW;
    case GW_H2_COMPRESSION_ERROR:
        return GW_E_COMPRESSION;
    case GW_H2_ENHANCE_YOUR_CALM:
        return GW_E_CALM;
    case GW_H2_SETTINGS_TIMEOUT:
        return GW_E_TIMEOUT;
    default:
        return GW_E_PROTO;
    }
}

/* Connection error (RFC 9113 §5.4.1): GOAWAY with the code and reason, then close after the
 * flush. Returns the GW_E code recv reports. */
int gw_h2__conn_error_rc(gw_h2_session_t *s, uint32_t code, const char *reason, int rc)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return s->fatal_rc;
    s->phase = GW_H2_CONN_CLOSING;
    s->in_state = IN_DEAD;
    s->goaway_code = code;
    s->goaway_reason = reason;
    s->fatal_rc = rc;
    size_t dlen = reason ? strlen(reason) : 0;
    if (dlen > MAX_DEBUG)
        dlen = MAX_DEBUG;
    /* Best effort: if even the GOAWAY cannot be queued the connection just closes. */
    (void)gw_h2_frame_write_goaway(&s->out, s->last_peer_id, code, reason, dlen);
    return rc;
}

int gw_h2__conn_error(gw_h2_session_t *s, uint32_t code, const char *reason)
{
    return gw_h2__conn_error_rc(s, code, reason, map_code(code));
}

int gw_h2__nomem(gw_h2_session_t *s)
{
    return gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "out of memory", GW_E_NOMEM);
}

/* Queue a control frame, enforcing the cap on unsent control frames (CVE-2019-9512/9515:
 * a peer that does not read our ACKs must not make us buffer without bound). */
int gw_h2__ctrl_check(gw_h2_session_t *s)
{
    if (++s->ctrl_queued > s->p->o.max_queued_control) {
        COUNT(s, queued_control_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "peer does not read control frames");
    }
    return 0;
}

void gw_h2__roll_budget(gw_h2_session_t *s, uint64_t now)
{
    if (now - s->budget_start_ms >= s->p->o.reset_window_ms || now < s->budget_start_ms) {
        s->budget_start_ms = now;
        s->resets_in_window = s->control_in_window = s->empty_in_window = 0;
    }
}

int gw_h2__count_reset(gw_h2_session_t *s)
{
    if (++s->resets_in_window > s->p->o.reset_budget) {
        COUNT(s, reset_budget_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "too many stream resets");
    }
    return 0;
}

int gw_h2__count_control_n(gw_h2_session_t *s, size_t n)
{
    uint64_t sum = (uint64_t)s->control_in_window + n;
    s->control_in_window = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
    if (s->control_in_window > s->p->o.control_frame_budget) {
        COUNT(s, control_flood_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "control frame flood");
    }
    return 0;
}

int gw_h2__count_control(gw_h2_session_t *s)
{
    if (++s->control_in_window > s->p->o.control_frame_budget) {
        COUNT(s, control_flood_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "control frame flood");
    }
    return 0;
}

int gw_h2__count_empty(gw_h2_session_t *s)
{
    if (++s->empty_in_window > s->p->o.empty_frame_budget) {
        COUNT(s, empty_frame_hits);
        return gw_h2__conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "empty frame flood");
    }
    return 0;
}

/* Give back connection window for bytes no one will consume (closed streams, padding). */
int gw_h2__credit_conn(gw_h2_session_t *s, uint64_t n)
{
    s->conn_recv_pending += n;
    if (s->conn_recv_pending >= s->p->o.connection_window_size / 2 &&
        s->phase != GW_H2_CONN_CLOSING) {
        int64_t inc = (int64_t)s->conn_recv_pending;
        if (s->conn_recv_window + inc > GW_H2_MAX_WINDOW)
            inc = GW_H2_MAX_WINDOW - s->conn_recv_window;
        s->conn_recv_pending = 0;
        if (inc > 0) {
            if (gw_h2_frame_write_window_update(&s->out, 0, (uint32_t)inc) < 0)
                return gw_h2__nomem(s);
            s->conn_recv_window += inc;
            return gw_h2__ctrl_check(s);
        }
    }
    return 0;
}

/* Stream error (RFC 9113 §5.4.2): RST_STREAM. provoked: the peer caused it (counts toward the
 * reset budget, MadeYouReset CVE-2025-8671). st may be NULL (stream not kept). */
int gw_h2__stream_error(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st, uint32_t code,
                        int provoked)
{
    if (gw_h2_frame_write_rst_stream(&s->out, sid, code) < 0)
        return gw_h2__nomem(s);
    COUNT(s, resets_sent);
    gw_h2__remember_rst(s, sid);
    if (st && st->state != GW_H2_SS_CLOSED) {
        st->rst_sent = 1;
        gw_h2__close_stream(s, st, code, 0);
    }
    int rc = gw_h2__ctrl_check(s);
    if (rc < 0)
        return rc;
    if (provoked) {
        COUNT(s, resets_provoked);
        return gw_h2__count_reset(s);
    }
    return 0;
}

/* ---- public: lifetime ------------------------------------------------------------------- */

int gw_h2_profile_new(gw_h2_profile_t **out, const gw_h2_options_t *opts,
                      const gw_h2_callbacks_t *cb)
{
    *out = NULL;
    gw_h2_profile_t *p = gw_calloc(1, sizeof(*p));
    if (!p)
        return GW_E_NOMEM;
    if (opts)
        p->o = *opts;
    else
        gw_h2_options_default(&p->o);
    fill_defaults(&p->o);
    if (cb)
        p->cb = *cb;
    gw_pool_init(&p->blocks, STREAM_BLK_SIZE, 0, STREAM_FREE_KEEP);
    gw_bytes_init(&p->strbufs.name, 0);
    gw_bytes_init(&p->strbufs.value, 0);
    if (p->o.initial_window_size > GW_H2_MAX_WINDOW ||
        p->o.connection_window_size > GW_H2_MAX_WINDOW ||
        p->o.max_frame_size < GW_H2_DEFAULT_MAX_FRAME_SIZE ||
        p->o.max_frame_size > GW_H2_MAX_MAX_FRAME_SIZE) {
        gw_free(p);
        return GW_E_INVAL;
    }
    *out = p;
    return 0;
}

void gw_h2_profile_del(gw_h2_profile_t *p)
{
    if (!p)
        return;
    gw_pool_free(&p->blocks);
    gw_hpack_strbufs_free(&p->strbufs);
    gw_free(p);
}

int gw_h2_session_new_with(gw_h2_session_t **out, gw_h2_profile_t *p, void *user_data,
                           uint64_t now_ms)
{
    gw_h2_session_t *s;
    int rc = GW_E_NOMEM;

    *out = NULL;
    s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->p = p;
    s->user_data = user_data;
    s->data_budget = SIZE_MAX;
    gw_bytes_init(&s->out, 0);
    /* until our SETTINGS are acknowledged the peer may use the default 4096 (RFC 7541 §4.2) */
    if (gw_hpack_dec_init(&s->dec, p->o.header_table_size > 4096 ? p->o.header_table_size : 4096) <
        0) {
        gw_free(s);
        return GW_E_NOMEM;
    }
    gw_hpack_dec_share_bufs(&s->dec, &p->strbufs);
    if (gw_hpack_enc_init(&s->enc, p->o.encoder_table_size) < 0) {
        gw_hpack_dec_free(&s->dec);
        gw_free(s);
        return GW_E_NOMEM;
    }
    s->peer_initial_window = GW_H2_DEFAULT_WINDOW;
    s->peer_max_frame = GW_H2_DEFAULT_MAX_FRAME_SIZE;
    s->peer_max_header_list = UINT32_MAX;
    s->peer_max_streams = UINT32_MAX; /* unlimited until the peer says (RFC 9113 §6.5.2) */
    s->conn_send_window = GW_H2_DEFAULT_WINDOW;
    s->conn_recv_window = GW_H2_DEFAULT_WINDOW;
    s->settings_sent_ms = now_ms;
    s->budget_start_ms = now_ms;

    /* server preface: our SETTINGS, then open the connection window (§3.4, §6.9.2) */
    gw_h2_setting_t set[7];
    size_t n = 0;
    set[n++] =
        (gw_h2_setting_t){GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS, p->o.max_concurrent_streams};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, p->o.initial_window_size};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_MAX_FRAME_SIZE, p->o.max_frame_size};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_MAX_HEADER_LIST_SIZE, p->o.max_header_list_size};
    if (p->o.header_table_size != 4096)
        set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_HEADER_TABLE_SIZE, p->o.header_table_size};
    if (p->o.enable_connect_protocol) /* RFC 8441 §3 */
        set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1};
    /* RFC 9218 §2.1: SETTINGS_NO_RFC7540_PRIORITIES is not sent, since we honour the RFC 7540
     * tree for streams without an RFC 9218 signal */
    if ((rc = gw_h2_frame_write_settings(&s->out, 0, set, n)) < 0)
        goto fail;
    if (p->o.connection_window_size > GW_H2_DEFAULT_WINDOW) {
        uint32_t inc = p->o.connection_window_size - GW_H2_DEFAULT_WINDOW;
        if ((rc = gw_h2_frame_write_window_update(&s->out, 0, inc)) < 0)
            goto fail;
        s->conn_recv_window += inc;
    }
    *out = s;
    return 0;
fail:
    gw_h2_session_del(s);
    return rc;
}

int gw_h2_session_new(gw_h2_session_t **out, const gw_h2_options_t *opts,
                      const gw_h2_callbacks_t *cb, void *user_data, uint64_t now_ms)
{
    gw_h2_profile_t *p;
    int rc = gw_h2_profile_new(&p, opts, cb);
    *out = NULL;
    if (rc < 0)
        return rc;
    if ((rc = gw_h2_session_new_with(out, p, user_data, now_ms)) < 0) {
        gw_h2_profile_del(p);
        return rc;
    }
    (*out)->owns_profile = 1;
    return 0;
}

void gw_h2_session_del(gw_h2_session_t *s)
{
    if (!s)
        return;
    gw_list_t *n;
    while (s->x && (n = gw_list_pop_front(&s->x->streams))) {
        gw_h2_stream_t *st = GW_CONTAINER_OF(n, gw_h2_stream_t, link);
        gw_list_init(&st->link);
        gw_h2_sched_remove(&s->x->sched, &st->node);
        gw_h2__drop_chunks(s, st);
        gw_bytes_free(&st->trailers);
        gw_h2__arena_free(&st->arena);
        gw_pool_put(&s->p->blocks, st);
    }
    ext_free(s->x);
    gw_hpack_dec_free(&s->dec);
    gw_hpack_enc_free(&s->enc);
    gw_bytes_free(&s->out);
    if (s->cold)
        gw_free(s->cold->push);
    gw_free(s->cold);
    gw_free(s->recent_rst);
    if (s->owns_profile)
        gw_h2_profile_del(s->p);
    gw_free(s);
}

void gw_h2_session_compact(gw_h2_session_t *s)
{
    sess_ext_t *x = s->x;
    gw_hpack_dec_trim(&s->dec);
    if (s->out.len == 0 && s->out.cap) {
        gw_bytes_free(&s->out);
        gw_bytes_init(&s->out, 0);
    }
    /* the stream part holds state the peer relies on only in these cases: keep it then */
    if (!x || s->active || s->hb_sid || x->in.len || x->prio_pend_n || x->tree)
        return;
    GW_ASSERT(gw_list_empty(&x->streams) && x->sched.count == 0);
    ext_free(x);
    s->x = NULL;
}

int gw_h2_session_tick(gw_h2_session_t *s, uint64_t now_ms)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return 0;
    gw_h2__roll_budget(s, now_ms);
    if (!s->settings_acked && now_ms >= s->settings_sent_ms &&
        now_ms - s->settings_sent_ms >= s->p->o.settings_timeout_ms) {
        COUNT(s, settings_timeouts);
        return gw_h2__conn_error(s, GW_H2_SETTINGS_TIMEOUT, "SETTINGS not acknowledged");
    }
    return 0;
}

uint64_t gw_h2_session_next_deadline(const gw_h2_session_t *s)
{
    if (s->phase == GW_H2_CONN_CLOSING || s->settings_acked)
        return UINT64_MAX;
    return s->settings_sent_ms + s->p->o.settings_timeout_ms;
}

int gw_h2_session_want_read(const gw_h2_session_t *s)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return 0;
    if (s->peer_goaway && s->phase >= GW_H2_CONN_GOAWAY_SENT && s->active == 0)
        return 0;
    return 1;
}

const char *gw_h2_conn_phase_str(gw_h2_conn_phase_t p)
{
    static const char *const n[] = {"open", "shutdown_pending", "goaway_sent", "closing"};
    return (unsigned)p < sizeof(n) / sizeof(n[0]) ? n[p] : "?";
}

gw_h2_conn_phase_t gw_h2_session_phase(const gw_h2_session_t *s)
{
    return (gw_h2_conn_phase_t)s->phase;
}

int gw_h2_session_should_close(const gw_h2_session_t *s)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return s->out.len == 0;
    if ((s->phase >= GW_H2_CONN_GOAWAY_SENT || s->peer_goaway) && s->active == 0 &&
        s->out.len == 0 && s->phase != GW_H2_CONN_SHUTDOWN_PENDING)
        return 1;
    return 0;
}

uint32_t gw_h2_session_goaway_code(const gw_h2_session_t *s, const char **reason)
{
    if (reason)
        *reason = s->goaway_reason;
    return s->goaway_code;
}

int gw_h2_session_shutdown(gw_h2_session_t *s, int final)
{
    if (s->phase >= GW_H2_CONN_GOAWAY_SENT)
        return 0;
    if (!final) {
        if (s->phase == GW_H2_CONN_SHUTDOWN_PENDING)
            return 0;
        /* §6.8: a first GOAWAY with the maximum id, then a PING round trip, then the real
         * last-stream-id: streams in flight are not lost */
        if (gw_h2_frame_write_goaway(&s->out, GW_H2_STREAM_ID_MASK, GW_H2_NO_ERROR, NULL, 0) < 0 ||
            gw_h2_frame_write_ping(&s->out, 0, (const uint8_t *)SHUTDOWN_PING) < 0)
            return GW_E_NOMEM;
        s->phase = GW_H2_CONN_SHUTDOWN_PENDING;
        return 0;
    }
    if (gw_h2_frame_write_goaway(&s->out, s->last_peer_id, GW_H2_NO_ERROR, NULL, 0) < 0)
        return GW_E_NOMEM;
    s->phase = GW_H2_CONN_GOAWAY_SENT;
    return 0;
}

int gw_h2_session_terminate(gw_h2_session_t *s, uint32_t error_code, const char *debug)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return 0;
    size_t before = s->out.len;
    gw_h2__conn_error_rc(s, error_code, debug, map_code(error_code));
    s->goaway_reason = "terminated by the application";
    return s->out.len > before ? 0 : GW_E_NOMEM;
}

/* ---- public: flow control and bookkeeping ------------------------------------------------ */

int gw_h2_session_consume(gw_h2_session_t *s, uint32_t stream_id, size_t n)
{
    if (stream_id == 0)
        return gw_h2__credit_conn(s, n) < 0 ? GW_E_NOMEM : 0;
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    if (n > st->recv_unconsumed)
        n = (size_t)st->recv_unconsumed; /* already credited when the stream closed */
    st->recv_unconsumed -= n;
    if (gw_h2__credit_conn(s, n) < 0)
        return GW_E_NOMEM;
    if (st->state != GW_H2_SS_OPEN && st->state != GW_H2_SS_HALF_CLOSED_LOCAL)
        return 0; /* the peer sends no more on this stream */
    st->recv_pending += n;
    /* batch: announce once half the window has been consumed (RFC 9113 §6.9 leaves when to
     * the receiver) */
    if (st->recv_pending >= s->p->o.initial_window_size / 2 && s->phase != GW_H2_CONN_CLOSING) {
        int64_t inc = (int64_t)st->recv_pending;
        if (st->recv_window + inc > GW_H2_MAX_WINDOW)
            inc = GW_H2_MAX_WINDOW - st->recv_window;
        st->recv_pending = 0;
        if (inc > 0) {
            if (gw_h2_frame_write_window_update(&s->out, stream_id, (uint32_t)inc) < 0)
                return GW_E_NOMEM;
            st->recv_window += inc;
            s->ctrl_queued++;
        }
    }
    return 0;
}

int gw_h2_session_stream_release(gw_h2_session_t *s, uint32_t stream_id)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st || !st->seen)
        return GW_E_NOENT;
    if (st->state != GW_H2_SS_CLOSED) {
        /* the layer above gives up on a live stream: cancel it (RFC 9113 §8.1) */
        st->seen = 0;
        if (gw_h2_frame_write_rst_stream(&s->out, stream_id, GW_H2_CANCEL) == 0)
            COUNT(s, resets_sent);
        gw_h2__remember_rst(s, stream_id);
        st->rst_sent = 1;
        gw_h2__close_stream(s, st, GW_H2_CANCEL, 0); /* frees it: not seen any more */
        return 0;
    }
    gw_h2__stream_free(s, st);
    return 0;
}

gw_h2_stream_state_t gw_h2_session_stream_state(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (st)
        return st->state;
    if (stream_id && (stream_id & 1) && stream_id <= s->last_peer_id)
        return GW_H2_SS_CLOSED;
    return GW_H2_SS_IDLE;
}

int gw_h2_session_set_stream_data(gw_h2_session_t *s, uint32_t stream_id, void *data)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    st->data = data;
    return 0;
}

void *gw_h2_session_get_stream_data(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    return st ? st->data : NULL;
}

size_t gw_h2_session_stream_queued(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    return st ? st->queued : 0;
}

size_t gw_h2_session_data_queued(const gw_h2_session_t *s)
{
    return s->x ? s->x->data_queued : 0;
}

void gw_h2_session_pacing_view(const gw_h2_session_t *s, size_t enough, gw_h2_pacing_view_t *v)
{
    *v = (gw_h2_pacing_view_t){.one_class = 1};
    if (!s->x)
        return;
    const gw_h2_sched_t *q = &s->x->sched;
    v->live = q->live_n;
    v->one_class = gw_h2_sched_live_one_class(q);
    if (!gw_list_empty(&q->queue)) {
        const gw_h2_sched_node_t *n = GW_CONTAINER_OF(q->queue.next, gw_h2_sched_node_t, link);
        v->next_sent = GW_CONTAINER_OF(n, gw_h2_stream_t, node)->sent;
    }
    int top = gw_h2_sched_live_top(q);
    if (top < 0)
        return;
    if (top == GW_H2_SCHED_UNRANKED) {
        v->behind = s->x->data_queued;
        return;
    }
    /* the priority queue is sorted, most urgent first: walk from its tail while less urgent
     * than the top, and stop once `enough` is passed */
    for (const gw_list_t *it = q->queue.prev; it != &q->queue && v->behind <= enough;
         it = it->prev) {
        const gw_h2_stream_t *st = GW_CONTAINER_OF(it, gw_h2_stream_t, node.link);
        if (!st->node.tree && st->node.urgency <= top)
            break;
        v->behind += st->queued;
    }
}

#ifdef GW_TEST_API
int64_t gw_h2_session_send_window(const gw_h2_session_t *s, uint32_t stream_id)
{
    if (stream_id == 0)
        return s->conn_send_window;
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    return st ? st->send_window : 0;
}
#endif

int gw_h2_session_set_priority(gw_h2_session_t *s, uint32_t stream_id, int urgency, int incremental)
{
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st || st->state == GW_H2_SS_CLOSED)
        return GW_E_NOENT;
    if (urgency > 7)
        return GW_E_INVAL;
    uint8_t u = urgency < 0 ? st->node.urgency : (uint8_t)urgency;
    int inc = incremental < 0 ? st->node.incremental : incremental != 0;
    gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
    if (urgency >= 0 || incremental >= 0)
        gw_h2__mark_prio9218(s, st);
    return 0;
}

int gw_h2_session_get_priority(const gw_h2_session_t *s, uint32_t stream_id, uint8_t *urgency,
                               int *incremental)
{
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    *urgency = st->node.urgency;
    *incremental = st->node.incremental;
    return 0;
}

int gw_h2_session_set_data_budget(gw_h2_session_t *s, uint32_t stream_id, size_t budget)
{
    if (stream_id == 0) {
        s->data_budget = budget;
        return 0;
    }
    gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    st->data_budget = budget;
    if (budget && st->budget_blocked) {
        st->budget_blocked = 0;
        if (st->state != GW_H2_SS_CLOSED)
            gw_h2_sched_add(&s->x->sched, &st->node);
    }
    return 0;
}

size_t gw_h2_session_data_budget(const gw_h2_session_t *s, uint32_t stream_id)
{
    if (stream_id == 0)
        return s->data_budget;
    const gw_h2_stream_t *st = gw_h2__find_stream(s, stream_id);
    return st ? st->data_budget : 0;
}

size_t gw_h2_session_active_streams(const gw_h2_session_t *s)
{
    return s->active;
}

gw_h2_stats_t gw_h2_session_stats(const gw_h2_session_t *s)
{
    gw_h2_stats_t st;
    if (s->cold)
        st = s->cold->st;
    else
        memset(&st, 0, sizeof(st));
    st.frames_in = s->frames_in;
    st.frames_out = s->frames_out;
    st.streams_opened = s->streams_opened;
    st.priority_evictions = s->x && s->x->tree ? gw_h2_tree_evictions(s->x->tree) : 0;
    return st;
}
