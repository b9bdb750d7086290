"""CheckList-style behavioural tests: invariance (INV), directional (DIR) and minimum functionality
(MFT), with the built-in perturbations of SPEC section 4.

Everything here is plain Python (no pytest): ``session.run_checklist`` resolves the marker's
perturbations with `resolve_perturbation` and calls `run_invariance` / `run_directional` /
`run_mft` with a *batched* ``predict`` (one call for all originals, one for all perturbed
examples). Perturbations are deterministic given ``(seed, perturbation name, example index)``.

The word lists below are small, hand-written lexicons of this project.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.gate import ThresholdCheck
from pytest_reliable.stats import wilson_interval

__all__ = [
    "DIR_PERTURBATIONS",
    "INV_PERTURBATIONS",
    "ChecklistResult",
    "Failure",
    "Perturbation",
    "Prediction",
    "resolve_perturbation",
    "run_directional",
    "run_invariance",
    "run_mft",
    "stable_hash",
]

Example = dict[str, Any]
PerturbFn = Callable[[Example, np.random.Generator], list[Example]]


# ---------------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    """One model prediction: the graded ``value``, whether it ``parsed``, and the raw ``text``."""

    value: Any
    parsed: bool
    text: str


@dataclass(frozen=True)
class Perturbation:
    """A named perturbation: ``perturbation(example, rng) -> [perturbed example]`` ([] = n/a)."""

    name: str
    fn: PerturbFn = field(repr=False, compare=False)

    def __call__(self, example: Example, rng: np.random.Generator) -> list[Example]:
        return self.fn(example, rng)


@dataclass(frozen=True)
class Failure:
    """One failing case. MFT failures have ``perturbed=None`` and ``before`` = the expected label."""

    original: str
    perturbed: str | None
    before: str
    after: str
    perturbation: str | None = None
    before_value: Any = None
    after_value: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "perturbed": self.perturbed,
            "before": self.before,
            "after": self.after,
        }


RATE_NAMES = {"invariance": "flip rate", "directional": "fail rate", "mft": "pass rate"}
SHOWN_FAILURES = 3


@dataclass
class ChecklistResult:
    """The outcome of one CheckList test (INV: flip rate, DIR: fail rate, MFT: pass rate)."""

    kind: str
    rate: float
    interval: tuple[float, float]
    pairs: int
    unparsed: int
    failures: list[Failure] = field(default_factory=list)
    thresholds: list[ThresholdCheck] = field(default_factory=list)
    confidence: float = 0.95

    @property
    def passed(self) -> bool:
        return self.pairs > 0 and all(check.passed for check in self.thresholds)

    def _empty_message(self) -> str:
        if self.kind == "mft":
            return "no example to check"
        return "no example could be perturbed"

    def message(self) -> str:
        if self.pairs == 0:
            return self._empty_message()
        unit = "examples" if self.kind == "mft" else "pairs"
        if self.pairs == 1:
            unit = unit[:-1]
        low, high = self.interval
        lines = [
            f"{RATE_NAMES.get(self.kind, 'rate')} {self.rate:.2f} [{low:.2f}, {high:.2f}] over "
            f"{self.pairs} {unit} ({_percent(self.confidence)} Wilson)"
            + (f"; {self.unparsed} unparsed prediction{'s' if self.unparsed != 1 else ''}"
               if self.unparsed else "")
        ]
        for check in self.thresholds:
            if not check.passed:
                lines.append(f"failed {check.describe()}")
        if self.failures:
            shown = self.failures[:SHOWN_FAILURES]
            lines.append(f"failing cases (showing {len(shown)} of {len(self.failures)}):")
            for failure in shown:
                tag = f"[{failure.perturbation}] " if failure.perturbation else ""
                if failure.perturbed is None:
                    lines.append(f"  - {tag}input: {_clip(failure.original)!r}")
                    lines.append(f"    {failure.before}; model output: {_clip(failure.after)!r}")
                else:
                    lines.append(f"  - {tag}original:  {_clip(failure.original)!r}")
                    lines.append(f"    perturbed: {_clip(failure.perturbed)!r}")
                    lines.append(f"    output before: {_clip(failure.before)!r}; "
                                 f"after: {_clip(failure.after)!r}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rate": float(self.rate),
            "interval": [float(self.interval[0]), float(self.interval[1])],
            "pairs": int(self.pairs),
            "unparsed": int(self.unparsed),
            "failures": [failure.as_dict() for failure in self.failures[:SHOWN_FAILURES]],
            "thresholds": [check.as_dict() for check in self.thresholds],
        }


def _percent(confidence: float) -> str:
    return f"{confidence * 100:.10g}%"


def _clip(text: str, limit: int = 200) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stable_hash(name: str) -> int:
    """A process-independent hash of a perturbation name (CRC-32; never Python's ``hash``)."""
    return zlib.crc32(name.encode("utf-8"))


def _rng(seed: int, name: str, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) % (1 << 64), stable_hash(name), int(index)])


