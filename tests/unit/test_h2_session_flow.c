/* test_h2_session_flow.c — split from test_h2_session.c (same helpers, h2_session_util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/session.h"
#include "h2_session_util.h"

/* Streams 1 and 3 of s answered: a 200 head, then rb[0..len) (end: with END_STREAM). */
static void answer_1_and_3(gw_h2_session_t *s, gw_rbuf_t *rb, size_t len, int end)
{
    for (uint32_t sid = 1; sid <= 3; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, len, end), 0);
    }
}

static void flow_control_backpressure(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.initial_window_size = 65536;
    opt.connection_window_size = 65536 * 4;
    gw_h2_session_t *s = ready(&r, &c, &opt);
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&c, 1, 0, P);
    static uint8_t chunk[16384];
    memset(chunk, 'a', sizeof(chunk));
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    cli_send(s, &c);
    /* no WINDOW_UPDATE while nothing is consumed */
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    /* the window is spent: one more byte is a stream FLOW_CONTROL_ERROR */
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "x", 1, 0, 0), 0);
    rec_t r2;
    cli_t c2;
    gw_h2_session_t *s2 = ready(&r2, &c2, &opt);
    cli_headers(&c2, 1, 0, P);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gw_h2_frame_write_data(&c2.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_data(&c2.b, 1, 0, "x", 1, 0, 0), 0);
    cli_exchange(s2, &c2, &o);
    expect_rst(&o, 1, GW_H2_FLOW_CONTROL_ERROR);
    session_end(s2, &c2);

    /* consuming less than half: still nothing; half: stream and connection updates */
    assert_int_equal(gw_h2_session_consume(s, 1, 16384), 0);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    assert_int_equal(gw_h2_session_consume(s, 1, 16384), 0);
    drain(s, &o);
    const outf_t *w = find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0);
    assert_non_null(w);
    assert_int_equal(w->h.stream_id, 1);
    assert_int_equal(get32(w->p), 32768);
    assert_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 1)); /* connection: 32 KiB < half */
    assert_int_equal(gw_h2_session_consume(s, 1, 32768), 0);
    assert_int_equal(gw_h2_session_consume(s, 1, 1000), 0); /* more than delivered: capped */
    drain(s, &o);
    assert_non_null(find_type(&o, GW_H2_FT_WINDOW_UPDATE, 0));
    assert_int_equal(gw_h2_session_consume(s, 99, 1), GW_E_NOENT);
    session_end(s, &c);
}

static void connection_window_exceeded(void **state)
{
    sfix_t *f = *state;
    f->opt.initial_window_size = 65535;
    f->opt.connection_window_size = 65535;
    gw_h2_session_t *s = fready(f);
    static uint8_t chunk[16384];
    const char *const P[] = {":method", "POST", ":scheme", "https", ":path", "/", NULL};
    cli_headers(&f->c, 1, 0, P);
    cli_headers(&f->c, 3, 0, P);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gw_h2_frame_write_data(&f->c.b, 1, 0, chunk, sizeof(chunk), 0, 0), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(gw_h2_frame_write_data(&f->c.b, 3, 0, chunk, sizeof(chunk), 0, 0), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_FLOW);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_FLOW_CONTROL_ERROR);
}

/* The fixture's client asks kv on streams 1 and 3 under the initial window; s answers both
 * whole from a new len-byte buffer (returned: the caller unrefs it), drained into f->o. */
static gw_rbuf_t *get_1_and_3_answered(sfix_t *f, gw_h2_session_t *s, uint32_t window,
                                       const char *const *kv, size_t len)
{
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, window);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, kv);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, kv);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(len);
    answer_1_and_3(s, rb, len, 1);
    drain(s, &f->o);
    return rb;
}

static void round_robin_and_connection_window(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    /* incremental (RFC 9218 §4.2): the scheduler takes turns one frame each */
    gw_rbuf_t *rb = get_1_and_3_answered(f, s, 1 << 20, GET_I, 40000);
    /* 2 HEADERS, then DATA alternating between the streams until the connection window
     * (65535) is spent */
    assert_int_equal(f->o.n, 6);
    const uint32_t order[] = {1, 3, 1, 3};
    const uint32_t lens[] = {16384, 16384, 16384, 16383};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(f->o.f[2 + i].h.type, GW_H2_FT_DATA);
        assert_int_equal(f->o.f[2 + i].h.stream_id, order[i]);
        assert_int_equal(f->o.f[2 + i].h.length, lens[i]);
    }
    assert_int_equal(gw_h2_session_send_window(s, 0), 0);
    assert_false(gw_h2_session_want_write(s));
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 100000), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &f->o);
    size_t total = 0;
    int eos = 0;
    for (size_t i = 0; i < f->o.n; i++) {
        total += f->o.f[i].h.length;
        eos += (f->o.f[i].h.flags & GW_H2_F_END_STREAM) != 0;
    }
    assert_int_equal(total, 80000 - 65535);
    assert_int_equal(eos, 2);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
}

