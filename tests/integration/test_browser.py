"""A real browser through the gateway (issue 22 "Must show"): headless Chromium loads a page
over HTTP/2 and TLS whose stylesheet and script the gateway compressed; the page proves it
applied both (the script reads the style's computed colour into the DOM)."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import free_port
from gwtest import gw_config, sample, scrape

CHROMIUM = shutil.which("chromium")

PAD = "/* " + "padding that makes the file worth compressing. " * 60 + "*/\n"
INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>h2gate</title>
<link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script></head>
<body><p id="probe">probe</p><p id="result">not run</p></body></html>
""" + "<!-- " + "filler " * 100 + "-->\n"
STYLE = PAD + "#probe { color: rgb(1, 2, 3); }\n" + PAD
APP = PAD + """
document.getElementById("result").textContent =
    "css=" + getComputedStyle(document.getElementById("probe")).color + " js=ok";
""" + PAD


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup does)")
def test_chromium_applies_compressed_css_and_js_over_h2(gateway, nginx_origin, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    for name, text in (("index.html", INDEX), ("style.css", STYLE), ("app.js", APP)):
        (root / name).write_text(text)
    ng = nginx_origin(str(root))
    port, tls_port, admin = free_port(), free_port(), free_port()
    alog = tmp_path / "access.log"
    g = gateway(gw_config(port, [f"127.0.0.1:{ng.port}"], tls_port=tls_port,
                          route_extra="compress: true",
                          extra=f"admin:\n  address: 127.0.0.1:{admin}\n"
                                f"access_log:\n  path: {alog}\n  format: json\n"),
                wait=[("127.0.0.1", tls_port), ("127.0.0.1", admin)])
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--no-first-run",
                        "--ignore-certificate-errors", f"--user-data-dir={tmp_path / 'prof'}",
                        "--dump-dom", f"https://localhost:{tls_port}/index.html"],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'id="result">css=rgb(1, 2, 3) js=ok<' in r.stdout, r.stdout[-2000:]
    # every file went over h2, compressed (fewer bytes sent than the file has)
    g.signal(__import__("signal").SIGUSR1)  # flush and reopen: the lines are in the file
    lines = []
    for _ in range(50):
        if alog.exists():
            lines = [json.loads(l) for l in alog.read_text().splitlines() if l.strip()]
        if {x["path"] for x in lines} >= {"/index.html", "/style.css", "/app.js"}:
            break
        __import__("time").sleep(0.1)
    sizes = {"/index.html": len(INDEX), "/style.css": len(STYLE), "/app.js": len(APP)}
    for x in lines:
        if x["path"] in sizes:
            assert x["protocol"] == "h2" and x["status"] == 200, x
            assert 0 < x["bytes_sent"] < sizes[x["path"]] // 3, x
    assert {x["path"] for x in lines} >= set(sizes), lines
    fams, _ = scrape(admin)
    done = sum(sample(fams, "h2gate_compressed_responses_total", coding=c)
               for c in ("gzip", "br", "zstd"))
    assert done >= 3
