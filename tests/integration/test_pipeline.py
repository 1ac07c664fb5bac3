"""HTTP/1.1 pipelining to origins (upstream `pipeline`, RFC 9112 §9.3.2), against nginx.

python3-h2 sends many requests for different files on one HTTP/2 connection; the gateway
pipelines them over a small pool. Every answer must be its own request's (bodies compared
byte for byte, HEAD answers without body), nginx's `$pipe` must show that requests really
were pipelined, and the pool cap must hold. h2load adds volume."""
import hashlib
import random

import pytest

from procs import free_port, run
from gwtest import Fetcher, gw_config


@pytest.fixture
def files(tmp_path, nginx_origin):
    root = tmp_path / "www"
    root.mkdir()
    rnd = random.Random(8)
    data = {}
    for i in range(150):
        data[f"/f{i}.bin"] = rnd.randbytes(rnd.randint(0, 12000))
    data["/big.bin"] = rnd.randbytes(1200000)  # over 1 MiB: nothing waits behind it
    for path, body in data.items():
        (root / path[1:]).write_bytes(body)
    n = nginx_origin(str(root))
    n.data = data
    return n


def start(gateway, n, upstream_extra):
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{n.port}"], upstream_extra,
                      route_extra="coalesce: false"), wait=[("127.0.0.1", port)])
    return port


def test_pipelined_answers_match_their_requests(gateway, files):
    port = start(gateway, files, "max_connections: 2\npipeline: 8")
    f = Fetcher(port)
    small = sorted(p for p in files.data if p != "/big.bin")
    rnd = random.Random(1)
    total = bigs = 0
    # three rounds of small files, then one with big.bin among them: the requests behind a
    # big.bin are moved off its connection, and pipelining to that server pauses for a second
    for rnd_no in range(4):
        paths = small + ["/big.bin"] * 10 if rnd_no == 3 else small
        reqs = [("HEAD" if rnd.random() < 0.15 else "GET", rnd.choice(paths)) for _ in range(100)]
        for (method, path), (status, hdrs, body) in zip(reqs, f.fetch(reqs)):
            want = files.data[path]
            assert status == 200, (method, path, status)
            assert int(hdrs["content-length"]) == len(want), (method, path)
            if method == "HEAD":
                assert body == b"", path
            else:
                assert hashlib.sha256(body).digest() == hashlib.sha256(want).digest(), \
                    f"{path}: got {len(body)} bytes, want {len(want)}"
            total += 1
            bigs += path == "/big.bin" and method == "GET"
    f.close()
    piped = files.pipelined()
    print(f"\npipelining: {total} requests, {piped} pipelined at nginx, "
          f"{files.connections()} origin connections")
    # the cap, plus a replacement for each connection closed after big.bin (the requests sent
    # behind it went elsewhere, their answers there were dropped)
    assert files.connections() <= 2 + bigs
    assert piped >= 300 // 4


def test_pipelining_under_h2load_keeps_the_pool_cap(gateway, files):
    port = start(gateway, files, "max_connections: 4\npipeline: 8")
    r = run(["h2load", "-n", "10000", "-c", "8", "-m", "32", f"http://127.0.0.1:{port}/f7.bin"],
            timeout=300)
    assert "10000 succeeded" in r.stdout and "10000 2xx" in r.stdout, r.stdout
    print(f"\nh2load: {files.pipelined()} of 10000 pipelined, {files.connections()} connections")
    assert files.connections() <= 4
    assert files.pipelined() > 1000


def test_no_pipelining_by_default(gateway, files):
    port = start(gateway, files, "max_connections: 4")
    r = run(["h2load", "-n", "2000", "-c", "4", "-m", "32", f"http://127.0.0.1:{port}/f7.bin"],
            timeout=300)
    assert "2000 succeeded" in r.stdout and "2000 2xx" in r.stdout, r.stdout
    assert files.pipelined() == 0
    assert files.connections() <= 4
