"""HTTP/2 on the running gateway, at frame level with python3-h2 (an independent codec), and
with nghttp and h2load. Their upstream refuses connections, so routed requests get the gateway's own 502
(but for the HPACK policy's test, which has a scripted origin)."""
import os
import re
import signal
import time
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack
import pytest

from procs import free_port, run, slow
from gwtest import (NO_PROXY, config, Client, response, ended, terminated, raw_frames, goaway_code,
                    origin_gateway)
from gwtest import log_events


@pytest.fixture
def gw(gateway):
    tls_port, plain_port = free_port(), free_port()
    g = gateway(config(tls_port, plain_port, extra="h2: {max_concurrent_streams: 8}\n"
                       "access_log: {path: stderr, format: combined}\n"),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", plain_port)])
    g.tls_port, g.plain_port = tls_port, plain_port
    return g


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_settings_exchange_and_request(gw, tls):
    cl = Client(gw.tls_port if tls else gw.plain_port, tls=tls)
    sid = cl.request("/hello")
    evs = cl.events(ended(sid))
    assert isinstance(evs[0], h2.events.RemoteSettingsChanged)  # server preface first
    changed = evs[0].changed_settings
    assert changed[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS].new_value == 8
    assert changed[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE].new_value == 256 * 1024
    assert any(isinstance(e, h2.events.SettingsAcknowledged) for e in evs)
    status, body, done = response(evs, sid)
    assert (status, body.decode(), done) == ("502", NO_PROXY, True)
    cl.close()


def test_ping_is_acked(gw):
    cl = Client(gw.plain_port)
    cl.c.ping(b"h2gate!!")
    cl.flush()
    evs = cl.events(lambda e: any(isinstance(x, h2.events.PingAckReceived) for x in e))
    acks = [e for e in evs if isinstance(e, h2.events.PingAckReceived)]
    assert acks and acks[0].ping_data == b"h2gate!!"
    cl.close()


def test_many_streams_on_one_connection(gw):
    cl = Client(gw.plain_port)
    sids = [cl.request(f"/s{i}") for i in range(6)]
    evs = cl.events(lambda e: all(ended(s)(e) for s in sids))
    for s in sids:
        assert response(evs, s)[0] == "502"
    cl.close()


def test_upload_larger_than_windows_flows(gateway):
    """A 2 MiB body is more than the 256 KiB stream and 1 MiB connection windows: it only
    goes through if WINDOW_UPDATEs come back as the gateway consumes the bytes."""
    import hashlib
    import json
    from origin import ScriptedOrigin
    o = ScriptedOrigin().__enter__()
    port = free_port()
    gateway(config(plain_port=port).replace("127.0.0.1:9]", f"127.0.0.1:{o.port}]"),
            wait=[("127.0.0.1", port)])
    cl = Client(port)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                            (":authority", "localhost")])
    cl.flush()
    total, chunk = 2 * 1024 * 1024, b"x" * 16384
    sent = 0
    deadline = time.monotonic() + slow(10)
    updates = 0
    seen = []
    while sent < total and time.monotonic() < deadline:
        window = min(cl.c.local_flow_control_window(sid), cl.c.max_outbound_frame_size)
        if window <= 0:
            evs = cl.events(lambda e: any(isinstance(x, h2.events.WindowUpdated) for x in e), timeout=2)
            updates += sum(isinstance(x, h2.events.WindowUpdated) for x in evs)
            seen += evs
            if any(isinstance(x, h2.events.StreamReset) for x in evs):
                break
            continue
        n = min(window, len(chunk), total - sent)
        cl.c.send_data(sid, chunk[:n], end_stream=(sent + n == total))
        sent += n
        cl.flush()
    assert sent == total
    assert updates > 0
    # the rest of the body (up to the 1 MiB the windows let through) reaches the origin, which
    # hashes it and answers: waited for, scaled (it was 1 s, for a Python origin beside an
    # ASan gateway on a loaded machine)
    evs = seen + cl.events(ended(sid), timeout=slow(5))
    status, body, done = response(evs, sid)
    assert status == "200" and done
    got = json.loads(body)
    assert got["body_len"] == total
    assert got["body_sha1"] == hashlib.sha1(b"x" * total).hexdigest()
    cl.close()
    o.close()


