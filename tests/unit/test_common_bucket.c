/* Unit tests of common/bucket: token bucket arithmetic on a fake clock, and the shared
 * per-client table (keys, eviction, threads, failing allocations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>

#include <cmocka.h>
#include "test_util.h"

#include "common/alloc.h"
#include "common/bucket.h"
#include "common/err.h"

static void default_burst(void **state)
{
    (void)state;
    assert_int_equal(gw_bucket_default_burst(0), 0);
    assert_int_equal(gw_bucket_default_burst(1000), 16384);
    assert_int_equal(gw_bucket_default_burst(1000000), 100000);
    gw_bucket_t b;
    gw_bucket_init(&b, 1000000, 0, 0);
    assert_int_equal(b.burst, 100000);
    assert_int_equal(gw_bucket_avail(&b, 0), 100000); /* starts full */
}

static void unlimited(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 0, 0, 5);
    assert_false(gw_bucket_limited(&b));
    assert_true(gw_bucket_avail(&b, 5) == UINT64_MAX);
    uint64_t w = 99;
    assert_int_equal(gw_bucket_take(&b, 1 << 30, 5, &w), 1 << 30);
    assert_int_equal(w, 0);
    gw_bucket_spend(&b, 1 << 30, 5);
    assert_int_equal(gw_bucket_wait_us(&b, 1 << 30, 5), 0);
    assert_true(gw_bucket_grain(&b) == SIZE_MAX);
}

static void take_and_refill(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 1000, 5000, 1000000); /* 1000 tokens/s, burst 5000, t = 1 s */
    uint64_t w = 0;
    assert_int_equal(gw_bucket_take(&b, 3000, 1000000, &w), 3000);
    assert_int_equal(w, 0);
    assert_int_equal(gw_bucket_take(&b, 3000, 1000000, &w), 2000); /* only 2000 left */
    /* 3000 wanted, 0 left: 3 s */
    assert_int_equal(w, 3000000);
    assert_int_equal(gw_bucket_avail(&b, 1000000), 0);
    assert_int_equal(gw_bucket_avail(&b, 1001000), 1); /* 1 ms = 1 token */
    assert_int_equal(gw_bucket_avail(&b, 1500000), 500);
    assert_int_equal(gw_bucket_avail(&b, 60000000), 5000); /* capped at burst */
    /* a clock going backwards adds nothing and takes nothing */
    assert_int_equal(gw_bucket_avail(&b, 100), 5000);
}

static void no_drift_on_small_steps(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 1000, 1000, 0);
    gw_bucket_take(&b, 1000, 0, NULL);
    /* 1000 refills of 1 us each at 1000 tokens/s make exactly 1 token, not 0 */
    for (uint64_t t = 1; t <= 1000; t++)
        gw_bucket_avail(&b, t);
    assert_int_equal(gw_bucket_avail(&b, 1000), 1);
    /* and 7 steps of 333 us are 2 tokens (2331 us), remainder kept */
    gw_bucket_take(&b, 1, 1000, NULL);
    for (uint64_t k = 1; k <= 7; k++)
        gw_bucket_avail(&b, 1000 + 333 * k);
    assert_int_equal(gw_bucket_avail(&b, 1000 + 333 * 7), 2);
    assert_int_equal(gw_bucket_avail(&b, 3000), 2);
    assert_int_equal(gw_bucket_avail(&b, 4000), 3);
}

static void wait_rounds_up(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 3, 10, 0); /* 3 tokens/s */
    gw_bucket_take(&b, 10, 0, NULL);
    uint64_t w = gw_bucket_wait_us(&b, 1, 0);
    assert_int_equal(w, 333334); /* ceil(1e6 / 3) */
    assert_int_equal(gw_bucket_avail(&b, w - 1), 0);
    assert_int_equal(gw_bucket_avail(&b, w), 1);
    /* more than burst is clamped to burst */
    gw_bucket_init(&b, 1000, 100, 0);
    gw_bucket_take(&b, 100, 0, NULL);
    assert_int_equal(gw_bucket_wait_us(&b, 1000000, 0), 100000);
}

