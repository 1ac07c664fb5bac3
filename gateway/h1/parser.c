/* h1/parser.c — HTTP/1.1 message parsing on http-parser 2.9, with our own head scanner for
 * the framing rules http-parser is lenient about. The only file that includes http_parser.h. */
#include "h1/parser.h"

#include <http_parser.h>
#include <limits.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"

typedef struct {
    size_t noff, nlen, voff, vlen;
} field_off_t;

typedef enum {
    SCAN_HEAD = 0, /* bytes of a message head: checked byte by byte before http-parser */
    SCAN_BODY,     /* head complete: bytes go to http-parser unchecked */
} scan_state_t;

struct gw_h1_parser {
    http_parser hp;
    http_parser_settings settings;
    gw_h1_kind_t kind;
    gw_h1_limits_t limits;
    gw_h1_callbacks_t cb;
    void *user_data;

    gw_bytes_t arena; /* method, target and field bytes of the current head */
    field_off_t *offs;
    size_t offs_len, offs_cap;
    gw_h1_field_t *fields; /* built at headers-complete */
    size_t method_off, method_len, target_off, target_len;
    int last_was_value; /* header callbacks: which one came last */

    scan_state_t scan;
    uint8_t prev;      /* previous head byte */
    size_t line_len;   /* bytes on the current head line, CR excluded */
    size_t lines;      /* complete head lines so far */
    size_t head_bytes; /* bytes of the current head */
    int in_message;
    int paused;
    int failed;
    int cb_rv; /* code returned by a user callback, or our own check */
    unsigned err_status;
    const char *err_reason;
};

static gw_h1_parser_t *of(http_parser *hp)
{
    return hp->data;
}

static int fail(gw_h1_parser_t *p, int code, unsigned status, const char *reason)
{
    if (!p->cb_rv) {
        p->cb_rv = code;
        p->err_status = status;
        p->err_reason = reason;
    }
    return -1;
}

static int arena_add(gw_h1_parser_t *p, const char *at, size_t len)
{
    int rv = gw_bytes_append(&p->arena, at, len);
    if (rv == GW_E_LIMIT)
        return fail(p, GW_E_LIMIT, 431, "request head too large");
    if (rv < 0)
        return fail(p, rv, 500, "out of memory");
    return 0;
}

static int on_message_begin(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    p->in_message = 1;
    return 0;
}

static int on_url(http_parser *hp, const char *at, size_t len)
{
    gw_h1_parser_t *p = of(hp);
    if (p->target_len == 0)
        p->target_off = p->arena.len;
    p->target_len += len;
    return arena_add(p, at, len);
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
    gw_h1_parser_t *p = of(hp);
    if (p->offs_len == 0 || p->last_was_value) {
        if (p->offs_len == p->limits.max_fields)
            return fail(p, GW_E_LIMIT, 431, "too many header fields");
        if (p->offs_len == p->offs_cap) {
            size_t ncap = p->offs_cap ? p->offs_cap * 2 : 16;
            field_off_t *n = gw_realloc(p->offs, ncap * sizeof(*n));
            if (!n)
                return fail(p, GW_E_NOMEM, 500, "out of memory");
            p->offs = n;
            p->offs_cap = ncap;
        }
        p->offs[p->offs_len++] = (field_off_t){p->arena.len, 0, 0, 0};
        p->last_was_value = 0;
    }
    p->offs[p->offs_len - 1].nlen += len;
    return arena_add(p, at, len);
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
    gw_h1_parser_t *p = of(hp);
    field_off_t *f = &p->offs[p->offs_len - 1];
    if (!p->last_was_value) {
        f->voff = p->arena.len;
        p->last_was_value = 1;
    }
    f->vlen += len;
    return arena_add(p, at, len);
}

static gw_slice_t trim(gw_slice_t s)
{
    while (s.len && (s.base[0] == ' ' || s.base[0] == '\t'))
        s.base++, s.len--;
    while (s.len && (s.base[s.len - 1] == ' ' || s.base[s.len - 1] == '\t'))
        s.len--;
    return s;
}

