/* Unit tests of h2/session: a server session driven with hand-built frames (h2/frame.h
 * serializers + the HPACK encoder); what it emits is parsed back from the output iovq.
 *
 * Error paths covered (RFC 9113):
 *   §3.4   bad preface -> GOAWAY PROTOCOL_ERROR; first frame not SETTINGS -> PROTOCOL_ERROR
 *   §4.2   frame above SETTINGS_MAX_FRAME_SIZE -> FRAME_SIZE_ERROR
 *   §5.1   DATA/WINDOW_UPDATE/RST_STREAM on an idle stream -> conn PROTOCOL_ERROR; DATA on a
 *          half-closed (remote) stream -> STREAM_CLOSED; HEADERS after END_STREAM -> STREAM_CLOSED
 *   §5.1.1 even client stream id, decreasing id -> conn PROTOCOL_ERROR
 *   §5.1.2 MAX_CONCURRENT_STREAMS -> REFUSED_STREAM; released slots only
 *   §6.5   SETTINGS ACK timeout -> SETTINGS_TIMEOUT
 *   §6.6   PUSH_PROMISE from a client -> PROTOCOL_ERROR
 *   §6.9   DATA above the stream / connection window -> FLOW_CONTROL_ERROR; WINDOW_UPDATE
 *          overflow (stream / connection); §6.9.2 INITIAL_WINDOW_SIZE delta
 *   §6.10  frame inside a header block, CONTINUATION without HEADERS -> PROTOCOL_ERROR
 *   §8.1-§8.3 malformed requests (each rule) -> RST_STREAM PROTOCOL_ERROR, content-length
 *          mismatch, trailers with pseudo-headers or without END_STREAM
 *   limits: rapid reset, CONTINUATION flood, header list (431), PING flood, empty frames,
 *          queued control frames, max requests -> graceful GOAWAY
 */
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

/* ---- tests ------------------------------------------------------------------------------ */

static void handshake_and_ping(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    outs_t o;
    assert_true(gw_h2_session_want_write(s));
    drain(s, &o);
    /* server preface: SETTINGS then the connection WINDOW_UPDATE up to 1 MiB */
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_SETTINGS);
    assert_int_equal(o.f[0].h.length % 6, 0);
    int saw_iws = 0;
    for (size_t i = 0; i < o.f[0].h.length; i += 6)
        if (o.f[0].p[i + 1] == GW_H2_SETTINGS_INITIAL_WINDOW_SIZE) {
            assert_int_equal(get32(o.f[0].p + i + 2), 256 * 1024);
            saw_iws = 1;
        }
    assert_true(saw_iws);
    /* RFC 9218 §2.1: no SETTINGS_NO_RFC7540_PRIORITIES, since the RFC 7540 tree is honoured */
    for (size_t i = 0; i < o.f[0].h.length; i += 6)
        assert_int_not_equal(o.f[0].p[i + 1], GW_H2_SETTINGS_NO_RFC7540_PRIORITIES);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_WINDOW_UPDATE);
    assert_int_equal(get32(o.f[1].p), 1024 * 1024 - 65535);
    assert_int_equal(gw_h2_session_next_deadline(s), 10000);

    cli_t c;
    cli_init(&c, 1);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, (const uint8_t *)"12345678"), 0);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    cli_exchange(s, &c, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_SETTINGS);
    assert_int_equal(o.f[0].h.flags, GW_H2_F_ACK);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_PING);
    assert_int_equal(o.f[1].h.flags, GW_H2_F_ACK);
    assert_memory_equal(o.f[1].p, "12345678", 8);
    assert_int_equal(gw_h2_session_next_deadline(s), UINT64_MAX);
    assert_true(gw_h2_session_want_read(s));
    assert_false(gw_h2_session_want_write(s));
    session_end(s, &c);
}

static void bad_preface(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    outs_t o;
    drain(s, &o);
    const char *h1 = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(gw_h2_session_recv(s, (const uint8_t *)h1, strlen(h1), 0), GW_E_PROTO);
    assert_false(gw_h2_session_want_read(s));
    assert_false(gw_h2_session_should_close(s)); /* GOAWAY not flushed yet */
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    assert_true(gw_h2_session_should_close(s));
    assert_int_equal(gw_h2_session_recv(s, (const uint8_t *)"x", 1, 0), GW_E_CLOSED);
    gw_h2_session_del(s);
}

