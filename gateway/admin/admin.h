/* admin/admin.h — the admin listener (issue 21 item 5): plain HTTP/1.1 on its own address and
 * thread, apart from the client listeners, for Prometheus and load balancers:
 *   GET /metrics   the Prometheus text format 0.0.4 (front.h gw_server_metrics)
 *   GET /healthz   200 while the process runs
 *   GET /readyz    200 while every worker runs and no stop was asked; 503 during start-up and
 *                  while draining
 * Other paths are 404, other methods 405; every answer closes the connection. */
#ifndef GW_ADMIN_ADMIN_H
#define GW_ADMIN_ADMIN_H

#include "config/config.h"
#include "front/front.h"

typedef struct gw_admin gw_admin_t;

/* Bind addr and start the thread; 0, or a negative code after logging why. */
int gw_admin_start(gw_server_t *srv, const gw_cfg_addr_t *addr, gw_admin_t **out);
/* Stop the thread and close every admin connection. NULL is ignored. */
void gw_admin_stop(gw_admin_t *a);

#endif