/* Last comma-separated token of a list value, trimmed. */
static gw_slice_t last_token(gw_slice_t v)
{
    size_t i = v.len;
    while (i > 0 && v.base[i - 1] != ',')
        i--;
    return trim((gw_slice_t){v.base + i, v.len - i});
}

static int has_token(gw_slice_t v, const char *tok)
{
    gw_slice_t t = gw_slice_str(tok);
    size_t start = 0;
    for (size_t i = 0; i <= v.len; i++) {
        if (i == v.len || v.base[i] == ',') {
            if (gw_slice_eq_nocase(trim((gw_slice_t){v.base + start, i - start}), t))
                return 1;
            start = i + 1;
        }
    }
    return 0;
}

static int on_headers_complete(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    if (p->offs_len) {
        gw_h1_field_t *f = gw_realloc(p->fields, p->offs_len * sizeof(*f));
        if (!f)
            return fail(p, GW_E_NOMEM, 500, "out of memory");
        p->fields = f;
    }
    gw_h1_msg_t m = {0};
    size_t n_cl = 0, n_te = 0, n_host = 0;
    gw_slice_t te = {0};
    m.flags = 0;
    for (size_t i = 0; i < p->offs_len; i++) {
        field_off_t *o = &p->offs[i];
        gw_h1_field_t *f = &p->fields[i];
        f->name = (gw_slice_t){p->arena.base + o->noff, o->nlen};
        f->value = trim((gw_slice_t){p->arena.base + o->voff, o->vlen});
        if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("content-length")))
            n_cl++;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("transfer-encoding")))
            n_te++, te = f->value;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("host")))
            n_host++;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("expect")) &&
                 gw_slice_eq_nocase(f->value, GW_SLICE_LIT("100-continue")))
            m.flags |= GW_H1_MSG_F_EXPECT_100;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("upgrade")) && has_token(f->value, "h2c"))
            m.flags |= GW_H1_MSG_F_UPGRADE_H2C;
    }
    /* RFC 9112 §6.1 / §6.3: both framings at once is a smuggling attempt. */
    if (n_cl && n_te)
        return fail(p, GW_E_PARSE, 400, "content-length with transfer-encoding");
    /* Repeated Content-Length, even with equal values: refused rather than merged. */
    if (n_cl > 1)
        return fail(p, GW_E_PARSE, 400, "repeated content-length");
    if (n_te) {
        if (p->kind == GW_H1_REQUEST && hp->http_major == 1 && hp->http_minor == 0)
            return fail(p, GW_E_PARSE, 400, "transfer-encoding in an HTTP/1.0 request");
        /* RFC 9112 §6.3: chunked must be the final coding of a request. */
        if (n_te > 1 || !gw_slice_eq_nocase(last_token(te), GW_SLICE_LIT("chunked")))
            return fail(p, GW_E_PARSE, 400, "transfer-encoding does not end in chunked");
    }
    if (p->kind == GW_H1_REQUEST) {
        if (hp->method == HTTP_CONNECT)
            return fail(p, GW_E_UNSUPPORTED, 405, "CONNECT is not supported");
        /* RFC 9112 §3.2: exactly one Host in HTTP/1.1. */
        if (hp->http_major == 1 && hp->http_minor == 1 && n_host != 1)
            return fail(p, GW_E_PARSE, 400, n_host ? "repeated host" : "missing host");
        if (n_host > 1)
            return fail(p, GW_E_PARSE, 400, "repeated host");
        const char *meth = http_method_str((enum http_method)hp->method);
        p->method_off = p->arena.len;
        p->method_len = strlen(meth);
        if (arena_add(p, meth, p->method_len) < 0)
            return -1;
        /* arena may have moved: rebuild slices */
        for (size_t i = 0; i < p->offs_len; i++) {
            field_off_t *o = &p->offs[i];
            p->fields[i].name = (gw_slice_t){p->arena.base + o->noff, o->nlen};
            p->fields[i].value = trim((gw_slice_t){p->arena.base + o->voff, o->vlen});
        }
        m.method = (gw_slice_t){p->arena.base + p->method_off, p->method_len};
        m.target = (gw_slice_t){p->arena.base + p->target_off, p->target_len};
    } else {
        m.status = hp->status_code;
    }
    /* We never switch protocols on Upgrade (RFC 9113 §3.1 deprecates h2c upgrade): keep
     * parsing the connection as HTTP/1.1. */
    hp->upgrade = 0;
    m.version_major = hp->http_major;
    m.version_minor = hp->http_minor;
    m.fields = p->fields;
    m.fields_len = p->offs_len;
    m.content_length = (hp->flags & F_CHUNKED) || hp->content_length == ULLONG_MAX
                           ? -1
                           : (int64_t)hp->content_length;
    if (n_cl == 0 && !(hp->flags & F_CHUNKED) && p->kind == GW_H1_REQUEST)
        m.content_length = 0; /* RFC 9112 §6.3 rule 6: a request without framing has no body */
    if (hp->flags & F_CHUNKED)
        m.flags |= GW_H1_MSG_F_CHUNKED;
    if (http_should_keep_alive(hp))
        m.flags |= GW_H1_MSG_F_KEEP_ALIVE;
    p->scan = SCAN_BODY;
    if (p->cb.on_head) {
        int rv = p->cb.on_head(p->user_data, &m);
        if (rv < 0)
            return fail(p, rv, 500, "on_head failed");
    }
    return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
    gw_h1_parser_t *p = of(hp);
    if (p->cb.on_body) {
        int rv = p->cb.on_body(p->user_data, (const uint8_t *)at, len);
        if (rv < 0)
            return fail(p, rv, 500, "on_body failed");
    }
    return 0;
}

