"""Fixtures for h2gate's integration tests.

Every test runs the real gateway binary (H2GATE_BIN, default build/gateway/h2gate) with an
inline YAML config on free loopback ports, next to real origins (nginx, or the scripted origin
in origin.py), and drives it with independent clients (curl, nghttp, h2load, openssl, python3-h2).
Processes are always stopped, and a gateway that leaves a sanitizer report fails its test.
The helpers the tests share with scripts/ are in tests/lib/ (procs.py, gwtest.py, origin.py):
this file puts that folder on sys.path for every test module, and holds the fixtures only.

Run with Debian's interpreter: /usr/bin/python3 -m pytest tests/integration
"""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

from origin import ScriptedOrigin  # noqa: E402
from procs import H2GATE_BIN, Gateway, Nginx, Redis, factory  # noqa: E402


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


@pytest.fixture
def nginx_origin(tmp_path):
    """Factory: nginx_origin(root_dir, extra_server_config="") -> Nginx on a free port."""
    yield from factory(lambda root=None, extra="": Nginx(root or str(tmp_path), extra), Nginx.stop)


@pytest.fixture
def redis_server():
    """Factory: redis_server(password=None) -> Redis on a free port; all stopped at teardown."""
    yield from factory(lambda password=None: Redis(password), Redis.close)


@pytest.fixture
def origin():
    """A ScriptedOrigin (origin.py) on a free port, closed after the test."""
    with ScriptedOrigin() as o:
        yield o
