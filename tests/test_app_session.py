"""A user's app in the session (issue 28): run-scoped answers, the identical-samples note, a bad
usage kept and said once. No pytest plugin: `ReliableSession` as the fixture drives it."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable import Dataset, ModelResponse, MultipleChoice, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.models.base import ModelUsageError, ModelWarning
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.space import Space

SPACE = Space.from_mapping("wrappers", {"wrapper": ["({})", "{}."]})
DATA = Dataset.from_records([
    {"question": f"Question {i}?", "choices": ["right answer", "wrong one", "wrong two"],
     "answer": "right answer"} for i in range(6)
])
NODEID = "test_app.py::test_gate"


def right(prompt: str) -> str:
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
    return found.group(1) if found else "?"


def sourceless(counter: list[str]) -> Any:
    """A text model with no source file (as if typed into a REPL), counting its calls."""
    namespace: dict[str, Any] = {"right": right, "counter": counter}
    exec("def app(prompt):\n    counter.append(prompt)\n    return right(prompt)\n",  # noqa: S102
         namespace)
    return namespace["app"]


def session(tmp_path: Path, **settings: Any) -> ReliableSession:
    return ReliableSession(Settings(rootdir=tmp_path, **settings), {"wrappers": SPACE})


def test_a_run_scoped_app_is_reused_in_the_run_and_never_stored(tmp_path: Path) -> None:
    calls: list[str] = []
    app = sourceless(calls)
    spec = ReliableSpec(space="wrappers", n=2, mode="fixed")
    first = session(tmp_path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        report = first.run_reliable(NODEID, DATA, MultipleChoice(), spec, app)
        again = first.run_reliable("test_app.py::test_again", DATA, MultipleChoice(), spec, app)
    told = [str(w.message) for w in said if issubclass(w.category, ModelWarning)]
    assert len(told) == 1 and "reused within this run only" in told[0]  # said once
    made = len(calls)
    assert report.calls_made == made and again.calls_made == 0
    assert again.calls_cached == report.calls_made + report.calls_cached
    entry = report.entry("passed")
    assert entry["model_cache"] == "run" and "@run-" in entry["model"]
    assert any("reused within this run only" in note for note in entry["notes"])
    assert first.cache.count() == 0  # nothing in the run's store
    first.close()
    # The next run calls it again: no answer outlived the run.
    second = session(tmp_path)
    with pytest.warns(ModelWarning):
        replay = second.run_reliable(NODEID, DATA, MultipleChoice(), spec, app)
    assert replay.calls_made == made and len(calls) == 2 * made
    second.close()
    # A named app is stored as any model.
    named = session(tmp_path)
    stored = named.run_reliable(NODEID, DATA, MultipleChoice(), spec, text_model(app, id="app"))
    assert stored.entry("passed")["model_cache"] == "store" and named.cache.count() == made
    named.close()


def test_a_run_scoped_app_under_record_none_is_a_usage_error(tmp_path: Path) -> None:
    s = session(tmp_path, record="none")
    with pytest.raises(ModelUsageError, match=r"cannot be established.*--reliable-record none "
                                              r"has nothing to replay.*id=.*version="):
        s.run_reliable(NODEID, DATA, MultipleChoice(), ReliableSpec(space="wrappers", n=2),
                       sourceless([]))
    s.close()


def no_temperature(prompt: str) -> str:
    return right(prompt)


def honours_temperature(prompt: str, temperature: float, seed: int | None = None) -> str:
    """Right at temperature 0; at temperature > 0 wrong for about a third of the seeds."""
    answer = right(prompt)
    return "B" if temperature > 0 and seed is not None and seed % 3 == 0 else answer


@pytest.mark.parametrize(
    ("fn", "noted"), [(no_temperature, True), (honours_temperature, False)],
)
def test_k_identical_samples_at_temperature_get_a_note(tmp_path: Path, fn: Any,
                                                       noted: bool) -> None:
    s = session(tmp_path, no_cache=True)
    spec = ReliableSpec(space="wrappers", n=2, mode="fixed", k=4, temperature=0.7)
    report = s.run_reliable(NODEID, DATA, MultipleChoice(), spec, text_model(fn))
    notes = [n for n in report.notes() if "probably ignores the temperature" in n]
    assert bool(notes) is noted
    if noted:
        assert "it takes no temperature=" in notes[0]
        assert report.pass_hat_k == report.pass_at_k == report.pass_at_1
    else:
        assert report.pass_hat_k < report.pass_at_1 < report.pass_at_k  # seeds differ per sample
    s.close()


def test_a_bad_usage_keeps_the_answers_and_is_said_once(tmp_path: Path) -> None:
    def negative_usage(prompt: str) -> ModelResponse:
        return ModelResponse(right(prompt), prompt_tokens=-1, completion_tokens=1)

    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  'bad-usage*': {input: 1.0, output: 2.0}\n")
    s = session(tmp_path, pricing_path=pricing)
    model = text_model(negative_usage, id="bad-usage")
    spec = ReliableSpec(space="wrappers", n=2, mode="fixed")
    with pytest.warns(ModelWarning, match=r"prompt_tokens=-1.*answers are kept") as said:
        report = s.run_reliable(NODEID, DATA, MultipleChoice(), spec, model)
    assert len([w for w in said if issubclass(w.category, ModelWarning)]) == 1
    assert not report.problems and report.mean == 1.0 and report.spend.estimated
    assert report.calls_made == s.cache.count() > 0  # every answer stored
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelWarning)  # not said again
        s.run_reliable("test_app.py::test_other", DATA, MultipleChoice(),
                       ReliableSpec(space="wrappers", n=3, mode="fixed"), model)
    s.close()
