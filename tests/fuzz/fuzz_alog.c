/* libFuzzer target: access log lines (common/alog.c) from hostile request bytes. The input is
 * split into the path (or the raw request line of a refused request), the user agent and the
 * referer; each line must end with its only '\n', a JSON line must hold no control byte and be
 * valid UTF-8, and a combined (or combined_timing) line must hold printable ASCII only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alog.h"

static int valid_utf8(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        if (!len || i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t a = size / 3, b = 2 * size / 3;
    gw_alog_t r;
    gw_alog_init(&r);
    r.start_ns = 1;
    r.end_ns = 2;
    r.peer = "[::1]:443";
    r.proto = size & 1 ? "h2" : "http/1.1";
    if (size & 2) {
        r.request_line = (gw_slice_t){data, a}; /* refused before its head was whole */
        r.status = 400;
    } else {
        r.method = GW_SLICE_LIT("GET");
        r.path = (gw_slice_t){data, a};
    }
    r.user_agent = (gw_slice_t){data + a, b - a};
    r.referer = (gw_slice_t){data + b, size - b};
    gw_bytes_t out;
    gw_bytes_init(&out, 0);
    static const gw_alog_format_t fmts[] = {GW_ALOG_COMBINED, GW_ALOG_JSON,
                                            GW_ALOG_COMBINED_TIMING};
    for (int k = 0; k < 3; k++) {
        int f = fmts[k] == GW_ALOG_JSON;
        out.len = 0;
        if (gw_alog_format(&out, fmts[k], &r, 1796470822123456ull) < 0)
            continue;
        const uint8_t *nl = memchr(out.base, '\n', out.len);
        if (!nl || (size_t)(nl - out.base) != out.len - 1)
            abort(); /* one line, ended once */
        for (size_t i = 0; i + 1 < out.len; i++) {
            uint8_t c = out.base[i];
            if (c < 0x20 || c == 0x7f || (!f && c >= 0x80))
                abort();
        }
        if (f && !valid_utf8(out.base, out.len))
            abort();
    }
    gw_bytes_free(&out);
    return 0;
}
