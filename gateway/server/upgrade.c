/* server/upgrade.c — binary upgrade without a failed request, and the pid file.
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
 * one logs `event=upgrade_failed` with the reason and keeps serving.
 *
 * The admin listener's socket is passed on the same way (the entry "admin=fd", or "admin=-1"
 * when there is none: a gateway older than this entry closes it as an unknown address), so that
 * nothing but the new process and its parent ever listen on an address of ours: a gateway refuses
 * to start where another process listens (generation.c's probe, and gw_server_admin_socket), or
 * when the pid file names another running h2gate. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
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
#include "server/server_internal.h"

#define UPGRADE_READY_MS 60000

extern char **environ;

/* ---- the pid file --------------------------------------------------------------------------- */

/* Written whole: a temporary file renamed over it, so a reader never sees half. The temporary
 * name is unpredictable and created exclusively (mkostemp: O_CREAT|O_EXCL, which never follows
 * a symlink): the gateway often runs as root, and a name such as `<path>.<pid>.tmp` opened with
 * O_TRUNC would let whoever can write into the pid file's directory plant a symlink there and
 * have it overwrite the symlink's target. rename(2) replaces a symlink at the final name too,
 * instead of writing through it. */
int gw_server__pid_file_write(const char *path, long pid)
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

long gw_server__pid_file_read(const char *path)
{
    char buf[32] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO there blocks nothing */
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* The command name of a process (/proc/PID/comm, "self" for ours) into out: 0, or -1. */
static int proc_comm(const char *pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    out[n] = 0;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

/* The pid file must not name another running gateway: a second instance would replace it and
 * remove it at exit, under the first one. Our own pid (a container's pid 1 again after a
 * restart) and the parent of a binary upgrade do not count; nor does a pid whose process is
 * gone, or that now names another program (a file left by a crash, its number reused). */
int gw_server__pid_file_check(const gw_server_t *s, const char *path)
{
    long pid = gw_server__pid_file_read(path);
    if (pid <= 0 || pid > INT_MAX || pid == (long)getpid() ||
        (s->upgrade_parent && pid == (long)s->upgrade_parent))
        return 0;
    if (kill((pid_t)pid, 0) < 0 && errno != EPERM)
        return 0;
    char num[24], theirs[64], ours[64];
    snprintf(num, sizeof(num), "%ld", pid);
    /* unreadable (another user's process behind hidepid): taken as running */
    if (proc_comm(num, theirs, sizeof(theirs)) == 0 && proc_comm("self", ours, sizeof(ours)) == 0 &&
        strcmp(theirs, ours) != 0)
        return 0;
    GW_LOG_ERROR("pid_file_in_use",
                 "path=%s pid=%ld reason=\"the pid file names a running process: another "
                 "instance runs with it\"",
                 path, pid);
    return GW_E_EXIST;
}

/* ---- the new process: inherited sockets ------------------------------------------------------ */

static int is_listening(int fd)
{
    int acc = 0;
    socklen_t al = sizeof(acc);
    return fd >= 3 && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc;
}

/* Parse H2GATE_LISTEN_FDS into s->inh and s->inh_admin (and forget the variable: a later
 * upgrade makes its own). A number that is not a listening TCP socket is ignored. */
void gw_server__inherit_parse(gw_server_t *s)
{
    s->inh_admin = -1;
    const char *env = getenv("H2GATE_LISTEN_FDS");
    if (!env)
        return;
    if (getenv("H2GATE_READY_FD"))
        s->upgrade_parent = (int)getppid();
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
        if (!strcmp(item, "admin")) {
            /* without this entry the parent is a gateway older than it: its admin socket is
             * joined with SO_REUSEPORT, as it expects (gw_server_admin_socket) */
            s->admin_passed = 1;
            if (is_listening(atoi(eq + 1))) {
                s->inh_admin = atoi(eq + 1);
                (void)fcntl(s->inh_admin, F_SETFD, FD_CLOEXEC);
            }
            continue;
        }
        char *save2 = NULL;
        for (char *num = strtok_r(eq + 1, ",", &save2); num; num = strtok_r(NULL, ",", &save2)) {
            int fd = atoi(num);
            if (!is_listening(fd))
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
int gw_server__inherit_take(gw_server_t *s, const gw_cfg_addr_t *addr)
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

unsigned gw_server__inherit_count(const gw_server_t *s, const gw_cfg_addr_t *addr)
{
    unsigned n = 0;
    for (size_t i = 0; i < s->inh_len; i++)
        n += s->inh[i].fd >= 0 && strcmp(s->inh[i].addr, addr->text) == 0;
    return n;
}

/* Inherited sockets the configuration does not use: closed (their addresses are gone). */
void gw_server__inherit_close_rest(gw_server_t *s)
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

/* Whether fd is bound to a (family, port and address; the scope of a link-local one). */
static int bound_to(int fd, const gw_cfg_addr_t *a)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 || ss.ss_family != a->ss.ss_family)
        return 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)&ss, *y = (const void *)&a->ss;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)&ss, *y = (const void *)&a->ss;
        return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
               !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
    }
    return 0;
}

int gw_server_admin_socket(gw_server_t *s, const gw_cfg_addr_t *addr, int *out)
{
    *out = -1;
    int fd = s->inh_admin;
    s->inh_admin = -1;
    if (fd >= 0 && bound_to(fd, addr)) {
        GW_LOG_INFO("socket_inherited", "address=%s admin=yes", addr->text);
        *out = s->admin_fd = fd;
        return 0;
    }
    if (fd >= 0)
        close(fd); /* the old process's admin address is not ours any more */
    /* a new address, or a parent that did not pass its admin socket (it holds the address
     * with SO_REUSEPORT, and the new socket joins it) */
    int e = s->upgrade_parent && !s->admin_passed ? 0 : gw_server__addr_probe(addr);
    if (e == -EADDRINUSE) {
        gw_server__log_addr_in_use("admin_failed", addr->text, EADDRINUSE);
        return GW_E_EXIST;
    }
    if ((e = gw_server__bind_reuseport(addr, 64, &fd)) < 0) {
        GW_LOG_ERROR("admin_failed", "address=%s reason=\"%s\"", addr->text, strerror(-e));
        return GW_E_IO;
    }
    *out = s->admin_fd = fd;
    return 0;
}

void gw_server__inherit_admin_close(gw_server_t *s)
{
    if (s->inh_admin >= 0)
        close(s->inh_admin);
    s->inh_admin = -1;
}

/* The new process is serving: say so to the old one. */
void gw_server__upgrade_ready(void)
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
    if (pid_path && gw_server__pid_file_read(pid_path) != (long)getpid())
        (void)gw_server__pid_file_write(pid_path, (long)getpid());
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
        gw_server__sd_notify(msg);
        gw_server__drain(s);
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

/* "ADDRESS=fd,fd;...;admin=fd" of every socket our workers and the admin listener listen on
 * (admin=-1 when there is none), and their numbers into fds. */
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
    int admin = s->admin_fd >= 0 && n < fds_cap ? s->admin_fd : -1;
    int w = snprintf(env + len, cap - len, "%sadmin=%d", len ? ";" : "", admin);
    if (w > 0 && (size_t)w < cap - len && admin >= 0)
        fds[n++] = admin;
    return n;
}

void gw_server__upgrade_start(gw_server_t *s)
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
        /* the child: only async-signal-safe calls until exec. The handled signals are
         * blocked on every thread of ours (process.c reads them from a signalfd); the new
         * program starts with none blocked, as any program would. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
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
