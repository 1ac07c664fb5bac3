/* server/process.c — the gateway process: start-up (listeners bound and certificates loaded
 * before any worker runs), running the workers (worker.c), signals, the cluster client's life,
 * stop and shutdown. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/server_internal.h"

int gw_server_new(gw_config_t *cfg, gw_server_t **out)
{
    *out = NULL;
    gw_server_t *s = gw_calloc(1, sizeof(*s));
    if (!s) {
        gw_config_del(cfg);
        return GW_E_NOMEM;
    }
    if (uv_mutex_init(&s->lock) != 0) {
        gw_free(s);
        gw_config_del(cfg);
        return GW_E_NOMEM;
    }
    if (gw_server__heap_init(s) < 0) {
        uv_mutex_destroy(&s->lock);
        gw_free(s);
        gw_config_del(cfg);
        return GW_E_NOMEM;
    }
    uv_mutex_init(&s->snap_mu);
    uv_cond_init(&s->snap_cond);
    gw_front_alog_init(&s->alog);
    if (gw_tls_keyring_new(&s->keyring) < 0) {
        gw_server__heap_free(s);
        uv_mutex_destroy(&s->lock);
        uv_mutex_destroy(&s->snap_mu);
        uv_cond_destroy(&s->snap_cond);
        gw_front_alog_free(&s->alog);
        gw_free(s);
        gw_config_del(cfg);
        return GW_E_NOMEM;
    }
    s->workers_len = cfg->workers ? cfg->workers : 1;
    s->workers = gw_calloc(s->workers_len, sizeof(*s->workers));
    s->admin_fd = s->inh_admin = -1;
    gw_server__inherit_parse(s);
    /* before anything is bound: a second instance changes nothing of the first one's; the pid
     * file's directory too (a reload keeps the pid file), the other files in gen_new: each
     * failure is logged as FILE:LINE:COL */
    gw_config_errors_t errs = {0};
    int rv = !s->workers     ? GW_E_NOMEM
             : cfg->pid_file ? gw_server__pid_file_check(s, cfg->pid_file)
                             : 0;
    if (rv == 0)
        rv = gw_server__check_pid_file(cfg, &errs);
    if (rv == 0)
        rv = gw_server__gen_new(s, cfg, NULL, &errs, &s->gen); /* cfg is the generation's */
    else
        gw_config_del(cfg);
    for (size_t i = 0; i < errs.len; i++)
        GW_LOG_ERROR("startup_failed", "error=\"%s\"", errs.msgs[i]);
    gw_config_errors_free(&errs);
    gw_server__inherit_close_rest(s);
    if (rv == 0) {
        atomic_store(&s->gen_id, s->gen->id);
        rv = gw_front_alog_switch(&s->alog, s->gen->cfg->access_log.path, 0);
    }
    if (rv < 0) {
        gw_server_del(s);
        return rv;
    }
    *out = s;
    return 0;
}

const gw_config_t *gw_server_config(const gw_server_t *s)
{
    return s->gen->cfg;
}

/* c (or NULL) becomes the server's cluster, for scrapes (under lock) and for the workers'
 * questions (the hub); the one it replaces is returned, for the caller to close. */
static gw_cluster_t *cluster_swap(gw_server_t *s, gw_cluster_t *c)
{
    uv_mutex_lock(&s->lock);
    gw_cluster_t *old = s->cluster;
    s->cluster = c;
    uv_mutex_unlock(&s->lock);
    if (s->hub)
        gw_cluster_hub_set(s->hub, c);
    return old;
}

/* ---- signals ------------------------------------------------------------------------------ */

/* SIGTERM, SIGINT and SIGQUIT: a graceful stop, the second one (of any of them) at once.
 * SIGQUIT stops gracefully as it does in nginx and nghttpx; SIGTERM does too here, because it
 * is what systemd and Kubernetes send to stop a service. */
