/* cluster/redis.c — the Redis client of cluster/ (see redis.h): hiredis for the protocol, libuv
 * for the socket, a deadline on everything. */
#include "cluster/redis.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_internal.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/list.h"
#include "common/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* Without a keepalive (ping_ms 0): a connection whose oldest unanswered command is this many
 * timeouts old (at least 1 s) is given up and made again: replies are in order, so everything
 * behind it is stuck too. */
#define STALL_TIMEOUTS 10
#define STALL_MIN_MS 1000

typedef enum { RS_DOWN, RS_RESOLVING, RS_CONNECTING, RS_HANDSHAKE, RS_UP, RS_CLOSED } rstate_t;

typedef struct {
    gw_list_t link;
    gw_redis_cb cb; /* NULL: AUTH, SELECT or PING of the handshake */
    void *ud;
    uint64_t sent_ms, deadline_ms;
    int timed_out; /* its callback has run: the reply, when it comes, is dropped */
} pend_t;

/* One TCP connection; it outlives its client's interest in it (uv_close is asynchronous):
 * r is NULL once the client has let it go. */
typedef struct {
    uv_tcp_t tcp;
    uv_connect_t creq;
    gw_redis_t *r;
} rconn_t;

typedef struct {
    uv_write_t req;
    char *cmd;
} wreq_t;

struct gw_redis {
    uv_loop_t *loop;
    rstate_t state;
    char *host, *password;
    char port[8];
    unsigned db;
    uint64_t timeout_ms, connect_timeout_ms, stall_ms;
    uint64_t ping_ms;  /* keepalive (0: none) */
    uint64_t heard_ms; /* the last reply, or the connection up (loop ms) */
    uint64_t due_ms;   /* when the timer fires (while it runs) */
    void (*on_state)(void *ud, int up, const char *why);
    void (*on_silent)(void *ud, uint64_t silent_ms);
    void (*on_oversized)(void *ud, uint64_t bytes);
    void (*on_push)(void *ud, const redisReply *r);
    void *ud;
    uv_timer_t timer; /* connect deadline, the first command's deadline, or the backoff */
    uv_getaddrinfo_t gai;
    int resolving;
    rconn_t *c;
    redisReader *reader;
    redisReplyObjectFunctions fns; /* hiredis's own, but an array's size is checked first */
    void *(*hi_create_array)(const redisReadTask *, int); /* hiredis's own */
    size_t max_reply;                                     /* bytes of input one reply may take */
    uint64_t fed;         /* bytes of this connection fed to the reader */
    uint64_t reply_start; /* where in them the reply being read began */
    int too_many;         /* an array announced more elements than max_reply allows */
    gw_list_t pending;    /* pend_t, in the order sent (replies come in that order) */
    unsigned handshake;   /* AUTH/SELECT/PING replies still awaited */
    uint64_t connect_started_ms, backoff_ms;
    int timer_open;
    char rbuf[16384];
};

static void arm(gw_redis_t *r);
static void start_connect(gw_redis_t *r);

static void maybe_free(gw_redis_t *r)
{
    if (r->state != RS_CLOSED || r->timer_open || r->resolving)
        return;
    if (r->reader)
        redisReaderFree(r->reader);
    gw_free(r->host);
    gw_free(r->password);
    gw_free(r);
}

static void on_conn_closed(uv_handle_t *h)
{
    gw_free(GW_CONTAINER_OF((uv_tcp_t *)h, rconn_t, tcp));
}

/* Every pending command's callback, with err (those that timed out already had theirs). */
static void fail_pending(gw_redis_t *r, int err)
{
    gw_list_t *n;
    while ((n = gw_list_pop_front(&r->pending)) != NULL) {
        pend_t *p = GW_CONTAINER_OF(n, pend_t, link);
        if (p->cb && !p->timed_out)
            p->cb(p->ud, NULL, err);
        gw_free(p);
    }
}

/* Let the connection go (if any), fail what was pending and wait before the next try. */
static void conn_down(gw_redis_t *r, const char *why)
{
    if (r->c) {
        r->c->r = NULL;
        uv_close((uv_handle_t *)&r->c->tcp, on_conn_closed);
        r->c = NULL;
    }
    if (r->reader) {
        redisReaderFree(r->reader);
        r->reader = NULL;
    }
    r->state = RS_DOWN;
    r->handshake = 0;
    GW_LOG_DEBUG("redis_down", "redis=%s:%s reason=\"%s\" retry_ms=%llu", r->host, r->port, why,
                 (unsigned long long)r->backoff_ms);
    fail_pending(r, GW_E_IO);
    if (r->on_state)
        r->on_state(r->ud, 0, why);
    arm(r);
    /* the next wait is longer, up to BACKOFF_MAX_MS; a connection that comes up resets it */
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows as a read error or a timeout */
    wreq_t *w = GW_CONTAINER_OF(req, wreq_t, req);
    redisFreeCommand(w->cmd);
    gw_free(w);
}

