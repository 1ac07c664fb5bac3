/* test_h2_session_push.c — server push in the HTTP/2 engine (RFC 9113 §8.4):
 * PUSH_PROMISE framing and its header block, the promised stream's states, the client's
 * SETTINGS_ENABLE_PUSH and SETTINGS_MAX_CONCURRENT_STREAMS, max_pushes, one promise per path,
 * no push after GOAWAY or on a reset parent, the client's RST_STREAM on a pushed stream, and
 * what a client may not do on one. */
#include "h2_session_util.h"

static const gw_h2_header_t CSS_FIELDS[] = {{GW_SLICE_LIT("accept"), GW_SLICE_LIT("text/css")},
                                            {GW_SLICE_LIT("user-agent"), GW_SLICE_LIT("t/1")}};

static gw_h2_head_t push_req(const char *authority, const char *path)
{
    return (gw_h2_head_t){.method = GW_SLICE_LIT("GET"),
                          .scheme = GW_SLICE_LIT("https"),
                          .authority = gw_slice_str(authority),
                          .path = gw_slice_str(path),
                          .headers = CSS_FIELDS,
                          .headers_len = 2};
}

/* A session with a GET open on stream 1 (the parent of the pushes); the recorder keeps its
 * streams after they close. */
static gw_h2_session_t *with_get(rec_t *r, cli_t *c, const gw_h2_options_t *o)
{
    gw_h2_session_t *s = ready_get(r, c, o);
    r->release_on_close = 0;
    return s;
}

static gw_h2_session_t *fwith_get(sfix_t *f)
{
    fend(f);
    f->s = with_get(&f->r, &f->c, &f->opt);
    return f->s;
}

/* fwith_get(), and a promise of /a.css on stream 1: the session, the promised id in *id. */
static gw_h2_session_t *fwith_push(sfix_t *f, uint32_t *id)
{
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = fwith_get(f);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, id, NULL), 0);
    return s;
}

/* The promise goes before the parent's response, names the request, and the promised stream
 * answers like any other: reserved (local), half-closed (remote) after its HEADERS, closed
 * after its END_STREAM. */
static void promise_and_pushed_response(void **state)
{
    sfix_t *f = *state;
    gw_hpack_dec_t d;
    dec_log_t l;
    gw_h2_session_t *s = fwith_get(f);
    assert_int_equal(gw_h2_session_can_push(s), 0);
    gw_h2_head_t req = push_req("example.com", "/app.css");
    uint32_t id = 0;
    const gw_h2_head_t *kept = NULL;
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, &kept), 0);
    assert_int_equal(id, 2);
    assert_int_equal(gw_h2_session_stream_state(s, 2), GW_H2_SS_RESERVED_LOCAL);
    /* the kept copy outlives the caller's slices */
    assert_non_null(kept);
    assert_true(gw_slice_eq(kept->path, GW_SLICE_LIT("/app.css")));
    assert_true(kept->path.base != req.path.base);
    assert_int_equal(kept->headers_len, 2);
    assert_int_equal(kept->end_stream, 1);
    assert_int_equal(kept->stream_id, 2);
    /* a push has no interim response (RFC 9113 §8.4.2) */
    assert_int_equal(gw_h2_session_submit_response(s, 2, 103, NULL, 0, 0), GW_E_INVAL);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 1), 0);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_PUSH_PROMISE);
    assert_int_equal(f->o.f[0].h.stream_id, 1);
    assert_int_equal(f->o.f[0].h.flags, GW_H2_F_END_HEADERS);
    assert_int_equal(get32(f->o.f[0].p), 2);
    assert_int_equal(f->o.f[1].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(gw_hpack_dec_init(&d, 4096), 0);
    assert_int_equal(decode_block(&d, f->o.f[0].p + 4, f->o.f[0].h.length - 4, &l), 0);
    assert_string_equal(l.text, ":method=GET;:scheme=https;:authority=example.com;:path=/app.css;"
                                "accept=text/css;user-agent=t/1;");
    assert_int_equal(decode_block(&d, f->o.f[1].p, f->o.f[1].h.length, &l), 0);
    assert_string_equal(l.text, ":status=200;");

    const gw_h2_header_t ct[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/css")}};
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, ct, 1, 0), 0);
    assert_int_equal(gw_h2_session_stream_state(s, 2), GW_H2_SS_HALF_CLOSED_REMOTE);
    gw_rbuf_t *rb = gw_rbuf_new(16);
    memcpy(rb->data, "a{}", 3);
    assert_int_equal(gw_h2_session_submit_data(s, 2, rb, 0, 3, 1), 0);
    gw_rbuf_unref(rb);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(f->o.f[0].h.stream_id, 2);
    assert_int_equal(decode_block(&d, f->o.f[0].p, f->o.f[0].h.length, &l), 0);
    assert_string_equal(l.text, ":status=200;content-type=text/css;");
    assert_int_equal(f->o.f[1].h.type, GW_H2_FT_DATA);
    assert_int_equal(f->o.f[1].h.stream_id, 2);
    assert_int_equal(f->o.f[1].h.flags, GW_H2_F_END_STREAM);
    assert_memory_equal(f->o.f[1].p, "a{}", 3);
    assert_non_null(strstr(f->r.log, "close 2 NO_ERROR 0;"));
    assert_int_equal(gw_h2_session_stats(s).pushes_promised, 1);
    assert_int_equal(gw_h2_session_stream_release(s, 2), 0);
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    gw_hpack_dec_free(&d);
}

