"""HTTP/2 clients and gateway configs for the integration tests and the long runs of scripts/:
config builders for the gateway under test, a python3-h2 client, raw frames and a raw-frame
connection for what python3-h2 would not send, metrics scraping, and origin-side counters.
Test modules import from here (and from procs/origin), never from one another."""
import os
import re
import signal
import socket
import ssl
import subprocess
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from procs import raw_exchange, recv_all, slow


NO_PROXY = "h2gate: the origin failed to answer\n"

# One gateway log line, strictly: `key=value` pairs, a value bare (no space, no quote) or quoted
# with its `"` and `\` escaped. A value with a space ("reason=out of memory") fails it.
LOG_LINE = re.compile(r'ts=\S+ level=[a-z]+ event=[a-z0-9_]+'
                      r'(?: [a-z_]+=(?:"(?:[^"\\\n]|\\.)*"|[^\s"]+))*')
LOG_PAIR = re.compile(r'([a-z_]+)=("(?:[^"\\]|\\.)*"|[^\s"]+)')


def log_events(log, event):
    """The lines of the gateway's log for event, each as {key: value} (a quoted value keeps its
    quotes); a line that does not parse strictly as key=value pairs fails the test."""
    out = []
    for line in log.splitlines():
        if f" event={event} " in line or line.endswith(f" event={event}"):
            assert LOG_LINE.fullmatch(line), line
            out.append(dict(LOG_PAIR.findall(line)))
    return out


def tls_listener(port, tls_extra="", certdir="state"):
    """The YAML lines of a TLS listener on 127.0.0.1:port with a self-signed certificate."""
    return [f"  - address: 127.0.0.1:{port}",
            "    tls:",
            f"      certificate: {certdir}/cert.pem",
            f"      key: {certdir}/key.pem",
            "      self_signed: true"] + ["      " + l for l in tls_extra.splitlines()]


def config(tls_port=None, plain_port=None, extra="", tls_extra="", workers=1, certdir="state",
           plain_protocols=None):
    lines = [f"workers: {workers}", "log_level: debug", "listen:"]
    if tls_port:
        lines += tls_listener(tls_port, tls_extra, certdir)
    if plain_port:
        lines.append(f"  - address: 127.0.0.1:{plain_port}")
        if plain_protocols:
            lines.append(f"    protocols: [{', '.join(plain_protocols)}]")
    # a refused origin: every routed request gets the gateway's own 502; never ejected (then
    # it would be 503: test_proxy.py and test_hostile_origin.py test ejection)
    lines += ["upstreams:", "  app:", "    servers: [127.0.0.1:9]",
              "    health: {fail_threshold: 1000}",
              "routes:", "  - { host: '*', path: /, upstream: app }"]
    return "\n".join(lines) + "\n" + extra


def h2_socket(port, tls=False, timeout=5):
    """A connection to 127.0.0.1:port; with tls, over TLS with ALPN h2 (the only protocol
    offered, and the one selected), any certificate accepted."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if tls:
        ctx = tls_client_ctx()
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
        assert s.selected_alpn_protocol() == "h2"
    return s


class Client:
    """A python3-h2 client over a raw socket (h2c) or TLS with ALPN h2."""

    def __init__(self, port, tls=False, validate=True):
        self.s = h2_socket(port, tls)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=validate,
                                        normalize_outbound_headers=validate)
        self.c = h2.connection.H2Connection(cfg)
        self.c.initiate_connection()
        self.flush()

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.s.sendall(data)

    def open_windows(self, stream=1 << 24, conn=1 << 30):
        """Widen the flow-control windows, so that the gateway's sending is never held back by
        this client: SETTINGS_INITIAL_WINDOW_SIZE for every stream, WINDOW_UPDATE for the
        connection (RFC 9113 §6.9.2, §6.9.1); sent at once."""
        self.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: stream})
        self.c.increment_flow_control_window(conn)
        self.flush()

    def events(self, until, timeout=5):
        """Read until until(events) is true or the connection closes; returns all events."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not until(got):
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            try:
                got += self.c.receive_data(data)
            except h2.exceptions.ProtocolError:
                break
            self.flush()
        return got

    def request(self, path="/", method="GET", body=None, extra=(), authority="localhost"):
        sid = self.c.get_next_available_stream_id()
        self.c.send_headers(sid, [(":method", method), (":path", path), (":scheme", "http"),
                                  (":authority", authority), *extra], end_stream=body is None)
        if body is not None:
            self.c.send_data(sid, body, end_stream=True)
        self.flush()
        return sid

    def close(self):
        self.s.close()

    def wait_resets(self):
        """Read until a RST_STREAM arrives: (the StreamReset events, every event read)."""
        evs = self.events(was_reset)
        return resets(evs), evs

    def expect_reset(self, sid, code):
        """The first RST_STREAM to arrive is for sid, with code."""
        resets, evs = self.wait_resets()
        assert resets and resets[0].stream_id == sid, evs
        assert resets[0].error_code == code, resets


