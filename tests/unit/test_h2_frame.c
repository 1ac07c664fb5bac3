/* Unit tests of h2/frame: RFC 9113 §4 header layout, round trips of every frame type of §6
 * (and PRIORITY_UPDATE, RFC 9218 §7.1), and one test per malformed-frame rule with the error
 * code and connection/stream scope the RFC requires. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"

/* The fixture of every test (FRAME_TEST): the bytes written, the frame parsed from them and
 * the parser's verdict, fresh for each test. */
static gw_bytes_t b;
static gw_h2_frame_t f;
static gw_h2_frame_err_t err;

static int frame_setup(void **state)
{
    (void)state;
    gw_bytes_init(&b, 0);
    memset(&f, 0, sizeof(f));
    memset(&err, 0, sizeof(err));
    return 0;
}

static int frame_teardown(void **state)
{
    (void)state;
    gw_bytes_free(&b);
    return 0;
}

#define FRAME_TEST(fn) cmocka_unit_test_setup_teardown(fn, frame_setup, frame_teardown)

/* Parse the single frame in b into f (err); checks that the header length matches the buffer. */
static int parse1(void)
{
    gw_h2_frame_hdr_t h;
    assert_true(b.len >= GW_H2_FRAME_HDR_LEN);
    gw_h2_frame_hdr_parse(b.base, &h);
    assert_int_equal(h.length + GW_H2_FRAME_HDR_LEN, b.len);
    int rc = gw_h2_frame_check_hdr(&h, GW_H2_MAX_MAX_FRAME_SIZE, &err);
    if (rc < 0)
        return rc;
    return gw_h2_frame_parse(&h, b.base + GW_H2_FRAME_HDR_LEN, &f, &err);
}

/* Build a raw frame and expect the given error. */
static void expect_err(uint8_t type, uint8_t flags, uint32_t sid, const void *payload, size_t len,
                       int rc, uint32_t code)
{
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_raw(&b, type, flags, sid, payload, len), 0);
    assert_int_equal(parse1(), rc);
    assert_int_equal(err.code, code);
    assert_int_equal(err.conn, rc == GW_E_PROTO);
    assert_non_null(err.reason);
}

static void header_layout(void **state)
{
    (void)state;
    /* RFC 9113 §4.1: 24-bit length, type, flags, R + 31-bit stream id. */
    const uint8_t raw[9] = {0x01, 0x02, 0x03, 0x01, 0x25, 0x80, 0x00, 0x00, 0x05};
    gw_h2_frame_hdr_t h;
    gw_h2_frame_hdr_parse(raw, &h);
    assert_int_equal(h.length, 0x010203);
    assert_int_equal(h.type, GW_H2_FT_HEADERS);
    assert_int_equal(h.flags, 0x25);
    assert_int_equal(h.stream_id, 5); /* reserved bit ignored */
    uint8_t out[9];
    gw_h2_frame_hdr_pack(out, &h);
    assert_memory_equal(out, "\x01\x02\x03\x01\x25\x00\x00\x00\x05", 9);
    assert_string_equal(gw_h2_frame_type_str(GW_H2_FT_CONTINUATION), "CONTINUATION");
    assert_string_equal(gw_h2_frame_type_str(0x42), "UNKNOWN");
    assert_string_equal(gw_h2_error_str(GW_H2_ENHANCE_YOUR_CALM), "ENHANCE_YOUR_CALM");
    assert_string_equal(gw_h2_error_str(0x99), "UNKNOWN_ERROR");
}

/* b holds a DATA frame of "hello" with these flags and pad_len. */
static void expect_hello(uint8_t flags, size_t pad_len)
{
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.flags, flags);
    assert_int_equal(f.u.data.data.len, 5);
    assert_memory_equal(f.u.data.data.base, "hello", 5);
    assert_int_equal(f.u.data.pad_len, pad_len);
}

static void data_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(gw_h2_frame_write_data(&b, 3, GW_H2_F_END_STREAM, "hello", 5, 0, 0), 0);
    assert_memory_equal(b.base, "\x00\x00\x05\x00\x01\x00\x00\x00\x03hello", 14);
    expect_hello(GW_H2_F_END_STREAM, 0);
    /* padded */
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_data(&b, 3, 0, "hello", 5, 1, 10), 0);
    assert_int_equal(b.len, 9 + 1 + 5 + 10);
    expect_hello(GW_H2_F_PADDED, 11);
    /* padded with a zero Pad Length field, empty data */
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_data(&b, 3, 0, NULL, 0, 1, 0), 0);
    assert_int_equal(b.len, 10);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.data.data.len, 0);
    assert_int_equal(f.u.data.pad_len, 1);
}

