/* h2/session.c — HTTP/2 server session: preface, SETTINGS, streams, flow control, limits.
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
#include "h2/session.h"

#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/list.h"
#include "common/pool.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/priority.h"
#include "h2/sched.h"
#include "h2/tree.h"

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

static void *arena_alloc(arena_t *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 2048 ? n : 2048;
        arena_blk_t *b = gw_malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        b->borrowed = 0;
        a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_free(arena_t *a)
{
    while (a->head) {
        arena_blk_t *n = a->head->next;
        if (!a->head->borrowed)
            gw_free(a->head);
        a->head = n;
    }
}

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
    size_t data_budget;          /* DATA payload bytes it may still frame; SIZE_MAX = no limit */
    int64_t send_window;
    int64_t recv_window;      /* what the peer may still send */
    uint64_t recv_unconsumed; /* delivered, not yet given back with consume() */
    uint64_t recv_pending;    /* consumed, not yet announced with WINDOW_UPDATE */
    int64_t content_length;
    uint64_t data_recv;
    size_t queued; /* DATA bytes submitted and not framed */
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

/* The arena block inside a stream block. */
static arena_blk_t *blk_arena(void *blk)
{
    return (arena_blk_t *)((uint8_t *)blk + STREAM_BLK_OFF);
}

static void chunk_free(gw_h2_stream_t *st, data_chunk_t *c)
{
    gw_rbuf_unref(c->buf);
    if (c == &st->chunk0)
        st->chunk0_used = 0;
    else
        gw_free(c);
}

typedef struct {
    uint32_t stream_id;
    uint8_t urgency;
    uint8_t incremental;
} prio_pending_t;

/* Options (defaults filled in) and callbacks: one copy for all the sessions of a worker. */
struct gw_h2_profile {
    gw_h2_options_t o;
    gw_h2_callbacks_t cb;
    gw_pool_t blocks; /* stream blocks (STREAM_BLK_SIZE) of every session of the profile */
};

/* What a session needs only while streams are open, a header block or a split frame is being
 * read, or RFC 7540/9218 priority state waits for streams: allocated when first needed, given
 * back by gw_h2_session_compact() once all of it is empty again. */
#define STREAM_CACHE 16 /* power of two */

typedef struct {
    gw_list_t streams;
    /* Streams by id, direct-mapped on (id >> 1) % STREAM_CACHE: a client's open streams have
     * consecutive odd ids, so up to 16 of them never share a slot and a lookup does not walk
     * the list (each step a stream block of its own, a cache miss when cold). A miss walks the
     * list and takes the slot. */
    struct gw_h2_stream *cache[STREAM_CACHE];
    gw_h2_sched_t sched;
    gw_bytes_t in; /* a payload split across recv calls */

    /* header block being gathered (hb_sid in the session) */
    int hb_end_stream;
    int hb_reject;  /* 1: stream error already decided (e.g. self-dependency); 2: ignore */
    int hb_has_pri; /* the HEADERS frame had the PRIORITY flag (RFC 7540 §6.2) */
    gw_h2_priority_t hb_pri;
    unsigned hb_frames;
    gw_bytes_t hb;

    gw_bytes_t scratch; /* header block encoding */
    /* RFC 9218 §7.1: PRIORITY_UPDATE frames about streams not opened yet, applied when they
     * open; a ring of at most max_concurrent_streams entries (the oldest is dropped) */
    prio_pending_t *prio_pend;
    size_t prio_pend_n, prio_pend_head;
    /* RFC 7540 §5.3 tree, created on the first PRIORITY frame or HEADERS priority (none
     * before: no tree work for clients that do not send them); sched.tree points to it */
    gw_h2_tree_t *tree;
} sess_ext_t;

#define RECENT_RST 16

/* The connection state proper: what an idle connection keeps (settings, windows, HPACK
 * tables, budgets). Kept small, with narrow fields: it is the per-connection cost of thousands
 * of idle clients. */
struct gw_h2_session {
    gw_h2_profile_t *p;
    void *user_data;
    sess_ext_t *x;        /* NULL while idle */
    gw_h2_stats_t *cold;  /* counters other than the three below, on first use */
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
    unsigned owns_profile : 1; /* created by gw_h2_session_new: p is ours to free */
    uint32_t goaway_code;
    int fatal_rc;
    const char *goaway_reason;
};

/* Counters that only some connections ever move live apart; a lost count (no memory) goes to
 * a sink. */
static gw_h2_stats_t *cold(gw_h2_session_t *s)
{
    static _Thread_local gw_h2_stats_t sink;
    if (!s->cold && !(s->cold = gw_calloc(1, sizeof(*s->cold))))
        return &sink;
    return s->cold;
}
#define COUNT(s, f) (cold(s)->f++)

/* The stream part, created on first need. NULL when out of memory. */
static sess_ext_t *ext(gw_h2_session_t *s)
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

const char *gw_h2_stream_state_str(gw_h2_stream_state_t st)
{
    switch (st) {
    case GW_H2_SS_IDLE:
        return "idle";
    case GW_H2_SS_RESERVED_LOCAL:
        return "reserved_local";
    case GW_H2_SS_RESERVED_REMOTE:
        return "reserved_remote";
    case GW_H2_SS_OPEN:
        return "open";
    case GW_H2_SS_HALF_CLOSED_LOCAL:
        return "half_closed_local";
    case GW_H2_SS_HALF_CLOSED_REMOTE:
        return "half_closed_remote";
    case GW_H2_SS_CLOSED:
        return "closed";
    }
    return "unknown";
}

