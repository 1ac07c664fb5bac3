/* h2/stream.c — the session's stream store: stream blocks with their arena, the id lookup,
 * state transitions (RFC 9113 §5.1), recently reset ids, and the priorities a stream carries
 * (RFC 9218 fields and PRIORITY_UPDATE, or the RFC 7540 tree). */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/list.h"
#include "common/pool.h"
#include "h2/frame.h"
#include "h2/sched.h"
#include "h2/session_internal.h"
#include "h2/tree.h"
#include "http/http.h"

void *gw_h2__arena_alloc(arena_t *a, size_t n)
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

void gw_h2__arena_free(arena_t *a)
{
    while (a->head) {
        arena_blk_t *n = a->head->next;
        if (!a->head->borrowed)
            gw_free(a->head);
        a->head = n;
    }
}

/* The arena block inside a stream block. */
static arena_blk_t *blk_arena(void *blk)
{
    return (arena_blk_t *)((uint8_t *)blk + STREAM_BLK_OFF);
}

void gw_h2__chunk_free(gw_h2_stream_t *st, data_chunk_t *c)
{
    gw_rbuf_unref(c->buf);
    if (c == &st->chunk0)
        st->chunk0_used = 0;
    else
        gw_free(c);
}

/* ---- small helpers -------------------------------------------------------------------- */

gw_h2_stream_t *gw_h2__find_stream(const gw_h2_session_t *s, uint32_t id)
{
    if (!s->x)
        return NULL;
    const gw_list_t *h = &s->x->streams;
    if (h->next == h->prev) { /* none or one: the slots (lines of their own) are not read */
        gw_h2_stream_t *st = h->next != h ? GW_CONTAINER_OF(h->next, gw_h2_stream_t, link) : NULL;
        return st && st->id == id ? st : NULL;
    }
    gw_h2_stream_t **slot = &s->x->cache[(id >> 1) % STREAM_CACHE];
    if (*slot && (*slot)->id == id)
        return *slot;
    gw_list_foreach(it, &s->x->streams)
    {
        gw_h2_stream_t *st = GW_CONTAINER_OF(it, gw_h2_stream_t, link);
        if (st->id == id) {
            *slot = st;
            st->cached = 1;
            return st;
        }
    }
    return NULL;
}

void gw_h2__drop_chunks(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    s->x->data_queued -= st->queued;
    gw_list_t *n;
    while ((n = gw_list_pop_front(&st->chunks))) {
        gw_h2__chunk_free(st, GW_CONTAINER_OF(n, data_chunk_t, link));
    }
    st->queued = 0;
}

void gw_h2__stream_free(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    gw_h2_sched_remove(&s->x->sched, &st->node);
    gw_h2_sched_set_live(&s->x->sched, &st->node, 0);
    if (s->x->tree)
        gw_h2_tree_close(s->x->tree, st->id);
    gw_list_remove(&st->link);
    if (st->cached) {
        gw_h2_stream_t **slot = &s->x->cache[(st->id >> 1) % STREAM_CACHE];
        if (*slot == st)
            *slot = NULL;
    }
    gw_h2__drop_chunks(s, st);
    gw_bytes_free(&st->trailers);
    gw_h2__arena_free(&st->arena);
    s->active--;
    if (st->pushed)
        s->cold->push->held--;
    gw_pool_put(&s->p->blocks, st);
}

/* A stream block whose arena block is empty, as the arena of the header block being decoded;
 * NULL when out of memory. */
