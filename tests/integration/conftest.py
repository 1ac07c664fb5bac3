"""Fixtures for h2gate's integration tests.

Every test runs the real gateway binary (H2GATE_BIN, default build/gateway/h2gate) with an
inline YAML config on free loopback ports, next to real origins (nginx, or the scripted origin
in origin.py), and drives it with independent clients (curl, nghttp, h2load, openssl, python3-h2).
Processes are always stopped, and a gateway that leaves a sanitizer report fails its test.

Run with Debian's interpreter: /usr/bin/python3 -m pytest tests/integration
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time

import pytest

from origin import ScriptedOrigin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H2GATE_BIN = os.path.abspath(os.environ.get("H2GATE_BIN", os.path.join(ROOT, "build", "gateway", "h2gate")))


_given_ports = set()


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    """A TCP port that is free right now on `host` (the OS picks it), never one this process
    was given before: two calls in a row may otherwise get the same port back from the kernel
    (seen as "duplicate listener" when a test asked for a TLS and a cleartext port)."""
    while True:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


def wait_port(host, port, timeout=10.0, proc=None):
    """Wait until something accepts on host:port; fail early if `proc` exited."""
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                s.connect((host, port))
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


class Gateway:
    """A running h2gate. `log()` is its stderr so far; `stop()` sends SIGTERM and waits."""

    def __init__(self, workdir, config_text, wait=(), args=(), prefix=(), preexec_fn=None):
        self.workdir = workdir
        self.config_path = os.path.join(workdir, "gateway.yaml")
        with open(self.config_path, "w") as f:
            f.write(textwrap.dedent(config_text))
        self.log_path = os.path.join(workdir, "h2gate.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        # prefix: a command the gateway runs under (strace ...); proc is then that command.
        # preexec_fn runs in the child just before the exec.
        self.proc = subprocess.Popen([*prefix, H2GATE_BIN, "-c", self.config_path, *args],
                                     cwd=workdir,
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=preexec_fn)
        self.returncode = None
        try:
            for host, port in wait:
                wait_port(host, port, proc=self.proc)
        except Exception:
            self.stop()
            raise RuntimeError("gateway did not start:\n" + self.log())

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, text, timeout=5.0):
        """The log once it contains text (lines written after the response, e.g. the request
        line at stream close), or the log as it is after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log()
            if text in log or time.monotonic() > deadline:
                return log
            time.sleep(0.05)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=15):
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        self._log.close()
        return self.returncode

    def sanitizer_report(self):
        text = self.log()
        return any(m in text for m in SANITIZER_MARKERS)


@pytest.fixture
def h2gate_bin():
    if not os.access(H2GATE_BIN, os.X_OK):
        pytest.fail(f"h2gate binary not found at {H2GATE_BIN} (build first, or set H2GATE_BIN)")
    return H2GATE_BIN