def test_concurrency_limit_refuses_streams(gw):
    # Requests without END_STREAM stay open (half-closed remote never reached), so the 9th
    # stream exceeds max_concurrent_streams: 8 and is refused.
    cl = Client(gw.plain_port)
    sids = []
    for i in range(10):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", f"/{i}"), (":scheme", "http"),
                                (":authority", "localhost")])
        sids.append(sid)
    cl.flush()
    resets, evs = cl.wait_resets()
    assert resets, evs
    assert resets[0].error_code == h2.errors.ErrorCodes.REFUSED_STREAM
    assert resets[0].stream_id in sids[8:]
    cl.close()


def test_uppercase_header_name_is_stream_protocol_error(gw):
    cl = Client(gw.plain_port, validate=False)
    sid = cl.request("/", extra=[("X-Upper", "1")])
    cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    # the connection survives: a next request is answered
    sid2 = cl.request("/next")
    evs = cl.events(ended(sid2))
    assert response(evs, sid2)[0] == "502"
    cl.close()


def test_connection_specific_header_is_malformed(gw):
    cl = Client(gw.plain_port, validate=False)
    sid = cl.request("/", extra=[("connection", "keep-alive")])
    cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    cl.close()


def test_first_frame_not_settings_is_protocol_error(gw):
    ping = bytes([0, 0, 8, 0x6, 0, 0, 0, 0, 0]) + b"12345678"
    out = raw_frames(gw.plain_port, ping)
    assert goaway_code(out) == 0x1


def test_data_on_stream_zero_is_protocol_error(gw):
    settings = bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
    data0 = bytes([0, 0, 1, 0x0, 0, 0, 0, 0, 0]) + b"x"
    assert goaway_code(raw_frames(gw.plain_port, settings + data0)) == 0x1


def test_oversized_frame_is_frame_size_error(gw):
    settings = bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
    big = (20000).to_bytes(3, "big") + bytes([0x6, 0, 0, 0, 0, 0]) + b"\0" * 20000
    assert goaway_code(raw_frames(gw.plain_port, settings + big)) == 0x6


def test_window_update_overflow_is_flow_control_error(gw):
    """The GOAWAY's code, and the gateway's `event=h2_goaway` line names it as
    `h2_goaway_received` and `h2_request_refused` do, by its RFC 9113 name."""
    settings = bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
    wu = bytes([0, 0, 4, 0x8, 0, 0, 0, 0, 0]) + (0x7fffffff).to_bytes(4, "big")
    assert goaway_code(raw_frames(gw.plain_port, settings + wu)) == 0x3
    log = gw.wait_log("event=conn_close ")
    got = [(e["level"], e["code"]) for e in log_events(log, "h2_goaway")]
    assert got == [("info", "FLOW_CONTROL_ERROR")], got