static void on_stop_signal(gw_server_t *s, int signum)
{
    s->signals_seen++;
    GW_LOG_INFO("signal", "signal=%s action=%s",
                signum == SIGINT    ? "SIGINT"
                : signum == SIGQUIT ? "SIGQUIT"
                                    : "SIGTERM",
                s->signals_seen == 1 ? "graceful_stop" : "stop_now");
    if (s->signals_seen == 1)
        gw_server__sd_notify("STOPPING=1");
    gw_server_stop(s, s->signals_seen == 1);
}

static void on_hup(gw_server_t *s)
{
    if (s->signals_seen) {
        GW_LOG_INFO("signal", "signal=SIGHUP action=ignored reason=stopping");
        return;
    }
    GW_LOG_INFO("signal", "signal=SIGHUP action=reload");
    gw_server__sd_notify("RELOADING=1");
    (void)gw_server_reload(s);
    gw_server__sd_notify("READY=1");
}

static void on_usr2(gw_server_t *s)
{
    if (s->signals_seen || atomic_load(&s->stop_request) != GW_STOP_NONE) {
        GW_LOG_INFO("signal", "signal=SIGUSR2 action=ignored reason=stopping");
        return;
    }
    GW_LOG_INFO("signal", "signal=SIGUSR2 action=upgrade");
    gw_server__upgrade_start(s);
}

void gw_server__drain(gw_server_t *s)
{
    s->ready = 0;
    int cur = GW_STOP_NONE;
    if (!atomic_compare_exchange_strong(&s->stop_request, &cur, GW_STOP_DRAIN))
        return;
    uv_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->workers_len; i++)
        if (s->workers[i] && s->workers[i]->wake_open)
            uv_async_send(&s->workers[i]->wake);
    uv_mutex_unlock(&s->lock);
}

/* SIGUSR1: reopen the log files (logrotate's convention, as nginx). The per-worker counters it
 * used to print are metrics now (admin.h). */
static void on_usr1(gw_server_t *s)
{
    int rv = gw_front_alog_reopen(&s->alog);
    GW_LOG_INFO("signal", "signal=SIGUSR1 action=reopen_logs result=%s",
                rv < 0 ? gw_errname(rv) : "ok");
}

/* The per-client tables are shared by the workers: one line for them, not one per worker. */
void gw_server__log_rate_tables(gw_server_t *s, const char *when)
{
    gw_bucket_table_t *c = s->gen->clients ? s->gen->clients->t : NULL;
    gw_bucket_table_t *r = s->gen->rates ? s->gen->rates->t : NULL;
    if (!c && !r)
        return;
    GW_LOG_INFO("rate_tables",
                "when=%s clients_size=%zu clients_evictions=%llu clients_refused=%llu "
                "rates_size=%zu rates_evictions=%llu rate_table_refused=%llu",
                when, c ? gw_bucket_table_size(c) : 0,
                (unsigned long long)(c ? gw_bucket_table_evictions(c) : 0),
                (unsigned long long)(c ? gw_bucket_table_refused(c) : 0),
                r ? gw_bucket_table_size(r) : 0,
                (unsigned long long)(r ? gw_bucket_table_evictions(r) : 0),
                (unsigned long long)(r ? gw_bucket_table_refused(r) : 0));
}

static void on_main_wake(uv_async_t *a)
{
    (void)a;
}

static void handled_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGUSR2);
}

void gw_server_hold_signals(void)
{
    sigset_t set;
    handled_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Each signal read from the signalfd, in the order they came. */
static void on_signal_fd(uv_poll_t *h, int status, int events)
{
    (void)events;
    gw_server_t *s = h->data;
    if (status < 0)
        return;
    struct signalfd_siginfo si;
    while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGHUP:
            on_hup(s);
            break;
        case SIGUSR1:
            on_usr1(s);
            break;
        case SIGUSR2:
            on_usr2(s);
            break;
        default: /* SIGINT, SIGTERM, SIGQUIT */
            on_stop_signal(s, (int)si.ssi_signo);
            break;
        }
    }
}

