/* server/server_internal.h — what the files of gateway/server/ share (not a public interface;
 * main.c and admin/ call server/server.h).
 *
 * process.c:   gw_server_t: start-up, run, signals, graceful stop, the cluster client's life.
 * worker.c:    the worker threads: one libuv loop each, whose connections are the front's
 *              (front/front.h); wake-ups, graceful stop, drain deadline, the end of the loop;
 *              the ops table their fronts call; their questions to the cluster.
 * generation.c: configuration generations: listeners' sockets (the probe that refuses an
 *              address another process listens on), TLS contexts, shared rate tables; a
 *              worker taking the current one and draining the old; reload.
 * check.c:     what a configuration needs besides sockets, checked by start-up's code: CA
 *              files, the access log, the pid file's directory, certificates (h2gate -t).
 * upgrade.c:   binary upgrade (SIGUSR2: inherited sockets, the admin socket too, readiness
 *              pipe), the pid file (refused while it names another running gateway).
 * heap.c:      the heap's free pages back to the system (malloc_trim on libuv's thread pool)
 *              once every worker went quiet (heap.idle_trim), and when the cache's
 *              evictions, purges or reloads make a trim due: one trim at a time.
 * notify.c:    systemd readiness datagrams.
 * scrape.c:    a scrape of the metrics: every worker's snapshot asked for and summed, the
 *              families table, the Prometheus rendering, the process_* series.
 */
#ifndef GW_SERVER_INTERNAL_H
#define GW_SERVER_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "gw_version.h"
#if GW_HAVE_ACME
#include "acme/acme.h"
#include "cache/cache.h"
#endif
#include "common/bucket.h"
#include "common/list.h"
#include "config/config.h"
#include "front/front.h"
#include "proxy/proxy.h"
#include "server/server.h"
#include "tls/tls.h"

#define GW_SERVER_MAX_WORKERS 256
/* client x route request-rate buckets kept (least recently used forgotten beyond) */
#define GW_SERVER_RATE_TABLE 16384

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

/* A listener of one generation: what its connections see, on a shared socket. */
typedef struct {
    gw_listener_t l; /* its settings and TLS context (front/front.h) */
    size_t sock;     /* index into srv->socks */
} gw_gen_listener_t;

/* Shared per-client bucket table (throttle), kept across generations whose settings agree. */
typedef struct {
    atomic_uint refs;
    gw_bucket_table_t *t;
    size_t cap;
    unsigned ipv6_prefix;
} gw_shared_table_t;

/* The process's shared HTTP cache (routes with cache: true), kept across generations whose
 * cache.memory and cache.max_object agree: a reload keeps what is stored. */
typedef struct {
    atomic_uint refs;
    gw_cache_t *c;
    size_t memory, max_object;
} gw_shared_cache_t;

/* A configuration generation: immutable once published. The server holds a reference while
 * it is current, each worker one while it serves connections accepted under it; the last
 * reference frees the configuration, the TLS contexts and the tables. */
typedef struct {
    atomic_uint refs;
    unsigned long long id; /* 1 at start, +1 per successful reload */
    gw_config_t *cfg;      /* owned */
    gw_gen_listener_t *listeners;
    size_t listeners_len;
    gw_shared_table_t *clients; /* throttle.per_client_rate buckets, tag 0; NULL when off */
    gw_shared_table_t *rates;   /* routes[].request_rate buckets, tag = route index + 1 */
    int route_rates;            /* some route has a response_rate */
    gw_shared_cache_t *cache;   /* the shared HTTP cache when a route has cache: true */
    gw_tls_store_t **stores;    /* per listener: its ACME store (tls.acme), else NULL */
} gw_gen_t;

typedef struct gw_worker gw_worker_t;

/* One worker's side of a generation: the translator and origin pools built from it, and its
 * connections. An old one drains (its connections are told to stop), then is retired: its
 * proxy closes, and it is freed once the proxy's handles and the drain timer are closed. */
typedef struct {
    gw_front_gen_t f; /* what its connections see (front/front.h): cfg, proxy, counts */
    gw_gen_t *gen;
    gw_worker_t *w;
    uv_timer_t drain; /* drain deadline, once it is old */
    gw_list_t link;   /* in w->old while draining */
    int pending;      /* handles still closing after retirement */
    int draining;     /* in w->old */
    int forced;       /* over limits.draining_generations: its connections closed */
    int tunnel_phase; /* past graceful_shutdown: only tunnels left, until tunnel_drain */
} gw_wgen_t;

