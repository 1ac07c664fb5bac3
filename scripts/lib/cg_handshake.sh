#!/usr/bin/env bash
# scripts/lib/cg_handshake.sh — what one TLS 1.3 handshake (a new connection, one h2 GET of
# 1 KiB) costs the server in user-space instructions, counted by callgrind instead of timed
# (issue 42 item 3). On the shared machine the bench's handshake and resume scenarios move
# ±7-15 % between runs; callgrind's instruction counts move well under 1 %.
#
# One target (h2gate, nginx as a proxy: the bench's nginx peer, nginx serving the file
# itself, or h2o: the bench's h2o peer) runs under `valgrind --tool=callgrind` behind the
# bench's configuration (bench/*.conf.in, timeouts raised for valgrind's pace; h2o's own last
# 300 s), the same certificate (ECDSA P-256) and suite, with the bench's nginx origin run natively. scripts/lib/hsload.c makes the
# connections (MODE=resume: each client offers the ticket of its previous connection). A warm
# run, then A and B connections, each run over C clients: a run's first connection per client
# is a full handshake in both, so the cost of B - A connections divided by B - A is that of a
# full (MODE=full) or a resumed (MODE=resume) handshake with its one request. Printed:
# instructions per handshake in total, per shared object, and the functions with the most
# (exclusive); with KEEP, the callgrind files stay for callgrind_annotate --inclusive=yes.
#
# h2o signs in a child process (neverbleed), which callgrind_control cannot reach: its counts,
# written at its exit, are added per connection it served (start-up included).
#
# Then, with NATIVE=1 (default), the same target runs without valgrind for N connections:
# the minor page faults, the voluntary context switches and the system calls (strace -c -f,
# counted, not timed; those that failed, e.g. EAGAIN, beside) per handshake, of the target's
# processes: what the instructions above do not show (the kernel's share, the heap's grow and
# trim). The context switches depend on the pace (a worker that keeps up sleeps more).
#
# Environment: TARGET (h2gate, default, nginx-proxy, nginx-static or h2o), MODE (full,
# default, or resume), H2GATE (default build-rel/gateway/h2gate), A and B (default 100 and 400), C
# (clients, default 4), TOP (functions, default 30), KEEP (a folder for the callgrind files),
# NATIVE (1: the native counts too, 0: not), N (native connections, default 3000), ACME
# (h2gate's listener takes its certificate from the ACME store, `tls: {acme: [localhost]}`,
# the ACME server unreachable, each certificate in a context of its own switched to at each
# ClientHello (SSL_set_SSL_CTX): `stand-in`,
# the store's self-signed P-256 certificate; `stored`, the same certificate and key as the
# others, found in the ACME state folder at start as an issued one is), PRELOAD
# (a shared object put in h2gate's LD_PRELOAD, e.g. /usr/lib/x86_64-linux-gnu/libjemalloc.so.2:
# callgrind replaces no allocator, so the preloaded one's instructions count).
# Needs valgrind, nginx, openssl, ss, strace, cc and libssl-dev (builds build-rel/hsload).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${TARGET:-h2gate}
MODE=${MODE:-full}
H2GATE=${H2GATE:-$root/build-rel/gateway/h2gate}
A=${A:-100}; B=${B:-400}; C=${C:-4}; TOP=${TOP:-30}; NATIVE=${NATIVE:-1}; N=${N:-3000}
PRELOAD=${PRELOAD:-}
ACME=${ACME:-}
PRE=() # env LD_PRELOAD=..., before valgrind: it does not follow an exec of env
CIPHER=TLS_AES_128_GCM_SHA256
case $TARGET in h2gate|nginx-proxy|nginx-static|h2o) ;; *)
  echo "cg_handshake: TARGET is h2gate, nginx-proxy, nginx-static or h2o" >&2; exit 1 ;; esac
