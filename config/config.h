/* config/config.h — h2gate's configuration, loaded from YAML into one immutable struct.
 *
 * gw_config_load() parses a file (or an in-memory document) with libyaml, checks every key,
 * type, unit and range, fills in the defaults documented in config/README.md and returns a
 * gw_config_t that is never modified afterwards (workers share it read-only). Every problem
 * found is reported as "FILE:LINE:COL: message"; all of them are collected, not just the
 * first. Sizes are bytes (`64KiB`, `1MB`), durations milliseconds (`30s`, `500ms`), rates
 * bytes per second (`1MB/s`).
 */
#ifndef GW_CONFIG_CONFIG_H
#define GW_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/nettrie.h"

typedef enum {
    GW_PROTO_F_H2 = 1u << 0,   /* HTTP/2 over TLS (ALPN h2) */
    GW_PROTO_F_H2C = 1u << 1,  /* HTTP/2 cleartext, prior knowledge */
    GW_PROTO_F_HTTP1 = 1u << 2 /* HTTP/1.1 (ALPN http/1.1, or a cleartext request line) */
} gw_proto_flags_t;

/* Where a value was written in the config file, kept for the keys whose value only a later
 * stage can judge (a file they name, an OpenSSL cipher list): what start-up, a reload or
 * `h2gate -t` finds wrong with it is reported as "FILE:LINE:COL: message" like the loader's own
 * errors (gw_config_error_add). file points to the gw_config_t's path (owned by it); line and
 * col count from 1; line 0: not written in the file. */
typedef struct {
    const char *file;
    unsigned line, col;
} gw_cfg_pos_t;

typedef struct {
    struct sockaddr_storage ss; /* parsed address, port included */
    socklen_t len;
    char text[64]; /* as written: "127.0.0.1:8443", "[::1]:8443" */
} gw_cfg_addr_t;

/* client_auth (config/client_auth.c): client certificates asked for and verified by OpenSSL. */
typedef enum {
    GW_CFG_CLIENT_AUTH_NONE = 0, /* no certificate asked for */
    GW_CFG_CLIENT_AUTH_OPTIONAL, /* asked for; a missing or failing one is recorded, not fatal */
    GW_CFG_CLIENT_AUTH_REQUIRE,  /* the handshake fails without a certificate that verifies */
} gw_cfg_client_auth_mode_t;

typedef struct {
    int mode;       /* gw_cfg_client_auth_mode_t */
    char *ca;       /* PEM file of the trusted CA certificates (required unless mode none) */
    char *crl;      /* PEM file of CRLs checked against the leaf, or NULL */
    unsigned depth; /* OpenSSL's verify depth: intermediates allowed between leaf and CA */
    gw_cfg_pos_t ca_at, crl_at;
} gw_cfg_client_auth_t;

typedef struct {
    char *certificate; /* PEM file (chain) */
    char *key;         /* PEM file */
    char **names;      /* SNI names it serves: exact or "*.suffix"; empty = default only */
    size_t names_len;
    gw_cfg_pos_t certificate_at, key_at;
    gw_cfg_client_auth_t client_auth; /* its own, or a copy of the listener's tls.client_auth */
} gw_cfg_cert_t;