void gw_h2_options_default(gw_h2_options_t *o)
{
    memset(o, 0, sizeof(*o));
    o->max_concurrent_streams = 100;
    o->initial_window_size = 256 * 1024;
    o->connection_window_size = 1024 * 1024;
    o->max_frame_size = GW_H2_DEFAULT_MAX_FRAME_SIZE;
    o->header_table_size = 4096;
    o->max_header_list_size = 64 * 1024;
    o->settings_timeout_ms = 10000;
    o->max_requests_per_connection = 0;
    o->reset_budget = 100;
    o->reset_window_ms = 10000;
    o->control_frame_budget = 1000;
    o->empty_frame_budget = 100;
    o->max_queued_control = 1000;
    o->encoder_table_size = 4096;
    o->max_header_block = 0; /* derived in fill_defaults */
    o->max_continuations = 64;
    o->max_priority_nodes = 0; /* derived in fill_defaults */
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

/* ---- small helpers -------------------------------------------------------------------- */

static gw_h2_stream_t *find_stream(const gw_h2_session_t *s, uint32_t id)
{
    if (!s->x)
        return NULL;
    gw_h2_stream_t **slot = &s->x->cache[(id >> 1) % STREAM_CACHE];
    if (*slot && (*slot)->id == id)
        return *slot;
    gw_list_foreach(it, &s->x->streams)
    {
        gw_h2_stream_t *st = GW_CONTAINER_OF(it, gw_h2_stream_t, link);
        if (st->id == id) {
            *slot = st;
            return st;
        }
    }
    return NULL;
}

static void drop_chunks(gw_h2_stream_t *st)
{
    gw_list_t *n;
    while ((n = gw_list_pop_front(&st->chunks))) {
        chunk_free(st, GW_CONTAINER_OF(n, data_chunk_t, link));
    }
    st->queued = 0;
}

static void stream_free(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    gw_h2_sched_remove(&s->x->sched, &st->node);
    if (s->x->tree)
        gw_h2_tree_close(s->x->tree, st->id);
    gw_list_remove(&st->link);
    gw_h2_stream_t **slot = &s->x->cache[(st->id >> 1) % STREAM_CACHE];
    if (*slot == st)
        *slot = NULL;
    drop_chunks(st);
    gw_bytes_free(&st->trailers);
    arena_free(&st->arena);
    s->active--;
    gw_pool_put(&s->p->blocks, st);
}

/* A stream block whose arena block is empty, as the arena of the header block being decoded;
 * NULL when out of memory. */
static void *blk_get(gw_h2_session_t *s, arena_t *a)
{
    void *blk = gw_pool_get_raw(&s->p->blocks);
    if (!blk)
        return NULL;
    arena_blk_t *b = blk_arena(blk);
    *b = (arena_blk_t){.next = NULL, .used = 0, .cap = STREAM_ARENA0, .borrowed = 1};
    a->head = b;
    return blk;
}

/* Open stream id in blk (from blk_get), whose arena `a` holds the decoded request head. */
static gw_h2_stream_t *stream_new(gw_h2_session_t *s, uint32_t id, void *blk, arena_t *a)
{
    gw_h2_stream_t *st = blk;
    memset(st, 0, sizeof(*st));
    st->arena = *a;
    a->head = NULL;
    st->id = id;
    st->state = GW_H2_SS_OPEN;
    st->send_window = s->peer_initial_window;
    /* Until our SETTINGS are acknowledged the peer may assume the RFC default window. */
    st->recv_window = s->p->o.initial_window_size;
    if (!s->settings_acked && st->recv_window < GW_H2_DEFAULT_WINDOW)
        st->recv_window = GW_H2_DEFAULT_WINDOW;
    st->content_length = -1;
    st->data_budget = SIZE_MAX;
    gw_list_init(&st->chunks);
    gw_bytes_init(&st->trailers, 0);
    gw_h2_sched_node_init(&st->node, id);
    gw_list_push_back(&s->x->streams, &st->link);
    s->x->cache[(id >> 1) % STREAM_CACHE] = st; /* looked up by every submit from now on */
    s->active++;
    return st;
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
static int conn_error_rc(gw_h2_session_t *s, uint32_t code, const char *reason, int rc)
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

static int conn_error(gw_h2_session_t *s, uint32_t code, const char *reason)
{
    return conn_error_rc(s, code, reason, map_code(code));
}

static int nomem(gw_h2_session_t *s)
{
    return conn_error_rc(s, GW_H2_INTERNAL_ERROR, "out of memory", GW_E_NOMEM);
}

/* ---- RFC 9218 priorities ------------------------------------------------------------------ */

/* Take (and forget) the buffered PRIORITY_UPDATE for sid, dropping the entries of lower ids on
 * the way: those streams can no longer open (RFC 9113 §5.1.1). Returns 1 and the values, or 0. */
static int prio_pending_take(gw_h2_session_t *s, uint32_t sid, uint8_t *u, uint8_t *inc)
{
    int found = 0;
    size_t cap = s->p->o.max_concurrent_streams, kept = 0;
    for (size_t k = 0; k < s->x->prio_pend_n; k++) {
        prio_pending_t *e = &s->x->prio_pend[(s->x->prio_pend_head + k) % cap];
        if (e->stream_id == sid) {
            *u = e->urgency;
            *inc = e->incremental;
            found = 1;
        } else if (e->stream_id > sid) {
            /* compact in place: kept <= k, so this never overwrites an unread entry */
            s->x->prio_pend[(s->x->prio_pend_head + kept++) % cap] = *e;
        }
    }
    s->x->prio_pend_n = kept;
    return found;
}

/* Remember a PRIORITY_UPDATE for an idle stream (the most recent one per stream counts). */
static int prio_pending_put(gw_h2_session_t *s, uint32_t sid, uint8_t u, uint8_t inc)
{
    size_t cap = s->p->o.max_concurrent_streams;
    if (!ext(s))
        return nomem(s);
    if (!s->x->prio_pend) {
        s->x->prio_pend = gw_calloc(cap, sizeof(*s->x->prio_pend));
        if (!s->x->prio_pend)
            return nomem(s);
    }
    for (size_t k = 0; k < s->x->prio_pend_n; k++) {
        prio_pending_t *e = &s->x->prio_pend[(s->x->prio_pend_head + k) % cap];
        if (e->stream_id == sid) {
            e->urgency = u;
            e->incremental = inc;
            return 0;
        }
    }
    if (s->x->prio_pend_n == cap) { /* full: the oldest goes */
        s->x->prio_pend_head = (s->x->prio_pend_head + 1) % cap;
        s->x->prio_pend_n--;
    }
    s->x->prio_pend[(s->x->prio_pend_head + s->x->prio_pend_n) % cap] =
        (prio_pending_t){sid, u, inc};
    s->x->prio_pend_n++;
    return 0;
}

/* ---- RFC 7540 priority tree ---------------------------------------------------------------- */

/* The stream got an RFC 9218 signal: it leaves the tree's scheduling (its node stays, for the
 * structure of its dependents). */
static void mark_prio9218(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    st->prio9218 = 1;
    gw_h2_sched_set_tree(&s->x->sched, &st->node, 0);
}

/* First RFC 7540 signal: create the tree; the streams already open without an RFC 9218 signal
 * join it under the root with the default weight (RFC 7540 §5.3.5). */
static int ensure_tree(gw_h2_session_t *s)
{
    if (s->x->tree)
        return 0;
    int rc = gw_h2_tree_new(&s->x->tree, s->p->o.max_priority_nodes);
    if (rc < 0)
        return rc;
    s->x->sched.tree = s->x->tree;
    gw_list_foreach(it, &s->x->streams)
    {
        gw_h2_stream_t *st = GW_CONTAINER_OF(it, gw_h2_stream_t, link);
        if (st->state == GW_H2_SS_CLOSED || gw_h2_tree_open(s->x->tree, st->id) < 0)
            continue;
        if (!st->prio9218)
            gw_h2_sched_set_tree(&s->x->sched, &st->node, 1);
    }
    return 0;
}

/* RFC 7540 priority of sid from a PRIORITY frame or HEADERS (frame.c has already turned a
 * self-dependency into a stream error). A full tree of open streams drops the signal. */
static int apply_7540(gw_h2_session_t *s, uint32_t sid, const gw_h2_priority_t *p)
{
    if (!ext(s) || ensure_tree(s) < 0)
        return nomem(s);
    (void)gw_h2_tree_set(s->x->tree, sid, p->dependency, (unsigned)p->weight + 1u, p->exclusive);
    return 0;
}

/* A stream opens: its priority is the request's priority field (RFC 9218 §5), overridden by a
 * PRIORITY_UPDATE that arrived before the stream (§7.1: the frame is the later signal). */
static void apply_open_priority(gw_h2_session_t *s, gw_h2_stream_t *st, gw_slice_t field)
{
    uint8_t u = GW_H2_PRIO_DEFAULT_URGENCY, inc = 0;
    if (prio_pending_take(s, st->id, &u, &inc))
        st->prio9218 = 1;
    else if (field.base) {
        gw_h2_priority_parse(field, &u, &inc);
        st->prio9218 = 1;
    }
    gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
}

/* Queue a control frame, enforcing the cap on unsent control frames (CVE-2019-9512/9515:
 * a peer that does not read our ACKs must not make us buffer without bound). */
static int ctrl_check(gw_h2_session_t *s)
{
    if (++s->ctrl_queued > s->p->o.max_queued_control) {
        COUNT(s, queued_control_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "peer does not read control frames");
    }
    return 0;
}

static void roll_budget(gw_h2_session_t *s, uint64_t now)
{
    if (now - s->budget_start_ms >= s->p->o.reset_window_ms || now < s->budget_start_ms) {
        s->budget_start_ms = now;
        s->resets_in_window = s->control_in_window = s->empty_in_window = 0;
    }
}

static int count_reset(gw_h2_session_t *s)
{
    if (++s->resets_in_window > s->p->o.reset_budget) {
        COUNT(s, reset_budget_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "too many stream resets");
    }
    return 0;
}

static int count_control_n(gw_h2_session_t *s, size_t n)
{
    uint64_t sum = (uint64_t)s->control_in_window + n;
    s->control_in_window = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
    if (s->control_in_window > s->p->o.control_frame_budget) {
        COUNT(s, control_flood_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "control frame flood");
    }
    return 0;
}

static int count_control(gw_h2_session_t *s)
{
    if (++s->control_in_window > s->p->o.control_frame_budget) {
        COUNT(s, control_flood_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "control frame flood");
    }
    return 0;
}

static int count_empty(gw_h2_session_t *s)
{
    if (++s->empty_in_window > s->p->o.empty_frame_budget) {
        COUNT(s, empty_frame_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "empty frame flood");
    }
    return 0;
}

/* Give back connection window for bytes no one will consume (closed streams, padding). */
static int credit_conn(gw_h2_session_t *s, uint64_t n)
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
                return nomem(s);
            s->conn_recv_window += inc;
            return ctrl_check(s);
        }
    }
    return 0;
}

