#!/usr/bin/python3
"""Run every cmocka unit test registered in a meson build dir and count the cases.

Usage: run_unit.py BUILD_DIR LABEL
Prints one line per test binary and, last, `LABEL: P passed, F failed`. A binary that dies
without finishing its TAP plan counts its missing cases as failed (at least one).
The binaries run UNIT_JOBS at a time (default: the number of CPUs, as `meson test` does; one
registered with is_parallel false runs alone, after), most of their time waiting on timers;
the lines come out in meson's order.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys

build, label = sys.argv[1], sys.argv[2]
tests = json.loads(subprocess.check_output(["meson", "introspect", "--tests", build]))


def run_one(t):
    """(passed, failed, output) of one test binary."""
    env = dict(os.environ)
    env.update(t.get("env") or {})
    env["CMOCKA_MESSAGE_OUTPUT"] = "TAP"
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    timeout = t.get("timeout") or 120
    try:
        p = subprocess.run(t["cmd"], cwd=t.get("workdir") or build, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        out = p.stdout.decode("utf-8", "replace")
        rc = p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") + "\n# TIMEOUT\n"
        rc = -1
    ok = len(re.findall(r"^ok \d+", out, re.M))
    bad = len(re.findall(r"^not ok \d+", out, re.M))
    plan = re.search(r"^1\.\.(\d+)", out, re.M)
    planned = int(plan.group(1)) if plan else 0
    missing = max(planned - ok - bad, 0)
    if rc != 0 and bad == 0 and missing == 0:
        missing = 1  # crashed or sanitizer error after the last case
    return ok, bad + missing, out


jobs = int(os.environ.get("UNIT_JOBS") or os.cpu_count() or 1)
results = {}
with concurrent.futures.ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
    futures = {i: pool.submit(run_one, t) for i, t in enumerate(tests)
               if t.get("is_parallel", True)}
    results = {i: f.result() for i, f in futures.items()}
for i, t in enumerate(tests):  # those meson may not run beside others: alone, after
    if i not in results:
        results[i] = run_one(t)
passed = failed = 0
for i, t in enumerate(tests):
    ok, bad, out = results[i]
    passed += ok
    failed += bad
    status = "ok" if bad == 0 else "FAIL"
    print(f"  {label} {t['name']}: {ok} passed, {bad} failed [{status}]", flush=True)
    if bad:
        sys.stdout.write("".join("    | " + l + "\n" for l in out.splitlines()[-60:]))
print(f"{label}: {passed} passed, {failed} failed", flush=True)
