"""The h2gate command line (issue 2): --version, --help, --check-config, refusal of bad configs."""
import glob
import os
import re

import pytest

from conftest import ROOT, run


def test_version(h2gate_bin):
    r = run([h2gate_bin, "--version"])
    assert r.returncode == 0
    assert re.fullmatch(r"h2gate \d+\.\d+\.\d+\n", r.stdout)


def test_help_lists_options(h2gate_bin):
    r = run([h2gate_bin, "--help"])
    assert r.returncode == 0
    for opt in ("-c", "--check-config", "--version", "--help"):
        assert opt in r.stdout


def test_unknown_option_is_usage_error(h2gate_bin):
    r = run([h2gate_bin, "--frobnicate"])
    assert r.returncode == 2
    assert "usage:" in r.stderr


CONFIGS = [os.path.join(ROOT, "config", "gateway.yaml")] + sorted(
    glob.glob(os.path.join(ROOT, "config", "examples", "*.yaml")))


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_check_config_accepts_shipped_configs(h2gate_bin, path):
    r = run([h2gate_bin, "--check-config", path], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{path}: ok"


def test_embedded_default_is_config_gateway_yaml(h2gate_bin):
    r = run([h2gate_bin, "--print-default-config"])
    assert r.returncode == 0
    with open(os.path.join(ROOT, "config", "gateway.yaml")) as f:
        assert r.stdout == f.read()


BROKEN = """\
listen:
  - address: 127.0.0.1:8080
    colour: blue
upstreams:
  app:
    servers: [127.0.0.1:9000]
    max_connections: lots
routes:
  - { host: "*", path: /, upstream: nowhere }
"""


def test_check_config_rejects_broken_file_with_file_line_col(h2gate_bin, tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text(BROKEN)
    r = run([h2gate_bin, "--check-config", str(p)])
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    # every problem is reported, each as FILE:LINE:COL: message
    assert len(lines) >= 3, r.stderr
    for l in lines:
        assert re.match(re.escape(str(p)) + r":\d+:\d+: \S", l), l
    assert any(l.startswith(f"{p}:3:") and "colour" in l for l in lines), r.stderr
    assert any(l.startswith(f"{p}:7:") and "max_connections" in l for l in lines), r.stderr
    assert any(l.startswith(f"{p}:9:") and "nowhere" in l for l in lines), r.stderr


def test_check_config_missing_file(h2gate_bin, tmp_path):
    r = run([h2gate_bin, "--check-config", str(tmp_path / "absent.yaml")])
    assert r.returncode == 1
    assert "absent.yaml" in r.stderr


def test_gateway_refuses_to_start_on_bad_config(h2gate_bin, tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text(BROKEN)
    r = run([h2gate_bin, "-c", str(p)], timeout=10)
    assert r.returncode == 1
    assert f"{p}:3:" in r.stderr
