#!/usr/bin/env python3
"""Soak: one gateway under mixed load for SOAK_MINUTES, sampled every 10 s.

Usage: soak.py H2GATE_BIN OUT_DIR MINUTES

Load, each kind in its own thread, all through one gateway (two workers, an h2c listener that
also takes HTTP/1.1, a TLS listener, the admin listener):
  h2load-tls, h2load-h2c  h2load at a fixed request rate over HTTP/2 (TLS, h2c): 1 KiB, 64 KiB
                          and 1 MiB files from nginx
  h1-download             curl over HTTP/1.1: 1 MiB and 10 MiB files, each checked (sha256)
  upload                  1 MiB POSTs over HTTP/2 and HTTP/1.1 to an echo origin, each checked
  cancel                  a 10 MiB download over HTTP/2 reset (CANCEL) after 256 KiB, then a
                          request on the same connection that must succeed
  slow-reader             a 10 MiB download over HTTP/2 read at about 2 MiB/s (64 KiB windows)
  fault                   a few per minute: hostile-origin faults (a reset mid-body, a reset
                          mid-head, a malformed head); the answer each must get is known
  reload                  SIGHUP once a minute (the configuration reloaded: a new generation)
Every request's outcome is counted; a failure is "injected" when the fault thread provoked it
and got the answer it expected, else unexpected.

Samples (every 10 s): the gateway's RSS, CPU (user+system since the last sample), open
descriptors, origin connections (h2gate_upstream_connections), requests done; a progress line
each; OUT_DIR/soak.tsv and OUT_DIR/soak.png (gnuplot) at the end, and OUT_DIR/summary.txt.

Pass (exit 0) when, after the first minute: RSS at the end is at most 5 % above RSS at the
first minute (the mean of the last three samples against the mean of the three after the first
minute, to smooth one sample's noise); descriptors and origin connections stay flat (the
mean of the last third of the samples at most max(10 %, 8) above the first third's); no
unexpected failure; the gateway process never exited (same pid, alive at every sample)."""
import hashlib
import http.client
import itertools
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

import h2.events  # noqa: E402
import h2.settings  # noqa: E402

import rig  # noqa: E402
from procs import Nginx, free_port, rss_kib, wait_port  # noqa: E402
from gwtest import Client, sample, scrape, tls_listener  # noqa: E402
from hostile_origin import HostileOrigin  # noqa: E402
from origin import ScriptedOrigin  # noqa: E402

SIZES = {"f1k": 1024, "f64k": 65536, "f1m": 1 << 20, "f10m": 10 << 20}


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = {}
        self.injected = {}
        self.unexpected = {}
        self.examples = []

    def add(self, kind, outcome, n=1, why=None):
        with self.lock:
            d = {"ok": self.ok, "injected": self.injected, "unexpected": self.unexpected}[outcome]
            d[kind] = d.get(kind, 0) + n
            if outcome == "unexpected" and why and len(self.examples) < 50:
                self.examples.append(f"{time.strftime('%H:%M:%S')} {kind}: {why}")

    def totals(self):
        with self.lock:
            return (sum(self.ok.values()), sum(self.injected.values()),
                    sum(self.unexpected.values()))


def make_files(root):
    rnd = random.Random(26)
    digests = {}
    for name, size in SIZES.items():
        data = rnd.randbytes(size)
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def config(h2c, tls, admin, nginx, app, hostile):
    lines = ["workers: 2", "log_level: warn", "listen:", f"  - address: 127.0.0.1:{h2c}"]
    lines += tls_listener(tls)
    lines += [f"admin:\n  address: 127.0.0.1:{admin}",
              "upstreams:",
              f"  static:\n    servers: [127.0.0.1:{nginx}]\n    max_connections: 32",
              f"  app:\n    servers: [127.0.0.1:{app}]\n    max_connections: 16",
              # the faults must not eject the fault origin (each would then be a 503)
              f"  hostile:\n    servers: [127.0.0.1:{hostile}]\n    retries: 0\n"
              "    health:\n      fail_threshold: 1000\n      eject: 1ms",
              "routes:",
              "  - host: hostile.test\n    path: /\n    upstream: hostile",
              "  - host: '*'\n    path: /echo\n    upstream: app",
              "  - host: '*'\n    path: /\n    upstream: static"]
    return "\n".join(lines) + "\n"


# ---- load ----------------------------------------------------------------------------------------

