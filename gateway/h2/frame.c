/* h2/frame.c — HTTP/2 frame parsing and serialization (RFC 9113 §4, §6; RFC 9218 §7.1). */
#include "h2/frame.h"

#include <string.h>

#include "common/err.h"

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

const char *gw_h2_frame_type_str(unsigned type)
{
    /* RFC 9113 §6 numbers them 0x0 (DATA) to 0x9 (CONTINUATION) */
    static const char *const n[] = {"DATA",          "HEADERS",      "PRIORITY", "RST_STREAM",
                                    "SETTINGS",      "PUSH_PROMISE", "PING",     "GOAWAY",
                                    "WINDOW_UPDATE", "CONTINUATION"};
    if (type == GW_H2_FT_PRIORITY_UPDATE)
        return "PRIORITY_UPDATE";
    return GW_NAME_OF(n, type, "UNKNOWN");
}

void gw_h2_frame_hdr_parse(const uint8_t *in, gw_h2_frame_hdr_t *h)
{
    h->length = ((uint32_t)in[0] << 16) | ((uint32_t)in[1] << 8) | in[2];
    h->type = in[3];
    h->flags = in[4];
    /* RFC 9113 §4.1: the reserved bit MUST be ignored on receipt. */
    h->stream_id = get32(in + 5) & GW_H2_STREAM_ID_MASK;
}

void gw_h2_frame_hdr_pack(uint8_t *out, const gw_h2_frame_hdr_t *h)
{
    out[0] = (uint8_t)(h->length >> 16);
    out[1] = (uint8_t)(h->length >> 8);
    out[2] = (uint8_t)h->length;
    out[3] = h->type;
    out[4] = h->flags;
    put32(out + 5, h->stream_id & GW_H2_STREAM_ID_MASK);
}

static int fail(gw_h2_frame_err_t *err, int conn, uint32_t code, const char *reason)
{
    err->code = code;
    err->conn = conn;
    err->reason = reason;
    return conn ? GW_E_PROTO : GW_E_STREAM;
}

int gw_h2_frame_check_hdr(const gw_h2_frame_hdr_t *h, uint32_t max_frame_size,
                          gw_h2_frame_err_t *err)
{
    if (h->length > max_frame_size)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE");
    return 0;
}

/* Strip the Pad Length field and padding (RFC 9113 §6.1, §6.2, §6.6). On success p and len
 * describe what is left between the Pad Length field and the padding; `fixed` bytes of
 * type-specific fields must fit too. */
static int strip_padding(const gw_h2_frame_hdr_t *h, const uint8_t **p, size_t *len, size_t fixed,
                         uint32_t *pad_total, gw_h2_frame_err_t *err)
{
    size_t pad = 0;
    *pad_total = 0;
    if (h->flags & GW_H2_F_PADDED) {
        if (*len < 1 + fixed)
            return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "padded frame too short");
        pad = (*p)[0];
        (*p)++;
        (*len)--;
        /* "If the length of the padding is the length of the frame payload or greater, the
         * recipient MUST treat this as a connection error of type PROTOCOL_ERROR." */
        if (pad > *len - fixed)
            return fail(err, 1, GW_H2_PROTOCOL_ERROR, "padding exceeds payload");
        *len -= pad;
        *pad_total = (uint32_t)pad + 1;
    } else if (*len < fixed) {
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "frame too short");
    }
    return 0;
}

static void parse_priority(const uint8_t *p, gw_h2_priority_t *pri)
{
    uint32_t v = get32(p);
    pri->exclusive = (uint8_t)(v >> 31);
    pri->dependency = v & GW_H2_STREAM_ID_MASK;
    pri->weight = p[4];
}

