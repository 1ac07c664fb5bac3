"""Signals and readiness: systemd's notify protocol, the pid file, a second
SIGTERM stopping at once."""
import os
import signal
import socket
import time

from procs import free_port, recv_all, slow
from gwtest import gw_config, wait_origin_has


def recv_states(sock, want, timeout=10):
    """Datagrams received until `want` is among them (or timeout, scaled: slow())."""
    got = []
    deadline = time.monotonic() + slow(timeout)
    while want not in got and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
    return got


def test_sd_notify_ready_reloading_stopping(gateway, nginx_origin, tmp_path, monkeypatch):
    """NOTIFY_SOCKET set: READY=1 once listening, RELOADING=1 then READY=1 around a SIGHUP,
    STOPPING=1 at SIGTERM; the abstract namespace works too."""
    for abstract in (False, True):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        name = f"@h2gate-test-{os.getpid()}-{time.monotonic_ns()}" if abstract else \
            str(tmp_path / f"notify-{int(abstract)}.sock")
        sock.bind("\0" + name[1:] if abstract else name)
        monkeypatch.setenv("NOTIFY_SOCKET", name)
        port = free_port()
        text = gw_config(port, ["127.0.0.1:9"])
        g = gateway(text, wait=[("127.0.0.1", port)])
        assert recv_states(sock, "READY=1") == ["READY=1"]
        g.signal(signal.SIGHUP)
        assert recv_states(sock, "READY=1") == ["RELOADING=1", "READY=1"]
        g.signal(signal.SIGTERM)
        assert recv_states(sock, "STOPPING=1") == ["STOPPING=1"]
        assert g.wait() == 0
        sock.close()
        monkeypatch.delenv("NOTIFY_SOCKET")


def test_pid_file_written_and_removed(gateway, tmp_path):
    port = free_port()
    pid_path = tmp_path / "run" / "h2gate.pid"
    pid_path.parent.mkdir()
    g = gateway(gw_config(port, ["127.0.0.1:9"], extra=f"pid_file: {pid_path}\n"),
                wait=[("127.0.0.1", port)])
    # the main thread writes it once every worker runs, which may be just after the first one
    # accepts: the port answering does not mean it is there yet
    deadline = time.monotonic() + slow(5)
    while not pid_path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_path.read_text() == f"{g.proc.pid}\n"
    g.signal(signal.SIGTERM)
    assert g.wait() == 0
    assert not pid_path.exists()
    assert not list(pid_path.parent.iterdir())  # no temporary file left either


def test_pid_file_is_not_written_through_planted_symlinks(gateway, tmp_path):
    """Someone who can write into the pid file's directory plants symlinks at the names the
    gateway (often root) writes: the temporary name it used to derive from its pid, and the pid
    file itself. Neither target changes; the pid file ends up a regular file naming the
    gateway, and the planted temporary link is left as it was."""
    run = tmp_path / "run"
    run.mkdir()
    pid_path = run / "h2gate.pid"
    victims = {name: tmp_path / name for name in ("victim-tmp", "victim-final")}
    for v in victims.values():
        v.write_text("precious\n")
    os.symlink(victims["victim-final"], pid_path)

    def plant():  # in the child, before exec: its pid is the gateway's
        os.symlink(victims["victim-tmp"], f"{pid_path}.{os.getpid()}.tmp")

    port = free_port()
    g = gateway(gw_config(port, ["127.0.0.1:9"], extra=f"pid_file: {pid_path}\n"),
                wait=[("127.0.0.1", port)], preexec_fn=plant)
    tmp_name = f"{pid_path}.{g.proc.pid}.tmp"
    deadline = time.monotonic() + slow(5)
    while pid_path.read_text() == "precious\n" and time.monotonic() < deadline:
        time.sleep(0.02)
    for v in victims.values():
        assert v.read_text() == "precious\n", v
    assert not os.path.islink(pid_path)
    assert pid_path.read_text() == f"{g.proc.pid}\n"
    assert os.readlink(tmp_name) == str(victims["victim-tmp"])
    g.signal(signal.SIGTERM)
    assert g.wait() == 0
    assert not pid_path.exists()
    assert sorted(os.listdir(run)) == [os.path.basename(tmp_name)]  # only the planted link


def test_second_sigterm_stops_at_once(gateway, origin):
    """A graceful stop waits for a request in flight; a second SIGTERM does not."""
    port = free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"],
                          extra="timeouts: {graceful_shutdown: 60s}\n"),
                wait=[("127.0.0.1", port)])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
    # at the origin: a worker took the connection (one still in the listen queue at the
    # SIGTERM is never served, and the gateway exits at once)
    assert wait_origin_has(origin, "/hang") == 1
    g.signal(signal.SIGTERM)
    # counted as the first before the second comes
    assert "action=graceful_stop" in g.wait_log("signal=SIGTERM action=graceful_stop")
    time.sleep(0.5)
    assert g.proc.poll() is None  # draining: the request is still in flight
    t0 = time.monotonic()
    g.signal(signal.SIGTERM)
    assert g.wait(timeout=10) == 0
    assert time.monotonic() - t0 < slow(3)  # not the 60 s graceful stop
    assert "action=stop_now" in g.log()
    s.close()


def test_sigquit_stops_gracefully(gateway, origin, tmp_path):
    """SIGQUIT is a graceful stop, as in nginx and nghttpx (it used to kill the gateway at once
    with a core, leaving its pid file): a request in flight completes, the exit status is 0 and
    the pid file is removed."""
    port = free_port()
    pid_path = tmp_path / "h2gate.pid"
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"],
                          extra=f"pid_file: {pid_path}\ntimeouts: {{graceful_shutdown: 30s}}\n"),
                wait=[("127.0.0.1", port)])
    deadline = time.monotonic() + slow(5)
    while not pid_path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_path.exists()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /slow/10000 HTTP/1.1\r\nHost: x\r\n\r\n")  # about a second
    assert wait_origin_has(origin, "/slow/10000") == 1  # a worker took the connection
    g.signal(signal.SIGQUIT)
    resp = recv_all(s)  # the gateway closes after this response: it is stopping
    s.close()
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), resp[:200]
    assert len(body) == 10000
    assert g.wait(timeout=10) == 0
    assert "signal=SIGQUIT action=graceful_stop" in g.log()
    assert not pid_path.exists()


def test_signals_sent_as_the_port_opens_are_each_acted_on(gateway, origin):
    """A SIGHUP sent the moment the gateway answers, and a SIGUSR1 right after it, are each
    handled, start after start: the signals are blocked on every thread and read from a
    signalfd, so none can land on a thread that drops it. (With an asynchronous handler, a
    TSan build lost about 1 SIGHUP in 240 starts; the reload then never happened.)"""
    for i in range(12):
        port = free_port()
        g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
        g.signal(signal.SIGHUP)
        g.signal(signal.SIGUSR1)
        log = g.wait_log("event=reloaded", timeout=10)
        assert "event=reloaded generation=2" in log, f"start {i}: {log}"
        log = g.wait_log("signal=SIGUSR1", timeout=10)
        assert "signal=SIGUSR1 action=reopen_logs" in log, f"start {i}: {log}"
        # the threads other than the main one block them too (a process-directed signal is
        # taken by a thread that does not block it)
        pid = g.proc.pid
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                blk = int(next(x for x in f if x.startswith("SigBlk:")).split()[1], 16)
            for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
                assert blk & (1 << (sig - 1)), f"thread {tid} takes {sig.name}"
        assert g.stop() == 0
