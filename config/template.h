/* config/template.h — values with variables, compiled when the configuration is loaded and
 * expanded on the request path: the header rules' values (`X-Client: $client_addr`) and the
 * redirect targets (`https://$host$request_uri`).
 *
 * A template is literal bytes and variables, written `$name` or `${name}`; `$$` is one `$`.
 * The compiler refuses a variable the place does not allow, an unknown or unfinished one, and
 * every byte no field value may carry (controls, DEL; bytes past 0x7e: the values are ASCII),
 * reporting the offset of the first bad byte. Sans-IO and allocation-free when expanded: the
 * caller gives the variables' values as slices and a buffer of the size gw_tmpl_len() says.
 */
#ifndef GW_CONFIG_TEMPLATE_H
#define GW_CONFIG_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef enum {
    GW_TMPL_CLIENT_ADDR = 0,    /* the client's address, without port (after PROXY protocol) */
    GW_TMPL_REQUEST_ID,         /* the request's X-Request-Id (access_log.request_id) */
    GW_TMPL_SCHEME,             /* "https" on a TLS connection, else "http" (never :scheme) */
    GW_TMPL_HOST,               /* the request's host[:port], when valid (gw_tmpl_host_valid) */
    GW_TMPL_TLS_CLIENT_SUBJECT, /* the verified client certificate's subject, or empty */
    GW_TMPL_TLS_CLIENT_VERIFY,  /* SUCCESS, FAILED:reason, NONE; empty in cleartext */
    GW_TMPL_REQUEST_URI,        /* the request target (origin-form: path and query) */
    GW_TMPL_PATH,               /* the request target without its query */
    GW_TMPL_VAR_N
} gw_tmpl_var_t;

/* The variables a header rule's request value may use, and a redirect target's. */
#define GW_TMPL_HEADER_VARS                                                                        \
    ((1u << GW_TMPL_CLIENT_ADDR) | (1u << GW_TMPL_REQUEST_ID) | (1u << GW_TMPL_SCHEME) |           \
     (1u << GW_TMPL_HOST) | (1u << GW_TMPL_TLS_CLIENT_SUBJECT) |                                   \
     (1u << GW_TMPL_TLS_CLIENT_VERIFY))
#define GW_TMPL_REDIRECT_VARS                                                                      \
    ((1u << GW_TMPL_SCHEME) | (1u << GW_TMPL_HOST) | (1u << GW_TMPL_REQUEST_URI) |                 \
     (1u << GW_TMPL_PATH))

/* What the compiler checks besides the variables. */
enum {
    GW_TMPL_F_FIELD = 1u << 0, /* a field value: no leading or trailing space (RFC 9110 §5.5) */
    GW_TMPL_F_URI = 1u << 1,   /* a URI reference: no space at all */
};

/* Literal text or one variable. */
typedef struct {
    uint8_t var;  /* gw_tmpl_var_t, or GW_TMPL_VAR_N for literal text */
    uint32_t off; /* literal: its bytes are text[off, off+len) */
    uint32_t len;
} gw_tmpl_part_t;

typedef struct gw_tmpl {
    char *text; /* the literal bytes, end to end (NUL-terminated) */
    gw_tmpl_part_t *parts;
    size_t n;
    unsigned uses;  /* bit 1 << var for each variable it names */
    size_t lit_len; /* literal bytes in all */
} gw_tmpl_t;

/* Compile src[0..len) allowing the variables of the mask `allowed` (GW_TMPL_*_VARS) under the
 * GW_TMPL_F_* rules of `flags`. 0 and *out (free with gw_tmpl_del); GW_E_PARSE with *why (a
 * static message) and *at (the offset in src of what is wrong); GW_E_NOMEM. */
int gw_tmpl_compile(const char *src, size_t len, unsigned allowed, unsigned flags, gw_tmpl_t **out,
                    const char **why, size_t *at);
void gw_tmpl_del(gw_tmpl_t *t);

/* The bytes t expands to with the values vars[0..GW_TMPL_VAR_N) (only those t uses are read). */
size_t gw_tmpl_len(const gw_tmpl_t *t, const gw_slice_t *vars);
/* Expand t into out (cap bytes, no NUL added). Returns the expansion's length; when it is
 * more than cap nothing is written (ask gw_tmpl_len first). */
size_t gw_tmpl_expand(const gw_tmpl_t *t, const gw_slice_t *vars, char *out, size_t cap);

/* Whether s is a host as $host and origin_host may carry it: a non-empty authority as the
 * fronts accept one (gw_http_is_authority): a host name of letters, digits, '-', '.' and '_'
 * (no '.' first, no '..', at most 255 bytes), an IPv4 address, or an IPv6 literal in
 * brackets, each with an optional ":port" of at most 5 digits (":" alone: the default port).
 * No userinfo, no path, no '\', no pct-encoding, no sub-delims: a host that could make a
 * Location point elsewhere, or split a header's list, is not one; and a request whose host is
 * not one never passed the fronts. */
int gw_tmpl_host_valid(gw_slice_t s);

#endif
