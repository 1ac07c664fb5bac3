"""The per-client bandwidth table fails closed when it is full of clients that
still owe tokens: a new address is refused (connection closed, logged, counted) instead of
evicting another client's debt and getting an unthrottled connection."""
import os

from procs import free_port, run
from gwtest import gw_config

KiB = 1024


def config(port, origin_port):
    # table size = 2 x workers x max_connections = 4 addresses; burst 64 KiB refills in 64 s
    return gw_config(port, [f"127.0.0.1:{origin_port}"],
                     extra="limits: {max_connections: 2}\n"
                           "throttle: {per_client_rate: 1KB/s, per_client_burst: 64KiB}\n")


def fetch(port, source):
    r = run(["curl", "-sS", "--http2-prior-knowledge", "--interface", source, "-o", "/dev/null",
             "-w", "%{http_code} %{size_download}", f"http://127.0.0.1:{port}/f.bin"], timeout=20)
    return r.stdout.strip()


def test_full_client_table_fails_closed(gateway, nginx_origin, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "f.bin").write_bytes(os.urandom(60 * KiB))  # within the burst: served at once
    n = nginx_origin(str(root))
    port = free_port()
    g = gateway(config(port, n.port), wait=[("127.0.0.1", port)])
    for i in range(2, 6):  # four clients spend their burst and leave: four entries in debt
        assert fetch(port, f"127.0.0.{i}") == f"200 {60 * KiB}"
    # a fifth address finds the table full of debts: refused, not let in unthrottled
    assert fetch(port, "127.0.0.6").startswith("000")
    log = g.wait_log("event=client_table_full", timeout=5)
    assert "event=client_table_full peer=127.0.0.6" in log
    # the clients already known keep their place (and their debt: the table kept them)
    assert g.proc.poll() is None
