/* h2/frame.h — HTTP/2 frame codec (RFC 9113 §4, §6; PRIORITY_UPDATE of RFC 9218 §7.1).
 *
 * Pure functions: the parser reads a 9-byte header, then checks and splits a whole payload
 * into a gw_h2_frame_t whose slices point into the caller's payload bytes (valid as long as
 * those bytes are). The serializers append whole frames to a gw_bytes_t. Session-level rules
 * (stream states, which frames a server may receive) live in h2/session.c; every rule that
 * a frame breaks on its own is checked here and reported with the RFC 9113 error code, whether
 * it is a connection or a stream error, and a static reason string.
 */
#ifndef GW_H2_FRAME_H
#define GW_H2_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "h2/errors.h"

#define GW_H2_FRAME_HDR_LEN 9
#define GW_H2_DEFAULT_MAX_FRAME_SIZE 16384u /* RFC 9113 §6.5.2 initial value and minimum */
#define GW_H2_MAX_MAX_FRAME_SIZE 16777215u  /* 2^24-1 */
#define GW_H2_MAX_WINDOW 2147483647u        /* 2^31-1, RFC 9113 §6.9.1 */
#define GW_H2_DEFAULT_WINDOW 65535u         /* RFC 9113 §6.9.2 */
#define GW_H2_STREAM_ID_MASK 0x7fffffffu

/* The client connection preface (RFC 9113 §3.4), 24 bytes. */
#define GW_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define GW_H2_PREFACE_LEN 24

typedef enum {
    GW_H2_FT_DATA = 0x0,
    GW_H2_FT_HEADERS = 0x1,
    GW_H2_FT_PRIORITY = 0x2,
    GW_H2_FT_RST_STREAM = 0x3,
    GW_H2_FT_SETTINGS = 0x4,
    GW_H2_FT_PUSH_PROMISE = 0x5,
    GW_H2_FT_PING = 0x6,
    GW_H2_FT_GOAWAY = 0x7,
    GW_H2_FT_WINDOW_UPDATE = 0x8,
    GW_H2_FT_CONTINUATION = 0x9,
    GW_H2_FT_PRIORITY_UPDATE = 0x10, /* RFC 9218 §7.1 */
} gw_h2_frame_type_t;
/* "DATA", ...; "UNKNOWN" for other values. */
const char *gw_h2_frame_type_str(unsigned type);

#define GW_H2_F_END_STREAM 0x01  /* DATA, HEADERS: last frame of the stream from this side */
#define GW_H2_F_ACK 0x01         /* SETTINGS, PING: this is the acknowledgement */
#define GW_H2_F_END_HEADERS 0x04 /* HEADERS, PUSH_PROMISE, CONTINUATION: block complete */
#define GW_H2_F_PADDED 0x08      /* DATA, HEADERS, PUSH_PROMISE: Pad Length field present */
#define GW_H2_F_PRIORITY 0x20    /* HEADERS: exclusive/dependency/weight present */

typedef enum {
    GW_H2_SETTINGS_HEADER_TABLE_SIZE = 0x1,
    GW_H2_SETTINGS_ENABLE_PUSH = 0x2,
    GW_H2_SETTINGS_MAX_CONCURRENT_STREAMS = 0x3,
    GW_H2_SETTINGS_INITIAL_WINDOW_SIZE = 0x4,
    GW_H2_SETTINGS_MAX_FRAME_SIZE = 0x5,
    GW_H2_SETTINGS_MAX_HEADER_LIST_SIZE = 0x6,
    GW_H2_SETTINGS_ENABLE_CONNECT_PROTOCOL = 0x8, /* RFC 8441 §3 */
    GW_H2_SETTINGS_NO_RFC7540_PRIORITIES = 0x9,   /* RFC 9218 §2.1 */
} gw_h2_settings_id_t;

typedef struct {
    uint32_t length; /* payload length, 24 bits */
    uint8_t type;
    uint8_t flags;      /* as received; the parser ignores bits it does not know */
    uint32_t stream_id; /* reserved bit cleared */
} gw_h2_frame_hdr_t;

typedef struct {
    uint32_t dependency; /* reserved bit cleared */
    uint8_t weight;      /* wire value: weight - 1 */
    uint8_t exclusive;
} gw_h2_priority_t;

typedef struct {
    uint16_t id;
    uint32_t value;
} gw_h2_setting_t;

/* A parsed frame. Slices point into the payload given to gw_h2_frame_parse(). */
typedef struct {
    gw_h2_frame_hdr_t hdr;
    union {
        struct {
            gw_slice_t data;  /* without padding */
            uint32_t pad_len; /* padding bytes incl. the Pad Length field (for flow control,
                                 the whole hdr.length counts) */
        } data;
        struct {
            gw_slice_t block; /* field block fragment */
            int has_priority;
            gw_h2_priority_t pri;
        } headers;
        gw_h2_priority_t priority;
        struct {
            uint32_t error_code;
        } rst_stream;
        struct {
            const uint8_t *raw; /* n entries of 6 bytes; read with gw_h2_settings_get() */
            size_t n;
        } settings;
        struct {
            uint32_t promised_id;
            gw_slice_t block;
        } push_promise;
        struct {
            uint8_t opaque[8];
        } ping;
        struct {
            uint32_t last_stream_id;
            uint32_t error_code;
            gw_slice_t debug;
        } goaway;
        struct {
            uint32_t increment;
        } window_update;
        struct {
            gw_slice_t block;
        } continuation;
        struct {
            uint32_t prioritized_id;
            gw_slice_t value; /* Priority Field Value, ASCII (RFC 9218 §7.1) */
        } priority_update;
    } u;
} gw_h2_frame_t;