def test_a_clients_goaway_is_logged_with_its_code_and_escaped_debug_data(gw):
    """A client that ends with an error code leaves a trace beyond `conn_close reason=h2_done`:
    `event=h2_goaway_received` at info with the code's name and the debug data (RFC 9113 §6.8),
    whose quote, newline and bytes past ASCII are escaped so the line stays one line of
    key=value pairs; a NO_ERROR GOAWAY is logged at debug. Of repeated GOAWAY frames only the
    first and the first with an error code are logged, and a long debug data is cut short."""
    cl = Client(gw.plain_port)
    sid = cl.request("/before-goaway")
    cl.events(ended(sid))
    peer = "127.0.0.1:%d" % cl.s.getsockname()[1]
    cl.c.close_connection(error_code=0, additional_data=b"bye now", last_stream_id=0)
    cl.c.close_connection(error_code=h2.errors.ErrorCodes.PROTOCOL_ERROR,
                          additional_data=b'bad "x-h"\nvalue \xff\\', last_stream_id=0)
    cl.c.close_connection(error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM,
                          additional_data=b"third", last_stream_id=0)
    cl.flush()
    cl.events(terminated, timeout=slow(3))
    cl.close()
    gw.wait_log(f"event=conn_close peer={peer}")
    got = [e for e in log_events(gw.log(), "h2_goaway_received") if e["peer"] == peer]
    assert [(e["level"], e["code"], e["debug"], e["debug_len"]) for e in got] == [
        ("debug", "NO_ERROR", '"bye now"', "7"),
        ("info", "PROTOCOL_ERROR", r'"bad \x22x-h\x22\x0avalue \xff\x5c"', "18"),
    ], got
    assert all(e["last_stream_id"] == "0" for e in got), got
    # a code RFC 9113 does not define, by its value; 300 bytes of debug data, the first 128
    cl = Client(gw.plain_port)
    peer = "127.0.0.1:%d" % cl.s.getsockname()[1]
    cl.c.close_connection(error_code=0xabc, additional_data=b"d" * 300)
    cl.flush()
    cl.events(terminated, timeout=slow(3))
    cl.close()
    log = gw.wait_log(f"event=conn_close peer={peer}")
    got = [e for e in log_events(log, "h2_goaway_received") if e["peer"] == peer]
    assert [(e["level"], e["code"], e["debug"], e["debug_len"]) for e in got] == [
        ("info", "0xabc", '"' + "d" * 128 + '"', "300")], got


def test_nghttp_client(gw):
    r = run(["nghttp", "-nv", f"http://127.0.0.1:{gw.plain_port}/n"], timeout=15)
    assert "recv (stream_id=1) :status: 502" in r.stdout or ":status: 502" in r.stdout
    r = run(["nghttp", "-v", f"https://127.0.0.1:{gw.tls_port}/n"], timeout=15)
    assert ":status: 502" in r.stdout
    assert NO_PROXY.strip() in r.stdout


@pytest.mark.serial
def test_h2load_many_requests(gw):
    r = run(["h2load", "-n", "400", "-c", "4", "-m", "8", f"http://127.0.0.1:{gw.plain_port}/"],
            timeout=60)
    req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                    r"(\d+) failed, (\d+) errored, (\d+) timeout", r.stdout)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", r.stdout)
    assert req and codes, r.stdout
    total, started, done, _ok, _failed, errored, timeout = map(int, req.groups())
    assert (total, started, done, errored, timeout) == (400, 400, 400, 0, 0), r.stdout
    # every request answered, by the gateway's own 502 (the origin refuses connections)
    assert tuple(map(int, codes.groups())) == (0, 0, 0, 400), r.stdout
    assert "status codes: 0 2xx, 0 3xx, 0 4xx, 400 5xx" in r.stdout