/* A promise whose block does not fit one frame goes on in CONTINUATION frames (§6.6, §6.10),
 * the first carrying 4 bytes less of block than the peer's frame size. */
static void long_promise_continues(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fwith_get(f);
    static char big[20001];
    memset(big, 'v', 20000);
    gw_h2_header_t hf[] = {{GW_SLICE_LIT("user-agent"), gw_slice_str(big)}};
    gw_h2_head_t req = push_req("example.com", "/big");
    req.headers = hf;
    req.headers_len = 1;
    uint32_t id;
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), 0);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 2);
    assert_int_equal(f->o.f[0].h.type, GW_H2_FT_PUSH_PROMISE);
    assert_int_equal(f->o.f[0].h.flags, 0);
    assert_int_equal(f->o.f[0].h.length, 16384);
    assert_int_equal(f->o.f[1].h.type, GW_H2_FT_CONTINUATION);
    assert_int_equal(f->o.f[1].h.stream_id, 1);
    assert_int_equal(f->o.f[1].h.flags, GW_H2_F_END_HEADERS);
}

/* SETTINGS_ENABLE_PUSH = 0: nothing is promised (§6.5.2); set back to 1, pushes resume. */
static void enable_push_zero(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fwith_get(f);
    cli_setting(&f->c, GW_H2_SETTINGS_ENABLE_PUSH, 0);
    cli_exchange(s, &f->c, &f->o); /* the SETTINGS ACK */
    gw_h2_head_t req = push_req("example.com", "/app.css");
    uint32_t id;
    assert_int_equal(gw_h2_session_can_push(s), GW_E_UNSUPPORTED);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), GW_E_UNSUPPORTED);
    drain(s, &f->o);
    assert_int_equal(f->o.n, 0);
    cli_setting(&f->c, GW_H2_SETTINGS_ENABLE_PUSH, 1);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), 0);
}

/* max_pushes per connection, one promise per authority + path, and the parent's state. */
static void max_pushes_and_same_path(void **state)
{
    sfix_t *f = *state;
    f->opt.max_pushes = 3;
    gw_h2_session_t *s = fwith_get(f);
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css"), a2 = push_req("EXAMPLE.com", "/a.css"),
                 b = push_req("example.com", "/b.css"), q = push_req("example.com", "/a.css?v=2"),
                 x = push_req("example.com", "/x.css");
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a2, &id, NULL), GW_E_EXIST);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &b, &id, NULL), 0);
    assert_int_equal(id, 4);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &q, &id, NULL), 0);
    assert_int_equal(id, 6);
    assert_int_equal(gw_h2_session_can_push(s), GW_E_LIMIT);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &x, &id, NULL), GW_E_LIMIT);
    /* closing pushes does not give promises back: the limit is per connection */
    assert_int_equal(gw_h2_session_submit_rst(s, 2, GW_H2_CANCEL), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &x, &id, NULL), GW_E_LIMIT);

    /* max_pushes 0: never */
    f->opt.max_pushes = 0;
    s = fwith_get(f);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_LIMIT);
}