static void first_frame_not_settings(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    cli_t c;
    outs_t o;
    cli_init(&c, 0);
    assert_int_equal(gw_bytes_append(&c.b, GW_H2_PREFACE, GW_H2_PREFACE_LEN), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(feed(s, &c.b), GW_E_PROTO);
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    session_end(s, &c);
}

static void settings_timeout(void **state)
{
    (void)state;
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    assert_int_equal(gw_h2_session_tick(s, 9999), 0);
    assert_int_equal(gw_h2_session_tick(s, 10000), GW_E_TIMEOUT);
    outs_t o;
    drain(s, &o);
    expect_goaway(&o, GW_H2_SETTINGS_TIMEOUT);
    assert_int_equal(gw_h2_session_stats(s).settings_timeouts, 1);
    gw_h2_session_del(s);
}

static void get_and_response_by_reference(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_string_equal(f->r.log, "req 1 GET https example.com /a cl=-1 es=1;end 1;");
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_HALF_CLOSED_REMOTE);

    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/plain")}};
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, hf, 1, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(64);
    memcpy(rb->data, "xxhello world", 13);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 2, 11, 1), 0);
    assert_int_equal(gw_h2_session_stream_queued(s, 1), 11);
    gw_iovq_t q;
    gw_iovq_init(&q);
    assert_true(gw_h2_session_send(s, &q) > 0);
    /* the payload iovec points into the rbuf itself */
    struct iovec v[16];
    size_t nv = gw_iovq_peek(&q, v, 16);
    int found = 0;
    for (size_t i = 0; i < nv; i++)
        if (v[i].iov_base == rb->data + 2 && v[i].iov_len == 11)
            found = 1;
    assert_true(found);
    assert_true(rb->refs >= 2);
    gw_iovq_free(&q);
    assert_int_equal(rb->refs, 1);
    gw_rbuf_unref(rb);
    assert_string_equal(f->r.log,
                        "req 1 GET https example.com /a cl=-1 es=1;end 1;close 1 NO_ERROR 0;");
    assert_int_equal(gw_h2_session_active_streams(s), 1); /* until released */
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
}

static void response_frames(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), GW_E_INVAL);
    gw_rbuf_t *rb = gw_rbuf_new(40000);
    memset(rb->data, 'z', 40000);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 40000, 0), 0);
    const gw_h2_header_t tr[] = {{GW_SLICE_LIT("grpc-status"), GW_SLICE_LIT("0")}};
    assert_int_equal(gw_h2_session_submit_trailers(s, 1, tr, 1), 0);
    drain(s, &f->o);
    /* HEADERS, DATA 16384 + 16384 + 7232 (peer max frame), trailers HEADERS END_STREAM */
    assert_int_equal(f->o.n, 5);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(f->o.f[0].h.flags, GW_H2_F_END_HEADERS);
    assert_int_equal(f->o.f[1].h.length, 16384);
    assert_int_equal(f->o.f[2].h.length, 16384);
    assert_int_equal(f->o.f[3].h.length, 40000 - 32768);
    assert_int_equal(f->o.f[3].h.flags, 0);
    assert_int_equal(f->o.f[4].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(f->o.f[4].h.flags, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM);
    assert_int_equal(gw_h2_session_send_window(s, 0), 65535 - 40000);
    assert_int_equal(gw_h2_session_stream_state(s, 1), GW_H2_SS_CLOSED);
    gw_rbuf_unref(rb);
}

/* The same input whole, byte by byte and cut at every point gives the same events. */
static void split_feeding(void **state)
{
    (void)state;
    cli_t c;
    cli_init(&c, 1);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, 0, "he", 2, 1, 3), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, NULL), 0);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "llo", 3, 0, 0), 0);
    const char *const G2[] = {":method", "GET", ":scheme", "http", ":path", "/b", NULL};
    cli_headers(&c, 3, GW_H2_F_END_STREAM, G2);

    char whole[8192];
    rec_t r;
    gw_h2_session_t *s = server(&r, NULL);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    strcpy(whole, r.log);
    assert_string_equal(whole, "req 1 POST https  /up cl=5 es=0 content-length=5;data 1 he;"
                               "data 1 llo;end 1;req 3 GET http  /b cl=-1 es=1;end 3;");
    gw_h2_session_del(s);

    /* byte by byte */
    s = server(&r, NULL);
    for (size_t i = 0; i < c.b.len; i++)
        assert_int_equal(gw_h2_session_recv(s, c.b.base + i, 1, 1), 1);
    assert_string_equal(r.log, whole);
    gw_h2_session_del(s);

    /* every cut point */
    for (size_t cut = 1; cut < c.b.len; cut++) {
        s = server(&r, NULL);
        assert_int_equal(gw_h2_session_recv(s, c.b.base, cut, 1), (ssize_t)cut);
        assert_int_equal(gw_h2_session_recv(s, c.b.base + cut, c.b.len - cut, 1),
                         (ssize_t)(c.b.len - cut));
        assert_string_equal(r.log, whole);
        gw_h2_session_del(s);
    }
    cli_free(&c);
}