int gw_server_run(gw_server_t *s)
{
    int rv = 0;
    if (uv_loop_init(&s->main_loop) != 0)
        return GW_E_NOMEM;
    /* The handled signals stay blocked on every thread (gw_server_hold_signals, before the
     * listeners were bound; the workers and the admin's threads inherit the block) and are
     * read here, from a signalfd: one that came before is read now; none has an asynchronous
     * handler. With libuv's handlers (uv_signal_t), TSan deferred a SIGHUP that came while
     * this thread ran and lost it 1 start in 240 (tests/integration/test_reload.py). */
    sigset_t handled;
    handled_signals(&handled);
    s->sig_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sig_fd < 0) {
        int e = errno;
        GW_LOG_ERROR("startup_failed", "reason=\"signalfd: %s\"", strerror(e));
        uv_loop_close(&s->main_loop);
        /* ENOMEM is the kernel's memory; the others (EMFILE, ENFILE at the descriptor limits,
         * ENODEV) are a system call that failed, GW_E_IO as for listen() or readlink() */
        return e == ENOMEM ? GW_E_NOMEM : GW_E_IO;
    }
    uv_poll_init(&s->main_loop, &s->sig_poll, s->sig_fd);
    s->sig_poll.data = s;
    uv_poll_start(&s->sig_poll, UV_READABLE, on_signal_fd);
    uv_async_init(&s->main_loop, &s->main_wake, on_main_wake);
    gw_server__heap_start(s);          /* before any worker may go quiet */
    gw_server__inherit_admin_close(s); /* the admin listener did not want it */
    if (gw_cluster_hub_new(&s->main_loop, &s->hub) < 0)
        GW_LOG_ERROR("cluster_failed", "reason=\"out of memory\"");
    gw_server__cluster_apply(s);
#if GW_HAVE_ACME
    if (gw_acme_new(&s->main_loop, &s->acme) == 0) {
        gw_acme_set_cluster(s->acme, s->cluster);
        gw_acme_set_counters(s->acme, &s->acme_counters);
        gw_acme_apply(s->acme, s->gen->cfg, s->gen->stores);
    } else
        GW_LOG_ERROR("acme_failed", "reason=\"out of memory\"");
#endif
    unsigned started = 0;
    for (unsigned i = 0; i < s->workers_len; i++) {
        rv = gw_server__worker_start(s, i, &s->workers[i]);
        if (s->workers[i] && rv == 0)
            started++;
        if (rv < 0)
            break;
    }
    if (rv < 0) {
        /* stop the ones that run; then also clean the half-started one */
        gw_server_stop(s, 0);
        for (unsigned i = 0; i < started; i++)
            uv_thread_join(&s->workers[i]->thread);
        gw_worker_t *w = s->workers[started];
        if (w) {
            gw_server__worker_stop(w, GW_STOP_NOW);
            gw_server__worker_conn_gone(w);
            uv_run(&w->f.loop, UV_RUN_DEFAULT);
        }
    } else {
        s->ready = 1;
        const char *pid_path = s->gen->cfg->pid_file;
        if (pid_path && gw_server__pid_file_write(pid_path, (long)getpid()) < 0)
            GW_LOG_ERROR("pid_file_failed", "path=%s reason=\"%s\"", pid_path, strerror(errno));
        gw_server__sd_notify("READY=1");
        gw_server__upgrade_ready(); /* started by an upgrade: the old process may go */
        /* the main loop keeps handling signals while the workers drain, so that a second
         * signal still stops them at once */
        while (atomic_load(&s->workers_done) < s->workers_len)
            uv_run(&s->main_loop, UV_RUN_ONCE);
        for (unsigned i = 0; i < s->workers_len; i++)
            uv_thread_join(&s->workers[i]->thread);
    }
    gw_server__log_rate_tables(s, "stop");
#if GW_HAVE_ACME
    gw_acme_close(s->acme);
    s->acme = NULL;
