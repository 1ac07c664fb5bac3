"""A WebSocket echo origin on python3-websockets (Debian's), for the WebSocket tests:
`ws_origin.py PORT` serves ws://127.0.0.1:PORT/ and echoes every message (text as text, binary
as binary); the path /count answers each message with the number of bytes it received so far
(for backpressure tests), /flood/N sends N bytes in 64 KiB binary messages and then closes,
/sleep reads nothing for two minutes.
Prints "ready" once listening; spawn() starts it and waits for that."""
import asyncio
import os
import subprocess
import sys

import websockets

PATH = os.path.abspath(__file__)


def spawn(port, prefix=(), **popen):
    """The origin on 127.0.0.1:port in a process of its own (under prefix, e.g. taskset), once
    it listens: the Popen, with .port."""
    p = subprocess.Popen([*prefix, "/usr/bin/python3", PATH, str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, **popen)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    p.port = port
    return p


async def handler(ws, path):
    if path.startswith("/flood/"):
        n = int(path.split("/")[2])
        chunk = b"f" * 65536
        sent = 0
        while sent < n:
            piece = chunk[:min(65536, n - sent)]
            await ws.send(piece)
            sent += len(piece)
        await ws.close()
        return
    if path == "/sleep":  # never reads: what the client sends piles up before it
        await asyncio.sleep(120)
        return
    if path == "/count":
        total = 0
        async for m in ws:
            total += len(m)
            await ws.send(str(total))
        return
    if path == "/protocol":
        await ws.send(ws.subprotocol or "none")
    async for m in ws:
        await ws.send(m)


async def main(port):
    async with websockets.serve(handler, "127.0.0.1", port, max_size=None,
                                subprotocols=["chat", "superchat"], compression=None, max_queue=2):
        print("ready", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
