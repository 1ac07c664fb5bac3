#!/usr/bin/python3
"""What one page load of scripts/bench's `page` scenario costs a proxy, counted rather than timed.

On a shared machine the bench's CPU per page moves by more than the changes worth making; the
system calls a proxy makes per page, and (under callgrind) its user-space instructions per
shared object and its calls of a few functions, move much less. This driver sets up what
`scripts/bench` sets up for the page scenario (the same origin, bench/nginx.conf.in, with the
page's 60 files; the same certificate kind and TLS suite; the proxy's bench configuration from
bench/*.in), runs one proxy, loads the page LOADS times over TLS with scripts/lib/bench_page.py
(after WARM loads not counted) and prints the counts divided by the loads.

  page_counts.py [options] MODE

  MODE syscalls   system calls of the proxy by kind (perf stat on the syscalls tracepoints,
                  all threads; getsockopt(TCP_INFO) and setsockopt(TCP_NOTSENT_LOWAT) apart),
                  packets it transmits and receives in its own context (net_dev_xmit,
                  netif_receive_skb: on loopback a write the windows let through is sent,
                  and received by the peer's socket, right there), its context switches,
                  its CPU time (schedstat, and user/system ticks: timed, so noisy on a shared
                  machine) and page faults
  MODE strace     reads and writes by socket (origin or client side) with their sizes:
                  calls and bytes per page, and each origin response's reads (strace -f -yy;
                  strace slows the proxy, so the sizes lean a little larger than unstraced)
  MODE perf       where the proxy's time goes, sampled (perf record -e cpu-clock -g: no
                  hardware counters in a guest): per shared object and per symbol, kernel
                  included (timed: perf's own overhead inflates it; compare proxies in one run)
  MODE wakeups    whom the proxy wakes (sched_waking in its context) and how often it sleeps
                  itself (sched_switch away from it, by the state it left in): a paced
                  write round is a sleep and a wake-up besides its system calls
  MODE callgrind  the proxy under callgrind: user-space instructions per page per shared
                  object, the top functions, and calls per page of TLS and copy functions
                  (SSL_write*, SSL_read*, the TLS 1.3 record encryption, memcpy); callgrind
                  runs the proxy ~50x slower, so at 100 Mbit/s the proxy, not the link, is then
                  the bottleneck and write rounds differ from an unslowed run

Options: --target h2gate|haproxy|nginx-static (default h2gate), --h2gate PATH (default
build-rel/gateway/h2gate), --loads N (default 20), --warm N (default 2), --mbit N (default 100,
as BENCH_PAGE_MBIT; 0 no cap), --extra YAML (appended to h2gate's configuration, e.g.
'h2:\\n  notsent_lowat: 0'), --top N (functions listed in callgrind mode, default 25),
--keep DIR (keep the raw perf/strace/callgrind output there).

The proxy runs on CPU 0, the client and the origin on CPU 1, as in scripts/bench. Needs
nginx, openssl, perf (syscalls), strace, valgrind (callgrind) and haproxy for that target.
"""
import argparse
import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
CIPHER = "TLS_AES_128_GCM_SHA256"
POOL = 64
SYSCALLS = ("read readv recvfrom recvmsg pread64 write writev sendto sendmsg sendfile64 splice "
            "epoll_wait epoll_pwait epoll_pwait2 epoll_ctl poll ppoll getsockopt setsockopt "
            "accept accept4 connect socket close shutdown ioctl fcntl timerfd_settime "
            "clock_gettime clock_nanosleep nanosleep futex mmap munmap madvise brk mprotect "
            "getpid getrandom eventfd2 rt_sigprocmask").split()
