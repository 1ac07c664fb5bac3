/* h2/session.h — the sans-IO HTTP/2 connection engine (RFC 9113), server role.
 *
 * A session is fed the bytes read from the peer (gw_h2_session_recv), fires callbacks for the
 * version-neutral request events, and appends the frames it wants written to a caller-owned
 * output queue (gw_h2_session_send). It never reads a clock, never touches a socket: the caller
 * passes the time to recv/tick and pumps bytes both ways (nghttp2's mem_recv2/mem_send2 split).
 *
 * Pump loop of the IO glue (front/):
 *
 *     n = gw_h2_session_recv(s, buf, len, now);      // fires callbacks; n < 0: connection error
 *     gw_h2_session_send(s, &iovq);                  // GOAWAY is queued even after an error
 *     write iovq; gw_iovq_consume(&iovq, written);
 *     if (gw_h2_session_should_close(s) && iovq.bytes == 0) close the connection;
 *     arm a timer at gw_h2_session_next_deadline(s) and call gw_h2_session_tick() when it fires.
 *
 * Ownership: the session copies nothing it is not asked to keep. Header names/values passed to
 * callbacks live in the stream's arena until the stream is released; DATA payload passed to
 * on_data points into the caller's input buffer (or the session's frame buffer) and is valid
 * only during the callback. DATA submitted for sending is held by reference (gw_rbuf_t) and
 * framed into the iovq without copying the payload.
 *
 * Stream lifetime as seen by the layer above: on_request opens it; on_data/on_end_stream/
 * on_trailers follow; on_close reports that the stream reached the "closed" state (normally or
 * by reset, with the error code). A stream that was reported with on_request keeps its slot —
 * it counts toward SETTINGS_MAX_CONCURRENT_STREAMS — until the layer above calls
 * gw_h2_session_stream_release(), i.e. until its work for the stream is really cancelled
 * (RFC 9113 §5.1.2; defence against rapid reset, CVE-2023-44487). Streams the layer above never
 * saw (refused, malformed before the request was complete) are released by the session itself.
 */
#ifndef GW_H2_SESSION_H
#define GW_H2_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "h2/errors.h"

typedef struct gw_h2_session gw_h2_session_t;
typedef struct gw_h2_profile gw_h2_profile_t;

/* ---- options --------------------------------------------------------------------------- */

/* The first block mirrors gw_cfg_h2_t (config/config.h) field by field, so the front copies
 * them; the rest are engine limits with defaults from gw_h2_options_default(). A zero in any
 * field except header_table_size, max_requests_per_connection and max_pushes means "use the
 * default" (header_table_size 0 really advertises no dynamic table, max_pushes 0 pushes
 * nothing). */
typedef struct {
    unsigned max_concurrent_streams;      /* SETTINGS_MAX_CONCURRENT_STREAMS we send; def. 100 */
    uint32_t initial_window_size;         /* stream receive window we advertise; def. 256 KiB */
    uint32_t connection_window_size;      /* connection receive window we keep; def. 1 MiB */
    uint32_t max_frame_size;              /* SETTINGS_MAX_FRAME_SIZE we advertise; def. 16384 */
    uint32_t header_table_size;           /* HPACK decoder table we allow the peer; def. 4096 */
    uint32_t max_header_list_size;        /* SETTINGS_MAX_HEADER_LIST_SIZE; def. 64 KiB */
    uint64_t settings_timeout_ms;         /* wait for the ACK of our SETTINGS; def. 10 s */
    unsigned max_requests_per_connection; /* then graceful GOAWAY; 0 = unlimited */
    unsigned reset_budget;                /* peer RST_STREAM + resets we send because of peer
                                             errors, per reset_window_ms; def. 100 */
    uint64_t reset_window_ms;             /* window of every budget below; def. 10 s */
    unsigned control_frame_budget;        /* SETTINGS/PING/PRIORITY/WINDOW_UPDATE/PRIORITY_UPDATE
                                             received per window; def. 1000 */
    unsigned empty_frame_budget;          /* empty DATA/HEADERS/CONTINUATION (no END_STREAM) per
                                             window; def. 100 */
    unsigned max_queued_control;          /* our unsent control frames (ACKs, RSTs, ...) before
                                             GOAWAY ENHANCE_YOUR_CALM; def. 1000 */
    unsigned max_priority_nodes;          /* RFC 7540 tree nodes (open streams + idle/closed
                                             placeholders); when full the oldest placeholder
                                             is evicted; def. 2 x max_concurrent_streams */
    unsigned max_pushes;                  /* PUSH_PROMISEs per connection (RFC 9113 §8.4);
                                             def. 32; 0 = never push */
    /* engine-only fields */
    uint32_t encoder_table_size; /* our HPACK encoder table (bounded by the peer's
                                    SETTINGS_HEADER_TABLE_SIZE); def. 4096 */
    size_t max_header_block;     /* buffered compressed bytes of one HEADERS+CONTINUATION
                                    sequence, cuts off endless CONTINUATION;
                                    def. max_header_list_size + 16 KiB */
    unsigned max_continuations;  /* CONTINUATION frames in one sequence; def. 64 */
    int enable_connect_protocol; /* RFC 8441: SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 is sent and
                                    extended CONNECT (with :protocol) accepted; def. 0 */
    size_t writable_lowat;       /* on_writable also when a stream's queued DATA falls to this
                                    many bytes (from above); def. 0: only when it is empty */
} gw_h2_options_t;

