"""`meson install`: the binary, both man pages, the default config and the
systemd unit land where they should, the pages render without warnings and match the config
reference, the installed config is valid, and systemd accepts the unit."""
import os
import re
import shutil
import signal
import subprocess

import pytest

from procs import H2GATE_BIN, ROOT, free_port, run, sanitized, wait_new_pid

PY = "/usr/bin/python3"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    build = os.path.dirname(os.path.dirname(H2GATE_BIN))
    if not os.path.exists(os.path.join(build, "build.ninja")):
        pytest.fail(f"{H2GATE_BIN} is not in a meson build directory")
    dest = tmp_path_factory.mktemp("destdir")
    r = run(["meson", "install", "-C", build, "--destdir", str(dest), "--no-rebuild", "--quiet"],
            timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    prefix = None
    for root, _dirs, files in os.walk(dest):
        if "h2gate" in files and root.endswith("/bin"):
            prefix = os.path.dirname(root)
    assert prefix, "no bin/h2gate installed"
    return str(dest), prefix


def test_every_file_installed(installed):
    _dest, prefix = installed
    for rel in ["bin/h2gate", "share/man/man8/h2gate.8", "share/man/man5/h2gate.yaml.5",
                "lib/systemd/system/h2gate.service"]:
        assert os.path.isfile(os.path.join(prefix, rel)), rel
    assert os.access(os.path.join(prefix, "bin/h2gate"), os.X_OK)
    etc = [os.path.join(r, f) for r, _d, fs in os.walk(installed[0]) for f in fs
           if f == "h2gate.yaml" and r.endswith("/h2gate")]
    assert len(etc) == 1, etc


def test_installed_config_is_valid(installed):
    _dest, prefix = installed
    cfg = [os.path.join(r, f) for r, _d, fs in os.walk(installed[0]) for f in fs
           if f == "h2gate.yaml"][0]
    r = run([os.path.join(prefix, "bin/h2gate"), "--check-config", cfg])
    assert r.returncode == 0 and r.stdout.strip().endswith(": ok"), r.stdout + r.stderr


@pytest.mark.parametrize("page", ["man8/h2gate.8", "man5/h2gate.yaml.5"])
def test_man_pages_render_without_warnings(installed, page):
    _dest, prefix = installed
    path = os.path.join(prefix, "share/man", page)
    r = run(["groff", "-man", "-ww", "-z", path])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = run(["groff", "-man", "-Tutf8", "-P", "-cbou", path])
    assert r.returncode == 0
    text = r.stdout
    assert "NAME" in text and "SEE ALSO" in text


def test_yaml_page_matches_the_config_reference():
    """docs/h2gate.yaml.5 is generated from config/README.md: a key documented there and
    missing from the page means the page is stale."""
    r = run([PY, os.path.join(ROOT, "scripts", "gen_man.py"), "--check"])
    assert r.returncode == 0, r.stderr
    page = open(os.path.join(ROOT, "docs", "h2gate.yaml.5")).read()
    for key in ("max_concurrent_streams", "coalesce_buffer", "idle_purge", "ipv6_prefix",
                "request_body", "tls_verify"):
        assert key in page, key


def test_the_cli_page_names_every_option(installed):
    _dest, prefix = installed
    page = open(os.path.join(prefix, "share/man/man8/h2gate.8")).read()
    help_text = run([H2GATE_BIN, "--help"]).stdout
    for opt in ("config", "check", "print", "version", "help"):
        assert f"\\-\\-{opt}" in page.replace("\\-\\-check\\-config", "\\-\\-check")
        assert opt in help_text


def test_systemd_accepts_the_unit(installed, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    dest, prefix = installed
    unit = open(os.path.join(prefix, "lib/systemd/system/h2gate.service")).read()
    assert "ExecStart=" in unit and "/bin/h2gate -c " in unit
    # the unit names installed paths: point them into the destdir for the check
    inner = prefix[len(dest):]
    local = tmp_path / "h2gate.service"
    local.write_text(unit.replace(inner + "/", prefix + "/"))
    env = dict(os.environ, MANPATH=os.path.join(prefix, "share/man"))
    r = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True,
                       text=True, env=env, timeout=60)
    problems = [l for l in (r.stdout + r.stderr).splitlines() if "h2gate.service" in l]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


# ---- the unit's sandbox --------------------------------------------------------------------------

def unit_text(installed):
    _dest, prefix = installed
    return open(os.path.join(prefix, "lib/systemd/system/h2gate.service")).read()


def offline_security_supported():
    if not shutil.which("systemd-analyze"):
        return False
    r = run(["systemd-analyze", "security", "--help"])
    return "--offline" in r.stdout


def test_systemd_rates_the_unit_sandbox_ok(installed):
    """`systemd-analyze security` rates the installed unit "OK" (at most 3.0; it was 8.4
    EXPOSED), while the gateway keeps what it needs: binding ports below 1024, writing its
    state, log and pid file directories, and forking itself for the binary upgrade."""
    if not offline_security_supported():
        pytest.skip("systemd-analyze security --offline is not available (systemd < 250)")
    _dest, prefix = installed
    unit = os.path.join(prefix, "lib/systemd/system/h2gate.service")
    r = run(["systemd-analyze", "security", "--offline=yes", "--no-pager", unit], timeout=60)
    m = re.search(r"Overall exposure level for h2gate\.service: ([0-9.]+) (\w+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 3.0, r.stdout
    text = unit_text(installed)
    for line in ("CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
                 "AmbientCapabilities=CAP_NET_BIND_SERVICE",
                 "SystemCallFilter=@system-service",
                 "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                 "StateDirectory=h2gate", "LogsDirectory=h2gate", "RuntimeDirectory=h2gate",
                 "WorkingDirectory=/var/lib/h2gate", "DynamicUser=yes"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line
    # a user namespace would take the right to bind 443 away
    assert not re.search(r"^PrivateUsers=(yes|true|1)", text, re.M)


def syscall_set(spec):
    """The system calls a SystemCallFilter= group or name stands for (groups expanded)."""
    if not spec.startswith("@"):
        return {spec}
    out = run(["systemd-analyze", "syscall-filter", "--no-pager", spec]).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        s = line.strip()
        if s and not s.startswith("#"):
            calls |= syscall_set(s)
    return calls


def unit_syscall_allowlist(text):
    """What the unit's SystemCallFilter= lines allow: the first allow list, minus every
    `~` line (systemd.exec(5))."""
    allowed = None
    for line in re.findall(r"^SystemCallFilter=(.*)$", text, re.M):
        deny = line.startswith("~")
        calls = set().union(*(syscall_set(w) for w in line.lstrip("~").split()))
        if deny:
            allowed -= calls
        else:
            allowed = calls if allowed is None else allowed | calls
    return allowed


def test_unit_sandbox_allows_every_system_call_the_gateway_makes(installed, gateway,
                                                                 nginx_origin, tmp_path):
    """The gateway traced with strace -f over what it does under systemd (start with a
    self-signed pair, TLS + HTTP/2, h2c, HTTP/1.1, compression, an admin scrape, the access log
    reopened after a `mv`, a reload, a binary upgrade, a graceful stop): every system call is
    in the unit's SystemCallFilter= and every socket in its RestrictAddressFamilies=. (Outside
    systemd: whether the rest of the sandbox lets it run is not checked here.)"""
    if not shutil.which("strace") or not shutil.which("systemd-analyze"):
        pytest.skip("strace and systemd-analyze are needed")
    if sanitized():
        pytest.skip("the sanitizer runtime makes system calls of its own")
    text = unit_text(installed)
    allowed = unit_syscall_allowlist(text)
    assert allowed and "execve" in allowed and "bind" in allowed
    families = set(re.search(r"^RestrictAddressFamilies=(.*)$", text, re.M).group(1).split())
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello\n")
    (site / "big.txt").write_text("compress me " * 20000)
    o = nginx_origin(str(site))
    tls, clear, admin = free_port(), free_port(), free_port()
    trace = tmp_path / "trace"
    g = gateway(f"""
        workers: 2
        pid_file: h2gate.pid
        listen:
          - address: 127.0.0.1:{tls}
            tls: {{ certificate: state/cert.pem, key: state/key.pem, self_signed: true }}
          - address: 127.0.0.1:{clear}
        upstreams:
          app:
            servers: [127.0.0.1:{o.port}]
        routes:
          - {{ host: "*", path: /, upstream: app, compress: true }}
        access_log: {{ path: access.log }}
        admin: {{ address: 127.0.0.1:{admin} }}
        """, wait=[("127.0.0.1", admin)],
        prefix=["strace", "-f", "-qq", "-o", str(trace)])
    pid_file = os.path.join(g.workdir, "h2gate.pid")

    def traffic():
        for cmd in (["-k", "--http2", f"https://127.0.0.1:{tls}/"],
                    ["-k", "--http1.1", "-H", "accept-encoding: gzip",
                     f"https://127.0.0.1:{tls}/big.txt"],
                    ["--http2-prior-knowledge", "-H", "accept-encoding: br",
                     f"http://127.0.0.1:{clear}/big.txt"],
                    ["--http1.1", "-H", "accept-encoding: zstd",
                     f"http://127.0.0.1:{clear}/big.txt"],
                    [f"http://127.0.0.1:{admin}/metrics"]):
            r = run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *cmd])
            assert r.stdout == "200", (cmd, r.stdout, r.stderr)

    def wait_pid(old):
        pid = wait_new_pid(pid_file, old, timeout=20)
        assert pid, "the pid file did not change:\n" + g.log()
        return pid

    pid = wait_pid(None)
    traffic()
    os.rename(os.path.join(g.workdir, "access.log"), os.path.join(g.workdir, "access.log.1"))
    os.kill(pid, signal.SIGUSR1)
    g.wait_log("action=reopen_logs")
    os.kill(pid, signal.SIGHUP)
    g.wait_log("event=reloaded")
    traffic()
    os.kill(pid, signal.SIGUSR2)
    new = wait_pid(pid)
    g.wait_log("event=upgrade_ready")
    traffic()
    os.kill(new, signal.SIGTERM)
    assert g.wait(timeout=30) == 0, g.log()[-3000:]
    assert os.path.exists(os.path.join(g.workdir, "access.log"))

    calls, socket_families, pids = set(), set(), set()
    for line in open(trace, errors="replace"):
        m = re.match(r"(\d+)\s+(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)", line)
        if m:
            pids.add(m.group(1))
            calls.add(m.group(2))
        m = re.search(r"\bsocket\((AF_\w+)", line)
        if m:
            socket_families.add(m.group(1))
    assert {"execve", "bind", "accept4", "rename"} <= calls, calls
    assert len(pids) > 3, "strace did not follow the workers and the upgrade"
    assert not calls - allowed, f"system calls the unit forbids: {sorted(calls - allowed)}"
    assert socket_families <= families, socket_families


# ---- the man pages -------------------------------------------------------------------------------

@pytest.mark.parametrize("page", ["man8/h2gate.8", "man5/h2gate.yaml.5"])
def test_man_pages_pass_mandoc_lint(installed, page):
    """`mandoc -T lint` prints nothing: no missing date, no paragraph macro after a heading,
    no source line past 80 bytes (Debian's lintian runs the same checks)."""
    if not shutil.which("mandoc"):
        pytest.skip("mandoc is not installed (scripts/setup does)")
    _dest, prefix = installed
    r = run(["mandoc", "-T", "lint", os.path.join(prefix, "share/man", page)])
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stdout + r.stderr


def test_man_pages_are_dated_and_versioned_from_the_source(installed):
    """The .TH line carries a fixed date and the project's version, never the build time: the
    generated page is the same on every run (gen_man.py --check)."""
    _dest, prefix = installed
    version = re.search(r"version\s*:\s*'([^']+)'", open(os.path.join(ROOT, "meson.build")).read())
    for page in ("man8/h2gate.8", "man5/h2gate.yaml.5"):
        th = open(os.path.join(prefix, "share/man", page)).readline()
        m = re.match(r'\.TH \S+ [58] (\d{4}-\d{2}-\d{2}) "h2gate ([^"]+)"', th)
        assert m and m.group(2) == version.group(1), th
    for _ in range(2):
        assert run([PY, os.path.join(ROOT, "scripts", "gen_man.py"), "--check"]).returncode == 0


def test_cli_page_names_the_installed_config_path(installed):
    """man 8 names the file the unit reads where meson put it (/usr/local/etc/... with the
    default prefix), not a fixed /etc/h2gate."""
    dest, prefix = installed
    page = open(os.path.join(prefix, "share/man/man8/h2gate.8")).read()
    cfg = [os.path.join(r, f) for r, _d, fs in os.walk(dest) for f in fs
           if f == "h2gate.yaml" and r.endswith("/h2gate")][0][len(dest):]
    assert f"\n.I {cfg}\n" in page, cfg
    assert "@" not in page
    assert f"-c {cfg}" in unit_text(installed)


def rendered(path):
    r = run(["groff", "-man", "-Tutf8", "-P", "-cbou", path])
    assert r.returncode == 0
    return r.stdout


def test_yaml_page_lists_every_top_level_key(h2gate_bin, tmp_path):
    """Every key the loader accepts at the top level is a tag in the page's TOP LEVEL section
    (`compression` and `early_hints` were missing). The loader is asked: a file with every
    word README.md writes as code as a top-level key; those not refused as unknown are the
    top-level keys."""
    md = open(os.path.join(ROOT, "config", "README.md")).read()
    words = sorted(set(re.findall(r"`([a-z_][a-z0-9_]*)`", md)) - {"listen", "upstreams",
                                                                   "routes"})
    cfg = tmp_path / "probe.yaml"
    cfg.write_text("listen:\n  - address: 127.0.0.1:1\nupstreams:\n  a:\n    servers: "
                   "[127.0.0.1:2]\nroutes:\n  - { host: \"*\", path: /, upstream: a }\n" +
                   "".join(f"{w}: ~\n" for w in words))
    r = run([h2gate_bin, "-t", "-c", str(cfg)])
    unknown = set(re.findall(r"unknown key '([a-z0-9_]+)'", r.stdout + r.stderr))
    top = {"listen", "upstreams", "routes"} | (set(words) - unknown)
    assert {"workers", "h2", "compression", "early_hints", "access_log"} <= top, top
    page = open(os.path.join(ROOT, "docs", "h2gate.yaml.5")).read()
    section = page.split('.SH "TOP LEVEL"\n', 1)[1].split("\n.SH ", 1)[0]
    tags = set(re.findall(r"^\.T[PQ]\n\\fB([a-z0-9_]+)\\fR$", section, re.M))
    assert not top - tags, f"top-level keys missing from the page: {sorted(top - tags)}"


def test_yaml_page_has_examples_and_no_source_paths():
    """The page is read where h2gate is installed: it quotes shipped configurations under
    EXAMPLES and names no source file (`config/config.h`, `common/bucket.h`, `x.py`); table
    rows read as sentences (no `allowed.; examples:` fragments)."""
    path = os.path.join(ROOT, "docs", "h2gate.yaml.5")
    page = open(path).read()
    text = rendered(path)
    assert "\nEXAMPLES\n" in text
    examples = text.split("\nEXAMPLES\n", 1)[1]
    assert "servers: [127.0.0.1:9000]" in examples and "self_signed: true" in examples
    assert "- address: 127.0.0.1:8080" in examples  # a minus, copied from the page, is a minus
    leaks = re.findall(r"\b[\w/.-]+\.(?:c|h|py)\b", text)
    assert not leaks, leaks
    for path_like in ("config/config.h", "common/", "gateway/"):
        assert path_like not in page, path_like
    assert ".;" not in text and "; examples:" not in text
    assert "Examples: 4096, 64KiB" in " ".join(text.split())
