/* server/scrape.c — a scrape of the gateway's metrics (gw_server_metrics, from the admin
 * thread).
 *
 * It asks every worker, through an async handle, to copy its set into its snapshot (in the
 * worker's own thread: front/metrics.c), waits for the copies (at most a second: a stuck
 * worker's last copy is used), and sums them by name over a set seeded with every series the
 * current configuration names, at 0. The families are one table (fams[]: each name, type and
 * help written once, and where its numbers are); the standard process_* series are read from
 * /proc as the Prometheus client libraries read them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "server/server_internal.h"
#include "gw_version.h"

#define SCRAPE_WAIT_MS 1000

static const char *const code_names[GW_MCODES] = {"1xx", "2xx", "3xx", "4xx", "5xx", "none"};

/* The process, as the Prometheus client libraries read it from /proc (client_golang's and
 * client_python's process collectors): the standard process_* series. */
typedef struct {
    int ok;
    uint64_t cpu_us;   /* user + system time */
    uint64_t start_us; /* since the epoch */
    uint64_t rss, vsize, open_fds, max_fds;
} proc_stats_t;

static void read_proc(proc_stats_t *p)
{
    memset(p, 0, sizeof(*p));
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    /* proc(5): the command name is in parentheses and may hold spaces: count from the last
     * ')'; fields 3.. follow: utime 14, stime 15, starttime 22, vsize 23, rss 24 */
    const char *q = strrchr(buf, ')');
    if (!q)
        return;
    uint64_t v[25] = {0};
    int field = 2;
    for (q++; *q && field < 24;) {
        while (*q == ' ')
            q++;
        if (!*q)
            break;
        char *end;
        field++;
        v[field] = strtoull(q, &end, 10);
        while (*end && *end != ' ')
            end++; /* the state letter, or a negative number */
        q = end;
    }
    uint64_t btime = 0;
    if ((f = fopen("/proc/stat", "r"))) {
        char line[256];
        while (fgets(line, sizeof(line), f))
            if (!strncmp(line, "btime ", 6)) {
                btime = strtoull(line + 6, NULL, 10);
                break;
            }
        fclose(f);
    }
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (field < 24 || tck <= 0 || page <= 0 || !btime)
        return;
    p->cpu_us = (v[14] + v[15]) * 1000000u / (uint64_t)tck;
    p->start_us = btime * 1000000u + v[22] * 1000000u / (uint64_t)tck;
    p->vsize = v[23];
    p->rss = v[24] * (uint64_t)page;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            p->open_fds += e->d_name[0] != '.';
        closedir(d);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p->max_fds = (uint64_t)rl.rlim_cur;
    p->ok = 1;
}

typedef struct {
    uint64_t size, evictions, refused;
    int on;
} table_stats_t;

/* Everything a scrape shows: the workers' sets summed, and what the admin thread reads. */
typedef struct {
    gw_mset_t t;
    unsigned nworkers;
    uint64_t accepted[GW_SERVER_MAX_WORKERS], busy[GW_SERVER_MAX_WORKERS];
    table_stats_t tables[2]; /* clients, rates */
    int cache_on;            /* a route has cache: true: the shared cache's counters */
    gw_cache_stats_t cache;
    int cluster_on;
    gw_cluster_stats_t cluster;
    uint64_t cluster_up;
    uint64_t reloads_ok, reloads_failed, gen_id;
    uint64_t heap_trims[2], heap_trim_us[2]; /* by GW_HEAP_TRIMS_*: idle, cache */
    uint64_t heap_trims_skipped;             /* idle checks only: cache trims are always made */
    proc_stats_t proc;
    /* the ACME client: its counters, and each name of a listener with tls.acme with the
     * notAfter of the certificate its store serves (copied: the generation may go) */
    int acme_on;
    uint64_t acme_issued, acme_failed, acme_renewal_failures;
    struct {
        char name[254];
        uint64_t not_after;
    } * certs;
    size_t certs_len;
} scrape_t;

/* ---- the families: each one's name, type and help written once ------------------------------ */

/* What a family's samples are taken over: each entity gives its labels and the base its
 * numbers are found from. */
typedef enum {
    OVER_ONE = 0, /* the scrape itself, no label */
    OVER_ROUTES,  /* {route}: t.routes[i] */
    OVER_UPS,     /* {upstream}: t.ups[i] */
    OVER_SERVERS, /* {upstream, server}: t.servers[i] */
    OVER_WORKERS, /* {worker}: arrays of uint64_t indexed by worker */
    OVER_TABLES,  /* {table}: the shared rate tables that are on, tables[i] */
    OVER_CODINGS, /* {coding}: arrays of uint64_t indexed by content coding */
    OVER_CAUSES,  /* {cause}: arrays of uint64_t indexed by compression skip cause */
    OVER_CUSTOM,  /* fam->write */
} over_t;

/* When a family is shown at all. */
typedef enum {
    NEED_NONE = 0,
    NEED_TABLES,  /* a shared rate table is configured */
    NEED_CLUSTER, /* a cluster section is configured */
    NEED_ACME,    /* an acme section is configured */
    NEED_PROC,    /* /proc could be read */
    NEED_CACHE,   /* a route has cache: true (the shared cache exists) */
} need_t;

/* One value of a family's second label, and where its number is (from the entity's base). */
typedef struct {
    const char *value;
    size_t off;
} point_t;

