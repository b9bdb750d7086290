"""Shared pieces of the acceptance tests: a project written into a pytester directory.

The model in these projects is a scripted callable with a known format sensitivity: it answers the
label of the option containing "right" only when options are wrapped as ``(A)``, otherwise the
label of an option containing "wrong". So every number in its reports is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CONFTEST = r'''
import re

import pytest

from pytest_reliable import text_model

CALLS = []


def format_sensitive(prompt: str) -> str:
    """Right only when options look like "(B) text"; the label of a wrong option otherwise."""
    CALLS.append(prompt)
    right = re.search(r"^\((\w)\) right", prompt, re.M)
    if right:
        return right.group(1)
    wrong = re.search(r"^\W*(\w)\W+\s*wrong", prompt, re.M)
    return wrong.group(1) if wrong else "no idea"


@pytest.fixture
def reliable_model():
    return text_model(format_sensitive, id="scripted-format-sensitive")
'''

RELIABLE_YAML = '''
spaces:
  wrappers:
    wrapper: ["({})", "{}."]
'''

DATASET = [
    {"question": f"Question number {i}?", "choices": choices, "answer": answer}
    for i, (choices, answer) in enumerate(
        [
            (["right answer", "wrong one", "wrong two"], 0),
            (["wrong one", "right answer", "wrong two"], 1),
            (["wrong one", "wrong two", "right answer"], 2),
            (["wrong one", "right answer", "wrong two"], 1),
            (["right answer", "wrong one", "wrong two"], 0),
        ]
    )
]

TEST_FILE = '''
import pytest

from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


# min_score: the mean is 0.5 over 5 instances; its lower bound on evidence is about 0.28.
@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.25)
def test_passes(reliable):
    report = reliable.evaluate(DATA, MultipleChoice())
    assert report.mean == pytest.approx(0.5)


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_worst=0.5)
def test_fails_on_worst_format(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def write_project(pytester: pytest.Pytester, *, test_file: str | None = None,
                  yaml_text: str = RELIABLE_YAML, conftest: str = CONFTEST) -> None:
    pytester.makeconftest(conftest)
    pytester.makefile(".yaml", reliable=yaml_text)
    pytester.makepyfile(test_gate=(test_file or TEST_FILE).format(dataset=DATASET))


def run_json(pytester: pytest.Pytester, *args: str, name: str = "report.json") -> tuple[Any, dict]:
    path = pytester.path / name
    result = pytester.runpytest_subprocess(f"--reliable-report={path}", "-p", "no:randomly", *args)
    report = json.loads(Path(path).read_text()) if path.exists() else {}
    return result, report


def by_test(report: dict) -> dict[str, dict]:
    return {entry["nodeid"].split("::")[-1]: entry for entry in report["tests"]}


def kill_while_the_batch_waits(path: Path, args: list[str], server: Any) -> None:
    """Start ``args`` (a pytest run under --reliable-batch) in ``path``, SIGKILL its process group
    once ``server`` (a `ScriptedServer`) holds its batch and the run waits for it."""
    import os
    import signal
    import subprocess
    import time

    run = subprocess.Popen(args, cwd=path, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not server.batches and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # waiting for it now
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
