"""Bad input stops the run before any model call, with exit code 4 and no traceback."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import write_project

# Each case runs pytest in a subprocess (about 3 s): deselected by the fast loop, -m "not slow".
pytestmark = pytest.mark.slow

MARKER_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable({args})
def test_marked(reliable):
    reliable.evaluate(Dataset.from_records({{dataset!r}}), MultipleChoice())
'''


def assert_usage_error(result: pytest.RunResult, *fragments: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    text = result.stdout.str() + result.stderr.str()
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert "Traceback" not in text and "INTERNALERROR" not in text


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ("epz=0.1", ["test_marked", "epz", "allowed arguments"]),
        ("eps=1.5", ["test_marked", "eps=1.5", "between 0 and 1"]),
        ("delta=0", ["test_marked", "delta=0", "between 0 and 1"]),
        ("n=0", ["test_marked", "n=0", ">= 1"]),
        ("k=0", ["test_marked", "k=0", ">= 1"]),
        ("min_score=1.5", ["test_marked", "min_score=1.5", "[0, 1]"]),
        ("mode='random'", ["test_marked", "mode='random'", "'ilr' or 'fixed'"]),
        ("space='missing'", ["test_marked", "space='missing'", "reliable.yaml"]),
    ],
)
def test_bad_marker_arguments(pytester: pytest.Pytester, args: str, fragments: list[str]) -> None:
    write_project(pytester, test_file=MARKER_TEST.format(args=args))
    result = pytester.runpytest_subprocess()
    assert_usage_error(result, *fragments)


def test_bad_marker_under_xdist_stops_every_worker(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=MARKER_TEST.format(args="eps=2"))
    result = pytester.runpytest_subprocess("-n", "2")
    assert_usage_error(result, "eps=2", "test_marked", "between 0 and 1")
    assert "passed" not in result.stdout.str().splitlines()[-1]


def test_unknown_perturbation(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file='''
import pytest

@pytest.mark.invariance(perturb=["tpyos"])
def test_inv(reliable):
    pass
''')
    assert_usage_error(pytester.runpytest_subprocess(), "test_inv", "tpyos", "perturbation")


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("--reliable-n=zero", "--reliable-n"),
        ("--reliable-record=sometimes", "--reliable-record"),
        ("--reliable-concurrency=-1", "--reliable-concurrency"),
        ("--reliable-seed=abc", "--reliable-seed"),
        ("--reliable-budget=lots", "--reliable-budget"),
    ],
)
def test_bad_option_values(pytester: pytest.Pytester, option: str, fragment: str) -> None:
    write_project(pytester)
    assert_usage_error(pytester.runpytest_subprocess(option), fragment)


def test_no_cache_with_record_none_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("--reliable-no-cache", "--reliable-record=none")
    assert_usage_error(result, "--reliable-no-cache", "--reliable-record none")


def test_bad_option_from_environment(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester)
    monkeypatch.setenv("RELIABLE_N", "many")
    assert_usage_error(pytester.runpytest_subprocess(), "--reliable-n")


@pytest.mark.parametrize(
    ("yaml_text", "fragments"),
    [
        ("spaces:\n  mcq:\n    wrapper: [\"({})\"\n", ["reliable.yaml", "line"]),
        ("spaces:\n  mcq:\n    colour: [red]\n", ["reliable.yaml", "colour"]),
        ("spaces:\n  mcq:\n    wrapper: []\n", ["reliable.yaml", "wrapper"]),
        ("spaces:\n  mcq:\n    enumerator: [upper, klingon]\n", ["reliable.yaml", "klingon"]),
        ("spaces:\n  mcq:\n    temperature: [hot]\n", ["reliable.yaml", "temperature"]),
        ("spaces:\n  mcq:\n    enumerator: [upper]\n    canonical: {enumerator: lower}\n",
         ["reliable.yaml", "canonical"]),
    ],
)
def test_bad_reliable_yaml(pytester: pytest.Pytester, yaml_text: str, fragments: list[str]) -> None:
    write_project(pytester, yaml_text=yaml_text)
    assert_usage_error(pytester.runpytest_subprocess(), *fragments)


def test_help_and_markers_show_the_plugin(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    for flag in ("--reliable-n", "--reliable-seed", "--reliable-record", "--reliable-report",
                 "--reliable-lock", "--reliable-model", "--reliable-budget"):
        assert flag in help_text
    markers = pytester.runpytest_subprocess("--markers").stdout.str()
    for marker in ("reliable(", "invariance(", "directional(", "mft("):
        assert f"@pytest.mark.{marker}" in markers