/* Fill o with the defaults documented above. */
void gw_h2_options_default(gw_h2_options_t *o);

/* ---- events ---------------------------------------------------------------------------- */

/* name: lowercase, validated (RFC 9113 §8.2). The common field type, so that the layers
 * above pass fields between protocols without converting them. */
typedef gw_field_t gw_h2_header_t;

/* A request head (or, later, a response head in client mode). Absent pseudo-headers are
 * {NULL, 0}. All slices and the headers array live in the stream's arena until the stream is
 * released. Regular fields appear in wire order, without pseudo-headers; cookie crumbs are
 * passed as separate "cookie" fields (the translator joins them, RFC 9113 §8.2.3). */
typedef struct {
    uint32_t stream_id;
    gw_slice_t method, scheme, authority, path;
    gw_slice_t protocol; /* :protocol (RFC 8441 extended CONNECT), if any */
    unsigned status;     /* response heads only; 0 for requests */
    const gw_h2_header_t *headers;
    size_t headers_len;
    int64_t content_length; /* parsed content-length, -1 when absent */
    int end_stream;         /* no body follows */
} gw_h2_head_t;

/* Every callback may be NULL. Callbacks returning int return 0, or a negative GW_E* code:
 * a fatal code (gw_err_is_fatal) makes recv stop and return it after queueing GOAWAY
 * INTERNAL_ERROR; any other negative code resets the stream with INTERNAL_ERROR. Callbacks may
 * call the submit functions of this header and gw_h2_session_stream_release() (the session
 * looks the stream up again after every callback), but must not call recv/send/del. */