/* The per-worker generation of a front's generation. */
#define WGEN(fg) GW_CONTAINER_OF((fg), gw_wgen_t, f)

/* A worker's listening handle on one socket. Its tcp.data is the current generation's
 * gw_listener_t for the socket (what front's gw_front_on_connection accepts for). */
typedef struct {
    uv_tcp_t tcp;
    gw_worker_t *w;
    size_t sock;    /* index into srv->socks */
    unsigned slot;  /* which of that address's sockets (gw_lsock_t.fds) */
    gw_list_t link; /* in w->handles */
    int seen;       /* scratch: listed by the generation being installed */
} gw_whandle_t;

/* A worker thread. Its loop and connections are its front's (front/front.h); what is here is
 * the process's side: the thread, the wake-ups from other threads, the listening handles, the
 * generations it serves and how it stops. */
struct gw_worker {
    gw_front_t f; /* the loop, the connections and what they share */
    gw_server_t *srv;
    uv_thread_t thread;
    uv_async_t wake;       /* another thread asked us to stop or to take a new generation */
    int wake_open;         /* under srv->lock: wake may still be signalled */
    gw_list_t handles;     /* gw_whandle_t: one per listening socket of the current generation */
    uv_timer_t drain;      /* graceful shutdown deadline */
    unsigned tunnels_open; /* origin tunnels of all its generations' proxies (max_tunnels) */
    uint64_t zmem_charged; /* compression memory charged by all its generations' proxies */
    int tunnel_phase; /* a drain (binary upgrade) past its deadline: tunnels until tunnel_drain */
    gw_list_t old;    /* gw_wgen_t draining, oldest first (the current one: f.cur) */
    gw_cluster_sink_t *sink; /* the cluster's answers to this worker's rate questions */
    uint64_t rate_token;     /* the last question's token */
    /* scrapes (scrape.c) */
    int snap_ok;        /* under srv->lock: the worker may be asked for snapshots */
    uv_async_t scrape;  /* a scrape asks for a snapshot (closed with wake) */
    uint64_t snap_done; /* under srv->snap_mu: the last ticket answered */
};

/* The generation new connections of worker w are accepted under, or NULL once it stopped. */
#define WCUR(w) ((w)->f.cur ? WGEN((w)->f.cur) : NULL)

/* heap.c: why the heap is trimmed (bits: asks made while a trim runs are served together by
 * the next one). */
enum {
    GW_HEAP_TRIM_IDLE = 1u << 0,   /* every worker quiet for heap.idle_trim (if worth it) */
    GW_HEAP_TRIM_EVICT = 1u << 1,  /* the cache's evictions: memory/16 bytes removed */
    GW_HEAP_TRIM_PURGE = 1u << 2,  /* the same after an admin's purge */
    GW_HEAP_TRIM_RELOAD = 1u << 3, /* the same after a reload dropped entries */
};
#define GW_HEAP_TRIM_CACHE (GW_HEAP_TRIM_EVICT | GW_HEAP_TRIM_PURGE | GW_HEAP_TRIM_RELOAD)

/* heap.c: the one owner of malloc_trim in the process: every reason's trim runs on libuv's
 * thread pool, queued from the main loop, one at a time. */
typedef struct {
    atomic_uint quiet;      /* workers that told they are quiet (front's ops->quiet) */
    atomic_uint pending;    /* GW_HEAP_TRIM_* asked, not yet taken by a run */
    atomic_int busy;        /* a run is asked for, queued or running: one at a time */
    atomic_ullong min_free; /* heap.idle_trim_free of the generation that last asked IDLE */
    uv_mutex_t mu;          /* wake_open against the main loop closing wake */
    int wake_open;          /* under mu: wake may be signalled */
    uv_async_t wake;        /* on the main loop: queue req */
    uv_work_t req;
    /* written by the thread pool while a run is under way, read by run_done after it */
    unsigned taken;      /* the reasons this run serves */
    uint64_t cache_ns;   /* what the cache's malloc_trim took (taken & GW_HEAP_TRIM_CACHE) */
    uint64_t idle_min;   /* min_free when the run began */
    uint64_t free;       /* mallinfo2().fordblks before the idle trim */
    uint64_t rss_before; /* resident bytes before the idle trim */
    uint64_t rss_after;  /* after the last trim of any reason (0: none yet) */
    uint64_t ns;         /* what the idle malloc_trim took */
    int trimmed;         /* the idle check passed and the heap was trimmed */
    /* the trims run and the nanoseconds they took, by reason (GW_HEAP_TRIMS_*): added by
     * run_done on the main loop, read by a scrape (h2gate_heap_trims_total,
     * h2gate_heap_trim_seconds_total) */
    atomic_ullong trims[2], trim_ns[2];
    /* idle checks that found too little to give back (h2gate_heap_trims_skipped_total) */
    atomic_ullong skipped;
} gw_heap_trim_t;
enum { GW_HEAP_TRIMS_IDLE, GW_HEAP_TRIMS_CACHE }; /* the indexes of trims[] and trim_ns[] */

