/* server/heap.c — the heap's free pages back to the system: once the whole gateway went quiet,
 * and after the cache removed memory/16 bytes; the one owner of malloc_trim in the process.
 *
 * Why. Each worker thread allocates from its own glibc arena. A burst of large responses
 * leaves the arena's free memory in chunks between live ones, not at its top, so no trim
 * threshold gives it back (main.c keeps 4 MiB of free top per arena on purpose: page loads
 * would fault it in again): after 2,000 responses of 1 MiB from 50 h2c connections (h2load
 * -m 10, 2 workers) RSS stayed at 22-37 MiB, 14-22 MiB of it free in the two workers'
 * arenas (mallinfo2, malloc_info), for as long as the gateway stayed quiet. malloc_trim(0)
 * gives back every whole free page of every arena (madvise): 13.5 MiB was left.
 *
 * When. Each worker tells when it goes quiet, no connection having taken up or held work for
 * heap.idle_trim, and when it has work again (front.c; on these transitions only, never per
 * request). When the last worker goes quiet, the whole gateway is: one trim, at most, per such
 * quiet period. Not before, because malloc_trim walks every arena, a busy worker's too, whose
 * free pages it would take from under the next page loads (the reason for main.c's
 * threshold) and whose allocations wait on the arena's lock while its pages are walked.
 *
 * Where. On libuv's thread pool, never on a worker's loop: one malloc_trim(0) over 100 MiB
 * free in two threads' arenas took 9-41 ms here (13 ms in chunks of 128 KiB, 41 ms in chunks
 * of 16 KiB; a second call with nothing left to give still 0.6-15 ms: glibc madvises every free
 * page again, it does not know which it gave back already). So a trim runs only when the heap
 * holds heap.idle_trim_free free bytes (mallinfo2's fordblks, every arena) and the process's
 * resident size grew by as much since the last trim: free memory already given back counts in
 * fordblks still. mallinfo2 walks the arenas' bins, so it runs on the pool too. An allocator
 * preloaded in glibc's place (jemalloc, mimalloc) leaves glibc's arenas empty: fordblks stays
 * below any threshold worth setting.
 *
 * One owner. The cache asks for trims too (store.c's "Memory": after each memory/16 bytes its
 * evictions, an admin's purge or a reload removed), unconditionally. Every trim of the process
 * goes through gw_server__heap_trim: the reasons are bits ORed into pending, and the asker that
 * finds no run under way (busy) wakes the main loop, which queues one run on libuv's thread
 * pool; a run takes every pending reason, trims once for the cache's and then checks the idle
 * one (which a trim just made then finds not worth it: the resident size did not grow since),
 * and when it is done queues the next run if reasons came meanwhile. So two malloc_trim(0)
 * never overlap (each walks and locks every arena: two at once only wait on each other), asks
 * never block (a purge used to trim on the admin's thread, a reload on the main loop), and none
 * is lost. Queued from the main loop, whose life spans the workers' and the admin's, so a run
 * never holds up a worker's loop that wants to end; its logs are written from run_done there,
 * not from the pool thread (a log line's first malloc would give that thread an arena), and
 * where the trims are counted for the metrics (h2gate_heap_trims_total{reason="idle|cache"},
 * h2gate_heap_trim_seconds_total: one run that serves the cache and then the idle check counts
 * one of each when both trimmed; an idle check that did not trim counts in
 * h2gate_heap_trims_skipped_total, so that a gateway that goes quiet and never trims, its
 * idle_trim_free too high or another allocator preloaded, shows without the debug log). */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/server_internal.h"

/* Resident bytes of the process (/proc/self/statm), 0 when unknown. Read into the stack, not
 * through stdio: a FILE would be the pool thread's first malloc and give it an arena. */
static uint64_t rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned long long size = 0, res = 0;
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (sscanf(buf, "%llu %llu", &size, &res) != 2)
        return 0;
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