typedef struct {
    /* A complete, valid request head on a new stream (RFC 9113 §8.1-§8.3; also: :method a
     * token, :path only RFC 3986 path/query characters, :scheme http or https, :authority
     * RFC 3986 authority characters without userinfo; the rest is reset PROTOCOL_ERROR). */
    int (*on_request)(void *user_data, const gw_h2_head_t *head);
    /* Request body bytes; data valid during the call only. Give the bytes back with
     * gw_h2_session_consume() once passed on, or the peer's window stays closed. */
    int (*on_data)(void *user_data, uint32_t stream_id, const uint8_t *data, size_t len);
    /* Trailers (validated: no pseudo-headers); end of stream follows at once. */
    int (*on_trailers)(void *user_data, uint32_t stream_id, const gw_h2_header_t *h, size_t n);
    /* The peer finished its side of the stream (END_STREAM seen, content-length checked). */
    int (*on_end_stream)(void *user_data, uint32_t stream_id);
    /* The stream closed: error_code NO_ERROR for a normal close, else the RST_STREAM code
     * (by_peer says who reset it). Call gw_h2_session_stream_release() when done with it. */
    void (*on_close)(void *user_data, uint32_t stream_id, uint32_t error_code, int by_peer);
    /* The stream's send window (or the connection's) opened while it had data waiting, or
     * its queue fell to zero or to options.writable_lowat: the layer above may submit more
     * DATA. */
    void (*on_writable)(void *user_data, uint32_t stream_id);
    /* The peer sent GOAWAY. A server opens no streams, so this is informational: the peer
     * opens no new streams, the open ones finish, then should_close turns 1. debug valid
     * during the call only. */
    void (*on_goaway)(void *user_data, uint32_t last_stream_id, uint32_t error_code,
                      gw_slice_t debug);
    /* PRIORITY_UPDATE (RFC 9218 §7.1) or the priority field of a request; value is the raw
     * Priority field value ("u=3, i"), valid during the call only. Informational: the
     * session applies both to its scheduler itself (gw_h2_session_set_priority), a
     * PRIORITY_UPDATE before this call. */
    void (*on_priority)(void *user_data, uint32_t stream_id, gw_slice_t value);
    /* A request the session answered or reset itself, never reported with on_request (for the
     * access log: every request gets one line): malformed (RFC 9113 §8.1.1, the rules of
     * on_request; error_code PROTOCOL_ERROR), refused (§5.1.2, past
     * SETTINGS_MAX_CONCURRENT_STREAMS or after our GOAWAY; REFUSED_STREAM), or a header list
     * past SETTINGS_MAX_HEADER_LIST_SIZE (status 431, error_code NO_ERROR: a RST_STREAM
     * follows the 431 only when the request had not ended). head holds what was decoded of it (any
     * field may be absent; valid during the call only); reason is static (NULL for a refusal).
     * Informational: the callback must not call into the session. */
    void (*on_refused)(void *user_data, const gw_h2_head_t *head, unsigned status,
                       uint32_t error_code, const char *reason);
} gw_h2_callbacks_t;

/* ---- stream states (RFC 9113 §5.1) ------------------------------------------------------ */

typedef enum {
    GW_H2_SS_IDLE = 0,
    GW_H2_SS_RESERVED_LOCAL,
    GW_H2_SS_RESERVED_REMOTE,
    GW_H2_SS_OPEN,
    GW_H2_SS_HALF_CLOSED_LOCAL,
    GW_H2_SS_HALF_CLOSED_REMOTE,
    GW_H2_SS_CLOSED,
} gw_h2_stream_state_t;

/* ---- counters for logs ------------------------------------------------------------------ */

typedef struct {
    uint64_t frames_in, frames_out;
    uint64_t streams_opened;     /* requests seen */
    uint64_t streams_refused;    /* REFUSED_STREAM (concurrency, GOAWAY sent) */
    uint64_t resets_received;    /* RST_STREAM from the peer */
    uint64_t resets_sent;        /* RST_STREAM we sent */
    uint64_t resets_provoked;    /* ... of which because of peer errors (MadeYouReset) */
    uint64_t malformed_requests; /* stream PROTOCOL_ERROR from §8 validation */
    /* cap hits */
    uint64_t reset_budget_hits;   /* rapid reset -> GOAWAY ENHANCE_YOUR_CALM */
    uint64_t control_flood_hits;  /* SETTINGS/PING/PRIORITY/WINDOW_UPDATE flood */
    uint64_t discarded_blocks;    /* header blocks on streams we reset: decoded, not kept */
    uint64_t window_walks;        /* SETTINGS_INITIAL_WINDOW_SIZE changes applied to the streams */
    uint64_t empty_frame_hits;    /* empty DATA/HEADERS/CONTINUATION flood */
    uint64_t queued_control_hits; /* peer does not read our control frames */
    uint64_t header_list_hits;    /* header list above max_header_list_size */
    uint64_t header_block_hits;   /* buffered header block / CONTINUATION cap */
    uint64_t max_requests_hits;   /* max_requests_per_connection reached */
    uint64_t settings_timeouts;   /* no SETTINGS ACK in time */
    uint64_t priority_evictions;  /* RFC 7540 placeholders evicted at max_priority_nodes */
    uint64_t pushes_promised;     /* PUSH_PROMISE sent */
    uint64_t pushes_cancelled;    /* pushed streams the peer reset (RFC 9113 §8.4.2) */
} gw_h2_stats_t;

