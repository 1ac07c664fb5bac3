/* proxy/translate.c — request and response translation as pure functions: what the origin is
 * told (connection-specific fields dropped, cookies joined, Host from :authority, the forwarding
 * fields built from the connection, never from the client's words unless it is a proxy the
 * operator trusts: forwarded_for: append, trusted_proxies) and what the client is
 * told of the origin's response (RFC 9110 §7.6, RFC 9113 §8.2-§8.3). No IO, no state: tested
 * in tests/unit/test_proxy_translate.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/template.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

const char *gw_req_proto_str(gw_req_proto_t p)
{
    return p == GW_REQ_H2 ? "h2" : "http/1.1";
}

/* ---- request translation (RFC 9113 §8.3, RFC 9110 §7.6) ------------------------------------ */

/* Connection-specific fields never forwarded (RFC 9110 §7.6.1, RFC 9113 §8.2.2). host and
 * content-length are rebuilt by the back from :authority and the body framing; expect is
 * answered by the front. */
static int hop_by_hop(gw_slice_t n)
{
    return gw_http_field_is_connection_specific(n) ||
           (n.len == 14 && (gw_slice_eq_nocase(n, GW_SLICE_LIT("http2-settings")) ||
                            gw_slice_eq_nocase(n, GW_SLICE_LIT("content-length"))));
}

/* The tokens of a message's Connection fields (RFC 9110 §7.6.1), split once per message so
 * that each field name is checked against a short list, not by re-parsing every Connection
 * value per field. More tokens than fit: `overflow` says to fall back to re-parsing. */
#define CONN_TOKENS 16
typedef struct {
    gw_slice_t tok[CONN_TOKENS];
    size_t n;
    int overflow;
    uint64_t lens;       /* bit len % 64 set for each token: most names are ruled out by it */
    const gw_field_t *f; /* the message's fields, for the fallback */
    size_t fn;
} conn_toks_t;

/* Split the message's Connection fields into t; non-zero when it has any (one pass over the
 * fields for both questions). */
static int conn_toks(conn_toks_t *t, const gw_field_t *f, size_t n)
{
    int any = 0;
    t->n = 0;
    t->overflow = 0;
    t->lens = 0;
    t->f = f;
    t->fn = n;
    for (size_t i = 0; i < n; i++) {
        if (!gw_proxy__name_is(f[i].name, "connection"))
            continue;
        any = 1;
        gw_http_list_t l = gw_http_list(f[i].value, ',', GW_HTTP_LIST_F_SPACE);
        gw_slice_t tok;
        while (gw_http_list_next(&l, &tok)) {
            if (t->n == CONN_TOKENS) {
                t->overflow = 1;
                return 1;
            }
            t->tok[t->n++] = tok;
            t->lens |= 1ull << (tok.len % 64);
        }
    }
    return any;
}

/* named_by_connection() past the length filter: compare with the tokens, or re-parse the
 * Connection fields when they had more tokens than fit. */
static int named_by_connection_slow(const conn_toks_t *t, gw_slice_t name)
{
    if (!t->overflow) {
        for (size_t i = 0; i < t->n; i++)
            if (t->tok[i].len == name.len && gw_slice_eq_nocase(t->tok[i], name))
                return 1;
        return 0;
    }
    for (size_t i = 0; i < t->fn; i++) {
        if (!gw_proxy__name_is(t->f[i].name, "connection"))
            continue;
        gw_http_list_t l = gw_http_list(t->f[i].value, ',', GW_HTTP_LIST_F_SPACE);
        gw_slice_t tok;
        while (gw_http_list_next(&l, &tok))
            if (gw_slice_eq_nocase(tok, name))
                return 1;
    }
    return 0;
}

/* Whether `name` is one of the comma-separated tokens of any Connection field. Inline: most
 * names are ruled out by their length. */
static inline int named_by_connection(const conn_toks_t *t, gw_slice_t name)
{
    if (!t->overflow && !(t->lens & (1ull << (name.len % 64))))
        return 0;
    return named_by_connection_slow(t, name);
}