# ---------------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------------
WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
NEGATORS = frozenset(
    {"not", "no", "never", "nor", "neither", "none", "nobody", "nothing", "nowhere", "cannot"}
)


def _text_key(example: Any) -> str | None:
    if not isinstance(example, dict):
        return None
    for key in ("text", "question"):
        if key in example:
            return key if isinstance(example[key], str) else None
    return None


def _with_text(example: Example, key: str, text: str) -> list[Example]:
    if text == example[key]:
        return []
    out = dict(example)
    out[key] = text
    return [out]


TextEdit = Callable[[str, np.random.Generator], "str | None"]


def _on_text(edit: TextEdit) -> Callable[[Example, np.random.Generator], list[Example]]:
    """A perturbation from an edit of the example's text field: [] when the example has no text
    field, or the edit declines (None) or changes nothing."""

    @functools.wraps(edit)
    def perturb(example: Example, rng: np.random.Generator) -> list[Example]:
        key = _text_key(example)
        if key is None:
            return []
        new = edit(example[key], rng)
        return [] if new is None else _with_text(example, key, new)

    return perturb


def _is_negator(word: str) -> bool:
    lower = word.lower().replace("\u2019", "'")
    return lower in NEGATORS or lower.endswith("n't")


def _match_case(template: str, word: str) -> str:
    """``word`` cased like ``template`` (UPPER, Title or lower)."""
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def _choice(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


# ---------------------------------------------------------------------------------------------
# Invariance perturbations
# ---------------------------------------------------------------------------------------------
@_on_text
def typos(text: str, rng: np.random.Generator) -> str | None:
    """Swap two adjacent inner letters of one or two words of length >= 4 (negators untouched)."""
    candidates = []
    for match in WORD.finditer(text):
        word = match.group()
        if len(word) < 4 or not word.isalpha() or _is_negator(word):
            continue
        inner = [i for i in range(1, len(word) - 2) if word[i].lower() != word[i + 1].lower()]
        if inner:
            candidates.append((match.start(), word, inner))
    if not candidates:
        return None
    count = min(len(candidates), int(rng.integers(1, 3)))
    picked = sorted(int(i) for i in rng.choice(len(candidates), size=count, replace=False))
    chars = list(text)
    for index in picked:
        start, word, inner = candidates[index]
        i = int(_choice(rng, inner))
        swapped = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if _is_negator(swapped):
            continue
        chars[start:start + len(word)] = list(swapped)
    return "".join(chars)


# Meaning-preserving, polarity-free pairs; every word appears once (the mapping is a bijection).
SYNONYM_PAIRS: tuple[tuple[str, str], ...] = (
    ("movie", "film"), ("movies", "films"),
    ("big", "large"),
    ("quick", "fast"),
    ("purchase", "buy"), ("purchased", "bought"),
    ("begin", "start"), ("began", "started"),
    ("shop", "store"), ("shops", "stores"),
    ("talk", "speak"),
    ("almost", "nearly"),
    ("maybe", "perhaps"),
    ("child", "kid"), ("children", "kids"),
    ("road", "street"),
    ("trip", "journey"),
    ("story", "tale"),
    ("often", "frequently"),
    ("usually", "typically"),
    ("completely", "entirely"),
    ("couch", "sofa"),
    ("huge", "massive"),
    ("shout", "yell"),
    ("choose", "pick"),
    ("reply", "answer"),
    ("enormous", "gigantic"),
    ("picture", "photo"),
    ("meal", "dish"),
    ("answers", "replies"),
)
SYNONYMS: dict[str, str] = {a: b for a, b in SYNONYM_PAIRS} | {b: a for a, b in SYNONYM_PAIRS}


@_on_text
def synonyms(text: str, rng: np.random.Generator) -> str | None:
    """Replace one word with a hand-listed synonym (e.g. movie <-> film, big <-> large)."""
    matches = [m for m in WORD.finditer(text) if m.group().lower() in SYNONYMS]
    if not matches:
        return None
    match = _choice(rng, matches)
    new = _match_case(match.group(), SYNONYMS[match.group().lower()])
    head = _fix_article(text[: match.start()], new)
    return head + new + text[match.end():]


_ARTICLE = re.compile(r"\b(an?)(\s+)$", re.IGNORECASE)


def _fix_article(head: str, word: str) -> str:
    """``head`` with a final "a"/"an" agreeing with ``word`` (by its first letter)."""
    match = _ARTICLE.search(head)
    if match is None:
        return head
    article = "an" if word[:1].lower() in "aeiou" else "a"
    return head[: match.start()] + _recase(match.group(1), article) + match.group(2)


FIRST_NAMES: tuple[tuple[str, ...], ...] = (
    ("John", "Michael", "David", "James", "Robert", "Daniel", "Thomas", "Peter", "Andrew",
     "Kevin", "Brian", "Steven", "Paul", "George", "Edward", "Samuel"),
    ("Mary", "Sarah", "Emily", "Laura", "Anna", "Jessica", "Linda", "Susan", "Karen", "Rachel",
     "Emma", "Olivia", "Julia", "Helen", "Alice", "Nancy"),
)
CITIES: tuple[str, ...] = (
    "Paris", "London", "Berlin", "Madrid", "Rome", "Vienna", "Toronto", "Chicago", "Boston",
    "Sydney", "Tokyo", "Lisbon", "Dublin", "Prague", "Seattle", "Denver", "Oslo", "Munich",
)
COUNTRIES: tuple[str, ...] = (
    "France", "Germany", "Spain", "Italy", "Canada", "Japan", "Brazil", "Mexico", "Norway",
    "Sweden", "Portugal", "Ireland", "Egypt", "India", "Kenya", "Chile", "Peru", "Austria",
)


def _swap_entity(text: str, rng: np.random.Generator,
                 groups: Sequence[Sequence[str]]) -> str | None:
    """Replace every occurrence of one lexicon entry with another entry of the same group."""
    group_of = {entry: group for group in groups for entry in group}
    found: list[str] = []
    for match in WORD.finditer(text):
        word = match.group().split("'")[0].split("\u2019")[0]
        if word in group_of and word not in found:
            found.append(word)
    if not found:
        return None
    old = _choice(rng, found)
    others = [entry for entry in group_of[old] if entry != old and entry not in found]
    if not others:
        return None
    new = _choice(rng, others)
    return re.sub(rf"\b{re.escape(old)}\b", new, text)


@_on_text
def names(text: str, rng: np.random.Generator) -> str | None:
    """Swap a first name from the lexicon for another one (same list; every occurrence)."""
    return _swap_entity(text, rng, FIRST_NAMES)


@_on_text
def locations(text: str, rng: np.random.Generator) -> str | None:
    """Swap a city for a city, or a country for a country (every occurrence)."""
    return _swap_entity(text, rng, (CITIES, COUNTRIES))


INTEGER = re.compile(r"(?<![\w.,])\d+(?![\w]|[.,]\d)")


@_on_text
def numbers_(text: str, rng: np.random.Generator) -> str | None:
    """Change one integer by a small amount (1-3, staying >= 0); [] without an integer."""
    matches = [m for m in INTEGER.finditer(text)
               if len(m.group()) < 16 and not (len(m.group()) > 1 and m.group()[0] == "0")]
    if not matches:
        return None
    match = _choice(rng, matches)
    value = int(match.group())
    delta = int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)
    if value + delta < 0:
        delta = -delta
    return text[: match.start()] + str(value + delta) + text[match.end():]


