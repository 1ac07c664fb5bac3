/* cluster/sentinel.c — which Redis is the primary, as Redis Sentinel names it (the sentinel
 * part of cluster_internal.h), on the main thread's loop.
 *
 * A round asks every sentinel at once, a connection each: `SENTINEL master NAME` (after AUTH
 * with sentinel_password), which gives the primary's address and the config-epoch of that
 * configuration. Once each has answered or failed (down, slow, does not know the name,
 * answers nonsense), or more than half of them answered (check_asked), the addresses go to
 * the caller, who checks each (ROLE) and says ok or
 * refused: the one of the highest config-epoch first (ties: in the order asked, the sentinel
 * whose answer was taken last first), the next when refused. When none is left, the round ends
 * (on_none) and the next one begins after a backoff (100 ms doubling to 5 s).
 *
 * Why the epoch: Redis's client guidance (redis.io, "Sentinel client spec", steps 2 and 3)
 * takes the first sentinel's answer and checks it with ROLE. That does not catch a stale
 * sentinel (one partitioned away during a failover) naming the old primary restarted since,
 * which still says "master" in ROLE until the sentinels reconfigure it. Sentinel itself
 * settles such conflicts by the configuration epoch: every failover is done under a new,
 * greater epoch, and a configuration of a greater epoch replaces one of a lower epoch
 * (redis.io, "High availability with Redis Sentinel", "Configuration propagation"). The
 * answer of the greatest epoch is the configuration the sentinels converge on, so it is tried
 * first, and ROLE still checks it.
 *
 * One connection stays subscribed to `+switch-master` on the sentinel whose answer was taken: a
 * switch of our master is reported (on_switch) and a round begins at once, whatever the
 * backoff. The subscription reconnects by itself (gw_redis); it moves to another sentinel
 * when a round finds its own down.
 *
 * The subscription is kept alive: a sentinel whose host vanished without a reset (a partition,
 * a power loss) would otherwise hold it silently, and the next +switch-master would never
 * come. Each ping interval (cluster.ping_interval; by default poll_interval, at most 1 s:
 * gw_cluster__ping_ms) it is sent PING, which Redis
 * answers in subscribe mode too (with a "pong" message). When nothing at all came from it for
 * an interval plus timeout (plus connect_timeout while it connects), the sentinel is silent:
 * the subscription is closed, and a round begins (the next sentinel first among equal
 * epochs); the sentinel whose answer is taken gets the subscription.
 *
 * Callbacks run from this file's timer, never from inside a callback of a Redis connection,
 * so the caller may close its own connections in them. Every connection closed here is closed
 * from that timer too (gw_redis_close may not run inside the connection's callbacks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_internal.h"
#include "cluster/redis.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* a sentinel's part in the round under way */
enum { ASK_IDLE = 0, ASK_PENDING, ASK_ANSWERED, ASK_FAILED };

typedef struct sentinel {
    struct gw_sentinel *s;
    char *host;
    unsigned port;
    char text[64];   /* HOST:PORT as configured, for logs */
    char why[448];   /* its last failure ("": none since its answer was taken), logged once */
    gw_redis_t *ask; /* the round's connection to it (closed at the next step once done) */
    int res;         /* ASK_* */
    char named_host[GW_CLUSTER_HOST_MAX + 1];
    unsigned named_port;
    unsigned long long epoch; /* the config-epoch of its answer */
} sentinel_t;

