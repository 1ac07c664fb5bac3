"""The shared cache's memory under a scan (issue 41: "Memory bounded (RSS) under a scan of
100,000 distinct URLs with cache.memory: 64MiB"): h2load asks a gateway with `cache: {memory:
64MiB}` for 100,000 distinct cacheable URLs of 200 B to 8 KiB, each once, from an origin that
answers them all over keep-alive connections (so several answers share each of the gateway's
read buffers: gateway/cache/store.c's copy rule). The gateway's RSS and the store's bytes
(h2gate_cache_bytes on the admin listener) are sampled throughout."""
import subprocess
import sys
import threading
import time

import pytest

from gwtest import h2load_summary, origin_gateway, sample, scrape
from procs import free_port, rss_kib, sanitized, wait_port

# The origin, a separate process (pytest's own threads sample the gateway meanwhile): HTTP/1.1
# keep-alive, GET /s/N answers body_len(N) bytes, fresh for 10 minutes; GET /count (asked
# directly, not through the gateway) answers how many /s/ requests it served.
ORIGIN = r'''
import asyncio, sys

def body_len(n):
    return 200 + (n * 7919) % 7993  # 200 B to 8 KiB, mixed

served = 0

class Conn(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, b""

    def data_received(self, data):
        global served
        self.buf += data
        out = []
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                break
            target = self.buf[:i].split(b" ", 2)[1]
            self.buf = self.buf[i + 4:]
            if target.startswith(b"/s/"):
                served += 1
                n = int(target[3:])
                body = (b"%d " % n) * (body_len(n) // len(b"%d " % n) + 1)
                body = body[:body_len(n)]
                fields = b"Cache-Control: max-age=600\r\nContent-Type: text/plain\r\n"
            else:
                body, fields = b"%d" % served, b"Cache-Control: no-store\r\n"
            out.append(b"HTTP/1.1 200 OK\r\n" + fields +
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if out:
            self.t.write(b"".join(out))

async def main(port):
    srv = await asyncio.get_running_loop().create_server(Conn, "127.0.0.1", port, backlog=512)
    async with srv:
        await srv.serve_forever()

asyncio.run(main(int(sys.argv[1])))
'''

MEMORY = 64 << 20
URLS = 100_000


class ScanOrigin:
    def __init__(self, tmp_path):
        self.port = free_port()
        script = tmp_path / "scan_origin.py"
        script.write_text(ORIGIN)
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.port)])
        wait_port("127.0.0.1", self.port)

    def served(self):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/count")
        n = int(c.getresponse().read())
        c.close()
        return n

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def h1_status(port, path):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})  # h2load's :authority
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, r.getheader("cache-status", "")


