/* front/accesslog.c — the access log: one record per request (common/alog.h)
 * kept by its client stream, filled by the front and the proxy, formatted when the front is
 * done with the request into the worker's buffer, and written through it: at 32 KiB, at least
 * once a second, on reopen and at exit; never a write(2) per request.
 *
 * The file is shared by the workers (gw_front_alog_t, held by the server) and replaced by
 * SIGUSR1 (reopen after logrotate's mv) or a reload naming another path: a worker takes a
 * reference on the current file for one write,
 * so a file is closed only when no worker writes to it. Lines a worker buffered before a
 * reopen go to the new file: none is lost. Over a pipe (stderr under a supervisor), a write
 * carries whole lines of at most PIPE_BUF bytes, which the kernel never interleaves with the
 * lines of another worker or of the event log. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "h2/errors.h"

#define ALOG_FLUSH_AT (32 * 1024)
#define ALOG_FLUSH_MS 1000

struct gw_alog_file {
    atomic_uint refs;
    int fd;
    int owned;   /* 0 for stderr */
    int regular; /* a regular file: one write per flush */
    char path[];
};

/* How the log file is opened, by alog_open and by its probe. */
#define ALOG_OPEN_FLAGS (O_WRONLY | O_APPEND | O_CLOEXEC)

int gw_front_alog_probe(const char *path)
{
    if (!strcmp(path, "stderr"))
        return 0;
    /* O_NONBLOCK: a FIFO nobody reads yet must not hang `h2gate -t` (ENXIO: fine) */
    int fd = open(path, ALOG_OPEN_FLAGS | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) {
        /* O_EXCL: the file removed below is the one made here, never someone else's */
        fd = open(path, ALOG_OPEN_FLAGS | O_NONBLOCK | O_CREAT | O_EXCL, 0644);
        if (fd >= 0)
            unlink(path);
    }
    if (fd < 0)
        return errno == ENXIO ? 0 : -errno;
    close(fd);
    return 0;
}

static int alog_open(const char *path, gw_alog_file_t **out)
{
    *out = NULL;
    size_t pl = strlen(path);
    gw_alog_file_t *f = gw_calloc(1, sizeof(*f) + pl + 1);
    if (!f)
        return GW_E_NOMEM;
    memcpy(f->path, path, pl + 1);
    if (!strcmp(path, "stderr")) {
        f->fd = 2;
    } else {
        f->fd = open(path, ALOG_OPEN_FLAGS | O_CREAT, 0644);
        if (f->fd < 0) {
            int e = errno;
            GW_LOG_ERROR("access_log_failed", "path=%s reason=\"%s\"", path, strerror(e));
            gw_free(f);
            return GW_E_IO;
        }
        f->owned = 1;
    }
    struct stat st;
    f->regular = fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode);
    atomic_init(&f->refs, 1);
    *out = f;
    return 0;
}

static void alog_unref(gw_alog_file_t *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
        if (f->owned)
            close(f->fd);
        gw_free(f);
    }
}

void gw_front_alog_init(gw_front_alog_t *a)
{
    uv_mutex_init(&a->lock);
    a->file = NULL;
}

void gw_front_alog_free(gw_front_alog_t *a)
{
    alog_unref(a->file);
    a->file = NULL;
    uv_mutex_destroy(&a->lock);
}

/* Open path (or keep the current file when it is the same path and !force) and make it the
 * one the workers write to. 0 or a negative code (the current file stays). */
int gw_front_alog_switch(gw_front_alog_t *a, const char *path, int force)
{
    gw_alog_file_t *cur = a->file, *nf = NULL;
    if (!path) {
        nf = NULL;
    } else if (!force && cur && !strcmp(cur->path, path)) {
        return 0;
    } else {
        int rv = alog_open(path, &nf);
        if (rv < 0)
            return rv;
    }
    uv_mutex_lock(&a->lock);
    a->file = nf;
    uv_mutex_unlock(&a->lock);
    alog_unref(cur);
    return 0;
}

int gw_front_alog_reopen(gw_front_alog_t *a)
{
    return a->file ? gw_front_alog_switch(a, a->file->path, 1) : 0;
}

