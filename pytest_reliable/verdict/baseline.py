"""The release candidate against a baseline, paired (SPEC section 9). No pytest here.

The candidate is the model under test; the baseline is production: another model run through the
candidate's own plan (same variants, instances, sample indexes, seed, cache and runner), or the
per-instance results of an earlier run stored in its JSON report. `compare` turns the two score
matrices into the paired difference with clustered bounds, McNemar's exact test on the canonical
pass, per-group paired differences over the test's grouping and ILR's ORP.

The `max_regression` decision is not made here: it is one more threshold of the test, decided by
`pytest_reliable.verdict.gate` (in the test's Holm family under fail-on-evidence) from this
comparison's paired difference; the gate's check is attached to the comparison as ``check``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pytest_reliable import stats
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.evaluate.evaluation import CellResult, ScoreMatrix

if TYPE_CHECKING:
    from pytest_reliable.verdict.gate import ThresholdCheck
    from pytest_reliable.verdict.ranges import RangeSummary

SHOWN_GROUPS = 3
"""Groups named in a failure message: the largest regressions."""
_TOLERANCE = 1e-12


class BaselineUsageError(ReliableConfigError):
    """A baseline that cannot be used as configured (a stored report that does not match this run,
    a model that cannot be built, ``max_regression`` with nothing to compare against). The plugin
    turns it into a usage error: the run stops with exit code 4."""


# -- what the baseline contributes -----------------------------------------------------------
@dataclass
class BaselineScores:
    """The baseline's scores on the candidate's cells: ``scores[r, i]`` is the same prompt as the
    candidate's ``scores[r, i]``. ``cells`` (with the baseline's answers) only for a live run."""

    model: str
    source: str
    """"model" (run now) or "report" (read from a stored JSON report)."""
    scores: npt.NDArray[np.float64]
    canonical_scores: npt.NDArray[np.float64]
    cells: list[CellResult] | None = None
    calls_made: int = 0
    calls_cached: int = 0
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_matrix(cls, model: str, matrix: ScoreMatrix) -> BaselineScores:
        return cls(
            model=model, source="model", scores=matrix.scores,
            canonical_scores=matrix.canonical_scores, cells=matrix.cells,
            calls_made=matrix.calls_made, calls_cached=matrix.calls_cached,
            problems=list(matrix.problems),
        )


def per_instance(matrix: ScoreMatrix) -> list[dict[str, Any]]:
    """What a later run needs to pair with this one without calling its model (JSON
    ``per_instance``): per instance, the mean over the resamplings, the score in each resampling
    and the canonical pass's scores."""
    return [
        {
            "mean": float(matrix.scores[:, i].mean()),
            "scores": [float(s) for s in matrix.scores[:, i]],
            "canonical": [float(s) for s in matrix.canonical_scores[:, i]],
        }
        for i in range(matrix.n_instances)
    ]