static void close_stream(gw_h2_session_t *s, gw_h2_stream_t *st, uint32_t code, int by_peer);

/* Streams we reset are forgotten soon; frames the peer sent before it saw our RST_STREAM are
 * ignored rather than answered (RFC 9113 §5.1 "closed"). */
static void remember_rst(gw_h2_session_t *s, uint32_t sid)
{
    /* allocated on the first reset, kept for the connection's life (without memory the
     * stream is not remembered: late frames on it then count as errors) */
    if (!s->recent_rst && !(s->recent_rst = gw_calloc(RECENT_RST, sizeof(*s->recent_rst))))
        return;
    s->recent_rst[s->recent_rst_pos++ % RECENT_RST] = sid;
}

static int recently_reset(const gw_h2_session_t *s, uint32_t sid)
{
    for (size_t i = 0; s->recent_rst && i < RECENT_RST; i++)
        if (s->recent_rst[i] == sid)
            return 1;
    return 0;
}

/* Stream error (RFC 9113 §5.4.2): RST_STREAM. provoked: the peer caused it (counts toward the
 * reset budget, MadeYouReset CVE-2025-8671). st may be NULL (stream not kept). */
static int stream_error(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st, uint32_t code,
                        int provoked)
{
    if (gw_h2_frame_write_rst_stream(&s->out, sid, code) < 0)
        return nomem(s);
    COUNT(s, resets_sent);
    remember_rst(s, sid);
    if (st && st->state != GW_H2_SS_CLOSED) {
        st->rst_sent = 1;
        close_stream(s, st, code, 0);
    }
    int rc = ctrl_check(s);
    if (rc < 0)
        return rc;
    if (provoked) {
        COUNT(s, resets_provoked);
        return count_reset(s);
    }
    return 0;
}

/* The stream reached "closed": unqueue, give the unconsumed window back, tell the layer above
 * (which releases it later) or free it if the layer above never saw it. */
static void close_stream(gw_h2_session_t *s, gw_h2_stream_t *st, uint32_t code, int by_peer)
{
    st->state = GW_H2_SS_CLOSED;
    gw_h2_sched_remove(&s->x->sched, &st->node);
    if (s->x->tree) /* stays as a placeholder (RFC 7540 §5.3.4) */
        gw_h2_tree_close(s->x->tree, st->id);
    drop_chunks(st);
    if (st->recv_unconsumed) {
        (void)credit_conn(s, st->recv_unconsumed);
        st->recv_unconsumed = 0;
    }
    if (st->seen) {
        if (s->p->cb.on_close)
            s->p->cb.on_close(s->user_data, st->id, code, by_peer);
    } else {
        stream_free(s, st);
    }
}

/* Our side sent END_STREAM. */
static void local_end(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    if (st->state == GW_H2_SS_OPEN)
        st->state = GW_H2_SS_HALF_CLOSED_LOCAL;
    else if (st->state == GW_H2_SS_HALF_CLOSED_REMOTE)
        close_stream(s, st, GW_H2_NO_ERROR, 0);
}

/* The peer sent END_STREAM. Returns 0 or a fatal code. */
static int remote_end(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    uint32_t id = st->id;
    if (st->state == GW_H2_SS_OPEN)
        st->state = GW_H2_SS_HALF_CLOSED_REMOTE;
    else if (st->state == GW_H2_SS_HALF_CLOSED_LOCAL)
        st->state = GW_H2_SS_CLOSED; /* on_close after on_end_stream */
    if (s->p->cb.on_end_stream && st->seen) {
        int rc = s->p->cb.on_end_stream(s->user_data, id);
        st = find_stream(s, id); /* the callback may have released it */
        if (rc < 0 && gw_err_is_fatal(rc))
            return conn_error_rc(s, GW_H2_INTERNAL_ERROR, "application error", rc);
        if (!st)
            return 0;
        if (rc < 0 && st->state != GW_H2_SS_CLOSED)
            return stream_error(s, id, st, GW_H2_INTERNAL_ERROR, 0);
    }
    if (st->state == GW_H2_SS_CLOSED && !st->rst_sent)
        close_stream(s, st, GW_H2_NO_ERROR, 0);
    return 0;
}

/* Encode fields into HEADERS + CONTINUATION frames within the peer's frame size. */
static int write_block(gw_h2_session_t *s, uint32_t sid, const gw_hpack_field_t *f, size_t n,
                       int end_stream)
{
    int rc;
    s->x->scratch.len = 0;
    if ((rc = gw_hpack_encode(&s->enc, f, n, &s->x->scratch)) < 0)
        return rc;
    size_t off = 0, len = s->x->scratch.len;
    int first = 1;
    do {
        size_t chunk = len - off;
        if (chunk > s->peer_max_frame)
            chunk = s->peer_max_frame;
        uint8_t flags = (off + chunk == len) ? GW_H2_F_END_HEADERS : 0;
        if (first) {
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

/* ---- request validation (RFC 9113 §8.1-§8.3) ------------------------------------------- */

typedef struct {
    gw_h2_session_t *s;
    arena_t *arena;
    int trailers;
    int malformed;
    const char *why;
    int nomem;
    int regular_seen;
    gw_h2_head_t head;
    gw_h2_header_t *h;
    size_t n, cap;
    gw_slice_t priority;
} decode_ctx_t;

static void bad(decode_ctx_t *c, const char *why)
{
    if (!c->malformed) {
        c->malformed = 1;
        c->why = why;
    }
}

/* §8.2.1: the bytes a field name may hold: no 0x00-0x20, no uppercase, no 0x7f-0xff, and ':'
 * only as the pseudo prefix (checked apart). Row r holds bytes 32r..32r+31. */
static const uint8_t name_ok[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1,
    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
};

static int valid_name(gw_slice_t n)
{
    if (n.len == 0)
        return 0;
    uint8_t all = name_ok[n.base[0]] | (n.base[0] == ':');
    for (size_t i = 1; i < n.len; i++)
        all &= name_ok[n.base[i]];
    return all;
}

static int valid_value(gw_slice_t v)
{
    if (gw_slice_has_crlfnul(v))
        return 0;
    if (v.len && (v.base[0] == ' ' || v.base[0] == '\t' || v.base[v.len - 1] == ' ' ||
                  v.base[v.len - 1] == '\t'))
        return 0;
    return 1;
}

static int parse_cl(gw_slice_t v, int64_t *out)
{
    int64_t x = 0;
    if (v.len == 0 || v.len > 18)
        return -1;
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return -1;
        x = x * 10 + (v.base[i] - '0');
    }
    *out = x;
    return 0;
}

static int set_pseudo(decode_ctx_t *c, gw_slice_t *slot, gw_slice_t v)
{
    if (slot->base) {
        bad(c, "duplicate pseudo-header");
        return 0;
    }
    *slot = v.base ? v : (gw_slice_t){(const uint8_t *)"", 0};
    return 0;
}

static int on_field(void *ud, const gw_hpack_field_t *f)
{
    decode_ctx_t *c = ud;
    if (c->nomem)
        return 0;
    if (!valid_name(f->name)) {
        bad(c, "invalid field name");
        return 0;
    }
    if (!valid_value(f->value)) {
        bad(c, "invalid field value");
        return 0;
    }
    /* copy into the arena so the slices outlive the decoder's buffers */
    uint8_t *p = arena_alloc(c->arena, f->name.len + f->value.len + 1);
    if (!p) {
        c->nomem = 1;
        return 0;
    }
    memcpy(p, f->name.base, f->name.len);
    if (f->value.len)
        memcpy(p + f->name.len, f->value.base, f->value.len);
    gw_slice_t name = {p, f->name.len}, value = {p + f->name.len, f->value.len};

    if (name.base[0] == ':') {
        /* §8.3: pseudo-headers only in requests, before regular fields, known ones only */
        if (c->trailers) {
            bad(c, "pseudo-header in trailers");
            return 0;
        }
        if (c->regular_seen) {
            bad(c, "pseudo-header after regular field");
            return 0;
        }
        if (gw_slice_eq(name, GW_SLICE_LIT(":method")))
            return set_pseudo(c, &c->head.method, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":scheme")))
            return set_pseudo(c, &c->head.scheme, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":authority")))
            return set_pseudo(c, &c->head.authority, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":path")))
            return set_pseudo(c, &c->head.path, value);
        if (gw_slice_eq(name, GW_SLICE_LIT(":protocol")))
            return set_pseudo(c, &c->head.protocol, value);
        bad(c, "unknown or response pseudo-header");
        return 0;
    }
    c->regular_seen = 1;
    /* §8.2.2: connection-specific fields make the message malformed (the names this checks
     * have lengths 2, 7, 10, 14, 16 and 17: others skip the comparisons) */
    size_t nl = name.len;
    int special = nl == 2 || nl == 7 || nl == 8 || nl == 10 || nl == 14 || nl == 16 || nl == 17;
    if (special && (gw_slice_eq(name, GW_SLICE_LIT("connection")) ||
                    gw_slice_eq(name, GW_SLICE_LIT("proxy-connection")) ||
                    gw_slice_eq(name, GW_SLICE_LIT("keep-alive")) ||
                    gw_slice_eq(name, GW_SLICE_LIT("transfer-encoding")) ||
                    gw_slice_eq(name, GW_SLICE_LIT("upgrade")))) {
        bad(c, "connection-specific header field");
        return 0;
    }
    if (special && gw_slice_eq(name, GW_SLICE_LIT("te")) &&
        !gw_slice_eq(value, GW_SLICE_LIT("trailers"))) {
        bad(c, "te other than trailers");
        return 0;
    }
    if (special && !c->trailers && gw_slice_eq(name, GW_SLICE_LIT("content-length"))) {
        int64_t v;
        if (parse_cl(value, &v) < 0) {
            bad(c, "invalid content-length");
            return 0;
        }
        if (c->head.content_length >= 0 && c->head.content_length != v) {
            bad(c, "conflicting content-length");
            return 0;
        }
        c->head.content_length = v;
    }
    if (special && !c->trailers && gw_slice_eq(name, GW_SLICE_LIT("priority")))
        c->priority = value;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        gw_h2_header_t *nh = arena_alloc(c->arena, ncap * sizeof(*nh));
        if (!nh) {
            c->nomem = 1;
            return 0;
        }
        if (c->n)
            memcpy(nh, c->h, c->n * sizeof(*nh));
        c->h = nh;
        c->cap = ncap;
    }
    c->h[c->n].name = name;
    c->h[c->n].value = value;
    c->n++;
    return 0;
}

