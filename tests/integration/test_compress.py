"""Compression of origin responses: independent clients (curl, python's gzip,
brotli and zstandard, the brotli and zstd tools, h2load) decompress exactly the origin's bytes;
the rules of negotiation and the head rewrite hold end to end."""
import gzip
import socket
import subprocess
import time
import zlib

import brotli
import h2.events
import pytest
import zstandard

from procs import free_port, h1_get, run
from gwtest import Client, check_config, config_refused, gw_config, wait_sample
from origin import text_pattern

CODINGS = ["gzip", "br", "zstd"]


def decode(coding, body):
    """The whole body decoded with python's own decoders (not h2gate's libraries' callers)."""
    if coding == "gzip":
        return gzip.decompress(body)
    if coding == "br":
        return brotli.decompress(body)
    d = zstandard.ZstdDecompressor().decompressobj()
    out = d.decompress(body)
    assert d.eof, "the zstd frame did not end"
    return out


class Decoder:
    """Incremental decoding of one coding: pieces decode as they arrive."""

    def __init__(self, coding):
        self.coding = coding
        if coding == "gzip":
            self.d = zlib.decompressobj(16 + 15)
        elif coding == "br":
            self.d = brotli.Decompressor()
        else:
            self.d = zstandard.ZstdDecompressor().decompressobj()

    def feed(self, data):
        return self.d.process(data) if self.coding == "br" else self.d.decompress(data)


def zconfig(port, origin, extra="", route_extra="", log_level="info"):
    return gw_config(port, [f"127.0.0.1:{origin.port}"],
                     route_extra="compress: true\n" + route_extra, extra=extra, log_level=log_level)


@pytest.fixture
def zgw(gateway, origin):
    port = free_port()
    g = gateway(zconfig(port, origin), wait=[("127.0.0.1", port)])
    g.port = port
    return g


def h1_full(port, path, headers=()):
    """One HTTP/1.1 GET: (status, {lowercased name: [values]}, body bytes decoded of chunking,
    the chunked trailer section's {lowercased name: value})."""
    data = h1_get(port, path, timeout=20, headers=headers, host="a")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        fields.setdefault(k.strip().lower(), []).append(v.strip())
    trailers = {}
    if "chunked" in fields.get("transfer-encoding", [""])[0]:
        out, rest = b"", body
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        body = out
        for l in rest.decode("latin-1").split("\r\n"):
            if ":" in l:
                k, _, v = l.partition(":")
                trailers[k.strip().lower()] = v.strip()
    return status, fields, body, trailers


def h1(port, path, headers=()):
    """One HTTP/1.1 GET: (status, {lowercased name: [values]}, body bytes decoded of chunking)."""
    return h1_full(port, path, headers)[:3]


@pytest.mark.parametrize("size", [0, 1, 255, 256, 100 * 1024, 10 << 20])
@pytest.mark.parametrize("kind", ["text", "text-chunked"])
@pytest.mark.parametrize("coding", CODINGS)
def test_round_trip_http1(zgw, coding, size, kind):
    want = text_pattern(size)
    status, f, body = h1(zgw.port, f"/{kind}/{size}", [("Accept-Encoding", coding)])
    assert status == 200
    if kind == "text" and size < 256:  # a known length under min_size: sent as it is
        assert "content-encoding" not in f and body == want
        assert f["content-length"] == [str(size)]
        return
    assert f["content-encoding"] == [coding], f
    assert "content-length" not in f and f["transfer-encoding"] == ["chunked"]
    assert f["vary"] == ["Accept-Encoding"]
    assert decode(coding, body) == want


@pytest.mark.parametrize("size", [1, 100 * 1024, 10 << 20])
def test_curl_compressed_over_h2_and_h1(zgw, size):
    """curl --compressed offers "deflate, gzip, br, zstd": zstd wins (equal q); with one coding
    asked for, that one. curl decodes each with its own libraries."""
    want = text_pattern(size)
    for proto in ("--http2-prior-knowledge", "--http1.1"):
        for ae, got in ((None, "zstd"), ("gzip", "gzip"), ("br", "br"), ("zstd", "zstd")):
            hdr = ["-H", f"Accept-Encoding: {ae}"] if ae else []
            r = run(["curl", "-sS", proto, "--compressed", *hdr, "-D", "/dev/stderr",
                     f"http://127.0.0.1:{zgw.port}/text-chunked/{size}"], timeout=60)
            assert r.returncode == 0, r.stderr
            assert r.stdout.encode() == want, (proto, ae)
            assert f"content-encoding: {got}" in r.stderr.lower(), (proto, ae, r.stderr)