@_on_text
def punctuation(text: str, rng: np.random.Generator) -> str | None:
    """Remove a trailing '.'/'!', add a trailing '.', or remove a comma."""
    body = text.rstrip()
    tail = text[len(body):]
    options: list[str] = []
    if body.endswith((".", "!")) and not body.endswith("..") and len(body) > 1:
        options.append(body[:-1] + tail)
    elif body and body[-1].isalnum():
        options.append(body + "." + tail)
    commas = [m.start() for m in re.finditer(r",(?=\s)", text)]
    if commas:
        at = int(_choice(rng, commas))
        options.append(text[:at] + text[at + 1:])
    if not options:
        return None
    return _choice(rng, options)


@_on_text
def whitespace(text: str, rng: np.random.Generator) -> str | None:
    """Double one existing space, or add a trailing space."""
    if not text.strip():
        return None
    spaces = [m.start() for m in re.finditer(" ", text.strip())]
    offset = len(text) - len(text.lstrip())
    options = [text + " "]
    if spaces:
        at = offset + int(_choice(rng, spaces))
        options.append(text[:at] + " " + text[at:])
    return _choice(rng, options)


@_on_text
def casing(text: str, rng: np.random.Generator) -> str | None:
    """Lower- or upper-case the whole text (whichever changes it; [] when neither does)."""
    options = [t for t in (text.lower(), text.upper()) if t != text]
    if not options:
        return None
    return _choice(rng, options)


# Unambiguous contractions only ('s and 'd are left alone: has/is, had/would).
NEGATIVE_CONTRACTIONS: tuple[tuple[str, str], ...] = (
    ("isn't", "is not"), ("aren't", "are not"), ("wasn't", "was not"), ("weren't", "were not"),
    ("don't", "do not"), ("doesn't", "does not"), ("didn't", "did not"), ("can't", "cannot"),
    ("won't", "will not"), ("wouldn't", "would not"), ("shouldn't", "should not"),
    ("couldn't", "could not"), ("haven't", "have not"), ("hasn't", "has not"),
    ("hadn't", "had not"), ("mustn't", "must not"),
)
PRONOUN_CONTRACTIONS: tuple[tuple[str, str], ...] = (
    ("I'm", "I am"), ("you're", "you are"), ("we're", "we are"), ("they're", "they are"),
    ("I've", "I have"), ("you've", "you have"), ("we've", "we have"), ("they've", "they have"),
    ("I'll", "I will"), ("you'll", "you will"), ("we'll", "we will"), ("they'll", "they will"),
)
CONTRACTIONS = NEGATIVE_CONTRACTIONS + PRONOUN_CONTRACTIONS


