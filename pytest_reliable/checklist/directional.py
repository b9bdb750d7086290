"""Directional perturbations (SPEC section 4): edits that should change the prediction in a known
direction (``negation``, ``intensify``), with their lexicons."""

from __future__ import annotations

import re

import numpy as np

from pytest_reliable.checklist.text import WORD, is_negator, match_case, on_text, pick

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
    if not words or any(is_negator(w.group()) for w in words):
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
        return text[:start] + head + middle + match_case(match.group(), base) + text[match.end():]
    return None


@on_text
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


@on_text
def intensify(text: str, rng: np.random.Generator) -> str | None:
    """Put "really" or "very" before a lexicon adjective ("good" -> "really good"); [] when the
    text has no such adjective or it is intensified already."""
    words = list(WORD.finditer(text))
    for i, match in enumerate(words):
        if match.group().lower() not in INTENSIFIABLE:
            continue
        if i > 0 and words[i - 1].group().lower() in _ALREADY_INTENSE:
            return None
        adverb = pick(rng, INTENSIFIERS)
        adjective = match.group()
        if len(adjective) > 1 and adjective.isupper():
            adverb = adverb.upper()
        elif adjective[:1].isupper():
            adverb = adverb.capitalize()
            adjective = adjective[:1].lower() + adjective[1:]
        return text[: match.start()] + f"{adverb} {adjective}" + text[match.end():]
    return None

