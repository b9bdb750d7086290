"""CheckList: built-in perturbations, INV / DIR / MFT runners, result messages and JSON fields."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable import checklist
from pytest_reliable.checklist import (
    ChecklistResult,
    Perturbation,
    Prediction,
    resolve_perturbation,
    run_directional,
    run_invariance,
    run_mft,
    stable_hash,
)
from pytest_reliable.stats import wilson_interval

INV_NAMES = ["typos", "synonyms", "names", "locations", "numbers", "punctuation", "whitespace",
             "casing", "contractions", "neutral_phrase"]
DIR_NAMES = ["negation", "intensify"]

SENTENCES = [
    "The movie was great.",
    "I loved the film, and the ending was beautiful!",
    "She likes the big house near the station",
    "John bought a quick lunch in Paris on 12 May.",
    "Mary and David are travelling to Germany next week",
    "The service is slow but the food is good.",
    "We are happy with our purchase",
    "I don't think the story is interesting.",
    "They weren't at the concert in Berlin",
    "It is a small shop with 3 friendly workers.",
    "You're going to enjoy this trip, Sarah!",
    "The children often watch movies on the couch",
    "The staff were rude and the room was dirty",
    "I can't recommend this hotel to anyone",
    "He has lived in Canada for 20 years",
    "This phone is expensive, but it works well.",
    "We will begin the journey tomorrow",
    "Emily said the road was almost empty",
    "Nobody answered my question about the price",
    "I have seen better movies than this one",
    "What a terrible day at the office.",
    "My car needs a new engine",
]

ANTONYM_PAIRS = [
    ("good", "bad"), ("great", "terrible"), ("love", "hate"), ("loved", "hated"),
    ("like", "dislike"), ("happy", "sad"), ("big", "small"), ("large", "small"),
    ("quick", "slow"), ("fast", "slow"), ("expensive", "cheap"), ("friendly", "rude"),
    ("clean", "dirty"), ("beautiful", "ugly"), ("interesting", "boring"), ("better", "worse"),
    ("best", "worst"), ("buy", "sell"), ("bought", "sold"), ("begin", "end"), ("start", "finish"),
    ("always", "never"), ("often", "rarely"), ("new", "old"), ("empty", "full"),
    ("near", "far"), ("well", "badly"), ("enjoy", "hate"), ("can", "cannot"),
]
POLARITY_WORDS = {"good", "bad", "great", "terrible", "awful", "love", "hate", "like", "dislike",
                  "happy", "sad", "best", "worst", "nice", "poor", "excellent", "amazing",
                  "horrible", "not", "no", "never"}


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower().replace("\u2019", "'"))


def negation_count(text: str) -> int:
    return sum(
        1 for t in tokens(text)
        if t in {"not", "no", "never", "nor", "cannot", "nobody", "nothing", "none"}
        or t.endswith("n't")
    )


def rng(seed: int = 0, name: str = "x", index: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, stable_hash(name), index])


def apply(name: str, text: str, seed: int = 0, kind: str = "directional") -> list[dict[str, Any]]:
    return resolve_perturbation(name, kind=kind)({"text": text}, rng(seed, name))


def one(name: str, text: str, seed: int = 0) -> str | None:
    out = apply(name, text, seed)
    assert len(out) <= 1
    return out[0]["text"] if out else None


# ---------------------------------------------------------------------------------------------
# Perturbations
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", INV_NAMES + DIR_NAMES)
def test_perturbations_are_deterministic_for_a_seed(name: str) -> None:
    perturbation = resolve_perturbation(name, kind="directional")
    for index, text in enumerate(SENTENCES):
        example = {"text": text, "label": "x"}
        first = perturbation(example, rng(7, name, index))
        second = perturbation(example, rng(7, name, index))
        assert first == second
        assert example == {"text": text, "label": "x"}  # the input is not mutated
        for out in first:
            assert out["label"] == "x"
            assert out["text"] != text


@pytest.mark.parametrize("name", INV_NAMES)
def test_invariance_perturbations_apply_to_most_sentences(name: str) -> None:
    applied = sum(bool(apply(name, text, seed)) for text in SENTENCES for seed in range(3))
    assert applied >= 3, name


@pytest.mark.parametrize("name", INV_NAMES)
def test_invariance_perturbations_never_add_a_negator_or_an_antonym(name: str) -> None:
    antonyms = {(a, b) for a, b in ANTONYM_PAIRS} | {(b, a) for a, b in ANTONYM_PAIRS}
    for seed in range(8):
        for text in SENTENCES:
            for out in apply(name, text, seed, kind="invariance"):
                new = out["text"]
                assert negation_count(new) == negation_count(text), (name, text, new)
                before, after = set(tokens(text)), set(tokens(new))
                for removed in before - after:
                    for added in after - before:
                        assert (removed, added) not in antonyms, (name, text, new)


def test_synonym_lexicon_is_polarity_free_and_a_bijection() -> None:
    words = [w for pair in checklist.SYNONYM_PAIRS for w in pair]
    assert len(words) == len(set(words))
    antonym_words = {w for pair in ANTONYM_PAIRS for w in pair}
    for a, b in checklist.SYNONYM_PAIRS:
        assert (a, b) not in ANTONYM_PAIRS and (b, a) not in ANTONYM_PAIRS
        assert a not in POLARITY_WORDS and b not in POLARITY_WORDS
        assert not ({a, b} <= antonym_words and (a, b) in ANTONYM_PAIRS)


def test_synonyms_keep_case_and_article() -> None:
    assert one("synonyms", "The movie was long") == "The film was long"
    assert one("synonyms", "MOVIE night") == "FILM night"
    assert one("synonyms", "An answer came") == "A reply came"


def test_typos_swap_inner_letters_and_spare_negators() -> None:
    text = "Nothing is not wrong with this wonderful machine"
    for seed in range(20):
        new = one("typos", text, seed)
        assert new is not None
        assert "not" in tokens(new) and "nothing" in tokens(new)
        old_words, new_words = text.split(), new.split()
        changed = [(a, b) for a, b in zip(old_words, new_words) if a != b]
        assert 1 <= len(changed) <= 2
        for a, b in changed:
            assert a[0] == b[0] and a[-1] == b[-1] and sorted(a) == sorted(b)
    assert one("typos", "I am ok") is None


def test_names_locations_numbers() -> None:
    new = one("names", "John called John's sister")
    assert new is not None and "John" not in new
    swapped = new.split()[0]
    assert swapped in checklist.FIRST_NAMES[0] and new == f"{swapped} called {swapped}'s sister"
    assert one("names", "nobody here") is None
    city = one("locations", "I flew to Paris yesterday")
    assert city is not None and city.split()[3] in checklist.CITIES and "Paris" not in city
    country = one("locations", "She moved to Germany")
    assert country is not None and country.split()[-1] in checklist.COUNTRIES
    for seed in range(10):
        changed = one("numbers", "I bought 12 apples", seed)
        assert changed is not None
        value = int(changed.split()[2])
        assert value != 12 and abs(value - 12) <= 3
    assert one("numbers", "no digits here") is None
    assert one("numbers", "pi is 3.14") is None


def test_punctuation_whitespace_casing() -> None:
    assert one("punctuation", "Great food.") == "Great food"
    assert one("punctuation", "Great food") == "Great food."
    assert one("punctuation", "???") is None
    for seed in range(5):
        new = one("whitespace", "a b c", seed)
        assert new in {"a  b c", "a b  c", "a b c "}
        assert one("casing", "Hello There", seed) in {"hello there", "HELLO THERE"}
    assert one("casing", "123") is None
    assert one("whitespace", "   ") is None


def test_contractions_round_trip() -> None:
    contracted = ["I don't like it", "They weren't there", "We're sure it isn't broken",
                  "You can't be serious", "I'm sure they won't mind", "She doesn't care",
                  "I've seen it", "We'll see"]
    for text in contracted:
        expanded = one("contractions", text)
        assert expanded is not None and "'" not in expanded
        assert one("contractions", expanded) == text
    assert one("contractions", "I DON'T KNOW") == "I DO NOT KNOW"
    assert one("contractions", "Do not touch") == "Don't touch"
    assert one("contractions", "The cat sat on the mat") is None
    assert one("contractions", "I have a dog") is None  # not "I've a dog"


def test_neutral_phrase() -> None:
    outputs = {one("neutral_phrase", "The room was clean", seed) for seed in range(30)}
    assert outputs <= {"Anyway, the room was clean", "So, the room was clean",
                       "For the record, the room was clean", "The room was clean. That is all.",
                       "The room was clean. End of message."}
    assert len(outputs) >= 3
    assert all("Paris" in (one("neutral_phrase", "Paris is far", seed) or "")
               for seed in range(10))


NEGATION_GOLDEN = {
    "The movie was great.": "The movie was not great.",
    "I loved it": "I did not love it",
    "She likes it": "She does not like it",
    "They are happy": "They are not happy",
    "We will come back": "We will not come back",
    "I love this place": "I do not love this place",
    "He watched the game": "He did not watch the game",
    "I'm happy": "I'm not happy",
    "This is a good phone": "This is not a good phone",
    "I really enjoyed the show": "I did not really enjoy the show",
    "She has a car": "She does not have a car",
    "I have seen it": "I have not seen it",
    "I LOVED IT": "I DID NOT LOVE IT",
}


@pytest.mark.parametrize("text,expected", sorted(NEGATION_GOLDEN.items()))
def test_negation_golden(text: str, expected: str) -> None:
    assert one("negation", text) == expected
    assert one("negation", expected) is None  # never double-negates


@pytest.mark.parametrize("text", [
    "The food is not great", "I don't like it", "Never again", "Nobody came",
    "I can't recommend it", "There is no reason",  # already negated
    "What a day", "Great food!", "Is it good?", "", "12345",  # no pattern
])
def test_negation_not_applicable(text: str) -> None:
    assert apply("negation", text) == []


INTENSIFY_GOLDEN = {
    "The food was good": "The food was {} good",
    "Great service!": "{} great service!",
    "A boring and slow movie": "A {} boring and slow movie",
    "THE ROOM WAS DIRTY": "THE ROOM WAS {} DIRTY",
}


@pytest.mark.parametrize("text,template", sorted(INTENSIFY_GOLDEN.items()))
def test_intensify_golden(text: str, template: str) -> None:
    seen = set()
    for seed in range(20):
        seen.add(one("intensify", text, seed))
    if text.isupper():
        allowed = {template.format("REALLY"), template.format("VERY")}
    elif template.startswith("{}"):
        allowed = {template.format("Really"), template.format("Very")}
    else:
        allowed = {template.format("really"), template.format("very")}
    assert seen == allowed


@pytest.mark.parametrize("text", ["The food was very good", "I ate lunch", "", "really"])
def test_intensify_not_applicable(text: str) -> None:
    assert apply("intensify", text) == []


def test_question_field_and_non_text_examples() -> None:
    perturbation = resolve_perturbation("casing", kind="invariance")
    out = perturbation({"question": "Who won?", "answer": "x"}, rng())
    assert out and out[0]["question"] in {"who won?", "WHO WON?"} and out[0]["answer"] == "x"
    assert perturbation({"image": b"..."}, rng()) == []
    assert perturbation({"text": 3}, rng()) == []


WORDISH = st.lists(
    st.sampled_from(["I", "loved", "the", "movie", "not", "is", "good", "John", "Paris", "12",
                     "don't", "won't", ",", ".", "!", "?", "  ", "\u2019", "I'm", "very",
                     "has", "She", "likes", "a", "huge", "It's", "\n", "ß", "\u0130"]),
    max_size=12,
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.text(max_size=60), WORDISH), seed=st.integers(0, 2**32),
       key=st.sampled_from(["text", "question"]))
def test_perturbations_never_crash(text: str, seed: int, key: str) -> None:
    for name in INV_NAMES + DIR_NAMES:
        out = resolve_perturbation(name, kind="directional")({key: text}, rng(seed, name))
        assert isinstance(out, list) and len(out) <= 1
        for example in out:
            assert isinstance(example[key], str) and example[key] != text


def test_resolve_perturbation() -> None:
    for name in INV_NAMES:
        assert resolve_perturbation(name, kind="invariance").name == name
        assert resolve_perturbation(name, kind="directional").name == name
    for name in DIR_NAMES:
        assert resolve_perturbation(name, kind="directional").name == name
        with pytest.raises(ValueError, match="typos"):
            resolve_perturbation(name, kind="invariance")
    with pytest.raises(ValueError) as info:
        resolve_perturbation("nonsense", kind="directional")
    assert "nonsense" in str(info.value) and "negation" in str(info.value)
    with pytest.raises(ValueError):
        resolve_perturbation("typos", kind="mft")

    def shout(example: dict[str, Any]) -> list[dict[str, Any]]:
        example["text"] = example["text"] + "!!"  # mutating the copy is harmless
        return [example]

    wrapped = resolve_perturbation(shout, kind="invariance")
    assert isinstance(wrapped, Perturbation) and wrapped.name == "shout"
    original = {"text": "hi"}
    assert wrapped(original, rng()) == [{"text": "hi!!"}]
    assert original == {"text": "hi"}
    assert resolve_perturbation(wrapped, kind="invariance") is wrapped
    assert resolve_perturbation(lambda e: None, kind="invariance")({"text": "a"}, rng()) == []


def test_stable_hash_is_process_independent() -> None:
    import zlib

    assert stable_hash("typos") == zlib.crc32(b"typos")


# ---------------------------------------------------------------------------------------------
# Runners with fake batched predictors
# ---------------------------------------------------------------------------------------------
class Batched:
    """A fake batched model: ``fn(text) -> Prediction``; records every batch it receives."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, examples: Sequence[dict[str, Any]]) -> list[Prediction]:
        self.batches.append(list(examples))
        return [self.fn(example.get("text", example.get("question", ""))) for example in examples]


