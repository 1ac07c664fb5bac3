"""`meson install` (issue 20 item 4): the binary, both man pages, the default config and the
systemd unit land where they should, the pages render without warnings and match the config
reference, the installed config is valid, and systemd accepts the unit."""
import os
import shutil
import subprocess

import pytest

from conftest import H2GATE_BIN, ROOT, run

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
