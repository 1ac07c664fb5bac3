#!/usr/bin/env bash
# Run the integration suite against one h2gate binary and print `LABEL: P passed, F failed`.
# Usage: run_pytest.sh H2GATE_BIN LABEL [pytest args...]
set -u
bin=$1; label=$2; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
xml=$(mktemp --suffix=.xml)
cd "$root"
H2GATE_BIN="$bin" /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml="$xml" \
  tests/integration "$@" 2>&1 | sed 's/^/  /'
rc=${PIPESTATUS[0]}
/usr/bin/python3 - "$xml" "$label" "$rc" <<'PY'
import sys, xml.etree.ElementTree as ET
path, label, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
except Exception:
    tests, bad, skipped = 0, 0, 0
if rc not in (0, 1, 5) and bad == 0:
    bad = 1  # pytest itself broke (usage error, internal error, interrupted)
print(f"{label}: {tests - bad - skipped} passed, {bad} failed")
PY
rm -f "$xml"