static gw_slice_t put(gw_proxy_xlate_t *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static gw_slice_t put(gw_proxy_xlate_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(x->buf + x->used, x->size - x->used, fmt, ap);
    va_end(ap);
    GW_ASSERT(n >= 0 && (size_t)n < x->size - x->used);
    gw_slice_t s = {(const uint8_t *)x->buf + x->used, (size_t)n};
    x->used += (size_t)n + 1;
    return s;
}

/* put() without printf, for the fields of every request: the parts end to end. */
static gw_slice_t cat(gw_proxy_xlate_t *x, const gw_slice_t *parts, size_t n)
{
    char *d = x->buf + x->used;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        GW_ASSERT(len + parts[i].len < x->size - x->used);
        if (parts[i].len)
            memcpy(d + len, parts[i].base, parts[i].len);
        len += parts[i].len;
    }
    d[len] = 0;
    x->used += len + 1;
    return (gw_slice_t){(const uint8_t *)d, len};
}

static void add(gw_proxy_xlate_t *x, gw_slice_t name, gw_slice_t value)
{
    GW_ASSERT(x->n < x->cap);
    x->f[x->n++] = (gw_field_t){name, value};
}

/* Every value of fields named `name`, joined with sep, or {NULL,0} when there is none. */
static gw_slice_t join(gw_proxy_xlate_t *x, const gw_req_head_t *h, gw_slice_t name, gw_slice_t sep)
{
    size_t start = x->used, seen = 0;
    for (size_t i = 0; i < h->fields_len; i++) {
        if (!gw_slice_eq_nocase(h->fields[i].name, name))
            continue;
        if (seen++) {
            memcpy(x->buf + x->used, sep.base, sep.len);
            x->used += sep.len;
        }
        memcpy(x->buf + x->used, h->fields[i].value.base, h->fields[i].value.len);
        x->used += h->fields[i].value.len;
    }
    if (!seen)
        return (gw_slice_t){0};
    gw_slice_t s = {(const uint8_t *)x->buf + start, x->used - start};
    x->buf[x->used++] = 0;
    return s;
}

/* Whether v is a well-formed RFC 7239 §4 Forwarded value: 1#forwarded-element, each a list of
 * token "=" (token / quoted-string) pairs. A client's value that is not (an open quote above
 * all) could swallow the element we append: such values are not forwarded. */
static int forwarded_ok(gw_slice_t v)
{
    const uint8_t *p = v.base, *e = p + v.len;
    while (p < e) {
        if (*p == ' ' || *p == '\t' || *p == ',' || *p == ';') {
            p++; /* OWS, empty list elements and pairs (RFC 9110 §5.6.1) */
            continue;
        }
        const uint8_t *t = p;
        while (p < e && gw_http_is_tchar(*p))
            p++;
        if (p == t || p == e || *p != '=')
            return 0;
        p++;
        if (p < e && *p == '"') {
            /* RFC 9110 §5.6.4: qdtext / quoted-pair, no controls but HTAB */
            for (p++;; p++) {
                if (p == e)
                    return 0;
                if (*p == '"')
                    break;
                if (*p == '\\' && ++p == e)
                    return 0;
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                    return 0;
            }
            p++;
        } else {
            t = p;
            while (p < e && gw_http_is_tchar(*p))
                p++;
            if (p == t)
                return 0;
        }
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p < e && *p != ',' && *p != ';')
            return 0;
    }
    return 1;
}

/* v as an RFC 7239 §4 / RFC 9110 §5.6.4 quoted-string ("..." with '"' and '\\' escaped), in x. */
static gw_slice_t quoted(gw_proxy_xlate_t *x, gw_slice_t v)
{
    char *d = x->buf + x->used;
    size_t k = 0;
    GW_ASSERT(2 * v.len + 3 <= x->size - x->used);
    d[k++] = '"';
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] == '"' || v.base[i] == '\\')
            d[k++] = '\\';
        d[k++] = (char)v.base[i];
    }
    d[k++] = '"';
    d[k] = 0;
    x->used += k + 1;
    return (gw_slice_t){(const uint8_t *)d, k};
}