def test_command_line_decoders(zgw, tmp_path):
    """The brotli and zstd tools (and gzip) decode a 10 MiB response fetched as it is sent."""
    want = text_pattern(10 << 20)
    for coding, tool in (("gzip", ["gzip", "-dc"]), ("br", ["brotli", "-dc"]),
                         ("zstd", ["zstd", "-dcq"])):
        out = tmp_path / f"body.{coding}"
        r = run(["curl", "-sS", "--http2-prior-knowledge", "-H", f"Accept-Encoding: {coding}",
                 "-o", str(out), f"http://127.0.0.1:{zgw.port}/text-chunked/{10 << 20}"],
                timeout=60)
        assert r.returncode == 0, r.stderr
        assert out.stat().st_size < len(want) // 5
        r = subprocess.run(tool + [str(out)], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout == want, coding


def test_negotiation_end_to_end(zgw):
    """RFC 9110 §12.5.3: the highest q wins; among equals zstd, then br, then gzip; q=0 and
    identity;q=0 are honoured."""
    for ae, got in (("gzip, br, zstd", "zstd"), ("gzip, br", "br"), ("br;q=0.5, gzip", "gzip"),
                    ("zstd;q=0.1, br;q=0.2", "br"), ("*, zstd;q=0", "br"),
                    ("*;q=0.5, gzip;q=1", "gzip"), ("identity;q=0, gzip", "gzip"),
                    ("deflate", None), ("zstd;q=0, br;q=0, gzip;q=0", None)):
        status, f, body = h1(zgw.port, "/text/5000", [("Accept-Encoding", ae)])
        assert status == 200
        if got is None:
            assert "content-encoding" not in f and body == text_pattern(5000), ae
        else:
            assert f["content-encoding"] == [got], ae
            assert decode(got, body) == text_pattern(5000), ae
        assert f["vary"] == ["Accept-Encoding"], ae


@pytest.mark.parametrize("coding", CODINGS)
def test_slow_origin_first_bytes_arrive_before_the_end(zgw, coding):
    """Bytes are compressed and flushed as they come: the first compressed piece reaches the
    client while the origin still sends (10 pieces 200 ms apart)."""
    size = 100000
    cl = Client(zgw.port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", f"/text-slow/{size}"), (":scheme", "http"),
                            (":authority", "a"), ("accept-encoding", coding)], end_stream=True)
    cl.flush()
    t0 = time.monotonic()
    d = Decoder(coding)
    out, first_at, done = b"", None, False
    while not done and time.monotonic() - t0 < 10:
        data = cl.s.recv(65536)
        if not data:
            break
        for e in cl.c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                hd = dict(e.headers)
                assert hd["content-encoding"] == coding
            elif isinstance(e, h2.events.DataReceived):
                piece = d.feed(e.data)
                if piece and first_at is None:
                    first_at = time.monotonic() - t0
                out += piece
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                done = True
        cl.flush()
    total = time.monotonic() - t0
    assert done and out == text_pattern(size)
    # the first piece a second or more before the end (the origin's pieces span 1.8 s): a
    # gateway or client kept off a loaded machine's CPU for most of a second still passes,
    # where a fixed 0.5 s from the request left far less; a coder that kept the pieces until
    # the end would give them all at once
    assert first_at is not None and first_at < total - 1.0 and total > 1.5, (first_at, total)
    cl.close()


