"""Per-worker counters observable while the gateway runs, from the admin listener's metrics
(they used to be SIGUSR1 log lines; SIGUSR1 now reopens the logs)."""
import re
import signal
import socket

from procs import free_port, h1_get
from gwtest import gw_config, scrape, wait_sample


def _config(port, workers, admin):
    # a refused origin, never ejected: every request is the gateway's own 502
    return gw_config(port, ["127.0.0.1:9"], workers=workers,
                     upstream_extra="health: {fail_threshold: 1000}",
                     extra=f"admin: {{address: 127.0.0.1:{admin}}}\n")


def _get(port):
    return h1_get(port, "/", timeout=5)


def _per_worker(admin, name):
    fams, _ = scrape(admin)
    return {s.labels["worker"]: int(s.value) for s in fams[name].samples}


def test_per_worker_counters_and_keeps_running(gateway):
    port, admin = free_port(), free_port()
    g = gateway(_config(port, 2, admin), wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
    for _ in range(20):
        assert _get(port).startswith(b"HTTP/1.1 502 ")
    first = _per_worker(admin, "h2gate_client_connections_accepted")
    assert set(first) == {"0", "1"}
    assert sum(first.values()) >= 20  # the readiness probe connects too
    # still serving, and the counters moved
    assert _get(port).startswith(b"HTTP/1.1 502 ")
    second = _per_worker(admin, "h2gate_client_connections_accepted")
    assert sum(second.values()) == sum(first.values()) + 1
    g.signal(signal.SIGUSR1)  # reopens the logs: nothing else changes
    g.wait_log("action=reopen_logs")
    assert _get(port).startswith(b"HTTP/1.1 502 ")
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert "event=stopped status=ok" in g.log()


def _busy(admin):
    return _per_worker(admin, "h2gate_client_connections_busy")["0"]


def test_idle_h2_connection_gives_back_its_busy_state(gateway):
    """An HTTP/2 connection holds its buffers and stream lists (the busy state) while it works;
    idle, it gives them back: at the next read, or a second after its last stream ended when
    no read comes. h2gate_client_connections_busy counts the connections that hold them."""
    import h2.config
    import h2.connection
    import h2.events
    port, admin = free_port(), free_port()
    g = gateway(_config(port, 1, admin), wait=[("127.0.0.1", port), ("127.0.0.1", admin)])
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
    # our SETTINGS ACK was the last read: released while idle (as soon as the worker read it;
    # a 0.2 s sleep could end before a loaded sanitizer build had)
    assert wait_sample(admin, "h2gate_client_connections_busy", 0, worker="0") == 0
    c.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "http"),
                       (":authority", "x")], end_stream=True)
    s.sendall(c.data_to_send())
    read_until(lambda e: any(isinstance(x, h2.events.StreamEnded) for x in e))
    assert _busy(admin) == 1  # the response went out, no read since: still held
    # a second later without any read: given back (the bound of 1.6 s is scaled for a
    # sanitizer build, whose timers a loaded machine runs late)
    assert wait_sample(admin, "h2gate_client_connections_busy", 0, timeout=1.6,
                       worker="0") == 0
    s.close()
    g.signal(signal.SIGTERM)
    assert g.wait(10) == 0
    assert re.search(r"event=worker_stats worker=0 accepted=\d+ busy=0", g.log())
