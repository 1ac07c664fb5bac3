/* h2gate — HTTP/2 edge gateway. main.c: command line, config, signals, workers. */
#include <fcntl.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "config/config.h"
#include "admin/admin.h"
#include "server/server.h"
#include "tls/tls.h"
#include "gw_version.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: h2gate [-c FILE] [-t] [--check-config FILE] [--version] [--help]\n"
               "\n"
               "  -c, --config FILE        run with this config (default: the embedded one)\n"
               "  -t, --test               check the config (-c FILE, or the embedded one) and\n"
               "                           exit 0 or 1, as nginx -t\n"
               "      --check-config FILE  check FILE, print what is wrong, exit 0 or 1\n"
               "      --print-default-config  print the embedded default config and exit\n"
               "  -V, --version            print the version, compiler, meson options and library\n"
               "                           versions (built with, running) and exit\n"
               "  -h, --help               this text\n");
}

/* The pid file is written by the server once it serves (server/upgrade.c); removed at exit
 * only while it still names this process (an upgrade's new process replaced it). */
static void pid_file_remove(const char *path)
{
    char buf[32] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0 && strtol(buf, NULL, 10) == (long)getpid())
        unlink(path);
}

static int load(const char *path, gw_config_t **cfg)
{
    gw_config_errors_t errs = {0};
    int rv = path ? gw_config_load_file(path, cfg, &errs) : gw_config_load_default(cfg, &errs);
    for (size_t i = 0; i < errs.len; i++)
        fprintf(stderr, "%s\n", errs.msgs[i]);
    if (rv < 0 && errs.len == 0)
        fprintf(stderr, "%s: %s\n", path ? path : "<embedded>", gw_strerror(rv));
    gw_config_errors_free(&errs);
    return rv;
}

/* -t and --check-config: the config loaded, then what start-up would open, opened by its code
 * (certificates, keys, CA files, logs). Returns the exit status. */
static int check(const char *path)
{
    gw_config_t *cfg = NULL;
    if (load(path, &cfg) < 0)
        return 1;
    gw_config_errors_t errs = {0};
    int rv = gw_server_check(cfg, &errs);
    for (size_t i = 0; i < errs.len; i++)
        fprintf(stderr, "%s\n", errs.msgs[i]);
    if (rv < 0 && errs.len == 0)
        fprintf(stderr, "%s: %s\n", path ? path : "<embedded>", gw_strerror(rv));
    gw_config_errors_free(&errs);
    gw_config_del(cfg);
    if (rv < 0)
        return 1;
    printf("%s: ok\n", path ? path : "<embedded>");
    return 0;
}

/* The gateway's life: the server and the admin listener started, run until stopped, the pid
 * file removed. Returns the exit status. */
/* glibc's heap gives the free top of an arena back (madvise, or brk) once it is over the trim
 * threshold, 128 KiB until a freed mmap'ed chunk raises it. A burst of 16 handshakes leaves
 * more than that: about every tenth connection gave memory back and the next ones faulted it
 * in again (resumed handshakes, hsload 16 clients: 0.08 madvise and 0.76-1.1 page faults per
 * connection, 0.02-0.04 with these values). A page load over a slow link holds about 2 MiB
 * of response data in the worker at its peak and frees it at the end: with 1 MiB kept, every
 * other page gave it back and faulted it in again (page scenario, 21 loads at 100 Mbit/s:
 * 2,500-10,000 page faults, 1,600 with 4 MiB kept, in each of 5 runs). Fixed values: up to
 * 4 MiB of free top stays in each arena (a worker's), and chunks up to 4 MiB come from the
 * heap (the dynamic threshold would rise to what was freed, up to 32 MiB). malloc_trim (the
 * cache's, and server/heap.c's once the whole gateway is quiet for heap.idle_trim) still gives
 * back all, the free chunks inside an arena too, which no threshold reaches.
 * An operator's GLIBC_TUNABLES or MALLOC_*_ variables win. */
static void heap_tune(void)
{
#ifdef __GLIBC__
    const char *t = getenv("GLIBC_TUNABLES");
    if ((t && strstr(t, "glibc.malloc.")) || getenv("MALLOC_TRIM_THRESHOLD_") ||
        getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TOP_PAD_"))
        return;
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
}

static int serve(const char *config_path, char **argv)
{
    heap_tune();
    gw_tls_alloc_init(); /* before the config's certificates reach OpenSSL */
    gw_config_t *cfg = NULL;
    if (load(config_path, &cfg) < 0)
        return 1;
    gw_log_set_level((gw_log_level_t)cfg->log_level);
    signal(SIGPIPE, SIG_IGN);

    gw_server_t *srv = NULL;
    unsigned workers = cfg->workers;
    char *pid_path = cfg->pid_file ? strdup(cfg->pid_file) : NULL;
    gw_server_hold_signals();          /* until gw_server_run handles them */
    int rv = gw_server_new(cfg, &srv); /* cfg is the server's from here */
    if (rv < 0) {
        GW_LOG_ERROR("startup_failed", "err=%s", gw_errname(rv));
        free(pid_path);
        return 1;
    }
    if (gw_server_set_argv(srv, argv) < 0)
        GW_LOG_WARN("upgrade_unavailable", "reason=\"the path of the binary is unknown\"");
    gw_admin_t *admin = NULL;
    const gw_cfg_admin_t *acfg = &gw_server_config(srv)->admin;
    if (acfg->enabled && (rv = gw_admin_start(srv, acfg, &admin)) < 0) {
        GW_LOG_ERROR("startup_failed", "err=%s", gw_errname(rv));
        gw_server_del(srv);
        free(pid_path);
        return 1;
    }
    GW_LOG_INFO("started", "version=%s config=%s workers=%u", GW_VERSION,
                gw_server_config(srv)->path, workers);
    rv = gw_server_run(srv);
    gw_admin_stop(admin);
    gw_server_del(srv);
    if (pid_path)
        pid_file_remove(pid_path);
    free(pid_path);
    GW_LOG_INFO("stopped", "status=%s", rv < 0 ? gw_errname(rv) : "ok");
    return rv < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", required_argument, NULL, 'C'},
        {"test", no_argument, NULL, 't'},
        {"print-default-config", no_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    const char *check_path = NULL;
    int test = 0;
    int c;
    while ((c = getopt_long(argc, argv, "c:tVh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config_path = optarg;
            break;
        case 'C':
            check_path = optarg;
            break;
        case 't':
            test = 1;
            break;
        case 'P':
            fputs(gw_config_default_yaml, stdout);
            return 0;
        case 'V':
            gw_version_print(stdout);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "h2gate: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    if (check_path || test)
        return check(check_path ? check_path : config_path);
    return serve(config_path, argv);
}
