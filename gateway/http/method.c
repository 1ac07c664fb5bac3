/* http/method.c — the request methods the gateway knows (RFC 9110 §9, RFC 5789). */
#include "http/http.h"

int gw_http_method_valid(gw_slice_t m)
{
    return gw_http_is_token(m);
}

unsigned gw_http_method_flags(gw_slice_t m)
{
    enum {
        S = GW_HTTP_METHOD_F_SAFE,
        I = GW_HTTP_METHOD_F_IDEMPOTENT,
        C = GW_HTTP_METHOD_F_CACHEABLE
    };
    static const struct {
        gw_slice_t name;
        unsigned flags;
    } known[] = {
        {GW_SLICE_LIT("GET"), S | I | C}, {GW_SLICE_LIT("HEAD"), S | I | C},
        {GW_SLICE_LIT("POST"), C},        {GW_SLICE_LIT("PUT"), I},
        {GW_SLICE_LIT("DELETE"), I},      {GW_SLICE_LIT("OPTIONS"), S | I},
        {GW_SLICE_LIT("TRACE"), S | I},   {GW_SLICE_LIT("CONNECT"), 0},
        {GW_SLICE_LIT("PATCH"), 0}, /* RFC 5789 §2: neither safe nor idempotent */
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (gw_slice_eq(m, known[i].name))
            return known[i].flags;
    return 0;
}

int gw_http_method_is_connect(gw_slice_t m)
{
    return gw_slice_eq(m, GW_SLICE_LIT("CONNECT"));
}
