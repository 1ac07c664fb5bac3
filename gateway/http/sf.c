/* http/sf.c — Structured Field Values (RFC 8941): the members of a Dictionary and the
 * parameters of an item, one at a time, without allocating. */
#include "http/http.h"

static int is_lcalpha(uint8_t c)
{
    return c >= 'a' && c <= 'z';
}

static int is_alpha(uint8_t c)
{
    return is_lcalpha(c) || (c >= 'A' && c <= 'Z');
}

static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static int at(const gw_http_sf_t *c, uint8_t ch)
{
    return c->p < c->end && *c->p == ch;
}

static void skip_ows(gw_http_sf_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static void skip_sp(gw_http_sf_t *c)
{
    while (at(c, ' '))
        c->p++;
}

/* §3.1.2 key: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ). The key at the
 * cursor, or an empty slice when there is none. */
static gw_slice_t parse_key(gw_http_sf_t *c)
{
    const uint8_t *s = c->p;
    if (c->p >= c->end || !(is_lcalpha(*c->p) || *c->p == '*'))
        return (gw_slice_t){s, 0};
    c->p++;
    while (c->p < c->end && (is_lcalpha(*c->p) || is_digit(*c->p) || *c->p == '_' || *c->p == '-' ||
                             *c->p == '.' || *c->p == '*'))
        c->p++;
    return (gw_slice_t){s, (size_t)(c->p - s)};
}

/* §3.3.1 Integer (at most 15 digits) or §3.3.2 Decimal (at most 12 integer and 3 fractional
 * digits); an Integer's value into *iv. */
static int parse_number(gw_http_sf_t *c, int64_t *iv)
{
    int neg = at(c, '-');
    if (neg)
        c->p++;
    size_t nd = 0;
    int64_t v = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        if (++nd > 15)
            return 0;
        v = v * 10 + (*c->p - '0');
        c->p++;
    }
    if (nd == 0)
        return 0;
    if (!at(c, '.')) {
        *iv = neg ? -v : v;
        return GW_HTTP_SF_INTEGER;
    }
    c->p++;
    size_t nf = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        nf++;
        c->p++;
    }
    if (nf == 0 || nf > 3 || nd > 12)
        return 0;
    return GW_HTTP_SF_DECIMAL;
}

/* §3.3.3 String: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, printable ASCII only. */
static int parse_string(gw_http_sf_t *c)
{
    c->p++; /* DQUOTE */
    while (c->p < c->end) {
        uint8_t x = *c->p++;
        if (x == '\\') {
            if (c->p >= c->end || (*c->p != '"' && *c->p != '\\'))
                return 0;
            c->p++;
        } else if (x == '"') {
            return GW_HTTP_SF_STRING;
        } else if (x < 0x20 || x > 0x7e) {
            return 0;
        }
    }
    return 0;
}

