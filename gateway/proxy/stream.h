/* proxy/stream.h — the client-stream interface: one request/response exchange with a client,
 * whatever protocol carries it. The front implements it twice (an HTTP/2 stream, an HTTP/1.1
 * request on a keep-alive connection) so that the translator has one code path for both.
 *
 * Lifetime: the front creates the stream when a request head is complete and calls
 * gw_proxy_request(); request body bytes follow through gw_proxy_body() and the end of the
 * request through gw_proxy_body_end(). The stream stays valid until the front calls
 * gw_proxy_stream_closed() (client reset, disconnect, or response and request both done).
 * The proxy answers through `ops`, at once or later from the event loop.
 *
 * Re-entrance rules, both ways: an op never calls back into the proxy synchronously (the
 * front defers what follows from it — flushing HTTP/2 frames, the next pipelined request,
 * stream_closed — to the loop), so the proxy may call ops from anywhere, including from inside
 * gw_proxy_request() and gw_proxy_body(). The proxy never calls the front's input functions.
 */
#ifndef GW_PROXY_STREAM_H
#define GW_PROXY_STREAM_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/alog.h"
#include "common/buf.h"
#include "config/config.h"

/* Fields are gw_field_t (common/buf.h): lowercase names for HTTP/2, as received for
 * HTTP/1.1 (compare with gw_slice_eq_nocase). */

/* The protocol a request came in: what the proxy decides on (cookie joining, the Host check of
 * RFC 9113 §8.3.1, Via, how an early answer ends the stream). */
typedef enum {
    GW_REQ_HTTP1 = 1, /* HTTP/1.0 or HTTP/1.1 */
    GW_REQ_H2 = 2,
} gw_req_proto_t;
/* "http/1.1" or "h2" (the ALPN names), for logs. */
const char *gw_req_proto_str(gw_req_proto_t p);

/* A request head in version-neutral form. Slices stay valid until the stream closes. */
typedef struct {
    gw_slice_t method;
    gw_slice_t scheme; /* HTTP/1.1: from the listener; HTTP/2: :scheme (http or https,
                        * as the client said: use gw_cstream_t.tls for what is true) */
    /* :authority, or the Host field of HTTP/1.1 (or the absolute-form target's authority);
     * empty or gw_http_is_authority: the front checked it (h2/validate.c; h1/head.c checks
     * every Host and the target), so the proxy does not again. An HTTP/2 host field standing
     * in for a missing :authority is not checked by the front: the translator does. */
    gw_slice_t authority;
    gw_slice_t path;          /* :path, or the request-target of HTTP/1.1 */
    const gw_field_t *fields; /* regular fields (HTTP/2: without pseudo-headers) */
    size_t fields_len;
    int64_t content_length; /* -1 when unknown (chunked or HTTP/2 without content-length) */
    int end_stream;         /* no request body follows */
    gw_req_proto_t proto;
    /* gw_proxy_route() of authority and path (NULL: no route, answered 404), looked up once
     * by the front, which also needs it for the route's response_rate bucket */
    const gw_cfg_route_t *route;
    /* "websocket" when the request asks for a WebSocket (an HTTP/1.1 Upgrade, or RFC 8441's
     * :protocol of an extended CONNECT); empty otherwise */
    gw_slice_t protocol;
    int pushed; /* the gateway promised it (HTTP/2 server push): its answer pushes nothing */
} gw_req_head_t;

typedef struct gw_cstream gw_cstream_t;
/* The error pages of a request's route on the worker (proxy/errpage.c). */
typedef struct gw_proxy_errpages gw_proxy_errpages_t;

/* How the proxy aborts a stream (ops->reset). The front maps them to its protocol: HTTP/2
 * RST_STREAM with the RFC 9113 §7 code; HTTP/1.1 closes the connection (NO_ERROR after a
 * complete response also closes: the request body left unread cannot be skipped safely). */
typedef enum {
    GW_CS_RESET_NO_ERROR = 0, /* response complete, request body not wanted (§8.1) */
    GW_CS_RESET_PROTOCOL = 1, /* malformed request (§8.1.1) */
    GW_CS_RESET_INTERNAL = 2, /* the origin failed after the response head was sent */
    GW_CS_RESET_CANCEL = 8,   /* given up (stalled client, gateway stopping) */
} gw_cs_reset_t;

