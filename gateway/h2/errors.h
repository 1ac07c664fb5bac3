/* h2/errors.h — HTTP/2 wire error codes (RFC 9113 §7).
 *
 * These are the 32-bit values carried by RST_STREAM and GOAWAY; they are distinct from the
 * negative GW_E* status codes of common/err.h. A codec that rejects input reports one of these
 * plus a static reason string for the log.
 */
#ifndef GW_H2_ERRORS_H
#define GW_H2_ERRORS_H

#include <stdint.h>

/* X(name, value) — RFC 9113 §7 */
#define GW_H2_ERROR_MAP(X)                                                                         \
    X(NO_ERROR, 0x0)                                                                               \
    X(PROTOCOL_ERROR, 0x1)                                                                         \
    X(INTERNAL_ERROR, 0x2)                                                                         \
    X(FLOW_CONTROL_ERROR, 0x3)                                                                     \
    X(SETTINGS_TIMEOUT, 0x4)                                                                       \
    X(STREAM_CLOSED, 0x5)                                                                          \
    X(FRAME_SIZE_ERROR, 0x6)                                                                       \
    X(REFUSED_STREAM, 0x7)                                                                         \
    X(CANCEL, 0x8)                                                                                 \
    X(COMPRESSION_ERROR, 0x9)                                                                      \
    X(CONNECT_ERROR, 0xa)                                                                          \
    X(ENHANCE_YOUR_CALM, 0xb)                                                                      \
    X(INADEQUATE_SECURITY, 0xc)                                                                    \
    X(HTTP_1_1_REQUIRED, 0xd)

typedef enum {
#define GW_H2_ERR_ENUM_(name, value) GW_H2_##name = value,
    GW_H2_ERROR_MAP(GW_H2_ERR_ENUM_)
#undef GW_H2_ERR_ENUM_
} gw_h2_error_t;

/* The RFC name of a code ("PROTOCOL_ERROR"); unknown codes give "UNKNOWN_ERROR" (an unknown
 * code received from the peer must not trigger special behaviour, RFC 9113 §7). Never NULL. */
static inline const char *gw_h2_error_str(uint32_t code)
{
    switch (code) {
#define GW_H2_ERR_STR_(name, value)                                                                \
    case value:                                                                                    \
        return #name;
        GW_H2_ERROR_MAP(GW_H2_ERR_STR_)
#undef GW_H2_ERR_STR_
    }
    return "UNKNOWN_ERROR";
}

#endif
