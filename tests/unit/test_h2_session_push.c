/* test_h2_session_push.c — server push in the HTTP/2 engine (RFC 9113 §8.4, issue 23 item 3):
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

/* A client settings frame with one setting. */
static void cli_setting(cli_t *c, uint16_t id, uint32_t value)
{
    gw_h2_setting_t st = {id, value};
    assert_int_equal(gw_h2_frame_write_settings(&c->b, 0, &st, 1), 0);
}

typedef struct {
    char text[1024];
    size_t len;
} dec_log_t;

static int dec_cb(void *ud, const gw_hpack_field_t *f)
{
    dec_log_t *l = ud;
    l->len += (size_t)snprintf(l->text + l->len, sizeof(l->text) - l->len, "%.*s=%.*s;",
                               SL(f->name), SL(f->value));
    return 0;
}

/* Decode a header block as the client would (its own decoder across calls). */
static void decode_block(gw_hpack_dec_t *d, const uint8_t *p, size_t len, dec_log_t *l)
{
    memset(l, 0, sizeof(*l));
    gw_hpack_dec_begin(d, 1 << 20);
    assert_int_equal(gw_hpack_decode(d, p, len, 1, dec_cb, l), (ssize_t)len);
    assert_int_equal(gw_hpack_dec_end(d), 0);
}

/* A session with a GET open on stream 1 (the parent of the pushes); the recorder keeps its
 * streams after they close. */
static gw_h2_session_t *with_get(rec_t *r, cli_t *c, const gw_h2_options_t *o)
{
    gw_h2_session_t *s = ready_get(r, c, o);
    r->release_on_close = 0;
    return s;
}

/* The promise goes before the parent's response, names the request, and the promised stream
 * answers like any other: reserved (local), half-closed (remote) after its HEADERS, closed
 * after its END_STREAM. */
static void promise_and_pushed_response(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_hpack_dec_t d;
    dec_log_t l;
    gw_h2_session_t *s = with_get(&r, &c, NULL);
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
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_PUSH_PROMISE);
    assert_int_equal(o.f[0].h.stream_id, 1);
    assert_int_equal(o.f[0].h.flags, GW_H2_F_END_HEADERS);
    assert_int_equal(get32(o.f[0].p), 2);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(gw_hpack_dec_init(&d, 4096), 0);
    decode_block(&d, o.f[0].p + 4, o.f[0].h.length - 4, &l);
    assert_string_equal(l.text, ":method=GET;:scheme=https;:authority=example.com;:path=/app.css;"
                                "accept=text/css;user-agent=t/1;");
    decode_block(&d, o.f[1].p, o.f[1].h.length, &l);
    assert_string_equal(l.text, ":status=200;");

    const gw_h2_header_t ct[] = {{GW_SLICE_LIT("content-type"), GW_SLICE_LIT("text/css")}};
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, ct, 1, 0), 0);
    assert_int_equal(gw_h2_session_stream_state(s, 2), GW_H2_SS_HALF_CLOSED_REMOTE);
    gw_rbuf_t *rb = gw_rbuf_new(16);
    memcpy(rb->data, "a{}", 3);
    assert_int_equal(gw_h2_session_submit_data(s, 2, rb, 0, 3, 1), 0);
    gw_rbuf_unref(rb);
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_HEADERS);
    assert_int_equal(o.f[0].h.stream_id, 2);
    decode_block(&d, o.f[0].p, o.f[0].h.length, &l);
    assert_string_equal(l.text, ":status=200;content-type=text/css;");
    assert_int_equal(o.f[1].h.type, GW_H2_FT_DATA);
    assert_int_equal(o.f[1].h.stream_id, 2);
    assert_int_equal(o.f[1].h.flags, GW_H2_F_END_STREAM);
    assert_memory_equal(o.f[1].p, "a{}", 3);
    assert_non_null(strstr(r.log, "close 2 NO_ERROR 0;"));
    assert_int_equal(gw_h2_session_stats(s).pushes_promised, 1);
    assert_int_equal(gw_h2_session_stream_release(s, 2), 0);
    assert_int_equal(gw_h2_session_stream_release(s, 1), 0);
    assert_int_equal(gw_h2_session_active_streams(s), 0);
    gw_hpack_dec_free(&d);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* A promise whose block does not fit one frame goes on in CONTINUATION frames (§6.6, §6.10),
 * the first carrying 4 bytes less of block than the peer's frame size. */
