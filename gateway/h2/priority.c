/* h2/priority.c — RFC 9218 §4 Priority field parser (RFC 8941 dictionary subset). */
#include "h2/priority.h"

#include <stddef.h>

typedef struct {
    const uint8_t *p, *end;
} cur_t;

static int is_lcalpha(uint8_t c)
{
    return c >= 'a' && c <= 'z';
}
static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}
static int is_ows(uint8_t c)
{
    return c == ' ' || c == '\t';
}
static void skip_ows(cur_t *c)
{
    while (c->p < c->end && is_ows(*c->p))
        c->p++;
}
static void skip_sp(cur_t *c)
{
    while (c->p < c->end && *c->p == ' ')
        c->p++;
}

/* RFC 8941 §3.1.2 key: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
 * Returns its length (0 = no key here). */
static size_t parse_key(cur_t *c, const uint8_t **key)
{
    const uint8_t *s = c->p;
    if (c->p >= c->end || !(is_lcalpha(*c->p) || *c->p == '*'))
        return 0;
    c->p++;
    while (c->p < c->end && (is_lcalpha(*c->p) || is_digit(*c->p) || *c->p == '_' || *c->p == '-' ||
                             *c->p == '.' || *c->p == '*'))
        c->p++;
    *key = s;
    return (size_t)(c->p - s);
}

typedef enum { BI_BAD = 0, BI_INT, BI_BOOL, BI_OTHER } bare_t;

/* One bare item (RFC 8941 §3.3). Integers are returned in *iv when they fit 15 digits;
 * Boolean in *iv (0/1); every other well-formed type as BI_OTHER. BI_BAD: not an item. */
static bare_t parse_bare(cur_t *c, int64_t *iv)
{
    if (c->p >= c->end)
        return BI_BAD;
    uint8_t ch = *c->p;
    if (ch == '-' || is_digit(ch)) {
        int neg = ch == '-';
        if (neg)
            c->p++;
        size_t nd = 0;
        int64_t v = 0;
        while (c->p < c->end && is_digit(*c->p)) {
            if (++nd > 15)
                return BI_BAD; /* §3.3.1: at most 15 digits */
            v = v * 10 + (*c->p - '0');
            c->p++;
        }
        if (nd == 0)
            return BI_BAD;
        if (c->p < c->end && *c->p == '.') { /* Decimal (§3.3.2) */
            c->p++;
            size_t nf = 0;
            while (c->p < c->end && is_digit(*c->p)) {
                nf++;
                c->p++;
            }
            if (nf == 0 || nf > 3 || nd > 12)
                return BI_BAD;
            return BI_OTHER;
        }
        *iv = neg ? -v : v;
        return BI_INT;
    }
    if (ch == '"') { /* String (§3.3.3) */
        c->p++;
        while (c->p < c->end) {
            uint8_t x = *c->p++;
            if (x == '\\') {
                if (c->p >= c->end || (*c->p != '"' && *c->p != '\\'))
                    return BI_BAD;
                c->p++;
            } else if (x == '"') {
                return BI_OTHER;
            } else if (x < 0x20 || x > 0x7e) {
                return BI_BAD;
            }
        }
        return BI_BAD;
    }
    if (ch == '?') { /* Boolean (§3.3.6) */
        if (c->end - c->p < 2 || (c->p[1] != '0' && c->p[1] != '1'))
            return BI_BAD;
        *iv = c->p[1] == '1';
        c->p += 2;
        return BI_BOOL;
    }
    if (ch == ':') { /* Byte Sequence (§3.3.5) */
        c->p++;
        while (c->p < c->end && *c->p != ':') {
            uint8_t x = *c->p++;
            if (!(is_lcalpha(x) || (x >= 'A' && x <= 'Z') || is_digit(x) || x == '+' || x == '/' ||
                  x == '='))
                return BI_BAD;
        }
        if (c->p >= c->end)
            return BI_BAD;
        c->p++;
        return BI_OTHER;
    }
    if ((ch >= 'A' && ch <= 'Z') || is_lcalpha(ch) || ch == '*') { /* Token (§3.3.4) */
        c->p++;
        /* tchar / ":" / "/" */
        static const char extra[] = "!#$%&'*+-.^_`|~:/";
        while (c->p < c->end) {
            uint8_t x = *c->p;
            int ok = is_lcalpha(x) || (x >= 'A' && x <= 'Z') || is_digit(x);
            for (const char *e = extra; !ok && *e; e++)
                ok = x == (uint8_t)*e;
            if (!ok)
                break;
            c->p++;
        }
        return BI_OTHER;
    }
    return BI_BAD;
}