def test_h2_idle_timeout_sends_goaway(gateway):
    port = free_port()
    gateway(config(plain_port=port, extra="timeouts: {idle: 500ms}\n"), wait=[("127.0.0.1", port)])
    cl = Client(port)
    start = time.monotonic()
    evs = cl.events(terminated, timeout=5)
    t = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)]
    assert t and t[0].error_code == 0
    assert time.monotonic() - start < 3
    cl.close()


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_idle_connection_keeps_hpack_state(gw, tls):
    """A connection that went idle gives back its stream state and buffers (the session is
    compacted on the next read while idle); what the peer relies on stays. The second request
    repeats the first one's fields, so python3-h2 sends them as references into its dynamic
    table, which the gateway's decoder must still hold; the gateway's response fields come
    back as references into its encoder's table, which python3-h2 checks against its own."""
    cl = Client(gw.tls_port if tls else gw.plain_port, tls=tls)
    extra = [("x-idle-check", "first-request-value")]
    sid = cl.request("/idle-check", extra=extra)
    assert response(cl.events(ended(sid)), sid)[0] == "502"
    assert cl.c.encoder.header_table.dynamic_entries  # the fields were indexed
    for i in range(3):  # reads while idle: PINGs
        cl.c.ping(b"idle-%03d" % i)
        cl.flush()
        evs = cl.events(lambda e: any(isinstance(x, h2.events.PingAckReceived) for x in e))
        assert any(isinstance(e, h2.events.PingAckReceived) for e in evs)
    sid2 = cl.request("/idle-check", extra=extra)
    evs = cl.events(ended(sid2))
    assert not terminated(evs)
    status, body, done = response(evs, sid2)
    assert (status, body.decode(), done) == ("502", NO_PROXY, True)
    hdrs = [dict(e.headers) for e in evs if isinstance(e, h2.events.ResponseReceived)]
    assert hdrs and hdrs[0]["server"] == "h2gate"
    line = '"GET /idle-check HTTP/2.0" 502 '
    log = gw.wait_log(line, timeout=5)
    deadline = time.monotonic() + slow(5)
    while log.count(line) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        log = gw.log()
    assert log.count(line) == 2
    cl.close()


def test_h2c_response_is_a_gathered_write(tmp_path, h2gate_bin):
    """Frame headers and the DATA payload leave in one writev: the payload goes by reference
    from the buffer it was produced in (no copy into a flat output buffer)."""
    import shutil
    import subprocess
    if not shutil.which("strace"):
        pytest.skip("strace not installed")
    port = free_port()
    cfgp = tmp_path / "g.yaml"
    cfgp.write_text(config(plain_port=port))
    trace = tmp_path / "trace.txt"
    p = subprocess.Popen(["strace", "-f", "-s", "200", "-e", "trace=writev", "-o", str(trace),
                          h2gate_bin, "-c", str(cfgp)], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from procs import wait_port
        wait_port("127.0.0.1", port, proc=p, timeout=20)
        cl = Client(port)
        sid = cl.request("/gathered")
        evs = cl.events(ended(sid))
        assert response(evs, sid)[0] == "502"
        cl.close()
    finally:
        # stop the traced gateway itself; strace exits with it
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], stdout=subprocess.PIPE, text=True).stdout.split()
        for k in kids:
            os.kill(int(k), signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    text = trace.read_text()
    lines = [l for l in text.splitlines() if "writev(" in l and "the origin failed to answer" in l]
    assert lines, text[-3000:]
    # the payload is its own iovec next to the frame headers
    assert any(l.count("iov_base=") >= 2 and '"h2gate: the origin failed' in l for l in lines), lines


def test_rapid_reset_is_cut_off_and_logged(gateway):
    """CVE-2023-44487: a client that opens and resets streams in a loop exhausts the reset
    budget: GOAWAY ENHANCE_YOUR_CALM, and the hit is counted in the log."""
    port = free_port()
    g = gateway(config(plain_port=port, extra="h2: {reset_budget: 20, reset_window: 10s}\n"),
                wait=[("127.0.0.1", port)])
    cl = Client(port)
    for _ in range(60):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "POST"), (":path", "/"), (":scheme", "http"),
                                (":authority", "localhost")])
        cl.c.reset_stream(sid)
    try:
        cl.flush()
    except OSError:
        pass
    evs = cl.events(terminated, timeout=5)
    t = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)]
    assert t and t[0].error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    cl.close()
    deadline = time.monotonic() + slow(3)
    while "event=h2_limits" not in g.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "rapid_reset=1" in g.log()


