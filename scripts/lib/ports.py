#!/usr/bin/env python3
"""Free loopback ports for long benchmark runs, chosen below the kernel's ephemeral range.

A port from bind(("127.0.0.1", 0)) is an ephemeral one: a run that opens hundreds of thousands
of connections (manyconns, nginx's origin connections) soon uses it as the local port of a
client socket, and the next proxy that binds it gets EADDRINUSE (the bench of 2026-12-05 lost
a third of its runs so). Ports below net.ipv4.ip_local_port_range are never handed out that way.

Usage: ports.py N  (prints N distinct free ports)"""
import random
import socket
import sys


def free_ports(n):
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rnd = random.SystemRandom()
    ports = []
    tries = 0
    while len(ports) < n:
        tries += 1
        if low - 10000 < 4 * n or tries > 100000:
            p = 0  # no room below the range: the kernel's choice, as before
        else:
            p = rnd.randrange(10000, low)
            if p in ports:
                continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            ports.append(s.getsockname()[1])
        except OSError:
            pass
        finally:
            s.close()
    return ports


if __name__ == "__main__":
    print(" ".join(str(p) for p in free_ports(int(sys.argv[1]))))