static void long_promise_continues(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    static char big[20001];
    memset(big, 'v', 20000);
    gw_h2_header_t hf[] = {{GW_SLICE_LIT("user-agent"), gw_slice_str(big)}};
    gw_h2_head_t req = push_req("example.com", "/big");
    req.headers = hf;
    req.headers_len = 1;
    uint32_t id;
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), 0);
    drain(s, &o);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.f[0].h.type, GW_H2_FT_PUSH_PROMISE);
    assert_int_equal(o.f[0].h.flags, 0);
    assert_int_equal(o.f[0].h.length, 16384);
    assert_int_equal(o.f[1].h.type, GW_H2_FT_CONTINUATION);
    assert_int_equal(o.f[1].h.stream_id, 1);
    assert_int_equal(o.f[1].h.flags, GW_H2_F_END_HEADERS);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* SETTINGS_ENABLE_PUSH = 0: nothing is promised (§6.5.2); set back to 1, pushes resume. */
static void enable_push_zero(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    cli_setting(&c, GW_H2_SETTINGS_ENABLE_PUSH, 0);
    cli_send(s, &c);
    drain(s, &o); /* the SETTINGS ACK */
    gw_h2_head_t req = push_req("example.com", "/app.css");
    uint32_t id;
    assert_int_equal(gw_h2_session_can_push(s), GW_E_UNSUPPORTED);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), GW_E_UNSUPPORTED);
    drain(s, &o);
    assert_int_equal(o.n, 0);
    cli_setting(&c, GW_H2_SETTINGS_ENABLE_PUSH, 1);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &req, &id, NULL), 0);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* max_pushes per connection, one promise per authority + path, and the parent's state. */
static void max_pushes_and_same_path(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_pushes = 3;
    gw_h2_session_t *s = with_get(&r, &c, &opt);
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
    cli_free(&c);
    gw_h2_session_del(s);

    /* max_pushes 0: never */
    opt.max_pushes = 0;
    s = with_get(&r, &c, &opt);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_LIMIT);
    cli_free(&c);
    gw_h2_session_del(s);
}

static void parent_rules(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    gw_h2_session_t *s = with_get(&r, &c, NULL);
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
    cli_free(&c);
    gw_h2_session_del(s);

    /* a parent the client reset */
    s = with_get(&r, &c, NULL);
    cli_headers(&c, 3, 0, GET);
    assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 3, GW_H2_CANCEL), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 3, &a, &id, NULL), GW_E_NOENT);
    /* a parent we reset */
    assert_int_equal(gw_h2_session_submit_rst(s, 1, GW_H2_INTERNAL_ERROR), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_NOENT);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* None after a GOAWAY, the client's or ours (the first of a graceful shutdown included). */
static void no_push_after_goaway(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_frame_write_goaway(&c.b, 0, GW_H2_NO_ERROR, NULL, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_can_push(s), GW_E_CLOSED);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_CLOSED);
    cli_free(&c);
    gw_h2_session_del(s);

    s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_session_shutdown(s, 0), 0);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), GW_E_CLOSED);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* The client's SETTINGS_MAX_CONCURRENT_STREAMS bounds the pushed streams not closed yet; a
 * closed one makes room. Pushed streams take none of the client's own slots. */
static void concurrency_both_ways(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_options_t opt;
    gw_h2_options_default(&opt);
    opt.max_concurrent_streams = 1;
    gw_h2_session_t *s = with_get(&r, &c, &opt);
    cli_setting(&c, GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS, 1);
    cli_send(s, &c);
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
    drain(s, &o);
    r.len = 0;
    r.log[0] = 0;
    cli_headers(&c, 3, GW_H2_F_END_STREAM, GET);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_string_equal(r.log, "req 3 GET https example.com /a cl=-1 es=1;end 3;");
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_RST_STREAM, 0));
    cli_free(&c);
    gw_h2_session_del(s);
}

/* RST_STREAM(CANCEL) from the client closes the pushed stream (the layer above is told, by
 * the peer) and is counted. */
static void client_cancels_push(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 2, GW_H2_CANCEL), 0);
    /* late WINDOW_UPDATE and PRIORITY on it are fine (§5.1 closed) */
    assert_int_equal(gw_h2_frame_write_window_update(&c.b, 2, 100), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_non_null(strstr(r.log, "close 2 CANCEL 1;"));
    assert_int_equal(gw_h2_session_stats(s).pushes_cancelled, 1);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 1), GW_E_NOENT);
    assert_int_equal(gw_h2_session_stream_release(s, 2), 0);
    drain(s, &o);
    assert_null(find_type(&o, GW_H2_FT_GOAWAY, 0));
    cli_free(&c);
    gw_h2_session_del(s);
}

