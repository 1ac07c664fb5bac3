#!/usr/bin/python3
"""The page scenario of scripts/bench: one HTTP/2 connection loads a page of 60 resources with
RFC 9218 priorities as a browser sends them; time to the last byte of the urgent resources
(u <= 2) and of the whole page.

  bench_page.py files DIR                      write the page's resources under DIR/page/
  bench_page.py load HOST PORT tls|h2c LOADS [MBIT]
                                               load the page LOADS times, a new connection each
                                               time (MBIT > 0: the client reads at most MBIT
                                               Mbit/s, a bottleneck link); one line per load,
                                               then a summary line:
    pages=N ok=N failed=N resources=60 bytes=B urgent_p50_ms=.. urgent_p90_ms=..
    page_p50_ms=.. page_p90_ms=..

A load: connect (TLS 1.3 with ALPN h2, or h2c prior knowledge), the document, then, once the
document is in, the other 59 requests at once (a browser's preload scanner finds them in the
head and body as the document arrives; sending them together is the case where the server's
ordering matters most). Times run from the start of the connection (handshake included). A load
counts only when every resource got 200 with its whole body.

On loopback the client reads as fast as it can, and the order in which a server sends shows only
as far as the client keeps up. With MBIT the client reads no faster than that rate (a token
bucket on its reads): the server's writes then wait in the socket buffers in the order it made
them, as on a slow link, and what arrives first is what the server's scheduler chose.

The mix: 60 resources of 1 to 200 KiB, 1,920 KiB in all, composed after the HTTP Archive's
median desktop page (Web Almanac 2024, Page Weight chapter,
https://almanac.httparchive.org/en/2024/page-weight, October 2024 crawl, as quoted from it:
2,652 KB over 71 requests; images 1,054 KB in 18 requests, JavaScript 613 KB
in 24, fonts 131 KB, CSS 78 KB, HTML 18 KB): an 18 KiB document, 6 stylesheets (78 KiB), 4 fonts
(132), 8 blocking and 16 async scripts (615), 18 images (1,054; two at the 200 KiB cap, so the
largest images of a real page are cut short), 4 fetches and 3 icons (23). The per-type totals
and counts follow the chapter; the sizes within a type are this composition's, not one real
page's.

Priorities: Chromium maps its request priorities to RFC 9218 urgency as HIGHEST 0, MEDIUM 1,
LOW 2, LOWEST 3, IDLE 4; it loads the document and stylesheets at HIGHEST, fonts, blocking
scripts, fetches and images in the viewport at MEDIUM, async scripts and other images at
LOWEST, icons at IDLE; the document and images carry the incremental flag `i`. Chromium also
sends the same order as an RFC 7540 priority in each HEADERS frame, for servers that know no
RFC 9218 (h2o 2.2, nginx 1.22 and HAProxy 2.6 among the peers): each stream depends
exclusively on the youngest open stream of its own urgency or, if none, of the nearest more
urgent one, with a weight of 256, 220, 183, 147 or 110 for urgency 0 to 4 (Chromium's
Http2PriorityDependencies); this client does the same, so every peer is told the order in the
way it understands, unless the server sent
SETTINGS_NO_RFC7540_PRIORITIES = 1 (RFC 9218 section 2.1)."""
import os
import socket
import ssl
import statistics
import sys
import time

KIB = 1024
NO_RFC7540_PRIORITIES = 0x9  # RFC 9218 section 2.1; python3-h2 4.1 has no name for it
RCVBUF = 128 * KIB  # the client's receive buffer under MBIT (the kernel doubles it)
# (path, KiB, priority field value)
MIX = [("/page/index.html", 18, "u=0, i")]
MIX += [(f"/page/css{i}.css", s, "u=0") for i, s in enumerate((40, 16, 10, 6, 4, 2))]
MIX += [(f"/page/font{i}.woff2", s, "u=1") for i, s in enumerate((48, 36, 28, 20))]
MIX += [(f"/page/head{i}.js", s, "u=1") for i, s in enumerate((160, 96, 64, 32, 16, 8, 4, 2))]
MIX += [(f"/page/async{i}.js", s, "u=3")
        for i, s in enumerate((72, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2, 2, 1, 1, 1, 1))]
# the hero and three small images in the viewport are raised to MEDIUM
MIX += [(f"/page/img{i}.jpg", s, "u=1, i" if i < 4 else "u=3, i")
        for i, s in enumerate((160, 16, 12, 8, 200, 200, 120, 96, 64, 48, 40, 32, 24, 16, 8, 4, 4,
                               2))]
MIX += [(f"/page/api{i}.json", s, "u=1") for i, s in enumerate((12, 4, 2, 1))]
MIX += [(f"/page/icon{i}.svg", s, "u=4") for i, s in enumerate((2, 1, 1))]
assert len(MIX) == 60 and all(1 <= s <= 200 for _, s, _ in MIX)


def urgency(prio):
    return int(prio.split(",")[0].strip()[2:])


def write_files(root):
    os.makedirs(os.path.join(root, "page"), exist_ok=True)
    for path, kib, _ in MIX:
        with open(os.path.join(root, path.lstrip("/")), "wb") as f:
            f.write(os.urandom(kib * KIB))


