"""What the integration tests and the long runs of scripts/ (soak, attack, bench) share to run
the gateway and its peers and to talk to them plainly: free ports, waiting for a listener, the
h2gate binary under test, nginx and redis-server on free ports, one-shot socket exchanges, the
RSS of a process. The HTTP/2 clients and the config builders are in gwtest.py, the scripted
origins in origin.py and hostile_origin.py (all in tests/lib/, which tests/integration and
scripts/lib import; nothing here imports a test)."""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H2GATE_BIN = os.path.abspath(os.environ.get("H2GATE_BIN", os.path.join(ROOT, "build", "gateway", "h2gate")))


def _sanitizer_of(path):
    """"asan" or "tsan" when the binary at path was built with that sanitizer, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"__tsan_init" in data:
        return "tsan"
    if b"__asan_init" in data:
        return "asan"
    return None


def _timeout_factor():
    """How much longer than in a plain build the waits for a proof (a log line, a metric, a
    request at the origin, a port, a process's end) may take: H2GATE_TEST_TIMEOUT_FACTOR, else
    3 for an ASan or TSan build of H2GATE_BIN (3 to 15 times slower; on CI's loaded 2-core
    machine a fixed 5 s was exceeded), else 1. The waits return as soon as their condition
    holds: a larger bound costs nothing when it does, and only the waits for an event (never
    those that watch for an absence) are scaled."""
    v = os.environ.get("H2GATE_TEST_TIMEOUT_FACTOR", "")
    try:
        if float(v) > 0:
            return float(v)
    except ValueError:
        pass
    return 3.0 if SANITIZER else 1.0


SANITIZER = _sanitizer_of(H2GATE_BIN)
TIMEOUT_FACTOR = _timeout_factor()


def slow(seconds):
    """seconds, scaled by TIMEOUT_FACTOR: the bound of a wait for something to happen."""
    return seconds * TIMEOUT_FACTOR


_given_ports = set()


def _xdist_stripe():
    """(this worker's index, the number of workers) when pytest-xdist runs the tests in
    several processes (scripts/lib/run_pytest.sh), else None."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1:
        return int(worker[2:]), int(count)
    return None


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    """A TCP port that is free right now on `host` (the OS picks it), never one this process
    was given before: two calls in a row may otherwise get the same port back from the kernel
    (seen as "duplicate listener" when a test asked for a TLS and a cleartext port).
    Under pytest-xdist, the kernel's pick could be the port another worker was just given and
    has not bound yet: each worker then takes its ports from a stripe of its own (port modulo
    the number of workers), below the ephemeral range, which no client socket is given either
    (scripts/lib/ports.py)."""
    stripe = _xdist_stripe()
    low = _ephemeral_low()
    if stripe and low - 10000 >= 4096:
        index, count = stripe
        for _ in range(10000):  # then, whatever happened, the kernel's pick
            port = random.randrange(10000, low)
            port += index - port % count
            if port >= low or port in _given_ports:
                continue
            with socket.socket(family, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue  # in use, or connections of it still in TIME_WAIT
            _given_ports.add(port)
            return port
    while True:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


def wait_port(host, port, timeout=10.0, proc=None):
    """Wait until something accepts on host:port; fail early if `proc` exited."""
    deadline = time.monotonic() + slow(timeout)
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
            time.sleep(0.01)  # a refused connect costs nothing: every start waits less
    raise TimeoutError(f"nothing listening on {host}:{port} after {slow(timeout)}s")


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
        line at stream close), or the log as it is after timeout (scaled: slow())."""
        deadline = time.monotonic() + slow(timeout)
        while True:
            log = self.log()
            if text in log or time.monotonic() > deadline:
                return log
            time.sleep(0.05)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=15):
        self.returncode = self.proc.wait(timeout=slow(timeout))
        return self.returncode

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=slow(timeout))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        self._log.close()
        return self.returncode

    def sanitizer_report(self):
        text = self.log()
        return any(m in text for m in SANITIZER_MARKERS)


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


class Unanswered:
    """A port whose connects hang: a listener that never accepts, its backlog filled by
    `fillers` connects of ours, so that the kernel drops the SYNs that follow. .port; close()
    (or a with block) when done."""

    def __init__(self, fillers=4):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(fillers):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(self.sock.getsockname())
            self.fillers.append(f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for f in self.fillers:
            f.close()
        self.sock.close()


def reuseport_listener():
    """A socket listening on a free port of 127.0.0.1 with SO_REUSEPORT (another process
    that the gateway's own sockets would silently join); its port is getsockname()[1]."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def wait_new_pid(pid_path, old, timeout=10):
    """The pid in the file pid_path once it is not old (a new process wrote it), or None
    after timeout (scaled: slow())."""
    deadline = time.monotonic() + slow(timeout)
    while time.monotonic() < deadline:
        try:
            pid = int(open(pid_path).read())
            if pid != old:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return None


def factory(make, stop):
    """The body of a factory fixture (`yield from factory(...)`): the test gets make, and
    stop(x) runs for everything make returned once the test is over."""
    made = []

    def start(*args, **kw):
        made.append(make(*args, **kw))
        return made[-1]

    yield start
    for x in made:
        stop(x)


class RedisMonitor:
    """MONITOR on a connection of its own to a Redis: every command Redis runs from then on,
    in order; none is missed however late they are read (they wait in the socket)."""

    def __init__(self, redis):
        self.redis = redis
        self.marks = 0
        self.s = socket.create_connection(("127.0.0.1", redis.port), timeout=30)
        self.f = self.s.makefile("rb")
        auth = Redis._enc(["AUTH", redis.password]) if redis.password else b""
        self.s.sendall(auth + Redis._enc(["MONITOR"]))
        if redis.password:
            assert self.f.readline() == b"+OK\r\n"
        assert self.f.readline() == b"+OK\r\n"

    def commands(self):
        """The commands (lists of bytes: name and arguments) Redis ran since the last call, up
        to a mark this sends (ECHO) on another connection."""
        self.marks += 1
        mark = f"monitor-mark-{self.marks}".encode()
        self.redis.cmd("ECHO", mark)
        out = []
        while True:
            args = self.parse(self.f.readline())
            if args == [b"ECHO", mark]:
                return out
            out.append(args)

    @staticmethod
    def parse(line):
        """The arguments of one MONITOR line: `+TIME [DB ADDR] "ARG" ...`, each argument quoted
        with C-like escapes (\\xHH for the bytes that are not printable)."""
        esc = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b", b'"': b'"',
               b"\\": b"\\"}
        line = line.rstrip(b"\r\n")
        j = line.index(b"] ") + 2
        args = []
        while j < len(line):
            if line[j:j + 1] != b'"':
                j += 1
                continue
            j += 1
            arg = bytearray()
            while line[j:j + 1] != b'"':
                if line[j:j + 1] == b"\\" and line[j + 1:j + 2] == b"x":
                    arg.append(int(line[j + 2:j + 4], 16))
                    j += 4
                elif line[j:j + 1] == b"\\":
                    arg += esc[line[j + 1:j + 2]]
                    j += 2
                else:
                    arg += line[j:j + 1]
                    j += 1
            args.append(bytes(arg))
            j += 1
        return args

    def close(self):
        self.s.close()


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


def recv_all(sock, resets_end=False):
    """What sock receives until the peer closes (or a timeout of the socket passes without a
    byte: what came until then); with resets_end, a reset ends it too instead of raising."""
    out = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        pass
    except ConnectionResetError:
        if not resets_end:
            raise
    return out


def recv_head(sock):
    """What sock receives until a blank line ends a head (it may hold bytes past it), or until
    the peer closes."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = sock.recv(65536)
        if not d:
            break
        data += d
    return data


def recv_response(sock):
    """One whole HTTP/1.1 response with a Content-Length from sock, which stays open for the
    next (keep-alive): its (head, body). The peer closing before its end fails the test."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = sock.recv(65536)
        assert d, data
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(body) < n:
        d = sock.recv(65536)
        assert d, (head, len(body))
        body += d
    return head, body


def h1_get(port, path, timeout=10, headers=(), host="localhost"):
    """GET path over HTTP/1.1 with `Connection: close` (and the (name, value) headers) on a new
    connection to 127.0.0.1:port; the whole response (what came, if a read timed out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        s.sendall((req + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode())
        return recv_all(s)


def sanitizer():
    """"asan" (the ASan + UBSan build), "tsan" or None (a plain build) for the h2gate under
    test (H2GATE_BIN): from the sanitizer runtime's entry point the binary imports, so an
    installed binary or a build directory of any name is told right (a test of "san" in the
    directory's name took build-tsan for an ASan build, and missed an ASan build named
    otherwise)."""
    return SANITIZER


def sanitized():
    """Whether the h2gate under test is built with any sanitizer (sanitizer() says which):
    measurements of its memory and CPU are then the runtime's, not the gateway's. ASan's
    allocator keeps freed memory in a quarantine (256 MiB by default), so RSS says nothing of
    what the gateway holds; under TSan every page the gateway touches brings shadow pages
    with it (memory use 5 to 10 times, its documentation says), so a bound in KiB set for the
    plain build does not hold either. Both instrument every memory access: CPU is theirs too.
    A test whose reason is ASan's alone asks sanitizer() == "asan"."""
    return SANITIZER is not None


def rss_kib(pid):
    """VmRSS of a process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0




class Pebble:
    """Let's Encrypt's ACME test server (Debian's pebble) on free loopback ports, resolving every
    name to 127.0.0.1 through pebble-challtestsrv's DNS, its tls-alpn-01 validations sent to
    tls_port. Its own HTTPS certificate is a self-signed one made here (`ca`: the file that
    trusts it). env: more of pebble's environment (PEBBLE_WFE_NONCEREJECT=...); by default it
    validates at once and keeps its default nonce rejection (5 % of good nonces refused with
    badNonce, as a real server may). `directory` is the URL to give the client; `roots()` and
    `intermediates()` its CA certificates (PEM) from the management API. validity: the
    lifetime of the certificates it issues, in seconds (its default: 5 years). port: where its
    ACME API listens (default: a free port), and tls: its HTTPS pair (Pebble.make_tls()), so
    that a test can start it where a gateway already looks for it and trusts it. http_port: where
    its http-01 validations go (default: a free port where nothing listens)."""

    @staticmethod
    def make_tls(folder):
        """A self-signed pair for pebble's HTTPS (127.0.0.1) in folder: (certificate, key)."""
        crt, key = os.path.join(folder, "pebble.crt"), os.path.join(folder, "pebble.key")
        p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt,
                            "-days", "2", "-subj", "/CN=pebble", "-addext",
                            "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return crt, key

    def __init__(self, tls_port, env=None, validity=None, port=None, tls=None, http_port=None):
        self.dir = tempfile.mkdtemp(prefix="pebble-")
        self.ca, key = tls or Pebble.make_tls(self.dir)
        self.port, self.mgmt, dns, cmgmt = port or free_port(), free_port(), free_port(), free_port()
        cfg = os.path.join(self.dir, "pebble.json")
        with open(cfg, "w") as f:
            f.write('{"pebble": {"listenAddress": "127.0.0.1:%d", "managementListenAddress": '
                    '"127.0.0.1:%d", "certificate": "%s", "privateKey": "%s", "httpPort": %d, '
                    '"tlsPort": %d, "ocspResponderURL": "", '
                    '"externalAccountBindingRequired": false%s}}'
                    % (self.port, self.mgmt, self.ca, key, http_port or free_port(), tls_port,
                       f', "certificateValidityPeriod": {validity}' if validity else ""))
        self.log_path = os.path.join(self.dir, "pebble.log")
        self._log = open(self.log_path, "wb")
        self.dns = subprocess.Popen(
            ["pebble-challtestsrv", "-dns01", f"127.0.0.1:{dns}", "-http01", "", "-https01", "",
             "-tlsalpn01", "", "-management", f"127.0.0.1:{cmgmt}", "-defaultIPv4", "127.0.0.1",
             "-defaultIPv6", ""], stdout=self._log, stderr=subprocess.STDOUT)
        penv = dict(os.environ, PEBBLE_VA_NOSLEEP="1")
        penv.pop("PEBBLE_WFE_NONCEREJECT", None)
        penv.update(env or {})
        self.proc = subprocess.Popen(["pebble", "-config", cfg, "-dnsserver", f"127.0.0.1:{dns}"],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=penv)
        self.directory = f"https://127.0.0.1:{self.port}/dir"
        try:
            wait_port("127.0.0.1", cmgmt, proc=self.dns)
            wait_port("127.0.0.1", self.port, proc=self.proc)
            wait_port("127.0.0.1", self.mgmt, proc=self.proc)
        except Exception:
            self.stop()
            raise RuntimeError("pebble did not start:\n" + self.log())

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def _get(self, path):
        import ssl
        import urllib.request
        ctx = ssl.create_default_context(cafile=self.ca)
        with urllib.request.urlopen(f"https://127.0.0.1:{self.mgmt}{path}", context=ctx,
                                    timeout=10) as r:
            return r.read().decode()

    def roots(self):
        return self._get("/roots/0")

    def intermediates(self):
        return self._get("/intermediates/0")

    def stop(self):
        for p in (self.proc, self.dns):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
