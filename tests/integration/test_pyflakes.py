"""pyflakes (Debian's python3-pyflakes, which scripts/setup installs) finds nothing in the Python
of the tests and of scripts/lib/: no unused import or variable, no name defined twice, no name
used and never defined. A fixture imported by name into a test module shows as an unused import
that the test's argument then redefines: fixtures belong in conftest.py."""
import glob
import os
import subprocess

import pytest

from procs import ROOT, sanitized

PY = "/usr/bin/python3"

# Checks of the tree, not of the gateway: the run against the plain build is enough.
pytestmark = [
    pytest.mark.skipif(sanitized(), reason="checks the tree, not the binary"),
    pytest.mark.skipif(
        subprocess.run([PY, "-c", "import pyflakes"], capture_output=True).returncode != 0,
        reason="pyflakes is not installed (scripts/setup installs python3-pyflakes)"),
]


def pyflakes(*paths):
    return subprocess.run([PY, "-m", "pyflakes", *paths], capture_output=True, text=True,
                          timeout=120)


def test_the_tests_and_scripts_lib_have_no_pyflakes_finding():
    r = pyflakes(os.path.join(ROOT, "tests"), *sorted(glob.glob(os.path.join(ROOT, "scripts",
                                                                             "lib", "*.py"))))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_pyflakes_reports_what_this_test_looks_for(tmp_path):
    """The run above would pass on a pyflakes that reads nothing: the same call flags a file
    with an unused import, a fixture imported and shadowed, and an unused local variable."""
    (tmp_path / "test_x.py").write_text("import os\nfrom h2bottleneck import bn\n\n\n"
                                        "def test_a(bn):\n    g = 1\n")
    r = pyflakes(str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "'os' imported but unused" in r.stdout
    assert "redefinition of unused 'bn'" in r.stdout
    assert "local variable 'g' is assigned to but never used" in r.stdout
