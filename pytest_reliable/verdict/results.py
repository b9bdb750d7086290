"""What one reliable test produced, and its SPEC section 8 JSON entry.

`ReliableReport` is what ``reliable.evaluate(...)`` returns (a CheckList test's is
`pytest_reliable.checklist.report.ChecklistReport`). Its ``entry()`` dict (shaped by
`schema.entries`) is the only thing the writers in `report/` (terminal, JSON, JUnit, Markdown,
HTML) and pytest-xdist's controller ever see: every number a report shows is computed here or
before, never by a writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from pytest_reliable.calls.pricing import Spend
from pytest_reliable.evaluate.circular import circular_entry
from pytest_reliable.evaluate.evaluation import ScoreMatrix
from pytest_reliable.evaluate.thompson import exploration_note
from pytest_reliable.plan.data import Records, record_location
from pytest_reliable.plan.prompt import render_messages
from pytest_reliable.schema.entries import (
    UNKNOWN_CANONICAL,
    CallsEntry,
    CanonicalEntry,
    CircularEntry,
    ExplorationEntry,
    JudgeEntry,
    PairwiseEntry,
    RangeEntry,
    ReliableEntry,
    SummaryFields,
    json_safe,
    unknown_range,
)
from pytest_reliable.schema.text import LINE_LIMIT, cut_text
from pytest_reliable.space import Space
from pytest_reliable.verdict.baseline import BaselineComparison, per_instance
from pytest_reliable.verdict.gate import ThresholdCheck
from pytest_reliable.verdict.sides import SideResults
from pytest_reliable.verdict.summary import Summary

PROMPT_SHOWN_CHARS = 1500
RANGE_THRESHOLDS = ("min_worst", "max_spread", "min_median")
STATISTICS = (
    "mean", "std", "canonical", "formats", "orders", "dimensions", "pass_at_1", "pass_at_k",
    "pass_hat_k", "n_star", "n_star_reliable", "achievable_eps", "n_star_curve",
    "resampling_scores", "per_instance", "baseline", "maj_at_k", "circular",
)
"""Entry fields that are nulled when the test's calls did not all complete (verdict error);
``judge`` and ``pairwise`` keep what names them (the judge, its counts, the baseline model) with
null statistics: an unreadable judge's error reads its counts there."""


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _worst_set(key: str, candidates: list[str], confidence: float) -> str:
    """How sure the "worst" is: the other groups that could be the worst at ``confidence``."""
    others = [c for c in candidates if c != key]
    if not others:
        return f"at {confidence:.0%} no other group could be the worst: {key} is"
    shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    return (f"at {confidence:.0%} the worst could also be {shown} "
            f"({len(others) + 1} candidates: {key} is the lowest estimate, not a proven worst)")


def identical_samples(matrix: ScoreMatrix) -> bool:
    """Whether every instance's samples in the canonical pass are one answer (all answered)."""
    answers: dict[int, set[str]] = {}
    for cell in matrix.canonical_cells():
        if cell.text is None:
            return False
        answers.setdefault(cell.instance, set()).add(cell.text)
    return bool(answers) and all(len(texts) == 1 for texts in answers.values())


def run_scoped_note(model: str, why: str) -> str:
    return (f"model {model}: {why}: its answers were reused within this run only, never stored "
            "(model_cache: run); give it text_model(fn, id=..., version=...) to cache them")


