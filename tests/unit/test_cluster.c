/* Unit tests of cluster/tickets.c: the shared ticket keys' value in Redis, when they are due,
 * and what a rotation keeps; of cluster/replies.c: every number Redis answers is bounded before
 * use; of cluster/rates.c: a question the hub accepted is answered, whatever memory does; and
 * of cluster/redis.c's keepalive: when an idle connection is sent PING, when a silent one goes. */
#include <arpa/inet.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_util.h"

#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/alloc.h"
#include "common/err.h"

static gw_cluster_keys_t two_keys(void)
{
    gw_cluster_keys_t k = {.born_ms = 0x0102030405060708ull, .n = 2};
    for (size_t i = 0; i < 2 * GW_TLS_KEY_LEN; i++)
        k.keys[i] = (uint8_t)(i * 13);
    return k;
}

static void test_value_round_trip(void **state)
{
    (void)state;
    gw_cluster_keys_t k = two_keys(), back;
    uint8_t v[GW_CLUSTER_KEYS_MAX_LEN];
    size_t n = gw_cluster__keys_write(&k, v);
    assert_int_equal(n, GW_CLUSTER_KEYS_HEAD + 2 * GW_TLS_KEY_LEN);
    assert_memory_equal(v, "h2gk\x01\x02\x01\x02\x03\x04\x05\x06\x07\x08", 14);
    memset(&back, 0, sizeof(back));
    assert_int_equal(gw_cluster__keys_parse(v, n, &back), 0);
    assert_int_equal(back.n, 2);
    assert_true(back.born_ms == k.born_ms);
    assert_memory_equal(back.keys, k.keys, 2 * GW_TLS_KEY_LEN);
}

/* Whatever else sits under the key (another program's value, a truncated write, a later
 * version) is not taken for keys. */
static void test_value_refused(void **state)
{
    (void)state;
    gw_cluster_keys_t k = two_keys(), back;
    uint8_t v[GW_CLUSTER_KEYS_MAX_LEN];
    size_t n = gw_cluster__keys_write(&k, v);
    assert_int_equal(gw_cluster__keys_parse(v, n - 1, &back), GW_E_PARSE); /* short */
    assert_int_equal(gw_cluster__keys_parse(v, 13, &back), GW_E_PARSE);    /* no head */
    assert_int_equal(gw_cluster__keys_parse((const uint8_t *)"hello", 5, &back), GW_E_PARSE);
    v[4] = 2; /* version */
    assert_int_equal(gw_cluster__keys_parse(v, n, &back), GW_E_PARSE);
    v[4] = 1;
    v[5] = 0; /* no key */
    assert_int_equal(gw_cluster__keys_parse(v, GW_CLUSTER_KEYS_HEAD, &back), GW_E_PARSE);
    v[5] = GW_TLS_KEYRING_MAX + 1; /* too many */
    assert_int_equal(gw_cluster__keys_parse(v, GW_CLUSTER_KEYS_MAX_LEN, &back), GW_E_PARSE);
    v[5] = 3; /* says three, holds two */
    assert_int_equal(gw_cluster__keys_parse(v, n, &back), GW_E_PARSE);
    v[0] = 'x';
    v[5] = 2;
    assert_int_equal(gw_cluster__keys_parse(v, n, &back), GW_E_PARSE);
}

static void test_due(void **state)
{
    (void)state;
    gw_cluster_keys_t k = two_keys();
    k.born_ms = 1000000;
    assert_true(gw_cluster__keys_due(NULL, 5, 1000));      /* none in Redis */
    assert_false(gw_cluster__keys_due(&k, 1000999, 1000)); /* young */
    assert_true(gw_cluster__keys_due(&k, 1001000, 1000));  /* exactly a period */
    assert_true(gw_cluster__keys_due(&k, 9000000, 1000));  /* long overdue */
    assert_false(gw_cluster__keys_due(&k, 10, 1000));      /* born in our future */
    /* a birth more than a day ahead is not a clock running ahead: left alone, no key would
     * rotate until that date (born_ms is any 64-bit number Redis holds) */
    k.born_ms = 1000000 + GW_CLUSTER_KEYS_FUTURE_MS;
    assert_false(gw_cluster__keys_due(&k, 1000000, 1000));
    assert_true(gw_cluster__keys_due(&k, 999999, 1000));
    k.born_ms = UINT64_MAX;
    assert_true(gw_cluster__keys_due(&k, 1000000, 1000));
    assert_true(gw_cluster__keys_due(&k, 0, 1000));
    k.n = 0;
    assert_true(gw_cluster__keys_due(&k, 1000001, 1000));
}