/* Queue one formatted command on the connection, expecting a reply. */
static int send_cmd(gw_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                    gw_redis_cb cb, void *ud)
{
    pend_t *p = gw_calloc(1, sizeof(*p));
    wreq_t *w = gw_calloc(1, sizeof(*w));
    char *cmd = NULL;
    int len = p && w ? redisFormatCommandArgv(&cmd, argc, argv, argvlen) : -1;
    if (len < 0) {
        gw_free(p);
        gw_free(w);
        return GW_E_NOMEM;
    }
    w->cmd = cmd;
    uv_buf_t b = uv_buf_init(cmd, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&r->c->tcp, &b, 1, on_written) != 0) {
        redisFreeCommand(cmd);
        gw_free(w);
        gw_free(p);
        return GW_E_IO;
    }
    p->cb = cb;
    p->ud = ud;
    p->sent_ms = uv_now(r->loop);
    p->deadline_ms = p->sent_ms + r->timeout_ms;
    gw_list_push_back(&r->pending, &p->link);
    return 0;
}

static void became_up(gw_redis_t *r)
{
    r->state = RS_UP;
    r->heard_ms = uv_now(r->loop);
    r->backoff_ms = BACKOFF_MIN_MS;
    GW_LOG_DEBUG("redis_up", "redis=%s:%s", r->host, r->port);
    if (r->on_state)
        r->on_state(r->ud, 1, "connected");
    arm(r);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    rconn_t *c = h->data;
    if (!c->r) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(c->r->rbuf, sizeof(c->r->rbuf));
}

/* Bytes of input the reply being read has taken: from where it began to what was fed. */
static uint64_t reply_bytes(const gw_redis_t *r)
{
    return r->fed - r->reply_start;
}

/* The reply in progress is past max_reply: say so and let the connection go. hiredis 0.14
 * keeps a whole bulk string in its buffer before handing it over, and anything that ends with
 * a line keeps growing it until the line ends, so without this one reply announcing 300 MB
 * takes 300 MB (until the stall timer, 10 x cluster.timeout). */
static void oversized(gw_redis_t *r)
{
    uint64_t n = reply_bytes(r);
    GW_LOG_WARN("redis_reply_too_large", "redis=%s:%s bytes=%llu max_reply=%zu%s", r->host, r->port,
                (unsigned long long)n, r->max_reply,
                r->too_many ? " reason=\"array of too many elements\"" : "");
    if (r->on_oversized)
        r->on_oversized(r->ud, n);
    conn_down(r, "reply larger than cluster.max_reply");
}

/* hiredis's createArray, once the count is known to fit: each element takes 4 bytes at least
 * (":0\r\n"), so an array of more than max_reply / 4 cannot be a reply we accept, and its table
 * of element pointers (8 bytes each, allocated at the announcement) is never made. */
