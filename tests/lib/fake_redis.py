"""A scripted Redis for the cluster tests that a real redis-server cannot play: a broken,
hostile or impersonated Redis on a free loopback port, speaking just enough RESP.

By default it answers like a Redis that holds nothing: SCRIPT LOAD with the script's SHA1, GET
with nil, SET with +OK, EVAL (the heartbeat) with 1, EVALSHA on a `rate:` key with {n, 0} (all n allowed; n is the script's
third argument) and on a `bw:` key with the bytes asked for. Each answer can be replaced:

    FakeRedis(rate=b"*2\\r\\n:0\\r\\n:9223372036854775807\\r\\n")  the rate script's raw answer
    FakeRedis(lease=b":-5\\r\\n")                                 the lease script's raw answer
    FakeRedis(get=b"-ERR ...\\r\\n")                              GET's raw answer
    FakeRedis(flood=b"$300000000\\r\\n", filler=b"x", flood_bytes=300 << 20)  once armed
        (arm()), the next command of every connection gets `flood`, then `filler` repeated,
        flood_bytes in all, as fast as the gateway takes them, until it closes the connection;
        before, the default answers (so the cluster comes up first)

Records the commands received (lists of bytes), the connections accepted and, per flooded
connection, how many bytes were sent and whether the gateway closed it (`floods`).
"""
import hashlib
import socket
import threading

from origin import ThreadedServer


class FakeRedis(ThreadedServer):
    def __init__(self, rate=None, lease=None, get=None, flood=None, filler=b"x",
                 flood_bytes=300 << 20):
        self.rate, self.lease, self.get, self.flood = rate, lease, get, flood
        self.filler, self.flood_bytes = filler, flood_bytes
        self.armed = threading.Event()
        self.commands = []
        self.floods = []  # (bytes sent, closed by the gateway)
        super().__init__()

    def arm(self):
        self.armed.set()

    def names(self):
        """The command names received, in order (b"SCRIPT", b"GET", ...)."""
        with self.lock:
            return [c[0].upper() for c in self.commands if c]

    def _serve(self, c):
        # as redis-server does: without it, an answer written while the one before is not
        # yet acknowledged waits for the peer's delayed ACK (40 ms), past cluster.timeout
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for cmd in self._commands(c):
                with self.lock:
                    self.commands.append(cmd)
                if self.flood is not None and self.armed.is_set():
                    self._flood(c)
                    return
                c.sendall(self._answer(cmd))
        except OSError:
            pass
        finally:
            c.close()

    def _commands(self, c):
        """The commands read from c, one after the other, until it closes or the server stops."""
        buf = b""
        while not self.stopping:
            cmd, buf = self._command(c, buf)
            if cmd is None:
                return
            yield cmd

    def _flood(self, c):
        sent, closed = 0, False
        filler = self.filler * ((1 << 20) // len(self.filler))
        try:
            c.sendall(self.flood)
            while sent < self.flood_bytes and not self.stopping:
                n = c.send(filler[:min(len(filler), self.flood_bytes - sent)])
                sent += n
        except OSError:
            closed = True
        with self.lock:
            self.floods.append((sent, closed))

    @staticmethod
    def _command(c, buf):
        """One RESP command (an array of bulk strings) from c: (args, rest), or (None, b"")."""
        def need(n):
            nonlocal buf
            while len(buf) < n:
                d = c.recv(65536)
                if not d:
                    raise EOFError
                buf += d

        def line():
            nonlocal buf
            while b"\r\n" not in buf:
                need(len(buf) + 1)
            ln, buf = buf.split(b"\r\n", 1)
            return ln

        try:
            head = line()
            assert head[:1] == b"*", head
            args = []
            for _ in range(int(head[1:])):
                ln = line()
                assert ln[:1] == b"$", ln
                n = int(ln[1:])
                need(n + 2)
                args.append(buf[:n])
                buf = buf[n + 2:]
            return args, buf
        except (EOFError, OSError):
            return None, b""

    def _answer(self, cmd):
        name = cmd[0].upper()
        if name == b"SCRIPT":
            sha = hashlib.sha1(cmd[2]).hexdigest().encode()
            return b"$40\r\n" + sha + b"\r\n"
        if name == b"GET":
            return self.get if self.get is not None else b"$-1\r\n"
        if name == b"EVAL":  # the heartbeat: this instance alone
            return b":1\r\n"
        if name == b"EVALSHA":
            key, argv = cmd[3], cmd[4:]
            if b"rate:" in key:
                if self.rate is not None:
                    return self.rate
                return b"*2\r\n:%d\r\n:0\r\n" % int(argv[2])
            if self.lease is not None:
                return self.lease
            return b":%d\r\n" % int(argv[2])
        return b"+OK\r\n"


class FakeSentinel(FakeRedis):
    """A Redis Sentinel that says what it is told: `SENTINEL master` answers ip and port (named)
    and config-epoch (epoch) for any master name, get-master-addr-by-name (host, port); when
    named is None, it does not know the master (an error, and nil); SUBSCRIBE is
    confirmed and nothing is ever published. A sentinel that lies, or is behind."""

    def __init__(self, named, epoch=0):
        self.named, self.epoch = named, epoch
        super().__init__()

    def _answer(self, cmd):
        name = cmd[0].upper()
        if name == b"SENTINEL":
            master = len(cmd) > 1 and cmd[1].lower() == b"master"
            if self.named is None:
                return b"-ERR No such master with that name\r\n" if master else b"*-1\r\n"
            host, port = self.named[0].encode(), str(self.named[1]).encode()
            fields = [b"ip", host, b"port", port]
            if master:  # the fields h2gate reads, among others as a real sentinel gives them
                fields = [b"name", cmd[2], *fields, b"flags", b"master", b"config-epoch",
                          str(self.epoch).encode(), b"num-slaves", b"1"]
            else:
                fields = [host, port]
            return b"*%d\r\n" % len(fields) + b"".join(
                b"$%d\r\n%s\r\n" % (len(f), f) for f in fields)
        if name == b"SUBSCRIBE":
            return b"*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n"
        return super()._answer(cmd)
