"""Installing the plugin costs a project without reliable tests nothing heavy: numpy, scipy and
statsmodels (0.1 s to 1 s of imports) load only when a reliable test needs them."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import CONFTEST, write_project

HEAVY = ("numpy", "scipy", "statsmodels")

REPORTING_CONFTEST = f'''
import sys

import pytest


def heavy():
    return sorted(name for name in {HEAVY!r} if name in sys.modules)


def pytest_collection_finish(session):
    print("heavy after collection:", heavy())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    print("heavy at session end:", heavy())
'''

PLAIN_TESTS = '''
def test_one():
    assert 1 + 1 == 2


def test_two(tmp_path):
    assert tmp_path.is_dir()
'''


def test_a_run_without_reliable_tests_imports_no_numpy(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(REPORTING_CONFTEST)
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "reliable: seed=0" in out  # the plugin is loaded and configured
    assert "heavy after collection: []" in out and "heavy at session end: []" in out, out


def test_a_reliable_test_still_gets_them(pytester: pytest.Pytester) -> None:
    # The check above can fail: the same conftest sees them once a reliable test runs.
    write_project(pytester, conftest=CONFTEST + REPORTING_CONFTEST)
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly", "-k", "test_passes")
    result.assert_outcomes(passed=1)
    assert "heavy at session end: ['numpy', 'scipy', 'statsmodels']" in result.stdout.str()