/* Stream ids of the DATA frames in o, from index from; returns the count. */
static size_t data_order(const outs_t *o, size_t from, uint32_t *ids, size_t max)
{
    size_t k = 0;
    for (size_t i = from; i < o->n && k < max; i++)
        if (o->f[i].h.type == GW_H2_FT_DATA)
            ids[k++] = o->f[i].h.stream_id;
    return k;
}

/* RFC 9218: the request field is applied at open (u=0 stream 5 first), non-incremental
 * streams of one urgency go one at a time by id (1 before 3), PRIORITY_UPDATE re-queues an
 * open stream (3 raised to u=1) and, sent before the stream, applies when it opens (7). */
static void priority_scheduling(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    /* PRIORITY_UPDATE about idle stream 7 first (§7.1), then the requests */
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 7, "u=2", 3), 0);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 5, GW_H2_F_END_STREAM, GET_U0);
    cli_headers(&f->c, 7, GW_H2_F_END_STREAM, GET_U0); /* the earlier frame wins: u=2 */
    cli_send(s, &f->c);
    uint8_t u;
    int inc;
    assert_int_equal(gw_h2_session_get_priority(s, 5, &u, &inc), 0);
    assert_int_equal(u, 0);
    assert_int_equal(gw_h2_session_get_priority(s, 7, &u, &inc), 0);
    assert_int_equal(u, 2);
    assert_int_equal(gw_h2_session_get_priority(s, 1, &u, &inc), 0);
    assert_int_equal(u, 3);
    assert_int_equal(inc, 0);
    drain(s, &f->o);
    /* 20000 bytes each: two frames per stream at the default 16384 max frame size */
    gw_rbuf_t *rb = gw_rbuf_new(20000);
    for (uint32_t sid = 1; sid <= 7; sid += 2) {
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 20000, 1), 0);
    }
    /* raise 3 above 1 (but below 5 and 7) before anything is framed; open the connection
     * window for all 80000 bytes */
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 3, "u=1", 3), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 100000), 0);
    cli_exchange(s, &f->c, &f->o);
    uint32_t ids[16];
    size_t n = data_order(&f->o, 0, ids, 16);
    const uint32_t want[] = {5, 5, 3, 3, 7, 7, 1, 1};
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    /* set_priority: unknown/closed stream and range */
    assert_int_equal(gw_h2_session_set_priority(s, 5, 1, 0), GW_E_NOENT);
    assert_int_equal(gw_h2_session_set_priority(s, 99, 1, 0), GW_E_NOENT);
    gw_rbuf_unref(rb);
}

/* DATA payload bytes of the frames in o, and of stream sid among them (0: every stream). */
static size_t data_bytes(const outs_t *o, uint32_t sid)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->f[i].h.type == GW_H2_FT_DATA && (!sid || o->f[i].h.stream_id == sid))
            n += o->f[i].h.length;
    return n;
}

/* gw_h2_session_send_some frames DATA only up to its bound (the last frame may pass it), and
 * the scheduler picks again at the next call: a more urgent stream that got its DATA in
 * between goes first, ahead of what an unbounded send would already have framed. Control
 * frames go whatever the bound, 0 included. */
static void send_some_decides_late(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET_U0);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 1 << 20), 0);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(60000);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 60000, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 3, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_data_queued(s), 60000);
    /* 20000: two frames of stream 1 (the second passes the bound), the HEADERS of both */
    drain_some(s, &f->o, 20000);
    assert_non_null(find_type(&f->o, GW_H2_FT_HEADERS, 1));
    assert_int_equal(data_bytes(&f->o, 1), 2 * 16384);
    assert_int_equal(gw_h2_session_data_queued(s), 60000 - 2 * 16384);
    assert_true(gw_h2_session_want_write(s));
    /* the urgent stream's body arrives: it goes before the rest of stream 1 */
    assert_int_equal(gw_h2_session_submit_data(s, 3, rb, 0, 10000, 1), 0);
    drain_some(s, &f->o, 1);
    assert_int_equal(data_bytes(&f->o, 0), 10000);
    assert_int_equal(data_bytes(&f->o, 3), 10000);
    assert_true(find_type(&f->o, GW_H2_FT_DATA, 0)->h.flags & GW_H2_F_END_STREAM);
    /* 0: a PING is answered, no DATA goes */
    assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 0, (const uint8_t *)"12345678"), 0);
    cli_send(s, &f->c);
    drain_some(s, &f->o, 0);
    assert_non_null(find_type(&f->o, GW_H2_FT_PING, 0));
    assert_null(find_type(&f->o, GW_H2_FT_DATA, 0));
    /* unbounded: all the rest */
    drain(s, &f->o);
    assert_int_equal(data_bytes(&f->o, 1), 60000 - 2 * 16384);
    assert_int_equal(gw_h2_session_data_queued(s), 0);
    assert_false(gw_h2_session_want_write(s));
    gw_rbuf_unref(rb);
}

