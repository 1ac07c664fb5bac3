"""Binary upgrade: SIGUSR2 starts the binary again, which inherits the
listening sockets; once it serves, the old process stops accepting, drains and exits, and no
request fails."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from procs import free_port, h1_get, recv_all, slow, wait_new_pid
from gwtest import gw_config, h2load_summary


def wait_pid_change(pid_path, old, timeout=20):
    pid = wait_new_pid(pid_path, old, timeout)
    assert pid, f"pid file still names {old}"
    return pid


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def stop_pid(pid):
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + slow(15)
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def pid_file_gateway(gateway, nginx_origin, tmp_path, extra="", wait=(), **kw):
    """A gateway (gw_config with **kw) with a pid file, in front of nginx serving /who = "A",
    once the pid file is there: (the gateway, its config text, its cleartext port, the pid
    file's path). wait: more (host, port) to wait for."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "who").write_text("A")
    o = nginx_origin(str(root))
    port = free_port()
    pid_path = tmp_path / "h2gate.pid"
    text = gw_config(port, [f"127.0.0.1:{o.port}"], extra=f"pid_file: {pid_path}\n" + extra, **kw)
    g = gateway(text, wait=[("127.0.0.1", port), *wait])
    deadline = time.monotonic() + slow(5)
    while not pid_path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return g, text, port, pid_path


@pytest.mark.serial
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_upgrade_under_load_loses_no_request(gateway, nginx_origin, tmp_path, tls):
    """h2load (100,000 requests, 50 connections x 10 streams) through a binary upgrade: the old
    process drains and exits 0, new connections reach the new one meanwhile, 0 failed. One
    transport per build (CI time): h2c against the plain build, where the load is fastest and
    the most requests are in flight at the handover; TLS against the ASan build, which checks
    the memory of the TLS connections the old process drains. Each CI run proves both."""
    from procs import sanitized
    if tls != sanitized():
        pytest.skip("this transport's load runs against the other build (CI time)")
    tls_port, admin = free_port(), free_port()
    g, text, port, pid_path = pid_file_gateway(
        gateway, nginx_origin, tmp_path, workers=2, tls_port=tls_port, route_extra="coalesce: false",
        # graceful_shutdown past any run of the load (the old process's busy connections get
        # their GOAWAY at half of it, and the requests h2load had not sent yet would be lost),
        # handshake past any loaded machine's 50 TLS handshakes at once, drain_grace past any
        # pause of a starved h2load on one connection (a quiet old connection gets its GOAWAY,
        # and h2load opens no new one: 34,577 requests lost once)
        extra=f"admin: {{address: 127.0.0.1:{admin}}}\n"
              "timeouts: {graceful_shutdown: 1h, handshake: 5m, drain_grace: 1m}\n",
        wait=[("127.0.0.1", tls_port)])
    old = g.proc.pid
    assert int(pid_path.read_text()) == old
    url = f"https://127.0.0.1:{tls_port}/who" if tls else f"http://127.0.0.1:{port}/who"
    n = 100000
    load = subprocess.Popen(["h2load", "-n", str(n), "-c", "50", "-m", "10", url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    new = None
    t0 = time.monotonic()
    try:
        time.sleep(0.5)
        g.signal(signal.SIGUSR2)
        new = wait_pid_change(pid_path, old)
        assert load.poll() is None, "the load ended before the upgrade"
        # new connections reach the new process while the old one drains
        for _ in range(20):
            assert h1_get(port, "/who").endswith(b"A")
        t1 = time.monotonic()
        out, _ = load.communicate(timeout=900)  # the load's end, not a measure of speed
        print(f"\nupgrade done {t1 - t0:.2f} s into the load, which ended at "
              f"{time.monotonic() - t0:.2f} s")
        assert g.wait(timeout=60) == 0  # the old process drained and exited
    finally:
        if load.poll() is None:
            load.kill()
        if new:
            stop_pid(new)
    s = h2load_summary(out)
    assert s["succeeded"] == n and s["failed"] == 0 and s["errored"] == 0, out
    log = g.log()
    assert f"event=upgrade_ready new_pid={new} action=drain" in log
    assert re.search(r"event=socket_inherited address=127\.0\.0\.1:%d sockets=2 of=2" % port, log)
    assert "event=upgrade_failed" not in log


def test_failed_upgrade_keeps_the_old_process(gateway, nginx_origin, tmp_path):
    """A new process that cannot start (its configuration became invalid) exits; the old one
    logs why, keeps serving and keeps its pid file."""
    g, text, port, pid_path = pid_file_gateway(gateway, nginx_origin, tmp_path)
    with open(g.config_path, "w") as f:
        f.write(text + "bogus: 1\n")
    g.signal(signal.SIGUSR2)
    log = g.wait_log("event=upgrade_failed", timeout=10)
    assert re.search(r'event=upgrade_failed new_pid=\d+ reason="the new process exited before it '
                     r'was ready" new_process="exit status 1" action=keep_serving', log), log
    assert "unknown key 'bogus'" in log  # the new process said why on the same stderr
    assert g.proc.poll() is None
    assert int(pid_path.read_text()) == g.proc.pid
    assert h1_get(port, "/who").endswith(b"A")
    # a later upgrade with a good file works
    with open(g.config_path, "w") as f:
        f.write(text)
    g.signal(signal.SIGUSR2)
    new = wait_pid_change(pid_path, g.proc.pid)
    try:
        assert g.wait(timeout=20) == 0
        assert h1_get(port, "/who").endswith(b"A")
    finally:
        stop_pid(new)


def test_upgrade_to_fewer_workers_resets_no_queued_connection(gateway, nginx_origin, tmp_path):
    """An upgrade from three workers to two: the new process inherits three listening sockets
    (one per old worker) and has two workers. Connections that wait in the accept queues while
    the old process does not accept (stopped here, then killed, so it never accepts them) must
    all be served by the new process; none may be reset with a socket the new process closed."""
    g, text, port, pid_path = pid_file_gateway(gateway, nginx_origin, tmp_path, workers=3,
                                               route_extra="coalesce: false")
    old = g.proc.pid
    with open(g.config_path, "w") as f:
        f.write(text.replace("workers: 3", "workers: 2"))
    g.signal(signal.SIGUSR2)
    g.wait_log("event=upgrade_started", timeout=10)
    os.kill(old, signal.SIGSTOP)  # the old process accepts nothing from here
    new = None
    socks = []
    try:
        new = wait_pid_change(pid_path, old)
        for _ in range(40):  # spread by the kernel over the three sockets
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            socks.append(s)
        time.sleep(0.3)
        os.kill(old, signal.SIGKILL)  # its copies of the sockets close, unaccepted
        g.wait(timeout=10)
        answers = []
        for s in socks:
            try:
                answers.append(recv_all(s))
            except ConnectionResetError:
                answers.append(b"reset")
        bad = [a[:40] for a in answers if not (a.startswith(b"HTTP/1.1 200") and a.endswith(b"A"))]
        assert not bad, f"{len(bad)} of {len(answers)} connections not answered: {bad}"
        assert h1_get(port, "/who").endswith(b"A")
        assert re.search(r"event=socket_inherited address=127\.0\.0\.1:%d sockets=3 of=2 "
                         r"kept=all" % port, g.log())
    finally:
        for s in socks:
            s.close()
        if new:
            stop_pid(new)


def test_upgrades_pass_the_admin_socket_on(gateway, nginx_origin, tmp_path):
    """The admin socket is inherited like the listeners (a second process binding it would
    be refused): two upgrades in a row, and the admin address answers from the newest process
    once the older ones are gone."""
    admin = free_port()
    g, _, port, pid_path = pid_file_gateway(gateway, nginx_origin, tmp_path, workers=2,
                                            extra=f"admin: {{address: 127.0.0.1:{admin}}}\n",
                                            wait=[("127.0.0.1", admin)])
    pids = [g.proc.pid]
    try:
        for n in (1, 2):
            os.kill(pids[-1], signal.SIGUSR2)
            pids.append(wait_pid_change(pid_path, pids[-1]))
            deadline = time.monotonic() + slow(20)
            while alive(pids[-2]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(pids[-2])
            assert h1_get(admin, "/healthz").startswith(b"HTTP/1.1 200")
            assert h1_get(port, "/who").endswith(b"A")
        assert g.proc.returncode == 0 or g.wait() == 0
        log = g.log()
        assert log.count(f"event=socket_inherited address=127.0.0.1:{admin} admin=yes") == 2, log
        assert "event=upgrade_failed" not in log and "event=admin_failed" not in log
    finally:
        stop_pid(pids[-1])
