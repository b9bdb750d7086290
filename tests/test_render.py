"""Golden renderings (exact strings) and the rendering contract."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable import strategies
from pytest_reliable.plan.render import render
from pytest_reliable.space import Space, Variant
from pytest_reliable.tasks.builtin import Classification, Generation, MultipleChoice

MC = MultipleChoice()
EXAMPLE = {"question": "What is 2 + 2?", "choices": ["3", "4", "5"], "answer": 1}
DEMO = {"question": "What is 1 + 1?", "choices": ["2", "1", "0"], "answer": 0}
SPACE = Space.from_mapping("golden", {
    "instruction": ["Pick the right option."],
    "field_marker": ["Question:", "Q:", ""],
    "answer_sentinel": ["Answer:", ""],
    "casing": ["identity", "upper", "lower"],
    "field_spacing": ["\n", "\n\n", " "],
    "enumerator": ["upper", "lower", "number", "roman", "greek", "keyboard", "unicode_roman",
                   "lower_roman"],
    "wrapper": ["({})", "{}.", "{})", "[{}]"],
    "option_separator": ["\n", "; ", " | "],
    "option_order": "permute",
    "system_message": [None, "You are a careful assistant."],
    "few_shot": {"count": [0, 1], "pool": 2},
})


def test_golden_canonical() -> None:
    prompt = render(SPACE, SPACE.canonical_variant(), EXAMPLE, MC, [])
    assert prompt.messages == ({
        "role": "user",
        "content": "Pick the right option.\nQuestion: What is 2 + 2?\n(A) 3\n(B) 4\n(C) 5\nAnswer:",
    },)
    assert prompt.labels == ("A", "B", "C")
    assert prompt.displayed == (0, 1, 2)
    assert prompt.gold_position == 1


def test_golden_permuted_lower_roman_semicolons_upper_casing() -> None:
    variant = Variant(instruction="Pick the right option.", field_marker="Q:", casing="upper",
                      answer_sentinel="Answer:", field_spacing="\n\n", enumerator="roman",
                      wrapper="{}.", option_separator="; ", order=(3, 2, 0, 1))
    prompt = render(SPACE, variant, EXAMPLE, MC, [])
    assert prompt.messages[0]["content"] == (
        "Pick the right option.\n\nQ: What is 2 + 2?\n\nI. 5; II. 3; III. 4\n\nANSWER:")
    assert prompt.displayed == (2, 0, 1)
    assert prompt.gold_position == 2
    assert prompt.labels == ("I", "II", "III")


def test_golden_system_message_no_marker_no_sentinel_spaces() -> None:
    variant = Variant(instruction="Pick the right option.", field_marker="", answer_sentinel="",
                      field_spacing=" ", enumerator="greek", wrapper="[{}]",
                      option_separator=" | ", system_message="You are a careful assistant.")
    prompt = render(SPACE, variant, EXAMPLE, MC, [])
    assert prompt.messages == (
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Pick the right option. What is 2 + 2? [α] 3 | [β] 4 | [γ] 5"},
    )


def test_golden_few_shot_inline() -> None:
    variant = Variant(instruction="Pick the right option.", enumerator="number", wrapper="{})",
                      few_shot=1, order=(1, 0, 2))
    prompt = render(SPACE, variant, EXAMPLE, MC, [DEMO])
    assert prompt.user == (
        "Pick the right option.\n"
        "Question: What is 1 + 1?\n1) 1\n2) 2\n3) 0\nAnswer: 2)\n\n"
        "Question: What is 2 + 2?\n1) 4\n2) 3\n3) 5\nAnswer:"
    )
    assert prompt.gold_position == 0


def test_golden_default_instruction_and_keyboard() -> None:
    space = Space.from_mapping("k", {"enumerator": ["keyboard"]})
    prompt = render(space, space.canonical_variant(), EXAMPLE, MC, [])
    assert prompt.user == ("Answer with the label of the correct option.\nQuestion: What is "
                           "2 + 2?\n(!) 3\n(@) 4\n(#) 5\nAnswer:")


def test_golden_classification() -> None:
    task = Classification(labels=["positive", "negative"])
    example = {"text": "Great food.", "label": "negative"}
    space = Space.from_mapping("c", {"instruction": ["What is the sentiment?"],
                                     "enumerator": ["number"]})
    prompt = render(space, space.canonical_variant(), example, task, [])
    assert prompt.user == "What is the sentiment?\nQuestion: Great food.\n(1) positive\n(2) negative\nAnswer:"
    assert prompt.gold_position == 1
    plain = Space.plain()
    assert render(plain, plain.canonical_variant(), example, task, []).user == (
        "Great food.\nAnswer with one of these labels: positive, negative.")
    templated = Classification(labels=["positive", "negative"], template="Review: {text}\nSentiment:")
    assert render(plain, plain.canonical_variant(), example, templated, []).messages == (
        {"role": "user", "content": "Review: Great food.\nSentiment:"},)


def test_golden_generation() -> None:
    task = Generation()
    space = Space.from_mapping("g", {"field_marker": ["Q:"], "few_shot": {"count": [1]}})
    prompt = render(space, space.canonical_variant(),
                    {"question": "Capital of France?", "reference": "Paris"}, task,
                    [{"question": "Capital of Italy?", "reference": "Rome"}])
    assert prompt.user == ("Answer the question.\nQ: Capital of Italy?\nAnswer: Rome\n\n"
                           "Q: Capital of France?\nAnswer:")
    assert prompt.labels == () and prompt.gold_position is None


@settings(max_examples=150, deadline=None)
@given(data=st.data(), example=strategies.mcq_examples(max_options=4))
def test_rendering_is_a_permutation_and_gold_is_tracked(data: st.DataObject,
                                                        example: dict) -> None:
    variant = data.draw(strategies.variants(SPACE, n_options=4))
    prompt = render(SPACE, variant, example, MC, [])
    n = len(example["choices"])
    assert sorted(prompt.displayed) == list(range(n))
    assert prompt.gold_position is not None
    assert prompt.displayed[prompt.gold_position] == example["answer"]
    user = prompt.user
    for k, j in enumerate(prompt.displayed):
        assert variant.wrapper.format(prompt.labels[k]) + " " + example["choices"][j] in user
    if variant.sentinel:
        assert user.endswith(variant.sentinel)
    assert (prompt.messages[0]["role"] == "system") == (variant.system_message is not None)