static void check_request(decode_ctx_t *c)
{
    gw_h2_head_t *h = &c->head;
    if (c->malformed)
        return;
    if (!h->method.base) {
        bad(c, "missing :method");
        return;
    }
    if (h->protocol.base) {
        /* RFC 8441 §4: only after we advertised SETTINGS_ENABLE_CONNECT_PROTOCOL, we do not */
        bad(c, ":protocol without extended CONNECT");
        return;
    }
    if (gw_slice_eq(h->method, GW_SLICE_LIT("CONNECT"))) {
        /* §8.5: :authority only; :scheme and :path omitted */
        if (!h->authority.base || h->authority.len == 0 || h->scheme.base || h->path.base ||
            !gw_slice_is_authority(h->authority))
            bad(c, "malformed CONNECT");
        return;
    }
    if (!h->scheme.base || !h->path.base) {
        bad(c, "missing :scheme or :path");
        return;
    }
    if (h->path.len == 0) {
        bad(c, "empty :path");
        return;
    }
    if (h->method.len == 0) {
        bad(c, "empty :method");
        return;
    }
    /* The request head goes on as an HTTP/1.1 request line (RFC 9112 §3): the method is a token
     * (RFC 9110 §9.1) and the target only RFC 3986 path and query characters; anything else
     * is a malformed request, the client's fault, never an origin failure (RFC 9113 §8.1.1;
     * issues 18.10, 19.3). */
    if (!gw_slice_is_token(h->method)) {
        bad(c, "invalid :method");
        return;
    }
    if (!gw_slice_is_request_target(h->path)) {
        bad(c, "invalid :path");
        return;
    }
    /* §8.3.1: we only carry http and https URIs; the scheme the origin is told comes from the
     * listener, never from here (issue 18.3) */
    if (!gw_slice_eq(h->scheme, GW_SLICE_LIT("http")) &&
        !gw_slice_eq(h->scheme, GW_SLICE_LIT("https"))) {
        bad(c, "invalid :scheme");
        return;
    }
    /* RFC 3986 §3.2 authority characters, without the userinfo §8.3.1 forbids */
    if (h->authority.base && !gw_slice_is_authority(h->authority))
        bad(c, "invalid :authority");
}

/* ---- inbound frames --------------------------------------------------------------------- */

static int finish_block(gw_h2_session_t *s);

static int begin_block(gw_h2_session_t *s, uint32_t sid, const gw_h2_frame_t *f, int reject)
{
    if (!ext(s))
        return nomem(s);
    s->hb_sid = sid;
    s->x->hb_end_stream = (f->hdr.flags & GW_H2_F_END_STREAM) != 0;
    s->x->hb_reject = reject;
    s->x->hb_has_pri = f->u.headers.has_priority;
    s->x->hb_pri = f->u.headers.pri;
    s->x->hb_frames = 1;
    s->x->hb.len = 0;
    if (f->u.headers.block.len > s->p->o.max_header_block) {
        COUNT(s, header_block_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "header block too large");
    }
    if (gw_bytes_append(&s->x->hb, f->u.headers.block.base, f->u.headers.block.len) < 0)
        return nomem(s);
    if (f->hdr.flags & GW_H2_F_END_HEADERS)
        return finish_block(s);
    return 0;
}

static int on_headers_frame(gw_h2_session_t *s, const gw_h2_frame_t *f, int reject)
{
    uint32_t sid = f->hdr.stream_id;
    if (f->u.headers.block.len == 0 &&
        !(f->hdr.flags & (GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS))) {
        int rc = count_empty(s);
        if (rc < 0)
            return rc;
    }
    if ((sid & 1) == 0)
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "client stream id must be odd");
    gw_h2_stream_t *st = find_stream(s, sid);
    if (!st && sid <= s->last_peer_id) {
        /* trailers of a stream we reset and forgot: decode (HPACK state), then drop */
        if (recently_reset(s, sid))
            return begin_block(s, sid, f, 2);
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "stream id not increasing");
    }
    return begin_block(s, sid, f, reject);
}

static int on_continuation(gw_h2_session_t *s, const gw_h2_frame_t *f)
{
    if (s->hb_sid == 0)
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "CONTINUATION without HEADERS");
    if (f->u.continuation.block.len == 0 && !(f->hdr.flags & GW_H2_F_END_HEADERS)) {
        int rc = count_empty(s);
        if (rc < 0)
            return rc;
    }
    if (++s->x->hb_frames > s->p->o.max_continuations + 1 ||
        s->x->hb.len + f->u.continuation.block.len > s->p->o.max_header_block) {
        /* endless CONTINUATION (CVE-2024-27316 and friends): cut it off */
        COUNT(s, header_block_hits);
        return conn_error(s, GW_H2_ENHANCE_YOUR_CALM, "header block too large");
    }
    if (gw_bytes_append(&s->x->hb, f->u.continuation.block.base, f->u.continuation.block.len) < 0)
        return nomem(s);
    if (f->hdr.flags & GW_H2_F_END_HEADERS)
        return finish_block(s);
    return 0;
}

/* After a callback: the callback may have reset or released the stream, so look it up
 * again. Returns 0 or a fatal code; *live is 1 when the stream is still there and not closed. */
static int call_rc(gw_h2_session_t *s, uint32_t sid, int rc, gw_h2_stream_t **live)
{
    gw_h2_stream_t *st = find_stream(s, sid);
    *live = st && st->state != GW_H2_SS_CLOSED ? st : NULL;
    if (rc >= 0)
        return 0;
    if (gw_err_is_fatal(rc))
        return conn_error_rc(s, GW_H2_INTERNAL_ERROR, "application error", rc);
    if (*live) {
        gw_h2_stream_t *x = *live;
        *live = NULL;
        return stream_error(s, sid, x, GW_H2_INTERNAL_ERROR, 0);
    }
    return 0;
}

