"""docs/ARCHITECTURE.md in step with the tree: the include graph drawn by
scripts/include_graph.py is current, points down the declared layer order and has no cycle
(and the script does flag an upward arrow, a sideways one, a cycle, an undeclared folder and a
stale drawing); every source file has a row in the file tables; no file of the tree cites a
document that is not in it; no test module imports another (STYLE.md §8)."""
import ast
import importlib.util
import os
import re
import subprocess

import pytest

from procs import ROOT, sanitized

# Checks of the tree, not of the gateway: the run against the plain build is enough.
pytestmark = pytest.mark.skipif(sanitized(), reason="checks the tree, not the binary")

PY = "/usr/bin/python3"
SCRIPT = os.path.join(ROOT, "scripts", "include_graph.py")
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")


def graph(*args, root=ROOT):
    return subprocess.run([PY, SCRIPT, "--root", str(root), *args], capture_output=True,
                          text=True, timeout=60)


def load_script():
    spec = importlib.util.spec_from_file_location("include_graph", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_include_graph_is_current_points_down_and_has_no_cycle():
    r = graph("--check")
    assert r.returncode == 0, r.stderr
    assert ": 0 upward, 0 sideways, no cycle." in r.stderr, r.stderr
    doc = open(DOC, encoding="utf-8").read()
    assert ": 0 upward, 0 sideways, no cycle." in doc
    assert "-.->" not in doc  # no arrow drawn against the order


@pytest.fixture
def tree(tmp_path):
    """A tree with every declared folder, a clean include in each layer, and the doc's
    markers around a drawing that is not current."""
    ig = load_script()
    for name in ig.rank_of():
        d = tmp_path / ig.folder_path(name)
        d.mkdir(parents=True, exist_ok=True)
    (tmp_path / "common" / "a.h").write_text("#include <stddef.h>\n")
    (tmp_path / "gateway" / "h2" / "b.h").write_text('#include "common/a.h"\n')
    (tmp_path / "gateway" / "h1" / "c.c").write_text('#include "common/a.h"\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ARCHITECTURE.md").write_text(
        f"# map\n\n{ig.BEGIN}\nan old drawing\n{ig.END}\n\nthe rest\n")
    return tmp_path


def test_include_graph_flags_arrows_against_the_order_cycles_and_stale_drawings(tree):
    r = graph("--check", root=tree)
    assert r.returncode == 1
    assert "the include graph is stale" in r.stderr, r.stderr
    assert graph("--write", root=tree).returncode == 0
    assert graph("--check", root=tree).returncode == 0

    # common/ including h2/ points up and closes a circle with h2/ -> common/; h1/ including
    # h2/ points sideways (peers); a folder LAYERS does not name is refused
    (tree / "common" / "a.h").write_text('#include <stddef.h>\n#include "h2/b.h"\n')
    (tree / "gateway" / "h1" / "c.c").write_text('#include "common/a.h"\n#include "h2/b.h"\n')
    (tree / "gateway" / "shiny").mkdir()
    (tree / "gateway" / "shiny" / "d.c").write_text('#include "common/a.h"\n')
    r = graph("--write", root=tree)
    assert r.returncode == 1
    assert "common/ -> gateway/h2/ points up: common/a.h:2" in r.stderr, r.stderr
    assert "gateway/h1/ -> gateway/h2/ points sideways: gateway/h1/c.c:2" in r.stderr
    assert "cycle across folders: gateway/h2/ -> common/" in r.stderr
    assert "gateway/shiny/: a folder that LAYERS" in r.stderr
    doc = (tree / "docs" / "ARCHITECTURE.md").read_text()
    assert "common -.-> h2" in doc and "linkStyle" in doc
    assert ": 1 upward, 1 sideways, cycles: gateway/h2/ ↔ common/." in doc
    assert doc.endswith("\n\nthe rest\n")  # only the block between the markers changes

    (tree / "common" / "a.h").write_text("#include <stddef.h>\n")
    (tree / "gateway" / "h1" / "c.c").write_text('#include "common/a.h"\n')
    (tree / "gateway" / "shiny" / "d.c").unlink()
    (tree / "gateway" / "shiny").rmdir()
    assert graph("--check", root=tree).returncode == 1  # the drawing still shows the arrows
    assert graph("--write", root=tree).returncode == 0
    assert graph("--check", root=tree).returncode == 0


def sources():
    for top in ("gateway", "common", "config"):
        for d, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def test_every_source_file_has_a_row_in_the_file_tables():
    """Each `### \\`folder/\\`` section's table names its files in the first column (several
    per row); `sansio_guard/` stands for its stand-in headers; the Elsewhere table gives
    whole paths."""
    doc = open(DOC, encoding="utf-8").read()
    named = set()
    folder = None
    for line in doc.splitlines():
        m = re.match(r"^### `([^`]+)/`", line)
        if m:
            folder = m.group(1)
            continue
        if line.startswith("### ") or line.startswith("## "):
            folder = None
            continue
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first):
            named.add(f"{folder}/{name}" if folder else name)
    missing = [f for f in sorted(sources())
               if f not in named and not any(f.startswith(n) for n in named if n.endswith("/"))]
    assert missing == [], "files without a row in docs/ARCHITECTURE.md: " + ", ".join(missing)


def tracked():
    r = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in r.stdout.splitlines() if os.path.isfile(os.path.join(ROOT, f))]


# the machine's work folder, the shared notes beside the repository (written so that this file
# does not match itself)
OUTSIDE = re.compile(r"/w[o]rk/|\.\.[/]shared|shared[/]DESIGN")


def test_no_file_cites_a_document_outside_the_tree():
    """No path into the machine the code was written on, and every `NAME.md` that a source
    file, a build file or a document names exists (beside the file or from the root)."""
    bad = []
    for rel in tracked():
        if rel.endswith((".png", ".gz")) or "/corpus/" in rel:
            continue
        try:
            text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{rel}:{n}: {line.strip()}")
        if not rel.endswith((".c", ".h", ".md", "meson.build")):
            continue  # scripts name the .md files they generate
        here = os.path.dirname(rel)
        for n, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"[A-Za-z0-9_./-]*[A-Za-z0-9_]\.md\b", line):
                if not (os.path.exists(os.path.join(ROOT, here, name))
                        or os.path.exists(os.path.join(ROOT, name))):
                    bad.append(f"{rel}:{n}: {name}")
    assert bad == [], "\n".join(bad)


def test_no_test_module_imports_another():
    """STYLE.md §8: the tests share their helpers through tests/lib/ (and their fixtures
    through conftest.py); a test module that imports another runs that module's imports and
    ties the two together (a fixture imported by name, a helper changed for one test file that
    breaks the other)."""
    found = set()
    for d, _dirs, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as src:
                tree = ast.parse(src.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top.startswith("test_") or top == "conftest":
                        found.add((os.path.relpath(path, ROOT), top))
    assert sorted(found) == [], \
        "test modules importing another (move the helper to tests/lib/, the fixture to conftest.py)"