def _phrase_pattern(phrase: str) -> str:
    parts = [re.escape(p).replace("'", "['\u2019]") for p in phrase.split(" ")]
    pattern = r"\b" + r"\s+".join(parts) + r"\b"
    if phrase.endswith(" have"):
        # "I have seen" -> "I've seen", but not "I have a dog" -> "I've a dog".
        pattern += r"(?=\s+(?:been|seen|done|gone|made|had|got|taken|known|given|found|told|"
        pattern += r"said|bought|thought|heard|never|always|just|already|[A-Za-z]+ed)\b)"
    return pattern


_EXPAND = {short.lower(): long for short, long in CONTRACTIONS}
_EXPAND_RE = re.compile("|".join(_phrase_pattern(s) for s, _ in CONTRACTIONS), re.IGNORECASE)
_CONTRACT_PASSES = [
    ({" ".join(long.lower().split()): short for short, long in table},
     re.compile("|".join(_phrase_pattern(long) for _, long in table), re.IGNORECASE))
    for table in (NEGATIVE_CONTRACTIONS, PRONOUN_CONTRACTIONS)
]


def _recase(source: str, target: str) -> str:
    """``target`` cased like ``source`` (all upper, capitalised first letter, or as written)."""
    letters = [c for c in source if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return target.upper()
    if source[:1].isupper() and target[:1].islower():
        return target[:1].upper() + target[1:]
    if source[:1].islower() and target[:1].isupper() and not target.startswith("I"):
        return target[:1].lower() + target[1:]
    return target


def _expand(text: str) -> str:
    def sub(match: re.Match[str]) -> str:
        found = match.group()
        return _recase(found, _EXPAND[found.lower().replace("\u2019", "'")])

    return _EXPAND_RE.sub(sub, text)


def _contract(text: str) -> str:
    for table, pattern in _CONTRACT_PASSES:
        def sub(match: re.Match[str], table: dict[str, str] = table) -> str:
            found = match.group()
            return _recase(found, table[" ".join(found.lower().split())])

        text = pattern.sub(sub, text)
    return text


@_on_text
def contractions(text: str, rng: np.random.Generator) -> str | None:
    """Expand every contraction ("isn't" -> "is not") or contract every expandable phrase."""
    options = [t for t in (_expand(text), _contract(text)) if t != text]
    if not options:
        return None
    return _choice(rng, options)


NEUTRAL_PREFIXES: tuple[str, ...] = ("Anyway, ", "So, ", "For the record, ")
NEUTRAL_SUFFIXES: tuple[str, ...] = (" That is all.", " End of message.")
_LOWER_STARTERS = frozenset({
    "the", "a", "an", "this", "that", "these", "those", "it", "we", "they", "he", "she", "you",
    "my", "our", "your", "his", "her", "their", "there", "what", "how", "which", "who", "when",
    "where", "why", "is", "are", "was", "were", "do", "does", "did", "can", "will", "in", "on",
    "at", "for", "of", "to", "after", "before", "if",
})


@_on_text
def neutral_phrase(text: str, rng: np.random.Generator) -> str | None:
    """Prepend ("Anyway, ...") or append (" That is all.") a phrase that carries no meaning."""
    if not text.strip():
        return None
    if rng.random() < 0.5:
        prefix = _choice(rng, NEUTRAL_PREFIXES)
        stripped = text.lstrip()
        first = WORD.match(stripped)
        head = re.split("['\u2019]", first.group())[0] if first else ""
        if first and head.lower() in _LOWER_STARTERS and first.group()[1:].islower():
            stripped = stripped[:1].lower() + stripped[1:]
        new = text[: len(text) - len(stripped)] + prefix + stripped
    else:
        suffix = _choice(rng, NEUTRAL_SUFFIXES)
        body = text.rstrip()
        if body[-1].isalnum():
            body += "."
        new = body + suffix
    return new


# ---------------------------------------------------------------------------------------------
# Directional perturbations
# ---------------------------------------------------------------------------------------------
# (base, third person singular, simple past)
VERB_FORMS: tuple[tuple[str, str, str], ...] = (
    ("love", "loves", "loved"), ("like", "likes", "liked"), ("enjoy", "enjoys", "enjoyed"),
    ("hate", "hates", "hated"), ("recommend", "recommends", "recommended"),
    ("want", "wants", "wanted"), ("need", "needs", "needed"), ("know", "knows", "knew"),
    ("think", "thinks", "thought"), ("see", "sees", "saw"), ("buy", "buys", "bought"),
    ("go", "goes", "went"), ("work", "works", "worked"), ("make", "makes", "made"),
    ("take", "takes", "took"), ("help", "helps", "helped"), ("feel", "feels", "felt"),
    ("have", "has", "had"), ("do", "does", "did"), ("get", "gets", "got"),
    ("play", "plays", "played"), ("watch", "watches", "watched"), ("eat", "eats", "ate"),
    ("understand", "understands", "understood"), ("trust", "trusts", "trusted"),
    ("expect", "expects", "expected"), ("believe", "believes", "believed"),
    ("agree", "agrees", "agreed"), ("support", "supports", "supported"),
    ("remember", "remembers", "remembered"), ("care", "cares", "cared"),
    ("prefer", "prefers", "preferred"), ("appreciate", "appreciates", "appreciated"),
    ("miss", "misses", "missed"), ("own", "owns", "owned"), ("live", "lives", "lived"),
    ("try", "tries", "tried"), ("come", "comes", "came"), ("find", "finds", "found"),
    ("keep", "keeps", "kept"), ("win", "wins", "won"), ("pass", "passes", "passed"),
    ("arrive", "arrives", "arrived"), ("meet", "meets", "met"), ("return", "returns", "returned"),
    ("fix", "fixes", "fixed"), ("answer", "answers", "answered"),
)
_BASE = {base: base for base, _, _ in VERB_FORMS}
_THIRD = {third: base for base, third, _ in VERB_FORMS}
_PAST = {past: base for base, _, past in VERB_FORMS}

AUXILIARIES = frozenset({
    "is", "are", "was", "were", "am", "can", "will", "should", "would", "could", "must",
    "might", "did", "does", "do", "has", "have", "had",
})
_DO_FORMS = frozenset({"do", "does", "did"})
_HAVE_FORMS = frozenset({"has", "have", "had"})
PARTICIPLES = frozenset({
    "been", "seen", "done", "gone", "made", "had", "got", "gotten", "taken", "eaten", "written",
    "known", "given", "found", "told", "said", "bought", "thought", "left", "lost", "won", "met",
    "heard", "read", "come", "become", "kept", "felt", "understood", "tried",
})
PLURAL_SUBJECTS = frozenset({"i", "you", "we", "they"})
SINGULAR_SUBJECTS = frozenset({"he", "she", "it", "this", "that", "everyone", "everybody",
                               "someone", "somebody"})
NOT_SUBJECT = frozenset({
    "a", "an", "the", "my", "your", "his", "her", "our", "their", "its", "this", "that", "these",
    "those", "to", "of", "in", "on", "at", "for", "with", "by", "from", "about", "and", "or",
    "but", "as", "than", "what", "where", "who", "why", "how", "when", "which", "if", "very",
    "so", "too", "be", "been", "being",
})
ADVERBS = frozenset({"really", "also", "just", "always", "truly", "totally", "absolutely",
                     "definitely", "still", "actually", "usually", "often", "ever"})
WH_WORDS = frozenset({"what", "where", "who", "why", "how", "when", "which", "whom", "whose"})
_CONTRACTED_BE = re.compile(r"^(?:i['\u2019]m|(?:you|we|they)['\u2019]re|"
                            r"(?:it|he|she|that|there|what)['\u2019]s)$", re.IGNORECASE)


def _case_like(template: str, phrase: str) -> str:
    return phrase.upper() if len(template) > 1 and template.isupper() else phrase


def _negate_text(text: str) -> str | None:
    """``text`` with its first negatable clause negated; None if negated already or no pattern."""
    words = list(WORD.finditer(text))
    if not words or any(_is_negator(w.group()) for w in words):
        return None
    lowers = [w.group().lower() for w in words]
    # 1. auxiliaries / copulas (not sentence-initial, not after a wh-word): "is" -> "is not".
    for i, match in enumerate(words):
        word = lowers[i]
        if _CONTRACTED_BE.match(word):
            return text[: match.end()] + _case_like(match.group(), " not") + text[match.end():]
        if word not in AUXILIARIES or i == 0 or lowers[i - 1] in WH_WORDS:
            continue
        after = lowers[i + 1] if i + 1 < len(words) else None
        if word in _DO_FORMS and not (after in _BASE or after in ADVERBS):
            continue  # main verb "did": handled below through the lemma table
        if word in _HAVE_FORMS and not (after in PARTICIPLES or (after or "").endswith("ed")):
            continue  # main verb "have": handled below
        if lowers[i - 1] in NOT_SUBJECT and lowers[i - 1] not in SINGULAR_SUBJECTS:
            continue
        return text[: match.end()] + _case_like(match.group(), " not") + text[match.end():]
    # 2. simple present / past verbs from the lemma table: "loved" -> "did not love".
    for i, match in enumerate(words):
        word = lowers[i]
        if i == 0 or not match.group().isalpha():
            continue
        j = i - 1
        while j > 0 and lowers[j] in ADVERBS:
            j -= 1
        subject = lowers[j]
        if lowers[j] in ADVERBS:
            continue
        if word in _PAST:
            aux, base = "did", _PAST[word]
        elif word in _THIRD:
            aux, base = "does", _THIRD[word]
        elif word in _BASE and subject in PLURAL_SUBJECTS:
            aux, base = "do", word
        else:
            continue
        if subject in NOT_SUBJECT and subject not in SINGULAR_SUBJECTS:
            continue
        if aux == "does" and subject in PLURAL_SUBJECTS:
            continue
        start = words[j + 1].start() if j + 1 < i else match.start()
        head = _case_like(match.group(), f"{aux} not ")
        middle = text[start: match.start()]
        return text[:start] + head + middle + _match_case(match.group(), base) + text[match.end():]
    return None


@_on_text
def negation(text: str, rng: np.random.Generator) -> str | None:
    """Negate the first clause ("X is good" -> "X is not good", "I loved it" -> "I did not love
    it"); [] when the text is already negated or no pattern applies (never double-negates)."""
    return _negate_text(text)


INTENSIFIABLE = frozenset({
    "good", "great", "bad", "nice", "happy", "sad", "boring", "interesting", "beautiful", "ugly",
    "terrible", "awful", "funny", "helpful", "useful", "rude", "slow", "friendly", "pleasant",
    "disappointing", "exciting", "tasty", "clean", "dirty", "cheap", "expensive", "poor",
    "comfortable", "annoying", "satisfied", "disappointed", "fun", "enjoyable", "impressive",
})
INTENSIFIERS: tuple[str, ...] = ("really", "very")
_ALREADY_INTENSE = frozenset({"really", "very", "so", "extremely", "too", "quite", "pretty",
                              "incredibly", "super", "truly", "most", "more", "less", "least"})


@_on_text
def intensify(text: str, rng: np.random.Generator) -> str | None:
    """Put "really" or "very" before a lexicon adjective ("good" -> "really good"); [] when the
    text has no such adjective or it is intensified already."""
    words = list(WORD.finditer(text))
    for i, match in enumerate(words):
        if match.group().lower() not in INTENSIFIABLE:
            continue
        if i > 0 and words[i - 1].group().lower() in _ALREADY_INTENSE:
            return None
        adverb = _choice(rng, INTENSIFIERS)
        adjective = match.group()
        if len(adjective) > 1 and adjective.isupper():
            adverb = adverb.upper()
        elif adjective[:1].isupper():
            adverb = adverb.capitalize()
            adjective = adjective[:1].lower() + adjective[1:]
        return text[: match.start()] + f"{adverb} {adjective}" + text[match.end():]
    return None


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------
INV_PERTURBATIONS: dict[str, PerturbFn] = {
    "typos": typos,
    "synonyms": synonyms,
    "names": names,
    "locations": locations,
    "numbers": numbers_,
    "punctuation": punctuation,
    "whitespace": whitespace,
    "casing": casing,
    "contractions": contractions,
    "neutral_phrase": neutral_phrase,
}
DIR_PERTURBATIONS: dict[str, PerturbFn] = {"negation": negation, "intensify": intensify}
_ALLOWED: dict[str, dict[str, PerturbFn]] = {
    "invariance": INV_PERTURBATIONS,
    "directional": {**DIR_PERTURBATIONS, **INV_PERTURBATIONS},
    "mft": {},
}


def _wrap_callable(fn: Callable[[Example], Any]) -> Perturbation:
    name = str(getattr(fn, "__name__", None) or type(fn).__name__)

    def call(example: Example, rng: np.random.Generator) -> list[Example]:
        out = fn(copy.deepcopy(example))
        if out is None:
            return []
        if isinstance(out, dict):
            out = [out]
        items = list(out)
        for item in items:
            if not isinstance(item, dict):
                raise TypeError(f"perturbation {name!r} must return a list of dicts (examples), "
                                f"got an item of type {type(item).__name__}")
        return items

    return Perturbation(name, call)


def resolve_perturbation(name_or_callable: Any, *, kind: str) -> Perturbation:
    """A built-in perturbation by name, or a user callable ``example -> list[example]`` wrapped.

    ``kind``: "invariance" (INV names only), "directional" (DIR and INV names) or "mft" (none).
    An unknown name raises ``ValueError`` listing the allowed names.
    """
    if kind not in _ALLOWED:
        raise ValueError(f"unknown CheckList kind {kind!r}; allowed: {', '.join(_ALLOWED)}")
    if isinstance(name_or_callable, Perturbation):
        return name_or_callable
    if isinstance(name_or_callable, str):
        table = _ALLOWED[kind]
        if name_or_callable not in table:
            allowed = ", ".join(table) if table else "none (mft takes no perturbations)"
            raise ValueError(
                f"unknown perturbation {name_or_callable!r} for {kind}; allowed: {allowed}"
            )
        return Perturbation(name_or_callable, table[name_or_callable])
    if callable(name_or_callable):
        return _wrap_callable(name_or_callable)
    raise ValueError(
        f"a perturbation must be a name or a callable example -> list[example], got "
        f"{name_or_callable!r}; allowed names: {', '.join(_ALLOWED[kind]) or 'none'}"
    )


# ---------------------------------------------------------------------------------------------
# Running the tests
# ---------------------------------------------------------------------------------------------
Predict = Callable[[Sequence[Example]], Sequence[Any]]


def _coerce(prediction: Any) -> Prediction:
    if isinstance(prediction, Prediction):
        return prediction
    return Prediction(prediction, prediction is not None, "" if prediction is None
                      else str(prediction))


def _predict(predict: Predict, batch: list[Example]) -> list[Prediction]:
    if not batch:
        return []
    out = [_coerce(p) for p in predict(batch)]
    if len(out) != len(batch):
        raise ValueError(f"predict returned {len(out)} predictions for {len(batch)} examples")
    return out


def _shown(prediction: Prediction) -> str:
    if prediction.text:
        return prediction.text
    if prediction.parsed:
        return repr(prediction.value)
    return "<no output>"


def _example_text(example: Any) -> str:
    key = _text_key(example)
    if key is not None:
        return example[key]
    return repr(example)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip().replace(",", ""))
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