struct gw_server {
    gw_gen_t *gen; /* current generation (written by the main thread under lock) */
    gw_lsock_t **socks;
    size_t socks_len;
    gw_worker_t **workers;
    unsigned workers_len;
    atomic_int stop_request; /* gw_stop_t asked by gw_server_stop */
    uv_loop_t main_loop;
    int sig_fd;         /* signalfd of the handled signals, blocked on every thread */
    uv_poll_t sig_poll; /* sig_fd in main_loop */
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
    /* cluster: the ticket keys every TLS listener uses while it holds some, kept equal to
     * Redis's by the cluster client on the main loop (NULL: no cluster:) */
    gw_tls_keyring_t *keyring;
    gw_cluster_t *cluster; /* replaced under lock (scrapes read its counters) */
#if GW_HAVE_ACME
    gw_acme_t *acme; /* the ACME client, on the main loop (NULL before run and after stop) */
    gw_acme_counters_t acme_counters; /* the ACME client's, for the scrape (process-wide) */
#endif
    gw_cluster_hub_t *hub; /* the workers' rate questions to the cluster (main loop) */
    gw_heap_trim_t heap;   /* heap.c */
};

/* process.c: start, keep or stop the cluster client for the current configuration (main
 * thread, main loop running). */
void gw_server__cluster_apply(gw_server_t *s);
/* process.c: one `event=rate_tables` line (sizes, evictions, refusals of the shared per-client
 * tables), when = "sigusr1" or "stop"; nothing when no table is configured. */
void gw_server__log_rate_tables(gw_server_t *s, const char *when);
/* process.c: stop accepting and drain as on a reload (the new process took over), then exit. */
void gw_server__drain(gw_server_t *s);

/* heap.c: worker w went quiet (quiet 1) or has work again (0), on its loop (front's
 * ops->quiet). When every worker is quiet, the heap is trimmed on libuv's thread pool if it
 * holds heap.idle_trim_free free bytes: at most one trim per quiet period, one at a time. */
void gw_server__worker_quiet(gw_worker_t *w, int quiet);
/* heap.c: ask for a trim of the heap for why (GW_HEAP_TRIM_*), from any thread, never
 * blocking: it runs on libuv's thread pool, queued from the main loop, after the one under way
 * if there is one (asks made meanwhile are served by one run). Nothing once the main loop
 * stopped taking them (gw_server__heap_close). */
void gw_server__heap_trim(gw_server_t *s, unsigned why);
/* heap.c: a proxy's ask after its cache's evictions (gw_proxy_set_trim; user_data: s). */
void gw_server__heap_trim_evicted(void *user_data);
/* heap.c: the trimmer's mutex (gw_server_new) and its handle on the main loop (gw_server_run,
 * before any worker starts); close: no ask is taken any more, the handle is closed (the main
 * loop must run on until the run under way ended). */
int gw_server__heap_init(gw_server_t *s);
void gw_server__heap_start(gw_server_t *s);
void gw_server__heap_close(gw_server_t *s);
void gw_server__heap_free(gw_server_t *s);

/* worker.c */
/* Start worker id of s (main thread): *out is set as soon as it exists, also when a later step
 * fails (the caller stops and frees it). 0 or a negative code. */
int gw_server__worker_start(gw_server_t *s, unsigned id, gw_worker_t **out);
/* Stop w as how says (a stop only ever gets harsher): listening handles closed, connections
 * stopped, the drain deadline armed for a graceful stop or a drain. */
void gw_server__worker_stop(gw_worker_t *w, gw_stop_t how);
/* The worker's last connection may be gone: a stopping worker then closes its handles and its
 * generations, and its loop ends. */