case $MODE in full|resume) ;; *) echo "cg_handshake: MODE is full or resume" >&2; exit 1 ;; esac
[ "$TARGET" != h2gate ] || [ -x "$H2GATE" ] || { echo "cg_handshake: no $H2GATE" >&2; exit 1; }
[ "$B" -gt "$A" ] || { echo "cg_handshake: B must be larger than A" >&2; exit 1; }
HSLOAD=$root/build-rel/hsload
mkdir -p "$root/build-rel"
cc -O2 -Wall -Wextra -Werror -o "$HSLOAD" "$root/scripts/lib/hsload.c" -lssl -lcrypto
# shellcheck source=scripts/lib/cg_common.sh
. "$root/scripts/lib/cg_common.sh"
cg_start h2gate-cghs
cg_origin

case $TARGET in
  h2gate)
    cg_h2gate_config ""
    case $ACME in '') ;; stand-in|stored) # port 9 (discard) refuses: no order ever completes
      sed -i -e "s|^      certificate: .*|      acme: [localhost]|" -e "/^      key: /d" "$tmp/h2gate.yaml"
      printf 'acme:\n  directory: http://127.0.0.1:9/directory\n  state: %s/acme\n' "$tmp" \
        >>"$tmp/h2gate.yaml"
      "$H2GATE" -t -c "$tmp/h2gate.yaml" >/dev/null
      if [ "$ACME" = stored ]; then # the name set's folder: FIRSTNAME-(sha256 of "NAME\n")[0:6]
        d=$tmp/acme/localhost-$(printf 'localhost\n' | sha256sum | cut -c1-12)
        install -d -m 0700 "$tmp/acme" "$d"
        cp "$tmp/cert.pem" "$d/cert.pem"
        install -m 0600 "$tmp/key.pem" "$d/key.pem"
      fi ;;
      *) echo "cg_handshake: ACME is stand-in or stored" >&2; exit 1 ;;
    esac
    [ -z "$PRELOAD" ] || [ -r "$PRELOAD" ] || { echo "cg_handshake: no $PRELOAD" >&2; exit 1; }
    [ -z "$PRELOAD" ] || PRE=(env "LD_PRELOAD=$PRELOAD")
    CMD=("$H2GATE" -c "$tmp/h2gate.yaml") ;;
  nginx-proxy|nginx-static)
    sed -e "s|@DIR@|$tmp|g" -e "s|@TLS_PORT@|$TP|g" -e "s|@H2C_PORT@|$HP|g" \
      -e "s|@ORIGIN_PORT@|$OP|g" -e "s|@POOL@|64|g" -e "s|@CIPHER@|$CIPHER|g" \
      -e "s|@ROOT@|$ngx/www|g" "$root/bench/$TARGET.conf.in" >"$tmp/$TARGET.conf"
    CMD=(nginx -c "$tmp/$TARGET.conf" -p "$tmp") ;;
  h2o) # one thread, as in scripts/bench; its timeouts (300 s) outlast valgrind's pace. Under
    # valgrind it stays root (user: root): after a switch to nobody, vgdb (callgrind_control)
    # leaves it stopped. The native counts below are of the bench's configuration.
    sed -e "s|@DIR@|$tmp|g" -e "s|@TLS_PORT@|$TP|g" -e "s|@H2C_PORT@|$HP|g" \
      -e "s|@ORIGIN_PORT@|$OP|g" "$root/bench/h2o.conf.in" >"$tmp/h2o.conf"
    { cat "$tmp/h2o.conf"; echo "user: root"; } >"$tmp/h2o-cg.conf"
    CGCMD=(h2o -c "$tmp/h2o-cg.conf")
    CMD=(h2o -c "$tmp/h2o.conf") ;;
esac