static int check_setting(uint16_t id, uint32_t v, gw_h2_frame_err_t *err)
{
    switch (id) {
    case GW_H2_SETTINGS_ENABLE_PUSH:
        if (v > 1)
            return fail(err, 1, GW_H2_PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH not 0 or 1");
        break;
    case GW_H2_SETTINGS_INITIAL_WINDOW_SIZE:
        /* RFC 9113 §6.5.2 */
        if (v > GW_H2_MAX_WINDOW)
            return fail(err, 1, GW_H2_FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE > 2^31-1");
        break;
    case GW_H2_SETTINGS_MAX_FRAME_SIZE:
        if (v < GW_H2_DEFAULT_MAX_FRAME_SIZE || v > GW_H2_MAX_MAX_FRAME_SIZE)
            return fail(err, 1, GW_H2_PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range");
        break;
    case GW_H2_SETTINGS_ENABLE_CONNECT_PROTOCOL: /* RFC 8441 §3 */
        if (v > 1)
            return fail(err, 1, GW_H2_PROTOCOL_ERROR, "SETTINGS_ENABLE_CONNECT_PROTOCOL not 0/1");
        break;
    case GW_H2_SETTINGS_NO_RFC7540_PRIORITIES: /* RFC 9218 §2.1 */
        if (v > 1)
            return fail(err, 1, GW_H2_PROTOCOL_ERROR, "SETTINGS_NO_RFC7540_PRIORITIES not 0/1");
        break;
    default:
        /* unknown settings MUST be ignored (§6.5.2) */
        break;
    }
    return 0;
}

gw_h2_setting_t gw_h2_settings_get(const gw_h2_frame_t *f, size_t i)
{
    const uint8_t *p = f->u.settings.raw + i * 6;
    gw_h2_setting_t s = {(uint16_t)((p[0] << 8) | p[1]), get32(p + 2)};
    return s;
}

/* §6.1 */
static int parse_data(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len, gw_h2_frame_t *f,
                      gw_h2_frame_err_t *err)
{
    uint32_t pad_total;
    int rc;
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "DATA on stream 0");
    if ((rc = strip_padding(h, &p, &len, 0, &pad_total, err)) < 0)
        return rc;
    f->u.data.data = (gw_slice_t){p, len};
    f->u.data.pad_len = pad_total;
    return 0;
}

/* §6.2 */
static int parse_headers(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len, gw_h2_frame_t *f,
                         gw_h2_frame_err_t *err)
{
    size_t fixed = (h->flags & GW_H2_F_PRIORITY) ? 5 : 0;
    uint32_t pad_total;
    int rc;
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "HEADERS on stream 0");
    if ((rc = strip_padding(h, &p, &len, fixed, &pad_total, err)) < 0)
        return rc;
    if (fixed) {
        f->u.headers.has_priority = 1;
        parse_priority(p, &f->u.headers.pri);
        p += 5;
        len -= 5;
    }
    f->u.headers.block = (gw_slice_t){p, len};
    if (fixed && f->u.headers.pri.dependency == h->stream_id)
        return fail(err, 0, GW_H2_PROTOCOL_ERROR, "stream depends on itself");
    return 0;
}

/* §6.3 */
static int parse_priority_frame(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                                gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "PRIORITY on stream 0");
    if (len != 5)
        return fail(err, 0, GW_H2_FRAME_SIZE_ERROR, "PRIORITY length not 5");
    parse_priority(p, &f->u.priority);
    if (f->u.priority.dependency == h->stream_id)
        return fail(err, 0, GW_H2_PROTOCOL_ERROR, "stream depends on itself");
    return 0;
}

/* §6.4 */
static int parse_rst_stream(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                            gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "RST_STREAM on stream 0");
    if (len != 4)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "RST_STREAM length not 4");
    f->u.rst_stream.error_code = get32(p);
    return 0;
}

/* §6.5 */
static int parse_settings(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                          gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    int rc;
    if (h->stream_id != 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "SETTINGS on a stream");
    if ((h->flags & GW_H2_F_ACK) && len != 0)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
    if (len % 6 != 0)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
    f->u.settings.raw = p;
    f->u.settings.n = len / 6;
    for (size_t i = 0; i < f->u.settings.n; i++) {
        gw_h2_setting_t st = gw_h2_settings_get(f, i);
        if ((rc = check_setting(st.id, st.value, err)) < 0)
            return rc;
    }
    return 0;
}

