"""Gating a user's own app (issue 28): a function that calls an OpenAI-compatible server (the
scripted one) behind its own system prompt, the prompt kept in another module of the project.

Every case runs pytest in subprocesses, as a user's CI does, with ``.reliable/`` kept between the
runs as the CI cache README advises.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_reliable.models.base import Message
from pytest_reliable.testing import ScriptedServer
from tests.acceptance.helpers import by_test, run_json

pytestmark = pytest.mark.slow

GOOD_PROMPT = "Classify the review's sentiment. Reply with one word: positive or negative."
BROKEN_PROMPT = "You are a helpful assistant. Be concise."

APP_CLASSIFY = '''
import os

from openai import OpenAI

from app.prompts import SYSTEM

_client = OpenAI(base_url=os.environ["APP_BASE_URL"], api_key="sk-app-test", max_retries=0)


def classify(review: str) -> str:
    response = _client.chat.completions.create(
        model="app-model", max_tokens=8,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": review}],
    )
    return response.choices[0].message.content
'''

APP_CONFTEST = '''
import pytest

from pytest_reliable import text_model
from app.classify import classify


@pytest.fixture
def reliable_model():
    return text_model(classify)  # no id=: the identity comes from the code
'''

POSITIVE = ["great", "lovely", "friendly", "tasty", "quick", "clean", "cheap", "fun", "warm",
            "bright", "calm", "fresh"]
NEGATIVE = ["awful", "rude", "cold", "dirty"]
MFT_TESTS = '''
import pytest

from pytest_reliable import Classification, Dataset

TASK = Classification(labels=["positive", "negative"], template="Review: {{text}}\\nSentiment:")
DATA = Dataset.from_records({records!r})


@pytest.mark.mft(min_pass=0.8)
def test_sentiment(reliable):
    reliable.mft(DATA, TASK)
'''.format(records=[{"text": f"The room was {word}.", "label": "positive"} for word in POSITIVE]
           + [{"text": f"The staff was {word}.", "label": "negative"} for word in NEGATIVE])


def sentiment_server(messages: list[Message] | str, params: dict[str, Any]) -> str:
    """Right under a system prompt that asks for one word; under any other it chats, and its
    chat reads as "negative" for every review (a pass rate of 4 in 16)."""
    assert isinstance(messages, list)
    system, review = messages[0]["content"], messages[-1]["content"]
    if "one word" not in system:
        return "negative, I would say"
    return "negative" if any(word in review for word in NEGATIVE) else "positive"


def write_app(pytester: pytest.Pytester, prompt: str) -> None:
    app = pytester.path / "app"
    app.mkdir(exist_ok=True)
    (app / "__init__.py").write_text("")
    (app / "prompts.py").write_text(f"SYSTEM = {prompt!r}\n")
    (app / "classify.py").write_text(APP_CLASSIFY)


def test_a_prompt_changed_in_another_module_is_not_served_from_the_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedServer(sentiment_server) as server:
        monkeypatch.setenv("APP_BASE_URL", server.base_url)
        write_app(pytester, GOOD_PROMPT)
        pytester.makeconftest(APP_CONFTEST)
        pytester.makepyfile(test_app=MFT_TESTS)

        result, report = run_json(pytester)
        result.assert_outcomes(passed=1)
        good = by_test(report)["test_sentiment"]
        assert good["rate"] == 1.0 and good["calls"]["made"] == 16
        assert good["model"].startswith("app.classify.classify@")
        assert good["model_cache"] == "store"

        # A warm cache replays the same app: no call, the same identity in a new process.
        result, report = run_json(pytester)
        result.assert_outcomes(passed=1)
        replay = by_test(report)["test_sentiment"]
        assert replay["calls"] == {"made": 0, "cached": 16} and replay["model"] == good["model"]

        # The PR breaks the prompt, in app/prompts.py only: the gate must see the new app.
        write_app(pytester, BROKEN_PROMPT)
        result, report = run_json(pytester)
        result.assert_outcomes(failed=1)
        broken = by_test(report)["test_sentiment"]
        assert broken["model"] != good["model"] and broken["calls"]["made"] == 16
        assert broken["rate"] == 0.25 and broken["verdict"] == "failed"
        assert server.completed == 32

        # Reverting the prompt is the first app again: its answers are still valid.
        write_app(pytester, GOOD_PROMPT)
        result, report = run_json(pytester)
        result.assert_outcomes(passed=1)
        assert by_test(report)["test_sentiment"]["calls"]["made"] == 0
        assert server.completed == 32


def sampling_server(messages: list[Message] | str, params: dict[str, Any]) -> str:
    """The label of the right option; at temperature > 0 a wrong one for a third of the seeds
    (the per-sample seed the app passes on), so repeated samples differ."""
    assert isinstance(messages, list)
    found = re.search(r"^\W*(\w)\W+\s*right", messages[-1]["content"], re.MULTILINE)
    right = found.group(1) if found else "?"
    if params.get("temperature", 0) > 0 and params.get("seed", 0) % 3 == 0:
        return "A" if right != "A" else "B"
    return right


SAMPLING_CONFTEST = '''
import os

import pytest
from openai import OpenAI

from pytest_reliable import text_model

client = OpenAI(base_url=os.environ["APP_BASE_URL"], api_key="sk-app-test", max_retries=0)


def honours(prompt: str, **kwargs):
    """Passes temperature, max_tokens and seed on; returns the ChatCompletion (with usage)."""
    return client.chat.completions.create(
        model="app-model", messages=[{"role": "user", "content": prompt}], **kwargs)


def deaf(prompt: str) -> str:
    """Runs at its own temperature 0 whatever the test asks."""
    response = client.chat.completions.create(
        model="app-model", temperature=0, messages=[{"role": "user", "content": prompt}])
    return response.choices[0].message.content


@pytest.fixture
def reliable_model(request):
    return text_model(deaf if "deaf" in request.node.name else honours)
'''

SAMPLING_TESTS = '''
import pytest

from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(n=2, mode="fixed", k=4, temperature=0.7)
def test_honours(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(n=2, mode="fixed", k=4, temperature=0.7)
def test_deaf(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''.format(dataset=[
    {"question": f"Question {i}?", "choices": ["wrong one", "right answer", "wrong two"],
     "answer": 1} for i in range(12)])


def test_sampling_parameters_and_usage_pass_through_the_app(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedServer(sampling_server) as server:
        monkeypatch.setenv("APP_BASE_URL", server.base_url)
        pytester.makeconftest(SAMPLING_CONFTEST)
        pytester.makepyfile(test_sampling=SAMPLING_TESTS)
        pricing = pytester.path / "pricing.yaml"
        pricing.write_text("models:\n  'conftest.honours@*': {input: 1.0, output: 2.0}\n")
        result, report = run_json(pytester, f"--reliable-pricing={pricing}")
        result.assert_outcomes(passed=2)
        tests = by_test(report)
        honours, deaf = tests["test_honours"], tests["test_deaf"]
        # T=0.7 reached the server with a seed per sample: the k samples differ.
        assert honours["pass_hat_k"] < honours["pass_at_1"] < honours["pass_at_k"] == 1.0
        assert not any("ignores the temperature" in note for note in honours["notes"])
        # The usage the server reported priced every call (not estimated).
        assert honours["cost"]["estimated"] is False and honours["cost"]["usd"] > 0
        # The app that runs at its own temperature: identical samples, and a note saying why.
        assert deaf["pass_hat_k"] == deaf["pass_at_1"] == deaf["pass_at_k"] == 1.0
        (note,) = [n for n in deaf["notes"] if "ignores the temperature" in n]
        assert "it takes no temperature=" in note
        result.stdout.fnmatch_lines(["*! test_deaf: k=4 at temperature 0.7: every instance*"])


def test_sampled_usage_is_the_servers_bill(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call paid in the run is priced from the usage the app returned: the run's cost is
    the server's bill to the cent-millionth."""
    with ScriptedServer(sampling_server) as server:
        monkeypatch.setenv("APP_BASE_URL", server.base_url)
        pytester.makeconftest(SAMPLING_CONFTEST)
        pytester.makepyfile(test_sampling=SAMPLING_TESTS)
        pricing = pytester.path / "pricing.yaml"
        pricing.write_text("models:\n  'conftest.*': {input: 1.0, output: 2.0}\n")
        result, report = run_json(pytester, f"--reliable-pricing={pricing}", "-k", "honours")
        result.assert_outcomes(passed=1, deselected=1)
        cost = by_test(report)["test_honours"]["cost"]
        assert cost["estimated"] is False
        assert cost["usd"] == pytest.approx(server.billed_usd(1.0, 2.0), abs=1e-6)
        assert cost["prompt_tokens"] == server.billed["prompt"]