static int on_message_complete(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    p->in_message = 0;
    p->paused = 1;
    http_parser_pause(hp, 1);
    if (p->cb.on_complete) {
        int rv = p->cb.on_complete(p->user_data);
        if (rv < 0)
            return fail(p, rv, 500, "on_complete failed");
    }
    return 0;
}

static void reset_head(gw_h1_parser_t *p)
{
    p->arena.len = 0;
    p->offs_len = 0;
    p->target_len = p->method_len = 0;
    p->last_was_value = 0;
    p->scan = SCAN_HEAD;
    p->prev = 0;
    p->line_len = p->lines = p->head_bytes = 0;
}

gw_h1_parser_t *gw_h1_parser_new(gw_h1_kind_t kind, const gw_h1_limits_t *limits,
                                 const gw_h1_callbacks_t *cb, void *user_data)
{
    gw_h1_parser_t *p = gw_calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->kind = kind;
    p->limits = *limits;
    if (!p->limits.max_head)
        p->limits.max_head = 64 * 1024;
    if (!p->limits.max_fields)
        p->limits.max_fields = 128;
    p->cb = *cb;
    p->user_data = user_data;
    http_parser_init(&p->hp, kind == GW_H1_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE);
    p->hp.data = p;
    http_parser_settings_init(&p->settings);
    p->settings.on_message_begin = on_message_begin;
    p->settings.on_url = on_url;
    p->settings.on_header_field = on_header_field;
    p->settings.on_header_value = on_header_value;
    p->settings.on_headers_complete = on_headers_complete;
    p->settings.on_body = on_body;
    p->settings.on_message_complete = on_message_complete;
    gw_bytes_init(&p->arena, p->limits.max_head);
    reset_head(p);
    return p;
}

void gw_h1_parser_del(gw_h1_parser_t *p)
{
    if (!p)
        return;
    gw_bytes_free(&p->arena);
    gw_free(p->offs);
    gw_free(p->fields);
    gw_free(p);
}

/* Check head bytes before http-parser sees them; returns how many of data[0..len) belong to
 * the head (all of them if the head does not end here), or -1 on a violation. */
