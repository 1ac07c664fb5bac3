#!/usr/bin/python3
"""Idle HTTP/2 connections for scripts/bench.

  bench_idle.py HOST PORT N [tls|plain]

Opens N TLS connections (or, with `plain`, cleartext h2c connections with prior knowledge) to HOST:PORT one after the other, each with ALPN h2, the client preface
and SETTINGS, waits for the server's SETTINGS and acknowledges it: a finished TLS + HTTP/2
handshake, then no request. Prints `open K` (K connections that got that far) on stdout once all
were tried, then stays idle, answering nothing, until SIGTERM or SIGINT; then closes them all.
A connection that fails is reported on stderr and not retried.
"""
import signal
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events


def handshake(ctx, host, port):
    raw = socket.create_connection((host, port), timeout=10)
    if ctx is None:
        sock = raw
    else:
        try:
            sock = ctx.wrap_socket(raw, server_hostname=host)
        except Exception:
            raw.close()
            raise
    try:
        if ctx is not None and sock.selected_alpn_protocol() != "h2":
            raise RuntimeError(f"ALPN gave {sock.selected_alpn_protocol()!r}, not h2")
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        got_settings = False
        while not got_settings:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("closed before the server's SETTINGS")
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    got_settings = True
            sock.sendall(conn.data_to_send())  # SETTINGS ACK (and WINDOW_UPDATEs if any)
        return sock
    except Exception:
        sock.close()
        raise


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] not in ("tls", "plain")):
        sys.stderr.write(__doc__)
        return 2
    host, port, n = argv[1], int(argv[2]), int(argv[3])
    plain = len(argv) == 5 and argv[4] == "plain"
    ctx = None if plain else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ctx is not None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.set_alpn_protocols(["h2"])
    # Block the stop signals first so one sent while connecting is not lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    socks, errors = [], 0
    for i in range(n):
        try:
            socks.append(handshake(ctx, host, port))
        except Exception as e:  # keep going: the count tells the caller the run is invalid
            errors += 1
            if errors <= 5:
                sys.stderr.write(f"bench_idle: connection {i}: {e}\n")
    print(f"open {len(socks)}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
