/* front/front.h — one worker's client connections, as the layer that runs them (server/) sees
 * them.
 *
 * A worker thread runs one libuv loop; its front (gw_front_t, embedded in the server's worker)
 * owns that loop and every client connection accepted on it: their timer heap, deferred work,
 * read buffer, HTTP/2 stream pool, access log buffer and metrics. The server decides which
 * configuration generation new connections are accepted under (gw_front_t.cur, a
 * gw_front_gen_t embedded in its per-worker generation), when connections stop
 * (gw_front_stop_conns) and when the worker ends. What the front asks of the process goes
 * through the ops table the server fills in (gw_front_ops_t): no front file calls into
 * server/.
 *
 * Every function here runs on the worker's loop thread unless it says otherwise.
 */
#ifndef GW_FRONT_FRONT_H
#define GW_FRONT_FRONT_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "common/bucket.h"
#include "common/buf.h"
#include "common/list.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/pool.h"
#include "common/theap.h"
#include "config/config.h"
#include "h2/session.h"
#include "proxy/proxy.h"
#include "tls/tls.h"

#define GW_FRONT_READ_BUF (64 * 1024)

typedef struct gw_front gw_front_t;
typedef struct gw_front_gen gw_front_gen_t;

/* How connections stop, the mildest first. */
typedef enum {
    GW_STOP_NONE = 0,
    GW_STOP_DRAIN,    /* a connection of an old generation (reload): finish, then close */
    GW_STOP_GRACEFUL, /* the worker stops: no new requests, in-flight ones finish */
    GW_STOP_NOW,
} gw_stop_t;

/* A listener of one generation as its connections see it: its settings and TLS context. A
 * listening handle's data points to the one it accepts for (gw_front_on_connection). */
typedef struct {
    const gw_cfg_listen_t *cfg;
    gw_tls_ctx_t *tls; /* NULL for cleartext */
} gw_listener_t;

/* What the connections of a worker ask of the process that runs them (server/), filled in with
 * designated initialisers. Every call is made on the worker's loop thread. */
typedef struct {
    /* A connection accepted under g was freed (g->conns and f->conns_alive count it out
     * already): a draining generation, or a stopping worker, with none left may end. */
    void (*conn_freed)(gw_front_t *f, gw_front_gen_t *g);
    /* Lease want bytes of a client's bandwidth (rate bytes/s, burst bytes) from what the
     * instances share; key is the client's address as the shared tables write it. The answer
     * comes later, with token. 0, or a negative code when it cannot be asked (no cluster): the
     * local bucket decides. */
    int (*lease)(gw_front_t *f, const uint8_t *key, size_t klen, uint64_t rate, uint64_t burst,
                 uint64_t want, uint64_t token);
    /* How many instances share a client's bandwidth that this one decides alone now (1: the
     * cluster decides, or there is none); may be NULL (1). */
    unsigned (*local_share)(gw_front_t *f);
    /* The worker went quiet (quiet 1: no connection took up or held work for heap.idle_trim)
     * or has work again after being quiet (0). Called on these transitions only, never per
     * request; may be NULL. */
    void (*quiet)(gw_front_t *f, int quiet);
} gw_front_ops_t;

/* ---- metrics (metrics.c): a worker's counters, keyed by configuration names ---------------- */

#define GW_MNAME 136
#define GW_MCODES 6 /* 1xx 2xx 3xx 4xx 5xx none */

/* The kinds of h2gate_h2_protocol_errors_total: a limit the client broke, or a malformed or
 * refused request (server/scrape.c names them). */
typedef enum {
    GW_MH2_RAPID_RESET = 0,
    GW_MH2_CONTROL_FLOOD,
    GW_MH2_EMPTY_FRAMES,
    GW_MH2_QUEUED_CONTROL,
    GW_MH2_HEADER_LIST,
    GW_MH2_HEADER_BLOCK,
    GW_MH2_SETTINGS_TIMEOUT,
    GW_MH2_MALFORMED_REQUEST,
    GW_MH2_REFUSED_STREAM,
    GW_MH2_KINDS
} gw_mh2_kind_t;