/* Answer a header list above our limit with 431 (RFC 9113 §10.5.1, RFC 6585 §5). */
static int refuse_431(gw_h2_session_t *s, uint32_t sid, gw_h2_stream_t *st)
{
    gw_hpack_field_t f = {GW_SLICE_LIT(":status"), GW_SLICE_LIT("431"), 0};
    COUNT(s, header_list_hits);
    int rc = write_block(s, sid, &f, 1, 1);
    if (rc == GW_E_NOMEM)
        return nomem(s);
    if (rc < 0)
        return conn_error(s, GW_H2_COMPRESSION_ERROR, "encoder failure");
    /* we will not read the rest of the request (RFC 9113 §8.1: NO_ERROR reset after a
     * complete response) */
    if (!s->x->hb_end_stream) {
        if (gw_h2_frame_write_rst_stream(&s->out, sid, GW_H2_NO_ERROR) < 0)
            return nomem(s);
        COUNT(s, resets_sent);
        remember_rst(s, sid);
    }
    if (st) {
        st->rst_sent = 1;
        close_stream(s, st, GW_H2_NO_ERROR, 0);
    }
    return ctrl_check(s);
}

static int finish_block(gw_h2_session_t *s)
{
    uint32_t sid = s->hb_sid;
    gw_h2_stream_t *st = find_stream(s, sid);
    int trailers = st != NULL;
    arena_t tmp = {NULL};
    void *blk = NULL; /* a new stream's block, holding tmp's first block */
    decode_ctx_t c;
    int rc = 0;

    s->hb_sid = 0;
    /* A block on a stream we reset (known, or forgotten since) is decoded only for the HPACK
     * state (RFC 9113 §4.3, §5.1: such frames may be in flight): its fields are not copied
     * anywhere, and each such block is charged to the control budget (issue 18 item 6:
     * thousands of small HEADERS frames, each naming a 4 KB table entry, made the stream's
     * arena grow by their whole decoded size and cost nothing). */
    int discard =
        (!st && s->x->hb_reject == 2) || (st && st->state == GW_H2_SS_CLOSED && st->rst_sent);
    if (discard) {
        COUNT(s, discarded_blocks);
        if ((rc = count_control(s)) < 0) {
            s->x->hb.len = 0;
            return rc;
        }
        gw_hpack_dec_begin(&s->dec, s->p->o.max_header_list_size);
        size_t dlen = s->x->hb.len;
        static const uint8_t none[1];
        /* no callback: the decoder's table-only mode, which updates the table and copies no
         * field that does not enter it */
        ssize_t dn =
            gw_hpack_decode(&s->dec, s->x->hb.base ? s->x->hb.base : none, dlen, 1, NULL, NULL);
        int dend = dn < 0 ? (int)dn : gw_hpack_dec_end(&s->dec);
        s->x->hb.len = 0;
        if (dn == GW_E_NOMEM || dend == GW_E_NOMEM)
            return nomem(s);
        if (dn < 0 || (size_t)dn != dlen || (dend < 0 && dend != GW_E_LIMIT))
            return conn_error(s, GW_H2_COMPRESSION_ERROR, "HPACK decoding failed");
        return 0;
    }
    /* a new stream's fields are decoded into the block it will live in; without memory for
     * one the block is decoded all the same (the HPACK state is shared, RFC 9113 §4.3) and
     * opening the stream fails below */
    if (!st)
        blk = blk_get(s, &tmp);
    memset(&c, 0, sizeof(c));
    c.s = s;
    c.trailers = trailers;
    c.head.content_length = -1;
    c.head.stream_id = sid;
    c.arena = st ? &st->arena : &tmp;

    /* Decode whatever happens to the stream: the HPACK state is shared (RFC 9113 §4.3). */
    gw_hpack_dec_begin(&s->dec, s->p->o.max_header_list_size);
    size_t blen = s->x->hb.len;
    static const uint8_t empty[1];
    /* an empty block may have no buffer yet: never pass NULL + 0 (UB in pointer arithmetic) */
    ssize_t n =
        gw_hpack_decode(&s->dec, s->x->hb.base ? s->x->hb.base : empty, blen, 1, on_field, &c);
    int end = n < 0 ? (int)n : gw_hpack_dec_end(&s->dec);
    s->x->hb.len = 0;
    if (n == GW_E_NOMEM || end == GW_E_NOMEM || c.nomem) {
        rc = nomem(s);
        goto out;
    }
    if (n < 0 || (size_t)n != blen || (end < 0 && end != GW_E_LIMIT)) {
        rc = conn_error(s, GW_H2_COMPRESSION_ERROR, "HPACK decoding failed");
        goto out;
    }
    int overflow = end == GW_E_LIMIT;
    if (s->x->hb_reject == 2 && !st)
        goto out; /* a forgotten stream we reset */

    if (trailers) {
        /* HEADERS on a stream we know: trailers, or a frame on a closed half */
        if (st->state == GW_H2_SS_HALF_CLOSED_REMOTE ||
            (st->state == GW_H2_SS_CLOSED && !st->rst_sent)) {
            rc = stream_error(s, sid, st, GW_H2_STREAM_CLOSED, 1);
            goto out;
        }
        if (st->state == GW_H2_SS_CLOSED)
            goto out; /* we reset it: ignore (§5.1) */
        if (overflow) {
            /* Issue 18.12: a 431 here would be a second final response head on a stream
             * whose request already went on (and whose response may be under way): the
             * stream is reset instead. RFC 9113 §10.5.1 offers 431 for a request head only;
             * a trailer section past our SETTINGS_MAX_HEADER_LIST_SIZE is load we refuse. */
            COUNT(s, header_list_hits);
            rc = stream_error(s, sid, st, GW_H2_ENHANCE_YOUR_CALM, 1);
            goto out;
        }
        if (!c.malformed && !s->x->hb_end_stream)
            bad(&c, "trailers without END_STREAM");
        if (!c.malformed && st->content_length >= 0 &&
            st->data_recv != (uint64_t)st->content_length)
            bad(&c, "content-length mismatch");
        if (c.malformed || s->x->hb_reject) {
            COUNT(s, malformed_requests);
            rc = stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
            goto out;
        }
        if (s->p->cb.on_trailers && st->seen) {
            rc = call_rc(s, sid, s->p->cb.on_trailers(s->user_data, sid, c.h, c.n), &st);
            if (rc < 0 || !st)
                goto out;
        }
        rc = remote_end(s, st);
        goto out;
    }

    /* a new stream: the idle ids below it are now closed (§5.1.1) */
    s->last_peer_id = sid;
    if (s->phase >= GW_H2_CONN_GOAWAY_SENT || s->active >= s->p->o.max_concurrent_streams) {
        /* §5.1.2: REFUSED_STREAM; it also costs us a frame, so it counts as a provoked reset
         * unless we stopped accepting because of our own GOAWAY */
        COUNT(s, streams_refused);
        rc = stream_error(s, sid, NULL, GW_H2_REFUSED_STREAM, s->phase < GW_H2_CONN_GOAWAY_SENT);
        goto out;
    }
    if (overflow) {
        rc = refuse_431(s, sid, NULL);
        goto out;
    }
    check_request(&c);
    if (c.malformed || s->x->hb_reject) {
        COUNT(s, malformed_requests);
        rc = stream_error(s, sid, NULL, GW_H2_PROTOCOL_ERROR, 1);
        goto out;
    }
    if (!blk) {
        rc = nomem(s);
        goto out;
    }
    st = stream_new(s, sid, blk, &tmp);
    blk = NULL;
    st->content_length = c.head.content_length;
    st->seen = 1;
    apply_open_priority(s, st, c.priority);
    if (s->x->hb_has_pri && (rc = apply_7540(s, sid, &s->x->hb_pri)) < 0)
        goto out;
    if (s->x->tree && gw_h2_tree_open(s->x->tree, sid) == 0) {
        if (!st->prio9218)
            gw_h2_sched_set_tree(&s->x->sched, &st->node, 1);
    }
    s->streams_opened++;
    s->requests++;
    c.head.headers = c.h;
    c.head.headers_len = c.n;
    c.head.end_stream = s->x->hb_end_stream;
    if (c.head.end_stream && c.head.content_length > 0) {
        st->seen = 0;
        COUNT(s, malformed_requests);
        rc = stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
        goto out;
    }
    if (s->p->o.max_requests_per_connection && s->requests >= s->p->o.max_requests_per_connection &&
        s->phase < GW_H2_CONN_GOAWAY_SENT) {
        COUNT(s, max_requests_hits);
        if ((rc = gw_h2_session_shutdown(s, 1)) < 0) {
            rc = nomem(s);
            goto out;
        }
    }
    if (c.priority.base && s->p->cb.on_priority)
        s->p->cb.on_priority(s->user_data, sid, c.priority);
    if (s->p->cb.on_request) {
        rc = call_rc(s, sid, s->p->cb.on_request(s->user_data, &c.head), &st);
        if (rc < 0 || !st)
            goto out;
    }
    if (s->x->hb_end_stream)
        rc = remote_end(s, st);
out:
    arena_free(&tmp);
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
        return conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "connection window exceeded");
    s->conn_recv_window -= flen;

    gw_h2_stream_t *st = find_stream(s, sid);
    if (!st || st->state == GW_H2_SS_HALF_CLOSED_REMOTE || st->state == GW_H2_SS_CLOSED) {
        if ((rc = credit_conn(s, flen)) < 0)
            return rc;
        if ((st && st->rst_sent) || (!st && recently_reset(s, sid)))
            return 0; /* §5.1: ignore frames after our RST_STREAM (they may be in flight) */
        return stream_error(s, sid, st, GW_H2_STREAM_CLOSED, 1);
    }
    if ((int64_t)flen > st->recv_window) {
        if ((rc = credit_conn(s, flen)) < 0)
            return rc;
        return stream_error(s, sid, st, GW_H2_FLOW_CONTROL_ERROR, 1);
    }
    st->recv_window -= flen;
    /* padding is nobody's to consume: give it back now */
    if (f->u.data.pad_len) {
        st->recv_pending += f->u.data.pad_len;
        if ((rc = credit_conn(s, f->u.data.pad_len)) < 0)
            return rc;
    }
    size_t dlen = f->u.data.data.len;
    if (dlen == 0 && !(f->hdr.flags & GW_H2_F_END_STREAM) && (rc = count_empty(s)) < 0)
        return rc;
    st->data_recv += dlen;
    if (st->content_length >= 0 && st->data_recv > (uint64_t)st->content_length) {
        COUNT(s, malformed_requests);
        if ((rc = credit_conn(s, dlen)) < 0)
            return rc;
        return stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
    }
    if ((f->hdr.flags & GW_H2_F_END_STREAM) && st->content_length >= 0 &&
        st->data_recv != (uint64_t)st->content_length) {
        COUNT(s, malformed_requests);
        if ((rc = credit_conn(s, dlen)) < 0)
            return rc;
        return stream_error(s, sid, st, GW_H2_PROTOCOL_ERROR, 1);
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
        return remote_end(s, st);
    return 0;
}

