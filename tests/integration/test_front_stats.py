"""Per-worker counters observable while the gateway runs: SIGUSR1 logs one worker_stats line per
worker and the gateway keeps serving."""
import re
import signal
import socket
import time

from conftest import free_port, h1_get
from gwtest import gw_config


def _config(port, workers):
    return gw_config(port, ["127.0.0.1:9"], workers=workers)


def _get(port):
    return h1_get(port, "/", timeout=5)


def _usr1_counts(g, want_lines, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(r"event=worker_stats worker=(\d+) accepted=(\d+) when=sigusr1", g.log())
        if len(found) >= want_lines:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no SIGUSR1 stats in log:\n{g.log()}")


def test_sigusr1_dumps_per_worker_counters_and_keeps_running(gateway):
    port = free_port()
    g = gateway(_config(port, 2), wait=[("127.0.0.1", port)])
    for _ in range(20):
        assert _get(port).startswith(b"HTTP/1.1 502 ")
    g.signal(signal.SIGUSR1)
    first = _usr1_counts(g, 2)
    assert {int(w) for w, _ in first} == {0, 1}
    assert sum(int(n) for _, n in first) >= 20  # the readiness probe connects too
    # still serving after the dump, and the counters moved
    assert _get(port).startswith(b"HTTP/1.1 502 ")
    g.signal(signal.SIGUSR1)
    second = _usr1_counts(g, 4)[2:]
    assert sum(int(n) for _, n in second) == sum(int(n) for _, n in first) + 1
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert "event=stopped status=ok" in g.log()


def _busy(g, nth, timeout=5.0):
    """busy= of the nth SIGUSR1 worker_stats line (one worker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(r"event=worker_stats worker=0 accepted=\d+ when=sigusr1 busy=(\d+)", g.log())
        if len(found) > nth:
            return int(found[nth])
        time.sleep(0.02)
    raise AssertionError(f"no SIGUSR1 stats in log:\n{g.log()}")


def test_idle_h2_connection_gives_back_its_busy_state(gateway):
    """An HTTP/2 connection holds its buffers and stream lists (the busy state) while it works;
    idle, it gives them back: at the next read, or a second after its last stream ended when
    no read comes. worker_stats counts the connections that hold them."""
    import h2.config
    import h2.connection
    import h2.events
    port = free_port()
    g = gateway(_config(port, 1), wait=[("127.0.0.1", port)])
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    s.sendall(c.data_to_send())

    def read_until(pred):
        evs = []
        while not pred(evs):
            data = s.recv(65536)
            assert data
            evs += c.receive_data(data)
            if c.data_to_send():
                s.sendall(c.data_to_send())
        return evs

    read_until(lambda e: any(isinstance(x, h2.events.SettingsAcknowledged) for x in e))
    time.sleep(0.2)  # our SETTINGS ACK was the last read: released while idle
    g.signal(signal.SIGUSR1)
    assert _busy(g, 0) == 0
    c.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "http"),
                       (":authority", "x")], end_stream=True)
    s.sendall(c.data_to_send())
    read_until(lambda e: any(isinstance(x, h2.events.StreamEnded) for x in e))
    g.signal(signal.SIGUSR1)  # the response went out, no read since: still held
    assert _busy(g, 1) == 1
    time.sleep(1.6)
    g.signal(signal.SIGUSR1)  # a second later without any read: given back
    assert _busy(g, 2) == 0
    s.close()
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert re.search(r"event=worker_stats worker=0 accepted=\d+ busy=0", g.log())