/* The pacing view (front/h2_stream.c h2_pacing_mode) counts the live streams, the DATA queued
 * behind the most urgent of them, and what the stream that sends next has framed already: a
 * response alone on its connection is paced once it has sent h2.bulk_lowat, so that a more
 * urgent request that comes later finds little of it in the kernel. */
static void pacing_view_of_live_streams(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 1 << 20), 0);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(60000);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 60000, 0), 0);
    gw_h2_pacing_view_t v;
    gw_h2_session_pacing_view(s, 1000, &v);
    assert_int_equal(v.live, 1);
    assert_true(v.one_class);
    assert_int_equal(v.behind, 0);
    assert_int_equal(v.next_sent, 0);
    drain_some(s, &f->o, 20000); /* two frames */
    gw_h2_session_pacing_view(s, 1000, &v);
    assert_int_equal(v.next_sent, 2 * 16384);
    /* a more urgent request: it is live before its origin answers, and what stream 1 has
     * queued is behind it (the count stops past `enough`, a whole stream at a time) */
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET_U0);
    cli_send(s, &f->c); /* fed, not drained: stream 1's DATA stays queued */
    gw_h2_session_pacing_view(s, 1000, &v);
    assert_int_equal(v.live, 2);
    assert_false(v.one_class);
    assert_int_equal(v.behind, 60000 - 2 * 16384);
    assert_int_equal(v.next_sent, 2 * 16384);
    /* its DATA comes: it sends next, and has sent nothing yet */
    assert_int_equal(gw_h2_session_submit_response(s, 3, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 3, rb, 0, 100, 0), 0);
    gw_h2_session_pacing_view(s, 1000, &v);
    assert_int_equal(v.next_sent, 0);
    drain(s, &f->o);
    gw_h2_session_pacing_view(s, 1000, &v);
    assert_int_equal(v.live, 2);      /* neither ended */
    assert_int_equal(v.next_sent, 0); /* nothing queued */
    gw_rbuf_unref(rb);
}

/* A DATA frame spans the chunks a body was submitted in: the origin's reads end wherever its
 * read buffers do, and a frame per piece cost a frame header and, over TLS, records for pieces
 * of a few KiB. Three chunks from two buffers, 10000 + 10000 + 3000 bytes: one full frame
 * (RFC 9113 §4.2, the default SETTINGS_MAX_FRAME_SIZE) and the rest, in order. */
static void data_frames_span_chunks(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *a = gw_rbuf_new(10000), *b = gw_rbuf_new(13000);
    memset(a->data, 'a', 10000);
    for (size_t i = 0; i < 13000; i++)
        b->data[i] = (uint8_t)(i % 251);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, a, 0, 10000, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, b, 0, 10000, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, b, 10000, 3000, 1), 0);
    drain(s, &f->o);
    const outf_t *d0 = find_type(&f->o, GW_H2_FT_DATA, 0);
    const outf_t *d1 = find_type(&f->o, GW_H2_FT_DATA, 1);
    assert_non_null(d0);
    assert_non_null(d1);
    assert_null(find_type(&f->o, GW_H2_FT_DATA, 2));
    assert_int_equal(d0->h.length, 16384);
    assert_int_equal(d0->h.flags & GW_H2_F_END_STREAM, 0);
    assert_int_equal(d0->p[0], 'a');
    assert_int_equal(d1->h.length, 23000 - 16384);
    assert_true(d1->h.flags & GW_H2_F_END_STREAM);
    assert_int_equal(d1->p[0], (16384 - 10000) % 251); /* where the first frame left b */
    assert_int_equal(gw_h2_session_data_queued(s), 0);
    gw_rbuf_unref(a);
    gw_rbuf_unref(b);
}