struct gw_sentinel {
    uv_loop_t *loop;
    sentinel_t at[GW_CFG_SENTINELS_MAX];
    size_t n;
    char *master, *password;
    uint64_t timeout_ms, connect_timeout_ms, ping_ms;
    size_t max_reply;
    gw_sentinel_cbs_t cb;
    uv_timer_t timer; /* the next step: now, or after the backoff */
    /* the round */
    int asking;  /* the sentinels are being asked */
    int decide;  /* hand the next address to the caller (or end the round) at the next step */
    int want;    /* start a round at the next step */
    int waiting; /* a named primary is with the caller, for its verdict */
    int have;    /* a named primary to hand over at the next step */
    int none;    /* every sentinel failed: report at the next step, then back off */
    char host[GW_CLUSTER_HOST_MAX + 1];
    unsigned port;
    size_t named;  /* who named it */
    size_t next;   /* first in the order of the next round (ties of the epoch) */
    char why[512]; /* the round's last failure */
    uint64_t backoff_ms;
    /* the subscription */
    gw_redis_t *sub;
    size_t sub_at;
    int sub_over;
    int switched;     /* a +switch-master of ours to report */
    uv_timer_t ping;  /* every ping_ms: PING the subscription, or find it silent */
    uint64_t sub_due; /* something must come from the subscription by then (loop ms) */
    int pinging;      /* a PING is unanswered */
    char sw_from[GW_CLUSTER_HOST_MAX + 8], sw_to[GW_CLUSTER_HOST_MAX + 8];
    int closed;
    int handles; /* timer and ping, not yet closed: the memory goes at 0 */
};

static void on_step(uv_timer_t *t);

static void step_soon(gw_sentinel_t *s)
{
    if (!s->closed)
        uv_timer_start(&s->timer, on_step, 0, 0);
}

/* The round is a round no longer: no result pending, no address with the caller. */
static int round_idle(const gw_sentinel_t *s)
{
    return !s->asking && !s->decide && !s->waiting && !s->have && !s->none;
}

/* Every sentinel has answered or failed, or more than half of them answered: decide at the
 * next step. A failover is authorised by a majority of the sentinels under its new epoch, so
 * a majority's answers hold the greatest epoch as soon as they have propagated; waiting for
 * the rest would let one black-holed sentinel hold every round for its timeouts. The ones
 * still pending may answer later: the next decision of the round (a refused address) counts
 * them too, and the round's end lets their connections go. */
static void check_asked(gw_sentinel_t *s)
{
    if (!s->asking)
        return;
    size_t pending = 0, answered = 0;
    for (size_t i = 0; i < s->n; i++) {
        pending += s->at[i].res == ASK_PENDING;
        answered += s->at[i].res == ASK_ANSWERED;
    }
    if (pending && answered * 2 <= s->n)
        return;
    s->asking = 0;
    s->decide = 1;
    step_soon(s);
}

/* Sentinel x did not give a primary we took: logged when its reason changed. */
static void fail(sentinel_t *x, const char *why)
{
    gw_sentinel_t *s = x->s;
    if (strcmp(x->why, why) != 0) {
        GW_LOG_WARN("sentinel_failed", "sentinel=%s master=%s reason=\"%s\"", x->text, s->master,
                    why);
        snprintf(x->why, sizeof(x->why), "%s", why);
    }
    snprintf(s->why, sizeof(s->why), "sentinel %s: %s", x->text, why);
    x->res = ASK_FAILED;
    step_soon(s); /* its connection is closed there */
}

static void ask_fail(sentinel_t *x, const char *why)
{
    fail(x, why);
    check_asked(x->s);
}

/* The field name of `SENTINEL master`'s flat answer (name, value, name, value ...). */
static const redisReply *field(const redisReply *r, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if (k->type == REDIS_REPLY_STRING && k->len == nl && !memcmp(k->str, name, nl))
            return r->element[i + 1]->type == REDIS_REPLY_STRING ? r->element[i + 1] : NULL;
    }
    return NULL;
}

/* A config-epoch: decimal digits, at most 18 (far beyond any count of failovers). */
static int epoch_of(const redisReply *v, unsigned long long *out)
{
    if (!v || v->len < 1 || v->len > 18)
        return -1;
    unsigned long long e = 0;
    for (size_t i = 0; i < v->len; i++) {
        if (v->str[i] < '0' || v->str[i] > '9')
            return -1;
        e = e * 10 + (unsigned)(v->str[i] - '0');
    }
    *out = e;
    return 0;
}