INV_SENTENCES = [
    "The weather today seems pleasant",
    "Students should finish their homework quickly",
    "Several travellers missed the morning train",
    "Doctors recommend drinking plenty water",
    "Gardens bloom beautifully during spring",
    "Engineers designed another bridge yesterday",
]
VOCABULARY = {w.lower() for s in INV_SENTENCES for w in s.split()}


def vocabulary_model(text: str) -> Prediction:
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", text)]
    label = "known" if all(w in VOCABULARY for w in words) else "unknown"
    return Prediction(label, True, f"Answer: {label}")


def examples(texts: Sequence[str]) -> list[dict[str, Any]]:
    return [{"text": t, "label": "known"} for t in texts]


def test_invariance_typos_flip_everything() -> None:
    predict = Batched(vocabulary_model)
    typos = resolve_perturbation("typos", kind="invariance")
    result = run_invariance(examples(INV_SENTENCES), [typos], predict, seed=3, confidence=0.95,
                            tolerance=None, decide="estimate", max_flip_rate=0.0)
    assert isinstance(result, ChecklistResult)
    assert result.kind == "invariance"
    assert result.pairs == 6 and result.rate == 1.0 and len(result.failures) == 6
    assert result.interval == pytest.approx(wilson_interval(6, 6, 0.95))
    assert len(predict.batches) == 2  # one batch of originals, one of perturbed examples
    assert len(predict.batches[0]) == 6 and len(predict.batches[1]) == 6
    assert not result.passed
    assert [c.name for c in result.thresholds] == ["max_flip_rate"]
    assert result.thresholds[0].observed == 1.0 and not result.thresholds[0].passed


