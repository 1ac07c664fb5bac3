"""scripts/hooks/commit-msg, the commit message rules of CONTRIBUTING.md: messages it must let
through and messages it must refuse (with the line and the rule), as a hook that
scripts/install-hooks installs in a real repository, and over a range of commits."""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess

import pytest

from procs import ROOT, sanitized

# Checks of the tree, not of the gateway: the run against the plain build is enough.
pytestmark = pytest.mark.skipif(sanitized(), reason="checks the tree, not the binary")

HOOK = os.path.join(ROOT, "scripts", "hooks", "commit-msg")
INSTALL = os.path.join(ROOT, "scripts", "install-hooks")
BODY = ("The cause in a sentence or two, wrapped well before the 72nd column\n"
        "as the rules ask.\n")


def load_hook():
    loader = importlib.machinery.SourceFileLoader("commit_msg", HOOK)
    spec = importlib.util.spec_from_loader("commit_msg", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


hook = load_hook()


def run_hook(tmp_path, text):
    msg = tmp_path / "MSG"
    msg.write_text(text, encoding="utf-8")
    return subprocess.run([HOOK, str(msg)], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)


GOOD = {
    "area": "h2: refuse a HEADERS frame on a closed stream\n\n" + BODY,
    "area of two words": "access log: one line per answered request\n\n" + BODY,
    "area as a path": "scripts/bench: name the peers in the table\n\n" + BODY,
    "two areas": "config/README, SECURITY: Redis holds the ticket keys\n\n" + BODY,
    "imperative": "Make room before the next capabilities\n\n" + BODY,
    "imperative ending like a participle": "Bring the map in step with the tree\n\n" + BODY,
    "subject of 72": "h2: " + "x" * 68 + "\n\n" + BODY,
    "url": "h1: follow RFC 9112 on bare CR\n\nSee\n"
           "https://www.rfc-editor.org/rfc/rfc9112.html#name-message-parsing-and-so-on-and-on\n",
    "one long word": "config: refuse proxy_protocol without sources\n\nTest:\n"
                     "test_proxy_protocol.py::test_proxy_protocol_without_its_sources_is_refused\n",
    "indented output": "back: count the retries once\n\nMeasured:\n\n"
                       "    " + "requests: 100000 total, 100000 started, 100000 done, "
                       "100000 succeeded, 0 failed\n",
    "quoted": "tls: name the missing key\n\nThe report said\n> " + "q " * 40 + "\n",
    "fenced": "docs: show the graph\n\nBody:\n```\n" + "f " * 50 + "\n```\n",
    "trailers": "front: close on a bad preface\n\n" + BODY +
                "\nCo-authored-by: Somebody With A Very Long Name <somebody.with.a.long@"
                "example.org>\n",
    "comments and scissors left out": "h2: one\n\n" + BODY + "# Please enter the commit "
                "message for your changes. Lines starting\n# " + "c" * 90 + "\n"
                "# ------------------------ >8 ------------------------\n" + "d " * 60 + "\n",
    "merge by git": "Merge branch 'a-branch-with-a-name-long-enough-to-take-the-merge-subject-"
                    "past-72' into main\n",
    "fixup": "fixup! h2: refuse a HEADERS frame on a closed stream, and a subject that runs "
             "long\n",
    "squash": "squash! h2: refuse\n\nwhatever text the squash carries, of any width " +
              "w " * 40 + "\n",
    "amend with a good message": "amend! h2: refuse\n\nh2: refuse a HEADERS frame on a closed"
                                 " stream\n\n" + BODY,
}

BAD = {
    "subject of 73": ("h2: " + "x" * 69 + "\n\n" + BODY, "line 1: the subject has 73 characters"),
    "one line": ("h2: refuse a HEADERS frame on a closed stream\n", "the body is missing"),
    "no blank line": ("h2: refuse\nthe body right below\n", "line 2: leave a blank line"),
    "wide body": ("h2: refuse\n\n" + BODY + "w " * 40 + "\n", "line 5: 79 columns, wrap"),
    "full stop": ("h2: refuse a frame.\n\n" + BODY, "no full stop"),
    "past tense": ("Added a check of the preface\n\n" + BODY, "`Added` is not an imperative"),
    "third person": ("Adds a check of the preface\n\n" + BODY, "`Adds` is not an imperative"),
    "participle": ("Adding a check of the preface\n\n" + BODY, "`Adding` is not an imperative"),
    "no area, no capital": ("refuse a frame\n\n" + BODY, "start the subject with its area"),
    "empty": ("# only a comment\n\n", "the message is empty"),
    "amend with a long subject": ("amend! h2: refuse\n\nh2: " + "y" * 80 + "\n\n" + BODY,
                                  "line 3: the subject has 84 characters"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_message_passes(name):
    assert hook.check(GOOD[name]) == []


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_message_is_refused_with_its_rule(name):
    text, why = BAD[name]
    problems = hook.check(text)
    assert any(why in p for p in problems), problems


def test_hook_exit_status_and_report(tmp_path):
    r = run_hook(tmp_path, GOOD["area"])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = run_hook(tmp_path, BAD["wide body"][0])
    assert r.returncode == 1
    assert "line 5: 79 columns, wrap the body at 72" in r.stderr, r.stderr
    assert str(tmp_path / "MSG") in r.stderr  # where the refused message is kept


def git(repo, *args, check=True):
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    r = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env,
                       timeout=30)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture
def repo(tmp_path):
    """A fresh repository holding the project's hook and installer, as a clone would."""
    repo = tmp_path / "repo"
    (repo / "scripts" / "hooks").mkdir(parents=True)
    shutil.copy2(HOOK, repo / "scripts" / "hooks" / "commit-msg")
    shutil.copy2(INSTALL, repo / "scripts" / "install-hooks")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "scripts")
    git(repo, "commit", "-q", "-m", "scripts: the hook", "-m", "Its body.")
    return repo


def test_installed_hook_refuses_a_bad_message_and_keeps_a_good_one(repo):
    r = subprocess.run([str(repo / "scripts" / "install-hooks")], cwd=repo, capture_output=True,
                       text=True, timeout=30, env=dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null",
                                                       GIT_CONFIG_NOSYSTEM="1"))
    assert r.returncode == 0, r.stderr
    assert git(repo, "config", "core.hooksPath").stdout.strip() == "scripts/hooks"
    (repo / "a").write_text("a\n")
    git(repo, "add", "a")
    r = git(repo, "commit", "-q", "-m", "Added a file with a subject that is far too long to "
            "read in one line of git log --oneline", check=False)
    assert r.returncode != 0
    assert "line 1: the subject has 89 characters" in r.stderr, r.stderr
    assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    git(repo, "commit", "-q", "-m", "tests: add a file", "-m", BODY)
    assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "2"
    # a merge keeps git's own subject
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    (repo / "b").write_text("b\n")
    git(repo, "add", "b")
    git(repo, "commit", "-q", "-m", "tests: add another file", "-m", BODY)
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "side")
    assert git(repo, "log", "-1", "--format=%s").stdout.strip() == "Merge branch 'side'"


def test_range_names_each_commit_that_breaks_a_rule(repo):
    base = git(repo, "rev-parse", "HEAD").stdout.strip()
    for name, msg in [("a", "tests: add a\n\n" + BODY), ("b", "added b, all on one line"),
                      ("c", "Add c\n\n" + BODY)]:
        (repo / name).write_text(name)
        git(repo, "add", name)
        git(repo, "commit", "-q", "--no-verify", "-m", msg)
    r = subprocess.run([HOOK, "--range", f"{base}..HEAD"], cwd=repo, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1
    assert "added b, all on one line" in r.stderr
    assert "tests: add a" not in r.stderr and "Add c" not in r.stderr
    assert "2 of 3 commit messages pass" in r.stderr


def test_the_example_in_contributing_passes():
    """CONTRIBUTING.md shows a message to imitate: the hook must let it through."""
    text = open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8").read()
    section = text[text.index("## Commit messages"):]
    example = section.split("```")[1].lstrip("\n")
    assert example.startswith("h2: ")
    assert hook.check(example) == []