@dataclass(frozen=True)
class _Pair:
    index: int
    perturbation: str
    example: Example


def _pairs(examples: Sequence[Example], perturbations: Sequence[Perturbation],
           seed: int) -> list[_Pair]:
    pairs = []
    for perturbation in perturbations:
        for index, example in enumerate(examples):
            for perturbed in perturbation(example, _rng(seed, perturbation.name, index)):
                pairs.append(_Pair(index, perturbation.name, perturbed))
    return pairs


def _thresholds(limits: dict[str, tuple[float | None, str]], rate: float,
                interval: tuple[float, float], pairs: int,
                gate_on_bound: bool) -> list[ThresholdCheck]:
    checks = []
    for name, (limit, direction) in limits.items():
        if limit is None:
            continue
        observed: float | None = rate
        shown = name
        if gate_on_bound:
            observed = interval[1] if direction == "max" else interval[0]
            shown = f"{name} ({'upper' if direction == 'max' else 'lower'} bound)"
        if pairs == 0:
            observed = None
        checks.append(ThresholdCheck(shown, float(limit), observed, direction))  # type: ignore[arg-type]
    return checks


def _result(kind: str, bad_or_good: int, pairs: int, unparsed: int, failures: list[Failure],
            limits: dict[str, tuple[float | None, str]], confidence: float,
            gate_on_bound: bool) -> ChecklistResult:
    if pairs == 0:
        rate, interval = 0.0, (0.0, 1.0)
    else:
        rate = bad_or_good / pairs
        interval = wilson_interval(bad_or_good, pairs, confidence)
    return ChecklistResult(
        kind=kind, rate=rate, interval=(float(interval[0]), float(interval[1])), pairs=pairs,
        unparsed=unparsed, failures=failures,
        thresholds=_thresholds(limits, rate, interval, pairs, gate_on_bound),
        confidence=confidence,
    )


