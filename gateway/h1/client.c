/* h1/client.c — the response side of the client codec: one response per request, parsed by
 * h1/parser.c (GW_H1_RESPONSE) and reported with body offsets into the caller's buffer.
 *
 * The parser does the framing and the strict checks; this file adds what an origin connection
 * needs on top: whether a response is awaited at all, the final status and keep-alive decision
 * kept after the head, and EOF turned into "complete" (close-delimited body) or "cut short". */
#include "h1/client.h"

#include "common/alloc.h"
#include "common/err.h"

struct gw_h1_client {
    gw_h1_parser_t *p;
    gw_h1_client_cbs_t cbs;
    void *user_data;
    const uint8_t *buf; /* buffer of the gw_h1_client_feed() on the stack, for body offsets */
    gw_h1_client_state_t state;
    unsigned status; /* final head */
    int keep_alive;  /* final head */
    int err;         /* first error, once FAILED */
    int upgrade;     /* gw_h1_client_expect_upgrade() for the current request */
};

const char *gw_h1_client_state_str(gw_h1_client_state_t s)
{
    static const char *const n[] = {
        [GW_H1_CLIENT_IDLE] = "idle",     [GW_H1_CLIENT_HEAD] = "head",
        [GW_H1_CLIENT_BODY] = "body",     [GW_H1_CLIENT_DONE] = "done",
        [GW_H1_CLIENT_FAILED] = "failed", [GW_H1_CLIENT_TUNNEL] = "tunnel"};
    return GW_NAME_OF(n, s, "?");
}

/* A user callback's code: remembered, so that feed/eof return it rather than the parser's. */
static int user_rv(gw_h1_client_t *c, int rv)
{
    if (rv < 0 && !c->err)
        c->err = rv;
    return rv;
}

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    gw_h1_client_t *c = ud;
    if (m->status == 101 && c->upgrade) { /* the parser only lets an awaited 101 through */
        c->state = GW_H1_CLIENT_TUNNEL;
        c->status = 101;
        c->keep_alive = 0;
    } else if (m->status >= 200) {
        c->state = GW_H1_CLIENT_BODY;
        c->status = m->status;
        c->keep_alive = !!(m->flags & GW_H1_MSG_F_KEEP_ALIVE);
    }
    return c->cbs.on_head ? user_rv(c, c->cbs.on_head(c->user_data, m)) : 0;
}

static int on_body(void *ud, const uint8_t *p, size_t len)
{
    gw_h1_client_t *c = ud;
    GW_ASSERT(c->buf != NULL && p >= c->buf);
    return c->cbs.on_body ? user_rv(c, c->cbs.on_body(c->user_data, (size_t)(p - c->buf), len)) : 0;
}

static int on_trailers(void *ud, const gw_h1_field_t *f, size_t n)
{
    gw_h1_client_t *c = ud;
    return c->cbs.on_trailers ? user_rv(c, c->cbs.on_trailers(c->user_data, f, n)) : 0;
}

static int on_complete(void *ud)
{
    gw_h1_client_t *c = ud;
    if (c->state == GW_H1_CLIENT_TUNNEL)
        return 0; /* the 101's head ended: the tunnel ends at the origin's close */
    c->state = GW_H1_CLIENT_DONE;
    return c->cbs.on_complete ? user_rv(c, c->cbs.on_complete(c->user_data)) : 0;
}

static const gw_h1_callbacks_t parser_cbs = {on_head, on_body, on_complete, on_trailers};

gw_h1_client_t *gw_h1_client_new(const gw_h1_limits_t *limits, const gw_h1_client_cbs_t *cbs,
                                 void *user_data)
{
    gw_h1_limits_t dl = {0, 0}; /* the parser's defaults */
    gw_h1_client_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->p = gw_h1_parser_new(GW_H1_RESPONSE, limits ? limits : &dl, &parser_cbs, c);
    if (!c->p) {
        gw_free(c);
        return NULL;
    }
    gw_h1_parser_lend_head(c->p); /* head slices are valid during on_head (client.h) */
    if (cbs)
        c->cbs = *cbs;
    c->user_data = user_data;
    c->state = GW_H1_CLIENT_IDLE;
    return c;
}

