"""Enumerators (the option labels: A / a / 1 / I / i / Ⅰ / α / !) and casings."""

from __future__ import annotations

ENUMERATORS: tuple[str, ...] = (
    "upper", "lower", "number", "roman", "lower_roman", "unicode_roman", "greek", "keyboard",
)
CASINGS: tuple[str, ...] = ("identity", "upper", "lower", "title")
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
KEYBOARD = "!@#$%^&*~+"
ENUMERATOR_CAPACITY: dict[str, int | None] = {
    "upper": None, "lower": None, "number": None, "roman": None, "lower_roman": None,
    "unicode_roman": 12, "greek": len(GREEK), "keyboard": len(KEYBOARD),
}


def _roman(n: int) -> str:
    out = []
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
                           (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"),
                           (4, "IV"), (1, "I")):
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


def _letters(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def enumerator_label(enumerator: str, i: int) -> str:
    """The label of option ``i`` (0-based) under ``enumerator``; ValueError past its capacity."""
    capacity = ENUMERATOR_CAPACITY[enumerator]
    if capacity is not None and i >= capacity:
        raise ValueError(f"enumerator {enumerator} has only {capacity} labels")
    if enumerator == "upper":
        return _letters(i)
    if enumerator == "lower":
        return _letters(i).lower()
    if enumerator == "number":
        return str(i + 1)
    if enumerator == "roman":
        return _roman(i + 1)
    if enumerator == "lower_roman":
        return _roman(i + 1).lower()
    if enumerator == "unicode_roman":
        return chr(0x2160 + i)
    if enumerator == "greek":
        return GREEK[i]
    if enumerator == "keyboard":
        return KEYBOARD[i]
    raise ValueError(f"unknown enumerator {enumerator!r}")


def enumerator_labels(enumerator: str, n: int) -> tuple[str, ...]:
    return tuple(enumerator_label(enumerator, i) for i in range(n))


def apply_casing(casing: str, text: str) -> str:
    if casing == "upper":
        return text.upper()
    if casing == "lower":
        return text.lower()
    if casing == "title":
        return text.title()
    return text