def test_rules_end_to_end(zgw, origin):
    port = zgw.port
    ae = [("Accept-Encoding", "gzip")]
    # no Accept-Encoding, identity only, gzip;q=0: as it is, with Vary
    for hdrs in ([], [("Accept-Encoding", "identity")], [("Accept-Encoding", "gzip;q=0")],
                 [("Accept-Encoding", "deflate")]):
        status, f, body = h1(port, "/text/5000", hdrs)
        assert "content-encoding" not in f and body == text_pattern(5000)
        assert f["vary"] == ["Accept-Encoding"], hdrs
    # "*" accepts every coding: zstd first
    status, f, body = h1(port, "/text/5000", [("Accept-Encoding", "*")])
    assert f["content-encoding"] == ["zstd"] and decode("zstd", body) == text_pattern(5000)
    # a type not listed: untouched, no Vary
    status, f, body = h1(port, "/bytes/5000", ae)
    assert "content-encoding" not in f and "vary" not in f
    # the origin's own encoding, no-transform, private, Set-Cookie, Range: untouched
    for q in ("h=Content-Encoding:br", "h=Cache-Control:no-transform", "h=Cache-Control:private",
              "h=Set-Cookie:a%3Db", "h=Cache-Control:no-store"):
        status, f, body = h1(port, f"/text/5000?{q}", ae)
        assert "content-encoding" not in f or f["content-encoding"] == ["br"], q
        assert body == text_pattern(5000), q
    status, f, body = h1(port, "/text/5000", ae + [("Range", "bytes=0-9")])
    assert "content-encoding" not in f
    # HEAD: nothing compressed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"HEAD /text/5000 HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n"
                  b"Connection: close\r\n\r\n")
        head = s.recv(65536).lower()
    assert b"content-encoding" not in head and b"content-length: 5000" in head
    # the origin's strong ETag becomes weak, its Vary is kept and extended, Accept-Ranges goes
    status, f, body = h1(port, '/text/5000?h=ETag:%22v1%22&h=Vary:Origin&h=Accept-Ranges:bytes', ae)
    assert f["content-encoding"] == ["gzip"]
    assert f["etag"] == ['W/"v1"'] and "accept-ranges" not in f
    assert sorted(f["vary"]) == ["Accept-Encoding", "Origin"]


def test_route_without_compress_untouched(gateway, origin):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    status, f, body = h1(port, "/text/5000", [("Accept-Encoding", "gzip")])
    assert "content-encoding" not in f and "vary" not in f and body == text_pattern(5000)


def test_max_concurrent_sends_identity_beyond(gateway, origin):
    """compression.max_concurrent 1: while one slow response is compressed, another is sent
    as it is (with Vary), then compression works again."""
    port, admin = free_port(), free_port()
    gateway(zconfig(port, origin, extra="compression: {max_concurrent: 1}\n"
                                        f"admin: {{address: 127.0.0.1:{admin}}}\n"),
            wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    import threading
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("slow", h1(port, "/text-slow/50000",
                                                               [("Accept-Encoding", "gzip")])))
    t.start()
    # its compressor runs (a 0.5 s sleep here bet that the thread, the gateway and the origin
    # had got that far; the request below then took the one place)
    assert wait_sample(admin, "h2gate_compressors", 1) == 1
    status, f, body = h1(port, "/text/5000", [("Accept-Encoding", "gzip")])
    assert "content-encoding" not in f and f["vary"] == ["Accept-Encoding"]
    t.join(10)
    assert res["slow"][1]["content-encoding"] == ["gzip"]
    assert gzip.decompress(res["slow"][2]) == text_pattern(50000)
    status, f, body = h1(port, "/text/5000", [("Accept-Encoding", "gzip")])
    assert f["content-encoding"] == ["gzip"]


@pytest.mark.serial
def test_h2load_many_compressed_responses(zgw):
    r = run(["h2load", "-n", "2000", "-c", "10", "-m", "10", "-H", "accept-encoding: gzip",
             f"http://127.0.0.1:{zgw.port}/text/20000"], timeout=60)
    assert "2000 succeeded" in r.stdout, r.stdout
    assert "0 failed, 0 errored" in r.stdout


def test_config_errors(h2gate_bin, tmp_path):
    for text, want in [("compression: {gzip_level: 10}\n", "'gzip_level' is out of range"),
                       ("compression: {bogus: 1}\n", "unknown key 'bogus' in compression"),
                       ("compression: {types: ['text html']}\n", "must be a media type")]:
        config_refused(h2gate_bin, tmp_path, text, want)


# ---- coalescing: followers share the compressed bytes; one that falls behind replays -------------

