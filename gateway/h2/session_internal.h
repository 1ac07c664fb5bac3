/* h2/session_internal.h — what the files of the HTTP/2 session share (not a public interface).
 *
 * session.c:  the session's lifetime, connection errors (GOAWAY) and the budgets that lead to
 *             them, timers, shutdown, the public getters and setters.
 * stream.c:   the stream store: blocks and arenas, lookup, state transitions, reset ids, and
 *             the priorities of a stream (RFC 9218, RFC 7540 tree).
 * validate.c: request validation (RFC 9113 §8.1-§8.3) over a decoded header block.
 * inbound.c:  the input state machine and every inbound frame type.
 * send.c:     submitting (responses, DATA, trailers, RST_STREAM, push promises) and
 *             framing into the caller's iovq.
 */
#ifndef GW_H2_SESSION_INTERNAL_H
#define GW_H2_SESSION_INTERNAL_H

#include "common/list.h"
#include "common/pool.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/sched.h"
#include "h2/session.h"
#include "h2/tree.h"

/* WINDOW_UPDATEs earned by DATA frames sent, at most (a peer cannot bank more than this). */
#define GW_H2_WU_EARNED_MAX 4096u
#define SHUTDOWN_PING "h2gate\x00\x01"
#define MAX_DEBUG 256

typedef enum { IN_PREFACE = 0, IN_HDR, IN_PAYLOAD, IN_DEAD } in_state_t;

/* ---- arena: bump allocator in a chain of blocks, freed in one go ---------------------- */

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    size_t borrowed; /* lives in its owner's allocation (a stream's first block): not freed */
    uint8_t data[];
} arena_blk_t;

typedef struct {
    arena_blk_t *head;
} arena_t;

/* ---- streams -------------------------------------------------------------------------- */

typedef struct data_chunk {
    gw_list_t link;
    gw_rbuf_t *buf;
    size_t off, len; /* what is left to frame */
} data_chunk_t;

typedef struct gw_h2_stream {
    gw_list_t link; /* session's streams */
    uint32_t id;
    gw_h2_stream_state_t state;
    unsigned seen : 1;       /* reported through on_request: released by the layer above */
    unsigned rst_sent : 1;   /* we reset it: ignore what follows (RFC 9113 §5.1 closed) */
    unsigned head_sent : 1;  /* final response head queued */
    unsigned eos_queued : 1; /* the body end was submitted (DATA end_stream or trailers) */
    unsigned has_trailers : 1;
    unsigned blocked : 1;        /* data waiting on the stream send window */
    unsigned budget_blocked : 1; /* data waiting on the stream's data budget */
    unsigned prio9218 : 1;       /* has an RFC 9218 signal: never scheduled by the 7540 tree */
    unsigned pushed : 1;         /* promised by us (even id, RFC 9113 §8.4) */
    unsigned push_open : 1;      /* pushed and not closed: counted in push->open */
    unsigned cached : 1;         /* put in the session's cache (its slot may point to it) */
    size_t data_budget;          /* DATA payload bytes it may still frame; SIZE_MAX = no limit */
    int64_t send_window;
    int64_t recv_window;      /* what the peer may still send */
    uint64_t recv_unconsumed; /* delivered, not yet given back with consume() */
    uint64_t recv_pending;    /* consumed, not yet announced with WINDOW_UPDATE */
    int64_t content_length;
    uint64_t data_recv;
    size_t queued; /* DATA bytes submitted and not framed */
    uint64_t sent; /* DATA payload bytes framed (the writer's pacing of a lone stream) */
    gw_list_t chunks;
    gw_bytes_t trailers; /* trailer fields as submitted (see pack_fields), HPACK-encoded only
                          * when framed: the encoder's table follows the wire order */
    gw_h2_sched_node_t node;
    arena_t arena;
    void *data;
    data_chunk_t chunk0; /* the first DATA chunk queued lives here (chunk0_used) */
    int chunk0_used;
} gw_h2_stream_t;

/* A stream and the first block of its arena are one allocation, a stream block: a usual
 * request's header fields are decoded into the block before the stream exists, and the block
 * becomes the stream, so opening a stream takes no allocation of its own. Closed streams' blocks
 * wait on the profile's freelist for the next stream of any of its sessions (malloc and free
 * of a 1.3 KiB block, too large for glibc's per-thread cache, cost more than the HPACK decoding
 * of a request). */
#define STREAM_ARENA0 1024
#define STREAM_BLK_OFF ((sizeof(gw_h2_stream_t) + 15) & ~(size_t)15)
#define STREAM_BLK_SIZE (STREAM_BLK_OFF + sizeof(arena_blk_t) + STREAM_ARENA0)
#define STREAM_FREE_KEEP GW_POOL_KEEP /* blocks kept on a profile's freelist (~650 KiB) */

typedef struct {
    uint32_t stream_id;
    uint8_t urgency;
    uint8_t incremental;
} prio_pending_t;