args=(--cipher "$CIPHER" --size 1024)
[ "$MODE" = resume ] && args+=(--resume)
hs() { # connections, name: hsload, then check every connection was answered (and resumed)
  "$HSLOAD" "${args[@]}" 127.0.0.1 "$TP" /1k.bin "$1" "$C" >"$tmp/hs.$2" 2>&1 || true
  local out; out=$(cat "$tmp/hs.$2")
  case $out in *" ok=$1 "*) ;; *) echo "cg_handshake: run $2: $out" >&2; exit 1 ;; esac
  if [ "$MODE" = resume ]; then
    case $out in *" resumed=$(($1 - C)) "*) ;; *)
      echo "cg_handshake: run $2 did not resume every connection: $out" >&2; exit 1 ;; esac
  fi
}
listening() {
  for _ in $(seq 120); do ss -ltn | grep -q "127.0.0.1:$TP " && return 0; sleep 1; done
  echo "cg_handshake: $TARGET did not listen" >&2; exit 1
}

[ -n "${CGCMD+set}" ] || CGCMD=("${CMD[@]}")
"${PRE[@]}" valgrind --tool=callgrind "--callgrind-out-file=$tmp/cg.%p" "${CGCMD[@]}" >"$tmp/target.log" 2>&1 &
vp=$!
pids+=("$vp")
listening
if [ -n "$ACME" ]; then # the certificate served is the one meant
  fp() { openssl x509 -noout -fingerprint -sha256; }
  got=$(openssl s_client -connect "127.0.0.1:$TP" -servername localhost </dev/null 2>/dev/null | fp)
  want=$(fp <"$tmp/cert.pem")
  case $ACME:$([ "$got" = "$want" ] && echo same || echo other) in stored:same|stand-in:other) ;;
    *) echo "cg_handshake: ACME=$ACME but the certificate served is ${got:-none}" >&2; exit 1 ;;
  esac
fi
hs 40 warm
cgc() { callgrind_control "$@" "$vp" >/dev/null; }
cgc -z
hs "$A" a
cgc -d a
cgc -z
hs "$B" b
cgc -d b
# a thread's dumps are cg.PID.N(-TID)
dumps=("$tmp/cg.$vp.1" "$tmp/cg.$vp.1-*" -- "$tmp/cg.$vp.2" "$tmp/cg.$vp.2-*")
# h2o signs in a child (neverbleed), which vgdb cannot reach (a forked child has no
# gdbserver): its counts are those it writes at its exit, after the parent's, over every
# connection (start-up included, so an upper bound), added per connection
kids=
[ "$TARGET" != h2o ] || kids=$(ps -o pid= -o comm= --ppid "$vp" | awk '$2 != "perl" {print $1}' || true)
kill "$vp" 2>/dev/null || true
wait "$vp" 2>/dev/null || true
for k in $kids; do
  for _ in $(seq 120); do [ -e "/proc/$k" ] || break; sleep 1; done
  dumps+=(--kid "$tmp/cg.$k" $((40 + A + B)))
done

/usr/bin/python3 - $((B - A)) "$TOP" "$TARGET" "$MODE" "${dumps[@]}" <<'EOF'
import collections, glob, re, sys
n, top, target, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
args = sys.argv[5:]
kids = []  # (callgrind file, connections it served)
while "--kid" in args:
    i = args.index("--kid")
    kids.append((args[i + 1], int(args[i + 2])))
    del args[i:i + 3]
sep = args.index("--")
pat_a, pat_b = args[:sep], args[sep + 1:]

def load(path):
    """Exclusive instructions per (object, function) of a callgrind dump, and its total."""
    names, objs, cost = {}, {}, collections.defaultdict(int)
    ob = fn = None
    skip = False
    total = 0
    for line in open(path, errors="replace"):
        if line.startswith("totals:") or line.startswith("summary:"):
            total = int(line.split()[1])
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
            parts = line.split()
            if len(parts) > 1:
                cost[(ob, fn)] += int(parts[1])
    return total, cost

def dump(patterns):  # the dumps of one run (threads, processes), added
    total, cost = 0, collections.defaultdict(int)
    for p in sorted({f for pat in patterns for f in glob.glob(pat)}):
        t, c = load(p)
        total += t
        for k, v in c.items():
            cost[k] += v
    return total, cost