/* The fields in which an origin may read who the client is, or which scheme it used, other than
 * the ones the gateway makes: every X-Forwarded-* (-For, -Proto, -Host, -Ssl, -Scheme, -Port,
 * -Prefix...), Forwarded, and the single-address fields that CDNs and balancers set and that
 * origins take for the client's address (nginx's real_ip_header X-Real-IP, chi's and gin's
 * RealIP, Rails' Client-IP, the request-ip family of helpers):
 *   X-Real-IP, Client-IP, X-Client-IP, True-Client-IP (Akamai, Cloudflare), CF-Connecting-IP,
 *   Fastly-Client-IP, Fly-Client-IP, X-Cluster-Client-IP (Rackspace, Zeus), and the pre-RFC
 *   7239 spellings X-Forwarded and Forwarded-For (no "x-forwarded-" prefix to catch them).
 * A client's own is its word about itself (RFC 7239 §8.1), never forwarded where the route tells
 * the origin of the client, nor in request trailers. Called for every field of every request: the
 * names' lengths rule out most fields with one bit test, their first bytes most of the rest. */
static int client_claim(gw_slice_t n)
{
    static const gw_slice_t names[] = {
        GW_SLICE_LIT("forwarded"),           GW_SLICE_LIT("x-real-ip"),
        GW_SLICE_LIT("client-ip"),           GW_SLICE_LIT("x-client-ip"),
        GW_SLICE_LIT("x-forwarded"),         GW_SLICE_LIT("fly-client-ip"),
        GW_SLICE_LIT("forwarded-for"),       GW_SLICE_LIT("true-client-ip"),
        GW_SLICE_LIT("cf-connecting-ip"),    GW_SLICE_LIT("fastly-client-ip"),
        GW_SLICE_LIT("x-cluster-client-ip"),
    };
    /* bit len set for each length above: 9, 11, 13, 14, 16, 19 */
    enum { LENS = 1u << 9 | 1u << 11 | 1u << 13 | 1u << 14 | 1u << 16 | 1u << 19 };
    if (n.len < 9)
        return 0;
    uint8_t c = n.base[0] | 0x20; /* ASCII lower case; a non-letter matches no name below */
    if (c == 'x' && n.len > 12 && gw_mem_eq_nocase(n.base, (const uint8_t *)"x-forwarded-", 12))
        return 1;
    if (n.len > 31 || !(LENS & 1u << n.len))
        return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].len == n.len && names[i].base[0] == c && gw_slice_eq_nocase(n, names[i]))
            return 1;
    return 0;
}

/* Whether the connection's peer may speak for the clients before it: forwarded_for: append
 * and the peer (the address a PROXY header named, if any) in trusted_proxies. Anyone else's
 * X-Forwarded-For, Forwarded, X-Forwarded-Proto and X-Forwarded-Host are its own words and
 * are replaced (RFC 7239 §8.1: a client can forge them). */
static int peer_trusted(const gw_cfg_route_t *r, const gw_cstream_t *s)
{
    if (!r->forwarded_append || !s->addr)
        return 0;
    for (size_t i = 0; i < r->trusted_proxies_len; i++)
        if (gw_cfg_net_match(&r->trusted_proxies[i], s->addr))
            return 1;
    return 0;
}

/* The scheme a trusted proxy says its client used: its one X-Forwarded-Proto when that is
 * http or https; otherwise ours (the listener's), since a value we cannot read is no word. */
