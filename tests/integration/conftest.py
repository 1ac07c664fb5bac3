"""Fixtures for h2gate's integration tests.

Every test runs the real gateway binary (H2GATE_BIN, default build/gateway/h2gate) with an
inline YAML config on free loopback ports, next to real origins (nginx, or the scripted origin
in origin.py), and drives it with independent clients (curl, nghttp, h2load, openssl, python3-h2).
Processes are always stopped, and a gateway that leaves a sanitizer report fails its test.
The helpers the tests share with one another and with scripts/ are in tests/lib/ (procs.py,
gwtest.py, origin.py and the others that docs/ARCHITECTURE.md lists): this file puts that folder
on sys.path for every test module, and holds the fixtures only. A test module imports from
there, never from another test module.

Run with Debian's interpreter: /usr/bin/python3 -m pytest tests/integration
"""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

from h2bottleneck import Bottleneck, bottleneck_gateway  # noqa: E402
from origin import ScriptedOrigin  # noqa: E402
from procs import H2GATE_BIN, Gateway, Nginx, Pebble, Redis, factory  # noqa: E402

# Tests that measure rates, bandwidth, time bounds under a second, memory or CPU, or that load
# the machine (h2load, 100 MiB transfers, chromium), are marked `serial`: scripts/lib/run_pytest.sh
# runs the others in two pytest-xdist workers at once, then these alone, so that nothing else
# competes with them for the CPU. Whole modules are listed in SERIAL_MODULES; single tests carry
# @pytest.mark.serial, or are listed in SERIAL_TESTS (ACME tests whose margins are seconds of
# the gateway's own timers: a download paced to span a renewal, an order validated 2.5 s after
# another instance's timer; their files are the ACME work's). A test that waits for a clock
# only in the direction a late event cannot break (a renewal window, a backoff the gateway
# logs, an hour's cap) runs in the parallel pass: a test_acme_ops.py one took 10.5 s, asleep.
# A name listed that is no longer there stops the run.
SERIAL_TESTS = (
    "test_acme.py::test_short_lived_certificate_renewed_and_swapped_under_an_open_connection",
    "test_acme_cluster.py::test_orderer_waits_for_the_longest_check_interval_declared",
)
SERIAL_MODULES = (
    "test_admin",          # probes answered within 0.3 s during a slow scrape
    "test_browser",        # chromium
    "test_cache_memory",   # RSS under a scan of 100,000 URLs, h2load
    "test_cluster",        # request rates and bandwidth across instances
    "test_cluster_sentinel",  # a limit held through a Redis failover, under h2load
    "test_heap_trim",      # RSS after a burst of 1 MiB responses (h2load), idle periods
    "test_origin_churn",   # h2load, origin connection counts
    "test_pipeline",       # h2load, pool caps
    "test_priority_latency",  # a client that reads at a fixed rate
    "test_rate_tables",    # rate tables under a flood of clients
    "test_throttle",       # response, request and upload rates, CPU and RSS
    "test_upload_limits",  # upload rates and RSS per byte
)


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: run alone, not beside other tests "
                                       "(scripts/lib/run_pytest.sh)")
    here = os.path.dirname(os.path.abspath(__file__))
    for m in SERIAL_MODULES:
        if not os.path.exists(os.path.join(here, m + ".py")):
            raise pytest.UsageError(f"conftest.py SERIAL_MODULES: no {m}.py in {here}")
    for t in SERIAL_TESTS:
        module, name = t.split("::")
        path = os.path.join(here, module)
        text = ""
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
        if f"\ndef {name}(" not in text:
            raise pytest.UsageError(f"conftest.py SERIAL_TESTS: no test {name} in {path}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.module.__name__.rsplit(".", 1)[-1]
        if (name in SERIAL_MODULES
                or f"{name}.py::{item.originalname}" in SERIAL_TESTS):
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def h2gate_bin():
    if not os.access(H2GATE_BIN, os.X_OK):
        pytest.fail(f"h2gate binary not found at {H2GATE_BIN} (build first, or set H2GATE_BIN)")
    return H2GATE_BIN


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on its item (item.rep_setup, item.rep_call), for the fixtures'
    teardown to see whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def gateway(request, tmp_path, h2gate_bin):
    """Factory: gateway(config_text, wait=[(host, port), ...], args=(), prefix=(),
    preexec_fn=None) -> Gateway. All are stopped at teardown; a sanitizer report in the log
    fails the test. When the test failed, each gateway's exit status and the end of its log are
    printed (pytest shows them under the failure): what a flaky failure on CI leaves to read.
    preexec_fn runs in the child just before the exec (os.getpid() there is the gateway's pid
    when there is no prefix)."""
    started = []

    def start(config_text, wait=(), args=(), prefix=(), preexec_fn=None):
        d = tempfile.mkdtemp(dir=tmp_path, prefix="gw-")
        g = Gateway(d, config_text, wait=wait, args=args, prefix=prefix, preexec_fn=preexec_fn)
        started.append(g)
        return g

    yield start
    problems = []
    failed = any(getattr(request.node, "rep_" + w, None) is not None
                 and getattr(request.node, "rep_" + w).failed for w in ("setup", "call"))
    for g in started:
        exited = g.proc.poll()  # before stop(): a gateway that died on its own says so here
        g.stop()
        if failed:
            print(f"---- h2gate {g.workdir}: "
                  + (f"exited by itself with {exited}" if exited is not None
                     else f"stopped at teardown, exit {g.returncode}")
                  + f"; its log's last 4000 characters:\n{g.log()[-4000:]}")
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
def pebble():
    """Factory for the ACME tests: pebble(tls_port, **kw) -> Pebble (procs.py) validating
    tls-alpn-01 on tls_port; all stopped at teardown."""
    yield from factory(Pebble, Pebble.stop)


@pytest.fixture
def origin():
    """A ScriptedOrigin (origin.py) on a free port, closed after the test."""
    with ScriptedOrigin() as o:
        yield o


@pytest.fixture
def gwp(gateway, origin):
    """The priority tests' gateway (h2bottleneck.py) in front of the origin fixture."""
    return bottleneck_gateway(gateway, origin)


@pytest.fixture
def bn(gwp):
    """A Bottleneck client (h2bottleneck.py) of gwp, closed after the test."""
    b = Bottleneck(gwp.port, gwp.origin)
    yield b
    b.close()