ta, a = dump(pat_a)
tb, b = dump(pat_b)
print(f"{target} {mode}: per handshake (({n} more connections) / {n}): {(tb - ta) / n:,.0f} instructions")
rows = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
for path, conns in kids:
    tk, ck = load(path)
    print(f"  + its child's (pid {path.rsplit('.', 1)[-1]}) {tk / conns:,.0f} instructions per "
          f"connection ({conns} connections, start-up included): {(tb - ta) / n + tk / conns:,.0f}")
    for k, v in ck.items():
        rows[k] = rows.get(k, 0) + v / conns
byobj = collections.defaultdict(float)
for (ob, _), v in rows.items():
    byobj[(ob or "?").rsplit("/", 1)[-1]] += v
print(f"\n{'object':<32} {'Ir':>10}")
for o, v in sorted(byobj.items(), key=lambda kv: -kv[1]):
    if abs(v) >= 100:
        print(f"{o[:32]:<32} {v:>10,.0f}")
print(f"\n{'Ir':>9}  function (object)")
for (ob, fn), v in sorted(rows.items(), key=lambda kv: -kv[1])[:top]:
    print(f"{v:>9,.0f}  {fn} ({(ob or '?').rsplit('/', 1)[-1]})")
EOF
kill "$vp" 2>/dev/null || true
wait "$vp" 2>/dev/null || true

[ "$NATIVE" = 1 ] || exit 0
# The kernel's side, natively: minor faults of the target's processes (/proc/PID/stat field 10)
# and their system calls by strace -c, over N connections after a warm run
"${PRE[@]}" "${CMD[@]}" >"$tmp/native.log" 2>&1 &
np=$!
pids+=("$np")
listening
hs 200 nwarm
mapfile -t nkids < <(ps -o pid= --ppid "$np" | tr -d " " || true) # h2o: its key process
procs=("$np" "${nkids[@]}")
minflt() { # the processes' minor faults (/proc/PID/stat field 10), added
  local p t=0
  for p in "${procs[@]}"; do t=$((t + $(awk '{print $10}' "/proc/$p/stat"))); done
  echo "$t"
}
wakeups() { # the processes' threads' voluntary context switches (each a sleep in epoll_wait,
  # a read or a lock, then a wakeup), added
  local p
  for p in "${procs[@]}"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
    awk '$1 == "voluntary_ctxt_switches:" {t += $2} END {print t + 0}'
}
f0=$(minflt); w0=$(wakeups)
hs "$N" native
f1=$(minflt); w1=$(wakeups)
sargs=()
for p in "${procs[@]}"; do sargs+=(-p "$p"); done
strace -c -f "${sargs[@]}" -o "$tmp/strace.out" &
sp=$!
pids+=("$sp")
sleep 1
hs 1000 strace
kill -INT "$sp"
wait "$sp" 2>/dev/null || true
/usr/bin/python3 - "$tmp/strace.out" "$f0" "$f1" "$N" "$TARGET" "$MODE" "$w0" "$w1" <<'EOF'
import sys
path, f0, f1, n, target, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
w0, w1 = int(sys.argv[7]), int(sys.argv[8])
calls, errors = {}, {}
for line in open(path):
    p = line.split()
    if len(p) >= 5 and p[0][0].isdigit() and p[3].isdigit():
        calls[p[-1]] = int(p[3])
        errors[p[-1]] = int(p[4]) if len(p) == 6 else 0  # the failed ones (EAGAIN, ...)
total = calls.pop("total", sum(calls.values()))
print(f"\n{target} {mode} natively: {(f1 - f0) / n:.2f} minor faults and {(w1 - w0) / n:.2f} voluntary "
      f"context switches per handshake ({n} connections); "
      f"{total / 1000:.1f} system calls per handshake (strace -c -f, 1000 connections):")
print(f"  {'call':<20} {'calls':>6} {'failed':>6}")
for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:20]:
    print(f"  {k:<20} {v / 1000:6.2f} {errors[k] / 1000:6.2f}")
EOF
