"""The README's first command: scripts/run builds, starts the demo origin and the gateway on
the embedded default config (fixed ports 8443, 8080, 9000), prints the URLs, and Ctrl-C stops
everything it started."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, run, wait_port

PORTS = (8443, 8080, 9000)


def port_busy(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


@pytest.fixture
def run_script():
    if any(port_busy(p) for p in PORTS):
        pytest.skip("ports 8443/8080/9000 are in use on this machine")
    # a copy of the tree keeps the state/ folder this test makes out of the checkout; the
    # build dir is shared through a symlink so nothing is rebuilt
    work = tempfile.mkdtemp(prefix="h2gate-run-")
    for name in ("scripts", "demo", "config", "gateway", "common", "tests", "meson.build",
                 "meson_options.txt"):
        src = os.path.join(ROOT, name)
        os.symlink(src, os.path.join(work, name))
    os.symlink(os.path.join(ROOT, "build"), os.path.join(work, "build"))
    log = open(os.path.join(work, "run.log"), "wb")
    p = subprocess.Popen(["bash", os.path.join(work, "scripts", "run")], cwd=work, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    yield p, work
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    log.close()
    shutil.rmtree(work, ignore_errors=True)


def test_scripts_run_serves_demo_and_stops_on_ctrl_c(run_script):
    p, work = run_script
    for port in PORTS:
        wait_port("127.0.0.1", port, timeout=120, proc=p)
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline and "Ctrl-C" not in text:
        time.sleep(0.1)
        text = open(os.path.join(work, "run.log"), errors="replace").read()
    assert "https://127.0.0.1:8443/" in text and "http://127.0.0.1:8080/" in text, text
    # the demo origin serves the demo site
    r = run(["curl", "-sS", "http://127.0.0.1:9000/"])
    assert "h2gate demo site" in r.stdout
    # the gateway serves it on both listeners, over HTTP/2 and HTTP/1.1
    r = run(["curl", "-sSk", "--http2", "-w", "%{http_code} %{http_version}", "https://127.0.0.1:8443/"])
    assert "h2gate demo site" in r.stdout and r.stdout.endswith("200 2"), r.stdout
    r = run(["curl", "-sS", "-w", "%{http_code}", "http://127.0.0.1:8080/"])
    assert "h2gate demo site" in r.stdout and r.stdout.endswith("200"), r.stdout
    assert os.path.exists(os.path.join(work, "state", "cert.pem"))
    # Ctrl-C reaches the whole foreground process group
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=20) in (0, 130)
    time.sleep(0.2)
    for port in PORTS:
        assert not port_busy(port), f"port {port} still in use after Ctrl-C"