/* §6.6 */
static int parse_push_promise(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                              gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    uint32_t pad_total;
    int rc;
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "PUSH_PROMISE on stream 0");
    if ((rc = strip_padding(h, &p, &len, 4, &pad_total, err)) < 0)
        return rc;
    f->u.push_promise.promised_id = get32(p) & GW_H2_STREAM_ID_MASK;
    f->u.push_promise.block = (gw_slice_t){p + 4, len - 4};
    return 0;
}

/* §6.7 */
static int parse_ping(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len, gw_h2_frame_t *f,
                      gw_h2_frame_err_t *err)
{
    if (h->stream_id != 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "PING on a stream");
    if (len != 8)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "PING length not 8");
    memcpy(f->u.ping.opaque, p, 8);
    return 0;
}

/* §6.8 */
static int parse_goaway(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len, gw_h2_frame_t *f,
                        gw_h2_frame_err_t *err)
{
    if (h->stream_id != 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "GOAWAY on a stream");
    if (len < 8)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "GOAWAY shorter than 8");
    f->u.goaway.last_stream_id = get32(p) & GW_H2_STREAM_ID_MASK;
    f->u.goaway.error_code = get32(p + 4);
    f->u.goaway.debug = (gw_slice_t){p + 8, len - 8};
    return 0;
}

/* §6.9 */
static int parse_window_update(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                               gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    if (len != 4)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "WINDOW_UPDATE length not 4");
    f->u.window_update.increment = get32(p) & GW_H2_STREAM_ID_MASK;
    if (f->u.window_update.increment == 0)
        return fail(err, h->stream_id == 0, GW_H2_PROTOCOL_ERROR, "WINDOW_UPDATE increment 0");
    return 0;
}

/* §6.10 */
static int parse_continuation(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                              gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    if (h->stream_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "CONTINUATION on stream 0");
    f->u.continuation.block = (gw_slice_t){p, len};
    return 0;
}

/* RFC 9218 §7.1 */
static int parse_priority_update(const gw_h2_frame_hdr_t *h, const uint8_t *p, size_t len,
                                 gw_h2_frame_t *f, gw_h2_frame_err_t *err)
{
    if (h->stream_id != 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "PRIORITY_UPDATE on a stream");
    if (len < 4)
        return fail(err, 1, GW_H2_FRAME_SIZE_ERROR, "PRIORITY_UPDATE shorter than 4");
    f->u.priority_update.prioritized_id = get32(p) & GW_H2_STREAM_ID_MASK;
    if (f->u.priority_update.prioritized_id == 0)
        return fail(err, 1, GW_H2_PROTOCOL_ERROR, "PRIORITY_UPDATE about stream 0");
    f->u.priority_update.value = (gw_slice_t){p + 4, len - 4};
    return 0;
}

int gw_h2_frame_parse(const gw_h2_frame_hdr_t *h, const uint8_t *payload, gw_h2_frame_t *f,
                      gw_h2_frame_err_t *err)
{
    typedef int (*parse_fn)(const gw_h2_frame_hdr_t *, const uint8_t *, size_t, gw_h2_frame_t *,
                            gw_h2_frame_err_t *);
    static const parse_fn parse[] = {
        [GW_H2_FT_DATA] = parse_data,
        [GW_H2_FT_HEADERS] = parse_headers,
        [GW_H2_FT_PRIORITY] = parse_priority_frame,
        [GW_H2_FT_RST_STREAM] = parse_rst_stream,
        [GW_H2_FT_SETTINGS] = parse_settings,
        [GW_H2_FT_PUSH_PROMISE] = parse_push_promise,
        [GW_H2_FT_PING] = parse_ping,
        [GW_H2_FT_GOAWAY] = parse_goaway,
        [GW_H2_FT_WINDOW_UPDATE] = parse_window_update,
        [GW_H2_FT_CONTINUATION] = parse_continuation,
        [GW_H2_FT_PRIORITY_UPDATE] = parse_priority_update,
    };
    memset(f, 0, sizeof(*f));
    f->hdr = *h;
    err->code = GW_H2_NO_ERROR;
    err->conn = 0;
    err->reason = NULL;
    /* §4.1, §5.5: unknown types MUST be ignored and discarded. */
    if (h->type >= sizeof(parse) / sizeof(parse[0]) || !parse[h->type])
        return 1;
    return parse[h->type](h, payload, h->length, f, err);
}