/* What a session needs only while streams are open, a header block or a split frame is being
 * read, or RFC 7540/9218 priority state waits for streams: allocated when first needed, given
 * back by gw_h2_session_compact() once all of it is empty again. */
#define STREAM_CACHE 16 /* power of two */

typedef struct {
    /* What a response touches (its stream's lookup, DATA accounting, the header block's
     * encoding, the scheduler), first and together: the part stays allocated while a request
     * waits for its origin, cold by the time the answer comes. */
    gw_list_t streams;
    size_t data_queued; /* DATA payload bytes submitted on every stream and not framed yet */
    /* RFC 7540 §5.3 tree, created on the first PRIORITY frame or HEADERS priority (none
     * before: no tree work for clients that do not send them); sched.tree points to it */
    gw_h2_tree_t *tree;
    gw_bytes_t scratch; /* header block encoding */
    gw_h2_sched_t sched;
    gw_bytes_t in; /* a payload split across recv calls */

    /* header block being gathered (hb_sid in the session) */
    int hb_end_stream;
    int hb_reject;  /* 1: stream error already decided (e.g. self-dependency); 2: ignore */
    int hb_has_pri; /* the HEADERS frame had the PRIORITY flag (RFC 7540 §6.2) */
    gw_h2_priority_t hb_pri;
    unsigned hb_frames;
    gw_bytes_t hb;

    /* RFC 9218 §7.1: PRIORITY_UPDATE frames about streams not opened yet, applied when they
     * open; a ring of at most max_concurrent_streams entries (the oldest is dropped) */
    prio_pending_t *prio_pend;
    size_t prio_pend_n, prio_pend_head;
    /* Streams by id, direct-mapped on (id >> 1) % STREAM_CACHE: a client's open streams have
     * consecutive odd ids, so up to 16 of them never share a slot and a lookup does not walk
     * the list (each step a stream block of its own, a cache miss when cold). A miss walks the
     * list and takes the slot. A stream alone on the session is found from the list head and
     * takes no slot: a connection with one request at a time never reads these lines. */
    struct gw_h2_stream *cache[STREAM_CACHE];
} sess_ext_t;

#define RECENT_RST 16
#define COUNT(s, f) (gw_h2__cold(s)->f++)

/* ---- request validation (RFC 9113 §8.1-§8.3) ------------------------------------------- */

typedef struct {
    gw_h2_session_t *s;
    arena_t *arena;
    int trailers;
    int connect_protocol; /* we sent SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3) */
    int malformed;
    const char *why;
    int nomem;
    int regular_seen;
    gw_h2_head_t head;
    gw_h2_header_t *h;
    size_t n, cap;
    gw_slice_t priority;
} decode_ctx_t;

/* Server push (RFC 9113 §8.4), allocated with the first PUSH_PROMISE of a connection. */
typedef struct {
    uint32_t last_id;  /* the last promised stream id (even; 0 before the first) */
    uint32_t promised; /* PUSH_PROMISEs sent (at most max_pushes) */
    uint32_t open;     /* pushed streams not closed: reserved or half-closed (remote) */
    uint32_t held;     /* pushed streams not released yet (they hold no client slot) */
    uint64_t seen[];   /* keys of the promised authority + path, `promised` of them */
} push_state_t;

/* What a session allocates only when used (most connections never do): the counters other
 * than the hot three, and the push state. */
typedef struct {
    gw_h2_stats_t st;
    push_state_t *push; /* NULL until the first promise */
} cold_t;

/* Options (defaults filled in) and callbacks: one copy for all the sessions of a worker. */
struct gw_h2_profile {
    gw_h2_options_t o;
    gw_h2_callbacks_t cb;
    gw_pool_t blocks; /* stream blocks (STREAM_BLK_SIZE) of every session of the profile */
    /* the Huffman string buffers of every session's decoder (a profile serves one thread):
     * warm for each request, instead of one cold pair per connection */
    gw_hpack_strbufs_t strbufs;
};

/* The connection state proper: what an idle connection keeps (settings, windows, HPACK
 * tables, budgets). Kept small, with narrow fields: it is the per-connection cost of thousands
 * of idle clients. */
struct gw_h2_session {
    gw_h2_profile_t *p;
    void *user_data;
    sess_ext_t *x;        /* NULL while idle */
    cold_t *cold;         /* counters other than the three below, and push, on first use */
    uint32_t *recent_rst; /* RECENT_RST streams we reset and forgot, on the first reset */
    gw_hpack_dec_t dec;
    gw_hpack_enc_t enc;
    gw_bytes_t out;
    uint64_t frames_in, frames_out, streams_opened;

    uint64_t settings_sent_ms;
    int64_t conn_send_window;
    int64_t conn_recv_window;
    uint64_t conn_recv_pending;
    /* budgets, one window for all */
    uint64_t budget_start_ms;
    uint32_t resets_in_window, control_in_window, empty_in_window;
    /* WINDOW_UPDATEs the peer may send without counting as control frames: two (stream and
     * connection) per DATA frame sent, capped (inbound.c) */
    uint32_t wu_earned;

