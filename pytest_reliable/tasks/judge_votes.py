"""How a judge's reply becomes a vote (SPEC section 12): the grammar of what the judge was asked.

`Judge` asks for one of three replies (`Judge.instruction`): "PASS or FAIL only", "the number
only" (1 to 5), or "1 or 2 only" (which of two answers is better). A reply in exactly that form
is read as such. Beyond it the reader is lenient only where the reply still states one verdict,
and a reply that states none, or more than one, yields no vote (None: an unparsed vote):

1. A labelled verdict decides: ``Verdict: PASS``, ``Final grade - FAIL``, ``Grade (PASS or
   FAIL): PASS``, ``The verdict is not a pass``, ``Score: 4``, ``Rating: 4 out of 5``, ``Better
   answer: 2``. Where the reply labels several, they must agree; the reasoning around a label
   does not count (a judge that argues both sides and then labels its verdict is read).
2. Otherwise the verdicts the reply asserts, which must agree:

   - PASS/FAIL: each pass- or fail-word (``pass``, ``passes``, ``failed``, ``failure``, ...)
     read in its clause, with the negation before it: "does not pass", "not a pass", "fails to
     pass" and "fails" are FAIL, "does not fail" is PASS. A clause that asks or hedges ("PASS
     or FAIL?", "it might fail", "whether it passes", "it would pass if ...") asserts nothing.
   - 1-5: a leading number (``4``, ``4.``, ``**4** - mostly right``) and every fraction of 5
     (``4/5``, ``4 out of 5``). A number off the scale (``0``, ``3.5``, ``8/10``) or a range
     (``3-4``, ``3 or 4``) is no vote.
   - 1 or 2: a leading position (``2``, ``Answer 2.``) and what the reply says of a position
     ("Answer 2 is better", "answer 1 is worse"); a leading position with the other one
     mentioned and nothing said of either ("Answer 1: Paris. Answer 2: Lyon", the prompt
     echoed) is no vote.

Case, surrounding whitespace and Markdown emphasis never matter. Nothing else is guessed: a
number somewhere in a sentence ("the answer 4 is right") is no score, a reply that says PASS and
FAIL, 3 and 4, or 1 and 2 is no vote whichever it says last, and a tie ("both are fine") is no
vote (the prompt asks for 1 or 2). A judge that reasons before its verdict should be asked to
label it ("... Verdict: PASS"): unlabelled reasoning that uses the other verdict's word makes
the reply ambiguous.
"""

from __future__ import annotations

import re

LABEL_TAIL = r"\s*(?:\([^)\n]*\))?\s*(?::|=|-|–|—|\bis\b)\s*"
"""After a label: an optional parenthesis (the prompt's "Grade (PASS or FAIL):" echoed), then
":", "=", a dash or "is"."""
VERDICT_LABEL = re.compile(
    r"\b(?:final\s+|overall\s+|my\s+)?(?:verdict|grade|grading|decision|result|judge?ment|"
    r"assessment|evaluation|conclusion|rating|score)\b" + LABEL_TAIL + r"([^\n]*)",
)
"""A labelled PASS/FAIL verdict; the value runs to the end of its line."""
VERDICT_WORD = re.compile(r"\b(pass(?:es|ed|ing)?|fail(?:s|ed|ing|ures?)?)\b")
CLAUSE_END = re.compile(r"[,;:()\[\]]|\s[-–—]\s|\b(?:but|however|although|though|yet|whereas|"
                        r"while|because|since)\b")
SENTENCE = re.compile(r"[^.!?\n]+[.!?\n]*")
NEGATORS = frozenset({"not", "never", "cannot", "neither", "nor", "without", "hardly"})
HEDGES = frozenset({"if", "whether", "unless", "might", "could", "may", "maybe", "perhaps",
                    "unsure", "unclear", "uncertain", "sure"})
"""A clause with one of these asserts nothing ("sure" reads "not sure"; "I am sure it passes"
is refused, a rare price for never reading "I am not sure it passes" as a verdict)."""
NEGATION_REACH = 3
"""A negator counts within this many words before the verdict word ("is not quite a pass"), and
not across another verdict word or a conjunction ("does not fail and fail" asserts both)."""
SCOPE_BREAKS = frozenset({"and", "or", "so", "then", "thus", "therefore", "hence"})

