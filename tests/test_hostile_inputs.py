"""Hostile input, one row each: the run stops with a usage error (exit code 4), or the test (its
module, for data loaded at import) fails with a message naming the culprit; never a traceback
from inside the plugin, never an INTERNALERROR, and the model is never called for input that
cannot be right (issue 15.7)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import pytest

from tests.acceptance.helpers import DATASET, RELIABLE_YAML

# The model leaves a file behind when it is called: input this bad must never reach it.
CONFTEST = r'''
import pathlib

import pytest

from pytest_reliable import text_model


def answer(prompt: str) -> str:
    pathlib.Path("MODEL_CALLED").write_text("yes")
    return "A"


@pytest.fixture
def reliable_model():
    return text_model(answer, id="hostile-inputs")
'''

EVALUATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable(space="wrappers", n=2, mode="fixed")
def test_gate(reliable):
    reliable.evaluate(Dataset.from_records({dataset!r}), MultipleChoice())
'''

FROM_FILE = '''
import pytest
from pytest_reliable import Classification, Dataset, MultipleChoice

@pytest.mark.reliable(n=2)
def test_gate(reliable):
    reliable.evaluate({load}, MultipleChoice())
'''

BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    + ["spaces: {}"]
)

LATIN1 = "spaces:\n  wrappers:\n    wrapper: ['\xe9{}', '({})']\n".encode("latin-1")


@dataclass
class Hostile:
    """One hostile input: the files of the project, the command line, the environment."""

    name: str
    expect: str  # "usage" (exit code 4), "failed" (the test fails), "collect" (collection error)
    fragments: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    test: str = EVALUATE


HOSTILE = [
    Hostile("corrupt lock", "usage", ("--reliable-lock", "reliable.lock", "--reliable-lock-update"),
            {"reliable.lock": "{not json"}, ("--reliable-lock",)),
    Hostile("lock of the wrong shape", "usage", ("reliable.lock",),
            {"reliable.lock": json.dumps({"version": 1, "spaces": {
                "wrappers": {"hash": "0", "declaration": "oops"}}})}, ("--reliable-lock",)),
    Hostile("non-UTF-8 reliable.yaml", "usage", ("reliable.yaml", "UTF-8"),
            {"reliable.yaml": LATIN1}),
    Hostile("YAML alias bomb", "usage", ("reliable.yaml", "alias"), {"reliable.yaml": BOMB}),
    Hostile("duplicate key in reliable.yaml", "usage", ("reliable.yaml", "line 4",
                                                          "duplicate key", "wrapper"),
            {"reliable.yaml": "spaces:\n  wrappers:\n    wrapper: ['({})']\n"
                              "    wrapper: ['{}.']\n"}),
    Hostile("400-digit temperature", "usage", ("reliable.yaml", "temperature"),
            {"reliable.yaml": "spaces:\n  wrappers:\n    wrapper: ['({})']\n"
                              f"    temperature: [1{'0' * 400}]\n"}),
    Hostile("timeout nan", "usage", ("--reliable-timeout", "nan"), args=("--reliable-timeout=nan",)),
    Hostile("timeout nan in the environment", "usage", ("RELIABLE_TIMEOUT", "nan"),
            env={"RELIABLE_TIMEOUT": "nan"}),
    Hostile("timeout nan in the ini file", "usage", ("reliable_timeout", "nan"),
            {"pytest.ini": "[pytest]\nreliable_timeout = nan\n"}),
    Hostile("concurrency zero in the ini file", "usage", ("reliable_concurrency", ">= 1"),
            {"pytest.ini": "[pytest]\nreliable_concurrency = 0\n"}),
    Hostile("report under a file", "usage", ("--reliable-report", "conftest.py"),
            args=("--reliable-report=conftest.py/out.json",)),
    Hostile("missing config file", "usage", ("--reliable-config", "nope.yaml"),
            args=("--reliable-config=nope.yaml",)),
    Hostile("base URL that is no URL", "usage", ("--reliable-base-url", "not a url"),
            args=("--reliable-base-url=not a url",)),
    Hostile("remote model without a key", "usage", ("OPENAI_API_KEY", "api.example.com"),
            args=("--reliable-model=gpt-x", "--reliable-base-url=https://api.example.com/v1"),
            env={"OPENAI_API_KEY": None}),
    Hostile("record mode in the environment", "usage", ("RELIABLE_RECORD", "sometimes"),
            env={"RELIABLE_RECORD": "sometimes"}),
    Hostile("null question", "failed", ("record 1", "'question'", "null"),
            test=EVALUATE.replace("{dataset!r}", repr(
                [{"question": None, "choices": ["a", "b"], "answer": 0}]))),
    Hostile("non-UTF-8 JSONL", "failed", ("data.jsonl", "UTF-8"),
            {"data.jsonl": '{"question": "caf\xe9?", "choices": ["a", "b"], "answer": 0}\n'
                           .encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_file("data.jsonl")')),
    Hostile("non-UTF-8 CSV", "failed", ("data.csv", "UTF-8"),
            {"data.csv": 'question,choices,answer\ncaf\xe9,"[""a"", ""b""]",0\n'.encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_file("data.csv")')),
    Hostile("non-UTF-8 BBH file", "failed", ("task.json", "UTF-8"),
            {"task.json": '{"examples": [{"input": "caf\xe9", "target": "(A)"}]}'.encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_bbh("task.json")')),
    Hostile("non-UTF-8 JSONL loaded at import", "collect", ("data.jsonl", "UTF-8"),
            {"data.jsonl": b'{"question": "caf\xe9?", "choices": ["a", "b"], "answer": 0}\n'},
            test='from pytest_reliable import Dataset\nDATA = Dataset.from_file("data.jsonl")\n'
                 "def test_x():\n    pass\n"),
    Hostile("expect=increase on labels", "failed", ("expect='increase'", "Classification",
                                                      "labels"),
            test='''
import pytest
from pytest_reliable import Classification

DATA = [{"text": "good film", "label": "positive"}, {"text": "bad film", "label": "negative"}]

@pytest.mark.directional(perturb=["negation"], expect="increase")
def test_dir(reliable):
    reliable.directional(DATA, Classification(labels=["positive", "negative"]))
'''),
]


def assert_clear(result: pytest.RunResult, case: Hostile) -> None:
    text = result.stdout.str() + result.stderr.str()
    if case.expect == "usage":
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    elif case.expect == "collect":
        assert result.ret == pytest.ExitCode.INTERRUPTED, text
        result.assert_outcomes(errors=1)
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED, text
        result.assert_outcomes(failed=1)
    for fragment in case.fragments:
        assert fragment in text, (fragment, text)
    for leak in ("INTERNALERROR", "Traceback", "pytest_reliable/", "pytest_reliable\\"):
        assert leak not in text, (leak, text)


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
def test_hostile_input(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                       case: Hostile) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    for name, content in case.files.items():
        path = pytester.path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    pytester.makepyfile(test_hostile=case.test.replace("{dataset!r}", repr(DATASET)))
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    started = time.monotonic()
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *case.args)
    assert time.monotonic() - started < 60, "hostile input must fail fast"
    assert_clear(result, case)
    assert not (pytester.path / "MODEL_CALLED").exists(), "the model was called"
