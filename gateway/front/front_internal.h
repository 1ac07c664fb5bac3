/* front/front_internal.h — what the files of gateway/front/ share (not a public interface).
 *
 * server.c:    gw_server_t and its workers: one libuv loop per worker thread, signals,
 *              graceful stop.
 * ticker.c:    the worker's timer heap: one loop timer for every connection's timeout and
 *              throttle wake-up.
 * generation.c: configuration generations: listeners' sockets (the probe that refuses an
 *              address another process listens on), TLS contexts, shared rate tables; a
 *              worker taking the current one and draining the old; reload.
 * check.c:     what a configuration needs besides sockets, checked by start-up's code: CA
 *              files, the access log, the pid file's directory, certificates (h2gate -t).
 * upgrade.c:   binary upgrade (SIGUSR2: inherited sockets, the admin socket too, readiness
 *              pipe), the pid file (refused while it names another running gateway).
 * accesslog.c: access log records, the per-worker buffer, the shared file (SIGUSR1 reopen).
 * metrics.c:   per-worker counters by configuration name, snapshots, Prometheus rendering.
 * notify.c:    systemd readiness datagrams.
 * conn.c:      one client connection: accept, read, TLS, the protocol choice (ALPN, or the
 *              HTTP/2 preface against an HTTP/1.1 request line), write, close, timeouts,
 *              deferred work (the kick handle), idle connections giving back their buffers.
 * h1_stream.c: the HTTP/1.1 front: one request at a time as a client stream (proxy/stream.h),
 *              responses serialized back (chunked, 1xx, trailers); the exchange's state
 *              (h1x_state_t) and its transitions.
 * h2_stream.c: HTTP/2 connections: the h2/ session, its streams as client streams, the pump
 *              that frames what the session has.
 * throttle.c:  response buckets (connection, client address, route), the request body bucket,
 *              and the HTTP/2 data budget and window credit that follow them.
 *
 * TLS (contexts, handshakes, records) is its own layer: gateway/tls/ (tls/tls.h).
 */
#ifndef GW_FRONT_INTERNAL_H
#define GW_FRONT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "common/bucket.h"
#include "common/list.h"
#include "common/metrics.h"
#include "common/pool.h"
#include "common/theap.h"
#include "config/config.h"
#include "server/server.h"
#include "tls/tls.h"
#include "h1/parser.h"
#include "h2/session.h"
#include "proxy/proxy.h"

#define GW_FRONT_MAX_WORKERS 256
#define GW_FRONT_READ_BUF (64 * 1024)
/* client x route request-rate buckets kept (least recently used forgotten beyond) */
#define GW_FRONT_RATE_TABLE 16384

/* A bound address: one SO_REUSEPORT socket per worker. It outlives the generations that list
 * it, so a reload never closes a listener present before and after (the kernel queue stays).
 * A binary upgrade to fewer workers inherits more sockets than it has workers: it keeps them
 * all (closing one would reset the connections waiting in its queue), and worker w listens on
 * the sockets k with k % workers_len == w. */
typedef struct {
    gw_cfg_addr_t addr;
    unsigned n; /* sockets: workers_len, or more when inherited so (immutable) */
    int *fds;   /* n of them, -1 once a worker's handle owns it (under srv->lock) */
    int *live;  /* n: the fd a handle listens on, -1 when none (under lock) */
} gw_lsock_t;

/* A listening socket inherited from the process that started us (upgrade.c). */
typedef struct {
    char addr[64];
    int fd; /* -1 once taken */
} gw_inherited_t;

/* A binary upgrade under way (upgrade.c): the new process and its readiness pipe. */
typedef struct gw_upgrade {
    gw_server_t *srv;
    int child; /* pid */
    uv_pipe_t pipe;
    uv_timer_t timer;
    char buf[32];
    size_t len;
    int handles;
} gw_upgrade_t;

/* A listener of one generation: its settings and TLS context on a shared socket. */
typedef struct {
    const gw_cfg_listen_t *cfg;
    gw_tls_ctx_t *tls; /* NULL for cleartext */
    size_t sock;       /* index into srv->socks */
} gw_listener_t;

/* Shared per-client bucket table (throttle), kept across generations whose settings agree. */
typedef struct {
    atomic_uint refs;
    gw_bucket_table_t *t;
    size_t cap;
    unsigned ipv6_prefix;
} gw_shared_table_t;