# -- a stored baseline: an earlier run's JSON report -----------------------------------------
@dataclass(frozen=True)
class StoredBaseline:
    """``--reliable-baseline-report PATH.json``: production's last gate run, matched by nodeid."""

    path: Path
    seed: int | None
    model: str | None
    entries: Mapping[str, Mapping[str, Any]]

    @classmethod
    def load(cls, path: Path) -> StoredBaseline:
        """The report at ``path``, every reliable entry checked: a score outside [0, 1], a row of
        another length or a test stored twice would pair this run with numbers no run made."""
        from pytest_reliable.schema.load import ReportFileError, load_report

        if not Path(path).exists():
            raise BaselineUsageError(
                f"--reliable-baseline-report {path}: no such file; give the JSON report "
                "(--reliable-report) of the baseline's run")
        try:
            report = load_report(path)
        except ReportFileError as error:
            raise BaselineUsageError(
                f"--reliable-baseline-report: not a readable JSON report: {error}") from None
        entries: dict[str, Mapping[str, Any]] = {}
        for index, entry in enumerate(report["tests"]):
            if entry.get("kind") != "reliable":
                continue
            nodeid = entry.get("nodeid")
            if not isinstance(nodeid, str):
                raise BaselineUsageError(_stored_problem(
                    path, f"tests[{index}]", "nodeid", f"is {_json_kind(nodeid)}, not a string"))
            if nodeid in entries:
                raise BaselineUsageError(_stored_problem(
                    path, nodeid, "nodeid", "is stored twice (which copy is the baseline?)"))
            _check_per_instance(path, nodeid, entry.get("per_instance"))
            entries[nodeid] = entry
        seed = report.get("seed")
        model = report.get("model")
        return cls(Path(path), seed if isinstance(seed, int) else None,
                   model if isinstance(model, str) else None, entries)

    def differences(
        self, nodeid: str, *, seed: int, space_hash: str, dataset_hash: str, mode: str,
        n: int | None, n_instances: int | None = None, k: int | None = None,
    ) -> list[str]:
        """What differs between this run's test and the stored entry (empty: they pair)."""
        entry = self.entries.get(nodeid)
        if entry is None:
            return ["the test is missing from it (no reliable entry with this nodeid)"]
        found: list[str] = []
        if entry.get("verdict") == "error" or not entry.get("per_instance"):
            found.append("it holds no per-instance results for the test (its run did not "
                         "complete, or was written by a version without per_instance)")
        if self.seed != seed:
            found.append(f"seed: stored {self.seed}, this run {seed}")
        pairs: list[tuple[str, Any, Any]] = [
            ("space hash", entry.get("space_hash"), space_hash),
            ("dataset hash", entry.get("dataset_hash"), dataset_hash),
            ("mode", entry.get("mode"), mode),
        ]
        if n is not None:
            pairs.append(("n (resamplings)", entry.get("n_resamplings"), n))
        if n_instances is not None and entry.get("per_instance"):
            pairs.append(("instances", len(entry["per_instance"]), n_instances))
        if k is not None and entry.get("k") is not None:
            pairs.append(("k (canonical samples)", entry.get("k"), k))
        for what, stored, here in pairs:
            if stored != here:
                shown = (lambda v: str(v)[:12]) if "hash" in what else repr
                found.append(f"{what}: stored {shown(stored)}, this run {shown(here)}")
        return found

    def check(self, nodeid: str, **run: Any) -> None:
        """Raise `BaselineUsageError` naming the test and what differs."""
        found = self.differences(nodeid, **run)
        if found:
            raise BaselineUsageError(
                f"{nodeid}: the stored baseline {self.path} does not pair with this run: "
                + "; ".join(found)
                + ". Compare against a report of the same tests, space, data, seed, mode and n "
                "(rerun the baseline's gate with --reliable-report), or use "
                "--reliable-baseline-model to run the baseline now."
            )

    def scores(self, nodeid: str) -> BaselineScores:
        """The stored entry as the baseline's scores (call `check` first)."""
        entry = self.entries[nodeid]
        rows = entry["per_instance"]
        scores = np.array([row["scores"] for row in rows], dtype=np.float64).T
        canonical = np.array([row["canonical"] for row in rows], dtype=np.float64).T
        return BaselineScores(
            model=str(entry.get("model") or self.model or "stored baseline"),
            source="report", scores=scores, canonical_scores=canonical,
        )