/* Parameters (§3.1.2): *( ";" *SP key [ "=" bare-item ] ). Values are not used by RFC 9218.
 * Returns 0 or -1 (malformed). */
static int skip_params(cur_t *c)
{
    while (c->p < c->end && *c->p == ';') {
        c->p++;
        skip_sp(c);
        const uint8_t *k;
        if (!parse_key(c, &k))
            return -1;
        if (c->p < c->end && *c->p == '=') {
            c->p++;
            int64_t iv;
            if (parse_bare(c, &iv) == BI_BAD)
                return -1;
        }
    }
    return 0;
}

/* Inner List (§3.1.1): "(" *SP [ item *( 1*SP item ) *SP ] ")" parameters. */
static int skip_inner_list(cur_t *c)
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
        int64_t iv;
        if (parse_bare(c, &iv) == BI_BAD || skip_params(c) < 0)
            return -1;
        if (c->p < c->end && *c->p != ' ' && *c->p != ')')
            return -1;
    }
}

/* A malformed member: resume after the next top-level comma (quoted commas do not count). */
static void skip_to_comma(cur_t *c)
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

int gw_h2_priority_parse(gw_slice_t v, uint8_t *urgency, uint8_t *incremental)
{
    cur_t c = {(const uint8_t *)v.base, (const uint8_t *)v.base + v.len};
    int found = 0;
    *urgency = GW_H2_PRIO_DEFAULT_URGENCY;
    *incremental = 0;
    if (!v.base)
        return 0;
    /* RFC 8941 §4.2: leading and trailing SP are discarded; members are split by OWS "," OWS */
    while (c.p < c.end) {
        skip_ows(&c);
        if (c.p >= c.end)
            break;
        const uint8_t *key = NULL;
        size_t klen = parse_key(&c, &key);
        bare_t t = BI_BOOL;
        int64_t iv = 1; /* a member without "=" is Boolean true (§3.2) */
        int bad = klen == 0;
        if (!bad && c.p < c.end && *c.p == '=') {
            c.p++;
            if (c.p < c.end && *c.p == '(') {
                t = BI_OTHER;
                bad = skip_inner_list(&c) < 0;
            } else {
                t = parse_bare(&c, &iv);
                bad = t == BI_BAD || skip_params(&c) < 0;
            }
        } else if (!bad) {
            bad = skip_params(&c) < 0;
        }
        skip_ows(&c);
        if (!bad && c.p < c.end && *c.p != ',')
            bad = 1; /* junk after the member */
        if (bad) {
            skip_to_comma(&c);
        } else if (klen == 1 && key[0] == 'u') {
            /* §4.1: an urgency outside 0-7 (or not an Integer) is ignored; as the last
             * occurrence replaces earlier ones (RFC 8941 §4.2.2), the default comes back */
            if (t == BI_INT && iv >= 0 && iv <= 7) {
                *urgency = (uint8_t)iv;
                found |= GW_H2_PRIO_F_URGENCY;
            } else {
                *urgency = GW_H2_PRIO_DEFAULT_URGENCY;
                found &= ~GW_H2_PRIO_F_URGENCY;
            }
        } else if (klen == 1 && key[0] == 'i') {
            /* §4.2: a value that is not a Boolean is ignored */
            if (t == BI_BOOL) {
                *incremental = (uint8_t)iv;
                found |= GW_H2_PRIO_F_INCREMENTAL;
            } else {
                *incremental = 0;
                found &= ~GW_H2_PRIO_F_INCREMENTAL;
            }
        }
        if (c.p < c.end && *c.p == ',')
            c.p++;
    }
    return found;
}