def response(events, sid):
    status, body, ended = None, b"", False
    for e in events:
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
            status = dict(e.headers)[":status"]
        elif isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
            body += e.data
        elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
            ended = True
    return status, body, ended


def ended(sid):
    return lambda evs: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == sid for e in evs)


def terminated(evs):
    return any(isinstance(e, h2.events.ConnectionTerminated) for e in evs)


def was_reset(evs):
    """For Client.events: true once a stream was reset."""
    return any(isinstance(e, h2.events.StreamReset) for e in evs)


def resets(evs):
    """The StreamReset events among evs, in arrival order."""
    return [e for e in evs if isinstance(e, h2.events.StreamReset)]


# ---- raw HTTP/2 frames (RFC 9113 §4.1), for the tests that write what python3-h2 would not -------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    """One frame: the 9-byte header, then payload."""
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + \
        payload


def settings(*pairs):
    """A SETTINGS frame with the (identifier, value) pairs."""
    return frame(0x4, 0, 0, b"".join(i.to_bytes(2, "big") + v.to_bytes(4, "big")
                                     for i, v in pairs))


class RawH2:
    """A raw HTTP/2 connection (h2c, or TLS with ALPN h2), for frames python3-h2 would not
    write: with preface, the client preface and a SETTINGS of settings_pairs go out at once,
    and with ack the ACK of the gateway's SETTINGS too (it sends them first). What the gateway
    sends accumulates in buf; eof says it closed."""

    def __init__(self, port, tls=False, settings_pairs=(), preface=True, ack=True, timeout=10):
        self.s = h2_socket(port, tls, timeout)
        self.buf = b""
        self.eof = False
        self.taken = 0  # bytes of buf that next_frame() returned
        self.marked = 0  # bytes of buf before the last mark()
        if preface:
            self.send(PREFACE + settings(*settings_pairs) + (frame(0x4, 0x1, 0) if ack else b""))

    def send(self, data):
        """Write data; False when the gateway closed first (read what it said)."""
        try:
            self.s.sendall(data)
            return True
        except OSError:
            return False

    def read(self, timeout):
        """One read into buf, waiting at most timeout seconds: whether bytes came (not at a
        timeout, nor at the end of the connection)."""
        if self.eof:
            return False
        self.s.settimeout(max(0.001, timeout))
        try:
            d = self.s.recv(1 << 20)
        except (socket.timeout, ssl.SSLWantReadError):
            return False
        except OSError:  # a reset, or TLS ended without close_notify
            d = b""
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def read_until(self, pred, timeout=10):
        """Read until pred(buf), the end of the connection or the timeout; returns buf."""
        deadline = time.monotonic() + timeout
        while not pred(self.buf) and time.monotonic() < deadline:
            if not self.read(deadline - time.monotonic()) and self.eof:
                break
        return self.buf

    def read_for(self, timeout):
        """Read for timeout seconds, or until the end of the connection (0: one read of what
        is there now)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            self.read(deadline - time.monotonic())
            if time.monotonic() >= deadline:
                break

    def frames(self, since_mark=False):
        """(type, flags, stream, payload) of every whole frame received (since_mark: after the
        last mark())."""
        return frames_of(self.buf[self.marked if since_mark else 0:])

    def mark(self):
        """frames(since_mark=True) leaves out the frames received so far."""
        self.marked = len(self.buf) - len(split_frames(self.buf)[1])

    def next_frame(self, timeout=2.0):
        """The next whole frame (type, flags, stream, payload) that this did not return yet,
        reading up to timeout seconds for it: None at the timeout, "closed" at the end."""
        deadline = time.monotonic() + timeout
        while True:
            got, _ = split_frames(self.buf[self.taken:])
            if got:
                t, flags, sid, p = got[0]
                self.taken += 9 + len(p)
                return got[0]
            if self.eof:
                return "closed"
            if deadline <= time.monotonic():
                return None
            self.read(deadline - time.monotonic())

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def split_frames(data):
    """(type, flags, stream, payload) of every whole frame in data, and the bytes after them."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        out.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7FFFFFFF,
                    data[i + 9:i + 9 + n]))
        i += 9 + n
    return out, data[i:]