static void spend_and_bounded_debt(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 1000000, 100000, 0);
    gw_bucket_spend(&b, 164000, 0); /* a 64 KiB read beyond the burst */
    assert_int_equal(b.tokens, -64000);
    assert_int_equal(gw_bucket_avail(&b, 0), 0);
    /* the debt is paid before anything is granted: 64 ms + 16 ms for 16000 */
    assert_int_equal(gw_bucket_wait_us(&b, 16000, 0), 80000);
    assert_int_equal(gw_bucket_take(&b, 16000, 79999, NULL), 15999);
    /* debt is bounded */
    gw_bucket_spend(&b, SIZE_MAX, 80000);
    assert_true(b.tokens >= -(int64_t)GW_BUCKET_MAX);
}

static void grain(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, 1000000, 0, 0);
    assert_int_equal(gw_bucket_grain(&b), 16384);
    gw_bucket_init(&b, 100000000, 0, 0); /* 100 MB/s: 1 MB, a hundredth of a second */
    assert_int_equal(gw_bucket_grain(&b), 1000000);
    gw_bucket_init(&b, 1000000, 4096, 0); /* never more than the burst */
    assert_int_equal(gw_bucket_grain(&b), 4096);
}

static void huge_values(void **state)
{
    (void)state;
    gw_bucket_t b;
    gw_bucket_init(&b, UINT64_MAX, UINT64_MAX, 0);
    assert_int_equal(b.rate, GW_BUCKET_MAX);
    assert_int_equal(b.burst, GW_BUCKET_MAX);
    gw_bucket_spend(&b, SIZE_MAX, 0);
    gw_bucket_spend(&b, SIZE_MAX, 0);
    assert_int_equal(gw_bucket_avail(&b, 1000000), 0); /* 2^40 debt repaid after 1 s */
    assert_int_equal(gw_bucket_avail(&b, 2000000), GW_BUCKET_MAX);
    assert_int_equal(gw_bucket_avail(&b, UINT64_MAX), GW_BUCKET_MAX);
    gw_bucket_init(&b, 1, 1, 0); /* the slowest bucket */
    gw_bucket_take(&b, 1, 0, NULL);
    assert_int_equal(gw_bucket_wait_us(&b, 1, 0), 1000000);
    assert_int_equal(gw_bucket_avail(&b, UINT64_MAX / 2), 1);
}

/* A sender that emits what it is granted and sleeps exactly the wait it is told, over 10
 * simulated seconds: the total is rate * time + burst, within one grain. */
static void long_run_rate(void **state)
{
    (void)state;
    const uint64_t rate = 1000000;
    gw_bucket_t b;
    gw_bucket_init(&b, rate, 0, 0);
    size_t g = gw_bucket_grain(&b);
    uint64_t now = 0, sent = 0, wakes = 0;
    while (now < 10 * 1000000) {
        uint64_t w;
        sent += gw_bucket_take(&b, 65536, now, &w);
        uint64_t wg = gw_bucket_wait_us(&b, g, now);
        now += wg ? wg : 1000;
        wakes++;
    }
    uint64_t expect = rate * 10 + b.burst;
    assert_true(sent <= expect + g);
    assert_true(sent + g >= expect);
    assert_true(wakes < 10 * 100); /* no busy loop */
}

/* ---- table ------------------------------------------------------------------------------- */

/* The address ip (IPv6 when it has a colon) and port; an ip that does not parse fails the test. */
static struct sockaddr_storage addr(const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    int ok;
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        ok = inet_pton(AF_INET6, ip, &a->sin6_addr);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        ok = inet_pton(AF_INET, ip, &a->sin_addr);
    }
    if (ok != 1)
        fail_msg("address %s does not parse", ip);
    return ss;
}

/* A table of capacity entries keying IPv6 clients by their first ipv6_prefix bits. */
static gw_bucket_table_t *table_new(size_t capacity, unsigned ipv6_prefix)
{
    gw_bucket_table_t *t = NULL;
    int rv = gw_bucket_table_new(capacity, ipv6_prefix, &t);
    if (rv != 0 || !t)
        fail_msg("gw_bucket_table_new(%zu, %u): %d", capacity, ipv6_prefix, rv);
    return t;
}

#define SA(x) ((const struct sockaddr *)&(x))

