/* front/front_internal.h — what the files of gateway/front/ share: server, workers,
 * listeners and client connections. */
#ifndef GW_FRONT_INTERNAL_H
#define GW_FRONT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "common/bucket.h"
#include "common/list.h"
#include "common/pool.h"
#include "common/theap.h"
#include "config/config.h"
#include "front/front.h"
#include "front/tls.h"
#include "h1/parser.h"
#include "h2/session.h"
#include "proxy/proxy.h"

#define GW_FRONT_MAX_WORKERS 256
#define GW_FRONT_READ_BUF (64 * 1024)
/* client x route request-rate buckets kept (least recently used forgotten beyond) */
#define GW_FRONT_RATE_TABLE 16384

typedef struct {
    const gw_cfg_listen_t *cfg;
    gw_tls_ctx_t *tls; /* NULL for cleartext */
    int *fds;          /* one bound socket per worker (SO_REUSEPORT), taken by the worker */
} gw_listener_t;

typedef struct gw_worker gw_worker_t;

typedef enum {
    GW_STOP_NONE = 0,
    GW_STOP_GRACEFUL,
    GW_STOP_NOW,
} gw_stop_t;

struct gw_worker {
    gw_server_t *srv;
    unsigned id;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t wake;   /* another thread asked us to stop */
    int wake_open;     /* under srv->lock: wake may still be signalled */
    uv_tcp_t *servers; /* one per listener */
    uv_timer_t drain;  /* graceful shutdown deadline */
    gw_list_t conns;
    size_t conns_len;
    atomic_ullong accepted; /* connections accepted; read by the SIGUSR1 dump on the main thread */
    atomic_ullong busy;     /* connections holding busy state (buffers, stream lists, conn.c); an
                               idle one gives it back: read by the SIGUSR1 dump too */
    gw_proxy_t *proxy;      /* this worker's translator */
    uv_idle_t kick;         /* runs deferred connection work (conn.c) on the next iteration */
    gw_list_t dirty;        /* connections with deferred work */
    gw_stop_t stop;
    int loop_ok;
    /* connection timers (conn.c): one loop timer for the earliest node of the heap */
    uv_timer_t ticker;
    uint64_t ticker_due;     /* loop time ticker fires at, while active */
    gw_theap_t timers;       /* timeouts and throttle wake-ups of the connections */
    size_t timer_nodes;      /* nodes that may be queued (room reserved in timers) */
    gw_h2_profile_t *h2prof; /* HTTP/2 options and callbacks of every session, on first use */
    gw_pool_t h2s_pool;      /* conn.c's HTTP/2 client streams, set up with h2prof */
    uint8_t readbuf[GW_FRONT_READ_BUF]; /* ciphertext/plaintext read buffer, used synchronously */
};

struct gw_server {
    const gw_config_t *cfg;
    gw_listener_t *listeners;
    size_t listeners_len;
    gw_worker_t **workers;
    unsigned workers_len;
    atomic_int stop_request; /* gw_stop_t asked by gw_server_stop */
    uv_loop_t main_loop;
    uv_signal_t sig_int, sig_term, sig_usr1; /* SIGUSR1: log per-worker stats, keep running */
    uv_async_t main_wake;
    int signals_seen;
    atomic_uint workers_done; /* workers whose loop has ended */
    uv_mutex_t lock;          /* guards workers[i]->wake_open */
    /* throttling (issue 7), shared by all workers; NULL when not configured */
    gw_bucket_table_t *clients; /* throttle.per_client_rate buckets, tag 0 */
    gw_bucket_table_t *rates;   /* routes[].request_rate buckets, tag = route index + 1 */
    int route_rates;            /* some route has a response_rate */
};

/* server.c: one `event=rate_tables` line (sizes, evictions, refusals of the shared per-client
 * tables), when = "sigusr1" or "stop"; nothing when no table is configured. */
void gw_front__log_rate_tables(gw_server_t *s, const char *when);

/* conn.c */
void gw_front__on_connection(uv_stream_t *server, int status);
/* Begin a graceful (or immediate) stop of one connection. */
void gw_front__conn_stop(gw_list_t *link, gw_stop_t how);
/* The kick handle's callback: deferred work of the connections in w->dirty. */
void gw_front__on_kick(uv_idle_t *h);

#endif
