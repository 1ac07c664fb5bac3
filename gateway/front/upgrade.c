/* front/upgrade.c — binary upgrade without a failed request (issue 21 item 2), and the pid file.
 *
 * SIGUSR2 (old process, main thread): the binary at the path this process was started from
 * is started again with the same arguments, inheriting every listening socket (their numbers
 * in H2GATE_LISTEN_FDS, "ADDRESS=fd,fd;ADDRESS=fd", close-on-exec cleared for them only) and
 * the write end of a pipe (H2GATE_READY_FD). The new process builds its configuration, takes
 * the inherited sockets of its listener addresses (binding what is new), starts its workers,
 * writes the pid file, then "READY" into the pipe. The old process then stops accepting (its
 * copies of the sockets close; the kernel queues stay with the new process) and drains as on
 * a reload: HTTP/2 connections get GOAWAY once quiet, idle HTTP/1.1 ones a grace period, and
 * it exits when the last one is gone or at timeouts.graceful_shutdown. Under systemd it hands
 * the main pid over (MAINPID=). If the new process exits or stays silent for a minute, the old
 * one logs `event=upgrade_failed` with the reason and keeps serving. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"

#define UPGRADE_READY_MS 60000

extern char **environ;

/* ---- the pid file --------------------------------------------------------------------------- */

/* Written whole: a temporary file renamed over it, so a reader never sees half. The temporary
 * name is unpredictable and created exclusively (mkostemp: O_CREAT|O_EXCL, which never follows
 * a symlink): the gateway often runs as root, and a name such as `<path>.<pid>.tmp` opened with
 * O_TRUNC would let whoever can write into the pid file's directory plant a symlink there and
 * have it overwrite the symlink's target. rename(2) replaces a symlink at the final name too,
 * instead of writing through it. */
int gw_front__pid_file_write(const char *path, long pid)
{
    char tmp[4096], line[32];
    int n = snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return GW_E_RANGE;
    int len = snprintf(line, sizeof(line), "%ld\n", pid);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return GW_E_IO;
    int ok = fchmod(fd, 0644) == 0; /* mkostemp makes it 0600: the pid file is for everyone */
    ok &= write(fd, line, (size_t)len) == len;
    ok &= close(fd) == 0;
    if (!ok || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return GW_E_IO;
    }
    return 0;
}