void *gw_h2__blk_get(gw_h2_session_t *s, arena_t *a)
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
gw_h2_stream_t *gw_h2__stream_new(gw_h2_session_t *s, uint32_t id, void *blk, arena_t *a)
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
    gw_h2_sched_set_live(&s->x->sched, &st->node, 1); /* its response is to come */
    /* looked up by every submit from now on: alone, it is found without a slot */
    if (!gw_list_empty(&s->x->streams)) {
        s->x->cache[(id >> 1) % STREAM_CACHE] = st;
        st->cached = 1;
    }
    gw_list_push_back(&s->x->streams, &st->link);
    s->active++;
    return st;
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
int gw_h2__prio_pending_put(gw_h2_session_t *s, uint32_t sid, uint8_t u, uint8_t inc)
{
    size_t cap = s->p->o.max_concurrent_streams;
    if (!gw_h2__ext(s))
        return gw_h2__nomem(s);
    if (!s->x->prio_pend) {
        s->x->prio_pend = gw_calloc(cap, sizeof(*s->x->prio_pend));
        if (!s->x->prio_pend)
            return gw_h2__nomem(s);
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
void gw_h2__mark_prio9218(gw_h2_session_t *s, gw_h2_stream_t *st)
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
int gw_h2__apply_7540(gw_h2_session_t *s, uint32_t sid, const gw_h2_priority_t *p)
{
    if (!gw_h2__ext(s) || ensure_tree(s) < 0)
        return gw_h2__nomem(s);
    (void)gw_h2_tree_set(s->x->tree, sid, p->dependency, (unsigned)p->weight + 1u, p->exclusive);
    return 0;
}

/* A stream opens: its priority is the request's priority field (RFC 9218 §5), overridden by a
 * PRIORITY_UPDATE that arrived before the stream (§7.1: the frame is the later signal). */
void gw_h2__apply_open_priority(gw_h2_session_t *s, gw_h2_stream_t *st, gw_slice_t field)
{
    uint8_t u = GW_HTTP_PRIO_DEFAULT_URGENCY, inc = 0;
    if (prio_pending_take(s, st->id, &u, &inc))
        st->prio9218 = 1;
    else if (field.base) {
        gw_http_priority_parse(field, &u, &inc);
        st->prio9218 = 1;
    }
    gw_h2_sched_set_priority(&s->x->sched, &st->node, u, inc);
}

/* Streams we reset are forgotten soon; frames the peer sent before it saw our RST_STREAM are
 * ignored rather than answered (RFC 9113 §5.1 "closed"). */
void gw_h2__remember_rst(gw_h2_session_t *s, uint32_t sid)
{
    /* allocated on the first reset, kept for the connection's life (without memory the
     * stream is not remembered: late frames on it then count as errors) */
    if (!s->recent_rst && !(s->recent_rst = gw_calloc(RECENT_RST, sizeof(*s->recent_rst))))
        return;
    s->recent_rst[s->recent_rst_pos++ % RECENT_RST] = sid;
}

int gw_h2__recently_reset(const gw_h2_session_t *s, uint32_t sid)
{
    for (size_t i = 0; s->recent_rst && i < RECENT_RST; i++)
        if (s->recent_rst[i] == sid)
            return 1;
    return 0;
}

/* The stream reached "closed": unqueue, give the unconsumed window back, tell the layer above
 * (which releases it later) or free it if the layer above never saw it. */
void gw_h2__close_stream(gw_h2_session_t *s, gw_h2_stream_t *st, uint32_t code, int by_peer)
{
    st->state = GW_H2_SS_CLOSED;
    if (st->push_open) {
        st->push_open = 0;
        s->cold->push->open--;
    }
    gw_h2_sched_remove(&s->x->sched, &st->node);
    gw_h2_sched_set_live(&s->x->sched, &st->node, 0);
    if (s->x->tree) /* stays as a placeholder (RFC 7540 §5.3.4) */
        gw_h2_tree_close(s->x->tree, st->id);
    gw_h2__drop_chunks(s, st);
    if (st->recv_unconsumed) {
        (void)gw_h2__credit_conn(s, st->recv_unconsumed);
        st->recv_unconsumed = 0;
    }
    if (st->seen) {
        if (s->p->cb.on_close)
            s->p->cb.on_close(s->user_data, st->id, code, by_peer);
    } else {
        gw_h2__stream_free(s, st);
    }
}

/* Our side sent END_STREAM. */
void gw_h2__local_end(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    gw_h2_sched_set_live(&s->x->sched, &st->node, 0);
    if (st->state == GW_H2_SS_OPEN)
        st->state = GW_H2_SS_HALF_CLOSED_LOCAL;
    else if (st->state == GW_H2_SS_HALF_CLOSED_REMOTE)
        gw_h2__close_stream(s, st, GW_H2_NO_ERROR, 0);
}

/* The peer sent END_STREAM. Returns 0 or a fatal code. */
int gw_h2__remote_end(gw_h2_session_t *s, gw_h2_stream_t *st)
{
    uint32_t id = st->id;
    if (st->state == GW_H2_SS_OPEN)
        st->state = GW_H2_SS_HALF_CLOSED_REMOTE;
    else if (st->state == GW_H2_SS_HALF_CLOSED_LOCAL)
        st->state = GW_H2_SS_CLOSED; /* on_close after on_end_stream */
    if (s->p->cb.on_end_stream && st->seen) {
        int rc = s->p->cb.on_end_stream(s->user_data, id);
        st = gw_h2__find_stream(s, id); /* the callback may have released it */
        if (rc < 0 && gw_err_is_fatal(rc))
            return gw_h2__conn_error_rc(s, GW_H2_INTERNAL_ERROR, "application error", rc);
        if (!st)
            return 0;
        if (rc < 0 && st->state != GW_H2_SS_CLOSED)
            return gw_h2__stream_error(s, id, st, GW_H2_INTERNAL_ERROR, 0);
    }
    if (st->state == GW_H2_SS_CLOSED && !st->rst_sent)
        gw_h2__close_stream(s, st, GW_H2_NO_ERROR, 0);
    return 0;
}