def test_path_not_origin_form_and_control_bytes_are_malformed(gw):
    """Found by fuzz_translate: a :path without its leading '/' (RFC 9113 §8.3.1) and a field
    value with a control byte (RFC 9110 §5.5) used to go on to the origin; both are malformed
    requests now (RST_STREAM PROTOCOL_ERROR), as the HTTP/1.1 front's parser has them."""
    cl = Client(gw.plain_port, validate=False)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "GET"), (":path", "index.html"), (":scheme", "http"),
                            (":authority", "localhost")], end_stream=True)
    cl.flush()
    cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    sid = cl.request("/", extra=[("x-a", "b\x10c")])
    cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    sid = cl.request("/", extra=[("x-a", "b\x7fc")])
    cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    # OPTIONS * is the one path that is not origin-form
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "OPTIONS"), (":path", "*"), (":scheme", "http"),
                            (":authority", "localhost")], end_stream=True)
    cl.flush()
    evs = cl.events(ended(sid))
    assert response(evs, sid)[0] is not None
    cl.close()


def test_absolute_path_is_malformed(gw):
    """RFC 9113 §8.3.1: :path is origin-form (the authority is :authority's); an absolute URI
    there, which the HTTP/1.1 front accepts as a request-target (RFC 9112 §3.2.2), is a
    malformed request over HTTP/2: RST_STREAM PROTOCOL_ERROR, never routed or sent on."""
    cl = Client(gw.plain_port, validate=False)
    for path in ("http://localhost/", "HTTPS://localhost/x?q"):
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                (":authority", "localhost")], end_stream=True)
        cl.flush()
        cl.expect_reset(sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    sid = cl.request("/")  # the connection goes on
    assert response(cl.events(ended(sid)), sid)[0] is not None
    cl.close()


def test_response_fields_indexed_unless_volatile_or_sensitive(gateway, origin):
    """The gateway's HPACK encoder puts the fields of its answers in its dynamic table, so that
    a connection that gets the same resource again gets them as one byte each, except age (new
    on nearly every answer: a literal without indexing) and set-cookie (never indexed, RFC 7541
    §7.1.3). python3-h2's decoder, not ours, decodes every answer to what the origin sent, and
    its dynamic table, which mirrors the gateway's encoder's, holds what was indexed."""
    g = origin_gateway(gateway, origin)
    cl = Client(g.port)
    for i, n in enumerate((100, 2000, 100)):
        fields = {"etag": f'"v{n}-{i}"', "last-modified": f"Mon, 0{i + 1} Dec 2026 10:00:00 GMT",
                  "cache-control": "max-age=60", "vary": "accept-encoding", "age": str(7 + i),
                  "set-cookie": f"id={i}; Secure"}
        q = "&".join(f"h={k}:{urllib.parse.quote(v)}" for k, v in fields.items())
        sid = cl.request(f"/text/{n}?{q}")
        evs = cl.events(ended(sid))
        status, body, done = response(evs, sid)
        assert (status, len(body), done) == ("200", n, True)
        hdrs = [e.headers for e in evs if isinstance(e, h2.events.ResponseReceived)][0]
        got = dict(hdrs)
        want = {**fields, "content-length": str(n), "content-type": "text/plain; charset=utf-8"}
        assert {k: got.get(k) for k in want} == want
        cookie = [h for h in hdrs if h[0] == "set-cookie"]
        assert len(cookie) == 1 and isinstance(cookie[0], hpack.NeverIndexedHeaderTuple)
    table = {}
    for name, value in cl.c.decoder.header_table.dynamic_entries:
        table.setdefault(name.decode(), []).append(value.decode())
    for name in ("cache-control", "vary", "content-type", "via"):
        assert len(table.get(name, [])) == 1, table  # added once, then referred to
    assert sorted(table["content-length"]) == ["100", "2000"], table
    assert len(table["etag"]) == 3 and len(table["last-modified"]) == 3, table
    for name in ("age", "set-cookie"):
        assert name not in table, table
    cl.close()