void gw_server__worker_conn_gone(gw_worker_t *w);
/* Free a worker whose loop has ended. */
void gw_server__worker_free(gw_worker_t *w);
/* Close one listening handle of a worker. */
void gw_server__whandle_close(gw_whandle_t *wh);
/* A proxy's question to the cluster (gw_proxy_rate_asker_t.ask; ud: the worker). */
/* A proxy's divisor for its local decisions (gw_proxy_rate_asker_t.share; ud: the worker). */
unsigned gw_server__rate_share(void *ud);
uint64_t gw_server__rate_ask(void *ud, const uint8_t *key, size_t klen, uint64_t rate,
                             uint64_t burst, int wait);

/* check.c: what cfg needs besides sockets and listener certificates, checked by the code
 * start-up runs: gw_tls_client_ctx_check for every TLS upstream, gw_front_alog_probe for the
 * access log. Each problem appended to errs as "FILE:LINE:COL: message"; 0 or the first
 * negative code. */
int gw_server__check_files(const gw_config_t *cfg, gw_config_errors_t *errs);
/* The pid file's directory must be a writable directory (upgrade.c writes a temporary file
 * there and renames it over the pid file), the path itself no directory. 0 (also without a
 * pid_file) or a negative code with the problem appended to errs. */
int gw_server__check_pid_file(const gw_config_t *cfg, gw_config_errors_t *errs);

/* generation.c */
/* A SO_REUSEPORT socket bound to a, listening: 0 and *out, or -errno. */
int gw_server__bind_reuseport(const gw_cfg_addr_t *a, int backlog, int *out);
/* 0 when no other socket listens on a (a bind without SO_REUSEPORT succeeds), else -errno
 * (-EADDRINUSE: another process listens there). */
int gw_server__addr_probe(const gw_cfg_addr_t *a);
/* Log `event=<event> address=A reason="bind() to A failed (98: ...): another process ..."`. */
void gw_server__log_addr_in_use(const char *event, const char *addr, int err);
/* build a generation from cfg (taken over; freed on failure): the checks of
 * gw_server__check_files, every listener's TLS context and socket. What is
 * wrong with a file is appended to errs ("FILE:LINE:COL: ..."), the rest is logged. */
int gw_server__gen_new(gw_server_t *s, gw_config_t *cfg, const gw_gen_t *prev,
                       gw_config_errors_t *errs, gw_gen_t **out);
void gw_server__gen_unref(gw_gen_t *g);
/* Take the server's current generation if the worker does not serve it yet. */
int gw_server__worker_take_gen(gw_worker_t *w);
/* The worker is done with g: its pools close, then it is freed. */
void gw_server__wgen_retire(gw_wgen_t *g);
/* At a drain deadline: close the connections of g (all the worker's when NULL) except, the
 * first time, those carrying tunnels while timeouts.tunnel_drain allows more; those get a timer
 * (t, cb) for the rest. 1 when some were kept. */
int gw_server__drain_tunnels_kept(gw_worker_t *w, gw_wgen_t *g, uv_timer_t *t, uv_timer_cb cb,
                                  int *phase);

/* notify.c: one sd_notify(3) datagram ("READY=1", ...) when NOTIFY_SOCKET is set */
void gw_server__sd_notify(const char *state);

/* upgrade.c */
int gw_server__pid_file_write(const char *path, long pid);
long gw_server__pid_file_read(const char *path);
/* 0, or GW_E_EXIST (logged) when the pid file at path names another running gateway. */
int gw_server__pid_file_check(const gw_server_t *s, const char *path);
/* Close the inherited admin socket if the admin listener did not take it. */
void gw_server__inherit_admin_close(gw_server_t *s);
void gw_server__inherit_parse(gw_server_t *s);
int gw_server__inherit_take(gw_server_t *s, const gw_cfg_addr_t *addr);
/* How many inherited sockets listen on addr and are not taken yet. */
unsigned gw_server__inherit_count(const gw_server_t *s, const gw_cfg_addr_t *addr);
void gw_server__inherit_close_rest(gw_server_t *s);
void gw_server__upgrade_ready(void);
void gw_server__upgrade_start(gw_server_t *s);

/* scrape.c: take the snapshot a scrape asked for with ticket (UINT64_MAX: the last, at exit) and
 * say so to the scrapes waiting for it; the scrape handle's callback */
void gw_server__metrics_answer(gw_worker_t *w, uint64_t ticket);
void gw_server__on_scrape(uv_async_t *a);

#endif
