"""Space: defaults, normalization, hash, validity rules, YAML errors, lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from pytest_reliable import strategies
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space import (
    Space,
    Variant,
    compare_lock,
    enumerator_labels,
    iter_variants,
    load_spaces,
    parse_spaces,
    read_lock,
    write_lock,
)

SPEC_EXAMPLE = '''
spaces:
  mcq:                                  # a comment
    instruction: ["Answer with the label of the correct option.", "Pick the right option."]
    field_marker: ["Question:", "Q:", ""]      # before the question
    answer_sentinel: ["Answer:", ""]           # last line of the prompt
    casing: [identity, upper, lower, title]    # applied to markers and sentinel
    field_spacing: ["\\n", "\\n\\n"]
    enumerator: [upper, lower, number, roman]
    wrapper: ["({})", "{}.", "{})", "[{}]"]
    option_separator: ["\\n", "; ", " | "]
    option_order: permute
    few_shot: {count: [0, 3], pool: 10, order: shuffle}
    system_message: [null, "You are a careful assistant."]
    temperature: [0.0]
    canonical: {enumerator: upper}
'''

BLOCK_STYLE = '''
spaces:
  mcq:
    canonical:
      enumerator: upper
    temperature:
      - 0
    system_message:
      - null
      - You are a careful assistant.
    few_shot:
      order: shuffle
      pool: 10
      count:
        - 0
        - 3
    option_order: permute
    option_separator:
      - "\\n"
      - "; "
      - " | "
    wrapper:
      - ({})
      - '{}.'
      - '{})'
      - '[{}]'
    enumerator:
      - upper
      - lower
      - number
      - roman
    field_spacing: ["\\n", "\\n\\n"]
    casing: [identity, upper, lower, title]
    answer_sentinel: ["Answer:", '']
    field_marker: ['Question:', 'Q:', ""]
    instruction:
      - Answer with the label of the correct option.
      - Pick the right option.
'''


def test_defaults_fill_every_key() -> None:
    space = Space.from_mapping("s", {})
    norm = space.normalized()
    assert norm["field_marker"] == ["Question:"]
    assert norm["answer_sentinel"] == ["Answer:"]
    assert norm["casing"] == ["identity"]
    assert norm["field_spacing"] == ["\n"]
    assert norm["enumerator"] == ["upper"]
    assert norm["wrapper"] == ["({})"]
    assert norm["option_separator"] == ["\n"]
    assert norm["option_order"] == "fixed"
    assert norm["few_shot"]["count"] == [0]
    assert norm["system_message"] == [None]
    assert norm["temperature"] == [0.0]
    assert norm["instruction"] == [None]
    assert space.n_valid_variants(4) == 1
    assert space.canonical_variant() == Variant()
    # pinned: the hash of the all-defaults declaration must not drift between releases
    assert space.hash == "1d5db0de41bad55c4e45c536b92b6b7583f29c203a1397d64a9340a7ec065f5e"


def test_hash_independent_of_key_order_flow_block_style_and_comments() -> None:
    flow = parse_spaces(SPEC_EXAMPLE)["mcq"]
    block = parse_spaces(BLOCK_STYLE)["mcq"]
    assert flow.normalized() == block.normalized()
    assert flow.hash == block.hash
    assert len(flow.hash) == 64


def test_hash_defaults_filled_in_and_canonical_equal_to_first_is_no_change() -> None:
    a = Space.from_mapping("x", {"enumerator": ["upper", "number"]})
    b = Space.from_mapping("x", {"enumerator": ["upper", "number"], "casing": ["identity"],
                                 "canonical": {"enumerator": "upper"}, "temperature": [0]})
    c = Space.from_mapping("x", {"enumerator": ["number", "upper"]})
    assert a.hash == b.hash
    assert a.hash != c.hash


def test_spec_example_dimensions_and_display() -> None:
    space = parse_spaces(SPEC_EXAMPLE)["mcq"]
    assert space.dimensions["enumerator"] == ("upper", "lower", "number", "roman")
    assert space.dimensions["few_shot"] == (0, 3)
    assert set(space.format_dimensions) == {
        "instruction", "field_marker", "answer_sentinel", "casing", "field_spacing",
        "enumerator", "wrapper", "option_separator", "system_message"}
    assert space.display_value("wrapper", "({})") == "({})"
    assert space.display_value("enumerator", "upper") == "upper"
    assert space.display_value("temperature", 0.0) == "0.0"
    assert space.display_value("system_message", None) == "null"
    assert space.display_value("field_spacing", "\n") == "\\n"
    canonical = space.canonical_variant()
    assert canonical.instruction == "Answer with the label of the correct option."
    assert canonical.enumerator == "upper" and canonical.order is None
    assert space.is_valid(canonical, 4)


def test_r3_casings_of_empty_markers_count_once() -> None:
    space = Space.from_mapping("x", {"field_marker": [""], "answer_sentinel": [""],
                                     "casing": ["identity", "upper", "lower", "title"]})
    assert space.n_valid_variants(4) == 1
    both = Space.from_mapping("x", {"field_marker": ["", "Q:"], "answer_sentinel": [""],
                                    "casing": ["identity", "upper", "lower", "title"]})
    # "" -> 1 rendering; "Q:" -> identity/title "Q:", upper "Q:", lower "q:" -> 2 renderings.
    assert both.n_valid_variants(4) == 3
    assert not both.is_valid(Variant(field_marker="", answer_sentinel="", casing="upper"))


def test_r1_newline_rule() -> None:
    space = Space.from_mapping("x", {"field_spacing": ["\n", " "],
                                     "option_separator": ["\n", "; "]})
    assert space.n_valid_variants(4) == 3  # (" ", "\n") is invalid
    assert space.is_valid(Variant(field_spacing=" ", option_separator="; "))
    assert not space.is_valid(Variant(field_spacing=" ", option_separator="\n"))
    assert space.violations(Variant(field_spacing=" ", option_separator="\n"))[0].startswith("R1")


def test_r2_unicode_roman_only_up_to_12_options() -> None:
    space = Space.from_mapping("x", {"enumerator": ["upper", "unicode_roman"]})
    assert space.n_valid_formats(12) == 2
    assert space.n_valid_formats(13) == 1
    assert enumerator_labels("unicode_roman", 3) == ("Ⅰ", "Ⅱ", "Ⅲ")
    assert enumerator_labels("greek", 3) == ("α", "β", "γ")
    assert enumerator_labels("lower_roman", 4) == ("i", "ii", "iii", "iv")
    assert enumerator_labels("keyboard", 3) == ("!", "@", "#")
    assert enumerator_labels("number", 3) == ("1", "2", "3")


@settings(max_examples=200, deadline=None)
@given(strategies.variants(parse_spaces(SPEC_EXAMPLE)["mcq"], n_options=4))
def test_every_strategy_variant_is_valid(variant: Variant) -> None:
    space = parse_spaces(SPEC_EXAMPLE)["mcq"]
    assert space.is_valid(variant, 4)


def test_iter_variants_count_matches() -> None:
    space = Space.from_mapping("x", {"field_marker": ["Q:", ""], "casing": ["identity", "upper"],
                                     "answer_sentinel": [""], "option_order": "permute"})
    listed = list(iter_variants(space, 3))
    # "Q:" and "" both read the same in upper case: one casing each counts -> 2 formats.
    assert len(listed) == len(set(listed)) == space.n_valid_variants(3) == 2 * 6


def test_default_space_is_modest_and_valid() -> None:
    space = Space.default()
    assert space.option_order == "permute"
    assert space.n_valid_formats(4) == 216
    assert space.is_valid(space.canonical_variant(), 4)
    assert Space.plain().is_plain and not space.is_plain


def test_variant_format_key_and_describe() -> None:
    a = Variant(enumerator="number", order=(1, 0))
    b = Variant(enumerator="number", order=(0, 1), temperature=0.7)
    assert a.format_key == b.format_key != Variant().format_key
    text = a.describe()
    assert "enumerator number" in text and "order 2,1" in text
    assert hash(a) == hash(Variant(enumerator="number", order=(1, 0)))


# -- errors ---------------------------------------------------------------------------------

BAD = [
    ('spaces:\n  mcq:\n    wrapper: ["({})"\n', ["reliable.yaml", "line", "broken YAML", "Fix"]),
    ("spaces:\n  mcq:\n    colour: [red]\n",
     ["reliable.yaml, line 3", "spaces.mcq.colour", "unknown key", "Fix"]),
    ("spaces:\n  mcq:\n    wrapper: []\n",
     ["reliable.yaml, line 3", "spaces.mcq.wrapper", "empty", "Fix"]),
    ("spaces:\n  mcq:\n    enumerator: [upper,\n      klingon]\n",
     ["reliable.yaml, line 4", "spaces.mcq.enumerator[1]", "klingon", "Fix: use values among"]),
    ("spaces:\n  mcq:\n    temperature: [hot]\n",
     ["reliable.yaml, line 3", "spaces.mcq.temperature[0]", "hot", "Fix"]),
    ("spaces:\n  mcq:\n    enumerator: [upper]\n    canonical: {enumerator: lower}\n",
     ["reliable.yaml, line 4", "spaces.mcq.canonical.enumerator", "lower", "Fix: pick one of"]),
    ("spaces:\n  mcq:\n    field_marker: [1]\n",
     ["line 3", "spaces.mcq.field_marker[0]", "not a string", "Fix"]),
    ("spaces:\n  mcq:\n    wrapper: [\"A\"]\n", ["line 3", "spaces.mcq.wrapper[0]", "{}"]),
    ("spaces:\n  mcq:\n    casing: [identity, shouting]\n",
     ["line 3", "spaces.mcq.casing[1]", "shouting"]),
    ("spaces:\n  mcq:\n    option_order: sorted\n", ["line 3", "spaces.mcq.option_order"]),
    ("spaces:\n  mcq:\n    few_shot: {count: [0, 3], pool: 2}\n",
     ["line 3", "spaces.mcq.few_shot.pool"]),
    ("spaces:\n  mcq:\n    field_spacing: [\" \"]\n", ["R1", "spaces.mcq", "Fix"]),
    ("spaces:\n  mcq:\n    enumerator: [upper, upper]\n",
     ["spaces.mcq.enumerator[1]", "duplicate"]),
    ("space:\n  mcq: {}\n", ["reliable.yaml", "spaces", "Fix"]),
]


@pytest.mark.parametrize(("text", "needles"), BAD)
def test_bad_yaml_messages_name_file_key_line_and_fix(
        tmp_path: Path, text: str, needles: list[str]) -> None:
    path = tmp_path / "reliable.yaml"
    path.write_text(text)
    with pytest.raises(ReliableConfigError) as info:
        load_spaces(path)
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    assert info.value.__cause__ is None and "Traceback" not in message


def test_code_declared_space_errors_name_the_key_path() -> None:
    with pytest.raises(ReliableConfigError, match=r"spaces\.mine\.enumerator\[0\]"):
        Space.from_mapping("mine", {"enumerator": ["klingon"]})


def test_scalar_value_means_one_value() -> None:
    assert Space.from_mapping("x", {"enumerator": "number"}).dimensions["enumerator"] == (
        "number",)


def test_empty_file_has_no_spaces(tmp_path: Path) -> None:
    (tmp_path / "reliable.yaml").write_text("# nothing yet\n")
    assert load_spaces(tmp_path / "reliable.yaml") == {}


# -- lock -----------------------------------------------------------------------------------


def test_lock_roundtrip_and_compare(tmp_path: Path) -> None:
    spaces = parse_spaces(SPEC_EXAMPLE)
    lock = tmp_path / "reliable.lock"
    write_lock(lock, spaces)
    data = json.loads(lock.read_text())
    assert data["spaces"]["mcq"]["hash"] == spaces["mcq"].hash
    assert compare_lock(spaces, read_lock(lock)) == []
    assert compare_lock(parse_spaces(BLOCK_STYLE), read_lock(lock)) == []

    changed = parse_spaces(SPEC_EXAMPLE.replace("[upper, lower, number, roman]",
                                                "[upper, lower, number, greek]"))
    changed["extra"] = Space.from_mapping("extra", {})
    diffs = compare_lock(changed, read_lock(lock))
    assert [d.describe() for d in diffs] == [
        "space 'extra': missing from the lock",
        "space 'mcq': changed enumerator",
    ]


def test_unreadable_lock(tmp_path: Path) -> None:
    lock = tmp_path / "reliable.lock"
    lock.write_text("{not json")
    with pytest.raises(ReliableConfigError, match="reliable.lock"):
        read_lock(lock)


def test_core_modules_import_without_pytest() -> None:
    import subprocess
    import sys

    code = ("import sys; import pytest_reliable.space, pytest_reliable.plan.sampling, "
            "pytest_reliable.plan.render, pytest_reliable.tasks.builtin, "
            "pytest_reliable.plan.data, pytest_reliable.errors; "
            "assert 'pytest' not in sys.modules, 'pytest imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