def frames_of(data):
    """(type, flags, stream, payload) of every whole frame in data."""
    return split_frames(data)[0]


def goaway_code(data):
    """The error code of the first GOAWAY in data, or None."""
    for t, _, _, p in frames_of(data):
        if t == 0x7:
            return int.from_bytes(p[4:8], "big")
    return None


def raw_frames(port, payload):
    return raw_exchange(port, PREFACE + payload)


def tls_client_ctx(version=None):
    """A client context that trusts anything (self-signed test certificates); version pins
    both the minimum and the maximum TLS version."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def tls_exchange(ctx, port, session=None):
    """One HTTP/1.1 exchange over TLS, offering session: (the session, whether it was
    resumed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(65536):  # reading also takes a TLS 1.3 ticket in
                pass
            return s.session, s.session_reused


def gw_config(port, servers, upstream_extra="", route_extra="", extra="", workers=1, tls_port=None,
              log_level="info"):
    """A gateway with a cleartext listener on port (after a TLS one on tls_port, if given) and
    one route to the upstream app of servers; upstream_extra and route_extra are more keys of
    the upstream and the route, extra more top-level config."""
    srv = ", ".join(servers)
    text = f"workers: {workers}\nlog_level: {log_level}\nlisten:\n"
    if tls_port:
        text += "\n".join(tls_listener(tls_port)) + "\n"
    text += f"  - address: 127.0.0.1:{port}\nupstreams:\n  app:\n    servers: [{srv}]\n"
    for line in upstream_extra.splitlines():
        text += f"    {line}\n"
    text += "routes:\n  - host: '*'\n    path: /\n    upstream: app\n"
    for line in route_extra.splitlines():
        text += f"    {line}\n"
    return text + extra


def two_upstream_config(port, ws_port, origin_port, route_ws=True, extra="", tls_port=None):
    """A gateway whose /ws/ goes to the WebSocket origin on ws_port (websocket: route_ws) and
    everything else to origin_port (websocket: false)."""
    text = "workers: 1\nlog_level: info\nlisten:\n"
    if tls_port:
        text += "\n".join(tls_listener(tls_port)) + "\n"
    text += (f"  - address: 127.0.0.1:{port}\nupstreams:\n"
             f"  ws:\n    servers: [127.0.0.1:{ws_port}]\n"
             f"  app:\n    servers: [127.0.0.1:{origin_port}]\n"
             "routes:\n"
             f"  - {{ host: '*', path: /ws/, upstream: ws, websocket: {str(route_ws).lower()} }}\n"
             "  - { host: '*', path: /, upstream: app, websocket: false }\n")
    return text + extra


def check_config(h2gate_bin, tmp_path, text):
    """`h2gate --check-config` of text (written to tmp_path/c.yaml): the CompletedProcess."""
    from procs import run
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return run([h2gate_bin, "--check-config", str(p)])


def config_refused(h2gate_bin, tmp_path, text, want):
    """`h2gate --check-config` of a gw_config with text added refuses it: exit 1, want in its
    message, which starts at a position of the file (FILE:LINE:COL)."""
    import re
    from procs import free_port
    r = check_config(h2gate_bin, tmp_path, gw_config(free_port(), ["127.0.0.1:9"]) + text)
    assert r.returncode == 1 and want in r.stderr, (text, r.stderr)
    assert re.search(re.escape(str(tmp_path / "c.yaml")) + r":\d+:\d+: ", r.stderr), r.stderr
    return r


def origin_gateway(gateway, origin, route_extra="", extra="", admin=None, admin_extra="",
                   upstream_extra="", workers=1, log_level="info"):
    """A gateway (gw_config) in front of a ScriptedOrigin, with more route, upstream and
    top-level config, and an admin listener when admin is a port (True: a free one) with the
    admin_extra lines under it; g.port is its cleartext port, g.admin the admin's."""
    from procs import free_port
    port = free_port()
    if admin is True:
        admin = free_port()
    if admin:
        extra += f"admin:\n  address: 127.0.0.1:{admin}\n{admin_extra}"
    wait = [("127.0.0.1", port)] + ([("127.0.0.1", admin)] if admin else [])
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], route_extra=route_extra,
                          upstream_extra=upstream_extra, extra=extra, workers=workers,
                          log_level=log_level), wait=wait)
    g.port, g.admin = port, admin
    return g