static void on_master(void *ud, const redisReply *r, int err)
{
    sentinel_t *x = ud;
    gw_sentinel_t *s = x->s;
    if (x->res != ASK_PENDING || err == GW_E_CLOSED)
        return;
    char why[200];
    if (err == GW_E_TIMEOUT) {
        snprintf(why, sizeof(why), "no answer within %llu ms", (unsigned long long)s->timeout_ms);
        ask_fail(x, why);
        return;
    }
    if (err < 0 || !r) {
        ask_fail(x, "connection lost");
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        if (r->len >= 18 && !memcmp(r->str, "ERR No such master", 18)) {
            ask_fail(x, "does not know this master");
            return;
        }
        char text[151];
        gw_cluster__log_text(text, sizeof(text), r->str, r->len);
        snprintf(why, sizeof(why), "%s", text);
        ask_fail(x, why);
        return;
    }
    if (r->type == REDIS_REPLY_NIL) {
        ask_fail(x, "does not know this master");
        return;
    }
    const redisReply *ip = r->type == REDIS_REPLY_ARRAY ? field(r, "ip") : NULL;
    const redisReply *port = r->type == REDIS_REPLY_ARRAY ? field(r, "port") : NULL;
    if (!ip || !port ||
        gw_cluster__primary_addr(ip->str, ip->len, port->str, port->len, x->named_host,
                                 &x->named_port) < 0) {
        ask_fail(x, "not an address");
        return;
    }
    if (epoch_of(field(r, "config-epoch"), &x->epoch) < 0) {
        ask_fail(x, "no config-epoch");
        return;
    }
    x->res = ASK_ANSWERED;
    step_soon(s); /* its connection is closed there */
    check_asked(s);
}

static void on_ask_state(void *ud, int up, const char *why)
{
    sentinel_t *x = ud;
    if (x->res != ASK_PENDING)
        return;
    char w[200];
    if (!up) {
        snprintf(w, sizeof(w), "connection: %s", why);
        ask_fail(x, w);
        return;
    }
    const char *argv[] = {"SENTINEL", "master", x->s->master};
    size_t lens[] = {8, 6, strlen(x->s->master)};
    if (gw_redis_command(x->ask, 3, argv, lens, on_master, x) < 0)
        ask_fail(x, "cannot send SENTINEL master");
}

static gw_redis_t *dial(gw_sentinel_t *s, size_t i, void (*on_state)(void *, int, const char *),
                        void (*on_push)(void *, const redisReply *), void *ud)
{
    gw_redis_opts_t o = {.host = s->at[i].host,
                         .port = s->at[i].port,
                         .password = s->password,
                         .timeout_ms = s->timeout_ms,
                         .connect_timeout_ms = s->connect_timeout_ms,
                         .max_reply = s->max_reply,
                         .on_state = on_state,
                         .on_push = on_push,
                         .ud = ud};
    gw_redis_t *r = NULL;
    return gw_redis_new(s->loop, &o, &r) == 0 ? r : NULL;
}

static void start_round(gw_sentinel_t *s)
{
    s->asking = 1;
    for (size_t i = 0; i < s->n; i++)
        s->at[i].res = ASK_PENDING;
    for (size_t i = 0; i < s->n; i++) {
        sentinel_t *x = &s->at[i];
        /* on_ask_state may run before gw_redis_new returns (a connect refused at once): res
         * then says the connection is done with, and the next step closes it */
        x->ask = dial(s, i, on_ask_state, NULL, x);
        if (!x->ask && x->res == ASK_PENDING)
            fail(x, "out of memory");
    }
    check_asked(s);
}

/* The next address to check: of the sentinels that answered and were not refused, the one of
 * the greatest config-epoch (ties: the first in the order from s->next). */
