#!/usr/bin/env python3
"""Generate docs/h2gate.yaml.5 (roff) from config/README.md, the one source of the config
reference: headings become sections, tables become tagged paragraphs, lists and code blocks
keep their shape, prose becomes filled paragraphs; an EXAMPLES section quotes the shipped
configurations. `scripts/gen_man.py` rewrites the page; `scripts/gen_man.py --check` exits 1
when the committed page differs from what README.md gives (tests/integration/test_install.py).

The output is deterministic (no build time in it) and `mandoc -T lint` clean: the .TH date is
DATE below, source lines stay within 80 bytes, no paragraph macro follows a heading, every
character outside ASCII is a roff escape, and references to the source tree (`config/config.h`,
`test_cluster.py`) are left out: the page is read where h2gate is installed, not built."""
import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
src = root / "config" / "README.md"
dst = root / "docs" / "h2gate.yaml.5"

# The page's date (.TH): the last time its content changed in substance. Update it with the
# text (at a release at the latest); never the build time, so that --check stays stable.
DATE = "2026-12-07"

# The shipped configurations quoted under EXAMPLES (test_cli.py checks that they are valid).
EXAMPLES = [
    ("The smallest useful configuration: cleartext HTTP/2 (h2c) and HTTP/1.1 in front of one "
     "origin.", "config/examples/minimal.yaml"),
    ("The embedded default (\\fBh2gate \\-\\-print\\-default\\-config\\fR): TLS with a "
     "self-signed certificate made on first start, a cleartext listener, compression and an "
     "access log on standard error.", "config/gateway.yaml"),
]

WIDTH = 80
CHARS = {"—": "\\(em", "–": "\\(en", "→": "\\(->", "←": "\\(<-", "≤": "\\(<=", "≥": "\\(>=",
         "§": "\\(sc", "×": "\\(mu", "…": "...", "’": "'", "‘": "`", "“": "\\(lq", "”": "\\(rq",
         "≠": "\\(!=", "±": "\\(+-", "µ": "\\(mc", "°": "\\(de", "·": "\\(pc"}

# A source-tree file named in the text: a C/Python/shell file, or a path into the code folders.
SOURCE = r"`(?:[\w.-]+/)*[\w.-]+\.(?:c|h|py|sh)`|`(?:gateway|common|tests|fuzz)/[^`]*`"


def project_version():
    m = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", (root / "meson.build").read_text(),
                  re.S)
    return m.group(1) if m else "unknown"


def drop_source_refs(text):
    """Leave out references to source files: `(token buckets, `common/bucket.h`)` becomes
    `(token buckets)`, `Measured (`test_x.py`):` becomes `Measured:`."""
    src = f"(?:{SOURCE})"
    text = re.sub(rf"(?:,\s*|\s+in\s+|\s+see\s+){src}", "", text)
    text = re.sub(rf"{src}(?:,\s*|\s+and\s+)", "", text)
    text = re.sub(rf"\s*\(\s*{src}\s*\)", "", text)
    return re.sub(rf"\s*{src}", "", text)


def roff_chars(text):
    """Backslashes and characters outside ASCII as roff escapes."""
    text = text.replace("\\", "\\e")
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        else:
            out.append(CHARS.get(ch, f"\\[u{ord(ch):04X}]"))
    return "".join(out)


def code(text):
    """A code block line: a minus is a minus (`\\-`), not a hyphen, so that what is copied
    from the page runs."""
    return roff_chars(text).replace("-", "\\-")


def code_span(text):
    """A code span: real minus signs (`aes-128-cbc`, `-t` copied from the page work), and a
    break point after each inner one (`\\:`), since a typesetter never breaks a line at a
    minus and long names (`Cross-Origin-Embedder-Policy`) must fit somewhere."""
    return re.sub(r"(?<=\w)\\-(?=\w)", r"\\-\\:", code(text))


