/* front/proxy_header.h — the PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and
 * 2) that an L4 balancer in front of a listener writes before the client's bytes, naming the
 * client's address: sans-IO, fed the first bytes of a connection. */
#ifndef GW_FRONT_PROXY_HEADER_H
#define GW_FRONT_PROXY_HEADER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Longest header accepted: a v1 line is at most 107 bytes (spec §2.1); a v2 header is 16 bytes
 * and its address block, whose TLVs we skip, up to this many bytes in all. */
#define GW_PROXY_HDR_V2_MAX 1024

typedef struct {
    int version; /* 1 or 2 */
    int local;   /* no address to take: v1 UNKNOWN, v2 LOCAL or an unspecified/unix family
                    (health checks of the balancer itself): keep the socket's peer */
    struct sockaddr_storage src, dst; /* the client, and the address it connected to */
    socklen_t src_len, dst_len;
} gw_proxy_hdr_t;

/* Parse the header at the start of buf[0..len). Returns its length (the client's bytes start
 * after it) and fills *out; 0 when more bytes are needed to decide; GW_E_PARSE when buf does not
 * start with a valid header (*why, static, says what is wrong). Never reads past len. */
ssize_t gw_proxy_hdr_parse(const uint8_t *buf, size_t len, gw_proxy_hdr_t *out, const char **why);

#endif