def test_invariance_punctuation_never_flips() -> None:
    predict = Batched(vocabulary_model)
    perturbations = [resolve_perturbation(n, kind="invariance")
                     for n in ("punctuation", "whitespace", "casing")]
    result = run_invariance(examples(INV_SENTENCES), perturbations, predict, seed=1,
                            confidence=0.95, tolerance=None, decide="estimate",
                            max_flip_rate=0.0)
    assert result.pairs == 18 and result.rate == 0.0 and result.failures == []
    assert result.passed
    assert len(predict.batches) == 2 and len(predict.batches[1]) == 18


def test_invariance_is_deterministic_per_seed() -> None:
    typos = resolve_perturbation("typos", kind="invariance")
    runs = [run_invariance(examples(INV_SENTENCES), [typos], Batched(vocabulary_model), seed=s,
                           confidence=0.95, tolerance=None, decide="estimate",
                           max_flip_rate=0.0)
            for s in (5, 5, 6)]
    texts = [[f.perturbed for f in r.failures] for r in runs]
    assert texts[0] == texts[1]
    assert texts[0] != texts[2]
    # an example's perturbation does not depend on the other examples or perturbations
    casing = resolve_perturbation("casing", kind="invariance")
    alone = run_invariance(examples(INV_SENTENCES[:1]), [casing, typos],
                           Batched(vocabulary_model), seed=5, confidence=0.95, tolerance=None,
                           decide="estimate", max_flip_rate=0.0)
    assert alone.failures[0].perturbed == runs[0].failures[0].perturbed


