/* http/fields.c — field values and the field lists every version shares. */
#include "http/http.h"

int gw_http_field_value_valid(gw_slice_t v)
{
    /* RFC 9113 §8.2.1 forbids NUL, CR and LF; RFC 9110 §5.5 allows no other control either
     * (field-vchar, SP, HTAB): a value goes on in an HTTP/1.1 message, whose recipient would
     * reject it or read it otherwise */
    for (size_t i = 0; i < v.len; i++)
        if (!gw_http_is_field_byte(v.base[i]))
            return 0;
    if (v.len && (v.base[0] == ' ' || v.base[0] == '\t' || v.base[v.len - 1] == ' ' ||
                  v.base[v.len - 1] == '\t'))
        return 0;
    return 1;
}

int gw_http_field_is_connection_specific(gw_slice_t n)
{
    /* their lengths: 2, 7, 10, 16, 17 (most names are none of these) */
    if (n.len != 2 && n.len != 7 && n.len != 10 && n.len != 16 && n.len != 17)
        return 0;
    static const gw_slice_t names[] = {
        GW_SLICE_LIT("connection"),       GW_SLICE_LIT("keep-alive"),
        GW_SLICE_LIT("proxy-connection"), GW_SLICE_LIT("transfer-encoding"),
        GW_SLICE_LIT("upgrade"),          GW_SLICE_LIT("te"),
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (n.len == names[i].len && gw_slice_eq_nocase(n, names[i]))
            return 1;
    return 0;
}

int gw_http_content_length_parse(gw_slice_t v, int64_t *out)
{
    int64_t x = 0;
    if (v.len == 0 || v.len > 18)
        return -1;
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return -1;
        x = x * 10 + (v.base[i] - '0');
    }
    *out = x;
    return 0;
}