/* gw_h2_session_set_priority re-queues a stream with DATA waiting (RFC 9218 §8), -1 keeps a
 * parameter; PRIORITY_UPDATE for a closed stream or an even id is ignored; the idle-stream
 * buffer keeps at most max_concurrent_streams entries, the oldest dropped. */
static void priority_set_and_pending_bound(void **state)
{
    sfix_t *f = *state;
    f->opt.max_concurrent_streams = 2;
    gw_h2_session_t *s = fready(f);
    /* the connection window stays shut, so DATA waits */
    gw_rbuf_t *rb = get_1_and_3_answered(f, s, 0, GET, 100);
    assert_int_equal(gw_h2_session_set_priority(s, 3, 8, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_session_set_priority(s, 3, 2, -1), 0);
    assert_int_equal(gw_h2_session_set_priority(s, 1, -1, 1), 0);
    uint8_t u;
    int inc;
    assert_int_equal(gw_h2_session_get_priority(s, 1, &u, &inc), 0);
    assert_int_equal(u, 3);
    assert_int_equal(inc, 1);
    /* even id and ids that opened already are ignored; 5, 7, 9 buffered, 5 dropped (cap 2) */
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 2, "u=0", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 5, "u=0", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 7, "u=6", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 9, "u=1", 3), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 9, "u=4, i", 6), 0);
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 100);
    cli_exchange(s, &f->c, &f->o);
    uint32_t ids[8];
    assert_int_equal(data_order(&f->o, 0, ids, 8), 2);
    assert_int_equal(ids[0], 3); /* u=2 before u=3 */
    assert_int_equal(ids[1], 1);
    for (uint32_t sid = 1; sid <= 3; sid += 2)
        assert_int_equal(gw_h2_session_stream_release(s, sid), 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 1, "u=0", 3), 0); /* closed */
    cli_headers(&f->c, 5, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 9, GW_H2_F_END_STREAM, GET); /* 7 never opens */
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_get_priority(s, 5, &u, &inc), 0);
    assert_int_equal(u, 3); /* its update was the oldest and was dropped */
    assert_int_equal(gw_h2_session_get_priority(s, 9, &u, &inc), 0);
    assert_int_equal(u, 4); /* the most recent update for 9 */
    assert_int_equal(inc, 1);
    gw_rbuf_unref(rb);
}

/* The bandwidth hook: the connection budget cuts DATA frames to fit and stops DATA at 0
 * (HEADERS still go); a stream budget holds back that stream only, and a new budget queues
 * it again. */