class Streams:
    """What one python3-h2 connection received, stream by stream (collect() fills it)."""

    def __init__(self):
        self.promises = {}   # pushed stream id -> (parent, [(name, value)])
        self.heads = {}      # stream id -> [(name, value)] of the final head
        self.interim = {}    # stream id -> [[(name, value)], ...] of its 1xx heads
        self.bodies = {}     # stream id -> bytes
        self.ended = set()
        self.resets = {}     # stream id -> error code
        self.order = []      # ("promise", id) / ("head", id) / ("data", id), as they came

    def status(self, sid):
        """The final :status of sid as an int, None before its head."""
        h = self.heads.get(sid)
        return int(dict(h)[":status"]) if h else None

    def done(self, sid):
        return sid in self.ended or sid in self.resets


def collect(cl, run, until, timeout=10):
    """Read cl's connection into run (a Streams) until until(run), the timeout or the end of
    the connection; received DATA is credited back at once. Returns run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(run):
        cl.s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = cl.s.recv(1 << 20)
        except (socket.timeout, ConnectionResetError):
            break
        if not data:
            break
        for e in cl.c.receive_data(data):
            if isinstance(e, h2.events.PushedStreamReceived):
                run.promises[e.pushed_stream_id] = (e.parent_stream_id, list(e.headers))
                run.order.append(("promise", e.pushed_stream_id))
            elif isinstance(e, h2.events.InformationalResponseReceived):
                run.interim.setdefault(e.stream_id, []).append(list(e.headers))
            elif isinstance(e, h2.events.ResponseReceived):
                run.heads[e.stream_id] = list(e.headers)
                run.order.append(("head", e.stream_id))
            elif isinstance(e, h2.events.DataReceived):
                run.bodies[e.stream_id] = run.bodies.get(e.stream_id, b"") + e.data
                run.order.append(("data", e.stream_id))
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                run.ended.add(e.stream_id)
            elif isinstance(e, h2.events.StreamReset):
                run.resets[e.stream_id] = e.error_code
        cl.flush()
    return run


def all_done(sids):
    """until= for collect(): every stream of sids ended or was reset."""
    return lambda run: all(run.done(s) for s in sids)


def many_gets(port, path, n, extra=(), wide_windows=True):
    """n identical GETs on one HTTP/2 connection, sent in one flight; windows wide open (else
    python3-h2's default 64 KiB, credited as the data is read). Returns
    {stream_id: (status, body)}, a stream reset before its end having status None or a short
    body."""
    cl = Client(port)
    if wide_windows:
        cl.open_windows()
    sids = []
    for _ in range(n):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                (":authority", "localhost"), *extra], end_stream=True)
        sids.append(sid)
    cl.flush()
    run = collect(cl, Streams(), all_done(sids), timeout=60)
    cl.close()
    return {s: (dict(run.heads[s])[":status"] if s in run.heads else None,
                run.bodies.get(s, b"")) for s in sids}


class Fetcher:
    """Many requests at once on one h2c connection; answers collected per stream, windows
    given back as data arrives (bodies are larger than the default 64 KiB window)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                       header_encoding="utf-8"))
        self.c.initiate_connection()
        self.c.increment_flow_control_window(1 << 24)
        self.s.sendall(self.c.data_to_send())

    def fetch(self, reqs):
        """reqs: [(method, path)] sent in one flight; returns {path_index: (status, headers,
        body)} in request order."""
        sids = []
        for method, path in reqs:
            sid = self.c.get_next_available_stream_id()
            self.c.send_headers(sid, [(":method", method), (":path", path), (":scheme", "http"),
                                      (":authority", "localhost")], end_stream=True)
            sids.append(sid)
        self.s.sendall(self.c.data_to_send())
        got = {sid: [None, {}, b"", False] for sid in sids}
        while not all(v[3] for v in got.values()):
            data = self.s.recv(1 << 20)
            assert data, "connection closed"
            for e in self.c.receive_data(data):
                if isinstance(e, h2.events.ResponseReceived):
                    h = dict(e.headers)
                    got[e.stream_id][0] = int(h[":status"])
                    got[e.stream_id][1] = h
                elif isinstance(e, h2.events.DataReceived):
                    got[e.stream_id][2] += e.data
                    self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    got[e.stream_id][3] = True
                elif isinstance(e, h2.events.StreamReset):
                    raise AssertionError(f"stream {e.stream_id} reset: {e.error_code}")
            out = self.c.data_to_send()
            if out:
                self.s.sendall(out)
        return [tuple(got[sid][:3]) for sid in sids]

    def close(self):
        self.s.close()


