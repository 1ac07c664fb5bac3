/* h1/parser.c — HTTP/1.1 message parsing on http-parser 2.9, with our own scanner for the
 * framing rules http-parser is lenient about. The only file that includes http_parser.h.
 *
 * The scanner sees every byte before http-parser does and hands it exactly one framing element
 * at a time (a head, a chunk-size line, chunk data, the CRLF after it, a trailer section, or the
 * rest of a body), so that what it checked is what http-parser parses. The Debian build of
 * http-parser is not HTTP_PARSER_STRICT: it takes any byte after a chunk-size CR, anything up
 * to CR as chunk extensions, skips the CRLF after chunk data unchecked, allows SP in field
 * names and obs-fold in trailers, and reads any three-digit status and any version. */
#include "h1/parser.h"

#include <http_parser.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "h1/h1_internal.h"
#include "http/http.h"

/* A chunk-size line with extensions longer than this is refused (RFC 9112 §7.1.1 sets no
 * limit; a recipient may). */
#define MAX_CHUNK_LINE 4096
/* "HTTP/1.1 200 " — the fixed part of a status line (RFC 9112 §4) */
#define STATUS_FIXED 13

typedef struct {
    size_t noff, nlen, voff, vlen;
} field_off_t;

typedef enum {
    SCAN_METHOD = 0, /* a request's method: ours alone, http-parser gets a stand-in */
    SCAN_HEAD,       /* bytes of a message head: checked byte by byte before http-parser */
    SCAN_BODY,       /* Content-Length or close-delimited body: unchecked */
    SCAN_CHUNK_LINE, /* chunk-size [ chunk-ext ] CRLF */
    SCAN_CHUNK_DATA, /* chunk_left bytes of chunk data */
    SCAN_CHUNK_CRLF, /* the CRLF after chunk data */
    SCAN_TRAILER,    /* trailer section after the last chunk, up to its empty line */
} scan_state_t;

/* Sub-states of a chunk-size line. */
enum { CL_SIZE = 0, CL_BWS, CL_EXT, CL_CR };

struct gw_h1_parser {
    http_parser hp;
    http_parser_settings settings;
    gw_h1_kind_t kind;
    gw_h1_limits_t limits;
    gw_h1_callbacks_t cb;
    void *user_data;

    gw_bytes_t line;   /* requests: the request line as received, up to its CR (the method is
                          its first method_len bytes) */
    gw_bytes_t arena;  /* target and field bytes of the current head */
    gw_bytes_t tarena; /* trailer field bytes (the head's slices stay valid meanwhile) */
    field_off_t *offs; /* head fields, then trailer fields from trailer_first */
    size_t offs_len, offs_cap, trailer_first;
    gw_h1_field_t *fields;  /* built at headers-complete */
    gw_h1_field_t *tfields; /* built at message-complete */
    size_t fields_cap, tfields_cap;
    int lend; /* gw_h1_parser_lend_head(): arena, offs and fields are the thread's, per head */
    size_t method_len, target_off, target_len;
    int last_was_value; /* header callbacks: which one came last */

    scan_state_t scan;
    uint8_t prev;                /* previous head byte */
    size_t line_len;             /* bytes on the current head or chunk line, CR excluded */
    size_t lines;                /* complete head lines so far */
    size_t head_bytes;           /* bytes of the current head or trailer section */
    uint8_t start[STATUS_FIXED]; /* first bytes of a status line */
    int chunk_st;                /* CL_*: where in a chunk-size line */
    size_t chunk_digits;
    uint64_t chunk_left; /* chunk data bytes not yet handed to http-parser */
    int trailing;        /* the last chunk was seen: fields are trailers */
    int head_response;   /* the response answers HEAD: no body */
    int upgrade_ok;      /* the request asked for an Upgrade: a 101 is its final answer */
    int upgraded;        /* that 101 came: the bytes after its head are another protocol */
    int in_message;
    int paused;
    int yield; /* http-parser paused by us after an interim response: go on scanning */
    int failed;
    int cb_rv; /* code returned by a user callback, or our own check */
    unsigned err_status;
    const char *err_reason;
};