def test_a_wrapper_that_does_not_fit_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('''
import pytest

from pytest_reliable import chat_model


def classify(prompt: str) -> str:
    return "A"


@pytest.fixture
def reliable_model():
    return chat_model(classify)
''')
    pytester.makepyfile(test_wrapper=SAMPLING_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "chat_model(classify): its first parameter `prompt: str`" in text
    assert "use text_model(classify)" in text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    # The run stops at the first: the other test does not start.
    assert re.search(r"\b1 error\b", text) and "2 errors" not in text, text


RUN_SCOPED_CONFTEST = '''
import pytest

from pytest_reliable import text_model

CALLS = []

# An app made from generated code: there is no source file to hash.
namespace = {"CALLS": CALLS}
exec(compile("def app(prompt):\\n    CALLS.append(prompt)\\n    return 'B'\\n",
             "<generated>", "exec"), namespace)


@pytest.fixture
def reliable_model():
    return text_model(namespace["app"])
'''


def test_an_app_without_source_is_reused_within_the_run_only(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUN_SCOPED_CONFTEST)
    pytester.makepyfile(test_run_scoped=SAMPLING_TESTS.replace(", k=4, temperature=0.7", ""))
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2)
    first = by_test(report)
    for entry in first.values():
        assert entry["model_cache"] == "run" and "@run-" in entry["model"]
        assert any("reused within this run only" in note for note in entry["notes"])
    # Within the run the second test is served the first's answers to the prompts they share
    # (temperature 0: the canonical pass) ...
    made = first["test_honours"]["calls"]["made"]
    assert made > 0 and first["test_deaf"]["calls"]["cached"] >= 12
    result.stdout.fnmatch_lines(["*reused within this run only*"])
    # ... and the next run calls again: nothing was stored.
    result, report = run_json(pytester)
    assert by_test(report)["test_honours"]["calls"]["made"] == made
    # Offline replay has nothing to replay for it: a usage error that says what to do.
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--reliable-record=none")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--reliable-record none has nothing to replay" in text and "version=" in text
    assert "Traceback" not in text