/* RFC 9218 §7.1 (frame.c already rejected a non-zero stream id and prioritized id 0 with
 * PROTOCOL_ERROR): re-queue an open stream at its new priority; remember one for an idle
 * client stream; ignore closed streams and even ids (we never push). */
static int on_priority_update(gw_h2_session_t *s, uint32_t sid, gw_slice_t value)
{
    uint8_t u, inc;
    gw_h2_priority_parse(value, &u, &inc);
    gw_h2_stream_t *st = find_stream(s, sid);
    if (st) {
        if (st->state != GW_H2_SS_CLOSED) {
            gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
            mark_prio9218(s, st);
        }
        return 0;
    }
    if (!(sid & 1) || sid <= s->last_peer_id)
        return 0;
    return prio_pending_put(s, sid, u, inc);
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
            return conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "stream window overflow");
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
     * the one in force after the frame), not once per entry (issue 18 item 9: a 16 KB frame
     * carries 2,730 entries). The frame codec already refused a value above 2^31-1. */
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
        default:
            break;
        }
    }
    return iws_seen ? apply_initial_window(s, iws, iws_peak) : 0;
}

static int on_frame(gw_h2_session_t *s, const gw_h2_frame_hdr_t *h, const uint8_t *payload,
                    uint64_t now)
{
    gw_h2_frame_t f;
    gw_h2_frame_err_t err;
    int rc;

    s->frames_in++;
    roll_budget(s, now);
    /* §6.10: nothing may come between HEADERS and its last CONTINUATION */
    if (s->hb_sid && (h->type != GW_H2_FT_CONTINUATION || h->stream_id != s->hb_sid))
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "frame inside a header block");
    /* §3.4: the client preface ends with a SETTINGS frame */
    if (!s->got_settings) {
        if (h->type != GW_H2_FT_SETTINGS || (h->flags & GW_H2_F_ACK))
            return conn_error(s, GW_H2_PROTOCOL_ERROR, "first frame is not SETTINGS");
    }
    rc = gw_h2_frame_parse(h, payload, &f, &err);
    if (rc == 1)
        return 0; /* unknown type */
    if (rc == GW_E_PROTO)
        return conn_error(s, err.code, err.reason);
    /* §5.1 idle: only HEADERS and PRIORITY may open or touch an idle stream */
    if (h->stream_id && h->stream_id > s->last_peer_id && h->type != GW_H2_FT_HEADERS &&
        h->type != GW_H2_FT_PRIORITY && h->type != GW_H2_FT_PUSH_PROMISE && !s->hb_sid)
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "frame on an idle stream");
    int reject = 0;
    if (rc == GW_E_STREAM) {
        if (h->type != GW_H2_FT_HEADERS) {
            gw_h2_stream_t *st = find_stream(s, h->stream_id);
            if (h->type == GW_H2_FT_PRIORITY && (rc = count_control(s)) < 0)
                return rc;
            return stream_error(s, h->stream_id, st, err.code, 1);
        }
        reject = 1; /* decode the block for HPACK's sake, then reset */
    }

    switch (h->type) {
    case GW_H2_FT_DATA:
        return on_data_frame(s, &f);
    case GW_H2_FT_HEADERS:
        return on_headers_frame(s, &f, reject);
    case GW_H2_FT_CONTINUATION:
        return on_continuation(s, &f);
    case GW_H2_FT_PRIORITY: /* RFC 7540 §6.3: deprecated (RFC 9113 §5.3.2) but honoured */
        if ((rc = count_control(s)) < 0)
            return rc;
        return apply_7540(s, h->stream_id, &f.u.priority);
    case GW_H2_FT_PRIORITY_UPDATE:
        if ((rc = count_control(s)) < 0)
            return rc;
        /* applied first, so the callback sees the new priority (the front moves a queued
         * origin exchange by it) */
        rc = on_priority_update(s, f.u.priority_update.prioritized_id, f.u.priority_update.value);
        if (rc == 0 && s->p->cb.on_priority)
            s->p->cb.on_priority(s->user_data, f.u.priority_update.prioritized_id,
                                 f.u.priority_update.value);
        return rc;
    case GW_H2_FT_RST_STREAM: {
        gw_h2_stream_t *st = find_stream(s, h->stream_id);
        COUNT(s, resets_received);
        if ((rc = count_reset(s)) < 0)
            return rc;
        if (st && st->state != GW_H2_SS_CLOSED)
            close_stream(s, st, f.u.rst_stream.error_code, 1);
        return 0;
    }
    case GW_H2_FT_SETTINGS:
        if (h->flags & GW_H2_F_ACK) {
            if (!s->settings_acked)
                gw_hpack_dec_set_max_table_size(&s->dec, s->p->o.header_table_size);
            s->settings_acked = 1;
            return 0;
        }
        s->got_settings = 1;
        /* entries, not frames, are charged (issue 18 item 9): one frame may carry thousands */
        if ((rc = count_control_n(s, f.u.settings.n ? f.u.settings.n : 1)) < 0)
            return rc;
        if ((rc = apply_settings(s, &f)) < 0)
            return rc;
        if (gw_h2_frame_write_settings(&s->out, 1, NULL, 0) < 0)
            return nomem(s);
        return ctrl_check(s);
    case GW_H2_FT_PING:
        if (h->flags & GW_H2_F_ACK) {
            if (s->phase == GW_H2_CONN_SHUTDOWN_PENDING &&
                memcmp(f.u.ping.opaque, SHUTDOWN_PING, 8) == 0) {
                s->phase = GW_H2_CONN_OPEN;
                if (gw_h2_session_shutdown(s, 1) < 0)
                    return nomem(s);
            }
            return 0;
        }
        if ((rc = count_control(s)) < 0)
            return rc;
        if (gw_h2_frame_write_ping(&s->out, 1, f.u.ping.opaque) < 0)
            return nomem(s);
        return ctrl_check(s);
    case GW_H2_FT_GOAWAY:
        s->peer_goaway = 1;
        if (s->p->cb.on_goaway)
            s->p->cb.on_goaway(s->user_data, f.u.goaway.last_stream_id, f.u.goaway.error_code,
                               f.u.goaway.debug);
        return 0;
    case GW_H2_FT_WINDOW_UPDATE: {
        uint32_t inc = f.u.window_update.increment;
        if ((rc = count_control(s)) < 0)
            return rc;
        if (h->stream_id == 0) {
            if (s->conn_send_window + inc > GW_H2_MAX_WINDOW)
                return conn_error(s, GW_H2_FLOW_CONTROL_ERROR, "connection window overflow");
            s->conn_send_window += inc;
            return 0;
        }
        gw_h2_stream_t *st = find_stream(s, h->stream_id);
        if (!st || st->state == GW_H2_SS_CLOSED)
            return 0; /* may cross our END_STREAM or RST_STREAM (§6.9) */
        if (st->send_window + inc > GW_H2_MAX_WINDOW)
            return stream_error(s, h->stream_id, st, GW_H2_FLOW_CONTROL_ERROR, 1);
        st->send_window += inc;
        if (st->blocked && st->send_window > 0) {
            st->blocked = 0;
            gw_h2_sched_add(&s->x->sched, &st->node);
            if (s->p->cb.on_writable)
                s->p->cb.on_writable(s->user_data, st->id);
        }
        return 0;
    }
    case GW_H2_FT_PUSH_PROMISE:
        /* §8.4: a client cannot push */
        return conn_error(s, GW_H2_PROTOCOL_ERROR, "PUSH_PROMISE from a client");
    default:
        return 0;
    }
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
    if (gw_hpack_enc_init(&s->enc, p->o.encoder_table_size) < 0) {
        gw_hpack_dec_free(&s->dec);
        gw_free(s);
        return GW_E_NOMEM;
    }
    s->peer_initial_window = GW_H2_DEFAULT_WINDOW;
    s->peer_max_frame = GW_H2_DEFAULT_MAX_FRAME_SIZE;
    s->peer_max_header_list = UINT32_MAX;
    s->conn_send_window = GW_H2_DEFAULT_WINDOW;
    s->conn_recv_window = GW_H2_DEFAULT_WINDOW;
    s->settings_sent_ms = now_ms;
    s->budget_start_ms = now_ms;

    /* server preface: our SETTINGS, then open the connection window (§3.4, §6.9.2) */
    gw_h2_setting_t set[6];
    size_t n = 0;
    set[n++] =
        (gw_h2_setting_t){GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS, p->o.max_concurrent_streams};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, p->o.initial_window_size};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_MAX_FRAME_SIZE, p->o.max_frame_size};
    set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_MAX_HEADER_LIST_SIZE, p->o.max_header_list_size};
    if (p->o.header_table_size != 4096)
        set[n++] = (gw_h2_setting_t){GW_H2_SETTINGS_HEADER_TABLE_SIZE, p->o.header_table_size};
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
        drop_chunks(st);
        gw_bytes_free(&st->trailers);
        arena_free(&st->arena);
        gw_pool_put(&s->p->blocks, st);
    }
    ext_free(s->x);
    gw_hpack_dec_free(&s->dec);
    gw_hpack_enc_free(&s->enc);
    gw_bytes_free(&s->out);
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
                return conn_error(s, GW_H2_PROTOCOL_ERROR, "invalid connection preface");
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
                return conn_error(s, err.code, err.reason);
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
            if (!ext(s))
                return nomem(s);
            size_t n = s->hdr.length - s->x->in.len;
            if (n > avail)
                n = avail;
            if (gw_bytes_append(&s->x->in, buf + off, n) < 0)
                return nomem(s);
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