long gw_front__pid_file_read(const char *path)
{
    char buf[32] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* ---- the new process: inherited sockets ------------------------------------------------------ */

/* Parse H2GATE_LISTEN_FDS into s->inh (and forget the variable: a later upgrade makes its own).
 * A number that is not a listening TCP socket is ignored. */
void gw_front__inherit_parse(gw_server_t *s)
{
    const char *env = getenv("H2GATE_LISTEN_FDS");
    if (!env)
        return;
    char *copy = gw_malloc(strlen(env) + 1);
    if (!copy)
        return;
    strcpy(copy, env);
    unsetenv("H2GATE_LISTEN_FDS");
    char *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strrchr(item, '=');
        if (!eq)
            continue;
        *eq = 0;
        char *save2 = NULL;
        for (char *num = strtok_r(eq + 1, ",", &save2); num; num = strtok_r(NULL, ",", &save2)) {
            int fd = atoi(num);
            int acc = 0;
            socklen_t al = sizeof(acc);
            if (fd < 3 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc)
                continue;
            gw_inherited_t *n = gw_realloc(s->inh, (s->inh_len + 1) * sizeof(*n));
            if (!n)
                break;
            s->inh = n;
            snprintf(s->inh[s->inh_len].addr, sizeof(s->inh[0].addr), "%s", item);
            s->inh[s->inh_len].fd = fd;
            (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
            s->inh_len++;
        }
    }
    gw_free(copy);
}

/* An inherited socket listening on addr (then it is ours), or -1. */
int gw_front__inherit_take(gw_server_t *s, const gw_cfg_addr_t *addr)
{
    for (size_t i = 0; i < s->inh_len; i++) {
        if (s->inh[i].fd < 0 || strcmp(s->inh[i].addr, addr->text) != 0)
            continue;
        int fd = s->inh[i].fd;
        s->inh[i].fd = -1;
        return fd;
    }
    return -1;
}

unsigned gw_front__inherit_count(const gw_server_t *s, const gw_cfg_addr_t *addr)
{
    unsigned n = 0;
    for (size_t i = 0; i < s->inh_len; i++)
        n += s->inh[i].fd >= 0 && strcmp(s->inh[i].addr, addr->text) == 0;
    return n;
}

/* Inherited sockets the configuration does not use: closed (their addresses are gone). */
void gw_front__inherit_close_rest(gw_server_t *s)
{
    for (size_t i = 0; i < s->inh_len; i++)
        if (s->inh[i].fd >= 0) {
            GW_LOG_INFO("inherited_socket_closed", "address=%s fd=%d", s->inh[i].addr,
                        s->inh[i].fd);
            close(s->inh[i].fd);
            s->inh[i].fd = -1;
        }
    gw_free(s->inh);
    s->inh = NULL;
    s->inh_len = 0;
}

/* The new process is serving: say so to the old one. */
void gw_front__upgrade_ready(void)
{
    const char *v = getenv("H2GATE_READY_FD");
    if (!v)
        return;
    int fd = atoi(v);
    unsetenv("H2GATE_READY_FD");
    if (fd < 3)
        return;
    ssize_t n;
    do
        n = write(fd, "READY\n", 6);
    while (n < 0 && errno == EINTR);
    close(fd);
}

/* ---- the old process: SIGUSR2 ------------------------------------------------------------- */

static void on_upgrade_handle_closed(uv_handle_t *h)
{
    gw_upgrade_t *u = h->data;
    if (--u->handles == 0)
        gw_free(u);
}

static void upgrade_end(gw_server_t *s)
{
    gw_upgrade_t *u = s->upgrade;
    s->upgrade = NULL;
    uv_timer_stop(&u->timer);
    uv_close((uv_handle_t *)&u->timer, on_upgrade_handle_closed);
    uv_close((uv_handle_t *)&u->pipe, on_upgrade_handle_closed);
}

/* Reap the child that gave up (it closed the pipe by exiting) and say why. */
static void upgrade_failed(gw_server_t *s, const char *why)
{
    gw_upgrade_t *u = s->upgrade;
    int st = 0;
    pid_t r = 0;
    for (int i = 0; i < 50 && r == 0; i++) { /* it is exiting: at most half a second */
        r = waitpid(u->child, &st, WNOHANG);
        if (r == 0)
            usleep(10000);
    }
    char how[64] = "still running";
    if (r == u->child && WIFEXITED(st))
        snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(st));
    else if (r == u->child && WIFSIGNALED(st))
        snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(st));
    GW_LOG_ERROR("upgrade_failed",
                 "new_pid=%ld reason=\"%s\" new_process=\"%s\" action=keep_serving", (long)u->child,
                 why, how);
    /* the new process may have replaced the pid file before it failed */
    const char *pid_path = s->gen->cfg->pid_file;
    if (pid_path && gw_front__pid_file_read(pid_path) != (long)getpid())
        (void)gw_front__pid_file_write(pid_path, (long)getpid());
    upgrade_end(s);
}

static void on_ready_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    gw_upgrade_t *u = h->data;
    *buf = uv_buf_init(u->buf + u->len, (unsigned)(sizeof(u->buf) - 1 - u->len));
}

static void on_ready_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    gw_upgrade_t *u = st->data;
    gw_server_t *s = u->srv;
    if (nread > 0) {
        u->len += (size_t)nread;
        u->buf[u->len] = 0;
        if (!strstr(u->buf, "READY\n"))
            return;
        pid_t child = u->child;
        upgrade_end(s);
        GW_LOG_INFO("upgrade_ready", "new_pid=%ld action=drain", (long)child);
        char msg[64];
        snprintf(msg, sizeof(msg), "MAINPID=%ld\nREADY=1", (long)child);
        gw_front__sd_notify(msg);
        gw_front__server_drain(s);
        return;
    }
    if (nread < 0)
        upgrade_failed(s, "the new process exited before it was ready");
}

