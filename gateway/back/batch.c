/* back/batch.c — read batching of origin responses (SO_RCVLOWAT). */

#include <netdb.h>
#include <sys/socket.h>

#include "back/back_internal.h"

#include "common/err.h"

/* ---- read batching ---------------------------------------------------------------------------
 *
 * A body arrives in many segments, and a reader that sleeps between them wakes for each: the
 * wakeup, the epoll_wait and a short read cost more than the copy. Inside a Content-Length
 * body the socket gets SO_RCVLOWAT = min(rest of the body, read_batch) (socket(7)): Linux's
 * TCP then reports it readable only with that many bytes queued, or on EOF, an error, memory
 * pressure or a nearly closed window (tcp_epollin_ready), so the rest of a body up to
 * read_batch costs one wakeup and full reads. The bytes held back wait at most
 * read_batch_wait: the upstream's timer sets a connection that got no read for that long back
 * to the default for the rest of its response (a slow origin streams as it comes). Plain TCP
 * only: over TLS the ciphertext still to come is not the plaintext left (a record may be
 * half read). */

/* Below this, a batch saves less than the two setsockopt(2) it costs. */
#define BATCH_MIN GW_BACK_READ_BUF

void gw_back__lowat_set(gw_back_conn_t *c, unsigned v)
{
    uv_os_fd_t fd;
    int val = v ? (int)v : 1;
    if (v == c->lowat || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    /* The kernel caps it (half of tcp_rmem[2]) and grows the receive buffer to fit it. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &val, sizeof(val)) == 0)
        c->lowat = v;
}

void gw_back__hold_end(gw_back_conn_t *c)
{
    if (!gw_list_linked(&c->hlink))
        return;
    gw_back_upstream_t *up = c->server->up;
    gw_list_remove(&c->hlink);
    if (gw_list_empty(&up->holds))
        uv_timer_stop(&up->batch_timer);
}

void gw_back__batch_update(gw_back_conn_t *c)
{
    const gw_cfg_upstream_t *u = gw_back__ucfg(c);
    uint64_t want = 0;
    if (!c->tls && u->read_batch && c->state == GW_BACK_CONN_ACTIVE &&
        (c->flags & GW_BACK_CONN_F_READING) &&
        !(c->flags & (GW_BACK_CONN_F_PAUSED | GW_BACK_CONN_F_NOBATCH))) {
        int64_t left = gw_h1_client_body_left(c->h1);
        if (left >= BATCH_MIN)
            want = (uint64_t)left < u->read_batch ? (uint64_t)left : u->read_batch;
    }
    gw_back__lowat_set(c, (unsigned)want);
    if (!c->lowat || !(c->flags & GW_BACK_CONN_F_READING)) {
        gw_back__hold_end(
            c); /* a lowat kept while reading is stopped is set afresh when it starts */
        return;
    }
    gw_back_upstream_t *up = c->server->up;
    c->batch_since = uv_now(c->tcp.loop);
    if (!gw_list_linked(&c->hlink)) {
        if (gw_list_empty(&up->holds))
            uv_timer_start(&up->batch_timer, gw_back__batch_sweep, u->read_batch_wait_ms,
                           u->read_batch_wait_ms);
        gw_list_push_back(&up->holds, &c->hlink);
    }
}

void gw_back__batch_sweep(uv_timer_t *t)
{
    gw_back_upstream_t *up = t->data;
    uint64_t now = uv_now(t->loop), wait = up->cfg->read_batch_wait_ms;
    gw_list_t *n = up->holds.next;
    while (n != &up->holds) {
        gw_back_conn_t *c = GW_CONTAINER_OF(n, gw_back_conn_t, hlink);
        n = n->next;
        if (now - c->batch_since < wait)
            continue;
        c->flags |= GW_BACK_CONN_F_NOBATCH;
        gw_back__lowat_set(c, 0); /* the kernel reports the bytes queued at once */
        gw_back__hold_end(c);
        gw_back__stats(up->back)->batch_expired++;
        c->server->st.batch_expired++;
    }
}