def test_invariance_unparsed_handling() -> None:
    def model(text: str) -> Prediction:
        if text.isupper():
            return Prediction(None, False, "???")
        if text.islower():
            return Prediction("known", True, "known")
        return Prediction("known", True, "known")

    casing = resolve_perturbation("casing", kind="invariance")
    result = run_invariance(examples(INV_SENTENCES), [casing], Batched(model), seed=0,
                            confidence=0.95, tolerance=None, decide="estimate",
                            max_flip_rate=1.0)
    uppers = sum((f.perturbed or "").isupper() for f in result.failures)
    assert uppers == len(result.failures) and result.unparsed == uppers
    assert result.rate == uppers / 6

    def unparsed_always(text: str) -> Prediction:
        return Prediction(None, False, "")

    both = run_invariance(examples(INV_SENTENCES), [casing], Batched(unparsed_always), seed=0,
                          confidence=0.95, tolerance=None, decide="estimate",
                          max_flip_rate=0.0)
    assert both.rate == 0.0 and both.unparsed == 12 and both.pairs == 6 and both.passed


def test_invariance_tolerance_for_numbers() -> None:
    def model(text: str) -> Prediction:
        return Prediction(10.0 + 0.01 * len(text), True, str(len(text)))

    whitespace = resolve_perturbation("whitespace", kind="invariance")
    data = examples(INV_SENTENCES)
    strict = run_invariance(data, [whitespace], Batched(model), seed=0, confidence=0.95,
                            tolerance=None, decide="estimate", max_flip_rate=0.0)
    loose = run_invariance(data, [whitespace], Batched(model), seed=0, confidence=0.95,
                           tolerance=0.05, decide="estimate", max_flip_rate=0.0)
    assert strict.rate == 1.0 and loose.rate == 0.0