static void data_budget(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 1 << 20), 0);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    assert_true(gw_h2_session_data_budget(s, 0) == SIZE_MAX);
    assert_true(gw_h2_session_data_budget(s, 1) == SIZE_MAX);
    assert_int_equal(gw_h2_session_data_budget(s, 99), 0);
    assert_int_equal(gw_h2_session_set_data_budget(s, 99, 5), GW_E_NOENT);

    assert_int_equal(gw_h2_session_set_data_budget(s, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    rb->len = 40000;
    answer_1_and_3(s, rb, 40000, 1);
    /* budget 0: the heads go, no DATA; want_write says nothing is left */
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(f->o.f[1].h.type, GW_H2_FT_HEADERS);
    assert_false(gw_h2_session_want_write(s));

    /* 20000 bytes: 16384 then 3616 on stream 1 (a frame cut to fit; the RFC 9218 scheduler
     * serves non-incremental streams of one urgency one at a time) */
    assert_int_equal(gw_h2_session_set_data_budget(s, 0, 20000), 0);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[0].h.stream_id, 1);
    assert_int_equal(f->o.f[0].h.length, 16384);
    assert_int_equal(f->o.f[1].h.stream_id, 1);
    assert_int_equal(f->o.f[1].h.length, 3616);
    assert_int_equal(gw_h2_session_data_budget(s, 0), 0);
    assert_int_equal(gw_h2_session_stream_queued(s, 1), 40000 - 20000);
    assert_int_equal(gw_h2_session_stream_queued(s, 3), 40000);
    assert_false(gw_h2_session_want_write(s));

    /* stream 1 limited to 1000 more, the connection unlimited: stream 3 finishes, stream 1
     * sends 1000 and waits */
    assert_int_equal(gw_h2_session_set_data_budget(s, 1, 1000), 0);
    assert_int_equal(gw_h2_session_set_data_budget(s, 0, SIZE_MAX), 0);
    drain(s, &f->o);
    size_t on1 = 0, on3 = 0;
    int eos3 = 0;
    for (size_t i = 0; i < f->o.n; i++) {
        assert_int_equal(f->o.f[i].h.type, GW_H2_FT_DATA);
        if (f->o.f[i].h.stream_id == 1)
            on1 += f->o.f[i].h.length;
        else
            on3 += f->o.f[i].h.length, eos3 |= f->o.f[i].h.flags & GW_H2_F_END_STREAM;
    }
    assert_int_equal(on1, 1000);
    assert_int_equal(on3, 40000);
    assert_true(eos3);
    assert_int_equal(gw_h2_session_data_budget(s, 1), 0);
    assert_false(gw_h2_session_want_write(s));
    drain(s, &f->o);
    assert_int_equal(f->o.n, 0); /* held back: nothing spins */

    /* a new stream budget queues it again; SIZE_MAX lets it finish */
    assert_int_equal(gw_h2_session_set_data_budget(s, 1, SIZE_MAX), 0);
    assert_true(gw_h2_session_want_write(s));
    drain(s, &f->o);
    size_t rest = 0;
    for (size_t i = 0; i < f->o.n; i++)
        rest += f->o.f[i].h.length;
    assert_int_equal(rest, 40000 - 20000 - 1000);
    assert_true(f->o.f[f->o.n - 1].h.flags & GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
}

static void on_writable(void *ud, uint32_t sid)
{
    rec_t *r = ud;
    logf_(r, "writable %u;", sid);
    gw_h2_session_stream_release(r->s, sid); /* releasing from a callback is allowed */
}

/* on_writable after a window opens (SETTINGS delta and WINDOW_UPDATE) and when the queue
 * drains; the callback may release the stream. */
static void writable_events(void **state)
{
    (void)state;
    gw_h2_callbacks_t cb2 = cbs;
    cb2.on_writable = on_writable;
    rec_t r;
    gw_h2_session_t *s = server_cb(&r, NULL, &cb2);
    cli_t c;
    outs_t o;
    cli_init(&c, 1);
    cli_setting(&c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    gw_rbuf_t *rb = gw_rbuf_new(10);
    answer_1_and_3(s, rb, 10, 0);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_DATA, 0));
    r.len = 0;
    r.log[0] = 0;
    cli_setting(&c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 5);
    cli_send(s, &c);
    /* both woken; the callback released both (cancelled: RST_STREAM CANCEL) */
    assert_string_equal(r.log, "writable 1;writable 3;");
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_CANCEL);
    expect_rst(&o, 3, GW_H2_CANCEL);
    assert_null(find_type(&o, GW_H2_FT_DATA, 0));
    gw_rbuf_unref(rb);
    session_end(s, &c);
}

static void on_writable_log(void *ud, uint32_t sid)
{
    logf_((rec_t *)ud, "writable %u;", sid);
}

/* With writable_lowat, on_writable also comes once the stream's queue falls to it (so the
 * layer above refills it before it runs dry), once per crossing, and when it is empty. */
static void writable_at_lowat(void **state)
{
    (void)state;
    gw_h2_callbacks_t cb2 = cbs;
    cb2.on_writable = on_writable_log;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.writable_lowat = 40000;
    rec_t r;
    gw_h2_session_t *s = server_cb(&r, &opt, &cb2);
    cli_t c;
    outs_t o;
    cli_init(&c, 1);
    cli_setting(&c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 0, 1 << 20), 0);
    cli_send(s, &c);
    drain(s, &o);
    gw_rbuf_t *rb = gw_rbuf_new(70000);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 70000, 0), 0);
    r.len = 0;
    r.log[0] = 0;
    drain_some(s, &o, 16384); /* 53616 left: above the mark */
    assert_string_equal(r.log, "");
    drain_some(s, &o, 16384); /* 37232 left: crossed */
    assert_string_equal(r.log, "writable 1;");
    drain_some(s, &o, 16384); /* 20848: still below, no second call */
    assert_string_equal(r.log, "writable 1;");
    /* refilled above the mark, then drained to empty: the crossing, then the empty queue */
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 30000, 0), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_session_stream_queued(s, 1), 0);
    assert_string_equal(r.log, "writable 1;writable 1;writable 1;");
    gw_rbuf_unref(rb);
    session_end(s, &c);
}