@dataclass(frozen=True)
class ReliableReport:
    """The result of one ``reliable.evaluate``: summary numbers, thresholds and the raw matrix,
    with the side evaluations' frozen results (``sides``); made once, never patched."""

    nodeid: str
    model: str
    space: Space
    mode: str
    eps: float
    delta: float
    summary: Summary
    matrix: ScoreMatrix
    thresholds: list[ThresholdCheck]
    n_star_source: str | None
    pilot_n: int | None
    temperature: float
    calls_made: int
    calls_cached: int
    problems: list[str] = field(default_factory=list)
    prompt_tokens: dict[str, int] = field(default_factory=dict)  # prompt_tokens_sent/_evaluated
    decide: str | None = None
    """The policy the thresholds were decided under (SPEC section 11)."""
    n_star_method: str | None = None
    """How n* was computed: "bootstrap" or "paper" (SPEC section 7); None without n*."""
    n_star_paper: int | None = None
    """The paper's n* from the same pilot, beside a ``bootstrap`` n*."""
    stopped_early: bool = False
    stop_reason: str | None = None
    """Why the resamplings ended where they did, under ``stop_early`` or
    ``search="adaptive"`` (None otherwise)."""
    search: str = "uniform"
    """How the resamplings were chosen (SPEC section 14)."""
    exploration: ExplorationEntry | None = None
    """``search="thompson"``'s best and worst formats (never a verdict)."""
    spend: Spend = field(default_factory=Spend)
    """What the test's calls cost (SPEC section 13): the JSON entry's ``cost``."""
    dataset_hash: str | None = None
    baseline: BaselineComparison | None = None
    """Candidate - baseline (SPEC section 9) when the test compares against a baseline."""
    sides: SideResults = field(default_factory=SideResults)
    """The side evaluations shown beside the summary: circular, the judge's noise, a pairwise
    judge's comparison (SPEC section 12); maj@k is the summary's."""
    run_scoped: str | None = None
    """Why the model's answers were reused within this run only (its identity could not be
    established); None: they are stored as any model's."""
    sampling_arguments: frozenset[str] | None = None
    """What a callable model takes of temperature, max_tokens, seed, ...; None: not a callable."""
    dataset: Records | None = None
    """The evaluated records: messages name an instance by its record (`record_location`)."""
    run_notes: list[str] = field(default_factory=list)
    """Notes the run adds (e.g. a comparison left out under ``--reliable-save-baseline``)."""

    @cached_property
    def fields(self) -> SummaryFields:
        """The summary's report fields (SPEC section 8), computed once."""
        return self.summary.fields()

    @property
    def judge(self) -> JudgeEntry | None:
        """The judge's votes and noise (SPEC section 12) when a judge graded the answers."""
        return None if self.sides.judge is None else self.sides.judge.entry

    @property
    def pairwise(self) -> PairwiseEntry | None:
        """A pairwise judge's comparison with the baseline (SPEC section 12)."""
        return None if self.sides.pairwise is None else self.sides.pairwise.entry

    @property
    def circular(self) -> CircularEntry | None:
        """With ``circular=True``: the share of instances right under every cyclic shift."""
        found = self.sides.circular
        return None if found is None else circular_entry(found, self.summary.confidence)

    # report.mean, report.canonical["score"], report.formats["min"], ...: the JSON entry's
    # statistics (SPEC section 8), typed so that a misspelt name is a type error.
    @property
    def n_resamplings(self) -> int:
        return self.fields["n_resamplings"]

    @property
    def mean(self) -> float:
        return self.fields["mean"]

    @property
    def std(self) -> float:
        return self.fields["std"]

    @property
    def canonical(self) -> CanonicalEntry:
        return self.fields["canonical"]

    @property
    def formats(self) -> RangeEntry:
        return self.fields["formats"]

    @property
    def orders(self) -> RangeEntry:
        return self.fields["orders"]

    @property
    def dimensions(self) -> dict[str, dict[str, float]]:
        return self.fields["dimensions"]

    @property
    def pass_at_1(self) -> float:
        return self.fields["pass_at_1"]

    @property
    def pass_at_k(self) -> float:
        return self.fields["pass_at_k"]

    @property
    def pass_hat_k(self) -> float:
        return self.fields["pass_hat_k"]

    @property
    def maj_at_k(self) -> float | None:
        """Majority vote of the canonical pass's k samples (ties wrong); SPEC section 12."""
        return self.summary.maj_at_k

    @property
    def k(self) -> int:
        return self.fields["k"]

    @property
    def pass_criterion(self) -> str:
        return self.fields["pass_criterion"]

    @property
    def n_star(self) -> int | None:
        return self.fields["n_star"]

    @property
    def n_star_reliable(self) -> bool | None:
        return self.fields["n_star_reliable"]

    @property
    def achievable_eps(self) -> float | None:
        return self.fields["achievable_eps"]

    @property
    def unparsed(self) -> int:
        return self.fields["unparsed"]

    @property
    def calls(self) -> CallsEntry:
        """``{"made", "cached"}`` (and prompt token counts when known), as in the JSON."""
        calls: CallsEntry = {"made": self.calls_made, "cached": self.calls_cached}
        calls.update(cast(CallsEntry, self.prompt_tokens))
        return calls

    @property
    def passed(self) -> bool:
        return (not self.problems and all(check.passed for check in self.thresholds)
                and (self.baseline is None or self.baseline.passed))

    @property
    def failed_thresholds(self) -> list[ThresholdCheck]:
        return [check for check in self.thresholds if not check.passed]

    def worst_variant(self) -> dict[str, Any] | None:
        worst = self.summary.formats.worst
        if worst is None or worst.example is None:
            return None
        example = worst.example
        return {
            "key": worst.key,
            "grouping": self.summary.formats.grouping,
            "score": worst.score,
            "low": worst.low,
            "high": worst.high,
            "description": worst.description,
            "prompt": render_messages(example.prompt.messages),
            "answer": example.text,
            "answer_score": example.score,
            "answer_parsed": example.parsed,
            "instance": example.instance,
            "record": record_location(self.dataset, example.instance),
            "resampling": example.resampling if example.resampling >= 0 else None,
            "candidates": list(self.summary.formats.worst_candidates),
        }

    def answers(self) -> tuple[int, int]:
        """(unparsed, all) answers of the resamplings and the canonical pass."""
        matrix = self.matrix
        return self.summary.unparsed, int(matrix.scores.size + matrix.canonical_scores.size)

    def _unparsed_lines(self) -> list[str]:
        """How many answers could not be read, with one of them: when every answer is unparsed,
        the thresholds' zeros say nothing about the model, only about the answer format."""
        unparsed, total = self.answers()
        if not unparsed:
            return []
        sample = next((c.text for c in self.matrix.cells if c.status == "ok" and not c.parsed
                       and c.text is not None), None)
        shown = "" if sample is None else (
            f"; the model answered e.g. {cut_text(sample, LINE_LIMIT // 2)!r}")
        if unparsed == total:
            return [(f"  {unparsed} of {total} answers could not be read: check the task's "
                     f"answer format (what the grader reads) against what the model "
                     f"answers{shown}; an unread answer scores 0, so every threshold below is "
                     "decided on zeros")]
        return [f"  {unparsed} of {total} answers could not be read (scored as wrong){shown}"]

    def failure_message(self) -> str:
        lines = [f"reliable gate failed for {self.nodeid} (model {self.model})"]
        for problem in _unique(self.problems)[:5]:
            lines.append(f"  not evaluated: {problem}")
        if self.problems:
            lines.append("  no statistics: a missing answer is never scored as a wrong one")
            return "\n".join(lines)
        grouping = self.summary.formats.grouping
        if self.failed_thresholds:
            lines.extend(self._unparsed_lines())
        for check in self.failed_thresholds:
            where = f" (grouping: {grouping})" if check.name in RANGE_THRESHOLDS else ""
            lines.append(f"  {check.describe()}{where}")
        if self.failed_thresholds and self.decide == "estimate":
            lines.append("  decided on point estimates (decide='estimate'): no error control")
        worst = self.worst_variant()
        if worst is not None and self.failed_thresholds:
            unparsed, total = self.answers()
            if unparsed < total:  # every group scored 0 otherwise: no group is the worst
                lines.extend(self._worst_group_lines(worst))
            lines.extend(_example_lines(worst, self.summary.n_resamplings))
        if self.baseline is not None:
            lines.extend(self.baseline.message_lines(PROMPT_SHOWN_CHARS))
        return "\n".join(lines)

    def _worst_group_lines(self, worst: dict[str, Any]) -> list[str]:
        interval = ""
        if worst.get("low") is not None and worst.get("high") is not None:
            interval = f" [{worst['low']:.3f}, {worst['high']:.3f}]"
        lines = [(
            f"  worst {worst['grouping']} group: {worst['description']} "
            f"scored {worst['score']:.3f}{interval} (paired within instance; noise floor "
            f"of the range {_num(self.summary.formats.noise_floor)})"
        )]
        # The candidates are the range's keys ("wrapper={}."); worst_variant's key is the
        # group's own ("{}.").
        ranges = self.summary.formats
        range_key = next((key for key, group in ranges.groups.items()
                          if group is ranges.worst), worst["key"])
        lines.append(f"  {_worst_set(range_key, worst['candidates'], self.summary.confidence)}")
        return lines

    def notes(self) -> list[str]:
        """Things a reader of the numbers must know (shown under the summary table)."""
        notes = list(self.run_notes)
        if self.exploration is not None:
            notes.append(exploration_note(self.exploration))
        if self.summary.k > 1 and self.temperature == 0.0:
            notes.append(
                f"k={self.summary.k} at temperature 0: the k samples are the same answer, so "
                "pass^k = pass@k = pass@1; set temperature= to the production temperature"
            )
        elif self.summary.k > 1 and self.sampling_arguments is not None and \
                identical_samples(self.matrix):
            takes = ("it takes no temperature= (give it a temperature parameter or **kwargs)"
                     if "temperature" not in self.sampling_arguments else
                     "it is given temperature=, and may not pass it on")
            notes.append(
                f"k={self.summary.k} at temperature {self.temperature:g}: every instance's "
                f"{self.summary.k} samples are the same answer, so the model probably ignores "
                f"the temperature ({takes}); pass^k = pass@k = pass@1 then say nothing about "
                "sampling")
        if self.decide == "estimate" and self.thresholds:
            notes.append("decide='estimate': thresholds compare point estimates, no error control")
        if self.run_scoped is not None:
            notes.append(run_scoped_note(self.model, self.run_scoped))
        if self.judge is not None:
            judge = self.judge
            # An errored test shows no statistics (SPEC section 8), the judge's noise included.
            noise = "" if self.problems else (
                f"agreement {_num(judge['agreement'])}, judge variance share "
                f"{_num(judge['judge_variance_share'])}, ")
            notes.append(
                f"graded by judge {judge['id']}: {judge['votes']} votes per answer, {noise}"
                f"{judge['unparsed_votes']} unparsed votes, judge calls "
                f"{judge['calls']['made']} made / {judge['calls']['cached']} cached"
            )
        return notes

    def entry(self, verdict: str) -> ReliableEntry:
        data: dict[str, Any] = {
            "nodeid": self.nodeid,
            "kind": "reliable",
            "verdict": verdict,
            "model": self.model,
            "model_cache": "store" if self.run_scoped is None else "run",
            "space": self.space.name,
            "space_hash": self.space.hash,
            "mode": self.mode,
            **self.fields,
            "temperature": self.temperature,
            "eps": self.eps,
            "delta": self.delta,
            "n_star_source": self.n_star_source,
            "n_star_method": self.n_star_method,
            "n_star_paper": self.n_star_paper,
            "pilot_n": self.pilot_n,
            "n_star_curve": self.summary.n_star_curve,
            "search": self.search,
            "exploration": self.exploration,
            "stopped_early": self.stopped_early,
            "stop_reason": self.stop_reason,
            "calls": {"made": self.calls_made, "cached": self.calls_cached, **self.prompt_tokens},
            "cost": self.spend.entry(),
            "decide": self.decide,
            "confidence": self.summary.confidence,
            "thresholds": [check.as_dict() for check in self.thresholds],
            "worst_variant": self.worst_variant(),
            "notes": self.notes(),
            "message": None if self.passed else self.failure_message(),
            "dataset_hash": self.dataset_hash,
            "resampling_scores": [float(s) for s in self.matrix.resampling_scores()],
            "per_instance": per_instance(self.matrix),
            "baseline": None if self.baseline is None else self.baseline.as_dict(),
            "judge": self.judge,
            "pairwise": self.pairwise,
            "maj_at_k": self.summary.maj_at_k,
            "circular": self.circular,
            "outcome": None,  # pytest's, set by the plugin when the test's report is made
            "xfail_reason": None,
        }
        if verdict == "error":
            # Not every call completed: no statistics (a missing answer is not a wrong one).
            for name in STATISTICS:
                data[name] = None
            # Every field present (SPEC section 8): canonical.score reads null, not missing.
            data["canonical"] = dict(UNKNOWN_CANONICAL)
            data["formats"] = unknown_range(self.summary.formats.grouping)
            data["orders"] = unknown_range(self.summary.orders.grouping)
            data["thresholds"] = [
                {**check.as_dict(), "observed": None, "bound": None, "passed": False}
                for check in self.thresholds
            ]
            data["worst_variant"] = None
            if self.judge is not None:
                data["judge"] = {**self.judge, "agreement": None, "judge_variance_share": None}
            if self.pairwise is not None:
                data["pairwise"] = {
                    **self.pairwise, "cells": None, "win": None, "tie": None, "loss": None,
                    "win_rate": {"estimate": None, "low": None, "high": None},
                    "position_bias": None}
        return cast(ReliableEntry, json_safe(data))