/* A rotation puts the fresh key first, keeps the one it replaces second and drops older ones;
 * the first rotation (nothing in Redis) has the fresh key alone. */
static void test_rotate(void **state)
{
    (void)state;
    uint8_t fresh[GW_TLS_KEY_LEN];
    memset(fresh, 0xee, sizeof(fresh));
    gw_cluster_keys_t none_next;
    gw_cluster__keys_rotate(NULL, fresh, 77, &none_next);
    assert_int_equal(none_next.n, 1);
    assert_true(none_next.born_ms == 77);
    assert_memory_equal(none_next.keys, fresh, GW_TLS_KEY_LEN);
    gw_cluster_keys_t cur = two_keys(), next;
    gw_cluster__keys_rotate(&cur, fresh, 99, &next);
    assert_int_equal(next.n, 2);
    assert_true(next.born_ms == 99);
    assert_memory_equal(next.keys, fresh, GW_TLS_KEY_LEN);
    assert_memory_equal(next.keys + GW_TLS_KEY_LEN, cur.keys, GW_TLS_KEY_LEN);
    gw_cluster_keys_t after;
    gw_cluster__keys_rotate(&next, cur.keys + GW_TLS_KEY_LEN, 120, &after);
    assert_int_equal(after.n, 2);
    assert_memory_equal(after.keys + GW_TLS_KEY_LEN, fresh, GW_TLS_KEY_LEN);
}

/* ---- Redis's answers, bounded ------------------------------------------------------------- */

/* The rate script's {ok, retry_us}: Retry-After is whole seconds rounded up, between 1 s and a
 * day whatever Redis says (LLONG_MAX µs once overflowed `retry_us + 999999` in signed
 * arithmetic: undefined behaviour, and `Retry-After: 2217714955`); an allowed count outside
 * 0..n is refused (the questions are decided locally). */
static void test_rate_reply_bounded(void **state)
{
    (void)state;
    uint64_t ok = 99;
    unsigned retry = 99;
    assert_int_equal(gw_cluster__rate_reply(2, 1, 3, &ok, &retry), 0);
    assert_true(ok == 2);
    assert_int_equal(retry, 1);
    assert_int_equal(gw_cluster__rate_reply(0, 1000000, 3, &ok, &retry), 0);
    assert_int_equal(retry, 1);
    assert_int_equal(gw_cluster__rate_reply(0, 1000001, 3, &ok, &retry), 0);
    assert_int_equal(retry, 2);
    assert_int_equal(gw_cluster__rate_reply(3, 0, 3, &ok, &retry), 0);
    assert_true(ok == 3);
    assert_int_equal(retry, 1);
    assert_int_equal(gw_cluster__rate_reply(0, -5, 1, &ok, &retry), 0);
    assert_int_equal(retry, 1);
    assert_int_equal(gw_cluster__rate_reply(0, LLONG_MIN, 1, &ok, &retry), 0);
    assert_int_equal(retry, 1);
    assert_int_equal(gw_cluster__rate_reply(0, 86400ll * 1000000, 1, &ok, &retry), 0);
    assert_int_equal(retry, GW_CLUSTER_RETRY_MAX_S);
    assert_int_equal(gw_cluster__rate_reply(0, 86400ll * 1000000 + 1, 1, &ok, &retry), 0);
    assert_int_equal(retry, GW_CLUSTER_RETRY_MAX_S);
    assert_int_equal(gw_cluster__rate_reply(0, LLONG_MAX, 1, &ok, &retry), 0);
    assert_int_equal(retry, 86400);
    assert_int_equal(gw_cluster__rate_reply(0, LLONG_MAX - 999998, 1, &ok, &retry), 0);
    assert_int_equal(retry, 86400);
    ok = 7;
    assert_int_equal(gw_cluster__rate_reply(4, 0, 3, &ok, &retry), GW_E_PARSE);
    assert_int_equal(gw_cluster__rate_reply(-1, 0, 3, &ok, &retry), GW_E_PARSE);
    assert_int_equal(gw_cluster__rate_reply(LLONG_MIN, 0, 3, &ok, &retry), GW_E_PARSE);
    assert_int_equal(gw_cluster__rate_reply(LLONG_MAX, 0, 3, &ok, &retry), GW_E_PARSE);
    assert_true(ok == 7); /* untouched when refused */
}