def many_conns_gets(port, path, conns, per_conn, ae):
    """conns HTTP/2 connections with per_conn identical GETs each (sent in one flight per
    connection, the connections together): [(headers, body)] of every stream."""
    import select
    import h2.settings
    cls = []
    for _ in range(conns):
        cl = Client(port)
        cl.open_windows()
        cls.append(cl)
    state = {}
    for cl in cls:
        for _ in range(per_conn):
            sid = cl.c.get_next_available_stream_id()
            cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                    (":authority", "localhost"), ("accept-encoding", ae)],
                              end_stream=True)
            state[(id(cl), sid)] = [None, bytearray(), False]
    for cl in cls:
        cl.flush()
    by_sock = {cl.s: cl for cl in cls}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(v[2] for v in state.values()):
        r, _, _ = select.select(list(by_sock), [], [], 0.5)
        for sock in r:
            cl = by_sock[sock]
            data = sock.recv(1 << 20)
            if not data:
                del by_sock[sock]
                continue
            for e in cl.c.receive_data(data):
                k = (id(cl), getattr(e, "stream_id", 0))
                if isinstance(e, h2.events.ResponseReceived):
                    state[k][0] = dict(e.headers)
                elif isinstance(e, h2.events.DataReceived):
                    state[k][1] += e.data
                    cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                    state[k][2] = True
            cl.flush()
    for cl in cls:
        cl.close()
    return [(v[0], bytes(v[1])) for v in state.values()]


def zcoalesce_gateway(gateway, origin, admin, extra="", route_extra=""):
    port = free_port()
    g = gateway(zconfig(port, origin, route_extra=route_extra, log_level="debug",
                        extra=f"admin:\n  address: 127.0.0.1:{admin}\n" + extra),
                wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    g.port = port
    return g


@pytest.mark.parametrize("coding", CODINGS)
def test_coalesced_followers_share_compressed_bytes(gateway, origin, coding):
    """15 identical requests over 3 connections while the origin prepares its answer: one
    origin request, one compressor, the same compressed bytes to all, each decoding to the
    origin's body; the metrics count 14 shared."""
    from gwtest import origin_count, sample, scrape
    from origin import text_hex
    admin = free_port()
    g = zcoalesce_gateway(gateway, origin, admin)
    size = 300000
    path = f"/text-paced/{size}"
    res = many_conns_gets(g.port, path, 3, 5, coding)
    assert len(res) == 15
    bodies = set()
    for hd, body in res:
        assert hd[":status"] == "200" and hd["content-encoding"] == coding, hd
        assert decode(coding, body) == text_hex(size)
        bodies.add(body)
    assert len(bodies) == 1  # one stream of compressed bytes, shared
    assert origin_count(origin, path) == 1
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_compression_shared_total") == 14
    assert sample(fams, "h2gate_compressed_responses_total", coding=coding) == 1
    assert sample(fams, "h2gate_compression_bytes_total", coding=coding, direction="in") == size
    assert sample(fams, "h2gate_compression_bytes_total", coding=coding,
                  direction="out") == len(res[0][1])


def test_followers_of_another_coding_fetch_on_their_own(gateway, origin):
    """With coalesce_headers leaving Accept-Encoding out, requests that accept different codings
    join one exchange; at the head, the follower whose request gets another coding leaves
    and fetches on its own (two origin requests), and each gets its own coding."""
    from gwtest import origin_count
    from origin import text_hex
    port = free_port()
    gateway(zconfig(port, origin, route_extra="coalesce_headers: [x-none]"),
            wait=[("127.0.0.1", port)])
    size = 200000
    path = f"/text-paced/{size}"
    cl = Client(port)
    sids = {}
    for ae in ("gzip", "gzip", "br"):
        sids[cl.request(path, extra=[("accept-encoding", ae)])] = ae
    got = {sid: [None, b""] for sid in sids}
    ended = set()
    deadline = time.monotonic() + 20
    while len(ended) < 3 and time.monotonic() < deadline:
        for e in cl.c.receive_data(cl.s.recv(1 << 20)):
            if isinstance(e, h2.events.ResponseReceived):
                got[e.stream_id][0] = dict(e.headers)
            elif isinstance(e, h2.events.DataReceived):
                got[e.stream_id][1] += e.data
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                ended.add(e.stream_id)
        cl.flush()
    cl.close()
    for sid, ae in sids.items():
        hd, body = got[sid]
        assert hd["content-encoding"] == ae
        assert decode(ae, body) == text_hex(size)
    assert origin_count(origin, path) == 2


@pytest.mark.parametrize("coding", CODINGS)
def test_follower_behind_compressed_stream_detaches_and_replays(gateway, origin, coding):
    """A follower that reads nothing falls limits.coalesce_buffer behind the leader of a
    compressed response: it detaches and fetches on its own while the leader goes on. The
    bytes its client already has were cut by the first exchange's origin reads; its new
    exchange is fed the same pieces and makes the same bytes, so the client's stream decodes
    to exactly the origin's body."""
    import select
    import h2.settings
    from gwtest import origin_count
    from origin import text_hex
    admin = free_port()
    g = zcoalesce_gateway(gateway, origin, admin,
                          extra="limits:\n  body_buffer: 64KiB\n  coalesce_buffer: 128KiB\n")
    size = 3 << 20
    path = f"/text-paced/{size}"
    fast, slow = Client(g.port), Client(g.port)
    fast.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
    fast.c.increment_flow_control_window(1 << 30)
    slow.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384})
    fast.flush(), slow.flush()
    time.sleep(0.2)
    hdr = [("accept-encoding", coding)]
    fsid = fast.request(path, extra=hdr)
    ssid = slow.request(path, extra=hdr)
    bodies = {fast: bytearray(), slow: bytearray()}
    done = set()
    reading = {fast}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(done) < 2:
        r, _, _ = select.select([c.s for c in (fast, slow)], [], [], 0.2)
        for c in (fast, slow):
            if c.s not in r or (c is slow and slow not in reading):
                continue
            data = c.s.recv(1 << 20)
            assert data
            for e in c.c.receive_data(data):
                if isinstance(e, h2.events.ResponseReceived):
                    assert dict(e.headers)["content-encoding"] == coding
                elif isinstance(e, h2.events.DataReceived):
                    bodies[c] += e.data
                    if c is fast or slow in reading:
                        c.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    done.add(c)
                elif isinstance(e, h2.events.StreamReset):
                    raise AssertionError(f"stream reset: {e}")
            c.flush()
        if fast in done and slow not in reading:
            # the leader finished; the follower, 16 KiB in, starts reading now
            assert "event=coalesce_detach" in g.log()
            reading.add(slow)
            slow.c.increment_flow_control_window(1 << 30)
            slow.c.increment_flow_control_window(1 << 24, ssid)
            slow.flush()
    assert len(done) == 2, (len(bodies[fast]), len(bodies[slow]))
    want = text_hex(size)
    assert decode(coding, bytes(bodies[fast])) == want
    assert decode(coding, bytes(bodies[slow])) == want
    assert origin_count(origin, path) == 2
    assert fsid and ssid