static void max_requests_and_shutdown(void **state)
{
    sfix_t *f = *state;
    f->opt.max_requests_per_connection = 2;
    gw_h2_session_t *s = fready(f);
    f->r.release_on_close = 1;
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    const outf_t *g = find_type(&f->o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), 3);
    assert_int_equal(get32(g->p + 4), GW_H2_NO_ERROR);
    /* a later stream is refused, not processed */
    cli_headers(&f->c, 5, GW_H2_F_END_STREAM, GET);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 5, GW_H2_REFUSED_STREAM);
    assert_false(gw_h2_session_should_close(s));
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 3, 204, NULL, 0, 1), 0);
    drain(s, &f->o);
    assert_true(gw_h2_session_should_close(s));

    /* graceful two-step shutdown */
    s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_OPEN);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0);
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_SHUTDOWN_PENDING);
    assert_string_equal(gw_h2_conn_phase_str(gw_h2_session_phase(s)), "shutdown_pending");
    drain(s, &f->o);
    g = find_type(&f->o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), GW_H2_STREAM_ID_MASK);
    const outf_t *p = find_type(&f->o, GW_H2_FT_PING, 0);
    assert_non_null(p);
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET); /* in flight: still served */
    assert_int_equal(gw_h2_frame_write_ping(&f->c.b, 1, p->p), 0);
    cli_exchange(s, &f->c, &f->o);
    g = find_type(&f->o, GW_H2_FT_GOAWAY, 0);
    assert_non_null(g);
    assert_int_equal(get32(g->p), 3);
    assert_non_null(strstr(f->r.log, "req 3 "));
    /* the PING ACK ended the first step: the final GOAWAY is out */
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_GOAWAY_SENT);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0); /* nothing more to do */
    assert_int_equal(gw_h2_session_phase(s), GW_H2_CONN_GOAWAY_SENT);
}