/* The lease script's grant: 0..want, anything else refused (the bytes were once counted as
 * granted whatever their number). */
static void test_lease_reply_bounded(void **state)
{
    (void)state;
    uint64_t g = 99;
    assert_int_equal(gw_cluster__lease_reply(0, 100, &g), 0);
    assert_true(g == 0);
    assert_int_equal(gw_cluster__lease_reply(100, 100, &g), 0);
    assert_true(g == 100);
    assert_int_equal(gw_cluster__lease_reply(101, 100, &g), GW_E_PARSE);
    assert_int_equal(gw_cluster__lease_reply(LLONG_MAX, UINT64_MAX / 2, &g), 0);
    assert_int_equal(gw_cluster__lease_reply(-1, 100, &g), GW_E_PARSE);
    assert_int_equal(gw_cluster__lease_reply(LLONG_MIN, 100, &g), GW_E_PARSE);
}

/* SCRIPT LOAD's answer is a SHA1 (40 lowercase hex digits), or it is not kept; a peer's text
 * in a log line cannot end the quoted value or start a line of its own. */
/* The heartbeat's count: the asker is one, and a count past the bound is not our script's. */
static void test_alive_reply_bounded(void **state)
{
    (void)state;
    unsigned n = 0;
    assert_int_equal(gw_cluster__alive_reply(1, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gw_cluster__alive_reply(GW_CLUSTER_INSTANCES_MAX, &n), 0);
    assert_int_equal(n, GW_CLUSTER_INSTANCES_MAX);
    n = 7;
    assert_int_equal(gw_cluster__alive_reply(0, &n), GW_E_PARSE);
    assert_int_equal(gw_cluster__alive_reply(-1, &n), GW_E_PARSE);
    assert_int_equal(gw_cluster__alive_reply(GW_CLUSTER_INSTANCES_MAX + 1ll, &n), GW_E_PARSE);
    assert_int_equal(gw_cluster__alive_reply(LLONG_MAX, &n), GW_E_PARSE);
    assert_int_equal(n, 7); /* untouched */
}

/* What a sentinel names: an address with a port in range, nothing that could end a log value
 * or be another command; a switch message only for our master, five words exactly. */
static void test_sentinel_answers_checked(void **state)
{
    (void)state;
    char host[GW_CLUSTER_HOST_MAX + 1];
    unsigned port = 0;
    assert_int_equal(gw_cluster__primary_addr("10.0.0.7", 8, "6380", 4, host, &port), 0);
    assert_string_equal(host, "10.0.0.7");
    assert_int_equal(port, 6380);
    assert_int_equal(gw_cluster__primary_addr("::1", 3, "1", 1, host, &port), 0);
    assert_int_equal(gw_cluster__primary_addr("redis-2.internal", 16, "65535", 5, host, &port), 0);
    assert_int_equal(gw_cluster__primary_addr("h", 1, "65536", 5, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("h", 1, "0", 1, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("h", 1, "", 0, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("h", 1, "123456", 6, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("h", 1, "-1", 2, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("", 0, "1", 1, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("a b", 3, "1", 1, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("a\"x", 3, "1", 1, host, &port), GW_E_PARSE);
    assert_int_equal(gw_cluster__primary_addr("a\n", 2, "1", 1, host, &port), GW_E_PARSE);
    char big[GW_CLUSTER_HOST_MAX + 2];
    memset(big, 'a', sizeof(big));
    assert_int_equal(gw_cluster__primary_addr(big, GW_CLUSTER_HOST_MAX, "1", 1, host, &port), 0);
    assert_int_equal(gw_cluster__primary_addr(big, GW_CLUSTER_HOST_MAX + 1, "1", 1, host, &port),
                     GW_E_PARSE);

    char from[GW_CLUSTER_HOST_MAX + 8], to[GW_CLUSTER_HOST_MAX + 8];
    const char *m = "mymaster 127.0.0.1 6379 127.0.0.1 6380";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)), 0);
    assert_string_equal(from, "127.0.0.1:6379");
    assert_string_equal(to, "127.0.0.1:6380");
    m = "mymaster ::1 6379 ::2 6380";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)), 0);
    assert_string_equal(to, "[::2]:6380");
    /* another master's (a prefix of ours is another name), or not five words */
    m = "other 127.0.0.1 6379 127.0.0.1 6380";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    m = "my 127.0.0.1 6379 127.0.0.1 6380";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    m = "mymaster 127.0.0.1 6379 127.0.0.1 6380 x";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    m = "mymaster 127.0.0.1 6379 127.0.0.1";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    m = "mymaster 127.0.0.1 6379  127.0.0.1 6380";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    m = "mymaster 127.0.0.1 6379 127.0.0.1 99999";
    assert_int_equal(
        gw_cluster__switch_msg(m, strlen(m), "mymaster", from, sizeof(from), to, sizeof(to)),
        GW_E_PARSE);
    assert_int_equal(gw_cluster__switch_msg("", 0, "mymaster", from, sizeof(from), to, sizeof(to)),
                     GW_E_PARSE);
}

static void test_sha_and_log_text(void **state)
{
    (void)state;
    const char *sha = "0123456789abcdef0123456789abcdef01234567";
    assert_true(gw_cluster__sha_ok(sha, 40));
    assert_false(gw_cluster__sha_ok(sha, 39));
    assert_false(gw_cluster__sha_ok("0123456789abcdef0123456789abcdef0123456X", 40));
    assert_false(gw_cluster__sha_ok("0123456789ABCDEF0123456789abcdef01234567", 40));
    assert_false(gw_cluster__sha_ok(NULL, 40));
    char out[64];
    const char evil[] = "ERR x\" level=error\nevent=forged\\\x01\xff";
    gw_cluster__log_text(out, sizeof(out), evil, sizeof(evil) - 1);
    assert_string_equal(out, "ERR x? level=error?event=forged???");
    gw_cluster__log_text(out, 4, "abcdef", 6);
    assert_string_equal(out, "abc");
    gw_cluster__log_text(out, sizeof(out), NULL, 5);
    assert_string_equal(out, "");
}

/* ---- rate questions: every one accepted gets its answer ---------------------------------- */

typedef struct {
    int answers;
    uint64_t tokens; /* bit i: token i answered */
    int not_local;
} answers_t;

static void on_answer(void *ud, const gw_cluster_answer_t *a)
{
    answers_t *r = ud;
    r->answers++;
    if (a->token < 64)
        r->tokens |= 1ull << a->token;
    r->not_local += a->verdict != GW_RATE_LOCAL;
}

/* Without a cluster the hub answers GW_RATE_LOCAL. With the n-th allocation failing, for every
 * n: each question ask() accepted (0) gets exactly its answer; a refused one (GW_E_NOMEM) gets
 * none, its asker decides alone. An answer lost for want of memory would leave its request
 * waiting until the client gave up. */
static void test_accepted_questions_answered(void **state)
{
    (void)state;
    const uint8_t key[] = "route client";
    for (unsigned long fail = 1; fail <= 80; fail++) {
        uv_loop_t loop;
        assert_int_equal(uv_loop_init(&loop), 0);
        gw_cluster_hub_t *hub;
        gw_cluster_sink_t *sink;
        answers_t r = {0};
        assert_int_equal(gw_cluster_hub_new(&loop, &hub), 0);
        assert_int_equal(gw_cluster_sink_new(&loop, on_answer, &r, &sink), 0);
        uint64_t accepted = 0;
        int n_accepted = 0;
        gw_alloc_fail_after(fail);
        for (uint64_t t = 1; t <= 40; t++) {
            int rc = t % 2 ? gw_cluster_hub_ask(hub, sink, key, sizeof(key), 10, 10, t)
                           : gw_cluster_hub_lease(hub, sink, key, sizeof(key), 1000, 1000, 100, t);
            if (rc == 0) {
                accepted |= 1ull << t;
                n_accepted++;
            } else {
                assert_int_equal(rc, GW_E_NOMEM);
            }
        }
        for (int i = 0; i < 10 && r.answers < n_accepted; i++)
            uv_run(&loop, UV_RUN_NOWAIT);
        gw_alloc_fail_after(0);
        assert_int_equal(r.answers, n_accepted);
        assert_true(r.tokens == accepted);
        assert_int_equal(r.not_local, 0);
        gw_cluster_sink_close(sink);
        gw_cluster_hub_close(hub);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);
    }
}

/* The keepalive of cluster.ping_interval 1 s, cluster.timeout 20 ms, the last reply at 10 s. */
static gw_redis_alive_t alive(int awaiting, uint64_t head_sent_ms)
{
    return (gw_redis_alive_t){.ping_ms = 1000,
                              .timeout_ms = 20,
                              .heard_ms = 10000,
                              .awaiting = awaiting,
                              .head_sent_ms = head_sent_ms};
}

/* Idle: PING once nothing came for the interval, not before; a connection whose replies keep
 * coming (heard moves on) is never pinged nor dropped. */
static void test_keepalive_pings_an_idle_connection(void **state)
{
    (void)state;
    gw_redis_alive_t a = alive(0, 0);
    assert_int_equal(gw_redis__alive_due(&a), 11000);
    assert_int_equal(gw_redis__alive_check(&a, 10000), GW_REDIS_ALIVE_OK);
    assert_int_equal(gw_redis__alive_check(&a, 10999), GW_REDIS_ALIVE_OK);
    assert_int_equal(gw_redis__alive_check(&a, 11000), GW_REDIS_ALIVE_PING);
    assert_int_equal(gw_redis__alive_check(&a, 50000), GW_REDIS_ALIVE_PING);
    /* busy and answered: a heartbeat each 900 ms, its reply 1 ms later */
    for (uint64_t t = 10000; t < 20000; t += 900) {
        a = alive(1, t);
        a.heard_ms = t - 899;
        assert_int_equal(gw_redis__alive_check(&a, t), GW_REDIS_ALIVE_OK);
        a.awaiting = 0;
        a.heard_ms = t + 1;
        assert_int_equal(gw_redis__alive_check(&a, t + 899), GW_REDIS_ALIVE_OK);
    }
}

/* A reply awaited and none coming: silent at the interval + timeout after the last reply (the
 * PING's own timeout), never before; dropped then whatever more was sent meanwhile. */
static void test_keepalive_drops_a_silent_connection(void **state)
{
    (void)state;
    gw_redis_alive_t a = alive(1, 11000); /* the PING, sent when due */
    assert_int_equal(gw_redis__alive_due(&a), 11020);
    assert_int_equal(gw_redis__alive_check(&a, 11019), GW_REDIS_ALIVE_OK);
    assert_int_equal(gw_redis__alive_check(&a, 11020), GW_REDIS_ALIVE_SILENT);
    a = alive(1, 10500); /* a call sent before the PING was due: the same */
    assert_int_equal(gw_redis__alive_due(&a), 11020);
    assert_int_equal(gw_redis__alive_check(&a, 11020), GW_REDIS_ALIVE_SILENT);
    /* a call sent long after the last reply (a late loop turn kept the PING from going): it
     * has its whole timeout before the connection is called silent */
    a = alive(1, 30000);
    assert_int_equal(gw_redis__alive_due(&a), 30020);
    assert_int_equal(gw_redis__alive_check(&a, 30019), GW_REDIS_ALIVE_OK);
    assert_int_equal(gw_redis__alive_check(&a, 30020), GW_REDIS_ALIVE_SILENT);
}

/* No keepalive (the sentinels' connections): nothing is ever due. */
static void test_keepalive_off(void **state)
{
    (void)state;
    gw_redis_alive_t a = alive(0, 0);
    a.ping_ms = 0;
    assert_int_equal(gw_redis__alive_due(&a), 0);
    assert_int_equal(gw_redis__alive_check(&a, UINT64_MAX / 2), GW_REDIS_ALIVE_OK);
    a.awaiting = 1;
    assert_int_equal(gw_redis__alive_due(&a), 0);
    assert_int_equal(gw_redis__alive_check(&a, UINT64_MAX / 2), GW_REDIS_ALIVE_OK);
}

/* ---- the keepalive on a real connection: a Redis that stops answering ----------------------- */

/* A server on the test's loop that answers the first `answers` commands of each connection
 * (+PONG), then reads and never answers again: a Redis whose process stopped, or whose host
 * vanished, with the connection left open. */
typedef struct {
    uv_tcp_t listener;
    uv_tcp_t conns[8];
    int answered[8];
    int n;
    int answers;
    char buf[4096];
} mute_t;

static void mute_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    mute_t *m = h->loop->data;
    *b = uv_buf_init(m->buf, sizeof(m->buf));
}