/* §3.3.5 Byte Sequence: ":" *( base64 characters ) ":". */
static int parse_bytes(gw_http_sf_t *c)
{
    c->p++; /* ":" */
    while (c->p < c->end && *c->p != ':') {
        uint8_t x = *c->p++;
        if (!(is_alpha(x) || is_digit(x) || x == '+' || x == '/' || x == '='))
            return 0;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    return GW_HTTP_SF_BYTES;
}

/* §3.3.4 Token: ( ALPHA / "*" ) *( tchar / ":" / "/" ). */
static int parse_token(gw_http_sf_t *c)
{
    c->p++;
    while (c->p < c->end && (gw_http_is_tchar(*c->p) || *c->p == ':' || *c->p == '/'))
        c->p++;
    return GW_HTTP_SF_TOKEN;
}

/* One bare item (§3.3) into *it; 0 when there is none at the cursor (its type otherwise). */
static int parse_bare(gw_http_sf_t *c, gw_http_sf_item_t *it)
{
    const uint8_t *s = c->p;
    int t = 0;
    it->integer = 0;
    if (c->p >= c->end)
        return 0;
    uint8_t ch = *c->p;
    if (ch == '-' || is_digit(ch)) {
        t = parse_number(c, &it->integer);
    } else if (ch == '"') {
        t = parse_string(c);
    } else if (ch == '?') { /* §3.3.6 Boolean */
        if (c->end - c->p >= 2 && (c->p[1] == '0' || c->p[1] == '1')) {
            it->integer = c->p[1] == '1';
            c->p += 2;
            t = GW_HTTP_SF_BOOLEAN;
        }
    } else if (ch == ':') {
        t = parse_bytes(c);
    } else if (is_alpha(ch) || ch == '*') {
        t = parse_token(c);
    }
    it->type = (gw_http_sf_type_t)t;
    it->raw = (gw_slice_t){s, (size_t)(c->p - s)};
    return t;
}

/* §3.1.2 Parameters: *( ";" *SP key [ "=" bare-item ] ), read to their end. 0, or -1 when
 * malformed. */
static int skip_params(gw_http_sf_t *c)
{
    gw_slice_t key;
    gw_http_sf_item_t value;
    int rv;
    while ((rv = gw_http_sf_param_next(c, &key, &value)) > 0)
        ;
    return rv;
}

/* §3.1.1 Inner List: "(" *SP [ item *( 1*SP item ) *SP ] ")" parameters, the parameters of
 * the list and of its items skipped. 0, or -1 when malformed. */
static int skip_inner_list(gw_http_sf_t *c)
{
    c->p++; /* "(" */
    for (;;) {
        skip_sp(c);
        if (c->p >= c->end)
            return -1;
        if (*c->p == ')') {
            c->p++;
            return skip_params(c);
        }
        gw_http_sf_item_t it;
        if (!parse_bare(c, &it) || skip_params(c) < 0)
            return -1;
        if (c->p < c->end && *c->p != ' ' && *c->p != ')')
            return -1;
    }
}

/* After a malformed member: to the next top-level comma (quoted commas do not count). */
static void skip_to_comma(gw_http_sf_t *c)
{
    int in_str = 0;
    while (c->p < c->end) {
        uint8_t x = *c->p++;
        if (in_str) {
            if (x == '\\' && c->p < c->end)
                c->p++;
            else if (x == '"')
                in_str = 0;
        } else if (x == '"') {
            in_str = 1;
        } else if (x == ',') {
            c->p--;
            return;
        }
    }
}

/* The member at the cursor (the cursor past OWS): 0 when well-formed, -1 when not (the cursor
 * then somewhere inside it). */
static int parse_member(gw_http_sf_t *c, gw_http_sf_member_t *m)
{
    m->key = parse_key(c);
    /* §3.2: a member without "=" is Boolean true */
    m->value = (gw_http_sf_item_t){GW_HTTP_SF_BOOLEAN, 1, {c->p, 0}};
    if (!m->key.len)
        return -1;
    if (at(c, '=')) {
        c->p++;
        if (at(c, '(')) {
            const uint8_t *s = c->p;
            int rv = skip_inner_list(c);
            /* the list's own parameters are part of its raw text */
            m->value = (gw_http_sf_item_t){GW_HTTP_SF_INNER_LIST, 0, {s, (size_t)(c->p - s)}};
            m->params = (gw_slice_t){c->p, 0};
            return rv;
        }
        if (!parse_bare(c, &m->value))
            return -1;
    }
    const uint8_t *ps = c->p;
    if (skip_params(c) < 0)
        return -1;
    m->params = (gw_slice_t){ps, (size_t)(c->p - ps)};
    return 0;
}

int gw_http_sf_dict_next(gw_http_sf_t *c, gw_http_sf_member_t *m)
{
    /* §4.2: leading and trailing SP are discarded; members are split by OWS "," OWS */
    skip_ows(c);
    if (c->p >= c->end)
        return 0;
    int rv = parse_member(c, m); /* an empty member (",,") has no key: malformed */
    skip_ows(c);
    if (rv == 0 && c->p < c->end && *c->p != ',')
        rv = -1; /* junk after the member */
    if (rv < 0)
        skip_to_comma(c);
    if (at(c, ','))
        c->p++;
    return rv < 0 ? -1 : 1;
}

int gw_http_sf_param_next(gw_http_sf_t *c, gw_slice_t *key, gw_http_sf_item_t *value)
{
    if (!at(c, ';'))
        return 0;
    c->p++;
    skip_sp(c);
    *key = parse_key(c);
    *value = (gw_http_sf_item_t){GW_HTTP_SF_BOOLEAN, 1, {c->p, 0}};
    if (!key->len)
        return -1;
    if (at(c, '=')) {
        c->p++;
        if (!parse_bare(c, value))
            return -1;
    }
    return 1;
}

/* ---- serializing ---- */

size_t gw_http_base64(const uint8_t *in, size_t n, char *out, int url)
{
    static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *b64 = url ? safe : std;
    size_t k = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[k++] = b64[v >> 18];
        out[k++] = b64[(v >> 12) & 63];
        out[k++] = b64[(v >> 6) & 63];
        out[k++] = b64[v & 63];
    }
    if (n - i) {
        uint32_t v = (uint32_t)in[i] << 16 | (n - i == 2 ? (uint32_t)in[i + 1] << 8 : 0);
        out[k++] = b64[v >> 18];
        out[k++] = b64[(v >> 12) & 63];
        if (n - i == 2)
            out[k++] = b64[(v >> 6) & 63];
        else if (!url)
            out[k++] = '=';
        if (!url)
            out[k++] = '='; /* RFC 4648 §5 (base64url) as JWS uses it: no padding */
    }
    out[k] = 0;
    return k;
}

size_t gw_http_sf_bytes(const uint8_t *in, size_t n, char *out)
{
    /* RFC 8941 §4.1.8: ":" base64 (RFC 4648 §4, with padding) ":" */
    size_t k = 0;
    out[k++] = ':';
    k += gw_http_base64(in, n, out + k, 0);
    out[k++] = ':';
    out[k] = 0;
    return k;
}
