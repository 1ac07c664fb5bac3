/* common/alog.c — access log records and their line formats (alog.h). */
#include "common/alog.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/err.h"

/* the fields every request touches fit in two cache lines */
_Static_assert(offsetof(gw_alog_t, peer) <= 128, "gw_alog_t's hot part outgrew two cache lines");

void gw_alog_init_hot(gw_alog_t *r)
{
    memset(r, 0, offsetof(gw_alog_t, peer));
    r->connect_us = -1;
    r->upstream_head_us = -1;
    r->upstream_queue_us = -1;
    r->upstream_resp_us = -1;
    r->route_ix = UINT32_MAX;
}

void gw_alog_init(gw_alog_t *r)
{
    gw_alog_init_hot(r);
    memset(&r->peer, 0, offsetof(gw_alog_t, id) - offsetof(gw_alog_t, peer));
}

const char *gw_alog_auth_str(gw_alog_auth_t a)
{
    static const char *const n[] = {"none",    "cached",  "verified", "failed",
                                    "missing", "limited", "busy"};
    return a < GW_ALOG_AUTH_N ? n[a] : "?";
}

unsigned gw_alog_clf_status(const gw_alog_t *r)
{
    if (r->status)
        return r->status;
    if (r->client_gone)
        return 499; /* nginx: client closed request */
    static const struct {
        const char *code;
        unsigned status;
    } by_code[] = {
        {"PROTOCOL_ERROR", 400},    {"FRAME_SIZE_ERROR", 400},  {"FLOW_CONTROL_ERROR", 400},
        {"STREAM_CLOSED", 400},     {"COMPRESSION_ERROR", 400}, {"REFUSED_STREAM", 503},
        {"ENHANCE_YOUR_CALM", 429}, {"INTERNAL_ERROR", 500},
    };
    for (size_t i = 0; r->h2_error && i < sizeof(by_code) / sizeof(by_code[0]); i++)
        if (!strcmp(r->h2_error, by_code[i].code))
            return by_code[i].status;
    return 444; /* nginx: the connection closed without a response */
}

static int is_id_byte(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

int gw_alog_id_valid(gw_slice_t v)
{
    if (v.len == 0 || v.len > GW_ALOG_ID_MAX)
        return 0;
    for (size_t i = 0; i < v.len; i++)
        if (!is_id_byte(v.base[i]))
            return 0;
    return 1;
}

void gw_alog_id_make(gw_alog_t *r, uint64_t seed, uint64_t counter)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v[2] = {seed, counter};
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < 16; i++)
            r->id[w * 16 + i] = hex[(v[w] >> (60 - 4 * i)) & 0xf];
    r->id_len = 32;
}

/* ---- a small appender: the line is built in out, dropped whole when memory runs out ---- */

typedef struct {
    gw_bytes_t *out;
    int nomem;
} ap_t;

static void put(ap_t *a, const void *p, size_t n)
{
    if (!a->nomem && gw_bytes_append(a->out, p, n) < 0)
        a->nomem = 1;
}

static void puts_(ap_t *a, const char *s)
{
    put(a, s, strlen(s));
}

static void put_u64(ap_t *a, uint64_t v)
{
    char b[24];
    put(a, b, gw_fmt_u64(b, v));
}

/* microseconds as milliseconds with three decimals: 1234 is "1.234" */
static void put_ms(ap_t *a, uint64_t us)
{
    char b[32];
    size_t n = gw_fmt_u64(b, us / 1000);
    b[n++] = '.';
    b[n++] = (char)('0' + (us / 100) % 10);
    b[n++] = (char)('0' + (us / 10) % 10);
    b[n++] = (char)('0' + us % 10);
    put(a, b, n);
}

/* microseconds as seconds with three decimals (nginx's $request_time) */
static void put_sec(ap_t *a, uint64_t us)
{
    put_ms(a, us / 1000); /* milliseconds as seconds: the same three decimals */
}