def test_metrics_count_skips_by_cause_and_codings(gateway, origin):
    from gwtest import sample, scrape
    admin = free_port()
    g = zcoalesce_gateway(gateway, origin, admin)
    port = g.port
    h1(port, "/text/5000", [("Accept-Encoding", "deflate")])          # client
    h1(port, "/text/100", [("Accept-Encoding", "gzip")])              # small
    h1(port, "/bytes/5000", [("Accept-Encoding", "gzip")])            # type
    h1(port, "/text/5000?h=Set-Cookie:a%3Db", [("Accept-Encoding", "gzip")])  # private
    h1(port, "/text/5000?h=Cache-Control:no-transform", [("Accept-Encoding", "gzip")])
    h1(port, "/text/5000?h=Content-Encoding:br", [("Accept-Encoding", "gzip")])  # encoded
    h1(port, "/text/5000", [("Accept-Encoding", "gzip"), ("Range", "bytes=0-1")])
    h1(port, "/missing", [("Accept-Encoding", "gzip")])               # status (404)
    for ae in ("gzip", "br", "zstd", "zstd"):
        h1(port, "/text/5000", [("Accept-Encoding", ae)])
    fams, _ = scrape(admin)
    for cause in ("client", "small", "type", "private", "no_transform", "encoded", "range",
                  "status"):
        assert sample(fams, "h2gate_compression_skipped_total", cause=cause) == 1, cause
    assert sample(fams, "h2gate_compression_skipped_total", cause="busy") == 0
    for coding, n in (("gzip", 1), ("br", 1), ("zstd", 2)):
        assert sample(fams, "h2gate_compressed_responses_total", coding=coding) == n
        assert sample(fams, "h2gate_compression_bytes_total", coding=coding,
                      direction="in") == 5000 * n
        out = sample(fams, "h2gate_compression_bytes_total", coding=coding, direction="out")
        assert 0 < out < 5000 * n // 3, (coding, out)
    assert sample(fams, "h2gate_compressors") == 0
    assert sample(fams, "h2gate_compressor_memory_bytes") == 0


