/* proxy/redirect.c — answers made in the request stage, before any exchange: a listener's
 * redirect_https, a route's redirect and respond, and the one way every such answer goes out
 * (gw_proxy__answer_early: the route's response rules, no body to HEAD, an HTTP/2 request
 * body still coming reset with NO_ERROR).
 *
 * Open redirects: what the client wrote reaches a Location only through $host (a valid host,
 * gw_tmpl_host_valid, or the answer is 400) and $request_uri / $path, which must be
 * origin-form: a target holding a '\' is refused (400: browsers read it as '/'), and a run of
 * '/' at its start is one '/', so that "//evil.example/x" can never become a scheme-relative
 * reference to another host. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "config/template.h"
#include "proxy/proxy_internal.h"

#define EARLY_FIELDS 48

int gw_proxy__answer_early(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                           unsigned status, const char *ctype, const char *body, size_t len,
                           const gw_field_t *extra, size_t n)
{
    gw_field_t f[EARLY_FIELDS];
    size_t fn = 0;
    /* RFC 9110 §15.3.5, §15.4.5: no content in a 204 or a 304 */
    int no_content = status == 204 || status == 304;
    /* the gateway's own answers (not a route's respond) take the route's error page */
    const gw_proxy_errpage_t *pg =
        ctype || no_content ? NULL : gw_proxy__errpage_find(s->error_pages, status);
    if (pg) {
        ctype = pg->type;
        len = pg->buf->len;
    }
    f[fn++] = (gw_field_t){GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")};
    if (!no_content)
        f[fn++] = (gw_field_t){GW_SLICE_LIT("content-type"),
                               gw_slice_str(ctype ? ctype : "text/plain; charset=utf-8")};
    for (size_t i = 0; i < n && fn < EARLY_FIELDS / 2; i++)
        f[fn++] = extra[i];
    if (r)
        fn = gw_proxy__resp_rules_apply(r, f, fn, EARLY_FIELDS);
    if (no_content)
        len = 0;
    int end = s->head_only || len == 0;
    int rv = s->ops->respond(s, status, f, fn, no_content ? -1 : (int64_t)len, end);
    if (rv >= 0 && !end && pg) {
        rv = s->ops->body(s, pg->buf, 0, len, 1); /* the worker's copy, by reference */
    } else if (rv >= 0 && !end) {
        gw_rbuf_t *b = gw_rbuf_new(len);
        if (!b)
            return GW_E_NOMEM;
        memcpy(b->data, body, len);
        b->len = len;
        rv = s->ops->body(s, b, 0, len, 1);
        gw_rbuf_unref(b); /* the front holds its own reference */
    }
    /* RFC 9113 §8.1: "a server can send a complete response prior to the client sending an
     * entire request ... by sending a RST_STREAM with an error code of NO_ERROR"; left
     * half-closed, the stream would keep the connection out of its idle timeout for ever.
     * HTTP/1.1 reads and drops the body, keeping the connection. */
    if (rv >= 0 && h && !h->end_stream && h->proto != GW_REQ_HTTP1)
        s->ops->reset(s, GW_CS_RESET_NO_ERROR);
    return rv;
}

/* The request target as a Location may carry it (see the top of the file): 0 and *out, or -1
 * when it is not origin-form or holds a '\'. */
static int origin_form(gw_slice_t p, gw_slice_t *out)
{
    if (p.len == 0 || p.base[0] != '/' || memchr(p.base, '\\', p.len))
        return -1;
    while (p.len > 1 && p.base[1] == '/') {
        p.base++;
        p.len--;
    }
    *out = p;
    return 0;
}

static int bad_target(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                      const char *what, const char *why)
{
    GW_LOG_INFO(what, "peer=%s proto=%s authority=%.*s path=%.*s reason=%s status=400", s->peer,
                gw_req_proto_str(h->proto), (int)h->authority.len, h->authority.base,
                (int)h->path.len, h->path.base, why);
    return gw_proxy__answer_early(s, h, r, 400, NULL, "h2gate: cannot redirect this request\n", 37,
                                  NULL, 0);
}