static void mute_written(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void mute_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    (void)b;
    mute_t *m = s->loop->data;
    int i = (int)((uv_tcp_t *)s - m->conns);
    if (nread <= 0 || m->answered[i] >= m->answers)
        return;       /* read and dropped: nothing will ever answer */
    m->answered[i]++; /* one command per read: the client waits for each handshake reply */
    uv_write_t *w = malloc(sizeof(*w));
    assert_non_null(w);
    uv_buf_t pong = uv_buf_init("+PONG\r\n", 7);
    assert_int_equal(uv_write(w, s, &pong, 1, mute_written), 0);
}

static void mute_accept(uv_stream_t *l, int status)
{
    mute_t *m = l->loop->data;
    assert_int_equal(status, 0);
    assert_true(m->n < 8);
    uv_tcp_t *c = &m->conns[m->n++];
    uv_tcp_init(l->loop, c);
    assert_int_equal(uv_accept(l, (uv_stream_t *)c), 0);
    uv_read_start((uv_stream_t *)c, mute_alloc, mute_read);
}

static unsigned mute_start(uv_loop_t *loop, mute_t *m, int answers)
{
    memset(m, 0, sizeof(*m));
    m->answers = answers;
    loop->data = m;
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_init(loop, &m->listener);
    assert_int_equal(uv_tcp_bind(&m->listener, (const struct sockaddr *)&sa, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&m->listener, 8, mute_accept), 0);
    int len = sizeof(sa);
    uv_tcp_getsockname(&m->listener, (struct sockaddr *)&sa, &len);
    return ntohs(sa.sin_port);
}