/* Write buf through the current file; lines that cannot be written are counted. */
static void alog_write(gw_front_t *w, const uint8_t *p, size_t n)
{
    gw_front_alog_t *a = w->alog;
    uv_mutex_lock(&a->lock);
    gw_alog_file_t *f = a->file;
    if (f)
        atomic_fetch_add(&f->refs, 1);
    uv_mutex_unlock(&a->lock);
    if (!f)
        return;
    while (n) {
        size_t chunk = n;
        if (!f->regular && chunk > PIPE_BUF) {
            /* whole lines of at most PIPE_BUF bytes (a longer line goes alone) */
            size_t cut = 0;
            for (size_t i = 0; i < PIPE_BUF; i++)
                if (p[i] == '\n')
                    cut = i + 1;
            if (!cut) {
                const uint8_t *nl = memchr(p, '\n', n);
                cut = nl ? (size_t)(nl - p) + 1 : n;
            }
            chunk = cut;
        }
        ssize_t k = write(f->fd, p, chunk);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            size_t lost = 0;
            for (size_t i = 0; i < n; i++)
                lost += p[i] == '\n';
            atomic_fetch_add(&w->alog_lost, lost);
            break;
        }
        p += k;
        n -= (size_t)k;
    }
    alog_unref(f);
}

void gw_front_alog_flush(gw_front_t *w)
{
    if (w->alog_buf.len == 0)
        return;
    alog_write(w, w->alog_buf.base, w->alog_buf.len);
    w->alog_buf.len = 0;
    if (w->alog_buf.cap > 4 * ALOG_FLUSH_AT)
        gw_bytes_free(&w->alog_buf); /* one burst of huge lines does not pin memory */
}

static void on_alog_timer(uv_timer_t *t)
{
    gw_front_alog_flush(GW_CONTAINER_OF(t, gw_front_t, alog_timer));
}

/* ---- records --------------------------------------------------------------------------- */

void gw_front__log_start(conn_t *c, gw_alog_t *r, const gw_req_head_t *h, const char *proto)
{
    const gw_cfg_access_log_t *al = &CFG(c)->access_log;
    /* without an access log the record is only counted (gw_front__metrics_request): what only
     * the line shows is neither cleared nor filled (the record's cache lines stay untouched) */
    if (al->path)
        gw_alog_init(r);
    else
        gw_alog_init_hot(r);
    r->start_ns = gw_now_ns();
    if (h->route)
        r->route_ix = (uint32_t)(h->route - CFG(c)->routes);
    if (!al->path)
        return;
    r->proto = proto;
    r->method = h->method;
    r->authority = h->authority;
    r->path = h->path;
    gw_slice_t id = {0};
    for (size_t i = 0; i < h->fields_len; i++) {
        const gw_field_t *f = &h->fields[i];
        if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("user-agent")))
            r->user_agent = f->value;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("referer")))
            r->referer = f->value;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("x-request-id")))
            id = f->value;
    }
    if (!al->request_id)
        return;
    if (gw_alog_id_valid(id)) {
        memcpy(r->id, id.base, id.len);
        r->id_len = (uint8_t)id.len;
    } else {
        gw_front_t *w = W(c);
        if (!w->id_seed) {
            uint64_t seed = 0;
            if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
                seed = gw_now_ns() ^ ((uint64_t)w->id << 56);
            w->id_seed = seed | 1;
        }
        gw_alog_id_make(r, w->id_seed, ++w->id_count);
    }
}

void gw_front__log_head(gw_alog_t *r, unsigned status, int end_stream)
{
    if (!r)
        return;
    r->status = status;
    r->head_ns = gw_now_ns();
    if (end_stream)
        r->last_ns = r->head_ns;
}

void gw_front__log_reset(gw_alog_t *r, uint32_t code)
{
    if (r && code != 0 && !r->h2_error)
        r->h2_error = gw_h2_error_str(code);
}