static gw_slice_t trusted_proto(const gw_req_head_t *h, gw_slice_t ours)
{
    gw_slice_t v = {0};
    size_t seen = 0;
    for (size_t i = 0; i < h->fields_len; i++)
        if (gw_proxy__name_is(h->fields[i].name, "x-forwarded-proto") && !seen++)
            v = gw_slice_trim(h->fields[i].value);
    if (seen != 1)
        return ours;
    if (gw_slice_eq_nocase(v, GW_SLICE_LIT("https")))
        return GW_SLICE_LIT("https");
    if (gw_slice_eq_nocase(v, GW_SLICE_LIT("http")))
        return GW_SLICE_LIT("http");
    return ours;
}

/* The client's fields that go on, into x: not Host (its value stands in for a missing
 * authority, *authority; HTTP/2: it must agree with :authority, else GW_E_PARSE), nor the
 * connection-specific ones, nor those rebuilt here (cookies of HTTP/2, the forwarding fields,
 * X-Request-Id, a WebSocket's key and version over HTTP/2). */
static int copy_fields(const gw_cfg_route_t *r, const gw_cstream_t *s, const gw_req_head_t *h,
                       int trusted, gw_proxy_xlate_t *x, gw_slice_t *authority)
{
    int h2 = h->proto == GW_REQ_H2;
    int ws = h->protocol.len > 0;
    conn_toks_t toks;
    int conn = conn_toks(&toks, h->fields, h->fields_len);
    for (size_t i = 0; i < h->fields_len; i++) {
        const gw_field_t *f = &h->fields[i];
        if (gw_proxy__name_is(f->name, "host")) {
            if (authority->len == 0)
                *authority = f->value;
            else if (h2 && !gw_slice_eq_nocase(f->value, *authority))
                return GW_E_PARSE;
            continue;
        }
        if (hop_by_hop(f->name) || gw_proxy__name_is(f->name, "expect") ||
            (conn && named_by_connection(&toks, f->name)))
            continue;
        if (h2 && gw_proxy__name_is(f->name, "cookie"))
            continue; /* joined below: RFC 9113 §8.2.3 */
        if ((r->add_x_forwarded && (gw_proxy__name_is(f->name, "x-forwarded-for") ||
                                    gw_proxy__name_is(f->name, "x-forwarded-proto"))) ||
            (r->add_forwarded && gw_proxy__name_is(f->name, "forwarded")) ||
            (r->add_via && gw_proxy__name_is(f->name, "via")))
            continue; /* rebuilt below with ours appended */
        if ((r->add_x_forwarded || r->add_forwarded) && !trusted && client_claim(f->name))
            continue; /* where the route tells the origin of the client, only the gateway speaks:
                         never a client's Forwarded or X-Forwarded-* of the other family (Rack 3
                         reads Forwarded before X-Forwarded-*) nor the rest of the family (an
                         origin reads -Ssl, -Scheme, -Port for the scheme and port the client
                         used, Rack X-Forwarded-Ssl: on before -Proto; -Prefix for redirects),
                         nor an X-Real-IP and its kin (an origin reads them for the address) */
        if (gw_proxy__name_is(f->name, "client-cert") ||
            gw_proxy__name_is(f->name, "client-cert-chain"))
            continue; /* RFC 9440 §4: only the gateway speaks of the TLS client: on every route
                         and listener, client_auth or not, so that no client forges one */
        if (r->basic_auth && !r->basic_auth->pass && gw_proxy__name_is(f->name, "authorization"))
            continue; /* the gateway's credentials (basic_auth), not the origin's */
        if (s->log && s->log->id_len && gw_proxy__name_is(f->name, "x-request-id"))
            continue; /* the front's (kept from this one when it was sane) goes below */
        if (ws && h2 &&
            (gw_proxy__name_is(f->name, "sec-websocket-key") ||
             gw_proxy__name_is(f->name, "sec-websocket-version")))
            continue; /* RFC 8441 §5: ours go below */
        add(x, f->name, f->value);
    }
    return 0;
}

/* A WebSocket's handshake fields (RFC 6455 §4.1 / RFC 9110 §7.8; RFC 8441 §5 for HTTP/2),
 * ours; x->ws_key gets the key the origin is given. 0, GW_E_NOMEM, GW_E_PARSE. */
