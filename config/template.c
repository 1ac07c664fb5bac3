/* config/template.c — the template compiler and its expansion (config/template.h). */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/template.h"
#include "http/http.h"

static const char *const var_names[GW_TMPL_VAR_N] = {
    [GW_TMPL_CLIENT_ADDR] = "client_addr",
    [GW_TMPL_REQUEST_ID] = "request_id",
    [GW_TMPL_SCHEME] = "scheme",
    [GW_TMPL_HOST] = "host",
    [GW_TMPL_TLS_CLIENT_SUBJECT] = "tls_client_subject",
    [GW_TMPL_TLS_CLIENT_VERIFY] = "tls_client_verify",
    [GW_TMPL_REQUEST_URI] = "request_uri",
    [GW_TMPL_PATH] = "path",
};

/* The variable spelled name[0..len) ("host", "request_uri"), or -1. */
static int var_lookup(const char *name, size_t len)
{
    for (int i = 0; i < GW_TMPL_VAR_N; i++)
        if (strlen(var_names[i]) == len && !memcmp(var_names[i], name, len))
            return i;
    return -1;
}

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

void gw_tmpl_del(gw_tmpl_t *t)
{
    if (!t)
        return;
    gw_free(t->text);
    gw_free(t->parts);
    gw_free(t);
}

/* One more part; literal bytes are appended to t->text (room for len + 1 was made). */
static void push_part(gw_tmpl_t *t, uint8_t var, const char *lit, size_t len)
{
    if (var == GW_TMPL_VAR_N) {
        if (!len)
            return;
        gw_tmpl_part_t *last = t->n ? &t->parts[t->n - 1] : NULL;
        if (last && last->var == GW_TMPL_VAR_N && last->off + last->len == t->lit_len) {
            last->len += (uint32_t)len; /* "$$" splits literal text: join it again */
        } else {
            t->parts[t->n++] =
                (gw_tmpl_part_t){.var = var, .off = (uint32_t)t->lit_len, .len = (uint32_t)len};
        }
        memcpy(t->text + t->lit_len, lit, len);
        t->lit_len += len;
        t->text[t->lit_len] = 0;
        return;
    }
    t->parts[t->n++] = (gw_tmpl_part_t){.var = var};
    t->uses |= 1u << var;
}

int gw_tmpl_compile(const char *src, size_t len, unsigned allowed, unsigned flags, gw_tmpl_t **out,
                    const char **why, size_t *at)
{
    *out = NULL;
    if (len > UINT32_MAX / 2) {
        *why = "is too long";
        *at = 0;
        return GW_E_PARSE;
    }
    /* every byte first: a control byte is refused wherever it is (RFC 9110 §5.5: no CR, LF or
     * NUL in a field value, and no other control either) */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c < 0x20 || c == 0x7f) {
            *why = c == '\r' || c == '\n' ? "holds a CR or LF"
                   : c == 0               ? "holds a NUL byte"
                                          : "holds a control character";
            *at = i;
            return GW_E_PARSE;
        }
        if (c > 0x7e) {
            *why = "holds a byte that is not ASCII";
            *at = i;
            return GW_E_PARSE;
        }
        if ((flags & GW_TMPL_F_URI) && c == ' ') {
            *why = "holds a space (a URI has none: write %20)";
            *at = i;
            return GW_E_PARSE;
        }
    }
    if ((flags & GW_TMPL_F_FIELD) && len && (src[0] == ' ' || src[len - 1] == ' ')) {
        *why = "begins or ends with a space";
        *at = src[0] == ' ' ? 0 : len - 1;
        return GW_E_PARSE;
    }
    gw_tmpl_t *t = gw_calloc(1, sizeof(*t));
    if (!t)
        return GW_E_NOMEM;
    t->text = gw_malloc(len + 1);
    t->parts = gw_calloc(len + 1, sizeof(*t->parts));
    if (!t->text || !t->parts) {
        gw_tmpl_del(t);
        return GW_E_NOMEM;
    }
    t->text[0] = 0;
    size_t i = 0, lit = 0;
    while (i < len) {
        if (src[i] != '$') {
            i++;
            continue;
        }
        push_part(t, GW_TMPL_VAR_N, src + lit, i - lit);
        if (i + 1 < len && src[i + 1] == '$') {
            push_part(t, GW_TMPL_VAR_N, "$", 1);
            i += 2;
            lit = i;
            continue;
        }
        size_t start = i + 1, end;
        int braced = start < len && src[start] == '{';
        if (braced)
            start++;
        end = start;
        while (end < len && name_char(src[end]))
            end++;
        const char *bad = NULL;
        if (braced && (end == len || src[end] != '}'))
            bad = "has a '${' without its '}'";
        else if (end == start)
            bad = "has a '$' that names no variable (write '$$' for a dollar sign)";
        int v = bad ? -1 : var_lookup(src + start, end - start);
        if (!bad && v < 0)
            bad = "names an unknown variable";
        else if (!bad && !(allowed & (1u << v)))
            bad = "names a variable not allowed here";
        if (bad) {
            *why = bad;
            *at = i;
            gw_tmpl_del(t);
            return GW_E_PARSE;
        }
        push_part(t, (uint8_t)v, NULL, 0);
        i = end + braced;
        lit = i;
    }
    push_part(t, GW_TMPL_VAR_N, src + lit, len - lit);
    *out = t;
    return 0;
}

size_t gw_tmpl_len(const gw_tmpl_t *t, const gw_slice_t *vars)
{
    size_t n = t->lit_len;
    for (size_t i = 0; i < t->n; i++)
        if (t->parts[i].var != GW_TMPL_VAR_N)
            n += vars[t->parts[i].var].len;
    return n;
}

size_t gw_tmpl_expand(const gw_tmpl_t *t, const gw_slice_t *vars, char *out, size_t cap)
{
    size_t need = gw_tmpl_len(t, vars);
    if (need > cap)
        return need;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        const gw_tmpl_part_t *p = &t->parts[i];
        gw_slice_t s = p->var == GW_TMPL_VAR_N
                           ? (gw_slice_t){(const uint8_t *)t->text + p->off, p->len}
                           : vars[p->var];
        if (s.len)
            memcpy(out + k, s.base, s.len);
        k += s.len;
    }
    return k;
}

int gw_tmpl_host_valid(gw_slice_t s)
{
    /* one rule with the fronts' authority check (http/chars.c), so that whatever host a
     * request is routed with, $host carries it */
    return s.len && gw_http_is_authority(s);
}
