"""What the long runs (soak.py, attack.py) share: the CPU a process and a core used, stopping
the gateway, and the summary file with its verdict."""
import os
import signal
import subprocess


def cpu_ticks(pid):
    """The process's user + system time in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def core_busy_ticks(cpu):
    """Clock ticks core cpu spent on anything but idle and iowait (/proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v) - v[3] - v[4]
    return 0


def stop_gateway(gw):
    """SIGTERM (a graceful stop), SIGKILL if it takes more than 30 s."""
    gw.send_signal(signal.SIGTERM)
    try:
        gw.wait(timeout=30)
    except subprocess.TimeoutExpired:
        gw.kill()


def finish(out, lines, verdict):
    """Write lines to OUT/summary.txt and print them; the exit status: 0 when every verdict
    line is "ok…" (or "info…", a measurement without a bound), else 1."""
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0 if all(v.startswith(("ok", "info")) for v in verdict) else 1