static ssize_t scan_head(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = data[i];
        if (++p->head_bytes > p->limits.max_head) {
            fail(p, GW_E_LIMIT, 431, "request head too large");
            return -1;
        }
        if (c == 0) {
            fail(p, GW_E_PARSE, 400, "NUL in message head");
            return -1;
        }
        if (p->prev == '\r' && c != '\n') {
            fail(p, GW_E_PARSE, 400, "bare CR in message head");
            return -1;
        }
        if (c == '\n') {
            if (p->prev != '\r') {
                fail(p, GW_E_PARSE, 400, "bare LF in message head");
                return -1;
            }
            if (p->line_len == 0 && p->lines > 0) {
                p->prev = c;
                return (ssize_t)(i + 1); /* end of head */
            }
            if (p->line_len > 0)
                p->lines++;
            p->line_len = 0;
        } else if (c != '\r') {
            /* RFC 9112 §5.2: obs-fold (a field line starting with SP/HT) is rejected. */
            if (p->line_len == 0 && p->lines > 0 && (c == ' ' || c == '\t')) {
                fail(p, GW_E_PARSE, 400, "obs-fold in message head");
                return -1;
            }
            p->line_len++;
        }
        p->prev = c;
    }
    return (ssize_t)len;
}

static ssize_t run(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    size_t n = http_parser_execute(&p->hp, &p->settings, (const char *)data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    if (e == HPE_OK || (e == HPE_PAUSED && p->paused && !p->cb_rv))
        return (ssize_t)n;
    p->failed = 1;
    if (p->cb_rv)
        return p->cb_rv;
    p->err_status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
    p->err_reason = http_errno_description(e);
    p->cb_rv = e == HPE_HEADER_OVERFLOW ? GW_E_LIMIT : GW_E_PARSE;
    return p->cb_rv;
}

ssize_t gw_h1_parser_feed(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    if (p->failed)
        return p->cb_rv ? p->cb_rv : GW_E_PARSE;
    size_t off = 0;
    while (off < len && !p->paused) {
        size_t chunk = len - off;
        if (p->scan == SCAN_HEAD) {
            ssize_t h = scan_head(p, data + off, chunk);
            if (h < 0) {
                p->failed = 1;
                return p->cb_rv;
            }
            chunk = (size_t)h;
        }
        ssize_t n = run(p, data + off, chunk);
        if (n < 0)
            return n;
        off += (size_t)n;
        if ((size_t)n < chunk && !p->paused) {
            /* http-parser stopped early without pausing: treat as an error */
            p->failed = 1;
            p->cb_rv = GW_E_PARSE;
            p->err_status = 400;
            p->err_reason = "parser stopped";
            return p->cb_rv;
        }
    }
    return (ssize_t)off;
}

int gw_h1_parser_eof(gw_h1_parser_t *p)
{
    if (p->failed)
        return GW_E_PARSE;
    if (!p->in_message && p->head_bytes == 0)
        return 0;
    if (p->paused)
        return 0;
    /* Lets http-parser finish a close-delimited response body. */
    http_parser_execute(&p->hp, &p->settings, NULL, 0);
    if (HTTP_PARSER_ERRNO(&p->hp) == HPE_OK || p->paused)
        return p->in_message ? GW_E_PARSE : 0;
    return GW_E_PARSE;
}

int gw_h1_parser_paused(const gw_h1_parser_t *p)
{
    return p->paused;
}

void gw_h1_parser_resume(gw_h1_parser_t *p)
{
    if (!p->paused)
        return;
    p->paused = 0;
    http_parser_pause(&p->hp, 0);
    reset_head(p);
}

int gw_h1_parser_in_message(const gw_h1_parser_t *p)
{
    return p->in_message || p->head_bytes > 0;
}

unsigned gw_h1_parser_error_status(const gw_h1_parser_t *p)
{
    return p->err_status ? p->err_status : 400;
}

const char *gw_h1_parser_error_reason(const gw_h1_parser_t *p)
{
    return p->err_reason ? p->err_reason : "malformed message";
}

const gw_h1_field_t *gw_h1_msg_field(const gw_h1_msg_t *msg, const char *name)
{
    gw_slice_t n = gw_slice_str(name);
    for (size_t i = 0; i < msg->fields_len; i++)
        if (gw_slice_eq_nocase(msg->fields[i].name, n))
            return &msg->fields[i];
    return NULL;
}