/* ---- serializers ---------------------------------------------------------------------- */

/* Reserve and write a frame header; returns a pointer to the payload area or NULL with *rc. */
static uint8_t *begin(gw_bytes_t *out, uint8_t type, uint8_t flags, uint32_t sid, size_t len,
                      int *rc)
{
    if (len > GW_H2_MAX_MAX_FRAME_SIZE || (sid & ~GW_H2_STREAM_ID_MASK)) {
        *rc = GW_E_INVAL;
        return NULL;
    }
    if ((*rc = gw_bytes_reserve(out, GW_H2_FRAME_HDR_LEN + len)) < 0)
        return NULL;
    gw_h2_frame_hdr_t h = {(uint32_t)len, type, flags, sid};
    uint8_t *p = out->base + out->len;
    gw_h2_frame_hdr_pack(p, &h);
    out->len += GW_H2_FRAME_HDR_LEN + len;
    return p + GW_H2_FRAME_HDR_LEN;
}

int gw_h2_frame_write_raw(gw_bytes_t *out, uint8_t type, uint8_t flags, uint32_t stream_id,
                          const void *payload, size_t len)
{
    int rc;
    uint8_t *p = begin(out, type, flags, stream_id, len, &rc);
    if (!p)
        return rc;
    if (len)
        memcpy(p, payload, len);
    return 0;
}

/* Shared by DATA, HEADERS, PUSH_PROMISE: [pad len] fixed body [padding]. */
static int write_padded(gw_bytes_t *out, uint8_t type, uint8_t flags, uint32_t sid,
                        const uint8_t *fixed, size_t fixed_len, const void *body, size_t len,
                        int padded, uint8_t pad_len)
{
    int rc;
    padded = padded || pad_len > 0;
    if (padded)
        flags |= GW_H2_F_PADDED;
    else
        flags &= (uint8_t)~GW_H2_F_PADDED;
    size_t total = (padded ? 1u + pad_len : 0u) + fixed_len + len;
    uint8_t *p = begin(out, type, flags, sid, total, &rc);
    if (!p)
        return rc;
    if (padded)
        *p++ = pad_len;
    if (fixed_len) {
        memcpy(p, fixed, fixed_len);
        p += fixed_len;
    }
    if (len) {
        memcpy(p, body, len);
        p += len;
    }
    if (padded)
        memset(p, 0, pad_len); /* padding MUST be zero (§6.1) */
    return 0;
}

int gw_h2_frame_write_data(gw_bytes_t *out, uint32_t stream_id, uint8_t flags, const void *data,
                           size_t len, int padded, uint8_t pad_len)
{
    return write_padded(out, GW_H2_FT_DATA, flags & GW_H2_F_END_STREAM, stream_id, NULL, 0, data,
                        len, padded, pad_len);
}

static void pack_priority(uint8_t *p, const gw_h2_priority_t *pri)
{
    put32(p, (pri->dependency & GW_H2_STREAM_ID_MASK) | (pri->exclusive ? 0x80000000u : 0));
    p[4] = pri->weight;
}

int gw_h2_frame_write_headers(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                              const gw_h2_priority_t *pri, const void *block, size_t len,
                              int padded, uint8_t pad_len)
{
    uint8_t fixed[5];
    flags &= GW_H2_F_END_STREAM | GW_H2_F_END_HEADERS;
    if (pri) {
        pack_priority(fixed, pri);
        flags |= GW_H2_F_PRIORITY;
    }
    return write_padded(out, GW_H2_FT_HEADERS, flags, stream_id, fixed, pri ? 5 : 0, block, len,
                        padded, pad_len);
}