def test_zero_pairs() -> None:
    predict = Batched(vocabulary_model)
    numbers = resolve_perturbation("numbers", kind="invariance")
    result = run_invariance(examples(INV_SENTENCES), [numbers], predict, seed=0,
                            confidence=0.95, tolerance=None, decide="estimate",
                            max_flip_rate=1.0)
    assert result.pairs == 0 and result.rate == 0.0 and result.interval == (0.0, 1.0)
    assert not result.passed
    assert result.message() == "no example could be perturbed"
    assert predict.batches == []
    negation = resolve_perturbation("negation", kind="directional")
    result = run_directional(examples(["Great food!"]), [negation], predict, expect="flip",
                             seed=0, confidence=0.95, decide="estimate", max_fail_rate=1.0)
    assert result.pairs == 0 and not result.passed
    assert "no example could be perturbed" in result.message()
    assert json.loads(json.dumps(result.as_dict()))["pairs"] == 0
    empty = run_mft([], predict, confidence=0.95, decide="estimate", min_pass=0.0)
    assert empty.pairs == 0 and not empty.passed


def sentiment_model(text: str) -> Prediction:
    words = tokens(text)
    if "gibberish" in words:
        return Prediction(None, False, "I cannot tell")
    label = "negative" if ("not" in words or any(w.endswith("n't") for w in words)) \
        else "positive"
    return Prediction(label, True, f"The sentiment is {label}.")


