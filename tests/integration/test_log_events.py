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


# ---- why a connection closed: every reason= the code can log is in the reason tables ----------

# Functions that close a connection with a reason: name -> (the index of the reason argument,
# the table of its reasons). A client connection's is logged `event=conn_close` (and, for
# gw_front__finish, `event=conn_finish` first); an admin connection's `event=admin_conn_closed`.
CLOSERS = {"gw_front__conn_close": (1, "conn_close"), "gw_front__finish": (1, "conn_close"),
           "aconn_close": (1, "admin_conn_closed")}
# Closers for which a NULL reason is an end that is not logged.
NULL_NOT_LOGGED = {"aconn_close"}
# The events that say why a connection closed (`reason=` in their format), and the event whose
# reasons table in config/README.md lists them (under a heading that names it, or else in the
# event's row of the Log events table).
CLOSE_EVENTS = {"conn_close": "conn_close", "conn_finish": "conn_close",
                "back_idle_close": "back_idle_close", "back_conn_close": "back_idle_close",
                "admin_conn_closed": "admin_conn_closed"}
# A reason is one bare token, so that `reason=` parses as key=value (no quotes, no spaces).
TOKEN = re.compile(r"[a-z0-9_]+")
# Reasons made outside the tree: the function, and the words its row in the table has.
EXTERNAL_REASONS = {"uv_err_name": "libuv error name"}
CONVERSION = re.compile(r"%(?:%|[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?[hlzjt]*[diouxXeEfgGcsp])")


def function_bodies(texts):
    """{name: body text} of every function defined in the sources."""
    bodies = {}
    lit = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
    for text in texts.values():
        # braces inside literals ('{', "}") do not count: blanked, offsets kept
        bare = lit.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[0],
                       text)
        for m in DEFINITION.finditer(bare):
            depth, i = 0, m.end() - 1
            while i < len(bare):
                depth += {"{": 1, "}": -1}.get(bare[i], 0)
                if depth == 0:
                    break
                i += 1
            bodies[m.group(1)] = text[m.end():i]
    return bodies


def parameters(text, pos):
    """The parameter names of the function defined around pos."""
    m = None
    for m in DEFINITION.finditer(text, 0, pos):
        pass
    if not m:
        return []
    head = m.group(0)
    return re.findall(r"(\w+)\s*(?:,|\)\s*\{)", head[head.index("(") + 1:])


def top_level(expr, chars):
    """The offsets in expr of the characters of chars outside parentheses and literals."""
    depth, i, out = 0, 0, []
    while i < len(expr):
        ch = expr[i]
        if ch == '"':
            i += 1
            while expr[i] != '"':
                i += 2 if expr[i] == "\\" else 1
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in chars:
            out.append(i)
        i += 1
    return out


def reason_values(expr, bodies, forwarded, seen=()):
    """The reasons an expression can give: (literals, external phrases, what cannot be
    followed). Follows conditional expressions, and calls of our own functions through their
    return statements; a parameter of a function that closes (`why`) is its callers' business."""
    expr = expr.strip()
    while expr.startswith("(") and top_level(expr[1:], ")") == [len(expr) - 2]:
        expr = expr[1:-1].strip()
    marks = top_level(expr, "?:")
    if marks and expr[marks[0]] == "?":
        nest, split = 0, None
        for i in marks[1:]:
            nest += 1 if expr[i] == "?" else -1
            if nest < 0:
                split = i
                break
        a = reason_values(expr[marks[0] + 1:split], bodies, forwarded, seen)
        b = reason_values(expr[split + 1:], bodies, forwarded, seen)
        return a[0] | b[0], a[1] | b[1], a[2] + b[2]
    lit = re.fullmatch(r'"((?:\\.|[^"\\])*)"', expr)
    if lit:  # any literal: test_every_close_reason_is_documented checks that it is a token
        return {lit.group(1)}, set(), []
    call = re.fullmatch(r"(\w+)\s*\(.*\)", expr, re.S)
    if call and call.group(1) in EXTERNAL_REASONS:
        return set(), {EXTERNAL_REASONS[call.group(1)]}, []
    if call and call.group(1) in bodies and call.group(1) not in seen:
        lits, ext, unknown = set(), set(), []
        for ret in re.finditer(r"\breturn\b([^;]*);", bodies[call.group(1)]):
            r = reason_values(ret.group(1), bodies, (), seen + (call.group(1),))
            lits, ext, unknown = lits | r[0], ext | r[1], unknown + r[2]
        return lits, ext, unknown
    if re.fullmatch(r"\w+", expr) and expr in forwarded:
        return set(), set(), []
    return set(), set(), [expr]