/* ---- lifetime ---------------------------------------------------------------------------- */

/* Options and callbacks for many sessions (a worker's connections), checked and copied once
 * instead of into every session. opts NULL = defaults (zero budget fields take their
 * defaults); cb is copied. The profile also keeps the memory of closed streams for the next
 * ones of its sessions (a bounded freelist), so a profile and its sessions are used by one
 * thread at a time. Returns 0 and *out, or GW_E_NOMEM / GW_E_INVAL (an option out of the
 * RFC's range). */
int gw_h2_profile_new(gw_h2_profile_t **out, const gw_h2_options_t *opts,
                      const gw_h2_callbacks_t *cb);
/* Free a profile; every session created with it must be deleted first. NULL is ignored. */
void gw_h2_profile_del(gw_h2_profile_t *p);

/* A new server session with the options and callbacks of p, which must outlive it; user_data
 * is passed to every callback. now_ms starts the SETTINGS ACK timer. Our SETTINGS frame and the
 * connection WINDOW_UPDATE are queued at once (the server preface, RFC 9113 §3.4). Returns 0
 * and *out, or GW_E_NOMEM. */
int gw_h2_session_new_with(gw_h2_session_t **out, gw_h2_profile_t *p, void *user_data,
                           uint64_t now_ms);

/* The same with a profile of its own, made from opts and cb as gw_h2_profile_new does and freed
 * with the session. Returns 0 and *out, or GW_E_NOMEM / GW_E_INVAL. */
int gw_h2_session_new(gw_h2_session_t **out, const gw_h2_options_t *opts,
                      const gw_h2_callbacks_t *cb, void *user_data, uint64_t now_ms);

/* Free the session, its streams, their arenas and every queued reference. No callbacks fire.
 * NULL is ignored. */
void gw_h2_session_del(gw_h2_session_t *s);

/* Idle connection: give back the memory held for streams, header blocks and output (the stream
 * table and scheduler, the header block, encoding and Huffman buffers, the emptied control
 * frame buffer) when none of it is in use. Everything the peer relies on stays: settings,
 * windows, HPACK dynamic tables, abuse budgets, recently reset streams, and, when present,
 * RFC 9218 updates for streams not opened yet and the RFC 7540 priority tree (the stream part
 * is kept while either exists). Later input and submits allocate again as needed; nothing
 * changes on the wire. Cheap when there is nothing to give back. */
void gw_h2_session_compact(gw_h2_session_t *s);

/* ---- input ------------------------------------------------------------------------------- */

/* Consume len bytes read from the peer (the client preface first), firing callbacks. Input is
 * always consumed entirely: an incomplete frame is kept inside the session (at most the frame
 * size we advertised + 9 bytes), so the caller may reuse buf at once. Returns len, or a negative
 * code on a connection error: GW_E_PROTO (PROTOCOL_ERROR, FRAME_SIZE_ERROR, STREAM_CLOSED...),
 * GW_E_FLOW, GW_E_COMPRESSION, GW_E_CALM (an abuse limit), GW_E_NOMEM, GW_E_TIMEOUT; GOAWAY is
 * then queued (gw_h2_session_goaway_code tells which) and want_read is 0. Once the session is
 * closing for an error, further calls return GW_E_CLOSED. */
ssize_t gw_h2_session_recv(gw_h2_session_t *s, const uint8_t *buf, size_t len, uint64_t now_ms);

/* Handle timers due at now_ms (SETTINGS ACK timeout -> GOAWAY SETTINGS_TIMEOUT, budget windows).
 * Returns 0 or the connection error as recv does. */
int gw_h2_session_tick(gw_h2_session_t *s, uint64_t now_ms);

/* The next time tick() has work, or UINT64_MAX for none. */
uint64_t gw_h2_session_next_deadline(const gw_h2_session_t *s);

/* ---- output ------------------------------------------------------------------------------- */

/* Append every frame that can be written now to q: control frames first (SETTINGS, ACKs,
 * RST_STREAM, WINDOW_UPDATE, GOAWAY), then HEADERS, then DATA picked by the scheduler within
 * the connection and stream send windows and the peer's SETTINGS_MAX_FRAME_SIZE. Frame headers
 * and header blocks are copied into q; DATA payload is referenced (gw_iovq_ref). Returns the
 * number of bytes appended (0 = nothing to send), or GW_E_NOMEM (the session is then
 * unusable: close the connection). */
