#!/usr/bin/env python3
"""Attack soak: every abuse class the HTTP/2 engine limits, from many
connections at once for ATTACK_MINUTES, while legitimate clients keep loading.

Usage: attack.py H2GATE_BIN OUT_DIR MINUTES [CLASSES]

The gateway (one worker, default configuration but for the listeners) is pinned to CPU 0;
nginx, the legitimate load and the abusers to CPU 1, the abusers as SCHED_IDLE (on a real edge
they use their own machines, not the origin's or the clients'; see abuser()). Legitimate load: h2load, 4 clients over h2c and 2
over TLS at 20 requests/s each for 1 KiB and 64 KiB files, per-request latency from its
--log-file. First a baseline of 30 s without abusers, then the attack, then 15 s of quiet.

Abusers: each class runs ATTACK_CONNS (default 3) connections at a time, each one a fresh
connection that abuses until the gateway ends it, then the next (0.1 s later); each connection's
end is classified:
  rapid_reset      HEADERS + RST_STREAM, again and again       → GOAWAY ENHANCE_YOUR_CALM
  continuation     HEADERS without END_HEADERS, CONTINUATION…  → GOAWAY ENHANCE_YOUR_CALM
  hpack_bomb       a 4 KB dynamic-table entry referenced 20 times per request (80 KB decoded
                   from 20 bytes), 50 requests                  → 431 each (RFC 9113 §10.5.1)
  settings_flood   SETTINGS frames                              → GOAWAY ENHANCE_YOUR_CALM
  ping_flood       PING frames                                  → GOAWAY ENHANCE_YOUR_CALM
  empty_frames     empty DATA frames on an open stream          → GOAWAY ENHANCE_YOUR_CALM
  zero_window      SETTINGS_INITIAL_WINDOW_SIZE 0 and a 10 MiB GET, never a WINDOW_UPDATE
                                                                → RST_STREAM CANCEL (timeouts.body)
  slow_read        four 10 MiB GETs with wide windows, the socket not read
                                                                → RST_STREAM CANCEL (timeouts.body)
  slow_handshake   a TLS connection that never sends a ClientHello → closed (timeouts.handshake)
  slow_preface     the h2c preface one byte every 2 s           → closed (timeouts.first_request)
  slow_head        an HTTP/1.1 head one field every 2 s         → closed (timeouts.header)

Pass (exit 0): the legitimate p99 latency during the attack is at most 2 x the baseline's; no
legitimate request failed; every abuser connection ended as its class says; the gateway's RSS
peaked below 256 MiB and, 15 s after the attack, is within 20 % (or 8 MiB) of before it; the
process never exited. OUT_DIR gets summary.txt, the gateway log and the h2load logs."""
import multiprocessing as mp
import os
import random
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

import rig  # noqa: E402
from procs import Nginx, free_port, rss_kib, wait_port  # noqa: E402
from gwtest import PREFACE, RawH2, frame, settings, tls_listener  # noqa: E402

DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WU, CONT = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 1, 4
CALM, CANCEL = 0xB, 0x8
CONNS = int(os.environ.get("ATTACK_CONNS", "3"))


def lit(name_index, value):
    """A literal field without indexing, name from the static table (RFC 7541 §6.2.2)."""
    return bytes([name_index]) + bytes([len(value)]) + value


def req_block(path, method_byte=0x82):
    # :method GET (or 0x83 POST), :scheme http, :path, :authority localhost
    return bytes([method_byte, 0x86]) + lit(4, path) + lit(1, b"localhost")


class Conn(RawH2):
    """An abuser's connection (gwtest.RawH2) and how the gateway ended it."""

    def poll(self, timeout=0.0, streams=True):
        """Read what comes within timeout; returns the outcome seen so far or None."""
        self.read_for(timeout)
        return self.outcome(streams)

    def outcome(self, streams=True):
        """How the gateway ended it: a GOAWAY with an error code, else (with streams) the first
        RST_STREAM, else "closed" at EOF; None while none of these happened."""
        rst = None
        for t, _, sid, p in self.frames():
            if t == GOAWAY and int.from_bytes(p[4:8], "big") != 0:
                return f"goaway:{int.from_bytes(p[4:8], 'big')}"
            if t == RST and sid and rst is None:
                rst = f"rst:{int.from_bytes(p[:4], 'big')}"
        if streams and rst:
            return rst
        if self.eof:
            return "closed"
        return None

    def statuses(self):
        """:status of every response head (the gateway's HEADERS decoded in order, one frame
        each: its heads are small)."""
        import hpack
        dec = hpack.Decoder()
        out = []
        for t, flags, sid, p in self.frames():
            if t == HEADERS and flags & END_HEADERS:
                try:
                    h = dict(dec.decode(p))
                except Exception:  # noqa: BLE001
                    return out
                st = h.get(b":status") or h.get(":status")
                if st:
                    out.append(int(st))
        return out