size_t gw_front__with_request_id(const gw_alog_t *r, const gw_field_t *f, size_t n, gw_field_t *out,
                                 size_t cap)
{
    if (n > cap)
        return SIZE_MAX;
    memcpy(out, f, n * sizeof(*f));
    if (!r || !r->id_len || n + 1 > cap)
        return n;
    for (size_t i = 0; i < n; i++)
        if (gw_slice_eq_nocase(f[i].name, GW_SLICE_LIT("x-request-id")))
            return n; /* the origin answered with one: it stays */
    out[n++] = (gw_field_t){GW_SLICE_LIT("x-request-id"), {(const uint8_t *)r->id, r->id_len}};
    return n;
}

/* Count and log one record whose request is over (metrics, then the access log line). */
static void log_done(conn_t *c, gw_alog_t *r)
{
    gw_front__metrics_request(c, r);
    const gw_config_t *cfg = CFG(c);
    if (!cfg->access_log.path)
        return;
    gw_front_t *w = W(c);
    r->peer = PEER(c);
    if (c->tls) {
        r->tls_version = gw_tls_version(c->tls);
        r->tls_cipher = gw_tls_cipher(c->tls);
        r->sni = gw_tls_sni(c->tls);
        r->client_verify = gw_tls_client_verify(c->tls);
        r->client_subject = gw_tls_client_subject(c->tls);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now_us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    gw_alog_format_t fmt = cfg->access_log.format == GW_CFG_ALOG_JSON ? GW_ALOG_JSON
                           : cfg->access_log.format == GW_CFG_ALOG_COMBINED_TIMING
                               ? GW_ALOG_COMBINED_TIMING
                               : GW_ALOG_COMBINED;
    int rv = cfg->access_log.tmpl
                 ? gw_alog_format_tmpl(&w->alog_buf, cfg->access_log.tmpl, r, now_us)
                 : gw_alog_format(&w->alog_buf, fmt, r, now_us);
    if (rv < 0)
        atomic_fetch_add(&w->alog_lost, 1);
    if (w->alog_buf.len >= ALOG_FLUSH_AT)
        gw_front_alog_flush(w);
    else if (w->alog_buf.len && !uv_is_active((uv_handle_t *)&w->alog_timer))
        uv_timer_start(&w->alog_timer, on_alog_timer, ALOG_FLUSH_MS, 0);
}

void gw_front__log_direct(conn_t *c, unsigned status, gw_slice_t request_line)
{
    gw_alog_t r;
    gw_alog_init(&r);
    r.start_ns = r.end_ns = r.head_ns = r.last_ns = gw_now_ns();
    r.proto = "http/1.1";
    r.status = status;
    r.request_line = request_line;
    log_done(c, &r);
}

void gw_front__log_refused(conn_t *c, const gw_h2_head_t *h, unsigned status, uint32_t code)
{
    gw_alog_t r;
    gw_req_head_t rh = {.method = h->method,
                        .scheme = h->scheme,
                        .authority = h->authority,
                        .path = h->path,
                        .fields = h->headers,
                        .fields_len = h->headers_len,
                        .proto = GW_REQ_H2};
    gw_front__log_start(c, &r, &rh, "h2");
    r.end_ns = gw_now_ns();
    if (status) {
        r.status = status;
        r.head_ns = r.last_ns = r.end_ns;
    }
    gw_front__log_reset(&r, code);
    log_done(c, &r);
}

/* The front is done with s: its record is complete; the line goes to the worker's buffer. */
void gw_front__stream_done(conn_t *c, gw_cstream_t *s, uint32_t thr_mark)
{
    gw_alog_t *r = s->log;
    if (s->tunnel) {
        s->tunnel = 0;
        c->tunnels--;
    }
    if (r && r->start_ns) {
        r->end_ns = gw_now_ns();
        /* no response before the client closed its side (or reset the connection): nginx's
         * 499 in the combined formats */
        if (!r->status && (c->flags & GW_CONN_F_EOF))
            r->client_gone = 1;
        r->throttled = c->thr && c->thr->waits != thr_mark;
        log_done(c, r);
        r->start_ns = 0; /* logged once */
    }
    gw_proxy_stream_closed(c->g->proxy, s);
}