def _example_lines(worst: dict[str, Any], n_resamplings: int) -> list[str]:
    """The worst group's example (`summary.Group.example`): a prompt the model got wrong when
    the group has one, named by its record and resampling as a person counts (from 1)."""
    resampling = worst.get("resampling")
    where = worst["record"] + (" (the canonical pass)" if resampling is None
                               else f" (resampling {resampling + 1} of {n_resamplings})")
    score = worst.get("answer_score")
    if worst.get("answer_parsed") is False:
        verdict, lines = "unread (unparsed): scored 0", []
    elif isinstance(score, (int, float)) and score >= 1.0:
        verdict = "right"
        lines = [f"  the model got every prompt of this group right; one of them: {where}"]
    else:
        verdict = "wrong" if not score else f"partly right: scored {score:.3f}"
        lines = [f"  an instance the model got wrong in this group: {where}"]
    if not lines:
        lines = [f"  an instance whose answer could not be read: {where}"]
    prompt = cut_text(worst["prompt"], PROMPT_SHOWN_CHARS)
    lines.append("  its rendered prompt for one instance:")
    lines.extend("    " + line for line in prompt.splitlines())
    lines.append(f"  the model answered: {cut_text(str(worst['answer']), LINE_LIMIT)!r} "
                 f"({verdict})")
    return lines


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
