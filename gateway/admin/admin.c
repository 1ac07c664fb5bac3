/* admin/admin.c — the admin listener (admin.h): one libuv loop on its own thread, so a scrape
 * that waits for the workers' snapshots never holds up the signal loop or a client. */
#include "admin/admin.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/list.h"
#include "common/log.h"
#include "h1/parser.h"
#include "h1/serializer.h"

#define ADMIN_HEAD_MAX 8192
#define ADMIN_CONNS_MAX 64
#define ADMIN_TIMEOUT_MS 10000

struct gw_admin {
    gw_server_t *srv;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    uv_thread_t thread;
    gw_list_t conns;
    size_t nconns;
    char addr[64];
};

typedef struct {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    gw_admin_t *a;
    gw_list_t link;
    gw_h1_parser_t *p;
    gw_bytes_t in, out;
    int handles; /* open handles before free */
    int answered;
    int closing;
} aconn_t;

static void on_aconn_closed(uv_handle_t *h)
{
    aconn_t *c = h->data;
    if (--c->handles > 0)
        return;
    gw_h1_parser_del(c->p);
    gw_bytes_free(&c->in);
    gw_bytes_free(&c->out);
    gw_free(c);
}

static void aconn_close(aconn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    gw_list_remove(&c->link);
    c->a->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_aconn_closed);
    uv_close((uv_handle_t *)&c->timer, on_aconn_closed);
}

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    aconn_close(req->data);
}

static void respond(aconn_t *c, unsigned status, const char *ctype, const uint8_t *body, size_t len,
                    int head_only)
{
    c->answered = 1;
    char clen[24];
    clen[gw_fmt_u64(clen, len)] = 0;
    gw_field_t f[] = {{GW_SLICE_LIT("server"), GW_SLICE_LIT("h2gate")},
                      {GW_SLICE_LIT("content-type"), gw_slice_str(ctype)},
                      {GW_SLICE_LIT("cache-control"), GW_SLICE_LIT("no-store")}};
    int rv = gw_h1_response_head(&c->out, status, f, 3, (int64_t)len, 0);
    if (rv == 0 && !head_only && len)
        rv = gw_bytes_append(&c->out, body, len);
    if (rv < 0) {
        aconn_close(c);
        return;
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_buf_t b = uv_buf_init((char *)c->out.base, (unsigned)c->out.len);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        aconn_close(c);
}

static void respond_text(aconn_t *c, unsigned status, const char *text, int head_only)
{
    respond(c, status, "text/plain; charset=utf-8", (const uint8_t *)text, strlen(text), head_only);
}

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    aconn_t *c = ud;
    int head = gw_slice_eq(m->method, GW_SLICE_LIT("HEAD"));
    if (!head && !gw_slice_eq(m->method, GW_SLICE_LIT("GET"))) {
        respond_text(c, 405, "h2gate admin: GET only\n", 0);
        return 0;
    }
    gw_slice_t path = m->target;
    for (size_t i = 0; i < path.len; i++)
        if (path.base[i] == '?')
            path.len = i;
    if (gw_slice_eq(path, GW_SLICE_LIT("/metrics"))) {
        gw_bytes_t body;
        gw_bytes_init(&body, 0);
        if (gw_server_metrics(c->a->srv, &body) < 0)
            respond_text(c, 500, "h2gate admin: out of memory\n", head);
        else
            respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", body.base, body.len, head);
        gw_bytes_free(&body);
    } else if (gw_slice_eq(path, GW_SLICE_LIT("/healthz"))) {
        respond_text(c, 200, "ok\n", head);
    } else if (gw_slice_eq(path, GW_SLICE_LIT("/readyz"))) {
        if (gw_server_ready(c->a->srv))
            respond_text(c, 200, "ready\n", head);
        else
            respond_text(c, 503, "not ready: starting or draining\n", head);
    } else {
        respond_text(c, 404, "h2gate admin: /metrics, /healthz, /readyz\n", head);
    }
    return 0;
}

static int on_body(void *ud, const uint8_t *p, size_t n)
{
    (void)ud, (void)p, (void)n;
    return 0;
}

static int on_complete(void *ud)
{
    (void)ud;
    return 0;
}

static const gw_h1_callbacks_t cbs = {on_head, on_body, on_complete, NULL};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    aconn_t *c = h->data;
    if (gw_bytes_reserve(&c->in, 2048) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->in.base + c->in.len, (unsigned)(c->in.cap - c->in.len));
}

