"""Every event the gateway can log is documented in the configuration reference
(config/README.md, from which h2gate.yaml(5) is made): an operator who finds
`event=tls_ctx_failed` in the log finds there what it means and what to do. The events are
read from the source: the name a GW_LOG_* call gives, or the name a function that logs on
behalf of its callers (gw_tls__cert_failed, log_ssl_error, ...) is given at its call sites."""
import os
import re

from procs import ROOT

# Functions that log an event named by their caller: name -> the index of that argument.
FORWARDERS = {
    "gw_tls__cert_failed": 2,
    "file_failed": 2,
    "log_ssl_error": 0,
    "gw_server__log_addr_in_use": 0,
    "bad_target": 3,
}
LOG_CALL = re.compile(r"\bGW_LOG_(?:DEBUG|INFO|WARN|ERROR)\s*\(")
# A function definition starts at the line's first column (the tree is clang-formatted).
DEFINITION = re.compile(r"^[A-Za-z_][\w \t*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M | re.S)


def sources():
    for top in ("gateway", "common"):
        for d, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(d, f)
                    with open(path) as fh:
                        yield os.path.relpath(path, ROOT), strip_comments(fh.read())


def strip_comments(text):
    """The C text without its comments (string literals kept; a comment becomes spaces, so
    that offsets and line numbers stay)."""
    pat = re.compile(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*', re.S)
    return pat.sub(lambda m: m.group(0) if m.group(0).startswith('"')
                   else re.sub(r"[^\n]", " ", m.group(0)), text)


def call_args(text, open_paren):
    """The arguments of the call whose "(" is at open_paren, each stripped."""
    args, depth, start, i = [], 0, open_paren + 1, open_paren
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args
        elif ch == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    raise AssertionError("unbalanced call")


def enclosing_function(text, pos):
    name = None
    for m in DEFINITION.finditer(text, 0, pos):
        name = m.group(1)
    return name


def logged_events():
    """{event: ["path:line", ...]}; and the calls that log a name that is not a literal outside
    a known forwarder, which this test cannot follow."""
    events, unknown = {}, []
    calls = [(LOG_CALL, 0)] + [(re.compile(rf"\b{f}\s*\("), i) for f, i in FORWARDERS.items()]
    for path, text in sources():
        for pat, index in calls:
            for m in pat.finditer(text):
                line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
                if not line[:1].isspace():
                    continue  # a declaration, a definition or a macro: calls are indented
                args = call_args(text, m.end() - 1)
                where = f"{path}:{text.count(chr(10), 0, m.start()) + 1}"
                lit = re.fullmatch(r'"([a-z0-9_]+)"', args[index]) if len(args) > index else None
                if lit:
                    events.setdefault(lit.group(1), []).append(where)
                elif enclosing_function(text, m.start()) not in FORWARDERS:
                    unknown.append(f"{where}: {m.group(0)}{', '.join(args)})")
    return events, unknown


def test_the_events_are_read_from_every_call_that_logs():
    """Each call that logs names its event with a literal, or passes on its caller's name from
    a function listed in FORWARDERS (a new such function is added there)."""
    events, unknown = logged_events()
    assert not unknown, "\n".join(unknown)
    # the ones that come only through a forwarder are found too
    for ev in ("tls_ctx_failed", "tls_key_mismatch", "tls_self_signed_failed", "redirect",
               "listen_failed", "conn_close", "heap_trim_skipped"):
        assert ev in events, ev
    assert len(events) > 150, len(events)


def test_every_logged_event_is_documented():
    events, _ = logged_events()
    with open(os.path.join(ROOT, "config", "README.md")) as fh:
        doc = fh.read()
    missing = sorted(f"{ev} ({events[ev][0]})" for ev in events
                     if not re.search(rf"`(?:event=)?{ev}[`\s]", doc))
    assert not missing, "not in config/README.md:\n" + "\n".join(missing)