static void initial_window_change(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 100);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(1000);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 1000, 1), 0);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[1].h.length, 100);
    assert_false(gw_h2_session_want_write(s));
    /* lowering makes the window negative (§6.9.2) */
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 50);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_send_window(s, 1), -50);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 1); /* the ACK only */
    /* raising applies the delta to the open stream */
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 450);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_send_window(s, 1), 350);
    drain(s, &f->o);
    const outf_t *d = find_type(&f->o, GW_H2_FT_DATA, 0);
    assert_non_null(d);
    assert_int_equal(d->h.length, 350);
    /* WINDOW_UPDATE opens the rest; END_STREAM rides on the last DATA */
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, 550), 0);
    cli_exchange(s, &f->c, &f->o);
    assert_int_equal(f->o.n, 1);
    assert_int_equal(f->o.f[0].h.length, 550);
    assert_int_equal(f->o.f[0].h.flags, GW_H2_F_END_STREAM);
    /* overflow of a stream window via SETTINGS is a connection error */
    gw_rbuf_unref(rb);
}

static void window_overflow(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, GW_H2_MAX_WINDOW), 0);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 1, GW_H2_FLOW_CONTROL_ERROR);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, GW_H2_MAX_WINDOW), 0);
    assert_int_equal(feed(s, &f->c.b), GW_E_FLOW);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_FLOW_CONTROL_ERROR);
    /* SETTINGS_INITIAL_WINDOW_SIZE pushing an open stream past 2^31-1 */
    s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 1, GW_H2_MAX_WINDOW - 65535), 0);
    cli_setting(&f->c, GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65536);
    assert_int_equal(feed(s, &f->c.b), GW_E_FLOW);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_FLOW_CONTROL_ERROR);
}

/* SETTINGS_INITIAL_WINDOW_SIZE: applied once per frame, the values are still checked one by
 * one (RFC 9113 §6.5.3 processes them in order, §6.9.2: any change that takes a stream window
 * past 2^31-1 is a FLOW_CONTROL_ERROR), whichever entry carries it. */
static void settings_each_initial_window_value_checked(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s;
    /* stream 1's window grew by 1000 past the initial one: 2^31-1 as the initial window takes
     * it past the maximum, even though the frame ends at 65535 again */
    for (int boundary = 0; boundary < 2; boundary++) {
        s = ready(&r, &c, NULL);
        cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
        assert_int_equal(gw_h2_frame_write_window_update(&c.b, 1, 1000), 0);
        const gw_h2_setting_t set[3] = {
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 70000},
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, GW_H2_MAX_WINDOW - (boundary ? 1000 : 999)},
            {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}};
        assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, set, 3), 0);
        if (boundary) { /* exactly 2^31-1 at the peak: allowed, and the last value counts */
            assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
            assert_int_equal(gw_h2_session_send_window(s, 1), 65535 + 1000);
            drain(s, &o);
            assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
        } else {
            assert_int_equal(feed(s, &c.b), GW_E_FLOW);
            drain(s, &o);
            expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
        }
        session_end(s, &c);
    }
    /* a value above 2^31-1 is a FLOW_CONTROL_ERROR in any entry, not only the last */
    s = ready(&r, &c, NULL);
    const gw_h2_setting_t bad[2] = {{GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 0x80000000u},
                                    {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}};
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 0, bad, 2), 0);
    assert_int_equal(feed(s, &c.b), GW_E_FLOW);
    drain(s, &o);
    expect_goaway(&o, GW_H2_FLOW_CONTROL_ERROR);
    session_end(s, &c);
}

static void on_priority(void *ud, uint32_t sid, gw_slice_t v)
{
    logf_((rec_t *)ud, "prio %u %.*s;", sid, SL(v));
}

static int on_data_reset(void *ud, uint32_t sid, const uint8_t *d, size_t len)
{
    rec_t *r = ud;
    (void)d;
    logf_(r, "data %u %zu;", sid, len);
    /* reset from inside the callback; on_close releases the stream at once */
    assert_int_equal(gw_h2_session_submit_rst(r->s, sid, GW_H2_CANCEL), 0);
    return 0;
}

