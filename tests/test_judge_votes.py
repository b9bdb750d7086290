"""The judge's reply grammar (`pytest_reliable.tasks.judge_votes`): the verdict the prompt asked
for, read with negation, never guessed from a keyword or a stray number."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_reliable import Judge, JudgeTask, text_model
from pytest_reliable.tasks.judge_votes import read_choice, read_one_to_five, read_pass_fail

PASS, FAIL = 1.0, 0.0


@pytest.mark.parametrize(("reply", "vote"), [
    # what the prompt asks for ("Reply with PASS or FAIL only")
    ("PASS", PASS), ("FAIL", FAIL), ("pass", PASS), ("Fail.", FAIL), ("  **PASS**\n", PASS),
    ("`FAIL`", FAIL), ('"PASS"', PASS),
    # negation: the verdict, not a keyword anywhere in the text
    ("This answer does not pass.", FAIL), ("not a pass", FAIL), ("It is not quite a pass.", FAIL),
    ("It doesn't pass", FAIL), ("No pass.", FAIL), ("fails", FAIL), ("The answer failed.", FAIL),
    ("Failure.", FAIL), ("It fails to pass the rubric.", FAIL), ("It does not fail.", PASS),
    ("It passes.", PASS), ("No doubt it passes.", PASS), ("Pass - the number matches", PASS),
    # a labelled verdict decides; the reasoning around it does not count
    ("Verdict: PASS", PASS), ("Final verdict - FAIL", FAIL), ("Grade (PASS or FAIL): PASS", PASS),
    ("The answer fails to add units. Verdict: PASS", PASS), ("Verdict:\nFAIL", FAIL),
    ("The verdict is not a pass.", FAIL), ("The result is correct, so PASS", PASS),
    ("**Verdict:** FAIL (it would pass with the units)", FAIL),
    # hedges and questions assert nothing
    ("It would pass if it said 6. FAIL.", FAIL), ("It might fail. PASS", PASS),
    # ambiguous or no verdict: no vote
    ("PASS or FAIL?", None), ("PASS/FAIL", None), ("PASS and FAIL", None), ("I cannot say", None),
    ("PASS. The answer does not pass.", None), ("Verdict: PASS\nVerdict: FAIL", None),
    ("Verdict: PASS or FAIL", None), ("I am not sure it passes", None), ("Does it pass?", None),
    ("Grade (PASS or FAIL):", None), ("", None), ("passage bypass compass", None),
])
def test_pass_fail_replies(reply: str, vote: float | None) -> None:
    assert read_pass_fail(reply) == vote


@pytest.mark.parametrize(("reply", "grade"), [
    ("4", 4), ("4.", 4), ("**4**", 4), ("4.0", 4), ("5", 5), ("1", 1), ("4/5", 4),
    ("4 out of 5", 4), ("Score: 1/5", 1), ("Grade (1-5): 4", 4), ("Rating: 4 out of 5", 4),
    ("I would give it a score of 4.", 4), ("4 - mostly right", 4),
    ("4. The answer is mostly right", 4), ("3\nScore: 3", 3), ("The answer is wrong. Score: 2", 2),
    # off the scale, ranges, several grades, a number in a sentence: no vote
    ("0", None), ("7", None), ("3.5", None), ("Score: 8/10", None), ("3 or 4", None),
    ("3-4", None), ("1-5", None), ("Score: 3-4", None), ("4/5, maybe 3/5", None),
    ("Score: 4\nScore: 5", None), ("The answer 4 is right", None), ("2 + 2 = 4, so 5", None),
    ("", None), ("four", None),
])
def test_one_to_five_replies(reply: str, grade: int | None) -> None:
    assert read_one_to_five(reply) == (None if grade is None else (grade - 1) / 4)


@pytest.mark.parametrize(("reply", "choice"), [
    ("1", 1), ("2", 2), ("2.", 2), ("**2**", 2), ("Answer 2", 2), ("Answer 2 is better", 2),
    ("answer 1 is worse", 2), ("Better answer: 2", 2), ("The better answer is Answer 1", 1),
    ("Answer 2 is better than answer 1", 2), ("2 (more precise)", 2),
    ("1 or 2", None), ("Better answer: 1 or 2", None), ("Both are fine", None), ("1.5", None),
    ("12", None), ("Answer 1: Paris\nAnswer 2: Lyon", None), ("Answer 1 is not better", None),
    ("", None),
])
def test_pairwise_replies(reply: str, choice: int | None) -> None:
    assert read_choice(reply) == choice


# -- generated replies ----------------------------------------------------------------------------
NEUTRAL = st.sampled_from([
    "", "The answer states the number.", "It matches the reference", "The reference is 6",
    "Answer: 42", "I checked the arithmetic.", "Units are missing,", "Reasoning: short",
])
LABELS = st.sampled_from(["Verdict", "Final verdict", "Grade", "Decision", "Final grade",
                          "Grade (PASS or FAIL)", "My verdict", "Assessment"])
SEPARATORS = st.sampled_from([": ", ":", " - ", " = ", " is ", ":\n"])


def cased(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from([word, word.upper(), word.capitalize()])


def stated(verdict: float) -> st.SearchStrategy[str]:
    """A clause asserting ``verdict``: the word itself, inflected, or the other word negated."""
    yes, no = ("pass", "fail") if verdict == PASS else ("fail", "pass")
    plain = st.one_of(cased(yes), cased(yes + ("es" if yes == "pass" else "s")),
                      cased(yes + "ed"))
    negated = st.builds(lambda neg, word: f"{neg} {word}",
                        st.sampled_from(["does not", "doesn't", "did not", "is not a",
                                         "would not", "cannot", "not a"]), cased(no))
    return st.one_of(plain, negated)


def wrapped(text: str, mark: str, pad: str, end: str) -> str:
    return f"{pad}{mark}{text}{mark}{end}{pad}"


MARKS = st.sampled_from(["", "**", "`", "_"])
PADS = st.sampled_from(["", " ", "\n", "  \n "])
ENDS = st.sampled_from(["", ".", "!", "\n"])


@given(st.sampled_from([PASS, FAIL]).flatmap(
    lambda v: st.tuples(st.just(v), stated(v), MARKS, PADS, ENDS, NEUTRAL)))
def test_a_stated_verdict_is_read_with_its_negation(case: tuple[float, str, str, str, str, str]
                                                     ) -> None:
    verdict, clause, mark, pad, end, after = case
    reply = wrapped(clause, mark, pad, end) + (" " + after if after else "")
    assert read_pass_fail(reply) == verdict
    assert read_pass_fail(reply.upper()) == verdict == read_pass_fail(reply.lower())


@given(st.sampled_from([PASS, FAIL]).flatmap(
    lambda v: st.tuples(st.just(v), LABELS, SEPARATORS, stated(v), stated(1 - v), NEUTRAL)))
def test_a_labelled_verdict_decides_over_the_reasoning(
        case: tuple[float, str, str, str, str, str]) -> None:
    verdict, label, separator, clause, reasoning, neutral = case
    reply = f"{neutral} The answer {reasoning}.\n{label}{separator}{clause}"
    assert read_pass_fail(reply) == verdict


@given(stated(PASS), stated(FAIL), st.sampled_from([" and ", ". ", ", but ", "; ", "\n", " or "]),
       st.booleans())
def test_a_reply_asserting_both_verdicts_is_no_vote(passing: str, failing: str, joiner: str,
                                                    swap: bool) -> None:
    first, second = (failing, passing) if swap else (passing, failing)
    assert read_pass_fail(f"{first}{joiner}{second}") is None
    assert read_pass_fail(f"Verdict: {first}\nVerdict: {second}") is None


@given(st.sampled_from([PASS, FAIL]).flatmap(stated),
       st.sampled_from(["Does it {}?", "It might {}", "Whether it {} is unclear", "If it {}"]))
def test_a_question_or_a_hedge_is_no_vote(clause: str, frame: str) -> None:
    assert read_pass_fail(frame.format(clause)) is None


@given(st.integers(1, 5), st.sampled_from(["{}", "{}/5", "{} out of 5", "Score: {}",
                                           "Grade (1-5): {}", "Rating: {}/5", "{}.", "{} - ok"]),
       MARKS, PADS, NEUTRAL)
def test_a_grade_on_the_scale_is_read(grade: int, form: str, mark: str, pad: str,
                                      neutral: str) -> None:
    reply = wrapped(form.format(grade), mark, pad, "")
    assert read_one_to_five(reply) == (grade - 1) / 4
    if "Score" in form or "Rating" in form or "Grade" in form:  # a label reads past reasoning
        assert read_one_to_five(f"{neutral}\n{reply}") == (grade - 1) / 4


@given(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["{} or {}", "{}-{}", "{} to {}",
                                                                "Score: {} or {}"]))
def test_two_grades_or_a_grade_off_the_scale_is_no_vote(a: int, b: int, form: str) -> None:
    assert read_one_to_five(form.format(a, b)) is None
    if not 1 <= a <= 5:
        assert read_one_to_five(str(a)) is None and read_one_to_five(f"Score: {a}") is None


@given(st.sampled_from([1, 2]), st.sampled_from(["{}", "Answer {}", "Better answer: {}",
                                                 "Answer {} is better", "{}.", "Choice: {}"]),
       MARKS, PADS)
def test_a_choice_is_read(choice: int, form: str, mark: str, pad: str) -> None:
    assert read_choice(wrapped(form.format(choice), mark, pad, "")) == choice


@given(st.text(max_size=200))
def test_any_reply_yields_a_vote_on_the_scale_or_none(reply: str) -> None:
    assert read_pass_fail(reply) in (None, PASS, FAIL)
    assert read_one_to_five(reply) in (None, 0.0, 0.25, 0.5, 0.75, 1.0)
    assert read_choice(reply) in (None, 1, 2)
    assert read_pass_fail(f"  {reply}\n") == read_pass_fail(reply)


@given(st.one_of(st.text(max_size=60), st.sampled_from(["PASS", "does not pass", "It fails.",
                                                          "Verdict: PASS", "4", "Score: 2/5"])),
       st.sampled_from(["pass/fail", "1-5"]))
def test_the_judge_and_its_judge_task_read_replies_alike(reply: str, scale: str) -> None:
    vote = Judge(text_model(str), "correct", scale=scale).parse(reply)
    task = JudgeTask("correct", scale=scale)
    grade = task.grade(reply, {"question": "q", "answer": "a", "label": "pass" if
                               scale == "pass/fail" else 3})
    if vote is None:
        assert not grade.parsed
    elif scale == "pass/fail":
        assert grade.prediction == ("pass" if vote == PASS else "fail")
    else:
        assert grade.prediction == round(vote * 4) + 1
