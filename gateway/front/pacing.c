/* front/pacing.c — the socket side of HTTP/2 send pacing (front/pacing.h). */
#include "front/pacing.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

int gw_pacing_set_lowat(int fd, size_t lowat)
{
    int v = lowat > INT32_MAX ? INT32_MAX : (int)lowat;
    return setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v)) == 0 ? 0 : -errno;
}

size_t gw_pacing_room(int fd, size_t lowat)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    /* tcpi_snd_wnd is from Linux 5.4: an older kernel fills in less, and the room is unknown */
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd))
        return 0;
    /* in flight: sent once (retransmissions left out) and not yet acknowledged */
    uint64_t sent = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans;
    uint64_t flight = sent > ti.tcpi_bytes_acked ? sent - ti.tcpi_bytes_acked : 0;
    uint64_t rwnd = ti.tcpi_snd_wnd > flight ? ti.tcpi_snd_wnd - flight : 0;
    uint64_t cwnd = ti.tcpi_snd_cwnd > ti.tcpi_unacked
                        ? (uint64_t)(ti.tcpi_snd_cwnd - ti.tcpi_unacked) * ti.tcpi_snd_mss
                        : 0;
    uint64_t now = rwnd < cwnd ? rwnd : cwnd;
    uint64_t unsent = lowat > ti.tcpi_notsent_bytes ? lowat - ti.tcpi_notsent_bytes : 0;
    uint64_t room = now + unsent;
    return room > SIZE_MAX ? SIZE_MAX : (size_t)room;
}
