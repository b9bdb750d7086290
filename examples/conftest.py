"""The example gate's data. No model fixture: the embedded SmolLM2-135M-Instruct is the default.

To gate your own model, add a `reliable_model` fixture returning a callable or run with
`--reliable-model NAME --reliable-base-url URL`.
"""

from pathlib import Path

import pytest

from pytest_reliable import Classification, Dataset, MultipleChoice

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def reviews() -> Dataset:
    """60 product reviews written for this project (data/README.md), 30 positive, 30 negative."""
    return Dataset.from_file(DATA / "reviews.jsonl")


@pytest.fixture(scope="session")
def eight_reviews() -> Dataset:
    """The CheckList tests' eight reviews (test_checklist.py says why they stay on these)."""
    return Dataset.from_file(DATA / "sentiment.jsonl")


@pytest.fixture(scope="session")
def sentiment() -> Classification:
    return Classification(labels=["positive", "negative"])


@pytest.fixture(scope="session")
def movies() -> Dataset:
    return Dataset.from_bbh(DATA / "bbh" / "movie_recommendation.json")


@pytest.fixture(scope="session")
def adjectives() -> Dataset:
    """100 real BIG-Bench Hard hyperbaton instances: which adjective order is correct (2 options).
    The model is at chance on them: test_release_gate.py shows the gate refusing it."""
    return Dataset.from_bbh(DATA / "bbh" / "hyperbaton.json")


@pytest.fixture(scope="session")
def multiple_choice() -> MultipleChoice:
    return MultipleChoice()


# -- the release candidate example (test_release_candidate.py) -------------------------------
# Production today: SmolLM2 behind today's system prompt. The candidate: the same model behind a
# new one. Both are plain chat callables over one OpenAI-compatible endpoint; point
# RELEASE_BASE_URL / RELEASE_MODEL at your own server to gate a real deployment.
TODAYS_SYSTEM_PROMPT = "You are a helpful assistant."
NEW_SYSTEM_PROMPT = (
    "You are a film expert. Read every option, then reply with the label of the single best "
    "option and nothing else."
)


@pytest.fixture(scope="session")
def release_endpoint():
    """(base_url, model name): RELEASE_BASE_URL/RELEASE_MODEL, else the embedded SmolLM2 started
    for this session (and stopped at its end)."""
    import os

    if os.environ.get("RELEASE_BASE_URL"):
        yield os.environ["RELEASE_BASE_URL"], os.environ.get("RELEASE_MODEL", "default")
        return
    from pytest_reliable.models.local import LOCAL_MODEL_NAME, LocalModelServer

    with LocalModelServer() as server:
        yield server.base_url, LOCAL_MODEL_NAME


def behind_system_prompt(endpoint, system_prompt: str):
    """A chat model: the app's system prompt first (a variant's own system message after it)."""
    import hashlib
    import os

    from openai import OpenAI

    from pytest_reliable import chat_model

    base_url, model = endpoint
    client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "sk-local"),
                    max_retries=0)

    def answer(messages: list) -> str:
        variant_system = [m["content"] for m in messages if m["role"] == "system"]
        system = "\n\n".join([system_prompt, *variant_system])
        rest = [m for m in messages if m["role"] != "system"]
        reply = client.chat.completions.create(
            model=model, messages=[{"role": "system", "content": system}, *rest],
            temperature=0.0, max_tokens=32,
        )
        return reply.choices[0].message.content or ""

    # The identity names the model and the prompt: editing the prompt invalidates cached answers.
    prompt_hash = hashlib.sha256(system_prompt.encode()).hexdigest()[:8]
    return chat_model(answer, id=f"{model}+system:{prompt_hash}")


@pytest.fixture(scope="session")
def production_app(release_endpoint):
    return behind_system_prompt(release_endpoint, TODAYS_SYSTEM_PROMPT)


@pytest.fixture(scope="session")
def candidate_app(release_endpoint):
    return behind_system_prompt(release_endpoint, NEW_SYSTEM_PROMPT)