int gw_h2_session_tick(gw_h2_session_t *s, uint64_t now_ms)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return 0;
    roll_budget(s, now_ms);
    if (!s->settings_acked && now_ms >= s->settings_sent_ms &&
        now_ms - s->settings_sent_ms >= s->p->o.settings_timeout_ms) {
        COUNT(s, settings_timeouts);
        return conn_error(s, GW_H2_SETTINGS_TIMEOUT, "SETTINGS not acknowledged");
    }
    return 0;
}

uint64_t gw_h2_session_next_deadline(const gw_h2_session_t *s)
{
    if (s->phase == GW_H2_CONN_CLOSING || s->settings_acked)
        return UINT64_MAX;
    return s->settings_sent_ms + s->p->o.settings_timeout_ms;
}

/* ---- public: output --------------------------------------------------------------------- */

static int stream_can_send(const gw_h2_session_t *s, const gw_h2_stream_t *st)
{
    if (gw_list_empty(&st->chunks))
        return 1; /* END_STREAM or trailers need no window */
    return s->conn_send_window > 0 && st->send_window > 0 && s->data_budget > 0 &&
           st->data_budget > 0;
}

static int frame_trailers(gw_h2_session_t *s, gw_h2_stream_t *st, gw_iovq_t *q);

ssize_t gw_h2_session_send(gw_h2_session_t *s, gw_iovq_t *q)
{
    size_t before = q->bytes;
    uint8_t hdr[GW_H2_FRAME_HDR_LEN];

    if (s->out.len) {
        if (gw_iovq_copy(q, s->out.base, s->out.len) < 0)
            return GW_E_NOMEM;
        s->out.len = 0;
        s->ctrl_queued = 0;
    }
    if (s->phase == GW_H2_CONN_CLOSING || !s->x)
        return (ssize_t)(q->bytes - before);

    gw_h2_sched_node_t *node;
    while ((node = gw_h2_sched_next(&s->x->sched))) {
        gw_h2_stream_t *st = GW_CONTAINER_OF(node, gw_h2_stream_t, node);
        if (!gw_list_empty(&st->chunks)) {
            if (s->conn_send_window <= 0 || s->data_budget == 0)
                break; /* everyone waits for the connection window; streams stay queued */
            if (st->send_window <= 0 || st->data_budget == 0) {
                if (st->send_window <= 0)
                    st->blocked = 1;
                else
                    st->budget_blocked = 1;
                gw_h2_sched_remove(&s->x->sched, node);
                continue;
            }
            data_chunk_t *c = GW_CONTAINER_OF(st->chunks.next, data_chunk_t, link);
            size_t n = c->len;
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
            int last = n == c->len && c->link.next == &st->chunks;
            int eos = last && st->eos_queued && !st->has_trailers;
            gw_h2_frame_hdr_t h = {(uint32_t)n, GW_H2_FT_DATA, eos ? GW_H2_F_END_STREAM : 0,
                                   st->id};
            gw_h2_frame_hdr_pack(hdr, &h);
            if (gw_iovq_copy(q, hdr, sizeof(hdr)) < 0 || gw_iovq_ref(q, c->buf, c->off, n) < 0)
                return GW_E_NOMEM;
            s->frames_out++;
            s->conn_send_window -= n;
            st->send_window -= n;
            st->queued -= n;
            if (s->data_budget != SIZE_MAX)
                s->data_budget -= n;
            if (st->data_budget != SIZE_MAX)
                st->data_budget -= n;
            c->off += n;
            c->len -= n;
            if (c->len == 0) {
                gw_list_remove(&c->link);
                chunk_free(st, c);
            }
            if (eos) {
                local_end(s, st);
                if (!find_stream(s, h.stream_id) || st->state == GW_H2_SS_CLOSED ||
                    st->state == GW_H2_SS_HALF_CLOSED_LOCAL) {
                    if (find_stream(s, h.stream_id))
                        gw_h2_sched_remove(&s->x->sched, &st->node);
                    continue;
                }
            }
            if (gw_list_empty(&st->chunks) && !st->eos_queued) {
                gw_h2_sched_remove(&s->x->sched, node);
                if (s->p->cb.on_writable)
                    s->p->cb.on_writable(s->user_data, st->id);
                continue;
            }
            gw_h2_sched_sent(&s->x->sched, node, n);
            continue;
        }
        /* no data left: finish the stream */
        gw_h2_sched_remove(&s->x->sched, node);
        if (!st->eos_queued)
            continue;
        uint32_t sid = st->id;
        if (st->has_trailers) {
            int rc = frame_trailers(s, st, q);
            if (rc < 0) {
                /* the encoder's table may now differ from the peer's */
                conn_error_rc(s, GW_H2_INTERNAL_ERROR, "header encoding failed", rc);
                return rc;
            }
            st->has_trailers = 0;
            st->trailers.len = 0;
        } else {
            gw_h2_frame_hdr_t h = {0, GW_H2_FT_DATA, GW_H2_F_END_STREAM, sid};
            gw_h2_frame_hdr_pack(hdr, &h);
            if (gw_iovq_copy(q, hdr, sizeof(hdr)) < 0)
                return GW_E_NOMEM;
        }
        s->frames_out++;
        st->eos_queued = 0;
        local_end(s, st);
    }
    return (ssize_t)(q->bytes - before);
}

