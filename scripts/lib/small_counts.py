#!/usr/bin/python3
"""What one request of scripts/bench's `small` scenario costs a proxy, counted rather than timed.

On a shared machine the bench's CPU per small request moves ±8-15 % between runs; the system
calls a proxy makes per request, and its user-space instructions under callgrind, move much
less. This driver sets up what `scripts/bench` sets up for `small` (the bench's origin,
bench/nginx.conf.in, serving a 1 KiB file; the proxy's bench configuration from bench/*.in, pool
64; the same certificate kind and TLS suite), runs one proxy, warms it with WARM requests, then
drives it with small's load (h2load -c 32 -m 16 -n N, over h2c or TLS) and prints the counts
divided by the requests.

  small_counts.py [options] MODE

  MODE syscalls   system calls of the proxy by kind (perf stat on the syscalls tracepoints,
                  all threads), its context switches, page faults and CPU time (schedstat:
                  timed, so noisy on a shared machine) per request
  MODE strace     reads and writes by socket (origin or client side): calls and bytes per
                  request (strace -f -yy; strace slows the proxy, so more requests arrive per
                  read than unstraced)
  MODE callgrind  the proxy under callgrind: user-space instructions per request, per shared
                  object, and the top functions by exclusive and by inclusive instructions.
                  Two runs of A and B requests; the difference of their costs divided by B - A
                  is a request's. Callgrind runs the proxy ~50x slower, so more requests wait
                  per read than in a native run: compare proxies and builds in this mode only
                  with each other.

Options: --target h2gate|haproxy|nginx-static (default h2gate), --h2gate PATH (default
build-rel/gateway/h2gate, as scripts/bench builds it: meson setup build-rel --buildtype=release
-Db_lto=true, with -Ddebug=true for function names), --transport h2c|tls (default h2c), -n N
(requests, default 100000; in callgrind mode B, with A = N / 4), --warm N (default 5000),
--extra YAML (appended to h2gate's configuration), --top N (functions listed in callgrind mode,
default 30), --cache (callgrind mode: simulate the caches as scripts/lib/cg_manyconns.sh does
and print the misses per request), --keep DIR.

The proxy runs on CPU 0, the client and the origin on CPU 1, as in scripts/bench. Needs nginx,
openssl, h2load, perf (syscalls), strace, valgrind (callgrind) and haproxy for that target.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_counts as pc  # noqa: E402  (the origin, configurations and perf helpers)

ROOT = pc.ROOT


def h2load(url, n, quiet=False):
    r = subprocess.run(["taskset", "-c", "1", "h2load", "-t", "1", "-c", "32", "-m", "16",
                        "-n", str(n), f"--tls13-ciphers={pc.CIPHER}", url],
                       capture_output=True, text=True, timeout=3600)
    if f"status codes: {n} 2xx" not in r.stdout:
        raise SystemExit(f"small_counts: not every request got a 2xx:\n{r.stdout[-1500:]}"
                         f"{r.stderr[-500:]}")
    if not quiet:
        m = re.search(r"finished in [^\n]*", r.stdout)
        print(m.group(0) if m else "")


def run_syscalls(pid, url, a):
    # kernel work done in the proxy's context: on loopback a write that the windows let through
    # is transmitted (and received by the peer's socket) right there, and wakes the peer
    kinds = (("sched:sched_switch", "context switches"), ("sched:sched_waking", "wake-ups"),
             ("net:net_dev_xmit", "packets sent"), ("net:netif_receive_skb", "packets received"))
    _, other, used = pc.count_events(pid, a.tmp, lambda: h2load(url, a.n),
                                     ["raw_syscalls:sys_enter"] + [ev for ev, _ in kinds])
    calls = collections.Counter()
    for ev, c in other.items():
        if ev.startswith("syscalls:sys_enter_"):
            calls[ev[len("syscalls:sys_enter_"):]] += c
    n = a.n
    print(f"system calls per request ({n} requests): {other['raw_syscalls:sys_enter'] / n:.3f} "
          f"(the named ones: {sum(calls.values()) / n:.3f})")
    for name, c in sorted(calls.items(), key=lambda kv: -kv[1]):
        if c:
            print(f"  {name:<28} {c / n:8.3f}")
    for ev, what in kinds:
        print(f"  {what:<28} {other[ev] / n:8.3f}")
    print(f"  {'page faults':<28} {used['faults'] / n:8.3f}")
    print(f"  {'CPU us (timed)':<28} {used['cpu_ns'] / 1e3 / n:8.2f}")
    print(f"  {'user us (ticks, timed)':<28} {used['user_us'] / n:8.2f}")
    print(f"  {'system us (ticks, timed)':<28} {used['system_us'] / n:8.2f}")


def run_strace(pid, url, a, origin_port):
    _, rows = pc.strace_calls(pid, a.tmp, lambda: h2load(url, a.n), origin_port)
    calls, nbytes, eagain = collections.Counter(), collections.Counter(), collections.Counter()
    for side, name, ret, line in rows:
        if side is None:
            w = line.split()
            if len(w) > 1 and "(" in w[1]:
                calls[("-", w[1].split("(")[0])] += 1
            continue
        calls[(side, name)] += 1
        if ret > 0 and name in ("read", "readv", "recvfrom", "recvmsg", "write", "writev",
                                "sendto", "sendmsg"):
            nbytes[(side, name)] += ret
        if "EAGAIN" in line:
            eagain[(side, name)] += 1
    n = a.n
    print(f"per request ({n} requests, under strace):")
    print(f"  {'side':<7} {'call':<14} {'calls':>8} {'bytes':>8} {'bytes/call':>10} {'EAGAIN':>7}")
    for (side, name), c in sorted(calls.items()):
        b = nbytes.get((side, name), 0)
        print(f"  {side:<7} {name:<14} {c / n:8.3f} {b / n:8.0f} {b / max(c, 1):10.0f} "
              f"{eagain[(side, name)] / n:7.3f}")


def cg_load(path):
    """{(object, function): [exclusive Ir, inclusive Ir]} and the total of a callgrind dump."""
    names, objs = {}, {}
    cost = collections.defaultdict(lambda: [0, 0])
    ob = fn = None
    total = []
    call = False
    ir = 0
    events = []
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            events = line.split()[1:]
            ir = events.index("Ir")
        elif line.startswith("totals:"):
            total = [int(v) for v in line.split()[1:]]
        elif line.startswith(("ob=", "fn=", "cob=", "cfn=")):
            key, rest = line.rstrip("\n").split("=", 1)
            val = pc.cg_name(key, rest, objs, names)
            if key == "ob":
                ob = val
            elif key == "fn":
                fn = val
        elif line.startswith("calls="):
            call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            v = int(parts[1 + ir]) if len(parts) > 1 + ir else 0
            if call:  # the call's inclusive cost: the caller's inclusive, not its exclusive
                call = False
                cost[(ob, fn)][1] += v
                continue
            cost[(ob, fn)][0] += v
            cost[(ob, fn)][1] += v
    return dict(zip(events, total)), cost


def run_callgrind(proc_args, port_url, a):
    cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={a.tmp}/cg.%p"]
    if a.cache:  # as scripts/lib/cg_manyconns.sh: a 1 MiB LL, a core's L2 on current x86
        cg += ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64"]
    port, url = port_url
    p = subprocess.Popen(["taskset", "-c", "0"] + cg + proc_args,
                         stdout=open(a.tmp + "/target.log", "w"), stderr=subprocess.STDOUT)
    try:
        pc.wait_listen(port, p)
        vpid = p.pid
        na, nb = a.n // 4, a.n
        h2load(url, a.warm, quiet=True)
        pc.sh(["callgrind_control", "-z", str(vpid)], stdout=subprocess.DEVNULL)
        h2load(url, na, quiet=True)
        pc.sh(["callgrind_control", "-d", "a", str(vpid)], stdout=subprocess.DEVNULL)
        pc.sh(["callgrind_control", "-z", str(vpid)], stdout=subprocess.DEVNULL)
        h2load(url, nb, quiet=True)
        pc.sh(["callgrind_control", "-d", "b", str(vpid)], stdout=subprocess.DEVNULL)
        ta, ca = cg_load(f"{a.tmp}/cg.{vpid}.1")
        tb, cb = cg_load(f"{a.tmp}/cg.{vpid}.2")
    finally:
        pc.terminate([p], 60)
    n = nb - na
    print(f"{a.target} {a.transport}: user-space instructions per request "
          f"(({nb} - {na} requests) / {n}): {(tb['Ir'] - ta['Ir']) / n:,.0f}")
    if "ILmr" in tb:
        d = {e: (tb[e] - ta[e]) / n for e in tb}
        print(f"  LL read misses {d['ILmr'] + d['DLmr']:.1f} (code {d['ILmr']:.1f}), LL write "
              f"misses {d['DLmw']:.1f}, D1 misses {d['D1mr'] + d['D1mw']:.1f}, I1 misses "
              f"{d['I1mr']:.1f} per request")
    per = {k: [(cb[k][i] - ca.get(k, [0, 0])[i]) / n for i in (0, 1)] for k in cb}
    byobj = collections.defaultdict(float)
    for (ob, _), v in per.items():
        byobj[(ob or "?").rsplit("/", 1)[-1]] += v[0]
    for o, v in sorted(byobj.items(), key=lambda kv: -kv[1]):
        if abs(v) >= 50:
            print(f"  {o[:40]:<40} {v:10,.0f}")
    print("top functions, exclusive instructions per request:")
    for (ob, fn), v in sorted(per.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"  {v[0]:8,.0f}  {fn} ({(ob or '?').rsplit('/', 1)[-1]})")
    print("top functions of the proxy's own code, inclusive instructions per request:")
    own = [(k, v) for k, v in per.items() if k[0] and not re.search(r"\.so", k[0])]
    for (ob, fn), v in sorted(own, key=lambda kv: -kv[1][1])[:a.top]:
        print(f"  {v[1]:8,.0f}  {fn}")


def write_1k(www):
    with open(www + "/1k.bin", "wb") as f:
        f.write(os.urandom(1024))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("syscalls", "strace", "callgrind"))
    ap.add_argument("--target", default="h2gate", choices=("h2gate", "haproxy", "nginx-static"))
    ap.add_argument("--h2gate", default=os.path.join(ROOT, "build-rel/gateway/h2gate"))
    ap.add_argument("--transport", default="h2c", choices=("h2c", "tls"))
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--warm", type=int, default=5000)
    ap.add_argument("--extra", default="")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--keep", default="")
    ap.add_argument("--cache", action="store_true", help="callgrind's cache simulation")
    a = ap.parse_args()
    a.tmp = tempfile.mkdtemp(prefix="h2gate-sc.")
    procs = []
    try:
        op, tp, hp = pc.free_ports(3)
        origin = pc.start_origin(a, op, write_1k)
        procs.append(origin)
        args = pc.proxy_args(a, op, tp, hp)
        pc.wait_listen(op, origin)
        port = tp if a.transport == "tls" else hp
        url = f"{'https' if a.transport == 'tls' else 'http'}://127.0.0.1:{port}/1k.bin"
        print(f"{a.target}, {a.mode}, small over {a.transport} (h2load -c 32 -m 16)")
        if a.mode == "callgrind":
            run_callgrind(args, (port, url), a)
            return 0
        p = subprocess.Popen(["taskset", "-c", "0"] + args,
                             stdout=open(a.tmp + "/target.log", "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        pc.wait_listen(port, p)
        h2load(url, a.warm, quiet=True)
        if a.mode == "syscalls":
            run_syscalls(p.pid, url, a)
        else:
            run_strace(p.pid, url, a, op)
        return 0
    finally:
        pc.stop(procs, a)

if __name__ == "__main__":
    sys.exit(main())