static void pick(gw_sentinel_t *s)
{
    sentinel_t *best = NULL;
    for (size_t k = 0; k < s->n; k++) {
        sentinel_t *x = &s->at[(s->next + k) % s->n];
        if (x->res == ASK_ANSWERED && (!best || x->epoch > best->epoch))
            best = x;
    }
    if (!best) {
        s->none = 1;
        return;
    }
    best->res = ASK_IDLE; /* with the caller now */
    s->named = (size_t)(best - s->at);
    memcpy(s->host, best->named_host, sizeof(s->host));
    s->port = best->named_port;
    s->have = 1;
}

/* Let every connection of the round go (from the timer only). */
static void close_asks(gw_sentinel_t *s, int all)
{
    for (size_t i = 0; i < s->n; i++) {
        sentinel_t *x = &s->at[i];
        if (x->ask && (all || x->res != ASK_PENDING)) {
            gw_redis_close(x->ask);
            x->ask = NULL;
        }
    }
}

/* ---- the subscription --------------------------------------------------------------------- */

/* Something came from the subscription: it is alive for an interval and a timeout more. */
static void heard(gw_sentinel_t *s)
{
    s->sub_due = uv_now(s->loop) + s->ping_ms + s->timeout_ms;
}

static void on_subscribed(void *ud, const redisReply *r, int err)
{
    gw_sentinel_t *s = ud;
    if (err == 0 && r)
        heard(s);
    if (err == 0 && r && r->type == REDIS_REPLY_ARRAY)
        return; /* ["subscribe", "+switch-master", 1] */
    if (err == GW_E_CLOSED)
        return;
    GW_LOG_WARN("sentinel_subscribe_failed", "sentinel=%s master=%s", s->at[s->sub_at].text,
                s->master);
}

static void on_sub_state(void *ud, int up, const char *why)
{
    gw_sentinel_t *s = ud;
    (void)why; /* the client reconnects by itself; a round may move the subscription */
    /* PING's callback ran (GW_E_IO), or the connection is new. A connect is not heard from
     * the sentinel (a stopped process's kernel accepts it): SUBSCRIBE's reply is. */
    s->pinging = 0;
    if (!up)
        return;
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    size_t lens[] = {9, 14};
    if (gw_redis_command(s->sub, 2, argv, lens, on_subscribed, s) < 0)
        on_subscribed(s, NULL, GW_E_IO);
}

static void on_sub_push(void *ud, const redisReply *r)
{
    gw_sentinel_t *s = ud;
    heard(s);
    /* ["message", "+switch-master", "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT"] */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[0]->len != 7 || memcmp(r->element[0]->str, "message", 7) != 0)
        return;
    if (gw_cluster__switch_msg(r->element[2]->str, r->element[2]->len, s->master, s->sw_from,
                               sizeof(s->sw_from), s->sw_to, sizeof(s->sw_to)) < 0)
        return; /* another master's, or not a switch message */
    s->switched = 1;
    step_soon(s);
}

/* PING's answer on the subscription: ["pong", ""]; or, when a message was on its way before
 * it, that message (replies and messages share the one stream: the pong then comes as a
 * message, which on_sub_push ignores). */
static void on_pong(void *ud, const redisReply *r, int err)
{
    gw_sentinel_t *s = ud;
    if (err == GW_E_CLOSED)
        return;
    s->pinging = 0;
    if (err != 0 || !r)
        return;        /* no answer within timeout, or lost: the deadline of on_ping decides */
    on_sub_push(s, r); /* heard; a +switch-master that came first is not lost */
}