typedef struct {
    char name[GW_MNAME];
    char upstream[GW_MNAME];
    uint64_t req[GW_MCODES];
    uint64_t rate_limited;
    uint64_t auth[GW_ALOG_AUTH_N]; /* basic auth's results (gw_alog_auth_t) */
    gw_hist_t dur;
} gw_mroute_t;

typedef struct {
    char name[GW_MNAME];
    gw_hist_t connect, header, queue;
    uint64_t retries;
    uint64_t queued; /* gauge (snapshots) */
} gw_mup_t;

typedef struct {
    char up[GW_MNAME];
    char server[72];
    uint64_t idle, active;        /* gauges (snapshots) */
    uint64_t opened;              /* snapshots: retired_opened + the live pools' */
    uint64_t retired_opened;      /* dialled by pools of generations since retired */
    uint64_t failures, ejections; /* health, as opened */
    uint64_t retired_failures, retired_ejections; /* of retired generations */
    int up_state; /* snapshots: 1 up, 0 ejected, -1 not in the current generation */
} gw_mserver_t;

typedef struct {
    char listener[64];
    char proto[12];
    uint64_t n;
} gw_mconn_t;

typedef struct {
    /* scalars first: a snapshot copies them in one piece (metrics.c) */
    uint64_t client_in, client_out;
    uint64_t origin_in, origin_out; /* snapshots only: retired + the live pools' */
    uint64_t origin_in_retired, origin_out_retired;
    uint64_t coalesced, throttled_bytes;
    uint64_t streams; /* gauge (snapshots) */
    uint64_t tunnels; /* gauge (snapshots): WebSocket tunnels open */
    uint64_t alog_lost;
    uint64_t push_cancelled; /* pushed streams the clients reset (closed connections) */
    uint64_t h2err[GW_MH2_KINDS];
    uint64_t h2_max_requests;       /* connections retired at h2.max_requests_per_connection */
    uint64_t h2_priority_evictions; /* RFC 7540 tree placeholders evicted (max_priority_nodes) */
    uint64_t tls[3];                /* full, resumed, failed */
    uint64_t client_verify[3];      /* client certificates asked for: success, failed, none */
    uint64_t unrouted[GW_MCODES];
    gw_proxy_zstats_t z;                /* snapshots only: z_retired + the live proxies' */
    gw_proxy_zstats_t z_retired;        /* compression counters of generations since retired */
    gw_proxy_hint_stats_t hint;         /* snapshots only: hint_retired + the live proxies' */
    gw_proxy_hint_stats_t hint_retired; /* early hints counters of retired generations */
    gw_mroute_t *routes;
    size_t nroutes, routes_cap;
    gw_mup_t *ups;
    size_t nups, ups_cap;
    gw_mserver_t *servers;
    size_t nservers, servers_cap;
    gw_mconn_t *conns; /* snapshots: client connections by listener and protocol */
    size_t nconns, conns_cap;
} gw_mset_t;

/* ---- the access log file (accesslog.c) ------------------------------------------------------ */

/* An access log file, opened once and shared by the workers. */
typedef struct gw_alog_file gw_alog_file_t;

/* The access log of the process: the file every worker writes to, held by the server, which
 * switches it on a reload and on SIGUSR1. A worker takes a reference on the current file for
 * one write. */
typedef struct {
    uv_mutex_t lock;
    gw_alog_file_t *file; /* NULL when off (under lock; replaced by the main thread only) */
} gw_front_alog_t;

/* ---- a worker's front ------------------------------------------------------------------------ */

/* One worker's side of a configuration generation, as its connections see it (each connection
 * points to the one it was accepted under). The server embeds it in its own per-worker
 * generation and sets cfg, proxy, clients and route_rates before gw_front_gen_bind. */