int gw_proxy__redirect_https(gw_cstream_t *s, const gw_req_head_t *h, int *rv)
{
    const gw_cfg_listen_t *l = s->listen;
    if (!l || !l->redirect_https)
        return 0;
    gw_slice_t target, host = h->authority;
    if (!gw_tmpl_host_valid(host)) {
        *rv = bad_target(s, h, NULL, "redirect_https", "host");
        return 1;
    }
    if (origin_form(h->path, &target) < 0) {
        *rv = bad_target(s, h, NULL, "redirect_https", "target");
        return 1;
    }
    /* the host without its port: the https listener's port is the configured one */
    const uint8_t *end = host.base + host.len;
    const uint8_t *c = host.base[0] == '[' ? memchr(host.base, ']', host.len) : host.base;
    const uint8_t *colon = memchr(c, ':', (size_t)(end - c));
    if (colon)
        host.len = (size_t)(colon - host.base);
    char port[8] = "";
    if (l->redirect_https_port != 443)
        snprintf(port, sizeof(port), ":%u", l->redirect_https_port);
    size_t need = 8 + host.len + strlen(port) + target.len + 1;
    char st[2048], *loc = need <= sizeof(st) ? st : gw_malloc(need);
    if (!loc) {
        *rv = GW_E_NOMEM;
        return 1;
    }
    int ll = snprintf(loc, need, "https://%.*s%s%.*s", (int)host.len, host.base, port,
                      (int)target.len, target.base);
    GW_LOG_INFO("redirect_https", "peer=%s proto=%s method=%.*s location=%s status=308", s->peer,
                gw_req_proto_str(h->proto), (int)h->method.len, h->method.base, loc);
    /* RFC 9110 §15.4.9: 308 keeps the method and the content */
    const gw_field_t f[] = {{GW_SLICE_LIT("location"), {(const uint8_t *)loc, (size_t)ll}}};
    *rv = gw_proxy__answer_early(s, h, h->route, 308, NULL, NULL, 0, f, 1);
    if (loc != st)
        gw_free(loc);
    return 1;
}

static int redirect(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r)
{
    gw_slice_t vars[GW_TMPL_VAR_N];
    gw_proxy__tmpl_vars(s, h, h->authority, vars);
    const gw_tmpl_t *t = r->redirect_to;
    if ((t->uses & (1u << GW_TMPL_HOST)) && !vars[GW_TMPL_HOST].len)
        return bad_target(s, h, r, "redirect", "host");
    if ((t->uses & ((1u << GW_TMPL_REQUEST_URI) | (1u << GW_TMPL_PATH))) &&
        (origin_form(vars[GW_TMPL_REQUEST_URI], &vars[GW_TMPL_REQUEST_URI]) < 0 ||
         origin_form(vars[GW_TMPL_PATH], &vars[GW_TMPL_PATH]) < 0))
        return bad_target(s, h, r, "redirect", "target");
    size_t need = gw_tmpl_len(t, vars);
    char st[2048], *loc = need <= sizeof(st) ? st : gw_malloc(need);
    if (!loc)
        return GW_E_NOMEM;
    size_t ll = gw_tmpl_expand(t, vars, loc, need);
    GW_LOG_INFO("redirect",
                "peer=%s proto=%s method=%.*s path=%.*s route=%s location=%.*s status=%u", s->peer,
                gw_req_proto_str(h->proto), (int)h->method.len, h->method.base, (int)h->path.len,
                h->path.base, r->name, (int)ll, loc, r->redirect_status);
    const gw_field_t f[] = {{GW_SLICE_LIT("location"), {(const uint8_t *)loc, ll}}};
    int rv = gw_proxy__answer_early(s, h, r, r->redirect_status, NULL, NULL, 0, f, 1);
    if (loc != st)
        gw_free(loc);
    return rv;
}

int gw_proxy__route_answer(gw_cstream_t *s, const gw_req_head_t *h, const gw_cfg_route_t *r,
                           int *rv)
{
    if (r->redirect_to) {
        *rv = redirect(s, h, r);
        return 1;
    }
    if (!r->respond_status)
        return 0;
    GW_LOG_INFO("respond", "peer=%s proto=%s method=%.*s path=%.*s route=%s status=%u", s->peer,
                gw_req_proto_str(h->proto), (int)h->method.len, h->method.base, (int)h->path.len,
                h->path.base, r->name, r->respond_status);
    /* a content type always: an answer the route was told to give is never an error page */
    *rv = gw_proxy__answer_early(s, h, r, r->respond_status,
                                 r->respond_content_type ? r->respond_content_type
                                                         : "text/plain; charset=utf-8",
                                 r->respond_body, r->respond_body_len, NULL, 0);
    return 1;
}