typedef struct {
    gw_cfg_cert_t *certs; /* certs[0] is the default (no SNI or no match) */
    size_t certs_len;
    int min_version;     /* 12 or 13 */
    int prefer_h2;       /* ALPN server preference: 1 = h2 first, 0 = http/1.1 first */
    int session_tickets; /* 0/1 */
    uint64_t ticket_rotation_ms;
    /* tls.ticket_keys: the file's keys, read at load (and so again on reload), in the nghttpx
     * format: ticket_key_len bytes each (48 for aes-128-cbc, 80 for aes-256-cbc: a 16-byte
     * name, the AES key, the HMAC-SHA256 key of the AES key's size); the first encrypts, all
     * decrypt, nothing rotates. NULL: keys made and rotated here (ticket_rotation). */
    char *ticket_keys_path;
    unsigned char *ticket_keys;
    size_t ticket_keys_len;
    unsigned ticket_key_len;  /* 48 or 80 (tls.ticket_key_cipher) */
    char *session_id_context; /* OpenSSL's sid_ctx: sessions resume only where it is the same
                                 (1..32 bytes; default "h2gate") */
    char *ciphers;            /* TLS 1.2 cipher list, OpenSSL syntax; NULL = built-in */
    char *ciphersuites;       /* TLS 1.3 suites; NULL = OpenSSL default */
    int self_signed;          /* generate a self-signed pair at start if both files are missing */
    /* tls.acme: the names whose certificate the ACME client obtains (the top-level `acme:`);
     * then certs[0] has no files (certificate and key NULL) and serves what the client
     * installs: a self-signed pair for these names until the first certificate arrives */
    char **acme;
    size_t acme_len;
    gw_cfg_pos_t acme_at;
    gw_cfg_pos_t ciphers_at, ciphersuites_at;
} gw_cfg_tls_t;

/* A network, "10.0.0.0/8", "::1", "2001:db8::/32" (an address alone: all its bits). */
typedef struct {
    int family;       /* AF_INET or AF_INET6 */
    uint8_t addr[16]; /* network byte order; 4 bytes used for AF_INET */
    unsigned bits;
} gw_cfg_net_t;

/* Whether sa (AF_INET, AF_INET6; an IPv4-mapped IPv6 address counts as IPv4) is in n. */
int gw_cfg_net_match(const gw_cfg_net_t *n, const struct sockaddr *sa);

typedef struct gw_tmpl gw_tmpl_t; /* config/template.h */

/* Header rules (request_headers, response_headers; config/rules.c): names are lowercased
 * tokens, never a connection-specific field, Host, Content-Length or a pseudo-header. Applied
 * in this order: remove, set (every field of the name replaced by one), add. */
typedef struct {
    char *name;
    gw_tmpl_t *value; /* response rules: literal (no variables) */
} gw_cfg_hdr_t;
typedef struct {
    gw_cfg_hdr_t *set, *add;
    size_t set_len, add_len;
    char **remove;
    size_t remove_len;
} gw_cfg_hdr_rules_t;
/* A route's access list (config/acl.c): `allow` and `deny`, each a set of networks in a prefix
 * trie. A client is refused when its address is in deny, or when allow was given and the
 * address is not in it (deny wins; the order of the entries does not matter). */
typedef struct {
    gw_nettrie_t allow, deny;
    int has_allow; /* allow was written (an address in no allowed network is refused) */
} gw_cfg_acl_t;

/* Whether the client at sa may use a route with access list a (NULL: no list, everyone may).
 * An IPv4-mapped IPv6 address is checked as the IPv4 address it holds; a client without an IP
 * address (sa NULL) is in no network. */
int gw_cfg_acl_allows(const gw_cfg_acl_t *a, const struct sockaddr *sa);

/* An error page (config/error_pages.c): the body of the answers with this status, read from
 * path at load (and so again at reload), at most error_page_max bytes. */
typedef struct {
    unsigned status;
    char *path;
    const char *type; /* Content-Type from the file name's extension (a static string) */
    uint8_t *body;
    size_t len;
    gw_cfg_pos_t at; /* where the file was named */
} gw_cfg_error_page_t;

typedef struct {
    gw_cfg_error_page_t *v;
    size_t n;
} gw_cfg_error_pages_t;