def h2load_loop(stop, tally, url_base, kind, tls):
    urls = [f"{url_base}/f1k", f"{url_base}/f1k", f"{url_base}/f64k", f"{url_base}/f1m"]
    while not stop.is_set():
        cmd = ["h2load", "-c", "8", "-m", "4", "--rps", "40", "-D", "20",
               "--warm-up-time", "0"] + urls
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout", p.stdout)
        st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", p.stdout)
        if not m or not st:
            tally.add(kind, "unexpected", 1, "h2load output: " + p.stdout[-300:])
            continue
        # requests still in flight when -D ended (started, not done) are neither: h2load
        # stops them
        failed, errored, tmo = int(m[5]), int(m[6]), int(m[7])
        tally.add(kind, "ok", int(st[1]))
        bad = failed + errored + tmo + int(st[2]) + int(st[3]) + int(st[4])
        if bad:
            tally.add(kind, "unexpected", bad, f"h2load: {m[0]}; {st[0]}")


def repeat(stop, tally, kind, pause, once, errors=(OSError,)):
    """Run once() until stop is set, pause seconds apart, and count each outcome under kind:
    "ok" when it returns None, else "unexpected" with what it returned (why), or with the
    exception (of errors) it raised."""
    while not stop.is_set():
        try:
            why = once()
        except errors as e:
            why = repr(e)
        if why is None:
            tally.add(kind, "ok")
        else:
            tally.add(kind, "unexpected", 1, why)
        stop.wait(pause)


def h1_download_loop(stop, tally, port, digests):
    names = itertools.cycle(["f1m", "f10m"])

    def once():
        name = next(names)
        p = subprocess.run(["curl", "-sS", "--http1.1", "--max-time", "60",
                            f"http://127.0.0.1:{port}/{name}"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=90)
        if p.returncode == 0 and hashlib.sha256(p.stdout).hexdigest() == digests[name]:
            return None
        return f"curl rc={p.returncode} len={len(p.stdout)} {p.stderr.decode()[:200]}"
    repeat(stop, tally, "h1-download", 0.5, once, errors=())


def h2_fetch(cl, path, method="GET", body=None, read_limit=None, rate=None, authority="localhost"):
    """One request on python3-h2 client cl: (status, body, reset code). read_limit: reset the
    stream (CANCEL) once that many body bytes came; rate: bytes/s the client reads at."""
    sid = cl.c.get_next_available_stream_id()
    hdrs = [(":method", method), (":path", path), (":scheme", "http"), (":authority", authority)]
    if body is not None:
        hdrs.append(("content-length", str(len(body))))
    cl.c.send_headers(sid, hdrs, end_stream=body is None)
    if body is not None:
        off = 0
        while off < len(body):
            win = cl.c.local_flow_control_window(sid)
            n = min(win, cl.c.max_outbound_frame_size, len(body) - off)
            if n <= 0:
                cl.flush()
                cl.s.settimeout(30)
                data = cl.s.recv(65536)
                if not data:
                    return None, b"", None
                cl.c.receive_data(data)
                continue
            cl.c.send_data(sid, body[off:off + n], end_stream=off + n == len(body))
            off += n
    cl.flush()
    status, got, reset = None, bytearray(), None
    t0 = time.monotonic()
    deadline = t0 + 120
    while time.monotonic() < deadline:
        cl.s.settimeout(30)
        data = cl.s.recv(65536)
        if not data:
            break
        done = False
        for e in cl.c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                status = int(dict(e.headers)[":status"])
            elif isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
                got += e.data
                if rate:
                    ahead = len(got) / rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
                cl.c.acknowledge_received_data(e.flow_controlled_length, sid)
                if read_limit and len(got) >= read_limit:
                    cl.c.reset_stream(sid, error_code=8)
                    cl.flush()
                    return status, bytes(got), "cancelled"
            elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
                done = True
            elif isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                reset, done = e.error_code, True
        cl.flush()
        if done:
            break
    return status, bytes(got), reset


def upload_loop(stop, tally, port, tls_port):
    body = random.Random(7).randbytes(1 << 20)
    sha1 = hashlib.sha1(body).hexdigest()
    turns = itertools.count(1)

    def once():
        i = next(turns)
        if i % 2:
            cl = Client(tls_port if i % 4 == 1 else port, tls=i % 4 == 1)
            status, got, reset = h2_fetch(cl, "/echo", "POST", body)
            cl.close()
        else:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("POST", "/echo", body=body)
            r = c.getresponse()
            status, got, reset = r.status, r.read(), None
            c.close()
        if status == 200 and sha1.encode() in got and reset is None:
            return None
        return f"status={status} reset={reset} {got[:120]!r}"
    repeat(stop, tally, "upload", 0.3, once, errors=(OSError, http.client.HTTPException))


def cancel_loop(stop, tally, port, digests):
    def once():
        cl = Client(port)
        st, got, how = h2_fetch(cl, "/f10m", read_limit=256 << 10)
        st2, small, reset = h2_fetch(cl, "/f1k")
        cl.close()
        if how == "cancelled" and st == 200 and st2 == 200 and \
                hashlib.sha256(small).hexdigest() == digests["f1k"] and reset is None:
            return None
        return f"{st} {how} / {st2} {len(small)} {reset}"
    repeat(stop, tally, "cancel", 0.5, once)


def slow_reader_loop(stop, tally, port, digests):
    def once():
        cl = Client(port)
        st, got, reset = h2_fetch(cl, "/f10m", rate=2 << 20)
        cl.close()
        if st == 200 and reset is None and hashlib.sha256(got).hexdigest() == digests["f10m"]:
            return None
        return f"{st} {len(got)} {reset}"
    repeat(stop, tally, "slow-reader", 0, once)


def fault_loop(stop, tally, port):
    """Hostile-origin faults; each has one right answer."""
    faults = [("/reset-mid-body-cl", "reset"), ("/reset-mid-head", 502),
              ("/many-headers", 502), ("/fewer-then-close", "reset")]
    i = 0
    while not stop.wait(12):
        path, want = faults[i % len(faults)]
        i += 1
        try:
            cl = Client(port)
            st, got, reset = h2_fetch(cl, path, authority="hostile.test")
            cl.close()
        except OSError as e:
            tally.add("fault", "unexpected", 1, f"{path}: {e!r}")
            continue
        if (want == "reset" and st == 200 and reset == 2) or (want == st and reset is None):
            tally.add("fault", "injected")
        else:
            tally.add("fault", "unexpected", 1, f"{path}: status={st} reset={reset}")


def reload_loop(stop, tally, gw):
    while not stop.wait(60):
        gw.send_signal(signal.SIGHUP)
        tally.add("reload", "ok")


# ---- sampling and the verdict --------------------------------------------------------------------

def origin_conns(admin):
    try:
        fams, _ = scrape(admin, timeout=5)
        return int(sample(fams, "h2gate_upstream_connections"))
    except Exception:  # noqa: BLE001 (a scrape during a reload may fail: the sample is skipped)
        return None


def chart(rows, png):
    tsv = png + ".dat"
    with open(tsv, "w") as f:
        for r in rows:
            f.write("\t".join(str(x) for x in r[:5]) + "\n")
    gp = ["set terminal pngcairo size 1200,800 font ',10'", f"set output '{png}'",
          "set multiplot layout 2,2 title 'h2gate soak'", "set grid", "set xlabel 'minutes'",
          "set key off", "set yrange [0:*]",
          "set title 'RSS (MiB)'", f"plot '{tsv}' using ($1/60):($2/1024) with linespoints",
          "set title 'CPU (% of one core)'", f"plot '{tsv}' using ($1/60):3 with linespoints",
          "set title 'open descriptors'", f"plot '{tsv}' using ($1/60):4 with linespoints",
          "set title 'origin connections'", f"plot '{tsv}' using ($1/60):5 with linespoints",
          "unset multiplot"]
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True, check=True)
    os.unlink(tsv)


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else 0.0


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else 0.0