static void peer_goaway(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fready(f);
    assert_int_equal(gw_h2_frame_write_goaway(&f->c.b, 0, GW_H2_NO_ERROR, "bye", 3), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_string_equal(f->r.log, "goaway 0 NO_ERROR bye;");
    assert_true(gw_h2_session_should_close(s));
}

/* Failing-allocation sweep over a whole request/response exchange: fail the n-th
 * allocation; every failure must surface as GW_E_NOMEM and leak nothing (ASan). */
static int exchange_fail_at(unsigned long n)
{
    rec_t r;
    gw_h2_session_t *s = NULL;
    gw_iovq_t q;
    cli_t c;
    int rc;
    memset(&r, 0, sizeof(r));
    gw_iovq_init(&q);
    cli_init(&c, 1);
    cli_headers(&c, 1, 0, POST);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 1, GW_H2_F_END_STREAM, "hello", 5, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(16);
    assert_non_null(rb);
    memcpy(rb->data, "world", 5);
    gw_alloc_fail_after(n);
    if ((rc = gw_h2_session_new(&s, NULL, &cbs, &r, 0)) < 0)
        goto out;
    r.s = s;
    r.consume = 1;
    ssize_t got = gw_h2_session_recv(s, c.b.base, c.b.len, 1);
    if (got < 0) {
        rc = (int)got;
        goto out;
    }
    const gw_h2_header_t hf[] = {{GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")}};
    if ((rc = gw_h2_session_submit_response(s, 1, 200, hf, 1, 0)) < 0)
        goto out;
    if ((rc = gw_h2_session_submit_data(s, 1, rb, 0, 5, 1)) < 0)
        goto out;
    ssize_t sent = gw_h2_session_send(s, &q);
    rc = sent < 0 ? (int)sent : 0;
out : {
    int hit = gw_alloc_fail_hit();
    gw_alloc_fail_after(0);
    if (rc == 0 && !hit)
        assert_non_null(strstr(r.log, "end 1;"));
    if (rc < 0)
        assert_true(hit);
}
    gw_iovq_free(&q);
    gw_h2_session_del(s);
    gw_rbuf_unref(rb);
    cli_free(&c);
    return rc;
}

static void alloc_failure_sweep(void **state)
{
    (void)state;
    unsigned long n;
    for (n = 1; n < 1000; n++) {
        int rc = exchange_fail_at(n);
        if (rc == 0 && !gw_alloc_fail_hit())
            break;
        if (rc < 0)
            assert_int_equal(rc, GW_E_NOMEM);
    }
    assert_true(n < 1000);
    assert_true(n > 3);
}

/* ---- idle compaction -------------------------------------------------------------------- */

/* Everything the session wrote so far, as bytes. */
static size_t flat_out(gw_h2_session_t *s, uint8_t *buf, size_t cap)
{
    gw_iovq_t q;
    gw_iovq_init(&q);
    assert_true(gw_h2_session_send(s, &q) >= 0);
    size_t n = gw_iovq_flatten(&q, buf, cap);
    assert_int_equal(n, q.bytes);
    gw_iovq_free(&q);
    return n;
}

/* Two sessions fed the same bytes; `a` is compacted after every step (and between the pieces
 * of split input), `b` never. Compaction must not show: same events, same bytes out. */
typedef struct {
    rec_t ra, rb;
    gw_h2_session_t *a, *b;
} twin_t;

static void twin_init(twin_t *t)
{
    t->a = server(&t->ra, NULL);
    t->b = server(&t->rb, NULL);
    t->ra.release_on_close = t->rb.release_on_close = 1;
    t->ra.consume = t->rb.consume = 1;
}

/* Feed c's bytes: whole to b, in pieces of `step` bytes to a with a compaction after each. */
static void twin_feed(twin_t *t, cli_t *c, size_t step)
{
    assert_int_equal(gw_h2_session_recv(t->b, c->b.base, c->b.len, 1), (ssize_t)c->b.len);
    for (size_t off = 0; off < c->b.len; off += step) {
        size_t n = c->b.len - off < step ? c->b.len - off : step;
        assert_int_equal(gw_h2_session_recv(t->a, c->b.base + off, n, 1), (ssize_t)n);
        gw_h2_session_compact(t->a);
    }
    c->b.len = 0;
}

static void twin_same_output(twin_t *t)
{
    static uint8_t oa[65536], ob[65536];
    size_t na = flat_out(t->a, oa, sizeof(oa)), nb = flat_out(t->b, ob, sizeof(ob));
    assert_int_equal(na, nb);
    assert_memory_equal(oa, ob, na);
    assert_string_equal(t->ra.log, t->rb.log);
    gw_h2_session_compact(t->a);
}

static void twin_respond(twin_t *t, uint32_t sid)
{
    const gw_h2_header_t f[] = {{GW_SLICE_LIT("x-served-by"), GW_SLICE_LIT("h2gate-test")},
                                {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("max-age=60")}};
    assert_int_equal(gw_h2_session_submit_response(t->a, sid, 200, f, 2, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(t->b, sid, 200, f, 2, 1), 0);
    twin_same_output(t);
}

static const char *const GET_X[] = {":method",    "GET",         ":scheme", "https",
                                    ":authority", "example.com", ":path",   "/idle",
                                    "x-idle",     "value-1",     NULL};

static void compact_is_invisible(void **state)
{
    (void)state;
    twin_t t;
    cli_t c;
    twin_init(&t);
    twin_same_output(&t); /* server preface */
    cli_init(&c, 1);
    twin_feed(&t, &c, 5);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    assert_int_equal(gw_h2_frame_write_ping(&c.b, 0, (const uint8_t *)"idle-pin"), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);

    /* a request whose fields enter both HPACK tables, fed byte by byte: a frame header or
     * payload split across reads keeps the stream part alive */
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_X);
    twin_feed(&t, &c, 1);
    twin_respond(&t, 1); /* closes and releases stream 1: the session is idle again */
    assert_int_equal(gw_h2_session_active_streams(t.a), 0);

    /* the same fields again: the client sends them indexed (its dynamic table), split into
     * HEADERS + CONTINUATION with a compaction in between; the response fields come out
     * indexed from our encoder's table */
    gw_bytes_t blk;
    block(&c, &blk, GET_X);
    assert_true(blk.len >= 4 && blk.len < 16); /* mostly one-byte indexed fields */
    assert_int_equal(
        gw_h2_frame_write_headers(&c.b, 3, GW_H2_F_END_STREAM, NULL, blk.base, 2, 0, 0), 0);
    twin_feed(&t, &c, 1000);
    assert_int_equal(
        gw_h2_frame_write_continuation(&c.b, 3, GW_H2_F_END_HEADERS, blk.base + 2, blk.len - 2), 0);
    gw_bytes_free(&blk);
    twin_feed(&t, &c, 1000);
    assert_non_null(
        strstr(t.ra.log, "req 3 GET https example.com /idle cl=-1 es=1 x-idle=value-1;"));
    twin_respond(&t, 3);

    /* RFC 9218 §7.1 update for a stream not opened yet, while idle: kept across compaction */
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 5, "u=1", 3), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);

    /* the stream the update was about opens with it; we reset it, and DATA the client sent
     * before seeing our RST_STREAM is ignored after a compaction too (RFC 9113 §5.1) */
    cli_headers(&c, 5, 0, POST);
    twin_feed(&t, &c, 1000);
    uint8_t ua, ub;
    int ia, ib;
    assert_int_equal(gw_h2_session_get_priority(t.a, 5, &ua, &ia), 0);
    assert_int_equal(gw_h2_session_get_priority(t.b, 5, &ub, &ib), 0);
    assert_int_equal(ua, 1);
    assert_int_equal(ua, ub);
    assert_int_equal(ia, ib);
    assert_int_equal(gw_h2_session_submit_rst(t.a, 5, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_session_submit_rst(t.b, 5, GW_H2_CANCEL), 0);
    twin_same_output(&t);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 5, GW_H2_F_END_STREAM, "hello", 5, 0, 0), 0);
    twin_feed(&t, &c, 1000);
    twin_same_output(&t);
    assert_null(strstr(t.ra.log, "goaway"));
    assert_true(gw_h2_session_want_read(t.a));

    cli_free(&c);
    gw_h2_session_del(t.a);
    gw_h2_session_del(t.b);
}