#ifdef __GLIBC__
/* The log's after= of the cache's reasons a run served. */
static const char *cache_why(unsigned taken)
{
    static const char *const names[] = {
        [GW_HEAP_TRIM_PURGE >> 1] = "purge",
        [GW_HEAP_TRIM_EVICT >> 1] = "evict",
        [(GW_HEAP_TRIM_PURGE | GW_HEAP_TRIM_EVICT) >> 1] = "purge,evict",
        [GW_HEAP_TRIM_RELOAD >> 1] = "reload",
        [(GW_HEAP_TRIM_RELOAD | GW_HEAP_TRIM_EVICT) >> 1] = "reload,evict",
        [(GW_HEAP_TRIM_RELOAD | GW_HEAP_TRIM_PURGE) >> 1] = "purge,reload",
        [GW_HEAP_TRIM_CACHE >> 1] = "purge,reload,evict",
    };
    return names[(taken & GW_HEAP_TRIM_CACHE) >> 1];
}
#endif

static void run_work(uv_work_t *req)
{
    gw_heap_trim_t *h = GW_CONTAINER_OF(req, gw_heap_trim_t, req);
    h->taken = atomic_exchange_explicit(&h->pending, 0, memory_order_acq_rel);
    h->trimmed = 0;
#ifdef __GLIBC__
    if (h->taken & GW_HEAP_TRIM_CACHE) {
        uint64_t t0 = gw_now_ns();
        malloc_trim(0);
        h->cache_ns = gw_now_ns() - t0;
        h->rss_after = rss_bytes();
    }
    if (!(h->taken & GW_HEAP_TRIM_IDLE))
        return;
    h->idle_min = atomic_load_explicit(&h->min_free, memory_order_relaxed);
    struct mallinfo2 mi = mallinfo2();
    h->free = mi.fordblks;
    h->rss_before = rss_bytes();
    if (h->free < h->idle_min || h->rss_before < h->rss_after + h->idle_min)
        return;
    uint64_t t0 = gw_now_ns();
    malloc_trim(0);
    h->ns = gw_now_ns() - t0;
    h->rss_after = rss_bytes();
    h->trimmed = 1;
#endif
}

static void run_done(uv_work_t *req, int status);

/* On the main loop: queue the next run, or let the next ask do it. */
static void run_queue(gw_heap_trim_t *h)
{
    gw_server_t *s = GW_CONTAINER_OF(h, gw_server_t, heap);
    if (uv_queue_work(&s->main_loop, &h->req, run_work, run_done) < 0)
        atomic_store_explicit(&h->busy, 0, memory_order_release);
}

static void run_done(uv_work_t *req, int status)
{
    gw_heap_trim_t *h = GW_CONTAINER_OF(req, gw_heap_trim_t, req);
#ifdef __GLIBC__
    if (status == 0 && (h->taken & GW_HEAP_TRIM_CACHE)) {
        atomic_fetch_add_explicit(&h->trims[GW_HEAP_TRIMS_CACHE], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->trim_ns[GW_HEAP_TRIMS_CACHE], h->cache_ns,
                                  memory_order_relaxed);
        /* evictions alone come often under a scan: those are for the debug log */
        if (h->taken & (GW_HEAP_TRIM_PURGE | GW_HEAP_TRIM_RELOAD))
            GW_LOG_INFO("cache_trim", "after=%s ms=%.1f", cache_why(h->taken),
                        (double)h->cache_ns / 1e6);
        else
            GW_LOG_DEBUG("cache_trim", "after=%s ms=%.1f", cache_why(h->taken),
                         (double)h->cache_ns / 1e6);
    }
    if (status == 0 && (h->taken & GW_HEAP_TRIM_IDLE) && !h->trimmed) {
        atomic_fetch_add_explicit(&h->skipped, 1, memory_order_relaxed);
        GW_LOG_DEBUG("heap_trim_skipped", "free=%llu rss=%llu rss_last_trim=%llu min_free=%llu",
                     (unsigned long long)h->free, (unsigned long long)h->rss_before,
                     (unsigned long long)h->rss_after, (unsigned long long)h->idle_min);
    }
    if (status == 0 && h->trimmed) {
        atomic_fetch_add_explicit(&h->trims[GW_HEAP_TRIMS_IDLE], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->trim_ns[GW_HEAP_TRIMS_IDLE], h->ns, memory_order_relaxed);
        GW_LOG_INFO("heap_trim", "free=%llu rss_before=%llu rss_after=%llu ms=%.1f",
                    (unsigned long long)h->free, (unsigned long long)h->rss_before,
                    (unsigned long long)h->rss_after, (double)h->ns / 1e6);
    }
#endif
    atomic_store_explicit(&h->busy, 0, memory_order_seq_cst);
    /* an ask that came while this run ran found busy set and left its reason in pending: the
     * next run is queued here unless that asker, seeing busy cleared, claimed it itself */
    if (status == 0 && atomic_load_explicit(&h->pending, memory_order_seq_cst) &&
        !atomic_exchange_explicit(&h->busy, 1, memory_order_seq_cst)) {
        uv_mutex_lock(&h->mu);
        int open = h->wake_open;
        uv_mutex_unlock(&h->mu);
        if (open)
            run_queue(h);
        else
            atomic_store_explicit(&h->busy, 0, memory_order_release);
    }
}