def _run_pairs(examples: Sequence[Example], perturbations: Sequence[Perturbation],
               predict: Predict, seed: int,
               ) -> tuple[list[_Pair], dict[int, Prediction], list[Prediction], int]:
    examples = list(examples)
    pairs = _pairs(examples, [resolve_perturbation(p, kind="directional")
                              if not isinstance(p, Perturbation) else p
                              for p in perturbations], seed)
    if not pairs:
        return [], {}, [], 0
    originals = sorted({pair.index for pair in pairs})
    before_list = _predict(predict, [examples[i] for i in originals])
    after = _predict(predict, [pair.example for pair in pairs])
    before = dict(zip(originals, before_list))
    unparsed = sum(not p.parsed for p in before_list) + sum(not p.parsed for p in after)
    return pairs, before, after, unparsed


def _flipped(a: Prediction, b: Prediction, tolerance: float | None) -> bool:
    if not a.parsed and not b.parsed:
        return False
    if a.parsed != b.parsed:
        return True
    if tolerance is not None:
        x, y = _number(a.value), _number(b.value)
        if x is not None and y is not None:
            return abs(x - y) > tolerance
    try:
        return bool(a.value != b.value)
    except (TypeError, ValueError):  # e.g. arrays with ambiguous truth values
        return repr(a.value) != repr(b.value)


