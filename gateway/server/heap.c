/* server/heap.c — the heap's free pages back to the system once the whole gateway went quiet.
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
 * fordblks still. mallinfo2 walks the arenas' bins, so it runs on the pool too. One trim at a
 * time in the process. An allocator preloaded in glibc's place (jemalloc, mimalloc) leaves
 * glibc's arenas empty: fordblks stays below any threshold worth setting. */
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

static void trim_work(uv_work_t *req)
{
    gw_heap_trim_t *h = GW_CONTAINER_OF(req, gw_heap_trim_t, req);
    h->trimmed = 0;
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    h->free = mi.fordblks;
    h->rss_before = rss_bytes();
    if (h->free < h->min_free || h->rss_before < h->rss_after + h->min_free)
        return;
    uint64_t t0 = gw_now_ns();
    malloc_trim(0);
    h->ns = gw_now_ns() - t0;
    h->rss_after = rss_bytes();
    h->trimmed = 1;
#endif
}

static void trim_done(uv_work_t *req, int status)
{
    gw_heap_trim_t *h = GW_CONTAINER_OF(req, gw_heap_trim_t, req);
    if (status == 0 && !h->trimmed)
        GW_LOG_DEBUG("heap_trim_skipped", "free=%llu rss=%llu rss_last_trim=%llu min_free=%llu",
                     (unsigned long long)h->free, (unsigned long long)h->rss_before,
                     (unsigned long long)h->rss_after, (unsigned long long)h->min_free);
    if (status == 0 && h->trimmed)
        GW_LOG_INFO("heap_trim", "free=%llu rss_before=%llu rss_after=%llu ms=%.1f",
                    (unsigned long long)h->free, (unsigned long long)h->rss_before,
                    (unsigned long long)h->rss_after, (double)h->ns / 1e6);
    atomic_store_explicit(&h->busy, 0, memory_order_release);
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
    if (!g || atomic_exchange_explicit(&h->busy, 1, memory_order_acq_rel))
        return; /* stopping, or the trim of a quiet period a moment ago still runs */
    h->min_free = g->gen->cfg->heap.idle_trim_free;
    if (uv_queue_work(&w->f.loop, &h->req, trim_work, trim_done) < 0)
        atomic_store_explicit(&h->busy, 0, memory_order_release);
}