struct gw_front_gen {
    const gw_config_t *cfg;     /* the generation's configuration (immutable) */
    gw_proxy_t *proxy;          /* its translator and origin pools on this worker */
    gw_bucket_table_t *clients; /* throttle.per_client_rate buckets, shared by the workers */
    int route_rates;            /* some route has a response_rate */
    gw_front_t *f;
    gw_h2_profile_t *h2prof; /* HTTP/2 options and callbacks of its sessions, on first use */
    size_t conns;            /* connections accepted under it and not freed */
    size_t *mroute, *mup;    /* route / upstream index -> entry of f->m (metrics.c) */
    size_t *msrv, *msrv_off; /* server entries, by upstream offset + server index */
    gw_list_t link;          /* in f->gens from gw_front_gen_bind to gw_front_gen_retire */
};

/* One worker's client connections and what they share. The loop is here because every
 * connection finds its front through its own handle's loop (no pointer per connection). */
struct gw_front {
    uv_loop_t loop;
    unsigned id; /* the worker's number, for logs and request ids */
    const gw_front_ops_t *ops;
    gw_front_alog_t *alog; /* the process's access log file */
    gw_front_gen_t *cur;   /* the generation new connections are accepted under (server's) */
    gw_list_t gens;        /* gw_front_gen_t whose pools are open: counted in snapshots */
    gw_stop_t stop;        /* how the worker stops (server's): new connections stop alike */
    gw_list_t conns;
    size_t conns_len;       /* in conns: not closing */
    size_t conns_alive;     /* accepted and not yet freed (closing ones included) */
    atomic_ullong accepted; /* connections accepted; read by scrapes on another thread */
    atomic_ullong busy;     /* connections holding busy state (buffers, stream lists, conn.c); an
                               idle one gives it back: read by scrapes too */
    uv_idle_t kick;         /* runs deferred connection work (conn.c) on the next iteration */
    /* A connection there is no memory for is accepted into refused and closed at once (conn.c):
     * left unaccepted, libuv would stop polling its listener for good. */
    uv_tcp_t refused;
    int refusing;             /* refused is closing */
    int refuse_waits;         /* a listener holds such a connection until refused has closed */
    gw_log_limit_t nomem_log; /* event=accept_nomem: one line a second */
    /* quiet (front.c): whether a connection had work within heap.idle_trim */
    uv_timer_t quiet_timer; /* armed while watching (not quiet): due at the earliest quiet */
    uint64_t work_ms;       /* loop time a connection last took up or gave back work */
    int quiet;              /* GW_FRONT_Q_* */
    gw_list_t dirty;        /* connections with deferred work */
    /* connection timers (ticker.c): one loop timer for the earliest node of the heap */
    uv_timer_t ticker;
    uint64_t ticker_due;   /* loop time ticker fires at, while active */
    gw_theap_t timers;     /* timeouts and throttle wake-ups of the connections */
    size_t timer_nodes;    /* nodes that may be queued (room reserved in timers) */
    gw_pool_t h2s_pool;    /* h2_stream.c's HTTP/2 client streams */
    gw_rbuf_t *oq_scratch; /* frame bytes of a connection's write round (conn_io.c), or NULL */
    /* the output queue's entries of a write round (conn_io.c), or NULL */
    gw_iovq_ent_t *oq_ents;
    int h2s_pool_ok;
    /* access log (accesslog.c): lines waiting for the next write, flushed at 32 KiB, by the
     * timer within a second, and at exit */
    gw_bytes_t alog_buf;
    uv_timer_t alog_timer;
    atomic_ullong alog_lost;    /* lines that could not be written */
    uint64_t id_seed, id_count; /* request ids made by this worker */
    /* metrics (metrics.c): written by this thread only; copied to snap when a scrape asks */
    gw_mset_t m;
    gw_mset_t snap; /* under snap_lock */
    uv_mutex_t snap_lock;
    uint8_t readbuf[GW_FRONT_READ_BUF]; /* ciphertext/plaintext read buffer, used synchronously */
};

/* Whether a worker is quiet (gw_front_t.quiet). */
enum {
    GW_FRONT_Q_OFF = 0, /* not watched: heap.idle_trim is 0, or the worker stops */
    GW_FRONT_Q_WATCH,   /* quiet_timer armed: work was seen within heap.idle_trim */
    GW_FRONT_Q_QUIET,   /* told ops->quiet(f, 1); the next work tells ops->quiet(f, 0) */
};