static void table_keys(void **state)
{
    (void)state;
    gw_bucket_table_t *t;
    assert_int_equal(gw_bucket_table_new(0, 64, &t), GW_E_INVAL);
    assert_int_equal(gw_bucket_table_new(8, 0, &t), GW_E_INVAL);
    assert_int_equal(gw_bucket_table_new(8, 129, &t), GW_E_INVAL);
    assert_int_equal(gw_bucket_table_new(8, 128, &t), 0); /* whole IPv6 addresses here */
    struct sockaddr_storage a1 = addr("127.0.0.1", 1000), a2 = addr("127.0.0.1", 2000),
                            b = addr("127.0.0.2", 1000), m = addr("::ffff:127.0.0.1", 5),
                            c = addr("::1", 1000), d = addr("::2", 1000);
    gw_bucket_entry_t *e1 = gw_bucket_table_acquire(t, SA(a1), 0, 1000, 1000, 0);
    gw_bucket_entry_t *e2 = gw_bucket_table_acquire(t, SA(a2), 0, 5, 5, 0);
    gw_bucket_entry_t *eb = gw_bucket_table_acquire(t, SA(b), 0, 1000, 1000, 0);
    gw_bucket_entry_t *em = gw_bucket_table_acquire(t, SA(m), 0, 1000, 1000, 0);
    gw_bucket_entry_t *ec = gw_bucket_table_acquire(t, SA(c), 0, 1000, 1000, 0);
    gw_bucket_entry_t *ed = gw_bucket_table_acquire(t, SA(d), 0, 1000, 1000, 0);
    gw_bucket_entry_t *et = gw_bucket_table_acquire(t, SA(a1), 3, 1000, 1000, 0);
    assert_non_null(e1);
    assert_ptr_equal(e1, e2); /* port ignored; the first rate stays */
    assert_ptr_equal(e1, em); /* IPv4-mapped IPv6 is the IPv4 client */
    assert_true(e1 != eb && e1 != ec && ec != ed && e1 != et);
    assert_int_equal(gw_bucket_table_size(t), 5);
    /* one client's spending never touches another's */
    gw_bucket_table_spend(t, e1, 1000, 0);
    assert_int_equal(gw_bucket_table_avail(t, e1, 0), 0);
    assert_int_equal(gw_bucket_table_avail(t, eb, 0), 1000);
    assert_int_equal(gw_bucket_table_avail(t, et, 0), 1000);
    uint64_t w;
    assert_int_equal(gw_bucket_table_take(t, e1, 10, 0, &w), 0);
    assert_int_equal(w, 10000);
    assert_int_equal(gw_bucket_table_wait_us(t, e1, 10, 0), 10000);
    assert_int_equal(gw_bucket_table_grain(e1), 1000);
    struct sockaddr_storage un;
    memset(&un, 0, sizeof(un));
    un.ss_family = AF_UNIX;
    assert_null(gw_bucket_table_acquire(t, SA(un), 0, 1, 1, 0));
    gw_bucket_table_release(t, NULL);
    gw_bucket_table_del(t);
}

static void table_eviction(void **state)
{
    (void)state;
    gw_bucket_table_t *t = table_new(3, 64);
    struct sockaddr_storage a = addr("10.0.0.1", 1), b = addr("10.0.0.2", 1),
                            c = addr("10.0.0.3", 1), d = addr("10.0.0.4", 1);
    gw_bucket_entry_t *ea = gw_bucket_table_acquire(t, SA(a), 0, 100, 100, 0);
    gw_bucket_entry_t *eb = gw_bucket_table_acquire(t, SA(b), 0, 100, 100, 0);
    gw_bucket_entry_t *ec = gw_bucket_table_acquire(t, SA(c), 0, 100, 100, 0);
    assert_non_null(ec);
    /* all held: a fourth client cannot get an entry */
    assert_null(gw_bucket_table_acquire(t, SA(d), 0, 100, 100, 0));
    gw_bucket_table_spend(t, eb, 100, 0);
    gw_bucket_table_release(t, eb); /* b idle first */
    gw_bucket_table_release(t, ea); /* then a */
    /* b comes back before it is evicted: its debt is still there */
    gw_bucket_entry_t *eb2 = gw_bucket_table_acquire(t, SA(b), 0, 100, 100, 0);
    assert_ptr_equal(eb2, eb);
    assert_int_equal(gw_bucket_table_avail(t, eb2, 0), 0);
    gw_bucket_table_release(t, eb2); /* now a is the oldest idle */
    gw_bucket_entry_t *ed = gw_bucket_table_acquire(t, SA(d), 0, 100, 100, 0);
    assert_ptr_equal(ed, ea); /* a's slot reused */
    assert_int_equal(gw_bucket_table_evictions(t), 1);
    assert_int_equal(gw_bucket_table_avail(t, ed, 0), 100); /* fresh */
    assert_int_equal(gw_bucket_table_size(t), 3);
    /* a is gone and b (oldest idle) still owes its 100 tokens: b is not forgotten, a is
     * refused (fail closed; before, b's debt was wiped and a let in) */
    assert_null(gw_bucket_table_acquire(t, SA(a), 0, 100, 100, 0));
    assert_int_equal(gw_bucket_table_refused(t), 2); /* d, all held; a, b in debt */
    assert_int_equal(gw_bucket_table_evictions(t), 1);
    /* once b has paid back (1 s at 100/s), forgetting it loses nothing: a takes its slot */
    gw_bucket_entry_t *ea2 = gw_bucket_table_acquire(t, SA(a), 0, 100, 100, 1000000);
    assert_ptr_equal(ea2, eb);
    assert_int_equal(gw_bucket_table_avail(t, ea2, 1000000), 100);
    assert_int_equal(gw_bucket_table_evictions(t), 2);
    /* c was never released: still there, same entry */
    assert_ptr_equal(gw_bucket_table_acquire(t, SA(c), 0, 1, 1, 0), ec);
    gw_bucket_table_del(t);
}