typedef struct {
    gw_cfg_addr_t addr;
    gw_cfg_tls_t *tls; /* NULL for cleartext */
    /* hsts: the Strict-Transport-Security value sent on every response of this TLS listener
     * (RFC 6797 §6.1), made at load; NULL: none */
    char *hsts;
    /* redirect_https (cleartext only): every request is answered 308 to https on this port */
    int redirect_https;
    unsigned redirect_https_port;
    unsigned protocols; /* gw_proto_flags_t; default: TLS h2|http1, cleartext h2c|http1 */
    int backlog;
    int early_hints; /* 103s made by the gateway go to this listener's clients (default 1) */
    int push;        /* routes with push: true may push to its HTTP/2 clients (default 1) */
    /* PROXY protocol (v1 and v2) before the client's bytes: the address it names is the
     * client's everywhere; from proxy_from only (never empty: the loader requires it, `any`
     * being 0.0.0.0/0 and ::/0); within proxy_timeout_ms */
    int proxy_protocol;
    gw_cfg_net_t *proxy_from;
    size_t proxy_from_len;
    uint64_t proxy_timeout_ms;
    int line; /* where it was declared, for messages */
} gw_cfg_listen_t;

/* Upper bound of an upstream's `pipeline` (requests in flight per origin connection). */
#define GW_CFG_PIPELINE_MAX 64

typedef enum {
    GW_BALANCE_ROUND_ROBIN = 0,
    GW_BALANCE_LEAST_CONN,
    GW_BALANCE_HASH_CLIENT,
} gw_balance_t;

typedef struct {
    gw_cfg_addr_t addr;
    char *host; /* host part as written (for Host/SNI when tls) */
    unsigned weight;
} gw_cfg_server_t;

typedef struct {
    char *name;
    gw_cfg_server_t *servers;
    size_t servers_len;
    gw_balance_t balance;
    int tls;        /* HTTPS to the origin */
    int tls_verify; /* verify the origin's certificate (default 1) */
    char *tls_ca;   /* CA file; NULL = system store */
    gw_cfg_pos_t tls_ca_at;
    unsigned max_connections; /* per server */
    unsigned max_idle;        /* per server */
    uint64_t idle_timeout_ms;
    uint64_t idle_purge_ms; /* idle connections above max_idle: half closed per period */
    unsigned max_requests_per_connection; /* 0 = unlimited */
    uint64_t connect_timeout_ms;
    uint64_t response_timeout_ms; /* until the response head is complete */
    uint64_t read_timeout_ms;     /* between two reads of the body */
    unsigned queue_size;
    uint64_t queue_timeout_ms;
    unsigned retries;  /* of idempotent requests that failed before any response byte */
    unsigned pipeline; /* requests in flight per connection (RFC 9112 §9.3.2); 1 = none */
    size_t read_batch; /* body bytes a socket queues before a read (SO_RCVLOWAT); 0 = off */
    uint64_t read_batch_wait_ms; /* bytes held back by read_batch wait at most this */
    unsigned fail_threshold;     /* consecutive failures that eject a server */
    uint64_t eject_ms;           /* back-off of an ejected server */
    char *health_path;           /* NULL = no active health check */
    uint64_t health_interval_ms;
    unsigned health_status; /* expected status */
} gw_cfg_upstream_t;

typedef struct gw_config_errors gw_config_errors_t;

/* A route's basic_auth (RFC 7617): the users file read at load (config/basic_auth.c). */
typedef struct {
    char *user; /* no ':' nor control characters */
    char *hash; /* crypt(3) text: $2y$/$2b$/$2a$ (bcrypt), $5$/$6$ (SHA-crypt) */
} gw_cfg_htuser_t;
typedef struct {
    char *realm;            /* WWW-Authenticate realm: no '"', '\\' nor controls */
    char *users_path;       /* the htpasswd file */
    gw_cfg_htuser_t *users; /* sorted by user (strcmp): gw_cfg_htuser_find */
    size_t users_len;
    int pass;               /* Authorization goes on to the origin (default 0: removed) */
    unsigned cache_entries; /* verified credentials remembered per worker; 0: none */
    uint64_t cache_ttl_ms;  /* ... for this long */
    unsigned max_failures;  /* failed verifications per minute per client; 0: no limit */
    unsigned max_verifying; /* verifications queued per worker; beyond: 503 */
    unsigned max_waiting;   /* requests waiting for one verification (single flight); beyond: 503 */
    gw_cfg_pos_t users_at;
} gw_cfg_basic_auth_t;
/* The entry of user (len bytes) in a, or NULL. */
const gw_cfg_htuser_t *gw_cfg_htuser_find(const gw_cfg_basic_auth_t *a, const char *user,
                                          size_t len);