static void *create_array(const redisReadTask *t, int elements)
{
    gw_redis_t *r = t->privdata;
    if (elements < 0 || (size_t)elements > r->max_reply / 4) {
        r->too_many = 1;
        return NULL; /* hiredis reports "out of memory": the reply is refused */
    }
    return r->hi_create_array(t, elements);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    rconn_t *c = s->data;
    gw_redis_t *r = c->r;
    if (!r || nread == 0)
        return;
    if (nread < 0) {
        conn_down(r, nread == UV_EOF ? "closed by redis" : uv_strerror((int)nread));
        return;
    }
    if (redisReaderFeed(r->reader, r->rbuf, (size_t)nread) != REDIS_OK) {
        conn_down(r, "protocol error");
        return;
    }
    r->fed += (uint64_t)nread;
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(r->reader, &rep) != REDIS_OK) {
            if (r->too_many)
                oversized(r);
            else
                conn_down(r, "protocol error");
            return;
        }
        if (!rep)
            break;
        /* the next reply begins where hiredis stopped reading: what it holds unread is its */
        r->reply_start = r->fed - (uint64_t)(r->reader->len - r->reader->pos);
        r->heard_ms = uv_now(r->loop); /* alive: a whole reply came (a byte could dribble) */
        gw_list_t *n = gw_list_pop_front(&r->pending);
        if (!n && r->on_push && r->state == RS_UP) { /* a subscription's message */
            r->on_push(r->ud, rep);
            freeReplyObject(rep);
            continue;
        }
        if (!n) { /* a reply nobody asked for */
            freeReplyObject(rep);
            conn_down(r, "unexpected reply");
            return;
        }
        pend_t *p = GW_CONTAINER_OF(n, pend_t, link);
        const redisReply *rr = rep;
        if (!p->cb) { /* AUTH, SELECT or PING */
            char why[160];
            int bad = rr->type == REDIS_REPLY_ERROR;
            if (bad) {
                char text[121];
                gw_cluster__log_text(text, sizeof(text), rr->str, rr->len);
                snprintf(why, sizeof(why), "handshake refused: %s", text);
            }
            freeReplyObject(rep);
            gw_free(p);
            if (bad) {
                GW_LOG_WARN("redis_handshake_failed", "redis=%s:%s reason=\"%s\"", r->host, r->port,
                            why);
                conn_down(r, why);
                return;
            }
            if (--r->handshake == 0)
                became_up(r);
            continue;
        }
        if (!p->timed_out)
            p->cb(p->ud, rr, 0);
        freeReplyObject(rep);
        gw_free(p);
        if (r->state != RS_UP)
            return; /* (not reached: callbacks do not close the client) */
    }
    if (reply_bytes(r) > r->max_reply) {
        oversized(r);
        return;
    }
    arm(r);
}