/* What an idle session keeps, counted by the allocation hook: after the handshake, the session
 * struct and nothing else; after a request, that plus the HPACK table entries. Fails when a
 * field or buffer is added to what every idle connection carries. */
static void idle_session_memory(void **state)
{
    (void)state;
    cli_t c;
    gw_bytes_t hs, req;
    cli_init(&c, 1);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    hs = c.b;
    gw_bytes_init(&c.b, 0);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_X);
    req = c.b;
    gw_bytes_init(&c.b, 0);

    rec_t r;
    outs_t o;
    gw_h2_profile_t *prof; /* shared by a worker's sessions: not counted */
    gw_h2_session_t *s;
    assert_int_equal(gw_h2_profile_new(&prof, NULL, &cbs), 0);
    /* a worker's profile keeps closed streams' blocks for the next streams: one is there
     * before counting, as in a running worker */
    memset(&r, 0, sizeof(r));
    assert_int_equal(gw_h2_session_new_with(&s, prof, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    assert_int_equal(feed(s, &hs), (ssize_t)hs.len);
    assert_int_equal(feed(s, &req), (ssize_t)req.len);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    gw_h2_session_del(s);
    memset(&r, 0, sizeof(r));
    gw_alloc_count_start();
    assert_int_equal(gw_h2_session_new_with(&s, prof, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    assert_int_equal(feed(s, &hs), (ssize_t)hs.len);
    drain(s, &o);
    long long before = gw_alloc_count_live();
    gw_h2_session_compact(s);
    long long idle0 = gw_alloc_count_live();
    print_message("idle session after the handshake: %lld bytes (%lld before compaction)\n", idle0,
                  before);
    assert_true(idle0 < before); /* the emptied output buffer went back */
    assert_true(idle0 <= 384);   /* the session struct alone */

    assert_int_equal(feed(s, &req), (ssize_t)req.len);
    const gw_h2_header_t f[] = {{GW_SLICE_LIT("x-served-by"), GW_SLICE_LIT("h2gate-test")}};
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, f, 1, 1), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    long long busy = gw_alloc_count_live();
    gw_h2_session_compact(s);
    long long idle1 = gw_alloc_count_live();
    print_message("idle session after a request: %lld bytes (%lld before compaction)\n", idle1,
                  busy);
    assert_true(busy - idle1 >= 200); /* the stream part and the block buffers */
    /* the tables are what grew, nothing else: a block each, 16 slots (the encoder's of 12
     * bytes and its 8 bucket heads, the decoder's of 4), then the records of the three entries
     * (:authority and x-idle in the decoder's, x-served-by in the encoder's), each an 8-byte
     * header and the field's bytes (short fields: at most 80 bytes with the room to spare) */
    assert_true(idle1 <= idle0 + 16 * 12 + 8 * 4 + 16 * 4 + 3 * 80);
    gw_h2_session_compact(s); /* nothing left to give back */
    assert_int_equal(gw_alloc_count_live(), idle1);
    gw_h2_session_del(s);
    assert_int_equal(gw_alloc_count_live(), 0);
    gw_alloc_count_stop();
    gw_h2_profile_del(prof);
    gw_bytes_free(&hs);
    gw_bytes_free(&req);
    cli_free(&c);
}

/* Streams are found through a 16-slot cache on (id >> 1) and the stream list behind it: with
 * 40 streams open, ids 32 apart share a slot; every lookup (stream data, responses, DATA)
 * must reach its own stream, in any order, also after streams of a shared slot are freed and
 * new ones take it. */
static void stream_lookup_colliding_ids(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    r.release_on_close = 1;
    static int tags[200];
    for (uint32_t sid = 1; sid <= 79; sid += 2)
        cli_headers(&c, sid, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_active_streams(s), 40);
    for (uint32_t sid = 1; sid <= 79; sid += 2)
        assert_int_equal(gw_h2_session_set_stream_data(s, sid, &tags[sid]), 0);
    /* scrambled order: every lookup misses the slot the previous one filled */
    for (uint32_t k = 0; k < 40; k++) {
        uint32_t sid = 2 * ((k * 17) % 40) + 1;
        assert_ptr_equal(gw_h2_session_get_stream_data(s, sid), &tags[sid]);
    }
    assert_null(gw_h2_session_get_stream_data(s, 81)); /* not open: no slot holds it */
    /* answer every fourth stream (slot 0's 1, 33, 65 among them), newest first; each DATA
     * frame must carry its own stream's bytes */
    gw_rbuf_t *rb = gw_rbuf_new(40 * 4);
    for (uint32_t sid = 79;; sid -= 2) {
        if (sid % 8 == 1) {
            char t[12];
            snprintf(t, sizeof(t), "%03u", (unsigned)sid);
            memcpy(rb->data + 4 * (sid / 2), t, 3);
            assert_int_equal(gw_h2_session_submit_response(s, sid, 200, NULL, 0, 0), 0);
            assert_int_equal(gw_h2_session_submit_data(s, sid, rb, 4 * (sid / 2), 3, 1), 0);
        }
        if (sid == 1)
            break;
    }
    outs_t o;
    drain(s, &o);
    size_t datas = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (o.f[i].h.type != GW_H2_FT_DATA)
            continue;
        char want[12];
        snprintf(want, sizeof(want), "%03u", (unsigned)o.f[i].h.stream_id);
        assert_int_equal(o.f[i].h.length, 3);
        assert_memory_equal(o.f[i].p, want, 3);
        datas++;
    }
    assert_int_equal(datas, 10); /* 1, 9, 17, ..., 73: slot 0 (1, 33, 65) among them */
    /* the answered streams are gone (released on close); new streams take their slots */
    for (uint32_t sid = 81; sid <= 103; sid += 2)
        cli_headers(&c, sid, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    for (uint32_t sid = 81; sid <= 103; sid += 2)
        assert_int_equal(gw_h2_session_set_stream_data(s, sid, &tags[sid]), 0);
    for (uint32_t sid = 1; sid <= 103; sid += 2) {
        int gone = sid < 80 && sid % 8 == 1;
        if (gone)
            assert_null(gw_h2_session_get_stream_data(s, sid));
        else
            assert_ptr_equal(gw_h2_session_get_stream_data(s, sid), &tags[sid]);
    }
    gw_rbuf_unref(rb);
    session_end(s, &c);
}

/* A stream alone on its session is found without the slot cache, which it never enters; once
 * a second one opens, each is found again (through its slot, or the list that fills it), and a
 * freed stream leaves no slot pointing at it: the usual one-request-at-a-time connection and
 * the changes between one and two streams. */
static void stream_lookup_alone_and_beside_another(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = ready(&r, &c, NULL);
    r.release_on_close = 1;
    static int tags[64];
    gw_rbuf_t *rb = gw_rbuf_new(64);
    memcpy(rb->data, "abcdefgh", 8);
    outs_t o;
    /* one stream, answered and gone; then the next one alone */
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_set_stream_data(s, 1, &tags[1]), 0);
    assert_ptr_equal(gw_h2_session_get_stream_data(s, 1), &tags[1]);
    assert_null(gw_h2_session_get_stream_data(s, 3));
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 2, 1), 0);
    drain(s, &o);
    assert_null(gw_h2_session_get_stream_data(s, 1));
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_set_stream_data(s, 3, &tags[3]), 0);
    /* a second stream: both found; 35 shares 3's slot ((id >> 1) % 16) */
    cli_headers(&c, 35, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_set_stream_data(s, 35, &tags[35]), 0);
    assert_ptr_equal(gw_h2_session_get_stream_data(s, 3), &tags[3]);
    assert_ptr_equal(gw_h2_session_get_stream_data(s, 35), &tags[35]);
    assert_ptr_equal(gw_h2_session_get_stream_data(s, 3), &tags[3]);
    /* 3 answered and gone (it held the slot last): 35, alone again, is still found */
    assert_int_equal(gw_h2_session_submit_response(s, 3, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 3, rb, 2, 2, 1), 0);
    drain(s, &o);
    assert_null(gw_h2_session_get_stream_data(s, 3));
    assert_ptr_equal(gw_h2_session_get_stream_data(s, 35), &tags[35]);
    cli_headers(&c, 37, GW_H2_F_END_STREAM, GET);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_set_stream_data(s, 37, &tags[37]), 0);
    /* each DATA frame carries its own stream's bytes */
    assert_int_equal(gw_h2_session_submit_response(s, 37, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 37, rb, 6, 2, 1), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 35, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 35, rb, 4, 2, 1), 0);
    drain(s, &o);
    size_t datas = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (o.f[i].h.type != GW_H2_FT_DATA)
            continue;
        assert_int_equal(o.f[i].h.length, 2);
        assert_memory_equal(o.f[i].p, o.f[i].h.stream_id == 35 ? "ef" : "gh", 2);
        datas++;
    }
    assert_int_equal(datas, 2);
    assert_null(gw_h2_session_get_stream_data(s, 35));
    assert_null(gw_h2_session_get_stream_data(s, 37));
    gw_rbuf_unref(rb);
    session_end(s, &c);
}

