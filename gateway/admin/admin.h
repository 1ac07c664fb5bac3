/* admin/admin.h — the admin listener (issue 21 item 5): plain HTTP/1.1 on its own address and
 * thread, apart from the client listeners, for Prometheus and load balancers:
 *   GET /metrics        the Prometheus text format 0.0.4 (server.h gw_server_metrics)
 *   GET /healthz        200 while the process runs
 *   GET /readyz         200 while every worker runs and no stop was asked; 503 during start-up
 *                       and while draining
 *   GET /cache/stats    the shared cache's counters and budget (JSON); 404 without a cache
 *   POST /cache/purge   ?url=URL: every variant of URL; ?prefix=URL: every entry below it;
 *                       {"purged": N}, a 400 saying what is wrong with the parameter
 * Other paths are 404, other methods 405 with Allow; every answer closes the connection. A head
 * must come within admin.timeout; at 64 connections the oldest idle one makes room for a new one,
 * and scrapes never take the last few, so probes are answered whatever else is connected; a scrape
 * waits for the workers on a thread of its own, never on the listener's loop. */
#ifndef GW_ADMIN_ADMIN_H
#define GW_ADMIN_ADMIN_H

#include "config/config.h"
#include "server/server.h"

typedef struct gw_admin gw_admin_t;

/* Bind cfg->addr and start the threads (the listener's loop, and the scraper that waits for
 * the workers' metrics off that loop); cfg->timeout_ms bounds reading a request head and
 * writing an answer. 0, or a negative code after logging why. */
int gw_admin_start(gw_server_t *srv, const gw_cfg_admin_t *cfg, gw_admin_t **out);
/* Stop the thread and close every admin connection. NULL is ignored. */
void gw_admin_stop(gw_admin_t *a);

#endif