static gw_h1_parser_t *of(http_parser *hp)
{
    return hp->data;
}

/* The head buffers of parsers that lend them (gw_h1_parser_lend_head): one set per thread,
 * taken by a head's first byte and given back once its on_head returned. An origin
 * connection's own arena, offsets and field array were cold by its next response when many
 * connections take turns (callgrind, 500 client and 64 origin connections: about 10 LL write
 * misses per proxied request in on_header_field, build_fields and the arena copy); the
 * thread's were used by the previous response. A head spread over several reads keeps them
 * meanwhile: another head gets buffers of its own, freed when it gives back and the thread's
 * set is there again. The thread's set is freed when the thread exits. */
typedef struct {
    gw_bytes_t arena;
    field_off_t *offs;
    size_t offs_cap;
    gw_h1_field_t *fields;
    size_t fields_cap;
    int full; /* the set is at the thread (not lent out) */
} head_bufs_t;
static _Thread_local head_bufs_t spare;
static _Thread_local int spare_keyed; /* the thread's destructor is registered */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_key_ok;

static void spare_free(void *v)
{
    head_bufs_t *b = v;
    gw_bytes_free(&b->arena);
    gw_free(b->offs);
    gw_free(b->fields);
    memset(b, 0, sizeof(*b));
}

static void spare_key_init(void)
{
    spare_key_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* A head starts: take the thread's set when p has none of its own. */
static void head_borrow(gw_h1_parser_t *p)
{
    if (!p->lend || !spare.full || p->arena.cap || p->offs || p->fields)
        return;
    size_t max = p->arena.max;
    p->arena = spare.arena;
    p->arena.len = 0;
    p->arena.max = max;
    p->offs = spare.offs;
    p->offs_cap = spare.offs_cap;
    p->fields = spare.fields;
    p->fields_cap = spare.fields_cap;
    memset(&spare, 0, sizeof(spare));
}

/* The head was handed over: p's set goes to the thread when it has none, else it is freed. */
static void head_give_back(gw_h1_parser_t *p)
{
    if (!p->lend || (!p->arena.cap && !p->offs && !p->fields))
        return;
    if (!spare_keyed) {
        pthread_once(&spare_once, spare_key_init);
        spare_keyed = spare_key_ok && pthread_setspecific(spare_key, &spare) == 0;
    }
    if (spare.full || !spare_keyed) {
        gw_bytes_free(&p->arena);
        gw_free(p->offs);
        gw_free(p->fields);
    } else {
        spare = (head_bufs_t){p->arena, p->offs, p->offs_cap, p->fields, p->fields_cap, 1};
    }
    size_t max = p->arena.max;
    gw_bytes_init(&p->arena, max);
    p->offs = NULL;
    p->fields = NULL;
    p->offs_cap = p->fields_cap = 0;
    p->offs_len = p->trailer_first = 0; /* trailers, if any, start a list of their own */
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

/* Where field bytes go: the head's arena, or the trailers' once the last chunk was seen. */
static gw_bytes_t *cur_arena(gw_h1_parser_t *p)
{
    return p->trailing ? &p->tarena : &p->arena;
}

static int arena_add(gw_h1_parser_t *p, const char *at, size_t len)
{
    int rv = gw_bytes_append(cur_arena(p), at, len);
    if (rv == GW_E_LIMIT)
        return fail(p, GW_E_LIMIT, 431, "message head too large");
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
    if (p->offs_len == 0 && !p->trailing)
        head_borrow(p);
    if (p->offs_len == p->trailer_first || p->last_was_value) {
        if (p->offs_len - p->trailer_first == p->limits.max_fields)
            return fail(p, GW_E_LIMIT, 431, "too many header fields");
        if (p->offs_len == p->offs_cap) {
            size_t ncap = p->offs_cap ? p->offs_cap * 2 : 16;
            field_off_t *n = gw_realloc(p->offs, ncap * sizeof(*n));
            if (!n)
                return fail(p, GW_E_NOMEM, 500, "out of memory");
            p->offs = n;
            p->offs_cap = ncap;
        }
        p->offs[p->offs_len++] = (field_off_t){cur_arena(p)->len, 0, 0, 0};
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
        f->voff = cur_arena(p)->len;
        p->last_was_value = 1;
    }
    f->vlen += len;
    return arena_add(p, at, len);
}

/* Slices of offs[first..first+n) into arena, into *out (of *cap entries, grown to n when
 * smaller). 0 or -1 (failed). The array is kept between messages, as the arena and offs are:
 * a realloc per head to the same size cost about 1.6 LL read misses per proxied request
 * (callgrind, 500 connections), the allocator's chunk header being cold by the next one. */
static int build_fields(gw_h1_parser_t *p, const gw_bytes_t *arena, size_t first, size_t n,
                        gw_h1_field_t **out, size_t *cap)
{
    if (n > *cap) {
        gw_h1_field_t *f = gw_realloc(*out, n * sizeof(*f));
        if (!f)
            return fail(p, GW_E_NOMEM, 500, "out of memory");
        *out = f;
        *cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const field_off_t *o = &p->offs[first + i];
        (*out)[i].name = (gw_slice_t){arena->base + o->noff, o->nlen};
        (*out)[i].value = gw_slice_trim((gw_slice_t){arena->base + o->voff, o->vlen});
        /* RFC 9112 §5.1: no whitespace between name and colon; http-parser keeps SP in the
         * name. RFC 9110 §5.1: a field name is a token. */
        if (!gw_http_is_token((*out)[i].name))
            return fail(p, GW_E_PARSE, 400, "invalid field name");
    }
    return 0;
}

static int on_headers_complete(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    if (build_fields(p, &p->arena, 0, p->offs_len, &p->fields, &p->fields_cap) < 0)
        return -1;
    gw_h1_msg_t m = {0};
    gw_h1__fields_t hf;
    gw_h1__count_fields(p->fields, p->offs_len, &hf);
    m.flags = hf.flags;
    if (p->kind == GW_H1_REQUEST) {
        /* the method as the client wrote it (scan_method), not http-parser's stand-in */
        m.method = (gw_slice_t){p->line.base, p->method_len};
        m.target = (gw_slice_t){p->arena.base + p->target_off, p->target_len};
    }
    gw_h1__head_t h = {.kind = p->kind,
                       .major = hp->http_major,
                       .minor = hp->http_minor,
                       .chunked = (hp->flags & F_CHUNKED) != 0,
                       .content_length = hp->content_length,
                       .method = m.method,
                       .target = m.target,
                       .fields = p->fields,
                       .fields_len = p->offs_len};
    gw_h1__refusal_t why;
    if (gw_h1__check_head(&h, &hf, &why) < 0)
        return fail(p, why.code, why.status, why.reason);
    if (p->kind == GW_H1_RESPONSE) {
        m.status = hp->status_code;
        /* RFC 9110 §15.2.2: a 101 answers an Upgrade request; without one it is a broken
         * origin. With one, it ends the HTTP/1.1 part of the connection (§7.8). */
        if (m.status == 101 && !p->upgrade_ok)
            return fail(p, GW_E_PARSE, 400, "101 without an upgrade request");
        p->upgraded = m.status == 101;
    }
    /* RFC 9112 §6.3 rules 1-2: a response to HEAD, a 1xx, 204 or 304 ends at its head, whatever
     * its fields say. Said before http_should_keep_alive(), which reads F_SKIPBODY. */
    int no_body = p->kind == GW_H1_RESPONSE &&
                  (p->head_response || m.status < 200 || m.status == 204 || m.status == 304);
    if (no_body)
        hp->flags |= F_SKIPBODY;
    /* Requests: we never switch protocols on Upgrade (RFC 9113 §3.1 deprecates h2c upgrade;
     * WebSocket is switched by the front once the origin agreed): keep parsing as HTTP/1.1.
     * Responses: only an awaited 101 stops http-parser after its head. */
    hp->upgrade = p->upgraded;
    m.version_major = hp->http_major;
    m.version_minor = hp->http_minor;
    m.fields = p->fields;
    m.fields_len = p->offs_len;
    m.content_length = (hp->flags & F_CHUNKED) || hp->content_length == ULLONG_MAX
                           ? -1
                           : (int64_t)hp->content_length;
    if (hf.n_cl == 0 && !(hp->flags & F_CHUNKED) && p->kind == GW_H1_REQUEST)
        m.content_length = 0; /* RFC 9112 §6.3 rule 6: a request without framing has no body */
    if (hp->flags & F_CHUNKED)
        m.flags |= GW_H1_MSG_F_CHUNKED;
    if (http_should_keep_alive(hp))
        m.flags |= GW_H1_MSG_F_KEEP_ALIVE;
    p->scan = (hp->flags & F_CHUNKED) && !no_body ? SCAN_CHUNK_LINE : SCAN_BODY;
    p->chunk_st = CL_SIZE;
    p->chunk_digits = p->line_len = 0;
    if (p->cb.on_head) {
        int rv = p->cb.on_head(p->user_data, &m);
        if (rv < 0)
            return fail(p, rv, 500, "on_head failed");
    }
    head_give_back(p);      /* the head's slices were valid during the call only */
    return no_body ? 1 : 0; /* 1: http-parser skips the body */
}

/* End of a chunk-size line; http-parser has parsed the size into content_length. */
static int on_chunk_header(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    if (hp->content_length == 0) {
        /* RFC 9112 §7.1.2: last-chunk, then the trailer section, scanned like a head whose
         * start line was already seen. */
        p->trailing = 1;
        p->trailer_first = p->offs_len;
        p->last_was_value = 0;
        p->tarena.len = 0;
        p->scan = SCAN_TRAILER;
        p->prev = 0;
        p->line_len = p->head_bytes = 0;
        p->lines = 1;
    } else {
        p->chunk_left = hp->content_length;
        p->scan = SCAN_CHUNK_DATA;
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

static void reset_head(gw_h1_parser_t *p);

static int on_message_complete(http_parser *hp)
{
    gw_h1_parser_t *p = of(hp);
    p->in_message = 0;
    /* Give control back to feed(), so that the scanner sees the next message first. */
    http_parser_pause(hp, 1);
    if (p->kind == GW_H1_RESPONSE && hp->status_code < 200 && !p->upgraded) {
        p->yield = 1; /* interim: the final response follows, no pause for the caller */
        return 0;
    }
    p->paused = 1;
    if (p->trailing && p->offs_len > p->trailer_first) {
        size_t n = p->offs_len - p->trailer_first;
        if (build_fields(p, &p->tarena, p->trailer_first, n, &p->tfields, &p->tfields_cap) < 0)
            return -1;
        if (p->cb.on_trailers) {
            int rv = p->cb.on_trailers(p->user_data, p->tfields, n);
            if (rv < 0)
                return fail(p, rv, 500, "on_trailers failed");
        }
    }
    if (p->cb.on_complete) {
        int rv = p->cb.on_complete(p->user_data);
        if (rv < 0)
            return fail(p, rv, 500, "on_complete failed");
    }
    return 0;
}

static void reset_head(gw_h1_parser_t *p)
{
    p->arena.len = p->tarena.len = p->line.len = 0;
    p->offs_len = p->trailer_first = 0;
    p->target_len = p->method_len = 0;
    p->last_was_value = 0;
    p->scan = p->kind == GW_H1_REQUEST ? SCAN_METHOD : SCAN_HEAD;
    p->prev = 0;
    p->line_len = p->lines = p->head_bytes = 0;
    p->trailing = 0;
    p->chunk_left = 0;
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
    p->settings.on_chunk_header = on_chunk_header;
    gw_bytes_init(&p->arena, p->limits.max_head);
    gw_bytes_init(&p->tarena, p->limits.max_head);
    gw_bytes_init(&p->line, p->limits.max_head);
    reset_head(p);
    return p;
}

void gw_h1_parser_lend_head(gw_h1_parser_t *p)
{
    p->lend = 1;
}

void gw_h1_parser_del(gw_h1_parser_t *p)
{
    if (!p)
        return;
    gw_bytes_free(&p->arena);
    gw_bytes_free(&p->tarena);
    gw_bytes_free(&p->line);
    gw_free(p->offs);
    gw_free(p->fields);
    gw_free(p->tfields);
    gw_free(p);
}

/* RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ]. We also take
 * "HTTP/1.1 404" without the second SP, as many origins send it. Status codes are 100-599
 * (RFC 9110 §15). line_len is the line's length, CR excluded. */
static int status_line_ok(const gw_h1_parser_t *p)
{
    const uint8_t *s = p->start;
    if (p->line_len < STATUS_FIXED - 1 || memcmp(s, "HTTP/1.", 7) != 0 ||
        (s[7] != '0' && s[7] != '1') || s[8] != ' ')
        return 0;
    for (int i = 9; i < 12; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    if (s[9] < '1' || s[9] > '5')
        return 0;
    return p->line_len == STATUS_FIXED - 1 || s[12] == ' ';
}

/* The head passed limits.max_head: 414 while still on a request line (RFC 9110 §15.5.15), 431
 * once among the fields (RFC 6585 §5). Returns -1. */
static int too_large(gw_h1_parser_t *p)
{
    if (p->lines == 0 && p->kind == GW_H1_REQUEST)
        return fail(p, GW_E_LIMIT, 414, "request line too long");
    return fail(p, GW_E_LIMIT, 431, "message head too large");
}

/* Bytes of a request line, kept for the method and for the access log of a request refused
 * before its head was whole (bounded by max_head, as the line is). 0 or -1 (failed). */
static int keep_line(gw_h1_parser_t *p, const uint8_t *b, size_t n)
{
    if (gw_bytes_append(&p->line, b, n) < 0)
        return fail(p, GW_E_NOMEM, 500, "out of memory");
    return 0;
}

/* A request line refused at data[i]: what is left of it in data (up to its CR or LF) is kept
 * with it, so the access log shows the line the client sent (nginx's $request), then the
 * error. Returns -1. */
static int fail_line(gw_h1_parser_t *p, const uint8_t *data, size_t i, size_t len, int code,
                     unsigned status, const char *reason)
{
    size_t e = i;
    while (e < len && data[e] != '\r' && data[e] != '\n' &&
           p->line.len + (e - i) < p->limits.max_head)
        e++;
    (void)gw_bytes_append(&p->line, data + i, e - i); /* for the log only: best effort */
    return fail(p, code, status, reason);
}

/* RFC 9112 §3: the method of a request line, up to the SP after it. http-parser 2.9 knows a
 * fixed list of methods and refuses any other (HPE_INVALID_METHOD) where RFC 9110 §9.1 makes
 * any token a method, so the method is scanned here and never shown to it: once the SP is
 * seen, feed() gives http-parser "GET " in its place (the same framing rules apply to every
 * request method, RFC 9112 §6.3) and the rest of the line as received. Empty lines before the
 * request line are skipped (§2.2), a bare CR or LF among them refused. Returns the bytes of
 * data[0..len) consumed (p->scan is SCAN_HEAD once the method is complete), or -1. */
static ssize_t scan_method(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = data[i];
        if (++p->head_bytes > p->limits.max_head)
            return too_large(p);
        if (p->method_len == 0 && (c == '\r' || c == '\n' || p->prev == '\r')) {
            if (p->prev == '\r' && c != '\n')
                return fail(p, GW_E_PARSE, 400, "bare CR in message head");
            if (c == '\n' && p->prev != '\r')
                return fail(p, GW_E_PARSE, 400, "bare LF in message head");
            p->prev = c;
            continue;
        }
        if (c == ' ' && p->method_len) {
            if (gw_http_method_is_connect((gw_slice_t){p->line.base, p->method_len}))
                /* §9.3.6: a tunnel is not what a gateway in front of origins does (the
                 * HTTP/2 front answers it the same way); what follows it would not be HTTP */
                return fail(p, GW_E_UNSUPPORTED, 405, "CONNECT is not supported");
            if (keep_line(p, &c, 1) < 0)
                return -1;
            p->line_len = p->method_len + 1;
            p->prev = c;
            p->scan = SCAN_HEAD;
            return (ssize_t)(i + 1);
        }
        if (c == 0)
            return fail_line(p, data, i, len, GW_E_PARSE, 400, "NUL in message head");
        if (!gw_http_is_tchar(c))
            return fail_line(p, data, i, len, GW_E_PARSE, 400, "invalid method");
        if (keep_line(p, &c, 1) < 0)
            return -1;
        p->method_len++;
    }
    return (ssize_t)len;
}

/* A LF in a head (after its CR): the end of a line, or of the head when the line is empty.
 * 1 at the end of the head, 0, or -1 on a violation. */
static int scan_lf(gw_h1_parser_t *p)
{
    if (p->prev != '\r') {
        fail(p, GW_E_PARSE, 400, "bare LF in message head");
        return -1;
    }
    if (p->line_len == 0 && p->lines > 0)
        return 1;
    if (p->line_len > 0 && p->lines == 0 && p->kind == GW_H1_RESPONSE && !status_line_ok(p)) {
        fail(p, GW_E_PARSE, 400, "malformed status line");
        return -1;
    }
    if (p->line_len > 0)
        p->lines++;
    p->line_len = 0;
    return 0;
}

/* Any other byte of a head line (not CR, LF or NUL) on the slow path: 0, or -1 on a violation. */
static int scan_line_byte(gw_h1_parser_t *p, uint8_t c)
{
    /* RFC 9112 §5.2: obs-fold (a field line starting with SP/HT) is rejected. */
    if (p->line_len == 0 && p->lines > 0 && (c == ' ' || c == '\t')) {
        fail(p, GW_E_PARSE, 400, "obs-fold in message head");
        return -1;
    }
    /* RFC 9110 §5.5: field values are VCHAR, obs-text, SP and HTAB; checked here so that the
     * verdict never depends on how the input was split */
    if (p->lines > 0 && !gw_http_is_field_byte(c)) {
        fail(p, GW_E_PARSE, 400, "control byte in field line");
        return -1;
    }
    if (p->lines == 0 && p->kind == GW_H1_REQUEST && keep_line(p, &c, 1) < 0)
        return -1;
    if (p->lines == 0 && p->kind == GW_H1_RESPONSE) {
        if (p->line_len < STATUS_FIXED) {
            p->start[p->line_len] = c;
        } else if (!gw_http_is_field_byte(c)) {
            /* reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ) */
            fail(p, GW_E_PARSE, 400, "control byte in reason phrase");
            return -1;
        }
    }
    p->line_len++;
    return 0;
}

/* Check the lines of a head or trailer section before http-parser sees them; returns how many
 * of data[0..len) belong to it (all of them if it does not end here), or -1 on a violation. */
static ssize_t scan_head(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = data[i];
        if (p->lines > 0 && gw_http_is_field_byte(c) && p->prev != '\r' &&
            (p->line_len > 0 || (c != ' ' && c != '\t'))) {
            /* Fast path: a run of ordinary bytes inside a field line needs no per-byte state;
             * the verdict (and the byte at which a limit hits) is the slow path's. */
            size_t j = i + 1 + gw_http_field_run(data + i + 1, len - i - 1);
            size_t run = j - i;
            if (p->head_bytes + run > p->limits.max_head) {
                p->head_bytes = p->limits.max_head + 1;
                return too_large(p);
            }
            p->head_bytes += run;
            p->line_len += run;
            p->prev = data[j - 1];
            i = j - 1;
            continue;
        }
        if (p->lines == 0 && p->kind == GW_H1_REQUEST && gw_http_is_field_byte(c)) {
            /* the rest of a request line, kept whole (keep_line) */
            size_t j = i + 1 + gw_http_field_run(data + i + 1, len - i - 1);
            size_t run = j - i;
            if (p->head_bytes + run > p->limits.max_head) {
                /* the log shows the line up to the limit */
                (void)gw_bytes_append(&p->line, data + i, p->limits.max_head - p->head_bytes);
                p->head_bytes = p->limits.max_head + 1;
                return too_large(p);
            }
            if (keep_line(p, data + i, run) < 0)
                return -1;
            p->head_bytes += run;
            p->line_len += run;
            p->prev = data[j - 1];
            i = j - 1;
            continue;
        }
        if (++p->head_bytes > p->limits.max_head)
            return too_large(p);
        if (c == 0) {
            if (p->lines == 0 && p->kind == GW_H1_REQUEST)
                return fail_line(p, data, i, len, GW_E_PARSE, 400, "NUL in message head");
            fail(p, GW_E_PARSE, 400, "NUL in message head");
            return -1;
        }
        if (p->prev == '\r' && c != '\n') {
            fail(p, GW_E_PARSE, 400, "bare CR in message head");
            return -1;
        }
        if (c == '\n') {
            int end = scan_lf(p);
            if (end < 0)
                return -1;
            if (end) {
                p->prev = c;
                return (ssize_t)(i + 1); /* end of head */
            }
        } else if (c != '\r' && scan_line_byte(p, c) < 0) {
            return -1;
        }
        p->prev = c;
    }
    return (ssize_t)len;
}

static int is_hex(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF, chunk-size = 1*HEXDIG,
 * chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ). The size itself is
 * left to http-parser; here: digits first, then only ";"-led extensions of visible bytes, and
 * CR LF. Returns the bytes of data[0..len) on the line (up to its LF), or -1. */
static ssize_t scan_chunk_line(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t c = data[i];
        if (++p->line_len > MAX_CHUNK_LINE) {
            fail(p, GW_E_PARSE, 400, "chunk line too long");
            return -1;
        }
        switch (p->chunk_st) {
        case CL_SIZE:
            if (is_hex(c)) {
                /* 16 hex digits fill 64 bits; http-parser refuses an overflow anyway */
                if (++p->chunk_digits > 16) {
                    fail(p, GW_E_PARSE, 400, "chunk size too large");
                    return -1;
                }
                break;
            }
            if (p->chunk_digits == 0) {
                fail(p, GW_E_PARSE, 400, "malformed chunk size");
                return -1;
            }
            p->chunk_st = CL_BWS;
            /* fall through */
        case CL_BWS:
            if (c == ' ' || c == '\t')
                break;
            if (c == ';') {
                p->chunk_st = CL_EXT;
                break;
            }
            if (c == '\r') {
                p->chunk_st = CL_CR;
                break;
            }
            fail(p, GW_E_PARSE, 400, "malformed chunk extension");
            return -1;
        case CL_EXT:
            if (c == '\r') {
                p->chunk_st = CL_CR;
                break;
            }
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                fail(p, GW_E_PARSE, 400, "control byte in chunk extension");
                return -1;
            }
            break;
        case CL_CR:
            if (c != '\n') {
                fail(p, GW_E_PARSE, 400, "bare CR in chunk line");
                return -1;
            }
            p->chunk_st = CL_SIZE;
            p->chunk_digits = p->line_len = 0;
            return (ssize_t)(i + 1); /* on_chunk_header picks the next state */
        }
    }
    return (ssize_t)len;
}

/* How many of data[0..len) to hand to http-parser next, checked; -1 on a violation. */
static ssize_t scan(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    switch (p->scan) {
    case SCAN_METHOD:
        return scan_method(p, data, len);
    case SCAN_HEAD:
    case SCAN_TRAILER:
        return scan_head(p, data, len);
    case SCAN_BODY:
        return (ssize_t)len;
    case SCAN_CHUNK_LINE:
        return scan_chunk_line(p, data, len);
    case SCAN_CHUNK_DATA: {
        size_t n = (uint64_t)len < p->chunk_left ? len : (size_t)p->chunk_left;
        p->chunk_left -= n;
        if (p->chunk_left == 0) {
            p->scan = SCAN_CHUNK_CRLF;
            p->line_len = 0;
        }
        return (ssize_t)n;
    }
    case SCAN_CHUNK_CRLF: {
        size_t i = 0;
        for (; i < len && p->line_len < 2; i++, p->line_len++) {
            if (data[i] != "\r\n"[p->line_len]) {
                fail(p, GW_E_PARSE, 400, "chunk data not followed by CRLF");
                return -1;
            }
        }
        if (p->line_len == 2) {
            p->scan = SCAN_CHUNK_LINE;
            p->line_len = 0;
        }
        return (ssize_t)i;
    }
    }
    return -1;
}

static ssize_t run(gw_h1_parser_t *p, const uint8_t *data, size_t len)
{
    size_t n = http_parser_execute(&p->hp, &p->settings, (const char *)data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
    if (e == HPE_OK || (e == HPE_PAUSED && (p->paused || p->yield) && !p->cb_rv))
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
        int method = p->scan == SCAN_METHOD;
        ssize_t h = scan(p, data + off, len - off);
        if (h < 0) {
            p->failed = 1;
            return p->cb_rv;
        }
        size_t chunk = (size_t)h;
        if (method) {
            /* method bytes (or empty lines) are ours alone; once the method is complete,
             * http-parser reads its stand-in (scan_method) */
            off += chunk;
            if (p->scan == SCAN_METHOD)
                continue;
            ssize_t k = run(p, (const uint8_t *)"GET ", 4);
            if (k < 0)
                return k;
            if (k != 4) {
                p->failed = 1;
                p->cb_rv = GW_E_PARSE;
                p->err_status = 400;
                p->err_reason = "parser stopped";
                return p->cb_rv;
            }
            continue;
        }
        ssize_t n = run(p, data + off, chunk);
        if (n < 0)
            return n;
        off += (size_t)n;
        if (p->yield) {
            /* An interim response ended: the next head is scanned afresh. */
            p->yield = 0;
            http_parser_pause(&p->hp, 0);
            reset_head(p);
        }
        if ((size_t)n < chunk && !p->paused) {
            /* http-parser stopped early without pausing, or ended a message where the scanner
             * did not: treat as an error */
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
    if (p->scan == SCAN_METHOD)
        return p->method_len ? GW_E_PARSE : 0; /* a method cut short, or only empty lines */
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
    p->head_response = 0;
    p->upgrade_ok = p->upgraded = 0;
    /* After an error (a callback or an allocation failed once the message had paused) the
     * parser accepts nothing more: http-parser asserts when an errored parser is unpaused. */
    if (p->failed || HTTP_PARSER_ERRNO(&p->hp) != HPE_PAUSED)
        return;
    http_parser_pause(&p->hp, 0);
    reset_head(p);
}

void gw_h1_parser_set_head_response(gw_h1_parser_t *p, int head)
{
    p->head_response = head;
}

void gw_h1_parser_set_upgrade(gw_h1_parser_t *p, int upgrade)
{
    p->upgrade_ok = upgrade;
}

int gw_h1_parser_in_message(const gw_h1_parser_t *p)
{
    return p->in_message || p->head_bytes > 0;
}

int64_t gw_h1_parser_body_left(const gw_h1_parser_t *p)
{
    const http_parser *hp = &p->hp;
    if (p->failed || p->paused || !p->in_message || p->scan != SCAN_BODY ||
        (hp->flags & (F_CHUNKED | F_SKIPBODY)) || hp->content_length == 0 ||
        hp->content_length == ULLONG_MAX)
        return -1;
    return (int64_t)hp->content_length;
}

unsigned gw_h1_parser_error_status(const gw_h1_parser_t *p)
{
    return p->err_status ? p->err_status : 400;
}

const char *gw_h1_parser_error_reason(const gw_h1_parser_t *p)
{
    return p->err_reason ? p->err_reason : "malformed message";
}

gw_slice_t gw_h1_parser_request_line(const gw_h1_parser_t *p)
{
    return p->kind == GW_H1_REQUEST ? (gw_slice_t){p->line.base, p->line.len}
                                    : (gw_slice_t){NULL, 0};
}

const gw_h1_field_t *gw_h1_msg_field(const gw_h1_msg_t *msg, const char *name)
{
    gw_slice_t n = gw_slice_str(name);
    for (size_t i = 0; i < msg->fields_len; i++)
        if (gw_slice_eq_nocase(msg->fields[i].name, n))
            return &msg->fields[i];
    return NULL;
}

void gw_h1_http_parser_version(unsigned long *built, unsigned long *running)
{
    *built = (unsigned long)HTTP_PARSER_VERSION_MAJOR << 16 |
             (unsigned long)HTTP_PARSER_VERSION_MINOR << 8 | HTTP_PARSER_VERSION_PATCH;
    *running = http_parser_version();
}
