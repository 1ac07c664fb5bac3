/* proxy/proxy_internal.h — what the files of proxy/ share (not a public interface). */
#ifndef GW_PROXY_INTERNAL_H
#define GW_PROXY_INTERNAL_H

#include "back/back.h"
#include "common/list.h"
#include "proxy/proxy.h"

struct gw_proxy {
    const gw_config_t *cfg;
    uv_loop_t *loop;
    gw_back_t *back;  /* NULL once closed */
    uv_timer_t sweep; /* stall checks of paused exchanges */
    int sweep_open;
    gw_list_t paused;        /* ox_t waiting for their clients to read */
    uv_timer_t upload_sweep; /* request body timeouts of the streams in uploading */
    int upload_open;
    gw_list_t uploading;    /* px_t whose request body is still coming (timeouts.request_body) */
    uv_prepare_t acc_flush; /* once per loop turn: gathered small request body pieces go out */
    int acc_open;
    gw_list_t acc_pending; /* px_t with gathered pieces */
    gw_list_t inflight;    /* coalescible ox_t before their response head */
    gw_proxy_stats_t stats;
    gw_bucket_table_t *rates; /* request-rate buckets shared by all workers, or NULL */
    /* exchange.c: freed px_t / ox_t kept for the next requests (a proxied request allocates
     * neither), linked through their first word, at most PROXY_FREE_KEEP of each */
    void *px_free, *ox_free;
    size_t px_nfree, ox_nfree;
};

/* route.c: a gateway-made answer (404, 502, 503, 504) with a short text body. */
int gw_proxy__answer(gw_cstream_t *s, unsigned status, const char *text);

/* The same with extra fields after server and content-type (e.g. Retry-After). */
int gw_proxy__answer_fields(gw_cstream_t *s, unsigned status, const char *text,
                            const gw_field_t *extra, size_t n);

/* route.c: whether a request of client sa on route r (index idx in the config) is within the
 * route's request_rate; when not, *retry_after_s is the whole seconds until one more request
 * is allowed (at least 1). Always 1 when the route has no rate, t is NULL or the address is
 * not IP (unlimited). */
int gw_proxy__rate_allow(gw_bucket_table_t *t, const gw_cfg_route_t *r, size_t idx,
                         const struct sockaddr *sa, uint64_t now_us, unsigned *retry_after_s);

/* ---- coalesce.c: the rules of coalescing (RFC 9111 review at the top of the file) ---------- */

/* Whether request h on route r may lead or join a shared exchange: the route coalesces, GET or
 * HEAD, no content, no Expect, no Range/If-* conditionals, no request Cache-Control no-cache,
 * no-store or max-age=0 nor Pragma no-cache, no Authorization/Cookie unless coalesce_private. */
int gw_proxy__coalesce_request_ok(const gw_cfg_route_t *r, const gw_req_head_t *h);

/* The coalescing key of h on r (scheme, method, lowercased authority, path, and every value of
 * each of the route's coalesce_headers; with coalesce_private, whether it carries
 * Authorization), as a heap string of *len bytes (NUL-terminated; may
 * hold NUL bytes: compare with the length), owned by the caller (gw_free). NULL when the request
 * may not coalesce (gw_proxy__coalesce_request_ok) or out of memory. */
char *gw_proxy__coalesce_key(const gw_cfg_route_t *r, const gw_req_head_t *h, size_t *len);

/* Whether a response head (status, origin fields) may answer every request that joined its
 * exchange on route r: a heuristically cacheable status (RFC 9110 §15.1, not 206/304) or
 * explicit freshness; no Set-Cookie; no Cache-Control no-store/private/no-cache; no Vary
 * outside the route's coalesce_headers, no Vary: *. */
int gw_proxy__coalesce_shareable(const gw_cfg_route_t *r, unsigned status, const gw_field_t *f,
                                 size_t n, int authorized);

/* Whether the request carries an Authorization field. With `authorized` set (the exchange's
 * requests carry one: only with coalesce_private), gw_proxy__coalesce_shareable also asks for
 * Cache-Control public, s-maxage or must-revalidate (RFC 9111 §3.5). */
int gw_proxy__has_authorization(const gw_req_head_t *h);

/* FNV-1a of n bytes (the index of in-flight keys). */
uint64_t gw_proxy__hash(const void *p, size_t n);

/* A response body held once for every subscriber of an exchange: the slices the origin read
 * delivered, by reference, from the first byte some subscriber still needs (base) to the last
 * byte received (end). Offsets count from the first body byte of the response. */
typedef struct {
    gw_rslice_t *c; /* ring of c[(head + i) % cap], i < n; each holds one reference */
    size_t head, n, cap;
    uint64_t base; /* offset of c[head]'s first byte (= end when n is 0) */
    uint64_t end;  /* offset after the last byte appended */
} gw_proxy__cbody_t;

/* An empty store in caller storage. */
void gw_proxy__cbody_init(gw_proxy__cbody_t *b);
/* Drop every reference and the ring; b is empty (and reusable) afterwards. */
void gw_proxy__cbody_free(gw_proxy__cbody_t *b);
/* Append buf[off, off+len) (the store takes its own reference; bytes that continue the last
 * slice in the same buffer extend it). 0 or GW_E_NOMEM (nothing appended). */
int gw_proxy__cbody_append(gw_proxy__cbody_t *b, gw_rbuf_t *buf, size_t off, size_t len);
/* The bytes from offset pos to the end of the slice holding it, into *out (not referenced:
 * valid until the next trim or free). 0, or GW_E_INVAL when pos is not in [base, end). */
int gw_proxy__cbody_at(const gw_proxy__cbody_t *b, uint64_t pos, gw_rslice_t *out);
/* Release the slices that end at or before offset upto (nobody needs them any more). */
void gw_proxy__cbody_trim(gw_proxy__cbody_t *b, uint64_t upto);

#endif