#endif
    gw_cluster_close(cluster_swap(s, NULL));
    gw_cluster_hub_close(s->hub);
    s->hub = NULL;
    uv_close((uv_handle_t *)&s->sig_poll, NULL);
    uv_close((uv_handle_t *)&s->main_wake, NULL);
    gw_server__heap_close(s); /* the run under way, if any, ends in the loop below */
    uv_run(&s->main_loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->main_loop);
    close(s->sig_fd);
    return rv;
}

void gw_server__cluster_apply(gw_server_t *s)
{
    const gw_cfg_cluster_t *cfg = &s->gen->cfg->cluster;
    if (s->cluster && gw_cluster_same(s->cluster, cfg))
        return;
    gw_cluster_t *c = NULL;
    if (cfg->enabled && gw_cluster_new(&s->main_loop, cfg, s->keyring, &c) < 0)
        GW_LOG_ERROR("cluster_failed", "redis=%s reason=\"out of memory\"", cfg->redis.text);
    gw_cluster_carry(c, s->cluster); /* the instance count, before the hub reads c's share */
    gw_cluster_t *old = cluster_swap(s, c);
#if GW_HAVE_ACME
    gw_acme_set_cluster(s->acme, c); /* before the old one's calls answer GW_E_CLOSED */
#endif
    if (old) {
        gw_cluster_close(old);
        if (!c) /* no cluster any more: each listener rotates its own keys again */
            gw_tls_keyring_set(s->keyring, NULL, 0);
        GW_LOG_INFO("cluster_stop", "reason=reload");
    }
}

int gw_server_set_argv(gw_server_t *s, char *const *argv)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n <= 0)
        return GW_E_IO;
    path[n] = 0;
    size_t argc = 0;
    while (argv[argc])
        argc++;
    s->exe = gw_malloc((size_t)n + 1);
    s->argv = gw_calloc(argc + 1, sizeof(char *));
    if (!s->exe || !s->argv)
        return GW_E_NOMEM;
    memcpy(s->exe, path, (size_t)n + 1);
    for (size_t i = 0; i < argc; i++) {
        s->argv[i] = gw_malloc(strlen(argv[i]) + 1);
        if (!s->argv[i])
            return GW_E_NOMEM;
        strcpy(s->argv[i], argv[i]);
    }
    return 0;
}

int gw_server_ready(const gw_server_t *s)
{
    return atomic_load(&s->ready);
}

void gw_server_stop(gw_server_t *s, int graceful)
{
    s->ready = 0;
    int how = graceful ? GW_STOP_GRACEFUL : GW_STOP_NOW;
    int cur = atomic_load(&s->stop_request);
    while (cur < how && !atomic_compare_exchange_weak(&s->stop_request, &cur, how))
        ;
    uv_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->workers_len; i++)
        if (s->workers[i] && s->workers[i]->wake_open)
            uv_async_send(&s->workers[i]->wake);
    uv_mutex_unlock(&s->lock);
    uv_async_send(&s->main_wake);
}

void gw_server_del(gw_server_t *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->workers_len && s->workers; i++)
        gw_server__worker_free(s->workers[i]);
    gw_free(s->workers);
    for (size_t i = 0; i < s->socks_len; i++) {
        for (unsigned k = 0; k < s->socks[i]->n; k++)
            if (s->socks[i]->fds[k] >= 0)
                close(s->socks[i]->fds[k]);
        gw_free(s->socks[i]->fds);
        gw_free(s->socks[i]->live);
        gw_free(s->socks[i]);
    }
    gw_free(s->socks);
    gw_server__inherit_admin_close(s);
    gw_free(s->exe);
    if (s->argv)
        for (char **a = s->argv; *a; a++)
            gw_free(*a);
    gw_free(s->argv);
    gw_front_alog_free(&s->alog);
    gw_server__gen_unref(s->gen);
    gw_tls_keyring_del(s->keyring);
    gw_server__heap_free(s);
    uv_mutex_destroy(&s->lock);
    uv_mutex_destroy(&s->snap_mu);
    uv_cond_destroy(&s->snap_cond);
    gw_free(s);
}
