/* back/pipeline.c — HTTP/1.1 pipelining to an origin: the ring of requests written behind the
 * one being answered.
 *
 * TLS upstreams: after the TCP connect the connection stays CONNECTING (flag HANDSHAKE) while
 * the sans-IO client TLS (back/tls.h) runs its handshake, under the same connect_timeout
 * deadline; a failed handshake or certificate check is a failed connect (GW_E_IO, counted by
 * passive health, retried like a refused connect). Then the plaintext paths are the cleartext
 * ones: c->out and the exchange's body queue hold plaintext, which is encrypted at write time
 * and consumed from its queues only when the ciphertext write completes (so body progress and
 * write marks mean the same as in cleartext); reads decrypt into the free tail of c->in,
 * where the h1 codec parses in place. An idle TLS connection still closes on any application
 * byte or alert, but a post-handshake message (a TLS 1.3 session ticket) keeps it. A retired
 * connection sends close_notify (RFC 8446 §6.1) before it closes; a close-delimited body
 * needs the origin's close_notify to count as complete (read_end).
 */
#include <string.h>

#include <netdb.h>

#include "back/back_internal.h"

#include "common/alloc.h"
#include "common/err.h"

/* ---- pipeline ring -------------------------------------------------------------------------- */

int gw_back__is_head(const gw_back_exch_t *x)
{
    return x->req.method.len == 4 && memcmp(x->req.method.base, "HEAD", 4) == 0;
}

/* The response to x (NULL: a placeholder, its response dropped) is the next one read on c;
 * `flags` are added to the fresh response flags. */
void gw_back__begin_response(gw_back_conn_t *c, gw_back_exch_t *x, int head_only, unsigned flags)
{
    c->exch = x;
    c->flags = (c->flags & ~GW_BACK_RESPONSE_FLAGS) | flags;
    if (!x)
        c->flags |= GW_BACK_CONN_F_DISCARD;
    else if (x->paused)
        c->flags |= GW_BACK_CONN_F_PAUSED;
    if (head_only)
        c->flags |= GW_BACK_CONN_F_HEAD;
    gw_h1_client_start(c->h1, head_only);
    if (x && x->req.upgrade)
        gw_h1_client_expect_upgrade(c->h1);
}

unsigned gw_back__pipe_cap(const gw_back_conn_t *c)
{
    return gw_back__ucfg(c)->pipeline - 1;
}

gw_back_pipe_t *gw_back__pipe_at(gw_back_conn_t *c, unsigned i)
{
    return &c->pipe[(c->pipe_first + i) % gw_back__pipe_cap(c)];
}

/* Requests in flight: the one being answered (or dropped) and those behind it. */
static unsigned inflight(const gw_back_conn_t *c)
{
    return (c->exch || (c->flags & GW_BACK_CONN_F_DISCARD) ? 1u : 0u) + c->pipe_len;
}

/* Entries behind the current response whose exchange is still waiting for it. */
unsigned gw_back__pipe_live(gw_back_conn_t *c)
{
    unsigned n = 0;
    for (unsigned i = 0; i < c->pipe_len; i++)
        n += gw_back__pipe_at(c, i)->x != NULL;
    return n;
}

/* Every exchange waiting behind the current response leaves c unanswered (sent again from the
 * back's deferred work: nothing is called back from here). keep: their entries stay as
 * placeholders, because their requests are on the wire and their responses will come. */
void gw_back__pipe_evacuate(gw_back_conn_t *c, int keep)
{
    unsigned moved = 0;
    for (unsigned i = 0; i < c->pipe_len; i++) {
        gw_back_pipe_t *e = gw_back__pipe_at(c, i);
        if (!e->x)
            continue;
        gw_back_exch_t *x = e->x;
        e->x = NULL;
        x->conn = NULL;
        gw_back__exch_unanswered(x);
        moved++;
    }
    if (!keep)
        c->pipe_first = c->pipe_len = 0;
    else if (moved)
        /* Requests had to leave a long or stalled response: this server's answers are not
         * the quick ones pipelining pays for. Stop sending it pipelined requests for a while
         * rather than have the origin answer the same requests twice, again and again. */
        c->server->pipe_backoff_until = uv_now(gw_back__loop_of(c)) + GW_BACK_PIPE_BACKOFF_MS;
}

/* Whether c takes one more pipelined request now (see the file comment). */
static int pipeline_ok(gw_back_conn_t *c)
{
    const gw_cfg_upstream_t *u = gw_back__ucfg(c);
    gw_back_exch_t *x = c->exch;
    if (c->state != GW_BACK_CONN_ACTIVE || inflight(c) >= u->pipeline ||
        (u->max_requests_per_connection && c->requests >= u->max_requests_per_connection))
        return 0;
    if ((c->flags & (GW_BACK_CONN_F_PERSIST | GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_LONG)) !=
        GW_BACK_CONN_F_PERSIST)
        return 0;
    if (c->server->pipe_backoff_until &&
        uv_now(gw_back__loop_of(c)) < c->server->pipe_backoff_until)
        return 0;
    return !x || GW_BACK_RESENDABLE(&x->req);
}

gw_back_conn_t *gw_back__conn_batch_slot(gw_back_server_t *s)
{
    gw_back_conn_t *h = s->pipe_hint;
    return h && gw_list_linked(&h->flink) && pipeline_ok(h) ? h : NULL;
}

gw_back_conn_t *gw_back__conn_pipe_slot(gw_back_server_t *s)
{
    if (s->up->cfg->pipeline <= 1)
        return NULL;
    gw_back_conn_t *c = gw_back__conn_batch_slot(s);
    if (c)
        return c;
    /* The connection with the fewest requests in flight: the shortest wait. */
    gw_back_conn_t *best = NULL;
    unsigned best_n = UINT32_MAX;
    gw_list_foreach(it, &s->active)
    {
        c = GW_CONTAINER_OF(it, gw_back_conn_t, link);
        if (!pipeline_ok(c))
            continue;
        unsigned n = inflight(c);
        if (n < best_n) {
            best = c;
            best_n = n;
        }
    }
    return best;
}

int gw_back__conn_pipeline(gw_back_conn_t *c, gw_back_exch_t *x)
{
    GW_ASSERT(pipeline_ok(c));
    if (!c->pipe && !(c->pipe = gw_calloc(gw_back__pipe_cap(c), sizeof(*c->pipe))))
        return GW_E_NOMEM;
    if (gw_iovq_copy(&c->out, x->head.base, x->head.len) < 0)
        return GW_E_NOMEM;
    *gw_back__pipe_at(c, c->pipe_len) = (gw_back_pipe_t){x, gw_back__is_head(x)};
    c->pipe_len++;
    c->requests++;
    x->conn = c;
    x->server = c->server;
    gw_back__stats(c->server->up->back)->pipelined++;
    c->server->st.pipelined++;
    gw_back__flush_later(c);
    return 0;
}