static void mute_stop(mute_t *m)
{
    uv_close((uv_handle_t *)&m->listener, NULL);
    for (int i = 0; i < m->n; i++)
        uv_close((uv_handle_t *)&m->conns[i], NULL);
}

typedef struct ka ka_t;
typedef struct {
    ka_t *k;
    int calls, err;
} ka_cmd_t;

struct ka {
    uv_loop_t *loop;
    gw_redis_t *r;
    int ups, downs, silents;
    uint64_t up_ms, silent_ms, dropped_ms;
    char why[128];
    ka_cmd_t cmds[4];
};

static void ka_state(void *ud, int up, const char *why)
{
    ka_t *k = ud;
    if (up) {
        k->ups++;
        k->up_ms = uv_now(k->loop);
        return;
    }
    k->downs++;
    snprintf(k->why, sizeof(k->why), "%s", why);
}

static void ka_silent(void *ud, uint64_t silent_ms)
{
    ka_t *k = ud;
    k->silents++;
    k->silent_ms = silent_ms;
    k->dropped_ms = uv_now(k->loop);
}

static void ka_send(ka_t *k, int i);

static void ka_reply(void *ud, const redisReply *rep, int err)
{
    ka_cmd_t *c = ud;
    (void)rep;
    c->calls++;
    c->err = err;
    /* the first call's timeout: one more call, whose deadline comes after the connection is
     * found silent (it then fails with the connection) */
    if (c == &c->k->cmds[0])
        ka_send(c->k, 3);
}

