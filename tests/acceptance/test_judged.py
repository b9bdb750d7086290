"""Judged answers (SPEC section 12) driven as users do: a judge on the scripted OpenAI-compatible
server grades a Generation task; its votes, noise and calls reach the JSON report; bad judges
stop the run with a usage error before any call."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_reliable.models.base import Message
from pytest_reliable.testing import ScriptedServer
from tests.acceptance.helpers import by_test, run_json

pytestmark = pytest.mark.slow  # pytest subprocesses

CONFTEST = '''
import re

import pytest

from pytest_reliable import text_model


def half_right(prompt: str) -> str:
    i = int(re.findall(r"What is (\\d+) plus", prompt)[-1])
    return str(2 * i) if i % 2 == 0 else "I do not know"


@pytest.fixture
def reliable_model():
    return text_model(half_right, id="half-right")
'''

TEST_FILE = '''
import pytest

from pytest_reliable import Dataset, Generation, Judge, openai_model

DATA = Dataset.from_records(
    [{{"question": f"What is {{i}} plus {{i}}?", "reference": str(2 * i)}} for i in range(8)])
JUDGE = Judge(openai_model("scripted-judge", base_url="{url}"),
              "The answer states the reference number.", votes={votes}, scale={scale!r},
              max_unparsed={max_unparsed!r})


@pytest.mark.reliable(n=3, min_score={min_score})
def test_judged(reliable):
    report = reliable.evaluate(DATA, Generation(grader=JUDGE))
    assert report.matrix.cells[0].votes
'''


def judge_rule(messages: list[Message] | str, params: dict[str, Any]) -> str:
    text = messages if isinstance(messages, str) else messages[-1]["content"]
    answer = re.search(r"^Answer: (.*)$", text, re.M)
    reference = re.search(r"^Reference answer: (.*)$", text, re.M)
    if answer and answer.group(1) == "I do not know":
        return "This answer does not pass."  # read as FAIL (a keyword reader saw PASS)
    return "PASS" if answer and reference and answer.group(1) == reference.group(1) else "FAIL"


def unreadable(messages: list[Message] | str, params: dict[str, Any]) -> str:
    return "I am not sure what to say <b>" + "." * 300  # no verdict, and longer than is shown


def write(pytester: pytest.Pytester, url: str, *, votes: Any = 3, scale: str = "pass/fail",
          min_score: float = 0.1, max_unparsed: float = 0.1) -> None:
    # min_score 0.1: 8 instances, half judged right; the exact lower bound of 4/8 is 0.19.
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_gate=TEST_FILE.format(url=url, votes=votes, scale=scale,
                                                   min_score=min_score,
                                                   max_unparsed=max_unparsed))


def test_a_judge_on_the_server_grades_votes_and_reports_its_noise(
    pytester: pytest.Pytester,
) -> None:
    with ScriptedServer(judge_rule, faults=["500", "429"]) as server:
        write(pytester, server.base_url)
        result, report = run_json(pytester)
        result.assert_outcomes(passed=1)
        entry = by_test(report)["test_judged"]
        judge = entry["judge"]
        # 4 right answers and one "I do not know" shared by the 4 odd questions: 8 distinct
        # (question, answer) pairs x 3 votes, the two faults retried.
        assert server.completed == 8 * 3 and server.fault_counts["500"] == 1
        assert judge["votes"] == 3 and judge["calls"] == {"made": 24, "cached": 4 * 8 * 3 - 24}
        assert judge["unparsed_votes"] == 0 and judge["agreement"] == 1.0
        assert entry["mean"] == pytest.approx(0.5)
        assert entry["calls"]["made"] + entry["calls"]["cached"] == 4 * 8
        # The cache holds the votes: a second run asks the judge nothing.
        result, report = run_json(pytester, name="again.json")
        result.assert_outcomes(passed=1)
        assert server.completed == 24 and by_test(report)["test_judged"]["judge"]["calls"][
            "made"] == 0


def test_a_judge_that_cannot_be_read_errors_naming_itself(pytester: pytest.Pytester) -> None:
    with ScriptedServer(unreadable) as server:
        write(pytester, server.base_url)
        judge_id = f"openai:scripted-judge@{server.base_url.split('//')[1].split(':')[0]}"
        result, report = run_json(pytester)
    result.assert_outcomes(failed=1)
    entry = by_test(report)["test_judged"]
    # 8 instances x (3 resamplings + k=1) cells x 3 votes, none of them a grade.
    problem = (
        f"*not evaluated: judge {judge_id} could not be read: 96 of 96 votes (100%) came back "
        "without PASS or FAIL, more than max_unparsed=0.1; one reply: 'I am not sure what to "
        "say <b>....*[[]... 229 more characters cut[]]'. Fix: a judge that replies as asked "
        "(max_tokens=16 enough?), or a higher Judge(max_unparsed=...)")
    result.stdout.fnmatch_lines([problem, "*test_judged*-*error*"])
    assert "Traceback" not in result.stdout.str()
    assert entry["verdict"] == "error" and entry["mean"] is None
    assert entry["canonical"]["score"] is None
    judge = entry["judge"]  # what names the judge stays; its statistics are null
    assert (judge["id"], judge["unparsed_votes"], judge["max_unparsed"]) == (judge_id, 96, 0.1)
    assert judge["agreement"] is None and judge["judge_variance_share"] is None
    assert "agreement" not in " ".join(entry["notes"])


def test_a_few_unread_replies_are_failing_votes(pytester: pytest.Pytester) -> None:
    """Below max_unparsed an unread reply is a failing vote, counted (SPEC section 12): the four
    wrong answers' votes are unread here, half of all votes, under max_unparsed=0.5."""
    def unsure_when_wrong(messages: list[Message] | str, params: dict[str, Any]) -> str:
        reply = judge_rule(messages, params)
        return "Hmm." if reply.startswith("This answer") else reply

    with ScriptedServer(unsure_when_wrong) as server:
        write(pytester, server.base_url, max_unparsed=0.5)
        result, report = run_json(pytester)
    result.assert_outcomes(passed=1)
    entry = by_test(report)["test_judged"]
    assert entry["judge"]["unparsed_votes"] == 4 * 4 * 3 and entry["mean"] == pytest.approx(0.5)
    assert entry["judge"]["agreement"] == 1.0  # over the parsed votes


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"votes": 0}, "votes=0"),
    ({"scale": "1-10"}, "scale='1-10'"),
    ({"max_unparsed": 1.5}, "max_unparsed=1.5"),
])
def test_a_bad_judge_stops_the_run_before_any_call(
    pytester: pytest.Pytester, kwargs: dict[str, Any], fragment: str
) -> None:
    with ScriptedServer(judge_rule) as server:
        write(pytester, server.base_url, **kwargs)
        result, _ = run_json(pytester)
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        assert fragment in text and "Traceback" not in text
        assert server.requests == 0


def test_the_plan_counts_judge_calls_apart(pytester: pytest.Pytester) -> None:
    with ScriptedServer(judge_rule) as server:
        write(pytester, server.base_url)
        result = pytester.runpytest_subprocess("--reliable-plan", "-p", "no:randomly")
        assert result.ret == 0
        result.stdout.fnmatch_lines([
            "*calls: 8 instances x (3 resamplings + k=1) = 32*",
            "*judge calls: at most 32 answers x 3 votes = 96*",
            "*judge calls: at most 96 more, counted apart*",
        ])
        assert server.requests == 0


def test_min_win_rate_without_a_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gate='''
import pytest

@pytest.mark.reliable(n=2, min_win_rate=0.5)
def test_pairwise(reliable):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "min_win_rate=0.5" in text and "needs a baseline model" in text
