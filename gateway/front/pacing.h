/* front/pacing.h — how much an HTTP/2 connection frames at a time (front/h2_stream.c), read
 * from the socket's TCP state (Linux: TCP_NOTSENT_LOWAT, TCP_INFO).
 *
 * Apart from front_internal.h because <linux/tcp.h>, which has the fields of TCP_INFO that
 * glibc's <netinet/tcp.h> lacks, and libuv's headers (which include <netinet/tcp.h>) cannot
 * share a file: these take the socket's descriptor. */
#ifndef GW_FRONT_PACING_H
#define GW_FRONT_PACING_H

#include <stddef.h>

/* TCP_NOTSENT_LOWAT (tcp(7)) of fd: the kernel takes at most lowat bytes beyond what it has
 * sent, and reports the socket writable when less than half of that is left. 0, or a negative
 * errno. */
int gw_pacing_set_lowat(int fd, size_t lowat);

/* What a write to fd would have the kernel take now: the bytes it may send at once (the
 * congestion window's and the peer's receive window's room, whichever is less) plus the
 * room left under lowat (the socket's TCP_NOTSENT_LOWAT) for bytes it keeps unsent. 0 when
 * the socket's state cannot be read. */
size_t gw_pacing_room(int fd, size_t lowat);

#endif