TCP_INFO, TCP_NOTSENT_LOWAT, TCP_NODELAY = 11, 25, 1
CALLS = ("SSL_write", "SSL_write_ex", "SSL_read", "SSL_read_ex", "SSL_do_handshake",
         "tls13_enc", "ssl3_write_bytes", "ssl3_read_bytes", "BIO_write", "BIO_read",
         "memcpy", "__memcpy_avx_unaligned_erms", "__memmove_avx_unaligned_erms",
         "gw_tls_writev", "uv__io_poll", "uv__write", "uv__read", "malloc", "free")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def free_ports(n):
    out = subprocess.run([PY, os.path.join(ROOT, "scripts/lib/ports.py"), str(n)],
                         check=True, capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def wait_listen(port, proc, secs=120):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"page_counts: the process on port {port} exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"page_counts: nothing listens on {port}")


def subst(template, out, subs):
    text = open(os.path.join(ROOT, "bench", template)).read()
    for k, v in subs.items():
        text = text.replace(f"@{k}@", str(v))
    with open(out, "w") as f:
        f.write(text)


def thread_ids(pid):
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def cpu_ns(pid):
    total = 0
    for t in thread_ids(pid):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def ticks(pid):
    """(user, system) clock ticks of the process, all threads."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])


def faults(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[7]) + int(f[9])  # minflt, majflt


def load(port, n, mbit, quiet=False):
    r = subprocess.run(["taskset", "-c", "1", PY, os.path.join(ROOT, "scripts/lib/bench_page.py"),
                        "load", "127.0.0.1", str(port), "tls", str(n), str(mbit)],
                       capture_output=True, text=True, timeout=3600)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr
    if f"ok={n} " not in last:
        raise SystemExit(f"page_counts: a page load failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    if not quiet:
        print(last)
    return last


def count_events(pid, tmp, load, events, filtered=()):
    """Run load() while perf stat counts events of the proxy pid (all threads): the syscalls
    tracepoints of SYSCALLS this kernel has, the events named, then each (event, filter, name) of
    filtered again under its filter, counted as opt:name. Returns load()'s result, the counts by
    event and what the proxy used during the load: CPU ns (schedstat), page faults, user and
    system ticks (all timed, so noisy on a shared machine)."""
    args = ["taskset", "-c", "1", "perf", "stat", "-x,", "-o", tmp + "/perf.txt", "-p", str(pid)]
    for s in SYSCALLS:
        if os.path.exists(f"/sys/kernel/tracing/events/syscalls/sys_enter_{s}"):
            args += ["-e", f"syscalls:sys_enter_{s}"]
    for e in events:
        args += ["-e", e]
    for e, flt, _ in filtered:
        args += ["-e", e, "--filter", flt]
    perf = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attaches
    ns0, pf0, t0 = cpu_ns(pid), faults(pid), ticks(pid)
    result = load()
    ns1, pf1, t1 = cpu_ns(pid), faults(pid), ticks(pid)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    # perf prints the events in the order given: the filtered copies come last, rename them
    lines = open(tmp + "/perf.txt").read().splitlines()
    data = [ln.split(",") for ln in lines if ln and ln[0].isdigit() or ln.startswith("<not")]
    for parts, (_, _, name) in zip(data[len(data) - len(filtered):], filtered):
        parts[2] = "opt:" + name
    counts = collections.Counter()
    for parts in data:
        if len(parts) >= 3 and parts[0].strip().isdigit():
            counts[parts[2]] += int(parts[0])
        elif len(parts) >= 3 and parts[2].startswith("opt:"):
            counts[parts[2]] += 0  # <not counted>: listed as 0
    hz = os.sysconf("SC_CLK_TCK")
    used = {"cpu_ns": ns1 - ns0, "faults": pf1 - pf0, "user_us": (t1[0] - t0[0]) * 1e6 / hz,
            "system_us": (t1[1] - t0[1]) * 1e6 / hz}
    return result, counts, used


SC_RE = re.compile(r"^(\d+)\s+(\w+)\((\d+)<(TCP:\[[^\]]*\]|[^>]*)>(.*)\)\s+=\s+(-?\d+)")


def strace_calls(pid, tmp, load, origin_port, trace=None):
    """Run load() while strace -f -yy follows the proxy pid (only the calls of trace when given).
    Returns load()'s result and each line strace wrote as (side, call, return value, line): side
    origin or client for a TCP socket's call (by origin_port), other for another descriptor's;
    side and return None where the line is not a completed call on a descriptor."""
    out = tmp + "/strace.txt"
    args = ["strace", "-f", "-yy", "-s", "0", "-o", out, "-p", str(pid)]
    st = subprocess.Popen(args + (["-e", "trace=" + trace] if trace else []),
                          stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    result = load()
    st.send_signal(signal.SIGINT)
    st.wait()
    rows = []
    for line in open(out):
        m = SC_RE.match(line)
        if not m:
            rows.append((None, None, None, line))
            continue
        _, name, _, what, _, ret = m.groups()
        if "TCP" in what:
            side = "origin" if what.endswith(f":{origin_port}]") else "client"
        else:
            side = "other"
        rows.append((side, name, int(ret), line))
    return result, rows


def start_origin(a, port, fill):
    """The bench's origin (bench/nginx.conf.in) on port, CPU 1, its files written by
    fill(www folder); returns its process."""
    ngx = a.tmp + "/nginx"
    for d in ("www", "tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"):
        os.makedirs(f"{ngx}/{d}", exist_ok=True)
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(f"{a.tmp}/ngs/{d}", exist_ok=True)
    fill(ngx + "/www")
    subst("nginx.conf.in", ngx + "/nginx.conf", {"DIR": ngx, "PORT": port})
    return subprocess.Popen(["taskset", "-c", "1", "nginx", "-c", ngx + "/nginx.conf", "-p", ngx],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def proxy_args(a, op, tp, hp):
    """The certificate (a.tmp/cert.pem, key.pem, haproxy.pem) and the command line of a.target
    configured as scripts/bench does (bench/*.in) for the origin on op, TLS on tp, h2c on hp."""
    sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-days", "2", "-keyout", a.tmp + "/key.pem", "-out", a.tmp + "/cert.pem",
        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(a.tmp + "/haproxy.pem", "w") as f:
        f.write(open(a.tmp + "/cert.pem").read() + open(a.tmp + "/key.pem").read())
    subs = {"DIR": a.tmp, "TLS_PORT": tp, "H2C_PORT": hp, "ORIGIN_PORT": op,
            "CIPHER": CIPHER, "POOL": POOL, "PIPELINE": 1, "ROOT": a.tmp + "/nginx/www"}
    if a.target == "haproxy":
        subst("haproxy.cfg.in", a.tmp + "/haproxy.cfg", subs)
        return ["haproxy", "-f", a.tmp + "/haproxy.cfg"]
    if a.target == "nginx-static":
        subst("nginx-static.conf.in", a.tmp + "/nginx-static.conf", subs)
        return ["nginx", "-c", a.tmp + "/nginx-static.conf", "-p", a.tmp]
    conf = a.tmp + "/h2gate.yaml"
    subst("h2gate.yaml.in", conf, subs)
    if a.mode == "callgrind" and "h2:" not in a.extra:  # valgrind's pace
        with open(conf, "a") as f:
            f.write("h2:\n  settings_timeout: 600s\n")
    if a.extra:
        with open(conf, "a") as f:
            f.write(a.extra.replace("\\n", "\n") + "\n")
    sh([a.h2gate, "-t", "-c", conf], stdout=subprocess.DEVNULL)
    return [a.h2gate, "-c", conf]


def terminate(procs, secs):
    """Stop procs: SIGTERM, then SIGKILL to any still running after secs."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=secs)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop(procs, a):
    """Stop procs (SIGTERM, then SIGKILL after 10 s), copy the raw output to a.keep if asked
    and remove a.tmp."""
    terminate(procs, 10)
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        for f in os.listdir(a.tmp):
            if f.startswith(("cg.", "perf", "strace", "target")):
                shutil.copy(os.path.join(a.tmp, f), a.keep)
    shutil.rmtree(a.tmp, ignore_errors=True)


def report_syscalls(counts, pages, extra):
    """Print the perf stat counts per page (the filtered opt:... ones are in extra)."""
    calls, other = collections.Counter(), collections.Counter()
    for ev, c in counts.items():
        if ev.startswith("syscalls:sys_enter_"):
            calls[ev[len("syscalls:sys_enter_"):]] += c
        elif not ev.startswith("opt:"):
            other[ev.split(":", 1)[-1]] += c
    print(f"system calls per page ({pages} pages): {sum(calls.values()) / pages:.1f}")
    for name, c in sorted(calls.items(), key=lambda kv: -kv[1]):
        if c:
            print(f"  {name:<28} {c / pages:8.1f}")
    print("in its context, per page:")
    for name, c in sorted(other.items()):
        print(f"  {name:<28} {c / pages:8.1f}")
    for k, v in extra.items():
        print(f"  {k:<28} {v:8.1f}")


def run_syscalls(pid, port, a):
    # kernel work done in the proxy's context: on loopback a write that the windows let through
    # is transmitted (and received by the peer's socket) right there; what waits in the send
    # buffer goes out later, from the ACK processing of the reader's context
    summary, counts, used = count_events(
        pid, a.tmp, lambda: load(port, a.loads, a.mbit),
        ("net:net_dev_xmit", "net:netif_receive_skb", "sched:sched_switch"),
        # the same tracepoints again, filtered by option: TCP_INFO readings, NOTSENT_LOWAT settings
        (("syscalls:sys_enter_getsockopt", f"optname == {TCP_INFO}", "getsockopt(TCP_INFO)"),
         ("syscalls:sys_enter_setsockopt", f"optname == {TCP_NOTSENT_LOWAT}",
          "setsockopt(NOTSENT_LOWAT)")))
    extra = {k[4:]: c / a.loads for k, c in counts.items() if k.startswith("opt:")}
    extra["CPU us (timed)"] = used["cpu_ns"] / 1e3 / a.loads
    extra["user us (ticks)"] = used["user_us"] / a.loads
    extra["system us (ticks)"] = used["system_us"] / a.loads
    extra["page faults"] = used["faults"] / a.loads
    report_syscalls(counts, a.loads, extra)
    return summary


def run_perf(pid, port, a):
    data = a.tmp + "/perf.data"
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "20000", "-g",
                             "-o", data, "-p", str(pid)], stderr=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    summary = load(port, a.loads, a.mbit)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    for sort in ("dso", "dso,sym"):
        r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort,
                            "--stdio", "-g", "none", "--percent-limit", "0.7"],
                           capture_output=True, text=True)
        samples = re.search(r"of event 'cpu-clock'\s*\n# Event count \(approx.\): (\d+)",
                            r.stdout)
        if samples:
            ms = int(samples.group(1)) / 1e6
            print(f"cpu-clock: {ms * 1e3 / a.loads:,.0f} us per page (sampled, timed)")
        print("\n".join(ln for ln in r.stdout.splitlines() if ln and not ln.startswith("#")))
    return summary


def run_wakeups(pid, port, a):
    """Who the proxy wakes (sched_wakeup in its context: on loopback a write runs the
    receiver's softirq and wakes it; in a VM the wake-up of another CPU is an IPI, a VM exit)
    and how often it sleeps itself (sched_switch away from it)."""
    data = a.tmp + "/perf.sched"
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_waking", "-e",
                             "sched:sched_switch", "-o", data, "-p", str(pid)],
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    summary = load(port, a.loads, a.mbit)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    r = subprocess.run(["perf", "script", "-i", data, "-F", "event,trace"],
                       capture_output=True, text=True)
    woken = collections.Counter()
    sleeps = collections.Counter()
    for ln in r.stdout.splitlines():
        if "sched_waking" in ln:
            m = re.search(r"comm=(\S+)", ln) or re.search(r"\s(\S+):\d+ \[", ln)
            woken[m.group(1) if m else "?"] += 1
        elif "sched_switch" in ln:
            m = re.search(r"prev_state=(\S+)", ln) or re.search(r"\[\d+\] (\S+) ==>", ln)
            sleeps[m.group(1) if m else "?"] += 1
    print(f"per page ({a.loads} pages):")
    for k, v in woken.most_common():
        print(f"  wakes {k:<20} {v / a.loads:8.1f}")
    for k, v in sleeps.most_common():
        print(f"  switched out, state {k:<8} {v / a.loads:8.1f}")
    return summary


def run_strace(pid, port, a, origin_port):
    summary, rows = strace_calls(pid, a.tmp, lambda: load(port, a.loads, a.mbit), origin_port,
                                 "read,readv,recvfrom,recvmsg,write,writev,sendto,sendmsg,"
                                 "sendfile,splice,getsockopt,setsockopt,epoll_ctl,epoll_wait,"
                                 "epoll_pwait")
    calls = collections.Counter()
    nbytes = collections.Counter()
    sizes = collections.defaultdict(list)
    for side, name, ret, line in rows:
        if side is None:
            if " epoll_" in line:
                calls[("-", line.split()[1].split("(")[0])] += 1
            continue
        calls[(side, name)] += 1
        if name in ("read", "readv", "recvfrom", "recvmsg", "write", "writev", "sendto",
                    "sendmsg") and ret >= 0:
            nbytes[(side, name)] += ret
            sizes[(side, name)].append(ret)
    n = a.loads
    print(f"per page ({n} pages, under strace):")
    print(f"  {'side':<7} {'call':<12} {'calls':>8} {'bytes':>10} {'bytes/call':>10} "
          f"{'<=0 returns':>11}")
    for (side, name), c in sorted(calls.items()):
        b = nbytes.get((side, name), 0)
        zero = sum(1 for s in sizes.get((side, name), []) if s <= 0)
        print(f"  {side:<7} {name:<12} {c / n:8.1f} {b / n:10.0f} {b / max(c, 1):10.0f} "
              f"{zero / n:11.1f}")
    reads = sum(c for (s, nm), c in calls.items() if s == "origin" and nm.startswith(("read", "recv")))
    print(f"  origin reads per response: {reads / n / 60:.2f}")
    for (side, name), v in sorted(sizes.items()):
        if side == "other" or len(v) < n:
            continue
        v = sorted(v)
        q = [v[min(len(v) - 1, int(len(v) * f))] for f in (0.1, 0.5, 0.9)]
        print(f"  {side} {name} sizes p10/p50/p90/max: {q[0]}/{q[1]}/{q[2]}/{v[-1]}")
    return summary


def run_callgrind(proc_args, port, a):
    cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={a.tmp}/cg.%p"]
    p = subprocess.Popen(["taskset", "-c", "0"] + cg + proc_args,
                         stdout=open(a.tmp + "/target.log", "w"), stderr=subprocess.STDOUT)
    wait_listen(port, p)
    vpid = p.pid
    load(port, a.warm, a.mbit, quiet=True)
    sh(["callgrind_control", "-z", str(vpid)], stdout=subprocess.DEVNULL)
    summary = load(port, a.loads, a.mbit)
    sh(["callgrind_control", "-d", "page", str(vpid)], stdout=subprocess.DEVNULL)
    dumps = [f for f in os.listdir(a.tmp) if f.startswith(f"cg.{vpid}.")]
    # with threads, callgrind writes one file per thread (-<tid>); without, cg.PID.1
    excl = collections.defaultdict(int)
    calls = collections.Counter()
    total = 0
    for d in dumps:
        t, e, c = parse_callgrind(os.path.join(a.tmp, d))
        total += t
        for k, v in e.items():
            excl[k] += v
        calls.update(c)
    n = a.loads
    print(f"user-space instructions per page ({n} pages): {total / n:,.0f}")
    byobj = collections.defaultdict(int)
    for (ob, _), v in excl.items():
        byobj[(ob or "?").rsplit("/", 1)[-1]] += v
    for o, v in sorted(byobj.items(), key=lambda kv: -kv[1]):
        if v / n >= 1000:
            print(f"  {o[:40]:<40} {v / n:12,.0f}")
    print("top functions (exclusive instructions per page):")
    for (ob, fn), v in sorted(excl.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {v / n:10,.0f}  {fn} ({(ob or '?').rsplit('/', 1)[-1]})")
    print("calls per page:")
    for fn in CALLS:
        if calls.get(fn):
            print(f"  {fn:<32} {calls[fn] / n:8.1f}")
    terminate([p], 30)
    return summary


def cg_name(key, rest, objs, names):
    """The object (ob=, cob=) or function (fn=, cfn=) a callgrind dump's line names: "(id) name"
    defines id, "(id)" refers to it again (objs and names keep them)."""
    m = re.match(r"\((\d+)\)(?: (.*))?", rest)
    if not m:
        return rest
    table = objs if key.endswith("ob") else names
    return table.setdefault(m.group(1), m.group(2)) if m.group(2) else table[m.group(1)]


def parse_callgrind(path):
    """(total Ir, exclusive Ir per (object, function), calls per callee name) of a dump."""
    names, objs = {}, {}
    excl = collections.defaultdict(int)
    calls = collections.Counter()
    ob = fn = cfn = None
    total = 0
    skip = False
    ir = 0
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            ir = line.split()[1:].index("Ir")
        elif line.startswith("totals:") or line.startswith("summary:"):
            total = int(line.split()[1 + ir])
        elif line.startswith(("ob=", "fn=", "cob=", "cfn=", "fl=", "fi=", "fe=", "cfi=", "cfl=")):
            key, rest = line.rstrip("\n").split("=", 1)
            if key in ("fl", "fi", "fe", "cfi", "cfl"):
                continue
            val = cg_name(key, rest, objs, names)
            if key == "ob":
                ob = val
            elif key == "fn":
                fn = val
            elif key == "cfn":
                cfn = val
        elif line.startswith("calls="):
            calls[cfn] += int(line[6:].split()[0])
            skip = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip:
                skip = False
                continue
            parts = line.split()
            if len(parts) > 1 + ir:
                excl[(ob, fn)] += int(parts[1 + ir])
    return total, excl, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("syscalls", "strace", "callgrind", "perf", "wakeups"))
    ap.add_argument("--target", default="h2gate", choices=("h2gate", "haproxy", "nginx-static"))
    ap.add_argument("--h2gate", default=os.path.join(ROOT, "build-rel/gateway/h2gate"))
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--mbit", type=int, default=100)
    ap.add_argument("--extra", default="")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    a.tmp = tempfile.mkdtemp(prefix="h2gate-pc.")
    procs = []
    try:
        op, tp, hp = free_ports(3)
        origin = start_origin(a, op, lambda www: sh(
            [PY, os.path.join(ROOT, "scripts/lib/bench_page.py"), "files", www]))
        procs.append(origin)
        args = proxy_args(a, op, tp, hp)
        wait_listen(op, origin)
        print(f"{a.target}, {a.mode}, {a.loads} page loads over TLS at "
              f"{a.mbit or 'uncapped'} Mbit/s")
        if a.mode == "callgrind":
            run_callgrind(args, tp, a)
            return 0
        p = subprocess.Popen(["taskset", "-c", "0"] + args,
                             stdout=open(a.tmp + "/target.log", "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        wait_listen(tp, p)
        load(tp, a.warm, a.mbit, quiet=True)
        pid = p.pid  # haproxy -f (no -D) and nginx (master_process off) serve in it too
        if a.mode == "syscalls":
            run_syscalls(pid, tp, a)
        elif a.mode == "perf":
            run_perf(pid, tp, a)
        elif a.mode == "wakeups":
            run_wakeups(pid, tp, a)
        else:
            run_strace(pid, tp, a, op)
        return 0
    finally:
        stop(procs, a)


if __name__ == "__main__":
    sys.exit(main())
