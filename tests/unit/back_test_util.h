/* back_test_util.h — the fixture of every back/ unit test: in-process origins on the test's
 * libuv loop, the config of one upstream over them, a back, and clients that count what their
 * exchanges got (see back_test_util.c). */
#ifndef GW_TEST_BACK_TEST_UTIL_H
#define GW_TEST_BACK_TEST_UTIL_H

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include "test_util.h"
#include "back/back.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

/* ---- in-process origin ---------------------------------------------------------------------- */

typedef enum {
    O_OK = 0,     /* 200, Content-Length: 5, keep-alive */
    O_CLOSE,      /* 200 with Connection: close, then close */
    O_HTTP10,     /* HTTP/1.0 200 without keep-alive, then close */
    O_SILENT,     /* read the request, never answer */
    O_STALL_BODY, /* head with Content-Length: 100, 5 bytes, then nothing */
    O_DROP_FIRST, /* close the first connection when its request arrives; then O_OK */
    O_DROP_ALL,   /* close every connection when its request arrives */
    O_BIG,        /* 200 with a 1 MiB body */
    O_CHUNKED,    /* 103, then a chunked 200 with a trailer */
    O_LATE_CLOSE, /* O_OK, then close the connection 30 ms later (idle close by the origin) */
    O_CLOSE_NOW,  /* O_OK without Connection: close, but close right after writing it */
    O_EARLY,      /* answer 413 as soon as the request head is in, ignore the body */
    O_ECHO,       /* 200 whose body is the request target; what the target asks (oecho) */
    O_DRIP, /* Content-Length drip_len: DRIP_PIECE bytes with the head, one more every drip_ms */
} omode_t;

#define DRIP_PIECE 4096

typedef struct origin {
    uv_tcp_t srv;
    int port;
    omode_t mode;
    int accepted;
    int open;
    int requests;
    int dropped;
    int closed_handles;
    int id;
    int max_batch;    /* O_ECHO: most requests taken from one read */
    int max_per_conn; /* O_ECHO: most requests answered on one connection */
    size_t drip_len;  /* O_DRIP */
    unsigned drip_ms;
} origin_t;

typedef struct {
    uv_tcp_t tcp;
    uv_timer_t timer;
    origin_t *o;
    char buf[65536];
    size_t len;
    int handles;
    int closing;
    int answered;
    /* O_ECHO: responses of one read leave in one write; `delayed` holds them (and everything
     * after them, in order) until the timer fires. */
    char out[16384];
    size_t outlen;
    int delayed;
    int hung;
    int close_after_flush;
    int served;
    size_t dripped; /* O_DRIP: body bytes sent */
} oconn_t;

typedef struct {
    uv_write_t req;
    oconn_t *c;
    int close_after;
    char *copy;
} owrite_t;

/* ---- config --------------------------------------------------------------------------------- */

#define GW_TEST_SERVERS 8 /* at most, in a tcfg_t */

typedef struct {
    gw_config_t cfg;
    gw_cfg_upstream_t up;
    gw_cfg_server_t srv[GW_TEST_SERVERS];
    char host[GW_TEST_SERVERS][32];
} tcfg_t;

/* ---- client side ---------------------------------------------------------------------------- */

typedef struct client {
    gw_back_t *back;
    int started, target, inflight, max_inflight;
    int completed, errors, last_error, last_status, interim, noent;
    size_t body_bytes;
    size_t max_chunk, first_chunk; /* largest on_body slice; the first one of a response */
    int body_calls;                /* on_body calls: socket reads that brought body bytes */
    int pause_on_body;             /* pause the exchange at its first body bytes (paused_x) */
    gw_back_exch_t *paused_x;
    int cancel_on_body;
    int trailers;
    char body[64];
    size_t body_len;
    int idempotent;
    const char *method;
    struct sockaddr_in client_addr;
    int use_client;
} client_t;
void start_one(client_t *cl);