typedef struct fam fam_t;
struct fam {
    const char *name, *type, *help;
    over_t over;
    size_t off;            /* the number (uint64_t, or gw_hist_t for a histogram), from the base */
    const char *label;     /* with points: the label that tells them apart */
    const point_t *points; /* NULL: one sample per entity, at off */
    size_t npoints;
    need_t need;
    int us; /* the number is microseconds, shown as seconds */
    int (*write)(const fam_t *f, const scrape_t *sc, gw_bytes_t *out); /* OVER_CUSTOM */
};

#define AT(m) offsetof(scrape_t, m)
#define POINTS(p) .points = (p), .npoints = sizeof(p) / sizeof((p)[0])

static const point_t h2_kinds[] = {
    {"rapid_reset", AT(t.h2err[GW_MH2_RAPID_RESET])},
    {"control_flood", AT(t.h2err[GW_MH2_CONTROL_FLOOD])},
    {"empty_frames", AT(t.h2err[GW_MH2_EMPTY_FRAMES])},
    {"queued_control", AT(t.h2err[GW_MH2_QUEUED_CONTROL])},
    {"header_list", AT(t.h2err[GW_MH2_HEADER_LIST])},
    {"header_block", AT(t.h2err[GW_MH2_HEADER_BLOCK])},
    {"settings_timeout", AT(t.h2err[GW_MH2_SETTINGS_TIMEOUT])},
    {"malformed_request", AT(t.h2err[GW_MH2_MALFORMED_REQUEST])},
    {"refused_stream", AT(t.h2err[GW_MH2_REFUSED_STREAM])},
};
static const point_t tls_results[] = {
    {"full", AT(t.tls[0])}, {"resumed", AT(t.tls[1])}, {"failed", AT(t.tls[2])}};
static const point_t client_verify_results[] = {{"success", AT(t.client_verify[0])},
                                                {"failed", AT(t.client_verify[1])},
                                                {"none", AT(t.client_verify[2])}};
static const point_t conn_states[] = {{"idle", offsetof(gw_mserver_t, idle)},
                                      {"active", offsetof(gw_mserver_t, active)}};
static const point_t hint_sources[] = {{"configured", AT(t.hint.sent_configured)},
                                       {"learned", AT(t.hint.sent_learned)},
                                       {"origin", AT(t.hint.sent_origin)},
                                       {"origin_dropped", AT(t.hint.dropped_origin)}};
static const point_t hint_events[] = {{"learned", AT(t.hint.learned)},
                                      {"evicted", AT(t.hint.evicted)},
                                      {"expired", AT(t.hint.expired)}};
static const point_t push_results[] = {
    {"promised", AT(t.hint.push_promised)},     {"cancelled", AT(t.push_cancelled)},
    {"refused_client", AT(t.hint.push_client)}, {"refused_limit", AT(t.hint.push_limit)},
    {"duplicate", AT(t.hint.push_duplicate)},   {"refused_closed", AT(t.hint.push_closed)}};
static const point_t client_dirs[] = {{"in", AT(t.client_in)}, {"out", AT(t.client_out)}};
static const point_t origin_dirs[] = {{"in", AT(t.origin_in)}, {"out", AT(t.origin_out)}};
static const point_t zdirs[] = {{"in", AT(t.z.in)}, {"out", AT(t.z.out)}};
static const point_t reload_results[] = {{"ok", AT(reloads_ok)}, {"failed", AT(reloads_failed)}};
static const point_t heap_trims[] = {{"idle", AT(heap_trims[GW_HEAP_TRIMS_IDLE])},
                                     {"cache", AT(heap_trims[GW_HEAP_TRIMS_CACHE])}};
static const point_t heap_trim_secs[] = {{"idle", AT(heap_trim_us[GW_HEAP_TRIMS_IDLE])},
                                         {"cache", AT(heap_trim_us[GW_HEAP_TRIMS_CACHE])}};
/* reason="idle" like h2gate_heap_trims_total's: the two divide by matching labels */
static const point_t heap_skips[] = {{"idle", AT(heap_trims_skipped)}};
static const point_t cache_lookups[] = {{"hit", AT(cache.hits)}, {"miss", AT(cache.misses)}};
/* the labels are gw_cache_bg_str()'s, in gw_cache_bg_t's order */
static const point_t cache_bg_results[] = {{"refreshed", AT(cache.bg[GW_CACHE_BG_REFRESHED])},
                                           {"replaced", AT(cache.bg[GW_CACHE_BG_REPLACED])},
                                           {"not_stored", AT(cache.bg[GW_CACHE_BG_NOT_STORED])},
                                           {"failed", AT(cache.bg[GW_CACHE_BG_FAILED])},
                                           {"cancelled", AT(cache.bg[GW_CACHE_BG_CANCELLED])},
                                           {"skipped", AT(cache.bg[GW_CACHE_BG_SKIPPED])}};
static const point_t cache_stale_causes[] = {
    {"stale_if_error", AT(cache.ev[GW_CACHE_EV_STALE_IF_ERROR])},
    {"stale_while_revalidate", AT(cache.ev[GW_CACHE_EV_STALE_WHILE_REVALIDATE])}};
static const point_t cache_reval_results[] = {
    {"not_modified", AT(cache.ev[GW_CACHE_EV_REVALIDATED_NOT_MODIFIED])},
    {"modified", AT(cache.ev[GW_CACHE_EV_REVALIDATED_MODIFIED])},
    {"failed", AT(cache.ev[GW_CACHE_EV_REVALIDATION_FAILED])},
    {"not_stored", AT(cache.ev[GW_CACHE_EV_REVALIDATED_NOT_STORED])}};