static void ka_send(ka_t *k, int i)
{
    const char *argv[] = {"GET", "k"};
    size_t lens[] = {3, 1};
    assert_int_equal(gw_redis_command(k->r, 2, argv, lens, ka_reply, &k->cmds[i]), 0);
}

/* Run the loop until *flag reaches want, or ms pass. */
static void run_until(uv_loop_t *loop, const int *flag, int want, uint64_t ms)
{
    uint64_t end = uv_now(loop) + ms * GW_TEST_SLOW;
    while (*flag < want && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
}

/* Up once the handshake PING is answered; then silent: each call fails once (GW_E_TIMEOUT at
 * its deadline; the one still within it when the connection is found silent, GW_E_IO), the
 * connection is dropped ping + timeout after the last reply and made again (up once answered
 * again); closed, nothing of the client is left. */
static void test_keepalive_drops_a_silent_redis_and_reconnects(void **state)
{
    (void)state;
    uv_loop_t loop;
    mute_t m;
    assert_int_equal(uv_loop_init(&loop), 0);
    unsigned port = mute_start(&loop, &m, 1);
    gw_alloc_count_start();
    ka_t k = {.loop = &loop};
    for (int i = 0; i < 4; i++)
        k.cmds[i].k = &k;
    gw_redis_opts_t o = {.host = "127.0.0.1",
                         .port = port,
                         .timeout_ms = 100,
                         .connect_timeout_ms = 1000,
                         .ping_ms = 50,
                         .on_state = ka_state,
                         .on_silent = ka_silent,
                         .ud = &k};
    assert_int_equal(gw_redis_new(&loop, &o, &k.r), 0);
    run_until(&loop, &k.ups, 1, 2000);
    assert_int_equal(k.ups, 1);
    assert_int_equal(m.answered[0], 1); /* the handshake's PING, answered */
    for (int i = 0; i < 3; i++)
        ka_send(&k, i);
    run_until(&loop, &k.silents, 1, 2000);
    assert_int_equal(k.silents, 1);
    assert_int_equal(k.downs, 1);
    assert_string_equal(k.why + strlen(k.why) - 8, "(silent)");
    /* heard at up: silent from up + ping (50) + timeout (100), at the next loop turn */
    assert_true(k.silent_ms >= 150);
    assert_true(k.dropped_ms - k.up_ms >= 150 && k.dropped_ms - k.up_ms < 150 + 100 * GW_TEST_SLOW);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(k.cmds[i].calls, 1);
        assert_int_equal(k.cmds[i].err, GW_E_TIMEOUT);
    }
    assert_int_equal(k.cmds[3].calls, 1);
    assert_int_equal(k.cmds[3].err, GW_E_IO);
    assert_int_equal(gw_redis_up(k.r), 0);
    /* made again (after the backoff), answered: up */
    run_until(&loop, &k.ups, 2, 2000);
    assert_int_equal(k.ups, 2);
    assert_int_equal(m.n, 2);
    gw_redis_close(k.r);
    mute_stop(&m);
    uv_run(&loop, UV_RUN_DEFAULT);
    gw_alloc_count_stop();
    assert_int_equal(gw_alloc_count_live(), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A Redis that accepts and never answers (a stopped process's kernel accepts): never up, each
 * try given up at connect_timeout. */
static void test_keepalive_not_up_until_redis_answers(void **state)
{
    (void)state;
    uv_loop_t loop;
    mute_t m;
    assert_int_equal(uv_loop_init(&loop), 0);
    unsigned port = mute_start(&loop, &m, 0);
    ka_t k = {.loop = &loop};
    gw_redis_opts_t o = {.host = "127.0.0.1",
                         .port = port,
                         .timeout_ms = 20,
                         .connect_timeout_ms = 100,
                         .ping_ms = 50,
                         .on_state = ka_state,
                         .on_silent = ka_silent,
                         .ud = &k};
    assert_int_equal(gw_redis_new(&loop, &o, &k.r), 0);
    run_until(&loop, &k.downs, 2, 2000);
    assert_int_equal(k.ups, 0);
    assert_int_equal(k.downs, 2);
    assert_string_equal(k.why, "connect timed out");
    assert_int_equal(k.silents, 0);
    assert_true(m.n >= 2);
    gw_redis_close(k.r);
    mute_stop(&m);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_value_round_trip),
    cmocka_unit_test(test_value_refused),
    cmocka_unit_test(test_due),
    cmocka_unit_test(test_rotate),
    cmocka_unit_test(test_rate_reply_bounded),
    cmocka_unit_test(test_lease_reply_bounded),
    cmocka_unit_test(test_alive_reply_bounded),
    cmocka_unit_test(test_sentinel_answers_checked),
    cmocka_unit_test(test_sha_and_log_text),
    cmocka_unit_test(test_accepted_questions_answered),
    cmocka_unit_test(test_keepalive_pings_an_idle_connection),
    cmocka_unit_test(test_keepalive_drops_a_silent_connection),
    cmocka_unit_test(test_keepalive_off),
    cmocka_unit_test(test_keepalive_drops_a_silent_redis_and_reconnects),
    cmocka_unit_test(test_keepalive_not_up_until_redis_answers),
};

GW_TEST_MAIN(tests)