def flood(conn, make, batch=50, limit=60.0):
    """Send make(i) frames in batches until the gateway ends the connection (stream resets on
    the way, REFUSED_STREAM for instance, do not stop a flood); how it ended it."""
    i = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        data = b"".join(make(i + k) for k in range(batch))
        i += batch
        ok = conn.send(data)
        o = conn.poll(0.0 if ok else 2.0, streams=False)
        if o:
            return o
        if not ok:
            return conn.poll(2.0, streams=False) or "send-failed"
    return "not-cut"


def a_rapid_reset(h2c, tls):
    c = Conn(h2c)
    return flood(c, lambda i: frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1,
                                    req_block(b"/f1k")) + frame(RST, 0, 2 * i + 1,
                                                                CANCEL.to_bytes(4, "big")))


def a_continuation(h2c, tls):
    c = Conn(h2c)
    c.send(frame(HEADERS, END_STREAM, 1, req_block(b"/f1k")))
    return flood(c, lambda i: frame(CONT, 0, 1, b"\x00" * 16000), batch=8)


def a_hpack_bomb(h2c, tls):
    c = Conn(h2c)
    # the value length 4000 as an HPACK integer: 127 + continuation bytes (RFC 7541 §5.1)
    n = 4000 - 127
    enc = bytearray()
    while n >= 128:
        enc.append(n % 128 + 128)
        n //= 128
    enc.append(n)
    entry = b"\x40\x03x-b\x7f" + bytes(enc) + b"v" * 4000
    first = req_block(b"/f1k") + entry
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, first))
    for k in range(1, 50):
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 2 * k + 1,
                     req_block(b"/f1k") + b"\xbe" * 20))  # index 62: the entry
        o = c.poll(0.0)
        if o and o.startswith("goaway"):
            return o
    c.poll(2.0)
    st = c.statuses()
    # the first request (one copy of the entry) is served; the 49 bombs get 431
    return "431" if st.count(431) == 49 else f"statuses:{sorted(set(st))}:{len(st)}"


def a_settings_flood(h2c, tls):
    return flood(Conn(h2c), lambda i: settings())


def a_ping_flood(h2c, tls):
    return flood(Conn(h2c), lambda i: frame(PING, 0, 0, i.to_bytes(8, "big")))


def a_empty_frames(h2c, tls):
    c = Conn(h2c)
    c.send(frame(HEADERS, END_HEADERS, 1, req_block(b"/f1k", 0x83)))
    return flood(c, lambda i: frame(DATA, 0, 1, b""))


def a_zero_window(h2c, tls):
    c = Conn(h2c, settings_pairs=[(0x4, 0)])
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, req_block(b"/f10m")))
    return c.poll(100.0) or "not-cut"


def a_slow_read(h2c, tls):
    c = Conn(h2c, settings_pairs=[(0x4, (1 << 31) - 1)])
    c.send(frame(WU, 0, 0, ((1 << 31) - 1 - 65535).to_bytes(4, "big")))
    for k in range(4):
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 2 * k + 1, req_block(b"/f10m")))
    time.sleep(90)  # the socket is not read: the gateway's writes stall
    return c.poll(10.0) or "not-cut"


def a_slow_handshake(h2c, tls):
    s = socket.create_connection(("127.0.0.1", tls), timeout=30)
    t0 = time.monotonic()
    try:
        d = s.recv(100)
    except (socket.timeout, OSError):
        d = b"?"
    s.close()
    return "closed" if d == b"" and time.monotonic() - t0 < 25 else "not-cut"


def a_slow_preface(h2c, tls):
    c = Conn(h2c, preface=False)
    for b in PREFACE:
        if not c.send(bytes([b])):
            break
        o = c.poll(2.0)
        if o:
            return o
    return c.poll(5.0) or "not-cut"


def a_slow_head(h2c, tls):
    s = socket.create_connection(("127.0.0.1", h2c), timeout=30)
    s.sendall(b"GET /f1k HTTP/1.1\r\nHost: localhost\r\n")
    got = b""
    for k in range(30):
        try:
            s.sendall(f"x-slow-{k}: 1\r\n".encode())
        except OSError:
            break
        r, _, _ = select.select([s], [], [], 2.0)
        if r:
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            got += d
            if not d:
                break
    s.close()
    if got.startswith(b"HTTP/1.1 408"):
        return "408"
    return "closed" if k < 29 else "not-cut"


