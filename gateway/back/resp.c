/* back/resp.c — the response-parsing and request-serializing seam of back/.
 *
 * Sans-IO: bytes in, events out, no libuv. It will be replaced by h1/parser.h and
 * h1/serializer.h (same events: head, interim, body by reference, trailers, complete,
 * keep-alive decision) once that codec lands; conn.c only talks to the functions declared in
 * back_internal.h. Strict on purpose: whatever could desynchronise the pooled connection
 * (RFC 9112 §6.3, §11.2) is GW_E_PARSE and the response is never forwarded.
 */
#include <stdio.h>
#include <string.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/err.h"

#define MAX_CHUNK_LINE 4096

const char *gw_back_resp_state_str(gw_back_resp_state_t s)
{
    switch (s) {
    case GW_BACK_RESP_HEAD:
        return "head";
    case GW_BACK_RESP_BODY_CL:
        return "body_cl";
    case GW_BACK_RESP_BODY_CLOSE:
        return "body_close";
    case GW_BACK_RESP_CHUNK_SIZE:
        return "chunk_size";
    case GW_BACK_RESP_CHUNK_DATA:
        return "chunk_data";
    case GW_BACK_RESP_CHUNK_CRLF:
        return "chunk_crlf";
    case GW_BACK_RESP_TRAILERS:
        return "trailers";
    case GW_BACK_RESP_DONE:
        return "done";
    }
    return "?";
}

void gw_back__resp_init(gw_back_resp_t *p, int head_only)
{
    gw_bytes_t line = p->line;
    gw_back_field_t *fields = p->fields;
    size_t cap = p->fields_cap;
    memset(p, 0, sizeof(*p));
    /* Keep the buffers across messages of one connection. */
    p->line = line;
    p->fields = fields;
    p->fields_cap = cap;
    if (!p->line.max)
        gw_bytes_init(&p->line, GW_BACK_MAX_HEAD);
    p->line.len = 0;
    p->head_only = head_only;
}

void gw_back__resp_free(gw_back_resp_t *p)
{
    gw_bytes_free(&p->line);
    gw_free(p->fields);
    p->fields = NULL;
    p->fields_cap = 0;
}

/* RFC 9110 §5.6.2 tchar */
static int is_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static gw_slice_t trim_ows(const uint8_t *s, size_t n)
{
    while (n && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return (gw_slice_t){s, n};
}

/* Parse field lines in s[0..n) (each ending CRLF, the empty line excluded) into p->fields. */
static int parse_fields(gw_back_resp_t *p, const uint8_t *s, size_t n, size_t *count)
{
    size_t k = 0, i = 0;
    while (i < n) {
        const uint8_t *lf = memchr(s + i, '\n', n - i);
        if (!lf || lf == s + i || lf[-1] != '\r')
            return GW_E_PARSE; /* bare LF or no CRLF */
        size_t ll = (size_t)(lf - (s + i)) - 1;
        const uint8_t *l = s + i;
        i += ll + 2;
        /* RFC 9112 §5.2: obs-fold may be rejected; a line starting with SP/HTAB is one. */
        const uint8_t *colon = memchr(l, ':', ll);
        if (!colon || colon == l)
            return GW_E_PARSE;
        for (const uint8_t *q = l; q < colon; q++)
            if (!is_tchar(*q))
                return GW_E_PARSE; /* includes whitespace before ':' (RFC 9112 §5.1) */
        for (const uint8_t *q = colon + 1; q < l + ll; q++)
            if (*q == 0 || *q == '\r' || *q == '\n' || (*q < 0x20 && *q != '\t') || *q == 0x7f)
                return GW_E_PARSE; /* RFC 9110 §5.5 */
        if (k == p->fields_cap) {
            size_t nc = p->fields_cap ? p->fields_cap * 2 : 16;
            gw_back_field_t *nf = gw_realloc(p->fields, nc * sizeof(*nf));
            if (!nf)
                return GW_E_NOMEM;
            p->fields = nf;
            p->fields_cap = nc;
        }
        p->fields[k].name = (gw_slice_t){l, (size_t)(colon - l)};
        p->fields[k].value = trim_ows(colon + 1, (size_t)(l + ll - colon - 1));
        k++;
    }
    *count = k;
    return 0;
}

/* Does the comma-separated list v contain token t (case-insensitive)? Also reports whether t
 * is the last element (for Transfer-Encoding). */
static int list_has(gw_slice_t v, const char *t, int *last)
{
    int found = 0;
    size_t i = 0;
    if (last)
        *last = 0;
    while (i <= v.len) {
        size_t j = i;
        while (j < v.len && v.base[j] != ',')
            j++;
        gw_slice_t e = trim_ows(v.base + i, j - i);
        int m = gw_slice_eq_nocase(e, gw_slice_str(t));
        found |= m;
        if (last && e.len)
            *last = m;
        i = j + 1;
    }
    return found;
}

static int parse_u64(gw_slice_t v, uint64_t *out)
{
    uint64_t x = 0;
    if (v.len == 0 || v.len > 18)
        return GW_E_PARSE;
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return GW_E_PARSE;
        x = x * 10 + (uint64_t)(v.base[i] - '0');
    }
    *out = x;
    return 0;
}