def _stored_problem(path: Path, test: str, field: str, problem: str) -> str:
    return (f"--reliable-baseline-report {path}: test {test}: {field} {problem}; give the report "
            "that --reliable-report wrote for the baseline's run, unedited.")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    shown = json.dumps(value, ensure_ascii=True, default=str)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _is_score(value: Any) -> bool:
    """A stored score: a JSON number (not true/false) in [0, 1]."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0.0 <= value <= 1.0)


def _check_per_instance(path: Path, nodeid: str, rows: Any) -> None:
    """``per_instance``: null (a run that did not complete: `differences` says so), or one
    object per instance whose ``scores`` and ``canonical`` are equally long lists of scores."""
    if rows is None:
        return
    if not isinstance(rows, list):
        raise BaselineUsageError(_stored_problem(
            path, nodeid, "per_instance", f"is {_json_kind(rows)}, not a list of instances"))
    lengths: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BaselineUsageError(_stored_problem(
                path, nodeid, f"per_instance[{i}]", f"is {_json_kind(row)}, not an object"))
        for name in ("scores", "canonical"):
            values = row.get(name)
            field = f"per_instance[{i}].{name}"
            if not isinstance(values, list) or not values:
                raise BaselineUsageError(_stored_problem(
                    path, nodeid, field, f"is {_json_kind(values)}, not a list of scores"))
            for j, value in enumerate(values):
                if not _is_score(value):
                    raise BaselineUsageError(_stored_problem(
                        path, nodeid, f"{field}[{j}]",
                        f"is {_json_kind(value)}, not a score (a number in [0, 1])"))
            if lengths.setdefault(name, len(values)) != len(values):
                raise BaselineUsageError(_stored_problem(
                    path, nodeid, field, f"has {len(values)} scores where per_instance[0].{name} "
                    f"has {lengths[name]}"))
        if "mean" in row and not _is_score(row["mean"]):
            raise BaselineUsageError(_stored_problem(
                path, nodeid, f"per_instance[{i}].mean",
                f"is {_json_kind(row['mean'])}, not a score (a number in [0, 1])"))


# -- the comparison --------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupDifference:
    key: str
    description: str
    difference: stats.ClusteredDifference

    def as_dict(self) -> dict[str, Any]:
        d = self.difference
        return {"description": self.description, "estimate": d.estimate, "low": d.low,
                "high": d.high, "cells": d.n_cells, "regressed": d.estimate < -_TOLERANCE}


@dataclass
class BaselineComparison:
    """Candidate - baseline over the same cells: JSON ``baseline`` (SPEC sections 8 and 9)."""

    model: str
    source: str
    mean: float
    candidate_mean: float
    difference: stats.ClusteredDifference
    mcnemar: stats.McNemarResult | None
    grouping: str
    groups: list[GroupDifference]
    """Most regressed first."""
    orp: stats.ORPResult | None
    example: dict[str, Any] | None
    calls_made: int = 0
    calls_cached: int = 0
    check: ThresholdCheck | None = None
    """The gate's ``max_regression`` check (None: the test has no max_regression)."""

    @property
    def passed(self) -> bool:
        return self.check is None or self.check.passed

    @property
    def regressed_groups(self) -> list[GroupDifference]:
        return [g for g in self.groups if g.difference.estimate < -_TOLERANCE]

    def as_dict(self) -> dict[str, Any]:
        d = self.difference
        return {
            "model": self.model,
            "source": self.source,
            "mean": self.mean,
            "difference": {"estimate": d.estimate, "low": d.low, "high": d.high,
                           "confidence": d.confidence, "method": d.method},
            "mcnemar_p": None if self.mcnemar is None else self.mcnemar.p_value,
            "mcnemar": None if self.mcnemar is None else {
                "candidate_only": self.mcnemar.a_only, "baseline_only": self.mcnemar.b_only,
                "n": self.mcnemar.n},
            "grouping": self.grouping,
            "groups": {g.key: g.as_dict() for g in self.groups},
            "regressed": [g.key for g in self.regressed_groups],
            "orp": None if self.orp is None else {
                "sigma_d": self.orp.sigma_d, "rho": self.orp.rho, "area": self.orp.area,
                "d_max": self.orp.d_max, "curve": [float(v) for v in self.orp.curve]},
            "max_regression": None if self.check is None else self.check.as_dict(),
            "example": self.example,
            "calls": {"made": self.calls_made, "cached": self.calls_cached},
        }

    def summary_line(self) -> str:
        d = self.difference
        p = "" if self.mcnemar is None else f", McNemar p = {self.mcnemar.p_value:.3g}"
        return (f"candidate - baseline ({self.model}) = {d.estimate:+.4f} "
                f"[{d.low:+.4f}, {d.high:+.4f}]{p}")

    def message_lines(self, prompt_chars: int = 1500) -> list[str]:
        """The failure message's baseline part: the numbers, the worst groups, one prompt."""
        # A failed max_regression is listed with the test's other failed thresholds.
        lines = [f"  baseline: {self.summary_line()}"]
        worst = self.regressed_groups[:SHOWN_GROUPS]
        if worst:
            lines.append(f"  largest regressions ({self.grouping}):")
            lines.extend(
                f"    {g.description}: {g.difference.estimate:+.4f} "
                f"[{g.difference.low:+.4f}, {g.difference.high:+.4f}] over {g.difference.n_cells} "
                "cells"
                for g in worst
            )
        if self.example is not None:
            prompt = self.example["prompt"]
            if len(prompt) > prompt_chars:
                prompt = prompt[:prompt_chars] + " [...]"
            record = self.example.get("record") or f"instance {self.example['instance']}"
            lines.append(f"  a prompt the baseline got right and the candidate wrong "
                         f"({record}, {self.example['where']}):")
            lines.extend("    " + line for line in prompt.splitlines())
            lines.append(f"  the candidate answered: {self.example['candidate_answer']!r}")
            if self.example.get("baseline_answer") is not None:
                lines.append(f"  the baseline answered: {self.example['baseline_answer']!r}")
        return lines