/* Parse an htpasswd file's text[0..len) (`file` names it in messages) into *users (sorted,
 * *n entries; free with gw_cfg_htusers_free). Every problem is appended to errs as "AT: users
 * file FILE:LINE: ..." (AT: at, the config's `users:` key). 0, GW_E_PARSE or GW_E_NOMEM. */
int gw_cfg_htpasswd_parse(const gw_cfg_pos_t *at, const char *file, const char *text, size_t len,
                          gw_cfg_htuser_t **users, size_t *n, gw_config_errors_t *errs);
void gw_cfg_htusers_free(gw_cfg_htuser_t *u, size_t n);

typedef struct {
    char *name; /* label of its metrics and log lines; default: host followed by path */
    char *host; /* "example.com", "*.example.com" or "*" */
    char *path; /* prefix, starts with '/' */
    char *upstream_name;
    size_t upstream; /* index into gw_config_t.upstreams */
    int coalesce;
    char **coalesce_headers; /* request headers that make two requests differ */
    size_t coalesce_headers_len;
    int coalesce_private; /* allow coalescing requests with authorization/cookie */
    int add_x_forwarded;  /* X-Forwarded-For / -Proto */
    int add_forwarded;    /* RFC 7239 Forwarded */
    int add_via;
    /* the top level's forwarded_for and trusted_proxies (the list is the config's): the
     * client's forwarding fields are kept only from a trusted peer under append */
    int forwarded_append;
    const gw_cfg_net_t *trusted_proxies;
    size_t trusted_proxies_len;
    uint64_t response_rate; /* bytes/s per connection for this route; 0 = none */
    uint64_t request_rate;  /* requests/s per client; 0 = none */
    int compress;           /* compress responses (compression: section) */
    int cache;              /* serve from the shared cache (cache: section, proxy/cache.c) */
    /* the route's own RFC 5861 windows (s) for answers that name none (`cache: {...}`); -1:
     * the cache section's */
    int64_t cache_stale_if_error, cache_stale_while_revalidate;
    int websocket;      /* WebSocket: HTTP/1.1 Upgrade and RFC 8441 CONNECT (default on) */
    char **early_hints; /* Link values sent in a 103 to navigations (RFC 8297) */
    size_t early_hints_len;
    int early_hints_h1;            /* HTTP/1.1 clients get the 103 too */
    int early_hints_learn;         /* remember the preload links of shareable 2xx pages */
    int early_hints_learn_private; /* learn from requests with Authorization or Cookie too */
    int push; /* HTTP/2 server push of the response's Link rel=preload (RFC 9113 §8.4) */
    unsigned request_burst;
    /* header rules (config/rules.c): the top level's apply first, then the route's own */
    gw_cfg_hdr_rules_t request_headers, response_headers;
    const gw_cfg_hdr_rules_t *top_request_headers, *top_response_headers; /* the config's */
    char *origin_host;  /* Host sent to the origin; NULL: the client's */
    char *strip_prefix; /* removed from the path sent to the origin; NULL: none */
    /* redirect: {to, status} (redirect_to NULL: none); respond: {status, body, content_type}
     * (respond_status 0: none); at most one of them */
    gw_tmpl_t *redirect_to;
    unsigned redirect_status;
    unsigned respond_status;
    char *respond_body;
    size_t respond_body_len;
    char *respond_content_type;
    gw_cfg_acl_t *acl;                /* allow/deny; NULL: every client */
    gw_cfg_error_pages_t error_pages; /* the route's own; the top level's fill in the others */
    int intercept_errors;             /* origin 5xx answers get the error page's body too */
    int client_cert_required; /* client_cert: required → 403 without a verified certificate */
    int client_cert_chain;    /* Client-Cert-Chain (RFC 9440 §2.3) goes with Client-Cert */
    gw_cfg_basic_auth_t *basic_auth; /* NULL: none */
    int line;
} gw_cfg_route_t;