    uint32_t hb_sid; /* 0 = none; else CONTINUATION expected until END_HEADERS */
    uint32_t active; /* streams holding a slot */
    uint32_t last_peer_id;
    uint32_t requests;
    /* peer settings */
    uint32_t peer_initial_window;
    uint32_t peer_max_frame;
    uint32_t peer_max_header_list;
    uint32_t ctrl_queued;
    size_t data_budget; /* DATA payload bytes all streams may still frame; SIZE_MAX = no limit */

    gw_h2_frame_hdr_t hdr;
    uint8_t hdr_buf[GW_H2_FRAME_HDR_LEN];
    uint8_t in_state; /* in_state_t */
    uint8_t preface_pos;
    uint8_t hdr_have;
    uint8_t recent_rst_pos;
    unsigned got_settings : 1;
    unsigned settings_acked : 1;
    uint8_t phase; /* gw_h2_conn_phase_t: our side's shutdown */
    unsigned peer_goaway : 1;
    unsigned peer_no_push : 1; /* SETTINGS_ENABLE_PUSH = 0 (RFC 9113 §6.5.2) */
    unsigned owns_profile : 1; /* created by gw_h2_session_new: p is ours to free */
    uint32_t goaway_code;
    int fatal_rc;
    uint32_t peer_max_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS: bounds open pushed streams */
    const char *goaway_reason;
};

/* The push state of s, NULL before the first promise. */
static inline push_state_t *gw_h2__push(const gw_h2_session_t *s)
{
    return s->cold ? s->cold->push : NULL;
}

/* session.c */
gw_h2_stats_t *gw_h2__cold(gw_h2_session_t *s);
cold_t *gw_h2__cold_part(gw_h2_session_t *s); /* NULL when out of memory */
sess_ext_t *gw_h2__ext(gw_h2_session_t *s);
int gw_h2__conn_error_rc(gw_h2_session_t *s, uint32_t code, const char *reason, int rc);
int gw_h2__conn_error(gw_h2_session_t *s, uint32_t code, const char *reason);
int gw_h2__nomem(gw_h2_session_t *s);
int gw_h2__ctrl_check(gw_h2_session_t *s);
void gw_h2__roll_budget(gw_h2_session_t *s, uint64_t now);
int gw_h2__count_reset(gw_h2_session_t *s);
int gw_h2__count_control_n(gw_h2_session_t *s, size_t n);
int gw_h2__count_control(gw_h2_session_t *s);
int gw_h2__count_empty(gw_h2_session_t *s);
int gw_h2__credit_conn(gw_h2_session_t *s, uint64_t n);
int gw_h2__stream_error(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st, uint32_t code,
                        int provoked);

/* stream.c */
void *gw_h2__arena_alloc(arena_t *a, size_t n);
void gw_h2__arena_free(arena_t *a);
void gw_h2__chunk_free(gw_h2_stream_t *st, data_chunk_t *c);
gw_h2_stream_t *gw_h2__find_stream(const gw_h2_session_t *s, uint32_t id);
void gw_h2__drop_chunks(gw_h2_session_t *s, gw_h2_stream_t *st);
void gw_h2__stream_free(gw_h2_session_t *s, gw_h2_stream_t *st);
void *gw_h2__blk_get(gw_h2_session_t *s, arena_t *a);
gw_h2_stream_t *gw_h2__stream_new(gw_h2_session_t *s, uint32_t id, void *blk, arena_t *a);
int gw_h2__prio_pending_put(gw_h2_session_t *s, uint32_t sid, uint8_t u, uint8_t inc);
void gw_h2__mark_prio9218(gw_h2_session_t *s, gw_h2_stream_t *st);
int gw_h2__apply_7540(gw_h2_session_t *s, uint32_t sid, const gw_h2_priority_t *p);
void gw_h2__apply_open_priority(gw_h2_session_t *s, gw_h2_stream_t *st, gw_slice_t field);
void gw_h2__remember_rst(gw_h2_session_t *s, uint32_t sid);
int gw_h2__recently_reset(const gw_h2_session_t *s, uint32_t sid);
void gw_h2__close_stream(gw_h2_session_t *s, gw_h2_stream_t *st, uint32_t code, int by_peer);
void gw_h2__local_end(gw_h2_session_t *s, gw_h2_stream_t *st);
int gw_h2__remote_end(gw_h2_session_t *s, gw_h2_stream_t *st);

/* validate.c */
void gw_h2__bad(decode_ctx_t *c, const char *why);
int gw_h2__on_field(void *ud, const gw_hpack_field_t *f);
void gw_h2__check_request(decode_ctx_t *c);

/* send.c */
/* Encode f[0..n) as HEADERS (promised 0) or PUSH_PROMISE (promised: the promised id) on sid,
 * with CONTINUATIONs within the peer's frame size, into s->out. */
int gw_h2__write_block(gw_h2_session_t *s, uint32_t sid, const gw_hpack_field_t *f, size_t n,
                       int end_stream, uint32_t promised);

#endif
