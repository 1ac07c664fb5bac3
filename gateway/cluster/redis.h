/* cluster/redis.h — an asynchronous Redis client on one libuv loop (internal to cluster/).
 *
 * hiredis 0.14 does the protocol only (redisFormatCommandArgv writes a command, a redisReader
 * parses replies); this file drives the socket: the name is resolved with uv_getaddrinfo, the
 * connection made with uv_tcp_connect, AUTH and SELECT sent first, commands pipelined, every
 * command given a deadline (a timer), and a lost connection made again with backoff (100 ms
 * doubling to 5 s). Nothing here blocks: hiredis's own connect (synchronous name resolution)
 * and its libuv adapter (no timeouts) are not used.
 *
 * Kept alive (ping_ms set): a connection from which no reply came for ping_ms while nothing
 * was awaited is sent PING; one from which no reply came for ping_ms + timeout while a reply
 * was awaited is silent (its host gone without a reset, the process stopped, a partition),
 * and dropped (on_silent, then on_state down): its pending commands fail with GW_E_IO and it
 * is made again. Such a connection is up only once Redis answered (a PING is sent when there
 * is no AUTH or SELECT): a stopped process's kernel still accepts connections. Without
 * ping_ms, a connection whose oldest unanswered command is 10 timeouts old (at least 1 s) is
 * dropped instead.
 *
 * A command's callback runs exactly once, from the loop: with the reply, or with err
 * GW_E_TIMEOUT (no reply within the timeout: the reply, if it comes, is then read and dropped),
 * GW_E_IO (the connection was lost before the reply) or GW_E_CLOSED (gw_redis_close). While
 * the client is not connected, gw_redis_command refuses at once (GW_E_IO) and calls nothing:
 * the caller falls back to what it decides alone.
 *
 * A reply is bounded: once the reply being read has taken more than max_reply bytes of input
 * (a bulk string announced bigger, a line that does not end, an array of too many elements),
 * the connection is dropped (on_oversized, then on_state down) before hiredis buffers more;
 * an array may announce at most max_reply / 4 elements (each takes 4 bytes at least), so its
 * table of elements is bounded by the same number.
 */
#ifndef GW_CLUSTER_REDIS_H
#define GW_CLUSTER_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct gw_redis gw_redis_t;

/* r: the reply (NULL unless err is 0; an error reply is a reply, type REDIS_REPLY_ERROR);
 * freed after the callback returns. */
typedef void (*gw_redis_cb)(void *ud, const redisReply *r, int err);

typedef struct {
    const char *host; /* name or address (copied) */
    unsigned port;
    const char *password;        /* NULL: no AUTH (copied) */
    unsigned db;                 /* 0: no SELECT */
    uint64_t timeout_ms;         /* per command */
    uint64_t connect_timeout_ms; /* resolve + connect + AUTH/SELECT */
    size_t max_reply; /* bytes of input one reply may take (cluster.max_reply; 0: 16 KiB) */
    /* The connection came up (up = 1) or went down (0, why says how); may be NULL. */
    void (*on_state)(void *ud, int up, const char *why);
    /* A reply passed max_reply (bytes: what it had taken); the connection goes down next. May
     * be NULL. */
    void (*on_oversized)(void *ud, uint64_t bytes);
    /* Keepalive: PING after this long without a reply, drop after this + timeout_ms without
     * one while one is awaited (see above). 0: no keepalive. */
    uint64_t ping_ms;
    /* The connection is dropped as silent (silent_ms: since the last reply); on_state down
     * follows. May be NULL. */
    void (*on_silent)(void *ud, uint64_t silent_ms);
    /* A reply no command waits for: a message of a subscription (SUBSCRIBE's own answer is
     * its command's reply). NULL: such a reply drops the connection. */
    void (*on_push)(void *ud, const redisReply *r);
    void *ud;
} gw_redis_opts_t;

/* A client on loop, connecting at once. 0 or GW_E_NOMEM. */
int gw_redis_new(uv_loop_t *loop, const gw_redis_opts_t *o, gw_redis_t **out);
/* Send a command (argv[0..argc), lengths in argvlen); cb(ud, ...) later. 0, or GW_E_IO when
 * not connected, GW_E_NOMEM. */
int gw_redis_command(gw_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                     gw_redis_cb cb, void *ud);
int gw_redis_up(const gw_redis_t *r);
/* Close: pending callbacks get GW_E_CLOSED now; the memory goes when the handles are closed
 * (the loop must run once more). Never from inside a callback of r. */
void gw_redis_close(gw_redis_t *r);

/* ---- the keepalive, decided (sans-IO: redis.c's timer asks, the unit tests too) ---- */

typedef struct {
    uint64_t ping_ms;      /* 0: no keepalive (nothing is ever due) */
    uint64_t timeout_ms;   /* a command's reply deadline */
    uint64_t heard_ms;     /* when the last reply came, or the connection came up (loop ms) */
    int awaiting;          /* a reply is awaited */
    uint64_t head_sent_ms; /* with awaiting: when the oldest command awaiting one was sent */
} gw_redis_alive_t;

typedef enum {
    GW_REDIS_ALIVE_OK,     /* nothing to do */
    GW_REDIS_ALIVE_PING,   /* idle for ping_ms: send PING */
    GW_REDIS_ALIVE_SILENT, /* no reply for ping_ms + timeout while one is awaited: drop */
} gw_redis_alive_act_t;

/* What the keepalive of a connection that is up does at now (loop ms). A reply awaited is
 * given its whole timeout even when it was sent long after the last reply (a loop turn that
 * came late): silent from max(heard + ping, head sent) + timeout on. */
gw_redis_alive_act_t gw_redis__alive_check(const gw_redis_alive_t *a, uint64_t now);
/* When gw_redis__alive_check next has something other than OK to say (loop ms); 0: never
 * (no keepalive). */
uint64_t gw_redis__alive_due(const gw_redis_alive_t *a);

#endif