static void on_ping(uv_timer_t *t)
{
    gw_sentinel_t *s = t->data;
    if (!s->sub)
        return;
    if (uv_now(s->loop) >= s->sub_due) {
        sentinel_t *x = &s->at[s->sub_at];
        char why[160];
        snprintf(why, sizeof(why), "subscription silent for %llu ms",
                 (unsigned long long)(s->ping_ms + s->timeout_ms));
        GW_LOG_WARN("sentinel_silent", "sentinel=%s master=%s silent_ms=%llu", x->text, s->master,
                    (unsigned long long)(s->ping_ms + s->timeout_ms));
        snprintf(x->why, sizeof(x->why), "%s", why); /* logged here; its next answer clears it */
        gw_redis_close(s->sub); /* from this timer: not inside the connection's callbacks */
        s->sub = NULL;
        s->pinging = 0;
        /* ask again, the next sentinel first: the master may have moved meanwhile, and the
         * sentinel whose answer is taken gets the subscription (gw_sentinel_ok) */
        if (round_idle(s) && !s->want) {
            s->next = (s->sub_at + 1) % s->n;
            s->want = 1;
            step_soon(s);
        }
        return;
    }
    if (s->pinging || !gw_redis_up(s->sub))
        return;
    const char *argv[] = {"PING"};
    size_t lens[] = {4};
    if (gw_redis_command(s->sub, 1, argv, lens, on_pong, s) == 0)
        s->pinging = 1;
}

/* Subscribe at sentinel i (the one that answered) when there is no subscription, or when
 * its sentinel is down and another answered. */
static void subscribe(gw_sentinel_t *s, size_t i)
{
    if (s->sub && (gw_redis_up(s->sub) || s->sub_at == i))
        return;
    if (s->sub)
        gw_redis_close(s->sub);
    s->sub_at = i;
    s->pinging = 0;
    s->sub_due = uv_now(s->loop) + s->connect_timeout_ms + s->ping_ms + s->timeout_ms;
    s->sub = dial(s, i, on_sub_state, on_sub_push, s);
}

/* ---- steps -------------------------------------------------------------------------------- */

static void on_step(uv_timer_t *t)
{
    gw_sentinel_t *s = t->data;
    close_asks(s, 0); /* the connections whose sentinel answered or failed */
    if (s->switched) {
        s->switched = 0;
        GW_LOG_INFO("sentinel_switch", "sentinel=%s master=%s from=%s to=%s", s->at[s->sub_at].text,
                    s->master, s->sw_from, s->sw_to);
        /* the round under way, if any, asked before the switch: it is dropped */
        close_asks(s, 1);
        for (size_t i = 0; i < s->n; i++)
            s->at[i].res = ASK_IDLE;
        s->asking = s->decide = s->waiting = s->have = s->none = 0;
        s->backoff_ms = BACKOFF_MIN_MS;
        s->next = s->sub_at; /* it saw the switch: first among equal epochs */
        s->want = 1;
        s->cb.on_switch(s->cb.ud, s->sw_from, s->sw_to);
    }
    if (s->decide) {
        s->decide = 0;
        pick(s);
    }
    if (s->have) {
        s->have = 0;
        s->waiting = 1;
        s->cb.on_primary(s->cb.ud, s->host, s->port, s->at[s->named].text);
        return;
    }
    if (s->none) {
        s->none = 0;
        for (size_t i = 0; i < s->n; i++)
            s->at[i].res = ASK_IDLE;
        s->want = 1;
        s->cb.on_none(s->cb.ud, s->why);
        if (!s->closed)
            uv_timer_start(&s->timer, on_step, s->backoff_ms, 0);
        s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
        return;
    }
    if (s->want && round_idle(s)) {
        s->want = 0;
        start_round(s);
    }
}

/* ---- public (cluster_internal.h) ----------------------------------------------------------- */

