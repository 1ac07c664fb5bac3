/* server/check.c — what a configuration needs from the machine besides its sockets, checked
 * by the code start-up uses: the TLS upstreams' CA files, the access log, the pid file's
 * directory, and (for `h2gate -t`) the listeners' certificates and keys. Every problem becomes
 * a "FILE:LINE:COL: message" at the key that names the file, for -t, start-up and reload
 * alike: -t cannot say ok to a file that then fails to start. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "server/server_internal.h"

int gw_server__check_pid_file(const gw_config_t *cfg, gw_config_errors_t *errs)
{
    const char *path = cfg->pid_file;
    if (!path)
        return 0;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    if (dl >= sizeof(dir)) {
        gw_config_error_add(errs, &cfg->pid_file_at, "pid_file '%s' is too long", path);
        return GW_E_RANGE;
    }
    if (!slash)
        memcpy(dir, ".", 2);
    else if (dl == 0)
        memcpy(dir, "/", 2);
    else {
        memcpy(dir, path, dl);
        dir[dl] = 0;
    }
    struct stat st;
    const char *why = NULL;
    if (stat(dir, &st) < 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (access(dir, W_OK | X_OK) < 0)
        why = strerror(errno);
    if (why) {
        gw_config_error_add(errs, &cfg->pid_file_at,
                            "pid_file '%s' cannot be written in directory '%s': %s", path, dir,
                            why);
        return GW_E_IO;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        gw_config_error_add(errs, &cfg->pid_file_at, "pid_file '%s' is a directory", path);
        return GW_E_IO;
    }
    return 0;
}

int gw_server__check_files(const gw_config_t *cfg, gw_config_errors_t *errs)
{
    int rv = 0, r;
    /* the contexts the workers build from the same code: a CA file that fails there must fail
     * here, on the main thread, before anything changes */
    for (size_t i = 0; i < cfg->upstreams_len; i++)
        if (cfg->upstreams[i].tls && (r = gw_tls_client_ctx_check(&cfg->upstreams[i], errs)) < 0)
            rv = rv < 0 ? rv : r;
    const char *alog = cfg->access_log.path;
    if (alog && (r = gw_front_alog_probe(alog)) < 0) {
        gw_config_error_add(errs, &cfg->access_log.path_at,
                            "access_log path '%s' cannot be opened for appending: %s", alog,
                            strerror(-r));
        rv = rv < 0 ? rv : GW_E_IO;
    }
    return rv;
}

int gw_server_check(const gw_config_t *cfg, gw_config_errors_t *errs)
{
    /* in the order of gw_server__gen_new: files, then the listeners' certificates */
    int rv = gw_server__check_files(cfg, errs), r;
    for (size_t i = 0; i < cfg->listen_len; i++)
        if (cfg->listen[i].tls && (r = gw_tls_ctx_check(cfg->listen[i].tls, errs)) < 0)
            rv = rv < 0 ? rv : r;
    if ((r = gw_server__check_pid_file(cfg, errs)) < 0)
        rv = rv < 0 ? rv : r;
    return rv;
}
