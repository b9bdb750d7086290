"""How an answer is read: the option it picks (`extract_choice`), free text normalized
(`normalize_text`), and the Unicode folding both compare by.

Answer extraction for options (`MultipleChoice`, enumerated `Classification`), in this order;
the first step that decides wins:

1. The whole answer is one label or one option text, after markdown (``**``, ``__``, backticks),
   an ``Answer:`` / ``The answer is`` prefix, brackets and trailing punctuation are removed:
   ``B``, ``(B)``, ``B.``, ``**B**``, ``Answer: B``, ``positive``.
2. An explicit pattern anywhere: ``answer is (b)``, ``Answer: B``, ``option 2``, ``choice iii``.
3. Exactly one option text appears in the answer (case-insensitive, whole words; an option text
   contained in a longer matched option text does not count separately); when several appear,
   the one the answer starts with, followed by punctuation or the end (``Positive: ...``).
4. Exactly one distinct label appears wrapped, ``(B)`` / ``[B]`` / the variant's own wrapper.
5. The answer starts with a label followed by punctuation or the end (``B: the falcon``).

Labels are those of the variant's own enumerator (A / a / 1 / I / i / Ⅰ / α / !), matched
case-insensitively. A label that is also an English word (``a``, ``I``) only counts when it is
wrapped or followed by punctuation or the end, never as a word inside a sentence. Anything else is
*unparsed*: scored 0 with ``parsed=False``, never an exception.

Texts are compared after Unicode normalization (NFC, then casefold where case is ignored): "café"
typed as e + combining accent is the label "café".
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Any

_MARKDOWN = re.compile(r"\*\*|__|`+|^#{1,6}\s+(?=\S)", re.MULTILINE)
_PREFIX = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+|right\s+|final\s+)?(?:answer|option|choice|label|sentiment)"
    r"(?:\s+is)?\s*[:=\-]?\s*)", re.IGNORECASE)
_WORDLIKE = {"a", "i"}
_END = r"(?=$|[\s.,;:!?)\]}'\"])"


def nfc(text: str) -> str:
    """One spelling of each character: "é" and "e" + combining accent are the same text."""
    return unicodedata.normalize("NFC", text)


def fold(text: str) -> str:
    """For comparisons that ignore case: NFC, casefold, NFC again (casefold can decompose)."""
    return nfc(nfc(text).casefold())


def lookalike_hint(value: Any, known: Sequence[Any]) -> str:
    """A hint when ``value`` looks like one of ``known`` but differs in invisible characters
    (compatibility forms such as full-width letters, zero-width or format characters)."""
    def skeleton(text: Any) -> str:
        kept = "".join(c for c in unicodedata.normalize("NFKC", str(text))
                       if unicodedata.category(c) != "Cf")
        return fold(kept.strip())

    for other in known:
        if skeleton(value) == skeleton(other):
            return (f" ({value!r} looks like {other!r} but differs in its Unicode characters: "
                    f"{ascii(str(value))} vs {ascii(str(other))}; retype it or normalize the "
                    "data to NFKC)")
    return ""


def _clean(text: str) -> str:
    text = _MARKDOWN.sub("", text or "")
    return re.sub(r"[ \t]+", " ", text).strip()


def _answer_candidates(text: str) -> list[str]:
    """The answer with, successively, prefixes, punctuation and brackets taken off."""
    core = text.strip()
    out = [core]
    for _ in range(2):
        core = _PREFIX.sub("", core).strip()
    out.append(core)
    core = core.strip(" \t\n.,;:!?\"'")
    out.append(core)
    if len(core) >= 2 and core[0] in "([{<" and core[-1] in ")]}>":
        core = core[1:-1].strip()
    elif core.endswith(")") and "(" not in core:
        core = core[:-1]
    out.append(core.strip())
    return [c for c in out if c]


def strip_answer(text: str) -> str:
    candidates = _answer_candidates(text)
    return candidates[-1] if candidates else ""


def _label_pattern(labels: Sequence[str]) -> str:
    ordered = sorted({label for label in labels}, key=len, reverse=True)
    return "|".join(re.escape(label) for label in ordered)


def _find_label(labels: Sequence[str], found: str) -> int | None:
    folded = fold(found)
    for k, label in enumerate(labels):
        if fold(label) == folded:
            return k
    return None


def _word_like(label: str) -> bool:
    return label.casefold() in _WORDLIKE


def extract_choice(text: str, options: Sequence[str], labels: Sequence[str],
                   wrapper: str = "({})") -> int | None:
    """The display position the answer ``text`` picks among ``options`` shown with ``labels``
    (both in display order), or None when it cannot be read (see the module docstring)."""
    if not isinstance(text, str):
        return None
    cleaned = _clean(nfc(text))
    if not cleaned:
        return None
    options, labels = [nfc(str(o)) for o in options], [nfc(str(x)) for x in labels]
    hit = _whole_answer(cleaned, options, labels)
    if hit is None and labels:
        hit = _explicit_pattern(cleaned, labels)
    if hit is None:
        hit = _one_option_text(fold(cleaned), options)
    if hit is None and labels:
        hit = _one_wrapped_label(cleaned, labels, wrapper)
    if hit is None and labels:
        hit = _leading_label(cleaned, labels)
    return hit


def _whole_answer(cleaned: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """Step 1: the whole answer (or its first line) is a label or an option text."""
    first_line = next((line for line in cleaned.splitlines() if line.strip()), "")
    for candidate in (cleaned, first_line):
        for core in _answer_candidates(candidate):
            hit = _find_label(labels, core)
            if hit is None:
                hit = _find_label(options, core)
            if hit is not None:
                return hit
    return None


def _explicit_pattern(cleaned: str, labels: Sequence[str]) -> int | None:
    """Step 2: ``answer is (b)``, ``Answer: B``, ``option 2``, ``choice iii`` anywhere."""
    pattern = re.compile(
        r"(?:answer|option|choice)\s*(?:is|would be|will be|:|=|-)?\s*:?\s*"
        r"(?:option\s+|choice\s+)?([(\[]?)(" + _label_pattern(labels) + r")([)\].]?)" + _END,
        re.IGNORECASE)
    for match in pattern.finditer(cleaned):
        label = match.group(2)
        k = _find_label(labels, label)
        if k is None:
            continue
        wrapped = bool(match.group(1)) and bool(match.group(3))
        if _word_like(label) and not wrapped and re.match(r"\s+\w", cleaned[match.end():]):
            continue  # "answer is a good one": the article, not label a
        return k
    return None


def _one_option_text(folded: str, options: Sequence[str]) -> int | None:
    """Step 3: exactly one option text appears (whole words; one inside a longer matched option
    text does not count); when several do, the one the answer starts with, then punctuation."""
    hits = _option_text_hits(folded, options)
    kept = {k for k, s, e in hits if not _inside_longer_hit(s, e, k, hits)}
    if len(kept) == 1:
        return kept.pop()
    leading = [k for k in kept if any(s == 0 and re.match(r"$|[\s]*[.:;,!)\]-]", folded[e:])
                                      for k2, s, e in hits if k2 == k)]
    return leading[0] if len(leading) == 1 else None


def _option_text_hits(folded: str, options: Sequence[str]) -> list[tuple[int, int, int]]:
    """(option index, start, end) of every whole-word occurrence of an option text."""
    hits: list[tuple[int, int, int]] = []
    for k, option in enumerate(options):
        opt = fold(option).strip()
        if opt:
            hits += [(k, m.start(), m.end())
                     for m in re.finditer(r"(?<!\w)" + re.escape(opt) + r"(?!\w)", folded)]
    return hits


def _inside_longer_hit(start: int, end: int, k: int, hits: list[tuple[int, int, int]]) -> bool:
    return any(k2 != k and s2 <= start and end <= e2 and (e2 - s2) > (end - start)
               for k2, s2, e2 in hits)


def _one_wrapped_label(cleaned: str, labels: Sequence[str], wrapper: str) -> int | None:
    """Step 4: exactly one distinct label appears wrapped: ``(B)``, ``[B]`` or the variant's own
    wrapper (when it has a visible opening or a closing bracket)."""
    alt = _label_pattern(labels)
    forms = [r"\((" + alt + r")\)", r"\[(" + alt + r")\]"]
    if "{}" in wrapper:
        before, after = wrapper.split("{}", 1)
        if before.strip() or after.strip() in (")", "]", ">"):
            forms.append(r"(?<!\w)" + re.escape(before) + "(" + alt + ")" + re.escape(after)
                         + _END)
    found = {_find_label(labels, hit.group(1))
             for form in forms for hit in re.finditer(form, cleaned, re.IGNORECASE)}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _leading_label(cleaned: str, labels: Sequence[str]) -> int | None:
    """Step 5: the answer starts with a label followed by punctuation or the end, or with a
    one-letter capital label and a space (``B the falcon``; never the words ``a`` or ``I``)."""
    alt = _label_pattern(labels)
    m = re.match(r"^[(\[]?(" + alt + r")(?:[)\].:,\-]|$)", cleaned, re.IGNORECASE)
    if m:
        return _find_label(labels, m.group(1))
    m = re.match(r"^(" + alt + r")\s", cleaned, re.IGNORECASE)
    if m and not _word_like(m.group(1)) and len(m.group(1)) == 1 and m.group(1).isupper():
        return _find_label(labels, m.group(1))
    return None


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_text(text: str) -> str:
    """Lowercase, no punctuation, no articles, single spaces (SQuAD-style)."""
    text = _clean(nfc(text)).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())
