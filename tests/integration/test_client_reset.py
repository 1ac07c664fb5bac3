"""A client that resets its TCP connection (SO_LINGER 0: an RST, no FIN), the common and benign
end of a browser tab or a mobile client, is logged `event=conn_close ... reason=reset`, never
`read_error` or `write_error`, which stay for real I/O failures: over h2c, HTTP/2 over TLS,
HTTP/1.1 and HTTP/1.1 over TLS, whether the reset finds the connection idle (the read sees
ECONNRESET) or in the middle of a large response (the write may see it first, as ECONNRESET or
EPIPE). A real write failure is named (event=client_io_error), a write libuv refuses at once
too. Clients: Python sockets, ssl and python3-h2; origin: the scripted origin."""
import re
import socket
import struct
import time

import pytest

from procs import free_port, recv_response, run, sanitizer, slow
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


# A stand-in for libuv's writes on the sockets the listener port FAIL_PORT accepted: a write of
# 4 KiB or more (a response, never a handshake or the SETTINGS) finds the socket full
# (uv_try_write: UV_EAGAIN) and is refused at once (uv_write: UV_ENOMEM, what libuv answers when
# it cannot copy a buffer array longer than 4).
WRITE_REFUSED = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <uv.h>

static int refused(uv_stream_t *s, const uv_buf_t bufs[], unsigned n)
{
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        len += bufs[i].len;
    uv_os_fd_t fd;
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    return len >= 4096 && uv_fileno((uv_handle_t *)s, &fd) == 0 &&
           getsockname(fd, (struct sockaddr *)&a, &alen) == 0 && a.sin_family == AF_INET &&
           ntohs(a.sin_port) == atoi(getenv("FAIL_PORT"));
}

int uv_try_write(uv_stream_t *s, const uv_buf_t bufs[], unsigned n)
{
    int (*real)(uv_stream_t *, const uv_buf_t *, unsigned) =
        (int (*)(uv_stream_t *, const uv_buf_t *, unsigned))dlsym(RTLD_NEXT, "uv_try_write");
    return refused(s, bufs, n) ? UV_EAGAIN : real(s, bufs, n);
}

int uv_write(uv_write_t *req, uv_stream_t *s, const uv_buf_t bufs[], unsigned n, uv_write_cb cb)
{
    int (*real)(uv_write_t *, uv_stream_t *, const uv_buf_t *, unsigned, uv_write_cb) =
        (int (*)(uv_write_t *, uv_stream_t *, const uv_buf_t *, unsigned, uv_write_cb))dlsym(
            RTLD_NEXT, "uv_write");
    return refused(s, bufs, n) ? UV_ENOMEM : real(req, s, bufs, n, cb);
}
"""


@pytest.mark.skipif(sanitizer() == "asan", reason="ASan's runtime must come first in LD_PRELOAD")
@pytest.mark.parametrize("proto", PROTOS)
def test_a_write_refused_at_once_is_named_in_the_log(gateway, origin, tmp_path, proto):
    """A write libuv refuses at once (no callback follows) is named at log_level debug like one
    that fails later, event=client_io_error op=write error=NAME, before the connection closes:
    h2c's gathered write, TLS's handed-over records, HTTP/1.1's copied tail. Its close reason
    (write_error, h2_send_failed) does not say which error it was."""
    src, lib = tmp_path / "refuse.c", tmp_path / "librefuse.so"
    src.write_text(WRITE_REFUSED)
    r = run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl", "-luv"])
    assert r.returncode == 0, r.stderr
    tls = proto.endswith("tls")
    port, tls_port = free_port(), free_port()
    g = gateway(gw_config(port, [f"127.0.0.1:{origin.port}"], tls_port=tls_port,
                          log_level="debug"),
                wait=[("127.0.0.1", port), ("127.0.0.1", tls_port)],
                prefix=("env", f"LD_PRELOAD={lib}", f"FAIL_PORT={tls_port if tls else port}"))
    g.port, g.tls_port = port, tls_port
    path = "/bytes/100000"
    if proto.startswith("h2"):
        cl = Client(tls_port if tls else port, tls=tls)
        cl.request(path)
        s = cl.s
    else:
        s = h1_socket(g, tls)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    peer = f"peer=127.0.0.1:{s.getsockname()[1]}"
    assert close_reason(g, s.getsockname()[1]) is not None, g.log()[-3000:]
    log = g.log()
    assert f"event=client_io_error {peer} op=write error=ENOMEM" in log, log[-3000:]
    assert log.index("event=client_io_error") < log.index(f"event=conn_close {peer}")
    s.close()