/* f's loop and what its connections share, for worker id (the main thread, before the worker's
 * thread starts). ops and alog stay the caller's and outlive f. 0, or GW_E_NOMEM with nothing
 * to free. */
int gw_front_init(gw_front_t *f, unsigned id, const gw_front_ops_t *ops, gw_front_alog_t *alog);
/* Start watching whether f goes quiet (ops->quiet), as its current generation's
 * heap.idle_trim says: called once f->cur is set, before f's loop runs (or on it). */
void gw_front_watch_quiet(gw_front_t *f);
/* Every connection of f is freed: close its handles (kick, ticker, access log timer), so that
 * its loop ends once the caller's handles are closed too. */
void gw_front_close(gw_front_t *f);
/* Free what f holds; its loop has ended (any thread, after the worker's). */
void gw_front_free(gw_front_t *f);

/* The connection callback of a listening handle (uv_listen) on f's loop: its data is the
 * gw_listener_t it accepts for. The connection is accepted under f->cur. */
void gw_front_on_connection(uv_stream_t *listener, int status);

/* Stop the connections of g (every one of f's when NULL) as `how` says: GW_STOP_DRAIN,
 * GRACEFUL (GOAWAY, idle HTTP/1.1 closed after timeouts.drain_grace, busy ones with
 * `Connection: close`) or NOW (closed). With keep_tunnels, those carrying WebSocket tunnels are
 * left alone. Returns how many were left so. */
size_t gw_front_stop_conns(gw_front_t *f, const gw_front_gen_t *g, gw_stop_t how, int keep_tunnels);

/* Bind g (cfg, proxy, clients, route_rates set) to f: its metrics entries found or added by
 * name, and its pools counted in f's snapshots until gw_front_gen_retire. 0, or GW_E_NOMEM
 * (then gw_front_gen_free). */
int gw_front_gen_bind(gw_front_t *f, gw_front_gen_t *g);
/* g's pools are about to close (its connections are gone): their counters carry on in f's
 * entries, and snapshots stop counting them. */
void gw_front_gen_retire(gw_front_gen_t *g);
/* Free what g holds besides its proxy (metrics indexes, HTTP/2 profile). */
void gw_front_gen_free(gw_front_gen_t *g);

/* ---- metrics ----------------------------------------------------------------------------------
 */

/* Copy f's counters into its snapshot, with the gauges of now (connections, streams, pools). */
void gw_front_metrics_snapshot(gw_front_t *f);
/* Add f's last snapshot into t, by name (any thread; under f's snapshot lock). */
void gw_front_metrics_add(gw_front_t *f, gw_mset_t *t);
/* Every series cfg names, added to t at 0 (any thread; a scrape's start). */
void gw_front_mset_seed(gw_mset_t *t, const gw_config_t *cfg);
void gw_front_mset_free(gw_mset_t *m);

/* ---- the access log -----------------------------------------------------------------------------
 */

/* Whether gw_front_alog_switch would open the file at path, found without changing anything
 * (any thread): the file opened for appending as it does (never truncated), and when it is not
 * there, created and removed again (the directory must allow it). 0 or -errno. */
int gw_front_alog_probe(const char *path);
/* a without a file (off); a's file closed once its last writer is done, its lock destroyed. */
void gw_front_alog_init(gw_front_alog_t *a);
void gw_front_alog_free(gw_front_alog_t *a);
/* Make path (NULL: off) a's file (main thread): reopened when force, else kept when unchanged.
 * 0, or a negative code with the current file kept. */
int gw_front_alog_switch(gw_front_alog_t *a, const char *path, int force);
/* SIGUSR1: open a's path again (logrotate moved the file away); 0 when off. */
int gw_front_alog_reopen(gw_front_alog_t *a);
/* Write the lines f holds (at exit, after its loop). */
void gw_front_alog_flush(gw_front_t *f);

#endif
