/* back/health.c — what a server's pool does outside any request: active health checks and
 * the purge of idle connections above max_idle. */
#include <string.h>

#include <netdb.h>
#include <sys/socket.h>

#include "back/back_internal.h"

#include "common/err.h"
#include "common/log.h"

void gw_back__idle_purge(uv_timer_t *t)
{
    gw_back_upstream_t *up = t->data;
    uint64_t now = uv_now(t->loop), after = up->cfg->idle_purge_ms;
    unsigned max_idle = up->cfg->max_idle;
    int again = 0;
    for (size_t i = 0; i < up->servers_len; i++) {
        gw_back_server_t *s = &up->servers[i];
        if (s->idle_cnt <= max_idle)
            continue;
        unsigned excess = s->idle_cnt - max_idle, n = (excess + 1) / 2;
        /* from the tail: the list is most recently used first */
        gw_list_t *l = s->idle.prev;
        while (n && l != &s->idle) {
            gw_back_conn_t *c = GW_CONTAINER_OF(l, gw_back_conn_t, link);
            l = l->prev;
            if (now - c->idle_since < after)
                break; /* the rest were used more recently still */
            GW_LOG_DEBUG("back_idle_close", "server=%s reason=purge idle=%u max_idle=%u",
                         s->cfg->addr.text, s->idle_cnt, max_idle);
            gw_back__conn_close(c);
            gw_back__stats(up->back)->purged++;
            s->st.purged++;
            n--;
        }
        again |= s->idle_cnt > max_idle;
    }
    if (again)
        uv_timer_start(t, gw_back__idle_purge, after, 0);
}

void gw_back__health_check(gw_back_server_t *s)
{
    if (s->hc_conn || !s->up->cfg->health_path)
        return;
    gw_back_conn_t *c = gw_back__conn_new(s);
    if (!c)
        return;
    c->flags |= GW_BACK_CONN_F_HEALTH;
    s->hc_conn = c;
    gw_back__start_connect(c);
}