static void headers_roundtrip(void **state)
{
    (void)state;
    gw_h2_priority_t pri = {7, 200, 1};
    assert_int_equal(gw_h2_frame_write_headers(&b, 9, GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM,
                                               &pri, "\x82\x84", 2, 1, 3),
                     0);
    assert_int_equal(b.len, 9 + 1 + 5 + 2 + 3);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.flags,
                     GW_H2_F_END_HEADERS | GW_H2_F_END_STREAM | GW_H2_F_PADDED | GW_H2_F_PRIORITY);
    assert_true(f.u.headers.has_priority);
    assert_int_equal(f.u.headers.pri.dependency, 7);
    assert_int_equal(f.u.headers.pri.weight, 200);
    assert_int_equal(f.u.headers.pri.exclusive, 1);
    assert_int_equal(f.u.headers.block.len, 2);
    assert_memory_equal(f.u.headers.block.base, "\x82\x84", 2);
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_headers(&b, 9, GW_H2_F_END_HEADERS, NULL, "\x82", 1, 0, 0),
                     0);
    assert_int_equal(parse1(), 0);
    assert_false(f.u.headers.has_priority);
    assert_int_equal(f.u.headers.block.len, 1);
}

static void priority_rst_roundtrip(void **state)
{
    (void)state;
    gw_h2_priority_t pri = {0x7fffffff, 15, 0};
    assert_int_equal(gw_h2_frame_write_priority(&b, 1, &pri), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.priority.dependency, 0x7fffffff);
    assert_int_equal(f.u.priority.weight, 15);
    assert_int_equal(f.u.priority.exclusive, 0);
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_rst_stream(&b, 5, GW_H2_CANCEL), 0);
    assert_memory_equal(b.base, "\x00\x00\x04\x03\x00\x00\x00\x00\x05\x00\x00\x00\x08", 13);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.rst_stream.error_code, GW_H2_CANCEL);
}

static void settings_roundtrip(void **state)
{
    (void)state;
    const gw_h2_setting_t s[] = {{GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
                                 {GW_H2_SETTINGS_INITIAL_WINDOW_SIZE, 262144},
                                 {0x4242, 0xffffffff} /* unknown: ignored, no error */};
    assert_int_equal(gw_h2_frame_write_settings(&b, 0, s, 3), 0);
    assert_int_equal(b.len, 9 + 18);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.settings.n, 3);
    for (size_t i = 0; i < 3; i++) {
        gw_h2_setting_t g = gw_h2_settings_get(&f, i);
        assert_int_equal(g.id, s[i].id);
        assert_int_equal(g.value, s[i].value);
    }
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_settings(&b, 1, s, 3), 0);
    assert_memory_equal(b.base, "\x00\x00\x00\x04\x01\x00\x00\x00\x00", 9);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.settings.n, 0);
}

static void push_promise_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(
        gw_h2_frame_write_push_promise(&b, 1, GW_H2_F_END_HEADERS, 2, "\x82\x87", 2, 1, 4), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.flags, GW_H2_F_END_HEADERS | GW_H2_F_PADDED);
    assert_int_equal(f.u.push_promise.promised_id, 2);
    assert_int_equal(f.u.push_promise.block.len, 2);
    assert_memory_equal(f.u.push_promise.block.base, "\x82\x87", 2);
}

static void ping_goaway_window_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(gw_h2_frame_write_ping(&b, 1, (const uint8_t *)"abcdefgh"), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.flags, GW_H2_F_ACK);
    assert_memory_equal(f.u.ping.opaque, "abcdefgh", 8);
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_goaway(&b, 41, GW_H2_ENHANCE_YOUR_CALM, "calm", 4), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.goaway.last_stream_id, 41);
    assert_int_equal(f.u.goaway.error_code, GW_H2_ENHANCE_YOUR_CALM);
    assert_int_equal(f.u.goaway.debug.len, 4);
    assert_memory_equal(f.u.goaway.debug.base, "calm", 4);
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_window_update(&b, 0, 0x7fffffff), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.window_update.increment, 0x7fffffff);
    assert_int_equal(gw_h2_frame_write_window_update(&b, 0, 0x80000000u), GW_E_INVAL);
    b.len = 0;
    /* reserved bit of the increment is ignored on receipt */
    assert_int_equal(gw_h2_frame_write_raw(&b, GW_H2_FT_WINDOW_UPDATE, 0, 1, "\x80\x00\x00\x10", 4),
                     0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.window_update.increment, 16);
}