/* What a client may not do with our streams: DATA on a reserved one (§5.1: connection
 * PROTOCOL_ERROR), RST_STREAM on an even id we never used (idle, §5.1), HEADERS on an even id
 * (§5.1.1). */
static void client_errors_on_pushed_streams(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 2, 0, "x", 1, 0, 0), 0);
    assert_true(feed(s, &c.b) < 0);
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);

    s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_frame_write_rst_stream(&c.b, 4, GW_H2_CANCEL), 0);
    assert_true(feed(s, &c.b) < 0);
    drain(s, &o);
    expect_goaway(&o, GW_H2_PROTOCOL_ERROR);
    cli_free(&c);
    gw_h2_session_del(s);

    /* DATA on a pushed stream whose response is under way: half-closed (remote) for us, a
     * stream error STREAM_CLOSED (§5.1) */
    s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 0), 0);
    drain(s, &o);
    assert_int_equal(gw_h2_frame_write_data(&c.b, 2, 0, "x", 1, 0, 0), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    drain(s, &o);
    expect_rst(&o, 2, GW_H2_STREAM_CLOSED);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* A pushed stream is one level less urgent than its parent (RFC 9218), or its dependant in an
 * RFC 7540 tree; a PRIORITY_UPDATE from the client re-prioritises it. */
static void pushed_priority(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    uint32_t id;
    uint8_t u;
    int inc;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_U0);
    cli_send(s, &c);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 1);
    assert_int_equal(inc, 0);
    assert_int_equal(gw_h2_frame_write_priority_update(&c.b, 2, "u=6, i", 6), 0);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 6);
    assert_int_equal(inc, 1);
    cli_free(&c);
    gw_h2_session_del(s);

    /* urgency 7 stays 7 */
    static const char *const GET_U7[] = {":method",    "GET",   ":scheme", "https",
                                         ":authority", "e.com", ":path",   "/",
                                         "priority",   "u=7",   NULL};
    s = ready(&r, &c, NULL);
    cli_headers(&c, 1, GW_H2_F_END_STREAM, GET_U7);
    assert_int_equal(feed(s, &c.b), (ssize_t)c.b.len);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_get_priority(s, 2, &u, &inc), 0);
    assert_int_equal(u, 7);
    cli_free(&c);
    gw_h2_session_del(s);
}

/* The promised stream's DATA keeps to its own send window (the peer's initial window) and the
 * scheduler: a parent at urgency 3 goes before its push at 4. */
static void pushed_data_scheduled_after_parent(void **state)
{
    (void)state;
    rec_t r;
    cli_t c;
    outs_t o;
    uint32_t id;
    gw_h2_head_t a = push_req("example.com", "/a.css");
    gw_h2_session_t *s = with_get(&r, &c, NULL);
    assert_int_equal(gw_h2_session_submit_push(s, 1, &a, &id, NULL), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 2, 200, NULL, 0, 0), 0);
    assert_int_equal(gw_h2_session_submit_response(s, 1, 200, NULL, 0, 0), 0);
    gw_rbuf_t *rb = gw_rbuf_new(100);
    memset(rb->data, 'p', 100);
    assert_int_equal(gw_h2_session_submit_data(s, 2, rb, 0, 100, 1), 0);
    assert_int_equal(gw_h2_session_submit_data(s, 1, rb, 0, 100, 1), 0);
    gw_rbuf_unref(rb);
    drain(s, &o);
    const outf_t *d0 = find_type(&o, GW_H2_FT_DATA, 0), *d1 = find_type(&o, GW_H2_FT_DATA, 1);
    assert_non_null(d0);
    assert_non_null(d1);
    assert_int_equal(d0->h.stream_id, 1);
    assert_int_equal(d1->h.stream_id, 2);
    assert_int_equal(gw_h2_session_send_window(s, 2), 65535 - 100);
    cli_free(&c);
    gw_h2_session_del(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(promise_and_pushed_response),
        cmocka_unit_test(long_promise_continues),
        cmocka_unit_test(enable_push_zero),
        cmocka_unit_test(max_pushes_and_same_path),
        cmocka_unit_test(parent_rules),
        cmocka_unit_test(no_push_after_goaway),
        cmocka_unit_test(concurrency_both_ways),
        cmocka_unit_test(client_cancels_push),
        cmocka_unit_test(client_errors_on_pushed_streams),
        cmocka_unit_test(pushed_priority),
        cmocka_unit_test(pushed_data_scheduled_after_parent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