@pytest.mark.skipif(sanitized(), reason="ASan's quarantine keeps freed memory: RSS says nothing")
def test_rss_stays_bounded_under_a_scan_of_100000_urls(gateway, tmp_path):
    o = ScanOrigin(tmp_path)
    try:
        g = origin_gateway(gateway, o, route_extra="cache: true\n",
                           extra="cache:\n  memory: 64MiB\n", admin=True,
                           workers=2)
        pid = g.proc.pid
        # warm the paths a request takes (connections, buffers, the allocator's arenas) on a
        # URL outside the scan, then the baseline
        assert h1_status(g.port, "/s/0")[0] == 200
        time.sleep(0.3)
        base = rss_kib(pid) * 1024
        fams, _ = scrape(g.admin)
        bytes0 = sample(fams, "h2gate_cache_bytes")

        peak = {"rss": base, "bytes": bytes0}
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], rss_kib(pid) * 1024)
                f, _ = scrape(g.admin)
                peak["bytes"] = max(peak["bytes"], sample(f, "h2gate_cache_bytes"))
                stop.wait(0.25)

        # two h2load runs at once, the odd and the even URLs, one connection each (h2load sends
        # a client the list from its start: two clients of one run would ask each URL twice);
        # SO_REUSEPORT gives them to either worker
        runs = []
        for half in (1, 2):
            urls = tmp_path / f"urls{half}.txt"
            urls.write_text("".join(f"http://127.0.0.1:{g.port}/s/{i}\n"
                                    for i in range(half, URLS + 1, 2)))
            runs.append(["h2load", "-n", str(URLS // 2), "-c", "1", "-m", "32", "-i",
                         str(urls)])
        t = threading.Thread(target=sampler)
        t.start()
        start = time.monotonic()
        try:
            procs = [subprocess.Popen(a, stdout=subprocess.PIPE, text=True) for a in runs]
            finished = []  # the halves, in the order their runs ended
            while len(finished) < 2 and time.monotonic() < start + 300:
                finished += [h for h, p in enumerate(procs, 1)
                             if h not in finished and p.poll() is not None]
                time.sleep(0.02)
            outs = [p.communicate(timeout=10)[0] for p in procs]
        finally:
            stop.set()
            t.join()
        took = time.monotonic() - start
        for out in outs:
            assert h2load_summary(out)["succeeded"] == URLS // 2, out[-2000:]
        after = rss_kib(pid) * 1024
        peak["rss"] = max(peak["rss"], after)
        fams, _ = scrape(g.admin)
        st = {k: sample(fams, k) for k in ("h2gate_cache_bytes", "h2gate_cache_objects",
                                           "h2gate_cache_evictions_total",
                                           "h2gate_cache_stores_total")}
        print(f"\nscan of {URLS} URLs in {took:.1f} s: RSS {base >> 20} MiB before, "
              f"{after >> 20} MiB after, {peak['rss'] >> 20} MiB at most; store "
              f"{st['h2gate_cache_bytes'] / 2**20:.1f} MiB now, {peak['bytes'] / 2**20:.1f} "
              f"MiB at most, {st['h2gate_cache_objects']:.0f} objects, "
              f"{st['h2gate_cache_evictions_total']:.0f} evictions")
        assert o.served() == URLS + 1  # each URL went to the origin once
        assert st["h2gate_cache_stores_total"] == URLS + 1
        # the store never went past its budget, and it had to evict to stay there
        assert peak["bytes"] <= MEMORY
        assert st["h2gate_cache_evictions_total"] >= URLS - st["h2gate_cache_objects"]
        assert st["h2gate_cache_bytes"] >= MEMORY * 9 // 10  # and it is full, not emptied
        # it holds answers, not read buffers: 64 MiB keep ~14,300 answers of 4.1 KiB on
        # average (each charged its length and ~500 bytes of entry, key and head); without
        # store.c's copy rule, charged the 16 KiB read buffers they share, 2,578 (measured)
        assert st["h2gate_cache_objects"] >= 10_000
        # RSS: the budget, plus what the store does not count: the allocator's free lists and
        # the pages its live blocks share with freed ones in two workers' arenas (store.c:
        # "Memory"), the buffers in flight, the sessions. Measured on a shared 2-core machine:
        # 68 to 83 MiB above the baseline over 21 runs (68 to 70 when both connections landed
        # on one worker), the same at the end of a scan of 198,000 URLs: it does not grow with
        # the scan. Half the budget over it leaves room for the spread; without the heap trims
        # store.c asks for (malloc_trim, on the thread pool) it was 69 to 118 MiB above
        overhead = MEMORY // 2
        assert peak["rss"] <= base + MEMORY + overhead, (base, peak["rss"])
        # the most recent URLs (the end of the run that ended last) still hit, without the
        # origin
        for i in range(URLS - 400 + finished[-1], URLS + 1, 2):
            status, cs = h1_status(g.port, f"/s/{i}")
            assert status == 200 and cs.startswith("h2gate; hit"), (i, cs)
        assert o.served() == URLS + 1
    finally:
        o.stop()
