"""Invariance perturbations (SPEC section 4): meaning-preserving edits of an example's text, with
the small hand-written lexicons of this project. Each returns the edited text, or None when it
does not apply."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pytest_reliable.checklist.text import WORD, is_negator, match_case, on_text, pick


@on_text
def typos(text: str, rng: np.random.Generator) -> str | None:
    """Swap two adjacent inner letters of one or two words of length >= 4 (negators untouched)."""
    candidates = []
    for match in WORD.finditer(text):
        word = match.group()
        if len(word) < 4 or not word.isalpha() or is_negator(word):
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
        i = int(pick(rng, inner))
        swapped = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if is_negator(swapped):
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


@on_text
def synonyms(text: str, rng: np.random.Generator) -> str | None:
    """Replace one word with a hand-listed synonym (e.g. movie <-> film, big <-> large)."""
    matches = [m for m in WORD.finditer(text) if m.group().lower() in SYNONYMS]
    if not matches:
        return None
    match = pick(rng, matches)
    new = match_case(match.group(), SYNONYMS[match.group().lower()])
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
    old = pick(rng, found)
    others = [entry for entry in group_of[old] if entry != old and entry not in found]
    if not others:
        return None
    new = pick(rng, others)
    return re.sub(rf"\b{re.escape(old)}\b", new, text)


@on_text
def names(text: str, rng: np.random.Generator) -> str | None:
    """Swap a first name from the lexicon for another one (same list; every occurrence)."""
    return _swap_entity(text, rng, FIRST_NAMES)


@on_text
def locations(text: str, rng: np.random.Generator) -> str | None:
    """Swap a city for a city, or a country for a country (every occurrence)."""
    return _swap_entity(text, rng, (CITIES, COUNTRIES))


INTEGER = re.compile(r"(?<![\w.,])\d+(?![\w]|[.,]\d)")


@on_text
def numbers_(text: str, rng: np.random.Generator) -> str | None:
    """Change one integer by a small amount (1-3, staying >= 0); [] without an integer."""
    matches = [m for m in INTEGER.finditer(text)
               if len(m.group()) < 16 and not (len(m.group()) > 1 and m.group()[0] == "0")]
    if not matches:
        return None
    match = pick(rng, matches)
    value = int(match.group())
    delta = int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)
    if value + delta < 0:
        delta = -delta
    return text[: match.start()] + str(value + delta) + text[match.end():]


@on_text
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
        at = int(pick(rng, commas))
        options.append(text[:at] + text[at + 1:])
    if not options:
        return None
    return pick(rng, options)


@on_text
def whitespace(text: str, rng: np.random.Generator) -> str | None:
    """Double one existing space, or add a trailing space."""
    if not text.strip():
        return None
    spaces = [m.start() for m in re.finditer(" ", text.strip())]
    offset = len(text) - len(text.lstrip())
    options = [text + " "]
    if spaces:
        at = offset + int(pick(rng, spaces))
        options.append(text[:at] + " " + text[at:])
    return pick(rng, options)


@on_text
def casing(text: str, rng: np.random.Generator) -> str | None:
    """Lower- or upper-case the whole text (whichever changes it; [] when neither does)."""
    options = [t for t in (text.lower(), text.upper()) if t != text]
    if not options:
        return None
    return pick(rng, options)


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


@on_text
def contractions(text: str, rng: np.random.Generator) -> str | None:
    """Expand every contraction ("isn't" -> "is not") or contract every expandable phrase."""
    options = [t for t in (_expand(text), _contract(text)) if t != text]
    if not options:
        return None
    return pick(rng, options)


NEUTRAL_PREFIXES: tuple[str, ...] = ("Anyway, ", "So, ", "For the record, ")
NEUTRAL_SUFFIXES: tuple[str, ...] = (" That is all.", " End of message.")
_LOWER_STARTERS = frozenset({
    "the", "a", "an", "this", "that", "these", "those", "it", "we", "they", "he", "she", "you",
    "my", "our", "your", "his", "her", "their", "there", "what", "how", "which", "who", "when",
    "where", "why", "is", "are", "was", "were", "do", "does", "did", "can", "will", "in", "on",
    "at", "for", "of", "to", "after", "before", "if",
})


@on_text
def neutral_phrase(text: str, rng: np.random.Generator) -> str | None:
    """Prepend ("Anyway, ...") or append (" That is all.") a phrase that carries no meaning."""
    if not text.strip():
        return None
    if rng.random() < 0.5:
        prefix = pick(rng, NEUTRAL_PREFIXES)
        stripped = text.lstrip()
        first = WORD.match(stripped)
        head = re.split("['\u2019]", first.group())[0] if first else ""
        if first and head.lower() in _LOWER_STARTERS and first.group()[1:].islower():
            stripped = stripped[:1].lower() + stripped[1:]
        new = text[: len(text) - len(stripped)] + prefix + stripped
    else:
        suffix = pick(rng, NEUTRAL_SUFFIXES)
        body = text.rstrip()
        if body[-1].isalnum():
            body += "."
        new = body + suffix
    return new

