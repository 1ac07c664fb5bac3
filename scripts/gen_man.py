#!/usr/bin/env python3
"""Generate docs/h2gate.yaml.5 (roff) from config/README.md, the one source of the config
reference: headings become sections, tables become tagged paragraphs, prose becomes
paragraphs. `scripts/gen_man.py` rewrites the page; `scripts/gen_man.py --check` exits 1 when
the committed page differs from what README.md gives (tests/integration/test_install.py)."""
import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
src = root / "config" / "README.md"
dst = root / "docs" / "h2gate.yaml.5"


def esc(text):
    """Markdown inline text to roff: code spans bold, links to their text, escapes."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    text = text.replace("—", "\\(em").replace("→", "\\(->").replace("≤", "\\(<=")
    text = text.replace("≥", "\\(>=").replace("§", "\\(sc").replace("×", "\\(mu")
    text = text.replace("…", "...").replace("’", "'")
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    return text


def line_out(out, text):
    # a roff control character at the start of a line must be escaped
    if text.startswith(".") or text.startswith("'"):
        text = "\\&" + text
    out.append(text)


def convert(md):
    out = ['.TH H2GATE.YAML 5 "" "h2gate" "File Formats"',
           ".SH NAME",
           "h2gate.yaml \\- configuration file of the h2gate HTTP/2 edge gateway",
           ".SH SYNOPSIS",
           "\\fBh2gate -c\\fR \\fIFILE\\fR",
           ".br",
           "\\fBh2gate --check-config\\fR \\fIFILE\\fR"]
    header = None
    para = []

    def flush():
        if para:
            out.append(".PP")
            for p in para:
                line_out(out, esc(p))
            para.clear()

    for raw in md.splitlines()[1:]:
        s = raw.rstrip()
        if s.startswith("#"):
            flush()
            level = len(s) - len(s.lstrip("#"))
            title = s.lstrip("#").strip().replace("`", "").replace('"', "")
            out.append('.SH "' + esc(title.upper()) + '"' if level == 2 else '.SS "' + esc(title) + '"')
            header = None
            continue
        if s.startswith("|"):
            flush()
            cells = [c.strip() for c in s.strip("|").split("|")]
            if header is None:
                header = cells
                continue
            if all(re.fullmatch(r"-+", c.replace(" ", "")) for c in cells):
                continue
            out.append(".TP")
            line_out(out, esc(cells[0]))
            rest = [f"{h}: {c}" for h, c in zip(header[1:], cells[1:]) if c]
            line_out(out, esc("; ".join(rest)) if rest else "")
            continue
        header = None
        if not s:
            flush()
            continue
        if s.startswith("- "):
            flush()
            out.append(".IP \\(bu 2")
            line_out(out, esc(s[2:]))
            continue
        if s.startswith("  ") and out and out[-2:-1] == [".IP \\(bu 2"]:
            line_out(out, esc(s.strip()))
            continue
        if s.startswith("```"):
            continue
        para.append(s.strip())
    flush()
    out += [".SH SEE ALSO", "\\fBh2gate\\fR(8)"]
    return "\n".join(out) + "\n"


def main():
    page = convert(src.read_text())
    if "--check" in sys.argv:
        if not dst.exists() or dst.read_text() != page:
            print(f"{dst} is stale: run scripts/gen_man.py", file=sys.stderr)
            return 1
        return 0
    dst.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