/* A configuration generation: immutable once published. The server holds a reference while
 * it is current, each worker one while it serves connections accepted under it; the last
 * reference frees the configuration, the TLS contexts and the tables. */
typedef struct {
    atomic_uint refs;
    unsigned long long id; /* 1 at start, +1 per successful reload */
    gw_config_t *cfg;      /* owned */
    gw_listener_t *listeners;
    size_t listeners_len;
    gw_shared_table_t *clients; /* throttle.per_client_rate buckets, tag 0; NULL when off */
    gw_shared_table_t *rates;   /* routes[].request_rate buckets, tag = route index + 1 */
    int route_rates;            /* some route has a response_rate */
} gw_gen_t;

typedef struct gw_worker gw_worker_t;
typedef struct gw_wgen gw_wgen_t;

/* What the connections of a worker ask of the process that runs them (server/), filled in with
 * designated initialisers. Every call is made on the worker's loop thread. */
typedef struct {
    /* A connection accepted under g was freed (g->conns and w->conns_alive count it out
     * already): a draining generation, or a stopping worker, with none left may end. */
    void (*conn_freed)(gw_worker_t *w, gw_wgen_t *g);
    /* Lease want bytes of a client's bandwidth (rate bytes/s, burst bytes) from what the
     * instances share; key is the client's address as the shared tables write it. The answer
     * comes later, with token. 0, or a negative code when it cannot be asked (no cluster): the
     * local bucket decides. */
    int (*lease)(gw_worker_t *w, const uint8_t *key, size_t klen, uint64_t rate, uint64_t burst,
                 uint64_t want, uint64_t token);
} gw_front_ops_t;

/* ---- metrics (metrics.c): a worker's counters, keyed by configuration names ---------------- */

#define GW_MNAME 136
#define GW_MCODES 6 /* 1xx 2xx 3xx 4xx 5xx none */

/* The kinds of h2gate_h2_protocol_errors_total: a limit the client broke, or a malformed or
 * refused request (metrics.c names them). */
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
    gw_hist_t dur;
} gw_mroute_t;