NUMBER = r"(\d+(?:\.\d+)?)"
OUT_OF = r"\s*(?:/|out\s+of|of)\s*"
SCORE_LABEL = re.compile(
    r"\b(?:final\s+|overall\s+|my\s+)?(?:score|grade|grading|rating|verdict|mark)\b"
    r"\s*(?:\([^)\n]*\))?\s*(?::|=|-|–|—|\bis\b|\bof\b)?\s*(?:an?\s+)?"
    + NUMBER + r"(?:" + OUT_OF + NUMBER + r")?(?![\d.]*\d)" + r"(" + r"\s*(?:-|–|to|or|and)\s*\d"
    + r")?"
)
"""A labelled 1-5 score: the number, its denominator when written, and a range's tail (a range
is no score)."""
FRACTION = re.compile(r"(?<![\d.])" + NUMBER + r"\s*(?:/|out\s+of)\s*5(?![\d.]*\d)")
LEADING_NUMBER = re.compile(
    r"\s*" + NUMBER + r"(?![\d.]*\d)(?:(\s*(?:-|–|to|or|and)\s*\d)|"
    r"(?=\s*$|\s*\n|\s*[.!:;)\],\-–—](?!\d)|\s*/\s*5|\s+[a-z]))"
)
"""A number opening the reply, then its end, a line break, punctuation, "/5" or a word ("4 -
mostly right", "4 out of 5"); not an expression ("2 + 2 = 4")."""

POSITION = r"(?:answer\s*)?([12])(?![\d.]*\d)"
CHOICE_LABEL = re.compile(
    r"\b(?:(?:better|best|preferred|winning|final)\s+)?(?:answer|choice|verdict|winner|"
    r"preference|decision|pick)\b" + r"\s*(?:\([^)\n]*\))?\s*(?::|=|\bis\b)\s*" + POSITION
    + r"(\s*(?:or|and|/)\s*(?:answer\s*)?[12]\b)?"
)
"""A labelled choice ("Better answer: 2", "The better answer is Answer 1"); "1 or 2" is none."""
LEADING_POSITION = re.compile(r"\s*" + POSITION + r"\s*(?=$|[.!():,\[\]\-–—\n])")
SAID_OF_POSITION = re.compile(
    r"\b(?:answer\s*)?([12])\s+(?:is|was|seems|appears|looks)\s+(?:(?!not\b)\w+\s+)?"
    r"(better|best|preferred|superior|stronger|worse|worst|wrong|incorrect|inferior|weaker)\b"
)
MENTIONED = re.compile(r"(?<![\w.])([12])(?!\w|\.\d)")
WORSE = frozenset({"worse", "worst", "wrong", "incorrect", "inferior", "weaker"})
MARKUP = re.compile(r"[*_`#>\"“”]")


def _plain(reply: str) -> str:
    """The reply lower-cased, without Markdown emphasis, quotes and surrounding whitespace."""
    return MARKUP.sub(" ", reply).lower().strip()


# -- PASS / FAIL ---------------------------------------------------------------------------------
def read_pass_fail(reply: str) -> float | None:
    """1.0 (PASS), 0.0 (FAIL), or None when the reply states no single verdict."""
    text = _plain(reply)
    found: set[float] = set()
    for label in VERDICT_LABEL.finditer(text):
        stated = _asserted(_first_clause(label.group(1)))
        if len(stated) > 1:  # "Verdict: PASS or FAIL"
            return None
        found |= stated
    if not found:  # no label, or labels without a verdict ("The result is correct, so PASS")
        found = _asserted(text)
    return found.pop() if len(found) == 1 else None


def _first_clause(value: str) -> str:
    """What a label says: its value up to the end of the first clause that holds a word."""
    sentence = SENTENCE.match(value)
    text = sentence.group(0) if sentence else ""
    start = 0
    for end in [m.start() for m in CLAUSE_END.finditer(text)] + [len(text)]:
        if re.search(r"\w", text[start:end]):
            return text[start:end]
        start = end
    return ""