static void priority_and_callbacks(void **state)
{
    (void)state;
    gw_h2_callbacks_t cb2 = cbs;
    cb2.on_priority = on_priority;
    cb2.on_data = on_data_reset;
    rec_t r;
    gw_h2_session_t *s = server_cb(&r, NULL, &cb2);
    cli_t c;
    outs_t o;
    r.release_on_close = 1;
    cli_init(&c, 1);
    const char *const P[] = {":method", "POST",     ":scheme", "https", ":path",
                             "/",       "priority", "u=2",     NULL};
    cli_headers(&c, 1, 0, P);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 1, "u=0, i", 6), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "abc", 3, 0, 0), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "def", 3, 0, 0), 0);
    /* HEADERS depending on itself: stream error, the next request still decodes */
    const gw_h2_priority_t self = {3, 10, 0};
    gw_bytes_t blk;
    block(&c, &blk, GET);
    assert_int_equal(gw_h2_frame_write_headers(&c.b, 3, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                               &self, blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
    cli_headers(&c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "prio 1 u=2;req 1 POST https  / cl=-1 es=0 priority=u=2;"
                               "prio 1 u=0, i;data 1 3;close 1 CANCEL 0;"
                               "req 5 GET https example.com /a cl=-1 es=1;end 5;");
    drain(s, &o);
    expect_rst(&o, 1, GW_H2_CANCEL);
    expect_rst(&o, 3, GW_H2_PROTOCOL_ERROR);
    assert_int_equal(gw_h2_session_active_streams(s), 1);
    /* interim then final response; submit errors */
    assert_int_equal(gw_h2_session_submit_response(s, 5, 103, NULL, 0, 1), GW_E_INVAL);
    assert_int_equal(gw_h2_session_submit_response(s, 5, 103, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(4);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 0, 4, 0), GW_E_INVAL); /* no head */
    assert_int_equal(gw_h2_session_submit_response(s, 5, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 2, 4, 0), GW_E_INVAL); /* range */
    assert_int_equal(gw_h2_session_submit_data(s, 5, NULL, 0, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 5, rb, 0, 4, 0), GW_E_INVAL); /* ended */
    assert_int_equal(gw_h2_session_submit_response(s, 7, 200, NULL, 0, 0), GW_E_NOENT);
    drain(s, &o);
    assert_int_equal(o.n, 3);
    assert_int_equal(o.f[2].h.type, GW_H2_FT_DATA);
    assert_int_equal(o.f[2].h.length, 0);
    assert_int_equal(o.f[2].h.flags, GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    /* the layer above ends the connection */
    assert_int_equal(gw_h2_session_terminate(s, GW_H2_INTERNAL_ERROR, "shutting down"), 0);
    assert_false(gw_h2_session_want_read(s));
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_CLOSING);
    assert_string_equal(gw_h2_conn_phase_str(GW_H2_CONN_CLOSING), "closing");
    drain(s, &o);
    expect_goaway(&o, GW_H2_INTERNAL_ERROR);
    assert_memory_equal(find_type(&o, GW_H2_FT_GOAWAY, 0)->p + 8, "shutting down", 13);
    assert_true(gw_h2_session_should_close(s));
    gw_rbuf_unref(rb);
    session_end(s, &c);
}

/* ---- RFC 7540 priority tree ------------------------------------------------------------- */

static void cli_headers_pri(cli_t *c, uint32_t sid, const gw_h2_priority_t *pri,
                            const char *const *kv)
{
    gw_bytes_t blk;
    block(c, &blk, kv);
    assert_int_equal(gw_h2_frame_write_headers(&c->b, sid, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                               pri, blk.base, blk.len, 0, 0),
                     0);
    gw_bytes_free(&blk);
}

static const char *const GET_U3[] = {":method",    "GET",         ":scheme", "https",
                                     ":authority", "example.com", ":path",   "/a",
                                     "priority",   "u=3",         NULL};

/* HEADERS with the PRIORITY flag: weights 1 and 3 on the root split 8 frames 2:6 (RFC 7540
 * §5.3.2); a stream with an RFC 9218 signal (7, priority: u=3) goes before the tree class;
 * nothing is sent about the tree in SETTINGS. */
static void tree_headers_weights(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    const gw_h2_priority_t w1 = {0, 0, 0}, w3 = {0, 2, 0};
    cli_headers_pri(&f->c, 1, &w1, GET);
    cli_headers_pri(&f->c, 3, &w3, GET);
    cli_headers(&f->c, 7, GW_H2_F_END_STREAM, GET_U3);
    /* stream windows wide open; the connection window holds 8 frames + 1000 bytes */
    for (uint32_t sid = 1; sid <= 7; sid += 2)
        assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, sid, 1 << 20), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 8 * 16384 + 1000 - 65535), 0);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(200000);
    assert_int_equal(gw_h2_session_submit_response(s, 7, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 7, rb, 0, 1000, 1), 0);
    answer_1_and_3(s, rb, 200000, 1);
    drain(s, &f->o);
    uint32_t ids[32] = {0};
    size_t n = data_order(&f->o, 0, ids, 32), c1 = 0, c3 = 0;
    assert_int_equal(n, 9);
    assert_int_equal(ids[0], 7);
    for (size_t i = 1; i < n; i++) {
        c1 += ids[i] == 1;
        c3 += ids[i] == 3;
    }
    assert_int_equal(c1, 2);
    assert_int_equal(c3, 6);
    gw_rbuf_unref(rb);
}

