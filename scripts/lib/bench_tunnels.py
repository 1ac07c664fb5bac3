#!/usr/bin/python3
"""Idle WebSocket tunnels for scripts/bench (scenario `tunnels`).

  bench_tunnels.py H2GATE N [CPU_PROXY CPU_LOAD]

Starts a python3-websockets echo origin (tests/lib/ws_origin.py), h2gate (one worker,
no access log) and nginx as the WebSocket reverse proxy a user would write by hand (HTTP/1.1
only: nginx has no RFC 8441), each in front of it; opens N tunnels through each and leaves them
idle: over HTTP/1.1 (N connections, Upgrade), and for h2gate over HTTP/2 (RFC 8441: N streams on
N/100 h2c connections). Each row starts its proxy afresh; its RSS (VmRSS) before and 1 s after
the last tunnel opened gives the memory per tunnel (all of the proxy's own: its client and
origin sides; socket buffers are the kernel's and not in it).
Prints a markdown table on stdout.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

import ws_origin  # noqa: E402
from ports import free_ports  # noqa: E402
from procs import rss_kib, wait_port  # noqa: E402

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="


def free_port():
    return free_ports(1)[0]


def h1_tunnels(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
                  b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
                  KEY + b"\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(4096)
            if not d:
                raise RuntimeError("closed before the 101")
            head += d
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(head[:80])
        socks.append(s)
    return socks


def h2_tunnels(port, n, per_conn=100):
    conns = []
    left = n
    while left:
        k = min(per_conn, left)
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        enabled = False
        while not enabled:
            for e in c.receive_data(s.recv(65536)):
                if isinstance(e, h2.events.RemoteSettingsChanged):
                    enabled = True
            s.sendall(c.data_to_send())
        sids = []
        for _ in range(k):
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                                 (":scheme", "http"), (":path", "/"), (":authority", "localhost"),
                                 ("sec-websocket-version", "13")])
            sids.append(sid)
        s.sendall(c.data_to_send())
        ok = set()
        while len(ok) < k:
            for e in c.receive_data(s.recv(65536)):
                if isinstance(e, h2.events.ResponseReceived):
                    if dict(e.headers)[b":status"] != b"200":
                        raise RuntimeError(f"stream {e.stream_id}: {e.headers}")
                    ok.add(e.stream_id)
                elif isinstance(e, h2.events.StreamReset):
                    raise RuntimeError(f"stream {e.stream_id} reset")
            s.sendall(c.data_to_send())
        conns.append((s, c))
        left -= k
    return conns


def measure(pid, opener):
    time.sleep(0.5)
    before = rss_kib(pid)
    t0 = time.monotonic()
    handles = opener()
    took = time.monotonic() - t0
    time.sleep(1)
    after = rss_kib(pid)
    return before, after, took, handles


def main(argv):
    if len(argv) not in (3, 5):
        sys.stderr.write(__doc__)
        return 2
    h2gate, n = argv[1], int(argv[2])
    cpu_p, cpu_l = (argv[3], argv[4]) if len(argv) == 5 else ("0", "0")
    tmp = tempfile.mkdtemp(prefix="h2gate-tunnels.")
    wsport, gport, nport = free_port(), free_port(), free_port()
    procs = []

    def start(cmd, cpu):
        p = subprocess.Popen(["taskset", "-c", cpu] + cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        procs.append(p)
        return p
    try:
        origin = start(["/usr/bin/python3", ws_origin.PATH, str(wsport)], cpu_l)
        assert origin.stdout.readline().strip() == "ready"
        with open(os.path.join(tmp, "h2gate.yaml"), "w") as f:
            f.write(f"workers: 1\nlog_level: warn\nlisten:\n  - address: 127.0.0.1:{gport}\n"
                    f"    backlog: 4096\nupstreams:\n  ws:\n    servers: [127.0.0.1:{wsport}]\n"
                    "routes:\n  - { host: '*', path: /, upstream: ws }\n"
                    f"limits:\n  max_tunnels: {n + 100}\n")
        os.makedirs(os.path.join(tmp, "ngx"), exist_ok=True)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1;
worker_rlimit_nofile 20000; error_log {tmp}/nginx-error.log warn; pid {tmp}/nginx.pid;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/ngx/body; proxy_temp_path {tmp}/ngx/proxy;
  fastcgi_temp_path {tmp}/ngx/fastcgi; uwsgi_temp_path {tmp}/ngx/uwsgi;
  scgi_temp_path {tmp}/ngx/scgi;
  server {{
    listen 127.0.0.1:{nport} backlog=4096;
    location / {{
      proxy_pass http://127.0.0.1:{wsport};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 600s;
    }}
  }}
}}
""")
        gw_cmd = [h2gate, "-c", os.path.join(tmp, "h2gate.yaml")]
        ngx_cmd = ["nginx", "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp]
        rows = []
        # each row with a freshly started proxy: memory given back by one row is not reused
        # by the next
        for name, cmd, port, opener in (
                ("h2gate", gw_cmd, gport, lambda: h1_tunnels(gport, n)),
                ("nginx", ngx_cmd, nport, lambda: h1_tunnels(nport, n)),
                ("h2gate (RFC 8441, h2c)", gw_cmd, gport, lambda: h2_tunnels(gport, n))):
            proxy = start(cmd, cpu_p)
            wait_port("127.0.0.1", port, proc=proxy)
            before, after, took, handles = measure(proxy.pid, opener)
            rows.append((name, "HTTP/2" if "8441" in name else "HTTP/1.1", n, before, after,
                         (after - before) / n, took))
            sys.stderr.write(f"bench: tunnels {name}: {n} open in {took:.1f} s, RSS "
                             f"{before} -> {after} KiB, {(after - before) / n:.1f} KiB/tunnel\n")
            for h in handles:
                (h[0] if isinstance(h, tuple) else h).close()
            proxy.terminate()
            proxy.wait(15)
        print(f"Idle WebSocket tunnels ({n} per row, opened one after the other and left idle; "
              "RSS of the proxy's process before and 1 s after; the origin is python3-websockets):")
        print()
        print("| proxy | client side | tunnels | RSS before KiB | RSS after KiB | KiB/tunnel | open s |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.1f} | {r[6]:.1f} |")
        return 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
