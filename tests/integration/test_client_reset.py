"""A client that resets its TCP connection (SO_LINGER 0: an RST, no FIN), the common and benign
end of a browser tab or a mobile client, is logged `event=conn_close ... reason=reset`, never
`read_error` or `write_error`, which stay for real I/O failures: over h2c, HTTP/2 over TLS,
HTTP/1.1 and HTTP/1.1 over TLS, whether the reset finds the connection idle (the read sees
ECONNRESET) or in the middle of a large response (the write may see it first, as ECONNRESET or
EPIPE). Clients: Python sockets, ssl and python3-h2; origin: the scripted origin."""
import re
import socket
import struct
import time

import pytest

from procs import free_port, recv_response, slow
from gwtest import Client, gw_config, response, tls_client_ctx


@pytest.fixture
def gwr(gateway, origin):
    """A gateway with a cleartext and a TLS listener, at log_level debug (conn_close lines)."""
    port, tls_port = free_port(), free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], tls_port=tls_port,
                          log_level="debug"),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)])
    g.port, g.tls_port = port, tls_port
    return g


def reset(sock):
    """Close sock with an RST (SO_LINGER on, 0 s), never a FIN nor a TLS close_notify."""
    raw = sock
    if hasattr(sock, "unwrap"):  # an SSLSocket: close the TCP socket under it, no alert
        raw = socket.socket(fileno=sock.detach())
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()


def close_reason(g, sock_port, timeout=5.0):
    """The reason of the conn_close line of the client whose local port is sock_port."""
    pat = re.compile(rf"event=conn_close peer=127\.0\.0\.1:{sock_port} \S+ reason=(\S+)")
    deadline = time.monotonic() + slow(timeout)
    while True:
        m = pat.search(g.log())
        if m or time.monotonic() > deadline:
            return m.group(1) if m else None
        time.sleep(0.05)


def h1_socket(g, tls):
    s = socket.create_connection(("127.0.0.1", g.tls_port if tls else g.port), timeout=slow(10))
    if tls:
        ctx = tls_client_ctx()
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
    return s


def h1_get(s, path):
    """One keep-alive GET on s, its whole answer read (nothing left for the gateway to write)."""
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    head, body = recv_response(s)
    return int(head.split(b" ")[1]), body


PROTOS = ["h2c", "h2_tls", "h1", "h1_tls"]


@pytest.mark.parametrize("proto", PROTOS)
def test_reset_of_an_idle_connection_is_logged_as_reset(gwr, proto):
    """One request answered whole, then the client resets its idle connection: the gateway's
    read gets ECONNRESET, logged reason=reset."""
    tls = proto.endswith("tls")
    if proto.startswith("h2"):
        cl = Client(gwr.tls_port if tls else gwr.port, tls=tls)
        sid = cl.request("/bytes/100")
        evs = cl.events(lambda evs: response(evs, sid)[2])
        assert response(evs, sid)[0] == "200", evs
        s = cl.s
    else:
        s = h1_socket(gwr, tls)
        assert h1_get(s, "/bytes/100")[0] == 200
    port = s.getsockname()[1]
    time.sleep(0.1)  # the gateway has written everything (its SETTINGS ACK included)
    reset(s)
    assert close_reason(gwr, port) == "reset", gwr.log()[-3000:]


@pytest.mark.parametrize("proto", PROTOS)
def test_reset_during_a_large_response_is_logged_as_reset(gwr, proto):
    """The client asks for 32 MiB, reads a little and resets: whether the gateway's write or
    its read sees the reset first (ECONNRESET or EPIPE), the reason is reset."""
    tls = proto.endswith("tls")
    path = "/bytes/33554432"
    if proto.startswith("h2"):
        cl = Client(gwr.tls_port if tls else gwr.port, tls=tls)
        cl.open_windows()
        cl.request(path)
        s = cl.s
    else:
        s = h1_socket(gwr, tls)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    got = 0
    while got < 256 * 1024:
        d = s.recv(65536)
        assert d
        got += len(d)
    port = s.getsockname()[1]
    reset(s)
    reason = close_reason(gwr, port)
    assert reason == "reset", gwr.log()[-3000:]
    assert "reason=read_error" not in gwr.log() and "reason=write_error" not in gwr.log()