def inline(text):
    """Markdown inline text to roff: code spans bold, **bold** bold, *emphasis* italic, links
    to their text, source references left out."""
    text = drop_source_refs(text)
    spans = []

    def keep(m):
        spans.append("\\fB" + code_span(m.group(1)) + "\\fR")
        return f"\x00{len(spans) - 1}\x00"

    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"`([^`]+)`", keep, text)
    text = roff_chars(text)
    text = re.sub(r"\*\*(.+?)\*\*", lambda m: "\\fB" + m.group(1) + "\\fR", text)
    text = re.sub(r"(?<![*\w])\*(\S(?:[^*]*?\S)?)\*(?![*\w])",
                  lambda m: "\\fI" + m.group(1) + "\\fR", text)

    def restore(m):
        return spans[int(m.group(1))]

    # a code span inside bold stays bold: drop its own font switches there
    def bold_block(m):
        inner = re.sub(r"\x00(\d+)\x00", lambda k: spans[int(k.group(1))][3:-3], m.group(1))
        return "\\fB" + inner + "\\fR"

    text = re.sub(r"\\fB(.*?)\\fR", bold_block, text)
    return re.sub(r"\x00(\d+)\x00", restore, text)


def safe(line):
    # a roff control character at the start of a text line must be escaped
    return "\\&" + line if line.startswith((".", "'")) else line


def wrap(text):
    """Filled text as source lines of at most WIDTH bytes (broken at spaces only)."""
    lines, cur = [], ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > WIDTH:
            lines.append(safe(cur))
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(safe(cur))
    return lines


