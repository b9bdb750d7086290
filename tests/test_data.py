"""Datasets: loaders (JSONL, CSV, YAML, JSON, BBH), hash, immutability, errors with locations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from pytest_reliable import strategies
from pytest_reliable.errors import DatasetError
from pytest_reliable.plan.data import Dataset
from pytest_reliable.tasks.builtin import Classification, Generation, MultipleChoice

BBH = Path(__file__).parent / "data" / "bbh"
RECORDS: list[dict[str, Any]] = [
    {"question": "2 + 2?", "choices": ["3", "4"], "answer": 1},
    {"question": "Sky colour?", "choices": ["blue", "green", "red"], "answer": "blue"},
]


def test_from_records_hash_len_iter_getitem() -> None:
    data = Dataset.from_records(RECORDS, name="tiny")
    assert len(data) == 2 and data[1]["answer"] == "blue" and list(data) == RECORDS
    assert data.name == "tiny" and data.source is None
    reordered = Dataset.from_records([{k: r[k] for k in reversed(list(r))} for r in RECORDS])
    assert data.hash == reordered.hash  # key order does not matter
    assert data.hash != Dataset.from_records(RECORDS[::-1]).hash
    assert len(data[:1]) == 1 and isinstance(data[:1], Dataset)
    with pytest.raises(AttributeError):
        data.foo = 1  # type: ignore[attr-defined]
    assert data.where(1) == "tiny, record 2"


def test_jsonl_csv_yaml_json_agree(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n\n")
    (tmp_path / "d.csv").write_text(
        'question,choices,answer\n2 + 2?,"[""3"", ""4""]",1\nSky colour?,blue|green|red,blue\n')
    (tmp_path / "d.yaml").write_text(
        "- question: 2 + 2?\n  choices: ['3', '4']\n  answer: 1\n"
        "- question: Sky colour?\n  choices: [blue, green, red]\n  answer: blue\n")
    (tmp_path / "d.json").write_text(json.dumps(RECORDS))
    hashes = {Dataset.from_file(tmp_path / f"d.{ext}").hash for ext in ("jsonl", "csv", "yaml",
                                                                          "json")}
    assert hashes == {Dataset.from_records(RECORDS).hash}
    assert Dataset.from_file(tmp_path / "d.csv").where(1) == "d.csv, line 3"
    assert Dataset.from_file(tmp_path / "d.yaml").where(1) == "d.yaml, line 4"


def test_loader_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(RECORDS[0]) + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 2: not JSON"):
        Dataset.from_file(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DatasetError, match="empty"):
        Dataset.from_file(empty)
    csv_bad = tmp_path / "bad.csv"
    csv_bad.write_text('question,choices,answer\nq,"[1, 2",0\n')
    with pytest.raises(DatasetError, match=r"bad\.csv, line 2: field 'choices'"):
        Dataset.from_file(csv_bad)
    with pytest.raises(DatasetError, match="unknown data format"):
        Dataset.from_file(tmp_path / "x.parquet")
    yaml_bad = tmp_path / "bad.yaml"
    yaml_bad.write_text("- question: [\n")
    with pytest.raises(DatasetError, match=r"bad\.yaml, line \d+: broken YAML"):
        Dataset.from_file(yaml_bad)


def test_validation_errors_point_at_the_csv_row(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("question,choices,answer\nq1,a|b,0\nq2,a|b|a,0\nq3,a|b,c\n")
    with pytest.raises(DatasetError, match=r"d\.csv, line 3: field 'choices' has duplicate"):
        MultipleChoice().validate(Dataset.from_file(path))


def test_from_bbh_multiple_choice() -> None:
    data = Dataset.from_bbh(BBH / "date_understanding.json", limit=5)
    assert len(data) == 5 and data.name == "date_understanding"
    first = data[0]
    assert first["question"] == ("Today is Christmas Eve of 1937. What is the date tomorrow in "
                                 "MM/DD/YYYY?")
    assert first["choices"][:2] == ["12/11/1937", "12/25/1937"]
    assert first["answer"] == 1
    MultipleChoice().validate(data)
    assert len(Dataset.from_bbh(BBH / "date_understanding.json")) == 250


def test_from_bbh_dash_options_and_text_target() -> None:
    data = Dataset.from_bbh(BBH / "navigate.json", limit=3)
    assert data[0]["choices"] == ["Yes", "No"]
    MultipleChoice().validate(data)


def test_from_bbh_without_options_is_generation_shaped() -> None:
    data = Dataset.from_bbh(BBH / "boolean_expressions.json", limit=4)
    assert set(data[0]) == {"question", "reference"}
    Generation("exact").validate(data)
    assert data[0] == {"question": "not ( True ) and ( True ) is", "reference": "False"}


def test_from_bbh_drops_the_question_label_the_prompt_adds_itself(tmp_path: Path) -> None:
    """BBH's web_of_lies inputs start with "Question:"; the prompt's field marker labels the
    question, so kept it rendered "Question: Question: ..." at the default canonical variant."""
    from pytest_reliable.plan.render import render
    from pytest_reliable.space import Space

    path = tmp_path / "web_of_lies.json"
    path.write_text(json.dumps({"examples": [
        {"input": "Question: Ann lies. Bo says Ann lies. Does Bo tell the truth?", "target": "Yes"},
        {"input": "Ann lies. Question: does Bo?\nOptions:\n(A) Yes\n(B) No", "target": "(B)"},
    ]}))
    data = Dataset.from_bbh(path)
    assert data[0] == {"question": "Ann lies. Bo says Ann lies. Does Bo tell the truth?",
                       "reference": "Yes"}
    assert data[1]["question"] == "Ann lies. Question: does Bo?"  # only a leading label goes
    space = Space.default()
    content = render(space, space.canonical_variant(), data[0], Generation("exact"),
                     []).messages[-1]["content"]
    assert content.count("Question:") == 1, content
    assert "Question: Ann lies." in content


def test_from_bbh_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"examples": [{"input": "q\nOptions:\n(A) a\n(B) b",
                                              "target": "(C)"}]}))
    with pytest.raises(DatasetError, match=r"x\.json, example 1: field 'target'"):
        Dataset.from_bbh(path)
    path.write_text("[]")
    with pytest.raises(DatasetError, match="examples"):
        Dataset.from_bbh(path)


@settings(max_examples=40, deadline=None)
@given(mcq=strategies.datasets("multiple_choice"), cls=strategies.datasets("classification"),
       gen=strategies.datasets("generation"))
def test_strategy_datasets_validate(mcq: Dataset, cls: Dataset, gen: Dataset) -> None:
    MultipleChoice().validate(mcq)
    Classification(labels=["positive", "negative"]).validate(cls)
    Generation().validate(gen)
    assert Dataset.from_records(list(mcq)).hash == mcq.hash