typedef struct {
    unsigned max_concurrent_streams;
    uint32_t initial_window_size;    /* stream receive window we advertise */
    uint32_t connection_window_size; /* connection receive window we keep open */
    uint32_t max_frame_size;         /* SETTINGS_MAX_FRAME_SIZE we advertise */
    uint32_t header_table_size;      /* HPACK table we let the peer use (decoder) */
    uint32_t max_header_list_size;
    uint64_t settings_timeout_ms;
    unsigned max_requests_per_connection;
    unsigned reset_budget; /* peer + provoked resets per reset_window */
    uint64_t reset_window_ms;
    unsigned control_frame_budget; /* SETTINGS/PING/PRIORITY/WINDOW_UPDATE... per window */
    unsigned empty_frame_budget;   /* empty DATA/HEADERS/CONTINUATION per window */
    unsigned max_queued_control;   /* outbound control frames queued before calm */
    unsigned max_priority_nodes;   /* RFC 7540 tree nodes; 0 = 2 x max_concurrent_streams */
    unsigned max_pushes;           /* PUSH_PROMISEs per connection; 0 = never push */
    size_t frame_ahead;            /* DATA framed beyond what the socket has taken */
    size_t notsent_lowat;          /* TCP_NOTSENT_LOWAT of the socket; 0 = the kernel's */
    size_t
        bulk_lowat; /* the same while its live streams are all of one urgency; 0 = the kernel's */
} gw_cfg_h2_t;

typedef struct {
    uint64_t handshake_ms;
    uint64_t first_request_ms; /* preface or first request line */
    uint64_t header_ms;        /* a request head must complete within this */
    uint64_t idle_ms;
    uint64_t graceful_shutdown_ms; /* drain deadline after SIGTERM, and of an old generation */
    uint64_t drain_grace_ms;       /* an idle connection being drained stays open this long */
    uint64_t body_ms;              /* a stream with no progress either way is reset */
    uint64_t request_body_ms;      /* a request body with no byte for this long: 408 / reset */
    uint64_t tunnel_idle_ms;       /* a WebSocket tunnel with no byte either way is closed */
    uint64_t tunnel_drain_ms;      /* tunnels of an old generation (reload, stop) close after */
} gw_cfg_timeouts_t;

typedef struct {
    unsigned max_connections;      /* per worker */
    size_t write_buffer;           /* bytes queued to a client socket before reads pause */
    size_t max_request_head;       /* HTTP/1.1 front: request line + headers */
    size_t body_buffer;            /* per exchange, each direction */
    size_t coalesce_buffer;        /* per coalesced exchange: span between slowest and fastest */
    unsigned draining_generations; /* old configurations draining at once; beyond: closed */
    unsigned max_tunnels;          /* WebSocket tunnels per worker; beyond: 503 */
    size_t respond_body;           /* a route's respond.body: at most this many bytes */
} gw_cfg_limits_t;

/* heap: giving the heap's free pages back once the whole gateway went quiet
 * (server/heap.c). */
typedef struct {
    uint64_t idle_trim_ms;   /* every worker without work this long: trim; 0 = never */
    uint64_t idle_trim_free; /* only when the heap holds at least this much free */
} gw_cfg_heap_t;

typedef struct {
    uint64_t response_rate; /* bytes/s per connection; 0 = unlimited */
    uint64_t response_burst;
    uint64_t per_client_rate; /* bytes/s per client address, all its connections */
    uint64_t per_client_burst;
    uint64_t request_body_rate;
    uint64_t request_body_burst;
    unsigned ipv6_prefix; /* per-client keys: IPv6 addresses cut to this many bits (64) */
} gw_cfg_throttle_t;

