#!/usr/bin/env bash
# Run the integration suite against one h2gate binary and print `LABEL: P passed, F failed`.
# Usage: run_pytest.sh H2GATE_BIN LABEL [pytest args...]
#
# Most tests wait (on timeouts, slow origins, process starts) more than they compute, so with
# pytest-xdist (python3-pytest-xdist) the suite runs in two passes: the tests not marked
# `serial` in INTEGRATION_JOBS workers at once (default 2; a module's tests stay on one
# worker), then the `serial` ones (rates, bandwidth, sub-second time bounds, RSS and CPU, h2load
# and other loads: tests/integration/conftest.py) in one process, alone. INTEGRATION_JOBS=1, or
# no xdist, runs everything in one pass as before. The count is over both passes' junit XML.
# Against an ASan or TSan build the tests' waits for a proof (a log line, a metric, a request at
# the origin) allow three times as long (tests/lib/procs.py TIMEOUT_FACTOR; the environment's
# H2GATE_TEST_TIMEOUT_FACTOR overrides it), and a failed test prints its gateways' log tails.
set -u
bin=$1; label=$2; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
jobs=${INTEGRATION_JOBS:-2}
if [ "$jobs" -gt 1 ] && ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
  echo "  (python3-pytest-xdist is not installed: one pass, one test at a time)"
  jobs=1
fi

xmls=(); rcs=()
run_pass() { # pytest args...: one pytest run, its junit XML and exit status kept for the count
  local xml
  xml=$(mktemp --suffix=.xml)
  H2GATE_BIN="$bin" /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml="$xml" \
    tests/integration "$@" 2>&1 | sed 's/^/  /'
  rcs+=("${PIPESTATUS[0]}"); xmls+=("$xml")
}
if [ "$jobs" -gt 1 ]; then
  echo "  -- pass 1: tests not marked serial, $jobs at a time [at ${SECONDS}s]"
  run_pass -n "$jobs" --dist loadfile -m "not serial" "$@"
  echo "  -- pass 2: tests marked serial, one at a time [at ${SECONDS}s]"
  run_pass -m serial "$@"
  echo "  -- done [at ${SECONDS}s]"
else
  run_pass "$@"
fi

/usr/bin/python3 - "$label" "${#xmls[@]}" "${xmls[@]}" "${rcs[@]}" <<'PY'
import sys, xml.etree.ElementTree as ET
label, n = sys.argv[1], int(sys.argv[2])
paths, rcs = sys.argv[3:3 + n], [int(r) for r in sys.argv[3 + n:3 + 2 * n]]
passed = bad = 0
for path, rc in zip(paths, rcs):
    try:
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root)
        t = sum(int(s.get("tests", 0)) for s in suites)
        b = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
        k = sum(int(s.get("skipped", 0)) for s in suites)
    except Exception:
        t, b, k = 0, 0, 0
    if rc not in (0, 1, 5) and b == 0:
        b = 1  # pytest itself broke (usage error, internal error, interrupted)
    passed, bad = passed + max(0, t - b - k), bad + b
print(f"{label}: {passed} passed, {bad} failed")
PY
rm -f "${xmls[@]}"