extern uv_loop_t loop;
void oconn_closed(uv_handle_t *h);
void oconn_close(oconn_t *c);
void owrote(uv_write_t *req, int status);
void osend(oconn_t *c, const char *p, size_t n, int close_after, int copy);
void olate(uv_timer_t *t);
void oflush(oconn_t *c);
void odelayed(uv_timer_t *t);
extern char big_body[1 << 20];
void odrip(uv_timer_t *t);
__attribute__((format(printf, 2, 3))) void oappend(oconn_t *c, const char *fmt, ...);
void oecho(oconn_t *c, const char *req, size_t len);
size_t request_len(const char *buf, size_t len);
void oanswer(oconn_t *c);
void oalloc(uv_handle_t *h, size_t hint, uv_buf_t *b);
void oread(uv_stream_t *s, ssize_t n, const uv_buf_t *b);
void oaccept(uv_stream_t *srv, int status);
void origin_start(origin_t *o, omode_t mode, int port);
void origin_stop(origin_t *o);
int closed_port(void);
void tcfg_init(tcfg_t *t, const int *ports, const unsigned *weights, size_t n);
void c_interim(gw_back_exch_t *x, void *ud, const gw_back_head_t *h);
void c_head(gw_back_exch_t *x, void *ud, const gw_back_head_t *h);
void c_body(gw_back_exch_t *x, void *ud, gw_rslice_t b);
void c_trailers(gw_back_exch_t *x, void *ud, const gw_back_field_t *f, size_t n);
void c_complete(gw_back_exch_t *x, void *ud);
void c_error(gw_back_exch_t *x, void *ud, int code);
extern const gw_back_cbs_t ccbs;
int request(client_t *cl, gw_back_exch_t **out);
void start_one(client_t *cl);
int run_until(int (*pred)(void *), void *arg, uint64_t ms);
int done_pred(void *a);
void wake(uv_timer_t *t);
int flag_pred(void *a);
void run_for(uint64_t ms);
void teardown_all(gw_back_t *b, origin_t *o, size_t n);
/* cmocka's setup and teardown of a back test: the loop, and a fixture (bfix_t) in *state that
 * teardown ends (fix_end) and whose loop must then have no handle left. */
int setup(void **state);
int teardown(void **state);
gw_back_t *mkback(tcfg_t *t);

/* ---- the fixture: origins, the config of one upstream over them, the back ------------------ */

typedef struct {
    origin_t o[3]; /* the origins, started by fix_origins() (o[0] by fix_origin()) */
    size_t n;      /* how many of o[] run */
    tcfg_t t;      /* one upstream with a server per origin; change t.up before fix_back() */
    gw_back_t *b;  /* fix_back() */
    client_t cl;   /* fix_run() */
} bfix_t;

/* One origin in mode and the upstream whose only server it is (tcfg_init's defaults); returns
 * the origin. */
origin_t *fix_origin(bfix_t *f, omode_t mode);
/* n origins in modes[0..n), the upstream over them with weights (NULL: 1 each). */
void fix_origins(bfix_t *f, const omode_t *modes, const unsigned *weights, size_t n);
/* No origin: the upstream's only server is port (a closed_port(), or one the test serves). */
void fix_port(bfix_t *f, int port);
/* A listening socket on 127.0.0.1 with backlog that nothing accepts from (the test does, or
 * not), and the upstream whose only server it is (fix_port); returns the socket. */
int listen_fd(int backlog, bfix_t *f);
/* Start an origin in mode on the port of f's only server (a fix_port() that was closed). */
origin_t *fix_origin_at_port(bfix_t *f, omode_t mode);
/* The back over f->t. */
gw_back_t *fix_back(bfix_t *f);
/* gw_back_del (unless the test deleted it and set f->b to NULL), stop the origins, run the
 * loop until their handles closed; f can start again. teardown() does it after each test. */
void fix_end(bfix_t *f);

/* The counters of the whole back. */
gw_back_stats_t stats_of(gw_back_t *b);
/* b's counters are as spec says: "NAME=VALUE" pairs, space-separated (opened, reused, closed,
 * requests, retries, failures, pipelined, unanswered, purged, open, active, idle, queued, ...:
 * the fields of gw_back_stats_t); the others are not checked. */
void expect_stats(gw_back_t *b, const char *spec);
/* Start cl's requests (up to max_inflight at a time, the rest as those finish) and run the
 * loop until target of them completed or failed; fails the test after ms. */
void run_client(client_t *cl, uint64_t ms);
/* f->cl made anew: n requests on b, at most inflight at once, run (run_client) within ms. */
client_t *fix_run(bfix_t *f, gw_back_t *b, int n, int inflight, uint64_t ms);
/* cl completed `completed` requests and failed `errors`. */
void expect_done(const client_t *cl, int completed, int errors);
/* Start a request with a body for cl: method to target, body_len bytes (-1: chunked);
 * counted as started and in flight. */
gw_back_exch_t *upload(client_t *cl, const char *method, const char *target, int64_t body_len);
/* A new buffer holding the bytes of s (one reference, the caller's). */
gw_rbuf_t *rbuf_of(const char *s);

/* One test of a back test file: the loop set up before, checked empty after. */
#define BACK_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
/* The group setup of a back test file (GW_TEST_MAIN_GROUP): SIGPIPE ignored as in the
 * gateway, big_body filled. */
int back_group_setup(void **state);

#endif