static int on_full_head(gw_back_resp_t *p, const gw_back_resp_cbs_t *cbs, void *data)
{
    const uint8_t *s = p->line.base;
    size_t n = p->line.len; /* ends with CRLF CRLF */
    /* RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ] */
    if (n < 16 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
        return GW_E_PARSE;
    int minor = s[7] - '0';
    for (int i = 9; i < 12; i++)
        if (s[i] < '0' || s[i] > '9')
            return GW_E_PARSE;
    int status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    if (status < 100 || status > 599)
        return GW_E_PARSE;
    const uint8_t *lf = memchr(s, '\n', n);
    /* "HTTP/1.1 200\r\n" (no reason) is the shortest accepted form. */
    if (!lf || lf - s < 13 || lf[-1] != '\r' || (lf - s > 13 && s[12] != ' '))
        return GW_E_PARSE;
    for (const uint8_t *q = s + 12; q < lf - 1; q++)
        if (*q == 0 || *q == '\r' || *q == '\n')
            return GW_E_PARSE;
    size_t body_at = (size_t)(lf - s) + 1;
    size_t count = 0;
    int rc = parse_fields(p, s + body_at, n - body_at - 2, &count);
    if (rc < 0)
        return rc;
    gw_back_head_t head = {status, minor, p->fields, count};
    if (status >= 100 && status < 200) {
        /* We never send Upgrade, so a 101 is a broken origin (RFC 9110 §15.2.2). */
        if (status == 101)
            return GW_E_PARSE;
        p->line.len = 0;
        if (cbs->on_head)
            cbs->on_head(data, &head);
        return 0;
    }
    int have_cl = 0, have_te = 0, te_chunked = 0, conn_close = 0, conn_ka = 0;
    uint64_t cl = 0;
    for (size_t i = 0; i < count; i++) {
        gw_slice_t nm = p->fields[i].name, v = p->fields[i].value;
        if (gw_slice_eq_nocase(nm, GW_SLICE_LIT("content-length"))) {
            /* Any second Content-Length, even equal, is refused (issue 5, RFC 9112 §6.3). */
            if (have_cl || parse_u64(v, &cl) < 0)
                return GW_E_PARSE;
            have_cl = 1;
        } else if (gw_slice_eq_nocase(nm, GW_SLICE_LIT("transfer-encoding"))) {
            int last = 0;
            list_has(v, "chunked", &last);
            have_te = 1;
            te_chunked = last; /* a later TE field overrides: only the final coding counts */
        } else if (gw_slice_eq_nocase(nm, GW_SLICE_LIT("connection"))) {
            conn_close |= list_has(v, "close", NULL);
            conn_ka |= list_has(v, "keep-alive", NULL);
        }
    }
    /* RFC 9112 §6.3 ¶3: both present is a smuggling vector; refuse. */
    if (have_cl && have_te)
        return GW_E_PARSE;
    /* RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive". */
    p->keep_alive = minor == 1 ? !conn_close : (conn_ka && !conn_close);
    p->status = status;
    if (p->head_only || status == 204 || status == 304) {
        p->state = GW_BACK_RESP_DONE;
    } else if (have_te) {
        if (te_chunked) {
            p->state = GW_BACK_RESP_CHUNK_SIZE;
        } else {
            p->state = GW_BACK_RESP_BODY_CLOSE; /* RFC 9112 §6.3 ¶4 */
            p->keep_alive = 0;
        }
    } else if (have_cl) {
        p->remaining = cl;
        p->state = cl ? GW_BACK_RESP_BODY_CL : GW_BACK_RESP_DONE;
    } else {
        p->state = GW_BACK_RESP_BODY_CLOSE;
        p->keep_alive = 0;
    }
    p->line.len = 0;
    if (cbs->on_head)
        cbs->on_head(data, &head);
    if (p->state == GW_BACK_RESP_DONE && !p->stop && cbs->on_complete)
        cbs->on_complete(data);
    return 0;
}

static int parse_chunk_line(gw_back_resp_t *p)
{
    const uint8_t *s = p->line.base;
    size_t n = p->line.len; /* ends with LF */
    if (n < 3 || s[n - 2] != '\r')
        return GW_E_PARSE;
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n - 2; i++) {
        uint8_t c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        if (v >> 56)
            return GW_E_PARSE; /* overflow */
        v = v * 16 + (uint64_t)d;
    }
    if (i == 0)
        return GW_E_PARSE;
    /* RFC 9112 §7.1.1: chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ) */
    while (i < n - 2 && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i < n - 2 && s[i] != ';')
        return GW_E_PARSE;
    for (; i < n - 2; i++)
        if (s[i] == 0 || s[i] == '\r' || s[i] == '\n')
            return GW_E_PARSE;
    p->line.len = 0;
    p->remaining = v;
    p->state = v ? GW_BACK_RESP_CHUNK_DATA : GW_BACK_RESP_TRAILERS;
    return 0;
}