static int add_websocket(gw_proxy_xlate_t *x, const gw_req_head_t *h)
{
    /* RFC 6455 §4.1 / RFC 9110 §7.8: the two hop-by-hop fields of the handshake, ours */
    add(x, GW_SLICE_LIT("Connection"), GW_SLICE_LIT("Upgrade"));
    add(x, GW_SLICE_LIT("Upgrade"), GW_SLICE_LIT("websocket"));
    if (h->proto == GW_REQ_H2) { /* RFC 8441 §5: the key and version an HTTP/1.1 origin expects */
        if (gw_proxy__ws_key(x->ws_key) < 0)
            return GW_E_NOMEM;
        add(x, GW_SLICE_LIT("Sec-WebSocket-Key"), gw_slice_str(x->ws_key));
        add(x, GW_SLICE_LIT("Sec-WebSocket-Version"), GW_SLICE_LIT("13"));
    } else if (gw_proxy__ws_h1_key(h->fields, h->fields_len, x->ws_key) < 0) {
        return GW_E_PARSE; /* the client's key, which passed above, answers its 101 */
    }
    return 0;
}

/* The forwarding fields the route adds (X-Forwarded-For and -Proto, Forwarded, Via) and the
 * front's X-Request-Id, into x: the client is the connection's peer, appended to what a trusted
 * proxy said (trusted), never to the client's own words. */
static void add_forwarding(const gw_cfg_route_t *r, const gw_cstream_t *s, const gw_req_head_t *h,
                           int trusted, gw_slice_t authority, gw_proxy_xlate_t *x)
{
    int h2 = h->proto == GW_REQ_H2;
    const char *ip = s->peer_ip ? s->peer_ip : "unknown";
    /* the scheme the client used is the listener's, whatever :scheme says (what the origin is
     * told about the client comes from the connection, never from the client's words) */
    gw_slice_t proto = s->tls ? GW_SLICE_LIT("https") : GW_SLICE_LIT("http");
    if (r->add_x_forwarded) {
        /* replace: the connection's peer only; append: a trusted proxy's list, then it */
        gw_slice_t prev = trusted ? join(x, h, GW_SLICE_LIT("x-forwarded-for"), GW_SLICE_LIT(", "))
                                  : (gw_slice_t){0};
        gw_slice_t xff[] = {prev, GW_SLICE_LIT(", "), gw_slice_str(ip)};
        add(x, GW_SLICE_LIT("X-Forwarded-For"), prev.base ? cat(x, xff, 3) : cat(x, xff + 2, 1));
        add(x, GW_SLICE_LIT("X-Forwarded-Proto"), trusted ? trusted_proto(h, proto) : proto);
    }
    if (r->add_forwarded) {
        /* RFC 7239 §6: an IPv6 node is quoted and bracketed; §4: host is a quoted-string, its
         * '"' and '\\' escaped (none pass the authority check: kept so that the value can never
         * end the string early) */
        int v6 = strchr(ip, ':') != NULL;
        int prev_ok = trusted; /* a trusted proxy's elements go first, ours for this hop last */
        for (size_t i = 0; i < h->fields_len && prev_ok; i++)
            if (gw_proxy__name_is(h->fields[i].name, "forwarded"))
                prev_ok = forwarded_ok(h->fields[i].value);
        gw_slice_t prev =
            prev_ok ? join(x, h, GW_SLICE_LIT("forwarded"), GW_SLICE_LIT(", ")) : (gw_slice_t){0};
        gw_slice_t host = quoted(x, authority);
        add(x, GW_SLICE_LIT("Forwarded"),
            put(x, "%.*s%sfor=%s%s%s%s;proto=%.*s;host=%.*s", (int)prev.len,
                prev.base ? (const char *)prev.base : "", prev.base ? ", " : "", v6 ? "\"[" : "",
                ip, v6 ? "]" : "", v6 ? "\"" : "", (int)proto.len, proto.base, (int)host.len,
                host.base));
    }
    if (r->add_via) {
        /* RFC 9110 §7.6.3: received-protocol received-by */
        gw_slice_t prev = join(x, h, GW_SLICE_LIT("via"), GW_SLICE_LIT(", "));
        gw_slice_t via[] = {prev, GW_SLICE_LIT(", "),
                            h2 ? GW_SLICE_LIT("2 h2gate") : GW_SLICE_LIT("1.1 h2gate")};
        add(x, GW_SLICE_LIT("Via"), prev.base ? cat(x, via, 3) : cat(x, via + 2, 1));
    }
    if (s->log && s->log->id_len)
        add(x, GW_SLICE_LIT("X-Request-Id"),
            (gw_slice_t){(const uint8_t *)s->log->id, s->log->id_len});
    /* RFC 9440 §2: the verified client certificate (copied: the request may outlive the
     * connection while it waits for an origin) */
    if (s->tls_client_cert.len) {
        add(x, GW_SLICE_LIT("Client-Cert"), cat(x, &s->tls_client_cert, 1));
        if (r->client_cert_chain && s->tls_client_cert_chain.len)
            add(x, GW_SLICE_LIT("Client-Cert-Chain"), cat(x, &s->tls_client_cert_chain, 1));
    }
}

