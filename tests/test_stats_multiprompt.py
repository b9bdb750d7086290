"""The published Mizrahi et al. (TACL 2024) AvgP / MaxP / CPS tables, reproduced from the raw
per-paraphrase accuracies (tests/data/multiprompt, CDLA-Permissive-2.0, see LICENSE_NOTICE.md).

The published CSVs print full float64 round-trip precision (e.g. 0.6093582887700534), so "to the
published rounding" means bit-for-bit: ``float(cell) == computed``. Every non-empty cell of the
no_filtering tables (15 BBH tasks x 11 models x 3 metrics = 495) is one test case.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pytest_reliable.stats import avgp, cps, maxp

DATA = Path(__file__).parent / "data" / "multiprompt"
METRICS = {"AvgP": avgp, "MaxP": maxp, "CPS": cps}


def load_accuracies() -> dict[tuple[str, str], list[float]]:
    """(task, model) -> the per-paraphrase accuracies, in file order."""
    out: dict[tuple[str, str], list[float]] = {}
    for path in sorted((DATA / "paraphrases_accuracies" / "BBH").glob("*.csv")):
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        header = rows[0]
        for col, name in enumerate(header[1:], start=1):
            model = name.removesuffix("_acc")
            out[(path.stem, model)] = [float(row[col]) for row in rows[1:]]
    return out


def load_published() -> list[tuple[str, str, str, str]]:
    """(task, model, metric, published text) for every non-empty cell (empty = not evaluated)."""
    cells: list[tuple[str, str, str, str]] = []
    for metric in METRICS:
        path = DATA / "published" / f"open-source_models_{metric}_no_filtering.csv"
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        header = [h.strip() for h in rows[0]]
        assert header[:2] == ["benchmark", "task"]
        for row in rows[1:]:
            for model, text in zip(header[2:], row[2:]):
                if text.strip():
                    cells.append((row[1].strip(), model, metric, text.strip()))
    return cells


ACCURACIES = load_accuracies()
CELLS = load_published()


def test_every_published_cell_is_checked() -> None:
    assert len(CELLS) == 495  # 15 tasks x 11 evaluated models x 3 metrics
    missing = [(t, m) for t, m, _, _ in CELLS if (t, m) not in ACCURACIES]
    assert missing == []
    # every (task, model) with accuracies appears in all three tables
    assert {(t, m) for t, m, _, _ in CELLS} == set(ACCURACIES)


def test_published_precision_is_full_float64() -> None:
    """The CSV cells are float64 reprs, so exact equality is the published rounding."""
    for _, _, _, text in CELLS:
        assert repr(float(text)) == text or float(repr(float(text))) == float(text)


@pytest.mark.parametrize(
    ("task", "model", "metric", "published"),
    CELLS,
    ids=[f"{t}-{m}-{metric}" for t, m, metric, _ in CELLS],
)
def test_published_table_cell(task: str, model: str, metric: str, published: str) -> None:
    computed = METRICS[metric](ACCURACIES[(task, model)])
    assert computed == float(published), (computed, published)