typedef struct {
    /* Send the final response head. content_length -1 = unknown (HTTP/1.1 uses chunked). With
     * end_stream the response has no body. 0 or a negative GW_E* code. */
    int (*respond)(gw_cstream_t *s, unsigned status, const gw_field_t *fields, size_t n,
                   int64_t content_length, int end_stream);
    /* Send an interim (1xx) head, e.g. 103 Early Hints. 0 or a negative code. */
    int (*interim)(gw_cstream_t *s, unsigned status, const gw_field_t *fields, size_t n);
    /* Send body bytes by reference: the front takes its own reference on buf. buf may be NULL
     * when len is 0 (end_stream alone). */
    int (*body)(gw_cstream_t *s, gw_rbuf_t *buf, size_t off, size_t len, int end_stream);
    /* Send trailers; ends the response. */
    int (*trailers)(gw_cstream_t *s, const gw_field_t *fields, size_t n);
    /* Abort the stream (see gw_cs_reset_t). gw_proxy_stream_closed follows later. */
    void (*reset)(gw_cstream_t *s, gw_cs_reset_t code);
    /* n request body bytes given to gw_proxy_body() have been passed on (written to the
     * origin, or dropped): the front may let the client send that many more (HTTP/2
     * WINDOW_UPDATE; HTTP/1.1 reads again). */
    void (*credit)(gw_cstream_t *s, size_t n);
    /* Response bytes of this stream accepted by the front and not yet written to the client
     * socket or framed (the proxy's bound on what it pulls from the origin). */
    size_t (*pending)(gw_cstream_t *s);
    /* The stream's current RFC 9218 urgency, 0 (most urgent) .. 7, as the front holds it (the
     * request's `priority` field, parsed once by the front, then PRIORITY_UPDATE frames).
     * Orders the origin queue. Optional: NULL (or a value out of range) is the default, 3. */
    int (*urgency)(gw_cstream_t *s);
    /* HTTP/2 server push (RFC 9113 §8.4; NULL for HTTP/1.1): promise the response to req (a
     * GET with :scheme, :authority, :path and fields) on this stream. The PUSH_PROMISE is
     * queued at once, ahead of anything the proxy sends on the stream afterwards, and the
     * promised request comes back later, from the loop, through gw_proxy_request() as a
     * stream of its own (req->pushed set). 0, or a negative code and nothing was promised:
     * GW_E_UNSUPPORTED (the client disabled push), GW_E_LIMIT (h2.max_pushes on this
     * connection, or as many pushes open as the client allows), GW_E_EXIST (promised on this
     * connection before), GW_E_CLOSED (GOAWAY), GW_E_NOENT (the stream can no longer carry a
     * promise), GW_E_INVAL, GW_E_NOMEM. */
    int (*push)(gw_cstream_t *s, const gw_req_head_t *req);
} gw_cstream_ops_t;

struct gw_cstream {
    const gw_cstream_ops_t *ops;
    void *impl;                  /* the front's connection/stream */
    const char *peer;            /* client address "ip:port", for logs */
    const char *peer_ip;         /* client address without port, for X-Forwarded-For */
    const struct sockaddr *addr; /* client address, for consistent hashing */
    int head_only;               /* the request was HEAD: the front drops body bytes */
    void *proxy_data;            /* the proxy's own state for this stream */
    gw_alog_t *log; /* the front's record of the request (access log, metrics); the proxy adds
                       the route, the origin side, and forwards log->id as x-request-id */
    /* the client came through TLS: the only source of the scheme the origin is told
     * (X-Forwarded-Proto, Forwarded proto=), never the request's :scheme */
    int tls;
    int tunnel;   /* the front made it a WebSocket tunnel (counted in its connection's tunnels) */
    int no_hints; /* its listener says early_hints: false: the gateway makes no 103 for it */
    int no_push;  /* its listener says push: false */
    /* the gateway's own stream (a background revalidation, revalidate.c): its answer reaches
     * no client, so nothing is compressed for it, nor counted as a client's answer */
    int internal;
    /* The client certificate of a TLS connection (listen `client_auth`, tls/), for the header
     * rules' $tls_client_subject and $tls_client_verify and the access log:
     * tls_client_verify is "SUCCESS" (a certificate was sent and verified), "FAILED:reason"
     * (sent, refused by the verification; only under mode optional) or "NONE" (none sent or
     * none asked for); tls_client_subject is the certificate's subject (RFC 4514 text) or "".
     * Both NULL on a cleartext connection. They live as long as the connection. */
    const char *tls_client_verify;
    const char *tls_client_subject;
    /* the listener it came in on (hsts, redirect_https); NULL: none (tests) */
    const gw_cfg_listen_t *listen;
    /* set by gw_proxy_request: the error pages of the request's route (or the top level's) */
    const gw_proxy_errpages_t *error_pages;
    /* RFC 9440 §2: the values of Client-Cert (the verified leaf's DER as a Byte Sequence) and
     * Client-Cert-Chain (a List of Byte Sequences: the intermediates of the verification),
     * empty when no certificate verified (or, for the chain, the leaf's issuer is the trust
     * anchor); a resumed session gives the same as its full handshake. They live as long as
     * the connection. */
    gw_slice_t tls_client_cert;
    gw_slice_t tls_client_cert_chain;
    /* the request's host is served by another certificate entry of the listener than the one
     * the TLS handshake chose by SNI, and one of them asks for client certificates
     * (gw_tls_misdirected): answered 421 (gw_proxy_request) */
    int misdirected;
};

#endif