static const point_t acme_results[] = {{"issued", AT(acme_issued)}, {"failed", AT(acme_failed)}};
static const point_t cluster_calls[] = {{"ok", AT(cluster.calls_ok)},
                                        {"failed", AT(cluster.calls_failed)},
                                        {"timeout", AT(cluster.calls_timeout)}};
static const point_t cluster_bad_replies[] = {{"too_large", AT(cluster.replies_oversized)},
                                              {"out_of_range", AT(cluster.replies_bad)}};
static const point_t cluster_verdicts[] = {{"allowed", AT(cluster.rate_allowed)},
                                           {"limited", AT(cluster.rate_denied)},
                                           {"local", AT(cluster.rate_local)}};

static int write_requests(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nroutes && rv == 0; i++)
        for (size_t c = 0; c < GW_MCODES && rv == 0; c++) {
            gw_label_t l[] = {{"route", t->routes[i].name},
                              {"upstream", t->routes[i].upstream},
                              {"code", code_names[c]}};
            rv = gw_prom_sample(out, f->name, l, 3, t->routes[i].req[c]);
        }
    /* requests that matched no route */
    for (size_t c = 0; c < GW_MCODES && rv == 0; c++) {
        gw_label_t l[] = {{"route", ""}, {"upstream", ""}, {"code", code_names[c]}};
        rv = gw_prom_sample(out, f->name, l, 3, t->unrouted[c]);
    }
    return rv;
}

/* Basic auth's results by route, for the routes that had any (gw_alog_auth_t names). */
static int write_basic_auth(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nroutes && rv == 0; i++) {
        uint64_t any = 0;
        for (size_t a = 1; a < GW_ALOG_AUTH_N; a++)
            any |= t->routes[i].auth[a];
        for (size_t a = 1; any && a < GW_ALOG_AUTH_N && rv == 0; a++) {
            gw_label_t l[] = {{"route", t->routes[i].name},
                              {"result", gw_alog_auth_str((gw_alog_auth_t)a)}};
            rv = gw_prom_sample(out, f->name, l, 2, t->routes[i].auth[a]);
        }
    }
    return rv;
}

static int write_server_up(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nservers && rv == 0; i++) {
        if (t->servers[i].up_state < 0)
            continue; /* not in the current configuration */
        gw_label_t l[] = {{"upstream", t->servers[i].up}, {"server", t->servers[i].server}};
        rv = gw_prom_sample(out, f->name, l, 2, (uint64_t)t->servers[i].up_state);
    }
    return rv;
}

static int write_client_conns(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    const gw_mset_t *t = &sc->t;
    for (size_t i = 0; i < t->nconns && rv == 0; i++) {
        gw_label_t l[] = {{"listener", t->conns[i].listener}, {"protocol", t->conns[i].proto}};
        rv = gw_prom_sample(out, f->name, l, 2, t->conns[i].n);
    }
    return rv;
}

static int write_cert_expiry(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    for (size_t i = 0; i < sc->certs_len && rv == 0; i++) {
        gw_label_t l[] = {{"name", sc->certs[i].name}};
        rv = gw_prom_sample(out, f->name, l, 1, sc->certs[i].not_after);
    }
    return rv;
}

static int write_build_info(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    (void)sc;
    gw_label_t l[] = {{"version", GW_VERSION}};
    return gw_prom_sample(out, f->name, l, 1, 1);
}

/* The cluster's primary as a label (an info gauge, as build_info): none before one is taken. */
static int write_primary_info(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    if (!sc->cluster.primary[0])
        return 0;
    gw_label_t l[] = {{"address", sc->cluster.primary}};
    return gw_prom_sample(out, f->name, l, 1, 1);
}