/* The head is gathered whole (at most ADMIN_HEAD_MAX bytes), then parsed in one piece, so the
 * slices the parser hands out point into one buffer that does not move. */
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    aconn_t *c = s->data;
    if (nread < 0) {
        aconn_close(c);
        return;
    }
    if (nread == 0 || c->answered)
        return;
    c->in.len += (size_t)nread;
    const uint8_t *end = NULL;
    for (size_t i = 3; i < c->in.len && !end; i++)
        if (!memcmp(c->in.base + i - 3, "\r\n\r\n", 4))
            end = c->in.base + i + 1;
    if (!end) {
        if (c->in.len > ADMIN_HEAD_MAX)
            respond_text(c, 431, "h2gate admin: request head too large\n", 0);
        return;
    }
    ssize_t n = gw_h1_parser_feed(c->p, c->in.base, (size_t)(end - c->in.base));
    if (n < 0 && !c->answered) {
        unsigned st = gw_h1_parser_error_status(c->p);
        respond_text(c, st ? st : 400, "h2gate admin: bad request\n", 0);
    } else if (!c->answered) {
        respond_text(c, 400, "h2gate admin: bad request\n", 0);
    }
}

static void on_timeout(uv_timer_t *t)
{
    aconn_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    gw_admin_t *a = server->data;
    if (status < 0)
        return;
    aconn_t *c = gw_calloc(1, sizeof(*c));
    if (!c)
        return;
    c->a = a;
    gw_bytes_init(&c->in, ADMIN_HEAD_MAX + 4096);
    gw_bytes_init(&c->out, 0);
    gw_h1_limits_t lim = {ADMIN_HEAD_MAX, 64};
    c->p = gw_h1_parser_new(GW_H1_REQUEST, &lim, &cbs, c);
    uv_tcp_init(&a->loop, &c->tcp);
    uv_timer_init(&a->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    gw_list_push_back(&a->conns, &c->link);
    a->nconns++;
    if (!c->p || uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || a->nconns > ADMIN_CONNS_MAX) {
        aconn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, ADMIN_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_stop(uv_async_t *h)
{
    gw_admin_t *a = h->data;
    uv_close((uv_handle_t *)&a->listener, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    gw_list_foreach_safe(it, tmp, &a->conns) aconn_close(GW_CONTAINER_OF(it, aconn_t, link));
}

static void admin_main(void *arg)
{
    gw_admin_t *a = arg;
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

int gw_admin_start(gw_server_t *srv, const gw_cfg_addr_t *addr, gw_admin_t **out)
{
    *out = NULL;
    gw_admin_t *a = gw_calloc(1, sizeof(*a));
    if (!a || uv_loop_init(&a->loop) != 0) {
        gw_free(a);
        return GW_E_NOMEM;
    }
    a->srv = srv;
    snprintf(a->addr, sizeof(a->addr), "%s", addr->text);
    gw_list_init(&a->conns);
    uv_tcp_init(&a->loop, &a->listener);
    a->listener.data = a;
    /* the server's: refused when another process listens there; inherited from the old
     * process of a binary upgrade (both accept on it while the old one drains) */
    int fd, e;
    int rv = gw_server_admin_socket(srv, addr, &fd);
    if (rv == 0 && (e = uv_tcp_open(&a->listener, fd)) < 0)
        close(fd);
    if (rv == 0 && e == 0)
        e = uv_listen((uv_stream_t *)&a->listener, 64, on_connection);
    if (rv == 0 && e < 0) {
        GW_LOG_ERROR("admin_failed", "address=%s reason=\"%s\"", addr->text, uv_strerror(e));
        rv = GW_E_IO;
    }
    if (rv < 0) {
        uv_close((uv_handle_t *)&a->listener, NULL);
        uv_run(&a->loop, UV_RUN_DEFAULT);
        uv_loop_close(&a->loop);
        gw_free(a);
        return rv;
    }
    uv_async_init(&a->loop, &a->stop, on_stop);
    a->stop.data = a;
    if (uv_thread_create(&a->thread, admin_main, a) != 0) {
        uv_close((uv_handle_t *)&a->listener, NULL);
        uv_close((uv_handle_t *)&a->stop, NULL);
        uv_run(&a->loop, UV_RUN_DEFAULT);
        uv_loop_close(&a->loop);
        gw_free(a);
        return GW_E_IO;
    }
    GW_LOG_INFO("admin_listening", "address=%s paths=/metrics,/healthz,/readyz", addr->text);
    *out = a;
    return 0;
}

void gw_admin_stop(gw_admin_t *a)
{
    if (!a)
        return;
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    uv_loop_close(&a->loop);
    gw_free(a);
}