/* Many fresh addresses cannot wipe the limit of the clients already in the
 * table; they are refused, counted, while the table is full of debts. */
static void table_full_fails_closed(void **state)
{
    (void)state;
    gw_bucket_table_t *t = table_new(4, 64);
    char ip[32];
    for (int i = 0; i < 4; i++) { /* four clients spend their whole burst, then leave */
        snprintf(ip, sizeof(ip), "198.51.100.%d", i + 1);
        struct sockaddr_storage a = addr(ip, 1);
        gw_bucket_entry_t *e = gw_bucket_table_acquire(t, SA(a), 1, 10, 10, 0);
        assert_non_null(e);
        assert_int_equal(gw_bucket_table_take(t, e, 10, 0, NULL), 10);
        gw_bucket_table_release(t, e);
    }
    for (int i = 0; i < 1000; i++) { /* an attacker's fresh addresses, at once */
        snprintf(ip, sizeof(ip), "203.0.%d.%d", i / 250, i % 250 + 1);
        struct sockaddr_storage a = addr(ip, 1);
        assert_null(gw_bucket_table_acquire(t, SA(a), 1, 10, 10, 1000));
    }
    assert_int_equal(gw_bucket_table_refused(t), 1000);
    assert_int_equal(gw_bucket_table_evictions(t), 0);
    /* the first client is still limited: its debt was kept */
    struct sockaddr_storage a1 = addr("198.51.100.1", 2);
    gw_bucket_entry_t *e1 = gw_bucket_table_acquire(t, SA(a1), 1, 10, 10, 1000);
    assert_non_null(e1);
    assert_int_equal(gw_bucket_table_take(t, e1, 1, 1000, NULL), 0);
    gw_bucket_table_release(t, e1);
    gw_bucket_table_del(t);
}

/* IPv6 clients are keyed by their /64 (configurable). */
static void table_ipv6_prefix(void **state)
{
    (void)state;
    static const struct {
        unsigned prefix;
        const char *a, *b;
        int same;
    } cases[] = {
        {64, "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", 1},
        {64, "2001:db8:1:2::1", "2001:db8:1:3::1", 0},
        {64, "::1", "::2", 1},
        {56, "2001:db8:1:2::1", "2001:db8:1:ff::1", 1},
        {56, "2001:db8:1:2::1", "2001:db8:1:100::1", 0},
        {60, "2001:db8:1:2::1", "2001:db8:1:f::1", 1},
        {60, "2001:db8:1:2::1", "2001:db8:1:10::1", 0},
        {128, "2001:db8::1", "2001:db8::2", 0},
        {48, "::ffff:192.0.2.1", "::ffff:192.0.2.2", 0}, /* IPv4-mapped: whole IPv4 address */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_bucket_table_t *t = table_new(8, cases[i].prefix);
        struct sockaddr_storage a = addr(cases[i].a, 1), b = addr(cases[i].b, 1);
        gw_bucket_entry_t *ea = gw_bucket_table_acquire(t, SA(a), 0, 10, 10, 0);
        gw_bucket_entry_t *eb = gw_bucket_table_acquire(t, SA(b), 0, 10, 10, 0);
        if ((ea == eb) != cases[i].same)
            fail_msg("/%u %s vs %s: same=%d, want %d", cases[i].prefix, cases[i].a, cases[i].b,
                     ea == eb, cases[i].same);
        gw_bucket_table_del(t);
    }
}