typedef enum {
    GW_CFG_ALOG_COMBINED = 0,
    GW_CFG_ALOG_JSON,
    GW_CFG_ALOG_COMBINED_TIMING, /* combined + request and upstream times + request id */
} gw_cfg_alog_format_t;

typedef struct {
    char **types; /* media types: "application/json", "text/ANY", "+json" (a suffix) */
    size_t types_len;
    size_t min_size;             /* bytes; a known length below it is sent as it is */
    unsigned gzip_level;         /* 1..9 */
    unsigned gzip_window_bits;   /* 9..15: zlib memory per stream is 2^(w+2) + 2^(m+9) bytes */
    unsigned gzip_mem_level;     /* 1..9 */
    unsigned brotli_level;       /* 0..11 (quality) */
    unsigned brotli_window_bits; /* 10..24: the ring buffer is 2^w bytes */
    unsigned zstd_level;         /* 1..19 */
    unsigned zstd_window_log; /* 10..23 (RFC 8878 §3.1.1.1.2: decoders need at most 8 MiB = 2^23) */
    unsigned max_concurrent;  /* compressing streams per worker; beyond: identity */
    uint64_t max_memory;      /* bytes the worker's compressors may be charged; beyond: identity */
    int skip_private;         /* no compression of Set-Cookie / private / no-store answers */
} gw_cfg_compression_t;

typedef struct {
    unsigned learn_entries; /* learned pages kept per worker (LRU) */
    uint64_t learn_ttl_ms;  /* a learned page's links are used this long */
} gw_cfg_early_hints_t;

typedef struct gw_alog_tmpl gw_alog_tmpl_t; /* common/alog.h */

typedef struct {
    char *path;           /* NULL: off; "stderr"; otherwise a file (opened for appending) */
    int format;           /* gw_cfg_alog_format_t */
    char *log_format;     /* a template (common/alog.h): used instead of format; NULL: none */
    gw_alog_tmpl_t *tmpl; /* log_format compiled (owned) */
    int request_id; /* x-request-id kept (when sane) or made, forwarded, returned (default 1) */
    gw_cfg_pos_t path_at;
} gw_cfg_access_log_t;

typedef struct {
    int enabled;
    gw_cfg_addr_t addr;  /* the admin listener: plain HTTP/1.1, /metrics /healthz /readyz */
    uint64_t timeout_ms; /* a request head must come within this; an answer go out within it */
} gw_cfg_admin_t;

/* cluster.sentinels: at most this many (a sentinel quorum is three or five). */
#define GW_CFG_SENTINELS_MAX 16
/* cluster.master: the longest name the sentinels monitor (printable ASCII, no space). */
#define GW_CFG_MASTER_NAME_MAX 128

typedef struct {
    gw_cfg_addr_t addr; /* numeric, or only .text when the host is a name */
    char *host;         /* the host part as written */
} gw_cfg_sentinel_t;

/* cluster: what the instances share through Redis: TLS ticket keys, request rates, client
 * bandwidth leases. Redis is `redis`, or the primary that `sentinels` name for `master`. */
typedef struct {
    int enabled;                 /* `cluster.redis` or `cluster.sentinels` was given */
    gw_cfg_addr_t redis;         /* numeric, or only .text when the host is a name */
    char *redis_host;            /* the host part as written (a name is resolved at each connect) */
    char *password;              /* AUTH; NULL: none */
    unsigned db;                 /* SELECT; 0: none sent */
    char *key_prefix;            /* prepended to every key (default "h2gate:") */
    uint64_t timeout_ms;         /* each Redis call; past it the local fallback decides */
    uint64_t connect_timeout_ms; /* resolve + connect + AUTH/SELECT */
    uint64_t poll_interval_ms;   /* shared ticket keys are read this often */
    uint64_t ping_interval_ms;   /* an idle connection is sent PING; 0: poll_interval, <= 1 s */
    uint64_t ticket_rotation_ms; /* the shared encrypting key is replaced when this old */
    size_t max_reply;            /* a Redis reply past this many bytes drops the connection */
    gw_cfg_sentinel_t sentinels[GW_CFG_SENTINELS_MAX]; /* asked in turn for the primary */
    size_t sentinels_len;                              /* 0: `redis` is Redis */
    char *master;            /* the name the sentinels monitor (with sentinels only) */
    char *sentinel_password; /* AUTH to the sentinels; NULL: none */
} gw_cfg_cluster_t;