static void on_connect(uv_connect_t *req, int status)
{
    rconn_t *c = GW_CONTAINER_OF(req, rconn_t, creq);
    gw_redis_t *r = c->r;
    if (!r)
        return; /* given up (timeout or close): the handle is closing */
    if (status < 0) {
        conn_down(r, uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    r->reader = redisReaderCreate();
    if (!r->reader || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_down(r, "out of memory");
        return;
    }
    r->fns = *r->reader->fn;
    r->hi_create_array = r->fns.createArray;
    r->fns.createArray = create_array;
    r->reader->fn = &r->fns;
    r->reader->privdata = r; /* handed to every read task */
    r->fed = r->reply_start = 0;
    r->too_many = 0;
    r->state = RS_HANDSHAKE;
    if (r->password) {
        const char *argv[] = {"AUTH", r->password};
        size_t lens[] = {4, strlen(r->password)};
        if (send_cmd(r, 2, argv, lens, NULL, NULL) < 0) {
            conn_down(r, "cannot send AUTH");
            return;
        }
        r->handshake++;
    }
    if (r->db) {
        char db[16];
        snprintf(db, sizeof(db), "%u", r->db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        if (send_cmd(r, 2, argv, lens, NULL, NULL) < 0) {
            conn_down(r, "cannot send SELECT");
            return;
        }
        r->handshake++;
    }
    if (r->handshake == 0 && r->ping_ms) {
        /* up only once Redis answered: the kernel of a stopped (or hung) Redis still accepts
         * the connection, and AUTH or SELECT would have been its first answer */
        const char *argv[] = {"PING"};
        size_t lens[] = {4};
        if (send_cmd(r, 1, argv, lens, NULL, NULL) < 0) {
            conn_down(r, "cannot send PING");
            return;
        }
        r->handshake++;
    }
    if (r->handshake == 0)
        became_up(r);
}

static void dial(gw_redis_t *r, const struct sockaddr *sa)
{
    rconn_t *c = gw_calloc(1, sizeof(*c));
    if (!c) {
        conn_down(r, "out of memory");
        return;
    }
    uv_tcp_init(r->loop, &c->tcp);
    c->tcp.data = c;
    c->r = r;
    r->c = c;
    r->state = RS_CONNECTING;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, sa, on_connect);
    if (rc < 0)
        conn_down(r, uv_strerror(rc));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    gw_redis_t *r = GW_CONTAINER_OF(req, gw_redis_t, gai);
    r->resolving = 0;
    if (r->state != RS_RESOLVING) { /* timed out or closed meanwhile */
        uv_freeaddrinfo(res);
        maybe_free(r);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        conn_down(r, status < 0 ? uv_strerror(status) : "no address");
        return;
    }
    dial(r, res->ai_addr);
    uv_freeaddrinfo(res);
}

static void start_connect(gw_redis_t *r)
{
    r->connect_started_ms = uv_now(r->loop);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    unsigned port = (unsigned)atoi(r->port);
    if (inet_pton(AF_INET, r->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        dial(r, (struct sockaddr *)&ss);
    } else if (inet_pton(AF_INET6, r->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        dial(r, (struct sockaddr *)&ss);
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        r->state = RS_RESOLVING;
        int rc = uv_getaddrinfo(r->loop, &r->gai, on_resolved, r->host, r->port, &hints);
        if (rc < 0) {
            conn_down(r, uv_strerror(rc));
            return;
        }
        r->resolving = 1;
    }
    if (r->state != RS_DOWN)
        arm(r);
}

/* ---- the keepalive ------------------------------------------------------------------------ */

gw_redis_alive_act_t gw_redis__alive_check(const gw_redis_alive_t *a, uint64_t now)
{
    if (!a->ping_ms)
        return GW_REDIS_ALIVE_OK;
    if (!a->awaiting)
        return now >= a->heard_ms + a->ping_ms ? GW_REDIS_ALIVE_PING : GW_REDIS_ALIVE_OK;
    return now >= gw_redis__alive_due(a) ? GW_REDIS_ALIVE_SILENT : GW_REDIS_ALIVE_OK;
}

uint64_t gw_redis__alive_due(const gw_redis_alive_t *a)
{
    if (!a->ping_ms)
        return 0;
    uint64_t quiet = a->heard_ms + a->ping_ms;
    if (!a->awaiting)
        return quiet;
    /* a command sent after the PING would have been (a late loop turn) gets its whole
     * timeout: the connection is not silent before its reply is overdue */
    return (a->head_sent_ms > quiet ? a->head_sent_ms : quiet) + a->timeout_ms;
}

static gw_redis_alive_t alive_of(const gw_redis_t *r)
{
    gw_redis_alive_t a = {.ping_ms = r->ping_ms,
                          .timeout_ms = r->timeout_ms,
                          .heard_ms = r->heard_ms,
                          .awaiting = !gw_list_empty(&r->pending)};
    if (a.awaiting)
        a.head_sent_ms = GW_CONTAINER_OF(r->pending.next, pend_t, link)->sent_ms;
    return a;
}

/* The keepalive's PING answered (its reply moved heard_ms), timed out or failed: the
 * keepalive's own check decides. */
static void on_keepalive(void *ud, const redisReply *rep, int err)
{
    (void)ud;
    (void)rep;
    (void)err;
}

static void on_timer(uv_timer_t *t)
{
    gw_redis_t *r = t->data;
    uint64_t now = uv_now(r->loop);
    switch (r->state) {
    case RS_DOWN:
        start_connect(r);
        return;
    case RS_RESOLVING:
        uv_cancel((uv_req_t *)&r->gai); /* on_resolved still runs (UV_ECANCELED or late) */
        conn_down(r, "connect timed out (resolving)");
        return;
    case RS_CONNECTING:
    case RS_HANDSHAKE:
        conn_down(r, "connect timed out");
        return;
    case RS_UP: {
        gw_list_t *it = r->pending.next;
        if (r->ping_ms) {
            gw_redis_alive_t a = alive_of(r);
            switch (gw_redis__alive_check(&a, now)) {
            case GW_REDIS_ALIVE_SILENT: {
                uint64_t silent = now - r->heard_ms;
                char why[96];
                snprintf(why, sizeof(why), "no reply for %llu ms (silent)",
                         (unsigned long long)silent);
                if (r->on_silent)
                    r->on_silent(r->ud, silent);
                conn_down(r, why);
                return;
            }
            case GW_REDIS_ALIVE_PING: {
                const char *argv[] = {"PING"};
                size_t lens[] = {4};
                (void)send_cmd(r, 1, argv, lens, on_keepalive, r); /* failed: silent later */
                break;
            }
            case GW_REDIS_ALIVE_OK:
                break;
            }
        } else if (it != &r->pending) {
            pend_t *head = GW_CONTAINER_OF(it, pend_t, link);
            if (now - head->sent_ms >= r->stall_ms) {
                conn_down(r, "no reply (stalled)");
                return;
            }
        }
        /* callbacks may send more (appended behind): the walk stops at the first not due */
        for (it = r->pending.next; it != &r->pending; it = it->next) {
            pend_t *p = GW_CONTAINER_OF(it, pend_t, link);
            if (p->timed_out)
                continue;
            if (p->deadline_ms > now)
                break;
            p->timed_out = 1;
            if (p->cb)
                p->cb(p->ud, NULL, GW_E_TIMEOUT);
        }
        arm(r);
        return;
    }
    case RS_CLOSED:
        return;
    }
}

/* The timer for the state: connect deadline, backoff, or the next command deadline, and the
 * keepalive's next step (or the stall check of a timed-out head). */
static void arm(gw_redis_t *r)
{
    uint64_t now = uv_now(r->loop), at = 0;
    switch (r->state) {
    case RS_DOWN:
        at = now + r->backoff_ms;
        break;
    case RS_RESOLVING:
    case RS_CONNECTING:
    case RS_HANDSHAKE:
        at = r->connect_started_ms + r->connect_timeout_ms;
        break;
    case RS_UP:
        if (r->ping_ms) {
            gw_redis_alive_t a = alive_of(r);
            at = gw_redis__alive_due(&a);
        }
        gw_list_foreach(it, &r->pending)
        {
            pend_t *p = GW_CONTAINER_OF(it, pend_t, link);
            uint64_t d = p->timed_out ? p->sent_ms + r->stall_ms : p->deadline_ms;
            if (p->timed_out && r->ping_ms)
                continue; /* the keepalive decides when a stuck connection goes */
            if (!at || d < at)
                at = d;
            if (!p->timed_out)
                break; /* deadlines grow along the list */
        }
        break;
    case RS_CLOSED:
        return;
    }
    if (!at) {
        uv_timer_stop(&r->timer);
        return;
    }
    r->due_ms = at > now ? at : now;
    uv_timer_start(&r->timer, on_timer, at > now ? at - now : 0, 0);
}

int gw_redis_new(uv_loop_t *loop, const gw_redis_opts_t *o, gw_redis_t **out)
{
    *out = NULL;
    gw_redis_t *r = gw_calloc(1, sizeof(*r));
    if (!r)
        return GW_E_NOMEM;
    r->loop = loop;
    r->host = gw_strdup(o->host);
    r->password = gw_strdup(o->password);
    if (!r->host || (o->password && !r->password)) {
        gw_free(r->host);
        gw_free(r->password);
        gw_free(r);
        return GW_E_NOMEM;
    }
    snprintf(r->port, sizeof(r->port), "%u", o->port);
    r->db = o->db;
    r->timeout_ms = o->timeout_ms ? o->timeout_ms : 20;
    r->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 1000;
    r->stall_ms = r->timeout_ms * STALL_TIMEOUTS;
    if (r->stall_ms < STALL_MIN_MS)
        r->stall_ms = STALL_MIN_MS;
    r->ping_ms = o->ping_ms;
    r->on_state = o->on_state;
    r->on_silent = o->on_silent;
    r->on_oversized = o->on_oversized;
    r->on_push = o->on_push;
    r->max_reply = o->max_reply ? o->max_reply : 16 * 1024;
    r->ud = o->ud;
    r->backoff_ms = BACKOFF_MIN_MS;
    gw_list_init(&r->pending);
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    r->timer_open = 1;
    r->state = RS_DOWN;
    start_connect(r);
    *out = r;
    return 0;
}

int gw_redis_command(gw_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                     gw_redis_cb cb, void *ud)
{
    if (r->state != RS_UP)
        return GW_E_IO;
    int rv = send_cmd(r, argc, argv, argvlen, cb, ud);
    if (rv < 0)
        return rv;
    /* its deadline may come before what the timer waits for: the stall check of a timed-out
     * head, or the keepalive's next step (left alone, the call would wait until then) */
    pend_t *p = GW_CONTAINER_OF(r->pending.prev, pend_t, link);
    if (!uv_is_active((uv_handle_t *)&r->timer) || p->deadline_ms < r->due_ms)
        arm(r);
    return 0;
}

int gw_redis_up(const gw_redis_t *r)
{
    return r->state == RS_UP;
}

static void on_timer_closed(uv_handle_t *h)
{
    gw_redis_t *r = h->data;
    r->timer_open = 0;
    maybe_free(r);
}

void gw_redis_close(gw_redis_t *r)
{
    if (!r || r->state == RS_CLOSED)
        return;
    if (r->state == RS_RESOLVING)
        uv_cancel((uv_req_t *)&r->gai);
    if (r->c) {
        r->c->r = NULL;
        uv_close((uv_handle_t *)&r->c->tcp, on_conn_closed);
        r->c = NULL;
    }
    r->state = RS_CLOSED;
    fail_pending(r, GW_E_CLOSED);
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}