ssize_t gw_back__resp_feed(gw_back_resp_t *p, const uint8_t *buf, size_t off, size_t len,
                           const gw_back_resp_cbs_t *cbs, void *data)
{
    size_t pos = off, end = off + len;
    int rc;
    while (pos < end && !p->stop) {
        switch (p->state) {
        case GW_BACK_RESP_HEAD:
        case GW_BACK_RESP_TRAILERS: {
            /* Collect whole lines up to the empty one; a trailer section may be just CRLF. */
            const uint8_t *lf = memchr(buf + pos, '\n', end - pos);
            size_t n = lf ? (size_t)(lf - (buf + pos)) + 1 : end - pos;
            rc = gw_bytes_append(&p->line, buf + pos, n);
            if (rc < 0)
                return rc == GW_E_LIMIT ? GW_E_PARSE : rc;
            pos += n;
            if (!lf)
                break;
            const uint8_t *t = p->line.base;
            size_t L = p->line.len;
            if (L < 2 || t[L - 2] != '\r')
                return GW_E_PARSE; /* bare LF */
            int found = (p->state == GW_BACK_RESP_TRAILERS && L == 2) ||
                        (L >= 4 && memcmp(t + L - 4, "\r\n\r\n", 4) == 0);
            if (!found)
                break;
            if (p->state == GW_BACK_RESP_HEAD) {
                rc = on_full_head(p, cbs, data);
                if (rc < 0)
                    return rc;
            } else {
                size_t count = 0;
                rc = parse_fields(p, p->line.base, p->line.len - 2, &count);
                if (rc < 0)
                    return rc;
                p->state = GW_BACK_RESP_DONE;
                if (count && cbs->on_trailers)
                    cbs->on_trailers(data, p->fields, count);
                p->line.len = 0;
                if (!p->stop && cbs->on_complete)
                    cbs->on_complete(data);
            }
            break;
        }
        case GW_BACK_RESP_BODY_CL:
        case GW_BACK_RESP_CHUNK_DATA: {
            size_t n = end - pos;
            if ((uint64_t)n > p->remaining)
                n = (size_t)p->remaining;
            p->remaining -= n;
            size_t at = pos;
            pos += n;
            if (p->remaining == 0)
                p->state =
                    p->state == GW_BACK_RESP_BODY_CL ? GW_BACK_RESP_DONE : GW_BACK_RESP_CHUNK_CRLF;
            if (p->state == GW_BACK_RESP_CHUNK_CRLF)
                p->remaining = 2;
            if (cbs->on_body)
                cbs->on_body(data, at, n);
            if (p->state == GW_BACK_RESP_DONE && !p->stop && cbs->on_complete)
                cbs->on_complete(data);
            break;
        }
        case GW_BACK_RESP_BODY_CLOSE: {
            size_t at = pos;
            pos = end;
            if (cbs->on_body)
                cbs->on_body(data, at, end - at);
            break;
        }
        case GW_BACK_RESP_CHUNK_SIZE: {
            const uint8_t *lf = memchr(buf + pos, '\n', end - pos);
            size_t n = lf ? (size_t)(lf - (buf + pos)) + 1 : end - pos;
            if (p->line.len + n > MAX_CHUNK_LINE)
                return GW_E_PARSE;
            rc = gw_bytes_append(&p->line, buf + pos, n);
            if (rc < 0)
                return rc;
            pos += n;
            if (lf && (rc = parse_chunk_line(p)) < 0)
                return rc;
            break;
        }
        case GW_BACK_RESP_CHUNK_CRLF:
            if (buf[pos] != (p->remaining == 2 ? '\r' : '\n'))
                return GW_E_PARSE;
            pos++;
            if (--p->remaining == 0)
                p->state = GW_BACK_RESP_CHUNK_SIZE;
            break;
        case GW_BACK_RESP_DONE:
            return (ssize_t)(pos - off);
        }
    }
    return (ssize_t)(pos - off);
}