ssize_t gw_h2_session_send(gw_h2_session_t *s, gw_iovq_t *q);
/* gw_h2_session_send() that asks the scheduler for DATA only until data_max payload bytes
 * are framed by this call (the last frame may pass it by less than the peer's
 * SETTINGS_MAX_FRAME_SIZE; with 0 no DATA is framed, nor an END_STREAM or trailers that wait
 * in the scheduler). Control frames and header blocks already encoded always go. The rest
 * stays queued: a caller that frames only what the socket is about to take lets the
 * scheduler decide as late as it can, so a more urgent stream that becomes ready meanwhile
 * goes ahead of what a larger call would have framed. Same returns as gw_h2_session_send(). */
ssize_t gw_h2_session_send_some(gw_h2_session_t *s, gw_iovq_t *q, size_t data_max);

/* Non-zero while the session wants more input (0 after GOAWAY both ways or a connection
 * error). */
int gw_h2_session_want_read(const gw_h2_session_t *s);
/* Non-zero when gw_h2_session_send() would append something. */
int gw_h2_session_want_write(const gw_h2_session_t *s);
/* Non-zero when the connection is finished: close it once q has been flushed. */
int gw_h2_session_should_close(const gw_h2_session_t *s);

/* Our side of the connection's life, in order (RFC 9113 §6.8): each phase only moves forward,
 * except that a graceful shutdown's PING round trip ends in GOAWAY_SENT (or, when the final
 * GOAWAY cannot be queued, back in OPEN). The peer's GOAWAY and SETTINGS are tracked apart. */
typedef enum {
    GW_H2_CONN_OPEN = 0,         /* new streams accepted */
    GW_H2_CONN_SHUTDOWN_PENDING, /* first GOAWAY (last id 2^31-1) + PING sent, awaiting ACK */
    GW_H2_CONN_GOAWAY_SENT,      /* final GOAWAY queued: no new streams, the open ones finish */
    GW_H2_CONN_CLOSING,          /* connection error: GOAWAY queued, flush and close */
} gw_h2_conn_phase_t;
/* "open", "shutdown_pending", "goaway_sent", "closing". */
const char *gw_h2_conn_phase_str(gw_h2_conn_phase_t p);
gw_h2_conn_phase_t gw_h2_session_phase(const gw_h2_session_t *s);

/* The GOAWAY error code we queued (or 0 when none) and its static reason for the log
 * (may be NULL). */
uint32_t gw_h2_session_goaway_code(const gw_h2_session_t *s, const char **reason);

/* ---- submitting (server side) ------------------------------------------------------------ */

/* Queue the response head for stream_id: :status then fields (lowercase names, no
 * connection-specific fields; the caller's slices are encoded at once, nothing is kept).
 * status 100-199 sends an interim head (may be repeated, end_stream must be 0). end_stream 1
 * means no body. Returns 0, GW_E_NOENT (no such stream or already closed locally), GW_E_INVAL
 * (bad status, or a final head already sent), GW_E_NOMEM (the HPACK encoder state may then be
 * out of step with the peer, so the session fails the connection: GOAWAY INTERNAL_ERROR). */
int gw_h2_session_submit_response(gw_h2_session_t *s, uint32_t stream_id, unsigned status,
                                  const gw_h2_header_t *fields, size_t n, int end_stream);

/* Queue len bytes of buf (from buf->data + off) as response body; the session takes its own
 * reference on buf and frames the bytes without copying when the windows allow. len may be 0
 * with end_stream 1 to end the body. Returns 0, GW_E_NOENT, GW_E_INVAL (no response head yet,
 * or the body already ended), GW_E_NOMEM. */
int gw_h2_session_submit_data(gw_h2_session_t *s, uint32_t stream_id, gw_rbuf_t *buf, size_t off,
                              size_t len, int end_stream);

/* Queue trailers after the body; ends the stream. Same returns as submit_data. */
int gw_h2_session_submit_trailers(gw_h2_session_t *s, uint32_t stream_id,
                                  const gw_h2_header_t *fields, size_t n);