/* acme: the ACME client (RFC 8555) that obtains the certificates of the listeners with
 * tls.acme. */
#define GW_CFG_ACME_MAX_NAMES 100
typedef enum {
    GW_CFG_ACME_TLS_ALPN_01, /* RFC 8737: the TLS listener answers (the default) */
    GW_CFG_ACME_HTTP_01,     /* RFC 8555 §8.3: the cleartext listeners answer */
} gw_cfg_acme_challenge_t;
typedef enum {
    GW_CFG_ACME_EC_P256, /* the default */
    GW_CFG_ACME_RSA_2048,
} gw_cfg_acme_key_t;
#define GW_CFG_ACME_SHARED_KEY_LEN 32 /* AES-256 */
typedef struct {
    int enabled;        /* the section was given */
    char *directory;    /* the directory URL (https://…) */
    char *directory_ca; /* CA file for the ACME server's HTTPS; NULL: the system store */
    char *email;        /* the account's contact; NULL: none */
    char *state;        /* account key, certificates and keys (default <state_dir>/acme), 0700 */
    gw_cfg_acme_challenge_t challenge;
    gw_cfg_acme_key_t key_type; /* the certificates' keys (the account key is always P-256) */
    /* shared_key: the file of the key (32 bytes, raw or base64) that encrypts the certificate
     * keys the instances of a cluster share through Redis; its bytes read at load */
    char *shared_key;
    int has_shared_key;
    uint8_t shared_key_bytes[GW_CFG_ACME_SHARED_KEY_LEN];
    /* renew_before: a duration (ms) or a share of the lifetime (percent, 1..99), at most one of
     * them set; neither: a third of the lifetime. ARI's window (RFC 9773) comes first when the
     * server offers it. */
    uint64_t renew_before_ms;
    unsigned renew_before_pct;
    unsigned max_orders_per_hour; /* per name set, 1..60, default 3 */
    /* cluster_check_interval: with `cluster`, how often acme:orders is read (another instance's
     * order seen), and what the orderer waits past the lock before its first validation;
     * 1 s..10 min, default 10 s, the same on every instance */
    uint64_t cluster_check_interval_ms;
    gw_cfg_pos_t at, directory_ca_at, challenge_at, shared_key_at;
} gw_cfg_acme_t;

/* cache: the shared HTTP cache (RFC 9111, RFC 5861; gateway/cache/), used by the routes with
 * cache: true (gateway/proxy/cache.c). */
typedef struct {
    int enabled;                     /* the section was given */
    size_t memory;                   /* per process, shared by the workers (default 256 MiB) */
    size_t max_object;               /* a larger answer is not stored (default 8 MiB) */
    int heuristic;                   /* RFC 9111 §4.2.2 freshness from Last-Modified */
    uint32_t stale_if_error;         /* seconds (RFC 5861 §4) when the answer names none */
    uint32_t stale_while_revalidate; /* seconds (RFC 5861 §3) when the answer names none */
    int status_header;               /* send Cache-Status (RFC 9211) */
    /* stale-while-revalidate's background requests running at once per worker (default 128):
     * past it a stale answer within its window is served without starting one */
    unsigned max_background_revalidations;
    gw_cfg_pos_t at;
} gw_cfg_cache_t;