int gw_h2_frame_write_priority(gw_bytes_t *out, uint32_t stream_id, const gw_h2_priority_t *pri)
{
    uint8_t b[5];
    pack_priority(b, pri);
    return gw_h2_frame_write_raw(out, GW_H2_FT_PRIORITY, 0, stream_id, b, 5);
}

int gw_h2_frame_write_rst_stream(gw_bytes_t *out, uint32_t stream_id, uint32_t error_code)
{
    uint8_t b[4];
    put32(b, error_code);
    return gw_h2_frame_write_raw(out, GW_H2_FT_RST_STREAM, 0, stream_id, b, 4);
}

int gw_h2_frame_write_settings(gw_bytes_t *out, int ack, const gw_h2_setting_t *s, size_t n)
{
    int rc;
    if (ack)
        n = 0;
    if (n > GW_H2_MAX_MAX_FRAME_SIZE / 6)
        return GW_E_INVAL;
    uint8_t *p = begin(out, GW_H2_FT_SETTINGS, ack ? GW_H2_F_ACK : 0, 0, n * 6, &rc);
    if (!p)
        return rc;
    for (size_t i = 0; i < n; i++, p += 6) {
        p[0] = (uint8_t)(s[i].id >> 8);
        p[1] = (uint8_t)s[i].id;
        put32(p + 2, s[i].value);
    }
    return 0;
}

int gw_h2_frame_write_push_promise(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                                   uint32_t promised_id, const void *block, size_t len, int padded,
                                   uint8_t pad_len)
{
    uint8_t fixed[4];
    if (promised_id & ~GW_H2_STREAM_ID_MASK)
        return GW_E_INVAL;
    put32(fixed, promised_id);
    return write_padded(out, GW_H2_FT_PUSH_PROMISE, flags & GW_H2_F_END_HEADERS, stream_id, fixed,
                        4, block, len, padded, pad_len);
}

int gw_h2_frame_write_ping(gw_bytes_t *out, int ack, const uint8_t *opaque8)
{
    static const uint8_t zero[8];
    return gw_h2_frame_write_raw(out, GW_H2_FT_PING, ack ? GW_H2_F_ACK : 0, 0,
                                 opaque8 ? opaque8 : zero, 8);
}

int gw_h2_frame_write_goaway(gw_bytes_t *out, uint32_t last_stream_id, uint32_t error_code,
                             const void *debug, size_t debug_len)
{
    int rc;
    if (last_stream_id & ~GW_H2_STREAM_ID_MASK)
        return GW_E_INVAL;
    uint8_t *p = begin(out, GW_H2_FT_GOAWAY, 0, 0, 8 + debug_len, &rc);
    if (!p)
        return rc;
    put32(p, last_stream_id);
    put32(p + 4, error_code);
    if (debug_len)
        memcpy(p + 8, debug, debug_len);
    return 0;
}

int gw_h2_frame_write_window_update(gw_bytes_t *out, uint32_t stream_id, uint32_t increment)
{
    uint8_t b[4];
    if (increment & ~GW_H2_STREAM_ID_MASK)
        return GW_E_INVAL;
    put32(b, increment);
    return gw_h2_frame_write_raw(out, GW_H2_FT_WINDOW_UPDATE, 0, stream_id, b, 4);
}

int gw_h2_frame_write_continuation(gw_bytes_t *out, uint32_t stream_id, uint8_t flags,
                                   const void *block, size_t len)
{
    return gw_h2_frame_write_raw(out, GW_H2_FT_CONTINUATION, flags & GW_H2_F_END_HEADERS, stream_id,
                                 block, len);
}

int gw_h2_frame_write_priority_update(gw_bytes_t *out, uint32_t prioritized_id, const void *value,
                                      size_t len)
{
    int rc;
    if (prioritized_id & ~GW_H2_STREAM_ID_MASK)
        return GW_E_INVAL;
    uint8_t *p = begin(out, GW_H2_FT_PRIORITY_UPDATE, 0, 0, 4 + len, &rc);
    if (!p)
        return rc;
    put32(p, prioritized_id);
    if (len)
        memcpy(p + 4, value, len);
    return 0;
}
