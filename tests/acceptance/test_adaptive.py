"""search="adaptive" (SPEC section 14) as a user meets it: the marker and the option, the entry's
fields, the cache serving a rerun, and the usage errors."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import CONFTEST, by_test, run_json, write_project

INSTANCES = 40

ALWAYS_RIGHT = CONFTEST.replace(
    'return text_model(format_sensitive, id="scripted-format-sensitive")',
    'return text_model(always_right, id="scripted-always-right")',
) + r'''

def always_right(prompt: str) -> str:
    CALLS.append(prompt)
    return re.search(r"^\W*(\w)\W+\s*right", prompt, re.M).group(1)
'''

SPACE = '''
spaces:
  formats:
    wrapper: ["({})", "{}.", "{}:", "[{}]"]
    enumerator: ["upper", "number"]
'''

TESTS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records([
    dict(question=f"Question number {{i}}?", answer=i % 3,
         choices=[["right answer", "wrong one", "wrong two"][(j - i) % 3] for j in range(3)])
    for i in range(40)
])

@pytest.mark.reliable(space="formats", mode="fixed", n=48, min_score=0.5, min_worst=0.5,
                      max_spread=0.5, search="adaptive")
def test_adaptive(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="formats", mode="fixed", n=48, min_score=0.5, min_worst=0.5,
                      max_spread=0.5)
def test_uniform(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def _project(pytester: pytest.Pytester, tests: str = TESTS) -> None:
    write_project(pytester, test_file=tests, conftest=ALWAYS_RIGHT, yaml_text=SPACE)


def test_adaptive_search_spends_fewer_calls_and_the_cache_serves_its_rerun(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2)
    tests = by_test(report)
    adaptive, uniform = tests["test_adaptive"], tests["test_uniform"]
    assert adaptive["search"] == "adaptive" and uniform["search"] == "uniform"
    assert uniform["stopped_early"] is False and uniform["n_resamplings"] == 48
    assert adaptive["stopped_early"] is True and "settled after" in adaptive["stop_reason"]
    n = adaptive["n_resamplings"]
    assert n < 48 / 2
    assert adaptive["calls"]["made"] + adaptive["calls"]["cached"] == INSTANCES * (n + 1)
    # per_variant cells are true: every group's cells add up to the cells received.
    groups = adaptive["formats"]["per_variant"]
    assert sum(g["cells"] for g in groups.values()) == INSTANCES * n
    # Every format of the space got its cells (8 formats, enumerated: one resampling each is
    # evidence), and the rounds stopped once every group was settled.
    assert len(groups) == 8 and all(g["cells"] >= INSTANCES for g in groups.values())
    assert "in plan order" in adaptive["stop_reason"]
    assert adaptive["verdict"] == uniform["verdict"] == "passed"

    again, rerun = run_json(pytester, "-k", "adaptive", name="again.json")
    again.assert_outcomes(passed=1)
    second = by_test(rerun)["test_adaptive"]
    assert second["calls"]["made"] == 0
    assert second["calls"]["cached"] == adaptive["calls"]["made"] + adaptive["calls"]["cached"]
    assert second["n_resamplings"] == n
    assert second["formats"]["per_variant"] == groups
