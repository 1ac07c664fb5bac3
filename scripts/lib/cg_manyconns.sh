#!/usr/bin/env bash
# scripts/lib/cg_manyconns.sh — what one manyconns request costs, counted by callgrind's cache
# simulation instead of timed (issue 42 item 2). On a shared machine the bench's CPU per request
# moves ±10 % between runs; callgrind's instructions and simulated LL misses move about ±2 %.
#
# One target (h2gate, or nginx serving the file itself: the floor) runs under
#   valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=1048576,16,64
# (LL of 1 MiB: a core's L2 on current x86; a guest's reported L3 is not a real one), behind the
# bench's configuration (bench/*.conf.in, bench/h2gate.yaml.in with the pool of scripts/bench,
# timeouts raised for valgrind's pace) and the bench's nginx origin, run natively. h2load -c 500
# -m 1 over TLS (the bench's manyconns) warms it up, then makes A and B requests, each with 500
# new connections; the cost of B - A requests, divided by B - A, is a request's without the
# handshakes. Printed: instructions, LL read (code and data) and LL write misses per request,
# in total and per shared object, then the functions with the most LL misses per request.
#
# Caveat: under callgrind a connection gets about one request a second, so each response
# brings a new Date and h2gate's HPACK encoder adds it to the connection's table (and, once
# the table is full, evicts and adds the fields that repeat): about 4 table_add per request
# here against one a second per connection in the bench (about 8 LL misses and 600-750
# instructions per request more than the bench pays). DATE=fixed sets Date to a constant
# (response_headers: set), which takes that out at the cost of the rule's own work.
#
# Environment: TARGET (h2gate, default, or nginx-static), H2GATE (default build-rel/gateway/h2gate,
# built as scripts/bench builds it and with debug info for function names: meson setup build-rel
# --buildtype=release -Db_lto=true -Ddebug=true), A and B (default 2500 and 7500), TOP (functions
# listed, default 25), TRANSPORT (tls, default, or h2c: the same load over the cleartext listener,
# for what TLS adds), DATE (fixed: see above), EXTRA (YAML appended to h2gate's configuration,
# @TMP@ the temporary folder: e.g. 'access_log: {path: @TMP@/access.log, format: combined}',
# the bench's h2gate-alog), KEEP (a folder to keep the callgrind files in),
# PRELOAD (a shared object put in h2gate's LD_PRELOAD, e.g. /usr/lib/x86_64-linux-gnu/
# libjemalloc.so.2: callgrind replaces no allocator, so the preloaded one's instructions count).
# Takes about two minutes. Needs valgrind, nginx, h2load, openssl, ss.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${TARGET:-h2gate}
H2GATE=${H2GATE:-$root/build-rel/gateway/h2gate}
A=${A:-2500}; B=${B:-7500}; TOP=${TOP:-25}; DATE=${DATE:-}; PRELOAD=${PRELOAD:-}
TRANSPORT=${TRANSPORT:-tls}
CIPHER=TLS_AES_128_GCM_SHA256
case $TARGET in h2gate|nginx-static) ;; *) echo "cg_manyconns: TARGET is h2gate or nginx-static" >&2; exit 1 ;; esac
case $TRANSPORT in tls|h2c) ;; *) echo "cg_manyconns: TRANSPORT is tls or h2c" >&2; exit 1 ;; esac
[ "$TARGET" != h2gate ] || [ -x "$H2GATE" ] || { echo "cg_manyconns: no $H2GATE" >&2; exit 1; }
[ "$B" -gt "$A" ] || { echo "cg_manyconns: B must be larger than A" >&2; exit 1; }
# shellcheck source=scripts/lib/cg_common.sh
. "$root/scripts/lib/cg_common.sh"
cg_start h2gate-cg
cg_origin

# shellcheck disable=SC2054 # the commas are valgrind's, inside one argument each
CG=(valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64
    --LL=1048576,16,64 "--callgrind-out-file=$tmp/cg.%p")
if [ "$TARGET" = h2gate ]; then
  cg_h2gate_config "$DATE"
  [ -z "$PRELOAD" ] || [ -r "$PRELOAD" ] || { echo "cg_manyconns: no $PRELOAD" >&2; exit 1; }
  pre=() # env LD_PRELOAD=..., before valgrind: it does not follow an exec of env
  [ -z "$PRELOAD" ] || pre=(env "LD_PRELOAD=$PRELOAD")
  "${pre[@]}" "${CG[@]}" "$H2GATE" -c "$tmp/h2gate.yaml" >"$tmp/target.log" 2>&1 &