DIR_SENTENCES = ["The food was great", "I loved the movie", "She likes the hotel",
                 "They are friendly", "We will come back", "Great food!"]


def test_directional_negation_flip() -> None:
    negation = resolve_perturbation("negation", kind="directional")
    predict = Batched(sentiment_model)
    result = run_directional(examples(DIR_SENTENCES), [negation], predict, expect="flip",
                             seed=0, confidence=0.95, decide="estimate", max_fail_rate=0.0)
    assert result.kind == "directional"
    assert result.pairs == 5 and result.rate == 0.0 and result.passed
    assert len(predict.batches) == 2 and len(predict.batches[0]) == 5
    labelled = run_directional(examples(DIR_SENTENCES), [negation], Batched(sentiment_model),
                               expect="negative", seed=0, confidence=0.95, decide="estimate",
                               max_fail_rate=0.0)
    assert labelled.rate == 0.0
    wrong = run_directional(examples(DIR_SENTENCES), [negation], Batched(sentiment_model),
                            expect="positive", seed=0, confidence=0.95, decide="estimate",
                            max_fail_rate=0.0)
    assert wrong.rate == 1.0 and not wrong.passed
    assert wrong.thresholds[0].name == "max_fail_rate"
    relation = run_directional(examples(DIR_SENTENCES), [negation], Batched(sentiment_model),
                               expect=lambda before, after: (before, after) == ("positive",
                                                                                "negative"),
                               seed=0, confidence=0.95, decide="estimate", max_fail_rate=0.0)
    assert relation.rate == 0.0


def test_directional_unparsed_after_fails() -> None:
    def gibberish(example: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**example, "text": example["text"] + " gibberish"}]

    result = run_directional(examples(DIR_SENTENCES[:3]),
                             [resolve_perturbation(gibberish, kind="directional")],
                             Batched(sentiment_model), expect="flip", seed=0, confidence=0.95,
                             decide="estimate", max_fail_rate=0.0)
    assert result.rate == 1.0 and result.unparsed == 3
    assert result.failures[0].after == "I cannot tell"


def test_directional_increase_decrease() -> None:
    def add_one(example: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**example, "text": example["text"] + " plus one"}]

    def model(text: str) -> Prediction:
        value = 5 + text.count("plus one")
        return Prediction(value, True, str(value))

    data = examples(["a", "b", "c"])
    add = resolve_perturbation(add_one, kind="directional")
    up = run_directional(data, [add], Batched(model), expect="increase", seed=0,
                         confidence=0.95, decide="estimate", max_fail_rate=0.0)
    down = run_directional(data, [add], Batched(model), expect="decrease", seed=0,
                           confidence=0.95, decide="estimate", max_fail_rate=0.0)
    assert up.rate == 0.0 and down.rate == 1.0
    with pytest.raises(ValueError, match="expect='increase' needs numeric predictions"):
        run_directional(data, [add], Batched(sentiment_model), expect="increase", seed=0,
                        confidence=0.95, decide="estimate", max_fail_rate=0.0)


def test_mft_pass_rate() -> None:
    data = [{"text": "I loved it", "label": "positive"},
            {"text": "I did not love it", "label": "negative"},
            {"text": "It was not bad", "label": "positive"},
            {"text": "gibberish", "label": "positive"}]
    predict = Batched(sentiment_model)
    result = run_mft(data, predict, confidence=0.9, decide="estimate", min_pass=0.9)
    assert result.kind == "mft" and result.pairs == 4 and result.rate == 0.5
    assert result.unparsed == 1 and len(predict.batches) == 1
    assert result.interval == pytest.approx(wilson_interval(2, 4, 0.9))
    assert not result.passed and result.thresholds[0].name == "min_pass"
    assert "pass rate 0.50" in result.message() and "90% Wilson" in result.message()
    assert run_mft(data, Batched(sentiment_model), confidence=0.95, decide="estimate",
                   min_pass=0.5).passed
    no_threshold = run_mft(data, Batched(sentiment_model), confidence=0.95,
                           decide="estimate")
    assert no_threshold.thresholds == [] and no_threshold.passed
    custom = run_mft(data, Batched(sentiment_model), confidence=0.95, decide="estimate",
                     min_pass=1.0, expected=lambda e: "positive")
    assert custom.rate == 0.25
    with pytest.raises(ValueError, match="label"):
        run_mft([{"text": "x"}], Batched(sentiment_model), confidence=0.95,
                decide="estimate", min_pass=0.5)