static void on_wake(uv_async_t *a)
{
    run_queue(GW_CONTAINER_OF(a, gw_heap_trim_t, wake));
}

void gw_server__heap_trim(gw_server_t *s, unsigned why)
{
    gw_heap_trim_t *h = &s->heap;
    atomic_fetch_or_explicit(&h->pending, why, memory_order_seq_cst);
    if (atomic_exchange_explicit(&h->busy, 1, memory_order_seq_cst))
        return; /* a run is asked for or under way: it, or the one after it, takes why */
    uv_mutex_lock(&h->mu);
    if (h->wake_open)
        uv_async_send(&h->wake);
    else
        atomic_store_explicit(&h->busy, 0, memory_order_release); /* stopping: no more trims */
    uv_mutex_unlock(&h->mu);
}

void gw_server__heap_trim_evicted(void *user_data)
{
    gw_server__heap_trim(user_data, GW_HEAP_TRIM_EVICT);
}

int gw_server__heap_init(gw_server_t *s)
{
    return uv_mutex_init(&s->heap.mu) == 0 ? 0 : GW_E_NOMEM;
}

void gw_server__heap_start(gw_server_t *s)
{
    gw_heap_trim_t *h = &s->heap;
    uv_async_init(&s->main_loop, &h->wake, on_wake);
    uv_mutex_lock(&h->mu);
    h->wake_open = 1;
    uv_mutex_unlock(&h->mu);
    /* asked before the main loop ran (none is expected): served now */
    if (atomic_load(&h->pending) && !atomic_exchange(&h->busy, 1))
        uv_async_send(&h->wake);
}

void gw_server__heap_close(gw_server_t *s)
{
    gw_heap_trim_t *h = &s->heap;
    uv_mutex_lock(&h->mu);
    int open = h->wake_open;
    h->wake_open = 0;
    uv_mutex_unlock(&h->mu);
    if (open)
        uv_close((uv_handle_t *)&h->wake, NULL);
}

void gw_server__heap_free(gw_server_t *s)
{
    uv_mutex_destroy(&s->heap.mu);
}

void gw_server__worker_quiet(gw_worker_t *w, int quiet)
{
    gw_server_t *s = w->srv;
    gw_heap_trim_t *h = &s->heap;
    if (!quiet) {
        atomic_fetch_sub_explicit(&h->quiet, 1, memory_order_relaxed);
        GW_LOG_DEBUG("worker_quiet", "worker=%u quiet=no", w->f.id);
        return;
    }
    unsigned n = atomic_fetch_add_explicit(&h->quiet, 1, memory_order_acq_rel) + 1;
    GW_LOG_DEBUG("worker_quiet", "worker=%u quiet=yes quiet_workers=%u", w->f.id, n);
    if (n < s->workers_len)
        return; /* some worker has work */
    gw_wgen_t *g = WCUR(w);
    if (!g)
        return; /* stopping */
    atomic_store_explicit(&h->min_free, g->gen->cfg->heap.idle_trim_free, memory_order_relaxed);
    gw_server__heap_trim(s, GW_HEAP_TRIM_IDLE);
}