int gw_proxy__translate(const gw_cfg_route_t *r, const gw_cstream_t *s, const gw_req_head_t *h,
                        uint8_t urgency, gw_proxy_xlate_t *x, gw_back_req_t *req)
{
    size_t bytes = 512 + h->authority.len + h->path.len;
    for (size_t i = 0; i < h->fields_len; i++)
        bytes += h->fields[i].name.len + h->fields[i].value.len + 4;
    x->cap = h->fields_len + 12;
    /* the header rules' values, expanded with the request's variables (the host is the one
     * copy_fields() takes: :authority, else the first Host field) */
    int rules = gw_proxy__has_req_rules(r);
    gw_slice_t vars[GW_TMPL_VAR_N] = {{0}};
    if (rules) {
        gw_slice_t host = h->authority;
        for (size_t i = 0; i < h->fields_len && !host.len; i++)
            if (gw_proxy__name_is(h->fields[i].name, "host"))
                host = h->fields[i].value;
        gw_proxy__tmpl_vars(s, h, host, vars);
        gw_proxy__req_rules_room(r, vars, &bytes, &x->cap);
    }
    x->size = bytes * 2 + s->tls_client_cert.len + s->tls_client_cert_chain.len;
    x->f = x->cap <= GW_PROXY_XLATE_FIELDS ? x->fst : gw_malloc(x->cap * sizeof(*x->f));
    x->buf = x->size <= GW_PROXY_XLATE_BYTES ? x->bst : gw_malloc(x->size);
    if (!x->f || !x->buf)
        return GW_E_NOMEM;
    int h2 = h->proto == GW_REQ_H2;
    int ws = h->protocol.len > 0;
    x->ws_key[0] = 0;
    int trusted = peer_trusted(r, s);
    gw_slice_t authority = h->authority;
    int rv = copy_fields(r, s, h, trusted, x, &authority);
    if (rv < 0)
        return rv;
    if (ws && (rv = add_websocket(x, h)) < 0)
        return rv;
    if (h2) {
        gw_slice_t c = join(x, h, GW_SLICE_LIT("cookie"), GW_SLICE_LIT("; "));
        if (c.base)
            add(x, GW_SLICE_LIT("cookie"), c);
    }
    /* the authority becomes Host and Forwarded host=: RFC 3986 §3.2 characters only. The
     * head's own passed the front's check (gw_req_head_t.authority: every head comes from a
     * front, a push or a revalidation copies its page's or client's); a host field standing
     * in for a missing one is checked here, HTTP/2's front having checked :authority alone */
    if (!h->authority.len && !gw_http_is_authority(authority))
        return GW_E_PARSE;
    add_forwarding(r, s, h, trusted, authority, x);
    if (authority.len == 0)
        return GW_E_PARSE;
    /* origin_host: the origin hears its own name; X-Forwarded-Host keeps the client's (a
     * trusted proxy's own X-Forwarded-Host went on above) */
    if (r->origin_host && r->add_x_forwarded && !trusted)
        add(x, GW_SLICE_LIT("X-Forwarded-Host"), authority);
    /* the operator's rules have the last word: after every field made above, so that a
     * client's copy of a field never outlives a remove or a set */
    if (rules)
        gw_proxy__req_rules_apply(r, vars, x->f, &x->n, x->cap, x->buf, &x->used, x->size);
    gw_slice_t target = h->path, rest;
    int cut = r->strip_prefix ? gw_proxy__strip_prefix(r->strip_prefix, h->path, &rest) : -1;
    if (cut == 0)
        target = rest;
    else if (cut == 1) {
        gw_slice_t parts[] = {GW_SLICE_LIT("/"), rest};
        target = cat(x, parts, 2);
    }
    /* RFC 9110 §9.2.2: only an idempotent method may be sent again (retry, pipelining); a
     * method the gateway does not know is not (http/http.h) */
    int idem = gw_http_method_idempotent(h->method);
    *req = (gw_back_req_t){
        .method = ws ? GW_SLICE_LIT("GET") : h->method, /* RFC 8441 §5: CONNECT → GET */
        .target = target,
        .host = r->origin_host ? gw_slice_str(r->origin_host) : authority,
        .fields = x->f,
        .fields_len = x->n,
        .body_len = h->end_stream            ? 0
                    : h->content_length >= 0 ? h->content_length
                                             : -1,
        .idempotent = idem,
        .urgency = urgency,
        .client = s->addr,
    };
    /* a zero-length body announced with content-length: 0 and no END_STREAM yet */
    if (!h->end_stream && h->content_length == 0)
        req->body_len = 0;
    if (ws) { /* no body: what follows the 101 is the tunnel's; never sent twice */
        req->body_len = 0;
        req->idempotent = 0;
        req->upgrade = 1;
    }
    return 0;
}

