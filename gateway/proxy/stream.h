/* proxy/stream.h — the client-stream interface: one request/response exchange with a client,
 * whatever protocol carries it. The front implements it twice (an HTTP/2 stream, an HTTP/1.1
 * request on a keep-alive connection) so that the translator has one code path for both.
 *
 * Lifetime: the front creates the stream when a request head is complete and calls
 * gw_proxy_request(); the stream stays valid until the front calls gw_proxy_stream_closed()
 * (client reset, disconnect, or the response fully handed over). The proxy answers through
 * `ops`, at once or later from the event loop.
 */
#ifndef GW_PROXY_STREAM_H
#define GW_PROXY_STREAM_H

#include <stdint.h>

#include "common/buf.h"

/* Fields are gw_field_t (common/buf.h): lowercase names for HTTP/2, as received for
 * HTTP/1.1 (compare with gw_slice_eq_nocase). */

/* A request head in version-neutral form. Slices stay valid until the stream closes. */
typedef struct {
    gw_slice_t method;
    gw_slice_t scheme;        /* "https" on TLS listeners, else "http" */
    gw_slice_t authority;     /* :authority, or the Host field of HTTP/1.1 */
    gw_slice_t path;          /* :path, or the request-target of HTTP/1.1 */
    const gw_field_t *fields; /* regular fields (HTTP/2: without pseudo-headers) */
    size_t fields_len;
    int64_t content_length; /* -1 when unknown (chunked or HTTP/2 without content-length) */
    int end_stream;         /* no request body follows */
    const char *proto;      /* "h2" or "http/1.1", for logs */
} gw_req_head_t;

typedef struct gw_cstream gw_cstream_t;

typedef struct {
    /* Send the response head. content_length -1 = unknown (HTTP/1.1 uses chunked). With
     * end_stream the response has no body. 0 or a negative GW_E* code. */
    int (*respond)(gw_cstream_t *s, unsigned status, const gw_field_t *fields, size_t n,
                   int64_t content_length, int end_stream);
    /* Send body bytes by reference: the front takes its own reference on buf. */
    int (*body)(gw_cstream_t *s, gw_rbuf_t *buf, size_t off, size_t len, int end_stream);
} gw_cstream_ops_t;

struct gw_cstream {
    const gw_cstream_ops_t *ops;
    void *impl;       /* the front's connection/stream */
    const char *peer; /* client address, for logs */
    int head_only;    /* the request was HEAD: the front drops body bytes */
    void *proxy_data; /* the proxy's own state for this stream */
};

#endif
