"""Issue 31 as a user meets it: a claim the gate cannot keep on this dataset is refused before
any call, and the plan suggests the size at which every threshold can go the policy's way."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import write_project
from tests.acceptance.test_usage_errors import assert_usage_error

TOO_FEW = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=10, mode="fixed", max_std=0.2,
                      decide="fail-on-evidence")
def test_fixed_std(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_fixed_max_std_on_fewer_instances_than_resamplings_is_refused_before_any_call(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester, test_file=TOO_FEW)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    assert_usage_error(result, "test_fixed_std", "max_std=0.2", "needs N >= 10 instances",
                       "this dataset has 5")
    plan = pytester.runpytest_subprocess("-p", "no:randomly", "--reliable-plan")
    assert plan.ret == 0
    plan.stdout.fnmatch_lines(["*max_std=0.2: cannot fail on evidence at this size; refused*",
                               "*size: *"])