static void parent_rules(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fwith_get(f);
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css"), b = push_req("example.com", "/b.css");
    assert_int_equal(gw_h2_session_submit_push(s, 3, &a, &id, NULL), GW_E_NOENT); /* unknown */
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    /* a pushed stream is no parent (§8.4: only a peer-initiated stream) */
    assert_int_equal(gw_h2_session_submit_push(s, 2, &b, &id, NULL), GW_E_NOENT);
    /* bad requests */
    gw_h2_head_t bad = push_req("example.com", "rel.css");
    assert_int_equal(gw_h2_session_submit_push(s, 1, &bad, &id, NULL), GW_E_INVAL);
    gw_h2_header_t up[] = {{GW_SLICE_LIT("Accept"), GW_SLICE_LIT("x")}};
    bad = push_req("example.com", "/u.css");
    bad.headers = up;
    bad.headers_len = 1;
    assert_int_equal(gw_h2_session_submit_push(s, 1, &bad, &id, NULL), GW_E_INVAL);
    /* the parent's response is finished: closed for sending, no more promises on it */
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &b, &id, NULL), GW_E_NOENT);

    /* a parent the client reset */
    s = fwith_get(f);
    cli_headers(&f->c, 3, 0, GET);
    assert_int_equal(gw_h2_frame_write_rst_stream(&f->c.b, 3, GW_H2_CANCEL), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 3, &a, &id, NULL), GW_E_NOENT);
    /* a parent we reset */
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_INTERNAL_ERROR), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_NOENT);
}

/* None after a GOAWAY, the client's or ours (the first of a graceful shutdown included). */
static void no_push_after_goaway(void **state)
{
    sfix_t *f = *state;
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = fwith_get(f);
    assert_int_equal(gw_h2_frame_write_goaway(&f->c.b, 0, GW_H2_NO_ERROR, NULL, 0), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_can_push(s), GW_E_CLOSED);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_CLOSED);

    s = fwith_get(f);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_CLOSED);
}

/* The client's SETTINGS_MAX_CONCURRENT_STREAMS bounds the pushed streams not closed yet; a
 * closed one makes room. Pushed streams take none of the client's own slots. */
static void concurrency_both_ways(void **state)
{
    sfix_t *f = *state;
    f->opt.max_concurrent_streams = 1;
    gw_h2_session_t *s = fwith_get(f);
    cli_setting(&f->c, GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS, 1);
    cli_send(s, &f->c);
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css"), b = push_req("example.com", "/b.css");
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &b, &id, NULL), GW_E_LIMIT);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 204, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_stream_state(s, 2), GW_H2_SS_CLOSED);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &b, &id, NULL), 0);
    assert_int_equal(id, 4);
    /* the parent ends: the client may open its next stream while push 4 is still open */
    assert_int_equal(gw_h2_session_submit_response(s, 1, 204, NULL, 0, 1), 0);
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    drain(s, &f->o);
    f->r.len = 0;
    f->r.log[0] = 0;
    cli_headers(&f->c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_string_equal(f->r.log, "req 3 GET https example.com /a cl=-1 es=1;end 3;");
    drain(s, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_RST_STREAM, 0));
}

/* RST_STREAM(CANCEL) from the client closes the pushed stream (the layer above is told, by
 * the peer) and is counted. */
static void client_cancels_push(void **state)
{
    sfix_t *f = *state;
    gw_h2_session_t *s = fwith_get(f);
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    drain(s, &f->o);
    assert_int_equal(gw_h2_frame_write_rst_stream(&f->c.b, 2, GW_H2_CANCEL), 0);
    /* late WINDOW_UPDATE and PRIORITY on it are fine (§5.1 closed) */
    assert_int_equal(gw_h2_frame_write_window_update(&f->c.b, 2, 100), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_non_null(strstr(f->r.log, "close 2 CANCEL 1;"));
    assert_int_equal(gw_h2_session_stats(s).pushes_cancelled, 1);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 1), GW_E_NOENT);
    assert_int_equal(gw_h2_session_stream_release(s, 2), 0);
    drain(s, &f->o);
    assert_null(find_type(&f->o, GW_H2_FT_GOAWAY, 0));
}