def slow_download(port, path, ae, pid):
    """One GET over h2 with a 16 KiB stream window, credited as the bytes are read (a slow,
    small-window client): (decoded length, sha256 of the decoded body, peak RSS KiB)."""
    import hashlib
    import h2.settings
    from procs import rss_kib
    cl = Client(port)
    cl.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384})
    cl.flush()
    extra = [("accept-encoding", ae)] if ae else []
    sid = cl.request(path, extra=extra)
    dec = Decoder(ae) if ae else None
    h, n, peak, done = hashlib.sha256(), 0, 0, False
    deadline = time.monotonic() + 120
    reads = 0
    while not done and time.monotonic() < deadline:
        data = cl.s.recv(16384)
        assert data
        for e in cl.c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                hd = dict(e.headers)
                assert hd.get("content-encoding") == ae, hd
            elif isinstance(e, h2.events.DataReceived):
                piece = dec.feed(e.data) if dec else e.data
                h.update(piece)
                n += len(piece)
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.StreamEnded):
                done = True
            elif isinstance(e, h2.events.StreamReset):
                raise AssertionError(e)
        cl.flush()
        reads += 1
        if reads % 64 == 0:
            peak = max(peak, rss_kib(pid))
    cl.close()
    assert done and sid
    return n, h.hexdigest(), peak


@pytest.mark.serial
def test_slow_small_window_client_32mib_rss_bounded(gateway, nginx_origin, tmp_path):
    """A 32 MiB text file from nginx, read by a client with a 16 KiB window: compressed (each
    coding) the gateway's RSS grows no more than sending it as it is, plus the compressor's
    own memory: the origin read pauses for the client exactly as without compression. The
    bound, 12 MiB, is under the compressed body (16 MiB) and the body as read from the origin
    (32 MiB): a gateway that did not pause its origin read would hold one or the other (the
    growth measured is 3 to 5 MiB, for each coding)."""
    import hashlib
    from procs import rss_kib, sanitized
    if sanitized():  # as test_proxy.py's RSS tests: ASan's quarantine makes RSS say nothing
        pytest.skip("sanitizer builds keep freed memory in quarantine: RSS says nothing")
    root = tmp_path / "www"
    root.mkdir()
    size = 32 << 20
    # hex digits of a hash chain: about 2:1, so the compressed body (16 MiB) is far more than
    # any buffer and the client's window, not the compressor, sets the pace
    with open(root / "big.txt", "wb") as f:
        h = b"seed"
        while f.tell() < size:
            block = []
            for _ in range(1000):
                h = hashlib.sha256(h).digest()
                block.append(h.hex().encode() + b"\n")
            f.write(b"".join(block))
        f.truncate(size)
    want = hashlib.sha256((root / "big.txt").read_bytes()).hexdigest()
    ng = nginx_origin(str(root))
    port = free_port()
    g = gateway(zconfig(port, ng), wait=[("127.0.0.1", port)])
    base = rss_kib(g.proc.pid)
    growth = {}
    for ae in (None, "gzip", "br", "zstd"):
        t0 = time.monotonic()
        n, digest, peak = slow_download(port, "/big.txt", ae, g.proc.pid)
        assert n == size and digest == want, ae
        growth[ae] = peak - base
        print(f"coding {ae}: {time.monotonic() - t0:.1f} s, RSS +{peak - base} KiB")
    for ae in ("gzip", "br", "zstd"):
        # the compressor's memory (about 2 MiB at most at the defaults) and allocator slack
        assert growth[ae] < growth[None] + 6 * 1024, growth
    assert max(growth.values()) < 12 * 1024, growth