@pytest.mark.parametrize(
    ("decide", "passes_01", "passes_085", "passes_095"),
    [
        # pass-on-evidence: the one-sided upper (lower) bound must clear the limit.
        ("pass-on-evidence", False, True, False),
        # fail-on-evidence: fails only where the data show a breach.
        ("fail-on-evidence", True, True, True),
        # estimate: the point estimate against the limit.
        ("estimate", True, True, True),
    ],
)
def test_thresholds_follow_the_policy(decide: str, passes_01: bool, passes_085: bool,
                                      passes_095: bool) -> None:
    perturbations = [resolve_perturbation("punctuation", kind="invariance")]
    result = run_invariance(examples(INV_SENTENCES), perturbations, Batched(vocabulary_model),
                            seed=0, confidence=0.95, decide=decide, max_flip_rate=0.1)
    (check,) = result.thresholds
    assert result.rate == 0.0 and result.pairs == 6 and check.decide == decide
    assert result.passed is passes_01  # 6 clean pairs cannot vouch for <= 10%
    if decide == "pass-on-evidence":
        # The exact one-sided 95% upper bound of 0 flips in 6 pairs: 1 - 0.05^(1/6).
        assert check.bound == pytest.approx(1 - 0.05 ** (1 / 6))
        assert "upper bound" in result.message() and "Clopper-Pearson" in check.method
    data = [{"text": "I loved it", "label": "positive"}] * 30
    mft = run_mft(data, Batched(sentiment_model), confidence=0.95, decide=decide,
                  min_pass=0.85)
    assert mft.passed is passes_085  # exact one-sided lower bound 0.05^(1/30) = 0.905 >= 0.85
    strict = run_mft(data, Batched(sentiment_model), confidence=0.95, decide=decide,
                     min_pass=0.95)
    assert strict.rate == 1.0 and strict.passed is passes_095  # 0.905 < 0.95
    assert result.as_dict()["decide"] == decide


@pytest.mark.parametrize("decide", ["pass-on-evidence", "fail-on-evidence", "estimate"])
def test_zero_tolerance_is_exact_under_every_policy(decide: str) -> None:
    """max_flip_rate=0.0 / max_fail_rate=0.0 / min_pass=1.0: no bound on a finite sample reaches
    0 (or 1), so these are decided on the pairs at hand: pass iff nothing is bad."""
    punctuation = [resolve_perturbation("punctuation", kind="invariance")]
    clean = run_invariance(examples(INV_SENTENCES), punctuation, Batched(vocabulary_model),
                           seed=0, decide=decide, max_flip_rate=0.0)
    assert clean.rate == 0.0 and clean.passed
    assert clean.thresholds[0].bound == 0.0 and "zero tolerance" in str(clean.thresholds[0].method)
    typos = [resolve_perturbation("typos", kind="invariance")]
    flipped = run_invariance(examples(INV_SENTENCES), typos, Batched(vocabulary_model), seed=3,
                             decide=decide, max_flip_rate=0.0)
    assert flipped.rate > 0 and not flipped.passed
    data = [{"text": "I loved it", "label": "positive"}] * 3
    assert run_mft(data, Batched(sentiment_model), decide=decide, min_pass=1.0).passed
    one_wrong = data + [{"text": "I loved it", "label": "negative"}]
    assert not run_mft(one_wrong, Batched(sentiment_model), decide=decide, min_pass=1.0).passed


