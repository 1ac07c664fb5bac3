"""The public cache test suite's cases (http-tests/cache-tests, transcribed as data in
cache_tests/cases.json) played through h2gate's shared cache (a route with `cache: true`) in
front of a scripted origin (cache_tests/cachesuite.py): every case passes except those listed
with their reason in cache_tests/known_failures.py. A case that starts failing is a regression;
a listed case that passes is a fix to take off the list. `cache_tests/run.py --peer nginx`
prints the same run's pass rate beside nginx's (README.md)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache_tests"))

import cachesuite  # noqa: E402
from known_failures import H2GATE  # noqa: E402
from procs import free_port  # noqa: E402


def describe(ids, results):
    return "\n".join(f"  {i}: {results[i] if results[i] is not True else 'pass'}" for i in ids)


def test_known_failures_name_cases_of_the_suite():
    ids = {c["id"] for c in cachesuite.load_cases()}
    assert len(ids) == len(cachesuite.load_cases())  # upstream ids are unique
    assert sorted(set(H2GATE) - ids) == []


# the suite's freshness windows of 2 s against its 3 s pauses, and 337 cases at once: alone
# (conftest.py). The module's other tests need no cache and no clock: the parallel pass.
@pytest.mark.serial
def test_cases_pass_but_the_known_failures(gateway):
    cases = cachesuite.load_cases()
    with cachesuite.SuiteOrigin() as origin:
        port = free_port()
        gateway(cachesuite.h2gate_config(port, origin.port), wait=[("127.0.0.1", port)])
        results = cachesuite.run_all(cases, origin, port)
    failing = {i for i, r in results.items() if r is not True}
    regressed = sorted(failing - set(H2GATE))
    fixed = sorted(set(H2GATE) - failing)
    assert not regressed and not fixed, (
        f"failing now (regressions):\n{describe(regressed, results)}\n"
        f"passing now (take them off known_failures.py):\n{describe(fixed, results)}")
    assert sum(1 for r in results.values() if r is True) == len(cases) - len(H2GATE)


def test_the_runner_fails_an_intermediary_that_does_not_cache():
    """The same cases played against the origin itself (nothing cached, nothing revalidated):
    a case that expects a stored answer fails, one that expects the origin passes."""
    cases = [c for c in cachesuite.load_cases()
             if c["id"] in ("freshness-none", "freshness-max-age", "cc-resp-no-store",
                            "vary-no-match", "conditional-etag-strong-respond")]
    with cachesuite.SuiteOrigin() as origin:
        results = cachesuite.run_all(cases, origin, origin.port)
    assert results["freshness-none"] is True
    assert results["cc-resp-no-store"] is True
    assert results["freshness-max-age"] == ("Assertion", "Response 2 does not come from cache")
    assert results["conditional-etag-strong-respond"][0] == "Assertion"
    assert results["vary-no-match"] is True
