#!/usr/bin/env bash
# scripts/lib/bench_pool_ab.sh — h2gate's origin pool cap A/B (issue 42 item 4): does a wider
# pool (max_connections) pay at saturation? One nginx origin (bench/nginx.conf.in, CPU 1) and
# one h2gate per pool size (bench/h2gate.yaml.in with max_connections = max_idle = N and an
# admin listener, CPU 0), all started once; then short h2load runs of small's load (-c 32
# -m 16, GET 1 KiB) alternate between them, pair after pair, over TLS and h2c. Adjacent runs
# share the machine's state, so on a shared machine the paired ratios say more than any one
# run; run it in both orders (POOLS="64 512", then "512 64"): the second run of a pair can lose
# for that alone.
#
# Per run: req/s, h2load's mean, the gateway's and the origin's CPU µs per request, origin
# connections established at once (ss, 1 s into the run: every instance's, idle ones
# included) and the mean wait in h2gate's upstream queue (h2gate_upstream_queue_duration_
# seconds). Then per transport and pool against the first pool: medians and paired ratios.
#
# Environment: POOLS (default "64 512"), PAIRS (default 8), N (requests per run, default
# 60000), TRANSPORTS (default "tls h2c"), H2GATE (default build-rel/gateway/h2gate; scripts/
# bench builds it). Needs nginx, h2load, ss, curl (scripts/setup installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
H2GATE=${H2GATE:-$root/build-rel/gateway/h2gate}
POOLS=${POOLS:-64 512}; PAIRS=${PAIRS:-8}; N=${N:-60000}; TRANSPORTS=${TRANSPORTS:-tls h2c}
CIPHER=TLS_AES_128_GCM_SHA256
[ -x "$H2GATE" ] || { echo "bench_pool_ab: no $H2GATE (run scripts/bench once, or set H2GATE)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/h2gate-pool-ab.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

read -r OP < <(/usr/bin/python3 "$root/scripts/lib/ports.py" 1)
ngx=$tmp/nginx
mkdir -p "$ngx/www" "$ngx/tmp"
head -c 1024 /dev/urandom >"$ngx/www/1k.bin"
sed -e "s|@DIR@|$ngx|g" -e "s|@PORT@|$OP|g" "$root/bench/nginx.conf.in" >"$ngx/nginx.conf"
taskset -c 1 nginx -c "$ngx/nginx.conf" -p "$ngx" &
NPID=$!
pids+=("$NPID")
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -subj /CN=localhost 2>/dev/null
declare -A TLS H2C ADM PID
for pool in $POOLS; do
  read -r "TLS[$pool]" "H2C[$pool]" "ADM[$pool]" < <(/usr/bin/python3 "$root/scripts/lib/ports.py" 3)
  sed -e "s|@DIR@|$tmp|g" -e "s|@TLS_PORT@|${TLS[$pool]}|g" -e "s|@H2C_PORT@|${H2C[$pool]}|g" \
    -e "s|@ORIGIN_PORT@|$OP|g" -e "s|@CIPHER@|$CIPHER|g" -e "s|@POOL@|$pool|g" \
    -e "s|@PIPELINE@|1|g" "$root/bench/h2gate.yaml.in" >"$tmp/h$pool.yaml"
  printf 'admin:\n  address: 127.0.0.1:%s\n' "${ADM[$pool]}" >>"$tmp/h$pool.yaml"
  taskset -c 0 "$H2GATE" -c "$tmp/h$pool.yaml" 2>>"$tmp/h2gate.log" &
  PID[$pool]=$!
  pids+=("${PID[$pool]}")
done
sleep 1
queue() { # pool: the queue histogram's sum (s) and count
  curl -s "http://127.0.0.1:${ADM[$1]}/metrics" | awk '
    /^h2gate_upstream_queue_duration_seconds_sum/ {s = $2}
    /^h2gate_upstream_queue_duration_seconds_count/ {c = $2}
    END {print s + 0, c + 0}'
}
out=$tmp/runs.txt
echo "pair transport pool req/s mean_ms gw_cpu_us/req origin_cpu_us/req origin_conns queue_wait_ms" | tee "$out"
for k in $(seq 1 "$PAIRS"); do
  for t in $TRANSPORTS; do
    for pool in $POOLS; do
      if [ "$t" = tls ]; then url=https://127.0.0.1:${TLS[$pool]}/1k.bin
      else url=http://127.0.0.1:${H2C[$pool]}/1k.bin; fi
      read -r qs0 qc0 < <(queue "$pool")
      c0=$(ticks "${PID[$pool]}"); o0=$(ticks "$NPID")
      (sleep 1; ss -Htn state established "( sport = :$OP )" | wc -l >"$tmp/ss") &
      sspid=$!
      res=$(taskset -c 1 h2load -t 1 -n "$N" -c 32 -m 16 --tls13-ciphers="$CIPHER" "$url" 2>&1) || true
      wait "$sspid" || true
      c1=$(ticks "${PID[$pool]}"); o1=$(ticks "$NPID")
      read -r qs1 qc1 < <(queue "$pool")
      ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' <<<"$res")
      [ "${ok:-0}" = "$N" ] || { echo "# pair $k $t $pool: ${ok:-0}/$N 2xx, left out"; continue; }
      rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$res")
      mean=$(awk '/^time for request:/ {print $6}' <<<"$res")
      awk -v k="$k" -v t="$t" -v p="$pool" -v r="$rps" -v m="$mean" -v c=$((c1 - c0)) \
        -v o=$((o1 - o0)) -v n="$N" -v hz="$(getconf CLK_TCK)" -v s="$(cat "$tmp/ss")" \
        -v qs0="$qs0" -v qs1="$qs1" -v qc0="$qc0" -v qc1="$qc1" 'BEGIN {
          ms = m; if (m ~ /us$/) ms = m / 1000; else if (m ~ /ms$/) ms = m + 0; else ms = m * 1000
          q = (qc1 > qc0 ? (qs1 - qs0) * 1000 / (qc1 - qc0) : 0)
          printf "%d %s %d %.0f %.2f %.1f %.1f %d %.2f\n", k, t, p, r, ms, c * 1e6 / hz / n,
            o * 1e6 / hz / n, s, q }' | tee -a "$out"
    done
  done
done
/usr/bin/python3 - "$out" <<'PYEOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
by = {(int(k), t, int(p)): [float(v) for v in rest] for k, t, p, *rest in rows}
pools = list(dict.fromkeys(int(r[2]) for r in rows))
names = ("req/s", "mean ms", "gateway CPU µs/req", "origin CPU µs/req", "origin conns",
         "queue wait ms")
if len(pools) > 1:
    base = pools[0]
    for t in dict.fromkeys(r[1] for r in rows):
        for b in pools[1:]:
            ks = [k for (k, tt, p) in by if tt == t and p == b and (k, t, base) in by]
            if not ks:
                continue
            print(f"\n{t}: max_connections {b} against {base}, {len(ks)} pairs")
            for i, name in enumerate(names):
                va, vb = [by[(k, t, base)][i] for k in ks], [by[(k, t, b)][i] for k in ks]
                line = f"  {name}: median {st.median(va):,.1f} → {st.median(vb):,.1f}"
                if all(va) and i not in (4, 5):
                    ra = [y / x for x, y in zip(va, vb)]
                    line += (f", paired ratio median {st.median(ra):.3f} "
                             f"({min(ra):.2f}..{max(ra):.2f}), higher in "
                             f"{sum(1 for x in ra if x > 1)}/{len(ra)}")
                print(line)
PYEOF