/* A PRIORITY frame on an idle stream (RFC 7540 §5.3.4 placeholder) gives the stream its place
 * when it opens: 3 depends on 1, so 1 sends everything first (parent before child); a
 * PRIORITY_UPDATE (RFC 9218) takes 5 out of the tree: it goes first at u=2. */
static void tree_priority_frame_idle(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    const gw_h2_priority_t on1 = {1, 255, 0};
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_priority(&f->c.b, 3, &on1), 0);
    assert_int_equal(gw_h2_frame_write_priority(&f->c.b, 5, &on1), 0);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 5, GW_H2_F_END_STREAM, GET);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 5, "u=2", 3), 0);
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 0, 1 << 20), 0);
    cli_exchange(s, &f->c, &f->o);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    for (uint32_t sid = 3; sid <= 5; sid += 2) { /* the child's data is there first */
        assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
        assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 0, 20000, 1), 0);
    }
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 40000, 1), 0);
    drain(s, &f->o);
    uint32_t ids[16];
    size_t n = data_order(&f->o, 0, ids, 16);
    const uint32_t want[] = {5, 5, 1, 1, 1, 3, 3};
    assert_int_equal(n, 7);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    gw_rbuf_unref(rb);
}

/* PRIORITY errors are stream errors (RFC 9113 §5.3.1, §6.3): self-dependency ->
 * RST_STREAM PROTOCOL_ERROR, length other than 5 -> RST_STREAM FRAME_SIZE_ERROR; the
 * connection lives on. max_priority_nodes bounds the placeholders: the oldest is evicted. */
static void tree_errors_and_bound(void **state)
{
    sfix_t *f = *state;
    f->opt.max_priority_nodes = 3;
    gw_h2_session_t *s = fready(f);
    const gw_h2_priority_t self = {9, 15, 0};
    assert_int_equal(gw_h2_frame_write_priority(&f->c.b, 9, &self), 0);
    uint8_t raw[GW_H2_FRAME_HDR_LEN + 4] = {0};
    gw_h2_frame_hdr_t h = {4, GW_H2_FT_PRIORITY, 0, 11};
    gw_h2_frame_hdr_pack(raw, &h);
    assert_int_equal(gw_bytes_append(&f->c.b, raw, sizeof(raw)), 0);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 9, GW_H2_PROTOCOL_ERROR);
    expect_rst(&f->o, 11, GW_H2_FRAME_SIZE_ERROR);
    assert_null(find_type(&f->o, GW_H2_FT_GOAWAY, 0));
    assert_true(gw_h2_session_want_read(s));
    /* four placeholders in a tree of three: one eviction; a fifth, two */
    const gw_h2_priority_t p = {0, 15, 0};
    for (uint32_t sid = 13; sid <= 19; sid += 2)
        assert_int_equal(gw_h2_frame_write_priority(&f->c.b, sid, &p), 0);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 1);
    assert_int_equal(gw_h2_frame_write_priority(&f->c.b, 21, &p), 0);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 2);
    /* a request still works and is answered */
    cli_headers(&f->c, 23, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_stats(s).priority_evictions, 3);
    assert_int_equal(gw_h2_session_submit_response(s, 23, 204, NULL, 0, 1), 0);
    drain(s, &f->o);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_HEADERS);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(flow_control_backpressure),
    SESSION_TEST(connection_window_exceeded),
    SESSION_TEST(round_robin_and_connection_window),
    SESSION_TEST(data_budget),
    cmocka_unit_test(writable_events),
    cmocka_unit_test(writable_at_lowat),
    SESSION_TEST(initial_window_change),
    SESSION_TEST(window_overflow),
    cmocka_unit_test(settings_each_initial_window_value_checked),
    cmocka_unit_test(priority_and_callbacks),
    SESSION_TEST(priority_scheduling),
    SESSION_TEST(send_some_decides_late),
    SESSION_TEST(pacing_view_of_live_streams),
    SESSION_TEST(data_frames_span_chunks),
    SESSION_TEST(priority_set_and_pending_bound),
    SESSION_TEST(tree_headers_weights),
    SESSION_TEST(tree_priority_frame_idle),
    SESSION_TEST(tree_errors_and_bound),
};

GW_TEST_MAIN(tests)
