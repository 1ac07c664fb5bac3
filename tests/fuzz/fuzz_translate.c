/* libFuzzer target: request translation, differentially. A client request
 * built from the input goes through gw_proxy__translate() and the HTTP/1.1 request serializer;
 * the bytes are parsed back with the gateway's strict request parser (http-parser). Checked:
 * whatever translation accepts, the serializer writes something the parser takes whole, as one
 * message, with exactly the method, target, Host, fields (in order) and body framing the
 * translated request says; no field the client named as hop-by-hop (RFC 9110 §7.6.1) or in its
 * Connection reaches the origin; with the route's x_forwarded, X-Forwarded-For is the
 * connection's address alone, never a client's word (forwarded_for: replace), or ends with it
 * when the peer is a trusted proxy (append), and a client's X-Forwarded-Host reaches the origin
 * only from such a proxy; Forwarded always ends with our element for the connection. A
 * serializer refusal (GW_E_INVAL) is the 400 path and ends the run.
 *
 * The input is held to what the fronts let through first (a known method, an origin-form
 * path: see below); the target found that an HTTP/2 :path without its leading '/' went to the
 * origin as a request line, now refused by h2/validate.c.
 *
 * Input: byte 0 = flags (bit 0 HTTP/2, bit 1 TLS, bit 2 end_stream, bit 3 x_forwarded, bit 4
 * forwarded, bit 5 via, bit 6 a content-length of byte 1, bit 7 forwarded_for: append with the
 * peer 192.0.2.7 in trusted_proxies); then pieces split at '\n': method, path, authority, then
 * field name/value pairs (at most 40 fields). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "h1/client.h"
#include "h1/parser.h"
#include "http/http.h"
#include "proxy/proxy_internal.h"

#include "fuzz_input.h"

#define MAX_FIELDS 40

static void check_at(int ok, int line)
{
    if (!ok) {
        fprintf(stderr, "fuzz_translate.c:%d: property failed\n", line);
        abort();
    }
}
#define check(ok) check_at((ok), __LINE__)

typedef struct {
    int heads, completes;
    gw_h1_msg_t msg;
    gw_field_t f[MAX_FIELDS + 16];
    size_t n;
    uint8_t copy[1 << 16];
    size_t used;
} seen_t;

static gw_slice_t keep(seen_t *s, gw_slice_t v)
{
    check(s->used + v.len <= sizeof(s->copy));
    if (v.len)
        memcpy(s->copy + s->used, v.base, v.len);
    gw_slice_t r = {s->copy + s->used, v.len};
    s->used += v.len;
    return r;
}

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    seen_t *s = ud;
    s->heads++;
    s->msg = *m;
    s->msg.method = keep(s, m->method);
    s->msg.target = keep(s, m->target);
    check(m->fields_len <= MAX_FIELDS + 16);
    for (size_t i = 0; i < m->fields_len; i++)
        s->f[i] = (gw_field_t){keep(s, m->fields[i].name), keep(s, m->fields[i].value)};
    s->n = m->fields_len;
    return 0;
}

static int on_complete(void *ud)
{
    ((seen_t *)ud)->completes++;
    return 0;
}

static int named(gw_slice_t n, const char *lit)
{
    return gw_slice_eq_nocase(n, gw_slice_str(lit));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned fl = data[0];
    const uint8_t *p = data + 2, *e = data + size;
    gw_field_t f[MAX_FIELDS];
    size_t n = 0;
    gw_req_head_t h = {.content_length = (fl & 64) ? data[1] : -1,
                       .end_stream = (fl >> 2) & 1,
                       .proto = (fl & 1) ? GW_REQ_H2 : GW_REQ_HTTP1};
    h.method = fz_next_piece(&p, e);
    /* the parser used to read the origin request back (http-parser) knows a fixed list of
     * methods; the gateway forwards any token (RFC 9110 §9.1): only known ones are compared */
    static const char *const known[] = {"GET",    "HEAD",    "POST",  "PUT",
                                        "DELETE", "OPTIONS", "PATCH", "TRACE"};
    int ok = 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        ok |= gw_slice_eq(h.method, gw_slice_str(known[i]));
    if (!ok)
        return 0;
    h.path = fz_next_piece(&p, e);
    /* the HTTP/2 front's rule (h2/validate.c, RFC 9113 §8.3.1): origin-form, or * for
     * OPTIONS; the HTTP/1.1 front's parser gives what http-parser takes */
    if (!h.path.len || (h.path.base[0] != '/' && !(h.path.len == 1 && h.path.base[0] == '*' &&
                                                   gw_slice_eq(h.method, GW_SLICE_LIT("OPTIONS")))))
        return 0;
    h.authority = fz_next_piece(&p, e);
    /* the fronts' rule (h2/validate.c, h1/head.c): the translator takes the head's authority
     * as checked (gw_req_head_t); a host field standing in for an empty one it checks */
    if (!gw_http_is_authority(h.authority))
        return 0;
    h.scheme = GW_SLICE_LIT("https");
    while (p < e && n < MAX_FIELDS) {
        gw_slice_t name = fz_next_piece(&p, e);
        f[n] = (gw_field_t){name, fz_next_piece(&p, e)};
        /* the fronts' field rules (http/http.h; http-parser is as strict): others never
         * reach translation */
        if (!gw_http_is_token(f[n].name) || !gw_http_field_value_valid(f[n].value))
            return 0;
        n++;
    }
    h.fields = f;
    h.fields_len = n;
    static const gw_cfg_net_t trusted[] = {{AF_INET, {192, 0, 2, 0}, 24}};
    int trust = (fl >> 7) & 1;
    gw_cfg_route_t r = {.add_x_forwarded = (fl >> 3) & 1,
                        .add_forwarded = (fl >> 4) & 1,
                        .add_via = (fl >> 5) & 1,
                        .forwarded_append = trust,
                        .trusted_proxies = trusted,
                        .trusted_proxies_len = 1};
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(4000)};
    peer.sin_addr.s_addr = htonl(0xC0000207); /* 192.0.2.7 */
    gw_cstream_t s = {.peer = "192.0.2.7:4000",
                      .peer_ip = "192.0.2.7",
                      .addr = (const struct sockaddr *)&peer,
                      .tls = (fl >> 1) & 1};
    gw_proxy_xlate_t x;
    x.f = NULL;
    x.buf = NULL;
    x.n = x.used = 0;
    gw_back_req_t req;
    int rv = gw_proxy__translate(&r, &s, &h, 3, &x, &req);
    gw_bytes_t out;
    gw_bytes_init(&out, 1 << 20);
    if (rv == 0) {
        gw_h1_request_t hr = {req.method, req.target,     req.host,
                              req.fields, req.fields_len, req.body_len};
        rv = gw_h1_request_head(&out, &hr);
    }
    if (rv == 0) {
        seen_t *sn = calloc(1, sizeof(*sn));
        check(sn != NULL);
        gw_h1_callbacks_t cb = {on_head, NULL, on_complete, NULL};
        gw_h1_limits_t lim = {1 << 20, 4096};
        gw_h1_parser_t *ps = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cb, sn);
        check(ps != NULL);
        ssize_t used = gw_h1_parser_feed(ps, out.base, out.len);
        /* the whole head, one message (a body follows only when one was announced) */
        check(used == (ssize_t)out.len && sn->heads == 1);
        check(gw_slice_eq(sn->msg.method, req.method));
        check(gw_slice_eq(sn->msg.target, req.target));
        if (req.body_len > 0)
            check(sn->msg.content_length == req.body_len);
        else if (req.body_len < 0)
            check(sn->msg.flags & GW_H1_MSG_F_CHUNKED);
        else
            check(sn->msg.content_length == 0 && sn->completes == 1);
        /* Host first, then the translated fields in order, then the framing field */
        check(sn->n >= 1 + req.fields_len && named(sn->f[0].name, "host") &&
              gw_slice_eq(sn->f[0].value, req.host));
        for (size_t i = 0; i < req.fields_len; i++) {
            check(gw_slice_eq_nocase(sn->f[1 + i].name, req.fields[i].name));
            check(gw_slice_eq(sn->f[1 + i].value, gw_slice_trim(req.fields[i].value)));
        }
        int xff = 0, fwd = 0;
        for (size_t i = 0; i < sn->n; i++) {
            gw_slice_t nm = sn->f[i].name;
            /* RFC 9110 §7.6.1: no hop-by-hop field of the client's goes on */
            check(!named(nm, "connection") && !named(nm, "keep-alive") && !named(nm, "te") &&
                  !named(nm, "upgrade") && !named(nm, "proxy-connection"));
            gw_slice_t v = sn->f[i].value;
            if (named(nm, "x-forwarded-for") && r.add_x_forwarded) {
                xff++; /* ours, last; alone unless the peer is a trusted proxy */
                check(v.len >= 9 && !memcmp(v.base + v.len - 9, "192.0.2.7", 9));
                check(trust || v.len == 9);
            }
            if (named(nm, "x-forwarded-host") && r.add_x_forwarded)
                check(trust);
            if (named(nm, "forwarded") && r.add_forwarded) {
                /* our element for this hop ends the value (nothing the client wrote swallows
                 * it), alone unless the peer is a trusted proxy */
                fwd++;
                size_t cap = req.host.len + 64;
                char *ours = malloc(cap);
                check(ours != NULL);
                int k = snprintf(ours, cap, "for=192.0.2.7;proto=%s;host=\"%.*s\"",
                                 s.tls ? "https" : "http", (int)req.host.len,
                                 (const char *)req.host.base);
                check(k > 0 && (size_t)k < cap && v.len >= (size_t)k &&
                      !memcmp(v.base + v.len - k, ours, (size_t)k));
                check(v.len == (size_t)k || (trust && v.len >= (size_t)k + 2 &&
                                             !memcmp(v.base + v.len - k - 2, ", ", 2)));
                free(ours);
            }
        }
        check(xff == r.add_x_forwarded && fwd == r.add_forwarded);
        gw_h1_parser_del(ps);
        free(sn);
    }
    gw_bytes_free(&out);
    if (x.f && x.f != x.fst)
        gw_free(x.f);
    if (x.buf && x.buf != x.bst)
        gw_free(x.buf);
    return 0;
}