@pytest.fixture
def gateway(tmp_path, h2gate_bin):
    """Factory: gateway(config_text, wait=[(host, port), ...], args=(), prefix=(),
    preexec_fn=None) -> Gateway. All are stopped at teardown; a sanitizer report in the log
    fails the test. preexec_fn runs in the child just before the exec (os.getpid() there is the
    gateway's pid when there is no prefix)."""
    started = []

    def start(config_text, wait=(), args=(), prefix=(), preexec_fn=None):
        d = tempfile.mkdtemp(dir=tmp_path, prefix="gw-")
        g = Gateway(d, config_text, wait=wait, args=args, prefix=prefix, preexec_fn=preexec_fn)
        started.append(g)
        return g

    yield start
    problems = []
    for g in started:
        g.stop()
        if g.sanitizer_report():
            problems.append(g.log()[-6000:])
    if problems:
        pytest.fail("sanitizer report from h2gate:\n" + "\n".join(problems))


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log {dir}/access.log;
    log_format conn '$connection $pipe $request';
    access_log {dir}/conn.log conn;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests 100000;
    keepalive_timeout 60s;
    types {{ text/html html; text/css css; application/javascript js; image/svg+xml svg; text/plain txt; }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        {extra}
    }}
}}
"""


def stop_proc(proc, timeout=10):
    """SIGTERM, then SIGKILL after timeout; waits for the process either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Nginx:
    """nginx serving root on a free port; with cert and key, over TLS (`listen ... ssl`)."""

    def __init__(self, root, extra="", cert=None, key=None):
        self.dir = tempfile.mkdtemp(prefix="nginx-tls-" if cert else "nginx-")
        self.port = free_port()
        self.root = root
        conf_text = NGINX_CONF
        if cert:
            conf_text = conf_text.replace("listen 127.0.0.1:{port};", "listen 127.0.0.1:{port} ssl;")
            extra = f"ssl_certificate {cert};\n        ssl_certificate_key {key};\n        {extra}"
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(conf_text.format(dir=self.dir, port=self.port, root=root, extra=extra))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port("127.0.0.1", self.port, proc=self.proc)

    def connections(self):
        """Distinct client connections nginx served requests on (from its conn.log)."""
        with open(os.path.join(self.dir, "conn.log")) as f:
            return len({l.split(" ", 1)[0] for l in f if l.strip()})

    def requests(self):
        """Requests nginx served (from its conn.log)."""
        with open(os.path.join(self.dir, "conn.log")) as f:
            return sum(1 for l in f if l.strip())

    def pipelined(self):
        """Requests nginx read behind another on the same connection ($pipe is "p")."""
        with open(os.path.join(self.dir, "conn.log")) as f:
            return sum(1 for l in f if l.split(" ", 2)[1:2] == ["p"])

    def access_log(self):
        with open(os.path.join(self.dir, "access.log")) as f:
            return f.read().splitlines()

    def stop(self):
        stop_proc(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def nginx_origin(tmp_path):
    """Factory: nginx_origin(root_dir, extra_server_config="") -> Nginx on a free port."""
    started = []

    def start(root=None, extra=""):
        n = Nginx(root or str(tmp_path), extra)
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()


class Redis:
    """Debian's redis-server on a free loopback port, nothing persisted; cmd() speaks RESP."""

    def __init__(self, password=None, port=None):
        self.dir = tempfile.mkdtemp(prefix="redis-")
        self.port = port or free_port()
        self.password = password
        self.start()

    def start(self):
        args = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
                "--enable-debug-command", "local"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port("127.0.0.1", self.port, proc=self.proc)

    def cmd(self, *args, timeout=10):
        """One command; the reply (bytes, int, None, list, or an Exception for an error)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            out = b""
            if self.password:
                out += self._enc(["AUTH", self.password])
            out += self._enc(args)
            s.sendall(out)
            f = s.makefile("rb")
            if self.password:
                self._read(f)
            return self._read(f)

    @staticmethod
    def _enc(args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(parts)

    def _read(self, f):
        line = f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            return Exception(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read(f) for _ in range(n)]
        raise ValueError(f"bad RESP line {line!r}")

    def stop(self):
        stop_proc(self.proc)

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_server():
    """Factory: redis_server(password=None) -> Redis on a free port; all stopped at teardown."""
    started = []

    def start(password=None):
        r = Redis(password)
        started.append(r)
        return r

    yield start
    for r in started:
        r.close()


def run(cmd, timeout=20, **kw):
    """Run a client command with a bound on its time; returns CompletedProcess (text)."""
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                          timeout=timeout, **kw)


def raw_exchange(port, data, timeout=5):
    """Send data on a new TCP connection to 127.0.0.1:port; what came back until the peer
    closed (or timeout seconds passed without a byte)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    try:
        return recv_all(s)
    finally:
        s.close()


def recv_all(sock):
    """What sock receives until the peer closes (or a timeout of the socket passes without a
    byte: what came until then)."""
    out = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        pass
    return out


def h1_get(port, path, timeout=10):
    """GET path over HTTP/1.1 with `Connection: close` on a new connection to 127.0.0.1:port;
    the whole response (what came, if a read timed out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        return recv_all(s)


def sanitized():
    """Whether the h2gate under test is an ASan build: its allocator keeps freed memory in a
    quarantine (256 MiB by default), so RSS says nothing of what the gateway holds, and tests
    that move far more than that cannot bound it."""
    with open(H2GATE_BIN, "rb") as f:
        return b"__asan_init" in f.read()


def rss_kib(pid):
    """VmRSS of a process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture
def origin():
    """A ScriptedOrigin (origin.py) on a free port, closed after the test."""
    with ScriptedOrigin() as o:
        yield o