/* The request trailers that may go on to the origin, copied into out (room for n): RFC 9110
 * §6.5.1 forbids in trailers what frames, routes, authenticates, modifies the request or
 * describes the content, since it is acted on before the content arrives; connection-specific
 * fields never cross a hop (§7.6.1). An origin that merged them into the head would see a
 * different request than the one we checked. */
size_t gw_proxy__req_trailers(const gw_field_t *in, size_t n, gw_field_t *out)
{
    static const char *const deny[] = {"host",
                                       "content-length",
                                       "expect",
                                       "trailer",
                                       "authorization",
                                       "proxy-authorization",
                                       "cookie",
                                       "content-encoding",
                                       "content-type",
                                       "content-range",
                                       "content-location",
                                       "range",
                                       "if-match",
                                       "if-none-match",
                                       "if-modified-since",
                                       "if-unmodified-since",
                                       "if-range",
                                       "max-forwards",
                                       "cache-control",
                                       "pragma",
                                       "via",
                                       "client-cert",
                                       "client-cert-chain",
                                       "priority",
                                       "http2-settings"};
    conn_toks_t toks;
    int conn = conn_toks(&toks, in, n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        gw_slice_t name = in[i].name;
        /* what tells the origin of the client (client_claim) belongs in a head, where the
           route and trusted_proxies decide; in trailers it is anyone's, on any route */
        int drop =
            hop_by_hop(name) || client_claim(name) || (conn && named_by_connection(&toks, name));
        for (size_t j = 0; !drop && j < sizeof(deny) / sizeof(deny[0]); j++)
            drop = gw_proxy__name_is(name, deny[j]);
        if (!drop)
            out[k++] = in[i];
    }
    return k;
}

