"""The README's first command: scripts/run builds, starts the demo origin and the gateway on
the embedded default config, checks that every listener answers before it says the gateway
runs, prints the URLs, and Ctrl-C stops everything it started. Its ports come from
H2GATE_HTTPS_PORT, H2GATE_HTTP_PORT, H2GATE_ADMIN_PORT and H2GATE_ORIGIN_PORT; a port it
cannot use makes it exit 1 with the reason, never with "h2gate is running"."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from procs import ROOT, free_port, run

RUNNING = "h2gate is running"


def port_busy(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


def env_ports():
    return {"H2GATE_HTTPS_PORT": free_port(), "H2GATE_HTTP_PORT": free_port(),
            "H2GATE_ADMIN_PORT": free_port(), "H2GATE_ORIGIN_PORT": free_port()}


@pytest.fixture
def run_script():
    """start(ports) runs scripts/run in a copy of the tree (so the state/ folder it makes stays
    out of the checkout; the build dir is shared through a symlink so nothing is rebuilt) with
    the ports in its environment; returns the process and a function giving its output."""
    work = tempfile.mkdtemp(prefix="h2gate-run-")
    for name in ("scripts", "demo", "config", "gateway", "common", "tests", "meson.build",
                 "meson_options.txt"):
        os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
    os.symlink(os.path.join(ROOT, "build"), os.path.join(work, "build"))
    logpath = os.path.join(work, "run.log")
    log = open(logpath, "wb")
    procs = []

    def start(ports):
        env = dict(os.environ, **{k: str(v) for k, v in ports.items()})
        p = subprocess.Popen(["bash", os.path.join(work, "scripts", "run")], cwd=work, env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p, lambda: open(logpath, errors="replace").read()

    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    log.close()
    shutil.rmtree(work, ignore_errors=True)


def wait_for_text(output, text, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in output():
            return
        assert proc.poll() is None, f"scripts/run exited {proc.returncode}:\n{output()}"
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} after {timeout}s:\n{output()}")


def test_scripts_run_serves_on_the_ports_of_the_environment_and_stops_on_ctrl_c(run_script):
    ports = env_ports()
    https, http = ports["H2GATE_HTTPS_PORT"], ports["H2GATE_HTTP_PORT"]
    admin, origin = ports["H2GATE_ADMIN_PORT"], ports["H2GATE_ORIGIN_PORT"]
    p, output = run_script(ports)
    wait_for_text(output, "Ctrl-C stops it", p, timeout=120)
    text = output()
    assert f"https://127.0.0.1:{https}/" in text and f"http://127.0.0.1:{http}/" in text, text
    assert f"http://127.0.0.1:{admin}/metrics" in text, text
    assert f"H2GATE_HTTPS_PORT={https} " in text, text
    # the demo origin serves the demo site on its port
    r = run(["curl", "-sS", f"http://127.0.0.1:{origin}/"])
    assert "h2gate demo site" in r.stdout
    # the gateway serves it on both listeners, over HTTP/2 and HTTP/1.1
    r = run(["curl", "-sSk", "--http2", "-w", "%{http_code} %{http_version}",
             f"https://127.0.0.1:{https}/"])
    assert "h2gate demo site" in r.stdout and r.stdout.endswith("200 2"), r.stdout
    r = run(["curl", "-sS", "-w", "%{http_code}", f"http://127.0.0.1:{http}/"])
    assert "h2gate demo site" in r.stdout and r.stdout.endswith("200"), r.stdout
    r = run(["curl", "-sS", f"http://127.0.0.1:{admin}/metrics"])
    assert "h2gate_requests_total" in r.stdout, r.stdout[:500]
    # Ctrl-C reaches the whole foreground process group
    os.killpg(p.pid, signal.SIGINT)
    st = p.wait(timeout=20)
    assert st in (0, 130), output()
    time.sleep(0.2)
    for port in ports.values():
        assert not port_busy(port), f"port {port} still in use after Ctrl-C"


def test_scripts_run_refuses_a_port_another_program_listens_on(run_script):
    ports = env_ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports["H2GATE_HTTPS_PORT"]))
        taken.listen()
        p, output = run_script(ports)
        assert p.wait(timeout=60) == 1, output()
    text = output()
    assert RUNNING not in text, text
    assert f"127.0.0.1:{ports['H2GATE_HTTPS_PORT']} is already in use" in text, text
    assert "H2GATE_HTTPS_PORT=PORT scripts/run" in text, text


def test_scripts_run_quotes_the_gateway_error_when_it_cannot_listen(run_script):
    """A socket bound without listening: nothing answers there, so only the gateway's own
    bind finds the port taken (listen_failed); scripts/run says so, stops the origin it
    started and exits 1 instead of claiming success."""
    ports = env_ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports["H2GATE_HTTPS_PORT"]))
        p, output = run_script(ports)
        assert p.wait(timeout=120) == 1, output()
    text = output()
    assert RUNNING not in text, text
    assert "h2gate exited with status 1 before it answered" in text, text
    quoted = text[text.index("before it answered"):]
    assert (f"event=listen_failed address=127.0.0.1:{ports['H2GATE_HTTPS_PORT']}" in quoted
            and "Address already in use" in quoted), text
    assert "H2GATE_HTTPS_PORT" in quoted, text
    time.sleep(0.2)
    assert not port_busy(ports["H2GATE_ORIGIN_PORT"]), "the demo origin outlived scripts/run"


def test_scripts_run_installs_only_what_the_demo_needs():
    """`scripts/setup run` (what scripts/run calls) names no test or bench tool; plain
    `scripts/setup` (what scripts/test calls) still installs them all."""
    setup = os.path.join(ROOT, "scripts", "setup")
    demo = set(run([setup, "run", "--list"]).stdout.split())
    full = set(run([setup, "--list"]).stdout.split())
    for tool in ("chromium", "h2o", "haproxy", "valgrind", "clang", "redis-server", "mandoc"):
        assert tool not in demo and tool in full, tool
    for need in ("meson", "ninja-build", "libuv1-dev", "libhiredis-dev", "nginx", "curl"):
        assert need in demo, need
    assert demo < full
    assert 'scripts/setup" run' in open(os.path.join(ROOT, "scripts", "run")).read()
