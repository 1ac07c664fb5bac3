/* h2_session_util.h — the fixture of the HTTP/2 session unit tests (test_h2_session*.c): a
 * server session, an event recorder on its callbacks, a client that writes frames to it, and the
 * frames it answered (see h2_session_util.c). */
#ifndef GW_TEST_H2_SESSION_UTIL_H
#define GW_TEST_H2_SESSION_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "test_util.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/err.h"
#include "h2/frame.h"
#include "h2/hpack.h"
#include "h2/session.h"

/* ---- event recorder ------------------------------------------------------------------- */

typedef struct {
    char log[8192];
    size_t len;
    gw_h2_session_t *s;
    int consume; /* consume data at once */
    int release_on_close;
} rec_t;

#define SL(x) (int)(x).len, (const char *)(x).base

/* ---- client side helpers --------------------------------------------------------------- */

typedef struct {
    gw_bytes_t b;
    gw_hpack_enc_t enc;
} cli_t;

/* ---- output parsing -------------------------------------------------------------------- */

typedef struct {
    gw_h2_frame_hdr_t h;
    uint8_t p[256];
} outf_t;

typedef struct {
    outf_t f[64];
    size_t n;
} outs_t;

int on_request(void *ud, const gw_h2_head_t *h);
int on_data(void *ud, uint32_t sid, const uint8_t *d, size_t len);
int on_trailers(void *ud, uint32_t sid, const gw_h2_header_t *h, size_t n);
int on_end_stream(void *ud, uint32_t sid);
void on_close(void *ud, uint32_t sid, uint32_t code, int by_peer);
void on_goaway(void *ud, uint32_t last, uint32_t code, gw_slice_t dbg);
extern const gw_h2_callbacks_t cbs;
void cli_init(cli_t *c, int preface);
void cli_free(cli_t *c);
void block(cli_t *c, gw_bytes_t *out, const char *const *kv);
void cli_headers(cli_t *c, uint32_t sid, uint8_t flags, const char *const *kv);
/* A client SETTINGS frame with the one setting id = value. */
void cli_setting(cli_t *c, uint16_t id, uint32_t value);
/* times HEADERS frames on sid, each the whole block blk[0..len) with END_STREAM. */
void cli_blocks(cli_t *c, uint32_t sid, const uint8_t *blk, size_t len, int times);
extern const char *const GET[];
extern const char *const GET_I[];
extern const char *const GET_U0[];
extern const char *const POST[];
void drain(gw_h2_session_t *s, outs_t *o);
/* drain() through gw_h2_session_send_some(s, q, data_max) (SIZE_MAX: gw_h2_session_send). */
void drain_some(gw_h2_session_t *s, outs_t *o, size_t data_max);

/* The fields of a header block the gateway sent, as the client decoded them: "name=value;"
 * each, in order. */
typedef struct {
    char text[1024];
    size_t len;
} dec_log_t;

/* Decode the header block p[0..len) with the client's decoder d (its table carried across
 * calls) into l; returns the decoder's verdict (0, or < 0 when the block is bad). */
int decode_block(gw_hpack_dec_t *d, const uint8_t *p, size_t len, dec_log_t *l);
uint32_t get32(const uint8_t *p);
const outf_t *find_type(const outs_t *o, uint8_t type, size_t nth);
void expect_goaway(const outs_t *o, uint32_t code);
/* The first RST_STREAM on stream sid in o, or NULL. */
const outf_t *find_rst(const outs_t *o, uint32_t sid);
void expect_rst(const outs_t *o, uint32_t sid, uint32_t code);
gw_h2_session_t *server(rec_t *r, const gw_h2_options_t *o);
/* server() with the callbacks cb instead of cbs (r is still their user data). */
gw_h2_session_t *server_cb(rec_t *r, const gw_h2_options_t *o, const gw_h2_callbacks_t *cb);
ssize_t feed(gw_h2_session_t *s, const gw_bytes_t *b);
void cli_send(gw_h2_session_t *s, cli_t *c);
/* cli_send(), then the session's answer drained into o. */
void cli_exchange(gw_h2_session_t *s, cli_t *c, outs_t *o);
/* The client freed, then the session. */
void session_end(gw_h2_session_t *s, cli_t *c);
gw_h2_session_t *ready(rec_t *r, cli_t *c, const gw_h2_options_t *o);
gw_h2_session_t *ready_get(rec_t *r, cli_t *c, const gw_h2_options_t *o);

#define logf_(r, ...) GW_TEST_LOGF(r, __VA_ARGS__)

/* ---- the fixture: one session at a time and its client -------------------------------- */

typedef struct {
    rec_t r;             /* what the session's callbacks saw */
    cli_t c;             /* the client's pending bytes and its HPACK encoder */
    outs_t o;            /* the frames of the last drain */
    gw_h2_options_t opt; /* the session's options: defaults, which a test changes first */
    gw_h2_session_t *s;  /* the session of fready()/fready_get() */
} sfix_t;

/* cmocka's setup and teardown of a SESSION_TEST: a fresh fixture in *state; teardown frees the
 * session and the client it holds. */
int sfix_setup(void **state);
int sfix_teardown(void **state);
#define SESSION_TEST(fn) cmocka_unit_test_setup_teardown(fn, sfix_setup, sfix_teardown)
/* Free the session f holds (and its client), if any. */
void fend(sfix_t *f);
/* fend(), then ready() (or ready_get()) with f->opt: the new session, also in f->s. */
gw_h2_session_t *fready(sfix_t *f);
gw_h2_session_t *fready_get(sfix_t *f);

#endif
