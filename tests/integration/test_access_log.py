"""The access log (issue 21 item 4): one line per request, combined or JSON, written through a
buffer, reopened by SIGUSR1 without losing a line; the request id ties it to the origin."""
import json
import os
import re
import signal
import socket
import subprocess
import time

from conftest import free_port, h1_get, recv_all, run
from gwtest import gw_config


def alog_config(port, origin, path, fmt="json", extra="", tls_port=None, workers=1):
    return gw_config(port, [f"127.0.0.1:{origin.port}"], workers=workers, tls_port=tls_port,
                     extra=f"access_log:\n  path: {path}\n  format: {fmt}\n{extra}")


def lines_of(path, n, timeout=5):
    """The lines of the file once it has n (the buffer is flushed within a second)."""
    deadline = time.monotonic() + timeout
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
    for text, want in [("access_log: {format: xml}\n", "'format' must be combined or json"),
                       ("access_log: {bogus: 1}\n", "unknown key 'bogus' in access_log"),
                       ("admin: {}\n", "missing required key 'address' in admin")]:
        p = tmp_path / "c.yaml"
        p.write_text(gw_config(free_port(), ["127.0.0.1:9"]) + text)
        r = run([h2gate_bin, "--check-config", str(p)])
        assert r.returncode == 1 and want in r.stderr, (text, r.stderr)
        assert re.search(re.escape(str(p)) + r":\d+:\d+: ", r.stderr)


def test_requests_the_gateway_answers_itself_are_logged(gateway, origin, tmp_path):
    """A malformed HTTP/1.1 head (400), one over limits.max_request_head (431) and one not
    completed in time (408) are answered by the front itself: each still has its line."""
    port = free_port()
    log = str(tmp_path / "access.log")
    gateway(alog_config(port, origin, log,
                        extra="limits: {max_request_head: 2KiB}\ntimeouts: {header: 300ms}\n"),
            wait=[("127.0.0.1", port)])
    from conftest import raw_exchange
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