def origin_count(o, target):
    return len([q for q in o.requests if q.target == target])


def wait_origin_has(o, target, n=1, timeout=10.0):
    """How many requests for target the ScriptedOrigin o has received, once it has n (or at
    the timeout). A request at the origin proves that a worker accepted its connection: the
    kernel completes a client's handshake before any worker accepts, so a signal sent right
    after a connect or a send may find the connection still in the listen queue. (timeout is
    scaled: procs.slow().)"""
    deadline = time.monotonic() + slow(timeout)
    while origin_count(o, target) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return origin_count(o, target)


def send_for(sock, data, seconds, pause=0.02):
    """Offer data on a non-blocking socket for up to `seconds` (the peer may stop reading);
    returns how many bytes were taken."""
    sock.setblocking(False)
    sent = 0
    deadline = time.monotonic() + seconds
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += sock.send(data[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(pause)
    return sent


def scrape(admin_port, timeout=10):
    """GET /metrics of the admin listener, parsed by Prometheus' own parser
    (python3-prometheus-client): {family name: family}, and the raw text."""
    from prometheus_client.parser import text_string_to_metric_families
    with socket.create_connection(("127.0.0.1", admin_port), timeout=timeout) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
        resp = recv_all(s)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert b"content-type: text/plain; version=0.0.4" in head.lower(), head
    text = body.decode()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def sample(families, name, **labels):
    """The value of the sample `name` whose labels include `labels` (summed when several)."""
    fam_name = name
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in families:
            fam_name = name[:-len(suffix)]
    total, found = 0, False
    for s in families[fam_name].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
            found = True
    assert found, (name, labels)
    return total


def wait_sample(admin_port, name, want, timeout=10.0, **labels):
    """The value of the sample `name` of the admin's /metrics once it is want (or at the
    timeout, scaled: procs.slow()): a worker's gauge seen there was taken by that worker, after
    what it did."""
    deadline = time.monotonic() + slow(timeout)
    while True:
        fams, _ = scrape(admin_port)
        v = sample(fams, name, **labels)
        if v == want or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


def h2load_summary(out):
    """h2load's request counts: {total, started, done, succeeded, failed, errored, timeout}."""
    import re
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
    assert m, out
    return dict(zip(["total", "started", "done", "succeeded", "failed", "errored", "timeout"],
                    map(int, m.groups())))


def self_signed_pair(d, name):
    """A self-signed P-256 certificate for localhost and its key, made by the openssl command in
    directory d: (certificate path, key path)."""
    cert, key = os.path.join(d, f"{name}.crt"), os.path.join(d, f"{name}.key")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", f"/CN={name}", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return cert, key


def pos_of(text, needle, skip=0):
    """'LINE:COL' (from 1), as config errors say it, of the first occurrence of needle in text
    (plus skip characters: pos_of(t, "key: k.pem", 5) is where the value k.pem starts)."""
    i = text.index(needle) + skip
    return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"


class FileConfigs:
    """A gateway config whose files all work (a TLS listener with its own certificate, a
    cleartext one, an access log), and others that load but name a file start-up cannot use:
    a key that does not match its certificate, a key file that is the certificate, an access
    log or a pid file in a missing directory, a tls_ca that cannot be read (mode 000; as root,
    where modes do not stop reads, it is not PEM either). bad[name] is (config text, FILE-relative
    "LINE:COL" the error must name, the message that must follow)."""

    def __init__(self, d, port, tls_port, origin_port):
        self.dir = str(d)
        cert, key = self_signed_pair(self.dir, "a")
        _, other_key = self_signed_pair(self.dir, "b")
        self.log = os.path.join(self.dir, "logs", "access.log")
        os.makedirs(os.path.dirname(self.log), exist_ok=True)
        ca = os.path.join(self.dir, "ca.pem")
        with open(ca, "w") as f:
            f.write("not a certificate\n")
        os.chmod(ca, 0)
        self.good = (f"workers: 1\nlisten:\n  - address: 127.0.0.1:{tls_port}\n    tls:\n"
                     f"      certificate: {cert}\n      key: {key}\n"
                     f"  - address: 127.0.0.1:{port}\n"
                     f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin_port}]\n"
                     f"routes:\n  - {{host: '*', path: /, upstream: app}}\n"
                     f"access_log: {{path: {self.log}}}\n")
        missing = os.path.join(self.dir, "missing", "access.log")
        texts = {
            "key_mismatch": self.good.replace(f"key: {key}", f"key: {other_key}"),
            "key_is_certificate": self.good.replace(f"key: {key}", f"key: {cert}"),
            "log_dir_missing": self.good.replace(self.log, missing),
            "pid_dir_missing": self.good + f"pid_file: {missing}.pid\n",
            "tls_ca_unreadable": self.good.replace(
                f"servers: [127.0.0.1:{origin_port}]\n",
                f"servers: [127.0.0.1:{origin_port}]\n    tls: true\n    tls_ca: {ca}\n"),
        }
        self.bad = {
            "key_mismatch": (texts["key_mismatch"], pos_of(texts["key_mismatch"], other_key),
                             f"key '{other_key}' does not match certificate '{cert}'"),
            "key_is_certificate": (texts["key_is_certificate"],
                                   pos_of(texts["key_is_certificate"], f"key: {cert}", 5),
                                   f"key '{cert}' holds a certificate, not a private key"),
            "log_dir_missing": (texts["log_dir_missing"], pos_of(texts["log_dir_missing"], missing),
                                f"access_log path '{missing}' cannot be opened for appending: "
                                "No such file or directory"),
            "pid_dir_missing": (texts["pid_dir_missing"],
                                pos_of(texts["pid_dir_missing"], f"{missing}.pid"),
                                f"pid_file '{missing}.pid' cannot be written in directory "
                                f"'{os.path.dirname(missing)}': No such file or directory"),
            "tls_ca_unreadable": (texts["tls_ca_unreadable"], pos_of(texts["tls_ca_unreadable"], ca),
                                  f"tls_ca '{ca}' of upstream 'app' cannot be "
                                  + ("loaded: no certificate or crl found" if os.geteuid() == 0
                                     else "read: Permission denied")),
        }