/* What a client may not do with our streams: DATA on a reserved one (§5.1: connection
 * PROTOCOL_ERROR), RST_STREAM on an even id we never used (idle, §5.1), HEADERS on an even id
 * (§5.1.1). */
static void client_errors_on_pushed_streams(void **state)
{
    sfix_t *f = *state;
    uint32_t id;
    gw_h2_session_t *s = fwith_push(f, &id);
    drain(s, &f->o);
    assert_int_equal(gw_h2_frame_write_data(&f->c.b, 2, 0, "x", 1, 0, 0), 0);
    assert_true(feed(s, &f->c.b) < 0);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_PROTOCOL_ERROR);

    s = fwith_push(f, &id);
    drain(s, &f->o);
    assert_int_equal(gw_h2_frame_write_rst_stream(&f->c.b, 4, GW_H2_CANCEL), 0);
    assert_true(feed(s, &f->c.b) < 0);
    drain(s, &f->o);
    expect_goaway(&f->o, GW_H2_PROTOCOL_ERROR);

    /* DATA on a pushed stream whose response is under way: half-closed (remote) for us, a
     * stream error STREAM_CLOSED (§5.1) */
    s = fwith_push(f, &id);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 0), 0);
    drain(s, &f->o);
    assert_int_equal(gw_h2_frame_write_data(&f->c.b, 2, 0, "x", 1, 0, 0), 0);
    cli_exchange(s, &f->c, &f->o);
    expect_rst(&f->o, 2, GW_H2_STREAM_CLOSED);
}

/* A pushed stream is one level less urgent than its parent (RFC 9218), or its dependant in an
 * RFC 7540 tree; a PRIORITY_UPDATE from the client re-prioritises it. */
static void pushed_priority(void **state)
{
    sfix_t *f = *state;
    uint32_t id;
    uint8_t u;
    int inc;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET_U0);
    cli_send(s, &f->c);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 1);
    assert_int_equal(inc, 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&f->c.b, 2, "u=6, i", 6), 0);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 6);
    assert_int_equal(inc, 1);

    /* urgency 7 stays 7 */
    static const char *const GET_U7[] = {":method",    "GET",   ":scheme", "https",
                                         ":authority", "e.com", ":path",   "/",
                                         "priority",   "u=7",   NULL};
    s = fready(f);
    cli_headers(&f->c, 1, GW_H2_F_END_STREAM, GET_U7);
    assert_int_equal(feed(s, &f->c.b), (ssize_t)f->c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 7);
}

/* The promised stream's DATA keeps to its own send window (the peer's initial window) and the
 * scheduler: a parent at urgency 3 goes before its push at 4. */
static void pushed_data_scheduled_after_parent(void **state)
{
    sfix_t *f = *state;
    uint32_t id;
    gw_h2_session_t *s = fwith_push(f, &id);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(100);
    memset(rb->data, 'p', 100);
    assert_int_equal(gw_h2_session_submit_data(s, 2, rb, 0, 100, 1), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 100, 1), 0);
    gw_rbuf_unref(rb);
    drain(s, &f->o);
    const outf_t *d0 = find_type(&f->o, GW_H2_FT_DATA, 0), *d1 = find_type(&f->o, GW_H2_FT_DATA, 1);
    assert_non_null(d0);
    assert_non_null(d1);
    assert_int_equal(d0->h.stream_id, 1);
    assert_int_equal(d1->h.stream_id, 2);
    assert_int_equal(gw_h2_session_send_window(s, 2), 65535 - 100);
}

static const struct CMUnitTest tests[] = {
    SESSION_TEST(promise_and_pushed_response),
    SESSION_TEST(long_promise_continues),
    SESSION_TEST(enable_push_zero),
    SESSION_TEST(max_pushes_and_same_path),
    SESSION_TEST(parent_rules),
    SESSION_TEST(no_push_after_goaway),
    SESSION_TEST(concurrency_both_ways),
    SESSION_TEST(client_cancels_push),
    SESSION_TEST(client_errors_on_pushed_streams),
    SESSION_TEST(pushed_priority),
    SESSION_TEST(pushed_data_scheduled_after_parent),
};

GW_TEST_MAIN(tests)