else
  sed -e "s|@DIR@|$tmp|g" -e "s|@TLS_PORT@|$TP|g" -e "s|@H2C_PORT@|$HP|g" \
    -e "s|@CIPHER@|$CIPHER|g" -e "s|@ROOT@|$ngx/www|g" "$root/bench/nginx-static.conf.in" \
    >"$tmp/nginx-static.conf"
  "${CG[@]}" nginx -c "$tmp/nginx-static.conf" -p "$tmp" >"$tmp/target.log" 2>&1 &
fi
vp=$!
pids+=("$vp")
for _ in $(seq 120); do ss -ltn | grep -q "127.0.0.1:$TP " && break; sleep 1; done
ss -ltn | grep -q "127.0.0.1:$TP " || { echo "cg_manyconns: $TARGET did not listen" >&2; exit 1; }

url="https://127.0.0.1:$TP/1k.bin"
[ "$TRANSPORT" = tls ] || url="http://127.0.0.1:$HP/1k.bin"
load() { # requests, name: h2load, then check that every request got a 200
  h2load -c 500 -m 1 -n "$1" "$url" >"$tmp/h2load.$2" 2>&1 || true
  grep -q "status codes: $1 2xx" "$tmp/h2load.$2" ||
    { echo "cg_manyconns: run $2 did not get $1 answers:" >&2; grep -E "requests:|status" "$tmp/h2load.$2" >&2
      grep -v '^[=-][=-]' "$tmp/target.log" | tail -5 >&2; tail -5 "$ngx/error.log" >&2; exit 1; }
}
load 1000 warm
callgrind_control -z "$vp" >/dev/null
load "$A" a
callgrind_control -d a "$vp" >/dev/null
callgrind_control -z "$vp" >/dev/null
load "$B" b
callgrind_control -d b "$vp" >/dev/null

/usr/bin/python3 - "$tmp" "$vp" $((B - A)) "$TOP" "$TARGET" "$TRANSPORT" <<'EOF'
import collections, re, sys
tmp, pid, n, top, target, transport = sys.argv[1:3] + [int(a) for a in sys.argv[3:5]] + sys.argv[5:7]

def load(path):
    """Exclusive cost per (object, function) of a callgrind dump (names compressed)."""
    ev, names, objs, cost = None, {}, {}, collections.defaultdict(lambda: [0] * 9)
    ob = fn = None
    skip = False
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            ev = line.split()[1:]
        elif line.startswith("totals:"):
            cost["totals"] = [int(v) for v in line.split()[1:]]
        elif line.startswith(("ob=", "fn=", "cob=", "cfn=")):
            key, rest = line.rstrip("\n").split("=", 1)
            m = re.match(r"\((\d+)\)(?: (.*))?", rest)
            table = objs if key.endswith("ob") else names
            val = (table.setdefault(m.group(1), m.group(2)) if m.group(2) else table[m.group(1)]) if m else rest
            if key == "ob":
                ob = val
            elif key == "fn":
                fn = val
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip:
                skip = False
                continue
            r = cost[(ob, fn)]
            for i, v in enumerate(line.split()[1:]):
                r[i] += int(v)
    return ev, cost

ev, a = load(f"{tmp}/cg.{pid}.1")
_, b = load(f"{tmp}/cg.{pid}.2")
ix = {e: i for i, e in enumerate(ev)}
def per(k):
    x, y = a.get(k, [0] * 9), b[k]
    d = [(y[i] - x[i]) / n for i in range(len(ev))]
    return d[ix["Ir"]], d[ix["ILmr"]] + d[ix["DLmr"]], d[ix["DLmw"]]
tot = per("totals")  # callgrind's own; the rows below add up to about 97 % of its instructions
rows = {k: per(k) for k in b if k != "totals"}
print(f"{target} {transport}: per request (({n} more requests) / {n}): {tot[0]:,.0f} instructions, "
      f"{tot[1]:.1f} LL read misses, {tot[2]:.1f} LL write misses")
byobj = collections.defaultdict(lambda: [0.0] * 3)
for (ob, _), r in rows.items():
    for i in range(3):
        byobj[(ob or "?").rsplit("/", 1)[-1]][i] += r[i]
print(f"\n{'object':<32} {'Ir':>8} {'LL rd':>7} {'LL wr':>7}")
for o, r in sorted(byobj.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
    if abs(r[0]) >= 20 or abs(r[1]) + abs(r[2]) >= 0.5:
        print(f"{o[:32]:<32} {r[0]:>8.0f} {r[1]:>7.1f} {r[2]:>7.1f}")
print(f"\n{'LL rd':>7} {'LL wr':>7} {'Ir':>8}  function (object)")
for (ob, fn), r in sorted(rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
    print(f"{r[1]:>7.2f} {r[2]:>7.2f} {r[0]:>8.0f}  {fn} ({(ob or '?').rsplit('/', 1)[-1]})")
EOF
