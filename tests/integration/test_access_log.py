"""The access log: one line per request, combined or JSON, written through a
buffer, reopened by SIGUSR1 without losing a line; the request id ties it to the origin."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from procs import free_port, h1_get, recv_all, run, slow
from gwtest import config_refused, gw_config, wait_origin_has


def alog_config(port, origin, path, fmt="json", extra="", tls_port=None, workers=1):
    return gw_config(port, [f"127.0.0.1:{origin.port}"], workers=workers, tls_port=tls_port,
                     extra=f"access_log:\n  path: {path}\n  format: {fmt}\n{extra}")


def lines_of(path, n, timeout=None):
    """The lines of the file once it has n (the buffer is flushed within a second), or as they
    are after timeout (by default 5 s, scaled for a sanitizer build: procs.slow(); a timeout
    given is kept as it is, to watch for a line that must not come)."""
    deadline = time.monotonic() + (slow(5) if timeout is None else timeout)
    while True:
        text = open(path, encoding="utf-8", errors="strict").read() if os.path.exists(path) else ""
        lines = text.split("\n")[:-1]  # JSON may hold U+2028, which splitlines() splits on
        if len(lines) >= n or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_json_lines_one_per_request_with_every_field(gateway, origin, tmp_path):
    """HTTP/1.1, h2c and HTTP/2 over TLS requests give one JSON line each, with the request id
    the origin saw and the client got back."""
    port, tls_port = free_port(), free_port()
    log = str(tmp_path / "access.log")
    g = gateway(alog_config(port, origin, log, tls_port=tls_port),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    r1 = run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "-H", "x-request-id: client-id.1",
              "-A", "agent/1", "-e", "http://ref.example/", f"http://127.0.0.1:{port}/bytes/100"])
    r2 = run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--http2-prior-knowledge",
              f"http://127.0.0.1:{port}/bytes/200"])
    r3 = run(["curl", "-sS", "-k", "-D", "-", "-o", "/dev/null", "--http2",
              f"https://localhost:{tls_port}/status/404"])
    for r in (r1, r2, r3):
        assert r.returncode == 0, r.stderr
    lines = lines_of(log, 3)
    assert len(lines) == 3, lines
    recs = [json.loads(l) for l in lines]
    by_path = {r["path"]: r for r in recs}
    a, b, c = by_path["/bytes/100"], by_path["/bytes/200"], by_path["/status/404"]
    assert a["protocol"] == "http/1.1" and a["status"] == 200 and a["bytes_sent"] == 100
    assert a["request_id"] == "client-id.1"
    assert a["user_agent"] == "agent/1" and a["referer"] == "http://ref.example/"
    assert "x-request-id: client-id.1" in r1.stdout.lower()
    assert b["protocol"] == "h2" and b["status"] == 200 and b["bytes_sent"] == 200
    assert re.fullmatch(r"[0-9a-f]{32}", b["request_id"])
    assert f"x-request-id: {b['request_id']}" in r2.stdout.lower()
    assert c["protocol"] == "h2" and c["status"] == 404 and c["tls_version"] == "TLSv1.3"
    assert c["tls_cipher"] and c["sni"] == "localhost"
    for rec in recs:
        assert rec["client"] == "127.0.0.1" and isinstance(rec["client_port"], int)
        assert rec["method"] == "GET" and rec["upstream"] == "app" and rec["route"] == "*/"
        assert rec["upstream_server"] == f"127.0.0.1:{origin.port}"
        assert rec["duration_ms"] >= rec["time_to_head_ms"] >= rec["upstream_header_ms"] >= 0
        assert rec["retries"] == 0 and rec["coalesced"] is False and rec["h2_error"] is None
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["time"])
    # the first request opened the origin connection: its connect time is known
    assert sum(r["upstream_connect_ms"] is not None for r in recs) >= 1
    seen = [q.header("x-request-id") for q in origin.requests]
    assert seen == [r["request_id"] for r in recs] or sorted(seen) == sorted(
        r["request_id"] for r in recs)
    assert "event=request " not in g.log()  # the access log replaces the per-request event


def test_hostile_bytes_are_escaped(gateway, origin, tmp_path):
    """Quotes, backslashes, bytes that are not UTF-8, a U+2028 and very long values give lines
    that parse, in both formats; a forged request id is replaced. (Control bytes in values no
    longer get this far: both fronts refuse them, test_h2.py; the record's escaping of them is
    unit-tested, test_common_alog.c, and fuzzed, fuzz_alog.)"""
    import h2.events
    from gwtest import Client
    for fmt in ("json", "combined"):
        port = free_port()
        log = str(tmp_path / f"access-{fmt}.log")
        g = gateway(alog_config(port, origin, log, fmt=fmt), wait=[("127.0.0.1", port)])
        # HTTP/1.1: obs-text (RFC 9110 §5.5) but no control bytes
        ua = b'a"b\\c\xff\xfe\xc3\xa9 ' + b"z" * 20000
        req = (b"GET /bytes/10 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: " + ua +
               b"\r\nReferer: \"quoted\"\r\nx-request-id: evil id\"\r\nConnection: close\r\n\r\n")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(req)
            resp = recv_all(s)
        assert resp.startswith(b"HTTP/1.1 200"), resp[:200]
        # HTTP/2: a line separator and bytes that are not UTF-8 in a value
        cl = Client(port, validate=False)
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "GET"), (":path", "/bytes/3"), (":scheme", "http"),
                                (":authority", "localhost"),
                                ("user-agent", b"x\xe2\x80\xa8y\xffz")], end_stream=True)
        cl.flush()
        cl.events(lambda es: any(isinstance(e, h2.events.StreamEnded) for e in es))
        cl.close()
        raw = lines_of(log, 2)
        assert len(raw) == 2, raw
        data = open(log, "rb").read()
        assert data.count(b"\n") == 2
        assert not any(c in data for c in (b"\x01", b"\x1b", b"\x7f", b"\xff"))
        assert len(data) < 12000  # every value cut at 4 KiB
        if fmt == "json":
            h2r, h1 = sorted((json.loads(l) for l in raw), key=lambda r: r["protocol"])
            assert h2r["protocol"] == "h2" and h1["protocol"] == "http/1.1"
            assert h1["user_agent"].startswith('a"b\\c\ufffd\ufffd\u00e9 zzz')
            assert len(h1["user_agent"]) < 4100
            assert h1["referer"] == '"quoted"'
            assert re.fullmatch(r"[0-9a-f]{32}", h1["request_id"])  # not the client's
            assert h2r["user_agent"] == "x\u2028y\ufffdz"
        else:
            h1 = [l for l in raw if "HTTP/1.1" in l][0]
            h2l = [l for l in raw if "HTTP/2.0" in l][0]
            m = re.fullmatch(r'127\.0\.0\.1 - - \[[^\]]+\] "GET /bytes/10 HTTP/1\.1" 200 10 '
                             r'"\\x22quoted\\x22" "a\\x22b\\x5cc\\xff\\xfe\\xc3\\xa9 z+"', h1)
            assert m, h1[:300]
            assert h2l.endswith('"GET /bytes/3 HTTP/2.0" 200 3 "-" '
                                '"x\\xe2\\x80\\xa8y\\xffz"'), h2l
        g.stop()


@pytest.mark.serial
def test_n_requests_under_load_give_n_lines(gateway, origin, tmp_path):
    """h2load: 2,000 requests over 20 connections, two workers: 2,000 lines, all parse."""
    port = free_port()
    log = str(tmp_path / "access.log")
    gateway(alog_config(port, origin, log, workers=2, extra=""), wait=[("127.0.0.1", port)])
    r = run(["h2load", "-n", "2000", "-c", "20", "-m", "5", f"http://127.0.0.1:{port}/bytes/64"],
            timeout=60)
    assert "2000 succeeded" in r.stdout, r.stdout
    lines = lines_of(log, 2000)
    assert len(lines) == 2000
    recs = [json.loads(l) for l in lines]
    assert all(r["status"] == 200 and r["bytes_sent"] == 64 for r in recs)
    assert len({r["request_id"] for r in recs}) == 2000  # unique ids


def test_reopen_after_mv_loses_nothing(gateway, origin, tmp_path):
    """logrotate's way: mv the file, SIGUSR1; the lines after go to a new file of the same
    name, and the two files hold every request once."""
    port = free_port()
    log = str(tmp_path / "access.log")
    g = gateway(alog_config(port, origin, log, fmt="combined"), wait=[("127.0.0.1", port)])
    for i in range(20):
        assert h1_get(port, f"/bytes/{i + 1}").startswith(b"HTTP/1.1 200")
    first = lines_of(log, 20)
    assert len(first) == 20
    os.rename(log, log + ".1")
    for i in range(20, 25):  # still in the old file (same inode) or in the buffer
        assert h1_get(port, f"/bytes/{i + 1}").startswith(b"HTTP/1.1 200")
    g.signal(signal.SIGUSR1)
    g.wait_log("action=reopen_logs result=ok")
    for i in range(25, 40):
        assert h1_get(port, f"/bytes/{i + 1}").startswith(b"HTTP/1.1 200")
    new = lines_of(log, 15)
    old = open(log + ".1").read().splitlines()
    paths = sorted(int(re.search(r'"GET /bytes/(\d+) ', l).group(1)) for l in old + new)
    assert paths == list(range(1, 41))
    assert len(new) >= 15  # everything after the reopen is in the new file


def test_access_log_off_by_default_and_bad_path_refused(gateway, origin, tmp_path, h2gate_bin):
    """Without access_log nothing is written per request; a path that cannot be opened is
    refused at start with its reason."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    assert h1_get(port, "/bytes/5").startswith(b"HTTP/1.1 200")
    time.sleep(1.2)
    assert "/bytes/5" not in g.log()
    bad = tmp_path / "bad.yaml"
    bad.write_text(alog_config(free_port(), origin, "/nonexistent-dir/access.log"))
    r = subprocess.run([h2gate_bin, "-c", str(bad)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert re.search(r'event=startup_failed error="' + re.escape(str(bad)) + r":\d+:\d+: "
                     r"access_log path '/nonexistent-dir/access.log' cannot be opened for "
                     r'appending: No such file or directory"', r.stderr), r.stderr


def test_config_errors(h2gate_bin, tmp_path):
    for text, want in [("access_log: {format: xml}\n", "'format' must be combined, combined_timing or json"),
                       ("access_log: {bogus: 1}\n", "unknown key 'bogus' in access_log"),
                       ("admin: {}\n", "missing required key 'address' in admin")]:
        config_refused(h2gate_bin, tmp_path, text, want)


def test_requests_the_gateway_answers_itself_are_logged(gateway, origin, tmp_path):
    """A malformed HTTP/1.1 head (400), one over limits.max_request_head (431) and one not
    completed in time (408) are answered by the front itself: each still has its line."""
    port = free_port()
    log = str(tmp_path / "access.log")
    gateway(alog_config(port, origin, log,
                        extra="limits: {max_request_head: 2KiB}\ntimeouts: {header: 300ms}\n"),
            wait=[("127.0.0.1", port)])
    from procs import raw_exchange
    assert raw_exchange(port, b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    assert raw_exchange(port, b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 4096 +
                        b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n")
        assert recv_all(s).startswith(b"HTTP/1.1 408")
    recs = [json.loads(l) for l in lines_of(log, 3)]
    assert sorted(r["status"] for r in recs) == [400, 408, 431]
    assert all(r["protocol"] == "http/1.1" and r["route"] is None for r in recs)


def h2_refusals(port):
    """On one h2c connection (the gateway's h2.max_concurrent_streams 1, max_header_list_size
    1 KiB): a stream over the limit (REFUSED_STREAM), the client's reset of the stream that held
    the slot, a malformed request (PROTOCOL_ERROR), a head over the list size (431), then an
    answered request. Returns the events."""
    import h2.events
    from gwtest import Client
    cl = Client(port, validate=False)
    hold = cl.request("/hang")
    over = cl.request("/bytes/1")  # sent before the gateway's SETTINGS could be read
    cl.expect_reset(over, 7)  # REFUSED_STREAM
    cl.c.reset_stream(hold, error_code=8)  # CANCEL
    cl.c.ping(b"freeslot")  # its ACK comes once the reset was read (and the slot given back)
    cl.flush()
    cl.events(lambda es: any(isinstance(e, h2.events.PingAckReceived) for e in es))
    bad = cl.request("/a", method="BR@W")
    cl.expect_reset(bad, 1)  # PROTOCOL_ERROR
    big = cl.request("/big", extra=[("x-big", "b" * 2000)])
    evs = cl.events(lambda es: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == big
                                   for e in es))
    assert any(isinstance(e, h2.events.ResponseReceived) and e.stream_id == big and
               dict(e.headers)[":status"] == "431" for e in evs), evs
    ok = cl.request("/bytes/10")
    cl.events(lambda es: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == ok
                             for e in es))
    cl.close()


def test_http2_requests_refused_or_reset_have_their_line(gateway, origin, tmp_path):
    """Every HTTP/2 request the gateway answered or reset has one line, including those the
    session refuses before the proxy sees them (a malformed request reset with PROTOCOL_ERROR
    wrote none): JSON gives status 0 and the code; combined the status nginx would log (400
    malformed, 503 refused, 499 reset by the client), which log readers accept where 0 is not."""
    for fmt in ("json", "combined"):
        port = free_port()
        log = str(tmp_path / f"access-{fmt}.log")
        g = gateway(alog_config(port, origin, log, fmt=fmt,
                                extra="h2: {max_concurrent_streams: 1, "
                                      "max_header_list_size: 1KiB}\n"),
                    wait=[("127.0.0.1", port)])
        h2_refusals(port)
        lines = lines_of(log, 5)
        time.sleep(0.3)
        assert len(lines_of(log, 6, timeout=0.5)) == 5, lines  # one each, no more
        if fmt == "json":
            recs = {r["path"]: r for r in map(json.loads, lines)}
            assert {p: (r["method"], r["status"], r["h2_error"]) for p, r in recs.items()} == {
                "/bytes/1": ("GET", 0, "REFUSED_STREAM"), "/hang": ("GET", 0, "CANCEL"),
                "/a": ("BR@W", 0, "PROTOCOL_ERROR"), "/big": ("GET", 431, None),
                "/bytes/10": ("GET", 200, None)}
            assert all(r["protocol"] == "h2" and r["request_id"] for r in recs.values())
        else:
            got = sorted(re.search(r'"(\S+ \S+) HTTP/2\.0" (\d+) ', l).groups() for l in lines)
            assert got == [("BR@W /a", "400"), ("GET /big", "431"), ("GET /bytes/1", "503"),
                           ("GET /bytes/10", "200"), ("GET /hang", "499")], got
        g.stop()


def test_http2_tls_closed_with_a_request_open_logs_its_tls(gateway, origin, tmp_path):
    """A client that drops its HTTP/2 connection over TLS while a request waits for the origin
    gets that request's line, with the connection's TLS version, cipher and name: the line is
    made before the connection's TLS state is freed (the sanitizer build saw it read after)."""
    from gwtest import Client
    port, tls_port = free_port(), free_port()
    log = str(tmp_path / "access.log")
    gateway(alog_config(port, origin, log, tls_port=tls_port),
            wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    cl = Client(tls_port, tls=True)
    cl.request("/late/2000/10")
    # the stream reached the proxy, which waits for the origin's head (a 0.3 s sleep here
    # could end before a loaded sanitizer build had read the HEADERS: no request, no line)
    assert wait_origin_has(origin, "/late/2000/10") == 1
    cl.close()
    lines = lines_of(log, 1)
    assert len(lines) == 1, lines
    rec = json.loads(lines[0])
    assert rec["path"] == "/late/2000/10" and rec["protocol"] == "h2" and rec["status"] == 0
    assert rec["tls_version"] == "TLSv1.3" and rec["tls_cipher"] and rec["sni"] == "localhost"


def test_bad_http1_requests_log_the_request_line(gateway, origin, tmp_path):
    """A request refused before its head was whole logs the request line as received (escaped
    and bounded, nginx's $request), or "-" when none came; never "- - HTTP/1.1". HTTP/1.0
    requests say HTTP/1.0."""
    from procs import raw_exchange
    port = free_port()
    log = str(tmp_path / "access.log")
    gateway(alog_config(port, origin, log, fmt="combined",
                        extra="limits: {max_request_head: 2KiB}\ntimeouts: {header: 300ms}\n"),
            wait=[("127.0.0.1", port)])
    cases = [
        (b"BR@W /pot HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400),
        (b"G\x01T /esc\"aped HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /" + b"t" * 3000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414),
        (b"GET /h HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 3000 + b"\r\n\r\n", 431),
        (b"GET /bytes/2 HTTP/1.0\r\nHost: a\r\n\r\n", 200),
    ]
    for req, status in cases:
        # after a first request on the connection: the second request's line is its own
        out = raw_exchange(port, b"GET /bytes/1 HTTP/1.1\r\nHost: a\r\n\r\n" + req)
        assert f"HTTP/1.1 {status} ".encode() in out, (req[:40], out[-300:])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /slow-head HTTP/1.1\r\nHost: a\r\n")
        assert recv_all(s).startswith(b"HTTP/1.1 408")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        # after a request, an empty line (RFC 9112 §2.2) and nothing more
        s.sendall(b"GET /bytes/1 HTTP/1.1\r\nHost: a\r\n\r\n\r\n")
        out = recv_all(s)
        assert out.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 408" in out, out
    lines = lines_of(log, 2 * len(cases) + 3)
    refused = [l for l in lines if "/bytes/1 " not in l]
    want = ['"BR@W /pot HTTP/1.1" 400 ', '"GET /x HTTP/1.1" 400 ',
            '"G\\x01T /esc\\x22aped HTTP/1.1" 400 ', '"GET /' + "t" * 2043 + '" 414 ',
            '"GET /h HTTP/1.1" 431 ', '"GET /bytes/2 HTTP/1.0" 200 2 ',
            '"GET /slow-head HTTP/1.1" 408 ', '"-" 408 ']
    assert len(refused) == len(want), refused
    for w in want:
        assert sum(w in l for l in refused) == 1, (w, refused)
    assert not any("- - HTTP/1.1" in l for l in lines)
    assert sum('"GET /bytes/1 HTTP/1.1" 200 1 ' in l for l in lines) == len(cases) + 1


def test_combined_timing_lines_and_goaccess(gateway, origin, tmp_path):
    """combined_timing: combined, then request time, upstream connect, header and response
    times and the request id; `-` where the gateway answered itself. goaccess (when installed)
    reads every line with the log-format string config/README.md documents."""
    import shutil
    port, dead = free_port(), free_port()
    log = str(tmp_path / "access.log")
    text = (f"workers: 1\nlog_level: info\nlisten:\n  - address: 127.0.0.1:{port}\n"
            f"upstreams:\n  app:\n    servers: [127.0.0.1:{origin.port}]\n"
            f"  gone:\n    servers: [127.0.0.1:{dead}]\n    retries: 0\n"
            "routes:\n  - {host: '*', path: /status/, upstream: app, request_rate: 1, "
            "request_burst: 1}\n  - {host: '*', path: /gone/, upstream: gone}\n"
            "  - {host: '*', path: /, upstream: app}\n"
            f"access_log: {{path: {log}, format: combined_timing}}\n")
    gateway(text, wait=[("127.0.0.1", port)])
    codes = []
    for args in (["--http1.1", "/bytes/100"], ["--http2-prior-knowledge", "/bytes/200"],
                 ["--http1.1", "/gone/x"], ["--http1.1", "-X", "BREW", "/echo"]):
        r = run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *args[:-1],
                 f"http://127.0.0.1:{port}{args[-1]}"])
        codes.append(r.stdout)
    assert codes == ["200", "200", "502", "200"], codes
    from procs import raw_exchange
    # request_rate 1/s, burst 1: the second of two back-to-back requests is the gateway's 429
    out = raw_exchange(port, b"GET /status/200 HTTP/1.1\r\nHost: a\r\n\r\n"
                             b"GET /status/201 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 429 " in out, out
    assert raw_exchange(port, b"BR@W / HTTP/1.1\r\nHost: a\r\n\r\n").startswith(b"HTTP/1.1 400")
    lines = lines_of(log, 7)
    assert len(lines) == 7, lines
    num = r"(\d+\.\d{3})"
    pat = re.compile(r'127\.0\.0\.1 - - \[[^\]]+\] "([^"]*)" (\d{3}) (\d+) "[^"]*" "[^"]*" ' + num +
                     r" (-|\d+\.\d{3}) (-|\d+\.\d{3}) (-|\d+\.\d{3}) (-|[0-9a-f]{32})"
                     # the client certificate's verification and subject: none in cleartext
                     r' "-" "-"$')
    recs = {}
    for l in lines:
        m = pat.fullmatch(l)
        assert m, l
        recs[m.group(1)] = m.groups()[1:]
    ok = recs["GET /bytes/100 HTTP/1.1"]
    assert ok[0] == "200" and ok[1] == "100" and "-" not in ok[3:6] and ok[6] != "-"
    assert float(ok[2]) >= float(ok[5]) >= float(ok[4])  # request ≥ response ≥ header time
    assert recs["GET /bytes/200 HTTP/2.0"][0] == "200"
    gone = recs["GET /gone/x HTTP/1.1"]  # tried, no answer: connect time, no header time
    assert gone[0] == "502" and gone[3] != "-" and gone[4] == "-"
    limited = recs["GET /status/201 HTTP/1.1"]  # answered by the gateway: no origin times
    assert limited[0] == "429" and limited[3:6] == ("-", "-", "-") and limited[6] != "-"
    assert recs["BREW /echo HTTP/1.1"][0] == "200"
    bad = recs["BR@W / HTTP/1.1"]
    assert bad[0] == "400" and bad[3:7] == ("-", "-", "-", "-")
    if not shutil.which("goaccess"):
        pytest.skip("goaccess not installed")
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "config", "README.md")).read()
    fmt = re.search(r"--log-format='([^']+)'", readme).group(1)
    out = str(tmp_path / "report.json")
    r = run(["goaccess", log, "--log-format=" + fmt, "--date-format=%d/%b/%Y",
             "--time-format=%T", "-o", out])
    assert r.returncode == 0, r.stderr
    general = json.load(open(out))["general"]
    assert general["total_requests"] == 7 and general["valid_requests"] == 7, general
    assert general["failed_requests"] == 0


def test_http10_requests_say_http10(gateway, origin, tmp_path):
    """An HTTP/1.0 request, over TLS (ALPN http/1.0) or in cleartext, is logged as HTTP/1.0
    (it said HTTP/1.1), and answered with an HTTP/1.1 status line (RFC 9110 §6.2)."""
    for fmt in ("combined", "json"):
        port, tls_port = free_port(), free_port()
        log = str(tmp_path / f"access-{fmt}.log")
        g = gateway(alog_config(port, origin, log, fmt=fmt, tls_port=tls_port),
                    wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
        for url in (f"https://localhost:{tls_port}/bytes/7", f"http://127.0.0.1:{port}/bytes/8"):
            r = run(["curl", "-sS", "-k", "-i", "--http1.0", url])
            assert r.stdout.startswith("HTTP/1.1 200 OK"), (url, r.stdout[:200], r.stderr)
        lines = lines_of(log, 2)
        if fmt == "combined":
            assert sorted(re.search(r'"GET (/bytes/\d) (HTTP/1\.\d)" 200 ', l).groups()
                          for l in lines) == [("/bytes/7", "HTTP/1.0"), ("/bytes/8", "HTTP/1.0")]
        else:
            assert sorted((json.loads(l)["protocol"], json.loads(l)["tls_version"] is None)
                          for l in lines) == [("http/1.0", False), ("http/1.0", True)]
        g.stop()


def test_log_format_template(gateway, origin, tmp_path, h2gate_bin):
    """access_log.log_format: nginx-style variables, escaped values, `-` for what is unknown;
    an unknown variable is refused with its place."""
    port = free_port()
    log = str(tmp_path / "access.log")
    fmt = "$remote_addr [$time_iso8601] \\\"$request\\\" $status $body_bytes_sent " \
          "up=$upstream_addr uct=$upstream_connect_time rt=$request_time route=$route " \
          "ssl=$ssl_protocol ua=\\\"$http_user_agent\\\" id=${request_id}."
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"],
                      extra=f"access_log:\n  path: {log}\n  log_format: \"{fmt}\"\n"),
            wait=[("127.0.0.1", port)])
    r = run(["curl", "-sS", "-o", "/dev/null", "-A", 'a"b', "-H", "x-request-id: r-1",
             f"http://127.0.0.1:{port}/bytes/5"])
    assert r.returncode == 0, r.stderr
    line = lines_of(log, 1)[0]
    m = re.fullmatch(r'127\.0\.0\.1 \[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\] "GET /bytes/5 '
                     r'HTTP/1\.1" 200 5 up=127\.0\.0\.1:(\d+) uct=\d+\.\d{3} rt=\d+\.\d{3} '
                     r'route=\*/ ssl=- ua="a\\x22b" id=r-1\.', line)
    assert m and int(m.group(1)) == origin.port, line
    bad = tmp_path / "bad.yaml"
    bad.write_text(gw_config(free_port(), ["127.0.0.1:9"],
                             extra="access_log:\n  log_format: '$status $statuz'\n"))
    r = run([h2gate_bin, "--check-config", str(bad)])
    assert r.returncode == 1
    assert f"{bad}:" in r.stderr and "access_log 'log_format': unknown variable at byte 8 " \
        "('$statuz')" in r.stderr, r.stderr