int gw_h2_session_want_read(const gw_h2_session_t *s)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return 0;
    if (s->peer_goaway && s->phase >= GW_H2_CONN_GOAWAY_SENT && s->active == 0)
        return 0;
    return 1;
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

/* ---- public: submitting ----------------------------------------------------------------- */

static gw_h2_stream_t *writable_stream(gw_h2_session_t *s, uint32_t sid)
{
    gw_h2_stream_t *st = find_stream(s, sid);
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
    rc = write_block(s, sid, f, n + extra, end_stream);
    if (rc < 0)
        s->out.len = mark;
    if (f != fst)
        gw_free(f);
    if (rc == GW_E_NOMEM) {
        /* the encoder's dynamic table may now differ from the peer's: fail the connection */
        conn_error_rc(s, GW_H2_INTERNAL_ERROR, "header encoding failed", GW_E_NOMEM);
    }
    return rc;
}

int gw_h2_session_submit_response(gw_h2_session_t *s, uint32_t stream_id, unsigned status,
                                  const gw_h2_header_t *fields, size_t n, int end_stream)
{
    gw_h2_stream_t *st = writable_stream(s, stream_id);
    char code[4];
    int rc;
    if (!st)
        return GW_E_NOENT;
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
    if (end_stream)
        local_end(s, st);
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
 * (RFC 7541 §2.3.2: the decoder's table changes in the order blocks arrive; issue 18 item 4:
 * trailers encoded at submit time but framed after their stream's DATA put the HEADERS of
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
        rc = write_block(s, st->id, f, n, 1);
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
    gw_h2_stream_t *st = find_stream(s, stream_id);
    if (!st || st->state == GW_H2_SS_CLOSED || s->phase == GW_H2_CONN_CLOSING)
        return GW_E_NOENT;
    if (gw_h2_frame_write_rst_stream(&s->out, stream_id, error_code) < 0)
        return GW_E_NOMEM;
    COUNT(s, resets_sent);
    remember_rst(s, stream_id);
    st->rst_sent = 1;
    close_stream(s, st, error_code, 0);
    return 0;
}

int gw_h2_session_submit_ping(gw_h2_session_t *s, const uint8_t *opaque8)
{
    if (s->phase == GW_H2_CONN_CLOSING)
        return GW_E_CLOSED;
    if (s->ctrl_queued >= s->p->o.max_queued_control)
        return GW_E_LIMIT;
    if (gw_h2_frame_write_ping(&s->out, 0, opaque8) < 0)
        return GW_E_NOMEM;
    s->ctrl_queued++;
    return 0;
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
    conn_error_rc(s, error_code, debug, map_code(error_code));
    s->goaway_reason = "terminated by the application";
    return s->out.len > before ? 0 : GW_E_NOMEM;
}

/* ---- public: flow control and bookkeeping ------------------------------------------------ */

int gw_h2_session_consume(gw_h2_session_t *s, uint32_t stream_id, size_t n)
{
    if (stream_id == 0)
        return credit_conn(s, n) < 0 ? GW_E_NOMEM : 0;
    gw_h2_stream_t *st = find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    if (n > st->recv_unconsumed)
        n = (size_t)st->recv_unconsumed; /* already credited when the stream closed */
    st->recv_unconsumed -= n;
    if (credit_conn(s, n) < 0)
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
    gw_h2_stream_t *st = find_stream(s, stream_id);
    if (!st || !st->seen)
        return GW_E_NOENT;
    if (st->state != GW_H2_SS_CLOSED) {
        /* the layer above gives up on a live stream: cancel it (RFC 9113 §8.1) */
        st->seen = 0;
        if (gw_h2_frame_write_rst_stream(&s->out, stream_id, GW_H2_CANCEL) == 0)
            COUNT(s, resets_sent);
        remember_rst(s, stream_id);
        st->rst_sent = 1;
        close_stream(s, st, GW_H2_CANCEL, 0); /* frees it: not seen any more */
        return 0;
    }
    stream_free(s, st);
    return 0;
}

gw_h2_stream_state_t gw_h2_session_stream_state(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = find_stream(s, stream_id);
    if (st)
        return st->state;
    if (stream_id && (stream_id & 1) && stream_id <= s->last_peer_id)
        return GW_H2_SS_CLOSED;
    return GW_H2_SS_IDLE;
}

int gw_h2_session_set_stream_data(gw_h2_session_t *s, uint32_t stream_id, void *data)
{
    gw_h2_stream_t *st = find_stream(s, stream_id);
    if (!st)
        return GW_E_NOENT;
    st->data = data;
    return 0;
}

void *gw_h2_session_get_stream_data(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = find_stream(s, stream_id);
    return st ? st->data : NULL;
}

size_t gw_h2_session_stream_queued(const gw_h2_session_t *s, uint32_t stream_id)
{
    const gw_h2_stream_t *st = find_stream(s, stream_id);
    return st ? st->queued : 0;
}

int64_t gw_h2_session_send_window(const gw_h2_session_t *s, uint32_t stream_id)
{
    if (stream_id == 0)
        return s->conn_send_window;
    const gw_h2_stream_t *st = find_stream(s, stream_id);
    return st ? st->send_window : 0;
}

int gw_h2_session_set_priority(gw_h2_session_t *s, uint32_t stream_id, int urgency, int incremental)
{
    gw_h2_stream_t *st = find_stream(s, stream_id);
    if (!st || st->state == GW_H2_SS_CLOSED)
        return GW_E_NOENT;
    if (urgency > 7)
        return GW_E_INVAL;
    uint8_t u = urgency < 0 ? st->node.urgency : (uint8_t)urgency;
    int inc = incremental < 0 ? st->node.incremental : incremental != 0;
    gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
    if (urgency >= 0 || incremental >= 0)
        mark_prio9218(s, st);
    return 0;
}

int gw_h2_session_get_priority(const gw_h2_session_t *s, uint32_t stream_id, uint8_t *urgency,
                               int *incremental)
{
    const gw_h2_stream_t *st = find_stream(s, stream_id);
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
    gw_h2_stream_t *st = find_stream(s, stream_id);
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
    const gw_h2_stream_t *st = find_stream(s, stream_id);
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
        st = *s->cold;
    else
        memset(&st, 0, sizeof(st));
    st.frames_in = s->frames_in;
    st.frames_out = s->frames_out;
    st.streams_opened = s->streams_opened;
    st.priority_evictions = s->x && s->x->tree ? gw_h2_tree_evictions(s->x->tree) : 0;
    return st;
}
