#!/usr/bin/python3
"""Runs the ported cache-tests cases (cases.json) against h2gate (a route with `cache: true`,
cachesuite.h2gate_config) and, with --peer nginx, against nginx as a shared cache in front of
the same scripted origin (cachesuite.NGINX_CACHE_CONF), and prints the pass rates on the same
cases.

  /usr/bin/python3 tests/integration/cache_tests/run.py [--peer nginx] [--only ID ...] [-v]

Needs the build (build/gateway/h2gate, or H2GATE_BIN) and Debian's nginx. A run takes about
7 s a cache: the cases run side by side, all at once, each sleeping 3 s where upstream does."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cachesuite  # noqa: E402
from known_failures import H2GATE  # noqa: E402


def summary(name, cases, results):
    cats = cachesuite.classify(cases, results)
    passed = sum(1 for r in results.values() if r is True)
    counts = {}
    for c in cats.values():
        counts[c] = counts.get(c, 0) + 1
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    required = [c["id"] for c in cases if c.get("kind", "required") == "required"]
    rpassed = sum(1 for i in required if results[i] is True)
    return passed, (f"{name}: {passed}/{len(results)} passed, {rpassed}/{len(required)} of the "
                    f"required ones ({detail})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", choices=["nginx"], help="also run the cases against this cache")
    ap.add_argument("--only", nargs="*", help="case ids to run (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case's result")
    a = ap.parse_args()
    cases = cachesuite.load_cases()
    if a.only:
        cases = [c for c in cases if c["id"] in a.only]
    lines = []
    with cachesuite.SuiteOrigin() as origin:
        targets = [("h2gate", cachesuite.H2gateCache)] + \
            ([("nginx", cachesuite.NginxCache)] if a.peer else [])
        for name, cls in targets:
            cache = cls(origin.port)
            try:
                results = cachesuite.run_all(cases, origin, cache.port)
            finally:
                cache.stop()
            for c in cases:
                r = results[c["id"]]
                if a.verbose or (name == "h2gate" and (r is True) == (c["id"] in H2GATE)):
                    note = "" if a.verbose else "  (known_failures.py disagrees)"
                    print(f"{name} {c['id']}: {'pass' if r is True else ' '.join(r)}{note}")
            lines.append(summary(name, cases, results)[1])
    print(f"{len(cases)} cases of http-tests/cache-tests ({cachesuite.load_meta()['commit'][:12]})")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