@pytest.mark.parametrize("coding", CODINGS)
def test_trailers_pass_through_compressed(zgw, coding):
    """The origin's trailer follows the compressed body: over HTTP/2 a trailing HEADERS frame,
    over HTTP/1.1 (TE: trailers) the chunked trailer section."""
    import hashlib
    size = 50000
    want = text_pattern(size)
    digest = hashlib.sha256(want).hexdigest()
    cl = Client(zgw.port)
    sid = cl.request(f"/text-chunked/{size}?trailer=1",
                     extra=[("accept-encoding", coding), ("te", "trailers")])
    body, trailers, ended = b"", None, False
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        for e in cl.c.receive_data(cl.s.recv(1 << 20)):
            if isinstance(e, h2.events.ResponseReceived):
                assert dict(e.headers)["content-encoding"] == coding
            elif isinstance(e, h2.events.DataReceived):
                body += e.data
                cl.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.TrailersReceived):
                trailers = dict(e.headers)
            elif isinstance(e, h2.events.StreamEnded):
                ended = True
        cl.flush()
    cl.close()
    assert ended and sid
    assert decode(coding, body) == want
    assert trailers == {"x-checksum": digest}
    status, fields, out, tr = h1_full(zgw.port, f"/text-chunked/{size}?trailer=1",
                                      [("TE", "trailers"), ("Accept-Encoding", coding)])
    assert status == 200 and fields["content-encoding"] == [coding]
    assert decode(coding, out) == want
    assert tr == {"x-checksum": digest}


# ---- compression.max_memory: a worker's compressors are bounded together -------------------------

# room for two gzip compressors at these settings (each weighs about 262 KiB: zlib's
# 2^(15+2) + 2^(8+9) bytes and its state), not three
TWO_GZIP = "compression: {max_memory: 640KiB, gzip_window_bits: 15, gzip_mem_level: 8}\n"


def open_slow_h2(port, paths, headers_of=None):
    """One python3-h2 connection with a GET (accept-encoding: gzip) per path, read until every
    response head came: (client, [stream ids], {stream id: head})."""
    cl = Client(port)
    sids = [cl.request(p, extra=[("accept-encoding", "gzip")]) for p in paths]
    heads = {}

    def got_all(evs):
        for e in evs:
            if isinstance(e, h2.events.ResponseReceived):
                heads[e.stream_id] = dict(e.headers)
        return all(s in heads for s in sids)
    cl.events(got_all, timeout=10)
    assert all(s in heads for s in sids), heads
    return cl, sids, heads


def identity_while_full(port):
    """A compressible answer that finds max_memory taken: sent as it is, with Vary."""
    status, f, body = h1(port, "/text/5000", [("Accept-Encoding", "gzip")])
    assert status == 200 and "content-encoding" not in f, f
    assert f["vary"] == ["Accept-Encoding"] and body == text_pattern(5000)