def test_several_pairs_of_one_example_are_clustered() -> None:
    """Two perturbations of each example: the bound is on the examples (pairs of one example are
    correlated), and one pair per example gives the exact binomial bound."""
    both = [resolve_perturbation(name, kind="invariance") for name in ("punctuation", "casing")]
    result = run_invariance(examples(INV_SENTENCES), both, Batched(vocabulary_model), seed=0,
                            max_flip_rate=0.5)
    assert result.pairs == 2 * len(INV_SENTENCES)
    # Every example gives two pairs: the bound is on the examples' own rates (Gaffke's, exact
    # when they are all 0 or 1), not on 12 independent pairs.
    assert "6 examples' rates (2 pairs each)" in str(result.thresholds[0].method)


def test_message_and_as_dict() -> None:
    typos = resolve_perturbation("typos", kind="invariance")
    result = run_invariance(examples(INV_SENTENCES), [typos], Batched(vocabulary_model), seed=3,
                            confidence=0.95, tolerance=None, decide="estimate",
                            max_flip_rate=0.0)
    message = result.message()
    low, high = result.interval
    assert f"flip rate 1.00 [{low:.2f}, {high:.2f}] over 6 pairs (95% Wilson)" in message
    assert result.thresholds[0].describe() in message
    shown = result.failures[:3]
    for failure in shown:
        assert repr(failure.original) in message and repr(failure.perturbed) in message
        assert failure.before == "Answer: known" and failure.after == "Answer: unknown"
    assert repr(result.failures[3].original) not in message
    assert "'Answer: known'" in message and "'Answer: unknown'" in message

    data = result.as_dict()
    assert set(data) == {"kind", "rate", "interval", "pairs", "unparsed", "failures",
                         "thresholds", "decide"}
    assert data["kind"] == "invariance" and data["rate"] == 1.0 and data["pairs"] == 6
    assert data["interval"] == [low, high] and data["unparsed"] == 0
    assert len(data["failures"]) == 3 and len(result.failures) == 6
    assert set(data["failures"][0]) == {"original", "perturbed", "before", "after"}
    assert data["failures"][0]["original"] == INV_SENTENCES[0]
    assert data["decide"] == "estimate"
    assert data["thresholds"] == [{"name": "max_flip_rate", "limit": 0.0, "observed": 1.0,
                                   "bound": 1.0, "decide": "estimate",
                                   "method": data["thresholds"][0]["method"], "passed": False}]
    assert "zero tolerance" in data["thresholds"][0]["method"]
    assert json.loads(json.dumps(data)) == data


def test_passing_message_has_no_failure_section() -> None:
    punctuation = resolve_perturbation("punctuation", kind="invariance")
    result = run_invariance(examples(INV_SENTENCES), [punctuation], Batched(vocabulary_model),
                            seed=0, confidence=0.99, tolerance=None, decide="estimate",
                            max_flip_rate=0.0)
    assert result.message().startswith("flip rate 0.00 [0.00, ")
    assert "99% Wilson" in result.message() and "failed" not in result.message()


@settings(max_examples=150, deadline=None)
@given(text=WORDISH, seed=st.integers(0, 2**32), name=st.sampled_from(INV_NAMES))
def test_invariance_perturbations_keep_the_negation_count(text: str, seed: int,
                                                          name: str) -> None:
    for example in apply(name, text, seed, kind="invariance"):
        assert negation_count(example["text"]) == negation_count(text), (name, text, example)


def test_directional_needs_an_expectation_and_question_field_works() -> None:
    negation = resolve_perturbation("negation", kind="directional")
    with pytest.raises(ValueError, match="expect"):
        run_directional(examples(DIR_SENTENCES), [negation], Batched(sentiment_model),
                        expect=None, seed=0, confidence=0.95, decide="estimate",
                        max_fail_rate=0.0)
    questions = [{"question": text} for text in DIR_SENTENCES]
    result = run_directional(questions, [negation], Batched(sentiment_model), expect="flip",
                             seed=0, confidence=0.95, decide="estimate", max_fail_rate=0.0)
    assert result.pairs == 5 and result.rate == 0.0


def test_predict_length_mismatch_is_an_error() -> None:
    casing = resolve_perturbation("casing", kind="invariance")
    with pytest.raises(ValueError, match="predictions"):
        run_invariance(examples(INV_SENTENCES), [casing], lambda batch: [], seed=0,
                       confidence=0.95, tolerance=None, decide="estimate", max_flip_rate=0.0)