static void continuation_priority_update_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(
        gw_h2_frame_write_continuation(&b, 3, GW_H2_F_END_HEADERS | GW_H2_F_PADDED, "\x84", 1), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.flags, GW_H2_F_END_HEADERS); /* PADDED is not a CONTINUATION flag */
    assert_int_equal(f.u.continuation.block.len, 1);
    b.len = 0;
    assert_int_equal(gw_h2_frame_write_priority_update(&b, 5, "u=1, i", 6), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.hdr.type, GW_H2_FT_PRIORITY_UPDATE);
    assert_int_equal(f.u.priority_update.prioritized_id, 5);
    assert_int_equal(f.u.priority_update.value.len, 6);
    assert_memory_equal(f.u.priority_update.value.base, "u=1, i", 6);
}

static void unknown_type_and_flags_ignored(void **state)
{
    (void)state;
    assert_int_equal(gw_h2_frame_write_raw(&b, 0xfa, 0xff, 7, "xyz", 3), 0);
    assert_int_equal(parse1(), 1);
    b.len = 0;
    /* unknown flag bits on PING are ignored */
    assert_int_equal(gw_h2_frame_write_raw(&b, GW_H2_FT_PING, 0xfe, 0, "12345678", 8), 0);
    assert_int_equal(parse1(), 0);
    assert_false(f.hdr.flags & GW_H2_F_ACK);
    b.len = 0;
    /* DATA with unknown flags: PRIORITY bit means nothing there */
    assert_int_equal(gw_h2_frame_write_raw(&b, GW_H2_FT_DATA, 0x20 | 0x04, 1, "ab", 2), 0);
    assert_int_equal(parse1(), 0);
    assert_int_equal(f.u.data.data.len, 2);
}

static void oversized_frame(void **state)
{
    (void)state;
    gw_h2_frame_hdr_t h = {16385, GW_H2_FT_DATA, 0, 1};
    assert_int_equal(gw_h2_frame_check_hdr(&h, 16384, &err), GW_E_PROTO);
    assert_int_equal(err.code, GW_H2_FRAME_SIZE_ERROR);
    assert_true(err.conn);
    h.length = 16384;
    assert_int_equal(gw_h2_frame_check_hdr(&h, 16384, &err), 0);
    assert_int_equal(gw_h2_frame_write_raw(&b, 0, 0, 1, NULL, GW_H2_MAX_MAX_FRAME_SIZE + 1),
                     GW_E_INVAL);
    assert_int_equal(gw_h2_frame_write_raw(&b, 0, 0, 0x80000001u, NULL, 0), GW_E_INVAL);
}