def run_invariance(
    examples: Sequence[Example],
    perturbations: Sequence[Perturbation],
    predict: Predict,
    *,
    seed: int = 0,
    confidence: float = 0.95,
    tolerance: float | None = None,
    gate_on_bound: bool = False,
    max_flip_rate: float | None = 0.0,
) -> ChecklistResult:
    """INV: the flip rate over (example, perturbed example) pairs, gated by ``max_flip_rate``."""
    pairs, before, after, unparsed = _run_pairs(examples, perturbations, predict, seed)
    failures = []
    for pair, prediction in zip(pairs, after):
        original = before[pair.index]
        if _flipped(original, prediction, tolerance):
            failures.append(_failure(examples[pair.index], pair, original, prediction))
    return _result("invariance", len(failures), len(pairs), unparsed, failures,
                   {"max_flip_rate": (max_flip_rate, "max")}, confidence, gate_on_bound)


def _failure(example: Example, pair: _Pair, before: Prediction, after: Prediction) -> Failure:
    return Failure(
        original=_example_text(example), perturbed=_example_text(pair.example),
        before=_shown(before), after=_shown(after), perturbation=pair.perturbation,
        before_value=before.value, after_value=after.value,
    )


RELATIONS = ("flip", "increase", "decrease")
NUMERIC_RELATIONS = ("increase", "decrease")
LABEL_TASKS = ("options", "multiple_choice", "classification")
"""Task kinds whose predictions are labels or options, never numbers."""