typedef struct gw_config {
    char *path;       /* file it came from ("<embedded>" for the default) */
    unsigned workers; /* default: number of cores */
    int log_level;    /* gw_log_level_t */
    char *state_dir;  /* where the self-signed certificate lives (default "state") */
    gw_cfg_listen_t *listen;
    size_t listen_len;
    gw_cfg_upstream_t *upstreams;
    size_t upstreams_len;
    gw_cfg_route_t *routes;
    size_t routes_len;
    gw_cfg_h2_t h2;
    gw_cfg_timeouts_t timeouts;
    gw_cfg_limits_t limits;
    gw_cfg_heap_t heap;
    gw_cfg_throttle_t throttle;
    gw_cfg_access_log_t access_log;
    gw_cfg_compression_t compression;
    gw_cfg_early_hints_t early_hints;
    gw_cfg_admin_t admin;
    gw_cfg_cluster_t cluster;
    gw_cfg_acme_t acme;
    gw_cfg_cache_t cache;
    char *pid_file; /* written at start, replaced on upgrade; NULL: none */
    /* forwarded_for: append keeps the X-Forwarded-For / Forwarded / X-Forwarded-Proto /
     * X-Forwarded-Host a peer in trusted_proxies sent (ours appended); otherwise (replace, the
     * default, or any other peer) the origin hears only of the connection */
    int forwarded_append;
    gw_cfg_net_t *trusted_proxies;
    size_t trusted_proxies_len;
    gw_cfg_pos_t pid_file_at;
    /* the top-level header rules, applied before each route's own (config/rules.c) */
    gw_cfg_hdr_rules_t request_headers, response_headers;
    gw_cfg_error_pages_t error_pages; /* the top level's, for every route */
    size_t error_page_max;            /* bytes an error page file may have */
} gw_config_t;

/* The error page of the answers with status on route r (r's own, else the top level's; r NULL:
 * the top level's alone), or NULL when none is configured. */
const gw_cfg_error_page_t *gw_cfg_error_page(const gw_config_t *c, const gw_cfg_route_t *r,
                                             unsigned status);

/* Error list filled by the loader: each entry "FILE:LINE:COL: message". */
struct gw_config_errors {
    char **msgs;
    size_t len;
};
void gw_config_errors_free(gw_config_errors_t *e);

/* Append "FILE:LINE:COL: message" (at->file, or "<config>"; "FILE: message" when at->line is
 * 0) to e: what a later stage (TLS, the access log, `h2gate -t`) finds wrong with a value the
 * loader accepted. Out of memory: the message is lost (e->len does not grow); returns 0 or
 * GW_E_NOMEM. */
int gw_config_error_add(gw_config_errors_t *e, const gw_cfg_pos_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Load and validate `path`. On success returns 0 and *out (free with gw_config_del). On
 * failure returns GW_E_PARSE (or GW_E_NOENT / GW_E_NOMEM), *out is NULL and errs holds every
 * message found. */
int gw_config_load_file(const char *path, gw_config_t **out, gw_config_errors_t *errs);

/* Same over a document in memory; `name` is used as FILE in messages. */
int gw_config_load_string(const char *name, const char *text, size_t len, gw_config_t **out,
                          gw_config_errors_t *errs);

/* The embedded default config (config/gateway.yaml compiled in), loaded. */
int gw_config_load_default(gw_config_t **out, gw_config_errors_t *errs);
extern const char gw_config_default_yaml[];

void gw_config_del(gw_config_t *c);

/* Unit parsers, exported for tests and the CLI. Each returns 0 or GW_E_PARSE (bad unit or
 * syntax) / GW_E_RANGE (overflow). */
int gw_parse_size(const char *s, uint64_t *bytes);    /* 123, 64KiB, 1MB, 2MiB, 1GiB, 10k */
int gw_parse_duration(const char *s, uint64_t *ms);   /* 500ms, 30s, 5m, 1h, 1d */
int gw_parse_rate(const char *s, uint64_t *bps);      /* 1MB/s, 512KiB/s, 100kbit/s */
int gw_parse_addr(const char *s, gw_cfg_addr_t *out); /* 127.0.0.1:80, [::1]:80, localhost:80 */

#endif