def _example(
    candidate: ScoreMatrix, baseline: BaselineScores, prefer: npt.NDArray[np.bool_] | None,
    records: Any = None,
) -> dict[str, Any] | None:
    """One prompt the baseline got right and the candidate wrong: the canonical pass first, then
    the most regressed group's cells, then any cell. ``instance`` is a 0-based index (as
    ``per_instance``); ``record`` and ``where`` name it as a person counts, from 1."""
    from pytest_reliable.plan.data import record_location
    from pytest_reliable.plan.prompt import render_messages

    def base_score(cell: CellResult) -> float:
        if cell.resampling >= 0:
            return float(baseline.scores[cell.resampling, cell.instance])
        return float(baseline.canonical_scores[0, cell.instance])

    indexed = list(enumerate(candidate.cells))
    canonical = [(j, c) for j, c in indexed if c.resampling < 0]
    first_canonical = {c.instance: (j, c) for j, c in reversed(canonical)}
    ordered = list(first_canonical.values())
    if prefer is not None:
        ordered += [(j, c) for j, c in indexed if c.resampling >= 0 and prefer[c.resampling,
                                                                               c.instance]]
    ordered += [(j, c) for j, c in indexed if c.resampling >= 0]
    for j, cell in ordered:
        if cell.status == "ok" and base_score(cell) > cell.score + _TOLERANCE:
            answer = None
            if baseline.cells is not None and j < len(baseline.cells):
                answer = baseline.cells[j].text
            return {
                "instance": cell.instance,
                "record": record_location(records, cell.instance),
                "where": "canonical variant" if cell.resampling < 0
                else f"resampling {cell.resampling + 1} of {candidate.n_resamplings}",
                "variant": cell.variant.describe(),
                "prompt": render_messages(cell.prompt.messages),
                "candidate_answer": cell.text,
                "candidate_score": cell.score,
                "baseline_answer": answer,
                "baseline_score": base_score(cell),
            }
    return None


