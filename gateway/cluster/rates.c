/* cluster/rates.c — shared rate questions from the workers to the main loop (the hub) and
 * their answers back to each worker's loop (its sink): mutex-guarded queues and uv_async
 * wake-ups, nothing else. What the answers are is cluster.c's. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "common/alloc.h"
#include "common/err.h"

struct gw_cluster_sink {
    uv_async_t async;
    pthread_mutex_t mu;
    gw_cluster_answer_t *ans; /* answers not yet handed to cb */
    size_t n, cap;
    size_t owed;      /* questions on their way: each has a slot of ans kept for its answer */
    int open;         /* under mu: async may be sent */
    atomic_uint refs; /* the owner's, and one per question on its way */
    void (*cb)(void *ud, const gw_cluster_answer_t *a);
    void *ud;
};

struct gw_cluster_hub {
    uv_async_t async;
    pthread_mutex_t mu;
    gw_rate_q_t *head, **tail; /* questions not yet taken by the main loop */
    int open;
    gw_cluster_t *c;
    atomic_uint share; /* gw_cluster_hub_share: 1, or the instances last seen alive */
};

/* ---- sinks ----------------------------------------------------------------------------------- */

static void sink_unref(gw_cluster_sink_t *k)
{
    if (atomic_fetch_sub(&k->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&k->mu);
    gw_free(k->ans);
    gw_free(k);
}

static void on_sink_wake(uv_async_t *a)
{
    gw_cluster_sink_t *k = a->data;
    for (;;) {
        gw_cluster_answer_t batch[64];
        size_t n;
        pthread_mutex_lock(&k->mu);
        n = k->n < 64 ? k->n : 64;
        memcpy(batch, k->ans, n * sizeof(*batch));
        memmove(k->ans, k->ans + n, (k->n - n) * sizeof(*batch));
        k->n -= n;
        int open = k->open;
        pthread_mutex_unlock(&k->mu);
        if (!n || !open)
            return;
        for (size_t i = 0; i < n; i++)
            k->cb(k->ud, &batch[i]);
    }
}

int gw_cluster_sink_new(uv_loop_t *loop, void (*cb)(void *ud, const gw_cluster_answer_t *a),
                        void *ud, gw_cluster_sink_t **out)
{
    *out = NULL;
    gw_cluster_sink_t *k = gw_calloc(1, sizeof(*k));
    if (!k)
        return GW_E_NOMEM;
    if (uv_async_init(loop, &k->async, on_sink_wake) != 0) {
        gw_free(k);
        return GW_E_NOMEM;
    }
    pthread_mutex_init(&k->mu, NULL);
    k->async.data = k;
    k->open = 1;
    atomic_init(&k->refs, 1);
    k->cb = cb;
    k->ud = ud;
    *out = k;
    return 0;
}

static void on_sink_closed(uv_handle_t *h)
{
    sink_unref(h->data);
}

void gw_cluster_sink_close(gw_cluster_sink_t *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    k->open = 0;
    k->n = 0;
    pthread_mutex_unlock(&k->mu);
    uv_close((uv_handle_t *)&k->async, on_sink_closed);
}

static void deliver(gw_rate_q_t *q, gw_cluster_answer_t a);

void gw_cluster__answer(gw_rate_q_t *q, gw_rate_verdict_t v, unsigned retry_after_s)
{
    if (q->lease) {
        gw_cluster__grant(q, 0, 1);
        return;
    }
    deliver(q,
            (gw_cluster_answer_t){.token = q->token, .verdict = v, .retry_after_s = retry_after_s});
}

void gw_cluster__grant(gw_rate_q_t *q, uint64_t granted, int local)
{
    deliver(q, (gw_cluster_answer_t){.lease = 1,
                                     .granted = granted,
                                     .token = q->token,
                                     .verdict = local ? GW_RATE_LOCAL : GW_RATE_ALLOW});
}

/* Keep a slot of k->ans for one more answer (under k->mu): the question is refused here, where
 * its asker can decide without it, rather than its answer lost for want of memory later (a
 * request would wait for it until the client gave up). */
static int sink_reserve(gw_cluster_sink_t *k)
{
    if (k->n + k->owed == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        gw_cluster_answer_t *na = gw_realloc(k->ans, cap * sizeof(*na));
        if (!na)
            return GW_E_NOMEM;
        k->ans = na;
        k->cap = cap;
    }
    k->owed++;
    return 0;
}

static void deliver(gw_rate_q_t *q, gw_cluster_answer_t a)
{
    gw_cluster_sink_t *k = q->sink;
    gw_free(q);
    pthread_mutex_lock(&k->mu);
    k->owed--; /* its slot: n + owed never exceeds cap */
    if (k->open && a.token) {
        k->ans[k->n++] = a;
        uv_async_send(&k->async);
    }
    pthread_mutex_unlock(&k->mu);
    sink_unref(k);
}

/* ---- the hub --------------------------------------------------------------------------------- */

static gw_rate_q_t *take_all(gw_cluster_hub_t *h)
{
    pthread_mutex_lock(&h->mu);
    gw_rate_q_t *list = h->head;
    h->head = NULL;
    h->tail = &h->head;
    pthread_mutex_unlock(&h->mu);
    return list;
}

static void answer_all_local(gw_rate_q_t *list)
{
    while (list) {
        gw_rate_q_t *next = list->next;
        gw_cluster__answer(list, GW_RATE_LOCAL, 0);
        list = next;
    }
}

static void on_hub_wake(uv_async_t *a)
{
    gw_cluster_hub_t *h = a->data;
    gw_rate_q_t *list = take_all(h);
    if (!list)
        return;
    if (h->c)
        gw_cluster__rates(h->c, list);
    else
        answer_all_local(list);
}

int gw_cluster_hub_new(uv_loop_t *main_loop, gw_cluster_hub_t **out)
{
    *out = NULL;
    gw_cluster_hub_t *h = gw_calloc(1, sizeof(*h));
    if (!h)
        return GW_E_NOMEM;
    if (uv_async_init(main_loop, &h->async, on_hub_wake) != 0) {
        gw_free(h);
        return GW_E_NOMEM;
    }
    pthread_mutex_init(&h->mu, NULL);
    h->async.data = h;
    h->tail = &h->head;
    h->open = 1;
    atomic_init(&h->share, 1);
    *out = h;
    return 0;
}

void gw_cluster_hub_set(gw_cluster_hub_t *h, gw_cluster_t *c)
{
    if (h->c && h->c != c)
        gw_cluster__set_hub(h->c, NULL);
    h->c = c;
    atomic_store(&h->share, 1); /* no cluster: an instance alone decides with the whole limit */
    if (c)
        gw_cluster__set_hub(c, h); /* and tells its share from now on */
}

void gw_cluster__hub_share(gw_cluster_hub_t *h, unsigned share)
{
    atomic_store(&h->share, share ? share : 1);
}

unsigned gw_cluster_hub_share(gw_cluster_hub_t *h)
{
    return h ? atomic_load(&h->share) : 1;
}

static int enqueue(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key, size_t klen,
                   uint64_t rate, uint64_t burst, uint64_t token, uint64_t want);

int gw_cluster_hub_ask(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key,
                       size_t klen, uint64_t rate, uint64_t burst, uint64_t token)
{
    return enqueue(h, sink, key, klen, rate, burst, token, 0);
}

int gw_cluster_hub_lease(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key,
                         size_t klen, uint64_t rate, uint64_t burst, uint64_t want, uint64_t token)
{
    return enqueue(h, sink, key, klen, rate, burst, token, want ? want : 1);
}

/* want 0: a rate question; else a lease of want bytes. */
static int enqueue(gw_cluster_hub_t *h, gw_cluster_sink_t *sink, const uint8_t *key, size_t klen,
                   uint64_t rate, uint64_t burst, uint64_t token, uint64_t want)
{
    gw_rate_q_t *q = gw_calloc(1, sizeof(*q));
    if (!q)
        return GW_E_NOMEM;
    pthread_mutex_lock(&sink->mu);
    int rc = sink_reserve(sink);
    pthread_mutex_unlock(&sink->mu);
    if (rc < 0) {
        gw_free(q);
        return rc;
    }
    q->lease = want != 0;
    q->want = want;
    atomic_fetch_add(&sink->refs, 1);
    q->sink = sink;
    q->token = token;
    q->rate = rate;
    q->burst = burst;
    q->klen = klen < sizeof(q->key) ? klen : sizeof(q->key);
    memcpy(q->key, key, q->klen);
    pthread_mutex_lock(&h->mu);
    if (!h->open) {
        pthread_mutex_unlock(&h->mu);
        gw_cluster__answer(q, GW_RATE_LOCAL, 0);
        return 0;
    }
    *h->tail = q;
    h->tail = &q->next;
    uv_async_send(&h->async);
    pthread_mutex_unlock(&h->mu);
    return 0;
}

static void on_hub_closed(uv_handle_t *hd)
{
    gw_cluster_hub_t *h = hd->data;
    pthread_mutex_destroy(&h->mu);
    gw_free(h);
}

void gw_cluster_hub_close(gw_cluster_hub_t *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->open = 0;
    pthread_mutex_unlock(&h->mu);
    answer_all_local(take_all(h));
    uv_close((uv_handle_t *)&h->async, on_hub_closed);
}