typedef struct {
    gw_bucket_table_t *t;
    gw_bucket_entry_t *e;
    uint64_t got;
} thr_arg_t;

static void *taker(void *p)
{
    thr_arg_t *a = p;
    for (int i = 0; i < 100000; i++)
        a->got += gw_bucket_table_take(a->t, a->e, 7, 0, NULL);
    return NULL;
}

/* Two threads take from one client's bucket at once: together they get exactly the burst. */
static void table_threads(void **state)
{
    (void)state;
    gw_bucket_table_t *t = table_new(4, 64);
    struct sockaddr_storage a = addr("192.0.2.1", 1);
    gw_bucket_entry_t *e = gw_bucket_table_acquire(t, SA(a), 0, 1, 500000, 0);
    thr_arg_t x = {t, e, 0}, y = {t, e, 0};
    pthread_t tx, ty;
    assert_int_equal(pthread_create(&tx, NULL, taker, &x), 0);
    assert_int_equal(pthread_create(&ty, NULL, taker, &y), 0);
    pthread_join(tx, NULL);
    pthread_join(ty, NULL);
    assert_int_equal(x.got + y.got, 500000);
    gw_bucket_table_release(t, e);
    gw_bucket_table_del(t);
}

static void table_nomem(void **state)
{
    (void)state;
    for (unsigned n = 1;; n++) {
        gw_alloc_fail_after(n);
        gw_bucket_table_t *t = NULL;
        int rv = gw_bucket_table_new(100, 64, &t);
        gw_alloc_fail_after(0);
        if (rv == 0) {
            assert_true(n > 3); /* three allocations, each one failed above */
            gw_bucket_table_del(t);
            break;
        }
        assert_int_equal(rv, GW_E_NOMEM);
        assert_null(t);
    }
}

/* In a leased table an entry spends no more than the cluster granted it; it asks for
 * a lease when under half of one (once until answered), a grant adds, a grant for a slot that
 * since holds another client is dropped, and "local" lets the bucket alone decide for a while. */