def check_expectation(expect: Any, task: Any) -> None:
    """Before any model call: ``expect="increase"``/``"decrease"`` needs numeric predictions,
    which a task answering with labels never gives (SPEC section 4: a usage error)."""
    kind = getattr(task, "kind", None)
    if isinstance(expect, str) and expect in NUMERIC_RELATIONS and kind in LABEL_TASKS:
        raise ReliableConfigError(
            f"directional(expect={expect!r}) needs numeric predictions, but "
            f"{type(task).__name__} predicts labels. Fix: use expect='flip', a label, or a "
            "callable (before, after) -> bool; or a Generation whose grader returns a number."
        )


def expected_label(task: Any) -> Callable[[Example], Any] | None:
    """MFT's expected prediction: the record's label spelt as the task predicts it (a
    Classification accepts "Positive" or the index 0 for its label "positive"); None when
    the task has no labels (the raw "label" is compared)."""
    labels = getattr(task, "labels", None)
    label_index = getattr(task, "label_index", None)
    if labels is None or not callable(label_index):
        return None

    def expected(example: Example) -> Any:
        raw = example.get("label") if isinstance(example, dict) else None
        index = label_index(raw)
        return labels[index] if index is not None else raw

    return expected


def _expectation(expect: Any) -> Callable[[Prediction, Prediction], bool]:
    if expect is None:
        raise ValueError("directional needs expect=: a label, 'flip', 'increase', 'decrease' "
                         "or a callable (before, after) -> bool")
    if callable(expect) and not isinstance(expect, str):
        return lambda b, a: a.parsed and bool(expect(b.value, a.value))
    if isinstance(expect, str) and expect == "flip":
        def flip(b: Prediction, a: Prediction) -> bool:
            if not a.parsed:
                return False
            return not (b.parsed and not _flipped(b, a, None))
        return flip
    if isinstance(expect, str) and expect in ("increase", "decrease"):
        def numeric(b: Prediction, a: Prediction) -> bool:
            if not a.parsed or not b.parsed:
                return False
            x, y = _number(b.value), _number(a.value)
            for value, number in ((b.value, x), (a.value, y)):
                if number is None:
                    raise ValueError(
                        f"expect={expect!r} needs numeric predictions (e.g. a Generation whose "
                        f"grader returns a number); got {value!r}"
                    )
            assert x is not None and y is not None
            return y > x if expect == "increase" else y < x
        return numeric

    def label(b: Prediction, a: Prediction) -> bool:
        try:
            return a.parsed and bool(a.value == expect)
        except (TypeError, ValueError):
            return False
    return label


def run_directional(
    examples: Sequence[Example],
    perturbations: Sequence[Perturbation],
    predict: Predict,
    *,
    expect: Any,
    seed: int = 0,
    confidence: float = 0.95,
    gate_on_bound: bool = False,
    max_fail_rate: float | None = 0.0,
) -> ChecklistResult:
    """DIR: the fail rate over pairs (the "after" prediction is not as ``expect`` says)."""
    ok = _expectation(expect)
    pairs, before, after, unparsed = _run_pairs(examples, perturbations, predict, seed)
    failures = []
    for pair, prediction in zip(pairs, after):
        original = before[pair.index]
        if not ok(original, prediction):
            failures.append(_failure(examples[pair.index], pair, original, prediction))
    return _result("directional", len(failures), len(pairs), unparsed, failures,
                   {"max_fail_rate": (max_fail_rate, "max")}, confidence, gate_on_bound)


def run_mft(
    examples: Sequence[Example],
    predict: Predict,
    *,
    confidence: float = 0.95,
    gate_on_bound: bool = False,
    min_pass: float | None = None,
    expected: Callable[[Example], Any] | None = None,
) -> ChecklistResult:
    """MFT: the pass rate over labelled examples (``expected(example)``, default its "label")."""
    examples = list(examples)
    labels = []
    for index, example in enumerate(examples):
        if expected is not None:
            labels.append(expected(example))
        elif isinstance(example, dict) and "label" in example:
            labels.append(example["label"])
        else:
            raise ValueError(f"mft needs a 'label' in every example (or expected=); example "
                             f"{index} has none")
    predictions = _predict(predict, examples)
    failures = []
    for example, label, prediction in zip(examples, labels, predictions):
        try:
            good = prediction.parsed and bool(prediction.value == label)
        except (TypeError, ValueError):
            good = False
        if not good:
            failures.append(Failure(
                original=_example_text(example), perturbed=None, before=f"expected {label!r}",
                after=_shown(prediction), before_value=label, after_value=prediction.value,
            ))
    unparsed = sum(not p.parsed for p in predictions)
    return _result("mft", len(examples) - len(failures), len(examples), unparsed, failures,
                   {"min_pass": (min_pass, "min")}, confidence, gate_on_bound)