/* Reset the stream with error_code (e.g. CANCEL, INTERNAL_ERROR); queued DATA is dropped.
 * on_close fires. Returns 0 or GW_E_NOENT (unknown or already closed). */
int gw_h2_session_submit_rst(gw_h2_session_t *s, uint32_t stream_id, uint32_t error_code);

/* ---- server push (RFC 9113 §8.4) ------------------------------------------------------------ */

/* Whether a PUSH_PROMISE may be sent now: 0, GW_E_UNSUPPORTED (the peer's SETTINGS_ENABLE_PUSH
 * is 0), GW_E_CLOSED (a GOAWAY went either way, or the session is closing), GW_E_LIMIT
 * (max_pushes promised on this connection, as many pushed streams open as the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS, or the stream ids are used up). */
int gw_h2_session_can_push(const gw_h2_session_t *s);

/* Promise the response to `req` (method, scheme, authority, path and regular fields with
 * lowercase names; the rest of the head is ignored) on client stream parent_id: a PUSH_PROMISE
 * (+ CONTINUATION) is queued at once, before any frame submitted later, so a caller that
 * promises before it submits the parent's response head has the promise precede every frame
 * that refers to it (§8.4.1). The new stream (even id, *promised_id) is reserved (local); it
 * behaves as a stream the layer above got through on_request: it answers with
 * gw_h2_session_submit_response (final status only; the stream becomes half-closed (remote)),
 * DATA and trailers, gets on_writable and on_close (the peer may reset it, §8.4.2), and
 * releases it. It holds none of our SETTINGS_MAX_CONCURRENT_STREAMS slots. Its priority: a
 * dependant of the parent in an RFC 7540 tree, else the parent's RFC 9218 urgency + 1. The
 * same authority and path are promised at most once per connection. *stored (if not NULL)
 * gets a copy of the request kept with the stream until it is released (end_stream 1).
 * Returns 0, the codes of can_push, GW_E_NOENT (parent unknown, not a client stream, closed
 * for sending or reset), GW_E_EXIST (promised before), GW_E_INVAL (no method, scheme,
 * authority, a path not starting with '/', a pseudo or uppercase field name, more than 64
 * fields), GW_E_NOMEM (when the encoding failed the connection fails, as for a response). */
int gw_h2_session_submit_push(gw_h2_session_t *s, uint32_t parent_id, const gw_h2_head_t *req,
                              uint32_t *promised_id, const gw_h2_head_t **stored);

/* Graceful shutdown (RFC 9113 §6.8): GOAWAY NO_ERROR with last-stream-id 2^31-1 and a PING;
 * when the PING ACK comes back (or at once, if final), GOAWAY with the real last-stream-id.
 * No new streams are accepted after the final GOAWAY; open ones finish; then should_close.
 * Returns 0 or GW_E_NOMEM. */
int gw_h2_session_shutdown(gw_h2_session_t *s, int final);

/* Immediate connection error from the layer above: GOAWAY(last stream id, error_code, debug)
 * and close after flush. debug is copied (truncated to 256 bytes). 0 or GW_E_NOMEM. */
int gw_h2_session_terminate(gw_h2_session_t *s, uint32_t error_code, const char *debug);

/* ---- flow control and stream bookkeeping --------------------------------------------------- */

/* The layer above passed n request body bytes of stream_id on: credit them to the stream and
 * connection receive windows. WINDOW_UPDATE is queued once at least half of a window has been
 * consumed (batching). stream_id 0 credits the connection only. Bytes of a stream that closed
 * were already credited to the connection when it closed, so they are not counted twice.
 * Returns 0, GW_E_NOENT (unknown or released stream: nothing is credited), GW_E_NOMEM. */
int gw_h2_session_consume(gw_h2_session_t *s, uint32_t stream_id, size_t n);

/* The layer above is done with a stream it got through on_request (its work is finished or
 * cancelled): free the arena and the slot. Returns 0 or GW_E_NOENT. */
int gw_h2_session_stream_release(gw_h2_session_t *s, uint32_t stream_id);