int gw_sentinel_new(uv_loop_t *loop, const gw_cfg_cluster_t *cfg, const gw_sentinel_cbs_t *cb,
                    gw_sentinel_t **out)
{
    *out = NULL;
    gw_sentinel_t *s = gw_calloc(1, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->loop = loop;
    s->cb = *cb;
    s->master = gw_strdup(cfg->master ? cfg->master : "");
    s->password = cfg->sentinel_password ? gw_strdup(cfg->sentinel_password) : NULL;
    int nomem = !s->master || (cfg->sentinel_password && !s->password);
    for (size_t i = 0; i < cfg->sentinels_len && i < GW_CFG_SENTINELS_MAX && !nomem; i++) {
        s->at[i].s = s;
        const char *text = cfg->sentinels[i].addr.text, *colon = strrchr(text, ':');
        s->at[i].host = gw_strdup(cfg->sentinels[i].host);
        s->at[i].port = colon ? (unsigned)atoi(colon + 1) : 26379;
        snprintf(s->at[i].text, sizeof(s->at[i].text), "%s", text);
        nomem = !s->at[i].host;
        s->n = i + 1;
    }
    if (nomem || !s->n) {
        for (size_t i = 0; i < s->n; i++)
            gw_free(s->at[i].host);
        gw_free(s->master);
        gw_free(s->password);
        gw_free(s);
        return GW_E_NOMEM;
    }
    s->timeout_ms = cfg->timeout_ms;
    s->connect_timeout_ms = cfg->connect_timeout_ms;
    s->max_reply = cfg->max_reply;
    s->backoff_ms = BACKOFF_MIN_MS;
    s->ping_ms = gw_cluster__ping_ms(cfg);
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_timer_init(loop, &s->ping);
    s->ping.data = s;
    uv_timer_start(&s->ping, on_ping, s->ping_ms, s->ping_ms);
    *out = s;
    return 0;
}

void gw_sentinel_ask(gw_sentinel_t *s)
{
    if (!round_idle(s) || s->want)
        return; /* a round is under way, or waits for its backoff */
    s->want = 1;
    step_soon(s);
}

void gw_sentinel_ok(gw_sentinel_t *s)
{
    if (!s->waiting)
        return;
    s->waiting = 0;
    const sentinel_t *taken = &s->at[s->named];
    for (size_t i = 0; i < s->n; i++) {
        sentinel_t *x = &s->at[i];
        if (x->res == ASK_ANSWERED && x->epoch < taken->epoch &&
            (x->named_port != taken->named_port || strcmp(x->named_host, taken->named_host))) {
            char w[GW_CLUSTER_HOST_MAX + 120];
            snprintf(w, sizeof(w),
                     strchr(x->named_host, ':')
                         ? "behind: names [%s]:%u of config-epoch %llu, not %llu"
                         : "behind: names %s:%u of config-epoch %llu, not %llu",
                     x->named_host, x->named_port, x->epoch, taken->epoch);
            fail(x, w);
        }
        x->res = ASK_IDLE; /* the round is over */
    }
    s->at[s->named].why[0] = 0; /* its next failure is news */
    s->next = s->named;         /* it answered well: asked first next time, and listened to */
    s->backoff_ms = BACKOFF_MIN_MS;
    subscribe(s, s->named);
}

void gw_sentinel_refused(gw_sentinel_t *s, const char *why)
{
    if (!s->waiting)
        return; /* a switch began another round meanwhile */
    s->waiting = 0;
    char w[GW_CLUSTER_HOST_MAX + 160];
    snprintf(w, sizeof(w), strchr(s->host, ':') ? "named [%s]:%u: %s" : "named %s:%u: %s", s->host,
             s->port, why);
    fail(&s->at[s->named], w);
    s->decide = 1; /* the next address, if any */
    step_soon(s);
}

static void on_timer_closed(uv_handle_t *h)
{
    gw_sentinel_t *s = h->data;
    if (--s->handles > 0)
        return;
    for (size_t i = 0; i < s->n; i++)
        gw_free(s->at[i].host);
    gw_free(s->master);
    gw_free(s->password);
    gw_free(s);
}

void gw_sentinel_close(gw_sentinel_t *s)
{
    if (!s)
        return;
    s->closed = 1;
    close_asks(s, 1);
    if (s->sub)
        gw_redis_close(s->sub);
    s->sub = NULL;
    s->handles = 2;
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
    uv_close((uv_handle_t *)&s->ping, on_timer_closed);
}