/* A closed stream's memory is the next stream's: on a warm session, a request is decoded and
 * opened without any allocation, also when the block comes from another session of the
 * profile; a burst of streams gives every block back, and the sessions and the profile free
 * them all (the sanitizer build's leak check). */
static void stream_blocks_reused(void **state)
{
    (void)state;
    gw_h2_profile_t *prof;
    assert_int_equal(gw_h2_profile_new(&prof, NULL, &cbs), 0);
    rec_t ra, rb;
    cli_t ca, cb;
    gw_h2_session_t *a, *b;
    outs_t o;
    memset(&ra, 0, sizeof(ra));
    memset(&rb, 0, sizeof(rb));
    assert_int_equal(gw_h2_session_new_with(&a, prof, &ra, 0), 0);
    assert_int_equal(gw_h2_session_new_with(&b, prof, &rb, 0), 0);
    ra.s = a;
    rb.s = b;
    ra.release_on_close = rb.release_on_close = 1;
    cli_init(&ca, 1);
    cli_init(&cb, 1);
    assert_int_equal(gw_h2_frame_write_settings(&ca.b, 1, NULL, 0), 0); /* ACK */
    assert_int_equal(gw_h2_frame_write_settings(&cb.b, 1, NULL, 0), 0);
    /* a burst of 8 streams on a, answered; then b's first stream */
    for (uint32_t sid = 1; sid <= 15; sid += 2)
        cli_headers(&ca, sid, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(a, &ca.b), (ssize_t)ca.b.len);
    ca.b.len = 0;
    assert_int_equal(gw_h2_session_active_streams(a), 8);
    for (uint32_t sid = 1; sid <= 15; sid += 2)
        assert_int_equal(gw_h2_session_submit_response(a, sid, 204, NULL, 0, 1), 0);
    drain(a, &o);
    assert_int_equal(gw_h2_session_active_streams(a), 0);
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len); /* preface, SETTINGS */
    cb.b.len = 0;
    drain(b, &o);

    /* b's first request: its stream is a block a gave back */
    cli_headers(&cb, 1, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len);
    cb.b.len = 0;
    assert_int_equal(gw_h2_session_submit_response(b, 1, 204, NULL, 0, 1), 0);
    drain(b, &o);
    /* warm now: the next request on each session allocates nothing */
    cli_headers(&cb, 3, GW_H2_F_END_STREAM, GET);
    cli_headers(&ca, 17, GW_H2_F_END_STREAM, GET);
    gw_alloc_count_start();
    assert_int_equal(feed(b, &cb.b), (ssize_t)cb.b.len);
    assert_int_equal(feed(a, &ca.b), (ssize_t)ca.b.len);
    long long allocs = gw_alloc_count_allocs();
    gw_alloc_count_stop();
    assert_int_equal(allocs, 0);
    assert_non_null(strstr(rb.log, "req 3 GET https example.com /a"));
    assert_non_null(strstr(ra.log, "req 17 GET https example.com /a"));
    /* sessions deleted with streams open: their blocks go back to the profile */
    assert_int_equal(gw_h2_session_active_streams(a), 1);
    assert_int_equal(gw_h2_session_active_streams(b), 1);
    gw_h2_session_del(a);
    gw_h2_session_del(b);
    gw_h2_profile_del(prof);
    cli_free(&ca);
    cli_free(&cb);
}