def parse(md):
    """Markdown blocks: ("h", level, title), ("p", text), ("li", depth, marker, text),
    ("table", header, rows), ("code", lines)."""
    blocks = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        s = lines[i].rstrip()
        if s.lstrip().startswith("```"):
            body = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                body.append(lines[i].rstrip())
                i += 1
            blocks.append(("code", body))
            i += 1
            continue
        if s.startswith("#"):
            level = len(s) - len(s.lstrip("#"))
            blocks.append(("h", level, s.lstrip("#").strip()))
            i += 1
            continue
        if s.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c.replace(" ", "")) for c in cells):
                    rows.append(cells)
                i += 1
            blocks.append(("table", rows[0], rows[1:]))
            continue
        m = re.match(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$", s)
        if m:
            indent = len(m.group(1))
            text = [m.group(3)]
            i += 1
            # continuation: indented lines, or lazy lines, until a blank line or a new block
            while i < len(lines):
                t = lines[i].rstrip()
                if (not t.strip() or t.lstrip().startswith(("```", "|", "#"))
                        or re.match(r"^\s*([-*+]|\d+[.)])\s+", t)):
                    break
                text.append(t.strip())
                i += 1
            marker = m.group(2)
            blocks.append(("li", 1 if indent >= 2 else 0,
                           "\\(bu" if marker in "-*+" else marker, " ".join(text)))
            continue
        if not s.strip():
            i += 1
            continue
        text = []
        while i < len(lines):
            t = lines[i].rstrip()
            if (not t.strip() or t.lstrip().startswith(("```", "|", "#"))
                    or re.match(r"^\s*([-*+]|\d+[.)])\s+", t)):
                break
            text.append(t.strip().lstrip("> ").strip() if t.lstrip().startswith(">")
                        else t.strip())
            i += 1
        blocks.append(("p", " ".join(text)))
    return blocks


def row_out(out, header, cells):
    """A table row as a tagged paragraph: the first cell is the tag (one line per key when it
    names several), then the meaning and, on a line of its own, `Type: ... Default: ...`."""
    keys = [k.strip() for k in re.split(r",\s*(?=`)", cells[0])] if cells[0].count("`") > 2 \
        else [cells[0]]
    out.append(".TP")
    out.append(safe(inline(keys[0])))
    for k in keys[1:]:
        out.append(".TQ")
        out.append(safe(inline(k)))
    facts, body = [], ""
    pairs = list(zip(header[1:], cells[1:]))
    for n, (h, c) in enumerate(pairs):
        if not c:
            continue
        if n == len(pairs) - 1 and h.lower() in ("meaning", "effect", "description"):
            body = c
            continue
        c = c if c.endswith((".", ";", ":", "!", "?")) else c + "."
        facts.append(f"{h[:1].upper()}{h[1:]}: {c}")
    if body:
        out += wrap(inline(body))
    if facts and body:
        out.append(".br")
    if facts:
        out += wrap(inline(" ".join(facts)))


def convert(md, examples):
    out = [f'.TH H2GATE.YAML 5 {DATE} "h2gate {project_version()}" "File Formats"',
           '.\\" generated from config/README.md by scripts/gen_man.py: edit those, not this',
           '.\\" ragged right: long key and metric names leave too few spaces to justify',
           ".ad l",
           ".SH NAME",
           "h2gate.yaml \\- configuration file of the h2gate HTTP/2 edge gateway",
           ".SH SYNOPSIS",
           "\\fBh2gate \\-c\\fR \\fIFILE\\fR",
           ".br",
           "\\fBh2gate \\-t \\-c\\fR \\fIFILE\\fR",
           ".br",
           "\\fBh2gate \\-\\-check\\-config\\fR \\fIFILE\\fR",
           ".SH DESCRIPTION"]
    fresh = True  # right after a heading: no paragraph macro (mandoc: "PP after SH")
    in_list = 0   # nesting of .RS for second-level list items
    prev = None

    def para():
        if not fresh:
            out.append(".PP")

    for b in parse(md)[1:]:  # the first block is the page title
        kind = b[0]
        if kind != "li" and in_list:
            out.append(".RE")
            in_list = 0
        if kind == "h":
            _, level, title = b
            title = title.replace("`", "").replace('"', "")
            out.append(f'.SH "{inline(title.upper())}"' if level <= 2
                       else f'.SS "{inline(title)}"')
            fresh = True
            prev = kind
            continue
        if kind == "p":
            para()
            out += wrap(inline(b[1]))
        elif kind == "li":
            _, depth, marker, text = b
            if depth and not in_list and prev == "li":
                out.append(".RS 2")
                in_list = 1
            elif not depth and in_list:
                out.append(".RE")
                in_list = 0
            width = 2 if marker == "\\(bu" else len(marker) + 1
            out.append(f".IP {marker} {width}")
            out += wrap(inline(text))
        elif kind == "table":
            _, header, rows = b  # .TP starts a paragraph itself
            for cells in rows:
                row_out(out, header, cells)
        elif kind == "code":
            para()
            out += [".RS 4", ".nf"] + [safe(code(line)) for line in b[1]] + [".fi", ".RE"]
        fresh = False
        prev = kind
    if in_list:
        out.append(".RE")

    out.append(".SH EXAMPLES")
    for n, (title, text) in enumerate(examples):
        if n:
            out.append(".PP")
        out += wrap(title)
        # comment lines explain the file where it lies (the source tree); the page's own
        # sentence explains it here
        body = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        while body and not body[-1].strip():
            body.pop()
        out += [".PP", ".RS 4", ".nf"] + [safe(code(line)) for line in body] + [".fi", ".RE"]
    out.append(".PP")
    out += wrap("Check a file before using it, then apply it without a restart:")
    out += [".PP", ".RS 4", ".nf", "h2gate \\-t \\-c FILE", "kill \\-HUP $(pidof h2gate)", ".fi",
            ".RE"]
    out += [".SH SEE ALSO", "\\fBh2gate\\fR(8)"]
    return "\n".join(out) + "\n"


def main():
    examples = [(title, (root / path).read_text()) for title, path in EXAMPLES]
    page = convert(src.read_text(), examples)
    if "--check" in sys.argv:
        if not dst.exists() or dst.read_text() != page:
            print(f"{dst} is stale: run scripts/gen_man.py", file=sys.stderr)
            return 1
        return 0
    dst.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