static const char hexd[] = "0123456789abcdef";

/* nginx's escaping of log variables: `"`, `\` and bytes outside printable ASCII as \xHH. */
static void put_clf(ap_t *a, gw_slice_t s)
{
    if (!s.base || s.len == 0) {
        put(a, "-", 1);
        return;
    }
    size_t n = s.len > GW_ALOG_MAX_VALUE ? GW_ALOG_MAX_VALUE : s.len;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s.base[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            continue;
        put(a, s.base + run, i - run);
        char e[4] = {'\\', 'x', hexd[c >> 4], hexd[c & 15]};
        put(a, e, 4);
        run = i + 1;
    }
    put(a, s.base + run, n - run);
}

/* Length of the UTF-8 sequence at p (RFC 3629 §4: shortest form, no surrogates, at most
 * U+10FFFF), or 0 when the bytes there are not one. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        len = 2, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string (RFC 8259 §7), or null for a missing value. */
static void put_json_str(ap_t *a, gw_slice_t s, int present)
{
    if (!present) {
        puts_(a, "null");
        return;
    }
    put(a, "\"", 1);
    size_t n = s.len > GW_ALOG_MAX_VALUE ? GW_ALOG_MAX_VALUE : s.len;
    size_t run = 0, i = 0;
    while (i < n) {
        uint8_t c = s.base[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t ul = c >= 0x80 ? utf8_len(s.base + i, n - i) : 0;
        if (ul == 3 && c == 0xe2 && s.base[i + 1] == 0x80 &&
            (s.base[i + 2] == 0xa8 || s.base[i + 2] == 0xa9)) {
            /* U+2028, U+2029: valid JSON, but line breaks to many readers of logs */
            put(a, s.base + run, i - run);
            put(a, s.base[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
            i += 3;
            run = i;
            continue;
        }
        if (ul) { /* valid UTF-8 passes as it is */
            i += ul;
            continue;
        }
        put(a, s.base + run, i - run);
        if (c == '"')
            put(a, "\\\"", 2);
        else if (c == '\\')
            put(a, "\\\\", 2);
        else if (c == '\n')
            put(a, "\\n", 2);
        else if (c == '\r')
            put(a, "\\r", 2);
        else if (c == '\t')
            put(a, "\\t", 2);
        else if (c < 0x20 || c == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hexd[c >> 4], hexd[c & 15]};
            put(a, e, 6);
        } else {
            put(a, "\\ufffd", 6); /* not UTF-8 (or cut by the length cap) */
        }
        i++;
        run = i;
    }
    put(a, s.base + run, n - run);
    put(a, "\"", 1);
}

static gw_slice_t cs(const char *s)
{
    return s ? gw_slice_str(s) : (gw_slice_t){NULL, 0};
}

static void key(ap_t *a, const char *k)
{
    put(a, ",\"", 2);
    puts_(a, k);
    put(a, "\":", 2);
}

/* ,"k":"v" (escaped), or ,"k":null when not present */
static void kv_str(ap_t *a, const char *k, gw_slice_t v, int present)
{
    key(a, k);
    put_json_str(a, v, present);
}

static void kv_cstr(ap_t *a, const char *k, const char *v)
{
    kv_str(a, k, cs(v), v != NULL);
}

/* ,"k":1.234 (microseconds as milliseconds), or ,"k":null for a negative (unknown) time */
static void kv_ms(ap_t *a, const char *k, int64_t us)
{
    key(a, k);
    if (us >= 0)
        put_ms(a, (uint64_t)us);
    else
        puts_(a, "null");
}

static void kv_bool(ap_t *a, const char *k, int v)
{
    key(a, k);
    puts_(a, v ? "true" : "false");
}

/* "ip:port" / "[ip6]:port" into address and port slices */
static void split_peer(const char *peer, gw_slice_t *ip, gw_slice_t *port)
{
    *ip = cs(peer);
    *port = (gw_slice_t){NULL, 0};
    if (!peer)
        return;
    const char *colon = strrchr(peer, ':');
    if (!colon)
        return;
    const char *b = peer, *e = colon;
    if (*b == '[' && e > b && e[-1] == ']') {
        b++;
        e--;
    }
    *ip = (gw_slice_t){(const uint8_t *)b, (size_t)(e - b)};
    *port = gw_slice_str(colon + 1);
}

/* The time of the last line, formatted once per second and thread (a worker logs thousands of
 * lines a second; gmtime_r and the formatting cost more than the rest of a line). */
typedef struct {
    int64_t sec;
    char iso[24]; /* 2026-12-05T11:40:22 */
    size_t iso_len;
    char clf[48]; /* " - - [05/Dec/2026:11:40:22 +0000] \"" (the date at CLF_DATE_OFF) */
    size_t clf_len;
} tcache_t;

#define CLF_DATE_OFF 6  /* " - - [" */
#define CLF_DATE_LEN 26 /* "05/Dec/2026:11:40:22 +0000" */

static const tcache_t *tcache(uint64_t now_us)
{
    static _Thread_local tcache_t c = {.sec = -1};
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t sec = (int64_t)(now_us / 1000000);
    if (sec == c.sec)
        return &c;
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    c.iso_len = strftime(c.iso, sizeof(c.iso), "%Y-%m-%dT%H:%M:%S", &tm);
    int n =
        snprintf(c.clf, sizeof(c.clf), " - - [%02d/%s/%04d:%02d:%02d:%02d +0000] \"", tm.tm_mday,
                 mon[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    c.clf_len = n > 0 ? (size_t)n : 0;
    c.sec = sec;
    return &c;
}

static void format_json(ap_t *a, const gw_alog_t *r, uint64_t now_us)
{
    const tcache_t *tc = tcache(now_us);
    char ts[40];
    memcpy(ts, tc->iso, tc->iso_len);
    size_t tl = tc->iso_len;
    ts[tl++] = '.';
    unsigned ms = (unsigned)(now_us / 1000 % 1000);
    ts[tl++] = (char)('0' + ms / 100);
    ts[tl++] = (char)('0' + ms / 10 % 10);
    ts[tl++] = (char)('0' + ms % 10);
    ts[tl++] = 'Z';
    put(a, "{\"time\":\"", 9);
    put(a, ts, tl);
    put(a, "\"", 1);
    gw_slice_t ip, port;
    split_peer(r->peer, &ip, &port);
    key(a, "client");
    put_json_str(a, ip, r->peer != NULL);
    key(a, "client_port");
    if (port.len)
        put(a, port.base, port.len);
    else
        puts_(a, "null");
    kv_str(a, "request_id", (gw_slice_t){(const uint8_t *)r->id, r->id_len}, r->id_len > 0);
    kv_cstr(a, "protocol", r->proto);
    kv_cstr(a, "tls_version", r->tls_version);
    kv_cstr(a, "tls_cipher", r->tls_cipher);
    kv_cstr(a, "sni", r->sni);
    kv_str(a, "method", r->method, r->method.base != NULL);
    kv_str(a, "authority", r->authority, r->authority.base != NULL);
    kv_str(a, "path", r->path, r->path.base != NULL);
    kv_str(a, "request_line", r->request_line, r->request_line.len && !r->method.len);
    kv_str(a, "user_agent", r->user_agent, r->user_agent.base != NULL);
    kv_str(a, "referer", r->referer, r->referer.base != NULL);
    key(a, "status");
    put_u64(a, r->status);
    key(a, "bytes_received");
    put_u64(a, r->bytes_in);
    key(a, "bytes_sent");
    put_u64(a, r->bytes_out);
    uint64_t end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
    kv_ms(a, "duration_ms", (int64_t)((end - r->start_ns) / 1000));
    kv_ms(a, "time_to_head_ms",
          r->head_ns >= r->start_ns && r->head_ns ? (int64_t)((r->head_ns - r->start_ns) / 1000)
                                                  : -1);
    kv_ms(a, "time_to_last_byte_ms",
          r->last_ns >= r->start_ns && r->last_ns ? (int64_t)((r->last_ns - r->start_ns) / 1000)
                                                  : -1);
    kv_cstr(a, "route", r->route);
    kv_cstr(a, "upstream", r->upstream);
    kv_cstr(a, "upstream_server", r->server);
    kv_ms(a, "upstream_connect_ms", r->connect_us);
    kv_ms(a, "upstream_header_ms", r->upstream_head_us);
    kv_ms(a, "upstream_response_ms", r->upstream_resp_us);
    key(a, "retries");
    put_u64(a, r->retries);
    kv_bool(a, "coalesced", r->coalesced);
    kv_bool(a, "pushed", r->pushed);
    kv_bool(a, "throttled", r->throttled);
    kv_cstr(a, "h2_error", r->h2_error);
    kv_cstr(a, "tls_client_verify", r->client_verify);
    kv_cstr(a, "tls_client_subject", r->client_subject);
    kv_cstr(a, "remote_user", r->user);
    kv_cstr(a, "auth", r->auth ? gw_alog_auth_str((gw_alog_auth_t)r->auth) : NULL);
    kv_cstr(a, "cache", r->cache);
    put(a, "}\n", 2);
}

/* HTTP/2.0, HTTP/1.0 or HTTP/1.1, as the combined request shows the version */
static const char *clf_version(const char *proto)
{
    if (proto && !strcmp(proto, "h2"))
        return " HTTP/2.0";
    if (proto && !strcmp(proto, "http/1.0"))
        return " HTTP/1.0";
    return " HTTP/1.1";
}

/* $request: "GET /path HTTP/2.0", or the bytes of a request line that never parsed ("-" when
 * no byte of it came) */
static void put_request(ap_t *a, const gw_alog_t *r)
{
    if (r->method.len) {
        put_clf(a, r->method);
        put(a, " ", 1);
        put_clf(a, r->path);
        puts_(a, clf_version(r->proto));
    } else {
        put_clf(a, r->request_line);
    }
}

static void format_combined(ap_t *a, const gw_alog_t *r, uint64_t now_us)
{
    const tcache_t *tc = tcache(now_us);
    gw_slice_t ip, port;
    split_peer(r->peer, &ip, &port);
    put_clf(a, ip);
    if (r->user) { /* the third field is the authenticated user (basic auth) */
        put(a, " - ", 3);
        put_clf(a, gw_slice_str(r->user));
        put(a, tc->clf + 4, tc->clf_len - 4); /* " [date] \"" */
    } else {
        put(a, tc->clf, tc->clf_len);
    }
    put_request(a, r);
    put(a, "\" ", 2);
    put_u64(a, gw_alog_clf_status(r));
    put(a, " ", 1);
    put_u64(a, r->bytes_out);
    put(a, " \"", 2);
    put_clf(a, r->referer);
    put(a, "\" \"", 3);
    put_clf(a, r->user_agent);
    put(a, "\"", 1);
}

/* " 0.003 0.000 0.002 0.003 <id>": nginx's $request_time $upstream_connect_time
 * $upstream_header_time $upstream_response_time, then the request id. The connect time is 0 on a
 * kept connection (as nginx logs it) and `-` when no origin server was tried. */
static void format_timing(ap_t *a, const gw_alog_t *r)
{
    uint64_t end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
    put(a, " ", 1);
    put_sec(a, (end - r->start_ns) / 1000);
    put(a, " ", 1);
    if (!r->server)
        put(a, "-", 1);
    else
        put_sec(a, r->connect_us >= 0 ? (uint64_t)r->connect_us : 0);
    put(a, " ", 1);
    if (r->upstream_head_us >= 0)
        put_sec(a, (uint64_t)r->upstream_head_us);
    else
        put(a, "-", 1);
    put(a, " ", 1);
    if (r->upstream_resp_us >= 0)
        put_sec(a, (uint64_t)r->upstream_resp_us);
    else
        put(a, "-", 1);
    put(a, " ", 1);
    if (r->id_len)
        put(a, r->id, r->id_len);
    else
        put(a, "-", 1);
    /* appended last, so that readers of the fields before keep working: the client
     * certificate's verification and subject, quoted ("-" without TLS or without subject) */
    put(a, " \"", 2);
    put_clf(a, cs(r->client_verify));
    put(a, "\" \"", 3);
    put_clf(a, cs(r->client_subject));
    put(a, "\"", 1);
}

int gw_alog_format(gw_bytes_t *out, gw_alog_format_t fmt, const gw_alog_t *r, uint64_t now_us)
{
    size_t before = out->len;
    ap_t a = {out, 0};
    if (fmt == GW_ALOG_JSON) {
        format_json(&a, r, now_us);
    } else {
        format_combined(&a, r, now_us);
        if (fmt == GW_ALOG_COMBINED_TIMING)
            format_timing(&a, r);
        put(&a, "\n", 1);
    }
    if (a.nomem) {
        out->len = before;
        return GW_E_NOMEM;
    }
    return 0;
}

/* ---- log_format templates ------------------------------------------------------------ */

/* The variables of a template, nginx's names where nginx has the same thing. */
#define ALOG_VARS(X)                                                                               \
    X(REMOTE_ADDR, "remote_addr")                                                                  \
    X(REMOTE_PORT, "remote_port")                                                                  \
    X(REMOTE_USER, "remote_user")                                                                  \
    X(TIME_LOCAL, "time_local")                                                                    \
    X(TIME_ISO8601, "time_iso8601")                                                                \
    X(MSEC, "msec")                                                                                \
    X(REQUEST, "request")                                                                          \
    X(REQUEST_METHOD, "request_method")                                                            \
    X(REQUEST_URI, "request_uri")                                                                  \
    X(SERVER_PROTOCOL, "server_protocol")                                                          \
    X(HOST, "host")                                                                                \
    X(STATUS, "status")                                                                            \
    X(BODY_BYTES_SENT, "body_bytes_sent")                                                          \
    X(REQUEST_BODY_LENGTH, "request_body_length")                                                  \
    X(HTTP_REFERER, "http_referer")                                                                \
    X(HTTP_USER_AGENT, "http_user_agent")                                                          \
    X(REQUEST_TIME, "request_time")                                                                \
    X(UPSTREAM_ADDR, "upstream_addr")                                                              \
    X(UPSTREAM_CONNECT_TIME, "upstream_connect_time")                                              \
    X(UPSTREAM_HEADER_TIME, "upstream_header_time")                                                \
    X(UPSTREAM_RESPONSE_TIME, "upstream_response_time")                                            \
    X(REQUEST_ID, "request_id")                                                                    \
    X(SSL_PROTOCOL, "ssl_protocol")                                                                \
    X(SSL_CIPHER, "ssl_cipher")                                                                    \
    X(SSL_SERVER_NAME, "ssl_server_name")                                                          \
    X(SSL_CLIENT_VERIFY, "ssl_client_verify")                                                      \
    X(SSL_CLIENT_S_DN, "ssl_client_s_dn")                                                          \
    X(ROUTE, "route")                                                                              \
    X(UPSTREAM, "upstream")                                                                        \
    X(RETRIES, "retries")                                                                          \
    X(H2_ERROR, "h2_error")

enum {
#define X(id, name) V_##id,
    ALOG_VARS(X)
#undef X
        V_COUNT,
    V_LITERAL = 255,
};

static const char *const var_names[] = {
#define X(id, name) name,
    ALOG_VARS(X)
#undef X
};

typedef struct {
    uint8_t var;       /* V_*, or V_LITERAL */
    uint16_t off, len; /* the literal's bytes in text */
} tmpl_op_t;

struct gw_alog_tmpl {
    size_t n;
    tmpl_op_t ops[GW_ALOG_TMPL_MAX_OPS];
    char text[]; /* the template as written */
};

static int is_name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

int gw_alog_tmpl_new(const char *text, gw_alog_tmpl_t **out, const char **why, size_t *at)
{
    *out = NULL;
    *why = NULL;
    *at = 0;
    size_t tl = strlen(text);
    if (tl == 0 || tl > GW_ALOG_TMPL_MAX) {
        *why = tl ? "longer than 2048 bytes" : "empty";
        return GW_E_INVAL;
    }
    for (size_t i = 0; i < tl; i++) {
        /* a line holds no control byte of the template's own (escaping is for values) */
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
            *why = "control byte";
            *at = i;
            return GW_E_INVAL;
        }
    }
    gw_alog_tmpl_t *t = gw_calloc(1, sizeof(*t) + tl + 1);
    if (!t)
        return GW_E_NOMEM;
    memcpy(t->text, text, tl + 1);
    size_t i = 0;
    while (i < tl) {
        if (t->n == GW_ALOG_TMPL_MAX_OPS) {
            *why = "more than 64 variables and literals";
            *at = i;
            goto fail;
        }
        tmpl_op_t *op = &t->ops[t->n++];
        if (text[i] != '$') {
            size_t j = i;
            while (j < tl && text[j] != '$')
                j++;
            *op = (tmpl_op_t){V_LITERAL, (uint16_t)i, (uint16_t)(j - i)};
            i = j;
            continue;
        }
        /* $name or ${name} (the braces let a name be followed by name bytes) */
        size_t b = i + 1, braced = b < tl && text[b] == '{';
        b += braced;
        size_t e = b;
        while (e < tl && is_name_byte(text[e]))
            e++;
        if (e == b || (braced && (e >= tl || text[e] != '}'))) {
            *why = braced ? "a ${ without a variable name and }" : "a $ without a variable name";
            *at = i;
            goto fail;
        }
        size_t v = 0;
        while (v < V_COUNT &&
               (strlen(var_names[v]) != e - b || memcmp(var_names[v], text + b, e - b) != 0))
            v++;
        if (v == V_COUNT) {
            *why = "unknown variable";
            *at = i;
            goto fail;
        }
        *op = (tmpl_op_t){(uint8_t)v, 0, 0};
        i = e + braced;
    }
    *out = t;
    return 0;
fail:
    gw_free(t);
    return GW_E_INVAL;
}

void gw_alog_tmpl_del(gw_alog_tmpl_t *t)
{
    gw_free(t);
}

#ifdef GW_TEST_API
const char *gw_alog_tmpl_vars(size_t i)
{
    return i < V_COUNT ? var_names[i] : NULL;
}
#endif

/* a time in microseconds as seconds.mmm, or `-` when negative (unknown) */
static void put_sec_or_dash(ap_t *a, int64_t us)
{
    if (us < 0)
        put(a, "-", 1);
    else
        put_sec(a, (uint64_t)us);
}

/* The value of a variable that is one text of the record (a field, a name, a peer's word):
 * 1 with it in *out (written through put_clf), or 0 for the others. */
static int var_text(unsigned v, const gw_alog_t *r, gw_slice_t *out)
{
    switch (v) {
    case V_REQUEST_METHOD:
        *out = r->method;
        return 1;
    case V_REQUEST_URI:
        *out = r->path;
        return 1;
    case V_HOST:
        *out = r->authority;
        return 1;
    case V_HTTP_REFERER:
        *out = r->referer;
        return 1;
    case V_HTTP_USER_AGENT:
        *out = r->user_agent;
        return 1;
    case V_UPSTREAM_ADDR:
        *out = cs(r->server);
        return 1;
    case V_REQUEST_ID:
        *out = (gw_slice_t){(const uint8_t *)r->id, r->id_len};
        return 1;
    case V_SSL_PROTOCOL:
        *out = cs(r->tls_version);
        return 1;
    case V_SSL_CIPHER:
        *out = cs(r->tls_cipher);
        return 1;
    case V_SSL_SERVER_NAME:
        *out = cs(r->sni);
        return 1;
    case V_SSL_CLIENT_VERIFY:
        *out = cs(r->client_verify);
        return 1;
    case V_SSL_CLIENT_S_DN:
        *out = cs(r->client_subject);
        return 1;
    case V_ROUTE:
        *out = cs(r->route);
        return 1;
    case V_UPSTREAM:
        *out = cs(r->upstream);
        return 1;
    case V_H2_ERROR:
        *out = cs(r->h2_error);
        return 1;
    default:
        return 0;
    }
}

static void put_var(ap_t *a, unsigned v, const gw_alog_t *r, uint64_t now_us)
{
    gw_slice_t ip, port, text;
    if (var_text(v, r, &text)) {
        put_clf(a, text);
        return;
    }
    switch (v) {
    case V_REMOTE_ADDR:
    case V_REMOTE_PORT:
        split_peer(r->peer, &ip, &port);
        put_clf(a, v == V_REMOTE_ADDR ? ip : port);
        return;
    case V_REMOTE_USER:
        put_clf(a, gw_slice_str(r->user ? r->user : "")); /* `-` without one */
        return;
    case V_TIME_LOCAL:
        put(a, tcache(now_us)->clf + CLF_DATE_OFF, CLF_DATE_LEN);
        return;
    case V_TIME_ISO8601: {
        const tcache_t *tc = tcache(now_us);
        put(a, tc->iso, tc->iso_len);
        put(a, "+00:00", 6);
        return;
    }
    case V_MSEC: /* seconds since the epoch, ms resolution */
        put_sec(a, now_us);
        return;
    case V_REQUEST:
        put_request(a, r);
        return;
    case V_SERVER_PROTOCOL:
        puts_(a, clf_version(r->proto) + 1);
        return;
    case V_STATUS:
        put_u64(a, gw_alog_clf_status(r));
        return;
    case V_BODY_BYTES_SENT:
        put_u64(a, r->bytes_out);
        return;
    case V_REQUEST_BODY_LENGTH:
        put_u64(a, r->bytes_in);
        return;
    case V_REQUEST_TIME: {
        uint64_t end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
        put_sec(a, (end - r->start_ns) / 1000);
        return;
    }
    case V_UPSTREAM_CONNECT_TIME:
        put_sec_or_dash(a, !r->server ? -1 : r->connect_us >= 0 ? r->connect_us : 0);
        return;
    case V_UPSTREAM_HEADER_TIME:
        put_sec_or_dash(a, r->upstream_head_us);
        return;
    case V_UPSTREAM_RESPONSE_TIME:
        put_sec_or_dash(a, r->upstream_resp_us);
        return;
    case V_RETRIES:
        put_u64(a, r->retries);
        return;
    }
}

int gw_alog_format_tmpl(gw_bytes_t *out, const gw_alog_tmpl_t *t, const gw_alog_t *r,
                        uint64_t now_us)
{
    size_t before = out->len;
    ap_t a = {out, 0};
    for (size_t i = 0; i < t->n; i++) {
        const tmpl_op_t *op = &t->ops[i];
        if (op->var == V_LITERAL)
            put(&a, t->text + op->off, op->len);
        else
            put_var(&a, op->var, r, now_us);
    }
    put(&a, "\n", 1);
    if (a.nomem) {
        out->len = before;
        return GW_E_NOMEM;
    }
    return 0;
}