typedef struct {
    char name[GW_MNAME];
    gw_hist_t connect, header;
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

/* An access log file, opened once and shared by the workers (accesslog.c). */
typedef struct gw_alog_file gw_alog_file_t;

/* The access log of the process: the file every worker writes to, held by the server, which
 * switches it on a reload and on SIGUSR1 (accesslog.c). A worker takes a reference on the
 * current file for one write. */
typedef struct {
    uv_mutex_t lock;
    gw_alog_file_t *file; /* NULL when off (under lock; replaced by the main thread only) */
} gw_front_alog_t;

/* One worker's side of a generation: the translator and origin pools built from it, and its
 * connections. An old one drains (its connections are told to stop), then is retired: its
 * proxy closes, and it is freed once the proxy's handles and the drain timer are closed. */
struct gw_wgen {
    gw_gen_t *gen;
    gw_worker_t *w;
    gw_proxy_t *proxy;
    gw_h2_profile_t *h2prof; /* HTTP/2 options and callbacks of its sessions, on first use */
    size_t conns;            /* connections of this worker accepted under it */
    uv_timer_t drain;        /* drain deadline, once it is old */
    gw_list_t link;          /* in w->old while draining */
    size_t *mroute, *mup;    /* route / upstream index -> entry of w->m (metrics.c) */
    size_t *msrv, *msrv_off; /* server entries, by upstream offset + server index */
    int pending;             /* handles still closing after retirement */
    int draining;            /* in w->old */
    int forced;              /* over limits.draining_generations: its connections closed */
    int tunnel_phase;        /* past graceful_shutdown: only tunnels left, until tunnel_drain */
};

/* A worker's listening handle on one socket, pointing at the current generation's listener. */
typedef struct {
    uv_tcp_t tcp;
    gw_worker_t *w;
    size_t sock;   /* index into srv->socks */
    unsigned slot; /* which of that address's sockets (gw_lsock_t.fds) */
    gw_listener_t *l;
    gw_list_t link; /* in w->handles */
    int seen;       /* scratch: listed by the generation being installed */
} gw_whandle_t;

typedef enum {
    GW_STOP_NONE = 0,
    GW_STOP_DRAIN,    /* a connection of an old generation (reload): finish, then close */
    GW_STOP_GRACEFUL, /* the worker stops: no new requests, in-flight ones finish */
    GW_STOP_NOW,
} gw_stop_t;

struct gw_worker {
    gw_server_t *srv;
    const gw_front_ops_t *ops; /* the process's side of its connections */
    unsigned id;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t wake;       /* another thread asked us to stop or to take a new generation */
    int wake_open;         /* under srv->lock: wake may still be signalled */
    gw_list_t handles;     /* gw_whandle_t: one per listening socket of the current generation */
    uv_timer_t drain;      /* graceful shutdown deadline */
    unsigned tunnels_open; /* origin tunnels of all its generations' proxies (max_tunnels) */
    uint64_t zmem_charged; /* compression memory charged by all its generations' proxies */
    int tunnel_phase; /* a drain (binary upgrade) past its deadline: tunnels until tunnel_drain */
    gw_list_t conns;
    size_t conns_len;       /* in conns: not closing */
    size_t conns_alive;     /* accepted and not yet freed (closing ones included) */
    atomic_ullong accepted; /* connections accepted; read by the SIGUSR1 dump on the main thread */
    atomic_ullong busy;     /* connections holding busy state (buffers, stream lists, conn.c); an
                               idle one gives it back: read by the SIGUSR1 dump too */
    gw_wgen_t *cur;         /* the generation new connections are accepted under */
    gw_list_t old;          /* gw_wgen_t draining, oldest first */
    uv_idle_t kick;         /* runs deferred connection work (conn.c) on the next iteration */
    gw_list_t dirty;        /* connections with deferred work */
    gw_stop_t stop;
    int loop_ok;
    /* connection timers (conn.c): one loop timer for the earliest node of the heap */
    uv_timer_t ticker;
    uint64_t ticker_due;     /* loop time ticker fires at, while active */
    gw_theap_t timers;       /* timeouts and throttle wake-ups of the connections */
    size_t timer_nodes;      /* nodes that may be queued (room reserved in timers) */
    gw_pool_t h2s_pool;      /* conn.c's HTTP/2 client streams */
    gw_cluster_sink_t *sink; /* the cluster's answers to this worker's rate questions */
    uint64_t rate_token;     /* the last question's token */
    int h2s_pool_ok;
    /* access log (accesslog.c): lines waiting for the next write, flushed at 32 KiB, by the
     * timer within a second, and at exit */
    gw_front_alog_t *alog; /* the process's access log file */
    gw_bytes_t alog_buf;
    uv_timer_t alog_timer;
    atomic_ullong alog_lost; /* lines that could not be written */
    /* metrics (metrics.c): written by this thread only; copied to snap when a scrape asks */
    gw_mset_t m;
    gw_mset_t snap; /* under snap_lock */
    uv_mutex_t snap_lock;
    int snap_ok;                        /* snap_lock initialised */
    uv_async_t scrape;                  /* a scrape asks for a snapshot (closed with wake) */
    uint64_t snap_done;                 /* under srv->snap_mu: the last ticket answered */
    uint64_t id_seed, id_count;         /* request ids made by this worker */
    uint8_t readbuf[GW_FRONT_READ_BUF]; /* ciphertext/plaintext read buffer, used synchronously */
};

struct gw_server {
    gw_gen_t *gen; /* current generation (written by the main thread under lock) */
    gw_lsock_t **socks;
    size_t socks_len;
    gw_worker_t **workers;
    unsigned workers_len;
    atomic_int stop_request; /* gw_stop_t asked by gw_server_stop */
    uv_loop_t main_loop;
    uv_signal_t sig_int, sig_term, sig_quit, sig_usr1, sig_hup, sig_usr2;
    uv_async_t main_wake;
    int signals_seen;
    atomic_uint workers_done; /* workers whose loop has ended */
    uv_mutex_t lock;          /* guards workers[i]->wake_open, gen, socks[i]->fds */
    atomic_ullong reloads_ok; /* successful reloads */
    atomic_ullong reloads_failed;
    gw_front_alog_t alog; /* the access log file the workers write to */
    atomic_int ready;     /* every worker runs and none is stopping (/readyz) */
    atomic_ullong gen_id; /* the current generation's id (metrics) */
    uv_mutex_t snap_mu;   /* scrapes: tickets and the workers' answers */
    uv_cond_t snap_cond;
    uint64_t snap_ticket;
    /* binary upgrade (upgrade.c) */
    char *exe;           /* the binary we were started from (/proc/self/exe at start) */
    char **argv;         /* our arguments, for the new process */
    gw_inherited_t *inh; /* sockets inherited at start, until the first generation took them */
    size_t inh_len;
    int inh_admin;      /* the admin socket inherited at start, until the admin takes it, or -1 */
    int admin_passed;   /* started by an upgrade that passed its admin socket (or said none) */
    int upgrade_parent; /* started by a binary upgrade: the old process's pid; else 0 */
    int admin_fd;       /* the admin listener's socket (passed on by an upgrade), or -1 */
    gw_upgrade_t *upgrade; /* an upgrade under way (main thread) */
    /* cluster (issue 27): the ticket keys every TLS listener uses while it holds some, kept
     * equal to Redis's by the cluster client on the main loop (NULL: no cluster:) */
    gw_tls_keyring_t *keyring;
    gw_cluster_t *cluster; /* replaced under lock (scrapes read its counters) */
    gw_cluster_hub_t *hub; /* the workers' rate questions to the cluster (main loop) */
};

/* server.c: a proxy's question to the cluster (gw_proxy_rate_asker_t.ask; ud: the worker). */
uint64_t gw_front__rate_ask(void *ud, const uint8_t *key, size_t klen, uint64_t rate,
                            uint64_t burst, int wait);

/* server.c: start, keep or stop the cluster client for the current configuration (main
 * thread, main loop running). */
void gw_front__cluster_apply(gw_server_t *s);

/* The configuration of the connection's generation. */
#define CFG(c) ((c)->g->gen->cfg)
/* The translator of the connection's generation on its worker. */
#define PROXY(c) ((c)->g->proxy)

/* server.c: one `event=rate_tables` line (sizes, evictions, refusals of the shared per-client
 * tables), when = "sigusr1" or "stop"; nothing when no table is configured. */
void gw_front__log_rate_tables(gw_server_t *s, const char *when);

/* conn.c */
void gw_front__on_connection(uv_stream_t *server, int status);
/* Begin a graceful (or immediate) stop of one connection. */
void gw_front__conn_stop(gw_list_t *link, gw_stop_t how);
/* The kick handle's callback: deferred work of the connections in w->dirty. */
void gw_front__on_kick(uv_idle_t *h);

/* ---- client connections (conn.c, h1_stream.c, h2_stream.c, throttle.c) ---------------- */

/* an HTTP/2 connection idle this long gives back its busy state even without a read */
#define H2_IDLE_RELEASE_MS 1000

typedef enum {
    CS_HANDSHAKE = 0, /* TLS handshake in progress */
    CS_SNIFF,         /* waiting for the first bytes that choose the protocol */
    CS_H1,            /* HTTP/1.1 front */
    CS_H2,            /* HTTP/2 session */
    CS_CLOSING,       /* flushing the last bytes, then close */
    CS_PROXY,         /* a proxy_protocol listener: waiting for the PROXY header */
} conn_state_t;

/* GW_CONN_F_*: why a connection is paused or what it waits for. */
enum {
    GW_CONN_F_READ_PAUSED = 1u << 0, /* reads stopped: write queue over limits.write_buffer */
    GW_CONN_F_CLOSE_AFTER = 1u << 1, /* close once the write queue drains */
    GW_CONN_F_EOF = 1u << 2,         /* the peer closed its side */
    GW_CONN_F_CLOSED = 1u << 3,      /* uv_close called */
    GW_CONN_F_STOPPING = 1u << 4,    /* graceful stop: no new requests after the current one */
    GW_CONN_F_THR_OUT = 1u << 5,     /* response bytes wait for tokens (throttle timer armed) */
    GW_CONN_F_THR_IN = 1u << 6,      /* reads stopped / window credit held: upload rate */
    GW_CONN_F_DRAIN = 1u << 7,       /* HTTP/2 of an old generation: GOAWAY once quiet */
    GW_CONN_F_TLS_BYE = 1u << 8,     /* closing: TLS close_notify queued after the last byte */
};

typedef struct conn conn_t;

/* Timer nodes in the worker's heap (gw_theap_node_t.kind). */
enum { TK_CONN = 0, TK_THR = 1 };

/* Where the current HTTP/1.1 exchange is (h1_stream.c). The request and the response move on
 * independently (a response may end before the request body does: an early response), so the
 * states of an exchange known to the proxy are the pairs of request (body arriving, complete)
 * and response (no head yet, head written, handed over whole). Set by the transitions of
 * h1_stream.c only; logged with gw_front__h1x_state_str. */
typedef enum {
    H1X_IDLE = 0,  /* no exchange yet: nothing answered on this connection */
    H1X_RECV,      /* known to the proxy; request body arriving; no response head */
    H1X_RECV_RESP, /* request body arriving; response head written, body under way */
    H1X_RECV_DONE, /* request body arriving; response handed over whole (early response) */
    H1X_WAIT,      /* request complete; no response head yet */
    H1X_SENDING,   /* request complete; response head written, body under way */
    H1X_DONE,      /* request complete, response whole: closed to the proxy when processed */
    H1X_ENDED,     /* closed to the proxy; a response was written; waiting for the next head */
} h1x_state_t;

/* HTTP/1.1 front state, from the protocol choice to the close (only HTTP/1.1 connections). */
typedef struct {
    gw_h1_parser_t *p;
    gw_cstream_t s;     /* the current request's client stream, handed to the proxy */
    gw_field_t *fields; /* the request's fields in the common form */
    size_t fields_cap;
    uint64_t inflight; /* request body bytes given to the proxy and not credited yet */
    gw_bucket_t *rb;   /* route bucket of the current request (throttle), or NULL */
    gw_alog_t log;     /* the current request's record (accesslog.c) */
    uint32_t thr_mark; /* c->thr->waits when it began */
    uint8_t state;     /* h1x_state_t */
    /* how the current request is answered (set from its head, keep_alive also by the response) */
    unsigned keep_alive : 1;
    unsigned expect_100 : 1;   /* answered without 100 Continue: close after the response */
    unsigned resp_chunked : 1; /* response body framed as chunks */
    unsigned http10 : 1;       /* the current request is HTTP/1.0: no 1xx, no chunked */
    unsigned ws : 1;           /* it asks for a WebSocket: its answer decides (101: tunnel) */
    unsigned tunnel : 1;       /* the 101 went out: the connection is a byte tunnel */
    unsigned tunnel_eof : 1;   /* the client's end of the tunnel was passed on */
    uint8_t urgency;           /* RFC 9218 urgency of its priority field (ops->urgency) */
} h1x_t;

/* The exchange is known to the proxy (s is a live client stream). */
static inline int h1x_active(const h1x_t *h)
{
    return h->state >= H1X_RECV && h->state <= H1X_DONE;
}

/* The exchange is known to the proxy and its response is not handed over whole yet. */
static inline int h1x_resp_owed(const h1x_t *h)
{
    return h1x_active(h) && h->state != H1X_RECV_DONE && h->state != H1X_DONE;
}

/* Throttling (issue 7): allocated at accept only when the gateway configures a throttle. */
typedef struct {
    gw_theap_node_t tnode; /* wake-up when tokens are back (TK_THR) */
    conn_t *c;
    int out;                   /* some response limit may apply to this connection */
    gw_bucket_t resp_b;        /* throttle.response_rate */
    gw_bucket_t body_b;        /* throttle.request_body_rate */
    gw_bucket_entry_t *client; /* throttle.per_client_rate, shared by all workers */
    gw_bucket_t *route_b;      /* per route (routes[].response_rate), allocated on first use */
    size_t h2_given;           /* connection data budget handed to the session */
    uint32_t waits;            /* times bytes waited for tokens (the access log's throttled) */
} thr_t;

/* What a connection needs only while bytes or requests are in flight. An idle connection
 * gives it back (release_idle_buffers) and gets a fresh one with its next read or frame, so
 * thousands of idle connections cost little more than their socket and protocol state. */
typedef struct {
    gw_bytes_t in;         /* plaintext not consumed yet */
    gw_bytes_t out;        /* plaintext response bytes being built */
    gw_iovq_t oq;          /* frames from the HTTP/2 session */
    gw_list_t h2_streams;  /* h2s_t of the streams the proxy knows, freed with the conn */
    gw_list_t h2_gone;     /* h2s_t closed by the session, told to the proxy when kicked */
    gw_list_t h2_pushes;   /* h2s_t of promised pushes, handed to the proxy when kicked */
    unsigned h2_rst_after; /* streams with rst_after set */
    char peer[64];         /* "ip:port", "[ip6]:port" (client streams point here) */
    char peer_ip[48];
} busy_t;

/* One client connection. Kept small: it is what an idle connection costs (with the HTTP/2
 * session and, over TLS, OpenSSL's state); everything else hangs off it while needed. */
struct conn {
    uv_tcp_t tcp;
    gw_theap_node_t tnode; /* the connection's timeout in the worker's heap (TK_CONN) */
    uint64_t deadline;     /* loop time the current timeout is due (the node may be earlier) */
    gw_listener_t *l;
    gw_list_t link;
    gw_list_t dirty_link; /* in w->dirty while deferred work is due */
    uint8_t state;        /* conn_state_t */
    uint8_t dirty;
    uint16_t flags;
    unsigned requests;
    unsigned tunnels; /* WebSocket tunnels it carries (a drain waits timeouts.tunnel_drain) */
    gw_tls_conn_t *tls;
    gw_wgen_t *g;  /* the generation it was accepted under */
    busy_t *b;     /* NULL while idle */
    h1x_t *h1;     /* CS_H1 (and CS_CLOSING after it) */
    thr_t *thr;    /* NULL without throttling */
    size_t queued; /* bytes handed to uv_write and not yet written */
    gw_h2_session_t *h2;
    uint64_t last_active_ms; /* HTTP/2: last time a stream was open or a frame arrived */
    uint64_t stop_due;       /* HTTP/2 draining: the first GOAWAY (F_DRAIN) or the final one
                                (F_STOPPING) is due at this gw_now_ms(), or 0 */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr; /* the peer (family 0 when unknown) */
};

/* The worker of a connection: its loop is embedded in the worker. */
#define W(c) GW_CONTAINER_OF((c)->tcp.loop, gw_worker_t, loop)

/* The peer as "ip:port" ("[ip6]:port") and as the bare address, into caller storage. */

#define PEER(c) gw_front__conn_peer(c)

/* An HTTP/2 stream as a client stream. */
typedef struct {
    gw_cstream_t cs;
    conn_t *c;
    uint32_t sid;
    int gone;          /* closed by the session: ops are no-ops until the proxy is told */
    int rst_after;     /* RST_STREAM(NO_ERROR) once the response is framed (early response) */
    gw_list_t link;    /* in c->b->h2_streams, then c->b->h2_gone */
    gw_bucket_t *rb;   /* its route's bucket on this connection, or NULL */
    size_t given;      /* stream data budget handed to the session */
    size_t owed;       /* request body bytes passed on, window credit held back (upload rate) */
    uint32_t thr_mark; /* c->thr->waits when the request began */
    gw_alog_t log;     /* the request's record (accesslog.c) */
    int ws;            /* an RFC 8441 extended CONNECT: its 200 opens a tunnel */
    /* a push we promised: its request, kept by the session until the stream is released */
    const gw_h2_head_t *push_req;
} h2s_t;

typedef struct {
    uv_write_t req;
    conn_t *c;
    size_t len;
    uint8_t data[];
} wreq_t;

/* conn.c: the connection */
/* A client stream of connection c (its peer, address and transport) for a request of method. */
gw_cstream_t gw_front__cstream(conn_t *c, const gw_cstream_ops_t *ops, void *impl,
                               gw_slice_t method);
size_t gw_front__in_len(const conn_t *c);
size_t gw_front__out_len(const conn_t *c);
int gw_front__need_busy(conn_t *c);
void gw_front__kick(conn_t *c);
void gw_front__h2_tell_gone(conn_t *c);
/* Hand the promised pushes (c->b->h2_pushes) to the proxy. */
void gw_front__h2_start_pushes(conn_t *c);
void gw_front__arm(conn_t *c, uint64_t ms);
void gw_front__after_write(conn_t *c, size_t len, int status);
int gw_front__send_iovq(conn_t *c, gw_iovq_t *q);
int gw_front__flush(conn_t *c);
void gw_front__finish(conn_t *c, const char *why);
void gw_front__conn_close(conn_t *c, const char *why);
void gw_front__on_timeout(conn_t *c);
void gw_front__process(conn_t *c);
void gw_front__release_idle_buffers(conn_t *c);
const char *gw_front__conn_peer(const conn_t *c);

/* check.c: what cfg needs besides sockets and listener certificates, checked by the code
 * start-up runs: gw_tls_client_ctx_check for every TLS upstream, gw_front__alog_probe for the
 * access log. Each problem appended to errs as "FILE:LINE:COL: message"; 0 or the first
 * negative code. */
int gw_front__check_files(const gw_config_t *cfg, gw_config_errors_t *errs);
/* The pid file's directory must be a writable directory (upgrade.c writes a temporary file
 * there and renames it over the pid file), the path itself no directory. 0 (also without a
 * pid_file) or a negative code with the problem appended to errs. */
int gw_front__check_pid_file(const gw_config_t *cfg, gw_config_errors_t *errs);

/* generation.c */
/* A SO_REUSEPORT socket bound to a, listening: 0 and *out, or -errno. */
int gw_front__bind_reuseport(const gw_cfg_addr_t *a, int backlog, int *out);
/* 0 when no other socket listens on a (a bind without SO_REUSEPORT succeeds), else -errno
 * (-EADDRINUSE: another process listens there). */
int gw_front__addr_probe(const gw_cfg_addr_t *a);
/* Log `event=<event> address=A reason="bind() to A failed (98: ...): another process ..."`. */
void gw_front__log_addr_in_use(const char *event, const char *addr, int err);
/* build a generation from cfg (taken over; freed on failure): the checks of
 * gw_front__check_files, every listener's TLS context and socket. What is
 * wrong with a file is appended to errs ("FILE:LINE:COL: ..."), the rest is logged. */
int gw_front__gen_new(gw_server_t *s, gw_config_t *cfg, const gw_gen_t *prev,
                      gw_config_errors_t *errs, gw_gen_t **out);
void gw_front__gen_unref(gw_gen_t *g);
/* Take the server's current generation if the worker does not serve it yet. */
int gw_front__worker_take_gen(gw_worker_t *w);
/* The worker is done with g: its pools close, then it is freed. */
void gw_front__wgen_retire(gw_wgen_t *g);
/* server.c: close one listening handle of a worker */
void gw_front__whandle_close(gw_whandle_t *wh);

/* server.c: the worker's last connection may be gone: a stopping worker then closes its
 * handles and its generations, and its loop ends */
void gw_front__worker_conn_gone(gw_worker_t *w);
/* At a drain deadline: close the connections of g (all the worker's when NULL) except, the
 * first time, those carrying tunnels while timeouts.tunnel_drain allows more; those get a timer
 * (t, cb) for the rest. 1 when some were kept. */
int gw_front__drain_tunnels_kept(gw_worker_t *w, gw_wgen_t *g, uv_timer_t *t, uv_timer_cb cb,
                                 int *phase);
/* ticker.c: the worker's timer heap (one loop timer for every connection's timeout and throttle
 * wake-up) */
void gw_front__ticker_set(gw_worker_t *w, gw_theap_node_t *n, uint64_t due);
int gw_front__timer_nodes_add(gw_worker_t *w, int k);

/* throttle.c */
uint64_t gw_front__now_us(void);
void gw_front__thr_arm(conn_t *c, uint64_t wait_us);
int gw_front__body_limited(const conn_t *c);
size_t gw_front__out_avail(conn_t *c, uint64_t now, size_t want, gw_bucket_t *rb, uint64_t *wait);
void gw_front__out_charge(conn_t *c, size_t n, gw_bucket_t *rb, uint64_t now);
gw_bucket_t *gw_front__route_bucket(conn_t *c, const gw_cfg_route_t *r);
uint64_t gw_front__tail_ms(conn_t *c);
void gw_front__h2_budget(conn_t *c, uint64_t now);
void gw_front__h2_charge(conn_t *c, uint64_t now);
void gw_front__h2_credit_release(conn_t *c, uint64_t now);
void gw_front__on_throttle(conn_t *c);

/* notify.c: one sd_notify(3) datagram ("READY=1", ...) when NOTIFY_SOCKET is set */
void gw_front__sd_notify(const char *state);

/* upgrade.c */
int gw_front__pid_file_write(const char *path, long pid);
long gw_front__pid_file_read(const char *path);
/* 0, or GW_E_EXIST (logged) when the pid file at path names another running gateway. */
int gw_front__pid_file_check(const gw_server_t *s, const char *path);
/* Close the inherited admin socket if the admin listener did not take it. */
void gw_front__inherit_admin_close(gw_server_t *s);
void gw_front__inherit_parse(gw_server_t *s);
int gw_front__inherit_take(gw_server_t *s, const gw_cfg_addr_t *addr);
/* How many inherited sockets listen on addr and are not taken yet. */
unsigned gw_front__inherit_count(const gw_server_t *s, const gw_cfg_addr_t *addr);
void gw_front__inherit_close_rest(gw_server_t *s);
void gw_front__upgrade_ready(void);
void gw_front__upgrade_start(gw_server_t *s);
/* server.c: stop accepting and drain as on a reload (the new process took over), then exit. */
void gw_front__server_drain(gw_server_t *s);

/* metrics.c */
int gw_front__metrics_bind(gw_worker_t *w, gw_wgen_t *g);
void gw_front__metrics_unbind(gw_wgen_t *g);
void gw_front__metrics_request(conn_t *c, const gw_alog_t *r);
void gw_front__metrics_h2_closed(gw_worker_t *w, const gw_h2_stats_t *st);
void gw_front__metrics_retire(gw_wgen_t *g);
/* Copy the worker's set into its snapshot, with the gauges of now (the worker's thread). */
void gw_front__metrics_snapshot(gw_worker_t *w);
/* Add the worker's last snapshot into t (any thread). */
void gw_front__metrics_add(gw_worker_t *w, gw_mset_t *t);
/* Every series cfg names, added to t at 0 (a scrape's start). */
void gw_front__mset_seed(gw_mset_t *t, const gw_config_t *cfg);
void gw_front__mset_free(gw_mset_t *m);

/* scrape.c: take the snapshot a scrape asked for with ticket (UINT64_MAX: the last, at exit) and
 * say so to the scrapes waiting for it; the scrape handle's callback */
void gw_front__metrics_answer(gw_worker_t *w, uint64_t ticket);
void gw_front__on_scrape(uv_async_t *a);

/* accesslog.c */
/* Whether gw_front__alog_switch would open the file at path, found without changing anything:
 * the file opened for appending as it does (never truncated), and when it is not there,
 * created and removed again (the directory must allow it). 0 or -errno. */
int gw_front__alog_probe(const char *path);
/* a without a file (off) / its file closed once the last writer is done, its lock gone. */
void gw_front__alog_init(gw_front_alog_t *a);
void gw_front__alog_free(gw_front_alog_t *a);
/* Make path (NULL: off) a's file (main thread): reopened when force, else kept when unchanged.
 * 0, or a negative code with the current file kept. */
int gw_front__alog_switch(gw_front_alog_t *a, const char *path, int force);
/* SIGUSR1: open a's path again (logrotate moved the file away); 0 when off. */
int gw_front__alog_reopen(gw_front_alog_t *a);
void gw_front__alog_flush(gw_worker_t *w);
/* A request of c began: a fresh record from its head (user agent, referer, request id). */
void gw_front__log_start(conn_t *c, gw_alog_t *r, const gw_req_head_t *h, const char *proto);
/* The response head (status) was handed over; end_stream: it was the whole response. */
void gw_front__log_head(gw_alog_t *r, unsigned status, int end_stream);
void gw_front__log_reset(gw_alog_t *r, uint32_t code);
/* f plus x-request-id (when the record has an id and f has none) into out (cap fields):
 * the count, or SIZE_MAX when f does not fit. */
size_t gw_front__with_request_id(const gw_alog_t *r, const gw_field_t *f, size_t n, gw_field_t *out,
                                 size_t cap);
/* An HTTP/1.1 request the front answered itself before it became a client stream (400, 405,
 * 408, 414, 431, 501, 505): counted and logged with the request line as received (empty: `-`;
 * the slice is read during the call only). */
void gw_front__log_direct(conn_t *c, unsigned status, gw_slice_t request_line);
/* An HTTP/2 request the session answered (431) or reset (malformed: PROTOCOL_ERROR; refused:
 * REFUSED_STREAM) before it became a client stream: counted and logged with what was decoded
 * of its head (read during the call only). status 0 when only the reset went out. */
void gw_front__log_refused(conn_t *c, const gw_h2_head_t *h, unsigned status, uint32_t code);
/* The front is done with s: its line is logged, then the proxy is told. */
void gw_front__stream_done(conn_t *c, gw_cstream_t *s, uint32_t thr_mark);

/* h1_stream.c */
const char *gw_front__h1x_state_str(h1x_state_t st);
/* The exchange is closed to the proxy (the connection is closing, or its exchange ended). */
void gw_front__h1x_end(conn_t *c);
void gw_front__process_h1(conn_t *c);
int gw_front__start_h1(conn_t *c);

/* h2_stream.c */
int gw_front__start_h2(conn_t *c);
void gw_front__h2_pump(conn_t *c);
void gw_front__process_h2(conn_t *c);
void gw_front__h2_timeout(conn_t *c);
/* Begin the two-step GOAWAY (RFC 9113 §6.8) of a connection being stopped. */
void gw_front__h2_goaway(conn_t *c);

#endif