void gw_h1_client_del(gw_h1_client_t *c)
{
    if (!c)
        return;
    gw_h1_parser_del(c->p);
    gw_free(c);
}

void gw_h1_client_start(gw_h1_client_t *c, int head_only)
{
    GW_ASSERT(c->state == GW_H1_CLIENT_IDLE || c->state == GW_H1_CLIENT_DONE);
    gw_h1_parser_resume(c->p); /* after a previous response: drops its head */
    gw_h1_parser_set_head_response(c->p, head_only);
    c->state = GW_H1_CLIENT_HEAD;
    c->status = 0;
    c->keep_alive = 0;
    c->upgrade = 0;
}

void gw_h1_client_expect_upgrade(gw_h1_client_t *c)
{
    GW_ASSERT(c->state == GW_H1_CLIENT_HEAD);
    c->upgrade = 1;
    gw_h1_parser_set_upgrade(c->p, 1);
}

/* Tunnel bytes: passed on as they are. */
static ssize_t tunnel_bytes(gw_h1_client_t *c, size_t off, size_t len)
{
    if (len && c->cbs.on_body) {
        int rv = user_rv(c, c->cbs.on_body(c->user_data, off, len));
        if (rv < 0) {
            c->state = GW_H1_CLIENT_FAILED;
            return rv;
        }
    }
    return (ssize_t)len;
}

static int failed(gw_h1_client_t *c, int code)
{
    c->state = GW_H1_CLIENT_FAILED;
    if (!c->err)
        c->err = code;
    return c->err;
}

/* Inside a response: the parser has a say. Outside (IDLE, DONE, FAILED) feed and eof answer
 * from the state alone. */
static int in_response(const gw_h1_client_t *c)
{
    return c->state == GW_H1_CLIENT_HEAD || c->state == GW_H1_CLIENT_BODY;
}

ssize_t gw_h1_client_feed(gw_h1_client_t *c, const uint8_t *buf, size_t off, size_t len)
{
    if (c->state == GW_H1_CLIENT_IDLE && len)
        return failed(c, GW_E_PARSE); /* a response nobody asked for */
    if (c->state == GW_H1_CLIENT_TUNNEL)
        return tunnel_bytes(c, off, len);
    if (!in_response(c))
        return c->state == GW_H1_CLIENT_FAILED ? c->err : 0;
    c->buf = buf;
    ssize_t n = gw_h1_parser_feed(c->p, buf + off, len);
    c->buf = NULL;
    if (n < 0)
        return failed(c, (int)n);
    if (c->state == GW_H1_CLIENT_TUNNEL) { /* the 101 ended in this buffer: the rest is ours */
        ssize_t t = tunnel_bytes(c, off + (size_t)n, len - (size_t)n);
        return t < 0 ? t : (ssize_t)len;
    }
    return n;
}

int gw_h1_client_eof(gw_h1_client_t *c)
{
    if (c->state == GW_H1_CLIENT_TUNNEL) {
        c->state = GW_H1_CLIENT_DONE;
        return c->cbs.on_complete ? user_rv(c, c->cbs.on_complete(c->user_data)) : 0;
    }
    if (!in_response(c))
        return c->state == GW_H1_CLIENT_FAILED ? c->err : 0;
    /* RFC 9112 §6.3 rule 8: a body without framing ends at the close (the parser completes
     * it); anything else is a response cut short (§8). */
    int rc = gw_h1_parser_eof(c->p);
    if (c->err)
        return failed(c, c->err);
    if (rc == 0 && c->state == GW_H1_CLIENT_DONE) {
        c->keep_alive = 0;
        return 0;
    }
    return failed(c, GW_E_IO);
}

gw_h1_client_state_t gw_h1_client_state(const gw_h1_client_t *c)
{
    return c->state;
}

unsigned gw_h1_client_status(const gw_h1_client_t *c)
{
    return c->status;
}

int64_t gw_h1_client_body_left(const gw_h1_client_t *c)
{
    return c->state == GW_H1_CLIENT_BODY ? gw_h1_parser_body_left(c->p) : -1;
}

int gw_h1_client_keep_alive(const gw_h1_client_t *c)
{
    return c->keep_alive;
}