CLASSES = {
    "rapid_reset": (a_rapid_reset, {f"goaway:{CALM}"}),
    "continuation": (a_continuation, {f"goaway:{CALM}"}),
    "hpack_bomb": (a_hpack_bomb, {"431", f"goaway:{CALM}"}),
    "settings_flood": (a_settings_flood, {f"goaway:{CALM}"}),
    "ping_flood": (a_ping_flood, {f"goaway:{CALM}"}),
    "empty_frames": (a_empty_frames, {f"goaway:{CALM}"}),
    "zero_window": (a_zero_window, {f"rst:{CANCEL}"}),
    "slow_read": (a_slow_read, {f"rst:{CANCEL}", "closed"}),
    "slow_handshake": (a_slow_handshake, {"closed"}),
    "slow_preface": (a_slow_preface, {"closed"}),
    "slow_head": (a_slow_head, {"408", "closed"}),
}


def abuser(name, h2c, tls, stop_at, q):
    """One class in its own process (no GIL shared with anyone): ATTACK_CONNS connections at a
    time."""
    os.sched_setaffinity(0, {1})
    # SCHED_IDLE, not a nice value: the abusers share CPU 1 with the origin and the legitimate
    # clients only because this rig has two cores. At nice 10 a running abuser still delayed
    # h2load's and nginx's wakeups by up to 5 ms (perf sched timehist), which the legitimate
    # latency then charged to the gateway; SCHED_IDLE yields the CPU at once, as abusers on
    # their own machines would. The gateway's core is not shared either way. With ATTACK_CONNS=10
    # the abusers keep CPU 1 98 % busy and their kernel time (loopback sends are processed in
    # the sender's system call) still delays nginx and h2load by up to 5 ms: a two-core rig
    # cannot then tell the gateway's latency from its own.
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    fn, _ = CLASSES[name]
    counts = {}
    lock = threading.Lock()

    def loop():
        while time.time() < stop_at:
            try:
                o = fn(h2c, tls)
            except Exception as e:  # noqa: BLE001 (an abuser that could not connect)
                o = f"error:{type(e).__name__}"
            with lock:
                counts[o] = counts.get(o, 0) + 1
            time.sleep(0.1)

    ts = [threading.Thread(target=loop, daemon=True) for _ in range(CONNS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(1, stop_at - time.time() + 120))
    q.put((name, counts))


def h2load(urls, clients, secs, log, tls):
    cmd = ["taskset", "-c", "1", "h2load", "-c", str(clients), "-m", "1", "--rps", "20", "-D",
           str(secs), "--warm-up-time", "0", "--log-file", log] + urls
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def legit(h2c, tls, secs, out, tag):
    """Both transports at once; (latencies in ms, failures, outputs)."""
    res = {}

    def run(name, base, clients):
        log = os.path.join(out, f"h2load-{tag}-{name}.log")
        p = h2load([f"{base}/f1k", f"{base}/f1k", f"{base}/f64k"], clients, secs, log,
                   name == "tls")
        lat, bad = [], 0
        with open(log) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    if not parts[1].startswith("2"):
                        bad += 1
                    lat.append(int(parts[2]) / 1000.0)
        res[name] = (lat, bad, p.stdout)

    ts = [threading.Thread(target=run, args=("h2c", f"http://127.0.0.1:{h2c}", 4)),
          threading.Thread(target=run, args=("tls", f"https://127.0.0.1:{tls}", 2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lat = res["h2c"][0] + res["tls"][0]
    bad = res["h2c"][1] + res["tls"][1]
    for name, (_, _, text) in res.items():
        import re
        m = re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
        if m:
            bad += int(m[2]) + int(m[3]) + int(m[4])
    return lat, bad


def cpu_ticks(pid):
    """(the process's clock ticks, CPU 1's busy ticks): where the time went."""
    return rig.cpu_ticks(pid), rig.core_busy_ticks(1)


def share(t0, t1, secs):
    """CPU shares (gateway on CPU 0, everything on CPU 1) between two cpu_ticks() samples."""
    hz = os.sysconf("SC_CLK_TCK")
    return (t1[0] - t0[0]) / hz / secs, (t1[1] - t0[1]) / hz / secs


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def main():
    binary, out, minutes = os.path.abspath(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    names = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else list(CLASSES)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="attack-")
    www = os.path.join(work, "www")
    os.mkdir(www)
    rnd = random.Random(3)
    for name, size in (("f1k", 1024), ("f64k", 65536), ("f10m", 10 << 20)):
        with open(os.path.join(www, name), "wb") as f:
            f.write(rnd.randbytes(size))
    nginx = Nginx(www)
    subprocess.run(["taskset", "-a", "-p", "-c", "1", str(nginx.proc.pid)],
                   stdout=subprocess.DEVNULL)
    h2c, tls = free_port(), free_port()
    cfg = os.path.join(work, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write("\n".join(["workers: 1", "log_level: warn", "listen:",
                           f"  - address: 127.0.0.1:{h2c}"] + tls_listener(tls) +
                          ["upstreams:", f"  static:\n    servers: [127.0.0.1:{nginx.port}]",
                           "routes:", "  - upstream: static"]) + "\n")
    log = open(os.path.join(out, "gateway.log"), "wb")
    gw = subprocess.Popen(["taskset", "-c", "0", binary, "-c", cfg], cwd=work, stdout=log,
                          stderr=subprocess.STDOUT)
    wait_port("127.0.0.1", tls, proc=gw)
    pid = gw.pid
    print(f"attack: gateway pid {pid} on CPU 0; baseline 30 s", flush=True)
    c0, t0 = cpu_ticks(pid), time.time()
    base_lat, base_bad = legit(h2c, tls, 30, out, "baseline")
    base_cpu = share(c0, cpu_ticks(pid), time.time() - t0)
    rss_before = rss_kib(pid)
    print(f"attack: baseline {len(base_lat)} requests, p50 {pct(base_lat, 50):.2f} ms, "
          f"p99 {pct(base_lat, 99):.2f} ms, failed {base_bad}; RSS {rss_before / 1024:.1f} MiB; "
          f"abusers: {', '.join(names)} for {minutes:g} min", flush=True)
    secs = int(minutes * 60)
    stop_at = time.time() + secs
    q = mp.Queue()
    procs = [mp.Process(target=abuser, args=(n, h2c, tls, stop_at, q), daemon=True)
             for n in names]
    for p in procs:
        p.start()
    peak = [rss_before]
    alive = [True]
    done = threading.Event()

    def sampler():
        t0 = time.time()
        while not done.wait(10):
            if gw.poll() is not None:
                alive[0] = False
                return
            r = rss_kib(pid)
            peak[0] = max(peak[0], r)
            print(f"attack {int(time.time() - t0):4d}s  rss {r / 1024:6.1f} MiB  "
                  f"(peak {peak[0] / 1024:.1f})", flush=True)

    st = threading.Thread(target=sampler, daemon=True)
    st.start()
    c0, t0 = cpu_ticks(pid), time.time()
    att_lat, att_bad = legit(h2c, tls, secs, out, "attack")
    att_cpu = share(c0, cpu_ticks(pid), time.time() - t0)
    results = {}
    for _ in procs:
        try:
            name, counts = q.get(timeout=240)
            results[name] = counts
        except Exception:  # noqa: BLE001
            break
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    time.sleep(15)
    done.set()
    rss_after = rss_kib(pid) if gw.poll() is None else 0
    alive_now = gw.poll() is None and alive[0]
    verdict = []
    b99, a99 = pct(base_lat, 99), pct(att_lat, 99)
    verdict.append(f"{'ok' if a99 <= 2 * b99 else 'FAIL'}: legitimate p99 {a99:.2f} ms during "
                   f"the attack, {b99:.2f} ms before (at most 2x); p50 {pct(att_lat, 50):.2f} / "
                   f"{pct(base_lat, 50):.2f} ms; {len(att_lat)} / {len(base_lat)} requests")
    verdict.append(f"info: gateway CPU {100 * att_cpu[0]:.1f} % during the attack, "
                   f"{100 * base_cpu[0]:.1f} % before; CPU 1 (origin, clients, abusers) busy "
                   f"{100 * att_cpu[1]:.1f} % during, {100 * base_cpu[1]:.1f} % before")
    verdict.append(f"{'ok' if att_bad + base_bad == 0 else 'FAIL'}: legitimate requests failed: "
                   f"{base_bad} before, {att_bad} during")
    for n in names:
        counts = results.get(n)
        if counts is None:
            verdict.append(f"FAIL: {n}: no report")
            continue
        want = CLASSES[n][1]
        wrong = {k: v for k, v in counts.items() if k not in want}
        verdict.append(f"{'ok' if not wrong and counts else 'FAIL'}: {n}: "
                       f"{sum(counts.values())} connections, ended {counts} "
                       f"(expected {sorted(want)})")
    grown = rss_after - rss_before
    verdict.append(f"{'ok' if peak[0] < 256 * 1024 else 'FAIL'}: RSS peak {peak[0] / 1024:.1f} MiB "
                   f"(at most 256 MiB)")
    verdict.append(f"{'ok' if grown <= max(0.2 * rss_before, 8192) else 'FAIL'}: RSS "
                   f"{rss_before / 1024:.1f} MiB before, {rss_after / 1024:.1f} MiB 15 s after")
    verdict.append(f"{'ok' if alive_now else 'FAIL'}: the gateway process "
                   f"{'kept running' if alive_now else 'exited'}")
    rig.stop_gateway(gw)
    nginx.stop()
    return rig.finish(out, verdict, verdict)


if __name__ == "__main__":
    sys.exit(main())