def close_reasons():
    """{table event: {reason: "path:line"}}, {table event: {external phrase}}, and the reason
    expressions this test cannot follow."""
    texts = dict(sources())
    bodies = function_bodies(texts)
    reasons = {t: {} for t in set(CLOSE_EVENTS.values())}
    external = {t: set() for t in reasons}
    unknown = []

    def add(table, expr, text, pos, where):
        fwd = ()
        if enclosing_function(text, pos) in CLOSERS:
            fwd = parameters(text, pos)
        lits, ext, unk = reason_values(expr, bodies, fwd)
        for r in lits:
            reasons[table].setdefault(r, where)
        external[table] |= ext
        unknown.extend(f"{where}: {u}" for u in unk)

    for path, text in texts.items():
        for name, (index, table) in CLOSERS.items():
            for m in re.finditer(rf"\b{name}\s*\(", text):
                if not text[text.rfind("\n", 0, m.start()) + 1:m.start()][:1].isspace():
                    continue  # the declaration or the definition
                args = call_args(text, m.end() - 1)
                if name in NULL_NOT_LOGGED and args[index] == "NULL":
                    continue
                where = f"{path}:{text.count(chr(10), 0, m.start()) + 1}"
                add(table, args[index], text, m.start(), where)
        for m in LOG_CALL.finditer(text):
            args = call_args(text, m.end() - 1)
            event = re.fullmatch(r'"(\w+)"', args[0])
            if not event or event.group(1) not in CLOSE_EVENTS or len(args) < 2:
                continue
            table = CLOSE_EVENTS[event.group(1)]
            where = f"{path}:{text.count(chr(10), 0, m.start()) + 1}"
            fmt = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', args[1]))
            r = re.search(r"\breason=(%s|[A-Za-z0-9_]+)", fmt)
            if not r:
                unknown.append(f"{where}: {event.group(1)} without reason=")
            elif r.group(1) != "%s":
                reasons[table].setdefault(r.group(1), where)
            else:
                n = 0  # the arguments the conversions before reason= take
                for c in CONVERSION.finditer(fmt, 0, r.start()):
                    if c.group(0) != "%%":
                        n += 1 + (c.group(1) == "*") + (c.group(2) == "*")
                add(table, args[2 + n], text, m.start(), where)
    return reasons, external, unknown


def reason_table(doc, event):
    """The first cells of the rows of the table(s) under the heading that names `event`; without
    such a heading, the last cell of the event's row in the Log events table (its meaning, which
    names the reasons)."""
    cells, inside = [], False
    for line in doc.splitlines():
        if line.startswith("#"):
            inside = f"`{event}`" in line
        elif inside and line.startswith("|"):
            cells.append(line.strip("|").split("|")[0].strip())
    if not cells:
        for line in doc.split("\n## Log events\n", 1)[1].splitlines():
            if line.startswith("|") and line.strip("|").split("|")[0].strip() == f"`{event}`":
                cells.append(line.strip("|").split("|")[-1].strip())
    return cells


def test_every_close_reason_is_documented():
    """An operator who finds `event=conn_close reason=h2_send_failed` (or `back_idle_close
    reason=purge`) in the log finds the reason in its table in config/README.md: a row of the
    table under the heading that names the event, saying what it means and what to do. The
    reasons are read from the source: every literal passed to the functions that close a client
    or an admin connection, every `reason=` of the events that log an origin connection's close,
    through conditional expressions and functions that return the reason (gw_front__peer_end).
    Each is one token, so that a key=value reader of the log gets it whole."""
    reasons, external, unknown = close_reasons()
    assert not unknown, "reasons this test cannot follow:\n" + "\n".join(unknown)
    # `reason=out of memory` would end the value at its first space for a key=value reader
    spaced = sorted(f"{table}: {r!r} ({where})" for table, found in reasons.items()
                    for r, where in found.items() if not TOKEN.fullmatch(r))
    assert not spaced, "close reasons that are not one token:\n" + "\n".join(spaced)
    # the scan sees the ways a reason comes: literal, conditional, function, format, libuv
    assert {"h2_send_failed", "drained", "idle_timeout", "peer_closed", "reset",
            "early_response", "nomem"} <= set(reasons["conn_close"]), reasons["conn_close"]
    assert {"long_placeholder", "purge", "close_notify",
            "unexpected_bytes"} <= set(reasons["back_idle_close"]), reasons["back_idle_close"]
    assert external["back_idle_close"] == {"libuv error name"}
    assert {"timeout", "evicted", "refused", "nomem", "write_error"} <= \
        set(reasons["admin_conn_closed"]), reasons["admin_conn_closed"]
    assert len(reasons["conn_close"]) > 30, reasons["conn_close"]
    with open(os.path.join(ROOT, "config", "README.md")) as fh:
        doc = fh.read()
    missing = []
    for table, found in sorted(reasons.items()):
        cells = reason_table(doc, table)
        rows = {w for cell in cells for w in re.findall(r"`([^`]+)`", cell)}
        missing += sorted(f"{table}: {r} ({where})" for r, where in found.items()
                          if r not in rows)
        missing += sorted(f"{table}: a row for the {phrase}" for phrase in external[table]
                          if not any(phrase in cell for cell in cells))
    assert not missing, "close reasons not in their table in config/README.md:\n" + \
        "\n".join(missing)