def compare(
    candidate: ScoreMatrix,
    baseline: BaselineScores,
    ranges: RangeSummary,
    *,
    mode: str,
    confidence: float = 0.95,
    seed: int = 0,
    records: Any = None,
) -> BaselineComparison:
    """Candidate - baseline on the same cells. ``ranges``: the candidate's format range (its
    summary's ``formats``): the per-group differences are over the test's own grouping (its
    ``group_by=``). ``seed`` seeds the bootstraps (the test's seed). ``records``: the dataset,
    whose locations name the example's instance."""
    if baseline.scores.shape != candidate.scores.shape:
        raise BaselineUsageError(
            f"the baseline's scores have shape {baseline.scores.shape}, the candidate's "
            f"{candidate.scores.shape}: they did not run the same plan"
        )
    bootstrap_seed = seed % (2**32)
    # Fixed mode shares one variant across instances per resampling: a second source of error.
    difference = stats.paired_difference(
        candidate.scores, baseline.scores, confidence=confidence,
        resample_resamplings=(mode == "fixed"),
    )
    first_candidate = candidate.canonical_scores[0]
    first_baseline = baseline.canonical_scores[0]
    binary = bool(np.isin(first_candidate, (0.0, 1.0)).all()
                  and np.isin(first_baseline, (0.0, 1.0)).all())
    mcnemar = stats.mcnemar_exact(first_candidate, first_baseline) if binary else None
    grouping, masks = ranges.grouping, ranges.group_masks()
    differences = stats.paired_group_differences(
        candidate.scores, baseline.scores, {k: m for k, (_, m) in masks.items()},
        confidence=confidence, seed=bootstrap_seed,
    )
    groups = sorted(
        (GroupDifference(k, masks[k][0], d) for k, d in differences.items()),
        key=lambda g: (g.difference.estimate, g.key),
    )
    orp = None
    if candidate.n_resamplings >= 2:
        orp = stats.orp(candidate.resampling_scores(), baseline.scores.mean(axis=1))
    regressed = [g for g in groups if g.difference.estimate < -_TOLERANCE]
    prefer = masks[regressed[0].key][1] if regressed else None
    return BaselineComparison(
        model=baseline.model,
        source=baseline.source,
        mean=float(baseline.scores.mean()),
        candidate_mean=float(candidate.scores.mean()),
        difference=difference,
        mcnemar=mcnemar,
        grouping=grouping,
        groups=groups,
        orp=orp,
        example=_example(candidate, baseline, prefer, records),
        calls_made=baseline.calls_made,
        calls_cached=baseline.calls_cached,
    )


# -- which baseline a test compares against --------------------------------------------------
@dataclass(frozen=True)
class BaselineChoice:
    """What a comparing test pairs with: a model (``name`` to build, or a user ``obj``) or the
    stored report."""

    kind: str
    """"name" | "fixture" | "report"."""
    name: str | None = None
    obj: Any = None


def choose_baseline(
    marker_baseline: str | None, fixture_value: Any, option_model: str | None,
    stored: StoredBaseline | None, nodeid: str,
) -> BaselineChoice:
    """SPEC section 9's order: the marker's ``baseline=``, the ``reliable_baseline`` fixture,
    ``--reliable-baseline-model``, ``--reliable-baseline-report``."""
    if marker_baseline is not None:
        return BaselineChoice("name", name=marker_baseline)
    if fixture_value is not None:
        return BaselineChoice("fixture", obj=fixture_value)
    if option_model is not None:
        return BaselineChoice("name", name=option_model)
    if stored is not None:
        return BaselineChoice("report")
    raise BaselineUsageError(
        f"{nodeid}: max_regression needs a baseline, and none is configured: give "
        "baseline='NAME' (or 'local') in the marker, a reliable_baseline fixture, "
        "--reliable-baseline-model NAME or --reliable-baseline-report PATH.json"
    )


def check_model_name(name: str, base_url: str | None, api_key_env: str) -> None:
    """Fail early (before any call) on a baseline model that cannot be built here."""
    from pytest_reliable.models.base import ModelSetupError

    try:
        if name == "local":
            from pytest_reliable.models.local import find_gguf

            find_gguf()
        else:
            from pytest_reliable.models.openai_compat import OpenAICompatibleModel

            OpenAICompatibleModel(name, base_url, api_key_env=api_key_env)
    except ModelSetupError as error:
        raise BaselineUsageError(f"baseline model {name!r}: {error}") from None
