/* server/server.h — the running gateway: listeners, workers, client connections.
 *
 * gw_server_new() does everything that can fail at start-up (binding every listener, loading
 * every certificate and key) and reports each failure with its cause and file name, so a bad
 * setup is refused before any worker starts. gw_server_run() starts the workers (one libuv
 * loop per thread, each accepting on its own SO_REUSEPORT socket) and blocks until they have
 * all stopped. gw_server_stop() may be called from any thread or a signal-handling loop.
 */
#ifndef GW_SERVER_SERVER_H
#define GW_SERVER_SERVER_H

#include "cache/cache.h"
#include "common/buf.h"
#include "config/config.h"

typedef struct gw_server gw_server_t;

/* Block, on the calling thread, the signals gw_server_run handles (SIGINT, SIGTERM, SIGQUIT,
 * SIGHUP, SIGUSR1, SIGUSR2). Called before gw_server_new binds the listeners: a signal sent as
 * soon as a port answers then waits for its handler instead of ending the process with its
 * default action. They stay blocked, on every thread (the workers and the admin's threads
 * inherit the block): gw_server_run reads them from a signalfd. */
void gw_server_hold_signals(void);

/* 0, or a negative GW_E* code after logging what is wrong. The server takes cfg over (it is
 * freed with its generation, also on failure). */
int gw_server_new(gw_config_t *cfg, gw_server_t **out);

/* What gw_server_new would open for cfg besides its sockets, checked by the same code without
 * binding, writing or creating anything (`h2gate -t`): every TLS listener's certificates and
 * keys (gw_tls_ctx_check: a key must match its certificate; a self_signed pair not there yet
 * is left to start-up), every TLS upstream's tls_ca, the access log (opened for appending, not
 * truncated; a file not there is created and removed again), the pid file's directory. Each
 * problem is appended to errs as "FILE:LINE:COL: message" at the key naming the file; start-up
 * and reload report the same problems the same way. 0 or the first negative code. */
int gw_server_check(const gw_config_t *cfg, gw_config_errors_t *errs);

/* The current configuration (main thread; it changes with gw_server_reload). */
const gw_config_t *gw_server_config(const gw_server_t *s);

/* Reload (SIGHUP; main thread): re-read the configuration file of the current generation. An
 * invalid file, or one whose listeners, certificates, CA files or access log cannot be set up,
 * changes nothing: 0 or a negative code, `event=reload_failed` logged with every FILE:LINE:COL
 * error (a file that cannot be used at the key naming it, as gw_server_check says it). A valid one
 * becomes the new generation: new connections use it at once (listeners present in both keep
 * their sockets, added ones open, removed ones close); connections of the old one drain (two-
 * step GOAWAY, idle HTTP/1.1 closed after timeouts.drain_grace, busy ones with
 * `Connection: close`) within timeouts.graceful_shutdown; its origin pools close after them. */
int gw_server_reload(gw_server_t *s);

/* Run until stopped: 0 on a clean stop, negative on a fatal error. */
int gw_server_run(gw_server_t *s);

/* Ask every worker to stop. graceful=1: stop accepting, send GOAWAY, let in-flight requests
 * finish within timeouts.graceful_shutdown; graceful=0: close everything now. */
void gw_server_stop(gw_server_t *s, int graceful);

void gw_server_del(gw_server_t *s);

/* The metrics of every worker, summed, in the Prometheus text format 0.0.4 (any thread; it
 * waits up to a second for the workers' snapshots). 0 or GW_E_NOMEM. */
int gw_server_metrics(gw_server_t *s, gw_bytes_t *out);

/* The arguments the process was started with: SIGUSR2 starts the binary it was started from
 * (as /proc/self/exe names it now) with them again. 0 or a negative code. */
int gw_server_set_argv(gw_server_t *s, char *const *argv);

/* The admin listener's socket, bound to addr and listening (main thread, before
 * gw_server_run): the one the process that started us passed on, if it listens on addr (a
 * binary upgrade), else a new one. It stays the caller's to close; a later binary upgrade
 * passes it on. 0 and *out; GW_E_EXIST when another process listens on addr, GW_E_IO when it
 * cannot be bound (both logged as event=admin_failed). */
int gw_server_admin_socket(gw_server_t *s, const gw_cfg_addr_t *addr, int *out);

/* 1 while every worker runs and no stop was asked (/readyz). */
int gw_server_ready(const gw_server_t *s);

/* The process's shared cache (any thread; the admin listener): the one store every worker
 * uses, the current generation's. Its counters, and the configured cache.memory and
 * cache.max_object: 0, or GW_E_NOENT when no route has cache: true (there is no store). */
int gw_server_cache_stats(gw_server_t *s, gw_cache_stats_t *st, size_t *memory, size_t *max_object);
/* Remove the entries under key (every Vary variant; gw_cache_key of a URL) or, with prefix,
 * every entry whose key starts with key, into *purged: 0, or GW_E_NOENT when no route has
 * cache: true. */
int gw_server_cache_purge(gw_server_t *s, const char *key, size_t len, int prefix, size_t *purged);

#endif