int gw_back__resp_eof(gw_back_resp_t *p, const gw_back_resp_cbs_t *cbs, void *data)
{
    if (p->state == GW_BACK_RESP_DONE)
        return 0;
    if (p->state == GW_BACK_RESP_BODY_CLOSE) {
        p->state = GW_BACK_RESP_DONE;
        if (cbs->on_complete)
            cbs->on_complete(data);
        return 0;
    }
    return GW_E_IO;
}

static int field_ok(gw_slice_t s, int name)
{
    if (name && s.len == 0)
        return 0;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = s.base[i];
        if (name ? !is_tchar(c) : (c == 0 || c == '\r' || c == '\n'))
            return 0;
    }
    return 1;
}

int gw_back__req_head(gw_bytes_t *out, const gw_back_req_t *req)
{
    int rc = GW_E_INVAL;
    if (!field_ok(req->method, 1) || req->target.len == 0 || !field_ok(req->target, 0) ||
        memchr(req->target.base, ' ', req->target.len) || !field_ok(req->host, 0))
        goto out;
    for (size_t i = 0; i < req->fields_len; i++)
        if (!field_ok(req->fields[i].name, 1) || !field_ok(req->fields[i].value, 0))
            goto out;
            /* RFC 9112 §3: request-line = method SP request-target SP HTTP-version */
#define APP(p, n)                                                                                  \
    do {                                                                                           \
        if ((rc = gw_bytes_append(out, (p), (n))) < 0)                                             \
            goto out;                                                                              \
    } while (0)
#define APPS(s) APP((s), strlen(s))
    APP(req->method.base, req->method.len);
    APPS(" ");
    APP(req->target.base, req->target.len);
    APPS(" HTTP/1.1\r\nHost: ");
    APP(req->host.base, req->host.len);
    APPS("\r\n");
    for (size_t i = 0; i < req->fields_len; i++) {
        APP(req->fields[i].name.base, req->fields[i].name.len);
        APPS(": ");
        APP(req->fields[i].value.base, req->fields[i].value.len);
        APPS("\r\n");
    }
    if (req->body_len < 0) {
        APPS("Transfer-Encoding: chunked\r\n");
    } else if (req->body_len > 0) {
        char cl[48];
        int n = snprintf(cl, sizeof(cl), "Content-Length: %lld\r\n", (long long)req->body_len);
        APP(cl, (size_t)n);
    }
    APPS("\r\n");
#undef APPS
#undef APP
    rc = 0;
out:
    return rc;
}