/* One check per malformed-frame rule of RFC 9113 §6 (and RFC 9218 §7.1). */
static void malformed_rules(void **state)
{
    (void)state;
    const uint8_t z[16] = {0};
    const int C = GW_E_PROTO, S = GW_E_STREAM;
    /* §6.1 DATA */
    expect_err(GW_H2_FT_DATA, 0, 0, "a", 1, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_DATA, GW_H2_F_PADDED, 1, NULL, 0, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_DATA, GW_H2_F_PADDED, 1, "\x01", 1, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_DATA, GW_H2_F_PADDED, 1,
               "\x03"
               "ab",
               3, C, GW_H2_PROTOCOL_ERROR);
    /* §6.2 HEADERS */
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_END_HEADERS, 0, "\x82", 1, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_PRIORITY, 1, "\x00\x00\x00", 3, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_PADDED, 1, NULL, 0, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_PADDED, 1, "\x02\x82", 2, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_PADDED | GW_H2_F_PRIORITY, 1, "\x01\x00\x00\x00\x03\x10",
               6, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_HEADERS, GW_H2_F_PRIORITY, 3, "\x00\x00\x00\x03\x10\x82", 6, S,
               GW_H2_PROTOCOL_ERROR); /* §5.3.1 self-dependency */
    /* §6.3 PRIORITY */
    expect_err(GW_H2_FT_PRIORITY, 0, 0, z, 5, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_PRIORITY, 0, 1, z, 4, S, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_PRIORITY, 0, 1, z, 6, S, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_PRIORITY, 0, 1, "\x00\x00\x00\x01\x10", 5, S, GW_H2_PROTOCOL_ERROR);
    /* §6.4 RST_STREAM */
    expect_err(GW_H2_FT_RST_STREAM, 0, 0, z, 4, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_RST_STREAM, 0, 1, z, 3, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_RST_STREAM, 0, 1, z, 5, C, GW_H2_FRAME_SIZE_ERROR);
    /* §6.5 SETTINGS */
    expect_err(GW_H2_FT_SETTINGS, 0, 1, NULL, 0, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, GW_H2_F_ACK, 0, z, 6, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, z, 5, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x02\x00\x00\x00\x02", 6, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x04\x80\x00\x00\x00", 6, C, GW_H2_FLOW_CONTROL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x05\x00\x00\x3f\xff", 6, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x05\x01\x00\x00\x00", 6, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x08\x00\x00\x00\x02", 6, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_SETTINGS, 0, 0, "\x00\x09\x00\x00\x00\x05", 6, C, GW_H2_PROTOCOL_ERROR);
    /* §6.6 PUSH_PROMISE */
    expect_err(GW_H2_FT_PUSH_PROMISE, 0, 0, z, 4, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_PUSH_PROMISE, 0, 1, z, 3, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_PUSH_PROMISE, GW_H2_F_PADDED, 1, "\x01\x00\x00\x00\x02", 5, C,
               GW_H2_PROTOCOL_ERROR);
    /* §6.7 PING */
    expect_err(GW_H2_FT_PING, 0, 1, z, 8, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_PING, 0, 0, z, 7, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_PING, GW_H2_F_ACK, 0, z, 9, C, GW_H2_FRAME_SIZE_ERROR);
    /* §6.8 GOAWAY */
    expect_err(GW_H2_FT_GOAWAY, 0, 1, z, 8, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_GOAWAY, 0, 0, z, 7, C, GW_H2_FRAME_SIZE_ERROR);
    /* §6.9 WINDOW_UPDATE */
    expect_err(GW_H2_FT_WINDOW_UPDATE, 0, 0, z, 3, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_WINDOW_UPDATE, 0, 1, z, 5, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_WINDOW_UPDATE, 0, 0, z, 4, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_WINDOW_UPDATE, 0, 1, z, 4, S, GW_H2_PROTOCOL_ERROR);
    /* §6.10 CONTINUATION */
    expect_err(GW_H2_FT_CONTINUATION, GW_H2_F_END_HEADERS, 0, "\x82", 1, C, GW_H2_PROTOCOL_ERROR);
    /* RFC 9218 §7.1 PRIORITY_UPDATE */
    expect_err(GW_H2_FT_PRIORITY_UPDATE, 0, 1, "\x00\x00\x00\x01", 4, C, GW_H2_PROTOCOL_ERROR);
    expect_err(GW_H2_FT_PRIORITY_UPDATE, 0, 0, "\x00\x00\x01", 3, C, GW_H2_FRAME_SIZE_ERROR);
    expect_err(GW_H2_FT_PRIORITY_UPDATE, 0, 0, "\x00\x00\x00\x00u=1", 7, C, GW_H2_PROTOCOL_ERROR);
}

static void serializer_alloc_failure(void **state)
{
    (void)state;
    gw_alloc_fail_after(1);
    assert_int_equal(gw_h2_frame_write_ping(&b, 0, NULL), GW_E_NOMEM);
    gw_alloc_fail_after(0);
    assert_int_equal(b.len, 0);
    gw_bytes_t small;
    gw_bytes_init(&small, 16);
    assert_int_equal(gw_h2_frame_write_ping(&small, 0, NULL), GW_E_LIMIT);
    assert_int_equal(small.len, 0);
    gw_bytes_free(&small);
}

static const struct CMUnitTest tests[] = {
    FRAME_TEST(header_layout),
    FRAME_TEST(data_roundtrip),
    FRAME_TEST(headers_roundtrip),
    FRAME_TEST(priority_rst_roundtrip),
    FRAME_TEST(settings_roundtrip),
    FRAME_TEST(push_promise_roundtrip),
    FRAME_TEST(ping_goaway_window_roundtrip),
    FRAME_TEST(continuation_priority_update_roundtrip),
    FRAME_TEST(unknown_type_and_flags_ignored),
    FRAME_TEST(oversized_frame),
    FRAME_TEST(malformed_rules),
    FRAME_TEST(serializer_alloc_failure),
};

GW_TEST_MAIN(tests)