static void table_leases(void **state)
{
    (void)state;
    gw_bucket_table_t *t = table_new(2, 64);
    struct sockaddr_storage a = addr("10.0.0.1", 1);
    uint64_t now = 1000000;
    gw_bucket_entry_t *e =
        gw_bucket_table_acquire(t, (struct sockaddr *)&a, 0, 1000000, 100000, now);
    assert_non_null(e);
    uint64_t v = gw_bucket_table_avail(t, e, now), ask, tok;
    assert_int_equal(v, 100000);
    /* not leased: the bucket alone */
    assert_int_equal(gw_bucket_table_avail_leased(t, e, 100000, now, &v, &ask, &tok), 0);
    assert_int_equal(v, 100000);
    assert_int_equal(ask, 0);
    gw_bucket_table_set_leased(t, 1);
    assert_int_equal(gw_bucket_table_avail_leased(t, e, 100000, now, &v, &ask, &tok), 1);
    assert_int_equal(v, 0); /* nothing granted yet */
    assert_int_equal(ask, 100000);
    uint64_t v2, ask2 = 0, tok2 = 0;
    gw_bucket_table_avail_leased(t, e, 100000, now, &v2, &ask2, &tok2);
    assert_int_equal(ask2, 0); /* one question at a time */
    gw_bucket_table_lease_grant(t, tok, 60000, 0, now);
    gw_bucket_table_avail_leased(t, e, 100000, now, &v, &ask, &tok);
    assert_int_equal(v, 60000);
    assert_int_equal(ask, 0); /* more than half a lease left */
    gw_bucket_table_spend(t, e, 20000, now);
    gw_bucket_table_avail_leased(t, e, 100000, now, &v, &ask, &tok);
    assert_int_equal(v, 40000);
    assert_int_equal(ask, 100000); /* under half: the next lease */
    /* the slot goes to another client before the answer: the grant is dropped */
    gw_bucket_table_release(t, e);
    struct sockaddr_storage b = addr("10.0.0.2", 1), c = addr("10.0.0.3", 1);
    gw_bucket_entry_t *eb =
        gw_bucket_table_acquire(t, (struct sockaddr *)&b, 0, 1000000, 100000, now);
    gw_bucket_table_release(t, eb);
    now += 2000000; /* both idle and full again: the oldest (10.0.0.1) may go */
    gw_bucket_entry_t *ec =
        gw_bucket_table_acquire(t, (struct sockaddr *)&c, 0, 1000000, 100000, now);
    assert_ptr_equal(ec, e);
    gw_bucket_table_lease_grant(t, tok, 50000, 0, now);
    gw_bucket_table_avail_leased(t, ec, 100000, now, &v, &ask, &tok);
    assert_int_equal(v, 0);
    /* no answer from the cluster: the bucket alone for GW_BUCKET_LEASE_LOCAL_US */
    gw_bucket_table_lease_grant(t, tok, 0, 1, now);
    assert_int_equal(gw_bucket_table_avail_leased(t, ec, 100000, now, &v, &ask, &tok), 0);
    assert_int_equal(v, 100000);
    now += GW_BUCKET_LEASE_LOCAL_US;
    assert_int_equal(gw_bucket_table_avail_leased(t, ec, 100000, now, &v, &ask, &tok), 1);
    /* no answer, and three instances share the client: a byte spent costs three tokens for
     * GW_BUCKET_LEASE_LOCAL_US, then one again */
    gw_bucket_table_lease_grant(t, tok, 0, 3, now);
    gw_bucket_table_spend(t, ec, 10000, now);
    assert_int_equal(gw_bucket_table_avail(t, ec, now), 100000 - 30000);
    now += GW_BUCKET_LEASE_LOCAL_US; /* the bucket is full again meanwhile (1 MB/s) */
    gw_bucket_table_spend(t, ec, 10000, now);
    assert_int_equal(gw_bucket_table_avail(t, ec, now), 100000 - 10000);
    /* a share past GW_BUCKET_MAX_SHARE is capped, and the cost with it */
    gw_bucket_table_avail_leased(t, ec, 100000, now, &v, &ask, &tok);
    gw_bucket_table_lease_grant(t, tok, 0, UINT32_MAX, now);
    gw_bucket_table_spend(t, ec, 10, now);
    assert_int_equal(gw_bucket_table_avail(t, ec, now), 100000 - 10000 - 10 * GW_BUCKET_MAX_SHARE);
    gw_bucket_table_release(t, ec);
    gw_bucket_table_del(t);
}

/* The tables' key of an address as text: IPv4 whole, IPv4-mapped as IPv4, IPv6 cut. */
static void addr_text(void **state)
{
    (void)state;
    char out[64];
    struct sockaddr_storage a = addr("192.0.2.7", 80), b = addr("2001:db8:1:2:3:4:5:6", 80),
                            m = addr("::ffff:192.0.2.9", 80);
    assert_int_equal(gw_bucket_addr_text((struct sockaddr *)&a, 64, out, sizeof(out)), 9);
    assert_string_equal(out, "192.0.2.7");
    assert_true(gw_bucket_addr_text((struct sockaddr *)&b, 64, out, sizeof(out)) > 0);
    assert_string_equal(out, "2001:db8:1:2::");
    assert_true(gw_bucket_addr_text((struct sockaddr *)&b, 24, out, sizeof(out)) > 0);
    assert_string_equal(out, "2001:d00::");
    assert_true(gw_bucket_addr_text((struct sockaddr *)&m, 64, out, sizeof(out)) > 0);
    assert_string_equal(out, "192.0.2.9");
    assert_int_equal(gw_bucket_addr_text((struct sockaddr *)&a, 64, out, 4), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(default_burst),
    cmocka_unit_test(unlimited),
    cmocka_unit_test(take_and_refill),
    cmocka_unit_test(no_drift_on_small_steps),
    cmocka_unit_test(wait_rounds_up),
    cmocka_unit_test(spend_and_bounded_debt),
    cmocka_unit_test(grain),
    cmocka_unit_test(huge_values),
    cmocka_unit_test(long_run_rate),
    cmocka_unit_test(table_keys),
    cmocka_unit_test(table_eviction),
    cmocka_unit_test(table_full_fails_closed),
    cmocka_unit_test(table_ipv6_prefix),
    cmocka_unit_test(table_threads),
    cmocka_unit_test(table_nomem),
    cmocka_unit_test(table_leases),
    cmocka_unit_test(addr_text),
};

GW_TEST_MAIN(tests)
