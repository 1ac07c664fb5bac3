"""`meson install` (issue 20 item 4): the binary, both man pages, the default configuration and
the systemd unit land where the man pages say, the man pages render without a warning, and
systemd-analyze accepts the unit (when the tool exists).

The build directory is the one the binary under test comes from (H2GATE_BIN), installed with
--no-rebuild into a temporary DESTDIR."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT, run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    from conftest import H2GATE_BIN
    build = os.path.dirname(os.path.dirname(H2GATE_BIN))
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        pytest.fail(f"{build} is not a meson build directory (H2GATE_BIN={H2GATE_BIN})")
    dest = str(tmp_path_factory.mktemp("destdir"))
    r = run(["meson", "install", "-C", build, "--destdir", dest, "--no-rebuild", "--quiet"],
            timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    opts = {o["name"]: o["value"] for o in
            json.loads(run(["meson", "introspect", "--buildoptions", build]).stdout)}
    prefix = opts["prefix"]
    sysconf = opts["sysconfdir"]
    if not os.path.isabs(sysconf):
        sysconf = os.path.join(prefix, sysconf)
    unitdir = opts["systemdsystemunitdir"] or os.path.join(prefix, "lib", "systemd", "system")

    def at(*parts):
        return dest + os.path.join(*parts)

    return {
        "dest": dest,
        "prefix": prefix,
        "bin": at(prefix, opts["bindir"], "h2gate"),
        "man8": at(prefix, opts["mandir"], "man8", "h2gate.8"),
        "man5": at(prefix, opts["mandir"], "man5", "h2gate.yaml.5"),
        "config": at(sysconf, "h2gate", "h2gate.yaml"),
        "unit": at(unitdir, "h2gate.service"),
        "sysconf": sysconf,
    }


def test_every_file_lands(installed):
    assert os.access(installed["bin"], os.X_OK)
    for key in ("man8", "man5", "config", "unit"):
        assert os.path.isfile(installed[key]), f"{key}: {installed[key]} missing"


def test_installed_binary_runs(installed):
    r = run([installed["bin"], "--version"])
    assert r.returncode == 0 and r.stdout.startswith("h2gate "), r.stdout + r.stderr


def test_installed_config_is_the_default_and_valid(installed):
    with open(installed["config"]) as f, open(os.path.join(ROOT, "config", "gateway.yaml")) as g:
        assert f.read() == g.read()
    r = run([installed["bin"], "--check-config", installed["config"]])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{installed['config']}: ok"


@pytest.mark.parametrize("page", ["man8", "man5"])
def test_man_page_renders_without_warnings(installed, page):
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    r = run(["groff", "-man", "-ww", "-z", installed[page]])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = run(["groff", "-man", "-Tutf8", "-P-cbou", "-ww", installed[page]])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "NAME" in r.stdout and "SEE ALSO" in r.stdout


def test_man_pages_name_the_installed_config(installed):
    """h2gate(8) and h2gate.yaml(5) state where the default config is installed, and the unit
    passes that file: under prefix /usr that is /etc/h2gate/h2gate.yaml."""
    for page in ("man8", "man5"):
        with open(installed[page]) as f:
            assert "/etc/h2gate/h2gate.yaml" in f.read()
    with open(installed["unit"]) as f:
        unit = f.read()
    path = os.path.join(installed["sysconf"], "h2gate", "h2gate.yaml")
    bindir_bin = installed["bin"][len(installed["dest"]):]
    assert f"ExecStart={bindir_bin} -c {path}\n" in unit
    assert "Type=exec\n" in unit
    assert "ExecReload" not in unit  # no SIGHUP reload exists (h2gate(8) SIGNALS)


def test_unit_passes_systemd_analyze_verify(installed, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    # The unit names paths under the prefix; point them into DESTDIR so that verify finds the
    # installed binary and man pages, and report anything it prints (it exits 0 on warnings).
    with open(installed["unit"]) as f:
        unit = f.read()
    prefix = installed["prefix"].rstrip("/") + "/"
    unit = unit.replace(prefix, installed["dest"] + prefix)
    copy = tmp_path / "h2gate.service"
    copy.write_text(unit)
    env = dict(os.environ, MANPATH=installed["dest"] + os.path.join(installed["prefix"], "share", "man"))
    r = subprocess.run(["systemd-analyze", "verify", str(copy)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout == "", r.stdout
