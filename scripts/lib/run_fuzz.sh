#!/usr/bin/env bash
# Run every libFuzzer target of a build dir for a bounded time over its seed corpus.
# Usage: run_fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Targets run FUZZ_JOBS at a time (default: the number of CPUs; each target is one process on
# one core). Prints each target's result in name order, then `fuzz: P passed, F failed` (one
# case per target).
set -u
build=$1; secs=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-$(nproc)}
results=$(mktemp -d)

run_one() { # binary: writes $results/NAME.ok or NAME.fail with the lines to print
  local bin=$1 name corpus_name seeds work
  name=$(basename "$bin"); corpus_name=${name#fuzz_}
  seeds="$root/tests/fuzz/corpus/$corpus_name"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/ 2>/dev/null
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$bin" -max_total_time="$secs" -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" "$work" \
       >"$work.log" 2>&1; then
    { echo "  fuzz $name: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" |
                                awk '{print $2}') runs)"
      grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 | sed 's/^/    /'; } >"$results/$name.ok"
  else
    { echo "  fuzz $name: FAIL"; tail -40 "$work.log" | sed 's/^/    | /'; } >"$results/$name.fail"
  fi
  rm -rf "$work" "$work.log"
}

running=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_one "$bin" &
  running=$((running + 1))
done
wait

pass=0; fail=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  name=$(basename "$bin")
  if [ -f "$results/$name.ok" ]; then
    pass=$((pass + 1)); cat "$results/$name.ok"
  else
    fail=$((fail + 1))
    if [ -f "$results/$name.fail" ]; then cat "$results/$name.fail"; else echo "  fuzz $name: FAIL (no result)"; fi
  fi
done
rm -rf "$results"
echo "fuzz: $pass passed, $fail failed"