static const fam_t fams[] = {
    {"h2gate_requests_total", "counter",
     "Requests by route, its upstream and the status class of the answer (none: no response "
     "head was sent).",
     .over = OVER_CUSTOM, .write = write_requests},
    {"h2gate_request_duration_seconds", "histogram",
     "From a request's head to the end of its answer, by route.", .over = OVER_ROUTES,
     .off = offsetof(gw_mroute_t, dur)},
    {"h2gate_rate_limited_total", "counter", "Requests answered 429 (routes[].request_rate).",
     .over = OVER_ROUTES, .off = offsetof(gw_mroute_t, rate_limited)},
    {"h2gate_basic_auth_total", "counter",
     "Requests on routes with basic_auth by result: cached (credentials verified before), "
     "verified (now, on the thread pool), failed, missing, limited (429), busy (503).",
     .over = OVER_CUSTOM, .write = write_basic_auth},
    {"h2gate_upstream_connect_duration_seconds", "histogram",
     "Connecting to an origin (TLS handshake included) for a request, by upstream.",
     .over = OVER_UPS, .off = offsetof(gw_mup_t, connect)},
    {"h2gate_upstream_response_header_duration_seconds", "histogram",
     "From the start of an origin exchange to its response head, by upstream.", .over = OVER_UPS,
     .off = offsetof(gw_mup_t, header)},
    {"h2gate_upstream_queue_duration_seconds", "histogram",
     "Waiting in the upstream's queue for an origin connection (max_connections reached), by "
     "upstream: 0 for a request that found one at once.",
     .over = OVER_UPS, .off = offsetof(gw_mup_t, queue)},
    {"h2gate_upstream_retries_total", "counter",
     "Requests sent again to another connection or server after a failure.", .over = OVER_UPS,
     .off = offsetof(gw_mup_t, retries)},
    {"h2gate_upstream_queue_length", "gauge", "Requests waiting for an origin connection.",
     .over = OVER_UPS, .off = offsetof(gw_mup_t, queued)},
    {"h2gate_upstream_connections", "gauge", "Origin connections now, idle or active.",
     .over = OVER_SERVERS, .label = "state", POINTS(conn_states)},
    {"h2gate_upstream_connections_opened_total", "counter", "Origin connections dialled.",
     .over = OVER_SERVERS, .off = offsetof(gw_mserver_t, opened)},
    {"h2gate_upstream_server_failures_total", "counter",
     "Failed origin exchanges counted by passive health (and failed active checks); "
     "health.fail_threshold in a row eject the server.",
     .over = OVER_SERVERS, .off = offsetof(gw_mserver_t, failures)},
    {"h2gate_upstream_server_ejections_total", "counter",
     "Times an origin server was ejected (health.eject) after failures.", .over = OVER_SERVERS,
     .off = offsetof(gw_mserver_t, ejections)},
    {"h2gate_upstream_server_up", "gauge",
     "1 while an origin server is healthy (passive and active checks), 0 while ejected.",
     .over = OVER_CUSTOM, .write = write_server_up},
    {"h2gate_client_connections", "gauge",
     "Client connections now, by listener and protocol (pending: TLS handshake or first "
     "bytes).",
     .over = OVER_CUSTOM, .write = write_client_conns},
    {"h2gate_client_connections_accepted_total", "counter", "Client connections accepted.",
     .over = OVER_WORKERS, .off = AT(accepted)},
    {"h2gate_client_connections_busy", "gauge",
     "Client connections holding buffers (requests or bytes in flight); an idle one gives "
     "them back.",
     .over = OVER_WORKERS, .off = AT(busy)},
    {"h2gate_rate_table_entries", "gauge",
     "Clients in the shared tables of throttle.per_client_rate (clients) and "
     "routes[].request_rate (rates).",
     .over = OVER_TABLES, .off = offsetof(table_stats_t, size), .need = NEED_TABLES},
    {"h2gate_rate_table_evictions_total", "counter", "Idle clients forgotten to make room.",
     .over = OVER_TABLES, .off = offsetof(table_stats_t, evictions), .need = NEED_TABLES},
    {"h2gate_rate_table_refused_total", "counter",
     "Clients refused because the table was full of clients still in debt.", .over = OVER_TABLES,
     .off = offsetof(table_stats_t, refused), .need = NEED_TABLES},
    {"h2gate_client_streams", "gauge", "Requests under way (HTTP/2 streams and HTTP/1.1).",
     .off = AT(t.streams)},
    {"h2gate_early_hints_total", "counter",
     "103 Early Hints sent, by where their links came from (configured, learned: the "
     "gateway's; origin: relayed), and origin 103s dropped because one went out already.",
     .label = "source", POINTS(hint_sources)},
    {"h2gate_early_hints_page_events_total", "counter",
     "Pages whose preload links were learned, evicted by the LRU, or expired (learn_ttl).",
     .label = "event", POINTS(hint_events)},
    {"h2gate_early_hints_pages", "gauge", "Pages with learned links kept now.",
     .off = AT(t.hint.entries)},
    {"h2gate_push_total", "counter",
     "HTTP/2 server push (routes' push: true): links promised, promises the client reset "
     "(cancelled), and links not promised because the client disabled push (refused_client), "
     "a limit (h2.max_pushes, the client's MAX_CONCURRENT_STREAMS: refused_limit), the path "
     "was promised on the connection before (duplicate), or a GOAWAY (refused_closed).",
     .label = "result", POINTS(push_results)},
    {"h2gate_websocket_tunnels", "gauge",
     "WebSocket tunnels open (HTTP/1.1 Upgrade and RFC 8441 streams).", .off = AT(t.tunnels)},
    {"h2gate_client_bytes_total", "counter",
     "Bytes read from (in) and written to (out) the client sockets, TLS records included.",
     .label = "direction", POINTS(client_dirs)},
    {"h2gate_origin_bytes_total", "counter",
     "Bytes read from (in) and written to (out) the origin sockets, TLS records included.",
     .label = "direction", POINTS(origin_dirs)},
    {"h2gate_coalesced_total", "counter", "Requests served by another request's exchange.",
     .off = AT(t.coalesced)},
    {"h2gate_compression_bytes_total", "counter",
     "Bytes into the compressors (direction=in) and out of them (out), by content coding.",
     .over = OVER_CODINGS, .label = "direction", POINTS(zdirs)},
    {"h2gate_compressed_responses_total", "counter", "Responses compressed, by coding.",
     .over = OVER_CODINGS, .off = AT(t.z.streams)},
    {"h2gate_compression_skipped_total", "counter",
     "Responses of compressing routes sent as they came, by cause.", .over = OVER_CAUSES,
     .off = AT(t.z.skipped)},
    {"h2gate_compression_shared_total", "counter",
     "Coalesced requests served compressed bytes made for another request.", .off = AT(t.z.shared)},
    {"h2gate_compressors", "gauge", "Compressors running (compression.max_concurrent).",
     .off = AT(t.z.active)},
    {"h2gate_compressor_memory_bytes", "gauge", "Memory the running compressors hold.",
     .off = AT(t.z.mem)},
    {"h2gate_throttled_bytes_total", "counter",
     "Response bytes sent under a bandwidth limit (throttle, routes[].response_rate).",
     .off = AT(t.throttled_bytes)},
    {"h2gate_h2_protocol_errors_total", "counter",
     "HTTP/2 abuse limits hit and malformed requests, by kind (counted when the connection "
     "closes).",
     .label = "kind", POINTS(h2_kinds)},
    {"h2gate_h2_max_requests_total", "counter",
     "HTTP/2 connections that served h2.max_requests_per_connection requests and were retired "
     "with a graceful GOAWAY (not an error; counted when the connection closes).",
     .off = AT(t.h2_max_requests)},
    {"h2gate_h2_priority_evictions_total", "counter",
     "RFC 7540 priority tree placeholders evicted to stay within h2.max_priority_nodes (not "
     "an error; counted when the connection closes).",
     .off = AT(t.h2_priority_evictions)},
    {"h2gate_tls_handshakes_total", "counter", "TLS handshakes with clients, by result.",
     .label = "result", POINTS(tls_results)},
    {"h2gate_tls_client_verify_total", "counter",
     "TLS handshakes of listeners that ask for a client certificate (client_auth), by the "
     "verification's result: success, failed (refused, or recorded under mode optional), none "
     "(no certificate sent).",
     .label = "result", POINTS(client_verify_results)},
    {"h2gate_access_log_lost_total", "counter", "Access log lines that could not be written.",
     .off = AT(t.alog_lost)},
    {"h2gate_config_reloads_total", "counter", "Configuration reloads (SIGHUP), by result.",
     .label = "result", POINTS(reload_results)},
    {"h2gate_heap_trims_total", "counter",
     "Trims of the heap (malloc_trim: its free pages back to the system), by reason: idle (the "
     "whole gateway went quiet for heap.idle_trim with heap.idle_trim_free free), cache (the "
     "cache's evictions, a purge or a reload removed memory/16 bytes).",
     .label = "reason", POINTS(heap_trims)},
    {"h2gate_heap_trim_seconds_total", "counter",
     "Time the heap trims took (on libuv's thread pool, one at a time), by reason.",
     .label = "reason", POINTS(heap_trim_secs), .us = 1},
    {"h2gate_heap_trims_skipped_total", "counter",
     "Idle trims not made: the gateway went quiet, but the heap held less than "
     "heap.idle_trim_free free or the resident size had not grown by as much since the last "
     "trim.",
     .label = "reason", POINTS(heap_skips)},
    {"h2gate_cache_lookups_total", "counter",
     "Lookups in the shared cache (routes with cache: true), by result: hit (an entry, fresh or "
     "not), miss.",
     .label = "result", POINTS(cache_lookups), .need = NEED_CACHE},
    {"h2gate_cache_stores_total", "counter", "Answers put in the shared cache (new or replacing).",
     .off = AT(cache.inserts), .need = NEED_CACHE},
    {"h2gate_cache_background_revalidations_total", "counter",
     "Background revalidations of stale entries (stale-while-revalidate, RFC 5861 section 3), by "
     "how they ended: refreshed (304), replaced (a new answer stored), not_stored (an answer "
     "that may not be stored), failed (no answer, a timeout, a 5xx: the stale entry stays), "
     "cancelled (a reload or a stop closed the worker's origin side first).",
     .label = "result", POINTS(cache_bg_results), .need = NEED_CACHE},
    {"h2gate_cache_stale_served_total", "counter",
     "Stale answers the shared cache served, by cause: stale_if_error (standing in for an origin "
     "that failed, RFC 5861 section 4), stale_while_revalidate (at once, while revalidated in "
     "the background, RFC 5861 section 3).",
     .label = "cause", POINTS(cache_stale_causes), .need = NEED_CACHE},
    {"h2gate_cache_revalidations_total", "counter",
     "Stored answers asked of the origin again (stale, or the request's no-cache; in the "
     "foreground or the background), by what the origin said: not_modified (304: the entry "
     "refreshed), modified (a new answer), failed (no answer, a timeout or a 5xx).",
     .label = "result", POINTS(cache_reval_results), .need = NEED_CACHE},
    {"h2gate_cache_refused_total", "counter",
     "Answers the shared cache refused at the end: larger than cache.max_object once charged.",
     .off = AT(cache.refused), .need = NEED_CACHE},
    {"h2gate_cache_evictions_total", "counter",
     "Entries evicted to keep the shared cache within cache.memory (S3-FIFO).",
     .off = AT(cache.evictions), .need = NEED_CACHE},
    {"h2gate_cache_purged_total", "counter",
     "Entries removed on request: by unsafe methods' answers (RFC 9111 section 4.4) and the "
     "admin listener's POST /cache/purge.",
     .off = AT(cache.purged), .need = NEED_CACHE},
    {"h2gate_cache_dropped_total", "counter",
     "Entries removed by a reload: their route is gone or no longer has cache: true.",
     .off = AT(cache.dropped), .need = NEED_CACHE},
    {"h2gate_cache_bytes", "gauge",
     "Bytes the shared cache is charged now (bodies' buffers, heads, keys, index).",
     .off = AT(cache.bytes), .need = NEED_CACHE},
    {"h2gate_cache_objects", "gauge", "Entries in the shared cache now.", .off = AT(cache.objects),
     .need = NEED_CACHE},
    {"h2gate_cluster_up", "gauge",
     "1 while the cluster's Redis answers (the last call succeeded), else 0.",
     .off = AT(cluster_up), .need = NEED_CLUSTER},
    {"h2gate_cluster_degraded_total", "counter",
     "Times the cluster's Redis stopped answering (event=cluster_degraded).",
     .off = AT(cluster.degraded), .need = NEED_CLUSTER},
    {"h2gate_cluster_calls_total", "counter", "Calls to the cluster's Redis, by result.",
     .label = "result", POINTS(cluster_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_ticket_rotations_total", "counter",
     "New shared TLS ticket keys this instance made (under the rotation lock).",
     .off = AT(cluster.rotations), .need = NEED_CLUSTER},
    {"h2gate_cluster_ticket_key_updates_total", "counter",
     "Changes of the shared TLS ticket keys this instance took from Redis.",
     .off = AT(cluster.key_updates), .need = NEED_CLUSTER},
    {"h2gate_cluster_rate_decisions_total", "counter",
     "Shared request-rate answers to the workers (routes[].request_rate), by verdict: allowed "
     "and limited by Redis, local when the worker's own bucket decided.",
     .label = "verdict", POINTS(cluster_verdicts), .need = NEED_CLUSTER},
    {"h2gate_cluster_rate_calls_total", "counter",
     "Redis script calls for shared request rates (one per client key and batch).",
     .off = AT(cluster.rate_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_calls_total", "counter",
     "Redis script calls for bandwidth leases (throttle.per_client_rate across instances).",
     .off = AT(cluster.lease_calls), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_bytes_total", "counter",
     "Response bytes Redis granted this instance's clients in leases.",
     .off = AT(cluster.lease_bytes), .need = NEED_CLUSTER},
    {"h2gate_cluster_lease_local_total", "counter",
     "Lease requests Redis did not answer in time (the local bucket decided).",
     .off = AT(cluster.lease_local), .need = NEED_CLUSTER},
    {"h2gate_cluster_bad_replies_total", "counter",
     "Redis replies refused: too_large (past cluster.max_reply, the connection dropped), "
     "out_of_range (a number no script returns; decided locally).",
     .label = "reason", POINTS(cluster_bad_replies), .need = NEED_CLUSTER},
    {"h2gate_cluster_instances", "gauge",
     "Instances alive at this one's last heartbeat in Redis (0: none read yet); while Redis "
     "cannot decide, each enforces this share of a shared limit.",
     .off = AT(cluster.instances), .need = NEED_CLUSTER},
    {"h2gate_cluster_primary_info", "gauge",
     "Always 1; the address of the Redis primary the cluster took last (cluster.redis, or the "
     "one the sentinels named and ROLE confirmed) is a label.",
     .over = OVER_CUSTOM, .write = write_primary_info, .need = NEED_CLUSTER},
    {"h2gate_cluster_failovers_total", "counter",
     "Times the cluster's primary changed address (a failover followed through the sentinels).",
     .off = AT(cluster.failovers), .need = NEED_CLUSTER},
    {"h2gate_cluster_primary_silent_total", "counter",
     "Connections to the cluster's Redis primary dropped because no reply came for "
     "cluster.ping_interval + cluster.timeout (event=cluster_primary_silent).",
     .off = AT(cluster.silent), .need = NEED_CLUSTER},
    {"h2gate_cluster_local_mode_seconds_total", "counter",
     "Time this instance decided alone (Redis down, slow, failing over or not reached yet).",
     .off = AT(cluster.local_us), .us = 1, .need = NEED_CLUSTER},
    {"h2gate_tls_certificate_expiry_seconds", "gauge",
     "The notAfter (Unix time) of the certificate served for each name of tls.acme: the ACME "
     "certificate, or the self-signed stand-in until it comes.",
     .over = OVER_CUSTOM, .write = write_cert_expiry, .need = NEED_ACME},
    {"h2gate_acme_orders_total", "counter",
     "ACME orders by result: issued (a certificate installed) or failed (backed off).",
     .label = "result", POINTS(acme_results), .need = NEED_ACME},
    {"h2gate_acme_renewal_failures_total", "counter",
     "Failed ACME orders that were to replace a certificate still usable (it stays served).",
     .off = AT(acme_renewal_failures), .need = NEED_ACME},
    {"h2gate_config_generation", "gauge", "The configuration in use: 1 at start, +1 per reload.",
     .off = AT(gen_id)},
    {"h2gate_build_info", "gauge", "Always 1; the version is a label.", .over = OVER_CUSTOM,
     .write = write_build_info},
    /* the standard process series, named and explained as the Prometheus client libraries do */
    {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
     .off = AT(proc.cpu_us), .us = 1, .need = NEED_PROC},
    {"process_open_fds", "gauge", "Number of open file descriptors.", .off = AT(proc.open_fds),
     .need = NEED_PROC},
    {"process_max_fds", "gauge", "Maximum number of open file descriptors.",
     .off = AT(proc.max_fds), .need = NEED_PROC},
    {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
     .off = AT(proc.vsize), .need = NEED_PROC},
    {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
     .off = AT(proc.rss), .need = NEED_PROC},
    {"process_start_time_seconds", "gauge",
     "Start time of the process since unix epoch in seconds.", .off = AT(proc.start_us), .us = 1,
     .need = NEED_PROC},
};

/* One sample (or a histogram's) of f: the number at base + off, labels l[0..n). */
static int write_value(const fam_t *f, const void *base, size_t off, const gw_label_t *l, size_t n,
                       gw_bytes_t *out)
{
    const char *p = (const char *)base + off;
    if (!strcmp(f->type, "histogram"))
        return gw_prom_hist(out, f->name, l, n, (const gw_hist_t *)(const void *)p);
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return f->us ? gw_prom_sample_us(out, f->name, l, n, v) : gw_prom_sample(out, f->name, l, n, v);
}

/* The samples of one entity: one, or one per point (l has room for the point's label). */
static int write_entity(const fam_t *f, const void *base, gw_label_t *l, size_t n, gw_bytes_t *out)
{
    if (!f->points)
        return write_value(f, base, f->off, l, n, out);
    int rv = 0;
    for (size_t i = 0; i < f->npoints && rv == 0; i++) {
        l[n] = (gw_label_t){f->label, f->points[i].value};
        rv = write_value(f, base, f->points[i].off, l, n + 1, out);
    }
    return rv;
}

static int write_family(const fam_t *f, const scrape_t *sc, gw_bytes_t *out)
{
    const gw_mset_t *t = &sc->t;
    const char *const table_names[2] = {"clients", "rates"};
    gw_label_t l[3];
    char id[16];
    int rv = gw_prom_family(out, f->name, f->type, f->help);
    switch (f->over) {
    case OVER_ONE:
        if (rv == 0)
            rv = write_entity(f, sc, l, 0, out);
        break;
    case OVER_ROUTES:
        for (size_t i = 0; i < t->nroutes && rv == 0; i++) {
            l[0] = (gw_label_t){"route", t->routes[i].name};
            rv = write_entity(f, &t->routes[i], l, 1, out);
        }
        break;
    case OVER_UPS:
        for (size_t i = 0; i < t->nups && rv == 0; i++) {
            l[0] = (gw_label_t){"upstream", t->ups[i].name};
            rv = write_entity(f, &t->ups[i], l, 1, out);
        }
        break;
    case OVER_SERVERS:
        for (size_t i = 0; i < t->nservers && rv == 0; i++) {
            l[0] = (gw_label_t){"upstream", t->servers[i].up};
            l[1] = (gw_label_t){"server", t->servers[i].server};
            rv = write_entity(f, &t->servers[i], l, 2, out);
        }
        break;
    case OVER_WORKERS:
        for (unsigned i = 0; i < sc->nworkers && rv == 0; i++) {
            snprintf(id, sizeof(id), "%u", i);
            l[0] = (gw_label_t){"worker", id};
            rv = write_entity(f, (const char *)sc + i * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_TABLES:
        for (size_t i = 0; i < 2 && rv == 0; i++) {
            if (!sc->tables[i].on)
                continue;
            l[0] = (gw_label_t){"table", table_names[i]};
            rv = write_entity(f, &sc->tables[i], l, 1, out);
        }
        break;
    case OVER_CODINGS:
        for (size_t c = GW_ZC_GZIP; c < GW_ZC_N && rv == 0; c++) {
            l[0] = (gw_label_t){"coding", gw_proxy_coding_name((gw_zcoding_t)c)};
            rv = write_entity(f, (const char *)sc + c * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_CAUSES:
        for (size_t k = GW_ZSKIP_STATUS; k < GW_ZSKIP_N && rv == 0; k++) {
            l[0] = (gw_label_t){"cause", gw_proxy_zskip_name((gw_zskip_t)k)};
            rv = write_entity(f, (const char *)sc + k * sizeof(uint64_t), l, 1, out);
        }
        break;
    case OVER_CUSTOM:
        if (rv == 0)
            rv = f->write(f, sc, out);
        break;
    }
    return rv;
}

static int shown(const fam_t *f, const scrape_t *sc)
{
    switch (f->need) {
    case NEED_TABLES:
        return sc->tables[0].on || sc->tables[1].on;
    case NEED_CLUSTER:
        return sc->cluster_on;
    case NEED_ACME:
        return sc->acme_on;
    case NEED_PROC:
        return sc->proc.ok;
    case NEED_CACHE:
        return sc->cache_on;
    case NEED_NONE:
        break;
    }
    return 1;
}

static int render(const scrape_t *sc, gw_bytes_t *out)
{
    int rv = 0;
    for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]) && rv == 0; i++)
        if (shown(&fams[i], sc))
            rv = write_family(&fams[i], sc, out);
    return rv;
}

/* ---- asking the workers -----------------------------------------------------------------------
 */

/* The worker took the snapshot of ticket (UINT64_MAX: its last, at exit): scrapes stop waiting
 * for it. */
void gw_server__metrics_answer(gw_worker_t *w, uint64_t ticket)
{
    gw_front_metrics_snapshot(&w->f);
    gw_server_t *s = w->srv;
    uv_mutex_lock(&s->snap_mu);
    w->snap_done = ticket;
    uv_cond_broadcast(&s->snap_cond);
    uv_mutex_unlock(&s->snap_mu);
}

void gw_server__on_scrape(uv_async_t *a)
{
    gw_worker_t *w = GW_CONTAINER_OF(a, gw_worker_t, scrape);
    uv_mutex_lock(&w->srv->snap_mu);
    uint64_t ticket = w->srv->snap_ticket;
    uv_mutex_unlock(&w->srv->snap_mu);
    gw_server__metrics_answer(w, ticket);
}

/* The ACME client's counters and the certificate of each name, under s->lock (the generation
 * and its stores stay while it is held; each store locks itself against the main loop). */
static void acme_read(gw_server_t *s, scrape_t *sc)
{
#if !GW_HAVE_ACME
    (void)s;
    (void)sc; /* no client: a config with acme: is refused at load */
#else
    const gw_config_t *cfg = s->gen->cfg;
    if (!cfg->acme.enabled)
        return;
    sc->acme_on = 1;
    sc->acme_issued = atomic_load(&s->acme_counters.issued);
    sc->acme_failed = atomic_load(&s->acme_counters.failed);
    sc->acme_renewal_failures = atomic_load(&s->acme_counters.renewal_failures);
    size_t n = 0;
    for (size_t i = 0; i < cfg->listen_len; i++)
        if (s->gen->stores[i] && cfg->listen[i].tls)
            n += cfg->listen[i].tls->acme_len;
    if (n == 0 || !(sc->certs = gw_calloc(n, sizeof(*sc->certs))))
        return;
    for (size_t i = 0; i < cfg->listen_len; i++) {
        int64_t na;
        if (!s->gen->stores[i] || !cfg->listen[i].tls ||
            gw_tls_store_not_after(s->gen->stores[i], &na) < 0 || na < 0)
            continue;
        for (size_t k = 0; k < cfg->listen[i].tls->acme_len; k++) {
            snprintf(sc->certs[sc->certs_len].name, sizeof(sc->certs[0].name), "%s",
                     cfg->listen[i].tls->acme[k]);
            sc->certs[sc->certs_len++].not_after = (uint64_t)na;
        }
    }
#endif
}

int gw_server_metrics(gw_server_t *s, gw_bytes_t *out)
{
    /* the workers that run (their async handles are open), asked for a fresh copy */
    gw_worker_t *ws[GW_SERVER_MAX_WORKERS];
    unsigned n = 0;
    scrape_t *sc = gw_calloc(1, sizeof(*sc));
    if (!sc)
        return GW_E_NOMEM;
    uv_mutex_lock(&s->snap_mu);
    uint64_t ticket = ++s->snap_ticket;
    uv_mutex_unlock(&s->snap_mu);
    uv_mutex_lock(&s->lock);
    for (unsigned i = 0; i < s->workers_len && n < GW_SERVER_MAX_WORKERS; i++) {
        gw_worker_t *w = s->workers[i];
        if (!w || !w->snap_ok)
            continue;
        ws[n++] = w;
        if (w->wake_open)
            uv_async_send(&w->scrape);
    }
    for (unsigned i = 0; i < s->workers_len && i < GW_SERVER_MAX_WORKERS; i++) {
        gw_worker_t *w = s->workers[i];
        sc->accepted[i] = w ? atomic_load(&w->f.accepted) : 0;
        sc->busy[i] = w ? atomic_load(&w->f.busy) : 0;
        sc->nworkers = i + 1;
    }
    gw_shared_table_t *tabs[2] = {s->gen->clients, s->gen->rates};
    for (int i = 0; i < 2; i++)
        if (tabs[i]) {
            sc->tables[i].on = 1;
            sc->tables[i].size = gw_bucket_table_size(tabs[i]->t);
            sc->tables[i].evictions = gw_bucket_table_evictions(tabs[i]->t);
            sc->tables[i].refused = gw_bucket_table_refused(tabs[i]->t);
        }
    if (s->gen->cache) {
        sc->cache_on = 1;
        gw_cache_stats(s->gen->cache->c, &sc->cache);
    }
    if (s->cluster) {
        sc->cluster_on = 1;
        sc->cluster = gw_cluster_stats(s->cluster);
        sc->cluster_up = sc->cluster.up ? 1 : 0;
    }
    gw_front_mset_seed(&sc->t, s->gen->cfg);
    acme_read(s, sc);
    uv_mutex_unlock(&s->lock);
    sc->reloads_ok = atomic_load(&s->reloads_ok);
    sc->reloads_failed = atomic_load(&s->reloads_failed);
    sc->gen_id = atomic_load(&s->gen_id);
    for (int i = 0; i < 2; i++) {
        sc->heap_trims[i] = atomic_load_explicit(&s->heap.trims[i], memory_order_relaxed);
        sc->heap_trim_us[i] =
            atomic_load_explicit(&s->heap.trim_ns[i], memory_order_relaxed) / 1000;
    }
    sc->heap_trims_skipped = atomic_load_explicit(&s->heap.skipped, memory_order_relaxed);
    read_proc(&sc->proc);
    uint64_t deadline = uv_hrtime() + (uint64_t)SCRAPE_WAIT_MS * 1000000u;
    uv_mutex_lock(&s->snap_mu);
    for (;;) {
        int waiting = 0;
        for (unsigned i = 0; i < n; i++)
            waiting |= ws[i]->snap_done < ticket;
        uint64_t now = uv_hrtime();
        if (!waiting || now >= deadline)
            break;
        (void)uv_cond_timedwait(&s->snap_cond, &s->snap_mu, deadline - now);
    }
    uv_mutex_unlock(&s->snap_mu);
    for (unsigned i = 0; i < n; i++)
        gw_front_metrics_add(&ws[i]->f, &sc->t);
    int rv = render(sc, out);
    gw_front_mset_free(&sc->t);
    gw_free(sc->certs);
    gw_free(sc);
    return rv;
}
