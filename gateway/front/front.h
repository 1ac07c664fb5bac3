/* front/front.h — the running gateway: listeners, workers, client connections.
 *
 * gw_server_new() does everything that can fail at start-up (binding every listener, loading
 * every certificate and key) and reports each failure with its cause and file name, so a bad
 * setup is refused before any worker starts. gw_server_run() starts the workers (one libuv
 * loop per thread, each accepting on its own SO_REUSEPORT socket) and blocks until they have
 * all stopped. gw_server_stop() may be called from any thread or a signal-handling loop.
 */
#ifndef GW_FRONT_FRONT_H
#define GW_FRONT_FRONT_H

#include "config/config.h"

typedef struct gw_server gw_server_t;

/* 0, or a negative GW_E* code after logging what is wrong. The server keeps a pointer to cfg,
 * which must outlive it. */
int gw_server_new(const gw_config_t *cfg, gw_server_t **out);

/* Run until stopped: 0 on a clean stop, negative on a fatal error. */
int gw_server_run(gw_server_t *s);

/* Ask every worker to stop. graceful=1: stop accepting, send GOAWAY, let in-flight requests
 * finish within timeouts.graceful_shutdown; graceful=0: close everything now. */
void gw_server_stop(gw_server_t *s, int graceful);

void gw_server_del(gw_server_t *s);

#endif
