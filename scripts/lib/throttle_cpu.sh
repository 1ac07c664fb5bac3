#!/usr/bin/env bash
# scripts/lib/throttle_cpu.sh — the idle-cost figure: the gateway's CPU time (utime+stime
# from /proc) during a 20 MiB h2c download throttled to response_rate 1MB/s (~21 s), then the same
# download unthrottled. nginx is the origin. BIN overrides the binary (default build/gateway/h2gate).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$root/build/gateway/h2gate}
d=$(mktemp -d); cd $d; mkdir www body proxy fastcgi uwsgi scgi
head -c $((20<<20)) /dev/urandom > www/f20.bin
np=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
gp=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
gp2=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
cat > nginx.conf <<EON
daemon off; master_process off; worker_processes 1; error_log $d/error.log warn; pid $d/nginx.pid;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $d/body; proxy_temp_path $d/proxy; fastcgi_temp_path $d/fastcgi;
 uwsgi_temp_path $d/uwsgi; scgi_temp_path $d/scgi; server { listen 127.0.0.1:$np; root $d/www; } }
EON
nginx -c $d/nginx.conf >/dev/null 2>&1 & ngpid=$!
for yaml in "throttle:\n  response_rate: 1MB/s\n" ""; do
  port=$gp; [ -z "$yaml" ] && port=$gp2
  printf "workers: 1\nlog_level: warn\nlisten:\n  - address: 127.0.0.1:$port\nupstreams:\n  app:\n    servers: [127.0.0.1:$np]\nroutes:\n  - host: '*'\n    path: /\n    upstream: app\n$yaml" > gw.yaml
  $BIN -c gw.yaml >$d/gw.log 2>&1 & pid=$!; sleep 0.5
  curl -s --http2-prior-knowledge -o /dev/null http://127.0.0.1:$port/f20.bin -r 0-1000   # warm
  read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
  t0=$(date +%s.%N)
  curl -s --http2-prior-knowledge http://127.0.0.1:$port/f20.bin | sha256sum | cut -c1-16
  t1=$(date +%s.%N)
  read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
  tck=$(getconf CLK_TCK)
  label=unthrottled; [ -n "$yaml" ] && label="throttled 1MB/s"
  python3 -c "u=($u1-$u0)/$tck; s=($s1-$s0)/$tck; w=$t1-$t0; print(f'$label: wall {w:.2f} s, CPU user {u:.2f} s + sys {s:.2f} s = {u+s:.2f} s ({100*(u+s)/w:.2f}% of one core)')"
  kill $pid; wait $pid 2>/dev/null || true
done
sha256sum www/f20.bin | cut -c1-16
kill $ngpid; rm -rf $d