/* ---- response translation ----------------------------------------------------------------- */

/* Response fields for the client: hop-by-hop removed, names lowercased (HTTP/2 requires it,
 * HTTP/1.1 clients do not care), Via appended. `lower` holds the lowercased names. */
size_t gw_proxy__resp_fields(const gw_cfg_route_t *route, const gw_back_field_t *in, size_t n,
                             gw_field_t *out, char *lower, size_t lower_size, int64_t *cl, int via)
{
    size_t k = 0, used = 0;
    conn_toks_t toks;
    int conn = conn_toks(&toks, in, n);
    *cl = -1;
    for (size_t i = 0; i < n && k < GW_PROXY_MAX_RESP_FIELDS - 1; i++) {
        gw_slice_t name = in[i].name;
        if (gw_proxy__name_is(name, "content-length")) {
            /* digits only, validated by the back's parser, which also refuses values past
             * INT64_MAX; checked again here because a signed overflow is UB:
             * an out-of-range value is unknown (-1) rather than a wrapped one */
            uint64_t v = 0;
            for (size_t j = 0; j < in[i].value.len && v <= (uint64_t)INT64_MAX; j++) {
                uint8_t d = in[i].value.base[j];
                v = d >= '0' && d <= '9' && v <= ((uint64_t)INT64_MAX - (d - '0')) / 10
                        ? v * 10 + (d - '0')
                        : (uint64_t)INT64_MAX + 1;
            }
            *cl = v <= (uint64_t)INT64_MAX ? (int64_t)v : -1;
            continue;
        }
        if (hop_by_hop(name) || (conn && named_by_connection(&toks, name)))
            continue;
        if (used + name.len > lower_size)
            break;
        gw_ascii_lower(lower + used, name.base, name.len);
        out[k++] = (gw_field_t){{(const uint8_t *)lower + used, name.len}, in[i].value};
        used += name.len;
    }
    if (via && route->add_via && k < GW_PROXY_MAX_RESP_FIELDS)
        out[k++] = (gw_field_t){GW_SLICE_LIT("via"), GW_SLICE_LIT("1.1 h2gate")};
    return k;
}

/* ---- field lookups shared by the rules (compress.c, hints.c, tunnel.c) ---------------- */

const gw_field_t *gw_proxy__field(const gw_field_t *f, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (gw_proxy__name_is(f[i].name, name))
            return &f[i];
    return NULL;
}

/* A token in a comma list (Cache-Control directives, Vary members), case-insensitively. */
int gw_proxy__list_has(const gw_field_t *f, size_t n, const char *name, const char *token)
{
    for (size_t i = 0; i < n; i++) {
        if (!gw_proxy__name_is(f[i].name, name))
            continue;
        gw_http_list_t l = gw_http_list(f[i].value, ',', 0);
        gw_slice_t elem, tname, arg;
        while (gw_http_list_next(&l, &elem)) {
            gw_http_param_split(elem, &tname, &arg);
            if (gw_slice_eq_nocase(tname, gw_slice_str(token)))
                return 1;
        }
    }
    return 0;
}

int gw_proxy__fields_dup(const gw_field_t *f, size_t n, gw_field_t **out)
{
    size_t bytes = n * sizeof(gw_field_t) + 1;
    for (size_t i = 0; i < n; i++)
        bytes += f[i].name.len + f[i].value.len;
    gw_field_t *t = gw_malloc(bytes);
    if (!t)
        return GW_E_NOMEM;
    uint8_t *d = (uint8_t *)(t + n);
    for (size_t i = 0; i < n; i++) {
        gw_slice_t nv[2] = {f[i].name, f[i].value};
        for (int k = 0; k < 2; k++) {
            if (nv[k].len)
                memcpy(d, nv[k].base, nv[k].len);
            nv[k].base = d;
            d += nv[k].len;
        }
        t[i] = (gw_field_t){nv[0], nv[1]};
    }
    *out = t;
    return 0;
}