def test_max_memory_sends_identity_beyond(gateway, origin):
    """Four slow compressible downloads at once with room for two compressors: two come back
    gzip, two as they are (with Vary), counted as `memory`, not `busy`; all four bodies are
    whole; once they are done the memory is back (gauges at 0, the next answer compressed)."""
    import threading
    from gwtest import sample, scrape
    admin = free_port()
    g = zcoalesce_gateway(gateway, origin, admin, extra=TWO_GZIP)
    res = {}

    def get(i):
        res[i] = h1(g.port, f"/text-slow/60000?i={i}", [("Accept-Encoding", "gzip")])
    ts = [threading.Thread(target=get, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    codings = sorted(r[1].get("content-encoding", ["identity"])[0] for r in res.values())
    assert codings == ["gzip", "gzip", "identity", "identity"], codings
    for status, f, body in res.values():
        assert status == 200 and f["vary"] == ["Accept-Encoding"]
        got = gzip.decompress(body) if "content-encoding" in f else body
        assert got == text_pattern(60000)
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_compression_skipped_total", cause="memory") == 2
    assert sample(fams, "h2gate_compression_skipped_total", cause="busy") == 0
    assert sample(fams, "h2gate_compressed_responses_total", coding="gzip") == 2
    assert sample(fams, "h2gate_compressors") == 0
    assert sample(fams, "h2gate_compressor_memory_bytes") == 0
    status, f, body = h1(g.port, "/text/5000", [("Accept-Encoding", "gzip")])
    assert f["content-encoding"] == ["gzip"] and gzip.decompress(body) == text_pattern(5000)


def test_max_memory_given_back_on_reset_client_gone_and_followers(gateway, origin):
    """The charge of a compressor comes back however its response ends early: HTTP/2 streams
    reset mid-body, HTTP/1.1 clients gone mid-body, and a coalesced response whose leader and
    followers (one compressor, one charge for all of them) all leave. After each, two new
    slow downloads are compressed again, and a third, meanwhile, is not."""
    from gwtest import sample, scrape
    admin = free_port()
    g = zcoalesce_gateway(gateway, origin, admin, extra=TWO_GZIP)
    port = g.port

    def given_back():
        """Every charge returned (a 0.3 s sleep here bet that the gateway had seen the resets
        and closes by then; the next two_compressed() then found the memory taken)."""
        assert wait_sample(admin, "h2gate_compressors", 0) == 0
        assert wait_sample(admin, "h2gate_compressor_memory_bytes", 0) == 0

    def two_compressed(tag):
        cl, sids, heads = open_slow_h2(port, [f"/text-slow/600000?{tag}={i}" for i in range(2)])
        assert [heads[s].get("content-encoding") for s in sids] == ["gzip", "gzip"], (tag, heads)
        identity_while_full(port)
        return cl, sids

    # HTTP/2 streams reset mid-body (the connection stays)
    cl, sids = two_compressed("a")
    for s in sids:
        cl.c.reset_stream(s)
    cl.flush()
    given_back()
    cl2, sids2 = two_compressed("b")
    cl.close()
    # the client goes away (the whole connection) mid-body
    cl2.close()
    given_back()
    # HTTP/1.1 clients gone mid-body
    socks = []
    for i in range(2):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(f"GET /text-slow/600000?c={i} HTTP/1.1\r\nHost: a\r\n"
                  "Accept-Encoding: gzip\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(65536)
        assert b"content-encoding: gzip" in head.lower(), head
        socks.append(s)
    identity_while_full(port)
    for s in socks:
        s.close()
    given_back()
    # a coalesced response: three identical requests share one compressor and one charge,
    # beside one more of their own; then everybody leaves
    cl = Client(port)
    paced = []
    for _ in range(3):  # in one write: the two followers find the leader's exchange
        paced.append(cl.c.get_next_available_stream_id())
        cl.c.send_headers(paced[-1], [(":method", "GET"), (":path", "/text-paced/3000000"),
                                      (":scheme", "http"), (":authority", "localhost"),
                                      ("accept-encoding", "gzip")], end_stream=True)
    cl.flush()
    time.sleep(0.1)  # they join while the origin prepares its head
    cl3, sids3, heads3 = open_slow_h2(port, ["/text-slow/600000?d=0"])
    heads = {}
    cl.events(lambda evs: [heads.setdefault(e.stream_id, dict(e.headers)) for e in evs
                           if isinstance(e, h2.events.ResponseReceived)] is None or
              len(heads) == 3, timeout=10)
    assert [heads[s].get("content-encoding") for s in paced] == ["gzip"] * 3, heads
    assert heads3[sids3[0]].get("content-encoding") == "gzip"
    identity_while_full(port)
    for s in paced:
        cl.c.reset_stream(s)
    cl.flush()
    cl3.close()
    given_back()
    cl4, sids4 = two_compressed("e")
    cl4.close()
    cl.close()
    given_back()
    fams, _ = scrape(admin)
    assert sample(fams, "h2gate_compression_shared_total") == 2
    assert sample(fams, "h2gate_compressors") == 0
    assert sample(fams, "h2gate_compressor_memory_bytes") == 0


def test_max_memory_config(h2gate_bin, tmp_path):
    for text, ok in [("compression: {max_memory: 64MiB}\n", True),
                     ("compression: {max_memory: 64KiB}\n", True),
                     ("compression: {max_memory: 1KiB}\n", "'max_memory' is out of range"),
                     ("compression: {max_memory: lots}\n", "'max_memory' must be a size")]:
        if ok is True:
            r = check_config(h2gate_bin, tmp_path, gw_config(free_port(), ["127.0.0.1:9"]) + text)
            assert r.returncode == 0, (text, r.stderr)
        else:
            config_refused(h2gate_bin, tmp_path, text, ok)