def load_once(host, port, mode, mbit=0.0):
    """(urgent seconds, page seconds) of one load, or raise on any failure."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    t0 = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if mbit > 0:
        # a receive window of a link's size, fixed before the handshake (window scaling is
        # agreed in it): the sender's congestion window and send buffer stay small, so the
        # page waits in the server's own queues, where its scheduler orders it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    sock.settimeout(30)
    sock.connect((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            raise RuntimeError("no h2 by ALPN")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                 header_encoding="utf-8"))
    # a browser's windows (Chromium: 6 MiB per stream, 15 MiB for the connection)
    conn.local_settings = h2.settings.Settings(client=True, initial_values={
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 6 * 1024 * 1024,
        h2.settings.SettingCodes.ENABLE_PUSH: 0})
    conn.initiate_connection()
    conn.increment_flow_control_window(15 * 1024 * 1024 - 65535)
    sock.sendall(conn.data_to_send())
    want = {}    # stream id -> (path, KiB, urgency)
    levels = {}  # urgency -> ids of the open streams of that urgency, oldest first
    weight = {0: 256, 1: 220, 2: 183, 3: 147, 4: 110}
    got = {}     # stream id -> bytes received
    status = {}
    done = {}    # stream id -> end time

    def request(path, kib, prio):
        sid = conn.get_next_available_stream_id()
        scheme = "https" if mode == "tls" else "http"
        u = urgency(prio)
        parent = 0
        for level in range(u, -1, -1):
            open_ids = [i for i in levels.get(level, ()) if i not in done]
            if open_ids:
                parent = open_ids[-1]
                break
        tree = {}
        if conn.remote_settings.get(NO_RFC7540_PRIORITIES, 0) != 1:
            tree = dict(priority_weight=weight[u], priority_depends_on=parent,
                        priority_exclusive=True)
        conn.send_headers(sid, [(":method", "GET"), (":scheme", scheme),
                                (":authority", "localhost"), (":path", path),
                                ("priority", prio), ("accept", "*/*")], end_stream=True, **tree)
        levels.setdefault(u, []).append(sid)
        want[sid] = (path, kib, u)
        got[sid] = 0

    received = [0]

    def pump(until):
        while not until():
            data = sock.recv(16384 if mbit > 0 else 262144)
            if not data:
                raise RuntimeError("connection closed")
            if mbit > 0:  # no faster than the link: wait until these bytes would have arrived
                received[0] += len(data)
                due = t0 + received[0] * 8 / (mbit * 1e6) - time.monotonic()
                if due > 0:
                    time.sleep(due)
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    status[ev.stream_id] = dict(ev.headers).get(":status")
                elif isinstance(ev, h2.events.DataReceived):
                    got[ev.stream_id] += len(ev.data)
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    done[ev.stream_id] = time.monotonic()
                elif isinstance(ev, h2.events.StreamReset):
                    raise RuntimeError(f"stream {ev.stream_id} reset ({ev.error_code})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise RuntimeError(f"GOAWAY ({ev.error_code})")
            out = conn.data_to_send()
            if out:
                sock.sendall(out)

    request(*MIX[0])
    sock.sendall(conn.data_to_send())
    pump(lambda: len(done) == 1)
    for res in MIX[1:]:
        request(*res)
    sock.sendall(conn.data_to_send())
    pump(lambda: len(done) == len(MIX))
    conn.close_connection()
    try:
        sock.sendall(conn.data_to_send())
    except OSError:
        pass
    sock.close()
    for sid, (path, kib, _) in want.items():
        if status.get(sid) != "200" or got[sid] != kib * KIB:
            raise RuntimeError(f"{path}: status {status.get(sid)}, {got[sid]} of {kib * KIB} bytes")
    urgent = max(done[s] for s, (_, _, u) in want.items() if u <= 2) - t0
    return urgent, max(done.values()) - t0


def pct(values, p):
    values = sorted(values)
    if not values:
        return 0.0
    return values[max(1, -(-len(values) * p // 100)) - 1]


def main(argv):
    if len(argv) == 3 and argv[1] == "files":
        write_files(argv[2])
        return 0
    if len(argv) not in (6, 7) or argv[1] != "load" or argv[4] not in ("tls", "h2c"):
        sys.stderr.write(__doc__)
        return 2
    host, port, mode, loads = argv[2], int(argv[3]), argv[4], int(argv[5])
    mbit = float(argv[6]) if len(argv) == 7 else 0.0
    urgent, page, failed = [], [], 0
    for i in range(loads):
        try:
            u, p = load_once(host, port, mode, mbit)
        except Exception as e:  # a failed load is counted and reported, the run goes on
            failed += 1
            print(f"load {i}: failed: {e}", flush=True)
            continue
        urgent.append(u * 1e3)
        page.append(p * 1e3)
        print(f"load {i}: urgent {u * 1e3:.2f} ms, page {p * 1e3:.2f} ms", flush=True)
    total = sum(kib for _, kib, _ in MIX) * KIB
    print(f"pages={loads} ok={len(urgent)} failed={failed} resources={len(MIX)} bytes={total} "
          f"urgent_p50_ms={pct(urgent, 50):.2f} urgent_p90_ms={pct(urgent, 90):.2f} "
          f"page_p50_ms={pct(page, 50):.2f} page_p90_ms={pct(page, 90):.2f} "
          f"urgent_mean_ms={statistics.mean(urgent) if urgent else 0:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