def _asserted(text: str) -> set[float]:
    """The verdicts ``text`` asserts: 1.0 (PASS), 0.0 (FAIL), none or both."""
    found: set[float] = set()
    for sentence in SENTENCE.findall(text):
        if sentence.rstrip().endswith("?"):
            continue  # a question asserts nothing
        start = 0
        for end in [m.start() for m in CLAUSE_END.finditer(sentence)] + [len(sentence)]:
            found |= _clause_verdicts(sentence[start:end])
            start = end
    return found


def _clause_verdicts(clause: str) -> set[float]:
    words = re.findall(r"[a-z]+(?:'[a-z]+)?", clause)
    if any(word in HEDGES for word in words):
        return set()
    found = set()
    for index, word in enumerate(words):
        if not VERDICT_WORD.fullmatch(word):
            continue
        passes = word.startswith("pass")
        before = words[max(0, index - NEGATION_REACH):index]
        following = before[1:] + [word]
        for back in range(len(before) - 1, -1, -1):  # a negation reaches no earlier verdict
            if before[back] in SCOPE_BREAKS or (VERDICT_WORD.fullmatch(before[back]) and not
                                                _negates(before[back], following[back])):
                before = before[back + 1:]
                break
        flips = sum(_negates(w, following) for w, following in zip(before, before[1:] + [word]))
        found.add(float(passes != (flips % 2 == 1)))
    return found


def _negates(word: str, following: str) -> bool:
    """Whether ``word`` negates what follows: "not", "doesn't", "no" right before the verdict
    ("no pass"), and "fails to" ("fails to pass")."""
    if word in NEGATORS or word.endswith("n't"):
        return True
    if word == "no":
        return VERDICT_WORD.fullmatch(following) is not None or following in ("a", "an")
    return word.startswith("fail") and following == "to"


# -- 1 to 5 --------------------------------------------------------------------------------------
def read_one_to_five(reply: str) -> float | None:
    """The grade 1..5 mapped to 0, 0.25, ..., 1, or None when the reply states no single one."""
    text = _plain(reply)
    found = [_on_scale(m.group(1), m.group(2), m.group(3)) for m in SCORE_LABEL.finditer(text)]
    if not found:  # no label: a leading number and the fractions of 5
        found = [_on_scale(m.group(1)) for m in FRACTION.finditer(text)]
        leading = LEADING_NUMBER.match(text)
        if leading:
            found.append(_on_scale(leading.group(1), None, leading.group(2)))
    grades = {grade for grade in found if grade is not None}
    return grades.pop() if len(grades) == 1 and None not in found else None


def _on_scale(number: str, out_of: str | None = None, range_tail: str | None = None
              ) -> float | None:
    """``number`` (of ``out_of`` when written) as a vote, None when off the 1-5 scale."""
    if range_tail or (out_of is not None and float(out_of) != 5):
        return None
    value = float(number)
    if not value.is_integer() or not 1 <= value <= 5:
        return None
    return (value - 1) / 4


# -- 1 or 2 --------------------------------------------------------------------------------------
def read_choice(reply: str) -> int | None:
    """1 or 2 (the position of the better answer), or None when the reply states no single one."""
    text = _plain(reply)
    labelled = {None if m.group(2) else int(m.group(1)) for m in CHOICE_LABEL.finditer(text)}
    if labelled:
        return None if None in labelled or len(labelled) != 1 else labelled.pop()
    said = {3 - int(m.group(1)) if m.group(2) in WORSE else int(m.group(1))
            for m in SAID_OF_POSITION.finditer(text)}
    leading = LEADING_POSITION.match(text)
    if leading and not said:
        position = int(leading.group(1))
        if str(3 - position) in MENTIONED.findall(text):
            return None  # "Answer 1: Paris. Answer 2: Lyon": the prompt echoed, not a choice
        said.add(position)
    elif leading:
        said.add(int(leading.group(1)))
    return said.pop() if len(said) == 1 else None