/* State of a stream (IDLE for ids never used, CLOSED for closed or forgotten ones). */
gw_h2_stream_state_t gw_h2_session_stream_state(const gw_h2_session_t *s, uint32_t stream_id);

/* Opaque per-stream pointer for the layer above (0/GW_E_NOENT; get returns NULL if none). */
int gw_h2_session_set_stream_data(gw_h2_session_t *s, uint32_t stream_id, void *data);
void *gw_h2_session_get_stream_data(const gw_h2_session_t *s, uint32_t stream_id);

/* Bytes of DATA submitted on stream_id and not framed yet (for the proxy's buffer bound). */
size_t gw_h2_session_stream_queued(const gw_h2_session_t *s, uint32_t stream_id);
/* The same summed over every stream: DATA bytes submitted and not framed yet. */
size_t gw_h2_session_data_queued(const gw_h2_session_t *s);

/* What the writer's pacing asks (front/h2_stream.c): whether framing all the DATA queued now
 * could put a less urgent response ahead of a more urgent one (RFC 9218 §10) that is still to
 * come from its origin or behind a window. */
typedef struct {
    uint32_t live;      /* streams with a response still to send (queued or not) */
    int one_class;      /* 1: all of them at one urgency (or at most one live) */
    size_t behind;      /* DATA queued on streams less urgent than the most urgent live one
                         * (all of it when the order is not by urgency: RFC 7540 tree, round
                         * robin), counted up to `enough` + 1 */
    uint64_t next_sent; /* DATA already framed on the stream that sends next (0: none) */
} gw_h2_pacing_view_t;
void gw_h2_session_pacing_view(const gw_h2_session_t *s, size_t enough, gw_h2_pacing_view_t *v);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* Current send window of stream_id (0 = the connection's); may be negative after a
 * SETTINGS_INITIAL_WINDOW_SIZE decrease (RFC 9113 §6.9.2). */
int64_t gw_h2_session_send_window(const gw_h2_session_t *s, uint32_t stream_id);
#endif

/* RFC 9218 priority of stream_id, e.g. from the origin's `priority` response field (§8).
 * urgency 0-7 or -1 to keep the current one; incremental 0/1 or -1 to keep it. The session
 * applies the request's `priority` field when the stream opens and PRIORITY_UPDATE frames
 * (§7.1) by itself; this call overrides them (a later PRIORITY_UPDATE overrides this one).
 * Queued DATA is re-scheduled at once. Returns 0, GW_E_NOENT (unknown or closed stream),
 * GW_E_INVAL (urgency above 7). */
int gw_h2_session_set_priority(gw_h2_session_t *s, uint32_t stream_id, int urgency,
                               int incremental);

/* Current priority of stream_id (default u=3, not incremental). 0 or GW_E_NOENT. */
int gw_h2_session_get_priority(const gw_h2_session_t *s, uint32_t stream_id, uint8_t *urgency,
                               int *incremental);
/* Bandwidth hook (the front's token buckets): at most `budget` more DATA payload
 * bytes are framed by gw_h2_session_send() — on the whole connection for stream_id 0, on that
 * stream otherwise — and each budget goes down by what is framed. SIZE_MAX (the default) means
 * no limit. A DATA frame is cut to fit the budget; with the connection budget at 0, send()
 * frames no DATA at all (as with a closed connection window; control frames and HEADERS are
 * not counted, and do not wait), and
 * want_write() does not report DATA held back by a budget, so the caller wakes itself (timer)
 * and sets a new budget. A stream held back by its own budget is queued again when its budget
 * becomes non-zero. Returns 0, or GW_E_NOENT (unknown stream). */
int gw_h2_session_set_data_budget(gw_h2_session_t *s, uint32_t stream_id, size_t budget);

/* What is left of the budget of stream_id (0 = the connection's): SIZE_MAX when unlimited, 0
 * for an unknown stream. */
size_t gw_h2_session_data_budget(const gw_h2_session_t *s, uint32_t stream_id);

/* Streams counted toward our concurrency limit (open, half-closed, or closed but unreleased). */
size_t gw_h2_session_active_streams(const gw_h2_session_t *s);

/* Counters since the session was created (a copy). */
gw_h2_stats_t gw_h2_session_stats(const gw_h2_session_t *s);

#endif
