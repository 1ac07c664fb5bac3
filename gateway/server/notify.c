/* server/notify.c — systemd's readiness protocol (sd_notify(3)) without libsystemd: when
 * NOTIFY_SOCKET names a unix datagram socket (a path, or '@' for the abstract namespace), one
 * datagram per state change: READY=1, RELOADING=1, STOPPING=1, MAINPID=. Best effort: a
 * supervisor that is gone changes nothing for the gateway. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "server/server_internal.h"

void gw_server__sd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
        return;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = 0; /* abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        GW_LOG_DEBUG("sd_notify_failed", "state=\"%s\" reason=\"%s\"", state, strerror(errno));
    close(fd);
}
