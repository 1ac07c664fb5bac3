#!/usr/bin/env bash
# Run every libFuzzer target of a build dir for a bounded time over its seed corpus.
# Usage: run_fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Prints `fuzz: P passed, F failed` (one case per target).
set -u
build=$1; secs=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
pass=0; fail=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  name=$(basename "$bin"); corpus_name=${name#fuzz_}
  seeds="$root/tests/fuzz/corpus/$corpus_name"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/ 2>/dev/null
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/" "$work" >"$work.log" 2>&1; then
    pass=$((pass+1)); echo "  fuzz $name: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | awk '{print $2}') runs)"
    grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 | sed 's/^/    /'
  else
    fail=$((fail+1)); echo "  fuzz $name: FAIL"; tail -40 "$work.log" | sed 's/^/    | /'
  fi
  rm -rf "$work" "$work.log"
done
echo "fuzz: $pass passed, $fail failed"