static void on_ready_timeout(uv_timer_t *t)
{
    gw_upgrade_t *u = t->data;
    kill(u->child, SIGTERM);
    upgrade_failed(u->srv, "the new process was not ready within a minute");
}

/* "ADDRESS=fd,fd;..." of every socket our workers listen on, and their numbers into fds. */
static size_t listen_fds(gw_server_t *s, char *env, size_t cap, int *fds, size_t fds_cap)
{
    size_t n = 0, len = 0;
    uv_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->socks_len; i++) {
        gw_lsock_t *ls = s->socks[i];
        int first = 1;
        for (unsigned k = 0; k < ls->n; k++) {
            int fd = ls->live[k];
            if (fd < 0 || n == fds_cap)
                continue;
            int w = snprintf(env + len, cap - len, "%s%s%s%d", first && len ? ";" : "",
                             first ? ls->addr.text : "", first ? "=" : ",", fd);
            if (w < 0 || (size_t)w >= cap - len)
                break;
            len += (size_t)w;
            fds[n++] = fd;
            first = 0;
        }
    }
    uv_mutex_unlock(&s->lock);
    return n;
}

void gw_front__upgrade_start(gw_server_t *s)
{
    if (s->upgrade) {
        GW_LOG_WARN("upgrade_ignored", "reason=\"an upgrade is under way\" new_pid=%ld",
                    (long)s->upgrade->child);
        return;
    }
    if (!s->exe || !s->argv) {
        GW_LOG_ERROR("upgrade_failed", "reason=\"the path of the binary is unknown\"");
        return;
    }
    int fds[1024];
    char fdenv[16384] = "H2GATE_LISTEN_FDS=";
    size_t nfds = listen_fds(s, fdenv + 18, sizeof(fdenv) - 18, fds, 1024);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        GW_LOG_ERROR("upgrade_failed", "reason=\"pipe: %s\"", strerror(errno));
        return;
    }
    char readyenv[48];
    snprintf(readyenv, sizeof(readyenv), "H2GATE_READY_FD=%d", p[1]);
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = gw_calloc(ne + 3, sizeof(char *));
    gw_upgrade_t *u = gw_calloc(1, sizeof(*u));
    if (!envp || !u) {
        gw_free(envp);
        gw_free(u);
        close(p[0]);
        close(p[1]);
        GW_LOG_ERROR("upgrade_failed", "reason=\"out of memory\"");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "H2GATE_LISTEN_FDS=", 18) &&
            strncmp(environ[i], "H2GATE_READY_FD=", 16))
            envp[k++] = environ[i];
    envp[k++] = fdenv;
    envp[k++] = readyenv;
    envp[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: only async-signal-safe calls until exec */
        for (size_t i = 0; i < nfds; i++)
            fcntl(fds[i], F_SETFD, 0);
        fcntl(p[1], F_SETFD, 0);
        execve(s->exe, s->argv, envp);
        _exit(127);
    }
    gw_free(envp);
    close(p[1]);
    if (pid < 0) {
        GW_LOG_ERROR("upgrade_failed", "reason=\"fork: %s\"", strerror(errno));
        close(p[0]);
        gw_free(u);
        return;
    }
    u->srv = s;
    u->child = pid;
    uv_pipe_init(&s->main_loop, &u->pipe, 0);
    uv_timer_init(&s->main_loop, &u->timer);
    u->pipe.data = u->timer.data = u;
    u->handles = 2;
    s->upgrade = u;
    uv_pipe_open(&u->pipe, p[0]);
    uv_read_start((uv_stream_t *)&u->pipe, on_ready_alloc, on_ready_read);
    uv_timer_start(&u->timer, on_ready_timeout, UPGRADE_READY_MS, 0);
    GW_LOG_INFO("upgrade_started", "binary=%s new_pid=%ld sockets=%zu", s->exe, (long)pid, nfds);
}