/* Why a frame was rejected: the RFC 9113 §7 code, whether it is a connection error (1) or a
 * stream error on hdr.stream_id (0), and a static reason for the log. */
typedef struct {
    uint32_t code;
    int conn;
    const char *reason;
} gw_h2_frame_err_t;

/* Decode the 9-byte frame header at in. */
void gw_h2_frame_hdr_parse(const uint8_t *in, gw_h2_frame_hdr_t *h);
/* Encode h into out[0..9). */
void gw_h2_frame_hdr_pack(uint8_t *out, const gw_h2_frame_hdr_t *h);

/* Header-only checks that can be made before the payload is read: length above max_frame_size
 * (the SETTINGS_MAX_FRAME_SIZE we advertised) -> FRAME_SIZE_ERROR, treated as a connection
 * error for every type (RFC 9113 §4.2 requires it for frames that carry field blocks or alter
 * the connection; a session cannot skip the others safely without buffering them either).
 * Returns 0, or GW_E_PROTO with *err filled. */
int gw_h2_frame_check_hdr(const gw_h2_frame_hdr_t *h, uint32_t max_frame_size,
                          gw_h2_frame_err_t *err);

/* Check and split the payload (h->length bytes at payload) of a frame whose header passed
 * gw_h2_frame_check_hdr. Returns:
 *    0          *f filled;
 *    1          unknown frame type: ignore the frame (RFC 9113 §4.1, §5.5);
 *    GW_E_PROTO connection error, *err filled (err->conn = 1);
 *    GW_E_STREAM stream error on h->stream_id, *err filled (err->conn = 0).
 * Rules (RFC 9113 §6): stream id 0 / non-0 per type -> PROTOCOL_ERROR; fixed lengths
 * (PRIORITY 5 -> stream FRAME_SIZE_ERROR; RST_STREAM 4, PING 8, WINDOW_UPDATE 4, SETTINGS n*6,
 * SETTINGS ACK 0, GOAWAY >= 8, PRIORITY_UPDATE >= 4 -> FRAME_SIZE_ERROR); padding that does not
 * fit -> PROTOCOL_ERROR; a Pad Length or priority field missing -> FRAME_SIZE_ERROR;
 * WINDOW_UPDATE increment 0 -> PROTOCOL_ERROR (stream error on a stream, connection error on
 * stream 0); HEADERS/PRIORITY depending on itself -> stream PROTOCOL_ERROR (§5.3.1); SETTINGS
 * values out of range (ENABLE_PUSH, ENABLE_CONNECT_PROTOCOL, NO_RFC7540_PRIORITIES not 0/1,
 * MAX_FRAME_SIZE outside [2^14, 2^24-1] -> PROTOCOL_ERROR; INITIAL_WINDOW_SIZE > 2^31-1 ->
 * FLOW_CONTROL_ERROR); PRIORITY_UPDATE on a stream or about stream 0 -> PROTOCOL_ERROR. */
int gw_h2_frame_parse(const gw_h2_frame_hdr_t *h, const uint8_t *payload, gw_h2_frame_t *f,
                      gw_h2_frame_err_t *err);

/* Entry i (< f->u.settings.n) of a parsed SETTINGS frame. */
gw_h2_setting_t gw_h2_settings_get(const gw_h2_frame_t *f, size_t i);

/* ---- serializers: each appends one whole frame to out; 0, GW_E_NOMEM, GW_E_LIMIT (out's
 * cap), or GW_E_INVAL (payload longer than 2^24-1 or a stream id with the high bit set).
 * pad_len is the number of padding bytes (0-255 with the PADDED flag set when pad_len > 0 or
 * padded != 0: pass padded=1 with pad_len=0 for a Pad Length field of zero). ---- */

/* Any frame, payload copied as is (tests build malformed frames with it). */
int gw_h2_frame_write_raw(gw_bytes_t *out, uint8_t type, uint8_t flags, uint32_t stream_id,
                          const void *payload, size_t len);
int gw_h2_frame_write_data(gw_bytes_t *out, uint32_t stream_id, uint8_t flags, const void *data,
                           size_t len, int padded, uint8_t pad_len);
/* pri NULL: no priority fields; else the PRIORITY flag is set. flags: END_STREAM/END_HEADERS. */
int gw_h2_frame_write_headers(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                              const gw_h2_priority_t *pri, const void *block, size_t len,
                              int padded, uint8_t pad_len);
int gw_h2_frame_write_priority(gw_bytes_t *out, uint32_t stream_id, const gw_h2_priority_t *pri);
int gw_h2_frame_write_rst_stream(gw_bytes_t *out, uint32_t stream_id, uint32_t error_code);
/* ack 1: an empty SETTINGS ACK (s/n ignored). */
int gw_h2_frame_write_settings(gw_bytes_t *out, int ack, const gw_h2_setting_t *s, size_t n);
int gw_h2_frame_write_push_promise(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                                   uint32_t promised_id, const void *block, size_t len, int padded,
                                   uint8_t pad_len);
int gw_h2_frame_write_ping(gw_bytes_t *out, int ack, const uint8_t *opaque8);
int gw_h2_frame_write_goaway(gw_bytes_t *out, uint32_t last_stream_id, uint32_t error_code,
                             const void *debug, size_t debug_len);
int gw_h2_frame_write_window_update(gw_bytes_t *out, uint32_t stream_id, uint32_t increment);
int gw_h2_frame_write_continuation(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                                   const void *block, size_t len);
int gw_h2_frame_write_priority_update(gw_bytes_t *out, uint32_t prioritized_id, const void *value,
                                      size_t len);

#endif
