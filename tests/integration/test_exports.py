"""What the static libraries export, read with nm from the build under test: every exported
function is called by production code (another file of the gateway, or its own file), or by a
fuzz target, or it is built only with the unit tests (inside `#ifdef GW_TEST_API`, which
meson.build defines only where the tests are built). A function that nothing calls is dead."""
import collections
import glob
import os
import re
import subprocess

import pytest

from procs import H2GATE_BIN, ROOT

# Called by the unit tests only, and kept in every build on purpose.
KEPT = {
    "gw_h2_frame_type_str": "a _str() for the logs (docs/STYLE.md, Names)",
    "gw_h2_conn_phase_str": "a _str() for the logs (docs/STYLE.md, Names)",
    "gw_h1_client_state_str": "a _str() for the logs (docs/STYLE.md, Names)",
    "gw_log_level_str": "a _str() for the logs (docs/STYLE.md, Names)",
    "gw_h2_session_want_read": "half of the engine's want_read/want_write contract",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def nm(objs):
    """{object file: (functions defined, symbols referenced)}, read with one nm run (one run per
    object costs seconds: most of the time is nm's start)."""
    out = subprocess.run(["nm", "-A", *objs], capture_output=True, text=True, check=True).stdout
    syms = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        obj, _, rest = line.partition(":")  # `object:address type name`
        parts = rest.split()
        if len(parts) == 3 and parts[1] == "T":
            syms[obj][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            syms[obj][1].add(parts[1])
    return syms


def source_of(build, obj):
    """The source file an object of a library or of the binary was built from."""
    rel = os.path.relpath(obj, build)
    m = re.match(r"(.*)/[^/]+\.p/(.+)\.o$", rel)
    if not m:
        return None
    path = os.path.join(ROOT, m.group(1), m.group(2))
    return path if os.path.isfile(path) else None


def guarded_lines(text):
    """The line numbers inside `#ifdef GW_TEST_API` ... its `#endif` (nesting counted)."""
    inside, depth, lines = False, 0, set()
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if re.match(r"#\s*if", s):
            if not inside and re.match(r"#\s*ifdef\s+GW_TEST_API\b", s):
                inside, depth = True, 0
            elif inside:
                depth += 1
        elif re.match(r"#\s*endif", s) and inside:
            if depth == 0:
                inside = False
            else:
                depth -= 1
        if inside:
            lines.add(n)
    return lines


@pytest.fixture(scope="module")
def exports():
    build = os.path.dirname(os.path.dirname(H2GATE_BIN))
    objs = glob.glob(os.path.join(build, "**", "*.o"), recursive=True)
    tests_dir = os.path.join(build, "tests") + os.sep
    prod = [o for o in objs if not o.startswith(tests_dir)]
    tests = [o for o in objs if o.startswith(tests_dir)]
    if not tests:
        pytest.skip(f"{build} was configured without the unit tests")
    defs, prod_refs, test_refs = {}, collections.defaultdict(set), set()
    syms = nm(prod + tests)
    for o in prod:
        d, u = syms[o]
        for s in d:
            defs[s] = o
        for s in u:
            prod_refs[s].add(o)
    for o in tests:
        test_refs |= syms[o][1]
    fuzz = strip_comments("".join(open(f, encoding="utf-8").read()
                                  for f in glob.glob(os.path.join(ROOT, "tests/fuzz/*.[ch]"))))
    return classify(build, defs, prod_refs, test_refs, fuzz)


def classify(build, defs, prod_refs, test_refs, fuzz):
    """(test_only, dead): test_only maps a function only the unit tests call to (its source,
    whether its definition is inside #ifdef GW_TEST_API); dead lists those nothing calls."""
    test_only, dead = {}, []
    for sym, obj in sorted(defs.items()):
        if not sym.startswith("gw_") or prod_refs.get(sym, set()) - {obj}:
            continue
        src = source_of(build, obj)
        if src is None:
            continue  # a generated source
        text = open(src, encoding="utf-8").read()
        uses = len(re.findall(r"\b%s\b" % re.escape(sym), strip_comments(text)))
        if uses > 1 or re.search(r"\b%s\b" % re.escape(sym), fuzz):
            continue  # its own file calls it, or a fuzz target does
        if sym in test_refs:
            m = re.search(r"^[^\s#/*][^;\n]*\b%s\(" % re.escape(sym), text, flags=re.M)
            line = text[: m.start()].count("\n") + 1 if m else 0
            test_only[sym] = (os.path.relpath(src, ROOT), line in guarded_lines(text))
        else:
            dead.append(sym)
    return test_only, dead


def test_what_only_the_tests_call_is_built_with_the_tests_only(exports):
    test_only, _dead = exports
    loose = [f"{sym} ({src})" for sym, (src, guarded) in sorted(test_only.items())
             if not guarded and sym not in KEPT]
    assert loose == [], ("exported, called by the unit tests only, and built in every build: "
                         "put it inside #ifdef GW_TEST_API (header and .c): " + ", ".join(loose))
    # the hooks that moved are still there for the tests
    for sym in ("gw_alloc_fail_after", "gw_tls__set_clock", "gw_log_set_fd", "gw_h2_tree_get"):
        assert test_only.get(sym, ("", False))[1], sym


def test_nothing_exported_is_dead(exports):
    _test_only, dead = exports
    assert dead == [], "exported and called by nothing: " + ", ".join(dead)
