"""WebSocket through the gateway (issue 24): a real WebSocket echo origin
(python3-websockets, ws_origin.py) and clients no one here wrote: python3-websockets over
HTTP/1.1 (ws:// and wss://)."""
import asyncio
import os
import socket
import subprocess
import sys
import time

import pytest
import websockets

from conftest import free_port, wait_port
from gwtest import gw_config

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def wsorigin():
    port = free_port()
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "ws_origin.py"), str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    p.port = port
    yield p
    p.terminate()
    p.wait(10)


def wsgw(gateway, wsorigin, route_extra="", extra="", tls=False):
    port, tls_port = free_port(), (free_port() if tls else None)
    g = gateway(gw_config(port, [f"127.0.0.1:{wsorigin.port}"], route_extra=route_extra,
                          extra=extra, tls_port=tls_port),
                wait=[("127.0.0.1", port)] + ([("127.0.0.1", tls_port)] if tls else []))
    g.port, g.tls_port = port, tls_port
    return g


def ssl_ctx():
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def echo_session(uri, messages, **kw):
    async with websockets.connect(uri, max_size=None, compression=None, **kw) as ws:
        for m in messages:
            await ws.send(m)
            got = await ws.recv()
            assert got == m, (type(m), len(m), type(got), len(got))
        return ws.response_headers


def sizes_mix(n):
    """n messages, text and binary, from 1 B to 1 MiB."""
    out = []
    sizes = [1, 2, 125, 126, 127, 65535, 65536, 100000, 1 << 20]
    for i in range(n):
        size = sizes[i % len(sizes)] if i % 10 == 0 else 1 + (i * 7919) % 4096
        out.append(("x" * size) if i % 2 else os.urandom(size))
    return out


def test_h1_ws_echo_1000_messages(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)
    msgs = sizes_mix(1000)
    asyncio.run(echo_session(f"ws://127.0.0.1:{g.port}/", msgs))


def test_h1_wss_echo_over_tls(gateway, wsorigin):
    g = wsgw(gateway, wsorigin, tls=True)
    msgs = sizes_mix(200)
    asyncio.run(echo_session(f"wss://localhost:{g.tls_port}/", msgs, ssl=ssl_ctx()))


def test_h1_ws_subprotocol_passes(gateway, wsorigin):
    g = wsgw(gateway, wsorigin)

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{g.port}/protocol",
                                      subprotocols=["superchat"]) as ws:
            assert ws.subprotocol == "superchat"
            assert await ws.recv() == "superchat"
    asyncio.run(go())


def test_h1_ws_route_off_is_refused_by_origin(gateway, wsorigin):
    """websocket: false: Upgrade is dropped as hop-by-hop, as before; the origin refuses a
    plain GET (websockets answers 426 Upgrade Required), the client sees that refusal."""
    g = wsgw(gateway, wsorigin, route_extra="websocket: false")

    async def go():
        with pytest.raises(websockets.exceptions.InvalidStatusCode) as e:
            async with websockets.connect(f"ws://127.0.0.1:{g.port}/"):
                pass
        return e.value.status_code
    assert asyncio.run(go()) == 426


def test_h1_upgrade_h2c_still_dropped(gateway, origin):
    """Upgrade: h2c never reaches the origin (request smuggling vector), websocket or not."""
    port = free_port()
    gateway(gw_config(port, [f"127.0.0.1:{origin.port}"]), wait=[("127.0.0.1", port)])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                  b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
        time.sleep(0.5)
        data = s.recv(65536)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    got = [q for q in origin.requests if q.target == "/echo"]
    assert got and not got[0].header("upgrade") and not got[0].header("http2-settings")