def reload_to(g, text, generation, timeout=10):
    """Write text as the gateway's config file, SIGHUP, and wait until every worker took
    generation (or the reload was refused: return the log either way); timeout is scaled
    (procs.slow())."""
    with open(g.config_path, "w") as f:
        f.write(text)
    g.signal(signal.SIGHUP)
    deadline = time.monotonic() + slow(timeout)
    want = "generation=N draining"
    while time.monotonic() < deadline:
        log = g.log()
        taken = re.findall(r"event=generation worker=(\d+) generation=(\d+)", log)
        workers = {w for w, gen in taken if int(gen) == generation}
        if workers and len(workers) == int(re.search(r"workers=(\d+)", log).group(1)):
            return log
        if log.count("event=reload_failed") and generation == 0:
            return log
        time.sleep(0.02)
    raise AssertionError(f"generation {generation} not taken ({want}):\n{g.log()[-4000:]}")


# A stand-in for a host out of memory: the first connection the listening socket of port
# FAIL_PORT (a client listener, the admin's) hands over, or its first FAIL_CONNS ones, finds
# calloc failing (the gateway's first allocation there: the connection's state). glibc's
# __libc_calloc is the real one.
FIRST_CONN_NOMEM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <uv.h>

extern void *__libc_calloc(size_t n, size_t size);
static _Thread_local int fail_next;
static int failed; /* connections refused so far */
static uv_connection_cb real_cb;