def main():
    binary, out, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="soak-")
    www = os.path.join(work, "www")
    os.mkdir(www)
    digests = make_files(www)
    nginx = Nginx(www)
    app = ScriptedOrigin()
    hostile = HostileOrigin()
    h2c, tls, admin = free_port(), free_port(), free_port()
    cfg = os.path.join(work, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write(config(h2c, tls, admin, nginx.port, app.port, hostile.port))
    log = open(os.path.join(out, "gateway.log"), "wb")
    gw = subprocess.Popen([binary, "-c", cfg], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    wait_port("127.0.0.1", tls, proc=gw)
    wait_port("127.0.0.1", admin, proc=gw)
    pid = gw.pid
    tally = Tally()
    stop = threading.Event()
    threads = [
        threading.Thread(target=h2load_loop, args=(stop, tally, f"https://127.0.0.1:{tls}",
                                                   "h2load-tls", True)),
        threading.Thread(target=h2load_loop, args=(stop, tally, f"http://127.0.0.1:{h2c}",
                                                   "h2load-h2c", False)),
        threading.Thread(target=h1_download_loop, args=(stop, tally, h2c, digests)),
        threading.Thread(target=upload_loop, args=(stop, tally, h2c, tls)),
        threading.Thread(target=cancel_loop, args=(stop, tally, h2c, digests)),
        threading.Thread(target=slow_reader_loop, args=(stop, tally, h2c, digests)),
        threading.Thread(target=fault_loop, args=(stop, tally, h2c)),
        threading.Thread(target=reload_loop, args=(stop, tally, gw)),
    ]

    def guarded(t):
        run = t.run

        def wrapped():
            try:
                run()
            except Exception as e:  # noqa: BLE001 (a load thread's crash is a finding)
                tally.add(t.name, "unexpected", 1, f"thread crashed: {e!r}")
        t.run = wrapped
        t.daemon = True
        return t

    for t in threads:
        guarded(t).start()
    hz = os.sysconf("SC_CLK_TCK")
    rows = []  # (seconds, rss KiB, cpu %, fds, origin conns, requests)
    t0 = time.monotonic()
    last_cpu, last_t = rig.cpu_ticks(pid), t0
    alive = True
    end = t0 + minutes * 60
    print(f"soak: {minutes:g} min, gateway pid {pid}, h2c :{h2c}, tls :{tls}, admin :{admin}",
          flush=True)
    while time.monotonic() < end:
        time.sleep(min(10, max(0.1, end - time.monotonic())))
        if gw.poll() is not None or not os.path.exists(f"/proc/{pid}"):
            alive = False
            print(f"soak: the gateway exited ({gw.returncode})", flush=True)
            break
        now = time.monotonic()
        cpu = rig.cpu_ticks(pid)
        cpu_pct = 100.0 * (cpu - last_cpu) / hz / (now - last_t)
        last_cpu, last_t = cpu, now
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        oc = origin_conns(admin)
        ok, inj, bad = tally.totals()
        row = (round(now - t0), rss_kib(pid), round(cpu_pct, 1), fds, oc, ok + inj + bad)
        rows.append(row)
        print(f"soak {row[0]:5d}s  rss {row[1] / 1024:7.1f} MiB  cpu {row[2]:5.1f}%  "
              f"fds {fds:4d}  origin conns {oc if oc is not None else '-':>3}  "
              f"requests {ok + inj + bad} (injected faults {inj}, unexpected {bad})", flush=True)
    stop.set()
    for t in threads:
        t.join(timeout=150)
    ok, inj, bad = tally.totals()
    verdict = []
    after = [r for r in rows if r[0] >= 60]
    if not alive:
        verdict.append("FAIL: the gateway process exited")
    if len(after) >= 6:
        # the load moves RSS by a MiB or so from one sample to the next (10 MiB bodies in
        # flight or not): the medians of the first and last thirds are compared
        third = max(1, len(after) // 3)
        rss_first, rss_last = median(r[1] for r in after[:third]), \
            median(r[1] for r in after[-third:])
        growth = (rss_last - rss_first) / rss_first * 100
        verdict.append(f"{'ok' if growth <= 5 else 'FAIL'}: RSS {rss_first / 1024:.1f} MiB "
                       f"after minute 1, {rss_last / 1024:.1f} MiB at the end (medians of the "
                       f"first and last thirds: {growth:+.1f} %, at most +5 %)")
        for idx, name in ((3, "open descriptors"), (4, "origin connections")):
            a, b = mean(r[idx] for r in after[:third]), mean(r[idx] for r in after[-third:])
            flat = b <= a + max(0.10 * a, 8)
            verdict.append(f"{'ok' if flat else 'FAIL'}: {name} {a:.1f} in the first third, "
                           f"{b:.1f} in the last (flat: at most +max(10 %, 8))")
    else:
        verdict.append("FAIL: too short to judge (needs 2 minutes or more)")
    try:
        reloads = int(sample(scrape(admin)[0], "h2gate_config_reloads_total", result="ok"))
    except Exception:  # noqa: BLE001
        reloads = -1
    sent = tally.ok.get("reload", 0)
    verdict.append(f"{'ok' if reloads == sent else 'FAIL'}: {sent} reloads asked, {reloads} "
                   f"done (h2gate_config_reloads_total)")
    verdict.append(f"{'ok' if bad == 0 else 'FAIL'}: {ok + inj + bad} requests: {ok} ok, "
                   f"{inj} failed by injected faults as expected, {bad} unexpected")
    rig.stop_gateway(gw)
    log.close()
    nginx.stop()
    app.close()
    hostile.__exit__(None, None, None)
    with open(os.path.join(out, "soak.tsv"), "w") as f:
        f.write("seconds\trss_kib\tcpu_pct\tfds\torigin_conns\trequests\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    if rows:
        chart(rows, os.path.join(out, "soak.png"))
    summary = [f"soak of {minutes:g} minutes, {len(rows)} samples", *verdict,
               "by kind: ok " + repr(tally.ok) + ", injected " + repr(tally.injected) +
               ", unexpected " + repr(tally.unexpected)] + \
        (["unexpected failures (first 50):"] + tally.examples if tally.examples else [])
    rc = rig.finish(out, summary, verdict)
    print(f"soak: {out}/soak.png, {out}/soak.tsv, {out}/summary.txt, {out}/gateway.log")
    return rc


if __name__ == "__main__":
    sys.exit(main())