static void on_refused_rec(void *ud, const gw_h2_head_t *h, unsigned status, uint32_t code,
                           const char *why)
{
    rec_t *r = ud;
    logf_(r, "refused %u %.*s %.*s %u %s %s;", h->stream_id, SL(h->method), SL(h->path), status,
          gw_h2_error_str(code), why ? why : "-");
}

/* Every request the session answers or resets itself, never reported with on_request, is told
 * once through on_refused (the access log's line): a stream over the concurrency limit, a
 * malformed head, a head over the list size (431), content-length on a request without
 * content. Streams the layer above saw are not (on_close tells those). */
static void refused_requests_are_told(void **state)
{
    (void)state;
    gw_h2_callbacks_t cb = cbs;
    cb.on_refused = on_refused_rec;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_concurrent_streams = 1;
    opt.max_header_list_size = 1024;
    rec_t r;
    cli_t c;
    outs_t o;
    memset(&r, 0, sizeof(r));
    gw_h2_session_t *s;
    assert_int_equal(gw_h2_session_new(&s, &opt, &cb, &r, 0), 0);
    r.s = s;
    r.release_on_close = 1;
    cli_init(&c, 1);
    cli_send(s, &c);
    assert_int_equal(gw_h2_frame_write_settings(&c.b, 1, NULL, 0), 0);
    cli_exchange(s, &c, &o);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET);
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET); /* over the limit */
    cli_exchange(s, &c, &o);
    expect_rst(&o, 3, GW_H2_REFUSED_STREAM);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    drain(s, &o);
    const char *const brew_bad[] = {":method",     "BR@W",  ":scheme", "https", ":authority",
                                    "example.com", ":path", "/b",      NULL};
    cli_headers(&c, 5, GW_H2_F_END_STREAM, brew_bad);
    char big[1500];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    const char *const large[] = {":method", "GET",  ":scheme", "https", ":authority", "example.com",
                                 ":path",   "/big", "x-big",   big,     NULL};
    cli_headers(&c, 7, GW_H2_F_END_STREAM, large);
    const char *const cl[] = {":method",        "POST",        ":scheme", "https",
                              ":authority",     "example.com", ":path",   "/cl",
                              "content-length", "5",           NULL};
    cli_headers(&c, 9, GW_H2_F_END_STREAM, cl);
    const char *const brew[] = {":method",     "BREW",  ":scheme", "https", ":authority",
                                "example.com", ":path", "/pot",    NULL};
    cli_headers(&c, 11, GW_H2_F_END_STREAM, brew);
    cli_exchange(s, &c, &o);
    expect_rst(&o, 5, GW_H2_PROTOCOL_ERROR);
    expect_rst(&o, 9, GW_H2_PROTOCOL_ERROR);
    assert_string_equal(r.log, "req 1 GET https example.com /a cl=-1 es=1;end 1;"
                               "refused 3 GET /a 0 REFUSED_STREAM -;close 1 NO_ERROR 0;"
                               "refused 5 BR@W /b 0 PROTOCOL_ERROR invalid :method;"
                               "refused 7 GET /big 431 NO_ERROR header list too large;"
                               "refused 9 POST /cl 0 PROTOCOL_ERROR content-length without content;"
                               "req 11 BREW https example.com /pot cl=-1 es=1;end 11;");
    session_end(s, &c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(handshake_and_ping),
    cmocka_unit_test(stream_blocks_reused),
    cmocka_unit_test(stream_lookup_colliding_ids),
    cmocka_unit_test(stream_lookup_alone_and_beside_another),
    cmocka_unit_test(bad_preface),
    cmocka_unit_test(first_frame_not_settings),
    cmocka_unit_test(settings_timeout),
    SESSION_TEST(get_and_response_by_reference),
    SESSION_TEST(response_frames),
    cmocka_unit_test(split_feeding),
    SESSION_TEST(max_requests_and_shutdown),
    SESSION_TEST(peer_goaway),
    cmocka_unit_test(alloc_failure_sweep),
    cmocka_unit_test(compact_is_invisible),
    cmocka_unit_test(idle_session_memory),
    cmocka_unit_test(refused_requests_are_told),
};

GW_TEST_MAIN(tests)