void *calloc(size_t n, size_t size)
{
    if (fail_next) {
        fail_next = 0;
        return NULL;
    }
    return __libc_calloc(n, size);
}

static void first_fails(uv_stream_t *server, int status)
{
    const char *n = getenv("FAIL_CONNS");
    if (status == 0 && failed < (n ? atoi(n) : 1)) {
        failed++;
        fail_next = 1;
    }
    real_cb(server, status);
    fail_next = 0;
}

int uv_listen(uv_stream_t *s, int backlog, uv_connection_cb cb)
{
    int (*real)(uv_stream_t *, int, uv_connection_cb) =
        (int (*)(uv_stream_t *, int, uv_connection_cb))dlsym(RTLD_NEXT, "uv_listen");
    uv_os_fd_t fd;
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    if (uv_fileno((uv_handle_t *)s, &fd) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0 && a.sin_family == AF_INET &&
        ntohs(a.sin_port) == atoi(getenv("FAIL_PORT"))) {
        real_cb = cb;
        cb = first_fails;
    }
    return real(s, backlog, cb);
}
"""


def first_conn_nomem_lib(tmp_path):
    """FIRST_CONN_NOMEM built in tmp_path: its path, for LD_PRELOAD with FAIL_PORT set (and
    FAIL_CONNS, 1 by default)."""
    from procs import run
    src, lib = tmp_path / "nomem.c", tmp_path / "libnomem.so"
    src.write_text(FIRST_CONN_NOMEM)
    r = run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl", "-luv"])
    assert r.returncode == 0, r.stderr
    return lib



def nomem_burst(g, port, request, burst):
    """Against a gateway g run with first_conn_nomem_lib failing the first connections on port:
    connect until the listener takes one (the first refused), then send it and `burst` more
    `request`, each closed at once by the gateway (not left hanging), all within the second of
    the first warn line; then, past that second, one more refused, logged with the burst's
    count."""
    deadline = time.monotonic() + 10
    while True:  # the first connection to get through is the first refused
        try:
            first = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, g.log()[-3000:]
            time.sleep(0.05)

    def refused(s):
        with s:
            s.sendall(request)
            try:
                got = s.recv(4096)  # closed at once, not left hanging: no socket.timeout
            except ConnectionResetError:
                got = b""
            assert got == b"", got
        # the refused connection's handle closed before the next comes: one that comes while
        # it closes is taken after, with no failure (the preload fails libuv's callback only)
        time.sleep(0.05)

    t0 = time.monotonic()
    refused(first)
    for _ in range(burst):
        refused(socket.create_connection(("127.0.0.1", port), timeout=5))
    assert time.monotonic() - t0 < 0.9  # the burst within the second of the first line
    time.sleep(1.1)
    refused(socket.create_connection(("127.0.0.1", port), timeout=5))  # logged with the burst
